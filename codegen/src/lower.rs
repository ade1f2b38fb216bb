//! Lowering: schema documents -> the [`TypeSpace`] model, refusing anything outside the
//! supported keyword subset with an error that names the file, the pointer and the keyword.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::{Map, Value};

use crate::error::{Refusals, SchemaError, push_pointer};
use crate::load::{DIALECT, Documents, stem};
use crate::model::*;
use crate::naming::{self, Names, pascal};
use crate::pattern;

/// Every keyword the generator understands. Anything else is refused, except other tools'
/// annotations (`x-…` keywords and [`TOOL_ANNOTATIONS`], see [`is_foreign_extension`]), which
/// are ignored.
pub const SUPPORTED_KEYWORDS: &[&str] = &[
    "$schema",
    "$id",
    "$ref",
    "$defs",
    "definitions",
    "$comment",
    "title",
    "description",
    "default",
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "dependentSchemas",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "discriminator",
    "unevaluatedProperties",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "format",
    "deprecated",
    "readOnly",
    "writeOnly",
    "examples",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "x-constants",
    "x-extensible",
    "x-enum",
    "x-result",
    "x-openrpc",
    "x-echoed",
];

/// Where a file keeps its named schemas: `$defs`, and `definitions`, the place earlier dialects
/// keep them (2020-12's own meta-schema still declares it, as `$defs` under another name). Each
/// member of either at a file's root is a named type.
pub const DEFS_KEYWORDS: [&str; 2] = ["$defs", "definitions"];

/// A union branch resolved through one `$ref`: its file, its pointer and its schema object.
type BranchMap = (String, String, Map<String, Value>);

/// Marks the pseudo-location of the object rules of a schema that allows other types too.
const OBJECT_PART: &str = "\u{0}object";

/// Keywords that never change what a schema accepts, so they may stand beside `$ref` or a `oneOf`:
/// among them 2020-12's meta-data and content annotations (`deprecated`, `examples`,
/// `contentMediaType`, … which its validators do not assert either), ignored.
const ANNOTATIONS: &[&str] = &[
    "$comment",
    "title",
    "description",
    "default",
    "$defs",
    "definitions",
    "$schema",
    "$id",
    "deprecated",
    "readOnly",
    "writeOnly",
    "examples",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "x-constants",
    "x-openrpc",
];

/// Keywords other tools define for editors and messages, which never change what a document is
/// valid against: the extensions of the JSON language service of VS Code and other editors
/// (`markdownDescription`, `enumDescriptions`, `defaultSnippets`, `allowComments`, …), the
/// custom messages of ajv-errors (`errorMessage`) and OpenAPI's `example`. A keyword outside this
/// list and outside the subset is refused, so a misspelled rule (`minLenght`) is never ignored.
pub const TOOL_ANNOTATIONS: &[&str] = &[
    "markdownDescription",
    "enumDescriptions",
    "markdownEnumDescriptions",
    "enumItemLabels",
    "deprecationMessage",
    "errorMessage",
    "patternErrorMessage",
    "defaultSnippets",
    "doNotSuggest",
    "suggestSortText",
    "allowComments",
    "allowTrailingCommas",
    "example",
];

/// Whether `key` is another tool's annotation: an `x-…` keyword other than the generator's own
/// (those in [`SUPPORTED_KEYWORDS`]), such as ACP's `x-method`, `x-side` or
/// `x-deserialize-default-on-error`, or one of [`TOOL_ANNOTATIONS`]. JSON Schema ignores
/// keywords it does not know, so the lowering ignores these wherever they appear: they are
/// neither refused nor kept in the model. Our own extensions keep their meaning and their
/// checks; a misspelling of one of them (such as `x-extensibel`) is, like any other tool's
/// keyword, ignored.
pub fn is_foreign_extension(key: &str) -> bool {
    (key.starts_with("x-") && !SUPPORTED_KEYWORDS.contains(&key)) || TOOL_ANNOTATIONS.contains(&key)
}

/// Whether `key` is an annotation: one of [`ANNOTATIONS`] or a foreign `x-…` keyword.
fn is_annotation(key: &str) -> bool {
    ANNOTATIONS.contains(&key) || is_foreign_extension(key)
}

/// Whether `key` in `map` changes nothing about what `map` accepts wherever it stands: an
/// annotation, or a `format` other than one of [`INTEGER_FORMATS`] (which may bound an integer).
fn is_annotation_in(key: &str, map: &Map<String, Value>) -> bool {
    is_annotation(key)
        || (key == "format" && integer_format(map).is_none())
        || (key == "unevaluatedProperties" && map.get(key) == Some(&Value::Bool(true)))
        || key == "discriminator"
        || (matches!(key, "if" | "then" | "else") && !has_conditional(map))
        || (matches!(key, "minContains" | "maxContains") && !map.contains_key("contains"))
        || (matches!(key, "patternProperties" | "minProperties" | "maxProperties" | "propertyNames" | "dependentRequired" | "dependentSchemas") && !has_member_rules(map))
}

/// The smallest `f64` above -2^63 (that is -2^63 + 1024). Bounds are compared as `f64` (see
/// [`NumberRules`]), and every integer from -2^63 - 1024 to -2^63 rounds to -2^63 as an `f64`,
/// so `i64::MIN` itself as a bound would let integers below -2^63 through; this one refuses every
/// such integer, at the price of refusing the 513 lowest `i64`s too.
pub const I64_SAFE_MIN: f64 = -9_223_372_036_854_774_784.0;

/// The largest `f64` below 2^63 (that is 2^63 - 1024): `i64::MAX` as an `f64` rounds up to
/// 2^63, so as a bound it would let 2^63 and above through; this one refuses every integer the
/// model's `i64` cannot hold, at the price of refusing the 512 highest `i64`s too.
pub const I64_SAFE_MAX: f64 = 9_223_372_036_854_774_784.0;

/// The integer `format`s schemars writes (for `i8` … `u64`, `isize` as `int`, `usize` as `uint`)
/// with the range each implies on an `integer` schema, as `(format, minimum, maximum)`.
///
/// Every range up to 32 bits is exact. The model's integer is an `i64` (the Rust types decode
/// it so) and bounds are compared as `f64`, so the 64-bit ones are [`I64_SAFE_MIN`] and
/// [`I64_SAFE_MAX`]: an `int64` refuses its 513 lowest and 512 highest values, and a `uint64`
/// (and `uint`) refuses every value above [`I64_SAFE_MAX`], which the schema allows but the model
/// cannot hold. Neither ever accepts a value the format excludes.
pub const INTEGER_FORMATS: &[(&str, f64, f64)] = &[
    ("int8", i8::MIN as f64, i8::MAX as f64),
    ("int16", i16::MIN as f64, i16::MAX as f64),
    ("int32", i32::MIN as f64, i32::MAX as f64),
    ("int64", I64_SAFE_MIN, I64_SAFE_MAX),
    ("int", I64_SAFE_MIN, I64_SAFE_MAX),
    ("uint8", 0.0, u8::MAX as f64),
    ("uint16", 0.0, u16::MAX as f64),
    ("uint32", 0.0, u32::MAX as f64),
    ("uint64", 0.0, I64_SAFE_MAX),
    ("uint", 0.0, I64_SAFE_MAX),
];

/// The range `map`'s `format` implies, when it is one of [`INTEGER_FORMATS`]. Whether it
/// applies (only on a schema whose one non-null type is `integer`) is the caller's question.
fn integer_format(map: &Map<String, Value>) -> Option<(f64, f64)> {
    let f = map.get("format")?.as_str()?;
    INTEGER_FORMATS.iter().find(|(name, _, _)| *name == f).map(|&(_, min, max)| (min, max))
}

/// Lowers every document into one type space.
///
/// # Errors
///
/// The first [`SchemaError`] found, in file order (the first of [`lower_all`]'s refusals).
pub fn lower(docs: &Documents) -> Result<TypeSpace, SchemaError> {
    lower_all(docs).map_err(Refusals::into_first)
}

/// Lowers every document into one type space, or finds every refusal at once.
///
/// Each named type is lowered on its own, so one refused type does not hide the others'
/// refusals (each type gives its first); then [`keyword_scan`] adds every refused keyword the
/// lowering did not reach (a type stops at its first refusal, and nothing under a refused
/// keyword is lowered). The scan runs only when the lowering refuses, so it never changes which
/// schemas are accepted: it only reports more of what is wrong with one that is refused.
///
/// # Errors
///
/// Every refusal: the lowering's, in the order it found them (file order, then named type), then
/// the scan's that the lowering did not report, in document order.
pub fn lower_all(docs: &Documents) -> Result<TypeSpace, Refusals> {
    let mut refusals = Vec::new();
    let space = lower_each(docs, &mut refusals);
    if refusals.is_empty() {
        return Ok(space);
    }
    for e in keyword_scan(docs) {
        if !refusals.contains(&e) {
            refusals.push(e);
        }
    }
    Refusals::from_vec(refusals).map_or(Ok(space), Err)
}

/// Every refused keyword in every document: each schema object's keywords outside
/// [`SUPPORTED_KEYWORDS`] (and those allowed only at a file's root, a foreign `$schema`, a
/// `$id` that is not the file's name), found by walking every place JSON Schema 2020-12 holds a
/// subschema, the unsupported applicators (`anyOf`, `allOf`, `not`, …) included. Nested `$defs`
/// (below a file's root) are walked only as the lowering reaches them, by `$ref`.
pub fn keyword_scan(docs: &Documents) -> Vec<SchemaError> {
    let mut out = Vec::new();
    for (file, doc) in &docs.files {
        scan_schema(file, "", doc, &mut out);
    }
    out
}

fn scan_schema(file: &str, pointer: &str, schema: &Value, out: &mut Vec<SchemaError>) {
    let Value::Object(map) = schema else { return };
    let is_root = pointer.is_empty();
    out.extend(keyword_refusals(file, pointer, map, is_root));
    for (key, value) in map {
        let at = push_pointer(pointer, key);
        match (key.as_str(), value) {
            ("$defs" | "definitions", _) if !is_root => {}
            ("items" | "additionalProperties" | "x-result" | "not" | "if" | "then" | "else" | "contains" | "propertyNames"
            | "unevaluatedItems" | "unevaluatedProperties" | "additionalItems", Value::Object(_)) => {
                scan_schema(file, &at, value, out);
            }
            ("properties" | "$defs" | "definitions" | "patternProperties" | "dependentSchemas", Value::Object(m)) => {
                for (k, v) in m {
                    scan_schema(file, &push_pointer(&at, k), v, out);
                }
            }
            ("oneOf" | "anyOf" | "allOf" | "prefixItems" | "items", Value::Array(list)) => {
                for (i, v) in list.iter().enumerate() {
                    scan_schema(file, &push_pointer(&at, &i.to_string()), v, out);
                }
            }
            _ => {}
        }
    }
}

/// A number inside an `enum` or `const` value that is whole but was not read as a signed 64-bit
/// integer and is beyond 2^53, where doubles stop holding every integer (`1e18`, `2^70`), or an
/// integer beyond the signed 64 bits the typed Rust path holds (`2^64 - 1`), written as read.
fn inexact_number(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) if n.is_u64() => n.as_u64().filter(|u| i64::try_from(*u).is_err()).map(|_| n.to_string()),
        Value::Number(n) if n.is_f64() => n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() > 9_007_199_254_740_992.0).map(|_| n.to_string()),
        Value::Array(items) => items.iter().find_map(inexact_number),
        Value::Object(members) => members.values().find_map(inexact_number),
        _ => None,
    }
}

/// Whether two values of a schema are the same JSON value (`1` and `1.0` are).
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            // An integer equals a double only when the double is that whole number.
            let whole = |n: &serde_json::Number| n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
            let exact = |f: Option<f64>, i: i128| f.is_some_and(|f| f.is_finite() && f.fract() == 0.0 && f.abs() < 2f64.powi(100) && f as i128 == i);
            match (whole(x), whole(y)) {
                (Some(i), Some(j)) => i == j,
                (Some(i), None) => exact(y.as_f64(), i),
                (None, Some(j)) => exact(x.as_f64(), j),
                (None, None) => x.as_f64() == y.as_f64(),
            }
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b)),
        (Value::Object(x), Value::Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w))),
        _ => a == b,
    }
}

/// Every keyword refusal of one schema object: keywords outside the subset, root-only keywords
/// elsewhere, a foreign dialect, a `$id` other than the file's name.
fn keyword_refusals(file: &str, pointer: &str, map: &Map<String, Value>, is_root: bool) -> Vec<SchemaError> {
    let mut out = Vec::new();
    for key in map.keys() {
        if !SUPPORTED_KEYWORDS.contains(&key.as_str()) && !is_foreign_extension(key) {
            let message = if crate::load::JSON_SCHEMA_KEYWORDS.contains(&key.as_str()) {
                format!("`{key}` is outside the supported subset of JSON Schema ({})", SUPPORTED_KEYWORDS.join(", "))
            } else {
                format!(
                    "`{key}` is not a keyword of JSON Schema nor of the supported subset ({}); if it is another tool's annotation that no validator checks, declare it with `--annotation {key}`",
                    SUPPORTED_KEYWORDS.join(", ")
                )
            };
            out.push(err(file, pointer, key, message));
        } else if !is_root && matches!(key.as_str(), "$schema" | "$id" | "x-constants" | "x-openrpc") {
            out.push(err(file, pointer, key, format!("`{key}` is only supported at the root of a schema file")));
        }
    }
    if map.get("unevaluatedProperties").is_some_and(|u| !u.is_boolean() && !u.is_object()) {
        out.push(err(file, pointer, "unevaluatedProperties", "must be a schema"));
    }
    if map.get("format").is_some_and(|f| !f.is_string()) {
        out.push(err(file, pointer, "format", "must be a string"));
    }
    for key in ["enum", "const"] {
        let values = match map.get(key) {
            Some(Value::Array(list)) if key == "enum" => list.iter().collect::<Vec<_>>(),
            Some(v) if key == "const" => vec![v],
            _ => continue,
        };
        if let Some(n) = values.into_iter().find_map(inexact_number) {
            out.push(err(file, pointer, key, format!("the whole number `{n}` is written with a fraction or an exponent, or is beyond 64 bits: the schema's numbers are read as 64-bit integers or doubles, and a document's integer could not be compared with it exactly in every language; write it as an integer within -2^63..2^63")));
        }
    }
    if let Some(s) = map.get("$schema")
        && s.as_str() != Some(DIALECT)
    {
        out.push(err(file, pointer, "$schema", format!("only the 2020-12 dialect (`{DIALECT}`) and the earlier ones it reads ({}) are supported", crate::dialect::EARLIER_DIALECTS.join(", "))));
    }
    if let Some(id) = map.get("$id")
        && id.as_str().unwrap_or_default() != file
        && !id.as_str().is_some_and(crate::load::is_absolute_uri)
    {
        out.push(err(file, pointer, "$id", format!("`$id` must be the file's own name (`{file}`) or an absolute URI naming the file (`https://…/{file}`)")));
    }
    out
}

/// The lowering proper: every named type lowered on its own, each refusal kept in `refusals`.
fn lower_each(docs: &Documents, refusals: &mut Vec<SchemaError>) -> TypeSpace {
    let mut cx = Lowerer { docs, space: TypeSpace::default(), names: BTreeMap::new(), taken: BTreeSet::new(), queue: VecDeque::new(), error_codes: Vec::new(), untyped: BTreeSet::new(), guard_index: BTreeMap::new(), pending_guards: Vec::new() };
    // Names first, so they do not depend on the order references are met in.
    for (file, doc) in &docs.files {
        let name = cx.root_name(file, doc);
        cx.claim(file, "", name);
    }
    // A key that is already its own name first, so that no other key's name takes it (`foo`
    // would be `Foo`, and so would `Foo`): every key a name can be is that name.
    for exact in [true, false] {
        for (file, doc) in &docs.files {
            for (keyword, defs) in DEFS_KEYWORDS.iter().filter_map(|k| Some((*k, doc.get(*k)?.as_object()?))) {
                for key in defs.keys() {
                    let base = pascal(key, "Def");
                    if (base == *key) != exact {
                        continue;
                    }
                    let pointer = push_pointer(&format!("/{keyword}"), key);
                    let name = if cx.taken.contains(&base) { format!("{}{}", pascal(stem(file), "Schema"), base) } else { base };
                    cx.claim(file, &pointer, name);
                }
            }
        }
    }
    for (file, doc) in &docs.files {
        let name = cx.names[&(file.clone(), String::new())].clone();
        cx.space.roots.push(name);
        if let Err(e) = cx.constants(file, doc) {
            refusals.push(e);
        }
    }
    loop {
        while let Some((file, pointer, name)) = cx.queue.pop_front() {
            if let Err(e) = cx.lower_named(&file, &pointer, &name) {
                refusals.push(e);
            }
        }
        // The branches nested `unevaluatedProperties` checks test, once every type reachable
        // otherwise has its name (lowering one may queue more types, and more branches).
        let pending = std::mem::take(&mut cx.pending_guards);
        if pending.is_empty() {
            break;
        }
        for (i, g) in pending {
            match cx.node(&g.file, &g.pointer, &g.schema, &g.hint) {
                Ok(n) if g.test == GuardTest::Fails => cx.space.guards[i] = Guard::Fails(n),
                Ok(n) => cx.space.guards[i] = Guard::Matches(n),
                Err(e) => refusals.push(e),
            }
        }
    }
    for (file, doc) in &docs.files {
        let holds_methods = cx.space.methods.as_ref().is_some_and(|m| cx.space.types.get(&m.union).is_some_and(|t| &t.origin.file == file));
        if doc.get("x-openrpc").is_some() && !holds_methods {
            refusals.push(err(file, "", "x-openrpc", "`x-openrpc` belongs at the root of the file holding the method union (the `oneOf` whose branches have `x-result`)"));
        }
    }
    refusals.extend(same_place_cycles(&cx.space));
    name_branches(&mut cx.space);
    cx.space.sides = sides(&cx.space, &cx.names, docs);
    match error_set(&cx.space, &cx.error_codes) {
        Ok(errors) => cx.space.errors = errors,
        Err(e) => refusals.push(e),
    }
    cx.space
}

/// Named types that reach themselves at the same place of a document: through `$ref`s and
/// applicators only, never descending into a property or an item (`{"$ref": "#"}` at the root,
/// `A: {"anyOf": [{"$ref": "#/$defs/A"}, …]}`). Checking such a schema never finishes, and a type
/// cannot hold itself, so each cycle is refused once, at the type it is first met from.
fn same_place_cycles(space: &TypeSpace) -> Vec<SchemaError> {
    fn refs(node: &Node, out: &mut BTreeSet<String>) {
        if let Some(r) = &node.reference {
            out.insert(r.clone());
        }
        for n in node.applied.nodes() {
            refs(n, out);
        }
    }
    let edges: BTreeMap<&str, BTreeSet<String>> = space
        .types
        .values()
        .map(|t| {
            let mut out = BTreeSet::new();
            if let TypeKind::Alias(n) = &t.kind {
                refs(n, &mut out);
            }
            (t.name.as_str(), out)
        })
        .collect();
    let mut reported: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for start in edges.keys() {
        if reported.contains(*start) {
            continue;
        }
        // Depth-first from `start`, keeping the path, until `start` is met again.
        let mut stack: Vec<(String, Vec<String>)> = vec![(start.to_string(), vec![start.to_string()])];
        let mut seen = BTreeSet::new();
        while let Some((at, path)) = stack.pop() {
            for next in edges.get(at.as_str()).into_iter().flatten() {
                if next == start {
                    let t = &space.types[*start];
                    let mut cycle = path.clone();
                    cycle.push(next.clone());
                    out.push(err(&t.origin.file, &t.origin.pointer, "$ref", format!("`{}` refers back to itself at the same place of a document ({}) without descending into a property or an item: checking it would never finish", start, cycle.join(" -> "))));
                    reported.extend(path.iter().cloned());
                    stack.clear();
                    break;
                }
                if seen.insert(next.clone()) {
                    let mut p = path.clone();
                    p.push(next.clone());
                    stack.push((next.clone(), p));
                }
            }
        }
    }
    out
}

/// The methods marked with `x-method` and `x-side` on named types, grouped by side (see
/// [`Side`]). A type with only one of the two marks, or marks that are not strings, is not a
/// method; a second params type for one method and side keeps the first (in type-name order).
fn sides(space: &TypeSpace, names: &BTreeMap<(String, String), String>, docs: &Documents) -> Vec<Side> {
    // (side, method) -> (params, result)
    let mut marked: BTreeMap<(String, String), (Option<String>, Option<String>)> = BTreeMap::new();
    for ((file, pointer), name) in names {
        let Some(schema) = docs.get(file, pointer) else { continue };
        let (Some(method), Some(side)) = (schema.get("x-method").and_then(Value::as_str), schema.get("x-side").and_then(Value::as_str)) else { continue };
        if !space.types.contains_key(name) {
            continue;
        }
        let entry = marked.entry((side.to_owned(), method.to_owned())).or_default();
        let slot = if name.ends_with("Response") { &mut entry.1 } else { &mut entry.0 };
        if slot.as_ref().is_none_or(|s| name < s) {
            *slot = Some(name.clone());
        }
    }
    build_sides(space, marked)
}

/// The sides of `marked` methods ((side, method) → (params type, result type)): a method with a
/// result is a request, one without a notification; a method without params type is left out.
pub(crate) fn build_sides(space: &TypeSpace, marked: BTreeMap<(String, String), (Option<String>, Option<String>)>) -> Vec<Side> {
    let mut out: Vec<Side> = Vec::new();
    for ((side, method), (params, result)) in marked {
        let Some(params) = params else { continue };
        if out.last().is_none_or(|s| s.name != side) {
            out.push(Side { name: side.clone(), requests: Vec::new(), notifications: Vec::new() });
        }
        let s = out.last_mut().expect("pushed above");
        let taken: BTreeSet<String> = s.requests.iter().chain(&s.notifications).map(|m| m.variant.clone()).collect();
        // `Request` and `Notification` name the side's enums beside the methods' marker types.
        let variant = naming::unique(&pascal(&method, "Method"), |n| taken.contains(n) || matches!(n, "Unknown" | "Request" | "Notification"));
        let description = space.types.get(&params).and_then(|t| t.description.clone());
        let m = MarkedMethod { method, variant, params, result: result.clone(), description };
        if result.is_some() { s.requests.push(m) } else { s.notifications.push(m) }
    }
    out
}

/// Gives every union branch its type name, once for every language: `<Union><Variant>` (and,
/// for an extensible union, `Unknown<Union>` for the unknown branch) under [`naming::unique`],
/// never a type's name, a reserved name, or `Known<Union>` (TypeScript's union of the known
/// branches).
fn name_branches(space: &mut TypeSpace) {
    let mut names = Names::with_reserved(naming::RESERVED_TYPE_NAMES.iter().copied());
    for t in space.types.values() {
        names.reserve(&t.name);
        if matches!(t.kind, TypeKind::Union(_)) {
            names.reserve(&format!("Known{}", t.name));
        }
    }
    for t in space.types.values_mut() {
        let TypeKind::Union(u) = &mut t.kind else { continue };
        if u.extensible {
            u.unknown_type_name = Some(names.claim(&format!("Unknown{}", t.name)));
        }
        for v in &mut u.variants {
            v.type_name = names.claim(&format!("{}{}", t.name, v.name));
        }
    }
}

/// The error set: the one string enum whose values carry `rpc_code` and `retryable` (checked
/// per value by `string_enum`), each code's JSON-RPC number its own, and each code's class name
/// decided under [`naming::unique`].
fn error_set(space: &TypeSpace, candidates: &[(String, Vec<(bool, i64)>)]) -> Result<Option<ErrorSet>, SchemaError> {
    let Some((enum_name, codes)) = candidates.first() else { return Ok(None) };
    let t = &space.types[enum_name];
    if let Some((second, _)) = candidates.get(1) {
        let o = &space.types[second].origin;
        return Err(err(&o.file, &o.pointer, "x-enum", format!("only one error-code enum (values with `rpc_code`) is supported; `{enum_name}` is one already")));
    }
    let TypeKind::StringEnum(e) = &t.kind else { return Ok(None) };
    let mut names = Names::with_reserved(naming::RESERVED_TYPE_NAMES.iter().chain(naming::ERROR_BASE_NAMES).copied());
    for t in space.types.values() {
        names.reserve(&t.name);
        if let TypeKind::Union(u) = &t.kind {
            for v in &u.variants {
                names.reserve(&v.type_name);
            }
        }
    }
    let carrier = space.types.values().find(|c| match &c.kind {
        TypeKind::Struct(s) => s.fields.iter().any(|f| f.name == "code" && f.node.reference.as_deref() == Some(enum_name.as_str())) && s.fields.iter().any(|f| f.name == "message"),
        _ => false,
    });
    let base_class_name = carrier.map(|c| names.claim(&format!("{}Exception", c.name.strip_suffix("Error").unwrap_or(&c.name))));
    let mut out: Vec<ErrorCode> = Vec::new();
    for (v, &(retryable, rpc_code)) in e.values.iter().zip(codes) {
        if let Some(other) = out.iter().find(|c| c.rpc_code == rpc_code) {
            let at = push_pointer(&push_pointer(&t.origin.pointer, "x-enum"), &v.value);
            return Err(err(
                &t.origin.file,
                &push_pointer(&at, "rpc_code"),
                "x-enum",
                format!("`{}` has the JSON-RPC code {rpc_code} of `{}`; every code needs its own, since clients map the number back to the code", v.value, other.value),
            ));
        }
        out.push(ErrorCode {
            value: v.value.clone(),
            name: v.name.clone(),
            class_name: names.claim(&format!("{}Error", v.name)),
            description: v.description.clone(),
            retryable,
            rpc_code,
        });
    }
    Ok(Some(ErrorSet { enum_name: enum_name.clone(), extensible: e.extensible, carrier: carrier.map(|c| c.name.clone()), base_class_name, codes: out }))
}

struct Lowerer<'a> {
    docs: &'a Documents,
    space: TypeSpace,
    /// `(file, pointer)` of every named location, to its type name.
    names: BTreeMap<(String, String), String>,
    taken: BTreeSet<String>,
    queue: VecDeque<(String, String, String)>,
    /// Named string enums whose values carry `retryable` and `rpc_code`, with them per value.
    error_codes: Vec<(String, Vec<(bool, i64)>)>,
    /// Locations that look like a tagged union but whose branches typed code cannot hold
    /// exactly: lowered as checked values instead.
    untyped: BTreeSet<(String, String)>,
    /// `(file, pointer)` of each entry of `space.guards`, to its index.
    guard_index: BTreeMap<(String, String, GuardTest), usize>,
    /// The `Guard::Matches` entries of `space.guards` still to lower (index and where), lowered
    /// once every named type is, so that a branch's types get the names its own place gives.
    pending_guards: Vec<(usize, GuardKey)>,
}

/// A nested branch an `unevaluatedProperties` check tests, before it has an index.
#[derive(Clone)]
struct GuardKey {
    file: String,
    pointer: String,
    hint: String,
    schema: Value,
    /// What the guard asks of the value.
    test: GuardTest,
}

/// Schemas that apply to a value only when it passes a test (see [`Lowerer::evaluated`]): the
/// test, on the schema at `at`, and the parts that then apply, each with its keyword (none: the
/// schema at `at` itself).
struct Conditioned<'v> {
    test: GuardTest,
    label: &'static str,
    at: String,
    schema: &'v Value,
    parts: Vec<(&'static str, &'v Value)>,
}

/// What a [`GuardKey`] asks of the value.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
enum GuardTest {
    /// It matches the schema (a branch, an `if` whose `then` applies).
    Matches,
    /// A branch of a tagged union: its tag property has the branch's value.
    Tag(String, String),
    /// It does not match the schema (an `if` whose `else` applies).
    Fails,
    /// It has the member the schema depends on (a `dependentSchemas` entry).
    Present(String),
}

/// How many ways of reaching a nested branch one `unevaluatedProperties` may see (each is checked
/// for every object it applies to).
const MAX_NESTED_BRANCHES: usize = 256;

/// Whether a value of `types` may be `v` (a whole number is an integer, `1.0` included).
fn value_allowed(types: Types, v: &Value) -> bool {
    match v {
        Value::Null => types.contains(Types::NULL),
        Value::Bool(_) => types.contains(Types::BOOLEAN),
        Value::Number(n) => {
            let whole = n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0);
            if whole { types.contains(Types::INTEGER) } else { types.allows_fraction() }
        }
        Value::String(_) => types.contains(Types::STRING),
        Value::Array(_) => types.contains(Types::ARRAY),
        Value::Object(_) => types.contains(Types::OBJECT),
    }
}

/// The name hint of a `$ref` target at `pointer` in `file`: the file's name for its root, else the
/// pointer's last step.
fn ref_hint(file: &str, pointer: &str) -> String {
    if pointer.is_empty() { pascal(stem(file), "Root") } else { pascal(pointer.rsplit('/').next().unwrap_or(""), "Ref") }
}

/// What `Lowerer::evaluated` gathers for one `unevaluatedProperties`: the schema it belongs to
/// (where errors point), the nested branches found so far (each with its guards, outermost
/// first, and what it evaluates), and the `$ref` targets on the way.
struct Walk<'a> {
    owner: (&'a str, &'a str),
    nested: Vec<(Vec<GuardKey>, PropSet)>,
    refs: Vec<(String, String)>,
}

impl Walk<'_> {
    /// Keeps what a part that applies only under `when` evaluates, unless it evaluates nothing;
    /// refused past [`MAX_NESTED_BRANCHES`].
    fn push_nested(&mut self, when: Vec<GuardKey>, set: PropSet) -> Result<(), SchemaError> {
        if set.is_empty() {
            return Ok(());
        }
        if self.nested.len() == MAX_NESTED_BRANCHES {
            return Err(err(self.owner.0, self.owner.1, "unevaluatedProperties", format!("the schemas `unevaluatedProperties` sees through reach more than {MAX_NESTED_BRANCHES} nested `anyOf`/`oneOf` branches (each way of reaching one counts): not supported")));
        }
        self.nested.push((when, set));
        Ok(())
    }
}

/// Where a schema sits: its file, its pointer there, and the name hint for what it declares.
#[derive(Clone, Copy)]
struct Here<'a> {
    file: &'a str,
    pointer: &'a str,
    hint: &'a str,
}

fn err(file: &str, pointer: &str, keyword: &str, message: impl Into<String>) -> SchemaError {
    SchemaError::new(file, pointer, keyword, message)
}

/// A non-negative whole number (`2.0` included, as JSON Schema reads it).
fn whole(file: &str, pointer: &str, keyword: &str, v: &Value) -> Result<u64, SchemaError> {
    if let Some(n) = v.as_u64() {
        return Ok(n);
    }
    match v.as_f64() {
        Some(f) if f >= 0.0 && f.fract() == 0.0 && f < 9.0e15 => Ok(f as u64),
        _ => Err(err(file, pointer, keyword, "must be a non-negative integer")),
    }
}

/// A bound, as the double every language compares with. An integer no double holds exactly
/// (beyond 2^53: `9007199254740993`) is refused: Python compares integers with it exactly, Rust
/// and TypeScript as doubles, and they would disagree next to it. `i64::MAX` as an upper bound
/// is the exception: it is read as [`I64_SAFE_MAX`], as the `int64` format is.
fn number(file: &str, pointer: &str, keyword: &str, v: &Value) -> Result<f64, SchemaError> {
    let f = v.as_f64().ok_or_else(|| err(file, pointer, keyword, "must be a number"))?;
    let whole = v.as_i64().map(i128::from).or_else(|| v.as_u64().map(i128::from));
    if let Some(i) = whole
        && (f as i128 != i || f.abs() >= 2f64.powi(127))
    {
        // `i64::MAX`, which schemas write as the top of a 64-bit integer's range, is read as the
        // `int64` format's top, [`I64_SAFE_MAX`] (its double, 2^63, is above it).
        if i == i128::from(i64::MAX) && matches!(keyword, "maximum" | "exclusiveMaximum") {
            return Ok(I64_SAFE_MAX);
        }
        return Err(err(file, pointer, keyword, format!("`{i}` is no double exactly (the nearest is {f:e}): the bounds are compared as doubles, and an integer next to this one would be judged differently in each language; write a bound a double holds")));
    }
    Ok(f)
}

fn literal_types(v: &Value) -> Types {
    match v {
        Value::Null => Types::NULL,
        Value::Bool(_) => Types::BOOLEAN,
        Value::Number(n) if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) => Types::INTEGER,
        Value::Number(_) => Types::NUMBER,
        Value::String(_) => Types::STRING,
        Value::Array(_) => Types::ARRAY,
        Value::Object(_) => Types::OBJECT,
    }
}

/// Whether a schema holds a `$ref` anywhere inside.
fn has_ref(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.contains_key("$ref") || m.values().any(has_ref),
        Value::Array(items) => items.iter().any(has_ref),
        _ => false,
    }
}

/// The JSON types one name in `type` stands for (`number` includes `integer`).
fn type_name(v: &Value) -> Option<Types> {
    Some(match v.as_str()? {
        "null" => Types::NULL,
        "boolean" => Types::BOOLEAN,
        "integer" => Types::INTEGER,
        "number" => Types::NUMBER,
        "string" => Types::STRING,
        "array" => Types::ARRAY,
        "object" => Types::OBJECT,
        _ => return None,
    })
}

/// Whether a `type` allows objects (`"object"`, or a list naming it).
fn allows_object(t: &Value) -> bool {
    t == "object" || t.as_array().is_some_and(|a| a.iter().any(|x| x == "object"))
}

/// Whether every value the schema `b` accepts, `a` accepts too, as far as a property declared by
/// two parts of an object built by inheritance shows it: `a` is `b`, or says nothing, or only a
/// `type` and an `enum` or `const` that `b`'s own type or values keep to (a base's
/// `{"type": "string"}` beside a derived schema's `{"const": "circle"}`).
fn implies(b: &Value, a: &Value, same_file: bool) -> bool {
    // The same text is the same schema only where its `$ref`s resolve alike.
    if a == &Value::Bool(true) || (a == b && (same_file || !has_ref(a))) {
        return true;
    }
    let (Some(am), Some(bm)) = (a.as_object(), b.as_object()) else { return false };
    if !am.keys().all(|k| matches!(k.as_str(), "type" | "enum" | "const") || is_annotation(k)) {
        return false;
    }
    let type_set = |m: &Map<String, Value>| -> Option<Types> {
        match m.get("type")? {
            Value::Array(list) => list.iter().try_fold(Types::NONE, |t, v| Some(t.union(type_name(v)?))),
            v => type_name(v),
        }
    };
    let literals = |m: &Map<String, Value>| m.get("const").map(|c| vec![c.clone()]).or_else(|| m.get("enum").and_then(Value::as_array).cloned());
    let b_values = literals(bm);
    if let Some(allowed) = literals(am)
        && !b_values.as_ref().is_some_and(|bv| bv.iter().all(|v| allowed.contains(v)))
    {
        return false;
    }
    match (type_set(am), &b_values) {
        (None, _) => true,
        (Some(at), Some(bv)) => bv.iter().all(|v| at.contains(literal_types(v))),
        (Some(at), None) => type_set(bm).is_some_and(|bt| at.contains(bt)),
    }
}

impl<'a> Lowerer<'a> {
    fn root_name(&self, file: &str, doc: &Value) -> String {
        let base = doc.get("title").and_then(Value::as_str).map(|t| pascal(t, "Root")).unwrap_or_else(|| pascal(stem(file), "Root"));
        self.unique(base)
    }

    /// `base`, or the first free numbered form of it: no two types share a name, and none takes
    /// one of [`naming::RESERVED_TYPE_NAMES`] (a schema's `Result` is `Result2` everywhere).
    fn unique(&self, base: String) -> String {
        naming::unique(&base, |n| self.taken.contains(n) || naming::RESERVED_TYPE_NAMES.contains(&n))
    }

    fn claim(&mut self, file: &str, pointer: &str, name: String) -> String {
        let name = self.unique(name);
        self.taken.insert(name.clone());
        self.names.insert((file.to_owned(), pointer.to_owned()), name.clone());
        self.queue.push_back((file.to_owned(), pointer.to_owned(), name.clone()));
        name
    }

    /// The type name for a named location, claiming one (derived from `hint`) if it has none.
    fn named(&mut self, file: &str, pointer: &str, hint: &str) -> String {
        if let Some(n) = self.names.get(&(file.to_owned(), pointer.to_owned())) {
            return n.clone();
        }
        self.claim(file, pointer, hint.to_owned())
    }

    fn constants(&mut self, file: &str, doc: &Value) -> Result<(), SchemaError> {
        let Some(c) = doc.get("x-constants") else { return Ok(()) };
        let Value::Object(c) = c else { return Err(err(file, "", "x-constants", "must be an object of NAME: {value, description}")) };
        for (name, spec) in c {
            let pointer = push_pointer("/x-constants", name);
            let ok_name = !name.is_empty() && name.chars().all(|ch| ch.is_ascii_uppercase() || ch.is_ascii_digit() || ch == '_');
            if !ok_name {
                return Err(err(file, &pointer, "x-constants", "constant names are SCREAMING_SNAKE_CASE"));
            }
            let value = spec.get("value").cloned().unwrap_or(Value::Null);
            if !(value.is_string() || value.is_u64()) {
                return Err(err(file, &pointer, "x-constants", "`value` must be a string or a non-negative integer"));
            }
            let Some(description) = spec.get("description").and_then(Value::as_str) else {
                return Err(err(file, &pointer, "x-constants", "every constant needs a `description` saying why that value"));
            };
            if spec.as_object().is_some_and(|m| m.keys().any(|k| k != "value" && k != "description")) {
                return Err(err(file, &pointer, "x-constants", "a constant has only `value` and `description`"));
            }
            let constant = Constant { value, description: description.to_owned(), origin: Origin { file: file.into(), pointer: pointer.clone() } };
            if self.space.constants.insert(name.clone(), constant).is_some() {
                return Err(err(file, &pointer, "x-constants", format!("`{name}` is declared twice")));
            }
        }
        Ok(())
    }

    /// The first keyword refusal of a schema object (see [`keyword_refusals`]).
    fn check_keywords(&self, file: &str, pointer: &str, map: &Map<String, Value>, is_root: bool) -> Result<(), SchemaError> {
        match keyword_refusals(file, pointer, map, is_root).into_iter().next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Lowers the schema at a named location into its named type.
    fn lower_named(&mut self, file: &str, pointer: &str, name: &str) -> Result<(), SchemaError> {
        if let Some(base) = pointer.strip_suffix(OBJECT_PART) {
            // The object rules of a schema that also allows other types.
            let schema = self.docs.get(file, base).cloned().unwrap_or(Value::Null);
            let map = schema.as_object().cloned().unwrap_or_default();
            let (fields, additional) = self.fields(file, base, &map, name, None)?;
            let origin = Origin { file: file.into(), pointer: base.into() };
            self.insert(name, None, origin, TypeKind::Struct(StructDef { fields, additional, nullable: false }));
            return Ok(());
        }
        let schema = self.docs.get(file, pointer).cloned().unwrap_or(Value::Bool(false));
        let origin = Origin { file: file.into(), pointer: pointer.into() };
        let description = schema.get("description").and_then(Value::as_str).map(str::to_owned);
        if let Value::Object(map) = &schema {
            self.check_keywords(file, pointer, map, pointer.is_empty())?;
            for keyword in DEFS_KEYWORDS {
                if map.get(keyword).is_some_and(|defs| !defs.is_object()) {
                    return Err(err(file, pointer, keyword, "must be an object of schemas"));
                }
            }
            if let Some(e) = const_enum(map) {
                self.insert(name, description, origin, TypeKind::StringEnum(e));
                return Ok(());
            }
            if let Some(key) = self.union_key(file, pointer, map) {
                if let Some(union) = self.union(file, pointer, map, name, key)? {
                    self.insert(name, description, origin, TypeKind::Union(union));
                    return Ok(());
                }
                self.untyped.insert((file.to_owned(), pointer.to_owned()));
            }
            if self.composes_object(file, pointer, map) {
                let Some((fields, additional)) = self.composed_fields(file, pointer, map, name, None)? else {
                    unreachable!("composes_object checked that the parts are one set of fields")
                };
                self.insert(name, description, origin, TypeKind::Struct(StructDef { fields, additional, nullable: false }));
                return Ok(());
            }
            if has_applicators(map) {
                let node = self.node(file, pointer, &schema, name)?;
                self.insert(name, description, origin, TypeKind::Alias(node));
                return Ok(());
            }
            if let Some((e, codes)) = self.string_enum(file, pointer, map)? {
                if let Some(codes) = codes {
                    self.error_codes.push((name.to_owned(), codes));
                }
                self.insert(name, description, origin, TypeKind::StringEnum(e));
                return Ok(());
            }
            // An object with rules of its own is a struct; one without (`{"type": "object"}`,
            // `_meta`-style) is the free-form object a property of that schema would be, kept
            // whole, not a struct of no fields that drops every member.
            if self.declares_object(file, pointer, map)? && has_object_rules(map) {
                let def = self.struct_def(file, pointer, map, name)?;
                self.insert(name, description, origin, TypeKind::Struct(def));
                return Ok(());
            }
        }
        let node = self.node(file, pointer, &schema, name)?;
        self.insert(name, description, origin, TypeKind::Alias(node));
        Ok(())
    }

    fn insert(&mut self, name: &str, description: Option<String>, origin: Origin, kind: TypeKind) {
        self.space.types.insert(name.to_owned(), NamedType { name: name.to_owned(), description, origin, kind });
    }

    fn types_of(&self, file: &str, pointer: &str, map: &Map<String, Value>) -> Result<Types, SchemaError> {
        let one = |v: &Value| type_name(v).ok_or_else(|| err(file, pointer, "type", format!("`{v}` is not a JSON Schema type")));
        let mut types = match map.get("type") {
            None => Types::ALL,
            Some(Value::Array(list)) => {
                let mut t = Types::NONE;
                for v in list {
                    t = t.union(one(v)?);
                }
                t
            }
            Some(v) => one(v)?,
        };
        let literals = map.get("enum").and_then(Value::as_array).cloned().or_else(|| map.get("const").map(|c| vec![c.clone()]));
        if let Some(lits) = literals {
            let implied = lits.iter().fold(Types::NONE, |t, v| t.union(literal_types(v)));
            // An integral float literal (`2.0`) matches integers of any spelling.
            types = types.intersect(if implied.contains(Types::INTEGER) { implied.union(Types::INTEGER) } else { implied });
            if lits.is_empty() {
                types = Types::NONE;
            }
        }
        Ok(types)
    }

    /// Whether the schema at a named location is a plain object type (a struct of its own).
    fn declares_object(&self, file: &str, pointer: &str, map: &Map<String, Value>) -> Result<bool, SchemaError> {
        let types = self.types_of(file, pointer, map)?;
        Ok(types.without_null() == Types::OBJECT && !map.contains_key("enum") && !map.contains_key("const"))
    }

    /// Whether the schema at a location is a union typed code holds as an enum: a `oneOf` or an
    /// `anyOf` (only one of them, nothing but annotations, `type: object` and `discriminator`
    /// beside) whose every branch is an object requiring one `const` string property (the tag),
    /// each branch's tag its own. Returns the keyword. Branches are resolved through `$ref`.
    fn union_key(&self, file: &str, pointer: &str, map: &Map<String, Value>) -> Option<&'static str> {
        if self.untyped.contains(&(file.to_owned(), pointer.to_owned())) || nullable_key(map).is_some() {
            return None;
        }
        let key = match (map.contains_key("oneOf"), map.contains_key("anyOf")) {
            (true, false) => "oneOf",
            (false, true) => "anyOf",
            _ => return None,
        };
        // Our own conventions (`x-extensible`, `x-result`) on a `oneOf` always mean a tagged
        // union: `union` then explains what is wrong rather than falling back.
        let intent = key == "oneOf" && self.union_intended(file, map);
        if intent {
            return Some(key);
        }
        if map.keys().any(|k| !matches!(k.as_str(), "oneOf" | "anyOf" | "type" | "format" | "discriminator" | "x-extensible") && !is_annotation(k)) {
            return None;
        }
        if map.get("type").is_some_and(|t| t != "object") {
            return None;
        }
        let branches = self.branch_maps(file, map.get(key)?.as_array()?)?;
        self.find_tag(map, &branches).map(|_| key)
    }

    /// Whether a `oneOf` uses our own tagged-union keywords (`x-extensible` beside it, or
    /// `x-result` on a branch).
    fn union_intended(&self, file: &str, map: &Map<String, Value>) -> bool {
        if map.contains_key("x-extensible") {
            return true;
        }
        let Some(Value::Array(b)) = map.get("oneOf") else { return false };
        self.branch_maps(file, b).is_some_and(|bs| bs.iter().any(|(_, _, m)| m.contains_key("x-result")))
    }

    /// Each branch as (file, pointer, object), through one `$ref`; `None` when one is not an
    /// object schema.
    fn branch_maps(&self, file: &str, branches: &[Value]) -> Option<Vec<BranchMap>> {
        if branches.is_empty() {
            return None;
        }
        branches
            .iter()
            .map(|b| {
                // A `$ref` beside other keywords composes with them (`composed_parts`): the
                // branch is the inline schema, not the target.
                let (f, p, s) = match b.get("$ref").and_then(Value::as_str).filter(|_| ref_alone(b)) {
                    Some(r) => {
                        let (f, p) = self.docs.resolve_ref(file, r).ok()?;
                        let s = self.docs.get(&f, &p)?.clone();
                        (f, p, s)
                    }
                    None => (file.to_owned(), String::new(), b.clone()),
                };
                match s {
                    Value::Object(m) => Some((f, p, m)),
                    _ => None,
                }
            })
            .collect()
    }

    /// The schemas a union branch is made of: the branch itself and the parts it composes (see
    /// [`Self::composed_parts`]), when it can read them.
    fn branch_parts(&self, file: &str, m: &Map<String, Value>) -> Vec<Map<String, Value>> {
        // Parts `composed_parts` cannot read leave the branch itself (its fields are then no
        // exact set: `union` makes the union a checked value).
        let parts = self.composed_parts(file, "", m).unwrap_or_default();
        std::iter::once(m.clone()).chain(parts.into_iter().map(|(_, _, p)| p)).collect()
    }

    /// A branch's value of the tag `k`, when `k` can tag it: the branch is an object (one of its
    /// parts says `"type": "object"`, none says otherwise), one of its parts requires `k`, and one
    /// gives it a `const` string that every other part declaring `k` allows (a string type, an
    /// `enum` listing it, the same `const`). A branch built by inheritance
    /// (`allOf: [{"$ref": Base}, {...}]`) takes its tag from any of its parts.
    fn tag_value(&self, file: &str, m: &Map<String, Value>, k: &str) -> Option<String> {
        let parts = self.branch_parts(file, m);
        let object = all_object(parts.iter());
        let required = parts.iter().any(|p| p.get("required").and_then(Value::as_array).is_some_and(|r| r.iter().any(|v| v == k)));
        let decls: Vec<&Value> = parts.iter().filter_map(|p| p.get("properties").and_then(|ps| ps.get(k))).collect();
        let strings = |s: &Value| s.get("type").is_none_or(|t| t == "string" || t.as_array().is_some_and(|a| a.iter().any(|x| x == "string")));
        // A `type` beside the `const` that does not allow a string leaves the branch nothing to
        // match: not a tag.
        let tagged = decls.iter().position(|s| s.get("const").is_some_and(Value::is_string) && strings(s))?;
        let c = decls[tagged].get("const")?;
        let allows = |s: &Value| {
            let Some(o) = s.as_object() else { return false };
            strings(s)
                && o.get("const").is_none_or(|x| x == c)
                && o.get("enum").is_none_or(|e| e.as_array().is_some_and(|a| a.contains(c)))
                && o.keys().all(|k| matches!(k.as_str(), "type" | "const" | "enum") || is_annotation(k))
        };
        let inherited = decls.iter().enumerate().all(|(i, s)| i == tagged || allows(s));
        (object && required && inherited).then(|| c.as_str().map(str::to_owned)).flatten()
    }

    /// The tag of a union's branches: a property every branch requires as a `const` string,
    /// each branch's value its own (see [`Self::tag_value`]); `discriminator.propertyName` is
    /// tried first.
    fn find_tag(&self, map: &Map<String, Value>, branches: &[BranchMap]) -> Option<String> {
        let hint = map.get("discriminator").and_then(|d| d.get("propertyName")).and_then(Value::as_str).map(str::to_owned);
        let (f0, _, m0) = &branches[0];
        let first: Vec<String> = self
            .branch_parts(f0, m0)
            .iter()
            .filter_map(|p| p.get("properties").and_then(Value::as_object))
            .flat_map(|p| p.keys().cloned())
            .collect();
        hint.into_iter().chain(first).find(|k| {
            let mut seen = BTreeSet::new();
            branches.iter().all(|(f, _, m)| self.tag_value(f, m, k).is_some_and(|v| seen.insert(v)))
        })
    }

    /// A string enum, and when its `x-enum` makes it the error codes, each value's `retryable`
    /// and `rpc_code`.
    #[allow(clippy::type_complexity)]
    fn string_enum(&self, file: &str, pointer: &str, map: &Map<String, Value>) -> Result<Option<(EnumDef, Option<Vec<(bool, i64)>>)>, SchemaError> {
        let Some(values) = map.get("enum") else {
            if map.contains_key("x-enum") || (map.contains_key("x-extensible") && !map.contains_key("oneOf")) {
                return Err(err(file, pointer, if map.contains_key("x-enum") { "x-enum" } else { "x-extensible" }, "only allowed on a string `enum` (or, for `x-extensible`, a tagged `oneOf`)"));
            }
            return Ok(None);
        };
        let Value::Array(values) = values else { return Err(err(file, pointer, "enum", "must be an array")) };
        let all_strings = !values.is_empty() && values.iter().all(Value::is_string);
        let typed_string = map.get("type").is_none_or(|t| t == "string");
        let only_enum_rules = !["minLength", "maxLength", "pattern", "const"].iter().any(|k| map.contains_key(*k));
        if !(all_strings && typed_string && only_enum_rules) {
            if map.contains_key("x-enum") || map.contains_key("x-extensible") {
                return Err(err(file, pointer, "x-enum", "`x-enum` and `x-extensible` need an enum of strings with no other string rules"));
            }
            return Ok(None);
        }
        let docs = match map.get("x-enum") {
            None => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(err(file, pointer, "x-enum", "must map each value to {description, retryable, rpc_code}")),
        };
        let mut out = Vec::new();
        let mut codes: Vec<(Option<&Value>, Option<&Value>)> = Vec::new();
        let mut seen = BTreeSet::new();
        for v in values {
            let s = v.as_str().unwrap_or_default().to_owned();
            if !seen.insert(s.clone()) {
                // Listed again: the same set of values (JSON Schema asks for unique values
                // without giving a repeat another meaning).
                continue;
            }
            let doc = docs.get(&s);
            if !docs.is_empty() && doc.is_none() {
                return Err(err(file, &push_pointer(&push_pointer(pointer, "x-enum"), &s), "x-enum", format!("`{s}` has no entry; document every value")));
            }
            let field = |k: &str| doc.and_then(|d| d.get(k));
            if let Some(d) = doc.and_then(Value::as_object)
                && let Some(bad) = d.keys().find(|k| !["description", "retryable", "rpc_code"].contains(&k.as_str())) {
                    return Err(err(file, &push_pointer(&push_pointer(pointer, "x-enum"), &s), "x-enum", format!("unknown entry `{bad}`; allowed: description, retryable, rpc_code")));
                }
            codes.push((doc.and_then(|d| d.get("retryable")), doc.and_then(|d| d.get("rpc_code"))));
            out.push(EnumValue { name: pascal(&s, "Empty"), description: field("description").and_then(Value::as_str).map(str::to_owned), value: s });
        }
        if let Some(extra) = docs.keys().find(|k| !seen.contains(*k)) {
            return Err(err(file, pointer, "x-enum", format!("`{extra}` is documented but not in `enum`")));
        }
        // An error-code enum: `retryable` and `rpc_code` for every value, or for none.
        let error_codes = if codes.iter().any(|(r, c)| r.is_some() || c.is_some()) {
            let mut per_value = Vec::new();
            for (v, (r, c)) in out.iter().zip(&codes) {
                let at = push_pointer(&push_pointer(pointer, "x-enum"), &v.value);
                let missing = |key: &str| err(file, &at, "x-enum", format!("`{}` has no `{key}`: in an error-code enum every value gives `retryable` and `rpc_code`", v.value));
                let retryable = match r {
                    None => return Err(missing("retryable")),
                    Some(r) => r.as_bool().ok_or_else(|| err(file, &push_pointer(&at, "retryable"), "x-enum", "`retryable` must be true or false"))?,
                };
                let rpc_code = match c {
                    None => return Err(missing("rpc_code")),
                    Some(c) => c.as_i64().ok_or_else(|| err(file, &push_pointer(&at, "rpc_code"), "x-enum", "`rpc_code` must be an integer (a JSON-RPC error code)"))?,
                };
                per_value.push((retryable, rpc_code));
            }
            Some(per_value)
        } else {
            None
        };
        let mut names = BTreeSet::new();
        for v in &mut out {
            let mut n = v.name.clone();
            let mut i = 2;
            while !names.insert(n.clone()) || n == "Unknown" {
                n = format!("{}{i}", v.name);
                i += 1;
            }
            v.name = n;
        }
        let extensible = self.extensible(file, pointer, map)?;
        Ok(Some((EnumDef { values: out, extensible, open: false }, error_codes)))
    }

    /// The service's names, from `x-openrpc` at the root of `file` (the method union's file).
    fn service_info(&self, file: &str, union: &str) -> Result<ServiceInfo, SchemaError> {
        let root = self.docs.files.get(file);
        let root_title = root.and_then(|d| d.get("title")).and_then(Value::as_str);
        let mut info = ServiceInfo { title: root_title.unwrap_or(union).to_owned(), description: None, license: None };
        let Some(x) = root.and_then(|d| d.get("x-openrpc")) else { return Ok(info) };
        let Value::Object(x) = x else { return Err(err(file, "", "x-openrpc", "must be an object of `title`, `description` and `license` strings")) };
        for (k, v) in x {
            let p = push_pointer("/x-openrpc", k);
            let Some(text) = v.as_str() else { return Err(err(file, &p, "x-openrpc", format!("`{k}` must be a string"))) };
            match k.as_str() {
                "title" => info.title = text.to_owned(),
                "description" => info.description = Some(text.to_owned()),
                "license" => info.license = Some(text.to_owned()),
                _ => return Err(err(file, &p, "x-openrpc", format!("unknown entry `{k}`; allowed: title, description, license"))),
            }
        }
        Ok(info)
    }

    fn extensible(&self, file: &str, pointer: &str, map: &Map<String, Value>) -> Result<bool, SchemaError> {
        match map.get("x-extensible") {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(err(file, pointer, "x-extensible", "must be true or false")),
        }
    }

    fn fields(
        &mut self,
        file: &str,
        pointer: &str,
        map: &Map<String, Value>,
        parent: &str,
        skip: Option<&str>,
    ) -> Result<(Vec<Field>, Additional), SchemaError> {
        let required: Vec<String> = match map.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) if r.iter().all(Value::is_string) => r.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
            Some(_) => return Err(err(file, pointer, "required", "must be an array of property names")),
        };
        let mut fields = Vec::new();
        let props = match map.get("properties") {
            None => Map::new(),
            Some(Value::Object(p)) => p.clone(),
            Some(_) => return Err(err(file, pointer, "properties", "must be an object of schemas")),
        };
        let props_pointer = push_pointer(pointer, "properties");
        for (key, schema) in &props {
            if Some(key.as_str()) == skip {
                continue;
            }
            let p = push_pointer(&props_pointer, key);
            let hint = format!("{parent}{}", pascal(key, "Field"));
            let node = self.node(file, &p, schema, &hint)?;
            fields.push(Field { name: key.clone(), required: required.contains(key), node, forbidden: false });
        }
        // Beside `patternProperties`, what `additionalProperties` says is for the members no
        // pattern matches: the node's `MemberRules::rest` checks it, and the struct allows them.
        let additional = match map.get("additionalProperties") {
            _ if has_patterns(map) => Additional::Any,
            None | Some(Value::Bool(true)) => Additional::Any,
            Some(Value::Bool(false)) => Additional::Forbidden,
            Some(schema) => {
                let p = push_pointer(pointer, "additionalProperties");
                let node = self.node(file, &p, schema, &format!("{parent}Value"))?;
                Additional::Schema(Box::new(node))
            }
        };
        for key in &required {
            if props.contains_key(key) || Some(key.as_str()) == skip {
                continue;
            }
            if fields.iter().any(|f| &f.name == key) {
                return Err(err(file, pointer, "required", format!("`{key}` is listed twice")));
            }
            // A required property the schema does not declare is still an additional one: its
            // value must match `additionalProperties` (none can where that is `false`).
            let node = match &additional {
                Additional::Any => any_node(),
                Additional::Forbidden => Node { types: Types::NONE, repr: Repr::Never, ..any_node() },
                Additional::Schema(node) => (**node).clone(),
            };
            let forbidden = matches!(additional, Additional::Forbidden);
            fields.push(Field { name: key.clone(), required: true, node, forbidden });
        }
        Ok((fields, additional))
    }

    fn struct_def(&mut self, file: &str, pointer: &str, map: &Map<String, Value>, name: &str) -> Result<StructDef, SchemaError> {
        if let Some(k) = misplaced_rule(map) {
            // A schema of objects and other types at once, or `enum`/`const` on an object.
            return Err(err(file, pointer, k, format!("`{k}` does not apply to an object schema")));
        }
        let (fields, additional) = self.fields(file, pointer, map, name, None)?;
        let types = self.types_of(file, pointer, map)?;
        Ok(StructDef { fields, additional, nullable: types.contains(Types::NULL) })
    }

    /// A tagged union (see [`Lowerer::union_key`]); `None` when a branch is one typed code
    /// cannot hold exactly (it composes other schemas in a way no set of fields expresses), so
    /// the location is a checked value instead.
    fn union(&mut self, file: &str, pointer: &str, map: &Map<String, Value>, name: &str, key: &str) -> Result<Option<UnionDef>, SchemaError> {
        let bad = |m: &str| err(file, pointer, key, m.to_owned());
        let Some(Value::Array(branches)) = map.get(key) else { return Err(bad("must be an array of schemas")) };
        for k in map.keys() {
            if !matches!(k.as_str(), "oneOf" | "anyOf" | "x-extensible" | "type" | "format" | "discriminator") && !is_annotation(k) {
                return Err(err(file, pointer, k, format!("`{k}` beside a tagged `{key}` is not supported; put it in each branch")));
            }
        }
        if map.get("type").is_some_and(|t| t != "object") {
            return Err(err(file, pointer, "type", format!("a tagged `{key}` is an object")));
        }
        if let Some(d) = map.get("discriminator")
            && !d.get("propertyName").is_some_and(Value::is_string)
        {
            return Err(err(file, pointer, "discriminator", "must be an object with a string `propertyName`"));
        }
        const SUPPORTED: &str = "the supported `oneOf` forms are a union of objects told apart by a required `const` string property (a tag), and `[X, {\"type\": \"null\"}]`";
        if branches.is_empty() {
            return Err(bad(SUPPORTED));
        }
        // Resolve each branch to (file, pointer, schema).
        let mut resolved = Vec::new();
        for (i, b) in branches.iter().enumerate() {
            let mut bp = push_pointer(&push_pointer(pointer, key), &i.to_string());
            let mut bf = file.to_owned();
            let mut schema = b.clone();
            let mut via_ref = None;
            if let Some(r) = b.get("$ref").and_then(Value::as_str).filter(|_| ref_alone(b)) {
                let (f, p) = self.docs.resolve_ref(file, r).map_err(|m| err(file, &bp, "$ref", m))?;
                via_ref = Some(self.named(&f, &p, "Variant"));
                schema = self.docs.get(&f, &p).cloned().unwrap_or(Value::Null);
                bf = f;
                bp = p;
            }
            let Value::Object(m) = &schema else { return Err(err(&bf, &bp, key, SUPPORTED)) };
            self.check_keywords(&bf, &bp, m, bp.is_empty())?;
            resolved.push((bf, bp, m.clone(), via_ref));
        }
        let maps: Vec<BranchMap> = resolved.iter().map(|(f, p, m, _)| (f.clone(), p.clone(), m.clone())).collect();
        let Some(tag) = self.find_tag(map, &maps) else {
            // Only our own conventions get here (see `union_key`): say which branch breaks them.
            // Each branch is read with the parts it composes, as `find_tag` reads it.
            let parts: Vec<Vec<Map<String, Value>>> = resolved.iter().map(|(bf, _, m, _)| self.branch_parts(bf, m)).collect();
            for ((bf, bp, _, _), ps) in resolved.iter().zip(&parts) {
                if !all_object(ps.iter()) {
                    return Err(err(bf, bp, "type", format!("each branch of a tagged `{key}` is `\"type\": \"object\"` (itself or through a part it composes)")));
                }
            }
            let consts = |ps: &[Map<String, Value>], k: &str| -> Vec<Value> {
                ps.iter().filter_map(|p| p.get("properties")?.get(k)?.get("const").filter(|c| c.is_string()).cloned()).collect()
            };
            let first: Vec<String> = parts[0].iter().filter_map(|p| p.get("properties").and_then(Value::as_object)).flat_map(|p| p.keys().cloned()).filter(|k| !consts(&parts[0], k).is_empty()).collect();
            for k in &first {
                let mut seen = BTreeSet::new();
                for ((bf, bp, m, _), ps) in resolved.iter().zip(&parts) {
                    let required = ps.iter().any(|p| p.get("required").and_then(Value::as_array).is_some_and(|r| r.iter().any(|v| v == k)));
                    let Some(v) = consts(ps, k).first().and_then(Value::as_str).map(str::to_owned) else { continue };
                    if required && !seen.insert(v.clone()) {
                        return Err(err(bf, bp, "const", format!("tag value `{v}` is used by two branches")));
                    }
                    if !required {
                        return Err(err(bf, bp, "required", format!("this branch gives the tag `{k}` a `const` but does not list it in `required`, so a value without `{k}` could match it; add `\"required\": [\"{k}\"]`")));
                    }
                    if self.tag_value(bf, m, k).is_none() {
                        return Err(err(bf, bp, "const", format!("the tag `{k}` is `{v}` here, but a part this branch composes declares `{k}` in a way that does not allow `{v}` (or not as a string), so the branch matches nothing")));
                    }
                }
            }
            return Err(bad(SUPPORTED));
        };
        let mut variants = Vec::new();
        let mut seen = BTreeSet::new();
        let mut methods = 0;
        for (bf, bp, m, via_ref) in &resolved {
            // `find_tag` found the tag in every branch, each an object (through its parts).
            let Some(tag_value) = self.tag_value(bf, m, &tag) else {
                return Err(err(bf, bp, "type", format!("each branch of a tagged `{key}` is `\"type\": \"object\"`")));
            };
            if has_applicators_besides(m, &["allOf", "$ref"]) {
                return Ok(None);
            }
            // The tag's `const`, in the branch itself or in a part it composes.
            let parts = self.branch_parts(bf, m);
            let tag_schema = parts
                .iter()
                .filter_map(|p| p.get("properties").and_then(|ps| ps.get(&tag)))
                .find(|s| s.get("const").and_then(Value::as_str) == Some(tag_value.as_str()))
                .cloned()
                .unwrap_or(Value::Null);
            if let Some(k) = tag_schema.as_object().and_then(|t| t.keys().find(|k| !matches!(k.as_str(), "const" | "type") && !is_annotation(k))) {
                let own = m.get("properties").and_then(|ps| ps.get(&tag)).is_some_and(|s| s == &tag_schema);
                let at = if own { push_pointer(&push_pointer(bp, "properties"), &tag) } else { bp.clone() };
                return Err(err(bf, &at, k, "the tag property holds only `const` (and annotations: `description`, `title`, …)"));
            }
            if !seen.insert(tag_value.clone()) {
                return Err(err(bf, bp, "const", format!("tag value `{tag_value}` is used by two branches")));
            }
            let vname = match (via_ref, m.get("title").and_then(Value::as_str)) {
                (_, Some(t)) => pascal(t, "Variant"),
                (Some(n), None) => n.clone(),
                (None, None) => pascal(&tag_value, "Variant"),
            };
            let Some((fields, additional)) = self.composed_fields(bf, bp, m, &format!("{name}{vname}"), Some(&tag))? else {
                return Ok(None);
            };
            let result = match m.get("x-result") {
                Some(r) => {
                    methods += 1;
                    Some(self.node(bf, &push_pointer(bp, "x-result"), r, &format!("{vname}Result"))?)
                }
                None => None,
            };
            if let Some(k) = misplaced_rule(m) {
                return Err(err(bf, bp, k, format!("`{k}` does not apply to an object branch")));
            }
            variants.push(Variant {
                tag_value,
                name: vname,
                type_name: String::new(),
                description: m.get("description").and_then(Value::as_str).map(str::to_owned),
                fields,
                additional,
                result,
                origin: Origin { file: bf.clone(), pointer: bp.clone() },
            });
        }
        let mut names = BTreeSet::new();
        for v in &variants {
            if !names.insert(v.name.clone()) || v.name == "Unknown" {
                return Err(err(&v.origin.file, &v.origin.pointer, "title", format!("variant name `{}` is used twice (or is reserved)", v.name)));
            }
        }
        if methods > 0 {
            if methods != variants.len() {
                return Err(bad("either every branch names its result with `x-result`, or none does"));
            }
            if let Some(v) = variants.iter().find(|v| !v.fields.iter().any(|f| f.name == "params")) {
                return Err(err(&v.origin.file, &v.origin.pointer, "x-result", "a method branch must declare a `params` property (its `x-result` makes it a method)"));
            }
            if let Some(existing) = &self.space.methods {
                return Err(bad(&format!("only one method union is supported; `{}` is one already", existing.union)));
            }
            let service = self.service_info(file, name)?;
            self.space.methods = Some(MethodSet { union: name.to_owned(), params_field: "params".into(), service });
        }
        let extensible = self.extensible(file, pointer, map)?;
        Ok(Some(UnionDef { tag, variants, extensible, unknown_type_name: None }))
    }

    /// The parts an object schema composes: each member of its `allOf` (inline, or a `$ref` with
    /// only annotations beside it) and the target of a `$ref` beside its other keywords, each as
    /// (file, pointer, schema). `None` when a part is neither, or is not an object schema.
    fn composed_parts(&self, file: &str, pointer: &str, map: &Map<String, Value>) -> Option<Vec<BranchMap>> {
        let target = |r: &Value| -> Option<BranchMap> {
            let (f, p) = self.docs.resolve_ref(file, r.as_str()?).ok()?;
            let Some(Value::Object(o)) = self.docs.get(&f, &p) else { return None };
            let o = o.clone();
            Some((f, p, o))
        };
        // The `$ref` first, as `applicators` lowers it, then the `allOf` in order.
        let mut out = Vec::new();
        if let Some(r) = map.get("$ref") {
            out.push(target(r)?);
        }
        if let Some(all) = map.get("allOf") {
            for (i, part) in all.as_array()?.iter().enumerate() {
                let o = part.as_object()?;
                match o.get("$ref") {
                    Some(r) if o.keys().all(|k| k == "$ref" || is_annotation(k)) => out.push(target(r)?),
                    Some(_) => return None,
                    None => out.push((file.to_owned(), push_pointer(&push_pointer(pointer, "allOf"), &i.to_string()), o.clone())),
                }
            }
        }
        Some(out)
    }

    /// Whether an object schema and the parts it composes are together exactly one set of
    /// fields (what [`Self::composed_fields`] merges): every one allows other properties
    /// (`additionalProperties` absent, `true` or `{}`: in 2020-12 it only sees its own schema's
    /// `properties`), no part composes further (an applicator, or a `$ref` of its own) or is
    /// anything but an object, and no property (but `skip`, a union's tag) is declared twice.
    fn exact_composition(&self, file: &str, pointer: &str, map: &Map<String, Value>, skip: Option<&str>) -> bool {
        let open = |m: &Map<String, Value>| m.get("additionalProperties").is_none_or(|a| a == &Value::Bool(true) || a.as_object().is_some_and(Map::is_empty));
        let Some(parts) = self.composed_parts(file, pointer, map) else { return false };
        // Each property's strongest declaration: one declared twice is one field when one of the
        // two declarations implies the other (a base's `{"type": "string"}`, a derived `const`).
        let mut declared: BTreeMap<String, (String, Value)> = BTreeMap::new();
        let mut declare = |f: &str, m: &Map<String, Value>| {
            m.get("properties").and_then(Value::as_object).is_none_or(|ps| {
                ps.iter().filter(|(k, _)| Some(k.as_str()) != skip).all(|(k, schema)| match declared.get(k) {
                    None => declared.insert(k.clone(), (f.to_owned(), schema.clone())).is_none(),
                    Some((bf, before)) if implies(schema, before, bf == f) => declared.insert(k.clone(), (f.to_owned(), schema.clone())).is_some(),
                    Some((bf, before)) => implies(before, schema, bf == f),
                })
            })
        };
        open(map)
            && declare(file, map)
            && parts.iter().all(|(pf, _, pm)| {
                // A part that refers on (`{"$ref": ...}` alone is no applicator) is not read here.
                open(pm)
                    && !pm.contains_key("$ref")
                    && !has_applicators(pm)
                    && pm.get("type").is_none_or(allows_object)
                    && !["enum", "const"].iter().any(|k| pm.contains_key(*k))
                    && declare(pf, pm)
            })
    }

    /// Whether a schema outside a union is an object built by composition that typed code holds
    /// as one struct: an `allOf` (or a `$ref` beside other keywords) and nothing else that
    /// composes, an object (one of it and its parts says `"type": "object"`, none says otherwise,
    /// no rule for other types), with members of its own, exactly one set of fields.
    fn composes_object(&self, file: &str, pointer: &str, map: &Map<String, Value>) -> bool {
        // A `$ref` or an `allOf` of one schema with only annotations beside is that schema (an
        // alias), not a composition.
        let beside = |k: &str| map.keys().any(|key| key != k && !is_annotation_in(key, map));
        let composes = (map.contains_key("allOf") && (map.get("allOf").and_then(Value::as_array).is_some_and(|a| a.len() > 1) || beside("allOf")))
            || (map.contains_key("$ref") && beside("$ref"));
        if !composes || has_applicators_besides(map, &["allOf", "$ref"]) || !self.exact_composition(file, pointer, map, None) {
            return false;
        }
        if misplaced_rule(map).is_some() {
            return false;
        }
        let Some(parts) = self.composed_parts(file, pointer, map) else { return false };
        let maps = || std::iter::once(map).chain(parts.iter().map(|(_, _, m)| m));
        all_object(maps()) && maps().any(has_object_rules)
    }

    /// The fields of an object schema together with those of the parts it composes (see
    /// [`Self::composed_parts`]), when [`Self::exact_composition`] finds them exactly one set of
    /// fields; `None` otherwise. The schema's own fields come first, then each part's, in order
    /// (`allOf: [Base, {...}]`: the base's, then what the derived part adds). A property one part
    /// only requires and
    /// another declares is the declared field, required; one two parts declare is the field of
    /// the declaration that implies the other ([`implies`]).
    #[allow(clippy::type_complexity)]
    fn composed_fields(&mut self, file: &str, pointer: &str, map: &Map<String, Value>, parent: &str, skip: Option<&str>) -> Result<Option<(Vec<Field>, Additional)>, SchemaError> {
        if !map.contains_key("allOf") && !map.contains_key("$ref") {
            return self.fields(file, pointer, map, parent, skip).map(Some);
        }
        if !self.exact_composition(file, pointer, map, skip) {
            return Ok(None);
        }
        let Some(parts) = self.composed_parts(file, pointer, map) else { return Ok(None) };
        // Each field with the declaration it came from (none: `required` only) and its file.
        let mut fields: Vec<(Field, Option<(String, Value)>)> = Vec::new();
        let mut additional = Additional::Any;
        let own = (file.to_owned(), pointer.to_owned(), map.clone());
        for (i, (pf, pp, pm)) in std::iter::once(&own).chain(parts.iter()).enumerate() {
            let is_own = i == 0;
            if !is_own {
                self.check_keywords(pf, pp, pm, pp.is_empty())?;
            }
            let (more, extra) = self.fields(pf, pp, pm, parent, skip)?;
            if is_own {
                additional = extra;
            }
            for f in more {
                let declared = pm.get("properties").and_then(|p| p.get(&f.name)).map(|d| (pf.clone(), d.clone()));
                match fields.iter_mut().find(|(g, _)| g.name == f.name) {
                    None => fields.push((f, declared)),
                    Some((g, d)) => {
                        let required = g.required || f.required;
                        let stronger = match (&*d, &declared) {
                            (_, None) => false,
                            (None, Some(_)) => true,
                            (Some((bf, before)), Some((nf, now))) => implies(now, before, bf == nf),
                        };
                        if stronger {
                            (*g, *d) = (f, declared);
                        }
                        g.required = required;
                    }
                }
            }
        }
        Ok(Some((fields.into_iter().map(|(f, _)| f).collect(), additional)))
    }

    /// Lowers the schema used at one place.
    fn node(&mut self, file: &str, pointer: &str, schema: &Value, hint: &str) -> Result<Node, SchemaError> {
        let map = match schema {
            Value::Bool(true) => return Ok(any_node()),
            Value::Bool(false) => return Ok(Node { types: Types::NONE, repr: Repr::Never, ..any_node() }),
            Value::Object(m) => m,
            _ => return Err(err(file, pointer, "", "a schema must be an object or a boolean")),
        };
        self.check_keywords(file, pointer, map, pointer.is_empty())?;
        let description = map.get("description").and_then(Value::as_str).map(str::to_owned);
        let default = map.get("default").cloned();
        // `allOf` of one schema and nothing else that applies: that schema (what schemars writes
        // for a documented reference).
        if let Some(Value::Array(parts)) = map.get("allOf")
            && parts.len() == 1
            && map.keys().all(|k| k == "allOf" || is_annotation_in(k, map))
        {
            let mut inner = self.node(file, &push_pointer(&push_pointer(pointer, "allOf"), "0"), &parts[0], hint)?;
            inner.description = description.or(inner.description);
            inner.default = default.or(inner.default);
            return Ok(inner);
        }
        if let Some(r) = map.get("$ref")
            && map.keys().all(|k| k == "$ref" || is_annotation_in(k, map))
        {
            let r = r.as_str().ok_or_else(|| err(file, pointer, "$ref", "must be a string"))?;
            let (f, p) = self.docs.resolve_ref(file, r).map_err(|m| err(file, pointer, "$ref", m))?;
            let name = self.named(&f, &p, &ref_hint(&f, &p));
            let target = self.docs.get(&f, &p).cloned().unwrap_or(Value::Null);
            let types = self.ref_types(&f, &p, &target, 0);
            // Nullable only where the target surely takes `null` (its `type` says so and nothing
            // else of it could refuse it): `types` is what the target might allow, and a target
            // that decides `null` by its applicators (two `oneOf` branches that both take it, a
            // `not`) is left to decide it.
            let repr = if surely_takes_null(&target) && types != Types::NULL && !types.contains(Types::ALL.without_null()) {
                Repr::Nullable(Box::new(Repr::Named(name.clone())))
            } else {
                Repr::Named(name.clone())
            };
            return Ok(Node { types, reference: Some(name), description, default, repr, ..any_node() });
        }
        if let Some(key) = nullable_key(map)
            && map.keys().all(|k| k == key || is_annotation_in(k, map))
        {
            let Some(Value::Array(b)) = map.get(key) else { unreachable!("checked by nullable_key") };
            let idx = if is_null_schema(&b[0]) { 1 } else { 0 };
            let inner = self.node(file, &push_pointer(&push_pointer(pointer, key), &idx.to_string()), &b[idx], hint)?;
            // A nullable X, unless X might take `null` itself (its own types say so, or rules the
            // nullable form would apply to `null` too: an applicator's): then `oneOf` (which
            // refuses a value both branches match) and `anyOf` are checked as they are, below.
            let plain = inner.applied.is_empty() && inner.unevaluated.is_none();
            if plain && !(key == "oneOf" && inner.types.contains(Types::NULL)) {
                let repr = match inner.repr.clone() {
                    Repr::Nullable(r) => Repr::Nullable(r),
                    Repr::Value => Repr::Value,
                    r => Repr::Nullable(Box::new(r)),
                };
                // X's listed values (an `enum`, a `const`) list `null` too.
                let mut literals = inner.literals.clone();
                if let Some(values) = &mut literals
                    && !values.contains(&Value::Null)
                {
                    values.push(Value::Null);
                }
                let is_const = inner.is_const && literals.is_none();
                return Ok(Node { types: inner.types.union(Types::NULL), description: description.or(inner.description.clone()), default, repr, literals, is_const, ..inner });
            }
        }
        if const_enum(map).is_some() {
            let name = self.named(file, pointer, hint);
            return Ok(Node { types: Types::STRING, reference: Some(name.clone()), description, default, repr: Repr::Named(name), ..any_node() });
        }
        if self.union_key(file, pointer, map).is_some() {
            let name = self.named(file, pointer, hint);
            return Ok(Node { types: Types::OBJECT, reference: Some(name.clone()), description, default, repr: Repr::Named(name), ..any_node() });
        }
        if self.composes_object(file, pointer, map) {
            let name = self.named(file, pointer, hint);
            return Ok(Node { types: Types::OBJECT, reference: Some(name.clone()), description, default, repr: Repr::Named(name), ..any_node() });
        }
        let applied = self.applicators(file, pointer, map, hint)?;
        let unevaluated = self.unevaluated(file, pointer, map, hint)?;
        let members = self.member_rules(file, pointer, map, hint)?;
        let composed = !applied.is_empty() || unevaluated.is_some() || members.is_some() || has_element_rules(map);
        let mut node = self.plain_node(file, pointer, map, hint, description, default, composed)?;
        if composed {
            node.applied = applied;
            node.unevaluated = unevaluated;
            node.members = members;
            node.repr = Repr::Value;
        }
        Ok(node)
    }

    /// A schema object's rules on an object's members that no struct holds (see
    /// [`has_member_rules`]), when it has any.
    fn member_rules(&mut self, file: &str, pointer: &str, map: &Map<String, Value>, hint: &str) -> Result<Option<Box<MemberRules>>, SchemaError> {
        if !has_member_rules(map) {
            return Ok(None);
        }
        let mut rules = MemberRules {
            min_properties: map.get("minProperties").map(|v| whole(file, pointer, "minProperties", v)).transpose()?.filter(|n| *n > 0),
            max_properties: map.get("maxProperties").map(|v| whole(file, pointer, "maxProperties", v)).transpose()?,
            ..MemberRules::default()
        };
        if let Some(names) = map.get("propertyNames") {
            let at = push_pointer(pointer, "propertyNames");
            let node = self.node(file, &at, names, &format!("{hint}Name"))?;
            rules.property_names = Some(node);
        }
        if let Some(deps) = map.get("dependentRequired") {
            let bad = || err(file, pointer, "dependentRequired", "must be an object of lists of property names");
            for (k, names) in deps.as_object().ok_or_else(bad)? {
                let names = names.as_array().filter(|a| a.iter().all(Value::is_string)).ok_or_else(bad)?;
                let names: Vec<String> = names.iter().filter_map(|n| n.as_str().map(str::to_owned)).collect();
                if !names.is_empty() {
                    rules.dependent_required.push((k.clone(), names));
                }
            }
        }
        if let Some(deps) = map.get("dependentSchemas") {
            let deps = deps.as_object().ok_or_else(|| err(file, pointer, "dependentSchemas", "must be an object of schemas"))?;
            let at = push_pointer(pointer, "dependentSchemas");
            for (i, (k, schema)) in deps.iter().enumerate() {
                let node = self.node(file, &push_pointer(&at, k), schema, &format!("{hint}Dependent{i}"))?;
                rules.dependent_schemas.push((k.clone(), node));
            }
        }
        if has_patterns(map) {
            let Some(Value::Object(patterns)) = map.get("patternProperties") else {
                return Err(err(file, pointer, "patternProperties", "must be an object of schemas"));
            };
            let at = push_pointer(pointer, "patternProperties");
            for (i, (source, schema)) in patterns.iter().enumerate() {
                let p = pattern::analyze(source).map_err(|m| err(file, &at, "patternProperties", format!("`{source}` is not a valid ECMA-262 regular expression: {m}")))?;
                let idx = self.pattern_index(p);
                let node = self.node(file, &push_pointer(&at, source), schema, &format!("{hint}Pattern{i}"))?;
                rules.patterns.push((idx, node));
            }
            let declared = || map.get("properties").and_then(Value::as_object).map(|p| p.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
            match map.get("additionalProperties") {
                None | Some(Value::Bool(true)) => {}
                Some(Value::Bool(false)) => rules.rest = Some((declared(), Additional::Forbidden)),
                Some(schema) => {
                    let node = self.node(file, &push_pointer(pointer, "additionalProperties"), schema, &format!("{hint}Value"))?;
                    rules.rest = Some((declared(), Additional::Schema(Box::new(node))));
                }
            }
        }
        Ok(Some(Box::new(rules)))
    }

    /// A schema object's `unevaluatedProperties` (when not `true`), with what the schema's other
    /// keywords evaluate.
    fn unevaluated(&mut self, file: &str, pointer: &str, map: &Map<String, Value>, hint: &str) -> Result<Option<Box<Unevaluated>>, SchemaError> {
        if !has_unevaluated(map) {
            return Ok(None);
        }
        let at = push_pointer(pointer, "unevaluatedProperties");
        let schema = self.node(file, &at, &map["unevaluatedProperties"], &format!("{hint}Unevaluated"))?;
        let mut walk = Walk { owner: (file, pointer), nested: Vec::new(), refs: Vec::new() };
        let mut always = PropSet::default();
        let mut own = map.clone();
        own.remove("anyOf");
        own.remove("oneOf");
        own.remove("unevaluatedProperties");
        self.evaluated(&mut walk, Here { file, pointer, hint }, &Value::Object(own), &mut always, &[], 0)?;
        // The schema's own branches: what each evaluates, from the results of their own checks;
        // the branches nested in them are guarded by them, as they sit at the same place.
        let mut branches = |k: &str, label: &str| -> Result<Vec<PropSet>, SchemaError> {
            let Some(Value::Array(list)) = map.get(k) else { return Ok(Vec::new()) };
            let mut sets = Vec::new();
            for (i, b) in list.iter().enumerate() {
                let at = push_pointer(&push_pointer(pointer, k), &i.to_string());
                let hint = format!("{hint}{label}{i}");
                let key = GuardKey { file: file.to_owned(), pointer: at.clone(), hint: hint.clone(), schema: b.clone(), test: GuardTest::Matches };
                let mut set = PropSet::default();
                self.evaluated(&mut walk, Here { file, pointer: &at, hint: &hint }, b, &mut set, &[key], 1)?;
                sets.push(set);
            }
            Ok(sets)
        };
        let any_of = branches("anyOf", "AnyOf")?;
        let one_of = branches("oneOf", "OneOf")?;
        let mut nested = Vec::new();
        for (when, set) in walk.nested {
            let when = when.into_iter().map(|k| self.guard(k)).collect();
            nested.push(Guarded { when, set });
        }
        Ok(Some(Box::new(Unevaluated { schema: Box::new(schema), always, any_of, one_of, nested })))
    }

    /// The index in `space.guards` of the branch `key` names, made on first use (a schema to
    /// lower once every named type is, or a tag to compare).
    fn guard(&mut self, key: GuardKey) -> usize {
        let place = (key.file.clone(), key.pointer.clone(), key.test.clone());
        if let Some(&i) = self.guard_index.get(&place) {
            return i;
        }
        let i = self.space.guards.len();
        match &key.test {
            GuardTest::Present(name) => self.space.guards.push(Guard::Present(name.clone())),
            GuardTest::Tag(name, value) => self.space.guards.push(Guard::Tag { name: name.clone(), value: value.clone() }),
            GuardTest::Matches | GuardTest::Fails => {
                self.space.guards.push(Guard::Matches(any_node()));
                self.pending_guards.push((i, key));
            }
        }
        self.guard_index.insert(place, i);
        i
    }

    /// Adds to `set` the properties `schema` (at `here`) evaluates whenever it matches: its
    /// `properties`, every property when it has `additionalProperties` or
    /// `unevaluatedProperties`, and those of its `$ref` target and `allOf` members. Each branch of
    /// an `anyOf` or `oneOf` inside evaluates only when the value matches it: it goes to
    /// `walk.nested`, guarded by itself after `guards` (the branches it sits in), with what it
    /// evaluates. A `$ref` back to a target on the way is a cycle at one place, which
    /// `same_place_cycles` refuses: not followed again.
    fn evaluated(&mut self, walk: &mut Walk<'_>, here: Here<'_>, schema: &Value, set: &mut PropSet, guards: &[GuardKey], depth: usize) -> Result<(), SchemaError> {
        let fail = |m: &str| err(walk.owner.0, walk.owner.1, "unevaluatedProperties", m);
        if depth > 32 {
            return Err(fail("the schemas `unevaluatedProperties` sees through nest deeper than 32 `$ref`s, `allOf` members and branches"));
        }
        let Some(map) = schema.as_object() else { return Ok(()) };
        if has_patterns(map) {
            // The members whose names a pattern matches.
            let Some(Value::Object(patterns)) = map.get("patternProperties") else {
                return Err(err(here.file, here.pointer, "patternProperties", "must be an object of schemas"));
            };
            for source in patterns.keys() {
                let at = push_pointer(here.pointer, "patternProperties");
                let p = pattern::analyze(source).map_err(|m| err(here.file, &at, "patternProperties", format!("`{source}` is not a valid ECMA-262 regular expression: {m}")))?;
                set.patterns.push(self.pattern_index(p));
            }
        }
        if let Some(Value::Object(props)) = map.get("properties") {
            set.names.extend(props.keys().cloned());
        }
        if map.contains_key("additionalProperties") || map.contains_key("unevaluatedProperties") {
            set.all = true;
        }
        if let Some(r) = map.get("$ref").and_then(Value::as_str) {
            let (f, p) = self.docs.resolve_ref(here.file, r).map_err(|m| fail(&m))?;
            let place = (f.clone(), p.clone());
            if !walk.refs.contains(&place) {
                let target = self.docs.get(&f, &p).cloned().unwrap_or(Value::Bool(false));
                let hint = self.names.get(&place).cloned().unwrap_or_else(|| ref_hint(&f, &p));
                walk.refs.push(place);
                self.evaluated(walk, Here { file: &f, pointer: &p, hint: &hint }, &target, set, guards, depth + 1)?;
                walk.refs.pop();
            }
        }
        if let Some(Value::Array(parts)) = map.get("allOf") {
            for (i, part) in parts.iter().enumerate() {
                let at = push_pointer(&push_pointer(here.pointer, "allOf"), &i.to_string());
                let hint = format!("{}AllOf{i}", here.hint);
                self.evaluated(walk, Here { file: here.file, pointer: &at, hint: &hint }, part, set, guards, depth + 1)?;
            }
        }
        // What applies only when the value passes a test, each under its guard after `guards`:
        // `if` with `then` when the value matches `if` (even alone, `if` evaluates what it
        // declares then), `else` when it does not, and each `dependentSchemas` entry when the
        // object has its member.
        let mut guarded: Vec<Conditioned<'_>> = Vec::new();
        if let Some(condition) = map.get("if") {
            let mut parts = vec![("if", condition)];
            parts.extend(map.get("then").map(|t| ("then", t)));
            guarded.push(Conditioned { test: GuardTest::Matches, label: "If", at: push_pointer(here.pointer, "if"), schema: condition, parts });
            if let Some(otherwise) = map.get("else") {
                guarded.push(Conditioned { test: GuardTest::Fails, label: "If", at: push_pointer(here.pointer, "if"), schema: condition, parts: vec![("else", otherwise)] });
            }
        }
        if let Some(Value::Object(deps)) = map.get("dependentSchemas") {
            for (name, dep) in deps {
                let at = push_pointer(&push_pointer(here.pointer, "dependentSchemas"), name);
                guarded.push(Conditioned { test: GuardTest::Present(name.clone()), label: "Dependent", at, schema: dep, parts: vec![("", dep)] });
            }
        }
        for Conditioned { test, label, at, schema, parts } in guarded {
            let hint = format!("{}{label}", here.hint);
            let mut when = guards.to_vec();
            when.push(GuardKey { file: here.file.to_owned(), pointer: at.clone(), hint: hint.clone(), schema: schema.clone(), test });
            let mut inner = PropSet::default();
            for (keyword, part) in parts {
                let at = if keyword.is_empty() { at.clone() } else { push_pointer(here.pointer, keyword) };
                self.evaluated(walk, Here { file: here.file, pointer: &at, hint: &hint }, part, &mut inner, &when, depth + 1)?;
            }
            walk.push_nested(when, inner)?;
        }
        let tagged = self.union_key(here.file, here.pointer, map);
        for (k, label) in [("anyOf", "AnyOf"), ("oneOf", "OneOf")] {
            let Some(Value::Array(list)) = map.get(k) else { continue };
            // A tagged union's branch is told by its tag (see `Guard::Tag`).
            let tags: Option<(String, Vec<BranchMap>)> = (tagged == Some(k))
                .then(|| self.branch_maps(here.file, list).and_then(|b| self.find_tag(map, &b).map(|t| (t, b))))
                .flatten();
            for (i, b) in list.iter().enumerate() {
                let at = push_pointer(&push_pointer(here.pointer, k), &i.to_string());
                let hint = format!("{}{label}{i}", here.hint);
                let tag = tags.as_ref().and_then(|(t, bs)| Some((t.clone(), self.tag_value(&bs[i].0, &bs[i].2, t)?)));
                let mut when = guards.to_vec();
                let test = tag.map_or(GuardTest::Matches, |(name, value)| GuardTest::Tag(name, value));
                when.push(GuardKey { file: here.file.to_owned(), pointer: at.clone(), hint: hint.clone(), schema: b.clone(), test });
                let mut inner = PropSet::default();
                self.evaluated(walk, Here { file: here.file, pointer: &at, hint: &hint }, b, &mut inner, &when, depth + 1)?;
                walk.push_nested(when, inner)?;
            }
        }
        set.names.sort();
        set.names.dedup();
        set.patterns.sort_unstable();
        set.patterns.dedup();
        Ok(())
    }

    /// The applicators of a schema object as nodes: `allOf` (with a `$ref` that stands beside
    /// other rules as its first member), `anyOf`, `oneOf` and `not`.
    fn applicators(&mut self, file: &str, pointer: &str, map: &Map<String, Value>, hint: &str) -> Result<Applicators, SchemaError> {
        let mut out = Applicators::default();
        let list = |k: &str| -> Result<Option<&Vec<Value>>, SchemaError> {
            match map.get(k) {
                None => Ok(None),
                Some(Value::Array(l)) if !l.is_empty() => Ok(Some(l)),
                Some(_) => Err(err(file, pointer, k, "must be a non-empty array of schemas")),
            }
        };
        if let Some(r) = map.get("$ref") {
            if !r.is_string() {
                return Err(err(file, pointer, "$ref", "must be a string"));
            }
            let only_ref = Value::Object([("$ref".to_owned(), r.clone())].into_iter().collect());
            out.all_of.push(self.node(file, pointer, &only_ref, &format!("{hint}Ref"))?);
        }
        for (k, label) in [("allOf", "AllOf"), ("anyOf", "AnyOf"), ("oneOf", "OneOf")] {
            let Some(l) = list(k)? else { continue };
            let at = push_pointer(pointer, k);
            let mut nodes = Vec::new();
            for (i, sub) in l.iter().enumerate() {
                nodes.push(self.node(file, &push_pointer(&at, &i.to_string()), sub, &format!("{hint}{label}{i}"))?);
            }
            match k {
                "allOf" => out.all_of.extend(nodes),
                "anyOf" => out.any_of = nodes,
                _ => out.one_of = nodes,
            }
        }
        if let Some(n) = map.get("not") {
            out.not = Some(Box::new(self.node(file, &push_pointer(pointer, "not"), n, &format!("{hint}Not"))?));
        }
        if has_conditional(map) {
            let mut sub = |k: &str, label: &str| map.get(k).map(|s| self.node(file, &push_pointer(pointer, k), s, &format!("{hint}{label}"))).transpose();
            let condition = sub("if", "If")?.expect("has_conditional");
            let then = sub("then", "Then")?;
            let otherwise = sub("else", "Else")?;
            out.conditional = Some(Box::new(Conditional { condition, then, otherwise }));
        }
        Ok(out)
    }

    /// The node of a schema object's own rules (everything but its applicators).
    #[allow(clippy::too_many_arguments)]
    fn plain_node(&mut self, file: &str, pointer: &str, map: &Map<String, Value>, hint: &str, description: Option<String>, default: Option<Value>, composed: bool) -> Result<Node, SchemaError> {
        if map.contains_key("x-result") {
            return Err(err(file, pointer, "x-result", "only allowed on a branch of a tagged `oneOf`"));
        }
        let types = self.types_of(file, pointer, map)?;
        // A string enum, or an object with declared properties, becomes a named type of its own.
        if !composed && self.string_enum(file, pointer, map)?.is_some() {
            let name = self.named(file, pointer, hint);
            let repr = if types.contains(Types::NULL) { Repr::Nullable(Box::new(Repr::Named(name.clone()))) } else { Repr::Named(name.clone()) };
            return Ok(Node { types, reference: Some(name), description, default, repr, ..any_node() });
        }
        let mut node = Node { types, description, default, ..any_node() };
        node.echoed = match map.get("x-echoed") {
            None | Some(Value::Bool(false)) => false,
            Some(Value::Bool(true)) => true,
            Some(_) => return Err(err(file, pointer, "x-echoed", "must be `true` or `false`")),
        };
        node.string = self.string_rules(file, pointer, map)?;
        let minimum = map.get("minimum").map(|v| number(file, pointer, "minimum", v)).transpose()?;
        let maximum = map.get("maximum").map(|v| number(file, pointer, "maximum", v)).transpose()?;
        // `format` is an annotation, except that an integer format on an integer schema (what
        // schemars writes for `u16` and the like) implies its range; the tighter bound wins.
        let range = if types.without_null() == Types::INTEGER { integer_format(map) } else { None };
        node.number = NumberRules {
            minimum: match (minimum, range) {
                (Some(m), Some((low, _))) => Some(m.max(low)),
                (m, r) => m.or(r.map(|(low, _)| low)),
            },
            maximum: match (maximum, range) {
                (Some(m), Some((_, high))) => Some(m.min(high)),
                (m, r) => m.or(r.map(|(_, high)| high)),
            },
            exclusive_minimum: map.get("exclusiveMinimum").map(|v| number(file, pointer, "exclusiveMinimum", v)).transpose()?,
            exclusive_maximum: map.get("exclusiveMaximum").map(|v| number(file, pointer, "exclusiveMaximum", v)).transpose()?,
            multiple_of: map
                .get("multipleOf")
                .map(|v| number(file, pointer, "multipleOf", v).and_then(|m| if m > 0.0 && m.is_finite() { Ok(m) } else { Err(err(file, pointer, "multipleOf", "must be a number greater than 0")) }))
                .transpose()?,
        };
        if let Some(prefix) = map.get("prefixItems") {
            let list = prefix.as_array().filter(|l| !l.is_empty()).ok_or_else(|| err(file, pointer, "prefixItems", "must be a non-empty array of schemas"))?;
            let at = push_pointer(pointer, "prefixItems");
            for (i, schema) in list.iter().enumerate() {
                node.array.prefix_items.push(self.node(file, &push_pointer(&at, &i.to_string()), schema, &format!("{hint}Item{i}"))?);
            }
        }
        if let Some(items) = map.get("items") {
            if items.is_array() {
                return Err(err(file, pointer, "items", "must be one schema (a tuple is `prefixItems`)"));
            }
            let p = push_pointer(pointer, "items");
            node.array.items = Some(Box::new(self.node(file, &p, items, &format!("{hint}Item"))?));
        }
        // `minItems: 0` says nothing (every array has at least no items).
        node.array.min_items = map.get("minItems").map(|v| whole(file, pointer, "minItems", v)).transpose()?.filter(|n| *n > 0);
        node.array.max_items = map.get("maxItems").map(|v| whole(file, pointer, "maxItems", v)).transpose()?;
        if let Some(schema) = map.get("contains") {
            let at = push_pointer(pointer, "contains");
            let schema = self.node(file, &at, schema, &format!("{hint}Contains"))?;
            let min = map.get("minContains").map(|v| whole(file, pointer, "minContains", v)).transpose()?.unwrap_or(1);
            let max = map.get("maxContains").map(|v| whole(file, pointer, "maxContains", v)).transpose()?;
            node.array.contains = Some(Box::new(Contains { schema, min, max }));
        }
        node.array.unique_items = match map.get("uniqueItems") {
            None | Some(Value::Bool(false)) => false,
            Some(Value::Bool(true)) => true,
            Some(_) => return Err(err(file, pointer, "uniqueItems", "must be a boolean")),
        };
        if let Some(e) = map.get("enum") {
            let Value::Array(values) = e else { return Err(err(file, pointer, "enum", "must be an array")) };
            node.literals = Some(values.clone());
        }
        if let Some(c) = map.get("const") {
            // Beside `enum`, a value must be both: the `const`, when the `enum` lists it.
            if let Some(values) = &node.literals
                && !values.iter().any(|v| same_json(v, c))
            {
                return Err(err(file, pointer, "const", "the `enum` beside it does not list the `const` value: no value can match both"));
            }
            node.literals = Some(vec![c.clone()]);
            node.is_const = true;
        }
        // A listed value of a type `type` does not allow is not allowed (`{"type": "string",
        // "enum": ["a", null]}` refuses `null`); with none left, nothing is.
        if let Some(values) = &mut node.literals {
            values.retain(|v| value_allowed(types, v));
            if values.is_empty() {
                node.literals = None;
                node.is_const = false;
                node.types = Types::NONE;
            }
        }
        let has_object_rules = has_object_rules(map);
        if has_object_rules && types.contains(Types::OBJECT) {
            let own = types.without_null() == Types::OBJECT && node.literals.is_none() && !composed;
            let name = if own { self.named(file, pointer, hint) } else { self.named(file, &format!("{pointer}{OBJECT_PART}"), &format!("{hint}Object")) };
            node.object = Some(name);
        } else if has_object_rules {
            // Object rules on a schema that allows no objects: inert, but still checked.
            self.fields(file, pointer, map, hint, None)?;
        }
        node.repr = choose_repr(&node);
        Ok(node)
    }

    /// The JSON types a schema allows, through `$ref` and the applicators.
    fn ref_types(&mut self, file: &str, pointer: &str, schema: &Value, depth: usize) -> Types {
        if depth > 32 {
            return Types::ALL;
        }
        let Some(map) = schema.as_object() else { return if schema == &Value::Bool(true) { Types::ALL } else { Types::NONE } };
        let mut types = self.types_of(file, pointer, map).unwrap_or(Types::ALL);
        if let Some(r) = map.get("$ref").and_then(Value::as_str) {
            let target = match self.docs.resolve_ref(file, r) {
                Ok((f, p)) => {
                    let t = self.docs.get(&f, &p).cloned().unwrap_or(Value::Null);
                    self.ref_types(&f, &p, &t, depth + 1)
                }
                Err(_) => Types::ALL,
            };
            types = types.intersect(target);
        }
        for k in ["oneOf", "anyOf"] {
            if let Some(Value::Array(b)) = map.get(k) {
                let any = b.iter().fold(Types::NONE, |t, s| t.union(self.ref_types(file, pointer, s, depth + 1)));
                types = types.intersect(any);
            }
        }
        if let Some(Value::Array(b)) = map.get("allOf") {
            for s in b {
                types = types.intersect(self.ref_types(file, pointer, s, depth + 1));
            }
        }
        types
    }

    /// The index of a pattern in [`TypeSpace::patterns`], added when new.
    fn pattern_index(&mut self, p: pattern::Pattern) -> usize {
        match self.space.patterns.iter().position(|q| q.source == p.source) {
            Some(i) => i,
            None => {
                self.space.patterns.push(p);
                self.space.patterns.len() - 1
            }
        }
    }

    fn string_rules(&mut self, file: &str, pointer: &str, map: &Map<String, Value>) -> Result<StringRules, SchemaError> {
        let pattern = match map.get("pattern") {
            None => None,
            Some(Value::String(src)) => {
                let p = pattern::analyze(src).map_err(|m| err(file, pointer, "pattern", format!("not a valid ECMA-262 regular expression: {m}")))?;
                Some(self.pattern_index(p))
            }
            Some(_) => return Err(err(file, pointer, "pattern", "must be a string")),
        };
        Ok(StringRules {
            // `minLength: 0` says nothing.
            min_length: map.get("minLength").map(|v| whole(file, pointer, "minLength", v)).transpose()?.filter(|n| *n > 0),
            max_length: map.get("maxLength").map(|v| whole(file, pointer, "maxLength", v)).transpose()?,
            pattern,
        })
    }
}

/// A string enum written as a `oneOf` or `anyOf` of string `const`s, each branch with its own
/// `description` (what schemars writes for a documented Rust enum): the same as an `enum` of
/// those strings. An `anyOf` may also hold one branch `{"type": "string"}`, which allows any
/// other string: an extensible enum. `None` for any other shape (a duplicate value included).
fn const_enum(map: &Map<String, Value>) -> Option<EnumDef> {
    let key = match (map.contains_key("oneOf"), map.contains_key("anyOf")) {
        (true, false) => "oneOf",
        (false, true) => "anyOf",
        _ => return None,
    };
    if map.keys().any(|k| k != key && !is_annotation(k) && !(k == "type" && map.get(k).is_some_and(|t| t == "string"))) {
        return None;
    }
    let Value::Array(branches) = map.get(key)? else { return None };
    let mut values: Vec<EnumValue> = Vec::new();
    let mut extensible = false;
    for b in branches {
        let b = b.as_object()?;
        if b.keys().any(|k| !matches!(k.as_str(), "const" | "type") && !is_annotation(k)) || b.get("type").is_some_and(|t| t != "string") {
            return None;
        }
        let description = b.get("description").and_then(Value::as_str).map(str::to_owned);
        match b.get("const") {
            Some(Value::String(v)) if !values.iter().any(|e| &e.value == v) => {
                values.push(EnumValue { value: v.clone(), name: pascal(v, "Value"), description });
            }
            None if key == "anyOf" && !extensible && b.contains_key("type") => extensible = true,
            _ => return None,
        }
    }
    if values.is_empty() {
        return None;
    }
    let mut names = BTreeSet::new();
    if values.iter().any(|v| !names.insert(v.name.clone()) || v.name == "Unknown") {
        return None;
    }
    Some(EnumDef { values, extensible, open: extensible })
}

/// Whether a schema object uses an applicator typed code does not hold by itself: `allOf`,
/// `anyOf`, `not`, a `oneOf` other than the nullable form, `$ref` beside other rules, or an
/// `unevaluatedProperties` other than `true`.
fn has_applicators(map: &Map<String, Value>) -> bool {
    has_applicators_besides(map, &[])
}

/// Whether `map` has an `unevaluatedProperties` that can refuse something (not `true`).
fn has_unevaluated(map: &Map<String, Value>) -> bool {
    map.get("unevaluatedProperties").is_some_and(|u| u != &Value::Bool(true))
}

/// Whether `map`'s `if` applies: it has `then`, `else` or both (`if` alone only annotates, and
/// `then` or `else` without `if` is ignored).
fn has_conditional(map: &Map<String, Value>) -> bool {
    map.contains_key("if") && (map.contains_key("then") || map.contains_key("else"))
}

/// [`has_applicators`], not counting the keywords in `except`.
fn has_applicators_besides(map: &Map<String, Value>, except: &[&str]) -> bool {
    let present = |k: &str| map.contains_key(k) && !except.contains(&k);
    has_unevaluated(map)
        || has_member_rules(map)
        || has_element_rules(map)
        || present("allOf")
        || present("not")
        || (present("if") && has_conditional(map))
        || (present("anyOf") && !nullable_alone(map, "anyOf"))
        || (present("oneOf") && !nullable_alone(map, "oneOf"))
        || (present("$ref") && map.keys().any(|k| k != "$ref" && !is_annotation_in(k, map)))
}

/// Whether `map` is the nullable form of `key` (see [`nullable_key`]) and nothing else but
/// annotations: what `node` reads as a nullable X. Beside other rules (an object's properties) the
/// form is an applicator like any other.
fn nullable_alone(map: &Map<String, Value>, key: &str) -> bool {
    nullable_key(map) == Some(key) && map.keys().all(|k| k == key || is_annotation_in(k, map))
}

/// Whether schemas that all apply to one value make it an object: none has a `type` that leaves
/// objects out, and one says `"type": "object"` alone (`["object", "null"]` beside it is an
/// object too).
fn all_object<'m>(parts: impl Iterator<Item = &'m Map<String, Value>> + Clone) -> bool {
    parts.clone().all(|m| m.get("type").is_none_or(allows_object)) && parts.into_iter().any(|m| m.get("type").is_some_and(|t| t == "object"))
}

/// The keywords an object schema (a struct, a union's branch) does not take: `enum`/`const`, and
/// the rules of other types, inert on an object.
const NON_OBJECT_RULES: &[&str] = &["enum", "const", "minLength", "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "items", "prefixItems", "minItems", "maxItems"];

/// The types a schema's own `type` keyword names ([`type_name`] for each); `None` when it has
/// none or names one that is no JSON type.
fn declared_types(map: &Map<String, Value>) -> Option<Types> {
    match map.get("type")? {
        Value::Array(ts) => ts.iter().try_fold(Types::NONE, |acc, t| Some(acc.union(type_name(t)?))),
        t => type_name(t),
    }
}

/// Whether `schema` takes `null` whatever else it says: its `type` allows it, and it has no
/// keyword that could refuse it (`enum`, `const`, an applicator, a `$ref`).
fn surely_takes_null(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else { return schema == &Value::Bool(true) };
    declared_types(map).is_some_and(|t| t.contains(Types::NULL)) && !["enum", "const", "allOf", "anyOf", "oneOf", "not", "$ref", "unevaluatedProperties"].iter().any(|k| map.contains_key(*k)) && !has_conditional(map)
}

/// The first of [`NON_OBJECT_RULES`] an object schema cannot take: `enum` or `const` (which
/// would restrict the objects), or a rule for strings, numbers or arrays where `type` allows
/// those too. Where `type` is `"object"` (or it and `null`), those rules are inert, as 2020-12
/// has them, and are ignored.
fn misplaced_rule(map: &Map<String, Value>) -> Option<&'static str> {
    let object_only = declared_types(map).is_some_and(|t| t.contains(Types::OBJECT) && Types::OBJECT.union(Types::NULL).contains(t));
    NON_OBJECT_RULES.iter().copied().find(|k| map.contains_key(*k) && (matches!(*k, "enum" | "const") || !object_only))
}

/// Whether a schema is a `$ref` with only annotations beside it (the type it names).
fn ref_alone(schema: &Value) -> bool {
    schema.as_object().is_some_and(|o| o.contains_key("$ref") && o.keys().all(|k| k == "$ref" || is_annotation(k)))
}

/// `oneOf` or `anyOf` when `map` is the nullable form `[X, {"type": "null"}]` of that keyword
/// (the other absent).
fn nullable_key(map: &Map<String, Value>) -> Option<&'static str> {
    let form = |k: &str| match map.get(k) {
        Some(Value::Array(b)) if b.len() == 2 => b.iter().filter(|s| is_null_schema(s)).count() == 1,
        _ => false,
    };
    match (map.contains_key("oneOf"), map.contains_key("anyOf")) {
        (true, false) if form("oneOf") => Some("oneOf"),
        (false, true) if form("anyOf") => Some("anyOf"),
        _ => None,
    }
}

fn is_null_schema(s: &Value) -> bool {
    s.as_object().is_some_and(|m| m.get("type").is_some_and(|t| t == "null") && m.keys().all(|k| k == "type" || k == "description" || is_foreign_extension(k)))
}

/// A node that accepts every value.
pub fn any_node() -> Node {
    Node {
        types: Types::ALL,
        reference: None,
        string: StringRules::default(),
        number: NumberRules::default(),
        array: ArrayRules::default(),
        object: None,
        literals: None,
        is_const: false,
        description: None,
        default: None,
        echoed: false,
        applied: Applicators::default(),
        members: None,
        unevaluated: None,
        repr: Repr::Value,
    }
}

/// Whether `map` has a rule on an object's members no struct holds: `patternProperties` (not
/// empty), `minProperties` (above 0), `maxProperties` or `propertyNames` (a checked value, as
/// an applicator is).
fn has_member_rules(map: &Map<String, Value>) -> bool {
    has_patterns(map)
        || map.get("minProperties").is_some_and(|n| n.as_f64() != Some(0.0))
        || map.contains_key("maxProperties")
        || map.get("propertyNames").is_some_and(|s| s != &Value::Bool(true) && says_something(s))
        || ["dependentRequired", "dependentSchemas"].iter().any(|k| map.get(*k).is_some_and(says_something))
}

/// Whether `map` has a `patternProperties` that gives some member a schema.
fn has_patterns(map: &Map<String, Value>) -> bool {
    map.get("patternProperties").is_some_and(says_something)
}

/// Whether a keyword's value is anything but an empty object (which gives nothing a rule; any
/// other value says something, or is refused where it is read).
fn says_something(v: &Value) -> bool {
    v.as_object().is_none_or(|m| !m.is_empty())
}

/// Whether `map` has a rule on an array's elements typed code holds as a checked value
/// (`contains`, `prefixItems`).
fn has_element_rules(map: &Map<String, Value>) -> bool {
    map.contains_key("contains") || map.contains_key("prefixItems")
}

/// Whether a schema object says anything of an object's members. `additionalProperties: true`
/// (or `{}`), `properties: {}` and `required: []` say what an object already is: a map of
/// anything, kept whole (`_meta`-style extension bags), not a struct that drops its keys.
fn has_object_rules(map: &Map<String, Value>) -> bool {
    let open_only = |v: &Value| v == &Value::Bool(true) || v.as_object().is_some_and(Map::is_empty);
    let non_empty = |k: &str| match map.get(k) {
        Some(Value::Object(m)) => !m.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(_) => true,
        None => false,
    };
    non_empty("properties") || non_empty("required") || map.get("additionalProperties").is_some_and(|v| !open_only(v))
}

fn choose_repr(node: &Node) -> Repr {
    let t = node.types;
    if t == Types::NONE {
        return Repr::Never;
    }
    if node.literals.as_ref().is_some_and(|l| l.iter().any(|v| v.is_array() || v.is_object())) {
        return Repr::Value;
    }
    let base = t.without_null();
    let repr = match base {
        Types::NONE => return Repr::Null,
        Types::BOOLEAN => Repr::Bool,
        Types::INTEGER => Repr::Integer,
        Types::NUMBER => Repr::Number,
        Types::STRING => Repr::String,
        Types::ARRAY => Repr::Array(Box::new(node.array.items.as_ref().map_or(Repr::Value, |n| n.repr.clone()))),
        Types::OBJECT => match &node.object {
            Some(name) => Repr::Named(name.clone()),
            None => Repr::Object,
        },
        _ => return Repr::Value,
    };
    if t.contains(Types::NULL) { Repr::Nullable(Box::new(repr)) } else { repr }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lower_text(text: &str) -> Result<TypeSpace, SchemaError> {
        lower(&Documents::from_texts([("case.json", text)])?)
    }

    const CODES: &str = r##"{"type": "string", "enum": ["busy", "bad"], "x-extensible": true, "x-enum": {
        "busy": {"description": "Busy.", "retryable": true, "rpc_code": -32001},
        "bad": {"description": "Bad.", "retryable": false, "rpc_code": -32602}}}"##;

    /// The type names of `defs` (a `$defs` object's members, as JSON text) with a root that
    /// says only `{"type": "object"}`, and with a root whose `unevaluatedProperties` sees
    /// through every one of them.
    fn names_without_and_with_unevaluated(defs: &str) -> (Vec<String>, Vec<String>) {
        let keys: Vec<String> = serde_json::from_str::<Map<String, Value>>(defs).expect("JSON").keys().cloned().collect();
        let refs = keys.iter().map(|k| format!(r##"{{"$ref": "#/$defs/{k}"}}"##)).collect::<Vec<_>>().join(", ");
        let plain = format!(r#"{{"type": "object", "$defs": {defs}}}"#);
        let seeing = format!(r#"{{"type": "object", "$defs": {defs}, "anyOf": [{refs}], "unevaluatedProperties": false}}"#);
        let names = |t: &str| lower_text(t).expect("lowers").types.keys().filter(|n| *n != "Case").cloned().collect::<Vec<_>>();
        (names(&plain), names(&seeing))
    }

    #[test]
    fn every_defs_key_names_its_type_for_the_validation_entry_points() {
        // `Result` is reserved, `foo` is not PascalCase, and `Foo` is what `foo` would be named
        // (met first): `Foo` keeps its own name, and each key names its own type.
        let space = lower_text(r#"{"type": "object", "$defs": {"Result": {"type": "string"}, "foo": {"type": "integer"}, "Foo": {"type": "boolean"}, "Plain": {"type": "number"}, "Obj": {"type": "object", "properties": {"a": {}}}}}"#).expect("lowers");
        let names = space.schema_names();
        let of = |key: &str| names.iter().find(|(k, _)| k == key).map(|(_, n)| n.clone()).unwrap_or_else(|| key.to_owned());
        for key in ["Result", "foo", "Foo", "Plain", "Obj"] {
            let t = &space.types[&of(key)];
            assert_eq!(t.origin.pointer, format!("/$defs/{key}"), "`{key}` names {}", t.name);
        }
        assert!(names.iter().all(|(k, n)| k != n && !space.types.contains_key(k)), "{names:?}");
        // A root titled like a key keeps its name; the key's type is named by its generated name.
        let space = lower_text(r#"{"title": "Item", "type": "object", "$defs": {"Item": {"type": "integer"}}}"#).expect("lowers");
        assert_eq!(space.types["Item"].origin.pointer, "");
        assert!(space.schema_names().is_empty(), "{:?}", space.schema_names());
    }

    #[test]
    fn a_union_built_by_inheritance_is_a_tagged_union() {
        // Each branch composes a base (through `allOf`, or a `$ref` beside its own properties):
        // the tag is required by the base and given its `const` by the branch, and the variant's
        // fields are the branch's own, then its parts' in order; a member one part requires and
        // another declares is that declared member, required.
        let text = r##"{"oneOf": [{"$ref": "#/$defs/Circle"}, {"$ref": "#/$defs/Square"}, {"$ref": "#/$defs/Label"}], "$defs": {
            "Base": {"type": "object", "properties": {"kind": {"type": "string"}, "id": {"type": "string"}}, "required": ["kind", "id"]},
            "Circle": {"allOf": [{"$ref": "#/$defs/Base"}, {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["r"]}]},
            "Square": {"$ref": "#/$defs/Base", "properties": {"kind": {"const": "square"}, "side": {"type": "number"}}},
            "Label": {"type": "object", "allOf": [{"$ref": "#/$defs/Base"}], "properties": {"kind": {"const": "label"}, "text": {"type": "string"}}, "required": ["text", "id"]}}}"##;
        let space = lower_text(text).expect("lowers");
        let TypeKind::Union(u) = &space.types["Case"].kind else { panic!("a checked value: {:?}", space.types["Case"].kind) };
        assert_eq!(u.tag, "kind");
        let fields = |v: &Variant| v.fields.iter().map(|f| (f.name.clone(), f.required, f.node.types == Types::STRING)).collect::<Vec<_>>();
        let want = |w: [(&str, bool, bool); 2]| w.map(|(n, r, s)| (n.to_owned(), r, s)).to_vec();
        let by_tag = |t: &str| u.variants.iter().find(|v| v.tag_value == t).expect("variant");
        assert_eq!(fields(by_tag("circle")), want([("id", true, true), ("r", true, false)]));
        assert_eq!(fields(by_tag("square")), want([("side", false, false), ("id", true, true)]));
        assert_eq!(fields(by_tag("label")), want([("text", true, true), ("id", true, true)]));
        // A base whose own rule on the tag leaves a branch's value out, or a part closed to the
        // other parts' members, leaves the union a checked value (exact either way).
        for (base_tag, closed) in [(r#"{"enum": ["circle"]}"#, ""), (r#"{"type": "string"}"#, r#", "additionalProperties": false"#)] {
            let text = format!(
                r##"{{"oneOf": [{{"$ref": "#/$defs/Circle"}}, {{"$ref": "#/$defs/Square"}}], "$defs": {{
                "Base": {{"type": "object", "properties": {{"kind": {base_tag}}}, "required": ["kind"]}},
                "Circle": {{"allOf": [{{"$ref": "#/$defs/Base"}}, {{"type": "object", "properties": {{"kind": {{"const": "circle"}}}}{closed}}}]}},
                "Square": {{"allOf": [{{"$ref": "#/$defs/Base"}}, {{"type": "object", "properties": {{"kind": {{"const": "square"}}}}}}]}}}}}}"##
            );
            let space = lower_text(&text).expect("lowers");
            assert!(matches!(space.types["Case"].kind, TypeKind::Alias(_)), "{base_tag}{closed}: {:?}", space.types["Case"].kind);
        }
    }

    #[test]
    fn composition_across_files_reads_each_part_where_it_stands() {
        let lowered = |files: &[(&str, &str)]| lower(&Documents::from_texts(files.iter().copied()).expect("loads"));
        // The same `$ref` text in two files names two schemas: not one declaration.
        let root = r##"{"type": "object", "$defs": {"T": {"type": "integer"}, "D": {"allOf": [{"$ref": "other.json#/$defs/B"}, {"type": "object", "properties": {"p": {"$ref": "#/$defs/T"}}}]}}}"##;
        let other = r##"{"$defs": {"T": {"type": "string"}, "B": {"type": "object", "properties": {"p": {"$ref": "#/$defs/T"}}}}}"##;
        let space = lowered(&[("root.json", root), ("other.json", other)]).expect("lowers");
        let d = space.types.values().find(|t| t.origin.pointer == "/$defs/D").expect("D");
        assert!(matches!(d.kind, TypeKind::Alias(_)), "{:?}", d.kind);
        // A base that is a whole file (its root keywords included) is a part like any other.
        let base = r##"{"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "base.json", "title": "Base", "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}"##;
        for d in [r##"{"allOf": [{"$ref": "base.json"}, {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}]}"##, r##"{"$ref": "base.json", "properties": {"x": {"type": "integer"}}, "required": ["x"]}"##] {
            let root = format!(r##"{{"type": "object", "$defs": {{"D": {d}}}}}"##);
            let space = lowered(&[("root.json", &root), ("base.json", base)]).unwrap_or_else(|e| panic!("{d}: {e}"));
            let t = space.types.values().find(|t| t.origin.pointer == "/$defs/D").expect("D");
            let TypeKind::Struct(s) = &t.kind else { panic!("{d}: {:?}", t.kind) };
            let mut got: Vec<(&str, bool)> = s.fields.iter().map(|f| (f.name.as_str(), f.required)).collect();
            got.sort();
            assert_eq!(got, [("a", true), ("x", true)], "{d}");
        }
    }

    #[test]
    fn an_extensible_union_says_which_branch_cannot_match() {
        // The base's `enum` leaves out the `const` one branch gives its tag.
        let text = r##"{"$defs": {"Base": {"type": "object", "properties": {"kind": {"enum": ["s"]}}, "required": ["kind"]},
            "C": {"allOf": [{"$ref": "#/$defs/Base"}, {"properties": {"kind": {"const": "c"}}}]},
            "S": {"allOf": [{"$ref": "#/$defs/Base"}, {"properties": {"kind": {"const": "s"}}}]},
            "D": {"oneOf": [{"$ref": "#/$defs/C"}, {"$ref": "#/$defs/S"}], "x-extensible": true}}}"##;
        let e = lower_text(text).expect_err("refused");
        assert_eq!((e.pointer.as_str(), e.keyword.as_str()), ("/$defs/C", "const"), "{e}");
        assert!(e.message.contains("does not allow `c`"), "{e}");
        // A branch composing a part no struct can hold is a checked value, not an error.
        let text = r##"{"$defs": {"Mixin": {"type": "object", "properties": {"m": {"type": "string"}}},
            "C": {"type": "object", "properties": {"kind": {"const": "c"}, "m": {}}, "required": ["kind"], "allOf": [{"$ref": "#/$defs/Mixin", "required": ["m"]}]},
            "S": {"type": "object", "properties": {"kind": {"const": "s"}}, "required": ["kind"]},
            "D": {"oneOf": [{"$ref": "#/$defs/C"}, {"$ref": "#/$defs/S"}], "x-extensible": true}}}"##;
        let space = lower_text(text).expect("lowers");
        assert!(matches!(space.types["D"].kind, TypeKind::Alias(_)), "{:?}", space.types["D"].kind);
    }

    #[test]
    fn enum_and_const_numbers_not_held_exactly_are_refused() {
        for text in [r#"{"const": 1e21}"#, r#"{"const": 1e18}"#, r#"{"const": 18446744073709551615}"#, r#"{"const": 9223372036854775808}"#, r#"{"enum": [0, 123456789012345678901234567890]}"#, r#"{"enum": [{"a": [1e300]}]}"#, r#"{"const": -1e19}"#] {
            let e = lower_text(text).expect_err(text);
            assert!(e.keyword == "enum" || e.keyword == "const", "{text}: {e}");
            assert!(e.message.contains("write it as an integer"), "{text}: {e}");
        }
        for text in [r#"{"const": 9007199254740993}"#, r#"{"const": 9223372036854775807}"#, r#"{"const": -9223372036854775808}"#, r#"{"enum": [1.0, 2.5, 1e15, 9007199254740992.0]}"#] {
            lower_text(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
    }

    #[test]
    fn an_object_derived_from_a_base_is_one_struct() {
        let lowered = |derived: &str| {
            let text = format!(
                r##"{{"type": "object", "properties": {{"d": {{"$ref": "#/$defs/D"}}, "inline": {derived}}}, "$defs": {{
                "Base": {{"type": "object", "properties": {{"kind": {{"type": "string"}}, "id": {{"type": "string"}}}}, "required": ["kind", "id"]}},
                "Alias": {{"$ref": "#/$defs/Base"}},
                "D": {derived}}}}}"##
            );
            let space = lower_text(&text).expect("lowers");
            let inline = match &space.types["Case"].kind {
                TypeKind::Struct(s) => s.fields.iter().find(|f| f.name == "inline").expect("inline").node.reference.clone(),
                k => panic!("{k:?}"),
            };
            let d = space.types["D"].kind.clone();
            (d, inline.map(|n| space.types[&n].kind.clone()))
        };
        let names = |k: &TypeKind| match k {
            TypeKind::Struct(s) => s.fields.iter().map(|f| format!("{}{}", f.name, if f.required { "!" } else { "" })).collect::<Vec<_>>(),
            k => panic!("not a struct: {k:?}"),
        };
        // `allOf` of the base and the derived part, a `$ref` beside properties, the derived
        // `const` on a property the base types as a string, a member required by one part and
        // declared by another: one struct, in `$defs` and inline alike.
        for derived in [
            r##"{"allOf": [{"$ref": "#/$defs/Base"}, {"type": "object", "properties": {"kind": {"const": "c"}, "r": {"type": "number"}}, "required": ["r"]}]}"##,
            r##"{"$ref": "#/$defs/Base", "properties": {"kind": {"const": "c"}, "r": {"type": "number"}}, "required": ["r"]}"##,
        ] {
            let (d, inline) = lowered(derived);
            let want: Vec<String> = ["kind!", "id!", "r!"].map(str::to_owned).to_vec();
            let mut got = names(&d);
            got.sort();
            let mut w = want.clone();
            w.sort();
            assert_eq!(got, w, "{derived}");
            assert_eq!(names(&inline.expect("inline is named")), names(&d), "{derived}");
            let TypeKind::Struct(s) = &d else { unreachable!() };
            let kind = s.fields.iter().find(|f| f.name == "kind").expect("kind");
            assert_eq!(kind.node.literals, Some(vec![Value::from("c")]), "the derived declaration is the field: {derived}");
        }
        // Not one set of fields: a part closed to the others' members, a property two parts
        // declare in ways neither implies, a part composing further (an applicator, a `$ref` of
        // its own, here to the base). A checked value each.
        for derived in [
            r##"{"allOf": [{"$ref": "#/$defs/Alias"}, {"type": "object", "properties": {"r": {}}}]}"##,
            r##"{"allOf": [{"$ref": "#/$defs/Base"}, {"type": "object", "properties": {"r": {}}, "additionalProperties": false}]}"##,
            r##"{"allOf": [{"$ref": "#/$defs/Base"}, {"type": "object", "properties": {"kind": {"type": "integer"}}}]}"##,
            r##"{"allOf": [{"$ref": "#/$defs/Base"}, {"type": "object", "properties": {"r": {}}, "anyOf": [{"required": ["r"]}, {"required": ["id"]}]}]}"##,
        ] {
            let (d, inline) = lowered(derived);
            assert!(matches!(d, TypeKind::Alias(ref n) if !n.applied.is_empty()), "{derived}: {d:?}");
            assert!(inline.is_none(), "{derived}");
        }
        // A `$ref` with only annotations beside it is the type it names, not a struct of its own.
        let space = lower_text(r##"{"type": "object", "$defs": {"Base": {"type": "object", "properties": {"a": {}}}, "D": {"$ref": "#/$defs/Base", "description": "d"}}}"##).expect("lowers");
        assert!(matches!(&space.types["D"].kind, TypeKind::Alias(n) if n.reference.as_deref() == Some("Base")), "{:?}", space.types["D"].kind);
    }

    #[test]
    fn unevaluated_properties_seeing_through_nested_branches_names_no_type_anew() {
        // The branches it tests are lowered where the schema has them, once every named type is:
        // a single `allOf` or a nullable `anyOf` around them, which pass their parent's name on,
        // name them as without it; a tagged union's branches are told by their tag, not made
        // into types of their own; a method union's `x-result` branches are not refused.
        let obj = |p: &str| format!(r#"{{"type": "object", "properties": {{"{p}": {{"type": "string"}}}}, "required": ["{p}"]}}"#);
        let tagged = |k: &str| format!(r#"{{"type": "object", "properties": {{"kind": {{"const": "{k}"}}, "r": {{"type": "number"}}}}, "required": ["kind", "r"]}}"#);
        let defs = format!(
            r#"{{"X": {{"description": "d", "allOf": [{{"anyOf": [{}, {}]}}]}}, "N": {{"anyOf": [{}, {{"type": "null"}}]}}, "Shape": {{"oneOf": [{}, {}]}}}}"#,
            obj("a"),
            obj("b"),
            obj("p"),
            tagged("circle"),
            tagged("square")
        );
        let (plain, seeing) = names_without_and_with_unevaluated(&defs);
        assert_eq!(plain, seeing, "the same types, with the same names");
        let method = |m: &str| format!(r#"{{"type": "object", "properties": {{"method": {{"const": "{m}"}}, "params": {{"type": "object"}}}}, "required": ["method"], "x-result": {{"type": "string"}}}}"#);
        let defs = format!(r#"{{"Call": {{"oneOf": [{}, {}]}}}}"#, method("a"), method("b"));
        let (plain, seeing) = names_without_and_with_unevaluated(&defs);
        assert_eq!(plain, seeing);
        let text = format!(r##"{{"type": "object", "$defs": {defs}, "allOf": [{{"$ref": "#/$defs/Call"}}], "unevaluatedProperties": false}}"##);
        let space = lower_text(&text).expect("a method union seen through is not refused");
        assert!(space.guards.iter().all(|g| matches!(g, Guard::Tag { name, .. } if name == "method")), "{:?}", space.guards);
    }

    #[test]
    fn unevaluated_properties_refuses_more_branch_paths_than_it_checks() {
        // d0 .. d8: each an `anyOf` of two `$ref`s to the next, 2^9 ways to the last one.
        let mut defs: Vec<String> = (0..9).map(|i| format!(r##""d{i}": {{"anyOf": [{{"$ref": "#/$defs/d{n}"}}, {{"$ref": "#/$defs/d{n}"}}]}}"##, n = i + 1)).collect();
        defs.push(r#""d9": {"properties": {"z": {}}}"#.to_owned());
        let text = format!(r##"{{"type": "object", "$defs": {{{}}}, "allOf": [{{"$ref": "#/$defs/d0"}}], "unevaluatedProperties": false}}"##, defs.join(", "));
        let e = lower_text(&text).expect_err("refused");
        assert_eq!((e.pointer.as_str(), e.keyword.as_str()), ("", "unevaluatedProperties"), "{e}");
        assert!(e.message.contains("more than 256"), "{e}");
    }

    #[test]
    fn an_object_that_says_nothing_of_its_members_is_free_form_named_or_not() {
        // Named in `$defs` or a property's own schema, `{"type": "object"}` (with nothing, an open
        // `additionalProperties`, no properties, no required members) keeps every member: the
        // free-form object, not a struct of no fields. Any rule on the members makes a struct.
        let text = r##"{"$defs": {
            "Bare": {"type": "object", "description": "d", "x-note": 1},
            "Open": {"type": "object", "additionalProperties": true},
            "Empty": {"type": "object", "properties": {}, "required": []},
            "Nullable": {"type": ["object", "null"]},
            "Closed": {"type": "object", "additionalProperties": false},
            "Props": {"type": "object", "properties": {"a": {"type": "string"}}},
            "Holder": {"type": "object", "properties": {"inline": {"type": "object", "properties": {}}}}}}"##;
        let space = lower_text(text).expect("lowers");
        let kind = |n: &str| &space.types.get(n).unwrap_or_else(|| panic!("{n}")).kind;
        for name in ["Bare", "Open", "Empty"] {
            assert!(matches!(kind(name), TypeKind::Alias(Node { repr: Repr::Object, .. })), "{name}: {:?}", kind(name));
        }
        assert!(matches!(kind("Nullable"), TypeKind::Alias(n) if matches!(&n.repr, Repr::Nullable(r) if **r == Repr::Object)), "{:?}", kind("Nullable"));
        for name in ["Closed", "Props"] {
            assert!(matches!(kind(name), TypeKind::Struct(_)), "{name}: {:?}", kind(name));
        }
        let TypeKind::Struct(holder) = kind("Holder") else { panic!("Holder is a struct") };
        assert_eq!(holder.fields[0].node.repr, Repr::Object);
    }

    #[test]
    fn every_refusal_is_reported_at_once() {
        // A refused type does not hide the next one's refusals, and what sits under a refused
        // keyword (`anyOf`'s branch) is reported too; the lowering's own refusals come with them.
        let text = r##"{"$defs": {
            "A": {"type": "array", "unevaluatedItems": false},
            "B": {"anyOf": [{"type": "array", "unevaluatedItems": false}]},
            "C": {"oneOf": [{"type": "string"}, {"type": "integer"}], "x-extensible": true},
            "D": {"type": "string", "maxLength": 3}}}"##;
        let r = lower_all(&Documents::from_texts([("case.json", text)]).expect("JSON")).expect_err("refused");
        let got: Vec<(&str, &str, &str)> = r.iter().map(|e| (e.file.as_str(), e.pointer.as_str(), e.keyword.as_str())).collect();
        assert_eq!(got, [("case.json", "/$defs/A", "unevaluatedItems"), ("case.json", "/$defs/B/anyOf/0", "unevaluatedItems"), ("case.json", "/$defs/C/oneOf/0", "type")]);
        assert_eq!(lower(&Documents::from_texts([("case.json", text)]).expect("JSON")).expect_err("refused"), *r.first());
    }

    /// Removes every foreign `x-…` keyword, at any depth.
    fn without_foreign_extensions(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(m.iter().filter(|(k, _)| !is_foreign_extension(k)).map(|(k, v)| (k.clone(), without_foreign_extensions(v))).collect()),
            Value::Array(a) => Value::Array(a.iter().map(without_foreign_extensions).collect()),
            v => v.clone(),
        }
    }

    #[test]
    fn foreign_x_keywords_are_ignored_everywhere() {
        // ACP's own annotations at the root, on a property, beside `$ref`, beside a tagged and a
        // nullable `oneOf`, on a union branch and on the null branch: the model is the one of the
        // same schema without them (before, each was refused as outside the subset).
        let text = r##"{"title": "Req", "x-side": "agent", "x-docs-ignore": true,
            "oneOf": [{"type": "object", "x-method": "go", "required": ["method", "params"], "additionalProperties": false,
                "properties": {"method": {"const": "go"}, "params": {"$ref": "#/$defs/P", "x-deserialize-default-on-error": true}},
                "x-result": {"oneOf": [{"type": "string", "x-side": "client"}, {"type": "null", "x-docs-ignore": true}], "x-deserialize-default-on-null": true}}],
            "$defs": {"P": {"type": "object", "properties": {"n": {"type": "integer", "x-deserialize-skip-invalid-items": true}}, "x-extensibel": true}}}"##;
        let with = lower_text(text).expect("foreign x- keywords are ignored");
        let bare = without_foreign_extensions(&serde_json::from_str(text).expect("JSON")).to_string();
        assert_ne!(bare, text, "the fixture holds foreign keywords");
        assert_eq!(format!("{with:?}"), format!("{:?}", lower_text(&bare).expect("lowers")));
    }

    #[test]
    fn editor_annotations_are_ignored_and_a_misspelled_rule_is_not() {
        // VS Code's JSON language service keywords, ajv-errors' `errorMessage` and OpenAPI's
        // `example`, where editors' schemas put them: the model is the one without them.
        let text = r##"{"title": "Settings", "type": "object", "allowComments": true, "allowTrailingCommas": true,
            "errorMessage": {"required": "give a name"}, "defaultSnippets": [{"label": "new", "body": {"name": "$1"}}],
            "properties": {
                "name": {"type": "string", "markdownDescription": "The **name**", "patternErrorMessage": "letters only", "pattern": "^[a-z]+$", "example": "ada"},
                "level": {"enum": ["low", "high"], "enumDescriptions": ["Low", "High"], "markdownEnumDescriptions": ["*Low*", "*High*"], "enumItemLabels": ["L", "H"]},
                "old": {"type": "boolean", "deprecationMessage": "use level", "doNotSuggest": true, "suggestSortText": "z"}}}"##;
        let with = lower_text(text).expect("editor annotations are ignored");
        let bare = without_foreign_extensions(&serde_json::from_str(text).expect("JSON")).to_string();
        assert!(!bare.contains("markdownDescription") && !bare.contains("example"), "{bare}");
        assert_eq!(format!("{with:?}"), format!("{:?}", lower_text(&bare).expect("lowers")));
        let misspelled = lower_text(r##"{"type": "string", "minLenght": 1, "markdownDescription": "x"}"##).expect_err("refused");
        assert_eq!(misspelled.keyword, "minLenght");
    }

    #[test]
    fn a_tags_annotations_leave_the_union_tagged() {
        // `title`, `examples`, `default`, `deprecated` and another tool's `x-…` beside the tag's
        // `const` change nothing (they were refused); another rule there still is.
        let text = r##"{"oneOf": [
            {"type": "object", "required": ["k"], "properties": {"k": {"const": "a", "title": "Kind", "examples": ["a"], "default": "a", "deprecated": false, "x-foo": 1}}},
            {"type": "object", "required": ["k"], "properties": {"k": {"const": "b", "markdownDescription": "B"}}}]}"##;
        let space = lower_text(text).expect("annotations on the tag are accepted");
        assert!(space.types.values().any(|t| matches!(&t.kind, TypeKind::Union(u) if u.variants.len() == 2)), "a tagged union");
        let ruled = lower_text(r##"{"oneOf": [{"type": "object", "required": ["k"], "properties": {"k": {"const": "a", "maxLength": 1}}}], "x-extensible": true}"##);
        assert_eq!(ruled.expect_err("a rule on the tag").keyword, "maxLength");
    }

    #[test]
    fn an_absolute_root_id_names_the_file() {
        // As published schemas write it: a `$ref` by the file's own URI is the file; another
        // URI is still a remote reference, and a relative `$id` must be the file's name.
        let text = r##"{"$id": "https://example.com/s/case.json", "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"$ref": "https://example.com/s/case.json#/$defs/A"}}, "$defs": {"A": {"type": "string"}}}"##;
        let space = lower_text(text).expect("an absolute $id is the file's");
        let TypeKind::Struct(root) = &space.types[&space.roots[0]].kind else { panic!("a struct") };
        assert_eq!(root.fields[1].node.reference.as_deref(), Some("A"));
        let remote = lower_text(r##"{"$id": "https://example.com/s/case.json", "$ref": "https://example.com/other.json"}"##);
        assert_eq!(remote.expect_err("remote").keyword, "$ref");
        assert_eq!(lower_text(r##"{"$id": "other.json", "type": "string"}"##).expect_err("not the file's name").keyword, "$id");
        assert_eq!(lower_text(r##"{"$id": "https://example.com/x.json#frag", "type": "string"}"##).expect_err("a fragment").keyword, "$id");
    }

    #[test]
    fn const_beside_enum_is_the_const_when_the_enum_lists_it() {
        let space = lower_text(r##"{"type": "string", "enum": ["a", "b"], "const": "a"}"##).expect("both");
        let TypeKind::Alias(node) = &space.types[&space.roots[0]].kind else { panic!("an alias") };
        assert!(node.is_const);
        assert_eq!(node.literals, Some(vec![serde_json::json!("a")]));
        assert!(lower_text(r##"{"enum": [1, 2], "const": 1.0}"##).is_ok(), "1.0 is 1");
        assert_eq!(lower_text(r##"{"enum": [9007199254740992.0], "const": 9007199254740993}"##).expect_err("2^53 + 1 is not 2^53").keyword, "const");
        assert_eq!(lower_text(r##"{"enum": ["b"], "const": "a"}"##).expect_err("nothing matches").keyword, "const");
    }

    #[test]
    fn a_bound_no_double_holds_is_refused() {
        assert_eq!(lower_text(r##"{"type": "integer", "maximum": 9007199254740993}"##).expect_err("2^53 + 1").keyword, "maximum");
        assert_eq!(lower_text(r##"{"type": "integer", "exclusiveMinimum": -9007199254740995}"##).expect_err("-(2^53 + 3)").keyword, "exclusiveMinimum");
        for ok in [r##"{"type": "integer", "maximum": 9007199254740992}"##, r##"{"type": "integer", "minimum": -9223372036854775808}"##, r##"{"maximum": 1e300}"##] {
            assert!(lower_text(ok).is_ok(), "{ok}");
        }
        // `i64::MAX` as a top is read as the `int64` format's top; as a bottom it is still refused.
        for kw in ["maximum", "exclusiveMaximum"] {
            let space = lower_text(&format!(r##"{{"type": "integer", "{kw}": 9223372036854775807}}"##)).expect("i64::MAX");
            let TypeKind::Alias(n) = &space.types[&space.roots[0]].kind else { panic!("an alias") };
            assert_eq!(n.number.maximum.or(n.number.exclusive_maximum), Some(I64_SAFE_MAX), "{kw}");
        }
        assert_eq!(lower_text(r##"{"type": "integer", "minimum": 9223372036854775807}"##).expect_err("a bottom").keyword, "minimum");
    }

    #[test]
    fn definitions_hold_named_types_and_earlier_dialects_are_read_with_their_meaning() {
        let text = r##"{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
            "properties": {"a": {"$ref": "#/definitions/Count", "type": "string"}, "bad": {"$ref": "#/definitions/Bad"}},
            "definitions": {"Count": {"type": "integer"}, "Bad": {"type": "string", "minLenght": 1}}}"##;
        let e = lower_text(text).expect_err("a misspelled rule");
        // The refusal names the real pointer in the file, under `definitions`.
        assert_eq!((e.pointer.as_str(), e.keyword.as_str()), ("/definitions/Bad", "minLenght"), "{e}");
        let space = lower_text(&text.replace("minLenght", "minLength")).expect("lowers");
        let count = space.types.values().find(|t| t.origin.pointer == "/definitions/Count").expect("a named type");
        assert_eq!(count.name, "Count");
        // The `type` beside the `$ref` is ignored, as draft-07 has it: the field is the target.
        let TypeKind::Struct(root) = &space.types[&space.roots[0]].kind else { panic!("a struct") };
        assert_eq!(root.fields[0].node.repr, Repr::Named("Count".into()));
        // draft-03 is not read.
        let old = lower_text(r##"{"$schema": "http://json-schema.org/draft-03/schema#", "type": "string"}"##).expect_err("draft-03");
        assert_eq!(old.keyword, "$schema");
    }

    #[test]
    fn rules_for_other_types_on_an_object_only_schema_are_inert() {
        // As 2020-12 has them: `minItems` or `maxLength` beside `"type": "object"` constrain
        // nothing (they were refused); `enum` beside an object's properties keeps it a checked
        // value.
        let space = lower_text(r##"{"type": "object", "minItems": 1, "maxLength": 3, "pattern": "x", "properties": {"a": {"type": "string"}}}"##).expect("inert");
        assert!(matches!(space.types[&space.roots[0]].kind, TypeKind::Struct(_)));
        assert!(lower_text(r##"{"type": ["object", "null"], "minimum": 1, "properties": {"a": {}}}"##).is_ok());
        // Objects and strings at once: a checked value whose strings keep the rule.
        let mixed = lower_text(r##"{"type": ["object", "string"], "minLength": 1, "properties": {"a": {}}}"##).expect("a mix");
        assert!(matches!(&mixed.types[&mixed.roots[0]].kind, TypeKind::Alias(n) if n.string.min_length == Some(1)));
        let listed = lower_text(r##"{"type": "object", "enum": [{}], "properties": {"a": {}}}"##).expect("a checked value");
        assert!(matches!(&listed.types[&listed.roots[0]].kind, TypeKind::Alias(n) if n.literals.is_some()), "enum restricts the objects");
    }

    #[test]
    fn our_own_x_keywords_keep_their_checks() {
        for (text, keyword) in [
            (r##"{"type": "string", "x-echoed": "yes"}"##, "x-echoed"),
            (r##"{"type": "integer", "x-extensible": true}"##, "x-extensible"),
            (r##"{"type": "object", "properties": {"a": {"type": "string", "x-constants": {}}}}"##, "x-constants"),
            (r##"{"type": "object", "properties": {"a": {"type": "null", "x-result": {}}}}"##, "x-result"),
        ] {
            assert_eq!(lower_text(text).expect_err(text).keyword, keyword, "{text}");
        }
    }

    /// The number rules of a one-file schema's root, a type alias.
    fn root_bounds(text: &str) -> (Option<f64>, Option<f64>) {
        let space = lower_text(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        match space.types.values().find(|t| t.origin.pointer.is_empty()).map(|t| &t.kind) {
            Some(TypeKind::Alias(node)) => (node.number.minimum, node.number.maximum),
            other => panic!("{text}: the root is not an alias: {other:?}"),
        }
    }

    #[test]
    fn integer_formats_imply_their_range_and_the_tighter_bound_wins() {
        let none = (None, None);
        for (text, expected) in [
            (r#"{"type": "integer", "format": "uint16"}"#, (Some(0.0), Some(65535.0))),
            (r#"{"type": "integer", "format": "int8"}"#, (Some(-128.0), Some(127.0))),
            (r#"{"type": "integer", "format": "int32"}"#, (Some(-2147483648.0), Some(2147483647.0))),
            (r#"{"type": "integer", "format": "uint32", "minimum": 0}"#, (Some(0.0), Some(4294967295.0))),
            (r#"{"type": "integer", "format": "int64"}"#, (Some(I64_SAFE_MIN), Some(I64_SAFE_MAX))),
            (r#"{"type": "integer", "format": "uint64", "minimum": 0}"#, (Some(0.0), Some(I64_SAFE_MAX))),
            (r#"{"type": "integer", "format": "uint"}"#, (Some(0.0), Some(I64_SAFE_MAX))),
            (r#"{"type": ["integer", "null"], "format": "uint8"}"#, (Some(0.0), Some(255.0))),
            // Explicit bounds: the tighter wins, on either side.
            (r#"{"type": "integer", "format": "uint8", "maximum": 100}"#, (Some(0.0), Some(100.0))),
            (r#"{"type": "integer", "format": "uint8", "maximum": 1000, "minimum": -5}"#, (Some(0.0), Some(255.0))),
            (r#"{"type": "integer", "format": "int8", "minimum": -5}"#, (Some(-5.0), Some(127.0))),
            // Annotations only: float formats, unknown formats, integer formats off an integer schema.
            (r#"{"type": "integer", "format": "float"}"#, none),
            (r#"{"type": "number", "format": "double"}"#, none),
            (r#"{"type": "integer", "format": "int128"}"#, none),
            (r#"{"type": "number", "format": "uint16"}"#, none),
            (r#"{"type": ["integer", "string"], "format": "uint16"}"#, none),
            (r#"{"type": "string", "format": "uint16"}"#, none),
            (r#"{"type": "string", "format": "date-time"}"#, none),
            (r#"{"format": "uri"}"#, none),
        ] {
            assert_eq!(root_bounds(text), expected, "{text}");
        }
    }

    #[test]
    fn string_formats_are_annotations_wherever_they_stand() {
        let text = r##"{"type": "object", "format": "x-anything", "properties": {
            "u": {"$ref": "#/$defs/U", "format": "uri"},
            "n": {"oneOf": [{"type": "string"}, {"type": "null"}], "format": "date-time"},
            "e": {"type": "string", "enum": ["a"], "format": "email"}},
            "$defs": {"U": {"type": "string", "format": "uri", "minLength": 1}}}"##;
        let with = lower_text(text).expect("formats are annotations");
        let bare = text.replace(r#""format": "x-anything", "#, "").replace(r#", "format": "uri""#, "").replace(r#", "format": "date-time""#, "").replace(r#", "format": "email""#, "");
        assert!(!bare.contains("format"), "{bare}");
        assert_eq!(format!("{with:?}"), format!("{:?}", lower_text(&bare).expect("lowers")));
    }

    #[test]
    fn a_format_that_is_no_string_is_refused_and_an_integer_format_bounds_only_its_own_integer() {
        let e = lower_text(r#"{"type": "integer", "format": 16}"#).expect_err("format 16");
        assert_eq!((e.pointer.as_str(), e.keyword.as_str()), ("", "format"));
        // Beside `$ref` or a nullable `oneOf`, in a schema with no `type` of its own, an integer
        // format is an annotation: the referenced integer keeps its whole range.
        for text in [
            r##"{"type": "object", "properties": {"a": {"$ref": "#/$defs/I", "format": "uint8"}}, "$defs": {"I": {"type": "integer"}}}"##,
            r#"{"type": "object", "properties": {"a": {"oneOf": [{"type": "integer"}, {"type": "null"}], "format": "uint8"}}}"#,
        ] {
            let space = lower_text(text).expect(text);
            let TypeKind::Struct(s) = &space.types["Case"].kind else { panic!("{text}: Case is a struct") };
            let a = &s.fields[0].node;
            assert!(a.number.is_empty() && a.applied.nodes().all(|n| n.number.is_empty()), "{text}: {a:?}");
            assert!(!a.applied.is_empty(), "{text}: the composition is kept");
        }
    }

    #[test]
    fn the_64_bit_bounds_are_the_nearest_f64s_inside_the_i64_range() {
        let two_63 = 2f64.powi(63);
        assert!(I64_SAFE_MAX < two_63 && f64::from_bits(I64_SAFE_MAX.to_bits() + 1) == two_63);
        assert!(I64_SAFE_MIN > -two_63 && f64::from_bits(I64_SAFE_MIN.to_bits() + 1) == -two_63);
        // i64::MAX rounds up to 2^63 as an f64, which is why it cannot be the bound.
        assert_eq!(i64::MAX as f64, two_63);
        assert!(I64_SAFE_MAX as i64 > i64::MAX - 1024 && I64_SAFE_MIN as i64 <= i64::MIN + 1024);
    }

    #[test]
    fn the_error_set_is_decided_once() {
        let text = format!(r##"{{"title": "Failure", "type": "object", "required": ["code", "message"], "properties": {{"code": {{"$ref": "#/$defs/Code"}}, "message": {{"type": "string"}}}}, "$defs": {{"Code": {CODES}}}}}"##);
        let space = lower_text(&text).expect("lowers");
        let set = space.errors.expect("an error set");
        assert_eq!(set.enum_name, "Code");
        assert_eq!(set.carrier.as_deref(), Some("Failure"));
        assert_eq!(set.base_class_name.as_deref(), Some("FailureException"));
        assert!(set.extensible);
        let got: Vec<(&str, &str, bool, i64)> = set.codes.iter().map(|c| (c.value.as_str(), c.class_name.as_str(), c.retryable, c.rpc_code)).collect();
        assert_eq!(got, [("busy", "BusyError", true, -32001), ("bad", "BadError", false, -32602)]);
        assert_eq!(ErrorSet::UNKNOWN_RPC_CODE, -32000);
    }

    #[test]
    fn an_error_code_without_rpc_code_is_refused_with_file_pointer_and_keyword() {
        let text = r##"{"type": "string", "enum": ["busy", "bad"], "x-enum": {
            "busy": {"retryable": true, "rpc_code": -32001},
            "bad": {"retryable": false}}}"##;
        let e = lower_text(text).expect_err("refused");
        assert_eq!((e.file.as_str(), e.pointer.as_str(), e.keyword.as_str()), ("case.json", "/x-enum/bad", "x-enum"));
        assert!(e.message.contains("`bad` has no `rpc_code`"), "{}", e.message);
    }

    #[test]
    fn an_error_code_without_retryable_is_refused() {
        let text = r##"{"type": "string", "enum": ["busy"], "x-enum": {"busy": {"rpc_code": -32001}}}"##;
        let e = lower_text(text).expect_err("refused");
        assert_eq!((e.pointer.as_str(), e.keyword.as_str()), ("/x-enum/busy", "x-enum"));
        assert!(e.message.contains("no `retryable`"), "{}", e.message);
    }

    #[test]
    fn a_non_integer_rpc_code_is_refused() {
        let text = r##"{"type": "string", "enum": ["busy"], "x-enum": {"busy": {"retryable": true, "rpc_code": "x"}}}"##;
        let e = lower_text(text).expect_err("refused");
        assert_eq!((e.pointer.as_str(), e.keyword.as_str()), ("/x-enum/busy/rpc_code", "x-enum"));
    }

    #[test]
    fn two_codes_with_one_rpc_code_are_refused() {
        let text = r##"{"type": "string", "enum": ["a", "b"], "x-enum": {
            "a": {"retryable": true, "rpc_code": -32001}, "b": {"retryable": true, "rpc_code": -32001}}}"##;
        let e = lower_text(text).expect_err("refused");
        assert_eq!((e.pointer.as_str(), e.keyword.as_str()), ("/x-enum/b/rpc_code", "x-enum"));
        assert!(e.message.contains("of `a`"), "{}", e.message);
    }

    #[test]
    fn only_one_error_code_enum_is_allowed() {
        let text = format!(r##"{{"type": "object", "properties": {{"a": {{"$ref": "#/$defs/A"}}, "b": {{"$ref": "#/$defs/B"}}}}, "$defs": {{"A": {CODES}, "B": {CODES}}}}}"##);
        let e = lower_text(&text).expect_err("refused");
        assert_eq!((e.pointer.as_str(), e.keyword.as_str()), ("/$defs/B", "x-enum"));
        assert!(e.message.contains("`A` is one already"), "{}", e.message);
    }

    #[test]
    fn an_enum_without_codes_is_no_error_set() {
        let space = lower_text(r##"{"type": "string", "enum": ["a"], "x-enum": {"a": {"description": "A."}}}"##).expect("lowers");
        assert!(space.errors.is_none());
    }

    #[test]
    fn a_method_branch_without_params_is_refused_saying_the_rule() {
        let text = r##"{"oneOf": [{"type": "object", "required": ["method"], "properties": {"method": {"const": "go"}}, "x-result": {"type": "null"}}]}"##;
        let e = lower_text(text).expect_err("refused");
        assert_eq!(e.keyword, "x-result");
        assert!(e.message.contains("must declare a `params` property"), "{}", e.message);
    }

    #[test]
    fn branch_type_names_are_decided_once_and_clashes_get_a_number() {
        // `KindA` is both a type of its own and what branch `A` of `Kind` would be called.
        let text = r##"{"type": "object", "properties": {
            "k": {"$ref": "#/$defs/Kind"}, "x": {"$ref": "#/$defs/KindA"}},
            "$defs": {
              "KindA": {"type": "object", "properties": {"n": {"type": "integer"}}},
              "Kind": {"oneOf": [
                {"title": "A", "type": "object", "required": ["t"], "properties": {"t": {"const": "a"}}},
                {"title": "B", "type": "object", "required": ["t"], "properties": {"t": {"const": "b"}}}]}}}"##;
        let space = lower_text(text).expect("lowers");
        let Some(TypeKind::Union(u)) = space.types.get("Kind").map(|t| &t.kind) else { panic!("Kind is a union") };
        let names: Vec<&str> = u.variants.iter().map(|v| v.type_name.as_str()).collect();
        assert_eq!(names, ["KindA2", "KindB"]);
        assert_eq!(u.unknown_type_name, None, "only an extensible union has an unknown branch");
    }

    #[test]
    fn x_openrpc_names_the_service() {
        let method = r##"{"type": "object", "additionalProperties": false, "required": ["method", "params"], "properties": {"method": {"const": "go"}, "params": {"type": "object"}}, "x-result": {"type": "null"}}"##;
        let plain = format!(r##"{{"title": "Req", "oneOf": [{method}]}}"##);
        assert_eq!(lower_text(&plain).expect("lowers").methods.expect("methods").service.title, "Req");
        let named = format!(r##"{{"title": "Req", "x-openrpc": {{"title": "My service", "license": "MIT"}}, "oneOf": [{method}]}}"##);
        let s = lower_text(&named).expect("lowers").methods.expect("methods").service;
        assert_eq!((s.title.as_str(), s.description, s.license.as_deref()), ("My service", None, Some("MIT")));
        let bad = format!(r##"{{"x-openrpc": {{"name": "x"}}, "oneOf": [{method}]}}"##);
        let e = lower_text(&bad).expect_err("refused");
        assert_eq!((e.pointer.as_str(), e.keyword.as_str()), ("/x-openrpc/name", "x-openrpc"));
        let misplaced = lower_text(r##"{"type": "object", "x-openrpc": {"title": "x"}}"##).expect_err("refused");
        assert_eq!(misplaced.keyword, "x-openrpc");
    }
}
