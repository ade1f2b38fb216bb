//! The HTTP transports: `POST /rpc` (one message per body, its reply the response body; 204 when
//! there is none) and its CORS preflight `OPTIONS /rpc`, `GET /rpc` upgraded to a WebSocket (one
//! message per text or binary frame, server notifications pushed as frames), `GET /health`, and
//! `GET /metrics` when the server has metrics.
//!
//! Transport refusals are HTTP codes with a JSON-RPC error body: 401 (no or refused bearer
//! token, with `WWW-Authenticate: Bearer`), 403 (a browser page of an origin not allowed, on
//! every route, checked first), 413 (a body over the frame bound), 415 (not JSON), 503 (shutting
//! down). What a message means is decided by the core, answered with 200.

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;

use crate::message::error_reply;
use crate::metrics::{ConnectionGauge, Transport};
use crate::origin::{CORS_MAX_AGE, Caller};
use crate::connection::Connection;
use crate::listen::bearer_token;
use crate::{Context, Identity, Peer, RpcError, RpcServer, codes};

/// The content types `POST /rpc` takes (with any parameters, such as `charset=utf-8`).
pub const JSON_CONTENT_TYPES: &[&str] = &["application/json", "application/json-rpc", "application/jsonrequest"];

/// WebSocket close codes the server sends.
mod close {
    /// The server is shutting down.
    pub const GOING_AWAY: u16 = 1001;
    /// A text message that is not UTF-8.
    pub const INVALID_PAYLOAD: u16 = 1007;
    /// A message over the frame bound.
    pub const TOO_BIG: u16 = 1009;
    /// The connection gave its place to a newcomer (it had not authenticated and was idle).
    pub const TRY_AGAIN_LATER: u16 = 1013;
}

pub(crate) fn router(server: RpcServer) -> Router {
    let mut router = Router::new().route("/rpc", post(rpc_post).get(rpc_ws).options(preflight)).route("/health", get(health));
    if server.metrics.is_some() {
        router = router.route("/metrics", get(metrics));
    }
    if server.events.is_some() {
        router = router.route("/events", get(events));
    }
    router.with_state(server)
}

/// Accepts connections until the shutdown signal ([`crate::listen::serve_connections`], with the
/// server's [`crate::listen::ConnectionLimits`]): a header block over the bound is 431, `POST /rpc`
/// goes straight to its handler (no route match, no extractors: the hot path), every other
/// request through [`router`]. Then lets the connections finish (idle ones close, a request in
/// flight is answered) and waits for the WebSockets to end.
pub(crate) async fn serve(server: RpcServer, listener: tokio::net::TcpListener) -> std::io::Result<()> {
    // What every request of every connection shares: one reference count taken per request.
    let shared = std::sync::Arc::new((server.clone(), hyper_util::service::TowerToHyperService::new(router(server.clone()))));
    let limits = server.listen.0.clone();
    crate::listen::serve_connections(listener, &limits, server.shutdown.clone(), |accepted| {
        let shared = std::sync::Arc::clone(&shared);
        // Counted open while the connection (or a WebSocket it became, holding the slot) is.
        let held = std::sync::Arc::new(Held { slot: std::sync::Arc::clone(&accepted.slot), _gauge: server.metrics.as_ref().map(|m| m.connection(Transport::Http)) });
        move |mut request: hyper::Request<crate::listen::Lingering>| {
            let (shared, held) = (std::sync::Arc::clone(&shared), std::sync::Arc::clone(&held));
            async move {
                let (server, routes) = &*shared;
                // A connection that has sent an authenticated request, on any route, keeps its
                // place (checked until it has; without an authenticator nobody has).
                // The identity found here is the one `POST /rpc` would find again: handed on.
                let known = if held.slot.standing.trusted() { None } else { authenticated(server, request.headers()) };
                if known.is_some() {
                    held.slot.trust();
                }
                if crate::listen::header_block_len(&request) > server.listen.0.max_header_bytes {
                    let e = RpcError::new(codes::FRAME_TOO_LARGE, format!("Frame too large: the header block is longer than {} bytes", server.listen.0.max_header_bytes));
                    return Ok(refuse(server, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, &e).map(ServeBody::Routed));
                }
                if request.method() == axum::http::Method::POST && request.uri().path() == "/rpc" {
                    let (parts, body) = request.into_parts();
                    return Ok(post_rpc_direct(server, &parts.headers, body, known).await);
                }
                // Only a routed request can become a WebSocket, which keeps the slot.
                request.extensions_mut().insert(held);
                hyper::service::Service::call(routes, request.map(Body::new)).await.map(|r| r.map(ServeBody::Routed))
            }
        }
    })
    .await;
    // Upgraded connections outlive their HTTP request: wait for each WebSocket to finish its
    // calls and close.
    let mut live = server.sockets.subscribe();
    let _ = live.wait_for(|n| *n == 0).await;
    Ok(())
}

/// A connection's slot and its count in the metrics, held by the connection and by a WebSocket
/// it is upgraded to.
struct Held {
    slot: std::sync::Arc<crate::listen::Slot>,
    _gauge: Option<ConnectionGauge>,
}

/// A JSON response: its one header set once (no `application/octet-stream` first, as a
/// `Vec<u8>`'s `into_response` gives, to replace).
fn json(status: StatusCode, body: Vec<u8>) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// A transport refusal: `status` with the JSON-RPC error `e`, counted by status.
fn refuse(server: &RpcServer, status: StatusCode, e: &RpcError) -> Response {
    if let Some(m) = &server.metrics {
        m.refused(status.as_u16());
    }
    let mut r = json(status, error_reply(&server.core_error(e.clone())));
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    r
}

/// Who the request's `Origin` says is calling (see [`crate::origin::caller`]), or the 403 to
/// answer a page of an origin not allowed.
#[allow(clippy::result_large_err)]
fn check_origin(server: &RpcServer, headers: &HeaderMap) -> Result<Caller, Response> {
    match crate::origin::caller(&server.origins, headers) {
        Caller::Foreign => {
            let origin = String::from_utf8_lossy(headers.get(header::ORIGIN).map_or(&b""[..], HeaderValue::as_bytes)).into_owned();
            let e = RpcError::new(codes::FORBIDDEN, format!("Forbidden: a web page of the origin `{}` may not call this server; its operator lists allowed origins with `RpcServer::allow_origins`", crate::bounded(&origin, 128)));
            Err(refuse(server, StatusCode::FORBIDDEN, &e))
        }
        caller => Ok(caller),
    }
}

/// `OPTIONS /rpc`, a CORS preflight: 204 with the allowed method and headers for a listed
/// origin; for any other, no CORS headers at all (the browser then makes no request).
async fn preflight(State(server): State<RpcServer>, headers: HeaderMap) -> Response {
    let mut r = StatusCode::NO_CONTENT.into_response();
    let h = r.headers_mut();
    if let Caller::Allowed(origin) = crate::origin::caller(&server.origins, &headers) {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("POST"));
        h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static("authorization, content-type"));
        h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from(CORS_MAX_AGE.as_secs()));
    }
    h.insert(header::VARY, HeaderValue::from_static("Origin"));
    r
}

/// `response` readable by a listed origin's page: `Access-Control-Allow-Origin` echoing it, and
/// `Vary: Origin`.
fn with_cors<B>(mut response: axum::http::Response<B>, caller: Caller) -> axum::http::Response<B> {
    if let Caller::Allowed(origin) = caller {
        let h = response.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.append(header::VARY, HeaderValue::from_static("Origin"));
    }
    response
}

/// `GET /metrics`: the server's [`crate::Metrics`] in the Prometheus text format 0.0.4; with an
/// authenticator, for a bearer token it accepts.
async fn metrics(State(server): State<RpcServer>, headers: HeaderMap) -> Response {
    if let Err(r) = check_origin(&server, &headers) {
        return r;
    }
    if let Err(r) = authenticate(&server, &headers) {
        return r;
    }
    let text = server.metrics.as_ref().map(crate::Metrics::render).unwrap_or_default();
    let mut r = (StatusCode::OK, text).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// `GET /events`: the server's [`crate::events::EventLog`] as server-sent events, from the next
/// new event or resumed after `Last-Event-ID` (else `?since=`); 400 for a resume point that is
/// no sequence number.
async fn events(State(server): State<RpcServer>, headers: HeaderMap, uri: axum::http::Uri) -> Response {
    let caller = match check_origin(&server, &headers) {
        Ok(c) => c,
        Err(r) => return r,
    };
    if let Err(r) = authenticate(&server, &headers) {
        return r;
    }
    let Some(log) = &server.events else { return StatusCode::NOT_FOUND.into_response() };
    let since = match crate::events::resume_point(headers.get("last-event-id").map(HeaderValue::as_bytes), uri.query()) {
        Ok(since) => since,
        Err(message) => return refuse(&server, StatusCode::BAD_REQUEST, &RpcError::invalid_request(message)),
    };
    if server.shutdown.is_triggered() {
        return shutting_down(&server);
    }
    let feed = log.subscribe(since);
    let stream = crate::events::sse_stream(feed, server.shutdown.clone(), crate::events::SseOptions::default());
    with_cors(crate::events::sse_response(bytes::Bytes::from_static(b": events\nretry: 2000\n\n"), stream), caller)
}

/// `GET /health`: 200 `{"status":"ok"}` while serving, 503 `{"status":"shutting_down"}` once
/// the shutdown signal is given. No credential needed, nothing else said.
async fn health(State(server): State<RpcServer>, headers: HeaderMap) -> Response {
    if let Err(r) = check_origin(&server, &headers) {
        return r;
    }
    if server.shutdown.is_triggered() {
        json(StatusCode::SERVICE_UNAVAILABLE, br#"{"status":"shutting_down"}"#.to_vec())
    } else {
        json(StatusCode::OK, br#"{"status":"ok"}"#.to_vec())
    }
}

/// The caller's identity from `Authorization: Bearer <token>` (the scheme in any letter case),
/// or the 401 to answer. Without an authenticator every caller is `anonymous`.
#[allow(clippy::result_large_err)]
fn authenticate(server: &RpcServer, headers: &HeaderMap) -> Result<Identity, Response> {
    let Some(auth) = &server.auth else { return Ok(anonymous()) };
    let unauthorized = |m: &str| refuse(server, StatusCode::UNAUTHORIZED, &RpcError::new(codes::UNAUTHORIZED, format!("Unauthorized: {m}")));
    let Some(token) = bearer_token(headers) else {
        return Err(unauthorized("send `Authorization: Bearer <token>`"));
    };
    auth.authenticate(token).ok_or_else(|| unauthorized("the bearer token is not one this server accepts"))
}

/// The identity of a bearer token in `headers` the server's authenticator accepts (`None`
/// without an authenticator); nothing refused, nothing counted.
fn authenticated(server: &RpcServer, headers: &HeaderMap) -> Option<Identity> {
    server.auth.as_ref().and_then(|auth| bearer_token(headers).and_then(|t| auth.authenticate(t)))
}

/// Every caller of a server without an authenticator: one name, shared, not one a request.
fn anonymous() -> Identity {
    static ANONYMOUS: std::sync::OnceLock<Identity> = std::sync::OnceLock::new();
    ANONYMOUS.get_or_init(|| Identity::new("anonymous")).clone()
}

fn shutting_down(server: &RpcServer) -> Response {
    refuse(server, StatusCode::SERVICE_UNAVAILABLE, &RpcError::new(codes::SHUTTING_DOWN, "Shutting down: the server takes no new calls"))
}

async fn rpc_post(State(server): State<RpcServer>, headers: HeaderMap, body: Body) -> Response {
    post_rpc(&server, &headers, body).await
}

/// `POST /rpc` through the router (`body` axum's).
async fn post_rpc<B>(server: &RpcServer, headers: &HeaderMap, body: B) -> Response
where
    B: hyper::body::Body<Data = bytes::Bytes>,
{
    let caller = match check_origin(server, headers) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let response = match post_message(server, headers, body, None).await {
        Ok(Some(reply)) => json(StatusCode::OK, reply),
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Err(refusal) => refusal,
    };
    with_cors(response, caller)
}

/// `POST /rpc` on [`serve`]'s direct path: as [`post_rpc`], the reply sent as the core wrote it
/// (no `Bytes` made of it, no boxed body); `known`, the caller [`serve`] already authenticated.
async fn post_rpc_direct(server: &RpcServer, headers: &HeaderMap, body: crate::listen::Lingering, known: Option<Identity>) -> axum::http::Response<ServeBody> {
    let caller = match check_origin(server, headers) {
        Ok(c) => c,
        Err(r) => return r.map(ServeBody::Routed),
    };
    let response = match post_message(server, headers, body, known).await {
        Ok(Some(reply)) => {
            let mut r = axum::http::Response::new(ServeBody::Json(Some(reply)));
            r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            r
        }
        Ok(None) => {
            let mut r = axum::http::Response::new(ServeBody::Json(None));
            *r.status_mut() = StatusCode::NO_CONTENT;
            r
        }
        Err(refusal) => refusal.map(ServeBody::Routed),
    };
    with_cors(response, caller)
}

/// The body of [`serve`]'s responses: a JSON reply as the core wrote it (`None`: none), or the
/// body of a response of the router.
enum ServeBody {
    Json(Option<Vec<u8>>),
    Routed(Body),
}

/// A chunk of a [`ServeBody`].
enum Chunk {
    Json(std::io::Cursor<Vec<u8>>),
    Routed(bytes::Bytes),
}

impl bytes::Buf for Chunk {
    fn remaining(&self) -> usize {
        match self {
            Chunk::Json(c) => c.remaining(),
            Chunk::Routed(b) => b.remaining(),
        }
    }
    fn chunk(&self) -> &[u8] {
        match self {
            Chunk::Json(c) => c.chunk(),
            Chunk::Routed(b) => b.chunk(),
        }
    }
    fn advance(&mut self, n: usize) {
        match self {
            Chunk::Json(c) => c.advance(n),
            Chunk::Routed(b) => b.advance(n),
        }
    }
}

impl hyper::body::Body for ServeBody {
    type Data = Chunk;
    type Error = axum::Error;

    fn poll_frame(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Result<hyper::body::Frame<Chunk>, axum::Error>>> {
        match self.get_mut() {
            ServeBody::Json(reply) => std::task::Poll::Ready(reply.take().map(|r| Ok(hyper::body::Frame::data(Chunk::Json(std::io::Cursor::new(r)))))),
            ServeBody::Routed(body) => std::pin::Pin::new(body).poll_frame(cx).map(|f| f.map(|f| f.map(|f| f.map_data(Chunk::Routed)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ServeBody::Json(reply) => reply.is_none(),
            ServeBody::Routed(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            ServeBody::Json(reply) => hyper::body::SizeHint::with_exact(reply.as_ref().map_or(0, |r| r.len() as u64)),
            ServeBody::Routed(body) => body.size_hint(),
        }
    }
}

/// `POST /rpc` past the origin check: the core's reply (`None`: nothing to send, 204), or the
/// transport's refusal.
#[allow(clippy::result_large_err)]
async fn post_message<B>(server: &RpcServer, headers: &HeaderMap, body: B, known: Option<Identity>) -> Result<Option<Vec<u8>>, Response>
where
    B: hyper::body::Body<Data = bytes::Bytes>,
{
    let identity = match known {
        Some(i) => i,
        None => authenticate(server, headers)?,
    };
    let content_type = headers.get(header::CONTENT_TYPE);
    // `application/json` as most clients write it is taken at once; anything else is parsed.
    if content_type.is_none_or(|v| v.as_bytes() != b"application/json") {
        let content_type = content_type.and_then(|v| v.to_str().ok()).unwrap_or_default();
        let essence = content_type.split(';').next().unwrap_or_default().trim();
        if !JSON_CONTENT_TYPES.iter().any(|t| essence.eq_ignore_ascii_case(t)) {
            let e = RpcError::invalid_request(format_args!("send the message with `Content-Type: application/json` (got `{}`)", crate::bounded(content_type, 64)));
            return Err(refuse(server, StatusCode::UNSUPPORTED_MEDIA_TYPE, &e));
        }
    }
    let max = server.limits.max_frame_bytes;
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
    let (limits, budget) = &*server.listen;
    let (bytes, _room) = match crate::listen::read_body(body, declared, max, budget, limits.body_read_timeout).await {
        Ok(read) => read,
        Err(e) => {
            use crate::listen::BodyError;
            let (status, error) = match e {
                BodyError::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, RpcError::new(codes::FRAME_TOO_LARGE, format!("Frame too large: the body is longer than {max} bytes"))),
                BodyError::NoRoom => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    RpcError::new(codes::BUSY, format!("Busy: the server holds as many request bodies as it may ({} bytes) and none made room within {:?}: retry", limits.max_buffered_body_bytes, limits.body_room_wait)),
                ),
                BodyError::TimedOut => (StatusCode::REQUEST_TIMEOUT, RpcError::new(codes::TIMEOUT, format!("Timeout: the body did not arrive within {:?}", limits.body_read_timeout))),
                BodyError::Broken => (StatusCode::BAD_REQUEST, RpcError::invalid_request("the body could not be read")),
            };
            return Err(refuse(server, status, &error));
        }
    };
    if server.shutdown.is_triggered() {
        return Err(shutting_down(server));
    }
    let cx = Context::new(identity, Peer::detached());
    Ok(server.handle_message(&cx, &bytes).await)
}

async fn rpc_ws(State(server): State<RpcServer>, held: Option<axum::Extension<std::sync::Arc<Held>>>, headers: HeaderMap, ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>) -> Response {
    // A browser always sends `Origin` with a WebSocket upgrade, and no CORS guards it: the check
    // here is what keeps a page elsewhere from opening the socket with the user's cookies. It
    // comes first, before a request that is no upgrade is refused as such.
    if let Err(r) = check_origin(&server, &headers) {
        return r;
    }
    let ws = match ws {
        Ok(ws) => ws,
        Err(rejection) => return rejection.into_response(),
    };
    let identity = match authenticate(&server, &headers) {
        Ok(i) => i,
        Err(r) => return r,
    };
    if server.shutdown.is_triggered() {
        return shutting_down(&server);
    }
    // The socket holds the connection's slot while open (an authenticated one kept its place
    // when its upgrade request was read, in `serve`).
    let held = held.map(|axum::Extension(h)| h);
    let max = server.limits.max_frame_bytes;
    let live = LiveSocket::new(&server);
    ws.max_message_size(max).max_frame_size(max).on_upgrade(move |socket| async move {
        let gauge = server.metrics.as_ref().map(|m| m.connection(Transport::WebSocket));
        ws_connection(server, identity, socket, held.as_ref().map(|h| &*h.slot.standing)).await;
        drop(gauge);
        drop(live);
        drop(held);
    })
}

/// One WebSocket counted as live until dropped, so a graceful shutdown waits for it.
struct LiveSocket(tokio::sync::watch::Sender<usize>);

impl LiveSocket {
    fn new(server: &RpcServer) -> LiveSocket {
        let tx = (*server.sockets).clone();
        tx.send_modify(|n| *n += 1);
        LiveSocket(tx)
    }
}

impl Drop for LiveSocket {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// One WebSocket until it closes, the server shuts down, or (`standing` given, the connection's
/// place in [`serve`]'s slots) a newcomer takes its place: closed with 1013, try again later.
async fn ws_connection(server: RpcServer, identity: Identity, socket: WebSocket, standing: Option<&crate::listen::Standing>) {
    let (sink, mut stream) = socket.split();
    let (mut conn, rx) = Connection::new(&server, identity);
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let writer = tokio::spawn(write_frames(rx, done_rx, sink));
    let shutdown = server.shutdown.triggered();
    tokio::pin!(shutdown);
    let evicted = async {
        match standing {
            Some(s) => s.until_evicted().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(evicted);
    let close: Option<(u16, &'static str)> = loop {
        let msg = tokio::select! {
            () = &mut shutdown => break Some((close::GOING_AWAY, "the server is shutting down")),
            () = &mut evicted => break Some((close::TRY_AGAIN_LATER, "the server made room for another connection: this one had not authenticated and was idle")),
            m = stream.next() => m,
        };
        match msg {
            None | Some(Ok(Message::Close(_))) => break None,
            Some(Ok(Message::Text(t))) => conn.take(bytes::Bytes::from(t)).await,
            Some(Ok(Message::Binary(b))) => conn.take(b).await,
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Err(e)) => {
                use tokio_tungstenite::tungstenite::Error as WsError;
                let cause = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<WsError>());
                break match cause {
                    Some(WsError::Capacity(_)) => Some((close::TOO_BIG, "a message is longer than the server's frame bound")),
                    Some(WsError::Utf8(_)) => Some((close::INVALID_PAYLOAD, "a text message is not UTF-8")),
                    _ => None,
                };
            }
        }
    };
    conn.finish().await;
    let _ = done_tx.send(close);
    let _ = writer.await;
}

type Sink = futures_util::stream::SplitSink<WebSocket, Message>;

async fn write_frames(mut rx: mpsc::Receiver<Vec<u8>>, mut done: tokio::sync::oneshot::Receiver<Option<(u16, &'static str)>>, mut sink: Sink) {
    let text = |m: Vec<u8>| Message::Text(String::from_utf8(m).unwrap_or_default().into());
    loop {
        tokio::select! {
            biased;
            m = rx.recv() => match m {
                Some(m) => if sink.send(text(m)).await.is_err() { return },
                None => {
                    let close = (&mut done).await;
                    let frame = close.ok().flatten().map(|(code, reason)| CloseFrame { code, reason: reason.into() });
                    let _ = sink.send(Message::Close(frame)).await;
                    let _ = sink.close().await;
                    return;
                }
            },
            close = &mut done => {
                while let Ok(m) = rx.try_recv() {
                    if sink.send(text(m)).await.is_err() {
                        return;
                    }
                }
                let frame = close.ok().flatten().map(|(code, reason)| CloseFrame { code, reason: reason.into() });
                let _ = sink.send(Message::Close(frame)).await;
                let _ = sink.close().await;
                return;
            }
        }
    }
}
