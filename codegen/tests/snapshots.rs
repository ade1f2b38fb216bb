//! Snapshots of the generator: its Rust for the real schema and for each fixture schema (one
//! feature each), and its error messages. Regenerate with `make codegen`.

use std::path::Path;

use openagents_codegen::{Config, rust_from_texts};

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn rust_for_the_real_schema() {
    let code = Config::new().schema_dir(manifest().join("../schema")).runtime("crate::rt").generate_rust().expect("the real schema generates");
    insta::assert_snapshot!("schema_rust", code);
}

#[test]
fn rust_for_each_fixture() {
    let dir = manifest().join("tests/fixtures");
    let mut entries: Vec<_> = std::fs::read_dir(&dir).expect("fixtures folder").flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "json")).collect();
    entries.sort();
    assert!(!entries.is_empty(), "no fixture schemas in {}", dir.display());
    for path in entries {
        let name = path.file_stem().and_then(|s| s.to_str()).expect("utf-8 name").to_owned();
        let text = std::fs::read_to_string(&path).expect("readable fixture");
        let file = format!("{name}.json");
        let code = rust_from_texts([(file.as_str(), text.as_str())], "::openagents_protocol::rt")
            .unwrap_or_else(|e| panic!("fixture {name} must generate: {e}"));
        insta::assert_snapshot!(format!("fixture_{name}"), code);
    }
}

/// Each case: a schema outside the subset (or broken), and the error it must get.
const REFUSED: &[(&str, &str)] = &[
    ("unsupported keyword", r#"{"type": "array", "unevaluatedItems": false}"#),
    ("invalid pattern that unevaluatedProperties sees", r#"{"type": "object", "allOf": [{"patternProperties": {"(x": {}}}], "unevaluatedProperties": false}"#),
    ("invalid ECMA-262 pattern in patternProperties", r#"{"type": "object", "patternProperties": {"^(x$": {}}}"#),
    ("nested unsupported keyword", r#"{"type": "object", "properties": {"a": {"type": "string", "$dynamicAnchor": "a"}}}"#),
    ("multipleOf that is not above 0", r#"{"type": "number", "multipleOf": 0}"#),
    ("another tool's keyword", r#"{"type": "string", "abcIsValidColor": true}"#),
    ("uniqueItems that is no boolean", r#"{"type": "array", "uniqueItems": 1}"#),
    ("format that is not a string", r#"{"type": "integer", "format": 16}"#),
    ("remote reference", r#"{"$ref": "https://example.com/schema.json"}"#),
    ("anchor reference", r##"{"$ref": "#foo"}"##),
    ("dangling reference", r##"{"$ref": "#/$defs/Missing"}"##),
    ("extensible oneOf without a tag", r#"{"oneOf": [{"type": "string"}, {"type": "integer"}], "x-extensible": true}"#),
    ("extensible oneOf with a shared tag value", r#"{"x-extensible": true, "oneOf": [{"type": "object", "required": ["k"], "properties": {"k": {"const": "a"}}}, {"type": "object", "required": ["k"], "properties": {"k": {"const": "a"}}}]}"#),
    ("extensible oneOf whose tag one branch does not require", r#"{"x-extensible": true, "oneOf": [{"type": "object", "required": ["k"], "properties": {"k": {"const": "a"}}}, {"type": "object", "properties": {"k": {"const": "b"}}}]}"#),
    ("a reference cycle at one place of a document", r##"{"$defs": {"A": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "string"}]}}, "$ref": "#/$defs/A"}"##),
    ("unevaluatedProperties over a cycle of allOf members", r##"{"type": "object", "$defs": {"A": {"properties": {"a": {}}, "allOf": [{"$ref": "#/$defs/B"}]}, "B": {"allOf": [{"$ref": "#/$defs/A"}]}}, "properties": {"x": {"$ref": "#/$defs/A"}}, "allOf": [{"$ref": "#/$defs/A"}], "unevaluatedProperties": false}"##),
    ("unevaluatedProperties that is no schema", r#"{"type": "object", "unevaluatedProperties": 3}"#),
    ("discriminator without propertyName", r#"{"discriminator": {}, "oneOf": [{"type": "object", "required": ["k"], "properties": {"k": {"const": "a"}}}]}"#),
    ("invalid ECMA-262 pattern", r#"{"type": "string", "pattern": "^(a$"}"#),
    ("negative maxLength", r#"{"type": "string", "maxLength": -1}"#),
    ("unknown type name", r#"{"type": "text"}"#),
    ("other dialect", r#"{"$schema": "http://json-schema.org/draft-03/schema#", "type": "string"}"#),
    ("$id naming another file", r#"{"$id": "other.json", "type": "string"}"#),
    ("tuple items", r#"{"type": "array", "items": [{"type": "string"}]}"#),
    ("x-enum entry missing", r#"{"type": "string", "enum": ["a", "b"], "x-enum": {"a": {"description": "A"}}}"#),
    ("x-result on some branches only", r#"{"oneOf": [{"type": "object", "required": ["method"], "properties": {"method": {"const": "a"}, "params": {}}, "x-result": {}}, {"type": "object", "required": ["method"], "properties": {"method": {"const": "b"}, "params": {}}}]}"#),
    ("constant without description", r#"{"x-constants": {"LIMIT": {"value": 3}}, "type": "string"}"#),
    ("not JSON", r#"{"type": "string",}"#),
];

#[test]
fn error_messages() {
    let mut out = String::new();
    for (what, schema) in REFUSED {
        let err = rust_from_texts([("case.json", *schema)], "::openagents_protocol::rt").err().unwrap_or_else(|| panic!("`{what}` must be refused"));
        assert_eq!(err.file, "case.json", "{what}: the error names the file");
        out.push_str(&format!("{what}:\n  {err}\n"));
    }
    insta::assert_snapshot!("error_messages", out);
}
