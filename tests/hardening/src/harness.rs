//! Starts the real `openagents` binary (`serve --http` or `serve --stdio`) on loopback with a
//! temporary operator configuration: `[capabilities.server] enabled = true` through
//! `OPENAGENTS_CONFIG`, a runner registry through `OPENAGENTS_RUNNERS` (the echo runner plus
//! hostile runners written as small bash scripts), and a credentials file with an observer, a
//! controller, an admin and a `blind` credential (`status` only, no events). Also reads what a
//! process holds from `/proc`: descriptors, memory, threads, and whether a process group is gone.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

/// The folder the running executable was built into (`target/debug` for tests, `target/release`
/// for the soak driver): the `openagents` binaries under test are its siblings.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the current executable");
    let dir = exe.parent().expect("a parent folder");
    if dir.ends_with("deps") { dir.parent().expect("the profile folder").to_owned() } else { dir.to_owned() }
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the workspace root")
}

fn newest_source(dir: &Path, newest: &mut SystemTime) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            newest_source(&p, newest);
        } else if let Ok(m) = e.metadata().and_then(|m| m.modified()) {
            *newest = (*newest).max(m);
        }
    }
}

/// The path of binary `name` (`openagents`, `openagents-runner-echo`), built first when it is
/// missing or older than the sources it comes from. `make test` (`cargo test --workspace`) has
/// always just built them; `cargo test -p openagents-hardening` alone may not have.
pub fn bin(name: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = bin_dir();
        let root = workspace_root();
        let mut newest = SystemTime::UNIX_EPOCH;
        for src in ["crates/protocol", "crates/runner/src", "crates/server/src", "crates/sdk/src", "crates/cli/src", "schema", "codegen/src"] {
            newest_source(&root.join(src), &mut newest);
        }
        let stale = ["openagents", "openagents-runner-echo"].iter().any(|b| {
            std::fs::metadata(dir.join(b)).and_then(|m| m.modified()).map_or(true, |built| built < newest)
        });
        if stale {
            let release = dir.ends_with("release");
            let mut cmd = Command::new(env!("CARGO"));
            cmd.current_dir(&root).args(["build", "--quiet", "-p", "openagents-cli", "-p", "openagents-runner"]);
            if release {
                cmd.arg("--release");
            }
            let status = cmd.status().expect("cargo runs");
            assert!(status.success(), "building the binaries under test failed: `cargo build -p openagents-cli -p openagents-runner`");
        }
    });
    let p = bin_dir().join(name);
    assert!(p.is_file(), "{} is missing: run `cargo build -p openagents-cli -p openagents-runner`", p.display());
    p
}

/// A fresh random token: 32 bytes from the system, as 64 hex characters.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).expect("/dev/urandom");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The credentials the setup's servers accept.
#[derive(Debug, Clone)]
pub struct Tokens {
    /// `status`, `subscribe`, `rpc.discover`, events.
    pub observer: String,
    /// An observer that may also `submit`, `interrupt`, `release` and answer approvals.
    pub controller: String,
    /// A controller that may also `shutdown`.
    pub admin: String,
    /// `status` only, no events.
    pub blind: String,
}

/// The hostile and helpful runners every setup installs, by id: `(id, bash body, timeout_s)`.
/// `$PIDS` is the file each appends its pid to (a runner is its own process group leader, so
/// its pid is also its group's id).
const SCRIPT_RUNNERS: &[(&str, &str, u64)] = &[
    // Writes one text event, then sleeps in a child: for `kill -9` from outside.
    ("sleeper", r#"read -r _; echo '{"type":"text","text":"started"}'; sleep 30 & wait"#, 60),
    // Never answers: the registry's 1 s time limit ends it.
    ("hang", "read -r _; sleep 30", 1),
    // Floods stdout with valid text events until the host stops it at MAX_OUTPUT.
    ("flood", r#"read -r _; yes '{"type":"text","text":"flood flood flood flood flood flood flood flood flood flood"}' | head -c 50000000"#, 30),
    // Ten 90 KiB text events and a result: big but within every bound.
    ("bigtext", r#"read -r _; cat "$PAYLOAD""#, 30),
    // Exits before reading its turn.
    ("early", "exit 3", 30),
    // Writes a line that is not JSON.
    ("notjson", "read -r _; echo 'hello there'", 30),
    // Takes a second, then completes.
    ("slow", r#"read -r _; echo '{"type":"text","text":"working"}'; sleep 1; echo '{"type":"completed","result":"slow done"}'"#, 30),
];

/// A scratch folder with the operator configuration, registry, credentials and runners.
pub struct Setup {
    /// The folder (removed on drop).
    pub dir: PathBuf,
    /// The credentials' tokens.
    pub tokens: Tokens,
}

impl Setup {
    /// A new setup under the system's temporary folder, named after `name` and this process.
    pub fn new(name: &str) -> Setup {
        let dir = std::env::temp_dir().join(format!("oa-hardening-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("work")).expect("scratch folder");
        std::fs::create_dir_all(dir.join("pids")).expect("pids folder");
        // The server serves exactly the runners it is told to: echo (the default) and every script.
        let served: Vec<String> = std::iter::once("echo").chain(SCRIPT_RUNNERS.iter().map(|r| r.0)).map(|id| format!("\"{id}\"")).collect();
        std::fs::write(dir.join("config.toml"), format!("[capabilities.server]\nenabled = true\nrunners = [{}]\n", served.join(", "))).expect("config");
        let tokens = Tokens { observer: random_token(), controller: random_token(), admin: random_token(), blind: random_token() };
        std::fs::write(
            dir.join("credentials.toml"),
            format!(
                "[credentials.observer]\ntoken = \"{}\"\nrole = \"observer\"\n\n[credentials.controller]\ntoken = \"{}\"\nrole = \"controller\"\n\n[credentials.admin]\ntoken = \"{}\"\nrole = \"admin\"\n\n[credentials.blind]\ntoken = \"{}\"\nmethods = [\"status\"]\nevents = false\n",
                tokens.observer, tokens.controller, tokens.admin, tokens.blind
            ),
        )
        .expect("credentials");
        // The big-but-legal output: ten text events of 90 KiB and a result, under MAX_OUTPUT.
        let mut payload = String::new();
        for _ in 0..10 {
            payload.push_str(&format!("{{\"type\":\"text\",\"text\":\"{}\"}}\n", "b".repeat(90 * 1024)));
        }
        payload.push_str("{\"type\":\"completed\",\"result\":\"big done\"}\n");
        std::fs::write(dir.join("payload.jsonl"), payload).expect("payload");
        let mut registry = format!("[runners.echo]\ncommand = \"{}\"\n", bin("openagents-runner-echo").display());
        for (id, body, timeout) in SCRIPT_RUNNERS {
            let script = dir.join(format!("{id}.sh"));
            let pids = dir.join("pids").join(id);
            // Each start records its pid, and its process group (the group the host made for it,
            // led by the runner's supervisor) beside it.
            std::fs::write(&script, format!("PIDS='{}'\nPAYLOAD='{}'\necho $$ >> \"$PIDS\"\ncut -d' ' -f5 /proc/$$/stat >> \"$PIDS.group\"\n{body}\n", pids.display(), dir.join("payload.jsonl").display())).expect("script");
            registry.push_str(&format!("\n[runners.{id}]\ncommand = \"/bin/bash\"\nargs = [\"{}\"]\ntimeout_s = {timeout}\n", script.display()));
        }
        std::fs::write(dir.join("runners.toml"), registry).expect("registry");
        Setup { dir, tokens }
    }

    /// The working folder turns run in.
    pub fn work(&self) -> PathBuf {
        self.dir.join("work")
    }

    /// The pids runner `id` has recorded so far.
    pub fn pids(&self, id: &str) -> Vec<u32> {
        std::fs::read_to_string(self.dir.join("pids").join(id)).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
    }

    /// The process groups runner `id` ran in so far, one a start, in the order of [`Setup::pids`]
    /// (a runner's group is its supervisor's, not its own pid).
    pub fn groups(&self, id: &str) -> Vec<u32> {
        std::fs::read_to_string(self.dir.join("pids").join(format!("{id}.group"))).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin("openagents"));
        c.args(args)
            .current_dir(self.work())
            .env("OPENAGENTS_CONFIG", self.dir.join("config.toml"))
            .env("OPENAGENTS_RUNNERS", self.dir.join("runners.toml"))
            .env("XDG_RUNTIME_DIR", &self.dir)
            .env("XDG_STATE_HOME", &self.dir)
            .env_remove("OPENAGENTS_STORE")
            .env_remove("XDG_CONFIG_HOME");
        c
    }

    /// Starts `openagents serve --http` with the credentials file and waits for its readiness
    /// line.
    pub fn http(&self) -> HttpServer {
        self.http_with(&[])
    }

    /// [`Setup::http`] with more arguments (`--store memory`, say).
    pub fn http_with(&self, extra: &[&str]) -> HttpServer {
        let creds = self.dir.join("credentials.toml").display().to_string();
        let work = self.work().display().to_string();
        let stderr = std::fs::File::create(self.dir.join("http.stderr")).expect("stderr file");
        let mut args = vec!["serve", "--http", "--credentials", &creds, "--cwd", &work];
        args.extend_from_slice(extra);
        let mut child = self
            .command(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("openagents serve --http starts");
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        out.read_line(&mut line).expect("the readiness line");
        let ready: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!("readiness line {line:?}: {e}; stderr: {}", std::fs::read_to_string(self.dir.join("http.stderr")).unwrap_or_default())
        });
        let url = ready["url"].as_str().expect("url").to_owned();
        let addr: SocketAddr = url.trim_start_matches("http://").trim_end_matches('/').parse().expect("a socket address");
        HttpServer { pid: child.id(), child, addr, _stdout: out, tokens: self.tokens.clone() }
    }

    /// Starts `openagents serve --stdio` with a reader thread splitting its output into
    /// responses and event notifications.
    pub fn stdio(&self) -> StdioServer {
        let work = self.work().display().to_string();
        let stderr = std::fs::File::create(self.dir.join("stdio.stderr")).expect("stderr file");
        let mut child = self
            .command(&["serve", "--stdio", "--cwd", &work])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("openagents serve --stdio starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::with_capacity(1 << 20, stdout);
            loop {
                let mut line = Vec::new();
                match r.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let v: Value = serde_json::from_slice(&line).unwrap_or_else(|e| panic!("stdio wrote a line that is not JSON ({e}): {}", String::from_utf8_lossy(&line)));
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        StdioServer { pid: child.id(), child, stdin: Some(stdin), rx, events: Vec::new() }
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A running `openagents serve --http`; killed on drop.
pub struct HttpServer {
    child: Child,
    /// The server's pid.
    pub pid: u32,
    /// Where it listens.
    pub addr: SocketAddr,
    _stdout: BufReader<std::process::ChildStdout>,
    tokens: Tokens,
}

impl HttpServer {
    /// `status` with the admin token; panics unless it succeeds.
    pub fn status(&self) -> Value {
        let r = crate::client::call(self.addr, Some(&self.tokens.admin), "status", Value::Null);
        assert_eq!(r.status, 200, "status failed: {}", r.text());
        let v = r.json();
        assert!(v.get("result").is_some(), "status failed: {v}");
        v["result"].clone()
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running `openagents serve --stdio`; killed on drop.
pub struct StdioServer {
    child: Child,
    /// The server's pid.
    pub pid: u32,
    stdin: Option<ChildStdin>,
    rx: mpsc::Receiver<Value>,
    /// Event notifications seen so far (`{"event": …}` lines), in order.
    pub events: Vec<Value>,
}

impl StdioServer {
    /// Writes `bytes` and a newline.
    pub fn send(&mut self, bytes: &[u8]) {
        let w = self.stdin.as_mut().expect("stdin is open");
        w.write_all(bytes).and_then(|()| w.write_all(b"\n")).and_then(|()| w.flush()).expect("writing to the stdio server");
    }

    /// The next response line (event notifications on the way are kept in `events`).
    pub fn response(&mut self, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) if v.get("event").is_some() && v.get("id").is_none() => self.events.push(v),
                Ok(v) => return v,
                Err(e) => panic!("no response from the stdio server within {timeout:?}: {e}"),
            }
        }
    }

    /// Sends one request and returns its response.
    pub fn call(&mut self, bytes: &[u8]) -> Value {
        self.send(bytes);
        self.response(Duration::from_secs(30))
    }

    /// Collects event notifications until `until` holds for one, or `timeout` passes.
    pub fn events_until(&mut self, timeout: Duration, until: impl Fn(&Value) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        if self.events.iter().any(&until) {
            return true;
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) => {
                    let hit = v.get("event").is_some() && until(&v);
                    if v.get("event").is_some() {
                        self.events.push(v);
                    }
                    if hit {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
    }

    /// Closes stdin and waits up to `timeout` for the process to exit.
    pub fn close(&mut self, timeout: Duration) -> Option<ExitStatus> {
        drop(self.stdin.take());
        let deadline = Instant::now() + timeout;
        loop {
            while let Ok(v) = self.rx.try_recv() {
                if v.get("event").is_some() {
                    self.events.push(v);
                }
            }
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// /proc
// ---------------------------------------------------------------------------------------------

/// How many descriptors process `pid` holds.
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

/// How many descriptors process `pid` holds once the count has stopped moving (three equal
/// readings 50 ms apart, within 5 s): connections just answered take a moment to close.
pub fn settled_fd_count(pid: u32) -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = (fd_count(pid), 0);
    while Instant::now() < deadline && last.1 < 2 {
        std::thread::sleep(Duration::from_millis(50));
        let n = fd_count(pid);
        last = if n == last.0 { (n, last.1 + 1) } else { (n, 0) };
    }
    last.0
}

/// A `/proc/<pid>/status` field in kB (`VmRSS`, `VmHWM`) or as a count (`Threads`).
pub fn proc_status(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn stat_fields(pid: &str) -> Option<(char, i64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let _ppid = f.next()?;
    let pgrp = f.next()?.parse().ok()?;
    Some((state, pgrp))
}

/// Whether process `pid` is running (a zombie has exited).
pub fn alive(pid: u32) -> bool {
    stat_fields(&pid.to_string()).is_some_and(|(s, _)| s != 'Z')
}

/// The live (not zombie) processes in process group `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| stat_fields(&pid.to_string()).is_some_and(|(s, g)| s != 'Z' && g == i64::from(pgid)))
        .collect()
}

/// Waits up to `timeout` for every process in each group to be gone; returns the survivors.
pub fn groups_gone(pgids: &[u32], timeout: Duration) -> Vec<u32> {
    let deadline = Instant::now() + timeout;
    loop {
        let left: Vec<u32> = pgids.iter().flat_map(|&g| group_members(g)).collect();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `f` every 20 ms until it returns `Some`, or `timeout` passes.
pub fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
