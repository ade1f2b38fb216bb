//! The host side of the Agent Client Protocol (ACP, version 1): drives an agent that speaks ACP
//! on stdio (Gemini CLI's ACP mode, the Claude Code and Codex ACP adapters, goose, …) as a
//! runner, with the host as the ACP client.
//!
//! The agent is spawned like every runner (its own process group, the registry's environment,
//! every line at most `MAX_FRAME`, at most `MAX_OUTPUT` bytes of stdout per turn), then
//! `initialize`d (protocol version 1, no `fs` or `terminal` client capabilities, so it uses its
//! own tools) and given a session (`session/new` with the turn's `cwd` and no MCP servers), or,
//! when the caller kept the conversation's earlier session ([`SessionKeeping`]: a restarted
//! runtime, an agent closed while idle) and the agent advertises `loadSession`, that session
//! again (`session/load`; what the agent replays while loading is not the turn's output). An
//! agent that cannot load it gets a new session, and the turn a progress `text` saying so
//! ([`RESUME_FAILED`]). Each turn is one `session/prompt` with the task as text:
//!
//! | ACP | runner events and outcome |
//! | --- | --- |
//! | `agent_message_chunk` (text) | appended to the result, and streamed as `text` |
//! | `agent_thought_chunk`, `tool_call`, `tool_call_update` (status), `plan` | readable `text` lines |
//! | `session/request_permission` | an approval request; approve selects `allow_once`, anything else `reject_once` (`cancelled` once the turn is being cancelled) |
//! | `fs/*`, `terminal/*`, `elicitation/create` | JSON-RPC error -32601 (method not found: openagents advertises none of them) |
//! | a request ACP v1 does not have | JSON-RPC error -32601 (method not found) |
//! | a known request whose params break ACP's schema | JSON-RPC error -32602 (invalid params) |
//! | a `session/update` of a kind ACP v1 does not have | skipped (an agent newer than the schema), with a debug log line |
//! | stop reason `end_turn` | completed, with the accumulated message |
//! | stop reason `cancelled` | interrupted |
//! | `refusal`, `max_tokens`, `max_turn_requests`, a stop reason ACP v1 does not have, a JSON-RPC error | failed, saying which |
//! | a known message that breaks ACP's schema (a result, an update) | failed with [`AcpError::Schema`], naming where and what |
//! | an error object that is not one (no `code`, say) | failed as a JSON-RPC error (-32603) saying what is missing |
//! | a line that is not JSON-RPC 2.0, or longer than `MAX_FRAME` | failed ([`AcpError::NotAcp`], [`AcpError::FrameTooLarge`]) |
//!
//! Every message is one of the types generated from ACP's published schema
//! ([`openagents_protocol::acp`]): what the host writes is built from them (`InitializeRequest`,
//! `NewSessionRequest`, `PromptRequest`, `CancelNotification`, `RequestPermissionResponse`), and
//! what it reads goes through their exact decoders and schema checks (results as the `Result` of
//! the request's method). The JSON-RPC around them is the openagents-rpc core's (the `conn`
//! module): the host's requests go through the connection's `Peer`, and the agent's requests and
//! notifications are served by the client side generated from ACP's schema
//! (`acp::service::client_side::Service`), handed to the turn in the order the agent sent them.
//!
//! An interrupt sends `session/cancel` and waits [`CANCEL_GRACE`] for the prompt to answer;
//! an agent that does not is killed with its process group. The process and its session live
//! across the turns of one conversation, so the conversation has the agent's memory; they are
//! closed after the runner's idle timeout, when the runner's process cap needs room (the one
//! idle the longest first), and at [`AcpHost::shutdown`]. An agent that breaks the protocol,
//! exits or exceeds a bound fails its turn with a typed error and is started afresh for the
//! next one.

use std::collections::{HashMap, VecDeque};
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use openagents_protocol::acp::{self, agent_side};
use openagents_protocol::rt::{self, DocumentError, RpcMethod, SchemaCheck, Validate};
use openagents_protocol::{ErrorCode, ErrorDetails, Event, MAX_FRAME, MAX_OUTPUT, RuntimeSubmitError, Turn};
use openagents_rpc::PeerError;
use serde::Serialize;
use tokio::process::Child;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::host::{AFTER_TERMINAL_GRACE, ApprovalDecision, Approver, BoxFuture, StderrTail, end_process_group, spawn_in_group};
use crate::registry::{AcpSettings, RunnerSpec};

mod conn;
mod wire;

/// The ACP major version the host speaks.
pub const ACP_PROTOCOL_VERSION: acp::ProtocolVersion = 1;

/// `initialize` as the host sends it: protocol version 1, no `fs` or `terminal` client
/// capabilities (the agent uses its own tools), and who we are.
fn initialize_request() -> acp::InitializeRequest {
    acp::InitializeRequest {
        protocol_version: ACP_PROTOCOL_VERSION,
        client_capabilities: Some(acp::ClientCapabilities {
            fs: Some(acp::FileSystemCapabilities { read_text_file: Some(false), write_text_file: Some(false), meta: None }),
            terminal: Some(false),
            ..Default::default()
        }),
        client_info: Some(acp::Implementation { name: "openagents".into(), title: Some("openagents".into()), version: env!("CARGO_PKG_VERSION").into(), meta: None }),
        meta: None,
    }
}

/// How long an interrupted turn's agent gets, after `session/cancel`, to answer the prompt
/// (with `cancelled`, as ACP requires) before its process group is killed: enough for an agent
/// to stop a model call and flush its last updates, short enough that a stop feels immediate.
pub const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// The longest progress `text` or result, in code points: an `Event`'s `text` and `result`
/// (`maxLength` in `schema/Event.json`).
pub const MAX_TEXT_CHARS: usize = 98_304;

/// The longest approval prompt, in code points (`approval_request.prompt` in `schema/Event.json`).
pub const MAX_PROMPT_CHARS: usize = 16_384;

/// The start of the progress `text` a turn gets when the conversation's earlier agent session
/// could not be loaded and a new one was started (the reason follows, then what it means).
pub const RESUME_FAILED: &str = "The agent could not resume this conversation's earlier session";

/// How many of a message's schema violations an error lists (the rest are counted): enough to
/// say what is wrong, few enough for one log line.
const SHOWN_VIOLATIONS: usize = 3;

/// Why an ACP turn did not complete.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// The turn's working folder does not exist, is not a folder, or cannot be used. What the
    /// caller sees does not say which (that would let it probe the host's files);
    /// [`AcpError::operator_detail`] does.
    #[error("cwd is not an accessible folder")]
    BadCwd {
        /// The folder.
        cwd: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The agent could not be started.
    #[error("cannot start ACP agent `{runner}` ({command}): {source}")]
    Spawn {
        /// The runner's id.
        runner: String,
        /// Its command.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// `initialize` or `session/new` failed.
    #[error("the ACP agent could not be set up: {0}")]
    Handshake(String),
    /// The agent wrote a line that is not an ACP (JSON-RPC 2.0) message.
    #[error("the ACP agent wrote a line that is not an ACP message (message {message_no}): {message}")]
    NotAcp {
        /// Its place among the agent's messages (1-based; blank lines are not counted).
        message_no: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The agent wrote a JSON-RPC message that ACP knows (the result of one of the host's
    /// requests, a known notification) but whose content breaks ACP's schema.
    #[error("the ACP agent's {what} does not match ACP's schema: {problem}")]
    Schema {
        /// Which message it is, such as `initialize result` or `session/update (message 4)`.
        what: String,
        /// The violations, each with its JSON pointer.
        problem: String,
    },
    /// The agent wrote a line longer than `MAX_FRAME`.
    #[error("the ACP agent wrote a line longer than MAX_FRAME ({MAX_FRAME} bytes)")]
    FrameTooLarge,
    /// The agent wrote more than `MAX_OUTPUT` bytes during one turn.
    #[error("the ACP agent wrote more than MAX_OUTPUT ({MAX_OUTPUT} bytes) during the turn")]
    OutputTooLarge,
    /// The agent's answer is longer than a result may be.
    #[error("the ACP agent's answer is longer than {MAX_TEXT_CHARS} characters")]
    ResultTooLarge,
    /// The agent exited, or closed its stdout, during the turn.
    #[error("the ACP agent exited during the turn{}", .0.map(|s| format!(" ({s})")).unwrap_or_default())]
    Exited(Option<ExitStatus>),
    /// The turn took longer than the runner's time limit.
    #[error("the turn took longer than {0:?}")]
    Timeout(Duration),
    /// The turn was stopped by the user (or the agent answered `cancelled`).
    #[error("the turn was interrupted")]
    Interrupted,
    /// The agent ended the turn with a stop reason other than `end_turn` or `cancelled`.
    #[error("{message}")]
    StopReason {
        /// The ACP stop reason.
        reason: String,
        /// What it means.
        message: String,
    },
    /// The agent answered `session/prompt` with a JSON-RPC error.
    #[error("the ACP agent answered session/prompt with error {code}: {message}")]
    PromptError {
        /// The JSON-RPC error code.
        code: i64,
        /// Its message.
        message: String,
    },
    /// Every live process of the runner is in a turn, or this conversation's is.
    #[error("{0}")]
    Busy(String),
    /// The host is shutting down.
    #[error("the ACP host is shutting down and takes no new turns")]
    ShuttingDown,
    /// The host failed to talk to the agent.
    #[error("talking to the ACP agent failed: {0}")]
    Io(#[source] std::io::Error),
}

impl AcpError {
    /// The stable error code for this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            AcpError::BadCwd { .. } => ErrorCode::InvalidParams,
            AcpError::FrameTooLarge => ErrorCode::FrameTooLarge,
            AcpError::OutputTooLarge | AcpError::ResultTooLarge => ErrorCode::OutputTooLarge,
            AcpError::Timeout(_) => ErrorCode::Timeout,
            AcpError::Interrupted => ErrorCode::Interrupted,
            AcpError::Busy(_) => ErrorCode::Busy,
            AcpError::ShuttingDown => ErrorCode::ShuttingDown,
            AcpError::Io(_) => ErrorCode::Internal,
            AcpError::Spawn { .. }
            | AcpError::Handshake(_)
            | AcpError::NotAcp { .. }
            | AcpError::Schema { .. }
            | AcpError::Exited(_)
            | AcpError::StopReason { .. }
            | AcpError::PromptError { .. } => ErrorCode::RunnerFailed,
        }
    }

    /// The whole story, for the operator's own log (never for a client).
    pub fn operator_detail(&self) -> String {
        match self {
            AcpError::BadCwd { cwd, reason } => format!("the working folder {cwd} {reason}"),
            other => other.to_string(),
        }
    }

    /// The typed error every transport and client sees.
    pub fn to_runtime_error(&self) -> RuntimeSubmitError {
        let code = self.code();
        let limit = match self {
            AcpError::FrameTooLarge | AcpError::ResultTooLarge => Some(MAX_FRAME as i64),
            AcpError::OutputTooLarge => Some(MAX_OUTPUT as i64),
            _ => None,
        };
        let details = limit.map(|limit| ErrorDetails { violations: None, violations_omitted: None, known: None, holder: None, expires_at_ms: None, limit: Some(limit) });
        RuntimeSubmitError { retryable: code.retryable(), code, message: self.to_string(), details }
    }

    /// Whether the agent is still fit for the conversation's next turn after this failure: it
    /// answered the prompt (a stop reason or an error) and kept to the protocol.
    fn keeps_process(&self) -> bool {
        matches!(self, AcpError::StopReason { .. } | AcpError::PromptError { .. } | AcpError::ResultTooLarge)
    }
}

/// How one ACP turn ended, with what the agent logged.
#[derive(Debug)]
pub struct AcpReport {
    /// The result, or why there is none.
    pub outcome: Result<String, AcpError>,
    /// The newest bytes the agent wrote to stderr (at most
    /// [`crate::host::STDERR_TAIL_BYTES`]), for logs; never part of the result.
    pub stderr: String,
    /// Whether this turn started the agent process (a new conversation, or a restart after
    /// the previous process was closed or failed).
    pub started: bool,
}

/// What the caller keeps of a conversation's ACP session across agent processes and runtime
/// restarts (the server keeps it in its store): the session to resume, and where to report a new
/// one.
#[derive(Default)]
pub struct SessionKeeping<'a> {
    /// The session id the conversation had with this runner's agent, if any: when the turn has
    /// to start the conversation's agent process, the host asks the agent to `session/load` it
    /// (if the agent advertised `loadSession`); when it cannot, it opens a new session and the
    /// turn gets a progress `text` starting with [`RESUME_FAILED`].
    pub resume: Option<String>,
    /// Called with the id of every session the host opens (`session/new`) for the conversation.
    pub on_new_session: Option<&'a mut (dyn FnMut(&str) + Send)>,
}

/// How a new agent process got its session.
#[derive(Debug, PartialEq, Eq)]
enum Opened {
    /// `session/new`, with no session to resume.
    New,
    /// `session/load` of the session asked for.
    Loaded,
    /// `session/new`, because the session asked for could not be loaded (why).
    Replaced(String),
}

/// Drives ACP runners: one agent process (and ACP session) per conversation, kept between
/// turns within the runner's idle timeout and process cap. Cheap to clone; clones share the
/// processes.
#[derive(Clone, Default)]
pub struct AcpHost {
    inner: Arc<Pool>,
}

impl std::fmt::Debug for AcpHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpHost").field("live", &self.live_processes()).finish()
    }
}

#[derive(Default)]
struct Pool {
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    slots: HashMap<(String, String), Slot>,
    closed: bool,
    next_generation: u64,
}

/// One conversation's agent: `process` is `None` while a turn has it (or is starting it).
struct Slot {
    process: Option<AcpProcess>,
    idle_since: Instant,
    generation: u64,
}

impl Pool {
    fn state(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl AcpHost {
    /// A host with no processes yet.
    pub fn new() -> Self {
        AcpHost::default()
    }

    /// How many agent processes are live (in a turn or idle).
    pub fn live_processes(&self) -> usize {
        self.inner.state().slots.len()
    }

    /// Runs one turn of `turn.conversation` through the ACP agent `spec`, calling `on_event`
    /// for every progress `text` (and each approval request) as it arrives and `approver` for
    /// the agent's permission requests, until the turn ends, `cancel` fires, or the runner's
    /// time limit passes. The turn must already be valid and name `spec`.
    pub async fn run(
        &self,
        spec: &RunnerSpec,
        settings: AcpSettings,
        turn: &Turn,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(&Event) + Send),
        approver: &dyn Approver,
    ) -> AcpReport {
        self.run_keeping(spec, settings, turn, SessionKeeping::default(), cancel, on_event, approver).await
    }

    /// [`AcpHost::run`], resuming the conversation's kept session when the turn starts its agent
    /// process, and reporting each new session (see [`SessionKeeping`]).
    #[allow(clippy::too_many_arguments)]
    pub async fn run_keeping(
        &self,
        spec: &RunnerSpec,
        settings: AcpSettings,
        turn: &Turn,
        mut keeping: SessionKeeping<'_>,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(&Event) + Send),
        approver: &dyn Approver,
    ) -> AcpReport {
        let fail = |e: AcpError| AcpReport { outcome: Err(e), stderr: String::new(), started: false };
        match std::fs::metadata(&turn.cwd) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return fail(AcpError::BadCwd { cwd: turn.cwd.clone(), reason: "is not a folder".into() }),
            Err(e) => return fail(AcpError::BadCwd { cwd: turn.cwd.clone(), reason: format!("cannot be used: {e}") }),
        }
        let key = (spec.id.clone(), turn.conversation.clone());
        let (existing, evicted) = match self.checkout(&key, settings) {
            Ok(x) => x,
            Err(e) => return fail(e),
        };
        // Frees the conversation's place if this future is dropped mid-turn (the process itself,
        // dropped with it, takes its group along).
        let mut reserved = Reservation { host: self, key: Some(key.clone()) };
        if let Some(p) = evicted {
            p.close(true).await;
        }
        // A limit too large for a deadline (a `RunnerSpec` built by hand) is no limit to speak
        // of, never a panic.
        let deadline = Instant::now().checked_add(spec.timeout).unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 60 * 60));
        let mut started = false;
        let process = match existing {
            // The conversation moved to another folder, or its agent died while idle: start
            // afresh (the agent's memory of the conversation is gone either way).
            Some(p) if p.cwd != turn.cwd => {
                p.close(true).await;
                None
            }
            Some(mut p) => {
                if p.has_exited() {
                    p.close(false).await;
                    None
                } else {
                    Some(p)
                }
            }
            None => None,
        };
        let mut process = match process {
            Some(p) => p,
            None => {
                started = true;
                match AcpProcess::start(spec, &turn.cwd, keeping.resume.as_deref(), cancel, deadline).await {
                    Ok((p, opened)) => {
                        keeping.report(&p, opened, on_event);
                        p
                    }
                    Err((e, stderr)) => {
                        reserved.checkin(None, settings);
                        return AcpReport { outcome: Err(e), stderr, started };
                    }
                }
            }
        };
        // The turn's output budget starts now.
        process.conn.meter.reset();
        let read_before = process.conn.meter.read();
        let mut outcome = process.prompt(&turn.task, cancel, deadline, spec.timeout, on_event, approver).await;
        if !started && matches!(outcome, Err(AcpError::Exited(_))) && process.conn.meter.read() == read_before {
            // The kept process was gone before it read the prompt (it died while idle, just
            // before the turn): the turn has not begun, so it goes to a fresh process, which
            // resumes its session.
            let resume = std::mem::take(&mut process.session_id);
            process.close(false).await;
            started = true;
            process = match AcpProcess::start(spec, &turn.cwd, Some(&resume), cancel, deadline).await {
                Ok((p, opened)) => {
                    keeping.report(&p, opened, on_event);
                    p
                }
                Err((e, stderr)) => {
                    reserved.checkin(None, settings);
                    return AcpReport { outcome: Err(e), stderr, started };
                }
            };
            process.conn.meter.reset();
            outcome = process.prompt(&turn.task, cancel, deadline, spec.timeout, on_event, approver).await;
        }
        let keep = match &outcome {
            Ok(_) => true,
            Err(AcpError::Interrupted) => process.answered,
            Err(e) => e.keeps_process(),
        };
        let stderr = process.tail.text();
        if keep {
            if let Some(p) = reserved.checkin(Some(process), settings) {
                p.close(true).await;
            }
        } else {
            process.close(false).await;
            reserved.checkin(None, settings);
        }
        AcpReport { outcome, stderr, started }
    }

    /// Takes the conversation's idle process (if any) for a turn, reserving its place; makes
    /// room under the cap for a new one by taking the process idle the longest, to be closed.
    fn checkout(&self, key: &(String, String), settings: AcpSettings) -> Result<(Option<AcpProcess>, Option<AcpProcess>), AcpError> {
        let mut st = self.inner.state();
        if st.closed {
            return Err(AcpError::ShuttingDown);
        }
        if let Some(slot) = st.slots.get_mut(key) {
            return match slot.process.take() {
                Some(p) => {
                    slot.generation = u64::MAX;
                    Ok((Some(p), None))
                }
                None => Err(AcpError::Busy(format!("conversation `{}` already has a turn running on ACP runner `{}`", key.1, key.0))),
            };
        }
        let mut evicted = None;
        let live = st.slots.keys().filter(|(runner, _)| *runner == key.0).count();
        if live >= settings.max_processes {
            let oldest = st.slots.iter().filter(|((runner, _), s)| *runner == key.0 && s.process.is_some()).min_by_key(|(_, s)| s.idle_since).map(|(k, _)| k.clone());
            match oldest {
                Some(k) => evicted = st.slots.remove(&k).and_then(|s| s.process),
                None => {
                    return Err(AcpError::Busy(format!(
                        "all {} processes ACP runner `{}` may have (max_processes) are in turns; retry when one ends",
                        settings.max_processes, key.0
                    )));
                }
            }
        }
        st.slots.insert(key.clone(), Slot { process: None, idle_since: Instant::now(), generation: u64::MAX });
        Ok((None, evicted))
    }

    /// Returns the conversation's process after a turn (or frees its place with `None`), and
    /// starts its idle timer. Hands the process back when the host is closing, to be closed.
    fn checkin(&self, key: &(String, String), process: Option<AcpProcess>, settings: AcpSettings) -> Option<AcpProcess> {
        let mut st = self.inner.state();
        let Some(process) = process else {
            st.slots.remove(key);
            return None;
        };
        if st.closed {
            st.slots.remove(key);
            return Some(process);
        }
        st.next_generation += 1;
        let generation = st.next_generation;
        st.slots.insert(key.clone(), Slot { process: Some(process), idle_since: Instant::now(), generation });
        drop(st);
        let pool = Arc::downgrade(&self.inner);
        let key = key.clone();
        tokio::spawn(close_when_idle(pool, key, generation, settings.idle_timeout));
        None
    }

    /// Closes every idle agent process and takes no new turns; a turn still running closes its
    /// process when it ends. Every process is reaped when this returns.
    pub async fn shutdown(&self) {
        let idle: Vec<AcpProcess> = {
            let mut st = self.inner.state();
            st.closed = true;
            let keys: Vec<_> = st.slots.iter().filter(|(_, s)| s.process.is_some()).map(|(k, _)| k.clone()).collect();
            keys.into_iter().filter_map(|k| st.slots.remove(&k).and_then(|s| s.process)).collect()
        };
        for p in idle {
            p.close(true).await;
        }
    }

    /// Closes the idle agent process of `conversation` (under any ACP runner), for a client
    /// that is done with the conversation (`openagents acp`'s `session/close` and session cap).
    /// A turn still running keeps its process; a conversation holding none is left as it is.
    /// Returns how many processes were closed, each one reaped by the time this returns.
    pub async fn close_conversation(&self, conversation: &str) -> usize {
        let idle: Vec<AcpProcess> = {
            let mut st = self.inner.state();
            let keys: Vec<_> = st.slots.iter().filter(|((_, c), s)| c == conversation && s.process.is_some()).map(|(k, _)| k.clone()).collect();
            keys.into_iter().filter_map(|k| st.slots.remove(&k).and_then(|s| s.process)).collect()
        };
        let closed = idle.len();
        for p in idle {
            p.close(true).await;
        }
        closed
    }
}

impl SessionKeeping<'_> {
    /// Tells the caller of the session a new process opened, and the turn when it is not the
    /// one asked for.
    fn report(&mut self, process: &AcpProcess, opened: Opened, on_event: &mut (dyn FnMut(&Event) + Send)) {
        if opened == Opened::Loaded {
            return;
        }
        if let Some(f) = self.on_new_session.as_mut() {
            f(&process.session_id);
        }
        if let Opened::Replaced(why) = opened {
            let text = format!("{RESUME_FAILED} ({why}), so a new session was started: the agent does not remember the earlier turns of this conversation.");
            on_event(&Event::Text { text: clip(&text, MAX_TEXT_CHARS) });
        }
    }
}

/// A conversation's place in the pool, held by a turn until it checks the process back in.
struct Reservation<'h> {
    host: &'h AcpHost,
    key: Option<(String, String)>,
}

impl Reservation<'_> {
    fn checkin(&mut self, process: Option<AcpProcess>, settings: AcpSettings) -> Option<AcpProcess> {
        let key = self.key.take()?;
        self.host.checkin(&key, process, settings)
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.host.inner.state().slots.remove(&key);
        }
    }
}

/// How often an idle agent process is asked whether it has exited: an agent that exits between
/// turns is reaped (and what it left behind swept) within this, not at its idle timeout.
pub const IDLE_EXIT_CHECK: Duration = Duration::from_millis(200);

/// Closes the conversation's process once it has been idle for `idle`, or as soon as it has
/// exited by itself (checked every [`IDLE_EXIT_CHECK`]), unless a turn took it (which changes
/// its generation) in the meantime.
async fn close_when_idle(pool: Weak<Pool>, key: (String, String), generation: u64, idle: Duration) {
    // An idle time too large for a deadline (a `RunnerSpec` built by hand) is no limit to speak
    // of, never a panic.
    let until = Instant::now().checked_add(idle).unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 60 * 60));
    loop {
        tokio::time::sleep_until(until.min(Instant::now() + IDLE_EXIT_CHECK)).await;
        let Some(pool) = pool.upgrade() else { return };
        let (process, clean) = {
            let mut st = pool.state();
            let exited = match st.slots.get_mut(&key) {
                Some(Slot { process: Some(p), generation: g, .. }) if *g == generation => p.has_exited(),
                _ => return,
            };
            if !exited && Instant::now() < until {
                continue;
            }
            (st.slots.remove(&key).and_then(|s| s.process), !exited)
        };
        if let Some(p) = process {
            p.close(clean).await;
        }
        return;
    }
}

/// One live agent process with its ACP session.
struct AcpProcess {
    child: Child,
    pgid: Option<Pid>,
    /// The connection to the agent (its stdout read, its stdin written) on the openagents-rpc core.
    conn: conn::Connection,
    /// How the connection ended, once it has (an I/O error, or `None` at the end of stdout).
    conn_end: Option<Option<std::io::Error>>,
    tail: StderrTail,
    stderr_task: Option<tokio::task::JoinHandle<()>>,
    cwd: String,
    session_id: String,
    /// Set when the agent answered the last prompt (after `session/cancel` too: it honoured
    /// the cancel and may keep the conversation).
    answered: bool,
    /// Set while the host waits for `session/load`'s answer.
    loading: bool,
    exited: Option<Option<ExitStatus>>,
    closed: bool,
}

/// A prompt's turn as [`AcpProcess::wait`] serves it: its state, where its events go, who
/// answers its permission requests.
type PromptTurn<'a> = (&'a mut TurnState, &'a mut (dyn FnMut(&Event) + Send), &'a dyn Approver);

/// The answer to a request of the host's the turn waits for (the raw result), sent through the
/// connection's peer.
type Waiting<'a> = BoxFuture<'a, Result<Box<serde_json::value::RawValue>, PeerError>>;

/// The agent's answer to a request of the host's: the raw JSON of its result (decoded by the
/// caller, which knows the method), or its JSON-RPC error as `(code, message)`.
type Answer = Result<String, (i64, String)>;

/// A permission request waiting for its answer.
struct Permission {
    /// Where the option chosen goes (`None`: `cancelled`).
    answer: oneshot::Sender<Option<String>>,
    tool_call_id: String,
    prompt: String,
    options: Vec<(String, acp::PermissionOptionKind)>,
}

/// The turn's state while the agent works on a prompt.
#[derive(Default)]
struct TurnState {
    result: String,
    result_chars: usize,
    thought: String,
    tools: HashMap<String, String>,
    /// Progress lines to deliver.
    out: Vec<String>,
    too_large: bool,
}

impl AcpProcess {
    fn spawn(spec: &RunnerSpec, cwd: &str) -> Result<AcpProcess, AcpError> {
        let mut child = spawn_in_group(spec, cwd).map_err(|source| AcpError::Spawn { runner: spec.id.clone(), command: spec.command.display().to_string(), source })?;
        let pgid = child.id().map(|id| Pid::from_raw(id as i32));
        let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
            return Err(AcpError::Io(std::io::Error::other("the agent's stdin and stdout were not captured")));
        };
        let tail = StderrTail::default();
        let stderr_task = stderr.map(|e| tail.collect(e));
        Ok(AcpProcess {
            child,
            pgid,
            conn: conn::connect(stdout, stdin),
            conn_end: None,
            tail,
            stderr_task,
            cwd: cwd.to_owned(),
            session_id: String::new(),
            answered: false,
            loading: false,
            exited: None,
            closed: false,
        })
    }

    /// Starts the agent and sets it up (`initialize`, then `session/load` of `resume` or
    /// `session/new`); on failure, the error and what the agent wrote to stderr, the process
    /// ended. A load that breaks the agent (it exits, or writes what is not ACP) is given up:
    /// a fresh process gets a new session.
    async fn start(spec: &RunnerSpec, cwd: &str, resume: Option<&str>, cancel: &CancellationToken, deadline: Instant) -> Result<(AcpProcess, Opened), (AcpError, String)> {
        let mut p = AcpProcess::spawn(spec, cwd).map_err(|e| (e, String::new()))?;
        match p.handshake(cwd, resume, cancel, deadline, spec.timeout).await {
            Ok(opened) => Ok((p, opened)),
            Err(e) if p.loading && !matches!(e, AcpError::Interrupted | AcpError::Timeout(_)) => {
                tracing::info!(runner = %spec.id, "the ACP agent failed while loading a session; starting it afresh: {e}");
                p.close(false).await;
                let (p, _) = Box::pin(AcpProcess::start(spec, cwd, None, cancel, deadline)).await?;
                Ok((p, Opened::Replaced(format!("loading it failed: {}", clip(&e.to_string(), 512)))))
            }
            Err(e) => {
                let stderr = p.tail.text();
                p.close(false).await;
                Err((e, stderr))
            }
        }
    }

    fn has_exited(&mut self) -> bool {
        self.exited.is_some() || matches!(self.child.try_wait(), Ok(Some(_)) | Err(_))
    }

    /// Sends request `M` with `params`; the answer is awaited by [`AcpProcess::wait`].
    fn request<M: RpcMethod>(&self, params: &M::Params) -> Waiting<'static>
    where
        M::Params: Serialize,
    {
        let peer = self.conn.peer.clone();
        // Generated ACP types always encode.
        let params = serde_json::value::to_raw_value(params).ok();
        Box::pin(async move { peer.request_raw(M::NAME, params.as_deref()).await })
    }

    /// The result of request `M` the agent answered (`raw`, its JSON), decoded and checked
    /// against ACP's schema.
    fn result<M: RpcMethod>(&self, raw: &str) -> Result<M::Result, AcpError>
    where
        M::Result: Validate + SchemaCheck,
    {
        rt::parse_validated::<M::Result>(raw.as_bytes()).map_err(|e| self.schema_error(format!("{} result", M::NAME), e))
    }

    /// The error for a message that breaks ACP's schema.
    fn schema_error(&self, what: String, e: DocumentError) -> AcpError {
        AcpError::Schema { what, problem: describe(e) }
    }

    /// `initialize`, then `session/load` of `resume` when there is one and the agent can load
    /// sessions, else (or when the agent answers the load with an error, or a result that breaks
    /// the schema) `session/new`. What the agent replays while loading is read and dropped,
    /// within an output budget of its own ([`MAX_OUTPUT`]).
    async fn handshake(&mut self, cwd: &str, resume: Option<&str>, cancel: &CancellationToken, deadline: Instant, limit: Duration) -> Result<Opened, AcpError> {
        let params = initialize_request();
        let init = self.request::<agent_side::Initialize>(&params);
        let answer = self.wait(agent_side::Initialize::NAME, init, cancel, deadline, limit, None).await?;
        let raw = answer.map_err(|(code, message)| AcpError::Handshake(format!("initialize failed with error {code}: {message}")))?;
        let result = self.result::<agent_side::Initialize>(&raw)?;
        if result.protocol_version != ACP_PROTOCOL_VERSION {
            return Err(AcpError::Handshake(format!("the agent speaks ACP version {}; openagents speaks version {ACP_PROTOCOL_VERSION}", result.protocol_version)));
        }
        let can_load = result.agent_capabilities.as_ref().and_then(|c| c.load_session).unwrap_or(false);
        let mut opened = Opened::New;
        if let Some(resume) = resume {
            if !can_load {
                opened = Opened::Replaced("the agent cannot load sessions".into());
            } else {
                let params = acp::LoadSessionRequest { session_id: resume.to_owned(), cwd: cwd.to_owned(), additional_directories: None, mcp_servers: Vec::new(), meta: None };
                let load = self.request::<agent_side::SessionLoad>(&params);
                self.session_id = resume.to_owned();
                self.loading = true;
                // The replay has an output budget of its own, and so has the turn after it.
                self.conn.meter.reset();
                let answer = self.wait(agent_side::SessionLoad::NAME, load, cancel, deadline, limit, None).await?;
                self.conn.meter.reset();
                self.loading = false;
                match answer.map(|raw| self.result::<agent_side::SessionLoad>(&raw)) {
                    Ok(Ok(_)) => return Ok(Opened::Loaded),
                    Ok(Err(e)) => opened = Opened::Replaced(format!("its answer to session/load broke ACP's schema: {}", clip(&e.to_string(), 512))),
                    Err((code, message)) => opened = Opened::Replaced(format!("it answered session/load with error {code}: {}", clip(&message, 512))),
                }
                self.session_id.clear();
            }
        }
        let params = acp::NewSessionRequest { cwd: cwd.to_owned(), additional_directories: None, mcp_servers: Vec::new(), meta: None };
        let new = self.request::<agent_side::SessionNew>(&params);
        let answer = self.wait(agent_side::SessionNew::NAME, new, cancel, deadline, limit, None).await?;
        let raw = answer.map_err(|(code, message)| {
            let hint = if code == -32000 { " (the agent needs a login: run it once by hand to sign in, or give it credentials in the registry's env)" } else { "" };
            AcpError::Handshake(format!("session/new failed with error {code}: {message}{hint}"))
        })?;
        let result = self.result::<agent_side::SessionNew>(&raw)?;
        if result.session_id.is_empty() {
            return Err(AcpError::Handshake("the session/new result has an empty sessionId".into()));
        }
        self.session_id = result.session_id;
        Ok(opened)
    }

    /// One `session/prompt`, mapped onto the turn's events and outcome.
    #[allow(clippy::too_many_arguments)]
    async fn prompt(
        &mut self,
        task: &str,
        cancel: &CancellationToken,
        deadline: Instant,
        limit: Duration,
        on_event: &mut (dyn FnMut(&Event) + Send),
        approver: &dyn Approver,
    ) -> Result<String, AcpError> {
        self.answered = false;
        // What the agent sent while no turn was waiting (after an earlier answer, or while
        // idle) is not this turn's: updates are dropped, permission requests answered
        // `cancelled` (their senders dropped).
        while let Ok(m) = self.conn.incoming.try_recv() {
            if let conn::Incoming::Fault(e) = m {
                return Err(e);
            }
        }
        let params = acp::PromptRequest {
            session_id: self.session_id.clone(),
            prompt: vec![acp::ContentBlock::Text { annotations: None, text: task.to_owned(), meta: None }],
            meta: None,
        };
        let waiting = self.request::<agent_side::SessionPrompt>(&params);
        let mut state = TurnState::default();
        let answer = self.wait(agent_side::SessionPrompt::NAME, waiting, cancel, deadline, limit, Some((&mut state, &mut *on_event, approver))).await;
        // A thought still open when the turn ends (or fails) is progress too.
        state.flush_thought();
        deliver(&mut state, on_event);
        let cancelled = cancel.is_cancelled();
        let result = answer?;
        self.answered = true;
        if cancelled {
            return Err(AcpError::Interrupted);
        }
        let raw = result.map_err(|(code, message)| AcpError::PromptError { code, message })?;
        let result = match self.result::<agent_side::SessionPrompt>(&raw) {
            Ok(result) => result,
            // A stop reason newer than the schema ends the turn as any other but `end_turn`.
            Err(e) => {
                let Some(reason) = wire::unknown_stop_reason(&raw) else { return Err(e) };
                let reason = clip(&reason, 64);
                let message = format!("the ACP agent ended the turn with an unknown stop reason `{reason}`");
                return Err(AcpError::StopReason { reason, message });
            }
        };
        let message = match result.stop_reason {
            acp::StopReason::EndTurn => {
                return if state.too_large { Err(AcpError::ResultTooLarge) } else { Ok(state.result) };
            }
            acp::StopReason::Cancelled => return Err(AcpError::Interrupted),
            acp::StopReason::Refusal => "the ACP agent refused to go on (stop reason `refusal`)",
            acp::StopReason::MaxTokens => "the ACP agent reached its token limit (stop reason `max_tokens`)",
            acp::StopReason::MaxTurnRequests => "the ACP agent reached its limit of model requests for one turn (stop reason `max_turn_requests`)",
        };
        Err(AcpError::StopReason { reason: result.stop_reason.as_str().to_owned(), message: message.to_owned() })
    }

    /// Takes the agent's messages, in the order it sent them, until the answer to `waiting` (a
    /// request `method` of the host's) arrives: its result, or its JSON-RPC error as
    /// `(code, message)`. During a prompt (`turn` given), session updates become events and
    /// permission requests go to the approver; otherwise updates are ignored and permission
    /// requests answered `cancelled`. (The agent's other requests are answered by the
    /// connection: -32601, or -32602 for known ones whose params break the schema.)
    async fn wait(
        &mut self,
        method: &'static str,
        mut waiting: Waiting<'_>,
        cancel: &CancellationToken,
        deadline: Instant,
        limit: Duration,
        mut turn: Option<PromptTurn<'_>>,
    ) -> Result<Answer, AcpError> {
        let approver: Option<&dyn Approver> = turn.as_ref().map(|t| t.2);
        let mut queue: VecDeque<Permission> = VecDeque::new();
        let mut asking: Option<(Permission, BoxFuture<'_, ApprovalDecision>)> = None;
        // Set once `session/cancel` has gone out: the agent has until then to answer.
        let mut grace: Option<Instant> = None;
        let mut drain_until: Option<Instant> = None;
        loop {
            if asking.is_none()
                && grace.is_none()
                && let (Some(p), Some(approver)) = (queue.pop_front(), approver)
            {
                if let Some((_, on_event, _)) = turn.as_mut() {
                    on_event(&Event::ApprovalRequest { id: p.tool_call_id.clone(), prompt: p.prompt.clone() });
                }
                let (id, prompt) = (p.tool_call_id.clone(), p.prompt.clone());
                let fut: BoxFuture<'_, ApprovalDecision> = Box::pin(async move { approver.approve(&id, &prompt).await });
                asking = Some((p, fut));
            }
            let stop = [Some(deadline), grace, drain_until].into_iter().flatten().min().unwrap_or(deadline);
            // What the agent sent before its answer is taken before the answer.
            #[allow(clippy::large_enum_variant)] // one at a time, on the stack
            enum Next {
                Message(Option<conn::Incoming>),
                Answer(Result<Box<serde_json::value::RawValue>, PeerError>),
                Ended(Result<std::io::Result<()>, tokio::task::JoinError>),
            }
            let next = tokio::select! {
                biased;
                () = cancel.cancelled(), if grace.is_none() => {
                    if method != agent_side::SessionPrompt::NAME {
                        return Err(AcpError::Interrupted);
                    }
                    let params = acp::CancelNotification { session_id: self.session_id.clone(), meta: None };
                    let _ = agent_side::Notification::SessionCancel(params).send(&self.conn.peer).await;
                    // ACP: the client answers every pending permission request `cancelled`.
                    if let Some((p, _)) = asking.take() {
                        let _ = p.answer.send(None);
                    }
                    for p in queue.drain(..) {
                        let _ = p.answer.send(None);
                    }
                    grace = Some(Instant::now() + CANCEL_GRACE);
                    continue;
                }
                () = tokio::time::sleep_until(stop) => {
                    if grace.is_some_and(|g| Instant::now() >= g) {
                        return Err(AcpError::Interrupted);
                    }
                    if Instant::now() >= deadline {
                        return Err(AcpError::Timeout(limit));
                    }
                    return Err(self.gone().await);
                }
                decision = answer_of(asking.as_mut().map(|(_, f)| f)), if asking.is_some() => {
                    if let Some((p, _)) = asking.take() {
                        let _ = p.answer.send(choose_option(&p.options, decision.approved));
                    }
                    continue;
                }
                status = self.child.wait(), if self.exited.is_none() => {
                    // Let stdout drain: the agent may have answered just before exiting.
                    self.exited = Some(status.ok());
                    drain_until = Some(Instant::now() + AFTER_TERMINAL_GRACE);
                    continue;
                }
                m = self.conn.incoming.recv() => Next::Message(m),
                a = &mut waiting => Next::Answer(a),
                e = &mut self.conn.task, if self.conn_end.is_none() => Next::Ended(e),
            };
            if drain_until.is_some() {
                drain_until = Some(Instant::now() + AFTER_TERMINAL_GRACE);
            }
            match next {
                Next::Message(None) => return Err(self.gone().await),
                Next::Message(Some(conn::Incoming::Fault(e))) => return Err(e),
                Next::Message(Some(conn::Incoming::Update(n))) => {
                    if let Some((state, on_event, _)) = turn.as_mut()
                        && n.session_id == self.session_id
                    {
                        state.update(&n.update);
                        deliver(state, on_event);
                    }
                }
                Next::Message(Some(conn::Incoming::Permission(request, answer))) => {
                    let state = turn.as_ref().map(|t| &*t.0);
                    let p = permission(answer, &request, state);
                    if turn.is_none() || grace.is_some() {
                        let _ = p.answer.send(None);
                    } else {
                        queue.push_back(p);
                    }
                }
                Next::Answer(answer) => {
                    let answer = match answer {
                        Ok(result) => Ok(result.get().to_owned()),
                        Err(PeerError::Answered(e)) => Err((e.code, clip(&e.message, 4096))),
                        // The connection ended first: why is in its queue, or in how it ended.
                        Err(_) => {
                            while let Ok(m) = self.conn.incoming.try_recv() {
                                if let conn::Incoming::Fault(e) = m {
                                    return Err(e);
                                }
                            }
                            return Err(self.gone().await);
                        }
                    };
                    if let Some((state, on_event, _)) = turn.as_mut() {
                        state.flush_thought();
                        deliver(state, on_event);
                    }
                    return Ok(answer);
                }
                Next::Ended(end) => {
                    self.conn_end = Some(match end {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) => Some(e),
                        Err(e) => Some(std::io::Error::other(e)),
                    });
                    // What it sent before is still queued; its answer, if it came, too.
                    if self.conn_end.as_ref().is_some_and(Option::is_some) || self.conn.meter.spent() {
                        continue;
                    }
                    // Stdout closed: what the agent sent before is taken, then it is gone.
                    drain_until.get_or_insert_with(|| Instant::now() + AFTER_TERMINAL_GRACE);
                }
            }
        }
    }

    /// Why the agent cannot answer any more: its output went past `MAX_OUTPUT`, reading its
    /// stdout failed, or it exited (or closed its stdout).
    async fn gone(&mut self) -> AcpError {
        if self.conn.meter.spent() {
            return AcpError::OutputTooLarge;
        }
        if self.exited.is_none()
            && let Ok(Ok(s)) = tokio::time::timeout(AFTER_TERMINAL_GRACE, self.child.wait()).await
        {
            self.exited = Some(Some(s));
        }
        match self.conn_end.as_mut().and_then(Option::take) {
            Some(e) => AcpError::Io(e),
            None => AcpError::Exited(self.exited.flatten()),
        }
    }

    /// Ends the process group and reaps the agent: after closing stdin (ACP has no shutdown
    /// method) a `clean` agent gets time to exit by itself; otherwise SIGTERM, then SIGKILL.
    async fn close(mut self, clean: bool) {
        // Reading stops; what is queued for the agent is written and its stdin closed.
        self.conn.shutdown.trigger();
        let mut running = self.conn_end.is_none();
        if clean && running && tokio::time::timeout(Duration::from_millis(200), &mut self.conn.task).await.is_ok() {
            running = false;
        }
        end_process_group(&mut self.child, self.pgid, clean).await;
        self.closed = true;
        // Awaited after the abort, so the pipes the connection owns are closed when this returns.
        if running {
            self.conn.task.abort();
            let _ = (&mut self.conn.task).await;
        }
        if let Some(mut t) = self.stderr_task.take()
            && tokio::time::timeout(Duration::from_millis(100), &mut t).await.is_err()
        {
            t.abort();
            let _ = t.await;
        }
    }
}

impl Drop for AcpProcess {
    /// A process dropped without [`AcpProcess::close`] (a host dropped mid-turn) still takes
    /// its whole group with it.
    fn drop(&mut self) {
        if !self.closed
            && let Some(p) = self.pgid
        {
            let _ = killpg(p, Signal::SIGKILL);
        }
    }
}

/// The approver's answer, when there is a question out (never resolves otherwise).
async fn answer_of(asking: Option<&mut BoxFuture<'_, ApprovalDecision>>) -> ApprovalDecision {
    match asking {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// Delivers the progress lines gathered so far.
fn deliver(state: &mut TurnState, on_event: &mut (dyn FnMut(&Event) + Send)) {
    for text in state.out.drain(..) {
        if !text.is_empty() {
            on_event(&Event::Text { text });
        }
    }
}

/// The option to select: for an approval the agent's `allow_once`, for anything else its
/// `reject_once` (then `reject_always`). `None` (answered `cancelled`) when the agent offered
/// no such option: an approval never becomes an "always", and a denial never an approval.
fn choose_option(options: &[(String, acp::PermissionOptionKind)], approved: bool) -> Option<String> {
    use acp::PermissionOptionKind as Kind;
    let kinds: &[Kind] = if approved { &[Kind::AllowOnce] } else { &[Kind::RejectOnce, Kind::RejectAlways] };
    kinds.iter().find_map(|k| options.iter().find(|(_, kind)| kind == k).map(|(id, _)| id.clone()))
}

/// A permission request's text for a person to judge: the tool call's title, kind and what it
/// would do.
fn permission(answer: oneshot::Sender<Option<String>>, request: &acp::RequestPermissionRequest, state: Option<&TurnState>) -> Permission {
    let call = &request.tool_call;
    let title = call
        .title
        .clone()
        .or_else(|| state.and_then(|s| s.tools.get(&call.tool_call_id).cloned()))
        .unwrap_or_else(|| format!("tool call `{}`", clip(&call.tool_call_id, 128)));
    let mut prompt = format!("The agent asks permission: {title}");
    if let Some(kind) = &call.kind {
        prompt.push_str(&format!(" ({kind})"));
    }
    let texts = content_texts(call.content.as_deref().unwrap_or_default());
    if !texts.is_empty() {
        prompt.push('\n');
        prompt.push_str(&texts);
    } else if let Some(raw) = call.raw_input.as_ref().filter(|v| !v.is_null()) {
        prompt.push('\n');
        prompt.push_str(&raw.to_string());
    }
    let options = request.options.iter().map(|o| (o.option_id.clone(), o.kind)).collect();
    let tool_call_id = if call.tool_call_id.is_empty() { format!("acp-permission-{}", PERMISSIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) } else { call.tool_call_id.clone() };
    Permission { answer, tool_call_id: clip(&tool_call_id, 128), prompt: clip(&prompt, MAX_PROMPT_CHARS), options }
}

/// Numbers the permission requests whose tool call has no id, so that each approval has one.
static PERMISSIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The text of a tool call's text content items (a diff as its path).
fn content_texts(content: &[acp::ToolCallContent]) -> String {
    let mut out = Vec::new();
    for item in content {
        match item {
            acp::ToolCallContent::Content { content: acp::ContentBlock::Text { text, .. }, .. } => out.push(text.clone()),
            acp::ToolCallContent::Diff { path, .. } => out.push(format!("edit {path}")),
            _ => {}
        }
    }
    out.join("\n")
}

impl TurnState {
    /// Maps one `session/update` onto the result and progress lines.
    fn update(&mut self, update: &acp::SessionUpdate) {
        use acp::SessionUpdate as U;
        if !matches!(update, U::AgentThoughtChunk { .. }) {
            self.flush_thought();
        }
        match update {
            U::AgentMessageChunk { content, .. } => match content {
                acp::ContentBlock::Text { text, .. } => {
                    self.result_chars += text.chars().count();
                    if self.result_chars > MAX_TEXT_CHARS {
                        self.too_large = true;
                    } else {
                        self.result.push_str(text);
                    }
                    self.out.push(text.clone());
                }
                other => self.out.push(format!("[the agent sent {} content]", other.tag())),
            },
            U::AgentThoughtChunk { content: acp::ContentBlock::Text { text, .. }, .. } => {
                self.thought.push_str(text);
                // Whole lines go out as they complete; the rest when the thought ends.
                while let Some(i) = self.thought.find('\n') {
                    let line: String = self.thought.drain(..=i).collect();
                    let line = line.trim();
                    if !line.is_empty() {
                        self.out.push(clip(&format!("thinking: {line}"), MAX_TEXT_CHARS));
                    }
                }
            }
            U::ToolCall { tool_call_id, title, kind, status, .. } => {
                self.tools.insert(clip(tool_call_id, 256), clip(title, 256));
                let mut line = format!("tool: {title}");
                if let Some(k) = kind {
                    line.push_str(&format!(" [{k}]"));
                }
                if let Some(s) = status {
                    line.push_str(&format!(" ({s})"));
                }
                self.out.push(clip(&line, MAX_TEXT_CHARS));
            }
            U::ToolCallUpdate { tool_call_id, title, status, .. } => {
                if let Some(t) = title {
                    self.tools.insert(clip(tool_call_id, 256), clip(t, 256));
                }
                if let Some(s) = status {
                    let title = self.tools.get(tool_call_id).cloned().unwrap_or_else(|| clip(tool_call_id, 256));
                    self.out.push(clip(&format!("tool: {title}: {s}"), MAX_TEXT_CHARS));
                }
            }
            U::Plan { entries, .. } => {
                let entries: Vec<String> = entries.iter().map(|e| format!("[{}] {}", e.status, e.content)).collect();
                if !entries.is_empty() {
                    self.out.push(clip(&format!("plan: {}", entries.join("; ")), MAX_TEXT_CHARS));
                }
            }
            // A thought that is not text, modes, commands, usage and the like have no place in
            // the runner contract.
            _ => {}
        }
    }

    fn flush_thought(&mut self) {
        let rest = std::mem::take(&mut self.thought);
        let rest = rest.trim();
        if !rest.is_empty() {
            self.out.push(clip(&format!("thinking: {rest}"), MAX_TEXT_CHARS));
        }
    }
}

/// A document error as its first [`SHOWN_VIOLATIONS`] violations, each with its JSON pointer.
fn describe(e: DocumentError) -> String {
    let violations = e.into_violations();
    let mut out: Vec<String> = violations.iter().take(SHOWN_VIOLATIONS).map(|v| clip(&v.to_string(), 512)).collect();
    if violations.len() > SHOWN_VIOLATIONS {
        out.push(format!("and {} more", violations.len() - SHOWN_VIOLATIONS));
    }
    out.join("; ")
}

/// At most `max` code points of `s`.
fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => s[..i].to_owned(),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// Every request and notification the host sends is one the agent side of ACP's schema
    /// accepts, and every answer it gives a permission request one the client side's result
    /// type accepts.
    #[test]
    fn what_the_host_writes_is_acp() {
        fn request(method: &str, params: &impl Serialize) {
            let params = serde_json::to_vec(params).expect("params");
            assert!(matches!(agent_side::Request::decode(method, &params), Some(Ok(_))), "{method}");
        }
        request(agent_side::Initialize::NAME, &initialize_request());
        request(agent_side::SessionNew::NAME, &acp::NewSessionRequest { cwd: "/tmp".into(), additional_directories: None, mcp_servers: Vec::new(), meta: None });
        request(agent_side::SessionLoad::NAME, &acp::LoadSessionRequest { session_id: "s".into(), cwd: "/tmp".into(), additional_directories: None, mcp_servers: Vec::new(), meta: None });
        let prompt = acp::PromptRequest { session_id: "s".into(), prompt: vec![acp::ContentBlock::Text { annotations: None, text: "hi".into(), meta: None }], meta: None };
        request(agent_side::SessionPrompt::NAME, &prompt);
        let cancel = serde_json::to_vec(&acp::CancelNotification { session_id: "s".into(), meta: None }).expect("params");
        assert!(matches!(agent_side::Notification::decode("session/cancel", &cancel), Some(Ok(_))));
        for outcome in [acp::RequestPermissionOutcome::Cancelled {}, acp::RequestPermissionOutcome::Selected { option_id: "ok".into(), meta: None }] {
            let result = serde_json::to_vec(&acp::RequestPermissionResponse { outcome, meta: None }).expect("result");
            rt::parse_validated::<acp::RequestPermissionResponse>(&result).expect("a valid result");
        }
        // A key given twice inside a payload is the generated decoder's to refuse.
        let e = rt::parse_validated::<acp::PromptResponse>(br#"{"stopReason":"refusal","stopReason":"end_turn"}"#).expect_err("a duplicate");
        assert!(describe(e).contains("duplicate property `stopReason`"));
    }

    #[test]
    fn unknown_kinds_and_stop_reasons_are_told_from_malformed_ones() {
        let params = |update: Value| json!({ "sessionId": "s", "update": update }).to_string();
        assert_eq!(wire::unknown_update_kind(&params(json!({"sessionUpdate":"future_kind","x":1}))).as_deref(), Some("future_kind"));
        assert_eq!(wire::unknown_update_kind(&params(json!({"sessionUpdate":"agent_message_chunk"}))), None);
        assert_eq!(wire::unknown_update_kind(&params(json!({"sessionUpdate":7}))), None);
        assert_eq!(wire::unknown_update_kind(&params(json!({}))), None);
        assert_eq!(wire::unknown_update_kind("[]"), None);
        assert_eq!(wire::unknown_stop_reason(r#"{"stopReason":"paused"}"#).as_deref(), Some("paused"));
        assert_eq!(wire::unknown_stop_reason(r#"{"stopReason":"end_turn"}"#), None);
        assert_eq!(wire::unknown_stop_reason(r#"{"stopReason":1}"#), None);
    }

    fn update(v: Value) -> acp::SessionUpdate {
        rt::parse_validated(v.to_string().as_bytes()).unwrap_or_else(|e| panic!("{v}: {e}"))
    }

    fn check_updates(updates: &[Value], result: &str, progress: &[&str]) {
        let mut s = TurnState::default();
        for u in updates {
            s.update(&update(u.clone()));
        }
        s.flush_thought();
        assert_eq!(s.result, result);
        assert_eq!(s.out, progress);
    }

    #[test]
    fn updates_become_result_and_progress() {
        let msg = |t: &str| json!({"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":t}});
        let thought = |t: &str| json!({"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":t}});
        check_updates(&[msg("Hello"), msg(" world")], "Hello world", &["Hello", " world"]);
        check_updates(&[thought("let me "), thought("think\nmore"), msg("ok")], "ok", &["thinking: let me think", "thinking: more", "ok"]);
        check_updates(
            &[
                json!({"sessionUpdate":"tool_call","toolCallId":"c1","title":"Read a.txt","kind":"read","status":"pending"}),
                json!({"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed"}),
                json!({"sessionUpdate":"tool_call_update","toolCallId":"c1","content":[]}),
            ],
            "",
            &["tool: Read a.txt [read] (pending)", "tool: Read a.txt: completed"],
        );
        check_updates(
            &[json!({"sessionUpdate":"plan","entries":[{"content":"a","priority":"high","status":"completed"},{"content":"b","priority":"low","status":"pending"}]})],
            "",
            &["plan: [completed] a; [pending] b"],
        );
        check_updates(&[json!({"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"","mimeType":"image/png"}})], "", &["[the agent sent image content]"]);
        check_updates(&[json!({"sessionUpdate":"usage_update","used":1,"size":2}), json!({"sessionUpdate":"agent_thought_chunk","content":{"type":"image","data":"","mimeType":"image/png"}})], "", &[]);
    }

    #[test]
    fn options_fail_closed() {
        use acp::PermissionOptionKind as K;
        let all = vec![("a1".to_owned(), K::AllowAlways), ("a".to_owned(), K::AllowOnce), ("r".to_owned(), K::RejectOnce), ("ra".to_owned(), K::RejectAlways)];
        assert_eq!(choose_option(&all, true).as_deref(), Some("a"));
        assert_eq!(choose_option(&all, false).as_deref(), Some("r"));
        let always_only = vec![("a1".to_owned(), K::AllowAlways), ("ra".to_owned(), K::RejectAlways)];
        assert_eq!(choose_option(&always_only, true), None);
        assert_eq!(choose_option(&always_only, false).as_deref(), Some("ra"));
        assert_eq!(choose_option(&[], false), None);
    }

    #[test]
    fn permission_prompts_say_what_the_tool_would_do() {
        let request = |v: Value| -> acp::RequestPermissionRequest { rt::parse_validated(v.to_string().as_bytes()).unwrap_or_else(|e| panic!("{v}: {e}")) };
        let params = request(json!({"sessionId":"s","toolCall":{"toolCallId":"c1","title":"Write notes.txt","kind":"edit","content":[{"type":"content","content":{"type":"text","text":"add a line"}}]},"options":[{"optionId":"ok","name":"Allow","kind":"allow_once"}]}));
        let p = permission(oneshot::channel().0, &params, None);
        assert_eq!(p.prompt, "The agent asks permission: Write notes.txt (edit)\nadd a line");
        assert_eq!(p.tool_call_id, "c1");
        assert_eq!(p.options, vec![("ok".to_owned(), acp::PermissionOptionKind::AllowOnce)]);
        let mut s = TurnState::default();
        s.update(&update(json!({"sessionUpdate":"tool_call","toolCallId":"c2","title":"Run tests"})));
        let p = permission(oneshot::channel().0, &request(json!({"sessionId":"s","toolCall":{"toolCallId":"c2"},"options":[]})), Some(&s));
        assert_eq!(p.prompt, "The agent asks permission: Run tests");
        let p = permission(oneshot::channel().0, &request(json!({"sessionId":"s","toolCall":{"toolCallId":"c4","rawInput":{"command":"ls"}},"options":[]})), None);
        assert_eq!(p.prompt, "The agent asks permission: tool call `c4`\n{\"command\":\"ls\"}");
        let long = "x".repeat(MAX_PROMPT_CHARS + 10);
        let p = permission(oneshot::channel().0, &request(json!({"sessionId":"s","toolCall":{"toolCallId":"c3","title":long},"options":[]})), None);
        assert_eq!(p.prompt.chars().count(), MAX_PROMPT_CHARS);
    }

    #[test]
    fn errors_have_their_codes() {
        assert_eq!(AcpError::OutputTooLarge.to_runtime_error().details.and_then(|d| d.limit), Some(MAX_OUTPUT as i64));
        assert_eq!(AcpError::Exited(None).code(), ErrorCode::RunnerFailed);
        assert_eq!(AcpError::Interrupted.code(), ErrorCode::Interrupted);
        let e = AcpError::StopReason { reason: "refusal".into(), message: "the ACP agent refused to go on (stop reason `refusal`)".into() };
        assert!(e.to_runtime_error().message.contains("refusal"));
    }
}
