//! The host against hostile runners: every breach ends the turn with its own typed error, the
//! host stays usable, and no process is left behind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use openagents_protocol::rt::{self, DocumentError};
use openagents_protocol::{ErrorCode, Event, MAX_OUTPUT, Turn};
use openagents_runner::host::{STDERR_TAIL_BYTES, TurnError, TurnReport, run_turn};
use openagents_runner::{Registry, RunnerHost, RunnerSpec};
use tokio_util::sync::CancellationToken;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("openagents-host-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

/// A bash runner whose body runs after `record` (which notes the runner's pid in `./pids`).
fn script_runner(name: &str, body: &str, timeout: Duration) -> (RunnerSpec, PathBuf) {
    let dir = scratch(name);
    let script = dir.join("runner.sh");
    let text = format!("set -u\nrecord() {{ echo \"$1\" >> \"$PWD/pids\"; }}\nrecord $$\n{body}\n");
    std::fs::write(&script, text).expect("script");
    let spec = RunnerSpec {
        id: name.replace('_', "-"),
        command: PathBuf::from("/bin/bash"),
        args: vec![script.display().to_string()],
        env: BTreeMap::new(),
        timeout,
        sandbox: None,
    };
    (spec, dir)
}

fn turn_in(dir: &Path, runner: &str) -> Turn {
    Turn::new("asg-1", "conv-1", runner, "do the thing", dir.display().to_string())
}

/// Runs one turn; with `interrupt_on_text`, the turn is interrupted as soon as the runner's first
/// text event arrives (a state the runner reached, not a clock that a loaded machine outruns).
async fn run(spec: &RunnerSpec, dir: &Path, interrupt_on_text: bool) -> (TurnReport, Vec<Event>) {
    let cancel = CancellationToken::new();
    let mut events = Vec::new();
    let mut on_event = |e: &Event| {
        if interrupt_on_text && matches!(e, Event::Text { .. }) {
            cancel.cancel();
        }
        events.push(e.clone());
    };
    let report = run_turn(spec, &turn_in(dir, &spec.id), &cancel, &mut on_event).await;
    (report, events)
}

fn alive(pid: u32) -> bool {
    // A zombie has exited; it is only waiting for its parent (or init) to reap it.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'),
        Err(_) => false,
    }
}

fn assert_no_process_left(dir: &Path, what: &str) {
    let pids = std::fs::read_to_string(dir.join("pids")).unwrap_or_default();
    let pids: Vec<u32> = pids.lines().filter_map(|l| l.trim().parse().ok()).collect();
    // Killed processes may take a moment to be reaped by init.
    let deadline = Instant::now() + Duration::from_secs(5);
    for pid in pids {
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(pid), "{what}: process {pid} was left running");
    }
}

const OK: &str = r#"echo '{"type":"completed","result":"ok"}'"#;

/// Waits until everything written to stderr has been read from the pipe, so the host has it
/// before the turn ends (it gives its stderr reader only a moment after the runner is gone).
const STDERR_READ: &str = r#"python3 -c 'import fcntl, struct, termios, time
while struct.unpack("i", fcntl.ioctl(2, termios.FIONREAD, bytes(4)))[0]: time.sleep(0.01)'"#;

/// A body that reads the turn and writes `first` and `second` as two lines in a single write (one
/// `cat` of a here-document; bash's own `echo` and `printf` write line by line), so the second
/// line cannot miss the host's grace for lines after a terminal one, however slow the machine.
fn at_once(first: &str, second: &str) -> String {
    format!("read -r _; cat <<'LINES'\n{first}\n{second}\nLINES")
}

/// `(name, script body, expected code, check on the error)`.
fn breaches() -> Vec<(&'static str, String, ErrorCode, fn(&TurnError) -> bool)> {
    vec![
        ("line_too_long", "read -r _; head -c 200000 /dev/zero | tr '\\0' a; echo".into(), ErrorCode::FrameTooLarge, |e| matches!(e, TurnError::FrameTooLarge)),
        (
            "floods_stdout",
            "read -r _; yes '{\"type\":\"text\",\"text\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}' | head -c 100000000".into(),
            ErrorCode::OutputTooLarge,
            |e| matches!(e, TurnError::OutputTooLarge),
        ),
        ("not_json", "read -r _; echo 'hello there'".into(), ErrorCode::RunnerFailed, |e| matches!(e, TurnError::InvalidJson { line: 1, .. })),
        ("invalid_utf8", "read -r _; printf '{\"type\":\"text\",\"text\":\"\\xff\\xfe\"}\\n'".into(), ErrorCode::RunnerFailed, |e| matches!(e, TurnError::InvalidUtf8 { line: 1 })),
        (
            "invalid_event",
            "read -r _; echo '{\"type\":\"text\",\"text\":\"x\",\"command\":\"rm\"}'".into(),
            ErrorCode::RunnerFailed,
            |e| matches!(e, TurnError::InvalidEvent { violations, .. } if violations[0].pointer == "/command"),
        ),
        ("text_after_terminal", at_once(r#"{"type":"completed","result":"ok"}"#, r#"{"type":"text","text":"late"}"#), ErrorCode::RunnerFailed, |e| matches!(e, TurnError::AfterTerminal)),
        ("second_terminal", at_once(r#"{"type":"completed","result":"ok"}"#, r#"{"type":"completed","result":"ok"}"#), ErrorCode::RunnerFailed, |e| matches!(e, TurnError::SecondTerminal)),
        ("eof_without_terminal", "read -r _; echo '{\"type\":\"text\",\"text\":\"x\"}'".into(), ErrorCode::RunnerFailed, |e| matches!(e, TurnError::NoTerminal(Some(s)) if s.success())),
        ("exits_before_reading", "exit 3".into(), ErrorCode::RunnerFailed, |e| matches!(e, TurnError::NoTerminal(Some(s)) if s.code() == Some(3))),
        ("reports_failure", "read -r _; echo '{\"type\":\"failed\",\"message\":\"no luck\"}'".into(), ErrorCode::RunnerFailed, |e| matches!(e, TurnError::Failed(m) if m == "no luck")),
        ("hangs", "read -r _; sleep 30".into(), ErrorCode::Timeout, |e| matches!(e, TurnError::Timeout(_))),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_breach_has_its_own_typed_error_and_leaves_nothing_behind() {
    for (name, body, code, check) in breaches() {
        let (spec, dir) = script_runner(name, &body, Duration::from_secs(2));
        let started = Instant::now();
        let (report, _) = run(&spec, &dir, false).await;
        let err = report.outcome.as_ref().expect_err(name);
        assert!(check(err), "{name}: unexpected error {err:?}");
        assert_eq!(err.code(), code, "{name}: {err}");
        assert_eq!(err.to_runtime_error().code, code, "{name}");
        assert!(started.elapsed() < Duration::from_secs(10), "{name}: took {:?}", started.elapsed());
        assert_no_process_left(&dir, name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_that_ignores_sigterm_is_killed_on_interrupt() {
    // It says "working" once its child is recorded; the interrupt comes on that event.
    let (spec, dir) = script_runner("ignores_sigterm", "trap '' TERM; read -r _; sleep 30 & record $!; echo '{\"type\":\"text\",\"text\":\"working\"}'; wait", Duration::from_secs(30));
    let started = Instant::now();
    let (report, events) = run(&spec, &dir, true).await;
    assert!(matches!(report.outcome, Err(TurnError::Interrupted)), "{:?}", report.outcome);
    assert_eq!(events, vec![Event::Text { text: "working".into() }]);
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert_no_process_left(&dir, "ignores_sigterm");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_holding_stdout_open_does_not_hold_the_turn() {
    let (spec, dir) = script_runner("grandchild", &format!("read -r _; (sleep 30; echo late) & record $!; {OK}"), Duration::from_secs(30));
    let started = Instant::now();
    let (report, _) = run(&spec, &dir, false).await;
    assert_eq!(report.outcome.as_ref().ok().map(String::as_str), Some("ok"), "{:?}", report.outcome);
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert_no_process_left(&dir, "grandchild");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_that_never_reads_stdin_still_completes() {
    let (spec, dir) = script_runner("never_reads", OK, Duration::from_secs(5));
    let (report, _) = run(&spec, &dir, false).await;
    assert_eq!(report.outcome.ok().as_deref(), Some("ok"));
    assert_no_process_left(&dir, "never_reads");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stderr_is_kept_bounded_and_out_of_the_result() {
    let (spec, dir) = script_runner("noisy", &format!("read -r _; head -c 1000000 /dev/zero | tr '\\0' e >&2; echo tail-marker >&2; {STDERR_READ}; {OK}"), Duration::from_secs(5));
    let (report, _) = run(&spec, &dir, false).await;
    assert_eq!(report.outcome.as_deref().ok(), Some("ok"));
    assert!(report.stderr.len() <= STDERR_TAIL_BYTES, "{}", report.stderr.len());
    assert!(report.stderr.trim_end().ends_with("tail-marker"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_exactly_at_the_limit_is_accepted() {
    // Text events filling stdout to exactly MAX_OUTPUT bytes, the terminal line included.
    let terminal = r#"{"type":"completed","result":"ok"}"#;
    let frame = |n: usize| format!(r#"{{"type":"text","text":"{}"}}"#, "a".repeat(n));
    let overhead = frame(0).len() + 1;
    let mut left = MAX_OUTPUT - (terminal.len() + 1);
    let mut lines = Vec::new();
    while left > 0 {
        let n = (left - overhead).min(60_000);
        let n = if left - (n + overhead) > 0 && left - (n + overhead) < overhead { n - overhead } else { n };
        lines.push(frame(n));
        left -= n + overhead;
    }
    let dir = scratch("at_limit");
    let payload = dir.join("payload");
    std::fs::write(&payload, format!("{}\n{terminal}\n", lines.join("\n"))).unwrap();
    assert_eq!(std::fs::metadata(&payload).unwrap().len() as usize, MAX_OUTPUT);
    let spec = RunnerSpec { id: "at-limit".into(), command: "/bin/bash".into(), args: vec!["-c".into(), format!("read -r _; cat {}", payload.display())], env: BTreeMap::new(), timeout: Duration::from_secs(5), sandbox: None };
    let (report, _) = run(&spec, &dir, false).await;
    assert_eq!(report.outcome.as_deref().ok(), Some("ok"), "{:?}", report.outcome);
    // One byte more is a breach.
    std::fs::write(&payload, format!("{}\n {terminal}\n", lines.join("\n"))).unwrap();
    let (report, _) = run(&spec, &dir, false).await;
    assert!(matches!(report.outcome, Err(TurnError::OutputTooLarge)), "{:?}", report.outcome);
}

// The echo runner's turns and the descriptor count across them are in tests/fd_leak.rs, a
// process of their own: the count covers the whole process, and the tests here open and close
// pipes on parallel threads.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_refused_before_anything_is_spawned() {
    let dir = scratch("refused");
    let marker = dir.join("spawned");
    let registry = Registry::parse(&format!("[runners.r]\ncommand = \"/bin/bash\"\nargs = [\"-c\", \"touch {}\"]\n", marker.display()), None).unwrap();
    let host = RunnerHost::new(registry);
    let cancel = CancellationToken::new();
    let mut ignore = |_: &Event| {};
    // An unknown runner: runner_not_found, saying only that (the known ids are for the
    // operator's log).
    let report = host.run(&turn_in(&dir, "nope"), &cancel, &mut ignore).await;
    let err = report.outcome.unwrap_err().to_runtime_error();
    assert_eq!(err.code, ErrorCode::RunnerNotFound);
    assert_eq!(err.message, "unknown runner");
    assert_eq!(err.details.and_then(|d| d.known), None);
    // A working folder that does not exist.
    let mut t = turn_in(&dir, "r");
    t.cwd = "/nonexistent/folder".into();
    assert!(matches!(host.run(&t, &cancel, &mut ignore).await.outcome, Err(TurnError::BadCwd { .. })));
    // An invalid turn (relative cwd, path traversal).
    t.cwd = "../../etc".into();
    assert!(matches!(host.run(&t, &cancel, &mut ignore).await.outcome, Err(TurnError::InvalidTurn(_))));
    // A turn trying to smuggle an executable never decodes.
    let smuggled = format!(
        r#"{{"schema":"openagents.agent.runner.v1","assignment":"a","conversation":"c","agent":{{"runner":"r","command":"/bin/sh","args":["-c","id"]}},"task":"x","cwd":"{}"}}"#,
        dir.display()
    );
    match rt::parse_validated::<Turn>(smuggled.as_bytes()) {
        Err(DocumentError::Invalid(v)) => assert!(v.iter().any(|x| x.pointer == "/agent/command")),
        other => panic!("smuggled turn decoded: {other:?}"),
    }
    // A missing executable.
    let spec = RunnerSpec { id: "gone".into(), command: "/nonexistent/runner".into(), args: vec![], env: BTreeMap::new(), timeout: Duration::from_secs(1), sandbox: None };
    let (report, _) = run(&spec, &dir, false).await;
    assert!(matches!(report.outcome, Err(TurnError::Spawn { .. })));
    assert!(!marker.exists(), "nothing was spawned for the refused requests");
}
