//! `openagents acp`: an Agent Client Protocol (v1) agent on stdin/stdout, so that editors (Zed,
//! JetBrains IDEs, Neovim and Emacs plugins) drive the operator's runners.
//!
//! It runs in process over the same engine `serve` builds (a `RunnerAgent` inside an
//! `RpcEngine`), behind the same operator gate, and speaks JSON-RPC through the openagents-rpc
//! core's line transport (`serve_lines` on stdin and stdout): the core reads bounded lines,
//! refuses what is not JSON-RPC 2.0 (batches included: ACP v1 has none), matches the editor's
//! answers to our requests, and owns stdout, so nothing but whole lines ever reaches it. Our
//! side is the agent-side service generated from ACP's schema
//! (`acp::service::agent_side::Service`, one typed function per method); what we send the
//! editor goes through the generated client side (`acp::service::client_side::Client` over
//! the connection's `Peer`). The core starts each message's call in the order it was read
//! (`RpcServer::in_order`), so `initialize` then `session/new`, or a prompt then its cancel,
//! are seen in that order. Three parts share one state:
//! - the calls: answered at once, except `session/prompt`, which joins the turn queue and
//!   waits for its answer, and `session/close` of a session whose turn runs;
//! - the worker: takes one queued prompt at a time, submits its turn, and answers the prompt
//!   only after the event pump has written every update the turn published;
//! - the event pump: the engine's events (`engine.subscribe(None)`) become `session/update`
//!   notifications, and the approval bridge's requests become a `tool_call` card plus
//!   `session/request_permission`.
//!
//! Sessions are bounded: at most `--max-sessions` ([`MAX_ACP_SESSIONS`] by default) are kept;
//! past it `session/new` closes the session idle the longest (never one with a prompt queued or
//! running: with none idle, `session/new` is refused as busy), and `session/close` closes one on
//! the client's word. Closing a session cancels its turn and ends the runner process it holds
//! (an ACP runner keeps one per conversation); a prompt to it is then an unknown session's.
//!
//! Every ACP message is one of the types generated from ACP's published schema
//! (`openagents_protocol::acp`): what we read goes through their exact decoders and validators,
//! what we write is built from them ([`messages`]). Every error, the core's own included
//! (`RpcServer::error_data`), carries our typed `RuntimeSubmitError` as its `data`.
//!
//! A line costs a few times its size at most: it is checked without building anything
//! (`rt::Skip`, the core's screen: a key given twice anywhere is refused with a null id), its
//! members are kept as raw text borrowed from it, its params are decoded only when they hold at
//! most [`messages::MAX_ACP_VALUES`] JSON values, and a prompt's blocks are counted before it is
//! decoded, at most [`MAX_PROMPT_BLOCKS`] of them.

mod messages;
mod sessions;

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Poll;
use std::time::Duration;

use clap::Args;
use openagents_protocol::acp;
use openagents_protocol::acp::service::{agent_side, client_side};
use openagents_protocol::rt::{self, RpcMethod, Skip, describe_json_error};
use openagents_rpc::{BoxFuture, Context, Handler, Limits, Peer, PeerError, RpcError, RpcServer, codes};
use openagents_sdk::protocol::{ApprovalReply, ErrorCode, ErrorDetails, InterruptParams, Method, RuntimeEvent, RuntimeSubmitError, SERVER_MAX_LINE_BYTES, ServerEvent, SubmitParams, Turn};
use openagents_sdk::server::events::Subscription;
use openagents_sdk::server::{Caller, RpcEngine};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufRead, AsyncRead};
use tokio::sync::{Notify, mpsc, oneshot, watch};

use acp::{SessionUpdate, StopReason};
use messages::{ACP_PROTOCOL_VERSION, value};

/// Prompts that may wait for the turn slot at once (each session has at most one).
pub const MAX_WAITING_PROMPTS: usize = 64;
/// The most sessions one `openagents acp` keeps by default (`--max-sessions`). An editor opens
/// a session per chat thread or tab and rarely closes them (ACP's `session/close` is recent), so
/// the cap must sit well above what a person keeps open in a day, yet bound what a looping or
/// hostile client can make us hold. A session itself is small (its cwd, at most 4 KiB, and its
/// runner's name), but an ACP runner keeps one process per session (conversation) until it is
/// closed or idles out, and a runner may keep memory by conversation id. 256 is four times the
/// [`MAX_WAITING_PROMPTS`] queue, so with every waiting prompt and the running turn busy most
/// sessions are still idle and one can make room, and its state is at most about a megabyte.
pub const MAX_ACP_SESSIONS: usize = 256;
/// The most content blocks one `session/prompt` may carry. The blocks flatten into one task of
/// at most [`TASK_MAX_CHARS`] characters, a blank line between blocks; 1024 blocks of 96
/// characters (a short sentence, or one `[name](file:///path)` link) already fill it, so no
/// prompt past the cap could run anyway, and reading stops at the cap (a 16 MiB line of 200 000
/// tiny blocks is refused after 1025 of them).
pub const MAX_PROMPT_BLOCKS: usize = 1024;
/// The longest task of a turn, in characters (`Turn.task`'s `maxLength` in `schema/Turn.json`):
/// a prompt is flattened up to one character past it, and the schema check refuses it then.
const TASK_MAX_CHARS: usize = 98_304;
/// The most calls the editor may have waiting at once (the core answers one more busy):
/// prompts wait for the turn slot (at most [`MAX_WAITING_PROMPTS`] of them, and the one
/// running), closes for their session's turn, loads for the store; four times the prompts leaves
/// room for the rest.
const MAX_ACP_CALLS: usize = 4 * MAX_WAITING_PROMPTS;
/// ACP's "Resource not found", for an unknown session.
const ACP_RESOURCE_NOT_FOUND: i64 = -32002;
/// The longest a tool-call title is, in characters.
const TITLE_CHARS: usize = 200;

/// Arguments of `openagents acp`.
#[derive(Args)]
pub struct AcpArgs {
    /// A runner sessions may use (repeatable). The first is the default; a session picks
    /// another with `"_meta": {"openagents/runner": "ID"}` in `session/new`.
    #[arg(long, required = true)]
    runner: Vec<String>,
    /// Seconds an approval waits for the editor's answer before it is denied (1 to 86400).
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    approval_timeout: u64,
    /// Working folder for the runtime (sessions name their own `cwd`; default: the current one).
    #[arg(long)]
    cwd: Option<String>,
    /// Sessions kept at once (1 to 65536); past it, `session/new` closes the one idle the
    /// longest, with the runner process it holds.
    #[arg(long, default_value_t = MAX_ACP_SESSIONS as u64, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    max_sessions: u64,
    #[command(flatten)]
    store: crate::store::StoreArgs,
}

/// Closes a conversation's kept ACP runner process (if it holds one); resolves once it is reaped.
type CloseConversation = Arc<dyn Fn(String) -> Pin<Box<dyn Future<Output = usize> + Send>> + Send + Sync>;

/// The engine `serve` builds (its agent and settings), and a handle on its ACP runners'
/// processes, so a closed session's process can be ended.
fn build_engine(runners: &[String], cwd: String, hub: openagents_sdk::server::events::EventHub) -> Result<(RpcEngine, CloseConversation), String> {
    let agent = crate::serve::runner_agent(runners)?;
    let host = agent.acp().clone();
    let close: CloseConversation = Arc::new(move |conversation: String| {
        let host = host.clone();
        Box::pin(async move { host.close_conversation(&conversation).await }) as Pin<Box<dyn Future<Output = usize> + Send>>
    });
    Ok((RpcEngine::with_events(agent, crate::serve::engine_config(runners, cwd), hub), close))
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("openagents acp: {message}");
    ExitCode::from(2)
}

/// Runs the ACP agent until stdin ends (or SIGINT/SIGTERM); exit 0 then.
pub fn acp(args: AcpArgs) -> ExitCode {
    let cwd = args.cwd.clone().unwrap_or_else(|| std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_else(|_| "/".into()));
    if let Err(e) = crate::serve::operator_gate(&cwd) {
        return fail(e);
    }
    let hub = match crate::store::open(&args.store, "acp") {
        Ok(h) => h,
        Err(e) => return fail(e),
    };
    let (engine, close) = match build_engine(&args.runner, cwd, hub) {
        Ok(e) => e,
        Err(e) => return fail(e),
    };
    engine.bridge().set_timeout(Duration::from_secs(args.approval_timeout));
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(r) => r,
        Err(e) => return fail(format!("cannot start: {e}")),
    };
    let max_sessions = usize::try_from(args.max_sessions).unwrap_or(MAX_ACP_SESSIONS);
    let code = runtime.block_on(run(engine, args.runner, close, max_sessions));
    // Tokio's read of stdin is a blocking read that cannot be cancelled: after a signal with the
    // input still open, waiting for it (as dropping the runtime does) would never end.
    runtime.shutdown_background();
    code
}

/// The JSON-RPC error for `e`: its `rpc_code`, and `data` the typed error itself.
fn rpc_error(e: &RuntimeSubmitError) -> RpcError {
    RpcError::new(e.code.rpc_code(), e.message.clone()).with_data(value(e))
}

/// The `data` of the errors the core makes itself (not JSON, not JSON-RPC 2.0, a batch, a line
/// too long, too many calls waiting): our typed error, its code told by the JSON-RPC code, as on
/// every other error.
fn core_error_data(e: &RpcError) -> Option<Value> {
    let code = match e.code {
        codes::PARSE_ERROR => ErrorCode::ParseError,
        codes::INVALID_REQUEST => ErrorCode::InvalidRequest,
        codes::METHOD_NOT_FOUND => ErrorCode::UnknownMethod,
        codes::INVALID_PARAMS => ErrorCode::InvalidParams,
        codes::BUSY => ErrorCode::Busy,
        codes::FRAME_TOO_LARGE => ErrorCode::FrameTooLarge,
        codes::SHUTTING_DOWN => ErrorCode::ShuttingDown,
        _ => ErrorCode::Internal,
    };
    Some(value(&err(code, e.message.clone())))
}

/// The core's screen: every line is exact JSON, as every message from a client must be. A key
/// given twice (two ids, two answers to a permission request) is refused with a null id, never
/// read as its last copy. The check builds nothing: a line of any shape costs no more than
/// itself here. Bad syntax and invalid UTF-8 pass, for the core's parse error.
fn exact(line: &[u8]) -> Result<(), RpcError> {
    let Ok(text) = std::str::from_utf8(line) else { return Ok(()) };
    match serde_json::from_str::<Skip>(text) {
        Err(e) if e.is_data() => Err(rpc_error(&err(ErrorCode::InvalidRequest, format!("the message is not exact JSON: cannot be represented: {}", describe_json_error(&e))))),
        _ => Ok(()),
    }
}

/// The methods of ACP's agent side this agent offers (with `_openagents/status`, ours).
const OFFERED: &[&str] = &[
    acp::agent_side::Initialize::NAME,
    acp::agent_side::SessionNew::NAME,
    acp::agent_side::SessionLoad::NAME,
    acp::agent_side::SessionResume::NAME,
    acp::agent_side::SessionList::NAME,
    acp::agent_side::SessionPrompt::NAME,
    "session/cancel",
    acp::agent_side::SessionClose::NAME,
];

/// -32601 for `method`, with our typed error.
fn unknown_method(method: &str) -> RpcError {
    rpc_error(&err(ErrorCode::UnknownMethod, format!("`{method}` is not a method this agent offers ({}, _openagents/status)", OFFERED.join(", "))))
}

fn err(code: ErrorCode, message: impl Into<String>) -> RuntimeSubmitError {
    RuntimeSubmitError { retryable: code.retryable(), code, message: message.into(), details: None }
}

/// The most violations an error's `details` lists.
const MAX_VIOLATIONS: usize = 16;

/// An `invalid_params` error saying `what`, with the schema's `violations` in its details.
fn invalid_params(what: String, violations: Vec<openagents_protocol::rt::Violation>) -> RuntimeSubmitError {
    let mut e = err(ErrorCode::InvalidParams, what);
    if !violations.is_empty() {
        let omitted = violations.len().saturating_sub(MAX_VIOLATIONS);
        e.details = Some(ErrorDetails {
            violations: Some(violations.into_iter().take(MAX_VIOLATIONS).map(|v| openagents_sdk::protocol::Violation { pointer: v.pointer, keyword: v.keyword, message: v.message }).collect()),
            violations_omitted: (omitted > 0).then_some(omitted as i64),
            known: None,
            holder: None,
            expires_at_ms: None,
            limit: None,
        });
    }
    e
}

/// The error for a prompt whose params were refused.
fn prompt_error(e: messages::PromptError) -> RuntimeSubmitError {
    match e {
        messages::PromptError::TooManyBlocks => {
            let mut e = err(ErrorCode::InvalidParams, format!("the prompt has more than {MAX_PROMPT_BLOCKS} content blocks (MAX_PROMPT_BLOCKS): they could never fit one task of {TASK_MAX_CHARS} characters; send fewer"));
            e.details = Some(ErrorDetails { violations: None, violations_omitted: None, known: None, holder: None, expires_at_ms: None, limit: Some(MAX_PROMPT_BLOCKS as i64) });
            e
        }
        messages::PromptError::Unsupported { index, kind } => err(ErrorCode::InvalidParams, format!("prompt block {index} (type `{kind}`): not supported (promptCapabilities: text and resource_link only)")),
    }
}

/// The schema's violations of `turn` under `pointer` (`/cwd`, `/task`), as one typed error.
fn turn_violations(turn: &Turn, pointer: &str, what: &str) -> Result<(), RuntimeSubmitError> {
    let Err(violations) = openagents_sdk::protocol::rt::Validate::validate(turn) else { return Ok(()) };
    let ours: Vec<_> = violations.into_iter().filter(|v| v.pointer.starts_with(pointer)).collect();
    if ours.is_empty() {
        return Ok(());
    }
    let mut e = err(ErrorCode::InvalidParams, format!("{what}: {}", ours.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")));
    e.details = Some(ErrorDetails {
        violations: Some(ours.into_iter().map(|v| openagents_sdk::protocol::Violation { pointer: v.pointer, keyword: v.keyword, message: v.message }).collect()),
        violations_omitted: None,
        known: None,
        holder: None,
        expires_at_ms: None,
        limit: None,
    });
    Err(e)
}

struct Session {
    cwd: String,
    runner: String,
    /// The session's one prompt, queued or running.
    prompt: Option<Prompt>,
    /// When it was created or last prompted (a count, not a clock): the session idle the longest
    /// has the lowest.
    used: u64,
    /// Closed (`session/close`) while its turn runs: the close calls waiting, answered once the
    /// turn has ended and its runner process is gone. A closed session takes no prompt.
    closing: Option<Vec<oneshot::Sender<()>>>,
}

struct Prompt {
    /// Where its answer goes: the `session/prompt` call waits for it.
    answer: oneshot::Sender<Result<StopReason, RuntimeSubmitError>>,
    task: String,
    /// The client sent `session/cancel` for it: it answers `cancelled`, whatever happens.
    cancel: bool,
    /// True once its answer is queued on the connection (or its call is gone): a
    /// `session/close` that ends its turn answers after it.
    replied: watch::Receiver<bool>,
}

struct Running {
    session: String,
    assignment: String,
    /// Its `turn_started` has been seen.
    started: bool,
    progress: usize,
    result_sent: bool,
}

/// An open approval card.
struct Card {
    /// Our `session/request_permission` still waiting for the client's answer: its id, and the
    /// task waiting for the answer (ended when the request is withdrawn).
    request: Option<(u64, tokio::task::AbortHandle)>,
}

#[derive(Default)]
struct State {
    initialized: bool,
    notices: bool,
    client: String,
    sessions: HashMap<String, Session>,
    queue: VecDeque<String>,
    running: Option<Running>,
    next_session: u64,
    next_use: u64,
    next_turn: u64,
    /// Our outstanding permission requests: request id → approval id.
    permissions: HashMap<u64, String>,
    /// Open cards by approval id.
    cards: HashMap<String, Card>,
    /// The client answered a permission request with "method not found": it cannot answer.
    cannot_answer: bool,
    /// Sessions a `session/load` or `session/resume` is reopening, and how many.
    reopening: HashMap<String, usize>,
    closing: bool,
}

struct Adapter {
    engine: RpcEngine,
    /// Ends a closed session's runner process.
    close_conversation: CloseConversation,
    /// The most sessions kept at once.
    max_sessions: usize,
    caller: Caller,
    runners: Vec<String>,
    conn: u64,
    /// The editor's connection, once it has called: what we send it goes through the typed
    /// client of ACP's client side over it.
    editor: OnceLock<(Peer, client_side::Client)>,
    state: Mutex<State>,
    work: Notify,
    /// Told when a reopening ends.
    reopened: Notify,
    /// A stamp making session ids unique across processes (runners may keep memory by
    /// conversation id).
    stamp: u128,
}

type Barrier = (i64, oneshot::Sender<()>);

async fn run(engine: RpcEngine, runners: Vec<String>, close_conversation: CloseConversation, max_sessions: usize) -> ExitCode {
    // Subscribed before anything can run, so no event of any turn is missed.
    let sub = engine.subscribe(None);
    let (bridge_tx, bridge_rx) = mpsc::channel(64);
    // The editor is the parent process, trusted like `serve --stdio`'s, and the runtime's one
    // approval frontend.
    let caller = Caller { name: "acp".into(), ..Caller::stdio() };
    let conn = engine.bridge().attach_caller(&caller, bridge_tx);
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let adapter = Arc::new(Adapter { engine: engine.clone(), close_conversation, max_sessions, caller, runners, conn, editor: OnceLock::new(), state: Mutex::new(State::default()), work: Notify::new(), reopened: Notify::new(), stamp });
    let (barrier_tx, barrier_rx) = mpsc::channel::<Barrier>(4);
    let pump = tokio::spawn(Arc::clone(&adapter).pump(sub, bridge_rx, barrier_rx));
    let worker = tokio::spawn(Arc::clone(&adapter).worker(barrier_tx));

    let server = RpcServer::new(AcpHandler(Agent(Arc::clone(&adapter))))
        .limits(Limits { max_frame_bytes: SERVER_MAX_LINE_BYTES, max_in_flight: MAX_ACP_CALLS, max_batch: 0, ..Limits::default() })
        .in_order(true)
        .screen(exact)
        .error_data(core_error_data);
    // Stdin's end (or a signal) closes the adapter: what waits for a turn or for the editor is
    // answered, so the core's wait for the calls in flight ends.
    let (ended_tx, ended_rx) = oneshot::channel();
    let (served_tx, served_rx) = oneshot::channel::<()>();
    let input = InputEnd { inner: tokio::io::BufReader::with_capacity(64 * 1024, tokio::io::stdin()), ended: Some(ended_tx) };
    let closer = {
        let adapter = Arc::clone(&adapter);
        let shutdown = server.shutdown().clone();
        tokio::spawn(async move {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = ended_rx => {}
                _ = served_rx => {}
                _ = tokio::signal::ctrl_c() => { eprintln!("openagents acp: interrupted; shutting down"); shutdown.trigger() }
                Some(()) = async { match term.as_mut() { Some(t) => t.recv().await, None => std::future::pending().await } } => { eprintln!("openagents acp: terminated; shutting down"); shutdown.trigger() }
            }
            adapter.close().await;
        })
    };
    if let Err(e) = openagents_rpc::serve_lines(&server, input, tokio::io::stdout()).await {
        eprintln!("openagents acp: cannot read stdin or write stdout: {e}");
    }
    let _ = served_tx.send(());
    let _ = closer.await;
    let abort = worker.abort_handle();
    if tokio::time::timeout(Duration::from_secs(10), worker).await.is_err() {
        abort.abort();
    }
    pump.abort();
    let _ = pump.await;
    engine.bridge().detach(conn);
    ExitCode::SUCCESS
}

/// A `session/load` or `session/resume` under way, on record in [`State::reopening`] until it
/// ends, however it ends.
struct Reopening<'a> {
    adapter: &'a Adapter,
    session: String,
}

impl<'a> Reopening<'a> {
    fn start(adapter: &'a Adapter, session: &str) -> Reopening<'a> {
        *adapter.lock().reopening.entry(session.to_owned()).or_default() += 1;
        Reopening { adapter, session: session.to_owned() }
    }
}

impl Drop for Reopening<'_> {
    fn drop(&mut self) {
        let mut st = self.adapter.lock();
        if let Some(n) = st.reopening.get_mut(&self.session) {
            *n -= 1;
            if *n == 0 {
                st.reopening.remove(&self.session);
            }
        }
        drop(st);
        self.adapter.reopened.notify_waiters();
    }
}

/// Stdin, telling once it has ended (or failed).
struct InputEnd<R> {
    inner: R,
    ended: Option<oneshot::Sender<()>>,
}

impl<R: AsyncRead + Unpin> AsyncRead for InputEnd<R> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<R: AsyncBufRead + Unpin> AsyncBufRead for InputEnd<R> {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<std::io::Result<&[u8]>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_fill_buf(cx);
        if (matches!(&polled, Poll::Ready(Err(_))) || matches!(&polled, Poll::Ready(Ok(b)) if b.is_empty()))
            && let Some(ended) = this.ended.take()
        {
            let _ = ended.send(());
        }
        polled
    }

    fn consume(self: Pin<&mut Self>, amt: usize) {
        Pin::new(&mut self.get_mut().inner).consume(amt);
    }
}

/// The core's handler: the checks before any decoding (the editor initialized, a prompt's
/// blocks, the values of the params), then ACP's generated decoders and the agent side's
/// generated dispatch into [`Agent`].
struct AcpHandler(Agent);

impl Handler for AcpHandler {
    fn call<'a>(&'a self, cx: &'a Context, method: &'a str, params: Option<&'a RawValue>) -> BoxFuture<'a, Result<Box<RawValue>, RpcError>> {
        Box::pin(self.0.call(cx, method, params))
    }
}

/// The agent side of ACP, as the service generated from its schema.
struct Agent(Arc<Adapter>);

impl Agent {
    async fn call(&self, cx: &Context, method: &str, params: Option<&RawValue>) -> Result<Box<RawValue>, RpcError> {
        let a = &self.0;
        a.editor.get_or_init(|| (cx.peer().clone(), client_side::Client::new(cx.peer().clone())));
        // A notification's answer is dropped: one before `initialize` is ignored.
        if method != "initialize" && !a.lock().initialized {
            return Err(rpc_error(&err(ErrorCode::InvalidRequest, format!("`{method}` before `initialize`: send `initialize` first"))));
        }
        if method == "_openagents/status" {
            return serde_json::value::to_raw_value(&a.engine.status()).map_err(RpcError::internal);
        }
        // ACP's other methods are not advertised: unknown, whatever their params.
        if !OFFERED.contains(&method) {
            return Err(unknown_method(method));
        }
        let text = params.map_or("{}", RawValue::get);
        let invalid = |(why, v): (String, Vec<rt::Violation>)| rpc_error(&invalid_params(format!("invalid `{method}` params: {why}"), v));
        // At most MAX_PROMPT_BLOCKS blocks and MAX_ACP_VALUES values, counted before anything
        // is decoded.
        if method == acp::agent_side::SessionPrompt::NAME && messages::too_many_blocks(text, MAX_PROMPT_BLOCKS) {
            return Err(rpc_error(&prompt_error(messages::PromptError::TooManyBlocks)));
        }
        match rt::count_values(text, messages::MAX_ACP_VALUES) {
            Ok(Some(_)) => {}
            Ok(None) => return Err(invalid(messages::too_many_values(messages::MAX_ACP_VALUES))),
            Err(e) => return Err(invalid((format!("not JSON: {}", describe_json_error(&e)), Vec::new()))),
        }
        if let Some(request) = acp::agent_side::Request::decode(method, text.as_bytes()) {
            return agent_side::dispatch_request(self, cx, request.map_err(|e| invalid(messages::document_error(e)))?).await;
        }
        match acp::agent_side::Notification::decode(method, text.as_bytes()) {
            Some(Ok(n)) => agent_side::dispatch_notification(self, cx, n).await,
            Some(Err(e)) => eprintln!("openagents acp: ignoring {method}: {}", messages::document_error(e).0),
            None => {}
        }
        Ok(openagents_rpc::null())
    }
}

impl agent_side::Service for Agent {
    async fn initialize(&self, _cx: &Context, req: acp::InitializeRequest) -> Result<acp::InitializeResponse, RpcError> {
        Ok(self.0.initialize(req))
    }

    async fn session_new(&self, cx: &Context, req: acp::NewSessionRequest) -> Result<acp::NewSessionResponse, RpcError> {
        let (result, session, notice, evicted) = self.0.new_session(req).map_err(|e| rpc_error(&e))?;
        // With a session evicted to make room, the answer waits until its runner process is gone.
        if let Some(old) = evicted {
            self.0.end_conversation(&old).await;
        }
        // Nothing is sent on a session before the answer that names it.
        if let Some(update) = notice {
            let this = Arc::clone(&self.0);
            cx.after_reply(async move { this.send_update(&session, update).await });
        }
        Ok(result)
    }

    async fn session_prompt(&self, cx: &Context, req: acp::PromptRequest) -> Result<acp::PromptResponse, RpcError> {
        // Queued at once (before the next message is read), unless its session is being
        // reopened: then once it is.
        self.0.reopened(&req.session_id).await;
        let (answer, replied) = self.0.prompt(req)?;
        // A `session/close` waiting for this turn answers once this answer is queued.
        cx.after_reply(async move {
            replied.send_replace(true);
        });
        match answer.await {
            Ok(Ok(stop_reason)) => Ok(acp::PromptResponse { stop_reason, meta: None }),
            Ok(Err(e)) => Err(rpc_error(&e)),
            Err(_) => Err(rpc_error(&err(ErrorCode::Interrupted, "the agent stopped before this prompt was answered"))),
        }
    }

    async fn session_list(&self, _cx: &Context, req: acp::ListSessionsRequest) -> Result<acp::ListSessionsResponse, RpcError> {
        self.0.list_sessions(req).await.map_err(|e| rpc_error(&e))
    }

    async fn session_load(&self, _cx: &Context, req: acp::LoadSessionRequest) -> Result<acp::LoadSessionResponse, RpcError> {
        self.0.load_session(req).await
    }

    async fn session_close(&self, _cx: &Context, req: acp::CloseSessionRequest) -> Result<acp::CloseSessionResponse, RpcError> {
        self.0.close_session(req).await
    }

    async fn session_cancel(&self, _cx: &Context, req: acp::CancelNotification) {
        self.0.cancel(&req.session_id).await;
    }

    async fn authenticate(&self, _cx: &Context, _req: acp::AuthenticateRequest) -> Result<acp::AuthenticateResponse, RpcError> {
        Err(unknown_method(acp::agent_side::Authenticate::NAME))
    }

    async fn logout(&self, _cx: &Context, _req: acp::LogoutRequest) -> Result<acp::LogoutResponse, RpcError> {
        Err(unknown_method(acp::agent_side::Logout::NAME))
    }

    async fn session_delete(&self, _cx: &Context, _req: acp::DeleteSessionRequest) -> Result<acp::DeleteSessionResponse, RpcError> {
        Err(unknown_method(acp::agent_side::SessionDelete::NAME))
    }

    async fn session_resume(&self, _cx: &Context, req: acp::ResumeSessionRequest) -> Result<acp::ResumeSessionResponse, RpcError> {
        self.0.resume_session(req).await
    }

    async fn session_set_config_option(&self, _cx: &Context, _req: acp::SetSessionConfigOptionRequest) -> Result<acp::SetSessionConfigOptionResponse, RpcError> {
        Err(unknown_method(acp::agent_side::SessionSetConfigOption::NAME))
    }

    async fn session_set_mode(&self, _cx: &Context, _req: acp::SetSessionModeRequest) -> Result<acp::SetSessionModeResponse, RpcError> {
        Err(unknown_method(acp::agent_side::SessionSetMode::NAME))
    }
}

/// The first line of `prompt`, at most [`TITLE_CHARS`] characters.
fn title(prompt: &str) -> String {
    let line = prompt.lines().find(|l| !l.trim().is_empty()).unwrap_or("Approval requested").trim();
    let mut t: String = line.chars().take(TITLE_CHARS).collect();
    if line.chars().count() > TITLE_CHARS {
        t.push('…');
    }
    t
}

impl Adapter {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn send_update(&self, session: &str, update: SessionUpdate) {
        let Some((_, editor)) = self.editor.get() else { return };
        // Fails only once the editor's connection has closed: nobody is left to tell.
        let _ = editor.session_update(acp::SessionNotification { session_id: session.to_owned(), update, meta: None }).await;
    }

    /// Answers the `session/prompt` call waiting for `prompt`.
    fn answer_prompt(prompt: Prompt, outcome: Result<StopReason, RuntimeSubmitError>) {
        let _ = prompt.answer.send(outcome);
    }

    fn initialize(&self, req: acp::InitializeRequest) -> acp::InitializeResponse {
        let notices = req.client_capabilities.as_ref().and_then(|c| c.session.as_ref()).is_some_and(|s| s.notices.is_some());
        let client = req.client_info.as_ref().map_or_else(|| "an unnamed client".into(), |i| i.name.clone());
        let version = req.client_info.as_ref().map(|i| format!(" {}", i.version)).unwrap_or_default();
        eprintln!("openagents acp: {client}{version} connected (asked for ACP {}, speaking {ACP_PROTOCOL_VERSION})", req.protocol_version);
        {
            let mut st = self.lock();
            st.initialized = true;
            st.notices = notices;
            st.client = client;
        }
        let ours = messages::InitializeMeta {
            protocol_version: openagents_sdk::protocol::PROTOCOL_VERSION.into(),
            schema_digest: openagents_sdk::protocol::SCHEMA_DIGEST.into(),
            max_sessions: self.max_sessions,
        };
        messages::initialize_response(env!("CARGO_PKG_VERSION"), &ours)
    }

    /// The result, the session id, the notice to send after the result (if any), and the
    /// session closed to make room for it (if any), whose runner process is to be ended.
    #[allow(clippy::type_complexity)]
    fn new_session(&self, req: acp::NewSessionRequest) -> Result<(acp::NewSessionResponse, String, Option<SessionUpdate>, Option<String>), RuntimeSubmitError> {
        // Our one member of `_meta` (present, even as `null`, it must name a runner); the
        // others are the client's, read by no one here.
        let meta = req.meta.as_ref().map(rt::RawObject::to_map).transpose().map_err(|e| err(ErrorCode::InvalidParams, format!("`_meta`: {e}")))?;
        let runner = match meta.as_ref().and_then(|m| m.get("openagents/runner")) {
            None => self.runners[0].clone(),
            Some(Value::String(r)) if self.runners.contains(r) => r.clone(),
            Some(Value::String(r)) => return Err(err(ErrorCode::InvalidParams, format!("`_meta.openagents/runner` \"{}\" is not one of this agent's runners ({})", r.escape_debug(), self.runners.join(", ")))),
            Some(_) => return Err(err(ErrorCode::InvalidParams, format!("`_meta.openagents/runner` must be a string naming one of this agent's runners ({})", self.runners.join(", ")))),
        };
        // The same check as `Turn.cwd`.
        turn_violations(&Turn::new("a", "a", runner.clone(), "a", req.cwd.clone()), "/cwd", "`cwd` is not an absolute path a turn can use")?;
        let ignored: Vec<String> = req.mcp_servers.iter().map(|s| s.get("name").and_then(Value::as_str).unwrap_or("(unnamed)").to_owned()).collect();
        let mut st = self.lock();
        st.next_session += 1;
        let session_id = format!("acp-{}-{}-{}", self.stamp, std::process::id(), st.next_session);
        let evicted = self.open_session(&mut st, session_id.clone(), req.cwd, runner)?;
        let notices = st.notices;
        drop(st);
        let mut notice = None;
        if !ignored.is_empty() {
            let what = format!("ignored {} MCP server(s) from the editor ({}): openagents runs only the operator's runners and never launches a command a client names", ignored.len(), ignored.join(", "));
            eprintln!("openagents acp: session {session_id}: {what}");
            if notices {
                notice = Some(messages::warning(what));
            }
        }
        Ok((messages::new_session_response(session_id.clone(), ignored), session_id, notice, evicted))
    }

    /// Keeps session `id` (new, or loaded from the store): at the cap, the session idle the
    /// longest goes first, and its id is returned so that its runner process can be ended.
    fn open_session(&self, st: &mut State, id: String, cwd: String, runner: String) -> Result<Option<String>, RuntimeSubmitError> {
        if st.closing {
            return Err(err(ErrorCode::ShuttingDown, "the agent is shutting down and takes no new sessions"));
        }
        // At the cap: the session idle the longest goes (one with a prompt queued or running, or
        // closing, never does).
        let mut evicted = None;
        if st.sessions.len() >= self.max_sessions && !st.sessions.contains_key(&id) {
            let oldest = st.sessions.iter().filter(|(_, s)| s.prompt.is_none() && s.closing.is_none()).min_by_key(|(_, s)| s.used).map(|(id, _)| id.clone());
            let Some(oldest) = oldest else {
                return Err(err(
                    ErrorCode::Busy,
                    format!("all {} sessions this agent keeps (--max-sessions) have a prompt queued or running; close one (session/close), or retry when a prompt has been answered", self.max_sessions),
                ));
            };
            st.sessions.remove(&oldest);
            eprintln!("openagents acp: {} sessions: closed session {oldest}, idle the longest, to make room", self.max_sessions);
            evicted = Some(oldest);
        }
        st.next_use += 1;
        let used = st.next_use;
        st.sessions.insert(id, Session { cwd, runner, prompt: None, used, closing: None });
        Ok(evicted)
    }

    /// `session/list`: the conversations the store keeps on this agent's runners, the most
    /// recently updated first, [`SESSION_PAGE`] at a time (only those whose first turn ran in
    /// `cwd`, when it is given).
    async fn list_sessions(&self, req: acp::ListSessionsRequest) -> Result<acp::ListSessionsResponse, RuntimeSubmitError> {
        let after = match req.cursor.as_deref() {
            None => None,
            Some(c) => Some(sessions::decode_cursor(c).ok_or_else(|| err(ErrorCode::InvalidParams, "`cursor` is not one this agent gave: pass a `nextCursor` of session/list"))?),
        };
        let store = self.engine.events().store().clone();
        let runners = self.runners.clone();
        let page = tokio::task::spawn_blocking(move || sessions::list(store.as_ref(), after, req.cwd.as_deref(), &runners)).await;
        match page {
            Ok(Ok(page)) => Ok(page),
            Ok(Err(e)) => Err(err(ErrorCode::Internal, format!("cannot read the store: {e}"))),
            Err(e) => Err(err(ErrorCode::Internal, format!("the store's read failed: {e}"))),
        }
    }

    /// `session/load`: the stored conversation `sessionId` becomes a session again (its runner,
    /// the `cwd` given), its turns are replayed as `session/update`s (each prompt, the progress
    /// and approval cards the store still has, each result), then the request is answered. A
    /// prompt to it continues the conversation.
    async fn load_session(&self, req: acp::LoadSessionRequest) -> Result<acp::LoadSessionResponse, RpcError> {
        self.reopen_session(req.session_id, req.cwd, true).await?;
        Ok(acp::LoadSessionResponse::default())
    }

    /// `session/resume`: as `session/load`, without the replay (the editor keeps the history).
    async fn resume_session(&self, req: acp::ResumeSessionRequest) -> Result<acp::ResumeSessionResponse, RpcError> {
        self.reopen_session(req.session_id, req.cwd, false).await?;
        Ok(acp::ResumeSessionResponse::default())
    }

    /// The stored conversation `sid` becomes a session again (its runner, `cwd`); with `replay`,
    /// its turns are sent as `session/update`s first. A prompt to `sid` read meanwhile waits
    /// until this is done.
    async fn reopen_session(&self, sid: String, cwd: String, replay: bool) -> Result<(), RpcError> {
        if self.lock().sessions.get(&sid).is_some_and(|s| s.prompt.is_some() || s.closing.is_some()) {
            return Err(rpc_error(&err(ErrorCode::Busy, format!("session `{sid}` has a prompt in progress here; wait for its answer"))));
        }
        let _reopening = Reopening::start(self, &sid);
        let store = self.engine.events().store().clone();
        let key = sid.clone();
        let history = tokio::task::spawn_blocking(move || sessions::history(store.as_ref(), &key)).await;
        let history = match history {
            Ok(Ok(Some(h))) => h,
            Ok(Ok(None)) => return Err(Self::unknown_session(&sid)),
            Ok(Err(e)) => return Err(rpc_error(&err(ErrorCode::Internal, format!("cannot read the store: {e}")))),
            Err(e) => return Err(rpc_error(&err(ErrorCode::Internal, format!("the store's read failed: {e}")))),
        };
        if !self.runners.contains(&history.runner) {
            return Err(rpc_error(&err(ErrorCode::InvalidParams, format!("session `{sid}` ran on runner `{}`, which is not one of this agent's runners ({})", history.runner, self.runners.join(", ")))));
        }
        turn_violations(&Turn::new("a", "a", history.runner.clone(), "a", cwd.clone()), "/cwd", "`cwd` is not an absolute path a turn can use").map_err(|e| rpc_error(&e))?;
        let evicted = {
            let mut st = self.lock();
            self.open_session(&mut st, sid.clone(), cwd, history.runner.clone()).map_err(|e| rpc_error(&e))?
        };
        if let Some(old) = evicted {
            self.end_conversation(&old).await;
        }
        if replay {
            for update in history.updates {
                self.send_update(&sid, update).await;
            }
        }
        Ok(())
    }

    /// Waits while a `session/load` or `session/resume` of `session` is under way.
    async fn reopened(&self, session: &str) {
        loop {
            let done = self.reopened.notified();
            if !self.lock().reopening.contains_key(session) {
                return;
            }
            done.await;
        }
    }

    /// Ends the runner process a closed session holds (an ACP runner keeps one per
    /// conversation); returns once it is reaped.
    async fn end_conversation(&self, session: &str) {
        let closed = (self.close_conversation)(session.to_owned()).await;
        if closed > 0 {
            eprintln!("openagents acp: session {session} closed: its runner process has ended");
        }
    }

    /// ACP's "Resource not found" (-32002), with our typed error and the session id in `data`:
    /// for a session never made, and for one closed.
    fn unknown_session(session: &str) -> RpcError {
        let e = err(ErrorCode::InvalidParams, format!("unknown session `{session}`: create one with session/new"));
        let mut data = value(&e);
        data["sessionId"] = Value::String(session.to_owned());
        RpcError::new(ACP_RESOURCE_NOT_FOUND, e.message).with_data(data)
    }

    /// Queues a prompt (its blocks counted and decoded already): its blocks flattened into the
    /// task, cut just past its limit. Returns where its answer will come.
    fn prompt(&self, req: acp::PromptRequest) -> Result<(oneshot::Receiver<Result<StopReason, RuntimeSubmitError>>, watch::Sender<bool>), RpcError> {
        let req = messages::flatten_prompt(req, TASK_MAX_CHARS).map_err(|e| rpc_error(&prompt_error(e)))?;
        let task = req.task;
        let mut st = self.lock();
        if st.closing {
            return Err(rpc_error(&err(ErrorCode::ShuttingDown, "the agent is shutting down and takes no new prompts")));
        }
        let waiting = st.queue.len();
        st.next_use += 1;
        let used = st.next_use;
        let Some(session) = st.sessions.get_mut(&req.session_id).filter(|s| s.closing.is_none()) else { return Err(Self::unknown_session(&req.session_id)) };
        if session.prompt.is_some() {
            return Err(rpc_error(&err(ErrorCode::InvalidParams, format!("session `{}` already has a prompt in progress; wait for its answer, or send session/cancel", req.session_id))));
        }
        turn_violations(&Turn::new("a", "a", session.runner.clone(), task.clone(), session.cwd.clone()), "/task", "the prompt cannot be a turn's task").map_err(|e| rpc_error(&e))?;
        if waiting >= MAX_WAITING_PROMPTS {
            return Err(rpc_error(&err(ErrorCode::Busy, format!("{waiting} prompts are already waiting for the turn slot; retry when one has been answered"))));
        }
        let (answer, answered) = oneshot::channel();
        let (replied_tx, replied) = watch::channel(false);
        session.prompt = Some(Prompt { answer, task, cancel: false, replied });
        session.used = used;
        st.queue.push_back(req.session_id);
        drop(st);
        self.work.notify_one();
        Ok((answered, replied_tx))
    }

    /// `session/close`: as `session/cancel`, then the session is gone (a prompt to it is an
    /// unknown session's) and so is the runner process it holds. Answered `{}` once that process
    /// has ended: at once for an idle session, after its prompt's answer for one with a prompt.
    async fn close_session(&self, req: acp::CloseSessionRequest) -> Result<acp::CloseSessionResponse, RpcError> {
        let sid = req.session_id;
        enum Then {
            /// Its turn runs: the worker answers once it ends (after interrupting it, if started);
            /// the close is answered after the prompt.
            Running(Option<String>, oneshot::Receiver<()>, Option<watch::Receiver<bool>>),
            /// Closed now; a queued prompt to answer `cancelled` first.
            Closed(Option<Prompt>),
        }
        let then = {
            let mut st = self.lock();
            let running = st.running.as_ref().filter(|r| r.session == sid).map(|r| (r.assignment.clone(), r.started));
            let Some(session) = st.sessions.get_mut(&sid).filter(|s| s.closing.is_none()) else { return Err(Self::unknown_session(&sid)) };
            match running {
                Some((assignment, started)) => {
                    let (closed, wait) = oneshot::channel();
                    session.closing.get_or_insert_default().push(closed);
                    let replied = session.prompt.as_mut().map(|p| {
                        p.cancel = true;
                        p.replied.clone()
                    });
                    Then::Running(started.then_some(assignment), wait, replied)
                }
                None => {
                    let queued = st.sessions.remove(&sid).and_then(|s| s.prompt);
                    if queued.is_some() {
                        st.queue.retain(|q| q != &sid);
                    }
                    Then::Closed(queued)
                }
            }
        };
        match then {
            Then::Running(assignment, wait, replied) => {
                if let Some(assignment) = assignment {
                    self.interrupt(assignment).await;
                }
                // The worker closes the session once its turn has ended and the runner process
                // is gone; the prompt's answer goes out before this one (a prompt whose call is
                // gone does not hold it).
                let _ = wait.await;
                if let Some(mut replied) = replied {
                    let _ = replied.wait_for(|r| *r).await;
                }
            }
            Then::Closed(queued) => {
                if let Some(prompt) = queued {
                    Self::answer_prompt(prompt, Ok(StopReason::Cancelled));
                }
                self.end_conversation(&sid).await;
            }
        }
        Ok(acp::CloseSessionResponse::default())
    }

    async fn cancel(&self, session_id: &str) {
        enum Then {
            Nothing,
            Answer(Prompt),
            Interrupt(String),
        }
        let then = {
            let mut st = self.lock();
            let running = st.running.as_ref().filter(|r| r.session == session_id).map(|r| (r.assignment.clone(), r.started));
            match st.sessions.get_mut(session_id) {
                // Unknown session, or nothing in progress: a late cancel, ignored.
                None => Then::Nothing,
                Some(s) if s.prompt.is_none() => Then::Nothing,
                Some(s) => match running {
                    Some((assignment, started)) => {
                        if let Some(p) = s.prompt.as_mut() {
                            p.cancel = true;
                        }
                        if started { Then::Interrupt(assignment) } else { Then::Nothing }
                    }
                    None => {
                        // Only queued: it never runs.
                        let p = s.prompt.take();
                        st.queue.retain(|q| q != session_id);
                        p.map_or(Then::Nothing, Then::Answer)
                    }
                },
            }
        };
        match then {
            Then::Nothing => {}
            Then::Answer(prompt) => Self::answer_prompt(prompt, Ok(StopReason::Cancelled)),
            Then::Interrupt(assignment) => self.interrupt(assignment).await,
        }
    }

    /// Interrupts the turn `assignment`, and no other: a late cancel never stops the next turn.
    async fn interrupt(&self, assignment: String) {
        let r = self.engine.call(&self.caller, Method::Interrupt(Some(InterruptParams { assignment: Some(assignment.clone()) }))).await;
        if let Err(e) = r {
            eprintln!("openagents acp: cannot interrupt {assignment}: {}", e.message);
        }
    }

    /// The editor's answer to our permission request `request` (or why none came): the
    /// approval it asked for is answered, unless the request was withdrawn meanwhile.
    fn on_permission_answer(&self, request: u64, answer: Result<Box<RawValue>, PeerError>) {
        let Some(approval) = self.lock().permissions.remove(&request) else { return };
        let approved = match answer {
            Ok(result) => match messages::decode::<acp::RequestPermissionResponse>(Some(result.get())) {
                Ok(r) => messages::approves(&r),
                Err((e, _)) => {
                    eprintln!("openagents acp: an unreadable answer to approval {approval} denies it: {e}");
                    false
                }
            },
            Err(PeerError::Answered(e)) => {
                if e.code == codes::METHOD_NOT_FOUND {
                    eprintln!("openagents acp: the client cannot answer session/request_permission (method not found): every later approval is denied at once");
                    self.lock().cannot_answer = true;
                }
                false
            }
            Err(e) => {
                eprintln!("openagents acp: approval {approval} is denied: {e}");
                false
            }
        };
        if let Some(card) = self.lock().cards.get_mut(&approval) {
            card.request = None;
        }
        self.answer_approval(&approval, approved);
    }

    fn answer_approval(&self, approval: &str, approved: bool) {
        if let Err(e) = self.engine.bridge().answer(self.conn, approval, ApprovalReply { approved, answer: None }) {
            eprintln!("openagents acp: the answer to approval {approval} was refused: {}", e.message);
        }
    }

    /// Stdin ended (or a signal): deny what waits for the client, answer what is queued,
    /// interrupt the turn (its runner's process group is killed) and let the worker answer it.
    async fn close(&self) {
        let (approvals, queued) = {
            let mut st = self.lock();
            st.closing = true;
            let approvals: Vec<String> = st.permissions.drain().map(|(_, a)| a).collect();
            let sessions: Vec<String> = st.queue.drain(..).collect();
            let queued: Vec<Prompt> = sessions.iter().filter_map(|s| st.sessions.get_mut(s).and_then(|s| s.prompt.take())).collect();
            (approvals, queued)
        };
        for a in approvals {
            self.answer_approval(&a, false);
        }
        for p in queued {
            let outcome = if p.cancel { Ok(StopReason::Cancelled) } else { Err(err(ErrorCode::Interrupted, "the editor closed the connection before this prompt ran")) };
            Self::answer_prompt(p, outcome);
        }
        self.work.notify_one();
        self.engine.shutdown().await;
    }

    async fn worker(self: Arc<Self>, barriers: mpsc::Sender<Barrier>) {
        loop {
            let job = loop {
                let notified = self.work.notified();
                {
                    let mut st = self.lock();
                    if st.closing {
                        break None;
                    }
                    if let Some(sid) = st.queue.pop_front() {
                        st.next_turn += 1;
                        let n = st.next_turn;
                        let Some(s) = st.sessions.get(&sid) else { continue };
                        let Some(p) = s.prompt.as_ref() else { continue };
                        // Unique across processes (a loaded session's turns follow those of the
                        // process that made it), and short whatever the session id.
                        let job = (sid.clone(), format!("acp-{}-{}-t{n}", self.stamp, std::process::id()), s.runner.clone(), s.cwd.clone(), p.task.clone());
                        st.running = Some(Running { session: sid, assignment: job.1.clone(), started: false, progress: 0, result_sent: false });
                        break Some(job);
                    }
                }
                notified.await;
            };
            let Some((sid, assignment, runner, cwd, task)) = job else { return };
            let submit = SubmitParams { task, runner: Some(runner), cwd: Some(cwd), assignment: Some(assignment.clone()), conversation: Some(sid.clone()) };
            let result = self.engine.call(&self.caller, Method::Submit(submit)).await;
            // Every event of the turn was published before `submit` returned: wait until the
            // pump has written them all, so that no update trails the answer.
            let seq = self.engine.status().last_seq;
            let (tx, rx) = oneshot::channel();
            if barriers.send((seq, tx)).await.is_ok() {
                let _ = tokio::time::timeout(Duration::from_secs(5), rx).await;
            }
            let (prompt, running, open, closed) = {
                let mut st = self.lock();
                let running = st.running.take();
                st.next_use += 1;
                let used = st.next_use;
                let prompt = st.sessions.get_mut(&sid).and_then(|s| {
                    s.used = used;
                    s.prompt.take()
                });
                // Closed while the turn ran: it goes now, and its close requests are answered
                // once its runner process has ended.
                let closed = match st.sessions.get(&sid).and_then(|s| s.closing.as_ref()) {
                    Some(_) => st.sessions.remove(&sid).and_then(|s| s.closing),
                    None => None,
                };
                let open: Vec<String> = st.cards.drain().map(|(id, _)| id).collect();
                (prompt, running, open, closed)
            };
            for card in open {
                self.send_update(&sid, messages::card_closed(card, false)).await;
            }
            if let Some(closes) = closed {
                let this = Arc::clone(&self);
                let sid = sid.clone();
                // The prompt's answer (`cancelled`) goes first; the close after the process.
                if let Some(prompt) = prompt {
                    Self::answer_prompt(prompt, Ok(StopReason::Cancelled));
                }
                tokio::spawn(async move {
                    this.end_conversation(&sid).await;
                    for close in closes {
                        let _ = close.send(());
                    }
                });
                continue;
            }
            let Some(prompt) = prompt else { continue };
            let outcome = match result {
                _ if prompt.cancel => Ok(StopReason::Cancelled),
                Ok(bytes) => {
                    if !running.is_some_and(|r| r.result_sent) {
                        // The pump missed the terminal event (it lagged): the result still goes out.
                        let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                        let text = v.get("result").and_then(Value::as_str).unwrap_or_default().to_owned();
                        self.send_update(&sid, messages::message(text, format!("{assignment}:result"))).await;
                    }
                    Ok(StopReason::EndTurn)
                }
                Err(e) => Err(e),
            };
            Self::answer_prompt(prompt, outcome);
        }
    }

    async fn pump(self: Arc<Self>, mut sub: Subscription, mut bridge: mpsc::Receiver<Vec<u8>>, mut barriers: mpsc::Receiver<Barrier>) {
        let mut waiting: Vec<Barrier> = Vec::new();
        let (mut bridge_open, mut barriers_open) = (true, true);
        loop {
            tokio::select! {
                biased;
                ev = sub.next() => match ev {
                    Some(ev) => self.on_event(ev).await,
                    None => return,
                },
                m = bridge.recv(), if bridge_open => match m {
                    Some(m) => {
                        // The events published before this request happened before it: they go
                        // to the editor first (a turn's progress before its approval card), even
                        // when a durable store delivers them only once written.
                        let hub = self.engine.events();
                        hub.delivered(hub.published_seq()).await;
                        while let Some(ev) = sub.try_next_shared() {
                            self.on_event(ev.event().clone()).await;
                        }
                        self.on_bridge(&m).await
                    }
                    None => bridge_open = false,
                },
                b = barriers.recv(), if barriers_open => match b {
                    Some(b) => waiting.push(b),
                    None => barriers_open = false,
                },
            }
            let at = sub.position();
            let (done, keep): (Vec<Barrier>, Vec<Barrier>) = waiting.into_iter().partition(|(seq, _)| *seq <= at);
            waiting = keep;
            for (_, tx) in done {
                let _ = tx.send(());
            }
        }
    }

    /// The session of the turn that is running, once its `turn_started` has been seen.
    fn running_session(st: &State) -> Option<String> {
        st.running.as_ref().filter(|r| r.started).map(|r| r.session.clone())
    }

    async fn on_event(&self, ev: ServerEvent) {
        match ev.event {
            RuntimeEvent::TurnStarted { assignment, .. } => {
                let cancel_now = {
                    let mut st = self.lock();
                    let Some(r) = st.running.as_mut().filter(|r| r.assignment == assignment) else { return };
                    r.started = true;
                    let sid = r.session.clone();
                    st.sessions.get(&sid).and_then(|s| s.prompt.as_ref()).is_some_and(|p| p.cancel)
                };
                // Cancelled before the turn had started: stop it now.
                if cancel_now {
                    self.interrupt(assignment).await;
                }
            }
            RuntimeEvent::Text { text } => {
                let update = {
                    let mut st = self.lock();
                    let Some(r) = st.running.as_mut().filter(|r| r.started) else { return };
                    let sep = if r.progress > 0 { " " } else { "" };
                    r.progress += 1;
                    (r.session.clone(), messages::thought(format!("{sep}{text}"), format!("{}:progress", r.assignment)))
                };
                self.send_update(&update.0, update.1).await;
            }
            RuntimeEvent::TurnCompleted { result } => {
                let update = {
                    let mut st = self.lock();
                    let Some(r) = st.running.as_mut().filter(|r| r.started && !r.result_sent) else { return };
                    r.result_sent = true;
                    (r.session.clone(), messages::message(result, format!("{}:result", r.assignment)))
                };
                self.close_cards().await;
                self.send_update(&update.0, update.1).await;
            }
            RuntimeEvent::TurnFailed { .. } => self.close_cards().await,
            RuntimeEvent::ApprovalResolved { request_id, approved, .. } => self.close_card(&request_id, approved).await,
            RuntimeEvent::ApprovalDenied { request_id: Some(request_id), reason, .. } => {
                eprintln!("openagents acp: approval {request_id} denied: {reason}");
                self.close_card(&request_id, false).await;
            }
            RuntimeEvent::Lagged { missed } => self.dropped(missed).await,
            RuntimeEvent::Gap { since, resumed_at } => self.dropped(resumed_at - since).await,
            _ => {}
        }
    }

    async fn dropped(&self, missed: i64) {
        eprintln!("openagents acp: {missed} events were dropped (stdout is not keeping up)");
        let (session, notices) = {
            let st = self.lock();
            (Self::running_session(&st), st.notices)
        };
        let Some(session) = session else { return };
        let what = format!("[openagents: {missed} progress events were dropped]");
        let update = if notices { messages::warning(what) } else { messages::thought(what, "openagents:notice".into()) };
        self.send_update(&session, update).await;
    }

    /// Closes the card of approval `id` (once): `completed` when approved, else `failed`, and
    /// withdraws our permission request if the client has not answered it.
    async fn close_card(&self, id: &str, approved: bool) {
        let (card, session) = {
            let mut st = self.lock();
            let Some(card) = st.cards.remove(id) else { return };
            if let Some((r, _)) = &card.request {
                st.permissions.remove(r);
            }
            (card, st.running.as_ref().map(|r| r.session.clone()))
        };
        // Withdrawn: its answer, if one comes, is dropped.
        if let Some((request_id, waiting)) = card.request {
            waiting.abort();
            if let Some((peer, _)) = self.editor.get() {
                let cancel = acp::CancelRequestNotification { request_id: Value::from(request_id), meta: None };
                let _ = acp::protocol_side::Notification::CancelRequest(cancel).send(peer).await;
            }
        }
        if let Some(session) = session {
            self.send_update(&session, messages::card_closed(id.to_owned(), approved)).await;
        }
    }

    /// Sends the editor `session/request_permission` for approval `approval`, and answers the
    /// approval once the editor does (on a task of its own); `false` when the request could not
    /// be sent, or the approval was settled meanwhile (then it is withdrawn).
    async fn ask_permission(self: &Arc<Self>, session: String, approval: &str, title: String) -> bool {
        let Some((peer, _)) = self.editor.get() else { return false };
        let Ok(params) = serde_json::value::to_raw_value(&messages::permission_request(session, approval.to_owned(), title)) else { return false };
        let request = match peer.send_request(acp::client_side::SessionRequestPermission::NAME, Some(&params)).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("openagents acp: cannot ask the editor about approval {approval}: {e}");
                return false;
            }
        };
        let id = request.id();
        // The answer is taken only once the request is on record, however fast it comes.
        let (recorded, on_record) = oneshot::channel::<()>();
        let this = Arc::clone(self);
        let waiting = tokio::spawn(async move {
            let answer = request.answer().await;
            if on_record.await.is_ok() {
                this.on_permission_answer(id, answer);
            }
        });
        // `None`: on record; else withdrawn, and whether the approval is settled already (or
        // is to be denied: the agent is closing).
        let withdrawn = {
            let mut st = self.lock();
            let closing = st.closing;
            match st.cards.get_mut(approval) {
                Some(card) if !closing => {
                    card.request = Some((id, waiting.abort_handle()));
                    st.permissions.insert(id, approval.to_owned());
                    None
                }
                Some(_) => Some(false),
                None => Some(true),
            }
        };
        let Some(settled) = withdrawn else {
            let _ = recorded.send(());
            return true;
        };
        waiting.abort();
        let cancel = acp::CancelRequestNotification { request_id: Value::from(id), meta: None };
        let _ = acp::protocol_side::Notification::CancelRequest(cancel).send(peer).await;
        settled
    }

    async fn close_cards(&self) {
        let open: Vec<String> = self.lock().cards.keys().cloned().collect();
        for id in open {
            self.close_card(&id, false).await;
        }
    }

    async fn on_bridge(self: &Arc<Self>, message: &[u8]) {
        let Ok(v) = serde_json::from_slice::<Value>(message) else { return };
        let p = &v["params"];
        let Some(request_id) = p["request_id"].as_str().map(str::to_owned) else { return };
        match v["method"].as_str() {
            Some("frontend.v2.approval") => {
                let prompt = p["prompt"].as_str().unwrap_or_default().to_owned();
                let (session, ask) = {
                    let mut st = self.lock();
                    // Only the running turn can ask (one turn at a time), even if the pump has
                    // not seen its `turn_started` (it lagged).
                    let Some(session) = st.running.as_ref().map(|r| r.session.clone()) else {
                        drop(st);
                        // No turn of ours is running: nobody here could have asked.
                        return self.answer_approval(&request_id, false);
                    };
                    let ask = !(st.cannot_answer || st.closing);
                    st.cards.insert(request_id.clone(), Card { request: None });
                    (session, ask)
                };
                let title = title(&prompt);
                self.send_update(&session, messages::approval_card(request_id.clone(), title.clone(), prompt)).await;
                if !ask || !self.ask_permission(session, &request_id, title).await {
                    self.answer_approval(&request_id, false);
                }
            }
            // Settled without our answer (the turn ended, or the bridge's timeout).
            Some("frontend.v2.approval_resolved") => self.close_card(&request_id, p["approved"].as_bool().unwrap_or(false)).await,
            _ => {}
        }
    }
}
