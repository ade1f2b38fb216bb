//! Runs the shared golden vectors in `tests/vectors/` (the same files the Python and TypeScript
//! clients run) against three checkers that must agree on every case:
//!
//! * `validate_document`, the generated typed decoder and validator: a valid case must pass, an
//!   invalid one must be refused with a violation at exactly the case's `pointer` and `keyword`;
//! * the generated untyped checker (`<T as rt::SchemaCheck>::check_value`), which explains
//!   documents the typed decoder refuses: same verdict, same violation;
//! * the `jsonschema` crate, the reference implementation of JSON Schema 2020-12, run on the
//!   bundled schema: same verdict.
//!
//! Cases too large to write out (strings of 98304 code points, arrays of 1001 items) live in
//! `tests/vectors/large/`, where a `fill` says how to build them; they are built here in Rust.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use openagents_protocol::rt::{self, DocumentError, SchemaCheck};
use openagents_protocol::{SCHEMA_BUNDLE, TYPES, validate_document};
use serde_json::Value;

/// What a case expects.
#[derive(Debug, Clone)]
enum Expect {
    Valid,
    Invalid { pointer: String, keyword: String },
}

/// One case of one vector file.
#[derive(Debug, Clone)]
struct Case {
    file: PathBuf,
    ty: String,
    description: String,
    document: Value,
    expect: Expect,
}

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors")
}

/// Every `*.json` file directly in `dir`, sorted.
fn vector_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

fn str_field<'a>(v: &'a Value, name: &str, file: &Path) -> &'a str {
    v.get(name).and_then(Value::as_str).unwrap_or_else(|| panic!("{}: `{name}` must be a string in {v}", file.display()))
}

/// Builds the string or array a `fill` describes and puts it at `fill.at` in `document`.
fn apply_fill(document: &mut Value, fill: &Value, file: &Path) {
    let at = str_field(fill, "at", file);
    let times = fill.get("times").and_then(Value::as_u64).unwrap_or_else(|| panic!("{}: fill needs `times`", file.display()));
    let times = usize::try_from(times).expect("times fits in usize");
    let built = match fill.get("repeat") {
        Some(Value::String(unit)) => {
            let prefix = fill.get("prefix").and_then(Value::as_str).unwrap_or("");
            let suffix = fill.get("suffix").and_then(Value::as_str).unwrap_or("");
            Value::String(format!("{prefix}{}{suffix}", unit.repeat(times)))
        }
        Some(item) => Value::Array(vec![item.clone(); times]),
        None => panic!("{}: fill needs `repeat`", file.display()),
    };
    let slot = document.pointer_mut(at).unwrap_or_else(|| panic!("{}: fill target {at} is not in the document", file.display()));
    *slot = built;
}

/// Loads every case of every vector file in `dir`, checking the files' shape as it goes.
fn load_cases(dir: &Path, fills: bool) -> Vec<Case> {
    let mut cases = Vec::new();
    for file in vector_files(dir) {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let root: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", file.display()));
        let ty = str_field(&root, "type", &file).to_owned();
        assert_eq!(
            file.file_stem().and_then(|s| s.to_str()),
            Some(ty.as_str()),
            "{}: a vector file is named after its type",
            file.display()
        );
        assert!(TYPES.iter().any(|t| t.name == ty), "{}: no generated type is named `{ty}`", file.display());
        for (key, valid) in [("valid", true), ("invalid", false)] {
            let list = root.get(key).and_then(Value::as_array).unwrap_or_else(|| panic!("{}: `{key}` must be an array", file.display()));
            for c in list {
                let description = str_field(c, "description", &file).to_owned();
                let mut document = c.get("document").cloned().unwrap_or_else(|| panic!("{}: `{description}` has no document", file.display()));
                match c.get("fill") {
                    Some(fill) if fills => apply_fill(&mut document, fill, &file),
                    Some(_) => panic!("{}: `{description}`: `fill` belongs in tests/vectors/large/", file.display()),
                    None if fills => panic!("{}: `{description}`: a large case needs a `fill`", file.display()),
                    None => {}
                }
                let expect = if valid {
                    assert!(c.get("pointer").is_none() && c.get("keyword").is_none(), "{}: valid case `{description}` names a violation", file.display());
                    Expect::Valid
                } else {
                    Expect::Invalid { pointer: str_field(c, "pointer", &file).to_owned(), keyword: str_field(c, "keyword", &file).to_owned() }
                };
                cases.push(Case { file: file.clone(), ty: ty.clone(), description, document, expect });
            }
        }
    }
    cases
}

/// The reference validators, one per type: the bundle with `"$ref": "<the type's pointer>"` at
/// its root, compiled as JSON Schema 2020-12 by the `jsonschema` crate.
struct Reference {
    validators: HashMap<&'static str, jsonschema::Validator>,
}

impl Reference {
    fn new() -> Self {
        let bundle: Value = serde_json::from_str(SCHEMA_BUNDLE).expect("SCHEMA_BUNDLE is JSON");
        let validators = TYPES
            .iter()
            .map(|t| {
                let mut schema = bundle.clone();
                schema.as_object_mut().expect("the bundle is an object").insert("$ref".into(), Value::String(t.pointer.into()));
                let v = jsonschema::draft202012::options()
                    .build(&schema)
                    .unwrap_or_else(|e| panic!("the reference cannot compile {}: {e}", t.pointer));
                (t.name, v)
            })
            .collect();
        Reference { validators }
    }

    fn is_valid(&self, ty: &str, document: &Value) -> bool {
        self.validators.get(ty).unwrap_or_else(|| panic!("no reference validator for {ty}")).is_valid(document)
    }
}

/// Runs the generated untyped checker for `ty` on `value`.
fn untyped_check(ty: &str, value: &Value) -> Vec<rt::Violation> {
    use openagents_protocol as p;
    fn run<T: SchemaCheck>(value: &Value) -> Vec<rt::Violation> {
        let mut out = Vec::new();
        T::check_value(value, &rt::Path::Root, &mut out);
        out
    }
    fn run_fn(f: fn(&Value, &rt::Path<'_>, &mut Vec<rt::Violation>), value: &Value) -> Vec<rt::Violation> {
        let mut out = Vec::new();
        f(value, &rt::Path::Root, &mut out);
        out
    }
    match ty {
        "ActiveTurn" => run::<p::ActiveTurn>(value),
        "AgentSpec" => run::<p::AgentSpec>(value),
        "ErrorCode" => run::<p::ErrorCode>(value),
        "ErrorDetails" => run::<p::ErrorDetails>(value),
        "Event" => run::<p::Event>(value),
        "Id" => run_fn(p::check_id, value),
        "InterruptParams" => run::<p::InterruptParams>(value),
        "InterruptResult" => run::<p::InterruptResult>(value),
        "JsonRpcVersion" => run_fn(p::check_json_rpc_version, value),
        "Lease" => run::<p::Lease>(value),
        "CallerGrant" => run::<p::CallerGrant>(value),
        "Limits" => run::<p::Limits>(value),
        "NoParams" => run::<p::NoParams>(value),
        "RequestId" => run_fn(p::check_request_id, value),
        "RpcError" => run::<p::RpcError>(value),
        "RpcNotification" => run::<p::RpcNotification>(value),
        "RpcRequest" => run::<p::RpcRequest>(value),
        "RpcResponse" => run::<p::RpcResponse>(value),
        "RuntimeEvent" => run::<p::RuntimeEvent>(value),
        "RuntimeState" => run::<p::RuntimeState>(value),
        "RuntimeStatus" => run::<p::RuntimeStatus>(value),
        "RuntimeSubmitError" => run::<p::RuntimeSubmitError>(value),
        "ServerEvent" => run::<p::ServerEvent>(value),
        "ShutdownResult" => run::<p::ShutdownResult>(value),
        "SubmitParams" => run::<p::SubmitParams>(value),
        "SubmitResult" => run::<p::SubmitResult>(value),
        "Turn" => run::<p::Turn>(value),
        "EarlierTurn" => run::<p::EarlierTurn>(value),
        "TurnCounters" => run::<p::TurnCounters>(value),
        "Violation" => run::<p::Violation>(value),
        "ApprovalAnswer" => run::<p::ApprovalAnswer>(value),
        "ApprovalPrompt" => run::<p::ApprovalPrompt>(value),
        "ApprovalReply" => run::<p::ApprovalReply>(value),
        "FrontendApprovalRequest" => run::<p::FrontendApprovalRequest>(value),
        "FrontendApprovalResolved" => run::<p::FrontendApprovalResolved>(value),
        "FrontendApprovalResolvedParams" => run::<p::FrontendApprovalResolvedParams>(value),
        "FrontendEventNotification" => run::<p::FrontendEventNotification>(value),
        "ReleaseResult" => run::<p::ReleaseResult>(value),
        "SubscribeParams" => run::<p::SubscribeParams>(value),
        "SubscribeResult" => run::<p::SubscribeResult>(value),
        "ConversationsParams" => run::<p::ConversationsParams>(value),
        "ConversationsResult" => run::<p::ConversationsResult>(value),
        "ConversationParams" => run::<p::ConversationParams>(value),
        "ConversationResult" => run::<p::ConversationResult>(value),
        "ConversationSummary" => run::<p::ConversationSummary>(value),
        "TurnSummary" => run::<p::TurnSummary>(value),
        "TurnOutcome" => run::<p::TurnOutcome>(value),
        "HistoryCursor" => run_fn(p::check_history_cursor, value),
        "HistoryLimit" => run_fn(p::check_history_limit, value),
        other => panic!("no untyped checker listed for `{other}`: add it to untyped_check in {}", file!()),
    }
}

fn has(violations: &[rt::Violation], pointer: &str, keyword: &str) -> bool {
    violations.iter().any(|v| v.pointer == pointer && v.keyword == keyword)
}

fn show(violations: &[rt::Violation]) -> String {
    let list: Vec<String> = violations.iter().map(|v| format!("{:?} {}: {}", v.pointer, v.keyword, v.message)).collect();
    format!("[{}]", list.join("; "))
}

/// Checks one case against the three checkers; `Err` describes every disagreement.
fn check(case: &Case, reference: &Reference) -> Result<(), String> {
    let bytes = serde_json::to_vec(&case.document).expect("a Value serializes");
    let ours = validate_document(&case.ty, &bytes).ok_or_else(|| format!("validate_document does not know type `{}`", case.ty))?;
    let untyped = untyped_check(&case.ty, &case.document);
    let theirs = reference.is_valid(&case.ty, &case.document);

    let ours_verdict = match &ours {
        Ok(()) => "valid".to_owned(),
        Err(DocumentError::Invalid(v)) => format!("invalid {}", show(v)),
        Err(DocumentError::NotJson(e)) => format!("not JSON: {e}"),
    };
    let untyped_verdict = if untyped.is_empty() { "valid".to_owned() } else { format!("invalid {}", show(&untyped)) };
    let theirs_verdict = if theirs { "valid" } else { "invalid" };

    let mut problems = Vec::new();
    match &case.expect {
        Expect::Valid => {
            if ours.is_err() {
                problems.push("validate_document refuses a valid document");
            }
            if !untyped.is_empty() {
                problems.push("the untyped checker refuses a valid document");
            }
            if !theirs {
                problems.push("the reference (jsonschema) refuses a valid document");
            }
        }
        Expect::Invalid { pointer, keyword } => {
            match &ours {
                Err(DocumentError::Invalid(v)) if has(v, pointer, keyword) => {}
                Err(DocumentError::Invalid(_)) => problems.push("validate_document does not report the expected violation"),
                Err(DocumentError::NotJson(_)) => problems.push("validate_document calls a JSON document not JSON"),
                Ok(()) => problems.push("validate_document accepts an invalid document"),
            }
            if !has(&untyped, pointer, keyword) {
                problems.push("the untyped checker does not report the expected violation");
            }
            if theirs {
                problems.push("the reference (jsonschema) accepts an invalid document");
            }
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    let expected = match &case.expect {
        Expect::Valid => "valid".to_owned(),
        Expect::Invalid { pointer, keyword } => format!("invalid, with {keyword} at {pointer:?}"),
    };
    let mut doc = case.document.to_string();
    if doc.len() > 300 {
        doc = format!("{}… ({} bytes)", doc.chars().take(300).collect::<String>(), doc.len());
    }
    Err(format!(
        "{} [{}] {:?}\n    problems:          {}\n    expected:          {expected}\n    validate_document: {ours_verdict}\n    untyped checker:   {untyped_verdict}\n    jsonschema:        {theirs_verdict}\n    document:          {doc}",
        case.ty,
        case.file.file_name().and_then(|s| s.to_str()).unwrap_or("?"),
        case.description,
        problems.join("; "),
    ))
}

fn run_all(cases: &[Case]) {
    let reference = Reference::new();
    let failures: Vec<String> = cases.iter().filter_map(|c| check(c, &reference).err()).collect();
    assert!(failures.is_empty(), "{} of {} vector case(s) failed:\n\n{}", failures.len(), cases.len(), failures.join("\n\n"));
}

#[test]
fn golden_vectors() {
    let cases = load_cases(&vectors_dir(), false);
    assert!(cases.len() > 100, "expected the golden vectors, found only {} case(s)", cases.len());
    run_all(&cases);
}

#[test]
fn large_vectors() {
    let cases = load_cases(&vectors_dir().join("large"), true);
    // The traps this file exists for must stay in it.
    let turn_task = |len: usize, valid: bool| {
        cases.iter().any(|c| {
            c.ty == "Turn"
                && c.document["task"].as_str().is_some_and(|s| s.chars().count() == len && s.len() > len)
                && match (&c.expect, valid) {
                    (Expect::Valid, true) => true,
                    (Expect::Invalid { pointer, keyword }, false) => pointer == "/task" && keyword == "maxLength",
                    _ => false,
                }
        })
    };
    assert!(turn_task(98304, true), "tests/vectors/large/Turn.json lost its valid multi-byte task of exactly 98304 code points");
    assert!(turn_task(98305, false), "tests/vectors/large/Turn.json lost its invalid multi-byte task of 98305 code points");
    run_all(&cases);
}

/// The bound on `task` is on code points, not bytes or UTF-16 units, checked here without any
/// vector file, so that a broken file cannot hide it.
#[test]
fn task_bound_counts_code_points() {
    let turn = |task: &str| {
        serde_json::json!({
            "schema": openagents_protocol::VERSION, "assignment": "a1", "conversation": "c1",
            "agent": {"runner": "echo"}, "task": task, "cwd": "/tmp"
        })
    };
    let reference = Reference::new();
    // 1 + 2 + 3 + 4 bytes: 98304 code points in 245760 bytes.
    let at_bound = "aé€😀".repeat(98304 / 4);
    assert_eq!(at_bound.chars().count(), 98304);
    let over = format!("{at_bound}é");
    for (task, valid) in [(at_bound, true), (over, false)] {
        let doc = turn(&task);
        let bytes = serde_json::to_vec(&doc).expect("serializes");
        let ours = validate_document("Turn", &bytes).expect("Turn is a type");
        match (&ours, valid) {
            (Ok(()), true) => {}
            (Err(DocumentError::Invalid(v)), false) => assert!(has(v, "/task", "maxLength"), "expected maxLength at /task, got {}", show(v)),
            _ => panic!("task of {} code points: expected {}, got {ours:?}", task.chars().count(), if valid { "valid" } else { "invalid" }),
        }
        assert_eq!(reference.is_valid("Turn", &doc), valid, "jsonschema on a task of {} code points", task.chars().count());
    }
}

/// Nesting far past any sane depth is refused as not JSON, without overflowing the stack, for
/// every type and for arrays, objects and a deep value inside an otherwise valid document.
#[test]
fn deep_nesting_is_not_json() {
    const DEPTH: usize = 100_000;
    let arrays = format!("{}{}", "[".repeat(DEPTH), "]".repeat(DEPTH));
    let objects = format!("{}1{}", r#"{"a":"#.repeat(DEPTH), "}".repeat(DEPTH));
    let inside = format!(
        r#"{{"schema":"openagents.agent.runner.v1","assignment":"a1","conversation":"c1","agent":{{"runner":"echo"}},"task":{},"cwd":"/tmp"}}"#,
        arrays
    );
    let unclosed = "[".repeat(DEPTH);
    // Each type's first valid object vector, with a deep value under a property it does not
    // declare: types open to new fields skip such values unread, and must still refuse them.
    let golden = load_cases(&vectors_dir(), false);
    let with_unknown = |ty: &str| {
        let base = golden.iter().find(|c| c.ty == ty && matches!(c.expect, Expect::Valid) && c.document.is_object())?;
        let text = base.document.to_string();
        Some(format!(r#"{{"zz_unknown":{arrays},{}"#, &text[1..]))
    };
    let mut failures = Vec::new();
    let mut unknown_checked = 0;
    for t in TYPES {
        let unknown = with_unknown(t.name);
        unknown_checked += usize::from(unknown.is_some());
        let mut inputs = vec![("arrays", &arrays), ("objects", &objects), ("a deep task", &inside), ("unclosed arrays", &unclosed)];
        if let Some(u) = &unknown {
            inputs.push(("an unknown property of a valid document", u));
        }
        for (what, input) in inputs {
            match validate_document(t.name, input.as_bytes()) {
                Some(Err(DocumentError::NotJson(_))) => {}
                other => failures.push(format!("{}: {DEPTH} levels of {what}: expected NotJson, got {other:?}", t.name)),
            }
        }
    }
    assert!(unknown_checked >= 20, "only {unknown_checked} type(s) had a valid object vector to nest into");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A vector file for every type is checked by `golden_vectors`; this makes sure the loader sees
/// each root type, so that a misplaced file cannot make the run vacuous.
#[test]
fn every_root_type_is_exercised() {
    let cases = load_cases(&vectors_dir(), false);
    for t in TYPES.iter().filter(|t| t.root) {
        let valid = cases.iter().filter(|c| c.ty == t.name && matches!(c.expect, Expect::Valid)).count();
        let invalid = cases.iter().filter(|c| c.ty == t.name && matches!(c.expect, Expect::Invalid { .. })).count();
        assert!(valid > 0 && invalid > 0, "{}: {valid} valid and {invalid} invalid case(s) in tests/vectors/{}.json", t.name, t.name);
    }
}
