//! `oa-rpc-bench`: the kv example (`examples/kv`) served by openagents-rpc over HTTP against a
//! jsonrpsee server of the same methods, under the same load in one run, and a markdown summary
//! of requests per second and latency on stdout.
//!
//! ```text
//! cargo run --release --locked -p openagents-bench-rpc --bin oa-rpc-bench
//! ```
//!
//! - **openagents-rpc**: `kv::Store` behind the generated `service::ServiceHandler` (request
//!   decode, schema validation, dispatch), `RpcServer::serve_http`, exactly as `kv-server --http`
//!   serves it (no token).
//! - **jsonrpsee**: `jsonrpsee-server` 0.26.1, an `RpcModule` with `get`, `put` and `delete` over
//!   hand-written serde types and the same map, answering the same JSON.
//!
//! Before timing, both answer the same calls and must give the same replies. Each server runs on a
//! tokio `current_thread` runtime of its own thread (pinned to CPU 0 when there are two or more);
//! the load runs on this thread (CPU 1). Rounds alternate which server goes first; the ratio is the
//! median of the per-round ratios.
//!
//! Knobs (environment): `BENCH_RPC_ROUNDS` (5), `BENCH_RPC_SECONDS` per server per round (3),
//! `BENCH_RPC_CONNECTIONS` (16), `BENCH_RPC_KEYS` (1000), `BENCH_RPC_MIX` as `get/put/delete`
//! percentages (`60/30/10`), `BENCH_RPC_WARMUP` seconds per server (1), `BENCH_RPC_PIN` (`0`: no
//! pinning).

mod jsonrpsee_kv;
mod load;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use load::{Conn, Load, Mix, Run};
use openagents_rpc::RpcServer;
use serde_json::Value;

/// Rounds: five alternating pairs give a median that one disturbed round does not move.
const DEFAULT_ROUNDS: usize = 5;
/// Seconds per server per round: long enough for tens of thousands of calls on one core.
const DEFAULT_SECONDS: f64 = 3.0;
/// Connections: as the server benchmark's middle row, enough to keep one server core busy.
const DEFAULT_CONNECTIONS: usize = 16;
/// Keys: small enough that most gets find their key, large enough that connections rarely meet.
const DEFAULT_KEYS: u32 = 1000;
/// Seconds of untimed load per server before the rounds (connections, allocator, caches).
const DEFAULT_WARMUP: f64 = 1.0;
/// The issue's target: openagents-rpc at least this many times jsonrpsee's requests per second.
const TARGET: f64 = 1.2;
/// The CPU the servers run on, and the one the load runs on, when pinned.
const SERVER_CPU: usize = 0;
const LOAD_CPU: usize = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ours,
    Jsonrpsee,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Ours => "openagents-rpc (kv example)",
            Kind::Jsonrpsee => "jsonrpsee 0.26.1",
        }
    }
}

/// The run's settings, from the environment.
struct Settings {
    rounds: usize,
    seconds: f64,
    warmup: f64,
    load: Load,
    pin: bool,
    /// CPUs this process may use, read before any thread is pinned.
    cores: usize,
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> Result<T, String> {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().map_err(|_| format!("{name}={v} is not a number")),
        Err(_) => Ok(default),
    }
}

impl Settings {
    fn from_env() -> Result<Settings, String> {
        let mix = std::env::var("BENCH_RPC_MIX").unwrap_or_else(|_| "60/30/10".into());
        let parts: Vec<u32> = mix.split('/').map(|p| p.trim().parse()).collect::<Result<_, _>>().map_err(|_| format!("BENCH_RPC_MIX={mix}: give get/put/delete percentages"))?;
        let [get, put, delete] = parts[..] else { return Err(format!("BENCH_RPC_MIX={mix}: give three percentages, get/put/delete")) };
        if get + put + delete != 100 {
            return Err(format!("BENCH_RPC_MIX={mix}: the percentages add up to {}, not 100", get + put + delete));
        }
        let s = Settings {
            rounds: env("BENCH_RPC_ROUNDS", DEFAULT_ROUNDS)?.max(1),
            seconds: env("BENCH_RPC_SECONDS", DEFAULT_SECONDS)?,
            warmup: env("BENCH_RPC_WARMUP", DEFAULT_WARMUP)?,
            load: Load { connections: env("BENCH_RPC_CONNECTIONS", DEFAULT_CONNECTIONS)?.max(1), keys: env("BENCH_RPC_KEYS", DEFAULT_KEYS)?.max(1), mix: Mix { get, put } },
            pin: env("BENCH_RPC_PIN", 1u8)? != 0 && cores() >= 2,
            cores: cores(),
        };
        if !s.seconds.is_finite() || s.seconds <= 0.0 || !s.warmup.is_finite() || s.warmup < 0.0 {
            return Err("BENCH_RPC_SECONDS must be above 0 and BENCH_RPC_WARMUP at least 0".into());
        }
        Ok(s)
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// Pins the calling thread to `cpu`.
fn pin_to(cpu: usize) -> Result<(), String> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu).map_err(|e| e.to_string())?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).map_err(|e| format!("pinning to CPU {cpu}: {e}"))
}

/// The calling thread's `schedstat` file: its time on a CPU so far, in nanoseconds.
fn thread_schedstat() -> Option<PathBuf> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    let path = PathBuf::from("/proc").join(link).join("schedstat");
    path.exists().then_some(path)
}

/// A thread's time in user space and in the kernel so far, in clock ticks (`stat` fields 14 and
/// 15), from its `schedstat` path's sibling `stat`.
fn user_system_ticks(schedstat: Option<&PathBuf>) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(schedstat?.with_file_name("stat")).ok()?;
    // The fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut f = rest.split_whitespace().skip(11);
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

fn cpu_ns(path: Option<&PathBuf>) -> Option<u64> {
    std::fs::read_to_string(path?).ok()?.split_whitespace().next()?.parse().ok()
}

/// A server on a thread of its own, on a `current_thread` runtime; stops when dropped.
struct ServerThread {
    addr: SocketAddr,
    schedstat: Option<PathBuf>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A started server, to stop.
enum Running {
    Ours(RpcServer),
    Jsonrpsee(jsonrpsee_server::ServerHandle),
}

/// Starts `kind` on 127.0.0.1:0 on the calling runtime.
async fn serve(kind: Kind) -> Result<(SocketAddr, Running), String> {
    match kind {
        Kind::Ours => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
            let addr = listener.local_addr().map_err(|e| e.to_string())?;
            // As kv-server --http: the generated handler over the store, no token.
            let server = RpcServer::new(kv::service::ServiceHandler::new(kv::Store::default()));
            let serving = server.clone();
            tokio::spawn(async move { serving.serve_http(listener).await });
            Ok((addr, Running::Ours(server)))
        }
        Kind::Jsonrpsee => {
            let (addr, handle) = jsonrpsee_kv::serve("127.0.0.1:0").await?;
            Ok((addr, Running::Jsonrpsee(handle)))
        }
    }
}

fn start_server(kind: Kind, pin: bool) -> Result<ServerThread, String> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(SocketAddr, Option<PathBuf>), String>>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name(format!("{kind:?}").to_lowercase())
        .spawn(move || {
            if pin && let Err(e) = pin_to(SERVER_CPU) {
                let _ = ready_tx.send(Err(e));
                return;
            }
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return;
                }
            };
            let schedstat = thread_schedstat();
            rt.block_on(async move {
                match serve(kind).await {
                    Ok((addr, running)) => {
                        let _ = ready_tx.send(Ok((addr, schedstat)));
                        let _ = stop_rx.await;
                        match running {
                            Running::Ours(server) => server.shutdown().trigger(),
                            Running::Jsonrpsee(handle) => {
                                let _ = handle.stop();
                            }
                        }
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            });
        })
        .map_err(|e| e.to_string())?;
    let (addr, schedstat) = ready_rx.recv().map_err(|_| format!("{} did not start", kind.name()))??;
    Ok(ServerThread { addr, schedstat, stop: Some(stop_tx), thread: Some(thread) })
}

/// The calls both servers must answer alike before anything is timed: every method, both
/// service errors, and a key the schema refuses (there only the error code is compared: the
/// messages of a generated validator and of a hand-written check differ).
const CHECKS: &[(&str, bool)] = &[
    (r#"{"jsonrpc":"2.0","id":1,"method":"put","params":{"key":"check/a","value":{"kind":"text","text":"hello"}}}"#, true),
    (r#"{"jsonrpc":"2.0","id":2,"method":"put","params":{"key":"check/a","value":{"kind":"number","number":2.5}}}"#, true),
    (r#"{"jsonrpc":"2.0","id":3,"method":"get","params":{"key":"check/a"}}"#, true),
    (r#"{"jsonrpc":"2.0","id":4,"method":"put","params":{"key":"check/a","value":{"kind":"text","text":"x"},"if_version":1}}"#, true),
    (r#"{"jsonrpc":"2.0","id":"five","method":"put","params":{"key":"check/b","value":{"kind":"flag","flag":true},"if_version":0}}"#, true),
    (r#"{"jsonrpc":"2.0","id":6,"method":"delete","params":{"key":"check/a"}}"#, true),
    (r#"{"jsonrpc":"2.0","id":7,"method":"delete","params":{"key":"check/a"}}"#, true),
    (r#"{"jsonrpc":"2.0","id":8,"method":"get","params":{"key":"check/a"}}"#, true),
    (r#"{"jsonrpc":"2.0","id":9,"method":"get","params":{"key":"Check A"}}"#, false),
];

/// Both servers give the same replies to [`CHECKS`]; the check's lines for the report.
async fn check(ours: SocketAddr, theirs: SocketAddr) -> Result<Vec<String>, String> {
    let (mut a, mut b) = (Conn::open(ours).await?, Conn::open(theirs).await?);
    let mut lines = Vec::new();
    for (body, whole) in CHECKS {
        let (ra, rb) = (a.call((*body).to_owned()).await?, b.call((*body).to_owned()).await?);
        let same = if *whole {
            ra == rb
        } else {
            let code = |r: &Value| r.pointer("/error/code").cloned();
            code(&ra).is_some() && code(&ra) == code(&rb) && ra["id"] == rb["id"]
        };
        if !same {
            return Err(format!("the servers answer differently, the benchmark would be void:\n  call: {body}\n  openagents-rpc: {ra}\n  jsonrpsee: {rb}"));
        }
        let shown = if *whole { ra.to_string() } else { format!("an error with code {} from both", ra["error"]["code"]) };
        lines.push(format!("`{}` → `{shown}`", serde_json::from_str::<Value>(body).map(|v| format!("{} {}", v["method"].as_str().unwrap_or(""), v["params"])).unwrap_or_default()));
    }
    if CHECKS.iter().all(|(_, whole)| *whole) {
        return Err("no check of a refused key".into());
    }
    Ok(lines)
}

/// One server's timed run, with the CPU time its thread and the load's thread spent.
struct Measured {
    run: Run,
    server_cpu: Option<Duration>,
    load_cpu: Option<Duration>,
    /// The server thread's clock ticks in user space and in the kernel during the run.
    server_ticks: Option<(u64, u64)>,
}

async fn measure(server: &ServerThread, load: Load, seconds: f64, seed: u64, me: Option<&PathBuf>) -> Result<Measured, String> {
    let (s0, l0, t0) = (cpu_ns(server.schedstat.as_ref()), cpu_ns(me), user_system_ticks(server.schedstat.as_ref()));
    let run = load::run(server.addr, load, Duration::from_secs_f64(seconds), seed).await?;
    let (s1, l1, t1) = (cpu_ns(server.schedstat.as_ref()), cpu_ns(me), user_system_ticks(server.schedstat.as_ref()));
    let span = |a: Option<u64>, b: Option<u64>| Some(Duration::from_nanos(b?.saturating_sub(a?)));
    let ticks = t0.zip(t1).map(|((u0, k0), (u1, k1))| (u1.saturating_sub(u0), k1.saturating_sub(k0)));
    Ok(Measured { run, server_cpu: span(s0, s1), load_cpu: span(l0, l1), server_ticks: ticks })
}

/// `BENCH_RPC_ONLY=ours` (or `jsonrpsee`): only that server is prefilled, warmed and timed (both
/// still answer the checks). For profiling one server.
fn skipped(slot: usize) -> bool {
    match std::env::var("BENCH_RPC_ONLY").as_deref() {
        Ok("ours") => slot != 0,
        Ok("jsonrpsee") => slot != 1,
        _ => false,
    }
}

/// `BENCH_RPC_CALLGRIND=1`, under `valgrind --tool=callgrind --instr-atstart=no`: instrumentation
/// switched on for the timed rounds only (`callgrind_control -i on`, then `off`), so the profile
/// divided by the `timed:` calls is the cost of a call.
fn callgrind(flag: &str, value: &str) {
    if std::env::var("BENCH_RPC_CALLGRIND").as_deref() == Ok("1") {
        let pid = std::process::id().to_string();
        let ok = std::process::Command::new("callgrind_control").args([flag, value, &pid]).stdout(std::process::Stdio::null()).status();
        eprintln!("callgrind_control {flag} {value} {pid}: {ok:?}");
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn micros(d: f64) -> String {
    if d >= 1000.0 { format!("{:.2} ms", d / 1000.0) } else { format!("{d:.0} µs") }
}

fn thousands(n: f64) -> String {
    let s = format!("{:.0}", n);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn machine(cores: usize) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|c| c.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|m| m.trim().to_owned())).unwrap_or_else(|| "unknown CPU".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").map_or_else(|_| String::new(), |k| format!(", Linux {}", k.trim()));
    format!("{cores} cores (`nproc`), {cpu}{kernel}")
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(|_| "unknown".into(), |l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

async fn bench(s: &Settings) -> Result<String, String> {
    let load_start = loadavg();
    let me = thread_schedstat();
    let ours = start_server(Kind::Ours, s.pin)?;
    let theirs = start_server(Kind::Jsonrpsee, s.pin)?;
    let checks = check(ours.addr, theirs.addr).await?;
    eprintln!("check: both servers answer the {} calls alike", checks.len());
    // Every call each server answers, for dividing a profile of its thread by (`served:` below).
    let mut served = [0u64; 2];
    for (slot, server) in [&ours, &theirs].into_iter().enumerate() {
        if skipped(slot) {
            continue;
        }
        load::prefill(server.addr, s.load.keys).await?;
        served[slot] += (CHECKS.len() as u64) + u64::from(s.load.keys);
        if s.warmup > 0.0 {
            served[slot] += load::run(server.addr, s.load, Duration::from_secs_f64(s.warmup), 0x5eed).await?.requests;
        }
    }
    let mut results: [Vec<Measured>; 2] = [Vec::new(), Vec::new()];
    callgrind("-i", "on");
    for round in 0..s.rounds {
        let order = if round % 2 == 0 { [Kind::Ours, Kind::Jsonrpsee] } else { [Kind::Jsonrpsee, Kind::Ours] };
        let seed = 0x0a5e_ed00 + round as u64;
        for kind in order {
            let (server, slot) = match kind {
                Kind::Ours => (&ours, 0),
                Kind::Jsonrpsee => (&theirs, 1),
            };
            if skipped(slot) {
                continue;
            }
            let m = measure(server, s.load, s.seconds, seed, me.as_ref()).await?;
            eprintln!("round {} {}: {} calls, {:.0} req/s, p50 {:?}, p99 {:?}", round + 1, kind.name(), m.run.requests, m.run.rate(), m.run.quantile(0.5), m.run.quantile(0.99));
            served[slot] += m.run.requests;
            results[slot].push(m);
        }
    }
    callgrind("-i", "off");
    eprintln!("timed: {} {} calls, {} {} calls", Kind::Ours.name(), results[0].iter().map(|m| m.run.requests).sum::<u64>(), Kind::Jsonrpsee.name(), results[1].iter().map(|m| m.run.requests).sum::<u64>());
    let load_end = loadavg();
    drop((ours, theirs));
    eprintln!("served: {} {} calls, {} {} calls (checks, prefill, warm-up and rounds)", Kind::Ours.name(), served[0], Kind::Jsonrpsee.name(), served[1]);

    let ratios: Vec<f64> = results[0].iter().zip(&results[1]).map(|(a, b)| a.run.rate() / b.run.rate()).collect();
    let ratio = median(ratios.clone());
    let cpu_per_call = |m: &Measured| m.server_cpu.map(|c| c.as_secs_f64() * 1e6 / m.run.requests.max(1) as f64);
    let cpu_ratio: Vec<f64> = results[0].iter().zip(&results[1]).filter_map(|(a, b)| Some(cpu_per_call(b)? / cpu_per_call(a)?)).collect();
    let met = ratio >= TARGET;

    let mut out = String::new();
    let mix = s.load.mix;
    out.push_str(&format!(
        "**openagents-rpc / jsonrpsee: {ratio:.2}×** requests per second (median of the per-round ratios {}; target ≥ {TARGET}×: {})\n\n",
        ratios.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>().join(", "),
        if met { "met" } else { "**missed**" }
    ));
    out.push_str(&format!("Machine: {}. Load average (1/5/15 min) at start {load_start}, at end {load_end}.\n\n", machine(s.cores)));
    out.push_str(&format!(
        "Load: {} keep-alive HTTP/1.1 connections, one call at a time each, `POST /rpc`; {}% get / {}% put / {}% delete on {} keys (prefilled); {} rounds × {} s per server after {} s of warm-up each, openagents-rpc first in odd-numbered rounds; each server on a tokio `current_thread` runtime, {}.\n\n",
        s.load.connections,
        mix.get,
        mix.put,
        100 - mix.get - mix.put,
        thousands(f64::from(s.load.keys)),
        s.rounds,
        s.seconds,
        s.warmup,
        if s.pin { format!("its thread pinned to CPU {SERVER_CPU}, the load's to CPU {LOAD_CPU}") } else { "threads not pinned".into() }
    ));
    out.push_str("| server | req/s (median) | p50 | p99 | server CPU per call | of it in the kernel | server thread busy | load thread busy | error answers | req/s per round |\n");
    out.push_str("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (slot, kind) in [(0, Kind::Ours), (1, Kind::Jsonrpsee)] {
        let r = &results[slot];
        let rates: Vec<f64> = r.iter().map(|m| m.run.rate()).collect();
        let q = |p: f64| median(r.iter().map(|m| m.run.quantile(p).as_secs_f64() * 1e6).collect());
        let busy = |f: fn(&Measured) -> Option<Duration>| {
            let v: Vec<f64> = r.iter().filter_map(|m| Some(f(m)?.as_secs_f64() / m.run.elapsed.as_secs_f64() * 100.0)).collect();
            if v.is_empty() { "—".to_owned() } else { format!("{:.0}%", median(v)) }
        };
        let cpu: Vec<f64> = r.iter().filter_map(cpu_per_call).collect();
        let (errors, calls): (u64, u64) = r.iter().fold((0, 0), |(e, c), m| (e + m.run.errors, c + m.run.requests));
        // The kernel's share of the server thread's time, all rounds together (ticks are 10 ms).
        let (user, system) = r.iter().filter_map(|m| m.server_ticks).fold((0, 0), |(u, k), (mu, mk)| (u + mu, k + mk));
        let kernel = if user + system == 0 { "—".to_owned() } else { format!("{:.0}%", system as f64 * 100.0 / (user + system) as f64) };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.1}% | {} |\n",
            kind.name(),
            thousands(median(rates.clone())),
            micros(q(0.5)),
            micros(q(0.99)),
            if cpu.is_empty() { "—".into() } else { format!("{:.1} µs", median(cpu)) },
            kernel,
            busy(|m| m.server_cpu),
            busy(|m| m.load_cpu),
            errors as f64 * 100.0 / calls.max(1) as f64,
            rates.iter().map(|x| format!("{x:.0}")).collect::<Vec<_>>().join(", "),
        ));
    }
    if !cpu_ratio.is_empty() {
        out.push_str(&format!(
            "\nServer CPU per call, jsonrpsee / openagents-rpc: {:.2}× (median of the per-round ratios {}). Error answers are `not_found` for gets of deleted keys.\n",
            median(cpu_ratio.clone()),
            cpu_ratio.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>().join(", ")
        ));
    }
    out.push_str("\nBefore timing, both servers gave the same replies to:\n\n");
    for l in checks {
        out.push_str(&format!("- {l}\n"));
    }
    Ok(out)
}

fn main() -> ExitCode {
    let settings = match Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("oa-rpc-bench: {e}");
            return ExitCode::from(2);
        }
    };
    if settings.pin
        && let Err(e) = pin_to(LOAD_CPU)
    {
        eprintln!("oa-rpc-bench: {e}");
        return ExitCode::FAILURE;
    }
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("oa-rpc-bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(bench(&settings)) {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("oa-rpc-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
