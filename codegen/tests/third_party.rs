//! The schemas real protocols publish (ACP v1, MCP 2026-07-28 and 2025-11-25), vendored unchanged
//! under `tests/third-party-schemas/`: each file is still the one its README row names (its
//! SHA-256), and `check` refuses each (today's subset) with every refusal at once, each naming
//! the vendored file and a pointer that exists in it, counted by keyword as `CONFORMANCE.md`'s
//! "Published schemas" records.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use openagents_codegen::error::MAX_SHOWN_REFUSALS;
use openagents_codegen::{Config, Refusals};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Each vendored file with the SHA-256 of its bytes as published (the README's table).
const VENDORED: &[(&str, &str)] = &[
    ("acp-v1.schema.json", "0d0b1ca83c4872e5473f68926a894c7a8203b59b118e2a79bfe43dd76fbcbc1a"),
    ("mcp-2026-07-28.schema.json", "ef70b61f99b6d2e5e3b46863822eab08dff6a45bedc7a08914e0e5b133f40203"),
    ("mcp-2025-11-25.schema.json", "268a5f82ba70fd7e4b6dc4aa1e64f116f74b4d0edcb69dc046829c79dd4e97e7"),
];

/// The folder of the vendored copies, inside the repository.
fn vendored_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/third-party-schemas")
}

fn read(file: &str) -> Vec<u8> {
    let path = vendored_dir().join(file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: cannot read the vendored schema: {e}", path.display()))
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn each_vendored_schema_is_the_published_file() {
    let mut changed = Vec::new();
    for (file, expected) in VENDORED {
        let got = sha256_hex(&read(file));
        if got != *expected {
            changed.push(format!("tests/third-party-schemas/{file}: SHA-256 {got}, but the published file's is {expected}"));
        }
    }
    assert!(changed.is_empty(), "a vendored schema is not the published file byte for byte (copy it again unchanged, or record a new upstream version in its README):\n{}", changed.join("\n"));
}

#[test]
fn the_readme_records_each_file_and_its_hash() {
    let readme = String::from_utf8(read("README.md")).expect("README.md is UTF-8");
    for (file, hash) in VENDORED {
        let row = readme.lines().find(|l| l.starts_with(&format!("| `{file}` |")));
        let row = row.unwrap_or_else(|| panic!("tests/third-party-schemas/README.md has no row for `{file}`"));
        assert!(row.contains(&format!("`{hash}`")), "tests/third-party-schemas/README.md: the row of `{file}` does not give its SHA-256 {hash}");
    }
}

/// The refusals `check` (its library entry, [`Config::load`]) finds in one vendored file.
fn refusals(file: &str) -> Refusals {
    match Config::new().schema_dir(vendored_dir().join(file)).load() {
        Ok((_, space)) => panic!("{file}: accepted ({} types), but it uses keywords outside the subset", space.types.len()),
        Err(r) => r,
    }
}

/// `CONFORMANCE.md`'s "Published schemas" table: for each file (a column), keyword to count.
fn recorded_counts() -> BTreeMap<String, BTreeMap<String, usize>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../CONFORMANCE.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let section = text.split("\n## Published schemas\n").nth(1).expect("CONFORMANCE.md has a `## Published schemas` section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let cells = |line: &str| -> Vec<String> { line.trim().trim_matches('|').split('|').map(|c| c.trim().trim_matches('`').to_owned()).collect() };
    let mut rows = section.lines().filter(|l| l.trim_start().starts_with('|'));
    let header = cells(rows.next().expect("the section has a table"));
    let mut out: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for row in rows.skip(1) {
        let row = cells(row);
        if row[0] == "**total**" {
            continue;
        }
        for (file, n) in header.iter().zip(&row).skip(1) {
            let n: usize = n.parse().unwrap_or_else(|_| panic!("CONFORMANCE.md: `{n}` (keyword `{}`, {file}) is not a count", row[0]));
            if n > 0 {
                out.entry(file.clone()).or_default().insert(row[0].clone(), n);
            }
        }
    }
    out
}

#[test]
fn check_refuses_each_published_schema_with_every_refusal_at_once() {
    let recorded = recorded_counts();
    for (file, _) in VENDORED {
        let doc: Value = serde_json::from_slice(&read(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let r = refusals(file);
        assert!(r.len() > 1, "{file}: only one refusal ({}); check must report every one at once", r.first());
        for e in r.iter() {
            assert_eq!(e.file, *file, "a refusal names another file than the one checked: {e}");
            let Some(at) = doc.pointer(&e.pointer) else { panic!("{file}: the refusal's pointer `{}` is nowhere in the file: {e}", e.pointer) };
            if e.message.contains("is outside the supported subset") {
                assert!(at.get(&e.keyword).is_some(), "{file}: `{}` has no keyword `{}`: {e}", e.pointer, e.keyword);
            }
        }
        let counts = r.count_by_keyword();
        let expected = recorded.get(*file).cloned().unwrap_or_default();
        assert_eq!(counts, expected, "{file}: the refusals by keyword (left) are not what CONFORMANCE.md's \"Published schemas\" records (right)");
    }
}

#[test]
fn the_check_command_prints_the_first_refusals_in_full_then_how_many_more() {
    let file = "acp-v1.schema.json";
    let total = refusals(file).len();
    assert!(total > MAX_SHOWN_REFUSALS, "{file} has {total} refusals; this test needs more than {MAX_SHOWN_REFUSALS}");
    let out = Command::new(env!("CARGO_BIN_EXE_openagents-codegen"))
        .args(["check", "--schema"])
        .arg(vendored_dir().join(file))
        .output()
        .expect("openagents-codegen runs");
    assert_eq!(out.status.code(), Some(1), "check must fail on a refused schema");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.first().copied(), Some(format!("openagents-codegen: {total} refusals:").as_str()), "{stderr}");
    let shown = lines.iter().filter(|l| l.starts_with(&format!("{file}#"))).count();
    assert_eq!(shown, MAX_SHOWN_REFUSALS, "{stderr}");
    assert_eq!(lines.last().copied(), Some(format!("and {} more", total - MAX_SHOWN_REFUSALS).as_str()), "{stderr}");
    assert_eq!(lines.len(), MAX_SHOWN_REFUSALS + 2, "{stderr}");
}
