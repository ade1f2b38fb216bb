//! The load: keep-alive HTTP/1.1 connections, each posting one JSON-RPC call at a time to
//! `/rpc` (no pipelining) from a fixed mix of `get`, `put` and `delete`, timing every call.
//!
//! The checks and the prefill go through hyper's client; the timed load writes its requests and
//! reads the answers on the socket itself ([`RawConn`]), so that the load costs its core less
//! than a server costs its own and the servers, not the load, set the pace.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The longest answer head the load accepts: both servers' heads are under 200 bytes.
const MAX_HEAD: usize = 8 * 1024;

/// The share of each method in the calls, in percent (`delete` takes the rest).
#[derive(Debug, Clone, Copy)]
pub struct Mix {
    /// Percent of calls that are `get`.
    pub get: u32,
    /// Percent of calls that are `put`.
    pub put: u32,
}

/// What one timed run sends.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Concurrent connections, each with one call outstanding at a time.
    pub connections: usize,
    /// Keys `key-0000`… the calls pick from (uniformly).
    pub keys: u32,
    /// The method mix.
    pub mix: Mix,
}

/// What one timed run measured.
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// Calls answered within the run.
    pub requests: u64,
    /// Of those, the answers that were JSON-RPC errors (`get` of a deleted key: `not_found`).
    pub errors: u64,
    /// From the first call sent to the last answer read.
    pub elapsed: Duration,
    /// Every call's latency, sorted.
    pub latencies: Vec<Duration>,
}

impl Run {
    /// Calls per second.
    pub fn rate(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    /// The `q` quantile (0..=1) of the latencies.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let i = ((self.latencies.len() - 1) as f64 * q).round() as usize;
        self.latencies[i]
    }
}

/// A keep-alive HTTP/1.1 connection to a server's `POST /rpc`.
pub struct Conn {
    send: SendRequest<Full<Bytes>>,
    host: String,
}

impl Conn {
    /// Connects (with `TCP_NODELAY`, as a latency-minded client does).
    pub async fn open(addr: SocketAddr) -> Result<Conn, String> {
        let stream = TcpStream::connect(addr).await.map_err(|e| format!("{addr}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| format!("{addr}: {e}"))?;
        tokio::spawn(conn);
        Ok(Conn { send, host: addr.to_string() })
    }

    /// Posts one message and reads the whole answer: its status and body.
    pub async fn post(&mut self, body: String) -> Result<(StatusCode, Bytes), String> {
        self.send.ready().await.map_err(|e| e.to_string())?;
        let req = Request::post("/rpc").header(HOST, &self.host).header(CONTENT_TYPE, "application/json").body(Full::new(Bytes::from(body))).map_err(|e| e.to_string())?;
        let resp = self.send.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = resp.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok((status, body))
    }

    /// Posts one message and expects `200` with a JSON body: that body, parsed.
    pub async fn call(&mut self, body: String) -> Result<serde_json::Value, String> {
        let (status, bytes) = self.post(body.clone()).await?;
        if status != StatusCode::OK {
            return Err(format!("{} answered {status} to {body}: {}", self.host, String::from_utf8_lossy(&bytes)));
        }
        serde_json::from_slice(&bytes).map_err(|e| format!("{} answered {body} with no JSON ({e}): {}", self.host, String::from_utf8_lossy(&bytes)))
    }
}

/// A keep-alive HTTP/1.1 connection written and read directly: one request in one write, the
/// answer read up to its `Content-Length` (both servers send one; anything else is an error).
pub struct RawConn {
    stream: TcpStream,
    head: String,
    out: Vec<u8>,
    input: Vec<u8>,
}

impl RawConn {
    /// Connects, with `TCP_NODELAY`.
    pub async fn open(addr: SocketAddr) -> Result<RawConn, String> {
        let stream = TcpStream::connect(addr).await.map_err(|e| format!("{addr}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let head = format!("POST /rpc HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: ");
        Ok(RawConn { stream, head, out: Vec::with_capacity(512), input: Vec::with_capacity(1024) })
    }

    /// Posts `body` and reads the answer: its status code and whether it is a JSON-RPC error.
    pub async fn post(&mut self, body: &str) -> Result<(u16, bool), String> {
        self.out.clear();
        self.out.extend_from_slice(self.head.as_bytes());
        self.out.extend_from_slice(body.len().to_string().as_bytes());
        self.out.extend_from_slice(b"\r\n\r\n");
        self.out.extend_from_slice(body.as_bytes());
        self.stream.write_all(&self.out).await.map_err(|e| format!("writing a request: {e}"))?;
        self.input.clear();
        let mut chunk = [0u8; 4096];
        let (head_end, length) = loop {
            let n = self.stream.read(&mut chunk).await.map_err(|e| format!("reading an answer: {e}"))?;
            if n == 0 {
                return Err("the server closed the connection".into());
            }
            self.input.extend_from_slice(&chunk[..n]);
            if let Some(end) = find(&self.input, b"\r\n\r\n") {
                break (end + 4, content_length(&self.input[..end])?);
            }
            if self.input.len() > MAX_HEAD {
                return Err(format!("an answer head longer than {MAX_HEAD} bytes"));
            }
        };
        while self.input.len() < head_end + length {
            let n = self.stream.read(&mut chunk).await.map_err(|e| format!("reading an answer: {e}"))?;
            if n == 0 {
                return Err("the server closed the connection mid-answer".into());
            }
            self.input.extend_from_slice(&chunk[..n]);
        }
        if self.input.len() != head_end + length {
            return Err("the server sent more than one answer".into());
        }
        let status = std::str::from_utf8(self.input.get(9..12).unwrap_or_default()).ok().and_then(|s| s.parse().ok()).ok_or("an answer without a status line")?;
        Ok((status, find(&self.input[head_end..], br#""error":"#).is_some()))
    }
}

/// The `Content-Length` of an answer head (header names in any case).
fn content_length(head: &[u8]) -> Result<usize, String> {
    let head = std::str::from_utf8(head).map_err(|_| "an answer head that is not UTF-8")?;
    head.split("\r\n")
        .find_map(|line| line.split_once(':').filter(|(name, _)| name.eq_ignore_ascii_case("content-length")).map(|(_, v)| v.trim().parse::<usize>()))
        .ok_or_else(|| format!("an answer without Content-Length: {head}"))?
        .map_err(|e| format!("a bad Content-Length: {e}"))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The name of key `i`.
pub fn key(i: u32) -> String {
    format!("key-{i:04}")
}

/// A `put` of a text value under key `i`.
pub fn put_body(id: u64, i: u32, stamp: u64) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"put","params":{{"key":"{}","value":{{"kind":"text","text":"value {stamp} of {i}"}}}}}}"#, key(i))
}

/// One call of the mix: the next random draw picks the method and the key.
fn next_body(rng: &mut u64, id: u64, load: &Load) -> String {
    let draw = xorshift(rng);
    let i = ((draw >> 32) % u64::from(load.keys.max(1))) as u32;
    let pick = (draw % 100) as u32;
    if pick < load.mix.get {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"get","params":{{"key":"{}"}}}}"#, key(i))
    } else if pick < load.mix.get + load.mix.put {
        put_body(id, i, draw & 0xffff)
    } else {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"delete","params":{{"key":"{}"}}}}"#, key(i))
    }
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// Stores every key of the key space once, over one connection.
pub async fn prefill(addr: SocketAddr, keys: u32) -> Result<(), String> {
    let mut conn = Conn::open(addr).await?;
    for i in 0..keys {
        let reply = conn.call(put_body(u64::from(i), i, 0)).await?;
        if reply.get("result").is_none() {
            return Err(format!("{addr}: prefilling {} failed: {reply}", key(i)));
        }
    }
    Ok(())
}

/// Runs `load` against `addr` for `duration`: every connection opened first, then the clock
/// starts. `seed` fixes each connection's sequence of calls (the same seed gives both servers the
/// same calls in the same order per connection).
pub async fn run(addr: SocketAddr, load: Load, duration: Duration, seed: u64) -> Result<Run, String> {
    let mut conns = Vec::with_capacity(load.connections);
    for _ in 0..load.connections {
        conns.push(RawConn::open(addr).await?);
    }
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for (c, mut conn) in conns.into_iter().enumerate() {
        let mut rng = seed ^ (c as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let _ = xorshift(&mut rng);
        tasks.spawn(async move {
            let mut run = Run::default();
            let mut id = 0u64;
            while Instant::now() < deadline {
                id += 1;
                let body = next_body(&mut rng, id, &load);
                let sent = Instant::now();
                let (status, error) = conn.post(&body).await.map_err(|e| format!("{addr}: {e}"))?;
                run.latencies.push(sent.elapsed());
                if status != 200 {
                    return Err(format!("{addr} answered {status} to {body}"));
                }
                run.requests += 1;
                run.errors += u64::from(error);
            }
            Ok::<_, String>(run)
        });
    }
    let mut total = Run::default();
    while let Some(done) = tasks.join_next().await {
        let run = done.map_err(|e| e.to_string())??;
        total.requests += run.requests;
        total.errors += run.errors;
        total.latencies.extend(run.latencies);
    }
    total.elapsed = start.elapsed();
    total.latencies.sort_unstable();
    Ok(total)
}
