//! Small blocking clients written for hostile traffic: raw HTTP/1.1 over a `TcpStream` (so a
//! test can send exactly the bytes it means, malformed ones included), an SSE reader that
//! decodes chunked transfer by hand, and a WebSocket client on `tungstenite`.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long any single read may block before a client gives up.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// One HTTP response.
#[derive(Debug, Clone)]
pub struct Resp {
    /// The status code.
    pub status: u16,
    /// The header fields, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Resp {
    /// The body as JSON (`Null` when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    /// The body as text, for messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).chars().take(600).collect()
    }
    /// The typed error code (`error.data.code`), if the body carries one.
    pub fn code(&self) -> Option<String> {
        self.json()["error"]["data"]["code"].as_str().map(str::to_owned)
    }
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let end = find(raw, b"\r\n")?;
        let size = std::str::from_utf8(&raw[..end]).ok()?.split(';').next()?.trim();
        let n = usize::from_str_radix(size, 16).ok()?;
        raw = &raw[end + 2..];
        if n == 0 {
            return Some(out);
        }
        out.extend_from_slice(raw.get(..n)?);
        raw = raw.get(n + 2..)?;
    }
}

/// Parses a whole HTTP/1.1 response (the connection having closed after it).
pub fn parse_response(raw: &[u8]) -> Option<Resp> {
    let head_end = find(raw, b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..head_end]).ok()?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines.filter_map(|l| l.split_once(':')).map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned())).collect();
    let rest = &raw[head_end + 4..];
    let chunked = headers.iter().any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked { dechunk(rest)? } else { rest.to_vec() };
    Some(Resp { status, headers, body })
}

/// Opens a connection to `addr` with the client's read timeout.
pub fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    s.set_read_timeout(Some(READ_TIMEOUT))?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Sends `bytes` as they are and reads until the server closes; `Err` when the server sent no
/// parseable response (it closed or reset the connection instead).
pub fn send_raw(addr: SocketAddr, bytes: &[u8]) -> io::Result<Resp> {
    send(addr, bytes, false)
}

/// [`send_raw`], then shuts down the write side (a half-closed connection) before reading.
pub fn send_half_closed(addr: SocketAddr, bytes: &[u8]) -> io::Result<Resp> {
    send(addr, bytes, true)
}

fn send(addr: SocketAddr, bytes: &[u8], half_close: bool) -> io::Result<Resp> {
    let mut s = connect(addr)?;
    // The server may answer (and close) before it has read everything, as it does past a limit.
    let _ = s.write_all(bytes);
    if half_close {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let mut raw = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if raw.is_empty() => return Err(e),
            Err(_) => break,
        }
    }
    parse_response(&raw).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("no HTTP response ({} bytes: {:?})", raw.len(), String::from_utf8_lossy(&raw[..raw.len().min(200)]))))
}

/// The head of a `POST /rpc` with `Connection: close` and the given extra header lines.
pub fn rpc_head(token: Option<&str>, content_length: usize, extra: &str) -> String {
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    format!("POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json\r\nConnection: close\r\n{extra}Content-Length: {content_length}\r\n\r\n")
}

/// `POST /rpc` with `body`.
pub fn post_rpc(addr: SocketAddr, token: Option<&str>, body: &[u8]) -> Resp {
    let mut bytes = rpc_head(token, body.len(), "").into_bytes();
    bytes.extend_from_slice(body);
    send_raw(addr, &bytes).unwrap_or_else(|e| panic!("POST /rpc failed: {e}"))
}

/// Calls `method` with `params` over `POST /rpc`.
pub fn call(addr: SocketAddr, token: Option<&str>, method: &str, params: Value) -> Resp {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    post_rpc(addr, token, body.to_string().as_bytes())
}

// ---------------------------------------------------------------------------------------------
// SSE
// ---------------------------------------------------------------------------------------------

/// One server-sent event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    /// The `id:` field (the event's sequence number).
    pub id: Option<i64>,
    /// The `data:` field, parsed.
    pub data: Value,
}

impl SseEvent {
    /// The event's kind (`data.event.type`).
    pub fn kind(&self) -> &str {
        self.data["event"]["type"].as_str().unwrap_or("")
    }
    /// The event's sequence number (`data.seq`).
    pub fn seq(&self) -> i64 {
        self.data["seq"].as_i64().unwrap_or(-1)
    }
}

#[derive(Debug, PartialEq)]
enum Chunk {
    Size,
    Data(usize),
    Crlf,
    Done,
}

/// An open `GET /events` stream.
pub struct Sse {
    stream: TcpStream,
    raw: Vec<u8>,
    body: Vec<u8>,
    state: Chunk,
    /// The response's status code.
    pub status: u16,
    /// The response's body when it was refused (not 200).
    pub refused: Option<Resp>,
}

impl Sse {
    /// Opens the stream with `token`, resuming after `last_event_id` when given.
    ///
    /// # Errors
    ///
    /// Connection failures.
    pub fn open(addr: SocketAddr, token: Option<&str>, last_event_id: Option<&str>) -> io::Result<Sse> {
        let mut stream = connect(addr)?;
        let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
        let resume = last_event_id.map(|l| format!("Last-Event-ID: {l}\r\n")).unwrap_or_default();
        stream.write_all(format!("GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nConnection: close\r\n{auth}{resume}\r\n").as_bytes())?;
        let mut raw = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        let head_end = loop {
            if let Some(i) = find(&raw, b"\r\n\r\n") {
                break i;
            }
            let n = stream.read(&mut buf)?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed before the response head"));
            }
            raw.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
        let status: u16 = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let rest = raw[head_end + 4..].to_vec();
        let mut sse = Sse { stream, raw: rest, body: Vec::new(), state: Chunk::Size, status, refused: None };
        if status != 200 {
            let _ = sse.stream.shutdown(std::net::Shutdown::Write);
            let mut all = raw.clone();
            let _ = sse.stream.read_to_end(&mut all);
            sse.refused = parse_response(&all);
        }
        Ok(sse)
    }

    fn decode(&mut self) -> bool {
        let mut progressed = false;
        loop {
            match self.state {
                Chunk::Size => {
                    let Some(end) = find(&self.raw, b"\r\n") else { return progressed };
                    let size = String::from_utf8_lossy(&self.raw[..end]).split(';').next().unwrap_or("").trim().to_owned();
                    let n = usize::from_str_radix(&size, 16).unwrap_or(0);
                    self.raw.drain(..end + 2);
                    self.state = if n == 0 { Chunk::Done } else { Chunk::Data(n) };
                }
                Chunk::Data(n) => {
                    if self.raw.is_empty() {
                        return progressed;
                    }
                    let take = n.min(self.raw.len());
                    self.body.extend(self.raw.drain(..take));
                    self.state = if take == n { Chunk::Crlf } else { Chunk::Data(n - take) };
                }
                Chunk::Crlf => {
                    if self.raw.len() < 2 {
                        return progressed;
                    }
                    self.raw.drain(..2);
                    self.state = Chunk::Size;
                }
                Chunk::Done => return progressed,
            }
            progressed = true;
        }
    }

    fn take_event(&mut self) -> Option<SseEvent> {
        loop {
            let end = find(&self.body, b"\n\n")?;
            let block: Vec<u8> = self.body.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&block);
            let mut id = None;
            let mut data = None;
            for line in text.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = v.trim().parse().ok();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data = serde_json::from_str(v.trim_start()).ok();
                }
            }
            if let Some(data) = data {
                return Some(SseEvent { id, data });
            }
        }
    }

    /// The next event; `Ok(None)` when the stream ended.
    ///
    /// # Errors
    ///
    /// A timeout (no event within `timeout`) or a connection failure.
    pub fn next(&mut self, timeout: Duration) -> io::Result<Option<SseEvent>> {
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 64 * 1024];
        loop {
            if let Some(ev) = self.take_event() {
                return Ok(Some(ev));
            }
            if self.decode() {
                continue;
            }
            if self.state == Chunk::Done {
                return Ok(None);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "no event in time"));
            }
            self.stream.set_read_timeout(Some(left))?;
            let n = self.stream.read(&mut buf)?;
            if n == 0 {
                return Ok(None);
            }
            self.raw.extend_from_slice(&buf[..n]);
        }
    }

    /// Reads events until `until` holds for one (returned with everything before it), the
    /// stream ends, or `timeout` passes.
    pub fn until(&mut self, timeout: Duration, until: impl Fn(&SseEvent) -> bool) -> (Vec<SseEvent>, bool) {
        let deadline = Instant::now() + timeout;
        let mut got = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next(left) {
                Ok(Some(ev)) => {
                    let hit = until(&ev);
                    got.push(ev);
                    if hit {
                        return (got, true);
                    }
                }
                _ => return (got, false),
            }
        }
    }

    /// The socket, to stop reading it or to close it.
    pub fn socket(&self) -> &TcpStream {
        &self.stream
    }
}

// ---------------------------------------------------------------------------------------------
// WebSocket
// ---------------------------------------------------------------------------------------------

/// An open `/frontend/v2` WebSocket.
pub struct Ws {
    ws: tungstenite::WebSocket<TcpStream>,
    /// Notifications received while waiting for responses.
    pub notifications: Vec<Value>,
}

/// Why a WebSocket could not be opened.
#[derive(Debug)]
pub enum WsRefused {
    /// The server answered the upgrade with this HTTP status.
    Status(u16),
    /// Something else went wrong.
    Other(String),
}

impl Ws {
    /// Opens `/frontend/v2` with `token` in the `Authorization` header.
    ///
    /// # Errors
    ///
    /// The refusal.
    pub fn connect(addr: SocketAddr, token: Option<&str>) -> Result<Ws, WsRefused> {
        use tungstenite::client::IntoClientRequest;
        let mut req = format!("ws://{addr}/frontend/v2").into_client_request().map_err(|e| WsRefused::Other(e.to_string()))?;
        if let Some(t) = token {
            req.headers_mut().insert("authorization", format!("Bearer {t}").parse().map_err(|_| WsRefused::Other("bad token".into()))?);
        }
        let stream = connect(addr).map_err(|e| WsRefused::Other(e.to_string()))?;
        match tungstenite::client(req, stream) {
            Ok((ws, _)) => Ok(Ws { ws, notifications: Vec::new() }),
            Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(r))) => Err(WsRefused::Status(r.status().as_u16())),
            Err(e) => Err(WsRefused::Other(e.to_string())),
        }
    }

    /// Sends one text message.
    ///
    /// # Errors
    ///
    /// When the connection is gone.
    pub fn send(&mut self, text: &str) -> Result<(), String> {
        self.ws.send(tungstenite::Message::text(text)).map_err(|e| e.to_string())
    }

    /// Sends one binary message.
    ///
    /// # Errors
    ///
    /// When the connection is gone.
    pub fn send_binary(&mut self, bytes: Vec<u8>) -> Result<(), String> {
        self.ws.send(tungstenite::Message::binary(bytes)).map_err(|e| e.to_string())
    }

    /// The next text message as JSON; `Err` with the close code (or a description) when the
    /// connection closes.
    ///
    /// # Errors
    ///
    /// The close code, or why reading failed.
    pub fn next(&mut self, timeout: Duration) -> Result<Value, String> {
        self.ws.get_ref().set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
        loop {
            match self.ws.read() {
                Ok(tungstenite::Message::Text(t)) => return serde_json::from_str(t.as_str()).map_err(|e| format!("not JSON: {e}")),
                Ok(tungstenite::Message::Close(f)) => return Err(format!("close {}", f.map_or(1005, |f| u16::from(f.code)))),
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// Sends a request and waits for the response with its id (notifications on the way are
    /// kept in `notifications`).
    ///
    /// # Errors
    ///
    /// When the connection closes first.
    pub fn call(&mut self, id: i64, method: &str, params: Value) -> Result<Value, String> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string())?;
        self.response(id)
    }

    /// Waits for the response with `id`.
    ///
    /// # Errors
    ///
    /// When the connection closes first.
    pub fn response(&mut self, id: i64) -> Result<Value, String> {
        let deadline = Instant::now() + READ_TIMEOUT;
        loop {
            let v = self.next(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1)))?;
            if v.get("id") == Some(&json!(id)) && v.get("method").is_none() {
                return Ok(v);
            }
            self.notifications.push(v);
        }
    }

    /// Closes the connection.
    pub fn close(mut self) {
        let _ = self.ws.close(None);
        let _ = self.ws.flush();
    }
}
