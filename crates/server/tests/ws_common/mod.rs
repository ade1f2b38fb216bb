//! Support for the `/frontend/v2` WebSocket tests: real tokio-tungstenite clients with a
//! selective-receive mailbox, a raw HTTP/1.1 client for `POST /rpc`, an SSE reader for
//! `GET /events`, a scripted in-process agent, and the `ask` runner binary.
//!
//! Every wait is for an observable message and is bounded by [`STEP`]; nothing sleeps to wait
//! for readiness.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use openagents_protocol::{ErrorCode, Turn};
use openagents_runner::{Registry, RunnerHost};
use openagents_server::agent::error;
use openagents_server::{Caller, EngineConfig, FnAgent, Grant, RpcEngine, RunnerAgent, RuntimeHttpCredential, RuntimeSubmitError, TurnContext, run_http_authorized};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinHandle;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{self, Message};

/// The longest any single step (a message, a response, a close) may take.
pub const STEP: Duration = Duration::from_secs(5);

/// The approval timeout of tests that let a request time out.
pub const SHORT: Duration = Duration::from_millis(300);

/// `engine` served by `run_http_authorized` (with [`credentials`]) on 127.0.0.1:0: its address.
pub async fn http_runtime(engine: &RpcEngine) -> SocketAddr {
    run_http_authorized(engine.clone(), "127.0.0.1:0", credentials()).await.expect("the HTTP listener binds")
}

/// A [`script_engine`] with `approval_timeout` served by [`http_runtime`]: the engine and its
/// address.
pub async fn scripted_http(approval_timeout: Duration) -> (RpcEngine, SocketAddr) {
    let engine = script_engine(approval_timeout);
    let addr = http_runtime(&engine).await;
    (engine, addr)
}

/// [`scripted_http`] with alice and bob subscribed on its WebSocket, in that order.
pub async fn alice_and_bob(approval_timeout: Duration) -> (RpcEngine, SocketAddr, Ws, Ws) {
    let (engine, addr) = scripted_http(approval_timeout).await;
    let (alice, _) = subscribed(addr, ALICE, None).await;
    let (bob, _) = subscribed(addr, BOB, None).await;
    (engine, addr, alice, bob)
}

/// A turn waiting for alice's answer: see [`asked`].
pub struct Asked {
    /// The scripted engine.
    pub engine: RpcEngine,
    /// Its `run_http_authorized` address.
    pub addr: SocketAddr,
    /// Alice, subscribed on the WebSocket.
    pub alice: Ws,
    /// The turn `ask:deploy_now`, submitted in process.
    pub turn: JoinHandle<Result<Value, Value>>,
    /// The approval request alice received for it.
    pub req: Value,
}

/// A [`script_engine`] with `approval_timeout` served by [`http_runtime`], alice subscribed,
/// and the turn `ask:deploy_now` submitted, once alice has its approval request.
pub async fn asked(approval_timeout: Duration) -> Asked {
    let (engine, addr) = scripted_http(approval_timeout).await;
    let (mut alice, _) = subscribed(addr, ALICE, None).await;
    let turn = submit(&engine, "ask:deploy_now");
    let req = alice.approval_request().await;
    Asked { engine, addr, alice, turn, req }
}

/// Awaits `fut`, failing the test with `what` if it takes longer than [`STEP`].
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(STEP, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {STEP:?} waiting for {what}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Credentials
// ---------------------------------------------------------------------------------------------

/// May do everything, answers approvals.
pub const ADMIN: &str = "tok-admin";
/// A controller named `alice`: answers approvals.
pub const ALICE: &str = "tok-alice";
/// A controller named `bob`: answers approvals.
pub const BOB: &str = "tok-bob";
/// An observer named `watcher`: events, no approvals.
pub const WATCHER: &str = "tok-watcher";
/// `blind`: may call `status` and `subscribe` but has no events grant.
pub const BLIND: &str = "tok-blind";
/// `nosub`: events, but `subscribe` is not among its methods.
pub const NOSUB: &str = "tok-nosub";

/// The credentials every test runtime serves.
pub fn credentials() -> Vec<RuntimeHttpCredential> {
    let exact = |methods: &[&str], events: bool| Grant { methods: methods.iter().map(|m| (*m).to_owned()).collect(), events, approvals: false, metrics: false };
    vec![
        RuntimeHttpCredential::new("admin", ADMIN, Grant::admin()),
        RuntimeHttpCredential::new("alice", ALICE, Grant::controller()),
        RuntimeHttpCredential::new("bob", BOB, Grant::controller()),
        RuntimeHttpCredential::new("watcher", WATCHER, Grant::observer()),
        RuntimeHttpCredential::new("blind", BLIND, exact(&["status", "subscribe"], false)),
        RuntimeHttpCredential::new("nosub", NOSUB, exact(&["status"], true)),
    ]
}

// ---------------------------------------------------------------------------------------------
// The scripted agent and the `ask` runner
// ---------------------------------------------------------------------------------------------

/// Runs a turn whose task is a script of space-separated steps:
/// - `burst:N` publishes N text events `t0`…;
/// - `big:N:K` publishes N text events of K bytes each;
/// - `ask:PROMPT` asks for approval (`PROMPT` with `_` for spaces) and records the decision;
/// - `wait` waits for an interrupt or shutdown, then fails `interrupted`;
/// - any other word is published as a text event.
///
/// The result is the recorded decisions (`approved=true answer=go`, `;`-separated), or `done`.
async fn script(turn: Turn, ctx: TurnContext) -> Result<String, RuntimeSubmitError> {
    let mut decisions = Vec::new();
    for step in turn.task.split_whitespace() {
        let mut parts = step.split(':');
        match parts.next().unwrap_or_default() {
            "burst" => {
                let n: usize = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
                for i in 0..n {
                    ctx.text(format!("t{i}"));
                }
            }
            "big" => {
                let n: usize = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
                let k: usize = parts.next().and_then(|n| n.parse().ok()).unwrap_or(1024);
                let body = "x".repeat(k);
                for _ in 0..n {
                    ctx.text(body.clone());
                }
            }
            "ask" => {
                let prompt = parts.next().unwrap_or("may_I?").replace('_', " ");
                let d = ctx.request_approval(prompt).await;
                decisions.push(match d.answer {
                    Some(a) => format!("approved={} answer={a}", d.approved),
                    None => format!("approved={}", d.approved),
                });
            }
            "wait" => {
                ctx.cancelled().cancelled().await;
                return Err(error(ErrorCode::Interrupted, "stopped while waiting"));
            }
            word => ctx.text(word),
        }
    }
    Ok(if decisions.is_empty() { "done".into() } else { decisions.join(";") })
}

/// An engine driving the scripted agent, with `approval_timeout` for approval requests.
pub fn script_engine(approval_timeout: Duration) -> RpcEngine {
    let config = EngineConfig { default_runner: Some("script".into()), ..EngineConfig::default() };
    let engine = RpcEngine::with_config(FnAgent(|turn: Turn, ctx: TurnContext| async move { script(turn, ctx).await }), config);
    engine.bridge().set_timeout(approval_timeout);
    engine
}

/// The `ask` example runner, built next to this crate's test binaries.
pub fn ask_runner() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/openagents-runner-ask");
    assert!(
        path.is_file(),
        "the `ask` runner is missing at {}: build it with `cargo build -p openagents-runner --bin openagents-runner-ask`",
        path.display()
    );
    path.canonicalize().unwrap_or(path)
}

/// An engine whose default runner is the real `ask` runner binary.
pub fn ask_engine(approval_timeout: Duration) -> RpcEngine {
    let registry = format!("[runners.ask]\ncommand = \"{}\"\ntimeout_s = 20\n", ask_runner().display());
    let registry = Registry::parse(&registry, None).expect("the test registry parses");
    let config = EngineConfig { default_runner: Some("ask".into()), ..EngineConfig::default() };
    let engine = RpcEngine::with_config(RunnerAgent::new(RunnerHost::new(registry)), config);
    engine.bridge().set_timeout(approval_timeout);
    engine
}

/// Submits `task` in process as the trusted parent; resolves to the result or the typed error.
pub fn submit(engine: &RpcEngine, task: &str) -> JoinHandle<Result<Value, Value>> {
    let engine = engine.clone();
    let body = json!({"id": "in-process", "method": "submit", "params": {"task": task}}).to_string();
    tokio::spawn(async move {
        let reply = engine.handle(&Caller::stdio(), body.as_bytes()).await;
        match reply.outcome {
            Ok(bytes) => Ok(serde_json::from_slice(&bytes).expect("a submit result is JSON")),
            Err(e) => Err(serde_json::to_value(e).expect("an error encodes")),
        }
    })
}

/// Awaits an in-process submit.
pub async fn finished(turn: JoinHandle<Result<Value, Value>>) -> Result<Value, Value> {
    within("the turn to end", turn).await.expect("the submit task does not panic")
}

// ---------------------------------------------------------------------------------------------
// WebSocket clients
// ---------------------------------------------------------------------------------------------

/// How a client authenticates its upgrade.
#[derive(Debug, Clone, Copy)]
pub enum Auth<'a> {
    /// `Authorization: Bearer <token>`.
    Header(&'a str),
    /// `Sec-WebSocket-Protocol: openagents.v2, openagents.bearer.<token>`.
    Protocol(&'a str),
    /// Nothing.
    None,
}

/// The upgrade request for `path` on `addr`.
pub fn request(addr: SocketAddr, path: &str, auth: Auth<'_>) -> tungstenite::handshake::client::Request {
    let mut req = format!("ws://{addr}{path}").into_client_request().expect("a valid ws URL");
    match auth {
        Auth::Header(t) => {
            req.headers_mut().insert("authorization", HeaderValue::from_str(&format!("Bearer {t}")).expect("header"));
        }
        Auth::Protocol(t) => {
            req.headers_mut().insert("sec-websocket-protocol", HeaderValue::from_str(&format!("openagents.v2, openagents.bearer.{t}")).expect("header"));
        }
        Auth::None => {}
    }
    req
}

/// A successful upgrade: the socket, the status and the subprotocol the server chose.
pub struct Upgraded {
    pub ws: Ws,
    pub status: u16,
    pub protocol: Option<String>,
}

/// Connects with `auth` on `path`: the upgrade, or the HTTP status and body of the refusal.
pub async fn try_connect(addr: SocketAddr, path: &str, auth: Auth<'_>) -> Result<Upgraded, (u16, String)> {
    try_connect_with(addr, request(addr, path, auth), None).await
}

/// [`try_connect`] with an explicit request and, optionally, a small client receive buffer (so
/// a client that stops reading pushes back on the server quickly).
pub async fn try_connect_with(addr: SocketAddr, req: tungstenite::handshake::client::Request, recv_buffer: Option<u32>) -> Result<Upgraded, (u16, String)> {
    let socket = TcpSocket::new_v4().expect("a socket");
    if let Some(size) = recv_buffer {
        socket.set_recv_buffer_size(size).expect("SO_RCVBUF");
    }
    let stream = within("the TCP connection", socket.connect(addr)).await.expect("the listener accepts");
    match within("the WebSocket handshake", tokio_tungstenite::client_async(req, stream)).await {
        Ok((ws, response)) => {
            let protocol = response.headers().get("sec-websocket-protocol").and_then(|v| v.to_str().ok()).map(str::to_owned);
            Ok(Upgraded { ws: Ws::new(ws), status: response.status().as_u16(), protocol })
        }
        Err(tungstenite::Error::Http(response)) => {
            let body = response.body().as_ref().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
            Err((response.status().as_u16(), body))
        }
        Err(e) => panic!("the handshake failed without an HTTP answer: {e}"),
    }
}

/// Connects from the loopback address `local` (another peer than 127.0.0.1, as far as the
/// server's per-peer cap is concerned) and upgrades with `token`; `None` when the connection is
/// closed without an upgrade.
pub async fn connect_from(addr: SocketAddr, local: std::net::Ipv4Addr, token: &str) -> Option<Ws> {
    let socket = TcpSocket::new_v4().expect("a socket");
    socket.bind(SocketAddr::from((local, 0))).expect("binds a loopback address");
    let stream = within("the TCP connection", socket.connect(addr)).await.ok()?;
    let (ws, _) = within("the WebSocket handshake", tokio_tungstenite::client_async(request(addr, "/frontend/v2", Auth::Header(token)), stream)).await.ok()?;
    Some(Ws::new(ws))
}

/// Connects and upgrades with `Authorization: Bearer <token>`.
pub async fn connect(addr: SocketAddr, token: &str) -> Ws {
    match try_connect(addr, "/frontend/v2", Auth::Header(token)).await {
        Ok(u) => u.ws,
        Err((status, body)) => panic!("the upgrade was refused: {status} {body}"),
    }
}

/// Connects and subscribes (new events only when `since` is `None`); returns the socket and
/// the `last_seq` the subscription answered.
pub async fn subscribed(addr: SocketAddr, token: &str, since: Option<i64>) -> (Ws, i64) {
    let mut ws = connect(addr, token).await;
    let last = ws.subscribe(since).await;
    (ws, last)
}

/// What a read produced.
#[derive(Debug)]
pub enum Incoming {
    /// A JSON text message.
    Json(Value),
    /// A close frame (code and reason), or `None` when the stream ended without one.
    Closed(Option<(u16, String)>),
}

/// A WebSocket client with a mailbox: messages read while waiting for something else are kept,
/// in order, for later receives.
pub struct Ws {
    inner: WebSocketStream<TcpStream>,
    stash: VecDeque<Value>,
    closed: Option<Option<(u16, String)>>,
    next_id: u64,
}

impl Ws {
    fn new(inner: WebSocketStream<TcpStream>) -> Self {
        Ws { inner, stash: VecDeque::new(), closed: None, next_id: 0 }
    }

    /// Sends a JSON message as one text frame.
    pub async fn send(&mut self, v: &Value) {
        self.send_text(v.to_string()).await;
    }

    /// Sends each message as a text frame of its own, all in one write: the frames are queued
    /// in the client's buffer and flushed together, so the server may read them back to back.
    pub async fn send_burst(&mut self, messages: &[Value]) {
        for m in messages {
            within("a queued send", self.inner.feed(Message::text(m.to_string()))).await.expect("the frame is queued");
        }
        within("a flush", self.inner.flush()).await.expect("the frames are sent");
    }

    /// Sends a raw text frame.
    pub async fn send_text(&mut self, text: String) {
        within("a send", self.inner.send(Message::text(text))).await.expect("the frame is sent");
    }

    /// Sends any message (a binary frame, a raw frame…).
    pub async fn send_message(&mut self, m: Message) -> Result<(), tungstenite::Error> {
        within("a send", self.inner.send(m)).await
    }

    /// Reads the next message off the socket (not the mailbox).
    async fn read(&mut self, what: &str) -> Incoming {
        if let Some(c) = &self.closed {
            return Incoming::Closed(c.clone());
        }
        loop {
            let next = within(what, self.inner.next()).await;
            let incoming = match next {
                Some(Ok(Message::Text(t))) => Incoming::Json(serde_json::from_str(t.as_str()).unwrap_or_else(|e| panic!("not JSON ({e}): {t}"))),
                Some(Ok(Message::Close(frame))) => Incoming::Closed(frame.map(|f| (u16::from(f.code), f.reason.to_string()))),
                Some(Ok(Message::Binary(_))) => panic!("the server sent a binary frame"),
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => Incoming::Closed(None),
            };
            if let Incoming::Closed(c) = &incoming {
                self.closed = Some(c.clone());
            }
            return incoming;
        }
    }

    /// The first message (mailbox first) matching `pred`; the others stay in the mailbox.
    pub async fn expect(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.stash.iter().position(&pred) {
            return self.stash.remove(i).expect("the index exists");
        }
        loop {
            match self.read(what).await {
                Incoming::Json(v) if pred(&v) => return v,
                Incoming::Json(v) => self.stash.push_back(v),
                Incoming::Closed(c) => panic!("the connection closed ({c:?}) while waiting for {what}; unread: {:?}", self.stash),
            }
        }
    }

    /// The next message, mailbox first.
    pub async fn recv(&mut self) -> Incoming {
        match self.stash.pop_front() {
            Some(v) => Incoming::Json(v),
            None => self.read("the next message").await,
        }
    }

    /// Sends a JSON-RPC 2.0 request and returns its response (matched by id).
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = format!("c{}", self.next_id);
        let mut req = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            req["params"] = params;
        }
        self.send(&req).await;
        self.expect(&format!("the response to `{method}`"), |v| is_response(v) && v["id"] == json!(id)).await
    }

    /// Calls `subscribe` and returns `last_seq`.
    pub async fn subscribe(&mut self, since: Option<i64>) -> i64 {
        let params = match since {
            Some(s) => json!({"since": s}),
            None => json!({}),
        };
        let r = self.call("subscribe", params).await;
        r["result"]["last_seq"].as_i64().unwrap_or_else(|| panic!("subscribe failed: {r}"))
    }

    /// The next `frontend.v2.event` notification's params (the `ServerEvent`).
    pub async fn event(&mut self) -> Value {
        let n = self.expect("an event", |v| v["method"] == "frontend.v2.event").await;
        n["params"].clone()
    }

    /// Events up to and including the first whose type is one of `until`.
    pub async fn events_until(&mut self, until: &[&str]) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let ev = self.event().await;
            let done = until.contains(&event_type(&ev));
            out.push(ev);
            if done {
                return out;
            }
        }
    }

    /// The next `frontend.v2.approval` request.
    pub async fn approval_request(&mut self) -> Value {
        self.expect("an approval request", |v| v["method"] == "frontend.v2.approval").await
    }

    /// Answers approval request `id`.
    pub async fn answer(&mut self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result})).await;
    }

    /// Reads until the close frame; returns its code and reason. Messages read meanwhile stay
    /// in the mailbox.
    pub async fn close_frame(&mut self) -> (u16, String) {
        loop {
            match self.read("the close frame").await {
                Incoming::Json(v) => self.stash.push_back(v),
                Incoming::Closed(Some(c)) => return c,
                Incoming::Closed(None) => panic!("the connection ended without a close frame; unread: {:?}", self.stash),
            }
        }
    }

    /// The messages read but not consumed, in order.
    pub fn unread(&self) -> &VecDeque<Value> {
        &self.stash
    }

    /// Takes the unread messages.
    pub fn take_unread(&mut self) -> Vec<Value> {
        self.stash.drain(..).collect()
    }

    /// The raw stream (for tests that drive frames themselves).
    pub fn into_inner(self) -> WebSocketStream<TcpStream> {
        self.inner
    }
}

/// Whether `v` is a JSON-RPC response (an id and a result or an error, no method).
pub fn is_response(v: &Value) -> bool {
    v.get("method").is_none() && v.get("id").is_some() && (v.get("result").is_some() || v.get("error").is_some())
}

/// An event's `type`.
pub fn event_type(ev: &Value) -> &str {
    ev["event"]["type"].as_str().unwrap_or("?")
}

/// The types of `events`, in order.
pub fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(event_type).collect()
}

/// The events' `seq`s, in order.
pub fn seqs(events: &[Value]) -> Vec<i64> {
    events.iter().map(|e| e["seq"].as_i64().unwrap_or_else(|| panic!("an event without seq: {e}"))).collect()
}

/// Checks every event has a `seq` and that they increase one by one.
pub fn assert_contiguous(events: &[Value], first: i64) {
    let got = seqs(events);
    let want: Vec<i64> = (first..first + got.len() as i64).collect();
    assert_eq!(got, want, "events must arrive once each, in order, without gaps");
}

/// The only event of type `kind` among `events`.
pub fn only<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = events.iter().filter(|e| event_type(e) == kind).collect();
    assert_eq!(found.len(), 1, "exactly one `{kind}` event expected in {:?}", types(events));
    &found[0]["event"]
}

/// The typed error code of a JSON-RPC error response.
pub fn error_code(response: &Value) -> &str {
    response["error"]["data"]["code"].as_str().unwrap_or_else(|| panic!("not a typed error response: {response}"))
}

// ---------------------------------------------------------------------------------------------
// HTTP: POST /rpc and GET /events
// ---------------------------------------------------------------------------------------------

/// A raw HTTP/1.1 exchange (`Connection: close`): the status, the lowercased head, the body.
pub async fn http(addr: SocketAddr, method: &str, path: &str, token: Option<&str>, body: &str) -> (u16, String, String) {
    let mut s = within("an HTTP connection", TcpStream::connect(addr)).await.expect("the listener accepts");
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.expect("the request is written");
    let mut raw = Vec::new();
    within("an HTTP response", s.read_to_end(&mut raw)).await.expect("the response is read");
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_owned())
}

/// `POST /rpc` with `token`: the status and the JSON body.
pub async fn rpc(addr: SocketAddr, token: &str, request: &Value) -> (u16, Value) {
    let (status, _, body) = http(addr, "POST", "/rpc", Some(token), &request.to_string()).await;
    (status, serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}")))
}

/// A `GET /events` stream.
pub struct Sse {
    reader: BufReader<TcpStream>,
    text: String,
}

impl Sse {
    /// Opens `GET /events?since=<since>` with `token`.
    pub async fn open(addr: SocketAddr, token: &str, since: i64) -> Sse {
        let mut s = within("an SSE connection", TcpStream::connect(addr)).await.expect("the listener accepts");
        let req = format!("GET /events?since={since} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n");
        s.write_all(req.as_bytes()).await.expect("the request is written");
        let mut reader = BufReader::new(s);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            within("the SSE head", reader.read_line(&mut line)).await.expect("the head is read");
            if line == "\r\n" || line.is_empty() {
                break;
            }
            head.push_str(&line);
        }
        assert!(head.starts_with("HTTP/1.1 200"), "GET /events: {head}");
        assert!(head.to_ascii_lowercase().contains("transfer-encoding: chunked"), "GET /events is chunked: {head}");
        Sse { reader, text: String::new() }
    }

    async fn chunk(&mut self) {
        let mut size = String::new();
        within("an SSE chunk", self.reader.read_line(&mut size)).await.expect("a chunk size");
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or_else(|_| panic!("not a chunk size: {size:?}"));
        assert!(n > 0, "the event stream ended");
        let mut data = vec![0; n + 2];
        within("an SSE chunk", self.reader.read_exact(&mut data)).await.expect("a chunk");
        self.text.push_str(&String::from_utf8_lossy(&data[..n]));
    }

    /// The next event's `data` (comments skipped); its `id:` must equal its `seq`.
    pub async fn next(&mut self) -> Value {
        loop {
            if let Some(end) = self.text.find("\n\n") {
                let block: String = self.text.drain(..end + 2).collect();
                let mut id = None;
                let mut data = None;
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data = Some(v.trim().to_owned());
                    }
                }
                let Some(data) = data else { continue };
                let ev: Value = serde_json::from_str(&data).unwrap_or_else(|e| panic!("SSE data is not JSON ({e}): {data}"));
                assert_eq!(id, Some(ev["seq"].to_string()), "the SSE id is the event's seq");
                return ev;
            }
            self.chunk().await;
        }
    }

    /// Events up to and including the first whose type is one of `until`.
    pub async fn until(&mut self, until: &[&str]) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let ev = self.next().await;
            let done = until.contains(&event_type(&ev));
            out.push(ev);
            if done {
                return out;
            }
        }
    }
}

/// The structure of a JSON value: objects keep their keys, leaves become their type's name.
pub fn shape(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(shape).collect()),
        Value::String(_) => json!("string"),
        Value::Number(_) => json!("number"),
        Value::Bool(_) => json!("bool"),
        Value::Null => json!("null"),
    }
}

/// The SQLite store at `path` once its previous holder (a runtime or hub whose writer thread is
/// ending) let it go: one runtime at a time holds a store.
pub fn reopen(path: &std::path::Path) -> std::sync::Arc<dyn openagents_server::store::Store> {
    for _ in 0..250 {
        if let Ok(s) = openagents_server::store::SqliteStore::open(path) {
            return std::sync::Arc::new(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{} stayed held", path.display());
}
