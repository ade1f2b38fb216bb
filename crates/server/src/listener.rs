//! What every network connection shares, whatever it speaks. The accept loop and its guards are
//! openagents-rpc's ([`openagents_rpc::listen::serve_connections`]: the connection slots, a
//! global cap and a per-peer cap where a connection that has not authenticated gives its place
//! to a newcomer; the timed, bounded header read; the lingering read of a body refused before it
//! was read; the guard that closes a connection whose client stops reading; the budget of
//! buffered request bodies), as any service served by the core gets them. This module adds the
//! runtime's own: the header-block cap's typed refusal, the digest headers on every response,
//! CORS and the browser `Origin` check, the `Host` names the runtime answers to, bearer
//! authentication and the typed refusals. The HTTP and WebSocket routes (`http`, `ws`) sit on
//! top of this and never import each other; `server` composes them.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use openagents_protocol::{ErrorCode, SERVER_MAX_HEADER_BYTES};
pub use openagents_rpc::listen::{
    BODY_ROOM_WAIT, HEADER_READ_TIMEOUT, LINGER_IDLE, LINGER_MAX_BYTES, LINGER_TIMEOUT, MAX_BUFFERED_BODY_BYTES, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER, WRITE_STALL_TIMEOUT, header_block_len, host_name,
};
use openagents_rpc::listen::{BodyBudget, ConnectionLimits, Slot};
use tokio::net::TcpListener;

use crate::agent::error;
use crate::auth::{Caller, RuntimeHttpCredential, authenticate_index};
use crate::engine::RpcEngine;
use crate::jsonrpc::Reply;

/// How long a browser may cache a CORS preflight answer.
pub const CORS_MAX_AGE: Duration = Duration::from_secs(600);
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
    bodies: BodyBudget,
}

impl Access {
    /// Access to `engine` for `credentials`, on a listener bound to `bind` (`host:port`).
    pub(crate) fn new(engine: RpcEngine, credentials: Vec<RuntimeHttpCredential>, options: HttpOptions, bind: &str) -> Self {
        let callers: Vec<Caller> = credentials.iter().map(|c| Caller { name: c.name.clone(), grant: c.grant.clone(), trusted: false }).collect();
        let contexts = callers.iter().map(|c| crate::jsonrpc::context(Arc::new(c.clone()), None)).collect();
        let bound = Some(host_name(bind)).filter(|n| n.parse::<IpAddr>().is_err() && !n.is_empty()).map(Arc::from);
        let gauge = engine.clone();
        let bodies = BodyBudget::new(MAX_BUFFERED_BODY_BYTES, BODY_ROOM_WAIT).with_gauge(move |n| gauge.metrics().body_bytes(n));
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

    /// The budget of buffered request bodies ([`MAX_BUFFERED_BODY_BYTES`]).
    pub(crate) fn body_budget(&self) -> &BodyBudget {
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
        openagents_rpc::listen::bearer_token(headers).is_some_and(|t| authenticate_index(&self.credentials, t).is_some())
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
        if !headers.contains_key(header::AUTHORIZATION) {
            return Err(unauthorized("send `Authorization: Bearer <token>`"));
        }
        match openagents_rpc::listen::bearer_token(headers).and_then(|t| authenticate_index(&self.credentials, t)) {
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
        self.slot.trust();
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

/// The engine's shutdown, as what stops a listener.
#[derive(Clone)]
pub(crate) struct EngineStop(pub(crate) RpcEngine);

impl openagents_rpc::listen::Stop for EngineStop {
    fn stopped(&self) -> impl Future<Output = ()> + Send + '_ {
        self.0.wait_for_shutdown()
    }

    fn is_stopped(&self) -> bool {
        self.0.is_shut_down()
    }
}

/// How long a connection may take to finish its request in flight once the runtime shuts down.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Serves `router` on `listener` until the engine shuts down, through openagents-rpc's accept
/// loop and its guards (see [`openagents_rpc::listen::serve_connections`]: the connection slots,
/// the timed header read bounded by `SERVER_MAX_HEADER_BYTES`, the lingering read, the
/// write-stall guard): every response carries the digest headers (and CORS headers for an
/// allowed origin), a header block over `SERVER_MAX_HEADER_BYTES` is 431, a CORS preflight is
/// answered before any route without a token, a browser `Origin` that is not allowed is 403,
/// and `direct` answers `POST /rpc` when given. A connection that sends an authenticated request
/// keeps its place.
pub(crate) async fn accept_loop<D: Direct>(listener: TcpListener, router: Router, access: Access, direct: Option<D>) {
    let engine = access.engine.clone();
    // Vectored writes: an event stream's chunks (shared by every subscriber) are written as they
    // are, not copied into each connection's buffer.
    let limits = ConnectionLimits { max_header_bytes: SERVER_MAX_HEADER_BYTES, shutdown_grace: Some(SHUTDOWN_GRACE), flatten_writes: false, ..ConnectionLimits::default() };
    openagents_rpc::listen::serve_connections(listener, &limits, EngineStop(engine.clone()), |accepted| {
        // The slot is held by the connection, and by a WebSocket it is upgraded to.
        let slot = ConnectionSlot { slot: Arc::clone(&accepted.slot), _gauge: Arc::new(engine.metrics().connection()) };
        let peer_ip = Peer { ip: accepted.peer, local: accepted.local };
        let (router, access, direct) = (router.clone(), access.clone(), direct.clone());
        move |request: hyper::Request<openagents_rpc::listen::Lingering>| {
            let mut request = request.map(Body::new);
            let too_large = header_block_len(&request) > SERVER_MAX_HEADER_BYTES;
            let origin = request.headers().get(header::ORIGIN).cloned();
            let preflight = request.method() == axum::http::Method::OPTIONS && request.headers().contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
            // A browser page of an origin not allowed is refused before any route (CORS only
            // keeps it from reading the answer, not the request from running).
            let foreign = !preflight && origin.as_ref().is_some_and(|o| !access.origin_allowed(o, request.headers().get(header::HOST), peer_ip.local));
            // A connection that has sent an authenticated request keeps its place (checked once).
            if !slot.slot.standing.trusted() && access.authenticates(request.headers()) {
                slot.trust();
            }
            let direct = direct.clone().filter(|_| request.method() == axum::http::Method::POST && request.uri().path() == "/rpc");
            if direct.is_none() {
                request.extensions_mut().insert(peer_ip);
                // Only a routed request can become a WebSocket (`POST /rpc` never upgrades).
                request.extensions_mut().insert(slot.clone());
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
        }
    })
    .await;
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
