//! The protocol-version commands of `openagents-codegen` (over [`openagents_codegen::history`]
//! and [`openagents_codegen::compat`]): `digest`, `openrpc`, `compat`, `gate`
//! and `freeze`. Exit codes: 0 fine, 1 something breaks (or the gate fails), 2 unusable input.

use std::path::{Path, PathBuf};
use std::process::exit;

use anyhow::Context;
use openagents_codegen::compat::{self, Verdict};
use openagents_codegen::{Config, history};

const USAGE: &str = "usage:
  openagents-codegen digest [--schema DIR]
  openagents-codegen openrpc [--schema DIR] [--out FILE]
  openagents-codegen compat [OLD NEW]        OLD and NEW: a schema folder, a bundle.json, or a schema/history/<version> folder;
                                             without them: the newest version in schema/history/ against schema/
  openagents-codegen gate [--schema DIR]
  openagents-codegen freeze VERSION [--schema DIR] [--force]";

struct Args {
    schema: PathBuf,
    out: Option<PathBuf>,
    force: bool,
    positional: Vec<String>,
}

fn parse(args: Vec<String>) -> anyhow::Result<Args> {
    let mut out = Args { schema: PathBuf::from("schema"), out: None, force: false, positional: Vec::new() };
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--schema" => out.schema = it.next().with_context(|| format!("--schema needs a value\n{USAGE}"))?.into(),
            "--out" => out.out = Some(it.next().with_context(|| format!("--out needs a value\n{USAGE}"))?.into()),
            "--force" => out.force = true,
            s if s.starts_with("--") => anyhow::bail!("unknown argument `{s}`\n{USAGE}"),
            _ => out.positional.push(a),
        }
    }
    Ok(out)
}

/// Runs one of the protocol-version commands.
pub fn run(command: &str, args: Vec<String>) -> anyhow::Result<()> {
    let args = parse(args)?;
    let unusable = |e: &dyn std::fmt::Display| -> ! {
        eprintln!("openagents-codegen {command}: {e}");
        exit(2)
    };
    let config = openagents_codegen::Config::new().schema_dir(&args.schema);
    match command {
        "digest" => {
            let digest = config.digest().unwrap_or_else(|e| unusable(&e));
            println!("{digest}");
        }
        "openrpc" => {
            let doc = config.generate_openrpc().unwrap_or_else(|e| unusable(&e));
            let text = serde_json::to_string_pretty(&doc)? + "\n";
            match &args.out {
                Some(path) => std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?,
                None => print!("{text}"),
            }
        }
        "compat" => {
            let (old, new) = match args.positional.as_slice() {
                [] => {
                    let history = args.schema.join("history");
                    let frozen = history::frozen_versions(&history).unwrap_or_else(|e| unusable(&e));
                    let Some(newest) = frozen.last() else { unusable(&format!("{} holds no frozen version to compare with", history.display())) };
                    (newest.bundle.clone(), args.schema.clone())
                }
                [old, new] => (PathBuf::from(old), PathBuf::from(new)),
                _ => unusable(&format!("compat takes OLD and NEW, or nothing\n{USAGE}")),
            };
            let (_, old_space) = Config::new().schema_dir(&old).load().unwrap_or_else(|e| unusable(&e));
            let (_, new_space) = Config::new().schema_dir(&new).load().unwrap_or_else(|e| unusable(&e));
            let report = compat::compare(&old_space, &new_space);
            print!("{report}");
            println!("compat {} -> {}: {}", show(&old), show(&new), report.summary());
            if report.count(Verdict::Breaking) > 0 {
                exit(1);
            }
        }
        "gate" => {
            let outcome = history::gate(&args.schema).unwrap_or_else(|e| unusable(&e));
            print!("{}", outcome.text);
            if !outcome.ok {
                exit(1);
            }
        }
        "freeze" => {
            let [version] = args.positional.as_slice() else { unusable(&format!("freeze takes one VERSION\n{USAGE}")) };
            let (file, digest) = history::freeze(&args.schema, version, args.force).unwrap_or_else(|e| unusable(&e));
            println!("froze {}", file.display());
            println!("add this entry to {}:\n", args.schema.join("CHANGELOG.md").display());
            println!("## {version}\n\nDigest: `{digest}`\n\n- (what changed, and for a major version every breaking change and what clients must do)");
        }
        _ => anyhow::bail!("{USAGE}"),
    }
    Ok(())
}

fn show(p: &Path) -> String {
    p.display().to_string()
}
