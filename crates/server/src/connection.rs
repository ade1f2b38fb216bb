//! What the runtime adds to a streaming connection (stdio, the WebSocket) served by
//! openagents-rpc's [`Connection`](openagents_rpc::Connection): the connection's event stream,
//! restarted by `subscribe`, and the order of its answers after its events.
//!
//! The core starts a connection's calls in read order ([`openagents_rpc::RpcServer::in_order`])
//! and queues each reply on the connection's one outbound queue; the stream queues its events
//! on the same queue. Two rules keep what a caller reads in the order things happened:
//!
//! - a call that waits (a `submit`, a `shutdown`) answers after every event published before
//!   its answer is queued (a turn's `turn_completed` before its `submit`'s answer);
//! - a `subscribe` answers after what it replays, and the connection reads nothing further
//!   until it has ([`openagents_rpc::Context::hold_connection`]): whatever follows the
//!   `subscribe` finds the replay ahead of it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::engine::{EventSession, RpcEngine};
use crate::events::Forwarded;

/// How a stream gives up on a caller that reads nothing: an event that cannot be queued within
/// the duration cancels the token (the transport then closes the connection).
pub(crate) type Patience = (Duration, CancellationToken);

/// One connection's event stream: one forwarding task, restarted by `subscribe`.
pub(crate) struct EventStream {
    engine: RpcEngine,
    tx: mpsc::Sender<Vec<u8>>,
    /// How this transport writes an event (its JSON, as the hub encoded it once).
    encode: fn(&[u8]) -> Vec<u8>,
    patience: Option<Patience>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Set when the connection ends: forward events up to this sequence number, then stop.
    drain_to: watch::Sender<Option<i64>>,
    /// Set by `subscribe`: its answer waits until the new stream has queued what it replays.
    subscribed: AtomicBool,
    /// How far the current stream has queued events.
    forwarded: Forwarded,
}

impl EventStream {
    /// A stream (not started) queueing `engine`'s events on `tx`, each written by `encode`;
    /// with `patience`, an event that waits longer than it for room gives up on the caller.
    pub(crate) fn new(engine: &RpcEngine, tx: mpsc::Sender<Vec<u8>>, encode: fn(&[u8]) -> Vec<u8>, patience: Option<Patience>) -> Arc<EventStream> {
        Arc::new(EventStream { engine: engine.clone(), tx, encode, patience, task: Mutex::new(None), drain_to: watch::channel(None).0, subscribed: AtomicBool::new(false), forwarded: Forwarded::new() })
    }

    /// Whether a `subscribe` started the stream since last asked.
    pub(crate) fn take_subscribed(&self) -> bool {
        self.subscribed.swap(false, Ordering::Relaxed)
    }

    /// Waits until every event published so far is queued (bounded: [`Forwarded::through`]).
    pub(crate) async fn caught_up(&self) {
        self.forwarded.through(self.engine.last_seq()).await;
    }

    fn take_task(&self) -> Option<tokio::task::JoinHandle<()>> {
        self.task.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Forwards every event published so far, then stops: within `wait`, or not at all.
    pub(crate) async fn drain(&self, wait: Duration) {
        self.drain_to.send_replace(Some(self.engine.last_seq()));
        self.wait_end(wait).await;
    }

    /// Waits for the stream to end by itself (after the runtime's final event), within `wait`.
    pub(crate) async fn wait_end(&self, wait: Duration) {
        if let Some(mut task) = self.take_task()
            && tokio::time::timeout(wait, &mut task).await.is_err()
        {
            task.abort();
        }
    }

    /// Stops the stream at once.
    pub(crate) fn stop(&self) {
        if let Some(task) = self.take_task() {
            task.abort();
        }
    }
}

impl EventSession for EventStream {
    fn subscribe(&self, since: Option<i64>) {
        let mut sub = self.engine.subscribe(since);
        let (tx, encode, patience) = (self.tx.clone(), self.encode, self.patience.clone());
        let mut drain = self.drain_to.subscribe();
        // The new stream starts where the subscription does (a replay goes back).
        let forwarded = self.forwarded.restart(sub.position());
        // Waiting here for room never stalls the agent: the hub's replay buffer is bounded, so a
        // subscription that falls behind is handed `lagged` (or, replaying, `gap`) by the hub
        // instead of losing events silently.
        let task = tokio::spawn(async move {
            loop {
                if drain.borrow_and_update().is_some_and(|to| sub.position() >= to) {
                    break;
                }
                let ev = tokio::select! {
                    ev = sub.next_shared() => ev,
                    changed = drain.changed() => if changed.is_err() { break } else { continue },
                };
                let Some(ev) = ev else { break };
                let last = ev.ends_stream();
                let message = encode(ev.json());
                let queued = match &patience {
                    None => tx.send(message).await.is_ok(),
                    Some((patience, stuck)) => match tokio::time::timeout(*patience, tx.send(message)).await {
                        Ok(sent) => sent.is_ok(),
                        Err(_) => {
                            stuck.cancel();
                            false
                        }
                    },
                };
                if !queued {
                    break;
                }
                forwarded.send_replace(sub.position());
                if last {
                    break;
                }
            }
        });
        if let Some(old) = self.task.lock().unwrap_or_else(|p| p.into_inner()).replace(task) {
            old.abort();
        }
        self.subscribed.store(true, Ordering::Relaxed);
    }
}
