//! The event hub on a SQLite store: the sequence continues after a restart, a resume from before
//! the replay buffer is served from the store exactly (no gap), what retention pruned gives
//! `gap`, a subscriber told `lagged` gets what it missed by resuming from its position, a turn's
//! start and end are recorded with their first and last sequence numbers, over the
//! WebSocket a `subscribe` after a restart replays the earlier run from the store, and events
//! older than the retention's days are pruned (at start, and by the writer while it runs, in
//! bounded batches), a resume from before them getting `gap`.

mod ws_common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use openagents_protocol::{RuntimeEvent, ServerEvent};
use openagents_server::events::{EventHub, Note};
use openagents_server::store::{AGE_PRUNE_BATCH, DAY_MS, Outcome, Record, Retention, SqliteStore, Store};

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("openagents-hub-store-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    dir.join("store.db")
}

fn hub(path: &Path, capacity: usize, retain: u64) -> EventHub {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(path).expect("the store opens"));
    EventHub::with_store(capacity, store, retain).expect("a hub on the store")
}

fn text(i: usize) -> RuntimeEvent {
    RuntimeEvent::Text { text: format!("event {i}") }
}

async fn take(sub: &mut openagents_server::events::Subscription, n: usize) -> Vec<ServerEvent> {
    let mut out = Vec::new();
    for _ in 0..n {
        let ev = tokio::time::timeout(std::time::Duration::from_secs(10), sub.next()).await.expect("an event in time").expect("the hub is there");
        out.push(ev);
    }
    out
}

fn texts(evs: &[ServerEvent]) -> Vec<(i64, String)> {
    evs.iter()
        .map(|e| match &e.event {
            RuntimeEvent::Text { text } => (e.seq, text.clone()),
            other => (e.seq, format!("{other:?}")),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sequence_continues_after_a_restart_and_a_resume_gets_exactly_what_it_missed() {
    let path = temp("restart");
    {
        let hub = hub(&path, 16, 1000);
        let mut live = hub.subscribe(None);
        let mut last = 0;
        for i in 1..=10 {
            last = hub.publish(text(i)).seq;
        }
        hub.delivered(last).await;
        assert_eq!(hub.last_seq(), 10);
        let got = take(&mut live, 10).await;
        assert_eq!(got.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>());
    }
    // The writer thread ends with the hub; the lock goes with the store.
    let store = ws_common::reopen(&path);
    let hub = EventHub::with_store(4, store, 1000).expect("a hub on the store");
    assert_eq!(hub.last_seq(), 10, "the sequence goes on from the store's");
    let first = hub.publish(text(11));
    assert_eq!(first.seq, 11, "no sequence number is used twice");
    hub.delivered(11).await;
    // A client that saw up to 3 before the restart: 4..=11, from the store then the buffer, no gap.
    let mut resumed = hub.subscribe(Some(3));
    let got = take(&mut resumed, 8).await;
    let want: Vec<(i64, String)> = (4..=11).map(|i| (i as i64, format!("event {i}"))).collect();
    assert_eq!(texts(&got), want);
    assert!(resumed.try_next_shared().is_none(), "nothing more");
    assert_eq!(hub.counters().gaps.load(std::sync::atomic::Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_retention_pruned_is_a_gap_and_the_rest_follows() {
    let path = temp("retention");
    let hub = hub(&path, 2, 5);
    let mut last = 0;
    // The store prunes whole blocks (one group commit's events each): 1..=35 are written before
    // 36 is published, so no block holds both; 36..=40 are written one at a time, so the replay
    // buffer (which keeps the two newest deliveries whole) holds none of 1..=35.
    for i in 1..=40 {
        last = hub.publish(text(i)).seq;
        if i >= 35 {
            hub.delivered(last).await;
        }
    }
    hub.delivered(last).await;
    // The writer prunes as it goes; give the last prune a moment.
    let store = Arc::clone(hub.store());
    store.prune(5).expect("prune");
    let mut sub = hub.subscribe(Some(0));
    let first = take(&mut sub, 1).await;
    match &first[0].event {
        RuntimeEvent::Gap { since, resumed_at } => {
            assert_eq!(*since, 0);
            assert_eq!(*resumed_at, 35, "the store keeps the newest 5 of 40");
        }
        other => panic!("expected a gap, got {other:?}"),
    }
    let rest = take(&mut sub, 5).await;
    assert_eq!(rest.iter().map(|e| e.seq).collect::<Vec<_>>(), [36, 37, 38, 39, 40]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_told_lagged_gets_what_it_missed_from_the_store_by_resuming() {
    let path = temp("lag");
    let hub = hub(&path, 4, 100_000);
    let mut slow = hub.subscribe(None);
    let mut last = 0;
    // Written in many group commits (each ten events waits for the last), so the replay buffer,
    // which keeps the two newest deliveries whole, cannot hold them all.
    for i in 1..=1000 {
        last = hub.publish(text(i)).seq;
        if i % 10 == 0 {
            hub.delivered(last).await;
        }
    }
    hub.delivered(last).await;
    // As without a store: the broadcast is bounded, and a subscriber behind it is told so.
    let notice = take(&mut slow, 1).await;
    let RuntimeEvent::Lagged { missed } = notice[0].event else { panic!("expected lagged, got {notice:?}") };
    assert!(missed > 0);
    let position = notice[0].seq;
    // Resuming from where it was, it gets every event it missed (from the store), no gap.
    let mut resumed = hub.subscribe(Some(position));
    let got = take(&mut resumed, (1000 - position) as usize).await;
    assert_eq!(got.iter().map(|e| e.seq).collect::<Vec<_>>(), (position + 1..=1000).collect::<Vec<_>>());
    assert_eq!(hub.counters().gaps.load(std::sync::atomic::Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_over_events_larger_than_a_page_of_the_store_gets_every_one_in_order() {
    let path = temp("big-pages");
    let hub = hub(&path, 2, 100_000);
    // 12 events of 256 KiB each: 3 MiB of JSON, three times the bytes a resume reads at a time.
    let big = |i: usize| RuntimeEvent::Text { text: format!("{i:04}").repeat(64 * 1024) };
    let mut last = 0;
    for i in 1..=12 {
        last = hub.publish(big(i)).seq;
        // One commit each: no block holds two.
        hub.delivered(last).await;
    }
    let mut resumed = hub.subscribe(Some(0));
    let got = take(&mut resumed, 12).await;
    assert_eq!(got.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=12).collect::<Vec<_>>());
    assert!(got.iter().enumerate().all(|(i, e)| e.event == big(i + 1)), "every event whole");
    assert_eq!(hub.counters().gaps.load(std::sync::atomic::Ordering::Relaxed), 0);
    assert_eq!(last, 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_is_recorded_with_its_first_and_last_sequence_numbers() {
    let path = temp("turn");
    let hub = hub(&path, 16, 1000);
    hub.publish(text(0));
    let started = hub.publish_noted(
        RuntimeEvent::TurnStarted { assignment: "asg-1".into(), conversation: "conv-1".into(), runner: "echo".into() },
        Some(Note::TurnStarted { task: "write a poem\nabout the sea".into(), cwd: "/tmp".into() }),
    );
    hub.publish(text(1));
    let ended = hub.publish_noted(RuntimeEvent::TurnCompleted { result: "a poem".into() }, Some(Note::TurnEnded { first_seq: started.seq, outcome: Outcome::Completed, result: Some("a poem".into()), error: None }));
    hub.delivered(ended.seq).await;
    let turns = hub.store().turns(10).expect("turns");
    assert_eq!(turns.len(), 1);
    let t = &turns[0];
    assert_eq!((t.start.assignment.as_str(), t.start.conversation.as_str(), t.start.runner.as_str(), t.start.task.as_str()), ("asg-1", "conv-1", "echo", "write a poem\nabout the sea"));
    assert_eq!((t.start.first_seq, t.last_seq, t.outcome.as_str(), t.result.as_deref()), (2, Some(4), "completed", Some("a poem")));
    assert!(t.ended_ms.is_some_and(|e| e >= t.start.started_ms));
    let convs = hub.store().conversations(10).expect("conversations");
    assert_eq!((convs[0].id.as_str(), convs[0].title.as_str()), ("conv-1", "write a poem"));
}


fn scripted(hub: EventHub) -> openagents_server::RpcEngine {
    let config = openagents_server::EngineConfig { default_runner: Some("script".into()), ..openagents_server::EngineConfig::default() };
    openagents_server::RpcEngine::with_events(openagents_server::FnAgent(|turn: openagents_protocol::Turn, ctx: openagents_server::TurnContext| async move {
        for word in turn.task.split_whitespace() {
            ctx.text(word);
        }
        Ok(turn.task)
    }), config, hub)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_websocket_a_subscribe_after_a_restart_replays_the_earlier_run() {
    let path = temp("ws");
    {
        let engine = scripted(hub(&path, 16, 1000));
        for task in ["one two", "three"] {
            ws_common::finished(ws_common::submit(&engine, task)).await.expect("the turn completes");
        }
        engine.shutdown().await;
        // 1-4 the first turn, 5-7 the second, 8 shutting_down.
        assert_eq!(engine.status().last_seq, 8);
    }
    let engine = scripted(EventHub::with_store(4, ws_common::reopen(&path), 1000).expect("a hub on the store"));
    let addr = ws_common::http_runtime(&engine).await;
    let (mut ws, last) = ws_common::subscribed(addr, ws_common::ALICE, Some(2)).await;
    assert_eq!(last, 8, "the sequence goes on from the store's");
    let replayed = ws.events_until(&["shutting_down"]).await;
    let seqs: Vec<i64> = replayed.iter().map(|e| e["seq"].as_i64().expect("seq")).collect();
    assert_eq!(seqs, (3..=8).collect::<Vec<_>>(), "{replayed:?}");
    assert!(replayed.iter().all(|e| !matches!(ws_common::event_type(e), "gap" | "lagged")), "{replayed:?}");
    // The earlier run's shutting_down ended nothing: this run's turn follows on the same socket.
    ws_common::finished(ws_common::submit(&engine, "four")).await.expect("the turn completes");
    let live = ws.events_until(&["turn_completed"]).await;
    assert_eq!(live.iter().map(|e| (e["seq"].as_i64().unwrap(), ws_common::event_type(e).to_owned())).collect::<Vec<_>>(), [(9, "turn_started".to_owned()), (10, "text".to_owned()), (11, "turn_completed".to_owned())]);
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after the epoch").as_millis() as i64
}

/// Text event `seq` stamped `time_ms`, as the hub writes it.
fn stamped(seq: i64, time_ms: i64) -> Vec<u8> {
    serde_json::to_vec(&ServerEvent { seq, time_ms: Some(time_ms), event: text(seq as usize) }).expect("an event encodes")
}

/// Writes events `seqs`, each stamped `age_days` days ago, straight into `store`.
fn write_aged(store: &dyn Store, seqs: std::ops::RangeInclusive<i64>, age_days: i64) {
    let time = now_ms() - age_days * DAY_MS;
    let jsons: Vec<(i64, Vec<u8>)> = seqs.map(|seq| (seq, stamped(seq, time))).collect();
    let records: Vec<Record<'_>> = jsons.iter().map(|(seq, json)| Record::Event { seq: *seq, time_ms: time, json }).collect();
    store.write(&records).expect("written");
}

fn stored_seqs(store: &dyn Store) -> Vec<i64> {
    store.events_after(0, i64::MAX, 100_000, usize::MAX).expect("events").iter().map(|e| e.seq).collect()
}

fn gap_of(ev: &ServerEvent) -> (i64, i64) {
    match &ev.event {
        RuntimeEvent::Gap { since, resumed_at } => (*since, *resumed_at),
        other => panic!("expected a gap, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_start_events_older_than_the_retained_days_are_pruned_and_a_resume_from_before_them_gets_gap() {
    let path = temp("age-start");
    {
        let store = SqliteStore::open(&path).expect("a new store");
        write_aged(&store, 1..=4, 45);
        write_aged(&store, 5..=7, 29);
        write_aged(&store, 8..=9, 0);
    }
    let retention = Retention::new(1000, 30);
    let hub = EventHub::with_retention(4, ws_common::reopen(&path), retention).expect("a hub on the store");
    assert_eq!(stored_seqs(&**hub.store()), (5..=9).collect::<Vec<_>>(), "45 days old is gone, 29 days old and newer stay");
    assert_eq!(hub.last_seq(), 9, "the sequence goes on from the store's");
    let mut from_start = hub.subscribe(Some(0));
    let got = take(&mut from_start, 6).await;
    assert_eq!(gap_of(&got[0]), (0, 4));
    assert_eq!(got[1..].iter().map(|e| e.seq).collect::<Vec<_>>(), (5..=9).collect::<Vec<_>>());
    assert_eq!(texts(&got[1..2]), [(5, "event 5".to_owned())]);
    // A resume from within what is kept gets no gap.
    let mut kept = hub.subscribe(Some(6));
    let got = take(&mut kept, 3).await;
    assert_eq!(got.iter().map(|e| e.seq).collect::<Vec<_>>(), [7, 8, 9]);
    assert_eq!(hub.counters().gaps.load(std::sync::atomic::Ordering::Relaxed), 1);
    drop((from_start, kept, hub));
    // With more days kept, nothing more goes.
    let hub = EventHub::with_retention(4, ws_common::reopen(&path), Retention::new(1000, 60)).expect("a hub on the store");
    assert_eq!(stored_seqs(&**hub.store()), (5..=9).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_the_runtime_runs_the_writer_prunes_what_grew_too_old_even_when_idle() {
    let path = temp("age-running");
    let retention = Retention { check_every: std::time::Duration::from_millis(50), ..Retention::new(1000, 2) };
    let hub = EventHub::with_retention(2, Arc::new(SqliteStore::open(&path).expect("a new store")), retention).expect("a hub on the store");
    let mut last = 0;
    // The store prunes whole blocks (one group commit's events each): 1..=8 are written before 9
    // is published, so no block holds both; 9..=20 are written one at a time, so the replay
    // buffer (which keeps the two newest deliveries whole) holds none of 1..=8.
    for i in 1..=20 {
        last = hub.publish(text(i)).seq;
        if i >= 8 {
            hub.delivered(last).await;
        }
    }
    hub.delivered(last).await;
    assert_eq!(stored_seqs(&**hub.store()), (1..=20).collect::<Vec<_>>(), "nothing is old yet");
    // Events 1..=8 age three days (another connection: the hub's stays open).
    assert_eq!(openagents_server::store::age_events_for_test(&path, 8, now_ms() - 3 * DAY_MS).expect("aged"), 8);
    // Nothing is published: the writer prunes on its own clock.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while stored_seqs(&**hub.store()).first() != Some(&9) {
        assert!(std::time::Instant::now() < deadline, "still stored: {:?}", stored_seqs(&**hub.store()));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(stored_seqs(&**hub.store()), (9..=20).collect::<Vec<_>>(), "the newer events stay");
    let mut sub = hub.subscribe(Some(0));
    let got = take(&mut sub, 13).await;
    assert_eq!(gap_of(&got[0]), (0, 8));
    assert_eq!(got[1..].iter().map(|e| e.seq).collect::<Vec<_>>(), (9..=20).collect::<Vec<_>>());
    // The hub goes on publishing and writing after the prune.
    let next = hub.publish(text(21)).seq;
    hub.delivered(next).await;
    assert_eq!(stored_seqs(&**hub.store()).last(), Some(&21));
}

#[test]
fn a_prune_by_age_is_bounded_and_takes_only_the_oldest() {
    let path = temp("age-bounded");
    let store = SqliteStore::open(&path).expect("a new store");
    let batch = AGE_PRUNE_BATCH as i64;
    // Whole blocks go (one write each): four of a quarter batch, then one of 100.
    let quarter = batch / 4;
    for i in 0..4 {
        write_aged(&store, i * quarter + 1..=(i + 1) * quarter, 10);
    }
    write_aged(&store, batch + 1..=batch + 100, 10);
    // A clock set back: an old stamp after a new one is kept until what is before it goes.
    write_aged(&store, batch + 101..=batch + 101, 0);
    write_aged(&store, batch + 102..=batch + 102, 10);
    let cutoff = now_ms() - 5 * DAY_MS;
    assert_eq!(store.prune_older_than(cutoff, AGE_PRUNE_BATCH).expect("pruned"), AGE_PRUNE_BATCH as u64, "one batch at most");
    assert_eq!(stored_seqs(&store).first(), Some(&(batch + 1)));
    assert_eq!(store.prune_older_than(cutoff, AGE_PRUNE_BATCH).expect("pruned"), 100);
    assert_eq!(store.prune_older_than(cutoff, AGE_PRUNE_BATCH).expect("pruned"), 0, "the newer event stops it");
    assert_eq!(stored_seqs(&store), [batch + 101, batch + 102]);
    assert_eq!(store.last_seq().expect("last"), batch + 102, "the sequence survives the prune");
    assert_eq!(store.prune_older_than(now_ms() + DAY_MS, 0).expect("pruned"), 0, "a limit of 0 prunes nothing");
    assert_eq!(store.prune_older_than(now_ms() + DAY_MS, 10).expect("pruned"), 2);
    assert!(stored_seqs(&store).is_empty());
    // A block bigger than the limit is not left forever: when it is the oldest, it goes whole,
    // alone (the count returned is over the limit).
    write_aged(&store, batch + 103..=2 * batch + 200, 10);
    write_aged(&store, 2 * batch + 201..=2 * batch + 201, 10);
    assert_eq!(store.prune_older_than(cutoff, AGE_PRUNE_BATCH).expect("pruned"), AGE_PRUNE_BATCH as u64 + 98, "the first block alone is over the limit");
    assert_eq!(stored_seqs(&store), [2 * batch + 201]);
}
