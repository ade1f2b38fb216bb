//! Hardening support: the fuzz oracles (shared by `tests/fuzz` and the regression tests), a
//! harness that starts the real `openagents` binary with a temporary operator configuration,
//! and small blocking clients for every transport (HTTP, SSE, WebSocket, stdio).

pub mod client;
pub mod harness;
pub mod oracles;
