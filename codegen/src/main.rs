//! The `openagents-codegen` command line: generate, bundle and check the schema.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

mod versions;

const USAGE: &str = "usage:
  openagents-codegen rust [--schema DIR] [--runtime PATH] [--out FILE]   generated Rust
  openagents-codegen bundle [--schema DIR] [--out FILE]                  the bundled schema
  openagents-codegen check [--schema DIR|FILE]                           load and lower only; every refusal at once
  openagents-codegen digest [--schema DIR]                               the schema digest (SHA-256 of the canonical bundle)
  openagents-codegen openrpc [--schema DIR] [--out FILE]                 the OpenRPC 1.3 document
  openagents-codegen compat [OLD NEW]                                    what changed between two schemas, and whom it breaks
  openagents-codegen gate [--schema DIR]                                 the schema against every version in schema/history/
  openagents-codegen freeze VERSION [--schema DIR] [--force]             freeze the schema as schema/history/VERSION/bundle.json
  openagents-codegen typescript [--schema DIR|BUNDLE] --out-dir DIR      generated TypeScript modules
  openagents-codegen python [--schema DIR|BUNDLE] --out-dir DIR          generated Python modules";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("openagents-codegen: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let command = args.next().unwrap_or_default();
    if matches!(command.as_str(), "compat" | "gate" | "freeze" | "openrpc" | "digest") {
        return versions::run(&command, args.collect());
    }
    let mut schema = PathBuf::from("schema");
    let mut out: Option<PathBuf> = None;
    let mut out_dir: Option<PathBuf> = None;
    let mut runtime = "::openagents_protocol::rt".to_owned();
    while let Some(a) = args.next() {
        let mut value = || args.next().with_context(|| format!("{a} needs a value\n{USAGE}"));
        match a.as_str() {
            "--schema" => schema = value()?.into(),
            "--out" => out = Some(value()?.into()),
            "--out-dir" => out_dir = Some(value()?.into()),
            "--runtime" => runtime = value()?,
            other => anyhow::bail!("unknown argument `{other}`\n{USAGE}"),
        }
    }
    let config = openagents_codegen::Config::new().schema_dir(&schema).runtime(runtime);
    if command == "python" {
        let dir = out_dir.with_context(|| format!("python needs --out-dir DIR\n{USAGE}"))?;
        return write_modules(&dir, config.generate_python()?, openagents_codegen::python::HEADER);
    }
    if command == "typescript" {
        let dir = out_dir.with_context(|| format!("typescript needs --out-dir DIR\n{USAGE}"))?;
        return write_modules(&dir, config.generate_typescript()?, openagents_codegen::typescript::HEADER);
    }
    let text = match command.as_str() {
        "rust" => config.generate_rust()?,
        "bundle" => {
            let (docs, _) = config.load()?;
            serde_json::to_string_pretty(&docs.bundle())? + "\n"
        }
        "check" => {
            let (_, space) = config.load()?;
            format!("{} types, {} roots, {} constants: ok\n", space.types.len(), space.roots.len(), space.constants.len())
        }
        _ => anyhow::bail!("{USAGE}"),
    };
    match out {
        Some(path) => std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(())
}

/// Writes generated modules into `dir`, removing the generated modules (files whose first line is
/// `header`) that the schema no longer produces.
fn write_modules(dir: &std::path::Path, files: Vec<(String, String)>, header: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        let generated = std::fs::read_to_string(&path).is_ok_and(|t| t.lines().next() == Some(header));
        if generated && !files.iter().any(|(n, _)| *n == name) {
            std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
        }
    }
    for (name, text) in files {
        let path = dir.join(&name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
