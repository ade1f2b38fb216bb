//! One connection of a message transport: the loop stdio and the WebSocket share, public for a
//! program that reads and writes its connections itself (its own framing, its own I/O threads,
//! messages of its own beside JSON-RPC) and wants the core to answer them.
//!
//! A [`Connection`] takes each message read ([`Connection::take`]) and answers it as the server's
//! other transports do: calls run concurrently, at most [`crate::Limits::max_in_flight`] at once
//! (one more is answered [`crate::codes::BUSY`], or the transport waits for [`Connection::room`]
//! before it reads on), in read order up to their first wait when the server is
//! [`crate::RpcServer::in_order`]; a caller's answers to the server's own requests
//! ([`crate::Peer::request`]) go to the requests that wait for them. Everything the connection
//! sends — replies, the handler's notifications and requests, and what the program queues
//! itself on [`Connection::outbound`] — comes out of one receiver, one whole JSON text per item,
//! in the order queued: the transport writes each as its frame (a line, a WebSocket message).
//!
//! ```
//! use openagents_rpc::{BoxFuture, Connection, Context, Handler, Identity, RpcError, RpcServer};
//! use serde_json::value::RawValue;
//!
//! struct Echo;
//! impl Handler for Echo {
//!     fn call<'a>(&'a self, _cx: &'a Context, _method: &'a str, params: Option<&'a RawValue>) -> BoxFuture<'a, Result<Box<RawValue>, RpcError>> {
//!         Box::pin(async move { Ok(params.map(ToOwned::to_owned).unwrap_or_else(openagents_rpc::null)) })
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let server = RpcServer::new(Echo).in_order(true);
//! let (mut conn, mut outbound) = Connection::new(&server, Identity::new("frames"));
//! // Frames read by the program's own transport:
//! for frame in [r#"{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]}"#, r#"{"jsonrpc":"2.0","id":2,"method":"echo","params":[2]}"#] {
//!     conn.room().await;
//!     conn.take(frame.as_bytes().to_vec()).await;
//! }
//! conn.finish().await;
//! assert_eq!(outbound.recv().await.as_deref(), Some(&br#"{"jsonrpc":"2.0","id":1,"result":[1]}"#[..]));
//! assert_eq!(outbound.recv().await.as_deref(), Some(&br#"{"jsonrpc":"2.0","id":2,"result":[2]}"#[..]));
//! assert_eq!(outbound.recv().await, None, "the queue closes once the connection is finished");
//! # });
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

use crate::message::{error_reply, refusal};
use crate::{Context, Identity, OUTBOUND_QUEUE, Peer, RpcError, RpcServer, codes};

/// What a connection does when a reply cannot be queued in time ([`Connection::patience`]).
type Stuck = (Duration, Arc<dyn Fn() + Send + Sync>);

/// One connection's calls in flight and its outbound queue. See the [module](self).
pub struct Connection {
    server: RpcServer,
    cx: Context,
    tx: mpsc::Sender<Vec<u8>>,
    permits: Arc<Semaphore>,
    tasks: JoinSet<()>,
    stuck: Option<Stuck>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("identity", self.cx.identity()).field("in_flight", &self.tasks.len()).finish_non_exhaustive()
    }
}

impl Connection {
    /// A connection of `identity` to `server`, and the receiver of everything it sends: each
    /// item one whole JSON text (no newline), in the order queued. The queue holds
    /// [`OUTBOUND_QUEUE`] messages; a call whose reply finds it full waits for room. It closes
    /// once the connection is finished and every sender (a [`Peer`] a handler kept, the
    /// [`Connection::outbound`] senders) is gone.
    pub fn new(server: &RpcServer, identity: Identity) -> (Connection, mpsc::Receiver<Vec<u8>>) {
        let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
        let cx = Context::new(identity, Peer::connected(tx.clone()));
        let permits = Arc::new(Semaphore::new(server.limits.max_in_flight));
        (Connection { server: server.clone(), cx, tx, permits, tasks: JoinSet::new(), stuck: None }, rx)
    }

    /// The same connection, its calls' [`Context`] carrying `data` ([`Context::with_data`]): what
    /// the program knows of this connection's caller beyond its identity (a grant, the
    /// connection's subscriptions).
    #[must_use]
    pub fn with_data(mut self, data: Arc<dyn std::any::Any + Send + Sync>) -> Connection {
        self.cx = self.cx.with_data(data);
        self
    }

    /// The same connection giving up on a caller that reads nothing: a reply (or a busy refusal)
    /// that cannot be queued within `patience` is dropped, and `on_stuck` is called — the
    /// transport then closes the connection (a WebSocket with 1013, try again later) rather than
    /// hold the calls waiting to answer. Without it, a reply waits for room as long as it takes
    /// and the caller's reading paces the connection.
    #[must_use]
    pub fn patience(mut self, patience: Duration, on_stuck: impl Fn() + Send + Sync + 'static) -> Connection {
        self.stuck = Some((patience, Arc::new(on_stuck)));
        self
    }

    /// The handle that reaches this connection's caller, as its calls' [`Context::peer`].
    pub fn peer(&self) -> &Peer {
        self.cx.peer()
    }

    /// A sender on the connection's outbound queue, for messages the program encodes itself
    /// (one event sent to many connections, encoded once; requests of a protocol of its own),
    /// each one whole JSON text, written in order with the replies.
    pub fn outbound(&self) -> mpsc::Sender<Vec<u8>> {
        self.tx.clone()
    }

    /// Waits until a call may start without being refused as busy: a transport that would
    /// rather stop reading than refuse (backpressure: a caller that writes without reading holds
    /// bounded work) waits here before it reads each message.
    pub async fn room(&self) {
        // The permit goes back at once: only `take` holds permits, and it is not running.
        let _ = self.permits.acquire().await;
    }

    /// How many calls are running.
    pub fn in_flight(&self) -> usize {
        self.server.limits.max_in_flight - self.permits.available_permits()
    }

    /// Takes one message: runs it on a task of its own (in read order up to its first wait on
    /// an [`RpcServer::in_order`] server; whole, before the next message, when it asked to with
    /// [`Context::hold_connection`]), or answers busy at once when the connection has its most
    /// calls in flight. A message of only whitespace is nothing; a response goes to the
    /// server's request that waits for it.
    pub async fn take<B: AsRef<[u8]> + Send + 'static>(&mut self, message: B) {
        while self.tasks.try_join_next().is_some() {}
        let bytes = message.as_ref();
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        if crate::message::take_if_answer(&self.server, &self.cx, bytes) {
            return;
        }
        let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() else {
            let max = self.server.limits.max_in_flight;
            let e = RpcError::new(codes::BUSY, format!("Busy: this connection already has {max} calls in flight; send more once one has answered"));
            if let Some(m) = &self.server.metrics {
                m.error(e.code);
            }
            if let Some(reply) = refusal(&self.server, bytes, &self.server.core_error(e)) {
                send(&self.tx, reply, self.stuck.as_ref()).await;
            }
            return;
        };
        let (server, cx, tx) = (self.server.clone(), self.cx.for_message(), self.tx.clone());
        let stuck = self.stuck.clone();
        let asked = cx.per_message();
        let call = async move {
            if let Some(reply) = crate::message::handle_message(&server, &cx, message.as_ref()).await {
                send(&tx, reply, stuck.as_ref()).await;
            }
            for then in cx.take_after() {
                then.await;
            }
            drop(permit);
        };
        if !self.server.in_order {
            self.tasks.spawn(call);
            return;
        }
        // Up to its first wait here, in read order; the rest on a task of its own. Unconstrained
        // by Tokio's cooperative budget, which this task spends on every message it starts: with
        // the budget spent, a free lock or a channel with room would answer "pending" and the call
        // would go on after later ones.
        let mut call = Box::pin(call);
        let pending = {
            let mut poll_cx = std::task::Context::from_waker(std::task::Waker::noop());
            std::pin::pin!(tokio::task::unconstrained(call.as_mut())).poll(&mut poll_cx).is_pending()
        };
        if pending {
            if asked.is_some_and(|a| a.holds()) {
                call.await;
            } else {
                self.tasks.spawn(call);
            }
        }
    }

    /// Answers a message longer than the frame bound ([`crate::Limits::max_frame_bytes`]),
    /// which the transport skipped unread: [`codes::FRAME_TOO_LARGE`], with a `null` id.
    pub async fn too_large(&mut self) {
        let max = self.server.limits.max_frame_bytes;
        let e = RpcError::new(codes::FRAME_TOO_LARGE, format!("Frame too large: the message is longer than {max} bytes; it was discarded unread"));
        if let Some(m) = &self.server.metrics {
            m.error(e.code);
        }
        send(&self.tx, error_reply(&self.server.core_error(e)), self.stuck.as_ref()).await;
    }

    /// Waits for every call in flight to answer; the outbound queue then closes once what is
    /// queued is taken and every other sender is gone. Requests of the server's still waiting
    /// for the caller's answer end ([`crate::PeerError::Closed`]): none can come any more.
    pub async fn finish(mut self) {
        self.cx.peer().close_requests();
        while self.tasks.join_next().await.is_some() {}
    }

    /// [`Connection::finish`] for a caller that has gone, or a connection that must close in
    /// time: waits at most `wait` for the calls in flight, then leaves those still running to
    /// finish on their own (what they do is not undone; their replies go to the outbound queue
    /// while it is open, and nowhere after) and returns.
    pub async fn close(mut self, wait: Duration) {
        self.cx.peer().close_requests();
        let _ = tokio::time::timeout(wait, async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await;
        self.tasks.detach_all();
    }
}

/// Queues `reply`, within the connection's patience when it has one.
async fn send(tx: &mpsc::Sender<Vec<u8>>, reply: Vec<u8>, stuck: Option<&Stuck>) {
    match stuck {
        None => {
            let _ = tx.send(reply).await;
        }
        Some((patience, on_stuck)) => {
            if tokio::time::timeout(*patience, tx.send(reply)).await.is_err() {
                on_stuck();
            }
        }
    }
}
