//! Exact decoding of what clients send outside the generated request types: the result of a
//! WebSocket frontend's answer to an approval request (the core's connection takes the answer
//! and gives it to the approval bridge's audience, [`crate::bridge`]). Requests, refused or not,
//! are read by the `openagents-rpc` core and the generated `decode` ([`crate::jsonrpc`]). Both go
//! through the generated decoders' own rules ([`Wire`]): a key given twice, at any depth, is
//! refused, never resolved by "last one wins".

use openagents_protocol::ApprovalReply;
use openagents_protocol::rt::{self, DocumentError, Validate, Wire};
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

/// The result of a frontend's answer to an approval request, decoded and validated exactly as
/// an [`ApprovalReply`]: `None` (a denial, for the bridge) for text that is not one JSON document,
/// that has a key given twice at any depth, or that is no valid reply. Nothing of it is built as
/// a tree: the text is walked once keeping only each object's keys, then decoded straight into
/// the reply (never explained), so a huge answer costs about its size, whoever sends it.
pub fn approval_reply(result: &RawValue) -> Option<ApprovalReply> {
    exact_document(result.get().as_bytes()).ok()?;
    let mut de = serde_json::Deserializer::from_str(result.get());
    ApprovalReply::decode(&mut de).and_then(|r| de.end().map(|()| r)).ok().filter(|r| r.validate().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_replies_are_read_exactly() {
        let reply = |approved: bool, answer: Option<&str>| Some(ApprovalReply { approved, answer: answer.map(str::to_owned) });
        let cases: &[(&str, Option<ApprovalReply>)] = &[
            (r#"{"approved":true}"#, reply(true, None)),
            (r#"{"approved":false,"answer":"no"}"#, reply(false, Some("no"))),
            (r#"{"approved":false,"approved":true}"#, None),
            (r#"{"approved":true,"answer":"a","answer":"b"}"#, None),
            (r#"{"approved":true,"note":{"a":1,"a":2}}"#, None),
            (r#"{"approved":true,"note":"\ud800"}"#, None),
            (r#"{"approved":"yes"}"#, None),
            (r#"true"#, None),
        ];
        for (text, want) in cases {
            let raw = RawValue::from_string((*text).to_owned()).expect("JSON text");
            assert_eq!(&approval_reply(&raw), want, "{text}");
        }
    }

    #[test]
    fn documents_with_a_repeated_key_are_refused() {
        assert!(exact_document(br#"{"a":{"b":1,"b":2}}"#).is_err());
        assert!(exact_document(br#"{"a":[{"b":1},{"b":2}],"b":{"c":1,"d":{"c":2}}}"#).is_ok());
        assert!(exact_document(br#"{"a":[{"b":1,"c":{"d":1,"d":2}}]}"#).is_err());
        assert!(matches!(exact_document(br#"{"a":"\ud800"}"#), Err(DocumentError::NotJson(_))));
    }
}
