//! Exact decoding of what clients send outside the generated request types: a WebSocket
//! frontend's JSON-RPC *responses* (its answers to approval requests). Requests, refused or not,
//! are read by the `openagents-rpc` core and the generated `decode` ([`crate::jsonrpc`]). Both go
//! through the generated decoders' own rules ([`Wire`]): a key given twice, at any depth, is
//! refused, never resolved by "last one wins".

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use openagents_protocol::ApprovalReply;
use openagents_protocol::rt::{self, DocumentError, Key, Validate, Wire};
use serde::de::{self, MapAccess, Visitor};
use serde_json::value::RawValue;

/// Checks that `bytes` are one JSON document read exactly — a key given twice anywhere is an
/// error, as in every generated decoder — without building it.
///
/// # Errors
///
/// As [`rt::skim_exact`]: [`DocumentError::NotJson`] for bytes that are not one JSON document,
/// [`DocumentError::Invalid`] for a repeated key (naming the key, never its values).
pub fn exact_document(bytes: &[u8]) -> Result<(), DocumentError> {
    rt::skim_exact(bytes)
}

/// The top level of a JSON object, each member kept as its raw text (nothing of it is built),
/// and the names given more than once.
#[derive(Debug, Default)]
pub struct Envelope<'a> {
    /// The members, each with its first value's text.
    pub members: BTreeMap<String, &'a RawValue>,
    /// The member names given more than once.
    pub repeated: BTreeSet<String>,
}

impl<'a> Envelope<'a> {
    /// A member, unless it was given more than once (then neither copy is trusted).
    pub fn unique(&self, name: &str) -> Option<&'a RawValue> {
        if self.repeated.contains(name) { None } else { self.members.get(name).copied() }
    }
}

struct EnvelopeVisitor;

impl<'de> Visitor<'de> for EnvelopeVisitor {
    type Value = Envelope<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope<'de>, A::Error> {
        let mut out = Envelope::default();
        while let Some(k) = map.next_key::<Key<'de>>()? {
            let value: &'de RawValue = map.next_value()?;
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
pub fn envelope(bytes: &[u8]) -> Option<Envelope<'_>> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let env = de::Deserializer::deserialize_map(&mut de, EnvelopeVisitor).ok()?;
    de.end().ok()?;
    Some(env)
}

/// Whether a client's message is a JSON-RPC response (to a server-to-client request): an `id`
/// with a `result` or an `error`, and no `method`. Returns the id and the answer: an
/// [`ApprovalReply`] decoded and validated exactly, or `Err(())` for an error response, a
/// result that does not decode, or a message with a key given twice anywhere, which counts as a
/// denial.
///
/// A message whose `id` is given twice is not a response: neither copy is believed, and it is
/// refused as a request (with a null id). A message that is not JSON is not a response either.
/// Nothing of the message is built as a tree: its members are read as raw text, the whole is
/// checked for repeated keys by a walk that keeps only each object's keys, and `result` is
/// decoded straight into [`ApprovalReply`] (never explained), so a huge answer costs about its
/// size, whoever sends it.
#[allow(clippy::result_unit_err)]
pub fn response(bytes: &[u8]) -> Option<(String, Result<ApprovalReply, ()>)> {
    let env = envelope(bytes)?;
    if env.members.contains_key("method") || !(env.members.contains_key("result") || env.members.contains_key("error")) {
        return None;
    }
    let id = serde_json::from_str::<String>(env.unique("id")?.get()).ok()?;
    match exact_document(bytes) {
        Ok(()) => {}
        // Not JSON after all (a lone surrogate, which the envelope's reading lets pass).
        Err(DocumentError::NotJson(_)) => return None,
        // A repeated key somewhere: still recognisably a response to one request, whose answer
        // is unreadable, so it is a denial.
        Err(DocumentError::Invalid(_)) => return Some((id, Err(()))),
    }
    let Some(result) = env.unique("result") else { return Some((id, Err(()))) };
    let mut de = serde_json::Deserializer::from_str(result.get());
    let reply = ApprovalReply::decode(&mut de).and_then(|r| de.end().map(|()| r)).ok().filter(|r| r.validate().is_ok()).ok_or(());
    Some((id, reply))
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
            (r#"{"jsonrpc":"2.0","id":"approval-1","result":{"approved":true,"note":"\ud800"}}"#, None),
            (r#"{"jsonrpc":"2.0","id":"approval-1","result":{"approved":true},"extra":{"a":1,"a":1}}"#, Some(("approval-1".into(), Err(())))),
        ];
        for (text, want) in cases {
            assert_eq!(&response(text.as_bytes()), want, "{text}");
        }
    }

    #[test]
    fn envelopes_name_repeated_members() {
        let env = envelope(br#"{"id":1,"id":2,"method":"status","params":{"a":1,"a":2}}"#).unwrap();
        assert!(env.unique("id").is_none());
        assert_eq!(env.unique("method").map(RawValue::get), Some("\"status\""));
        assert!(env.repeated.contains("id") && !env.repeated.contains("a"));
        assert!(envelope(b"[1]").is_none());
        assert!(exact_document(br#"{"a":{"b":1,"b":2}}"#).is_err());
        assert!(exact_document(br#"{"a":[{"b":1},{"b":2}],"b":{"c":1,"d":{"c":2}}}"#).is_ok());
        assert!(exact_document(br#"{"a":[{"b":1,"c":{"d":1,"d":2}}]}"#).is_err());
        assert!(matches!(exact_document(br#"{"a":"\ud800"}"#), Err(DocumentError::NotJson(_))));
    }
}
