//! Sessions from the store: what `session/list` lists and what `session/load` replays.
//!
//! An ACP session is one of the store's conversations (its id is the conversation id). Listing
//! reads the store's conversations page by page, the most recently updated first, keeping those
//! on this agent's runners; loading reads a conversation's turns in order and, for each, the
//! events the store still has between its first and last sequence numbers, and turns them into
//! the `session/update`s the live session sent: the prompt as the user's message, progress as
//! thoughts, approval cards and how they closed, the result as the agent's message.

use std::time::{Duration, UNIX_EPOCH};

use openagents_protocol::acp;
use openagents_sdk::protocol::{RuntimeEvent, ServerEvent};
use openagents_server::store::{ConversationCursor, Store, StoreError};

use super::messages;

/// Sessions per page of `session/list`.
pub const SESSION_PAGE: usize = 50;

/// The most pages of conversations one `session/list` reads looking for sessions in its `cwd`:
/// past them it answers with what it found and a cursor to go on from.
const MAX_PAGES_SCANNED: usize = 20;

/// The most turns `session/load` replays (the newest are kept when there are more).
pub const MAX_LOADED_TURNS: usize = 1000;

/// The most events of one turn `session/load` replays.
const MAX_TURN_EVENTS: usize = 10_000;

/// ACP's opaque cursor for a page of `session/list`: our store's conversation cursor as
/// `<updated_ms>.<id>`.
pub fn encode_cursor(c: &ConversationCursor) -> String {
    format!("{}.{}", c.updated_ms, c.id)
}

/// The cursor [`encode_cursor`] wrote, or `None` for one it did not.
pub fn decode_cursor(text: &str) -> Option<ConversationCursor> {
    let (ms, id) = text.split_once('.')?;
    Some(ConversationCursor { updated_ms: ms.parse().ok()?, id: id.to_owned() })
}

/// `ms` (since the Unix epoch) as RFC 3339 (`2026-12-04T00:31:02.123Z`).
fn rfc3339(ms: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(t).to_string()
}

/// A page of sessions: the conversations after `after` whose runner is one of `runners` and,
/// when `cwd` is given, whose first turn ran there.
///
/// # Errors
///
/// When the store cannot be read.
pub fn list(store: &dyn Store, mut after: Option<ConversationCursor>, cwd: Option<&str>, runners: &[String]) -> Result<acp::ListSessionsResponse, StoreError> {
    let mut sessions = Vec::new();
    for _ in 0..MAX_PAGES_SCANNED {
        let page = store.conversations_page(after.as_ref(), SESSION_PAGE)?;
        let last_page = page.len() < SESSION_PAGE;
        for c in page {
            let c = c.conversation;
            after = Some(ConversationCursor { updated_ms: c.updated_ms, id: c.id.clone() });
            if !runners.contains(&c.runner) {
                continue;
            }
            let Some((_, first)) = store.conversation_turns(&c.id, 0, 1)? else { continue };
            let Some(first) = first.into_iter().next() else { continue };
            if cwd.is_some_and(|w| w != first.start.cwd) {
                continue;
            }
            sessions.push(acp::SessionInfo {
                session_id: c.id,
                cwd: first.start.cwd,
                additional_directories: None,
                title: (!c.title.is_empty()).then_some(c.title),
                updated_at: Some(rfc3339(c.updated_ms)),
                meta: None,
            });
            if sessions.len() == SESSION_PAGE {
                return Ok(acp::ListSessionsResponse { sessions, next_cursor: after.as_ref().map(encode_cursor), meta: None });
            }
        }
        if last_page {
            return Ok(acp::ListSessionsResponse { sessions, next_cursor: None, meta: None });
        }
    }
    Ok(acp::ListSessionsResponse { sessions, next_cursor: after.as_ref().map(encode_cursor), meta: None })
}

/// A stored conversation, as `session/load` replays it.
pub struct History {
    /// The runner of its first turn.
    pub runner: String,
    /// The updates to send, in order.
    pub updates: Vec<acp::SessionUpdate>,
}

/// Conversation `id`'s history, or `None` when the store holds no such conversation.
///
/// # Errors
///
/// When the store cannot be read.
pub fn history(store: &dyn Store, id: &str) -> Result<Option<History>, StoreError> {
    let Some((summary, _)) = store.conversation_turns(id, 0, 0)? else { return Ok(None) };
    let mut turns = Vec::new();
    let mut after = 0;
    loop {
        let Some((_, page)) = store.conversation_turns(id, after, SESSION_PAGE)? else { break };
        let Some(last) = page.last() else { break };
        after = last.start.first_seq;
        turns.extend(page);
        if turns.len() > MAX_LOADED_TURNS {
            turns.drain(..turns.len() - MAX_LOADED_TURNS);
        }
    }
    let mut updates = Vec::new();
    for t in turns {
        let a = &t.start.assignment;
        updates.push(messages::user_message(t.start.task.clone(), format!("{a}:prompt")));
        let mut result_sent = false;
        let mut progress = 0usize;
        if let Some(last) = t.last_seq {
            for stored in store.events_after(t.start.first_seq, last, MAX_TURN_EVENTS, usize::MAX)? {
                let Ok(ev) = serde_json::from_slice::<ServerEvent>(&stored.json) else { continue };
                match ev.event {
                    RuntimeEvent::Text { text } => {
                        let sep = if progress > 0 { " " } else { "" };
                        progress += 1;
                        updates.push(messages::thought(format!("{sep}{text}"), format!("{a}:progress")));
                    }
                    RuntimeEvent::ApprovalRequested { request_id, prompt } => updates.push(messages::approval_card(request_id, super::title(&prompt), prompt)),
                    RuntimeEvent::ApprovalResolved { request_id, approved, .. } => updates.push(messages::card_closed(request_id, approved)),
                    RuntimeEvent::ApprovalDenied { request_id: Some(request_id), .. } => updates.push(messages::card_closed(request_id, false)),
                    RuntimeEvent::TurnCompleted { result } => {
                        updates.push(messages::message(result, format!("{a}:result")));
                        result_sent = true;
                    }
                    _ => {}
                }
            }
        }
        // Its events pruned (or a store that keeps none): the result from the turn's record.
        if !result_sent && let Some(result) = t.result {
            updates.push(messages::message(result, format!("{a}:result")));
        }
    }
    Ok(Some(History { runner: summary.conversation.runner, updates }))
}
