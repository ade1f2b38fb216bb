//! `conversations` and `conversation` through the engine's JSON-RPC handling, on the SQLite store
//! and on memory: pages newest first with a cursor that walks them all once, a conversation's
//! turns in order with their outcomes and sequence numbers, paging of turns, the limit at
//! `HISTORY_MAX_PAGE` and one past it, a cursor this runtime did not give, an unknown id
//! (`conversation_not_found`), and the grant: a credential that may not read events is refused,
//! one that may is allowed whatever its methods.

use std::path::PathBuf;
use std::sync::Arc;

use openagents_protocol::{ErrorCode, HISTORY_MAX_PAGE, RuntimeSubmitError, Turn};
use openagents_server::events::EventHub;
use openagents_server::store::{MemoryStore, SqliteStore, Store};
use openagents_server::{Caller, EngineConfig, FnAgent, Grant, RpcEngine, TurnContext};
use serde_json::{Value, json};

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("openagents-history-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    dir.join("store.db")
}

/// An engine whose agent streams the task's words back and completes, or fails when the task
/// starts with `fail`.
fn engine(store: Arc<dyn Store>) -> RpcEngine {
    let hub = EventHub::with_store(64, store, 1000).expect("a hub on the store");
    let config = EngineConfig { default_runner: Some("script".into()), ..EngineConfig::default() };
    RpcEngine::with_events(
        FnAgent(|turn: Turn, ctx: TurnContext| async move {
            for word in turn.task.split_whitespace() {
                ctx.text(word);
            }
            if turn.task.starts_with("fail") {
                return Err(RuntimeSubmitError { code: ErrorCode::RunnerFailed, message: "asked to fail".into(), retryable: true, details: None });
            }
            Ok(turn.task)
        }),
        config,
        hub,
    )
}

/// One JSON-RPC call as `caller`: the whole reply.
async fn call(engine: &RpcEngine, caller: &Caller, method: &str, params: Value) -> Value {
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let reply = engine.handle_message(caller, request.as_bytes(), None).await.expect("a reply");
    serde_json::from_slice(&reply).expect("JSON")
}

async fn result(engine: &RpcEngine, method: &str, params: Value) -> Value {
    let reply = call(engine, &Caller::stdio(), method, params).await;
    assert!(reply.get("error").is_none(), "{method}: {reply}");
    reply["result"].clone()
}

async fn refusal(engine: &RpcEngine, caller: &Caller, method: &str, params: Value) -> (i64, String, String) {
    let reply = call(engine, caller, method, params).await;
    let e = &reply["error"];
    (e["code"].as_i64().unwrap_or_default(), e["data"]["code"].as_str().unwrap_or_default().to_owned(), e["data"]["message"].as_str().unwrap_or_default().to_owned())
}

/// Submits `task` in `conversation` and waits for its end.
async fn turn(engine: &RpcEngine, conversation: &str, task: &str) {
    let _ = call(engine, &Caller::stdio(), "submit", json!({"task": task, "conversation": conversation})).await;
}

fn ids(page: &Value) -> Vec<String> {
    page["conversations"].as_array().expect("conversations").iter().map(|c| c["id"].as_str().expect("id").to_owned()).collect()
}

async fn check_history(store: Arc<dyn Store>) {
    let engine = engine(store);
    // Five conversations; `c2` gets a second and a failing third turn last, so it is the newest.
    for c in ["c0", "c1", "c2", "c3", "c4"] {
        turn(&engine, c, &format!("first task of {c}\nsecond line")).await;
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    turn(&engine, "c2", "again please").await;
    turn(&engine, "c2", "fail now").await;

    // Pages of two, newest first, the cursor walking every conversation once.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(c) => json!({"limit": 2, "cursor": c}),
            None => json!({"limit": 2}),
        };
        let page = result(&engine, "conversations", params).await;
        assert!(ids(&page).len() <= 2, "{page}");
        seen.extend(ids(&page));
        pages += 1;
        match page.get("next") {
            Some(next) => cursor = Some(next.as_str().expect("a cursor").to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, ["c2", "c4", "c3", "c1", "c0"], "newest first, each once");
    assert_eq!(pages, 3);
    // No params: the default page holds them all, each with its runner, title and count.
    let all = result(&engine, "conversations", Value::Null).await;
    assert!(all.get("next").is_none(), "{all}");
    let c2 = &all["conversations"][0];
    assert_eq!((c2["id"].as_str(), c2["runner"].as_str(), c2["title"].as_str(), c2["turns"].as_i64()), (Some("c2"), Some("script"), Some("first task of c2"), Some(3)), "{c2}");
    assert!(c2["updated_at_ms"].as_i64() >= c2["created_at_ms"].as_i64(), "{c2}");
    assert_eq!(all["conversations"][1]["turns"], 1);

    // One conversation's turns, in order, with outcomes and sequence numbers.
    let conv = result(&engine, "conversation", json!({"id": "c2"})).await;
    assert_eq!(conv["conversation"]["id"], "c2");
    let turns = conv["turns"].as_array().expect("turns");
    assert_eq!(turns.iter().map(|t| t["task"].as_str().unwrap()).collect::<Vec<_>>(), ["first task of c2\nsecond line", "again please", "fail now"]);
    assert_eq!(turns.iter().map(|t| t["outcome"].as_str().unwrap()).collect::<Vec<_>>(), ["completed", "completed", "failed"]);
    assert_eq!(turns[1]["result"], "again please");
    assert_eq!((turns[2]["error"]["code"].as_str(), turns[2].get("result")), (Some("runner_failed"), None), "{}", turns[2]);
    for t in turns {
        assert_eq!(t["runner"], "script");
        assert!(t["assignment"].is_string() && t["finished_at_ms"].as_i64() >= t["started_at_ms"].as_i64(), "{t}");
        // turn_started, a text per word, and the terminal event.
        let words = t["task"].as_str().unwrap().split_whitespace().count() as i64;
        assert_eq!(t["last_seq"].as_i64().unwrap() - t["first_seq"].as_i64().unwrap(), words + 1, "{t}");
    }
    // Paged one at a time: the same turns.
    let mut paged = Vec::new();
    let mut params = json!({"id": "c2", "limit": 1});
    loop {
        let page = result(&engine, "conversation", params.clone()).await;
        paged.extend(page["turns"].as_array().expect("turns").iter().map(|t| t["first_seq"].clone()));
        match page.get("next") {
            Some(next) => params["cursor"] = next.clone(),
            None => break,
        }
    }
    assert_eq!(paged, turns.iter().map(|t| t["first_seq"].clone()).collect::<Vec<_>>());

    // The limit: HISTORY_MAX_PAGE is taken, one more is refused by the schema.
    result(&engine, "conversations", json!({"limit": HISTORY_MAX_PAGE})).await;
    result(&engine, "conversation", json!({"id": "c2", "limit": HISTORY_MAX_PAGE})).await;
    for (method, params) in [("conversations", json!({"limit": HISTORY_MAX_PAGE + 1})), ("conversation", json!({"id": "c2", "limit": HISTORY_MAX_PAGE + 1})), ("conversations", json!({"limit": 0}))] {
        let (code, kind, _) = refusal(&engine, &Caller::stdio(), method, params).await;
        assert_eq!((code, kind.as_str()), (-32602, "invalid_params"), "{method}");
    }
    // A cursor this runtime did not give.
    for (method, params) in [("conversations", json!({"cursor": "yesterday"})), ("conversation", json!({"id": "c2", "cursor": "c2"}))] {
        let (_, kind, message) = refusal(&engine, &Caller::stdio(), method, params).await;
        assert_eq!(kind, "invalid_params", "{method}: {message}");
        assert!(message.contains("cursor"), "{message}");
    }
    // An unknown id, and a missing one.
    let (code, kind, message) = refusal(&engine, &Caller::stdio(), "conversation", json!({"id": "nope"})).await;
    assert_eq!((code, kind.as_str()), (-32013, "conversation_not_found"), "{message}");
    assert!(message.contains("`nope`") && message.contains("conversations"), "{message}");
    let (_, kind, _) = refusal(&engine, &Caller::stdio(), "conversation", json!({})).await;
    assert_eq!(kind, "invalid_params");

    // The grant: events decide, not the method list.
    let blind = Caller { name: "blind".into(), grant: Grant { events: false, ..Grant::controller() }, trusted: false };
    for (method, params) in [("conversations", Value::Null), ("conversation", json!({"id": "c2"}))] {
        let (code, kind, message) = refusal(&engine, &blind, method, params).await;
        assert_eq!((code, kind.as_str()), (-32002, "forbidden"), "{method}");
        assert!(message.contains("`blind` may not read events"), "{message}");
    }
    let (_, kind, _) = refusal(&engine, &blind, "conversation", json!({"id": "nope"})).await;
    assert_eq!(kind, "forbidden", "the grant is checked before the store is asked");
    let reader = Caller { name: "reader".into(), grant: Grant { methods: ["status".to_owned()].into(), events: true, approvals: false, metrics: false }, trusted: false };
    let page = call(&engine, &reader, "conversations", json!({"limit": 1})).await;
    assert_eq!(ids(&page["result"]), ["c2"], "{page}");
    // `status` tells a client it may call them.
    let status = call(&engine, &reader, "status", Value::Null).await;
    let methods: Vec<&str> = status["result"]["caller"]["methods"].as_array().expect("methods").iter().map(|m| m.as_str().unwrap()).collect();
    assert!(methods.contains(&"conversations") && methods.contains(&"conversation"), "{methods:?}");
    let status = call(&engine, &blind, "status", Value::Null).await;
    assert!(!status["result"]["caller"]["methods"].as_array().expect("methods").iter().any(|m| m == "conversations"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_on_the_sqlite_store() {
    check_history(Arc::new(SqliteStore::open(&temp("sqlite")).expect("a new store"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_on_memory() {
    check_history(Arc::new(MemoryStore::new())).await;
}

/// A page of turns stops before `HISTORY_PAGE_MAX_BYTES`, whatever `limit` says, and its `next`
/// goes on from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_long_turns_stops_before_the_byte_bound() {
    let engine = engine(Arc::new(MemoryStore::new()));
    // Each turn holds its task twice (task and result): ~190 KB of JSON.
    let task = "x".repeat(95_000);
    let n = openagents_protocol::HISTORY_PAGE_MAX_BYTES / 190_000 + 3;
    for _ in 0..n {
        turn(&engine, "long", &task).await;
    }
    let page = result(&engine, "conversation", json!({"id": "long", "limit": HISTORY_MAX_PAGE})).await;
    let held = page["turns"].as_array().expect("turns").len();
    assert!(held < n && held >= n - 4, "{held} of {n}");
    assert!(page.to_string().len() <= openagents_protocol::HISTORY_PAGE_MAX_BYTES + 4096);
    let rest = result(&engine, "conversation", json!({"id": "long", "limit": HISTORY_MAX_PAGE, "cursor": page["next"]})).await;
    assert_eq!(held + rest["turns"].as_array().expect("turns").len(), n);
    assert!(rest.get("next").is_none());
}
