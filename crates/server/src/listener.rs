//! What every network connection shares, whatever it speaks: binding and the accept loop, the
//! connection slots (a global cap and a per-peer cap, where a connection that has not
//! authenticated gives its place to a newcomer), the header-block cap, the digest headers on
//! every response, CORS and the browser `Origin` check, the `Host` names the runtime answers to,
//! bearer authentication and the typed refusals, the lingering read of a body refused before it
//! was read, the budget of buffered request bodies, and a guard that closes a connection whose
//! client stops reading. The HTTP and WebSocket routes (`http`, `ws`) sit on top of this and
//! never import each other; `server` composes them.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use http_body_util::BodyExt;
use hyper::body::{Bytes, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use openagents_protocol::{ErrorCode, SERVER_MAX_HEADER_BYTES, SERVER_MAX_LINE_BYTES};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::Sleep;

use crate::agent::error;
use crate::auth::{Caller, RuntimeHttpCredential, authenticate_index};
use crate::engine::RpcEngine;
use crate::jsonrpc::Reply;

/// The most connections served at once. One more takes the place of the oldest connection that
/// has not authenticated and is waiting for bytes (see [`MAX_CONNECTIONS_PER_PEER`]); when there
/// is none, it is closed on arrival.
pub const MAX_CONNECTIONS: usize = 256;
/// The most connections one peer address may hold at once, so one client cannot take every
/// slot. On loopback every local process is the same peer, so a connection that has not yet
/// sent an authenticated request cannot keep its place against a newcomer: past the cap, the
/// newcomer takes the place of that peer's oldest connection that has not authenticated and
/// was found waiting for bytes (one not read yet only when there is none such, so a client that
/// sends its request at once keeps its place). Only when every connection of the peer has
/// authenticated is a newcomer closed on arrival.
pub const MAX_CONNECTIONS_PER_PEER: usize = 64;
/// The most bytes of request bodies every connection of a listener together holds in memory
/// (four bodies of `SERVER_MAX_LINE_BYTES`): without it, each of [`MAX_CONNECTIONS`] connections
/// could hold a 16 MiB body at once (4 GiB). A body of declared length takes its room before it
/// is read; one without a declared length takes room as it arrives.
pub const MAX_BUFFERED_BODY_BYTES: usize = 4 * SERVER_MAX_LINE_BYTES;
/// How long a body waits for room in [`MAX_BUFFERED_BODY_BYTES`] (others being handled free
/// theirs within milliseconds) before it is refused with 503 `busy`.
pub const BODY_ROOM_WAIT: Duration = Duration::from_secs(5);
/// How long the rest of a body refused before it was read (413, 401, 403, 415…) is read and
/// dropped, so a client that writes its whole body before reading (no `Expect: 100-continue`)
/// reads the refusal instead of a connection reset; after it, the connection is closed.
pub const LINGER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the lingering read of a refused body (see [`LINGER_TIMEOUT`]) waits for the client's
/// next bytes: a client that declared a body and sends none (or waits for the answer) is not
/// held open for the whole of it.
pub const LINGER_IDLE: Duration = Duration::from_secs(2);
/// The most bytes of a refused body read and dropped (see [`LINGER_TIMEOUT`]): four times
/// `SERVER_MAX_LINE_BYTES`, so a body somewhat over the limit is drained, not an endless one.
pub const LINGER_MAX_BYTES: usize = 4 * SERVER_MAX_LINE_BYTES;
/// How long a response (or an event stream) may wait for a client that reads nothing before its
/// connection is closed.
pub const WRITE_STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a browser may cache a CORS preflight answer.
pub const CORS_MAX_AGE: Duration = Duration::from_secs(600);
/// How long a client has to send a request's headers (slow senders are cut off).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The most header fields a request may carry.
pub const MAX_HEADERS: usize = 100;
/// The response header that carries `PROTOCOL_VERSION` on every HTTP response and on the
/// WebSocket handshake, so a client can compare versions before it reads a body.
pub const PROTOCOL_VERSION_HEADER: &str = "openagents-protocol-version";
/// The response header that carries `SCHEMA_DIGEST` (the digest of the exact schema this runtime
/// was built from) on every HTTP response and on the WebSocket handshake.
pub const SCHEMA_DIGEST_HEADER: &str = "openagents-schema-digest";

/// [`PROTOCOL_VERSION_HEADER`] and [`SCHEMA_DIGEST_HEADER`] with their values, checked once at
/// compile time: a header name given as a `&str` is parsed again on every insert (about 700
/// instructions each, on every response).
const STAMP: [(HeaderName, HeaderValue); 2] = [
    (HeaderName::from_static(PROTOCOL_VERSION_HEADER), HeaderValue::from_static(openagents_protocol::PROTOCOL_VERSION)),
    (HeaderName::from_static(SCHEMA_DIGEST_HEADER), HeaderValue::from_static(openagents_protocol::SCHEMA_DIGEST)),
];

/// Adds the protocol version and schema digest headers to a response.
pub(crate) fn stamp_schema(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in STAMP {
        headers.insert(name, value);
    }
    response
}

/// How a network listener behaves beyond its credentials; the operator's configuration.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Browser origins (`scheme://host[:port]`) allowed to call `POST /rpc` and `GET /events`
    /// across origins (CORS) and to open the WebSocket; a request carrying any other `Origin` is
    /// refused with 403 on every path. A request without an `Origin` header is not a browser's
    /// and is not checked; a page of the runtime's own origin (under a host it answers to, see
    /// `allowed_hosts`) is always allowed.
    pub allowed_origins: Vec<String>,
    /// Whether `GET /` serves the web page.
    pub web: bool,
    /// Host names (a `Host` header's name, without the port) the runtime answers to besides its
    /// own: the address it is bound to, any IP address, and, on a loopback connection,
    /// `localhost`. The web page and the WebSocket refuse any other name with 421 (a DNS
    /// rebinding page sends its own name), and only a page from a host the runtime answers to
    /// counts as its own origin. A runtime behind a proxy lists the names it is reached by.
    pub allowed_hosts: Vec<String>,
}

impl HttpOptions {
    /// Whether a browser request from `origin` may use the runtime whose `Host` is `host`: an
    /// allowed origin, or the runtime's own (`origin` is `host`'s), when `host` is one the
    /// runtime answers to ([`HttpOptions::host_accepted`]) for a connection to `local` on a
    /// listener bound to the name `bound`.
    pub fn origin_allowed(&self, origin: &str, host: Option<&str>, bound: Option<&str>, local: IpAddr) -> bool {
        let same = host.is_some_and(|h| origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")).is_some_and(|rest| rest.eq_ignore_ascii_case(h)) && self.host_accepted(h, bound, local));
        same || self.allowed_origins.iter().any(|o| o.eq_ignore_ascii_case(origin))
    }

    /// Whether the `Host` header value `host` names this runtime, reached at `local` and bound
    /// to the name `bound` (when it was bound by name): any IP address (DNS cannot rebind an
    /// address: a browser sends one only to the address it connected to), `localhost` on a
    /// loopback connection, the bound name, or one of `allowed_hosts`. The port is not compared.
    pub fn host_accepted(&self, host: &str, bound: Option<&str>, local: IpAddr) -> bool {
        let name = host_name(host);
        name.parse::<IpAddr>().is_ok()
            || (local.is_loopback() && name.eq_ignore_ascii_case("localhost"))
            || bound.is_some_and(|b| host_name(b).eq_ignore_ascii_case(name))
            || self.allowed_hosts.iter().any(|h| host_name(h).eq_ignore_ascii_case(name))
    }

    fn cors_origin(&self, origin: Option<&HeaderValue>) -> Option<HeaderValue> {
        let o = origin?.to_str().ok()?;
        self.allowed_origins.iter().any(|a| a.eq_ignore_ascii_case(o)).then(|| HeaderValue::from_str(o).ok()).flatten()
    }
}

/// The name part of a `Host` header value (or of an `allowed_hosts` entry, or a bind address):
/// without the port, an IPv6 address without its brackets, without a trailing dot.
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

/// Who may use a listener, and how: the engine, the credentials (and the caller each one
/// authenticates as, built once), the operator's options, the name it was bound by, and the
/// budget of buffered request bodies. The state of every route.
#[derive(Clone)]
pub(crate) struct Access {
    engine: RpcEngine,
    options: Arc<HttpOptions>,
    credentials: Arc<Vec<RuntimeHttpCredential>>,
    callers: Arc<Vec<Caller>>,
    /// The context of each credential's calls on `POST /rpc`, built once.
    contexts: Arc<Vec<openagents_rpc::Context>>,
    /// The core serving the engine's methods.
    server: Arc<openagents_rpc::RpcServer>,
    bound: Option<Arc<str>>,
    bodies: Arc<Semaphore>,
}

impl Access {
    /// Access to `engine` for `credentials`, on a listener bound to `bind` (`host:port`).
    pub(crate) fn new(engine: RpcEngine, credentials: Vec<RuntimeHttpCredential>, options: HttpOptions, bind: &str) -> Self {
        let callers: Vec<Caller> = credentials.iter().map(|c| Caller { name: c.name.clone(), grant: c.grant.clone(), trusted: false }).collect();
        let contexts = callers.iter().map(|c| crate::jsonrpc::context(Arc::new(c.clone()), None)).collect();
        let bound = Some(host_name(bind)).filter(|n| n.parse::<IpAddr>().is_err() && !n.is_empty()).map(Arc::from);
        let bodies = Arc::new(Semaphore::new(MAX_BUFFERED_BODY_BYTES));
        let server = Arc::new(crate::jsonrpc::server(&engine));
        Access { engine, options: Arc::new(options), credentials: Arc::new(credentials), callers: Arc::new(callers), contexts: Arc::new(contexts), server, bound, bodies }
    }

    /// The core serving the engine's methods.
    pub(crate) fn server(&self) -> &Arc<openagents_rpc::RpcServer> {
        &self.server
    }

    /// The context of `POST /rpc` calls for the request's `Authorization` header, or the 401
    /// to answer.
    pub(crate) fn authorize_call(&self, headers: &HeaderMap) -> Result<&openagents_rpc::Context, Response> {
        self.authorized(headers).map(|i| &self.contexts[i])
    }

    /// The budget of buffered request bodies, one permit per byte ([`MAX_BUFFERED_BODY_BYTES`]).
    pub(crate) fn body_budget(&self) -> &Semaphore {
        &self.bodies
    }

    /// Whether a browser request from `origin` may use this runtime (see
    /// [`HttpOptions::origin_allowed`]).
    fn origin_allowed(&self, origin: &HeaderValue, host: Option<&HeaderValue>, local: IpAddr) -> bool {
        let host = host.and_then(|h| h.to_str().ok());
        origin.to_str().is_ok_and(|o| self.options.origin_allowed(o, host, self.bound.as_deref(), local))
    }

    /// `Ok` when the request's `Host` names this runtime ([`HttpOptions::host_accepted`]; no
    /// `Host` is not a browser's request), else the 421 to answer. For what a browser loads
    /// without a token: the web page and the WebSocket upgrade.
    pub(crate) fn check_host(&self, request: &Request) -> Result<(), Response> {
        let Some(host) = request.headers().get(header::HOST) else { return Ok(()) };
        let local = request.extensions().get::<Peer>().map_or(IpAddr::from([0, 0, 0, 0]), |p| p.local);
        if host.to_str().is_ok_and(|h| self.options.host_accepted(h, self.bound.as_deref(), local)) {
            return Ok(());
        }
        let name = crate::jsonrpc::bounded(host_name(&String::from_utf8_lossy(host.as_bytes())), 256).into_owned();
        let message = format!("this runtime does not answer to the host `{name}`: only to the address it is bound to, `localhost` on loopback, and the names in `[capabilities.server] allowed_hosts`");
        Err(reject(ErrorCode::Forbidden, StatusCode::MISDIRECTED_REQUEST, message))
    }

    /// Whether `headers` carry a bearer token of one of the credentials.
    fn authenticates(&self, headers: &HeaderMap) -> bool {
        headers.get(header::AUTHORIZATION).and_then(bearer).is_some_and(|t| authenticate_index(&self.credentials, t).is_some())
    }

    /// The engine.
    pub(crate) fn engine(&self) -> &RpcEngine {
        &self.engine
    }

    /// The caller for the request's `Authorization` header, or the 401 to answer.
    pub(crate) fn authorize(&self, headers: &HeaderMap) -> Result<&Caller, Response> {
        self.authorized(headers).map(|i| &self.callers[i])
    }

    /// The index of the credential of the request's `Authorization` header, or the 401 to answer.
    fn authorized(&self, headers: &HeaderMap) -> Result<usize, Response> {
        let unauthorized = |m: &str| reject(ErrorCode::Unauthorized, StatusCode::UNAUTHORIZED, m.to_owned());
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return Err(unauthorized("send `Authorization: Bearer <token>`"));
        };
        match bearer(value).and_then(|t| authenticate_index(&self.credentials, t)) {
            Some(i) => Ok(i),
            // The message never repeats the token.
            None => Err(unauthorized("the bearer token is not valid")),
        }
    }

    /// The caller for a bare token (a browser's bearer subprotocol).
    pub(crate) fn credential(&self, token: &str) -> Option<&Caller> {
        authenticate_index(&self.credentials, token).map(|i| &self.callers[i])
    }

    /// Counts and audits a refused authentication; the record names the peer and the path,
    /// never the token.
    pub(crate) fn audit_unauthorized(&self, peer: Option<&Peer>, path: &str, presented: bool) {
        self.engine.metrics().auth_failed();
        let peer = peer.map_or_else(|| "-".to_owned(), |p| p.ip.to_string());
        tracing::warn!(target: "openagents::audit", event = "auth_failed", %peer, path = %crate::jsonrpc::bounded(path, 256), token_presented = presented);
    }
}

/// The token of an `Authorization` header: the scheme `Bearer` in any letter case, one or
/// more spaces, the token.
pub(crate) fn bearer(value: &HeaderValue) -> Option<&str> {
    let v = value.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// A JSON response with `status`.
pub(crate) fn json_response(status: u16, body: Vec<u8>) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// A transport refusal: `status` with a JSON-RPC error object of `code` as its body.
pub(crate) fn reject(code: ErrorCode, status: StatusCode, message: String) -> Response {
    let reply = Reply::error(error(code, message));
    let mut r = json_response(status.as_u16(), reply.to_json());
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    r
}

/// One of a listener's [`MAX_CONNECTIONS`] slots (and of its peer's), carried in each request's
/// extensions so a connection upgraded to a WebSocket keeps holding it.
#[derive(Clone)]
pub(crate) struct ConnectionSlot {
    slot: Arc<Slot>,
    _gauge: Arc<crate::metrics::ConnectionGauge>,
}

impl ConnectionSlot {
    /// Marks the connection as authenticated (a WebSocket authenticated by its bearer
    /// subprotocol): it keeps its place from now on.
    pub(crate) fn trust(&self) {
        self.slot.standing.trust();
    }
}

/// Where a request came from (for the audit log) and the local address it reached (for the
/// `Host` check).
#[derive(Clone, Copy)]
pub(crate) struct Peer {
    /// The peer's address.
    pub ip: IpAddr,
    /// The listener's address the connection reached (its own, on a listener bound to every
    /// address).
    pub local: IpAddr,
}

/// A handler that answers a request without the router's per-request routing work
/// (`POST /rpc`, the hot path).
/// It gets the peer's address beside the request, not in the request's extensions (an insert
/// there allocates their map on every request), and it is a type, not a boxed closure, so its
/// future is part of the connection's, not an allocation per request.
pub(crate) trait Direct: Clone + Send + Sync + 'static {
    /// The response to `request`, from `peer`.
    fn call(self, access: Access, request: Request, peer: Peer) -> impl Future<Output = Response> + Send;
}

/// Binds `bind` (`host:port`; port 0 picks a free one). The loopback-by-default policy is the
/// caller's: this binds whatever it is given.
pub(crate) async fn bind(bind: &str) -> io::Result<TcpListener> {
    TcpListener::bind(bind).await
}

/// Serves `router` on `listener` until the engine shuts down: every connection takes a slot
/// (none left, or its peer's all taken: it takes the place of the oldest connection that has not
/// authenticated and waits for bytes, or is closed on arrival when there is none), every response
/// carries the digest headers (and CORS headers for an allowed origin), a header block over
/// `SERVER_MAX_HEADER_BYTES` is 431, a CORS preflight is answered before any route without a
/// token, a browser `Origin` that is not allowed is 403, a body refused before it was read is
/// read and dropped for a bounded time, and `direct` answers `POST /rpc` when given.
pub(crate) async fn accept_loop<D: Direct>(listener: TcpListener, router: Router, access: Access, direct: Option<D>) {
    let engine = access.engine.clone();
    let slots = ConnectionSlots::new(MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER);
    loop {
        let accepted = tokio::select! {
            () = engine.wait_for_shutdown() => break,
            a = listener.accept() => a,
        };
        let Ok((stream, peer)) = accepted else {
            // Out of descriptors, say: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        // Each response and event goes out when written, not held back waiting for an ACK.
        let _ = stream.set_nodelay(true);
        let Some(taken) = slots.try_take(peer.ip()) else {
            drop(stream);
            continue;
        };
        let standing = Arc::clone(&taken.standing);
        // The slot is held by the connection, and by a WebSocket it is upgraded to.
        let slot = ConnectionSlot { slot: Arc::new(taken), _gauge: Arc::new(engine.metrics().connection()) };
        let local = stream.local_addr().map_or(IpAddr::from([0, 0, 0, 0]), |a| a.ip());
        let peer_ip = Peer { ip: peer.ip(), local };
        let (router, access, direct, request_slot, trust) = (router.clone(), access.clone(), direct.clone(), slot.clone(), Arc::clone(&standing));
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            // A body the handler drops unread is read and dropped for a while (`Lingering`), so
            // a client still writing it reads the answer; not when the client waits for a
            // `100 Continue` before sending it.
            let linger = !request.headers().get(header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
            let mut request = request.map(|body| Body::new(Lingering { body: Some(body), linger }));
            let too_large = header_block_len(&request) > SERVER_MAX_HEADER_BYTES;
            let origin = request.headers().get(header::ORIGIN).cloned();
            let preflight = request.method() == axum::http::Method::OPTIONS && request.headers().contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
            // A browser page of an origin not allowed is refused before any route (CORS only
            // keeps it from reading the answer, not the request from running).
            let foreign = !preflight && origin.as_ref().is_some_and(|o| !access.origin_allowed(o, request.headers().get(header::HOST), local));
            // A connection that has sent an authenticated request keeps its place (checked once).
            if !trust.trusted() && access.authenticates(request.headers()) {
                trust.trust();
            }
            let direct = direct.clone().filter(|_| request.method() == axum::http::Method::POST && request.uri().path() == "/rpc");
            if direct.is_none() {
                request.extensions_mut().insert(peer_ip);
                // Only a routed request can become a WebSocket (`POST /rpc` never upgrades).
                request.extensions_mut().insert(request_slot.clone());
            }
            let (router, access) = (router.clone(), access.clone());
            async move {
                if too_large {
                    return Ok(stamp_schema(header_block_too_large()));
                }
                let cors = access.options.cors_origin(origin.as_ref());
                if preflight {
                    return Ok(stamp_schema(preflight_response(cors)));
                }
                if foreign {
                    let message = "this browser origin may not use the runtime: the operator lists allowed origins in `[capabilities.server] allowed_origins`";
                    return Ok(stamp_schema(reject(ErrorCode::Forbidden, StatusCode::FORBIDDEN, message.into())));
                }
                let response = match direct {
                    Some(direct) => direct.call(access, request, peer_ip).await,
                    None => match tower::ServiceExt::oneshot(router, request).await {
                        Ok(r) => r,
                        Err(never) => match never {},
                    },
                };
                Ok::<_, Infallible>(stamp_schema(with_cors(response, cors)))
            }
        });
        let engine = engine.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let mut builder = hyper::server::conn::http1::Builder::new();
            // No `.max_headers(MAX_HEADERS)`: hyper's default limit is the same 100, and setting it
            // explicitly makes hyper fill a 100-slot header vector on every request.
            // The read buffer bounds a header block before it is parsed (hyper answers 431 past
            // it); bodies stream through it, bounded by `SERVER_MAX_LINE_BYTES` in `POST /rpc`.
            builder.timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT).max_buf_size(SERVER_MAX_HEADER_BYTES + 8192);
            let stream = StallGuard::new(Watched { inner: stream, standing: Arc::clone(&standing) }, WRITE_STALL_TIMEOUT);
            let conn = builder.serve_connection(TokioIo::new(stream), service).with_upgrades();
            let mut conn = std::pin::pin!(conn);
            // The waits for shutdown and for eviction are polled once, which registers this
            // task's waker (the same on every poll of a spawned task); every later wake-up only
            // reads their flags, instead of polling those waits again on every request.
            let mut shutdown = std::pin::pin!(engine.wait_for_shutdown());
            let mut evicted = std::pin::pin!(standing.evicted.cancelled());
            let mut registered = false;
            let end = std::future::poll_fn(|cx| {
                if !registered {
                    registered = true;
                    if shutdown.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(End::Shutdown);
                    }
                    if evicted.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(End::Evicted);
                    }
                } else if engine.is_shut_down() {
                    return Poll::Ready(End::Shutdown);
                } else if standing.evicted.is_cancelled() {
                    return Poll::Ready(End::Evicted);
                }
                conn.as_mut().poll(cx).map(|_| End::Done)
            })
            .await;
            // An evicted connection is dropped here, closing its socket.
            if end == End::Shutdown {
                conn.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(Duration::from_secs(2), conn).await;
            }
        });
    }
}

/// The size of a request's header block as parsed: the request line, each field as
/// `name: value\r\n`, and the blank line (for a client that writes them so, the bytes it sent).
pub fn header_block_len<B>(request: &axum::http::Request<B>) -> usize {
    let uri = request.uri();
    let target = uri.scheme_str().map_or(0, |s| s.len() + 3) + uri.authority().map_or(0, |a| a.as_str().len()) + uri.path_and_query().map_or(0, |p| p.as_str().len());
    let line = request.method().as_str().len() + 1 + target + " HTTP/1.1\r\n".len();
    let fields: usize = request.headers().iter().map(|(n, v)| n.as_str().len() + 2 + v.len() + 2).sum();
    line + fields + 2
}

/// The answer (431, `frame_too_large`) to a header block longer than `SERVER_MAX_HEADER_BYTES`.
/// hyper's read buffer (`max_buf_size`) bounds what is held, but accepts a block somewhat past
/// it when its end arrives in the same read; checking the parsed size makes the limit exact.
fn header_block_too_large() -> Response {
    reject(
        ErrorCode::FrameTooLarge,
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        format!("the header block is larger than SERVER_MAX_HEADER_BYTES ({SERVER_MAX_HEADER_BYTES} bytes)"),
    )
}

/// The answer to a CORS preflight: the allowed methods and headers for an allowed origin, and
/// no CORS headers at all for any other (the browser then refuses the request).
fn preflight_response(cors: Option<HeaderValue>) -> Response {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::NO_CONTENT;
    if let Some(origin) = cors {
        let h = r.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("POST, GET, OPTIONS"));
        h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static("authorization, content-type, last-event-id"));
        h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from(CORS_MAX_AGE.as_secs()));
    }
    r.headers_mut().insert(header::VARY, HeaderValue::from_static("Origin"));
    r
}

/// A response readable by the allowed origin `cors`, with the digest headers exposed.
fn with_cors(mut response: Response, cors: Option<HeaderValue>) -> Response {
    if let Some(origin) = cors {
        let h = response.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("openagents-protocol-version, openagents-schema-digest"));
        h.append(header::VARY, HeaderValue::from_static("Origin"));
    }
    response
}

/// How a connection's task ended.
#[derive(PartialEq, Eq)]
enum End {
    /// The connection closed, or was upgraded.
    Done,
    /// The runtime shuts down.
    Shutdown,
    /// A newcomer took its place.
    Evicted,
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
pub struct Standing {
    state: AtomicU8,
    evicted: tokio_util::sync::CancellationToken,
}

impl Standing {
    fn new() -> Self {
        Standing { state: AtomicU8::new(FRESH), evicted: tokio_util::sync::CancellationToken::new() }
    }

    /// Whether the connection has sent an authenticated request.
    pub fn trusted(&self) -> bool {
        self.state.load(Ordering::Relaxed) == TRUSTED
    }

    /// The connection has sent an authenticated request: it keeps its place (unless it was
    /// already evicted).
    pub fn trust(&self) {
        let _ = self.state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| (s != EVICTED).then_some(TRUSTED));
    }

    /// The connection found no bytes to read: if it has not authenticated, it may be evicted.
    fn waiting(&self) {
        let _ = self.state.compare_exchange(FRESH, WAITING, Ordering::AcqRel, Ordering::Relaxed);
    }

    /// Evicts the connection when it is in `state` (not authenticated).
    fn evict(&self, state: u8) -> bool {
        let evicted = self.state.compare_exchange(state, EVICTED, Ordering::AcqRel, Ordering::Relaxed).is_ok();
        if evicted {
            self.evicted.cancel();
        }
        evicted
    }
}

/// A listener's connections: at most `cap` in all and `per_peer` from one peer address; past
/// either, a newcomer takes the place of the oldest connection that has not authenticated and
/// waits for bytes, else of the oldest not read yet (of its peer, when the peer's cap is
/// reached).
#[derive(Clone)]
pub struct ConnectionSlots {
    held: Arc<Mutex<Held>>,
    cap: usize,
    per_peer: usize,
}

/// The open connections, by the order of their arrival, and how many each peer holds.
#[derive(Default)]
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
pub struct Slot {
    held: Arc<Mutex<Held>>,
    id: u64,
    /// The connection's standing.
    pub standing: Arc<Standing>,
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
/// most [`LINGER_TIMEOUT`] and [`LINGER_MAX_BYTES`], and while bytes keep coming
/// ([`LINGER_IDLE`]), as nginx's lingering close does: a client
/// that writes its whole body before it reads then reads the answer instead of a reset.
struct Lingering {
    body: Option<Incoming>,
    /// Whether to read the rest (not when the client waits for `100 Continue`).
    linger: bool,
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
        if !self.linger || hyper::body::Body::is_end_stream(&body) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            let drain = async {
                let mut read = 0;
                while let Ok(Some(Ok(frame))) = tokio::time::timeout(LINGER_IDLE, body.frame()).await {
                    read += frame.data_ref().map_or(0, Bytes::len);
                    if read > LINGER_MAX_BYTES {
                        break;
                    }
                }
            };
            // Dropping the body then lets the connection close.
            let _ = tokio::time::timeout(LINGER_TIMEOUT, drain).await;
        });
    }
}

/// A stream whose writes fail with `TimedOut` once one has waited longer than `limit` for the
/// peer to read: a client that sends requests (or holds an event stream) and never reads gets
/// its connection closed instead of holding its replies and its slot forever.
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
        first.standing.trust();
        second.standing.trust();
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
        assert!(younger.standing.evicted.is_cancelled() && !oldest.standing.evicted.is_cancelled());
        // With none waiting, the oldest not read yet; never one that has authenticated.
        third.standing.trust();
        third.standing.waiting();
        let newcomer = slots.try_take(a).expect("the oldest unread one's place");
        assert!(oldest.standing.evicted.is_cancelled() && !third.standing.evicted.is_cancelled());
        assert_eq!(slots.held(a), 2);
        // The evicted slot's drop gives nothing back twice.
        drop(oldest);
        assert_eq!(slots.held(a), 2);
        // The global cap: another peer takes the place of a waiting connection of any peer.
        newcomer.standing.waiting();
        let c = slots.try_take(b).expect("room");
        let d = slots.try_take(b).expect("the newcomer's place");
        assert!(newcomer.standing.evicted.is_cancelled());
        // One evicted cannot authenticate; once authenticated, a connection is never evicted.
        newcomer.standing.trust();
        assert!(!newcomer.standing.trusted());
        c.standing.trust();
        d.standing.trust();
        assert!(slots.try_take(b).is_none() && slots.try_take(a).is_none(), "every place is held by an authenticated connection");
    }
}
