//! Approvals in the store: on a SQLite store, with the real `ask` runner, a request nobody
//! authorised may answer (an observer is attached) is written as `approval_denied` with its
//! reason; requests answered over the WebSocket by the credentials `alice` (approves) and `bob`
//! (denies) are written as `approval_requested` then `approval_resolved` naming the credential.
//! After the runtime stops (shut down and dropped, in this process: nothing of it, an approval
//! it asked included, may keep the store held) and a new one opens the same file, a WebSocket
//! subscriber resuming from `since = 0` gets every event of the earlier run back, in order and
//! exactly as it was delivered live, from the store (the new runtime's replay buffer starts
//! empty), and `Store::events_after` gives the same.

mod ws_common;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use openagents_runner::{Registry, RunnerHost};
use openagents_server::events::EventHub;
use openagents_server::store::{SqliteStore, Store};
use openagents_server::{EngineConfig, RpcEngine, RunnerAgent};
use serde_json::{Value, json};
use ws_common::*;

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("openagents-store-approvals-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    dir.join("store.db")
}

/// An engine on `store` whose default runner is the real `ask` runner binary. `capacity` is
/// the hub's replay buffer.
fn engine(store: Arc<dyn Store>, capacity: usize) -> RpcEngine {
    let registry = format!("[runners.ask]\ncommand = \"{}\"\ntimeout_s = 20\n", ask_runner().display());
    let registry = Registry::parse(&registry, None).expect("the test registry parses");
    let config = EngineConfig { default_runner: Some("ask".into()), ..EngineConfig::default() };
    let hub = EventHub::with_store(capacity, store, 100_000).expect("a hub on the store");
    let engine = RpcEngine::with_events(RunnerAgent::new(RunnerHost::new(registry)), config, hub);
    engine.bridge().set_timeout(STEP);
    engine
}

/// Every event in `store`, as JSON, oldest first.
fn stored(store: &dyn Store) -> Vec<Value> {
    store.events_after(0, i64::MAX, 1000, usize::MAX).expect("the store reads").iter().map(|e| serde_json::from_slice(&e.json).expect("a stored event is JSON")).collect()
}

/// The `event` objects of the approval events among `events`, in order.
fn approvals(events: &[Value]) -> Vec<Value> {
    events.iter().filter(|e| event_type(e).starts_with("approval_")).map(|e| e["event"].clone()).collect()
}

/// Submits `task` in process (the trusted parent: no lease), has `who` answer the approval
/// request with `approved`; returns the request's id and the turn's outcome.
async fn answered(engine: &RpcEngine, who: &mut Ws, task: &str, approved: bool) -> (Value, Result<Value, Value>) {
    let turn = submit(engine, task);
    let req = who.approval_request().await;
    assert_eq!(req["params"]["prompt"], format!("May I do this: {task}?"), "{req}");
    who.answer(&req["id"], json!({"approved": approved})).await;
    (req["id"].clone(), finished(turn).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_asked_answered_and_denied_are_in_the_store_and_replayed_after_a_restart() {
    let path = temp("restart");
    let (live, alice_id, bob_id) = {
        let engine = engine(Arc::new(SqliteStore::open(&path).expect("a new store")), 64);
        let addr = http_runtime(&engine).await;
        let (mut watcher, last) = subscribed(addr, WATCHER, None).await;
        assert_eq!(last, 0, "a new store");

        // Only an observer is attached: nobody may answer, so the request is denied (fail closed).
        let failed = finished(submit(&engine, "deploy the site")).await.expect_err("the runner fails when denied");
        assert_eq!((failed["code"].as_str(), failed["message"].as_str().map(|m| m.contains("denied: deploy the site"))), (Some("runner_failed"), Some(true)), "{failed}");
        let mut live = watcher.events_until(&["turn_failed"]).await;

        // alice approves, bob denies: each answer names the credential that gave it.
        let (mut alice, _) = subscribed(addr, ALICE, None).await;
        let (alice_id, done) = answered(&engine, &mut alice, "drop the cache", true).await;
        assert_eq!(done.expect("approved: the turn completes")["result"], "approved: drop the cache");
        live.extend(watcher.events_until(&["turn_completed"]).await);
        drop(alice);
        let (mut bob, _) = subscribed(addr, BOB, None).await;
        let (bob_id, failed) = answered(&engine, &mut bob, "rotate the keys", false).await;
        assert_eq!(failed.expect_err("denied: the runner fails")["code"], "runner_failed");
        live.extend(watcher.events_until(&["turn_failed"]).await);

        // What was delivered is what was written: a durable hub delivers only what is stored.
        assert_eq!(stored(&**engine.events().store()), live, "the store holds what the watcher saw");
        engine.shutdown().await;
        live.extend(watcher.events_until(&["shutting_down"]).await);
        (live, alice_id, bob_id)
    };
    assert_contiguous(&live, 1);
    assert_eq!(
        types(&live),
        [
            "turn_started", "text", "approval_denied", "turn_failed",
            "turn_started", "text", "approval_requested", "approval_resolved", "turn_completed",
            "turn_started", "text", "approval_requested", "approval_resolved", "turn_failed",
            "shutting_down",
        ]
    );
    assert_ne!(alice_id, bob_id);
    let want = [
        json!({"type": "approval_denied", "prompt": "May I do this: deploy the site?", "reason": "no frontend allowed to answer approvals is attached"}),
        json!({"type": "approval_requested", "request_id": alice_id, "prompt": "May I do this: drop the cache?"}),
        json!({"type": "approval_resolved", "request_id": alice_id, "approved": true, "by": "alice"}),
        json!({"type": "approval_requested", "request_id": bob_id, "prompt": "May I do this: rotate the keys?"}),
        json!({"type": "approval_resolved", "request_id": bob_id, "approved": false, "by": "bob"}),
    ];
    assert_eq!(approvals(&live), want);

    // A new runtime on the same file. Its replay buffer (4) starts empty: whatever it serves of
    // the earlier run comes from the store.
    let engine = engine(ws_common::reopen(&path), 4);
    assert_eq!(engine.status().last_seq, 15, "the sequence goes on from the store's");
    let stored = stored(&**engine.events().store());
    assert_eq!(approvals(&stored), want, "Store::events_after after the restart");
    assert_eq!(stored, live, "every event, as delivered");
    let addr = http_runtime(&engine).await;
    let (mut resumed, last) = subscribed(addr, WATCHER, Some(0)).await;
    assert_eq!(last, 15);
    let replayed = resumed.events_until(&["shutting_down"]).await;
    assert_eq!(approvals(&replayed), want, "the approvals, resumed from since = 0");
    assert_eq!(replayed, live, "a resume from 0 gets the earlier run exactly, in order");
    assert_eq!(engine.events().counters().gaps.load(Ordering::Relaxed), 0, "no gap");
    engine.shutdown().await;
}

