//! The checked-in Python modules (`clients/python/src/openagents/_generated/`) must be exactly
//! what the generator makes from `schema/` now; when they are not, this fails and names the
//! command that regenerates them. The Python emitter must also handle every fixture schema.

use std::path::Path;

use openagents_codegen::{Config, Documents, lower, python};

const REGENERATE: &str = "make codegen";

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn checked_in_python_modules_are_fresh() {
    // Our package's errors derive from its OpenAgentsError, as `make codegen` says.
    let files = Config::new().schema_dir(manifest().join("../schema")).python_error_root("OpenAgentsError").generate_python().expect("the real schema generates Python");
    let dir = manifest().join("../clients/python/src/openagents/_generated");
    let mut stale = Vec::new();
    for (name, text) in &files {
        assert!(text.starts_with(python::HEADER), "{name} must start with the generated header");
        match std::fs::read_to_string(dir.join(name)) {
            Ok(on_disk) if on_disk == *text => {}
            Ok(_) => stale.push(format!("{name} differs")),
            Err(_) => stale.push(format!("{name} is missing")),
        }
    }
    for entry in std::fs::read_dir(&dir).expect("the generated folder exists").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let generated = std::fs::read_to_string(entry.path()).is_ok_and(|t| t.lines().next() == Some(python::HEADER));
        if generated && !files.iter().any(|(n, _)| *n == name) {
            stale.push(format!("{name} is no longer generated"));
        }
    }
    assert!(
        stale.is_empty(),
        "the generated Python in {} is stale ({}); run `{REGENERATE}` and commit the result",
        dir.display(),
        stale.join(", ")
    );
}

#[test]
fn python_is_deterministic() {
    let a = Config::new().schema_dir(manifest().join("../schema")).generate_python().expect("generates");
    let b = Config::new().schema_dir(manifest().join("../schema")).generate_python().expect("generates");
    assert_eq!(a, b);
}

#[test]
fn every_fixture_generates_python() {
    let dir = manifest().join("tests/fixtures");
    let Ok(entries) = std::fs::read_dir(&dir) else { return };
    let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "json")).collect();
    paths.sort();
    for path in paths {
        let name = path.file_name().and_then(|s| s.to_str()).expect("utf-8 name").to_owned();
        let text = std::fs::read_to_string(&path).expect("readable fixture");
        let docs = Documents::from_texts([(name.as_str(), text.as_str())]).expect("fixture loads");
        let space = lower::lower(&docs).expect("fixture lowers");
        let files = python::emit(&space, None).unwrap_or_else(|e| panic!("fixture {name} must generate Python: {e}"));
        assert!(files.iter().any(|(n, _)| n == "models.py"), "{name}: no models.py");
    }
}
