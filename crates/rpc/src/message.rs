//! JSON-RPC 2.0 message handling, the same for every transport: one message (a request object, a
//! notification or a batch) in, at most one encoded reply out.
//!
//! - Bytes that are not one JSON text (invalid UTF-8, bad syntax, trailing data) are -32700 with
//!   a `null` id.
//! - JSON that is not a request object (not an object; `jsonrpc` missing or not `"2.0"`; an `id`
//!   that is not a string, a number or null, or longer than [`MAX_ID_BYTES`]; no `method`, or one
//!   that is not a string; a member given twice; a member other than the four) is -32600.
//! - `params` that is not an object or an array, or that the handler refuses, is -32602; an
//!   unknown method is the handler's -32601. `"params": []` is no params.
//! - A request without an `id` member is a notification: it runs, and gets no reply whatever its
//!   outcome. A batch is an array of at most [`crate::Limits::max_batch`] entries (an empty one
//!   is -32600), each handled as above; its reply is the array of its entries' replies, and no
//!   reply when every entry was a notification.
//! - The reply echoes the `id` exactly as the request wrote it.
//! - A response object (no `method`; a `result` or an `error`; an `id`) is the caller's answer to
//!   a request of the server's ([`crate::Peer::request`]): it goes to the request waiting under
//!   that id (none waiting: it is dropped), and nothing is replied. A request with a `result` or
//!   `error` member is still -32600.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::{Context, MAX_ERROR_MESSAGE, RpcError, RpcServer, bounded};

/// The longest `id` echoed, in bytes of its JSON text (1 KiB): an id is a short handle, and an
/// error reply to a bad request never carries more of what the caller sent than this.
pub const MAX_ID_BYTES: usize = 1024;

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
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    let value: &'de RawValue = map.next_value()?;
                    let slot = match &*key {
                        "jsonrpc" => &mut env.jsonrpc,
                        "id" => &mut env.id,
                        "method" => &mut env.method,
                        "params" => &mut env.params,
                        "result" => &mut env.result,
                        "error" => &mut env.error,
                        other => {
                            if env.unknown.is_none() {
                                env.unknown = Some(bounded(other, 128).into_owned());
                            }
                            continue;
                        }
                    };
                    if slot.replace(value).is_some() && env.duplicate.is_none() {
                        env.duplicate = Some(key.into_owned());
                    }
                }
                Ok(env)
            }
        }
        d.deserialize_map(V)
    }
}

impl Envelope<'_> {
    /// Whether this is a response (no `method`, a `result` or an `error`, an `id`).
    fn is_response(&self) -> bool {
        self.method.is_none() && self.id.is_some() && (self.result.is_some() || self.error.is_some())
    }
}

/// Gives a response the caller sent (its answer to a request of the server's) to the request
/// that waits for it; a response no request waits for is dropped. Nothing is replied.
fn take_answer(cx: &Context, env: &Envelope<'_>) {
    let Some(id) = env.id else { return };
    let answer = match (env.result, env.error) {
        (Some(result), None) => Ok(result.to_owned()),
        (None, Some(error)) => Err(serde_json::from_str::<RpcError>(error.get()).unwrap_or_else(|e| RpcError::new(crate::codes::INTERNAL_ERROR, format!("the caller answered with an error object that is not one: {e}")))),
        _ => Err(RpcError::new(crate::codes::INTERNAL_ERROR, "the caller answered with both a result and an error")),
    };
    cx.peer().resolve(id, answer);
}

/// When `bytes` is one response (not a request, not a batch), gives it to the request that waits
/// for it and says so: the connection takes answers before any bound on calls in flight.
pub(crate) fn take_if_answer(server: &RpcServer, cx: &Context, bytes: &[u8]) -> bool {
    let text = bytes.trim_ascii_start();
    if text.first() != Some(&b'{') {
        return false;
    }
    match serde_json::from_slice::<Envelope<'_>>(text) {
        // A screened-out answer goes on to be refused like any message.
        Ok(env) if env.is_response() && env.duplicate.is_none() && server.screened(bytes).is_none() => {
            take_answer(cx, &env);
            true
        }
        _ => false,
    }
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
}

/// A response to the request `id` (`None`: `null`): its result, or its error with the message at
/// most [`MAX_ERROR_MESSAGE`] bytes. The server's replies and a client's answers to the server's
/// requests ([`crate::ServerRequest`]) both.
pub(crate) fn encode_response(id: Option<&RawValue>, outcome: Result<&RawValue, &RpcError>, out: &mut Vec<u8>) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.map_or("null", RawValue::get).as_bytes());
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
pub(crate) fn refusal(bytes: &[u8], e: &RpcError) -> Option<Vec<u8>> {
    let Ok(env) = serde_json::from_slice::<Envelope<'_>>(bytes) else { return Some(error_reply(e)) };
    let id = env.id?;
    let id = readable_id(id);
    let mut out = Vec::with_capacity(160);
    Reply { id, outcome: Err(e.clone()) }.encode(&mut out);
    Some(out)
}

/// The id to echo, when it is one: a string, a number or null, at most [`MAX_ID_BYTES`].
fn readable_id(raw: &RawValue) -> Option<&RawValue> {
    let text = raw.get();
    let ok = text.len() <= MAX_ID_BYTES && matches!(text.as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9' | b'n'));
    ok.then_some(raw)
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
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => return fail(server, &RpcError::parse_error(format_args!("invalid UTF-8 at byte offset {}", e.valid_up_to()))),
    };
    let trimmed = text.trim_start();
    if !trimmed.starts_with('[') {
        // One request: an envelope read whole is JSON throughout (every member is read, each
        // value as raw JSON), so only a refused one needs the syntax pass below to tell a parse
        // error from an invalid request.
        let env = serde_json::from_str::<Envelope<'_>>(text);
        if env.is_err()
            && let Err(e) = serde_json::from_str::<&RawValue>(text)
        {
            return fail(server, &RpcError::parse_error(e));
        }
        let mut out = Vec::with_capacity(128);
        return handle_envelope(server, cx, env.ok(), &mut out).await.then_some(out);
    }
    // A batch is read once as JSON first (without building it: nesting costs no stack), so bad
    // syntax anywhere is a parse error whatever else is wrong.
    if let Err(e) = serde_json::from_str::<&RawValue>(text) {
        return fail(server, &RpcError::parse_error(e));
    }
    let entries: Vec<&RawValue> = match serde_json::from_str(text) {
        Ok(e) => e,
        Err(e) => return fail(server, &RpcError::parse_error(e)),
    };
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
    let replies = futures_util::future::join_all(entries.iter().map(|e| async move {
        let mut out = Vec::new();
        handle_one(server, cx, e.get(), &mut out).await.then_some(out)
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
async fn handle_one(server: &RpcServer, cx: &Context, text: &str, out: &mut Vec<u8>) -> bool {
    handle_envelope(server, cx, serde_json::from_str::<Envelope<'_>>(text).ok(), out).await
}

/// [`handle_one`] with the request's envelope read (`None`: the JSON is no request object).
async fn handle_envelope(server: &RpcServer, cx: &Context, env: Option<Envelope<'_>>, out: &mut Vec<u8>) -> bool {
    let metrics = server.metrics.as_ref();
    let count = |code: i64| {
        if let Some(m) = metrics {
            m.error(code);
        }
    };
    let env = match env {
        Some(env) => env,
        None => {
            let e = RpcError::invalid_request("a request is a JSON object: {\"jsonrpc\": \"2.0\", \"id\", \"method\", \"params\"}");
            count(e.code);
            Reply { id: None, outcome: Err(server.core_error(e)) }.encode(out);
            return true;
        }
    };
    if env.is_response() && env.duplicate.is_none() && env.unknown.is_none() {
        take_answer(cx, &env);
        return false;
    }
    let id = env.id.and_then(readable_id);
    let invalid = |message: String, id: Option<&RawValue>, out: &mut Vec<u8>| {
        count(crate::codes::INVALID_REQUEST);
        Reply { id, outcome: Err(server.core_error(RpcError::invalid_request(message))) }.encode(out);
        true
    };
    if let Some(key) = &env.duplicate {
        return invalid(format!("the member `{}` appears more than once", bounded(key, 128)), None, out);
    }
    if let Some(raw) = env.id
        && id.is_none()
    {
        let what = if raw.get().len() > MAX_ID_BYTES { format!("`id` is longer than {MAX_ID_BYTES} bytes") } else { "`id` must be a string, a number, or null".to_owned() };
        return invalid(what, None, out);
    }
    if env.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
        return invalid("`jsonrpc` must be \"2.0\"".into(), id, out);
    }
    let Some(method) = env.method else { return invalid("the request has no `method`".into(), id, out) };
    let method = match serde_json::from_str::<Cow<'_, str>>(method.get()) {
        Ok(m) => m,
        // A string whose escapes are no text (a lone surrogate) is not JSON.
        Err(e) if method.get().starts_with('"') => {
            count(crate::codes::PARSE_ERROR);
            Reply { id: None, outcome: Err(server.core_error(RpcError::parse_error(e))) }.encode(out);
            return true;
        }
        Err(_) => return invalid("`method` must be a string".into(), id, out),
    };
    let unknown = env.unknown.as_deref().or(env.result.map(|_| "result")).or(env.error.map(|_| "error"));
    if let Some(unknown) = unknown {
        return invalid(format!("unknown member `{unknown}`: a request has only `jsonrpc`, `id`, `method` and `params`"), id, out);
    }
    let notification = env.id.is_none();
    let params = env.params.filter(|p| {
        let t = p.get();
        !(t.starts_with('[') && t[1..t.len() - 1].trim().is_empty())
    });
    if notification && let Some(m) = metrics {
        m.notification();
    }
    let outcome = match params.map(|p| p.get().as_bytes()[0]) {
        Some(b'{' | b'[') | None => match metrics {
            None => server.handler.call(cx, &method, params).await,
            Some(m) => {
                let _in_flight = m.call_started();
                let started = std::time::Instant::now();
                let outcome = server.handler.call(cx, &method, params).await;
                m.call_finished(&method, outcome.as_ref().err().map(|e| e.code), started.elapsed());
                outcome
            }
        },
        Some(_) => {
            let e = RpcError::invalid_params("`params` must be an object or an array");
            count(e.code);
            Err(server.core_error(e))
        }
    };
    if notification {
        return false;
    }
    Reply { id, outcome }.encode(out);
    true
}
