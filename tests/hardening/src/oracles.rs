//! The fuzz oracles: one function per fuzz target in `tests/fuzz`, taking the raw input bytes
//! and panicking (with what broke) when an invariant does not hold. The fuzz targets call them;
//! `tests/regressions.rs` replays every input a fuzzer ever crashed with through the same
//! function, so a crash stays fixed.
//!
//! | oracle | what it drives | what must hold |
//! | --- | --- | --- |
//! | [`frame`] | `frame::read_line` and `frame::LineReader` | both agree with a plain model of "lines of at most `limit` bytes, without `\n` and one `\r` before it", whatever the buffer size |
//! | [`validators`] | `validate_document(type, bytes)` | the same verdict as the `jsonschema` crate on the bundled schema, but for the one declared divergence |
//! | [`json_reader`] | `rt::parse_value_exact` and `rt::RawObject` through `rt::parse_validated_with` (the runtime's own JSON reader first, serde_json for what it does not read) | the same value as `serde_json::from_slice`, bit for bit; refused only when serde_json refuses or a key is given twice; `RawObject` is accepted exactly when the map it stands for is, kept as the text that arrived or as serde_json keeps it, and reads back as that map |
//! | [`rpc_engine`] | `RpcEngine::handle` with an in-process agent | every reply is a valid `RpcResponse` echoing a readable id; counters add up; nothing is left running |
//! | [`runner_events`] | the host's bounded framing and `EventChecker` on a runner's stdout | events round-trip; at most one terminal, nothing after it; the outcome is the terminal's |
//! | [`sse_resume`] | `http::resume_point` (`Last-Event-ID`, `since=`) and `EventHub::subscribe` | every event after the resume point exactly once, in order, or an explicit `gap`/`lagged` |
//! | [`ws_message`] | the approval bridge's answers (`bridge().answer`, a message with a key given twice a denial, results read by `decode::approval_reply`) and the text path through `RpcEngine::handle_in` | responses route to the bridge, requests get valid responses |

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use futures_util::FutureExt;
use openagents_protocol::rt::DocumentError;
use openagents_protocol::{ApprovalReply, ErrorCode, Event, MAX_FRAME, MAX_OUTPUT, RuntimeEvent, RuntimeState, SCHEMA_BUNDLE, ServerEvent, TYPES, Turn, validate_document};
use openagents_runner::frame::{FrameError, LineReader, read_line};
use openagents_runner::host::{EventChecker, TurnError};
use openagents_server::agent::error;
use openagents_server::events::EventHub;
use openagents_server::{Caller, EngineConfig, EventSession, FnAgent, Grant, RpcEngine, TurnContext};
use serde_json::Value;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime"))
}

fn show(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    if s.len() > 400 { format!("{}… ({} bytes)", s.chars().take(400).collect::<String>(), bytes.len()) } else { format!("{s:?}") }
}

// ---------------------------------------------------------------------------------------------
// frame
// ---------------------------------------------------------------------------------------------

/// What the framing must yield for `input` with `limit`: every line (split at `\n`; a last
/// line without one counts), without one `\r` before its end, or `Err` when that is longer than
/// the limit. After an `Err`, the synchronous reader stops; the asynchronous one skips to the
/// next line.
fn model_lines(input: &[u8], limit: usize) -> Vec<Result<Vec<u8>, ()>> {
    let mut out = Vec::new();
    let mut segments: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    if segments.last().is_some_and(|s| s.is_empty()) {
        segments.pop();
    }
    for raw in segments {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        out.push(if line.len() > limit { Err(()) } else { Ok(line.to_vec()) });
    }
    out
}

/// The bounded line reader, sync and async, against [`model_lines`]. Input: one byte for the
/// limit (0..=63), one for the buffer capacity (1..=16), then the stream.
pub fn frame(data: &[u8]) {
    let [l, c, input @ ..] = data else { return };
    let limit = usize::from(*l % 64);
    let cap = 1 + usize::from(*c % 16);
    let want = model_lines(input, limit);

    // Synchronous: stops at the first over-long line.
    let mut sync = Vec::new();
    let mut r = std::io::BufReader::with_capacity(cap, input);
    loop {
        match read_line(&mut r, limit) {
            Ok(Some(line)) => {
                assert!(line.len() <= limit, "read_line returned {} bytes with limit {limit}", line.len());
                sync.push(Ok(line));
            }
            Ok(None) => break,
            Err(FrameError::TooLong { limit: l }) => {
                assert_eq!(l, limit);
                sync.push(Err(()));
                break;
            }
            Err(FrameError::Io(e)) => panic!("read_line on a slice failed: {e}"),
        }
    }
    let want_sync: Vec<_> = match want.iter().position(Result::is_err) {
        Some(i) => want[..=i].to_vec(),
        None => want.clone(),
    };
    assert_eq!(sync, want_sync, "read_line (limit {limit}, buffer {cap}) disagrees with the model on {}", show(input));

    // Asynchronous: skips an over-long line and goes on.
    let got = runtime().block_on(async {
        let mut reader = LineReader::new(tokio::io::BufReader::with_capacity(cap, input), limit);
        let mut got = Vec::new();
        loop {
            match reader.next_line().await {
                Ok(Some(line)) => got.push(Ok(line)),
                Ok(None) => break,
                Err(FrameError::TooLong { .. }) => {
                    got.push(Err(()));
                    match reader.skip_line().await {
                        Ok((_, true)) => {}
                        Ok((_, false)) => break,
                        Err(e) => panic!("skip_line on a slice failed: {e}"),
                    }
                }
                Err(FrameError::Io(e)) => panic!("next_line on a slice failed: {e}"),
            }
        }
        got
    });
    assert_eq!(got, want, "LineReader (limit {limit}, buffer {cap}) disagrees with the model on {}", show(input));
}

// ---------------------------------------------------------------------------------------------
// validators
// ---------------------------------------------------------------------------------------------

fn reference() -> &'static HashMap<&'static str, jsonschema::Validator> {
    static REF: OnceLock<HashMap<&'static str, jsonschema::Validator>> = OnceLock::new();
    REF.get_or_init(|| {
        let bundle: Value = serde_json::from_str(SCHEMA_BUNDLE).expect("SCHEMA_BUNDLE is JSON");
        TYPES
            .iter()
            .map(|t| {
                let mut schema = bundle.clone();
                schema.as_object_mut().expect("the bundle is an object").insert("$ref".into(), Value::String(t.pointer.into()));
                let v = jsonschema::draft202012::options().build(&schema).unwrap_or_else(|e| panic!("jsonschema cannot compile {}: {e}", t.pointer));
                (t.name, v)
            })
            .collect()
    })
}

/// Whether some object in the JSON text has the same key twice (the typed decoder refuses those;
/// an untyped `Value` keeps the last).
pub fn has_duplicate_keys(bytes: &[u8]) -> bool {
    use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
    struct V<'a>(&'a mut bool);
    impl<'de> serde::de::DeserializeSeed<'de> for V<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for V<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(V(&mut *self.0))?.is_some() {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen = HashSet::new();
            while let Some(k) = map.next_key::<String>()? {
                if !seen.insert(k) {
                    *self.0 = true;
                }
                map.next_value_seed(V(&mut *self.0))?;
            }
            Ok(())
        }
    }
    let mut dup = false;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let _ = serde::de::DeserializeSeed::deserialize(V(&mut dup), &mut de);
    dup
}

/// Whether the value holds an integer the typed decoder cannot represent (beyond 64 bits).
pub fn has_wide_integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.as_i64().is_none() && (n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)),
        Value::Array(a) => a.iter().any(has_wide_integer),
        Value::Object(o) => o.values().any(has_wide_integer),
        _ => false,
    }
}

/// The generated validators against the `jsonschema` crate on the bundled schema. Input: one
/// byte choosing the type from `TYPES`, then the document. Disagreement is a crash, but for the
/// one declared divergence: the typed decoder refuses, with a root `type` violation saying the
/// document "cannot be represented", a document with duplicate keys or an integer beyond 64
/// bits, which JSON Schema itself accepts.
pub fn validators(data: &[u8]) {
    let Some((&sel, doc)) = data.split_first() else { return };
    let ty = &TYPES[usize::from(sel) % TYPES.len()];
    let ours = validate_document(ty.name, doc).unwrap_or_else(|| panic!("validate_document does not know {}", ty.name));
    let value = match serde_json::from_slice::<Value>(doc) {
        Ok(v) => v,
        Err(e) => {
            assert!(matches!(ours, Err(DocumentError::NotJson(_))), "{}: serde_json says not JSON ({e}) but validate_document says {ours:?} for {}", ty.name, show(doc));
            return;
        }
    };
    if let Err(DocumentError::NotJson(e)) = &ours {
        panic!("{}: validate_document says not JSON ({e}) for a JSON document {}", ty.name, show(doc));
    }
    if let Err(DocumentError::Invalid(vs)) = &ours {
        assert!(!vs.is_empty(), "{}: refused without a violation", ty.name);
        for v in vs {
            assert!(value.pointer(&v.pointer).is_some(), "{}: violation pointer {:?} ({}) is not in the document {}", ty.name, v.pointer, v.message, show(doc));
        }
    }
    let theirs = reference()[ty.name].is_valid(&value);
    if ours.is_ok() == theirs {
        return;
    }
    let declared = theirs
        && matches!(&ours, Err(DocumentError::Invalid(vs)) if vs.len() == 1 && vs[0].keyword == "type" && vs[0].message.starts_with("cannot be represented"))
        && (has_duplicate_keys(doc) || has_wide_integer(&value));
    assert!(declared, "{}: validate_document says {:?}, jsonschema says {} for {}", ty.name, ours, if theirs { "valid" } else { "invalid" }, show(doc));
}

// ---------------------------------------------------------------------------------------------
// json_reader
// ---------------------------------------------------------------------------------------------

/// `rt::parse_value_exact` against serde_json on the same bytes: the runtime's own reader must
/// never accept what serde_json refuses, nor read a value differently (the text form tells every
/// float bit for bit, and -0.0 from 0.0); it refuses a document serde_json reads only for a key
/// given twice.
pub fn json_reader(data: &[u8]) {
    use openagents_protocol::rt;
    let ours = rt::parse_value_exact(data);
    let theirs = serde_json::from_slice::<Value>(data);
    raw_object(data, theirs.is_ok());
    match (theirs, ours) {
        (Ok(theirs), Ok(v)) => assert_eq!(v.to_string(), theirs.to_string(), "read differently: {}", show(data)),
        (Ok(_), Err(DocumentError::Invalid(vs))) => assert!(has_duplicate_keys(data), "refused without a key given twice ({vs:?}): {}", show(data)),
        (Ok(_), Err(DocumentError::NotJson(e))) => panic!("called not JSON ({e}) though serde_json reads it: {}", show(data)),
        (Err(e), Ok(v)) => panic!("read as {v} though serde_json refuses it ({e}): {}", show(data)),
        (Err(_), Err(_)) => {}
    }
}

/// `rt::RawObject` decoded from the same bytes through `rt::parse_validated_with` (the
/// runtime's own reader first, serde_json for what it does not read) and through serde_json
/// alone. Either is accepted exactly when serde_json accepts `Map<String, Value>` through
/// `rt::Wire` (a JSON object, no key given twice at any depth, nested no deeper than it reads):
/// the reader never accepts what serde_json refuses. An accepted object is kept as the text
/// that arrived (what the reader hands over), which reads back as that map bit for bit, or as
/// serde_json's writing of the map (what its path keeps).
///
/// `json` says whether serde_json reads the bytes as a `Value` at all: when it does not, it
/// refuses the map too, and only the refusal is checked. A refusal through
/// `parse_validated_with` is serde_json's own (its second reading), so serde_json alone is asked
/// for the object only when it was accepted. (The regression test runs this over every prefix of
/// hundreds of documents, nearly all of them refused.)
fn raw_object(data: &[u8], json: bool) {
    use openagents_protocol::rt::{self, RawObject, Wire};
    use serde_json::Map;
    let ours = rt::parse_validated_with::<RawObject>(data, |_, _, _| {}, |_, _, _| {});
    let map = if json {
        let mut de = serde_json::Deserializer::from_slice(data);
        <Map<String, Value> as Wire>::decode(&mut de).and_then(|map| de.end().map(|()| map)).map_err(|e| e.to_string())
    } else {
        Err("not JSON".to_owned())
    };
    let (ours, map) = match (ours, map) {
        (Ok(ours), Ok(map)) => (ours, map),
        (Ok(ours), Err(e)) => panic!("kept as {} though serde_json refuses the map it stands for ({e}): {}", ours.get(), show(data)),
        (Err(e), Ok(_)) => panic!("refused as an object kept as text ({e:?}) though serde_json reads its map: {}", show(data)),
        (Err(_), Err(_)) => return,
    };
    let map = Value::Object(map).to_string();
    let mut de = serde_json::Deserializer::from_slice(data);
    let theirs = match RawObject::decode(&mut de).and_then(|raw| de.end().map(|()| raw)) {
        Ok(theirs) => theirs,
        Err(e) => panic!("kept as {} though serde_json refuses it ({e}): {}", ours.get(), show(data)),
    };
    // Accepted, the bytes are UTF-8: the text that arrived is them without the whitespace around.
    let arrived = String::from_utf8_lossy(data);
    let arrived = arrived.trim_matches([' ', '\t', '\n', '\r']);
    // serde_json's path keeps serde_json's writing of the map (read back, a float could differ
    // in its last place when serde_json does not round correctly, so the text is compared).
    assert_eq!(theirs.get(), map, "serde_json's path keeps another text than its map's: {}", show(data));
    if ours.get() == theirs.get() {
        return;
    }
    // The reader's is the text that arrived, and reads back as the map serde_json read from it.
    assert_eq!(ours.get(), arrived, "kept as {}, neither the text that arrived nor serde_json's {}: {}", ours.get(), theirs.get(), show(data));
    match ours.to_map() {
        Ok(read) => assert_eq!(Value::Object(read).to_string(), map, "the reader's {} reads back as another map: {}", ours.get(), show(data)),
        Err(e) => panic!("the reader's {} does not read back as a map ({e}): {}", ours.get(), show(data)),
    }
}

// ---------------------------------------------------------------------------------------------
// rpc_engine and ws_message
// ---------------------------------------------------------------------------------------------

fn agent_engine() -> RpcEngine {
    let agent = FnAgent(|turn: Turn, ctx: TurnContext| async move {
        ctx.text(turn.task.chars().take(16).collect::<String>());
        if turn.task.starts_with("fail") {
            return Err(error(ErrorCode::RunnerFailed, "asked to fail"));
        }
        if turn.task.starts_with("ask") {
            let d = ctx.request_approval(turn.task.clone()).await;
            return Ok(format!("approved={}", d.approved));
        }
        Ok(turn.task)
    });
    let engine = RpcEngine::with_config(agent, EngineConfig { default_runner: Some("echo".into()), cwd: "/".into(), lease_ttl: Duration::from_secs(60) });
    // An approval nobody answers must not hold a fuzz iteration.
    engine.bridge().set_timeout(Duration::from_millis(1));
    engine
}

fn callers() -> [Caller; 4] {
    let untrusted = |name: &str, grant: Grant| Caller { name: name.into(), grant, trusted: false };
    [Caller::stdio(), untrusted("admin", Grant::admin()), untrusted("controller", Grant::controller()), untrusted("observer", Grant::observer())]
}

/// The id a reply must echo when the request is an object with a readable id.
fn readable_id(doc: &Value) -> Option<Value> {
    doc.as_object()?.get("id").filter(|id| matches!(id, Value::String(s) if s.chars().count() <= 256) || id.as_i64().is_some()).cloned()
}

fn check_reply(what: &str, input: &[u8], reply: &openagents_server::Reply) {
    let json = reply.to_json();
    match validate_document("RpcResponse", &json) {
        Some(Ok(())) => {}
        other => panic!("{what}: the reply {} is not a valid RpcResponse ({other:?}) for {}", show(&json), show(input)),
    }
    let v: Value = serde_json::from_slice(&json).expect("a valid RpcResponse is JSON");
    assert!(v.get("result").is_some() != v.get("error").is_some(), "{what}: a reply has exactly one of result and error: {}", show(&json));
    assert_eq!(v["jsonrpc"], "2.0", "{what}: every reply carries `jsonrpc`: {}", show(&json));
    match serde_json::from_slice::<Value>(input) {
        Err(_) => {
            let code = reply.outcome.as_ref().err().map(|e| e.code.clone());
            assert_eq!(code, Some(ErrorCode::ParseError), "{what}: bytes that are not JSON get parse_error: {}", show(input));
        }
        Ok(doc) => {
            if let Some(id) = readable_id(&doc) {
                assert_eq!(reply.id.as_ref(), Some(&id), "{what}: the reply does not echo the id of {}", show(input));
            }
        }
    }
}

fn check_engine(what: &str, engine: &RpcEngine) {
    let status = engine.status();
    let json = serde_json::to_vec(&status).expect("status encodes");
    assert!(matches!(validate_document("RuntimeStatus", &json), Some(Ok(()))), "{what}: status is not a valid RuntimeStatus: {}", show(&json));
    assert!(status.active_turn.is_none(), "{what}: a turn is still active after its submit answered");
    let c = &status.counters;
    assert_eq!(c.submitted, c.completed + c.failed + c.interrupted, "{what}: counters do not add up: {c:?}");
    assert!(status.state != RuntimeState::Running, "{what}: still running");
}

thread_local! {
    /// One engine per thread: an oracle checks the engine's state after each input, so two
    /// threads (a test harness runs tests in parallel) must never share one.
    static ENGINE: std::cell::RefCell<Option<RpcEngine>> = const { std::cell::RefCell::new(None) };
}

fn current_engine() -> RpcEngine {
    ENGINE.with(|cell| {
        let mut e = cell.borrow_mut();
        match e.as_ref() {
            Some(engine) if !engine.is_shut_down() => engine.clone(),
            _ => e.insert(agent_engine()).clone(),
        }
    })
}

/// One request through `RpcEngine::handle`, as one of four callers (the stdio parent, admin,
/// controller, observer; chosen by the input's length).
pub fn rpc_engine(data: &[u8]) {
    let engine = current_engine();
    let caller = &callers()[data.len() % 4];
    let reply = runtime().block_on(engine.handle(caller, data));
    check_reply("rpc_engine", data, &reply);
    check_engine("rpc_engine", &engine);
}

/// A session that records `subscribe` calls, like a streaming transport's.
#[derive(Default)]
struct Recorder(Mutex<Vec<Option<i64>>>);

impl EventSession for Recorder {
    fn subscribe(&self, since: Option<i64>) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(since);
    }
}

/// One WebSocket text message, as the connection handles it: a JSON-RPC response (an object
/// with an `id`, a `result` or an `error`, no `method`) goes to the approval bridge, its result
/// decoded exactly; anything else through `RpcEngine::handle_in` with the connection's session.
/// The frontend (attached to the bridge) may answer approvals when the input's length is even.
pub fn ws_message(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let engine = current_engine();
    let can_answer = data.len().is_multiple_of(2);
    let caller = if can_answer { callers()[2].clone() } else { callers()[3].clone() };
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let conn = engine.bridge().attach(&caller.name, can_answer, tx);
    let session = std::sync::Arc::new(Recorder::default());
    let doc = serde_json::from_str::<Value>(text).ok();
    let response = doc.as_ref().and_then(Value::as_object).filter(|o| !o.contains_key("method") && (o.contains_key("result") || o.contains_key("error"))).and_then(|o| o.get("id")?.as_str().map(|id| (id.to_owned(), o.get("result").cloned())));
    match response {
        Some((id, result)) => {
            // An error answer, a message with a key given twice anywhere (the bridge's screen), or
            // a result that is no exact `ApprovalReply`, is a denial.
            let exact = openagents_server::decode::exact_document(data).is_ok();
            let reply = result.filter(|_| exact).and_then(|r| serde_json::value::to_raw_value(&r).ok()).and_then(|r| openagents_server::decode::approval_reply(&r));
            if let Some(r) = &reply {
                let j = serde_json::to_vec(r).expect("encodes");
                assert!(matches!(validate_document("ApprovalReply", &j), Some(Ok(()))), "approval_reply accepted an invalid ApprovalReply {}", show(&j));
            }
            let reply = reply.unwrap_or(ApprovalReply { approved: false, answer: None });
            match engine.bridge().answer(conn, &id, reply) {
                Ok(_) => assert!(can_answer, "a frontend without the approvals grant answered: {}", show(data)),
                Err(e) => assert!(!can_answer && e.code == ErrorCode::Forbidden, "answer refused: {e:?}"),
            }
        }
        None => {
            let reply = runtime().block_on(engine.handle_in(&caller, data, Some(session.clone())));
            check_reply("ws_message", data, &reply);
            let subs = session.0.lock().unwrap_or_else(|p| p.into_inner()).len();
            let doc = serde_json::from_slice::<Value>(data).ok();
            let names_subscribe = doc.as_ref().and_then(|v| v.get("method").cloned()) == Some(Value::from("subscribe"));
            // A notification (an object without `id`) gets no reply, so its outcome is not seen:
            // it may have subscribed only if it named `subscribe`.
            let notification = doc.as_ref().and_then(Value::as_object).is_some_and(|o| !o.contains_key("id"));
            if notification {
                assert!(subs <= usize::from(names_subscribe), "only a `subscribe` subscribes: {}", show(data));
            } else {
                let ok_subscribe = reply.outcome.is_ok() && names_subscribe;
                assert_eq!(subs, usize::from(ok_subscribe), "subscribe calls the session exactly when it succeeds: {}", show(data));
            }
        }
    }
    engine.bridge().detach(conn);
    while rx.try_recv().is_ok() {}
    check_engine("ws_message", &engine);
}

// ---------------------------------------------------------------------------------------------
// runner_events
// ---------------------------------------------------------------------------------------------

/// Arbitrary bytes as a runner's stdout, through the host's bounded framing (`MAX_FRAME`) and its
/// contract checks, line by line as the host reads them.
pub fn runner_events(data: &[u8]) {
    let mut r = std::io::BufReader::with_capacity(64 * 1024, data);
    let mut checker = EventChecker::new();
    let mut delivered: Vec<Event> = Vec::new();
    let mut consumed = 0usize;
    let outcome: Result<String, TurnError> = loop {
        let line = match read_line(&mut r, MAX_FRAME) {
            Ok(Some(l)) => l,
            Ok(None) => break checker.finish(),
            Err(FrameError::TooLong { .. }) => break Err(TurnError::FrameTooLarge),
            Err(FrameError::Io(e)) => panic!("reading a slice failed: {e}"),
        };
        consumed += line.len() + 1;
        match checker.line(&line) {
            Ok(ev) => {
                assert!(!delivered.last().is_some_and(Event::terminal), "an event was delivered after the terminal one: {}", show(data));
                // A delivered event is valid, and survives a round trip.
                let again = serde_json::to_vec(&ev).expect("an event encodes");
                match openagents_protocol::rt::parse_validated::<Event>(&again) {
                    Ok(back) => assert_eq!(back, ev, "the event does not round-trip"),
                    Err(e) => panic!("a delivered event does not validate after encoding: {e} ({})", show(&again)),
                }
                delivered.push(ev);
            }
            Err(e) => break Err(e),
        }
    };
    assert!(consumed <= MAX_OUTPUT + MAX_FRAME + 1, "read {consumed} bytes");
    assert!(delivered.iter().filter(|e| e.terminal()).count() <= 1, "two terminal events were delivered: {}", show(data));
    match (&outcome, delivered.last()) {
        (Ok(result), Some(Event::Completed { result: r })) => assert_eq!(result, r),
        (Ok(_), last) => panic!("completed without a `completed` event (last: {last:?}): {}", show(data)),
        (Err(TurnError::Failed(m)), Some(Event::Failed { message })) => assert_eq!(m, message),
        (Err(TurnError::Failed(_)), last) => panic!("failed without a `failed` event (last: {last:?})"),
        (Err(TurnError::NoTerminal(_)), last) => assert!(!last.is_some_and(Event::terminal), "no terminal reported after {last:?}"),
        (Err(e), _) => {
            let code = e.code();
            assert!(matches!(code, ErrorCode::RunnerFailed | ErrorCode::FrameTooLarge | ErrorCode::OutputTooLarge), "unexpected code {code:?} for {e}");
            let typed = e.to_runtime_error();
            let j = serde_json::to_vec(&typed).expect("encodes");
            assert!(matches!(validate_document("RuntimeSubmitError", &j), Some(Ok(()))), "the typed error is not valid: {}", show(&j));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// sse_resume
// ---------------------------------------------------------------------------------------------

/// The SSE resume point: input `[capacity, published, burst1, burst2, k, header bytes…, 0xFF,
/// query…]`. `published` events go into a hub holding `capacity`; a subscriber resumes from
/// what `resume_point` makes of the `Last-Event-ID` header and the query string; `burst1` more
/// events are published, the subscriber takes `k` events, `burst2` more are published, and it
/// takes the rest. It must see every event after its resume point exactly once, in order, with
/// an explicit `gap` or `lagged` for any it cannot have, each notice carrying the sequence number
/// of the newest event before the ones it missed.
pub fn sse_resume(data: &[u8]) {
    let [cap, before, burst1, burst2, k, rest @ ..] = data else { return };
    let capacity = 1 + usize::from(*cap % 8);
    let (before, burst1, burst2, k) = (i64::from(*before % 24), i64::from(*burst1 % 24), i64::from(*burst2 % 24), usize::from(*k % 32));
    let (header, query) = match rest.iter().position(|&b| b == 0xFF) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let header = (!header.is_empty()).then(|| axum_header(header)).flatten();
    let query = query.and_then(|q| std::str::from_utf8(q).ok());
    let since = match openagents_server::http::resume_point(header.as_ref(), query) {
        Ok(since) => since,
        // Refused with a 400: only a value that is not a sequence number may be.
        Err(message) => {
            let given = header.as_ref().map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned()).or_else(|| query.and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("since=")).map(str::to_owned)));
            let given = given.unwrap_or_default();
            assert!(given.trim().parse::<i64>().map_or(true, |n| n < 0), "a sequence number {given:?} was refused: {message}");
            return;
        }
    };

    let hub = EventHub::with_capacity(capacity);
    let publish = |n: i64, what: &str| {
        for i in 0..n {
            hub.publish(RuntimeEvent::Text { text: format!("{what} {i}") });
        }
    };
    publish(before, "before");
    let mut sub = hub.subscribe(since);
    publish(burst1, "burst1");
    let mut got: Vec<ServerEvent> = Vec::new();
    while got.len() < k {
        match sub.next().now_or_never() {
            Some(Some(ev)) => got.push(ev),
            _ => break,
        }
    }
    publish(burst2, "burst2");
    while let Some(Some(ev)) = sub.next().now_or_never() {
        got.push(ev);
        assert!(got.len() <= 200, "the subscription does not end");
    }
    let last = before + burst1 + burst2;
    // Where the stream must start: after the resume point, or at the first new event; a point
    // ahead of the newest event (a client of an earlier run) restarts from the oldest held.
    let oldest_held = (before - capacity as i64 + 1).max(1);
    let ahead = since.is_some_and(|s| s > before);
    let start = match since {
        Some(s) if s > before => oldest_held - 1,
        Some(s) => s,
        None => before,
    };
    let mut expect_next = start + 1;
    for (i, ev) in got.iter().enumerate() {
        match &ev.event {
            RuntimeEvent::Gap { since: s, resumed_at } => {
                assert_eq!(i, 0, "a gap comes first: {got:?}");
                if ahead {
                    assert_eq!(Some(*s), since, "gap.since is the point asked for");
                    assert_eq!(*resumed_at, start, "and the stream restarts from the oldest event held: {got:?}");
                } else {
                    assert_eq!(*s, start, "gap.since");
                    assert!(*resumed_at >= start, "gap goes forward: {got:?}");
                }
                expect_next = resumed_at + 1;
            }
            RuntimeEvent::Lagged { missed } => {
                assert!(*missed >= 1, "lagged by nothing");
                assert_eq!(ev.seq, expect_next - 1, "a lagged notice carries the newest sequence number before what it missed (since {since:?}, capacity {capacity}): {got:?}");
                expect_next += missed;
            }
            _ => {
                assert_eq!(ev.seq, expect_next, "since {since:?} (capacity {capacity}, {before} before, bursts {burst1}/{burst2}, k {k}): {got:?}");
                expect_next += 1;
            }
        }
    }
    assert_eq!(expect_next, last + 1, "the subscriber did not reach the newest event (since {since:?}, capacity {capacity}, {before} before, bursts {burst1}/{burst2}, k {k}): {got:?}");
    drop(sub);
    assert_eq!(hub.subscribers(), 0, "a dropped subscription is still counted");
}

fn axum_header(bytes: &[u8]) -> Option<http::HeaderValue> {
    http::HeaderValue::from_bytes(bytes).ok()
}
