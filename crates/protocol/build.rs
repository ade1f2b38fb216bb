//! Generates the protocol module from `schema/` into `OUT_DIR`, the way prost-build does.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let schema = manifest.join("../../schema");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("openagents.rs");
    println!("cargo:rerun-if-changed={}", schema.display());
    if let Ok(entries) = std::fs::read_dir(&schema) {
        for e in entries.flatten() {
            println!("cargo:rerun-if-changed={}", e.path().display());
        }
    }
    let service = std::env::var_os("CARGO_FEATURE_SERVICE").is_some();
    if let Err(e) = openagents_codegen::Config::new().schema_dir(&schema).runtime("crate::rt").schemars(true).service(service).write_rust(&out) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
    // The Agent Client Protocol, from its vendored published schema (feature `acp`), with its
    // services: each side's trait, dispatch and typed client on openagents-rpc.
    if std::env::var_os("CARGO_FEATURE_ACP").is_some() {
        let acp = manifest.join("../../tests/third-party-schemas/acp-v1.schema.json");
        println!("cargo:rerun-if-changed={}", acp.display());
        let out = out.with_file_name("acp_v1.rs");
        if let Err(e) = openagents_codegen::Config::new().schema_dir(&acp).runtime("crate::rt").service(true).write_rust(&out) {
            eprintln!("error: {}: {e}", acp.display());
            std::process::exit(1);
        }
    }
}
