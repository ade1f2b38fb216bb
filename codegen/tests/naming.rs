//! Names decided once in the model are the names every language emits: a union branch's type
//! and an error code's class are called the same in Python and TypeScript, clashes included.

use openagents_codegen::{Documents, lower, python, typescript};

const SCHEMA: &str = r##"{
  "title": "Failure",
  "type": "object",
  "required": ["code", "message", "kind"],
  "properties": {
    "code": {"$ref": "#/$defs/Code"},
    "message": {"type": "string"},
    "kind": {"$ref": "#/$defs/Kind"},
    "other": {"$ref": "#/$defs/KindA"},
    "busy": {"$ref": "#/$defs/BusyError"}
  },
  "$defs": {
    "KindA": {"type": "object", "properties": {"n": {"type": "integer"}}},
    "BusyError": {"type": "object", "properties": {"n": {"type": "integer"}}},
    "Kind": {"oneOf": [
      {"title": "A", "type": "object", "required": ["t"], "properties": {"t": {"const": "a"}}},
      {"title": "B", "type": "object", "required": ["t"], "properties": {"t": {"const": "b"}}}
    ]},
    "Code": {"type": "string", "enum": ["busy", "bad"], "x-enum": {
      "busy": {"retryable": true, "rpc_code": -32001},
      "bad": {"retryable": false, "rpc_code": -32602}
    }}
  }
}"##;

fn file<'a>(files: &'a [(String, String)], name: &str) -> &'a str {
    files.iter().find(|(n, _)| n == name).map(|(_, t)| t.as_str()).unwrap_or_else(|| panic!("{name} is generated"))
}

/// The Python and the TypeScript files generated from `schema`.
type Files = Vec<(String, String)>;
fn python_and_typescript(schema: &str) -> (Files, Files) {
    let docs = Documents::from_texts([("case.json", schema)]).expect("loads");
    let space = lower::lower(&docs).expect("lowers");
    (python::emit(&space, None).expect("python"), typescript::emit(&space, &typescript::TypeScriptOptions::default()))
}

#[test]
fn clashes_are_resolved_the_same_way_in_every_language() {
    let (py, ts) = python_and_typescript(SCHEMA);
    let (models, types) = (file(&py, "models.py"), file(&ts, "types.ts"));
    // Branch `A` of `Kind` would be `KindA`, a type of its own: it is `KindA2` everywhere.
    assert!(models.contains("class KindA2("), "Python names the branch KindA2:\n{models}");
    assert!(types.contains("export interface KindA2 "), "TypeScript names the branch KindA2:\n{types}");
    assert!(models.contains("class KindB(") && types.contains("export interface KindB "));
    assert!(models.contains("class KindA(") && types.contains("export interface KindA "), "the type KindA keeps its name");
    // Code `busy` would be `BusyError`, a type of its own: its class is `BusyError2` everywhere.
    let (errors_py, errors_ts) = (file(&py, "errors.py"), file(&ts, "errors.ts"));
    assert!(errors_py.contains("class BusyError2("), "{errors_py}");
    assert!(errors_ts.contains("export class BusyError2 "), "{errors_ts}");
    assert!(errors_py.contains("class BadError(") && errors_ts.contains("export class BadError "));
    // The fallback for a code this version does not know is the model's, in Python as in Rust.
    assert!(errors_py.contains("RPC_CODE: ClassVar[int] = -32000"), "{errors_py}");
}

#[test]
fn field_clashes_are_numbered_the_same_way_in_rust_and_python() {
    // `a-b` and `a_b` both clean to `a_b`, `type` and `Type` both to `type`.
    let schema = r#"{"title": "Pair", "type": "object", "properties": {"a-b": {"type": "string"}, "a_b": {"type": "integer"}, "type": {"type": "string"}, "Type": {"type": "string"}}}"#;
    let rust = openagents_codegen::rust_from_texts([("case.json", schema)], "crate::rt").expect("rust");
    assert!(rust.contains("pub a_b: ") && rust.contains("pub a_b_2: "), "{rust}");
    assert!(rust.contains("pub r#type: ") && rust.contains("pub type_2: "), "{rust}");
    let (py, _) = python_and_typescript(schema);
    let models = file(&py, "models.py");
    assert!(models.contains("    a_b: ") && models.contains("    a_b_2: "), "{models}");
}

#[test]
fn an_unknown_branch_has_one_name_in_every_language() {
    // `UnknownKind` is taken by a type of its own, so the unknown branch of `Kind` is `UnknownKind2`.
    let schema = r##"{"title": "Root", "type": "object", "properties": {"k": {"$ref": "#/$defs/Kind"}, "u": {"$ref": "#/$defs/UnknownKind"}},
      "$defs": {
        "UnknownKind": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "Kind": {"x-extensible": true, "oneOf": [
          {"title": "A", "type": "object", "required": ["t"], "properties": {"t": {"const": "a"}}}]}}}"##;
    let (py, ts) = python_and_typescript(schema);
    let (models, types) = (file(&py, "models.py"), file(&ts, "types.ts"));
    assert!(models.contains("class UnknownKind2("), "{models}");
    assert!(types.contains("export interface UnknownKind2 {") && types.contains("export type Kind = KnownKind | UnknownKind2;"), "{types}");
}
