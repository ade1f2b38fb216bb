//! JSON-RPC 2.0 message handling, the same for every transport: one message (a request object,
//! a notification or a batch) in, at most one encoded reply out. Transports only frame bytes;
//! what a message means, and whether it gets an answer, is decided here.
//!
//! - A request object without an `id` member is a notification: it runs and gets no reply,
//!   whatever its outcome (JSON-RPC 2.0 §4.1).
//! - A message that is not JSON is `parse_error` (-32700) with a `null` id; JSON that is not a
//!   request object (a wrong `jsonrpc`, an `id` that is an object or array, a `method` that is
//!   not a string, an unknown envelope member) is `invalid_request` (-32600); only a problem
//!   inside `params` is `invalid_params` (-32602).
//! - A JSON array is a batch of at most [`SERVER_MAX_BATCH_ENTRIES`] entries; each entry goes
//!   through the same dispatch, grants and lease as a single request, and the reply is the array
//!   of the entries' replies (notifications leave none; no replies at all is no reply).
//! - Every reply carries `"jsonrpc": "2.0"`; requests without the member (the seed's JSONL-RPC)
//!   are still accepted.
//! - Nothing is proportional to a body the caller may not send: the grant is checked before a
//!   request's params are explained, an error holds at most [`MAX_VIOLATIONS`] violations of
//!   bounded length (and a count of the rest), and a request larger than [`EXPLAIN_LIMIT`] is
//!   refused with its first problem only.

use std::borrow::Cow;
use std::fmt;

use openagents_protocol::rt::{self, DocumentError, Validate, Wire};
use openagents_protocol::{ErrorCode, ErrorDetails, Method, RpcRequest, RuntimeSubmitError, SERVER_MAX_BATCH_ENTRIES, Violation};
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::agent::error;
use crate::auth::Caller;
use crate::engine::{EventSession, RpcEngine};

/// The most violations one error carries; the rest are counted in `violations_omitted`.
pub const MAX_VIOLATIONS: usize = 100;
/// The longest pointer or message of one violation, in bytes; longer ones are cut with `…`.
pub const MAX_VIOLATION_TEXT: usize = 512;
/// The longest error message, in bytes.
pub const MAX_ERROR_MESSAGE: usize = 2048;
/// Requests up to this size (64 KiB) that break the schema get every violation explained (up to
/// [`MAX_VIOLATIONS`]); larger ones get only the decoder's first problem. Explaining builds the
/// request as an untyped tree, which costs up to 32 times the text for `[0,0,…]`: 64 KiB keeps
/// that under about 2 MiB, and a huge invalid request costs no more than reading it.
pub const EXPLAIN_LIMIT: usize = 64 * 1024;
/// Requests larger than this (64 KiB) are large. Their envelope is read and the caller's grant
/// checked before anything of their params is decoded, so a credential that may not call a
/// method cannot make the server decode a large body for it; and they are read off the
/// runtime's worker threads (`block_in_place`), so the tens of milliseconds a 16 MB body takes
/// never hold up the connections queued on that worker. Smaller ones are decoded first (one
/// pass, the common case) and their grant checked right after.
pub const LARGE_REQUEST_BYTES: usize = 64 * 1024;
/// The least an error reply may take, in bytes, however small its request (4 KiB): every
/// refusal's reply is kept within twice its request or this, whichever is more, so an error
/// never amplifies what a client sent beyond that (a batch's entries share it). Room enough for
/// the envelope, a 256-character id, a message and a few violations.
pub const REPLY_FLOOR: usize = 4096;
/// The longest `id` echoed, in characters (`RequestId`'s `maxLength`).
const MAX_ID_CHARS: usize = 256;

/// `s` cut to at most `max` bytes on a character boundary, marked with `…` when cut.
pub fn bounded(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return Cow::Borrowed(s);
    }
    let mut end = max.saturating_sub(3);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &s[..end]))
}

/// The answer to one request, before a transport encodes it.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The request's id, echoed (`None` when absent or unreadable: encoded as `null`).
    pub id: Option<Value>,
    /// The id exactly as the request wrote it, written instead of `id` where `id`'s own
    /// encoding would differ (a number with a fraction or an exponent, or past 64 bits).
    pub raw_id: Option<Box<RawValue>>,
    /// Whether the request carried `"jsonrpc": "2.0"` (then the response does too).
    pub jsonrpc: bool,
    /// The encoded result, or the error.
    pub outcome: Result<Vec<u8>, RuntimeSubmitError>,
}

impl Reply {
    /// A reply with no readable id.
    pub fn error(err: RuntimeSubmitError) -> Reply {
        Reply { id: None, raw_id: None, jsonrpc: false, outcome: Err(err) }
    }

    /// The response object (without a newline): `{"jsonrpc": "2.0", "id", "result"}` or
    /// `{"jsonrpc": "2.0", "id", "error"}`, whatever the request carried. The error object's
    /// `message` is the short, fixed title of its code (JSON-RPC's own for the standard codes);
    /// the detail is said once, in `data` (the typed `RuntimeSubmitError`), bounded in length.
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(128 + self.outcome.as_ref().map_or(0, Vec::len));
        out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        let mark = out.len();
        if let Some(raw) = &self.raw_id {
            out.extend_from_slice(raw.get().as_bytes());
        } else if self.id.as_ref().is_none_or(|id| serde_json::to_writer(&mut out, id).is_err()) {
            out.truncate(mark);
            out.extend_from_slice(b"null");
        }
        match &self.outcome {
            Ok(result) => {
                out.extend_from_slice(br#","result":"#);
                out.extend_from_slice(result);
            }
            Err(e) => {
                let mut data = e.clone();
                if data.message.len() > MAX_ERROR_MESSAGE {
                    data.message = bounded(&data.message, MAX_ERROR_MESSAGE).into_owned();
                }
                let obj = openagents_protocol::RpcError { code: e.code.rpc_code(), message: error_title(&e.code).into_owned(), data };
                out.extend_from_slice(br#","error":"#);
                out.extend_from_slice(&serde_json::to_vec(&obj).unwrap_or_default());
            }
        }
        out.push(b'}');
        out
    }
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

/// The outcome of one request object: its reply, and whether it was a notification (which
/// gets none).
struct One {
    reply: Reply,
    notification: bool,
}

/// What [`RpcEngine::handle_message_now`] could not answer without waiting: hand the message
/// to [`RpcEngine::handle_message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waits;

/// A request object read up to its call.
enum Prepared {
    /// Answered already (refused, or an unusable id), with its method for the metrics.
    Done(One, Option<&'static str>),
    /// To be called.
    Call(Call),
}

struct Call {
    head: Head,
    name: &'static str,
    method: Method,
}

/// What a reply takes from its request object.
struct Head {
    id: Option<Value>,
    raw_id: Option<Box<RawValue>>,
    jsonrpc: bool,
    notification: bool,
}

impl Head {
    fn finish(self, outcome: Result<Vec<u8>, RuntimeSubmitError>) -> One {
        One { reply: Reply { id: self.id, raw_id: self.raw_id, jsonrpc: self.jsonrpc, outcome }, notification: self.notification }
    }
}

impl RpcEngine {
    /// Decodes one request object and answers it (also a notification; a batch is not one
    /// request: transports use [`RpcEngine::handle_message`]).
    pub async fn handle(&self, caller: &Caller, bytes: &[u8]) -> Reply {
        self.handle_in(caller, bytes, None).await
    }

    /// [`RpcEngine::handle`] on a streaming connection whose event stream `subscribe` controls.
    /// A batch is not one request: transports use [`RpcEngine::handle_message`], which also
    /// knows notifications and batches.
    pub async fn handle_in(&self, caller: &Caller, bytes: &[u8], session: Option<&dyn EventSession>) -> Reply {
        self.handle_request(caller, bytes, session).await
    }

    /// Answers one JSON-RPC message — a request, a notification or a batch — as `caller`: the
    /// encoded reply, or `None` when nothing is to be sent (a notification, or a batch of only
    /// notifications). The one entry point of every transport.
    pub async fn handle_message(&self, caller: &Caller, bytes: &[u8], session: Option<&dyn EventSession>) -> Option<Vec<u8>> {
        let start = bytes.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(bytes.len());
        if bytes.get(start) != Some(&b'[') {
            let one = self.handle_one(caller, bytes, session, REPLY_FLOOR).await;
            return (!one.notification).then(|| one.reply.to_json());
        }
        let entries: Vec<&RawValue> = match serde_json::from_slice(bytes) {
            Ok(entries) => entries,
            Err(e) if e.is_data() => return Some(Reply::error(error(ErrorCode::InvalidRequest, "a batch is an array of request objects")).to_json()),
            Err(e) => return Some(parse_error(&DocumentError::NotJson(rt::describe_json_error(&e))).to_json()),
        };
        if entries.is_empty() {
            return Some(Reply::error(error(ErrorCode::InvalidRequest, "an empty batch: send at least one request")).to_json());
        }
        if entries.len() > SERVER_MAX_BATCH_ENTRIES {
            let message = format!("a batch holds at most SERVER_MAX_BATCH_ENTRIES ({SERVER_MAX_BATCH_ENTRIES}) requests; this one has {}", entries.len());
            return Some(Reply::error(error(ErrorCode::InvalidRequest, message)).to_json());
        }
        // The batch's error replies share one floor, so the whole reply stays within about twice
        // the batch (each entry's own reply within twice the entry, or its share of the floor).
        let floor = REPLY_FLOOR / entries.len();
        let replies = futures_util::future::join_all(entries.iter().map(|e| self.handle_one(caller, e.get().as_bytes(), session, floor))).await;
        let mut out = Vec::with_capacity(2 + replies.len() * 64);
        out.push(b'[');
        for one in replies.into_iter().filter(|o| !o.notification) {
            if out.len() > 1 {
                out.push(b',');
            }
            out.extend_from_slice(&one.reply.to_json());
        }
        out.push(b']');
        (out.len() > 2).then_some(out)
    }

    /// Decodes one request object and answers it, also when it is a notification.
    pub(crate) async fn handle_request(&self, caller: &Caller, bytes: &[u8], session: Option<&dyn EventSession>) -> Reply {
        self.handle_one(caller, bytes, session, REPLY_FLOOR).await.reply
    }

    /// [`RpcEngine::handle_message`] when the message can be answered without waiting: `Ok`
    /// with the encoded reply (`None`: nothing to send); [`Waits`] when it cannot (a batch, or
    /// a permitted request whose method waits: `submit`, `shutdown`), and then nothing has been
    /// done for it and the caller hands it to `handle_message`. What most requests take (`status`, say),
    /// with no future to allocate or move.
    ///
    /// # Errors
    ///
    /// [`Waits`], as above.
    pub fn handle_message_now(&self, caller: &Caller, bytes: &[u8], session: Option<&dyn EventSession>) -> Result<Option<Vec<u8>>, Waits> {
        let start = bytes.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(bytes.len());
        if bytes.get(start) == Some(&b'[') {
            return Err(Waits);
        }
        let started = std::time::Instant::now();
        let (one, method) = match self.prepare_one(caller, bytes, REPLY_FLOOR) {
            Prepared::Done(one, method) => (one, method),
            Prepared::Call(call) => (call.head.finish(self.call_now(caller, call.method, session).ok_or(Waits)?), Some(call.name)),
        };
        let one = self.counted(started, one, method);
        Ok((!one.notification).then(|| one.reply.to_json()))
    }

    /// Decodes one request object and answers it, counted in the metrics by method.
    async fn handle_one(&self, caller: &Caller, bytes: &[u8], session: Option<&dyn EventSession>, floor: usize) -> One {
        let started = std::time::Instant::now();
        let (one, method) = match self.prepare_one(caller, bytes, floor) {
            Prepared::Done(one, method) => (one, method),
            Prepared::Call(call) => (call.head.finish(self.call_in(caller, call.method, session).await), Some(call.name)),
        };
        self.counted(started, one, method)
    }

    /// `one`, counted in the metrics under `method` with the time since `started`.
    fn counted(&self, started: std::time::Instant, one: One, method: Option<&'static str>) -> One {
        self.metrics().request(method, one.reply.outcome.is_ok(), started.elapsed().as_secs_f64());
        one
    }

    /// Everything of one request object but its call: decoded, checked, its envelope read. A
    /// refusal's reply is kept within twice `bytes` or `floor`, whichever is more.
    fn prepare_one(&self, caller: &Caller, bytes: &[u8], floor: usize) -> Prepared {
        let multi_thread = || tokio::runtime::Handle::try_current().is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if bytes.len() > LARGE_REQUEST_BYTES && multi_thread() {
            return tokio::task::block_in_place(|| self.read_one(caller, bytes, floor));
        }
        self.read_one(caller, bytes, floor)
    }

    /// [`RpcEngine::prepare_one`] on the calling thread.
    fn read_one(&self, caller: &Caller, bytes: &[u8], floor: usize) -> Prepared {
        // UTF-8 is checked once for the whole message, not again for each string in it.
        let Ok(text) = std::str::from_utf8(bytes) else { return self.refuse(caller, bytes, None, None, floor) };
        if bytes.len() > LARGE_REQUEST_BYTES && !self.envelope_allowed(caller, bytes) {
            return self.refuse(caller, bytes, None, None, floor);
        }
        let mut de = serde_json::Deserializer::from_str(text);
        let decoded = RpcRequest::decode(&mut de).and_then(|r| de.end().map(|()| r));
        let request = match decoded {
            Ok(r) => match r.validate() {
                Ok(()) => r,
                Err(violations) => return self.refuse(caller, bytes, Some(violations), None, floor),
            },
            Err(e) => {
                // `"params": []` (by-position, and empty) is no params: what a client sends for
                // a call without arguments (`@open-rpc/client-js` does). Only where the method
                // takes none or all of its params are optional does the request then decode.
                if let Some(bare) = without_empty_params(bytes)
                    && let Prepared::Call(call) = self.read_one(caller, &bare, floor)
                {
                    return Prepared::Call(call);
                }
                return self.refuse(caller, bytes, None, Some(&e), floor);
            }
        };
        let name = request.method_name();
        // The decoder reads `"id": null` as no id; only a request without the member is a
        // notification (rare enough that looking again costs nothing on the common path).
        let notification = request.id().is_none() && serde_json::from_slice::<Envelope<'_>>(bytes).is_ok_and(|env| env.id.is_none());
        let id = request.id().clone();
        let jsonrpc = request.jsonrpc().is_some();
        // A number with a fraction or an exponent (or past 64 bits) is read as a double, whose
        // own encoding may differ from what the client wrote (`1e3` is `1000.0`): the reply
        // echoes the text it was sent.
        let mut raw_id = None;
        if matches!(&id, Some(Value::Number(n)) if !n.is_i64() && !n.is_u64()) {
            raw_id = serde_json::from_slice::<Envelope<'_>>(bytes).ok().and_then(|env| env.id).and_then(raw_number_id);
            if raw_id.is_none() {
                let e = error(ErrorCode::InvalidRequest, format!("`id` must be a string of at most {MAX_ID_CHARS} characters, a number of at most {MAX_ID_CHARS} characters, or null"));
                return Prepared::Done(One { reply: Reply::error(e), notification: false }, Some(name));
            }
        }
        Prepared::Call(Call { head: Head { id, raw_id, jsonrpc, notification }, name, method: request.into_method() })
    }

    /// Whether the envelope of `bytes` names a method `caller` may call (or cannot be read: the
    /// decoder then says what is wrong with it). Reads no value but the envelope's own.
    fn envelope_allowed(&self, caller: &Caller, bytes: &[u8]) -> bool {
        let Ok(envelope) = serde_json::from_slice::<Envelope<'_>>(bytes) else { return true };
        let Some(method) = envelope.method.and_then(|m| serde_json::from_str::<Cow<'_, str>>(m.get()).ok()) else { return true };
        may_call(caller, &method)
    }

    /// The answer to a request object that did not decode (or validate): the most precise
    /// code, with the id echoed when it can be read. Checks the envelope and the caller's grant
    /// before it explains anything about the params.
    fn refuse(&self, caller: &Caller, bytes: &[u8], violations: Option<Vec<rt::Violation>>, decode_error: Option<&serde_json::Error>, floor: usize) -> Prepared {
        let mut method = None;
        let mut one = self.refuse_one(caller, bytes, violations, decode_error, &mut method);
        fit(&mut one.reply, bytes.len().saturating_mul(2).max(floor));
        Prepared::Done(one, method)
    }

    /// [`RpcEngine::refuse`]; `method` is set to the request's method when its envelope names a
    /// known one (for the metrics), from the one reading of the envelope.
    fn refuse_one(&self, caller: &Caller, bytes: &[u8], violations: Option<Vec<rt::Violation>>, decode_error: Option<&serde_json::Error>, method: &mut Option<&'static str>) -> One {
        if let Err(e) = std::str::from_utf8(bytes) {
            return One { reply: parse_error(&DocumentError::NotJson(format!("invalid UTF-8 at byte offset {}", e.valid_up_to()))), notification: false };
        }
        // What the decoder could not read as JSON at all (bad syntax, a lone surrogate, nesting
        // past the parser's limit, trailing data) is a parse error, whatever else is wrong.
        if let Some(e) = decode_error.filter(|e| e.is_syntax() || e.is_eof()) {
            return One { reply: parse_error(&DocumentError::NotJson(rt::describe_json_error(e))), notification: false };
        }
        // The decoder reads a request object in one pass and stops at the first problem; bad
        // syntax further on (a lone surrogate, nesting past the limit) still makes the message
        // not JSON, as when the object was read whole before its fields were taken out.
        if decode_error.is_some_and(serde_json::Error::is_data)
            && bytes.trim_ascii_start().first() == Some(&b'{')
            && let Err(DocumentError::NotJson(m)) = rt::skim_exact(bytes)
        {
            return One { reply: parse_error(&DocumentError::NotJson(m)), notification: false };
        }
        let envelope = match serde_json::from_slice::<Envelope<'_>>(bytes) {
            Ok(env) => env,
            Err(e) if e.is_syntax() || e.is_eof() => return One { reply: parse_error(&DocumentError::NotJson(rt::describe_json_error(&e))), notification: false },
            Err(_) => {
                let e = error(ErrorCode::InvalidRequest, "a request is a JSON object: {\"jsonrpc\": \"2.0\", \"id\", \"method\", \"params\"}");
                return One { reply: Reply::error(e), notification: false };
            }
        };
        *method = envelope.method.and_then(|m| serde_json::from_str::<Cow<'_, str>>(m.get()).ok()).and_then(|m| Method::NAMES.iter().copied().find(|n| *n == m));
        let id = envelope.id.and_then(readable_id);
        let raw_id = envelope.id.and_then(raw_number_id);
        let invalid = |message: String, id: Option<Value>| {
            let raw_id = if id.is_some() { raw_id.clone() } else { None };
            One { reply: Reply { id, raw_id, jsonrpc: true, outcome: Err(error(ErrorCode::InvalidRequest, message)) }, notification: false }
        };
        if let Some(key) = envelope.duplicate {
            return invalid(format!("the member `{key}` appears more than once"), None);
        }
        if envelope.jsonrpc.is_some_and(|v| v.get() != "\"2.0\"") {
            return invalid("`jsonrpc` must be \"2.0\"".into(), id);
        }
        if let Some(raw) = envelope.id {
            if id.is_none() && raw.get() != "null" {
                return invalid(format!("`id` must be a string of at most {MAX_ID_CHARS} characters, a number, or null"), None);
            }
        }
        let Some(method) = envelope.method else {
            return invalid("the request has no `method`".into(), id);
        };
        let Some(method) = serde_json::from_str::<Cow<'_, str>>(method.get()).ok() else {
            return invalid("`method` must be a string".into(), id);
        };
        if let Some(unknown) = &envelope.unknown {
            return invalid(format!("unknown member `{}`: a request has only `jsonrpc`, `id`, `method` and `params`", bounded(unknown, 128)), id);
        }
        let notification = envelope.id.is_none();
        let refuse = |e: RuntimeSubmitError| One { reply: Reply { id: id.clone(), raw_id: raw_id.clone(), jsonrpc: true, outcome: Err(e) }, notification };
        if !Method::NAMES.contains(&&*method) {
            return refuse(error(ErrorCode::UnknownMethod, format!("unknown method `{}`; this server knows {}", bounded(&method, 128), Method::NAMES.join(", "))));
        }
        if !may_call(caller, &method) {
            self.metrics().forbidden();
            tracing::warn!(target: "openagents::audit", event = "forbidden", credential = %caller.name, method = %method);
            return refuse(error(ErrorCode::Forbidden, format!("credential `{}` may not call `{method}`", caller.name)));
        }
        let violations = match (violations, decode_error) {
            (Some(v), _) => v,
            (None, Some(e)) if bytes.len() > EXPLAIN_LIMIT => {
                let message = format!("invalid params: {} (a request over {EXPLAIN_LIMIT} bytes gets only its first problem reported)", rt::describe_json_error(e));
                return refuse(error(ErrorCode::InvalidParams, message));
            }
            (None, Some(e)) => match rt::explain::<RpcRequest>(bytes, e) {
                DocumentError::Invalid(v) => v,
                DocumentError::NotJson(m) => return One { reply: parse_error(&DocumentError::NotJson(m)), notification: false },
            },
            (None, None) => Vec::new(),
        };
        refuse(invalid_params(violations))
    }
}

/// The request object `bytes` without its `params` member when that is an empty array (and the
/// envelope is otherwise readable and holds no unknown member): its `jsonrpc`, `id` and `method`
/// as written.
fn without_empty_params(bytes: &[u8]) -> Option<Vec<u8>> {
    let env = serde_json::from_slice::<Envelope<'_>>(bytes).ok()?;
    let params = env.params?;
    let empty = params.get().strip_prefix('[').and_then(|t| t.strip_suffix(']')).is_some_and(|t| t.trim().is_empty());
    if !empty || env.unknown.is_some() || env.duplicate.is_some() {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len());
    out.push(b'{');
    for (name, raw) in [("jsonrpc", env.jsonrpc), ("id", env.id), ("method", env.method)] {
        if let Some(raw) = raw {
            if out.len() > 1 {
                out.push(b',');
            }
            out.extend_from_slice(format!("\"{name}\":").as_bytes());
            out.extend_from_slice(raw.get().as_bytes());
        }
    }
    out.push(b'}');
    Some(out)
}

/// Whether `caller`'s grant lets it call `method` (the methods that read events go by the
/// events grant).
fn may_call(caller: &Caller, method: &str) -> bool {
    caller.grant.permits(method)
}

/// Whether `bytes` are a JSON object with a `method` member: a request or notification, never a
/// response. Reads the envelope only (no values are built), so a transport can tell the two
/// apart before it decodes anything.
pub(crate) fn names_a_method(bytes: &[u8]) -> bool {
    serde_json::from_slice::<Envelope<'_>>(bytes).is_ok_and(|env| env.method.is_some())
}

/// Cuts an error reply down to `budget` bytes where its detail allows: violations dropped from
/// the end (counted in `violations_omitted`), then the message shortened (to no less than 64
/// bytes). What is left — the envelope, the id, the code — is the least an answer says.
fn fit(reply: &mut Reply, budget: usize) {
    let len = reply.to_json().len();
    let Err(e) = &mut reply.outcome else { return };
    // Room for a `violations_omitted` member the cut may add.
    let mut over = (len + 32).saturating_sub(budget);
    if len <= budget || over == 0 {
        return;
    }
    if let Some(details) = e.details.as_mut()
        && let Some(violations) = details.violations.as_mut()
    {
        let mut omitted = details.violations_omitted.unwrap_or(0);
        while over > 0
            && let Some(v) = violations.pop()
        {
            over = over.saturating_sub(serde_json::to_vec(&v).map_or(0, |b| b.len()) + 1);
            omitted += 1;
        }
        details.violations_omitted = (omitted > 0).then_some(omitted);
    }
    if over > 0 {
        let keep = e.message.len().saturating_sub(over).max(64);
        e.message = bounded(&e.message, keep).into_owned();
    }
}

/// A `parse_error` reply (id `null`).
fn parse_error(e: &DocumentError) -> Reply {
    let detail = match e {
        DocumentError::NotJson(m) => m.as_str(),
        DocumentError::Invalid(_) => "not JSON",
    };
    Reply::error(error(ErrorCode::ParseError, format!("the message is not JSON: {detail}")))
}

/// An `invalid_params` error holding the first [`MAX_VIOLATIONS`] violations, each of bounded
/// length, and the count of the rest.
fn invalid_params(violations: Vec<rt::Violation>) -> RuntimeSubmitError {
    let total = violations.len();
    let kept: Vec<Violation> = violations
        .into_iter()
        .take(MAX_VIOLATIONS)
        .map(|v| Violation {
            pointer: bounded(&v.pointer, MAX_VIOLATION_TEXT).into_owned(),
            keyword: bounded(&v.keyword, 64).into_owned(),
            message: bounded(&v.message, MAX_VIOLATION_TEXT).into_owned(),
        })
        .collect();
    let mut message = String::from("invalid params: ");
    for (i, v) in kept.iter().take(3).enumerate() {
        if i > 0 {
            message.push_str("; ");
        }
        message.push_str(&format!("{}: {}", v.pointer, v.message));
    }
    if total > 3 {
        message.push_str(&format!("; and {} more", total - 3));
    }
    let mut e = error(ErrorCode::InvalidParams, bounded(&message, MAX_ERROR_MESSAGE).into_owned());
    let omitted = (total > kept.len()).then(|| (total - kept.len()) as i64);
    e.details = Some(ErrorDetails { violations: Some(kept), violations_omitted: omitted, known: None, holder: None, expires_at_ms: None, limit: None });
    e
}

/// The id to echo, when it can be read exactly: a string of at most 256 characters, an integer
/// of at most 64 bits, or null.
fn readable_id(raw: &RawValue) -> Option<Value> {
    let text = raw.get();
    // A string of 256 characters, each escaped as `\uXXXX\uXXXX` at worst.
    if text.len() > MAX_ID_CHARS * 12 + 2 {
        return None;
    }
    match serde_json::from_str::<Value>(text).ok()? {
        Value::String(s) if s.chars().count() <= MAX_ID_CHARS => Some(Value::String(s)),
        Value::Number(n) if n.is_i64() || n.is_u64() || text.len() <= MAX_ID_CHARS => Some(Value::Number(n)),
        Value::Null => Some(Value::Null),
        _ => None,
    }
}

/// The text of a number id whose own encoding as a double would differ from it, to echo as
/// written: at most [`MAX_ID_CHARS`] characters of a JSON number.
fn raw_number_id(raw: &RawValue) -> Option<Box<RawValue>> {
    let text = raw.get();
    let number = text.len() <= MAX_ID_CHARS && serde_json::from_str::<Value>(text).is_ok_and(|v| matches!(&v, Value::Number(n) if !n.is_i64() && !n.is_u64()));
    number.then(|| raw.to_owned())
}

/// A request object's envelope, read without building its params: the raw `jsonrpc`, `id` and
/// `method` members, the first unknown member's name, and a member that appears twice.
#[derive(Default)]
struct Envelope<'a> {
    jsonrpc: Option<&'a RawValue>,
    id: Option<&'a RawValue>,
    method: Option<&'a RawValue>,
    params: Option<&'a RawValue>,
    unknown: Option<String>,
    duplicate: Option<&'static str>,
}

impl<'de> serde::Deserialize<'de> for Envelope<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Envelope<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a request object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope<'de>, A::Error> {
                let mut env = Envelope::default();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    let slot = match &*key {
                        "jsonrpc" => Some(("jsonrpc", &mut env.jsonrpc)),
                        "id" => Some(("id", &mut env.id)),
                        "method" => Some(("method", &mut env.method)),
                        _ => None,
                    };
                    match slot {
                        Some((name, slot)) => {
                            if slot.is_some() {
                                env.duplicate.get_or_insert(name);
                            }
                            *slot = Some(map.next_value::<&'de RawValue>()?);
                        }
                        None => {
                            if &*key == "params" {
                                if env.params.is_some() {
                                    env.duplicate.get_or_insert("params");
                                }
                                env.params = Some(map.next_value::<&'de RawValue>()?);
                            } else {
                                if env.unknown.is_none() {
                                    env.unknown = Some(bounded(&key, 128).into_owned());
                                }
                                map.next_value::<IgnoredAny>()?;
                            }
                        }
                    }
                }
                Ok(env)
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{FnAgent, TurnContext};
    use crate::auth::Grant;
    use futures_util::FutureExt;
    use openagents_protocol::Turn;

    fn engine() -> RpcEngine {
        RpcEngine::new(FnAgent(|_turn: Turn, _ctx: TurnContext| async { Ok::<_, RuntimeSubmitError>("done".to_owned()) }))
    }

    /// What needs no waiting gets, without a future, the very bytes the engine's future gives;
    /// what waits is handed back untouched: no turn started, no shutdown begun.
    #[test]
    fn an_answer_now_is_the_answer_later_and_what_waits_is_left_alone() {
        let engine = engine();
        let admin = Caller::stdio();
        let observer = Caller { name: "watcher".into(), grant: Grant::observer(), trusted: false };
        let now: &[(&Caller, &str)] = &[
            (&admin, r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#),
            (&admin, r#"{"jsonrpc":"2.0","id":"a","method":"release"}"#),
            (&admin, r#"{"jsonrpc":"2.0","id":2.50,"method":"status"}"#),
            (&admin, r#"{"jsonrpc":"2.0","method":"status"}"#),
            (&admin, r#"{"jsonrpc":"2.0","id":3,"method":"nope"}"#),
            (&admin, r#"{"jsonrpc":"2.0","id":4,"method":"submit","params":{}}"#),
            (&admin, "{not json"),
            (&admin, "  "),
            (&observer, r#"{"jsonrpc":"2.0","id":5,"method":"submit","params":{"task":"x"}}"#),
            (&observer, r#"{"jsonrpc":"2.0","id":6,"method":"shutdown"}"#),
        ];
        for (caller, message) in now {
            let at_once = engine.handle_message_now(caller, message.as_bytes(), None);
            let later = engine.handle_message(caller, message.as_bytes(), None).now_or_never().expect("answered without waiting");
            assert_eq!(at_once, Ok(later), "{message}");
        }
        let waits = [r#"{"jsonrpc":"2.0","id":7,"method":"submit","params":{"task":"x"}}"#, r#"{"jsonrpc":"2.0","id":8,"method":"shutdown"}"#, r#"[{"jsonrpc":"2.0","id":9,"method":"status"}]"#];
        for message in waits {
            assert_eq!(engine.handle_message_now(&admin, message.as_bytes(), None), Err(Waits), "{message}");
        }
        let status = engine.status();
        assert_eq!(status.counters.submitted, 0, "a turn started: {status:?}");
        assert!(!engine.is_shut_down() && engine.is_accepting(), "shutdown began");
    }

    fn answer(engine: &RpcEngine, caller: &Caller, message: &str) -> Option<Value> {
        let reply = engine.handle_message(caller, message.as_bytes(), None).now_or_never().expect("answered without waiting")?;
        Some(serde_json::from_slice(&reply).expect("a JSON reply"))
    }

    /// `"params": []` is no params where the method needs none; elsewhere the refusal is the
    /// one the array itself earns.
    #[test]
    fn an_empty_params_array_is_no_params_where_every_param_is_optional() {
        let engine = engine();
        let admin = Caller::stdio();
        let status = answer(&engine, &admin, r#"{"jsonrpc":"2.0","id":1,"method":"status","params":[]}"#).expect("an answer");
        assert!(status["result"]["state"].is_string(), "{status}");
        let spaced = answer(&engine, &admin, "{\"params\":[ \n ],\"method\":\"release\",\"id\":\"r\",\"jsonrpc\":\"2.0\"}").expect("an answer");
        assert_eq!(spaced["id"], "r", "{spaced}");
        assert!(spaced.get("result").is_some(), "{spaced}");
        assert_eq!(answer(&engine, &admin, r#"{"jsonrpc":"2.0","method":"status","params":[]}"#), None, "a notification stays one");
        for (message, code) in [
            (r#"{"jsonrpc":"2.0","id":2,"method":"submit","params":[]}"#, "invalid_params"),
            (r#"{"jsonrpc":"2.0","id":3,"method":"status","params":[1]}"#, "invalid_params"),
            (r#"{"jsonrpc":"2.0","id":4,"method":"status","params":[],"extra":1}"#, "invalid_request"),
            (r#"{"jsonrpc":"2.0","id":5,"method":"status","params":[],"params":[]}"#, "invalid_request"),
        ] {
            let a = answer(&engine, &admin, message).expect("an answer");
            assert_eq!(a["error"]["data"]["code"], code, "{message}: {a}");
        }
        let observer = Caller { name: "watcher".into(), grant: Grant::observer(), trusted: false };
        let a = answer(&engine, &observer, r#"{"jsonrpc":"2.0","id":6,"method":"shutdown","params":[]}"#).expect("an answer");
        assert_eq!(a["error"]["data"]["code"], "forbidden", "{a}");
    }

    /// A `submit` with 100 unknown keys, each a violation: the allowed list is said once, and
    /// the reply stays within twice the request or [`REPLY_FLOOR`]; a batch of 128 of them
    /// within twice the batch.
    #[test]
    fn an_error_reply_does_not_amplify_its_request() {
        let engine = engine();
        let admin = Caller::stdio();
        let keys: String = (0..100u32).map(|i| format!(r#","{}":0"#, char::from_u32(0xC0 + i).expect("a char"))).collect();
        let one = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"submit","params":{{"task":"x"{keys}}}}}"#);
        let reply = engine.handle_message(&admin, one.as_bytes(), None).now_or_never().expect("answered").expect("a reply");
        assert!(reply.len() <= (2 * one.len()).max(REPLY_FLOOR), "{} bytes answered {} bytes", one.len(), reply.len());
        let v: Value = serde_json::from_slice(&reply).expect("JSON");
        let details = &v["error"]["data"]["details"];
        let listed = details["violations"].as_array().expect("violations");
        assert!(!listed.is_empty(), "{v}");
        let omitted = details["violations_omitted"].as_i64().unwrap_or(0);
        assert_eq!(listed.len() as i64 + omitted, 100, "every violation listed or counted: {v}");
        let listing = listed.iter().filter(|v| v["message"].as_str().is_some_and(|m| m.contains("allowed:"))).count();
        assert_eq!(listing, 1, "the allowed list said once among the violations: {v}");

        let batch = format!("[{}]", vec![one.as_str(); 128].join(","));
        let reply = engine.handle_message(&admin, batch.as_bytes(), None).now_or_never().expect("answered").expect("a reply");
        assert!(reply.len() <= 2 * batch.len(), "{} bytes answered {} bytes", batch.len(), reply.len());
        let replies: Vec<Value> = serde_json::from_slice(&reply).expect("JSON");
        assert_eq!(replies.len(), 128);
        assert!(replies.iter().all(|r| r["error"]["data"]["code"] == "invalid_params"), "{}", replies[0]);

        // A small request's refusal keeps its detail whole.
        let small = r#"{"jsonrpc":"2.0","id":2,"method":"submit","params":{"task":"x","a":1,"b":2}}"#;
        let v = answer(&engine, &admin, small).expect("an answer");
        assert_eq!(v["error"]["data"]["details"]["violations"].as_array().map(Vec::len), Some(2), "{v}");
        assert!(v["error"]["data"]["details"].get("violations_omitted").is_none(), "{v}");
    }

    /// `status` names its caller and what the caller's grant allows.
    #[test]
    fn status_names_its_caller_and_grant() {
        let engine = engine();
        let observer = Caller { name: "watcher".into(), grant: Grant::observer(), trusted: false };
        let v = answer(&engine, &observer, r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#).expect("an answer");
        let caller = &v["result"]["caller"];
        assert_eq!(caller["name"], "watcher", "{v}");
        let methods: Vec<&str> = caller["methods"].as_array().expect("methods").iter().filter_map(Value::as_str).collect();
        assert!(methods.contains(&"status") && !methods.contains(&"submit") && !methods.contains(&"interrupt"), "{methods:?}");
        assert_eq!((caller["events"].as_bool(), caller["approvals"].as_bool()), (Some(true), Some(false)), "{v}");
        let admin = answer(&engine, &Caller::stdio(), r#"{"jsonrpc":"2.0","id":2,"method":"status"}"#).expect("an answer");
        assert!(admin["result"]["caller"]["methods"].as_array().is_some_and(|m| m.iter().any(|x| x == "submit")), "{admin}");
        assert_eq!(admin["result"]["state"], "idle", "the rest of the status is still there: {admin}");
    }
}
