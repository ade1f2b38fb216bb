//! Base URIs: `$ref`s resolved as JSON Schema 2020-12 resolves them, against the `$id` of the
//! nearest schema resource around them (RFC 3986), with embedded resources (a `$id` below a
//! file's root, as bundlers write them) and plain-name anchors (`$anchor`).
//!
//! The rest of the generator reads references of three forms only: `#/pointer`, `File.json` and
//! `File.json#/pointer` (see [`Documents::resolve_ref`]). [`resolve`] rewrites, in memory, every
//! `$ref` that these forms would read differently from what its base URI says, or not at all,
//! into the one that points at the same place; then the nested `$id`s and the `$anchor`s, which
//! have said all they had to say, go. A reference to a resource no file holds (a remote URI) is
//! left as written, for the lowering to refuse naming it.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use url::Url;

use crate::load::Documents;

/// Where a file without a `$id` of its own is, for resolving the references inside it: a file
/// `Turn.json` is `file:///openagents-schema/Turn.json`, so `Other.json` beside it is its sibling.
const FOLDER: &str = "file:///openagents-schema/";

/// The schema resources and anchors of every file, by absolute URI.
#[derive(Default)]
struct Registry {
    /// A resource's URI (no fragment) to its file and pointer.
    resources: BTreeMap<String, (String, String)>,
    /// A resource's URI and an anchor's name in it to the anchor's file and pointer.
    anchors: BTreeMap<(String, String), (String, String)>,
}

/// Rewrites the `$ref`s of `docs` that their base URIs resolve elsewhere than the three forms
/// the generator reads would, and removes the nested `$id`s and every `$anchor` (see the module).
/// Running it again changes nothing.
pub fn resolve(docs: &mut Documents) {
    let Ok(folder) = Url::parse(FOLDER) else { return };
    let mut registry = Registry::default();
    let mut bases = BTreeMap::new();
    for (name, doc) in &docs.files {
        let Ok(file) = folder.join(&encode(name)) else { continue };
        registry.resources.insert(without_fragment(&file), (name.clone(), String::new()));
        let base = match doc.get("$id").and_then(Value::as_str) {
            Some(id) if !id.starts_with('#') => file.join(id).unwrap_or(file),
            _ => file,
        };
        registry.resources.entry(without_fragment(&base)).or_insert((name.clone(), String::new()));
        collect(doc, name, "", &base, &mut registry);
        bases.insert(name.clone(), base);
    }
    let mut rewrites = Vec::new();
    for (name, doc) in &docs.files {
        if let Some(base) = bases.get(name) {
            references(doc, name, "", base, &registry, docs, &mut rewrites);
        }
    }
    for (file, pointer, reference) in rewrites {
        if let Some(Value::Object(m)) = docs.files.get_mut(&file).and_then(|d| d.pointer_mut(&pointer)) {
            m.insert("$ref".into(), Value::String(reference));
        }
    }
    docs.files.values_mut().for_each(forget);
}

/// The URI without its fragment.
fn without_fragment(u: &Url) -> String {
    let mut u = u.clone();
    u.set_fragment(None);
    u.to_string()
}

/// The base URI a schema object sets for itself and what it holds: its `$id` resolved against
/// `base`, or `base`.
fn base_of(map: &Map<String, Value>, base: &Url, root: bool) -> Url {
    match map.get("$id").and_then(Value::as_str) {
        Some(id) if !root && !id.starts_with('#') => base.join(id).unwrap_or_else(|_| base.clone()),
        _ => base.clone(),
    }
}

/// Every subschema of a schema object, with the pointer tokens that lead to it.
fn subschemas(map: &Map<String, Value>) -> Vec<(Vec<String>, &Value)> {
    let mut out = Vec::new();
    for (key, value) in map {
        match (key.as_str(), value) {
            (
                "items" | "additionalProperties" | "unevaluatedProperties" | "unevaluatedItems" | "not" | "if" | "then" | "else" | "contains" | "propertyNames"
                | "contentSchema",
                v,
            ) if v.is_object() => out.push((vec![key.clone()], v)),
            ("properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas", Value::Object(m)) => {
                out.extend(m.iter().map(|(k, v)| (vec![key.clone(), k.clone()], v)));
            }
            ("prefixItems" | "allOf" | "anyOf" | "oneOf", Value::Array(list)) => {
                out.extend(list.iter().enumerate().map(|(i, v)| (vec![key.clone(), i.to_string()], v)));
            }
            _ => {}
        }
    }
    out
}

fn child(pointer: &str, tokens: &[String]) -> String {
    tokens.iter().fold(pointer.to_owned(), |p, t| crate::error::push_pointer(&p, t))
}

/// Calls `f` with every schema object of `schema` and its pointer, wherever a schema stands
/// (never inside a `const`, `enum`, `default` or `examples` value, which are data).
pub(crate) fn each_schema<'v>(schema: &'v Value, pointer: &str, f: &mut impl FnMut(&str, &'v Map<String, Value>)) {
    let Value::Object(map) = schema else { return };
    f(pointer, map);
    for (tokens, sub) in subschemas(map) {
        each_schema(sub, &child(pointer, &tokens), f);
    }
}

/// Registers the resources (`$id`s below the root) and anchors of the schema at `pointer`.
fn collect(schema: &Value, file: &str, pointer: &str, base: &Url, registry: &mut Registry) {
    let Value::Object(map) = schema else { return };
    let base = base_of(map, base, pointer.is_empty());
    if !pointer.is_empty() && map.get("$id").and_then(Value::as_str).is_some_and(|id| !id.starts_with('#')) {
        registry.resources.entry(without_fragment(&base)).or_insert((file.to_owned(), pointer.to_owned()));
    }
    if let Some(anchor) = map.get("$anchor").and_then(Value::as_str) {
        registry.anchors.entry((without_fragment(&base), anchor.to_owned())).or_insert((file.to_owned(), pointer.to_owned()));
    }
    for (tokens, sub) in subschemas(map) {
        collect(sub, file, &child(pointer, &tokens), &base, registry);
    }
}

/// Finds the `$ref`s of the schema at `pointer` to rewrite: `(file, pointer of the schema object,
/// new reference)`.
fn references(schema: &Value, file: &str, pointer: &str, base: &Url, registry: &Registry, docs: &Documents, out: &mut Vec<(String, String, String)>) {
    let Value::Object(map) = schema else { return };
    let base = base_of(map, base, pointer.is_empty());
    if let Some(reference) = map.get("$ref").and_then(Value::as_str)
        && let Some((target_file, target)) = target(reference, &base, registry)
        && docs.resolve_ref(file, reference).ok() != Some((target_file.clone(), target.clone()))
    {
        let written = if target_file == file { format!("#{}", encode(&target)) } else { format!("{}#{}", encode(&target_file), encode(&target)) };
        out.push((file.to_owned(), pointer.to_owned(), written));
    }
    for (tokens, sub) in subschemas(map) {
        references(sub, file, &child(pointer, &tokens), &base, registry, docs, out);
    }
}

/// The file and pointer `reference` names, resolved against `base`; `None` when no file holds
/// the resource it names.
fn target(reference: &str, base: &Url, registry: &Registry) -> Option<(String, String)> {
    let resolved = base.join(reference).ok()?;
    let fragment = resolved.fragment().map(decode).unwrap_or_default();
    let (file, at) = registry.resources.get(&without_fragment(&resolved))?;
    if fragment.is_empty() || fragment.starts_with('/') {
        Some((file.clone(), format!("{at}{fragment}")))
    } else {
        registry.anchors.get(&(without_fragment(&resolved), fragment)).cloned()
    }
}

/// Removes the `$id`s below the root and every `$anchor`, wherever a schema stands.
fn forget(doc: &mut Value) {
    let mut places = Vec::new();
    each_schema(doc, "", &mut |pointer, map| {
        if map.contains_key("$anchor") || (!pointer.is_empty() && map.contains_key("$id")) {
            places.push(pointer.to_owned());
        }
    });
    for pointer in places {
        if let Some(Value::Object(map)) = doc.pointer_mut(&pointer) {
            map.remove("$anchor");
            if !pointer.is_empty() {
                map.remove("$id");
            }
        }
    }
}

/// A pointer or file name as a URI fragment or path writes it: percent-encoded beyond the
/// characters both allow.
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A percent-encoded fragment, decoded (an invalid escape is kept as written).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%').then(|| bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok())).flatten();
        match escaped {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resolved(files: &[(&str, Value)]) -> Documents {
        let mut docs = Documents { files: files.iter().map(|(n, v)| ((*n).to_owned(), v.clone())).collect() };
        resolve(&mut docs);
        docs
    }

    #[test]
    fn an_embedded_resource_is_found_by_its_id_and_its_own_pointers_start_at_it() {
        let docs = resolved(&[(
            "g.json",
            json!({"$id": "http://example.com/root.json", "$ref": "inner.json",
                "$defs": {"inner": {"$id": "inner.json", "$ref": "#/$defs/x", "$defs": {"x": {"type": "string"}}}}}),
        )]);
        let g = &docs.files["g.json"];
        assert_eq!(g["$ref"], "#/$defs/inner");
        assert_eq!(g["$defs"]["inner"]["$ref"], "#/$defs/inner/$defs/x");
        assert!(g["$defs"]["inner"].get("$id").is_none());
        assert_eq!(g["$id"], "http://example.com/root.json");
    }

    #[test]
    fn anchors_urns_and_nested_bases_resolve_and_what_already_reads_right_stays_as_written() {
        let docs = resolved(&[
            (
                "a.json",
                json!({"$id": "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed", "properties": {
                    "p": {"$ref": "#name"}, "q": {"$ref": "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed#/$defs/b"},
                    "r": {"$ref": "b.json#/$defs/s"}, "s": {"$ref": "#/$defs/b"}},
                    "$defs": {"b": {"$anchor": "name", "type": "integer"}}}),
            ),
            ("b.json", json!({"$defs": {"s": {"type": "string"}}})),
        ]);
        let a = &docs.files["a.json"];
        assert_eq!(a["properties"]["p"]["$ref"], "#/$defs/b");
        // These the generator already reads as their base URIs do: left as written.
        assert_eq!(a["properties"]["q"]["$ref"], "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed#/$defs/b");
        assert_eq!(a["properties"]["r"]["$ref"], "b.json#/$defs/s");
        assert_eq!(a["properties"]["s"]["$ref"], "#/$defs/b");
        assert!(a["$defs"]["b"].get("$anchor").is_none());
        // A remote resource no file holds is left for the lowering to refuse.
        let remote = resolved(&[("c.json", json!({"$ref": "https://example.com/elsewhere.json"}))]);
        assert_eq!(remote.files["c.json"]["$ref"], "https://example.com/elsewhere.json");
        // Again: nothing changes.
        let mut again = docs.clone();
        resolve(&mut again);
        assert_eq!(again.files, docs.files);
    }
}
