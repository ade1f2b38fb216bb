//! Reading schema files, resolving `$ref` targets, and bundling every file into one document.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use crate::error::SchemaError;

/// The dialect every schema file is written in.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// The loaded schema files, by file name (for example `Turn.json`), in name order.
#[derive(Debug, Clone, Default)]
pub struct Documents {
    /// File name to parsed document.
    pub files: BTreeMap<String, Value>,
}

impl Documents {
    /// Loads every `*.json` file directly inside `dir` (sub-folders such as `history/` are not
    /// read).
    ///
    /// # Errors
    ///
    /// A [`SchemaError`] naming the file when it cannot be read or is not JSON (with the line and
    /// column), or when the folder holds no schema.
    pub fn load_dir(dir: &Path) -> Result<Documents, SchemaError> {
        let folder = dir.display().to_string();
        let entries = std::fs::read_dir(dir).map_err(|e| {
            SchemaError::new(&folder, "", "", format!("cannot read the schema folder: {e}"))
        })?;
        let mut files = BTreeMap::new();
        for entry in entries {
            let entry = entry.map_err(|e| SchemaError::new(&folder, "", "", e.to_string()))?;
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") || !path.is_file() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path)
                .map_err(|e| SchemaError::new(&name, "", "", format!("cannot read: {e}")))?;
            let value = parse_document(&name, &text)?;
            files.insert(name, value);
        }
        if files.is_empty() {
            return Err(SchemaError::new(folder, "", "", "no *.json schema files in this folder"));
        }
        Ok(Documents { files })
    }

    /// Documents from memory: `(file name, JSON text)` pairs.
    ///
    /// # Errors
    ///
    /// A [`SchemaError`] when a text is not JSON.
    pub fn from_texts<'a>(
        texts: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Documents, SchemaError> {
        let mut files = BTreeMap::new();
        for (name, text) in texts {
            files.insert(name.to_owned(), parse_document(name, text)?);
        }
        Ok(Documents { files })
    }

    /// Documents from already-parsed values.
    pub fn from_values(values: impl IntoIterator<Item = (String, Value)>) -> Documents {
        Documents { files: values.into_iter().collect() }
    }

    /// Resolves a `$ref` written in `file` to `(file, pointer)`.
    ///
    /// Supported forms: `#`, `#/json/pointer` (percent-encoded as URI fragments are), `Other.json`
    /// and `Other.json#/json/pointer`, where `Other.json` is a file in the same folder.
    ///
    /// # Errors
    ///
    /// A message when the reference has another form or names a file that is not loaded.
    pub fn resolve_ref(&self, file: &str, reference: &str) -> Result<(String, String), String> {
        let (target, fragment) = match reference.split_once('#') {
            Some((t, f)) => (t, f),
            None => (reference, ""),
        };
        let target_file = if target.is_empty() {
            file.to_owned()
        } else if target.contains(':') || target.contains('/') || !target.ends_with(".json") {
            return Err(format!(
                "`{reference}` is not supported: references must stay inside the schema folder, \
                 as `#/$defs/Name`, `File.json` or `File.json#/$defs/Name`"
            ));
        } else {
            target.to_owned()
        };
        if !self.files.contains_key(&target_file) {
            return Err(format!("`{reference}` names `{target_file}`, which is not a schema file here"));
        }
        if !fragment.is_empty() && !fragment.starts_with('/') {
            return Err(format!(
                "`{reference}` uses an anchor; only JSON-pointer fragments (`#/...`) are supported"
            ));
        }
        let pointer = percent_decode(fragment)
            .ok_or_else(|| format!("`{reference}` has a malformed percent-encoding"))?;
        if self.get(&target_file, &pointer).is_none() {
            return Err(format!("`{reference}` points at nothing: `{target_file}` has no `{pointer}`"));
        }
        Ok((target_file, pointer))
    }

    /// The value at `pointer` in `file`.
    pub fn get(&self, file: &str, pointer: &str) -> Option<&Value> {
        self.files.get(file)?.pointer(pointer)
    }

    /// Every file in one self-contained document: each file's schema under `$defs/<stem>`, with
    /// every `$ref` rewritten to point inside the bundle. Root type `T` is `#/$defs/T`.
    pub fn bundle(&self) -> Value {
        let mut defs = Map::new();
        for (name, doc) in &self.files {
            let mut doc = doc.clone();
            if let Value::Object(map) = &mut doc {
                map.remove("$schema");
                map.remove("$id");
            }
            rewrite_refs(&mut doc, name, self);
            defs.insert(stem(name).to_owned(), doc);
        }
        let mut root = Map::new();
        root.insert("$schema".into(), Value::String(DIALECT.into()));
        root.insert(
            "$comment".into(),
            Value::String("Generated by openagents-codegen from schema/; regenerate with `make codegen`.".into()),
        );
        root.insert("$defs".into(), Value::Object(defs));
        Value::Object(root)
    }

    /// The bundle pointer for `(file, pointer)`.
    pub fn bundle_pointer(file: &str, pointer: &str) -> String {
        let mut out = crate::error::push_pointer("#/$defs", stem(file));
        out.push_str(pointer);
        out
    }
}

/// The file name without `.json`.
pub fn stem(file: &str) -> &str {
    file.strip_suffix(".json").unwrap_or(file)
}

fn parse_document(name: &str, text: &str) -> Result<Value, SchemaError> {
    serde_json::from_str(text).map_err(|e| {
        SchemaError::new(name, "", "", format!("not valid JSON at line {}, column {}: {e}", e.line(), e.column()))
    })
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The keywords whose values are schemas, and how: one schema, a map of schemas, or a list.
pub(crate) enum Sub {
    One,
    Map,
    List,
}

/// Which keywords hold subschemas (within the supported subset).
pub(crate) fn subschema_keyword(keyword: &str) -> Option<Sub> {
    match keyword {
        "items" | "additionalProperties" | "x-result" => Some(Sub::One),
        "properties" | "$defs" => Some(Sub::Map),
        "oneOf" => Some(Sub::List),
        _ => None,
    }
}

fn rewrite_refs(schema: &mut Value, file: &str, docs: &Documents) {
    let Value::Object(map) = schema else { return };
    for (key, value) in map.iter_mut() {
        if key == "$ref" {
            if let Value::String(r) = value {
                if let Ok((f, p)) = docs.resolve_ref(file, r) {
                    *r = Documents::bundle_pointer(&f, &p);
                }
            }
            continue;
        }
        match subschema_keyword(key) {
            Some(Sub::One) => rewrite_refs(value, file, docs),
            Some(Sub::Map) => {
                if let Value::Object(m) = value {
                    m.values_mut().for_each(|v| rewrite_refs(v, file, docs));
                }
            }
            Some(Sub::List) => {
                if let Value::Array(a) = value {
                    a.iter_mut().for_each(|v| rewrite_refs(v, file, docs));
                }
            }
            None => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Loading a schema folder, a bundle file, or a folder holding `bundle.json`.

/// The schema files inside a bundle: each `#/$defs/<Stem>` back as `<Stem>.json`, with every
/// `$ref` pointing between files again.
///
/// # Errors
///
/// A [`SchemaError`] when the value is not a bundle.
pub fn documents_from_bundle(name: &str, bundle: &Value) -> Result<Documents, SchemaError> {
    let Some(Value::Object(defs)) = bundle.get("$defs") else {
        return Err(SchemaError::new(name, "", "$defs", "not a bundle: a bundle keeps every schema file under `$defs`"));
    };
    let mut files = Vec::new();
    for (stem, doc) in defs {
        let mut doc = doc.clone();
        unbundle_refs(&mut doc);
        files.push((format!("{stem}.json"), doc));
    }
    Ok(Documents::from_values(files))
}

fn unescape_token(t: &str) -> String {
    t.replace("~1", "/").replace("~0", "~")
}

fn unbundle_refs(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    for (key, value) in map.iter_mut() {
        if key == "$ref" {
            if let Value::String(r) = value
                && let Some(rest) = r.strip_prefix("#/$defs/")
            {
                let (stem, pointer) = match rest.find('/') {
                    Some(i) => (&rest[..i], &rest[i..]),
                    None => (rest, ""),
                };
                *r = if pointer.is_empty() { format!("{}.json", unescape_token(stem)) } else { format!("{}.json#{pointer}", unescape_token(stem)) };
            }
            continue;
        }
        match subschema_keyword(key) {
            Some(Sub::One) => unbundle_refs(value),
            Some(Sub::Map) => {
                if let Value::Object(m) = value {
                    m.values_mut().for_each(unbundle_refs);
                }
            }
            Some(Sub::List) => {
                if let Value::Array(a) = value {
                    a.iter_mut().for_each(unbundle_refs);
                }
            }
            None => {}
        }
    }
}

/// Loads the schema documents at `path`: a schema folder, a bundle file (what `openagents schema
/// --bundle` prints), or a folder with a `bundle.json` (a `schema/history/<version>/` entry).
///
/// # Errors
///
/// A [`SchemaError`] when it cannot be read or is not JSON.
pub fn load_path(path: &Path) -> Result<Documents, SchemaError> {
    let shown = path.display().to_string();
    let bundle_file = if path.is_dir() {
        let b = path.join("bundle.json");
        b.is_file().then_some(b)
    } else {
        Some(path.to_path_buf())
    };
    match bundle_file {
        Some(file) => {
            let text = std::fs::read_to_string(&file).map_err(|e| SchemaError::new(file.display().to_string(), "", "", format!("cannot read: {e}")))?;
            let value: Value = serde_json::from_str(&text)
                .map_err(|e| SchemaError::new(file.display().to_string(), "", "", format!("not valid JSON at line {}, column {}: {e}", e.line(), e.column())))?;
            documents_from_bundle(&shown, &value)
        }
        None => Documents::load_dir(path),
    }
}
