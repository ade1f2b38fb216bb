//! Security round 2, approvals: a frontend's answer is decoded exactly (a key given twice is
//! never resolved by its last copy), and while a controller holds the lease only it, or an
//! admin, may answer the approval requests of its turn. Real tokio-tungstenite clients against
//! `run_http_authorized` on 127.0.0.1:0 with the scripted in-process agent.

mod ws_common;

use std::net::SocketAddr;

use openagents_protocol::{ApprovalReply, ErrorCode};
use openagents_server::{Caller, Grant};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use ws_common::*;

/// Submits `task` over `POST /rpc` as the credential of `token` (so it takes the lease).
fn submit_as(addr: SocketAddr, token: &'static str, task: &str) -> JoinHandle<(u16, Value)> {
    let body = json!({"jsonrpc": "2.0", "id": "s1", "method": "submit", "params": {"task": task}});
    tokio::spawn(async move { rpc(addr, token, &body).await })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_approved_key_is_a_denial_never_the_last_copy() {
    // (the answer's result as sent, raw)
    let cases = [r#"{"approved":false,"approved":true}"#, r#"{"approved":true,"approved":true}"#, r#"{"approved":true,"answer":"a","answer":"b"}"#];
    for result in cases {
        let Asked { engine: _engine, addr: _, mut alice, turn, req } = asked(STEP).await;
        let id = req["id"].as_str().expect("a string id").to_owned();
        alice.send_text(format!(r#"{{"jsonrpc":"2.0","id":"{id}","result":{result}}}"#)).await;
        let done = finished(turn).await.expect("the turn completes");
        assert_eq!(done["result"], "approved=false", "{result}: an answer with a key given twice is a denial");
        let events = alice.events_until(&["turn_completed"]).await;
        assert_eq!(only(&events, "approval_resolved")["approved"], false, "{result}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_with_a_key_given_twice_outside_its_result_is_a_denial() {
    // A member the result does not have: the whole answer is read exactly, not just `result`.
    let Asked { engine: _engine, addr: _, mut alice, turn, req } = asked(STEP).await;
    let id = req["id"].as_str().expect("a string id").to_owned();
    alice.send_text(format!(r#"{{"jsonrpc":"2.0","id":"{id}","result":{{"approved":true}},"extra":{{"a":1,"a":1}}}}"#)).await;
    let done = finished(turn).await.expect("the turn completes");
    assert_eq!(done["result"], "approved=false", "an answer with a key given twice is a denial");
    let events = alice.events_until(&["turn_completed"]).await;
    assert_eq!(only(&events, "approval_resolved")["approved"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_with_its_id_given_twice_answers_nothing_and_names_neither_copy() {
    let Asked { engine: _engine, addr: _, mut alice, turn, req } = asked(STEP).await;
    let id = req["id"].as_str().expect("a string id").to_owned();
    // "Last one wins" would read this as an approval of the real request.
    alice.send_text(format!(r#"{{"jsonrpc":"2.0","id":"decoy-id","id":"{id}","result":{{"approved":true}}}}"#)).await;
    let refused = alice.expect("the refusal", |v| is_response(v) && v.get("error").is_some()).await;
    assert_eq!(refused["id"], Value::Null, "neither copy of the id is echoed: {refused}");
    assert_eq!(error_code(&refused), "invalid_request", "{refused}");
    let text = refused.to_string();
    assert!(!text.contains("decoy-id") && !text.contains(&id), "the error names neither copy: {text}");
    // The request is still open: the real answer settles it.
    alice.answer(&req["id"], json!({"approved": false})).await;
    let done = finished(turn).await.expect("the turn completes");
    assert_eq!(done["result"], "approved=false");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_a_controller_holds_the_lease_only_it_answers_approvals() {
    let (engine, addr, mut alice, mut bob) = alice_and_bob(STEP).await;
    let turn = submit_as(addr, ALICE, "ask:deploy_now");
    let req = alice.approval_request().await;
    // Bob is not asked, but sees the request as an event and answers it anyway.
    let requested = bob.expect("approval_requested", |v| v["params"]["event"]["type"] == "approval_requested").await;
    assert_eq!(requested["params"]["event"]["request_id"], req["id"]);
    bob.answer(&req["id"], json!({"approved": true})).await;
    let refused = bob.expect("bob's answer to be refused", |v| is_response(v) && v["id"] == req["id"]).await;
    assert_eq!(error_code(&refused), "forbidden", "{refused}");
    assert!(refused["error"]["data"]["message"].as_str().unwrap_or_default().contains("`alice` holds the lease"), "{refused}");
    // The holder's own answer decides.
    alice.answer(&req["id"], json!({"approved": false})).await;
    let (status, done) = within("alice's submit", turn).await.expect("the submit task");
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"]["result"], "approved=false", "bob's approval must not count: {done}");
    let events = alice.events_until(&["turn_completed"]).await;
    assert_eq!(only(&events, "approval_resolved")["by"], "alice");
    assert!(!bob.unread().iter().any(|m| m["method"] == "frontend.v2.approval"), "bob is never asked while alice holds the lease: {:?}", bob.unread());

    // Without a lease (the trusted parent's turn, after alice releases), bob answers again.
    let (status, released) = rpc(addr, ALICE, &json!({"jsonrpc": "2.0", "id": 2, "method": "release"})).await;
    assert_eq!((status, &released["result"]["released"]), (200, &json!(true)), "{released}");
    let turn = submit(&engine, "ask:again");
    let req = bob.approval_request().await;
    bob.answer(&req["id"], json!({"approved": true})).await;
    let done = finished(turn).await.expect("the turn completes");
    assert_eq!(done["result"], "approved=true");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_answers_approvals_whoever_holds_the_lease() {
    // Attached through the bridge as a transport does it (`attach_caller`), while alice holds
    // the lease from a submit over `POST /rpc`.
    let (engine, addr) = scripted_http(STEP).await;
    let attach = |name: &str, grant: Grant| {
        let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
        let conn = engine.bridge().attach_caller(&Caller { name: name.into(), grant, trusted: false }, tx);
        (conn, rx)
    };
    let (admin, mut to_admin) = attach("admin", Grant::admin());
    let (carol, mut to_carol) = attach("carol", Grant::controller());
    let turn = submit_as(addr, ALICE, "ask:deploy_now");
    let request: Value = serde_json::from_slice(&within("the admin's approval request", to_admin.recv()).await.expect("a message")).expect("JSON");
    assert_eq!(request["method"], "frontend.v2.approval", "{request}");
    let id = request["id"].as_str().expect("a string id");
    assert!(to_carol.try_recv().is_err(), "a controller that does not hold the lease is not asked");
    let refused = engine.bridge().answer(carol, id, ApprovalReply { approved: true, answer: None }).expect_err("carol may not answer");
    assert_eq!(refused.code, ErrorCode::Forbidden, "{refused:?}");
    assert_eq!(engine.bridge().answer(admin, id, ApprovalReply { approved: true, answer: None }).map_err(|e| e.message), Ok(true), "the admin's answer wins");
    let (status, done) = within("alice's submit", turn).await.expect("the submit task");
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"]["result"], "approved=true", "{done}");
}
