//! What every network connection gets, whatever it speaks: the accept loop
//! ([`serve_connections`]) with connection slots (a global cap and a per-peer cap, where a
//! connection that has not authenticated gives its place to a newcomer), hyper's HTTP/1 with a
//! bounded header read timed by the connection's task, a guard that closes a connection whose
//! client stops reading ([`StallGuard`]), the lingering read of a body refused before it was
//! read ([`Lingering`]), and the budget of buffered request bodies ([`BodyBudget`],
//! [`read_body`]).
//!
//! [`RpcServer::serve_http`](crate::RpcServer::serve_http) is built on these, with
//! [`ConnectionLimits`] set by
//! [`RpcServer::connection_limits`](crate::RpcServer::connection_limits). A server with routes
//! of its own (an event stream, a web page) serves them through the same loop and keeps every
//! one of these protections:
//!
//! ```no_run
//! use std::convert::Infallible;
//! use openagents_rpc::Shutdown;
//! use openagents_rpc::listen::{ConnectionLimits, serve_connections};
//!
//! # async fn run() -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let shutdown = Shutdown::new();
//! serve_connections(listener, &ConnectionLimits::default(), shutdown, |_accepted| {
//!     |_request| async { Ok::<_, Infallible>(hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from_static(b"hello")))) }
//! })
//! .await;
//! # Ok(())
//! # }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;
use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;

/// The default most connections served at once: 256. One more takes the place of the oldest
/// connection that has not authenticated and is waiting for bytes (see
/// [`MAX_CONNECTIONS_PER_PEER`]); when there is none, it is answered 503 (`Retry-After: 1`,
/// a JSON-RPC busy error) and closed.
pub const MAX_CONNECTIONS: usize = 256;
/// The default most connections one peer address may hold at once (64), so one client cannot
/// take every slot. On loopback every local process is the same peer, so a connection that has
/// not yet sent an authenticated request cannot keep its place against a newcomer: past the cap,
/// the newcomer takes the place of that peer's oldest connection that has not authenticated and
/// was found waiting for bytes (one not read yet only when there is none such, so a client that
/// sends its request at once keeps its place). Only when every connection of the peer has
/// authenticated is a newcomer refused: answered 503 (`Retry-After: 1`, a JSON-RPC busy error)
/// and closed.
pub const MAX_CONNECTIONS_PER_PEER: usize = 64;
/// The default largest request header block: 64 KiB. Headers arrive before authentication, so
/// they are bounded far below the body limit.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// The default time a client has to send a request's header block (slow senders are cut off):
/// 10 s.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The default time a response (or an event stream) may wait for a client that reads nothing
/// before its connection is closed: 30 s.
pub const WRITE_STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The default most bytes of request bodies every connection of a listener together holds in
/// memory: 64 MiB, four bodies of the default frame bound. Without it, each of
/// [`MAX_CONNECTIONS`] connections could hold a 16 MiB body at once (4 GiB). A body of declared
/// length takes its room before it is read; one without a declared length takes room as it
/// arrives.
pub const MAX_BUFFERED_BODY_BYTES: usize = 4 * crate::MAX_FRAME_BYTES;
/// The default time a body waits for room in the budget (others being handled free theirs within
/// milliseconds) before it is refused with 503: 5 s.
pub const BODY_ROOM_WAIT: Duration = Duration::from_secs(5);
/// The default time a client has to send a request's body: 30 s.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The default longest lingering read of a body refused before it was read (413, 401, 403,
/// 415…), so a client that writes its whole body before reading (no `Expect: 100-continue`)
/// reads the refusal instead of a connection reset; after it, the connection is closed: 10 s.
pub const LINGER_TIMEOUT: Duration = Duration::from_secs(10);
/// The default time the lingering read waits for the client's next bytes: a client that
/// declared a body and sends none (or waits for the answer) is not held open for the whole of
/// [`LINGER_TIMEOUT`]: 2 s.
pub const LINGER_IDLE: Duration = Duration::from_secs(2);
/// The default most bytes of a refused body read and dropped: 64 MiB, so a body somewhat over
/// the limit is drained, not an endless one.
pub const LINGER_MAX_BYTES: usize = 4 * crate::MAX_FRAME_BYTES;

/// How a listener guards its connections. The defaults are the constants of this module.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// The most connections served at once ([`MAX_CONNECTIONS`]).
    pub max_connections: usize,
    /// The most connections one peer address may hold ([`MAX_CONNECTIONS_PER_PEER`]). Behind a
    /// reverse proxy every connection comes from the proxy's address: raise it to the proxy's
    /// own connection pool (or to `max_connections`).
    pub max_connections_per_peer: usize,
    /// The largest request header block, in bytes ([`MAX_HEADER_BYTES`]): hyper's read buffer
    /// is sized from it, and a server answers a larger block 431 (see [`header_block_len`]).
    pub max_header_bytes: usize,
    /// The time a client has to send a header block ([`HEADER_READ_TIMEOUT`]), counted from the
    /// end of the connection's last call or lingering read (or from its accept), never during
    /// one: an idle keep-alive connection is closed after it too.
    pub header_read_timeout: Duration,
    /// The time a write may wait for the client to read ([`WRITE_STALL_TIMEOUT`]).
    pub write_stall_timeout: Duration,
    /// The budget of request bodies held at once, in bytes ([`MAX_BUFFERED_BODY_BYTES`]).
    pub max_buffered_body_bytes: usize,
    /// The time a body waits for room in that budget ([`BODY_ROOM_WAIT`]).
    pub body_room_wait: Duration,
    /// The time a client has to send a body ([`BODY_READ_TIMEOUT`]).
    pub body_read_timeout: Duration,
    /// How a body refused before it was read is read and dropped.
    pub linger: Linger,
    /// How long a connection may take to finish its request in flight once the server stops
    /// (`None`, the default: as long as the request takes).
    pub shutdown_grace: Option<Duration>,
    /// Whether each response's head and body are copied into one buffer and written at once
    /// (`true`, the default: fewer instructions for the small replies of JSON-RPC), or written
    /// as they are with vectored writes (`false`: no copy of a large body or of a stream's
    /// chunks, as an event stream serving many subscribers wants).
    pub flatten_writes: bool,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: MAX_CONNECTIONS,
            max_connections_per_peer: MAX_CONNECTIONS_PER_PEER,
            max_header_bytes: MAX_HEADER_BYTES,
            header_read_timeout: HEADER_READ_TIMEOUT,
            write_stall_timeout: WRITE_STALL_TIMEOUT,
            max_buffered_body_bytes: MAX_BUFFERED_BODY_BYTES,
            body_room_wait: BODY_ROOM_WAIT,
            body_read_timeout: BODY_READ_TIMEOUT,
            linger: Linger::default(),
            shutdown_grace: None,
            flatten_writes: true,
        }
    }
}

/// The lingering read of a body dropped before its end (see [`Lingering`]).
#[derive(Debug, Clone, Copy)]
pub struct Linger {
    /// The longest it reads ([`LINGER_TIMEOUT`]).
    pub timeout: Duration,
    /// The pause that ends it ([`LINGER_IDLE`]).
    pub idle: Duration,
    /// The most bytes it drops ([`LINGER_MAX_BYTES`]).
    pub max_bytes: usize,
}

impl Default for Linger {
    fn default() -> Self {
        Linger { timeout: LINGER_TIMEOUT, idle: LINGER_IDLE, max_bytes: LINGER_MAX_BYTES }
    }
}

/// A signal that stops a listener: [`crate::Shutdown`], or a server's own. `is_stopped` must be
/// true by the time `stopped` resolves (a connection polls the wait once, then reads the flag on
/// every wake-up).
pub trait Stop: Clone + Send + Sync + 'static {
    /// Resolves once the listener is to stop.
    fn stopped(&self) -> impl Future<Output = ()> + Send + '_;
    /// Whether the listener is to stop.
    fn is_stopped(&self) -> bool;
}

impl Stop for crate::Shutdown {
    fn stopped(&self) -> impl Future<Output = ()> + Send + '_ {
        self.triggered()
    }

    fn is_stopped(&self) -> bool {
        self.is_triggered()
    }
}

/// A connection [`serve_connections`] accepted: who it comes from, the local address it
/// reached, and its place in the listener's slots.
#[derive(Debug)]
pub struct Accepted {
    /// The peer's address.
    pub peer: IpAddr,
    /// The listener's address the connection reached (its own, on a listener bound to every
    /// address).
    pub local: IpAddr,
    /// The connection's place, held while the connection is open. A connection upgraded to a
    /// WebSocket keeps it by holding a clone.
    pub slot: Arc<Slot>,
}

/// How a connection's task ended.
#[derive(PartialEq, Eq)]
enum End {
    /// The connection closed, or was upgraded.
    Done,
    /// The listener stops.
    Stopped,
    /// A newcomer took its place.
    Evicted,
    /// No request head arrived within the header read timeout.
    HeadTimedOut,
}

/// A connection's header read timeout: one timer, set at accept and moved only when it fires —
/// to when the next head is due ([`Standing::head_due`]: the timeout after the end of the last
/// open request or lingering read), or a timeout on while either goes on. hyper has no timer of
/// its own, so a request costs no timer at all.
struct HeadWatch<'a> {
    standing: &'a Standing,
    timeout: Duration,
    timer: Pin<Box<Sleep>>,
    /// Whether the timer is set to the next head's due time with this task's waker registered;
    /// until it is, every poll sets it.
    armed: bool,
}

impl<'a> HeadWatch<'a> {
    fn new(standing: &'a Standing, timeout: Duration) -> Self {
        HeadWatch { standing, timeout, timer: Box::pin(tokio::time::sleep(timeout)), armed: false }
    }

    /// Polls `conn`: `End::Done` when it ends, `End::HeadTimedOut` when it has waited longer
    /// than the timeout for a head and did not find one in this poll.
    fn poll<C: Future>(&mut self, conn: Pin<&mut C>, cx: &mut Context<'_>) -> Poll<End> {
        let mut late = false;
        if !self.armed || self.timer.is_elapsed() {
            let now = tokio::time::Instant::now();
            let due = self.standing.head_due(self.timeout).unwrap_or(now + self.timeout);
            if due <= now {
                late = true;
            } else {
                self.timer.as_mut().reset(due);
                // Outside tokio's budget: with the task's budget spent (by another future of
                // this task, or by the task that ran before on this thread), the poll would
                // return `Pending` without registering the waker, and the timer would fire
                // unheard.
                late = Pin::new(&mut tokio::task::unconstrained(self.timer.as_mut())).poll(cx).is_ready();
                self.armed = !late;
            }
        }
        if conn.poll(cx).is_ready() {
            return Poll::Ready(End::Done);
        }
        if late {
            // Only when this poll found no head either: one that came just before the deadline
            // opened a request (or was answered at once, starting a new wait).
            if self.standing.head_due(self.timeout).is_some_and(|due| due <= tokio::time::Instant::now()) {
                return Poll::Ready(End::HeadTimedOut);
            }
            // The timer is set on the next poll.
            self.armed = false;
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

/// Accepts connections on `listener` until `stop`, and serves each with hyper's HTTP/1 (with
/// upgrades), with the guards of `limits`:
///
/// - every connection takes a slot; none left, or its peer's all taken, it takes the place of
///   the oldest connection that has not authenticated and waits for bytes with no request open
///   (that one is closed), or is refused when there is none ([`ConnectionSlots`]): answered
///   503 with `Retry-After: 1` and a JSON-RPC busy error, then closed ([`refuse_connection`]). A
///   request is open from its head to its response's end (an event stream's too): a connection
///   is never evicted in the middle of a call. A server marks an authenticated connection with
///   [`Slot::trust`];
/// - a header block must arrive within `header_read_timeout` of the end of the last open request
///   and lingering read (or of the accept), even while the listener stops, and hyper holds at
///   most about `max_header_bytes` of it;
/// - a write that waits longer than `write_stall_timeout` for the client to read closes the
///   connection ([`StallGuard`]);
/// - every request's body is [`Lingering`]: dropped unread, the rest is read and dropped for a
///   bounded time, so a client still writing it reads the answer.
///
/// `service_for` makes each connection's request handler from what was accepted. Once `stop`
/// resolves, no connection is accepted, each connection finishes its request in flight (within
/// `shutdown_grace`, when set) and closes, and this returns when every connection has ended
/// (WebSockets a connection was upgraded to are the server's to wait for). `TCP_NODELAY` is set
/// on each connection: a reply goes out when written.
pub async fn serve_connections<St, F, H, Fut, B>(listener: TcpListener, limits: &ConnectionLimits, stop: St, mut service_for: F)
where
    St: Stop,
    F: FnMut(&Accepted) -> H,
    H: Fn(hyper::Request<Lingering>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<hyper::Response<B>, Infallible>> + Send + 'static,
    B: hyper::body::Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let slots = ConnectionSlots::new(limits.max_connections, limits.max_connections_per_peer);
    let refusing = Arc::new(Semaphore::new(MAX_REFUSING));
    // Every connection's task holds a sender: when none is left, all have ended.
    let (open, mut all_closed) = tokio::sync::mpsc::channel::<()>(1);
    {
        let mut stopped = std::pin::pin!(stop.stopped());
        loop {
            let accepted = tokio::select! {
                () = &mut stopped => break,
                a = listener.accept() => a,
            };
            let Ok((stream, peer)) = accepted else {
                // Out of descriptors, say: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            };
            let _ = stream.set_nodelay(true);
            let Some(slot) = slots.try_take(peer.ip()) else {
                refuse_connection(stream, &refusing, limits.max_connections, limits.max_connections_per_peer);
                continue;
            };
            let standing = Arc::clone(&slot.standing);
            let local = stream.local_addr().map_or(IpAddr::from([0, 0, 0, 0]), |a| a.ip());
            // The connection's task holds the slot, whatever the handler keeps of it.
            let slot = Arc::new(slot);
            let handler = service_for(&Accepted { peer: peer.ip(), local, slot: Arc::clone(&slot) });
            let (linger, busy) = (limits.linger, Arc::clone(&standing));
            let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                // A body the handler drops unread is read and dropped for a while, so a client
                // still writing it reads the answer; not when the client waits for a
                // `100 Continue` before sending it.
                let read_rest = !request.headers().get(hyper::header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
                // From its head until its response's end, the request keeps its connection from
                // being evicted.
                let open = Open::begin(Arc::clone(&busy));
                let answer = handler(request.map(|body| Lingering { body: Some(body), linger: read_rest.then(|| (linger, Arc::clone(&busy))) }));
                async move {
                    let response = answer.await?;
                    Ok::<_, Infallible>(response.map(|body| Tracked { body, _open: open }))
                }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            // No `.max_headers(..)`: hyper's default limit is 100, and setting it explicitly
            // makes hyper fill a 100-slot header vector on every request. The read buffer bounds
            // a header block before it is parsed (hyper answers 431 past it); bodies stream
            // through it.
            // No hyper timer: the header read timeout is the connection task's (below), one
            // timer a connection instead of one set and cleared for every request.
            builder.max_buf_size(limits.max_header_bytes.max(8192).saturating_add(8192));
            if limits.flatten_writes {
                builder.writev(false);
            }
            let stream = StallGuard::new(Watched { inner: stream, standing: Arc::clone(&standing) }, limits.write_stall_timeout);
            let conn = builder.serve_connection(TokioIo::new(stream), service).with_upgrades();
            let (stop, grace, open, head_timeout) = (stop.clone(), limits.shutdown_grace, open.clone(), limits.header_read_timeout);
            tokio::spawn(async move {
                let (_open, _slot) = (open, slot);
                let mut conn = std::pin::pin!(conn);
                // The waits for the stop and for eviction are polled once, which registers this
                // task's waker (the same on every poll of a spawned task); every later wake-up
                // only reads their flags, instead of polling those waits again on every request.
                let mut stopped = std::pin::pin!(stop.stopped());
                let mut evicted = std::pin::pin!(standing.evicted.cancelled());
                let mut heads = HeadWatch::new(&standing, head_timeout);
                let mut registered = false;
                let end = std::future::poll_fn(|cx| {
                    if !registered {
                        registered = true;
                        if stopped.as_mut().poll(cx).is_ready() {
                            return Poll::Ready(End::Stopped);
                        }
                        if evicted.as_mut().poll(cx).is_ready() {
                            return Poll::Ready(End::Evicted);
                        }
                    } else if stop.is_stopped() {
                        return Poll::Ready(End::Stopped);
                    } else if standing.evicted() {
                        return Poll::Ready(End::Evicted);
                    }
                    heads.poll(conn.as_mut(), cx)
                })
                .await;
                // An evicted connection, or one whose client sent no head in time, is dropped
                // here, closing its socket.
                if end == End::Stopped {
                    // Answer the request in flight, if any, and close; a head still on its way
                    // is timed as before (hyper waits for one it has begun to read).
                    conn.as_mut().graceful_shutdown();
                    let finish = std::future::poll_fn(|cx| heads.poll(conn.as_mut(), cx));
                    match grace {
                        Some(grace) => {
                            let _ = tokio::time::timeout(grace, finish).await;
                        }
                        None => {
                            let _ = finish.await;
                        }
                    }
                }
            });
        }
    }
    drop((listener, open));
    let _ = all_closed.recv().await;
}

/// The size of a request's header block as parsed: the request line, each field as
/// `name: value\r\n`, and the blank line (for a client that writes them so, the bytes it sent).
/// hyper's read buffer bounds what is held, but accepts a block somewhat past it when its end
/// arrives in the same read; comparing this with [`ConnectionLimits::max_header_bytes`] makes
/// the limit exact.
pub fn header_block_len<B>(request: &hyper::Request<B>) -> usize {
    let uri = request.uri();
    let target = uri.scheme_str().map_or(0, |s| s.len() + 3) + uri.authority().map_or(0, |a| a.as_str().len()) + uri.path_and_query().map_or(0, |p| p.as_str().len());
    let line = request.method().as_str().len() + 1 + target + " HTTP/1.1\r\n".len();
    let fields: usize = request.headers().iter().map(|(n, v)| n.as_str().len() + 2 + v.len() + 2).sum();
    line + fields + 2
}

/// The name part of a `Host` header value (or of a bind address): without the port, an IPv6
/// address without its brackets, without a trailing dot.
pub fn host_name(host: &str) -> &str {
    let host = host.trim();
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => match host.rsplit_once(':') {
            Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        },
    };
    name.strip_suffix('.').unwrap_or(name)
}

/// Accepted, not yet found waiting for bytes: evicted only when no connection is known to wait
/// (its request may be on its way).
const FRESH: u8 = 0;
/// Not authenticated, and found waiting for bytes: a newcomer may take its place.
const WAITING: u8 = 1;
/// Has sent an authenticated request: keeps its place.
const TRUSTED: u8 = 2;
/// Its place was taken; it is being closed.
const EVICTED: u8 = 3;

/// A connection's standing in its listener's slots.
#[derive(Debug)]
pub struct Standing {
    state: AtomicU8,
    /// Requests whose response has not ended: while there is one, the connection is never
    /// evicted.
    open: AtomicUsize,
    evicted: CancellationToken,
    /// Lingering reads of bodies refused unread: the next head is not due while one goes on,
    /// but unlike an open request it does not keep the connection from being evicted.
    draining: AtomicUsize,
    /// When the connection was accepted: what [`Standing::idle_since`] counts from.
    born: tokio::time::Instant,
    /// When its last open request or lingering read ended (nanoseconds after `born`; 0 before
    /// any): since then it has been waiting for the head of its next request.
    idle_since: AtomicU64,
}

impl Standing {
    fn new() -> Self {
        Standing { state: AtomicU8::new(FRESH), open: AtomicUsize::new(0), evicted: CancellationToken::new(), draining: AtomicUsize::new(0), born: tokio::time::Instant::now(), idle_since: AtomicU64::new(0) }
    }

    /// When the head of the connection's next request is due: `timeout` after the end of its
    /// last request or lingering read (or after it was accepted); `None` while either goes on.
    fn head_due(&self, timeout: Duration) -> Option<tokio::time::Instant> {
        if self.open.load(Ordering::Acquire) > 0 || self.draining.load(Ordering::Acquire) > 0 {
            return None;
        }
        Some(self.born + Duration::from_nanos(self.idle_since.load(Ordering::Acquire)) + timeout)
    }

    /// Whether the connection has authenticated.
    pub fn trusted(&self) -> bool {
        self.state.load(Ordering::Relaxed) == TRUSTED
    }

    /// The connection has authenticated: it keeps its place from now on (unless it was
    /// already evicted).
    pub fn trust(&self) {
        let _ = self.state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| (s != EVICTED).then_some(TRUSTED));
    }

    /// Whether a newcomer took the connection's place.
    pub fn evicted(&self) -> bool {
        self.state.load(Ordering::Acquire) == EVICTED
    }

    /// Resolves once a newcomer takes the connection's place: what serves a connection that
    /// outlives its HTTP request (a WebSocket) closes it then.
    pub fn until_evicted(&self) -> impl Future<Output = ()> + Send + '_ {
        self.evicted.cancelled()
    }

    /// The connection found no bytes to read: if it has not authenticated and no request of it
    /// is open, it may be evicted.
    fn waiting(&self) {
        if self.open.load(Ordering::Acquire) == 0 {
            let _ = self.state.compare_exchange(FRESH, WAITING, Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    /// Evicts the connection when it is in `state` (not authenticated) and no request of it is
    /// open.
    fn evict(&self, state: u8) -> bool {
        if self.open.load(Ordering::Acquire) > 0 {
            return false;
        }
        let evicted = self.state.compare_exchange(state, EVICTED, Ordering::AcqRel, Ordering::Relaxed).is_ok();
        if evicted {
            self.evicted.cancel();
        }
        evicted
    }
}

/// While it lives, the connection's next head is not due: one of its open requests (`OPEN`), or
/// one of its lingering reads.
struct During<const OPEN: bool>(Arc<Standing>);

/// A request of a connection from its head until its response's end (or until hyper drops it):
/// the connection is not evicted meanwhile.
type Open = During<true>;

/// A lingering read of a body refused unread (see [`Lingering`]): unlike an open request, it does
/// not keep the connection from being evicted.
type Draining = During<false>;

impl<const OPEN: bool> During<OPEN> {
    fn count(standing: &Standing) -> &AtomicUsize {
        if OPEN { &standing.open } else { &standing.draining }
    }

    fn begin(standing: Arc<Standing>) -> Self {
        Self::count(&standing).fetch_add(1, Ordering::AcqRel);
        During(standing)
    }
}

impl<const OPEN: bool> Drop for During<OPEN> {
    /// When this is the last of its count, the wait for the next head starts now
    /// ([`Standing::idle_since`]), written before the count reaches 0, so whoever reads 0 reads
    /// this too.
    fn drop(&mut self) {
        let (standing, count) = (&*self.0, Self::count(&self.0));
        let mut n = count.load(Ordering::Acquire);
        loop {
            if n == 1 {
                let since = u64::try_from(standing.born.elapsed().as_nanos()).unwrap_or(u64::MAX);
                // The latest end wins, whichever thread writes last.
                standing.idle_since.fetch_max(since, Ordering::AcqRel);
            }
            match count.compare_exchange_weak(n, n - 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(now) => n = now,
            }
        }
    }
}

/// A response's body holding its request [`Open`] until it ends.
struct Tracked<B> {
    body: B,
    _open: Open,
}

impl<B: hyper::body::Body + Unpin> hyper::body::Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The most connections refused at once with a written answer ([`refuse_connection`]); past it a
/// refused connection is closed without one.
const MAX_REFUSING: usize = 64;

/// A connection past the listener's caps: answered `503 Service Unavailable` with
/// `Retry-After: 1` and a JSON-RPC busy error (so a client sees why, rather than a connection
/// closed on arrival), then closed once the client has had a moment to read it (its request read
/// and dropped meanwhile: at most 64 KiB and one second, so a close with unread bytes does not
/// reset the answer away). At most [`MAX_REFUSING`] at once; past that it is closed at once.
fn refuse_connection(stream: tokio::net::TcpStream, refusing: &Arc<Semaphore>, cap: usize, per_peer: usize) {
    let Ok(permit) = Arc::clone(refusing).try_acquire_owned() else { return };
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let _permit = permit;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":{},"message":"Busy: the server holds its most connections (at most {cap} in all, {per_peer} from one address); retry later"}}}}"#,
            crate::codes::BUSY
        );
        let head = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n",
            body.len()
        );
        let mut stream = stream;
        let deadline = Duration::from_secs(1);
        let write = async {
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(body.as_bytes()).await?;
            stream.shutdown().await
        };
        if !matches!(tokio::time::timeout(deadline, write).await, Ok(Ok(()))) {
            return;
        }
        let mut buf = [0u8; 4096];
        let mut left = 64 * 1024usize;
        let _ = tokio::time::timeout(deadline, async {
            while left > 0 {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => left = left.saturating_sub(n),
                }
            }
        })
        .await;
    });
}

/// A listener's connections: at most `cap` in all and `per_peer` from one peer address; past
/// either, a newcomer takes the place of the oldest connection that has not authenticated and
/// waits for bytes, else of the oldest not read yet (of its peer, when the peer's cap is
/// reached).
#[derive(Clone, Debug)]
pub struct ConnectionSlots {
    held: Arc<Mutex<Held>>,
    cap: usize,
    per_peer: usize,
}

/// The open connections, by the order of their arrival, and how many each peer holds.
#[derive(Default, Debug)]
struct Held {
    next: u64,
    /// Every open connection by the order of its arrival: its peer and standing.
    open: BTreeMap<u64, (IpAddr, Arc<Standing>)>,
    per_peer: HashMap<IpAddr, usize>,
}

impl Held {
    fn remove(&mut self, id: u64) {
        if let Some((peer, _)) = self.open.remove(&id)
            && let Some(n) = self.per_peer.get_mut(&peer)
        {
            *n -= 1;
            if *n == 0 {
                self.per_peer.remove(&peer);
            }
        }
    }
}

/// One connection's place; given back on drop.
#[derive(Debug)]
pub struct Slot {
    held: Arc<Mutex<Held>>,
    id: u64,
    /// The connection's standing.
    pub standing: Arc<Standing>,
}

impl Slot {
    /// The connection has authenticated: it keeps its place (see [`Standing::trust`]).
    pub fn trust(&self) {
        self.standing.trust();
    }
}

impl ConnectionSlots {
    /// At most `cap` connections, and `per_peer` per peer address.
    pub fn new(cap: usize, per_peer: usize) -> Self {
        ConnectionSlots { held: Arc::new(Mutex::new(Held::default())), cap, per_peer }
    }

    /// A place for one more connection from `peer`: a free one, or one taken from the oldest
    /// connection that has not authenticated and waits for bytes (evicted); `None` when there is
    /// neither.
    pub fn try_take(&self, peer: IpAddr) -> Option<Slot> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let peer_full = held.per_peer.get(&peer).is_some_and(|n| *n >= self.per_peer);
        if peer_full || held.open.len() >= self.cap {
            // The oldest found waiting for bytes, else the oldest not read yet (its bytes may be
            // on their way, so only when no connection is known to wait).
            let mut victim = None;
            for state in [WAITING, FRESH] {
                victim = held.open.iter().find(|(_, (p, standing))| (!peer_full || *p == peer) && standing.evict(state)).map(|(id, _)| *id);
                if victim.is_some() {
                    break;
                }
            }
            let victim = victim?;
            held.remove(victim);
        }
        let id = held.next;
        held.next += 1;
        let standing = Arc::new(Standing::new());
        held.open.insert(id, (peer, Arc::clone(&standing)));
        *held.per_peer.entry(peer).or_insert(0) += 1;
        Some(Slot { held: Arc::clone(&self.held), id, standing })
    }

    /// How many connections `peer` holds.
    pub fn held(&self, peer: IpAddr) -> usize {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).per_peer.get(&peer).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).remove(self.id);
    }
}

/// The token of a request's `Authorization` header: the scheme `Bearer` in any letter case, a
/// space, a token that is not blank (spaces around it trimmed). What [`crate::RpcServer`]'s
/// authenticator is handed, for a program that checks credentials on routes of its own.
pub fn bearer_token(headers: &hyper::HeaderMap) -> Option<&str> {
    let (scheme, token) = headers.get(hyper::header::AUTHORIZATION)?.to_str().ok()?.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// A connection's stream that reports, through its [`Standing`], when a read finds no bytes
/// waiting: from then on, until it authenticates, a newcomer may take its place.
struct Watched<S> {
    inner: S,
    standing: Arc<Standing>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        if read.is_pending() {
            self.standing.waiting();
        }
        read
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// A request's body that, dropped before its end (the handler refused the request without
/// reading it, or stopped reading it), has the rest read and dropped on a task of its own for at
/// most [`Linger::timeout`] and [`Linger::max_bytes`], and while bytes keep coming
/// ([`Linger::idle`]), as nginx's lingering close does: a client that writes its whole body
/// before it reads then reads the answer instead of a reset.
#[derive(Debug)]
pub struct Lingering {
    body: Option<Incoming>,
    /// How to read the rest (`None`: not at all, the client waits for `100 Continue`), and the
    /// connection's standing: its next head is not due while the rest is read.
    linger: Option<(Linger, Arc<Standing>)>,
}

impl hyper::body::Body for Lingering {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.body.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(hyper::body::Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body.as_ref().map_or_else(|| SizeHint::with_exact(0), hyper::body::Body::size_hint)
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        let Some(mut body) = self.body.take() else { return };
        let Some((linger, standing)) = self.linger.take() else { return };
        if hyper::body::Body::is_end_stream(&body) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let draining = Draining::begin(standing);
        runtime.spawn(async move {
            let _draining = draining;
            let drain = async {
                let mut read = 0;
                while let Ok(Some(Ok(frame))) = tokio::time::timeout(linger.idle, body.frame()).await {
                    read += frame.data_ref().map_or(0, Bytes::len);
                    if read > linger.max_bytes {
                        break;
                    }
                }
            };
            // Dropping the body then lets the connection close.
            let _ = tokio::time::timeout(linger.timeout, drain).await;
        });
    }
}

/// A stream whose writes fail with `TimedOut` once one has waited longer than `limit` for the
/// peer to read: a client that sends requests (or holds an event stream) and never reads gets
/// its connection closed instead of holding its replies and its slot forever.
#[derive(Debug)]
pub struct StallGuard<S> {
    inner: S,
    limit: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> StallGuard<S> {
    /// Guards `inner`'s writes with `limit`.
    pub fn new(inner: S, limit: Duration) -> Self {
        StallGuard { inner, limit, stalled: None }
    }

    fn pending<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let limit = self.limit;
        let timer = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the peer read nothing for the write stall timeout"))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for StallGuard<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for StallGuard<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Pending => self.pending(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Pending => self.pending(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Pending => self.pending(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The budget of request bodies a listener holds at once, one permit per byte, shared by all
/// its connections: a body takes its room before (a declared length) or while (chunked) it is
/// read, and gives it back when its [`Room`] is dropped. Cheap to clone.
#[derive(Clone)]
pub struct BodyBudget {
    permits: Arc<Semaphore>,
    total: usize,
    wait: Duration,
    gauge: Option<Arc<dyn Fn(i64) + Send + Sync>>,
}

impl std::fmt::Debug for BodyBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyBudget").field("available", &self.permits.available_permits()).field("wait", &self.wait).finish()
    }
}

impl BodyBudget {
    /// A budget of `bytes`, where a body waits at most `wait` for room.
    pub fn new(bytes: usize, wait: Duration) -> Self {
        let total = bytes.min(Semaphore::MAX_PERMITS).min(u32::MAX as usize);
        BodyBudget { permits: Arc::new(Semaphore::new(total)), total, wait, gauge: None }
    }

    /// The same budget, telling `gauge` every change of the bytes held (`+n` taken, `-n` given
    /// back), for a metric.
    #[must_use]
    pub fn with_gauge(mut self, gauge: impl Fn(i64) + Send + Sync + 'static) -> Self {
        self.gauge = Some(Arc::new(gauge));
        self
    }

    /// How many bytes of room are free.
    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }

    /// No room yet.
    pub fn room(&self) -> Room {
        Room { budget: self.clone(), bytes: 0 }
    }
}

/// A body's room in a [`BodyBudget`], given back on drop.
#[derive(Debug)]
pub struct Room {
    budget: BodyBudget,
    bytes: usize,
}

impl Room {
    /// Takes `n` more bytes of room, waiting at most the budget's wait; false when there was
    /// none in time.
    pub async fn take(&mut self, n: usize) -> bool {
        let Ok(permits) = u32::try_from(n) else { return false };
        let permit = match self.budget.permits.try_acquire_many(permits) {
            Ok(p) => p,
            Err(_) => match tokio::time::timeout(self.budget.wait, self.budget.permits.acquire_many(permits)).await {
                Ok(Ok(p)) => p,
                _ => return false,
            },
        };
        permit.forget();
        self.bytes += n;
        if let Some(g) = &self.budget.gauge {
            g(n as i64);
        }
        true
    }

    /// The bytes of room held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Room {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.budget.permits.add_permits(self.bytes);
            if let Some(g) = &self.budget.gauge {
                g(-(self.bytes as i64));
            }
        }
    }
}

/// Why [`read_body`] has no body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyError {
    /// Longer than the bound (declared so, or found so while read): 413.
    TooLarge,
    /// No room in the budget within its wait: 503.
    NoRoom,
    /// Not all arrived within the read timeout: 408.
    TimedOut,
    /// The client broke the body off or sent a bad chunk: nobody reads an answer.
    Broken,
}

/// A request's whole body, at most `max` bytes, with its room in `budget` (held until the
/// [`Room`] is dropped: keep it while the message is handled). A `declared` length
/// (`Content-Length`) over `max` is refused before anything is read, else its room is taken
/// before the body is read; without one, room is taken for each chunk as it arrives. A body
/// that came with its head is taken at once; one still on its way is waited for at most
/// `timeout`. A body in one chunk is kept as it came, without a copy; one in several is copied
/// once.
///
/// # Errors
///
/// [`BodyError`]: too large, no room, too slow, or broken off.
pub async fn read_body<B>(body: B, declared: Option<u64>, max: usize, budget: &BodyBudget, timeout: Duration) -> Result<(Bytes, Room), BodyError>
where
    B: hyper::body::Body<Data = Bytes>,
{
    // Longer than the bound, or than the whole budget (it would never find room).
    let max = max.min(budget.total);
    if declared.is_some_and(|n| n > max as u64) {
        return Err(BodyError::TooLarge);
    }
    let mut room = budget.room();
    if let Some(n) = declared
        && !room.take(n as usize).await
    {
        return Err(BodyError::NoRoom);
    }
    let collected = {
        let mut collect = std::pin::pin!(collect(body, &mut room, declared.map(|n| n as usize), max));
        match collect.as_mut().now_or_never() {
            Some(collected) => collected,
            None => match tokio::time::timeout(timeout, collect).await {
                Err(_) => Err(BodyError::TimedOut),
                Ok(collected) => collected,
            },
        }
    };
    collected.map(|bytes| (bytes, room))
}

async fn collect<B>(body: B, room: &mut Room, declared: Option<usize>, max: usize) -> Result<Bytes, BodyError>
where
    B: hyper::body::Body<Data = Bytes>,
{
    let mut body = std::pin::pin!(body);
    let mut first: Option<Bytes> = None;
    let mut rest = bytes::BytesMut::new();
    let mut len = 0;
    while let Some(frame) = body.as_mut().frame().await {
        let Ok(data) = frame.map_err(|_| BodyError::Broken)?.into_data() else { continue };
        len += data.len();
        if len > max {
            return Err(BodyError::TooLarge);
        }
        if declared.is_none() && !room.take(data.len()).await {
            return Err(BodyError::NoRoom);
        }
        match first.take() {
            None if rest.is_empty() => first = Some(data),
            None => rest.extend_from_slice(&data),
            Some(head) => {
                rest.reserve(declared.unwrap_or(0).max(head.len() + data.len()));
                rest.extend_from_slice(&head);
                rest.extend_from_slice(&data);
            }
        }
        // Whole (a body of known length all received): no need to wait for its end.
        if body.is_end_stream() {
            break;
        }
    }
    Ok(first.unwrap_or_else(|| rest.freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_holds_at_most_its_cap_and_gets_slots_back() {
        let slots = ConnectionSlots::new(10, 2);
        let a: IpAddr = "127.0.0.1".parse().expect("an address");
        let b: IpAddr = "127.0.0.2".parse().expect("an address");
        let first = slots.try_take(a).expect("first");
        let second = slots.try_take(a).expect("second");
        first.trust();
        second.trust();
        assert!(slots.try_take(a).is_none(), "a third connection from the same peer is refused while the others have authenticated");
        assert!(slots.try_take(b).is_some(), "another peer is not affected");
        drop(first);
        assert_eq!(slots.held(a), 1);
        assert!(slots.try_take(a).is_some(), "a slot given back can be taken again");
    }

    #[test]
    fn a_newcomer_takes_the_place_of_the_oldest_waiting_connection_that_has_not_authenticated() {
        let slots = ConnectionSlots::new(3, 2);
        let a: IpAddr = "127.0.0.1".parse().expect("an address");
        let b: IpAddr = "127.0.0.2".parse().expect("an address");
        let (oldest, younger) = (slots.try_take(a).expect("first"), slots.try_take(a).expect("second"));
        // A connection found waiting goes before an older one not read yet.
        younger.standing.waiting();
        let third = slots.try_take(a).expect("the waiting one's place");
        assert!(younger.standing.evicted() && !oldest.standing.evicted());
        // With none waiting, the oldest not read yet; never one that has authenticated.
        third.trust();
        third.standing.waiting();
        let newcomer = slots.try_take(a).expect("the oldest unread one's place");
        assert!(oldest.standing.evicted() && !third.standing.evicted());
        assert_eq!(slots.held(a), 2);
        // The evicted slot's drop gives nothing back twice.
        drop(oldest);
        assert_eq!(slots.held(a), 2);
        // The global cap: another peer takes the place of a waiting connection of any peer.
        newcomer.standing.waiting();
        let c = slots.try_take(b).expect("room");
        let d = slots.try_take(b).expect("the newcomer's place");
        assert!(newcomer.standing.evicted());
        // One evicted cannot authenticate; once authenticated, a connection is never evicted.
        newcomer.trust();
        assert!(!newcomer.standing.trusted());
        c.trust();
        d.trust();
        assert!(slots.try_take(b).is_none() && slots.try_take(a).is_none(), "every place is held by an authenticated connection");
    }

    #[test]
    fn host_names_lose_their_port_brackets_and_trailing_dot() {
        assert_eq!(host_name("example.com:8080"), "example.com");
        assert_eq!(host_name("example.com."), "example.com");
        assert_eq!(host_name("[::1]:80"), "::1");
        assert_eq!(host_name("::1"), "::1");
        assert_eq!(host_name(" localhost "), "localhost");
    }

    #[tokio::test]
    async fn a_body_takes_room_and_gives_it_back() {
        let budget = BodyBudget::new(10, Duration::from_millis(50));
        let (body, room) = read_body(http_body_util::Full::new(Bytes::from_static(b"12345678")), Some(8), 100, &budget, Duration::from_secs(1)).await.expect("room for 8");
        assert_eq!((&body[..], budget.available()), (&b"12345678"[..], 2));
        assert_eq!(read_body(http_body_util::Full::new(Bytes::from_static(b"123")), Some(3), 100, &budget, Duration::from_secs(1)).await.err(), Some(BodyError::NoRoom), "3 bytes find 2 free and wait in vain");
        assert_eq!(read_body(http_body_util::Full::new(Bytes::from_static(b"123")), None, 100, &budget, Duration::from_secs(1)).await.err(), Some(BodyError::NoRoom), "a chunk without a declared length takes room too");
        drop(room);
        assert_eq!(budget.available(), 10, "the room comes back when the body's room is dropped");
        assert_eq!(read_body(http_body_util::Full::new(Bytes::from_static(b"123")), Some(200), 100, &budget, Duration::from_secs(1)).await.err(), Some(BodyError::TooLarge));
        assert_eq!(read_body(http_body_util::Full::new(Bytes::from_static(b"123")), None, 2, &budget, Duration::from_secs(1)).await.err(), Some(BodyError::TooLarge));
        assert_eq!(budget.available(), 10);
    }
}
