//! Exact decoding of what clients send outside the generated request types: a WebSocket
//! frontend's JSON-RPC *responses* (its answers to approval requests). Requests, refused or not,
//! are read by [`crate::jsonrpc`]. Both go through the generated decoders' own rules ([`Wire`]):
//! a key given twice, at any depth, is refused, never resolved by "last one wins".

use std::collections::BTreeSet;
use std::fmt;

use openagents_protocol::ApprovalReply;
use openagents_protocol::rt::{self, DocumentError, Key};
use serde::de::{self, MapAccess, Visitor};
use serde_json::{Map, Value};

/// Parses one JSON document exactly: a key given twice anywhere is an error, as in every
/// generated decoder.
///
/// # Errors
///
/// As [`rt::parse_value_exact`]: [`DocumentError::NotJson`] for bytes that are not one JSON
/// document, [`DocumentError::Invalid`] for a repeated key (naming the key, never its values).
pub fn exact_value(bytes: &[u8]) -> Result<Value, DocumentError> {
    rt::parse_value_exact(bytes)
}

/// The top level of a JSON object whose members may not all decode exactly: every member (the
/// first copy of a repeated one), and the names given more than once. Nested values are read
/// as plain values; this is only for explaining a refusal, never for acting on a message.
#[derive(Debug, Clone, Default)]
pub struct Envelope {
    /// The members, each with its first value.
    pub members: Map<String, Value>,
    /// The member names given more than once.
    pub repeated: BTreeSet<String>,
}

impl Envelope {
    /// A member, unless it was given more than once (then neither copy is trusted).
    pub fn unique(&self, name: &str) -> Option<&Value> {
        if self.repeated.contains(name) { None } else { self.members.get(name) }
    }
}

struct EnvelopeVisitor;

impl<'de> Visitor<'de> for EnvelopeVisitor {
    type Value = Envelope;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
        let mut out = Envelope::default();
        while let Some(k) = map.next_key::<Key<'de>>()? {
            let value: Value = map.next_value()?;
            if out.members.contains_key(k.as_str()) {
                out.repeated.insert(k.into_string());
            } else {
                out.members.insert(k.into_string(), value);
            }
        }
        Ok(out)
    }
}

/// Reads the top level of a JSON object (see [`Envelope`]); `None` when `bytes` are not one
/// JSON object.
pub fn envelope(bytes: &[u8]) -> Option<Envelope> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let env = de::Deserializer::deserialize_map(&mut de, EnvelopeVisitor).ok()?;
    de.end().ok()?;
    Some(env)
}

/// Whether a client's message is a JSON-RPC response (to a server-to-client request): an `id`
/// with a `result` or an `error`, and no `method`. Returns the id and the answer: an
/// [`ApprovalReply`] decoded and validated exactly, or `Err(())` for an error response or a
/// result that does not decode (a key given twice anywhere included), which counts as a denial.
///
/// A message whose `id` is given twice is not a response: neither copy is believed, and it is
/// refused as a request (with a null id). A message that is not JSON is not a response either.
#[allow(clippy::result_unit_err)]
pub fn response(bytes: &[u8]) -> Option<(String, Result<ApprovalReply, ()>)> {
    match exact_value(bytes) {
        Ok(v) => {
            let o = v.as_object()?;
            if o.contains_key("method") {
                return None;
            }
            let id = o.get("id")?.as_str()?.to_owned();
            if let Some(result) = o.get("result") {
                // `result` decoded exactly, so its encoding has each key once.
                let reply = rt::parse_validated::<ApprovalReply>(result.to_string().as_bytes()).map_err(|_| ());
                return Some((id, reply));
            }
            o.get("error").map(|_| (id, Err(())))
        }
        Err(_) => {
            // Not exact: a repeated key somewhere. When it is still recognisably a response to
            // one request, the answer is unreadable, so it is a denial.
            let env = envelope(bytes)?;
            if env.members.contains_key("method") || !(env.members.contains_key("result") || env.members.contains_key("error")) {
                return None;
            }
            let id = env.unique("id")?.as_str()?.to_owned();
            Some((id, Err(())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_read_exactly() {
        let ok = |approved: bool| Some(("approval-1".to_owned(), Ok(ApprovalReply { approved, answer: None })));
        let cases: &[(&str, Option<(String, Result<ApprovalReply, ()>)>)] = &[
            (r#"{"jsonrpc":"2.0","id":"approval-1","result":{"approved":true}}"#, ok(true)),
            (r#"{"jsonrpc":"2.0","id":"approval-1","result":{"approved":false}}"#, ok(false)),
            (r#"{"jsonrpc":"2.0","id":"approval-1","result":{"approved":false,"approved":true}}"#, Some(("approval-1".into(), Err(())))),
            (r#"{"jsonrpc":"2.0","id":"approval-1","result":{"approved":true},"result":{"approved":true}}"#, Some(("approval-1".into(), Err(())))),
            (r#"{"jsonrpc":"2.0","id":"approval-1","id":"approval-2","result":{"approved":true}}"#, None),
            (r#"{"jsonrpc":"2.0","id":"approval-1","error":{"code":1,"message":"no"}}"#, Some(("approval-1".into(), Err(())))),
            (r#"{"jsonrpc":"2.0","id":"x","method":"status"}"#, None),
            (r#"{"jsonrpc":"2.0","id":"x","method":"status","method":"status","result":{}}"#, None),
            ("not json", None),
        ];
        for (text, want) in cases {
            assert_eq!(&response(text.as_bytes()), want, "{text}");
        }
    }

    #[test]
    fn envelopes_name_repeated_members() {
        let env = envelope(br#"{"id":1,"id":2,"method":"status","params":{"a":1,"a":2}}"#).unwrap();
        assert_eq!(env.unique("id"), None);
        assert_eq!(env.unique("method"), Some(&Value::String("status".into())));
        assert!(env.repeated.contains("id") && !env.repeated.contains("a"));
        assert!(envelope(b"[1]").is_none());
        assert!(exact_value(br#"{"a":{"b":1,"b":2}}"#).is_err());
        assert!(exact_value(br#"{"a":{"b":1,"c":2}}"#).is_ok());
    }
}
