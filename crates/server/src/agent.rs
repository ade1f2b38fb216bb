//! The agent a runtime drives: "run this turn, emit events, stop when cancelled, ask for
//! approval through a handler". The default is a runner process from the operator's registry;
//! an in-process agent serves embedding and tests.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use openagents_protocol::{ErrorCode, Event, RuntimeEvent, RuntimeSubmitError, Turn};
use openagents_runner::host::{ApprovalDecision, Approver};
use openagents_runner::registry::Protocol;
use openagents_runner::{AcpHost, RunnerHost, SessionKeeping};
use tokio_util::sync::CancellationToken;

use crate::events::EventHub;
use crate::store::{AgentSession, Store};

/// A boxed future, as [`Agent::run_turn`] returns it.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Runs turns for a runtime.
pub trait Agent: Send + Sync + 'static {
    /// Runs one turn to its end: its result, or a typed error. Progress goes through
    /// [`TurnContext::text`]; the turn must stop promptly once [`TurnContext::cancelled`] fires.
    fn run_turn(&self, turn: Turn, ctx: TurnContext) -> BoxFuture<'_, Result<String, RuntimeSubmitError>>;

    /// A name for logs and status.
    fn describe(&self) -> String {
        "agent".into()
    }

    /// Ends whatever the agent keeps between turns (an ACP runner's agent processes). The
    /// engine calls it at shutdown, once the last turn has ended.
    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// Answers an agent's approval requests, and publishes what happened as events. The engine's
/// handler is the [`crate::bridge::FrontendRequestBridge`], which asks attached frontends
/// allowed to answer and fails closed when there are none.
pub trait ApprovalHandler: Send + Sync + 'static {
    /// Asks whoever may answer; must fail closed (deny) when nobody can.
    fn request(&self, prompt: String) -> BoxFuture<'static, ApprovalDecision>;
}

/// What a running turn can do: report progress, notice cancellation, ask for approval.
#[derive(Clone)]
pub struct TurnContext {
    pub(crate) hub: EventHub,
    pub(crate) cancel: CancellationToken,
    pub(crate) approvals: Option<Arc<dyn ApprovalHandler>>,
}

impl TurnContext {
    /// The store, once everything published so far is in it (the turns and sessions earlier
    /// turns recorded).
    async fn settled_store(&self) -> &Arc<dyn Store> {
        self.hub.delivered(self.hub.published_seq()).await;
        self.hub.store()
    }

    /// Publishes progress text.
    pub fn text(&self, text: impl Into<String>) {
        self.hub.publish(RuntimeEvent::Text { text: text.into() });
    }

    /// Fires when the turn is interrupted or the runtime shuts down.
    pub fn cancelled(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Asks for approval. Without an authorised party to answer, the answer is a denial, and
    /// the denial is published as an `approval_denied` event.
    pub async fn request_approval(&self, prompt: impl Into<String>) -> ApprovalDecision {
        let prompt = prompt.into();
        match &self.approvals {
            Some(h) => h.request(prompt).await,
            None => {
                self.hub.publish(RuntimeEvent::ApprovalDenied { request_id: None, prompt, reason: "nobody authorised to answer approvals is attached".into() });
                ApprovalDecision::denied()
            }
        }
    }
}

/// The default agent: each turn runs the runner it names, from the operator's registry, with
/// every bound of the runner contract enforced. `openagents run` and `openagents serve` build
/// the same one. A runner whose entry says `protocol = "acp"` is driven over the Agent Client
/// Protocol instead, its process kept across the turns of a conversation ([`AcpHost`]), its
/// session kept in the store so that a restarted runtime can have the agent load it.
pub struct RunnerAgent {
    host: RunnerHost,
    acp: AcpHost,
}

impl RunnerAgent {
    /// An agent for the runners of `host`'s registry.
    pub fn new(host: RunnerHost) -> Self {
        RunnerAgent { host, acp: AcpHost::new() }
    }

    /// The host of the ACP runners' processes.
    pub fn acp(&self) -> &AcpHost {
        &self.acp
    }

    /// The host.
    pub fn host(&self) -> &RunnerHost {
        &self.host
    }
}

impl Agent for RunnerAgent {
    fn run_turn(&self, turn: Turn, ctx: TurnContext) -> BoxFuture<'_, Result<String, RuntimeSubmitError>> {
        Box::pin(async move {
            let mut on_event = |e: &Event| {
                if let Event::Text { text } = e {
                    ctx.text(text.clone());
                }
            };
            let approver = ContextApprover(&ctx);
            if let (Protocol::Acp(settings), Ok(spec)) = (self.host.registry().protocol(&turn.agent.runner), self.host.registry().get(&turn.agent.runner)) {
                let resume = kept_session(&**ctx.settled_store().await, &turn);
                let hub = ctx.hub.clone();
                let (conversation, runner) = (turn.conversation.clone(), turn.agent.runner.clone());
                let mut keep = move |id: &str| hub.keep_agent_session(AgentSession { conversation: conversation.clone(), runner: runner.clone(), session_id: id.to_owned() });
                let keeping = SessionKeeping { resume, on_new_session: Some(&mut keep) };
                let report = self.acp.run_keeping(spec, settings, &turn, keeping, ctx.cancelled(), &mut on_event, &approver).await;
                return report.outcome.map_err(|e| {
                    if matches!(e, openagents_runner::AcpError::BadCwd { .. }) {
                        tracing::warn!(target: "openagents::runner", assignment = %turn.assignment, detail = %e.operator_detail(), "turn refused");
                    }
                    e.to_runtime_error()
                });
            }
            let report = self.host.run_with(&turn, ctx.cancelled(), &mut on_event, &approver).await;
            // The operator's log gets what the runner wrote to stderr (its newest bytes, each
            // line escaped: runner-controlled text never reaches a terminal raw).
            for line in report.stderr.lines().filter(|l| !l.trim().is_empty()) {
                tracing::info!(target: "openagents::runner", runner = %turn.agent.runner, assignment = %turn.assignment, stderr = %line.escape_debug());
            }
            report.outcome.map_err(|e| {
                // The caller is told only "unknown runner" or "cwd is not an accessible folder";
                // the operator's log gets which one and why.
                if e.has_operator_detail() {
                    tracing::warn!(target: "openagents::runner", assignment = %turn.assignment, detail = %e.operator_detail(), "turn refused");
                }
                e.to_runtime_error()
            })
        })
    }

    fn describe(&self) -> String {
        let ids: Vec<&str> = self.host.registry().runners.keys().map(String::as_str).collect();
        format!("runners: {}", ids.join(", "))
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.acp.shutdown())
    }
}

/// The ACP session the store keeps for `turn`'s conversation, when this runner's agent opened
/// it (another runner's session means nothing to this one).
fn kept_session(store: &dyn Store, turn: &Turn) -> Option<String> {
    match store.agent_session(&turn.conversation) {
        Ok(kept) => kept.filter(|k| k.runner == turn.agent.runner).map(|k| k.session_id),
        Err(e) => {
            tracing::error!("{e}: the conversation's earlier ACP session cannot be resumed");
            None
        }
    }
}

/// Forwards a runner's approval requests to the turn's approval handler.
struct ContextApprover<'c>(&'c TurnContext);

impl Approver for ContextApprover<'_> {
    fn approve<'a>(&'a self, _id: &'a str, prompt: &'a str) -> openagents_runner::host::BoxFuture<'a, ApprovalDecision> {
        Box::pin(self.0.request_approval(prompt.to_owned()))
    }
}

/// An agent written as an async function, run in process (embedding, tests).
pub struct FnAgent<F>(pub F);

impl<F, Fut> Agent for FnAgent<F>
where
    F: Fn(Turn, TurnContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<String, RuntimeSubmitError>> + Send + 'static,
{
    fn run_turn(&self, turn: Turn, ctx: TurnContext) -> BoxFuture<'_, Result<String, RuntimeSubmitError>> {
        Box::pin((self.0)(turn, ctx))
    }

    fn describe(&self) -> String {
        "in-process agent".into()
    }
}

/// A typed error with the code's documented retry hint.
pub fn error(code: ErrorCode, message: impl Into<String>) -> RuntimeSubmitError {
    RuntimeSubmitError { retryable: code.retryable(), code, message: message.into(), details: None }
}
