//! The checked-in TypeScript (`clients/typescript/src/generated/`) must be what the generator
//! makes from `schema/` now. Regenerate with `make codegen`.

use std::collections::BTreeSet;
use std::path::Path;

use openagents_codegen::Config;
use openagents_codegen::typescript::HEADER;

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
