//! Proof that the generated types mean what the schema means.
//!
//! With the `schemars` feature every generated type derives `schemars::JsonSchema` (see
//! `openagents_codegen::schemars_attrs`). For each root type `T` this test takes the schema
//! schemars derives from the Rust type, `schema_for!(T)` (with its `$defs`), and the source
//! schema, the bundle with `"$ref": "#/$defs/T"` at its root, and proves they accept the same
//! documents, by the first of these that decides:
//!
//! 1. **Canonical subtraction.** `canonicalize(derived).subtract(&canonicalize(source))` and the
//!    other way round, with the `jsonschema` crate's canonical algebra; both differences must be
//!    proven empty (`Satisfiability::No`). A difference proven non-empty (`Yes`) fails the test at
//!    once, printing the difference as a schema.
//! 2. **Equal canonical normal forms.** Where subtraction is `Unknown` (the canonicalizer has
//!    fixed internal budgets: a seven-branch open `oneOf` is past them), the two canonical forms,
//!    with every `$defs` reference inlined, must be the same JSON. Canonicalization preserves what
//!    a schema accepts, so two schemas with one normal form accept the same documents.
//! 3. **Corpus fallback**, only where neither decides (a `Raw` operand, `Unknown`, different
//!    normal forms): both schemas are compiled with `jsonschema` and must give the same verdict on
//!    every document of `tests/vectors/T.json` (valid and invalid), on seeds written here, and on
//!    the mutations of the valid ones: each property dropped, an unknown property added, each
//!    value replaced by `null`, by values of every other type and by edge values, arrays resized;
//!    the seeds are also mutated with values at the edges of every bound either schema states
//!    (lengths, numbers, item counts, literals).
//!
//! The corpus also cross-checks the types proven by 1 or 2: a disagreement there is a failure.
//! The method that proved each type is printed (`cargo test --test semantic -- --nocapture`).
//!
//! `derived_schema_with_a_rule_broken_is_caught` shows the proof is not vacuous: a derived
//! schema with one rule dropped or loosened is refused every time.
#![cfg(feature = "schemars")]

use std::collections::BTreeSet;
use std::path::Path;

use jsonschema::canonical::{CanonicalKind, CanonicalSchema, Satisfiability};
use openagents_protocol::{Event, RpcRequest, RuntimeStatus, RuntimeSubmitError, SCHEMA_BUNDLE, ServerEvent, Turn};
use serde_json::{Value, json};

/// The root types: one per schema file.
fn roots() -> Vec<(&'static str, Value)> {
    fn derived<T: schemars::JsonSchema>() -> Value {
        serde_json::to_value(schemars::schema_for!(T)).expect("a schema is JSON")
    }
    vec![
        ("Event", derived::<Event>()),
        ("RpcRequest", derived::<RpcRequest>()),
        ("RuntimeStatus", derived::<RuntimeStatus>()),
        ("RuntimeSubmitError", derived::<RuntimeSubmitError>()),
        ("ServerEvent", derived::<ServerEvent>()),
        ("Turn", derived::<Turn>()),
    ]
}

/// The source schema of root type `name`: the bundle, entered at `#/$defs/<name>`.
fn source(name: &str) -> Value {
    let mut bundle: Value = serde_json::from_str(SCHEMA_BUNDLE).expect("the bundle is JSON");
    assert!(bundle["$defs"].get(name).is_some(), "the bundle has no `{name}`");
    bundle["$ref"] = Value::String(format!("#/$defs/{name}"));
    bundle
}

/// What the canonical comparison concluded.
#[derive(Debug)]
enum Canonical {
    /// Both differences are proven empty by subtraction.
    Subtraction,
    /// The subtractions are undecided, but both schemas canonicalize to the same normal form
    /// (compared with every `$defs` reference inlined). Canonicalization preserves what a schema
    /// accepts, so equal normal forms accept the same documents.
    SameNormalForm(String),
    /// A difference is proven non-empty: the schemas differ.
    Differ(String),
    /// The canonicalizer could not decide; why.
    Undecided(String),
}

/// `a - b`: `Ok(true)` when proven empty, `Ok(false)` when undecided, `Err` when proven non-empty.
fn difference(label: &str, a: &CanonicalSchema, b: &CanonicalSchema) -> Result<bool, String> {
    match a.subtract(b) {
        Ok(d) => match d.satisfiability() {
            Satisfiability::No => Ok(true),
            Satisfiability::Yes => Err(format!(
                "{label} accepts documents the other rejects; the difference is\n{}",
                serde_json::to_string_pretty(&d.to_json_schema()).unwrap_or_default()
            )),
            Satisfiability::Unknown => Ok(false),
        },
        Err(_) => Ok(false),
    }
}

/// Decodes one `$ref` fragment (`#/$defs/<percent-encoded, ~-escaped key>`) to its key.
fn def_key(reference: &str) -> Option<String> {
    let escaped = reference.strip_prefix("#/$defs/")?;
    let bytes = escaped.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            out.push(u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(String::from_utf8(out).ok()?.replace("~1", "/").replace("~0", "~"))
}

/// A canonical schema with every `$defs` reference replaced by its body (`None` for a reference
/// with siblings, one that does not resolve, or a cycle).
fn inline_refs(v: &Value, defs: &serde_json::Map<String, Value>, depth: usize) -> Option<Value> {
    if depth > 64 {
        return None;
    }
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref") {
                if m.keys().any(|k| !matches!(k.as_str(), "$ref" | "$defs" | "$schema")) {
                    return None;
                }
                let body = defs.get(&def_key(r.as_str()?)?)?;
                return inline_refs(body, defs, depth + 1);
            }
            let mut out = serde_json::Map::new();
            for (k, x) in m {
                if k == "$defs" || k == "$schema" {
                    continue;
                }
                out.insert(k.clone(), inline_refs(x, defs, depth)?);
            }
            Some(Value::Object(out))
        }
        Value::Array(a) => a.iter().map(|x| inline_refs(x, defs, depth)).collect::<Option<Vec<_>>>().map(Value::Array),
        other => Some(other.clone()),
    }
}

fn normal_form(s: &CanonicalSchema) -> Option<Value> {
    let json = s.to_json_schema();
    let defs = json.get("$defs").and_then(Value::as_object).cloned().unwrap_or_default();
    inline_refs(&json, &defs, 0)
}

fn canonical_compare(derived: &Value, source: &Value) -> Canonical {
    let a = match jsonschema::canonicalize(derived) {
        Ok(a) => a,
        Err(e) => return Canonical::Undecided(format!("the derived schema does not canonicalize: {e}")),
    };
    let b = match jsonschema::canonicalize(source) {
        Ok(b) => b,
        Err(e) => return Canonical::Undecided(format!("the source schema does not canonicalize: {e}")),
    };
    for (side, s) in [("derived", &a), ("source", &b)] {
        if s.kind() == CanonicalKind::Raw {
            return Canonical::Undecided(format!("the {side} schema canonicalizes to Raw: {:?}", s.view()));
        }
    }
    let forward = match difference("derived - source", &a, &b) {
        Ok(proven) => proven,
        Err(why) => return Canonical::Differ(why),
    };
    let backward = match difference("source - derived", &b, &a) {
        Ok(proven) => proven,
        Err(why) => return Canonical::Differ(why),
    };
    if forward && backward {
        return Canonical::Subtraction;
    }
    let undecided = match (forward, backward) {
        (false, false) => "derived - source and source - derived",
        (false, true) => "derived - source",
        _ => "source - derived",
    };
    match (normal_form(&a), normal_form(&b)) {
        (Some(x), Some(y)) if x == y => Canonical::SameNormalForm(format!("subtraction undecided for {undecided}")),
        _ => Canonical::Undecided(format!("subtraction undecided for {undecided}, and the normal forms differ")),
    }
}

/// The documents of `tests/vectors/<name>.json`: `(valid, every document)`.
fn vectors(name: &str) -> (Vec<Value>, Vec<Value>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors").join(format!("{name}.json"));
    let Ok(text) = std::fs::read_to_string(&path) else { return (Vec::new(), Vec::new()) };
    let file: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    let docs = |key: &str| -> Vec<Value> {
        file[key].as_array().map(|cases| cases.iter().filter_map(|c| c.get("document").cloned()).collect()).unwrap_or_default()
    };
    let valid = docs("valid");
    let mut all = valid.clone();
    all.extend(docs("invalid"));
    (valid, all)
}

/// Valid documents written here, so the corpus never depends on the vector files alone.
fn seeds(name: &str) -> Vec<Value> {
    let error = json!({"code": "lease_held", "message": "held", "retryable": true,
        "details": {"violations": [{"pointer": "/a", "keyword": "required", "message": "m"}], "known": ["echo"],
                    "holder": "ops", "expires_at_ms": 5, "limit": 7}});
    match name {
        "Turn" => vec![json!({"schema": "openagents.agent.runner.v1", "assignment": "a1", "conversation": "c:1-x.y_z",
            "agent": {"runner": "echo"}, "task": "say hello", "cwd": "/tmp"})],
        "Event" => vec![json!({"type": "text", "text": "hi"}), json!({"type": "approval_request", "id": "q1", "prompt": "may I?"}), json!({"type": "completed", "result": "ok"}), json!({"type": "failed", "message": "no"})],
        "RpcRequest" => vec![
            json!({"jsonrpc": "2.0", "id": 1, "method": "submit", "params": {"task": "t", "runner": "echo", "cwd": "/w", "assignment": "a", "conversation": "c"}}),
            json!({"id": "x", "method": "interrupt", "params": {}}),
            json!({"id": null, "method": "status", "params": null}),
            json!({"method": "shutdown"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "release"}),
        ],
        "RuntimeStatus" => vec![
            json!({"state": "running", "active_turn": {"assignment": "a", "conversation": "c", "runner": "r", "started_at_ms": 1},
                "counters": {"submitted": 1, "completed": 0, "failed": 0, "interrupted": 0}, "last_seq": 3, "subscribers": 1,
                "lease": {"holder": "ops", "expires_at_ms": 9}, "schema_version": "v1",
                "limits": {"max_frame": 1, "max_output": 2, "max_line_bytes": 3, "event_channel_capacity": 4}}),
            json!({"state": "idle", "active_turn": null, "counters": {"submitted": 0, "completed": 0, "failed": 0, "interrupted": 0},
                "last_seq": 0, "subscribers": 0, "lease": null, "schema_version": "v1",
                "limits": {"max_frame": 0, "max_output": 0, "max_line_bytes": 0, "event_channel_capacity": 0}}),
        ],
        "RuntimeSubmitError" => vec![error.clone(), json!({"code": "busy", "message": "m", "retryable": true})],
        "ServerEvent" => vec![
            json!({"seq": 1, "time_ms": 2, "event": {"type": "turn_started", "assignment": "a", "conversation": "c", "runner": "r"}}),
            json!({"seq": 2, "event": {"type": "text", "text": "t"}}),
            json!({"seq": 3, "event": {"type": "turn_completed", "result": "r"}}),
            json!({"seq": 4, "event": {"type": "turn_failed", "error": error}}),
            json!({"seq": 5, "event": {"type": "lagged", "missed": 1}}),
            json!({"seq": 5, "event": {"type": "approval_denied", "prompt": "rm -rf?", "reason": "no"}}),
            json!({"seq": 6, "event": {"type": "gap", "since": 0, "resumed_at": 9}}),
            json!({"seq": 9007199254740991_i64, "event": {"type": "shutting_down"}}),
        ],
        other => panic!("no seeds for {other}"),
    }
}

/// Values every leaf is replaced with: each JSON type, and the edges of the rules in the schemas.
fn replacements() -> Vec<Value> {
    vec![
        Value::Null,
        json!(true),
        json!(0),
        json!(1),
        json!(-1),
        json!(1.5),
        json!(9007199254740991_i64),
        json!(9007199254740992_i64),
        json!(""),
        json!("x"),
        json!("2.0"),
        json!("-bad"),
        json!("/"),
        json!("relative"),
        json!("/nul\u{0}"),
        json!("a".repeat(128)),
        json!("a".repeat(129)),
        json!("a".repeat(257)),
        json!("idle"),
        json!("paused"),
        json!("busy"),
        json!("submit"),
        json!("text"),
        json!("tool_called"),
        json!([]),
        json!(["x"]),
        json!([1]),
        json!({}),
        json!({"unknown": 1}),
    ]
}

/// Every pointer inside `doc` (the root included).
fn pointers(doc: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match doc {
        Value::Object(m) => {
            for (k, v) in m {
                pointers(v, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                pointers(v, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// The edges of the rules both schemas state, collected from their keywords: each string
/// length bound, number bound, array length bound and literal. Mutating the seeds with values
/// just inside and just outside each edge is what lets the corpus see a bound one schema lacks.
#[derive(Default)]
struct Edges {
    lengths: BTreeSet<u64>,
    numbers: Vec<f64>,
    items: BTreeSet<u64>,
    literals: Vec<Value>,
}

impl Edges {
    fn collect(&mut self, schema: &Value) {
        match schema {
            Value::Object(m) => {
                for (k, v) in m {
                    match k.as_str() {
                        "minLength" | "maxLength" => self.lengths.extend(v.as_u64()),
                        "minItems" | "maxItems" => self.items.extend(v.as_u64()),
                        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => self.numbers.extend(v.as_f64()),
                        "const" => self.literals.push(v.clone()),
                        "enum" => self.literals.extend(v.as_array().cloned().unwrap_or_default()),
                        _ => {}
                    }
                    self.collect(v);
                }
            }
            Value::Array(a) => a.iter().for_each(|v| self.collect(v)),
            _ => {}
        }
    }

    /// Replacement values for any leaf.
    fn values(&self) -> Vec<Value> {
        let mut out = self.literals.clone();
        for &l in &self.lengths {
            for n in [l.saturating_sub(1), l, l + 1] {
                let n = n as usize;
                out.push(Value::String("a".repeat(n)));
                if n > 0 {
                    out.push(Value::String(format!("/{}", "a".repeat(n - 1))));
                }
            }
        }
        for &b in &self.numbers {
            for x in [b - 1.0, b - 0.5, b, b + 0.5, b + 1.0] {
                out.push(if x.fract() == 0.0 && x.abs() < 9.0e15 { json!(x as i64) } else { json!(x) });
            }
        }
        out
    }
}

/// The documents a valid one turns into by one mutation: each property dropped, an unknown one
/// added, each value replaced (by `replacements()` and, when `edges` is given, by values at the
/// edges of every rule), arrays grown and emptied (and, with `edges`, sized at every item bound).
fn mutations(doc: &Value, edges: Option<&Edges>) -> Vec<Value> {
    let mut out = Vec::new();
    let mut ptrs = Vec::new();
    pointers(doc, String::new(), &mut ptrs);
    let mut values = replacements();
    if let Some(e) = edges {
        values.extend(e.values());
    }
    for p in &ptrs {
        let target = doc.pointer(p).expect("the pointer was read from the document");
        if let Value::Object(m) = target {
            for k in m.keys() {
                let mut d = doc.clone();
                d.pointer_mut(p).and_then(Value::as_object_mut).expect("an object").remove(k);
                out.push(d);
            }
            let mut d = doc.clone();
            d.pointer_mut(p).and_then(Value::as_object_mut).expect("an object").insert("zz_unknown".into(), json!(1));
            out.push(d);
        }
        if let Value::Array(a) = target {
            if let Some(first) = a.first() {
                let mut sizes = vec![0, a.len() + 1];
                if let Some(e) = edges {
                    for &k in &e.items {
                        sizes.extend([k.saturating_sub(1) as usize, k as usize, k as usize + 1]);
                    }
                }
                for n in sizes {
                    let mut d = doc.clone();
                    *d.pointer_mut(p).expect("an array") = Value::Array(vec![first.clone(); n]);
                    out.push(d);
                }
            }
        }
        for r in &values {
            // Edge values only where they can matter: string lengths at strings, bounds at
            // numbers (every leaf still gets a value of every other type from `replacements()`).
            let fits = match (target, r) {
                (Value::String(_), Value::String(_)) | (Value::Number(_), Value::Number(_)) => true,
                (_, Value::String(x)) => x.chars().count() <= 257,
                (_, Value::Number(_)) => false,
                _ => true,
            };
            if !fits {
                continue;
            }
            let mut d = doc.clone();
            *d.pointer_mut(p).expect("the pointer was read from the document") = r.clone();
            out.push(d);
        }
    }
    out
}

/// The corpus for `name`: the vectors, the seeds, the mutations of every valid vector, and the
/// mutations of the seeds at the edges of every rule either schema states; deduplicated.
fn corpus(name: &str, derived: &Value, source: &Value) -> Vec<Value> {
    let (valid, all) = vectors(name);
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let mut add = |d: Value, out: &mut Vec<Value>| {
        if seen.insert(d.to_string()) {
            out.push(d);
        }
    };
    let seeds = seeds(name);
    for d in all.into_iter().chain(seeds.iter().cloned()) {
        add(d, &mut out);
    }
    for v in &valid {
        for m in mutations(v, None) {
            add(m, &mut out);
        }
    }
    let mut edges = Edges::default();
    edges.collect(derived);
    edges.collect(source);
    for v in &seeds {
        for m in mutations(v, Some(&edges)) {
            add(m, &mut out);
        }
    }
    out
}

/// Whether both schemas give the same verdict on every document of the corpus: `Ok(counts)`
/// (documents, of which valid), or the first document they disagree on.
fn corpus_compare(name: &str, derived: &Value, source: &Value) -> Result<(usize, usize), String> {
    let d = jsonschema::validator_for(derived).unwrap_or_else(|e| panic!("{name}: the derived schema does not compile: {e}"));
    let s = jsonschema::validator_for(source).unwrap_or_else(|e| panic!("{name}: the source schema does not compile: {e}"));
    let docs = corpus(name, derived, source);
    let mut valid = 0;
    for doc in &docs {
        let (dv, sv) = (d.is_valid(doc), s.is_valid(doc));
        if dv != sv {
            return Err(format!("{name}: derived says {dv}, source says {sv} for {doc}"));
        }
        valid += usize::from(sv);
    }
    Ok((docs.len(), valid))
}

/// How a type was proven to accept exactly what its source schema accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    /// `derived - source` and `source - derived` both proven empty.
    CanonicalSubtraction,
    /// Subtraction undecided; equal canonical normal forms.
    CanonicalNormalForm,
    /// Canonicalizer undecided; same verdict on the whole corpus.
    Corpus,
}

/// Proves `derived` and `source` accept the same documents, or says why not: canonical
/// subtraction first, then equal normal forms, then (only when the canonicalizer cannot decide)
/// the corpus. A proof by the canonicalizer is cross-checked on the corpus as well.
fn prove(name: &str, derived: &Value, source: &Value) -> Result<(Method, String), String> {
    let corpus = corpus_compare(name, derived, source);
    let counts = |c: &Result<(usize, usize), String>| c.as_ref().map(|(n, v)| format!("{n} documents ({v} valid)")).unwrap_or_default();
    match canonical_compare(derived, source) {
        Canonical::Differ(why) => Err(format!("{name}: {why}")),
        Canonical::Subtraction | Canonical::SameNormalForm(_) if corpus.is_err() => Err(format!(
            "{name}: the canonicalizer says equal but the corpus disagrees (a bug in the proof machinery): {}",
            corpus.unwrap_err()
        )),
        Canonical::Subtraction => Ok((
            Method::CanonicalSubtraction,
            format!("proved by canonical subtraction (derived - source and source - derived both unsatisfiable); cross-checked on {}", counts(&corpus)),
        )),
        Canonical::SameNormalForm(why) => Ok((
            Method::CanonicalNormalForm,
            format!("proved by equal canonical normal forms ({why}); cross-checked on {}", counts(&corpus)),
        )),
        Canonical::Undecided(why) => match corpus {
            Ok(_) => Ok((Method::Corpus, format!("canonicalizer undecided ({why}); proved by the fallback: same verdict on {}", counts(&corpus)))),
            Err(e) => Err(format!("{name}: canonicalizer undecided ({why}) and the fallback found a difference: {e}")),
        },
    }
}

#[test]
fn each_root_type_accepts_exactly_what_its_source_schema_accepts() {
    let mut failures = Vec::new();
    let mut proven = Vec::new();
    for (name, derived) in roots() {
        match prove(name, &derived, &source(name)) {
            Ok((method, how)) => {
                println!("{name}: {how}");
                proven.push((name, method));
            }
            Err(why) => failures.push(format!("{why}\nderived schema:\n{}", serde_json::to_string_pretty(&derived).unwrap_or_default())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    let generated_roots: Vec<&str> = openagents_protocol::TYPES.iter().filter(|t| t.root).map(|t| t.name).collect();
    let names: Vec<&str> = proven.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, generated_roots, "every root type the schema defines is proven: add a new root to `roots()` and `seeds()`");
    // Which method proved what, pinned: with jsonschema 0.61.2 subtraction decides every root
    // type but ServerEvent, whose seven-branch open union is past the canonicalizer's budgets
    // (any six of the branches are decided) and which equal normal forms prove, and RpcRequest,
    // whose nine methods (since `conversations` and `conversation`, protocol 1.3.0) are past them
    // too and whose normal forms differ in form, so the corpus fallback proves it (the same
    // verdict on some 3600 documents). A type slipping to a weaker method must be noticed, so a
    // change here is a test failure to look at.
    assert_eq!(
        proven,
        [
            ("Event", Method::CanonicalSubtraction),
            ("RpcRequest", Method::Corpus),
            ("RuntimeStatus", Method::CanonicalSubtraction),
            ("RuntimeSubmitError", Method::CanonicalSubtraction),
            ("ServerEvent", Method::CanonicalNormalForm),
            ("Turn", Method::CanonicalSubtraction),
        ]
    );
}

/// Removes `key` from the object (or index from the array) at `pointer` in a derived schema.
fn remove_at(schema: &mut Value, pointer: &str, key: &str) {
    match schema.pointer_mut(pointer) {
        Some(Value::Object(m)) => assert!(m.remove(key).is_some(), "the derived schema has `{key}` at `{pointer}`"),
        Some(Value::Array(a)) => {
            a.remove(key.parse::<usize>().expect("an index"));
        }
        _ => panic!("the derived schema has no object or array at `{pointer}`"),
    }
}

/// The proof is not vacuous: a derived schema with one rule dropped or loosened is refused,
/// every time. The last column says the canonicalizer (jsonschema 0.61.2) proves the difference
/// by subtraction itself; the other cases it cannot decide (a rule beside a `pattern`, a change
/// inside an `anyOf`/open union, ...) and the corpus refuses them.
#[test]
fn derived_schema_with_a_rule_broken_is_caught() {
    type Edit = fn(&mut Value);
    let cases: &[(&str, &str, Edit, bool)] = &[
        ("Turn", "cwd without its pattern", |s| remove_at(s, "/properties/cwd", "pattern"), true),
        ("Turn", "an id without its pattern", |s| remove_at(s, "/properties/assignment", "pattern"), false),
        ("Turn", "task without maxLength", |s| remove_at(s, "/properties/task", "maxLength"), false),
        ("Turn", "task without minLength", |s| remove_at(s, "/properties/task", "minLength"), true),
        ("Turn", "schema without its const", |s| remove_at(s, "/properties/schema", "const"), true),
        ("Turn", "open to unknown properties", |s| remove_at(s, "", "additionalProperties"), false),
        ("Turn", "cwd no longer required", |s| remove_at(s, "/required", "5"), true),
        ("Event", "a variant open to unknown properties", |s| remove_at(s, "/oneOf/0", "additionalProperties"), false),
        ("RuntimeStatus", "last_seq without minimum", |s| remove_at(s, "/properties/last_seq", "minimum"), true),
        ("RuntimeStatus", "active_turn no longer nullable", |s| remove_at(s, "/properties/active_turn/anyOf", "1"), true),
        ("RuntimeStatus", "a state dropped", |s| remove_at(s, "/$defs/RuntimeState/oneOf", "2"), true),
        ("RpcRequest", "id without maxLength", |s| remove_at(s, "/oneOf/0/properties/id", "maxLength"), false),
        ("RpcRequest", "jsonrpc without its const", |s| remove_at(s, "/oneOf/2/properties/jsonrpc", "const"), false),
        ("RuntimeSubmitError", "details.holder nullable", |s| {
            s["$defs"]["ErrorDetails"]["properties"]["holder"]["type"] = json!(["string", "null"]);
        }, true),
        ("ServerEvent", "seq without maximum", |s| remove_at(s, "/properties/seq", "maximum"), false),
        ("ServerEvent", "a kind of event dropped", |s| remove_at(s, "/$defs/RuntimeEvent/oneOf", "6"), false),
    ];
    for (name, what, edit, decided) in cases {
        let mut broken = roots().into_iter().find(|(n, _)| n == name).expect("a root type").1;
        edit(&mut broken);
        let source = source(name);
        let verdict = prove(name, &broken, &source);
        assert!(verdict.is_err(), "{name} with {what} must be refused, got {verdict:?}");
        let canonical = canonical_compare(&broken, &source);
        println!("{name} with {what}: refused ({})", if matches!(canonical, Canonical::Differ(_)) { "by subtraction" } else { "by the corpus" });
        if *decided {
            assert!(matches!(canonical, Canonical::Differ(_)), "{name} with {what} must be proven different by subtraction, got {canonical:?}");
        }
    }
}
