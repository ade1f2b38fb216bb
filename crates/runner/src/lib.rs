//! Both sides of the openagents runner contract.
//!
//! An operator installs agent executables ("runners") in a registry ([`registry`]); a turn only
//! names one. The host ([`host`]) writes one bounded JSON `Turn` line to the runner's stdin and
//! reads bounded `Event` lines from its stdout, trusting nothing. Runner authors call
//! [`serve::serve_once`] or [`serve::serve_streaming`], which speak the contract for them. A
//! runner whose registry entry says `protocol = "acp"` is an Agent Client Protocol agent, driven
//! by [`acp::AcpHost`] under the same bounds, with its process kept across a conversation's turns.
//!
//! | bound | value | enforced by |
//! | --- | --- | --- |
//! | one line | `MAX_FRAME` = 96 KiB | both sides |
//! | all of stdout for a turn | `MAX_OUTPUT` = 1 MiB | both sides |
//! | a turn's duration | the registry's `timeout_s` (600 s by default) | the host |

pub mod acp;
pub mod frame;
pub mod host;
pub mod reap;
pub mod registry;
pub mod sandbox;
pub mod serve;

pub use acp::{AcpError, AcpHost, AcpReport, SessionKeeping};
pub use host::{RunnerHost, TurnError, TurnReport};
pub use registry::{Registry, RegistryError, RunnerSpec};
pub use serve::{Answer, Progress, ProgressError, serve_once, serve_streaming};
