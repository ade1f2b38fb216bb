//! The `openagents-codegen` command line: generate, bundle and check the schema.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

const USAGE: &str = "usage:
  openagents-codegen rust [--schema DIR] [--runtime PATH] [--out FILE]   generated Rust
  openagents-codegen bundle [--schema DIR] [--out FILE]                  the bundled schema
  openagents-codegen check [--schema DIR]                                load and lower only";

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
    let mut schema = PathBuf::from("schema");
    let mut out: Option<PathBuf> = None;
    let mut runtime = "::openagents_protocol::rt".to_owned();
    while let Some(a) = args.next() {
        let mut value = || args.next().with_context(|| format!("{a} needs a value\n{USAGE}"));
        match a.as_str() {
            "--schema" => schema = value()?.into(),
            "--out" => out = Some(value()?.into()),
            "--runtime" => runtime = value()?,
            other => anyhow::bail!("unknown argument `{other}`\n{USAGE}"),
        }
    }
    let config = openagents_codegen::Config::new().schema_dir(&schema).runtime(runtime);
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
