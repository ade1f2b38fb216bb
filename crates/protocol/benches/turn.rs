//! Typed parse + generated checks vs `serde_json::Value` + a compiled `jsonschema` validator,
//! on the same `Turn` documents (a small one and one with a ~90 KiB mixed-script task).
//!
//! Run with `cargo bench -p openagents-protocol --bench turn`. After criterion has measured
//! every case, the run prints the ratios from criterion's own medians (read back from
//! `target/criterion/<group>/<bench>/new/estimates.json`) and from an independent interleaved
//! timing loop (median and 10th percentile of short batches), so a noisy neighbour on one case
//! shows up as a disagreement between them. `TURN_BENCH_DRIVER` (see `main`) runs one case alone,
//! for callgrind.

#![allow(missing_docs)]

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use criterion::{Criterion, Throughput};
use openagents_protocol::{SCHEMA_BUNDLE, Turn, rt};
use serde_json::Value;

const SMALL: &str = r#"{"schema":"openagents.agent.runner.v1","assignment":"asg-0001","conversation":"conv-0001","agent":{"runner":"echo"},"task":"Summarise the open issues.","cwd":"/home/user/project"}"#;

/// The bytes of the large task, before JSON encoding.
const LARGE_TASK_BYTES: usize = 90 * 1024;

/// A task of mixed scripts (Latin, Cyrillic, CJK, emoji) with characters JSON must escape.
fn large_task() -> String {
    const PARTS: &[&str] = &[
        "The quick brown fox jumps over the lazy dog; ",
        "Съешь же ещё этих мягких французских булок, да выпей чаю. ",
        "我能吞下玻璃而不伤身体。",
        "私はガラスを食べられます。それは私を傷つけません。",
        "🦀🚀✨👩‍💻 ",
        "line break\n",
        "she said \"hi\"\tand left \\ ",
        "Ünïcödé àccents — naïve café. ",
    ];
    let mut s = String::with_capacity(LARGE_TASK_BYTES + 64);
    'fill: loop {
        for p in PARTS {
            for c in p.chars() {
                if s.len() + c.len_utf8() > LARGE_TASK_BYTES {
                    break 'fill;
                }
                s.push(c);
            }
        }
    }
    s
}

fn large_document() -> Vec<u8> {
    let doc = serde_json::json!({
        "schema": "openagents.agent.runner.v1",
        "assignment": "asg-0001",
        "conversation": "conv-0001",
        "agent": { "runner": "echo" },
        "task": large_task(),
        "cwd": "/home/user/project",
    });
    serde_json::to_vec(&doc).expect("serializes")
}

/// The bundle with `"$ref": "#/$defs/Turn"` at its root, compiled once.
fn turn_validator() -> jsonschema::Validator {
    let mut schema: Value = serde_json::from_str(SCHEMA_BUNDLE).expect("bundle is JSON");
    schema
        .as_object_mut()
        .expect("bundle is an object")
        .insert("$ref".into(), Value::String("#/$defs/Turn".into()));
    jsonschema::validator_for(&schema).expect("bundle compiles")
}

// The four cases. Each returns whether the document was accepted, so the optimiser cannot drop
// the work and every case pays for dropping what it built.

#[inline(never)]
fn a_typed_validated(bytes: &[u8]) -> bool {
    rt::parse_validated::<Turn>(bytes).is_ok()
}

#[inline(never)]
fn b_value_jsonschema(v: &jsonschema::Validator, bytes: &[u8]) -> bool {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => v.is_valid(&value),
        Err(_) => false,
    }
}

#[inline(never)]
fn c_typed_from_slice(bytes: &[u8]) -> bool {
    serde_json::from_slice::<Turn>(bytes).is_ok()
}

#[inline(never)]
fn c2_wire_decode(bytes: &[u8]) -> bool {
    <Turn as rt::Wire>::decode(&mut serde_json::Deserializer::from_slice(bytes)).is_ok()
}

const CASES: [&str; 4] = ["a_typed_validated", "b_value_jsonschema", "c_typed_from_slice", "c2_wire_decode"];

fn run_case(case: usize, v: &jsonschema::Validator, bytes: &[u8]) -> bool {
    match case {
        0 => a_typed_validated(black_box(bytes)),
        1 => b_value_jsonschema(v, black_box(bytes)),
        2 => c_typed_from_slice(black_box(bytes)),
        _ => c2_wire_decode(black_box(bytes)),
    }
}

/// Refuses to benchmark a failure path: every case must accept every document.
fn assert_all_accept(v: &jsonschema::Validator, docs: &[(&str, &[u8])]) {
    for (name, bytes) in docs {
        if let Err(e) = rt::parse_validated::<Turn>(bytes) {
            panic!("(a) refuses the {name} document: {e}");
        }
        let value: Value = serde_json::from_slice(bytes).expect("(b) parses");
        if let Err(e) = v.validate(&value) {
            panic!("(b) refuses the {name} document: {e}");
        }
        if let Err(e) = serde_json::from_slice::<Turn>(bytes) {
            panic!("(c) refuses the {name} document: {e}");
        }
        if let Err(e) = <Turn as rt::Wire>::decode(&mut serde_json::Deserializer::from_slice(bytes)) {
            panic!("(c2) refuses the {name} document: {e}");
        }
        for (case, label) in CASES.iter().enumerate() {
            assert!(run_case(case, v, bytes), "{label} refuses the {name} document");
        }
    }
    // And the checks are live: each path refuses a document that breaks only the schema.
    let bad = SMALL.replace("/home/user/project", "relative/path");
    assert!(rt::parse_validated::<Turn>(bad.as_bytes()).is_err(), "(a) accepts a relative cwd");
    assert!(!b_value_jsonschema(v, bad.as_bytes()), "(b) accepts a relative cwd");
}

fn criterion_benches(c: &mut Criterion, v: &jsonschema::Validator, docs: &[(&str, &[u8])]) {
    for (name, bytes) in docs {
        let mut g = c.benchmark_group(format!("turn_{name}"));
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function(CASES[0], |b| b.iter(|| a_typed_validated(black_box(bytes))));
        g.bench_function(CASES[1], |b| b.iter(|| b_value_jsonschema(v, black_box(bytes))));
        g.bench_function(CASES[2], |b| b.iter(|| c_typed_from_slice(black_box(bytes))));
        g.bench_function(CASES[3], |b| b.iter(|| c2_wire_decode(black_box(bytes))));
        g.finish();
    }
}

/// Where criterion writes its estimates, resolved the way criterion does (`CRITERION_HOME`,
/// then `CARGO_TARGET_DIR`, then the target directory this executable was built into).
fn criterion_home() -> Option<PathBuf> {
    if let Some(h) = std::env::var_os("CRITERION_HOME") {
        return Some(PathBuf::from(h));
    }
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        let t = PathBuf::from(t);
        let t = if t.is_relative() { std::env::current_dir().ok()?.join(t) } else { t };
        return Some(t.join("criterion"));
    }
    // <target>/<profile>/deps/turn-<hash>
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.join("criterion"))
}

/// Criterion's median point estimate (ns) for one bench, if this run wrote it.
fn criterion_median(group: &str, bench: &str, since: SystemTime) -> Option<f64> {
    let path = criterion_home()?.join(group).join(bench).join("new").join("estimates.json");
    let fresh = std::fs::metadata(&path).ok()?.modified().ok()? >= since;
    if !fresh {
        return None;
    }
    let est: Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
    est["median"]["point_estimate"].as_f64()
}

/// Per-case medians and 10th percentiles (ns per call) from a plain timing loop over short
/// batches (about 0.5 ms), run round-robin with the order rotating each round, so drift and other
/// processes on a shared machine land on every case alike, and a batch that was descheduled
/// part-way is an outlier rather than the norm.
fn own_timings(v: &jsonschema::Validator, bytes: &[u8], budget: Duration) -> ([f64; 4], [f64; 4]) {
    const BATCH: f64 = 0.000_5;
    let n = CASES.len();
    // Calibrate: iterations per batch so a batch of the slowest case takes about BATCH.
    let mut per_call = [0f64; 4];
    for (case, slot) in per_call.iter_mut().enumerate() {
        let t = Instant::now();
        let mut iters = 0u64;
        while t.elapsed() < Duration::from_millis(150) {
            black_box(run_case(case, v, bytes));
            iters += 1;
        }
        *slot = t.elapsed().as_secs_f64() / iters as f64;
    }
    let slowest = per_call.iter().copied().fold(0f64, f64::max);
    let iters = ((BATCH / slowest).ceil() as u64).max(1);
    let rounds = ((budget.as_secs_f64() / (BATCH * n as f64)) as usize).clamp(21, 20_001);
    let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); n];
    for round in 0..rounds {
        for k in 0..n {
            let case = (round + k) % n;
            let t = Instant::now();
            for _ in 0..iters {
                black_box(run_case(case, v, bytes));
            }
            samples[case].push(t.elapsed().as_nanos() as f64 / iters as f64);
        }
    }
    let (mut median, mut p10) = ([0f64; 4], [0f64; 4]);
    for (case, mut s) in samples.into_iter().enumerate() {
        s.sort_by(f64::total_cmp);
        median[case] = s[s.len() / 2];
        p10[case] = s[s.len() / 10];
    }
    (median, p10)
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.3} µs", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

fn print_ratios(source: &str, rows: &[(&str, usize, [f64; 4])]) {
    println!("\ntimes per call ({source}):");
    for (name, len, m) in rows {
        let cells: Vec<String> = CASES.iter().zip(m).map(|(c, t)| format!("{c} {}", fmt_ns(*t))).collect();
        println!("  {name} ({len} B): {}", cells.join(", "));
    }
    let line: Vec<String> = rows
        .iter()
        .map(|(name, _, m)| {
            format!("{name}: a/b = {:.3}, a/c = {:.3}, a/c2 = {:.3}", m[0] / m[1], m[0] / m[2], m[0] / m[3])
        })
        .collect();
    println!("ratios ({source}): {}", line.join("; "));
    let verdict: Vec<String> = rows
        .iter()
        .map(|(name, _, m)| {
            let speedup = m[1] / m[0];
            let need = if *name == "small" { 1.4 } else { 1.0 };
            format!(
                "{name}: (a) is {speedup:.2}x faster than (b) [target >= {need}x: {}], (a) is {:.3}x (c) [target <= 1.1x: {}]",
                if speedup >= need { "met" } else { "MISSED" },
                m[0] / m[2],
                if m[0] / m[2] <= 1.1 { "met" } else { "MISSED" },
            )
        })
        .collect();
    for v in verdict {
        println!("  {v}");
    }
}

fn main() {
    let started = SystemTime::now();
    let validator = turn_validator();
    let large = large_document();
    let docs: [(&str, &[u8]); 2] = [("small", SMALL.as_bytes()), ("large", &large)];
    assert_all_accept(&validator, &docs);

    // Driver mode for profilers (callgrind): `TURN_BENCH_DRIVER="<case> <small|large> <calls>"`
    // runs one case that many times and exits. Run it with 0 calls too and subtract, to leave
    // out the setup above.
    if let Ok(spec) = std::env::var("TURN_BENCH_DRIVER") {
        let mut it = spec.split_whitespace();
        let (case, doc, calls) = (it.next(), it.next(), it.next());
        let case = CASES.iter().position(|c| Some(*c) == case).expect("TURN_BENCH_DRIVER: unknown case");
        let bytes = docs.iter().find(|(n, _)| Some(*n) == doc).expect("TURN_BENCH_DRIVER: small or large").1;
        let calls: u64 = calls.and_then(|n| n.parse().ok()).expect("TURN_BENCH_DRIVER: number of calls");
        for _ in 0..calls {
            assert!(run_case(case, &validator, bytes));
        }
        return;
    }

    let mut c = Criterion::default().configure_from_args();
    criterion_benches(&mut c, &validator, &docs);
    c.final_summary();

    // `--test` (cargo test --benches), `--list` and `--profile-time` measure nothing to compare.
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--test" || a == "--list" || a.starts_with("--profile-time")) {
        return;
    }

    let from_criterion: Vec<(&str, usize, [f64; 4])> = docs
        .iter()
        .filter_map(|(name, bytes)| {
            let group = format!("turn_{name}");
            let mut m = [0f64; 4];
            for (slot, case) in m.iter_mut().zip(CASES) {
                *slot = criterion_median(&group, case, started)?;
            }
            Some((*name, bytes.len(), m))
        })
        .collect();
    if from_criterion.len() == docs.len() {
        print_ratios("criterion medians", &from_criterion);
    } else {
        println!("\n(criterion estimates for this run not found; a filter may have skipped some cases)");
    }

    type Row<'a> = (&'a str, usize, ([f64; 4], [f64; 4]));
    let own: Vec<Row<'_>> = docs
        .iter()
        .map(|(name, bytes)| (*name, bytes.len(), own_timings(&validator, bytes, Duration::from_secs(4))))
        .collect();
    let medians: Vec<(&str, usize, [f64; 4])> = own.iter().map(|(n, l, (m, _))| (*n, *l, *m)).collect();
    let p10s: Vec<(&str, usize, [f64; 4])> = own.iter().map(|(n, l, (_, p))| (*n, *l, *p)).collect();
    print_ratios("interleaved timing loop, median of 0.5 ms batches", &medians);
    print_ratios("interleaved timing loop, 10th percentile of 0.5 ms batches", &p10s);
}
