//! Server-to-caller requests (`Peer::request`): on a line connection and a WebSocket the server
//! asks its caller and waits for the answer, which the connection takes before any bound on calls
//! in flight; an error answer, a closed connection, a stray answer and the bound on waiting
//! requests each end the way they should.

mod common;

use std::time::Duration;

use common::Lines;
use futures_util::{SinkExt, StreamExt};
use openagents_rpc::{BoxFuture, Context, Handler, Limits, LineTransport, MAX_PEER_REQUESTS, PeerError, RpcError, RpcServer, Transport, WsTransport, serve_lines};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio_tungstenite::tungstenite::Message;

/// `ask`: asks the caller `confirm` with the call's params and answers what the caller said
/// (`{"answered": result}`, or `{"refused": code}` for an error answer, or `{"failed": why}`).
/// `flood`: sends `MAX_PEER_REQUESTS + 1` requests at once and answers how many were refused busy.
struct Asker;

fn raw(v: &Value) -> Box<RawValue> {
    RawValue::from_string(v.to_string()).expect("JSON")
}

impl Handler for Asker {
    fn call<'a>(&'a self, cx: &'a Context, method: &'a str, params: Option<&'a RawValue>) -> BoxFuture<'a, Result<Box<RawValue>, RpcError>> {
        Box::pin(async move {
            match method {
                "ask" => {
                    let q: Value = params.map_or(Value::Null, |p| serde_json::from_str(p.get()).expect("JSON"));
                    Ok(raw(&match cx.peer().request("confirm", &q).await {
                        Ok(answer) => json!({"answered": serde_json::from_str::<Value>(answer.get()).expect("JSON")}),
                        Err(PeerError::Answered(e)) => json!({"refused": e.code, "message": e.message}),
                        Err(e) => json!({"failed": e.to_string()}),
                    }))
                }
                // The same through the peer as a transport, as a generated client over it calls.
                "ask_as_client" => Ok(raw(&match Transport::call(cx.peer(), "confirm", params.map(ToOwned::to_owned)).await {
                    Ok(answer) => json!({"answered": serde_json::from_str::<Value>(answer.get()).expect("JSON")}),
                    Err(openagents_rpc::ClientError::Rpc(e)) => json!({"refused": e.code}),
                    Err(e) => json!({"failed": e.to_string()}),
                })),
                "flood" => {
                    let asks = (0..=MAX_PEER_REQUESTS).map(|i| async move { tokio::time::timeout(Duration::from_millis(500), cx.peer().request("confirm", &i)).await });
                    let outcomes = futures_util::future::join_all(asks).await;
                    let busy = outcomes.iter().filter(|o| matches!(o, Ok(Err(PeerError::Busy)))).count();
                    Ok(raw(&json!({"busy": busy})))
                }
                other => Err(RpcError::method_not_found(other)),
            }
        })
    }
}

#[tokio::test]
async fn the_server_asks_its_caller_and_gets_the_answer_on_a_line_connection() {
    let mut c = Lines::open(RpcServer::new(Asker));
    c.send(&json!({"jsonrpc": "2.0", "id": "a", "method": "ask", "params": {"q": "deploy?"}})).await;
    let ask = c.next().await;
    assert_eq!((&ask["jsonrpc"], &ask["method"], &ask["params"]), (&json!("2.0"), &json!("confirm"), &json!({"q": "deploy?"})), "{ask}");
    assert!(ask["id"].is_u64(), "the server's own id: {ask}");
    c.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"ok": true}})).await;
    assert_eq!(c.next().await, json!({"jsonrpc": "2.0", "id": "a", "result": {"answered": {"ok": true}}}));

    // An error answer reaches the handler as the caller's error.
    c.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "ask", "params": {}})).await;
    let ask = c.next().await;
    c.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -32099, "message": "the user said no"}})).await;
    assert_eq!(c.next().await, json!({"jsonrpc": "2.0", "id": 7, "result": {"refused": -32099, "message": "the user said no"}}));

    // A stray answer (no request waits under its id) gets nothing back; a request carrying a
    // `result` member is still not a request.
    c.send(&json!({"jsonrpc": "2.0", "id": 999, "result": true})).await;
    c.send(&json!({"jsonrpc": "2.0", "id": 8, "method": "ask", "result": 1})).await;
    let refused = c.next().await;
    assert_eq!((refused["id"].clone(), refused["error"]["code"].clone()), (json!(8), json!(-32600)), "{refused}");
    c.write.shutdown().await.expect("close the input");
    c.task.await.expect("the server task").expect("served");
}

#[tokio::test]
async fn an_answer_is_taken_even_when_the_connection_has_its_most_calls_in_flight() {
    let limits = Limits { max_in_flight: 1, ..Limits::default() };
    let mut c = Lines::open(RpcServer::new(Asker).limits(limits));
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "ask", "params": [1]})).await;
    let ask = c.next().await;
    // The one permit is held by `ask`, which waits for this answer.
    c.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": "yes"})).await;
    assert_eq!(c.next().await, json!({"jsonrpc": "2.0", "id": 1, "result": {"answered": "yes"}}));
}

#[tokio::test]
async fn a_request_waiting_when_the_connection_closes_ends_closed_and_the_server_returns() {
    let mut c = Lines::open(RpcServer::new(Asker));
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "ask", "params": [1]})).await;
    let _ask = c.next().await;
    c.write.shutdown().await.expect("close the input");
    // The call ends (its answer says why) and the server returns instead of waiting forever.
    assert_eq!(c.next().await, json!({"jsonrpc": "2.0", "id": 1, "result": {"failed": "the caller's connection is closed"}}));
    tokio::time::timeout(Duration::from_secs(10), c.task).await.expect("the server returns").expect("task").expect("served");
}

#[tokio::test]
async fn at_most_max_peer_requests_wait_at_once() {
    let mut c = Lines::open(RpcServer::new(Asker));
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "flood"})).await;
    // Read the requests the server sent (never answered: each times out), then the answer.
    loop {
        let m = c.next().await;
        if m["id"] == json!(1) && m.get("result").is_some() {
            assert_eq!(m["result"], json!({"busy": 1}), "one past the bound is refused at once: {m}");
            break;
        }
        assert_eq!(m["method"], json!("confirm"), "{m}");
    }
}

#[tokio::test]
async fn the_server_asks_over_a_websocket_too() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = RpcServer::new(Asker);
    tokio::spawn(async move { server.serve_http(listener).await });
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/rpc")).await.expect("the WebSocket opens");
    ws.send(Message::text(json!({"jsonrpc": "2.0", "id": 1, "method": "ask", "params": ["over ws"]}).to_string())).await.expect("send");
    let next = |m: Option<Result<Message, _>>| -> Value {
        match m {
            Some(Ok(Message::Text(t))) => serde_json::from_str(t.as_str()).expect("JSON"),
            other => panic!("{other:?}"),
        }
    };
    let ask = next(ws.next().await);
    assert_eq!((&ask["method"], &ask["params"]), (&json!("confirm"), &json!(["over ws"])), "{ask}");
    ws.send(Message::text(json!({"jsonrpc": "2.0", "id": ask["id"], "result": 42}).to_string())).await.expect("send");
    assert_eq!(next(ws.next().await), json!({"jsonrpc": "2.0", "id": 1, "result": {"answered": 42}}));
}

fn params(v: &Value) -> Option<Box<RawValue>> {
    Some(raw(v))
}

/// A line client of a fresh `Asker` server over an in-memory pipe, and the serving task.
fn line_client() -> (LineTransport, tokio::task::JoinHandle<std::io::Result<()>>) {
    let (client_end, server_end) = tokio::io::duplex(1 << 16);
    let (sr, sw) = tokio::io::split(server_end);
    let server = RpcServer::new(Asker);
    let task = tokio::spawn(async move { serve_lines(&server, BufReader::new(sr), sw).await });
    let (cr, cw) = tokio::io::split(client_end);
    (LineTransport::new(cr, cw), task)
}

/// `transport`'s answer to `method` with `p`, as JSON.
async fn ask(transport: &impl Transport, method: &str, p: Value) -> Value {
    serde_json::from_str(transport.call(method, params(&p)).await.expect("an answer").get()).expect("JSON")
}

/// Answers every `confirm` the server sends: the params back with `"ok": true`, or a refusal for
/// params `["no"]`.
fn answer_requests(mut requests: tokio::sync::mpsc::Receiver<openagents_rpc::ServerRequest>) {
    tokio::spawn(async move {
        while let Some(r) = requests.recv().await {
            assert_eq!(r.method, "confirm");
            let p: Value = serde_json::from_str(r.params.as_deref().map_or("null", RawValue::get)).expect("JSON");
            if p == json!(["no"]) {
                r.refuse(&RpcError::new(-32099, "not this one")).await.expect("refused");
            } else {
                r.answer(&raw(&json!({"ok": true, "asked": p}))).await.expect("answered");
            }
        }
    });
}

#[tokio::test]
async fn the_client_transports_answer_the_servers_requests() {
    // Lines.
    let (lines, task) = line_client();
    answer_requests(lines.requests());
    assert_eq!(ask(&lines, "ask", json!(["deploy?"])).await, json!({"answered": {"ok": true, "asked": ["deploy?"]}}));
    assert_eq!(ask(&lines, "ask", json!(["no"])).await, json!({"refused": -32099, "message": "not this one"}));
    assert_eq!(ask(&lines, "ask_as_client", json!({"k": 1})).await, json!({"answered": {"ok": true, "asked": {"k": 1}}}), "the peer as a Transport");
    assert_eq!(ask(&lines, "ask_as_client", json!(["no"])).await, json!({"refused": -32099}));
    // Closing the client still ends the server (the reader holds no sender of its own).
    lines.close().await.expect("closed");
    tokio::time::timeout(Duration::from_secs(10), task).await.expect("the server returns").expect("task").expect("served");

    // A client that does not take requests refuses them: the server is not left waiting.
    let (deaf, _task) = line_client();
    let got = ask(&deaf, "ask", json!([1])).await;
    assert_eq!(got["refused"], json!(-32601), "{got}");

    // WebSocket.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = RpcServer::new(Asker);
    tokio::spawn(async move { server.serve_http(listener).await });
    let ws = WsTransport::connect(&format!("ws://{addr}/rpc"), None).await.expect("connected");
    answer_requests(ws.requests());
    assert_eq!(ask(&ws, "ask", json!(["over ws"])).await, json!({"answered": {"ok": true, "asked": ["over ws"]}}));

    // A request dropped unanswered is refused, not left waiting.
    let (careless, _task) = line_client();
    let mut requests = careless.requests();
    tokio::spawn(async move {
        while let Some(r) = requests.recv().await {
            drop(r);
        }
    });
    let got = ask(&careless, "ask", json!([2])).await;
    assert_eq!(got["refused"], json!(-32603), "{got}");
}
