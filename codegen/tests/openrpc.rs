//! What the generator publishes for the real schema — the bundle, its digest, and the OpenRPC
//! document — snapshot-tested, so every schema change shows up as a diff here, and the OpenRPC
//! document validated against the OpenRPC 1.3 meta-schema (vendored under `tests/openrpc/`).
//!
//! Regenerate the snapshots with
//! `INSTA_UPDATE=always cargo test -p openagents-codegen --test openrpc` and review the diff.

use std::collections::BTreeSet;
use std::path::Path;

use openagents_codegen::model::TypeKind;
use openagents_codegen::{Config, digest};
use serde_json::{Map, Value};

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn config() -> Config {
    Config::new().schema_dir(manifest().join("../schema")).runtime("crate::rt")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_bundle_is_snapshotted() {
    let (docs, _) = config().load().expect("the real schema loads");
    let bundle = serde_json::to_string_pretty(&docs.bundle()).expect("the bundle serializes");
    insta::assert_snapshot!("schema_bundle", bundle);
}

/// Every place in `v` a schema author could edit (each string, number and boolean), as JSON
/// pointers, skipping the file-level `$schema` and `$id` that bundling drops by design.
fn leaves(v: &Value, pointer: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                if pointer.is_empty() && (k == "$schema" || k == "$id") {
                    continue;
                }
                leaves(child, &format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        Value::Array(a) => a.iter().enumerate().for_each(|(i, child)| leaves(child, &format!("{pointer}/{i}"), out)),
        Value::Null => {}
        _ => out.push(pointer.to_owned()),
    }
}

/// Changing any value in any schema file changes the bundle — so the `schema_bundle` snapshot
/// shows it as a diff — and the digest.
#[test]
fn changing_any_schema_file_changes_the_snapshotted_bundle_and_the_digest() {
    let (docs, _) = config().load().expect("the real schema loads");
    let bundle = docs.bundle();
    let d = digest::digest(&bundle);
    let mut tried = 0;
    for (file, doc) in &docs.files {
        let mut pointers = Vec::new();
        leaves(doc, "", &mut pointers);
        assert!(!pointers.is_empty(), "{file} has values");
        for pointer in pointers {
            let mut changed = docs.clone();
            let leaf = changed.files.get_mut(file).and_then(|d| d.pointer_mut(&pointer)).expect("the pointer was just found");
            *leaf = match leaf.take() {
                Value::String(s) => Value::String(format!("{s}~")),
                Value::Bool(b) => Value::Bool(!b),
                Value::Number(n) => serde_json::json!(n.as_f64().unwrap_or(0.0) + 1.0),
                other => unreachable!("not a leaf: {other}"),
            };
            let after = changed.bundle();
            assert_ne!(after, bundle, "changing {file}#{pointer} leaves the bundle (and its snapshot) as it was");
            assert_ne!(digest::digest(&after), d, "changing {file}#{pointer} leaves the digest as it was");
            tried += 1;
        }
    }
    assert!(tried > 100, "only {tried} values tried");
}

/// The same JSON value with every object's keys in reverse order.
fn reversed(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().rev().map(|(k, v)| (k.clone(), reversed(v))).collect::<Map<String, Value>>()),
        Value::Array(a) => Value::Array(a.iter().map(reversed).collect()),
        other => other.clone(),
    }
}

#[test]
fn the_digest_is_the_sha256_of_the_canonical_bundle() {
    let (docs, space) = config().load().expect("the real schema loads");
    let bundle = docs.bundle();
    let canonical = digest::canonical(&bundle);
    let d = config().digest().expect("digest");
    assert_eq!(d, digest::sha256_hex(canonical.as_bytes()));
    assert_eq!(d.len(), 64);
    assert!(d.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "lowercase hex: {d}");
    // The canonical form is the bundle, without insignificant whitespace, independent of key order.
    assert_eq!(serde_json::from_str::<Value>(&canonical).expect("canonical JSON parses"), bundle);
    assert_eq!(digest::canonical(&reversed(&bundle)), canonical, "key order must not matter");
    assert!(!canonical.contains("\n"), "no newlines outside strings");
    assert_eq!(digest::digest(&reversed(&bundle)), d);
    // Built in: the generated code embeds the same digest, and the OpenRPC document carries it.
    let rust = config().rust_for(&docs, &space).expect("generates");
    assert!(rust.contains(&format!("pub const SCHEMA_DIGEST: &str = \"{d}\";")), "the generated Rust embeds SCHEMA_DIGEST = {d}");
    let doc = config().generate_openrpc().expect("openrpc");
    assert_eq!(doc["info"]["x-schema-digest"], d.as_str());
    let python = config().generate_python().expect("python");
    let constants = &python.iter().find(|(n, _)| n == "constants.py").expect("constants.py").1;
    assert!(constants.contains(&format!("SCHEMA_DIGEST: Final = \"{d}\"")), "the Python client embeds SCHEMA_DIGEST = {d}");
    let ts = config().generate_typescript().expect("typescript");
    let types = &ts.iter().find(|(n, _)| n == "types.ts").expect("types.ts").1;
    assert!(types.contains(&format!("export const SCHEMA_DIGEST = \"{d}\";")), "the TypeScript client embeds SCHEMA_DIGEST = {d}");
}

/// A client generated from an older bundle (a frozen `schema/history/<version>` folder, or a
/// bundle file) embeds that bundle's digest, not the current one.
#[test]
fn clients_generated_from_a_bundle_embed_its_digest() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = std::env::temp_dir().join(format!("oa-older-bundle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    // An "older" schema: the current bundle with one description changed.
    let (docs, _) = config().load().expect("loads");
    let mut older = docs.bundle();
    older["$defs"]["RuntimeStatus"]["description"] = Value::String("An older description of the status.".into());
    let file = dir.join("bundle.json");
    std::fs::write(&file, serde_json::to_string_pretty(&older).expect("serializes")).expect("writes");
    let old = openagents_codegen::Config::new().schema_dir(&file);
    let old_digest = old.digest().expect("a bundle file loads");
    assert_eq!(old_digest, digest::digest(&older), "the digest of a loaded bundle is the bundle's own");
    assert_ne!(old_digest, config().digest().expect("digest"));
    let python = old.generate_python().expect("python from a bundle");
    assert!(python.iter().any(|(n, t)| n == "constants.py" && t.contains(&old_digest)));
    let ts = old.generate_typescript().expect("typescript from a bundle");
    assert!(ts.iter().any(|(n, t)| n == "types.ts" && t.contains(&old_digest)));
    // Every frozen version round-trips to the digest its bundle file has.
    for version in std::fs::read_dir(root.join("schema/history")).expect("history").flatten() {
        let text = std::fs::read_to_string(version.path().join("bundle.json")).expect("a frozen bundle");
        let frozen: Value = serde_json::from_str(&text).expect("JSON");
        let loaded = openagents_codegen::Config::new().schema_dir(version.path()).digest().expect("a history folder loads");
        assert_eq!(loaded, digest::digest(&frozen), "{}", version.path().display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_openrpc_document_is_snapshotted() {
    let doc = config().generate_openrpc().expect("the real schema's OpenRPC document");
    insta::assert_snapshot!("openrpc", serde_json::to_string_pretty(&doc).expect("serializes"));
}

#[test]
fn the_openrpc_document_is_valid_openrpc_1_3() {
    let dir = manifest().join("tests/openrpc");
    let draft7 = Value::String("http://json-schema.org/draft-07/schema#".into());
    // Both meta-schemas are written in the `https://meta.json-schema.tools/` dialect, which is
    // draft-07; read them as draft-07 and resolve the tools meta-schema locally.
    let mut tools = read_json(&dir.join("json-schema-tools-meta-schema.json"));
    tools["$schema"] = draft7.clone();
    let mut meta = read_json(&dir.join("openrpc-1.3.schema.json"));
    meta["$schema"] = draft7;
    let registry = jsonschema::Registry::new()
        .add("https://meta.json-schema.tools/", tools.clone())
        .and_then(|r| r.add("https://meta.json-schema.tools", tools))
        .expect("valid URIs")
        .prepare()
        .expect("the tools meta-schema registers");
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft7)
        .with_registry(&registry)
        .build(&meta)
        .unwrap_or_else(|e| panic!("the OpenRPC meta-schema compiles: {e}"));
    let doc = config().generate_openrpc().expect("the real schema's OpenRPC document");
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| format!("{}: {e}", e.instance_path())).collect();
    assert!(errors.is_empty(), "the OpenRPC document breaks the OpenRPC 1.3 meta-schema:\n{}", errors.join("\n"));
    // The validator is not vacuous: a document without `info` is refused.
    let mut broken = doc.clone();
    broken.as_object_mut().expect("an object").remove("info");
    assert!(!validator.is_valid(&broken), "a document without info must be refused");
    let mut broken = doc.clone();
    broken["methods"][0]["params"][0]["name"] = Value::String(String::new());
    assert!(!validator.is_valid(&broken), "an empty param name must be refused");
    // ...and the schemas inside are checked against the JSON Schema meta-schema too.
    let mut broken = doc;
    broken["components"]["schemas"]["Id"]["type"] = Value::from(5);
    assert!(!validator.is_valid(&broken), "a component schema with `type: 5` must be refused");
}

#[test]
fn every_method_error_and_event_kind_is_in_the_openrpc_document() {
    let (_, space) = config().load().expect("the real schema loads");
    let doc = config().generate_openrpc().expect("openrpc");
    let ms = space.methods.as_ref().expect("the schema has a method union");
    let Some(TypeKind::Union(u)) = space.types.get(&ms.union).map(|t| &t.kind) else { panic!("the method union is a union") };
    let names: Vec<&str> = doc["methods"].as_array().expect("methods").iter().map(|m| m["name"].as_str().expect("name")).collect();
    let want: Vec<&str> = u.variants.iter().map(|v| v.tag_value.as_str()).collect();
    assert_eq!(names, want);
    assert!(names.contains(&"rpc.discover"), "rpc.discover describes itself");
    assert_eq!(doc["info"]["version"], space.constants["PROTOCOL_VERSION"].value);
    for m in doc["methods"].as_array().expect("methods") {
        assert!(m["result"]["schema"].is_object(), "{}: a result schema", m["name"]);
    }
    let submit = &doc["methods"][0];
    assert_eq!(submit["params"][0]["name"], "task");
    assert_eq!(submit["params"][0]["required"], true);
    // Errors: every ErrorCode value with its rpc_code, referenced from each method.
    let errors = doc["components"]["errors"].as_object().expect("components.errors");
    let set = space.errors.as_ref().expect("the schema has an error set");
    assert_eq!(set.enum_name, "ErrorCode");
    for c in &set.codes {
        assert_eq!(errors[&c.value]["code"], c.rpc_code, "{}", c.value);
        assert_eq!(errors[&c.value]["data"]["code"], c.value.as_str());
        assert_eq!(errors[&c.value]["data"]["retryable"], c.retryable, "{}", c.value);
    }
    assert_eq!(errors.len(), set.codes.len());
    assert_eq!(submit["errors"].as_array().expect("errors").len(), set.codes.len());
    // Events: every RuntimeEvent kind under x-events.
    let kinds: BTreeSet<&str> = doc["x-events"]["kinds"].as_array().expect("x-events.kinds").iter().map(|k| k["name"].as_str().expect("name")).collect();
    let Some(TypeKind::Union(events)) = space.types.get("RuntimeEvent").map(|t| &t.kind) else { panic!("RuntimeEvent is a union") };
    let want: BTreeSet<&str> = events.variants.iter().map(|v| v.tag_value.as_str()).collect();
    assert_eq!(kinds, want);
    assert_eq!(doc["x-events"]["schema"]["$ref"], "#/components/schemas/ServerEvent");
    // Every `$ref` in the document points at something in it.
    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    for r in refs {
        let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("`{r}` is a local reference"));
        assert!(doc.pointer(pointer).is_some(), "`{r}` points at nothing");
    }
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("$ref", Value::String(s)) => out.push(s.clone()),
                    _ => collect_refs(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

/// The component schemas are printed back from the model; they must accept exactly what the
/// source schemas accept. Checked on the shared vectors with the `jsonschema` crate on both.
#[test]
fn component_schemas_accept_what_the_source_schemas_accept() {
    let (docs, space) = config().load().expect("the real schema loads");
    let bundle = docs.bundle();
    let doc = config().generate_openrpc().expect("openrpc");
    let vectors = manifest().join("../tests/vectors");
    let Ok(entries) = std::fs::read_dir(&vectors) else { panic!("{} holds the shared vectors", vectors.display()) };
    let mut checked = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(type_name) = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else { continue };
        if path.extension().is_none_or(|e| e != "json") || doc["components"]["schemas"].get(&type_name).is_none() {
            continue;
        }
        let file = read_json(&path);
        let mut instances = Vec::new();
        for key in ["valid", "invalid"] {
            for case in file.get(key).and_then(Value::as_array).into_iter().flatten() {
                instances.push(case.get("document").or_else(|| case.get("data")).cloned().unwrap_or_else(|| case.clone()));
            }
        }
        let mut source = bundle.clone();
        let origin = &space.types[&type_name].origin;
        source["$ref"] = Value::String(openagents_codegen::Documents::bundle_pointer(&origin.file, &origin.pointer));
        let mut printed = doc.clone();
        printed["$schema"] = Value::String("https://json-schema.org/draft/2020-12/schema".into());
        printed["$ref"] = Value::String(format!("#/components/schemas/{type_name}"));
        let a = jsonschema::draft202012::new(&source).unwrap_or_else(|e| panic!("{type_name}: the bundle compiles: {e}"));
        let b = jsonschema::draft202012::new(&printed).unwrap_or_else(|e| panic!("{type_name}: the component schema compiles: {e}"));
        for inst in &instances {
            assert_eq!(a.is_valid(inst), b.is_valid(inst), "{type_name}: the bundle and the OpenRPC component disagree on {inst}");
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} vectors were checked");
}

#[test]
fn params_that_may_be_any_object_are_by_name_with_none_declared() {
    // Named in `$defs` or inline, `{"type": "object"}` params are an object of any members: by
    // name, never one positional argument called `params`.
    let dir = std::env::temp_dir().join(format!("oa-free-params-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("free.json");
    let branch = |title: &str, method: &str, params: &str| {
        format!(r#"{{"title": "{title}", "type": "object", "additionalProperties": false, "required": ["method", "params"],
            "properties": {{"id": {{"type": ["string", "integer"]}}, "method": {{"const": "{method}"}}, "params": {params}}}, "x-result": {{"type": "string"}}}}"#)
    };
    let schema = format!(
        r##"{{"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "free.json", "title": "Request",
            "oneOf": [{}, {}, {}],
            "$defs": {{"Meta": {{"type": "object", "description": "any members"}}, "Named": {{"type": "object", "properties": {{"n": {{"type": "integer"}}}}}}}}}}"##,
        branch("Named", "named", r##"{"$ref": "#/$defs/Meta"}"##),
        branch("Inline", "inline", r#"{"type": "object"}"#),
        branch("Fields", "fields", r##"{"$ref": "#/$defs/Named"}"##),
    );
    std::fs::write(&file, schema).expect("writes");
    let doc = Config::new().schema_dir(&file).generate_openrpc();
    let _ = std::fs::remove_dir_all(&dir);
    let doc = doc.expect("an OpenRPC document");
    let method = |name: &str| doc["methods"].as_array().expect("methods").iter().find(|m| m["name"] == name).unwrap_or_else(|| panic!("{name}")).clone();
    for name in ["named", "inline"] {
        let m = method(name);
        assert_eq!(m["paramStructure"], "by-name", "{name}: {m}");
        assert_eq!(m["params"], serde_json::json!([]), "{name}: {m}");
    }
    let fields = method("fields");
    assert_eq!(fields["paramStructure"], "by-name");
    assert_eq!(fields["params"][0]["name"], "n");
}

#[test]
fn checked_values_keep_their_applicators_and_a_servers_events_speak_of_the_schema_alone() {
    // A type kept as a checked value (`allOf`, `anyOf`, `not`, `unevaluatedProperties`) is
    // written with those keywords, not as `true` (which would accept anything); a root named
    // `ServerEvent` gets its own description in `x-events`, not this runtime's transports.
    let dir = std::env::temp_dir().join(format!("oa-openrpc-applied-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(
        dir.join("Request.json"),
        r#"{"title": "Request", "oneOf": [{"title": "Ping", "type": "object", "required": ["method"], "properties": {"method": {"const": "ping"}, "params": {"$ref": "Shapes.json#/$defs/Odd"}}, "x-result": {"$ref": "Shapes.json#/$defs/Open"}}]}"#,
    )
    .expect("writes");
    std::fs::write(
        dir.join("Shapes.json"),
        r#"{"type": "object", "$defs": {
            "Odd": {"allOf": [{"type": "string"}, {"type": "integer"}]},
            "Not": {"not": {"type": "string"}},
            "Open": {"type": "object", "anyOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}], "unevaluatedProperties": false},
            "Either": {"type": "object", "properties": {"k": {"type": "integer"}}, "anyOf": [{"required": ["a"]}, {"required": ["b"]}], "not": {"required": ["z"]}}}}"#,
    )
    .expect("writes");
    std::fs::write(dir.join("ServerEvent.json"), r#"{"description": "What my server sends.", "type": "object", "properties": {"n": {"type": "integer"}}}"#).expect("writes");
    let doc = Config::new().schema_dir(&dir).generate_openrpc();
    let _ = std::fs::remove_dir_all(&dir);
    let doc = doc.expect("an OpenRPC document");
    let schemas = &doc["components"]["schemas"];
    assert_eq!(schemas["Odd"]["allOf"].as_array().map(Vec::len), Some(2), "{}", schemas["Odd"]);
    assert_eq!(schemas["Not"]["not"]["type"], "string", "{}", schemas["Not"]);
    assert_eq!(schemas["Open"]["anyOf"].as_array().map(Vec::len), Some(2), "{}", schemas["Open"]);
    assert_eq!(schemas["Open"]["unevaluatedProperties"], false, "{}", schemas["Open"]);
    // An object with properties of its own and applicators: its struct, and the applicators.
    let either = &schemas["Either"];
    assert!(either["$ref"].as_str().is_some_and(|r| r.starts_with("#/components/schemas/")), "{either}");
    assert_eq!(either["anyOf"].as_array().map(Vec::len), Some(2), "{either}");
    assert_eq!(either["not"]["required"][0], "z", "{either}");
    let events = &doc["x-events"];
    assert_eq!(events["description"], "What my server sends.", "{events}");
    assert!(!events.to_string().contains("frontend.v2"), "{events}");
}
