//! `openagents acp` holds a bounded number of sessions and a bounded amount of memory per line,
//! against the real binary (the audit's item 9: 10 000 `session/new` were all kept, with no way
//! to close one, and one 16 MB prompt line of 200 000 `resource_link` blocks peaked at 303 MB).
//!
//! - the session cap: past it, the session idle the longest is closed, with the runner process
//!   it holds, and a prompt to it is an unknown session's error; sessions with a turn are never
//!   closed so, and when every session is busy `session/new` is refused;
//! - `session/close`: the session's runner process ends, a turn it runs is cancelled, and a
//!   prompt to it is an unknown session's error;
//! - one 16 MB prompt line of 200 000 `resource_link` blocks costs the process less than four
//!   times its size (its peak resident memory, `VmHWM`, read from `/proc`).
//!
//! Nothing here waits on a clock for its outcome: every step waits for the agent's answer (the
//! deadlines only turn a hang into a failure).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_openagents")
}

fn runner(name: &str) -> PathBuf {
    Path::new(bin()).with_file_name(format!("openagents-runner-{name}"))
}

/// How long any one answer may take before the test fails (a hang, never an outcome).
const DEADLINE: Duration = Duration::from_secs(120);

/// An operator folder: the server enabled, and the runners `echo`, `hold` and `inner` (the
/// binary's own `openagents acp --runner echo`, installed as an ACP runner: one process kept
/// per conversation, as every `protocol = "acp"` runner's is).
struct Operator {
    dir: PathBuf,
}

impl Operator {
    fn new(name: &str) -> Operator {
        let dir = std::env::temp_dir().join(format!("openagents-acp-limits-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), "[capabilities.server]\nenabled = true\n").unwrap();
        let runners = format!(
            "[runners.echo]\ncommand = \"{echo}\"\n\
             [runners.hold]\ncommand = \"{hold}\"\n\
             [runners.inner]\ncommand = \"{bin}\"\nargs = [\"acp\", \"--runner\", \"echo\"]\nprotocol = \"acp\"\n\
             env = {{ OPENAGENTS_CONFIG = \"{config}\", OPENAGENTS_RUNNERS = \"{registry}\" }}\n",
            echo = runner("echo").display(),
            hold = runner("hold").display(),
            bin = bin(),
            config = dir.join("config.toml").display(),
            registry = dir.join("runners.toml").display(),
        );
        std::fs::write(dir.join("runners.toml"), runners).unwrap();
        Operator { dir }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A running `openagents acp`, driven line by line.
struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    /// Lines read but not yet asked for.
    seen: Vec<Value>,
    stderr: Arc<Mutex<String>>,
    next_id: i64,
}

impl Agent {
    fn start(op: &Operator, args: &[&str]) -> Agent {
        let mut child = Command::new(bin())
            .arg("acp")
            .args(args)
            .current_dir(&op.dir)
            .env("OPENAGENTS_CONFIG", op.dir.join("config.toml"))
            .env("OPENAGENTS_RUNNERS", op.dir.join("runners.toml"))
            .env("XDG_RUNTIME_DIR", &op.dir)
            .env("XDG_STATE_HOME", &op.dir)
            .env_remove("OPENAGENTS_STORE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("openagents acp starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| json!({"unparsable": line, "why": e.to_string()}));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().unwrap();
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    return;
                }
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let stdin = child.stdin.take();
        Agent { child, stdin, lines, seen: Vec::new(), stderr, next_id: 1 }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    fn write(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request; returns its id.
    fn send(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        let line = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).unwrap();
        self.write(&line);
        id
    }

    /// The next line matching `pred` (read before or yet to come).
    fn next(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.seen.iter().position(&pred) {
            return self.seen.remove(i);
        }
        let end = Instant::now() + DEADLINE;
        loop {
            match self.lines.recv_timeout(end.saturating_duration_since(Instant::now())) {
                Ok(v) if pred(&v) => return v,
                Ok(v) => {
                    assert!(v.get("unparsable").is_none(), "the agent wrote a line that is not JSON: {v}");
                    self.seen.push(v);
                }
                Err(RecvTimeoutError::Timeout) => panic!("no {what} within {DEADLINE:?}; stderr:\n{}", self.stderr()),
                Err(RecvTimeoutError::Disconnected) => panic!("the agent's stdout ended before {what}; stderr:\n{}", self.stderr()),
            }
        }
    }

    /// The answer to request `id`.
    fn answer(&mut self, id: i64) -> Value {
        self.next(&format!("answer to request {id}"), |v| v.get("method").is_none() && v["id"] == json!(id))
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        self.answer(id)
    }

    fn initialize(&mut self) -> Value {
        let r = self.call("initialize", json!({"protocolVersion": 1}));
        assert!(r.get("result").is_some(), "initialize: {r}");
        r["result"].clone()
    }

    fn new_session(&mut self, runner: &str) -> String {
        let r = self.call("session/new", json!({"cwd": std::env::temp_dir(), "mcpServers": [], "_meta": {"openagents/runner": runner}}));
        r["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("session/new: {r}")).to_owned()
    }

    fn prompt(&mut self, session: &str, text: &str) -> Value {
        self.call("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}))
    }

    /// Peak resident memory so far, in bytes (`VmHWM`).
    fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("the agent's /proc status");
        let kb: u64 = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).expect("VmHWM in /proc status");
        kb * 1024
    }

    /// The runner processes (children of the agent) whose command line contains `needle`.
    fn runners(&self, needle: &str) -> Vec<u32> {
        children(self.pid()).into_iter().filter(|(_, cmd)| cmd.contains(needle)).map(|(pid, _)| pid).collect()
    }

    /// Ends stdin and waits for the exit status.
    fn finish(mut self) -> Option<i32> {
        self.stdin.take();
        let end = Instant::now() + DEADLINE;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            assert!(Instant::now() < end, "the agent did not exit after stdin ended; stderr:\n{}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The children of `pid` with their command lines.
fn children(pid: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else { continue };
        let Some(rest) = stat.rsplit_once(") ").map(|(_, r)| r) else { continue };
        let mut fields = rest.split(' ');
        let state = fields.next().unwrap_or("");
        let ppid: u32 = fields.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if ppid == pid && state != "Z" {
            let cmd = std::fs::read(format!("/proc/{child}/cmdline")).map(|c| String::from_utf8_lossy(&c).replace('\0', " ")).unwrap_or_default();
            out.push((child, cmd));
        }
    }
    out
}

/// Whether process `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(") ").is_some_and(|(_, r)| !r.starts_with('Z')),
        Err(_) => false,
    }
}

/// The error `e` of an answer, checked to be an unknown session's (-32002, naming it).
fn assert_unknown_session(answer: &Value, session: &str, what: &str) {
    assert_eq!(answer["error"]["code"], -32002, "{what}: {answer}");
    assert_eq!(answer["error"]["data"]["sessionId"], session, "{what}: {answer}");
    assert_eq!(answer["error"]["data"]["code"], "invalid_params", "{what}: {answer}");
}

#[test]
fn past_the_session_cap_the_session_idle_the_longest_is_closed_and_a_prompt_to_it_is_refused() {
    let op = Operator::new("cap");
    let mut agent = Agent::start(&op, &["--runner", "echo", "--runner", "inner"]);
    let init = agent.initialize();
    // The cap the agent says it keeps (256 is what it says, and is checked last: without a cap
    // there is nothing to read, and the behaviour below must fail first).
    let said = init["_meta"]["openagents/maxSessions"].as_u64();
    let max = said.unwrap_or(256) as usize;
    // The first session holds an ACP runner's process (kept between its turns).
    let first = agent.new_session("inner");
    let r = agent.prompt(&first, "hello inner");
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let inner = agent.runners(" acp --runner echo");
    assert_eq!(inner.len(), 1, "the inner agent's process is kept after its turn: {:?}", children(agent.pid()));
    let mut sessions = vec![first.clone()];
    for _ in 1..max {
        sessions.push(agent.new_session("echo"));
    }
    // The second session was used last of all: not the one to go.
    let r = agent.prompt(&sessions[1], "still here");
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    // One more than the cap: the first session (idle the longest) is closed, with its process.
    let extra = agent.new_session("echo");
    assert!(!alive(inner[0]), "the closed session's runner process {} is gone by the time session/new answers", inner[0]);
    assert_unknown_session(&agent.prompt(&first, "are you there"), &first, "a prompt to the evicted session");
    let cancel = serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": first}})).unwrap();
    agent.write(&cancel);
    for s in [&sessions[1], &sessions[2], &extra] {
        let r = agent.prompt(s, "alive");
        assert_eq!(r["result"]["stopReason"], "end_turn", "session {s}: {r}");
    }
    // Nothing ever waits on it: the process count stays at the sessions it has (the inner one
    // is gone, and the echo runner ends with each turn).
    assert!(agent.runners(" acp --runner echo").is_empty(), "{:?}", children(agent.pid()));
    assert_eq!(said, Some(max as u64), "initialize's _meta says the cap (openagents/maxSessions)");
    assert_eq!(max, 256);
    assert_eq!(agent.finish(), Some(0));
}

#[test]
fn a_session_with_a_turn_is_never_evicted_and_when_all_are_busy_session_new_is_refused() {
    let op = Operator::new("busy");
    let mut agent = Agent::start(&op, &["--runner", "echo", "--runner", "hold", "--max-sessions", "2"]);
    agent.initialize();
    let held = agent.new_session("hold");
    let queued = agent.new_session("echo");
    let running = agent.send("session/prompt", json!({"sessionId": held, "prompt": [{"type": "text", "text": "hold on"}]}));
    // The hold turn runs (its first progress is out), and the other session's prompt waits.
    agent.next("the hold turn's progress", |v| v["method"] == "session/update" && v["params"]["sessionId"] == json!(held));
    let waiting = agent.send("session/prompt", json!({"sessionId": queued, "prompt": [{"type": "text", "text": "after you"}]}));
    let refused = agent.call("session/new", json!({"cwd": std::env::temp_dir(), "mcpServers": []}));
    assert_eq!(refused["error"]["code"], -32003, "every session is busy: {refused}");
    assert_eq!(refused["error"]["data"]["code"], "busy", "{refused}");
    assert_eq!(refused["error"]["data"]["retryable"], true, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap_or("").contains("2 sessions"), "the refusal says why: {refused}");
    // Both busy sessions are still there: cancel the held turn, and both prompts are answered.
    let cancel = serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": held}})).unwrap();
    agent.write(&cancel);
    assert_eq!(agent.answer(running)["result"]["stopReason"], "cancelled");
    assert_eq!(agent.answer(waiting)["result"]["stopReason"], "end_turn");
    // Idle again: the next session/new closes the one idle the longest (the held session).
    let third = agent.new_session("echo");
    assert_unknown_session(&agent.prompt(&held, "again"), &held, "the evicted held session");
    assert_eq!(agent.prompt(&queued, "again")["result"]["stopReason"], "end_turn");
    assert_eq!(agent.prompt(&third, "new")["result"]["stopReason"], "end_turn");
    assert_eq!(agent.finish(), Some(0));
}

#[test]
fn session_close_ends_the_sessions_runner_process_and_a_prompt_to_it_is_refused_like_an_unknown_session() {
    let op = Operator::new("close");
    let mut agent = Agent::start(&op, &["--runner", "echo", "--runner", "inner", "--runner", "hold"]);
    let init = agent.initialize();
    assert_eq!(init["agentCapabilities"]["sessionCapabilities"]["close"], json!({}), "session/close is advertised: {init}");
    // An idle session holding an ACP runner's process.
    let s = agent.new_session("inner");
    assert_eq!(agent.prompt(&s, "hello")["result"]["stopReason"], "end_turn");
    let inner = agent.runners(" acp --runner echo");
    assert_eq!(inner.len(), 1, "{:?}", children(agent.pid()));
    let closed = agent.call("session/close", json!({"sessionId": s}));
    assert_eq!(closed["result"], json!({}), "{closed}");
    assert!(!alive(inner[0]), "the session's runner process is gone once session/close answers");
    let unknown = agent.prompt("no-such-session", "hello");
    let after = agent.prompt(&s, "hello again");
    assert_unknown_session(&after, &s, "a prompt to a closed session");
    assert_eq!(after["error"]["message"].as_str().map(|m| m.replace(&s, "S")), unknown["error"]["message"].as_str().map(|m| m.replace("no-such-session", "S")), "the same error as an unknown session");
    assert_unknown_session(&agent.call("session/close", json!({"sessionId": s})), &s, "closing it twice");
    // Closing a session whose turn runs cancels the turn (its runner's process group goes),
    // answers the prompt `cancelled`, then the close.
    let h = agent.new_session("hold");
    let running = agent.send("session/prompt", json!({"sessionId": h, "prompt": [{"type": "text", "text": "hold on"}]}));
    agent.next("the hold turn's progress", |v| v["method"] == "session/update" && v["params"]["sessionId"] == json!(h));
    let hold = agent.runners("openagents-runner-hold");
    assert_eq!(hold.len(), 1, "{:?}", children(agent.pid()));
    let close = agent.send("session/close", json!({"sessionId": h}));
    assert_eq!(agent.answer(running)["result"]["stopReason"], "cancelled");
    assert_eq!(agent.answer(close)["result"], json!({}));
    assert!(!alive(hold[0]), "the held turn's runner is gone");
    assert_unknown_session(&agent.prompt(&h, "again"), &h, "a prompt to the closed held session");
    // The agent goes on.
    let e = agent.new_session("echo");
    assert_eq!(agent.prompt(&e, "still fine")["result"]["stopReason"], "end_turn");
    assert_eq!(agent.finish(), Some(0));
}

#[test]
fn a_16_mb_prompt_line_of_200_000_resource_links_costs_less_than_four_times_its_size() {
    let op = Operator::new("rss");
    let mut agent = Agent::start(&op, &["--runner", "echo"]);
    agent.initialize();
    let s = agent.new_session("echo");
    // A small prompt first, so the baseline includes a turn's own working memory.
    assert_eq!(agent.prompt(&s, "warm up")["result"]["stopReason"], "end_turn");
    let baseline = agent.peak_rss();
    // 200 000 blocks of 80 bytes each: a 16 MB line, under the 16 MiB line limit.
    let mut line = format!(r#"{{"jsonrpc":"2.0","id":"big","method":"session/prompt","params":{{"sessionId":"{s}","prompt":["#).into_bytes();
    for i in 0..200_000u32 {
        if i > 0 {
            line.push(b',');
        }
        line.extend_from_slice(format!(r#"{{"type":"resource_link","uri":"file:///tmp/attack/{i:09}","name":"f{i:07}"}}"#).as_bytes());
    }
    line.extend_from_slice(b"]}}");
    let size = line.len() as u64;
    assert!((16_000_000..16 * 1024 * 1024).contains(&size), "{size}");
    agent.write(&line);
    drop(line);
    let answer = agent.next("the big prompt's answer", |v| v["id"] == "big");
    assert_eq!(answer["error"]["code"], -32602, "the prompt is refused: {}", answer.to_string().chars().take(400).collect::<String>());
    let peak = agent.peak_rss();
    eprintln!("baseline {} kB, peak after the {size}-byte line {} kB", baseline / 1024, peak / 1024);
    assert!(peak < baseline + 4 * size, "peak RSS {peak} bytes for a {size}-byte line (baseline {baseline}): more than 4x the line");
    assert!(answer["error"]["message"].as_str().unwrap_or("").contains("content blocks"), "the refusal names the block cap: {answer}");
    // The agent goes on.
    assert_eq!(agent.prompt(&s, "after")["result"]["stopReason"], "end_turn");
    assert_eq!(agent.finish(), Some(0));
}
