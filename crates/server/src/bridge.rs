//! `FrontendRequestBridge`: server-to-client requests. When the agent asks for approval, the
//! request goes to every attached frontend whose grant includes answering approvals; the first
//! valid answer wins and the others are told it was resolved; late answers are ignored. With no
//! such frontend, or when nobody answers in time, the request is denied — fail closed — and the
//! denial is an event.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openagents_protocol::{ApprovalPrompt, ApprovalReply, ErrorCode, FrontendApprovalRequest, FrontendApprovalResolved, FrontendApprovalResolvedParams, RuntimeEvent, RuntimeSubmitError};
use openagents_runner::host::ApprovalDecision;
use tokio::sync::{mpsc, oneshot};

use crate::agent::{ApprovalHandler, BoxFuture, error};
use crate::events::EventHub;

/// How long an approval request waits for an answer before it is denied.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(120);

/// A text message for one frontend connection.
pub type Outbound = Vec<u8>;

struct Frontend {
    name: String,
    can_answer: bool,
    /// An admin credential (or the trusted parent) may answer whoever holds the lease.
    admin: bool,
    tx: mpsc::Sender<Outbound>,
}

impl Frontend {
    /// Whether it may answer while `holder` (if anyone) holds the controller lease.
    fn may_answer(&self, holder: Option<&str>) -> bool {
        self.can_answer && (self.admin || holder.is_none_or(|h| h == self.name))
    }
}

/// Who holds the controller lease now (the engine's answer), if anyone.
pub(crate) type LeaseHolder = Arc<dyn Fn() -> Option<String> + Send + Sync>;

struct Pending {
    asked: Vec<u64>,
    answer: oneshot::Sender<(ApprovalDecision, String)>,
}

#[derive(Default)]
struct BridgeState {
    frontends: BTreeMap<u64, Frontend>,
    pending: BTreeMap<String, Pending>,
    next_conn: u64,
    next_request: u64,
}

/// Routes the agent's approval requests to attached frontends and their answers back.
pub struct FrontendRequestBridge {
    state: Mutex<BridgeState>,
    hub: EventHub,
    timeout: Mutex<Duration>,
    lease_holder: Mutex<Option<LeaseHolder>>,
}

/// The `frontend.v2.approval` request a frontend is sent, as the generated type encodes it.
fn approval_request(request_id: &str, prompt: &str, timeout: Duration) -> Outbound {
    let message = FrontendApprovalRequest {
        jsonrpc: "2.0".into(),
        id: request_id.to_owned(),
        method: "frontend.v2.approval".into(),
        params: ApprovalPrompt { request_id: request_id.to_owned(), prompt: prompt.to_owned(), timeout_ms: Some(i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX)) },
    };
    serde_json::to_vec(&message).unwrap_or_default()
}

/// The `frontend.v2.approval_resolved` notification the other frontends asked are sent.
fn approval_resolved(request_id: &str, approved: bool, by: Option<&str>) -> Outbound {
    let message = FrontendApprovalResolved {
        jsonrpc: "2.0".into(),
        method: "frontend.v2.approval_resolved".into(),
        params: FrontendApprovalResolvedParams { request_id: request_id.to_owned(), approved, by: by.map(str::to_owned) },
    };
    serde_json::to_vec(&message).unwrap_or_default()
}

impl FrontendRequestBridge {
    /// A bridge publishing its events on `hub`.
    pub fn new(hub: EventHub) -> Arc<Self> {
        Arc::new(FrontendRequestBridge {
            state: Mutex::new(BridgeState::default()),
            hub,
            timeout: Mutex::new(DEFAULT_APPROVAL_TIMEOUT),
            lease_holder: Mutex::new(None),
        })
    }

    /// Tells the bridge how to learn who holds the controller lease: while someone does, only
    /// that holder (or an admin) is asked and may answer.
    pub(crate) fn set_lease_holder(&self, holder: LeaseHolder) {
        *self.lease_holder.lock().unwrap_or_else(|p| p.into_inner()) = Some(holder);
    }

    fn current_holder(&self) -> Option<String> {
        let f = self.lease_holder.lock().unwrap_or_else(|p| p.into_inner()).clone();
        f.and_then(|f| f())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BridgeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes how long a request waits for an answer.
    pub fn set_timeout(&self, timeout: Duration) {
        *self.timeout.lock().unwrap_or_else(|p| p.into_inner()) = timeout;
    }

    /// Attaches a frontend connection that is not an admin; returns its id for
    /// [`FrontendRequestBridge::detach`]. See [`FrontendRequestBridge::attach_caller`].
    pub fn attach(&self, name: &str, can_answer: bool, tx: mpsc::Sender<Outbound>) -> u64 {
        self.attach_frontend(Frontend { name: name.to_owned(), can_answer, admin: false, tx })
    }

    /// Attaches `caller`'s frontend connection: it may answer approvals when its grant says so,
    /// and, while a controller holds the lease, only when it is that controller or an admin
    /// (a grant with every admin method). Returns its id for [`FrontendRequestBridge::detach`].
    pub fn attach_caller(&self, caller: &crate::auth::Caller, tx: mpsc::Sender<Outbound>) -> u64 {
        let admin = caller.trusted || caller.grant.administers();
        self.attach_frontend(Frontend { name: caller.name.clone(), can_answer: caller.grant.approvals, admin, tx })
    }

    fn attach_frontend(&self, frontend: Frontend) -> u64 {
        let mut st = self.lock();
        st.next_conn += 1;
        let id = st.next_conn;
        st.frontends.insert(id, frontend);
        id
    }

    /// Detaches a frontend connection.
    pub fn detach(&self, conn: u64) {
        self.lock().frontends.remove(&conn);
    }

    /// How many attached frontends may answer approvals.
    pub fn answerers(&self) -> usize {
        self.lock().frontends.values().filter(|f| f.can_answer).count()
    }

    /// Takes a frontend's answer to request `request_id`. An answer from a frontend whose grant
    /// does not include approvals is `forbidden`, and so is one from anyone but the lease holder
    /// (or an admin) while a controller holds the lease; an answer to a settled (or unknown)
    /// request is ignored (`Ok(false)`); the first valid answer wins (`Ok(true)`).
    ///
    /// # Errors
    ///
    /// `forbidden` for a frontend without the grant, or not the lease holder's.
    pub fn answer(&self, conn: u64, request_id: &str, reply: ApprovalReply) -> Result<bool, RuntimeSubmitError> {
        // Asked before the bridge's lock: the engine takes its own.
        let holder = self.current_holder();
        let mut st = self.lock();
        let Some(f) = st.frontends.get(&conn) else { return Ok(false) };
        if !f.can_answer {
            return Err(error(ErrorCode::Forbidden, format!("credential `{}` may not answer approvals", f.name)));
        }
        if !f.may_answer(holder.as_deref()) {
            let holder = holder.unwrap_or_default();
            return Err(error(ErrorCode::Forbidden, format!("controller `{holder}` holds the lease: only it, or an admin, may answer approvals, not credential `{}`", f.name)));
        }
        let by = f.name.clone();
        let Some(pending) = st.pending.remove(request_id) else { return Ok(false) };
        let decision = ApprovalDecision { approved: reply.approved, answer: reply.answer };
        let approved = decision.approved;
        let _ = pending.answer.send((decision, by.clone()));
        // Tell the other frontends that were asked that it is settled.
        let note = approval_resolved(request_id, approved, Some(&by));
        for id in pending.asked.iter().filter(|&&id| id != conn) {
            if let Some(other) = st.frontends.get(id) {
                let _ = other.tx.try_send(note.clone());
            }
        }
        Ok(true)
    }

    async fn ask(self: Arc<Self>, prompt: String) -> ApprovalDecision {
        let timeout = *self.timeout.lock().unwrap_or_else(|p| p.into_inner());
        let (tx, rx) = oneshot::channel();
        let holder = self.current_holder();
        let request_id = {
            let mut st = self.lock();
            let answerers: Vec<(u64, mpsc::Sender<Outbound>)> =
                st.frontends.iter().filter(|(_, f)| f.may_answer(holder.as_deref())).map(|(id, f)| (*id, f.tx.clone())).collect();
            if answerers.is_empty() {
                drop(st);
                let reason = match &holder {
                    Some(h) => format!("no frontend allowed to answer approvals is attached for the lease holder `{h}` or an admin"),
                    None => "no frontend allowed to answer approvals is attached".to_owned(),
                };
                self.hub.publish(RuntimeEvent::ApprovalDenied { request_id: None, prompt, reason });
                return ApprovalDecision::denied();
            }
            st.next_request += 1;
            let request_id = format!("approval-{}", st.next_request);
            let message = approval_request(&request_id, &prompt, timeout);
            self.hub.publish(RuntimeEvent::ApprovalRequested { request_id: request_id.clone(), prompt: prompt.clone() });
            let mut asked = Vec::new();
            for (id, tx) in answerers {
                if tx.try_send(message.clone()).is_ok() {
                    asked.push(id);
                }
            }
            st.pending.insert(request_id.clone(), Pending { asked, answer: tx });
            request_id
        };
        // However the wait ends (answered, timed out, or the turn dropped it: interrupted,
        // shut down), the guard settles the request: an answer has already taken it out of
        // `pending`; otherwise the guard takes it out and tells the frontends asked. Dropped,
        // never forgotten: it holds the bridge, and the bridge the hub and its store.
        let guard = PendingGuard { bridge: Arc::clone(&self), request_id: request_id.clone() };
        let waited = tokio::time::timeout(timeout, rx).await;
        drop(guard);
        match waited {
            Ok(Ok((decision, by))) => {
                self.hub.publish(RuntimeEvent::ApprovalResolved { request_id, approved: decision.approved, by });
                decision
            }
            _ => {
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

struct PendingGuard {
    bridge: Arc<FrontendRequestBridge>,
    request_id: String,
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        let mut st = self.bridge.lock();
        if let Some(p) = st.pending.remove(&self.request_id) {
            let note = approval_resolved(&self.request_id, false, None);
            for id in &p.asked {
                if let Some(f) = st.frontends.get(id) {
                    let _ = f.tx.try_send(note.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openagents_protocol::rt;

    #[test]
    fn the_frames_the_bridge_sends_decode_as_their_generated_types() {
        let request = approval_request("approval-1", "run `rm -rf target`?\n\u{1b}[2K", Duration::from_secs(120));
        let decoded: FrontendApprovalRequest = rt::parse_validated(&request).expect("a valid FrontendApprovalRequest");
        assert_eq!((decoded.id.as_str(), decoded.params.prompt.as_str(), decoded.params.timeout_ms), ("approval-1", "run `rm -rf target`?\n\u{1b}[2K", Some(120_000)));
        for (approved, by) in [(true, Some("ci")), (false, None)] {
            let note = approval_resolved("approval-1", approved, by);
            let decoded: FrontendApprovalResolved = rt::parse_validated(&note).expect("a valid FrontendApprovalResolved");
            assert_eq!((decoded.params.approved, decoded.params.by.as_deref()), (approved, by));
        }
    }
}
