//! The store of a runtime that keeps nothing past its process: the newest turns and
//! conversations in bounded maps, no events (the event hub's replay buffer holds those).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;

use super::{AgentSession, ConversationCursor, ConversationRecord, ConversationSummary, MEMORY_STORE_TURNS, Outcome, Record, Store, StoreError, StoredEvent, TurnRecord, restarted_error, title_of};

#[derive(Default)]
struct Held {
    /// By the sequence number of their `turn_started`, oldest first.
    turns: BTreeMap<i64, TurnRecord>,
    conversations: HashMap<String, ConversationRecord>,
    /// The ACP session opened for a conversation, by conversation id (forgotten with it).
    agent_sessions: HashMap<String, AgentSession>,
    /// Conversation ids, oldest created first (which one to forget first).
    conversation_order: VecDeque<String>,
    last_seq: i64,
}

/// Turns and conversations in memory, at most [`MEMORY_STORE_TURNS`] of each; events are not
/// kept. What `--store memory` runs on.
#[derive(Default)]
pub struct MemoryStore {
    held: Mutex<Held>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Store for MemoryStore {
    fn describe(&self) -> String {
        "memory".into()
    }

    fn durable(&self) -> bool {
        false
    }

    fn write(&self, batch: &[Record<'_>]) -> Result<(), StoreError> {
        let mut held = self.held();
        for record in batch {
            match record {
                Record::Event { seq, .. } => held.last_seq = held.last_seq.max(*seq),
                Record::TurnStarted(start) => {
                    held.last_seq = held.last_seq.max(start.first_seq);
                    held.turns.insert(start.first_seq, TurnRecord { start: (*start).clone(), outcome: "running".into(), result: None, error: None, ended_ms: None, last_seq: None });
                    while held.turns.len() > MEMORY_STORE_TURNS {
                        held.turns.pop_first();
                    }
                    if let Some(c) = held.conversations.get_mut(&start.conversation) {
                        c.updated_ms = start.started_ms;
                    } else {
                        let c = ConversationRecord { id: start.conversation.clone(), runner: start.runner.clone(), title: title_of(&start.task), created_ms: start.started_ms, updated_ms: start.started_ms };
                        held.conversations.insert(c.id.clone(), c);
                        held.conversation_order.push_back(start.conversation.clone());
                        while held.conversation_order.len() > MEMORY_STORE_TURNS {
                            if let Some(old) = held.conversation_order.pop_front() {
                                held.conversations.remove(&old);
                                held.agent_sessions.remove(&old);
                            }
                        }
                    }
                }
                Record::TurnEnded(end) => {
                    held.last_seq = held.last_seq.max(end.last_seq);
                    if let Some(t) = held.turns.get_mut(&end.first_seq) {
                        t.outcome = end.outcome.as_str().into();
                        t.result.clone_from(&end.result);
                        t.error.clone_from(&end.error);
                        t.ended_ms = Some(end.ended_ms);
                        t.last_seq = Some(end.last_seq);
                    }
                }
                Record::AgentSession(a) => {
                    if held.conversations.contains_key(&a.conversation) {
                        held.agent_sessions.insert(a.conversation.clone(), (*a).clone());
                    }
                }
            }
        }
        Ok(())
    }

    fn last_seq(&self) -> Result<i64, StoreError> {
        Ok(self.held().last_seq)
    }

    fn events_after(&self, _after: i64, _through: i64, _limit: usize, _max_bytes: usize) -> Result<Vec<StoredEvent>, StoreError> {
        Ok(Vec::new())
    }

    fn prune(&self, _keep: u64) -> Result<u64, StoreError> {
        Ok(0)
    }

    fn prune_older_than(&self, _cutoff_ms: i64, _limit: usize) -> Result<u64, StoreError> {
        Ok(0)
    }

    fn close_running_turns(&self, now_ms: i64) -> Result<Vec<TurnRecord>, StoreError> {
        let mut held = self.held();
        let last = held.last_seq;
        let mut closed = Vec::new();
        for t in held.turns.values_mut().filter(|t| t.outcome == "running") {
            t.outcome = Outcome::Failed.as_str().into();
            t.error = Some(restarted_error());
            t.ended_ms = Some(now_ms);
            t.last_seq = Some(last.max(t.start.first_seq));
            closed.push(t.clone());
        }
        Ok(closed)
    }

    fn turns(&self, limit: usize) -> Result<Vec<TurnRecord>, StoreError> {
        Ok(self.held().turns.values().rev().take(limit).cloned().collect())
    }

    fn conversations(&self, limit: usize) -> Result<Vec<ConversationRecord>, StoreError> {
        let held = self.held();
        let mut all: Vec<_> = held.conversations.values().cloned().collect();
        all.sort_by(|a, b| b.updated_ms.cmp(&a.updated_ms).then_with(|| a.id.cmp(&b.id)));
        all.truncate(limit);
        Ok(all)
    }

    fn agent_session(&self, conversation: &str) -> Result<Option<AgentSession>, StoreError> {
        Ok(self.held().agent_sessions.get(conversation).cloned())
    }

    fn conversations_page(&self, after: Option<&ConversationCursor>, limit: usize) -> Result<Vec<ConversationSummary>, StoreError> {
        let held = self.held();
        let mut page: Vec<&ConversationRecord> = held.conversations.values().filter(|c| after.is_none_or(|a| a.precedes(c))).collect();
        page.sort_by(|a, b| b.updated_ms.cmp(&a.updated_ms).then_with(|| a.id.cmp(&b.id)));
        page.truncate(limit);
        Ok(page.into_iter().map(|c| ConversationSummary { conversation: c.clone(), turns: held.turns.values().filter(|t| t.start.conversation == c.id).count() as u64 }).collect())
    }

    fn conversation_turns(&self, id: &str, after_seq: i64, limit: usize) -> Result<Option<(ConversationSummary, Vec<TurnRecord>)>, StoreError> {
        let held = self.held();
        let Some(conversation) = held.conversations.get(id) else { return Ok(None) };
        let mine = || held.turns.values().filter(|t| t.start.conversation == id);
        let summary = ConversationSummary { conversation: conversation.clone(), turns: mine().count() as u64 };
        Ok(Some((summary, mine().filter(|t| t.start.first_seq > after_seq).take(limit).cloned().collect())))
    }
}
