//! Support for the security tests of the `openagents` binary: a temporary operator
//! configuration and registry (the echo and ask runners), token files with a chosen mode, a
//! served runtime read from its readiness line, and commands bounded in time.
//!
//! Every wait is for an observable event (a readiness line, an exit, a line of output) and is
//! bounded; nothing sleeps to wait for readiness.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The longest any command or wait may take.
pub const BOUND: Duration = Duration::from_secs(30);

/// The `openagents` binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_openagents")
}

/// A runner binary built next to `openagents`.
pub fn runner(name: &str) -> PathBuf {
    Path::new(bin()).with_file_name(format!("openagents-runner-{name}"))
}

/// A folder with an operator configuration that enables the server and a registry with the
/// `echo` and `ask` runners.
pub struct Setup {
    /// The folder (removed on drop).
    pub dir: PathBuf,
}

impl Setup {
    /// A fresh setup named `name`; `registry_extra` is appended to the registry.
    pub fn new(name: &str, registry_extra: &str) -> Setup {
        let dir = std::env::temp_dir().join(format!("openagents-security-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the test folder");
        std::fs::write(dir.join("config.toml"), "[capabilities.server]\nenabled = true\n").expect("config");
        let registry = format!(
            "[runners.echo]\ncommand = \"{}\"\n\n[runners.ask]\ncommand = \"{}\"\n{registry_extra}",
            runner("echo").display(),
            runner("ask").display()
        );
        std::fs::write(dir.join("runners.toml"), registry).expect("registry");
        Setup { dir }
    }

    /// `openagents ARGS` in this setup (its configuration, registry and runtime folder).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.args(args)
            .current_dir(&self.dir)
            .env("OPENAGENTS_CONFIG", self.dir.join("config.toml"))
            .env("OPENAGENTS_RUNNERS", self.dir.join("runners.toml"))
            .env("XDG_RUNTIME_DIR", &self.dir)
            .stdin(Stdio::null());
        c
    }

    /// Writes `contents` to `name` in the folder with permission bits `mode`.
    pub fn file(&self, name: &str, contents: &str, mode: u32) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, contents).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }

    /// Starts `openagents serve --http --runner echo EXTRA`: the running server once its
    /// readiness line is out, or its exit code and stderr when it ends first.
    pub fn serve(&self, extra: &[&str]) -> Result<Server, (Option<i32>, String)> {
        self.serve_runner("echo", extra)
    }

    /// [`Setup::serve`] with `runner` as the runtime's runner.
    pub fn serve_runner(&self, runner: &str, extra: &[&str]) -> Result<Server, (Option<i32>, String)> {
        let mut args = vec!["serve", "--http", "--runner", runner];
        args.extend_from_slice(extra);
        let mut child = self.command(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("openagents starts");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let line = within("the readiness line", move || {
            let mut line = String::new();
            let _ = stdout.read_line(&mut line);
            (line, stdout)
        });
        let (line, stdout) = match line {
            Some(l) => l,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no readiness line and no exit within {BOUND:?}");
            }
        };
        if line.trim().is_empty() {
            let status = wait_bounded(&mut child);
            let mut err = String::new();
            let _ = child.stderr.take().expect("stderr").read_to_string(&mut err);
            return Err((status, err));
        }
        let ready: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("readiness line {line:?}: {e}"));
        let url = ready["url"].as_str().expect("a url").to_owned();
        let token_file = ready["token_file"].as_str().map(PathBuf::from);
        Ok(Server { child, url, token_file, _stdout: stdout })
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A running `openagents serve --http`, killed on drop.
pub struct Server {
    /// The process.
    pub child: Child,
    /// The URL its readiness line gave.
    pub url: String,
    /// The token file it generated, if it did.
    pub token_file: Option<PathBuf>,
    _stdout: BufReader<ChildStdout>,
}

impl Server {
    /// Stops the server and returns its stderr.
    pub fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        err
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `f` on its own thread; its value, or `None` when it takes longer than [`BOUND`] (the
/// thread is left to end with the process it waits on).
pub fn within<T: Send + 'static>(_what: &str, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(BOUND).ok()
}

/// Waits for `child` to exit, killing it after [`BOUND`]; its exit code.
pub fn wait_bounded(child: &mut Child) -> Option<i32> {
    let deadline = Instant::now() + BOUND;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the command did not exit within {BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `command` to its end with `input` on stdin, killing it after [`BOUND`].
pub fn run(mut command: Command, input: &[u8]) -> Output {
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("the command starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        b
    });
    let err_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    let _ = wait_bounded(&mut child);
    let status = child.wait().expect("the exit status");
    Output { status, stdout: out_t.join().unwrap_or_default(), stderr: err_t.join().unwrap_or_default() }
}
