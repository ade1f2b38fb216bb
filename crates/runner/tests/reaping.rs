//! Nothing a runner starts outlives its turn, not even a process that double-forked and called
//! `setsid` to leave the runner's process group (the host is a child subreaper and sweeps what
//! it adopted); and the sweep of one turn never touches what a turn still running started.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use openagents_protocol::{Event, Turn};
use openagents_runner::RunnerSpec;
use openagents_runner::host::{TurnReport, run_turn};
use tokio_util::sync::CancellationToken;

/// The tests take turns: a process one test's runner left behind while another test's runner
/// is still running is, by design, only swept when both have ended.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("openagents-reaping-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

/// Starts, in a new session two forks below the runner, a process that starts a child of its
/// own; both write their pids to `./escaped` and sleep for 300 s. The runner waits until both
/// pids are written, so the escape has happened before it goes on.
const ESCAPE: &str = r#"( setsid bash -c 'sleep 300 & echo $! >> escaped; echo $$ >> escaped; exec sleep 300' </dev/null >/dev/null 2>&1 & )
while [ "$(wc -l < escaped 2>/dev/null || echo 0)" -lt 2 ]; do sleep 0.01; done"#;

const DONE: &str = r#"echo '{"type":"completed","result":"done"}'"#;

fn runner(name: &str, body: &str, timeout: Duration) -> (RunnerSpec, PathBuf) {
    let dir = scratch(name);
    let script = dir.join("runner.sh");
    std::fs::write(&script, format!("set -u\nread -r _\n{body}\n")).expect("script");
    let spec = RunnerSpec { id: name.replace('_', "-"), command: PathBuf::from("/bin/bash"), args: vec![script.display().to_string()], env: BTreeMap::new(), timeout, sandbox: None };
    (spec, dir)
}

async fn run(spec: &RunnerSpec, dir: &Path, cancel: CancellationToken) -> TurnReport {
    run_interrupted_on_text(spec, dir, cancel, false).await
}

/// [`run`]; with `on_text`, `cancel` fires when the runner's first text event arrives.
async fn run_interrupted_on_text(spec: &RunnerSpec, dir: &Path, cancel: CancellationToken, on_text: bool) -> TurnReport {
    let turn = Turn::new("asg-1", "conv-1", spec.id.as_str(), "escape", dir.display().to_string());
    let mut on_event = |e: &Event| {
        if on_text && matches!(e, Event::Text { .. }) {
            cancel.cancel();
        }
    };
    run_turn(spec, &turn, &cancel, &mut on_event).await
}

fn escaped(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("escaped")).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// Running or stopped, not a zombie (which has exited and only waits to be reaped).
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'),
        Err(_) => false,
    }
}

/// The pid's session id (`/proc/<pid>/stat` field 6).
fn session(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.split_whitespace().nth(3)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_that_double_forks_and_calls_setsid_leaves_nothing_behind() {
    let _serial = ONE_AT_A_TIME.lock().await;
    // (name, body after the escape, interrupted on its text event, the runner's time limit,
    // expected outcome). The escape must be done within the time limit, so only the case that
    // wants the timeout has a short one; the interrupt comes on the text the runner prints after
    // the escape, never on a clock the escape could outrun.
    let cases: &[(&str, &str, bool, Duration, &str)] = &[
        ("completes", DONE, false, Duration::from_secs(20), "Ok(\"done\")"),
        ("is_interrupted", "echo '{\"type\":\"text\",\"text\":\"working\"}'; sleep 300", true, Duration::from_secs(20), "Err(Interrupted)"),
        ("times_out", "sleep 300", false, Duration::from_secs(2), "Err(Timeout(2s))"),
        ("exits_without_a_word", "exit 0", false, Duration::from_secs(20), "Err(NoTerminal(Some(ExitStatus(unix_wait_status(0)))))"),
    ];
    for (name, body, interrupt, timeout, want) in cases {
        let (spec, dir) = runner(name, &format!("{ESCAPE}\n{body}"), *timeout);
        let report = run_interrupted_on_text(&spec, &dir, CancellationToken::new(), *interrupt).await;
        assert_eq!(format!("{:?}", report.outcome), *want, "{name}: {}", report.stderr);
        let pids = escaped(&dir);
        assert_eq!(pids.len(), 2, "{name}: the escape did not happen: {pids:?}");
        let own_session = session(std::process::id());
        for pid in pids {
            // Checked at once: the turn is over, so nothing it started may still run.
            assert!(!running(pid), "{name}: process {pid} (session {:?}, ours {own_session:?}) survived the turn", session(pid));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_end_of_one_turn_leaves_what_a_running_turn_started_alone() {
    let _serial = ONE_AT_A_TIME.lock().await;
    // Turn A escapes, then waits for `go`; turn B starts after A escaped, and ends first.
    let (a, dir_a) = runner("running", &format!("{ESCAPE}\nwhile [ ! -e go ]; do sleep 0.01; done\n{DONE}"), Duration::from_secs(20));
    let (b, dir_b) = runner("ending", DONE, Duration::from_secs(20));
    let turn_a = {
        let dir_a = dir_a.clone();
        tokio::spawn(async move { run(&a, &dir_a, CancellationToken::new()).await })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while escaped(&dir_a).len() < 2 {
        assert!(std::time::Instant::now() < deadline, "turn A did not escape");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let report_b = run(&b, &dir_b, CancellationToken::new()).await;
    assert_eq!(report_b.outcome.ok().as_deref(), Some("done"));
    for pid in escaped(&dir_a) {
        assert!(running(pid), "the end of turn B killed process {pid}, which turn A (still running) started");
    }
    std::fs::write(dir_a.join("go"), "").unwrap();
    let report_a = turn_a.await.unwrap();
    assert_eq!(report_a.outcome.ok().as_deref(), Some("done"));
    for pid in escaped(&dir_a) {
        assert!(!running(pid), "process {pid}, which turn A started, survived turn A");
    }
}

/// Every thread of `pid` has exited (or the process is gone): a process whose main thread alone
/// has exited shows `Z` in its own `stat` while its other threads run.
fn all_threads_gone(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return true };
    tasks.flatten().all(|t| std::fs::read_to_string(t.path().join("stat")).map_or(true, |stat| stat.rsplit(')').next().unwrap_or("").trim_start().starts_with(['Z', 'X'])))
}

/// A process left behind whose main thread has exited while another thread runs looks like a
/// zombie in `/proc/<pid>/stat`; it is killed all the same, not waited for as one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leftover_that_only_looks_like_a_zombie_is_killed() {
    let _serial = ONE_AT_A_TIME.lock().await;
    // In a new session, two forks below the runner: python whose main thread calls
    // pthread_exit while a second thread sleeps; the runner waits until the main thread is gone.
    let body = r#"cat > fake.py <<'PY'
import ctypes, os, threading, time
threading.Thread(target=lambda: time.sleep(300)).start()
with open("escaped", "a") as f:
    f.write(f"{os.getpid()}\n")
ctypes.CDLL(None).pthread_exit(None)
PY
( setsid python3 fake.py </dev/null >/dev/null 2>&1 & )
while [ "$(wc -l < escaped 2>/dev/null || echo 0)" -lt 1 ]; do sleep 0.01; done
pid=$(cat escaped)
while [ "$(cut -d' ' -f3 /proc/$pid/stat 2>/dev/null)" != Z ]; do sleep 0.01; done
echo '{"type":"completed","result":"done"}'"#;
    let (spec, dir) = runner("looks_like_a_zombie", body, Duration::from_secs(20));
    let report = run(&spec, &dir, CancellationToken::new()).await;
    assert_eq!(report.outcome.as_deref().ok(), Some("done"), "{}", report.stderr);
    let pids = escaped(&dir);
    assert_eq!(pids.len(), 1, "the escape did not happen: {pids:?}");
    for pid in pids {
        let alive = !all_threads_gone(pid);
        if alive {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
        }
        assert!(!alive, "process {pid}, its main thread gone and another running, survived the turn");
    }
}
