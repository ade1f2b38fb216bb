//! Support for the integration tests of the `openagents` binary: a temporary operator
//! configuration and registry (the echo and ask runners), token files with a chosen mode, a
//! served runtime read from its readiness line, raw HTTP/1.1 exchanges, and commands bounded in
//! time.
//!
//! Every wait is for an observable event (a readiness line, an exit, a line of output) and is
//! bounded; nothing sleeps to wait for readiness.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
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

/// `openagents ARGS` with the configuration, registry, runtime folder and state folder (the
/// default store) in `dir`, run in `cwd`,
/// stdin closed.
pub fn openagents_in(dir: &Path, cwd: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(args)
        .current_dir(cwd)
        .env("OPENAGENTS_CONFIG", dir.join("config.toml"))
        .env("OPENAGENTS_RUNNERS", dir.join("runners.toml"))
        .env("XDG_RUNTIME_DIR", dir)
        .env("XDG_STATE_HOME", dir)
        .env_remove("OPENAGENTS_STORE")
        .stdin(Stdio::null());
    c
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
        Setup::with_config(name, "", registry_extra)
    }

    /// [`Setup::new`] with `config_extra` appended to the `[capabilities.server]` table.
    pub fn with_config(name: &str, config_extra: &str, registry_extra: &str) -> Setup {
        let dir = std::env::temp_dir().join(format!("openagents-security-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the test folder");
        std::fs::write(dir.join("config.toml"), format!("[capabilities.server]\nenabled = true\n{config_extra}")).expect("config");
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
        openagents_in(&self.dir, &self.dir, args)
    }

    /// Starts `openagents serve --http --runner echo EXTRA` with its stderr discarded: the
    /// address and token of its readiness line (panics when there is none within [`BOUND`]).
    pub fn listen(&self, extra: &[&str]) -> Listening {
        let mut args = vec!["serve", "--http", "--runner", "echo"];
        args.extend_from_slice(extra);
        let mut child = self.command(&args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("openagents starts");
        let line = readiness_line(&mut child);
        let ready: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("readiness line {line:?}: {e}"));
        let url = ready["url"].as_str().expect("a url");
        let addr: SocketAddr = url.trim_start_matches("http://").trim_end_matches('/').parse().unwrap_or_else(|e| panic!("{url}: {e}"));
        let token = std::fs::read_to_string(ready["token_file"].as_str().expect("a token file")).expect("the token").trim().to_owned();
        Listening { child, addr, token }
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

/// The token of the `watcher` credential (an observer) of [`serve_observer_and_admin`].
pub const OBSERVER: &str = "0b5e77e40b5e77e40b5e77e40b5e77e40b5e77e40b5e77e40b5e77e40b5e77e4";
/// The token of the `root` credential (an admin) of [`serve_observer_and_admin`].
pub const ADMIN: &str = "ad31a0d1ad31a0d1ad31a0d1ad31a0d1ad31a0d1ad31a0d1ad31a0d1ad31a0d1";

/// A setup named `name` serving HTTP (the echo runner) to two credentials, `watcher` (an
/// observer, [`OBSERVER`]) and `root` (an admin, [`ADMIN`]): the setup, the server and its
/// address.
pub fn serve_observer_and_admin(name: &str) -> (Setup, Server, SocketAddr) {
    let s = Setup::new(name, "");
    let creds = s.file(
        "credentials.toml",
        &format!("[credentials.watcher]\ntoken = \"{OBSERVER}\"\nrole = \"observer\"\n\n[credentials.root]\ntoken = \"{ADMIN}\"\nrole = \"admin\"\n"),
        0o600,
    );
    let server = s.serve(&["--credentials", &creds.display().to_string()]).unwrap_or_else(|(code, err)| panic!("serve did not start ({code:?}): {err}"));
    let addr: SocketAddr = server.url.trim_start_matches("http://").trim_end_matches('/').parse().expect("a socket address");
    (s, server, addr)
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

/// A running `openagents serve --http` started by [`Setup::listen`], killed on drop.
pub struct Listening {
    /// The process.
    pub child: Child,
    /// The address its readiness line gave.
    pub addr: SocketAddr,
    /// The bearer token it generated.
    pub token: String,
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first line `child` writes to its (piped) stdout, within [`BOUND`]; the rest is read and
/// dropped so the child never blocks on a full pipe.
pub fn readiness_line(child: &mut Child) -> String {
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = tx.send(line);
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    rx.recv_timeout(BOUND).unwrap_or_else(|_| panic!("the readiness line: nothing within {BOUND:?}"))
}

/// Reads lines from `r` on a thread, sending each as it arrives.
pub fn lines_of(r: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The value of the header `name` (lower case) in `headers`.
pub fn header(headers: &[(String, String)], name: &str) -> Option<String> {
    headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
}

/// One HTTP/1.1 exchange on a fresh connection, bounded in time: the status, the headers (names
/// in lower case) and the body (de-chunked when the response is chunked). The server may answer
/// (413, 431) before it has read everything, so a failed write is not an error, nor is a reset
/// once some of the response has arrived.
pub fn http_exchange(addr: SocketAddr, request: &[u8]) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(BOUND)).expect("timeout");
    stream.set_write_timeout(Some(BOUND)).expect("timeout");
    let _ = stream.write_all(request);
    let mut raw = Vec::new();
    if let Err(e) = stream.read_to_end(&mut raw) {
        assert!(!raw.is_empty(), "reading the response: {e}");
    }
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or_else(|| panic!("no header block in {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("a status line in {head:?}"));
    let headers: Vec<(String, String)> = lines.filter_map(|l| l.split_once(':')).map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned())).collect();
    let mut body = raw[end + 4..].to_vec();
    if header(&headers, "transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        body = dechunk(&body);
    }
    (status, headers, body)
}

/// The payload of a chunked body.
fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = data.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&data[..eol]).split(';').next().unwrap_or("").trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = eol + 2;
        out.extend_from_slice(&data[start..(start + size).min(data.len())]);
        data = &data[(start + size + 2).min(data.len())..];
    }
    out
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

/// A credentials file in `s` holding the [`ADMIN`] token as role `admin`: its path.
pub fn admin_credentials(s: &Setup) -> String {
    s.file("credentials.toml", &format!("[credentials.root]\ntoken = \"{ADMIN}\"\nrole = \"admin\"\n"), 0o600).display().to_string()
}

/// The socket address a served runtime listens on.
pub fn addr_of(server: &Server) -> SocketAddr {
    server.url.trim_start_matches("http://").trim_end_matches('/').parse().expect("a socket address")
}

/// One JSON-RPC call over `POST /rpc` as the admin: the reply.
pub fn admin_rpc(addr: SocketAddr, method: &str, params: serde_json::Value) -> serde_json::Value {
    let body = serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }).to_string();
    let request = format!("POST /rpc HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    let (status, _, body) = http_exchange(addr, request.as_bytes());
    assert_eq!(status, 200, "{method}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{method}: {e}: {}", String::from_utf8_lossy(&body)))
}

/// The events in what a chunked SSE response has sent so far.
pub fn sse_frames(raw: &[u8]) -> Vec<serde_json::Value> {
    sse_frame_data(raw).iter().map(|data| serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}"))).collect()
}

/// The `data:` of every complete event frame in what a chunked SSE response has sent so far,
/// as the server wrote it.
pub fn sse_frame_data(raw: &[u8]) -> Vec<String> {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else { return Vec::new() };
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let mut data = &raw[end + 4..];
    let mut payload = Vec::new();
    // Complete chunks only.
    while let Some(eol) = data.windows(2).position(|w| w == b"\r\n") {
        let Ok(size) = usize::from_str_radix(String::from_utf8_lossy(&data[..eol]).trim(), 16) else { break };
        if data.len() < eol + 2 + size + 2 {
            break;
        }
        payload.extend_from_slice(&data[eol + 2..eol + 2 + size]);
        data = &data[eol + 2 + size + 2..];
    }
    let text = String::from_utf8_lossy(&payload).into_owned();
    text.split("\n\n")
        .filter(|frame| frame.lines().any(|l| l.starts_with("data: ")))
        .filter(|frame| text.contains(&format!("{frame}\n\n")))
        .map(|frame| frame.lines().filter_map(|l| l.strip_prefix("data: ")).collect())
        .collect()
}
