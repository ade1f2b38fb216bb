//! Keeps the golden vectors in `tests/vectors/` complete: every type has a vector file with valid
//! and invalid cases, and every constraint of the schema is broken by some invalid case.
//!
//! The constraints are found by walking `SCHEMA_BUNDLE`: each (schema location, keyword) for
//! `type`, `const`, `enum`, `pattern`, `minLength`, `maxLength`, `minimum`, `maximum`,
//! `exclusiveMinimum`, `exclusiveMaximum`, `minItems`, `maxItems`, `additionalProperties: false`,
//! and each property named in `required`.
//!
//! A case covers only the violation it declares (`pointer` and `keyword`), never others it
//! happens to cause, so that deleting any constraint from a schema file makes the case that
//! covers it fail in `vectors.rs`. The declared violation is traced back to its schema
//! location by walking the document and the schema together (`properties`, `items`, `$ref`, and
//! `oneOf` by tag or by JSON type), and must land on a constraint the document really breaks
//! there; one that lands nowhere fails this test too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use openagents_protocol::rt::{DocumentError, Violation};
use openagents_protocol::{SCHEMA_BUNDLE, TYPES, validate_document};
use serde_json::{Map, Value};

/// Keywords that constrain the instance at their own schema location.
const CONSTRAINTS: &[&str] = &[
    "type",
    "const",
    "enum",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
    "required",
    "additionalProperties",
];

/// Keywords that hold subschemas the walker follows, or that constrain nothing.
const STRUCTURE: &[&str] = &["$defs", "properties", "items", "oneOf", "$ref"];
const ANNOTATIONS: &[&str] = &["$schema", "$id", "$comment", "title", "description", "default", "examples", "deprecated"];

/// Constraints no JSON document can break, each with the reason. Empty today: every constraint
/// in the schema can be broken, and is. An entry is (schema location, keyword).
const UNBREAKABLE: &[(&str, &str, &str)] = &[
    // ("#/$defs/Example/properties/x", "maxItems", "why no document can break it"),
];

/// Types that accept every JSON value, so that no invalid case can exist for them. Empty today.
const ACCEPTS_EVERYTHING: &[&str] = &[];

// ---------------------------------------------------------------------------------- vectors

#[derive(Debug)]
struct Case {
    file: String,
    ty: String,
    description: String,
    document: Value,
    /// `None` for a valid case.
    violation: Option<(String, String)>,
}

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors")
}

/// Loads the cases of `dir/*.json`, building each large case's `fill` (the format is described
/// in tests/vectors/README.md; `vectors.rs` checks the files' shape strictly).
fn load(dir: &Path) -> Vec<Case> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for path in files {
        let file = path.strip_prefix(vectors_dir()).unwrap_or(&path).display().to_string();
        let root: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("readable")).expect("vector files are JSON");
        let ty = root["type"].as_str().expect("`type` is a string").to_owned();
        for (key, valid) in [("valid", true), ("invalid", false)] {
            for c in root[key].as_array().into_iter().flatten() {
                let mut document = c["document"].clone();
                if let Some(fill) = c.get("fill") {
                    let times = usize::try_from(fill["times"].as_u64().expect("fill.times")).expect("fits");
                    let built = match &fill["repeat"] {
                        Value::String(unit) => Value::String(format!(
                            "{}{}{}",
                            fill["prefix"].as_str().unwrap_or(""),
                            unit.repeat(times),
                            fill["suffix"].as_str().unwrap_or("")
                        )),
                        item => Value::Array(vec![item.clone(); times]),
                    };
                    *document.pointer_mut(fill["at"].as_str().expect("fill.at")).expect("fill target exists") = built;
                }
                let violation = (!valid).then(|| {
                    (c["pointer"].as_str().expect("pointer").to_owned(), c["keyword"].as_str().expect("keyword").to_owned())
                });
                let description = c["description"].as_str().unwrap_or("").to_owned();
                cases.push(Case { file: file.clone(), ty: ty.clone(), description, document, violation });
            }
        }
    }
    cases
}

fn all_cases() -> Vec<Case> {
    let mut cases = load(&vectors_dir());
    cases.extend(load(&vectors_dir().join("large")));
    cases
}

// ----------------------------------------------------------------------------------- schema

/// A constraint: a schema location (`#/...`) and a keyword (`required/<name>` for each required
/// property).
type Constraint = (String, String);

struct Schema {
    bundle: Value,
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

/// The segments of a JSON pointer (`""` is the whole document).
fn segments(pointer: &str) -> Vec<String> {
    if pointer.is_empty() { Vec::new() } else { pointer.trim_start_matches('/').split('/').map(unescape).collect() }
}

fn is_integer(n: &serde_json::Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// Whether `value` has JSON Schema type `name`.
fn has_type(value: &Value, name: &str) -> bool {
    match (name, value) {
        ("null", Value::Null) | ("boolean", Value::Bool(_)) | ("string", Value::String(_)) => true,
        ("array", Value::Array(_)) | ("object", Value::Object(_)) | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => is_integer(n),
        _ => false,
    }
}

/// JSON Schema equality: numbers by value, objects regardless of key order.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
            (Some(i), Some(j), _, _) => i == j,
            (_, _, Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b)),
        (Value::Object(x), Value::Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w))),
        (a, b) => a == b,
    }
}

impl Schema {
    fn new() -> Self {
        Schema { bundle: serde_json::from_str(SCHEMA_BUNDLE).expect("SCHEMA_BUNDLE is JSON") }
    }

    fn node(&self, loc: &str) -> &Map<String, Value> {
        let pointer = loc.strip_prefix('#').unwrap_or_else(|| panic!("not a local location: {loc}"));
        self.bundle
            .pointer(pointer)
            .and_then(Value::as_object)
            .unwrap_or_else(|| panic!("{loc} is not a schema object in the bundle"))
    }

    // ------------------------------------------------------------- enumerating constraints

    /// Every constraint reachable from the bundle's root, by walking its subschemas.
    fn constraints(&self) -> BTreeSet<Constraint> {
        let mut out = BTreeSet::new();
        self.collect("#", &mut out);
        out
    }

    fn collect(&self, loc: &str, out: &mut BTreeSet<Constraint>) {
        let node = self.node(loc);
        for (k, v) in node {
            match k.as_str() {
                "required" => {
                    for name in v.as_array().expect("required is an array") {
                        out.insert((loc.to_owned(), format!("required/{}", name.as_str().expect("required names are strings"))));
                    }
                }
                "additionalProperties" => match v {
                    Value::Bool(false) => {
                        out.insert((loc.to_owned(), k.clone()));
                    }
                    Value::Bool(true) => {}
                    Value::Object(_) => self.collect(&format!("{loc}/additionalProperties"), out),
                    other => panic!("{loc}: additionalProperties {other}"),
                },
                k if CONSTRAINTS.contains(&k) => {
                    out.insert((loc.to_owned(), k.to_owned()));
                }
                "$defs" | "properties" => {
                    for name in v.as_object().expect("a map of schemas").keys() {
                        self.collect(&format!("{loc}/{k}/{}", escape(name)), out);
                    }
                }
                "oneOf" => {
                    for i in 0..v.as_array().expect("oneOf is an array").len() {
                        self.collect(&format!("{loc}/oneOf/{i}"), out);
                    }
                }
                "items" => self.collect(&format!("{loc}/items"), out),
                k if STRUCTURE.contains(&k) || ANNOTATIONS.contains(&k) || k.starts_with("x-") => {}
                other => panic!(
                    "{loc}: the coverage walker does not know keyword `{other}`; teach it (crates/protocol/tests/coverage.rs) \
                     which constraints it adds and how a violation of it maps back to the schema"
                ),
            }
        }
    }

    // ------------------------------------------------------- tracing a violation to its origin

    /// The schema a `$ref` chain or `oneOf` branch ends at, for reading its `type`.
    fn resolved(&self, loc: &str) -> String {
        let mut loc = loc.to_owned();
        for _ in 0..64 {
            match self.node(&loc).get("$ref").and_then(Value::as_str) {
                Some(r) => loc = r.to_owned(),
                None => return loc,
            }
        }
        panic!("$ref cycle at {loc}")
    }

    /// The tag property of a `oneOf`: a property every branch fixes with `const`.
    fn tag_of(&self, loc: &str) -> Option<String> {
        let n = self.node(loc).get("oneOf")?.as_array()?.len();
        let branches: Vec<String> = (0..n).map(|i| self.resolved(&format!("{loc}/oneOf/{i}"))).collect();
        let first = self.node(&branches[0]).get("properties")?.as_object()?;
        first
            .keys()
            .find(|k| {
                branches.iter().all(|b| {
                    self.node(b).get("properties").and_then(|p| p.get(k.as_str())).and_then(|p| p.get("const")).is_some()
                })
            })
            .cloned()
    }

    /// The `oneOf` branches of `loc` that `value` is checked against: the branch its tag names,
    /// or the branches whose type admits it; all of them when none does.
    fn branches(&self, loc: &str, value: Option<&Value>) -> Vec<String> {
        let n = self.node(loc)["oneOf"].as_array().expect("oneOf").len();
        let all: Vec<String> = (0..n).map(|i| format!("{loc}/oneOf/{i}")).collect();
        let Some(value) = value else { return all };
        let picked: Vec<String> = match self.tag_of(loc) {
            Some(tag) => all
                .iter()
                .filter(|b| {
                    let c = &self.node(&self.resolved(b))["properties"][tag.as_str()]["const"];
                    value.get(tag.as_str()).is_some_and(|t| json_equal(t, c))
                })
                .cloned()
                .collect(),
            None => all
                .iter()
                .filter(|b| match self.node(&self.resolved(b)).get("type") {
                    Some(Value::String(t)) => has_type(value, t),
                    Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).any(|t| has_type(value, t)),
                    _ => true,
                })
                .cloned()
                .collect(),
        };
        if picked.is_empty() { all } else { picked }
    }

    /// `loc` and every schema it hands `value` on to (its `$ref` and chosen `oneOf` branches).
    fn expand(&self, loc: String, value: Option<&Value>, out: &mut Vec<String>) {
        if out.contains(&loc) {
            return;
        }
        out.push(loc.clone());
        let node = self.node(&loc);
        if let Some(r) = node.get("$ref").and_then(Value::as_str) {
            assert!(r.starts_with("#/"), "{loc}: the bundle's $refs are local, found {r}");
            self.expand(r.to_owned(), value, out);
        }
        if node.contains_key("oneOf") {
            for b in self.branches(&loc, value) {
                self.expand(b, value, out);
            }
        }
    }

    /// Every schema location that applies to the value at `pointer` in `document` of type `ty`.
    fn locations(&self, ty: &str, document: &Value, pointer: &[String]) -> (Vec<String>, Option<Value>) {
        let start = TYPES.iter().find(|t| t.name == ty).unwrap_or_else(|| panic!("unknown type {ty}")).pointer;
        let mut value = Some(document);
        let mut locs = Vec::new();
        self.expand(start.to_owned(), value, &mut locs);
        for seg in pointer {
            let child = value.and_then(|v| match v {
                Value::Object(m) => m.get(seg.as_str()),
                Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
                _ => None,
            });
            let mut next = Vec::new();
            for loc in &locs {
                let node = self.node(loc);
                if let Some(p) = node.get("properties").and_then(|p| p.as_object()) {
                    if p.contains_key(seg.as_str()) {
                        self.expand(format!("{loc}/properties/{}", escape(seg)), child, &mut next);
                        continue;
                    }
                }
                if node.get("additionalProperties").is_some_and(Value::is_object) && value.is_some_and(Value::is_object) {
                    self.expand(format!("{loc}/additionalProperties"), child, &mut next);
                }
                if node.get("items").is_some_and(Value::is_object) && value.is_some_and(Value::is_array) {
                    self.expand(format!("{loc}/items"), child, &mut next);
                }
            }
            locs = next;
            value = child;
        }
        (locs, value.cloned())
    }

    /// Whether `value` breaks keyword `kw` of the schema at `loc`.
    fn breaks(&self, loc: &str, kw: &str, value: &Value) -> bool {
        let node = self.node(loc);
        let bound = |k: &str| node[k].as_f64().expect("a numeric bound");
        let count = |k: &str| node[k].as_u64().expect("a count");
        match (kw, value) {
            ("type", v) => match &node["type"] {
                Value::String(t) => !has_type(v, t),
                Value::Array(ts) => !ts.iter().filter_map(Value::as_str).any(|t| has_type(v, t)),
                other => panic!("{loc}: type {other}"),
            },
            ("const", v) => !json_equal(v, &node["const"]),
            ("enum", v) => !node["enum"].as_array().expect("enum").iter().any(|e| json_equal(v, e)),
            ("minLength", Value::String(s)) => (s.chars().count() as u64) < count(kw),
            ("maxLength", Value::String(s)) => (s.chars().count() as u64) > count(kw),
            ("pattern", Value::String(s)) => {
                let re = regress::Regex::with_flags(node["pattern"].as_str().expect("pattern"), "u").expect("the pattern compiles");
                re.find(s).is_none()
            }
            ("minimum", Value::Number(n)) => n.as_f64().is_some_and(|f| f < bound(kw)),
            ("maximum", Value::Number(n)) => n.as_f64().is_some_and(|f| f > bound(kw)),
            ("exclusiveMinimum", Value::Number(n)) => n.as_f64().is_some_and(|f| f <= bound(kw)),
            ("exclusiveMaximum", Value::Number(n)) => n.as_f64().is_some_and(|f| f >= bound(kw)),
            ("minItems", Value::Array(a)) => (a.len() as u64) < count(kw),
            ("maxItems", Value::Array(a)) => (a.len() as u64) > count(kw),
            _ => false,
        }
    }

    /// Whether `value` has a JSON type the schema at `loc` allows: by its `type`, or else by the
    /// types of its `const` or `enum` values.
    fn admits_type(&self, loc: &str, value: &Value) -> bool {
        let node = self.node(loc);
        if node.contains_key("type") {
            return !self.breaks(loc, "type", value);
        }
        match (node.get("const"), node.get("enum")) {
            (Some(c), _) => has_type(value, json_type(c)),
            (None, Some(Value::Array(e))) => e.iter().any(|c| has_type(value, json_type(c))),
            _ => true,
        }
    }

    /// The constraints a case's declared violation comes from.
    fn origins(&self, case: &Case, reported: &[Violation]) -> BTreeSet<Constraint> {
        let (pointer, keyword) = case.violation.as_ref().expect("an invalid case");
        let segs = segments(pointer);
        let mut out = BTreeSet::new();
        match keyword.as_str() {
            "required" => {
                // The property is named in the message; a case must miss exactly one, so that
                // its declared violation stands for one constraint.
                let at: Vec<&Violation> = reported.iter().filter(|v| v.pointer == *pointer && v.keyword == "required").collect();
                let [v] = at.as_slice() else { return out };
                let Some(name) = v.message.split('`').nth(1) else { return out };
                let (locs, value) = self.locations(&case.ty, &case.document, &segs);
                if value.as_ref().and_then(Value::as_object).is_none_or(|o| o.contains_key(name)) {
                    return out;
                }
                for loc in locs {
                    if self.node(&loc).get("required").and_then(Value::as_array).is_some_and(|r| r.iter().any(|n| n == name)) {
                        out.insert((loc, format!("required/{name}")));
                    }
                }
            }
            "additionalProperties" => {
                let Some((name, parent)) = segs.split_last() else { return out };
                let (locs, _) = self.locations(&case.ty, &case.document, parent);
                for loc in locs {
                    let node = self.node(&loc);
                    let declared = node.get("properties").and_then(Value::as_object).is_some_and(|p| p.contains_key(name.as_str()));
                    if node.get("additionalProperties") == Some(&Value::Bool(false)) && !declared {
                        out.insert((loc, keyword.clone()));
                    }
                }
            }
            "oneOf" => {
                // How a tag that names no branch is reported, at the tag: it breaks the `const`
                // of every branch's tag.
                let Some((name, parent)) = segs.split_last() else { return out };
                let (locs, value) = self.locations(&case.ty, &case.document, parent);
                let Some(tag) = value.as_ref().and_then(|v| v.get(name.as_str())) else { return out };
                for loc in locs {
                    if self.tag_of(&loc).as_deref() != Some(name.as_str()) {
                        continue;
                    }
                    for i in 0..self.node(&loc)["oneOf"].as_array().expect("oneOf").len() {
                        let at = format!("{}/properties/{}", self.resolved(&format!("{loc}/oneOf/{i}")), escape(name));
                        if self.breaks(&at, "const", tag) {
                            out.insert((at, "const".to_owned()));
                        }
                    }
                }
            }
            kw => {
                let (locs, value) = self.locations(&case.ty, &case.document, &segs);
                let Some(value) = value else { return out };
                // A value of the wrong JSON type breaks `type`, `const` and `enum` alike,
                // whichever of them a checker names.
                const TYPEISH: [&str; 3] = ["type", "const", "enum"];
                for loc in locs {
                    let wrong_type = !self.admits_type(&loc, &value);
                    for k in CONSTRAINTS.iter().copied().filter(|k| *k != "required" && *k != "additionalProperties") {
                        let named = k == kw || (wrong_type && TYPEISH.contains(&kw) && TYPEISH.contains(&k));
                        if named && self.node(&loc).contains_key(k) && self.breaks(&loc, k, &value) {
                            out.insert((loc.clone(), k.to_owned()));
                        }
                    }
                }
            }
        }
        out
    }
}

/// The JSON Schema type name of a `const`/`enum` value.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn violations(case: &Case) -> Vec<Violation> {
    let bytes = serde_json::to_vec(&case.document).expect("serializes");
    match validate_document(&case.ty, &bytes) {
        Some(Err(DocumentError::Invalid(v))) => v,
        _ => Vec::new(),
    }
}

// ------------------------------------------------------------------------------------ tests

#[test]
fn every_type_has_valid_and_invalid_vectors() {
    let cases = load(&vectors_dir());
    let mut problems = Vec::new();
    for t in TYPES {
        let file = vectors_dir().join(format!("{}.json", t.name));
        let valid = cases.iter().filter(|c| c.ty == t.name && c.violation.is_none()).count();
        let invalid = cases.iter().filter(|c| c.ty == t.name && c.violation.is_some()).count();
        let kind = if t.root { "root type" } else { "type" };
        if !file.exists() {
            problems.push(format!("{kind} {} has no vector file tests/vectors/{}.json", t.name, t.name));
        } else if valid == 0 {
            problems.push(format!("{kind} {} has no valid case", t.name));
        } else if invalid == 0 && !ACCEPTS_EVERYTHING.contains(&t.name) {
            problems.push(format!("{kind} {} has no invalid case", t.name));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_constraint_is_broken_by_an_invalid_vector() {
    let schema = Schema::new();
    let constraints = schema.constraints();
    assert!(constraints.len() > 100, "the walker found only {} constraints", constraints.len());

    let mut covered: BTreeMap<Constraint, Vec<String>> = BTreeMap::new();
    let mut unexplained = Vec::new();
    let cases = all_cases();
    for case in cases.iter().filter(|c| c.violation.is_some()) {
        let reported = violations(case);
        let (pointer, keyword) = case.violation.as_ref().expect("invalid");
        if !reported.iter().any(|v| v.pointer == *pointer && v.keyword == *keyword) {
            unexplained.push(format!(
                "{} {:?}: `{keyword}` at {pointer:?} is not reported (vectors.rs shows why); it covers nothing",
                case.file, case.description
            ));
            continue;
        }
        let origins = schema.origins(case, &reported);
        if origins.is_empty() {
            unexplained.push(format!(
                "{} {:?}: `{keyword}` at {pointer:?} traces back to no constraint of the schema (a `required` case must miss exactly one property)",
                case.file, case.description
            ));
        }
        for o in origins {
            covered.entry(o).or_default().push(format!("{}: {}", case.file, case.description));
        }
    }

    let mut problems = unexplained;
    for (loc, kw, reason) in UNBREAKABLE {
        assert!(!reason.is_empty(), "{loc} {kw}: an unbreakable constraint needs its reason");
        if !constraints.contains(&((*loc).to_owned(), (*kw).to_owned())) {
            problems.push(format!("UNBREAKABLE lists {loc} `{kw}`, which is no longer in the schema"));
        }
        if covered.contains_key(&((*loc).to_owned(), (*kw).to_owned())) {
            problems.push(format!("UNBREAKABLE lists {loc} `{kw}`, but a vector breaks it: remove it from the list"));
        }
    }
    let missing: Vec<&Constraint> = constraints
        .iter()
        .filter(|c| !covered.contains_key(*c) && !UNBREAKABLE.iter().any(|(l, k, _)| c.0 == *l && c.1 == *k))
        .collect();
    for (loc, kw) in &missing {
        problems.push(format!("no invalid vector breaks {loc} `{kw}`"));
    }
    assert!(
        problems.is_empty(),
        "{} problem(s) with the vectors' coverage of {} constraints ({} covered):\n{}",
        problems.len(),
        constraints.len(),
        covered.len(),
        problems.join("\n")
    );
}
