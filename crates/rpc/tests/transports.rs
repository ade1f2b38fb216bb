//! The core's transports on loopback and in-memory pipes: stdio lines, `POST /rpc`, the
//! WebSocket; their bounds (frame size at the limit and one byte past it, calls in flight), bearer
//! authentication, `GET /health`, server notifications and graceful shutdown.

mod common;


use common::{TestHandler, code, http, listen, tokens};
use futures_util::{SinkExt, StreamExt};
use openagents_rpc::{ClientError, Limits, LineTransport, RpcServer, Shutdown, Transport, WsTransport, codes, serve_lines};
use serde_json::value::RawValue;
use tokio_tungstenite::tungstenite::Message;

fn params(v: serde_json::Value) -> Option<Box<RawValue>> {
    Some(RawValue::from_string(v.to_string()).expect("JSON"))
}

fn json(raw: &RawValue) -> serde_json::Value {
    serde_json::from_str(raw.get()).expect("JSON")
}

/// A line server on an in-memory pipe, its client, and the serving task.
fn stdio(server: RpcServer) -> (LineTransport, tokio::task::JoinHandle<std::io::Result<()>>) {
    let (client_end, server_end) = tokio::io::duplex(1 << 16);
    let (sr, sw) = tokio::io::split(server_end);
    let task = tokio::spawn(async move { serve_lines(&server, tokio::io::BufReader::new(sr), sw).await });
    let (cr, cw) = tokio::io::split(client_end);
    (LineTransport::new(cr, cw), task)
}

/// The bytes of [`echo_of_len`]'s request that are not its string.
const ECHO_OVERHEAD: usize = r#"{"jsonrpc":"2.0","id":1,"method":"echo","params":[""]}"#.len();

/// An `echo` request of exactly `len` bytes.
fn echo_of_len(len: usize) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":1,"method":"echo","params":["{}"]}}"#, "x".repeat(len - ECHO_OVERHEAD))
}

#[tokio::test]
async fn stdio_answers_calls_and_pushes_notifications() {
    let (client, _task) = stdio(RpcServer::new(TestHandler::new()));
    let mut notes = client.notifications();
    assert_eq!(json(&client.call("add", params(serde_json::json!({"a": 2, "b": 3}))).await.expect("add")), serde_json::json!(5));
    assert_eq!(json(&client.call("whoami", None).await.expect("whoami")), serde_json::json!("stdio"));
    assert_eq!(json(&client.call("notify_me", None).await.expect("notify_me")), serde_json::json!(true));
    let n = notes.recv().await.expect("a notification");
    assert_eq!((n.method.as_str(), n.params.as_deref().map(json)), ("hello", Some(serde_json::json!({"to": "stdio"}))));
    match client.call("fail", None).await {
        Err(ClientError::Rpc(e)) => assert_eq!((e.code, e.data), (-32050, Some(serde_json::json!({"why": "asked to"})))),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn stdio_takes_a_line_at_the_frame_limit_and_refuses_one_byte_past_it() {
    let limit = 256;
    let (client, server_end) = tokio::io::duplex(1 << 16);
    let server = RpcServer::new(TestHandler::new()).limits(Limits { max_frame_bytes: limit, ..Limits::default() });
    let (sr, sw) = tokio::io::split(server_end);
    tokio::spawn(async move { serve_lines(&server, tokio::io::BufReader::new(sr), sw).await });
    let (cr, mut cw) = tokio::io::split(client);
    let mut lines = tokio::io::BufReader::new(cr);
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    for (len, expected) in [(limit, None), (limit + 1, Some(codes::FRAME_TOO_LARGE)), (limit * 10, Some(codes::FRAME_TOO_LARGE)), (limit, None)] {
        cw.write_all(format!("{}\n", echo_of_len(len)).as_bytes()).await.expect("write");
        let mut reply = String::new();
        lines.read_line(&mut reply).await.expect("read");
        let v: serde_json::Value = serde_json::from_str(&reply).expect("JSON");
        match expected {
            None => assert_eq!(v["result"][0].as_str().map(str::len), Some(len - ECHO_OVERHEAD), "{len}: {reply}"),
            Some(c) => assert_eq!(code(&v), c, "{len}: {reply}"),
        }
    }
}

#[tokio::test]
async fn a_call_past_the_in_flight_limit_is_answered_busy_at_once() {
    let handler = TestHandler::new();
    let server = RpcServer::new(handler.clone()).limits(Limits { max_in_flight: 2, ..Limits::default() });
    let (client, _task) = stdio(server);
    let client = std::sync::Arc::new(client);
    let waits: Vec<_> = (0..2).map(|_| {
        let c = client.clone();
        tokio::spawn(async move { c.call("wait", None).await })
    }).collect();
    handler.started(2).await;
    match client.call("echo", None).await {
        Err(ClientError::Rpc(e)) => assert_eq!(e.code, codes::BUSY, "{e}"),
        other => panic!("{other:?}"),
    }
    handler.release(2);
    for w in waits {
        assert_eq!(json(&w.await.expect("task").expect("wait")), serde_json::json!("waited"));
    }
    // Room again.
    assert!(client.call("echo", None).await.is_ok());
}

#[tokio::test]
async fn stdio_shutdown_finishes_the_calls_in_flight() {
    let handler = TestHandler::new();
    let shutdown = Shutdown::new();
    let (client, task) = stdio(RpcServer::new(handler.clone()).shutdown_on(shutdown.clone()));
    let client = std::sync::Arc::new(client);
    let c = client.clone();
    let call = tokio::spawn(async move { c.call("wait", None).await });
    handler.started(1).await;
    shutdown.trigger();
    handler.release(1);
    assert_eq!(json(&call.await.expect("task").expect("the call in flight answers")), serde_json::json!("waited"));
    task.await.expect("task").expect("serve_lines ends cleanly");
}

#[tokio::test]
async fn http_serves_post_rpc_with_its_status_codes() {
    let limit = 512;
    let server = RpcServer::new(TestHandler::new()).limits(Limits { max_frame_bytes: limit, ..Limits::default() });
    let (addr, _task) = listen(server).await;
    let ct = [("content-type", "application/json")];
    let (status, headers, body) = http(addr, "POST", "/rpc", &ct, br#"{"jsonrpc":"2.0","id":7,"method":"add","params":{"a":1,"b":1}}"#).await;
    assert_eq!((status, String::from_utf8_lossy(&body).into_owned()), (200, r#"{"jsonrpc":"2.0","id":7,"result":2}"#.to_owned()));
    assert!(headers.iter().any(|(k, v)| k == "content-type" && v == "application/json"));
    // A notification, or a batch of them: 204, no body.
    let (status, _, body) = http(addr, "POST", "/rpc", &ct, br#"{"jsonrpc":"2.0","method":"echo"}"#).await;
    assert_eq!((status, body.len()), (204, 0));
    // What a message means is the core's: 200 with the JSON-RPC error.
    let (status, _, body) = http(addr, "POST", "/rpc", &ct, b"[]").await;
    assert_eq!((status, code(&serde_json::from_slice(&body).expect("JSON"))), (200, -32600));
    let (status, _, body) = http(addr, "POST", "/rpc", &ct, b"{oops").await;
    assert_eq!((status, code(&serde_json::from_slice(&body).expect("JSON"))), (200, -32700));
    // Not JSON by its content type: 415.
    let (status, _, body) = http(addr, "POST", "/rpc", &[("content-type", "text/plain")], b"{}").await;
    assert_eq!((status, code(&serde_json::from_slice(&body).expect("JSON"))), (415, -32600));
    // The body at the frame limit is read; one byte past it is 413.
    let at = echo_of_len(limit);
    let (status, _, _) = http(addr, "POST", "/rpc", &ct, at.as_bytes()).await;
    assert_eq!(status, 200);
    let past = echo_of_len(limit + 1);
    let (status, _, body) = http(addr, "POST", "/rpc", &ct, past.as_bytes()).await;
    assert_eq!((status, code(&serde_json::from_slice(&body).expect("JSON"))), (413, codes::FRAME_TOO_LARGE));
    // On HTTP a handler cannot push notifications.
    let (_, _, body) = http(addr, "POST", "/rpc", &ct, br#"{"jsonrpc":"2.0","id":1,"method":"notify_me"}"#).await;
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&body).expect("JSON")["result"], "unsupported");
    // Health needs no credential.
    let (status, _, body) = http(addr, "GET", "/health", &[], b"").await;
    assert_eq!((status, body), (200, br#"{"status":"ok"}"#.to_vec()));
}

#[tokio::test]
async fn bearer_tokens_go_through_the_authenticator() {
    let server = RpcServer::new(TestHandler::new()).authenticator(tokens);
    let (addr, _task) = listen(server).await;
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"whoami"}"#;
    for auth in [None, Some("Bearer wrong"), Some("Basic c2VjcmV0LXRva2Vu"), Some("Bearer ")] {
        let mut headers = vec![("content-type", "application/json")];
        if let Some(a) = auth {
            headers.push(("authorization", a));
        }
        let (status, h, body) = http(addr, "POST", "/rpc", &headers, body).await;
        assert_eq!(status, 401, "{auth:?}");
        assert!(h.iter().any(|(k, v)| k == "www-authenticate" && v == "Bearer"), "{auth:?}");
        assert_eq!(code(&serde_json::from_slice(&body).expect("JSON")), codes::UNAUTHORIZED);
    }
    let (status, _, body) = http(addr, "POST", "/rpc", &[("content-type", "application/json"), ("authorization", "bearer secret-token")], body).await;
    assert_eq!((status, serde_json::from_slice::<serde_json::Value>(&body).expect("JSON")["result"].clone()), (200, serde_json::json!("alice")));
    let (status, _, _) = http(addr, "GET", "/health", &[], b"").await;
    assert_eq!(status, 200);
    // The WebSocket upgrade too.
    let url = format!("ws://{addr}/rpc");
    match WsTransport::connect(&url, Some("wrong")).await {
        Err(ClientError::Transport(m)) => assert!(m.contains("401"), "{m}"),
        other => panic!("{:?}", other.err()),
    }
    let ws = WsTransport::connect(&url, Some("secret-token")).await.expect("connects");
    assert_eq!(json(&ws.call("whoami", None).await.expect("whoami")), serde_json::json!("alice"));
    // And the HTTP client transport.
    let h = openagents_rpc::HttpTransport::new(&format!("http://{addr}/rpc"), Some("secret-token")).expect("url");
    assert_eq!(json(&h.call("whoami", None).await.expect("whoami")), serde_json::json!("alice"));
    let h = openagents_rpc::HttpTransport::new(&format!("http://{addr}/rpc"), None).expect("url");
    match h.call("whoami", None).await {
        Err(ClientError::Rpc(e)) => assert_eq!(e.code, codes::UNAUTHORIZED),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_websocket_answers_pushes_notifications_and_bounds_its_messages() {
    let limit = 1024;
    let handler = TestHandler::new();
    let server = RpcServer::new(handler.clone()).limits(Limits { max_frame_bytes: limit, max_in_flight: 1, ..Limits::default() });
    let (addr, _task) = listen(server).await;
    let url = format!("ws://{addr}/rpc");
    let ws = std::sync::Arc::new(WsTransport::connect(&url, None).await.expect("connects"));
    let mut notes = ws.notifications();
    assert_eq!(json(&ws.call("add", params(serde_json::json!({"a": 20, "b": 22}))).await.expect("add")), serde_json::json!(42));
    assert_eq!(json(&ws.call("notify_me", None).await.expect("notify_me")), serde_json::json!(true));
    assert_eq!(notes.recv().await.expect("a notification").method, "hello");
    assert_eq!(json(&ws.call("whoami", None).await.expect("whoami")), serde_json::json!("anonymous"));
    // In flight: one at a time here.
    let w = ws.clone();
    let waiting = tokio::spawn(async move { w.call("wait", None).await });
    handler.started(1).await;
    match ws.call("echo", None).await {
        Err(ClientError::Rpc(e)) => assert_eq!(e.code, codes::BUSY),
        other => panic!("{other:?}"),
    }
    handler.release(1);
    assert!(waiting.await.expect("task").is_ok());
    // A message at the limit is served; one past it closes the socket with 1009.
    let (mut raw, _) = tokio_tungstenite::connect_async(url.as_str()).await.expect("connects");
    let at = echo_of_len(limit);
    raw.send(Message::text(at)).await.expect("send");
    let reply = raw.next().await.expect("a reply").expect("a message");
    assert!(reply.to_text().expect("text").contains("\"result\""), "{reply:?}");
    let past = echo_of_len(limit + 1);
    raw.send(Message::text(past)).await.expect("send");
    match raw.next().await {
        Some(Ok(Message::Close(Some(f)))) => assert_eq!(u16::from(f.code), 1009),
        other => panic!("expected a close 1009: {other:?}"),
    }
}

#[tokio::test]
async fn http_shutdown_stops_accepting_and_finishes_calls_in_flight() {
    let handler = TestHandler::new();
    let server = RpcServer::new(handler.clone());
    let shutdown = server.shutdown().clone();
    let (addr, task) = listen(server).await;
    let ws = WsTransport::connect(&format!("ws://{addr}/rpc"), None).await.expect("connects");
    let over_http = tokio::spawn(async move { http(addr, "POST", "/rpc", &[("content-type", "application/json")], br#"{"jsonrpc":"2.0","id":1,"method":"wait"}"#).await });
    let ws = std::sync::Arc::new(ws);
    let w = ws.clone();
    let over_ws = tokio::spawn(async move { w.call("wait", None).await });
    handler.started(2).await;
    shutdown.trigger();
    // Health says so, on the router (the listener may already be closed).
    let router = RpcServer::new(TestHandler::new()).shutdown_on(shutdown.clone()).router();
    let req = axum::http::Request::get("/health").body(axum::body::Body::empty()).expect("request");
    let resp = tower::ServiceExt::oneshot(router, req).await.expect("answer");
    assert_eq!(resp.status(), 503);
    handler.release(2);
    let (status, _, body) = over_http.await.expect("task");
    assert_eq!((status, serde_json::from_slice::<serde_json::Value>(&body).expect("JSON")["result"].clone()), (200, serde_json::json!("waited")));
    assert_eq!(json(&over_ws.await.expect("task").expect("the WebSocket call answers")), serde_json::json!("waited"));
    task.await.expect("task").expect("serve_http ends cleanly");
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "no longer accepting");
}

#[tokio::test]
async fn bytes_that_are_not_utf8_get_a_parse_error_on_every_transport() {
    let bad: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":[\"\xff\xfe\"]}";
    // stdio: the line is answered, the connection goes on.
    let (client_end, server_end) = tokio::io::duplex(1 << 16);
    let server = RpcServer::new(TestHandler::new());
    let (sr, sw) = tokio::io::split(server_end);
    tokio::spawn(async move { serve_lines(&server, tokio::io::BufReader::new(sr), sw).await });
    let (cr, mut cw) = tokio::io::split(client_end);
    let mut lines = tokio::io::BufReader::new(cr);
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    for line in [bad, br#"{"jsonrpc":"2.0","id":2,"method":"echo"}"#] {
        cw.write_all(line).await.expect("write");
        cw.write_all(b"\n").await.expect("write");
    }
    let mut first = String::new();
    lines.read_line(&mut first).await.expect("read");
    assert_eq!(code(&serde_json::from_str(&first).expect("JSON")), codes::PARSE_ERROR, "{first}");
    let mut second = String::new();
    lines.read_line(&mut second).await.expect("read");
    assert!(second.contains(r#""id":2,"result":null"#), "{second}");
    // HTTP: 200 with the error.
    let (addr, _task) = listen(RpcServer::new(TestHandler::new())).await;
    let (status, _, body) = http(addr, "POST", "/rpc", &[("content-type", "application/json")], bad).await;
    assert_eq!((status, code(&serde_json::from_slice(&body).expect("JSON"))), (200, codes::PARSE_ERROR));
    // The WebSocket: a binary frame holding them is answered, and the socket stays open.
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/rpc")).await.expect("connects");
    ws.send(Message::binary(bad.to_vec())).await.expect("send");
    let reply = ws.next().await.expect("a reply").expect("a message");
    assert_eq!(code(&serde_json::from_str(reply.to_text().expect("text")).expect("JSON")), codes::PARSE_ERROR);
    ws.send(Message::text(r#"{"jsonrpc":"2.0","id":3,"method":"echo"}"#)).await.expect("send");
    let reply = ws.next().await.expect("a reply").expect("a message");
    assert!(reply.to_text().expect("text").contains(r#""id":3,"result":null"#), "{reply:?}");
}

#[tokio::test]
async fn a_websocket_text_message_that_is_not_utf8_is_closed_with_1007() {
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    let (addr, _task) = listen(RpcServer::new(TestHandler::new())).await;
    let (mut raw, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/rpc")).await.expect("connects");
    let bad: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":[\"\xff\"]}";
    raw.send(Message::Frame(Frame::message(bad.to_vec(), OpCode::Data(Data::Text), true))).await.expect("send");
    match raw.next().await {
        Some(Ok(Message::Close(Some(f)))) => assert_eq!(u16::from(f.code), 1007, "{f:?}"),
        other => panic!("expected a close 1007: {other:?}"),
    }
}
