//! A compatibility verdict between two versions of the kv schema, as `openagents-codegen compat
//! OLD NEW` gives it (here through the library): a new optional params member is compatible, a
//! new member in the `changed` notification old clients read breaks them, a `Value` kind old
//! clients do not know breaks them, and a params member made required breaks old clients that
//! leave it out.

use std::path::{Path, PathBuf};

use openagents_codegen::Config;
use openagents_codegen::compat::{self, Direction, Verdict};
use serde_json::{Value, json};

fn schema() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("schema")
}

/// The kv schema changed by `change`, written to a folder of its own.
fn next_version(name: &str, change: impl FnOnce(&mut Value)) -> PathBuf {
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(schema().join("kv.json")).expect("kv.json")).expect("JSON");
    change(&mut doc);
    let dir = std::env::temp_dir().join(format!("kv-compat-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a folder");
    std::fs::write(dir.join("kv.json"), serde_json::to_string_pretty(&doc).expect("JSON")).expect("written");
    dir
}

/// Each finding as `(verdict, direction, pointer)`.
fn verdict(new: &Path) -> Vec<(Verdict, Direction, String)> {
    let old = Config::new().schema_dir(schema()).load().expect("kv 1").1;
    let new = Config::new().schema_dir(new).load().expect("kv 2").1;
    compat::compare(&old, &new).findings.into_iter().map(|f| (f.verdict, f.direction, f.pointer)).collect()
}

#[test]
fn the_same_schema_has_no_findings() {
    let same = next_version("same", |_| {});
    assert_eq!(verdict(&same), []);
}

#[test]
fn an_optional_params_member_is_compatible() {
    let v2 = next_version("ttl", |d| {
        d["$defs"]["PutParams"]["properties"]["ttl_seconds"] = json!({"type": "integer", "minimum": 1, "description": "Forget the entry after this long."});
    });
    let found = verdict(&v2);
    assert!(!found.is_empty() && found.iter().all(|(v, _, _)| *v == Verdict::Compatible), "{found:?}");
    assert!(found.iter().any(|(_, d, p)| *d == Direction::Input && p.ends_with("/PutParams/properties/ttl_seconds")), "{found:?}");
}

#[test]
fn what_old_clients_read_and_what_they_send_are_judged_each_way() {
    let v2 = next_version("breaking", |d| {
        // The `changed` notification the server sends gains a required member.
        d["$defs"]["Changed"]["required"].as_array_mut().expect("required").push(json!("by"));
        d["$defs"]["Changed"]["properties"]["by"] = json!({"type": "string"});
        // A value kind old clients cannot read.
        d["$defs"]["Value"]["oneOf"].as_array_mut().expect("oneOf").push(json!({
            "title": "Bytes", "type": "object", "additionalProperties": false, "required": ["kind", "base64"],
            "properties": {"kind": {"const": "bytes"}, "base64": {"type": "string"}}
        }));
        // `if_version` becomes required: old clients that leave it out are refused.
        d["$defs"]["PutParams"]["required"].as_array_mut().expect("required").push(json!("if_version"));
    });
    let found = verdict(&v2);
    let breaking = |dir: Direction, end: &str| found.iter().any(|(v, d, p)| *v == Verdict::Breaking && *d == dir && p.contains(end));
    assert!(breaking(Direction::Output, "/Changed/properties/by"), "the notification old clients read: {found:?}");
    assert!(breaking(Direction::Output, "/Value/oneOf"), "an entry's value old clients read: {found:?}");
    assert!(breaking(Direction::Input, "/PutParams/properties/if_version"), "the params old clients send: {found:?}");
}
