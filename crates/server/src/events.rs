//! The event stream: every published event gets the next sequence number, goes into a bounded
//! replay buffer, and out on a bounded broadcast. The agent never waits for a subscriber; a
//! subscriber that falls behind is told how many events it missed (`lagged`), and one that
//! resumes from a point no longer held is told so (`gap`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use openagents_protocol::{RuntimeEvent, SERVER_EVENT_CHANNEL_CAPACITY, ServerEvent};
use tokio::sync::broadcast;

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

struct Log {
    next_seq: i64,
    replay: VecDeque<SharedEvent>,
}

/// A published event and its JSON, encoded once (by the first subscriber that asks) and
/// shared by every subscriber: fan-out to N costs one encoding, not N.
#[derive(Debug)]
pub struct Published {
    event: ServerEvent,
    json: OnceLock<Vec<u8>>,
    sse: OnceLock<axum::body::Bytes>,
}

/// A published event as every subscriber holds it.
pub type SharedEvent = Arc<Published>;

impl Published {
    fn shared(event: ServerEvent) -> SharedEvent {
        Arc::new(Published { event, json: OnceLock::new(), sse: OnceLock::new() })
    }
    /// The event.
    pub fn event(&self) -> &ServerEvent {
        &self.event
    }
    /// The event as JSON ([`crate::projection::event_json`]), the same bytes for everyone.
    pub fn json(&self) -> &[u8] {
        self.json.get_or_init(|| crate::projection::event_json(&self.event))
    }
    /// The event as one server-sent event ([`crate::projection::sse_frame`]), shared: every
    /// `GET /events` stream writes these same bytes.
    pub fn sse_frame(&self) -> &axum::body::Bytes {
        self.sse.get_or_init(|| crate::projection::sse_frame(self.event.seq, self.json()).into())
    }
}

/// What the hub counts for `GET /metrics`.
#[derive(Default)]
pub struct HubCounters {
    /// `lagged` notices given.
    pub lagged: AtomicU64,
    /// `gap` notices given.
    pub gaps: AtomicU64,
    /// Approval requests published.
    pub approvals_asked: AtomicU64,
    /// Approvals resolved as approved.
    pub approvals_approved: AtomicU64,
    /// Approvals denied (by a frontend, by the timeout, or for want of anyone to ask).
    pub approvals_denied: AtomicU64,
}

/// Publishes events to every subscriber; cheap to clone.
#[derive(Clone)]
pub struct EventHub {
    log: Arc<Mutex<Log>>,
    tx: broadcast::Sender<SharedEvent>,
    subscribers: Arc<AtomicUsize>,
    capacity: usize,
    counters: Arc<HubCounters>,
}

impl Default for EventHub {
    fn default() -> Self {
        EventHub::with_capacity(SERVER_EVENT_CHANNEL_CAPACITY)
    }
}

impl EventHub {
    /// A hub whose broadcast and replay buffer hold `capacity` events.
    pub fn with_capacity(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity.max(1));
        EventHub { log: Arc::new(Mutex::new(Log { next_seq: 1, replay: VecDeque::new() })), tx, subscribers: Arc::new(AtomicUsize::new(0)), capacity: capacity.max(1), counters: Arc::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Publishes `event` with the next sequence number and returns it. Never waits.
    pub fn publish(&self, event: RuntimeEvent) -> ServerEvent {
        audit(&event, &self.counters);
        let mut log = self.lock();
        let ev = ServerEvent { seq: log.next_seq, time_ms: Some(now_ms()), event };
        log.next_seq += 1;
        if log.replay.len() == self.capacity {
            log.replay.pop_front();
        }
        let shared = Published::shared(ev.clone());
        log.replay.push_back(Arc::clone(&shared));
        // No receiver is fine: nobody is listening.
        let _ = self.tx.send(shared);
        ev
    }

    /// The newest sequence number published (0 before the first event).
    pub fn last_seq(&self) -> i64 {
        self.lock().next_seq - 1
    }

    /// What the hub has counted.
    pub fn counters(&self) -> &HubCounters {
        &self.counters
    }

    /// How many subscriptions are open.
    pub fn subscribers(&self) -> usize {
        self.subscribers.load(Ordering::Relaxed)
    }

    /// A subscription to every event after `since` (replayed from the buffer while it holds
    /// them), or to new events only when `since` is `None`.
    pub fn subscribe(&self, since: Option<i64>) -> Subscription {
        let log = self.lock();
        let rx = self.tx.subscribe();
        let last = log.next_seq - 1;
        let mut backlog = VecDeque::new();
        let mut cursor = last;
        if let Some(since) = since {
            let oldest = log.replay.front().map_or(last + 1, |e| e.event.seq);
            if since > last {
                // A resume point this runtime never reached (a client of an earlier run of a
                // restarted server): say so, and replay from the oldest event held.
                let resumed_at = oldest - 1;
                backlog.push_back(Published::shared(ServerEvent { seq: resumed_at.max(0), time_ms: Some(now_ms()), event: RuntimeEvent::Gap { since, resumed_at: resumed_at.max(0) } }));
                self.counters.gaps.fetch_add(1, Ordering::Relaxed);
                backlog.extend(log.replay.iter().cloned());
                drop(log);
                self.subscribers.fetch_add(1, Ordering::Relaxed);
                return Subscription { backlog, rx, seen: resumed_at.max(0), count: Arc::clone(&self.subscribers), counters: Arc::clone(&self.counters) };
            }
            let since = since.max(0);
            if since + 1 < oldest {
                backlog.push_back(Published::shared(ServerEvent { seq: oldest - 1, time_ms: Some(now_ms()), event: RuntimeEvent::Gap { since, resumed_at: oldest - 1 } }));
                self.counters.gaps.fetch_add(1, Ordering::Relaxed);
            }
            backlog.extend(log.replay.iter().filter(|e| e.event.seq > since).cloned());
            cursor = since;
        }
        drop(log);
        self.subscribers.fetch_add(1, Ordering::Relaxed);
        Subscription { backlog, rx, seen: cursor, count: Arc::clone(&self.subscribers), counters: Arc::clone(&self.counters) }
    }
}

/// One subscriber's view of the stream.
pub struct Subscription {
    backlog: VecDeque<SharedEvent>,
    rx: broadcast::Receiver<SharedEvent>,
    /// The newest sequence number given out (or skipped over by the starting point).
    seen: i64,
    count: Arc<AtomicUsize>,
    counters: Arc<HubCounters>,
}

impl Subscription {
    /// The next event; `None` when the hub is gone. Each event arrives once, in order; missed
    /// events are announced by a `lagged` (or `gap`) event instead of silently.
    pub async fn next(&mut self) -> Option<ServerEvent> {
        self.next_shared().await.map(|ev| ev.event.clone())
    }

    /// [`Subscription::next`], as the event shared with every other subscriber, with its JSON
    /// encoded once for all of them.
    pub async fn next_shared(&mut self) -> Option<SharedEvent> {
        if let Some(ev) = self.pop_backlog() {
            return Some(ev);
        }
        loop {
            match self.rx.recv().await {
                Ok(ev) if ev.event.seq <= self.seen => continue,
                Ok(ev) => {
                    self.seen = ev.event.seq;
                    return Some(ev);
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => return Some(self.lagged(missed)),
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// [`Subscription::next_shared`] without waiting: the next event when one is already there.
    pub fn try_next_shared(&mut self) -> Option<SharedEvent> {
        if let Some(ev) = self.pop_backlog() {
            return Some(ev);
        }
        loop {
            match self.rx.try_recv() {
                Ok(ev) if ev.event.seq <= self.seen => continue,
                Ok(ev) => {
                    self.seen = ev.event.seq;
                    return Some(ev);
                }
                Err(broadcast::error::TryRecvError::Lagged(missed)) => return Some(self.lagged(missed)),
                Err(broadcast::error::TryRecvError::Empty | broadcast::error::TryRecvError::Closed) => return None,
            }
        }
    }

    fn pop_backlog(&mut self) -> Option<SharedEvent> {
        let ev = self.backlog.pop_front()?;
        if !matches!(ev.event.event, RuntimeEvent::Gap { .. }) {
            self.seen = self.seen.max(ev.event.seq);
        }
        Some(ev)
    }

    fn lagged(&mut self, missed: u64) -> SharedEvent {
        self.counters.lagged.fetch_add(1, Ordering::Relaxed);
        let notice = ServerEvent { seq: self.seen, time_ms: Some(now_ms()), event: RuntimeEvent::Lagged { missed: missed as i64 } };
        // The missed events are behind this subscriber now: the next event is `seq + missed +
        // 1`, and a second notice before it counts from there.
        self.seen += missed as i64;
        Published::shared(notice)
    }

    /// The sequence number of the newest event this subscriber has been given.
    pub fn position(&self) -> i64 {
        self.seen
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The audit record (target `openagents::audit`) of a security-relevant event, and its count.
/// Prompts are runner-controlled text: they are logged escaped, never raw.
fn audit(event: &RuntimeEvent, counters: &HubCounters) {
    match event {
        RuntimeEvent::TurnStarted { assignment, conversation, runner } => {
            tracing::info!(target: "openagents::audit", event = "turn_started", %assignment, %conversation, %runner);
        }
        RuntimeEvent::ApprovalRequested { request_id, prompt } => {
            counters.approvals_asked.fetch_add(1, Ordering::Relaxed);
            tracing::info!(target: "openagents::audit", event = "approval_requested", %request_id, prompt = %prompt.escape_debug());
        }
        RuntimeEvent::ApprovalResolved { request_id, approved, by } => {
            if *approved { &counters.approvals_approved } else { &counters.approvals_denied }.fetch_add(1, Ordering::Relaxed);
            tracing::info!(target: "openagents::audit", event = "approval_answered", %request_id, approved, %by);
        }
        RuntimeEvent::ApprovalDenied { request_id, reason, .. } => {
            counters.approvals_denied.fetch_add(1, Ordering::Relaxed);
            tracing::info!(target: "openagents::audit", event = "approval_denied", request_id = %request_id.as_deref().unwrap_or("-"), %reason);
        }
        RuntimeEvent::TurnFailed { error } => {
            tracing::info!(target: "openagents::audit", event = "turn_failed", code = error.code.as_str(), message = %error.message.escape_debug());
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use openagents_protocol::rt;

    use super::*;

    #[tokio::test]
    async fn every_subscriber_writes_the_same_encoding_of_an_event() {
        let hub = EventHub::with_capacity(8);
        let (mut a, mut b) = (hub.subscribe(None), hub.subscribe(None));
        let published = hub.publish(RuntimeEvent::Text { text: "héllo \"x\"\n".into() });
        let (ea, eb) = (a.next_shared().await.expect("an event"), b.next_shared().await.expect("an event"));
        // One encoding, shared: the same bytes at the same address for both subscribers.
        assert!(std::ptr::eq(ea.json(), eb.json()), "each subscriber encoded the event again");
        let decoded = rt::parse_validated::<ServerEvent>(ea.json()).expect("the shared bytes decode as a ServerEvent");
        assert_eq!(decoded, published);
        // A subscriber resuming from the replay buffer gets the same shared encoding too.
        let mut c = hub.subscribe(Some(0));
        let ec = c.next_shared().await.expect("the replayed event");
        assert!(std::ptr::eq(ec.json(), ea.json()), "the replayed event was encoded again");
        // The SSE frame around it, also made once: `id:` the sequence number, `data:` the JSON.
        assert_eq!(ea.sse_frame().as_ptr(), ec.sse_frame().as_ptr(), "the SSE frame was made again");
        let frame = std::str::from_utf8(ea.sse_frame()).expect("UTF-8");
        let data = frame.strip_prefix(&format!("id: {}\ndata: ", published.seq)).and_then(|f| f.strip_suffix("\n\n")).expect("one id and one data line");
        assert_eq!(rt::parse_validated::<ServerEvent>(data.as_bytes()).expect("the frame's data decodes"), published);
    }
}

/// How long an answer on a streaming connection (stdio, the WebSocket) waits for the events
/// published before it to be queued ahead of it, when the connection's stream is stuck.
pub const REPLY_AFTER_EVENTS: std::time::Duration = std::time::Duration::from_secs(1);

/// How far a streaming connection's current event stream has queued events for its writer: the
/// sequence number of the newest one. Each stream has a channel of its own (closed when the
/// stream ends; before the first, one already closed), so an answer waits only for the stream
/// that is running.
pub(crate) struct Forwarded(Mutex<tokio::sync::watch::Receiver<i64>>);

impl Forwarded {
    /// No stream yet.
    pub(crate) fn new() -> Forwarded {
        Forwarded(Mutex::new(tokio::sync::watch::channel(0).1))
    }

    /// A new stream starting at `position` (a replay goes back): the sender it reports with.
    pub(crate) fn restart(&self, position: i64) -> tokio::sync::watch::Sender<i64> {
        let (sender, receiver) = tokio::sync::watch::channel(position);
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = receiver;
        sender
    }

    /// Waits until the stream has queued every event up to `seq`: not at all when there is no
    /// stream (never started, or ended), at most [`REPLY_AFTER_EVENTS`] when it is stuck.
    pub(crate) async fn through(&self, seq: i64) {
        let mut forwarded = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let _ = tokio::time::timeout(REPLY_AFTER_EVENTS, forwarded.wait_for(|&at| at >= seq)).await;
    }
}
