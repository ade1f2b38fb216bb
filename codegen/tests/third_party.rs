//! The schemas real protocols publish (ACP v1, MCP 2026-07-28 and 2025-11-25), vendored unchanged
//! under `tests/third-party-schemas/`: each file is still the one its README row names (its
//! SHA-256); each lowers whole, its types by shape as `CONFORMANCE.md`'s "Published schemas"
//! records, the unions that matter most as real enums; each generates Rust, Python and
//! TypeScript. `check` still reports every refusal at once (on a schema made to have many).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use openagents_codegen::error::MAX_SHOWN_REFUSALS;
use openagents_codegen::Config;
use openagents_codegen::model::{NamedType, TypeKind, TypeSpace};
use sha2::{Digest, Sha256};

/// Each vendored file with the SHA-256 of its bytes as published (the README's table).
const VENDORED: &[(&str, &str)] = &[
    ("acp-v1.schema.json", "0d0b1ca83c4872e5473f68926a894c7a8203b59b118e2a79bfe43dd76fbcbc1a"),
    ("mcp-2026-07-28.schema.json", "ef70b61f99b6d2e5e3b46863822eab08dff6a45bedc7a08914e0e5b133f40203"),
    ("mcp-2025-11-25.schema.json", "268a5f82ba70fd7e4b6dc4aa1e64f116f74b4d0edcb69dc046829c79dd4e97e7"),
];

/// The folder of the vendored copies, inside the repository.
fn vendored_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/third-party-schemas")
}

fn read(file: &str) -> Vec<u8> {
    let path = vendored_dir().join(file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: cannot read the vendored schema: {e}", path.display()))
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn each_vendored_schema_is_the_published_file() {
    let mut changed = Vec::new();
    for (file, expected) in VENDORED {
        let got = sha256_hex(&read(file));
        if got != *expected {
            changed.push(format!("tests/third-party-schemas/{file}: SHA-256 {got}, but the published file's is {expected}"));
        }
    }
    assert!(changed.is_empty(), "a vendored schema is not the published file byte for byte (copy it again unchanged, or record a new upstream version in its README):\n{}", changed.join("\n"));
}

#[test]
fn the_readme_records_each_file_and_its_hash() {
    let readme = String::from_utf8(read("README.md")).expect("README.md is UTF-8");
    for (file, hash) in VENDORED {
        let row = readme.lines().find(|l| l.starts_with(&format!("| `{file}` |")));
        let row = row.unwrap_or_else(|| panic!("tests/third-party-schemas/README.md has no row for `{file}`"));
        assert!(row.contains(&format!("`{hash}`")), "tests/third-party-schemas/README.md: the row of `{file}` does not give its SHA-256 {hash}");
    }
}

/// The type space of one vendored file, as `check` (its library entry, [`Config::load`]) lowers it.
fn lowered(file: &str) -> TypeSpace {
    match Config::new().schema_dir(vendored_dir().join(file)).load() {
        Ok((_, space)) => space,
        Err(r) => panic!("{file}: refused ({} refusals), first: {}", r.len(), r.first()),
    }
}

/// What a type is in typed code, as `CONFORMANCE.md`'s "Published schemas" table counts it.
fn shape(t: &NamedType) -> &'static str {
    match &t.kind {
        TypeKind::Struct(_) => "struct",
        TypeKind::Union(_) => "tagged union",
        TypeKind::StringEnum(_) => "string enum",
        TypeKind::Alias(n) if !n.applied.is_empty() => "checked value",
        TypeKind::Alias(_) => "alias",
    }
}

/// `CONFORMANCE.md`'s "Published schemas" table: for each file (a column), row label to count.
fn recorded_counts() -> BTreeMap<String, BTreeMap<String, usize>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../CONFORMANCE.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let section = text.split("\n## Published schemas\n").nth(1).expect("CONFORMANCE.md has a `## Published schemas` section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let cells = |line: &str| -> Vec<String> { line.trim().trim_matches('|').split('|').map(|c| c.trim().trim_matches('`').to_owned()).collect() };
    let mut rows = section.lines().filter(|l| l.trim_start().starts_with('|'));
    let header = cells(rows.next().expect("the section has a table"));
    let mut out: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for row in rows.skip(1) {
        let row = cells(row);
        for (file, n) in header.iter().zip(&row).skip(1) {
            let n: usize = n.trim_matches('*').parse().unwrap_or_else(|_| panic!("CONFORMANCE.md: `{n}` ({}, {file}) is not a count", row[0]));
            out.entry(file.clone()).or_default().insert(row[0].trim_matches('*').to_owned(), n);
        }
    }
    out
}

#[test]
fn each_published_schema_lowers_whole_and_the_table_records_its_shapes() {
    let recorded = recorded_counts();
    for (file, _) in VENDORED {
        let space = lowered(file);
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for t in space.types.values() {
            *counts.entry(shape(t).to_owned()).or_default() += 1;
        }
        counts.insert("total".to_owned(), space.types.len());
        let expected = recorded.get(*file).cloned().unwrap_or_default();
        assert_eq!(counts, expected, "{file}: the types by shape (left) are not what CONFORMANCE.md's \"Published schemas\" records (right)");
    }
}

#[test]
fn the_unions_editors_meet_most_are_real_enums() {
    // The types an ACP client or agent reads on every turn, and MCP's content blocks: a tag tells
    // their branches apart, so typed code holds them as enums, not as checked values.
    let expect = [
        ("acp-v1.schema.json", &["SessionUpdate", "ContentBlock", "ToolCallContent", "RequestPermissionOutcome"][..], &["StopReason", "ToolKind", "ToolCallStatus", "PlanEntryStatus", "Role"][..]),
        ("mcp-2026-07-28.schema.json", &["ContentBlock"][..], &["Role", "LoggingLevel"][..]),
        ("mcp-2025-11-25.schema.json", &["ContentBlock"][..], &["Role", "LoggingLevel"][..]),
    ];
    for (file, unions, enums) in expect {
        let space = lowered(file);
        for name in unions {
            let t = space.types.get(*name).unwrap_or_else(|| panic!("{file}: no type `{name}`"));
            assert_eq!(shape(t), "tagged union", "{file}: `{name}`");
        }
        for name in enums {
            let t = space.types.get(*name).unwrap_or_else(|| panic!("{file}: no type `{name}`"));
            assert_eq!(shape(t), "string enum", "{file}: `{name}`");
        }
    }
}

#[test]
fn each_published_schema_generates_rust_python_and_typescript() {
    for (file, _) in VENDORED {
        let config = Config::new().schema_dir(vendored_dir().join(file));
        let rust = config.generate_rust().unwrap_or_else(|e| panic!("{file}: Rust: {e}"));
        assert!(rust.contains("pub fn validate_document"), "{file}: the Rust has its validation entry point");
        let python = config.generate_python().unwrap_or_else(|e| panic!("{file}: Python: {e}"));
        assert!(python.iter().any(|(name, _)| name == "models.py"), "{file}: Python models");
        let ts = config.generate_typescript().unwrap_or_else(|e| panic!("{file}: TypeScript: {e}"));
        assert!(ts.iter().any(|(name, text)| name == "validators.ts" && text.contains("export function validate(")), "{file}: TypeScript validators");
    }
}

#[test]
fn objects_as_maps_changes_the_free_form_objects_alone() {
    let config = Config::new().schema_dir(vendored_dir().join("mcp-2026-07-28.schema.json"));
    let maps = config.clone().objects_as_text(false).generate_rust().expect("MCP generates with objects as maps");
    let text = config.generate_rust().expect("MCP generates (objects as text, the default)");
    let arguments = |rust: &str| {
        let at = rust.find("pub struct CallToolRequestParams").expect("the params struct");
        let field = rust[at..].find("pub arguments:").map(|i| at + i).expect("its arguments");
        rust[field..field + rust[field..].find('\n').expect("a line")].to_owned()
    };
    assert_eq!(arguments(&maps), "pub arguments: Option<serde_json::Map<String, serde_json::Value>>,");
    assert_eq!(arguments(&text), "pub arguments: Option<::openagents_rt::RawObject>,");
    // Nothing else changed: with every map of values written as text in both, the two outputs
    // are the same tokens; and the maps left in the text output are a tagged union's unknown
    // variant, which holds the whole object it did not know.
    const MAP: &str = "serde_json::Map<String,serde_json::Value>";
    const RAW: &str = "::openagents_rt::RawObject";
    // Without whitespace, and without the trailing commas the printer adds where a line breaks.
    let squeezed = |rust: &str| {
        let s: String = rust.split_whitespace().collect();
        [",)", ",}", ",]", ",>"].iter().fold(s, |s, t| s.replace(t, &t[1..]))
    };
    let (maps, text) = (squeezed(&maps), squeezed(&text));
    let (a, b) = (maps.replace(MAP, RAW), text.replace(MAP, RAW));
    if let Some(at) = a.bytes().zip(b.bytes()).position(|(x, y)| x != y) {
        let from = at.saturating_sub(200);
        panic!("the outputs differ beyond the objects:\n{}\n--\n{}", &a[from..(at + 200).min(a.len())], &b[from..(at + 200).min(b.len())]);
    }
    assert_eq!(a.len(), b.len());
    let raws = text.matches(RAW).count();
    assert!(raws > 0);
    assert_eq!(text.matches(MAP).count() + raws, maps.matches(MAP).count() + maps.matches(RAW).count());
    assert_eq!(text.matches(MAP).count(), text.matches(&format!("Unknown({MAP})")).count() + text.matches(&format!("from_object(mutmap:{MAP})")).count());
    // With schemars derives too: the runtime's `schemars` feature gives `RawObject` its schema.
    let derived = config.schemars(true).generate_rust().expect("MCP generates with schemars derives");
    assert!(squeezed(&derived).contains("pubarguments:Option<::openagents_rt::RawObject>"));
}

#[test]
fn the_check_command_prints_the_first_refusals_in_full_then_how_many_more() {
    // A schema with more refusals than are shown: 60 types each using a keyword outside the subset.
    let dir = std::env::temp_dir().join(format!("openagents-refusals-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let defs: Vec<String> = (0..60).map(|i| format!("\"T{i}\": {{\"type\": \"array\", \"unevaluatedItems\": false}}")).collect();
    let file = dir.join("many.json");
    std::fs::write(&file, format!("{{\"$defs\": {{{}}}}}", defs.join(", "))).expect("write");
    let total = match Config::new().schema_dir(&file).load() {
        Ok(_) => panic!("accepted"),
        Err(r) => r.len(),
    };
    assert_eq!(total, 60);
    let out = Command::new(env!("CARGO_BIN_EXE_openagents-codegen")).args(["check", "--schema"]).arg(&file).output().expect("openagents-codegen runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1), "check must fail on a refused schema");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.first().copied(), Some(format!("openagents-codegen: {total} refusals:").as_str()), "{stderr}");
    let shown = lines.iter().filter(|l| l.starts_with("many.json#")).count();
    assert_eq!(shown, MAX_SHOWN_REFUSALS, "{stderr}");
    assert_eq!(lines.last().copied(), Some(format!("and {} more", total - MAX_SHOWN_REFUSALS).as_str()), "{stderr}");
    assert_eq!(lines.len(), MAX_SHOWN_REFUSALS + 2, "{stderr}");
}

#[test]
fn another_tools_keyword_is_refused_until_declared_an_annotation_and_never_a_rule() {
    // A vendor's own keywords beside real rules, at the root, in `$defs`, inside `items` and
    // under `allOf`; a `const` value that holds a member of the same name is data, kept.
    let dir = std::env::temp_dir().join(format!("openagents-annotations-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("vendor.json");
    let schema = r##"{
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "abcIsAcyclic": true,
        "properties": {
            "color": {"$ref": "#/definitions/Color"},
            "days": {"type": "array", "items": {"type": "string", "abcIsFirstDayOfMonth": true}},
            "mark": {"const": {"abcIsValidColor": 1}}
        },
        "definitions": {"Color": {"allOf": [{"type": "string", "maxLength": 7, "abcIsValidColor": true}]}}
    }"##;
    std::fs::write(&file, schema).expect("write");
    let run = |extra: &[&str]| Command::new(env!("CARGO_BIN_EXE_openagents-codegen")).args(["check", "--schema"]).arg(&file).args(extra).output().expect("runs");
    let refused = run(&[]);
    let stderr = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("openagents-codegen: 3 refusals:"), "{stderr}");
    for (pointer, keyword) in [("#", "abcIsAcyclic"), ("#/definitions/Color/allOf/0", "abcIsValidColor"), ("#/properties/days/items", "abcIsFirstDayOfMonth")] {
        let line = stderr.lines().find(|l| l.starts_with(&format!("vendor.json{pointer}: keyword `{keyword}`"))).unwrap_or_else(|| panic!("no refusal of {keyword}: {stderr}"));
        assert!(line.ends_with(&format!("declare it with `--annotation {keyword}`")), "{line}");
    }
    // Declared (repeated, or separated by commas), they are ignored; one left out is still refused.
    let accepted = run(&["--annotation", "abcIsAcyclic,abcIsValidColor", "--annotation", "abcIsFirstDayOfMonth"]);
    assert_eq!(accepted.status.code(), Some(0), "{}", String::from_utf8_lossy(&accepted.stderr));
    let partly = run(&["--annotation", "abcIsAcyclic,abcIsValidColor"]);
    assert!(String::from_utf8_lossy(&partly.stderr).starts_with("openagents-codegen: vendor.json#/properties/days/items: keyword `abcIsFirstDayOfMonth`"));
    // A keyword of JSON Schema's, supported or not, or of the generator's, is never dropped.
    for rule in ["maxLength", "unevaluatedItems", "x-extensible"] {
        let out = run(&["--annotation", rule]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{rule}: {stderr}");
        assert!(stderr.contains(&format!("`--annotation {rule}`: `{rule}` is a keyword of JSON Schema or of the generator")), "{stderr}");
    }
    // A keyword of JSON Schema the generator does not read is not offered as an annotation.
    std::fs::write(&file, r#"{"type": "array", "unevaluatedItems": false}"#).expect("write");
    let stderr = String::from_utf8_lossy(&run(&[]).stderr).into_owned();
    assert!(stderr.contains("`unevaluatedItems` is outside the supported subset") && !stderr.contains("--annotation"), "{stderr}");
    // The same through the build-step API; the rules beside the annotations still hold, and the
    // `const` value keeps its member.
    std::fs::write(&file, schema).expect("write");
    let config = Config::new().schema_dir(&file).annotations(["abcIsAcyclic", "abcIsValidColor", "abcIsFirstDayOfMonth"]);
    let (docs, _) = config.load().expect("accepted with the annotations declared");
    let rust = config.generate_rust().expect("generates");
    let _ = std::fs::remove_dir_all(&dir);
    let doc = &docs.files["vendor.json"];
    assert!(doc.get("abcIsAcyclic").is_none());
    assert_eq!(doc.pointer("/definitions/Color/allOf/0"), Some(&serde_json::json!({"type": "string", "maxLength": 7})));
    assert_eq!(doc.pointer("/properties/mark/const"), Some(&serde_json::json!({"abcIsValidColor": 1})));
    let bound = rust.lines().filter(|l| l.contains("maxLength")).collect::<Vec<_>>();
    assert!(bound.iter().any(|l| l.contains('7')), "the maxLength bound is still checked: {bound:?}");
    // A declared keyword that holds schemas a `$ref` names (a vendor's `full`) keeps them, under
    // an `x-` name the generator ignores, and the reference (and those inside) follow.
    let dir = std::env::temp_dir().join(format!("openagents-annotations-held-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("held.json");
    std::fs::write(&file, r##"{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
        "properties": {"x": {"$ref": "#/definitions/a/full"}},
        "definitions": {"a": {"type": "object", "full": {"type": "array", "items": [{"$ref": "#/definitions/a/full/definitions/n"}],
            "definitions": {"n": {"type": "integer", "maximum": 9}}}}}}"##).expect("write");
    let refused = Config::new().schema_dir(&file).load().map(|_| ()).expect_err("refused without the declaration");
    assert_eq!(refused.into_first().keyword, "full");
    let (docs, space) = Config::new().schema_dir(&file).annotations(["full"]).load().expect("accepted with it");
    let _ = std::fs::remove_dir_all(&dir);
    let doc = &docs.files["held.json"];
    assert_eq!(doc.pointer("/properties/x/$ref"), Some(&serde_json::json!("#/definitions/a/x-annotation-full")));
    // The held schema is upgraded from draft-07 as the rest (its tuple is `prefixItems`).
    assert_eq!(doc.pointer("/definitions/a/x-annotation-full/prefixItems/0/$ref"), Some(&serde_json::json!("#/definitions/a/x-annotation-full/definitions/n")));
    assert!(space.types.len() >= 2, "{:?}", space.types.keys().collect::<Vec<_>>());
}

#[test]
fn acp_methods_are_grouped_by_the_side_that_handles_them() {
    let space = lowered("acp-v1.schema.json");
    let side = |name: &str| space.sides.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no side `{name}`"));
    let methods = |ms: &[openagents_codegen::model::MarkedMethod]| ms.iter().map(|m| m.method.clone()).collect::<Vec<_>>();
    let agent = side("agent");
    assert!(methods(&agent.requests).contains(&"session/prompt".to_owned()), "{:?}", methods(&agent.requests));
    assert_eq!(methods(&agent.notifications), ["session/cancel"]);
    let prompt = agent.requests.iter().find(|m| m.method == "session/prompt").expect("session/prompt");
    assert_eq!((prompt.params.as_str(), prompt.result.as_deref(), prompt.variant.as_str()), ("PromptRequest", Some("PromptResponse"), "SessionPrompt"));
    let client = side("client");
    assert!(methods(&client.requests).contains(&"session/request_permission".to_owned()));
    assert!(methods(&client.notifications).contains(&"session/update".to_owned()));
    assert_eq!(methods(&side("protocol").notifications), ["$/cancel_request"]);
    // Every request has its result; a method is in one list of its side only.
    for s in &space.sides {
        assert!(s.requests.iter().all(|m| m.result.is_some()) && s.notifications.iter().all(|m| m.result.is_none()));
    }
    // MCP marks no methods so; its request and notification unions are tagged on `method`.
    // (2026-07-28 has no server-to-client requests, and one client notification, `cancelled`.)
    for (file, unions) in [
        ("mcp-2026-07-28.schema.json", &["ClientRequest", "ServerNotification"][..]),
        ("mcp-2025-11-25.schema.json", &["ClientRequest", "ServerRequest", "ClientNotification", "ServerNotification"][..]),
    ] {
        let space = lowered(file);
        assert!(space.sides.is_empty(), "{file}");
        for name in unions {
            let t = space.types.get(*name).unwrap_or_else(|| panic!("{file}: no `{name}`"));
            let TypeKind::Union(u) = &t.kind else { panic!("{file}: `{name}` is a {}", shape(t)) };
            assert_eq!(u.tag, "method", "{file}: `{name}`");
        }
    }
}

#[test]
fn code_generated_for_a_published_schema_speaks_of_nothing_of_ours() {
    // Our project's words (commands, make targets, headers, folders, methods, error bases) have
    // no place in code generated for someone else's schema; the runtime import (an option, whose
    // default is our installed package's) is the one reference allowed.
    const OURS: &[&str] = &["make codegen", "openagents schema", "openagents-schema-digest", "openagents.validate", "`schema/`", "OpenAgentsError", "`submit`", "`interrupt`"];
    let config = Config::new().schema_dir(vendored_dir().join("acp-v1.schema.json"));
    let mut files: Vec<(String, String)> = Vec::new();
    files.extend(config.generate_python().expect("Python").into_iter().map(|(n, t)| (format!("python/{n}"), t)));
    files.extend(config.generate_typescript().expect("TypeScript").into_iter().map(|(n, t)| (format!("typescript/{n}"), t)));
    let rust = config.generate_rust().expect("Rust");
    // The bundle string carries the bundle's own `$comment` (part of the digest): not prose of ours.
    let rust: String = rust.lines().filter(|l| !l.contains("pub const SCHEMA_BUNDLE")).collect::<Vec<_>>().join("\n");
    files.push(("rust".to_owned(), rust));
    let mut found = Vec::new();
    for (name, text) in &files {
        for word in OURS {
            if let Some(at) = text.find(word) {
                let line = text[..at].lines().count();
                found.push(format!("{name}:{line}: `{word}`"));
            }
        }
    }
    assert!(found.is_empty(), "our words in code generated from ACP's schema:\n{}", found.join("\n"));
}
