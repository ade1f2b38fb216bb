//! The guards of `listen::serve_connections`, as `RpcServer::serve_http` applies them, over real
//! loopback sockets, each with small `ConnectionLimits` so it shows within a second: the
//! per-peer and global connection caps (a newcomer takes the place of the oldest connection that
//! has not authenticated and waits for bytes; one that made an authenticated `POST /rpc` or
//! opened an authenticated WebSocket keeps its place), the header block bound (431 with a
//! JSON-RPC error) and header read timeout (a slow or silent sender is cut off), the budget of
//! buffered bodies (503 Busy) and the body read timeout (408), the lingering read of a body
//! refused unread (the client reads the 401, not a reset), the write-stall guard (a client that
//! never reads is disconnected), and the shutdown grace (a stuck call holds `serve_http` at most
//! that long).
//!
//! Clients write raw HTTP/1.1 on tokio sockets (a blocking `std` socket where the test is what a
//! plain script does). Every wait is for something observable and bounded by [`STEP`]; timings
//! are asserted with a lower bound and a generous upper bound only.

mod common;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{listen, tokens};
use futures_util::{SinkExt, StreamExt};
use openagents_rpc::listen::{ConnectionLimits, Linger};
use openagents_rpc::{BoxFuture, Context, Handler, Metrics, RpcError, RpcServer, Shutdown, codes};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// The longest any wait of these tests lasts before it fails.
const STEP: Duration = Duration::from_secs(5);

/// The gauge of open HTTP connections in [`Metrics::render`].
const HTTP_CONNECTIONS: &str = "openagents_rpc_connections{transport=\"http\"}";

/// Methods: `echo` (its params), `big` (a string of `params[0]` bytes), `nap` (answers after
/// `params[0]` milliseconds), `sleep` (counts its start, then sleeps 10 s: a call stuck in
/// flight).
#[derive(Clone)]
struct Probe {
    sleeping: Arc<watch::Sender<usize>>,
}

impl Probe {
    fn new() -> Probe {
        Probe { sleeping: Arc::new(watch::channel(0).0) }
    }

    /// Waits until `n` `sleep` calls have started.
    async fn sleeping(&self, n: usize) {
        let mut rx = self.sleeping.subscribe();
        tokio::time::timeout(STEP, rx.wait_for(|s| *s >= n)).await.expect("the sleep call starts in time").expect("the handler lives");
    }
}

impl Handler for Probe {
    fn call<'a>(&'a self, _cx: &'a Context, method: &'a str, params: Option<&'a RawValue>) -> BoxFuture<'a, Result<Box<RawValue>, RpcError>> {
        Box::pin(async move {
            match method {
                "echo" => Ok(params.map(ToOwned::to_owned).unwrap_or_else(openagents_rpc::null)),
                "big" => {
                    let [n]: [usize; 1] = serde_json::from_str(params.map_or("null", RawValue::get)).map_err(RpcError::invalid_params)?;
                    Ok(RawValue::from_string(format!("\"{}\"", "x".repeat(n))).expect("JSON"))
                }
                "nap" => {
                    let [ms]: [u64; 1] = serde_json::from_str(params.map_or("null", RawValue::get)).map_err(RpcError::invalid_params)?;
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok(RawValue::from_string("\"rested\"".to_owned()).expect("JSON"))
                }
                "sleep" => {
                    self.sleeping.send_modify(|n| *n += 1);
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    Ok(RawValue::from_string("\"slept\"".to_owned()).expect("JSON"))
                }
                other => Err(RpcError::method_not_found(other)),
            }
        })
    }
}

/// A server of [`Probe`] with `limits` (the rest default) and metrics.
fn server(limits: ConnectionLimits) -> (RpcServer, Metrics) {
    let metrics = Metrics::new();
    (RpcServer::new(Probe::new()).metrics(metrics.clone()).connection_limits(limits), metrics)
}

/// The value of the metric line `name`.
fn metric(metrics: &Metrics, name: &str) -> Option<i64> {
    metrics.render().lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' '))).and_then(|v| v.trim().parse().ok())
}

/// The HTTP connections the server counts open.
fn http_connections(metrics: &Metrics) -> i64 {
    metric(metrics, HTTP_CONNECTIONS).expect("the connection gauge")
}

/// Polls `check` every 5 ms until it holds, for at most [`STEP`].
async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + STEP;
    while !check() {
        assert!(Instant::now() < deadline, "timed out after {STEP:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A connection from 127.0.0.1.
async fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).await.expect("connects")
}

/// A connection from `from` (another loopback address: another peer).
async fn connect_from(from: Ipv4Addr, addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("a socket");
    socket.bind(SocketAddr::from((from, 0))).expect("binds a loopback address");
    socket.connect(addr).await.expect("connects")
}

/// A connection the server has accepted (its gauge shows `n` open) and found waiting for bytes.
async fn idle(addr: SocketAddr, from: Ipv4Addr, metrics: &Metrics, n: i64) -> TcpStream {
    let s = connect_from(from, addr).await;
    wait_until(&format!("{n} connections open"), || http_connections(metrics) == n).await;
    // The connection's task reads at once, finds nothing, and so is known to be waiting; give it
    // that moment so the eviction order is by age, not by which task ran first.
    tokio::time::sleep(Duration::from_millis(30)).await;
    s
}

/// `{"jsonrpc":"2.0","id":1,"method":"echo","params":["hi"]}`, padded with spaces to `len` bytes
/// when that is longer.
fn echo_body(len: usize) -> Vec<u8> {
    let mut body = br#"{"jsonrpc":"2.0","id":1,"method":"echo","params":["hi"]}"#.to_vec();
    body.resize(len.max(body.len()), b' ');
    body
}

/// The head of a keep-alive `POST /rpc` of `len` bytes, with `Authorization: Bearer <token>` when
/// `token` is given.
fn post_head(addr: SocketAddr, token: Option<&str>, len: usize) -> Vec<u8> {
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    format!("POST /rpc HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nContent-Length: {len}\r\n\r\n").into_bytes()
}

/// A whole keep-alive `POST /rpc` of an `echo`.
fn post(addr: SocketAddr, token: Option<&str>) -> Vec<u8> {
    let body = echo_body(0);
    let mut r = post_head(addr, token, body.len());
    r.extend_from_slice(&body);
    r
}

/// An answer: the status, the header block, the body.
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

    /// The code of a JSON-RPC error body (with `jsonrpc` and a null `id`).
    fn error_code(&self) -> i64 {
        let v = self.json();
        assert_eq!((&v["jsonrpc"], &v["id"]), (&Value::from("2.0"), &Value::Null), "{v}");
        v["error"]["code"].as_i64().unwrap_or_else(|| panic!("an error body: {v}"))
    }

    /// The `echo` call's answer.
    fn assert_echoed(&self) {
        assert_eq!(self.status, 200, "{}\n{}", self.head, String::from_utf8_lossy(&self.body));
        assert_eq!(self.json()["result"], serde_json::json!(["hi"]));
    }
}

/// Parses one answer from the front of `buf` once it holds the whole of it.
fn parse_answer(buf: &[u8]) -> Option<Answer> {
    let split = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let length: usize = head.lines().find_map(|l| l.split_once(':').filter(|(n, _)| n.eq_ignore_ascii_case("content-length")).and_then(|(_, v)| v.trim().parse().ok())).unwrap_or(0);
    let body = buf.get(split + 4..split + 4 + length)?.to_vec();
    Some(Answer { status, head, body })
}

/// Reads one answer (head and `Content-Length` body) within [`STEP`]; `Err` says what happened
/// instead.
async fn read_answer(s: &mut TcpStream) -> Result<Answer, String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        if let Some(a) = parse_answer(&buf) {
            return Ok(a);
        }
        match tokio::time::timeout_at(deadline, s.read(&mut chunk)).await {
            Err(_) => return Err(format!("no answer within {STEP:?} ({} bytes)", buf.len())),
            Ok(Ok(0)) => return Err(format!("closed after {} bytes: {:?}", buf.len(), String::from_utf8_lossy(&buf))),
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            Ok(Err(e)) => return Err(format!("{e} after {} bytes", buf.len())),
        }
    }
}

/// Writes `request` and reads its answer.
async fn exchange(s: &mut TcpStream, request: &[u8]) -> Answer {
    s.write_all(request).await.expect("the request is written");
    read_answer(s).await.expect("an answer")
}

/// Whether the server has closed `s` (the read ends or is reset within [`STEP`]) without
/// sending a byte.
async fn closed(s: &mut TcpStream) -> Result<(), String> {
    let mut b = [0u8; 256];
    match tokio::time::timeout(STEP, s.read(&mut b)).await {
        Err(_) => Err(format!("still open after {STEP:?}")),
        Ok(Ok(0)) => Ok(()),
        Ok(Ok(n)) => Err(format!("the server sent {n} bytes: {:?}", String::from_utf8_lossy(&b[..n]))),
        Ok(Err(e)) if matches!(e.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted) => Ok(()),
        Ok(Err(e)) => Err(format!("the read failed: {e}")),
    }
}

/// A connection refused past the caps: answered 503 with `Retry-After` and a JSON-RPC busy
/// error, then closed.
async fn refused(s: &mut TcpStream) -> Result<(), String> {
    let mut got = Vec::new();
    match tokio::time::timeout(STEP, s.read_to_end(&mut got)).await {
        Err(_) => return Err(format!("still open after {STEP:?}")),
        Ok(Err(e)) => return Err(format!("the read failed: {e} (after {:?})", String::from_utf8_lossy(&got))),
        Ok(Ok(_)) => {}
    }
    let text = String::from_utf8_lossy(&got);
    let ok = text.starts_with("HTTP/1.1 503 ") && text.contains("retry-after: 1\r\n") && text.contains(r#""code":-32003"#);
    if ok { Ok(()) } else { Err(format!("not a 503 busy answer: {text:?}")) }
}

/// Whether `s` is still open: nothing to read, and no end, for a moment.
async fn still_open(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    tokio::time::timeout(Duration::from_millis(50), s.read(&mut b)).await.is_err()
}

const LOCAL: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);

// ---------------------------------------------------------------------------------------------
// Connection caps
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_per_peer_cap_a_newcomer_takes_the_place_of_the_oldest_idle_connection() {
    let (server, metrics) = server(ConnectionLimits { max_connections_per_peer: 2, ..ConnectionLimits::default() });
    let (addr, _task) = listen(server).await;
    let mut oldest = idle(addr, LOCAL, &metrics, 1).await;
    let mut younger = idle(addr, LOCAL, &metrics, 2).await;
    // A third connection from the same address is served…
    let mut newcomer = connect(addr).await;
    exchange(&mut newcomer, &post(addr, None)).await.assert_echoed();
    // …in the place of the oldest, which is closed without a byte…
    closed(&mut oldest).await.expect("the oldest idle connection is closed");
    wait_until("the peer to hold its cap, no more", || http_connections(&metrics) == 2).await;
    // …and the younger one keeps its place and is served.
    exchange(&mut younger, &post(addr, None)).await.assert_echoed();
    exchange(&mut newcomer, &post(addr, None)).await.assert_echoed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_authenticated_keep_their_places_and_a_newcomer_is_closed_on_arrival() {
    let metrics = Metrics::new();
    let limits = ConnectionLimits { max_connections_per_peer: 2, ..ConnectionLimits::default() };
    let server = RpcServer::new(Probe::new()).authenticator(tokens).metrics(metrics.clone()).connection_limits(limits);
    let (addr, _task) = listen(server).await;
    let mut first = connect(addr).await;
    exchange(&mut first, &post(addr, Some("secret-token"))).await.assert_echoed();
    let mut second = connect(addr).await;
    exchange(&mut second, &post(addr, Some("secret-token"))).await.assert_echoed();
    // Both are idle now, but authenticated: a third from the same address is refused (503),
    // its request unanswered.
    let mut third = connect(addr).await;
    let _ = third.write_all(&post(addr, Some("secret-token"))).await;
    refused(&mut third).await.expect("the newcomer is refused");
    // The two keep their places and are served.
    exchange(&mut first, &post(addr, Some("secret-token"))).await.assert_echoed();
    exchange(&mut second, &post(addr, Some("secret-token"))).await.assert_echoed();
    // Another address is not affected by this one's cap.
    let mut elsewhere = connect_from(Ipv4Addr::new(127, 0, 0, 2), addr).await;
    exchange(&mut elsewhere, &post(addr, Some("secret-token"))).await.assert_echoed();
    drop(elsewhere);
    // A request refused 401 earns no place: with one authenticated connection gone, a
    // connection that was refused is the one a newcomer replaces.
    drop(second);
    wait_until("the second connection to be given back", || http_connections(&metrics) == 1).await;
    let mut refused = connect(addr).await;
    let a = exchange(&mut refused, &post(addr, Some("wrong-token"))).await;
    assert_eq!((a.status, a.error_code()), (401, codes::UNAUTHORIZED), "{}", a.head);
    assert!(still_open(&mut refused).await, "the refused connection is kept alive");
    assert_eq!(http_connections(&metrics), 2);
    let mut newcomer = connect(addr).await;
    exchange(&mut newcomer, &post(addr, Some("secret-token"))).await.assert_echoed();
    closed(&mut refused).await.expect("the connection that never authenticated gives its place");
    exchange(&mut first, &post(addr, Some("secret-token"))).await.assert_echoed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authenticated_websocket_keeps_its_place() {
    let metrics = Metrics::new();
    let limits = ConnectionLimits { max_connections_per_peer: 1, ..ConnectionLimits::default() };
    let server = RpcServer::new(Probe::new()).authenticator(tokens).metrics(metrics.clone()).connection_limits(limits);
    let (addr, _task) = listen(server).await;
    let mut request = format!("ws://{addr}/rpc").into_client_request().expect("a request");
    request.headers_mut().insert("authorization", "Bearer secret-token".parse().expect("a header value"));
    let (mut ws, _) = tokio_tungstenite::connect_async(request).await.expect("the authenticated WebSocket opens");
    // Idle, authenticated, holding the address's only place: a newcomer is refused (503).
    let mut newcomer = connect(addr).await;
    let _ = newcomer.write_all(&post(addr, Some("secret-token"))).await;
    refused(&mut newcomer).await.expect("the newcomer is refused");
    // The socket still answers.
    ws.send(Message::text(r#"{"jsonrpc":"2.0","id":1,"method":"echo","params":["hi"]}"#)).await.expect("send");
    let reply = tokio::time::timeout(STEP, ws.next()).await.expect("a reply in time").expect("a message").expect("a frame");
    let reply: Value = serde_json::from_str(reply.to_text().expect("text")).expect("JSON");
    assert_eq!(reply["result"], serde_json::json!(["hi"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_global_cap_a_newcomer_from_any_peer_takes_the_place_of_an_idle_connection() {
    let metrics = Metrics::new();
    let limits = ConnectionLimits { max_connections: 2, ..ConnectionLimits::default() };
    let server = RpcServer::new(Probe::new()).authenticator(tokens).metrics(metrics.clone()).connection_limits(limits);
    let (addr, _task) = listen(server).await;
    // Two peers, one place each below their own cap: the first authenticated, the second idle.
    let mut trusted = connect_from(Ipv4Addr::new(127, 0, 0, 1), addr).await;
    exchange(&mut trusted, &post(addr, Some("secret-token"))).await.assert_echoed();
    let mut waiting = idle(addr, Ipv4Addr::new(127, 0, 0, 2), &metrics, 2).await;
    // A third peer takes the idle one's place (not the older authenticated one's).
    let mut third = connect_from(Ipv4Addr::new(127, 0, 0, 3), addr).await;
    exchange(&mut third, &post(addr, Some("secret-token"))).await.assert_echoed();
    closed(&mut waiting).await.expect("the idle connection of another peer is closed");
    wait_until("the listener to hold its cap, no more", || http_connections(&metrics) == 2).await;
    // Every place held by an authenticated connection: a fourth peer is refused (503).
    let mut fourth = connect_from(Ipv4Addr::new(127, 0, 0, 4), addr).await;
    let _ = fourth.write_all(&post(addr, Some("secret-token"))).await;
    refused(&mut fourth).await.expect("the fourth peer is refused");
    exchange(&mut trusted, &post(addr, Some("secret-token"))).await.assert_echoed();
    exchange(&mut third, &post(addr, Some("secret-token"))).await.assert_echoed();
}

// ---------------------------------------------------------------------------------------------
// The header block
// ---------------------------------------------------------------------------------------------

/// A `GET /health` whose header block is exactly `len` bytes (a padding header fills it).
fn health_of_len(addr: SocketAddr, len: usize) -> Vec<u8> {
    let without_pad = format!("GET /health HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\nx-pad: \r\n\r\n");
    format!("GET /health HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\nx-pad: {}\r\n\r\n", "p".repeat(len - without_pad.len())).into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_block_over_the_bound_is_refused_431_with_a_json_rpc_error() {
    let max = 1024;
    let (server, _metrics) = server(ConnectionLimits { max_header_bytes: max, ..ConnectionLimits::default() });
    let (addr, _task) = listen(server).await;
    let at_limit = health_of_len(addr, max);
    assert_eq!(at_limit.len(), max);
    let a = exchange(&mut connect(addr).await, &at_limit).await;
    assert_eq!((a.status, a.json()), (200, serde_json::json!({"status": "ok"})), "a block of exactly the bound: {}", a.head);
    let a = exchange(&mut connect(addr).await, &health_of_len(addr, max + 1)).await;
    assert_eq!(a.status, 431, "one byte past the bound: {}", a.head);
    assert_eq!(a.error_code(), codes::FRAME_TOO_LARGE);
    // The same on `POST /rpc`, before anything else is looked at.
    let mut request = post(addr, None);
    let pad = format!("x-pad: {}\r\n", "p".repeat(max));
    request.splice(request.len() - echo_body(0).len() - 2..request.len() - echo_body(0).len() - 2, pad.bytes());
    let a = exchange(&mut connect(addr).await, &request).await;
    assert_eq!((a.status, a.error_code()), (431, codes::FRAME_TOO_LARGE), "{}", a.head);
    // A block past what the connection's read buffer holds (16 KiB here) is refused 431 by the
    // HTTP parser itself, before it is held whole (that answer has no body).
    let a = exchange(&mut connect(addr).await, &health_of_len(addr, 32 * max)).await;
    assert_eq!(a.status, 431, "a block of 32 times the bound: {}", a.head);
}

/// How long after `start` the server closed `s` (within [`STEP`], with no answer).
async fn closed_after(s: &mut TcpStream, start: Instant) -> Duration {
    closed(s).await.expect("the server closes the connection, with no answer");
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_block_not_sent_within_the_header_read_timeout_closes_the_connection() {
    let timeout = Duration::from_millis(300);
    let (server, _metrics) = server(ConnectionLimits { header_read_timeout: timeout, ..ConnectionLimits::default() });
    let (addr, _task) = listen(server).await;
    // Half a header block, then silence.
    let start = Instant::now();
    let mut half = connect(addr).await;
    half.write_all(format!("GET /health HTTP/1.1\r\nHost: {addr}\r\n").as_bytes()).await.expect("write");
    let took = closed_after(&mut half, start).await;
    assert!(took >= timeout - Duration::from_millis(50) && took < Duration::from_secs(3), "half a head: closed after {took:?}");
    // A slow sender, a byte every 40 ms, is cut off as well: bytes do not extend the time.
    let start = Instant::now();
    let slow = connect(addr).await;
    let (mut read, mut write) = slow.into_split();
    let trickle = tokio::spawn(async move {
        for b in format!("GET /health HTTP/1.1\r\nHost: {addr}\r\nX-Slow: {}\r\n\r\n", "s".repeat(200)).bytes() {
            if write.write_all(&[b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    });
    let mut b = [0u8; 256];
    let ended = tokio::time::timeout(STEP, read.read(&mut b)).await.expect("the slow sender is cut off in time");
    let took = start.elapsed();
    assert!(matches!(ended, Ok(0) | Err(_)), "no answer for a head that never completed: {ended:?}");
    assert!(took >= timeout - Duration::from_millis(50) && took < Duration::from_secs(3), "a slow sender: closed after {took:?}");
    trickle.abort();
    // A keep-alive connection left idle after its answer is closed after the timeout too.
    let mut kept = connect(addr).await;
    kept.write_all(format!("GET /health HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes()).await.expect("write");
    assert_eq!(read_answer(&mut kept).await.expect("an answer").status, 200);
    let start = Instant::now();
    let took = closed_after(&mut kept, start).await;
    assert!(took >= timeout - Duration::from_millis(50) && took < Duration::from_secs(3), "an idle keep-alive connection: closed after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_read_timeout_counts_from_the_end_of_the_last_call_never_during_one() {
    let timeout = Duration::from_millis(600);
    let (server, _metrics) = server(ConnectionLimits { header_read_timeout: timeout, ..ConnectionLimits::default() });
    let (addr, _task) = listen(server).await;
    let mut s = connect(addr).await;
    // Calls 250 ms apart for three timeouts: each head comes in time, so the connection is never
    // closed, however the timeouts fall between the calls.
    let start = Instant::now();
    let mut calls = 0;
    while start.elapsed() < timeout * 3 {
        s.write_all(&post(addr, None)).await.expect("write");
        assert_eq!(read_answer(&mut s).await.expect("an answer on the kept connection").status, 200, "call {calls}");
        calls += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(calls >= 5, "{calls} calls");
    // A call longer than the timeout is answered, on the same connection: the timeout is for
    // heads, not for calls.
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"nap","params":[1000]}"#;
    let mut request = post_head(addr, None, body.len());
    request.extend_from_slice(body);
    s.write_all(&request).await.expect("write");
    let answer = read_answer(&mut s).await.expect("the long call's answer");
    assert_eq!(answer.status, 200);
    assert!(String::from_utf8_lossy(&answer.body).contains("rested"), "{answer:?}");
    // Then the connection waits for a head again, and is closed a timeout after that answer.
    let answered = Instant::now();
    let took = closed_after(&mut s, answered).await;
    assert!(took >= timeout - Duration::from_millis(250) && took < Duration::from_secs(3), "idle after a long call: closed after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_begun_before_the_shutdown_is_still_timed_so_serve_http_returns() {
    let timeout = Duration::from_millis(400);
    let shutdown = Shutdown::new();
    let server = RpcServer::new(Probe::new()).shutdown_on(shutdown.clone()).connection_limits(ConnectionLimits { header_read_timeout: timeout, shutdown_grace: None, ..ConnectionLimits::default() });
    let (addr, task) = listen(server).await;
    // Half a first head, then silence: hyper waits for the rest even once asked to stop.
    let mut half = connect(addr).await;
    half.write_all(format!("POST /rpc HTTP/1.1\r\nHost: {addr}\r\n").as_bytes()).await.expect("write");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let start = Instant::now();
    shutdown.trigger();
    tokio::time::timeout(STEP, task).await.expect("serve_http returns once the half head has timed out").expect("the serving task").expect("serve_http ends cleanly");
    assert!(start.elapsed() < Duration::from_secs(3), "serve_http returned after {:?}", start.elapsed());
    closed(&mut half).await.expect("the half head's connection is closed, unanswered");
}

// ---------------------------------------------------------------------------------------------
// Request bodies
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_without_room_in_the_budget_is_refused_503_busy_and_served_once_room_is_given_back() {
    let wait = Duration::from_millis(200);
    let (server, _metrics) = server(ConnectionLimits { max_buffered_body_bytes: 1000, body_room_wait: wait, body_read_timeout: STEP, ..ConnectionLimits::default() });
    let (addr, _task) = listen(server).await;
    let body = echo_body(900);
    let mut whole = post_head(addr, None, body.len());
    whole.extend_from_slice(&body);
    // A body of 900 bytes declared, half of it sent: its room is taken, the rest awaited.
    let mut holder = connect(addr).await;
    holder.write_all(&post_head(addr, None, body.len())).await.expect("write");
    holder.write_all(&body[..450]).await.expect("write");
    // Another 900 bytes find 100 free: refused once they have waited for room. (Until the
    // holder's head is read, the other may still find room: it is then served and tried again.)
    let deadline = Instant::now() + STEP;
    let (refused, waited) = loop {
        let start = Instant::now();
        let a = exchange(&mut connect(addr).await, &whole).await;
        if a.status != 200 || Instant::now() > deadline {
            break (a, start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(refused.status, 503, "a body past the budget: {}", refused.head);
    assert_eq!(refused.error_code(), codes::BUSY);
    assert!(waited >= wait - Duration::from_millis(50), "refused after waiting for room, not at once: {waited:?}");
    // The budget counts bytes: a small body fits in what is left.
    exchange(&mut connect(addr).await, &post(addr, None)).await.assert_echoed();
    // The holder's body completes and is served; its room is given back with its answer.
    holder.write_all(&body[450..]).await.expect("write");
    read_answer(&mut holder).await.expect("the holder's answer").assert_echoed();
    exchange(&mut connect(addr).await, &whole).await.assert_echoed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_not_sent_within_the_body_read_timeout_is_refused_408() {
    let timeout = Duration::from_millis(300);
    let (server, _metrics) = server(ConnectionLimits { body_read_timeout: timeout, ..ConnectionLimits::default() });
    let (addr, _task) = listen(server).await;
    let body = echo_body(100);
    let mut s = connect(addr).await;
    let start = Instant::now();
    s.write_all(&post_head(addr, None, body.len())).await.expect("write");
    s.write_all(&body[..10]).await.expect("write");
    let a = read_answer(&mut s).await.expect("an answer");
    let took = start.elapsed();
    assert_eq!(a.status, 408, "{}", a.head);
    assert_eq!(a.error_code(), codes::TIMEOUT);
    assert!(took >= timeout - Duration::from_millis(50) && took < Duration::from_secs(3), "answered after {took:?}");
    // A body that arrives in time on a new connection is served.
    let mut whole = post_head(addr, None, body.len());
    whole.extend_from_slice(&body);
    exchange(&mut connect(addr).await, &whole).await.assert_echoed();
}

// ---------------------------------------------------------------------------------------------
// The lingering read of a body refused unread
// ---------------------------------------------------------------------------------------------

/// As a plain script does on a blocking socket: writes `request` whole, then reads the answer.
/// `Err` says what happened instead (the write or the read failed).
fn plain_exchange(addr: SocketAddr, request: &[u8]) -> Result<(u16, Vec<u8>), String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(STEP)).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(STEP)).map_err(|e| e.to_string())?;
    s.write_all(request).map_err(|e| format!("the write failed: {e}"))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(a) = parse_answer(&buf) {
            return Ok((a.status, a.body));
        }
        match s.read(&mut chunk) {
            Ok(0) => return Err(format!("closed after {} bytes", buf.len())),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("the read failed: {e} after {} bytes", buf.len())),
        }
    }
}

/// A `POST /rpc` with a token the server refuses and a body of `len` bytes, written whole.
fn refused_upload(addr: SocketAddr, len: usize) -> Vec<u8> {
    let mut request = post_head(addr, Some("wrong-token"), len);
    request.extend_from_slice(&echo_body(len));
    request
}

/// The largest body the lingering-read tests write (under the 16 MiB frame bound): about three
/// times what a loopback connection buffers here (a 2 MiB body fits in the sockets' buffers,
/// and is answered even without the lingering read), so the server must read it for the write
/// to finish.
const UPLOAD: usize = 12 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_refused_unread_is_read_and_dropped_so_the_client_reads_the_refusal() {
    let server = RpcServer::new(Probe::new()).authenticator(tokens);
    let (addr, _task) = listen(server).await;
    for len in [2 << 20, UPLOAD] {
        let (status, body) = tokio::task::spawn_blocking(move || plain_exchange(addr, &refused_upload(addr, len))).await.expect("the client thread").unwrap_or_else(|e| panic!("a {len}-byte upload with a refused token: {e}"));
        let a = Answer { status, head: String::new(), body };
        assert_eq!((a.status, a.error_code()), (401, codes::UNAUTHORIZED), "a {len}-byte upload");
    }
    exchange(&mut connect(addr).await, &post(addr, Some("secret-token"))).await.assert_echoed();
}

/// The control of the test above: without the lingering read (its time cut to nothing), the
/// same client gets a reset or a failed write instead of the 401, so the test above sees what
/// the lingering read does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_lingering_read_the_same_client_gets_no_refusal() {
    let linger = Linger { timeout: Duration::ZERO, idle: Duration::ZERO, max_bytes: 0 };
    let server = RpcServer::new(Probe::new()).authenticator(tokens).connection_limits(ConnectionLimits { linger, ..ConnectionLimits::default() });
    let (addr, _task) = listen(server).await;
    let outcome = tokio::task::spawn_blocking(move || plain_exchange(addr, &refused_upload(addr, UPLOAD))).await.expect("the client thread");
    assert!(outcome.is_err(), "without the lingering read the client should not read the refusal: {outcome:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_body_still_arriving_is_not_timed_as_a_head_yet_keeps_no_place() {
    let timeout = Duration::from_millis(300);
    let server = RpcServer::new(Probe::new()).authenticator(tokens).connection_limits(ConnectionLimits { header_read_timeout: timeout, max_connections_per_peer: 1, ..ConnectionLimits::default() });
    let (addr, _task) = listen(server).await;
    // A refused upload, its body still coming after the refusal.
    let mut uploader = connect(addr).await;
    uploader.write_all(&post_head(addr, Some("wrong-token"), 1 << 20)).await.expect("write");
    uploader.write_all(&[b' '; 1024]).await.expect("write");
    assert_eq!(read_answer(&mut uploader).await.expect("the refusal").status, 401);
    // The body keeps coming for three header timeouts: the connection is reading it out, not
    // waiting for a head, so it is not closed.
    for _ in 0..9 {
        uploader.write_all(&[b' '; 16]).await.expect("the body's bytes are taken");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(still_open(&mut uploader).await, "the connection reading out a refused body was closed");
    // But it has not authenticated: a newcomer past the cap takes its place.
    let mut newcomer = connect(addr).await;
    exchange(&mut newcomer, &post(addr, Some("secret-token"))).await.assert_echoed();
    closed(&mut uploader).await.expect("the refused upload's connection gives its place");
}

// ---------------------------------------------------------------------------------------------
// A client that never reads
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_disconnected_after_the_write_stall_timeout() {
    let stall = Duration::from_millis(300);
    let (server, metrics) = server(ConnectionLimits { write_stall_timeout: stall, ..ConnectionLimits::default() });
    let (addr, _task) = listen(server).await;
    // 32 pipelined calls of a 1 MiB answer each: far more than the sockets buffer.
    let (calls, size) = (32, 1 << 20);
    let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"big","params":[{size}]}}"#);
    let mut requests = Vec::new();
    for _ in 0..calls {
        requests.extend_from_slice(&post_head(addr, None, body.len()));
        requests.extend_from_slice(body.as_bytes());
    }
    let mut s = connect(addr).await;
    wait_until("the connection to be counted", || http_connections(&metrics) == 1).await;
    let start = Instant::now();
    s.write_all(&requests).await.expect("the requests are written");
    // The client reads nothing: the server's writes stall, and it closes the connection.
    wait_until("the stalled connection to be closed", || http_connections(&metrics) == 0).await;
    let took = start.elapsed();
    assert!(took >= stall - Duration::from_millis(50) && took < Duration::from_secs(4), "closed after {took:?}");
    // What had been sent before the stall can still be read, then the connection ends, short
    // of the answers asked for.
    let mut read = 0usize;
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        match tokio::time::timeout(STEP, s.read(&mut chunk)).await.expect("the connection ends in time") {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
    assert!(read < calls * size, "{read} bytes read: the server gave up on the client before answering every call");
}

// ---------------------------------------------------------------------------------------------
// Shutdown
// ---------------------------------------------------------------------------------------------

/// A server of [`Probe`] on `shutdown` with `grace`, a call to `sleep` stuck in flight on it, the
/// serving task and the caller's connection.
async fn stuck_call(grace: Option<Duration>, shutdown: &Shutdown) -> (tokio::task::JoinHandle<std::io::Result<()>>, TcpStream) {
    let probe = Probe::new();
    let server = RpcServer::new(probe.clone()).shutdown_on(shutdown.clone()).connection_limits(ConnectionLimits { shutdown_grace: grace, ..ConnectionLimits::default() });
    let (addr, task) = listen(server).await;
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"sleep"}"#;
    let mut s = connect(addr).await;
    s.write_all(&post_head(addr, None, body.len())).await.expect("write");
    s.write_all(body).await.expect("write");
    probe.sleeping(1).await;
    (task, s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shutdown_grace_bounds_how_long_a_stuck_call_holds_serve_http() {
    let grace = Duration::from_millis(200);
    let shutdown = Shutdown::new();
    let (task, mut caller) = stuck_call(Some(grace), &shutdown).await;
    let start = Instant::now();
    shutdown.trigger();
    tokio::time::timeout(Duration::from_secs(2), task).await.expect("serve_http returns within 2 s of the shutdown").expect("the serving task").expect("serve_http ends cleanly");
    let took = start.elapsed();
    assert!(took >= grace - Duration::from_millis(50), "serve_http waited for the grace first: {took:?}");
    closed(&mut caller).await.expect("the stuck call's connection is closed, unanswered");
}

/// The control of the test above: without a grace, `serve_http` waits for the stuck call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_shutdown_grace_serve_http_waits_for_the_call_in_flight() {
    let shutdown = Shutdown::new();
    let (mut task, mut caller) = stuck_call(None, &shutdown).await;
    shutdown.trigger();
    assert!(tokio::time::timeout(Duration::from_millis(700), &mut task).await.is_err(), "serve_http still waits for the call in flight");
    assert!(still_open(&mut caller).await, "the call's connection is still open");
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_that_has_not_authenticated_is_closed_when_a_newcomer_takes_its_place() {
    let (server, metrics) = server(ConnectionLimits { max_connections_per_peer: 1, ..ConnectionLimits::default() });
    let (addr, _task) = listen(server).await;
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/rpc")).await.expect("the WebSocket opens");
    wait_until("the WebSocket's connection to be counted", || http_connections(&metrics) == 1).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    // The address's only place is the idle, unauthenticated WebSocket's: a newcomer takes it…
    let mut newcomer = connect(addr).await;
    exchange(&mut newcomer, &post(addr, None)).await.assert_echoed();
    // …so the WebSocket is closed, and the address holds one connection.
    let next = tokio::time::timeout(Duration::from_secs(1), ws.next()).await;
    assert!(
        matches!(next, Ok(None | Some(Err(_)) | Some(Ok(Message::Close(_))))),
        "the WebSocket whose place was taken is still open ({next:?}); the server counts {} HTTP connections against a per-peer cap of 1",
        http_connections(&metrics)
    );
    // And more WebSockets than the cap are never open at once.
    let mut more = Vec::new();
    for _ in 0..3 {
        more.push(tokio_tungstenite::connect_async(format!("ws://{addr}/rpc")).await.expect("the WebSocket opens").0);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(http_connections(&metrics) <= 1, "{} connections open against a per-peer cap of 1", http_connections(&metrics));
}

// ---------------------------------------------------------------------------------------------
// What keeps a connection's place
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_with_a_call_in_flight_is_never_evicted() {
    let probe = Probe::new();
    let metrics = Metrics::new();
    let server = RpcServer::new(probe.clone()).metrics(metrics.clone()).connection_limits(ConnectionLimits { max_connections_per_peer: 1, ..ConnectionLimits::default() });
    let (addr, _task) = listen(server).await;
    let mut busy = connect(addr).await;
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"sleep"}"#;
    let mut request = post_head(addr, None, body.len());
    request.extend_from_slice(body);
    busy.write_all(&request).await.expect("the request is written");
    probe.sleeping(1).await;
    // The peer's only place is held by a connection whose call runs (and whose reads wait for
    // nothing): a newcomer is refused (503) instead of cutting the call off.
    tokio::time::sleep(Duration::from_millis(30)).await;
    let mut newcomer = connect(addr).await;
    refused(&mut newcomer).await.expect("the newcomer is refused");
    assert!(still_open(&mut busy).await, "the connection with a call in flight keeps its place");
    assert_eq!(http_connections(&metrics), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authenticated_event_stream_keeps_its_place() {
    let log = openagents_rpc::events::EventLog::new(16);
    let metrics = Metrics::new();
    let limits = ConnectionLimits { max_connections_per_peer: 1, ..ConnectionLimits::default() };
    let server = RpcServer::new(Probe::new()).authenticator(tokens).metrics(metrics.clone()).events(log.clone()).connection_limits(limits);
    let (addr, _task) = listen(server).await;
    let mut stream = connect(addr).await;
    stream.write_all(format!("GET /events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer secret-token\r\n\r\n").as_bytes()).await.expect("writes");
    let mut buf = [0u8; 4096];
    let n = tokio::time::timeout(STEP, stream.read(&mut buf)).await.expect("the stream starts").expect("reads");
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf[..n]));
    tokio::time::sleep(Duration::from_millis(30)).await;
    let mut newcomer = connect(addr).await;
    refused(&mut newcomer).await.expect("the newcomer is refused");
    log.publish("tick", &1);
    let n = tokio::time::timeout(STEP, stream.read(&mut buf)).await.expect("the event in time").expect("reads");
    assert!(String::from_utf8_lossy(&buf[..n]).contains("event: tick"), "the stream still delivers: {}", String::from_utf8_lossy(&buf[..n]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caps_hold_when_the_handler_keeps_nothing_of_what_was_accepted() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("an address");
    let shutdown = Shutdown::new();
    let limits = ConnectionLimits { max_connections_per_peer: 1, ..ConnectionLimits::default() };
    let stop = shutdown.clone();
    let task = tokio::spawn(async move {
        openagents_rpc::listen::serve_connections(listener, &limits, stop, |_accepted| {
            |_request| async { Ok::<_, std::convert::Infallible>(hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from_static(b"hello")))) }
        })
        .await;
    });
    let mut first = connect(addr).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    let mut second = connect(addr).await;
    second.write_all(format!("GET / HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes()).await.expect("writes");
    let mut buf = [0u8; 256];
    let n = tokio::time::timeout(STEP, second.read(&mut buf)).await.expect("an answer").expect("reads");
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    closed(&mut first).await.expect("past the per-peer cap of 1, the idle first connection made room");
    shutdown.trigger();
    tokio::time::timeout(STEP, task).await.expect("the loop ends").expect("task");
}
