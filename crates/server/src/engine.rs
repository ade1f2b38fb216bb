//! `RpcEngine`: one runtime driving one agent. Every transport decodes a request once into the
//! generated `RpcRequest` and hands it here; dispatch is one exhaustive `match` over the
//! generated `Method` enum, so the method semantics — the fail-closed approval behaviour
//! included — can never drift between transports.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use openagents_protocol::rt::{RpcMethod, Validate};
use openagents_protocol::{
    ActiveTurn, ErrorCode, ErrorDetails, InterruptResult, Lease, Limits, Method, ReleaseResult, RuntimeEvent,
    RuntimeState, RuntimeStatus, RuntimeSubmitError, ShutdownResult, SubmitParams, SubmitResult,
    SubscribeResult, Turn, TurnCounters, VERSION, methods,
};
use serde_json::value::RawValue;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, ApprovalHandler, TurnContext, error};
use crate::bridge::{BridgeHandler, FrontendRequestBridge};
use crate::auth::Caller;
use crate::events::{EventHub, Note, Subscription};
use crate::store::Outcome;
use crate::metrics::{Metrics, Snapshot};

/// How long a controller keeps the lease without activity, unless configured otherwise.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(60);

/// The longest lease TTL: one day. A longer one is clamped to it (the CLI refuses it), so the
/// lease's deadline is always a representable instant.
pub const MAX_LEASE_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// How long `shutdown` waits for the interrupted turn to end before it publishes the final
/// event anyway (the runner host kills a runner within about a second).
pub const SHUTDOWN_TURN_GRACE: Duration = Duration::from_secs(5);

/// Engine settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The runner a `submit` without `runner` uses.
    pub default_runner: Option<String>,
    /// The working folder a `submit` without `cwd` uses.
    pub cwd: String,
    /// How long a controller keeps the lease without activity.
    pub lease_ttl: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            default_runner: None,
            cwd: std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_else(|_| "/".into()),
            lease_ttl: DEFAULT_LEASE_TTL,
        }
    }
}

struct Active {
    info: ActiveTurn,
    owner: String,
    cancel: CancellationToken,
}

struct LeaseState {
    holder: String,
    expires: Instant,
}

#[derive(Default)]
struct State {
    active: Option<Active>,
    counters: Counters,
    lease: Option<LeaseState>,
    shutting_down: bool,
    next_turn: u64,
}

#[derive(Default, Clone, Copy)]
struct Counters {
    submitted: i64,
    completed: i64,
    failed: i64,
    interrupted: i64,
}

/// A streaming connection's event stream, which `subscribe` (re)starts.
pub trait EventSession: Send + Sync {
    /// Starts the stream after `since` (new events only when `None`).
    fn subscribe(&self, since: Option<i64>);
}

struct Inner {
    agent: Arc<dyn Agent>,
    approvals: Option<Arc<dyn ApprovalHandler>>,
    bridge: Arc<FrontendRequestBridge>,
    config: Mutex<EngineConfig>,
    state: Mutex<State>,
    hub: EventHub,
    shutdown: CancellationToken,
    /// Set just before `shutdown` is cancelled: read on every request, where the token's own
    /// check would take its lock.
    shut_down: std::sync::atomic::AtomicBool,
    /// The last `status` result's changing part, the caller it was for and its encoding (with
    /// that caller's grant), reused while they are unchanged.
    status_json: Mutex<Option<(StatusNow, String, Box<RawValue>)>>,
    metrics: Arc<Metrics>,
}

/// A call that waits, as [`RpcEngine::answer_at_once`] gives it back.
pub(crate) enum Wait {
    Submit(SubmitParams),
    Shutdown,
}

/// The out-of-process RPC driver: wraps one agent with the `submit`/`interrupt`/`status`/
/// `shutdown`/`release` method set, shared by every transport. Cheap to clone.
#[derive(Clone)]
pub struct RpcEngine {
    inner: Arc<Inner>,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn instant_to_ms(at: Instant) -> i64 {
    now_ms() + at.saturating_duration_since(Instant::now()).as_millis() as i64
}

fn encode<M: RpcMethod>(result: Result<M::Result, RuntimeSubmitError>) -> Result<Box<RawValue>, RuntimeSubmitError> {
    result.and_then(|r| serde_json::value::to_raw_value(&r).map_err(|e| error(ErrorCode::Internal, format!("cannot encode the {} result: {e}", M::NAME))))
}

/// The OpenRPC document, as raw JSON once.
fn openrpc_document() -> Result<Box<RawValue>, RuntimeSubmitError> {
    static DOCUMENT: std::sync::OnceLock<Result<Box<RawValue>, String>> = std::sync::OnceLock::new();
    DOCUMENT.get_or_init(|| RawValue::from_string(openagents_protocol::OPENRPC_DOCUMENT.to_owned()).map_err(|e| e.to_string())).clone().map_err(|e| error(ErrorCode::Internal, format!("the OpenRPC document is not JSON: {e}")))
}

fn details() -> ErrorDetails {
    ErrorDetails { violations: None, violations_omitted: None, known: None, holder: None, expires_at_ms: None, limit: None }
}

/// The part of [`RuntimeStatus`] that changes; the rest is the build's constants.
#[derive(Debug, Clone, PartialEq)]
struct StatusNow {
    state: RuntimeState,
    active_turn: Option<openagents_protocol::ActiveTurn>,
    counters: TurnCounters,
    last_seq: i64,
    subscribers: i64,
    lease: Option<Lease>,
}

impl StatusNow {
    fn to_status(&self) -> RuntimeStatus {
        RuntimeStatus {
            state: self.state.clone(),
            active_turn: self.active_turn.clone(),
            counters: self.counters.clone(),
            last_seq: self.last_seq,
            subscribers: self.subscribers,
            lease: self.lease.clone(),
            schema_version: VERSION.into(),
            limits: Limits::of_this_build(),
            protocol_version: Some(openagents_protocol::PROTOCOL_VERSION.into()),
            schema_digest: Some(openagents_protocol::SCHEMA_DIGEST.into()),
            caller: None,
        }
    }
}

/// `status`'s encoded answer with its `caller` member: who asked, and what their grant allows.
fn with_caller(mut bytes: Vec<u8>, caller: &Caller) -> Vec<u8> {
    let grant = openagents_protocol::CallerGrant {
        name: caller.name.clone(),
        methods: caller.grant.methods.iter().cloned().chain(crate::auth::EVENT_READING_METHODS.iter().filter(|m| caller.grant.events && !caller.grant.allows(m)).map(|m| (*m).to_owned())).collect(),
        events: caller.grant.events,
        approvals: caller.grant.approvals,
    };
    if bytes.last() == Some(&b'}')
        && let Ok(json) = serde_json::to_vec(&grant)
    {
        bytes.pop();
        bytes.extend_from_slice(br#","caller":"#);
        bytes.extend_from_slice(&json);
        bytes.push(b'}');
    }
    bytes
}

impl RpcEngine {
    /// An engine for `agent`, with default settings. It never answers an approval itself:
    /// requests go to attached frontends allowed to answer (the [`FrontendRequestBridge`]), and
    /// with none attached they are denied.
    pub fn new(agent: impl Agent) -> Self {
        RpcEngine::with_config(agent, EngineConfig::default())
    }

    /// An engine for `agent` with `config`.
    pub fn with_config(agent: impl Agent, config: EngineConfig) -> Self {
        RpcEngine::with_events(agent, config, EventHub::default())
    }

    /// An engine for `agent` with `config`, publishing on `hub` (a hub on a store:
    /// [`EventHub::with_store`]).
    pub fn with_events(agent: impl Agent, mut config: EngineConfig, hub: EventHub) -> Self {
        config.lease_ttl = config.lease_ttl.min(MAX_LEASE_TTL);
        let bridge = FrontendRequestBridge::new(hub.clone());
        let approvals: Arc<dyn ApprovalHandler> = Arc::new(BridgeHandler(Arc::clone(&bridge)));
        let engine = RpcEngine {
            inner: Arc::new(Inner {
                agent: Arc::new(agent),
                approvals: Some(approvals),
                bridge,
                config: Mutex::new(config),
                state: Mutex::new(State::default()),
                hub,
                shutdown: CancellationToken::new(),
                shut_down: std::sync::atomic::AtomicBool::new(false),
                status_json: Mutex::new(None),
                metrics: Arc::default(),
            }),
        };
        // While a controller holds the lease, only it (or an admin) answers approvals.
        let inner = Arc::downgrade(&engine.inner);
        engine.inner.bridge.set_lease_holder(Arc::new(move || inner.upgrade().and_then(|inner| RpcEngine { inner }.lease_holder())));
        engine
    }

    /// Who holds the controller lease now, if anyone (a lease past its TTL still counts while
    /// its holder's turn runs).
    fn lease_holder(&self) -> Option<String> {
        let st = self.state();
        let now = Instant::now();
        st.lease.as_ref().filter(|l| l.expires > now || st.active.as_ref().is_some_and(|a| a.owner == l.holder)).map(|l| l.holder.clone())
    }

    /// The bridge that carries approval requests to frontends (and fails closed without any).
    pub fn bridge(&self) -> &Arc<FrontendRequestBridge> {
        &self.inner.bridge
    }

    /// The event hub the engine publishes on.
    pub fn events(&self) -> &EventHub {
        &self.inner.hub
    }

    /// The agent's description.
    pub fn describe_agent(&self) -> String {
        self.inner.agent.describe()
    }

    /// Changes how long a controller keeps the lease without activity (at most
    /// [`MAX_LEASE_TTL`]; a longer one is clamped).
    pub fn set_lease_ttl(&self, ttl: Duration) {
        self.inner.config.lock().unwrap_or_else(|p| p.into_inner()).lease_ttl = ttl.min(MAX_LEASE_TTL);
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn config(&self) -> EngineConfig {
        self.inner.config.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The runtime's counters (transports count connections, authentication failures and
    /// requests in them).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// The Prometheus text exposition of every counter (`GET /metrics`).
    pub fn metrics_text(&self) -> String {
        let (c, running) = {
            let st = self.state();
            (st.counters, st.active.is_some())
        };
        let hub = self.inner.hub.counters();
        let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        let snapshot = Snapshot {
            turns: [("submitted", c.submitted), ("completed", c.completed), ("failed", c.failed), ("interrupted", c.interrupted)],
            events_published: self.inner.hub.last_seq(),
            subscribers: self.inner.hub.subscribers() as i64,
            lagged: load(&hub.lagged),
            gaps: load(&hub.gaps),
            store_errors: load(&hub.store_errors),
            running,
            approvals: [load(&hub.approvals_asked), load(&hub.approvals_approved), load(&hub.approvals_denied)],
        };
        self.inner.metrics.render(&snapshot)
    }

    /// The event hub (publishing is the engine's; transports subscribe).
    pub fn subscribe(&self, since: Option<i64>) -> Subscription {
        self.inner.hub.subscribe(since)
    }

    /// Resolves once `shutdown` has been called (every accept loop selects on this).
    pub async fn wait_for_shutdown(&self) {
        self.inner.shutdown.cancelled().await;
    }

    /// Whether the runtime takes work: false once `shutdown` has begun (`GET /readyz`).
    pub fn is_accepting(&self) -> bool {
        !self.state().shutting_down
    }

    /// Whether `shutdown` has completed: what [`wait_for_shutdown`](Self::wait_for_shutdown)
    /// waits for, read without waiting.
    pub fn is_shut_down(&self) -> bool {
        self.inner.shut_down.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Calls one method in process, as `caller` (no socket needed): its encoded result.
    pub async fn call(&self, caller: &Caller, method: Method) -> Result<Vec<u8>, RuntimeSubmitError> {
        self.call_in(caller, method, None).await.map(|r| r.get().as_bytes().to_vec())
    }

    /// [`RpcEngine::call`] on a streaming connection, the result as raw JSON.
    pub async fn call_in(&self, caller: &Caller, method: Method, session: Option<&dyn EventSession>) -> Result<Box<RawValue>, RuntimeSubmitError> {
        self.permitted(caller, method.name())?;
        self.touch_lease(caller);
        match self.answer_at_once(caller, method, session) {
            Ok(outcome) => outcome,
            Err(wait) => self.wait_for(caller, wait).await,
        }
    }

    /// The answer to a call that waits ([`RpcEngine::answer_at_once`] gave it back).
    pub(crate) async fn wait_for(&self, caller: &Caller, wait: Wait) -> Result<Box<RawValue>, RuntimeSubmitError> {
        match wait {
            // Boxed: a turn's future is large, and every other request's future (moved into its
            // task, or into the connection's) would otherwise be as large as it.
            Wait::Submit(params) => encode::<methods::Submit>(Box::pin(self.submit(caller, params)).await),
            Wait::Shutdown => encode::<methods::Shutdown>(Ok(Box::pin(self.shutdown()).await)),
        }
    }

    /// Whether `caller`'s grant includes the method `name` (the audit and metrics record a
    /// refusal).
    pub(crate) fn permitted(&self, caller: &Caller, name: &str) -> Result<(), RuntimeSubmitError> {
        // Reading events has one rule on every transport (the `events` grant), so `subscribe`
        // and the history are decided by it alone, as `GET /events` is.
        if crate::auth::EVENT_READING_METHODS.contains(&name) {
            caller.grant.may_read_events(&caller.name)?;
        } else if !caller.grant.allows(name) {
            self.inner.metrics.forbidden();
            tracing::warn!(target: "openagents::audit", event = "forbidden", credential = %caller.name, method = name);
            return Err(error(ErrorCode::Forbidden, format!("credential `{}` may not call `{name}`", caller.name)));
        }
        Ok(())
    }

    /// The answer to a permitted call that needs no waiting; the methods that wait come back.
    pub(crate) fn answer_at_once(&self, caller: &Caller, method: Method, session: Option<&dyn EventSession>) -> Result<Result<Box<RawValue>, RuntimeSubmitError>, Wait> {
        Ok(match method {
            Method::Submit(params) => return Err(Wait::Submit(params)),
            Method::Shutdown(_) => return Err(Wait::Shutdown),
            Method::Interrupt(params) => encode::<methods::Interrupt>(self.interrupt(caller, params.and_then(|p| p.assignment).as_deref())),
            Method::Status(_) => self.status_json(caller),
            Method::Release(_) => encode::<methods::Release>(Ok(self.release(caller))),
            Method::Subscribe(params) => encode::<methods::Subscribe>(self.subscribe_session(caller, params.and_then(|p| p.since), session)),
            // The OpenRPC document is generated with the types and embedded as compact JSON.
            Method::Discover(_) => openrpc_document(),
            Method::Conversations(params) => encode::<methods::Conversations>(crate::history::conversations(&**self.inner.hub.store(), params)),
            Method::Conversation(params) => encode::<methods::Conversation>(crate::history::conversation(&**self.inner.hub.store(), params)),
        })
    }

    /// Activity from the lease holder extends the lease.
    pub(crate) fn touch_lease(&self, caller: &Caller) {
        let mut st = self.state();
        if let Some(l) = st.lease.as_mut() {
            if l.holder == caller.name && l.expires > Instant::now() {
                // Only the TTL: cloning the whole config would allocate on every request.
                l.expires = Instant::now() + self.inner.config.lock().unwrap_or_else(|p| p.into_inner()).lease_ttl;
            }
        }
    }

    fn expire_lease(st: &mut State) {
        let holder_active = |l: &LeaseState| st.active.as_ref().is_some_and(|a| a.owner == l.holder);
        // No clock read without a lease: `status` calls this on every request.
        if let Some(l) = &st.lease {
            if l.expires <= Instant::now() && !holder_active(l) {
                tracing::info!(target: "openagents::audit", event = "lease_expired", holder = %l.holder);
                st.lease = None;
            }
        }
    }

    /// Takes or checks the lease for a controller action.
    fn claim_lease(&self, st: &mut State, caller: &Caller) -> Result<(), RuntimeSubmitError> {
        if caller.trusted {
            return Ok(());
        }
        Self::expire_lease(st);
        let ttl = self.config().lease_ttl;
        match &st.lease {
            Some(l) if l.holder != caller.name => {
                let expires_at_ms = instant_to_ms(l.expires);
                tracing::info!(target: "openagents::audit", event = "lease_refused", credential = %caller.name, holder = %l.holder);
                let mut e = error(ErrorCode::LeaseHeld, format!("controller `{}` holds the lease until {expires_at_ms} (ms since the epoch), unless it releases it", l.holder));
                e.details = Some(ErrorDetails { holder: Some(l.holder.clone()), expires_at_ms: Some(expires_at_ms), ..details() });
                Err(e)
            }
            held => {
                if held.is_none() {
                    tracing::info!(target: "openagents::audit", event = "lease_taken", holder = %caller.name, ttl_s = ttl.as_secs());
                }
                st.lease = Some(LeaseState { holder: caller.name.clone(), expires: Instant::now() + ttl });
                Ok(())
            }
        }
    }

    async fn submit(&self, caller: &Caller, p: SubmitParams) -> Result<SubmitResult, RuntimeSubmitError> {
        let config = self.config();
        let (turn, cancel) = {
            let mut st = self.state();
            if st.shutting_down {
                return Err(error(ErrorCode::ShuttingDown, "the runtime is shutting down and takes no new turns"));
            }
            self.claim_lease(&mut st, caller)?;
            if let Some(a) = &st.active {
                return Err(error(ErrorCode::Busy, format!("a turn is already running (assignment `{}`); retry when it ends, or interrupt it", a.info.assignment)));
            }
            let Some(runner) = p.runner.or(config.default_runner) else {
                return Err(error(ErrorCode::InvalidParams, "no `runner` given and the runtime has no default runner"));
            };
            st.next_turn += 1;
            let n = st.next_turn;
            let stamp = now_ms();
            let turn = Turn::new(
                p.assignment.unwrap_or_else(|| format!("asg-{stamp}-{n}")),
                p.conversation.unwrap_or_else(|| format!("conv-{stamp}-{n}")),
                runner,
                p.task,
                p.cwd.unwrap_or(config.cwd),
            );
            if let Err(v) = Validate::validate(&turn) {
                let mut e = error(ErrorCode::InvalidParams, format!("the turn is not valid: {}", v.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")));
                e.details = Some(ErrorDetails { violations: Some(v.into_iter().map(|v| openagents_protocol::Violation { pointer: v.pointer, keyword: v.keyword, message: v.message }).collect()), ..details() });
                return Err(e);
            }
            let cancel = self.inner.shutdown.child_token();
            let info = ActiveTurn { assignment: turn.assignment.clone(), conversation: turn.conversation.clone(), runner: turn.agent.runner.clone(), started_at_ms: stamp };
            st.active = Some(Active { info, owner: caller.name.clone(), cancel: cancel.clone() });
            st.counters.submitted += 1;
            (turn, cancel)
        };
        // A group commit that fails from here on fails the turn: its events cannot be kept.
        let failures = self.inner.hub.write_failures();
        let started = self.inner.hub.publish_noted(
            RuntimeEvent::TurnStarted { assignment: turn.assignment.clone(), conversation: turn.conversation.clone(), runner: turn.agent.runner.clone() },
            Some(Note::TurnStarted { task: turn.task.clone(), cwd: turn.cwd.clone() }),
        );
        // The turn runs on its own task: a caller that goes away (a dropped HTTP request) does
        // not cut it short, and it always ends in exactly one terminal outcome.
        let engine = self.clone();
        let task = tokio::spawn(async move { engine.run_to_end(turn, cancel, started.seq, failures).await });
        task.await.unwrap_or_else(|e| Err(error(ErrorCode::Internal, format!("the turn's task failed: {e}"))))
    }

    async fn run_to_end(&self, turn: Turn, cancel: CancellationToken, first_seq: i64, mut failures: tokio::sync::watch::Receiver<crate::events::WriteFailure>) -> Result<SubmitResult, RuntimeSubmitError> {
        let ctx = TurnContext { hub: self.inner.hub.clone(), cancel: cancel.clone(), approvals: self.inner.approvals.clone() };
        let mut run = std::pin::pin!(AssertUnwindSafe(self.inner.agent.run_turn(turn.clone(), ctx)).catch_unwind());
        // A write to the store that fails while the turn runs stops it: it fails with the
        // store's error (`store_unavailable`) rather than go on with events that are not kept.
        let mut store_failed = None;
        let run = tokio::select! {
            r = &mut run => r,
            Ok(()) = failures.changed() => {
                store_failed = Some(failures.borrow().message.clone());
                cancel.cancel();
                run.await
            }
        };
        let outcome = match run {
            _ if let Some(reason) = store_failed => Err(error(ErrorCode::StoreUnavailable, format!("the turn was stopped because its events could not be written to the store: {reason}. The runtime goes on serving, and writes again once the store is back"))),
            Ok(Err(e)) if cancel.is_cancelled() && e.code != ErrorCode::Interrupted => Err(error(ErrorCode::Interrupted, format!("the turn was interrupted ({})", e.message))),
            Ok(r) => r,
            Err(_) => Err(error(ErrorCode::Internal, "the agent panicked while running the turn")),
        };
        {
            let mut st = self.state();
            match &outcome {
                Ok(_) => st.counters.completed += 1,
                Err(e) if e.code == ErrorCode::Interrupted => st.counters.interrupted += 1,
                Err(_) => st.counters.failed += 1,
            }
            st.active = None;
        }
        let (event, note) = match &outcome {
            Ok(result) => (RuntimeEvent::TurnCompleted { result: result.clone() }, Note::TurnEnded { first_seq, outcome: Outcome::Completed, result: Some(result.clone()), error: None }),
            Err(e) => {
                let ended = if e.code == ErrorCode::Interrupted { Outcome::Interrupted } else { Outcome::Failed };
                (RuntimeEvent::TurnFailed { error: e.clone() }, Note::TurnEnded { first_seq, outcome: ended, result: None, error: serde_json::to_string(e).ok() })
            }
        };
        let ended = self.inner.hub.publish_noted(event, Some(note));
        // The answer comes after the turn's last event has reached subscribers (with a
        // durable store, once it is written).
        self.inner.hub.delivered(ended.seq).await;
        outcome.map(|result| SubmitResult { assignment: turn.assignment, conversation: turn.conversation, result })
    }

    /// Interrupts the active turn; with `assignment`, only when the active turn is that one, so
    /// a late interrupt (an editor's cancel racing the turn's end) never stops the next turn.
    fn interrupt(&self, caller: &Caller, assignment: Option<&str>) -> Result<InterruptResult, RuntimeSubmitError> {
        let mut st = self.state();
        let matches = st.active.as_ref().is_some_and(|a| assignment.is_none_or(|want| a.info.assignment == want));
        if !matches {
            return Ok(InterruptResult { interrupted: false });
        }
        self.claim_lease(&mut st, caller)?;
        if let Some(a) = &st.active {
            a.cancel.cancel();
        }
        Ok(InterruptResult { interrupted: true })
    }

    fn subscribe_session(&self, caller: &Caller, since: Option<i64>, session: Option<&dyn EventSession>) -> Result<SubscribeResult, RuntimeSubmitError> {
        caller.grant.may_read_events(&caller.name)?;
        let Some(session) = session else {
            return Err(error(ErrorCode::InvalidRequest, "`subscribe` is for streaming connections (stdio, WebSocket); over HTTP, use GET /events with Last-Event-ID"));
        };
        let last_seq = self.inner.hub.last_seq();
        session.subscribe(since);
        Ok(SubscribeResult { last_seq })
    }

    fn release(&self, caller: &Caller) -> ReleaseResult {
        let mut st = self.state();
        Self::expire_lease(&mut st);
        let held = st.lease.as_ref().is_some_and(|l| l.holder == caller.name);
        if held {
            tracing::info!(target: "openagents::audit", event = "lease_released", holder = %caller.name);
            st.lease = None;
        }
        ReleaseResult { released: held }
    }

    /// The sequence number of the newest event delivered (the status's `last_seq`), without the
    /// rest of the status.
    pub(crate) fn last_seq(&self) -> i64 {
        self.inner.hub.last_seq()
    }

    /// A snapshot of the runtime.
    pub fn status(&self) -> RuntimeStatus {
        self.status_now().to_status()
    }

    /// What of the status can change, read under the state's lock.
    fn status_now(&self) -> StatusNow {
        let mut st = self.state();
        Self::expire_lease(&mut st);
        let state = if st.shutting_down {
            RuntimeState::ShuttingDown
        } else if st.active.is_some() {
            RuntimeState::Running
        } else {
            RuntimeState::Idle
        };
        let c = st.counters;
        StatusNow {
            state,
            active_turn: st.active.as_ref().map(|a| a.info.clone()),
            counters: TurnCounters { submitted: c.submitted, completed: c.completed, failed: c.failed, interrupted: c.interrupted },
            last_seq: self.last_seq(),
            subscribers: self.inner.hub.subscribers() as i64,
            lease: st.lease.as_ref().map(|l| Lease { holder: l.holder.clone(), expires_at_ms: instant_to_ms(l.expires) }),
        }
    }

    /// The encoded `status` result for `caller`, encoded again only when the status or the
    /// caller has changed. Compared by what can change, so an unchanged status asked again by
    /// the same caller costs no allocation but the copy of its bytes.
    fn status_json(&self, caller: &Caller) -> Result<Box<RawValue>, RuntimeSubmitError> {
        let now = self.status_now();
        let mut cache = self.inner.status_json.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, _, raw)) = cache.as_ref().filter(|(cached, name, _)| *cached == now && *name == caller.name) {
            return Ok(raw.clone());
        }
        let bytes = serde_json::to_vec(&now.to_status()).map_err(|e| error(ErrorCode::Internal, format!("cannot encode the status result: {e}")))?;
        let text = String::from_utf8(with_caller(bytes, caller)).map_err(|e| error(ErrorCode::Internal, format!("the status result is not UTF-8: {e}")))?;
        let raw = RawValue::from_string(text).map_err(|e| error(ErrorCode::Internal, format!("the status result is not JSON: {e}")))?;
        *cache = Some((now, caller.name.clone(), raw.clone()));
        Ok(raw)
    }

    /// Stops the runtime: no new turns, the active turn interrupted (and awaited for up to
    /// [`SHUTDOWN_TURN_GRACE`]), a final `shutting_down` event, then every transport's accept
    /// loop stops. Calling it again is harmless.
    pub async fn shutdown(&self) -> ShutdownResult {
        let first = {
            let mut st = self.state();
            let first = !st.shutting_down;
            st.shutting_down = true;
            if let Some(a) = &st.active {
                a.cancel.cancel();
            }
            first
        };
        if first {
            let deadline = Instant::now() + SHUTDOWN_TURN_GRACE;
            while self.state().active.is_some() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // What the agent keeps between turns (ACP runners' processes) ends with the runtime.
            self.inner.agent.shutdown().await;
            let last = self.inner.hub.publish(RuntimeEvent::ShuttingDown {});
            self.inner.hub.delivered(last.seq).await;
            self.inner.shut_down.store(true, std::sync::atomic::Ordering::Release);
            self.inner.shutdown.cancel();
        }
        ShutdownResult { shutting_down: true }
    }
}
