//! The handler the core's tests serve, and helpers to reach it.

#![allow(dead_code)]

use std::sync::Arc;

use std::time::Duration;

use openagents_rpc::{BoxFuture, Context, Handler, Identity, RpcError, RpcServer, serve_lines};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use serde_json::value::RawValue;
use tokio::sync::{Semaphore, watch};

/// Methods: `echo` (its params, or null), `add` ({a, b} integers), `fail` (error -32050 with
/// data), `whoami` (the identity's name), `notify_me` (a `hello` notification to the caller,
/// then true; `"unsupported"` where the transport cannot), `wait` (holds until the test
/// releases it, counting the calls that started).
#[derive(Clone)]
pub struct TestHandler {
    pub gate: Arc<Semaphore>,
    pub started: Arc<watch::Sender<usize>>,
}

impl TestHandler {
    pub fn new() -> TestHandler {
        TestHandler { gate: Arc::new(Semaphore::new(0)), started: Arc::new(watch::channel(0).0) }
    }

    /// Waits until `n` `wait` calls have started.
    pub async fn started(&self, n: usize) {
        let mut rx = self.started.subscribe();
        let _ = rx.wait_for(|s| *s >= n).await;
    }

    /// Lets `n` `wait` calls answer.
    pub fn release(&self, n: usize) {
        self.gate.add_permits(n);
    }
}

fn raw(v: serde_json::Value) -> Box<RawValue> {
    RawValue::from_string(v.to_string()).expect("JSON")
}

impl Handler for TestHandler {
    fn call<'a>(&'a self, cx: &'a Context, method: &'a str, params: Option<&'a RawValue>) -> BoxFuture<'a, Result<Box<RawValue>, RpcError>> {
        Box::pin(async move {
            match method {
                "echo" => Ok(params.map(ToOwned::to_owned).unwrap_or_else(openagents_rpc::null)),
                "add" => {
                    #[derive(serde::Deserialize)]
                    struct Add {
                        a: i64,
                        b: i64,
                    }
                    let p: Add = serde_json::from_str(params.map_or("null", RawValue::get)).map_err(RpcError::invalid_params)?;
                    Ok(raw(serde_json::json!(p.a + p.b)))
                }
                "fail" => Err(RpcError::new(-32050, "it failed").with_data(serde_json::json!({"why": "asked to"}))),
                "whoami" => Ok(raw(serde_json::json!(cx.identity().name()))),
                // A handler with a bug (not among the methods it names).
                "panic" => panic!("the test handler panics on purpose"),
                "notify_me" => match cx.peer().notify("hello", &serde_json::json!({"to": cx.identity().name()})).await {
                    Ok(()) => Ok(raw(serde_json::json!(true))),
                    Err(openagents_rpc::PeerError::Unsupported) => Ok(raw(serde_json::json!("unsupported"))),
                    Err(e) => Err(RpcError::internal(e)),
                },
                "wait" => {
                    self.started.send_modify(|n| *n += 1);
                    let permit = self.gate.acquire().await.map_err(RpcError::internal)?;
                    permit.forget();
                    Ok(raw(serde_json::json!("waited")))
                }
                other => Err(RpcError::method_not_found_among(other, &["echo", "add", "fail", "whoami", "notify_me", "wait"])),
            }
        })
    }
}

/// One HTTP/1.1 exchange over a fresh connection (`Connection: close`): the status, the headers
/// (lowercase names) and the body. `Host` is `addr` unless `headers` names one.
pub async fn http(addr: std::net::SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, Vec<(String, String)>, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut head = format!("{method} {path} HTTP/1.1\r\nconnection: close\r\ncontent-length: {}\r\n", body.len());
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).await.expect("write");
    // The server may answer (413) before reading the whole body and close: a failed write is
    // then what the test expects, not an error.
    let _ = s.write_all(body).await;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").expect("a head");
    let head = String::from_utf8_lossy(&out[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok()).expect("status");
    let headers: Vec<(String, String)> = lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned())).collect();
    let mut body = out[split + 4..].to_vec();
    if headers.iter().any(|(k, v)| k == "transfer-encoding" && v == "chunked") {
        body = dechunk(&body);
    }
    (status, headers, body)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else { return out };
        let n = usize::from_str_radix(std::str::from_utf8(&b[..eol]).unwrap_or("0").trim(), 16).unwrap_or(0);
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + n]);
        b = &b[eol + 2 + n + 2..];
    }
}

/// The `error.code` of a reply.
pub fn code(reply: &serde_json::Value) -> i64 {
    reply["error"]["code"].as_i64().unwrap_or_else(|| panic!("an error reply: {reply}"))
}

/// `server` on an ephemeral loopback port; its address and the serving task.
pub async fn listen(server: RpcServer) -> (std::net::SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    (addr, tokio::spawn(async move { server.serve_http(listener).await }))
}

/// `server` on an ephemeral loopback port, served until the test ends: its address.
pub async fn serve_at(server: RpcServer) -> std::net::SocketAddr {
    listen(server).await.0
}

/// The tests' authenticator: `secret-token` is `alice`, any other token nobody.
pub fn tokens(token: &str) -> Option<Identity> {
    (token == "secret-token").then(|| Identity::new("alice"))
}

/// A line connection to a server over an in-memory pipe (`serve_lines` on its other end).
pub struct Lines {
    pub write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    pub read: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Lines {
    pub fn open(server: RpcServer) -> Lines {
        let (client, server_end) = tokio::io::duplex(1 << 20);
        let (sr, sw) = tokio::io::split(server_end);
        let task = tokio::spawn(async move { serve_lines(&server, BufReader::new(sr), sw).await });
        let (cr, cw) = tokio::io::split(client);
        Lines { write: cw, read: BufReader::new(cr).lines(), task }
    }

    /// Writes `bytes` and a newline.
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.write.write_all(&[bytes, b"\n"].concat()).await.expect("write");
    }

    pub async fn send(&mut self, v: &Value) {
        self.send_raw(v.to_string().as_bytes()).await;
    }

    /// Writes every message in one write: the server finds them all pipelined.
    pub async fn send_all(&mut self, messages: &[Value]) {
        let text: String = messages.iter().map(|m| format!("{m}\n")).collect();
        self.write.write_all(text.as_bytes()).await.expect("write");
    }

    pub async fn next(&mut self) -> Value {
        read_json(&mut self.read).await
    }

    /// Writes every message in one write while reading `count` lines: the server finds the
    /// messages pipelined, and neither end waits for the other's buffer.
    pub async fn exchange(&mut self, messages: &[Value], count: usize) -> Vec<Value> {
        let text: String = messages.iter().map(|m| format!("{m}\n")).collect();
        let (write, read) = (&mut self.write, &mut self.read);
        let writing = async { write.write_all(text.as_bytes()).await.expect("write") };
        let reading = async {
            let mut lines = Vec::with_capacity(count);
            for _ in 0..count {
                lines.push(read_json(read).await);
            }
            lines
        };
        tokio::join!(writing, reading).1
    }

    /// Closes the input and waits for the server to return.
    pub async fn close(mut self) {
        self.write.shutdown().await.expect("close the input");
        tokio::time::timeout(Duration::from_secs(10), self.task).await.expect("the server returns").expect("task").expect("served");
    }
}

/// The next line of `read`, as JSON.
pub async fn read_json(read: &mut tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>) -> Value {
    let line = tokio::time::timeout(Duration::from_secs(10), read.next_line()).await.expect("a line in time").expect("read").expect("a line");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("a line of JSON ({e}): {line}"))
}
