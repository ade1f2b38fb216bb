//! What ACP v1 does not know, told from what breaks it: an agent newer than the schema may send a
//! `session/update` of a kind, or end a turn with a stop reason, that ACP v1 lacks; the host
//! skips the first and fails the turn saying which for the second, while a known kind or reason
//! that does not match the schema is a protocol error. (The JSON-RPC envelope around ACP's
//! messages is the openagents-rpc core's: see `conn`.)

use openagents_protocol::acp;
use serde::Deserialize;

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
