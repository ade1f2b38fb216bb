//! The core's options and the rules that came with them, in-process (and on a line connection or
//! `POST /rpc` where the transport matters): `core_errors` and `error_data`, `jsonrpc_optional`,
//! `Context::with_data`, `Limits::max_id_chars`, ids the parser cannot read, a handler's own
//! parse error, what `params` reaches a handler, nesting depth, the reply budget, and response
//! objects where the caller cannot answer the server.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Lines, TestHandler, code};
use openagents_rpc::{BoxFuture, Context, Handler, Identity, Limits, MAX_DEPTH, Peer, REPLY_FLOOR, RpcError, RpcServer, codes};
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// What a caller attaches to its context ([`Context::with_data`]).
#[derive(Debug)]
struct Caller {
    name: &'static str,
    permissions: Vec<&'static str>,
}

/// How many violations `violations` answers, and the message it gives them.
const VIOLATIONS: usize = 500;

fn violations_message() -> String {
    format!("the document breaks its schema in {VIOLATIONS} places: {}", "m".repeat(1400))
}

/// One violation of about 100 bytes, numbered.
fn violation(i: usize) -> Value {
    json!({"index": i, "pointer": format!("/params/items/{i:03}/value"), "message": format!("must be a string, not a number ({})", "x".repeat(7))})
}

/// Methods: `echo` (its params, or null), `params` (what it got: `{"some": text}` or
/// `{"none": true}`), `decode` (its params decoded and sent back), `data` (what the context
/// carries), `parse_fail` (its own -32700), `violations` (an error with [`VIOLATIONS`]
/// violations in `data`), `fail` (-32050 with data); else -32601. Counts its calls.
#[derive(Default)]
struct Probe {
    calls: AtomicUsize,
}

fn raw(v: &Value) -> Box<RawValue> {
    RawValue::from_string(v.to_string()).expect("JSON")
}

impl Handler for Probe {
    fn call<'a>(&'a self, cx: &'a Context, method: &'a str, params: Option<&'a RawValue>) -> BoxFuture<'a, Result<Box<RawValue>, RpcError>> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            match method {
                "echo" => Ok(params.map(ToOwned::to_owned).unwrap_or_else(openagents_rpc::null)),
                "params" => Ok(raw(&match params {
                    Some(p) => json!({"some": p.get()}),
                    None => json!({"none": true}),
                })),
                "decode" => {
                    let v: Value = serde_json::from_str(params.map_or("null", RawValue::get)).map_err(RpcError::invalid_params)?;
                    Ok(raw(&v))
                }
                "data" => Ok(raw(&json!({
                    "caller": cx.data::<Caller>().map(|c| json!({"name": c.name, "permissions": c.permissions})),
                    "string": cx.data::<String>().is_some(),
                    "arc": cx.data::<Arc<Caller>>().is_some(),
                }))),
                "parse_fail" => Err(RpcError::parse_error("the handler's own decoder gave up")),
                "violations" => Err(RpcError::new(-32050, violations_message()).with_data(json!({"violations": (0..VIOLATIONS).map(violation).collect::<Vec<_>>()}))),
                "fail" => Err(RpcError::new(-32050, "it failed").with_data(json!({"why": "asked to"}))),
                other => Err(RpcError::method_not_found(other)),
            }
        })
    }
}

fn cx() -> Context {
    Context::detached(Identity::new("test"))
}

/// The reply to `input` as text (`None`: no reply).
async fn ask_text(server: &RpcServer, input: &[u8]) -> Option<String> {
    server.handle_message(&cx(), input).await.map(|r| String::from_utf8(r).expect("a reply is UTF-8"))
}

/// The reply to `input`, which must get one, as JSON.
async fn ask(server: &RpcServer, input: &[u8]) -> Value {
    let text = ask_text(server, input).await.unwrap_or_else(|| panic!("a reply to {}", String::from_utf8_lossy(input)));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("the reply is JSON ({e}): {text}"))
}

/// The `(id, error.code)` of an error reply.
fn id_and_code(reply: &Value) -> (Value, i64) {
    (reply["id"].clone(), code(reply))
}

/// `[[...[1]...]]`: `depth` arrays around `1`.
fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

// 1. core_errors and error_data.

/// A protocol's fixed form: a title per code, the core's message in `data.detail`.
fn shape(e: RpcError) -> RpcError {
    let title = match e.code {
        codes::PARSE_ERROR => "Parse error",
        codes::INVALID_REQUEST => "Invalid Request",
        codes::INVALID_PARAMS => "Invalid params",
        _ => "Server error",
    };
    let detail = e.message.clone();
    RpcError::new(e.code, title).with_data(json!({"detail": detail, "shaped": true}))
}

/// Asserts `reply` is the shaped form of a core error with `code` and `id`, the core's message
/// (starting with `detail_prefix`) kept in `data.detail`.
#[track_caller]
fn assert_shaped(reply: &Value, id: Value, code: i64, title: &str, detail_prefix: &str) {
    assert_eq!((reply["jsonrpc"].clone(), reply["id"].clone(), reply["error"]["code"].clone()), (json!("2.0"), id, json!(code)), "{reply}");
    assert_eq!(reply["error"]["message"], json!(title), "{reply}");
    assert_eq!(reply["error"]["data"]["shaped"], json!(true), "{reply}");
    let detail = reply["error"]["data"]["detail"].as_str().unwrap_or_else(|| panic!("data.detail: {reply}"));
    assert!(detail.starts_with(detail_prefix), "data.detail starts with {detail_prefix:?}: {reply}");
    assert_eq!(reply["error"].as_object().map(|o| o.len()), Some(3), "code, message and data only: {reply}");
}

#[tokio::test]
async fn core_errors_shapes_every_error_the_core_makes() {
    let server = RpcServer::new(TestHandler::new()).limits(Limits { max_batch: 2, ..Limits::default() }).core_errors(shape);
    assert_shaped(&ask(&server, b"{").await, Value::Null, -32700, "Parse error", "Parse error: the message is not JSON");
    assert_shaped(&ask(&server, b"\xff").await, Value::Null, -32700, "Parse error", "Parse error: the message is not JSON: invalid UTF-8");
    assert_shaped(&ask(&server, br#"{"jsonrpc":"2.0","id":1}"#).await, json!(1), -32600, "Invalid Request", "Invalid Request: the request has no `method`");
    assert_shaped(&ask(&server, br#"{"jsonrpc":"1.0","id":"v","method":"echo"}"#).await, json!("v"), -32600, "Invalid Request", "Invalid Request: `jsonrpc` must be");
    assert_shaped(&ask(&server, b"7").await, Value::Null, -32600, "Invalid Request", "Invalid Request: a request is a JSON object");
    assert_shaped(&ask(&server, br#"{"jsonrpc":"2.0","id":2,"method":"echo","params":5}"#).await, json!(2), -32602, "Invalid params", "Invalid params: `params` must be");
    // Batches refused whole: empty, and over the limit.
    assert_shaped(&ask(&server, b"[]").await, Value::Null, -32600, "Invalid Request", "Invalid Request: an empty batch");
    let three = br#"[{"jsonrpc":"2.0","id":1,"method":"echo"},{"jsonrpc":"2.0","id":2,"method":"echo"},{"jsonrpc":"2.0","id":3,"method":"echo"}]"#;
    assert_shaped(&ask(&server, three).await, Value::Null, -32600, "Invalid Request", "Invalid Request: a batch holds at most 2 requests");
    // A server that takes no batches.
    let no_batches = RpcServer::new(TestHandler::new()).limits(Limits { max_batch: 0, ..Limits::default() }).core_errors(shape);
    assert_shaped(&ask(&no_batches, br#"[{"jsonrpc":"2.0","id":1,"method":"echo"}]"#).await, Value::Null, -32600, "Invalid Request", "Invalid Request: this server takes no batches");
    // An entry of a batch that is no request object.
    let batch = ask(&server, br#"[1,{"jsonrpc":"2.0","id":"ok","method":"echo"}]"#).await;
    assert_eq!(batch.as_array().map(Vec::len), Some(2), "{batch}");
    assert_shaped(&batch[0], Value::Null, -32600, "Invalid Request", "Invalid Request: a request is a JSON object");
    assert_eq!(batch[1], json!({"jsonrpc": "2.0", "id": "ok", "result": null}));

    // The handler's own errors are sent as it made them.
    assert_eq!(ask(&server, br#"{"jsonrpc":"2.0","id":3,"method":"fail"}"#).await, json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32050, "message": "it failed", "data": {"why": "asked to"}}}));
    let unknown = ask(&server, br#"{"jsonrpc":"2.0","id":4,"method":"nope"}"#).await;
    assert_eq!(id_and_code(&unknown), (json!(4), -32601), "{unknown}");
    assert!(unknown["error"]["message"].as_str().is_some_and(|m| m.starts_with("Method not found: `nope`")), "{unknown}");
    assert!(unknown["error"].get("data").is_none(), "the handler's -32601 has no data: {unknown}");
    // A handler's invalid params (its own -32602) too.
    let bad = ask(&server, br#"{"jsonrpc":"2.0","id":5,"method":"add","params":{"a":"1"}}"#).await;
    assert_eq!(id_and_code(&bad), (json!(5), -32602), "{bad}");
    assert!(bad["error"]["message"].as_str().is_some_and(|m| m.starts_with("Invalid params: ")), "{bad}");
    assert!(bad["error"].get("data").is_none(), "{bad}");
}

#[tokio::test]
async fn core_errors_leaves_a_handlers_own_parse_error_alone() {
    let server = RpcServer::new(Probe::default()).core_errors(shape);
    let reply = ask(&server, br#"{"jsonrpc":"2.0","id":9,"method":"parse_fail"}"#).await;
    assert_eq!(reply, json!({"jsonrpc": "2.0", "id": 9, "error": {"code": -32700, "message": "Parse error: the message is not JSON: the handler's own decoder gave up"}}));
}

#[tokio::test]
async fn error_data_sets_data_on_core_errors_only() {
    let server = RpcServer::new(TestHandler::new()).error_data(|e| (e.code != codes::INVALID_PARAMS).then(|| json!({"kind": e.code})));
    let parse = ask(&server, b"{").await;
    assert_eq!((id_and_code(&parse), parse["error"]["data"].clone()), ((Value::Null, -32700), json!({"kind": -32700})), "{parse}");
    assert!(parse["error"]["message"].as_str().is_some_and(|m| m.starts_with("Parse error: the message is not JSON")), "the message is the core's: {parse}");
    let invalid = ask(&server, br#"{"jsonrpc":"2.0","id":1}"#).await;
    assert_eq!((id_and_code(&invalid), invalid["error"]["data"].clone()), ((json!(1), -32600), json!({"kind": -32600})), "{invalid}");
    assert!(invalid["error"]["message"].as_str().is_some_and(|m| m.starts_with("Invalid Request: ")), "{invalid}");
    // `None`: no data.
    let params = ask(&server, br#"{"jsonrpc":"2.0","id":2,"method":"echo","params":"x"}"#).await;
    assert_eq!(id_and_code(&params), (json!(2), -32602), "{params}");
    assert!(params["error"].get("data").is_none(), "{params}");
    // The handler's errors keep their own data, or none.
    assert_eq!(ask(&server, br#"{"jsonrpc":"2.0","id":3,"method":"fail"}"#).await["error"], json!({"code": -32050, "message": "it failed", "data": {"why": "asked to"}}));
    let unknown = ask(&server, br#"{"jsonrpc":"2.0","id":4,"method":"nope"}"#).await;
    assert!(unknown["error"].get("data").is_none(), "{unknown}");
}

#[tokio::test]
async fn the_later_of_core_errors_and_error_data_wins() {
    let data = |e: &RpcError| Some(json!({"kind": e.code}));
    // core_errors after error_data: only the shape applies.
    let shaped = RpcServer::new(TestHandler::new()).error_data(data).core_errors(shape);
    let reply = ask(&shaped, b"{").await;
    assert_shaped(&reply, Value::Null, -32700, "Parse error", "Parse error: the message is not JSON");
    assert!(reply["error"]["data"].get("kind").is_none(), "error_data was replaced: {reply}");
    // error_data after core_errors: only the data applies.
    let with_data = RpcServer::new(TestHandler::new()).core_errors(shape).error_data(data);
    let reply = ask(&with_data, b"{").await;
    assert_eq!((id_and_code(&reply), reply["error"]["data"].clone()), ((Value::Null, -32700), json!({"kind": -32700})), "{reply}");
    assert!(reply["error"]["message"].as_str().is_some_and(|m| m.starts_with("Parse error: the message is not JSON")), "core_errors was replaced: {reply}");
}

// 2. jsonrpc_optional.

#[tokio::test]
async fn jsonrpc_optional_takes_requests_without_the_member() {
    let server = RpcServer::new(TestHandler::new()).jsonrpc_optional(true);
    assert_eq!(ask_text(&server, br#"{"id":1,"method":"echo","params":[1]}"#).await.as_deref(), Some(r#"{"jsonrpc":"2.0","id":1,"result":[1]}"#));
    assert_eq!(ask_text(&server, br#"{"jsonrpc":"2.0","id":"b","method":"add","params":{"a":1,"b":2}}"#).await.as_deref(), Some(r#"{"jsonrpc":"2.0","id":"b","result":3}"#));
    // A notification without the member runs and gets no reply; in a batch too.
    assert_eq!(ask_text(&server, br#"{"method":"echo"}"#).await, None);
    assert_eq!(ask_text(&server, br#"[{"method":"echo"},{"id":2,"method":"whoami"}]"#).await.as_deref(), Some(r#"[{"jsonrpc":"2.0","id":2,"result":"test"}]"#));
    // A wrong value is still refused, null and a number included.
    for version in [r#""1.0""#, "null", "2", r#""2""#, r#""2.0 ""#] {
        let reply = ask(&server, format!(r#"{{"jsonrpc":{version},"id":3,"method":"echo"}}"#).as_bytes()).await;
        assert_eq!(id_and_code(&reply), (json!(3), -32600), "jsonrpc {version}: {reply}");
    }
    // Off (the default, and set off): the member is required.
    for server in [RpcServer::new(TestHandler::new()), RpcServer::new(TestHandler::new()).jsonrpc_optional(true).jsonrpc_optional(false)] {
        let reply = ask(&server, br#"{"id":1,"method":"echo"}"#).await;
        assert_eq!(id_and_code(&reply), (json!(1), -32600), "{reply}");
        assert_eq!(reply["jsonrpc"], json!("2.0"), "{reply}");
    }
}

// 3. Context::with_data.

#[tokio::test]
async fn a_handler_reads_the_data_its_caller_attached() {
    let server = RpcServer::new(Probe::default());
    let caller: Arc<dyn std::any::Any + Send + Sync> = Arc::new(Caller { name: "alice", permissions: vec!["read", "write"] });
    let with = Context::detached(Identity::new("test")).with_data(caller);
    assert_eq!(with.data::<Caller>().map(|c| c.name), Some("alice"));
    assert!(with.data::<String>().is_none());
    let reply = |cx: Context, input: &'static [u8]| {
        let server = server.clone();
        async move { serde_json::from_slice::<Value>(&server.handle_message(&cx, input).await.expect("a reply")).expect("JSON") }
    };
    let request = br#"{"jsonrpc":"2.0","id":1,"method":"data"}"#;
    let expected = json!({"jsonrpc": "2.0", "id": 1, "result": {"caller": {"name": "alice", "permissions": ["read", "write"]}, "string": false, "arc": false}});
    assert_eq!(reply(with.clone(), request).await, expected);
    // Each entry of a batch sees it too.
    let batch = reply(with.clone(), br#"[{"jsonrpc":"2.0","id":1,"method":"data"},{"jsonrpc":"2.0","id":1,"method":"data"}]"#).await;
    assert_eq!(batch, json!([expected.clone(), expected]));
    // A clone of the context carries it; a context without data has none.
    assert_eq!(reply(with.clone(), request).await["result"]["caller"]["name"], json!("alice"));
    assert_eq!(reply(cx(), request).await["result"], json!({"caller": null, "string": false, "arc": false}));
    // A later with_data replaces the value.
    let replaced = with.with_data(Arc::new(String::from("just a string")));
    assert_eq!(reply(replaced, request).await["result"], json!({"caller": null, "string": true, "arc": false}));
}

// 4. Limits::max_id_chars.

#[tokio::test]
async fn ids_are_bounded_by_max_id_chars() {
    let server = RpcServer::new(TestHandler::new()).limits(Limits { max_id_chars: 8, ..Limits::default() });
    let echoed = [
        r#""abcdefgh""#.to_owned(),
        format!("\"{}\"", "\\u00e9".repeat(8)),
        format!("\"{}\"", "é".repeat(8)),
        format!("\"abc{}\"", "\\u00e9".repeat(5)),
        // A surrogate pair is one character.
        format!("\"{}\"", "\\ud83d\\ude00".repeat(8)),
        r#""a\"b\\cdef""#.to_owned(),
        r#""""#.to_owned(),
        "12345678".to_owned(),
        "-1234567".to_owned(),
        "1.234567".to_owned(),
        "1.50e+10".to_owned(),
        "0".to_owned(),
        "null".to_owned(),
    ];
    for id in &echoed {
        let got = ask_text(&server, format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"echo"}}"#).as_bytes()).await;
        assert_eq!(got, Some(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":null}}"#)), "id {id}");
        // An error reply echoes it too.
        let got = ask_text(&server, format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"nope"}}"#).as_bytes()).await.expect("a reply");
        assert!(got.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"#)), "id {id}: {got}");
    }
    let refused = [
        r#""abcdefghi""#.to_owned(),
        format!("\"{}\"", "\\u00e9".repeat(9)),
        format!("\"{}\"", "é".repeat(9)),
        format!("\"{}\"", "\\ud83d\\ude00".repeat(9)),
        r#""a\"b\\cdefg""#.to_owned(),
        "123456789".to_owned(),
        "-12345678".to_owned(),
        "1.2345678".to_owned(),
        "1.500e+10".to_owned(),
    ];
    for id in &refused {
        for method in ["echo", "nope"] {
            let reply = ask(&server, format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#).as_bytes()).await;
            assert_eq!(id_and_code(&reply), (Value::Null, -32600), "id {id}: {reply}");
            assert!(reply["error"]["message"].as_str().is_some_and(|m| m.contains("longer than 8 characters")), "id {id}: {reply}");
        }
    }
    // In a batch, the entry with the long id is refused alone.
    let batch = ask(&server, br#"[{"jsonrpc":"2.0","id":"abcdefghi","method":"echo"},{"jsonrpc":"2.0","id":"abcdefgh","method":"echo"}]"#).await;
    assert_eq!(id_and_code(&batch[0]), (Value::Null, -32600), "{batch}");
    assert_eq!(batch[1], json!({"jsonrpc": "2.0", "id": "abcdefgh", "result": null}));
}

// 5. Ids the parser cannot read.

#[tokio::test]
async fn an_id_the_parser_cannot_read_is_a_parse_error_with_a_null_id() {
    let server = RpcServer::new(Probe::default());
    for id in ["1e400", "-1e400", r#""\ud800""#, r#""\udc00""#, r#""ab\ud800cd""#] {
        for method in ["echo", "nope"] {
            let reply = ask(&server, format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#).as_bytes()).await;
            assert_eq!(id_and_code(&reply), (Value::Null, -32700), "id {id}: {reply}");
        }
        // The server keeps answering.
        assert_eq!(ask_text(&server, br#"{"jsonrpc":"2.0","id":1,"method":"echo","params":[true]}"#).await.as_deref(), Some(r#"{"jsonrpc":"2.0","id":1,"result":[true]}"#));
    }
    // A surrogate pair and a large but finite number are ids like any.
    for id in [r#""\ud83d\ude00""#, "1e300"] {
        let got = ask_text(&server, format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"echo"}}"#).as_bytes()).await;
        assert_eq!(got, Some(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":null}}"#)));
    }
    // In a batch, only that entry.
    let batch = ask(&server, br#"[{"jsonrpc":"2.0","id":1e400,"method":"echo"},{"jsonrpc":"2.0","id":2,"method":"echo"}]"#).await;
    assert_eq!(id_and_code(&batch[0]), (Value::Null, -32700), "{batch}");
    assert_eq!(batch[1], json!({"jsonrpc": "2.0", "id": 2, "result": null}));
}

#[tokio::test]
async fn a_line_connection_goes_on_after_an_id_it_cannot_read() {
    let mut c = Lines::open(RpcServer::new(Probe::default()));
    c.send_raw(br#"{"jsonrpc":"2.0","id":1e400,"method":"echo"}"#).await;
    let reply = c.next().await;
    assert_eq!(id_and_code(&reply), (Value::Null, -32700), "{reply}");
    c.send_raw(br#"{"jsonrpc":"2.0","id":"\ud800","method":"echo"}"#).await;
    let reply = c.next().await;
    assert_eq!(id_and_code(&reply), (Value::Null, -32700), "{reply}");
    c.send_raw(br#"{"jsonrpc":"2.0","id":2,"method":"echo","params":{"still":"here"}}"#).await;
    assert_eq!(c.next().await, json!({"jsonrpc": "2.0", "id": 2, "result": {"still": "here"}}));
    c.close().await;
}

// 6. A handler's own -32700: with the request's id.

#[tokio::test]
async fn a_handlers_parse_error_is_answered_with_the_requests_id() {
    // The request was read: its caller must be able to tell which call failed.
    let server = RpcServer::new(Probe::default());
    for id in ["1", r#""abc""#, "null"] {
        let got = ask_text(&server, format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"parse_fail","params":{{"x":1}}}}"#).as_bytes()).await;
        let expected = format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32700,"message":"Parse error: the message is not JSON: the handler's own decoder gave up"}}}}"#);
        assert_eq!(got.as_deref(), Some(expected.as_str()), "id {id}");
    }
    // As a notification: no reply.
    assert_eq!(ask_text(&server, br#"{"jsonrpc":"2.0","method":"parse_fail"}"#).await, None);
    // In a batch: that entry's id only.
    let batch = ask(&server, br#"[{"jsonrpc":"2.0","id":1,"method":"parse_fail"},{"jsonrpc":"2.0","id":2,"method":"fail"}]"#).await;
    assert_eq!((id_and_code(&batch[0]), id_and_code(&batch[1])), ((json!(1), -32700), (json!(2), -32050)), "{batch}");
}

// 7. What `params` reaches the handler.

#[tokio::test]
async fn params_null_reaches_the_handler_and_scalars_are_refused() {
    let probe = Arc::new(Probe::default());
    let server = RpcServer::new(Arc::clone(&probe));
    let result = |params: &'static str| {
        let server = server.clone();
        async move {
            let input = if params.is_empty() { r#"{"jsonrpc":"2.0","id":1,"method":"params"}"#.to_owned() } else { format!(r#"{{"jsonrpc":"2.0","id":1,"method":"params","params":{params}}}"#) };
            ask(&server, input.as_bytes()).await
        }
    };
    assert_eq!(result("null").await, json!({"jsonrpc": "2.0", "id": 1, "result": {"some": "null"}}));
    assert_eq!(result(" null ").await["result"], json!({"some": "null"}));
    assert_eq!(result("[]").await["result"], json!({"none": true}));
    assert_eq!(result("[ \n ]").await["result"], json!({"none": true}));
    assert_eq!(result("").await["result"], json!({"none": true}));
    assert_eq!(result("{}").await["result"], json!({"some": "{}"}));
    assert_eq!(result(r#"[null]"#).await["result"], json!({"some": "[null]"}));
    assert_eq!(result(r#"{"a":[1, 2]}"#).await["result"], json!({"some": r#"{"a":[1, 2]}"#}));
    let before = probe.calls.load(Ordering::SeqCst);
    for scalar in ["5", r#""x""#, "true", "false", "-1.5", r#""""#] {
        let reply = result(scalar).await;
        assert_eq!(id_and_code(&reply), (json!(1), -32602), "params {scalar}: {reply}");
        assert!(reply["error"]["message"].as_str().is_some_and(|m| m.contains("`params` must be an object, an array or null")), "{reply}");
    }
    assert_eq!(probe.calls.load(Ordering::SeqCst), before, "the core refused them before the handler");
}

// 8. Nesting.

#[tokio::test]
async fn nesting_is_bounded_at_max_depth() {
    assert_eq!(MAX_DEPTH, 127);
    let server = RpcServer::new(Probe::default());
    // The request object is one level; its params the rest.
    let request = |params: &str| format!(r#"{{"jsonrpc":"2.0","id":1,"method":"decode","params":{params}}}"#);
    let at = nested(MAX_DEPTH - 1);
    assert_eq!(ask_text(&server, request(&at).as_bytes()).await, Some(format!(r#"{{"jsonrpc":"2.0","id":1,"result":{at}}}"#)));
    let reply = ask(&server, request(&nested(MAX_DEPTH)).as_bytes()).await;
    assert_eq!(id_and_code(&reply), (Value::Null, -32700), "{reply}");
    assert!(reply["error"]["message"].as_str().is_some_and(|m| m.contains("nested more than 127")), "{reply}");
    // Objects count as arrays do.
    let objects = |depth: usize| format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
    assert_eq!(ask(&server, request(&objects(MAX_DEPTH - 1)).as_bytes()).await["id"], json!(1));
    assert_eq!(id_and_code(&ask(&server, request(&objects(MAX_DEPTH)).as_bytes()).await), (Value::Null, -32700));
    // Deep but not as deep, twice: only the deepest path counts.
    let twice = format!("[{},{}]", nested(MAX_DEPTH - 2), nested(MAX_DEPTH - 2));
    assert_eq!(ask_text(&server, request(&twice).as_bytes()).await, Some(format!(r#"{{"jsonrpc":"2.0","id":1,"result":{twice}}}"#)));
    // A batch is one level more: refused whole.
    let batch = |depth: usize| format!("[{},{}]", request(&nested(depth)), r#"{"jsonrpc":"2.0","id":2,"method":"echo"}"#);
    let reply = ask(&server, batch(MAX_DEPTH - 2).as_bytes()).await;
    assert_eq!((reply[0]["id"].clone(), reply[1]["id"].clone(), reply[0]["result"].clone()), (json!(1), json!(2), serde_json::from_str::<Value>(&nested(MAX_DEPTH - 2)).expect("JSON")), "the batch at the limit is served");
    let reply = ask(&server, batch(MAX_DEPTH - 1).as_bytes()).await;
    assert_eq!(id_and_code(&reply), (Value::Null, -32700), "{reply}");
    // Brackets in strings do not count, whatever the escapes around them.
    let brackets = "[".repeat(1000);
    let in_string = request(&format!(r#"["{brackets}", "{}", "\"{brackets}", "\\"]"#, "{".repeat(1000)));
    let reply = ask(&server, in_string.as_bytes()).await;
    assert_eq!(reply["result"][0].as_str().map(str::len), Some(1000), "{}", &reply.to_string()[..200.min(reply.to_string().len())]);
    assert_eq!(reply["result"][3], json!("\\"));
    // An escaped backslash ends its string: the brackets after it are nesting.
    let after_backslash = |depth: usize| request(&format!(r#"["\\", {}]"#, nested(depth)));
    assert_eq!(ask(&server, after_backslash(MAX_DEPTH - 2).as_bytes()).await["id"], json!(1));
    assert_eq!(id_and_code(&ask(&server, after_backslash(MAX_DEPTH - 1).as_bytes()).await), (Value::Null, -32700));
    // And an escaped quote does not end one: `"\"[[[["` is a string.
    let after_quote = request(&format!(r#"["\"{}", 1]"#, "[".repeat(MAX_DEPTH * 2)));
    assert_eq!(ask(&server, after_quote.as_bytes()).await["result"][1], json!(1));
}

// 9. The reply budget.

/// The violations and their count left out, of an error reply to `violations`; checks that the
/// violations kept are the first ones, and that none was lost.
#[track_caller]
fn kept_violations(reply: &Value) -> (usize, u64) {
    assert_eq!(code(reply), -32050, "{reply}");
    let kept = reply["error"]["data"]["violations"].as_array().unwrap_or_else(|| panic!("data.violations: {reply}"));
    for (i, v) in kept.iter().enumerate() {
        assert_eq!(v, &violation(i), "the violations kept are the first ones");
    }
    let omitted = reply["error"]["data"].get("violations_omitted").map_or(0, |n| n.as_u64().expect("a count"));
    assert_eq!(kept.len() as u64 + omitted, VIOLATIONS as u64, "each violation left out is counted: {}", reply["error"]["data"]);
    (kept.len(), omitted)
}

#[tokio::test]
async fn an_error_reply_to_a_small_request_fits_the_floor() {
    assert_eq!(REPLY_FLOOR, 4096);
    let one = violation(0).to_string().len();
    assert!((90..=110).contains(&one), "a violation takes about 100 bytes: {one}");
    let server = RpcServer::new(Probe::default());
    let request = br#"{"jsonrpc":"2.0","id":"small","method":"violations"}"#;
    let text = ask_text(&server, request).await.expect("a reply");
    assert!(text.len() <= REPLY_FLOOR, "{} bytes", text.len());
    let reply: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(reply["id"], json!("small"));
    let (kept, omitted) = kept_violations(&reply);
    assert!(kept > 0 && kept < VIOLATIONS && omitted > 0, "cut: {kept} kept");
    // The list went first: the message is whole.
    assert_eq!(reply["error"]["message"], json!(violations_message()));
    // The cut keeps as much as fits: one more violation would not have.
    assert!(text.len() + one + 1 > REPLY_FLOOR - 64, "only what had to go went: {} bytes, {kept} kept", text.len());
}

#[tokio::test]
async fn an_error_reply_to_a_big_request_takes_at_most_twice_it() {
    let server = RpcServer::new(Probe::default());
    let request = |pad: usize| format!(r#"{{"jsonrpc":"2.0","id":7,"method":"violations","params":{{"pad":"{}"}}}}"#, "p".repeat(pad));
    // The whole error (about 52 KB) within twice a 40 KB request: sent whole.
    let big = request(40_000);
    let text = ask_text(&server, big.as_bytes()).await.expect("a reply");
    assert!(text.len() > REPLY_FLOOR && text.len() <= 2 * big.len(), "{} bytes for {}", text.len(), big.len());
    let reply: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(reply["id"], json!(7));
    assert_eq!(kept_violations(&reply), (VIOLATIONS, 0));
    assert!(reply["error"]["data"].get("violations_omitted").is_none(), "nothing omitted: no count");
    // A 10 KB request: cut to twice it, larger than the floor.
    let medium = request(10_000);
    let text = ask_text(&server, medium.as_bytes()).await.expect("a reply");
    assert!(text.len() > REPLY_FLOOR && text.len() <= 2 * medium.len(), "{} bytes for {}", text.len(), medium.len());
    let reply: Value = serde_json::from_str(&text).expect("JSON");
    let (kept, _) = kept_violations(&reply);
    assert!(kept > 100 && kept < VIOLATIONS, "{kept} kept");
    assert_eq!(reply["error"]["message"], json!(violations_message()));
}

#[tokio::test]
async fn a_result_is_never_cut() {
    let server = RpcServer::new(Probe::default());
    let params = format!("[{}]", (0..VIOLATIONS).map(|i| violation(i).to_string()).collect::<Vec<_>>().join(","));
    let request = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"echo","params":{params}}}"#);
    assert_eq!(ask_text(&server, request.as_bytes()).await, Some(format!(r#"{{"jsonrpc":"2.0","id":1,"result":{params}}}"#)));
}

/// Checks each entry of the batch reply `text` to `entries` (its request texts, ids `0..n`)
/// against its budget, `max(2 × entry, REPLY_FLOOR / n)`, and the whole against
/// `max(2 × batch, REPLY_FLOOR)` and the commas and brackets between entries.
#[track_caller]
fn check_batch_budget(entries: &[String], batch: &str, text: &str) {
    let n = entries.len();
    let replies: Vec<&RawValue> = serde_json::from_str(text).unwrap_or_else(|e| panic!("a batch reply ({e}): {}", &text[..text.len().min(300)]));
    assert_eq!(replies.len(), n);
    let mut over = Vec::new();
    for reply in replies {
        let v: Value = serde_json::from_str(reply.get()).expect("JSON");
        let id = usize::try_from(v["id"].as_u64().unwrap_or_else(|| panic!("an id: {v}"))).expect("an index");
        kept_violations(&v);
        let budget = (2 * entries[id].len()).max(REPLY_FLOOR / n);
        if reply.get().len() > budget {
            over.push(format!("entry {id}: {} bytes > {budget}", reply.get().len()));
        }
    }
    let whole = (2 * batch.len()).max(REPLY_FLOOR) + n + 1;
    assert!(over.is_empty() && text.len() <= whole, "each entry within its budget, the batch reply ({} bytes) within {whole}: {over:?}", text.len());
}

#[tokio::test]
async fn batch_entries_share_the_reply_floor() {
    let server = RpcServer::new(Probe::default());
    // Entries of about 160 bytes: each budget is twice its entry (more than 4096 / 64).
    let entries: Vec<String> = (0..64).map(|i| format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"violations","params":{{"pad":"{}"}}}}"#, "p".repeat(100))).collect();
    let batch = format!("[{}]", entries.join(","));
    let text = ask_text(&server, batch.as_bytes()).await.expect("a reply");
    check_batch_budget(&entries, &batch, &text);
    // Four entries: each gets a quarter of the floor.
    let entries: Vec<String> = (0..4).map(|i| format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"violations"}}"#)).collect();
    let batch = format!("[{}]", entries.join(","));
    let text = ask_text(&server, batch.as_bytes()).await.expect("a reply");
    check_batch_budget(&entries, &batch, &text);
    assert!(text.len() <= REPLY_FLOOR + 5, "{} bytes", text.len());
}

/// The least error reply: its envelope, its id, its code and a message cut to 64 bytes, with a
/// `data` whose lists are emptied and counted (about 130 bytes and the id's). What an entry of a
/// batch of tiny requests keeps even where its share of the floor is less.
const LEAST_ERROR: usize = 200;

/// 64 small requests (about 48 bytes each): each entry's share of the floor (4096 / 64) is less
/// than the least an error says, so each is cut to that least — every violation counted out, its
/// message at 64 bytes — and no further; the batch's reply stays within max(2 × batch,
/// REPLY_FLOOR) plus that least per entry.
#[tokio::test]
async fn a_batch_of_small_requests_shares_the_floor() {
    let server = RpcServer::new(Probe::default());
    let entries: Vec<String> = (0..64).map(|i| format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"violations"}}"#)).collect();
    let batch = format!("[{}]", entries.join(","));
    let text = ask_text(&server, batch.as_bytes()).await.expect("a reply");
    let replies: Vec<&RawValue> = serde_json::from_str(&text).expect("JSON");
    for reply in &replies {
        let v: Value = serde_json::from_str(reply.get()).expect("JSON");
        assert_eq!(kept_violations(&v), (0, VIOLATIONS as u64), "{v}");
        assert!(v["error"]["message"].as_str().is_some_and(|m| m.len() <= 64), "{v}");
        assert!(reply.get().len() <= LEAST_ERROR, "cut to the least an error says: {} bytes", reply.get().len());
    }
    let whole = (2 * batch.len()).max(REPLY_FLOOR) + entries.len() * LEAST_ERROR;
    assert!(text.len() <= whole, "the batch reply ({} bytes) within {whole}", text.len());
}

/// The core's own refusals in a batch of tiny entries (`[1,1,...]`, 128 of them, 257 bytes) are
/// cut like a handler's: each message at 64 bytes at most, so the reply is at most the least
/// error per entry (not the whole sentence of each).
#[tokio::test]
async fn a_batch_of_tiny_refusals_stays_within_the_floor() {
    let server = RpcServer::new(Probe::default());
    let batch = format!("[{}]", vec!["1"; 128].join(","));
    let text = ask_text(&server, batch.as_bytes()).await.expect("a reply");
    let replies: Vec<Value> = serde_json::from_str(&text).expect("JSON");
    assert!(replies.iter().all(|r| id_and_code(r) == (Value::Null, -32600)));
    assert!(replies.iter().all(|r| r["error"]["message"].as_str().is_some_and(|m| m.len() <= 64)), "{}", replies[0]);
    let whole = (2 * batch.len()).max(REPLY_FLOOR) + 128 * LEAST_ERROR;
    assert!(text.len() <= whole, "the batch reply ({} bytes) within {whole}", text.len());
    // A single refusal keeps its whole sentence: its budget is the floor.
    let one = ask(&server, b"1").await;
    assert!(one["error"]["message"].as_str().is_some_and(|m| m.len() > 64), "{one}");
}

// 10. Response objects where the caller cannot answer.

#[tokio::test]
async fn a_response_is_an_invalid_request_where_the_caller_cannot_answer() {
    assert!(!Peer::detached().takes_answers());
    assert!(!cx().peer().takes_answers());
    let probe = Arc::new(Probe::default());
    let server = RpcServer::new(Arc::clone(&probe));
    for response in [
        r#"{"jsonrpc":"2.0","id":1,"result":1}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"both"}}"#,
    ] {
        let reply = ask(&server, response.as_bytes()).await;
        assert_eq!(id_and_code(&reply), (json!(1), -32600), "{response}: {reply}");
        // With a context of the caller's own making too.
        let cx = Context::new(Identity::new("other"), Peer::detached());
        let reply: Value = serde_json::from_slice(&server.handle_message(&cx, response.as_bytes()).await.expect("a reply")).expect("JSON");
        assert_eq!(id_and_code(&reply), (json!(1), -32600), "{response}: {reply}");
    }
    // In a batch, the entry.
    let batch = ask(&server, br#"[{"jsonrpc":"2.0","id":"r","result":true},{"jsonrpc":"2.0","id":2,"method":"echo"}]"#).await;
    assert_eq!((id_and_code(&batch[0]), batch[1].clone()), ((json!("r"), -32600), json!({"jsonrpc": "2.0", "id": 2, "result": null})), "{batch}");
    assert_eq!(probe.calls.load(Ordering::SeqCst), 1, "only the echo reached the handler");
}

#[tokio::test]
async fn a_response_over_post_rpc_is_an_invalid_request() {
    let (addr, _task) = common::listen(RpcServer::new(Probe::default())).await;
    let (status, _, body) = common::http(addr, "POST", "/rpc", &[("content-type", "application/json")], br#"{"jsonrpc":"2.0","id":1,"result":1}"#).await;
    let reply: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!((status, id_and_code(&reply)), (200, (json!(1), -32600)), "{reply}");
}

#[tokio::test]
async fn a_response_on_a_line_connection_is_taken_silently() {
    use tokio::io::AsyncWriteExt;
    let mut c = Lines::open(RpcServer::new(Probe::default()));
    assert!(!c.task.is_finished());
    // Stray answers (no request of the server's waits under their ids), then a request: the
    // only line back is the request's reply.
    c.send_raw(br#"{"jsonrpc":"2.0","id":1,"result":1}"#).await;
    c.send_raw(br#"{"jsonrpc":"2.0","id":77,"error":{"code":-32000,"message":"no"}}"#).await;
    c.send_raw(br#"{"jsonrpc":"2.0","id":2,"method":"echo","params":[true]}"#).await;
    assert_eq!(c.next().await, json!({"jsonrpc": "2.0", "id": 2, "result": [true]}));
    c.write.shutdown().await.expect("close the input");
    tokio::time::timeout(std::time::Duration::from_secs(10), c.task).await.expect("the server returns").expect("task").expect("served");
    assert_eq!(c.read.next_line().await.expect("read"), None, "nothing was sent for the answers");
}
