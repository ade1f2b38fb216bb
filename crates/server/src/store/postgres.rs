//! The store in a PostgreSQL database, shared by a fleet of runtimes: every row is keyed by the
//! runtime's name (`--name`), so each name keeps its own sequence, events, turns and
//! conversations, and a runtime is disposable: a new process with the same name and database
//! continues where the last one stopped.
//!
//! The schema is versioned: `openagents_meta` holds `schema_version`, the number of migrations
//! applied (each in its own transaction, serialised between runtimes starting at once by a
//! transaction advisory lock). A database from a newer version of ours is refused, naming it.
//! One runtime at a time holds a name: the writer connection holds a session advisory lock on
//! it for its life, and the server releases the lock when the connection ends, however the
//! process ends (`kill -9` too).
//!
//! When the server goes away, a write fails (and the hub fails the running turn); the next
//! read or write reconnects, at most once per backoff ([`RECONNECT_FIRST`] doubling up to
//! [`RECONNECT_MAX`]), retaking the name's lock first (a runtime that finds its name taken by
//! another while it was cut off writes nothing more). Connections are plain TCP or a Unix
//! socket, without TLS: use PostgreSQL on loopback, a socket, or a network you trust.
//!
//! The `postgres` client runs its own small Tokio runtime, which cannot be entered from inside
//! another: a call made from an async task (a resume reading events) runs on a short-lived
//! thread of its own; the event hub's writer thread calls straight through.
//!
//! Events are kept in blocks, as in the SQLite store: the events of one [`Store::write`] (one
//! group commit of the event hub) are one row of `openagents_event_blocks`, keyed by the name
//! and the block's first sequence number, with its last, how many events it holds, the newest
//! time among them (pruning by age reads it), and the events themselves as lines
//! `<seq>\t<time_ms>\t<json>\n` (the JSON is compact: no raw tab or newline). One row per commit
//! rather than one per event keeps a group commit's cost per event low: a commit of events only
//! is one prepared statement, one round trip. Blocks never overlap (a write leaves out what a
//! block already covers), so in order of `first_seq` they are in order of `last_seq` too, and
//! every read and prune seeks by the primary key. Retention deletes whole blocks only: a block
//! part of which is still to be kept stays whole.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use postgres::{Client, Config, GenericClient, NoTls, Row, Statement};

use super::block::{BLOCK_BUFFER_KEEP, build_blocks, events_of, leading_old_blocks, read_block};
use super::{AgentSession, ConversationCursor, ConversationRecord, ConversationSummary, Outcome, Record, Store, StoreError, StoredEvent, TurnRecord, TurnStart, restarted_error, title_of};

/// The migrations, in order: migration `n` (from 1) takes a database from version `n - 1` to
/// `n`. A released migration is never edited; a change of schema is a new one at the end.
const MIGRATIONS: &[&str] = &[
    // 1: events, turns and conversations by runtime name, and each name's newest sequence
    // number ever given out (which retention cannot take away).
    "CREATE TABLE openagents_events (
        runtime TEXT NOT NULL,
        seq BIGINT NOT NULL,
        time_ms BIGINT NOT NULL,
        json TEXT NOT NULL,
        PRIMARY KEY (runtime, seq)
    );
    CREATE TABLE openagents_turns (
        runtime TEXT NOT NULL,
        first_seq BIGINT NOT NULL,
        assignment TEXT NOT NULL,
        conversation TEXT NOT NULL,
        runner TEXT NOT NULL,
        task TEXT NOT NULL,
        cwd TEXT NOT NULL,
        outcome TEXT NOT NULL,
        result TEXT,
        error TEXT,
        started_ms BIGINT NOT NULL,
        ended_ms BIGINT,
        last_seq BIGINT,
        PRIMARY KEY (runtime, first_seq)
    );
    CREATE INDEX openagents_turns_running ON openagents_turns (runtime) WHERE outcome = 'running';
    CREATE INDEX openagents_turns_by_conversation ON openagents_turns (runtime, conversation, first_seq);
    CREATE TABLE openagents_conversations (
        runtime TEXT NOT NULL,
        id TEXT NOT NULL,
        runner TEXT NOT NULL,
        title TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        updated_ms BIGINT NOT NULL,
        PRIMARY KEY (runtime, id)
    );
    CREATE INDEX openagents_conversations_by_update ON openagents_conversations (runtime, updated_ms);
    CREATE TABLE openagents_runtimes (
        runtime TEXT PRIMARY KEY,
        last_seq BIGINT NOT NULL
    );",
    // 2: the ACP session an agent runner opened for a conversation, and which runner's agent.
    "ALTER TABLE openagents_conversations ADD COLUMN agent_runner TEXT, ADD COLUMN agent_session TEXT;",
    // 3: events in blocks, one row per write instead of one per event (see the module's docs):
    // `time_ms` is the newest (greatest) time of the block's events, `data` its events as lines
    // `<seq>\t<time_ms>\t<json>\n` in order. A block (some 150 KiB for a commit of 1024 events)
    // is compressed with LZ4 where the server has it (PostgreSQL 14 and later, built with it, as
    // Debian's is), else stored uncompressed (`STORAGE EXTERNAL`), never with PostgreSQL's default
    // pglz: measured on PostgreSQL 15 on loopback, fsync on, commits of 1024 and 8192 events of
    // ~150 bytes of JSON with varied text, a write cost 1.4-1.5 us/event (1024) and 1.07-1.10
    // (8192) with LZ4, 1.6-1.7 and 1.12-1.14 uncompressed, 3.5-3.6 and 3.1-3.2 with pglz (its
    // compression is the CPU cost); LZ4 tables are a third of the size, and reading them back
    // costs about 4 % more than uncompressed. `EXECUTE` keeps a server without LZ4 (or too old
    // to know `SET COMPRESSION`) from failing the migration: it keeps `EXTERNAL`. The events
    // already stored move into blocks of 1024 consecutive sequence numbers of their name
    // (`string_agg`'s own ORDER BY keeps the lines in order), and `openagents_events` goes.
    "CREATE TABLE openagents_event_blocks (
        runtime TEXT NOT NULL,
        first_seq BIGINT NOT NULL,
        last_seq BIGINT NOT NULL,
        count BIGINT NOT NULL,
        time_ms BIGINT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (runtime, first_seq)
    );
    ALTER TABLE openagents_event_blocks ALTER COLUMN data SET STORAGE EXTERNAL;
    DO $$ BEGIN
        EXECUTE 'ALTER TABLE openagents_event_blocks ALTER COLUMN data SET STORAGE EXTENDED, ALTER COLUMN data SET COMPRESSION lz4';
    EXCEPTION WHEN syntax_error OR feature_not_supported THEN NULL;
    END $$;
    INSERT INTO openagents_event_blocks (runtime, first_seq, last_seq, count, time_ms, data)
        SELECT runtime, min(seq), max(seq), count(*), max(time_ms), string_agg(seq::text || chr(9) || time_ms::text || chr(9) || json || chr(10), '' ORDER BY seq)
        FROM openagents_events GROUP BY runtime, seq / 1024;
    DROP TABLE openagents_events;",
];

/// The PostgreSQL store version this build writes and reads (the number of migrations).
pub const POSTGRES_SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// How long connecting may take, unless the URL says (`connect_timeout`): a server that has not
/// answered by then is taken as unreachable (start-up is refused; a write fails).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long data sent to the server may go unacknowledged before the connection is taken as lost
/// (`TCP_USER_TIMEOUT`), unless the URL says (`tcp_user_timeout`): a server that vanished
/// without closing the connection (its machine gone, the network cut) fails a write within this,
/// not after the system's many minutes of retransmissions.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(15);

/// The wait before the first reconnection attempt after a failed one; each failure doubles it.
pub const RECONNECT_FIRST: Duration = Duration::from_millis(100);

/// The longest wait between reconnection attempts: long enough that a server that is down
/// costs a failed connect at most every 2 s (each blocks the writer up to [`CONNECT_TIMEOUT`]),
/// short enough that writing resumes soon after it is back.
pub const RECONNECT_MAX: Duration = Duration::from_secs(2);

/// The key of the transaction advisory lock that serialises migrations (two `int4` keys: a
/// space apart from the one-`bigint` keys of the name locks). "OAgt", 1.
const MIGRATION_LOCK: (i32, i32) = (0x4f41_6774, 1);

/// The session advisory lock key of runtime `name`: FNV-1a (64 bits) of `openagents:NAME`,
/// stable across versions and servers.
fn name_lock_key(name: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in "openagents:".bytes().chain(name.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h as i64
}

/// `url` for a person: scheme, user, hosts, ports and database; never the password or the
/// query string's options (which may hold one).
fn describe_config(config: &Config) -> String {
    let user = config.get_user().map(|u| format!("{u}@")).unwrap_or_default();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let host = match h {
                postgres::config::Host::Tcp(h) => h.clone(),
                postgres::config::Host::Unix(p) => p.display().to_string(),
            };
            match config.get_ports().get(i).or(config.get_ports().first()) {
                Some(port) => format!("{host}:{port}"),
                None => host,
            }
        })
        .collect();
    format!("postgres://{user}{}/{}", hosts.join(","), config.get_dbname().unwrap_or(""))
}

/// One connection, opened again when it is lost.
struct Session {
    client: Option<Client>,
    /// Whether this connection holds the name's lock (the writer's does).
    holds_name: bool,
    /// When the next attempt may be made, after a failed one.
    retry_at: Option<Instant>,
    backoff: Duration,
    /// Why the last attempt failed.
    last_failure: String,
    /// The statements prepared on `client`'s connection (emptied with each new connection).
    prepared: Prepared,
}

impl Session {
    fn new() -> Session {
        Session { client: None, holds_name: false, retry_at: None, backoff: RECONNECT_FIRST, last_failure: String::new(), prepared: Prepared::default() }
    }
}

/// Statements prepared on one connection, by their SQL, each prepared once: a prepared
/// statement runs in one round trip to the server, a statement given as text in two (parse and
/// describe, then bind and execute).
#[derive(Default)]
struct Prepared(HashMap<&'static str, Statement>);

impl Prepared {
    /// `sql` prepared on `client`'s connection (which must be the one this cache is for).
    fn get(&mut self, client: &mut impl GenericClient, sql: &'static str) -> Result<Statement, postgres::Error> {
        if let Some(statement) = self.0.get(sql) {
            return Ok(statement.clone());
        }
        let statement = client.prepare(sql)?;
        self.0.insert(sql, statement.clone());
        Ok(statement)
    }
}

/// Events, turns and conversations of one runtime name in a PostgreSQL database.
pub struct PostgresStore {
    config: Config,
    name: String,
    /// `postgres://user@host:port/db, runtime NAME`.
    described: String,
    writer: Mutex<Session>,
    reader: Mutex<Session>,
    /// Where a write builds its block's `data`, reused (locked by a write only, before `writer`).
    block: Mutex<Vec<u8>>,
}

/// `f`, run on this thread, or on a short-lived one of its own when this one is inside a Tokio
/// runtime (where the client's own runtime cannot be entered): `None` when no thread could be
/// started or `f` panicked.
fn off_runtime<R: Send>(f: impl FnOnce() -> R + Send) -> Option<R> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Some(f());
    }
    std::thread::scope(|scope| std::thread::Builder::new().name("openagents-postgres".into()).spawn_scoped(scope, f).ok()?.join().ok())
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // Closing a connection runs the client's runtime too.
        let clients: Vec<Client> = [&mut self.writer, &mut self.reader].into_iter().filter_map(|s| s.get_mut().unwrap_or_else(|p| p.into_inner()).client.take()).collect();
        off_runtime(move || drop(clients));
    }
}

impl PostgresStore {
    /// Connects to the database at `url` as runtime `name`, creates or migrates our tables to
    /// [`POSTGRES_SCHEMA_VERSION`], and takes the name's lock for this process.
    ///
    /// # Errors
    ///
    /// Each names the server and database (never the password): [`StoreError::Unusable`] (a URL
    /// that does not parse, a server that cannot be reached within [`CONNECT_TIMEOUT`], refused
    /// credentials, a failed migration), [`StoreError::TooNew`] (tables of a newer version of
    /// ours), [`StoreError::InUse`] (a live runtime holds the name).
    pub fn open(url: &str, name: &str) -> Result<PostgresStore, StoreError> {
        off_runtime(|| PostgresStore::open_here(url, name)).unwrap_or_else(|| Err(StoreError::Unusable { path: "postgres://…".into(), reason: "cannot start a thread to connect on".into() }))
    }

    fn open_here(url: &str, name: &str) -> Result<PostgresStore, StoreError> {
        let mut config: Config = url.parse().map_err(|e| StoreError::Unusable { path: "postgres://…".into(), reason: format!("the URL does not parse: {}", reason(&e)) })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(SEND_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("openagents");
        }
        let described = format!("{}, runtime {name}", describe_config(&config));
        let store = PostgresStore {
            config,
            name: name.to_owned(),
            described,
            writer: Mutex::new(Session::new()),
            reader: Mutex::new(Session::new()),
            block: Mutex::new(Vec::new()),
        };
        let unusable = |reason: String| StoreError::Unusable { path: store.described.clone().into(), reason };
        let mut client = store.config.connect(NoTls).map_err(|e| unusable(format!("cannot connect to PostgreSQL: {}", reason(&e))))?;
        store.migrate(&mut client)?;
        if !try_lock_name(&mut client, name).map_err(|e| unusable(reason(&e)))? {
            return Err(StoreError::InUse { path: store.described.clone().into() });
        }
        {
            let mut writer = store.session(&store.writer);
            writer.client = Some(client);
            writer.holds_name = true;
        }
        Ok(store)
    }

    /// The runtime name this store keeps the history of.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn session<'a>(&self, s: &'a Mutex<Session>) -> std::sync::MutexGuard<'a, Session> {
        s.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn io(&self, reason: impl std::fmt::Display) -> StoreError {
        StoreError::Io { path: self.described.clone().into(), reason: reason.to_string() }
    }

    /// Creates our tables, or brings them to this version, refusing a newer one.
    fn migrate(&self, client: &mut Client) -> Result<(), StoreError> {
        let unusable = |e: postgres::Error| StoreError::Unusable { path: self.described.clone().into(), reason: reason(&e) };
        let mut tx = client.transaction().map_err(unusable)?;
        tx.execute("SELECT pg_advisory_xact_lock($1, $2)", &[&MIGRATION_LOCK.0, &MIGRATION_LOCK.1]).map_err(unusable)?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS openagents_meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL);
             INSERT INTO openagents_meta (key, value) VALUES ('schema_version', 0) ON CONFLICT (key) DO NOTHING;",
        )
        .map_err(unusable)?;
        let version: i64 = tx.query_one("SELECT value FROM openagents_meta WHERE key = 'schema_version'", &[]).map_err(unusable)?.get(0);
        if version > POSTGRES_SCHEMA_VERSION {
            return Err(StoreError::TooNew { path: self.described.clone().into(), found: version, supported: POSTGRES_SCHEMA_VERSION });
        }
        if version < 0 {
            return Err(StoreError::NotAStore { path: self.described.clone().into(), reason: format!("its store version is {version}") });
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(usize::try_from(version).unwrap_or(0)) {
            tx.batch_execute(sql).map_err(unusable)?;
            let reached = i as i64 + 1;
            tx.execute("UPDATE openagents_meta SET value = $1 WHERE key = 'schema_version'", &[&reached]).map_err(unusable)?;
            tracing::debug!(version = reached, "store migrated");
        }
        tx.commit().map_err(unusable)
    }

    /// Runs `op` on `session`'s connection (connecting again first when it was lost, at most
    /// once per backoff), on a thread of its own when called from inside a Tokio runtime. A
    /// statement that fails because the connection was lost is tried once more on a new one.
    fn with<R: Send>(&self, session: &Mutex<Session>, op: impl Fn(&mut Client, &str) -> Result<R, postgres::Error> + Send + Sync) -> Result<R, StoreError> {
        self.with_prepared(session, |client, _, name| op(client, name))
    }

    /// [`PostgresStore::with`], `op` given the statements prepared on the connection too.
    fn with_prepared<R: Send>(&self, session: &Mutex<Session>, op: impl Fn(&mut Client, &mut Prepared, &str) -> Result<R, postgres::Error> + Send + Sync) -> Result<R, StoreError> {
        let run = || {
            let mut s = self.session(session);
            let mut tried_again = false;
            loop {
                self.connected(&mut s)?;
                let Session { client: Some(client), prepared, .. } = &mut *s else { return Err(self.io("no connection")) };
                match op(client, prepared, &self.name) {
                    Ok(r) => return Ok(r),
                    Err(e) if client.is_closed() => {
                        s.client = None;
                        let why = reason(&e);
                        tracing::warn!(store = %self.described, "the connection to PostgreSQL was lost: {why}");
                        if tried_again {
                            return Err(self.io(format!("the connection to PostgreSQL was lost: {why}")));
                        }
                        tried_again = true;
                    }
                    Err(e) => return Err(self.io(reason(&e))),
                }
            }
        };
        off_runtime(run).unwrap_or_else(|| Err(self.io("the PostgreSQL client could not be run (no thread, or it panicked)")))
    }

    /// `s`'s live connection, made now when there is none and the backoff allows.
    fn connected<'s>(&self, s: &'s mut Session) -> Result<&'s mut Client, StoreError> {
        if s.client.as_ref().is_some_and(Client::is_closed) {
            s.client = None;
        }
        if s.client.is_none() {
            let now = Instant::now();
            if let Some(at) = s.retry_at
                && now < at
            {
                return Err(self.io(format!("PostgreSQL is unreachable ({}); the next attempt to connect is in {} ms", s.last_failure, at.duration_since(now).as_millis())));
            }
            let attempt = self.config.connect(NoTls).map_err(|e| format!("cannot connect: {}", reason(&e))).and_then(|mut c| {
                if !s.holds_name {
                    return Ok(c);
                }
                match try_lock_name(&mut c, &self.name) {
                    Ok(true) => Ok(c),
                    Ok(false) => Err(format!("the runtime name {} was taken by another runtime while this one was cut off; this one writes nothing more", self.name)),
                    Err(e) => Err(format!("cannot lock the runtime name: {}", reason(&e))),
                }
            });
            match attempt {
                Ok(c) => {
                    tracing::info!(store = %self.described, "connected to PostgreSQL again");
                    s.prepared = Prepared::default();
                    s.client = Some(c);
                    s.retry_at = None;
                    s.backoff = RECONNECT_FIRST;
                }
                Err(reason) => {
                    s.retry_at = Some(now + s.backoff);
                    s.backoff = (s.backoff * 2).min(RECONNECT_MAX);
                    s.last_failure.clone_from(&reason);
                    return Err(self.io(reason));
                }
            }
        }
        s.client.as_mut().ok_or_else(|| self.io("no connection"))
    }
}

/// `e` with its causes (the client's own message names only the kind: `db error`, `error
/// connecting to server`).
fn reason(e: &postgres::Error) -> String {
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

/// Takes runtime `name`'s session lock on `client`'s connection: whether it was free.
fn try_lock_name(client: &mut Client, name: &str) -> Result<bool, postgres::Error> {
    Ok(client.query_one("SELECT pg_try_advisory_lock($1)", &[&name_lock_key(name)])?.get(0))
}

/// A conversation's columns and how many turns it has (by `openagents_turns_by_conversation`).
/// Ids compare bytewise (`COLLATE "C"`), as in SQLite and in [`ConversationCursor::precedes`],
/// whatever the database's collation.
const CONVERSATION_SUMMARY: &str = "SELECT c.id, c.runner, c.title, c.created_ms, c.updated_ms,
    (SELECT count(*) FROM openagents_turns t WHERE t.runtime = c.runtime AND t.conversation = c.id)
    FROM openagents_conversations c";

fn conversation_summary_row(r: &Row) -> ConversationSummary {
    ConversationSummary {
        conversation: ConversationRecord { id: r.get(0), runner: r.get(1), title: r.get(2), created_ms: r.get(3), updated_ms: r.get(4) },
        turns: r.get::<_, i64>(5).max(0) as u64,
    }
}

const TURN_COLUMNS: &str = "first_seq, assignment, conversation, runner, task, cwd, outcome, result, error, started_ms, ended_ms, last_seq";

fn turn_row(r: &Row) -> TurnRecord {
    TurnRecord {
        start: TurnStart { first_seq: r.get(0), assignment: r.get(1), conversation: r.get(2), runner: r.get(3), task: r.get(4), cwd: r.get(5), started_ms: r.get(9) },
        outcome: r.get(6),
        result: r.get(7),
        error: r.get(8),
        ended_ms: r.get(10),
        last_seq: r.get(11),
    }
}

fn limit_of(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// A block's lines as text, checked once for the whole block: itself when it is UTF-8 (always:
/// the hub's JSON is serde_json's), else with what is not replaced (PostgreSQL stores no text
/// that is not valid in its encoding).
fn block_text(block: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(block) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(block),
    }
}

/// The newest sequence number in runtime `$1`'s blocks: the last of the block that starts last
/// (blocks do not overlap), by one seek.
const NEWEST_BLOCKED_SEQ: &str = "(SELECT last_seq FROM openagents_event_blocks WHERE runtime = $1 ORDER BY first_seq DESC LIMIT 1)";

/// A write's one block, in one statement (its own transaction when the write is events only): it
/// is inserted (`$1` name, `$2` first, `$3` last sequence number, `$4` count, `$5` time, `$6`
/// lines) and the name's newest sequence number raised to its last, unless a stored block
/// already holds one of its sequence numbers: the last block starting at or before `$3` is the
/// only one that can (blocks do not overlap), found by one seek. Returns how many blocks went
/// in (0 or 1).
const INSERT_BLOCK_UNLESS_COVERED: &str = "WITH block AS (
        INSERT INTO openagents_event_blocks (runtime, first_seq, last_seq, count, time_ms, data)
        SELECT $1::text, $2::bigint, $3::bigint, $4::bigint, $5::bigint, $6::text
        WHERE NOT coalesce((SELECT last_seq >= $2::bigint FROM openagents_event_blocks WHERE runtime = $1 AND first_seq <= $3::bigint ORDER BY first_seq DESC LIMIT 1), false)
        ON CONFLICT (runtime, first_seq) DO NOTHING
        RETURNING last_seq
    ), newest AS (
        INSERT INTO openagents_runtimes (runtime, last_seq) SELECT $1, last_seq FROM block
        ON CONFLICT (runtime) DO UPDATE SET last_seq = greatest(openagents_runtimes.last_seq, excluded.last_seq)
    )
    SELECT count(*) FROM block";

/// The blocks of runtime `$1` that hold any of `$2..=$3` (as `(first_seq, last_seq)`, in
/// order): the last one starting at or before `$2` if it reaches `$2`, and every one starting in
/// `$2..=$3` (blocks do not overlap, so no other can), found by seeks on the primary key.
const BLOCKS_COVERING: &str = "SELECT first_seq, last_seq FROM openagents_event_blocks
    WHERE runtime = $1 AND first_seq >= coalesce((SELECT max(first_seq) FROM openagents_event_blocks WHERE runtime = $1 AND first_seq <= $2), $2) AND first_seq <= $3 AND last_seq >= $2
    ORDER BY first_seq";

/// Writes `events` (in order of sequence number, each once) in `tx` when stored blocks hold
/// some of them (a batch written again after a commit whose success was not heard, now with
/// newer events after it): those are left out, as the store has them, and the others go in one
/// block per run between stored blocks, so blocks never overlap. The name's newest sequence
/// number is raised to the newest of `events` (left out or not).
fn write_around_stored_blocks(tx: &mut postgres::Transaction<'_>, name: &str, events: &[(i64, i64, &[u8])]) -> Result<(), postgres::Error> {
    let (Some(&(lo, ..)), Some(&(hi, ..))) = (events.first(), events.last()) else { return Ok(()) };
    let covered: Vec<(i64, i64)> = tx.query(BLOCKS_COVERING, &[&name, &lo, &hi])?.iter().map(|r| (r.get(0), r.get(1))).collect();
    let insert = tx.prepare("INSERT INTO openagents_event_blocks (runtime, first_seq, last_seq, count, time_ms, data) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (runtime, first_seq) DO NOTHING")?;
    build_blocks(events, &covered, &mut Vec::new(), |run, block| {
        tx.execute(&insert, &[&name, &run.first, &run.last, &run.count, &run.time_ms, &block_text(block).as_ref()]).map(drop)
    })?;
    tx.execute(
        "INSERT INTO openagents_runtimes (runtime, last_seq) VALUES ($1, $2) ON CONFLICT (runtime) DO UPDATE SET last_seq = greatest(openagents_runtimes.last_seq, excluded.last_seq)",
        &[&name, &hi],
    )?;
    Ok(())
}

/// What a write does besides its events, as statements prepared once per connection.
const TURN_STARTED: &str = "INSERT INTO openagents_turns (runtime, first_seq, assignment, conversation, runner, task, cwd, outcome, started_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, 'running', $8) ON CONFLICT (runtime, first_seq) DO NOTHING";
const CONVERSATION_STARTED: &str = "INSERT INTO openagents_conversations (runtime, id, runner, title, created_ms, updated_ms) VALUES ($1, $2, $3, $4, $5, $5)
    ON CONFLICT (runtime, id) DO UPDATE SET updated_ms = excluded.updated_ms";
const TURN_ENDED: &str = "UPDATE openagents_turns SET outcome = $3, result = $4, error = $5, ended_ms = $6, last_seq = $7 WHERE runtime = $1 AND first_seq = $2";
const AGENT_SESSION: &str = "UPDATE openagents_conversations SET agent_runner = $3, agent_session = $4 WHERE runtime = $1 AND id = $2";

impl Store for PostgresStore {
    fn describe(&self) -> String {
        self.described.clone()
    }

    fn durable(&self) -> bool {
        true
    }

    fn write(&self, batch: &[Record<'_>]) -> Result<(), StoreError> {
        let only_events = batch.iter().all(|r| matches!(r, Record::Event { .. }));
        let events = events_of(batch);
        // The events' one block, built once (a try again on a new connection sends it as it is).
        let mut buffer = self.block.lock().unwrap_or_else(|p| p.into_inner());
        let mut run = None;
        build_blocks::<std::convert::Infallible>(&events, &[], &mut buffer, |r, _| {
            run = Some(r);
            Ok(())
        })
        .unwrap_or_else(|never| match never {});
        let block = block_text(&buffer);
        let written = self.with_prepared(&self.writer, |client, prepared, name| {
            let mut covered = false;
            if only_events && let Some(run) = run {
                // Events only: one statement, its own transaction.
                let insert = prepared.get(client, INSERT_BLOCK_UNLESS_COVERED)?;
                let inserted: i64 = client.query_one(&insert, &[&name, &run.first, &run.last, &run.count, &run.time_ms, &block.as_ref()])?.get(0);
                if inserted == 1 {
                    return Ok(());
                }
                covered = true;
            }
            let mut tx = client.transaction()?;
            if let Some(run) = run {
                if !covered {
                    let insert = prepared.get(&mut tx, INSERT_BLOCK_UNLESS_COVERED)?;
                    let inserted: i64 = tx.query_one(&insert, &[&name, &run.first, &run.last, &run.count, &run.time_ms, &block.as_ref()])?.get(0);
                    covered = inserted == 0;
                }
                if covered {
                    write_around_stored_blocks(&mut tx, name, &events)?;
                }
            }
            for record in batch {
                match record {
                    Record::Event { .. } => {}
                    Record::TurnStarted(t) => {
                        let turn = prepared.get(&mut tx, TURN_STARTED)?;
                        tx.execute(&turn, &[&name, &t.first_seq, &t.assignment, &t.conversation, &t.runner, &t.task, &t.cwd, &t.started_ms])?;
                        let conversation = prepared.get(&mut tx, CONVERSATION_STARTED)?;
                        tx.execute(&conversation, &[&name, &t.conversation, &t.runner, &title_of(&t.task), &t.started_ms])?;
                    }
                    Record::TurnEnded(t) => {
                        let ended = prepared.get(&mut tx, TURN_ENDED)?;
                        tx.execute(&ended, &[&name, &t.first_seq, &t.outcome.as_str(), &t.result, &t.error, &t.ended_ms, &t.last_seq])?;
                    }
                    Record::AgentSession(a) => {
                        let session = prepared.get(&mut tx, AGENT_SESSION)?;
                        tx.execute(&session, &[&name, &a.conversation, &a.runner, &a.session_id])?;
                    }
                }
            }
            tx.commit()
        });
        drop(block);
        buffer.clear();
        if buffer.capacity() > BLOCK_BUFFER_KEEP {
            *buffer = Vec::new();
        }
        written
    }

    fn last_seq(&self) -> Result<i64, StoreError> {
        self.with(&self.reader, |client, name| {
            Ok(client
                .query_one(
                    &format!(
                        "SELECT greatest(
                            coalesce((SELECT last_seq FROM openagents_runtimes WHERE runtime = $1), 0),
                            coalesce({NEWEST_BLOCKED_SEQ}, 0),
                            coalesce((SELECT max(greatest(first_seq, coalesce(last_seq, 0))) FROM openagents_turns WHERE runtime = $1), 0))"
                    ),
                    &[&name],
                )?
                .get::<_, i64>(0))
        })
    }

    /// Reads the blocks that hold events of the range, in order, up to the first that surely
    /// completes `limit`, in one statement: no block is read past it. "Surely" counts from what
    /// a block's row says: of its `count` events (each sequence number once, between its first
    /// and last), at least those past its first `after + 1 - first_seq` sequence numbers and
    /// before its last `last_seq - through` are in the range. When a block holds fewer than its
    /// count says (lines that do not parse), the read goes on after it.
    fn events_after(&self, after: i64, through: i64, limit: usize, max_bytes: usize) -> Result<Vec<StoredEvent>, StoreError> {
        if limit == 0 || through <= after {
            return Ok(Vec::new());
        }
        self.with_prepared(&self.reader, |client, prepared, name| {
            // From the last block starting at or before `after` (it may hold `after + 1`), by
            // one seek; blocks that end at or before `after` are passed over. At most `limit`
            // candidates' bounds are read (each holds an event of the range but in corner
            // cases), and numeric sums cannot overflow.
            let read = prepared.get(
                &mut *client,
                "WITH candidates AS (
                    SELECT first_seq, greatest(0, count - greatest(0, $2::bigint::numeric + 1 - first_seq) - greatest(0, last_seq - $3::bigint::numeric)) AS inside
                    FROM openagents_event_blocks
                    WHERE runtime = $1 AND first_seq >= coalesce((SELECT max(first_seq) FROM openagents_event_blocks WHERE runtime = $1 AND first_seq <= $2), $2) AND first_seq <= $3 AND last_seq > $2
                    ORDER BY first_seq LIMIT $4
                ), enough AS (
                    SELECT first_seq FROM (SELECT first_seq, sum(inside) OVER (ORDER BY first_seq) AS total FROM candidates) c WHERE total >= $4 ORDER BY first_seq LIMIT 1
                )
                SELECT first_seq, last_seq, data, EXISTS (SELECT FROM enough) FROM openagents_event_blocks
                WHERE runtime = $1 AND first_seq >= (SELECT min(first_seq) FROM candidates) AND first_seq <= coalesce((SELECT first_seq FROM enough), $3) AND last_seq > $2
                ORDER BY first_seq",
            )?;
            let (mut out, mut from, mut bytes) = (Vec::new(), after, 0);
            loop {
                let rows = client.query(&read, &[&name, &from, &through, &limit_of(limit - out.len())])?;
                let (mut cut, mut last) = (false, None);
                for row in &rows {
                    if out.len() >= limit || (bytes >= max_bytes && !out.is_empty()) {
                        break;
                    }
                    let (first_seq, last_seq, data): (i64, i64, &str) = (row.get(0), row.get(1), row.get(2));
                    read_block(first_seq, data.as_bytes(), (from, through), (limit, max_bytes), &mut out, &mut bytes);
                    (cut, last) = (row.get(3), Some(last_seq));
                }
                // Short of `limit` only because a block held fewer than its count says: on
                // after it (its last sequence number is above `from`, so this ends).
                match last {
                    Some(last) if cut && out.len() < limit && (bytes < max_bytes || out.is_empty()) && last < through => from = last,
                    _ => return Ok(out),
                }
            }
        })
    }

    /// Deletes the blocks that end at or before the newest sequence number less `keep`: whole
    /// blocks only, so at least the newest `keep` events stay (a block that holds both some of
    /// them and older ones stays whole). Returns how many events went.
    fn prune(&self, keep: u64) -> Result<u64, StoreError> {
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        self.with(&self.writer, |client, name| {
            // Two statements, no transaction: the name's lock makes this connection its only
            // writer.
            let Some(newest) = client.query_opt(&format!("SELECT {NEWEST_BLOCKED_SEQ}"), &[&name])?.and_then(|r| r.get::<_, Option<i64>>(0)) else { return Ok(0) };
            let line = newest.saturating_sub(keep);
            // `first_seq <= line` bounds the scan of the primary key; `last_seq` decides.
            let row = client.query_one(
                "WITH gone AS (DELETE FROM openagents_event_blocks WHERE runtime = $1 AND first_seq <= $2 AND last_seq <= $2 RETURNING count)
                 SELECT coalesce(sum(count), 0)::bigint FROM gone",
                &[&name, &line],
            )?;
            Ok(row.get::<_, i64>(0).max(0) as u64)
        })
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
        self.with(&self.writer, |client, name| {
            // The oldest `limit + 1` blocks (each holds an event at least; the primary key: no
            // scan beyond them), and the last of the leading run wholly before the cutoff. Two
            // statements, no transaction: the name's lock makes this connection its only writer.
            let rows = client.query("SELECT first_seq, count, time_ms FROM openagents_event_blocks WHERE runtime = $1 ORDER BY first_seq LIMIT $2", &[&name, &i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1)])?;
            let (through, deleted) = leading_old_blocks(rows.iter().map(|row| (row.get(0), row.get(1), row.get(2))), cutoff_ms, limit);
            if let Some(through) = through {
                client.execute("DELETE FROM openagents_event_blocks WHERE runtime = $1 AND first_seq <= $2", &[&name, &through])?;
            }
            Ok(deleted)
        })
    }

    fn close_running_turns(&self, now_ms: i64) -> Result<Vec<TurnRecord>, StoreError> {
        let error = restarted_error();
        self.with(&self.writer, |client, name| {
            // One turn runs at a time: every event from its first on is the stopped turn's.
            let rows = client.query(
                &format!(
                    "UPDATE openagents_turns SET outcome = $2, error = $3, ended_ms = $4,
                         last_seq = greatest(first_seq, coalesce({NEWEST_BLOCKED_SEQ}, first_seq))
                     WHERE runtime = $1 AND outcome = 'running'
                     RETURNING {TURN_COLUMNS}"
                ),
                &[&name, &Outcome::Failed.as_str(), &error, &now_ms],
            )?;
            let mut closed: Vec<TurnRecord> = rows.iter().map(turn_row).collect();
            closed.sort_by_key(|t| t.start.first_seq);
            Ok(closed)
        })
    }

    fn turns(&self, limit: usize) -> Result<Vec<TurnRecord>, StoreError> {
        self.with(&self.reader, |client, name| {
            let rows = client.query(&format!("SELECT {TURN_COLUMNS} FROM openagents_turns WHERE runtime = $1 ORDER BY first_seq DESC LIMIT $2"), &[&name, &limit_of(limit)])?;
            Ok(rows.iter().map(turn_row).collect())
        })
    }

    fn conversations(&self, limit: usize) -> Result<Vec<ConversationRecord>, StoreError> {
        self.with(&self.reader, |client, name| {
            let rows = client.query("SELECT id, runner, title, created_ms, updated_ms FROM openagents_conversations WHERE runtime = $1 ORDER BY updated_ms DESC, id COLLATE \"C\" LIMIT $2", &[&name, &limit_of(limit)])?;
            Ok(rows.iter().map(|r| ConversationRecord { id: r.get(0), runner: r.get(1), title: r.get(2), created_ms: r.get(3), updated_ms: r.get(4) }).collect())
        })
    }

    fn turns_before(&self, conversation: &str, before_seq: i64, limit: usize) -> Result<Vec<TurnRecord>, StoreError> {
        self.with(&self.reader, |client, name| {
            let rows = client.query(
                &format!("SELECT {TURN_COLUMNS} FROM openagents_turns WHERE runtime = $1 AND conversation = $2 AND first_seq < $3 ORDER BY first_seq DESC LIMIT $4"),
                &[&name, &conversation, &before_seq, &limit_of(limit)],
            )?;
            Ok(rows.iter().map(turn_row).collect())
        })
    }

    fn agent_session(&self, conversation: &str) -> Result<Option<AgentSession>, StoreError> {
        self.with(&self.reader, |client, name| {
            let row = client.query_opt(
                "SELECT agent_runner, agent_session FROM openagents_conversations WHERE runtime = $1 AND id = $2 AND agent_runner IS NOT NULL AND agent_session IS NOT NULL",
                &[&name, &conversation],
            )?;
            Ok(row.map(|r| AgentSession { conversation: conversation.to_owned(), runner: r.get(0), session_id: r.get(1) }))
        })
    }

    fn conversations_page(&self, after: Option<&ConversationCursor>, limit: usize) -> Result<Vec<ConversationSummary>, StoreError> {
        let (updated, id) = (after.map(|a| a.updated_ms), after.map(|a| a.id.as_str()));
        self.with(&self.reader, |client, name| {
            let rows = client.query(
                &format!(
                    "{CONVERSATION_SUMMARY} WHERE c.runtime = $1 AND ($2::BIGINT IS NULL OR c.updated_ms < $2 OR (c.updated_ms = $2 AND c.id COLLATE \"C\" > $3))
                     ORDER BY c.updated_ms DESC, c.id COLLATE \"C\" LIMIT $4"
                ),
                &[&name, &updated, &id, &limit_of(limit)],
            )?;
            Ok(rows.iter().map(conversation_summary_row).collect())
        })
    }

    fn conversation_turns(&self, id: &str, after_seq: i64, limit: usize) -> Result<Option<(ConversationSummary, Vec<TurnRecord>)>, StoreError> {
        self.with(&self.reader, |client, name| {
            // One snapshot: the count and the turns agree.
            let mut tx = client.build_transaction().isolation_level(postgres::IsolationLevel::RepeatableRead).read_only(true).start()?;
            let Some(summary) = tx.query_opt(&format!("{CONVERSATION_SUMMARY} WHERE c.runtime = $1 AND c.id = $2"), &[&name, &id])? else { return Ok(None) };
            let turns = tx.query(&format!("SELECT {TURN_COLUMNS} FROM openagents_turns WHERE runtime = $1 AND conversation = $2 AND first_seq > $3 ORDER BY first_seq LIMIT $4"), &[&name, &id, &after_seq, &limit_of(limit)])?;
            tx.commit()?;
            Ok(Some((conversation_summary_row(&summary), turns.iter().map(turn_row).collect())))
        })
    }
}
