//! The RPC surface over HTTP: `POST /rpc` takes one JSON-RPC message (a request, a
//! notification or a batch) and answers it; `GET /events` is a `text/event-stream` with
//! `id: <seq>` and `data: <json>` per event; `GET /healthz` and `GET /readyz` are the probes.
//! Every request but the probes, the web page and CORS preflights needs
//! `Authorization: Bearer <token>`; network clients are untrusted.
//!
//! The status-code rule: transport refusals are HTTP codes — 401 (no or bad token), 403 (a
//! browser origin that is not allowed), 405, 413 (body over `SERVER_MAX_LINE_BYTES`), 415 (not a
//! JSON content type), 431 (header block over `SERVER_MAX_HEADER_BYTES`) — each with a JSON-RPC
//! error object as its body. Every message that reaches JSON-RPC is answered `200` with its reply
//! (errors included, as jsonrpsee does), or `204 No Content` when it gets none (notifications).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use futures_util::stream::{self, Stream};
use hyper_util::rt::{TokioIo, TokioTimer};
use openagents_protocol::{ErrorCode, SERVER_MAX_HEADER_BYTES, SERVER_MAX_LINE_BYTES};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::listener::{PeerSlots, StallGuard};

use crate::agent::error;
use crate::auth::{Caller, Grant, RuntimeHttpCredential, authenticate_index};
use crate::engine::{Reply, RpcEngine};
use crate::projection;

/// The most connections served at once; more are closed on arrival.
pub const MAX_CONNECTIONS: usize = 256;
/// The most connections one peer address may hold at once, so one client cannot take every
/// slot; more from that address are closed on arrival.
pub const MAX_CONNECTIONS_PER_PEER: usize = 64;
/// How long a response (or an event stream) may wait for a client that reads nothing before its
/// connection is closed.
pub const WRITE_STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The `retry:` an event stream asks an `EventSource` to wait before reconnecting.
pub const SSE_RETRY: Duration = Duration::from_secs(2);
/// How long a browser may cache a CORS preflight answer.
pub const CORS_MAX_AGE: Duration = Duration::from_secs(600);
/// The JSON content types `POST /rpc` accepts (with or without a `charset` parameter).
pub const JSON_CONTENT_TYPES: &[&str] = &["application/json", "application/json-rpc", "application/jsonrequest"];
/// How long a client has to send a request's headers (slow senders are cut off).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client has to send a request's body.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The most header fields a request may carry.
pub const MAX_HEADERS: usize = 100;
/// How often an idle event stream gets a keep-alive comment.
pub const SSE_KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The response header that carries `PROTOCOL_VERSION` on every HTTP response and on the
/// WebSocket handshake, so a client can compare versions before it reads a body.
pub const PROTOCOL_VERSION_HEADER: &str = "openagents-protocol-version";
/// The response header that carries `SCHEMA_DIGEST` (the digest of the exact schema this runtime
/// was built from) on every HTTP response and on the WebSocket handshake.
pub const SCHEMA_DIGEST_HEADER: &str = "openagents-schema-digest";

/// Adds the protocol version and schema digest headers to a response.
fn stamp_schema(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(PROTOCOL_VERSION_HEADER, HeaderValue::from_static(openagents_protocol::PROTOCOL_VERSION));
    headers.insert(SCHEMA_DIGEST_HEADER, HeaderValue::from_static(openagents_protocol::SCHEMA_DIGEST));
    response
}

/// How a network listener behaves beyond its credentials; the operator's configuration.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Browser origins (`scheme://host[:port]`) allowed to call `POST /rpc` and `GET /events`
    /// across origins (CORS) and to open the WebSocket. A request without an `Origin` header is
    /// not a browser's and is not checked; a page of the runtime's own origin is always allowed.
    pub allowed_origins: Vec<String>,
    /// Whether `GET /` serves the web page.
    pub web: bool,
}

impl HttpOptions {
    /// Whether a browser request from `origin` may use the runtime whose `Host` is `host`.
    pub fn origin_allowed(&self, origin: &str, host: Option<&str>) -> bool {
        let same = host.is_some_and(|h| origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")).is_some_and(|rest| rest.eq_ignore_ascii_case(h)));
        same || self.allowed_origins.iter().any(|o| o.eq_ignore_ascii_case(origin))
    }

    fn cors_origin(&self, origin: Option<&HeaderValue>) -> Option<HeaderValue> {
        let o = origin?.to_str().ok()?;
        self.allowed_origins.iter().any(|a| a.eq_ignore_ascii_case(o)).then(|| HeaderValue::from_str(o).ok()).flatten()
    }
}

#[derive(Clone)]
struct App {
    engine: RpcEngine,
    options: Arc<HttpOptions>,
    credentials: Arc<Vec<RuntimeHttpCredential>>,
    /// The caller each credential authenticates as (same order), built once rather than per
    /// request.
    callers: Arc<Vec<Caller>>,
}

/// What the WebSocket route needs from the router's state.
pub trait AppAuth {
    /// The caller for the request's `Authorization` header.
    ///
    /// # Errors
    ///
    /// The 401 response.
    fn authorize(&self, headers: &HeaderMap) -> Result<Caller, Response>;
    /// The caller for a bare token.
    fn credential(&self, token: &str) -> Option<Caller>;
    /// The engine.
    fn engine(&self) -> &RpcEngine;
    /// Whether a browser page of `origin` may connect (see [`HttpOptions::origin_allowed`]).
    fn origin_allowed(&self, origin: &str, host: Option<&str>) -> bool;
}

impl AppAuth for App {
    fn authorize(&self, headers: &HeaderMap) -> Result<Caller, Response> {
        authorize(self, headers)
    }
    fn credential(&self, token: &str) -> Option<Caller> {
        crate::ws::find(&self.credentials, token)
    }
    fn engine(&self) -> &RpcEngine {
        &self.engine
    }
    fn origin_allowed(&self, origin: &str, host: Option<&str>) -> bool {
        self.options.origin_allowed(origin, host)
    }
}

/// A 401 with a typed `unauthorized` body.
pub(crate) fn reject_unauthorized(message: &str) -> Response {
    reject(ErrorCode::Unauthorized, StatusCode::UNAUTHORIZED, message.to_owned())
}

/// Serves HTTP on `bind` (`host:port`; port 0 picks a free one) with one admin credential for
/// `token`, in a background task until the engine shuts down. Returns the bound address. The
/// loopback-by-default policy is the caller's: this binds whatever it is given.
///
/// # Errors
///
/// When the address cannot be bound.
pub async fn run_http(engine: RpcEngine, bind: &str, token: &str) -> std::io::Result<SocketAddr> {
    run_http_authorized(engine, bind, vec![RuntimeHttpCredential::new("default", token, Grant::admin())]).await
}

/// [`run_http`] with several independently scoped credentials.
///
/// # Errors
///
/// When the address cannot be bound, or no credential is given.
pub async fn run_http_authorized(engine: RpcEngine, bind: &str, credentials: Vec<RuntimeHttpCredential>) -> std::io::Result<SocketAddr> {
    let (addr, _task) = serve(engine, bind, credentials, true).await?;
    Ok(addr)
}

/// [`run_http_authorized`] with the operator's [`HttpOptions`]: allowed browser origins, and the
/// web page (`GET /`, `GET /assets/…`; see [`crate::web`]) when `options.web` is true.
///
/// # Errors
///
/// As [`run_http_authorized`].
pub async fn run_http_with(engine: RpcEngine, bind: &str, credentials: Vec<RuntimeHttpCredential>, options: HttpOptions) -> std::io::Result<SocketAddr> {
    let (addr, _task) = serve_with(engine, bind, credentials, true, options).await?;
    Ok(addr)
}

/// [`run_http_with`] with only the web page switch.
///
/// # Errors
///
/// As [`run_http_authorized`].
pub async fn run_http_authorized_web(engine: RpcEngine, bind: &str, credentials: Vec<RuntimeHttpCredential>, web: bool) -> std::io::Result<SocketAddr> {
    run_http_with(engine, bind, credentials, HttpOptions { web, ..HttpOptions::default() }).await
}

/// Binds and serves: HTTP and the WebSocket when `http` is true, the WebSocket alone otherwise.
pub(crate) async fn serve(
    engine: RpcEngine,
    bind: &str,
    credentials: Vec<RuntimeHttpCredential>,
    http: bool,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    serve_with(engine, bind, credentials, http, HttpOptions::default()).await
}

/// [`serve`] with `options`.
pub(crate) async fn serve_with(
    engine: RpcEngine,
    bind: &str,
    credentials: Vec<RuntimeHttpCredential>,
    http: bool,
    options: HttpOptions,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    if credentials.is_empty() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "a network runtime needs at least one credential"));
    }
    let listener = TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    let callers = credentials.iter().map(|c| Caller { name: c.name.clone(), grant: c.grant.clone(), trusted: false }).collect();
    let web = options.web;
    let app = App { engine: engine.clone(), options: Arc::new(options), credentials: Arc::new(credentials), callers: Arc::new(callers) };
    let mut router: Router<App> = crate::ws::route::<App>().route("/healthz", get(healthz)).route("/readyz", get(readyz));
    if http && web {
        router = router.merge(crate::web::router::<App>());
    }
    if http {
        router = router
            .route("/rpc", post(rpc))
            .route("/events", get(events))
            .route("/metrics", get(metrics))
            .fallback(|| async { (StatusCode::NOT_FOUND, "not found: the endpoints are POST /rpc, GET /events, GET /frontend/v2 (WebSocket), GET /healthz and GET /readyz\n") });
    } else {
        router = router.fallback(|| async { (StatusCode::NOT_FOUND, "not found: the only endpoint is GET /frontend/v2 (WebSocket)\n") });
    }
    let router = router.with_state(app.clone());
    let task = tokio::spawn(accept_loop(listener, router, engine, app, http));
    Ok((addr, task))
}

/// [`run_http_authorized`] with an explicit controller lease duration.
///
/// # Errors
///
/// As [`run_http_authorized`].
pub async fn run_http_authorized_with_lease_ttl(
    engine: RpcEngine,
    bind: &str,
    credentials: Vec<RuntimeHttpCredential>,
    lease_ttl: Duration,
) -> std::io::Result<SocketAddr> {
    engine.set_lease_ttl(lease_ttl);
    run_http_authorized(engine, bind, credentials).await
}

/// One of a listener's [`MAX_CONNECTIONS`] slots, carried in each request's extensions so a
/// connection upgraded to a WebSocket keeps holding it.
#[derive(Clone)]
pub(crate) struct ConnectionSlot {
    _permit: Arc<tokio::sync::OwnedSemaphorePermit>,
    _peer: Arc<crate::listener::PeerSlot>,
    _gauge: Arc<crate::metrics::ConnectionGauge>,
}

/// The address a request came from (for the audit log).
#[derive(Clone, Copy)]
pub(crate) struct Peer(pub std::net::IpAddr);

/// When serving HTTP (`http`), `POST /rpc` goes straight to [`rpc`], skipping the router's
/// per-request routing work; everything else goes through the router. CORS preflights are
/// answered before either, without a token.
async fn accept_loop(listener: TcpListener, router: Router, engine: RpcEngine, app: App, http: bool) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let peers = PeerSlots::new(MAX_CONNECTIONS_PER_PEER);
    let rpc_app = http.then(|| app.clone());
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
        let Some(peer_slot) = peers.try_take(peer.ip()) else {
            drop(stream);
            continue;
        };
        let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
            drop(stream);
            continue;
        };
        // The slot is held by the connection, and by a WebSocket it is upgraded to.
        let slot = ConnectionSlot { _permit: Arc::new(permit), _peer: Arc::new(peer_slot), _gauge: Arc::new(engine.metrics().connection()) };
        let peer_ip = Peer(peer.ip());
        let options = Arc::clone(&app.options);
        let (router, rpc_app, request_slot) = (router.clone(), rpc_app.clone(), slot.clone());
        let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            let mut request = request.map(Body::new);
            request.extensions_mut().insert(peer_ip);
            let too_large = header_block_len(&request) > SERVER_MAX_HEADER_BYTES;
            let origin = request.headers().get(header::ORIGIN).cloned();
            let preflight = request.method() == axum::http::Method::OPTIONS && request.headers().contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
            let options = Arc::clone(&options);
            let direct = rpc_app.clone().filter(|_| request.method() == axum::http::Method::POST && request.uri().path() == "/rpc");
            if direct.is_none() {
                // Only a routed request can become a WebSocket (`POST /rpc` never upgrades).
                request.extensions_mut().insert(request_slot.clone());
            }
            let router = router.clone();
            async move {
                if too_large {
                    return Ok(stamp_schema(header_block_too_large()));
                }
                let cors = options.cors_origin(origin.as_ref());
                if preflight {
                    return Ok(stamp_schema(preflight_response(cors)));
                }
                let response = match direct {
                    Some(app) => rpc(State(app), request).await,
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
            // it); bodies stream through it, bounded by `SERVER_MAX_LINE_BYTES` in `rpc`.
            builder.timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT).max_buf_size(SERVER_MAX_HEADER_BYTES + 8192);
            let stream = StallGuard::new(stream, WRITE_STALL_TIMEOUT);
            let conn = builder.serve_connection(TokioIo::new(stream), service).with_upgrades();
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                () = engine.wait_for_shutdown() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(2), conn).await;
                }
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

/// `GET /metrics`: every counter in the Prometheus text format, for a credential whose grant
/// includes `metrics`.
async fn metrics(State(app): State<App>, peer: Option<axum::Extension<Peer>>, headers: HeaderMap) -> Response {
    let caller = match authorize(&app, &headers) {
        Ok(c) => c,
        Err(r) => {
            audit_unauthorized(&app, peer.as_deref(), "/metrics", headers.contains_key(header::AUTHORIZATION));
            return r;
        }
    };
    if !caller.grant.metrics {
        app.engine.metrics().forbidden();
        tracing::warn!(target: "openagents::audit", event = "forbidden", credential = %caller.name, method = "GET /metrics");
        return reject(ErrorCode::Forbidden, StatusCode::FORBIDDEN, format!("credential `{}` may not read metrics (grant `metrics = true`)", caller.name));
    }
    let mut r = Response::new(Body::from(app.engine.metrics_text()));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    r
}

/// `GET /healthz`: the process is alive. No token, no details.
async fn healthz() -> Response {
    let mut r = Response::new(Body::from("ok\n"));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// `GET /readyz`: 200 while the runtime takes work, 503 once shutdown has begun. No token.
async fn readyz(State(app): State<App>) -> Response {
    let ready = app.engine.is_accepting();
    let mut r = Response::new(Body::from(if ready { "ready\n" } else { "shutting down\n" }));
    *r.status_mut() = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn json_response(status: u16, body: Vec<u8>) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// A transport refusal: `status` with a JSON-RPC error object of `code` as its body.
pub(crate) fn reject_status(code: ErrorCode, status: StatusCode, message: &str) -> Response {
    stamp_schema(reject(code, status, message.to_owned()))
}

fn reject(code: ErrorCode, status: StatusCode, message: String) -> Response {
    let reply = Reply::error(error(code, message));
    let mut r = json_response(status.as_u16(), reply.to_json());
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    r
}

fn authorize(app: &App, headers: &HeaderMap) -> Result<Caller, Response> {
    authorized(app, headers).cloned()
}

/// Counts and audits a refused authentication; the record names the peer and the path, never
/// the token.
fn audit_unauthorized(app: &App, peer: Option<&Peer>, path: &str, presented: bool) {
    app.engine.metrics().auth_failed();
    let peer = peer.map_or_else(|| "-".to_owned(), |p| p.0.to_string());
    tracing::warn!(target: "openagents::audit", event = "auth_failed", %peer, path = %crate::jsonrpc::bounded(path, 256), token_presented = presented);
}

/// [`authorize`] without copying the caller.
fn authorized<'a>(app: &'a App, headers: &HeaderMap) -> Result<&'a Caller, Response> {
    let unauthorized = |m: &str| reject(ErrorCode::Unauthorized, StatusCode::UNAUTHORIZED, m.to_owned());
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(unauthorized("send `Authorization: Bearer <token>`"));
    };
    let token = bearer(value);
    match token.and_then(|t| authenticate_index(&app.credentials, t)) {
        Some(i) => Ok(&app.callers[i]),
        // The message never repeats the token.
        None => Err(unauthorized("the bearer token is not valid")),
    }
}

/// The token of an `Authorization` header: the scheme `Bearer` in any letter case, one or
/// more spaces, the token.
fn bearer(value: &HeaderValue) -> Option<&str> {
    let v = value.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// Whether a `Content-Type` is one of [`JSON_CONTENT_TYPES`] (parameters such as `charset`
/// allowed).
fn is_json(value: Option<&HeaderValue>) -> bool {
    value.and_then(|v| v.to_str().ok()).and_then(|v| v.split(';').next()).is_some_and(|m| JSON_CONTENT_TYPES.iter().any(|t| m.trim().eq_ignore_ascii_case(t)))
}

async fn rpc(State(app): State<App>, request: Request) -> Response {
    let caller = match authorized(&app, request.headers()) {
        Ok(c) => c,
        Err(r) => {
            audit_unauthorized(&app, request.extensions().get::<Peer>(), "/rpc", request.headers().contains_key(header::AUTHORIZATION));
            return r;
        }
    };
    if !is_json(request.headers().get(header::CONTENT_TYPE)) {
        return reject(ErrorCode::InvalidRequest, StatusCode::UNSUPPORTED_MEDIA_TYPE, format!("send the request with `Content-Type` one of {}", JSON_CONTENT_TYPES.join(", ")));
    }
    let too_large = || reject(ErrorCode::FrameTooLarge, StatusCode::PAYLOAD_TOO_LARGE, format!("the body is larger than SERVER_MAX_LINE_BYTES ({SERVER_MAX_LINE_BYTES} bytes)"));
    // A declared length over the limit is refused at once, before any of the body is read.
    let declared = request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > SERVER_MAX_LINE_BYTES as u64) {
        return too_large();
    }
    let body = request.into_body();
    let bytes = match tokio::time::timeout(BODY_READ_TIMEOUT, axum::body::to_bytes(body, SERVER_MAX_LINE_BYTES)).await {
        Err(_) => return reject(ErrorCode::Timeout, StatusCode::REQUEST_TIMEOUT, format!("the body did not arrive within {BODY_READ_TIMEOUT:?}")),
        Ok(Err(_)) => return too_large(),
        Ok(Ok(b)) => b,
    };
    match app.engine.handle_message(caller, &bytes, None).await {
        Some(reply) => json_response(200, reply),
        None => {
            let mut r = Response::new(Body::empty());
            *r.status_mut() = StatusCode::NO_CONTENT;
            r
        }
    }
}

async fn events(State(app): State<App>, peer: Option<axum::Extension<Peer>>, headers: HeaderMap, uri: axum::http::Uri) -> Response {
    let caller = match authorize(&app, &headers) {
        Ok(c) => c,
        Err(r) => {
            audit_unauthorized(&app, peer.as_deref(), "/events", headers.contains_key(header::AUTHORIZATION));
            return r;
        }
    };
    if let Err(e) = caller.grant.may_read_events(&caller.name) {
        return reject(e.code, StatusCode::FORBIDDEN, e.message);
    }
    let since = match resume_point(headers.get("last-event-id"), uri.query()) {
        Ok(since) => since,
        Err(message) => return reject(ErrorCode::InvalidRequest, StatusCode::BAD_REQUEST, message),
    };
    let sub = app.engine.subscribe(since);
    // The first comment goes out at once, so a buffering proxy forwards the stream's start and
    // the client knows it is connected; `retry:` tells `EventSource` how soon to reconnect.
    let hello = stream::once(async { Ok::<_, Infallible>(SseEvent::default().comment("openagents events").retry(SSE_RETRY)) });
    let mut response = Sse::new(hello.chain(event_stream(sub, app.engine.clone()))).keep_alive(KeepAlive::new().interval(SSE_KEEP_ALIVE)).into_response();
    let h = response.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Where an event stream resumes: after the `Last-Event-ID` header's sequence number, else
/// after the `since=` query parameter's, else at the next new event (`Ok(None)`). A value that
/// is not a sequence number (a non-negative decimal integer) is refused with the reason; one
/// ahead of the newest event is answered by the hub with a `gap` and a replay from the start.
///
/// # Errors
///
/// The message for a 400 when a value is not a sequence number.
pub fn resume_point(last_event_id: Option<&HeaderValue>, query: Option<&str>) -> Result<Option<i64>, String> {
    let parse = |what: &str, v: &str| v.trim().parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| format!("{what} must be a sequence number (a non-negative integer), got {:?}", crate::jsonrpc::bounded(v, 64)));
    if let Some(v) = last_event_id {
        let v = v.to_str().map_err(|_| "`Last-Event-ID` must be a sequence number (a non-negative integer)".to_owned())?;
        return parse("`Last-Event-ID`", v).map(Some);
    }
    match query.and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("since="))) {
        Some(v) => parse("`since`", v).map(Some),
        None => Ok(None),
    }
}

fn event_stream(sub: crate::events::Subscription, engine: RpcEngine) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    stream::unfold((sub, engine, false), |(mut sub, engine, done)| async move {
        if done {
            return None;
        }
        let ev = tokio::select! {
            biased;
            ev = sub.next() => ev?,
            () = engine.wait_for_shutdown() => {
                // Deliver what is already queued (the final event), then end.
                match tokio::time::timeout(Duration::from_millis(200), sub.next()).await {
                    Ok(Some(ev)) => ev,
                    _ => return None,
                }
            }
        };
        let last = projection::is_final(&ev);
        let data = String::from_utf8(projection::event_json(&ev)).unwrap_or_default();
        let sse = SseEvent::default().id(ev.seq.to_string()).data(data);
        Some((Ok(sse), (sub, engine, last)))
    })
}
