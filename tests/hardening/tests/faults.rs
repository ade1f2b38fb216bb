//! Fault injection against the real binary: runners killed from outside, hanging, flooding,
//! exiting early; clients that disconnect mid-`submit`; a subscriber that stops reading;
//! `shutdown` under load. After each, the invariants hold: every accepted turn ends in exactly
//! one terminal outcome that every subscriber sees (or is told it missed), sequence numbers
//! have no silent gaps, counters add up, no runner process survives, and the server's
//! descriptors and memory come back within bounds.

use std::io::Write;
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use openagents_hardening::client::{self, Resp, Sse, SseEvent, Ws, rpc_head, send_half_closed};
use openagents_hardening::harness::{HttpServer, Setup, fd_count, groups_gone, proc_status, settled_fd_count, wait_for};
use openagents_hardening::invariants::StreamCheck;
use openagents_protocol::{MAX_FRAME, SERVER_EVENT_CHANNEL_CAPACITY};
use serde_json::{Value, json};

const STEP: Duration = Duration::from_secs(20);

fn submit_in_background(addr: SocketAddr, token: &str, params: Value) -> JoinHandle<Resp> {
    let token = token.to_owned();
    std::thread::spawn(move || client::call(addr, Some(&token), "submit", params))
}

/// Reads `sse` until the current turn's terminal event, checking every event.
fn until_terminal(sse: &mut Sse, check: &mut StreamCheck) -> Vec<SseEvent> {
    let (events, done) = sse.until(STEP, |e| matches!(e.kind(), "turn_completed" | "turn_failed"));
    for e in &events {
        check.push(&e.data).unwrap_or_else(|err| panic!("{err}"));
    }
    assert!(done, "no terminal event within {STEP:?}; got {:?}", events.iter().map(SseEvent::kind).collect::<Vec<_>>());
    events
}

fn counters_add_up(server: &HttpServer) -> Value {
    let s = server.status();
    let c = &s["counters"];
    let n = |k: &str| c[k].as_i64().unwrap_or(-1);
    let active = i64::from(!s["active_turn"].is_null());
    assert_eq!(n("submitted"), n("completed") + n("failed") + n("interrupted") + active, "counters: {s}");
    s
}

#[test]
fn runner_faults_end_in_one_terminal_event_and_leave_no_process() {
    let setup = Setup::new("runner-faults");
    let server = setup.http();
    let mut sse = Sse::open(server.addr, Some(&setup.tokens.observer), None).expect("events");
    let mut check = StreamCheck::idle();
    // Warm up, then take the baseline of descriptors.
    let r = client::call(server.addr, Some(&setup.tokens.controller), "submit", json!({"task": "warm up"}));
    assert_eq!(r.json()["result"]["result"], "warm up", "{}", r.text());
    until_terminal(&mut sse, &mut check);
    let fds_before = settled_fd_count(server.pid);

    // (runner, expected code, how long it may take). `hang` is ended by its 1 s time limit and
    // the kill grace; the bounds leave a loaded machine several seconds beyond that, and still
    // catch a runner that was waited for instead of ended.
    let faults: &[(&str, &str, Duration)] = &[
        ("hang", "timeout", Duration::from_secs(10)),
        ("flood", "output_too_large", Duration::from_secs(20)),
        ("early", "runner_failed", Duration::from_secs(10)),
        ("notjson", "runner_failed", Duration::from_secs(10)),
    ];
    for (runner, code, within) in faults {
        let started = Instant::now();
        let r = client::call(server.addr, Some(&setup.tokens.controller), "submit", json!({"task": "go", "runner": runner}));
        assert_eq!(r.code().as_deref(), Some(*code), "{runner}: {}", r.text());
        assert!(started.elapsed() < *within, "{runner}: took {:?}", started.elapsed());
        let events = until_terminal(&mut sse, &mut check);
        let last = events.last().expect("a terminal event");
        assert_eq!(last.kind(), "turn_failed", "{runner}");
        assert_eq!(last.data["event"]["error"]["code"], *code, "{runner}: the event carries the same typed error");
        assert_eq!(setup.pids(runner).len(), 1, "{runner}: one process per turn");
        let groups = setup.groups(runner);
        assert_eq!(groups.len(), 1, "{runner}: its group recorded");
        let left = groups_gone(&groups, Duration::from_secs(5));
        assert!(left.is_empty(), "{runner}: processes {left:?} of its group survived");
        counters_add_up(&server);
    }

    // Killed from outside mid-turn: `kill -9` on the runner while its child sleeps.
    let pending = submit_in_background(server.addr, &setup.tokens.controller, json!({"task": "go", "runner": "sleeper"}));
    let (events, started) = sse.until(STEP, |e| e.kind() == "text");
    assert!(started, "the sleeper never wrote its text: {:?}", events.iter().map(SseEvent::kind).collect::<Vec<_>>());
    for e in &events {
        check.push(&e.data).unwrap_or_else(|err| panic!("{err}"));
    }
    let pid = setup.pids("sleeper")[0];
    kill(Pid::from_raw(pid as i32), Signal::SIGKILL).expect("kill -9 the runner");
    let r = pending.join().expect("the submit thread");
    assert_eq!(r.code().as_deref(), Some("runner_failed"), "{}", r.text());
    assert!(r.text().contains("signal: 9") || r.text().contains("SIGKILL"), "the reason names the signal: {}", r.text());
    let events = until_terminal(&mut sse, &mut check);
    assert_eq!(events.last().map(SseEvent::kind), Some("turn_failed"));
    let left = groups_gone(&setup.groups("sleeper"), Duration::from_secs(5));
    assert!(left.is_empty(), "the killed runner's child {left:?} survived");

    // Every fault ended in exactly one terminal event, seen by the subscriber.
    assert_eq!(check.started, check.terminals, "{check:?}");
    assert_eq!(check.started, 1 + faults.len() as u64 + 1);
    let s = counters_add_up(&server);
    assert_eq!(s["state"], "idle");
    assert_eq!(s["counters"]["failed"], faults.len() as i64 + 1, "{s}");
    // And the server holds no more descriptors than before the faults.
    let fds = wait_for(Duration::from_secs(5), || {
        let n = fd_count(server.pid);
        (n <= fds_before).then_some(n)
    });
    assert!(fds.is_some(), "descriptors: {} after the faults, {fds_before} before", fd_count(server.pid));
}

#[test]
fn a_client_that_disconnects_mid_submit_does_not_cut_the_turn_short() {
    let setup = Setup::new("disconnect");
    let server = setup.http();
    let mut sse = Sse::open(server.addr, Some(&setup.tokens.observer), None).expect("events");
    let mut check = StreamCheck::idle();
    for round in 0..3 {
        // The whole request sent, then the connection dropped while the turn runs.
        let body = json!({"id": round, "method": "submit", "params": {"task": "go", "runner": "slow"}}).to_string();
        let mut s = client::connect(server.addr).expect("connect");
        s.write_all(rpc_head(Some(&setup.tokens.controller), body.len(), "").as_bytes()).expect("head");
        s.write_all(body.as_bytes()).expect("body");
        let (events, started) = sse.until(STEP, |e| e.kind() == "turn_started");
        assert!(started, "round {round}: the turn did not start");
        for e in &events {
            check.push(&e.data).unwrap_or_else(|err| panic!("{err}"));
        }
        drop(s);
        let events = until_terminal(&mut sse, &mut check);
        let last = events.last().expect("terminal");
        assert_eq!(last.kind(), "turn_completed", "round {round}: {:?}", last.data);
        assert_eq!(last.data["event"]["result"], "slow done");
    }
    // A request dropped halfway through its body never starts a turn.
    let body = json!({"id": 9, "method": "submit", "params": {"task": "never", "runner": "slow"}}).to_string();
    let mut s = client::connect(server.addr).expect("connect");
    s.write_all(rpc_head(Some(&setup.tokens.controller), body.len(), "").as_bytes()).expect("head");
    s.write_all(&body.as_bytes()[..body.len() / 2]).expect("half the body");
    drop(s);
    // A half-closed client (write side shut right after the request) counts as gone, as a
    // closed one does: its request may be dropped before it starts a turn, or the turn runs to
    // the end and only the answer is lost. Either way, never half a turn.
    let req = json!({"id": 10, "method": "submit", "params": {"task": "go", "runner": "slow"}}).to_string();
    let mut bytes = rpc_head(Some(&setup.tokens.controller), req.len(), "").into_bytes();
    bytes.extend_from_slice(req.as_bytes());
    if let Ok(r) = send_half_closed(server.addr, &bytes) {
        assert_eq!(r.json()["result"]["result"], "slow done", "{}", r.text());
    }
    wait_for(STEP, || (server.status()["state"] == "idle").then_some(())).expect("back to idle");
    let s = counters_add_up(&server);
    let submitted = s["counters"]["submitted"].as_u64().unwrap_or(0);
    assert!(submitted == 3 || submitted == 4, "{s}");
    if submitted == 4 {
        let events = until_terminal(&mut sse, &mut check);
        assert_eq!(events.last().map(SseEvent::kind), Some("turn_completed"));
    }
    assert_eq!(s["counters"]["completed"].as_u64(), Some(submitted), "{s}");
    assert_eq!(check.started, submitted);
    assert_eq!(check.terminals, submitted);
    let left = groups_gone(&setup.groups("slow"), Duration::from_secs(5));
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_subscriber_that_stops_reading_never_stalls_the_agent_and_is_told_what_it_missed() {
    // With nothing but memory, what a stuck subscriber missed is gone: it is told so (`lagged`).
    stuck_subscriber("stuck-subscriber-memory", &["--store", "memory"], true);
}

#[test]
fn a_subscriber_that_stops_reading_on_a_durable_store_loses_nothing_silently() {
    // On the default (SQLite) store the flood is paced by the store's commits: the stuck
    // subscriber catches up without a silent loss, whether or not it was told it lagged.
    stuck_subscriber("stuck-subscriber-store", &[], false);
}

/// A flood with one subscriber that stops reading and one that reads everything, on a server
/// started with `extra`; `told` says the stuck one must be told it missed events (memory).
fn stuck_subscriber(name: &str, extra: &[&str], told: bool) {
    const FLOODS: u64 = 3;
    let setup = Setup::new(name);
    let server = setup.http_with(extra);
    // `stuck` reads nothing after the response head; `live` reads everything.
    let mut stuck = Sse::open(server.addr, Some(&setup.tokens.observer), None).expect("events");
    let mut live = Sse::open(server.addr, Some(&setup.tokens.observer), None).expect("events");
    let mut live_check = StreamCheck::idle();
    let rss_before = proc_status(server.pid, "VmRSS");
    // Each flood turn publishes about MAX_OUTPUT / 90 ≈ 11 600 events (some 2.2 MB of SSE): more
    // than the replay buffer holds (SERVER_EVENT_CHANNEL_CAPACITY). Three of them are more than
    // the socket buffers of `stuck` take too: the server's send buffer alone grows to 4 MiB on
    // Linux (`tcp_wmem`), which two floods can fit in.
    for round in 0..FLOODS {
        let started = Instant::now();
        let pending = submit_in_background(server.addr, &setup.tokens.controller, json!({"task": "go", "runner": "flood"}));
        loop {
            match live.next(STEP) {
                Ok(Some(e)) => {
                    live_check.push(&e.data).unwrap_or_else(|err| panic!("live subscriber: {err}"));
                    if matches!(e.kind(), "turn_completed" | "turn_failed") {
                        break;
                    }
                }
                other => panic!("live subscriber: {other:?}"),
            }
        }
        let r = pending.join().expect("submit");
        assert_eq!(r.code().as_deref(), Some("output_too_large"), "{}", r.text());
        assert!(started.elapsed() < Duration::from_secs(30), "round {round}: the flood took {:?} with a stuck subscriber", started.elapsed());
    }
    assert_eq!(live_check.started, FLOODS);
    assert_eq!(live_check.terminals, FLOODS);
    // A normal turn still runs promptly.
    let r = client::call(server.addr, Some(&setup.tokens.controller), "submit", json!({"task": "after the flood"}));
    assert_eq!(r.json()["result"]["result"], "after the flood", "{}", r.text());
    let rss_after = proc_status(server.pid, "VmRSS");
    // The stuck subscriber resumes reading: it is told how many events it missed, never silently
    // loses any, and reaches the last turn's terminal event.
    let mut stuck_check = StreamCheck::idle();
    let mut last_completed = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !last_completed && Instant::now() < deadline {
        match stuck.next(STEP) {
            Ok(Some(e)) => {
                stuck_check.push(&e.data).unwrap_or_else(|err| panic!("stuck subscriber: {err}"));
                last_completed = e.kind() == "turn_completed" && e.data["event"]["result"] == "after the flood";
            }
            other => panic!("stuck subscriber: {other:?} after {stuck_check:?}"),
        }
    }
    assert!(last_completed, "the stuck subscriber never caught up: {stuck_check:?}");
    if told {
        assert!(stuck_check.missed > 0 && stuck_check.notices > 0, "the stuck subscriber was not told it missed events: {stuck_check:?}");
    } else {
        // Delivery waits for the store's commits, so the socket buffers may take the whole flood;
        // either way nothing is lost silently (`StreamCheck` refuses a jump in `seq` no notice
        // explains) and a notice always counts what it says was missed.
        assert_eq!(stuck_check.missed > 0, stuck_check.notices > 0, "notices and missed events disagree: {stuck_check:?}");
    }
    // Memory: the hub holds at most SERVER_EVENT_CHANNEL_CAPACITY events (replay buffer and
    // broadcast ring, ~100 bytes each here); a stuck subscriber adds its socket buffers, never a
    // queue of its own. 32 MiB covers both with room for the allocator.
    let growth_kib = rss_after.saturating_sub(rss_before);
    assert!(growth_kib < 32 * 1024, "VmRSS grew by {growth_kib} KiB with a stuck subscriber ({rss_before} -> {rss_after} KiB)");
    eprintln!(
        "stuck subscriber: live saw {} events, stuck was told it missed {} in {} notices; VmRSS {rss_before} -> {rss_after} KiB",
        live_check.events, stuck_check.missed, stuck_check.notices
    );
    let s = server.status();
    assert_eq!(s["subscribers"], 2);
    drop(stuck);
    drop(live);
    wait_for(Duration::from_secs(5), || (server.status()["subscribers"] == 0).then_some(())).expect("closed subscriptions are released");
}

#[test]
fn memory_stays_bounded_under_floods() {
    let setup = Setup::new("memory");
    let server = setup.http();
    let flood = |n: usize| {
        for _ in 0..n {
            let r = client::call(server.addr, Some(&setup.tokens.controller), "submit", json!({"task": "go", "runner": "flood"}));
            assert_eq!(r.code().as_deref(), Some("output_too_large"), "{}", r.text());
        }
    };
    let big = |n: usize| {
        for _ in 0..n {
            let r = client::call(server.addr, Some(&setup.tokens.controller), "submit", json!({"task": "go", "runner": "bigtext"}));
            assert_eq!(r.json()["result"]["result"], "big done", "{}", r.text());
        }
    };
    flood(1);
    let rss0 = proc_status(server.pid, "VmRSS");
    flood(3);
    let rss1 = proc_status(server.pid, "VmRSS");
    flood(3);
    let rss2 = proc_status(server.pid, "VmRSS");
    // Small events: once the replay buffer is full (after the first flood), more floods replace
    // events rather than add them. The host holds one line (at most MAX_FRAME) at a time.
    assert!(rss1.saturating_sub(rss0) < 16 * 1024, "VmRSS grew {} KiB over 3 floods ({rss0} -> {rss1})", rss1.saturating_sub(rss0));
    assert!(rss2.saturating_sub(rss1) < 8 * 1024, "VmRSS grew {} KiB over 3 more floods ({rss1} -> {rss2}): not steady", rss2.saturating_sub(rss1));
    // Big events: 12 turns of ten 90 KiB events = 120 events, all still in the replay buffer
    // (capacity SERVER_EVENT_CHANNEL_CAPACITY) and the broadcast ring: at most
    // 2 x 120 x 90 KiB = 21 600 KiB held, plus 16 MiB for the allocator.
    big(12);
    let rss3 = proc_status(server.pid, "VmRSS");
    let bound = 2 * 120 * 90 + 16 * 1024;
    assert!(rss3.saturating_sub(rss2) < bound, "VmRSS grew {} KiB over 12 big turns ({rss2} -> {rss3}), bound {bound} KiB", rss3.saturating_sub(rss2));
    assert!(MAX_FRAME > 90 * 1024 && SERVER_EVENT_CHANNEL_CAPACITY >= 120);
    let hwm = proc_status(server.pid, "VmHWM");
    eprintln!("memory: VmRSS {rss0} KiB after warm-up, {rss1} after 3 floods, {rss2} after 6, {rss3} after 12 big turns; VmHWM {hwm} KiB");
    let s = counters_add_up(&server);
    assert_eq!(s["counters"]["submitted"], 1 + 6 + 12);
}

#[test]
fn shutdown_under_load_ends_every_stream_with_the_final_event() {
    let setup = Setup::new("shutdown");
    let mut server = setup.http();
    let addr = server.addr;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Four clients asking for status as fast as they can.
    let pollers: Vec<JoinHandle<(u64, u64)>> = (0..4)
        .map(|_| {
            let (token, stop) = (setup.tokens.observer.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut ok, mut refused) = (0u64, 0u64);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let body = br#"{"id":1,"method":"status"}"#;
                    let mut bytes = rpc_head(Some(&token), body.len(), "").into_bytes();
                    bytes.extend_from_slice(body);
                    match client::send_raw(addr, &bytes) {
                        Ok(r) if r.status == 200 => ok += 1,
                        _ => refused += 1,
                    }
                }
                (ok, refused)
            })
        })
        .collect();
    // Two SSE subscribers and a WebSocket frontend.
    let sse: Vec<Sse> = (0..2).map(|_| Sse::open(addr, Some(&setup.tokens.observer), None).expect("events")).collect();
    let mut ws = Ws::connect(addr, Some(&setup.tokens.observer)).expect("websocket");
    assert!(ws.call(1, "subscribe", Value::Null).expect("subscribe").get("result").is_some());
    // A few turns under the load, then one still running when the shutdown comes.
    for i in 0..3 {
        let r = client::call(addr, Some(&setup.tokens.controller), "submit", json!({"task": format!("turn {i}")}));
        assert_eq!(r.json()["result"]["result"], format!("turn {i}"), "{}", r.text());
    }
    let running = submit_in_background(addr, &setup.tokens.controller, json!({"task": "go", "runner": "slow"}));
    wait_for(STEP, || (server.status()["state"] == "running").then_some(())).expect("the slow turn runs");
    let r = client::call(addr, Some(&setup.tokens.admin), "shutdown", Value::Null);
    assert_eq!(r.json()["result"]["shutting_down"], true, "{}", r.text());
    let interrupted = running.join().expect("submit thread");
    assert_eq!(interrupted.code().as_deref(), Some("interrupted"), "{}", interrupted.text());
    // Every SSE stream: every turn ended once, then `shutting_down` last, then the stream ends.
    for (i, mut s) in sse.into_iter().enumerate() {
        let mut check = StreamCheck::idle();
        let (events, done) = s.until(STEP, |e| e.kind() == "shutting_down");
        for e in &events {
            check.push(&e.data).unwrap_or_else(|err| panic!("subscriber {i}: {err}"));
        }
        assert!(done, "subscriber {i} never saw shutting_down: {check:?}");
        assert_eq!((check.started, check.terminals), (4, 4), "subscriber {i}: {check:?}");
        assert!(matches!(s.next(Duration::from_secs(5)), Ok(None) | Err(_)), "subscriber {i}: the stream goes on after shutting_down");
    }
    // The WebSocket gets the final event, then a 1001 close.
    let mut check = StreamCheck::idle();
    let close = loop {
        match ws.next(STEP) {
            Ok(v) if v["method"] == "frontend.v2.event" => check.push(&v["params"]).unwrap_or_else(|err| panic!("websocket: {err}")),
            Ok(_) => {}
            Err(e) => break e,
        }
    };
    assert!(check.shut_down, "the WebSocket never saw shutting_down: {check:?}");
    assert_eq!(check.started, check.terminals, "{check:?}");
    assert!(close.contains("1001") || close.contains("closed") || close.contains("reset"), "websocket close: {close}");
    // The process exits cleanly, and no runner survives it.
    let exit = server.wait_exit(Duration::from_secs(15));
    assert!(exit.is_some_and(|s| s.success()), "serve --http exit: {exit:?}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut served = 0;
    for p in pollers {
        served += p.join().expect("poller").0;
    }
    assert!(served > 0, "the pollers were never served");
    let left = groups_gone(&setup.groups("slow"), Duration::from_secs(5));
    assert!(left.is_empty(), "{left:?}");
    eprintln!("shutdown under load: {served} status calls served by 4 pollers");
}

#[test]
fn no_descriptor_or_subscription_leaks_across_many_connections() {
    let setup = Setup::new("leaks");
    let server = setup.http();
    let t = setup.tokens.clone();
    // Warm up every path once.
    let round = || {
        let r = client::call(server.addr, Some(&t.controller), "submit", json!({"task": "a b c"}));
        assert_eq!(r.json()["result"]["result"], "a b c", "{}", r.text());
        let mut s = Sse::open(server.addr, Some(&t.observer), Some("0")).expect("events");
        let (_, ok) = s.until(STEP, |e| e.kind() == "turn_completed");
        assert!(ok);
        drop(s);
        let mut ws = Ws::connect(server.addr, Some(&t.observer)).expect("websocket");
        assert!(ws.call(1, "status", Value::Null).is_ok());
        ws.close();
        let _ = client::call(server.addr, Some("wrong"), "status", Value::Null);
        let _ = client::post_rpc(server.addr, Some(&t.admin), b"{not json");
    };
    round();
    wait_for(Duration::from_secs(5), || (server.status()["subscribers"] == 0).then_some(())).expect("subscriptions released");
    let fds_before = settled_fd_count(server.pid);
    let threads_before = proc_status(server.pid, "Threads");
    for _ in 0..20 {
        round();
    }
    let settled = wait_for(Duration::from_secs(10), || {
        let s = server.status();
        (s["subscribers"] == 0 && fd_count(server.pid) <= fds_before).then_some(s)
    });
    let s = settled.unwrap_or_else(|| panic!("after 20 rounds: {} descriptors (was {fds_before}), status {}", fd_count(server.pid), server.status()));
    assert_eq!(s["counters"]["completed"], 21);
    let threads_after = proc_status(server.pid, "Threads");
    eprintln!("leaks: descriptors {fds_before} -> {}, threads {threads_before} -> {threads_after}", fd_count(server.pid));
    assert!(threads_after <= threads_before + 8, "threads {threads_before} -> {threads_after}");
}
