//! Optional `schemars::JsonSchema` derives for the generated Rust types ([`RustOptions::schemars`]).
//!
//! Every attribute is emitted under `#[cfg_attr(feature = "schemars", ...)]`, so the generated
//! code compiles the same without the feature. With it, `schemars::schema_for!(T)` states the
//! same constraints as the source schema, which the protocol crate's `tests/semantic.rs` proves
//! by canonical subtraction both ways.
//!
//! What each model shape becomes:
//!
//! * structs: `deny_unknown_fields` when closed, `extend("type" = ["object", "null"])` when
//!   nullable; fields keep their `#[serde(rename)]`.
//! * tagged unions: `tag = "<tag>"`, `rename = "<tag value>"` per variant,
//!   `deny_unknown_fields` (or `extend("additionalProperties" = false)` per closed variant when
//!   only some are closed), the `Unknown` variant of an `x-extensible` union `skip`ped (the
//!   strict schema does not accept unknown tags).
//! * string enums: `rename` per value, `Unknown` `skip`ped.
//! * fields: the rules of the field's node, or of the alias it is typed by (`Id = String`
//!   carries `Id`'s `minLength`/`maxLength`/`pattern` on every field typed `Id`), as
//!   `length(..)`, `regex(pattern = ..)` and `range(..)` when the Rust type's own schema has the
//!   matching `type`, otherwise as `extend(..)` (`const`, `enum`, `exclusiveMinimum`, the `type`
//!   list of a `serde_json::Value`, array bounds on an `Option<Vec<_>>`, ...). Requiredness and
//!   `null` are made exact with `required` and two transforms from the generated `__schemars`
//!   module: `not_null` (an optional property that is not nullable: schemars' `Option<T>` would
//!   add `null`) and `nullable` (a nullable property, required or not). Element rules of arrays
//!   go through the `Items` transform.
//!
//! Not supported (the current schemas have none; the semantic test fails if one appears): a
//! field whose node allows several JSON types *and* object rules (the "object part" structs),
//! element rules of arrays nested in arrays, rules on an `additionalProperties` schema, and
//! `false` fields (`rt::Never` has no `JsonSchema` impl, so the derive would not compile).
//!
//! [`RustOptions::schemars`]: crate::rust::RustOptions::schemars

use proc_macro2::{Literal, TokenStream};
use quote::quote;
use serde_json::Value;

use crate::model::*;

/// Emits the `schemars` attributes; every method returns nothing when the option is off.
#[derive(Clone, Copy)]
pub(crate) struct Schemars<'a> {
    pub(crate) space: &'a TypeSpace,
    pub(crate) enabled: bool,
}

/// `#[cfg_attr(feature = "schemars", schemars(<items>))]`, or nothing for no items.
fn attr(items: &[TokenStream]) -> TokenStream {
    if items.is_empty() {
        return quote!();
    }
    quote!(#[cfg_attr(feature = "schemars", schemars(#(#items),*))])
}

/// A JSON value as tokens for `serde_json::json!` (numbers suffixed, so none overflows `i32`).
pub(crate) fn json_tokens(v: &Value) -> TokenStream {
    match v {
        Value::Null => quote!(null),
        Value::Bool(b) => quote!(#b),
        Value::Number(n) => number_tokens(n),
        Value::String(s) => quote!(#s),
        Value::Array(items) => {
            let items = items.iter().map(json_tokens);
            quote!([#(#items),*])
        }
        Value::Object(map) => {
            let entries = map.iter().map(|(k, v)| {
                let v = json_tokens(v);
                quote!(#k: #v)
            });
            quote!({ #(#entries),* })
        }
    }
}

fn number_tokens(n: &serde_json::Number) -> TokenStream {
    if let Some(i) = n.as_i64() {
        let l = Literal::i64_suffixed(i);
        quote!(#l)
    } else if let Some(u) = n.as_u64() {
        let l = Literal::u64_suffixed(u);
        quote!(#l)
    } else {
        let l = Literal::f64_suffixed(n.as_f64().unwrap_or(0.0));
        quote!(#l)
    }
}

/// A bound as a JSON number: an integer when it is whole (so `0`, not `0.0`).
fn bound(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.2e18 {
        Value::from(f as i64)
    } else {
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

fn strip_nullable(r: &Repr) -> &Repr {
    match r {
        Repr::Nullable(inner) => strip_nullable(inner),
        other => other,
    }
}

impl<'a> Schemars<'a> {
    fn derive(&self) -> TokenStream {
        quote!(#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))])
    }

    /// The node whose rules hold for a use of `node`: the node itself, or, through references
    /// to aliases, the aliased node (a Rust type alias cannot carry attributes).
    fn effective(&self, node: &'a Node) -> &'a Node {
        let mut n = node;
        for _ in 0..64 {
            match n.reference.as_ref().and_then(|r| self.space.types.get(r)) {
                Some(NamedType { kind: TypeKind::Alias(inner), .. }) => n = inner,
                _ => break,
            }
        }
        n
    }

    /// Whether a node's Rust type is an `Option` through aliases (`type A = Option<..>`).
    fn alias_is_option(&self, node: &Node) -> bool {
        match node.reference.as_ref().and_then(|r| self.space.types.get(r)) {
            Some(NamedType { kind: TypeKind::Alias(inner), .. }) => {
                matches!(inner.repr, Repr::Nullable(_)) || self.alias_is_option(inner)
            }
            _ => false,
        }
    }

    /// Attributes on a struct.
    pub(crate) fn struct_attrs(&self, s: &StructDef) -> TokenStream {
        if !self.enabled {
            return quote!();
        }
        let mut items = Vec::new();
        if matches!(s.additional, Additional::Forbidden) {
            items.push(quote!(deny_unknown_fields));
        }
        if s.nullable {
            items.push(quote!(extend("type" = ["object", "null"])));
        }
        let d = self.derive();
        let a = attr(&items);
        quote!(#d #a)
    }

    /// Prefixes each field declaration with its attributes; `rename` for union variant fields,
    /// which carry no `#[serde(rename)]`.
    pub(crate) fn with_fields(&self, fields: &[Field], decls: Vec<TokenStream>, rename: bool) -> Vec<TokenStream> {
        if !self.enabled {
            return decls;
        }
        fields.iter().zip(decls).map(|(f, d)| {
            let a = self.field_attrs(f, rename);
            quote!(#a #d)
        }).collect()
    }

    /// `#[schemars(flatten)]` for the `additional` map of a union variant (its serde attributes
    /// are stripped).
    pub(crate) fn flatten(&self, decl: TokenStream) -> TokenStream {
        if !self.enabled || decl.is_empty() {
            return decl;
        }
        quote!(#[cfg_attr(feature = "schemars", schemars(flatten))] #decl)
    }

    fn field_attrs(&self, f: &Field, rename: bool) -> TokenStream {
        let mut items = Vec::new();
        if rename {
            let name = &f.name;
            items.push(quote!(rename = #name));
        }
        let node = &f.node;
        let eff = self.effective(node);
        let is_option = !f.required || matches!(node.repr, Repr::Nullable(_)) || self.alias_is_option(node);
        let base = strip_nullable(&eff.repr);
        // Rules live on the effective node unless it names a struct, union or enum, which
        // derive their own schema.
        let has_rules = eff.reference.is_none();
        if has_rules {
            self.rules(eff, base, is_option, &mut items);
        }
        // A `serde_json::Value` states its JSON types itself (`extend("type" = ..)`, or `true`
        // for every type), `null` included or not: nothing to add or remove.
        let states_types = has_rules && *base == Repr::Value;
        if is_option {
            if f.required {
                items.push(quote!(required));
            } else if !states_types {
                items.push(quote!(transform = __schemars::not_null));
            }
        }
        if node.types.contains(Types::NULL) && !states_types {
            items.push(quote!(transform = __schemars::nullable));
        }
        attr(&items)
    }

    /// The assertions of `n` beyond what its Rust type's schema says.
    fn rules(&self, n: &Node, base: &Repr, is_option: bool, items: &mut Vec<TokenStream>) {
        let mut extend: Vec<(String, Value)> = Vec::new();
        // Whether schemars' validation attributes apply: they only act on a schema whose own
        // `type` matches (an `Option<Vec<_>>` is an `anyOf`, a `serde_json::Value` is `true`).
        let scalar = matches!(base, Repr::String | Repr::Integer | Repr::Number);
        let array = matches!(base, Repr::Array(_));
        if *base == Repr::Value && n.types != Types::ALL {
            let names: Vec<Value> = n.types.names().into_iter().map(Value::from).collect();
            extend.push(("type".into(), Value::Array(names)));
        }
        if let Some(lits) = &n.literals {
            if n.is_const {
                extend.push(("const".into(), lits.first().cloned().unwrap_or(Value::Null)));
            } else {
                extend.push(("enum".into(), Value::Array(lits.clone())));
            }
        }
        // Strings.
        let s = &n.string;
        if scalar && *base == Repr::String {
            let mut parts = Vec::new();
            if let Some(min) = s.min_length {
                let l = Literal::u64_suffixed(min);
                parts.push(quote!(min = #l));
            }
            if let Some(max) = s.max_length {
                let l = Literal::u64_suffixed(max);
                parts.push(quote!(max = #l));
            }
            if !parts.is_empty() {
                items.push(quote!(length(#(#parts),*)));
            }
            if let Some(p) = s.pattern {
                let src = &self.space.patterns[p].source;
                items.push(quote!(regex(pattern = #src)));
            }
        } else {
            if let Some(min) = s.min_length {
                extend.push(("minLength".into(), Value::from(min)));
            }
            if let Some(max) = s.max_length {
                extend.push(("maxLength".into(), Value::from(max)));
            }
            if let Some(p) = s.pattern {
                extend.push(("pattern".into(), Value::from(self.space.patterns[p].source.clone())));
            }
        }
        // Numbers.
        let num = &n.number;
        if scalar && matches!(base, Repr::Integer | Repr::Number) {
            let mut parts = Vec::new();
            if let Some(min) = num.minimum {
                let v = json_tokens(&bound(min));
                parts.push(quote!(min = #v));
            }
            if let Some(max) = num.maximum {
                let v = json_tokens(&bound(max));
                parts.push(quote!(max = #v));
            }
            if !parts.is_empty() {
                items.push(quote!(range(#(#parts),*)));
            }
        } else {
            if let Some(min) = num.minimum {
                extend.push(("minimum".into(), bound(min)));
            }
            if let Some(max) = num.maximum {
                extend.push(("maximum".into(), bound(max)));
            }
        }
        if let Some(x) = num.exclusive_minimum {
            extend.push(("exclusiveMinimum".into(), bound(x)));
        }
        if let Some(x) = num.exclusive_maximum {
            extend.push(("exclusiveMaximum".into(), bound(x)));
        }
        if let Some(x) = num.multiple_of {
            extend.push(("multipleOf".into(), bound(x)));
        }
        // Arrays.
        let a = &n.array;
        if array && !is_option {
            let mut parts = Vec::new();
            if let Some(min) = a.min_items {
                let l = Literal::u64_suffixed(min);
                parts.push(quote!(min = #l));
            }
            if let Some(max) = a.max_items {
                let l = Literal::u64_suffixed(max);
                parts.push(quote!(max = #l));
            }
            if !parts.is_empty() {
                items.push(quote!(length(#(#parts),*)));
            }
        } else {
            if let Some(min) = a.min_items {
                extend.push(("minItems".into(), Value::from(min)));
            }
            if let Some(max) = a.max_items {
                extend.push(("maxItems".into(), Value::from(max)));
            }
        }
        if a.unique_items {
            extend.push(("uniqueItems".into(), Value::Bool(true)));
        }
        if !extend.is_empty() {
            let parts = extend.iter().map(|(k, v)| {
                let v = json_tokens(v);
                quote!(#k = #v)
            });
            items.push(quote!(extend(#(#parts),*)));
        }
        // Element rules, merged into `items` by a transform (which finds the array beside the
        // `null` branch of an `Option<Vec<_>>` too: it runs before `not_null`).
        if let (Repr::Array(_), Some(item)) = (base, a.items.as_deref()) {
            let eff = self.effective(item);
            if eff.reference.is_none() {
                let kw = self.keywords(eff);
                if !kw.is_empty() {
                    let text = Value::Object(kw).to_string();
                    items.push(quote!(transform = __schemars::Items(#text)));
                }
            }
        }
    }

    /// The assertions of an array element's node as JSON keywords (beyond its Rust type).
    fn keywords(&self, n: &Node) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        if strip_nullable(&n.repr) == &Repr::Value && n.types != Types::ALL {
            m.insert("type".into(), Value::Array(n.types.names().into_iter().map(Value::from).collect()));
        }
        if let Some(lits) = &n.literals {
            if n.is_const {
                m.insert("const".into(), lits.first().cloned().unwrap_or(Value::Null));
            } else {
                m.insert("enum".into(), Value::Array(lits.clone()));
            }
        }
        let put = |m: &mut serde_json::Map<String, Value>, k: &str, v: Option<Value>| {
            if let Some(v) = v {
                m.insert(k.into(), v);
            }
        };
        put(&mut m, "minLength", n.string.min_length.map(Value::from));
        put(&mut m, "maxLength", n.string.max_length.map(Value::from));
        put(&mut m, "pattern", n.string.pattern.map(|p| Value::from(self.space.patterns[p].source.clone())));
        put(&mut m, "minimum", n.number.minimum.map(bound));
        put(&mut m, "maximum", n.number.maximum.map(bound));
        put(&mut m, "exclusiveMinimum", n.number.exclusive_minimum.map(bound));
        put(&mut m, "exclusiveMaximum", n.number.exclusive_maximum.map(bound));
        put(&mut m, "multipleOf", n.number.multiple_of.map(bound));
        put(&mut m, "minItems", n.array.min_items.map(Value::from));
        put(&mut m, "maxItems", n.array.max_items.map(Value::from));
        put(&mut m, "uniqueItems", n.array.unique_items.then_some(Value::Bool(true)));
        m
    }

    /// Attributes on a tagged union.
    pub(crate) fn union_attrs(&self, u: &UnionDef) -> TokenStream {
        if !self.enabled {
            return quote!();
        }
        let tag = &u.tag;
        let mut items = vec![quote!(tag = #tag)];
        if u.variants.iter().all(|v| matches!(v.additional, Additional::Forbidden)) {
            items.push(quote!(deny_unknown_fields));
        }
        let d = self.derive();
        let a = attr(&items);
        quote!(#d #a)
    }

    /// Attributes on one union variant.
    pub(crate) fn variant_attrs(&self, u: &UnionDef, v: &Variant) -> TokenStream {
        if !self.enabled {
            return quote!();
        }
        let tv = &v.tag_value;
        let mut items = vec![quote!(rename = #tv)];
        let all_closed = u.variants.iter().all(|v| matches!(v.additional, Additional::Forbidden));
        if matches!(v.additional, Additional::Forbidden) && !all_closed {
            items.push(quote!(extend("additionalProperties" = false)));
        }
        attr(&items)
    }

    /// `skip` for the `Unknown` variant of an extensible union or enum.
    pub(crate) fn skip(&self) -> TokenStream {
        if !self.enabled {
            return quote!();
        }
        attr(&[quote!(skip)])
    }

    /// Attributes on a string enum.
    pub(crate) fn enum_attrs(&self) -> TokenStream {
        if !self.enabled {
            return quote!();
        }
        self.derive()
    }

    /// Attributes on one string enum value.
    pub(crate) fn enum_value(&self, v: &EnumValue) -> TokenStream {
        if !self.enabled {
            return quote!();
        }
        let value = &v.value;
        attr(&[quote!(rename = #value)])
    }

    /// The transforms the field attributes name, once per generated module.
    pub(crate) fn support(&self) -> TokenStream {
        if !self.enabled {
            return quote!();
        }
        quote! {
            /// Schema transforms used by the generated `schemars::JsonSchema` derives.
            #[cfg(feature = "schemars")]
            #[doc(hidden)]
            pub mod __schemars {
                use schemars::Schema;
                use serde_json::{Map, Value};

                fn is_null_type(v: &Value) -> bool {
                    v.as_object().is_some_and(|m| m.len() == 1 && m.get("type").is_some_and(|t| t == "null"))
                }

                /// Removes the `null` that schemars adds for an `Option<T>` property that is
                /// optional but not nullable: `{"type": [T, "null"]}` loses `"null"`, and
                /// `{"anyOf": [S, {"type": "null"}], ..rest}` becomes `S` with `rest` merged in.
                pub fn not_null(schema: &mut Schema) {
                    let Some(obj) = schema.as_object_mut() else { return };
                    if let Some(Value::Array(types)) = obj.get_mut("type") {
                        types.retain(|t| t != "null");
                        if types.len() == 1 {
                            let t = types.remove(0);
                            obj.insert("type".into(), t);
                        }
                        return;
                    }
                    let branches = match obj.get("anyOf") {
                        Some(Value::Array(b)) if b.len() == 2 && b.iter().any(is_null_type) => b.clone(),
                        _ => return,
                    };
                    let Some(inner) = branches.into_iter().find(|b| !is_null_type(b)) else { return };
                    let mut rest: Map<String, Value> = obj.clone();
                    rest.remove("anyOf");
                    let merged = match inner {
                        Value::Object(mut m) if rest.keys().all(|k| !m.contains_key(k)) => {
                            m.extend(rest);
                            Value::Object(m)
                        }
                        inner if rest.is_empty() => inner,
                        inner => {
                            let mut m = Map::new();
                            m.insert("allOf".into(), Value::Array(vec![inner, Value::Object(rest)]));
                            Value::Object(m)
                        }
                    };
                    if let Ok(s) = Schema::try_from(merged) {
                        *schema = s;
                    }
                }

                /// Makes a property also accept `null`: `{"anyOf": [S, {"type": "null"}]}`.
                pub fn nullable(schema: &mut Schema) {
                    if schema.as_bool() == Some(true) {
                        return;
                    }
                    let inner = schema.clone().to_value();
                    let mut m = Map::new();
                    m.insert("anyOf".into(), Value::Array(vec![inner, serde_json::json!({"type": "null"})]));
                    *schema = Schema::from(m);
                }

                /// Merges keywords (a JSON object's text) into the element schema of an array
                /// property (found beside a `null` branch too).
                pub struct Items(pub &'static str);

                impl schemars::transform::Transform for Items {
                    fn transform(&mut self, schema: &mut Schema) {
                        let Ok(Value::Object(kw)) = serde_json::from_str::<Value>(self.0) else { return };
                        fn visit(v: &mut Value, kw: &Map<String, Value>) {
                            let Some(obj) = v.as_object_mut() else { return };
                            if let Some(items) = obj.get_mut("items") {
                                if items == &Value::Bool(true) {
                                    *items = Value::Object(Map::new());
                                }
                                if let Some(m) = items.as_object_mut() {
                                    m.extend(kw.clone());
                                }
                                return;
                            }
                            if let Some(Value::Array(branches)) = obj.get_mut("anyOf") {
                                for b in branches {
                                    visit(b, kw);
                                }
                            }
                        }
                        if let Some(obj) = schema.as_object_mut() {
                            let mut v = Value::Object(std::mem::take(obj));
                            visit(&mut v, &kw);
                            if let Value::Object(m) = v {
                                *obj = m;
                            }
                        }
                    }
                }
            }
        }
    }
}
