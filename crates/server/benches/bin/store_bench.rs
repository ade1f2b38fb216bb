//! The store's cost, side by side in one run (`make bench`): (1) events per second through the
//! event hub on the SQLite store (and PostgreSQL, when `STORE_BENCH_POSTGRES` gives a URL)
//! against the memory store, one subscriber reading every event's JSON (counted: what it received;
//! what it missed, told `lagged`, is reported beside); (2) the latency of a
//! whole turn through the echo runner (`submit` in process, answered once the turn's last event
//! is delivered: with a durable store, written and committed) on each store; (3) how fast a
//! subscriber resuming from before the replay buffer reads a round's events back from each
//! durable store. Rounds rotate the
//! stores; ratios are medians of the per-round ratios.
//!
//! ```text
//! oa-store-bench            runs both and prints the markdown report
//! ```
//!
//! Knobs (environment): `STORE_BENCH_ROUNDS` (7), `STORE_BENCH_EVENTS` events per round
//! (200000), `STORE_BENCH_TURNS` turns per round (100), `STORE_BENCH_DIR` where the SQLite files
//! go (a new folder under the system's temporary one; the disk under it is what is measured),
//! `OA_ECHO_RUNNER` the echo runner (default: `openagents-runner-echo` of the same build),
//! `STORE_BENCH_POSTGRES` a PostgreSQL URL to measure too (each hub a runtime name of its own;
//! `make bench-postgres` starts a temporary server on loopback and sets it).

#![allow(missing_docs)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openagents_protocol::{RuntimeEvent, SERVER_EVENT_CHANNEL_CAPACITY};
use openagents_runner::host::RunnerHost;
use openagents_runner::registry::Registry;
use openagents_server::events::EventHub;
use openagents_server::store::{MemoryStore, PostgresStore, SqliteStore, Store};
use openagents_server::{Caller, EngineConfig, RpcEngine, RunnerAgent};

/// The text of each event of the throughput part: a streamed chunk of a reply.
const CHUNK: &str = "The quick brown fox jumps over the lazy dog; a chunk of a streamed reply, ";
/// The task of each turn: the echo runner sends one text event a word.
const TASK: &str = "hello from the store benchmark";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Memory,
    Sqlite,
    Postgres,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Memory => "memory",
            Kind::Sqlite => "sqlite",
            Kind::Postgres => "postgres",
        }
    }
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).filter(|&v| v > 0).unwrap_or(default)
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("oa-store-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Where the stores go: SQLite files under `dir`, PostgreSQL runtimes at `postgres`.
struct Places {
    dir: PathBuf,
    postgres: Option<String>,
    /// Stores made so far (each a new file or runtime name).
    made: usize,
}

/// A fresh store of `kind`: a SQLite one in a new file, a PostgreSQL one under a new name.
fn store(kind: Kind, at: &mut Places) -> Result<Arc<dyn Store>, String> {
    at.made += 1;
    let n = at.made;
    Ok(match kind {
        Kind::Memory => Arc::new(MemoryStore::new()),
        Kind::Sqlite => Arc::new(SqliteStore::open(&at.dir.join(format!("bench-{n}.db"))).map_err(|e| e.to_string())?),
        Kind::Postgres => {
            let url = at.postgres.as_deref().ok_or("no STORE_BENCH_POSTGRES")?;
            Arc::new(PostgresStore::open(url, &format!("bench-{}-{n}", std::process::id())).map_err(|e| e.to_string())?)
        }
    })
}

fn hub(kind: Kind, at: &mut Places) -> Result<EventHub, String> {
    EventHub::with_store(SERVER_EVENT_CHANNEL_CAPACITY, store(kind, at)?, openagents_server::store::DEFAULT_RETAIN_EVENTS).map_err(|e| e.to_string())
}

fn echo_runner() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("OA_ECHO_RUNNER") {
        return Ok(PathBuf::from(p));
    }
    // target/<profile>/examples/oa-store-bench -> target/<profile>/openagents-runner-echo
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let p = exe.parent().and_then(Path::parent).map(|d| d.join("openagents-runner-echo")).ok_or("no build folder")?;
    if p.is_file() { Ok(p) } else { Err(format!("{} is missing: cargo build --release -p openagents-runner", p.display())) }
}

/// What one round's subscriber got.
struct Round {
    took: Duration,
    /// Events received (not counting `lagged` notices).
    received: u64,
    /// Events the subscriber missed (`lagged`): a subscriber slower than the publisher misses
    /// what the bounded buffer no longer holds.
    missed: u64,
    /// Bytes of JSON of the events received.
    bytes: u64,
}

/// How far the publisher lets the subscriber fall behind what the hub has delivered (half the
/// replay buffer): a subscriber that keeps within it misses nothing, on either store.
const PACE: i64 = SERVER_EVENT_CHANNEL_CAPACITY as i64 / 2;

/// `events` text events published on `hub` from one thread while a subscriber on another reads
/// each one's JSON: the time from the first publish until the subscriber has passed the last,
/// and what it received and missed. The publisher goes as fast as it can while the subscriber
/// is within [`PACE`] events of the newest delivered one, and waits for it otherwise: the
/// rate is that of a stream every event of which reaches the subscriber (with no pacing, a
/// publisher faster than its subscriber makes it miss events, at a rate that depends on how
/// the two threads happen to be scheduled). On a durable store the publisher is not held back
/// by the writer's commits beyond the write queue's own bound (what waits to be written is not
/// delivered yet, so the subscriber cannot be behind it); there a subscriber kept off the CPU
/// for two whole commits can still miss events (the buffer keeps the two newest commits): those
/// are not counted as received, and the report shows how many there were.
fn throughput_round(hub: &EventHub, events: usize) -> Result<Round, String> {
    let mut sub = hub.subscribe(None);
    let target = hub.last_seq() + events as i64;
    let position = Arc::new(std::sync::atomic::AtomicI64::new(sub.position()));
    let read_to = Arc::clone(&position);
    let reader = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
        rt.block_on(async move {
            let (mut bytes, mut received, mut missed) = (0u64, 0u64, 0u64);
            while sub.position() < target {
                let Some(ev) = sub.next_shared().await else { break };
                if let RuntimeEvent::Lagged { missed: m } = ev.event().event {
                    missed += m.max(0) as u64;
                } else {
                    bytes += ev.json().len() as u64;
                    received += 1;
                }
                read_to.store(sub.position(), std::sync::atomic::Ordering::Relaxed);
            }
            (bytes, received, missed)
        })
    });
    let start = Instant::now();
    for i in 0..events {
        if i % 64 == 0 {
            while hub.last_seq() - position.load(std::sync::atomic::Ordering::Relaxed) > PACE - 64 {
                std::thread::yield_now();
            }
        }
        hub.publish(RuntimeEvent::Text { text: CHUNK.into() });
    }
    let (bytes, received, missed) = reader.join().map_err(|_| "the reader panicked")?;
    let took = start.elapsed();
    if hub.last_seq() < target {
        return Err(format!("only {} of {target} delivered", hub.last_seq()));
    }
    Ok(Round { took, received, missed, bytes })
}

/// `turns` whole turns through the echo runner, one after another: each one's latency.
async fn turn_round(engine: &RpcEngine, turns: usize) -> Result<Vec<Duration>, String> {
    let body = serde_json::json!({"id": 1, "method": "submit", "params": {"task": TASK}}).to_string();
    let mut out = Vec::with_capacity(turns);
    for _ in 0..turns {
        let start = Instant::now();
        let reply = engine.handle(&Caller::stdio(), body.as_bytes()).await;
        let took = start.elapsed();
        let bytes = reply.outcome.map_err(|e| format!("a turn failed: {e:?}"))?;
        let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
        if v["result"] != TASK {
            return Err(format!("the echo runner answered {v}"));
        }
        out.push(took);
    }
    Ok(out)
}

fn engine(hub: EventHub, echo: &Path, cwd: &Path) -> Result<RpcEngine, String> {
    let toml = format!("[runners.echo]\ncommand = {:?}\n", echo.display().to_string());
    let registry = Registry::parse(&toml, None).map_err(|e| e.operator_detail())?;
    let config = EngineConfig { default_runner: Some("echo".into()), cwd: cwd.display().to_string(), ..EngineConfig::default() };
    Ok(RpcEngine::with_events(RunnerAgent::new(RunnerHost::new(registry)), config, hub))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { f64::NAN } else { v[v.len() / 2] }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

fn run() -> Result<(), String> {
    let rounds = env_or("STORE_BENCH_ROUNDS", 7);
    let events = env_or("STORE_BENCH_EVENTS", 200_000);
    let turns = env_or("STORE_BENCH_TURNS", 100);
    let dir = match std::env::var_os("STORE_BENCH_DIR") {
        Some(d) => PathBuf::from(d),
        None => std::env::temp_dir().join(format!("oa-store-bench-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let echo = echo_runner()?;
    let postgres = std::env::var("STORE_BENCH_POSTGRES").ok().filter(|u| !u.is_empty());
    let kinds: Vec<Kind> = if postgres.is_some() { vec![Kind::Memory, Kind::Sqlite, Kind::Postgres] } else { vec![Kind::Memory, Kind::Sqlite] };
    let mut at = Places { dir: dir.clone(), postgres, made: 0 };
    // Round r starts with the store r places along: each goes first as often as the others.
    let order = |r: usize| -> Vec<Kind> { (0..kinds.len()).map(|i| kinds[(r + i) % kinds.len()]).collect() };
    let durable: Vec<Kind> = kinds[1..].to_vec();

    // (1) Events per second through the hub.
    eprintln!("== hub throughput: {rounds} rounds x {events} events per store");
    for &kind in &kinds {
        throughput_round(&hub(kind, &mut at)?, events / 10)?; // warm-up
    }
    let mut rate = vec![Vec::new(); 3];
    let mut ratios = vec![Vec::new(); 3];
    let mut missed = [0u64; 3];
    let mut event_bytes = 0;
    for r in 0..rounds {
        let mut this = [0.0; 3];
        for kind in order(r) {
            let h = hub(kind, &mut at)?;
            let round = throughput_round(&h, events)?;
            event_bytes = round.bytes / round.received.max(1);
            missed[kind as usize] += round.missed;
            // What reached the subscriber: events it missed did not go through.
            let per_s = round.received as f64 / round.took.as_secs_f64();
            eprintln!("round {r} {}: {per_s:.0} events/s received ({} missed)", kind.name(), round.missed);
            this[kind as usize] = per_s;
            rate[kind as usize].push(per_s);
        }
        for &kind in &durable {
            ratios[kind as usize].push(this[kind as usize] / this[Kind::Memory as usize]);
        }
    }

    // (3, measured here, reported last) A resume from the store: the events of a full round
    // read back by a subscriber that resumes from before them (all from the store, none from the
    // replay buffer), on each durable store.
    eprintln!("== resume from the store: {events} events per durable store, {rounds} rounds");
    let mut resume_rate: Vec<Vec<f64>> = vec![Vec::new(); 3];
    for &kind in &durable {
        let h = hub(kind, &mut at)?;
        let from = h.last_seq();
        throughput_round(&h, events)?;
        for r in 0..rounds {
            let per_s = resume_round(&h, from, events)?;
            eprintln!("round {r} {}: {per_s:.0} events/s resumed", kind.name());
            resume_rate[kind as usize].push(per_s);
        }
    }

    // (2) Turn latency through the echo runner.
    eprintln!("== turn latency: {rounds} rounds x {turns} turns per store ({})", echo.display());
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(|e| e.to_string())?;
    let mut lat: Vec<Vec<Duration>> = vec![Vec::new(); 3];
    let mut p50_ratios = vec![Vec::new(); 3];
    rt.block_on(async {
        let mut engines = Vec::new();
        for &kind in &kinds {
            engines.push(engine(hub(kind, &mut at)?, &echo, &dir)?);
        }
        for e in &engines {
            turn_round(e, 5).await?; // warm-up
        }
        for r in 0..rounds {
            let mut this = [Duration::ZERO; 3];
            for kind in order(r) {
                let mut got = turn_round(&engines[kind as usize], turns).await?;
                got.sort();
                this[kind as usize] = percentile(&got, 0.5);
                lat[kind as usize].extend(got);
            }
            for &kind in &durable {
                p50_ratios[kind as usize].push(this[kind as usize].as_secs_f64() / this[Kind::Memory as usize].as_secs_f64());
            }
        }
        for e in &engines {
            e.shutdown().await;
        }
        Ok::<_, String>(())
    })?;
    let _ = std::fs::remove_dir_all(&dir);

    println!("### Ratios");
    println!();
    for l in &mut lat {
        l.sort();
    }
    let m = &lat[Kind::Memory as usize];
    for &kind in &durable {
        let ratio = median(&mut ratios[kind as usize]);
        let name = if kind == Kind::Sqlite { "SQLite" } else { "PostgreSQL (loopback)" };
        println!("- events/s through the hub, {name} / memory: **{ratio:.2}×** (median of {rounds} per-round ratios; target ≥ 0.8: {})", if ratio >= 0.8 { "met" } else { "not met" });
        let s = &lat[kind as usize];
        println!("- turn latency p50, {name} / memory: **{:.2}×** (median of per-round ratios); the store adds {} ms at p50 and {} ms at p99", median(&mut p50_ratios[kind as usize]), ms(percentile(s, 0.5).saturating_sub(percentile(m, 0.5))), ms(percentile(s, 0.99).saturating_sub(percentile(m, 0.99))));
    }
    println!();
    println!("### Events per second through the hub ({events} text events a round, {event_bytes} bytes of JSON each, one subscriber; events/s counts what the subscriber received)");
    println!();
    println!("| store | median events/s | min | max | events the subscriber missed (`lagged`), all rounds |");
    println!("|---|---:|---:|---:|---:|");
    for &kind in &kinds {
        let v = &mut rate[kind as usize];
        let med = median(v);
        println!("| {} | {med:.0} | {:.0} | {:.0} | {} |", kind.name(), v.first().copied().unwrap_or(f64::NAN), v.last().copied().unwrap_or(f64::NAN), missed[kind as usize]);
    }
    println!();
    println!("### Turn latency through the echo runner ({} turns per store, task of {} words)", rounds * turns, TASK.split_whitespace().count());
    println!();
    println!("| store | p50 ms | p90 ms | p99 ms | max ms |");
    println!("|---|---:|---:|---:|---:|");
    for &kind in &kinds {
        let v = &lat[kind as usize];
        println!("| {} | {} | {} | {} | {} |", kind.name(), ms(percentile(v, 0.5)), ms(percentile(v, 0.9)), ms(percentile(v, 0.99)), ms(percentile(v, 1.0)));
    }
    println!();
    println!("### A resume from the store ({events} events read back from before the replay buffer, {rounds} rounds per store)");
    println!();
    println!("| store | median events/s | min | max |");
    println!("|---|---:|---:|---:|");
    for &kind in &durable {
        let v = &mut resume_rate[kind as usize];
        let med = median(v);
        println!("| {} | {med:.0} | {:.0} | {:.0} |", kind.name(), v.first().copied().unwrap_or(f64::NAN), v.last().copied().unwrap_or(f64::NAN));
    }
    Ok(())
}

/// A subscriber resuming from `from` reads the `events` after it (the hub's replay buffer holds
/// only the newest, so nearly all come from the store): events per second, each checked to
/// come once and in order.
fn resume_round(hub: &EventHub, from: i64, events: usize) -> Result<f64, String> {
    let mut sub = hub.subscribe(Some(from));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut next = from + 1;
    rt.block_on(async {
        while next <= from + events as i64 {
            let ev = sub.next_shared().await.ok_or("the hub went away")?;
            if ev.event().seq != next {
                return Err(format!("a resume gave {} where {next} was due", ev.event().seq));
            }
            next += 1;
        }
        Ok::<_, String>(())
    })?;
    Ok(events as f64 / start.elapsed().as_secs_f64())
}
