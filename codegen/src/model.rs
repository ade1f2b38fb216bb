//! The one model every emitter reads: a deterministic, `BTreeMap`-ordered type space lowered from
//! the schema files. Emitters never look at raw schema JSON.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::pattern::Pattern;

/// Every named type, constant and method the schema defines.
#[derive(Debug, Clone, Default)]
pub struct TypeSpace {
    /// Named types by their generated name (PascalCase), in name order.
    pub types: BTreeMap<String, NamedType>,
    /// The root type of each schema file, in file-name order.
    pub roots: Vec<String>,
    /// Constants declared with `x-constants`, by name.
    pub constants: BTreeMap<String, Constant>,
    /// The method union, when a tagged union's branches name their results with `x-result`.
    pub methods: Option<MethodSet>,
    /// The error codes, when a string enum gives its values `rpc_code` and `retryable`.
    pub errors: Option<ErrorSet>,
    /// Every distinct `pattern`, in first-seen order; nodes refer to them by index.
    pub patterns: Vec<Pattern>,
    /// The branches nested `unevaluatedProperties` checks test, one per place in a schema;
    /// [`Guarded::when`] refers to them by index.
    pub guards: Vec<Guard>,
    /// The methods a schema marks on its params types with `x-method` and `x-side` (ACP's
    /// convention), grouped by the side that handles them, in side-name order.
    pub sides: Vec<Side>,
}

impl TypeSpace {
    /// The `$defs` keys that are not their type's generated name (a reserved word such as
    /// `Result`, or a key that is not PascalCase), each with that name, in key order: the
    /// validation entry points take a type by either. A name in `types` always names its own
    /// type, so a key that is another type's generated name (a file's root titled like it) is
    /// left out; so is a key two files both use.
    pub fn schema_names(&self) -> Vec<(String, String)> {
        // Every type whose origin is a `$defs` (or `definitions`) member, by key (a member can be the origin of more
        // than one type: a type with the key's own name and a part of it).
        let mut by_key: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
        for t in self.types.values() {
            let Some(key) = t.origin.pointer.strip_prefix("/$defs/").or_else(|| t.origin.pointer.strip_prefix("/definitions/")) else { continue };
            if key.contains('/') || key.contains('\u{0}') {
                continue;
            }
            by_key.entry(crate::load::unescape_token(key)).or_default().insert(&t.name);
        }
        by_key
            .into_iter()
            .filter_map(|(key, names)| {
                let only = (names.len() == 1).then(|| names.first().copied()).flatten()?;
                (only != key && !self.types.contains_key(&key)).then(|| (key, only.to_owned()))
            })
            .collect()
    }
}

/// The methods one side of a protocol handles, from the `x-method`/`x-side` marks on the schema's
/// types: a marked type whose name ends in `Response` is the result of the request with the same
/// method and side; a marked method with no such result is a notification.
#[derive(Debug, Clone)]
pub struct Side {
    /// The `x-side` value (`agent`, `client`, …).
    pub name: String,
    /// Requests, in method-name order.
    pub requests: Vec<MarkedMethod>,
    /// Notifications, in method-name order.
    pub notifications: Vec<MarkedMethod>,
}

/// One marked method.
#[derive(Debug, Clone)]
pub struct MarkedMethod {
    /// The method name on the wire (`session/prompt`).
    pub method: String,
    /// Its variant name (PascalCase, unique within the side).
    pub variant: String,
    /// The params type.
    pub params: String,
    /// The result type (requests only).
    pub result: Option<String>,
    /// The params type's `description`.
    pub description: Option<String>,
}

/// Where a schema came from: file and JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Origin {
    /// File name relative to the schema folder.
    pub file: String,
    /// JSON pointer inside the file ("" for the root).
    pub pointer: String,
}

/// A type with a name of its own.
#[derive(Debug, Clone)]
pub struct NamedType {
    /// Generated name (PascalCase, unique).
    pub name: String,
    /// The schema's `description`.
    pub description: Option<String>,
    /// Where it is defined.
    pub origin: Origin,
    /// What it is.
    pub kind: TypeKind,
}

/// The shapes a named type can take.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // an alias's node is the largest; a schema has a few hundred
pub enum TypeKind {
    /// A JSON object with declared properties.
    Struct(StructDef),
    /// A `oneOf` whose branches are objects told apart by a constant tag property.
    Union(UnionDef),
    /// A string restricted to listed values.
    StringEnum(EnumDef),
    /// Any other schema: a name for a node.
    Alias(Node),
}

/// A JSON object with declared properties.
#[derive(Debug, Clone)]
pub struct StructDef {
    /// Declared properties in schema order.
    pub fields: Vec<Field>,
    /// What other properties may appear.
    pub additional: Additional,
    /// Whether JSON `null` is also accepted (`"type": ["object", "null"]`).
    pub nullable: bool,
}

/// What an object says about properties it does not declare.
#[derive(Debug, Clone)]
pub enum Additional {
    /// `additionalProperties: false`: refused.
    Forbidden,
    /// Absent or `true`: allowed and ignored by typed readers.
    Any,
    /// A schema every other property's value must match; kept in a map.
    Schema(Box<Node>),
}

/// One declared property.
#[derive(Debug, Clone)]
pub struct Field {
    /// The JSON property name.
    pub name: String,
    /// Whether it is in `required`.
    pub required: bool,
    /// Its schema.
    pub node: Node,
    /// Listed in `required` of an object closed by `additionalProperties: false` without being
    /// declared: no value can stand there. Present, it is an undeclared member (keyword
    /// `additionalProperties`, as JSON Schema reports it); absent, a missing one.
    pub forbidden: bool,
}

/// A tagged union.
#[derive(Debug, Clone)]
pub struct UnionDef {
    /// The tag property's name.
    pub tag: String,
    /// The branches, in schema order.
    pub variants: Vec<Variant>,
    /// `x-extensible: true`: typed readers keep unknown tags as an explicit unknown value.
    pub extensible: bool,
    /// For an extensible union, the name of the type that holds a kind this version does not
    /// know, where a language gives it one (Python's class, TypeScript's interface):
    /// `Unknown<Union>`, decided with the branches' type names.
    pub unknown_type_name: Option<String>,
}

/// One branch of a tagged union.
#[derive(Debug, Clone)]
pub struct Variant {
    /// The tag's constant value.
    pub tag_value: String,
    /// Generated variant name (PascalCase), unique within the union.
    pub name: String,
    /// The name of the branch's own type where a language gives each branch one (Python's
    /// classes, TypeScript's interfaces): `<Union><Variant>`, unique among every type name and
    /// [`crate::naming::RESERVED_TYPE_NAMES`], so it is the same in every language.
    pub type_name: String,
    /// The branch's `description`.
    pub description: Option<String>,
    /// Its properties other than the tag.
    pub fields: Vec<Field>,
    /// What other properties may appear.
    pub additional: Additional,
    /// For a method union, the branch's result (`x-result`).
    pub result: Option<Node>,
    /// Where it is defined.
    pub origin: Origin,
}

/// A string enum.
#[derive(Debug, Clone)]
pub struct EnumDef {
    /// The values, in schema order.
    pub values: Vec<EnumValue>,
    /// `x-extensible: true`: typed readers keep unknown values as an explicit unknown value.
    pub extensible: bool,
    /// The schema itself allows any other string (an `anyOf` of the values and
    /// `{"type": "string"}`): an unknown value is valid, not only kept (implies `extensible`).
    pub open: bool,
}

/// One value of a string enum, with its `x-enum` documentation.
#[derive(Debug, Clone)]
pub struct EnumValue {
    /// The string on the wire.
    pub value: String,
    /// Generated variant name (PascalCase).
    pub name: String,
    /// What the value means.
    pub description: Option<String>,
}

/// A bitset of JSON types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Types(pub u8);

impl Types {
    /// JSON `null`.
    pub const NULL: Types = Types(1);
    /// `true` or `false`.
    pub const BOOLEAN: Types = Types(2);
    /// A number with no fractional part (`1.0` included).
    pub const INTEGER: Types = Types(4);
    /// Any number (integers included).
    pub const NUMBER: Types = Types(8 | 4);
    /// A string.
    pub const STRING: Types = Types(16);
    /// An array.
    pub const ARRAY: Types = Types(32);
    /// An object.
    pub const OBJECT: Types = Types(64);
    /// Every JSON value.
    pub const ALL: Types = Types(127);
    /// No value at all.
    pub const NONE: Types = Types(0);

    /// Whether every type in `other` is in `self`.
    pub fn contains(self, other: Types) -> bool {
        self.0 & other.0 == other.0 && other.0 != 0
    }
    /// The union of two sets.
    pub fn union(self, other: Types) -> Types {
        Types(self.0 | other.0)
    }
    /// The intersection of two sets.
    pub fn intersect(self, other: Types) -> Types {
        Types(self.0 & other.0)
    }
    /// The set without `null`.
    pub fn without_null(self) -> Types {
        Types(self.0 & !1)
    }
    /// Whether the set allows numbers with a fractional part.
    pub fn allows_fraction(self) -> bool {
        self.0 & 8 != 0
    }
    /// Whether the set is one of the single types (integer counts as one).
    pub fn is_single(self) -> bool {
        [
            Types::NULL,
            Types::BOOLEAN,
            Types::INTEGER,
            Types::NUMBER,
            Types::STRING,
            Types::ARRAY,
            Types::OBJECT,
        ]
        .contains(&self)
    }
    /// The names of the types in the set, as the `type` keyword spells them.
    pub fn names(self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.contains(Types::NULL) {
            out.push("null");
        }
        if self.contains(Types::BOOLEAN) {
            out.push("boolean");
        }
        if self.contains(Types::NUMBER) {
            out.push("number");
        } else if self.contains(Types::INTEGER) {
            out.push("integer");
        }
        if self.contains(Types::STRING) {
            out.push("string");
        }
        if self.contains(Types::ARRAY) {
            out.push("array");
        }
        if self.contains(Types::OBJECT) {
            out.push("object");
        }
        out
    }
}

/// Constraints on numbers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NumberRules {
    /// `minimum`.
    pub minimum: Option<f64>,
    /// `maximum`.
    pub maximum: Option<f64>,
    /// `exclusiveMinimum`.
    pub exclusive_minimum: Option<f64>,
    /// `exclusiveMaximum`.
    pub exclusive_maximum: Option<f64>,
    /// `multipleOf` (positive and finite): the number divided by it is an integer, both read as
    /// the decimal numbers they are written as (`0.3` is a multiple of `0.1`), exactly, in every
    /// language (each runtime's `multiple_of`).
    pub multiple_of: Option<f64>,
}

impl NumberRules {
    /// Whether no bound is set.
    pub fn is_empty(&self) -> bool {
        *self == NumberRules::default()
    }
}

/// Constraints on strings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StringRules {
    /// `minLength`, in code points.
    pub min_length: Option<u64>,
    /// `maxLength`, in code points.
    pub max_length: Option<u64>,
    /// `pattern`, as an index into [`TypeSpace::patterns`].
    pub pattern: Option<usize>,
}

impl StringRules {
    /// Whether no constraint is set.
    pub fn is_empty(&self) -> bool {
        *self == StringRules::default()
    }
}

/// Constraints on arrays.
#[derive(Debug, Clone, Default)]
pub struct ArrayRules {
    /// `items`: every element's schema (each after `prefix_items`); any value when absent.
    pub items: Option<Box<Node>>,
    /// `prefixItems`: the schema of each element at the start, by position (a checked value in
    /// typed code).
    pub prefix_items: Vec<Node>,
    /// `minItems`.
    pub min_items: Option<u64>,
    /// `maxItems`.
    pub max_items: Option<u64>,
    /// `uniqueItems: true`: no two elements are equal as JSON values (`1` and `1.0` are equal,
    /// object members in any order). `false`, the default, says nothing.
    pub unique_items: bool,
    /// `contains` with `minContains` and `maxContains`: how many elements must match the schema
    /// (at least `min`, 1 unless given; at most `max`). A checked value in typed code.
    pub contains: Option<Box<Contains>>,
}

/// `contains`, `minContains` and `maxContains` of one schema.
#[derive(Debug, Clone)]
pub struct Contains {
    /// `contains`: the schema counted elements match.
    pub schema: Node,
    /// `minContains` (1 when absent; 0 lets an array with no match through).
    pub min: u64,
    /// `maxContains`.
    pub max: Option<u64>,
}

/// One place a schema is used: the JSON types it allows and the rules for each.
///
/// This is the full meaning of the schema at that place; [`Node::repr`] is the Rust-facing
/// shape chosen for it.
#[derive(Debug, Clone)]
pub struct Node {
    /// The JSON types the schema allows (`Types::ALL` when `type` is absent).
    pub types: Types,
    /// A reference to a named type, which then decides everything but `description`.
    pub reference: Option<String>,
    /// Rules for strings.
    pub string: StringRules,
    /// Rules for numbers.
    pub number: NumberRules,
    /// Rules for arrays.
    pub array: ArrayRules,
    /// Rules for objects: the named struct that declares them.
    pub object: Option<String>,
    /// `enum` (or `const`, as one value): the only values allowed.
    pub literals: Option<Vec<Value>>,
    /// Whether `literals` came from `const`.
    pub is_const: bool,
    /// `description`.
    pub description: Option<String>,
    /// `default` (an annotation).
    pub default: Option<Value>,
    /// `x-echoed: true`: a value the server only ever sends back as the client sent it (a
    /// request's `id`), so widening it is compatible in both directions.
    pub echoed: bool,
    /// `allOf`, `anyOf`, `oneOf` (other than the forms typed code represents) and `not`: rules
    /// that apply besides everything above, checked on the JSON value.
    pub applied: Applicators,
    /// Rules on an object's members as a whole: their count, their names, and the schemas
    /// `patternProperties` gives members by name (a checked value in typed code).
    pub members: Option<Box<MemberRules>>,
    /// `unevaluatedProperties` other than `true`.
    pub unevaluated: Option<Box<Unevaluated>>,
    /// The chosen representation.
    pub repr: Repr,
}

impl Node {
    /// Every node directly inside this one (not through a named type): the array's `items`,
    /// `prefixItems` and `contains`, the applicators', the member rules' and
    /// `unevaluatedProperties`' schemas.
    pub fn children(&self) -> impl Iterator<Item = &Node> {
        let a = &self.array;
        a.items
            .as_deref()
            .into_iter()
            .chain(&a.prefix_items)
            .chain(a.contains.as_deref().map(|c| &c.schema))
            .chain(self.applied.nodes())
            .chain(self.members.iter().flat_map(|m| m.nodes()))
            .chain(self.unevaluated.as_deref().map(|u| &*u.schema))
    }
}

/// The rules on an object's members that no struct holds: checked on the JSON object, beside the
/// struct of its declared properties (`Node::object`) when it has one.
#[derive(Debug, Clone, Default)]
pub struct MemberRules {
    /// `minProperties` (above 0).
    pub min_properties: Option<u64>,
    /// `maxProperties`.
    pub max_properties: Option<u64>,
    /// `propertyNames`: every member's name, as a string, matches it.
    pub property_names: Option<Node>,
    /// `patternProperties`: each member whose name the pattern (an index into
    /// [`TypeSpace::patterns`]) matches, searched unanchored, has a value matching the schema.
    pub patterns: Vec<(usize, Node)>,
    /// With `patternProperties`, `additionalProperties` (other than absent or `true`): what a
    /// member that `declared` does not name and no pattern matches must match. (The struct of
    /// the declared properties then allows any other member.)
    pub rest: Option<(Vec<String>, Additional)>,
    /// `dependentRequired`: when the member named first is present, so is each of the others.
    pub dependent_required: Vec<(String, Vec<String>)>,
    /// `dependentSchemas`: when the member is present, the object matches the schema.
    pub dependent_schemas: Vec<(String, Node)>,
}

impl MemberRules {
    /// Every node the rules hold: `propertyNames`, each pattern's, the rest's.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        let rest = match &self.rest {
            Some((_, Additional::Schema(n))) => Some(&**n),
            _ => None,
        };
        self.property_names.iter().chain(self.patterns.iter().map(|(_, n)| n)).chain(rest).chain(self.dependent_schemas.iter().map(|(_, n)| n))
    }
}

/// `unevaluatedProperties` (other than `true`): what an object's properties that no other keyword
/// of the schema evaluated must match. A property is evaluated by `properties` and
/// `additionalProperties` of the schema itself, of its `$ref` target and `allOf` members (through
/// their own, recursively), and of each `anyOf`/`oneOf` branch the value matches, at any depth.
#[derive(Debug, Clone)]
pub struct Unevaluated {
    /// The schema the other properties must match (`false`: no other property is allowed).
    pub schema: Box<Node>,
    /// The properties evaluated whatever the branches: the schema's own, its `$ref` target's and
    /// its `allOf` members'.
    pub always: PropSet,
    /// For each `anyOf` branch of the schema itself, the properties it evaluates when the value
    /// matches it (not counting the branches nested inside it: those are in `nested`).
    pub any_of: Vec<PropSet>,
    /// For each `oneOf` branch of the schema itself, the same.
    pub one_of: Vec<PropSet>,
    /// The branches of an `anyOf` or `oneOf` nested inside what the schema sees through (a `$ref`
    /// target, an `allOf` member, a branch), each with the properties it evaluates; one entry
    /// per way of reaching a branch.
    pub nested: Vec<Guarded>,
}

impl Unevaluated {
    /// Every set of evaluated properties: always, per `anyOf` and `oneOf` branch, and nested.
    pub fn sets(&self) -> impl Iterator<Item = &PropSet> + Clone {
        std::iter::once(&self.always).chain(&self.any_of).chain(&self.one_of).chain(self.nested.iter().map(|g| &g.set))
    }
}

/// Properties evaluated only when every guard of `when` holds: a nested branch, and the branches
/// it sits in, outermost first. (A branch that matches inside one that does not evaluates
/// nothing: a failing schema's annotations are dropped.)
#[derive(Debug, Clone)]
pub struct Guarded {
    /// Indexes into [`TypeSpace::guards`], outermost first.
    pub when: Vec<usize>,
    /// What the innermost branch evaluates.
    pub set: PropSet,
}

/// How to tell that the value matches a branch nested inside what an `unevaluatedProperties`
/// sees through.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // a schema has a few of them
pub enum Guard {
    /// The value matches this schema (the branch, lowered where the schema has it).
    Matches(Node),
    /// A branch of a tagged union: the value's `name` is the string `value`. The union itself
    /// must match for the value to be valid, and then its branch is the one its tag names, so
    /// nothing else needs checking.
    Tag {
        /// The tag property.
        name: String,
        /// The branch's tag value.
        value: String,
    },
    /// The value does not match this schema: an `if` whose `else` applies.
    Fails(Node),
    /// The object has this member: a `dependentSchemas` entry applies.
    Present(String),
}

/// A set of evaluated property names, or every property (`all`: an `additionalProperties` or a
/// nested `unevaluatedProperties` evaluates all the rest).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PropSet {
    /// The names, sorted.
    pub names: Vec<String>,
    /// `patternProperties`' patterns, as indexes into [`TypeSpace::patterns`], sorted: a
    /// property whose name one of them matches is evaluated.
    pub patterns: Vec<usize>,
    /// Every property is evaluated.
    pub all: bool,
}

impl PropSet {
    /// Whether the set evaluates no property at all.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.patterns.is_empty() && !self.all
    }
}

/// The in-place applicators of a schema (JSON Schema 2020-12, section 10.2.1), each a list of
/// nodes the value must also match, beside the node's own rules.
///
/// A node with any of them is a checked value in typed code ([`Repr::Value`]) unless lowering
/// could express it exactly otherwise (a single `allOf`, a nullable `anyOf`, a tagged union, an
/// object composed of others), in which case none is left here.
#[derive(Debug, Clone, Default)]
pub struct Applicators {
    /// `allOf`: the value matches every one.
    pub all_of: Vec<Node>,
    /// `anyOf`: the value matches at least one.
    pub any_of: Vec<Node>,
    /// `oneOf`: the value matches exactly one.
    pub one_of: Vec<Node>,
    /// `not`: the value does not match it.
    pub not: Option<Box<Node>>,
    /// `if` with `then`, `else` or both: the value matches `then` when it matches `if`, and
    /// `else` when it does not (`if` alone says nothing, and is not kept).
    pub conditional: Option<Box<Conditional>>,
}

/// `if`, `then` and `else` of one schema.
#[derive(Debug, Clone)]
pub struct Conditional {
    /// `if`: only whether the value matches it counts.
    pub condition: Node,
    /// `then`, when given: what a value matching `if` must match.
    pub then: Option<Node>,
    /// `else`, when given: what a value not matching `if` must match.
    pub otherwise: Option<Node>,
}

impl Applicators {
    /// Whether there is no applicator at all.
    pub fn is_empty(&self) -> bool {
        self.all_of.is_empty() && self.any_of.is_empty() && self.one_of.is_empty() && self.not.is_none() && self.conditional.is_none()
    }

    /// Every node an applicator holds, in keyword order (`allOf`, `anyOf`, `oneOf`, `not`, `if`,
    /// `then`, `else`).
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        let c = self.conditional.as_deref();
        self.all_of
            .iter()
            .chain(&self.any_of)
            .chain(&self.one_of)
            .chain(self.not.as_deref())
            .chain(c.map(|c| &c.condition))
            .chain(c.and_then(|c| c.then.as_ref()))
            .chain(c.and_then(|c| c.otherwise.as_ref()))
    }
}

/// The shape a node takes in typed code.
#[derive(Debug, Clone, PartialEq)]
pub enum Repr {
    /// Any JSON value (several types, or rules only a dynamic check can express).
    Value,
    /// No value is allowed (`false`).
    Never,
    /// Only `null`.
    Null,
    /// A boolean.
    Bool,
    /// An integer (64-bit signed).
    Integer,
    /// A number (64-bit float).
    Number,
    /// A string.
    String,
    /// An array of the inner shape.
    Array(Box<Repr>),
    /// An object whose every property has the inner shape.
    Map(Box<Repr>),
    /// An object with no declared properties.
    Object,
    /// A named type.
    Named(String),
    /// The inner shape or `null`.
    Nullable(Box<Repr>),
}

/// A constant from `x-constants`.
#[derive(Debug, Clone)]
pub struct Constant {
    /// Its value (a string or a non-negative integer).
    pub value: Value,
    /// What it is for.
    pub description: String,
    /// Where it is declared.
    pub origin: Origin,
}

/// The methods of the method union.
#[derive(Debug, Clone)]
pub struct MethodSet {
    /// The union's type name (`RpcRequest`).
    pub union: String,
    /// The property holding the params (`params`).
    pub params_field: String,
    /// How the service names itself (OpenRPC's `info`).
    pub service: ServiceInfo,
}

/// How a service names itself: the `x-openrpc` object at the root of the file holding the
/// method union, each entry falling back as documented.
#[derive(Debug, Clone)]
pub struct ServiceInfo {
    /// `x-openrpc.title`; else that file's root `title`; else the union's type name.
    pub title: String,
    /// `x-openrpc.description`, if given.
    pub description: Option<String>,
    /// `x-openrpc.license` (a license name or SPDX identifier), if given.
    pub license: Option<String>,
}

/// The error codes: the one string enum whose `x-enum` gives every value `retryable` and
/// `rpc_code`. Every emitter reads the codes, their JSON-RPC numbers and the fallback for a code
/// it does not know from here.
#[derive(Debug, Clone)]
pub struct ErrorSet {
    /// The enum's type name (`ErrorCode`).
    pub enum_name: String,
    /// Whether the enum is `x-extensible` (readers keep unknown codes).
    pub extensible: bool,
    /// The object that carries a code as its `code` property beside a `message`
    /// (`RuntimeSubmitError`), when the schema has one.
    pub carrier: Option<String>,
    /// With a carrier, the name of the generated base class of the code classes where a
    /// language generates one (Python's exceptions): the carrier's name with a trailing `Error`
    /// replaced by `Exception` (`RuntimeSubmitException`), decided before the codes' classes.
    pub base_class_name: Option<String>,
    /// The codes, in schema order.
    pub codes: Vec<ErrorCode>,
}

impl ErrorSet {
    /// The JSON-RPC code for a code this version does not know: -32000, the first of the range
    /// JSON-RPC 2.0 leaves to implementations for server errors.
    pub const UNKNOWN_RPC_CODE: i64 = -32000;
    /// Whether retrying can help for a code this version does not know: no.
    pub const UNKNOWN_RETRYABLE: bool = false;

    /// The code with this wire value.
    pub fn get(&self, value: &str) -> Option<&ErrorCode> {
        self.codes.iter().find(|c| c.value == value)
    }
}

/// One error code.
#[derive(Debug, Clone)]
pub struct ErrorCode {
    /// The string on the wire.
    pub value: String,
    /// The enum variant's name (the [`EnumValue::name`]).
    pub name: String,
    /// The name of the code's exception or error class in the clients: `<name>Error`, unique
    /// among every type name, branch type name and [`crate::naming::ERROR_BASE_NAMES`].
    pub class_name: String,
    /// What the code means.
    pub description: Option<String>,
    /// Whether retrying the same request later can help.
    pub retryable: bool,
    /// The JSON-RPC 2.0 numeric error code.
    pub rpc_code: i64,
}
