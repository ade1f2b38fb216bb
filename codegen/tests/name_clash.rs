//! Methods named as types (`tests/clash/shop.schema.json`): a method union's branch titled `Item`
//! whose result is the `$defs` type `Item`, one whose params are `Item`, branches titled `Option`
//! and `String`, `x-side` methods whose markers are `Result` and `Some`, and types named as what
//! the generated code needs itself (`Method`, `Vec`, `RawValue`), aliases whose checkers would be
//! named as the entry points (`Json`, `Document`), and properties whose Rust names clash (`self`
//! and `Self`). The Rust generated with and without the
//! service module compiles without a warning (`cargo check`, offline, into the shared target folder),
//! each marker names the schema's types, and no language declares a name twice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use openagents_codegen::Config;

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn shop() -> Config {
    Config::new().schema_dir(manifest().join("tests/clash/shop.schema.json"))
}

/// A crate holding the generated Rust, as a user's would: `plain` without the service module,
/// `served` with it, and compile-time checks that each marker's types are the schema's.
const LIB_RS: &str = r#"
#![deny(warnings)]
pub mod plain { include!("plain.rs"); }
pub mod served { include!("served.rs"); }

/// `<M as RpcMethod>::Params` and `::Result` are exactly these types (a marker that named itself,
/// or another marker, would not compile here).
macro_rules! marker {
    ($m:ty, $params:ty, $result:ty) => {
        const _: fn(<$m as openagents_rt::RpcMethod>::Params) -> $params = |x| x;
        const _: fn(<$m as openagents_rt::RpcMethod>::Result) -> $result = |x| x;
    };
}

marker!(plain::methods::Item, plain::Lookup, plain::Item);
marker!(plain::methods::Lookup, plain::Item, plain::Lookup);
marker!(plain::methods::Option, Option<plain::Vec2>, Vec<plain::Method2>);
marker!(plain::methods::String, plain::RawValue, String);
marker!(plain::editor_side::Result, plain::ResultRequest, plain::ResultResponse);
marker!(plain::editor_side::Some, plain::SomeRequest, plain::SomeResponse);
marker!(served::methods::Item, served::Lookup, served::Item);
marker!(served::methods::String, served::RawValue, String);

/// The service takes the schema's `RawValue` as the params of `string`.
pub fn string_params(m: served::Method) -> Option<served::RawValue> {
    match m {
        served::Method::String(p) => Some(p),
        _ => None,
    }
}
"#;

#[test]
fn methods_named_as_types_compile_with_and_without_the_service() {
    let plain = shop().generate_rust().expect("generates without the service");
    let served = shop().service(true).generate_rust().expect("generates with the service");
    let dir = std::env::temp_dir().join(format!("openagents-codegen-clash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).expect("temp crate folder");
    let crates = manifest().join("../crates");
    let path = |p: PathBuf| p.to_str().expect("utf-8 path").replace('\\', "/");
    let cargo_toml = format!(
        "[package]\nname = \"clash-check\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n[dependencies]\nopenagents-rt = {{ path = \"{}\" }}\nopenagents-rpc = {{ path = \"{}\" }}\nserde = {{ version = \"1\", features = [\"derive\"] }}\nserde_json = {{ version = \"1\", features = [\"raw_value\"] }}\n\n[workspace]\n",
        path(crates.join("rt")),
        path(crates.join("rpc")),
    );
    std::fs::write(dir.join("Cargo.toml"), cargo_toml).expect("write Cargo.toml");
    // The workspace's lock file: the same versions as every other crate here, found offline.
    std::fs::copy(manifest().join("../Cargo.lock"), dir.join("Cargo.lock")).expect("copy Cargo.lock");
    std::fs::write(dir.join("src/lib.rs"), LIB_RS).expect("write lib.rs");
    std::fs::write(dir.join("src/plain.rs"), &plain).expect("write plain.rs");
    std::fs::write(dir.join("src/served.rs"), &served).expect("write served.rs");
    // The workspace's target folder (this test binary's `CARGO_TARGET_TMPDIR` is `<target>/tmp`),
    // so the dependencies compiled for the workspace are reused.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().expect("the target folder");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["check", "--offline", "--quiet", "--message-format", "short"])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(&dir)
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the generated Rust does not compile (crate kept in {}):\n{stderr}", dir.display());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn methods_named_as_types_keep_their_names() {
    let rust = shop().service(true).generate_rust().expect("generates");
    // A marker is named as its variant, whatever the types are called; it names them from `super`.
    let methods = &rust[rust.find("pub mod methods {").expect("a methods module")..];
    let methods = &methods[..methods.find("\n}\n").expect("its end")];
    for want in ["pub struct Item;", "type Params = super::Lookup;", "type Result = super::Item;", "pub struct Option;", "type Params = ::std::option::Option<super::Vec2>;", "type Result = ::std::vec::Vec<super::Method2>;", "pub struct String;", "type Result = ::std::string::String;"] {
        assert!(methods.contains(want), "`{want}` in the methods module:\n{methods}");
    }
    // The enum of calls keeps its name; the types named as it, or as a prelude type, are numbered.
    for want in ["pub enum Method {", "pub struct Method2 {", "pub struct Vec2 {", "pub struct RawValue {", "Item(Lookup),", "Lookup(Item),"] {
        assert!(rust.contains(want), "`{want}` in the Rust");
    }
    assert!(!rust.contains("use serde_json::value::RawValue"), "the service module names the JSON text type by its path");

    // Python and TypeScript: every class, interface and type alias declared once, with the same
    // names as in Rust.
    let declared = |files: &[(String, String)], prefixes: &[&str]| -> BTreeMap<String, usize> {
        let mut seen = BTreeMap::new();
        for (name, text) in files {
            for line in text.lines() {
                let Some(rest) = prefixes.iter().find_map(|p| line.strip_prefix(p)) else { continue };
                let id: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                *seen.entry(format!("{name}: {id}")).or_insert(0) += 1;
            }
        }
        seen
    };
    let py = shop().generate_python().expect("Python");
    let classes = declared(&py, &["class "]);
    let ts = shop().generate_typescript().expect("TypeScript");
    let types = declared(&ts, &["export interface ", "export type ", "export class ", "export abstract class "]);
    for (what, seen) in [("Python", &classes), ("TypeScript", &types)] {
        let twice: Vec<&String> = seen.iter().filter(|(_, n)| **n > 1).map(|(k, _)| k).collect();
        assert!(twice.is_empty(), "{what} declares these twice: {twice:?}");
    }
    for name in ["Item", "Lookup", "Method2", "Vec2", "RawValue", "ShopRequestItem", "ShopRequestOption"] {
        assert!(classes.contains_key(&format!("models.py: {name}")), "Python class {name}: {classes:?}");
        assert!(types.contains_key(&format!("types.ts: {name}")), "TypeScript type {name}: {types:?}");
    }
}
