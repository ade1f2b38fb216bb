//! Code generated for someone else's schema (`tests/foreign/notes.schema.json`: two methods, an
//! error-code enum and the object that carries it) with the generator's defaults: nothing of ours
//! in it, and error classes whose base is named from their schema, not ours.

use std::path::{Path, PathBuf};

use openagents_codegen::Config;

fn notes() -> Config {
    Config::new().schema_dir(schema())
}

fn schema() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/foreign/notes.schema.json")
}

fn file<'a>(files: &'a [(String, String)], name: &str) -> &'a str {
    files.iter().find(|(n, _)| n == name).map(|(_, t)| t.as_str()).unwrap_or_else(|| panic!("{name} is generated"))
}

#[test]
fn code_generated_for_another_schema_names_nothing_of_ours() {
    // Our project's words: commands, make targets, headers, methods, our error base classes.
    const OURS: &[&str] = &["make codegen", "openagents schema", "openagents-schema-digest", "openagents.validate", "`schema/`", "OpenAgentsError", "UnknownCodeError", "RuntimeSubmit", "`submit`", "`interrupt`", "../error.js", "../rt.js", "`AsyncClient`", "`Client`"];
    let mut files: Vec<(String, String)> = Vec::new();
    files.extend(notes().generate_python().expect("Python").into_iter().map(|(n, t)| (format!("python/{n}"), t)));
    files.extend(notes().generate_typescript().expect("TypeScript").into_iter().map(|(n, t)| (format!("typescript/{n}"), t)));
    let rust = notes().generate_rust().expect("Rust");
    // The bundle string carries the bundle's own `$comment` (part of the digest): not prose of ours.
    files.push(("rust".to_owned(), rust.lines().filter(|l| !l.contains("pub const SCHEMA_BUNDLE")).collect::<Vec<_>>().join("\n")));
    let mut found = Vec::new();
    for (name, text) in &files {
        for word in OURS {
            if let Some(at) = text.find(word) {
                found.push(format!("{name}:{}: `{word}`", text[..at].lines().count()));
            }
        }
    }
    assert!(found.is_empty(), "our words in code generated for another schema:\n{}", found.join("\n"));
}

#[test]
fn error_base_classes_are_named_from_the_schema_or_chosen() {
    let ts = notes().generate_typescript().expect("TypeScript");
    let errors = file(&ts, "errors.ts");
    assert!(errors.contains("export class NotesException extends Error {"), "{errors}");
    assert!(errors.contains("export class UnknownNotesException extends NotesException {}"), "{errors}");
    assert!(errors.contains("export class NoSuchNoteError extends NotesException {"), "{errors}");
    assert!(!errors.contains(" from \"@"), "errors.ts imports no base classes: {errors}");

    let py = notes().generate_python().expect("Python");
    let errors = file(&py, "errors.py");
    assert!(errors.contains("class NotesException(_rt.TypedError):"), "{errors}");
    assert!(errors.contains("class NoSuchNoteError(NotesException):"), "{errors}");

    // Chosen instead: a module of base classes (TypeScript), another root (Python).
    let ts = notes().typescript_error_base("@acme/errors").generate_typescript().expect("TypeScript");
    let errors = file(&ts, "errors.ts");
    assert!(errors.contains("import { OpenAgentsError, UnknownCodeError } from \"@acme/errors\";") && errors.contains("extends OpenAgentsError {"), "{errors}");
    let py = notes().python_error_root("AcmeError").generate_python().expect("Python");
    assert!(file(&py, "errors.py").contains("class NotesException(_rt.AcmeError):"));
    let e = notes().python_error_root("not a class").generate_python().expect_err("not an identifier");
    assert!(e.to_string().contains("not a class") && e.to_string().contains("Python class name"), "{e}");
}

#[test]
fn the_command_line_has_the_same_defaults_and_options() {
    let dir = std::env::temp_dir().join(format!("openagents-codegen-foreign-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_openagents-codegen")).args(args).output().expect("the generator runs");
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let schema = schema();
    let schema = schema.to_str().expect("utf-8");
    let ts = dir.join("ts");
    run(&["typescript", "--schema", schema, "--out-dir", ts.to_str().expect("utf-8")]);
    let errors = std::fs::read_to_string(ts.join("errors.ts")).expect("errors.ts");
    assert!(errors.contains("export class NotesException extends Error {"), "{errors}");
    let validators = std::fs::read_to_string(ts.join("validators.ts")).expect("validators.ts");
    assert!(validators.contains("from \"@openagents/client/rt\""), "the package's runtime by default");
    let py = dir.join("py");
    run(&["python", "--schema", schema, "--out-dir", py.to_str().expect("utf-8"), "--error-root", "AcmeError"]);
    assert!(std::fs::read_to_string(py.join("errors.py")).expect("errors.py").contains("class NotesException(_rt.AcmeError):"));
    let _ = std::fs::remove_dir_all(&dir);
}
