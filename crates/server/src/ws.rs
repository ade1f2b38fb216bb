//! The frontend WebSocket, `/frontend/v2`: JSON-RPC 2.0 in both directions, one message per text
//! frame. Client requests go through the same engine dispatch as stdio and HTTP; events arrive
//! as `frontend.v2.event` notifications after `subscribe`; the agent's approval requests arrive
//! as `frontend.v2.approval` requests for frontends allowed to answer them (the bridge's
//! audience on the core, [`openagents_rpc::audience`]: one that connects while a request waits
//! is asked too, and its answer, a JSON-RPC response, is taken by the core's connection).
//!
//! One connection keeps the order stdio keeps: a request answered at once (`subscribe`,
//! `status`, …) is answered before the next message is read, so a `subscribe` has taken effect
//! before whatever follows it runs; a request that waits (`submit`, `shutdown`) runs on a task of
//! its own, and its answer is written after every event published before it (a turn's
//! `turn_completed` before its `submit`'s answer, on a subscribed connection), as a `subscribe`'s
//! answer is written after what it replays.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use openagents_protocol::SERVER_MAX_LINE_BYTES;
use openagents_rpc::{Connection, Identity};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::auth::Caller;
use crate::connection::EventStream;
use crate::engine::RpcEngine;
use crate::jsonrpc::Conn;
use crate::listener::{Access, ConnectionSlot, reject, stamp_schema};
use crate::projection;

/// The only WebSocket path.
pub const FRONTEND_PATH: &str = "/frontend/v2";
/// The subprotocol the server answers with.
pub const SUBPROTOCOL: &str = "openagents.v2";
/// The subprotocol prefix a browser uses to send its token (browsers cannot set headers).
pub const BEARER_PROTOCOL_PREFIX: &str = "openagents.bearer.";
/// Messages waiting for a slow frontend (the core connection's outbound queue). When it stays
/// full the frontend first gets `lagged`, then is disconnected.
pub const WS_OUTBOUND_QUEUE: usize = openagents_rpc::OUTBOUND_QUEUE;
/// How long a frontend's queue may stay full before it is disconnected (close code 1013), unless
/// [`WsOptions::stuck_timeout`] says otherwise.
pub const WS_STUCK_TIMEOUT: Duration = Duration::from_secs(5);

/// How the WebSocket treats its frontends.
#[derive(Debug, Clone, Copy)]
pub struct WsOptions {
    /// How long a frontend's outbound queue (events and replies) may stay full before the
    /// frontend is disconnected (close 1013).
    pub stuck_timeout: Duration,
}

impl Default for WsOptions {
    fn default() -> Self {
        WsOptions { stuck_timeout: WS_STUCK_TIMEOUT }
    }
}
/// How often the server pings.
pub const WS_PING_INTERVAL: Duration = Duration::from_secs(20);
/// How long a connection may stay silent (no message, no pong) before it is closed.
pub const WS_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Close codes used by the server.
pub mod close {
    /// The runtime is shutting down.
    pub const GOING_AWAY: u16 = 1001;
    /// A binary frame: only JSON text frames are accepted.
    pub const UNSUPPORTED_DATA: u16 = 1003;
    /// No message and no pong within the idle timeout.
    pub const POLICY: u16 = 1008;
    /// A message larger than `SERVER_MAX_LINE_BYTES`.
    pub const TOO_BIG: u16 = 1009;
    /// The frontend did not keep up with its messages.
    pub const TRY_AGAIN_LATER: u16 = 1013;
}

/// The `/frontend/v2` route.
pub(crate) fn routes(options: WsOptions) -> Router<Access> {
    Router::new().route(FRONTEND_PATH, get(move |State(app): State<Access>, request: Request| upgrade(app, request, options)))
}

fn offered_protocols(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers.get_all("sec-websocket-protocol").into_iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).map(str::trim)
}

fn bearer_from_protocols(headers: &HeaderMap) -> Option<String> {
    offered_protocols(headers).find_map(|p| p.strip_prefix(BEARER_PROTOCOL_PREFIX).map(str::to_owned))
}

async fn upgrade(app: Access, request: Request, options: WsOptions) -> Response {
    // Authenticate before the upgrade completes: the Authorization header, or the bearer
    // subprotocol. Never a token in the URL.
    let headers = request.headers().clone();
    // A browser always sends `Origin`; the listener has refused a page from an origin the
    // operator did not allow (and not the runtime's own) before any route. A `Host` the runtime
    // does not answer to (a DNS rebinding page's own name) is refused here, before anything else.
    if let Err(refusal) = app.check_host(&request) {
        return stamp_schema(refusal);
    }
    // Offering only the bearer subprotocol would upgrade without selecting one, which browsers
    // reject with an opaque 1006: say what to offer instead.
    if bearer_from_protocols(&headers).is_some() && !offered_protocols(&headers).any(|p| p == SUBPROTOCOL) {
        let message = "offer the subprotocol `openagents.v2` alongside `openagents.bearer.<token>`";
        return stamp_schema(reject(openagents_protocol::ErrorCode::InvalidRequest, StatusCode::BAD_REQUEST, message.into()));
    }
    let caller = match app.authorize(&headers) {
        Ok(c) => c.clone(),
        Err(_) => match bearer_from_protocols(&headers).and_then(|t| app.credential(&t).cloned()) {
            Some(c) => c,
            None => {
                let peer = request.extensions().get::<crate::listener::Peer>().copied();
                app.audit_unauthorized(peer.as_ref(), FRONTEND_PATH, headers.contains_key(axum::http::header::AUTHORIZATION) || bearer_from_protocols(&headers).is_some());
                let message = "send `Authorization: Bearer <token>`, or the subprotocol `openagents.bearer.<token>` beside `openagents.v2`";
                return reject(openagents_protocol::ErrorCode::Unauthorized, StatusCode::UNAUTHORIZED, message.into());
            }
        },
    };
    let (mut parts, _) = request.into_parts();
    let ws = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(ws) => ws,
        Err(e) => return reject(openagents_protocol::ErrorCode::InvalidRequest, StatusCode::BAD_REQUEST, format!("not a WebSocket upgrade: {e}")),
    };
    let engine = app.engine().clone();
    let server = Arc::clone(app.server());
    // The socket counts against the listener's connection limit for as long as it is open, and
    // keeps its place (it has authenticated, perhaps by the bearer subprotocol).
    let slot = parts.extensions.get::<ConnectionSlot>().cloned();
    if let Some(slot) = &slot {
        slot.trust();
    }
    ws.protocols([SUBPROTOCOL])
        .max_message_size(SERVER_MAX_LINE_BYTES)
        .max_frame_size(SERVER_MAX_LINE_BYTES)
        .on_upgrade(move |socket| async move {
            let _slot = slot;
            connection(socket, engine, server, caller, options).await;
        })
}

fn close_message(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame { code, reason: Utf8Bytes::from(reason) }))
}

/// The reason of the close (1013) for a frontend that takes nothing for the stuck timeout.
const STUCK_REASON: &str = "too slow: the outbound queue stayed full; reconnect and subscribe with `since`";

async fn connection(socket: WebSocket, engine: RpcEngine, server: Arc<openagents_rpc::RpcServer>, caller: Caller, options: WsOptions) {
    let (mut sink, mut stream) = socket.split();
    let patience = options.stuck_timeout;
    // A frontend that takes nothing for the stuck timeout (a reply or an event that cannot be
    // queued) is disconnected with 1013, never waited for.
    let stuck = CancellationToken::new();
    let (conn, mut rx) = Connection::new(&server, Identity::new(caller.name.as_str()));
    let conn = conn.patience(patience, {
        let stuck = stuck.clone();
        move || stuck.cancel()
    });
    let tx = conn.outbound();
    let (control_tx, mut control_rx) = mpsc::channel::<Message>(4);
    let text = |bytes: Vec<u8>| Message::Text(Utf8Bytes::from(String::from_utf8(bytes).unwrap_or_default()));
    let writer = tokio::spawn(async move {
        'write: loop {
            let msg = tokio::select! {
                biased;
                c = control_rx.recv() => match c { Some(m) => m, None => break },
                m = rx.recv() => match m {
                    Some(bytes) => text(bytes),
                    None => break,
                },
            };
            let closing = matches!(msg, Message::Close(_));
            // A close frame follows what is already queued (the final event, responses), except
            // for a frontend too slow to take it.
            if matches!(&msg, Message::Close(Some(f)) if f.code != close::TRY_AGAIN_LATER) {
                while let Ok(bytes) = rx.try_recv() {
                    if sink.send(text(bytes)).await.is_err() {
                        break 'write;
                    }
                }
            }
            if sink.send(msg).await.is_err() || closing {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let events = EventStream::new(&engine, tx.clone(), projection::frontend_notification_of, Some((patience, stuck.clone())));
    // The bridge's approval requests reach this frontend when it may answer them, and its
    // answers go back through the connection (the core takes them, before any bound).
    let bridged = engine.bridge().join(&caller, conn.peer());
    let mut conn = conn.with_data(Conn::streaming(caller, &events));
    let mut ping = tokio::time::interval(WS_PING_INTERVAL);
    ping.tick().await;
    let mut last_heard = Instant::now();
    let mut going_away = false;
    let close = loop {
        // At most SERVER_MAX_IN_FLIGHT requests run at once; past it the socket is not read until
        // one ends (backpressure), so a client that floods without reading holds bounded work.
        tokio::select! {
            () = engine.wait_for_shutdown() => {}
            () = stuck.cancelled() => {}
            () = conn.room() => {}
        }
        let msg = tokio::select! {
            () = engine.wait_for_shutdown() => {
                going_away = true;
                break close_message(close::GOING_AWAY, "the runtime is shutting down");
            }
            () = stuck.cancelled() => break close_message(close::TRY_AGAIN_LATER, STUCK_REASON),
            _ = ping.tick() => {
                if last_heard.elapsed() > WS_IDLE_TIMEOUT {
                    break close_message(close::POLICY, "idle: no message or pong within the idle timeout");
                }
                let _ = control_tx.try_send(Message::Ping(Default::default()));
                continue;
            }
            m = stream.next() => m,
        };
        let Some(msg) = msg else { break close_message(1000, "") };
        let msg = match msg {
            Ok(m) => m,
            Err(e) => {
                let text = e.to_string();
                if text.contains("too long") || text.contains("too big") || text.contains("Space limit") || text.to_ascii_lowercase().contains("size") {
                    break close_message(close::TOO_BIG, "message larger than SERVER_MAX_LINE_BYTES");
                }
                break close_message(1002, "protocol error");
            }
        };
        last_heard = Instant::now();
        match msg {
            Message::Text(text) => {
                // Most requests (`status`, `subscribe`, …) are answered at once, before the next
                // message is read: a `subscribe` takes effect before what follows it runs. One
                // that waits (a `submit`) goes on in a task of its own, so what follows is
                // served meanwhile. An answer to an approval request goes to the bridge.
                conn.take(bytes::Bytes::from(text)).await;
            }
            Message::Binary(_) => break close_message(close::UNSUPPORTED_DATA, "binary frames are not accepted; send JSON-RPC messages as text frames"),
            Message::Ping(_) | Message::Pong(_) => {}
            Message::Close(_) => break close_message(1000, "bye"),
        }
    };
    if let Some(bridged) = bridged {
        engine.bridge().detach(bridged);
    }
    if going_away {
        // Let the final event out first: the event stream ends once it has queued it (or gives
        // up on a frontend that takes nothing for the stuck timeout). Then the answers of the
        // requests still running (the `shutdown` itself, a `submit` its turn's end answers);
        // the close follows what is queued.
        events.wait_end(patience).await;
        conn.close(patience).await;
    } else {
        events.stop();
        conn.close(Duration::ZERO).await;
    }
    let _ = control_tx.send(close).await;
    // The stream holds a sender on the writer's queue.
    drop(events);
    drop(tx);
    drop(control_tx);
    let abort = writer.abort_handle();
    if tokio::time::timeout(Duration::from_secs(2), writer).await.is_err() {
        // The peer does not read: drop the socket (a detached writer would hold it forever).
        abort.abort();
    }
}
