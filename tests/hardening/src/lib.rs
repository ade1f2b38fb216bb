//! Hardening support: the fuzz oracles (shared by `tests/fuzz` and the regression tests), a
//! harness that starts the real `openagents` binary with a temporary operator configuration,
//! small blocking clients for every transport (HTTP, SSE, WebSocket, stdio), and the invariants
//! every subscriber's event stream must keep.

pub mod client;
pub mod harness;
pub mod invariants;
pub mod oracles;
