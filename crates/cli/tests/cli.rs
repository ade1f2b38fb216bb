//! `openagents validate` and `openagents schema` against the real binary: valid, invalid and
//! broken input, each with its exit code and message.

use std::io::Write;
use std::process::{Command, Stdio};

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str], stdin: &[u8]) -> Outcome {
    let mut child = Command::new(env!("CARGO_BIN_EXE_openagents"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    let input = stdin.to_vec();
    // The binary may stop reading early (an oversized input); a broken pipe is expected then.
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let out = child.wait_with_output().expect("the binary ends");
    writer.join().expect("the writer thread ends");
    Outcome {
        code: out.status.code().expect("exited, not killed by a signal"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

const TURN: &str = r#"{"schema":"openagents.agent.runner.v1","assignment":"a1","conversation":"c1","agent":{"runner":"echo"},"task":"hi","cwd":"/tmp"}"#;

/// `(what, args, stdin, expected exit code, text stderr must contain)`.
fn cases() -> Vec<(&'static str, Vec<&'static str>, Vec<u8>, i32, &'static str)> {
    vec![
        ("valid turn", vec!["validate", "Turn"], TURN.as_bytes().to_vec(), 0, ""),
        ("valid turn, explicit -", vec!["validate", "Turn", "-"], TURN.as_bytes().to_vec(), 0, ""),
        (
            "wrong schema version names both",
            vec!["validate", "Turn"],
            TURN.replace("runner.v1", "runner.v2").into_bytes(),
            1,
            "/schema: must be \"openagents.agent.runner.v1\", found \"openagents.agent.runner.v2\"",
        ),
        (
            "smuggled executable",
            vec!["validate", "Turn"],
            TURN.replace(r#"{"runner":"echo"}"#, r#"{"runner":"echo","command":"/bin/sh"}"#).into_bytes(),
            1,
            "/agent/command: property `command` is not allowed",
        ),
        ("relative cwd", vec!["validate", "Turn"], TURN.replace("\"/tmp\"", "\"tmp\"").into_bytes(), 1, "/cwd: \"tmp\" does not match"),
        ("array instead of object", vec!["validate", "Turn"], b"[1,2]".to_vec(), 1, "(root): must be object, found array"),
        ("missing property", vec!["validate", "AgentSpec"], b"{}".to_vec(), 1, "(root): missing required property `runner`"),
        ("malformed JSON", vec!["validate", "Turn"], br#"{"a":"#.to_vec(), 2, "not a JSON document"),
        ("trailing data", vec!["validate", "Turn"], format!("{TURN} {{}}").into_bytes(), 2, "trailing characters"),
        ("invalid UTF-8", vec!["validate", "Turn"], b"{\"task\":\"\xff\"}".to_vec(), 2, "invalid UTF-8 at byte offset 9"),
        ("empty input", vec!["validate", "Turn"], Vec::new(), 2, "not a JSON document"),
        ("unknown type lists known ones", vec!["validate", "Nope"], Vec::new(), 2, "unknown type `Nope`; known types: ActiveTurn"),
        ("no type", vec!["validate"], Vec::new(), 2, "required arguments were not provided"),
        ("unreadable file", vec!["validate", "Turn", "/nonexistent/turn.json"], Vec::new(), 2, "cannot read /nonexistent/turn.json"),
    ]
}

#[test]
fn validate_exit_codes_and_messages() {
    for (what, args, stdin, code, needle) in cases() {
        let out = run(&args, &stdin);
        assert_eq!(out.code, code, "{what}: exit code; stderr: {}", out.stderr);
        assert!(out.stderr.contains(needle), "{what}: stderr lacks {needle:?}; got: {}", out.stderr);
    }
}

#[test]
fn deep_nesting_is_refused_without_overflow() {
    let depth = 100_000;
    let doc = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let out = run(&["validate", "Turn"], doc.as_bytes());
    assert_eq!(out.code, 2, "stderr: {}", out.stderr);
    assert!(out.stderr.contains("recursion limit exceeded"), "stderr: {}", out.stderr);
}

#[test]
fn oversized_input_is_refused_after_the_limit() {
    // 200 MB: the binary reads at most SERVER_MAX_LINE_BYTES + 1 and refuses the rest unread.
    let doc = vec![b' '; 200 * 1024 * 1024];
    let out = run(&["validate", "Turn"], &doc);
    assert_eq!(out.code, 2, "stderr: {}", out.stderr);
    assert!(out.stderr.contains("larger than 16777216 bytes"), "stderr: {}", out.stderr);
}

#[test]
fn input_at_the_limit_is_read() {
    // Exactly SERVER_MAX_LINE_BYTES bytes: read whole, then judged as JSON (a valid turn padded
    // with whitespace).
    let mut doc = TURN.as_bytes().to_vec();
    doc.resize(openagents_protocol::SERVER_MAX_LINE_BYTES, b' ');
    let out = run(&["validate", "Turn"], &doc);
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    doc.push(b' ');
    let out = run(&["validate", "Turn"], &doc);
    assert_eq!(out.code, 2, "one byte past the limit; stderr: {}", out.stderr);
}

#[test]
fn schema_prints_a_bundle_with_every_root_type() {
    let out = run(&["schema"], b"");
    assert_eq!(out.code, 0);
    let bundle: serde_json::Value = serde_json::from_str(&out.stdout).expect("the bundle is JSON");
    for root in ["Turn", "Event", "RpcRequest", "RuntimeStatus", "RuntimeSubmitError", "ServerEvent"] {
        assert!(bundle["$defs"][root].is_object(), "{root} missing from the bundle");
    }
    // Every $ref resolves inside the bundle.
    fn refs(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    if k == "$ref" {
                        out.push(x.as_str().unwrap_or_default().to_owned());
                    } else {
                        refs(x, out);
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(&bundle, &mut all);
    assert!(!all.is_empty());
    for r in all {
        let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("{r} is not local"));
        assert!(bundle.pointer(pointer).is_some(), "{r} does not resolve inside the bundle");
    }
}

mod run {
    use std::path::PathBuf;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    fn registry(name: &str, body: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("openagents-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let echo = PathBuf::from(env!("CARGO_BIN_EXE_openagents")).with_file_name("openagents-runner-echo");
        let script = dir.join("slow.sh");
        std::fs::write(&script, body).unwrap();
        let reg = dir.join("runners.toml");
        std::fs::write(
            &reg,
            format!(
                "[runners.echo]\ncommand = \"{}\"\n\n[runners.slow]\ncommand = \"/bin/bash\"\nargs = [\"{}\"]\n\n[runners.gone]\ncommand = \"/nonexistent/runner\"\n",
                echo.display(),
                script.display()
            ),
        )
        .unwrap();
        reg
    }

    fn openagents(reg: &PathBuf, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_openagents")).args(args).env("OPENAGENTS_RUNNERS", reg).stdin(Stdio::null()).output().unwrap()
    }

    #[test]
    fn run_streams_text_and_ends_with_the_result() {
        let reg = registry("stream", "");
        let out = openagents(&reg, &["run", "--runner", "echo", "hello world"]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        // Only the answer on stdout; the progress text, as it arrived, on stderr.
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hello world\n");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "hello world\n");
        let out = openagents(&reg, &["run", "--json", "--runner", "echo", "--assignment", "asg-7", "hello world"]);
        let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let kinds: Vec<&str> = lines.iter().map(|l| l["event"]["type"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["turn_started", "text", "text", "turn_completed"]);
        assert_eq!(lines[0]["event"]["assignment"], "asg-7");
        assert_eq!(lines[3]["event"]["result"], "hello world");
        let seqs: Vec<i64> = lines.iter().map(|l| l["seq"].as_i64().unwrap()).collect();
        assert_eq!(seqs, [1, 2, 3, 4]);
    }

    #[test]
    fn run_failures_exit_1_with_the_reason() {
        let reg = registry("fail", "read -r _; echo '{\"type\":\"failed\",\"message\":\"cannot do that\"}'");
        let cases = [
            (vec!["run", "--runner", "slow", "x"], "the runner failed: cannot do that (runner_failed)"),
            // The caller's message says only "unknown runner"; `run`'s caller is the operator,
            // whose log (the same stderr) has the rest.
            (vec!["run", "--runner", "nope", "x"], "unknown runner (runner_not_found)"),
            (vec!["run", "--runner", "nope", "x"], "known runners: echo, gone, slow"),
            (vec!["run", "--runner", "gone", "x"], "cannot start runner `gone`"),
            (vec!["run", "--runner", "echo", "--cwd", "/nonexistent", "x"], "cwd is not an accessible folder (invalid_params)"),
            (vec!["run", "--runner", "echo", "--cwd", "/nonexistent", "x"], "the working folder /nonexistent cannot be used"),
        ];
        for (args, needle) in cases {
            let out = openagents(&reg, &args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    }

    #[test]
    fn ctrl_c_kills_the_runner_and_exits_130() {
        let reg = registry("ctrlc", "read -r _; echo '{\"type\":\"text\",\"text\":\"started\"}'; sleep 30");
        let mut child = Command::new(env!("CARGO_BIN_EXE_openagents"))
            .args(["run", "--runner", "slow", "x"])
            .env("OPENAGENTS_RUNNERS", &reg)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Wait for the runner's first event (progress, on stderr: a readiness line), then
        // interrupt.
        let mut stderr = child.stderr.take().unwrap();
        let mut buf = [0u8; 7];
        std::io::Read::read_exact(&mut stderr, &mut buf).unwrap();
        assert_eq!(&buf, b"started");
        let started = Instant::now();
        nix_kill(child.id());
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    fn nix_kill(pid: u32) {
        let ok = Command::new("kill").args(["-INT", &pid.to_string()]).status().unwrap();
        assert!(ok.success());
    }

    #[test]
    fn run_denies_approvals_because_nobody_can_answer() {
        let dir = std::env::temp_dir().join(format!("openagents-cli-{}-ask", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ask = PathBuf::from(env!("CARGO_BIN_EXE_openagents")).with_file_name("openagents-runner-ask");
        let reg = dir.join("runners.toml");
        std::fs::write(&reg, format!("[runners.ask]\ncommand = \"{}\"\n", ask.display())).unwrap();
        let out = openagents(&reg, &["run", "--json", "--runner", "ask", "deploy"]);
        assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
        let kinds: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["event"]["type"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(kinds, ["turn_started", "text", "approval_denied", "turn_failed"]);
        assert!(String::from_utf8_lossy(&out.stderr).contains("denied: deploy (runner_failed)"));
    }

    #[test]
    fn runners_lists_the_registry() {
        let reg = registry("list", "");
        let out = openagents(&reg, &["runners"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0));
        assert!(text.lines().any(|l| l.starts_with("echo\t") && l.ends_with("\tok")), "{text}");
        assert!(text.lines().any(|l| l.starts_with("gone\t/nonexistent/runner\tmissing")), "{text}");
        // A broken registry is a clear error naming the file and line.
        std::fs::write(&reg, "[runners.x]\ncommand = \"relative\"\n").unwrap();
        let out = openagents(&reg, &["runners"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("runners.toml:2: runner `x`: command `relative` must be an absolute path"));
    }
}
