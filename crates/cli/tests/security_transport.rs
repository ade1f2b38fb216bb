//! Security round 2, the transports, against the real `openagents serve --http` on loopback:
//! a WebSocket that floods requests and never reads keeps the server's memory bounded while
//! another client is served, and is disconnected; an error reply is bounded whatever the request
//! held, says its detail once, and checks the grant before explaining anything; header blocks,
//! declared body lengths and connections per peer are capped before authentication, and
//! unfinished connections give their places to clients that authenticate.

mod security_common;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use security_common::{ADMIN, BOUND, OBSERVER, Setup};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// The most the server's resident memory may grow while one connection floods it: replies
/// waiting for a frontend are bounded by its outbound queue and SERVER_MAX_IN_FLIGHT.
const FLOOD_RSS_BOUND_KB: u64 = 96 * 1024;

fn setup(name: &str) -> (Setup, security_common::Server, SocketAddr) {
    security_common::serve_observer_and_admin(name)
}

/// The resident memory of `pid`, in KiB.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
}

/// One raw HTTP/1.1 exchange from the loopback address `from`: the status code and the body,
/// or `None` when the connection is closed without an answer.
fn http_from(addr: SocketAddr, from: Ipv4Addr, request: &[u8]) -> Option<(u16, String)> {
    let mut stream = if from == Ipv4Addr::LOCALHOST { TcpStream::connect_timeout(&addr, BOUND).ok()? } else { connect_from(from, addr)? };
    stream.set_read_timeout(Some(BOUND)).ok()?;
    // A refused connection may be closed before the request is written: that is no answer.
    let _ = stream.write_all(request);
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Some((code, body))
}

/// A TCP connection to `addr` from the loopback address `from`.
fn connect_from(from: Ipv4Addr, addr: SocketAddr) -> Option<TcpStream> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
    rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().ok()?;
        socket.bind(SocketAddr::from((from, 0))).ok()?;
        let stream = tokio::time::timeout(BOUND, socket.connect(addr)).await.ok()?.ok()?;
        stream.into_std().ok()
    })
    .and_then(|s| s.set_nonblocking(false).ok().map(|()| s))
}

fn post(addr: SocketAddr, token: &str, body: &str) -> Option<(u16, String)> {
    let request = format!(
        "POST /rpc HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    http_from(addr, Ipv4Addr::LOCALHOST, request.as_bytes())
}

#[test]
fn a_websocket_flooding_requests_without_reading_is_bounded_and_disconnected() {
    let (_s, server, addr) = setup("flood");
    let pid = server.child.id();
    let before = rss_kb(pid);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    let (sent, close, peak) = rt.block_on(async move {
        let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
        // A tiny receive buffer: the replies the client never reads push back at once.
        socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
        let stream = socket.connect(addr).await.expect("connects");
        let mut request = format!("ws://{addr}/frontend/v2").into_client_request().expect("a request");
        request.headers_mut().insert("authorization", format!("Bearer {OBSERVER}").parse().expect("a header"));
        let (mut ws, _) = tokio_tungstenite::client_async(request, stream).await.expect("the observer upgrades");
        // 20 000 small requests (about 1 MB), sent as fast as the server takes them; once it
        // stops reading (backpressure), sending blocks and the flood ends by timing out.
        let mut sent = 0;
        let deadline = Instant::now() + Duration::from_secs(15);
        for id in 0..20_000 {
            let frame = Message::text(json!({"jsonrpc": "2.0", "id": id, "method": "rpc.discover"}).to_string());
            match tokio::time::timeout(Duration::from_secs(2), ws.send(frame)).await {
                Ok(Ok(())) => sent += 1,
                _ => break,
            }
            if Instant::now() > deadline {
                break;
            }
        }
        // Still not reading: the server gives up on the connection within a bounded time
        // (its outbound queue stayed full), seen in its open-connections gauge; meanwhile its
        // memory stays bounded and another client is served.
        let mut peak = 0;
        let gone = Instant::now() + BOUND;
        let mut dropped = false;
        while Instant::now() < gone {
            peak = peak.max(rss_kb(pid));
            let (code, body) = tokio::task::spawn_blocking(move || post(addr, ADMIN, r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#)).await.expect("joins").expect("status is answered during the flood");
            assert_eq!(code, 200, "{body}");
            let metrics = tokio::task::spawn_blocking(move || http_from(addr, Ipv4Addr::LOCALHOST, format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ADMIN}\r\nConnection: close\r\n\r\n").as_bytes())).await.expect("joins").expect("metrics");
            let open: i64 = metrics.1.lines().find_map(|l| l.strip_prefix("openagents_connections ")).and_then(|v| v.trim().parse().ok()).expect("the connections gauge");
            if open <= 1 {
                dropped = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(dropped, "the server did not drop a connection that read nothing within {BOUND:?}");
        // Now read: replies that were on the wire, then the server's close (1013).
        let mut close = None;
        let end = Instant::now() + BOUND;
        while Instant::now() < end {
            match tokio::time::timeout(BOUND, ws.next()).await {
                Ok(Some(Ok(Message::Close(frame)))) => {
                    close = Some(frame.map_or(1005, |f| u16::from(f.code)));
                    break;
                }
                Ok(Some(Ok(_))) => {}
                _ => {
                    close = Some(1006);
                    break;
                }
            }
        }
        (sent, close, peak)
    });
    // Meanwhile, and after, another client is served.
    let (code, body) = post(addr, ADMIN, r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#).expect("status is answered");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"state\""), "{body}");
    let grown = peak.saturating_sub(before);
    eprintln!("flood: {sent} frames sent, RSS {before} kB -> {peak} kB (+{grown} kB), close {close:?}");
    // The server closed it (its gauge said so above); the 1013 close frame reaches the client
    // only when its window has room, else the socket is dropped (1006 to the client).
    assert!(matches!(close, Some(1013 | 1008 | 1006)), "the flooding connection is closed by the server, got {close:?}");
    assert!(grown < FLOOD_RSS_BOUND_KB, "the server grew by {grown} kB under one flooding connection (bound {FLOOD_RSS_BOUND_KB} kB)");
}

/// The length of a `status` request holding `params`.
fn body_len(params: &serde_json::Map<String, Value>) -> usize {
    json!({"jsonrpc": "2.0", "id": 1, "method": "status", "params": params}).to_string().len()
}

#[test]
fn an_error_reply_is_bounded_says_its_detail_once_and_checks_the_grant_first() {
    let (_s, _server, addr) = setup("amplify");
    // 3 000 unknown params (about 50 KB, under EXPLAIN_LIMIT) in a request the admin may make.
    let params: serde_json::Map<String, Value> = (0..3_000).map(|i| (format!("unknown_{i}"), json!(i))).collect();
    assert!(body_len(&params) < 64 * 1024);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "status", "params": params}).to_string();
    let (code, reply) = post(addr, ADMIN, &body).expect("answered");
    assert_eq!(code, 200);
    assert!(reply.len() < 64 * 1024, "a {} byte request got a {} byte error", body.len(), reply.len());
    let v: Value = serde_json::from_str(&reply).expect("a JSON reply");
    let e = &v["error"];
    assert_eq!(e["code"], -32602, "{v}");
    assert_eq!(e["message"], "Invalid params", "the detail is said once, in data: {e}");
    let violations = e["data"]["details"]["violations"].as_array().expect("violations");
    assert_eq!(violations.len(), 100, "at most 100 violations");
    assert_eq!(e["data"]["details"]["violations_omitted"], 3_000 - 100, "and a count of the rest");
    assert!(e["data"]["message"].as_str().is_some_and(|m| m.len() <= 2048), "a bounded message: {e}");

    // The same body for a method the observer may not call: refused by the grant, nothing
    // about its params explained.
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "submit", "params": params}).to_string();
    let (code, reply) = post(addr, OBSERVER, &body).expect("answered");
    assert_eq!(code, 200);
    let v: Value = serde_json::from_str(&reply).expect("a JSON reply");
    assert_eq!(v["error"]["data"]["code"], "forbidden", "{v}");
    assert!(v["error"]["data"].get("details").is_none(), "no violations for a caller who may not call it: {v}");

    // A request over EXPLAIN_LIMIT (64 KiB) gets its first problem only.
    let params: serde_json::Map<String, Value> = (0..20_000).map(|i| (format!("unknown_{i}"), json!(i))).collect();
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "status", "params": params}).to_string();
    assert!(body.len() > 64 * 1024);
    let (code, reply) = post(addr, ADMIN, &body).expect("answered");
    assert_eq!(code, 200);
    assert!(reply.len() < 4096, "{} bytes", reply.len());
    assert!(reply.contains("invalid_params") && reply.contains("first problem"), "{reply}");
}

#[test]
fn headers_declared_lengths_and_connections_per_peer_are_capped_before_authentication() {
    let (_s, _server, addr) = setup("caps");
    // A header block over 64 KiB: 431 without a token.
    let big = "x".repeat(70 * 1024);
    let request = format!("GET /events HTTP/1.1\r\nHost: {addr}\r\nX-Big: {big}\r\n\r\n");
    let (code, _) = http_from(addr, Ipv4Addr::LOCALHOST, request.as_bytes()).expect("answered");
    assert_eq!(code, 431);
    // A declared body over the limit: 413 at once, before any of it is sent.
    let started = Instant::now();
    let request = format!(
        "POST /rpc HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        32 * 1024 * 1024
    );
    let (code, body) = http_from(addr, Ipv4Addr::LOCALHOST, request.as_bytes()).expect("answered");
    assert_eq!(code, 413, "{body}");
    assert!(body.contains("\"jsonrpc\":\"2.0\""), "{body}");
    assert!(started.elapsed() < Duration::from_secs(10), "answered at once, not after the body timeout");
    // One peer holding 64 unfinished connections cannot lock out the clients that authenticate,
    // from that address (on loopback every local process is that peer) or another: a request
    // with a token takes the place of the oldest unfinished one.
    let mut held = Vec::new();
    for _ in 0..openagents_sdk::server::http::MAX_CONNECTIONS_PER_PEER {
        let mut s = TcpStream::connect(addr).expect("connects");
        s.write_all(b"GET /events HTTP/1.1\r\n").expect("a partial request");
        held.push(s);
    }
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#;
    let status = format!("POST /rpc HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    let (code, body) = http_from(addr, Ipv4Addr::LOCALHOST, status.as_bytes()).expect("an authenticated client of the same address is served");
    assert_eq!(code, 200, "{body}");
    let (code, body) = http_from(addr, Ipv4Addr::new(127, 0, 0, 2), status.as_bytes()).expect("another peer is served");
    assert_eq!(code, 200, "{body}");
    drop(held);
    // The cap itself holds against connections that have authenticated: with 64 event streams
    // open from one address, the 65th connection from it is closed unanswered.
    let mut streams = Vec::new();
    for _ in 0..openagents_sdk::server::http::MAX_CONNECTIONS_PER_PEER {
        let mut s = TcpStream::connect(addr).expect("connects");
        s.set_read_timeout(Some(BOUND)).expect("a timeout");
        s.write_all(format!("GET /events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ADMIN}\r\n\r\n").as_bytes()).expect("a request");
        let mut first = [0u8; 12];
        s.read_exact(&mut first).expect("the stream's answer");
        assert_eq!(&first, b"HTTP/1.1 200");
        streams.push(s);
    }
    let refused = http_from(addr, Ipv4Addr::LOCALHOST, status.as_bytes());
    let (code, body) = refused.expect("one connection past the per-peer cap of authenticated connections is answered");
    assert_eq!(code, 503, "answered busy, then closed: {body}");
    assert!(body.contains("-32003"), "a JSON-RPC busy error: {body}");
    drop(streams);
}
