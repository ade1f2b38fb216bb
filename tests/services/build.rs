//! Generates, with `service(true)`, the Rust of ACP v1 (its `x-side` marks), MCP 2026-07-28 (its
//! method file), our own schema (its method union) and `schema/results.json` (results of every
//! shape) into `OUT_DIR`.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let third = manifest.join("../third-party-schemas");
    let schemas = [
        ("acp_v1.rs", third.join("acp-v1.schema.json"), None),
        ("mcp_2026_07_28.rs", third.join("mcp-2026-07-28.schema.json"), Some(third.join("mcp-2026-07-28.methods.json"))),
        ("openagents.rs", manifest.join("../../schema"), None),
        ("results.rs", manifest.join("schema/results.json"), None),
    ];
    for (file, schema, methods) in schemas {
        println!("cargo:rerun-if-changed={}", schema.display());
        let mut config = openagents_codegen::Config::new().schema_dir(&schema).service(true);
        if let Some(m) = methods {
            println!("cargo:rerun-if-changed={}", m.display());
            config = config.methods_file(m);
        }
        if let Err(e) = config.write_rust(out.join(file)) {
            eprintln!("error: {}: {e}", schema.display());
            std::process::exit(1);
        }
    }
}
