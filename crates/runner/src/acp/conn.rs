//! The host's end of its connection to an ACP agent, on the openagents-rpc core: the agent's
//! stdout is read and its stdin written by `openagents_rpc::connect_lines`; the agent's requests
//! and notifications are served by the client side generated from ACP's schema
//! (`acp::service::client_side::Service`, implemented by [`ClientSide`]) and handed, in the order
//! the agent sent them, to the turn that waits ([`Incoming`]); the host's own requests go out
//! through the connection's `Peer`, which matches the agent's answers to them.
//!
//! The agent is a program the host does not trust, so the connection is strict where the core
//! alone would answer and go on: a line the core refuses (not JSON, not JSON-RPC 2.0 — a member
//! given twice or one JSON-RPC lacks included —, longer than `MAX_FRAME`) is an
//! [`Incoming::Fault`] that fails the turn, and so is a known notification that breaks ACP's
//! schema. Payloads go through the generated exact decoders, which refuse a key given twice. What the agent writes is metered
//! ([`Meter`]): past `MAX_OUTPUT` bytes in a turn, reading stops and the connection ends.
//!
//! Order is what makes a turn's result whole: the core starts each message's call in read order
//! (`RpcServer::in_order`) and a notification is queued before the next line is read, so every
//! `session/update` the agent sent before answering `session/prompt` is in the queue before the
//! answer reaches the host.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::Poll;

use openagents_protocol::acp::service::client_side as service;
use openagents_protocol::acp::{self, client_side};
use openagents_protocol::rt::RpcMethod;
use openagents_protocol::{MAX_FRAME, MAX_OUTPUT};
use openagents_rpc::{BoxFuture, Context, Handler, Limits, Peer, RpcError, RpcServer, Shutdown, codes};
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, oneshot};

use super::{AcpError, clip, describe, wire};

/// What the agent sent, in order, for the turn waiting on it.
pub(super) enum Incoming {
    /// A `session/update` that matches ACP's schema.
    Update(acp::SessionNotification),
    /// A `session/request_permission`: the option to select goes back (`None`: `cancelled`).
    Permission(acp::RequestPermissionRequest, oneshot::Sender<Option<String>>),
    /// The agent broke the protocol.
    Fault(AcpError),
}

/// What the agent may still write in this turn, and how much it wrote in all.
#[derive(Debug)]
pub(super) struct Meter {
    left: AtomicUsize,
    read: AtomicU64,
    spent: AtomicBool,
}

impl Meter {
    fn new() -> Meter {
        Meter { left: AtomicUsize::new(MAX_OUTPUT), read: AtomicU64::new(0), spent: AtomicBool::new(false) }
    }

    /// A budget of [`MAX_OUTPUT`] bytes again (a turn's, or a replay's).
    pub(super) fn reset(&self) {
        self.left.store(MAX_OUTPUT, Ordering::Relaxed);
    }

    /// The bytes read from the agent so far.
    pub(super) fn read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    /// Whether the agent wrote past its budget (and reading stopped).
    pub(super) fn spent(&self) -> bool {
        self.spent.load(Ordering::Relaxed)
    }
}

/// The agent's stdout, metered.
struct Metered<R> {
    inner: R,
    meter: Arc<Meter>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Metered<R> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            let n = buf.filled().len() - before;
            this.meter.read.fetch_add(n as u64, Ordering::Relaxed);
            if this.meter.left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(n)).is_err() {
                this.meter.spent.store(true, Ordering::Relaxed);
                return Poll::Ready(Err(std::io::Error::other(format!("the agent wrote more than MAX_OUTPUT ({MAX_OUTPUT} bytes)"))));
            }
        }
        polled
    }
}

/// The host's end of a connection to an agent.
pub(super) struct Connection {
    /// Sends the agent the host's requests and notifications.
    pub(super) peer: Peer,
    /// What the agent sent, in order.
    pub(super) incoming: mpsc::UnboundedReceiver<Incoming>,
    /// What the agent wrote.
    pub(super) meter: Arc<Meter>,
    /// Ends the connection: reading stops, what is queued for the agent is written, its stdin
    /// closes.
    pub(super) shutdown: Shutdown,
    /// The connection while it runs; it ends when the agent's stdout does (or reading stops).
    pub(super) task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Connects to an agent over its stdout and stdin.
pub(super) fn connect<R, W>(stdout: R, stdin: W) -> Connection
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, incoming) = mpsc::unbounded_channel();
    let meter = Arc::new(Meter::new());
    // The agent's messages, counted as the screen sees them (every one but blank lines), so a
    // fault can say which it was.
    let seen = Arc::new(AtomicUsize::new(0));
    let shutdown = Shutdown::new();
    let handler = ClientSide { tx: tx.clone(), seen: Arc::clone(&seen) };
    let counted = Arc::clone(&seen);
    let refused = Arc::clone(&seen);
    let server = RpcServer::new(handler)
        // The agent's own requests wait for the turn's approver at most; a few hundred at once is
        // already a broken agent.
        .limits(Limits { max_frame_bytes: MAX_FRAME, max_in_flight: 256, max_batch: 0, ..Limits::default() })
        .in_order(true)
        .shutdown_on(shutdown.clone())
        // Not a check: the screen sees every message first, so it counts them.
        .screen(move |_| {
            counted.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
        .on_refusal(move |e| {
            let fault = if e.code == codes::FRAME_TOO_LARGE { AcpError::FrameTooLarge } else { AcpError::NotAcp { message_no: refused.load(Ordering::Relaxed), message: clip(&e.message, 512) } };
            let _ = tx.send(Incoming::Fault(fault));
        });
    let reader = tokio::io::BufReader::with_capacity(64 * 1024, Metered { inner: stdout, meter: Arc::clone(&meter) });
    let (peer, run) = openagents_rpc::connect_lines(&server, reader, stdin);
    Connection { peer, incoming, meter, shutdown, task: tokio::spawn(run) }
}

/// The client side of ACP as the host serves it to its agent.
struct ClientSide {
    tx: mpsc::UnboundedSender<Incoming>,
    seen: Arc<AtomicUsize>,
}

/// -32601 for a client method openagents does not advertise.
fn not_advertised(method: &str) -> RpcError {
    RpcError::new(codes::METHOD_NOT_FOUND, format!("Method not found: {method}: openagents did not advertise this client capability; the agent uses its own tools"))
}

impl Handler for ClientSide {
    fn call<'a>(&'a self, cx: &'a Context, method: &'a str, params: Option<&'a RawValue>) -> BoxFuture<'a, Result<Box<RawValue>, RpcError>> {
        Box::pin(async move {
            // Absent params are read as `null`, which no ACP method's params accept.
            let text = params.map_or("null", RawValue::get);
            if let Some(n) = client_side::Notification::decode(method, text.as_bytes()) {
                match n {
                    Ok(n) => service::dispatch_notification(self, cx, n).await,
                    Err(e) => match wire::unknown_update_kind(text).filter(|_| method == "session/update") {
                        Some(kind) => tracing::debug!(kind = %clip(&kind, 64), "skipping a session/update of a kind ACP v1 does not have"),
                        None => {
                            let what = format!("{} (message {})", clip(method, 128), self.seen.load(Ordering::Relaxed));
                            let _ = self.tx.send(Incoming::Fault(AcpError::Schema { what, problem: describe(e) }));
                        }
                    },
                }
                return Ok(openagents_rpc::null());
            }
            match client_side::Request::decode(method, text.as_bytes()) {
                Some(Ok(request)) => service::dispatch_request(self, cx, request).await,
                Some(Err(e)) => Err(RpcError::new(codes::INVALID_PARAMS, format!("Invalid params for {}: {}", clip(method, 128), describe(e)))),
                // Unknown notifications are ignored, as ACP asks (the core drops their answer).
                None => Err(RpcError::new(codes::METHOD_NOT_FOUND, format!("Method not found: {}: openagents does not implement this client method", clip(method, 128)))),
            }
        })
    }
}

impl service::Service for ClientSide {
    async fn session_update(&self, _cx: &Context, update: acp::SessionNotification) {
        let _ = self.tx.send(Incoming::Update(update));
    }

    async fn session_request_permission(&self, _cx: &Context, request: acp::RequestPermissionRequest) -> Result<acp::RequestPermissionResponse, RpcError> {
        let (answer, chosen) = oneshot::channel();
        let _ = self.tx.send(Incoming::Permission(request, answer));
        // Nobody left to ask (the turn ended, the process is closing): `cancelled`.
        let outcome = match chosen.await {
            Ok(Some(option_id)) => acp::RequestPermissionOutcome::Selected { option_id, meta: None },
            _ => acp::RequestPermissionOutcome::Cancelled {},
        };
        Ok(acp::RequestPermissionResponse { outcome, meta: None })
    }

    async fn elicitation_create(&self, _cx: &Context, _params: acp::CreateElicitationRequest) -> Result<acp::CreateElicitationResponse, RpcError> {
        Err(not_advertised(client_side::ElicitationCreate::NAME))
    }

    async fn fs_read_text_file(&self, _cx: &Context, _params: acp::ReadTextFileRequest) -> Result<acp::ReadTextFileResponse, RpcError> {
        Err(not_advertised(client_side::FsReadTextFile::NAME))
    }

    async fn fs_write_text_file(&self, _cx: &Context, _params: acp::WriteTextFileRequest) -> Result<acp::WriteTextFileResponse, RpcError> {
        Err(not_advertised(client_side::FsWriteTextFile::NAME))
    }

    async fn terminal_create(&self, _cx: &Context, _params: acp::CreateTerminalRequest) -> Result<acp::CreateTerminalResponse, RpcError> {
        Err(not_advertised(client_side::TerminalCreate::NAME))
    }

    async fn terminal_kill(&self, _cx: &Context, _params: acp::KillTerminalRequest) -> Result<acp::KillTerminalResponse, RpcError> {
        Err(not_advertised(client_side::TerminalKill::NAME))
    }

    async fn terminal_output(&self, _cx: &Context, _params: acp::TerminalOutputRequest) -> Result<acp::TerminalOutputResponse, RpcError> {
        Err(not_advertised(client_side::TerminalOutput::NAME))
    }

    async fn terminal_release(&self, _cx: &Context, _params: acp::ReleaseTerminalRequest) -> Result<acp::ReleaseTerminalResponse, RpcError> {
        Err(not_advertised(client_side::TerminalRelease::NAME))
    }

    async fn terminal_wait_for_exit(&self, _cx: &Context, _params: acp::WaitForTerminalExitRequest) -> Result<acp::WaitForTerminalExitResponse, RpcError> {
        Err(not_advertised(client_side::TerminalWaitForExit::NAME))
    }
}
