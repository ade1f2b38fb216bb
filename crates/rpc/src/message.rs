//! JSON-RPC 2.0 message handling, the same for every transport: one message (a request object, a
//! notification or a batch) in, at most one encoded reply out.
//!
//! - Bytes that are not one JSON text (invalid UTF-8, bad syntax, trailing data, arrays and
//!   objects nested deeper than [`MAX_DEPTH`]) are -32700 with a `null` id.
//! - JSON that is not a request object (not an object; `jsonrpc` missing — unless
//!   [`crate::RpcServer::jsonrpc_optional`] — or not `"2.0"`; an `id` that is not a string, a
//!   number or null, or longer than [`crate::Limits::max_id_chars`]; no `method`, or one that is
//!   not a string; a member given twice; a member other than the four) is -32600.
//! - `params` that is not an object, an array or `null` (which a method's schema may take), or
//!   that the handler refuses, is -32602; an unknown method is the handler's -32601.
//!   `"params": []` is no params.
//! - A request without an `id` member is a notification: it runs, and gets no reply whatever its
//!   outcome. A batch is an array of at most [`crate::Limits::max_batch`] entries (an empty one
//!   is -32600), each handled as above; its reply is the array of its entries' replies, and no
//!   reply when every entry was a notification.
//! - The reply echoes the `id` exactly as the request wrote it, but for a message the parser
//!   cannot read (-32700 with a `null` id). Params a handler's decoder finds are no JSON it reads
//!   (a lone surrogate, a number out of range) are -32700 too, with the id: the request was read,
//!   and its caller must be able to tell which call failed.
//! - An error reply takes at most twice its request or [`crate::REPLY_FLOOR`], whichever is more
//!   (a batch's entries share the floor): past that, the longest list in its `data` (the
//!   violations of an invalid-params error) loses entries from its end, each counted in a
//!   sibling `<name>_omitted`, then its messages are shortened — to no less than 64 bytes each,
//!   so an error always says its code and what it is about. A batch of tiny entries may therefore
//!   get a little more than its share: at most that least error (some 130 bytes and the id) per
//!   entry.
//! - A message over 64 KiB is read off the runtime's worker threads (`block_in_place`, on a
//!   multi-threaded tokio runtime), so the milliseconds a 16 MiB body takes never hold up the
//!   connections queued on that worker.
//! - On a connection whose caller may answer the server ([`crate::Peer::takes_answers`]: stdio
//!   and WebSocket), a response object (no `method`; a `result` or an `error`; an `id`) is the
//!   caller's answer to a request of the server's ([`crate::Peer::request`], or an audience's the
//!   connection joined, [`crate::audience`]): it goes to the request waiting under that id (none
//!   waiting: it is dropped), and nothing is replied, unless an audience refuses the caller's
//!   answer: then the audience's error is the reply, with the answer's id.
//!   Elsewhere, and a request with a `result` or `error` member anywhere, is -32600.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::{Context, MAX_ERROR_MESSAGE, REPLY_FLOOR, RpcError, RpcServer, bounded};

/// Messages larger than this (64 KiB) are read off the runtime's worker threads ([`off_workers`]).
pub const LARGE_MESSAGE: usize = 64 * 1024;

/// The deepest nesting of arrays and objects a message may have: 127, as deep as serde_json reads
/// (its limit of 128 counts the level it refuses), so that whatever the core hands a handler can
/// be decoded. A message nested deeper is -32700, as that parser refuses to read it.
pub const MAX_DEPTH: usize = 127;

/// Whether `text` (JSON) nests arrays and objects at most `max` deep. Counts the brackets first
/// (a pass the compiler vectorizes): a message with no more than `max` of them cannot be deeper,
/// and only one with more is walked.
fn nesting_within(text: &str, max: usize) -> bool {
    let bytes = text.as_bytes();
    // A text of at most `max` bytes holds at most `max` brackets: most requests are that short.
    if bytes.len() <= max || bytes.iter().filter(|&&b| b == b'[' || b == b'{').count() <= max {
        return true;
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return false;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    true
}

/// The parse error of a message nested past [`MAX_DEPTH`].
fn too_deep() -> RpcError {
    RpcError::parse_error(format_args!("nested more than {MAX_DEPTH} arrays and objects deep"))
}

/// Runs `read` (the reading of `len` bytes) off the runtime's worker threads
/// (`block_in_place`) when `len` is over [`LARGE_MESSAGE`] and the runtime can (a multi-threaded
/// one), else at once: the milliseconds a 16 MiB document takes never hold up the tasks queued on
/// that worker. For a handler that decodes large params itself.
pub fn off_workers<T>(len: usize, read: impl FnOnce() -> T) -> T {
    let multi_thread = || tokio::runtime::Handle::try_current().is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if len > LARGE_MESSAGE && multi_thread() { tokio::task::block_in_place(read) } else { read() }
}

/// A request object's members, as written.
#[derive(Default)]
pub(crate) struct Envelope<'a> {
    pub(crate) jsonrpc: Option<&'a RawValue>,
    pub(crate) id: Option<&'a RawValue>,
    pub(crate) method: Option<&'a RawValue>,
    pub(crate) params: Option<&'a RawValue>,
    /// A response's members (the caller answering a request of the server's, [`crate::Peer::request`]).
    result: Option<&'a RawValue>,
    error: Option<&'a RawValue>,
    duplicate: Option<String>,
    unknown: Option<String>,
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
                while let Some(key) = map.next_key::<Member>()? {
                    let value: &'de RawValue = map.next_value()?;
                    let (slot, name) = match key {
                        Member::Jsonrpc => (&mut env.jsonrpc, "jsonrpc"),
                        Member::Id => (&mut env.id, "id"),
                        Member::Method => (&mut env.method, "method"),
                        Member::Params => (&mut env.params, "params"),
                        Member::Result => (&mut env.result, "result"),
                        Member::Error => (&mut env.error, "error"),
                        Member::Other(other) => {
                            if env.unknown.is_none() {
                                env.unknown = Some(other);
                            }
                            continue;
                        }
                    };
                    if slot.replace(value).is_some() && env.duplicate.is_none() {
                        env.duplicate = Some(name.to_owned());
                    }
                }
                Ok(env)
            }
        }
        d.deserialize_map(V)
    }
}

/// A member name of a request object, read without allocating: one of the six the envelope
/// knows, or another (its name kept, cut to 128 bytes, only for the first such member).
enum Member {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    Other(String),
}

impl<'de> serde::Deserialize<'de> for Member {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Member;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Member, E> {
                Ok(match key {
                    "jsonrpc" => Member::Jsonrpc,
                    "id" => Member::Id,
                    "method" => Member::Method,
                    "params" => Member::Params,
                    "result" => Member::Result,
                    "error" => Member::Error,
                    other => Member::Other(bounded(other, 128).into_owned()),
                })
            }
        }
        d.deserialize_str(V)
    }
}

impl Envelope<'_> {
    /// Whether this is a response (no `method`, a `result` or an `error`, an `id`).
    fn is_response(&self) -> bool {
        self.method.is_none() && self.id.is_some() && (self.result.is_some() || self.error.is_some())
    }
}

/// Gives a response the caller sent (its answer to a request of the server's) to the request
/// that waits for it; a response no request waits for is dropped. Returns the error an audience
/// refused the answer with ([`crate::audience`]), to send back with the answer's id; otherwise
/// nothing is replied.
fn take_answer(cx: &Context, env: &Envelope<'_>, message: &[u8]) -> Option<RpcError> {
    let id = env.id?;
    let answer = match (env.result, env.error) {
        (Some(result), None) => Ok(result.to_owned()),
        (None, Some(error)) => Err(serde_json::from_str::<RpcError>(error.get()).unwrap_or_else(|e| RpcError::new(crate::codes::INTERNAL_ERROR, format!("the caller answered with an error object that is not one: {e}")))),
        _ => Err(RpcError::new(crate::codes::INTERNAL_ERROR, "the caller answered with both a result and an error")),
    };
    cx.peer().resolve(id, answer, message)
}

/// When `bytes` is one response (not a request, not a batch), gives it to the request that waits
/// for it and says so: the connection takes answers before any bound on calls in flight.
/// `Some(Some(reply))`: an audience refused it, and `reply` says why (within the server's bound
/// on a reply, its id echoed when readable and within the bound on ids).
pub(crate) fn take_if_answer(server: &RpcServer, cx: &Context, bytes: &[u8]) -> Option<Option<Vec<u8>>> {
    let text = bytes.trim_ascii_start();
    if text.first() != Some(&b'{') {
        return None;
    }
    match serde_json::from_slice::<Envelope<'_>>(text) {
        // A screened-out answer goes on to be refused like any message.
        Ok(env) if env.is_response() && env.duplicate.is_none() && server.screened(bytes).is_none() => {
            let refused = take_answer(cx, &env, text);
            Some(refused.map(|e| refusal_of_answer(server, &env, e, bytes.len())))
        }
        _ => None,
    }
}

/// The reply to an answer an audience refused, within the server's bound on a reply.
fn refusal_of_answer(server: &RpcServer, env: &Envelope<'_>, e: RpcError, len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    encode_refusal(server, env, e, len.saturating_mul(2).max(REPLY_FLOOR), &mut out);
    out
}

/// Counts and encodes an audience's refusal of an answer: its error, with the answer's id when
/// readable and within the bound on ids; at most `budget` bytes.
fn encode_refusal(server: &RpcServer, env: &Envelope<'_>, e: RpcError, budget: usize, out: &mut Vec<u8>) {
    count_error(server.metrics.as_ref(), e.code);
    let id = env.id.and_then(|id| readable_id(id, server.limits.max_id_chars));
    Reply { id, outcome: Err(e) }.encode_within(budget, out);
}

/// The reply to one request object: its id as written (`None`: `null`) and its outcome.
struct Reply<'a> {
    id: Option<&'a RawValue>,
    outcome: Result<Box<RawValue>, RpcError>,
}

impl Reply<'_> {
    fn encode(&self, out: &mut Vec<u8>) {
        encode_response(self.id, self.outcome.as_deref(), out);
    }

    /// [`Reply::encode`], an error cut to keep the reply within `budget` bytes ([`fit`]).
    fn encode_within(mut self, budget: usize, out: &mut Vec<u8>) {
        let start = out.len();
        self.encode(out);
        let written = out.len() - start;
        if written <= budget {
            return;
        }
        if let Err(e) = &mut self.outcome {
            out.truncate(start);
            let fixed = 40 + self.id.map_or(4, |id| id.get().len());
            fit(e, fixed, budget);
            self.encode(out);
        }
    }
}

/// A response to the request `id` (`None`: `null`): its result, or its error with the message at
/// most [`MAX_ERROR_MESSAGE`] bytes. The server's replies and a client's answers to the server's
/// requests ([`crate::ServerRequest`]) both.
pub(crate) fn encode_response(id: Option<&RawValue>, outcome: Result<&RawValue, &RpcError>, out: &mut Vec<u8>) {
    let id = id.map_or("null", RawValue::get);
    if let Ok(result) = outcome {
        // The whole reply's room at once, not grown (and copied) step by step.
        out.reserve(RESULT_HEAD + id.len() + result.get().len());
    }
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.as_bytes());
    match outcome {
        Ok(result) => {
            out.extend_from_slice(br#","result":"#);
            out.extend_from_slice(result.get().as_bytes());
        }
        Err(e) => {
            out.extend_from_slice(br#","error":"#);
            write_error(e, out);
        }
    }
    out.push(b'}');
}

/// The bytes of a result reply besides its id and result: `{"jsonrpc":"2.0","id":`,
/// `,"result":` and `}`.
const RESULT_HEAD: usize = 33;

/// The start of a result reply to the request `id` (`None`: `null`), up to where its result goes:
/// `{"jsonrpc":"2.0","id":<id>,"result":`. [`encode_response`]'s bytes once the result and `}`
/// follow.
fn encode_result_head(id: Option<&RawValue>, out: &mut Vec<u8>) {
    let id = id.map_or("null", RawValue::get);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(br#","result":"#);
}

/// Calls the handler for `method`, its result's JSON text written at the end of `out`: straight
/// from its encoder when the handler can ([`crate::Handler::call_into`]), else copied from the
/// raw value [`crate::Handler::call`] returns. On an error, `out` may hold part of a result.
/// The handler's answer to one call. A handler that panics answers `-32603` (Internal error):
/// the call gets its reply, the batch it sits in the others', and the connection goes on; the
/// panic's own text stays in the server's log (the panic hook's), never in the reply.
async fn call_handler(server: &RpcServer, cx: &Context, method: &str, params: Option<&RawValue>, out: &mut Vec<u8>) -> Result<(), RpcError> {
    use futures_util::FutureExt as _;
    let start = out.len();
    let run = async {
        if let Some(call) = server.handler.call_into(cx, method, params, out) {
            return call.await;
        }
        let result = server.handler.call(cx, method, params).await?;
        out.extend_from_slice(result.get().as_bytes());
        Ok(())
    };
    match std::panic::AssertUnwindSafe(run).catch_unwind().await {
        Ok(outcome) => outcome,
        Err(_) => {
            out.truncate(start);
            Err(RpcError::internal(format!("the handler of `{}` failed", crate::bounded(method, 128))))
        }
    }
}

/// The error object, its message at most [`MAX_ERROR_MESSAGE`] bytes.
fn write_error(e: &RpcError, out: &mut Vec<u8>) {
    let e = if e.message.len() > MAX_ERROR_MESSAGE { Cow::Owned(RpcError { message: bounded(&e.message, MAX_ERROR_MESSAGE).into_owned(), ..e.clone() }) } else { Cow::Borrowed(e) };
    if serde_json::to_writer(&mut *out, &*e).is_err() {
        out.extend_from_slice(br#"{"code":-32603,"message":"Internal error: the error could not be encoded"}"#);
    }
}

/// A reply with a `null` id to a message that could not be read as a request.
pub(crate) fn error_reply(e: &RpcError) -> Vec<u8> {
    let mut out = Vec::with_capacity(160);
    Reply { id: None, outcome: Err(e.clone()) }.encode(&mut out);
    out
}

/// The reply to `bytes` refused whole with `e` before being handled (the connection busy, the
/// server shutting down): with the request's id when it is a readable request object, `None`
/// (no reply) when it is a notification. A batch gets one error with a `null` id.
pub(crate) fn refusal(server: &RpcServer, bytes: &[u8], e: &RpcError) -> Option<Vec<u8>> {
    let Ok(env) = serde_json::from_slice::<Envelope<'_>>(bytes) else { return Some(error_reply(e)) };
    let id = env.id?;
    let id = readable_id(id, server.limits.max_id_chars);
    let mut out = Vec::with_capacity(160);
    Reply { id, outcome: Err(e.clone()) }.encode(&mut out);
    Some(out)
}

/// The id to echo, when it is one: a string of at most `max` characters, a number written in at
/// most `max`, or null.
fn readable_id(raw: &RawValue, max: usize) -> Option<&RawValue> {
    let text = raw.get();
    let ok = match text.as_bytes().first() {
        Some(b'"') => {
            // Each character takes 1 to 12 bytes of text (`\uXXXX\uXXXX` at most): only a
            // string in between is decoded to count them.
            let inner = text.len() - 2;
            inner <= max || (inner <= max.saturating_mul(12) && serde_json::from_str::<Cow<'_, str>>(text).is_ok_and(|s| s.chars().count() <= max))
        }
        Some(b'-' | b'0'..=b'9') => text.len() <= max,
        Some(b'n') => true,
        _ => false,
    };
    ok.then_some(raw)
}

/// The text of the JSON string `text` (known to be JSON: a raw value the parser read) when it
/// has no escapes, without decoding it: what most method names are.
fn plain_string(text: &str) -> Option<&str> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('\\')).then_some(inner)
}

/// Whether the parser can read the scalar `text` (an id): a string with escapes is decoded, a
/// number is read as one; anything else is left to the id's own check.
fn readable_text(text: &str) -> Result<(), serde_json::Error> {
    // A whole number of up to 18 digits (what most ids are) is one the parser reads.
    let digits = text.strip_prefix('-').unwrap_or(text);
    if !digits.is_empty() && digits.len() <= 18 && digits.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(());
    }
    match text.as_bytes().first() {
        Some(b'"') if text.contains('\\') => serde_json::from_str::<Cow<'_, str>>(text).map(drop),
        Some(b'-' | b'0'..=b'9') => serde_json::from_str::<serde_json::Number>(text).map(drop),
        _ => Ok(()),
    }
}

/// Cuts the error `e` so that the reply holding it, whose other parts take `fixed` bytes, takes
/// at most `budget`: the longest list in its `data` loses entries from its end (each counted in
/// a sibling `<name>_omitted`), then its messages (its own and `data.message`) are shortened, to
/// no less than 64 bytes each.
fn fit(e: &mut RpcError, fixed: usize, budget: usize) {
    let len = serde_json::to_vec(&*e).map_or(0, |b| b.len());
    // Room for the counts the cut may add.
    let mut over = (fixed + len + 32).saturating_sub(budget);
    if let Some(data) = e.data.as_mut() {
        while over > 0
            && let Some(cut) = pop_longest_list(data, 8)
        {
            over = over.saturating_sub(cut + 1);
        }
    }
    for message in [Some(&mut e.message), e.data.as_mut().and_then(|d| d.get_mut("message")).and_then(|m| match m {
        serde_json::Value::String(s) => Some(s),
        _ => None,
    })]
    .into_iter()
    .flatten()
    {
        if over == 0 {
            break;
        }
        let keep = message.len().saturating_sub(over).max(64);
        let before = message.len();
        *message = bounded(message, keep).into_owned();
        over = over.saturating_sub(before.saturating_sub(message.len()));
    }
}

/// Takes the last entry off the longest non-empty list that is a member of an object in `v`
/// (looking `depth` levels down), counting it in the member `<name>_omitted` beside it: the
/// size of the entry taken, or `None` when there is no such list.
fn pop_longest_list(v: &mut serde_json::Value, depth: usize) -> Option<usize> {
    use serde_json::Value;
    fn longest(v: &Value, depth: usize, path: &mut Vec<String>, best: &mut Option<(usize, Vec<String>)>) {
        let Value::Object(map) = v else { return };
        for (key, value) in map {
            path.push(key.clone());
            match value {
                Value::Array(items) if !items.is_empty() && best.as_ref().is_none_or(|(n, _)| items.len() > *n) => *best = Some((items.len(), path.clone())),
                Value::Object(_) if depth > 0 => longest(value, depth - 1, path, best),
                _ => {}
            }
            path.pop();
        }
    }
    let mut best = None;
    longest(v, depth, &mut Vec::new(), &mut best);
    let (_, path) = best?;
    let (name, parents) = path.split_last()?;
    let mut object = &mut *v;
    for key in parents {
        object = object.get_mut(key)?;
    }
    let map = object.as_object_mut()?;
    let taken = map.get_mut(name)?.as_array_mut()?.pop()?;
    let counter = format!("{name}_omitted");
    let count = map.get(&counter).and_then(Value::as_u64).unwrap_or(0) + 1;
    map.insert(counter, Value::from(count));
    Some(serde_json::to_vec(&taken).map_or(0, |b| b.len()))
}

/// The reply to a message refused whole with `e`, counted.
fn fail(server: &RpcServer, e: &RpcError) -> Option<Vec<u8>> {
    if let Some(m) = &server.metrics {
        m.error(e.code);
    }
    Some(error_reply(&server.core_error(e.clone())))
}

/// See the module documentation.
pub(crate) async fn handle_message(server: &RpcServer, cx: &Context, bytes: &[u8]) -> Option<Vec<u8>> {
    if let Some(e) = server.screen_refusal(bytes) {
        if let Some(m) = &server.metrics {
            m.error(e.code);
        }
        return Some(error_reply(&e));
    }
    // The same verdict and offset as `str::from_utf8`, with SIMD where the processor has it.
    let text = match simdutf8::compat::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => return fail(server, &RpcError::parse_error(format_args!("invalid UTF-8 at byte offset {}", e.valid_up_to()))),
    };
    let trimmed = text.trim_start();
    if !trimmed.starts_with('[') {
        // One request: an envelope read whole is JSON throughout (every member is read, each
        // value as raw JSON), so only a refused one needs the syntax pass below to tell a parse
        // error from an invalid request.
        let env = off_workers(text.len(), || {
            let env = serde_json::from_str::<Envelope<'_>>(text);
            match env {
                Ok(env) => Ok(Some(env)),
                Err(_) => serde_json::from_str::<&RawValue>(text).map(|_| None),
            }
        });
        let env = match env {
            Ok(env) => env,
            Err(e) => return fail(server, &RpcError::parse_error(e)),
        };
        if !nesting_within(text, MAX_DEPTH) {
            return fail(server, &too_deep());
        }
        // Room for most replies (their result is written in without its length known first).
        let mut out = Vec::with_capacity(256);
        let budget = text.len().saturating_mul(2).max(REPLY_FLOOR);
        return handle_envelope(server, cx, env, text, budget, &mut out).await.then_some(out);
    }
    // A batch is read once as JSON first (without building it: nesting costs no stack), so bad
    // syntax anywhere is a parse error whatever else is wrong.
    let entries = off_workers(text.len(), || serde_json::from_str::<&RawValue>(text).and_then(|_| serde_json::from_str::<Vec<&RawValue>>(text)));
    let entries: Vec<&RawValue> = match entries {
        Ok(e) => e,
        Err(e) => return fail(server, &RpcError::parse_error(e)),
    };
    if !nesting_within(text, MAX_DEPTH) {
        return fail(server, &too_deep());
    }
    if let Some(m) = &server.metrics {
        m.batch();
    }
    if entries.is_empty() {
        return fail(server, &RpcError::invalid_request("an empty batch: send at least one request"));
    }
    let max = server.limits.max_batch;
    if max == 0 {
        return fail(server, &RpcError::invalid_request("this server takes no batches: send one request per message"));
    }
    if entries.len() > max {
        return fail(server, &RpcError::invalid_request(format_args!("a batch holds at most {max} requests; this one has {}", entries.len())));
    }
    // The entries' error replies share one floor, so the whole reply stays within about twice
    // the batch.
    let floor = REPLY_FLOOR / entries.len();
    let replies = futures_util::future::join_all(entries.iter().map(|e| async move {
        let mut out = Vec::new();
        let budget = e.get().len().saturating_mul(2).max(floor);
        handle_one(server, cx, e.get(), budget, &mut out).await.then_some(out)
    }))
    .await;
    let mut out = Vec::with_capacity(2 + replies.len() * 64);
    out.push(b'[');
    for reply in replies.into_iter().flatten() {
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(&reply);
    }
    out.push(b']');
    (out.len() > 2).then_some(out)
}

/// Handles one request object (known to be JSON), writing its reply to `out`; `false` when it
/// gets none (a notification). Counts its errors in the server's metrics.
async fn handle_one(server: &RpcServer, cx: &Context, text: &str, budget: usize, out: &mut Vec<u8>) -> bool {
    handle_envelope(server, cx, serde_json::from_str::<Envelope<'_>>(text).ok(), text, budget, out).await
}

/// [`handle_one`] with the request's envelope read (`None`: the JSON is no request object); an
/// error reply takes at most `budget` bytes.
fn handle_envelope<'a>(server: &'a RpcServer, cx: &'a Context, env: Option<Envelope<'a>>, text: &str, budget: usize, out: &'a mut Vec<u8>) -> impl Future<Output = bool> + Send + 'a {
    // The envelope is read before the call's future is made, so the future holds only what the
    // call needs past its wait (a connection boxes one such future per message: small enough,
    // it comes from the allocator's per-thread cache).
    let prepared = prepare(server, cx, env, text, budget, out);
    async move {
        match prepared {
            Ok(call) => call_prepared(server, cx, call, budget, out).await,
            Err(answered) => answered,
        }
    }
}

/// Counts an error the core made in the server's metrics, when it has them.
fn count_error(metrics: Option<&crate::Metrics>, code: i64) {
    if let Some(m) = metrics {
        m.error(code);
    }
}

/// A request read up to its call.
struct Prepared<'a> {
    id: Option<&'a RawValue>,
    method: Cow<'a, str>,
    params: Option<&'a RawValue>,
    notification: bool,
}

/// Reads a request's envelope up to its call; `Err` when there is no call to make (a refusal
/// written to `out`: `true`; an answer taken, or nothing to say: `false`).
fn prepare<'a>(server: &RpcServer, cx: &Context, env: Option<Envelope<'a>>, text: &str, budget: usize, out: &mut Vec<u8>) -> Result<Prepared<'a>, bool> {
    let metrics = server.metrics.as_ref();
    let count = |code: i64| count_error(metrics, code);
    let env = match env {
        Some(env) => env,
        None => {
            let e = RpcError::invalid_request("a request is a JSON object: {\"jsonrpc\": \"2.0\", \"id\", \"method\", \"params\"}");
            count(e.code);
            Reply { id: None, outcome: Err(server.core_error(e)) }.encode_within(budget, out);
            return Err(true);
        }
    };
    if env.is_response() && env.duplicate.is_none() && cx.peer().takes_answers() {
        let Some(e) = take_answer(cx, &env, text.as_bytes()) else { return Err(false) };
        encode_refusal(server, &env, e, budget, out);
        return Err(true);
    }
    // An id whose text the parser cannot read — a string whose escapes are no text (a lone
    // surrogate), a number out of its range (`1e400`) — is not JSON, as for `method`.
    if let Some(raw) = env.id
        && let Err(e) = readable_text(raw.get())
    {
        count(crate::codes::PARSE_ERROR);
        Reply { id: None, outcome: Err(server.core_error(RpcError::parse_error(e))) }.encode_within(budget, out);
        return Err(true);
    }
    let max_id = server.limits.max_id_chars;
    let id = env.id.and_then(|id| readable_id(id, max_id));
    let invalid = |message: String, id: Option<&RawValue>, out: &mut Vec<u8>| {
        count(crate::codes::INVALID_REQUEST);
        Reply { id, outcome: Err(server.core_error(RpcError::invalid_request(message))) }.encode_within(budget, out);
        true
    };
    if let Some(key) = &env.duplicate {
        return Err(invalid(format!("the member `{}` appears more than once", bounded(key, 128)), None, out));
    }
    if let Some(raw) = env.id
        && id.is_none()
    {
        let long = matches!(raw.get().as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9'));
        let what = if long { format!("`id` is longer than {max_id} characters") } else { "`id` must be a string, a number, or null".to_owned() };
        return Err(invalid(what, None, out));
    }
    if env.jsonrpc.map(RawValue::get) != Some("\"2.0\"") && !(server.version_optional && env.jsonrpc.is_none()) {
        return Err(invalid("`jsonrpc` must be \"2.0\"".into(), id, out));
    }
    let Some(method) = env.method else { return Err(invalid("the request has no `method`".into(), id, out)) };
    let method = match plain_string(method.get()).map_or_else(|| serde_json::from_str::<Cow<'_, str>>(method.get()), |m| Ok(Cow::Borrowed(m))) {
        Ok(m) => m,
        // A string whose escapes are no text (a lone surrogate) is not JSON.
        Err(e) if method.get().starts_with('"') => {
            count(crate::codes::PARSE_ERROR);
            Reply { id: None, outcome: Err(server.core_error(RpcError::parse_error(e))) }.encode_within(budget, out);
            return Err(true);
        }
        Err(_) => return Err(invalid("`method` must be a string".into(), id, out)),
    };
    let unknown = env.unknown.as_deref().or(env.result.map(|_| "result")).or(env.error.map(|_| "error"));
    if let Some(unknown) = unknown {
        return Err(invalid(format!("unknown member `{unknown}`: a request has only `jsonrpc`, `id`, `method` and `params`"), id, out));
    }
    let notification = env.id.is_none();
    let params = env.params.filter(|p| {
        let t = p.get();
        !(t.starts_with('[') && t[1..t.len() - 1].trim().is_empty())
    });
    Ok(Prepared { id, method, params, notification })
}

/// Makes a prepared call, its reply written to `out`; `false` when it gets none (a
/// notification).
async fn call_prepared(server: &RpcServer, cx: &Context, call: Prepared<'_>, budget: usize, out: &mut Vec<u8>) -> bool {
    let Prepared { id, method, params, notification } = call;
    let metrics = server.metrics.as_ref();
    let count = |code: i64| count_error(metrics, code);
    if notification && let Some(m) = metrics {
        m.notification();
    }
    // The result is written into the reply after its head; a notification's is dropped.
    let start = out.len();
    if !notification {
        encode_result_head(id, out);
    }
    let outcome = match params.map(|p| p.get().as_bytes()[0]) {
        // `null` goes to the handler too: whether a method takes it is its schema's to say.
        Some(b'{' | b'[' | b'n') | None => {
            let timed = metrics.map(|m| (m.call_started(), std::time::Instant::now()));
            let outcome = call_handler(server, cx, &method, params, out).await;
            if let (Some(m), Some((in_flight, started))) = (metrics, timed) {
                m.call_finished(&method, outcome.as_ref().err().map(|e| e.code), started.elapsed());
                drop(in_flight);
            }
            outcome
        }
        Some(_) => {
            let e = RpcError::invalid_params("`params` must be an object, an array or null");
            count(e.code);
            Err(server.core_error(e))
        }
    };
    if notification {
        out.truncate(start);
        return false;
    }
    match outcome {
        Ok(()) => out.push(b'}'),
        Err(e) => {
            out.truncate(start);
            Reply { id, outcome: Err(e) }.encode_within(budget, out);
        }
    }
    true
}
