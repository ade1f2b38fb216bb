//! `openagents serve`, `submit` and `status` against the real binary: default-off, the
//! project-level file that cannot enable it, the readiness line, the token file, and a turn
//! through the echo runner over HTTP.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_openagents")
}

struct Setup {
    dir: PathBuf,
}

impl Setup {
    fn new(name: &str, enabled: Option<bool>) -> Setup {
        let dir = std::env::temp_dir().join(format!("openagents-serve-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("project/.openagents")).unwrap();
        if let Some(e) = enabled {
            std::fs::write(dir.join("config.toml"), format!("[capabilities.server]\nenabled = {e}\n")).unwrap();
        }
        let echo = Path::new(bin()).with_file_name("openagents-runner-echo");
        std::fs::write(dir.join("runners.toml"), format!("[runners.echo]\ncommand = \"{}\"\n", echo.display())).unwrap();
        Setup { dir }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.args(args)
            .current_dir(self.dir.join("project"))
            .env("OPENAGENTS_CONFIG", self.dir.join("config.toml"))
            .env("OPENAGENTS_RUNNERS", self.dir.join("runners.toml"))
            .env("XDG_RUNTIME_DIR", &self.dir)
            .env("XDG_STATE_HOME", &self.dir)
            .env_remove("OPENAGENTS_STORE")
            .stdin(Stdio::null());
        c
    }
}

#[test]
fn the_server_is_off_until_the_operator_enables_it() {
    // (what, operator setting, project file, expected exit, text on stderr)
    let cases: &[(&str, Option<bool>, &str, i32, &str)] = &[
        ("no operator file", None, "", 2, "the server is off"),
        ("operator says false", Some(false), "", 2, "[capabilities.server]\n    enabled = true"),
        ("project file tries to enable it", None, "[capabilities.server]\nenabled = true\n", 2, "ignoring [capabilities.server] in"),
        ("project file tries to add a runner", Some(true), "[runners.evil]\ncommand = \"/bin/sh\"\n", 0, "ignoring [runners] in"),
    ];
    for (what, enabled, project, code, needle) in cases {
        let s = Setup::new(&what.replace(' ', "-"), *enabled);
        std::fs::write(s.dir.join("project/.openagents/config.toml"), project).unwrap();
        // With stdin closed, a stdio server that did start ends at once (EOF).
        let out = s.command(&["serve", "--stdio", "--runner", "echo"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "{what}: {err}");
        assert!(err.contains(needle), "{what}: stderr lacks {needle:?}: {err}");
    }
}

fn start_http(s: &Setup, extra: &[&str]) -> (Child, serde_json::Value) {
    let mut args = vec!["serve", "--http", "--runner", "echo"];
    args.extend_from_slice(extra);
    let mut child = s.command(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("readiness line {line:?}: {e}"));
    (child, ready)
}

#[test]
fn serve_http_prints_its_url_never_the_token_and_drives_a_turn() {
    let s = Setup::new("http", Some(true));
    let (mut child, ready) = start_http(&s, &[]);
    let url = ready["url"].as_str().unwrap().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let token_file = PathBuf::from(ready["token_file"].as_str().unwrap());
    let token = std::fs::read_to_string(&token_file).unwrap();
    assert_eq!(token.len(), 64);
    assert!(!ready.to_string().contains(&token), "the readiness line must not carry the token");
    assert_eq!(std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777, 0o600);
    let tf = token_file.display().to_string();
    let out = s.command(&["submit", "--url", &url, "--token-file", &tf, "hello over http"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello over http\nhello over http\n");
    let out = s.command(&["submit", "--json", "--url", &url, "--token-file", &tf, "a b"]).output().unwrap();
    let kinds: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["event"]["type"].as_str().unwrap().to_owned()).collect();
    assert_eq!(kinds, ["turn_started", "text", "text", "turn_completed"]);
    let out = s.command(&["status", "--url", &url, "--token-file", &tf]).output().unwrap();
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["counters"]["completed"], 2);
    assert_eq!(status["state"], "idle");
    // A wrong token is refused.
    let bad = s.dir.join("bad.token");
    std::fs::write(&bad, "0".repeat(64)).unwrap();
    std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = s.command(&["status", "--url", &url, "--token-file", &bad.display().to_string()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("(unauthorized, HTTP 401)"));
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_non_loopback_bind_warns_and_credentials_scope_the_grants() {
    let s = Setup::new("creds", Some(true));
    std::fs::write(s.dir.join("observer.token"), "observer-token-0123456789abcdef0123456789").unwrap();
    std::fs::set_permissions(s.dir.join("observer.token"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(
        s.dir.join("credentials.toml"),
        format!("[credentials.watcher]\ntoken_file = \"{}\"\nrole = \"observer\"\n", s.dir.join("observer.token").display()),
    )
    .unwrap();
    let creds = s.dir.join("credentials.toml").display().to_string();
    let (mut child, ready) = start_http(&s, &["--bind", "0.0.0.0:0", "--credentials", &creds]);
    let url = ready["url"].as_str().unwrap().replace("0.0.0.0", "127.0.0.1");
    assert!(ready.get("token_file").is_none());
    let tf = s.dir.join("observer.token").display().to_string();
    let out = s.command(&["status", "--url", &url, "--token-file", &tf]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let out = s.command(&["submit", "--url", &url, "--token-file", &tf, "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    // A JSON-RPC error (answered 200), with the detail from its typed `data`.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("may not call `submit` (forbidden, HTTP 200)"), "{err}");
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning: listening on 0.0.0.0"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn serve_stdio_exits_after_shutdown_with_stdin_still_open() {
    use std::io::Write;
    let s = Setup::new("stdio-shutdown", Some(true));
    let mut child = s.command(&["serve", "--stdio", "--runner", "echo"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"shutdown\"}\n").unwrap();
    stdin.flush().unwrap();
    // stdin stays open (held here): the process must end on its own.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("`openagents serve --stdio` still running 20 s after `shutdown` with stdin open");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    let answered = out.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).any(|v| v["id"] == 1 && v.get("result").is_some());
    assert!(answered, "shutdown was answered before the exit: {out}");
    drop(stdin);
}
