//! The compatibility checker, data-driven: every pair under `tests/compat/<case>/{old,new}/`
//! must get exactly the findings its `expected.txt` lists (`verdict direction kind pointer`, one
//! per line; `#` lines say what the case is). `UPDATE_EXPECT=1 cargo test -p openagents-codegen
//! --test compat` rewrites the files from the checker's output — review the diff.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use openagents_codegen::compat::{self, Direction, Kind, Verdict};
use openagents_codegen::{Config, Documents, load, lower};
use serde_json::{Value, json};

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn cases() -> Vec<PathBuf> {
    let dir = manifest().join("tests/compat");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir).expect("tests/compat exists").flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    out.sort();
    out
}

fn expected(case: &Path) -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(case.join("expected.txt")).unwrap_or_else(|e| panic!("{}: expected.txt: {e}", case.display()));
    let comments = text.lines().filter(|l| l.starts_with('#')).map(str::to_owned).collect();
    let mut lines: Vec<String> = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_owned).collect();
    lines.sort();
    (comments, lines)
}

fn run(case: &Path) -> compat::Report {
    let load = |side: &str| Config::new().schema_dir(case.join(side)).load().unwrap_or_else(|e| panic!("{}/{side}: {e}", case.display())).1;
    compat::compare(&load("old"), &load("new"))
}

#[test]
fn every_pair_in_the_corpus_gets_its_expected_findings() {
    let update = std::env::var_os("UPDATE_EXPECT").is_some();
    let mut failures = Vec::new();
    for case in cases() {
        let report = run(&case);
        let got = compat::key_lines(&report);
        let (comments, want) = expected(&case);
        if got == want {
            continue;
        }
        if update {
            let text: String = comments.iter().chain(got.iter()).map(|l| format!("{l}\n")).collect();
            std::fs::write(case.join("expected.txt"), text).expect("writable expected.txt");
            continue;
        }
        let missing: Vec<&String> = want.iter().filter(|l| !got.contains(l)).collect();
        let extra: Vec<&String> = got.iter().filter(|l| !want.contains(l)).collect();
        failures.push(format!(
            "{}:\n  missing: {missing:#?}\n  unexpected: {extra:#?}\n  full report:\n{}",
            case.file_name().and_then(|n| n.to_str()).unwrap_or("?"),
            report.to_string().lines().map(|l| format!("    {l}\n")).collect::<String>()
        ));
    }
    assert!(
        failures.is_empty(),
        "{} case(s) differ from their expected.txt (rerun with UPDATE_EXPECT=1 to rewrite them, then review the diff):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Kinds that only exist in one direction: methods are called (input), root types and error
/// codes have one role in the corpus, and constants are not directional.
fn one_directional(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::MethodAdded
            | Kind::MethodRemoved
            | Kind::RootTypeAdded
            | Kind::RootTypeRemoved
            | Kind::ConstantAdded
            | Kind::ConstantChanged
            | Kind::ConstantRemoved
            | Kind::ErrorCodeAdded
            | Kind::ErrorCodeRemoved
            | Kind::ErrorRpcCodeChanged
            | Kind::ErrorRetryableChanged
    )
}

#[test]
fn the_corpus_covers_every_kind_in_both_directions() {
    let by_name: BTreeMap<&str, Kind> = Kind::ALL.iter().map(|k| (k.name(), *k)).collect();
    let mut seen: BTreeMap<Kind, BTreeSet<String>> = BTreeMap::new();
    for case in cases() {
        for line in expected(&case).1 {
            let parts: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(parts.len(), 4, "{}: `{line}` is not `verdict direction kind pointer`", case.display());
            let kind = by_name.get(parts[2]).unwrap_or_else(|| panic!("{}: unknown kind `{}`", case.display(), parts[2]));
            seen.entry(*kind).or_default().insert(parts[1].to_owned());
        }
    }
    let mut missing = Vec::new();
    for kind in Kind::ALL {
        match seen.get(kind) {
            None => missing.push(format!("{} (no case)", kind.name())),
            Some(dirs) if !(one_directional(*kind) || dirs.contains("output") && dirs.contains("input")) => {
                missing.push(format!("{} (only {dirs:?})", kind.name()))
            }
            _ => {}
        }
    }
    assert!(missing.is_empty(), "kinds without a corpus case in tests/compat/: {missing:#?}");
    assert!(seen.len() >= 25, "the corpus covers {} kinds of change; it should cover at least 25", seen.len());
    assert!(cases().len() >= 50, "expected at least 50 pairs");
}

#[test]
fn a_bundle_reads_back_as_the_schema_it_was_made_from() {
    let docs = Documents::load_dir(&manifest().join("../schema")).expect("the real schema loads");
    let bundle = docs.bundle();
    let back = load::documents_from_bundle("bundle", &bundle).expect("a bundle unbundles");
    assert_eq!(back.bundle(), bundle, "bundle -> files -> bundle is the identity");
    let a = lower::lower(&docs).expect("lowers");
    let b = lower::lower(&back).expect("the unbundled files lower");
    let report = compat::compare(&a, &b);
    assert!(report.findings.is_empty(), "a schema and its own bundle differ:\n{report}");
}

type Patch = fn(&mut BTreeMap<String, Value>);

fn one_of<'v>(files: &'v mut BTreeMap<String, Value>, file: &str, pointer: &str) -> &'v mut Vec<Value> {
    files.get_mut(file).and_then(|d| d.pointer_mut(pointer)).and_then(Value::as_array_mut).unwrap_or_else(|| panic!("{file}#{pointer} is an array"))
}

fn properties<'v>(files: &'v mut BTreeMap<String, Value>, file: &str, pointer: &str) -> &'v mut serde_json::Map<String, Value> {
    files.get_mut(file).and_then(|d| d.pointer_mut(pointer)).and_then(Value::as_object_mut).unwrap_or_else(|| panic!("{file}#{pointer} is an object"))
}

/// Each case: a change another engineer is expected to make, applied to the real schema, with
/// the kind and verdict it must get. Additions must never break anyone.
const REAL_SCHEMA_CHANGES: &[(&str, Patch, Kind, Verdict)] = &[
    (
        "an optional field in the status result",
        |f| {
            properties(f, "RuntimeStatus.json", "/properties").insert("uptime_ms".into(), json!({"type": "integer", "minimum": 0}));
        },
        Kind::PropertyAdded,
        Verdict::Compatible,
    ),
    (
        "an optional param of submit",
        |f| {
            properties(f, "RpcRequest.json", "/$defs/SubmitParams/properties").insert("priority".into(), json!({"type": "integer"}));
        },
        Kind::PropertyAdded,
        Verdict::Compatible,
    ),
    (
        "a new method",
        |f| {
            let branches = one_of(f, "RpcRequest.json", "/oneOf");
            let mut ping = branches[2].clone();
            ping["title"] = json!("Ping");
            ping["properties"]["method"] = json!({"const": "ping"});
            branches.push(ping);
        },
        Kind::MethodAdded,
        Verdict::Compatible,
    ),
    (
        "a new event kind in the x-extensible RuntimeEvent",
        |f| {
            one_of(f, "ServerEvent.json", "/$defs/RuntimeEvent/oneOf").push(json!({
                "title": "ToolCalled", "type": "object", "required": ["type", "tool"],
                "properties": {"type": {"const": "tool_called"}, "tool": {"type": "string"}}
            }));
        },
        Kind::UnionVariantAdded,
        Verdict::Compatible,
    ),
    (
        "a new error code in the x-extensible ErrorCode",
        |f| {
            one_of(f, "RuntimeSubmitError.json", "/$defs/ErrorCode/enum").push(json!("rate_limited"));
            properties(f, "RuntimeSubmitError.json", "/$defs/ErrorCode/x-enum")
                .insert("rate_limited".into(), json!({"retryable": true, "rpc_code": -32099, "description": "Too many requests; retry later."}));
        },
        Kind::ErrorCodeAdded,
        Verdict::Compatible,
    ),
    (
        "a required field removed from the status result (the negative control)",
        |f| {
            properties(f, "RuntimeStatus.json", "/properties").remove("subscribers");
            one_of(f, "RuntimeStatus.json", "/required").retain(|v| v != "subscribers");
        },
        Kind::RequiredPropertyRemoved,
        Verdict::Breaking,
    ),
    (
        "a new kind of runner event (Event is closed: old hosts refuse it)",
        |f| {
            one_of(f, "Event.json", "/oneOf").push(json!({
                "title": "Thinking", "type": "object", "additionalProperties": false, "required": ["type"],
                "properties": {"type": {"const": "thinking"}}
            }));
        },
        Kind::UnionVariantAdded,
        Verdict::Breaking,
    ),
];

#[test]
fn changes_to_the_real_schema_get_the_right_verdict() {
    let docs = Documents::load_dir(&manifest().join("../schema")).expect("the real schema loads");
    let before = lower::lower(&docs).expect("lowers");
    for (what, patch, kind, verdict) in REAL_SCHEMA_CHANGES {
        let mut files = docs.files.clone();
        patch(&mut files);
        let after = lower::lower(&Documents { files }).unwrap_or_else(|e| panic!("{what}: the patched schema lowers: {e}"));
        let report = compat::compare(&before, &after);
        assert!(
            report.findings.iter().any(|f| f.kind == *kind && f.verdict == *verdict),
            "{what}: expected a {} {} finding, got:\n{report}",
            verdict.as_str(),
            kind.name()
        );
        let worst = report.findings.iter().map(|f| f.verdict).min().unwrap_or(Verdict::Compatible);
        assert_eq!(worst, *verdict, "{what}: the worst verdict, in:\n{report}");
        if *verdict == Verdict::Breaking {
            let line = report.breaking().next().map(ToString::to_string).unwrap_or_default();
            assert!(line.contains("refuse"), "{what}: a breaking finding says whom it breaks: {line}");
        }
    }
}

#[test]
fn findings_print_one_per_line_with_pointer_and_direction() {
    let case = manifest().join("tests/compat/property_added_closed");
    let report = run(&case);
    insta::assert_snapshot!("compat_report_property_added_closed", report.to_string());
    assert!(report.findings.iter().any(|f| f.direction == Direction::Output && f.verdict == Verdict::Breaking));
}
