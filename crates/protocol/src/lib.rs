//! openagents' wire protocol: the types, validators, `Method` enum and constants generated at
//! build time from the JSON Schema files in `schema/` (never edited by hand), plus the runtime
//! support they call ([`rt`], the `openagents-rt` crate).
//!
//! Decoding a document and checking it against its schema is one call:
//!
//! ```
//! use openagents_protocol::{Turn, rt};
//!
//! let line = br#"{"schema":"openagents.agent.runner.v1","assignment":"a1","conversation":"c1",
//!     "agent":{"runner":"echo"},"task":"say hello","cwd":"/tmp"}"#;
//! let turn: Turn = rt::parse_validated(line)?;
//! assert_eq!(turn.agent.runner, "echo");
//! # Ok::<(), rt::DocumentError>(())
//! ```

/// The runtime the generated code calls (the `openagents-rt` crate).
pub use openagents_rt as rt;
mod runner;

#[allow(clippy::all, clippy::pedantic, unused_labels, unused_parens, unreachable_patterns)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/openagents.rs"));
}

pub use generated::*;

/// The Agent Client Protocol v1: its types, exact decoders, validators and per-side method enums
/// (`agent_side`, `client_side`, `protocol_side`), generated at build time from ACP's published
/// schema (vendored, unchanged, in `tests/third-party-schemas/`).
#[cfg(feature = "acp")]
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod acp {
    include!(concat!(env!("OUT_DIR"), "/acp_v1.rs"));
}

impl Limits {
    /// The limits this build enforces, as `status` reports them.
    pub fn of_this_build() -> Limits {
        Limits {
            max_frame: MAX_FRAME as i64,
            max_output: MAX_OUTPUT as i64,
            max_line_bytes: SERVER_MAX_LINE_BYTES as i64,
            event_channel_capacity: SERVER_EVENT_CHANNEL_CAPACITY as i64,
        }
    }
}
