//! Hostile input against the real binary (`openagents serve --http` and `serve --stdio`, with a
//! temporary operator configuration) on loopback. Every input gets its documented error — the
//! HTTP status and the typed `RuntimeSubmitError` code — and after each one a `status` call
//! still succeeds: the runtime keeps serving.
//!
//! The table of inputs and answers here is the one in RELIABILITY.md.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use openagents_hardening::client::{self, Resp, Sse, Ws, WsRefused, post_rpc, rpc_head, send_raw};
use openagents_hardening::harness::{HttpServer, Setup, fd_count, settled_fd_count, wait_for};
use openagents_protocol::{SERVER_MAX_HEADER_BYTES, SERVER_MAX_LINE_BYTES};
use serde_json::{Value, json};

/// The header read timeout the server documents (`http::HEADER_READ_TIMEOUT`).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The body read timeout the server documents (`http::BODY_READ_TIMEOUT`).
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The most connections served at once (`http::MAX_CONNECTIONS`).
const MAX_CONNECTIONS: usize = 256;
/// The most connections one peer address may hold (`http::MAX_CONNECTIONS_PER_PEER`).
const MAX_CONNECTIONS_PER_PEER: usize = 64;
/// The most header fields a request may carry (`http::MAX_HEADERS`).
const MAX_HEADERS: usize = 100;

/// What an input must get: the HTTP status, and the typed error code (`None`: a result).
type Expect = (u16, Option<&'static str>);

fn deep(n: usize, open: &str, close: &str) -> String {
    format!("{}{}", open.repeat(n), close.repeat(n))
}

fn padded(body: &str, len: usize) -> Vec<u8> {
    let mut b = body.as_bytes().to_vec();
    b.resize(len, b' ');
    b
}

/// `POST /rpc` bodies sent with the admin token: `(what, body, expected)`.
fn bodies() -> Vec<(String, Vec<u8>, Expect)> {
    let status = r#"{"id":1,"method":"status"}"#;
    let mut cases: Vec<(String, Vec<u8>, Expect)> = vec![
        // Sizes: the body limit is SERVER_MAX_LINE_BYTES, at the limit and one byte past.
        ("body at SERVER_MAX_LINE_BYTES".into(), padded(status, SERVER_MAX_LINE_BYTES), (200, None)),
        ("body one byte past SERVER_MAX_LINE_BYTES".into(), padded(status, SERVER_MAX_LINE_BYTES + 1), (413, Some("frame_too_large"))),
        ("empty body".into(), vec![], (200, Some("parse_error"))),
        // Nesting: the parser stops at 128 levels.
        ("params nested 100000 arrays deep".into(), format!(r#"{{"id":1,"method":"status","params":{}}}"#, deep(100_000, "[", "]")).into_bytes(), (200, Some("parse_error"))),
        ("an unknown property nested 200 objects deep".into(), format!(r#"{{"id":1,"method":"submit","params":{{"task":"x","a":{}1{}}}}}"#, r#"{"a":"#.repeat(200), "}".repeat(200)).into_bytes(), (200, Some("parse_error"))),
        ("the id nested 129 arrays deep".into(), format!(r#"{{"id":{},"method":"status"}}"#, deep(129, "[", "]")).into_bytes(), (200, Some("parse_error"))),
        ("params nested 10 arrays deep (within the parser's limit)".into(), format!(r#"{{"id":1,"method":"status","params":{}}}"#, deep(10, "[", "]")).into_bytes(), (200, Some("invalid_params"))),
        // Encoding and syntax.
        ("invalid UTF-8 in a string".into(), b"{\"id\":1,\"method\":\"submit\",\"params\":{\"task\":\"\xff\xfe\"}}".to_vec(), (200, Some("parse_error"))),
        ("invalid UTF-8 outside strings".into(), b"{\"id\":1,\"method\":\"status\"}\xc0".to_vec(), (200, Some("parse_error"))),
        ("a lone surrogate escape".into(), br#"{"id":"\ud800","method":"status"}"#.to_vec(), (200, Some("parse_error"))),
        ("truncated JSON".into(), br#"{"id":1,"method":"sta"#.to_vec(), (200, Some("parse_error"))),
        ("truncated after a key".into(), br#"{"id":1,"method""#.to_vec(), (200, Some("parse_error"))),
        ("trailing data after the request".into(), br#"{"id":1,"method":"status"} {"id":2,"method":"status"}"#.to_vec(), (200, Some("parse_error"))),
        ("a NUL byte".into(), b"{\"id\":1,\"method\":\"status\"}\0".to_vec(), (200, Some("parse_error"))),
        // Duplicate keys are refused, never resolved by "last one wins".
        ("duplicate `method` (status, then shutdown)".into(), br#"{"id":1,"method":"status","method":"shutdown"}"#.to_vec(), (200, Some("invalid_request"))),
        ("duplicate `id`".into(), br#"{"id":1,"id":2,"method":"status"}"#.to_vec(), (200, Some("invalid_request"))),
        ("duplicate `task` in submit params".into(), br#"{"id":1,"method":"submit","params":{"task":"a","task":"b"}}"#.to_vec(), (200, Some("invalid_params"))),
        // Numbers.
        ("an id of 1e400 (out of range for the parser)".into(), br#"{"id":1e400,"method":"status"}"#.to_vec(), (200, Some("parse_error"))),
        ("an id beyond 64 bits (echoed as written)".into(), br#"{"id":123456789012345678901234567890,"method":"status"}"#.to_vec(), (200, None)),
        ("a fractional id (echoed as written)".into(), br#"{"id":1.5,"method":"status"}"#.to_vec(), (200, None)),
        ("a 300-digit id".into(), format!(r#"{{"id":{},"method":"status"}}"#, "9".repeat(300)).into_bytes(), (200, Some("invalid_request"))),
        ("since = 1e300".into(), br#"{"id":1,"method":"subscribe","params":{"since":1e300}}"#.to_vec(), (200, Some("invalid_params"))),
        ("since = -1".into(), br#"{"id":1,"method":"subscribe","params":{"since":-1}}"#.to_vec(), (200, Some("invalid_params"))),
        ("a 300-digit number".into(), format!(r#"{{"id":1,"method":"subscribe","params":{{"since":{}}}}}"#, "9".repeat(300)).into_bytes(), (200, Some("invalid_params"))),
        ("a 10000-digit number (out of range for the parser)".into(), format!(r#"{{"id":1,"method":"subscribe","params":{{"since":{}}}}}"#, "9".repeat(10_000)).into_bytes(), (200, Some("parse_error"))),
        // Methods.
        ("unknown method".into(), br#"{"id":1,"method":"nope"}"#.to_vec(), (200, Some("unknown_method"))),
        ("method in another case".into(), br#"{"id":1,"method":"STATUS"}"#.to_vec(), (200, Some("unknown_method"))),
        ("empty method".into(), br#"{"id":1,"method":""}"#.to_vec(), (200, Some("unknown_method"))),
        ("a 100000-character method".into(), format!(r#"{{"id":1,"method":"{}"}}"#, "m".repeat(100_000)).into_bytes(), (200, Some("unknown_method"))),
        ("no method".into(), br#"{"id":1}"#.to_vec(), (200, Some("invalid_request"))),
        // Ids: a request without one is a notification (no reply: 204); a null id is answered.
        ("missing id".into(), br#"{"method":"status"}"#.to_vec(), (204, None)),
        ("null id".into(), br#"{"id":null,"method":"status"}"#.to_vec(), (200, None)),
        ("a 257-character string id".into(), format!(r#"{{"id":"{}","method":"status"}}"#, "i".repeat(257)).into_bytes(), (200, Some("invalid_request"))),
        // Path traversal in `cwd`: refused by the schema's pattern, or as a bad folder.
        ("cwd ../../etc".into(), br#"{"id":1,"method":"submit","params":{"task":"x","cwd":"../../etc"}}"#.to_vec(), (200, Some("invalid_params"))),
        ("cwd /nonexistent/../..".into(), br#"{"id":1,"method":"submit","params":{"task":"x","cwd":"/nonexistent/../.."}}"#.to_vec(), (200, Some("invalid_params"))),
        ("cwd that is a file".into(), br#"{"id":1,"method":"submit","params":{"task":"x","cwd":"/etc/passwd"}}"#.to_vec(), (200, Some("invalid_params"))),
        ("cwd with a NUL".into(), br#"{"id":1,"method":"submit","params":{"task":"x","cwd":"/tmp\u0000/etc"}}"#.to_vec(), (200, Some("invalid_params"))),
        // A turn trying to smuggle an executable.
        ("params with `command`".into(), br#"{"id":1,"method":"submit","params":{"task":"x","command":"/bin/sh"}}"#.to_vec(), (200, Some("invalid_params"))),
        ("params with `args` and `env`".into(), br#"{"id":1,"method":"submit","params":{"task":"x","args":["-c","id"],"env":{"LD_PRELOAD":"/x.so"}}}"#.to_vec(), (200, Some("invalid_params"))),
        ("params with an `agent` carrying a command".into(), br#"{"id":1,"method":"submit","params":{"task":"x","agent":{"runner":"echo","command":"/bin/sh"}}}"#.to_vec(), (200, Some("invalid_params"))),
        ("a runner id that is a path".into(), br#"{"id":1,"method":"submit","params":{"task":"x","runner":"/bin/sh"}}"#.to_vec(), (200, Some("invalid_params"))),
        ("a runner the registry does not have".into(), br#"{"id":1,"method":"submit","params":{"task":"x","runner":"sh"}}"#.to_vec(), (200, Some("runner_not_found"))),
    ];
    // Wrong types everywhere: each field of a request, and the request itself.
    let wrong: &[(&str, &str, Expect)] = &[
        ("an empty batch", "[]", (200, Some("invalid_request"))),
        ("request as a string", r#""status""#, (200, Some("invalid_request"))),
        ("request as a number", "42", (200, Some("invalid_request"))),
        ("request as null", "null", (200, Some("invalid_request"))),
        ("id as an object", r#"{"id":{},"method":"status"}"#, (200, Some("invalid_request"))),
        ("id as an array", r#"{"id":[1],"method":"status"}"#, (200, Some("invalid_request"))),
        ("id as a boolean", r#"{"id":true,"method":"status"}"#, (200, Some("invalid_request"))),
        ("method as a number", r#"{"id":1,"method":5}"#, (200, Some("invalid_request"))),
        ("method as null", r#"{"id":1,"method":null}"#, (200, Some("invalid_request"))),
        ("method as an array", r#"{"id":1,"method":["status"]}"#, (200, Some("invalid_request"))),
        ("jsonrpc 1.0", r#"{"jsonrpc":"1.0","id":1,"method":"status"}"#, (200, Some("invalid_request"))),
        ("jsonrpc as a number", r#"{"jsonrpc":2,"id":1,"method":"status"}"#, (200, Some("invalid_request"))),
        ("status params as a string", r#"{"id":1,"method":"status","params":"x"}"#, (200, Some("invalid_params"))),
        ("status params as a non-empty array", r#"{"id":1,"method":"status","params":[1]}"#, (200, Some("invalid_params"))),
        ("status params with a property", r#"{"id":1,"method":"status","params":{"x":1}}"#, (200, Some("invalid_params"))),
        ("submit without params", r#"{"id":1,"method":"submit"}"#, (200, Some("invalid_params"))),
        ("submit params null", r#"{"id":1,"method":"submit","params":null}"#, (200, Some("invalid_params"))),
        ("submit params as an array", r#"{"id":1,"method":"submit","params":["x"]}"#, (200, Some("invalid_params"))),
        ("task as a number", r#"{"id":1,"method":"submit","params":{"task":5}}"#, (200, Some("invalid_params"))),
        ("task null", r#"{"id":1,"method":"submit","params":{"task":null}}"#, (200, Some("invalid_params"))),
        ("task empty", r#"{"id":1,"method":"submit","params":{"task":""}}"#, (200, Some("invalid_params"))),
        ("task as an object", r#"{"id":1,"method":"submit","params":{"task":{"x":1}}}"#, (200, Some("invalid_params"))),
        ("runner as a number", r#"{"id":1,"method":"submit","params":{"task":"x","runner":5}}"#, (200, Some("invalid_params"))),
        ("cwd as a boolean", r#"{"id":1,"method":"submit","params":{"task":"x","cwd":true}}"#, (200, Some("invalid_params"))),
        ("assignment with spaces", r#"{"id":1,"method":"submit","params":{"task":"x","assignment":"a b"}}"#, (200, Some("invalid_params"))),
        ("conversation as an array", r#"{"id":1,"method":"submit","params":{"task":"x","conversation":[]}}"#, (200, Some("invalid_params"))),
        ("since as a string", r#"{"id":1,"method":"subscribe","params":{"since":"5"}}"#, (200, Some("invalid_params"))),
        ("interrupt params as a number", r#"{"id":1,"method":"interrupt","params":1}"#, (200, Some("invalid_params"))),
        ("shutdown params with a property", r#"{"id":1,"method":"shutdown","params":{"now":true}}"#, (200, Some("invalid_params"))),
    ];
    cases.extend(wrong.iter().map(|(w, b, e)| ((*w).to_owned(), b.as_bytes().to_vec(), *e)));
    cases
}

fn check_reply(what: &str, r: &Resp, expect: Expect) {
    assert_eq!(r.status, expect.0, "{what}: HTTP status; body {}", r.text());
    if expect.0 == 204 {
        assert!(r.text().is_empty(), "{what}: a notification gets no body: {}", r.text());
        return;
    }
    let body = r.json();
    assert_eq!(body["jsonrpc"], "2.0", "{what}: every reply carries `jsonrpc`: {}", r.text());
    assert!(body.is_object(), "{what}: the body is not a JSON object: {}", r.text());
    match expect.1 {
        None => assert!(body.get("result").is_some(), "{what}: expected a result, got {}", r.text()),
        Some(code) => {
            assert_eq!(r.code().as_deref(), Some(code), "{what}: {}", r.text());
            let err = &body["error"];
            assert!(err["code"].is_i64() && err["message"].is_string() && err["data"]["retryable"].is_boolean(), "{what}: not a typed error: {}", r.text());
        }
    }
}

/// After each hostile input, the runtime still answers, and was not shut down by it.
fn still_serving(what: &str, server: &HttpServer) {
    let s = server.status();
    assert_ne!(s["state"], "shutting_down", "{what}: the runtime is shutting down");
}

#[test]
fn hostile_bodies_get_their_documented_errors_and_the_runtime_keeps_serving() {
    let setup = Setup::new("bodies");
    let server = setup.http();
    let admin = setup.tokens.admin.clone();
    let cases = bodies();
    for (what, body, expect) in &cases {
        let r = post_rpc(server.addr, Some(&admin), body);
        check_reply(what, &r, *expect);
        // A request that is not JSON text never echoes an id (one whose params hold what the
        // decoder cannot read, a number out of range, is read, and echoes its id).
        if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_err() {
            assert!(r.json()["id"].is_null(), "{what}: {}", r.text());
        }
        still_serving(what, &server);
    }
    // Nothing refused above ever started a runner turn, but the two cwd cases that passed the
    // schema: they were accepted, then failed before anything was spawned.
    let s = server.status();
    assert_eq!(s["counters"]["completed"], 0, "{s}");
    assert_eq!(s["counters"]["submitted"], s["counters"]["failed"], "{s}");
    eprintln!("hostile bodies: {} inputs, each answered with its documented error", cases.len());
}

/// A request's header block as the server counts it: the request line, `name: value\r\n` per
/// field, and the blank line.
fn head_with_filler(token: &str, body_len: usize, block_len: usize) -> Vec<u8> {
    let base = rpc_head(Some(token), body_len, "X-Fill: \r\n");
    assert!(block_len > base.len());
    rpc_head(Some(token), body_len, &format!("X-Fill: {}\r\n", "f".repeat(block_len - base.len()))).into_bytes()
}

#[test]
fn headers_tokens_and_grants() {
    let setup = Setup::new("headers");
    let server = setup.http();
    let t = &setup.tokens;
    let status = br#"{"id":1,"method":"status"}"#;
    let with = |head: Vec<u8>| {
        let mut b = head;
        b.extend_from_slice(status);
        b
    };
    let fields = |n: usize| (0..n).map(|i| format!("X-H{i}: v\r\n")).collect::<String>();
    // `rpc_head` sends 5 fields of its own (Host, Authorization, Content-Type, Connection,
    // Content-Length).
    let raw: Vec<(String, Vec<u8>, Expect)> = vec![
        ("MAX_HEADERS header fields".into(), with(rpc_head(Some(&t.admin), status.len(), &fields(MAX_HEADERS - 5)).into_bytes()), (200, None)),
        ("MAX_HEADERS + 1 header fields".into(), with(rpc_head(Some(&t.admin), status.len(), &fields(MAX_HEADERS - 4)).into_bytes()), (431, None)),
        ("10000 header fields".into(), with(rpc_head(Some(&t.admin), status.len(), &fields(10_000)).into_bytes()), (431, None)),
        ("a header block of SERVER_MAX_HEADER_BYTES".into(), with(head_with_filler(&t.admin, status.len(), SERVER_MAX_HEADER_BYTES)), (200, None)),
        ("a header block one byte past SERVER_MAX_HEADER_BYTES".into(), with(head_with_filler(&t.admin, status.len(), SERVER_MAX_HEADER_BYTES + 1)), (431, None)),
        ("a header block of 20 MiB".into(), with(head_with_filler(&t.admin, status.len(), 20 << 20)), (431, None)),
        ("no Authorization".into(), with(rpc_head(None, status.len(), "").into_bytes()), (401, Some("unauthorized"))),
        ("a wrong token".into(), with(rpc_head(Some(&"0".repeat(64)), status.len(), "").into_bytes()), (401, Some("unauthorized"))),
        ("an empty token".into(), with(rpc_head(Some(""), status.len(), "").into_bytes()), (401, Some("unauthorized"))),
        ("a token one character short".into(), with(rpc_head(Some(&t.admin[..63]), status.len(), "").into_bytes()), (401, Some("unauthorized"))),
        ("the Basic scheme".into(), with(format!("POST /rpc HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {}\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n", t.admin, status.len()).into_bytes()), (401, Some("unauthorized"))),
        ("two Authorization headers, the first wrong".into(), with(rpc_head(Some("wrong"), status.len(), &format!("Authorization: Bearer {}\r\n", t.admin)).into_bytes()), (401, Some("unauthorized"))),
        ("no Content-Type".into(), with(format!("POST /rpc HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n", t.admin, status.len()).into_bytes()), (415, Some("invalid_request"))),
        ("GET /rpc".into(), format!("GET /rpc HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n", t.admin).into_bytes(), (405, None)),
        ("an unknown path".into(), format!("GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n", t.admin).into_bytes(), (404, None)),
        ("not HTTP at all".into(), b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 hello\r\n\r\n".to_vec(), (400, None)),
    ];
    for (what, bytes, expect) in &raw {
        match send_raw(server.addr, bytes) {
            Ok(r) => {
                assert_eq!(r.status, expect.0, "{what}: {}", r.text());
                if let Some(code) = expect.1 {
                    assert_eq!(r.code().as_deref(), Some(code), "{what}: {}", r.text());
                    // The token is never repeated back.
                    assert!(!r.text().contains(&t.admin), "{what}: the reply repeats the token");
                }
            }
            // Refusing by closing is allowed where hyper refuses before any handler runs (a 431 or
            // 400 is the documented answer when it gets out).
            Err(e) => assert!(matches!(expect.0, 400 | 431), "{what}: no response: {e}"),
        }
        still_serving(what, &server);
    }
    // Tokens for the wrong grant: the credential is valid, the method is not in its grant.
    let grants: &[(&str, &str, &str, Value)] = &[
        ("observer", &t.observer, "submit", json!({"task": "x"})),
        ("observer", &t.observer, "interrupt", Value::Null),
        ("observer", &t.observer, "shutdown", Value::Null),
        ("observer", &t.observer, "release", Value::Null),
        ("controller", &t.controller, "shutdown", Value::Null),
        ("blind", &t.blind, "subscribe", Value::Null),
        ("blind", &t.blind, "submit", json!({"task": "x"})),
    ];
    for (who, token, method, params) in grants {
        let r = client::call(server.addr, Some(token), method, params.clone());
        // A JSON-RPC error, answered 200 like every JSON-RPC reply.
        check_reply(&format!("{who} calling {method}"), &r, (200, Some("forbidden")));
        still_serving(method, &server);
    }
    // Events: no token, a wrong token, and a credential without events.
    for (what, token, expect) in [("no token", None, (401, "unauthorized")), ("wrong token", Some("nope"), (401, "unauthorized")), ("blind credential", Some(t.blind.as_str()), (403, "forbidden"))] {
        let sse = Sse::open(server.addr, token, None).expect("GET /events answers");
        assert_eq!(sse.status, expect.0, "events with {what}");
        assert_eq!(sse.refused.as_ref().and_then(Resp::code).as_deref(), Some(expect.1), "events with {what}");
    }
    // The WebSocket: refused before the upgrade without a valid token; an observer's submit is
    // forbidden there too.
    for (what, token) in [("no token", None), ("wrong token", Some("nope"))] {
        match Ws::connect(server.addr, token) {
            Err(WsRefused::Status(s)) => assert_eq!(s, 401, "WebSocket with {what}"),
            Err(WsRefused::Other(e)) => panic!("WebSocket with {what}: {e}"),
            Ok(_) => panic!("WebSocket with {what} was accepted"),
        }
    }
    let mut ws = Ws::connect(server.addr, Some(&t.observer)).unwrap_or_else(|e| panic!("observer WebSocket: {e:?}"));
    let r = ws.call(7, "submit", json!({"task": "x"})).expect("a response");
    assert_eq!(r["error"]["data"]["code"], "forbidden", "{r}");
    for bad in ["{", "[]", "\u{0}", r#"{"id":8,"method":"nope"}"#] {
        ws.send(bad).expect("sent");
    }
    let r = ws.call(9, "status", Value::Null).expect("still answering after garbage");
    assert!(r.get("result").is_some(), "{r}");
    ws.close();
    still_serving("after the WebSocket", &server);
}

#[test]
fn slow_and_half_open_senders_are_cut_off_and_never_hold_the_runtime() {
    let setup = Setup::new("slow");
    let server = setup.http();
    let admin = setup.tokens.admin.clone();
    let addr = server.addr;
    // A sender of one header byte a second.
    let slow = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).expect("connect");
        let started = Instant::now();
        let head = b"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        for b in head.iter() {
            if s.write_all(&[*b]).is_err() {
                return started.elapsed();
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        // Still open after 30 s of trickling: report that.
        Duration::from_secs(999)
    });
    // A half-open connection: a partial header, then nothing.
    let mut silent = TcpStream::connect(addr).expect("connect");
    silent.write_all(b"POST /rpc HTTP/1.1\r\nHost: x\r\n").expect("partial header");
    silent.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let silent_started = Instant::now();
    // A stalled body: complete headers announcing 100 bytes, 10 sent.
    let mut stalled = client::connect(addr).expect("connect");
    stalled.write_all(rpc_head(Some(&admin), 100, "").as_bytes()).expect("head");
    stalled.write_all(br#"{"id":1,"m"#).expect("part of the body");
    let stalled_started = Instant::now();
    // Meanwhile everyone else is served.
    for i in 0..20 {
        let s = server.status();
        assert_eq!(s["state"], "idle", "request {i} while slow senders hold connections");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The silent one is closed at the header read timeout (EOF, a reset, or a 408).
    let mut buf = [0u8; 512];
    let n = silent.read(&mut buf).unwrap_or(0);
    let closed_after = silent_started.elapsed();
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(n == 0 || text.starts_with("HTTP/1.1 408"), "the silent connection got {text:?}");
    assert!(closed_after >= HEADER_READ_TIMEOUT - Duration::from_secs(1) && closed_after < HEADER_READ_TIMEOUT + Duration::from_secs(5), "the silent connection was closed after {closed_after:?}");
    // The byte-a-second sender too: the timeout counts from the first byte, not the last.
    let cut_after = slow.join().expect("slow sender");
    assert!(cut_after < HEADER_READ_TIMEOUT + Duration::from_secs(5), "the slow sender was cut off after {cut_after:?}");
    // The stalled body gets `408` with a typed `timeout` at the body read timeout.
    let mut raw = Vec::new();
    stalled.set_read_timeout(Some(BODY_READ_TIMEOUT + Duration::from_secs(10))).expect("timeout");
    let _ = stalled.read_to_end(&mut raw);
    let waited = stalled_started.elapsed();
    let r = client::parse_response(&raw).unwrap_or_else(|| panic!("no response to the stalled body: {:?}", String::from_utf8_lossy(&raw)));
    assert_eq!((r.status, r.code().as_deref()), (408, Some("timeout")), "{}", r.text());
    assert!(waited >= BODY_READ_TIMEOUT - Duration::from_secs(1) && waited < BODY_READ_TIMEOUT + Duration::from_secs(5), "answered after {waited:?}");
    still_serving("after the slow senders", &server);
}

#[test]
fn idle_connections_past_the_cap_give_their_places_to_an_authenticated_client_and_are_released() {
    let setup = Setup::new("conns");
    let server = setup.http();
    server.status();
    let baseline = settled_fd_count(server.pid);
    // Every connection here comes from one peer (127.0.0.1): it may hold MAX_CONNECTIONS_PER_PEER
    // of the listener's MAX_CONNECTIONS slots.
    let cap = MAX_CONNECTIONS_PER_PEER.min(MAX_CONNECTIONS);
    let mut idle = Vec::new();
    for _ in 0..cap {
        idle.push(TcpStream::connect(server.addr).expect("connect"));
    }
    // Wait until the server holds every one of them.
    wait_for(Duration::from_secs(5), || (fd_count(server.pid) >= baseline + cap).then_some(())).unwrap_or_else(|| panic!("the server holds {} descriptors, expected {}", fd_count(server.pid), baseline + cap));
    // The next one, with a token, takes the place of an idle one that never authenticated (on
    // loopback every local process is the same peer): it is served at once.
    let started = Instant::now();
    let r = send_raw(server.addr, &{
        let mut b = rpc_head(Some(&setup.tokens.admin), 26, "").into_bytes();
        b.extend_from_slice(br#"{"id":1,"method":"status"}"#);
        b
    });
    let r = r.unwrap_or_else(|e| panic!("connection {} was not served: {e}", cap + 1));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(started.elapsed() < Duration::from_secs(3), "connection {} took {:?} to be served", cap + 1, started.elapsed());
    // When they go, the runtime holds no more descriptors than before.
    drop(idle);
    wait_for(Duration::from_secs(10), || (fd_count(server.pid) <= baseline).then_some(())).unwrap_or_else(|| panic!("descriptors: {} after the connections closed, {baseline} before", fd_count(server.pid)));
    let s = server.status();
    assert_eq!(s["state"], "idle");
}

#[test]
fn stdio_hostile_lines_get_their_documented_errors_and_the_runtime_keeps_serving() {
    let setup = Setup::new("stdio");
    let mut server = setup.stdio();
    let status_line = r#"{"id":"s","method":"status"}"#;
    let cases: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
        ("a line at SERVER_MAX_LINE_BYTES", padded(status_line, SERVER_MAX_LINE_BYTES), None),
        ("a line one byte past SERVER_MAX_LINE_BYTES", padded(status_line, SERVER_MAX_LINE_BYTES + 1), Some("frame_too_large")),
        ("a 20 MiB line", padded(status_line, 20 << 20), Some("frame_too_large")),
        ("invalid UTF-8", b"{\"id\":1,\"method\":\"submit\",\"params\":{\"task\":\"\xff\"}}".to_vec(), Some("parse_error")),
        ("nested 100000 arrays deep", format!(r#"{{"id":1,"method":"status","params":{}}}"#, deep(100_000, "[", "]")).into_bytes(), Some("parse_error")),
        ("unknown method", br#"{"id":1,"method":"nope"}"#.to_vec(), Some("unknown_method")),
        ("null id", br#"{"id":null,"method":"status"}"#.to_vec(), None),
        ("truncated JSON", br#"{"id":1,"meth"#.to_vec(), Some("parse_error")),
        ("duplicate method", br#"{"id":1,"method":"status","method":"shutdown"}"#.to_vec(), Some("invalid_request")),
        ("a smuggled command", br#"{"id":1,"method":"submit","params":{"task":"x","command":"/bin/sh"}}"#.to_vec(), Some("invalid_params")),
        ("cwd ../../etc", br#"{"id":1,"method":"submit","params":{"task":"x","cwd":"../../etc"}}"#.to_vec(), Some("invalid_params")),
    ];
    for (what, line, code) in &cases {
        let r = server.call(line);
        match code {
            None => assert!(r.get("result").is_some(), "{what}: {r}"),
            Some(c) => assert_eq!(r["error"]["data"]["code"], *c, "{what}: {r}"),
        }
        let s = server.call(br#"{"id":"after","method":"status"}"#);
        assert_eq!(s["id"], "after", "{what}: {s}");
        assert_ne!(s["result"]["state"], "shutting_down", "{what}");
    }
    // Bytes past the limit were discarded unread and the next line on the same stream works: a
    // turn still runs to the end.
    let r = server.call(br#"{"id":"t","method":"submit","params":{"task":"still here"}}"#);
    assert_eq!(r["result"]["result"], "still here", "{r}");
    assert!(server.close(Duration::from_secs(10)).is_some_and(|s| s.success()), "serve --stdio did not exit cleanly at end of input");
    eprintln!("stdio: {} hostile lines", cases.len());
}
