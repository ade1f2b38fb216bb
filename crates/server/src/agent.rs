//! The agent a runtime drives: "run this turn, emit events, stop when cancelled, ask for
//! approval through a handler". The default is a runner process from the operator's registry;
//! an in-process agent serves embedding and tests.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use openagents_protocol::{EarlierTurn, ErrorCode, Event, MAX_FRAME, RuntimeEvent, RuntimeSubmitError, TURN_HISTORY_MAX_BYTES, Turn};
use openagents_runner::host::{ApprovalDecision, Approver};
use openagents_runner::registry::Protocol;
use openagents_runner::{AcpHost, RunnerHost, SessionKeeping};
use tokio_util::sync::CancellationToken;

use crate::events::EventHub;
use crate::store::{AgentSession, Outcome, Store};

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
/// session kept in the store so that a restarted runtime can have the agent load it; a runner
/// whose entry says `history = true` gets the conversation's earlier turns from the store in
/// `Turn.history`.
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
    fn run_turn(&self, mut turn: Turn, ctx: TurnContext) -> BoxFuture<'_, Result<String, RuntimeSubmitError>> {
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
            if self.host.registry().wants_history(&turn.agent.runner) {
                let history = earlier_turns(&**ctx.settled_store().await, &turn.conversation);
                turn.history = Some(fit_history(history_budget(&turn), history));
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

/// How many earlier turns are read from the store at a time while a turn's history is made.
const HISTORY_PAGE: usize = 64;

/// The completed turns of `conversation` the store keeps, newest first, read a page at a time
/// as they are taken.
fn earlier_turns<'a>(store: &'a dyn Store, conversation: &'a str) -> impl Iterator<Item = EarlierTurn> + 'a {
    let mut before = Some(i64::MAX);
    let mut page = std::collections::VecDeque::new();
    std::iter::from_fn(move || {
        loop {
            if let Some(t) = page.pop_front() {
                return Some(t);
            }
            let at = before.take()?;
            let turns = match store.turns_before(conversation, at, HISTORY_PAGE) {
                Ok(turns) => turns,
                Err(e) => {
                    tracing::error!("{e}: the turn's history stops here");
                    return None;
                }
            };
            if turns.len() == HISTORY_PAGE {
                before = turns.last().map(|t| t.start.first_seq);
            }
            page.extend(turns.into_iter().filter(|t| t.outcome == Outcome::Completed.as_str()).filter_map(|t| Some(EarlierTurn { result: t.result?, task: t.start.task })));
        }
    })
}

/// The bytes of JSON `turn`'s `history` may take: [`TURN_HISTORY_MAX_BYTES`], or less when the
/// rest of the turn leaves less room in its `MAX_FRAME` line.
fn history_budget(turn: &Turn) -> usize {
    let mut bare = turn.clone();
    bare.history = Some(Vec::new());
    let base = serde_json::to_vec(&bare).map_or(MAX_FRAME, |line| line.len());
    // `base` holds the empty history's `[]`, which the budget counts.
    TURN_HISTORY_MAX_BYTES.min((MAX_FRAME + 2).saturating_sub(base))
}

/// The newest of `newest_first` whose JSON array fits in `budget` bytes, oldest first; the
/// first that does not fit ends the history (it never skips to older ones).
fn fit_history(budget: usize, newest_first: impl IntoIterator<Item = EarlierTurn>) -> Vec<EarlierTurn> {
    let mut kept = Vec::new();
    let mut used = 2;
    for item in newest_first {
        let size = serde_json::to_vec(&item).map_or(usize::MAX, |json| json.len()).saturating_add(usize::from(!kept.is_empty()));
        if used + size > budget {
            break;
        }
        used += size;
        kept.push(item);
    }
    kept.reverse();
    kept
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

/// The short, fixed `message` of a JSON-RPC error object for `code`: the specification's own
/// words for its standard codes, the code's name in words for ours.
pub fn error_title(code: &ErrorCode) -> std::borrow::Cow<'static, str> {
    match code {
        ErrorCode::ParseError => "Parse error".into(),
        ErrorCode::InvalidRequest => "Invalid Request".into(),
        ErrorCode::UnknownMethod => "Method not found".into(),
        ErrorCode::InvalidParams => "Invalid params".into(),
        ErrorCode::Internal => "Internal error".into(),
        other => {
            let words = other.as_str().replace('_', " ");
            let mut chars = words.chars();
            match chars.next() {
                Some(first) => format!("{}{}", first.to_uppercase(), chars.as_str()).into(),
                None => "Error".into(),
            }
        }
    }
}

/// The runtime's error as the JSON-RPC error object: its code, its title, and itself (its
/// message bounded) as `data`.
pub(crate) fn rpc_error(mut e: RuntimeSubmitError) -> openagents_rpc::RpcError {
    if e.message.len() > openagents_rpc::MAX_ERROR_MESSAGE {
        e.message = openagents_rpc::bounded(&e.message, openagents_rpc::MAX_ERROR_MESSAGE).into_owned();
    }
    let code = e.code.rpc_code();
    let title = error_title(&e.code).into_owned();
    match serde_json::to_value(&e) {
        Ok(data) => openagents_rpc::RpcError { code, message: title, data: Some(data) },
        Err(_) => openagents_rpc::RpcError::new(code, title),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(task: &str, result: &str) -> EarlierTurn {
        EarlierTurn { task: task.into(), result: result.into() }
    }

    fn json_len(items: &[EarlierTurn]) -> usize {
        serde_json::to_vec(items).expect("JSON").len()
    }

    #[test]
    fn history_keeps_the_newest_turns_that_fit_oldest_first() {
        let newest_first = vec![item("three", "3"), item("two", "2"), item("one", "1")];
        let all = fit_history(usize::MAX, newest_first.clone());
        assert_eq!(all, vec![item("one", "1"), item("two", "2"), item("three", "3")]);
        // At the budget, everything; one byte under it, the oldest goes.
        let exact = json_len(&all);
        assert_eq!(fit_history(exact, newest_first.clone()), all);
        assert_eq!(fit_history(exact - 1, newest_first.clone()), all[1..].to_vec());
        // A turn too large ends the history: nothing older is taken past it.
        let big = item("big", &"x".repeat(100));
        let gapped = vec![item("three", "3"), big, item("one", "1")];
        assert_eq!(fit_history(60, gapped), vec![item("three", "3")]);
        assert_eq!(fit_history(2, newest_first), Vec::<EarlierTurn>::new());
    }

    #[test]
    fn history_leaves_the_turn_within_max_frame() {
        let short = Turn::new("a", "c", "r", "hello", "/tmp");
        assert_eq!(history_budget(&short), TURN_HISTORY_MAX_BYTES);
        // A task that leaves less than the budget: the whole line is MAX_FRAME at most.
        let long = Turn::new("a", "c", "r", "x".repeat(80_000), "/tmp");
        let budget = history_budget(&long);
        assert!(budget < TURN_HISTORY_MAX_BYTES);
        let newest_first: Vec<EarlierTurn> = (0..1000).map(|i| item(&format!("task {i}"), "an answer of some length")).collect();
        let mut full = long.clone();
        full.history = Some(fit_history(budget, newest_first));
        let line = serde_json::to_vec(&full).expect("JSON").len();
        assert!(line <= MAX_FRAME && line > MAX_FRAME - 64, "{line}");
    }
}
