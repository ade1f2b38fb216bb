//! The JSON-RPC 2.0 envelope around ACP's messages, the one layer of the wire ACP's schema does
//! not type. What the host writes is a generated ACP type (`openagents_protocol::acp`) inside a
//! small typed envelope; what it reads is split here into its id, method and the raw JSON of its
//! `params`, `result` or `error`, which then go through the generated exact decoders.

use std::fmt;

use openagents_protocol::acp::{self, agent_side};
use openagents_protocol::rt::{self, RpcMethod};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// The JSON-RPC version every message carries.
const JSONRPC: &str = "2.0";

/// A request of the host's.
#[derive(Serialize)]
struct OutRequest<'a, P> {
    jsonrpc: &'static str,
    id: u64,
    method: &'static str,
    params: &'a P,
}

/// A notification of the host's.
#[derive(Serialize)]
struct OutNotification<'a, P> {
    jsonrpc: &'static str,
    method: &'static str,
    params: &'a P,
}

/// The host's answer to one of the agent's requests.
#[derive(Serialize)]
struct OutResult<'a, R> {
    jsonrpc: &'static str,
    id: &'a acp::RequestId,
    result: &'a R,
}

/// The host's refusal of one of the agent's requests.
#[derive(Serialize)]
struct OutError<'a> {
    jsonrpc: &'static str,
    id: &'a acp::RequestId,
    error: &'a acp::Error2,
}

/// `message` as one line, newline included.
fn line(message: &impl Serialize) -> Vec<u8> {
    // Strings, integers and objects with string keys only: encoding them cannot fail.
    let mut out = serde_json::to_vec(message).unwrap_or_default();
    out.push(b'\n');
    out
}

/// The line of request `M` (an agent-side method) with id `id`.
pub(super) fn request<M: RpcMethod>(id: u64, params: &M::Params) -> Vec<u8>
where
    M::Params: Serialize,
{
    line(&OutRequest { jsonrpc: JSONRPC, id, method: M::NAME, params })
}

/// The line of an agent-side notification.
pub(super) fn notification(n: &agent_side::Notification) -> Vec<u8> {
    match n {
        agent_side::Notification::SessionCancel(params) => line(&OutNotification { jsonrpc: JSONRPC, method: n.method(), params }),
    }
}

/// The line answering the agent's request `id` (of client-side method `M`) with `result`.
pub(super) fn response<M: RpcMethod>(id: &acp::RequestId, result: &M::Result) -> Vec<u8> {
    line(&OutResult { jsonrpc: JSONRPC, id, result })
}

/// The line refusing the agent's request `id` with JSON-RPC error `code`.
pub(super) fn error_response(id: &acp::RequestId, code: i64, message: String) -> Vec<u8> {
    line(&OutError { jsonrpc: JSONRPC, id, error: &acp::Error2 { code: Value::from(code), message, data: None } })
}

/// One JSON-RPC 2.0 message from the agent, its payload still raw JSON text.
#[derive(Debug, PartialEq)]
pub(super) enum Incoming<'a> {
    /// A request: the agent waits for an answer with the same `id`.
    Request { id: acp::RequestId, method: String, params: &'a str },
    /// A notification (no `id`, or a null one).
    Notification { method: String, params: &'a str },
    /// The answer to one of the host's requests: its `result`, or its `error` object.
    Response { id: acp::RequestId, outcome: Result<&'a str, &'a str> },
}

/// The members of a message, each as raw JSON; anything else is skipped (checked for keys given
/// twice like every value).
#[derive(Default)]
struct Members<'a> {
    jsonrpc: Option<&'a RawValue>,
    id: Option<&'a RawValue>,
    method: Option<&'a RawValue>,
    params: Option<&'a RawValue>,
    result: Option<&'a RawValue>,
    error: Option<&'a RawValue>,
}

struct MembersVisitor;

impl<'de> Visitor<'de> for MembersVisitor {
    type Value = Members<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object (a JSON-RPC 2.0 message)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
        let mut m = Members::default();
        while let Some(key) = map.next_key::<rt::Key<'de>>()? {
            let slot = match key.as_str() {
                "jsonrpc" => &mut m.jsonrpc,
                "id" => &mut m.id,
                "method" => &mut m.method,
                "params" => &mut m.params,
                "result" => &mut m.result,
                "error" => &mut m.error,
                _ => {
                    map.next_value::<rt::Skip>()?;
                    continue;
                }
            };
            if slot.is_some() {
                return Err(rt::duplicate(key.as_str()));
            }
            *slot = Some(map.next_value::<&'de RawValue>()?);
        }
        Ok(m)
    }
}

/// Reads one line as a JSON-RPC 2.0 message, or says why it is not one. Exact, as every message
/// from a runner: a member given twice is refused, never read as its last copy (the payload's
/// own members are checked by the generated decoder that reads it).
pub(super) fn parse(bytes: &[u8]) -> Result<Incoming<'_>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not JSON: invalid UTF-8 at byte offset {}", e.valid_up_to()))?;
    let mut de = serde_json::Deserializer::from_str(text);
    let m = de.deserialize_any(MembersVisitor).and_then(|m| de.end().map(|()| m)).map_err(|e| {
        let what = rt::describe_json_error(&e);
        if e.is_data() { what } else { format!("not JSON: {what}") }
    })?;
    if m.jsonrpc.and_then(|v| serde_json::from_str::<String>(v.get()).ok()).as_deref() != Some(JSONRPC) {
        return Err("`jsonrpc` must be \"2.0\"".into());
    }
    let id = match m.id {
        Some(raw) => match serde_json::from_str::<Value>(raw.get()) {
            Ok(id) if id.is_string() || id.is_i64() || id.is_u64() || id.is_null() => Some(id),
            _ => return Err("`id` must be a string, an integer or null".into()),
        },
        None => None,
    };
    match (m.method, id) {
        (Some(method), id) => {
            let method = serde_json::from_str::<String>(method.get()).map_err(|_| "`method` must be a string".to_owned())?;
            // Absent params are read as `null`, which no ACP method's params accept.
            let params = m.params.map_or("null", RawValue::get);
            Ok(match id {
                Some(id) if !id.is_null() => Incoming::Request { id, method, params },
                _ => Incoming::Notification { method, params },
            })
        }
        (None, Some(id)) => match (m.result, m.error) {
            (Some(result), _) => Ok(Incoming::Response { id, outcome: Ok(result.get()) }),
            (None, Some(error)) => Ok(Incoming::Response { id, outcome: Err(error.get()) }),
            (None, None) => Err("a response needs `result` or `error`".into()),
        },
        (None, None) => Err("a message needs `method` or `id`".into()),
    }
}

/// The `sessionUpdate` kind of a `session/update`'s params when it is a kind ACP v1 does not
/// know. An agent newer than the schema may send such updates; the host skips them, while a
/// known kind that does not match the schema is a protocol error.
pub(super) fn unknown_update_kind(params: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Params {
        update: Update,
    }
    #[derive(Deserialize)]
    struct Update {
        #[serde(rename = "sessionUpdate")]
        kind: String,
    }
    let kind = serde_json::from_str::<Params>(params).ok()?.update.kind;
    (!acp::SessionUpdate::TAGS.contains(&kind.as_str())).then_some(kind)
}

/// The `stopReason` of a `session/prompt` result when it is one ACP v1 does not know (an agent
/// newer than the schema): the turn fails saying so, as for any stop reason but `end_turn`.
pub(super) fn unknown_stop_reason(result: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Result {
        #[serde(rename = "stopReason")]
        stop_reason: String,
    }
    let reason = serde_json::from_str::<Result>(result).ok()?.stop_reason;
    (!acp::StopReason::VALUES.contains(&reason.as_str())).then_some(reason)
}
