//! The RPC surface over HTTP: `POST /rpc` takes one JSON-RPC message (a request, a
//! notification or a batch) and answers it; `GET /events` is a `text/event-stream` with
//! `id: <seq>` and `data: <json>` per event; `GET /healthz` and `GET /readyz` are the probes;
//! `GET /metrics` the Prometheus exposition. Every request but the probes, the web page and CORS
//! preflights needs `Authorization: Bearer <token>`; network clients are untrusted. The
//! listener (accept loop, slots, header cap, digest headers, CORS, authentication) is
//! [`crate::listener`]'s.
//!
//! The status-code rule: transport refusals are HTTP codes — 401 (no or bad token), 403 (a
//! browser origin that is not allowed, or `/events` and `/metrics` without their grant), 405,
//! 413 (body over `SERVER_MAX_LINE_BYTES`), 415 (not a JSON content type), 421 (the web page or
//! the WebSocket under a `Host` the runtime does not answer to), 431 (header block over
//! `SERVER_MAX_HEADER_BYTES`), 503 (no room for the body in `MAX_BUFFERED_BODY_BYTES` within
//! `BODY_ROOM_WAIT`) — each with a JSON-RPC error object as its body. Every message
//! that reaches JSON-RPC is answered `200` with its reply (errors included, as jsonrpsee does),
//! or `204 No Content` when it gets none (notifications).

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::{get, post};
use futures_util::stream::Stream;
use openagents_protocol::{ErrorCode, SERVER_MAX_LINE_BYTES};

use crate::engine::RpcEngine;
pub use crate::listener::{
    BODY_ROOM_WAIT, CORS_MAX_AGE, HEADER_READ_TIMEOUT, HttpOptions, LINGER_IDLE, LINGER_MAX_BYTES, LINGER_TIMEOUT, MAX_BUFFERED_BODY_BYTES, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER,
    MAX_HEADERS, PROTOCOL_VERSION_HEADER, SCHEMA_DIGEST_HEADER, WRITE_STALL_TIMEOUT, header_block_len,
};
/// How long a client has to send a request's body.
pub use openagents_rpc::listen::BODY_READ_TIMEOUT;
use crate::listener::{Access, Direct, Peer, json_response, reject};
use openagents_rpc::listen::BodyError;

/// The `retry:` an event stream asks an `EventSource` to wait before reconnecting.
pub const SSE_RETRY: Duration = Duration::from_secs(2);
/// The JSON content types `POST /rpc` accepts (with or without a `charset` parameter).
pub const JSON_CONTENT_TYPES: &[&str] = &["application/json", "application/json-rpc", "application/jsonrequest"];
/// How often an idle event stream gets a keep-alive comment.
pub const SSE_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// How many bytes of events already waiting an event stream puts in one chunk at most.
const SSE_BATCH_BYTES: usize = 32 * 1024;
/// How long a busy event stream holds its events back after its previous chunk, for more to
/// join them in one write (see `openagents_rpc::events::SseOptions::hold_for_more`).
pub const SSE_HOLD: Duration = Duration::from_millis(1);
/// How many bytes of events end a busy stream's hold at once.
const SSE_HOLD_BYTES: usize = 16 * 1024;


/// The HTTP routes: `POST /rpc`, `GET /events`, `GET /metrics` (the probes are the server's,
/// on every listener).
pub(crate) fn routes() -> Router<Access> {
    Router::new()
        .route(
            "/rpc",
            post(|State(app): State<Access>, request: Request| {
                let peer = request.extensions().get::<Peer>().copied();
                rpc(app, request, peer)
            }),
        )
        .route("/events", get(events))
        .route("/metrics", get(metrics))
}

/// The probes, `GET /healthz` and `GET /readyz`.
pub(crate) fn probes() -> Router<Access> {
    Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz))
}

/// `POST /rpc` answered without routing (the listener's hot path).
#[derive(Clone, Copy)]
pub(crate) struct DirectRpc;

impl Direct for DirectRpc {
    fn call(self, access: Access, request: Request, peer: Peer) -> impl Future<Output = Response> + Send {
        rpc(access, request, Some(peer))
    }
}

/// `GET /metrics`: every counter in the Prometheus text format, for a credential whose grant
/// includes `metrics`.
async fn metrics(State(app): State<Access>, peer: Option<axum::Extension<Peer>>, headers: HeaderMap) -> Response {
    let caller = match app.authorize(&headers) {
        Ok(c) => c,
        Err(r) => {
            app.audit_unauthorized(peer.as_deref(), "/metrics", headers.contains_key(header::AUTHORIZATION));
            return r;
        }
    };
    if !caller.grant.metrics {
        app.engine().metrics().forbidden();
        tracing::warn!(target: "openagents::audit", event = "forbidden", credential = %caller.name, method = "GET /metrics");
        return reject(ErrorCode::Forbidden, StatusCode::FORBIDDEN, format!("credential `{}` may not read metrics (grant `metrics = true`)", caller.name));
    }
    let mut r = Response::new(Body::from(app.engine().metrics_text()));
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
async fn readyz(State(app): State<Access>) -> Response {
    let ready = app.engine().is_accepting();
    let mut r = Response::new(Body::from(if ready { "ready\n" } else { "shutting down\n" }));
    *r.status_mut() = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// Whether a `Content-Type` is one of [`JSON_CONTENT_TYPES`] (parameters such as `charset`
/// allowed).
fn is_json(value: Option<&HeaderValue>) -> bool {
    value.and_then(|v| v.to_str().ok()).and_then(|v| v.split(';').next()).is_some_and(|m| JSON_CONTENT_TYPES.iter().any(|t| m.trim().eq_ignore_ascii_case(t)))
}

/// The answer (503, `busy`) to a body that found no room in [`MAX_BUFFERED_BODY_BYTES`].
fn no_room() -> Response {
    let message = format!("the runtime holds as many request bodies as it may (MAX_BUFFERED_BODY_BYTES, {MAX_BUFFERED_BODY_BYTES} bytes) and none made room within {BODY_ROOM_WAIT:?}: retry");
    reject(ErrorCode::Busy, StatusCode::SERVICE_UNAVAILABLE, message)
}

/// `POST /rpc`: one JSON-RPC message.
async fn rpc(app: Access, request: Request, peer: Option<Peer>) -> Response {
    let cx = match app.authorize_call(request.headers()) {
        Ok(cx) => cx,
        Err(r) => {
            app.audit_unauthorized(peer.as_ref(), "/rpc", request.headers().contains_key(header::AUTHORIZATION));
            return r;
        }
    };
    if !is_json(request.headers().get(header::CONTENT_TYPE)) {
        return reject(ErrorCode::InvalidRequest, StatusCode::UNSUPPORTED_MEDIA_TYPE, format!("send the request with `Content-Type` one of {}", JSON_CONTENT_TYPES.join(", ")));
    }
    let declared = request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
    // The body takes its room in the listener's budget: all of a declared length before it is
    // read (a declared length over the limit is refused at once, before any of the body is
    // read), else as it arrives; a body that came with its head is taken at once, one still on
    // its way is waited for at most BODY_READ_TIMEOUT.
    let (bytes, _room) = match openagents_rpc::listen::read_body(request.into_body(), declared, SERVER_MAX_LINE_BYTES, app.body_budget(), BODY_READ_TIMEOUT).await {
        Ok(read) => read,
        Err(BodyError::TooLarge) => return reject(ErrorCode::FrameTooLarge, StatusCode::PAYLOAD_TOO_LARGE, format!("the body is larger than SERVER_MAX_LINE_BYTES ({SERVER_MAX_LINE_BYTES} bytes)")),
        Err(BodyError::NoRoom) => return no_room(),
        Err(BodyError::TimedOut) => return reject(ErrorCode::Timeout, StatusCode::REQUEST_TIMEOUT, format!("the body did not arrive within {BODY_READ_TIMEOUT:?}")),
        // The client broke the body off (or sent a bad chunk): nobody reads an answer.
        Err(BodyError::Broken) => return reject(ErrorCode::InvalidRequest, StatusCode::BAD_REQUEST, "the body could not be read".into()),
    };
    let reply = app.server().handle_message(cx, &bytes).await;
    match reply {
        Some(reply) => json_response(200, reply),
        None => {
            let mut r = Response::new(Body::empty());
            *r.status_mut() = StatusCode::NO_CONTENT;
            r
        }
    }
}

async fn events(State(app): State<Access>, peer: Option<axum::Extension<Peer>>, headers: HeaderMap, uri: axum::http::Uri) -> Response {
    let caller = match app.authorize(&headers) {
        Ok(c) => c,
        Err(r) => {
            app.audit_unauthorized(peer.as_deref(), "/events", headers.contains_key(header::AUTHORIZATION));
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
    let sub = app.engine().subscribe(since);
    // The first comment goes out at once, so a buffering proxy forwards the stream's start and
    // the client knows it is connected; `retry:` tells `EventSource` how soon to reconnect.
    let hello = format!(": openagents events\nretry: {}\n\n", SSE_RETRY.as_millis());
    openagents_rpc::events::sse_response(axum::body::Bytes::from(hello), event_stream(sub, app.engine().clone()))
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

/// The events as server-sent events, through openagents-rpc's [`openagents_rpc::events::sse_stream`]:
/// each event's frame is made once and shared by every stream (see
/// [`crate::events::Published::sse_frame`]); a busy stream gathers them for up to [`SSE_HOLD`];
/// a comment (`:`) goes out after [`SSE_KEEP_ALIVE`] without anything else, as a keep-alive; the
/// stream ends after the runtime's final event, or at its shutdown.
fn event_stream(sub: crate::events::Subscription, engine: RpcEngine) -> impl Stream<Item = Result<axum::body::Bytes, Infallible>> {
    let options = openagents_rpc::events::SseOptions { keep_alive: SSE_KEEP_ALIVE, hold: SSE_HOLD, hold_bytes: SSE_HOLD_BYTES, batch_bytes: SSE_BATCH_BYTES, final_wait: Duration::from_millis(200) };
    openagents_rpc::events::sse_stream(sub, crate::listener::EngineStop(engine), options)
}
