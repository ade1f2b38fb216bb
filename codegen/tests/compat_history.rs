//! The history gate: the schema must stay compatible with every frozen protocol version of its
//! major version (`schema/history/<version>/bundle.json`), and every frozen bundle must be the one
//! its `schema/CHANGELOG.md` entry records. A breaking change needs a new major version.

use std::path::{Path, PathBuf};

use openagents_codegen::history;
use serde_json::{Value, json};

fn schema_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../schema")
}

#[test]
fn the_schema_is_compatible_with_every_frozen_version() {
    let outcome = history::gate(&schema_dir()).unwrap_or_else(|e| panic!("the schema or a frozen bundle does not load: {e}"));
    assert!(outcome.ok, "the protocol history gate failed:\n{}", outcome.text);
}

/// A throwaway copy of `schema/` (files, history and changelog) to change.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("openagents-gate-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        copy_dir(&schema_dir(), &dir);
        Scratch(dir)
    }

    fn edit(&self, file: &str, f: impl FnOnce(&mut Value)) {
        let path = self.0.join(file);
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("readable")).expect("JSON");
        f(&mut v);
        std::fs::write(&path, serde_json::to_string_pretty(&v).expect("serializes")).expect("writable");
    }

    fn gate(&self) -> history::GateOutcome {
        history::gate(&self.0).unwrap_or_else(|e| panic!("loads: {e}"))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("creatable");
    for entry in std::fs::read_dir(from).expect("readable").flatten() {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).expect("copyable");
        }
    }
}

fn set_version(s: &Scratch, v: &str) {
    s.edit("RpcRequest.json", |d| d["x-constants"]["PROTOCOL_VERSION"]["value"] = json!(v));
}

#[test]
fn additions_pass_the_gate() {
    let s = Scratch::new("additive");
    s.edit("RuntimeStatus.json", |d| d["properties"]["uptime_ms"] = json!({"type": "integer", "minimum": 0}));
    s.edit("ServerEvent.json", |d| {
        d["$defs"]["RuntimeEvent"]["oneOf"].as_array_mut().expect("branches").push(json!({
            "title": "ToolCalled", "type": "object", "required": ["type", "tool"],
            "properties": {"type": {"const": "tool_called"}, "tool": {"type": "string"}}
        }))
    });
    s.edit("RuntimeSubmitError.json", |d| {
        d["$defs"]["ErrorCode"]["enum"].as_array_mut().expect("values").push(json!("rate_limited"));
        d["$defs"]["ErrorCode"]["x-enum"]["rate_limited"] = json!({"retryable": true, "rpc_code": -32099, "description": "Slow down."});
    });
    s.edit("RpcRequest.json", |d| {
        let branches = d["oneOf"].as_array_mut().expect("branches");
        let mut ping = branches[2].clone();
        ping["title"] = json!("Ping");
        ping["properties"]["method"] = json!({"const": "ping"});
        branches.push(ping);
    });
    let outcome = s.gate();
    assert!(outcome.ok, "additions must pass:\n{}", outcome.text);
    let request: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.0.join("RpcRequest.json")).expect("readable")).expect("JSON");
    let newest = request["x-constants"]["PROTOCOL_VERSION"]["value"].as_str().expect("a version").to_owned();
    let note = format!("has changed since {newest} was frozen");
    assert!(outcome.text.contains(&note), "the gate notes unreleased changes since the newest version:\n{}", outcome.text);
}

#[test]
fn a_breaking_change_fails_the_gate_until_it_is_a_new_major_version() {
    let s = Scratch::new("breaking");
    s.edit("RuntimeStatus.json", |d| {
        d["properties"].as_object_mut().expect("properties").remove("subscribers");
        d["required"].as_array_mut().expect("required").retain(|v| v != "subscribers");
    });
    let outcome = s.gate();
    assert!(!outcome.ok, "removing a required status field must fail the gate");
    insta::assert_snapshot!("gate_failure_required_status_field_removed", outcome.text);

    // The fix the message asks for: a new major version, frozen, with a changelog entry.
    set_version(&s, "2.0.0");
    let outcome = s.gate();
    assert!(!outcome.ok && outcome.text.contains("major version 2 has no frozen bundle"), "{}", outcome.text);
    let (_, digest) = history::freeze(&s.0, "2.0.0", false).expect("freezes");
    let outcome = s.gate();
    assert!(!outcome.ok && outcome.text.contains("no `## 2.0.0` entry"), "{}", outcome.text);
    let mut log = std::fs::read_to_string(s.0.join("CHANGELOG.md")).expect("changelog");
    log.push_str(&format!("\n## 2.0.0\n\nDigest: `{digest}`\n\n- `status` no longer reports `subscribers`.\n"));
    std::fs::write(s.0.join("CHANGELOG.md"), log).expect("writable");
    let outcome = s.gate();
    assert!(outcome.ok, "a frozen new major version passes:\n{}", outcome.text);
    assert!(outcome.text.contains("schema/ against 1.0.0"), "older majors are still reported:\n{}", outcome.text);

    // Freezing twice is refused; a version that does not match PROTOCOL_VERSION is refused.
    assert!(history::freeze(&s.0, "2.0.0", false).is_err());
    assert!(history::freeze(&s.0, "3.0.0", false).unwrap_err().contains("PROTOCOL_VERSION 2.0.0"));
}

#[test]
fn a_frozen_bundle_never_changes() {
    let s = Scratch::new("tampered");
    s.edit("history/1.0.0/bundle.json", |d| d["$defs"]["Turn"]["description"] = json!("edited after the release"));
    let outcome = s.gate();
    assert!(!outcome.ok, "an edited frozen bundle must fail the gate");
    assert!(outcome.text.contains("a frozen bundle never changes"), "{}", outcome.text);
}

#[test]
fn the_version_only_moves_forward() {
    let s = Scratch::new("backwards");
    set_version(&s, "0.9.0");
    let outcome = s.gate();
    assert!(!outcome.ok && outcome.text.contains("only moves forward"), "{}", outcome.text);
}

#[test]
fn versions_and_changelog_entries_parse() {
    use history::Version;
    assert_eq!(Version::parse("1.2.3"), Some(Version { major: 1, minor: 2, patch: 3 }));
    for bad in ["1.2", "1.2.3.4", "01.2.3", "1.2.x", "", "v1.2.3"] {
        assert_eq!(Version::parse(bad), None, "{bad}");
    }
    let log = "## 1.1.0\n\nDigest: `abc`\n\n## 1.0.0 (first)\nDigest: def\n";
    assert_eq!(history::changelog_digest(log, Version { major: 1, minor: 1, patch: 0 }).as_deref(), Some("abc"));
    assert_eq!(history::changelog_digest(log, Version { major: 1, minor: 0, patch: 0 }).as_deref(), Some("def"));
    assert_eq!(history::changelog_digest(log, Version { major: 2, minor: 0, patch: 0 }), None);
}
