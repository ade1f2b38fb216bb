//! `PostgresStore` against a real server (`make test-postgres` sets `OPENAGENTS_TEST_POSTGRES`):
//! the store contract as the SQLite store keeps it (events, turns and conversations written and
//! read back, retention by count and by age, running turns closed once as `runtime_restarted`),
//! every row keyed by the runtime name (two names never see each other's), the history pages
//! (a cursor with ties ordered by bytewise id, turns counted per name), one live store per
//! name, a newer schema refused, version-1 and version-2 databases migrated keeping their rows
//! (every event of every name, moved into blocks), the event hub on it continuing a sequence
//! across a reopen and serving a resume from the database from inside a Tokio runtime; and the
//! blocks (one a write): read back with limits that cut inside one, a batch written again
//! keeping only what the store lacks, retention by whole blocks, a line that does not parse
//! skipped.
//!
//! Without `OPENAGENTS_TEST_POSTGRES` each test says it was not run and returns.

use std::sync::Arc;

use openagents_protocol::RuntimeEvent;
use openagents_server::events::EventHub;
use openagents_server::store::vectors::{self, event, seqs, start, write_events};
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

/// Runtime `name`'s blocks as stored: first and last sequence number and count.
fn blocks(db: &mut postgres::Client, name: &str) -> Vec<(i64, i64, i64)> {
    db.query("SELECT first_seq, last_seq, count FROM openagents_event_blocks WHERE runtime = $1 ORDER BY first_seq", &[&name]).expect("the blocks").iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect()
}

fn client(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap_or_else(|e| panic!("{url}: {e}"))
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
    let evs = store.events_after(1, 3, 10, usize::MAX).expect("events");
    assert_eq!(evs.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3]);
    assert_eq!(evs[1].json, e3.as_bytes());
    assert_eq!(store.events_after(0, 3, 1, usize::MAX).expect("events").len(), 1, "the limit is kept");
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
    // Retention keeps the newest, by whole blocks (one write's events); the sequence number
    // survives it; the other name is untouched.
    assert_eq!(store.prune(1).expect("pruned"), 0, "the block holding the newest event stays whole");
    let e4 = event(4);
    store.write(&[Record::Event { seq: 4, time_ms: 4, json: e4.as_bytes() }]).expect("written");
    assert_eq!(store.prune(1).expect("pruned"), 3);
    assert_eq!(seqs(&store), [4]);
    assert_eq!(store.last_seq().expect("last_seq"), 4);
    assert_eq!(seqs(&other), [1]);
    drop(store);
    let again = PostgresStore::open(&url, "alpha").expect("the name opens again once closed");
    assert_eq!(again.last_seq().expect("last_seq"), 4);
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
fn a_prune_by_age_deletes_leading_old_blocks_within_the_limit() {
    let Some(url) = database("age") else { return };
    let neighbour = PostgresStore::open(&url, "neighbour").expect("another name");
    write_events(&neighbour, 1..=3, |_| 1);
    for (i, (cutoff, limit, deleted, first)) in vectors::PRUNE_BY_AGE.into_iter().enumerate() {
        let store = PostgresStore::open(&url, &format!("age-{i}")).expect("a new name");
        for run in vectors::AGE_BLOCKS {
            write_events(&store, run, vectors::age_time);
        }
        assert_eq!(store.prune_older_than(cutoff, limit).expect("pruned"), deleted, "prune_older_than({cutoff}, {limit})");
        assert_eq!(seqs(&store).first().copied(), first, "prune_older_than({cutoff}, {limit})");
        assert_eq!(store.last_seq().expect("last_seq"), 15, "the newest sequence number given out stays");
    }
    assert_eq!(seqs(&neighbour), [1, 2, 3], "another name's old events are not touched");
    // The hub's loop, `while prune_older_than(..) > 0 {}`, ends, whatever the limit, and a call
    // returning the limit deleted a block.
    for limit in 1..=16 {
        let store = PostgresStore::open(&url, &format!("age-loop-{limit}")).expect("a new name");
        for run in vectors::AGE_BLOCKS {
            write_events(&store, run, |_| 1);
        }
        let mut calls = 0;
        while store.prune_older_than(i64::MAX, limit).expect("pruned") > 0 {
            calls += 1;
            assert!(calls <= 5, "limit {limit}: each call deleted a block");
        }
        assert!(seqs(&store).is_empty(), "limit {limit}: all of it went");
    }
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
fn versions_1_and_2_migrate_to_the_current_one_keeping_every_event_of_every_name() {
    // Alpha's sequence numbers 41..=2600 (blocks 0, 1 and 2 of the migration's 1024) with a
    // hole, beta's 1..=5, gamma's 3000..=3001, each with its own time and JSON (one with a tab in
    // a string, escaped, and text beyond ASCII).
    let json = |name: &str, seq: i64| format!(r#"{{"seq":{seq},"event":{{"type":"text","text":"{name}\t{seq} é"}}}}"#);
    let old: Vec<(&str, Vec<i64>)> = vec![("alpha", (41..=2600).filter(|&seq| seq != 1500).collect()), ("beta", (1..=5).collect()), ("gamma", vec![3000, 3001])];
    let time = |seq: i64| 1_700_000_000_000 + seq * 7;
    assert_eq!(POSTGRES_SCHEMA_VERSION, 3, "this test makes the tables of versions 1 and 2 by hand");
    for from in [1i64, 2] {
        let Some(url) = database(&format!("migrate_{from}")) else { return };
        // The tables of version `from`: this build's, with `openagents_events` (migration 1's)
        // instead of blocks, and for version 1 without migration 2's agent session columns.
        {
            let store = PostgresStore::open(&url, "alpha").expect("a new store");
            store.write(&[Record::TurnStarted(&start(41, "conv-old"))]).expect("written");
        }
        let mut db = client(&url);
        db.batch_execute(
            "DROP TABLE openagents_event_blocks;
             CREATE TABLE openagents_events (runtime TEXT NOT NULL, seq BIGINT NOT NULL, time_ms BIGINT NOT NULL, json TEXT NOT NULL, PRIMARY KEY (runtime, seq));",
        )
        .expect("taken back to version 2");
        if from == 1 {
            db.batch_execute("ALTER TABLE openagents_conversations DROP COLUMN agent_runner, DROP COLUMN agent_session;").expect("taken back to version 1");
        }
        db.execute("UPDATE openagents_meta SET value = $1 WHERE key = 'schema_version'", &[&from]).expect("the version set");
        // One row an event, inserted newest first.
        for (name, seqs) in &old {
            let seqs: Vec<i64> = seqs.iter().rev().copied().collect();
            let times: Vec<i64> = seqs.iter().map(|&seq| time(seq)).collect();
            let jsons: Vec<String> = seqs.iter().map(|&seq| json(name, seq)).collect();
            db.execute("INSERT INTO openagents_events (runtime, seq, time_ms, json) SELECT $1, * FROM unnest($2::bigint[], $3::bigint[], $4::text[])", &[name, &seqs, &times, &jsons]).expect("the old events");
            db.execute("INSERT INTO openagents_runtimes (runtime, last_seq) VALUES ($1, $2) ON CONFLICT (runtime) DO UPDATE SET last_seq = excluded.last_seq", &[name, &seqs[0]]).expect("the old newest");
        }

        let alpha = PostgresStore::open(&url, "alpha").expect("an old database opens, migrated");
        let version: i64 = db.query_one("SELECT value FROM openagents_meta WHERE key = 'schema_version'", &[]).expect("the version").get(0);
        let events_table: Option<String> = db.query_one("SELECT to_regclass('openagents_events')::text", &[]).expect("the old table's name").get(0);
        assert_eq!((version, events_table), (POSTGRES_SCHEMA_VERSION, None), "from version {from}");
        assert_eq!(blocks(&mut db, "alpha"), [(41, 1023, 983), (1024, 2047, 1023), (2048, 2600, 553)], "from version {from}");
        // Blocks are compressed with LZ4 where the server has it, else not at all (never pglz).
        let storage: (i8, String) = db
            .query_one("SELECT attstorage, attcompression::text FROM pg_attribute WHERE attrelid = 'openagents_event_blocks'::regclass AND attname = 'data'", &[])
            .map(|r| (r.get(0), r.get(1)))
            .expect("the column's storage");
        assert!(matches!((storage.0 as u8, storage.1.as_str()), (b'x', "l") | (b'e', "")), "from version {from}: storage {storage:?}");
        for (name, seqs) in &old {
            let store = if *name == "alpha" { None } else { Some(PostgresStore::open(&url, name).expect("another name")) };
            let store: &dyn Store = store.as_ref().map_or(&alpha as &dyn Store, |s| s as &dyn Store);
            // Every event comes back, in order, with its time and JSON.
            let back: Vec<(i64, i64, String)> = store.events_after(0, i64::MAX, usize::MAX, usize::MAX).expect("events").into_iter().map(|e| (e.seq, e.time_ms, String::from_utf8(e.json).expect("UTF-8"))).collect();
            assert_eq!(back, seqs.iter().map(|&seq| (seq, time(seq), json(name, seq))).collect::<Vec<_>>(), "{name} from version {from}");
            assert_eq!(store.last_seq().expect("last_seq"), *seqs.last().expect("events"), "{name} from version {from}");
        }
        assert_eq!(alpha.events_after(1020, 1030, 6, usize::MAX).expect("events").iter().map(|e| e.seq).collect::<Vec<_>>(), (1021..=1026).collect::<Vec<_>>(), "from version {from}");
        assert_eq!(alpha.conversations(10).expect("conversations").iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["conv-old"], "its conversations are kept");
        // The migrated store takes every kind of record, what migration 2 added too.
        let session = AgentSession { conversation: "conv-old".into(), runner: "agent".into(), session_id: "sess-1".into() };
        let e = event(2601);
        alpha.write(&[Record::Event { seq: 2601, time_ms: 1, json: e.as_bytes() }, Record::AgentSession(&session)]).expect("written on the migrated tables");
        assert_eq!(alpha.agent_session("conv-old").expect("read back"), Some(session));
        assert_eq!(alpha.events_after(2600, i64::MAX, 10, usize::MAX).expect("events").iter().map(|e| e.seq).collect::<Vec<_>>(), [2601]);
    }
}

#[test]
fn a_read_stops_once_the_json_reaches_its_byte_bound_past_at_least_one_event() {
    let Some(url) = database("blocks_bytes") else { return };
    vectors::check_byte_bound(&PostgresStore::open(&url, "alpha").expect("a new store"));
}

#[test]
fn blocks_of_several_writes_read_back_in_order_with_limits_that_cut_inside_a_block() {
    let Some(url) = database("blocks_read") else { return };
    let store = PostgresStore::open(&url, "alpha").expect("a new store");
    let other = PostgresStore::open(&url, "beta").expect("another name");
    // vectors::READ_BLOCKS, with beta's 1..=20 in between.
    let [head, rest @ ..] = vectors::READ_BLOCKS;
    write_events(&store, head, |seq| 100 + seq);
    write_events(&other, 1..=20, |_| 1);
    for run in rest {
        write_events(&store, run, |seq| 100 + seq);
    }
    let mut db = client(&url);
    assert_eq!(blocks(&mut db, "alpha"), [(1, 3, 3), (4, 8, 5), (9, 9, 1), (11, 14, 4)]);
    assert_eq!(blocks(&mut db, "beta"), [(1, 20, 20)]);
    vectors::check_reads(&store);
    let all: Vec<i64> = (1..=14).filter(|&s| s != 10).collect();
    assert_eq!(store.events_after(i64::MIN, i64::MAX, usize::MAX, usize::MAX).expect("events").iter().map(|e| e.seq).collect::<Vec<_>>(), all, "no bound at all");
    assert_eq!(store.last_seq().expect("last_seq"), 14);
}

#[test]
fn a_batch_written_again_changes_nothing_and_the_newer_events_with_it_are_kept() {
    let Some(url) = database("blocks_retry") else { return };
    let store = PostgresStore::open(&url, "alpha").expect("a new store");
    let mut db = client(&url);
    // A turn in one of the batches (a transaction of its own) is written too.
    let turn = start(13, "conv-again");
    vectors::check_rewrites(&store, || blocks(&mut db, "alpha"), Some(&turn));
    assert_eq!(store.turns(10).expect("turns").iter().map(|t| t.start.first_seq).collect::<Vec<_>>(), [13]);
}

#[test]
fn prune_deletes_whole_blocks_keeping_at_least_the_newest() {
    let Some(url) = database("blocks_prune") else { return };
    // (keep, events deleted, first event left), one after another on blocks 1..=3, 4..=8, 9,
    // 10..=13.
    let cases: [(u64, u64, Option<i64>); 6] = [(20, 0, Some(1)), (11, 0, Some(1)), (10, 3, Some(4)), (4, 6, Some(10)), (1, 0, Some(10)), (0, 4, None)];
    let store = PostgresStore::open(&url, "alpha").expect("a new store");
    let other = PostgresStore::open(&url, "beta").expect("another name");
    for run in [1..=3, 4..=8, 9..=9, 10..=13] {
        write_events(&store, run, |_| 1);
    }
    write_events(&other, 1..=2, |_| 1);
    for (keep, deleted, first) in cases {
        assert_eq!(store.prune(keep).expect("pruned"), deleted, "prune({keep})");
        let left = seqs(&store);
        assert_eq!(left.first().copied(), first, "prune({keep})");
        assert!(left.len() as u64 >= keep.min(13), "prune({keep}) kept at least the newest {keep}: {left:?}");
    }
    assert_eq!(store.last_seq().expect("last_seq"), 13, "pruning everything keeps the newest sequence number given out");
    assert_eq!(store.prune(0).expect("nothing left"), 0);
    assert_eq!(seqs(&other), [1, 2], "another name's events are not touched");
    // A turn still running when the runtime stopped ends at the newest event stored.
    let s = start(14, "conv-p");
    let e14 = event(14);
    store.write(&[Record::Event { seq: 14, time_ms: 1, json: e14.as_bytes() }, Record::TurnStarted(&s)]).expect("written");
    write_events(&store, 15..=16, |_| 1);
    assert_eq!(store.close_running_turns(9).expect("closed").iter().map(|t| t.last_seq).collect::<Vec<_>>(), [Some(16)]);
}

#[test]
fn a_block_line_that_does_not_parse_is_skipped_not_a_panic() {
    let Some(url) = database("blocks_bad") else { return };
    let store = PostgresStore::open(&url, "alpha").expect("a new store");
    let mut db = client(&url);
    let data = "1\t10\t{\"a\":1}\nnot a line\n2\tten\t{}\nx\t1\t{}\n3\t30\n4\t40\t{\"b\":\"\t\"}\n\n5\t50\t{}";
    db.execute("INSERT INTO openagents_event_blocks (runtime, first_seq, last_seq, count, time_ms, data) VALUES ('alpha', 1, 5, 5, 50, $1)", &[&data]).expect("a block written by hand");
    let back: Vec<(i64, i64, String)> = store.events_after(0, 10, 10, usize::MAX).expect("events").into_iter().map(|e| (e.seq, e.time_ms, String::from_utf8(e.json).expect("UTF-8"))).collect();
    assert_eq!(back, [(1, 10, r#"{"a":1}"#.to_owned()), (4, 40, "{\"b\":\"\t\"}".to_owned()), (5, 50, "{}".to_owned())]);
    db.execute("INSERT INTO openagents_event_blocks (runtime, first_seq, last_seq, count, time_ms, data) VALUES ('alpha', 6, 6, 1, 60, '')", &[]).expect("an empty block");
    assert_eq!(store.events_after(5, 10, 10, usize::MAX).expect("events"), [], "a block without lines");
    // A limit its count says the first block completes: the read goes on after it.
    assert_eq!(store.events_after(0, 10, 4, usize::MAX).expect("events").iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 4, 5]);
    db.execute("INSERT INTO openagents_event_blocks (runtime, first_seq, last_seq, count, time_ms, data) VALUES ('alpha', 7, 7, 1, 70, '7\t70\t{}\n')", &[]).expect("a good block");
    assert_eq!(store.events_after(0, 10, 4, usize::MAX).expect("events").iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 4, 5, 7]);
}
