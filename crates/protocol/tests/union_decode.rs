//! The generated one-pass decoders of the tagged unions (`RpcRequest`, `Event`, `RuntimeEvent`)
//! against the decoding they replace: buffer the object into a map (`rt::buffer_object`), then
//! take the fields out (`from_object`). On every golden vector of those types, with its members
//! in several orders (tag first, tag last, reversed) and with each of many mutations (a key given
//! twice at the top or below, unknown members, a tag that is no string, bad syntax, a lone
//! surrogate or nesting past the parser's limit after the point where decoding could already
//! fail, truncation), both must accept the same documents as equal values, and refuse the
//! rest the same way:
//!
//! * a refusal the buffered decoder calls a data error is a data error;
//! * one it calls bad syntax is bad syntax, or else the document is not JSON to
//!   `rt::parse_value` (so every caller that explains a refusal says "not JSON" either way);
//! * `rt::parse_validated` gives the same verdict, violations (pointer and keyword) and "not
//!   JSON" message as the buffered decoder followed by the same explaining.

use std::path::Path;

use openagents_protocol::rt::{self, DocumentError, SchemaCheck, Validate, Wire};
use openagents_protocol::{Event, RpcRequest, RuntimeEvent};
use serde_json::Value;

type Buffered<T> = fn(serde_json::Map<String, Value>) -> Result<T, serde_json::Error>;

fn old_decode<T>(text: &str, from_object: Buffered<T>) -> Result<T, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = rt::buffer_object(&mut de).and_then(|m| from_object(m).map_err(serde::de::Error::custom))?;
    de.end()?;
    Ok(v)
}

fn new_decode<T: Wire>(text: &str) -> Result<T, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = T::decode(&mut de)?;
    de.end()?;
    Ok(v)
}

/// `parse_validated` as it was: the buffered decode, the checks, and the same explaining.
fn old_parse_validated<T: Validate + SchemaCheck>(text: &str, from_object: Buffered<T>) -> Result<T, DocumentError> {
    match old_decode(text, from_object) {
        Ok(v) => v.validate().map(|()| v).map_err(DocumentError::Invalid),
        Err(e) => Err(rt::explain::<T>(text.as_bytes(), &e)),
    }
}

fn verdict<T>(r: &Result<T, DocumentError>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(DocumentError::NotJson(m)) => format!("not JSON: {m}"),
        Err(DocumentError::Invalid(v)) => v
            .iter()
            // Where a document that cannot be represented is refused (and so the pointer) is
            // where each decoder meets the first problem, which may differ: a key twice before a
            // bad value, say.
            .map(|v| if v.keyword == "type" && v.message.starts_with("cannot be represented") { "type (cannot be represented)".to_owned() } else { format!("{} {} {}", v.pointer, v.keyword, v.message) })
            .collect::<Vec<_>>()
            .join("; "),
    }
}

fn compare<T>(text: &str, from_object: Buffered<T>) -> bool
where
    T: Wire + Validate + SchemaCheck + PartialEq + std::fmt::Debug,
{
    let (old, new) = (old_decode(text, from_object), new_decode::<T>(text));
    match (&old, &new) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "different values for {text}"),
        (Err(a), Err(b)) if a.is_data() => assert!(b.is_data(), "a data error ({a}) became {b} for {text}"),
        (Err(a), Err(b)) => assert!(
            b.is_syntax() || b.is_eof() || rt::parse_value(text.as_bytes()).is_err(),
            "bad syntax ({a}) became a data error ({b}) in a document that parses: {text}"
        ),
        _ => panic!("the decoders disagree on {text}: buffered {old:?}, one pass {new:?}"),
    }
    let (old_pv, new_pv) = (old_parse_validated(text, from_object), rt::parse_validated::<T>(text.as_bytes()));
    assert_eq!(verdict(&old_pv), verdict(&new_pv), "parse_validated differs for {text}");
    old.is_ok()
}

/// The text of an object with these members (values as JSON text), in this order.
fn object(members: &[(String, String)]) -> String {
    let body: Vec<String> = members.iter().map(|(k, v)| format!("{}:{v}", serde_json::to_string(k).expect("a key"))).collect();
    format!("{{{}}}", body.join(","))
}

/// The document with each of its members in several orders, and each order with mutations.
fn variants(doc: &Value, tag: &str) -> Vec<String> {
    let Some(obj) = doc.as_object() else { return vec![doc.to_string()] };
    let members: Vec<(String, String)> = obj.iter().map(|(k, v)| (k.clone(), v.to_string())).collect();
    let mut orders = vec![members.clone()];
    let (tagged, rest): (Vec<_>, Vec<_>) = members.iter().cloned().partition(|(k, _)| k == tag);
    orders.push(tagged.iter().chain(&rest).cloned().collect());
    orders.push(rest.iter().chain(&tagged).cloned().collect());
    orders.push(members.iter().rev().cloned().collect());
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let mut out = Vec::new();
    for order in orders {
        out.push(object(&order));
        let with = |extra: (&str, &str), at_end: bool| {
            let mut m = order.clone();
            let e = (extra.0.to_owned(), extra.1.to_owned());
            if at_end { m.push(e) } else { m.insert(0, e) }
            object(&m)
        };
        for at_end in [false, true] {
            out.push(with(("zz_unknown", "{\"a\":1}"), at_end));
            out.push(with(("zz_unknown", "{\"a\":1,\"a\":2}"), at_end));
            out.push(with(("zz_unknown", "\"\\ud800\""), at_end));
            out.push(with(("zz_unknown", &deep), at_end));
            out.push(with((tag, "\"text\""), at_end));
            out.push(with((tag, "5"), at_end));
        }
        for (i, (k, v)) in order.iter().enumerate() {
            // The member given twice, right after itself and at the end.
            let mut m = order.clone();
            m.insert(i + 1, (k.clone(), v.clone()));
            out.push(object(&m));
            let mut m = order.clone();
            m.push((k.clone(), v.clone()));
            out.push(object(&m));
            // Its value replaced: by a number, by an object with a key twice, by bad strings.
            for bad in ["5", "null", "{\"a\":1,\"a\":1}", "[1,{\"b\":2,\"b\":2}]", "\"\\ud800\"", deep.as_str()] {
                let mut m = order.clone();
                m[i].1 = bad.to_owned();
                out.push(object(&m));
            }
            // A key twice inside an object value.
            if let Some(Value::Object(inner)) = obj.get(k)
                && let Some((ik, iv)) = inner.iter().next()
            {
                let mut im: Vec<(String, String)> = inner.iter().map(|(a, b)| (a.clone(), b.to_string())).collect();
                im.push((ik.clone(), iv.to_string()));
                let mut m = order.clone();
                m[i].1 = object(&im);
                out.push(object(&m));
                let mut im2: Vec<(String, String)> = inner.iter().map(|(a, b)| (a.clone(), b.to_string())).collect();
                im2.push(("zz_inner".into(), "{\"c\":1,\"c\":2}".into()));
                let mut m = order.clone();
                m[i].1 = object(&im2);
                out.push(object(&m));
            }
        }
        // Bad syntax at the end, truncation at every fifth byte, trailing data.
        let text = object(&order);
        out.push(format!("{},}}", &text[..text.len() - 1]));
        out.push(format!("{text} x"));
        for cut in (1..text.len()).step_by(5) {
            if text.is_char_boundary(cut) {
                out.push(text[..cut].to_owned());
            }
        }
    }
    out
}

fn run<T>(file: &str, tag: &str, from_object: Buffered<T>, extra: &[&str])
where
    T: Wire + Validate + SchemaCheck + PartialEq + std::fmt::Debug,
{
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file: Value = serde_json::from_str(&text).expect("a vector file is JSON");
    let mut docs: Vec<Value> = ["valid", "invalid"].iter().flat_map(|k| file[*k].as_array().cloned().unwrap_or_default()).map(|c| c["document"].clone()).collect();
    docs.extend(extra.iter().map(|t| serde_json::from_str(t).expect("an extra document is JSON")));
    let (mut accepted, mut refused) = (0, 0);
    for doc in &docs {
        for v in variants(doc, tag) {
            if compare(&v, from_object) { accepted += 1 } else { refused += 1 }
        }
    }
    // Both sides of the comparison are exercised.
    assert!(accepted > docs.len() && refused > docs.len(), "{accepted} accepted, {refused} refused");
}

#[test]
fn rpc_requests_decode_as_the_buffered_decoder_did() {
    run::<RpcRequest>("RpcRequest.json", "method", RpcRequest::from_object, &[
        r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#,
        r#"{"jsonrpc":"2.0","id":"a","method":"submit","params":{"task":"t","agent":{"runner":"echo"}}}"#,
        r#"{"params":{"task":"t","agent":{"runner":"echo"}},"id":null,"method":"submit"}"#,
        r#"{"id":1.0,"method":"interrupt","params":null}"#,
        r#"{"id":18446744073709551616,"method":"status"}"#,
    ]);
}

#[test]
fn runner_events_decode_as_the_buffered_decoder_did() {
    run::<Event>("Event.json", "type", Event::from_object, &[r#"{"type":"text","text":"a\"b\\c\u00e9"}"#]);
}

#[test]
fn runtime_events_decode_as_the_buffered_decoder_did() {
    // An extensible union: an unknown kind is kept as it arrived, in the same member order.
    run::<RuntimeEvent>("RuntimeEvent.json", "type", RuntimeEvent::from_object, &[
        r#"{"type":"from_the_future","z":1,"a":{"b":[1,2.5,"x"]},"m":null}"#,
        r#"{"z":1,"type":"from_the_future","a":2}"#,
    ]);
}
