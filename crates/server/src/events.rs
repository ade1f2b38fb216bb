//! The event stream: every published event gets the next sequence number and goes into a
//! bounded replay buffer, which every subscriber reads from at its own pace (woken when events
//! are delivered, it takes all that are new at once). The agent never waits for a subscriber; a
//! subscriber that falls behind the buffer is told how many events it missed (`lagged`), and
//! one that resumes from a point no longer held is told so (`gap`).
//!
//! With a durable store ([`EventHub::with_store`]), the sequence continues from the store's, an
//! event reaches the replay buffer only once it is written (a writer thread commits everything
//! queued in one transaction, so a burst costs one commit, and delivers the commit's events in
//! one step), a resume from before the replay buffer is served from the store (so a subscriber
//! told `lagged` can get what it missed by resuming from its position). What retention has
//! pruned gives `gap`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use openagents_protocol::{ErrorCode, RuntimeEvent, RuntimeSubmitError, SERVER_EVENT_CHANNEL_CAPACITY, ServerEvent};
use tokio::sync::watch;

use crate::store::{AGE_PRUNE_BATCH, AgentSession, MemoryStore, Outcome, RUNTIME_RESTARTED_MESSAGE, Record, Retention, Store, StoreError, TurnEnd, TurnRecord, TurnStart};

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// How many events may wait for the writer; one group commit writes all that wait. Past that
/// (or past [`WRITE_QUEUE_BYTES`]), publishing waits for the writer: the disk sets the pace,
/// not memory.
pub const WRITE_QUEUE: usize = 8 * SERVER_EVENT_CHANNEL_CAPACITY;

/// How many bytes of events' JSON may wait for the writer (at least one event always may).
/// The replay buffer holds at most this much beyond its own capacity: a commit's events are
/// delivered together.
pub const WRITE_QUEUE_BYTES: usize = 8 << 20;

/// The most events a subscriber takes from the replay buffer at a time: few, as what it has
/// taken stays in memory for it after the buffer lets it go (a subscriber behind the buffer
/// must lag, not hold a second buffer of its own).
const TAKE_AT_ONCE: usize = 64;

/// How many jobs (events and the records beside them) whose group commit failed are kept to be
/// written again with the next commit; past that (or past four times [`WRITE_QUEUE_BYTES`] of
/// their events) the oldest are given up (the store then lacks their events: a resume over them
/// gets `gap`).
pub const RETRY_JOBS: usize = 4 * WRITE_QUEUE;

/// How many events a resume reads from the store at a time, at most (a group commit's worth:
/// a page then reads each block of the store once).
pub const REPLAY_PAGE: usize = WRITE_QUEUE;

/// How many bytes of events' JSON a resume reads from the store at a time, at most (past one
/// event): what a subscriber holds of the store is bounded by bytes, whatever the events' size
/// (a full group commit of small events is a page or two).
pub const REPLAY_PAGE_BYTES: usize = 1 << 20;

struct Log {
    /// The newest sequence number delivered (in the replay buffer).
    delivered: i64,
    replay: VecDeque<SharedEvent>,
    /// Whether nothing more will be delivered (the hub is gone).
    closed: bool,
    /// How many events the last delivery added.
    last_added: usize,
}

/// A published event and its JSON, encoded once (by the first subscriber that asks) and
/// shared by every subscriber: fan-out to N costs one encoding, not N.
#[derive(Debug)]
pub struct Published {
    event: ServerEvent,
    /// Whether a stream ends with it: this run's `shutting_down` (an earlier run's, replayed
    /// from the store, does not end anything).
    ends_stream: bool,
    json: OnceLock<Vec<u8>>,
    sse: OnceLock<axum::body::Bytes>,
}

/// A published event as every subscriber holds it.
pub type SharedEvent = Arc<Published>;

impl Published {
    fn shared(event: ServerEvent) -> SharedEvent {
        Arc::new(Published { ends_stream: crate::projection::is_final(&event), event, json: OnceLock::new(), sse: OnceLock::new() })
    }
    /// An event read back from the store, with the JSON it was written as; this run's events
    /// are those from `run_start` on.
    fn stored(event: ServerEvent, json: Vec<u8>, run_start: i64) -> SharedEvent {
        Arc::new(Published { ends_stream: event.seq >= run_start && crate::projection::is_final(&event), event, json: OnceLock::from(json), sse: OnceLock::new() })
    }
    /// Whether this is the runtime's last event, after which a stream ends: this run's
    /// `shutting_down`, never an earlier run's replayed from the store.
    pub fn ends_stream(&self) -> bool {
        self.ends_stream
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
    /// Group commits to the store that failed (their events were delivered all the same).
    pub store_errors: AtomicU64,
}

/// What the store records beside an event: a turn's start or end.
#[derive(Debug, Clone)]
pub enum Note {
    /// With a `turn_started` event: what the event does not say of the turn.
    TurnStarted {
        /// The task.
        task: String,
        /// The working folder.
        cwd: String,
    },
    /// With a `turn_completed` or `turn_failed` event.
    TurnEnded {
        /// The sequence number of the turn's `turn_started`.
        first_seq: i64,
        /// How it ended.
        outcome: Outcome,
        /// The result, when it completed.
        result: Option<String>,
        /// The error as JSON, when it failed.
        error: Option<String>,
    },
}

/// A note made into what the store writes, with the event's sequence number and time (or,
/// for an agent session, on its own).
enum Noted {
    Started(TurnStart),
    Ended(TurnEnd),
    AgentSession(AgentSession),
}

impl Noted {
    fn of(note: Note, ev: &ServerEvent) -> Option<Noted> {
        let time = ev.time_ms.unwrap_or_else(now_ms);
        match (note, &ev.event) {
            (Note::TurnStarted { task, cwd }, RuntimeEvent::TurnStarted { assignment, conversation, runner }) => Some(Noted::Started(TurnStart {
                assignment: assignment.clone(),
                conversation: conversation.clone(),
                runner: runner.clone(),
                task,
                cwd,
                started_ms: time,
                first_seq: ev.seq,
            })),
            (Note::TurnEnded { first_seq, outcome, result, error }, _) => Some(Noted::Ended(TurnEnd { first_seq, outcome, result, error, ended_ms: time, last_seq: ev.seq })),
            _ => None,
        }
    }

    fn record(&self) -> Record<'_> {
        match self {
            Noted::Started(t) => Record::TurnStarted(t),
            Noted::Ended(t) => Record::TurnEnded(t),
            Noted::AgentSession(a) => Record::AgentSession(a),
        }
    }
}

/// An event on its way to the writer (or, with no event, a record of its own).
struct Job {
    event: Option<SharedEvent>,
    noted: Option<Noted>,
}

impl Job {
    /// The bytes of its event's JSON (encoded already: the publisher encodes what it queues).
    fn bytes(&self) -> usize {
        self.event.as_ref().map_or(0, |e| e.json().len())
    }
}

/// What waits for the writer thread.
#[derive(Default)]
struct Pending {
    jobs: Vec<Job>,
    bytes: usize,
    /// Whether the writer is asleep, waiting for a job (a publisher wakes it only then).
    writer_waiting: bool,
    /// Whether the hub is gone: the writer writes what is left and ends.
    closed: bool,
}

/// The writer thread's queue: bounded by [`WRITE_QUEUE`] events and [`WRITE_QUEUE_BYTES`].
#[derive(Default)]
struct WriteQueue {
    pending: Mutex<Pending>,
    /// Signalled when a job arrives for a waiting writer, or the hub goes.
    ready: Condvar,
    /// Signalled when the writer has taken what waited.
    space: Condvar,
}

impl WriteQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `job`, waiting while the queue is full.
    fn push(&self, job: Job) {
        let bytes = job.bytes();
        let mut pending = self.lock();
        while !pending.jobs.is_empty() && (pending.jobs.len() >= WRITE_QUEUE || pending.bytes + bytes > WRITE_QUEUE_BYTES) {
            pending = self.space.wait(pending).unwrap_or_else(|p| p.into_inner());
        }
        pending.jobs.push(job);
        pending.bytes += bytes;
        if pending.writer_waiting {
            pending.writer_waiting = false;
            self.ready.notify_one();
        }
    }

    /// Swaps everything queued into `into` (empty), waiting at most `wait` for a first job.
    /// Returns false once the hub is gone and nothing is left.
    fn take(&self, into: &mut Vec<Job>, wait: std::time::Duration) -> bool {
        let mut pending = self.lock();
        if pending.jobs.is_empty() && !pending.closed && !wait.is_zero() {
            pending.writer_waiting = true;
            pending = self.ready.wait_timeout_while(pending, wait, |p| p.jobs.is_empty() && !p.closed).map_or_else(|p| p.into_inner().0, |(p, _)| p);
            pending.writer_waiting = false;
        }
        std::mem::swap(&mut pending.jobs, into);
        pending.bytes = 0;
        let open = !(pending.closed && into.is_empty());
        drop(pending);
        self.space.notify_all();
        open
    }

    fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_one();
    }
}

/// Ends the hub when its last handle goes: the writer writes what is queued and ends, and
/// subscribers, once they have read everything delivered, get `None`.
struct Alive {
    delivery: Arc<Delivery>,
    writer: Option<Arc<WriteQueue>>,
}

impl Drop for Alive {
    fn drop(&mut self) {
        match &self.writer {
            // The writer closes the delivery once it has written and delivered the rest.
            Some(queue) => queue.close(),
            None => self.delivery.close(),
        }
    }
}

/// Where delivered events go: the replay buffer, from which every subscriber reads. Shared by
/// the hub, its writer thread and the subscriptions.
struct Delivery {
    log: Mutex<Log>,
    /// How many events the replay buffer keeps (more while a larger commit is the newest).
    capacity: usize,
    /// The newest sequence number delivered, for [`EventHub::delivered`].
    delivered: watch::Sender<i64>,
    /// Wakes subscribers waiting for events (only when one is: `sleepers`).
    wake: tokio::sync::Notify,
    /// How many subscribers are waiting, or about to.
    sleepers: AtomicUsize,
    /// The store's failed group commits.
    failures: watch::Sender<WriteFailure>,
}

/// The store's failed group commits, as a running turn watches them (the engine fails a turn
/// whose events could not be kept).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteFailure {
    /// How many group commits have failed.
    pub count: u64,
    /// The last one's error, naming the store.
    pub message: String,
}

impl Delivery {
    fn lock(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts `events` (in sequence order) in the replay buffer, dropping the oldest beyond the
    /// buffer's capacity, but never any of this delivery or the one before (a subscriber that
    /// was reading the last commit when this one came can read both whole, however large);
    /// then wakes the subscribers.
    fn deliver<'a>(&self, events: impl IntoIterator<Item = &'a SharedEvent>) {
        let mut log = self.lock();
        let mut added = 0;
        for ev in events {
            log.replay.push_back(Arc::clone(ev));
            log.delivered = ev.event.seq;
            added += 1;
        }
        if added == 0 {
            return;
        }
        let keep = self.capacity.max(added + std::mem::replace(&mut log.last_added, added));
        if log.replay.len() > keep {
            let over = log.replay.len() - keep;
            log.replay.drain(..over);
        }
        let delivered = log.delivered;
        drop(log);
        // A watcher subscribes before it looks at the value, so one that is not counted yet
        // sees the new value when it looks.
        self.delivered.send_if_modified(|at| {
            *at = delivered;
            self.delivered.receiver_count() > 0
        });
        // A subscriber counts itself before it looks at the replay buffer (locked above), so
        // one not counted yet sees these events when it looks.
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            self.wake.notify_waiters();
        }
    }

    /// Nothing more will be delivered: subscribers end once they have read what was.
    fn close(&self) {
        self.lock().closed = true;
        self.delivered.send_modify(|_| {});
        self.wake.notify_waiters();
    }
}

/// Publishes events to every subscriber; cheap to clone.
#[derive(Clone)]
pub struct EventHub {
    /// The next sequence number; held while an event is handed on, so events are delivered
    /// (and written) in sequence order.
    next_seq: Arc<Mutex<i64>>,
    delivery: Arc<Delivery>,
    subscribers: Arc<AtomicUsize>,
    counters: Arc<HubCounters>,
    store: Arc<dyn Store>,
    /// The writer thread's queue, when the store is durable.
    writer: Option<Arc<WriteQueue>>,
    /// Shared by every handle: the last one to go ends the hub.
    _alive: Arc<Alive>,
    /// The first sequence number of this run (earlier ones are the store's, from earlier runs).
    run_start: i64,
}

impl Default for EventHub {
    fn default() -> Self {
        EventHub::with_capacity(SERVER_EVENT_CHANNEL_CAPACITY)
    }
}

impl EventHub {
    /// A hub whose replay buffer holds `capacity` events, on a [`MemoryStore`].
    pub fn with_capacity(capacity: usize) -> Self {
        EventHub::build(capacity, Arc::new(MemoryStore::new()), 0, Retention::default())
    }

    /// A hub on `store`: its sequence continues from the store's, a turn the store shows as
    /// running (its process stopped during it) is closed first, and with a durable store every
    /// event is written, in a group commit, before it reaches a subscriber. The store keeps the
    /// newest `retain_events` events (at least one), none older than
    /// [`crate::store::DEFAULT_RETAIN_DAYS`] days ([`EventHub::with_retention`] chooses both).
    ///
    /// # Errors
    ///
    /// When the store cannot be read or written.
    pub fn with_store(capacity: usize, store: Arc<dyn Store>, retain_events: u64) -> Result<Self, StoreError> {
        EventHub::with_retention(capacity, store, Retention { events: retain_events.max(1), ..Retention::default() })
    }

    /// [`EventHub::with_store`], keeping what `retention` says: the newest `events` events, none
    /// older than `days` days. Both are pruned now, then by the writer thread as it goes: past
    /// `events` every so many commits, past `days` every `check_every` (busy or idle), at most
    /// [`AGE_PRUNE_BATCH`] events a transaction, so a commit never waits behind a long delete.
    ///
    /// # Errors
    ///
    /// When the store cannot be read or written.
    pub fn with_retention(capacity: usize, store: Arc<dyn Store>, retention: Retention) -> Result<Self, StoreError> {
        let closed = store.close_running_turns(now_ms())?;
        for t in &closed {
            tracing::warn!(target: "openagents::audit", event = "turn_closed_at_start", assignment = %t.start.assignment, conversation = %t.start.conversation, first_seq = t.start.first_seq, "a turn that was running when the runtime stopped was closed as failed ({})", crate::store::RUNTIME_RESTARTED);
        }
        write_closed_turns_failed(&*store, &closed)?;
        let retention = Retention { events: retention.events.max(1), days: retention.days.max(1), check_every: retention.check_every.max(std::time::Duration::from_millis(1)) };
        if store.durable() {
            store.prune(retention.events)?;
            let cutoff = retention.cutoff_ms(now_ms());
            while store.prune_older_than(cutoff, AGE_PRUNE_BATCH)? > 0 {}
        }
        let last = store.last_seq()?;
        Ok(EventHub::build(capacity, store, last, retention))
    }

    fn build(capacity: usize, store: Arc<dyn Store>, last: i64, retention: Retention) -> Self {
        let capacity = capacity.max(1);
        let delivery = Arc::new(Delivery { log: Mutex::new(Log { delivered: last, replay: VecDeque::new(), closed: false, last_added: 0 }), capacity, delivered: watch::channel(last).0, wake: tokio::sync::Notify::new(), sleepers: AtomicUsize::new(0), failures: watch::channel(WriteFailure::default()).0 });
        let counters = Arc::<HubCounters>::default();
        let writer = store.durable().then(|| {
            let queue = Arc::new(WriteQueue::default());
            let (jobs, store, delivery, counters) = (Arc::clone(&queue), Arc::clone(&store), Arc::clone(&delivery), Arc::clone(&counters));
            std::thread::Builder::new()
                .name("openagents-store".into())
                .spawn(move || {
                    write_loop(&jobs, &*store, &delivery, &counters, retention);
                    delivery.close();
                })
                .map(|_| queue)
        });
        let writer = match writer {
            Some(Ok(queue)) => Some(queue),
            Some(Err(e)) => {
                tracing::error!("cannot start the store's writer thread ({e}): events are delivered without being written");
                None
            }
            None => None,
        };
        let alive = Arc::new(Alive { delivery: Arc::clone(&delivery), writer: writer.clone() });
        EventHub { next_seq: Arc::new(Mutex::new(last + 1)), delivery, subscribers: Arc::new(AtomicUsize::new(0)), counters, store, writer, _alive: alive, run_start: last + 1 }
    }

    /// The store events, turns and conversations are kept in.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Publishes `event` with the next sequence number and returns it. Never waits for a
    /// subscriber; with a durable store it is delivered once written (see
    /// [`EventHub::delivered`]).
    pub fn publish(&self, event: RuntimeEvent) -> ServerEvent {
        self.publish_noted(event, None)
    }

    /// [`EventHub::publish`], with what the store records beside the event (a turn's start
    /// or end), written in the same commit.
    pub fn publish_noted(&self, event: RuntimeEvent, note: Option<Note>) -> ServerEvent {
        audit(&event, &self.counters);
        let mut next = self.next_seq.lock().unwrap_or_else(|p| p.into_inner());
        let ev = ServerEvent { seq: *next, time_ms: Some(now_ms()), event };
        *next += 1;
        let noted = note.and_then(|n| Noted::of(n, &ev));
        let shared = Published::shared(ev.clone());
        match &self.writer {
            Some(queue) => {
                // Encoded here, once, for the store and every subscriber: the queue is bounded
                // by its bytes.
                shared.json();
                queue.push(Job { event: Some(shared), noted });
            }
            None => {
                if let Some(noted) = &noted
                    && let Err(e) = self.store.write(&[noted.record()])
                {
                    tracing::error!("{e}");
                }
                // Encoded here when someone will read it, as with a durable store: the publisher
                // pays for the one encoding, not the first subscriber to read it.
                if self.subscribers() > 0 {
                    shared.json();
                }
                self.delivery.deliver([&shared]);
            }
        }
        drop(next);
        ev
    }

    /// Records that an ACP agent opened `session` for its conversation, with no event: the
    /// store keeps it on the conversation ([`Store::agent_session`]), written in order with the
    /// events published before it. A failed write is logged and counted like an event's.
    pub fn keep_agent_session(&self, session: AgentSession) {
        let next = self.next_seq.lock().unwrap_or_else(|p| p.into_inner());
        let noted = Noted::AgentSession(session);
        match &self.writer {
            Some(queue) => queue.push(Job { event: None, noted: Some(noted) }),
            None => {
                if let Err(e) = self.store.write(&[noted.record()]) {
                    tracing::error!("{e}");
                }
            }
        }
        drop(next);
    }

    /// Resolves once every event up to `seq` has been delivered (written first, with a durable
    /// store).
    pub async fn delivered(&self, seq: i64) {
        let mut delivered = self.delivery.delivered.subscribe();
        let _ = delivered.wait_for(|&at| at >= seq).await;
    }

    /// The newest sequence number given out by `publish` (delivered or, with a durable store,
    /// perhaps still being written).
    pub fn published_seq(&self) -> i64 {
        *self.next_seq.lock().unwrap_or_else(|p| p.into_inner()) - 1
    }

    /// The newest sequence number delivered (0 before the first event; with a durable store,
    /// the store's newest at start).
    pub fn last_seq(&self) -> i64 {
        self.delivery.lock().delivered
    }

    /// A watch of the store's failed group commits: it changes each time one fails, with the
    /// error. A running turn watches it, and fails when its events cannot be kept.
    pub fn write_failures(&self) -> watch::Receiver<WriteFailure> {
        self.delivery.failures.subscribe()
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
    /// them, and before that from a durable store), or to new events only when `since` is
    /// `None`.
    pub fn subscribe(&self, since: Option<i64>) -> Subscription {
        let log = self.delivery.lock();
        let last = log.delivered;
        let mut backlog = VecDeque::new();
        let mut cursor = last;
        let mut from_store = None;
        if let Some(since) = since {
            let oldest = log.replay.front().map_or(last + 1, |e| e.event.seq);
            if since > last {
                // A resume point this runtime never reached (a client of an earlier run of a
                // restarted server that kept no store): say so, and replay from the oldest
                // event held.
                let resumed_at = oldest - 1;
                backlog.push_back(Published::shared(ServerEvent { seq: resumed_at.max(0), time_ms: Some(now_ms()), event: RuntimeEvent::Gap { since, resumed_at: resumed_at.max(0) } }));
                self.counters.gaps.fetch_add(1, Ordering::Relaxed);
                backlog.extend(log.replay.iter().cloned());
                drop(log);
                return self.subscription(backlog, None, resumed_at.max(0));
            }
            let since = since.max(0);
            if since + 1 < oldest {
                if self.store.durable() {
                    from_store = Some(StoreRange { after: since, through: oldest - 1 });
                } else {
                    backlog.push_back(Published::shared(ServerEvent { seq: oldest - 1, time_ms: Some(now_ms()), event: RuntimeEvent::Gap { since, resumed_at: oldest - 1 } }));
                    self.counters.gaps.fetch_add(1, Ordering::Relaxed);
                }
            }
            backlog.extend(log.replay.iter().filter(|e| e.event.seq > since).cloned());
            cursor = since;
        }
        drop(log);
        self.subscription(backlog, from_store, cursor)
    }

    fn subscription(&self, backlog: VecDeque<SharedEvent>, from_store: Option<StoreRange>, seen: i64) -> Subscription {
        self.subscribers.fetch_add(1, Ordering::Relaxed);
        let store = self.store.durable().then(|| Arc::clone(&self.store));
        Subscription { page: VecDeque::new(), from_store, store, run_start: self.run_start, backlog, delivery: Arc::clone(&self.delivery), seen, count: Arc::clone(&self.subscribers), counters: Arc::clone(&self.counters) }
    }
}

/// The `turn_failed` event (code `runtime_restarted`) that ends each turn `closed` at start,
/// written after the store's newest event with the next sequence numbers, in one transaction
/// with the turn's `last_seq` moved onto it: a client replaying the stream sees the turn end,
/// as it would have had the runtime not stopped. (Should this process stop between the close
/// and this write, the turn stays closed without its event: a window of one commit at start.)
fn write_closed_turns_failed(store: &dyn Store, closed: &[TurnRecord]) -> Result<(), StoreError> {
    if closed.is_empty() {
        return Ok(());
    }
    let code = ErrorCode::RuntimeRestarted;
    let error = RuntimeSubmitError { retryable: code.retryable(), code, message: RUNTIME_RESTARTED_MESSAGE.into(), details: None };
    let error_json = serde_json::to_string(&error).ok();
    let now = now_ms();
    let mut written = Vec::with_capacity(closed.len());
    for (seq, t) in (store.last_seq()? + 1..).zip(closed) {
        let event = ServerEvent { seq, time_ms: Some(now), event: RuntimeEvent::TurnFailed { error: error.clone() } };
        let end = TurnEnd { first_seq: t.start.first_seq, outcome: Outcome::Failed, result: None, error: error_json.clone(), ended_ms: t.ended_ms.unwrap_or(now), last_seq: seq };
        written.push((crate::projection::event_json(&event), end));
    }
    let mut records = Vec::with_capacity(2 * written.len());
    for (json, end) in &written {
        records.push(Record::Event { seq: end.last_seq, time_ms: now, json });
        records.push(Record::TurnEnded(end));
    }
    store.write(&records)
}

/// The writer thread: takes everything queued (at most [`WRITE_QUEUE`] events), writes it in one
/// transaction, then delivers it; prunes past `retention.events` now and then, and past
/// `retention.days` every `retention.check_every` (also when nothing is published), one bounded
/// batch between commits. Ends when the hub is gone, once what was queued is written.
fn write_loop(jobs: &WriteQueue, store: &dyn Store, delivery: &Delivery, counters: &HubCounters, retention: Retention) {
    use std::time::Instant;
    let retain = retention.events;
    let prune_every = (retain / 16).clamp(1, 65_536);
    let mut since_prune = 0u64;
    let mut next_age_prune = Instant::now() + retention.check_every;
    // Whether the last prune by age was cut short by its batch bound: more is due at once.
    let mut age_backlog = false;
    let mut batch = Vec::new();
    // What failed to be written, to write again first (delivered already).
    let mut unwritten: VecDeque<Job> = VecDeque::new();
    loop {
        let wait = if age_backlog { std::time::Duration::ZERO } else { next_age_prune.saturating_duration_since(Instant::now()) };
        if !jobs.take(&mut batch, wait) {
            break;
        }
        if !batch.is_empty() {
            since_prune += batch.len() as u64;
            write_batch(&mut batch, &mut unwritten, store, delivery, counters);
            if since_prune >= prune_every {
                since_prune = 0;
                if let Err(e) = store.prune(retain) {
                    tracing::error!("{e}");
                }
            }
        }
        let now = Instant::now();
        if age_backlog || now >= next_age_prune {
            next_age_prune = now + retention.check_every;
            age_backlog = match store.prune_older_than(retention.cutoff_ms(now_ms()), AGE_PRUNE_BATCH) {
                Ok(n) => n > 0,
                Err(e) => {
                    tracing::error!("{e}");
                    false
                }
            };
        }
    }
}

/// One group commit: what an earlier commit failed to write (`unwritten`) and `batch`, written in
/// one transaction; then `batch` is delivered (written or not) and emptied. When the write fails,
/// `batch` joins `unwritten`, to be written with the next commit (once the disk has room again,
/// or the database is back), at most [`RETRY_JOBS`] jobs of it.
fn write_batch(batch: &mut Vec<Job>, unwritten: &mut VecDeque<Job>, store: &dyn Store, delivery: &Delivery, counters: &HubCounters) {
    let mut records = Vec::with_capacity(unwritten.len() + batch.len() + 2);
    for job in unwritten.iter().chain(batch.iter()) {
        if let Some(event) = &job.event {
            let ev = &event.event;
            records.push(Record::Event { seq: ev.seq, time_ms: ev.time_ms.unwrap_or(0), json: event.json() });
        }
        if let Some(noted) = &job.noted {
            records.push(noted.record());
        }
    }
    // A store that panics is a store that failed: the events are delivered all the same,
    // so nobody waits forever for them.
    let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| store.write(&records))).unwrap_or_else(|_| Err(StoreError::Io { path: store.describe().into(), reason: "the store panicked while writing".into() }));
    drop(records);
    delivery.deliver(batch.iter().filter_map(|job| job.event.as_ref()));
    match written {
        Ok(()) => {
            if !unwritten.is_empty() {
                tracing::info!("the store is written again: {} jobs of failed commits written now", unwritten.len());
                unwritten.clear();
            }
            batch.clear();
        }
        Err(e) => {
            counters.store_errors.fetch_add(1, Ordering::Relaxed);
            tracing::error!("{e}: {} events delivered without being written yet; they are written with the next commit that succeeds", batch.len());
            delivery.failures.send_modify(|f| {
                f.count += 1;
                f.message = e.to_string();
            });
            unwritten.extend(batch.drain(..));
            let mut bytes: usize = unwritten.iter().map(Job::bytes).sum();
            let mut over = 0;
            while unwritten.len() > RETRY_JOBS || (bytes > 4 * WRITE_QUEUE_BYTES && unwritten.len() > 1) {
                if let Some(job) = unwritten.pop_front() {
                    bytes -= job.bytes();
                    over += 1;
                }
            }
            if over > 0 {
                tracing::error!("{over} jobs of failed commits given up: the store will lack their events");
            }
        }
    }
}

/// Events a subscription still reads from the store: after `after`, through `through`.
#[derive(Debug, Clone, Copy)]
struct StoreRange {
    after: i64,
    through: i64,
}

/// One subscriber's view of the stream.
pub struct Subscription {
    /// Events read from the store, not yet given out.
    page: VecDeque<SharedEvent>,
    /// What is still to be read from the store before `backlog`.
    from_store: Option<StoreRange>,
    /// The durable store resumes are read from; `None` without one.
    store: Option<Arc<dyn Store>>,
    /// The hub's first sequence number of this run.
    run_start: i64,
    backlog: VecDeque<SharedEvent>,
    /// The replay buffer new events are read from.
    delivery: Arc<Delivery>,
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
            match self.take_delivered() {
                Taken::Some(ev) => return Some(ev),
                Taken::Closed => return None,
                Taken::Nothing => {}
            }
            // Counted and listening before looking again, so a delivery after the look wakes it.
            let delivery = Arc::clone(&self.delivery);
            let notified = delivery.wake.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let _sleeping = Sleeping::new(&delivery.sleepers);
            match self.take_delivered() {
                Taken::Some(ev) => return Some(ev),
                Taken::Closed => return None,
                Taken::Nothing => notified.await,
            }
        }
    }

    /// [`Subscription::next_shared`] without waiting: the next event when one is already there.
    pub fn try_next_shared(&mut self) -> Option<SharedEvent> {
        if let Some(ev) = self.pop_backlog() {
            return Some(ev);
        }
        match self.take_delivered() {
            Taken::Some(ev) => Some(ev),
            Taken::Closed | Taken::Nothing => None,
        }
    }

    /// The next delivered event after `seen`, taking up to [`TAKE_AT_ONCE`] from the replay
    /// buffer into the backlog in one look; a `lagged` notice when the buffer no longer holds
    /// the next one.
    fn take_delivered(&mut self) -> Taken {
        let log = self.delivery.lock();
        if log.delivered <= self.seen {
            return if log.closed { Taken::Closed } else { Taken::Nothing };
        }
        let oldest = log.replay.front().map_or(log.delivered + 1, |e| e.event.seq);
        if self.seen + 1 < oldest {
            drop(log);
            let missed = oldest - 1 - self.seen;
            return Taken::Some(self.lagged(missed.max(0) as u64));
        }
        let from = log.replay.partition_point(|e| e.event.seq <= self.seen);
        self.backlog.extend(log.replay.range(from..).take(TAKE_AT_ONCE).cloned());
        drop(log);
        self.pop_backlog().map_or(Taken::Nothing, Taken::Some)
    }

    fn pop_backlog(&mut self) -> Option<SharedEvent> {
        loop {
            if let Some(ev) = self.page.pop_front() {
                self.seen = self.seen.max(ev.event.seq);
                return Some(ev);
            }
            if self.from_store.is_none() {
                break;
            }
            self.read_page();
        }
        let ev = self.backlog.pop_front()?;
        if !matches!(ev.event.event, RuntimeEvent::Gap { .. }) {
            self.seen = self.seen.max(ev.event.seq);
        }
        Some(ev)
    }

    /// The next page of `from_store` into `page`, with a `gap` for what the store no longer
    /// holds (pruned) or cannot give back.
    fn read_page(&mut self) {
        let Some(range) = self.from_store.take() else { return };
        let Some(store) = &self.store else { return };
        let rows = match store.events_after(range.after, range.through, REPLAY_PAGE, REPLAY_PAGE_BYTES) {
            Ok(rows) => rows,
            Err(e) => {
                tracing::error!("{e}: a resume gets a gap instead");
                self.gap(range.after, range.through);
                return;
            }
        };
        if rows.is_empty() {
            // Nothing more in the range: what is left of it was pruned (or never written).
            self.gap(range.after, range.through);
            return;
        }
        let mut reached = range.after;
        for row in rows {
            if row.seq > reached + 1 {
                self.gap(reached, row.seq - 1);
            }
            match openagents_protocol::rt::parse_validated::<ServerEvent>(&row.json) {
                Ok(ev) if ev.seq == row.seq => self.page.push_back(Published::stored(ev, row.json, self.run_start)),
                Ok(_) | Err(_) => {
                    tracing::error!(seq = row.seq, "the store holds an event that does not decode: a resume gets a gap for it");
                    self.gap(row.seq - 1, row.seq);
                }
            }
            reached = row.seq;
        }
        if reached < range.through {
            // A page holds what the store gave within its bounds; the rest (or a gap) next.
            self.from_store = Some(StoreRange { after: reached, through: range.through });
        }
    }

    fn gap(&mut self, since: i64, resumed_at: i64) {
        self.counters.gaps.fetch_add(1, Ordering::Relaxed);
        self.page.push_back(Published::shared(ServerEvent { seq: resumed_at, time_ms: Some(now_ms()), event: RuntimeEvent::Gap { since, resumed_at } }));
    }

    /// The `lagged` notice after missing `missed` events the replay buffer no longer holds (with
    /// a durable store too: a client that wants them resumes from its position, which the
    /// store serves).
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

/// A subscriber counted among the hub's sleepers while it lives.
struct Sleeping<'a>(&'a AtomicUsize);

impl<'a> Sleeping<'a> {
    fn new(sleepers: &'a AtomicUsize) -> Sleeping<'a> {
        sleepers.fetch_add(1, Ordering::SeqCst);
        Sleeping(sleepers)
    }
}

impl Drop for Sleeping<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What [`Subscription::take_delivered`] found.
enum Taken {
    Some(SharedEvent),
    Nothing,
    Closed,
}

/// An event's shared SSE frame, for openagents-rpc's event streams; the runtime's final event
/// ends the stream.
impl openagents_rpc::events::SseEvent for Published {
    fn frame(&self) -> &bytes::Bytes {
        self.sse_frame()
    }

    fn ends_stream(&self) -> bool {
        Published::ends_stream(self)
    }
}

/// A subscription is what an SSE stream reads ([`crate::http`]'s `GET /events`).
impl openagents_rpc::events::EventFeed for Subscription {
    type Event = SharedEvent;

    fn next(&mut self) -> impl std::future::Future<Output = Option<SharedEvent>> + Send {
        self.next_shared()
    }

    fn try_next(&mut self) -> Option<SharedEvent> {
        self.try_next_shared()
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

#[cfg(test)]
mod delivery_tests {
    use std::time::Duration;

    use super::*;

    fn text(i: usize) -> RuntimeEvent {
        RuntimeEvent::Text { text: format!("event {i}") }
    }

    /// Reads until `last` and checks that what came covers `1..=last` exactly: every event once,
    /// in order, and each `lagged` notice saying how many were skipped.
    async fn read_through(mut sub: Subscription, last: i64) -> (usize, u64) {
        let (mut next, mut events, mut missed) = (1, 0, 0);
        while next <= last {
            let ev = tokio::time::timeout(Duration::from_secs(20), sub.next()).await.expect("an event in time").expect("the hub is there");
            match ev.event {
                RuntimeEvent::Lagged { missed: m } => {
                    assert_eq!(ev.seq, next - 1, "a lagged notice carries the last position");
                    assert!(m > 0);
                    next += m;
                    missed += m as u64;
                }
                _ => {
                    assert_eq!(ev.seq, next, "events come once and in order");
                    next += 1;
                    events += 1;
                }
            }
        }
        (events, missed)
    }

    #[tokio::test]
    async fn a_subscriber_behind_the_buffer_is_told_exactly_how_many_it_missed() {
        let hub = EventHub::with_capacity(4);
        let sub = hub.subscribe(None);
        for i in 1..=10 {
            hub.publish(text(i));
        }
        let mut sub = sub;
        let notice = sub.next().await.expect("a notice");
        assert_eq!(notice.event, RuntimeEvent::Lagged { missed: 6 });
        assert_eq!(notice.seq, 0);
        let rest: Vec<i64> = [sub.next().await, sub.next().await, sub.next().await, sub.next().await].into_iter().map(|e| e.expect("an event").seq).collect();
        assert_eq!(rest, [7, 8, 9, 10]);
        assert!(sub.try_next_shared().is_none());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiting_subscribers_are_woken_for_every_event_and_miss_none_they_are_not_told_of() {
        const N: i64 = 50_000;
        let hub = EventHub::with_capacity(64);
        let readers: Vec<_> = (0..3).map(|_| tokio::spawn(read_through(hub.subscribe(None), N))).collect();
        let publisher = {
            let hub = hub.clone();
            std::thread::spawn(move || {
                for i in 1..=N as usize {
                    hub.publish(text(i));
                    if i % 1000 == 0 {
                        std::thread::yield_now();
                    }
                }
            })
        };
        publisher.join().expect("the publisher");
        for r in readers {
            let (events, missed) = r.await.expect("a reader");
            assert_eq!(events as u64 + missed, N as u64);
        }
    }

    #[tokio::test]
    async fn subscribers_end_once_they_have_read_what_a_dropped_hub_delivered() {
        let hub = EventHub::with_capacity(16);
        let mut sub = hub.subscribe(None);
        let waiting = {
            let mut other = hub.subscribe(None);
            tokio::spawn(async move { other.next().await.map(|e| e.seq) })
        };
        tokio::task::yield_now().await;
        hub.publish(text(1));
        hub.publish(text(2));
        drop(hub);
        assert_eq!(waiting.await.expect("the waiting subscriber"), Some(1));
        assert_eq!(sub.next().await.map(|e| e.seq), Some(1));
        assert_eq!(sub.next().await.map(|e| e.seq), Some(2));
        assert!(tokio::time::timeout(Duration::from_secs(5), sub.next()).await.expect("ends at once").is_none());
    }

    fn sqlite_hub(name: &str, capacity: usize) -> (EventHub, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("openagents-delivery-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let store = Arc::new(crate::store::SqliteStore::open(&dir.join("store.db")).expect("a store"));
        (EventHub::with_store(capacity, store, 1_000_000).expect("a hub"), dir)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_a_durable_store_a_commit_larger_than_the_buffer_is_delivered_whole() {
        const N: i64 = 1000;
        let (hub, dir) = sqlite_hub("large-commits", 4);
        let sub = hub.subscribe(None);
        // Another connection holds the database's write lock, so what is published queues
        // behind the writer's first commit and goes in the next one, all of it.
        let other = rusqlite::Connection::open(dir.join("store.db")).expect("another connection");
        other.execute_batch("BEGIN IMMEDIATE").expect("the write lock");
        let mut last = 0;
        for i in 1..=N as usize {
            last = hub.publish(text(i)).seq;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        other.execute_batch("COMMIT").expect("the lock released");
        hub.delivered(last).await;
        // Nothing read yet, and the buffer keeps 4: but it keeps both commits whole.
        assert_eq!(read_through(sub, N).await, (N as usize, 0));
        // Dropping the hub writes and delivers what was queued before subscribers end.
        let mut sub = hub.subscribe(None);
        let last = hub.publish(text(0)).seq;
        drop(hub);
        assert_eq!(sub.next().await.map(|e| e.seq), Some(last));
        assert!(sub.next().await.is_none());
        let _ = std::fs::remove_dir_all(dir);
    }
}
