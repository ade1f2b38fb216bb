//! The store in an embedded SQLite database: one file (with SQLite's `-wal` and `-shm` beside
//! it, and our `.lock`), in WAL mode with `synchronous = FULL`, so a committed write survives a
//! crash of the process and of the machine. A new database has 64 KiB pages and the WAL is
//! checkpointed every 16 MiB (`PAGE_SIZE`, `CHECKPOINT_BYTES`).
//!
//! The schema is versioned: `PRAGMA user_version` is the number of migrations applied, and
//! `PRAGMA application_id` says the file is ours. A file that is not a database, a database of
//! another application, or one from a newer version of ours is refused, naming the file.
//! One runtime at a time holds a store: the `.lock` file beside it is locked (`flock`) for the
//! runtime's life, and the lock goes with the process, however it ends.
//!
//! Events are kept in blocks: the events of one [`Store::write`] (one group commit of the event
//! hub) are one row of `event_blocks`, keyed by the block's first sequence number, with its last,
//! how many events it holds, the newest time among them (pruning by age reads it), and the events
//! themselves as lines `<seq>\t<time_ms>\t<json>\n` (the JSON is compact: no raw tab or
//! newline). One row per commit rather than per event keeps a group commit's cost per event
//! low. Blocks never overlap (a write leaves out what a block already covers), so in order of
//! `first_seq` they are in order of `last_seq` too, and every read and prune seeks by the primary
//! key. Retention deletes whole blocks only: a block part of which is still to be kept stays
//! whole.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior, params};

use super::block::{BLOCK_BUFFER_KEEP, build_blocks, events_of, leading_old_blocks, parse_line, push_line, read_block};
use super::{AgentSession, ConversationCursor, ConversationRecord, ConversationSummary, Outcome, Record, Store, StoreError, StoredEvent, TurnRecord, TurnStart, restarted_error, title_of};

/// `PRAGMA application_id` of our databases: "OAgt".
const APPLICATION_ID: i32 = 0x4f41_6774;

/// The migrations, in order: migration `n` (from 1) takes a database from version `n - 1` to
/// `n`. A released migration is never edited; a change of schema is a new one at the end.
const MIGRATIONS: &[&str] = &[
    // 1: events, turns, conversations, and the newest sequence number ever given out (which
    // retention cannot take away).
    "CREATE TABLE events (
        seq INTEGER PRIMARY KEY,
        time_ms INTEGER NOT NULL,
        json TEXT NOT NULL
    );
    CREATE TABLE turns (
        first_seq INTEGER PRIMARY KEY,
        assignment TEXT NOT NULL,
        conversation TEXT NOT NULL,
        runner TEXT NOT NULL,
        task TEXT NOT NULL,
        cwd TEXT NOT NULL,
        outcome TEXT NOT NULL,
        result TEXT,
        error TEXT,
        started_ms INTEGER NOT NULL,
        ended_ms INTEGER,
        last_seq INTEGER
    );
    CREATE INDEX turns_running ON turns (outcome) WHERE outcome = 'running';
    CREATE INDEX turns_by_conversation ON turns (conversation, first_seq);
    CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        runner TEXT NOT NULL,
        title TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL
    );
    CREATE INDEX conversations_by_update ON conversations (updated_ms);
    CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    );",
    // 2: the ACP session an agent runner opened for a conversation, and which runner's agent.
    "ALTER TABLE conversations ADD COLUMN agent_runner TEXT;
    ALTER TABLE conversations ADD COLUMN agent_session TEXT;",
    // 3: events in blocks, one row per write instead of one per event (see the module's docs):
    // `time_ms` is the newest (greatest) time of the block's events, `data` its events as
    // lines `<seq>\t<time_ms>\t<json>\n` in order. The events already stored move into blocks
    // of 1024 consecutive sequence numbers (`seq / 1024`; `group_concat`'s own ORDER BY keeps
    // the lines in order, SQLite 3.44 and later, and the bundled SQLite is newer), and the
    // `events` table goes.
    "CREATE TABLE event_blocks (
        first_seq INTEGER PRIMARY KEY,
        last_seq INTEGER NOT NULL,
        count INTEGER NOT NULL,
        time_ms INTEGER NOT NULL,
        data TEXT NOT NULL
    );
    INSERT INTO event_blocks (first_seq, last_seq, count, time_ms, data)
        SELECT min(seq), max(seq), count(*), max(time_ms), group_concat(seq || char(9) || time_ms || char(9) || json || char(10), '' ORDER BY seq)
        FROM events GROUP BY seq / 1024;
    DROP TABLE events;",
];

/// The store version this build writes and reads (the number of migrations).
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The page size of a database this version creates, in bytes (SQLite's largest: a group
/// commit's block of a megabyte is some twenty pages rather than hundreds).
const PAGE_SIZE: i64 = 65_536;

/// How large the WAL grows before a commit copies it into the database (SQLite's automatic
/// checkpoint, here by size whatever the page size): smaller means more frequent but shorter
/// pauses of the writer, larger the reverse.
const CHECKPOINT_BYTES: i64 = 16 << 20;

/// How long a statement waits for SQLite's own lock (held briefly by a reader's checkpoint).
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Events, turns and conversations in a SQLite database file.
pub struct SqliteStore {
    path: PathBuf,
    writer: Mutex<Connection>,
    reader: Mutex<Connection>,
    /// Where a write builds its block's `data` (locked only with `writer` held), reused.
    block: Mutex<Vec<u8>>,
    /// Held (locked) for the store's life; declared last, so it is released after the
    /// connections are closed.
    _lock: File,
}

/// `path` with `suffix` appended to its file name.
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().map(std::ffi::OsStr::to_os_string).unwrap_or_default();
    name.push(suffix);
    path.with_file_name(name)
}

fn is_not_a_database(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(ErrorCode::NotADatabase)
}

impl SqliteStore {
    /// Opens (creating when missing, mode 0600) the store at `path`, migrating an older one to
    /// [`SCHEMA_VERSION`], and locks it for this process.
    ///
    /// # Errors
    ///
    /// Each names `path`: [`StoreError::Unusable`] (a missing or unwritable folder, a folder,
    /// a read-only file), [`StoreError::NotAStore`] (not a database, or another application's),
    /// [`StoreError::TooNew`] (a newer version of ours), [`StoreError::InUse`] (another
    /// runtime holds it).
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let unusable = |reason: String| StoreError::Unusable { path: path.to_owned(), reason };
        if path.is_dir() {
            return Err(unusable("it is a folder".into()));
        }
        let lock_path = beside(path, ".lock");
        let lock = OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(&lock_path).map_err(|e| unusable(format!("cannot open its lock file {}: {e}", lock_path.display())))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(StoreError::InUse { path: path.to_owned() }),
            Err(TryLockError::Error(e)) => return Err(unusable(format!("cannot lock {}: {e}", lock_path.display()))),
        }
        // Created here rather than by SQLite, so it is private to its owner from the start
        // (SQLite gives its `-wal` and `-shm` files the database's permissions).
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(path).map_err(|e| unusable(e.to_string()))?;
        let fresh = file.metadata().map(|m| m.len() == 0).unwrap_or(false);
        drop(file);
        let mut writer = connect(path)?;
        if fresh {
            // Before the first table: a group commit's block spans fewer pages, so fewer WAL
            // frames, writes and checksums (a database made by an earlier version keeps its size).
            writer.pragma_update(None, "page_size", PAGE_SIZE).map_err(|e| unusable(e.to_string()))?;
        }
        check_and_migrate(path, &mut writer)?;
        let wal: String = writer.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0)).map_err(|e| unusable(e.to_string()))?;
        if !wal.eq_ignore_ascii_case("wal") {
            return Err(unusable(format!("it cannot be put in WAL mode (journal mode {wal})")));
        }
        writer.pragma_update(None, "synchronous", "FULL").map_err(|e| unusable(e.to_string()))?;
        let page: i64 = writer.pragma_query_value(None, "page_size", |r| r.get(0)).map_err(|e| unusable(e.to_string()))?;
        writer.pragma_update(None, "wal_autocheckpoint", (CHECKPOINT_BYTES / page.max(512)).max(1)).map_err(|e| unusable(e.to_string()))?;
        let reader = connect(path)?;
        Ok(SqliteStore { path: path.to_owned(), writer: Mutex::new(writer), reader: Mutex::new(reader), block: Mutex::new(Vec::new()), _lock: lock })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, e: &rusqlite::Error) -> StoreError {
        StoreError::Io { path: self.path.clone(), reason: e.to_string() }
    }

    fn writer(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn reader(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.reader.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// For tests: a full disk on demand. `Some(n)` lets the database grow by at most `n` pages
    /// from its size now (`PRAGMA page_count`), after which a write that needs another page fails
    /// with SQLite's `SQLITE_FULL` ("database or disk is full"), the error a full disk gives;
    /// `None` lifts the limit again (SQLite's default `max_page_count`). Returns the limit now
    /// in effect, in pages.
    ///
    /// # Errors
    ///
    /// [`StoreError::Io`] when SQLite refuses the pragmas.
    #[doc(hidden)]
    pub fn limit_pages_for_test(&self, pages: Option<u64>) -> Result<u64, StoreError> {
        let writer = self.writer();
        let limit = match pages {
            Some(more) => writer.pragma_query_value(None, "page_count", |r| r.get::<_, i64>(0)).map_err(|e| self.io(&e))?.max(0) as u64 + more,
            // The default is compiled in: a database opened fresh has it.
            None => Connection::open_in_memory().and_then(|c| c.pragma_query_value(None, "max_page_count", |r| r.get::<_, i64>(0))).map_err(|e| self.io(&e))?.max(0) as u64,
        };
        writer.pragma_update_and_check(None, "max_page_count", i64::try_from(limit).unwrap_or(i64::MAX), |r| r.get::<_, i64>(0)).map(|n| n.max(0) as u64).map_err(|e| self.io(&e))
    }
}

/// For tests: stamps the events through `through` in the SQLite store at `path` with `time_ms`
/// (their lines and their blocks' newest time), on a connection of its own, so a runtime may
/// hold the store meanwhile. Every block holding any of them must end at `through` or before
/// (a test makes sure with a commit boundary there). Returns how many events were stamped.
///
/// # Errors
///
/// [`StoreError::Io`] when the file cannot be read or written, or a block crosses `through`.
#[doc(hidden)]
pub fn age_events_for_test(path: &Path, through: i64, time_ms: i64) -> Result<u64, StoreError> {
    let io = |reason: String| StoreError::Io { path: path.to_owned(), reason };
    let mut conn = Connection::open(path).map_err(|e| io(e.to_string()))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| io(e.to_string()))?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| io(e.to_string()))?;
    let blocks: Vec<(i64, i64, String)> = {
        let mut stmt = tx.prepare("SELECT first_seq, last_seq, data FROM event_blocks WHERE first_seq <= ?1 ORDER BY first_seq").map_err(|e| io(e.to_string()))?;
        stmt.query_map([through], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).and_then(Iterator::collect).map_err(|e| io(e.to_string()))?
    };
    let mut stamped = 0;
    for (first_seq, last_seq, data) in blocks {
        if last_seq > through {
            return Err(io(format!("the block {first_seq}..={last_seq} holds events after {through}")));
        }
        let mut aged = Vec::with_capacity(data.len());
        for line in data.lines() {
            let Some((seq, _, json)) = parse_line(line.as_bytes()) else { return Err(io(format!("a line of the block {first_seq} does not parse"))) };
            push_line(&mut aged, seq, time_ms, json);
            stamped += 1;
        }
        tx.execute("UPDATE event_blocks SET time_ms = ?2, data = ?3 WHERE first_seq = ?1", params![first_seq, time_ms, String::from_utf8_lossy(&aged)]).map_err(|e| io(e.to_string()))?;
    }
    tx.commit().map_err(|e| io(e.to_string()))?;
    Ok(stamped)
}

/// A read-write connection to `path` that is refused, rather than silently opened read-only,
/// when the file cannot be written.
fn connect(path: &Path) -> Result<Connection, StoreError> {
    let unusable = |reason: String| StoreError::Unusable { path: path.to_owned(), reason };
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| unusable(e.to_string()))?;
    if conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(true) {
        return Err(unusable("the file is read-only".into()));
    }
    conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| unusable(e.to_string()))?;
    Ok(conn)
}

/// Refuses what is not ours or is newer, then applies the migrations `conn`'s database lacks.
fn check_and_migrate(path: &Path, conn: &mut Connection) -> Result<(), StoreError> {
    let classify = |e: rusqlite::Error| {
        if is_not_a_database(&e) {
            StoreError::NotAStore { path: path.to_owned(), reason: "the file is not a SQLite database".into() }
        } else {
            StoreError::Unusable { path: path.to_owned(), reason: e.to_string() }
        }
    };
    let application: i32 = conn.pragma_query_value(None, "application_id", |r| r.get(0)).map_err(classify)?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(classify)?;
    if application == 0 && version == 0 {
        let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0)).map_err(classify)?;
        if tables > 0 {
            return Err(StoreError::NotAStore { path: path.to_owned(), reason: format!("it is a SQLite database of another application ({tables} schema objects, no openagents application id)") });
        }
    } else if application != APPLICATION_ID {
        return Err(StoreError::NotAStore { path: path.to_owned(), reason: format!("it is a SQLite database of another application (application_id {application:#x})") });
    }
    if version > SCHEMA_VERSION {
        return Err(StoreError::TooNew { path: path.to_owned(), found: version, supported: SCHEMA_VERSION });
    }
    if version < 0 {
        return Err(StoreError::NotAStore { path: path.to_owned(), reason: format!("its store version is {version}") });
    }
    migrate(conn, version, SCHEMA_VERSION).map_err(classify)
}

/// Applies migrations `from + 1 ..= to`, each in its own transaction with the version it
/// reaches.
fn migrate(conn: &mut Connection, from: i64, to: i64) -> rusqlite::Result<()> {
    for version in from + 1..=to {
        let Some(sql) = usize::try_from(version - 1).ok().and_then(|i| MIGRATIONS.get(i)) else { break };
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "application_id", APPLICATION_ID)?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
        tracing::debug!(version, "store migrated");
    }
    Ok(())
}

/// The blocks that cover any of `lo..=hi` (as `(first_seq, last_seq)`, in order): the last one
/// starting at or before `lo` if it reaches `lo`, and every one starting in `lo..=hi` (blocks do
/// not overlap, so no other can), found by seeks on the primary key.
fn blocks_covering(tx: &rusqlite::Transaction<'_>, lo: i64, hi: i64) -> rusqlite::Result<Vec<(i64, i64)>> {
    let mut stmt = tx.prepare(
        "SELECT first_seq, last_seq FROM event_blocks
         WHERE first_seq >= coalesce((SELECT max(first_seq) FROM event_blocks WHERE first_seq <= ?1), ?1) AND first_seq <= ?2 AND last_seq >= ?1
         ORDER BY first_seq",
    )?;
    stmt.query_map(params![lo, hi], |r| Ok((r.get(0)?, r.get(1)?)))?.collect()
}

/// The newest sequence number in `event_blocks`: the last of the block that starts last
/// (blocks do not overlap), by one seek.
const NEWEST_BLOCKED_SEQ: &str = "(SELECT last_seq FROM event_blocks ORDER BY first_seq DESC LIMIT 1)";

/// A conversation's columns and how many turns it has (the index `turns_by_conversation` counts
/// them).
const CONVERSATION_SUMMARY: &str = "SELECT c.id, c.runner, c.title, c.created_ms, c.updated_ms, (SELECT count(*) FROM turns t WHERE t.conversation = c.id) FROM conversations c";

fn conversation_summary_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ConversationSummary> {
    Ok(ConversationSummary {
        conversation: ConversationRecord { id: r.get(0)?, runner: r.get(1)?, title: r.get(2)?, created_ms: r.get(3)?, updated_ms: r.get(4)? },
        turns: r.get::<_, i64>(5)?.max(0) as u64,
    })
}

/// Writes the events of `batch` in `tx`, in order of sequence number, building each block's
/// `data` in `block`: one block, unless the store already has blocks covering some of them (a
/// batch written again after a commit whose success was not heard, now with newer events after
/// it). An event whose sequence number a stored block covers is left out, as the store has it,
/// and the others go in one block per run between stored blocks, so blocks never overlap.
/// Returns the newest sequence number of the batch's events (left out or not).
fn write_events(tx: &rusqlite::Transaction<'_>, batch: &[Record<'_>], block: &mut Vec<u8>) -> rusqlite::Result<Option<i64>> {
    let events = events_of(batch);
    let (Some(&(lo, ..)), Some(&(hi, ..))) = (events.first(), events.last()) else { return Ok(None) };
    let covered = blocks_covering(tx, lo, hi)?;
    let mut insert = tx.prepare("INSERT INTO event_blocks (first_seq, last_seq, count, time_ms, data) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (first_seq) DO NOTHING")?;
    build_blocks(&events, &covered, block, |run, block| {
        // Text without a second check: lines of numbers, tabs and text (see `push_line`).
        let data = rusqlite::types::ToSqlOutput::Borrowed(rusqlite::types::ValueRef::Text(block));
        insert.execute(params![run.first, run.last, run.count, run.time_ms, data]).map(|_| ())
    })?;
    Ok(Some(hi))
}

fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

const TURN_COLUMNS: &str = "first_seq, assignment, conversation, runner, task, cwd, outcome, result, error, started_ms, ended_ms, last_seq";

fn turn_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TurnRecord> {
    Ok(TurnRecord {
        start: TurnStart { first_seq: r.get(0)?, assignment: r.get(1)?, conversation: r.get(2)?, runner: r.get(3)?, task: r.get(4)?, cwd: r.get(5)?, started_ms: r.get(9)? },
        outcome: r.get(6)?,
        result: r.get(7)?,
        error: r.get(8)?,
        ended_ms: r.get(10)?,
        last_seq: r.get(11)?,
    })
}

impl Store for SqliteStore {
    fn describe(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }

    fn durable(&self) -> bool {
        true
    }

    fn write(&self, batch: &[Record<'_>]) -> Result<(), StoreError> {
        let mut conn = self.writer();
        let mut block = self.block.lock().unwrap_or_else(|p| p.into_inner());
        let write = |conn: &mut Connection, block: &mut Vec<u8>| -> rusqlite::Result<()> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            {
                let newest = write_events(&tx, batch, block)?;
                for record in batch {
                    match record {
                        Record::Event { .. } => {}
                        Record::TurnStarted(t) => {
                            tx.execute(
                                "INSERT INTO turns (first_seq, assignment, conversation, runner, task, cwd, outcome, started_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running', ?7) ON CONFLICT (first_seq) DO NOTHING",
                                params![t.first_seq, t.assignment, t.conversation, t.runner, t.task, t.cwd, t.started_ms],
                            )?;
                            tx.execute(
                                "INSERT INTO conversations (id, runner, title, created_ms, updated_ms) VALUES (?1, ?2, ?3, ?4, ?4)
                                 ON CONFLICT (id) DO UPDATE SET updated_ms = excluded.updated_ms",
                                params![t.conversation, t.runner, title_of(&t.task), t.started_ms],
                            )?;
                        }
                        Record::TurnEnded(t) => {
                            tx.execute(
                                "UPDATE turns SET outcome = ?2, result = ?3, error = ?4, ended_ms = ?5, last_seq = ?6 WHERE first_seq = ?1",
                                params![t.first_seq, t.outcome.as_str(), t.result, t.error, t.ended_ms, t.last_seq],
                            )?;
                        }
                        Record::AgentSession(a) => {
                            tx.execute("UPDATE conversations SET agent_runner = ?2, agent_session = ?3 WHERE id = ?1", params![a.conversation, a.runner, a.session_id])?;
                        }
                    }
                }
                if let Some(newest) = newest {
                    tx.execute("INSERT INTO meta (key, value) VALUES ('last_seq', ?1) ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)", params![newest])?;
                }
            }
            tx.commit()
        };
        let written = write(&mut conn, &mut block);
        if block.capacity() > BLOCK_BUFFER_KEEP {
            *block = Vec::new();
        }
        written.map_err(|e| self.io(&e))
    }

    fn last_seq(&self) -> Result<i64, StoreError> {
        let conn = self.reader();
        conn.query_row(
            &format!("SELECT max(coalesce((SELECT value FROM meta WHERE key = 'last_seq'), 0), coalesce({NEWEST_BLOCKED_SEQ}, 0), coalesce((SELECT max(max(first_seq, coalesce(last_seq, 0))) FROM turns), 0))"),
            [],
            |r| r.get(0),
        )
        .map_err(|e| self.io(&e))
    }

    /// Reads the blocks that hold events of the range, in order, and stops at the first that
    /// completes `limit`.
    fn events_after(&self, after: i64, through: i64, limit: usize, max_bytes: usize) -> Result<Vec<StoredEvent>, StoreError> {
        if limit == 0 || through <= after {
            return Ok(Vec::new());
        }
        let conn = self.reader();
        let read = || -> rusqlite::Result<Vec<StoredEvent>> {
            // From the last block starting at or before `after` (it may hold `after + 1`), by
            // one seek; blocks that end at or before `after` are passed over.
            let mut stmt = conn.prepare(
                "SELECT first_seq, data FROM event_blocks
                 WHERE first_seq >= coalesce((SELECT max(first_seq) FROM event_blocks WHERE first_seq <= ?1), ?1) AND first_seq <= ?2 AND last_seq > ?1
                 ORDER BY first_seq",
            )?;
            let mut rows = stmt.query(params![after, through])?;
            let (mut out, mut bytes) = (Vec::new(), 0);
            while out.len() < limit
                && (bytes < max_bytes || out.is_empty())
                && let Some(row) = rows.next()?
            {
                let first_seq: i64 = row.get(0)?;
                let data = row.get_ref(1)?;
                let data = match data {
                    rusqlite::types::ValueRef::Text(b) | rusqlite::types::ValueRef::Blob(b) => b,
                    _ => {
                        tracing::error!(first_seq, "the store's block of events starting at sequence number {first_seq} has no text; it is skipped");
                        continue;
                    }
                };
                read_block(first_seq, data, (after, through), (limit, max_bytes), &mut out, &mut bytes);
            }
            Ok(out)
        };
        read().map_err(|e| self.io(&e))
    }

    /// Deletes the blocks that end at or before the newest sequence number less `keep`: whole
    /// blocks only, so at least the newest `keep` events stay (a block that holds both some of
    /// them and older ones stays whole). Returns how many events went.
    fn prune(&self, keep: u64) -> Result<u64, StoreError> {
        let mut conn = self.writer();
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        let prune = |conn: &mut Connection| -> rusqlite::Result<u64> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let newest: Option<i64> = tx.query_row(&format!("SELECT {NEWEST_BLOCKED_SEQ}"), [], |r| r.get(0))?;
            let mut deleted = 0u64;
            if let Some(line) = newest.map(|n| n.saturating_sub(keep)) {
                // `first_seq <= line` bounds the scan of the primary key; `last_seq` decides.
                let mut stmt = tx.prepare("DELETE FROM event_blocks WHERE first_seq <= ?1 AND last_seq <= ?1 RETURNING count")?;
                let mut rows = stmt.query(params![line])?;
                while let Some(row) = rows.next()? {
                    deleted += row.get::<_, i64>(0)?.max(0) as u64;
                }
            }
            tx.commit()?;
            Ok(deleted)
        };
        prune(&mut conn).map_err(|e| self.io(&e))
    }

    /// Deletes whole blocks from the oldest on, while the newest time of each is before
    /// `cutoff_ms` and the events deleted stay within `limit` (reading at most `limit + 1`
    /// blocks). One exception, so that pruning always progresses: when the oldest block alone
    /// holds more than `limit` events and is old enough, it goes by itself, and the count
    /// returned is above `limit`. Returns 0 only when no block old enough leads.
    fn prune_older_than(&self, cutoff_ms: i64, limit: usize) -> Result<u64, StoreError> {
        if limit == 0 {
            return Ok(0);
        }
        let mut conn = self.writer();
        let prune = |conn: &mut Connection| -> rusqlite::Result<u64> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            // The oldest `limit + 1` blocks (each holds an event at least; the primary key: no
            // scan beyond them), and the last of the leading run wholly before the cutoff.
            let (through, deleted) = {
                let mut stmt = tx.prepare("SELECT first_seq, count, time_ms FROM event_blocks ORDER BY first_seq LIMIT ?1")?;
                let blocks = stmt.query_map(params![i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1)], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<rusqlite::Result<Vec<_>>>()?;
                leading_old_blocks(blocks, cutoff_ms, limit)
            };
            if let Some(through) = through {
                tx.execute("DELETE FROM event_blocks WHERE first_seq <= ?1", params![through])?;
            }
            tx.commit()?;
            Ok(deleted)
        };
        prune(&mut conn).map_err(|e| self.io(&e))
    }

    fn close_running_turns(&self, now_ms: i64) -> Result<Vec<TurnRecord>, StoreError> {
        let mut conn = self.writer();
        let close = |conn: &mut Connection| -> rusqlite::Result<Vec<TurnRecord>> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let running: Vec<i64> = {
                let mut stmt = tx.prepare("SELECT first_seq FROM turns WHERE outcome = 'running' ORDER BY first_seq")?;
                stmt.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?
            };
            let mut closed = Vec::new();
            for first_seq in running {
                // One turn runs at a time: every event from its first on is the stopped turn's.
                tx.execute(
                    &format!(
                        "UPDATE turns SET outcome = ?2, error = ?3, ended_ms = ?4,
                             last_seq = max(first_seq, coalesce({NEWEST_BLOCKED_SEQ}, first_seq))
                         WHERE first_seq = ?1"
                    ),
                    params![first_seq, Outcome::Failed.as_str(), restarted_error(), now_ms],
                )?;
                if let Some(t) = tx.query_row(&format!("SELECT {TURN_COLUMNS} FROM turns WHERE first_seq = ?1"), params![first_seq], turn_row).optional()? {
                    closed.push(t);
                }
            }
            tx.commit()?;
            Ok(closed)
        };
        close(&mut conn).map_err(|e| self.io(&e))
    }

    fn turns(&self, limit: usize) -> Result<Vec<TurnRecord>, StoreError> {
        let conn = self.reader();
        let read = || -> rusqlite::Result<Vec<TurnRecord>> {
            let mut stmt = conn.prepare(&format!("SELECT {TURN_COLUMNS} FROM turns ORDER BY first_seq DESC LIMIT ?1"))?;
            stmt.query_map(params![i64::try_from(limit).unwrap_or(i64::MAX)], turn_row)?.collect()
        };
        read().map_err(|e| self.io(&e))
    }

    fn conversations(&self, limit: usize) -> Result<Vec<ConversationRecord>, StoreError> {
        let conn = self.reader();
        let read = || -> rusqlite::Result<Vec<ConversationRecord>> {
            let mut stmt = conn.prepare("SELECT id, runner, title, created_ms, updated_ms FROM conversations ORDER BY updated_ms DESC, id LIMIT ?1")?;
            stmt.query_map(params![i64::try_from(limit).unwrap_or(i64::MAX)], |r| Ok(ConversationRecord { id: r.get(0)?, runner: r.get(1)?, title: r.get(2)?, created_ms: r.get(3)?, updated_ms: r.get(4)? }))?.collect()
        };
        read().map_err(|e| self.io(&e))
    }

    fn turns_before(&self, conversation: &str, before_seq: i64, limit: usize) -> Result<Vec<TurnRecord>, StoreError> {
        let conn = self.reader();
        let read = || -> rusqlite::Result<Vec<TurnRecord>> {
            let mut stmt = conn.prepare(&format!("SELECT {TURN_COLUMNS} FROM turns WHERE conversation = ?1 AND first_seq < ?2 ORDER BY first_seq DESC LIMIT ?3"))?;
            stmt.query_map(params![conversation, before_seq, i64::try_from(limit).unwrap_or(i64::MAX)], turn_row)?.collect()
        };
        read().map_err(|e| self.io(&e))
    }

    fn agent_session(&self, conversation: &str) -> Result<Option<AgentSession>, StoreError> {
        let conn = self.reader();
        conn.query_row("SELECT agent_runner, agent_session FROM conversations WHERE id = ?1 AND agent_runner IS NOT NULL AND agent_session IS NOT NULL", params![conversation], |r| {
            Ok(AgentSession { conversation: conversation.to_owned(), runner: r.get(0)?, session_id: r.get(1)? })
        })
        .optional()
        .map_err(|e| self.io(&e))
    }

    fn conversations_page(&self, after: Option<&ConversationCursor>, limit: usize) -> Result<Vec<ConversationSummary>, StoreError> {
        let conn = self.reader();
        let read = || -> rusqlite::Result<Vec<ConversationSummary>> {
            let mut stmt = conn.prepare(&format!("{CONVERSATION_SUMMARY} WHERE ?1 IS NULL OR c.updated_ms < ?1 OR (c.updated_ms = ?1 AND c.id > ?2) ORDER BY c.updated_ms DESC, c.id LIMIT ?3"))?;
            stmt.query_map(params![after.map(|a| a.updated_ms), after.map(|a| a.id.as_str()), sql_limit(limit)], conversation_summary_row)?.collect()
        };
        read().map_err(|e| self.io(&e))
    }

    fn conversation_turns(&self, id: &str, after_seq: i64, limit: usize) -> Result<Option<(ConversationSummary, Vec<TurnRecord>)>, StoreError> {
        let conn = self.reader();
        let read = || -> rusqlite::Result<Option<(ConversationSummary, Vec<TurnRecord>)>> {
            // One read transaction: the count and the turns from the same snapshot.
            let tx = conn.unchecked_transaction()?;
            let Some(summary) = tx.query_row(&format!("{CONVERSATION_SUMMARY} WHERE c.id = ?1"), params![id], conversation_summary_row).optional()? else { return Ok(None) };
            let turns = {
                let mut stmt = tx.prepare(&format!("SELECT {TURN_COLUMNS} FROM turns WHERE conversation = ?1 AND first_seq > ?2 ORDER BY first_seq LIMIT ?3"))?;
                stmt.query_map(params![id, after_seq, sql_limit(limit)], turn_row)?.collect::<rusqlite::Result<Vec<_>>>()?
            };
            tx.finish()?;
            Ok(Some((summary, turns)))
        };
        read().map_err(|e| self.io(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::vectors::{self, event, seqs, start, write_events};

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("openagents-store-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        dir.join("store.db")
    }

    #[test]
    fn events_turns_and_conversations_are_written_and_read_back() {
        let path = temp("roundtrip");
        let store = SqliteStore::open(&path).expect("a new store");
        let s1 = start(1, "conv-a");
        let (e1, e2, e3) = (event(1), event(2), event(3));
        let end = super::super::TurnEnd { first_seq: 1, outcome: Outcome::Completed, result: Some("hi".into()), error: None, ended_ms: 2000, last_seq: 3 };
        store
            .write(&[
                Record::Event { seq: 1, time_ms: 1, json: e1.as_bytes() },
                Record::TurnStarted(&s1),
                Record::Event { seq: 2, time_ms: 2, json: e2.as_bytes() },
                Record::Event { seq: 3, time_ms: 3, json: e3.as_bytes() },
                Record::TurnEnded(&end),
            ])
            .expect("written");
        assert_eq!(store.last_seq().unwrap(), 3);
        let evs = store.events_after(1, 3, 10, usize::MAX).unwrap();
        assert_eq!(evs.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(evs[1].json, e3.as_bytes());
        assert_eq!(store.events_after(0, 3, 1, usize::MAX).unwrap().len(), 1, "the limit is kept");
        let turns = store.turns(10).unwrap();
        assert_eq!(turns.len(), 1);
        assert_eq!((turns[0].outcome.as_str(), turns[0].result.as_deref(), turns[0].last_seq, turns[0].ended_ms), ("completed", Some("hi"), Some(3), Some(2000)));
        assert_eq!(turns[0].start, s1);
        let convs = store.conversations(10).unwrap();
        assert_eq!(convs.len(), 1);
        assert_eq!((convs[0].id.as_str(), convs[0].runner.as_str(), convs[0].title.as_str()), ("conv-a", "echo", "say hello"));
        // The ACP session of a conversation: none until one is opened, then the newest.
        assert_eq!(store.agent_session("conv-a").unwrap(), None);
        let (a1, a2) = (AgentSession { conversation: "conv-a".into(), runner: "gemini".into(), session_id: "s-1".into() }, AgentSession { conversation: "conv-a".into(), runner: "gemini".into(), session_id: "s-2".into() });
        store.write(&[Record::AgentSession(&a1), Record::AgentSession(&a2)]).expect("written");
        assert_eq!(store.agent_session("conv-a").unwrap(), Some(a2));
        assert_eq!(store.agent_session("conv-z").unwrap(), None, "a conversation the store does not hold has none");
        // Retention keeps the newest, by whole blocks (one write's events); the sequence number
        // survives it.
        assert_eq!(store.prune(1).unwrap(), 0, "the block holding the newest event stays whole");
        let e4 = event(4);
        store.write(&[Record::Event { seq: 4, time_ms: 4, json: e4.as_bytes() }]).expect("written");
        assert_eq!(store.prune(1).unwrap(), 3);
        assert_eq!(store.events_after(0, 10, 10, usize::MAX).unwrap().iter().map(|e| e.seq).collect::<Vec<_>>(), [4]);
        assert_eq!(store.last_seq().unwrap(), 4);
        drop(store);
        let again = SqliteStore::open(&path).expect("the store opens again");
        assert_eq!(again.last_seq().unwrap(), 4);
        // A conversation's turns before a sequence number, newest first.
        let s5 = start(5, "conv-a");
        again.write(&[Record::TurnStarted(&s5), Record::TurnStarted(&start(6, "conv-b"))]).expect("written");
        let before = |seq: i64, limit: usize| again.turns_before("conv-a", seq, limit).unwrap().iter().map(|t| t.start.first_seq).collect::<Vec<_>>();
        assert_eq!((before(i64::MAX, 10), before(5, 10), before(i64::MAX, 1), before(1, 10)), (vec![5, 1], vec![1], vec![5], vec![]));
    }

    #[test]
    fn a_second_open_of_a_held_store_is_refused_until_the_first_is_closed() {
        let path = temp("in-use");
        let first = SqliteStore::open(&path).expect("a new store");
        let e = SqliteStore::open(&path).err().expect("the second open is refused");
        assert!(matches!(e, StoreError::InUse { .. }), "{e}");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        drop(first);
        SqliteStore::open(&path).expect("free again once the first is closed");
    }

    #[test]
    fn a_running_turn_is_closed_as_failed_with_runtime_restarted() {
        let path = temp("running");
        let store = SqliteStore::open(&path).expect("a new store");
        let s = start(7, "conv-b");
        let (e7, e8) = (event(7), event(8));
        store.write(&[Record::Event { seq: 7, time_ms: 7, json: e7.as_bytes() }, Record::TurnStarted(&s), Record::Event { seq: 8, time_ms: 8, json: e8.as_bytes() }]).unwrap();
        let closed = store.close_running_turns(5000).unwrap();
        assert_eq!(closed.len(), 1);
        assert_eq!((closed[0].outcome.as_str(), closed[0].last_seq, closed[0].ended_ms), ("failed", Some(8), Some(5000)));
        let error: serde_json::Value = serde_json::from_str(closed[0].error.as_deref().unwrap()).unwrap();
        assert_eq!(error["code"], super::super::RUNTIME_RESTARTED);
        assert!(store.close_running_turns(6000).unwrap().is_empty(), "closed once");
    }

    #[test]
    fn every_earlier_version_migrates_to_the_current_one_keeping_its_rows() {
        // Sequence numbers 41..=2600 (blocks 0, 1 and 2 of 1024) with a hole, each with its own
        // time and JSON (one with a tab in a string, escaped, and text beyond ASCII).
        let old_events: Vec<(i64, i64, String)> = (41..=2600).filter(|&seq| seq != 1500).map(|seq| (seq, 1_700_000_000_000 + seq * 7, format!(r#"{{"seq":{seq},"event":{{"type":"text","text":"t\t{seq} é"}}}}"#))).collect();
        let old_newest = 2600;
        for from in 0..SCHEMA_VERSION {
            let path = temp(&format!("migrate-{from}"));
            {
                let mut conn = Connection::open(&path).unwrap();
                migrate(&mut conn, 0, from).unwrap();
                if from >= 1 {
                    // The `events` table of versions 1 and 2, one row an event, inserted out of
                    // order, across several blocks of the migration's 1024.
                    let tx = conn.transaction().unwrap();
                    for &(seq, time_ms, ref json) in old_events.iter().rev() {
                        tx.execute("INSERT INTO events (seq, time_ms, json) VALUES (?1, ?2, ?3)", params![seq, time_ms, json]).unwrap();
                    }
                    tx.execute("INSERT INTO meta (key, value) VALUES ('last_seq', ?1)", params![old_newest]).unwrap();
                    tx.commit().unwrap();
                }
                let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
                assert_eq!(version, from);
            }
            let store = SqliteStore::open(&path).unwrap_or_else(|e| panic!("version {from}: {e}"));
            let conn = store.reader();
            let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
            let application: i32 = conn.pragma_query_value(None, "application_id", |r| r.get(0)).unwrap();
            let events_table: i64 = conn.query_row("SELECT count(*) FROM sqlite_schema WHERE name = 'events'", [], |r| r.get(0)).unwrap();
            drop(conn);
            assert_eq!((version, application, events_table), (SCHEMA_VERSION, APPLICATION_ID, 0), "from version {from}");
            assert_eq!(store.last_seq().unwrap(), if from >= 1 { old_newest } else { 0 }, "from version {from}");
            // Every event comes back, in order, with its time and JSON.
            let back: Vec<(i64, i64, String)> = store.events_after(0, i64::MAX, usize::MAX, usize::MAX).unwrap().into_iter().map(|e| (e.seq, e.time_ms, String::from_utf8(e.json).unwrap())).collect();
            assert_eq!(back, if from >= 1 { old_events.clone() } else { vec![] }, "from version {from}");
            assert_eq!(store.events_after(1020, 1030, 6, usize::MAX).unwrap().iter().map(|e| e.seq).collect::<Vec<_>>(), if from >= 1 { (1021..=1026).collect() } else { vec![] }, "from version {from}");
            // The migrated store takes every kind of record.
            let s = start(50, "conv-m");
            let e = event(50);
            let a = AgentSession { conversation: "conv-m".into(), runner: "gemini".into(), session_id: "sess-1".into() };
            store.write(&[Record::Event { seq: 50, time_ms: 1, json: e.as_bytes() }, Record::TurnStarted(&s), Record::AgentSession(&a)]).unwrap_or_else(|e| panic!("version {from}: {e}"));
            assert_eq!(store.turns(1).unwrap().len(), 1);
            assert_eq!(store.agent_session("conv-m").unwrap(), Some(a), "from version {from}");
        }
    }

    #[test]
    fn a_new_database_has_large_pages_and_an_earlier_one_keeps_its_own_with_the_wal_checkpointed_by_size() {
        let pragmas = |store: &SqliteStore| -> (i64, i64) {
            let conn = store.writer();
            (conn.pragma_query_value(None, "page_size", |r| r.get(0)).unwrap(), conn.pragma_query_value(None, "wal_autocheckpoint", |r| r.get(0)).unwrap())
        };
        let fresh = SqliteStore::open(&temp("pages-new")).unwrap();
        assert_eq!(pragmas(&fresh), (PAGE_SIZE, CHECKPOINT_BYTES / PAGE_SIZE));
        let path = temp("pages-old");
        {
            let mut conn = Connection::open(&path).unwrap();
            migrate(&mut conn, 0, 2).unwrap();
        }
        let old = SqliteStore::open(&path).unwrap();
        assert_eq!(pragmas(&old), (4096, CHECKPOINT_BYTES / 4096));
    }

    /// Writes the events `seqs` (each at time `time_ms(seq)`) in one [`Store::write`]: one block.
    /// The blocks as stored: first and last sequence number and count.
    fn blocks(store: &SqliteStore) -> Vec<(i64, i64, i64)> {
        let conn = store.reader();
        let mut stmt = conn.prepare("SELECT first_seq, last_seq, count FROM event_blocks ORDER BY first_seq").unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect()
    }

    #[test]
    fn blocks_of_several_writes_read_back_in_order_with_limits_that_cut_inside_a_block() {
        let store = SqliteStore::open(&temp("blocks-read")).expect("a new store");
        for run in vectors::READ_BLOCKS {
            write_events(&store, run, |seq| 100 + seq);
        }
        assert_eq!(blocks(&store), [(1, 3, 3), (4, 8, 5), (9, 9, 1), (11, 14, 4)]);
        vectors::check_reads(&store);
    }

    #[test]
    fn a_read_stops_once_the_json_reaches_its_byte_bound_past_at_least_one_event() {
        vectors::check_byte_bound(&SqliteStore::open(&temp("blocks-bytes")).expect("a new store"));
    }

    #[test]
    fn a_batch_written_again_changes_nothing_and_the_newer_events_with_it_are_kept() {
        let store = SqliteStore::open(&temp("blocks-retry")).expect("a new store");
        vectors::check_rewrites(&store, || blocks(&store), None);
    }

    #[test]
    fn prune_deletes_whole_blocks_keeping_at_least_the_newest() {
        // (keep, events deleted, first event left), one after another on blocks 1..=3,
        // 4..=8, 9, 10..=13.
        let cases: [(u64, u64, Option<i64>); 6] = [(20, 0, Some(1)), (11, 0, Some(1)), (10, 3, Some(4)), (4, 6, Some(10)), (1, 0, Some(10)), (0, 4, None)];
        let store = SqliteStore::open(&temp("blocks-prune")).expect("a new store");
        for run in [1..=3, 4..=8, 9..=9, 10..=13] {
            write_events(&store, run, |_| 1);
        }
        for (keep, deleted, first) in cases {
            assert_eq!(store.prune(keep).unwrap(), deleted, "prune({keep})");
            let left = seqs(&store);
            assert_eq!(left.first().copied(), first, "prune({keep})");
            assert!(left.len() as u64 >= keep.min(13), "prune({keep}) kept at least the newest {keep}: {left:?}");
        }
        assert_eq!(store.last_seq().unwrap(), 13, "pruning everything keeps the newest sequence number given out");
    }

    #[test]
    fn prune_older_than_deletes_leading_old_blocks_within_the_limit() {
        for (i, (cutoff, limit, deleted, first)) in vectors::PRUNE_BY_AGE.into_iter().enumerate() {
            let store = SqliteStore::open(&temp(&format!("blocks-age-{i}"))).expect("a new store");
            for run in vectors::AGE_BLOCKS {
                write_events(&store, run, vectors::age_time);
            }
            assert_eq!(store.prune_older_than(cutoff, limit).unwrap(), deleted, "prune_older_than({cutoff}, {limit})");
            assert_eq!(seqs(&store).first().copied(), first, "prune_older_than({cutoff}, {limit})");
            assert_eq!(store.last_seq().unwrap(), 15, "the newest sequence number given out stays");
        }
        // The hub's loop, `while prune_older_than(..) > 0 {}`, ends, whatever the limit, and a call
        // returning the limit deleted a block.
        for limit in 1..=16 {
            let store = SqliteStore::open(&temp(&format!("blocks-age-loop-{limit}"))).expect("a new store");
            for run in vectors::AGE_BLOCKS {
                write_events(&store, run, |_| 1);
            }
            let mut calls = 0;
            while store.prune_older_than(i64::MAX, limit).unwrap() > 0 {
                calls += 1;
                assert!(calls <= 5, "limit {limit}: each call deleted a block");
            }
        }
    }

    #[test]
    fn a_block_line_that_does_not_parse_is_skipped_not_a_panic() {
        let store = SqliteStore::open(&temp("blocks-bad")).expect("a new store");
        let data = "1\t10\t{\"a\":1}\nnot a line\n2\tten\t{}\nx\t1\t{}\n3\t30\n4\t40\t{\"b\":\"\t\"}\n\n5\t50\t{}";
        store.writer().execute("INSERT INTO event_blocks (first_seq, last_seq, count, time_ms, data) VALUES (1, 5, 5, 50, ?1)", params![data]).unwrap();
        let back: Vec<(i64, i64, String)> = store.events_after(0, 10, 10, usize::MAX).unwrap().into_iter().map(|e| (e.seq, e.time_ms, String::from_utf8(e.json).unwrap())).collect();
        assert_eq!(back, [(1, 10, r#"{"a":1}"#.to_owned()), (4, 40, "{\"b\":\"\t\"}".to_owned()), (5, 50, "{}".to_owned())]);
        store.writer().execute("INSERT INTO event_blocks (first_seq, last_seq, count, time_ms, data) VALUES (6, 6, 1, 60, x'00ff')", []).unwrap();
        assert_eq!(store.events_after(5, 10, 10, usize::MAX).unwrap(), [], "a block of bytes that are no lines");
    }

    #[test]
    fn a_newer_version_another_application_and_a_file_that_is_not_a_database_are_refused() {
        let newer = temp("newer");
        {
            let mut conn = Connection::open(&newer).unwrap();
            migrate(&mut conn, 0, SCHEMA_VERSION).unwrap();
            conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        }
        let before = std::fs::read(&newer).unwrap();
        let e = SqliteStore::open(&newer).err().expect("a newer store is refused");
        assert!(matches!(e, StoreError::TooNew { found, supported, .. } if found == SCHEMA_VERSION + 1 && supported == SCHEMA_VERSION), "{e}");
        assert!(e.to_string().contains(&newer.display().to_string()), "{e}");
        assert_eq!(std::fs::read(&newer).unwrap(), before, "a refused store is left as it was");

        let other = temp("other");
        Connection::open(&other).unwrap().execute_batch("CREATE TABLE notes (x TEXT)").unwrap();
        let e = SqliteStore::open(&other).err().expect("another application's database is refused");
        assert!(matches!(e, StoreError::NotAStore { .. }) && e.to_string().contains("another application"), "{e}");

        let text = temp("text");
        std::fs::write(&text, "this is a text file, long enough to have a header of a hundred bytes or so, and more: 0123456789abcdef").unwrap();
        let e = SqliteStore::open(&text).err().expect("a text file is refused");
        assert!(matches!(e, StoreError::NotAStore { .. }) && e.to_string().contains("not a SQLite database"), "{e}");
        assert!(e.to_string().contains(&text.display().to_string()), "{e}");

        let folder = temp("folder");
        std::fs::create_dir_all(&folder).unwrap();
        assert!(matches!(SqliteStore::open(&folder), Err(StoreError::Unusable { .. })));
    }
}
