//! The server crate's modules import one way: each may use only the modules of earlier layers
//! (the order `lib.rs` states). The transports (`http`, `ws`, `stdio`, `web`) are one layer and
//! never import each other; only `server` composes them. Like rust-analyzer's tidy tests, this
//! reads the source: every `crate::<module>` path in `src/*.rs`, in a `use` or inline, is checked,
//! and a violation names the file, the line and the layer it reaches into.

use std::path::Path;

/// The layers, in order. A module may import modules of earlier layers only (and itself).
const LAYERS: &[&[&str]] = &[
    &["projection"],
    &["store"],
    &["events"],
    &["agent"],
    &["history"],
    &["auth"],
    &["metrics"],
    &["decode"],
    &["bridge"],
    &["engine"],
    &["connection"],
    &["jsonrpc"],
    &["listener"],
    &["http", "ws", "stdio", "web"],
    &["server"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// Every `crate::<name>` a line mentions, `use crate::{a, b}` included.
fn crate_paths(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let name: String = part.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !name.is_empty() {
                    out.push(name);
                }
            }
        } else {
            let name: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
        rest = after;
    }
    out
}

/// The violations in `text`, a file of module `module`: `file:line: ...` for each import of a
/// later layer (or of a sibling in the same layer).
fn violations(file: &str, module: &str, text: &str) -> Vec<String> {
    let Some(own) = layer_of(module) else {
        return vec![format!("{file}: module `{module}` is in no layer: add it to LAYERS (and to lib.rs's order)")];
    };
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for target in crate_paths(code) {
            if target == module {
                continue;
            }
            match layer_of(&target) {
                Some(l) if l < own => {}
                Some(l) => out.push(format!(
                    "{file}:{}: `{module}` (layer {own}) imports `{target}` (layer {l}), which is {}: {}",
                    n + 1,
                    if l == own { "a sibling in its own layer" } else { "a later layer" },
                    line.trim()
                )),
                // Not a module (a re-exported item at the crate root): fine.
                None => {}
            }
        }
    }
    out
}

#[test]
fn every_module_imports_only_earlier_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    let mut modules = 0;
    for entry in std::fs::read_dir(&src).expect("src is readable") {
        let path = entry.expect("an entry").path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else { continue };
        if path.extension().is_none_or(|e| e != "rs") || name == "lib" {
            continue;
        }
        modules += 1;
        let text = std::fs::read_to_string(&path).expect("readable");
        found.extend(violations(&format!("src/{name}.rs"), name, &text));
    }
    assert!(modules >= 15, "found only {modules} modules in {}", src.display());
    assert!(found.is_empty(), "imports against the layers:\n{}", found.join("\n"));
}

#[test]
fn the_check_names_an_import_of_a_later_layer_or_a_sibling() {
    // The shapes this crate had before its layers were straightened out.
    let bridge = "use crate::events::EventHub;\n    stuck_timeout: Mutex::new(crate::ws::WS_STUCK_TIMEOUT),\n";
    let v = violations("src/bridge.rs", "bridge", bridge);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].starts_with("src/bridge.rs:2: `bridge`") && v[0].contains("imports `ws`") && v[0].contains("a later layer"), "{v:?}");
    let ws = "use crate::http::{AppAuth, reject_unauthorized};\n";
    let v = violations("src/ws.rs", "ws", ws);
    assert!(v.len() == 1 && v[0].contains("a sibling in its own layer"), "{v:?}");
    let engine = "use crate::{agent, jsonrpc};\n";
    let v = violations("src/engine.rs", "engine", engine);
    assert!(v.len() == 1 && v[0].contains("imports `jsonrpc`"), "{v:?}");
    // Comments do not count; earlier layers are fine.
    assert!(violations("src/http.rs", "http", "use crate::listener::Access; // not crate::ws\n").is_empty());
}
