//! Shared end-to-end test support: a scripted in-process agent, a small HTTP/1.1 client built
//! on hyper's connection API (plus raw sockets for malformed traffic), an SSE reader, and a
//! harness driving `run_stdio` over in-memory pipes.
//!
//! Every wait here is for an observable event (a response, an event, a closed stream) and is
//! bounded by [`STEP`]; nothing sleeps to wait for readiness.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::HeaderMap;
use hyper::Request;
use hyper_util::rt::TokioIo;
use openagents_protocol::{ErrorCode, Turn};
use openagents_server::agent::error;
use openagents_server::events::Subscription;
use openagents_server::{EngineConfig, FnAgent, Grant, RpcEngine, RuntimeHttpCredential, RuntimeSubmitError, TurnContext};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The longest any single step (a response, an event, a connection) may take.
pub const STEP: Duration = Duration::from_secs(10);

/// The lease TTL every HTTP test runtime uses.
pub const TTL: Duration = Duration::from_millis(300);

/// Awaits `fut`, failing the test with `what` if it takes longer than [`STEP`].
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(STEP, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {STEP:?} waiting for {what}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The scripted agent
// ---------------------------------------------------------------------------------------------

/// Releases turns waiting at a `gate` step.
#[derive(Clone, Default)]
pub struct Gate(Arc<Notify>);

impl Gate {
    /// Lets one waiting (or the next) `gate` step through.
    pub fn open(&self) {
        self.0.notify_one();
    }
}

/// The text a `big:N` step publishes N times (4 KiB).
pub fn big_text() -> String {
    "x".repeat(4096)
}

/// Runs a turn whose task is a script of space-separated steps:
/// - `burst:N` publishes N text events `t0`…;
/// - `paced:N` publishes the same, pausing after every 10;
/// - `big:N` publishes N text events of 4 KiB;
/// - `gate` waits for [`Gate::open`] (or an interrupt);
/// - `wait` waits for an interrupt or shutdown, then fails `interrupted`;
/// - `approve` asks for approval and records the answer in the result;
/// - `fail` fails with `runner_failed`; `panic` panics;
/// - any other word is published as a text event.
///
/// The result is the recorded approval answers, or `done`.
async fn script(turn: Turn, ctx: TurnContext, gate: Gate) -> Result<String, RuntimeSubmitError> {
    let mut answers = Vec::new();
    for step in turn.task.split_whitespace() {
        let (word, n) = match step.split_once(':') {
            Some((w, n)) => (w, n.parse::<usize>().unwrap_or(0)),
            None => (step, 0),
        };
        match word {
            "burst" => (0..n).for_each(|i| ctx.text(format!("t{i}"))),
            "paced" => {
                for i in 0..n {
                    ctx.text(format!("t{i}"));
                    if i % 10 == 9 {
                        // Subscribers run between these: streams kept busy, woken mid-turn.
                        tokio::time::sleep(Duration::from_micros(50)).await;
                    }
                }
            }
            "big" => {
                let text = big_text();
                (0..n).for_each(|_| ctx.text(text.clone()));
            }
            "gate" => tokio::select! {
                () = gate.0.notified() => {}
                () = ctx.cancelled().cancelled() => return Err(error(ErrorCode::Interrupted, "interrupted at the gate")),
            },
            "wait" => {
                ctx.cancelled().cancelled().await;
                return Err(error(ErrorCode::Interrupted, "interrupted while waiting"));
            }
            "approve" => answers.push(if ctx.request_approval("may I delete /tmp/scratch?").await.approved { "approved" } else { "denied" }.to_owned()),
            "fail" => return Err(error(ErrorCode::RunnerFailed, "the script asked to fail")),
            "panic" => panic!("the script asked to panic"),
            other => ctx.text(other.to_owned()),
        }
    }
    Ok(if answers.is_empty() { "done".into() } else { answers.join(",") })
}

/// The runner id every scripted submit uses by default.
pub const SCRIPT_RUNNER: &str = "script";

/// An engine driving the scripted agent, and the gate its `gate` steps wait on.
pub fn scripted_engine() -> (RpcEngine, Gate) {
    let gate = Gate::default();
    let g = gate.clone();
    let agent = FnAgent(move |turn: Turn, ctx: TurnContext| script(turn, ctx, g.clone()));
    let config = EngineConfig { default_runner: Some(SCRIPT_RUNNER.into()), ..EngineConfig::default() };
    (RpcEngine::with_config(agent, config), gate)
}

/// The echo runner binary, built by `cargo build -p openagents-runner`.
pub fn echo_runner() -> PathBuf {
    // target/debug/deps/<test> → target/debug; fall back to the workspace's target folder.
    let from_exe = std::env::current_exe().ok().and_then(|p| p.parent()?.parent().map(|d| d.join("openagents-runner-echo")));
    let from_manifest = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/debug/openagents-runner-echo"));
    match from_exe.into_iter().chain([from_manifest.clone()]).find(|p| p.is_file()) {
        Some(p) => p,
        None => panic!("the echo runner {} is missing: run `cargo build -p openagents-runner` first", from_manifest.display()),
    }
}

// ---------------------------------------------------------------------------------------------
// Events in process
// ---------------------------------------------------------------------------------------------

/// An event as JSON (`{"seq", "time_ms", "event": {"type", …}}`).
pub fn event_value(ev: &openagents_protocol::ServerEvent) -> Value {
    serde_json::from_slice(&openagents_server::projection::event_json(ev)).expect("an event is JSON")
}

/// The `event.type` of an event value.
pub fn kind(ev: &Value) -> &str {
    ev["event"]["type"].as_str().unwrap_or("")
}

/// Reads `sub` until an event of type `ty` arrives; every event read, that one last.
pub async fn wait_for_kind(sub: &mut Subscription, ty: &str) -> Vec<Value> {
    within(&format!("a `{ty}` event in process"), async {
        let mut seen = Vec::new();
        loop {
            let ev = event_value(&sub.next().await.expect("the hub is alive"));
            let done = kind(&ev) == ty;
            seen.push(ev);
            if done {
                return seen;
            }
        }
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------------------------

/// The tokens of the standard credential set.
pub const ADMIN: &str = "tok-admin-0123456789";
pub const CTL_A: &str = "tok-controller-a-0123";
pub const CTL_B: &str = "tok-controller-b-4567";
pub const OBSERVER: &str = "tok-observer-89ab";
pub const STATUS_ONLY: &str = "tok-status-only-cdef";

/// admin, controllers `a` and `b`, an observer, and a `status`-only grant without events.
pub fn credentials() -> Vec<RuntimeHttpCredential> {
    vec![
        RuntimeHttpCredential::new("admin", ADMIN, Grant::admin()),
        RuntimeHttpCredential::new("a", CTL_A, Grant::controller()),
        RuntimeHttpCredential::new("b", CTL_B, Grant::controller()),
        RuntimeHttpCredential::new("obs", OBSERVER, Grant::observer()),
        RuntimeHttpCredential::new("status-only", STATUS_ONLY, Grant { metrics: false, methods: ["status".to_owned()].into_iter().collect(), events: false, approvals: false }),
    ]
}

/// An HTTP response, read whole.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Resp {
    /// The body as JSON (panics, showing the body, when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("status {}: body is not JSON ({e}): {}", self.status, String::from_utf8_lossy(&self.body)))
    }

    /// The `result`, asserting a 200 with a result.
    pub fn result(&self) -> Value {
        let v = self.json();
        assert_eq!(self.status, 200, "{v}");
        assert!(v.get("result").is_some(), "expected a result: {v}");
        v["result"].clone()
    }

    /// The `error` object, asserting one (and that the typed and numeric codes agree).
    pub fn error(&self) -> Value {
        let v = self.json();
        let e = v.get("error").unwrap_or_else(|| panic!("expected an error: {v}")).clone();
        check_error_object(&e);
        e
    }
}

/// The JSON-RPC numeric code of each typed code (RuntimeSubmitError.json `x-enum`).
pub fn rpc_code(code: &str) -> i64 {
    match code {
        "parse_error" => -32700,
        "invalid_request" => -32600,
        "unknown_method" => -32601,
        "invalid_params" => -32602,
        "unauthorized" => -32001,
        "forbidden" => -32002,
        "busy" => -32003,
        "lease_held" => -32004,
        "runner_not_found" => -32005,
        "interrupted" => -32006,
        "runner_failed" => -32007,
        "frame_too_large" => -32008,
        "output_too_large" => -32009,
        "timeout" => -32010,
        "shutting_down" => -32011,
        "internal" => -32603,
        other => panic!("unknown error code {other}"),
    }
}

/// Checks a JSON-RPC error object: `code` is the typed code's number, `message` matches, and
/// `data` is a `RuntimeSubmitError` with the documented `retryable`.
pub fn check_error_object(e: &Value) {
    let data = &e["data"];
    let code = data["code"].as_str().unwrap_or_else(|| panic!("error.data.code missing: {e}"));
    assert_eq!(e["code"].as_i64(), Some(rpc_code(code)), "{e}");
    // The message is the code's short fixed title, never a second copy of `data.message`.
    let title = match code {
        "parse_error" => "Parse error".to_owned(),
        "invalid_request" => "Invalid Request".to_owned(),
        "unknown_method" => "Method not found".to_owned(),
        "invalid_params" => "Invalid params".to_owned(),
        "internal" => "Internal error".to_owned(),
        other => {
            let words = other.replace('_', " ");
            format!("{}{}", words[..1].to_uppercase(), &words[1..])
        }
    };
    assert_eq!(e["message"].as_str(), Some(title.as_str()), "{e}");
    assert_eq!(e["jsonrpc"], Value::Null, "the error object itself carries no `jsonrpc`: {e}");
    let retryable = matches!(code, "busy" | "lease_held" | "interrupted" | "runner_failed" | "timeout" | "internal");
    assert_eq!(data["retryable"].as_bool(), Some(retryable), "{e}");
    let typed: RuntimeSubmitError = serde_json::from_value(data.clone()).unwrap_or_else(|err| panic!("error.data is not a RuntimeSubmitError ({err}): {e}"));
    assert_eq!(typed.code.rpc_code(), rpc_code(code));
}

/// Where a resumed event stream starts.
#[derive(Debug, Clone, Copy)]
pub enum Since {
    /// New events only.
    Now,
    /// `Last-Event-ID: n`.
    Header(i64),
    /// `?since=n`.
    Query(i64),
}

/// A client for one runtime's HTTP address.
#[derive(Clone, Copy, Debug)]
pub struct Http {
    pub addr: SocketAddr,
}

impl Http {
    /// Starts an HTTP runtime for `engine` on a free loopback port, with [`credentials`] and the
    /// lease TTL [`TTL`].
    pub async fn start(engine: &RpcEngine) -> Http {
        let addr = openagents_server::run_http_authorized_with_lease_ttl(engine.clone(), "127.0.0.1:0", credentials(), TTL).await.expect("bind loopback");
        Http { addr }
    }

    async fn connect(&self) -> hyper::client::conn::http1::SendRequest<Full<Bytes>> {
        let stream = within("connecting", TcpStream::connect(self.addr)).await.expect("connect");
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        sender
    }

    async fn send(&self, req: Request<Full<Bytes>>) -> hyper::Response<Incoming> {
        let mut sender = self.connect().await;
        within("a response", sender.send_request(req)).await.expect("the request is answered")
    }

    /// One request, the response read whole.
    pub async fn request(&self, method: &str, path: &str, headers: &[(&str, String)], body: impl Into<Bytes>) -> Resp {
        let mut req = Request::builder().method(method).uri(path).header("host", self.addr.to_string());
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        let resp = self.send(req.body(Full::new(body.into())).expect("a request")).await;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = within("a response body", resp.into_body().collect()).await.expect("a body").to_bytes().to_vec();
        Resp { status, headers, body }
    }

    /// `POST /rpc` with `body` as JSON, authorized by `token`.
    pub async fn post(&self, token: Option<&str>, body: impl Into<Bytes>) -> Resp {
        let mut headers = vec![("content-type", "application/json".to_owned())];
        if let Some(t) = token {
            headers.push(("authorization", format!("Bearer {t}")));
        }
        self.request("POST", "/rpc", &headers, body).await
    }

    /// Calls `method` with `params` (omitted when null) as JSON-RPC 2.0 with id 1.
    pub async fn call(&self, token: &str, method: &str, params: Value) -> Resp {
        let mut req = json!({"jsonrpc": "2.0", "id": 1, "method": method});
        if !params.is_null() {
            req["params"] = params;
        }
        self.post(Some(token), req.to_string()).await
    }

    /// Submits `task` (the scripted agent's runner by default).
    pub async fn submit(&self, token: &str, task: &str) -> Resp {
        self.call(token, "submit", json!({"task": task})).await
    }

    /// The runtime's status, as admin.
    pub async fn status(&self) -> Value {
        self.call(ADMIN, "status", Value::Null).await.result()
    }

    /// Asserts the runtime still answers `status`.
    pub async fn assert_serving(&self) {
        let s = self.status().await;
        assert!(s["state"].is_string(), "{s}");
    }

    /// Opens `GET /events` with `token`; the open stream, or the refusal read whole.
    pub async fn events(&self, token: Option<&str>, from: Since) -> Result<Sse, Resp> {
        let headers: Vec<(&str, String)> = token.iter().map(|t| ("authorization", format!("Bearer {t}"))).collect();
        self.events_with(&headers, from).await.map(|(_, sse)| sse)
    }

    /// Opens `GET /events` with `headers`; the response head and the open stream, or the
    /// refusal read whole.
    pub async fn events_with(&self, headers: &[(&str, String)], from: Since) -> Result<(HeaderMap, Sse), Resp> {
        let path = match from {
            Since::Query(n) => format!("/events?since={n}"),
            _ => "/events".to_owned(),
        };
        let mut req = Request::get(path).header("host", self.addr.to_string()).header("accept", "text/event-stream");
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        if let Since::Header(n) = from {
            req = req.header("last-event-id", n.to_string());
        }
        let resp = self.send(req.body(Full::new(Bytes::new())).expect("a request")).await;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        if status != 200 {
            let body = within("a refusal body", resp.into_body().collect()).await.expect("a body").to_bytes().to_vec();
            return Err(Resp { status, headers, body });
        }
        let ct = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
        assert!(ct.starts_with("text/event-stream"), "content-type {ct}");
        Ok((headers, Sse { body: resp.into_body(), buf: Vec::new(), pending: VecDeque::new() }))
    }

    /// Opens the event stream, which must be granted.
    pub async fn subscribe(&self, token: &str, from: Since) -> Sse {
        match self.events(Some(token), from).await {
            Ok(s) => s,
            Err(r) => panic!("GET /events refused: {} {}", r.status, String::from_utf8_lossy(&r.body)),
        }
    }

    /// Sends raw bytes on a new connection and reads until the peer closes or `STEP` passes;
    /// what came back.
    pub async fn raw(&self, bytes: &[u8]) -> String {
        let mut s = within("connecting", TcpStream::connect(self.addr)).await.expect("connect");
        s.write_all(bytes).await.expect("write");
        let mut out = Vec::new();
        let _ = tokio::time::timeout(STEP, s.read_to_end(&mut out)).await;
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// One SSE event: its `id:` and its `data:` as JSON.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub id: Option<i64>,
    pub data: Value,
}

impl SseEvent {
    /// `event.type`.
    pub fn kind(&self) -> &str {
        kind(&self.data)
    }

    /// `seq`.
    pub fn seq(&self) -> i64 {
        self.data["seq"].as_i64().expect("seq")
    }
}

/// An open `GET /events` stream.
pub struct Sse {
    body: Incoming,
    buf: Vec<u8>,
    pending: VecDeque<SseEvent>,
}

impl Sse {
    /// The next event; `None` when the stream ends. Fails the test after [`STEP`].
    pub async fn next(&mut self) -> Option<SseEvent> {
        within("an SSE event", self.next_unbounded()).await
    }

    async fn next_unbounded(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Some(ev);
            }
            let frame = self.body.frame().await?.expect("the event stream is readable");
            let Some(data) = frame.data_ref() else { continue };
            self.buf.extend_from_slice(data);
            while let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buf.drain(..end + 2).collect();
                let (mut id, mut data) = (None, String::new());
                for line in String::from_utf8(block).expect("SSE is UTF-8").lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().parse::<i64>().expect("a numeric id"));
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                let data: Value = serde_json::from_str(&data).expect("SSE data is JSON");
                self.pending.push_back(SseEvent { id, data });
            }
        }
    }

    /// Events up to and including the first of type `ty`.
    pub async fn until(&mut self, ty: &str) -> Vec<SseEvent> {
        within(&format!("a `{ty}` SSE event"), async {
            let mut out = Vec::new();
            while let Some(ev) = self.next_unbounded().await {
                let done = ev.kind() == ty;
                out.push(ev);
                if done {
                    return out;
                }
            }
            panic!("the event stream ended before a `{ty}` event: {out:?}")
        })
        .await
    }

    /// Every event until the stream ends.
    pub async fn rest(&mut self) -> Vec<SseEvent> {
        within("the end of the event stream", async {
            let mut out = Vec::new();
            while let Some(ev) = self.next_unbounded().await {
                out.push(ev);
            }
            out
        })
        .await
    }
}

/// Asserts every `id:` equals the event's `seq`, and the seqs are exactly `first..=last`.
pub fn assert_contiguous(events: &[SseEvent], first: i64, last: i64) {
    for ev in events {
        assert_eq!(ev.id, Some(ev.seq()), "id: and seq disagree: {ev:?}");
    }
    let seqs: Vec<i64> = events.iter().map(SseEvent::seq).collect();
    let want: Vec<i64> = (first..=last).collect();
    if seqs != want {
        let dupes = seqs.windows(2).filter(|w| w[0] >= w[1]).count();
        panic!("expected seqs {first}..={last} exactly once; got {} events ({dupes} out of order or repeated), first {:?}, last {:?}", seqs.len(), seqs.first(), seqs.last());
    }
}

// ---------------------------------------------------------------------------------------------
// stdio
// ---------------------------------------------------------------------------------------------

/// A `run_stdio` runtime over in-memory pipes: we write its input and read its output lines.
pub struct Stdio {
    input: Option<DuplexStream>,
    output: BufReader<DuplexStream>,
    task: Option<JoinHandle<std::io::Result<()>>>,
    /// Every output line read so far, parsed.
    pub lines: Vec<Value>,
}

impl Stdio {
    /// Starts `run_stdio` for `engine`.
    pub fn start(engine: &RpcEngine) -> Stdio {
        let (input, server_in) = tokio::io::duplex(64 * 1024);
        let (server_out, output) = tokio::io::duplex(64 * 1024);
        let task = tokio::spawn(openagents_server::run_stdio(engine.clone(), server_in, server_out));
        Stdio { input: Some(input), output: BufReader::new(output), task: Some(task), lines: Vec::new() }
    }

    /// Writes `line` and a newline.
    pub async fn send(&mut self, line: &str) {
        let input = self.input.as_mut().expect("input open");
        within("writing a line", async {
            input.write_all(line.as_bytes()).await.expect("write");
            input.write_all(b"\n").await.expect("write");
        })
        .await;
    }

    /// Takes the input end (to write from another task, or to close it).
    pub fn take_input(&mut self) -> DuplexStream {
        self.input.take().expect("input open")
    }

    /// Closes the input (end of file for the runtime).
    pub fn close_input(&mut self) {
        self.input = None;
    }

    /// The next output line, parsed; `None` at end of output. Each line must be exactly one
    /// complete JSON object.
    pub async fn next(&mut self) -> Option<Value> {
        let mut line = Vec::new();
        let n = within("an output line", self.output.read_until(b'\n', &mut line)).await.expect("read");
        if n == 0 {
            return None;
        }
        assert_eq!(line.last(), Some(&b'\n'), "an output line without its newline: {}", String::from_utf8_lossy(&line));
        let v: Value = serde_json::from_slice(&line[..line.len() - 1]).unwrap_or_else(|e| panic!("output line is not one JSON object ({e}): {}", String::from_utf8_lossy(&line)));
        assert!(v.is_object(), "output line is not an object: {v}");
        let is_event = v.get("event").is_some();
        let is_response = v.get("id").is_some() && (v.get("result").is_some() ^ v.get("error").is_some());
        assert!(is_event ^ is_response, "a line is either {{\"event\"}} or a response: {v}");
        if let Some(e) = v.get("error") {
            check_error_object(e);
        }
        self.lines.push(v.clone());
        Some(v)
    }

    /// Reads until the response with `id`; returns it.
    pub async fn response(&mut self, id: Value) -> Value {
        loop {
            let v = self.next().await.unwrap_or_else(|| panic!("output ended before the response to {id}"));
            if v.get("event").is_none() && v["id"] == id {
                return v;
            }
        }
    }

    /// Reads until an event of type `ty`; returns its `{"seq", "event"}`.
    pub async fn event(&mut self, ty: &str) -> Value {
        loop {
            let v = self.next().await.unwrap_or_else(|| panic!("output ended before a `{ty}` event"));
            if let Some(ev) = v.get("event")
                && kind(ev) == ty
            {
                return ev.clone();
            }
        }
    }

    /// Waits for the `turn_started` event of `assignment` (perhaps read already).
    pub async fn started(&mut self, assignment: &str) -> Value {
        let is_it = |e: &Value| kind(e) == "turn_started" && e["event"]["assignment"] == assignment;
        if let Some(e) = self.events().into_iter().find(|e| is_it(e)) {
            return e;
        }
        loop {
            let ev = self.event("turn_started").await;
            if is_it(&ev) {
                return ev;
            }
        }
    }

    /// Sends `line` and returns the response with `id`.
    pub async fn call(&mut self, line: &str, id: Value) -> Value {
        self.send(line).await;
        self.response(id).await
    }

    /// Reads to the end of output, then awaits `run_stdio`'s result.
    pub async fn finish(&mut self) -> std::io::Result<()> {
        while self.next().await.is_some() {}
        let task = self.task.take().expect("not finished yet");
        within("run_stdio to return", task).await.expect("run_stdio did not panic")
    }

    /// The task itself (to race it against a deadline).
    pub fn task_mut(&mut self) -> &mut JoinHandle<std::io::Result<()>> {
        self.task.as_mut().expect("not finished yet")
    }

    /// The events read so far (`{"seq", "event"}` each).
    pub fn events(&self) -> Vec<Value> {
        self.lines.iter().filter_map(|l| l.get("event").cloned()).collect()
    }
}

/// Writes `bytes` to `w` on its own task (so a reader can run meanwhile).
pub fn write_in_background<W: AsyncWrite + Unpin + Send + 'static>(mut w: W, bytes: Vec<u8>) -> JoinHandle<W> {
    tokio::spawn(async move {
        w.write_all(&bytes).await.expect("write");
        w
    })
}
