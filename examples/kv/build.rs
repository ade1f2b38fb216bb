//! Generates the kv protocol (types, validators, the `service` module) from `schema/` into
//! `OUT_DIR`, as any crate using openagents-codegen from a build script does.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let schema = manifest.join("schema");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("kv.rs");
    println!("cargo:rerun-if-changed={}", schema.display());
    let config = openagents_codegen::Config::new().schema_dir(&schema).service(true);
    if let Err(e) = config.write_rust(&out) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
