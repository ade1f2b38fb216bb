//! JSON-RPC 2.0 for the runtime: its methods served by openagents-rpc's core, the same for every
//! transport. The core reads each message (a request object, a notification or a batch) and
//! answers it; the runtime is its [`Handler`] — the caller's grant, then the params decoded by the
//! `decode` generated from `schema/` (`openagents_protocol::service`) into the generated
//! [`Method`], then the engine — and shapes the core's own errors into its own form.
//!
//! - A request object without an `id` member is a notification: it runs and gets no reply,
//!   whatever its outcome (JSON-RPC 2.0 §4.1).
//! - A message that is not JSON is `parse_error` (-32700) with a `null` id; JSON that is not a
//!   request object (a wrong `jsonrpc`, an `id` that is an object or array or longer than 256
//!   characters, a `method` that is not a string, an unknown envelope member) is
//!   `invalid_request` (-32600); only a problem inside `params` is `invalid_params` (-32602).
//! - A JSON array is a batch of at most [`SERVER_MAX_BATCH_ENTRIES`] entries; each entry goes
//!   through the same dispatch, grants and lease as a single request, and the reply is the array
//!   of the entries' replies (notifications leave none; no replies at all is no reply).
//! - Every reply carries `"jsonrpc": "2.0"`; requests without the member (the seed's JSONL-RPC)
//!   are still accepted. The id is echoed as the request wrote it.
//! - Every error object has the short, fixed title of its code as `message` and the typed
//!   [`RuntimeSubmitError`] as `data`, the detail said there once.
//! - Nothing is proportional to a body the caller may not send: the grant is checked before a
//!   request's params are read, an error holds at most [`MAX_VIOLATIONS`] violations of bounded
//!   length (and a count of the rest), a refusal's reply takes at most twice its request or
//!   [`REPLY_FLOOR`], params larger than [`EXPLAIN_LIMIT`] that break the schema get their first
//!   problem only, and a message over 64 KiB is read off the runtime's worker threads.

use std::sync::Arc;
use std::time::Instant;

use openagents_protocol::{ErrorCode, ErrorDetails, Method, RuntimeSubmitError, SERVER_MAX_BATCH_ENTRIES, SERVER_MAX_IN_FLIGHT, SERVER_MAX_LINE_BYTES, Violation, service};
use openagents_rpc::{BoxFuture, Context, Handler, Identity, Limits, Peer, RpcError, RpcServer, codes};
use serde_json::Value;
use serde_json::value::RawValue;

pub use crate::agent::error_title;
use crate::agent::{error, rpc_error};
use crate::auth::Caller;
use crate::connection::EventStream;
use crate::engine::{EventSession, RpcEngine};

pub use openagents_rpc::{REPLY_FLOOR, bounded};

/// The most violations one error carries; the rest are counted in `violations_omitted`.
pub const MAX_VIOLATIONS: usize = openagents_rpc::MAX_VIOLATIONS;
/// The longest pointer or message of one violation, in bytes; longer ones are cut with `…`.
pub const MAX_VIOLATION_TEXT: usize = openagents_rpc::MAX_VIOLATION_TEXT;
/// The longest error message, in bytes.
pub const MAX_ERROR_MESSAGE: usize = openagents_rpc::MAX_ERROR_MESSAGE;
/// Params up to this size (64 KiB) that break the schema get every violation explained (up to
/// [`MAX_VIOLATIONS`]); larger ones get only the decoder's first problem. Explaining builds the
/// params as an untyped tree, which costs up to 32 times the text for `[0,0,…]`: 64 KiB keeps
/// that under about 2 MiB, and a huge invalid request costs no more than reading it.
pub const EXPLAIN_LIMIT: usize = openagents_protocol::rt::EXPLAIN_MAX_BYTES;
/// Params larger than this (64 KiB) are decoded off the runtime's worker threads
/// (`block_in_place`), so the tens of milliseconds a 16 MB body takes never hold up the
/// connections queued on that worker.
pub const LARGE_REQUEST_BYTES: usize = openagents_rpc::LARGE_MESSAGE;
/// The longest `id` echoed, in characters (`RequestId`'s `maxLength`).
const MAX_ID_CHARS: usize = 256;

/// The answer to one request, before a transport encodes it.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The request's id, echoed (`None` when absent or unreadable: encoded as `null`).
    pub id: Option<Value>,
    /// The id exactly as the request wrote it, written instead of `id` where `id`'s own
    /// encoding would differ (a number with a fraction or an exponent, or past 64 bits).
    pub raw_id: Option<Box<RawValue>>,
    /// Whether the request carried `"jsonrpc": "2.0"` (the response does either way).
    pub jsonrpc: bool,
    /// The encoded result, or the error.
    pub outcome: Result<Vec<u8>, RuntimeSubmitError>,
}

impl Reply {
    /// A reply with no readable id.
    pub fn error(err: RuntimeSubmitError) -> Reply {
        Reply { id: None, raw_id: None, jsonrpc: false, outcome: Err(err) }
    }

    /// The reply the core encoded, read back (a reply that is not one reads as an internal
    /// error).
    fn read(bytes: &[u8]) -> Reply {
        #[derive(serde::Deserialize)]
        struct Response<'a> {
            #[serde(borrow)]
            id: Option<&'a RawValue>,
            #[serde(borrow)]
            result: Option<&'a RawValue>,
            error: Option<Value>,
        }
        let Ok(r) = serde_json::from_slice::<Response<'_>>(bytes) else {
            return Reply::error(error(ErrorCode::Internal, "the reply is not a JSON-RPC response"));
        };
        let id = r.id.and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok()).filter(|v| !v.is_null());
        let raw_id = r.id.filter(|raw| matches!(serde_json::from_str::<Value>(raw.get()), Ok(Value::Number(n)) if !n.is_i64() && !n.is_u64())).map(ToOwned::to_owned);
        let outcome = match (r.result, r.error) {
            (Some(result), None) => Ok(result.get().as_bytes().to_vec()),
            (_, Some(e)) => Err(e.get("data").cloned().and_then(|d| serde_json::from_value::<RuntimeSubmitError>(d).ok()).unwrap_or_else(|| error(ErrorCode::Internal, format!("an error without the runtime's data: {e}")))),
            (None, None) => Err(error(ErrorCode::Internal, "the reply has neither a result nor an error")),
        };
        Reply { id, raw_id, jsonrpc: true, outcome }
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
                out.extend_from_slice(br#","error":"#);
                out.extend_from_slice(&serde_json::to_vec(&rpc_error(e.clone())).unwrap_or_default());
            }
        }
        out.push(b'}');
        out
    }
}

/// An error the core made (its message `<title>: <detail>`) in the runtime's form.
fn shape_core_error(e: RpcError) -> RpcError {
    let code = match e.code {
        codes::PARSE_ERROR => ErrorCode::ParseError,
        codes::INVALID_REQUEST => ErrorCode::InvalidRequest,
        codes::METHOD_NOT_FOUND => ErrorCode::UnknownMethod,
        codes::INVALID_PARAMS => ErrorCode::InvalidParams,
        codes::UNAUTHORIZED => ErrorCode::Unauthorized,
        codes::FORBIDDEN => ErrorCode::Forbidden,
        codes::BUSY => ErrorCode::Busy,
        codes::FRAME_TOO_LARGE => ErrorCode::FrameTooLarge,
        codes::SHUTTING_DOWN => ErrorCode::ShuttingDown,
        _ => ErrorCode::Internal,
    };
    let detail = e.message.split_once(": ").map_or(e.message.as_str(), |(_, detail)| detail);
    // The core says "Invalid params: `params` must be …"; the runtime's details start lower case.
    let detail = match code {
        ErrorCode::InvalidParams => format!("invalid params: {detail}"),
        _ => detail.to_owned(),
    };
    rpc_error(error(code, detail))
}

/// What a call on the runtime's transports knows of its caller besides its name: the caller's
/// grant, and the connection's event stream where it has one (stdio, the WebSocket). Carried
/// in the call's [`Context`].
pub(crate) struct Conn {
    pub(crate) caller: Arc<Caller>,
    pub(crate) session: Option<Arc<dyn EventSession>>,
    /// The connection's own event stream (stdio, the WebSocket), which orders its answers.
    pub(crate) stream: Option<Arc<EventStream>>,
}

impl Conn {
    /// A caller on a streaming connection whose event stream is `stream`.
    pub(crate) fn streaming(caller: Caller, stream: &Arc<EventStream>) -> Arc<Conn> {
        Arc::new(Conn { caller: Arc::new(caller), session: Some(Arc::clone(stream) as Arc<dyn EventSession>), stream: Some(Arc::clone(stream)) })
    }
}

/// The context of calls by `caller` on a connection with `session`.
pub(crate) fn context(caller: Arc<Caller>, session: Option<Arc<dyn EventSession>>) -> Context {
    let identity = Identity::new(caller.name.as_str());
    Context::new(identity, Peer::detached()).with_data(Arc::new(Conn { caller, session, stream: None }))
}

/// The core serving `engine`'s methods with the runtime's bounds and error form; a connection's
/// calls start in read order.
pub(crate) fn server(engine: &RpcEngine) -> RpcServer {
    let limits = Limits { max_frame_bytes: SERVER_MAX_LINE_BYTES, max_in_flight: SERVER_MAX_IN_FLIGHT, max_batch: SERVER_MAX_BATCH_ENTRIES, max_id_chars: MAX_ID_CHARS };
    let metrics = Arc::clone(engine.metrics());
    RpcServer::new(Methods(engine.clone()))
        .limits(limits)
        .jsonrpc_optional(true)
        .in_order(true)
        .core_errors(shape_core_error)
        .on_refusal(move |_| metrics.request(None, false, 0.0))
}

/// The runtime's methods, as the core calls them.
struct Methods(RpcEngine);

impl Handler for Methods {
    fn call<'a>(&'a self, cx: &'a Context, method: &'a str, params: Option<&'a RawValue>) -> BoxFuture<'a, Result<Box<RawValue>, RpcError>> {
        let started = Instant::now();
        let engine = &self.0;
        let Some(conn) = cx.data::<Conn>() else {
            return Box::pin(std::future::ready(Err(rpc_error(error(ErrorCode::Internal, "a call reached the runtime without its caller")))));
        };
        let caller = &*conn.caller;
        let (name, outcome) = match prepare(engine, caller, method, params) {
            Err((name, e)) => (name, Err(e)),
            Ok((name, method)) => match engine.answer_at_once(caller, method, conn.session.as_deref()) {
                Ok(outcome) => match &conn.stream {
                    // A `subscribe` answered: what it replays goes out before its answer, and
                    // the connection reads on only after it.
                    Some(stream) if stream.take_subscribed() => {
                        engine.metrics().request(Some(name), outcome.is_ok(), started.elapsed().as_secs_f64());
                        cx.hold_connection();
                        return Box::pin(async move {
                            stream.caught_up().await;
                            outcome.map_err(rpc_error)
                        });
                    }
                    _ => (Some(name), outcome),
                },
                Err(wait) => {
                    return Box::pin(async move {
                        let outcome = engine.wait_for(caller, wait).await;
                        engine.metrics().request(Some(name), outcome.is_ok(), started.elapsed().as_secs_f64());
                        // What the call published (a turn's events, `shutting_down`) goes out
                        // before its answer.
                        if let Some(stream) = &conn.stream {
                            stream.caught_up().await;
                        }
                        outcome.map_err(rpc_error)
                    });
                }
            },
        };
        engine.metrics().request(name, outcome.is_ok(), started.elapsed().as_secs_f64());
        Box::pin(std::future::ready(outcome.map_err(rpc_error)))
    }
}

/// A call read up to the engine: the method known, the caller's grant checked before anything
/// of the params is read, the params decoded into the generated [`Method`], the lease touched.
/// A refusal names the method when it is one (for the metrics).
fn prepare(engine: &RpcEngine, caller: &Caller, method: &str, params: Option<&RawValue>) -> Result<(&'static str, Method), (Option<&'static str>, RuntimeSubmitError)> {
    let Some(name) = Method::NAMES.iter().copied().find(|n| *n == method) else {
        return Err((None, error(ErrorCode::UnknownMethod, format!("unknown method `{}`; this server knows {}", bounded(method, 128), Method::NAMES.join(", ")))));
    };
    engine.permitted(caller, name).map_err(|e| (Some(name), e))?;
    let len = params.map_or(0, |p| p.get().len());
    let decoded = openagents_rpc::off_workers(len, || service::decode(name, params)).map_err(|e| (Some(name), invalid_params(e)))?;
    engine.touch_lease(caller);
    Ok((name, decoded))
}


/// The generated decode's refusal as the runtime's error: params the parser cannot read
/// (-32700) as `parse_error`; params that break their schema (-32602, its violations in
/// `data.violations`, pointers from `/params`) as `invalid_params`, every violation in `details`.
fn invalid_params(e: RpcError) -> RuntimeSubmitError {
    if e.code == codes::PARSE_ERROR {
        let detail = e.message.split_once(": ").map_or(e.message.as_str(), |(_, d)| d);
        return error(ErrorCode::ParseError, detail);
    }
    let data = e.data.unwrap_or(Value::Null);
    let violations: Vec<Violation> = data.get("violations").cloned().and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default();
    let omitted = data.get("violations_omitted").and_then(Value::as_i64).filter(|n| *n > 0);
    if violations.is_empty() {
        let detail = e.message.split_once(": ").map_or(e.message.as_str(), |(_, d)| d);
        return error(ErrorCode::InvalidParams, format!("invalid params: {detail}"));
    }
    let mut message = String::from("invalid params: ");
    for (i, v) in violations.iter().take(3).enumerate() {
        if i > 0 {
            message.push_str("; ");
        }
        message.push_str(&format!("{}: {}", v.pointer, v.message));
    }
    let more = violations.len() as i64 + omitted.unwrap_or(0) - 3;
    if more > 0 {
        message.push_str(&format!("; and {more} more"));
    }
    let mut e = error(ErrorCode::InvalidParams, bounded(&message, MAX_ERROR_MESSAGE).into_owned());
    e.details = Some(ErrorDetails { violations: Some(violations), violations_omitted: omitted, known: None, holder: None, expires_at_ms: None, limit: None });
    e
}

impl RpcEngine {
    /// Decodes one request object and answers it (also a notification; a batch is not one
    /// request: transports use [`RpcEngine::handle_message`]).
    pub async fn handle(&self, caller: &Caller, bytes: &[u8]) -> Reply {
        self.handle_in(caller, bytes, None).await
    }

    /// [`RpcEngine::handle`] on a streaming connection whose event stream `subscribe` controls.
    pub async fn handle_in(&self, caller: &Caller, bytes: &[u8], session: Option<Arc<dyn EventSession>>) -> Reply {
        match self.handle_message(caller, bytes, session).await {
            Some(reply) => Reply::read(&reply),
            // A notification: nothing is sent; its outcome is not kept.
            None => Reply { id: None, raw_id: None, jsonrpc: true, outcome: Ok(b"null".to_vec()) },
        }
    }

    /// Answers one JSON-RPC message — a request, a notification or a batch — as `caller`: the
    /// encoded reply, or `None` when nothing is to be sent (a notification, or a batch of only
    /// notifications). What the transports do, in process.
    pub async fn handle_message(&self, caller: &Caller, bytes: &[u8], session: Option<Arc<dyn EventSession>>) -> Option<Vec<u8>> {
        let cx = context(Arc::new(caller.clone()), session);
        server(self).handle_message(&cx, bytes).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{FnAgent, TurnContext};
    use crate::auth::Grant;
    use crate::engine::EngineConfig;
    use futures_util::FutureExt;
    use openagents_protocol::Turn;
    use openagents_rpc::Connection;

    fn engine() -> RpcEngine {
        RpcEngine::new(FnAgent(|_turn: Turn, _ctx: TurnContext| async { Ok::<_, RuntimeSubmitError>("done".to_owned()) }))
    }

    /// On a connection, what needs no waiting is answered before the next message is read,
    /// with the very bytes the whole call gives; a `submit` is begun once, answered later.
    #[tokio::test]
    async fn an_answer_now_is_the_answer_later_and_what_waits_runs_once() {
        let engine = engine();
        let server = server(&engine);
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
            (&observer, r#"{"jsonrpc":"2.0","id":5,"method":"submit","params":{"task":"x"}}"#),
            (&observer, r#"{"jsonrpc":"2.0","id":6,"method":"shutdown"}"#),
        ];
        for (caller, message) in now {
            let (conn, mut rx) = Connection::new(&server, Identity::new(caller.name.as_str()));
            let mut conn = conn.with_data(Arc::new(Conn { caller: Arc::new((*caller).clone()), session: None, stream: None }));
            conn.take(message.as_bytes().to_vec()).await;
            let at_once = rx.try_recv().ok();
            let later = engine.handle_message(caller, message.as_bytes(), None).await;
            assert_eq!(at_once, later, "{message}");
        }
        let status = engine.status();
        assert_eq!(status.counters.submitted, 0, "a turn started: {status:?}");
        assert!(!engine.is_shut_down() && engine.is_accepting(), "shutdown began");

        let engine = RpcEngine::with_config(FnAgent(|_turn: Turn, _ctx: TurnContext| async { Ok::<_, RuntimeSubmitError>("done".to_owned()) }), EngineConfig { default_runner: Some("fn".into()), ..EngineConfig::default() });
        let server = super::server(&engine);
        let (conn, mut rx) = Connection::new(&server, Identity::new("stdio"));
        let mut conn = conn.with_data(Arc::new(Conn { caller: Arc::new(admin), session: None, stream: None }));
        conn.take(br#"{"jsonrpc":"2.0","id":7,"method":"submit","params":{"task":"x"}}"#.to_vec()).await;
        conn.finish().await;
        let v: Value = serde_json::from_slice(&rx.recv().await.expect("a reply")).expect("JSON");
        assert_eq!(v["result"]["result"], "done", "{v}");
        assert_eq!(engine.status().counters.submitted, 1, "the turn ran once");
    }

    fn reply_of(engine: &RpcEngine, caller: &Caller, message: &str) -> Option<Value> {
        let reply = engine.handle_message(caller, message.as_bytes(), None).now_or_never().expect("answered without waiting")?;
        Some(serde_json::from_slice(&reply).expect("a JSON reply"))
    }

    /// `"params": []` is no params where the method needs none; elsewhere the refusal is the
    /// one the array itself earns.
    #[test]
    fn an_empty_params_array_is_no_params_where_every_param_is_optional() {
        let engine = engine();
        let admin = Caller::stdio();
        let status = reply_of(&engine, &admin, r#"{"jsonrpc":"2.0","id":1,"method":"status","params":[]}"#).expect("an answer");
        assert!(status["result"]["state"].is_string(), "{status}");
        let spaced = reply_of(&engine, &admin, "{\"params\":[ \n ],\"method\":\"release\",\"id\":\"r\",\"jsonrpc\":\"2.0\"}").expect("an answer");
        assert_eq!(spaced["id"], "r", "{spaced}");
        assert!(spaced.get("result").is_some(), "{spaced}");
        assert_eq!(reply_of(&engine, &admin, r#"{"jsonrpc":"2.0","method":"status","params":[]}"#), None, "a notification stays one");
        for (message, code) in [
            (r#"{"jsonrpc":"2.0","id":2,"method":"submit","params":[]}"#, "invalid_params"),
            (r#"{"jsonrpc":"2.0","id":3,"method":"status","params":[1]}"#, "invalid_params"),
            (r#"{"jsonrpc":"2.0","id":4,"method":"status","params":[],"extra":1}"#, "invalid_request"),
            (r#"{"jsonrpc":"2.0","id":5,"method":"status","params":[],"params":[]}"#, "invalid_request"),
        ] {
            let a = reply_of(&engine, &admin, message).expect("an answer");
            assert_eq!(a["error"]["data"]["code"], code, "{message}: {a}");
        }
        let observer = Caller { name: "watcher".into(), grant: Grant::observer(), trusted: false };
        let a = reply_of(&engine, &observer, r#"{"jsonrpc":"2.0","id":6,"method":"shutdown","params":[]}"#).expect("an answer");
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
        let v = reply_of(&engine, &admin, small).expect("an answer");
        assert_eq!(v["error"]["data"]["details"]["violations"].as_array().map(Vec::len), Some(2), "{v}");
        assert!(v["error"]["data"]["details"].get("violations_omitted").is_none(), "{v}");
    }

    /// `status` names its caller and what the caller's grant allows.
    #[test]
    fn status_names_its_caller_and_grant() {
        let engine = engine();
        let observer = Caller { name: "watcher".into(), grant: Grant::observer(), trusted: false };
        let v = reply_of(&engine, &observer, r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#).expect("an answer");
        let caller = &v["result"]["caller"];
        assert_eq!(caller["name"], "watcher", "{v}");
        let methods: Vec<&str> = caller["methods"].as_array().expect("methods").iter().filter_map(Value::as_str).collect();
        assert!(methods.contains(&"status") && !methods.contains(&"submit") && !methods.contains(&"interrupt"), "{methods:?}");
        assert_eq!((caller["events"].as_bool(), caller["approvals"].as_bool()), (Some(true), Some(false)), "{v}");
        let admin = reply_of(&engine, &Caller::stdio(), r#"{"jsonrpc":"2.0","id":2,"method":"status"}"#).expect("an answer");
        assert!(admin["result"]["caller"]["methods"].as_array().is_some_and(|m| m.iter().any(|x| x == "submit")), "{admin}");
        assert_eq!(admin["result"]["state"], "idle", "the rest of the status is still there: {admin}");
    }
}
