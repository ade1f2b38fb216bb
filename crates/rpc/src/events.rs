//! Server-sent events with ordered, resumable delivery: an [`EventLog`] gives every event the
//! next sequence number and keeps the latest in a bounded replay buffer, which each subscriber
//! reads at its own pace; [`sse_stream`] writes what any [`EventFeed`] yields as an
//! `text/event-stream` body (events already waiting gathered into one chunk, a busy stream
//! holding briefly for more, a keep-alive comment when idle, the end at the server's stop).
//!
//! A server with an [`EventLog`] ([`RpcServer::events`](crate::RpcServer::events)) serves it at
//! `GET /events`: each event as `id: <seq>`, `event: <name>`, `data: <json>`; a client resumes
//! after the `Last-Event-ID` header's sequence number (or `?since=`), as browsers' `EventSource`
//! does on its own. The server never waits for a subscriber: one that falls behind the buffer
//! gets a `lagged` event (`{"missed": n}`) and goes on from the oldest event held; one that
//! resumes from a point no longer held (or not reached yet) gets a `gap` event
//! (`{"after": n, "oldest": m}`) and a replay from the oldest held. Neither carries an `id`, so a
//! reconnect resumes from the last event delivered.
//!
//! ```
//! use openagents_rpc::events::{EventFeed, EventLog, SseEvent};
//!
//! let log = EventLog::new(1024);
//! let first = log.publish("progress", &serde_json::json!({"done": 1}));
//! let second = log.publish("progress", &serde_json::json!({"done": 2}));
//! assert_eq!((first, second), (1, 2));
//! let mut resumed = log.subscribe(Some(1));
//! let next = resumed.try_next().expect("the event after 1");
//! assert_eq!(&next.frame()[..], &b"id: 2\nevent: progress\ndata: {\"done\":2}\n\n"[..]);
//! ```

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::stream::{self, Stream};
use tokio::sync::watch;

use crate::listen::Stop;
use crate::{Peer, PeerError};
use serde_json::value::RawValue;

/// An event an SSE stream carries: its frame, made once and shared by every stream.
pub trait SseEvent: Send + Sync + 'static {
    /// The event's whole frame (`id:`, `event:`, `data:` lines and the blank line).
    fn frame(&self) -> &Bytes;
    /// Whether the stream ends after it (a server's last word). False by default.
    fn ends_stream(&self) -> bool {
        false
    }
}

impl<T: SseEvent + ?Sized> SseEvent for Arc<T> {
    fn frame(&self) -> &Bytes {
        (**self).frame()
    }

    fn ends_stream(&self) -> bool {
        (**self).ends_stream()
    }
}

/// What an SSE stream reads: the events after some point, in order.
pub trait EventFeed: Send + 'static {
    /// The events it yields.
    type Event: SseEvent;
    /// The next event, waiting for one; `None` when the feed has ended.
    fn next(&mut self) -> impl Future<Output = Option<Self::Event>> + Send;
    /// The next event when one is waiting.
    fn try_next(&mut self) -> Option<Self::Event>;
}

/// How an SSE stream paces itself. The defaults suit a browser or a program on a LAN.
#[derive(Debug, Clone, Copy)]
pub struct SseOptions {
    /// An idle stream gets a comment (`:`) after this long without anything else, as a
    /// keep-alive (15 s).
    pub keep_alive: Duration,
    /// How long a busy stream holds its events after its previous chunk, for more to join them
    /// in one write (1 ms): a stream kept busy writes once per hold or per `hold_bytes`, not
    /// once per event, which is what a write to every one of many subscribers costs. An event
    /// after a quiet spell goes out at once.
    pub hold: Duration,
    /// How many bytes end a hold at once (16 KiB).
    pub hold_bytes: usize,
    /// The most bytes of events already waiting put in one chunk (32 KiB).
    pub batch_bytes: usize,
    /// Once the server stops, how long the stream waits for what is already on its way (a
    /// final event) before it ends (200 ms).
    pub final_wait: Duration,
}

impl Default for SseOptions {
    fn default() -> Self {
        SseOptions { keep_alive: Duration::from_secs(15), hold: Duration::from_millis(1), hold_bytes: 16 * 1024, batch_bytes: 32 * 1024, final_wait: Duration::from_millis(200) }
    }
}

impl SseOptions {
    /// Whether a stream whose previous chunk went out at `previous` waits (until
    /// `previous + hold`) for more events before it writes `batched` bytes at `now`: only when
    /// it is busy, its previous chunk less than the hold ago, and then only until `hold_bytes`
    /// have gathered.
    pub fn hold_for_more(&self, previous: tokio::time::Instant, now: tokio::time::Instant, batched: usize) -> bool {
        now < previous + self.hold && batched < self.hold_bytes
    }
}

/// `feed`'s events as the chunks of an SSE body, until the feed ends, an event ends the stream,
/// or `stop` (then what arrives within [`SseOptions::final_wait`] still goes out). Events
/// already waiting go out in one chunk (one copy of each shared frame); a lone event goes out as
/// its shared frame itself; a busy stream waits a little for more ([`SseOptions::hold_for_more`]);
/// an idle one gets a keep-alive comment. What a stream holds is its own, taken from the feed as
/// it comes, so the hold never makes it lag.
pub fn sse_stream<F: EventFeed, S: Stop>(feed: F, stop: S, options: SseOptions) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
    let alive = Box::pin(tokio::time::sleep(options.keep_alive));
    // The stream's one buffer for chunks of several events: each chunk is split off it, and its
    // room is taken back once hyper has written (and dropped) the chunk, so a busy stream does
    // not allocate (and fault in) a new buffer per chunk.
    // The state: the feed, the stop, whether the stream has ended, the keep-alive timer, when the
    // last chunk went out, the chunk buffer, and when the stream ends once the stop was seen.
    let state = (feed, stop, false, alive, tokio::time::Instant::now(), BytesMut::new(), None);
    stream::unfold(state, move |(mut feed, stop, done, mut alive, mut sent, mut buf, mut ending)| async move {
        if done {
            return None;
        }
        // Once stopped, what arrives within `final_wait` still goes out, then the stream ends
        // however much more the feed holds.
        if stop.is_stopped() {
            let until = *ending.get_or_insert_with(|| tokio::time::Instant::now() + options.final_wait);
            if tokio::time::Instant::now() >= until {
                return None;
            }
        }
        let ev = loop {
            tokio::select! {
                biased;
                ev = feed.next() => break ev?,
                () = stop.stopped() => {
                    // Deliver what is already queued (a final event), then end.
                    let until = *ending.get_or_insert_with(|| tokio::time::Instant::now() + options.final_wait);
                    match tokio::time::timeout_at(until, feed.next()).await {
                        Ok(Some(ev)) => break ev,
                        _ => return None,
                    }
                }
                () = &mut alive => {
                    // The timer is not reset per event (that would cost more than the event):
                    // when it fires, the comment goes out only if nothing did for the interval.
                    let (due, now) = (sent + options.keep_alive, tokio::time::Instant::now());
                    if now >= due {
                        alive.as_mut().reset(now + options.keep_alive);
                        // Idle that long: its buffer's room goes back too.
                        return Some((Ok(Bytes::from_static(b":\n\n")), (feed, stop, false, alive, now, BytesMut::new(), ending)));
                    }
                    alive.as_mut().reset(due);
                }
            }
        };
        let mut last = ev.ends_stream();
        let previous = sent;
        let now = tokio::time::Instant::now();
        if now >= previous + options.hold && buf.capacity() > 0 {
            // Quiet for a while: the buffer's room goes back (it is taken again when busy).
            buf = BytesMut::new();
        }
        let mut full = false;
        if !last {
            (last, full) = gather(&mut feed, &mut buf, &ev, None, options.batch_bytes);
        }
        let batched = |buf: &BytesMut| if buf.is_empty() { ev.frame().len() } else { buf.len() };
        if !last && !full && options.hold_for_more(previous, now, batched(&buf)) {
            let mut until = std::pin::pin!(tokio::time::sleep_until(previous + options.hold));
            loop {
                tokio::select! {
                    biased;
                    more = feed.next() => {
                        let Some(more) = more else { break };
                        (last, full) = gather(&mut feed, &mut buf, &ev, Some(more), options.batch_bytes);
                        // The hold's end is the timer's (no clock read per wake-up).
                        if last || full || batched(&buf) >= options.hold_bytes {
                            break;
                        }
                    }
                    () = &mut until => break,
                }
            }
        }
        sent = tokio::time::Instant::now();
        // Split off the buffer, whose room comes back once hyper has dropped the chunk.
        let chunk = if buf.is_empty() { ev.frame().clone() } else { buf.split().freeze() };
        Some((Ok(chunk), (feed, stop, last, alive, sent, buf, ending)))
    })
}

/// Adds `next` (when given) and then every event already waiting to the chunk in `buf`, which
/// starts with `first`'s frame; stops at an event that ends the stream or once the chunk holds
/// `batch_bytes`. Returns (the stream's end reached, chunk full).
fn gather<F: EventFeed>(feed: &mut F, buf: &mut BytesMut, first: &F::Event, mut next: Option<F::Event>, batch_bytes: usize) -> (bool, bool) {
    while let Some(more) = next.take().or_else(|| feed.try_next()) {
        if buf.is_empty() {
            buf.reserve(batch_bytes + 4096);
            buf.extend_from_slice(first.frame());
        }
        buf.extend_from_slice(more.frame());
        let (last, full) = (more.ends_stream(), buf.len() >= batch_bytes);
        if last || full {
            return (last, full);
        }
    }
    (false, false)
}

/// An SSE response of `body`'s chunks after `hello` (a first comment, and `retry:` for
/// `EventSource`, sent at once so a buffering proxy forwards the stream's start and the client
/// knows it is connected): `text/event-stream`, not cached, not buffered by a proxy.
pub fn sse_response<S>(hello: Bytes, body: S) -> axum::response::Response
where
    S: Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    use axum::http::{HeaderValue, header};
    use futures_util::StreamExt;
    let hello = stream::once(async move { Ok::<_, Infallible>(hello) });
    let mut response = axum::response::Response::new(axum::body::Body::from_stream(hello.chain(body)));
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Where an event stream resumes: after the `Last-Event-ID` header's sequence number, else after
/// the `since=` query parameter's, else at the next new event (`Ok(None)`).
///
/// # Errors
///
/// The reason, for a 400, when a value is not a sequence number (a non-negative decimal
/// integer).
pub fn resume_point(last_event_id: Option<&[u8]>, query: Option<&str>) -> Result<Option<u64>, String> {
    let parse = |what: &str, v: &str| v.trim().parse::<u64>().map_err(|_| format!("{what} must be a sequence number (a non-negative integer), got {:?}", crate::bounded(v, 64)));
    if let Some(v) = last_event_id {
        let v = std::str::from_utf8(v).map_err(|_| "`Last-Event-ID` must be a sequence number (a non-negative integer)".to_owned())?;
        return parse("`Last-Event-ID`", v).map(Some);
    }
    match query.and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("since="))) {
        Some(v) => parse("`since`", v).map(Some),
        None => Ok(None),
    }
}

/// One event of an [`EventLog`]: its sequence number, name, data and SSE frame. Cheap to clone.
#[derive(Debug, Clone)]
pub struct LogEvent(Arc<Entry>);

#[derive(Debug)]
struct Entry {
    seq: u64,
    /// `id:`, `event:` and `data:` lines, as `GET /events` writes it.
    frame: Bytes,
    /// Where the name is in the frame.
    name: std::ops::Range<usize>,
    /// The data as one line of JSON (a part of the frame when it held no line break).
    data: Bytes,
}

impl LogEvent {
    /// Its sequence number (0 for a `lagged` or `gap` note, which has none).
    pub fn seq(&self) -> u64 {
        self.0.seq
    }

    /// Its name (`lagged` or `gap` for a note).
    pub fn name(&self) -> &str {
        std::str::from_utf8(&self.0.frame[self.0.name.clone()]).unwrap_or_default()
    }

    /// Its data, one line of JSON.
    pub fn data(&self) -> &[u8] {
        &self.0.data
    }

    /// An event of `name` (already made safe) with `json` as published: its frame, with the
    /// `id:` line when it has a sequence number; its data `json` itself, or `instead` (what
    /// [`one_line`] made of it).
    fn new(seq: u64, name: &[u8], json: &[u8], instead: Option<Vec<u8>>) -> LogEvent {
        let mut frame = Vec::with_capacity(json.len() + name.len() + 32);
        if seq > 0 {
            frame.extend_from_slice(format!("id: {seq}\n").as_bytes());
        }
        frame.extend_from_slice(b"event: ");
        let name_at = frame.len()..frame.len() + name.len();
        frame.extend_from_slice(name);
        frame.extend_from_slice(b"\ndata: ");
        let data_at = frame.len();
        // Every line break (`\r\n`, `\r` or `\n`, as an SSE reader splits lines) starts a
        // `data:` line of its own, so no text can make a field of its own.
        let mut rest = json;
        while let Some(at) = rest.iter().position(|b| *b == b'\n' || *b == b'\r') {
            frame.extend_from_slice(&rest[..at]);
            frame.extend_from_slice(b"\ndata: ");
            let skip = if rest[at] == b'\r' && rest.get(at + 1) == Some(&b'\n') { 2 } else { 1 };
            rest = &rest[at + skip..];
        }
        frame.extend_from_slice(rest);
        let data_end = frame.len();
        frame.extend_from_slice(b"\n\n");
        let frame = Bytes::from(frame);
        let data = match instead {
            Some(data) => Bytes::from(data),
            None => frame.slice(data_at..data_end),
        };
        LogEvent(Arc::new(Entry { seq, frame, name: name_at, data }))
    }
}

/// `None` when `json` is one line of JSON, as a notification carries it; else what it carries
/// instead: the same JSON on one line (line breaks in JSON are whitespace between its tokens),
/// or, for what is no JSON, an object saying so.
fn one_line(json: &[u8]) -> Option<Vec<u8>> {
    let not_json = |e: serde_json::Error| serde_json::to_vec(&serde_json::json!({ "error": format!("the event's data is not JSON: {e}") })).unwrap_or_default();
    if json.iter().any(|b| *b == b'\n' || *b == b'\r') {
        return Some(serde_json::from_slice::<serde_json::Value>(json).map_or_else(not_json, |v| serde_json::to_vec(&v).unwrap_or_default()));
    }
    serde_json::from_slice::<&RawValue>(json).err().map(not_json)
}

impl SseEvent for LogEvent {
    fn frame(&self) -> &Bytes {
        &self.0.frame
    }
}

/// The default replay buffer of an [`EventLog`]: 1024 events.
pub const EVENT_LOG_CAPACITY: usize = 1024;

/// A sequence of events with a bounded replay buffer (see the [module](self)). Cheap to clone:
/// clones publish to the same log.
#[derive(Clone)]
pub struct EventLog {
    held: Arc<Mutex<Held>>,
    newest: Arc<watch::Sender<u64>>,
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog").field("newest", &*self.newest.borrow()).finish_non_exhaustive()
    }
}

struct Held {
    /// The events held, oldest first, numbered without holes.
    events: VecDeque<LogEvent>,
    capacity: usize,
    /// The sequence number of the newest event published (0: none yet).
    newest: u64,
    closed: bool,
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog::new(EVENT_LOG_CAPACITY)
    }
}

impl EventLog {
    /// A log that holds the latest `capacity` events (at least one) for replay.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        EventLog { held: Arc::new(Mutex::new(Held { events: VecDeque::with_capacity(capacity.min(4096)), capacity, newest: 0, closed: false })), newest: Arc::new(watch::channel(0).0) }
    }

    /// Publishes an event named `event` (a line of letters, digits, `_`, `-`, `.`, `/`; any
    /// other character becomes `_`) with `data` as its JSON: its sequence number. The server
    /// never waits: a subscriber that cannot keep up is told it lagged.
    pub fn publish(&self, event: &str, data: &impl serde::Serialize) -> u64 {
        let json = serde_json::to_vec(data).unwrap_or_else(|e| serde_json::to_vec(&serde_json::json!({ "error": e.to_string() })).unwrap_or_default());
        // The encoder writes one line of JSON: nothing to check.
        self.publish_encoded(event, &json, None)
    }

    /// [`EventLog::publish`] with the data already encoded as one line of JSON (a line break in
    /// it is written as its own `data:` line, which a client joins back).
    pub fn publish_json(&self, event: &str, json: &[u8]) -> u64 {
        self.publish_encoded(event, json, one_line(json))
    }

    /// Publishes `json`, its data for notifications `instead` when [`one_line`] said so.
    fn publish_encoded(&self, event: &str, json: &[u8], instead: Option<Vec<u8>>) -> u64 {
        let name: Vec<u8> = event.bytes().map(|b| if b.is_ascii_alphanumeric() || b"_-./".contains(&b) { b } else { b'_' }).collect();
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let seq = held.newest + 1;
        let ev = LogEvent::new(seq, &name, json, instead);
        if held.events.len() == held.capacity {
            held.events.pop_front();
        }
        held.events.push_back(ev);
        held.newest = seq;
        drop(held);
        // Two publishers may get here in either order: the newest only grows.
        self.newest.send_modify(|n| *n = (*n).max(seq));
        seq
    }

    /// Ends the log: every subscriber gets what is held, then its feed ends.
    pub fn close(&self) {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
        self.newest.send_modify(|_| {});
    }

    /// The sequence number of the newest event (0 when none was published).
    pub fn newest(&self) -> u64 {
        *self.newest.borrow()
    }

    /// A subscriber from the next new event (`after: None`), or resuming after the event `after`:
    /// a replay of what is held after it, with a `gap` first when events after it are no longer
    /// held (or it names one not published yet).
    pub fn subscribe(&self, after: Option<u64>) -> LogSubscription {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let oldest = held.events.front().map_or(held.newest + 1, LogEvent::seq);
        let (cursor, note) = match after {
            None => (held.newest, None),
            Some(n) if n >= oldest - 1 && n <= held.newest => (n, None),
            Some(n) => (oldest - 1, Some(note("gap", &serde_json::json!({ "after": n, "oldest": oldest })))),
        };
        LogSubscription { log: self.clone(), cursor, note, newest: self.newest.subscribe() }
    }
}

/// Sends the caller each event `sub` yields as the notification `method` on the caller's
/// connection (stdio, WebSocket), in order with the connection's replies, until the log closes
/// or the connection does: params `{"seq": n, "event": name, "data": …}` (no `seq` on a
/// `lagged` or `gap` note). Resumable as `GET /events` is: a caller that reconnects subscribes
/// again after the last `seq` it got ([`EventLog::subscribe`] with `Some(seq)`) and gets every
/// later event still held, after a `gap` note when some are not. Run it on a task of its own,
/// started after the reply of the call that subscribes ([`Context::after_reply`](crate::Context::after_reply)),
/// so the caller reads that answer before the first event.
///
/// ```no_run
/// # use openagents_rpc::{Context, events::{self, EventLog}};
/// # fn subscribe(cx: &Context, log: &EventLog, since: Option<u64>) {
/// let (sub, peer) = (log.subscribe(since), cx.peer().clone());
/// cx.after_reply(async move {
///     tokio::spawn(async move { events::forward(sub, peer, "event").await });
/// });
/// # }
/// ```
///
/// # Errors
///
/// [`PeerError::Unsupported`] where the caller has no connection to send on (HTTP `POST /rpc`:
/// use `GET /events`), [`PeerError::Closed`] once the connection has closed.
pub async fn forward(mut sub: LogSubscription, peer: Peer, method: &str) -> Result<(), PeerError> {
    if !peer.can_notify() {
        return Err(PeerError::Unsupported);
    }
    let head = {
        let mut head = br#"{"jsonrpc":"2.0","method":"#.to_vec();
        head.extend_from_slice(serde_json::to_string(method).unwrap_or_default().as_bytes());
        head.extend_from_slice(br#","params":{"#);
        head
    };
    loop {
        let ev = tokio::select! {
            ev = sub.next() => ev,
            () = peer.closed() => return Err(PeerError::Closed),
        };
        let Some(ev) = ev else { return Ok(()) };
        let mut message = Vec::with_capacity(head.len() + ev.data().len() + ev.name().len() + 48);
        message.extend_from_slice(&head);
        if ev.seq() > 0 {
            message.extend_from_slice(format!(r#""seq":{},"#, ev.seq()).as_bytes());
        }
        message.extend_from_slice(br#""event":""#);
        message.extend_from_slice(ev.name().as_bytes());
        message.extend_from_slice(br#"","data":"#);
        message.extend_from_slice(ev.data());
        message.extend_from_slice(b"}}");
        peer.send_encoded(message).await?;
    }
}

fn note(event: &str, data: &serde_json::Value) -> LogEvent {
    LogEvent::new(0, event.as_bytes(), data.to_string().as_bytes(), None)
}

/// One subscriber's place in an [`EventLog`]: an [`EventFeed`].
#[derive(Debug)]
pub struct LogSubscription {
    log: EventLog,
    /// The sequence number of the last event taken.
    cursor: u64,
    /// A note to deliver before the next event.
    note: Option<LogEvent>,
    newest: watch::Receiver<u64>,
}

impl LogSubscription {
    /// The next event when one is waiting; `Err(true)` when the log is closed and all is
    /// taken, `Err(false)` when none is waiting yet.
    fn take(&mut self) -> Result<LogEvent, bool> {
        if let Some(n) = self.note.take() {
            return Ok(n);
        }
        let held = self.log.held.lock().unwrap_or_else(|p| p.into_inner());
        let Some(oldest) = held.events.front().map(LogEvent::seq) else { return Err(held.closed) };
        if self.cursor + 1 < oldest {
            // Fell behind the buffer: told how many it missed, then from the oldest held.
            let missed = oldest - 1 - self.cursor;
            self.cursor = oldest - 1;
            return Ok(note("lagged", &serde_json::json!({ "missed": missed })));
        }
        match held.events.get((self.cursor + 1 - oldest) as usize) {
            Some(ev) => {
                self.cursor = ev.seq();
                Ok(ev.clone())
            }
            None => Err(held.closed),
        }
    }

    /// The sequence number of the last event taken.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }
}

impl EventFeed for LogSubscription {
    type Event = LogEvent;

    async fn next(&mut self) -> Option<LogEvent> {
        loop {
            // Marked seen before the look, so a publish after it wakes the wait below.
            self.newest.borrow_and_update();
            match self.take() {
                Ok(ev) => return Some(ev),
                Err(true) => return None,
                Err(false) => {
                    if self.newest.changed().await.is_err() {
                        return None;
                    }
                }
            }
        }
    }

    fn try_next(&mut self) -> Option<LogEvent> {
        self.take().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(ev: &LogEvent) -> String {
        String::from_utf8(ev.frame().to_vec()).expect("UTF-8")
    }

    #[tokio::test]
    async fn a_subscriber_gets_every_event_in_order_and_resumes_after_any_held() {
        let log = EventLog::new(8);
        let mut live = log.subscribe(None);
        for i in 1..=3 {
            log.publish("tick", &i);
        }
        for i in 1..=3u64 {
            let ev = live.next().await.expect("an event");
            assert_eq!((ev.seq(), text(&ev)), (i, format!("id: {i}\nevent: tick\ndata: {i}\n\n")));
        }
        assert!(live.try_next().is_none());
        let mut resumed = log.subscribe(Some(1));
        assert_eq!(resumed.try_next().map(|e| e.seq()), Some(2));
        let mut from_start = log.subscribe(Some(0));
        assert_eq!(from_start.try_next().map(|e| e.seq()), Some(1), "0 is before the first event: everything is replayed");
    }

    #[tokio::test]
    async fn a_slow_subscriber_is_told_it_lagged_and_a_lost_resume_point_is_a_gap() {
        let log = EventLog::new(4);
        let mut slow = log.subscribe(None);
        for i in 1..=10 {
            log.publish("tick", &i);
        }
        let lagged = slow.next().await.expect("a note");
        assert_eq!(text(&lagged), "event: lagged\ndata: {\"missed\":6}\n\n");
        assert_eq!(slow.next().await.map(|e| e.seq()), Some(7), "then the oldest held");
        let mut late = log.subscribe(Some(2));
        assert_eq!(text(&late.try_next().expect("a note")), "event: gap\ndata: {\"after\":2,\"oldest\":7}\n\n");
        assert_eq!(late.try_next().map(|e| e.seq()), Some(7));
        let mut ahead = log.subscribe(Some(99));
        assert!(text(&ahead.try_next().expect("a note")).starts_with("event: gap\n"), "a point not reached yet is a gap too");
    }

    #[tokio::test]
    async fn a_closed_log_ends_its_feeds_after_what_is_held_and_names_are_kept_to_one_line() {
        let log = EventLog::new(4);
        let mut sub = log.subscribe(Some(0));
        log.publish_json("bad\nname", b"{\"a\":\r\n1,\r\"id\":\n2}");
        log.close();
        assert_eq!(text(&sub.next().await.expect("the event")), "id: 1\nevent: bad_name\ndata: {\"a\":\ndata: 1,\ndata: \"id\":\ndata: 2}\n\n");
        assert!(sub.next().await.is_none());
    }

    /// A feed that always has another event.
    struct Endless(Bytes);

    impl EventFeed for Endless {
        type Event = LogEvent;

        async fn next(&mut self) -> Option<LogEvent> {
            tokio::task::yield_now().await;
            self.try_next()
        }

        fn try_next(&mut self) -> Option<LogEvent> {
            Some(LogEvent(Arc::new(Entry { seq: 1, frame: self.0.clone(), name: 0..0, data: Bytes::new() })))
        }
    }

    #[tokio::test]
    async fn a_stream_ends_at_the_stop_however_much_more_its_feed_holds() {
        use futures_util::StreamExt;
        let shutdown = crate::Shutdown::new();
        let options = SseOptions { final_wait: Duration::from_millis(50), ..SseOptions::default() };
        let mut stream = std::pin::pin!(sse_stream(Endless(Bytes::from_static(b"data: 1\n\n")), shutdown.clone(), options));
        assert!(stream.next().await.is_some(), "events flow before the stop");
        shutdown.trigger();
        let drained = tokio::time::timeout(Duration::from_secs(5), async { while stream.next().await.is_some() {} }).await;
        assert!(drained.is_ok(), "the stream ended within its final wait of the stop");
    }

    #[test]
    fn only_a_busy_stream_holds_its_events_and_only_while_they_are_few() {
        let o = SseOptions::default();
        let previous = tokio::time::Instant::now();
        // Busy (its previous chunk just went) and small: it waits for more.
        assert!(o.hold_for_more(previous, previous, 200));
        assert!(o.hold_for_more(previous, previous + o.hold / 2, o.hold_bytes - 1));
        // Enough gathered: it writes.
        assert!(!o.hold_for_more(previous, previous, o.hold_bytes));
        // The hold is over, or the stream was quiet that long: it writes at once.
        assert!(!o.hold_for_more(previous, previous + o.hold, 200));
        assert!(!o.hold_for_more(previous, previous + Duration::from_secs(5), 1));
    }

    #[test]
    fn resume_points_come_from_the_header_else_the_query() {
        assert_eq!(resume_point(Some(b" 42 "), Some("since=7")), Ok(Some(42)));
        assert_eq!(resume_point(None, Some("a=1&since=7")), Ok(Some(7)));
        assert_eq!(resume_point(None, None), Ok(None));
        assert!(resume_point(Some(b"-1"), None).is_err());
        assert!(resume_point(None, Some("since=x")).is_err());
    }
}
