//! The JSON-RPC 2.0 framing of ACP's messages (ACP's schema describes the params and results,
//! not the envelope around them): one incoming message kept as raw members borrowed from its
//! line, and the messages we write, whose params and results are ACP's generated types.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// One message from the client, each member its raw JSON text (`None` when absent; a `null`
/// member is `Some("null")`): `params` is decoded by its method, nothing else is built.
#[derive(Debug, Default, Deserialize)]
pub struct Envelope<'a> {
    /// `"2.0"`.
    #[serde(default, borrow, deserialize_with = "raw")]
    pub jsonrpc: Option<&'a RawValue>,
    /// The request's id.
    #[serde(default, borrow, deserialize_with = "raw")]
    pub id: Option<&'a RawValue>,
    /// The method.
    #[serde(default, borrow, deserialize_with = "raw")]
    pub method: Option<&'a RawValue>,
    /// Its params.
    #[serde(default, borrow, deserialize_with = "raw")]
    pub params: Option<&'a RawValue>,
    /// A response's result.
    #[serde(default, borrow, deserialize_with = "raw")]
    pub result: Option<&'a RawValue>,
    /// A response's error.
    #[serde(default, borrow, deserialize_with = "raw")]
    pub error: Option<&'a RawValue>,
}

fn raw<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&'de RawValue>::deserialize(d).map(Some)
}

/// `raw` as a value when it is a scalar (`null`, a boolean, a number or a string); an array or
/// an object is `None`, never built.
pub fn scalar(raw: &RawValue) -> Option<Value> {
    let text = raw.get().trim_start();
    if text.starts_with('{') || text.starts_with('[') {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// A JSON-RPC error object: `data` is our typed error (`RuntimeSubmitError`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorObject {
    /// The JSON-RPC code.
    pub code: i64,
    /// What happened.
    pub message: String,
    /// The typed error.
    pub data: Value,
}

/// The `code` of a JSON-RPC error object a client sent (only what we read).
#[derive(Debug, Deserialize)]
pub struct ErrorCodeOnly {
    /// The code, when it is a number.
    #[serde(default)]
    pub code: Option<serde_json::Number>,
}

/// A message we write.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Outgoing {
    /// A result.
    Result {
        /// `"2.0"`.
        jsonrpc: JsonRpc,
        /// The request's id.
        id: Value,
        /// An ACP result type, encoded.
        result: Value,
    },
    /// An error.
    Error {
        /// `"2.0"`.
        jsonrpc: JsonRpc,
        /// The request's id (`null` when it could not be read).
        id: Value,
        /// The error.
        error: ErrorObject,
    },
    /// A request of ours (`session/request_permission`).
    Request {
        /// `"2.0"`.
        jsonrpc: JsonRpc,
        /// Our id.
        id: i64,
        /// The method.
        method: &'static str,
        /// An ACP params type, encoded.
        params: Value,
    },
    /// A notification (`session/update`, `$/cancel_request`).
    Notification {
        /// `"2.0"`.
        jsonrpc: JsonRpc,
        /// The method.
        method: &'static str,
        /// An ACP params type, encoded.
        params: Value,
    },
}

/// The JSON-RPC version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum JsonRpc {
    /// `"2.0"`.
    #[serde(rename = "2.0")]
    V2,
}

impl Outgoing {
    /// The message as one line of JSON (without the newline).
    pub fn to_line(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_else(|e| format!(r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32603,"message":"cannot encode a message: {e}","data":null}}}}"#).into_bytes())
    }
}

/// `v` as a JSON value (a generated type always encodes).
pub fn value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_keeps_members_as_raw_text() {
        let line = r#"{"jsonrpc":"2.0","id":null,"method":"m","params":{"big":[1,2,3]},"extra":{"a":1}}"#;
        let e: Envelope<'_> = serde_json::from_str(line).unwrap();
        assert_eq!(e.id.map(RawValue::get), Some("null"));
        assert_eq!(e.params.map(RawValue::get), Some(r#"{"big":[1,2,3]}"#));
        assert!(e.result.is_none() && e.error.is_none());
        assert_eq!(e.method.and_then(scalar), Some(Value::String("m".into())));
        assert_eq!(e.params.and_then(scalar), None);
    }
}
