//! The listener's defences over real loopback sockets, each against the attack it answers:
//! silent connections from one address cannot lock authenticated clients out; a `Host` the
//! runtime does not serve (DNS rebinding) gets neither the page nor the WebSocket; a browser
//! origin not allowed is refused on `POST /rpc`, `GET /events` and `GET /metrics`; a body refused
//! before it is read is still read (and dropped), so a client that writes it whole reads the
//! refusal instead of a reset; request bodies share one budget; every refusal has a JSON-RPC
//! error body.
//!
//! Plain clients here are blocking `std` sockets (run on blocking threads), as a script's
//! `urllib` or `curl` would be. Every wait is for something observable, bounded by [`STEP`].

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream as StdTcp};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use openagents_server::http::MAX_CONNECTIONS_PER_PEER;
use openagents_server::{RpcEngine, SERVER_MAX_LINE_BYTES, run_http_authorized_web};
use serde_json::Value;

/// An answer read from a plain socket: the status, the header block, the body.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("status {}: the body is not JSON ({e}): {}\n{}", self.status, self.head, String::from_utf8_lossy(&self.body)))
    }

    /// The typed code of a JSON-RPC error body (with `jsonrpc` and a null `id`).
    fn code(&self) -> String {
        let v = self.json();
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        assert_eq!(v["id"], Value::Null, "{v}");
        v["error"]["data"]["code"].as_str().unwrap_or_else(|| panic!("no typed error code: {v}")).to_owned()
    }
}

/// Reads one answer: the header block, then `Content-Length` bytes of body (a `101` has none).
fn read_answer(s: &mut StdTcp) -> Result<Answer, String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let split = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        match s.read(&mut chunk) {
            Ok(0) => return Err(format!("closed after {} bytes: {:?}", buf.len(), String::from_utf8_lossy(&buf))),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("{e} after {} bytes", buf.len())),
        }
    };
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).ok_or_else(|| format!("no status line: {head:?}"))?;
    let length: usize = head.lines().find_map(|l| l.split_once(':').filter(|(n, _)| n.eq_ignore_ascii_case("content-length")).and_then(|(_, v)| v.trim().parse().ok())).unwrap_or(0);
    let mut body = buf[split + 4..].to_vec();
    while body.len() < length {
        match s.read(&mut chunk) {
            Ok(0) => return Err(format!("closed after {} of {length} body bytes", body.len())),
            Ok(n) => body.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("{e} after {} of {length} body bytes", body.len())),
        }
    }
    body.truncate(length);
    Ok(Answer { status, head, body })
}

/// Connects, writes `request` whole (as a plain client does, whatever the server says first),
/// then reads the answer. `Err` says what happened instead (no answer, a reset).
fn exchange(addr: SocketAddr, request: &[u8]) -> Result<Answer, String> {
    let mut s = StdTcp::connect(addr).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(STEP)).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(STEP)).map_err(|e| e.to_string())?;
    let written = s.write_all(request);
    let answer = read_answer(&mut s).map_err(|e| format!("{e} (the write: {written:?})"))?;
    // A client such as urllib gives up when its write fails: the answer is not read then.
    written.map_err(|e| format!("the write failed ({e}), though the answer was {} {}", answer.status, answer.head.lines().next().unwrap_or_default()))?;
    Ok(answer)
}

async fn exchange_async(addr: SocketAddr, request: Vec<u8>) -> Result<Answer, String> {
    tokio::task::spawn_blocking(move || exchange(addr, &request)).await.expect("the exchange thread")
}

/// A `POST /rpc` request: `auth` is a header line (or empty), `body_len` the declared length;
/// `body` is written after the head (it may be shorter than declared).
fn post_head(addr: SocketAddr, auth: &str, content_type: &str, body_len: usize) -> Vec<u8> {
    format!("POST /rpc HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: {content_type}\r\nContent-Length: {body_len}\r\nConnection: close\r\n\r\n").into_bytes()
}

fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}\r\n")
}

/// A `status` request padded with spaces to `len` bytes.
fn padded_status(len: usize) -> Vec<u8> {
    let mut body = br#"{"jsonrpc":"2.0","id":1,"method":"status"}"#.to_vec();
    body.resize(len, b' ');
    body
}

fn status_request(addr: SocketAddr) -> Vec<u8> {
    let mut r = post_head(addr, &bearer(ADMIN), "application/json", padded_status(0).len());
    r.extend_from_slice(&padded_status(0));
    r
}

/// The value of the metric line `name` in the engine's exposition.
fn metric(engine: &RpcEngine, name: &str) -> Option<i64> {
    engine.metrics_text().lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' '))).and_then(|v| v.trim().parse().ok())
}

/// Polls `check` every 10 ms until it holds, for at most [`STEP`].
async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + STEP;
    while !check() {
        assert!(Instant::now() < deadline, "timed out after {STEP:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Silent connections (audit finding 3)
// ---------------------------------------------------------------------------------------------

/// Whether a held connection has been closed by the server (without blocking).
fn closed(s: &mut StdTcp) -> bool {
    let mut b = [0u8; 1];
    !matches!(s.read(&mut b), Err(e) if e.kind() == ErrorKind::WouldBlock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_from_one_address_do_not_lock_authenticated_clients_out() {
    let (engine, _gate) = scripted_engine();
    let http = Http::start(&engine).await;
    let addr = http.addr;
    // The attack: more silent connections from 127.0.0.1 than one address may hold, each
    // reopened as soon as the server closes it.
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut held: Vec<Option<StdTcp>> = (0..MAX_CONNECTIONS_PER_PEER + 16).map(|_| None).collect();
            let mut opened = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for slot in &mut held {
                    if slot.as_mut().is_none_or(closed) {
                        *slot = StdTcp::connect(addr).ok().filter(|s| s.set_nonblocking(true).is_ok());
                        opened += 1;
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            opened
        })
    };
    // The server holds as many of them as one address may.
    wait_until("the attacker's connections to fill the per-peer cap", || metric(&engine, "openagents_connections").is_some_and(|n| n >= MAX_CONNECTIONS_PER_PEER as i64)).await;
    let mut served = 0;
    let mut failures = Vec::new();
    for _ in 0..30 {
        match exchange_async(addr, status_request(addr)).await {
            Ok(a) if a.status == 200 => served += 1,
            other => failures.push(format!("{other:?}")),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let opened = attacker.join().expect("the attacker thread");
    assert_eq!(served, 30, "{served} of 30 authenticated `status` calls were served while {opened} silent connections were opened; failures: {failures:?}");
}

// ---------------------------------------------------------------------------------------------
// Host names (audit finding 6)
// ---------------------------------------------------------------------------------------------

const UPGRADE: &str = "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_name_the_runtime_does_not_serve_gets_neither_the_page_nor_the_websocket() {
    let (engine, _gate) = scripted_engine();
    let addr = run_http_authorized_web(engine.clone(), "127.0.0.1:0", credentials(), true).await.expect("bind loopback");
    let port = addr.port();
    let auth = bearer(ADMIN);
    // DNS rebinding: evil.example resolves to 127.0.0.1, so the browser sends its own name as
    // `Host` and its page's origin as `Origin`.
    let evil = format!("evil.example:{port}");
    let refused: Vec<(&str, String)> = vec![
        ("the page", format!("GET / HTTP/1.1\r\nHost: {evil}\r\nConnection: close\r\n\r\n")),
        ("an asset", format!("GET /assets/app.js HTTP/1.1\r\nHost: {evil}\r\nConnection: close\r\n\r\n")),
        ("the WebSocket, the rebinding pair", format!("GET /frontend/v2 HTTP/1.1\r\nHost: {evil}\r\nOrigin: http://{evil}\r\n{UPGRADE}{auth}\r\n")),
        ("the WebSocket, no Origin", format!("GET /frontend/v2 HTTP/1.1\r\nHost: {evil}\r\n{UPGRADE}{auth}\r\n")),
    ];
    for (what, request) in refused {
        let a = exchange_async(addr, request.into_bytes()).await.unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(a.status == 421 || a.status == 403, "{what}: {} {}", a.status, a.head);
        assert!(["forbidden", "invalid_request"].contains(&a.code().as_str()), "{what}: {}", a.code());
    }
    // The names of the loopback address the runtime is bound to, and the address itself.
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}"), format!("[::1]:{port}"), format!("LOCALHOST:{port}"), "localhost".to_owned()] {
        let a = exchange_async(addr, format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").into_bytes()).await.unwrap_or_else(|e| panic!("{host}: {e}"));
        assert_eq!(a.status, 200, "GET / with Host {host}: {}", a.head);
        let ws = format!("GET /frontend/v2 HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\n{UPGRADE}{auth}\r\n");
        let a = exchange_async(addr, ws.into_bytes()).await.unwrap_or_else(|e| panic!("{host}: {e}"));
        assert_eq!(a.status, 101, "the WebSocket with Host and Origin {host}: {}", a.head);
    }
    // A client that sends no Origin and the bound address (every non-browser client) upgrades.
    let a = exchange_async(addr, format!("GET /frontend/v2 HTTP/1.1\r\nHost: {addr}\r\n{UPGRADE}{auth}\r\n").into_bytes()).await.expect("an answer");
    assert_eq!(a.status, 101, "{}", a.head);
}

// ---------------------------------------------------------------------------------------------
// Browser origins on the HTTP routes (audit finding 7)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_events_and_metrics_refuse_a_browser_origin_not_allowed_with_403() {
    let (engine, _gate) = scripted_engine();
    let http = Http::start(&engine).await;
    let status = r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#;
    let auth = ("authorization", format!("Bearer {ADMIN}"));
    let json = ("content-type", "application/json".to_owned());
    for origin in ["https://evil.example", "null", "http://127.0.0.1:1", "http://evil.example"] {
        let with_origin = |mut h: Vec<(&'static str, String)>| {
            h.push(("origin", origin.to_owned()));
            h
        };
        let r = http.request("POST", "/rpc", &with_origin(vec![auth.clone(), json.clone()]), status).await;
        assert_eq!(r.status, 403, "POST /rpc from {origin}: {}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.error()["data"]["code"], "forbidden", "POST /rpc from {origin}");
        for path in ["/events", "/metrics"] {
            let r = http.request("GET", path, &with_origin(vec![auth.clone()]), "").await;
            assert_eq!(r.status, 403, "GET {path} from {origin}: {}", String::from_utf8_lossy(&r.body));
            assert_eq!(r.error()["data"]["code"], "forbidden", "GET {path} from {origin}");
        }
    }
    // The runtime's own origin (a page it served) and clients that send no Origin are served.
    let own = ("origin", format!("http://{}", http.addr));
    let r = http.request("POST", "/rpc", &[auth.clone(), json.clone(), own.clone()], status).await;
    assert_eq!(r.result()["state"], "idle");
    let r = http.request("POST", "/rpc", &[auth.clone(), json.clone()], status).await;
    assert_eq!(r.result()["state"], "idle");
    assert!(http.events_with(&[auth.clone(), own], Since::Now).await.is_ok(), "GET /events from the runtime's own origin");
    assert!(http.events_with(&[auth], Since::Now).await.is_ok(), "GET /events without an Origin");
}

// ---------------------------------------------------------------------------------------------
// Lingering close (audit finding 12)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_refused_before_it_is_read_is_drained_so_a_plain_client_reads_the_refusal() {
    let (engine, _gate) = scripted_engine();
    let http = Http::start(&engine).await;
    let addr = http.addr;
    // 17 MiB, written whole before reading (no `Expect: 100-continue`), as Python's urllib does.
    let size = 17 << 20;
    let cases: [(&str, String, &str, u16, &str); 3] = [
        ("over SERVER_MAX_LINE_BYTES", bearer(ADMIN), "application/json", 413, "frame_too_large"),
        ("without a token", String::new(), "application/json", 401, "unauthorized"),
        ("not JSON", bearer(ADMIN), "text/plain", 415, "invalid_request"),
    ];
    for (what, auth, content_type, status, code) in cases {
        let mut request = post_head(addr, &auth, content_type, size);
        request.resize(request.len() + size, b' ');
        let a = exchange_async(addr, request).await.unwrap_or_else(|e| panic!("{what}: no answer: {e}"));
        assert_eq!(a.status, status, "{what}: {}", a.head);
        assert_eq!(a.code(), code, "{what}");
        http.assert_serving().await;
    }
}

// ---------------------------------------------------------------------------------------------
// The budget of buffered request bodies
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bodies_share_one_budget_and_a_body_without_room_gets_503() {
    let (engine, _gate) = scripted_engine();
    let http = Http::start(&engine).await;
    let addr = http.addr;
    // Bodies of SERVER_MAX_LINE_BYTES each, up to the budget, held one byte short of complete.
    let holders = 4;
    let mut held = Vec::new();
    for _ in 0..holders {
        let s = tokio::task::spawn_blocking(move || {
            let mut s = StdTcp::connect(addr).expect("connects");
            s.set_write_timeout(Some(STEP)).expect("a timeout");
            s.set_read_timeout(Some(STEP)).expect("a timeout");
            let mut request = post_head(addr, &bearer(ADMIN), "application/json", SERVER_MAX_LINE_BYTES);
            let body = padded_status(SERVER_MAX_LINE_BYTES);
            request.extend_from_slice(&body[..body.len() - 1]);
            // Once this much is written, the server is reading the body (far more than the
            // sockets' buffers hold has gone), so it has taken the body's room.
            s.write_all(&request).expect("the body but its last byte is taken");
            s
        })
        .await
        .expect("a holder");
        held.push(s);
    }
    // One more body of that size finds no room: 503 once it has waited, not a fifth buffer of that size.
    let mut request = post_head(addr, &bearer(ADMIN), "application/json", SERVER_MAX_LINE_BYTES);
    request.extend_from_slice(&padded_status(SERVER_MAX_LINE_BYTES));
    let a = exchange_async(addr, request.clone()).await.expect("an answer");
    assert_eq!(a.status, 503, "a body past the budget: {}", a.head);
    assert_eq!(a.code(), "busy");
    assert_eq!(metric(&engine, "openagents_request_body_bytes"), Some((holders * SERVER_MAX_LINE_BYTES) as i64), "the holders' bodies are counted");
    // The held bodies complete and are served; their room is given back.
    for mut s in held {
        let answer = tokio::task::spawn_blocking(move || {
            s.write_all(b" ").expect("the last byte");
            read_answer(&mut s)
        })
        .await
        .expect("joins")
        .expect("the holder's answer");
        assert_eq!(answer.status, 200, "{}", answer.head);
    }
    wait_until("the budget to be given back", || metric(&engine, "openagents_request_body_bytes") == Some(0)).await;
    let a = exchange_async(addr, request).await.expect("an answer");
    assert_eq!(a.status, 200, "a body with room again: {}", a.head);
}

// ---------------------------------------------------------------------------------------------
// Refusal bodies (audit finding 13b)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_websocket_path_without_an_upgrade_is_a_json_rpc_refusal() {
    let (engine, _gate) = scripted_engine();
    let http = Http::start(&engine).await;
    let r = http.request("GET", "/frontend/v2", &[("authorization", format!("Bearer {ADMIN}"))], "").await;
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.headers.get("content-type").and_then(|v| v.to_str().ok()), Some("application/json"));
    assert_eq!(r.json()["jsonrpc"], "2.0");
    assert_eq!(r.json()["id"], Value::Null);
    assert_eq!(r.error()["data"]["code"], "invalid_request");
}
