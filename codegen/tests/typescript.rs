//! The checked-in TypeScript (`clients/typescript/src/generated/`) must be what the generator
//! makes from `schema/` now. Regenerate with `make codegen`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use openagents_codegen::typescript::{HEADER, TypeScriptOptions, emit};
use openagents_codegen::{Config, Documents, lower};

#[test]
fn checked_in_typescript_is_up_to_date() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join("clients/typescript/src/generated");
    // Our client generates beside its own runtime and error classes, as `make codegen` does.
    let files = Config::new().schema_dir(root.join("schema")).typescript_runtime("../rt.js").typescript_error_base("../error.js").generate_typescript().expect("the schema generates TypeScript");
    let mut stale = Vec::new();
    for (name, text) in &files {
        assert!(text.starts_with(HEADER), "{name} must start with the generated header");
        match std::fs::read_to_string(dir.join(name)) {
            Ok(on_disk) if on_disk == *text => {}
            Ok(_) => stale.push(format!("{name} differs")),
            Err(_) => stale.push(format!("{name} is missing")),
        }
    }
    let expected: BTreeSet<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let generated = std::fs::read_to_string(entry.path()).is_ok_and(|t| t.starts_with(HEADER));
        if generated && !expected.contains(name.as_str()) {
            stale.push(format!("{name} is no longer generated"));
        }
    }
    assert!(
        stale.is_empty(),
        "clients/typescript/src/generated/ is stale ({}): run `make codegen` and commit the result",
        stale.join("; ")
    );
}

#[test]
fn typescript_output_is_deterministic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let config = Config::new().schema_dir(root.join("schema"));
    let a = config.generate_typescript().expect("generates");
    let b = config.generate_typescript().expect("generates");
    assert_eq!(a, b);
}

/// A schema with every place a number, a nesting or an object's members are checked: bounded and
/// multi-type numbers, bounds with no `type`, a recursive object, array and tagged union, and
/// closed and open objects (one requiring a member it does not declare); and `$defs` keys that are
/// names of `Object.prototype`.
const EDGES: &str = r##"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$id": "edges.json",
  "title": "Edges",
  "type": "object",
  "properties": { "tree": { "$ref": "#/$defs/Tree" } },
  "$defs": {
    "Pct": { "type": "number", "minimum": 0, "maximum": 100 },
    "Dbl": { "type": "number" },
    "Count": { "type": "integer" },
    "NumOrText": { "type": ["number", "string"] },
    "Bounded": { "minimum": 0, "maximum": 10 },
    "Reading": { "type": "object", "required": ["value"], "properties": { "value": { "type": "number" } }, "additionalProperties": { "type": "number" } },
    "Tree": { "type": "object", "additionalProperties": false, "properties": { "children": { "type": "array", "items": { "$ref": "#/$defs/Tree" } } } },
    "Nest": { "type": "array", "items": { "$ref": "#/$defs/Nest" } },
    "Expr": { "oneOf": [
      { "title": "Num", "type": "object", "additionalProperties": false, "required": ["kind", "value"], "properties": { "kind": { "const": "num" }, "value": { "type": "number" } } },
      { "title": "Neg", "type": "object", "additionalProperties": false, "required": ["kind", "arg"], "properties": { "kind": { "const": "neg" }, "arg": { "$ref": "#/$defs/Expr" } } }
    ] },
    "Closed": { "type": "object", "additionalProperties": false, "properties": { "a": { "type": "integer" } } },
    "Needs": { "type": "object", "required": ["a"], "properties": { "a": { "type": "integer" } } },
    "Ghost": { "type": "object", "additionalProperties": false, "required": ["a", "ghost"], "properties": { "a": { "type": "integer" } } },
    "constructor": { "type": "integer" },
    "__proto__": { "type": "string" },
    "toString": { "type": "boolean" }
  }
}"##;

fn edges_typescript() -> Vec<(String, String)> {
    let docs = Documents::from_texts([("edges.json", EDGES)]).expect("the schema loads");
    let space = lower::lower(&docs).expect("the schema lowers");
    emit(&space, &TypeScriptOptions { runtime: "./rt.js".into(), ..TypeScriptOptions::default() })
}

fn validators(files: &[(String, String)]) -> &str {
    files.iter().find(|(n, _)| n == "validators.ts").map(|(_, t)| t.as_str()).expect("validators.ts")
}

/// The shape of the checks: numbers must be finite, descending into an array or object stops at
/// the nesting limit, and both checks list an object's own keys only.
#[test]
fn typescript_validators_check_finite_numbers_nesting_and_own_members() {
    let files = edges_typescript();
    let v = validators(&files);
    // `typeof x === "number"` alone lets `NaN` and the infinities through.
    assert!(v.contains("if (!($isNumber(v))) return false;"), "Pct/Dbl: the fast check must refuse a non-finite number");
    assert!(v.contains("if (!($isNumber(v) || typeof v === \"string\")) {"), "NumOrText: the explaining check must refuse a non-finite number");
    assert!(!v.contains("typeof v === \"number\")"), "no type check may accept every JavaScript number");
    assert!(v.contains("if (typeof v === \"number\" && !Number.isFinite(v)) return false;"), "Bounded: bounds with no type refuse non-finite numbers");
    // The nesting limit, in both checks, for objects and arrays.
    assert!(v.contains("if (d >= $MAX_DEPTH) return false;"), "objects: fast");
    assert!(v.contains("$depthViolation(out, p);"), "objects: explaining");
    assert!(v.contains("if (d + 1 >= $MAX_DEPTH) return false;"), "Tree's children: fast");
    assert!(v.contains("if (!fTree(x2, lenient, d + 2)) return false;"), "Tree's children sit two levels down");
    assert!(v.contains("cTree(x3, p + \"/children\" + \"/\" + i2, out, lenient, d + 2);"), "Tree's children sit two levels down: explaining");
    // Keys from `for...in` are own ones (a declared property is read by name, own or inherited).
    assert!(v.contains("if (!$has(v, k1)) continue;"), "Closed: for...in lists own keys only");
    assert!(!v.contains(" in v) return false;"), "no for...in may count an inherited key");
}

/// The generated validators run, when Node.js and the TypeScript client's packages are here:
/// `NaN` and the infinities are refused, a value nested 100000 deep is a violation (not a
/// `RangeError`) at the Rust runtime's limit, undeclared inherited members do not count, and the fast and
/// explaining checks agree on all of it.
#[test]
fn typescript_validators_refuse_non_finite_numbers_and_deep_values_and_ignore_inherited_members() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let tsc = root.join("clients/typescript/node_modules/typescript/bin/tsc");
    let node_runs = Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    if !node_runs || !tsc.exists() {
        eprintln!("skipped: needs `node` and {} (`npm ci` in clients/typescript)", tsc.display());
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("typescript-edges");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).expect("a scratch folder");
    for (name, text) in edges_typescript() {
        std::fs::write(dir.join("src").join(name), text).expect("writes");
    }
    std::fs::copy(root.join("clients/typescript/src/rt.ts"), dir.join("src/rt.ts")).expect("the runtime");
    std::fs::write(dir.join("package.json"), r#"{ "type": "module" }"#).expect("writes");
    std::fs::write(
        dir.join("tsconfig.json"),
        r#"{ "compilerOptions": { "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext", "lib": ["ES2022"], "types": [],
             "strict": true, "verbatimModuleSyntax": true, "rootDir": "src", "outDir": "out" }, "include": ["src/**/*.ts"] }"#,
    )
    .expect("writes");
    let out = Command::new("node").arg(&tsc).arg("-p").arg(dir.join("tsconfig.json")).output().expect("tsc runs");
    assert!(out.status.success(), "tsc --strict:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    std::fs::write(dir.join("check.mjs"), CHECK).expect("writes");
    let out = Command::new("node").arg(dir.join("check.mjs")).output().expect("node runs");
    assert!(out.status.success(), "the generated validators:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

/// Run by node beside the compiled `out/validators.js`.
const CHECK: &str = r#"
import assert from "node:assert/strict";
import { isValid, validate } from "./out/validators.js";

function both(type, value, what) {
  const fast = isValid(type, value);
  const found = validate(type, value);
  assert.equal(fast, found.length === 0, `${what}: isValid ${fast}, validate ${JSON.stringify(found).slice(0, 300)}`);
  assert.ok(!found.some((v) => v.message.includes("disagree")), what);
  return found;
}

// 1. Not JSON numbers.
for (const [type, value, pointer] of [["Pct", NaN, ""], ["Pct", Infinity, ""], ["Dbl", -Infinity, ""], ["Count", Infinity, ""], ["NumOrText", NaN, ""],
                                      ["Bounded", NaN, ""], ["Reading", { value: NaN }, "/value"], ["Reading", { value: 1, more: Infinity }, "/more"]]) {
  const found = both(type, value, `${type} ${String(value)}`);
  assert.deepEqual(found.map((v) => [v.pointer, v.keyword]), [[pointer, "type"]], `${type} ${String(value)}`);
  assert.match(found[0].message, /finite number/);
}
for (const [type, value] of [["Pct", 50], ["Dbl", -1e308], ["Bounded", "text"], ["Reading", { value: 0, more: 1 }]]) {
  assert.deepEqual(both(type, value, `${type} ${JSON.stringify(value)}`), []);
}

// 2. Nested 100000 deep: a violation at the limit, no RangeError; 127 levels pass, 128 do not.
let tree = {};
for (let i = 0; i < 100000; i++) tree = { children: [tree] };
let nest = [];
for (let i = 0; i < 100000; i++) nest = [nest];
let expr = { kind: "num", value: 1 };
for (let i = 0; i < 100000; i++) expr = { kind: "neg", arg: expr };
for (const [type, value] of [["Tree", tree], ["Nest", nest], ["Expr", expr], ["Edges", { tree }]]) {
  const found = both(type, value, `${type} 100000 deep`);
  assert.deepEqual(found.map((v) => v.keyword), ["json"], type);
  assert.match(found[0].message, /recursion limit exceeded/);
}
const chain = (n) => { let v = []; for (let i = 1; i < n; i++) v = [v]; return v; };
assert.deepEqual(both("Nest", chain(127), "127 arrays"), []);
assert.deepEqual(both("Nest", chain(128), "128 arrays").map((v) => v.keyword), ["json"]);

// 3. Undeclared inherited properties are not members; a declared one is read as the object gives it.
assert.deepEqual(both("Closed", Object.create({ bad: 1 }), "Closed inheriting bad"), []);
assert.deepEqual(both("Closed", Object.create({ a: "x" }), "Closed inheriting a").map((v) => [v.pointer, v.keyword]), [["/a", "type"]]);
assert.deepEqual(both("Needs", Object.create({ a: 1 }), "Needs inheriting a"), []);
assert.deepEqual(both("Expr", Object.create({ kind: "num", value: 1 }), "Expr inheriting its tag"), []);
assert.deepEqual(both("Needs", Object.assign(Object.create({ a: "x" }), { a: 1 }), "Needs with an own a"), []);

// 4. `$defs` keys that are names of `Object.prototype` name their own types.
for (const [key, good, bad] of [["constructor", 1, "x"], ["__proto__", "x", 1], ["toString", true, 1]]) {
  assert.deepEqual(validate(key, good), [], key);
  assert.deepEqual(validate(key, bad).map((v) => v.keyword), ["type"], key);
}
assert.throws(() => validate("hasOwnProperty", 1), RangeError);

// 5. A member a closed object requires without declaring it: given, an undeclared member; left
// out, a missing one (never keyword `false`).
assert.deepEqual(both("Ghost", { a: 1, ghost: 1 }, "Ghost given").map((v) => [v.pointer, v.keyword]), [["/ghost", "additionalProperties"]]);
assert.deepEqual(both("Ghost", { a: 1 }, "Ghost left out").map((v) => [v.pointer, v.keyword]), [["", "required"]]);
console.log("ok");
"#;
