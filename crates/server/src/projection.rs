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

/// A stdio notification line: `{"event": …}`.
pub fn notification_line(ev: &ServerEvent) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(br#"{"event":"#);
    out.extend_from_slice(&event_json(ev));
    out.push(b'}');
    out
}

/// Whether this is the runtime's last event.
pub fn is_final(ev: &ServerEvent) -> bool {
    matches!(ev.event, RuntimeEvent::ShuttingDown {})
}

/// A WebSocket notification: `{"jsonrpc":"2.0","method":"frontend.v2.event","params":…}`.
pub fn frontend_notification(ev: &ServerEvent) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","method":"frontend.v2.event","params":"#);
    out.extend_from_slice(&event_json(ev));
    out.push(b'}');
    out
}
