//! A method file: the methods of a schema that does not mark them itself, declared in a small
//! JSON file beside it (MCP's schema, say, where each request is a type with a `method` const and
//! a `params` property, gathered in unions such as `ClientRequest`).
//!
//! ```json
//! {
//!   "sides": {
//!     "server": {"requests": "ClientRequest", "notifications": "ClientNotification"},
//!     "client": {"requests": "ServerRequest", "notifications": "ServerNotification"}
//!   },
//!   "results": {"tools/call": "CallToolResult", "ping": "EmptyResult"}
//! }
//! ```
//!
//! Each side names the `$defs` types listing the requests and notifications it handles: a union
//! (`anyOf`/`oneOf` of `$ref`s) or one message type. A message type's `method` is the `const` of
//! its `method` property and its params type the type of its `params` property. Every request
//! names its result type under `results`, by method. The sides become the same per-side method
//! modules as ACP's `x-method`/`x-side` marks ([`crate::model::Side`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::error::SchemaError;
use crate::load::Documents;
use crate::model::{Side, TypeSpace};

/// The sides a method file declares, checked against the schema it describes.
///
/// # Errors
///
/// A [`SchemaError`] naming the method file (or the schema type) and what is wrong: the file
/// unreadable or not the shape above, a type it names missing, a message without a `method`
/// const or a params type, a request without a result, or a method listed twice on one side.
pub fn sides(path: &Path, docs: &Documents, space: &TypeSpace) -> Result<Vec<Side>, SchemaError> {
    let file = path.display().to_string();
    let fail = |pointer: &str, keyword: &str, message: String| SchemaError::new(&file, pointer, keyword, message);
    let text = std::fs::read_to_string(path).map_err(|e| fail("", "file", format!("cannot read the method file: {e}")))?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| fail("", "json", format!("not JSON: {e}")))?;
    let Some(declared) = doc.get("sides").and_then(Value::as_object) else {
        return Err(fail("", "sides", "a method file is an object with `sides` (side name → {requests, notifications}) and `results` (method → result type)".into()));
    };
    let results = doc.get("results").and_then(Value::as_object).cloned().unwrap_or_default();
    // The generated name of every type at the root of a `$defs` entry, by its schema name.
    let by_origin: BTreeMap<(&str, &str), &str> = space.types.values().map(|t| ((t.origin.file.as_str(), t.origin.pointer.as_str()), t.name.as_str())).collect();
    let schema_file = docs.files.keys().next().cloned().unwrap_or_default();
    let named = |def: &str| -> Option<String> { by_origin.get(&(schema_file.as_str(), format!("/$defs/{def}").as_str())).map(|n| (*n).to_owned()) };
    let mut marked: BTreeMap<(String, String), (Option<String>, Option<String>)> = BTreeMap::new();
    for (side, lists) in declared {
        for (kind, is_request) in [("requests", true), ("notifications", false)] {
            let Some(union) = lists.get(kind) else { continue };
            let pointer = format!("/sides/{side}/{kind}");
            let Some(union) = union.as_str() else { return Err(fail(&pointer, kind, "must name a `$defs` type".into())) };
            let Some(schema) = docs.get(&schema_file, &format!("/$defs/{union}")) else {
                return Err(fail(&pointer, kind, format!("the schema has no `$defs/{union}`")));
            };
            let branches: Vec<&Value> = match schema.get("anyOf").or_else(|| schema.get("oneOf")).and_then(Value::as_array) {
                Some(b) => b.iter().collect(),
                None => vec![schema],
            };
            for branch in branches {
                let (mfile, mpointer) = match branch.get("$ref").and_then(Value::as_str) {
                    Some(r) => docs.resolve_ref(&schema_file, r).map_err(|e| SchemaError::new(&schema_file, format!("/$defs/{union}"), "$ref", e))?,
                    None => (schema_file.clone(), format!("/$defs/{union}")),
                };
                let message = docs.get(&mfile, &mpointer).cloned().unwrap_or(Value::Null);
                let Some(method) = message.pointer("/properties/method/const").and_then(Value::as_str) else {
                    return Err(SchemaError::new(&mfile, &mpointer, "method", format!("a message listed by `{union}` has no `method` property with a `const`")));
                };
                let params = match message.pointer("/properties/params") {
                    Some(p) => match p.get("$ref").and_then(Value::as_str) {
                        Some(r) => {
                            let (f, ptr) = docs.resolve_ref(&mfile, r).map_err(|e| SchemaError::new(&mfile, &mpointer, "$ref", e))?;
                            by_origin.get(&(f.as_str(), ptr.as_str())).map(|n| (*n).to_owned())
                        }
                        None => by_origin.get(&(mfile.as_str(), format!("{mpointer}/properties/params").as_str())).map(|n| (*n).to_owned()),
                    },
                    None => None,
                };
                let Some(params) = params else {
                    return Err(SchemaError::new(&mfile, &mpointer, "params", format!("`{method}` has no `params` property of a named or object type, so it has no params type")));
                };
                let result = if is_request {
                    let Some(r) = results.get(method).and_then(Value::as_str) else {
                        return Err(fail("/results", "results", format!("the request `{method}` ({side} side) has no result type: add \"{method}\": \"<its result's $defs name>\"")));
                    };
                    let Some(r) = named(r) else { return Err(fail(&format!("/results/{method}"), "results", format!("the schema has no `$defs/{r}`"))) };
                    Some(r)
                } else {
                    None
                };
                if marked.insert((side.clone(), method.to_owned()), (Some(params), result)).is_some() {
                    return Err(fail(&pointer, kind, format!("`{method}` is listed twice on the {side} side")));
                }
            }
        }
    }
    let methods: std::collections::BTreeSet<&str> = marked.keys().map(|(_, m)| m.as_str()).collect();
    if let Some(extra) = results.keys().find(|m| !methods.contains(m.as_str())) {
        return Err(fail(&format!("/results/{extra}"), "results", format!("`{extra}` is not a request of any side")));
    }
    Ok(crate::lower::build_sides(space, marked))
}

#[cfg(test)]
mod tests {
    use crate::Config;

    const SCHEMA: &str = r##"{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {
        "Params": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        "Done": {"type": "object"},
        "GoRequest": {"type": "object", "properties": {"method": {"const": "go"}, "params": {"$ref": "#/$defs/Params"}}, "required": ["method"]},
        "StopRequest": {"type": "object", "properties": {"method": {"const": "stop"}, "params": {"type": "object", "properties": {"why": {"type": "string"}}}}},
        "Ping": {"type": "object", "properties": {"method": {"const": "ping"}}},
        "Requests": {"anyOf": [{"$ref": "#/$defs/GoRequest"}, {"$ref": "#/$defs/StopRequest"}]}
    }}"##;

    /// The first refusal of `methods` over [`SCHEMA`], or the sides as "side: requests / notifications".
    fn run(name: &str, methods: &str) -> Result<Vec<String>, String> {
        let dir = std::env::temp_dir().join(format!("oa-methods-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("p.schema.json"), SCHEMA).unwrap();
        std::fs::write(dir.join("p.methods.json"), methods).unwrap();
        let r = Config::new().schema_dir(dir.join("p.schema.json")).methods_file(dir.join("p.methods.json")).load();
        let _ = std::fs::remove_dir_all(&dir);
        match r {
            Ok((_, space)) => Ok(space
                .sides
                .iter()
                .map(|s| {
                    let req: Vec<String> = s.requests.iter().map(|m| format!("{}({}->{})", m.method, m.params, m.result.as_deref().unwrap_or("?"))).collect();
                    let not: Vec<String> = s.notifications.iter().map(|m| format!("{}({})", m.method, m.params)).collect();
                    format!("{}: {} / {}", s.name, req.join(" "), not.join(" "))
                })
                .collect()),
            Err(e) => Err(e.first().to_string()),
        }
    }

    #[test]
    fn a_method_file_declares_sides_from_unions_with_results_by_method() {
        let sides = run("ok", r#"{"sides": {"server": {"requests": "Requests"}}, "results": {"go": "Done", "stop": "Done"}}"#).unwrap();
        assert_eq!(sides, vec!["server: go(Params->Done) stop(StopRequestParams->Done) / "]);
    }

    #[test]
    fn what_a_method_file_gets_wrong_is_refused_naming_it() {
        let cases = [
            ("noresult", r#"{"sides": {"server": {"requests": "Requests"}}, "results": {"go": "Done"}}"#, "`stop` (server side) has no result type"),
            ("nodef", r#"{"sides": {"server": {"requests": "Nope"}}, "results": {}}"#, "no `$defs/Nope`"),
            ("badresult", r#"{"sides": {"server": {"requests": "Requests"}}, "results": {"go": "Done", "stop": "Gone"}}"#, "no `$defs/Gone`"),
            ("extra", r#"{"sides": {"server": {"requests": "Requests"}}, "results": {"go": "Done", "stop": "Done", "fly": "Done"}}"#, "`fly` is not a request"),
            ("noparams", r#"{"sides": {"server": {"notifications": "Ping"}}}"#, "`ping` has no `params`"),
            ("shape", r#"{"methods": []}"#, "a method file is an object with `sides`"),
            ("json", "{", "not JSON"),
        ];
        for (name, file, says) in cases {
            let e = run(name, file).expect_err(name);
            assert!(e.contains(says), "{name}: {e}");
            assert!(name == "nodef" || name == "noparams" || e.contains("p.methods.json"), "{name}: names the method file: {e}");
        }
    }
}
