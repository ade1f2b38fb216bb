//! End-to-end tests of the frontend WebSocket, `/frontend/v2`: real tokio-tungstenite clients
//! against real listeners on 127.0.0.1:0 (`run_http_authorized`, which serves the WebSocket on
//! the HTTP port, and `run_frontend_websocket`, which serves only the WebSocket), with
//! in-process agents and the real `ask` runner.

mod ws_common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use openagents_server::{Caller, RpcEngine, SERVER_MAX_LINE_BYTES, run_frontend_websocket};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use ws_common::*;

// ---------------------------------------------------------------------------------------------
// Authentication before the upgrade
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
enum Want {
    /// 101, with this subprotocol answered.
    Upgrade(Option<&'static str>),
    /// No upgrade: this status, and a body containing this.
    Refused(u16, &'static str),
}

const AUTH_CASES: &[(&str, &str, Auth<'static>, Want)] = &[
    ("Authorization header", "/frontend/v2", Auth::Header(ADMIN), Want::Upgrade(None)),
    ("bearer subprotocol", "/frontend/v2", Auth::Protocol(ADMIN), Want::Upgrade(Some("openagents.v2"))),
    ("bearer subprotocol, observer", "/frontend/v2", Auth::Protocol(WATCHER), Want::Upgrade(Some("openagents.v2"))),
    ("no credentials", "/frontend/v2", Auth::None, Want::Refused(401, "\"unauthorized\"")),
    ("wrong header token", "/frontend/v2", Auth::Header("tok-wrong"), Want::Refused(401, "\"unauthorized\"")),
    ("wrong subprotocol token", "/frontend/v2", Auth::Protocol("tok-wrong"), Want::Refused(401, "\"unauthorized\"")),
    ("a token in the URL is not a credential", "/frontend/v2?token=tok-admin", Auth::None, Want::Refused(401, "\"unauthorized\"")),
    ("wrong path", "/frontend/v1", Auth::Header(ADMIN), Want::Refused(404, "not found")),
    ("root", "/", Auth::Header(ADMIN), Want::Refused(404, "not found")),
];

async fn check_auth_matrix(listener: &str, addr: SocketAddr) {
    for (name, path, auth, want) in AUTH_CASES {
        let got = try_connect(addr, path, *auth).await;
        match (want, got) {
            (Want::Upgrade(protocol), Ok(mut up)) => {
                assert_eq!(up.status, 101, "{listener}: {name}");
                assert_eq!(up.protocol.as_deref(), *protocol, "{listener}: {name}: the answered subprotocol");
                let status = up.ws.call("status", Value::Null).await;
                assert_eq!(status["result"]["state"], "idle", "{listener}: {name}: the socket answers: {status}");
            }
            (Want::Refused(code, needle), Err((status, body))) => {
                assert_eq!(status, *code, "{listener}: {name}: {body}");
                assert!(body.contains(needle), "{listener}: {name}: the body says why: {body}");
                assert!(!body.contains("tok-"), "{listener}: {name}: a refusal never repeats a token: {body}");
            }
            (want, Ok(up)) => panic!("{listener}: {name}: want {want:?}, got an upgrade ({})", up.status),
            (want, Err(got)) => panic!("{listener}: {name}: want {want:?}, got {got:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upgrade_is_authenticated_on_both_listeners() {
    let engine = script_engine(STEP);
    let http_addr = http_runtime(&engine).await;
    check_auth_matrix("run_http_authorized", http_addr).await;
    let ws_only = run_frontend_websocket(engine.clone(), "127.0.0.1:0", credentials()).await.expect("the WebSocket listener binds");
    check_auth_matrix("run_frontend_websocket", ws_only.local_addr()).await;

    // The HTTP listener serves the HTTP endpoints too; the WebSocket-only one serves nothing else.
    let (status, body) = rpc(http_addr, ADMIN, &json!({"id": 1, "method": "status"})).await;
    assert_eq!((status, &body["result"]["state"]), (200, &json!("idle")), "{body}");
    for (method, path) in [("POST", "/rpc"), ("GET", "/events")] {
        let (status, _, body) = http(ws_only.local_addr(), method, path, Some(ADMIN), r#"{"id":1,"method":"status"}"#).await;
        assert_eq!(status, 404, "{method} {path} on the WebSocket-only listener: {body}");
        assert!(body.contains("/frontend/v2"), "the 404 names the only endpoint: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_without_events_connects_but_may_not_subscribe() {
    let engine = script_engine(STEP);
    let addr = http_runtime(&engine).await;
    // One rule for events on every transport: the `events` grant decides, for `GET /events` and
    // for `subscribe` alike. `nosub` has events without the `subscribe` method: it may read them
    // both ways; `blind` has the method without events: neither way.
    let mut ws = connect(addr, NOSUB).await;
    let r = ws.call("subscribe", json!({"since": 0})).await;
    assert!(r["result"]["last_seq"].is_i64(), "nosub may subscribe, as it may GET /events: {r}");
    let _sse = Sse::open(addr, NOSUB, 0).await;
    let refused = {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(addr).await.expect("connects");
        s.write_all(format!("GET /events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {BLIND}\r\nConnection: close\r\n\r\n").as_bytes()).await.expect("writes");
        let mut head = vec![0u8; 12];
        tokio::time::timeout(STEP, s.read_exact(&mut head)).await.expect("answered in time").expect("reads");
        String::from_utf8_lossy(&head).into_owned()
    };
    assert!(refused.starts_with("HTTP/1.1 403"), "blind may not GET /events: {refused}");
    for (token, who) in [(BLIND, "blind")] {
        let mut ws = connect(addr, token).await;
        let status = ws.call("status", Value::Null).await;
        assert!(status["result"]["state"].is_string(), "{who} may call status: {status}");
        let r = ws.call("subscribe", json!({"since": 0})).await;
        assert_eq!(error_code(&r), "forbidden", "{who}: {r}");
        assert_eq!(r["jsonrpc"], "2.0", "{r}");
        assert!(r["error"]["data"]["message"].as_str().unwrap_or_default().contains(who), "the error names the credential: {r}");
        // It gets no events: a whole turn runs, and nothing but the next response arrives.
        let turn = submit(&engine, "burst:3");
        finished(turn).await.expect("the turn completes");
        ws.call("status", Value::Null).await;
        assert!(ws.unread().is_empty(), "{who} was sent something: {:?}", ws.unread());
    }
}

// ---------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_answered_with_their_id_and_status_matches_http() {
    let engine = script_engine(STEP);
    let addr = http_runtime(&engine).await;
    let mut ws = connect(addr, ADMIN).await;
    // (request text, the id echoed, whether `jsonrpc` is echoed, the typed error code or None)
    let cases: &[(&str, Value, bool, Option<&str>)] = &[
        (r#"{"jsonrpc":"2.0","id":7,"method":"status"}"#, json!(7), true, None),
        (r#"{"jsonrpc":"2.0","id":"abc","method":"status"}"#, json!("abc"), true, None),
        (r#"{"id":8,"method":"status"}"#, json!(8), true, None),
        (r#"{"jsonrpc":"2.0","id":9,"method":"frobnicate"}"#, json!(9), true, Some("unknown_method")),
        (r#"{"jsonrpc":"2.0","id":10,"method":"submit","params":{}}"#, json!(10), true, Some("invalid_params")),
        (r#"{"jsonrpc":"2.0","id":11,"method":"submit","params":{"task":""}}"#, json!(11), true, Some("invalid_params")),
        ("this is not JSON", Value::Null, true, Some("parse_error")),
    ];
    for (text, id, jsonrpc, code) in cases {
        ws.send_text((*text).to_owned()).await;
        let r = ws.expect("a response", is_response).await;
        assert_eq!(&r["id"], id, "{text} → {r}");
        assert_eq!(r.get("jsonrpc").is_some(), *jsonrpc, "{text} → {r}");
        match code {
            None => assert!(r["result"].is_object(), "{text} → {r}"),
            Some(c) => {
                assert_eq!(error_code(&r), *c, "{text} → {r}");
                assert!(r["error"]["code"].is_i64() && r["error"]["message"].is_string(), "a JSON-RPC error object: {r}");
            }
        }
    }

    let over_ws = ws.call("status", Value::Null).await["result"].clone();
    let (http_status, over_http) = rpc(addr, ADMIN, &json!({"jsonrpc": "2.0", "id": 1, "method": "status"})).await;
    assert_eq!(http_status, 200);
    let over_http = over_http["result"].clone();
    assert_eq!(shape(&over_ws), shape(&over_http), "status has one shape on every transport:\n{over_ws}\n{over_http}");
    for key in ["state", "counters", "last_seq", "schema_version", "limits", "active_turn"] {
        assert_eq!(over_ws[key], over_http[key], "status.{key}");
    }
    assert_eq!(over_ws["limits"]["max_line_bytes"], json!(SERVER_MAX_LINE_BYTES));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_arrive_as_notifications_after_subscribe() {
    let engine = script_engine(STEP);
    let addr = http_runtime(&engine).await;
    // A turn before anyone subscribes: a subscription without `since` does not replay it.
    finished(submit(&engine, "burst:3")).await.expect("the first turn completes");
    let (mut admin, last) = subscribed(addr, ADMIN, None).await;
    assert_eq!(last, 5, "turn_started, three texts, turn_completed");
    // Authenticated by subprotocol: the same stream.
    let mut watcher = match try_connect(addr, "/frontend/v2", Auth::Protocol(WATCHER)).await {
        Ok(u) => u.ws,
        Err(e) => panic!("the watcher is refused: {e:?}"),
    };
    assert_eq!(watcher.subscribe(None).await, 5);

    let result = finished(submit(&engine, "hello world")).await.expect("the second turn completes");
    assert_eq!(result["result"], "done");
    for ws in [&mut admin, &mut watcher] {
        let n = ws.expect("an event notification", |v| v["method"] == "frontend.v2.event").await;
        assert_eq!(n["jsonrpc"], "2.0", "{n}");
        assert!(n.get("id").is_none(), "a notification has no id: {n}");
        let mut events = vec![n["params"].clone()];
        events.extend(ws.events_until(&["turn_completed"]).await);
        assert_eq!(types(&events), ["turn_started", "text", "text", "turn_completed"]);
        assert_contiguous(&events, 6);
        assert!(events.iter().all(|e| e["time_ms"].is_i64()), "{events:?}");
        assert_eq!(events[1]["event"]["text"], "hello");
        assert_eq!(events[3]["event"]["result"], "done");
    }

    // The WebSocket and SSE project events identically.
    let (mut replay, _) = subscribed(addr, WATCHER, Some(0)).await;
    let over_ws = replay.events_until(&["turn_completed"]).await;
    let mut sse = Sse::open(addr, WATCHER, 0).await;
    let over_sse = sse.until(&["turn_completed"]).await;
    assert_eq!(seqs(&over_ws), (1..=5).collect::<Vec<_>>());
    assert_eq!(over_ws, over_sse, "one projection for every transport");
}

// ---------------------------------------------------------------------------------------------
// Order and sequence across reconnects
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_with_since_gets_every_later_event_exactly_once() {
    // (events read before disconnecting, text events published while away, published while the
    // new subscription replays)
    let cases: &[(usize, usize, usize)] = &[(3, 5, 0), (0, 40, 40), (10, 600, 0), (0, 1000, 40)];
    for &(read, away, during) in cases {
        let engine = script_engine(STEP);
        let addr = http_runtime(&engine).await;
        let (mut first, base) = subscribed(addr, WATCHER, None).await;
        finished(submit(&engine, &format!("burst:{}", read + 5))).await.expect("the turn completes");
        let mut last_seen = base;
        for _ in 0..read {
            let ev = first.event().await;
            assert_eq!(ev["seq"], json!(last_seen + 1), "case {read}/{away}/{during}");
            last_seen += 1;
        }
        drop(first);

        finished(submit(&engine, &format!("burst:{away}"))).await.expect("the turn while away completes");
        let mut second = connect(addr, WATCHER).await;
        second.subscribe(Some(last_seen)).await;
        let live = submit(&engine, &format!("burst:{during}"));
        finished(live).await.expect("the live turn completes");
        let last = engine.status().last_seq;
        let mut events = Vec::new();
        while events.last().map_or(last_seen, |e: &Value| e["seq"].as_i64().unwrap_or(0)) < last {
            let ev = second.event().await;
            assert!(!matches!(event_type(&ev), "lagged" | "gap"), "case {read}/{away}/{during}: nothing was lost, yet: {ev}");
            events.push(ev);
        }
        assert_contiguous(&events, last_seen + 1);
        assert_eq!(events.len() as i64, last - last_seen, "case {read}/{away}/{during}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_since_older_than_the_replay_buffer_gets_a_gap_first() {
    let engine = script_engine(STEP);
    let addr = http_runtime(&engine).await;
    finished(submit(&engine, "burst:1100")).await.expect("the turn completes");
    let last = engine.status().last_seq;
    assert_eq!(last, 1102);
    let oldest = last - openagents_server::SERVER_EVENT_CHANNEL_CAPACITY as i64 + 1;

    let (mut ws, _) = subscribed(addr, WATCHER, Some(1)).await;
    let gap = ws.event().await;
    assert_eq!(event_type(&gap), "gap", "{gap}");
    assert_eq!(gap["event"]["since"], 1);
    assert_eq!(gap["event"]["resumed_at"], json!(oldest - 1));
    assert_eq!(gap["seq"], json!(oldest - 1), "a gap carries the newest seq it skipped to");
    let mut events = Vec::new();
    while events.len() < openagents_server::SERVER_EVENT_CHANNEL_CAPACITY {
        events.push(ws.event().await);
    }
    assert_contiguous(&events, oldest);

    let mut sse = Sse::open(addr, WATCHER, 1).await;
    let first = sse.next().await;
    assert_eq!(first["event"], gap["event"], "SSE tells of the same gap");
}

/// How many text events the turns of the order tests publish.
const ORDER_TEXTS: usize = 50;

/// Every message up to the response with id `id` (not included), in the order they arrived, and
/// that response.
async fn until_response(ws: &mut Ws, id: &Value) -> (Vec<Value>, Value) {
    let mut before = Vec::new();
    loop {
        match ws.recv().await {
            Incoming::Json(v) if is_response(&v) && &v["id"] == id => return (before, v),
            Incoming::Json(v) => before.push(v),
            Incoming::Closed(c) => panic!("the connection closed ({c:?}) before the response to {id}; read: {before:?}"),
        }
    }
}

/// The `frontend.v2.event` notifications among `messages`: their events.
fn events_of(messages: &[Value]) -> Vec<Value> {
    messages.iter().filter(|m| m["method"] == "frontend.v2.event").map(|m| m["params"].clone()).collect()
}

/// `subscribe` and `submit` sent back to back in one write, on a fresh connection, as a client
/// that does not wait for the first answer sends them: the subscription takes effect before the
/// submit runs (the connection gets the whole turn, `turn_started` first), its answer comes
/// before the turn's first event, and the submit's answer comes after the turn's
/// `turn_completed`. Twenty rounds, each on a connection of its own; every failed round is
/// counted by kind before the test fails, so a regression says how often it struck.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_then_submit_in_one_write_gets_the_whole_turn_before_the_answer() {
    const ROUNDS: usize = 20;
    let engine = script_engine(STEP);
    let addr = http_runtime(&engine).await;
    let want: Vec<&str> = std::iter::once("turn_started").chain(std::iter::repeat_n("text", ORDER_TEXTS)).chain(std::iter::once("turn_completed")).collect();
    let (mut missed_start, mut answered_early, mut subscribe_late, mut wrong) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let mut ws = connect(addr, ADMIN).await;
        let subscribe = json!({"jsonrpc": "2.0", "id": "sub", "method": "subscribe", "params": {}});
        let go = json!({"jsonrpc": "2.0", "id": "go", "method": "submit", "params": {"task": format!("burst:{ORDER_TEXTS}")}});
        ws.send_burst(&[subscribe, go]).await;
        let (before, answer) = until_response(&mut ws, &json!("go")).await;
        assert_eq!(answer["result"]["result"], "done", "round {round}: {answer}");
        // The turn has ended (its answer says so): nothing after this seq is the round's.
        let turn_end = engine.status().last_seq;
        let subscribed = match before.iter().find(|v| is_response(v) && v["id"] == "sub") {
            Some(r) => r.clone(),
            None => ws.expect("the response to `subscribe`", |v| is_response(v) && v["id"] == "sub").await,
        };
        let base = subscribed["result"]["last_seq"].as_i64().unwrap_or_else(|| panic!("round {round}: subscribe failed: {subscribed}"));
        // Whatever of the turn came after the answer: a marker turn run in process afterwards
        // is delivered after it on the live subscription, so reading up to the marker's end
        // reads all of it, with no waiting on luck.
        finished(submit(&engine, "marker")).await.expect("the marker turn completes");
        let marker_end = engine.status().last_seq;
        let mut stream = events_of(&before);
        while stream.last().and_then(|e| e["seq"].as_i64()).unwrap_or(base) < marker_end {
            stream.push(ws.event().await);
        }
        let turn: Vec<Value> = stream.iter().filter(|e| e["seq"].as_i64().is_some_and(|s| s <= turn_end)).cloned().collect();
        let early = events_of(&before);
        if types(&turn).first() != Some(&"turn_started") {
            missed_start.push(round);
        }
        if !types(&early).contains(&"turn_completed") {
            answered_early.push(round);
        }
        if before.first().is_none_or(|v| v["id"] != "sub") {
            subscribe_late.push(round);
        }
        if types(&turn) != want || seqs(&turn) != (base + 1..=turn_end).collect::<Vec<_>>() || early.len() != turn.len() {
            wrong.push(round);
        }
    }
    assert!(
        missed_start.is_empty() && answered_early.is_empty() && subscribe_late.is_empty() && wrong.is_empty(),
        "of {ROUNDS} rounds: {} missed `turn_started` {missed_start:?}; {} had the submit's answer before `turn_completed` {answered_early:?}; {} had an event before the subscribe's answer {subscribe_late:?}; {} did not get the whole turn, in order, before the answer {wrong:?}",
        missed_start.len(),
        answered_early.len(),
        subscribe_late.len(),
        wrong.len(),
    );
}

/// A `subscribe` that replays: the replayed events are written before its answer, as every
/// event published before an answer is, so a frontend can tell the replay from what follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_is_written_before_the_subscribe_answer() {
    let engine = script_engine(STEP);
    let addr = http_runtime(&engine).await;
    finished(submit(&engine, &format!("burst:{ORDER_TEXTS}"))).await.expect("the turn completes");
    let mut ws = connect(addr, WATCHER).await;
    for round in 0..10 {
        ws.send(&json!({"jsonrpc": "2.0", "id": round, "method": "subscribe", "params": {"since": 1}})).await;
        let (before, answer) = until_response(&mut ws, &json!(round)).await;
        let last_seq = answer["result"]["last_seq"].as_i64().unwrap_or_else(|| panic!("round {round}: subscribe failed: {answer}"));
        assert_eq!(seqs(&events_of(&before)), (2..=last_seq).collect::<Vec<_>>(), "round {round}: the replay, whole and in order, before the answer");
        assert_eq!(before.len(), events_of(&before).len(), "round {round}: nothing but the replay before the answer: {before:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Approvals
// ---------------------------------------------------------------------------------------------

/// The events of the last turn, over SSE from the start.
async fn sse_events(addr: SocketAddr) -> Vec<Value> {
    let mut sse = Sse::open(addr, WATCHER, 0).await;
    sse.until(&["turn_completed", "turn_failed"]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answered_approval_reaches_the_agent_and_is_an_event() {
    // (the reply, the turn's result)
    let cases = [(json!({"approved": true, "answer": "go"}), "approved=true answer=go", true), (json!({"approved": false}), "approved=false", false)];
    for (reply, result, approved) in cases {
        let engine = script_engine(STEP);
        let addr = http_runtime(&engine).await;
        let (mut alice, _) = subscribed(addr, ALICE, None).await;
        let (mut watcher, _) = subscribed(addr, WATCHER, None).await;
        let turn = submit(&engine, "ask:deploy_now");

        let req = alice.approval_request().await;
        assert_eq!(req["jsonrpc"], "2.0", "{req}");
        assert!(req["id"].is_string(), "{req}");
        assert_eq!(req["params"]["request_id"], req["id"], "{req}");
        assert_eq!(req["params"]["prompt"], "deploy now");
        assert_eq!(req["params"]["timeout_ms"], json!(STEP.as_millis() as u64));
        alice.answer(&req["id"], reply.clone()).await;
        let done = finished(turn).await.expect("the turn completes");
        assert_eq!(done["result"], result, "{reply}");

        let over_sse = sse_events(addr).await;
        for (who, events) in [("alice", alice.events_until(&["turn_completed"]).await), ("watcher", watcher.events_until(&["turn_completed"]).await), ("sse", over_sse)] {
            assert_eq!(types(&events), ["turn_started", "approval_requested", "approval_resolved", "turn_completed"], "{who}");
            assert_eq!(events[1]["event"]["request_id"], req["id"], "{who}");
            assert_eq!(events[1]["event"]["prompt"], "deploy now", "{who}");
            assert_eq!(events[2]["event"], json!({"type": "approval_resolved", "request_id": req["id"], "approved": approved, "by": "alice"}), "{who}");
        }
        assert!(!alice.unread().iter().any(|m| m["method"] == "frontend.v2.approval_resolved"), "the winner is not told: {:?}", alice.unread());
        assert!(!watcher.unread().iter().any(|m| m["method"] == "frontend.v2.approval"), "an observer is never asked: {:?}", watcher.unread());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_approval_times_out_denied() {
    let Asked { engine: _engine, addr, mut alice, turn, req } = asked(SHORT).await;
    assert_eq!(req["params"]["timeout_ms"], json!(SHORT.as_millis() as u64));
    let resolved = alice.expect("the request to be settled", |v| v["method"] == "frontend.v2.approval_resolved").await;
    assert_eq!(resolved["params"]["request_id"], req["id"]);
    assert_eq!(resolved["params"]["approved"], false);
    assert_eq!(finished(turn).await.expect("the turn completes")["result"], "approved=false");

    for (who, events) in [("ws", alice.events_until(&["turn_completed"]).await), ("sse", sse_events(addr).await)] {
        assert_eq!(types(&events), ["turn_started", "approval_requested", "approval_denied", "turn_completed"], "{who}");
        let denied = &events[2]["event"];
        assert_eq!(denied["request_id"], req["id"], "{who}");
        assert_eq!(denied["prompt"], "deploy now", "{who}");
        assert!(denied["reason"].as_str().unwrap_or_default().contains("no answer within"), "{who}: {denied}");
    }
    // A late answer is ignored: no error, and the next response is the next thing sent.
    alice.answer(&req["id"], json!({"approved": true})).await;
    alice.call("status", Value::Null).await;
    assert!(alice.take_unread().is_empty(), "a late answer gets nothing back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_of_two_answers_wins() {
    let (engine, addr, mut alice, mut bob) = alice_and_bob(STEP).await;
    let turn = submit(&engine, "ask:merge");
    let to_alice = alice.approval_request().await;
    let to_bob = bob.approval_request().await;
    assert_eq!(to_alice["id"], to_bob["id"], "one request, sent to both");
    alice.answer(&to_alice["id"], json!({"approved": true})).await;
    let resolved = bob.expect("bob to be told", |v| v["method"] == "frontend.v2.approval_resolved").await;
    assert_eq!(resolved["params"], json!({"request_id": to_bob["id"], "approved": true, "by": "alice"}));
    // Bob's late answer changes nothing and gets nothing back.
    bob.answer(&to_bob["id"], json!({"approved": false})).await;
    assert_eq!(finished(turn).await.expect("the turn completes")["result"], "approved=true");
    bob.call("status", Value::Null).await;
    assert!(!bob.unread().iter().any(is_response), "a late answer gets no response: {:?}", bob.unread());

    for (who, events) in [("alice", alice.events_until(&["turn_completed"]).await), ("bob", bob.events_until(&["turn_completed"]).await), ("sse", sse_events(addr).await)] {
        assert_eq!(types(&events), ["turn_started", "approval_requested", "approval_resolved", "turn_completed"], "{who}");
        assert_eq!(only(&events, "approval_resolved")["by"], "alice", "{who}");
    }
    assert!(!alice.unread().iter().any(|m| m["method"] == "frontend.v2.approval_resolved"), "{:?}", alice.unread());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frontend_without_the_approvals_grant_is_never_asked_and_may_not_answer() {
    // What the observer sends to the request's id: an approving result, or an error response.
    let forged = [json!({"result": {"approved": true}}), json!({"error": {"code": -1, "message": "no"}})];
    for body in forged {
        let engine = script_engine(STEP);
        let addr = http_runtime(&engine).await;
        let (mut watcher, _) = subscribed(addr, WATCHER, None).await;
        let (mut alice, _) = subscribed(addr, ALICE, None).await;
        let turn = submit(&engine, "ask:rm_-rf");
        // The observer sees the request only as an event.
        let requested = watcher.expect("approval_requested", |v| v["params"]["event"]["type"] == "approval_requested").await;
        let id = requested["params"]["event"]["request_id"].clone();
        let mut message = json!({"jsonrpc": "2.0", "id": id});
        for (k, v) in body.as_object().expect("an object") {
            message[k] = v.clone();
        }
        watcher.send(&message).await;
        let refused = watcher.expect("the refusal", is_response).await;
        assert_eq!(refused["id"], id, "{refused}");
        assert_eq!(error_code(&refused), "forbidden", "{refused}");
        assert!(refused["error"]["data"]["message"].as_str().unwrap_or_default().contains("watcher"), "{refused}");

        // The request is still open: alice settles it.
        let req = alice.approval_request().await;
        assert_eq!(req["id"], id);
        alice.answer(&id, json!({"approved": true})).await;
        assert_eq!(finished(turn).await.expect("the turn completes")["result"], "approved=true", "the forged {body} changed nothing");
        let events = watcher.events_until(&["turn_completed"]).await;
        assert_eq!(only(&events, "approval_resolved")["by"], "alice");
        assert!(
            !watcher.unread().iter().any(|m| matches!(m["method"].as_str(), Some("frontend.v2.approval" | "frontend.v2.approval_resolved"))),
            "the observer was sent approval traffic: {:?}",
            watcher.unread()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_with_no_frontend_to_answer_is_denied_at_once() {
    let timeout = Duration::from_secs(30);
    let engine = script_engine(timeout);
    let addr = http_runtime(&engine).await;
    // Attached, but not allowed to answer.
    let (mut watcher, _) = subscribed(addr, WATCHER, None).await;
    let started = Instant::now();
    let done = finished(submit(&engine, "ask:deploy_now")).await.expect("the turn completes");
    assert_eq!(done["result"], "approved=false");
    assert!(started.elapsed() < timeout / 4, "denied without waiting for the timeout: {:?}", started.elapsed());
    for (who, events) in [("ws", watcher.events_until(&["turn_completed"]).await), ("sse", sse_events(addr).await)] {
        assert_eq!(types(&events), ["turn_started", "approval_denied", "turn_completed"], "{who}");
        let denied = &events[1]["event"];
        assert_eq!(denied["prompt"], "deploy now", "{who}");
        assert!(denied.get("request_id").is_none_or(Value::is_null), "{who}: never requested: {denied}");
        assert!(denied["reason"].as_str().unwrap_or_default().contains("no frontend"), "{who}: {denied}");
    }
}

// ---------------------------------------------------------------------------------------------
// A runner that asks through the schema
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ask_runner_is_approved_by_a_frontend_or_fails_closed() {
    for with_frontend in [true, false] {
        let engine = ask_engine(STEP);
        let addr = http_runtime(&engine).await;
        let (mut watcher, _) = subscribed(addr, WATCHER, None).await;
        let (last_type, outcome) = if with_frontend {
            // Alice submits over the WebSocket and answers the request on the same socket.
            let (mut alice, _) = subscribed(addr, ALICE, None).await;
            alice.send(&json!({"jsonrpc": "2.0", "id": "run", "method": "submit", "params": {"task": "deploy the site"}})).await;
            let req = alice.approval_request().await;
            assert_eq!(req["params"]["prompt"], "May I do this: deploy the site?");
            alice.answer(&req["id"], json!({"approved": true})).await;
            let r = alice.expect("the submit response", |v| is_response(v) && v["id"] == "run").await;
            assert_eq!(r["result"]["result"], "approved: deploy the site", "{r}");
            ("turn_completed", r["result"]["result"].clone())
        } else {
            let e = finished(submit(&engine, "deploy the site")).await.expect_err("fails closed");
            assert_eq!(e["code"], "runner_failed", "{e}");
            assert!(e["message"].as_str().unwrap_or_default().contains("denied: deploy the site"), "{e}");
            ("turn_failed", e["message"].clone())
        };
        let over_ws = watcher.events_until(&["turn_completed", "turn_failed"]).await;
        let over_sse = sse_events(addr).await;
        assert_eq!(over_ws, over_sse, "with_frontend={with_frontend}: the same events on both transports");
        let want: &[&str] = if with_frontend {
            &["turn_started", "text", "approval_requested", "approval_resolved", "turn_completed"]
        } else {
            &["turn_started", "text", "approval_denied", "turn_failed"]
        };
        assert_eq!(types(&over_ws), want, "with_frontend={with_frontend}");
        assert_eq!(over_ws[1]["event"]["text"], "asking for approval");
        let last = &over_ws.last().expect("events")["event"];
        assert_eq!(event_type(over_ws.last().expect("events")), last_type);
        if with_frontend {
            assert_eq!(last["result"], outcome);
            assert_eq!(over_ws[3]["event"]["by"], "alice");
        } else {
            assert_eq!(last["error"]["code"], "runner_failed");
            assert_eq!(last["error"]["message"], outcome);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A slow consumer
// ---------------------------------------------------------------------------------------------

/// Reads `turns` whole turns of events on a task of its own.
fn read_turns(mut ws: Ws, turns: usize) -> tokio::task::JoinHandle<(Ws, Vec<Value>)> {
    tokio::spawn(async move {
        let mut events = Vec::new();
        for _ in 0..turns {
            events.extend(ws.events_until(&["turn_completed"]).await);
        }
        (ws, events)
    })
}

/// Submits `task` and checks the turn ends promptly, whoever is not reading. An agent that waited
/// for a stuck frontend would wait out the server's patience with it (30 s in the case that can
/// tell); the bound leaves a starved debug build, publishing a thousand events, room enough.
async fn prompt_turn(engine: &RpcEngine, task: &str) {
    let started = Instant::now();
    finished(submit(engine, task)).await.expect("the turn completes");
    assert!(started.elapsed() < Duration::from_secs(10), "the agent waited for a slow frontend: {:?}", started.elapsed());
}

/// The most a socket's send buffer grows to: what the server's kernel may hold for a client that
/// does not read.
fn send_buffer_max() -> usize {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem").ok().and_then(|t| t.split_whitespace().nth(2)?.parse().ok()).unwrap_or(4 << 20)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_frontend_lags_or_is_disconnected_and_nobody_waits_for_it() {
    // Enough 16 KiB events to fill the server's socket buffer for the slow frontend, then small
    // ones: more than its outbound queue holds, so its stream stops. Fewer events in all than the
    // hub holds, so a frontend that reads keeps up.
    let big = send_buffer_max() / 16384 + 16;
    assert!(big + 300 < 1000, "the socket buffers are unusually large");
    let fill = format!("big:{big}:16384 burst:{}", 1000 - big);
    // (how long the server lets a full queue stay full, whether the slow frontend reads again
    // before the server gives up on it)
    for (patience, reads_in_time) in [(Duration::from_secs(30), true), (Duration::from_millis(500), false)] {
        let engine = script_engine(STEP);
        let server = openagents_server::Server::builder(engine.clone())
            .credentials(credentials())
            .http(openagents_server::HttpOptions::default())
            .websocket(openagents_server::WsOptions { stuck_timeout: patience });
        let addr = server.start().await.expect("the listener binds").addr();
        // A tiny receive buffer: a client that stops reading pushes back at once.
        let slow = try_connect_with(addr, request(addr, "/frontend/v2", Auth::Header(WATCHER)), Some(4096)).await;
        let mut slow = slow.unwrap_or_else(|e| panic!("refused: {e:?}")).ws;
        let base = slow.subscribe(None).await;
        // It never reads while the agent publishes: the turn ends promptly all the same.
        prompt_turn(&engine, &fill).await;
        // Another frontend, meanwhile, is served: it subscribes, gets every event of the next
        // turn, and is answered. For the slow frontend that next turn is more than the hub holds.
        let (good, since) = subscribed(addr, ADMIN, None).await;
        let reader = read_turns(good, 1);
        prompt_turn(&engine, if reads_in_time { "burst:1000" } else { "burst:10" }).await;
        let (mut good, events) = within("the good frontend's events", reader).await.expect("the reader does not panic");
        assert_contiguous(&events, since + 1);
        assert_eq!(events.len() as i64, engine.status().last_seq - since, "the other frontend got every event");
        assert_eq!(good.call("status", Value::Null).await["result"]["state"], "idle", "and is answered");

        if reads_in_time {
            // The slow frontend reads again: everything it is sent is in order, and what it
            // missed is announced by `lagged` before the stream moves on.
            let last = engine.status().last_seq;
            let mut seen = base;
            // (what it was told it missed since the last event it got)
            let mut missed_since = 0;
            let mut lagged = 0;
            while seen < last {
                let ev = slow.event().await;
                let seq = ev["seq"].as_i64().expect("a seq");
                if event_type(&ev) == "lagged" {
                    let missed = ev["event"]["missed"].as_i64().expect("missed");
                    assert!(missed >= 1, "{ev}");
                    // The newest seq delivered, counting what earlier notices since then
                    // announced (a second notice before the next event counts from there).
                    assert_eq!(seq, seen + missed_since, "a lagged notice carries the newest seq delivered or announced");
                    missed_since += missed;
                    lagged += 1;
                    continue;
                }
                assert_eq!(seq, seen + missed_since + 1, "no silent loss: every jump is announced by `lagged`, exactly");
                seen = seq;
                missed_since = 0;
            }
            assert!(lagged >= 1, "a frontend that fell behind the hub is told so");
        } else {
            // The server gives up on it: its subscription ends…
            within("the slow frontend to be dropped", async {
                while engine.status().subscribers > 1 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
            .await;
            // …and, reading again, it finds the close frame after what was already on its way.
            let (code, reason) = slow.close_frame().await;
            assert_eq!(code, 1013, "{reason}");
            assert!(reason.contains("too slow") && reason.contains("since"), "the reason says what to do: {reason}");
            let got: Vec<Value> = slow.take_unread().into_iter().map(|m| m["params"].clone()).collect();
            assert!(!got.is_empty(), "it was sent what fit");
            assert_contiguous(&got, base + 1);
            // Other frontends keep working.
            let mut again = connect(addr, WATCHER).await;
            assert_eq!(again.call("status", Value::Null).await["result"]["state"], "idle");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Bad frames
// ---------------------------------------------------------------------------------------------

/// Sends `frames` on a fresh connection while reading; returns the close frame's code and reason.
async fn close_after(addr: SocketAddr, frames: Vec<Message>) -> (u16, String) {
    let (mut sink, mut stream) = connect(addr, ADMIN).await.into_inner().split();
    // The server may stop reading (and reset the connection) mid-way: a failed send is fine.
    let sender = tokio::spawn(async move {
        for f in frames {
            if sink.send(f).await.is_err() {
                break;
            }
        }
        sink
    });
    let close = within("the close frame", async {
        loop {
            match stream.next().await {
                Some(Ok(Message::Close(Some(f)))) => return (u16::from(f.code), f.reason.to_string()),
                Some(Ok(Message::Close(None))) => panic!("a close frame without a code"),
                Some(Ok(_)) => continue,
                Some(Err(e)) => panic!("the connection failed before a close frame: {e}"),
                None => panic!("the connection ended without a close frame"),
            }
        }
    })
    .await;
    let _ = within("the sender", sender).await;
    close
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_binary_frames_close_the_connection_and_the_runtime_keeps_serving() {
    let engine = script_engine(STEP);
    let addr = http_runtime(&engine).await;
    let over = SERVER_MAX_LINE_BYTES + 1;
    let half = SERVER_MAX_LINE_BYTES / 2 + 1;
    let text = |n: usize| tokio_tungstenite::tungstenite::Bytes::from(" ".repeat(n));
    let cases: Vec<(&str, Vec<Message>, u16, &str)> = vec![
        ("a binary frame", vec![Message::binary(br#"{"id":1,"method":"status"}"#.to_vec())], 1003, "binary"),
        ("one frame over the limit", vec![Message::text(" ".repeat(over))], 1009, "SERVER_MAX_LINE_BYTES"),
        (
            "a fragmented message over the limit",
            vec![Message::Frame(Frame::message(text(half), OpCode::Data(Data::Text), false)), Message::Frame(Frame::message(text(half), OpCode::Data(Data::Continue), true))],
            1009,
            "SERVER_MAX_LINE_BYTES",
        ),
    ];
    for (name, frames, code, reason) in cases {
        let (got_code, got_reason) = close_after(addr, frames).await;
        assert_eq!(got_code, code, "{name}: {got_reason}");
        assert!(got_reason.contains(reason), "{name}: the reason is clear: {got_reason}");
        // The runtime keeps serving.
        let mut ws = connect(addr, ADMIN).await;
        assert_eq!(ws.call("status", Value::Null).await["result"]["state"], "idle", "{name}");
    }

    // A message of exactly the limit is read and answered.
    let mut ws = connect(addr, ADMIN).await;
    let mut at_limit = r#"{"jsonrpc":"2.0","id":"at-limit","method":"status"}"#.to_owned();
    at_limit.push_str(&" ".repeat(SERVER_MAX_LINE_BYTES - at_limit.len()));
    ws.send_text(at_limit).await;
    let r = ws.expect("the response at the limit", is_response).await;
    assert_eq!((r["id"].clone(), r["result"]["state"].clone()), (json!("at-limit"), json!("idle")), "{r}");
}

// ---------------------------------------------------------------------------------------------
// Shutdown, and the WebSocket-only listener
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_every_socket_with_1001_after_the_final_event() {
    let engine = script_engine(STEP);
    // `busy` reads nothing until the end, its queue full: a long patience, so the server does not
    // give up on it (1013) before the shutdown closes it, however slow the steps in between.
    let server = openagents_server::Server::builder(engine.clone())
        .credentials(credentials())
        .http(openagents_server::HttpOptions::default())
        .websocket(openagents_server::WsOptions { stuck_timeout: Duration::from_secs(60) });
    let addr = server.start().await.expect("the listener binds").addr();
    let ws_only = run_frontend_websocket(engine.clone(), "127.0.0.1:0", credentials()).await.expect("binds");
    // One frontend is behind: it has not read a whole turn's worth of events yet.
    let busy = try_connect_with(addr, request(addr, "/frontend/v2", Auth::Header(ALICE)), Some(4096)).await;
    let mut busy = busy.unwrap_or_else(|e| panic!("refused: {e:?}")).ws;
    let base = busy.subscribe(None).await;
    finished(submit(&engine, &format!("big:{}:16384", send_buffer_max() / 16384 + 16))).await.expect("the turn completes");
    let (mut admin, _) = subscribed(addr, ADMIN, None).await;
    let (mut watcher, _) = subscribed(ws_only.local_addr(), WATCHER, None).await;
    let mut blind = connect(addr, BLIND).await;
    blind.call("status", Value::Null).await;
    let turn = submit(&engine, "working wait");
    admin.expect("the turn to be running", |v| v["params"]["event"]["text"] == "working").await;

    assert!(engine.shutdown().await.shutting_down);
    assert_eq!(finished(turn).await.expect_err("interrupted")["code"], "interrupted");
    for (who, ws) in [("admin", &mut admin), ("watcher", &mut watcher), ("busy", &mut busy)] {
        let (code, reason) = ws.close_frame().await;
        assert_eq!(code, 1001, "{who}: {reason}");
        assert!(reason.contains("shutting down"), "{who}: {reason}");
        let events: Vec<Value> = ws.take_unread().into_iter().filter(|m| m["method"] == "frontend.v2.event").map(|m| m["params"].clone()).collect();
        assert_eq!(types(&events).last(), Some(&"shutting_down"), "{who}: the final event comes before the close: {:?}", &types(&events)[types(&events).len().saturating_sub(3)..]);
        assert!(types(&events).contains(&"turn_failed"), "{who}");
        if who == "busy" {
            assert_contiguous(&events, base + 1);
        }
    }
    let (code, _) = blind.close_frame().await;
    assert_eq!(code, 1001, "a socket that never subscribed is closed too");
}

/// Whether an upgrade on a fresh connection succeeds (false: closed on arrival, no HTTP answer).

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_websockets_count_against_the_connection_limit() {
    let engine = script_engine(STEP);
    let addr = http_runtime(&engine).await;
    use openagents_server::http::{MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER};
    let peer = |n: u8| std::net::Ipv4Addr::new(127, 0, 0, n);
    let mut open = Vec::new();
    // One peer holds at most MAX_CONNECTIONS_PER_PEER; others still get in.
    for _ in 0..MAX_CONNECTIONS_PER_PEER {
        open.push(connect_from(addr, peer(1), WATCHER).await.expect("within the per-peer cap"));
    }
    assert!(connect_from(addr, peer(1), WATCHER).await.is_none(), "one connection more than MAX_CONNECTIONS_PER_PEER from one peer is refused (503)");
    // Every peer together holds at most MAX_CONNECTIONS.
    let mut n = 2;
    while open.len() < MAX_CONNECTIONS {
        for _ in 0..MAX_CONNECTIONS_PER_PEER.min(MAX_CONNECTIONS - open.len()) {
            open.push(connect_from(addr, peer(n), WATCHER).await.expect("within both caps"));
        }
        n += 1;
    }
    assert!(connect_from(addr, peer(n), WATCHER).await.is_none(), "one connection more than MAX_CONNECTIONS is refused (503)");
    // Plain HTTP too: the connection is answered 503 (busy, retry later), then closed.
    let mut raw = tokio::net::TcpStream::connect(addr).await.expect("the kernel accepts");
    let _ = tokio::io::AsyncWriteExt::write_all(&mut raw, b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let mut answer = Vec::new();
    let _ = within("the refusal", tokio::io::AsyncReadExt::read_to_end(&mut raw, &mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 503 ") && answer.contains("retry-after: 1"), "a full listener answers busy: {answer}");
    // The open sockets are all still served.
    assert_eq!(open[0].call("status", Value::Null).await["result"]["state"], "idle");
    // Once one closes, its slot is free again (as soon as the server has seen the close).
    let mut leaving = open.pop().expect("a socket");
    leaving.send_message(Message::Close(None)).await.expect("the close is sent");
    assert!(matches!(leaving.recv().await, Incoming::Closed(_)), "the server acknowledges the close");
    let freed = within("the slot to be freed", async {
        loop {
            if let Some(ws) = connect_from(addr, peer(n), WATCHER).await {
                drop(ws);
                return true;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(freed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_websocket_listener_leaves_the_engine_running() {
    let engine = script_engine(STEP);
    let server = run_frontend_websocket(engine.clone(), "127.0.0.1:0", credentials()).await.expect("binds");
    let old = server.local_addr();
    let (mut attached, _) = subscribed(old, WATCHER, None).await;
    drop(server);

    // The engine still answers in process, and runs turns.
    let status = engine.handle(&Caller::stdio(), br#"{"id":1,"method":"status"}"#).await;
    let status: Value = serde_json::from_slice(&status.outcome.expect("status answers")).expect("JSON");
    assert_eq!(status["state"], "idle");
    assert_eq!(finished(submit(&engine, "still here")).await.expect("a turn completes")["result"], "done");
    // A socket accepted before the drop keeps its stream.
    let events = attached.events_until(&["turn_completed"]).await;
    assert_eq!(types(&events), ["turn_started", "text", "text", "turn_completed"]);

    // The old listener is gone: connections are refused (once the aborted accept loop is dropped).
    let refused = within("the old listener to close", async {
        loop {
            match tokio::net::TcpStream::connect(old).await {
                Err(e) => return e.kind(),
                Ok(_) => tokio::task::yield_now().await,
            }
        }
    })
    .await;
    assert_eq!(refused, std::io::ErrorKind::ConnectionRefused);

    // A new listener serves the same engine.
    let again = run_frontend_websocket(engine.clone(), "127.0.0.1:0", credentials()).await.expect("a new listener binds");
    let (mut ws, last) = subscribed(again.local_addr(), WATCHER, Some(0)).await;
    assert_eq!(last, engine.status().last_seq);
    let replay = ws.events_until(&["turn_completed"]).await;
    assert_eq!(replay, events, "the new listener replays the same events");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frontend_that_reconnects_while_an_approval_waits_is_asked_again_and_its_answer_decides() {
    let Asked { engine, addr, alice, turn, req } = asked(STEP).await;
    // Alice's connection drops before she answers: the request waits (it is not denied).
    drop(alice);
    within("alice's frontend to be detached", async {
        while engine.bridge().answerers() > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(!turn.is_finished(), "the approval still waits");
    // Back on a new connection (not even subscribed), she is sent the same request.
    let mut alice = connect(addr, ALICE).await;
    let again = alice.approval_request().await;
    assert_eq!((&again["id"], &again["params"]["request_id"], &again["params"]["prompt"]), (&req["id"], &req["params"]["request_id"], &req["params"]["prompt"]), "the same request, again: {again}");
    let (first, left) = (req["params"]["timeout_ms"].as_u64().expect("a timeout"), again["params"]["timeout_ms"].as_u64().expect("a timeout"));
    assert!(left < first, "asked again, it says the time left ({left} ms), not the whole ({first} ms)");
    alice.answer(&again["id"], json!({"approved": true})).await;
    let done = finished(turn).await.expect("the turn completes");
    assert_eq!(done["result"], "approved=true");
    let (mut watcher, _) = subscribed(addr, WATCHER, Some(0)).await;
    let events = watcher.events_until(&["turn_completed"]).await;
    assert_eq!(types(&events), ["turn_started", "approval_requested", "approval_resolved", "turn_completed"]);
    assert_eq!(events[2]["event"]["by"], "alice");
}
