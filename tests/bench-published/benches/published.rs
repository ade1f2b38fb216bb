//! Decode + validate of published-protocol documents: the Rust generated from the vendored ACP v1
//! and MCP 2026-07-28 schemas against `serde_json::Value` + a compiled `jsonschema` validator and
//! against the typed decode alone, on the same bytes (`corpus.json`: ACP `SessionNotification`s,
//! the params of `session/update`, and MCP `CallToolRequest`s, whole `tools/call` requests).
//!
//! Run with `cargo bench -p openagents-bench-published` (or `make bench-published`). Cases, each
//! over every document of a set:
//!
//! - `a_typed_validated`: `rt::parse_validated::<T>(bytes)`: exact decode into the generated type,
//!   nothing after the value, then the generated checks;
//! - `a2_validate_document`: the generated `validate_document("<T>", bytes)`: (a) behind the
//!   dispatch on the type's name;
//! - `b_value_jsonschema`: `serde_json::from_slice::<Value>` + `Validator::is_valid`, the
//!   validator compiled once from `{"$ref": "#/$defs/<T>", "$defs": <the schema's $defs>}`;
//! - `c_typed_from_slice`: `serde_json::from_slice::<T>(bytes)`: the generated type's serde
//!   `Deserialize` (the same exact decoder as (a)) without the checks;
//! - `a3_objects_as_maps`, `c3_objects_as_maps`: (a) and (c) for the type generated with
//!   free-form objects built as maps (`Config::objects_as_text(false)`: MCP's tool `arguments`,
//!   ACP's `_meta`), where (a) and (c) keep them as checked text (the default).
//!
//! Criterion measures each case; then an interleaved loop (short batches, the cases round-robin
//! with the order rotating each round) gives the medians the ratios are read from, so load from
//! other processes lands on every case alike. `PUBLISHED_BENCH_SECONDS` sets that loop's time per
//! set (default 3).

#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use openagents_bench_published::{
    DocumentSet, acp_v1, acp_v1_maps, corpus, mcp_2026_07_28, mcp_2026_07_28_maps, schema_text,
};
use openagents_rt as rt;
use serde_json::Value;

const CASES: [&str; 6] = [
    "a_typed_validated",
    "a2_validate_document",
    "b_value_jsonschema",
    "c_typed_from_slice",
    "a3_objects_as_maps",
    "c3_objects_as_maps",
];
/// The cases that check the schema (each must refuse a broken document).
const CHECKING: [usize; 4] = [0, 1, 2, 4];

/// A case over a set's documents: how many it accepted.
type OverDocs = fn(&[Vec<u8>]) -> usize;
/// A case over a set's documents given the type's name: how many it accepted.
type OverDocsByName = fn(&str, &[Vec<u8>]) -> usize;

/// One set, ready to time: its documents as bytes, its `jsonschema` validator, and the cases.
struct Set {
    name: String,
    type_name: String,
    docs: Vec<Vec<u8>>,
    validator: jsonschema::Validator,
    typed: OverDocs,
    by_name: OverDocsByName,
    decode: OverDocs,
    typed_maps: OverDocs,
    decode_maps: OverDocs,
}

#[inline(never)]
fn a_typed_validated<T: rt::Wire + rt::Validate + rt::SchemaCheck>(docs: &[Vec<u8>]) -> usize {
    docs.iter()
        .filter(|d| rt::parse_validated::<T>(d).is_ok())
        .count()
}

#[inline(never)]
fn a2_acp(name: &str, docs: &[Vec<u8>]) -> usize {
    docs.iter()
        .filter(|d| matches!(acp_v1::validate_document(name, d), Some(Ok(()))))
        .count()
}

#[inline(never)]
fn a2_mcp(name: &str, docs: &[Vec<u8>]) -> usize {
    docs.iter()
        .filter(|d| matches!(mcp_2026_07_28::validate_document(name, d), Some(Ok(()))))
        .count()
}

#[inline(never)]
fn b_value_jsonschema(v: &jsonschema::Validator, docs: &[Vec<u8>]) -> usize {
    docs.iter()
        .filter(|d| match serde_json::from_slice::<Value>(d) {
            Ok(value) => v.is_valid(&value),
            Err(_) => false,
        })
        .count()
}

#[inline(never)]
fn c_typed_from_slice<T: serde::de::DeserializeOwned>(docs: &[Vec<u8>]) -> usize {
    docs.iter()
        .filter(|d| serde_json::from_slice::<T>(d).is_ok())
        .count()
}

fn run_case(case: usize, s: &Set) -> usize {
    let docs = black_box(&s.docs[..]);
    match case {
        0 => (s.typed)(docs),
        1 => (s.by_name)(&s.type_name, docs),
        2 => b_value_jsonschema(&s.validator, docs),
        3 => (s.decode)(docs),
        4 => (s.typed_maps)(docs),
        _ => (s.decode_maps)(docs),
    }
}

/// The schema's `$defs` under a root of `{"$ref": "#/$defs/<type_name>"}`, compiled once.
fn validator(schema: &str, type_name: &str) -> jsonschema::Validator {
    let schema: Value =
        serde_json::from_str(schema_text(schema)).expect("the vendored schema is JSON");
    let wrapper = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": format!("#/$defs/{type_name}"),
        "$defs": schema["$defs"],
    });
    jsonschema::validator_for(&wrapper).expect("the wrapper schema compiles")
}

fn prepare(set: DocumentSet) -> Set {
    let validator = validator(&set.schema, &set.type_name);
    let docs = set.docs.into_iter().map(String::into_bytes).collect();
    let (typed, by_name, decode, typed_maps, decode_maps): (
        OverDocs,
        OverDocsByName,
        OverDocs,
        OverDocs,
        OverDocs,
    ) = match (set.schema.as_str(), set.type_name.as_str()) {
            ("acp-v1", "SessionNotification") => (
                a_typed_validated::<acp_v1::SessionNotification>,
                a2_acp,
                c_typed_from_slice::<acp_v1::SessionNotification>,
                a_typed_validated::<acp_v1_maps::SessionNotification>,
                c_typed_from_slice::<acp_v1_maps::SessionNotification>,
            ),
            ("mcp-2026-07-28", "CallToolRequest") => (
                a_typed_validated::<mcp_2026_07_28::CallToolRequest>,
                a2_mcp,
                c_typed_from_slice::<mcp_2026_07_28::CallToolRequest>,
                a_typed_validated::<mcp_2026_07_28_maps::CallToolRequest>,
                c_typed_from_slice::<mcp_2026_07_28_maps::CallToolRequest>,
            ),
            (schema, name) => panic!("no benchmark case for {schema} {name}"),
        };
    Set {
        name: set.name,
        type_name: set.type_name,
        docs,
        validator,
        typed,
        by_name,
        decode,
        typed_maps,
        decode_maps,
    }
}

/// Refuses to time a failure path: every case accepts every document, and (a), (a2) and (b)
/// each refuse a copy of the set's first document that breaks only the schema.
fn assert_all_accept(s: &Set) {
    for (case, label) in CASES.iter().enumerate() {
        let accepted = run_case(case, s);
        assert_eq!(
            accepted,
            s.docs.len(),
            "{label} refuses {} of the {} documents of {}",
            s.docs.len() - accepted,
            s.docs.len(),
            s.name
        );
    }
    for (i, d) in s.docs.iter().enumerate() {
        let value: Value = serde_json::from_slice(d).expect("the corpus is JSON");
        if let Err(e) = s.validator.validate(&value) {
            panic!("jsonschema refuses document {i} of {}: {e}", s.name);
        }
    }
    let first = std::str::from_utf8(&s.docs[0]).expect("UTF-8");
    let bad = if first.contains(r#""sessionId":"sess_9f3c2a71""#) {
        first.replacen(r#""sessionId":"sess_9f3c2a71""#, r#""sessionId":7"#, 1)
    } else {
        assert!(
            first.contains(r#""jsonrpc":"2.0""#),
            "{}: no field to break",
            s.name
        );
        first.replacen(r#""jsonrpc":"2.0""#, r#""jsonrpc":"1.0""#, 1)
    };
    let broken = Set {
        docs: vec![bad.into_bytes()],
        ..clone_set(s)
    };
    for case in CHECKING {
        let label = CASES[case];
        assert_eq!(
            run_case(case, &broken),
            0,
            "{label} accepts a broken copy of the first document of {}",
            s.name
        );
    }
}

fn clone_set(s: &Set) -> Set {
    Set {
        name: s.name.clone(),
        type_name: s.type_name.clone(),
        docs: s.docs.clone(),
        validator: s.validator.clone(),
        typed: s.typed,
        by_name: s.by_name,
        decode: s.decode,
        typed_maps: s.typed_maps,
        decode_maps: s.decode_maps,
    }
}

fn criterion_benches(c: &mut Criterion, sets: &[Set]) {
    for s in sets {
        let mut g = c.benchmark_group(format!("published_{}", s.name));
        g.throughput(Throughput::Bytes(
            s.docs.iter().map(|d| d.len() as u64).sum(),
        ));
        for (case, label) in CASES.iter().enumerate() {
            g.bench_function(*label, |b| b.iter(|| run_case(case, s)));
        }
        g.finish();
    }
}

/// Per-case median and 10th percentile (ns per document) from round-robin batches of about
/// 0.5 ms, the order rotating each round.
fn own_timings(s: &Set, budget: Duration) -> ([f64; 6], [f64; 6]) {
    const BATCH: f64 = 0.000_5;
    let n = CASES.len();
    let mut per_call = [0f64; 6];
    for (case, slot) in per_call.iter_mut().enumerate() {
        let t = Instant::now();
        let mut iters = 0u64;
        while t.elapsed() < Duration::from_millis(100) {
            black_box(run_case(case, s));
            iters += 1;
        }
        *slot = t.elapsed().as_secs_f64() / iters as f64;
    }
    let slowest = per_call.iter().copied().fold(0f64, f64::max);
    let iters = ((BATCH / slowest).ceil() as u64).max(1);
    let rounds = ((budget.as_secs_f64() / (BATCH * n as f64)) as usize).clamp(21, 20_001);
    let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); n];
    let per_doc = (iters * s.docs.len() as u64) as f64;
    for round in 0..rounds {
        for k in 0..n {
            let case = (round + k) % n;
            let t = Instant::now();
            for _ in 0..iters {
                black_box(run_case(case, s));
            }
            samples[case].push(t.elapsed().as_nanos() as f64 / per_doc);
        }
    }
    let (mut median, mut p10) = ([0f64; 6], [0f64; 6]);
    for (case, mut v) in samples.into_iter().enumerate() {
        v.sort_by(f64::total_cmp);
        median[case] = v[v.len() / 2];
        p10[case] = v[v.len() / 10];
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

fn main() {
    let sets: Vec<Set> = corpus().into_iter().map(prepare).collect();
    for s in &sets {
        assert_all_accept(s);
    }

    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    criterion_benches(&mut c, &sets);
    c.final_summary();

    let args: Vec<String> = std::env::args().collect();
    if args
        .iter()
        .any(|a| a == "--test" || a == "--list" || a.starts_with("--profile-time"))
    {
        return;
    }

    let seconds: f64 = std::env::var("PUBLISHED_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    println!("\ninterleaved timing loop ({seconds} s per set), ns per document, median (p10):");
    println!(
        "| set | docs | bytes | (a) typed + checks | (a2) validate_document | (b) Value + jsonschema | (c) typed decode | b/a (target >= 2) | a/c (target <= 1.2) | (a3) objects as maps | (c3) its typed decode | b/a3 | a3/c3 |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for s in &sets {
        let (m, p) = own_timings(s, Duration::from_secs_f64(seconds));
        let bytes: usize = s.docs.iter().map(Vec::len).sum();
        let cell = |i: usize| format!("{} ({})", fmt_ns(m[i]), fmt_ns(p[i]));
        let faster = |a: usize| {
            let r = m[2] / m[a];
            let verdict = if r >= 2.0 { "met" } else { "MISSED" };
            format!("{r:.2}× ({:.2}×) {verdict}", p[2] / p[a])
        };
        let over = |a: usize, c: usize| {
            let r = m[a] / m[c];
            let verdict = if r <= 1.2 { "met" } else { "MISSED" };
            format!("{r:.3} ({:.3}) {verdict}", p[a] / p[c])
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s.name,
            s.docs.len(),
            bytes,
            cell(0),
            cell(1),
            cell(2),
            cell(3),
            faster(0),
            over(0, 3),
            cell(4),
            cell(5),
            faster(4),
            over(4, 5),
        );
    }
}
