//! Runner and process security against the real binary, real runner processes and loopback
//! sockets: every terminating signal shuts the server down gracefully and leaves no process
//! and no token file behind (not even a runner's double-forked, `setsid` grandchild); a runner
//! sees only an allowlisted environment and never the server's secrets; a turn may name only a
//! runner the runtime serves; the errors a caller sees do not reveal the host's files; and a
//! runner whose entry asks for a sandbox cannot open the server's configuration, registry or
//! token file, nor read the server's environment (Landlock; fail closed where it is missing).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod security_common;

use security_common::{BOUND, lines_of, openagents_in};

/// A bash runner: reads the turn, records its pid in `./pids`, then runs `body`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(format!("{name}.sh"));
    std::fs::write(&path, format!("set -u\nread -r _\necho $$ >> pids\n{body}\n")).unwrap();
    path
}

/// Starts, in a new session two forks below the runner, a process with a child of its own; both
/// write their pids to `./escaped` and sleep. The runner goes on once both are written.
const ESCAPE: &str = r#"( setsid bash -c 'sleep 300 & echo $! >> escaped; echo $$ >> escaped; exec sleep 300' </dev/null >/dev/null 2>&1 & )
while [ "$(wc -l < escaped 2>/dev/null || echo 0)" -lt 2 ]; do sleep 0.01; done"#;

/// Starts, two forks below the runner, a process that moves into the server's own process group
/// (same session, so `setpgid` allows it) to pass for one of the server's children; it writes
/// its pid to `./escaped` and sleeps. The runner's parent is the server.
const JOIN_SERVER_GROUP: &str = r#"server=$PPID
( python3 -c "import os, time; os.setpgid(0, os.getpgid($server)); open('escaped', 'a').write('%d\n' % os.getpid()); time.sleep(300)" </dev/null >/dev/null 2>&1 & )
while [ "$(wc -l < escaped 2>/dev/null || echo 0)" -lt 1 ]; do sleep 0.01; done"#;

const DONE: &str = r#"echo '{"type":"completed","result":"done"}'"#;

struct Setup {
    dir: PathBuf,
    project: PathBuf,
}

impl Setup {
    /// A configuration enabling the server (with `extra` settings), and a registry of bash
    /// runners: `done`, `other` (both complete at once), `escape` (escapes, then works until
    /// stopped) and `env` (writes the environment it started with to `./env`).
    fn new(name: &str, extra: &str) -> Setup {
        let dir = std::env::temp_dir().join(format!("openagents-security-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let project = dir.join("project");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(dir.join("config.toml"), format!("[capabilities.server]\nenabled = true\n{extra}")).unwrap();
        let runners = [
            ("done", script(&dir, "done", DONE), ""),
            ("other", script(&dir, "other", DONE), ""),
            ("escape", script(&dir, "escape", &format!("{ESCAPE}\necho '{{\"type\":\"text\",\"text\":\"working\"}}'\nsleep 300")), ""),
            ("env", script(&dir, "env", &format!("tr '\\0' '\\n' < /proc/$$/environ > env\n{DONE}")), "env = { FROM_REGISTRY = \"yes\" }\n"),
            ("join", script(&dir, "join", &format!("{JOIN_SERVER_GROUP}\n{DONE}")), ""),
        ];
        let registry: String = runners.iter().map(|(id, path, extra)| format!("[runners.{id}]\ncommand = \"/bin/bash\"\nargs = [\"{}\"]\n{extra}", path.display())).collect();
        std::fs::write(dir.join("runners.toml"), registry).unwrap();
        Setup { dir, project }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = openagents_in(&self.dir, &self.project, args);
        c.env("OPERATOR_SECRET_KEY", "sk-operator-secret-0123456789")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn pids(&self, file: &str) -> Vec<u32> {
        std::fs::read_to_string(self.project.join(file)).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
    }

    /// Waits until `file` in the project folder has `n` lines.
    fn wait_for(&self, file: &str, n: usize) {
        let deadline = Instant::now() + BOUND;
        while self.pids(file).len() < n {
            assert!(Instant::now() < deadline, "{file} never got {n} lines");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Running or stopped, not a zombie.
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'),
        Err(_) => false,
    }
}

fn wait_exit(child: &mut Child, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + BOUND;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what}: the server was still running {BOUND:?} later");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill").args(["-s", name, &pid.to_string()]).status().unwrap();
    assert!(status.success(), "kill -s {name} {pid}");
}

/// The event type in a stdio notification line or an SSE `data:` line.
fn event_kind(line: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(line.strip_prefix("data: ").unwrap_or(line)).ok()?;
    let ev = if v["event"]["event"].is_object() { &v["event"]["event"] } else { &v["event"] };
    ev["type"].as_str().map(str::to_owned)
}

/// A raw HTTP/1.1 request on loopback; returns the response as text once the server closes it
/// (or, with `on_line`, hands each line over as it arrives).
fn http(addr: &str, request: String, on_line: Option<mpsc::Sender<String>>) -> std::thread::JoinHandle<String> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if let Some(tx) = &on_line {
                let _ = tx.send(line.clone());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    })
}

fn rpc_request(addr: &str, token: &str, body: &serde_json::Value) -> String {
    let body = body.to_string();
    format!("POST /rpc HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
}

/// A `serve --http` server that has printed its readiness line: (child, address, token file).
fn start_http(s: &Setup, runners: &[&str]) -> (Child, String, PathBuf) {
    let mut args = vec!["serve", "--http"];
    for r in runners {
        args.extend(["--runner", r]);
    }
    let mut child = s.command(&args).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("readiness line {line:?}: {e}"));
    let addr = ready["url"].as_str().unwrap().trim_start_matches("http://").trim_end_matches('/').to_owned();
    (child, addr, PathBuf::from(ready["token_file"].as_str().unwrap()))
}

#[test]
fn every_terminating_signal_shuts_down_gracefully_and_leaves_nothing_behind() {
    // (transport, signal)
    let cases = [("http", "TERM"), ("http", "HUP"), ("http", "INT"), ("stdio", "TERM"), ("stdio", "HUP")];
    for (transport, sig) in cases {
        let what = format!("{transport} SIG{sig}");
        let s = Setup::new(&format!("signal-{transport}-{sig}"), "");
        // stdio's input, held open: the signal, not the end of input, must end the server.
        let mut held_stdin = None;
        let (mut child, events, reply, token_file) = if transport == "http" {
            let (child, addr, token_file) = start_http(&s, &["escape"]);
            let token = std::fs::read_to_string(&token_file).unwrap();
            let (tx, events) = mpsc::channel();
            let _stream = http(&addr, format!("GET /events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n"), Some(tx));
            // The stream is open once its headers are in.
            let deadline = Instant::now() + BOUND;
            while events.recv_timeout(BOUND).unwrap().trim() != "" {
                assert!(Instant::now() < deadline);
            }
            let reply = http(&addr, rpc_request(&addr, &token, &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "submit", "params": {"task": "work"}})), None);
            (child, events, Some(reply), Some(token_file))
        } else {
            let mut child = s.command(&["serve", "--stdio", "--runner", "escape"]).stdin(Stdio::piped()).spawn().unwrap();
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"submit\",\"params\":{\"task\":\"work\"}}\n").unwrap();
            stdin.flush().unwrap();
            held_stdin = Some(stdin);
            let events = lines_of(child.stdout.take().unwrap());
            (child, events, None, None)
        };
        s.wait_for("escaped", 2);
        signal(child.id(), sig);
        let status = wait_exit(&mut child, &what);
        assert_eq!(status.code(), Some(0), "{what}: {status}");
        let mut kinds = Vec::new();
        while let Ok(line) = events.recv_timeout(BOUND) {
            kinds.extend(event_kind(&line));
        }
        assert_eq!(kinds.last().map(String::as_str), Some("shutting_down"), "{what}: the stream's last event: {kinds:?}");
        assert!(kinds.iter().any(|k| k == "turn_failed"), "{what}: the interrupted turn's terminal event: {kinds:?}");
        if let Some(reply) = reply {
            let reply = reply.join().unwrap();
            assert!(reply.contains("\"code\":\"interrupted\""), "{what}: the submit's answer: {reply}");
        }
        if let Some(f) = token_file {
            assert!(!f.exists(), "{what}: the generated token file {} is still there", f.display());
        }
        let left: Vec<u32> = s.pids("pids").into_iter().chain(s.pids("escaped")).filter(|&p| running(p)).collect();
        assert!(left.is_empty(), "{what}: processes the runner started are still running: {left:?}");
        drop(held_stdin);
    }
}

#[test]
fn a_process_that_joins_the_servers_own_process_group_is_swept_too() {
    let s = Setup::new("join", "");
    let (replies, err) = stdio_session(&s, &["serve", "--stdio", "--runner", "join"], &[submit(1, serde_json::json!({"task": "x"}))]);
    assert_eq!(replies[0]["result"]["result"], "done", "{err}");
    let pids = s.pids("escaped");
    assert_eq!(pids.len(), 1, "the escape did not happen");
    let left: Vec<u32> = pids.into_iter().filter(|&p| running(p)).collect();
    assert!(left.is_empty(), "a process the runner started in the server's own process group survived: {left:?}");
}

#[test]
fn run_stops_the_runner_and_what_it_started_on_sigterm_and_sighup() {
    for sig in ["TERM", "HUP", "INT"] {
        let s = Setup::new(&format!("run-{sig}"), "");
        let mut child = s.command(&["run", "--runner", "escape", "work"]).spawn().unwrap();
        s.wait_for("escaped", 2);
        signal(child.id(), sig);
        let status = wait_exit(&mut child, &format!("run SIG{sig}"));
        assert_eq!(status.code(), Some(130), "run SIG{sig}: {status}");
        let left: Vec<u32> = s.pids("pids").into_iter().chain(s.pids("escaped")).filter(|&p| running(p)).collect();
        assert!(left.is_empty(), "run SIG{sig}: processes the runner started are still running: {left:?}");
    }
}

#[test]
fn a_runner_sees_only_the_allowlisted_environment_and_no_secret() {
    let s = Setup::new("env", "");
    let (mut child, addr, token_file) = start_http(&s, &["env"]);
    let token = std::fs::read_to_string(&token_file).unwrap();
    let reply = http(&addr, rpc_request(&addr, &token, &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "submit", "params": {"task": "x"}})), None).join().unwrap();
    assert!(reply.contains("\"result\":\"done\""), "{reply}");
    let env = std::fs::read_to_string(s.project.join("env")).unwrap();
    let allowed = ["PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER", "FROM_REGISTRY"];
    let names: Vec<&str> = env.lines().filter_map(|l| l.split('=').next()).collect();
    let extra: Vec<&&str> = names.iter().filter(|n| !allowed.contains(n)).collect();
    assert!(extra.is_empty(), "the runner inherited {extra:?} (its environment: {names:?})");
    assert!(env.contains("FROM_REGISTRY=yes\n"), "the registry's env is set: {env}");
    for secret in ["sk-operator-secret", "OPENAGENTS_CONFIG", "OPENAGENTS_RUNNERS", token.trim()] {
        assert!(!env.contains(secret), "the runner's environment holds {secret:?}");
    }
    // Nor does the server's own command line hold the token (a runner can read it).
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains(token.trim()));
    signal(child.id(), "TERM");
    assert_eq!(wait_exit(&mut child, "env").code(), Some(0));
}

/// Runs `serve --stdio` with `args` over `requests`, each sent once the one before is answered,
/// then ends its input; returns (the replies, stderr).
fn stdio_session(s: &Setup, args: &[&str], requests: &[serde_json::Value]) -> (Vec<serde_json::Value>, String) {
    let mut child = s.command(args).stdin(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = lines_of(child.stdout.take().unwrap());
    let mut replies = Vec::new();
    for r in requests {
        writeln!(stdin, "{r}").unwrap();
        stdin.flush().unwrap();
        loop {
            let line = lines.recv_timeout(BOUND).unwrap_or_else(|e| panic!("no answer to {r}: {e}"));
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v.get("id") == r.get("id") {
                replies.push(v);
                break;
            }
        }
    }
    drop(stdin);
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(wait_exit(&mut child, "stdio").code(), Some(0), "{err}");
    (replies, err)
}

fn submit(id: i64, params: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "submit", "params": params})
}

#[test]
fn a_turn_may_name_only_a_served_runner_and_errors_do_not_leak() {
    let s = Setup::new("served", "");
    let file = s.project.join("a-file");
    std::fs::write(&file, "").unwrap();
    let file = file.display().to_string();
    let requests = [
        submit(1, serde_json::json!({"task": "x"})),
        submit(2, serde_json::json!({"task": "x", "runner": "other"})),
        submit(3, serde_json::json!({"task": "x", "runner": "nonexistent-runner"})),
        submit(4, serde_json::json!({"task": "x", "cwd": "/nonexistent/folder"})),
        submit(5, serde_json::json!({"task": "x", "cwd": file})),
    ];
    let (replies, log) = stdio_session(&s, &["serve", "--stdio", "--runner", "done"], &requests);
    let by_id = |id: i64| replies.iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("no reply {id}: {replies:?}")).clone();
    assert_eq!(by_id(1)["result"]["result"], "done");
    let registry = s.dir.join("runners.toml").display().to_string();
    // (id, code, the only message the caller gets)
    let refused = [(2, "runner_not_found", "unknown runner"), (3, "runner_not_found", "unknown runner"), (4, "invalid_params", "cwd is not an accessible folder"), (5, "invalid_params", "cwd is not an accessible folder")];
    for (id, code, message) in refused {
        let e = &by_id(id)["error"];
        assert_eq!(e["data"]["code"], code, "{id}: {e}");
        assert_eq!(e["data"]["message"], message, "{id}: {e}");
        assert!(e["data"]["details"].get("known").is_none_or(|k| k.is_null()), "{id}: {e}");
        let text = e.to_string();
        for leak in [registry.as_str(), "done", "escape", "No such file", "not a folder", "/nonexistent/folder"] {
            assert!(!text.contains(leak), "{id}: the caller's error reveals {leak:?}: {text}");
        }
    }
    // The operator's log says what the caller is not told.
    for detail in ["runner `other` is not in the registry", &registry, "known runners: done", "/nonexistent/folder cannot be used", &format!("{file} is not a folder")] {
        assert!(log.contains(detail), "the operator's log lacks {detail:?}: {log}");
    }
    assert!(!log.contains("escape"), "the log names only the runners served: {log}");

    // Served runners: every --runner, or the configuration's `runners`; the first is the default.
    let (replies, err) = stdio_session(&s, &["serve", "--stdio", "--runner", "other", "--runner", "done"], &[submit(1, serde_json::json!({"task": "x", "runner": "done"}))]);
    assert_eq!(replies[0]["result"]["result"], "done", "{err}");
    let s = Setup::new("served-config", "runners = [\"other\"]\n");
    let (replies, err) = stdio_session(&s, &["serve", "--stdio"], &[submit(1, serde_json::json!({"task": "x"})), submit(2, serde_json::json!({"task": "x", "runner": "done"}))]);
    assert_eq!(replies.iter().find(|r| r["id"] == 1).unwrap()["result"]["result"], "done", "{err}");
    assert_eq!(replies.iter().find(|r| r["id"] == 2).unwrap()["error"]["data"]["code"], "runner_not_found", "{err}");
    // A runner the registry lacks stops the server at once, said in full to the operator.
    let out = s.command(&["serve", "--stdio", "--runner", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("runner `nope` is not in the registry"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A script that tries to reach what a runner must not (the server's configuration, registry and
/// token file, the server's environment) and what it may (the system, its `cwd`), and reports
/// each as `name=ok` or `name=denied` in its result.
fn probe_script(s: &Setup, folder: &Path) -> PathBuf {
    std::fs::create_dir_all(folder).unwrap();
    let d = s.dir.display();
    let body = format!(
        r#"r=""
try() {{ if eval "$2" >/dev/null 2>&1; then r="$r $1=ok"; else r="$r $1=denied"; fi; }}
try config 'cat {d}/config.toml'
try registry 'cat {d}/runners.toml'
try token 'cat {d}/openagents-*.token'
try environ 'test -n "$(tr -d "\0" < /proc/$PPID/environ)"'
try system 'ls /usr/bin'
try cwd 'echo written > written && test -s written'
echo "{{\"type\":\"completed\",\"result\":\"${{r# }}\"}}""#
    );
    script(folder, "probe", &body)
}

#[test]
fn a_sandboxed_runner_cannot_reach_the_servers_files_or_environment() {
    let s = Setup::new("sandbox", "");
    let jail = probe_script(&s, &s.dir.join("jail"));
    let open = probe_script(&s, &s.dir.join("open"));
    let mut registry = std::fs::read_to_string(s.dir.join("runners.toml")).unwrap();
    registry.push_str(&format!("[runners.jail]\ncommand = \"/bin/bash\"\nargs = [\"{}\"]\nsandbox = {{ read = [\"{}\"] }}\n", jail.display(), s.dir.join("jail").display()));
    registry.push_str(&format!("[runners.open]\ncommand = \"/bin/bash\"\nargs = [\"{}\"]\n", open.display()));
    std::fs::write(s.dir.join("runners.toml"), registry).unwrap();
    let (mut child, addr, token_file) = start_http(&s, &["jail", "open"]);
    let token = std::fs::read_to_string(&token_file).unwrap();
    let turn_in = |runner: &str, cwd: &Path| {
        let params = serde_json::json!({"task": "probe", "runner": runner, "cwd": cwd.display().to_string()});
        http(&addr, rpc_request(&addr, &token, &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "submit", "params": params})), None).join().unwrap()
    };
    let turn = |runner: &str| turn_in(runner, &s.project);
    let result = |reply: &str| reply.lines().last().and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok()).and_then(|v| v["result"]["result"].as_str().map(str::to_owned));
    // Without a sandbox, a runner reaches all of it: what the sandbox must take away.
    let open = turn("open");
    assert_eq!(result(&open).as_deref(), Some("config=ok registry=ok token=ok environ=ok system=ok cwd=ok"), "{open}");
    let jail = turn("jail");
    // The caller chooses `cwd`, which the sandbox lets the runner write: one that is, or holds,
    // the server's own files (here the folder of the configuration and the registry, and `/`)
    // is refused before anything starts.
    for cwd in [s.dir.as_path(), Path::new("/")] {
        let refused = turn_in("jail", cwd);
        assert!(refused.contains("\"code\":\"invalid_params\"") && refused.contains("cwd is not an accessible folder"), "cwd {}: {refused}", cwd.display());
    }
    assert!(!s.dir.join("written").exists(), "a runner started in the refused cwd");
    signal(child.id(), "TERM");
    assert_eq!(wait_exit(&mut child, "sandbox").code(), Some(0));
    let mut log = String::new();
    child.stderr.take().unwrap().read_to_string(&mut log).unwrap();
    assert!(log.contains("would let the sandboxed runner `jail` reach the server's file"), "the operator's log says why the cwd was refused: {log}");
    let landlock = openagents_sdk::agents::sandbox::available();
    let mut say = std::io::stderr();
    if landlock {
        assert_eq!(result(&jail).as_deref(), Some("config=denied registry=denied token=denied environ=denied system=ok cwd=ok"), "{jail}\n{log}");
        let _ = writeln!(say, "sandbox: Landlock is enforced on this kernel; the sandboxed runner could not open the configuration, registry or token file, nor read the server's environment");
    } else {
        // Fail closed: the runner does not start at all.
        assert!(jail.contains("\"code\":\"runner_failed\""), "{jail}");
        assert!(log.contains("Landlock is not available") || jail.contains("Landlock is not available"), "{jail}\n{log}");
        assert!(!s.project.join("written").exists(), "the sandboxed runner ran");
        let _ = writeln!(say, "sandbox: this kernel has no Landlock; checked that a sandboxed runner is refused (fail closed), not what it can reach");
    }
}

#[test]
fn a_sandboxed_runner_without_a_launcher_is_not_started() {
    use openagents_sdk::agents::host::{RunnerSpec, run_turn};
    use openagents_sdk::agents::sandbox::Sandbox;
    // This test process registers no launcher, so it cannot start a sandbox.
    let s = Setup::new("no-launcher", "");
    let spec = RunnerSpec {
        id: "jail".into(),
        command: "/bin/bash".into(),
        args: vec![s.dir.join("done.sh").display().to_string()],
        env: Default::default(),
        timeout: Duration::from_secs(10),
        sandbox: Some(Sandbox::default()),
    };
    let turn = openagents_sdk::protocol::Turn::new("asg-1", "conv-1", "jail", "x", s.project.display().to_string());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let report = rt.block_on(run_turn(&spec, &turn, &Default::default(), &mut |_| {}));
    let e = report.outcome.expect_err("a sandboxed runner started without a sandbox");
    assert!(e.to_string().contains("no sandbox launcher"), "{e}");
    assert!(s.pids("pids").is_empty(), "the runner ran");
}
