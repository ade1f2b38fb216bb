//! Schemas written in the earlier dialects most published schemas still use (draft-04, draft-06,
//! draft-07 and 2019-09), read with their own meaning: each file is rewritten in memory into the
//! 2020-12 schema that accepts the same documents, before anything else reads it.
//!
//! Every rewrite keeps each remaining keyword at its own pointer, so a refusal still names the
//! real place in the real file:
//!
//! - up to draft-07, keywords beside a `$ref` are ignored by that dialect's validators; they are
//!   dropped, except annotations (`description`, `title`, `definitions`, other tools' `x-…`);
//! - draft-04's boolean `exclusiveMinimum`/`exclusiveMaximum` become 2020-12's numeric form (the
//!   `minimum`/`maximum` they qualify moves into them), and its root `id` becomes `$id`;
//! - up to draft-07, an `$id` (draft-04: `id`) below the root that is only a fragment
//!   (`"#/definitions/a"`, or the plain-name anchor `"#a"`) names no other document and goes (a
//!   `$ref` by an anchor is refused on its own); in every dialect, a `$schema` below the root that
//!   names the file's own dialect again goes;
//! - up to 2019-09, `additionalItems` beside an `items` that is one schema (or no `items`) applies
//!   to nothing and is dropped; an array of `items` (a tuple) becomes `prefixItems`, and
//!   `additionalItems` beside it the `items` after it (a refusal inside either names the new
//!   keyword's place);
//! - a keyword a later dialect brought (draft-04's `const`, draft-06's `if`, draft-07's
//!   `unevaluatedProperties`, 2019-09's `prefixItems`, …) is one that dialect's validators do not
//!   know and ignore: it goes (see `Dialect::later_keywords`); draft-04 reads its
//!   `exclusiveMinimum`/`exclusiveMaximum` as a boolean (a number is true unless it is 0);
//! - draft-04 to draft-07's `dependencies` becomes 2019-09's `dependentRequired` (its lists of
//!   names) and `dependentSchemas` (its schemas): the one rewrite that moves keywords, so a
//!   refusal inside a dependency's schema names the `dependentSchemas` place.
//!
//! `definitions`, where those dialects keep their named schemas, is read as `$defs` in every
//! dialect (2020-12's own meta-schema still declares it).

use serde_json::Value;

use crate::load::DIALECT;

/// The dialects read, by what their `$schema` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// JSON Schema draft-04.
    Draft4,
    /// JSON Schema draft-06.
    Draft6,
    /// JSON Schema draft-07.
    Draft7,
    /// JSON Schema 2019-09.
    Draft2019,
    /// JSON Schema 2020-12 (also a file without `$schema`).
    Draft2020,
}

/// The `$schema` URIs of the dialects read besides 2020-12, as the lowering's refusal lists them.
pub const EARLIER_DIALECTS: &[&str] = &[
    "http://json-schema.org/draft-04/schema#",
    "http://json-schema.org/draft-06/schema#",
    "http://json-schema.org/draft-07/schema#",
    "https://json-schema.org/draft/2019-09/schema",
];

impl Dialect {
    /// The keywords the generator reads that came after this dialect, which its validators
    /// ignore: draft-06 brought `const`, `contains` and `propertyNames`, draft-07 `if`, `then` and
    /// `else`, 2019-09 the unevaluated keywords, `dependentRequired`, `dependentSchemas` and
    /// `minContains`/`maxContains`, 2020-12 `prefixItems`.
    fn later_keywords(self) -> &'static [&'static str] {
        const SINCE_2019: &[&str] = &["prefixItems", "unevaluatedProperties", "unevaluatedItems", "dependentRequired", "dependentSchemas", "minContains", "maxContains"];
        match self {
            Dialect::Draft4 => &["prefixItems", "unevaluatedProperties", "unevaluatedItems", "dependentRequired", "dependentSchemas", "minContains", "maxContains", "if", "then", "else", "const", "contains", "propertyNames"],
            Dialect::Draft6 => &["prefixItems", "unevaluatedProperties", "unevaluatedItems", "dependentRequired", "dependentSchemas", "minContains", "maxContains", "if", "then", "else"],
            Dialect::Draft7 => SINCE_2019,
            Dialect::Draft2019 => &["prefixItems"],
            Dialect::Draft2020 => &[],
        }
    }

    /// Whether the dialect is draft-07 or earlier (keywords beside a `$ref` ignored, fragment
    /// `$id`s, `dependencies`).
    fn before_2019(self) -> bool {
        matches!(self, Dialect::Draft4 | Dialect::Draft6 | Dialect::Draft7)
    }

    /// The dialect a `$schema` names (`http` or `https`, with or without the empty fragment), or
    /// `None` for one that is not read.
    pub fn of(uri: &str) -> Option<Dialect> {
        let bare = uri.trim_end_matches('#');
        let bare = bare.strip_prefix("https://").or_else(|| bare.strip_prefix("http://"))?;
        Some(match bare {
            "json-schema.org/draft-04/schema" => Dialect::Draft4,
            "json-schema.org/draft-06/schema" => Dialect::Draft6,
            "json-schema.org/draft-07/schema" => Dialect::Draft7,
            "json-schema.org/draft/2019-09/schema" => Dialect::Draft2019,
            "json-schema.org/draft/2020-12/schema" => Dialect::Draft2020,
            _ => return None,
        })
    }
}

/// Rewrites a schema file written in an earlier dialect into 2020-12 (its `$schema` then says
/// so). A file in 2020-12, without `$schema`, or with a `$schema` that names no dialect read is
/// left as it is (the lowering refuses the last).
pub fn upgrade(doc: &mut Value) {
    let Some(dialect) = doc.get("$schema").and_then(Value::as_str).and_then(Dialect::of) else { return };
    let Value::Object(root) = doc else { return };
    if dialect == Dialect::Draft4
        && !root.contains_key("$id")
        && let Some(id) = root.remove("id")
    {
        if id.is_string() {
            root.insert("$id".into(), id);
        } else {
            root.insert("id".into(), id);
        }
    }
    // Schemas a `$ref` names where no keyword of the dialect holds one (inside another tool's
    // keyword, which the user may declare an annotation): upgraded as well, each once.
    let mut elsewhere = Vec::new();
    every_ref(doc, &mut |r| {
        if let Some(pointer) = r.strip_prefix('#').filter(|p| p.starts_with('/'))
            && !reaches_schema(pointer)
        {
            elsewhere.push(pointer.to_owned());
        }
    });
    elsewhere.sort();
    elsewhere.dedup();
    upgrade_schema(doc, dialect);
    let mut done: Vec<&str> = Vec::new();
    for pointer in &elsewhere {
        if done.iter().any(|d| pointer.starts_with(&format!("{d}/"))) {
            continue;
        }
        if let Some(target) = doc.pointer_mut(pointer) {
            upgrade_schema(target, dialect);
        }
        done.push(pointer);
    }
    if let Value::Object(root) = doc {
        root.insert("$schema".into(), Value::String(DIALECT.into()));
    }
}

/// Calls `f` with every `$ref` string anywhere in `value`.
pub(crate) fn every_ref(value: &Value, f: &mut impl FnMut(&str)) {
    match value {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                f(r);
            }
            m.values().for_each(|v| every_ref(v, f));
        }
        Value::Array(items) => items.iter().for_each(|v| every_ref(v, f)),
        _ => {}
    }
}

/// Whether a JSON pointer from a file's root goes only through keywords that hold schemas (so
/// the upgrade reaches what it names).
fn reaches_schema(pointer: &str) -> bool {
    #[derive(PartialEq)]
    enum At {
        Schema,
        Schemas,
        /// Under `items`: one schema, or (a tuple) an array of them.
        Items,
    }
    let mut at = At::Schema;
    for token in pointer.split('/').skip(1) {
        at = match at {
            At::Schemas => At::Schema,
            At::Items if token.bytes().all(|b| b.is_ascii_digit()) => At::Schema,
            At::Schema | At::Items => match token {
                "items" => At::Items,
                "additionalItems" | "additionalProperties" | "unevaluatedProperties" | "unevaluatedItems" | "not" | "if" | "then" | "else" | "contains"
                | "propertyNames" => At::Schema,
                "properties" | "patternProperties" | "definitions" | "$defs" | "dependentSchemas" | "dependencies" | "allOf" | "anyOf" | "oneOf" | "prefixItems" => At::Schemas,
                _ => return false,
            },
        };
    }
    true
}

/// Keywords kept beside a `$ref` in the dialects that ignore the rest: those that never change
/// what a schema accepts.
fn kept_beside_ref(key: &str) -> bool {
    matches!(key, "$ref" | "$schema" | "$id" | "$comment" | "title" | "description" | "default" | "examples" | "definitions" | "$defs" | "deprecated" | "readOnly" | "writeOnly")
        || crate::lower::is_foreign_extension(key)
}

/// Upgrades a schema and the schemas inside it.
fn upgrade_schema(schema: &mut Value, dialect: Dialect) {
    let Value::Object(map) = schema else { return };
    // A `$schema` naming the file's own dialect again says nothing below the root.
    if map.get("$schema").and_then(Value::as_str).and_then(Dialect::of) == Some(dialect) {
        map.remove("$schema");
    }
    if dialect == Dialect::Draft2020 {
        for (key, value) in map.iter_mut() {
            upgrade_under(key, value, dialect);
        }
        return;
    }
    if dialect.before_2019() {
        // `$defs` came with 2019-09: before it, a `$defs` is another tool's keyword, which a
        // `$ref` may still point into, so its schemas are kept as types and anything else goes.
        if let Some(Value::Object(defs)) = map.get_mut("$defs") {
            defs.retain(|_, v| v.is_object() || v.is_boolean());
        }
        if map.contains_key("$ref") {
            map.retain(|k, _| kept_beside_ref(k));
        }
        // draft-04's `id` below the root is what later dialects call `$id` (an embedded
        // resource, or an anchor below).
        if dialect == Dialect::Draft4
            && !map.contains_key("$id")
            && map.get("id").is_some_and(Value::is_string)
            && let Some(id) = map.remove("id")
        {
            map.insert("$id".into(), id);
        }
        // A fragment `$id` names no other document: a plain name (`"#a"`) is an anchor, as
        // 2020-12's `$anchor` says it; a pointer (`"#/definitions/a"`) names its own place.
        for id in ["$id", "id"] {
            let Some(fragment) = map.get(id).and_then(Value::as_str).and_then(|v| v.strip_prefix('#')).map(str::to_owned) else { continue };
            if id == "$id" || dialect == Dialect::Draft4 {
                map.remove(id);
                if !fragment.is_empty() && !fragment.starts_with('/') && !map.contains_key("$anchor") {
                    map.insert("$anchor".into(), Value::String(fragment));
                }
            }
        }
    }
    // A keyword of a later dialect is one this dialect's validators do not know, and ignore.
    map.retain(|k, _| !dialect.later_keywords().contains(&k.as_str()));
    if dialect == Dialect::Draft4 {
        for (flag, bound) in [("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")] {
            // draft-04 reads the flag as a boolean: a number is true unless it is 0.
            if let Some(Value::Number(n)) = map.get(flag) {
                let set = n.as_f64() != Some(0.0);
                map.insert(flag.into(), Value::Bool(set));
            }
            match map.get(flag) {
                Some(Value::Bool(true)) => {
                    // The bound moves into the flag's place; without one the flag says nothing.
                    match map.remove(bound) {
                        Some(b) => {
                            map.insert(flag.into(), b);
                        }
                        None => {
                            map.remove(flag);
                        }
                    }
                }
                Some(Value::Bool(false)) => {
                    map.remove(flag);
                }
                _ => {}
            }
        }
    }
    if map.contains_key("additionalItems") && !map.get("items").is_some_and(Value::is_array) {
        map.remove("additionalItems");
    }
    if map.get("items").is_some_and(Value::is_array) {
        // A tuple: 2020-12's `prefixItems`, with `additionalItems` as the `items` after it (a
        // refusal inside either names the new keyword's place).
        if let Some(tuple) = map.remove("items") {
            map.insert("prefixItems".into(), tuple);
        }
        if let Some(rest) = map.remove("additionalItems") {
            map.insert("items".into(), rest);
        }
    }
    if dialect.before_2019()
        && let Some(Value::Object(deps)) = map.get("dependencies")
    {
        // 2019-09 split it in two: a list of names is `dependentRequired`, a schema
        // `dependentSchemas` (a refusal inside one names the new keyword's place).
        let (mut required, mut schemas) = (serde_json::Map::new(), serde_json::Map::new());
        for (k, v) in deps {
            if v.is_array() { &mut required } else { &mut schemas }.insert(k.clone(), v.clone());
        }
        map.remove("dependencies");
        for (key, part) in [("dependentRequired", required), ("dependentSchemas", schemas)] {
            if !part.is_empty() && !map.contains_key(key) {
                map.insert(key.into(), Value::Object(part));
            }
        }
    }
    for (key, value) in map.iter_mut() {
        upgrade_under(key, value, dialect);
    }
}

/// Upgrades the subschemas a keyword holds, as these dialects place them.
fn upgrade_under(key: &str, value: &mut Value, dialect: Dialect) {
    match (key, value) {
        (
            "items" | "additionalItems" | "additionalProperties" | "unevaluatedProperties" | "unevaluatedItems" | "not" | "if" | "then" | "else" | "contains"
            | "propertyNames",
            v @ Value::Object(_),
        ) => upgrade_schema(v, dialect),
        ("properties" | "patternProperties" | "definitions" | "$defs" | "dependentSchemas", Value::Object(m)) => {
            m.values_mut().for_each(|v| upgrade_schema(v, dialect));
        }
        ("dependencies", Value::Object(m)) => {
            m.values_mut().filter(|v| v.is_object()).for_each(|v| upgrade_schema(v, dialect));
        }
        // `prefixItems`: a tuple `items` this upgrade renamed (a dialect's own `prefixItems` is
        // one of a later dialect's keywords, gone before).
        ("items" | "prefixItems" | "allOf" | "anyOf" | "oneOf", Value::Array(list)) => list.iter_mut().for_each(|v| upgrade_schema(v, dialect)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn up(mut v: Value) -> Value {
        upgrade(&mut v);
        v
    }

    #[test]
    fn draft_07_drops_what_stands_beside_a_ref_but_its_annotations() {
        let v = up(json!({"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"a": {"$ref": "#/definitions/A", "type": "string", "minLength": 3, "description": "d", "x-tool": 1}}, "definitions": {"A": {"type": "integer"}}}));
        assert_eq!(v["$schema"], DIALECT);
        assert_eq!(v["properties"]["a"], json!({"$ref": "#/definitions/A", "description": "d", "x-tool": 1}));
        // 2019-09 applies them, as 2020-12 does.
        let v = up(json!({"$schema": "https://json-schema.org/draft/2019-09/schema", "$ref": "#/$defs/A", "type": "string"}));
        assert_eq!(v["type"], "string");
    }

    #[test]
    fn draft_04_exclusive_bounds_and_id_take_their_2020_12_form() {
        let v = up(json!({"$schema": "http://json-schema.org/draft-04/schema#", "id": "http://example.com/x.json", "properties": {
            "a": {"type": "number", "minimum": 1, "exclusiveMinimum": true, "maximum": 9, "exclusiveMaximum": false},
            "b": {"type": "number", "exclusiveMaximum": true}}}));
        assert_eq!(v["$id"], "http://example.com/x.json");
        assert!(v.get("id").is_none());
        assert_eq!(v["properties"]["a"], json!({"type": "number", "exclusiveMinimum": 1, "maximum": 9}));
        assert_eq!(v["properties"]["b"], json!({"type": "number"}));
    }

    #[test]
    fn a_schema_a_ref_names_inside_another_tools_keyword_is_upgraded_once() {
        let v = up(json!({"$schema": "http://json-schema.org/draft-04/schema#",
            "properties": {"a": {"$ref": "#/vendor/x"}, "b": {"$ref": "#/vendor/x/properties/n"}, "c": {"$ref": "#/items/0"}},
            "items": [{"type": "number", "minimum": 1, "exclusiveMinimum": true}],
            "vendor": {"x": {"$schema": "http://json-schema.org/draft-04/schema#", "properties": {"n": {"type": "number", "minimum": 2, "exclusiveMinimum": true}}}}}));
        // Upgraded as the rest (draft-04's flag into the bound, the repeated `$schema` gone), once.
        assert_eq!(v["vendor"]["x"], json!({"properties": {"n": {"type": "number", "exclusiveMinimum": 2}}}));
        assert_eq!(v["prefixItems"], json!([{"type": "number", "exclusiveMinimum": 1}]));
    }

    #[test]
    fn a_tuple_s_schemas_are_upgraded_too_and_an_early_defs_keeps_only_schemas() {
        let v = up(json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "array",
            "items": [{"type": "number", "minimum": 1, "exclusiveMinimum": true}, {"$ref": "#/$defs/a", "type": "string"}],
            "$defs": {"a": {"type": "string"}, "note": "a string, no schema"}}));
        assert_eq!(v["prefixItems"], json!([{"type": "number", "exclusiveMinimum": 1}, {"$ref": "#/$defs/a"}]));
        assert_eq!(v["$defs"], json!({"a": {"type": "string"}}));
    }

    #[test]
    fn additional_items_without_a_tuple_applies_to_nothing_and_goes() {
        let v = up(json!({"$schema": "http://json-schema.org/draft-07/schema", "type": "array", "items": {"type": "string"}, "additionalItems": false}));
        assert!(v.get("additionalItems").is_none());
        let tuple = up(json!({"$schema": "http://json-schema.org/draft-07/schema", "type": "array", "items": [{"type": "string"}], "additionalItems": false}));
        assert_eq!(tuple, json!({"$schema": DIALECT, "type": "array", "prefixItems": [{"type": "string"}], "items": false}));
    }

    #[test]
    fn dependencies_split_into_dependent_required_and_dependent_schemas() {
        let v = up(json!({"$schema": "http://json-schema.org/draft-04/schema#", "dependencies": {"a": ["b"], "c": {"$ref": "#/definitions/D", "required": ["e"]}}}));
        assert!(v.get("dependencies").is_none());
        assert_eq!(v["dependentRequired"], json!({"a": ["b"]}));
        // The schema is upgraded too: draft-04 ignores what stands beside its `$ref`.
        assert_eq!(v["dependentSchemas"], json!({"c": {"$ref": "#/definitions/D"}}));
    }

    #[test]
    fn a_later_dialects_keywords_are_ignored_as_the_earlier_dialect_ignores_them() {
        let v = up(json!({"$schema": "http://json-schema.org/draft-04/schema#", "properties": {
            "k": {"const": "a", "type": "string"}, "n": {"type": "number", "minimum": 2, "exclusiveMinimum": 5}, "m": {"type": "number", "exclusiveMinimum": 5}},
            "if": {"required": ["a"]}, "then": {"required": ["b"]}, "unevaluatedProperties": false}));
        assert_eq!(v["properties"]["k"], json!({"type": "string"}));
        // A number as draft-04's flag is `true`: the minimum is exclusive; alone, it says nothing.
        assert_eq!(v["properties"]["n"], json!({"type": "number", "exclusiveMinimum": 2}));
        assert_eq!(v["properties"]["m"], json!({"type": "number"}));
        for k in ["if", "then", "unevaluatedProperties"] {
            assert!(v.get(k).is_none(), "{k}");
        }
        let v = up(json!({"$schema": "http://json-schema.org/draft-07/schema#", "if": {"required": ["a"]}, "then": {}, "dependentRequired": {"a": ["b"]}, "const": 1}));
        assert!(v.get("if").is_some() && v.get("const").is_some() && v.get("dependentRequired").is_none(), "{v}");
        // 2019-09 has no `prefixItems` (its tuples are `items` arrays, read as `prefixItems`).
        let v = up(json!({"$schema": "https://json-schema.org/draft/2019-09/schema", "prefixItems": [{"type": "string"}], "unevaluatedProperties": false}));
        assert_eq!(v, json!({"$schema": DIALECT, "unevaluatedProperties": false}));
    }

    #[test]
    fn fragment_ids_become_anchors_or_go_and_a_repeated_schema_goes_below_the_root() {
        let v = up(json!({"$schema": "http://json-schema.org/draft-07/schema#", "$id": "https://example.com/x.json", "definitions": {
            "a": {"$id": "#/definitions/a", "type": "string"}, "b": {"$id": "#b", "type": "integer"}, "c": {"$id": "other.json", "type": "null"},
            "d": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "boolean"}}}));
        assert_eq!(v["$id"], "https://example.com/x.json");
        assert_eq!(v["definitions"]["a"], json!({"type": "string"}));
        // A plain-name fragment is an anchor.
        assert_eq!(v["definitions"]["b"], json!({"$anchor": "b", "type": "integer"}));
        // Another document's `$id` stays: an embedded resource (see the `uri` module).
        assert_eq!(v["definitions"]["c"]["$id"], "other.json");
        assert_eq!(v["definitions"]["d"], json!({"type": "boolean"}));
        let v = up(json!({"$schema": DIALECT, "$defs": {"d": {"$schema": DIALECT, "$id": "#x"}}}));
        assert_eq!(v, json!({"$schema": DIALECT, "$defs": {"d": {"$id": "#x"}}}));
    }

    #[test]
    fn a_2020_12_file_or_an_unknown_dialect_is_left_alone() {
        let text = json!({"$ref": "#/$defs/A", "type": "string", "additionalItems": false});
        assert_eq!(up(text.clone()), text);
        let text = json!({"$schema": DIALECT, "$ref": "#/$defs/A", "type": "string", "items": [{}], "additionalItems": false, "dependencies": {"a": ["b"]}});
        assert_eq!(up(text.clone()), text);
        let unknown = json!({"$schema": "http://json-schema.org/draft-03/schema#", "$ref": "#/x", "type": "string"});
        assert_eq!(up(unknown.clone()), unknown);
        assert_eq!(Dialect::of("https://json-schema.org/draft-07/schema"), Some(Dialect::Draft7));
    }
}
