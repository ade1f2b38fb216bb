//! The compatibility checker: what changed between two versions of the schema, and whom each
//! change breaks.
//!
//! The rule is Confluent Schema Registry's: **a reader must accept everything the writer may
//! send**. It is checked separately in the two directions a protocol version is deployed in
//! (the server side — runtimes and runners — upgrades first; clients and hosts lag):
//!
//! - **output**: what the new server (or runner) writes, read by old clients and old hosts —
//!   each method's result (`x-result`), the pushed events (`ServerEvent`, `RuntimeEvent`), the
//!   errors (`RuntimeSubmitError`, `ErrorCode`) and the runner's `Event` lines. The writer is the
//!   new schema, the reader the old one.
//! - **input**: what old clients and hosts send, read by the new server (or runner) — every
//!   method's request and `params`, and the runner's `Turn`. The writer is the old schema, the
//!   reader the new one.
//!
//! Every difference found while walking both [`TypeSpace`]s side by side is one [`Finding`]: a
//! [`Kind`], the JSON pointer into the bundle (`/$defs/<File>/...`), the direction, and a
//! [`Verdict`] — breaking (some value the writer may send is refused), warning (everything is
//! still accepted, but the meaning changed or a future change will be refused), or compatible.
//!
//! Two readings decide most verdicts, as buf's `WIRE_JSON` category and Confluent's JSON Schema
//! rules do:
//!
//! - a change that makes the schema accept *more* (a new property on a closed object, a new enum
//!   value, a looser bound) breaks old readers of output and is compatible for input;
//! - a change that makes it accept *less* (a tighter bound, a removed value, a property made
//!   required) is compatible for output and breaks input.
//!
//! `x-extensible` enums and unions are read as their generated readers read them: an unknown
//! value is kept as an explicit `Unknown`, so adding one is compatible for old readers. Open
//! objects (no `additionalProperties: false`) ignore properties they do not declare, and a
//! writer is taken to send only the properties it declares (every generated serializer does).
//! That is where this checker is more lenient than Confluent's, which refuses any property added
//! to an open content model (`PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL`) because some old writer
//! *could* have sent it with another type. Names are compared as JSON sees them: a renamed
//! property, enum value, event kind or method is a removal plus an addition (buf's
//! `FIELD_SAME_JSON_NAME`, `ENUM_VALUE_SAME_NAME`), and the finding says when it looks like a
//! rename. A changed `default` is a warning (buf's `FIELD_SAME_DEFAULT`): nothing is refused, but
//! an absent value now means something else.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

use crate::error::push_pointer;
use crate::load::Documents;
use crate::lower::any_node;
use crate::model::*;

/// How bad a change is for the party that did not upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// Some value the writer may send is refused by the reader.
    Breaking,
    /// Everything is still accepted, but the meaning changed, or a later change will be refused.
    Warning,
    /// Nothing anyone relies on changed.
    Compatible,
}

impl Verdict {
    /// The word printed for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Breaking => "breaking",
            Verdict::Warning => "warning",
            Verdict::Compatible => "compatible",
        }
    }
}

/// Which way the data flows, relative to who upgraded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    /// Written by the new server or runner, read by old clients and hosts.
    Output,
    /// Written by old clients and hosts, read by the new server or runner.
    Input,
    /// Not tied to one direction (constants).
    Both,
}

impl Direction {
    /// The word printed for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Output => "output",
            Direction::Input => "input",
            Direction::Both => "both",
        }
    }
}

macro_rules! kinds {
    ($($variant:ident => $name:literal, $doc:literal;)*) => {
        /// The kinds of change the checker tells apart.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Kind {
            $(#[doc = $doc] $variant,)*
        }

        impl Kind {
            /// Every kind, in declaration order.
            pub const ALL: &'static [Kind] = &[$(Kind::$variant),*];

            /// The snake_case name printed in findings.
            pub fn name(self) -> &'static str {
                match self { $(Kind::$variant => $name,)* }
            }

            /// What the kind means and how it is judged.
            pub fn doc(self) -> &'static str {
                match self { $(Kind::$variant => $doc,)* }
            }
        }
    };
}

kinds! {
    PropertyAdded => "property_added", "An optional property was added. Output: breaks old readers of a closed object, compatible for an open one. Input: compatible (old senders do not send it).";
    RequiredPropertyAdded => "required_property_added", "A required property was added. Output: breaks old readers of a closed object. Input: breaking (old senders do not send it).";
    PropertyRemoved => "property_removed", "An optional property was removed. Output: compatible. Input: breaks when the new object is closed (old senders may still send it).";
    RequiredPropertyRemoved => "required_property_removed", "A required property was removed. Output: breaking (old readers require it). Input: breaks when the new object is closed.";
    PropertyMadeRequired => "property_made_required", "An optional property became required. Output: compatible. Input: breaking.";
    PropertyMadeOptional => "property_made_optional", "A required property became optional. Output: breaking. Input: compatible.";
    AdditionalPropertiesOpened => "additional_properties_opened", "`additionalProperties: false` was dropped (or given a schema). Output: breaking. Input: compatible.";
    AdditionalPropertiesClosed => "additional_properties_closed", "`additionalProperties: false` was added. Output: compatible. Input: breaking (old senders' extra properties are refused).";
    AdditionalPropertiesNarrowed => "additional_properties_narrowed", "Undeclared properties, allowed freely before, must now match a schema. Output: compatible. Input: breaking.";
    AdditionalPropertiesWidened => "additional_properties_widened", "Undeclared properties no longer need to match a schema. Output: breaking. Input: compatible.";
    TypeWidened => "type_widened", "The JSON types allowed grew (say integer to number, or null allowed). Output: breaking. Input: compatible.";
    TypeNarrowed => "type_narrowed", "The JSON types allowed shrank. Output: compatible. Input: breaking.";
    TypeChanged => "type_changed", "The JSON types (or the shape: object, union) changed to an unrelated one. Breaking both ways.";
    EnumValueAdded => "enum_value_added", "An enum value was added. Output: breaking unless the old enum is `x-extensible`. Input: compatible.";
    EnumValueRemoved => "enum_value_removed", "An enum value was removed. Output: compatible. Input: breaking unless the new enum is `x-extensible`.";
    EnumAdded => "enum_added", "A free value was restricted to a list (`enum`). Output: compatible. Input: breaking.";
    EnumRemoved => "enum_removed", "An `enum` list was dropped. Output: breaking unless the old enum was `x-extensible`. Input: compatible.";
    UnionVariantAdded => "union_variant_added", "A union branch (an event kind) was added. Output: breaking unless the old union is `x-extensible`. Input: compatible.";
    UnionVariantRemoved => "union_variant_removed", "A union branch was removed. Output: compatible. Input: breaking unless the new union is `x-extensible`.";
    UnionTagChanged => "union_tag_changed", "The property that tells union branches apart changed. Breaking both ways.";
    ExtensibleAdded => "extensible_added", "`x-extensible: true` was added: new readers keep unknown values. Compatible.";
    ExtensibleRemoved => "extensible_removed", "`x-extensible` was removed: new readers will refuse values added later. Warning.";
    MaxLengthTightened => "max_length_tightened", "`maxLength` was added or lowered. Output: compatible. Input: breaking.";
    MaxLengthRelaxed => "max_length_relaxed", "`maxLength` was removed or raised. Output: breaking. Input: compatible.";
    MinLengthTightened => "min_length_tightened", "`minLength` was added or raised. Output: compatible. Input: breaking.";
    MinLengthRelaxed => "min_length_relaxed", "`minLength` was removed or lowered. Output: breaking. Input: compatible.";
    PatternAdded => "pattern_added", "A `pattern` was added. Output: compatible. Input: breaking.";
    PatternRemoved => "pattern_removed", "A `pattern` was removed. Output: breaking. Input: compatible.";
    PatternChanged => "pattern_changed", "A `pattern` changed; neither can be proven to include the other. Breaking both ways.";
    MinimumTightened => "minimum_tightened", "`minimum`/`exclusiveMinimum` was added or raised. Output: compatible. Input: breaking.";
    MinimumRelaxed => "minimum_relaxed", "`minimum`/`exclusiveMinimum` was removed or lowered. Output: breaking. Input: compatible.";
    MaximumTightened => "maximum_tightened", "`maximum`/`exclusiveMaximum` was added or lowered. Output: compatible. Input: breaking.";
    MaximumRelaxed => "maximum_relaxed", "`maximum`/`exclusiveMaximum` was removed or raised. Output: breaking. Input: compatible.";
    MultipleOfTightened => "multiple_of_tightened", "`multipleOf` was added, or became a multiple of the old one (2 to 4). Output: compatible. Input: breaking.";
    MultipleOfRelaxed => "multiple_of_relaxed", "`multipleOf` was removed, or became a divisor of the old one (4 to 2). Output: breaking. Input: compatible.";
    MultipleOfChanged => "multiple_of_changed", "`multipleOf` changed to a number that is neither a multiple nor a divisor of the old one (2 to 3). Breaking both ways.";
    MaxItemsTightened => "max_items_tightened", "`maxItems` was added or lowered. Output: compatible. Input: breaking.";
    MaxItemsRelaxed => "max_items_relaxed", "`maxItems` was removed or raised. Output: breaking. Input: compatible.";
    MinItemsTightened => "min_items_tightened", "`minItems` was added or raised. Output: compatible. Input: breaking.";
    MinItemsRelaxed => "min_items_relaxed", "`minItems` was removed or lowered. Output: breaking. Input: compatible.";
    UniqueItemsAdded => "unique_items_added", "`uniqueItems: true` was added. Output: compatible. Input: breaking.";
    UniqueItemsRemoved => "unique_items_removed", "`uniqueItems: true` was removed. Output: breaking. Input: compatible.";
    CheckedRulesChanged => "checked_rules_changed", "A rule typed code holds as a checked value (`allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else`, `patternProperties`, `propertyNames`, `minProperties`/`maxProperties`, `dependentRequired`/`dependentSchemas`, `contains`, `prefixItems`, `unevaluatedProperties`) was added, removed or changed. Warning: these rules are not compared one by one; check old readers and old writers both.";
    ConstAdded => "const_added", "A free value was pinned with `const`. Output: compatible. Input: breaking.";
    ConstRemoved => "const_removed", "A `const` was dropped. Output: breaking. Input: compatible.";
    ConstChanged => "const_changed", "A `const` value changed. Breaking both ways.";
    DefaultAdded => "default_added", "A `default` was added: an absent value now has a documented meaning. Warning.";
    DefaultRemoved => "default_removed", "A `default` was removed. Warning.";
    DefaultChanged => "default_changed", "A `default` changed: an absent value now means something else (buf: FIELD_SAME_DEFAULT). Warning.";
    DescriptionChanged => "description_changed", "A `description` changed. Compatible (documentation only).";
    MethodAdded => "method_added", "A method was added. Input: compatible (old clients do not call it).";
    MethodRemoved => "method_removed", "A method was removed. Input: breaking (old clients calling it get `unknown_method`).";
    ErrorCodeAdded => "error_code_added", "An error code was added. Output: compatible when `ErrorCode` is `x-extensible` (old clients see an unknown, not-retryable code), breaking otherwise.";
    ErrorCodeRemoved => "error_code_removed", "An error code was removed. Output: warning (nothing is refused; clients' handling of it is dead code).";
    ErrorRpcCodeChanged => "error_rpc_code_changed", "An error code's JSON-RPC numeric `rpc_code` changed. Breaking: old clients map the number to another code.";
    ErrorRetryableChanged => "error_retryable_changed", "Whether an error code is retryable changed. Warning: old clients retry (or not) by the old rule.";
    RootTypeAdded => "root_type_added", "A type the checker starts from (the method union, or a type with a known role such as `Event` or `Turn`) was added. Compatible.";
    RootTypeRemoved => "root_type_removed", "A type the checker starts from was removed: the whole channel is gone. Breaking.";
    ConstantAdded => "constant_added", "An `x-constants` entry was added. Compatible.";
    ConstantRemoved => "constant_removed", "An `x-constants` entry was removed. Warning: generated code loses the constant.";
    ConstantChanged => "constant_changed", "An `x-constants` value changed (a limit, a version). Warning: check every reader and writer of it.";
}

/// One difference between the old and the new schema, judged for one direction.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    /// How bad it is.
    pub verdict: Verdict,
    /// Which way the data flows.
    pub direction: Direction,
    /// What changed.
    pub kind: Kind,
    /// Where: a JSON pointer into the bundle (into the new one, or the old one for removals).
    pub pointer: String,
    /// What changed and what it does to whom, for a person to read.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {} {}: {}", self.verdict.as_str(), self.direction.as_str(), self.kind.name(), self.pointer, self.message)
    }
}

/// Every finding of one comparison.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Sorted: breaking first, then warnings, then compatible changes; by pointer within each.
    pub findings: Vec<Finding>,
}

impl Report {
    /// The breaking findings.
    pub fn breaking(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.verdict == Verdict::Breaking)
    }

    /// How many findings have `verdict`.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.findings.iter().filter(|f| f.verdict == verdict).count()
    }

    /// Whether anything breaks.
    pub fn is_breaking(&self) -> bool {
        self.count(Verdict::Breaking) > 0
    }

    /// One line: how many of each verdict.
    pub fn summary(&self) -> String {
        format!(
            "{} breaking, {} warnings, {} compatible",
            self.count(Verdict::Breaking),
            self.count(Verdict::Warning),
            self.count(Verdict::Compatible)
        )
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for finding in &self.findings {
            writeln!(f, "{finding}")?;
        }
        Ok(())
    }
}

/// Which root types are read by whom: the roles the checker walks from. Method params and
/// results are found in the method union itself.
#[derive(Debug, Clone)]
pub struct Roles {
    /// Types the server or runner writes and old clients or hosts read, with who reads them.
    pub output: Vec<(String, String)>,
    /// Types old clients or hosts write and the server or runner reads, with who sends them.
    pub input: Vec<(String, String)>,
}

impl Default for Roles {
    fn default() -> Self {
        let pairs = |list: &[(&str, &str)]| list.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect();
        Roles {
            output: pairs(&[
                ("ServerEvent", "old clients reading events"),
                ("RpcNotification", "old clients reading stdio event notifications"),
                ("RuntimeSubmitError", "old clients reading errors"),
                ("RpcResponse", "old clients reading responses"),
                ("Event", "old hosts reading runner events"),
                ("FrontendEventNotification", "old frontends reading WebSocket events"),
                ("FrontendApprovalRequest", "old frontends reading approval requests"),
                ("FrontendApprovalResolved", "old frontends reading approval notices"),
            ]),
            input: pairs(&[
                ("Turn", "old hosts sending turns"),
                ("ApprovalAnswer", "old hosts sending approval answers"),
                ("ApprovalReply", "old frontends sending approval replies"),
            ]),
        }
    }
}

impl Roles {
    /// The roles of two versions of a schema: the default ones (our runtime's types, where the
    /// schema has them), then what the schema itself says is written by its server and read by
    /// old clients, and the other way round:
    ///
    /// - the object that carries an error code (the error set's carrier): written by the server;
    /// - with a method union (the server's requests), every method of a side (`x-method`/`x-side`
    ///   or a method file: what the server sends its peers, such as notifications): the params
    ///   written by the server and read by old peers, a request's result written by old peers and
    ///   read by the server.
    ///
    /// A schema of sides alone (no method union) has no server to check against: its sides are
    /// not walked.
    pub fn of(old: &TypeSpace, new: &TypeSpace) -> Roles {
        let mut roles = Roles::default();
        let add = |list: &mut Vec<(String, String)>, name: &str, who: String| {
            if !list.iter().any(|(n, _)| n == name) {
                list.push((name.to_owned(), who));
            }
        };
        for space in [old, new] {
            if let Some(carrier) = space.errors.as_ref().and_then(|e| e.carrier.as_deref()) {
                add(&mut roles.output, carrier, "old clients reading errors".to_owned());
            }
            if space.methods.is_none() {
                continue;
            }
            for side in &space.sides {
                for m in side.requests.iter().chain(&side.notifications) {
                    add(&mut roles.output, &m.params, format!("old {} peers reading `{}`", side.name, m.method));
                    if let Some(result) = &m.result {
                        add(&mut roles.input, result, format!("old {} peers answering `{}`", side.name, m.method));
                    }
                }
            }
        }
        roles
    }
}

/// Compares two lowered schemas with the roles they give ([`Roles::of`]).
pub fn compare(old: &TypeSpace, new: &TypeSpace) -> Report {
    compare_with(old, new, &Roles::of(old, new))
}

/// Compares two lowered schemas.
pub fn compare_with(old: &TypeSpace, new: &TypeSpace, roles: &Roles) -> Report {
    let mut cx = Cx { old, new, findings: BTreeSet::new(), seen: BTreeSet::new(), who: String::new() };
    let methods = (old.methods.as_ref().map(|m| m.union.clone()), new.methods.as_ref().map(|m| m.union.clone()));
    match &methods {
        (Some(o), Some(n)) => {
            cx.who = "old clients".into();
            cx.named_pair(o, n, Direction::Input);
        }
        (Some(o), None) => cx.root_change(Kind::RootTypeRemoved, Verdict::Breaking, Direction::Input, cx.old, o, "the method union"),
        (None, Some(n)) => cx.root_change(Kind::RootTypeAdded, Verdict::Compatible, Direction::Input, cx.new, n, "the method union"),
        (None, None) => {}
    }
    for (direction, list) in [(Direction::Output, &roles.output), (Direction::Input, &roles.input)] {
        for (name, who) in list {
            if methods.0.as_deref() == Some(name.as_str()) || methods.1.as_deref() == Some(name.as_str()) {
                continue;
            }
            cx.who = who.clone();
            match (old.types.contains_key(name), new.types.contains_key(name)) {
                (true, true) => cx.named_pair(name, name, direction),
                (true, false) => cx.root_change(Kind::RootTypeRemoved, Verdict::Breaking, direction, cx.old, name, who),
                (false, true) => cx.root_change(Kind::RootTypeAdded, Verdict::Compatible, direction, cx.new, name, who),
                (false, false) => {}
            }
        }
    }
    cx.constants();
    let mut findings: Vec<Finding> = cx.findings.into_iter().collect();
    findings.sort_by(|a, b| (a.verdict, &a.pointer, a.direction, a.kind, &a.message).cmp(&(b.verdict, &b.pointer, b.direction, b.kind, &b.message)));
    Report { findings }
}

/// The JSON pointer (without `#`) of a place in the bundle.
fn bundle_ptr(origin: &Origin) -> String {
    Documents::bundle_pointer(&origin.file, &origin.pointer).trim_start_matches('#').to_owned()
}

fn widening(dir: Direction) -> Verdict {
    if dir == Direction::Output { Verdict::Breaking } else { Verdict::Compatible }
}

fn narrowing(dir: Direction) -> Verdict {
    if dir == Direction::Input { Verdict::Breaking } else { Verdict::Compatible }
}

/// A type's body, seen through references and aliases.
#[derive(Clone, Copy)]
enum Body<'a> {
    Struct(&'a str, &'a StructDef, &'a Origin),
    Union(&'a str, &'a UnionDef, &'a Origin),
    Enum(&'a str, &'a EnumDef),
    Plain(&'a Node),
}

struct View<'a> {
    types: Types,
    body: Body<'a>,
    /// Where the body's rules are written.
    ptr: String,
    /// `x-echoed` on the way: what the server sends here is only what the client sent.
    echoed: bool,
}

/// The object part of a place.
enum ObjectPart<'a> {
    Struct(&'a str, &'a StructDef, String),
    Union(&'a str, &'a UnionDef, String),
    Open,
}

/// Literal values at a place: an `enum`, a `const`, or a string enum type.
struct Literals<'a> {
    values: Vec<Value>,
    is_const: bool,
    extensible: bool,
    docs: Option<&'a EnumDef>,
    /// The string enum's type name, when the literals are one.
    name: Option<&'a str>,
}

static EMPTY_OPEN: StructDef = StructDef { fields: Vec::new(), additional: Additional::Any, nullable: false };

struct Cx<'a> {
    old: &'a TypeSpace,
    new: &'a TypeSpace,
    findings: BTreeSet<Finding>,
    seen: BTreeSet<(String, String, Direction)>,
    /// Who is on the other side of the current root (who breaks).
    who: String,
}

fn resolve<'a>(space: &'a TypeSpace, node: &'a Node, ptr: &str) -> View<'a> {
    let types = node.types;
    let mut node = node;
    let mut ptr = ptr.to_owned();
    let mut echoed = node.echoed;
    for _ in 0..64 {
        let Some(name) = &node.reference else { break };
        let Some(t) = space.types.get(name) else { break };
        ptr = bundle_ptr(&t.origin);
        match &t.kind {
            TypeKind::Struct(s) => return View { types, body: Body::Struct(&t.name, s, &t.origin), ptr, echoed },
            TypeKind::Union(u) => return View { types, body: Body::Union(&t.name, u, &t.origin), ptr, echoed },
            TypeKind::StringEnum(e) => return View { types, body: Body::Enum(&t.name, e), ptr, echoed },
            TypeKind::Alias(inner) => {
                node = inner;
                echoed |= node.echoed;
            }
        }
    }
    View { types, body: Body::Plain(node), ptr, echoed }
}

fn object_part<'a>(space: &'a TypeSpace, view: &View<'a>) -> ObjectPart<'a> {
    match view.body {
        Body::Struct(n, s, o) => ObjectPart::Struct(n, s, bundle_ptr(o)),
        Body::Union(n, u, o) => ObjectPart::Union(n, u, bundle_ptr(o)),
        Body::Enum(..) => ObjectPart::Open,
        Body::Plain(node) => match node.object.as_ref().and_then(|name| space.types.get(name)) {
            Some(NamedType { name, kind: TypeKind::Struct(s), origin, .. }) => ObjectPart::Struct(name, s, bundle_ptr(origin)),
            _ => ObjectPart::Open,
        },
    }
}

fn literals<'a>(view: &View<'a>) -> Option<Literals<'a>> {
    match view.body {
        Body::Enum(name, e) => Some(Literals {
            values: e.values.iter().map(|v| Value::String(v.value.clone())).collect(),
            is_const: false,
            extensible: e.extensible,
            docs: Some(e),
            name: Some(name),
        }),
        Body::Plain(node) => node.literals.as_ref().map(|l| Literals { values: l.clone(), is_const: node.is_const, extensible: false, docs: None, name: None }),
        _ => None,
    }
}

fn plain<'a>(view: &View<'a>) -> Option<&'a Node> {
    match view.body {
        Body::Plain(n) => Some(n),
        _ => None,
    }
}

/// What a node accepts, without its annotations: used to spot renames.
/// The rules of a node that typed code holds as a checked value, written out without the
/// annotations inside them (a description changed there is no rule changed).
fn checked_rules(node: &Node) -> String {
    fn bare(node: &Node) -> Node {
        let mut n = node.clone();
        n.description = None;
        n.default = None;
        n.array.items = n.array.items.as_deref().map(|i| Box::new(bare(i)));
        n.array.prefix_items = n.array.prefix_items.iter().map(bare).collect();
        if let Some(c) = &mut n.array.contains {
            c.schema = bare(&c.schema);
        }
        let a = &mut n.applied;
        for list in [&mut a.all_of, &mut a.any_of, &mut a.one_of] {
            *list = list.iter().map(bare).collect();
        }
        a.not = a.not.as_deref().map(|x| Box::new(bare(x)));
        if let Some(c) = &mut a.conditional {
            c.condition = bare(&c.condition);
            c.then = c.then.as_ref().map(bare);
            c.otherwise = c.otherwise.as_ref().map(bare);
        }
        if let Some(m) = &mut n.members {
            m.property_names = m.property_names.as_ref().map(bare);
            m.patterns = m.patterns.iter().map(|(p, x)| (*p, bare(x))).collect();
            m.dependent_schemas = m.dependent_schemas.iter().map(|(k, x)| (k.clone(), bare(x))).collect();
            if let Some((_, Additional::Schema(x))) = &mut m.rest {
                **x = bare(x);
            }
        }
        if let Some(u) = &mut n.unevaluated {
            *u.schema = bare(&u.schema);
        }
        n
    }
    let n = bare(node);
    format!("{:?}|{:?}|{:?}|{:?}|{:?}", n.applied, n.members, n.unevaluated, n.array.contains, n.array.prefix_items)
}

fn signature(node: &Node) -> String {
    format!("{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}", node.types, node.reference, node.repr, node.string, node.number, node.literals, node.object)
}

fn show(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn show_num(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 9.0e15 { format!("{}", f as i64) } else { format!("{f}") }
}

impl<'a> Cx<'a> {
    /// Records a finding whose fact already says whom it breaks.
    fn push_plain(&mut self, verdict: Verdict, direction: Direction, kind: Kind, pointer: &str, message: String) {
        self.findings.insert(Finding { verdict, direction, kind, pointer: pointer.to_owned(), message });
    }

    fn push(&mut self, verdict: Verdict, direction: Direction, kind: Kind, pointer: &str, fact: String) {
        let consequence = match (verdict, direction) {
            (Verdict::Breaking, Direction::Output) => format!("; {} refuse what the new version may send", self.who),
            (Verdict::Breaking, Direction::Input) => format!("; the new version refuses what {} may send", self.who),
            (Verdict::Breaking, Direction::Both) => String::from("; readers and writers of different versions disagree"),
            _ => String::new(),
        };
        self.findings.insert(Finding { verdict, direction, kind, pointer: pointer.to_owned(), message: format!("{fact}{consequence}") });
    }

    fn root_change(&mut self, kind: Kind, verdict: Verdict, dir: Direction, space: &TypeSpace, name: &str, who: &str) {
        let pointer = space.types.get(name).map(|t| bundle_ptr(&t.origin)).unwrap_or_default();
        let fact = if kind == Kind::RootTypeAdded { format!("root type `{name}` added") } else { format!("root type `{name}` removed") };
        let saved = std::mem::replace(&mut self.who, who.to_owned());
        self.push(verdict, dir, kind, &pointer, fact);
        self.who = saved;
    }

    /// Compares two named types as whole roots.
    fn named_pair(&mut self, old: &str, new: &str, dir: Direction) {
        let (Some(o), Some(n)) = (self.old.types.get(old), self.new.types.get(new)) else { return };
        let on = ref_node(o);
        let nn = ref_node(n);
        let (op, np) = (bundle_ptr(&o.origin), bundle_ptr(&n.origin));
        self.description(o.description.as_deref(), n.description.as_deref(), &np, dir);
        self.place(&on, &nn, &op, &np, dir);
    }

    fn description(&mut self, old: Option<&str>, new: Option<&str>, ptr: &str, dir: Direction) {
        if old != new {
            self.push(Verdict::Compatible, dir, Kind::DescriptionChanged, &push_pointer(ptr, "description"), "description changed".into());
        }
    }

    /// Compares the schemas used at one place (a property, an item, a result).
    fn place(&mut self, old: &Node, new: &Node, optr: &str, nptr: &str, dir: Direction) {
        let (old_space, new_space) = (self.old, self.new);
        if old.reference.is_some() || new.reference.is_some() {
            // The annotations beside a `$ref`; a plain node's own are compared with its rules.
            self.description(old.description.as_deref(), new.description.as_deref(), nptr, dir);
        }
        self.default(old.default.as_ref(), new.default.as_ref(), nptr, dir);
        let ov = resolve(old_space, old, optr);
        let nv = resolve(new_space, new, nptr);
        self.views(&ov, &nv, dir);
    }

    fn default(&mut self, old: Option<&Value>, new: Option<&Value>, ptr: &str, dir: Direction) {
        let at = push_pointer(ptr, "default");
        match (old, new) {
            (None, Some(n)) => self.push(Verdict::Warning, dir, Kind::DefaultAdded, &at, format!("default {} added: an absent value now has that meaning", show(n))),
            (Some(o), None) => self.push(Verdict::Warning, dir, Kind::DefaultRemoved, &at, format!("default {} removed", show(o))),
            (Some(o), Some(n)) if o != n => self.push(
                Verdict::Warning,
                dir,
                Kind::DefaultChanged,
                &at,
                format!("default changed from {} to {}: readers of either version read an absent value differently", show(o), show(n)),
            ),
            _ => {}
        }
    }

    fn views(&mut self, ov: &View<'_>, nv: &View<'_>, dir: Direction) {
        let ptr = nv.ptr.clone();
        // A named body is compared once per direction, wherever it is used.
        let key = match (ov.body, nv.body) {
            (Body::Struct(a, ..), Body::Struct(b, ..)) | (Body::Union(a, ..), Body::Union(b, ..)) | (Body::Enum(a, ..), Body::Enum(b, ..)) => {
                Some((a.to_owned(), b.to_owned(), dir))
            }
            _ => None,
        };
        let (ot, nt) = (ov.types, nv.types);
        if ot != nt {
            let fact = format!("type {} became {}", types_text(ot), types_text(nt));
            if ot.0 & !nt.0 == 0 {
                // An echoed value (a request's id) comes back only as the client sent it: an old
                // client never sends what it could not read back.
                if nv.echoed {
                    self.push(Verdict::Compatible, dir, Kind::TypeWidened, &ptr, format!("{fact}; an echoed value, sent back only as the client sent it"));
                } else {
                    self.push(widening(dir), dir, Kind::TypeWidened, &ptr, fact);
                }
            } else if nt.0 & !ot.0 == 0 {
                self.push(narrowing(dir), dir, Kind::TypeNarrowed, &ptr, fact);
            } else {
                self.push(Verdict::Breaking, dir, Kind::TypeChanged, &ptr, fact);
            }
        }
        if let Some(k) = &key {
            if !self.seen.insert(k.clone()) {
                return;
            }
            let (od, nd) = (self.old.types.get(&k.0).and_then(|t| t.description.clone()), self.new.types.get(&k.1).and_then(|t| t.description.clone()));
            self.description(od.as_deref(), nd.as_deref(), &ptr, dir);
        }
        if let (Body::Plain(o), Body::Plain(n)) = (ov.body, nv.body) {
            self.description(o.description.as_deref(), n.description.as_deref(), &ptr, dir);
            if checked_rules(o) != checked_rules(n) {
                self.push(Verdict::Warning, dir, Kind::CheckedRulesChanged, &ptr, "a rule checked on the JSON value (an applicator, a rule on an object's members or an array's elements as a whole) changed".into());
            }
        }
        let common = ot.intersect(nt);
        self.literals(ov, nv, &ptr, dir);
        if common.0 & Types::STRING.0 != 0 {
            let empty = StringRules::default();
            let o = plain(ov).map_or(&empty, |n| &n.string);
            let n = plain(nv).map_or(&empty, |n| &n.string);
            self.string_rules(o, n, &ptr, dir);
        }
        if common.0 & Types::NUMBER.0 != 0 {
            let empty = NumberRules::default();
            let o = plain(ov).map_or(&empty, |n| &n.number);
            let n = plain(nv).map_or(&empty, |n| &n.number);
            self.number_rules(o, n, &ptr, dir);
        }
        if common.0 & Types::ARRAY.0 != 0 {
            let empty = ArrayRules::default();
            let o = plain(ov).map_or(&empty, |n| &n.array);
            let n = plain(nv).map_or(&empty, |n| &n.array);
            self.array_rules(o, n, &ov.ptr, &ptr, dir);
        }
        if common.0 & Types::OBJECT.0 != 0 {
            self.objects(ov, nv, dir);
        }
    }

    fn objects(&mut self, ov: &View<'_>, nv: &View<'_>, dir: Direction) {
        let op = object_part(self.old, ov);
        let np = object_part(self.new, nv);
        match (op, np) {
            (ObjectPart::Struct(on, o, optr), ObjectPart::Struct(nn, n, nptr)) => {
                let key = (on.to_owned(), nn.to_owned(), dir);
                if matches!(ov.body, Body::Plain(_)) && !self.seen.insert(key) {
                    return;
                }
                self.fields(&o.fields, &o.additional, &n.fields, &n.additional, &optr, &nptr, dir);
            }
            (ObjectPart::Struct(_, o, optr), ObjectPart::Open) => self.fields(&o.fields, &o.additional, &[], &EMPTY_OPEN.additional, &optr, &nv.ptr, dir),
            (ObjectPart::Open, ObjectPart::Struct(_, n, nptr)) => self.fields(&[], &EMPTY_OPEN.additional, &n.fields, &n.additional, &ov.ptr, &nptr, dir),
            (ObjectPart::Union(on, o, _), ObjectPart::Union(nn, n, nptr)) => self.union(on, o, nn, n, &nptr, dir),
            (ObjectPart::Open, ObjectPart::Open) => {}
            (ObjectPart::Union(..), _) => self.push(Verdict::Breaking, dir, Kind::TypeChanged, &nv.ptr, "a tagged union became a plain object".into()),
            (_, ObjectPart::Union(..)) => self.push(Verdict::Breaking, dir, Kind::TypeChanged, &nv.ptr, "a plain object became a tagged union".into()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn fields(&mut self, old: &[Field], old_add: &Additional, new: &[Field], new_add: &Additional, optr: &str, nptr: &str, dir: Direction) {
        let old_props = push_pointer(optr, "properties");
        let new_props = push_pointer(nptr, "properties");
        let removed: Vec<&Field> = old.iter().filter(|f| !new.iter().any(|g| g.name == f.name)).collect();
        let added: Vec<&Field> = new.iter().filter(|f| !old.iter().any(|g| g.name == f.name)).collect();
        let rename_of = |f: &Field, others: &[&Field]| -> Option<String> {
            let sig = signature(&f.node);
            others.iter().find(|g| signature(&g.node) == sig).map(|g| g.name.clone())
        };
        for f in old {
            let Some(g) = new.iter().find(|g| g.name == f.name) else { continue };
            let at = push_pointer(&new_props, &f.name);
            match (f.required, g.required) {
                (false, true) => self.push(narrowing(dir), dir, Kind::PropertyMadeRequired, &at, format!("`{}` became required", f.name)),
                (true, false) => self.push(widening(dir), dir, Kind::PropertyMadeOptional, &at, format!("`{}` became optional", f.name)),
                _ => {}
            }
            self.place(&f.node, &g.node, &push_pointer(&old_props, &f.name), &at, dir);
        }
        for f in &removed {
            let at = push_pointer(&old_props, &f.name);
            let hint = rename_of(f, &added).map(|to| format!(" (it looks like a rename to `{to}`: on the wire that is a removal plus an addition)")).unwrap_or_default();
            let kind = if f.required { Kind::RequiredPropertyRemoved } else { Kind::PropertyRemoved };
            let what = if f.required { "required property" } else { "property" };
            let verdict = match dir {
                Direction::Output if f.required => Verdict::Breaking,
                Direction::Input => match new_add {
                    Additional::Forbidden => Verdict::Breaking,
                    Additional::Any => Verdict::Compatible,
                    Additional::Schema(s) => {
                        let s = (**s).clone();
                        self.place(&f.node, &s, &at, &push_pointer(nptr, "additionalProperties"), dir);
                        Verdict::Compatible
                    }
                },
                _ => Verdict::Compatible,
            };
            self.push(verdict, dir, kind, &at, format!("{what} `{}` removed{hint}", f.name));
        }
        for f in &added {
            let at = push_pointer(&new_props, &f.name);
            let hint = rename_of(f, &removed).map(|from| format!(" (it looks like a rename of `{from}`: on the wire that is a removal plus an addition)")).unwrap_or_default();
            let kind = if f.required { Kind::RequiredPropertyAdded } else { Kind::PropertyAdded };
            let what = if f.required { "required property" } else { "optional property" };
            let verdict = match dir {
                Direction::Output => match old_add {
                    Additional::Forbidden => Verdict::Breaking,
                    Additional::Any => Verdict::Compatible,
                    Additional::Schema(s) => {
                        let s = (**s).clone();
                        self.place(&s, &f.node, &push_pointer(optr, "additionalProperties"), &at, dir);
                        Verdict::Compatible
                    }
                },
                Direction::Input if f.required => Verdict::Breaking,
                _ => Verdict::Compatible,
            };
            self.push(verdict, dir, kind, &at, format!("{what} `{}` added{hint}", f.name));
        }
        let at = push_pointer(nptr, "additionalProperties");
        match (old_add, new_add) {
            (Additional::Forbidden, Additional::Forbidden) | (Additional::Any, Additional::Any) => {}
            (Additional::Forbidden, _) => self.push(widening(dir), dir, Kind::AdditionalPropertiesOpened, &at, "the object was closed and now allows other properties".into()),
            (_, Additional::Forbidden) => self.push(narrowing(dir), dir, Kind::AdditionalPropertiesClosed, &at, "the object now refuses properties it does not declare".into()),
            (Additional::Any, Additional::Schema(_)) => {
                self.push(narrowing(dir), dir, Kind::AdditionalPropertiesNarrowed, &at, "undeclared properties must now match a schema".into())
            }
            (Additional::Schema(_), Additional::Any) => {
                self.push(widening(dir), dir, Kind::AdditionalPropertiesWidened, &at, "undeclared properties no longer need to match a schema".into())
            }
            (Additional::Schema(a), Additional::Schema(b)) => {
                let (a, b) = ((**a).clone(), (**b).clone());
                self.place(&a, &b, &push_pointer(optr, "additionalProperties"), &at, dir);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn union(&mut self, on: &str, old: &UnionDef, nn: &str, new: &UnionDef, nptr: &str, dir: Direction) {
        let methods = self.old.methods.as_ref().is_some_and(|m| m.union == on) && self.new.methods.as_ref().is_some_and(|m| m.union == nn);
        if old.tag != new.tag {
            self.push(Verdict::Breaking, dir, Kind::UnionTagChanged, nptr, format!("the union's tag property changed from `{}` to `{}`", old.tag, new.tag));
            return;
        }
        self.extensible(old.extensible, new.extensible, nptr, dir);
        let removed: Vec<&Variant> = old.variants.iter().filter(|v| !new.variants.iter().any(|w| w.tag_value == v.tag_value)).collect();
        let added: Vec<&Variant> = new.variants.iter().filter(|v| !old.variants.iter().any(|w| w.tag_value == v.tag_value)).collect();
        let sig = |v: &Variant| v.fields.iter().map(|f| format!("{}:{}:{}", f.name, f.required, signature(&f.node))).collect::<Vec<_>>().join(";");
        let tag = &new.tag;
        for v in &old.variants {
            let Some(w) = new.variants.iter().find(|w| w.tag_value == v.tag_value) else { continue };
            let (vp, wp) = (bundle_ptr(&v.origin), bundle_ptr(&w.origin));
            let saved = self.who.clone();
            if methods {
                self.who = format!("old clients calling `{}`", v.tag_value);
            }
            self.description(v.description.as_deref(), w.description.as_deref(), &wp, dir);
            self.fields(&v.fields, &v.additional, &w.fields, &w.additional, &vp, &wp, dir);
            if methods {
                let any = any_node();
                let (r, s) = (v.result.as_ref().unwrap_or(&any), w.result.as_ref().unwrap_or(&any));
                self.who = format!("old clients reading the `{}` result", v.tag_value);
                self.place(r, s, &push_pointer(&vp, "x-result"), &push_pointer(&wp, "x-result"), Direction::Output);
            }
            self.who = saved;
        }
        for v in &removed {
            let at = bundle_ptr(&v.origin);
            let hint = added.iter().find(|w| sig(w) == sig(v)).map(|w| format!(" (it looks like a rename to `{}`: on the wire that is a removal plus an addition)", w.tag_value)).unwrap_or_default();
            if methods {
                self.push_plain(Verdict::Breaking, Direction::Input, Kind::MethodRemoved, &at, format!("method `{}` removed{hint}; old clients calling it get `unknown_method`", v.tag_value));
            } else {
                let verdict = if dir == Direction::Input && !new.extensible { Verdict::Breaking } else { Verdict::Compatible };
                self.push(verdict, dir, Kind::UnionVariantRemoved, &at, format!("`{tag}: {}` removed{hint}", v.tag_value));
            }
        }
        for v in &added {
            let at = bundle_ptr(&v.origin);
            let hint = removed.iter().find(|w| sig(w) == sig(v)).map(|w| format!(" (it looks like a rename of `{}`: on the wire that is a removal plus an addition)", w.tag_value)).unwrap_or_default();
            if methods {
                self.push(Verdict::Compatible, Direction::Input, Kind::MethodAdded, &at, format!("method `{}` added{hint}", v.tag_value));
            } else {
                let (verdict, note) = match dir {
                    Direction::Output if old.extensible => (Verdict::Compatible, "; old readers keep it as an unknown kind (`x-extensible`)"),
                    Direction::Output => (Verdict::Breaking, ""),
                    _ => (Verdict::Compatible, ""),
                };
                self.push(verdict, dir, Kind::UnionVariantAdded, &at, format!("`{tag}: {}` added{hint}{note}", v.tag_value));
            }
        }
    }

    fn extensible(&mut self, old: bool, new: bool, ptr: &str, dir: Direction) {
        let at = push_pointer(ptr, "x-extensible");
        match (old, new) {
            (false, true) => self.push(Verdict::Compatible, dir, Kind::ExtensibleAdded, &at, "now `x-extensible`: new readers keep unknown values".into()),
            (true, false) => self.push(
                Verdict::Warning,
                dir,
                Kind::ExtensibleRemoved,
                &at,
                "no longer `x-extensible`: new readers will refuse values added later, so the next addition is a breaking change".into(),
            ),
            _ => {}
        }
    }

    fn literals(&mut self, ov: &View<'_>, nv: &View<'_>, ptr: &str, dir: Direction) {
        let (o, n) = (literals(ov), literals(nv));
        if let (Some(o), Some(n)) = (&o, &n)
            && o.docs.is_some()
            && n.docs.is_some()
        {
            self.extensible(o.extensible, n.extensible, ptr, dir);
        }
        match (o, n) {
            (None, None) => {}
            (None, Some(n)) => {
                let (kind, fact) = if n.is_const {
                    (Kind::ConstAdded, format!("pinned to const {}", show(&n.values[0])))
                } else {
                    (Kind::EnumAdded, format!("restricted to the values {}", n.values.iter().map(show).collect::<Vec<_>>().join(", ")))
                };
                self.push(narrowing(dir), dir, kind, ptr, fact);
            }
            (Some(o), None) => {
                let kind = if o.is_const { Kind::ConstRemoved } else { Kind::EnumRemoved };
                let verdict = if o.extensible && dir == Direction::Output { Verdict::Compatible } else { widening(dir) };
                let fact = if o.is_const { format!("const {} removed", show(&o.values[0])) } else { "no longer restricted to a list of values".into() };
                self.push(verdict, dir, kind, ptr, fact);
            }
            (Some(o), Some(n)) if o.is_const && n.is_const => {
                if o.values != n.values {
                    self.push(Verdict::Breaking, dir, Kind::ConstChanged, ptr, format!("const changed from {} to {}", show(&o.values[0]), show(&n.values[0])));
                }
            }
            (Some(o), Some(n)) => self.enum_values(&o, &n, ptr, dir),
        }
    }

    fn enum_values(&mut self, o: &Literals<'_>, n: &Literals<'_>, ptr: &str, dir: Direction) {
        // The error codes are the model's error set (decided once, in `lower`), on either side.
        let error_set = |space: &'a TypeSpace, name: Option<&str>| space.errors.as_ref().filter(|s| Some(s.enum_name.as_str()) == name);
        let (old_errors, new_errors) = (error_set(self.old, o.name), error_set(self.new, n.name));
        let errors = old_errors.is_some() || new_errors.is_some();
        for (i, v) in n.values.iter().enumerate() {
            if o.values.contains(v) {
                continue;
            }
            let at = push_pointer(&push_pointer(ptr, "enum"), &i.to_string());
            let extensible_note = if o.extensible { "; old readers keep it as an unknown value (`x-extensible`)" } else { "" };
            let verdict = match dir {
                Direction::Output if !o.extensible => Verdict::Breaking,
                _ => Verdict::Compatible,
            };
            let kind = if errors { Kind::ErrorCodeAdded } else { Kind::EnumValueAdded };
            let what = if errors { "error code" } else { "value" };
            self.push(verdict, dir, kind, &at, format!("{what} {} added{extensible_note}", show(v)));
        }
        for (i, v) in o.values.iter().enumerate() {
            if n.values.contains(v) {
                continue;
            }
            let at = push_pointer(&push_pointer(ptr, "enum"), &i.to_string());
            let hint = if o.values.len() == n.values.len() {
                n.values.iter().find(|w| !o.values.contains(w)).map(|w| format!(" (a rename to {} is a removal plus an addition)", show(w))).unwrap_or_default()
            } else {
                String::new()
            };
            let (kind, verdict) = match dir {
                Direction::Input if !n.extensible => (if errors { Kind::ErrorCodeRemoved } else { Kind::EnumValueRemoved }, Verdict::Breaking),
                _ if errors => (Kind::ErrorCodeRemoved, Verdict::Warning),
                _ => (Kind::EnumValueRemoved, Verdict::Compatible),
            };
            let what = if errors { "error code" } else { "value" };
            self.push(verdict, dir, kind, &at, format!("{what} {} removed{hint}", show(v)));
        }
        let (Some(od), Some(nd)) = (o.docs, n.docs) else { return };
        for ov in &od.values {
            let Some(nv) = nd.values.iter().find(|v| v.value == ov.value) else { continue };
            let at = push_pointer(&push_pointer(ptr, "x-enum"), &ov.value);
            let (oc, nc) = (old_errors.and_then(|s| s.get(&ov.value)), new_errors.and_then(|s| s.get(&nv.value)));
            let (o_rpc, n_rpc) = (oc.map(|c| c.rpc_code), nc.map(|c| c.rpc_code));
            let (o_retry, n_retry) = (oc.map(|c| c.retryable), nc.map(|c| c.retryable));
            if o_rpc != n_rpc {
                let who = self.who.clone();
                self.push_plain(
                    Verdict::Breaking,
                    dir,
                    Kind::ErrorRpcCodeChanged,
                    &push_pointer(&at, "rpc_code"),
                    format!("`{}` changed its JSON-RPC code from {} to {}; {who} map the new number to another error, or to none", ov.value, opt(o_rpc), opt(n_rpc)),
                );
            }
            if o_retry != n_retry {
                self.push(
                    Verdict::Warning,
                    dir,
                    Kind::ErrorRetryableChanged,
                    &push_pointer(&at, "retryable"),
                    format!("`{}` changed retryable from {} to {}: old clients follow the old rule", ov.value, opt(o_retry), opt(n_retry)),
                );
            }
            if ov.description != nv.description {
                self.push(Verdict::Compatible, dir, Kind::DescriptionChanged, &push_pointer(&at, "description"), format!("`{}`'s description changed", ov.value));
            }
        }
    }

    fn string_rules(&mut self, o: &StringRules, n: &StringRules, ptr: &str, dir: Direction) {
        let at = |k: &str| push_pointer(ptr, k);
        let (om, nm) = (o.max_length, n.max_length);
        match (om, nm) {
            (None, None) => {}
            (a, b) if a == b => {}
            (None, Some(b)) => self.push(narrowing(dir), dir, Kind::MaxLengthTightened, &at("maxLength"), format!("maxLength {b} added")),
            (Some(a), None) => self.push(widening(dir), dir, Kind::MaxLengthRelaxed, &at("maxLength"), format!("maxLength {a} removed")),
            (Some(a), Some(b)) if b < a => self.push(narrowing(dir), dir, Kind::MaxLengthTightened, &at("maxLength"), format!("maxLength lowered from {a} to {b}")),
            (Some(a), Some(b)) => self.push(widening(dir), dir, Kind::MaxLengthRelaxed, &at("maxLength"), format!("maxLength raised from {a} to {b}")),
        }
        let (a, b) = (o.min_length.unwrap_or(0), n.min_length.unwrap_or(0));
        if b > a {
            self.push(narrowing(dir), dir, Kind::MinLengthTightened, &at("minLength"), format!("minLength raised from {a} to {b}"));
        } else if b < a {
            self.push(widening(dir), dir, Kind::MinLengthRelaxed, &at("minLength"), format!("minLength lowered from {a} to {b}"));
        }
        let src = |space: &TypeSpace, i: Option<usize>| i.and_then(|i| space.patterns.get(i)).map(|p| p.source.clone());
        match (src(self.old, o.pattern), src(self.new, n.pattern)) {
            (None, None) => {}
            (None, Some(p)) => self.push(narrowing(dir), dir, Kind::PatternAdded, &at("pattern"), format!("pattern `{p}` added")),
            (Some(p), None) => self.push(widening(dir), dir, Kind::PatternRemoved, &at("pattern"), format!("pattern `{p}` removed")),
            (Some(p), Some(q)) if p != q => self.push(
                Verdict::Breaking,
                dir,
                Kind::PatternChanged,
                &at("pattern"),
                format!("pattern changed from `{p}` to `{q}`; neither can be proven to include the other"),
            ),
            _ => {}
        }
    }

    fn number_rules(&mut self, o: &NumberRules, n: &NumberRules, ptr: &str, dir: Direction) {
        let at = push_pointer(ptr, "multipleOf");
        match (o.multiple_of, n.multiple_of) {
            (a, b) if a == b => {}
            (None, Some(y)) => self.push(narrowing(dir), dir, Kind::MultipleOfTightened, &at, format!("multipleOf {} added", show_num(y))),
            (Some(x), None) => self.push(widening(dir), dir, Kind::MultipleOfRelaxed, &at, format!("multipleOf {} removed", show_num(x))),
            (Some(x), Some(y)) => {
                let change = format!("multipleOf {} became {}", show_num(x), show_num(y));
                // A multiple of the new number is one of the old when the new is a multiple of it.
                if openagents_rt::multiple_of(y, x) {
                    self.push(narrowing(dir), dir, Kind::MultipleOfTightened, &at, change);
                } else if openagents_rt::multiple_of(x, y) {
                    self.push(widening(dir), dir, Kind::MultipleOfRelaxed, &at, change);
                } else {
                    self.push(Verdict::Breaking, dir, Kind::MultipleOfChanged, &at, change);
                }
            }
            (None, None) => {}
        }
        // Each bound as (value, exclusive); the tighter of `minimum` and `exclusiveMinimum` wins.
        let lower = |r: &NumberRules| -> Option<(f64, bool)> {
            match (r.minimum, r.exclusive_minimum) {
                (Some(m), Some(e)) => Some(if e >= m { (e, true) } else { (m, false) }),
                (Some(m), None) => Some((m, false)),
                (None, Some(e)) => Some((e, true)),
                (None, None) => None,
            }
        };
        let upper = |r: &NumberRules| -> Option<(f64, bool)> {
            match (r.maximum, r.exclusive_maximum) {
                (Some(m), Some(e)) => Some(if e <= m { (e, true) } else { (m, false) }),
                (Some(m), None) => Some((m, false)),
                (None, Some(e)) => Some((e, true)),
                (None, None) => None,
            }
        };
        let text = |b: (f64, bool), low: bool| match (b.1, low) {
            (true, true) => format!("> {}", show_num(b.0)),
            (false, true) => format!(">= {}", show_num(b.0)),
            (true, false) => format!("< {}", show_num(b.0)),
            (false, false) => format!("<= {}", show_num(b.0)),
        };
        let key = |low: bool| if low { "minimum" } else { "maximum" };
        for low in [true, false] {
            let (a, b) = if low { (lower(o), lower(n)) } else { (upper(o), upper(n)) };
            if a == b {
                continue;
            }
            // Whether the new bound admits a value the old one refused (relaxed), and the reverse.
            let tighter = |x: (f64, bool), y: (f64, bool)| -> bool {
                // Is y at least as tight as x?
                if low { y.0 > x.0 || (y.0 == x.0 && (y.1 || !x.1)) } else { y.0 < x.0 || (y.0 == x.0 && (y.1 || !x.1)) }
            };
            let (tight_kind, relax_kind) = if low { (Kind::MinimumTightened, Kind::MinimumRelaxed) } else { (Kind::MaximumTightened, Kind::MaximumRelaxed) };
            let at = push_pointer(ptr, key(low));
            match (a, b) {
                (None, Some(y)) => self.push(narrowing(dir), dir, tight_kind, &at, format!("bound {} added", text(y, low))),
                (Some(x), None) => self.push(widening(dir), dir, relax_kind, &at, format!("bound {} removed", text(x, low))),
                (Some(x), Some(y)) if tighter(x, y) => self.push(narrowing(dir), dir, tight_kind, &at, format!("bound {} became {}", text(x, low), text(y, low))),
                (Some(x), Some(y)) => self.push(widening(dir), dir, relax_kind, &at, format!("bound {} became {}", text(x, low), text(y, low))),
                (None, None) => {}
            }
        }
    }

    fn array_rules(&mut self, o: &ArrayRules, n: &ArrayRules, optr: &str, nptr: &str, dir: Direction) {
        let at = |k: &str| push_pointer(nptr, k);
        match (o.max_items, n.max_items) {
            (None, None) => {}
            (a, b) if a == b => {}
            (None, Some(b)) => self.push(narrowing(dir), dir, Kind::MaxItemsTightened, &at("maxItems"), format!("maxItems {b} added")),
            (Some(a), None) => self.push(widening(dir), dir, Kind::MaxItemsRelaxed, &at("maxItems"), format!("maxItems {a} removed")),
            (Some(a), Some(b)) if b < a => self.push(narrowing(dir), dir, Kind::MaxItemsTightened, &at("maxItems"), format!("maxItems lowered from {a} to {b}")),
            (Some(a), Some(b)) => self.push(widening(dir), dir, Kind::MaxItemsRelaxed, &at("maxItems"), format!("maxItems raised from {a} to {b}")),
        }
        let (a, b) = (o.min_items.unwrap_or(0), n.min_items.unwrap_or(0));
        if b > a {
            self.push(narrowing(dir), dir, Kind::MinItemsTightened, &at("minItems"), format!("minItems raised from {a} to {b}"));
        } else if b < a {
            self.push(widening(dir), dir, Kind::MinItemsRelaxed, &at("minItems"), format!("minItems lowered from {a} to {b}"));
        }
        match (o.unique_items, n.unique_items) {
            (false, true) => self.push(narrowing(dir), dir, Kind::UniqueItemsAdded, &at("uniqueItems"), "uniqueItems added".into()),
            (true, false) => self.push(widening(dir), dir, Kind::UniqueItemsRemoved, &at("uniqueItems"), "uniqueItems removed".into()),
            _ => {}
        }
        if o.items.is_none() && n.items.is_none() {
            return;
        }
        let any = any_node();
        let oi = o.items.as_deref().unwrap_or(&any);
        let ni = n.items.as_deref().unwrap_or(&any);
        self.place(oi, ni, &push_pointer(optr, "items"), &at("items"), dir);
    }

    fn constants(&mut self) {
        let names: BTreeSet<&String> = self.old.constants.keys().chain(self.new.constants.keys()).collect();
        for name in names {
            match (self.old.constants.get(name), self.new.constants.get(name)) {
                (Some(o), Some(n)) if o.value != n.value => {
                    let (verdict, note) = if name == "PROTOCOL_VERSION" {
                        (Verdict::Compatible, "")
                    } else {
                        (Verdict::Warning, "; check every reader and writer that relies on it")
                    };
                    self.push(verdict, Direction::Both, Kind::ConstantChanged, &bundle_ptr(&n.origin), format!("`{name}` changed from {} to {}{note}", show(&o.value), show(&n.value)));
                }
                (Some(o), Some(n)) if o.description != n.description => {
                    self.push(Verdict::Compatible, Direction::Both, Kind::DescriptionChanged, &push_pointer(&bundle_ptr(&n.origin), "description"), format!("`{name}`'s description changed"));
                }
                (Some(o), None) => self.push(Verdict::Warning, Direction::Both, Kind::ConstantRemoved, &bundle_ptr(&o.origin), format!("constant `{name}` removed")),
                (None, Some(n)) => self.push(Verdict::Compatible, Direction::Both, Kind::ConstantAdded, &bundle_ptr(&n.origin), format!("constant `{name}` = {} added", show(&n.value))),
                _ => {}
            }
        }
    }
}

fn opt<T: fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "none".to_owned(), |v| v.to_string())
}

fn types_text(t: Types) -> String {
    if t == Types::ALL {
        return "any".into();
    }
    if t == Types::NONE {
        return "nothing".into();
    }
    t.names().join("|")
}

/// A node standing for a whole named type.
fn ref_node(t: &NamedType) -> Node {
    let types = match &t.kind {
        TypeKind::Struct(s) if s.nullable => Types::OBJECT.union(Types::NULL),
        TypeKind::Struct(_) | TypeKind::Union(_) => Types::OBJECT,
        TypeKind::StringEnum(_) => Types::STRING,
        TypeKind::Alias(n) => n.types,
    };
    Node { types, reference: Some(t.name.clone()), repr: Repr::Named(t.name.clone()), ..any_node() }
}

/// Lines `verdict direction kind pointer`, sorted: the stable part of a report, as the pair
/// corpus records it.
pub fn key_lines(report: &Report) -> Vec<String> {
    let mut lines: Vec<String> =
        report.findings.iter().map(|f| format!("{} {} {} {}", f.verdict.as_str(), f.direction.as_str(), f.kind.name(), f.pointer)).collect();
    lines.sort();
    lines.dedup();
    lines
}

/// `Map` helper for tests and tools that build schemas in memory.
pub fn object(entries: impl IntoIterator<Item = (String, Value)>) -> Value {
    Value::Object(entries.into_iter().collect::<Map<String, Value>>())
}

/// The default roles, by type name, for tools that print them.
pub fn role_table(roles: &Roles) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (n, who) in &roles.output {
        out.insert(n.clone(), format!("output ({who})"));
    }
    for (n, who) in &roles.input {
        out.insert(n.clone(), format!("input ({who})"));
    }
    out
}
