//! Runs the generator over the JSON Schema Test Suite (draft 2020-12), the fixture schemas in
//! `codegen/tests/fixtures/`, and a set of simple patterns, and writes into `OUT_DIR`:
//!
//! - `suite.rs`: one module per suite group the generator accepts, and `GROUPS`, the table of
//!   every group (accepted or refused, with the refusal's text) and its cases;
//! - `fixtures.rs`: one public module per fixture schema;
//! - `patterns.rs`: one module per simple pattern, and `PATTERNS`, their validators;
//! - `langs/`: the Python package (`py/conformance_groups/<module>/`) and the TypeScript modules
//!   (`ts/src/<module>/`) generated for every group the generator accepts, and `manifest.json`,
//!   which names each group's module, root type and cases; `src/bin/conformance-langs.rs` runs
//!   them through Python and Node.js.
//!
//! A generated module that does not compile fails this crate's build: that is a generator bug.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use heck::ToSnakeCase;
use serde_json::Value;

const RUNTIME: &str = "::openagents_rt";

/// The suite's optional files this crate runs besides every file of `draft2020-12/`.
const OPTIONAL: &[&str] = &["optional/ecmascript-regex.json", "optional/non-bmp-regex.json", "optional/format/unknown.json"];

/// Patterns the differential test checks against `regress`; each must compile to a simple
/// (loop) matcher, which the build checks.
const SIMPLE_PATTERNS: &[&str] = &[
    "^a*$",
    "a+",
    "^[A-Za-z0-9][A-Za-z0-9._:-]*$",
    "^\\d{3}-\\d{2,4}$",
    "\\d{2,3}",
    "^\\w+$",
    "\\s",
    "^\\S+$",
    "^.{2,5}$",
    "a.c",
    "^[^a-z]*$",
    "[^\\x00-\\x7F]",
    "^[é€]+$",
    "€{1,2}$",
    "^[😀-😂]?x",
    "^/[^\\u0000]*$",
    "\\u2028",
    "^[\\n\\t ]{0,3}b",
    "^\\W\\D$",
    "x{2}$",
    "^\\.[a-c]{1,}",
    "[\\u00e0-\\u00ff]{2}",
    "^$",
    "[-a]{2}",
    "[a-]$",
    "^[\\d\\s]+",
    "\\u{1F600}+",
    "^\\cJ",
    "[\\b]",
    "^[^\\s\\S]*$",
    "^[^\\uE000-\\uFFFF]{1,2}$",
];

const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern", "false", "fn", "for", "gen", "if",
    "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self", "static", "struct", "super", "trait",
    "true", "try", "type", "unsafe", "use", "where", "while", "yield",
];

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let suite_dir = manifest.join("suite/draft2020-12");
    let fixtures_dir = manifest.join("../../codegen/tests/fixtures");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", suite_dir.display());
    println!("cargo:rerun-if-changed={}", suite_dir.join("optional").display());
    println!("cargo:rerun-if-changed={}", fixtures_dir.display());
    println!("cargo:rerun-if-changed={}", manifest.join("extra").display());

    let mut langs = Langs::new(&out.join("langs"));
    write(&out.join("suite.rs"), &suite(&suite_dir, &mut langs));
    let extra_dir = manifest.join("extra");
    let extra: Vec<String> = json_files(&extra_dir).iter().map(|p| file_name(p)).collect();
    write(&out.join("extra.rs"), &groups(&extra_dir, &extra, "EXTRA_GROUPS", "x", &mut langs));
    langs.finish();
    write(&out.join("fixtures.rs"), &fixtures(&fixtures_dir));
    write(&out.join("patterns.rs"), &patterns());
}

fn write(path: &Path, text: &str) {
    if let Err(e) = std::fs::write(path, text) {
        fail(&format!("cannot write {}: {e}", path.display()));
    }
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1);
}

fn read_json(path: &Path) -> Value {
    println!("cargo:rerun-if-changed={}", path.display());
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", path.display())));
    serde_json::from_str(&text).unwrap_or_else(|e| fail(&format!("{} is not JSON: {e}", path.display())))
}

/// The `*.json` files directly in `dir`, sorted by name.
fn json_files(dir: &Path) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", dir.display())));
    let mut files: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json")).collect();
    files.sort();
    files
}

/// A Rust identifier fragment for a file name: `optional/non-bmp-regex.json` ->
/// `optional_non_bmp_regex`, `additionalProperties.json` -> `additional_properties`.
fn ident_part(name: &str) -> String {
    let stem = name.trim_end_matches(".json");
    let mut out = String::new();
    for (i, c) in stem.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else {
            out.push('_');
        }
    }
    out
}

/// A module holding generated code, with the lints generated code does not follow allowed.
fn module(vis: &str, name: &str, code: &str) -> String {
    format!(
        "#[allow(missing_docs, dead_code, unused_imports, unused_labels, unused_parens, unreachable_patterns, clippy::all)]\n\
         {vis}mod {name} {{\n{code}\n}}\n"
    )
}

fn suite(dir: &Path, langs: &mut Langs) -> String {
    if !dir.is_dir() {
        fail(&format!(
            "the JSON Schema Test Suite is missing: expected its draft 2020-12 files at {} \
             (the suite's data files, kept in tests/conformance/suite)",
            dir.display()
        ));
    }
    let mut names: Vec<String> = json_files(dir).iter().map(|p| file_name(p)).collect();
    names.extend(OPTIONAL.iter().map(|s| (*s).to_owned()));
    let mut out = groups(dir, &names, "GROUPS", "g", langs);
    let keywords: Vec<String> = openagents_codegen::lower::SUPPORTED_KEYWORDS.iter().map(|k| format!("{k:?}")).collect();
    let _ = writeln!(
        out,
        "/// The generator's supported keywords (`openagents_codegen::lower::SUPPORTED_KEYWORDS`).\npub const SUPPORTED_KEYWORDS: &[&str] = &[{}];",
        keywords.join(", ")
    );
    out
}

fn file_name(path: &Path) -> String {
    path.file_name().unwrap_or_default().to_string_lossy().into_owned()
}

/// The modules generated for every group of the test-suite-format files `names` in `dir`, and
/// the table `table` of all their groups.
fn groups(dir: &Path, names: &[String], table_name: &str, prefix: &str, langs: &mut Langs) -> String {
    let mut modules = String::new();
    let mut table = format!("/// Every group of the files this crate runs, in file order.\npub static {table_name}: &[Group] = &[\n");
    for name in names {
        let Value::Array(groups) = read_json(&dir.join(name)) else { fail(&format!("{name}: a suite file is an array of groups")) };
        for (index, group) in groups.iter().enumerate() {
            let description = group.get("description").and_then(Value::as_str).unwrap_or_default();
            let schema = group.get("schema").unwrap_or_else(|| fail(&format!("{name}[{index}]: no schema")));
            let schema_text = serde_json::to_string_pretty(schema).expect("a JSON value serializes");
            let generated = openagents_codegen::rust_from_texts([("g.json", schema_text.as_str())], RUNTIME);
            let (refusal, validate) = match generated {
                Ok(code) => {
                    let m = format!("{prefix}_{}_{index}", ident_part(name));
                    let code = format!("{code}\n{}", root_helpers(&[("g.json", schema_text.as_str())]));
                    modules.push_str(&module("", &m, &code));
                    langs.group(table_name, name, index, &m, schema_text.as_str(), group);
                    ("None".to_owned(), format!("Some(Entry {{ typed: {m}::validate_root, dynamic: {m}::check_root }})"))
                }
                Err(e) => (format!("Some({:?})", e.to_string()), "None".to_owned()),
            };
            let mut cases = String::new();
            for case in group.get("tests").and_then(Value::as_array).into_iter().flatten() {
                let cd = case.get("description").and_then(Value::as_str).unwrap_or_default();
                let data = serde_json::to_string(case.get("data").unwrap_or(&Value::Null)).expect("a JSON value serializes");
                let valid =
                    case.get("valid").and_then(Value::as_bool).unwrap_or_else(|| fail(&format!("{name}[{index}]: a case without `valid`")));
                let _ = writeln!(cases, "        Case {{ description: {cd:?}, data: {data:?}, valid: {valid} }},");
            }
            let expected_refusal = group.get("x-refused").and_then(Value::as_str);
            let _ = writeln!(
                table,
                "    Group {{ file: {name:?}, index: {index}, description: {description:?}, schema: {schema_text:?}, refusal: {refusal}, expected_refusal: {expected_refusal:?}, validate: {validate}, cases: &[\n{cases}    ] }},"
            );
        }
    }
    table.push_str("];\n");
    format!("{modules}\n{table}")
}

/// `validate_root` (the typed path: decode, then validate) and `check_root` (the untyped
/// full-schema check) for the root type of a one-file schema set.
fn root_helpers(texts: &[(&str, &str)]) -> String {
    let docs = openagents_codegen::Documents::from_texts(texts.iter().copied()).expect("generated already");
    let space = openagents_codegen::lower::lower(&docs).expect("generated already");
    let root = space.roots.first().expect("one file, one root").clone();
    let check = match &space.types[&root].kind {
        openagents_codegen::model::TypeKind::Alias(_) => {
            format!("check_{}(value, &{RUNTIME}::Path::Root, &mut out);", root.to_snake_case())
        }
        _ => format!("<{root} as {RUNTIME}::SchemaCheck>::check_value(value, &{RUNTIME}::Path::Root, &mut out);"),
    };
    format!(
        "/// Decodes and validates `input` as the root type `{root}`.\n\
         pub fn validate_root(input: &[u8]) -> Result<(), {RUNTIME}::DocumentError> {{\n\
             validate_document({root:?}, input).expect(\"the root type is listed\")\n\
         }}\n\
         /// Checks an untyped value against the root type's full schema.\n\
         pub fn check_root(value: &serde_json::Value) -> Vec<{RUNTIME}::Violation> {{\n\
             let mut out = Vec::new();\n\
             {check}\n\
             out\n\
         }}\n"
    )
}

fn fixtures(dir: &Path) -> String {
    let mut out = String::new();
    for path in json_files(dir) {
        let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", path.display())));
        println!("cargo:rerun-if-changed={}", path.display());
        let code = openagents_codegen::rust_from_texts([(name.as_str(), text.as_str())], RUNTIME)
            .unwrap_or_else(|e| fail(&format!("fixture {name} is refused: {e}")));
        let m = ident_part(&name);
        if RUST_KEYWORDS.contains(&m.as_str()) {
            fail(&format!("fixture {name}: `{m}` is a Rust keyword, so it cannot name the fixture's module; rename the file"));
        }
        out.push_str(&format!("/// Generated from `codegen/tests/fixtures/{name}`.\n"));
        out.push_str(&module("pub ", &m, &code));
    }
    out
}

fn patterns() -> String {
    let mut modules = String::new();
    let mut table = String::from(
        "/// The simple patterns and their generated validators (for a JSON string document).\npub static PATTERNS: &[SimplePattern] = &[\n",
    );
    for (i, p) in SIMPLE_PATTERNS.iter().enumerate() {
        let analyzed = openagents_codegen::pattern::analyze(p).unwrap_or_else(|e| fail(&format!("pattern {p:?}: {e}")));
        if analyzed.simple.is_none() {
            fail(&format!("pattern {p:?} is meant to be simple (compiled to loops) but the generator runs it on regress"));
        }
        let schema = serde_json::json!({ "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "string", "pattern": p });
        let text = schema.to_string();
        let code = openagents_codegen::rust_from_texts([("p.json", text.as_str())], RUNTIME)
            .unwrap_or_else(|e| fail(&format!("pattern {p:?} is refused: {e}")));
        let code = format!("{code}\n{}", root_helpers(&[("p.json", text.as_str())]));
        modules.push_str(&module("", &format!("p_{i}"), &code));
        let atoms: Vec<String> = analyzed
            .simple
            .iter()
            .flat_map(|s| &s.atoms)
            .map(|a| format!("PatternAtom {{ ranges: &{:?}, min: {}, max: {:?} }}", a.set.ranges, a.min, a.max))
            .collect();
        let _ = writeln!(
            table,
            "    SimplePattern {{ source: {p:?}, atoms: &[{}], entry: Entry {{ typed: p_{i}::validate_root, dynamic: p_{i}::check_root }} }},",
            atoms.join(", ")
        );
    }
    table.push_str("];\n");
    format!("{modules}\n{table}")
}

/// The Python and TypeScript generated for every accepted group, and the manifest naming them.
struct Langs {
    dir: PathBuf,
    groups: Vec<Value>,
}

impl Langs {
    fn new(dir: &Path) -> Langs {
        if dir.exists() {
            std::fs::remove_dir_all(dir).unwrap_or_else(|e| fail(&format!("cannot clear {}: {e}", dir.display())));
        }
        Langs { dir: dir.to_path_buf(), groups: Vec::new() }
    }

    fn write_files(&self, dir: &Path, files: &[(String, String)]) {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| fail(&format!("cannot create {}: {e}", dir.display())));
        for (name, text) in files {
            write(&dir.join(name), text);
        }
    }

    /// Generates the group's schema (already accepted for Rust) as Python and TypeScript, in
    /// folders named `module`; a target that refuses it is recorded with its refusal.
    fn group(&mut self, table: &str, file: &str, index: usize, module: &str, schema: &str, group: &Value) {
        let docs = openagents_codegen::Documents::from_texts([("g.json", schema)]).expect("generated already");
        let space = openagents_codegen::lower::lower(&docs).expect("generated already");
        let root = space.roots.first().expect("one file, one root").clone();
        let python = match openagents_codegen::python::emit(&space, None) {
            Ok(files) => {
                self.write_files(&self.dir.join("py/conformance_groups").join(module), &files);
                Value::Null
            }
            Err(e) => Value::String(e.to_string()),
        };
        // Beside copies of the client's rt.ts and error.ts (`conformance-langs`), not the package.
        let ts_options = openagents_codegen::typescript::TypeScriptOptions { runtime: "../rt.js".into(), error_base: Some("../error.js".into()), schema_digest: None };
        let ts = openagents_codegen::typescript::emit(&space, &ts_options);
        self.write_files(&self.dir.join("ts/src").join(module), &ts);
        let cases: Vec<Value> = group
            .get("tests")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|case| {
                serde_json::json!({
                    "description": case.get("description").and_then(Value::as_str).unwrap_or_default(),
                    "data": serde_json::to_string(case.get("data").unwrap_or(&Value::Null)).expect("a JSON value serializes"),
                    "valid": case.get("valid").and_then(Value::as_bool).unwrap_or_default(),
                })
            })
            .collect();
        self.groups.push(serde_json::json!({
            "set": if table == "GROUPS" { "suite" } else { "extra" },
            "file": file,
            "index": index,
            "description": group.get("description").and_then(Value::as_str).unwrap_or_default(),
            "module": module,
            "root": root,
            "python_refusal": python,
            "cases": cases,
        }));
    }

    fn finish(self) {
        let package = self.dir.join("py/conformance_groups");
        std::fs::create_dir_all(&package).unwrap_or_else(|e| fail(&format!("cannot create {}: {e}", package.display())));
        write(
            &package.join("__init__.py"),
            "\"\"\"One generated package per JSON Schema Test Suite group; each imports the runtime as `.._rt`.\"\"\"\n\nfrom openagents import _rt\n\n__all__ = [\"_rt\"]\n",
        );
        let manifest = serde_json::json!({ "groups": self.groups });
        write(&self.dir.join("manifest.json"), &serde_json::to_string_pretty(&manifest).expect("a JSON value serializes"));
    }
}
