//! `PostgresStore` against a real server (`make test-postgres` sets `OPENAGENTS_TEST_POSTGRES`):
//! the store contract as the SQLite store keeps it (events, turns and conversations written and
//! read back, retention by count and by age, running turns closed once as `runtime_restarted`),
//! every row keyed by the runtime name (two names never see each other's), the history pages
//! (a cursor with ties ordered by bytewise id, turns counted per name), one live store per
//! name, a newer schema refused, a version-1 database migrated keeping its rows, and the event hub on it continuing a sequence across a reopen
//! and serving a resume from the database from inside a Tokio runtime.
//!
//! Without `OPENAGENTS_TEST_POSTGRES` each test says it was not run and returns.

use std::sync::Arc;

use openagents_protocol::RuntimeEvent;
use openagents_server::events::EventHub;
use openagents_server::store::{AgentSession, ConversationCursor, Outcome, POSTGRES_SCHEMA_VERSION, PostgresStore, Record, Store, StoreError, TurnEnd, TurnStart};

/// A new, empty database on the test server: its URL, or `None` after saying the test was not run.
fn database(test: &str) -> Option<String> {
    let Some(url) = std::env::var("OPENAGENTS_TEST_POSTGRES").ok().filter(|u| !u.is_empty()) else {
        eprintln!("{test}: not run: OPENAGENTS_TEST_POSTGRES is not set (make test-postgres starts a server and sets it)");
        return None;
    };
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap_or_else(|e| panic!("the test server at {url}: {e}"));
    let db = format!("oa_store_{test}_{}", std::process::id());
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db}")).expect("the old test database dropped");
    admin.batch_execute(&format!("CREATE DATABASE {db}")).expect("a test database");
    let base = url.rsplit_once('/').map_or(url.as_str(), |(base, _)| base);
    Some(format!("{base}/{db}"))
}

fn start(first_seq: i64, conversation: &str) -> TurnStart {
    TurnStart { assignment: format!("asg-{first_seq}"), conversation: conversation.into(), runner: "echo".into(), task: "say hello\nand more".into(), cwd: "/tmp".into(), started_ms: 1000 + first_seq, first_seq }
}

fn event(seq: i64) -> String {
    format!(r#"{{"seq":{seq},"time_ms":1,"event":{{"type":"text","text":"t{seq}"}}}}"#)
}

fn seqs(store: &dyn Store) -> Vec<i64> {
    store.events_after(0, i64::MAX, 1000).expect("events").iter().map(|e| e.seq).collect()
}

#[test]
fn events_turns_and_conversations_are_written_and_read_back_by_name() {
    let Some(url) = database("roundtrip") else { return };
    let store = PostgresStore::open(&url, "alpha").expect("a new store");
    let other = PostgresStore::open(&url, "beta").expect("another name on the same database");
    let s1 = start(1, "conv-a");
    let (e1, e2, e3) = (event(1), event(2), event(3));
    let end = TurnEnd { first_seq: 1, outcome: Outcome::Completed, result: Some("hi".into()), error: None, ended_ms: 2000, last_seq: 3 };
    store
        .write(&[
            Record::Event { seq: 1, time_ms: 1, json: e1.as_bytes() },
            Record::TurnStarted(&s1),
            Record::Event { seq: 2, time_ms: 2, json: e2.as_bytes() },
            Record::Event { seq: 3, time_ms: 3, json: e3.as_bytes() },
            Record::TurnEnded(&end),
        ])
        .expect("written");
    assert_eq!(store.last_seq().expect("last_seq"), 3);
    let evs = store.events_after(1, 3, 10).expect("events");
    assert_eq!(evs.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3]);
    assert_eq!(evs[1].json, e3.as_bytes());
    assert_eq!(store.events_after(0, 3, 1).expect("events").len(), 1, "the limit is kept");
    let turns = store.turns(10).expect("turns");
    assert_eq!(turns.len(), 1);
    assert_eq!((turns[0].outcome.as_str(), turns[0].result.as_deref(), turns[0].last_seq, turns[0].ended_ms), ("completed", Some("hi"), Some(3), Some(2000)));
    assert_eq!(turns[0].start, s1);
    let convs = store.conversations(10).expect("conversations");
    assert_eq!((convs.len(), convs[0].id.as_str(), convs[0].runner.as_str(), convs[0].title.as_str()), (1, "conv-a", "echo", "say hello"));
    // A conversation's turns before a sequence number, newest first; its ACP session, by name.
    assert_eq!(store.turns_before("conv-a", i64::MAX, 10).expect("turns").iter().map(|t| t.start.first_seq).collect::<Vec<_>>(), [1]);
    assert!(store.turns_before("conv-a", 1, 10).expect("turns").is_empty());
    assert_eq!(store.agent_session("conv-a").expect("read"), None);
    let a = AgentSession { conversation: "conv-a".into(), runner: "gemini".into(), session_id: "s-1".into() };
    store.write(&[Record::AgentSession(&a)]).expect("written");
    assert_eq!(store.agent_session("conv-a").expect("read"), Some(a));
    assert_eq!(other.agent_session("conv-a").expect("read"), None, "another name's conversation");
    // The other name sees none of it, and has a sequence of its own.
    assert_eq!((other.last_seq().expect("last_seq"), other.turns(10).expect("turns").len(), other.conversations(10).expect("c").len()), (0, 0, 0));
    assert!(seqs(&other).is_empty());
    let b1 = event(1);
    other.write(&[Record::Event { seq: 1, time_ms: 1, json: b1.as_bytes() }]).expect("the same seq under another name");
    // Retention keeps the newest; the sequence number survives it; the other name is untouched.
    assert_eq!(store.prune(1).expect("pruned"), 2);
    assert_eq!(seqs(&store), [3]);
    assert_eq!(store.last_seq().expect("last_seq"), 3);
    assert_eq!(seqs(&other), [1]);
    drop(store);
    let again = PostgresStore::open(&url, "alpha").expect("the name opens again once closed");
    assert_eq!(again.last_seq().expect("last_seq"), 3);
}

#[test]
fn history_pages_follow_the_cursor_with_ties_by_bytewise_id_and_count_turns_by_name() {
    let Some(url) = database("history") else { return };
    let store = PostgresStore::open(&url, "alpha").expect("a new store");
    let other = PostgresStore::open(&url, "beta").expect("another name");
    // Conversations "B", "a", "b" updated at the same time (bytewise: "B" < "a" < "b", which a
    // locale's collation would order otherwise), then "c" later with two turns.
    let mut starts = Vec::new();
    for (seq, conv, at) in [(1, "B", 10), (2, "a", 10), (3, "b", 10), (4, "c", 20), (5, "c", 30)] {
        starts.push(TurnStart { started_ms: at, ..start(seq, conv) });
    }
    let records: Vec<Record<'_>> = starts.iter().map(Record::TurnStarted).collect();
    store.write(&records).expect("written");
    other.write(&[Record::TurnStarted(&start(1, "c"))]).expect("beta's own c");
    let ids = |page: &[openagents_server::store::ConversationSummary]| page.iter().map(|c| (c.conversation.id.clone(), c.turns)).collect::<Vec<_>>();
    let first = store.conversations_page(None, 2).expect("a page");
    assert_eq!(ids(&first), [("c".to_owned(), 2), ("B".to_owned(), 1)]);
    let last = &first[1].conversation;
    let next = store.conversations_page(Some(&ConversationCursor { updated_ms: last.updated_ms, id: last.id.clone() }), 2).expect("the next page");
    assert_eq!(ids(&next), [("a".to_owned(), 1), ("b".to_owned(), 1)]);
    let last = &next[1].conversation;
    assert!(store.conversations_page(Some(&ConversationCursor { updated_ms: last.updated_ms, id: last.id.clone() }), 2).expect("past the end").is_empty());
    assert_eq!(store.conversations(10).expect("all").iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["c", "B", "a", "b"], "the same order unpaged");
    let (summary, turns) = store.conversation_turns("c", 0, 1).expect("read").expect("conversation c");
    assert_eq!((summary.turns, turns.iter().map(|t| t.start.first_seq).collect::<Vec<_>>()), (2, vec![4]));
    let (_, turns) = store.conversation_turns("c", 4, 10).expect("read").expect("conversation c");
    assert_eq!(turns.iter().map(|t| t.start.first_seq).collect::<Vec<_>>(), [5]);
    assert!(store.conversation_turns("nope", 0, 10).expect("read").is_none());
    let (summary, _) = other.conversation_turns("c", 0, 10).expect("read").expect("beta's c");
    assert_eq!(summary.turns, 1, "beta counts only its own turns");
}

#[test]
fn a_prune_by_age_takes_only_the_oldest_and_is_bounded() {
    let Some(url) = database("age") else { return };
    let store = PostgresStore::open(&url, "alpha").expect("a new store");
    // Times 10, 20, …, 100, then one stamped before the cutoff out of order (a clock set back).
    let jsons: Vec<String> = (1..=11).map(event).collect();
    let mut batch: Vec<Record<'_>> = (1..=10).map(|i| Record::Event { seq: i, time_ms: i * 10, json: jsons[i as usize - 1].as_bytes() }).collect();
    batch.push(Record::Event { seq: 11, time_ms: 5, json: jsons[10].as_bytes() });
    store.write(&batch).expect("written");
    assert_eq!(store.prune_older_than(45, 2).expect("pruned"), 2, "at most the limit");
    assert_eq!(seqs(&store), (3..=11).collect::<Vec<_>>());
    assert_eq!(store.prune_older_than(45, 100).expect("pruned"), 2, "the leading run before the cutoff, 30 and 40");
    assert_eq!(seqs(&store).first(), Some(&5), "event 11, older but after a newer one, stays");
    assert_eq!(store.prune_older_than(45, 0).expect("nothing"), 0);
}

#[test]
fn running_turns_are_closed_once_and_a_live_name_is_held() {
    let Some(url) = database("running") else { return };
    let store = PostgresStore::open(&url, "alpha").expect("a new store");
    let e = PostgresStore::open(&url, "alpha").err().expect("a second open of a live name is refused");
    assert!(matches!(e, StoreError::InUse { .. }) && e.to_string().contains("runtime alpha"), "{e}");
    let s = start(7, "conv-b");
    let (e7, e8) = (event(7), event(8));
    store.write(&[Record::Event { seq: 7, time_ms: 7, json: e7.as_bytes() }, Record::TurnStarted(&s), Record::Event { seq: 8, time_ms: 8, json: e8.as_bytes() }]).expect("written");
    let closed = store.close_running_turns(5000).expect("closed");
    assert_eq!(closed.len(), 1);
    assert_eq!((closed[0].outcome.as_str(), closed[0].last_seq, closed[0].ended_ms), ("failed", Some(8), Some(5000)));
    let error: serde_json::Value = serde_json::from_str(closed[0].error.as_deref().expect("an error")).expect("JSON");
    assert_eq!(error["code"], "runtime_restarted");
    assert!(store.close_running_turns(6000).expect("none").is_empty(), "closed once");
}

#[test]
fn a_database_of_a_newer_version_is_refused_and_left_as_it_was() {
    let Some(url) = database("newer") else { return };
    drop(PostgresStore::open(&url, "alpha").expect("a new store"));
    let mut db = postgres::Client::connect(&url, postgres::NoTls).expect("the database");
    db.execute("UPDATE openagents_meta SET value = $1 WHERE key = 'schema_version'", &[&(POSTGRES_SCHEMA_VERSION + 1)]).expect("made newer");
    let e = PostgresStore::open(&url, "alpha").err().expect("a newer database is refused");
    assert!(matches!(e, StoreError::TooNew { found, supported, .. } if found == POSTGRES_SCHEMA_VERSION + 1 && supported == POSTGRES_SCHEMA_VERSION), "{e}");
    assert!(e.to_string().contains("postgres://") && e.to_string().contains("newer openagents"), "{e}");
    let version: i64 = db.query_one("SELECT value FROM openagents_meta WHERE key = 'schema_version'", &[]).expect("the version").get(0);
    assert_eq!(version, POSTGRES_SCHEMA_VERSION + 1, "a refused database is left as it was");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_continues_the_sequence_and_serves_a_resume_from_the_database_inside_tokio() {
    // The test's own client may not run inside Tokio either: it makes the database on a thread.
    let Some(url) = std::thread::spawn(|| database("hub")).join().expect("the database is made") else { return };
    let last = {
        // Opened, written and dropped inside the runtime: the client's own runtime runs apart.
        let store: Arc<dyn Store> = Arc::new(PostgresStore::open(&url, "alpha").expect("a new store"));
        let hub = EventHub::with_store(4, store, 1000).expect("a hub");
        let mut last = 0;
        for i in 0..20 {
            last = hub.publish(RuntimeEvent::Text { text: format!("event {i}") }).seq;
        }
        hub.delivered(last).await;
        last
    };
    assert_eq!(last, 20);
    let store: Arc<dyn Store> = Arc::new(PostgresStore::open(&url, "alpha").expect("the name again"));
    let hub = EventHub::with_store(4, store, 1000).expect("a hub");
    assert_eq!(hub.last_seq(), 20, "the sequence goes on from the database's");
    let next = hub.publish(RuntimeEvent::Text { text: "after".into() });
    assert_eq!(next.seq, 21);
    hub.delivered(21).await;
    // The replay buffer holds 4: the rest of a resume from 0 is read from the database.
    let mut sub = hub.subscribe(Some(0));
    let mut got = Vec::new();
    while got.len() < 21 {
        let ev = tokio::time::timeout(std::time::Duration::from_secs(10), sub.next()).await.expect("an event in time").expect("the hub");
        got.push(ev);
    }
    assert_eq!(got.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=21).collect::<Vec<_>>(), "{got:?}");
    assert!(got.iter().all(|e| matches!(e.event, RuntimeEvent::Text { .. })), "no gap: {got:?}");
}

#[test]
fn a_version_1_database_migrates_to_the_current_version_keeping_its_rows() {
    let Some(url) = database("migrate") else { return };
    // A store written by a version-1 build: this build's tables with migration 2 (the agent
    // session columns) taken back off, and the version set to 1.
    {
        let store = PostgresStore::open(&url, "alpha").expect("a new store");
        let s1 = start(1, "conv-old");
        let e1 = event(1);
        store.write(&[Record::Event { seq: 1, time_ms: 1, json: e1.as_bytes() }, Record::TurnStarted(&s1)]).expect("written");
    }
    let mut db = postgres::Client::connect(&url, postgres::NoTls).expect("the database");
    db.batch_execute("ALTER TABLE openagents_conversations DROP COLUMN agent_runner, DROP COLUMN agent_session; UPDATE openagents_meta SET value = 1 WHERE key = 'schema_version';").expect("taken back to version 1");
    assert!(POSTGRES_SCHEMA_VERSION >= 2, "this test starts below the current version");

    let store = PostgresStore::open(&url, "alpha").expect("a version-1 database opens, migrated");
    let version: i64 = db.query_one("SELECT value FROM openagents_meta WHERE key = 'schema_version'", &[]).expect("the version").get(0);
    assert_eq!(version, POSTGRES_SCHEMA_VERSION, "migrated to the current version");
    assert_eq!(seqs(&store), vec![1], "its events are kept");
    assert_eq!(store.conversations(10).expect("conversations").iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), vec!["conv-old"], "its conversations are kept");
    // What migration 2 added works on the migrated rows.
    let session = AgentSession { conversation: "conv-old".into(), runner: "agent".into(), session_id: "sess-1".into() };
    store.write(&[Record::AgentSession(&session)]).expect("an agent session kept on a migrated conversation");
    assert_eq!(store.agent_session("conv-old").expect("read back"), Some(session));
}
