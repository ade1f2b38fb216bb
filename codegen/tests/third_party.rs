//! The schemas real protocols publish (ACP v1, MCP 2026-07-28 and 2025-11-25), vendored unchanged
//! under `tests/third-party-schemas/`: each file is still the one its README row names (its
//! SHA-256).

use std::path::{Path, PathBuf};

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
