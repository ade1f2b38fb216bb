//! openagents: drive an AI agent out of process, over a typed protocol generated from JSON
//! Schema.
//!
//! - [`agents::runner`] — the runner contract for agent authors: read one bounded turn, write
//!   bounded events.
//! - [`agents::host`] — the host side: an operator's runner registry and a host that spawns
//!   runners and never trusts them.
//! - [`server`] — one runtime driving one agent over JSONL-RPC on stdio and HTTP (`POST /rpc`,
//!   SSE `/events`), with scoped credentials and a controller lease.
//! - [`protocol`] — every generated wire type, validator and constant.
//!
//! Features (all on by default): `runner` (the runner contract: [`agents::runner`]), `host`
//! (the registry and the runner host: [`agents::host`]; implies `runner`), `server` (the
//! runtime: [`server`]; implies `host`). A runner author who needs only the contract depends on
//! `openagents-sdk` with `default-features = false, features = ["runner"]` and compiles no HTTP
//! stack (neither axum nor hyper).

/// Every generated wire type, validator and constant (`openagents-protocol`).
pub use openagents_protocol as protocol;

#[cfg(feature = "runner")]
pub mod agents {
    //! Agents run out of process, as operator-installed runners.

    pub mod runner {
        //! Typed, bounded stdio contract for an operator-installed Rust agent. A definition
        //! identifies a runner; it never supplies its executable or arguments.
        //!
        //! | Item | What it does |
        //! | --- | --- |
        //! | [`Event`] enum | A message a runner writes back: progress text or a final result. |
        //! | [`Turn`] struct | One request to a runner: the assignment, the agent, the task, and the working folder. |
        //! | [`serve_once`] fn | Read one bounded JSON request, invoke application code, and write one result. |
        //! | [`serve_streaming`] fn | The same, for runners that report progress as `Text` events. |
        //! | [`MAX_FRAME`] const | The largest request or result line, in bytes. |
        //! | [`MAX_OUTPUT`] const | The most output a runner may produce, in bytes. |
        //! | [`VERSION`] const | The schema version a runner request must carry. |
        //!
        //! A complete runner: it reads the turn from stdin, answers on stdout, and logs to
        //! stderr. Register its executable in the operator's `runners.toml` and name it in a
        //! turn.
        //!
        //! ```no_run
        //! use std::io;
        //! use openagents_sdk::agents::runner::{serve_once, Turn};
        //!
        //! fn main() -> io::Result<()> {
        //!     serve_once(io::stdin().lock(), io::stdout().lock(), |turn: Turn| {
        //!         eprintln!("working in {}", turn.cwd);
        //!         if turn.task.trim().is_empty() {
        //!             return Err("nothing to do".to_owned());
        //!         }
        //!         Ok(format!("you asked: {}", turn.task))
        //!     })
        //! }
        //! ```
        //!
        //! The same, reporting progress (each `text` call is one flushed `Text` event):
        //!
        //! ```
        //! use openagents_sdk::agents::runner::{serve_streaming, Event, VERSION};
        //!
        //! let input = format!(
        //!     r#"{{"schema":"{VERSION}","assignment":"a1","conversation":"c1","agent":{{"runner":"echo"}},"task":"hello world","cwd":"/"}}"#
        //! ) + "\n";
        //! let mut out = Vec::new();
        //! serve_streaming(input.as_bytes(), &mut out, |turn, progress| {
        //!     for word in turn.task.split_whitespace() {
        //!         progress.text(word).map_err(|e| e.to_string())?;
        //!     }
        //!     Ok(turn.task)
        //! })?;
        //! let events: Vec<Event> = String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        //! assert_eq!(events.len(), 3);
        //! assert!(events[2].terminal());
        //! assert_eq!(events[2].text(), "hello world");
        //! # Ok::<(), std::io::Error>(())
        //! ```

        pub use openagents_protocol::{AgentSpec, Event, MAX_FRAME, MAX_OUTPUT, Turn, VERSION};
        pub use openagents_runner::serve::{Answer, Progress, ProgressError, serve_once, serve_streaming};
    }

    #[cfg(feature = "host")]
    pub mod host {
        //! The host side: the operator's registry of runners, and a host that runs one turn
        //! through a runner with every bound enforced and the process group cleaned up.
        pub use openagents_runner::frame::{FrameError, LineReader};
        pub use openagents_runner::host::{
            AFTER_TERMINAL_GRACE, ApprovalDecision, Approver, DenyAll, KILL_GRACE, RunnerHost, STDERR_TAIL_BYTES, TurnError, TurnReport, run_turn, run_turn_with,
        };
        pub use openagents_runner::registry::{DEFAULT_TIMEOUT, Registry, RegistryError, RunnerSpec};
    }

    /// The opt-in Landlock sandbox of a registry entry, and its launcher.
    #[cfg(feature = "host")]
    pub use openagents_runner::sandbox;

    /// What the host does so nothing a runner starts outlives it (child subreaper, sweep).
    #[cfg(feature = "host")]
    pub use openagents_runner::reap;
}

#[cfg(feature = "server")]
pub mod server {
    //! One runtime driving one agent: [`RpcEngine`] on the generated `Method` enum, JSONL-RPC
    //! over stdio ([`run_stdio`]), a network listener built with [`Server::builder`] (HTTP with
    //! `POST /rpc` and SSE `/events`, the WebSocket; the seed's [`run_http`],
    //! [`run_http_authorized`], [`run_http_authorized_with_lease_ttl`] wrap it), scoped
    //! credentials ([`RuntimeHttpCredential`], [`generate_token`]) and a controller lease.
    pub use openagents_server::{HttpOptions, Server, ServerBuilder, ServerHandle, WsOptions, run_http_with};
    pub use openagents_server::{
        Agent, ApprovalDecision, ApprovalHandler, Caller, FrontendRequestBridge, FrontendWebSocketServer, DEFAULT_LEASE_TTL, EngineConfig, FnAgent, Grant, Reply, RpcEngine, RpcRequest,
        RunnerAgent, RuntimeHttpCredential, RuntimeStatus, RuntimeSubmitError, SERVER_EVENT_CHANNEL_CAPACITY, SERVER_MAX_LINE_BYTES,
        TurnContext, MIN_TOKEN_BYTES, TokenFileError, generate_token, load_credentials, read_token_file, run_http, run_http_authorized, run_http_authorized_with_lease_ttl, run_stdio, run_stdio_process, run_frontend_websocket,
    };
    pub use openagents_server::{events, http, projection};
}
