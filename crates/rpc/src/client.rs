//! The client side: the [`Transport`] a generated client calls through, and its three
//! implementations — [`LineTransport`] (one JSON text per line, over a child process's stdio or
//! any byte stream), [`HttpTransport`] (`POST /rpc`) and [`WsTransport`] (`GET /rpc` upgraded).
//! The streaming two also deliver the server's notifications ([`LineTransport::notifications`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use crate::stdio::{Line, read_line};

#[cfg(feature = "http")]
mod web;
#[cfg(feature = "http")]
pub use web::{HttpTransport, WsTransport};
use crate::{BoxFuture, MAX_FRAME_BYTES, RpcError};

/// Why a call did not answer a result.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error.
    #[error(transparent)]
    Rpc(#[from] RpcError),
    /// The transport failed (connecting, writing, an HTTP status without a JSON-RPC answer).
    #[error("transport: {0}")]
    Transport(String),
    /// The answer is not a JSON-RPC response, or its result breaks the method's schema.
    #[error("the server's answer is not what the schema says: {0}")]
    Decode(String),
    /// The connection closed before the answer came.
    #[error("the connection is closed")]
    Closed,
}

/// A notification the server sent.
#[derive(Debug, Clone)]
pub struct Notification {
    /// Its method.
    pub method: String,
    /// Its params, as sent.
    pub params: Option<Box<RawValue>>,
}

/// A request the server sent the client ([`crate::Peer::request`] on its side), to answer once:
/// [`ServerRequest::answer`] or [`ServerRequest::refuse`]. Dropped unanswered, it is refused
/// with -32603, so the server never waits for an answer that cannot come.
#[derive(Debug)]
pub struct ServerRequest {
    /// Its method.
    pub method: String,
    /// Its params, as sent.
    pub params: Option<Box<RawValue>>,
    id: Box<RawValue>,
    out: Option<mpsc::Sender<Vec<u8>>>,
}

impl ServerRequest {
    /// Its id, as the server wrote it.
    pub fn id(&self) -> &RawValue {
        &self.id
    }

    fn reply(&mut self, outcome: Result<&RawValue, &RpcError>) -> Option<(mpsc::Sender<Vec<u8>>, Vec<u8>)> {
        let out = self.out.take()?;
        let mut line = Vec::with_capacity(64);
        crate::message::encode_response(Some(&self.id), outcome, &mut line);
        Some((out, line))
    }

    /// Answers the request with `result`.
    ///
    /// # Errors
    ///
    /// [`ClientError::Closed`] when the connection has closed.
    pub async fn answer(mut self, result: &RawValue) -> Result<(), ClientError> {
        let Some((out, line)) = self.reply(Ok(result)) else { return Err(ClientError::Closed) };
        out.send(line).await.map_err(|_| ClientError::Closed)
    }

    /// Refuses the request with `error`.
    ///
    /// # Errors
    ///
    /// [`ClientError::Closed`] when the connection has closed.
    pub async fn refuse(mut self, error: &RpcError) -> Result<(), ClientError> {
        let Some((out, line)) = self.reply(Err(error)) else { return Err(ClientError::Closed) };
        out.send(line).await.map_err(|_| ClientError::Closed)
    }
}

impl Drop for ServerRequest {
    fn drop(&mut self) {
        let e = RpcError::new(crate::codes::INTERNAL_ERROR, "Internal error: the client dropped the request without answering it");
        if let Some((out, line)) = self.reply(Err(&e)) {
            let _ = out.try_send(line);
        }
    }
}

/// How many server requests wait for [`LineTransport::requests`]'s reader before the connection
/// stops reading.
pub const REQUEST_QUEUE: usize = 64;

/// How a client reaches a server: a call answers the raw result, a notification nothing.
/// Object-safe; generated clients hold an `Arc<dyn Transport>`.
pub trait Transport: Send + Sync + 'static {
    /// Calls `method` with `params` (`None`: the request has no `params` member).
    fn call<'a>(&'a self, method: &'a str, params: Option<Box<RawValue>>) -> BoxFuture<'a, Result<Box<RawValue>, ClientError>>;
    /// Sends the notification `method` with `params`.
    fn notify<'a>(&'a self, method: &'a str, params: Option<Box<RawValue>>) -> BoxFuture<'a, Result<(), ClientError>>;
}

impl<T: Transport + ?Sized> Transport for Arc<T> {
    fn call<'a>(&'a self, method: &'a str, params: Option<Box<RawValue>>) -> BoxFuture<'a, Result<Box<RawValue>, ClientError>> {
        (**self).call(method, params)
    }
    fn notify<'a>(&'a self, method: &'a str, params: Option<Box<RawValue>>) -> BoxFuture<'a, Result<(), ClientError>> {
        (**self).notify(method, params)
    }
}

/// How many server notifications wait for [`LineTransport::notifications`]'s reader before the
/// connection stops reading (backpressure, bounded memory).
pub const NOTIFICATION_QUEUE: usize = 1024;

/// A request (with `id`) or a notification as JSON-RPC 2.0 text: what a client sends, and what a
/// server sends its caller ([`crate::Peer`]).
pub(crate) fn request(id: Option<u64>, method: &str, params: Option<&RawValue>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + method.len() + params.map_or(0, |p| p.get().len()));
    out.extend_from_slice(br#"{"jsonrpc":"2.0","#);
    if let Some(id) = id {
        out.extend_from_slice(format!(r#""id":{id},"#).as_bytes());
    }
    out.extend_from_slice(br#""method":"#);
    out.extend_from_slice(serde_json::to_string(method).unwrap_or_default().as_bytes());
    if let Some(p) = params {
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(p.get().as_bytes());
    }
    out.push(b'}');
    out
}

/// A message from the server, read member by member.
#[derive(serde::Deserialize)]
struct Incoming<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<RpcError>,
    #[serde(default)]
    method: Option<String>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

/// The outcome a response carries (a `null` result is the raw `null`).
fn outcome(text: &str, msg: &Incoming<'_>) -> Result<Box<RawValue>, ClientError> {
    if let Some(e) = &msg.error {
        return Err(ClientError::Rpc(e.clone()));
    }
    match msg.result {
        Some(r) => Ok(r.to_owned()),
        None if text.contains("\"result\"") => Ok(crate::null()),
        None => Err(ClientError::Decode("a response without `result` or `error`".into())),
    }
}

/// Where one call's answer goes.
type Answer = oneshot::Sender<Result<Box<RawValue>, ClientError>>;

/// What the streaming transports share: the calls waiting for answers and where notifications go.
#[derive(Default)]
struct Pending {
    next_id: AtomicU64,
    closed: AtomicBool,
    waiting: Mutex<HashMap<u64, Answer>>,
    notifications: Mutex<Option<mpsc::Sender<Notification>>>,
    requests: Mutex<Option<mpsc::Sender<ServerRequest>>>,
}

impl Pending {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Answer>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new id and the receiver of its answer.
    #[allow(clippy::type_complexity)]
    fn open(&self) -> Result<(u64, oneshot::Receiver<Result<Box<RawValue>, ClientError>>), ClientError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(ClientError::Closed);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id, tx);
        Ok((id, rx))
    }

    /// Routes one message from the server: an answer to its call, a notification to the queue,
    /// a request to [`LineTransport::requests`]'s reader (without one, refused -32601 at once).
    /// `out` is weak, so that a client closing its side (dropping its sender) closes the
    /// connection; a request holds it strongly until answered.
    async fn route(&self, text: &str, out: &mpsc::WeakSender<Vec<u8>>) {
        let Ok(msg) = serde_json::from_str::<Incoming<'_>>(text) else { return };
        if let Some(method) = &msg.method {
            if let Some(id) = msg.id {
                let Some(out) = out.upgrade() else { return };
                let mut request = ServerRequest { method: method.clone(), params: msg.params.map(ToOwned::to_owned), id: id.to_owned(), out: Some(out) };
                let tx = self.requests.lock().unwrap_or_else(|p| p.into_inner()).clone();
                match tx {
                    Some(tx) => {
                        // A reader gone since is the same as none: the request is refused as dropped.
                        let _ = tx.send(request).await;
                    }
                    None => {
                        let e = RpcError::method_not_found(method);
                        if let Some((out, line)) = request.reply(Err(&e)) {
                            let _ = out.send(line).await;
                        }
                    }
                }
                return;
            }
            let tx = self.notifications.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some(tx) = tx {
                let _ = tx.send(Notification { method: method.clone(), params: msg.params.map(ToOwned::to_owned) }).await;
            }
            return;
        }
        let Some(id) = msg.id.and_then(|i| i.get().parse::<u64>().ok()) else { return };
        let waiter = self.lock().remove(&id);
        if let Some(w) = waiter {
            let _ = w.send(outcome(text, &msg));
        }
    }

    /// The connection ended: every waiting call fails.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.lock().clear();
        self.notifications.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.requests.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    fn subscribe_requests(&self) -> mpsc::Receiver<ServerRequest> {
        let (tx, rx) = mpsc::channel(REQUEST_QUEUE);
        *self.requests.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
        rx
    }

    fn subscribe(&self) -> mpsc::Receiver<Notification> {
        let (tx, rx) = mpsc::channel(NOTIFICATION_QUEUE);
        *self.notifications.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
        rx
    }

    async fn call(&self, out: &mpsc::Sender<Vec<u8>>, method: &str, params: Option<Box<RawValue>>) -> Result<Box<RawValue>, ClientError> {
        let (id, rx) = self.open()?;
        if out.send(request(Some(id), method, params.as_deref())).await.is_err() {
            self.lock().remove(&id);
            return Err(ClientError::Closed);
        }
        rx.await.map_err(|_| ClientError::Closed)?
    }
}

/// A client over lines: one JSON text per line each way, over a child process's stdin and
/// stdout ([`LineTransport::spawn`]) or any byte stream ([`LineTransport::new`]). Calls may run
/// concurrently; answers are matched by id.
pub struct LineTransport {
    pending: Arc<Pending>,
    out: mpsc::Sender<Vec<u8>>,
    child: Mutex<Option<tokio::process::Child>>,
}

impl LineTransport {
    /// A client reading `reader` and writing `writer` (tasks on the current Tokio runtime).
    pub fn new<R, W>(reader: R, writer: W) -> LineTransport
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let pending = Arc::new(Pending::default());
        let (out, mut rx) = mpsc::channel::<Vec<u8>>(crate::OUTBOUND_QUEUE);
        tokio::spawn(async move {
            let mut w = tokio::io::BufWriter::new(writer);
            while let Some(mut line) = rx.recv().await {
                line.push(b'\n');
                if w.write_all(&line).await.is_err() {
                    break;
                }
                if rx.is_empty() && w.flush().await.is_err() {
                    break;
                }
            }
            let _ = w.shutdown().await;
        });
        let (p, replies) = (Arc::clone(&pending), out.downgrade());
        tokio::spawn(async move {
            let mut r = tokio::io::BufReader::new(reader);
            loop {
                match read_line(&mut r, MAX_FRAME_BYTES).await {
                    Ok(Line::Text(line)) => {
                        if let Ok(text) = std::str::from_utf8(&line) {
                            p.route(text, &replies).await;
                        }
                    }
                    Ok(Line::TooLong) => {}
                    Ok(Line::Eof) | Err(_) => break,
                }
            }
            p.close();
        });
        LineTransport { pending, out, child: Mutex::new(None) }
    }

    /// A client of a server started as `command`, over its stdin and stdout (its stderr is
    /// inherited; it is killed when the client is dropped).
    ///
    /// # Errors
    ///
    /// The command could not start.
    pub fn spawn(command: &mut tokio::process::Command) -> std::io::Result<LineTransport> {
        let mut child = command.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).kill_on_drop(true).spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else { return Err(std::io::Error::other("the child has no piped stdio")) };
        let t = LineTransport::new(stdout, stdin);
        *t.child.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
        Ok(t)
    }

    /// The server's notifications from now on (a second call replaces the first receiver).
    /// Until it is called they are dropped.
    pub fn notifications(&self) -> mpsc::Receiver<Notification> {
        self.pending.subscribe()
    }

    /// The server's requests from now on, each to answer once (a second call replaces the first
    /// receiver). Until it is called, they are refused with -32601.
    pub fn requests(&self) -> mpsc::Receiver<ServerRequest> {
        self.pending.subscribe_requests()
    }

    /// Closes the input of the server (its stdin, for a child), which ends a line server, and
    /// waits for a child to exit.
    ///
    /// # Errors
    ///
    /// Waiting for the child failed.
    pub async fn close(self) -> std::io::Result<Option<std::process::ExitStatus>> {
        drop(self.out);
        let child = self.child.lock().unwrap_or_else(|p| p.into_inner()).take();
        match child {
            Some(mut c) => c.wait().await.map(Some),
            None => Ok(None),
        }
    }
}

impl Transport for LineTransport {
    fn call<'a>(&'a self, method: &'a str, params: Option<Box<RawValue>>) -> BoxFuture<'a, Result<Box<RawValue>, ClientError>> {
        Box::pin(self.pending.call(&self.out, method, params))
    }
    fn notify<'a>(&'a self, method: &'a str, params: Option<Box<RawValue>>) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move { self.out.send(request(None, method, params.as_deref())).await.map_err(|_| ClientError::Closed) })
    }
}
