//! The one projection of events onto the wire: every transport (`openagents run --json`,
//! stdio, SSE, WebSocket) turns the generated event type into JSON here.

use openagents_protocol::{RuntimeEvent, ServerEvent};

/// The event as one line of JSON.
///
/// The `match` names every kind the schema defines, with no catch-all for known kinds, so a new
/// kind in the schema is a compile error here until it is projected.
pub fn event_json(ev: &ServerEvent) -> Vec<u8> {
    match &ev.event {
        RuntimeEvent::TurnStarted { .. }
        | RuntimeEvent::Text { .. }
        | RuntimeEvent::TurnCompleted { .. }
        | RuntimeEvent::TurnFailed { .. }
        | RuntimeEvent::ApprovalRequested { .. }
        | RuntimeEvent::ApprovalResolved { .. }
        | RuntimeEvent::ApprovalDenied { .. }
        | RuntimeEvent::Lagged { .. }
        | RuntimeEvent::Gap { .. }
        | RuntimeEvent::ShuttingDown {}
        | RuntimeEvent::Unknown(_) => serde_json::to_vec(ev).unwrap_or_default(),
    }
}

/// A server-sent event: `id: <seq>\ndata: <json>\n\n` (JSON holds no raw newline).
pub fn sse_frame(seq: i64, json: &[u8]) -> Vec<u8> {
    let id = seq.to_string();
    let mut out = Vec::with_capacity(4 + id.len() + 7 + json.len() + 2);
    out.extend_from_slice(b"id: ");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(json);
    out.extend_from_slice(b"\n\n");
    out
}

/// A stdio notification line: `{"event": …}`.
pub fn notification_line(ev: &ServerEvent) -> Vec<u8> {
    notification_line_of(&event_json(ev))
}

/// [`notification_line`] around an event already encoded by [`event_json`].
pub fn notification_line_of(json: &[u8]) -> Vec<u8> {
    wrap(br#"{"event":"#, json)
}

fn wrap(prefix: &[u8], json: &[u8]) -> Vec<u8> {
    // Room for the closing brace and the newline a line writer adds.
    let mut out = Vec::with_capacity(prefix.len() + json.len() + 2);
    out.extend_from_slice(prefix);
    out.extend_from_slice(json);
    out.push(b'}');
    out
}

/// Whether this is the runtime's last event.
pub fn is_final(ev: &ServerEvent) -> bool {
    matches!(ev.event, RuntimeEvent::ShuttingDown {})
}

/// A WebSocket notification: `{"jsonrpc":"2.0","method":"frontend.v2.event","params":…}`.
pub fn frontend_notification(ev: &ServerEvent) -> Vec<u8> {
    frontend_notification_of(&event_json(ev))
}

/// [`frontend_notification`] around an event already encoded by [`event_json`].
pub fn frontend_notification_of(json: &[u8]) -> Vec<u8> {
    wrap(br#"{"jsonrpc":"2.0","method":"frontend.v2.event","params":"#, json)
}
