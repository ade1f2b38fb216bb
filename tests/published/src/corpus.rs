//! A corpus of documents for every `$defs` type of a published schema, made from the schema
//! itself, deterministically, with each document's verdict of record: the `jsonschema` crate's,
//! on the parsed document.
//!
//! - Valid instances: the schema is walked from the type (`$ref`s followed, `allOf` members
//!   merged, one branch of each `anyOf`/`oneOf`, required members, `const`s, the first `enum`
//!   value, strings within `minLength`/`maxLength`, numbers within their bounds, arrays within
//!   `minItems`/`maxItems`). Each type gets a minimal instance (required members only), a full one
//!   (optional members too, a few levels deep) and, where the type itself is a union or an enum,
//!   one instance per branch or value. A candidate the `jsonschema` crate refuses is dropped (a
//!   `oneOf` whose chosen branch also matches another, say), so only valid instances remain.
//! - Invalid mutations of each instance, at the places the walk recorded: a required member
//!   removed, a value replaced by one of another type, a tag (`const`) or enum value set to one the
//!   schema does not have, a bound crossed (`minimum`, `maximum`, their exclusive forms,
//!   `minLength`, `maxLength`, `minItems`, `maxItems`), and a member given twice (as JSON text,
//!   since a parsed value cannot hold a duplicate: the first occurrence has a value of another
//!   type, the last the instance's own). A mutation's verdict is still the `jsonschema` crate's, so
//!   one that stays valid (a removed member another branch does not need) counts as valid.
//!
//! Reference validators read a duplicate member as the last one (`serde_json`, Python's `json`,
//! `JSON.parse`), so the verdict of record of a duplicate-key document is the instance's own
//! (valid); the generated exact decoders (the Rust typed path) refuse any duplicate, which the
//! comparison expects of them separately.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::{Map, Value, json};

/// A vendored published schema.
#[derive(Debug, Clone, Copy)]
pub struct Protocol {
    /// The name used in reports and file names (`acp-v1`).
    pub name: &'static str,
    /// The file in `tests/third-party-schemas/`.
    pub file: &'static str,
}

/// The three vendored schemas, in the order the reports list them.
pub const PROTOCOLS: [Protocol; 3] = [
    Protocol {
        name: "acp-v1",
        file: "acp-v1.schema.json",
    },
    Protocol {
        name: "mcp-2026-07-28",
        file: "mcp-2026-07-28.schema.json",
    },
    Protocol {
        name: "mcp-2025-11-25",
        file: "mcp-2025-11-25.schema.json",
    },
];

/// Mutations kept per `$defs` type at most (spread over the categories), to bound the run.
pub const MAX_MUTATIONS_PER_TYPE: usize = 48;
/// Instances tried per type at most (the union branches beyond are not tried).
const MAX_INSTANCES_PER_TYPE: usize = 12;
/// How deep the full instance fills optional members.
const FULL_DEPTH: usize = 3;
/// How deep the walk goes at all (a required cycle stops here and the candidate is dropped).
const MAX_DEPTH: usize = 24;
/// The text given to a tag or enum value the schema does not have.
pub const UNKNOWN_TAG: &str = "x-unknown-value";

/// What a document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    /// An instance generated from the schema.
    Instance,
    /// A required member removed.
    RemoveRequired,
    /// A value replaced by one of another type.
    WrongType,
    /// A tag or enum value set to one the schema does not have.
    UnknownTag,
    /// A bound crossed.
    Bound,
    /// A member given twice (JSON text).
    DuplicateKey,
}

impl Category {
    /// Every category, instances first.
    pub const ALL: [Category; 6] = [
        Category::Instance,
        Category::RemoveRequired,
        Category::WrongType,
        Category::UnknownTag,
        Category::Bound,
        Category::DuplicateKey,
    ];

    /// The category's name in the corpus files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Category::Instance => "instance",
            Category::RemoveRequired => "remove-required",
            Category::WrongType => "wrong-type",
            Category::UnknownTag => "unknown-tag",
            Category::Bound => "bound",
            Category::DuplicateKey => "duplicate-key",
        }
    }
}

/// One document of the corpus.
#[derive(Debug, Clone)]
pub struct Doc {
    /// The `$defs` key of the type it is checked against.
    pub def: String,
    /// What it is.
    pub category: Category,
    /// How it was made (`minimal`, `branch 2`, `remove /params/sessionId`, ...).
    pub origin: String,
    /// The document, as JSON text.
    pub text: String,
    /// The verdict of record: the `jsonschema` crate's on the parsed document.
    pub valid: bool,
}

/// The corpus of one protocol.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// The protocol.
    pub protocol: Protocol,
    /// Every `$defs` key, in name order.
    pub defs: Vec<String>,
    /// How many of them got at least one valid instance.
    pub defs_with_instance: usize,
    /// The documents, type by type.
    pub docs: Vec<Doc>,
}

impl Corpus {
    /// Documents whose verdict of record is valid.
    pub fn valid(&self) -> usize {
        self.docs.iter().filter(|d| d.valid).count()
    }

    /// Documents whose verdict of record is invalid.
    pub fn invalid(&self) -> usize {
        self.docs.iter().filter(|d| !d.valid).count()
    }

    /// Documents that give a member twice.
    pub fn duplicates(&self) -> usize {
        self.docs
            .iter()
            .filter(|d| d.category == Category::DuplicateKey)
            .count()
    }
}

/// The folder of the vendored schemas.
pub fn schemas_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../third-party-schemas")
}

/// The parsed schema of a protocol.
pub fn schema(protocol: &Protocol) -> Value {
    let path = schemas_dir().join(protocol.file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The schema that holds a value to the `$defs` type `def` of `root`: the file's `$defs` with a
/// root of only `$ref` (the file's own root keywords, such as ACP's `anyOf`, left out).
pub fn schema_for(root: &Value, def: &str) -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": root.get("$defs").cloned().unwrap_or_else(|| json!({})),
        "$ref": format!("#/$defs/{}", def.replace('~', "~0").replace('/', "~1")),
    })
}

/// The reference validator of record for one type: the `jsonschema` crate, draft 2020-12,
/// formats as annotations.
pub fn reference(root: &Value, def: &str) -> jsonschema::Validator {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(false)
        .build(&schema_for(root, def))
        .unwrap_or_else(|e| panic!("{def}: the jsonschema crate does not compile its schema: {e}"))
}

/// Builds the corpus of a protocol.
pub fn build(protocol: Protocol) -> Corpus {
    let root = schema(&protocol);
    let mut defs: Vec<String> = root
        .get("$defs")
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    defs.sort();
    let walker = Walker { root: &root };
    let mut docs = Vec::new();
    let mut defs_with_instance = 0;
    for def in &defs {
        let validator = reference(&root, def);
        let schema = &root["$defs"][def];
        let instances = walker.instances(schema);
        let mut seen = BTreeSet::new();
        let mut kept = Vec::new();
        for (origin, value, sites) in instances {
            let value = canonical(&value);
            let text = value.to_string();
            if seen.insert(text.clone()) && validator.is_valid(&value) {
                docs.push(Doc {
                    def: def.clone(),
                    category: Category::Instance,
                    origin: origin.clone(),
                    text,
                    valid: true,
                });
                kept.push((origin, value, sites));
            }
        }
        if !kept.is_empty() {
            defs_with_instance += 1;
        }
        let mut buckets: BTreeMap<Category, Vec<(String, String)>> = BTreeMap::new();
        for (instance, value, sites) in &kept {
            for (category, origin, text) in mutations(value, sites) {
                if seen.insert(text.clone()) {
                    buckets
                        .entry(category)
                        .or_default()
                        .push((format!("{instance}: {origin}"), text));
                }
            }
        }
        for (category, origin, text) in interleave(buckets, MAX_MUTATIONS_PER_TYPE) {
            let parsed: Value = serde_json::from_str(&text).expect("a mutation is JSON");
            let valid = validator.is_valid(&parsed);
            docs.push(Doc {
                def: def.clone(),
                category,
                origin,
                text,
                valid,
            });
        }
    }
    Corpus {
        protocol,
        defs,
        defs_with_instance,
        docs,
    }
}

/// At most `max` items, taken from each bucket in turn (so every category is represented).
fn interleave(
    buckets: BTreeMap<Category, Vec<(String, String)>>,
    max: usize,
) -> Vec<(Category, String, String)> {
    let mut iters: Vec<(Category, std::vec::IntoIter<(String, String)>)> = buckets
        .into_iter()
        .map(|(c, v)| (c, v.into_iter()))
        .collect();
    let mut out = Vec::new();
    while out.len() < max {
        let mut any = false;
        for (c, it) in &mut iters {
            if out.len() == max {
                break;
            }
            if let Some((o, t)) = it.next() {
                out.push((*c, o, t));
                any = true;
            }
        }
        if !any {
            break;
        }
    }
    out
}

/// A step of a path inside a document.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Seg {
    /// A member of an object.
    Key(String),
    /// An item of an array.
    Index(usize),
}

/// The JSON pointer of a path.
pub fn pointer(path: &[Seg]) -> String {
    path.iter()
        .map(|s| match s {
            Seg::Key(k) => format!("/{}", k.replace('~', "~0").replace('/', "~1")),
            Seg::Index(i) => format!("/{i}"),
        })
        .collect()
}

/// A place of an instance that a mutation can break, as the walk found it.
#[derive(Debug, Clone, PartialEq)]
enum Site {
    /// A value placed here (any value can get one of another type).
    Value(Vec<Seg>),
    /// An object with these required members.
    Required(Vec<Seg>, Vec<String>),
    /// A string that a `const` or `enum` fixes.
    Tag(Vec<Seg>),
    /// A number and its bounds: `minimum`, `exclusiveMinimum`, `maximum`, `exclusiveMaximum`.
    Number(Vec<Seg>, bool, [Option<f64>; 4]),
    /// A string and its `minLength`, `maxLength`.
    Length(Vec<Seg>, Option<u64>, Option<u64>),
    /// An array and its `minItems`, `maxItems`.
    Items(Vec<Seg>, Option<u64>, Option<u64>),
}

/// Walks a schema to make instances.
struct Walker<'a> {
    root: &'a Value,
}

/// How an instance is made.
#[derive(Debug, Clone, Copy)]
struct Mode {
    /// Optional members too (up to [`FULL_DEPTH`]).
    full: bool,
    /// The branch (or enum value) to take at the type's own union, if any.
    choice: Option<usize>,
}

impl Walker<'_> {
    /// The candidate instances of a type, each with how it was made and its sites.
    fn instances(&self, schema: &Value) -> Vec<(String, Value, Vec<Site>)> {
        let mut modes = vec![
            (
                "minimal".to_owned(),
                Mode {
                    full: false,
                    choice: None,
                },
            ),
            (
                "full".to_owned(),
                Mode {
                    full: true,
                    choice: None,
                },
            ),
        ];
        let branches = ["anyOf", "oneOf", "enum"]
            .iter()
            .find_map(|k| schema.get(*k).and_then(Value::as_array))
            .map_or(0, Vec::len);
        for i in 0..branches.min(MAX_INSTANCES_PER_TYPE - 2) {
            modes.push((
                format!("branch {i}"),
                Mode {
                    full: false,
                    choice: Some(i),
                },
            ));
        }
        let mut out = Vec::new();
        for (origin, mode) in modes {
            let mut sites = Vec::new();
            if let Some(v) = self.value(schema, &mut Vec::new(), &mut sites, 0, mode) {
                out.push((origin, v, sites));
            }
        }
        out
    }

    fn resolve(&self, reference: &str) -> Option<&Value> {
        let pointer = reference.strip_prefix('#')?;
        self.root.pointer(pointer)
    }

    /// A value valid against `schema` (as far as the walk can tell) at `path`.
    fn value(
        &self,
        schema: &Value,
        path: &mut Vec<Seg>,
        sites: &mut Vec<Site>,
        depth: usize,
        mode: Mode,
    ) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        let s = match schema {
            Value::Bool(true) => return Some(json!("any")),
            Value::Bool(false) => return None,
            Value::Object(s) => s,
            _ => return None,
        };
        if let Some(c) = s.get("const") {
            if c.is_string() {
                sites.push(Site::Tag(path.clone()));
            }
            sites.push(Site::Value(path.clone()));
            return Some(c.clone());
        }
        if let Some(values) = s.get("enum").and_then(Value::as_array) {
            let i = mode.choice.unwrap_or(0).min(values.len().saturating_sub(1));
            let v = values.get(i)?.clone();
            if v.is_string() {
                sites.push(Site::Tag(path.clone()));
            }
            sites.push(Site::Value(path.clone()));
            return Some(v);
        }
        let inner = Mode {
            full: mode.full,
            choice: None,
        };
        let mut parts = Vec::new();
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            let target = self.resolve(r)?;
            parts.push(self.value(target, path, sites, depth + 1, mode)?);
        }
        for member in s
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            parts.push(self.value(member, path, sites, depth + 1, mode)?);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branches) = s.get(key).and_then(Value::as_array) {
                parts.push(self.branch(branches, path, sites, depth, mode)?);
            }
        }
        let typed = [
            "type",
            "properties",
            "required",
            "items",
            "minimum",
            "maximum",
            "minLength",
            "maxLength",
        ]
        .iter()
        .any(|k| s.contains_key(*k));
        if typed {
            parts.push(self.own(s, path, sites, depth, inner)?);
        }
        sites.push(Site::Value(path.clone()));
        let mut parts = parts.into_iter();
        let Some(first) = parts.next() else {
            return Some(json!("any"));
        };
        Some(parts.fold(first, merge))
    }

    /// One branch of a union: the chosen one, else the first that makes a value (a `null`
    /// branch last).
    fn branch(
        &self,
        branches: &[Value],
        path: &mut Vec<Seg>,
        sites: &mut Vec<Site>,
        depth: usize,
        mode: Mode,
    ) -> Option<Value> {
        let inner = Mode {
            full: mode.full,
            choice: None,
        };
        if let Some(i) = mode.choice {
            return self.value(branches.get(i)?, path, sites, depth + 1, inner);
        }
        let is_null = |b: &Value| b.get("type") == Some(&json!("null"));
        let order = branches
            .iter()
            .filter(|b| !is_null(b))
            .chain(branches.iter().filter(|b| is_null(b)));
        for b in order {
            let mut tried = Vec::new();
            if let Some(v) = self.value(b, path, &mut tried, depth + 1, inner) {
                sites.extend(tried);
                return Some(v);
            }
        }
        None
    }

    /// The value a schema's own type keywords describe.
    fn own(
        &self,
        s: &Map<String, Value>,
        path: &mut Vec<Seg>,
        sites: &mut Vec<Site>,
        depth: usize,
        mode: Mode,
    ) -> Option<Value> {
        let types: Vec<&str> = match s.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ if s.contains_key("properties") || s.contains_key("required") => vec!["object"],
            _ if s.contains_key("items") => vec!["array"],
            _ if s.contains_key("minLength") || s.contains_key("maxLength") => vec!["string"],
            _ => vec!["number"],
        };
        let chosen = types
            .iter()
            .copied()
            .find(|t| *t != "null")
            .or(types.first().copied())?;
        let num = |k: &str| s.get(k).and_then(Value::as_f64);
        let count = |k: &str| s.get(k).and_then(Value::as_u64);
        match chosen {
            "object" => {
                let required: Vec<String> = s
                    .get("required")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect();
                let mut obj = Map::new();
                let empty = Map::new();
                let props = s
                    .get("properties")
                    .and_then(Value::as_object)
                    .unwrap_or(&empty);
                let mut keys: Vec<&String> = props.keys().collect();
                keys.sort();
                for key in keys {
                    let prop = &props[key];
                    let needed = required.contains(key);
                    if !(needed || mode.full && depth < FULL_DEPTH) {
                        continue;
                    }
                    path.push(Seg::Key(key.clone()));
                    let mut tried = Vec::new();
                    let v = self.value(prop, path, &mut tried, depth + 1, mode);
                    path.pop();
                    match v {
                        Some(v) => {
                            sites.extend(tried);
                            obj.insert(key.clone(), v);
                        }
                        None if needed => return None,
                        None => {}
                    }
                }
                for key in &required {
                    if !obj.contains_key(key) {
                        // Required but not declared: any value will do.
                        obj.insert(key.clone(), json!("any"));
                    }
                }
                if !required.is_empty() {
                    sites.push(Site::Required(path.clone(), required));
                }
                Some(Value::Object(obj))
            }
            "array" => {
                let (min, max) = (count("minItems"), count("maxItems"));
                let mut n = min.unwrap_or(0).max(u64::from(mode.full));
                if let Some(max) = max {
                    n = n.min(max);
                }
                let items = s.get("items").cloned().unwrap_or(Value::Bool(true));
                let mut out = Vec::new();
                for i in 0..n as usize {
                    path.push(Seg::Index(i));
                    let v = self.value(&items, path, sites, depth + 1, mode);
                    path.pop();
                    out.push(v?);
                }
                if min.is_some() || max.is_some() {
                    sites.push(Site::Items(path.clone(), min, max));
                }
                Some(Value::Array(out))
            }
            "string" => {
                let (min, max) = (count("minLength"), count("maxLength"));
                let mut n = min.unwrap_or(0).max(4);
                if let Some(max) = max {
                    n = n.min(max);
                }
                if min.is_some() || max.is_some() {
                    sites.push(Site::Length(path.clone(), min, max));
                }
                Some(Value::String(
                    "text".chars().cycle().take(n as usize).collect(),
                ))
            }
            "integer" | "number" => {
                let bounds = [
                    num("minimum"),
                    num("exclusiveMinimum"),
                    num("maximum"),
                    num("exclusiveMaximum"),
                ];
                let integer = chosen == "integer";
                let step = if integer { 1.0 } else { 0.5 };
                let lo = bounds[0].or(bounds[1].map(|b| b + step));
                let hi = bounds[2].or(bounds[3].map(|b| b - step));
                let mut v: f64 = if integer { 1.0 } else { 1.5 };
                if let Some(lo) = lo {
                    v = v.max(lo);
                }
                if let Some(hi) = hi {
                    v = v.min(hi);
                }
                if bounds.iter().any(Option::is_some) {
                    sites.push(Site::Number(path.clone(), integer, bounds));
                }
                Some(number(v, integer))
            }
            "boolean" => Some(Value::Bool(true)),
            "null" => Some(Value::Null),
            _ => None,
        }
    }
}

/// A JSON number: an integer when `integer` and `v` has no fraction (beyond `i64`, the nearest
/// `u64`, else the float).
fn number(v: f64, integer: bool) -> Value {
    if integer && v.fract() == 0.0 {
        if (-9.2e18..=9.2e18).contains(&v) {
            return json!(v as i64);
        }
        if (0.0..1.8e19).contains(&v) {
            return json!(v as u64);
        }
    }
    json!(v)
}

/// Merges the values of two schemas that hold the same place (`allOf` members, `$ref` beside
/// other keywords): objects member by member; otherwise the first, unless it is only what the walk
/// makes for a type (then the second, which may be a `const`).
fn merge(a: Value, b: Value) -> Value {
    match (a, b) {
        (Value::Object(mut a), Value::Object(b)) => {
            for (k, v) in b {
                let merged = match a.remove(&k) {
                    Some(old) => merge(old, v),
                    None => v,
                };
                a.insert(k, merged);
            }
            Value::Object(a)
        }
        (a, b) if is_placeholder(&a) && !is_placeholder(&b) => b,
        (a, _) => a,
    }
}

/// `v` with every object's members in name order, whatever order the map keeps (`serde_json`'s
/// `preserve_order` feature may be on in some builds), so the corpus is the same in every build.
pub fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// Whether `v` is what the walk makes for a bare type (`"any"`, a string of `text`, 1, 1.5, true).
fn is_placeholder(v: &Value) -> bool {
    match v {
        Value::String(s) => {
            s == "any" || "text".chars().cycle().take(s.chars().count()).eq(s.chars())
        }
        Value::Number(n) => n.as_f64().is_some_and(|f| f == 1.0 || f == 1.5),
        Value::Bool(b) => *b,
        _ => false,
    }
}

fn at<'v>(value: &'v mut Value, path: &[Seg]) -> Option<&'v mut Value> {
    let mut v = value;
    for seg in path {
        v = match (seg, v) {
            (Seg::Key(k), Value::Object(m)) => m.get_mut(k)?,
            (Seg::Index(i), Value::Array(a)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(v)
}

fn get<'v>(value: &'v Value, path: &[Seg]) -> Option<&'v Value> {
    let mut v = value;
    for seg in path {
        v = match (seg, v) {
            (Seg::Key(k), Value::Object(m)) => m.get(k)?,
            (Seg::Index(i), Value::Array(a)) => a.get(*i)?,
            _ => return None,
        };
    }
    Some(v)
}

/// A value of another JSON type than `v`.
fn wrong_type(v: &Value) -> Value {
    match v {
        Value::String(_) => json!(42),
        Value::Number(_) => json!("42"),
        Value::Bool(_) => json!(1),
        Value::Null => json!(false),
        Value::Object(_) => json!([1]),
        Value::Array(_) => json!({ "item": 1 }),
    }
}

/// `value` with the value at `path` replaced.
fn replaced(value: &Value, path: &[Seg], new: Value) -> Option<Value> {
    let mut out = value.clone();
    *at(&mut out, path)? = new;
    Some(out)
}

/// The mutations of one valid instance: (category, origin, text).
fn mutations(value: &Value, sites: &[Site]) -> Vec<(Category, String, String)> {
    let mut out = Vec::new();
    let mut push = |c: Category, origin: String, v: Option<Value>| {
        if let Some(v) = v {
            out.push((c, origin, canonical(&v).to_string()));
        }
    };
    let mut duplicates = Vec::new();
    let mut values_seen = BTreeSet::new();
    let mut objects_seen = BTreeSet::new();
    for site in sites {
        match site {
            Site::Required(path, keys) => {
                for key in keys {
                    let mut v = value.clone();
                    let removed = at(&mut v, path)
                        .and_then(Value::as_object_mut)
                        .and_then(|o| o.remove(key))
                        .is_some();
                    let mut p = path.clone();
                    p.push(Seg::Key(key.clone()));
                    push(
                        Category::RemoveRequired,
                        format!("remove {}", pointer(&p)),
                        removed.then_some(v),
                    );
                }
            }
            Site::Value(path) => {
                if !values_seen.insert(path.clone()) {
                    continue;
                }
                if let Some(old) = get(value, path) {
                    push(
                        Category::WrongType,
                        format!("wrong type at {}", pointer(path)),
                        replaced(value, path, wrong_type(old)),
                    );
                    if old.as_object().is_some_and(|o| !o.is_empty())
                        && objects_seen.insert(path.clone())
                        && let Some(text) = with_duplicate(value, path)
                    {
                        let (key, _) = old
                            .as_object()
                            .and_then(|o| o.iter().next())
                            .expect("not empty");
                        duplicates.push((
                            Category::DuplicateKey,
                            format!("`{key}` twice at {}", pointer(path)),
                            text,
                        ));
                    }
                }
            }
            Site::Tag(path) => {
                push(
                    Category::UnknownTag,
                    format!("unknown value at {}", pointer(path)),
                    replaced(value, path, json!(UNKNOWN_TAG)),
                );
            }
            Site::Number(path, integer, [min, xmin, max, xmax]) => {
                let step = if *integer { 1.0 } else { 0.5 };
                let mut cross = |what: &str, v: f64| {
                    push(
                        Category::Bound,
                        format!("{what} crossed at {}", pointer(path)),
                        replaced(value, path, number(v, *integer)),
                    )
                };
                if let Some(m) = min {
                    cross("minimum", m - step);
                }
                if let Some(m) = xmin {
                    cross("exclusiveMinimum", *m);
                }
                if let Some(m) = max {
                    cross("maximum", above(*m, step));
                }
                if let Some(m) = xmax {
                    cross("exclusiveMaximum", *m);
                }
            }
            Site::Length(path, min, max) => {
                if let Some(m) = min.filter(|m| *m > 0) {
                    push(
                        Category::Bound,
                        format!("minLength crossed at {}", pointer(path)),
                        replaced(value, path, json!("t".repeat(m as usize - 1))),
                    );
                }
                if let Some(m) = max {
                    push(
                        Category::Bound,
                        format!("maxLength crossed at {}", pointer(path)),
                        replaced(value, path, json!("t".repeat(*m as usize + 1))),
                    );
                }
            }
            Site::Items(path, min, max) => {
                let Some(items) = get(value, path).and_then(Value::as_array) else {
                    continue;
                };
                if let Some(m) = min.filter(|m| *m > 0) {
                    let fewer: Vec<Value> = items.iter().take(m as usize - 1).cloned().collect();
                    push(
                        Category::Bound,
                        format!("minItems crossed at {}", pointer(path)),
                        replaced(value, path, Value::Array(fewer)),
                    );
                }
                if let (Some(m), Some(first)) = (max, items.first()) {
                    let more = vec![first.clone(); *m as usize + 1];
                    push(
                        Category::Bound,
                        format!("maxItems crossed at {}", pointer(path)),
                        replaced(value, path, Value::Array(more)),
                    );
                }
            }
        }
    }
    out.extend(duplicates);
    out
}

/// The smallest number of the kind above `m` that a JSON reader keeps distinct from it.
fn above(m: f64, step: f64) -> f64 {
    let next = m + step;
    if next > m {
        next
    } else {
        f64::from_bits(m.to_bits() + 1)
    }
}

/// `value` as JSON text, with the first member of the object at `path` given twice: first with a
/// value of another type, then (where it was) with its own.
fn with_duplicate(value: &Value, path: &[Seg]) -> Option<String> {
    fn write(v: &Value, path: Option<&[Seg]>, out: &mut String) -> bool {
        match v {
            Value::Object(m) => {
                out.push('{');
                let mut done = false;
                let mut first = true;
                if path.is_some_and(<[Seg]>::is_empty) {
                    let (k, old) = m.iter().next().expect("a duplicate needs a member");
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    out.push_str(&wrong_type(old).to_string());
                    first = false;
                    done = true;
                }
                for (k, item) in m {
                    if !first {
                        out.push(',');
                    }
                    first = false;
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    let sub = match path {
                        Some([Seg::Key(pk), rest @ ..]) if pk == k => Some(rest),
                        _ => None,
                    };
                    done |= write(item, sub, out);
                }
                out.push('}');
                done
            }
            Value::Array(a) => {
                out.push('[');
                let mut done = false;
                for (i, item) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let sub = match path {
                        Some([Seg::Index(pi), rest @ ..]) if *pi == i => Some(rest),
                        _ => None,
                    };
                    done |= write(item, sub, out);
                }
                out.push(']');
                done
            }
            other => {
                out.push_str(&other.to_string());
                false
            }
        }
    }
    let mut out = String::new();
    write(value, Some(path), &mut out).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duplicate_is_written_first_with_another_type() {
        let v = json!({"a": {"k": "v", "z": 1}, "b": [1]});
        let text = with_duplicate(&v, &[Seg::Key("a".into())]).expect("the path holds an object");
        assert_eq!(text, r#"{"a":{"k":42,"k":"v","z":1},"b":[1]}"#);
        let parsed: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(parsed, v, "serde_json keeps the last member");
    }

    #[test]
    fn a_bound_is_crossed_by_the_smallest_step() {
        assert_eq!(above(4294967295.0, 1.0), 4294967296.0);
        let big = 9.223372036854775e18;
        assert!(above(big, 1.0) > big);
        assert_eq!(
            number(above(big, 1.0), true),
            json!(9223372036854775808u64),
            "the next double, 2^63, written as an integer"
        );
    }
}
