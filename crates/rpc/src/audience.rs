//! Server-to-client requests addressed to whoever may answer them, not to one connection.
//!
//! [`Peer::request`] asks the caller of one connection, and its request ends with that
//! connection. An [`Audience`] is for a request that must outlive connections: an approval the
//! server waits for while its users come and go. Connections join it with a mark of the program's
//! own (who the caller is, what it may answer); [`Audience::ask`] sends a request to every member
//! the audience's check lets answer, **and to every member that joins later while it waits** (a
//! caller that reconnects is asked again, on its new connection; [`Audience::ask_with`] makes its
//! params anew for those, say the time left to answer); the first answer wins; the
//! members asked learn the outcome from a notification of the program's choice
//! ([`Ask::tell_others`]); an answer after that is a stray and is dropped.
//!
//! Answers arrive as any answer does: a JSON-RPC response on the member's connection, taken by
//! the core before any bound on calls in flight ([`Audience::join`]). An answer from a member the
//! check refuses *at the time it answers* (say, one whose right to answer was taken away while the
//! request waited) is sent back the check's error, with the answer's id; nothing is settled.
//!
//! The ids are strings of the program's choosing (a schema may fix their shape): they never
//! collide with the numbers [`Peer::request`] uses.
//!
//! ```
//! use openagents_rpc::audience::Audience;
//! use openagents_rpc::RpcError;
//! use serde_json::value::RawValue;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! // Members are marked with a name and whether they may answer.
//! let audience = Audience::new(|m: &(String, bool)| if m.1 { Ok(()) } else { Err(RpcError::new(-32001, "may not answer")) });
//! let (to_alice, mut alice) = tokio::sync::mpsc::channel(8);
//! let alice_1 = audience.attach(to_alice, ("alice".to_owned(), true));
//! let params = RawValue::from_string(r#"{"prompt":"deploy?"}"#.into()).unwrap();
//! let mut ask = audience.ask("approval-1", "approve", Some(&params)).unwrap();
//! assert_eq!(alice.recv().await.unwrap(), br#"{"jsonrpc":"2.0","id":"approval-1","method":"approve","params":{"prompt":"deploy?"}}"#);
//!
//! // Alice's connection drops; she comes back on a new one and is asked again.
//! audience.detach(alice_1);
//! let (to_alice, mut alice) = tokio::sync::mpsc::channel(8);
//! let alice_2 = audience.attach(to_alice, ("alice".to_owned(), true));
//! assert!(alice.recv().await.unwrap().starts_with(br#"{"jsonrpc":"2.0","id":"approval-1""#));
//! let yes = RawValue::from_string("true".into()).unwrap();
//! assert_eq!(audience.answer(alice_2, "approval-1", Ok(yes)), Ok(true));
//! let answered = ask.answered().await;
//! assert_eq!((answered.by.0.as_str(), answered.result.unwrap().get()), ("alice", "true"));
//! # });
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};

use crate::{Peer, RpcError};

/// A caller's answer: the raw result, or the error it answered with.
pub type Answer = Result<Box<RawValue>, RpcError>;

/// Why [`Audience::ask`] sent nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// A request under this id still waits for its answer.
    #[error("a request with the id `{0}` already waits for an answer")]
    Duplicate(String),
}

/// The answer that settled an [`Ask`]: what was answered, and the mark of the member who did.
#[derive(Debug)]
pub struct Answered<M> {
    /// The raw result, or the error the member answered with.
    pub result: Answer,
    /// The answering member's mark.
    pub by: M,
}

type Check<M> = dyn Fn(&M) -> Result<(), RpcError> + Send + Sync;
type Screen = dyn Fn(&[u8]) -> bool + Send + Sync;
type Remake = dyn Fn() -> Vec<u8> + Send + Sync;

struct Member<M> {
    mark: M,
    tx: mpsc::Sender<Vec<u8>>,
}

struct Waiting<M> {
    /// Which request under this id (an id may be used again once its request is settled).
    serial: u64,
    /// The request as first sent.
    message: Arc<[u8]>,
    /// Makes it anew for a member that joins later ([`Audience::ask_with`]).
    remake: Option<Box<Remake>>,
    /// The members it was sent to.
    asked: BTreeSet<u64>,
    answer: oneshot::Sender<Settled<M>>,
}

struct Settled<M> {
    answered: Answered<M>,
    by: u64,
    asked: BTreeSet<u64>,
}

struct State<M> {
    members: BTreeMap<u64, Member<M>>,
    waiting: HashMap<String, Waiting<M>>,
    next: u64,
}

impl<M> State<M> {
    /// A number not given before: a member's id, or a request's serial.
    fn fresh(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Takes the request waiting under `id` if it is still the one numbered `serial`.
    fn settle(&mut self, id: &str, serial: u64) -> Option<Waiting<M>> {
        if self.waiting.get(id)?.serial == serial { self.waiting.remove(id) } else { None }
    }
}

/// Connections that may be asked, and the requests that wait for one of them to answer. See the
/// [module documentation](self).
pub struct Audience<M> {
    state: Mutex<State<M>>,
    check: Box<Check<M>>,
    screen: Option<Box<Screen>>,
}

impl<M> std::fmt::Debug for Audience<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Audience").field("members", &st.members.len()).field("waiting", &st.waiting.len()).finish_non_exhaustive()
    }
}

impl<M: Clone + Send + Sync + 'static> Audience<M> {
    /// An audience whose members are asked, and whose answers are taken, when `check` passes
    /// their mark. `check` runs without the audience's lock held, so it may take locks of the
    /// program's own; its error is what a member that may not answer is sent back.
    pub fn new(check: impl Fn(&M) -> Result<(), RpcError> + Send + Sync + 'static) -> Arc<Audience<M>> {
        Audience::build(Box::new(check), None)
    }

    /// [`Audience::new`], with a screen of every answer a joined connection gives: the whole
    /// message's text, as received. An answer the screen refuses (say, one with a key given twice
    /// anywhere, where the program reads JSON exactly) is still an answer, but an error one
    /// (`-32600`), whatever its `result` said: it settles the request, and cannot approve it.
    pub fn with_screen(check: impl Fn(&M) -> Result<(), RpcError> + Send + Sync + 'static, screen: impl Fn(&[u8]) -> bool + Send + Sync + 'static) -> Arc<Audience<M>> {
        Audience::build(Box::new(check), Some(Box::new(screen)))
    }

    fn build(check: Box<Check<M>>, screen: Option<Box<Screen>>) -> Arc<Audience<M>> {
        Arc::new(Audience { state: Mutex::new(State { members: BTreeMap::new(), waiting: HashMap::new(), next: 0 }), check, screen })
    }

    /// An audience every member of which is asked and may answer.
    pub fn open() -> Arc<Audience<M>> {
        Audience::new(|_| Ok(()))
    }

    fn lock(&self) -> MutexGuard<'_, State<M>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the connection whose outbound queue is `tx` a member marked `mark`, and sends it every
    /// request that waits and that the check lets it answer. Returns its id, for
    /// [`Audience::answer`] and [`Audience::detach`]. Its answers are given to
    /// [`Audience::answer`] by the program; [`Audience::join`] has the core do it.
    pub fn attach(&self, tx: mpsc::Sender<Vec<u8>>, mark: M) -> u64 {
        let id = {
            let mut st = self.lock();
            let id = st.fresh();
            st.members.insert(id, Member { mark: mark.clone(), tx });
            id
        };
        self.catch_up(id, &mark);
        id
    }

    /// Sends member `id` every request that waits, when the check lets it answer.
    fn catch_up(&self, id: u64, mark: &M) {
        if (self.check)(mark).is_ok() {
            let ids: Vec<String> = self.lock().waiting.keys().cloned().collect();
            for ask in ids {
                self.send(&ask, &[id], true);
            }
        }
    }

    /// [`Audience::attach`] for the connection of `peer` (a [`crate::Context`]'s), whose
    /// answers the core then gives the audience; the member leaves when the connection ends.
    /// `None` where the transport takes no answers (HTTP `POST /rpc`, in-process calls).
    pub fn join(self: &Arc<Self>, peer: &Peer, mark: M) -> Option<u64> {
        let (Some(tx), Some(pending)) = (&peer.tx, &peer.pending) else { return None };
        let route: Weak<dyn Route> = Arc::downgrade(self) as Weak<dyn Route>;
        let member = match pending.member_of(&route) {
            // Joined before on this connection: one member still, with the new mark (back in
            // the audience if the program detached it).
            Some(member) => member,
            None => {
                // The route before the member is seen, so an answer to what it is sent on
                // joining always finds its way.
                let member = self.lock().fresh();
                match pending.add_route(Weak::clone(&route), member) {
                    Ok(()) => member,
                    // Another join on this connection came first.
                    Err(Some(first)) => first,
                    // The connection has closed.
                    Err(None) => return None,
                }
            }
        };
        self.lock().members.insert(member, Member { mark: mark.clone(), tx: tx.clone() });
        self.catch_up(member, &mark);
        Some(member)
    }

    /// Removes a member: it is asked nothing more, and its answers are ignored.
    pub fn detach(&self, member: u64) {
        let mut st = self.lock();
        if st.members.remove(&member).is_some() {
            for w in st.waiting.values_mut() {
                w.asked.remove(&member);
            }
        }
    }

    /// The mark of a member that is attached.
    pub fn mark(&self, member: u64) -> Option<M> {
        self.lock().members.get(&member).map(|m| m.mark.clone())
    }

    /// How many members `f` counts (`f` runs under the audience's lock: it must not call into
    /// the audience, nor take a lock held where the audience is called).
    pub fn count(&self, f: impl Fn(&M) -> bool) -> usize {
        self.lock().members.values().filter(|m| f(&m.mark)).count()
    }

    /// Sends the request `method` with `params` (raw; `None`: no `params` member), under the
    /// string id `id`, to every member the check lets answer, and to each that joins later
    /// while it waits. [`Ask::asked`] says how many were sent it now; dropping the [`Ask`]
    /// withdraws it (a later answer is a stray). A member whose outbound queue is full is not
    /// sent it.
    ///
    /// # Errors
    ///
    /// [`AskError::Duplicate`] while another request waits under `id`.
    pub fn ask(self: &Arc<Self>, id: &str, method: &str, params: Option<&RawValue>) -> Result<Ask<M>, AskError> {
        self.ask_made(id, encode_request(id, method, params), None)
    }

    /// [`Audience::ask`], with `later` making the params anew each time the request is sent to a
    /// member that joins while it waits (those asked now are sent `params`): for params that
    /// change meanwhile, such as the time left to answer. `later` runs under the audience's lock:
    /// it must not call into the audience, nor take a lock held where the audience is called.
    ///
    /// # Errors
    ///
    /// As [`Audience::ask`].
    pub fn ask_with(self: &Arc<Self>, id: &str, method: &str, params: Option<&RawValue>, later: impl Fn() -> Option<Box<RawValue>> + Send + Sync + 'static) -> Result<Ask<M>, AskError> {
        let (request_id, name) = (id.to_owned(), method.to_owned());
        let remake = move || encode_request(&request_id, &name, later().as_deref());
        self.ask_made(id, encode_request(id, method, params), Some(Box::new(remake)))
    }

    fn ask_made(self: &Arc<Self>, id: &str, message: Vec<u8>, remake: Option<Box<Remake>>) -> Result<Ask<M>, AskError> {
        let (tx, rx) = oneshot::channel();
        let (serial, members): (u64, Vec<(u64, M)>) = {
            let mut st = self.lock();
            if st.waiting.contains_key(id) {
                return Err(AskError::Duplicate(id.to_owned()));
            }
            let serial = st.fresh();
            st.waiting.insert(id.to_owned(), Waiting { serial, message: message.into(), remake, asked: BTreeSet::new(), answer: tx });
            (serial, st.members.iter().map(|(k, m)| (*k, m.mark.clone())).collect())
        };
        let eligible: Vec<u64> = members.into_iter().filter(|(_, mark)| (self.check)(mark).is_ok()).map(|(k, _)| k).collect();
        let asked = self.send(id, &eligible, false);
        Ok(Ask { audience: Arc::clone(self), id: id.to_owned(), serial, answer: rx, asked, done: false, settled: None })
    }

    /// Sends the request waiting under `id` to those of `members` still attached and not yet
    /// sent it (`late`: members that joined after it was asked, sent it made anew when it was
    /// asked with [`Audience::ask_with`]); returns how many it was sent to. Queued under the
    /// audience's lock (a `try_send` never waits), so what [`Ask::tell_others`] sends a member
    /// never comes before it.
    fn send(&self, id: &str, members: &[u64], late: bool) -> usize {
        let mut st = self.lock();
        let State { members: attached, waiting, .. } = &mut *st;
        let Some(w) = waiting.get_mut(id) else { return 0 };
        let due = members.iter().any(|m| attached.contains_key(m) && !w.asked.contains(m));
        let message: Arc<[u8]> = match &w.remake {
            Some(remake) if late && due => remake().into(),
            _ => Arc::clone(&w.message),
        };
        let mut sent = 0;
        for m in members {
            if let Some(member) = attached.get(m)
                && !w.asked.contains(m)
                && member.tx.try_send(message.to_vec()).is_ok()
            {
                w.asked.insert(*m);
                sent += 1;
            }
        }
        sent
    }

    /// Takes member `member`'s answer to the request `id`: `Ok(true)` when it settles the request,
    /// `Ok(false)` when no request waits under `id` (settled, withdrawn, never asked) or the
    /// member is not attached, and the check's error when the member may not answer (whether or
    /// not a request waits: the check comes first).
    ///
    /// # Errors
    ///
    /// The check's error for the member's mark.
    pub fn answer(&self, member: u64, id: &str, answer: Answer) -> Result<bool, RpcError> {
        let Some(mark) = self.mark(member) else { return Ok(false) };
        (self.check)(&mark)?;
        // Handed over under the lock, so whoever settles the request next finds the answer.
        let mut st = self.lock();
        let Some(w) = st.waiting.remove(id) else { return Ok(false) };
        let settled = Settled { answered: Answered { result: answer, by: mark }, by: member, asked: w.asked };
        Ok(w.answer.send(settled).is_ok())
    }

    /// Sends `message` to each of `members` still attached (dropped for one whose queue is full).
    fn tell(&self, members: &BTreeSet<u64>, message: &[u8]) {
        let st = self.lock();
        for m in members.iter().filter_map(|m| st.members.get(m)) {
            let _ = m.tx.try_send(message.to_vec());
        }
    }
}

/// The request `method` with `params` under the string id `id`, encoded.
fn encode_request(id: &str, method: &str, params: Option<&RawValue>) -> Vec<u8> {
    // A string always encodes.
    let id = serde_json::to_string(id).unwrap_or_default();
    let method = serde_json::to_string(method).unwrap_or_default();
    let mut out = Vec::with_capacity(48 + id.len() + method.len() + params.map_or(0, |p| p.get().len()));
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(br#","method":"#);
    out.extend_from_slice(method.as_bytes());
    if let Some(p) = params {
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(p.get().as_bytes());
    }
    out.push(b'}');
    out
}

/// A request an [`Audience`] waits to have answered. Dropping it withdraws the request.
pub struct Ask<M: Clone + Send + Sync + 'static> {
    audience: Arc<Audience<M>>,
    id: String,
    serial: u64,
    answer: oneshot::Receiver<Settled<M>>,
    asked: usize,
    /// The receiver has given its one value (or learnt there is none).
    done: bool,
    /// Once answered: who answered, and who had been asked.
    settled: Option<(u64, BTreeSet<u64>)>,
}

impl<M: Clone + Send + Sync + 'static> std::fmt::Debug for Ask<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ask").field("id", &self.id).field("asked", &self.asked).finish_non_exhaustive()
    }
}

impl<M: Clone + Send + Sync + 'static> Ask<M> {
    /// Its id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// How many members [`Audience::ask`] sent it to (members that join later are not counted).
    pub fn asked(&self) -> usize {
        self.asked
    }

    /// Waits for the first answer a member may give. Cancel-safe: dropping the wait (a timeout
    /// around it) leaves the request waiting. Once it has returned, or once the request is
    /// settled by [`Ask::tell_others`], it never returns again.
    pub async fn answered(&mut self) -> Answered<M> {
        if self.done {
            return std::future::pending().await;
        }
        let got = (&mut self.answer).await;
        self.done = true;
        match got {
            Ok(Settled { answered, by, asked }) => {
                self.settled = Some((by, asked));
                answered
            }
            // The sender lives in the audience, which this ask holds, until an answer is sent
            // or the ask settles itself: it cannot drop first.
            Err(_) => std::future::pending().await,
        }
    }

    /// Settles the request (an answer after this is a stray) and sends every member it was sent
    /// to, but the one whose answer [`Ask::answered`] gave, the notification `method` with
    /// `params`: that it is settled, and how. Each is sent it at most once, and only while
    /// attached.
    pub fn tell_others(&mut self, method: &str, params: Option<&RawValue>) {
        let message = crate::client::request(None, method, params);
        let asked = match self.settled.take() {
            Some((by, mut asked)) => {
                asked.remove(&by);
                asked
            }
            None => {
                let waiting = self.audience.lock().settle(&self.id, self.serial);
                match waiting {
                    Some(w) => w.asked,
                    // Answered, but the answer never taken (`answered` gave up waiting): it counts
                    // for nothing, so the one who gave it is told too.
                    None if !self.done => self.answer.try_recv().map(|settled| settled.asked).unwrap_or_default(),
                    None => BTreeSet::new(),
                }
            }
        };
        self.done = true;
        self.audience.tell(&asked, &message);
    }
}

impl<M: Clone + Send + Sync + 'static> Drop for Ask<M> {
    fn drop(&mut self) {
        // Only this request: once it is settled, its id may name a newer one.
        self.audience.lock().settle(&self.id, self.serial);
    }
}

/// Where a connection's answers to requests that are not its own go ([`Audience::join`]).
pub(crate) trait Route: Send + Sync {
    /// As [`Audience::answer`], for the answer `message` (its whole text) the connection read.
    fn take(&self, member: u64, id: &str, answer: Answer, message: &[u8]) -> Result<bool, RpcError>;
    /// The member's connection has ended.
    fn leave(&self, member: u64);
}

impl<M: Clone + Send + Sync + 'static> Route for Audience<M> {
    fn take(&self, member: u64, id: &str, answer: Answer, message: &[u8]) -> Result<bool, RpcError> {
        let answer = match &self.screen {
            Some(screen) if !screen(message) => Err(RpcError::invalid_request("the answer did not pass the audience's screen (for one, a key given twice)")),
            _ => answer,
        };
        self.answer(member, id, answer)
    }

    fn leave(&self, member: u64) {
        self.detach(member);
    }
}
