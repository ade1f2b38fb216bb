//! Generates the Rust of each vendored published schema (`tests/third-party-schemas/`) into
//! `OUT_DIR/<module>.rs`: the generator's output as `openagents_codegen::Config` writes it for
//! the runtime `::openagents_rt` (the `openagents-rt` crate), followed by `check_document`, the untyped path (the
//! full-schema check of a parsed value) for every named type. `src/lib.rs` includes each file as a
//! public module. A schema the generator refuses, or generated code that does not compile, fails
//! this crate's build.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use heck::ToSnakeCase;
use openagents_codegen::model::TypeKind;

const RUNTIME: &str = "::openagents_rt";

/// Each vendored schema, the module its Rust becomes, and whether free-form objects are kept as
/// text (`Config::objects_as_text`).
const SCHEMAS: &[(&str, &str, bool)] = &[
    ("acp-v1.schema.json", "acp_v1", true),
    ("mcp-2026-07-28.schema.json", "mcp_2026_07_28", true),
    ("mcp-2025-11-25.schema.json", "mcp_2025_11_25", true),
    ("acp-v1.schema.json", "acp_v1_maps", false),
    ("mcp-2026-07-28.schema.json", "mcp_2026_07_28_maps", false),
];

fn main() {
    let manifest = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dir = manifest.join("../third-party-schemas");
    println!("cargo:rerun-if-changed=build.rs");
    for &(file, module, objects_as_text) in SCHEMAS {
        let path = dir.join(file);
        println!("cargo:rerun-if-changed={}", path.display());
        let code = generate(&path, objects_as_text);
        if let Err(e) = std::fs::write(out.join(format!("{module}.rs")), code) {
            fail(&format!("cannot write {module}.rs: {e}"));
        }
    }
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1);
}

/// The generated Rust of one schema file, and its `check_document`.
fn generate(path: &Path, objects_as_text: bool) -> String {
    let mut config = openagents_codegen::Config::new()
        .schema_dir(path)
        .objects_as_text(objects_as_text);
    // A method file beside the schema (`<name>.methods.json`) declares the methods of a schema
    // that does not mark them itself (MCP).
    let methods = path.with_extension("").with_extension("methods.json");
    if methods.exists() {
        println!("cargo:rerun-if-changed={}", methods.display());
        config = config.methods_file(&methods);
    }
    let (docs, space) = config
        .load()
        .unwrap_or_else(|r| fail(&format!("{}: refused: {}", path.display(), r.first())));
    let code = config
        .rust_for(&docs, &space)
        .unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
    let mut arms = String::new();
    for (name, t) in &space.types {
        let check = match &t.kind {
            TypeKind::Alias(_) => format!("check_{}", name.to_snake_case()),
            _ => format!("<{name} as {RUNTIME}::SchemaCheck>::check_value"),
        };
        let _ = writeln!(
            arms,
            "        {name:?} => {check}(value, &{RUNTIME}::Path::Root, &mut out),"
        );
    }
    format!(
        "{code}\n\
         /// Checks a parsed value against the named type's full schema (the untyped path): every\n\
         /// violation, none when it is valid; `None` when no type has that name.\n\
         pub fn check_document(type_name: &str, value: &serde_json::Value) -> Option<Vec<{RUNTIME}::Violation>> {{\n\
         \x20   let mut out = Vec::new();\n\
         \x20   match type_name {{\n{arms}        _ => return None,\n    }}\n\
         \x20   Some(out)\n\
         }}\n"
    )
}
