//! `GET /events` over loopback: an `EventLog` served as server-sent events behind the
//! authenticator, resumed with `Last-Event-ID`, a lost resume point answered with a `gap`, a bad
//! one refused with 400, and every stream ended at the shutdown signal.

mod common;

use std::time::Duration;

use common::{TestHandler, listen, tokens};
use openagents_rpc::RpcServer;
use openagents_rpc::events::EventLog;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Opens `GET /events` with `headers` and reads until `until` is in what arrived (or the stream
/// ends): the status line's code and everything read.
async fn open_events(addr: std::net::SocketAddr, headers: &[(&str, &str)], until: &str) -> (u16, String, tokio::net::TcpStream) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connects");
    let mut req = format!("GET /events HTTP/1.1\r\nhost: {addr}\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.expect("writes");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !String::from_utf8_lossy(&got).contains(until) {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Ok(Ok(0)) | Err(_) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Ok(Err(e)) => panic!("read: {e}"),
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text, s)
}

#[tokio::test]
async fn events_are_served_in_order_resumed_after_last_event_id_and_behind_the_token() {
    let log = EventLog::new(4);
    let server = RpcServer::new(TestHandler::new()).authenticator(tokens).events(log.clone());
    let shutdown = server.shutdown().clone();
    let (addr, task) = listen(server).await;
    for i in 1..=3 {
        log.publish("tick", &serde_json::json!({ "n": i }));
    }

    let (status, text, _) = open_events(addr, &[], "\r\n\r\n").await;
    assert_eq!(status, 401, "no token: {text}");

    // Resumed after 1: events 2 and 3, in order, each with its id.
    let (status, text, mut live) = open_events(addr, &[("authorization", "Bearer secret-token"), ("last-event-id", "1")], "data: {\"n\":3}").await;
    assert_eq!(status, 200, "{text}");
    assert!(text.to_ascii_lowercase().contains("content-type: text/event-stream"), "{text}");
    let (two, three) = (text.find("id: 2\nevent: tick\ndata: {\"n\":2}\n\n").expect("event 2"), text.find("id: 3\nevent: tick\ndata: {\"n\":3}\n\n").expect("event 3"));
    assert!(two < three && !text.contains("id: 1\n"), "{text}");

    // A new event reaches the open stream.
    log.publish("tick", &serde_json::json!({ "n": 4 }));
    let mut buf = [0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(5), live.read(&mut buf)).await.expect("in time").expect("reads");
    assert!(String::from_utf8_lossy(&buf[..n]).contains("id: 4\nevent: tick\ndata: {\"n\":4}"), "{}", String::from_utf8_lossy(&buf[..n]));

    // Past the buffer of 4, resuming after 1 is a gap, then the oldest held.
    for i in 5..=6 {
        log.publish("tick", &serde_json::json!({ "n": i }));
    }
    let (_, text, _) = open_events(addr, &[("authorization", "Bearer secret-token"), ("last-event-id", "1")], "data: {\"n\":6}").await;
    let gap = text.find("event: gap\ndata: {\"after\":1,\"oldest\":3}").expect("a gap");
    assert!(gap < text.find("id: 3\n").expect("the oldest held") && !text.contains("id: 2\n"), "{text}");

    let (status, text, _) = open_events(addr, &[("authorization", "Bearer secret-token"), ("last-event-id", "soon")], "\r\n\r\n").await;
    assert_eq!(status, 400, "{text}");

    // The shutdown signal ends the open stream, and serving ends with it.
    shutdown.trigger();
    let mut rest = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(5), live.read_to_end(&mut rest)).await;
    assert!(ended.is_ok(), "the stream ends at shutdown");
    tokio::time::timeout(Duration::from_secs(5), task).await.expect("serve_http returns").expect("task").expect("ends cleanly");
}

#[tokio::test]
async fn a_server_without_an_event_log_has_no_events_route() {
    let (addr, _task) = listen(RpcServer::new(TestHandler::new())).await;
    let (status, text, _) = open_events(addr, &[], "\r\n\r\n").await;
    assert_eq!(status, 404, "{text}");
}

/// `watch` `{since?}`: the caller's events from `since` (new ones only without), forwarded as
/// `event` notifications once the call's reply is queued.
struct Watch(EventLog);

impl openagents_rpc::Handler for Watch {
    fn call<'a>(&'a self, cx: &'a openagents_rpc::Context, _method: &'a str, params: Option<&'a serde_json::value::RawValue>) -> openagents_rpc::BoxFuture<'a, Result<Box<serde_json::value::RawValue>, openagents_rpc::RpcError>> {
        Box::pin(async move {
            let since = params.and_then(|p| serde_json::from_str::<serde_json::Value>(p.get()).ok()).and_then(|p| p["since"].as_u64());
            let (sub, peer) = (self.0.subscribe(since), cx.peer().clone());
            cx.after_reply(async move {
                tokio::spawn(async move { openagents_rpc::events::forward(sub, peer, "event").await });
            });
            Ok(openagents_rpc::null())
        })
    }
}

/// A line connection's events come as notifications after the `watch` answer, in order, each with
/// its `seq`; a caller that comes back with the last `seq` it got gets exactly the later ones,
/// and one whose point is no longer held gets a `gap` first; a line break in an event's data
/// never breaks a line; over HTTP there is no connection to forward on.
#[tokio::test]
async fn events_forwarded_on_a_connection_resume_from_the_last_seq() {
    use serde_json::{Value, json};
    let log = EventLog::new(4);
    let server = RpcServer::new(Watch(log.clone()));
    let mut lines = common::Lines::open(server.clone());
    lines.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "watch"})).await;
    assert_eq!(lines.next().await["id"], 1, "the answer before any event");
    log.publish("tick", &json!({"n": 1}));
    log.publish_json("tick", b"{\"n\":\n2}");
    let got: Vec<Value> = vec![lines.next().await, lines.next().await];
    assert_eq!(got[0], json!({"jsonrpc": "2.0", "method": "event", "params": {"seq": 1, "event": "tick", "data": {"n": 1}}}));
    assert_eq!(got[1]["params"], json!({"seq": 2, "event": "tick", "data": {"n": 2}}), "{got:?}");
    drop(lines);

    // Back after seq 1: 2 and what came meanwhile, nothing twice.
    log.publish("tick", &json!({"n": 3}));
    let mut lines = common::Lines::open(server.clone());
    lines.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "watch", "params": {"since": 1}})).await;
    assert_eq!(lines.next().await["id"], 2);
    let seqs: Vec<Value> = vec![lines.next().await["params"]["seq"].clone(), lines.next().await["params"]["seq"].clone()];
    assert_eq!(seqs, vec![json!(2), json!(3)]);
    drop(lines);

    // Back after a point the buffer of 4 no longer holds: a gap, then the oldest held.
    for n in 4..=8 {
        log.publish("tick", &json!({ "n": n }));
    }
    let mut lines = common::Lines::open(server.clone());
    lines.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "watch", "params": {"since": 1}})).await;
    assert_eq!(lines.next().await["id"], 3);
    let gap = lines.next().await;
    assert_eq!(gap["params"], json!({"event": "gap", "data": {"after": 1, "oldest": 5}}), "{gap}");
    assert_eq!(lines.next().await["params"]["seq"], 5);

    let detached = openagents_rpc::Peer::detached();
    assert_eq!(openagents_rpc::events::forward(log.subscribe(None), detached, "event").await, Err(openagents_rpc::PeerError::Unsupported));
}

/// A forwarder ends once its connection is finished, so a program that reads the connection's
/// queue to its end is not held by it; data that is no JSON reaches the caller as an object
/// saying so, never as a broken message.
#[tokio::test]
async fn a_forwarder_ends_with_its_connection_and_never_sends_broken_json() {
    use serde_json::Value;
    let log = EventLog::new(8);
    let server = RpcServer::new(TestHandler::new());
    let (conn, mut rx) = openagents_rpc::Connection::new(&server, openagents_rpc::Identity::new("test"));
    let forwarding = tokio::spawn(openagents_rpc::events::forward(log.subscribe(None), conn.peer().clone(), "event"));
    tokio::task::yield_now().await;
    log.publish_json("bad", b"{not json");
    let note: Value = serde_json::from_slice(&rx.recv().await.expect("the event")).expect("a whole JSON message");
    assert_eq!(note["params"]["event"], "bad", "{note}");
    assert!(note["params"]["data"]["error"].as_str().is_some_and(|e| e.contains("not JSON")), "{note}");
    conn.finish().await;
    let ended = tokio::time::timeout(Duration::from_secs(5), forwarding).await.expect("the forwarder ended with its connection").expect("the task");
    assert_eq!(ended, Err(openagents_rpc::PeerError::Closed));
    assert!(tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("the queue closed").is_none());
}
