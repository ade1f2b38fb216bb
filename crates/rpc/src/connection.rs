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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};
use tokio::task::JoinSet;

use crate::message::{error_reply, refusal};
use crate::{BoxFuture, Context, Identity, OUTBOUND_QUEUE, Peer, RpcError, RpcServer, codes};

/// What a connection does when a reply cannot be queued in time ([`Connection::patience`]).
type Stuck = (Duration, Arc<dyn Fn() + Send + Sync>);

/// One connection's calls in flight and its outbound queue. See the [module](self).
pub struct Connection {
    server: Arc<RpcServer>,
    cx: Context,
    tx: mpsc::Sender<Vec<u8>>,
    slots: Arc<Slots>,
    tasks: JoinSet<()>,
    stuck: Option<Stuck>,
    /// Replies answered at once, joined by the separator, not queued yet ([`Connection::gather`]).
    gathered: Option<(u8, Vec<u8>)>,
}

/// How large gathered replies grow before they are queued without waiting for
/// [`Connection::flush`].
pub const GATHER_BYTES: usize = 32 * 1024;

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("identity", self.cx.identity()).field("in_flight", &self.in_flight()).finish_non_exhaustive()
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
        let slots = Arc::new(Slots { max: server.limits.max_in_flight, taken: AtomicUsize::new(0), freed: Notify::new() });
        (Connection { server: Arc::new(server.clone()), cx, tx, slots, tasks: JoinSet::new(), stuck: None, gathered: None }, rx)
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

    /// The same connection gathering the replies of calls that answer at once (on an
    /// [`RpcServer::in_order`] server, before their first wait) into one item of the outbound
    /// queue, joined by `separator`, instead of an item each: for a transport that writes many
    /// together (stdio's lines under a parent that pipelines: `b'\n'`). What is gathered is
    /// queued before anything else the connection queues itself (a reply that waited, a busy or
    /// frame-too-large refusal, [`Connection::queue`]) and before a call that waits starts on a
    /// task of its own, once it passes [`GATHER_BYTES`], at [`Connection::flush`] (a transport
    /// flushes before it waits for input) and at the end: replies keep the order their calls
    /// were read in, but for a call that waits, whose reply comes when it is ready.
    #[must_use]
    pub fn gather(mut self, separator: u8) -> Connection {
        self.gathered = Some((separator, Vec::new()));
        self
    }

    /// Queues the replies gathered so far ([`Connection::gather`]) as one item, waiting for room
    /// (within the connection's patience).
    pub async fn flush(&mut self) {
        let Some((_, held)) = &mut self.gathered else { return };
        if held.is_empty() {
            return;
        }
        // Room for as much as this batch held: a busy connection's batches do not grow by
        // copying, an idle one's stay small.
        let next = Vec::with_capacity(held.len().min(GATHER_BYTES) + 1024);
        let batch = std::mem::replace(held, next);
        send(&self.tx, batch, self.stuck.as_ref()).await;
    }

    /// Queues a message the program encoded itself (an answer of a protocol of its own), after
    /// what is gathered, within the connection's patience ([`Connection::patience`]).
    pub async fn queue(&mut self, message: Vec<u8>) {
        self.flush().await;
        send(&self.tx, message, self.stuck.as_ref()).await;
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
    /// bounded work) waits here before it reads each message. Not for a connection whose calls
    /// wait for the caller's answers ([`Peer::request`]): those answers come in on the same
    /// input, and calls that all wait for them would wait for ever. Returns at once when the
    /// server takes no calls at all (`max_in_flight` 0: every call is refused busy).
    pub async fn room(&self) {
        if self.slots.max == 0 {
            return;
        }
        loop {
            // Registered before the look, so a slot freed after it wakes the wait.
            let freed = self.slots.freed.notified();
            if self.in_flight() < self.slots.max {
                return;
            }
            freed.await;
        }
    }

    /// How many calls are running.
    pub fn in_flight(&self) -> usize {
        self.slots.taken.load(Ordering::Acquire)
    }

    /// Takes one message: runs it on a task of its own (in read order up to its first wait on
    /// an [`RpcServer::in_order`] server; whole, before the next message, when it asked to with
    /// [`Context::hold_connection`]), or answers busy at once when the connection has its most
    /// calls in flight. A message of only whitespace is nothing; a response goes to the
    /// server's request that waits for it, whatever is in flight.
    pub async fn take<B: AsRef<[u8]> + Send + 'static>(&mut self, message: B) {
        while !self.tasks.is_empty() && self.tasks.try_join_next().is_some() {}
        let bytes = message.as_ref();
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        // An answer to a request of the server's is taken here, never counted in flight (the
        // call that waits for it may be what fills the connection). A message that names a
        // method is a request (or a notification) but for a rare answer whose result holds the
        // word, which the call below takes in the one pass that reads its envelope (or, when
        // the connection is full, the check below).
        if !names_method(bytes)
            && let Some(refused) = crate::message::take_if_answer(&self.server, &self.cx, bytes)
        {
            if let Some(reply) = refused {
                self.queue(reply).await;
            }
            return;
        }
        let Some(slot) = Slot::take(&self.slots) else {
            if let Some(refused) = crate::message::take_if_answer(&self.server, &self.cx, bytes) {
                if let Some(reply) = refused {
                    self.queue(reply).await;
                }
                return;
            }
            let max = self.server.limits.max_in_flight;
            let e = RpcError::new(codes::BUSY, format!("Busy: this connection already has {max} calls in flight; send more once one has answered"));
            if let Some(m) = &self.server.metrics {
                m.error(e.code);
            }
            if let Some(reply) = refusal(&self.server, bytes, &self.server.core_error(e)) {
                self.queue(reply).await;
            }
            return;
        };
        let (server, cx) = (Arc::clone(&self.server), self.cx.for_message());
        let asked = cx.per_message();
        let answer = async move {
            let reply = crate::message::handle_message(&server, &cx, message.as_ref()).await;
            (reply, cx.take_after())
        };
        let (tx, stuck) = (self.tx.clone(), self.stuck.clone());
        if !self.server.in_order {
            self.tasks.spawn(async move {
                let (reply, after) = answer.await;
                deliver(reply, after, tx, stuck, slot).await;
            });
            return;
        }
        // Up to its first wait here, in read order; the rest on a task of its own. Unconstrained
        // by Tokio's cooperative budget, which this task spends on every message it starts: with
        // the budget spent, a free lock or a channel with room would answer "pending" and the call
        // would go on after later ones.
        let mut answer = Box::pin(answer);
        let polled = {
            let mut poll_cx = std::task::Context::from_waker(std::task::Waker::noop());
            std::pin::pin!(tokio::task::unconstrained(answer.as_mut())).poll(&mut poll_cx)
        };
        let held = asked.is_some_and(|a| a.holds());
        let (reply, after) = match polled {
            std::task::Poll::Ready(answered) => answered,
            // Asked to hold the connection: answered before the next message is read.
            std::task::Poll::Pending if held => answer.as_mut().await,
            std::task::Poll::Pending => {
                // What was answered before it is queued before it can answer.
                self.flush().await;
                self.tasks.spawn(async move {
                    let (reply, after) = answer.await;
                    deliver(reply, after, tx, stuck, slot).await;
                });
                return;
            }
        };
        drop(answer);
        if after.is_empty() {
            let Some(reply) = reply else { return };
            if !held && let Some((separator, held)) = &mut self.gathered {
                if !held.is_empty() {
                    held.push(*separator);
                }
                held.extend_from_slice(&reply);
                if held.len() >= GATHER_BYTES {
                    self.flush().await;
                }
                return;
            }
            self.flush().await;
            // Queued at once when there is room, as most replies are; else here, keeping its
            // place in the queue's order.
            if let Err(mpsc::error::TrySendError::Full(reply)) = tx.try_send(reply) {
                send(&tx, reply, stuck.as_ref()).await;
            }
            drop(slot);
            return;
        }
        // What runs after the reply: up to its first wait here, the rest on a task of its own.
        self.flush().await;
        let mut rest = Box::pin(deliver(reply, after, tx, stuck, slot));
        if held {
            rest.await;
            return;
        }
        let mut poll_cx = std::task::Context::from_waker(std::task::Waker::noop());
        if std::pin::pin!(tokio::task::unconstrained(rest.as_mut())).poll(&mut poll_cx).is_pending() {
            self.tasks.spawn(rest);
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
        self.queue(error_reply(&self.server.core_error(e))).await;
    }

    /// Waits for every call in flight to answer; the outbound queue then closes once what is
    /// queued is taken and every other sender is gone. Requests of the server's still waiting
    /// for the caller's answer end ([`crate::PeerError::Closed`]): none can come any more.
    pub async fn finish(mut self) {
        self.flush().await;
        self.cx.peer().close_requests();
        while self.tasks.join_next().await.is_some() {}
    }

    /// [`Connection::finish`] for a caller that has gone, or a connection that must close in
    /// time: waits at most `wait` for the calls in flight, then leaves those still running to
    /// finish on their own (what they do is not undone; their replies go to the outbound queue
    /// while it is open, and nowhere after) and returns.
    pub async fn close(mut self, wait: Duration) {
        self.flush().await;
        self.cx.peer().close_requests();
        let _ = tokio::time::timeout(wait, async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await;
        self.tasks.detach_all();
    }
}

/// Queues a call's reply, then runs what it asked to run after it, then gives its place back.
async fn deliver(reply: Option<Vec<u8>>, after: Vec<BoxFuture<'static, ()>>, tx: mpsc::Sender<Vec<u8>>, stuck: Option<Stuck>, slot: Slot) {
    if let Some(reply) = reply {
        send(&tx, reply, stuck.as_ref()).await;
    }
    for then in after {
        then.await;
    }
    drop(slot);
}

/// Whether `bytes` hold the member name `"method"` (or that text in a string).
fn names_method(bytes: &[u8]) -> bool {
    static METHOD: std::sync::LazyLock<memchr::memmem::Finder<'static>> = std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"method\""));
    METHOD.find(bytes).is_some()
}

/// Queues `reply`, within the connection's patience when it has one.
async fn send(tx: &mpsc::Sender<Vec<u8>>, reply: Vec<u8>, stuck: Option<&Stuck>) {
    match stuck {
        None => {
            let _ = tx.send(reply).await;
        }
        Some((patience, on_stuck)) => {
            // Boxed: a timer is large, and every call's future would carry its room.
            if Box::pin(tokio::time::timeout(*patience, tx.send(reply))).await.is_err() {
                on_stuck();
            }
        }
    }
}

/// A connection's places for calls in flight: counted without a lock; a call that gives its
/// place back to a full connection wakes whoever waits for [`Connection::room`].
struct Slots {
    max: usize,
    taken: AtomicUsize,
    freed: Notify,
}

/// One call's place, given back when dropped.
struct Slot(Arc<Slots>);

impl Slot {
    fn take(slots: &Arc<Slots>) -> Option<Slot> {
        slots.taken.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < slots.max).then_some(n + 1)).ok()?;
        Some(Slot(Arc::clone(slots)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.0.taken.fetch_sub(1, Ordering::AcqRel) == self.0.max {
            self.0.freed.notify_waiters();
        }
    }
}

