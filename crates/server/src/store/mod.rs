//! Where the runtime keeps what happened: every published event (its sequence number, time and
//! JSON), every turn (assignment, conversation, runner, task, outcome, result or error, timings,
//! first and last sequence number) and every conversation (id, runner, title, and the ACP
//! session an agent runner opened for it).
//!
//! Two stores implement [`Store`]: [`MemoryStore`] keeps turns and conversations in bounded
//! maps and no events (the event hub's replay buffer is all there is, and a restart forgets
//! everything), and [`SqliteStore`] writes all of it to an embedded SQLite database, so a
//! restarted runtime continues the sequence and serves resumes from it. The event hub
//! ([`crate::events::EventHub::with_store`]) is the only writer: it batches records into one
//! [`Store::write`] call per group commit.

mod block;
mod memory;
mod postgres;
mod sqlite;
#[doc(hidden)]
pub mod vectors;

pub use memory::MemoryStore;
pub use self::postgres::{CONNECT_TIMEOUT, POSTGRES_SCHEMA_VERSION, PostgresStore, RECONNECT_FIRST, RECONNECT_MAX, SEND_TIMEOUT};
pub use sqlite::{SCHEMA_VERSION, SqliteStore, age_events_for_test};

use std::path::{Path, PathBuf};

/// The error code a turn the store shows as running at start is closed with: the process that
/// ran it stopped (killed, crashed, the machine went down) before the turn ended.
pub const RUNTIME_RESTARTED: &str = "runtime_restarted";

/// The message of a turn closed at start (the `runtime_restarted` error's).
pub const RUNTIME_RESTARTED_MESSAGE: &str = "the runtime stopped while the turn ran; it was closed when the runtime started again";

/// How many turns and conversations a [`MemoryStore`] keeps (the oldest go first).
pub const MEMORY_STORE_TURNS: usize = 1024;

/// How many events the SQLite store keeps unless told otherwise (`--retain-events`).
pub const DEFAULT_RETAIN_EVENTS: u64 = 1_000_000;

/// How many days of events the SQLite store keeps unless told otherwise (`--retain-days`).
pub const DEFAULT_RETAIN_DAYS: u64 = 30;

/// The longest `--retain-days` (about 27 000 years: any more is the same as keeping all).
pub const MAX_RETAIN_DAYS: u64 = 10_000_000;

/// A day, in milliseconds.
pub const DAY_MS: i64 = 86_400_000;

/// The most events one prune by age deletes (one transaction); the rest wait for the next.
pub const AGE_PRUNE_BATCH: usize = 4096;

/// How often the event hub's writer prunes by age while the runtime runs.
pub const AGE_PRUNE_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// What a durable store keeps of the events: the newest `events` of them, none older than
/// `days` days. Turns and conversations are kept whatever their age.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// How many events are kept, the newest (at least 1).
    pub events: u64,
    /// How many days events are kept (at least 1).
    pub days: u64,
    /// How often events past `days` are pruned while the runtime runs (they are at start too).
    pub check_every: std::time::Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Retention { events: DEFAULT_RETAIN_EVENTS, days: DEFAULT_RETAIN_DAYS, check_every: AGE_PRUNE_EVERY }
    }
}

impl Retention {
    /// The newest `events` events, none older than `days` days (each at least 1), pruned by age
    /// every [`AGE_PRUNE_EVERY`].
    pub fn new(events: u64, days: u64) -> Retention {
        Retention { events: events.max(1), days: days.clamp(1, MAX_RETAIN_DAYS), ..Retention::default() }
    }

    /// The time (milliseconds since the epoch) before which an event is too old at `now_ms`.
    pub fn cutoff_ms(&self, now_ms: i64) -> i64 {
        let days = i64::try_from(self.days.clamp(1, MAX_RETAIN_DAYS)).unwrap_or(i64::MAX);
        now_ms.saturating_sub(days.saturating_mul(DAY_MS))
    }
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// `turn_completed`.
    Completed,
    /// `turn_failed` with any code but `interrupted`.
    Failed,
    /// `turn_failed` with `interrupted`.
    Interrupted,
}

impl Outcome {
    /// The outcome as the store writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Failed => "failed",
            Outcome::Interrupted => "interrupted",
        }
    }
}

/// One thing to write, as the event hub hands it over (borrowed: the event's JSON is the same
/// bytes every subscriber is sent).
#[derive(Debug, Clone, Copy)]
pub enum Record<'a> {
    /// A published event.
    Event {
        /// Its sequence number.
        seq: i64,
        /// When it was published, in milliseconds since the epoch.
        time_ms: i64,
        /// The `ServerEvent` as JSON.
        json: &'a [u8],
    },
    /// A turn started: its `turn_started` event is `first_seq`.
    TurnStarted(&'a TurnStart),
    /// A turn ended: its terminal event is `last_seq`.
    TurnEnded(&'a TurnEnd),
    /// An ACP agent opened a session for a conversation (no event goes with it).
    AgentSession(&'a AgentSession),
}

/// The ACP session an agent runner opened for a conversation (`session/new`), kept on the
/// conversation so that a later runtime process can ask the agent to load it
/// (`session/load`) instead of starting the conversation over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSession {
    /// The conversation.
    pub conversation: String,
    /// The ACP runner whose agent opened the session (another runner's agent cannot load it).
    pub runner: String,
    /// The agent's `sessionId`.
    pub session_id: String,
}

/// A turn as it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnStart {
    /// The assignment id.
    pub assignment: String,
    /// The conversation it belongs to.
    pub conversation: String,
    /// The runner that runs it.
    pub runner: String,
    /// What the agent is asked to do.
    pub task: String,
    /// The working folder.
    pub cwd: String,
    /// When it started, in milliseconds since the epoch.
    pub started_ms: i64,
    /// The sequence number of its `turn_started` event.
    pub first_seq: i64,
}

/// A turn as it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnEnd {
    /// The sequence number of the turn's `turn_started` event (which turn this is).
    pub first_seq: i64,
    /// How it ended.
    pub outcome: Outcome,
    /// The result, when it completed.
    pub result: Option<String>,
    /// The error as JSON (a `RuntimeSubmitError`), when it failed.
    pub error: Option<String>,
    /// When it ended, in milliseconds since the epoch.
    pub ended_ms: i64,
    /// The sequence number of its terminal event.
    pub last_seq: i64,
}

/// A turn as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnRecord {
    /// How it started.
    pub start: TurnStart,
    /// `running`, or how it ended (`completed`, `failed`, `interrupted`).
    pub outcome: String,
    /// The result, when it completed.
    pub result: Option<String>,
    /// The error as JSON, when it failed.
    pub error: Option<String>,
    /// When it ended.
    pub ended_ms: Option<i64>,
    /// The sequence number of its last event.
    pub last_seq: Option<i64>,
}

/// A conversation as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationRecord {
    /// Its id (a turn's `conversation`).
    pub id: String,
    /// The runner of its first turn.
    pub runner: String,
    /// Its title: the first line of its first turn's task, at most [`TITLE_MAX_CHARS`]
    /// characters.
    pub title: String,
    /// When its first turn started.
    pub created_ms: i64,
    /// When its latest turn started.
    pub updated_ms: i64,
}

/// A conversation with how many of its turns the store keeps: an item of a page of
/// [`Store::conversations_page`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationSummary {
    /// The conversation.
    pub conversation: ConversationRecord,
    /// How many of its turns the store keeps.
    pub turns: u64,
}

/// Where a page of [`Store::conversations_page`] starts: after the conversation last updated at
/// `updated_ms` whose id is `id` (the last item of the page before).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationCursor {
    /// The `updated_ms` of the page before's last conversation.
    pub updated_ms: i64,
    /// Its id.
    pub id: String,
}

impl ConversationCursor {
    /// Whether `c` comes after the cursor in the order of [`Store::conversations_page`]: the most
    /// recently updated first, ties by id.
    pub fn precedes(&self, c: &ConversationRecord) -> bool {
        c.updated_ms < self.updated_ms || (c.updated_ms == self.updated_ms && c.id > self.id)
    }
}

/// The longest conversation title, in characters.
pub const TITLE_MAX_CHARS: usize = 80;

/// The title of a conversation whose first task is `task`.
pub fn title_of(task: &str) -> String {
    task.trim().lines().next().unwrap_or("").trim().chars().take(TITLE_MAX_CHARS).collect()
}

/// An event as the store returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// Its sequence number.
    pub seq: i64,
    /// When it was published.
    pub time_ms: i64,
    /// The `ServerEvent` as JSON.
    pub json: Vec<u8>,
}

/// Why a store cannot be used. Every variant that concerns a file names it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file cannot be opened or written (a missing or unwritable folder, a read-only file,
    /// a full disk).
    #[error("cannot use the store {path}: {reason}")]
    Unusable {
        /// The database file.
        path: PathBuf,
        /// Why, as SQLite or the system said it.
        reason: String,
    },
    /// The file is not one of our databases.
    #[error("{path} is not an openagents store: {reason}")]
    NotAStore {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        reason: String,
    },
    /// The database was written by a newer version of openagents.
    #[error("{path} is a store of version {found}, written by a newer openagents; this one reads versions up to {supported}. Run the newer openagents, or give this one another --store or --name")]
    TooNew {
        /// The database file.
        path: PathBuf,
        /// The version it has.
        found: i64,
        /// The newest version this build reads.
        supported: i64,
    },
    /// Another runtime has the store open.
    #[error("the store {path} is in use by another openagents runtime; give this one another --name or --store")]
    InUse {
        /// The database file.
        path: PathBuf,
    },
    /// A read or a write failed while the runtime was running.
    #[error("the store {path}: {reason}")]
    Io {
        /// The database file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
}

impl StoreError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            StoreError::Unusable { path, .. } | StoreError::NotAStore { path, .. } | StoreError::TooNew { path, .. } | StoreError::InUse { path } | StoreError::Io { path, .. } => path,
        }
    }
}

/// A place the runtime keeps events, turns and conversations. Written only by the event hub,
/// read by subscribers that resume from before the hub's replay buffer.
pub trait Store: Send + Sync {
    /// What the store is, for a person: `memory`, `sqlite:/path/to/file.db`.
    fn describe(&self) -> String;

    /// Whether events written here outlive the process (and so whether an event must be
    /// written before it reaches a subscriber, and resumes may be served from here).
    fn durable(&self) -> bool;

    /// Writes `batch` at once: all of it or, on an error, none of it. Writing what is already
    /// there again changes nothing (an event or a turn start with a sequence number the store
    /// has is skipped; a turn end and an agent session are updates), so a batch whose commit
    /// failed, or whose success was not heard, can be written again.
    ///
    /// # Errors
    ///
    /// When the write failed (a full disk, a file removed under the runtime).
    fn write(&self, batch: &[Record<'_>]) -> Result<(), StoreError>;

    /// The newest sequence number the store has seen (0 when none): where a restarted runtime's
    /// sequence continues from.
    ///
    /// # Errors
    ///
    /// When the store cannot be read.
    fn last_seq(&self) -> Result<i64, StoreError>;

    /// Events with a sequence number above `after` and at most `through`, oldest first: at most
    /// `limit` of them, and no more once their JSON reaches `max_bytes` (at least one when there
    /// is any). Fewer than asked means a bound was reached or there are no more: a reader goes on
    /// after the last one it got until it gets none. Events pruned by retention are simply not
    /// there.
    ///
    /// # Errors
    ///
    /// When the store cannot be read.
    fn events_after(&self, after: i64, through: i64, limit: usize, max_bytes: usize) -> Result<Vec<StoredEvent>, StoreError>;

    /// Deletes events older than the newest `keep`; returns how many went. A store that keeps
    /// events in blocks (SQLite: one block a group commit) deletes whole blocks only, so it may
    /// keep a few more than `keep`, never fewer.
    ///
    /// # Errors
    ///
    /// When the store cannot be written.
    fn prune(&self, keep: u64) -> Result<u64, StoreError>;

    /// Deletes the oldest events whose time is before `cutoff_ms` (milliseconds since the
    /// epoch), about `limit` of them, in one transaction; returns how many went (0 once none
    /// is left to go: a caller prunes all by calling again while it returns more). Only the
    /// oldest go: the first event at or after the cutoff (a clock set back can put one before
    /// older ones) stops the prune, so what stays is always the newest part of the sequence and
    /// a resume from before it gets `gap`. A store that keeps events in blocks deletes whole
    /// blocks whose newest event is before the cutoff, up to `limit` events, or the first block
    /// alone when it holds more.
    ///
    /// # Errors
    ///
    /// When the store cannot be written.
    fn prune_older_than(&self, cutoff_ms: i64, limit: usize) -> Result<u64, StoreError>;

    /// Closes every turn still shown as running, as failed with [`RUNTIME_RESTARTED`] at
    /// `now_ms`: at start, such a turn belonged to a process that stopped before it ended.
    /// Returns the turns closed, as they are now.
    ///
    /// # Errors
    ///
    /// When the store cannot be written.
    fn close_running_turns(&self, now_ms: i64) -> Result<Vec<TurnRecord>, StoreError>;

    /// The newest `limit` turns, newest first.
    ///
    /// # Errors
    ///
    /// When the store cannot be read.
    fn turns(&self, limit: usize) -> Result<Vec<TurnRecord>, StoreError>;

    /// The conversations, the most recently updated first, at most `limit`.
    ///
    /// # Errors
    ///
    /// When the store cannot be read.
    fn conversations(&self, limit: usize) -> Result<Vec<ConversationRecord>, StoreError>;

    /// The ACP session last opened for `conversation` ([`Record::AgentSession`]), if the store
    /// holds the conversation and one was opened for it.
    ///
    /// # Errors
    ///
    /// When the store cannot be read.
    fn agent_session(&self, conversation: &str) -> Result<Option<AgentSession>, StoreError>;

    /// At most `limit` turns of `conversation` that started before `before_seq` (their
    /// `first_seq` is lower), newest first: a page of the conversation's history, read backwards.
    ///
    /// The default reads every turn ([`Store::turns`]); a store that can ask its index
    /// overrides it.
    ///
    /// # Errors
    ///
    /// When the store cannot be read.
    fn turns_before(&self, conversation: &str, before_seq: i64, limit: usize) -> Result<Vec<TurnRecord>, StoreError> {
        Ok(self.turns(usize::MAX)?.into_iter().filter(|t| t.start.conversation == conversation && t.start.first_seq < before_seq).take(limit).collect())
    }

    /// A page of conversations for the `conversations` method: at most `limit`, the most recently
    /// updated first (ties by id, as [`Store::conversations`]), only those after `after` in that
    /// order when it is given, each with how many of its turns the store keeps.
    ///
    /// The default reads every conversation and turn ([`Store::conversations`],
    /// [`Store::turns`]); a store that can ask its index overrides it.
    ///
    /// # Errors
    ///
    /// When the store cannot be read.
    fn conversations_page(&self, after: Option<&ConversationCursor>, limit: usize) -> Result<Vec<ConversationSummary>, StoreError> {
        let turns = self.turns(usize::MAX)?;
        let count = |id: &str| turns.iter().filter(|t| t.start.conversation == id).count() as u64;
        Ok(self
            .conversations(usize::MAX)?
            .into_iter()
            .filter(|c| after.is_none_or(|a| a.precedes(c)))
            .take(limit)
            .map(|c| ConversationSummary { turns: count(&c.id), conversation: c })
            .collect())
    }

    /// The conversation `id` for the `conversation` method, with at most `limit` of its turns in
    /// the order they ran: those whose `first_seq` is above `after_seq` (0 for the first page).
    /// `None` when the store holds no conversation `id`.
    ///
    /// The default reads every conversation and turn; a store that can ask its index overrides
    /// it.
    ///
    /// # Errors
    ///
    /// When the store cannot be read.
    fn conversation_turns(&self, id: &str, after_seq: i64, limit: usize) -> Result<Option<(ConversationSummary, Vec<TurnRecord>)>, StoreError> {
        let Some(conversation) = self.conversations(usize::MAX)?.into_iter().find(|c| c.id == id) else { return Ok(None) };
        let mut turns: Vec<TurnRecord> = self.turns(usize::MAX)?.into_iter().filter(|t| t.start.conversation == id).collect();
        turns.reverse();
        let summary = ConversationSummary { conversation, turns: turns.len() as u64 };
        Ok(Some((summary, turns.into_iter().filter(|t| t.start.first_seq > after_seq).take(limit).collect())))
    }
}

/// The error JSON a turn closed at start is recorded with.
pub(crate) fn restarted_error() -> String {
    serde_json::json!({
        "code": RUNTIME_RESTARTED,
        "message": RUNTIME_RESTARTED_MESSAGE,
        "retryable": true,
    })
    .to_string()
}
