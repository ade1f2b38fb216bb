//! `rpc.discover` on every transport: the runtime answers with the OpenRPC document generated
//! from the schema (the same bytes as `OPENRPC_DOCUMENT`), over stdio (tokio duplex pipes into
//! `run_stdio`) and over HTTP (`run_http`, driven by a small hyper client); observers may call
//! it; and `status` carries the schema digest and protocol version.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use openagents_protocol::{OPENRPC_DOCUMENT, PROTOCOL_VERSION, SCHEMA_DIGEST, Turn};
use openagents_server::{FnAgent, Grant, RpcEngine, RuntimeHttpCredential, TurnContext, run_http, run_http_authorized, run_stdio};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The longest one step (a response, a connection) may take.
const STEP: Duration = Duration::from_secs(10);

fn engine() -> RpcEngine {
    RpcEngine::new(FnAgent(|turn: Turn, _ctx: TurnContext| async move { Ok(turn.task) }))
}

fn openrpc() -> Value {
    serde_json::from_str(OPENRPC_DOCUMENT).expect("the embedded document is JSON")
}

/// What every transport must answer: the whole document, describing itself.
fn check_document(result: &Value) {
    assert_eq!(result, &openrpc(), "rpc.discover returns OPENRPC_DOCUMENT");
    assert_eq!(result["openrpc"], "1.3.2");
    assert_eq!(result["info"]["version"], PROTOCOL_VERSION);
    assert_eq!(result["info"]["x-schema-digest"], SCHEMA_DIGEST);
    let names: Vec<&str> = result["methods"].as_array().expect("methods").iter().filter_map(|m| m["name"].as_str()).collect();
    for m in ["submit", "interrupt", "status", "shutdown", "release", "rpc.discover"] {
        assert!(names.contains(&m), "{m} is described: {names:?}");
    }
    assert!(result["x-events"]["kinds"].as_array().is_some_and(|k| !k.is_empty()), "events are described");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_discover_over_stdio() {
    let engine = engine();
    let (client_in, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, client_out) = tokio::io::duplex(1 << 16);
    let server = tokio::spawn(run_stdio(engine.clone(), server_in, server_out));
    let mut writer = client_in;
    let mut lines = BufReader::new(client_out).lines();
    let mut call = async |request: &str, id: Value| -> Value {
        writer.write_all(format!("{request}\n").as_bytes()).await.expect("the runtime reads");
        loop {
            let line = tokio::time::timeout(STEP, lines.next_line()).await.expect("a response in time").expect("readable").expect("a line");
            let v: Value = serde_json::from_str(&line).expect("every output line is JSON");
            if v.get("event").is_none() && v["id"] == id {
                return v;
            }
        }
    };
    let r = call(r#"{"jsonrpc":"2.0","id":1,"method":"rpc.discover"}"#, json!(1)).await;
    assert_eq!(r["jsonrpc"], "2.0");
    check_document(&r["result"]);
    let r = call(r#"{"id":"p","method":"rpc.discover","params":{}}"#, json!("p")).await;
    check_document(&r["result"]);
    // rpc.discover takes no params, like every method without them.
    let r = call(r#"{"id":2,"method":"rpc.discover","params":{"x":1}}"#, json!(2)).await;
    assert_eq!(r["error"]["data"]["code"], "invalid_params", "{r}");
    let st = call(r#"{"id":3,"method":"status"}"#, json!(3)).await;
    assert_eq!(st["result"]["schema_digest"], SCHEMA_DIGEST);
    assert_eq!(st["result"]["protocol_version"], PROTOCOL_VERSION);
    let _ = call(r#"{"id":4,"method":"shutdown"}"#, json!(4)).await;
    drop(writer);
    tokio::time::timeout(STEP, server).await.expect("stdio ends after shutdown").expect("joins").expect("no I/O error");
}

/// One HTTP/1.1 request on a fresh connection: status and JSON body.
async fn post(addr: std::net::SocketAddr, token: &str, body: &str) -> (u16, Value) {
    let stream = tokio::time::timeout(STEP, TcpStream::connect(addr)).await.expect("connects in time").expect("connects");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(conn);
    let request = Request::post("/rpc")
        .header("host", addr.to_string())
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_owned())))
        .expect("a request");
    let response = tokio::time::timeout(STEP, sender.send_request(request)).await.expect("answers in time").expect("answers");
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.expect("a body").to_bytes();
    (status, serde_json::from_slice(&bytes).expect("a JSON body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_discover_over_http() {
    let engine = engine();
    let addr = run_http(engine.clone(), "127.0.0.1:0", "admin-token").await.expect("binds loopback");
    let (status, r) = post(addr, "admin-token", r#"{"jsonrpc":"2.0","id":1,"method":"rpc.discover"}"#).await;
    assert_eq!(status, 200);
    check_document(&r["result"]);
    let (_, st) = post(addr, "admin-token", r#"{"id":2,"method":"status"}"#).await;
    assert_eq!(st["result"]["schema_digest"], SCHEMA_DIGEST);
    let (status, r) = post(addr, "wrong-token", r#"{"id":3,"method":"rpc.discover"}"#).await;
    assert_eq!((status, r["error"]["data"]["code"].as_str()), (401, Some("unauthorized")));
    let _ = post(addr, "admin-token", r#"{"id":4,"method":"shutdown"}"#).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_may_discover() {
    assert!(Grant::observer().allows("rpc.discover"));
    let engine = engine();
    let creds = vec![
        RuntimeHttpCredential::new("watcher", "observer-token", Grant::observer()),
        RuntimeHttpCredential::new("only-submit", "narrow-token", Grant { methods: ["submit".to_owned()].into(), ..Grant::observer() }),
        RuntimeHttpCredential::new("admin", "admin-token", Grant::admin()),
    ];
    let addr = run_http_authorized(engine.clone(), "127.0.0.1:0", creds).await.expect("binds loopback");
    let (status, r) = post(addr, "observer-token", r#"{"id":1,"method":"rpc.discover"}"#).await;
    assert_eq!(status, 200);
    check_document(&r["result"]);
    // An exact grant without it is refused, like any method outside a grant.
    let (status, r) = post(addr, "narrow-token", r#"{"id":2,"method":"rpc.discover"}"#).await;
    assert_eq!((status, r["error"]["data"]["code"].as_str()), (200, Some("forbidden")));
    let _ = post(addr, "admin-token", r#"{"id":3,"method":"shutdown"}"#).await;
}

/// The status line and headers of one request on a fresh connection.
async fn head(addr: std::net::SocketAddr, request: Request<Full<Bytes>>) -> hyper::Response<hyper::body::Incoming> {
    let stream = tokio::time::timeout(STEP, TcpStream::connect(addr)).await.expect("connects in time").expect("connects");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(conn.with_upgrades());
    tokio::time::timeout(STEP, sender.send_request(request)).await.expect("answers in time").expect("answers")
}

fn assert_stamped(what: &str, headers: &hyper::HeaderMap) {
    assert_eq!(headers.get(openagents_server::PROTOCOL_VERSION_HEADER).and_then(|v| v.to_str().ok()), Some(PROTOCOL_VERSION), "{what}: {headers:?}");
    assert_eq!(headers.get(openagents_server::SCHEMA_DIGEST_HEADER).and_then(|v| v.to_str().ok()), Some(SCHEMA_DIGEST), "{what}: {headers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_http_response_and_the_websocket_handshake_carry_the_digest() {
    let engine = engine();
    let addr = run_http(engine.clone(), "127.0.0.1:0", "admin-token").await.expect("binds loopback");
    let rpc = |token: &str| {
        Request::post("/rpc")
            .header("host", addr.to_string())
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from_static(br#"{"id":1,"method":"status"}"#)))
            .expect("a request")
    };
    let ok = head(addr, rpc("admin-token")).await;
    assert_eq!(ok.status(), 200);
    assert_stamped("a result", ok.headers());
    let refused = head(addr, rpc("wrong-token")).await;
    assert_eq!(refused.status(), 401);
    assert_stamped("a refusal", refused.headers());
    let upgrade = Request::get("/frontend/v2")
        .header("host", addr.to_string())
        .header("authorization", "Bearer admin-token")
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .header("sec-websocket-protocol", "openagents.v2")
        .body(Full::new(Bytes::new()))
        .expect("a request");
    let switched = head(addr, upgrade).await;
    assert_eq!(switched.status(), 101);
    assert_stamped("the WebSocket handshake", switched.headers());
    let _ = post(addr, "admin-token", r#"{"id":4,"method":"shutdown"}"#).await;
}
