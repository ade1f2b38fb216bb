//! The agent a runtime drives: "run this turn, emit events, stop when cancelled, ask for
//! approval through a handler". The default is a runner process from the operator's registry;
//! an in-process agent serves embedding and tests.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use openagents_protocol::{ErrorCode, Event, RuntimeEvent, RuntimeSubmitError, Turn};
use openagents_runner::RunnerHost;
use tokio_util::sync::CancellationToken;

use crate::events::EventHub;

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
}

/// Whether an approval was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Go ahead.
    Approved,
    /// Do not.
    Denied,
}

/// Answers an agent's approval requests. The engine installs none: with nobody authorised to
/// answer, every request is denied.
pub trait ApprovalHandler: Send + Sync + 'static {
    /// Asks whoever may answer; must fail closed (deny) when nobody can.
    fn request(&self, prompt: String) -> BoxFuture<'static, Approval>;
}

/// What a running turn can do: report progress, notice cancellation, ask for approval.
#[derive(Clone)]
pub struct TurnContext {
    pub(crate) hub: EventHub,
    pub(crate) cancel: CancellationToken,
    pub(crate) approvals: Option<Arc<dyn ApprovalHandler>>,
}

impl TurnContext {
    /// Publishes progress text.
    pub fn text(&self, text: impl Into<String>) {
        self.hub.publish(RuntimeEvent::Text { text: text.into() });
    }

    /// Fires when the turn is interrupted or the runtime shuts down.
    pub fn cancelled(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Asks for approval. Without an authorised party to answer, the answer is
    /// [`Approval::Denied`] and the denial is published as an `approval_denied` event.
    pub async fn request_approval(&self, prompt: impl Into<String>) -> Approval {
        let prompt = prompt.into();
        let answer = match &self.approvals {
            Some(h) => h.request(prompt.clone()).await,
            None => Approval::Denied,
        };
        if answer == Approval::Denied {
            let reason = if self.approvals.is_none() { "nobody authorised to answer approvals is attached" } else { "denied" };
            self.hub.publish(RuntimeEvent::ApprovalDenied { prompt, reason: reason.into() });
        }
        answer
    }
}

/// The default agent: each turn runs the runner it names, from the operator's registry, with
/// every bound of the runner contract enforced. `openagents run` and `openagents serve` build
/// the same one.
pub struct RunnerAgent {
    host: RunnerHost,
}

impl RunnerAgent {
    /// An agent for the runners of `host`'s registry.
    pub fn new(host: RunnerHost) -> Self {
        RunnerAgent { host }
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
            let report = self.host.run(&turn, ctx.cancelled(), &mut on_event).await;
            report.outcome.map_err(|e| e.to_runtime_error())
        })
    }

    fn describe(&self) -> String {
        let ids: Vec<&str> = self.host.registry().runners.keys().map(String::as_str).collect();
        format!("runners: {}", ids.join(", "))
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
