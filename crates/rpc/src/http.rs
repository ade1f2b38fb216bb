//! The HTTP transports: `POST /rpc` (one message per body, its reply the response body; 204 when
//! there is none), `GET /rpc` upgraded to a WebSocket (one message per text or binary frame,
//! server notifications pushed as frames), and `GET /health`.
//!
//! Transport refusals are HTTP codes with a JSON-RPC error body: 401 (no or refused bearer
//! token, with `WWW-Authenticate: Bearer`), 413 (a body over the frame bound), 415 (not JSON),
//! 503 (shutting down). What a message means is decided by the core, answered with 200.

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;

use crate::message::error_reply;
use crate::stdio::Connection;
use crate::{Context, Identity, Peer, RpcError, RpcServer, codes};

/// The content types `POST /rpc` takes (with any parameters, such as `charset=utf-8`).
pub const JSON_CONTENT_TYPES: &[&str] = &["application/json", "application/json-rpc", "application/jsonrequest"];

/// WebSocket close codes the server sends.
mod close {
    /// The server is shutting down.
    pub const GOING_AWAY: u16 = 1001;
    /// A message over the frame bound.
    pub const TOO_BIG: u16 = 1009;
}

pub(crate) fn router(server: RpcServer) -> Router {
    Router::new().route("/rpc", post(rpc_post).get(rpc_ws)).route("/health", get(health)).with_state(server)
}

pub(crate) async fn serve(server: RpcServer, listener: tokio::net::TcpListener) -> std::io::Result<()> {
    let shutdown = server.shutdown.triggered();
    axum::serve(listener, router(server.clone())).with_graceful_shutdown(shutdown).await?;
    // Upgraded connections outlive their HTTP request: wait for each WebSocket to finish its
    // calls and close.
    let mut live = server.sockets.subscribe();
    let _ = live.wait_for(|n| *n == 0).await;
    Ok(())
}

fn json(status: StatusCode, body: Vec<u8>) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn refuse(status: StatusCode, e: &RpcError) -> Response {
    let mut r = json(status, error_reply(e));
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    r
}

/// `GET /health`: 200 `{"status":"ok"}` while serving, 503 `{"status":"shutting_down"}` once
/// the shutdown signal is given. No credential needed, nothing else said.
async fn health(State(server): State<RpcServer>) -> Response {
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
    let Some(auth) = &server.auth else { return Ok(Identity::new("anonymous")) };
    let unauthorized = |m: &str| refuse(StatusCode::UNAUTHORIZED, &RpcError::new(codes::UNAUTHORIZED, format!("Unauthorized: {m}")));
    let Some(value) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return Err(unauthorized("send `Authorization: Bearer <token>`"));
    };
    let token = match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => token.trim(),
        _ => return Err(unauthorized("send `Authorization: Bearer <token>`")),
    };
    auth.authenticate(token).ok_or_else(|| unauthorized("the bearer token is not one this server accepts"))
}

fn shutting_down() -> Response {
    refuse(StatusCode::SERVICE_UNAVAILABLE, &RpcError::new(codes::SHUTTING_DOWN, "Shutting down: the server takes no new calls"))
}

async fn rpc_post(State(server): State<RpcServer>, headers: HeaderMap, body: Body) -> Response {
    let identity = match authenticate(&server, &headers) {
        Ok(i) => i,
        Err(r) => return r,
    };
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    if !JSON_CONTENT_TYPES.iter().any(|t| essence.eq_ignore_ascii_case(t)) {
        let e = RpcError::invalid_request(format_args!("send the message with `Content-Type: application/json` (got `{}`)", crate::bounded(content_type, 64)));
        return refuse(StatusCode::UNSUPPORTED_MEDIA_TYPE, &e);
    }
    let max = server.limits.max_frame_bytes;
    let too_large = || refuse(StatusCode::PAYLOAD_TOO_LARGE, &RpcError::new(codes::FRAME_TOO_LARGE, format!("Frame too large: the body is longer than {max} bytes")));
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return too_large();
    }
    let bytes = match axum::body::to_bytes(body, max).await {
        Ok(b) => b,
        Err(e) => {
            let length_limit = std::error::Error::source(&e).is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            if length_limit {
                return too_large();
            }
            return refuse(StatusCode::BAD_REQUEST, &RpcError::invalid_request(format_args!("the body could not be read: {e}")));
        }
    };
    if server.shutdown.is_triggered() {
        return shutting_down();
    }
    let cx = Context::new(identity, Peer::detached());
    match server.handle_message(&cx, &bytes).await {
        Some(reply) => json(StatusCode::OK, reply),
        None => StatusCode::NO_CONTENT.into_response(),
    }
}

async fn rpc_ws(State(server): State<RpcServer>, headers: HeaderMap, ws: WebSocketUpgrade) -> Response {
    let identity = match authenticate(&server, &headers) {
        Ok(i) => i,
        Err(r) => return r,
    };
    if server.shutdown.is_triggered() {
        return shutting_down();
    }
    let max = server.limits.max_frame_bytes;
    let live = LiveSocket::new(&server);
    ws.max_message_size(max).max_frame_size(max).on_upgrade(move |socket| async move {
        ws_connection(server, identity, socket).await;
        drop(live);
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

async fn ws_connection(server: RpcServer, identity: Identity, socket: WebSocket) {
    let (sink, mut stream) = socket.split();
    let (mut conn, rx) = Connection::new(&server, identity);
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let writer = tokio::spawn(write_frames(rx, done_rx, sink));
    let shutdown = server.shutdown.triggered();
    tokio::pin!(shutdown);
    let close: Option<(u16, &'static str)> = loop {
        let msg = tokio::select! {
            () = &mut shutdown => break Some((close::GOING_AWAY, "the server is shutting down")),
            m = stream.next() => m,
        };
        match msg {
            None | Some(Ok(Message::Close(_))) => break None,
            Some(Ok(Message::Text(t))) => conn.take(t.as_bytes().to_vec()).await,
            Some(Ok(Message::Binary(b))) => conn.take(b.to_vec()).await,
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Err(e)) => {
                let too_big = std::error::Error::source(&e)
                    .and_then(|s| s.downcast_ref::<tokio_tungstenite::tungstenite::Error>())
                    .is_some_and(|t| matches!(t, tokio_tungstenite::tungstenite::Error::Capacity(_)));
                break too_big.then_some((close::TOO_BIG, "a message is longer than the server's frame bound"));
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
