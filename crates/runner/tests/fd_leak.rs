//! The host stays usable turn after turn and leaks no file descriptor.
//!
//! A file of its own, so a process of its own: `/proc/self/fd` counts the whole process, and
//! any other test running beside this one (runner pipes, scratch files, each `#[tokio::test]`'s
//! own runtime) would change the count between the two readings. Keep this file to this one test.

use openagents_protocol::{Event, Turn};
use openagents_runner::{Registry, RunnerHost};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_echo_runner_streams_and_completes_and_the_host_stays_usable() {
    let dir = std::env::temp_dir().join(format!("openagents-fd-leak-{}-echo", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let registry = Registry::parse(&format!("[runners.echo]\ncommand = \"{}\"\n", env!("CARGO_BIN_EXE_openagents-runner-echo")), None).unwrap();
    let host = RunnerHost::new(registry);
    let fds = || std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0);
    // A first turn warms up the runtime's own descriptors; then turns must not leak any.
    let mut warm = |_: &Event| {};
    let _ = host.run(&Turn::new("a0", "c0", "echo", "warm up", dir.display().to_string()), &CancellationToken::new(), &mut warm).await;
    let before = fds();
    for _ in 0..3 {
        let mut events = Vec::new();
        let mut on_event = |e: &Event| events.push(e.clone());
        let turn = Turn::new("a1", "c1", "echo", "hello brave new world", dir.display().to_string());
        let report = host.run(&turn, &CancellationToken::new(), &mut on_event).await;
        assert_eq!(report.outcome.as_deref().ok(), Some("hello brave new world"), "{:?}", report.outcome);
        let texts: Vec<&str> = events.iter().filter(|e| !e.terminal()).map(Event::text).collect();
        assert_eq!(texts, ["hello", "brave", "new", "world"]);
        assert!(report.stderr.contains("echo: turn a1"));
    }
    assert_eq!(fds(), before, "file descriptors leaked across turns");
}
