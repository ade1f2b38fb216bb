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

/// The splices above exist so an event encoded once is shared by every subscriber (BENCHMARKS.md,
/// SSE fan-out); these tests hold them to the generated wire types they stand for.
#[cfg(test)]
mod tests {
    use super::*;
    use openagents_protocol::{ErrorCode, FrontendEventNotification, RpcNotification, RuntimeSubmitError, rt};

    fn samples() -> Vec<ServerEvent> {
        let events = vec![
            RuntimeEvent::TurnStarted { assignment: "a1".into(), conversation: "c1".into(), runner: "echo".into() },
            RuntimeEvent::Text { text: "line \"one\"\n\u{1b}[2K <b>two</b> 😀".into() },
            RuntimeEvent::TurnCompleted { result: "done".into() },
            RuntimeEvent::TurnFailed { error: RuntimeSubmitError { code: ErrorCode::RunnerFailed, message: "exit 3".into(), retryable: true, details: None } },
            RuntimeEvent::ApprovalRequested { request_id: "approval-1".into(), prompt: "rm -rf target?".into() },
            RuntimeEvent::ApprovalResolved { request_id: "approval-1".into(), approved: true, by: "ci".into() },
            RuntimeEvent::ApprovalDenied { request_id: None, prompt: "p".into(), reason: "nobody".into() },
            RuntimeEvent::Lagged { missed: 3 },
            RuntimeEvent::Gap { since: 9, resumed_at: 4 },
            RuntimeEvent::ShuttingDown {},
        ];
        events.into_iter().enumerate().map(|(i, event)| ServerEvent { seq: i as i64 + 1, time_ms: Some(1_700_000_000_000), event }).collect()
    }

    #[test]
    fn every_splice_decodes_as_its_generated_type() {
        for ev in samples() {
            let json = event_json(&ev);
            let back: ServerEvent = rt::parse_validated(&json).unwrap_or_else(|e| panic!("{}: {e:?}", String::from_utf8_lossy(&json)));
            assert_eq!(back, ev);
            let line = notification_line(&ev);
            let n: RpcNotification = rt::parse_validated(&line).unwrap_or_else(|e| panic!("{}: {e:?}", String::from_utf8_lossy(&line)));
            assert_eq!(n.event, ev);
            let frame = frontend_notification(&ev);
            let f: FrontendEventNotification = rt::parse_validated(&frame).unwrap_or_else(|e| panic!("{}: {e:?}", String::from_utf8_lossy(&frame)));
            assert_eq!(f.params, ev);
            let sse = sse_frame(ev.seq, &json);
            let text = String::from_utf8(sse).expect("UTF-8");
            let data = text.strip_prefix(&format!("id: {}\ndata: ", ev.seq)).and_then(|t| t.strip_suffix("\n\n")).expect("one id and one data line");
            assert!(!data.contains('\n'), "one data line: {text:?}");
            assert_eq!(rt::parse_validated::<ServerEvent>(data.as_bytes()).expect("a ServerEvent"), ev);
        }
    }
}
