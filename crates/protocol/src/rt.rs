//! Runtime support for the generated code: JSON pointers, violations, exact wire decoding, and
//! the checks serde cannot express (lengths in code points, ECMA-262 patterns, bounds, consts).
//!
//! Generated types decode through [`Wire`] rather than serde's derive so that decoding accepts
//! exactly what the schema's types accept: objects only as JSON objects (never as arrays), `1.0`
//! as an integer, `null` only where the schema allows it, and no duplicate keys.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One way a document breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// The JSON pointer (RFC 6901) of the offending value; empty for the whole document.
    pub pointer: String,
    /// The schema keyword that was broken, such as `maxLength` or `required`.
    pub keyword: String,
    /// What is wrong, for a person to read.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pointer = if self.pointer.is_empty() { "(root)" } else { &self.pointer };
        write!(f, "{pointer}: {}", self.message)
    }
}

/// Where a value sits in its document, as a chain of borrowed segments that costs nothing until
/// a violation needs it written out as a JSON pointer.
#[derive(Debug, Clone, Copy)]
pub enum Path<'a> {
    /// The document itself.
    Root,
    /// A property of the parent.
    Key(&'a Path<'a>, &'a str),
    /// An element of the parent.
    Index(&'a Path<'a>, usize),
}

impl<'a> Path<'a> {
    /// The path of property `key` under `self`.
    pub fn key(&'a self, key: &'a str) -> Path<'a> {
        Path::Key(self, key)
    }
    /// The path of element `index` under `self`.
    pub fn index(&'a self, index: usize) -> Path<'a> {
        Path::Index(self, index)
    }
    /// The JSON pointer (RFC 6901) for this path.
    pub fn to_pointer(&self) -> String {
        let mut segments = Vec::new();
        let mut cur = self;
        loop {
            match cur {
                Path::Root => break,
                Path::Key(p, k) => {
                    segments.push(Cow::Borrowed(*k));
                    cur = p;
                }
                Path::Index(p, i) => {
                    segments.push(Cow::Owned(i.to_string()));
                    cur = p;
                }
            }
        }
        let mut out = String::new();
        for seg in segments.iter().rev() {
            out.push('/');
            for c in seg.chars() {
                match c {
                    '~' => out.push_str("~0"),
                    '/' => out.push_str("~1"),
                    c => out.push(c),
                }
            }
        }
        out
    }
}

/// Records a violation at `path`.
#[cold]
pub fn report(out: &mut Vec<Violation>, path: &Path<'_>, keyword: &str, message: String) {
    out.push(Violation { pointer: path.to_pointer(), keyword: keyword.to_owned(), message });
}

/// A generated type's checks for everything its Rust type does not already guarantee.
pub trait Validate {
    /// Appends every violation under `path` to `out`.
    fn validate_at(&self, path: &Path<'_>, out: &mut Vec<Violation>);

    /// Every violation, or `Ok` when there is none.
    ///
    /// # Errors
    ///
    /// The violations, each with its JSON pointer, keyword and message.
    fn validate(&self) -> Result<(), Vec<Violation>> {
        let mut out = Vec::new();
        self.validate_at(&Path::Root, &mut out);
        if out.is_empty() { Ok(()) } else { Err(out) }
    }
}

impl<T: Validate> Validate for Box<T> {
    fn validate_at(&self, path: &Path<'_>, out: &mut Vec<Violation>) {
        (**self).validate_at(path, out);
    }
}

/// The full schema of a generated type, checked against an untyped JSON value. Used to explain
/// a document that does not decode, with every violation and its pointer.
pub trait SchemaCheck {
    /// Appends every violation of `value` under `path` to `out`.
    fn check_value(value: &Value, path: &Path<'_>, out: &mut Vec<Violation>);
}

/// Why a document was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    /// The bytes are not a JSON document (bad syntax, invalid UTF-8, nesting deeper than the
    /// parser allows, or trailing data).
    #[error("not a JSON document: {0}")]
    NotJson(String),
    /// The document is JSON but breaks the schema.
    #[error("{} schema violation(s); first: {}", .0.len(), .0.first().map(ToString::to_string).unwrap_or_default())]
    Invalid(Vec<Violation>),
}

impl DocumentError {
    /// The error as violations: [`DocumentError::Invalid`]'s own, or for text that is not JSON
    /// one at the root with keyword `json`.
    pub fn into_violations(self) -> Vec<Violation> {
        match self {
            DocumentError::Invalid(v) => v,
            DocumentError::NotJson(m) => vec![Violation { pointer: String::new(), keyword: "json".to_owned(), message: format!("not a JSON document: {m}") }],
        }
    }
}

/// The violation for a type name a schema does not have (keyword `typeName`), listing the names
/// it has.
pub fn unknown_type_name(type_name: &str, types: &[TypeInfo]) -> Violation {
    let known: Vec<&str> = types.iter().map(|t| t.name).collect();
    let shown = if known.len() > 20 { format!("{}, … ({} in all)", known[..20].join(", "), known.len()) } else { known.join(", ") };
    Violation { pointer: String::new(), keyword: "typeName".to_owned(), message: format!("no type is named `{}`; the types are {shown}", preview(type_name)) }
}

/// Decodes and validates one JSON document as `T`.
///
/// The fast path decodes straight into `T` and runs its checks. A document that does not decode
/// is parsed again as an untyped value and checked against the full schema, so the error lists
/// every violation with its JSON pointer.
///
/// # Errors
///
/// [`DocumentError::NotJson`] for bytes that are not JSON, [`DocumentError::Invalid`] with every
/// violation otherwise.
pub fn parse_validated<T>(input: &[u8]) -> Result<T, DocumentError>
where
    T: Wire + Validate + SchemaCheck,
{
    // One UTF-8 check over the whole document costs less than serde_json's check of each string
    // on its own (about 100 instructions a call). For UTF-8 input the two decoders are the same
    // (same escapes, lone surrogates, positions); input that is not UTF-8 takes the per-string
    // path, so its error still names the string where the bytes go wrong.
    if let Ok(text) = std::str::from_utf8(input) {
        return parse_validated_str(text);
    }
    decode_validated(serde_json::Deserializer::from_slice(input), input)
}

/// [`parse_validated`] for a document already known to be UTF-8: its strings are not checked
/// again one by one.
///
/// # Errors
///
/// As [`parse_validated`].
pub fn parse_validated_str<T>(input: &str) -> Result<T, DocumentError>
where
    T: Wire + Validate + SchemaCheck,
{
    decode_validated(serde_json::Deserializer::from_str(input), input.as_bytes())
}

/// The decode of `input` through `de` (nothing may follow the value), then the generated checks;
/// a decode error explained from `input`.
fn decode_validated<'de, R, T>(mut de: serde_json::Deserializer<R>, input: &[u8]) -> Result<T, DocumentError>
where
    R: serde_json::de::Read<'de>,
    T: Wire + Validate + SchemaCheck,
{
    let decoded = T::decode(&mut de).and_then(|v| de.end().map(|()| v));
    match decoded {
        Ok(value) => match value.validate() {
            Ok(()) => Ok(value),
            Err(v) => Err(DocumentError::Invalid(v)),
        },
        Err(e) => Err(explain::<T>(input, &e)),
    }
}

/// Explains why `input` did not decode as `T`.
#[cold]
pub fn explain<T: SchemaCheck>(input: &[u8], decode_error: &serde_json::Error) -> DocumentError {
    let value = match parse_value(input) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let mut out = Vec::new();
    T::check_value(&value, &Path::Root, &mut out);
    if out.is_empty() {
        // The schema accepts it but the typed form cannot hold it (an integer beyond 64 bits,
        // say): say so rather than call it valid.
        out.push(Violation {
            pointer: String::new(),
            keyword: "type".into(),
            message: format!("cannot be represented: {decode_error}"),
        });
    }
    DocumentError::Invalid(out)
}

/// Parses an untyped JSON value, naming invalid UTF-8 by its byte offset.
///
/// # Errors
///
/// [`DocumentError::NotJson`] with the reason and where.
pub fn parse_value(input: &[u8]) -> Result<Value, DocumentError> {
    if let Err(e) = std::str::from_utf8(input) {
        return Err(DocumentError::NotJson(format!("invalid UTF-8 at byte offset {}", e.valid_up_to())));
    }
    serde_json::from_slice(input).map_err(|e| DocumentError::NotJson(describe_json_error(&e)))
}

/// Parses an untyped JSON value exactly, as the generated decoders read: a key given twice, at
/// any depth, is refused, never resolved by its last copy (serde_json's own `Value` keeps the
/// last). For every message read from a client or a runner that is not decoded straight into a
/// generated type.
///
/// # Errors
///
/// [`DocumentError::NotJson`] for bytes that are not one JSON document (invalid UTF-8 named by
/// its byte offset); [`DocumentError::Invalid`] ("cannot be represented: duplicate property
/// `…`", naming the key, never its values) for a key given twice.
pub fn parse_value_exact(input: &[u8]) -> Result<Value, DocumentError> {
    if let Err(e) = std::str::from_utf8(input) {
        return Err(DocumentError::NotJson(format!("invalid UTF-8 at byte offset {}", e.valid_up_to())));
    }
    let mut de = serde_json::Deserializer::from_slice(input);
    match Value::decode(&mut de).and_then(|v| de.end().map(|()| v)) {
        Ok(v) => Ok(v),
        Err(e) if e.is_data() => Err(DocumentError::Invalid(vec![Violation {
            pointer: String::new(),
            keyword: "type".into(),
            message: format!("cannot be represented: {}", describe_json_error(&e)),
        }])),
        Err(e) => Err(DocumentError::NotJson(describe_json_error(&e))),
    }
}

/// A JSON syntax error as a sentence with its line and column.
pub fn describe_json_error(e: &serde_json::Error) -> String {
    let what = e.to_string();
    let what = what.split(" at line ").next().unwrap_or(&what).to_owned();
    format!("{what} (line {}, column {})", e.line(), e.column())
}

// ---------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------

/// The number of Unicode code points in `s`.
#[inline]
pub fn code_points(s: &str) -> u64 {
    s.chars().count() as u64
}

/// Whether `s` has at most `max` code points, counting only when the byte length cannot decide.
#[inline]
pub fn max_length(s: &str, max: u64) -> bool {
    let bytes = s.len() as u64;
    bytes <= max || (bytes <= max.saturating_mul(4) && code_points(s) <= max)
}

/// Whether `s` has at least `min` code points, counting only when the byte length cannot decide.
#[inline]
pub fn min_length(s: &str, min: u64) -> bool {
    let bytes = s.len() as u64;
    if bytes < min {
        return false;
    }
    bytes >= min.saturating_mul(4) || code_points(s) >= min
}

/// A `minLength` violation.
#[cold]
pub fn min_length_violation(out: &mut Vec<Violation>, path: &Path<'_>, s: &str, min: u64) {
    report(out, path, "minLength", format!("must be at least {min} characters long, is {}", code_points(s)));
}

/// A `maxLength` violation.
#[cold]
pub fn max_length_violation(out: &mut Vec<Violation>, path: &Path<'_>, s: &str, max: u64) {
    report(out, path, "maxLength", format!("must be at most {max} characters long, is {}", code_points(s)));
}

/// A `pattern` violation.
#[cold]
pub fn pattern_violation(out: &mut Vec<Violation>, path: &Path<'_>, s: &str, pattern: &str) {
    report(out, path, "pattern", format!("{} does not match the pattern `{pattern}`", preview(s)));
}

/// A `const` violation for a string.
#[cold]
pub fn const_violation(out: &mut Vec<Violation>, path: &Path<'_>, found: &Value, expected: &Value) {
    report(out, path, "const", format!("must be {expected}, found {}", preview_value(found)));
}

/// An `enum` violation.
#[cold]
pub fn enum_violation(out: &mut Vec<Violation>, path: &Path<'_>, found: &Value, allowed: &[Value]) {
    let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
    report(out, path, "enum", format!("must be one of {}, found {}", list.join(", "), preview_value(found)));
}

/// A bound violation for a number (`keyword` is the bound's keyword).
#[cold]
pub fn bound_violation(out: &mut Vec<Violation>, path: &Path<'_>, keyword: &str, found: f64, bound: f64) {
    let rel = match keyword {
        "minimum" => "at least",
        "maximum" => "at most",
        "exclusiveMinimum" => "greater than",
        _ => "less than",
    };
    report(out, path, keyword, format!("must be {rel} {}, is {}", num(bound), num(found)));
}

/// An items-count violation.
#[cold]
pub fn items_violation(out: &mut Vec<Violation>, path: &Path<'_>, keyword: &str, len: usize, bound: u64) {
    let rel = if keyword == "minItems" { "at least" } else { "at most" };
    report(out, path, keyword, format!("must have {rel} {bound} items, has {len}"));
}

fn num(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e16 { format!("{}", f as i64) } else { format!("{f}") }
}

/// A short, quoted preview of a string for messages.
pub fn preview(s: &str) -> String {
    let mut p: String = s.chars().take(40).collect();
    if p.len() < s.len() {
        p.push('…');
    }
    format!("{p:?}")
}

fn preview_value(v: &Value) -> String {
    match v {
        Value::String(s) => preview(s),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
        v => v.to_string(),
    }
}

/// The JSON type name of a value, as the `type` keyword spells it.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if is_integer(n) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether a JSON number is an integer in JSON Schema's sense (`1.0` is).
pub fn is_integer(n: &serde_json::Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// A `type` violation.
#[cold]
pub fn type_violation(out: &mut Vec<Violation>, path: &Path<'_>, expected: &str, found: &Value) {
    report(out, path, "type", format!("must be {expected}, found {}", type_name(found)));
}

/// The branch of a failed `anyOf` or `oneOf` that came closest: the one with the fewest
/// violations (the first of those on a tie), as `(index, violations)`.
fn closest(branches: &[Vec<Violation>]) -> Option<(usize, &Vec<Violation>)> {
    branches.iter().enumerate().filter(|(_, v)| !v.is_empty()).min_by_key(|(_, v)| v.len())
}

fn explain_closest(branches: &[Vec<Violation>]) -> String {
    match closest(branches) {
        Some((i, v)) => {
            let first: Vec<String> = v.iter().take(3).map(|x| x.to_string()).collect();
            let more = if v.len() > 3 { format!(" (and {} more)", v.len() - 3) } else { String::new() };
            format!("; the closest, branch {i}, fails at {}{more}", first.join("; "))
        }
        None => String::new(),
    }
}

/// An `anyOf` no branch matched; `branches` holds each branch's violations.
#[cold]
pub fn any_of_violation(out: &mut Vec<Violation>, path: &Path<'_>, branches: &[Vec<Violation>]) {
    report(out, path, "anyOf", format!("must match at least one of {} schemas, matches none{}", branches.len(), explain_closest(branches)));
}

/// The verdict of a `oneOf`: a violation unless exactly one branch matched. `matched` lists
/// the branches that did; `branches` holds each branch's violations.
pub fn one_of_verdict(out: &mut Vec<Violation>, path: &Path<'_>, matched: &[usize], branches: &[Vec<Violation>]) {
    match matched {
        [_] => {}
        [] => report(out, path, "oneOf", format!("must match exactly one of {} schemas, matches none{}", branches.len(), explain_closest(branches))),
        [a, b, ..] => report(out, path, "oneOf", format!("must match exactly one of {} schemas, matches {} (branches {a} and {b})", branches.len(), matched.len())),
    }
}

/// A `not` whose schema matched.
#[cold]
pub fn not_violation(out: &mut Vec<Violation>, path: &Path<'_>) {
    report(out, path, "not", "must not match the schema under `not`, and does".to_owned());
}

/// JSON Schema equality: numbers compare by value (`1 == 1.0`), objects ignore key order.
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
            (Some(i), Some(j), _, _) => i == j,
            (_, _, Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        (a, b) => a == b,
    }
}

/// A regular expression compiled once, on first use, by an ECMA-262 engine (`regress`).
pub struct LazyRegex {
    source: &'static str,
    cell: std::sync::OnceLock<Option<regress::Regex>>,
}

impl LazyRegex {
    /// A pattern compiled on first use.
    pub const fn new(source: &'static str) -> Self {
        LazyRegex { source, cell: std::sync::OnceLock::new() }
    }
    /// Whether the pattern matches somewhere in `s` (JSON Schema patterns are not anchored).
    /// The generator has already checked the pattern compiles; should it not, nothing matches.
    pub fn is_match(&self, s: &str) -> bool {
        self.cell
            .get_or_init(|| regress::Regex::with_flags(self.source, "u").ok())
            .as_ref()
            .is_some_and(|re| re.find(s).is_some())
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

/// Exact decoding from JSON: accepts a value iff its JSON type fits the Rust type.
pub trait Wire: Sized {
    /// Decodes one value.
    ///
    /// # Errors
    ///
    /// The deserializer's error when the value does not fit.
    fn decode<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error>;
}

/// A [`DeserializeSeed`] that decodes with [`Wire`].
pub struct WireSeed<T>(PhantomData<T>);

impl<T> WireSeed<T> {
    /// The seed.
    #[inline]
    pub fn new() -> Self {
        WireSeed(PhantomData)
    }
}

impl<T> Default for WireSeed<T> {
    fn default() -> Self {
        WireSeed::new()
    }
}

impl<'de, T: Wire> DeserializeSeed<'de> for WireSeed<T> {
    type Value = T;
    #[inline]
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        T::decode(d)
    }
}

impl Wire for String {
    #[inline]
    fn decode<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)
    }
}

impl Wire for bool {
    fn decode<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        bool::deserialize(d)
    }
}

impl Wire for f64 {
    fn decode<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        f64::deserialize(d)
    }
}

impl Wire for () {
    fn decode<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <()>::deserialize(d)
    }
}

impl Wire for Value {
    fn decode<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

/// Builds a [`Value`] as serde_json's own visitor does, but refuses a key given twice at any
/// depth (serde_json keeps the last one). A tagged union keeps the members that come before its
/// tag as values until the tag names the variant, so without this `{"params": {"task": "a",
/// "task": "b"}, "method": "submit"}` would pass as `b`.
struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::decode(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(v) = seq.next_element_seed(WireSeed::<Value>::new())? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(k) = map.next_key::<Key<'de>>()? {
            match out.entry(k.into_string()) {
                serde_json::map::Entry::Occupied(e) => return Err(duplicate(e.key())),
                serde_json::map::Entry::Vacant(e) => {
                    e.insert(map.next_value_seed(WireSeed::<Value>::new())?);
                }
            }
        }
        Ok(Value::Object(out))
    }
}

struct IntVisitor;

impl Visitor<'_> for IntVisitor {
    type Value = i64;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
        Ok(v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
        i64::try_from(v).map_err(|_| E::custom(format!("integer {v} is beyond the supported range of -2^63..2^63")))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
        // JSON Schema counts 1.0 as an integer.
        if v.fract() == 0.0 && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&v) {
            Ok(v as i64)
        } else if v.fract() == 0.0 {
            Err(E::custom(format!("integer {v} is beyond the supported range of -2^63..2^63")))
        } else {
            Err(E::invalid_type(de::Unexpected::Float(v), &self))
        }
    }
}

impl Wire for i64 {
    #[inline]
    fn decode<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(IntVisitor)
    }
}

/// A value skipped unread: an undeclared property of an object open to new fields.
///
/// A key given twice in it, at any depth, is refused, as everywhere else (the same value inside
/// a tagged union was always refused so).
///
/// It goes through the deserializer's ordinary, depth-limited path. serde's `IgnoredAny` would
/// use serde_json's iterative skip, which has no depth limit, so a document nested past the
/// parser's limit inside an unknown property would be accepted by a type whose decoding
/// succeeds and called not JSON by any other.
#[derive(Debug, Clone, Copy)]
pub struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SkipVisitor)
    }
}

/// [`Skip`]'s walk, also what a tagged union reads past a tag that is not a string.
struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_none<E: de::Error>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Skip, D::Error> {
        Skip::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        let mut seen = Seen::default();
        while let Some(k) = map.next_key::<Key<'de>>()? {
            seen.note::<A::Error>(k)?;
            map.next_value::<Skip>()?;
        }
        Ok(Skip)
    }
}

/// A value the schema never allows (the `false` schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Never {}

impl Wire for Never {
    fn decode<'de, D: Deserializer<'de>>(_d: D) -> Result<Self, D::Error> {
        Err(de::Error::custom("no value is allowed here"))
    }
}

impl<T: Wire> Wire for Box<T> {
    fn decode<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::decode(d).map(Box::new)
    }
}

impl<T: Wire> Wire for Option<T> {
    #[inline]
    fn decode<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Wire> Visitor<'de> for V<T> {
            type Value = Option<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a value or null")
            }
            fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
                Ok(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
                Ok(None)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
                T::decode(d).map(Some)
            }
        }
        d.deserialize_option(V(PhantomData))
    }
}

impl<T: Wire> Wire for Vec<T> {
    fn decode<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Wire> Visitor<'de> for V<T> {
            type Value = Vec<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
                while let Some(x) = seq.next_element_seed(WireSeed::<T>::new())? {
                    out.push(x);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(V(PhantomData))
    }
}

impl<T: Wire> Wire for BTreeMap<String, T> {
    fn decode<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Wire> Visitor<'de> for V<T> {
            type Value = BTreeMap<String, T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = BTreeMap::new();
                while let Some(k) = map.next_key::<Key<'de>>()? {
                    let k = k.into_string();
                    if out.contains_key(&k) {
                        return Err(de::Error::custom(format!("duplicate property `{k}`")));
                    }
                    let v = map.next_value_seed(WireSeed::<T>::new())?;
                    out.insert(k, v);
                }
                Ok(out)
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

impl Wire for Map<String, Value> {
    fn decode<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = BTreeMap::<String, Value>::decode(d)?;
        Ok(m.into_iter().collect())
    }
}

/// An object key, borrowed from the input when it has no escapes.
pub struct Key<'de>(Cow<'de, str>);

impl Key<'_> {
    /// The key.
    #[inline]
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// The key, owned.
    pub fn into_string(self) -> String {
        self.0.into_owned()
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    #[inline]
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a property name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// The error for a property given twice.
#[cold]
pub fn duplicate<E: de::Error>(name: &str) -> E {
    E::custom(format!("duplicate property `{name}`"))
}

/// The error for a missing required property.
#[cold]
pub fn missing<E: de::Error>(name: &'static str) -> E {
    E::missing_field(name)
}

/// The error for an undeclared property of a closed object.
#[cold]
pub fn unknown<E: de::Error>(name: &str, expected: &'static [&'static str]) -> E {
    E::unknown_field(name, expected)
}

/// Takes a required property out of a buffered object (tagged unions decode this way).
///
/// # Errors
///
/// When it is missing or does not decode.
pub fn take_required<T: Wire>(map: &mut Map<String, Value>, name: &'static str) -> Result<T, serde_json::Error> {
    match map.remove(name) {
        Some(v) => T::decode(v),
        None => Err(de::Error::missing_field(name)),
    }
}

/// Takes an optional property out of a buffered object.
///
/// # Errors
///
/// When it is present and does not decode.
pub fn take_optional<T: Wire>(map: &mut Map<String, Value>, name: &str) -> Result<Option<T>, serde_json::Error> {
    map.remove(name).map(T::decode).transpose()
}

/// Refuses what is left of a buffered closed object.
///
/// # Errors
///
/// Naming the first undeclared property.
pub fn deny_rest(map: &Map<String, Value>, expected: &'static [&'static str]) -> Result<(), serde_json::Error> {
    match map.keys().next() {
        Some(k) => Err(de::Error::unknown_field(k, expected)),
        None => Ok(()),
    }
}

/// Buffers an object whose shape depends on its tag, refusing duplicate keys.
///
/// # Errors
///
/// When the value is not an object or repeats a key.
pub fn buffer_object<'de, D: Deserializer<'de>>(d: D) -> Result<Map<String, Value>, D::Error> {
    Map::<String, Value>::decode(d)
}

/// Decodes a value a tagged union kept before it knew its variant.
///
/// # Errors
///
/// When it does not decode, as a custom error of the caller's deserializer.
pub fn from_buffered<T: Wire, E: de::Error>(value: Buffered) -> Result<T, E> {
    let mut de = serde_json::Deserializer::from_slice(&value.0);
    T::decode(&mut de).and_then(|v| de.end().map(|()| v)).map_err(|e| E::custom(without_position(&e)))
}

/// Reads the rest of an object whose decoding already failed with `err`, then returns the error
/// to report: the first problem in the rest (bad syntax, a key given twice below it) when there
/// is one, as decoding the buffered object reported it, else `err`.
#[cold]
pub fn after_rest<'de, A: MapAccess<'de>>(map: &mut A, err: A::Error) -> A::Error {
    loop {
        match map.next_key::<Key<'de>>() {
            Ok(Some(_)) => {
                if let Err(e) = map.next_value::<Skip>() {
                    return e;
                }
            }
            Ok(None) => return err,
            Err(e) => return e,
        }
    }
}

/// [`after_rest`] for an error found at a key whose value is still to be read.
#[cold]
pub fn after_value<'de, A: MapAccess<'de>>(map: &mut A, err: A::Error) -> A::Error {
    match map.next_value::<Skip>() {
        Ok(_) => after_rest(map, err),
        Err(e) => e,
    }
}

/// Reads the value of a tagged union's tag: a string, borrowed when it has no escapes.
///
/// # Errors
///
/// When it is not a string (once the rest of the object has been read).
pub fn next_tag<'de, A: MapAccess<'de>>(map: &mut A, expecting: &'static str) -> Result<Key<'de>, A::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<Key<'de>>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Some(Key(Cow::Borrowed(v))))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(Key(Cow::Owned(v.to_owned()))))
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(Key(Cow::Owned(v))))
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            SkipVisitor.visit_seq(seq).map(|_| None)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            SkipVisitor.visit_map(map).map(|_| None)
        }
    }
    struct Seed;
    impl<'de> DeserializeSeed<'de> for Seed {
        type Value = Option<Key<'de>>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(V)
        }
    }
    match map.next_value_seed(Seed)? {
        Some(k) => Ok(k),
        None => Err(after_rest(map, de::Error::invalid_type(de::Unexpected::Other("a non-string tag"), &expecting))),
    }
}

/// The undeclared keys of an object open to them, to refuse one given twice.
#[derive(Default)]
pub struct Seen<'de>(std::collections::HashSet<Cow<'de, str>>);

impl<'de> Seen<'de> {
    /// Notes `key`.
    ///
    /// # Errors
    ///
    /// When it was noted before.
    pub fn note<E: de::Error>(&mut self, key: Key<'de>) -> Result<(), E> {
        if self.0.contains(key.as_str()) {
            return Err(duplicate(key.as_str()));
        }
        self.0.insert(key.0);
        Ok(())
    }
}

/// The members a tagged union read before its tag, kept as their JSON text (each checked as
/// exactly as every other value: no key twice at any depth) until the tag names the variant.
/// Text, not a [`Value`] tree: a member costs about its own size while it waits, however many
/// small values it holds (a tree of `[0,0,…]` costs 16 to 32 times the text).
#[derive(Default)]
pub struct Early<'de> {
    items: Vec<(Key<'de>, Buffered)>,
    keys: Seen<'de>,
}

impl<'de> Early<'de> {
    /// Reads the value of `key` and keeps it.
    ///
    /// # Errors
    ///
    /// When it does not parse, or `key` was kept before.
    pub fn keep<A: MapAccess<'de>>(&mut self, map: &mut A, key: Key<'de>) -> Result<(), A::Error> {
        self.keys.note::<A::Error>(Key(key.0.clone()))?;
        let mut text = Vec::new();
        map.next_value_seed(Transcode(&mut text))?;
        self.items.push((key, Buffered(text)));
        Ok(())
    }
    /// What was kept, in the order it came.
    pub fn into_items(self) -> Vec<(Key<'de>, Buffered)> {
        self.items
    }
}

/// One JSON value kept as compact text by [`Early`], already read exactly (its syntax checked,
/// no key twice at any depth); decoded later with [`from_buffered`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buffered(Vec<u8>);

impl Buffered {
    /// The value's JSON text.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// The object of a tagged union's kind this version does not know, as it arrived (tag
/// included), from the members kept before the tag, the tag, and the rest of `map`.
///
/// # Errors
///
/// When the rest does not parse or repeats a key.
pub fn rest_as_object<'de, A: MapAccess<'de>>(map: &mut A, early: Early<'de>, tag_name: &str, tag: Key<'de>) -> Result<Map<String, Value>, A::Error> {
    let mut all = BTreeMap::new();
    for (k, v) in early.items {
        let v = serde_json::from_slice::<Value>(&v.0).map_err(|e| de::Error::custom(without_position(&e)))?;
        all.insert(k.into_string(), v);
    }
    let tag = tag.into_string();
    all.insert(tag_name.to_owned(), Value::String(tag.clone()));
    while let Some(k) = map.next_key::<Key<'de>>()? {
        match all.entry(k.into_string()) {
            std::collections::btree_map::Entry::Occupied(e) => return Err(duplicate(e.key())),
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(map.next_value_seed(WireSeed::<Value>::new())?);
            }
        }
    }
    // The same steps as the buffered object took (keys in order, the tag taken out and put
    // back), so an unknown kind's members keep the order they had.
    let mut out: Map<String, Value> = all.into_iter().collect();
    out.remove(tag_name);
    out.insert(tag_name.to_owned(), Value::String(tag));
    Ok(out)
}

/// A serde_json error's message without its position (which, for text read back from a
/// [`Buffered`] value, would point into the copy rather than the document).
fn without_position(e: &serde_json::Error) -> String {
    let what = e.to_string();
    what.split(" at line ").next().unwrap_or(&what).to_owned()
}

/// Checks that `input` is one JSON document as the exact decoders read it (valid UTF-8 and
/// syntax, nesting within the parser's limit, no key twice at any depth) without building it:
/// what it holds costs no memory beyond each object's set of keys while it is read.
///
/// # Errors
///
/// As [`parse_value_exact`].
pub fn skim_exact(input: &[u8]) -> Result<(), DocumentError> {
    if let Err(e) = std::str::from_utf8(input) {
        return Err(DocumentError::NotJson(format!("invalid UTF-8 at byte offset {}", e.valid_up_to())));
    }
    let mut de = serde_json::Deserializer::from_slice(input);
    match Skip::deserialize(&mut de).and_then(|_| de.end()) {
        Ok(()) => Ok(()),
        Err(e) if e.is_data() => Err(DocumentError::Invalid(vec![Violation {
            pointer: String::new(),
            keyword: "type".into(),
            message: format!("cannot be represented: {}", describe_json_error(&e)),
        }])),
        Err(e) => Err(DocumentError::NotJson(describe_json_error(&e))),
    }
}

/// Counts the JSON values of one document (every array element, object member value and the
/// document itself) without building any, stopping as soon as there are more than `max`.
/// `None` when there are more than `max`.
///
/// A typed decode of a document holds each value in a struct, an enum or a
/// `serde_json::Value`, so the count bounds what decoding it can cost beyond its text: a
/// receiver checks it before decoding what a peer sent (see [`parse_validated_bounded`]).
///
/// # Errors
///
/// The parser's error when `input` is not one JSON document.
pub fn count_values(input: &str, max: usize) -> Result<Option<usize>, serde_json::Error> {
    let mut count = 0usize;
    let mut de = serde_json::Deserializer::from_str(input);
    match (Count { count: &mut count, max }).deserialize(&mut de).and_then(|()| de.end()) {
        Ok(()) => Ok(Some(count)),
        Err(_) if count > max => Ok(None),
        Err(e) => Err(e),
    }
}

/// [`count_values`]'s walk: one per value, an error (any) once past the cap.
struct Count<'c> {
    count: &'c mut usize,
    max: usize,
}

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        *self.count += 1;
        if *self.count > self.max {
            return Err(de::Error::custom("too many values"));
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Count<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Count { count: &mut *self.count, max: self.max })?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key::<Skip>()?.is_some() {
            map.next_value_seed(Count { count: &mut *self.count, max: self.max })?;
        }
        Ok(())
    }
}

/// Why [`parse_validated_bounded`] refused a document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoundedError {
    /// More JSON values than the cap: refused before anything was built.
    #[error("the document holds more than {0} JSON values")]
    TooManyValues(usize),
    /// Not JSON, or breaking the schema.
    #[error(transparent)]
    Document(#[from] DocumentError),
}

/// The largest document [`parse_validated_bounded`] explains violation by violation after a
/// failed decode (that parses it again as an untyped value); a larger one gets the decoder's
/// own message.
pub const EXPLAIN_MAX_BYTES: usize = 64 * 1024;

/// [`parse_validated_str`] for what a peer sent, with what it can cost bounded: at most
/// `max_values` JSON values are decoded (counted first, building nothing), and a document that
/// fails to decode is parsed again for the full list of violations only when it is at most
/// [`EXPLAIN_MAX_BYTES`] long.
///
/// # Errors
///
/// [`BoundedError::TooManyValues`] past the cap; otherwise as [`parse_validated`].
pub fn parse_validated_bounded<T>(input: &str, max_values: usize) -> Result<T, BoundedError>
where
    T: Wire + Validate + SchemaCheck,
{
    match count_values(input, max_values) {
        Ok(Some(_)) => {}
        Ok(None) => return Err(BoundedError::TooManyValues(max_values)),
        Err(e) => return Err(DocumentError::NotJson(describe_json_error(&e)).into()),
    }
    if input.len() <= EXPLAIN_MAX_BYTES {
        return Ok(parse_validated_str(input)?);
    }
    let mut de = serde_json::Deserializer::from_str(input);
    match T::decode(&mut de).and_then(|v| de.end().map(|()| v)) {
        Ok(value) => value.validate().map(|()| value).map_err(|v| DocumentError::Invalid(v).into()),
        Err(e) => Err(DocumentError::Invalid(vec![Violation { pointer: String::new(), keyword: "type".into(), message: describe_json_error(&e) }]).into()),
    }
}

/// Reads one JSON value exactly (as [`Skip`]) and writes it as compact JSON text.
struct Transcode<'a>(&'a mut Vec<u8>);

impl<'de> DeserializeSeed<'de> for Transcode<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Transcode<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.0.extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        serde_json::to_writer(&mut *self.0, &v).map_err(E::custom)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        serde_json::to_writer(&mut *self.0, &v).map_err(E::custom)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        // JSON has no NaN or infinity, so a parsed double always has a finite spelling; the
        // shortest one that reads back as the same double.
        match serde_json::Number::from_f64(v) {
            Some(n) => serde_json::to_writer(&mut *self.0, &n).map_err(E::custom),
            None => Err(E::custom("a number that is not finite")),
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        serde_json::to_writer(&mut *self.0, v).map_err(E::custom)
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.extend_from_slice(b"null");
        Ok(())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.push(b'[');
        let mut first = true;
        loop {
            let mark = self.0.len();
            if !first {
                self.0.push(b',');
            }
            if seq.next_element_seed(Transcode(&mut *self.0))?.is_none() {
                self.0.truncate(mark);
                break;
            }
            first = false;
        }
        self.0.push(b']');
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys = Seen::default();
        self.0.push(b'{');
        let mut first = true;
        while let Some(k) = map.next_key::<Key<'de>>()? {
            if !first {
                self.0.push(b',');
            }
            first = false;
            serde_json::to_writer(&mut *self.0, k.as_str()).map_err(de::Error::custom)?;
            self.0.push(b':');
            keys.note::<A::Error>(k)?;
            map.next_value_seed(Transcode(&mut *self.0))?;
        }
        self.0.push(b'}');
        Ok(())
    }
}

/// Decodes a string enum's value, borrowing when possible.
///
/// # Errors
///
/// When the value is not a string.
pub fn decode_str<'de, D: Deserializer<'de>>(d: D) -> Result<Key<'de>, D::Error> {
    Key::deserialize(d)
}

/// Parses a JSON literal embedded by the generator (always valid JSON).
pub fn literal(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// [`parse_validated`] for a type given by its decode, check and full-schema functions (type
/// aliases, which cannot carry trait impls of their own).
///
/// # Errors
///
/// As [`parse_validated`].
pub fn parse_validated_with<T: Wire>(
    input: &[u8],
    validate: fn(&T, &Path<'_>, &mut Vec<Violation>),
    check: fn(&Value, &Path<'_>, &mut Vec<Violation>),
) -> Result<T, DocumentError> {
    let mut de = serde_json::Deserializer::from_slice(input);
    match T::decode(&mut de).and_then(|v| de.end().map(|()| v)) {
        Ok(value) => {
            let mut out = Vec::new();
            validate(&value, &Path::Root, &mut out);
            if out.is_empty() { Ok(value) } else { Err(DocumentError::Invalid(out)) }
        }
        Err(e) => {
            let value = parse_value(input)?;
            let mut out = Vec::new();
            check(&value, &Path::Root, &mut out);
            if out.is_empty() {
                out.push(Violation { pointer: String::new(), keyword: "type".into(), message: format!("cannot be represented: {e}") });
            }
            Err(DocumentError::Invalid(out))
        }
    }
}

/// A named type of the schema, as listed by the generated `TYPES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeInfo {
    /// The type's name.
    pub name: &'static str,
    /// Its JSON pointer inside the bundled schema (`#/$defs/...`).
    pub pointer: &'static str,
    /// Whether it is the root of a schema file.
    pub root: bool,
    /// The schema's description.
    pub description: &'static str,
}

/// A method of the protocol: its wire name, params and result types.
pub trait RpcMethod {
    /// The method's name on the wire.
    const NAME: &'static str;
    /// The params' type.
    type Params;
    /// The result's type.
    type Result: Serialize + Wire;
}
