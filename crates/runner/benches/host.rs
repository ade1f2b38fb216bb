//! Runner host throughput, side by side with the floor of the same process work without the
//! contract: (1) turns per second through a trivial runner (spawn + exchange), against spawning
//! the same executable and exchanging the same bytes over plain pipes; (2) events per second from
//! a runner streaming ~1 MiB of 100-byte `text` events, against reading the same bytes from a
//! plain pipe. Run with `cargo bench -p openagents-runner --bench host`; prints medians and
//! ratios.
//!
//! For instruction counts (callgrind), `HOST_BENCH="<turns|events> <host|floor> <rounds>"` runs
//! only that part and side, that many rounds: the difference between two round counts is the
//! cost of the rounds in between.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use openagents_protocol::{Event, MAX_OUTPUT, Turn};
use openagents_runner::RunnerSpec;
use openagents_runner::host::run_turn;
use tokio_util::sync::CancellationToken;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn echo_runner() -> PathBuf {
    // target/<profile>/deps/host-xxxx -> target/<profile>/openagents-runner-echo
    let exe = std::env::current_exe().expect("bench executable");
    let dir = exe.parent().and_then(|p| p.parent()).expect("target dir");
    for profile in [dir.to_path_buf(), dir.join("../debug"), dir.join("../release")] {
        let p = profile.join("openagents-runner-echo");
        if p.exists() {
            return p;
        }
    }
    panic!("build the echo runner first: cargo build -p openagents-runner");
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let dir = std::env::temp_dir().join(format!("openagents-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let cwd = dir.display().to_string();
    let echo = echo_runner();
    // `HOST_BENCH="<part> <side> <rounds>"`: one part and side only (see the module doc).
    let only = std::env::var("HOST_BENCH").ok();
    let only: Option<Vec<String>> = only.map(|v| v.split_whitespace().map(str::to_owned).collect());
    let wants = |part: &str, side: &str| only.as_ref().is_none_or(|o| o[0] == part && o[1] == side);
    let rounds: usize = only.as_ref().map_or(7, |o| o[2].parse().expect("HOST_BENCH rounds"));

    // (1) Turns per second.
    let spec = RunnerSpec { id: "echo".into(), command: echo.clone(), args: vec![], env: BTreeMap::new(), timeout: Duration::from_secs(30), sandbox: None };
    let turn = Turn::new("a1", "c1", "echo", "hello", cwd.clone());
    let line = serde_json::to_string(&turn).expect("encode") + "\n";
    let per_round = 20;
    let (mut host_t, mut floor_t) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let start = Instant::now();
        for _ in 0..if wants("turns", "host") { per_round } else { 0 } {
            let mut sink = |_: &Event| {};
            let report = rt.block_on(run_turn(&spec, &turn, &CancellationToken::new(), &mut sink));
            assert_eq!(report.outcome.as_deref().ok(), Some("hello"));
        }
        host_t.push(start.elapsed() / per_round);
        let start = Instant::now();
        for _ in 0..if wants("turns", "floor") { per_round } else { 0 } {
            let mut child = Command::new(&echo).current_dir(&dir).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn");
            child.stdin.take().expect("stdin").write_all(line.as_bytes()).expect("write");
            let mut out = String::new();
            BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut out).expect("read");
            child.wait().expect("wait");
            assert!(out.contains("hello"));
        }
        floor_t.push(start.elapsed() / per_round);
    }
    if only.is_none() {
        let (h, f) = (median(host_t), median(floor_t));
        println!("turns: host {:>8.1} turns/s ({h:?}/turn)   floor (spawn + pipes) {:>8.1} turns/s ({f:?}/turn)   host/floor throughput = {:.2}", 1.0 / h.as_secs_f64(), 1.0 / f.as_secs_f64(), f.as_secs_f64() / h.as_secs_f64());
    }

    // (2) Events per second: ~1 MiB of 100-byte text events.
    let event = format!(r#"{{"type":"text","text":"{}"}}"#, "x".repeat(100 - r#"{"type":"text","text":""}"#.len()));
    assert_eq!(event.len(), 100);
    let terminal = r#"{"type":"completed","result":"done"}"#;
    let count = (MAX_OUTPUT - terminal.len() - 1) / (event.len() + 1);
    let payload = dir.join("payload.jsonl");
    std::fs::write(&payload, format!("{}\n{terminal}\n", vec![event.as_str(); count].join("\n"))).expect("payload");
    let spec = RunnerSpec { id: "flood".into(), command: "/bin/cat".into(), args: vec![payload.display().to_string()], env: BTreeMap::new(), timeout: Duration::from_secs(30), sandbox: None };
    let (mut host_t, mut floor_t) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        if only.is_some() {
            if wants("events", "host") {
                let report = rt.block_on(run_turn(&spec, &turn, &CancellationToken::new(), &mut |_: &Event| {}));
                assert_eq!(report.outcome.as_deref().ok(), Some("done"));
            }
            if wants("events", "floor") {
                let mut child = Command::new("/bin/cat").arg(&payload).stdout(Stdio::piped()).spawn().expect("spawn");
                assert_eq!(BufReader::new(child.stdout.take().expect("stdout")).lines().count(), count + 1);
                child.wait().expect("wait");
            }
            continue;
        }
        let start = Instant::now();
        let mut n = 0usize;
        let mut sink = |_: &Event| n += 1;
        let report = rt.block_on(run_turn(&spec, &turn, &CancellationToken::new(), &mut sink));
        assert_eq!(report.outcome.as_deref().ok(), Some("done"));
        assert_eq!(n, count + 1);
        host_t.push(start.elapsed());
        let start = Instant::now();
        let mut child = Command::new("/bin/cat").arg(&payload).stdout(Stdio::piped()).spawn().expect("spawn");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines().count();
        child.wait().expect("wait");
        assert_eq!(lines, count + 1);
        floor_t.push(start.elapsed());
    }
    if only.is_some() {
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let (h, f) = (median(host_t), median(floor_t));
    let per_s = |d: Duration| (count + 1) as f64 / d.as_secs_f64();
    println!("events: host {:>10.0} events/s ({h:?} per MiB)   floor (plain pipe, lines only) {:>10.0} events/s ({f:?})   host/floor throughput = {:.2}", per_s(h), per_s(f), f.as_secs_f64() / h.as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
}
