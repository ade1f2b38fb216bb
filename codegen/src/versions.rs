//! The protocol-version commands of `openagents-codegen` (over [`openagents_codegen::history`]
//! and [`openagents_codegen::compat`]): `digest`, `openrpc`, `compat`, `gate`
//! and `freeze`. Exit codes: 0 fine, 1 something breaks (or the gate fails), 2 unusable input.

use std::path::{Path, PathBuf};
use std::process::exit;

use anyhow::Context;
use openagents_codegen::compat::{self, Verdict};
use openagents_codegen::{Config, history};

/// Reports input `command` cannot use, and exits 2.
fn unusable(command: &str, e: &dyn std::fmt::Display) -> ! {
    eprintln!("openagents-codegen {command}: {e}");
    exit(2)
}

/// `digest`: prints the schema digest.
pub fn digest(config: &Config) -> anyhow::Result<()> {
    let digest = config.digest().unwrap_or_else(|e| unusable("digest", &e));
    println!("{digest}");
    Ok(())
}

/// `openrpc`: prints the OpenRPC document, or writes it to `out`.
pub fn openrpc(config: &Config, out: Option<&Path>) -> anyhow::Result<()> {
    let doc = config.generate_openrpc().unwrap_or_else(|e| unusable("openrpc", &e));
    let text = serde_json::to_string_pretty(&doc)? + "\n";
    match out {
        Some(path) => std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(())
}

/// `compat`: compares `old_new`, or without it the newest version in `schema`/history/ with
/// `schema`; exits 1 when a change breaks.
pub fn compat(schema: &Path, old_new: Option<(PathBuf, PathBuf)>) -> anyhow::Result<()> {
    let unusable = |e: &dyn std::fmt::Display| -> ! { unusable("compat", e) };
    let (old, new) = match old_new {
        Some(pair) => pair,
        None => {
            let history = schema.join("history");
            let frozen = history::frozen_versions(&history).unwrap_or_else(|e| unusable(&e));
            let Some(newest) = frozen.last() else { unusable(&format!("{} holds no frozen version to compare with", history.display())) };
            (newest.bundle.clone(), schema.to_path_buf())
        }
    };
    let (_, old_space) = Config::new().schema_dir(&old).load().unwrap_or_else(|e| unusable(&e));
    let (_, new_space) = Config::new().schema_dir(&new).load().unwrap_or_else(|e| unusable(&e));
    let report = compat::compare(&old_space, &new_space);
    print!("{report}");
    println!("compat {} -> {}: {}", old.display(), new.display(), report.summary());
    if report.count(Verdict::Breaking) > 0 {
        exit(1);
    }
    Ok(())
}

/// `gate`: checks `schema` against every frozen version; exits 1 when the gate fails.
pub fn gate(schema: &Path) -> anyhow::Result<()> {
    let outcome = history::gate(schema).unwrap_or_else(|e| unusable("gate", &e));
    print!("{}", outcome.text);
    if !outcome.ok {
        exit(1);
    }
    Ok(())
}

/// `freeze`: freezes `schema` as `version` and prints the CHANGELOG.md entry to add.
pub fn freeze(schema: &Path, version: &str, force: bool) -> anyhow::Result<()> {
    let (file, digest) = history::freeze(schema, version, force).unwrap_or_else(|e| unusable("freeze", &e));
    println!("froze {}", file.display());
    println!("add this entry to {}:\n", schema.join("CHANGELOG.md").display());
    println!("## {version}\n\nDigest: `{digest}`\n\n- (what changed, and for a major version every breaking change and what clients must do)");
    Ok(())
}
