//! The RPC surface over HTTP: `POST /rpc` takes one request and answers one response;
//! `GET /events` is a `text/event-stream` with `id: <seq>` and `data: <json>` per event. Every
//! request needs `Authorization: Bearer <token>`; network clients are untrusted.

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
use futures_util::stream::{self, Stream};
use hyper_util::rt::{TokioIo, TokioTimer};
use openagents_protocol::{ErrorCode, SERVER_MAX_LINE_BYTES};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::agent::error;
use crate::auth::{Caller, Grant, RuntimeHttpCredential, authenticate_index};
use crate::engine::{Reply, RpcEngine};
use crate::projection;

/// The most connections served at once; more are closed on arrival.
pub const MAX_CONNECTIONS: usize = 256;
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

#[derive(Clone)]
struct App {
    engine: RpcEngine,
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

/// Binds and serves: HTTP and the WebSocket when `http` is true, the WebSocket alone otherwise.
pub(crate) async fn serve(
    engine: RpcEngine,
    bind: &str,
    credentials: Vec<RuntimeHttpCredential>,
    http: bool,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    if credentials.is_empty() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "a network runtime needs at least one credential"));
    }
    let listener = TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    let callers = credentials.iter().map(|c| Caller { name: c.name.clone(), grant: c.grant.clone(), trusted: false }).collect();
    let app = App { engine: engine.clone(), credentials: Arc::new(credentials), callers: Arc::new(callers) };
    let mut router: Router<App> = crate::ws::route::<App>();
    if http {
        router = router
            .route("/rpc", post(rpc))
            .route("/events", get(events))
            .fallback(|| async { (StatusCode::NOT_FOUND, "not found: the endpoints are POST /rpc, GET /events and GET /frontend/v2 (WebSocket)\n") });
    } else {
        router = router.fallback(|| async { (StatusCode::NOT_FOUND, "not found: the only endpoint is GET /frontend/v2 (WebSocket)\n") });
    }
    let router = router.with_state(app.clone());
    let task = tokio::spawn(accept_loop(listener, router, engine, http.then_some(app)));
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
}

/// `rpc_app`: when serving HTTP, `POST /rpc` goes straight to [`rpc`], skipping the router's
/// per-request routing work; everything else goes through the router.
async fn accept_loop(listener: TcpListener, router: Router, engine: RpcEngine, rpc_app: Option<App>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            () = engine.wait_for_shutdown() => break,
            a = listener.accept() => a,
        };
        let Ok((stream, _)) = accepted else {
            // Out of descriptors, say: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        // Each response and event goes out when written, not held back waiting for an ACK.
        let _ = stream.set_nodelay(true);
        let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
            drop(stream);
            continue;
        };
        // The slot is held by the connection, and by a WebSocket it is upgraded to.
        let slot = ConnectionSlot { _permit: Arc::new(permit) };
        let (router, rpc_app, request_slot) = (router.clone(), rpc_app.clone(), slot.clone());
        let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            let mut request = request.map(Body::new);
            let too_large = header_block_len(&request) > SERVER_MAX_LINE_BYTES;
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
                let response = match direct {
                    Some(app) => rpc(State(app), request).await,
                    None => match tower::ServiceExt::oneshot(router, request).await {
                        Ok(r) => r,
                        Err(never) => match never {},
                    },
                };
                Ok::<_, Infallible>(stamp_schema(response))
            }
        });
        let engine = engine.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let mut builder = hyper::server::conn::http1::Builder::new();
            // No `.max_headers(MAX_HEADERS)`: hyper's default limit is the same 100, and setting it
            // explicitly makes hyper fill a 100-slot header vector on every request.
            builder.timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT).max_buf_size(SERVER_MAX_LINE_BYTES);
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

/// The answer (431, `frame_too_large`) to a header block longer than `SERVER_MAX_LINE_BYTES`.
/// hyper's read buffer (`max_buf_size`) bounds what is held, but accepts a block somewhat past
/// it when its end arrives in the same read; checking the parsed size makes the limit exact.
fn header_block_too_large() -> Response {
    reject(
        ErrorCode::FrameTooLarge,
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        format!("the header block is larger than SERVER_MAX_LINE_BYTES ({SERVER_MAX_LINE_BYTES} bytes)"),
    )
}

fn json_response(status: u16, body: Vec<u8>) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
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

/// [`authorize`] without copying the caller.
fn authorized<'a>(app: &'a App, headers: &HeaderMap) -> Result<&'a Caller, Response> {
    let unauthorized = |m: &str| reject(ErrorCode::Unauthorized, StatusCode::UNAUTHORIZED, m.to_owned());
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(unauthorized("send `Authorization: Bearer <token>`"));
    };
    let token = value.to_str().ok().and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer "))).map(str::trim);
    match token.and_then(|t| authenticate_index(&app.credentials, t)) {
        Some(i) => Ok(&app.callers[i]),
        // The message never repeats the token.
        None => Err(unauthorized("the bearer token is not valid")),
    }
}

async fn rpc(State(app): State<App>, request: Request) -> Response {
    let caller = match authorized(&app, request.headers()) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let json = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| {
        v.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    });
    if !json {
        return reject(ErrorCode::InvalidRequest, StatusCode::UNSUPPORTED_MEDIA_TYPE, "send the request as `Content-Type: application/json`".into());
    }
    let body = request.into_body();
    let bytes = match tokio::time::timeout(BODY_READ_TIMEOUT, axum::body::to_bytes(body, SERVER_MAX_LINE_BYTES)).await {
        Err(_) => return reject(ErrorCode::Timeout, StatusCode::REQUEST_TIMEOUT, format!("the body did not arrive within {BODY_READ_TIMEOUT:?}")),
        Ok(Err(_)) => {
            return reject(ErrorCode::FrameTooLarge, StatusCode::PAYLOAD_TOO_LARGE, format!("the body is larger than SERVER_MAX_LINE_BYTES ({SERVER_MAX_LINE_BYTES} bytes)"));
        }
        Ok(Ok(b)) => b,
    };
    let reply = app.engine.handle(caller, &bytes).await;
    json_response(reply.http_status(), reply.to_json())
}

async fn events(State(app): State<App>, headers: HeaderMap, uri: axum::http::Uri) -> Response {
    let caller = match authorize(&app, &headers) {
        Ok(c) => c,
        Err(r) => return r,
    };
    if !caller.grant.events {
        return reject(ErrorCode::Forbidden, StatusCode::FORBIDDEN, format!("credential `{}` may not read events", caller.name));
    }
    let sub = app.engine.subscribe(resume_point(headers.get("last-event-id"), uri.query()));
    Sse::new(event_stream(sub, app.engine.clone())).keep_alive(KeepAlive::new().interval(SSE_KEEP_ALIVE)).into_response()
}

/// Where an event stream resumes: after the `Last-Event-ID` header's sequence number, else
/// after the `since=` query parameter's, else at the next new event (`None`). A value that is
/// not a decimal integer is ignored, as if absent; the hub clamps the rest into range.
pub fn resume_point(last_event_id: Option<&HeaderValue>, query: Option<&str>) -> Option<i64> {
    let from_header = last_event_id.and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<i64>().ok());
    let from_query = query.and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("since="))).and_then(|v| v.parse::<i64>().ok());
    from_header.or(from_query)
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
