//! The `conversations` and `conversation` methods: what the store keeps of past turns, read a
//! page at a time and turned into the generated result types. Cursors are opaque to clients:
//! `UPDATED_MS.ID` after a conversation (the listing is newest first, ties by id), `FIRST_SEQ`
//! after a turn (a conversation's turns are in the order they ran).

use openagents_protocol::{
    ConversationParams, ConversationResult, ConversationSummary, ConversationsParams, ConversationsResult, ErrorCode,
    HISTORY_DEFAULT_PAGE, HISTORY_MAX_PAGE, HISTORY_PAGE_MAX_BYTES, RuntimeSubmitError, TurnOutcome, TurnSummary,
};

use crate::agent::error;
use crate::store::{self, ConversationCursor, Store, StoreError, TurnRecord};

/// The page size `limit` asks for: [`HISTORY_DEFAULT_PAGE`] when absent, never more than
/// [`HISTORY_MAX_PAGE`] (the schema refuses more before this is reached) nor less than one.
fn page_size(limit: Option<i64>) -> usize {
    limit.map_or(HISTORY_DEFAULT_PAGE, |l| usize::try_from(l).unwrap_or(1)).clamp(1, HISTORY_MAX_PAGE)
}

fn bad_cursor(cursor: &str) -> RuntimeSubmitError {
    let shown: String = cursor.chars().take(64).collect();
    error(ErrorCode::InvalidParams, format!("`cursor` {shown:?} is not one this runtime gave: pass a page's `next` unchanged, or leave `cursor` out for the first page"))
}

fn store_error(e: &StoreError) -> RuntimeSubmitError {
    // The store's path is the operator's business, not a client's.
    tracing::error!("{e}");
    error(ErrorCode::Internal, "the runtime's store could not be read; the runtime's log has the reason")
}

fn conversation_cursor(cursor: &str) -> Result<ConversationCursor, RuntimeSubmitError> {
    let (updated, id) = cursor.split_once('.').ok_or_else(|| bad_cursor(cursor))?;
    let updated_ms = updated.parse::<i64>().ok().filter(|_| updated.bytes().all(|b| b.is_ascii_digit())).ok_or_else(|| bad_cursor(cursor))?;
    if id.is_empty() {
        return Err(bad_cursor(cursor));
    }
    Ok(ConversationCursor { updated_ms, id: id.to_owned() })
}

fn turn_cursor(cursor: &str) -> Result<i64, RuntimeSubmitError> {
    cursor.parse::<i64>().ok().filter(|seq| *seq >= 0 && cursor.bytes().all(|b| b.is_ascii_digit())).ok_or_else(|| bad_cursor(cursor))
}

fn summary(s: store::ConversationSummary) -> ConversationSummary {
    let c = s.conversation;
    ConversationSummary {
        id: c.id,
        runner: c.runner,
        title: c.title,
        turns: i64::try_from(s.turns).unwrap_or(i64::MAX),
        created_at_ms: c.created_ms.max(0),
        updated_at_ms: c.updated_ms.max(0),
    }
}

fn turn(t: TurnRecord) -> TurnSummary {
    // The store wrote the error from a `RuntimeSubmitError`; one it cannot give back is left out
    // rather than failing the page.
    let error = t.error.as_deref().and_then(|json| openagents_protocol::rt::parse_validated::<RuntimeSubmitError>(json.as_bytes()).ok());
    TurnSummary {
        assignment: t.start.assignment,
        runner: t.start.runner,
        task: t.start.task,
        outcome: TurnOutcome::from_wire::<serde_json::Error>(&t.outcome).unwrap_or(TurnOutcome::Unknown(t.outcome)),
        result: t.result,
        error,
        started_at_ms: t.start.started_ms.max(0),
        finished_at_ms: t.ended_ms.map(|ms| ms.max(0)),
        first_seq: t.start.first_seq,
        last_seq: t.last_seq,
    }
}

/// A page of conversations, the most recently updated first.
///
/// # Errors
///
/// `invalid_params` for a cursor this runtime did not give; `internal` when the store cannot be
/// read.
pub fn conversations(store: &dyn Store, params: Option<ConversationsParams>) -> Result<ConversationsResult, RuntimeSubmitError> {
    let (limit, cursor) = params.map_or((None, None), |p| (p.limit, p.cursor));
    let limit = page_size(limit);
    let after = cursor.as_deref().map(conversation_cursor).transpose()?;
    // One more than the page, to know whether another follows.
    let mut page = store.conversations_page(after.as_ref(), limit + 1).map_err(|e| store_error(&e))?;
    let more = page.len() > limit;
    page.truncate(limit);
    let next = if more { page.last().map(|s| format!("{}.{}", s.conversation.updated_ms, s.conversation.id)) } else { None };
    Ok(ConversationsResult { conversations: page.into_iter().map(summary).collect(), next })
}

/// A conversation and a page of its turns, oldest first; the page stops before it would pass
/// [`HISTORY_PAGE_MAX_BYTES`] of JSON (holding one turn at least).
///
/// # Errors
///
/// `conversation_not_found` for an id the store does not hold; `invalid_params` for a cursor
/// this runtime did not give; `internal` when the store cannot be read.
pub fn conversation(store: &dyn Store, params: ConversationParams) -> Result<ConversationResult, RuntimeSubmitError> {
    let limit = page_size(params.limit);
    let after = params.cursor.as_deref().map(turn_cursor).transpose()?.unwrap_or(0);
    let Some((conversation, records)) = store.conversation_turns(&params.id, after, limit + 1).map_err(|e| store_error(&e))? else {
        return Err(error(ErrorCode::ConversationNotFound, format!("this runtime's store holds no conversation `{}`; list the ones it holds with `conversations`", params.id)));
    };
    let mut more = records.len() > limit;
    let mut turns = Vec::with_capacity(records.len().min(limit));
    let mut bytes = 0usize;
    for record in records.into_iter().take(limit) {
        let t = turn(record);
        let size = serde_json::to_vec(&t).map_or(0, |v| v.len() + 1);
        if !turns.is_empty() && bytes + size > HISTORY_PAGE_MAX_BYTES {
            more = true;
            break;
        }
        bytes += size;
        turns.push(t);
    }
    let next = if more { turns.last().map(|t| t.first_seq.to_string()) } else { None };
    Ok(ConversationResult { conversation: summary(conversation), turns, next })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_this_runtime_gives_are_read_back_and_others_are_refused() {
        assert_eq!(conversation_cursor("1700000000000.conv.a:b").ok(), Some(ConversationCursor { updated_ms: 1_700_000_000_000, id: "conv.a:b".into() }));
        for bad in ["", ".x", "12.", "x.y", "-1.a", "+1.a", "1e3.a", "12"] {
            assert!(conversation_cursor(bad).is_err(), "{bad:?}");
        }
        assert_eq!(turn_cursor("42").ok(), Some(42));
        for bad in ["", "-1", "+1", "4.2", "x", "99999999999999999999"] {
            let e = turn_cursor(bad).expect_err(bad);
            assert_eq!(e.code, ErrorCode::InvalidParams, "{bad:?}");
        }
    }

    #[test]
    fn page_sizes_default_and_stay_within_the_maximum() {
        assert_eq!(page_size(None), HISTORY_DEFAULT_PAGE);
        assert_eq!(page_size(Some(1)), 1);
        assert_eq!(page_size(Some(HISTORY_MAX_PAGE as i64)), HISTORY_MAX_PAGE);
        assert_eq!(page_size(Some(HISTORY_MAX_PAGE as i64 + 1)), HISTORY_MAX_PAGE);
        assert_eq!(page_size(Some(0)), 1);
    }
}
