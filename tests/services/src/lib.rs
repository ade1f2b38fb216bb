//! The service modules generated for other protocols' schemas and for ours, compiled: a check
//! that `--service` yields code that builds for every method union and side the generator
//! models, not only for the example's schema.

/// ACP v1: `service::{agent_side, client_side, protocol_side}`.
#[allow(clippy::all, clippy::pedantic, missing_docs, unused_labels, unused_parens, unreachable_patterns)]
pub mod acp {
    include!(concat!(env!("OUT_DIR"), "/acp_v1.rs"));
}

/// MCP 2026-07-28: `service::{client_side, server_side}`.
#[allow(clippy::all, clippy::pedantic, missing_docs, unused_labels, unused_parens, unreachable_patterns)]
pub mod mcp {
    include!(concat!(env!("OUT_DIR"), "/mcp_2026_07_28.rs"));
}

/// Our own schema: `service::Service` over `Method`.
#[allow(clippy::all, clippy::pedantic, missing_docs, unused_labels, unused_parens, unreachable_patterns)]
pub mod openagents {
    include!(concat!(env!("OUT_DIR"), "/openagents.rs"));
}

/// `schema/results.json`: a method union whose results are a named type, a list, a string and an
/// open object.
#[allow(clippy::all, clippy::pedantic, missing_docs, unused_labels, unused_parens, unreachable_patterns)]
pub mod results {
    include!(concat!(env!("OUT_DIR"), "/results.rs"));
}
