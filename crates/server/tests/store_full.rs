//! A full disk mid-turn, through the engine on a SQLite store: the running turn fails with
//! `store_unavailable`, its message naming the store file and SQLite's error; the runtime goes
//! on answering; once there is space again, the next turn completes and its events and record
//! are in the store, and so is everything the full disk refused (written with the next commit
//! that succeeds), with no hole. The disk fills by SQLite's `max_page_count` (`SQLITE_FULL`, the error
//! SQLite gives for a full disk), set from the database's size at that moment.

mod ws_common;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use openagents_protocol::{ErrorCode, RuntimeEvent, ServerEvent};
use openagents_server::agent::error;
use openagents_server::events::EventHub;
use openagents_server::store::{Outcome, SqliteStore, Store};
use openagents_server::{Caller, EngineConfig, FnAgent, RpcEngine, TurnContext};
use serde_json::Value;

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("openagents-store-full-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    dir.join("store.db")
}

/// The task that writes until its turn is stopped: a kilobyte of text every few milliseconds.
const FILL: &str = "fill";

/// An agent that, for [`FILL`], publishes text until the turn is cancelled, and otherwise
/// publishes each word of the task and answers with the task.
fn engine(hub: EventHub) -> RpcEngine {
    let config = EngineConfig { default_runner: Some("script".into()), ..EngineConfig::default() };
    RpcEngine::with_events(
        FnAgent(|turn: openagents_protocol::Turn, ctx: TurnContext| async move {
            if turn.task == FILL {
                loop {
                    ctx.text("x".repeat(1024));
                    tokio::select! {
                        () = ctx.cancelled().cancelled() => return Err(error(ErrorCode::Interrupted, "stopped")),
                        () = tokio::time::sleep(Duration::from_millis(2)) => {}
                    }
                }
            }
            for word in turn.task.split_whitespace() {
                ctx.text(word);
            }
            Ok(turn.task)
        }),
        config,
        hub,
    )
}

/// `status` asked as a client asks it, through the engine's request path.
async fn status(engine: &RpcEngine) -> Value {
    let reply = engine.handle(&Caller::stdio(), br#"{"id": 1, "method": "status"}"#).await;
    serde_json::from_slice(&reply.outcome.expect("status answers")).expect("a status result is JSON")
}

fn kind(ev: &ServerEvent) -> &'static str {
    match &ev.event {
        RuntimeEvent::TurnStarted { .. } => "turn_started",
        RuntimeEvent::Text { .. } => "text",
        RuntimeEvent::TurnCompleted { .. } => "turn_completed",
        RuntimeEvent::TurnFailed { .. } => "turn_failed",
        _ => "other",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_mid_turn_fails_the_turn_with_store_unavailable_and_the_runtime_keeps_serving() {
    let path = temp("mid-turn");
    let sqlite = Arc::new(SqliteStore::open(&path).expect("a new store"));
    let store: Arc<dyn Store> = sqlite.clone();
    let hub = EventHub::with_store(64, Arc::clone(&store), 100_000).expect("a hub on the store");
    let engine = engine(hub.clone());

    // The turn runs, and its first events are written (a durable hub delivers an event only
    // once it is in the store).
    let mut live = hub.subscribe(None);
    let filling = ws_common::submit(&engine, FILL);
    let mut seen = Vec::new();
    while !seen.contains(&"text") {
        seen.push(kind(&ws_common::within("the turn's first text", live.next()).await.expect("the hub is there")));
    }
    assert_eq!(status(&engine).await["state"], "running");
    let written = store.last_seq().expect("the store reads");
    assert!(written >= 2, "turn_started and a text are stored: {written}");

    // The disk is full: not one more page.
    let limit = sqlite.limit_pages_for_test(Some(0)).expect("the limit is set");
    let error = ws_common::finished(filling).await.expect_err("the turn fails");
    assert_eq!(error["code"], "store_unavailable", "{error}");
    let message = error["message"].as_str().expect("a message");
    assert!(message.contains(&path.display().to_string()), "the message names the store file: {message}");
    assert!(message.contains("database or disk is full"), "the message gives SQLite's error: {message}");
    assert!(hub.counters().store_errors.load(Ordering::Relaxed) >= 1, "the failed write is counted");

    // The runtime goes on serving.
    let st = status(&engine).await;
    assert_eq!((st["state"].as_str(), st["counters"]["failed"].as_i64(), st["counters"]["completed"].as_i64()), (Some("idle"), Some(1), Some(0)), "{st}");

    // Space again: the next turn completes, and its events and its record are in the store.
    assert!(sqlite.limit_pages_for_test(None).expect("the limit is lifted") > limit);
    let before = engine.status().last_seq;
    let done = ws_common::finished(ws_common::submit(&engine, "after the disk")).await.expect("the turn completes");
    assert_eq!(done["result"], "after the disk", "{done}");
    let stored: Vec<ServerEvent> = store.events_after(before, i64::MAX, 100, usize::MAX).expect("the store reads").iter().map(|e| serde_json::from_slice(&e.json).expect("a stored event")).collect();
    let stored: Vec<(i64, &str)> = stored.iter().map(|e| (e.seq, kind(e))).collect();
    assert_eq!(stored, [(before + 1, "turn_started"), (before + 2, "text"), (before + 3, "text"), (before + 4, "text"), (before + 5, "turn_completed")]);
    let turn = store.turns(10).expect("the store reads").into_iter().find(|t| t.start.first_seq == before + 1).expect("the turn is recorded");
    assert_eq!((turn.outcome.as_str(), turn.result.as_deref(), turn.last_seq), (Outcome::Completed.as_str(), Some("after the disk"), Some(before + 5)));
    let st = status(&engine).await;
    assert_eq!((st["state"].as_str(), st["counters"]["failed"].as_i64(), st["counters"]["completed"].as_i64()), (Some("idle"), Some(1), Some(1)), "{st}");

    // Nothing the full disk refused is lost: what failed to be written was written with the
    // next commit, so the store holds every event from the first on, without a hole, and the
    // failed turn's record says how it ended.
    let all: Vec<i64> = store.events_after(0, i64::MAX, 1_000_000, usize::MAX).expect("the store reads").iter().map(|e| e.seq).collect();
    let newest = engine.status().last_seq;
    assert_eq!(all, (1..=newest).collect::<Vec<_>>(), "every event, in order, no hole");
    let failed = store.turns(10).expect("the store reads").into_iter().find(|t| t.start.first_seq == 1).expect("the first turn is recorded");
    assert_eq!(failed.outcome, Outcome::Failed.as_str(), "{failed:?}");
    assert!(failed.error.as_deref().is_some_and(|e| e.contains("store_unavailable")), "{failed:?}");
    assert!(failed.last_seq.is_some_and(|s| s < before + 1), "its turn_failed is stored before the next turn: {failed:?}");
}
