//! The OpenRPC 1.3 emitter: the method union as an OpenRPC document — every method with its
//! params (by name) and result, the error codes with their JSON-RPC `rpc_code`, every named type
//! under `components/schemas`, and the events the runtime pushes under the `x-events`
//! extension. Built from the model alone; the schemas in it are printed back from the model, so
//! what a client generator reads is what the Rust validators enforce.
//!
//! A runtime serves it as the result of `rpc.discover`, the method OpenRPC reserves for that.

use serde_json::{Map, Number, Value, json};

use crate::model::*;

/// The OpenRPC specification version the document follows.
pub const OPENRPC_VERSION: &str = "1.3.2";

/// The root type holding the pushed events (its tagged-union property lists their kinds).
pub const EVENTS_ROOT: &str = "ServerEvent";

/// Where a component schema lives in the document.
pub fn schema_ref(name: &str) -> String {
    format!("#/components/schemas/{name}")
}

/// The OpenRPC document for `space`; `digest` is the schema digest it is stamped with.
pub fn document(space: &TypeSpace, digest: &str) -> Value {
    let p = Printer { space };
    let version = space.constants.get("PROTOCOL_VERSION").and_then(|c| c.value.as_str()).unwrap_or("0.0.0").to_owned();
    let errors: &[ErrorCode] = space.errors.as_ref().map_or(&[], |s| s.codes.as_slice());
    let mut methods = Vec::new();
    if let Some(ms) = &space.methods
        && let Some(TypeKind::Union(u)) = space.types.get(&ms.union).map(|t| &t.kind)
    {
        for v in &u.variants {
            methods.push(p.method(v, &ms.params_field, errors));
        }
    }
    let mut info = Map::new();
    let service = space.methods.as_ref().map(|m| &m.service);
    info.insert("title".into(), json!(service.map_or("JSON-RPC service", |s| s.title.as_str())));
    if let Some(d) = service.and_then(|s| s.description.as_deref()) {
        info.insert("description".into(), json!(d));
    }
    info.insert("version".into(), json!(version));
    if let Some(l) = service.and_then(|s| s.license.as_deref()) {
        info.insert("license".into(), json!({"name": l}));
    }
    info.insert("x-schema-digest".into(), json!(digest));
    let mut components = Map::new();
    let schemas: Map<String, Value> = space.types.values().map(|t| (t.name.clone(), p.type_schema(t))).collect();
    components.insert("schemas".into(), Value::Object(schemas));
    let error_objects: Map<String, Value> = errors
        .iter()
        .map(|e| {
            let message = e.description.as_deref().map(first_sentence).unwrap_or_else(|| e.value.clone());
            let mut data = Map::new();
            data.insert("code".into(), json!(e.value));
            data.insert("retryable".into(), json!(e.retryable));
            (e.value.clone(), json!({"code": e.rpc_code, "message": message, "data": data}))
        })
        .collect();
    components.insert("errors".into(), Value::Object(error_objects));
    let mut doc = Map::new();
    doc.insert("openrpc".into(), json!(OPENRPC_VERSION));
    doc.insert("info".into(), Value::Object(info));
    doc.insert("methods".into(), Value::Array(methods));
    doc.insert("components".into(), Value::Object(components));
    if let Some(events) = p.events() {
        doc.insert("x-events".into(), events);
    }
    Value::Object(doc)
}

fn first_sentence(text: &str) -> String {
    match text.find(". ") {
        Some(i) => text[..=i].to_owned(),
        None => text.to_owned(),
    }
}

fn num(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        Value::Number(Number::from(f as i64))
    } else {
        Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

fn type_value(t: Types) -> Option<Value> {
    if t == Types::ALL {
        return None;
    }
    let names = t.names();
    Some(if names.len() == 1 { json!(names[0]) } else { json!(names) })
}

struct Printer<'a> {
    space: &'a TypeSpace,
}

impl Printer<'_> {
    fn method(&self, v: &Variant, params_field: &str, errors: &[ErrorCode]) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), json!(v.tag_value));
        if let Some(d) = &v.description {
            m.insert("summary".into(), json!(first_sentence(d)));
            m.insert("description".into(), json!(d));
        }
        m.insert("paramStructure".into(), json!("by-name"));
        let mut params = Vec::new();
        if let Some(field) = v.fields.iter().find(|f| f.name == params_field) {
            match self.struct_of(&field.node) {
                Some(s) => {
                    for f in &s.fields {
                        let mut d = Map::new();
                        d.insert("name".into(), json!(f.name));
                        if let Some(desc) = &f.node.description {
                            d.insert("description".into(), json!(desc));
                        }
                        d.insert("required".into(), json!(f.required));
                        d.insert("schema".into(), self.node_schema(&f.node));
                        params.push(Value::Object(d));
                    }
                }
                // Params that may be any object: by name, none declared.
                None if self.free_form(&field.node) => {}
                None => {
                    m.insert("paramStructure".into(), json!("by-position"));
                    params.push(json!({"name": params_field, "required": field.required, "schema": self.node_schema(&field.node)}));
                }
            }
        }
        m.insert("params".into(), Value::Array(params));
        if let Some(result) = &v.result {
            let name = result.reference.clone().unwrap_or_else(|| format!("{}Result", v.name));
            let mut r = Map::new();
            r.insert("name".into(), json!(name));
            if let Some(d) = &result.description {
                r.insert("description".into(), json!(d));
            }
            r.insert("schema".into(), self.node_schema(result));
            m.insert("result".into(), Value::Object(r));
        }
        let refs: Vec<Value> = errors.iter().map(|e| json!({"$ref": format!("#/components/errors/{}", e.value)})).collect();
        m.insert("errors".into(), Value::Array(refs));
        Value::Object(m)
    }

    /// `node` through the aliases it names, and the named type other than an alias it stands for
    /// (`None`: it names none, or one that does not exist, or aliases nest past 32).
    fn through_aliases<'n>(&'n self, node: &'n Node) -> (&'n Node, Option<&'n TypeKind>) {
        let mut node = node;
        for _ in 0..32 {
            let Some(name) = node.reference.as_ref().or(node.object.as_ref()) else { return (node, None) };
            match self.space.types.get(name).map(|t| &t.kind) {
                Some(TypeKind::Alias(inner)) => node = inner,
                kind => return (node, kind),
            }
        }
        (node, None)
    }

    /// Whether `node` (through aliases) is a free-form object: any members.
    fn free_form(&self, node: &Node) -> bool {
        let (node, kind) = self.through_aliases(node);
        let repr = match &node.repr {
            Repr::Nullable(r) => r.as_ref(),
            r => r,
        };
        kind.is_none() && *repr == Repr::Object
    }

    /// The struct a params node stands for, through references and aliases.
    fn struct_of<'n>(&'n self, node: &'n Node) -> Option<&'n StructDef> {
        match self.through_aliases(node).1 {
            Some(TypeKind::Struct(s)) => Some(s),
            _ => None,
        }
    }

    fn events(&self) -> Option<Value> {
        let root = self.space.types.get(EVENTS_ROOT)?;
        let TypeKind::Struct(s) = &root.kind else { return None };
        let mut kinds = Vec::new();
        let mut union_name = None;
        for f in &s.fields {
            let Some(name) = &f.node.reference else { continue };
            if let Some(NamedType { kind: TypeKind::Union(u), .. }) = self.space.types.get(name) {
                union_name = Some(name.clone());
                for v in &u.variants {
                    let mut k = Map::new();
                    k.insert("name".into(), json!(v.tag_value));
                    if let Some(d) = &v.description {
                        k.insert("description".into(), json!(d));
                    }
                    k.insert("schema".into(), self.variant_schema(u, v));
                    kinds.push(Value::Object(k));
                }
                break;
            }
        }
        let mut e = Map::new();
        // The schema's own words: how a server delivers them is the server's to say.
        if let Some(d) = &root.description {
            e.insert("description".into(), json!(d));
        }
        e.insert("schema".into(), json!({"$ref": schema_ref(&root.name)}));
        if let Some(u) = union_name {
            e.insert("kindSchema".into(), json!({"$ref": schema_ref(&u)}));
        }
        e.insert("kinds".into(), Value::Array(kinds));
        Some(Value::Object(e))
    }

    fn type_schema(&self, t: &NamedType) -> Value {
        let mut m = match &t.kind {
            TypeKind::Struct(s) => {
                let mut m = Map::new();
                m.insert("type".into(), if s.nullable { json!(["object", "null"]) } else { json!("object") });
                self.object_rules(&mut m, &s.fields, &s.additional, None);
                m
            }
            TypeKind::Union(u) => {
                let mut m = Map::new();
                m.insert("type".into(), json!("object"));
                m.insert("oneOf".into(), Value::Array(u.variants.iter().map(|v| self.variant_schema(u, v)).collect()));
                if u.extensible {
                    m.insert("x-extensible".into(), json!(true));
                }
                m
            }
            TypeKind::StringEnum(e) => {
                let mut m = Map::new();
                m.insert("type".into(), json!("string"));
                m.insert("enum".into(), Value::Array(e.values.iter().map(|v| json!(v.value)).collect()));
                if e.extensible {
                    m.insert("x-extensible".into(), json!(true));
                }
                let errors = self.space.errors.as_ref().filter(|s| s.enum_name == t.name);
                let docs: Map<String, Value> = e
                    .values
                    .iter()
                    .map(|v| {
                        let mut d = Map::new();
                        if let Some(desc) = &v.description {
                            d.insert("description".into(), json!(desc));
                        }
                        if let Some(c) = errors.and_then(|s| s.get(&v.value)) {
                            d.insert("retryable".into(), json!(c.retryable));
                            d.insert("rpc_code".into(), json!(c.rpc_code));
                        }
                        (v.value.clone(), Value::Object(d))
                    })
                    .collect();
                if docs.values().any(|d| d.as_object().is_some_and(|o| !o.is_empty())) {
                    m.insert("x-enum".into(), Value::Object(docs));
                }
                m
            }
            TypeKind::Alias(n) => match self.node_schema(n) {
                Value::Object(m) => m,
                other => return other,
            },
        };
        let mut out = Map::new();
        out.insert("title".into(), json!(t.name));
        if let Some(d) = &t.description {
            out.insert("description".into(), json!(d));
        }
        for (k, v) in std::mem::take(&mut m) {
            if k != "description" || !out.contains_key("description") {
                out.insert(k, v);
            }
        }
        Value::Object(out)
    }

    fn variant_schema(&self, u: &UnionDef, v: &Variant) -> Value {
        let mut m = Map::new();
        m.insert("title".into(), json!(v.name));
        if let Some(d) = &v.description {
            m.insert("description".into(), json!(d));
        }
        m.insert("type".into(), json!("object"));
        self.object_rules(&mut m, &v.fields, &v.additional, Some((&u.tag, &v.tag_value)));
        if let Some(r) = &v.result {
            m.insert("x-result".into(), self.node_schema(r));
        }
        Value::Object(m)
    }

    fn object_rules(&self, m: &mut Map<String, Value>, fields: &[Field], additional: &Additional, tag: Option<(&String, &String)>) {
        let mut required = Vec::new();
        let mut props = Map::new();
        if let Some((tag, value)) = tag {
            required.push(json!(tag));
            props.insert(tag.clone(), json!({"const": value}));
        }
        for f in fields {
            if f.required {
                required.push(json!(f.name));
            }
            props.insert(f.name.clone(), self.node_schema(&f.node));
        }
        if !required.is_empty() {
            m.insert("required".into(), Value::Array(required));
        }
        m.insert("properties".into(), Value::Object(props));
        match additional {
            Additional::Forbidden => {
                m.insert("additionalProperties".into(), json!(false));
            }
            Additional::Any => {}
            Additional::Schema(n) => {
                m.insert("additionalProperties".into(), self.node_schema(n));
            }
        }
    }

    /// The JSON Schema for the schema used at one place.
    fn node_schema(&self, node: &Node) -> Value {
        if node.types == Types::NONE && node.reference.is_none() {
            return json!(false);
        }
        let mut m = Map::new();
        if let Some(d) = &node.description {
            m.insert("description".into(), json!(d));
        }
        if let Some(name) = &node.reference {
            let target = json!({"$ref": schema_ref(name)});
            let target_types = self.named_types(name);
            if node.types.contains(Types::NULL) && !target_types.contains(Types::NULL) {
                // `oneOf: [{$ref}, {type: null}]` lowered into one nullable place.
                m.insert("oneOf".into(), json!([target, {"type": "null"}]));
            } else {
                m.insert("$ref".into(), json!(schema_ref(name)));
            }
            if let Some(d) = &node.default {
                m.insert("default".into(), d.clone());
            }
            return Value::Object(m);
        }
        if let Some(t) = type_value(node.types) {
            m.insert("type".into(), t);
        }
        if let Some(lits) = &node.literals {
            if node.is_const {
                m.insert("const".into(), lits.first().cloned().unwrap_or(Value::Null));
            } else {
                m.insert("enum".into(), Value::Array(lits.clone()));
            }
        }
        let s = &node.string;
        if let Some(v) = s.min_length {
            m.insert("minLength".into(), json!(v));
        }
        if let Some(v) = s.max_length {
            m.insert("maxLength".into(), json!(v));
        }
        if let Some(p) = s.pattern.and_then(|i| self.space.patterns.get(i)) {
            m.insert("pattern".into(), json!(p.source));
        }
        let n = &node.number;
        for (k, v) in [("minimum", n.minimum), ("maximum", n.maximum), ("exclusiveMinimum", n.exclusive_minimum), ("exclusiveMaximum", n.exclusive_maximum), ("multipleOf", n.multiple_of)] {
            if let Some(v) = v {
                m.insert(k.into(), num(v));
            }
        }
        if let Some(items) = &node.array.items {
            m.insert("items".into(), self.node_schema(items));
        }
        if let Some(v) = node.array.min_items {
            m.insert("minItems".into(), json!(v));
        }
        if let Some(v) = node.array.max_items {
            m.insert("maxItems".into(), json!(v));
        }
        if node.array.unique_items {
            m.insert("uniqueItems".into(), json!(true));
        }
        if let Some(name) = &node.object {
            let own = node.types.without_null() == Types::OBJECT && node.literals.is_none();
            match self.space.types.get(name).map(|t| &t.kind) {
                Some(TypeKind::Struct(_)) if own && node.applied.is_empty() && node.unevaluated.is_none() => {
                    // The object's own named struct says everything (nullability included).
                    let mut r = Map::new();
                    if let Some(d) = &node.description {
                        r.insert("description".into(), json!(d));
                    }
                    r.insert("$ref".into(), json!(schema_ref(name)));
                    return Value::Object(r);
                }
                Some(TypeKind::Struct(_)) if own => {
                    // Its struct, and beside it the applicators below (2020-12 reads a `$ref`
                    // beside other keywords as one more of them).
                    m.insert("$ref".into(), json!(schema_ref(name)));
                }
                Some(TypeKind::Struct(st)) => self.object_rules(&mut m, &st.fields, &st.additional, None),
                _ => {}
            }
        }
        // The applicators and `unevaluatedProperties` of a checked value, as the schema has them.
        let a = &node.applied;
        for (k, list) in [("allOf", &a.all_of), ("anyOf", &a.any_of), ("oneOf", &a.one_of)] {
            if !list.is_empty() {
                m.insert(k.into(), Value::Array(list.iter().map(|n| self.node_schema(n)).collect()));
            }
        }
        if let Some(n) = &a.not {
            m.insert("not".into(), self.node_schema(n));
        }
        if let Some(c) = &a.conditional {
            m.insert("if".into(), self.node_schema(&c.condition));
            for (k, n) in [("then", &c.then), ("else", &c.otherwise)] {
                if let Some(n) = n {
                    m.insert(k.into(), self.node_schema(n));
                }
            }
        }
        if let Some(u) = &node.unevaluated {
            m.insert("unevaluatedProperties".into(), self.node_schema(&u.schema));
        }
        if let Some(d) = &node.default {
            m.insert("default".into(), d.clone());
        }
        if m.is_empty() { json!(true) } else { Value::Object(m) }
    }

    fn named_types(&self, name: &str) -> Types {
        match self.space.types.get(name).map(|t| &t.kind) {
            Some(TypeKind::Struct(s)) if s.nullable => Types::OBJECT.union(Types::NULL),
            Some(TypeKind::Struct(_)) | Some(TypeKind::Union(_)) => Types::OBJECT,
            Some(TypeKind::StringEnum(_)) => Types::STRING,
            Some(TypeKind::Alias(n)) => n.types,
            None => Types::ALL,
        }
    }
}
