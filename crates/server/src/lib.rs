//! One openagents runtime driving one agent, embeddable by a parent process over JSONL-RPC on
//! stdio, or attachable remotely over HTTP (`POST /rpc`, `GET /events` as SSE) and an
//! authenticated WebSocket (`/frontend/v2`) where frontends watch events and answer the agent's
//! approval requests.
//!
//! Security posture (a listener is the riskiest thing we ship):
//! - Network clients are untrusted: every HTTP request carries a bearer token, compared in
//!   constant time; each credential has an exact grant ([`Grant`]); one controller at a time
//!   holds a lease with a TTL.
//! - No permission bypass: [`RpcEngine::new`] takes the same agent a local `openagents run`
//!   builds and installs no approval handler, so an approval nobody authorised can answer is
//!   denied, and the denial is an event.
//! - Everything is bounded: lines and bodies by `SERVER_MAX_LINE_BYTES`, the replay buffer by
//!   `SERVER_EVENT_CHANNEL_CAPACITY` (a slow subscriber misses events and is told so, and never
//!   stalls the agent), connections by [`http::MAX_CONNECTIONS`], slow senders by timeouts.
//! - `shutdown` stops every transport's accept loop, interrupts the active turn and publishes a
//!   final event.
//! - Loopback by default is the caller's policy (the CLI's); these functions bind what they are
//!   given.

// The layers, each importing only the ones above it (checked by `tests/layering.rs`):
// projection, store, events, agent, auth, metrics, decode, bridge (approvals), engine, connection, jsonrpc, listener,
// then the transports http, ws, stdio and the web page as siblings that never import each other,
// then server, which composes them.
pub mod projection;
pub mod store;
pub mod events;
pub mod agent;
pub mod history;
pub mod auth;
pub mod metrics;
pub mod decode;
pub mod bridge;
pub mod engine;
mod connection;
pub mod jsonrpc;
pub mod listener;
pub mod http;
pub mod ws;
pub mod stdio;
pub mod web;
pub mod server;

pub use agent::{Agent, ApprovalHandler, FnAgent, RunnerAgent, TurnContext};
pub use bridge::FrontendRequestBridge;
pub use openagents_runner::host::ApprovalDecision;
pub use auth::{Caller, Grant, MIN_TOKEN_BYTES, RuntimeHttpCredential, TokenFileError, generate_token, load_credentials, read_token_file};
pub use engine::{DEFAULT_LEASE_TTL, EngineConfig, EventSession, RpcEngine};
pub use jsonrpc::Reply;
pub use listener::{HttpOptions, PROTOCOL_VERSION_HEADER, SCHEMA_DIGEST_HEADER};
pub use openagents_protocol::{RpcRequest, RuntimeStatus, RuntimeSubmitError, SERVER_EVENT_CHANNEL_CAPACITY, SERVER_MAX_LINE_BYTES};
pub use server::{FrontendWebSocketServer, Server, ServerBuilder, ServerHandle, run_frontend_websocket, run_http, run_http_authorized, run_http_authorized_web, run_http_authorized_with_lease_ttl, run_http_with};
pub use stdio::{run_stdio, run_stdio_process};
pub use ws::WsOptions;
