//! Generates the Rust of the two vendored schemas the benchmarks use (`tests/third-party-schemas/`)
//! into `OUT_DIR/<module>.rs`, for the runtime `::openagents_rt` (the `openagents-rt` crate).

use std::path::PathBuf;

/// Each schema file, the module it is generated into, and whether free-form objects are kept as
/// text (`Config::objects_as_text`).
const SCHEMAS: &[(&str, &str, bool)] = &[
    ("acp-v1.schema.json", "acp_v1", true),
    ("mcp-2026-07-28.schema.json", "mcp_2026_07_28", true),
    ("acp-v1.schema.json", "acp_v1_maps", false),
    ("mcp-2026-07-28.schema.json", "mcp_2026_07_28_maps", false),
];

fn main() {
    let manifest = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    for &(file, module, objects_as_text) in SCHEMAS {
        let path = manifest.join("../third-party-schemas").join(file);
        println!("cargo:rerun-if-changed={}", path.display());
        let code = match openagents_codegen::Config::new()
            .schema_dir(&path)
            .objects_as_text(objects_as_text)
            .generate_rust()
        {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {}: {e}", path.display());
                std::process::exit(1);
            }
        };
        if let Err(e) = std::fs::write(out.join(format!("{module}.rs")), code) {
            eprintln!("error: cannot write {module}.rs: {e}");
            std::process::exit(1);
        }
    }
}
