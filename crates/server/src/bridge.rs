//! `FrontendRequestBridge`: server-to-client requests. When the agent asks for approval, the
//! request goes to every attached frontend whose grant includes answering approvals; the first
//! valid answer wins and the others are told it was resolved; late answers are ignored. With no
//! such frontend, or when nobody answers in time, the request is denied — fail closed — and the
//! denial is an event.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openagents_protocol::{ApprovalPrompt, ApprovalReply, ErrorCode, FrontendApprovalResolvedParams, RuntimeEvent, RuntimeSubmitError};
use openagents_rpc::audience::{Ask, Audience};
use openagents_rpc::Peer;
use openagents_runner::host::ApprovalDecision;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use crate::agent::{ApprovalHandler, BoxFuture, error};
use crate::events::EventHub;

/// How long an approval request waits for an answer before it is denied.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(120);

/// A text message for one frontend connection.
pub type Outbound = Vec<u8>;

/// An attached frontend connection, as the audience marks it.
#[derive(Debug, Clone)]
struct Frontend {
    name: String,
    can_answer: bool,
    /// An admin credential (or the trusted parent) may answer whoever holds the lease.
    admin: bool,
}

/// Who holds the controller lease now (the engine's answer), if anyone.
pub(crate) type LeaseHolder = Arc<dyn Fn() -> Option<String> + Send + Sync>;

type Holder = Arc<Mutex<Option<LeaseHolder>>>;

fn current_holder(holder: &Holder) -> Option<String> {
    let f = holder.lock().unwrap_or_else(|p| p.into_inner()).clone();
    f.and_then(|f| f())
}

/// Why `f` may not answer approvals now, while `holder` (if anyone) holds the controller lease:
/// without the grant, or, while a controller holds the lease, being neither it nor an admin.
fn refusal(f: &Frontend, holder: Option<&str>) -> Option<RuntimeSubmitError> {
    if !f.can_answer {
        return Some(error(ErrorCode::Forbidden, format!("credential `{}` may not answer approvals", f.name)));
    }
    match holder {
        Some(h) if !f.admin && h != f.name => {
            Some(error(ErrorCode::Forbidden, format!("controller `{h}` holds the lease: only it, or an admin, may answer approvals, not credential `{}`", f.name)))
        }
        _ => None,
    }
}

/// Routes the agent's approval requests to attached frontends and their answers back, on the
/// `openagents-rpc` core's [`Audience`]: a request goes to every attached frontend that may
/// answer it, and to each that attaches while it waits (a frontend that reconnects is asked
/// again); the core's connections take the answers.
pub struct FrontendRequestBridge {
    audience: Arc<Audience<Frontend>>,
    holder: Holder,
    hub: EventHub,
    timeout: Mutex<Duration>,
    next_request: AtomicU64,
}

/// The params of the `frontend.v2.approval` request a frontend is sent, as the generated type
/// encodes them.
fn approval_prompt(request_id: &str, prompt: &str, timeout: Duration) -> Option<Box<RawValue>> {
    let params = ApprovalPrompt { request_id: request_id.to_owned(), prompt: prompt.to_owned(), timeout_ms: Some(i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX)) };
    serde_json::value::to_raw_value(&params).ok()
}

/// The params of the `frontend.v2.approval_resolved` notification the other frontends asked are
/// sent.
fn approval_resolved(request_id: &str, approved: bool, by: Option<&str>) -> Option<Box<RawValue>> {
    let params = FrontendApprovalResolvedParams { request_id: request_id.to_owned(), approved, by: by.map(str::to_owned) };
    serde_json::value::to_raw_value(&params).ok()
}

const APPROVAL: &str = "frontend.v2.approval";
const RESOLVED: &str = "frontend.v2.approval_resolved";

impl FrontendRequestBridge {
    /// A bridge publishing its events on `hub`.
    pub fn new(hub: EventHub) -> Arc<Self> {
        let holder: Holder = Arc::new(Mutex::new(None));
        // Answers are read exactly, as everything a client sends: one with a key given twice
        // anywhere is an error answer, a denial.
        let audience = Audience::with_screen(
            {
                let holder = Arc::clone(&holder);
                move |f: &Frontend| match refusal(f, current_holder(&holder).as_deref()) {
                    Some(e) => Err(crate::agent::rpc_error(e)),
                    None => Ok(()),
                }
            },
            |message| crate::decode::exact_document(message).is_ok(),
        );
        Arc::new(FrontendRequestBridge { audience, holder, hub, timeout: Mutex::new(DEFAULT_APPROVAL_TIMEOUT), next_request: AtomicU64::new(0) })
    }

    /// Tells the bridge how to learn who holds the controller lease: while someone does, only
    /// that holder (or an admin) is asked and may answer.
    pub(crate) fn set_lease_holder(&self, holder: LeaseHolder) {
        *self.holder.lock().unwrap_or_else(|p| p.into_inner()) = Some(holder);
    }

    /// Changes how long a request waits for an answer.
    pub fn set_timeout(&self, timeout: Duration) {
        *self.timeout.lock().unwrap_or_else(|p| p.into_inner()) = timeout;
    }

    /// Attaches a frontend connection that is not an admin, whose outbound queue is `tx`;
    /// returns its id for [`FrontendRequestBridge::answer`] and
    /// [`FrontendRequestBridge::detach`]. See [`FrontendRequestBridge::attach_caller`].
    pub fn attach(&self, name: &str, can_answer: bool, tx: mpsc::Sender<Outbound>) -> u64 {
        self.audience.attach(tx, Frontend { name: name.to_owned(), can_answer, admin: false })
    }

    fn mark(caller: &crate::auth::Caller) -> Frontend {
        let admin = caller.trusted || caller.grant.administers();
        Frontend { name: caller.name.clone(), can_answer: caller.grant.approvals, admin }
    }

    /// Attaches `caller`'s frontend connection, whose outbound queue is `tx`: it may answer
    /// approvals when its grant says so, and, while a controller holds the lease, only when it is
    /// that controller or an admin (a grant with every admin method). It is sent the requests
    /// that wait and that it may answer. Returns its id for [`FrontendRequestBridge::answer`]
    /// and [`FrontendRequestBridge::detach`].
    pub fn attach_caller(&self, caller: &crate::auth::Caller, tx: mpsc::Sender<Outbound>) -> u64 {
        self.audience.attach(tx, Self::mark(caller))
    }

    /// [`FrontendRequestBridge::attach_caller`] for the core connection of `peer`, which takes the
    /// frontend's answers itself; detached when the connection ends. `None` where the connection
    /// takes no answers.
    pub fn join(&self, caller: &crate::auth::Caller, peer: &Peer) -> Option<u64> {
        self.audience.join(peer, Self::mark(caller))
    }

    /// Detaches a frontend connection.
    pub fn detach(&self, conn: u64) {
        self.audience.detach(conn);
    }

    /// How many attached frontends may answer approvals.
    pub fn answerers(&self) -> usize {
        self.audience.count(|f| f.can_answer)
    }

    /// Takes a frontend's answer to request `request_id`, as its connection would. An answer
    /// from a frontend whose grant does not include approvals is `forbidden`, and so is one from
    /// anyone but the lease holder (or an admin) while a controller holds the lease; an answer to
    /// a settled (or unknown) request is ignored (`Ok(false)`); the first valid answer wins
    /// (`Ok(true)`).
    ///
    /// # Errors
    ///
    /// `forbidden` for a frontend without the grant, or not the lease holder's.
    pub fn answer(&self, conn: u64, request_id: &str, reply: ApprovalReply) -> Result<bool, RuntimeSubmitError> {
        let result = serde_json::value::to_raw_value(&reply).map_err(|e| error(ErrorCode::Internal, e.to_string()))?;
        // The audience's check is the bridge's refusal; its error carries the runtime's own.
        self.audience.answer(conn, request_id, Ok(result)).map_err(|e| e.data.and_then(|d| serde_json::from_value(d).ok()).unwrap_or_else(|| error(ErrorCode::Forbidden, e.message)))
    }

    async fn ask(self: Arc<Self>, prompt: String) -> ApprovalDecision {
        let timeout = *self.timeout.lock().unwrap_or_else(|p| p.into_inner());
        let holder = current_holder(&self.holder);
        if self.audience.count(|f| refusal(f, holder.as_deref()).is_none()) == 0 {
            // Fail closed: nobody who may answer is attached.
            let reason = match holder {
                Some(h) => format!("no frontend allowed to answer approvals is attached for the lease holder `{h}` or an admin"),
                None => "no frontend allowed to answer approvals is attached".to_owned(),
            };
            self.hub.publish(RuntimeEvent::ApprovalDenied { request_id: None, prompt, reason });
            return ApprovalDecision::denied();
        }
        // Published before anyone is asked (`approval_requested` is in the log before its outcome
        // can be). A frontend that may answer and attaches while it waits is asked too.
        let request_id = format!("approval-{}", self.next_request.fetch_add(1, Ordering::Relaxed) + 1);
        self.hub.publish(RuntimeEvent::ApprovalRequested { request_id: request_id.clone(), prompt: prompt.clone() });
        // A frontend asked later (one that reconnects) is told the time left, not the whole.
        let deadline = tokio::time::Instant::now() + timeout;
        let later = {
            let (request_id, prompt) = (request_id.clone(), prompt.clone());
            move || approval_prompt(&request_id, &prompt, deadline.saturating_duration_since(tokio::time::Instant::now()))
        };
        let params = approval_prompt(&request_id, &prompt, timeout);
        let ask = match self.audience.ask_with(&request_id, APPROVAL, params.as_deref(), later) {
            Ok(ask) => ask,
            Err(e) => {
                // Ids are the bridge's own count: a second request under one cannot be.
                self.hub.publish(RuntimeEvent::ApprovalDenied { request_id: Some(request_id), prompt, reason: e.to_string() });
                return ApprovalDecision::denied();
            }
        };
        // However the wait ends (answered, timed out, or the turn dropped it: interrupted, shut
        // down), the guard settles the request and tells the frontends asked (but the one that
        // answered) how.
        let mut guard = Settle { ask, outcome: None };
        let waited = tokio::time::timeout(timeout, guard.ask.answered()).await;
        match waited {
            Ok(answered) => {
                // An error answer, or a result that does not decode exactly, is a denial.
                let reply = answered.result.ok().and_then(|r| crate::decode::approval_reply(&r));
                let decision = reply.map_or_else(ApprovalDecision::denied, |r| ApprovalDecision { approved: r.approved, answer: r.answer });
                let by = answered.by.name;
                guard.outcome = Some((decision.approved, Some(by.clone())));
                drop(guard);
                self.hub.publish(RuntimeEvent::ApprovalResolved { request_id, approved: decision.approved, by });
                decision
            }
            Err(_) => {
                drop(guard);
                self.hub.publish(RuntimeEvent::ApprovalDenied { request_id: Some(request_id), prompt, reason: format!("no answer within {timeout:?}") });
                ApprovalDecision::denied()
            }
        }
    }
}

/// The bridge as the engine's approval handler.
pub struct BridgeHandler(pub Arc<FrontendRequestBridge>);

impl ApprovalHandler for BridgeHandler {
    fn request(&self, prompt: String) -> BoxFuture<'static, ApprovalDecision> {
        Box::pin(Arc::clone(&self.0).ask(prompt))
    }
}

/// Settles an approval request when dropped: the frontends asked (but one that answered) are
/// told its outcome (`approved: false`, by nobody, unless an answer set it).
struct Settle {
    ask: Ask<Frontend>,
    outcome: Option<(bool, Option<String>)>,
}

impl Drop for Settle {
    fn drop(&mut self) {
        let (approved, by) = self.outcome.take().unwrap_or((false, None));
        let params = approval_resolved(self.ask.id(), approved, by.as_deref());
        self.ask.tell_others(RESOLVED, params.as_deref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openagents_protocol::rt;
    use openagents_protocol::{FrontendApprovalRequest, FrontendApprovalResolved};

    #[tokio::test]
    async fn the_frames_the_bridge_sends_decode_as_their_generated_types() {
        let audience = Audience::<()>::open();
        let (to_a, mut a) = mpsc::channel(4);
        let (to_b, mut b) = mpsc::channel(4);
        let (first, _) = (audience.attach(to_a, ()), audience.attach(to_b, ()));
        for (n, (approved, by)) in [(true, Some("ci")), (false, None)].into_iter().enumerate() {
            let id = format!("approval-{n}");
            let params = approval_prompt(&id, "run `rm -rf target`?\n\u{1b}[2K", Duration::from_secs(120));
            let mut ask = audience.ask(&id, APPROVAL, params.as_deref()).expect("asked");
            let request = a.try_recv().expect("a request");
            assert_eq!(b.try_recv().expect("a request"), request);
            let decoded: FrontendApprovalRequest = rt::parse_validated(&request).expect("a valid FrontendApprovalRequest");
            assert_eq!((decoded.id.as_str(), decoded.params.request_id.as_str(), decoded.params.prompt.as_str(), decoded.params.timeout_ms), (id.as_str(), id.as_str(), "run `rm -rf target`?\n\u{1b}[2K", Some(120_000)));
            assert_eq!(audience.answer(first, &id, Ok(openagents_rpc::null())), Ok(true));
            assert_eq!(ask.answered().await.result.map(|r| r.get().to_owned()), Ok("null".to_owned()));
            ask.tell_others(RESOLVED, approval_resolved(&id, approved, by).as_deref());
            assert!(a.try_recv().is_err(), "the frontend that answered is not told");
            let note = b.try_recv().expect("the resolution");
            let decoded: FrontendApprovalResolved = rt::parse_validated(&note).expect("a valid FrontendApprovalResolved");
            assert_eq!((decoded.params.request_id.as_str(), decoded.params.approved, decoded.params.by.as_deref()), (id.as_str(), approved, by));
        }
    }
}
