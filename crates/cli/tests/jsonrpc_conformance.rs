//! JSON-RPC 2.0 conformance of `openagents serve` (the real binary) on every transport: the
//! specification's section 7 examples, adapted only in method names, and the envelope cases
//! (wrong `jsonrpc`, unreadable ids, a non-string `method`, unknown members, requests without
//! `jsonrpc`), sent over HTTP (`POST /rpc`), the WebSocket (`/frontend/v2` text frames) and stdio
//! (JSONL lines). Each reply is compared as parsed JSON with the one the specification gives
//! (batch replies as multisets, their order being free); only the free-text
//! `error.data.message` (and a violation's `message`) is checked to be a non-empty string rather
//! than compared. HTTP's own rules are checked too: the status-code rule (200 for every
//! JSON-RPC reply, 204 for none) and the transport refusals (401, 413, 415, 431), whose bodies
//! are JSON-RPC error objects with `"jsonrpc": "2.0"`.
//!
//! Method names: the specification's `subtract` is `release`, `update` and `notify_*` are
//! `interrupt`, `sum` is `status`, `get_data` is `rpc.discover`; `foobar` and `foo.get` stay
//! (no such methods). None of our methods takes positional params, so the examples with
//! `params` as an array are answered `-32602 Invalid params`; each is followed by the same
//! request with params our method takes, answered with its result.

mod security_common;

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;

use futures_util::{SinkExt, StreamExt};
use openagents_protocol::ErrorCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use security_common::{BOUND, Listening, Setup, header, http_exchange, lines_of};

// ---------------------------------------------------------------------------------------------
// Expected replies.

/// A success reply.
fn ok(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error reply: the specification's `code` and `message`, and our typed error as `data`
/// (its free-text `message` is checked apart).
fn err(id: Value, code: ErrorCode) -> Value {
    let (rpc, title) = match code {
        ErrorCode::ParseError => (-32700, "Parse error".to_owned()),
        ErrorCode::InvalidRequest => (-32600, "Invalid Request".to_owned()),
        ErrorCode::UnknownMethod => (-32601, "Method not found".to_owned()),
        ErrorCode::InvalidParams => (-32602, "Invalid params".to_owned()),
        ErrorCode::Internal => (-32603, "Internal error".to_owned()),
        ref other => {
            let words = other.as_str().replace('_', " ");
            (
                other.rpc_code(),
                format!("{}{}", words[..1].to_uppercase(), &words[1..]),
            )
        }
    };
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": rpc, "message": title, "data": {"code": code.as_str(), "retryable": code.retryable()}}})
}

/// `-32602` for the violations `(pointer, keyword)`, in any order.
fn invalid_params(id: Value, violations: &[(&str, &str)]) -> Value {
    let mut e = err(id, ErrorCode::InvalidParams);
    let v: Vec<Value> = violations
        .iter()
        .map(|(p, k)| json!({"pointer": p, "keyword": k}))
        .collect();
    e["error"]["data"]["details"] = json!({"violations": v});
    e
}

/// `-32602` for `params` given as an array (positional) to a method that takes an object.
fn positional(id: Value) -> Value {
    invalid_params(id, &[("/params", "type")])
}

fn discover() -> Value {
    serde_json::from_str(openagents_protocol::OPENRPC_DOCUMENT)
        .expect("the OpenRPC document is JSON")
}

/// One case: what is sent (raw bytes, so invalid JSON stays invalid) and the reply expected
/// (`None`: no reply at all).
struct Case {
    name: &'static str,
    request: String,
    expected: Option<Value>,
}

fn case(name: &'static str, request: &str, expected: Option<Value>) -> Case {
    Case {
        name,
        request: request.to_owned(),
        expected,
    }
}

/// The JSON-RPC 2.0 specification's section 7 examples, in its order.
fn spec_examples() -> Vec<Case> {
    let released = json!({"released": false});
    let not_interrupted = json!({"interrupted": false});
    vec![
        // rpc call with positional parameters
        case(
            "positional params (1)",
            r#"{"jsonrpc": "2.0", "method": "release", "params": [42, 23], "id": 1}"#,
            Some(positional(json!(1))),
        ),
        case(
            "positional params (1), adapted",
            r#"{"jsonrpc": "2.0", "method": "release", "params": {}, "id": 1}"#,
            Some(ok(json!(1), released.clone())),
        ),
        case(
            "positional params (2)",
            r#"{"jsonrpc": "2.0", "method": "release", "params": [23, 42], "id": 2}"#,
            Some(positional(json!(2))),
        ),
        case(
            "positional params (2), adapted",
            r#"{"jsonrpc": "2.0", "method": "release", "params": null, "id": 2}"#,
            Some(ok(json!(2), released.clone())),
        ),
        // rpc call with named parameters
        case(
            "named params (3)",
            r#"{"jsonrpc": "2.0", "method": "interrupt", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}"#,
            Some(invalid_params(
                json!(3),
                &[
                    ("/params/subtrahend", "additionalProperties"),
                    ("/params/minuend", "additionalProperties"),
                ],
            )),
        ),
        case(
            "named params (3), adapted",
            r#"{"jsonrpc": "2.0", "method": "interrupt", "params": {"assignment": "a-23"}, "id": 3}"#,
            Some(ok(json!(3), not_interrupted.clone())),
        ),
        case(
            "named params (4)",
            r#"{"jsonrpc": "2.0", "method": "interrupt", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}"#,
            Some(invalid_params(
                json!(4),
                &[
                    ("/params/minuend", "additionalProperties"),
                    ("/params/subtrahend", "additionalProperties"),
                ],
            )),
        ),
        case(
            "named params (4), adapted",
            r#"{"jsonrpc": "2.0", "method": "interrupt", "params": {}, "id": 4}"#,
            Some(ok(json!(4), not_interrupted.clone())),
        ),
        // a Notification
        case(
            "notification",
            r#"{"jsonrpc": "2.0", "method": "interrupt", "params": [1,2,3,4,5]}"#,
            None,
        ),
        case(
            "notification, adapted",
            r#"{"jsonrpc": "2.0", "method": "interrupt", "params": {}}"#,
            None,
        ),
        case(
            "notification of a non-existent method",
            r#"{"jsonrpc": "2.0", "method": "foobar"}"#,
            None,
        ),
        // rpc call of non-existent method
        case(
            "non-existent method",
            r#"{"jsonrpc": "2.0", "method": "foobar", "id": "1"}"#,
            Some(err(json!("1"), ErrorCode::UnknownMethod)),
        ),
        // rpc call with invalid JSON
        case(
            "invalid JSON",
            r#"{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]"#,
            Some(err(Value::Null, ErrorCode::ParseError)),
        ),
        // rpc call with invalid Request object
        case(
            "invalid Request object",
            r#"{"jsonrpc": "2.0", "method": 1, "params": "bar"}"#,
            Some(err(Value::Null, ErrorCode::InvalidRequest)),
        ),
        // rpc call Batch, invalid JSON
        case(
            "batch, invalid JSON",
            r#"[
  {"jsonrpc": "2.0", "method": "status", "params": [1,2,4], "id": "1"},
  {"jsonrpc": "2.0", "method"
]"#,
            Some(err(Value::Null, ErrorCode::ParseError)),
        ),
        // rpc call with an empty Array
        case(
            "empty array",
            "[]",
            Some(err(Value::Null, ErrorCode::InvalidRequest)),
        ),
        // rpc call with an invalid Batch (but not empty)
        case(
            "invalid batch, not empty",
            "[1]",
            Some(json!([err(Value::Null, ErrorCode::InvalidRequest)])),
        ),
        // rpc call with invalid Batch
        case(
            "invalid batch",
            "[1,2,3]",
            Some(json!([
                err(Value::Null, ErrorCode::InvalidRequest),
                err(Value::Null, ErrorCode::InvalidRequest),
                err(Value::Null, ErrorCode::InvalidRequest)
            ])),
        ),
        // rpc call Batch
        case(
            "batch",
            r#"[
        {"jsonrpc": "2.0", "method": "status", "params": [1,2,4], "id": "1"},
        {"jsonrpc": "2.0", "method": "interrupt", "params": [7]},
        {"jsonrpc": "2.0", "method": "release", "params": [42,23], "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "rpc.discover", "id": "9"}
    ]"#,
            Some(json!([
                positional(json!("1")),
                positional(json!("2")),
                err(Value::Null, ErrorCode::InvalidRequest),
                err(json!("5"), ErrorCode::UnknownMethod),
                ok(json!("9"), discover())
            ])),
        ),
        case(
            "batch, adapted",
            r#"[
        {"jsonrpc": "2.0", "method": "release", "params": {}, "id": "1"},
        {"jsonrpc": "2.0", "method": "interrupt", "params": {}},
        {"jsonrpc": "2.0", "method": "interrupt", "params": {"assignment": "a-42"}, "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "rpc.discover", "id": "9"}
    ]"#,
            Some(json!([
                ok(json!("1"), released),
                ok(json!("2"), not_interrupted),
                err(Value::Null, ErrorCode::InvalidRequest),
                err(json!("5"), ErrorCode::UnknownMethod),
                ok(json!("9"), discover())
            ])),
        ),
        // rpc call Batch (all notifications)
        case(
            "batch, all notifications",
            r#"[
        {"jsonrpc": "2.0", "method": "interrupt", "params": [1,2,4]},
        {"jsonrpc": "2.0", "method": "interrupt", "params": [7]}
    ]"#,
            None,
        ),
    ]
}

/// The envelope cases of issue 14 (points 4 and 5).
fn envelope_cases() -> Vec<Case> {
    let released = || json!({"released": false});
    let invalid = |id: Value| Some(err(id, ErrorCode::InvalidRequest));
    let too_many = format!(
        "[{}]",
        vec![
            r#"{"jsonrpc":"2.0","method":"release","id":1}"#;
            openagents_protocol::SERVER_MAX_BATCH_ENTRIES + 1
        ]
        .join(",")
    );
    let most = format!(
        "[{}]",
        (0..openagents_protocol::SERVER_MAX_BATCH_ENTRIES)
            .map(|i| format!(r#"{{"jsonrpc":"2.0","method":"release","id":{i}}}"#))
            .collect::<Vec<_>>()
            .join(",")
    );
    let most_replies: Vec<Value> = (0..openagents_protocol::SERVER_MAX_BATCH_ENTRIES)
        .map(|i| ok(json!(i), released()))
        .collect();
    vec![
        case(
            "jsonrpc 1.0, id echoed",
            r#"{"jsonrpc": "1.0", "method": "status", "id": 10}"#,
            invalid(json!(10)),
        ),
        case(
            "jsonrpc as a number",
            r#"{"jsonrpc": 2.0, "method": "status", "id": "v"}"#,
            invalid(json!("v")),
        ),
        case(
            "id an object",
            r#"{"jsonrpc": "2.0", "method": "status", "id": {"a": 1}}"#,
            invalid(Value::Null),
        ),
        case(
            "id an array",
            r#"{"jsonrpc": "2.0", "method": "status", "id": [1]}"#,
            invalid(Value::Null),
        ),
        case(
            "id a boolean",
            r#"{"jsonrpc": "2.0", "method": "status", "id": true}"#,
            invalid(Value::Null),
        ),
        case(
            "id with a fraction (allowed, echoed)",
            r#"{"jsonrpc": "2.0", "method": "release", "id": 1.5}"#,
            Some(ok(json!(1.5), json!({"released": false}))),
        ),
        case(
            "method not a string, id echoed",
            r#"{"jsonrpc": "2.0", "method": 1, "id": 7}"#,
            invalid(json!(7)),
        ),
        case(
            "method missing",
            r#"{"jsonrpc": "2.0", "id": 8}"#,
            invalid(json!(8)),
        ),
        case(
            "unknown envelope member",
            r#"{"jsonrpc": "2.0", "method": "status", "id": 11, "extra": 1}"#,
            invalid(json!(11)),
        ),
        case("not an object", r#""status""#, invalid(Value::Null)),
        case("null", "null", invalid(Value::Null)),
        case("an empty object", "{}", invalid(Value::Null)),
        case(
            "a member given twice",
            r#"{"jsonrpc": "2.0", "method": "release", "id": 1, "id": 2}"#,
            invalid(Value::Null),
        ),
        case(
            "a batch after whitespace",
            "  [1]",
            Some(json!([err(Value::Null, ErrorCode::InvalidRequest)])),
        ),
        case(
            "a batch inside a batch",
            "[[1]]",
            Some(json!([err(Value::Null, ErrorCode::InvalidRequest)])),
        ),
        case(
            "a problem inside params is -32602",
            r#"{"jsonrpc": "2.0", "method": "release", "params": {"x": 1}, "id": 13}"#,
            Some(invalid_params(
                json!(13),
                &[("/params/x", "additionalProperties")],
            )),
        ),
        case(
            "no jsonrpc member, still answered with it",
            r#"{"method": "release", "id": 12}"#,
            Some(ok(json!(12), released())),
        ),
        case(
            "no jsonrpc member, an error answered with it",
            r#"{"method": "foobar", "id": 14}"#,
            Some(err(json!(14), ErrorCode::UnknownMethod)),
        ),
        case(
            "no jsonrpc member, no id: a notification",
            r#"{"method": "release"}"#,
            None,
        ),
        case(
            "id null is a request, not a notification",
            r#"{"jsonrpc": "2.0", "method": "release", "id": null}"#,
            Some(ok(Value::Null, released())),
        ),
        case(
            "string id echoed",
            r#"{"jsonrpc": "2.0", "method": "release", "id": "abc-1"}"#,
            Some(ok(json!("abc-1"), released())),
        ),
        case(
            "negative id echoed",
            r#"{"jsonrpc": "2.0", "method": "release", "id": -5}"#,
            Some(ok(json!(-5), released())),
        ),
        case(
            "largest 64-bit id echoed",
            r#"{"jsonrpc": "2.0", "method": "release", "id": 18446744073709551615}"#,
            Some(ok(json!(u64::MAX), released())),
        ),
        case(
            "batch entries without jsonrpc answered with it",
            r#"[{"method": "release", "id": 1}, {"method": "interrupt"}]"#,
            Some(json!([ok(json!(1), released())])),
        ),
        case(
            "a batch of SERVER_MAX_BATCH_ENTRIES",
            &most,
            Some(Value::Array(most_replies)),
        ),
        case(
            "a batch over SERVER_MAX_BATCH_ENTRIES is refused whole",
            &too_many,
            invalid(Value::Null),
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// Comparison.

/// `reply` with the free text of its error removed, after checking it is a non-empty string.
fn normalized(mut reply: Value, what: &str) -> Value {
    if let Some(data) = reply
        .get_mut("error")
        .and_then(|e| e.get_mut("data"))
        .and_then(Value::as_object_mut)
    {
        let message = data.remove("message");
        assert!(
            message
                .as_ref()
                .and_then(Value::as_str)
                .is_some_and(|m| !m.is_empty()),
            "{what}: error.data.message must be a non-empty string, got {message:?}"
        );
        if let Some(violations) = data
            .get_mut("details")
            .and_then(|d| d.get_mut("violations"))
            .and_then(Value::as_array_mut)
        {
            for v in violations.iter_mut() {
                let message = v.as_object_mut().and_then(|v| v.remove("message"));
                assert!(
                    message
                        .as_ref()
                        .and_then(Value::as_str)
                        .is_some_and(|m| !m.is_empty()),
                    "{what}: a violation's message must be a non-empty string"
                );
            }
            sort_violations(violations);
        }
    }
    reply
}

/// Violations in a fixed order: the order they are reported in is free.
fn sort_violations(violations: &mut [Value]) {
    violations.sort_by_key(Value::to_string);
}

/// `expected` with its violations in the fixed order.
fn sorted_expected(mut expected: Value) -> Value {
    if let Some(v) = expected
        .pointer_mut("/error/data/details/violations")
        .and_then(Value::as_array_mut)
    {
        sort_violations(v);
    }
    expected
}

/// `v` as text with every object's keys sorted, so equal JSON compares equal as text whatever
/// order a map keeps (serde_json's `preserve_order` may be on in the workspace).
fn canonical(v: &Value) -> String {
    fn sort(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sort(&m[k]))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(v).to_string()
}

/// Checks `actual` (the reply, `None` for none) against `expected`: equal as JSON, a batch as
/// a multiset.
fn compare(what: &str, actual: Option<&Value>, expected: Option<&Value>) {
    match (actual, expected) {
        (None, None) => {}
        (Some(a), None) => panic!("{what}: expected no reply, got {a}"),
        (None, Some(e)) => panic!("{what}: expected {e}, got no reply"),
        (Some(a), Some(e)) => {
            let actual = match a {
                Value::Array(items) => {
                    assert!(
                        !items.is_empty(),
                        "{what}: an empty batch reply must not be sent"
                    );
                    let mut v: Vec<String> = items
                        .iter()
                        .map(|i| canonical(&normalized(i.clone(), what)))
                        .collect();
                    v.sort();
                    v
                }
                other => vec![canonical(&normalized(other.clone(), what))],
            };
            let expected = match e {
                Value::Array(items) => {
                    let mut v: Vec<String> = items
                        .iter()
                        .map(|i| canonical(&sorted_expected(i.clone())))
                        .collect();
                    v.sort();
                    v
                }
                other => vec![canonical(&sorted_expected(other.clone()))],
            };
            assert_eq!(a.is_array(), e.is_array(), "{what}: expected {e}, got {a}");
            if actual != expected {
                panic!(
                    "{what}: the reply differs\n  expected: {}\n  got:      {}",
                    expected.join("\n            "),
                    actual.join("\n            ")
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The server and the transports.

/// `openagents serve --http` (HTTP and the WebSocket on one port), killed on drop.
struct HttpServer {
    addr: SocketAddr,
    token: String,
    // Declared before the setup: the server stops before its folder is removed.
    _server: Listening,
    _setup: Setup,
}

impl HttpServer {
    fn start(name: &str) -> HttpServer {
        let setup = Setup::new(&format!("jsonrpc-{name}"), "");
        let server = setup.listen(&[]);
        HttpServer {
            addr: server.addr,
            token: server.token.clone(),
            _server: server,
            _setup: setup,
        }
    }

    /// Sends one raw HTTP/1.1 request (`Connection: close`); the status, headers (names in
    /// lower case) and body.
    fn raw(&self, request: &[u8]) -> (u16, Vec<(String, String)>, Vec<u8>) {
        http_exchange(self.addr, request)
    }

    /// `POST /rpc` with `body`, the token, and `content_type`.
    fn post(&self, body: &[u8], content_type: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
        let mut request = format!(
            "POST /rpc HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.addr,
            self.token,
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(body);
        self.raw(&request)
    }

    /// A JSON-RPC exchange over `POST /rpc`: 200 with the reply, or 204 with no body for none.
    fn exchange(&self, what: &str, body: &[u8]) -> Option<Value> {
        let (status, headers, reply) = self.post(body, "application/json");
        match status {
            200 => {
                assert_eq!(
                    header(&headers, "content-type").as_deref(),
                    Some("application/json"),
                    "{what}"
                );
                Some(serde_json::from_slice(&reply).unwrap_or_else(|e| {
                    panic!(
                        "{what}: a 200 body that is not JSON ({e}): {}",
                        String::from_utf8_lossy(&reply)
                    )
                }))
            }
            204 => {
                assert!(
                    reply.is_empty(),
                    "{what}: a 204 with a body: {}",
                    String::from_utf8_lossy(&reply)
                );
                None
            }
            other => panic!(
                "{what}: a JSON-RPC message must be answered 200 or 204, got {other}: {}",
                String::from_utf8_lossy(&reply)
            ),
        }
    }
}

/// The request sent after a message to learn that everything before it has been answered.
fn sentinel(n: usize) -> (String, Value) {
    let id = format!("sentinel-{n}");
    (
        format!(r#"{{"jsonrpc":"2.0","method":"release","id":"{id}"}}"#),
        json!(id),
    )
}

/// What arrived for `expected` on a streaming transport: the messages received until the
/// sentinel's reply, and until the expected reply too when one is expected (replies may come
/// in any order). Event notifications are skipped.
fn collect(
    what: &str,
    mut next: impl FnMut() -> Value,
    sentinel_id: &Value,
    expects_reply: bool,
) -> Option<Value> {
    let mut got = Vec::new();
    let mut sentinel_seen = false;
    while !sentinel_seen || (expects_reply && got.is_empty()) {
        let message = next();
        // stdio's `{"event": …}` lines and the WebSocket's `frontend.v2.event` notifications.
        if message.get("event").is_some() || message.get("method").is_some() {
            continue;
        }
        if message.get("id") == Some(sentinel_id) && message.get("result").is_some() {
            sentinel_seen = true;
            continue;
        }
        got.push(message);
    }
    assert!(
        got.len() <= 1,
        "{what}: more than one reply to one message: {got:?}"
    );
    got.pop()
}

/// `openagents serve --stdio`, killed on drop.
struct StdioServer {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    sent: usize,
    _setup: Setup,
}

impl StdioServer {
    fn start(name: &str) -> StdioServer {
        let setup = Setup::new(&format!("jsonrpc-{name}"), "");
        let mut child = setup
            .command(&["serve", "--stdio", "--runner", "echo"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("openagents starts");
        let stdin = child.stdin.take().expect("stdin");
        let lines = lines_of(child.stdout.take().expect("stdout"));
        StdioServer {
            child,
            stdin,
            lines,
            sent: 0,
            _setup: setup,
        }
    }

    fn exchange(&mut self, what: &str, request: &str, expects_reply: bool) -> Option<Value> {
        // A JSONL message is one line: the specification's multi-line examples are joined.
        let line = request.replace('\n', " ");
        self.sent += 1;
        let (sentinel, sentinel_id) = sentinel(self.sent);
        self.stdin
            .write_all(format!("{line}\n{sentinel}\n").as_bytes())
            .expect("write to stdin");
        self.stdin.flush().expect("flush stdin");
        let lines = &self.lines;
        let deadline = std::time::Instant::now() + BOUND;
        collect(
            what,
            || {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                let line = lines
                    .recv_timeout(left)
                    .unwrap_or_else(|_| panic!("{what}: no reply within {BOUND:?}"));
                serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("{what}: a stdout line that is not JSON ({e}): {line}")
                })
            },
            &sentinel_id,
            expects_reply,
        )
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A `/frontend/v2` connection with the admin token.
struct WsClient {
    rt: tokio::runtime::Runtime,
    ws: Ws,
    sent: usize,
}

impl WsClient {
    fn connect(server: &HttpServer) -> WsClient {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let mut request = format!("ws://{}/frontend/v2", server.addr)
            .into_client_request()
            .expect("a request");
        request.headers_mut().insert(
            "authorization",
            format!("Bearer {}", server.token).parse().expect("header"),
        );
        request.headers_mut().insert(
            "sec-websocket-protocol",
            "openagents.v2".parse().expect("header"),
        );
        let (ws, response) = rt
            .block_on(async {
                tokio::time::timeout(BOUND, tokio_tungstenite::connect_async(request)).await
            })
            .expect("the handshake in time")
            .expect("the WebSocket opens");
        assert_eq!(
            response
                .headers()
                .get("sec-websocket-protocol")
                .and_then(|v| v.to_str().ok()),
            Some("openagents.v2")
        );
        WsClient { rt, ws, sent: 0 }
    }

    fn exchange(&mut self, what: &str, request: &str, expects_reply: bool) -> Option<Value> {
        self.sent += 1;
        let (sentinel, sentinel_id) = sentinel(self.sent);
        let (rt, ws) = (&self.rt, &mut self.ws);
        // One deadline for the whole exchange: the server's pings must not extend it.
        let deadline = tokio::time::Instant::now() + BOUND;
        rt.block_on(async {
            ws.send(Message::text(request)).await.expect("send");
            ws.send(Message::text(sentinel)).await.expect("send");
        });
        collect(
            what,
            || loop {
                let message = rt
                    .block_on(async { tokio::time::timeout_at(deadline, ws.next()).await })
                    .unwrap_or_else(|_| panic!("{what}: no reply within {BOUND:?}"));
                match message {
                    Some(Ok(Message::Text(text))) => {
                        break serde_json::from_str(text.as_str()).unwrap_or_else(|e| {
                            panic!("{what}: a text frame that is not JSON ({e}): {text}")
                        });
                    }
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                    other => panic!("{what}: expected a text frame, got {other:?}"),
                }
            },
            &sentinel_id,
            expects_reply,
        )
    }
}

// ---------------------------------------------------------------------------------------------
// The tests.

/// The one check: `request` over `transport` is answered with `expected` (`None`: nothing).
fn check(transport: &mut Transport<'_>, case: &Case) {
    let what = format!("{} over {}", case.name, transport.name());
    let reply = match transport {
        Transport::Http(server) => server.exchange(&what, case.request.as_bytes()),
        Transport::Ws(client) => client.exchange(&what, &case.request, case.expected.is_some()),
        Transport::Stdio(server) => server.exchange(&what, &case.request, case.expected.is_some()),
    };
    compare(&what, reply.as_ref(), case.expected.as_ref());
}

enum Transport<'a> {
    Http(&'a HttpServer),
    Ws(&'a mut WsClient),
    Stdio(&'a mut StdioServer),
}

impl Transport<'_> {
    fn name(&self) -> &'static str {
        match self {
            Transport::Http(_) => "HTTP",
            Transport::Ws(_) => "WebSocket",
            Transport::Stdio(_) => "stdio",
        }
    }
}

fn all_cases() -> Vec<Case> {
    let mut cases = spec_examples();
    cases.extend(envelope_cases());
    cases
}

#[test]
fn the_specification_examples_and_envelope_cases_over_http() {
    let server = HttpServer::start("http");
    for case in all_cases() {
        check(&mut Transport::Http(&server), &case);
    }
}

#[test]
fn the_specification_examples_and_envelope_cases_over_websocket() {
    let server = HttpServer::start("ws");
    let mut client = WsClient::connect(&server);
    for case in all_cases() {
        check(&mut Transport::Ws(&mut client), &case);
    }
}

#[test]
fn the_specification_examples_and_envelope_cases_over_stdio() {
    let mut server = StdioServer::start("stdio");
    for case in all_cases() {
        // stdio frames messages as lines: a message with a raw line break inside a string is
        // not one line, and none of the cases has one.
        check(&mut Transport::Stdio(&mut server), &case);
    }
}

/// An HTTP refusal: `status`, and a body that is a JSON-RPC error object of `code`.
fn assert_refusal(
    what: &str,
    (status, headers, body): (u16, Vec<(String, String)>, Vec<u8>),
    expected_status: u16,
    code: ErrorCode,
) {
    assert_eq!(
        status,
        expected_status,
        "{what}: {}",
        String::from_utf8_lossy(&body)
    );
    assert_eq!(
        header(&headers, "content-type").as_deref(),
        Some("application/json"),
        "{what}"
    );
    let reply: Value = serde_json::from_slice(&body).unwrap_or_else(|e| {
        panic!(
            "{what}: a body that is not JSON ({e}): {}",
            String::from_utf8_lossy(&body)
        )
    });
    compare(what, Some(&reply), Some(&err(Value::Null, code)));
}

#[test]
fn http_transport_refusals_are_json_rpc_error_objects() {
    let server = HttpServer::start("refusals");
    let addr = server.addr;
    let body = br#"{"jsonrpc":"2.0","method":"status","id":1}"#;
    let post = |extra: &str, body: &[u8]| {
        let mut r = format!("POST /rpc HTTP/1.1\r\nHost: {addr}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n", body.len()).into_bytes();
        r.extend_from_slice(body);
        http_exchange(addr, &r)
    };
    let json_type = "Content-Type: application/json\r\n";
    let no_token = post(json_type, body);
    assert_eq!(
        header(&no_token.1, "www-authenticate").as_deref(),
        Some("Bearer")
    );
    assert_refusal("no token", no_token, 401, ErrorCode::Unauthorized);
    assert_refusal(
        "a wrong token",
        post(
            &format!("{json_type}Authorization: Bearer {}\r\n", "0".repeat(64)),
            body,
        ),
        401,
        ErrorCode::Unauthorized,
    );
    assert_refusal(
        "not Bearer",
        post(
            &format!("{json_type}Authorization: Basic {}\r\n", server.token),
            body,
        ),
        401,
        ErrorCode::Unauthorized,
    );
    let auth = format!("Authorization: Bearer {}\r\n", server.token);
    assert_refusal(
        "text/plain",
        post(&format!("{auth}Content-Type: text/plain\r\n"), body),
        415,
        ErrorCode::InvalidRequest,
    );
    assert_refusal(
        "no content type",
        post(&auth, body),
        415,
        ErrorCode::InvalidRequest,
    );
    // A declared length over SERVER_MAX_LINE_BYTES is refused before any body is sent.
    let over = openagents_protocol::SERVER_MAX_LINE_BYTES + 1;
    let head = format!(
        "POST /rpc HTTP/1.1\r\nHost: {addr}\r\n{auth}{json_type}Content-Length: {over}\r\nConnection: close\r\n\r\n"
    );
    assert_refusal(
        "a body over SERVER_MAX_LINE_BYTES",
        http_exchange(addr, head.as_bytes()),
        413,
        ErrorCode::FrameTooLarge,
    );
    // A header block over SERVER_MAX_HEADER_BYTES.
    let filler = format!(
        "X-Filler: {}\r\n",
        "a".repeat(openagents_protocol::SERVER_MAX_HEADER_BYTES)
    );
    let head = format!(
        "POST /rpc HTTP/1.1\r\nHost: {addr}\r\n{auth}{json_type}{filler}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let (status, headers, reply) = http_exchange(addr, head.as_bytes());
    assert_refusal(
        "a header block over SERVER_MAX_HEADER_BYTES",
        (status, headers, reply),
        431,
        ErrorCode::FrameTooLarge,
    );
}

#[test]
fn http_answers_every_json_rpc_reply_200_and_none_204_for_each_json_content_type() {
    let server = HttpServer::start("status-rule");
    let request = br#"{"jsonrpc":"2.0","method":"release","id":"ct"}"#;
    for content_type in [
        "application/json",
        "application/json-rpc",
        "application/jsonrequest",
        "application/json; charset=utf-8",
        "Application/JSON-RPC;charset=UTF-8",
        "application/jsonrequest ; charset=utf-8",
    ] {
        let (status, _, body) = server.post(request, content_type);
        assert_eq!(
            status,
            200,
            "{content_type}: {}",
            String::from_utf8_lossy(&body)
        );
        compare(
            content_type,
            serde_json::from_slice::<Value>(&body).ok().as_ref(),
            Some(&ok(json!("ct"), json!({"released": false}))),
        );
    }
    // Errors are 200 too, not 400: parse error, invalid request, unknown method, invalid params.
    for (body, code) in [
        (&b"{"[..], ErrorCode::ParseError),
        (
            &b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\",\"id\":1}"[..],
            ErrorCode::ParseError,
        ),
        (
            &br#"{"jsonrpc":"1.0","method":"status"}"#[..],
            ErrorCode::InvalidRequest,
        ),
        (
            &br#"{"jsonrpc":"2.0","method":"nope","id":null}"#[..],
            ErrorCode::UnknownMethod,
        ),
        (
            &br#"{"jsonrpc":"2.0","method":"status","params":[1],"id":null}"#[..],
            ErrorCode::InvalidParams,
        ),
    ] {
        let (status, _, reply) = server.post(body, "application/json");
        assert_eq!(
            status,
            200,
            "{}: {}",
            String::from_utf8_lossy(body),
            String::from_utf8_lossy(&reply)
        );
        let reply: Value = serde_json::from_slice(&reply).expect("JSON");
        assert_eq!(reply["error"]["data"]["code"], code.as_str());
        assert_eq!(reply["jsonrpc"], "2.0");
    }
    // A notification and an all-notification batch: 204, no body.
    for body in [
        &br#"{"jsonrpc":"2.0","method":"release"}"#[..],
        &br#"[{"jsonrpc":"2.0","method":"release"},{"method":"interrupt"}]"#[..],
    ] {
        let (status, headers, reply) = server.post(body, "application/json");
        assert_eq!(
            (status, reply.len()),
            (204, 0),
            "{}",
            String::from_utf8_lossy(body)
        );
        assert_eq!(
            header(&headers, "content-length").as_deref().unwrap_or("0"),
            "0"
        );
    }
}

/// 405 is a transport refusal like the others (README: "each with a JSON-RPC error object as
/// its body"), so a strict client reading it finds a JSON-RPC error, not an empty body.
#[test]
fn http_405_is_a_json_rpc_error_object() {
    let server = HttpServer::start("405");
    let addr = server.addr;
    for (method, path) in [("GET", "/rpc"), ("PUT", "/rpc"), ("DELETE", "/events")] {
        let request = format!("{method} /rpc HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", server.token).replacen("/rpc", path, 1);
        let (status, headers, body) = http_exchange(addr, request.as_bytes());
        let what = format!("{method} {path}");
        assert_eq!(status, 405, "{what}");
        assert_eq!(
            header(&headers, "content-type").as_deref(),
            Some("application/json"),
            "{what}: body {:?}",
            String::from_utf8_lossy(&body)
        );
        let reply: Value = serde_json::from_slice(&body).unwrap_or_else(|e| {
            panic!(
                "{what}: a body that is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&body)
            )
        });
        assert_eq!(reply["jsonrpc"], "2.0", "{what}: {reply}");
        assert_eq!(reply["id"], Value::Null, "{what}: {reply}");
        assert!(
            reply["error"]["code"].is_i64()
                && reply["error"]["message"].is_string()
                && reply["error"]["data"]["code"].is_string(),
            "{what}: {reply}"
        );
    }
}

/// A number id is echoed exactly as it was written — a fraction, an exponent, a negative zero,
/// past 64 bits — not as its value re-encoded (`1e3` is not `1000.0`), over every transport's
/// bytes (stdio shown: the reply text is what the other transports write too).
#[test]
fn number_ids_are_echoed_exactly_as_written() {
    let mut server = StdioServer::start("raw-ids");
    let ids = ["1.5", "1e3", "-0", "2.50", "1E-7", "123456789012345678901234567890"];
    for id in ids {
        server.stdin.write_all(format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"release\"}}\n").as_bytes()).expect("write");
        server.stdin.write_all(format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"no-such-method\"}}\n").as_bytes()).expect("write");
    }
    server.stdin.flush().expect("flush");
    let mut replies = Vec::new();
    while replies.len() < ids.len() * 2 {
        let line = server.lines.recv_timeout(BOUND).expect("a reply within the bound");
        if !line.starts_with("{\"event\"") {
            replies.push(line);
        }
    }
    for id in ids {
        let prefix = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},");
        let echoed: Vec<&String> = replies.iter().filter(|r| r.starts_with(&prefix)).collect();
        assert_eq!(echoed.len(), 2, "the id {id} is echoed as written in its result and its error: {replies:#?}");
        assert!(echoed.iter().any(|r| r.contains("\"result\":{\"released\":false}")), "{echoed:?}");
        assert!(echoed.iter().any(|r| r.contains("\"code\":-32601")), "{echoed:?}");
    }
}

/// stdio keeps the seed's `{"event": …}` lines between replies (issue 14, point 7).
#[test]
fn stdio_keeps_its_event_lines_beside_json_rpc_replies() {
    let mut server = StdioServer::start("stdio-events");
    server.stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"turn\",\"method\":\"submit\",\"params\":{\"task\":\"hello events\"}}\n").expect("write");
    server.stdin.flush().expect("flush");
    let deadline = std::time::Instant::now() + BOUND;
    let mut kinds = Vec::new();
    let reply = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = server
            .lines
            .recv_timeout(left)
            .expect("the turn's reply within the bound");
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("a line that is not JSON ({e}): {line}"));
        if v.get("event").is_some() {
            let keys: Vec<&String> = v.as_object().expect("an object").keys().collect();
            assert_eq!(
                keys,
                ["event"],
                "an event line is {{\"event\": …}} only: {line}"
            );
            assert!(v["event"]["seq"].is_u64(), "{line}");
            kinds.push(
                v["event"]["event"]["type"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
            continue;
        }
        break v;
    };
    assert_eq!(reply["jsonrpc"], "2.0");
    assert_eq!(reply["id"], "turn");
    assert_eq!(reply["result"]["result"], "hello events", "{reply}");
    assert!(
        kinds.first().is_some_and(|k| k == "turn_started"),
        "{kinds:?}"
    );
    // The terminal event may follow the reply; ask again to see it arrive.
    let rest = server.exchange(
        "after the turn",
        r#"{"jsonrpc":"2.0","method":"release","id":"after"}"#,
        true,
    );
    assert_eq!(rest.map(|r| r["id"].clone()), Some(json!("after")));
}

/// Over the WebSocket, events are JSON-RPC 2.0 notifications: `jsonrpc`, `method`, `params`
/// and no `id`, so a strict client does not take them for replies.
#[test]
fn websocket_events_are_json_rpc_notifications() {
    let server = HttpServer::start("ws-events");
    let mut client = WsClient::connect(&server);
    let subscribed = client
        .exchange(
            "subscribe",
            r#"{"jsonrpc":"2.0","method":"subscribe","id":"sub"}"#,
            true,
        )
        .expect("a reply");
    assert_eq!(subscribed["id"], "sub");
    assert!(subscribed["result"]["last_seq"].is_u64(), "{subscribed}");
    let (rt, ws) = (&client.rt, &mut client.ws);
    rt.block_on(async {
        ws.send(Message::text(
            r#"{"jsonrpc":"2.0","method":"submit","params":{"task":"hi"},"id":"turn"}"#,
        ))
        .await
        .expect("send")
    });
    let deadline = tokio::time::Instant::now() + BOUND;
    let (mut notifications, mut replied) = (Vec::new(), false);
    while !(replied
        && notifications
            .iter()
            .any(|n: &Value| n["params"]["event"]["type"] == "turn_completed"))
    {
        let message = rt
            .block_on(async { tokio::time::timeout_at(deadline, ws.next()).await })
            .expect("the turn's messages within the bound");
        let Some(Ok(Message::Text(text))) = message else {
            continue;
        };
        let v: Value = serde_json::from_str(text.as_str()).expect("JSON");
        if v.get("method").is_some() {
            let mut keys: Vec<&str> = v
                .as_object()
                .expect("an object")
                .keys()
                .map(String::as_str)
                .collect();
            keys.sort_unstable();
            assert_eq!(
                keys,
                ["jsonrpc", "method", "params"],
                "a notification has no id: {v}"
            );
            assert_eq!(v["jsonrpc"], "2.0");
            assert_eq!(v["method"], "frontend.v2.event", "{v}");
            notifications.push(v);
        } else {
            assert_eq!(
                (&v["jsonrpc"], &v["id"], &v["result"]["result"]),
                (&json!("2.0"), &json!("turn"), &json!("hi")),
                "{v}"
            );
            replied = true;
        }
    }
}
