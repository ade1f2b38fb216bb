//! The soak driver: for a bounded time, thousands of turns and requests over every transport
//! (stdio, HTTP, SSE, WebSocket) against the real binaries, with faults injected at random:
//! runners killed with `kill -9`, hanging, flooding, exiting early or writing garbage; clients
//! interrupting, disconnecting mid-`submit`, sending hostile requests; subscribers reconnecting
//! with `Last-Event-ID`. Every event stream is checked as it arrives (`invariants::StreamCheck`),
//! counters are checked while it runs and at the end, and at the end no runner process, no
//! subscription and no descriptor may be left over. Prints a report; exits 1 if any invariant
//! broke.
//!
//! ```sh
//! tests/hardening/soak.sh [SECONDS]        # cargo run --release -p openagents-hardening --bin soak -- --seconds N
//! ```

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use openagents_hardening::client::{self, Sse, Ws, rpc_head};
use openagents_hardening::harness::{HttpServer, Setup, groups_gone, proc_status, settled_fd_count, wait_for};
use openagents_hardening::invariants::StreamCheck;
use serde_json::{Value, json};

/// A small xorshift generator: reproducible from `--seed`, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn words(&mut self) -> String {
        const W: &[&str] = &["alpha", "beta", "gamma", "delta", "soak", "turn", "event", "ok"];
        (0..1 + self.below(6)).map(|_| W[self.below(W.len() as u64) as usize]).collect::<Vec<_>>().join(" ")
    }
}

/// Everything counted during the run.
#[derive(Default)]
struct Report {
    /// Turns by transport and outcome (`completed` or the error code).
    turns: BTreeMap<String, u64>,
    /// Requests by transport.
    requests: BTreeMap<String, u64>,
    /// Error codes seen in answers, by code.
    errors: BTreeMap<String, u64>,
    /// Faults injected, by kind.
    faults: BTreeMap<String, u64>,
    /// Events checked, by stream kind.
    events: BTreeMap<String, u64>,
    /// Broken invariants (must stay empty).
    broken: Vec<String>,
}

type Shared = Arc<Mutex<Report>>;

fn bump(map: &mut BTreeMap<String, u64>, key: &str) {
    *map.entry(key.to_owned()).or_default() += 1;
}

fn note(report: &Shared, f: impl FnOnce(&mut Report)) {
    f(&mut report.lock().unwrap_or_else(|p| p.into_inner()));
}

fn broken(report: &Shared, what: String) {
    eprintln!("INVARIANT BROKEN: {what}");
    note(report, |r| r.broken.push(what));
}

/// The outcome of an answer: `ok`, or its error code.
fn outcome(v: &Value) -> String {
    if v.get("result").is_some() { "ok".into() } else { v["error"]["data"]["code"].as_str().unwrap_or("no-code").to_owned() }
}

fn record_turn(report: &Shared, transport: &str, v: &Value) {
    let o = outcome(v);
    note(report, |r| {
        bump(&mut r.requests, transport);
        bump(&mut r.turns, &format!("{transport} {}", if o == "ok" { "completed" } else { o.as_str() }));
        if o != "ok" {
            bump(&mut r.errors, &o);
        }
    });
}

fn record_request(report: &Shared, transport: &str, v: &Value) {
    let o = outcome(v);
    note(report, |r| {
        bump(&mut r.requests, transport);
        if o != "ok" {
            bump(&mut r.errors, &o);
        }
    });
}

/// Hostile requests: (body, the codes it may get).
const HOSTILE: &[(&[u8], &[&str])] = &[
    (b"{not json", &["invalid_request"]),
    (b"{\"id\":1,\"method\":\"status\"}\xff", &["invalid_request"]),
    (br#"{"id":1,"method":"nope"}"#, &["unknown_method"]),
    (br#"{"id":1,"method":"status","method":"shutdown"}"#, &["invalid_params"]),
    (br#"{"id":1,"method":"submit","params":{"task":"x","command":"/bin/sh"}}"#, &["invalid_params"]),
    (br#"{"id":1,"method":"submit","params":{"task":"x","cwd":"../../etc"}}"#, &["invalid_params"]),
    (br#"{"id":{},"method":"status"}"#, &["invalid_params"]),
    (br#"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["#, &["invalid_request"]),
];

fn http_driver(server: Arc<HttpServer>, setup: Arc<Setup>, report: Shared, stop: Arc<AtomicBool>, mut rng: Rng) {
    let t = setup.tokens.clone();
    let addr = server.addr;
    while !stop.load(Ordering::Relaxed) {
        let roll = rng.below(100);
        if roll < 70 {
            let task = rng.words();
            let r = client::call(addr, Some(&t.controller), "submit", json!({"task": task}));
            let v = r.json();
            record_turn(&report, "http", &v);
            if v.get("result").is_some() && v["result"]["result"] != task.as_str() {
                broken(&report, format!("http: echo answered {} for {task:?}", v["result"]["result"]));
            }
        } else if roll < 80 {
            let (runner, kind) = [("hang", "hanging runner"), ("flood", "flooding runner"), ("early", "runner exiting early"), ("notjson", "runner writing garbage")][rng.below(4) as usize];
            note(&report, |r| bump(&mut r.faults, kind));
            let r = client::call(addr, Some(&t.controller), "submit", json!({"task": "fault", "runner": runner}));
            record_turn(&report, "http", &r.json());
        } else if roll < 85 {
            // kill -9 from outside, mid-turn.
            let before = setup.pids("sleeper").len();
            let (a, tok) = (addr, t.controller.clone());
            let pending = std::thread::spawn(move || client::call(a, Some(&tok), "submit", json!({"task": "victim", "runner": "sleeper"})));
            let pid = wait_for(Duration::from_secs(10), || setup.pids("sleeper").get(before).copied());
            std::thread::sleep(Duration::from_millis(20 + rng.below(200)));
            if let Some(pid) = pid {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
                note(&report, |r| bump(&mut r.faults, "runner killed with kill -9"));
            }
            if let Ok(r) = pending.join() {
                record_turn(&report, "http", &r.json());
            }
        } else if roll < 89 {
            // Interrupt a slow turn.
            let (a, tok) = (addr, t.controller.clone());
            let pending = std::thread::spawn(move || client::call(a, Some(&tok), "submit", json!({"task": "slow", "runner": "slow"})));
            std::thread::sleep(Duration::from_millis(100 + rng.below(400)));
            let r = client::call(addr, Some(&t.controller), "interrupt", Value::Null);
            record_request(&report, "http", &r.json());
            note(&report, |r| bump(&mut r.faults, "interrupt mid-turn"));
            if let Ok(r) = pending.join() {
                record_turn(&report, "http", &r.json());
            }
        } else if roll < 92 {
            // Disconnect mid-submit: the whole request, then the socket closed while it runs.
            let body = json!({"id": 1, "method": "submit", "params": {"task": "abandoned", "runner": "slow"}}).to_string();
            if let Ok(mut s) = client::connect(addr) {
                let _ = s.write_all(rpc_head(Some(&t.controller), body.len(), "").as_bytes());
                let _ = s.write_all(body.as_bytes());
                std::thread::sleep(Duration::from_millis(50 + rng.below(200)));
                note(&report, |r| bump(&mut r.faults, "client disconnected mid-submit"));
            }
            // The abandoned turn still runs; wait for it so the next submit is not `busy`.
            let _ = wait_for(Duration::from_secs(10), || (server.status()["state"] == "idle").then_some(()));
        } else {
            let (body, codes) = HOSTILE[rng.below(HOSTILE.len() as u64) as usize];
            let r = client::post_rpc(addr, Some(&t.controller), body);
            let v = r.json();
            let o = outcome(&v);
            if !codes.contains(&o.as_str()) {
                broken(&report, format!("http: hostile {:?} got {o}: {}", String::from_utf8_lossy(&body[..body.len().min(60)]), r.text()));
            }
            record_request(&report, "http", &v);
            note(&report, |r| bump(&mut r.faults, "hostile request"));
        }
    }
}

fn poller(server: Arc<HttpServer>, setup: Arc<Setup>, report: Shared, stop: Arc<AtomicBool>, mut rng: Rng) {
    while !stop.load(Ordering::Relaxed) {
        let token = if rng.below(10) == 0 { "not-a-token".to_owned() } else { setup.tokens.observer.clone() };
        let r = client::call(server.addr, Some(&token), "status", Value::Null);
        let v = r.json();
        record_request(&report, "http", &v);
        if token == "not-a-token" {
            if r.status != 401 {
                broken(&report, format!("a wrong token got HTTP {}", r.status));
            }
            continue;
        }
        let c = &v["result"]["counters"];
        let n = |k: &str| c[k].as_i64().unwrap_or(-1);
        let active = i64::from(!v["result"]["active_turn"].is_null());
        if n("submitted") != n("completed") + n("failed") + n("interrupted") + active {
            broken(&report, format!("counters do not add up: {}", v["result"]));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sse_reader(server: Arc<HttpServer>, setup: Arc<Setup>, report: Shared, stop: Arc<AtomicBool>, mut rng: Rng, name: String) -> StreamCheck {
    // It subscribes while turns run: the first turn it sees may be half over.
    let mut check = StreamCheck::default();
    // Once the drivers stop: read on until the last event of the (then idle) runtime, so the
    // stream ends between turns.
    let mut target: Option<(i64, Instant)> = None;
    let caught_up = |check: &StreamCheck, target: &Option<(i64, Instant)>| {
        target.is_some_and(|(last, deadline)| check.position().is_some_and(|p| p >= last) || Instant::now() > deadline)
    };
    loop {
        if stop.load(Ordering::Relaxed) && target.is_none() {
            let _ = wait_for(Duration::from_secs(30), || (server.status()["state"] == "idle").then_some(()));
            target = Some((server.status()["last_seq"].as_i64().unwrap_or(0), Instant::now() + Duration::from_secs(30)));
        }
        if caught_up(&check, &target) {
            break;
        }
        let resume = check.position().map(|l| l.to_string());
        let Ok(mut sse) = Sse::open(server.addr, Some(&setup.tokens.observer), resume.as_deref()) else { break };
        if resume.is_some() {
            note(&report, |r| bump(&mut r.faults, "SSE reconnect with Last-Event-ID"));
        }
        let until = Instant::now() + Duration::from_millis(1000 + rng.below(4000));
        while Instant::now() < until && !caught_up(&check, &target) {
            match sse.next(Duration::from_millis(200)) {
                Ok(Some(e)) => {
                    if let Err(err) = check.push(&e.data) {
                        broken(&report, format!("{name}: {err}"));
                        check = StreamCheck::default();
                    }
                    note(&report, |r| bump(&mut r.events, "sse"));
                }
                Ok(None) => break,
                Err(_) => {}
            }
        }
    }
    check
}

fn ws_driver(server: Arc<HttpServer>, setup: Arc<Setup>, report: Shared, stop: Arc<AtomicBool>, mut rng: Rng) -> StreamCheck {
    let mut check = StreamCheck::default();
    let mut id = 0i64;
    'connect: while !stop.load(Ordering::Relaxed) {
        let Ok(mut ws) = Ws::connect(server.addr, Some(&setup.tokens.controller)) else { break };
        id += 1;
        let last = check.position();
        let since = last.map_or(Value::Null, |l| json!({"since": l}));
        if last.is_some() {
            note(&report, |r| bump(&mut r.faults, "WebSocket reconnect with since"));
        }
        if ws.call(id, "subscribe", since).is_err() {
            continue;
        }
        let until = Instant::now() + Duration::from_secs(3 + rng.below(5));
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            id += 1;
            let roll = rng.below(10);
            let sent = match roll {
                0 => ws.send("{broken"),
                1 => ws.send(&json!({"jsonrpc": "2.0", "id": id, "method": "submit", "params": {"task": "over websocket"}}).to_string()),
                _ => ws.send(&json!({"jsonrpc": "2.0", "id": id, "method": "status"}).to_string()),
            };
            if sent.is_err() {
                continue 'connect;
            }
            // Read until this request's answer, checking every event on the way.
            loop {
                match ws.next(Duration::from_secs(30)) {
                    Ok(v) if v["method"] == "frontend.v2.event" => {
                        let ev = &v["params"];
                        if let Err(err) = check.push(ev) {
                            broken(&report, format!("websocket: {err}"));
                            check = StreamCheck::default();
                        }
                        note(&report, |r| bump(&mut r.events, "websocket"));
                    }
                    Ok(v) if v.get("method").is_some() => {}
                    Ok(v) => {
                        let answered = v["id"].as_i64() == Some(id) || (roll == 0 && v["id"].is_null());
                        if roll == 1 && v["id"].as_i64() == Some(id) {
                            record_turn(&report, "websocket", &v);
                        } else {
                            record_request(&report, "websocket", &v);
                        }
                        if answered {
                            break;
                        }
                    }
                    Err(e) => {
                        note(&report, |r| bump(&mut r.faults, if e.contains("1013") { "WebSocket closed 1013 (too slow)" } else { "WebSocket closed" }));
                        continue 'connect;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(rng.below(30)));
        }
        ws.close();
    }
    check
}

fn stdio_driver(setup: Arc<Setup>, report: Shared, stop: Arc<AtomicBool>, mut rng: Rng) -> (StreamCheck, u32, u64) {
    let mut server = setup.stdio();
    let pid = server.pid;
    let mut check = StreamCheck::idle();
    let mut checked = 0usize;
    let mut n = 0u64;
    let drain = |server: &mut openagents_hardening::harness::StdioServer, check: &mut StreamCheck, checked: &mut usize| {
        for ev in &server.events[*checked..] {
            if let Err(err) = check.push(&ev["event"]) {
                broken(&report, format!("stdio: {err}"));
                *check = StreamCheck::default();
            }
            note(&report, |r| bump(&mut r.events, "stdio"));
        }
        *checked = server.events.len();
    };
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let roll = rng.below(100);
        if roll < 80 {
            let task = rng.words();
            let v = server.call(json!({"id": n, "method": "submit", "params": {"task": task}}).to_string().as_bytes());
            record_turn(&report, "stdio", &v);
        } else if roll < 88 {
            let runner = ["early", "notjson", "hang", "flood"][rng.below(4) as usize];
            note(&report, |r| bump(&mut r.faults, "stdio fault runner"));
            let v = server.call(json!({"id": n, "method": "submit", "params": {"task": "fault", "runner": runner}}).to_string().as_bytes());
            record_turn(&report, "stdio", &v);
        } else if roll < 94 {
            let (body, codes) = HOSTILE[rng.below(HOSTILE.len() as u64) as usize];
            let v = server.call(body);
            let o = outcome(&v);
            if !codes.contains(&o.as_str()) {
                broken(&report, format!("stdio: hostile {:?} got {o}: {v}", String::from_utf8_lossy(&body[..body.len().min(60)])));
            }
            record_request(&report, "stdio", &v);
            note(&report, |r| bump(&mut r.faults, "hostile request"));
        } else {
            let v = server.call(json!({"id": n, "method": "status"}).to_string().as_bytes());
            record_request(&report, "stdio", &v);
            let c = &v["result"]["counters"];
            let k = |x: &str| c[x].as_i64().unwrap_or(-1);
            if k("submitted") != k("completed") + k("failed") + k("interrupted") {
                broken(&report, format!("stdio counters do not add up: {c}"));
            }
        }
        drain(&mut server, &mut check, &mut checked);
    }
    let hwm = proc_status(pid, "VmHWM");
    // End of input: in-flight requests answered, the last events forwarded, a clean exit.
    let exit = server.close(Duration::from_secs(30));
    drain(&mut server, &mut check, &mut checked);
    if !exit.is_some_and(|s| s.success()) {
        broken(&report, format!("serve --stdio did not exit cleanly at end of input: {exit:?}"));
    }
    (check, pid, hwm)
}

fn main() {
    let mut seconds = 120u64;
    let mut seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seconds" => seconds = args.next().and_then(|s| s.parse().ok()).expect("--seconds N"),
            "--seed" => seed = args.next().and_then(|s| s.parse().ok()).expect("--seed N"),
            other => panic!("unknown argument {other}: soak [--seconds N] [--seed N]"),
        }
    }
    println!("soak: {seconds} s, seed {seed}, binaries from {}", openagents_hardening::harness::bin_dir().display());
    let setup = Arc::new(Setup::new("soak"));
    let server = Arc::new(setup.http());
    let report: Shared = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    server.status();
    let fds_start = settled_fd_count(server.pid);
    let started = Instant::now();
    let mut rng = Rng(seed);
    let mut fork = || Rng(rng.next() | 1);

    let http = {
        let (s, st, r, x, g) = (server.clone(), setup.clone(), report.clone(), stop.clone(), fork());
        std::thread::spawn(move || http_driver(s, st, r, x, g))
    };
    let polls = {
        let (s, st, r, x, g) = (server.clone(), setup.clone(), report.clone(), stop.clone(), fork());
        std::thread::spawn(move || poller(s, st, r, x, g))
    };
    let sses: Vec<_> = (0..2)
        .map(|i| {
            let (s, st, r, x, g) = (server.clone(), setup.clone(), report.clone(), stop.clone(), fork());
            std::thread::spawn(move || sse_reader(s, st, r, x, g, format!("sse {i}")))
        })
        .collect();
    let ws = {
        let (s, st, r, x, g) = (server.clone(), setup.clone(), report.clone(), stop.clone(), fork());
        std::thread::spawn(move || ws_driver(s, st, r, x, g))
    };
    let stdio = {
        let (st, r, x, g) = (setup.clone(), report.clone(), stop.clone(), fork());
        std::thread::spawn(move || stdio_driver(st, r, x, g))
    };
    let ticks = AtomicU64::new(0);
    while started.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_secs(1));
        if ticks.fetch_add(1, Ordering::Relaxed) % 15 == 14 {
            let r = report.lock().unwrap_or_else(|p| p.into_inner());
            println!("  {:>4} s: {} turns, {} requests, {} faults, {} broken", started.elapsed().as_secs(), r.turns.values().sum::<u64>(), r.requests.values().sum::<u64>(), r.faults.values().sum::<u64>(), r.broken.len());
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = http.join();
    let _ = polls.join();
    let sse_checks: Vec<StreamCheck> = sses.into_iter().filter_map(|h| h.join().ok()).collect();
    let ws_check = ws.join().ok();
    let (stdio_check, stdio_pid, stdio_hwm) = stdio.join().unwrap_or_else(|_| (StreamCheck::default(), 0, 0));
    let _ = stdio_pid;

    // The end: idle, counters add up, every stream between turns, nothing left over.
    if wait_for(Duration::from_secs(30), || (server.status()["state"] == "idle").then_some(())).is_none() {
        broken(&report, "the HTTP runtime did not come back to idle".into());
    }
    let status = server.status();
    let c = &status["counters"];
    let n = |k: &str| c[k].as_i64().unwrap_or(-1);
    if n("submitted") != n("completed") + n("failed") + n("interrupted") {
        broken(&report, format!("final counters do not add up: {c}"));
    }
    for (i, chk) in sse_checks.iter().enumerate() {
        if !chk.between_turns() {
            broken(&report, format!("sse {i} ended inside a turn: {chk:?}"));
        }
    }
    if !stdio_check.between_turns() {
        broken(&report, format!("stdio stream ended inside a turn: {stdio_check:?}"));
    }
    if wait_for(Duration::from_secs(10), || (server.status()["subscribers"] == 0).then_some(())).is_none() {
        broken(&report, format!("subscriptions left after every subscriber went: {}", server.status()["subscribers"]));
    }
    let fds_end = settled_fd_count(server.pid);
    if fds_end > fds_start {
        broken(&report, format!("the HTTP server holds {fds_end} descriptors, {fds_start} at the start"));
    }
    let mut pgids = Vec::new();
    for runner in ["sleeper", "hang", "flood", "early", "notjson", "slow"] {
        pgids.extend(setup.groups(runner));
    }
    let left = groups_gone(&pgids, Duration::from_secs(10));
    if !left.is_empty() {
        broken(&report, format!("runner processes left: {left:?}"));
    }
    let http_hwm = proc_status(server.pid, "VmHWM");
    let http_rss = proc_status(server.pid, "VmRSS");
    // Shut down over HTTP: the final event reaches a fresh subscriber, and the process exits.
    let mut last = Sse::open(server.addr, Some(&setup.tokens.observer), None).ok();
    let r = client::call(server.addr, Some(&setup.tokens.admin), "shutdown", Value::Null);
    if r.json()["result"]["shutting_down"] != true {
        broken(&report, format!("shutdown: {}", r.text()));
    }
    if let Some(s) = last.as_mut() {
        let (_, saw) = s.until(Duration::from_secs(10), |e| e.kind() == "shutting_down");
        if !saw {
            broken(&report, "a subscriber never saw shutting_down".into());
        }
    }
    let elapsed = started.elapsed();

    let r = report.lock().unwrap_or_else(|p| p.into_inner());
    let total = |m: &BTreeMap<String, u64>| m.values().sum::<u64>();
    println!("\n== soak report ({:.0} s, seed {seed})", elapsed.as_secs_f64());
    println!("turns: {} in all ({:.1}/s)", total(&r.turns), total(&r.turns) as f64 / elapsed.as_secs_f64());
    for (k, v) in &r.turns {
        println!("  {k:<40} {v}");
    }
    println!("requests (turns included): {} in all", total(&r.requests));
    for (k, v) in &r.requests {
        println!("  {k:<40} {v}");
    }
    println!("errors by code:");
    for (k, v) in &r.errors {
        println!("  {k:<40} {v}");
    }
    println!("faults injected: {} in all", total(&r.faults));
    for (k, v) in &r.faults {
        println!("  {k:<40} {v}");
    }
    println!("events checked: {} in all", total(&r.events));
    for (k, v) in &r.events {
        println!("  {k:<40} {v}");
    }
    let missed: i64 = sse_checks.iter().map(|c| c.missed).sum::<i64>() + ws_check.as_ref().map_or(0, |c| c.missed) + stdio_check.missed;
    println!("events subscribers were told they missed (lagged): {missed}");
    println!("HTTP runtime counters: {c}");
    println!("peak memory (VmHWM): HTTP server {} KiB (VmRSS at the end {} KiB), stdio server {} KiB", http_hwm, http_rss, stdio_hwm);
    println!("HTTP server descriptors: {fds_start} at the start, {fds_end} at the end");
    println!("runner process groups checked gone: {}", pgids.len());
    println!("invariants broken: {}", r.broken.len());
    for b in &r.broken {
        println!("  {b}");
    }
    std::process::exit(if r.broken.is_empty() { 0 } else { 1 });
}
