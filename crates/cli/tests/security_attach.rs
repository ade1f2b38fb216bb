//! Security round 2, `openagents attach` against the real binary: runner-controlled text (the
//! `ask` runner puts the task in its prompt) never reaches the terminal raw. Control characters
//! and the characters that reorder or hide text are shown escaped, the prompt's exact text is
//! printed quoted before the question, and `--json` lines carry them as `\u` escapes.

mod security_common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use security_common::*;

/// A task that tries to rewrite the terminal: erase the line, return, retitle the window,
/// switch to red through a C1 CSI, and reverse the rest of the line.
const HOSTILE: &str = "\u{1b}[2K\rread README.md \u{1b}]0;ok\u{7} \u{9b}31m \u{202e}exe.gpj";

/// Bytes and characters that must never reach the terminal raw.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars().filter(|c| matches!(*c, '\u{1b}' | '\u{7}' | '\r' | '\u{9b}' | '\u{202e}')).collect()
}

/// `status` over `POST /rpc`, as JSON.
fn status(url: &str, token_file: &Path) -> serde_json::Value {
    let token = std::fs::read_to_string(token_file).expect("the token");
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(BOUND)).expect("timeout");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#;
    let req = format!(
        "POST /rpc HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        token.trim(),
        body.len()
    );
    s.write_all(req.as_bytes()).expect("write");
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("status is not JSON ({e}): {raw}"))
}

/// Starts `attach` and waits until the runtime counts its subscription.
fn attach(s: &Setup, url: &str, token_file: &Path, json: bool) -> Child {
    let tf = token_file.display().to_string();
    let mut args = vec!["attach", "--url", url, "--token-file", &tf];
    if json {
        args.push("--json");
    }
    let child = s.command(&args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("attach starts");
    let deadline = Instant::now() + BOUND;
    while status(url, token_file)["result"]["subscribers"].as_i64().unwrap_or(0) < 1 {
        assert!(Instant::now() < deadline, "attach did not subscribe within {BOUND:?}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child
}

/// Collects a child's stdout as it arrives; `wait_for` blocks until it contains a needle.
struct Collected {
    text: Arc<Mutex<String>>,
    more: mpsc::Receiver<()>,
}

impl Collected {
    fn new(child: &mut Child) -> Collected {
        let mut out = child.stdout.take().expect("stdout");
        let text = Arc::new(Mutex::new(String::new()));
        let (tx, more) = mpsc::channel();
        let t = Arc::clone(&text);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                t.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
                let _ = tx.send(());
            }
        });
        Collected { text, more }
    }

    fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + BOUND;
        loop {
            let now = self.text.lock().unwrap().clone();
            if now.contains(needle) {
                return now;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "attach never printed {needle:?}; it printed: {now:?}");
            let _ = self.more.recv_timeout(left);
        }
    }
}

/// The `ask` runtime of a fresh setup `name`, `openagents attach` (`--json` when `json`) on it
/// with its output collected, and `openagents submit HOSTILE` started on it (stdout discarded,
/// stderr to `submit_stderr`).
fn attached_submit(name: &str, json: bool, submit_stderr: Stdio) -> (Setup, Server, Child, Collected, Child) {
    let s = Setup::new(name, "");
    let server = s.serve_runner("ask", &[]).unwrap_or_else(|(c, e)| panic!("{c:?} {e}"));
    let token_file = server.token_file.clone().expect("a generated token file");
    let mut frontend = attach(&s, &server.url, &token_file, json);
    let out = Collected::new(&mut frontend);
    let tf = token_file.display().to_string();
    let submit = s.command(&["submit", "--url", &server.url, "--token-file", &tf, HOSTILE]).stdout(Stdio::null()).stderr(submit_stderr).spawn();
    let submit = submit.expect("submit starts");
    (s, server, frontend, out, submit)
}

#[test]
fn attach_shows_runner_text_escaped_and_the_prompt_s_exact_text_before_asking() {
    let (_s, _server, mut frontend, out, mut submit) = attached_submit("attach", false, Stdio::piped());

    let shown = out.wait_for("approve? [y/N] ");
    // Answer no: the turn is denied.
    frontend.stdin.as_mut().expect("stdin").write_all(b"n\n").expect("the answer");
    assert_eq!(wait_bounded(&mut submit), Some(1), "the denied turn fails");
    let shown_all = out.wait_for("turn_failed");
    let _ = frontend.kill();
    let _ = frontend.wait();

    assert_eq!(raw_controls(&shown_all), Vec::<char>::new(), "nothing raw reaches the terminal: {shown_all:?}");
    let escaped = r"\x1b[2K\rread README.md \x1b]0;ok\x07 \x9b31m \u{202e}exe.gpj";
    // The exact prompt, quoted, right before the question.
    let exact = format!("the prompt's exact text, control characters escaped:\n  \"May I do this: {escaped}?\"\napprove? [y/N] ");
    assert!(shown.contains(&exact), "the prompt's exact text comes before the question: {shown:?}");
    // Events that carry runner text are escaped too.
    assert!(shown_all.contains(&format!("approval_requested: May I do this: {escaped}?")), "{shown_all:?}");
    assert!(shown_all.contains(&format!("denied: {escaped}")), "{shown_all:?}");
}

#[test]
fn attach_json_lines_carry_control_characters_as_escapes() {
    let (_s, _server, mut frontend, out, mut submit) = attached_submit("attach-json", true, Stdio::inherit());
    // `--json` denies at once.
    assert_eq!(wait_bounded(&mut submit), Some(1), "the denied turn fails");
    let shown = out.wait_for("\"turn_failed\"");
    let _ = frontend.kill();
    let _ = frontend.wait();

    assert_eq!(raw_controls(&shown), Vec::<char>::new(), "nothing raw reaches the terminal: {shown:?}");
    let mut prompts = Vec::new();
    for line in BufReader::new(shown.as_bytes()).lines() {
        let line = line.expect("a line");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}"));
        if v["method"] == "frontend.v2.approval" {
            prompts.push(v["params"]["prompt"].as_str().unwrap_or_default().to_owned());
        }
    }
    assert_eq!(prompts, [format!("May I do this: {HOSTILE}?")], "the JSON still carries the exact prompt");
}
