//! End-to-end tests of the HTTP transport over real loopback sockets: `POST /rpc` and
//! `GET /events` against in-process engines (and one real runner), each error with its
//! documented status and typed body, and the runtime still serving afterwards.

mod common;

use std::time::{Duration, Instant};

use common::*;
use openagents_protocol::{RuntimeState, VERSION};
use openagents_runner::{Registry, RunnerHost};
use openagents_server::{EngineConfig, RpcEngine, RunnerAgent, RuntimeStatus, SERVER_EVENT_CHANNEL_CAPACITY, SERVER_MAX_LINE_BYTES};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

// ---------------------------------------------------------------------------------------------
// Authentication and grants
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Req {
    Call(&'static str),
    Events,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_matrix() {
    let (engine, _gate) = scripted_engine();
    let http = Http::start(&engine).await;
    let bearer = |t: &str| Some(format!("Bearer {t}"));
    const WRONG: &str = "tok-wrong-SECRET-31337";
    // (who, Authorization header, request, HTTP status, typed error code)
    type Case = (&'static str, Option<String>, Req, u16, Option<&'static str>);
    let cases: Vec<Case> = vec![
        ("no token", None, Req::Call("status"), 401, Some("unauthorized")),
        ("no token", None, Req::Events, 401, Some("unauthorized")),
        ("wrong token", bearer(WRONG), Req::Call("status"), 401, Some("unauthorized")),
        ("wrong token", bearer(WRONG), Req::Events, 401, Some("unauthorized")),
        ("wrong scheme", Some(format!("Basic {ADMIN}")), Req::Call("status"), 401, Some("unauthorized")),
        ("empty bearer", Some("Bearer ".into()), Req::Call("status"), 401, Some("unauthorized")),
        ("observer", bearer(OBSERVER), Req::Call("submit"), 200, Some("forbidden")),
        ("observer", bearer(OBSERVER), Req::Call("interrupt"), 200, Some("forbidden")),
        ("observer", bearer(OBSERVER), Req::Call("release"), 200, Some("forbidden")),
        ("observer", bearer(OBSERVER), Req::Call("shutdown"), 200, Some("forbidden")),
        ("observer", bearer(OBSERVER), Req::Call("status"), 200, None),
        ("observer", bearer(OBSERVER), Req::Events, 200, None),
        ("controller", bearer(CTL_A), Req::Call("shutdown"), 200, Some("forbidden")),
        ("controller", bearer(CTL_A), Req::Call("status"), 200, None),
        ("controller", bearer(CTL_A), Req::Call("interrupt"), 200, None),
        ("controller", bearer(CTL_A), Req::Call("release"), 200, None),
        ("controller", bearer(CTL_A), Req::Events, 200, None),
        ("status-only", bearer(STATUS_ONLY), Req::Call("status"), 200, None),
        ("status-only", bearer(STATUS_ONLY), Req::Call("submit"), 200, Some("forbidden")),
        ("status-only", bearer(STATUS_ONLY), Req::Events, 403, Some("forbidden")),
        ("status-only", bearer(STATUS_ONLY), Req::Call("subscribe"), 200, Some("forbidden")),
        // `subscribe` is for streaming connections; over HTTP it is GET /events.
        ("observer", bearer(OBSERVER), Req::Call("subscribe"), 200, Some("invalid_request")),
        ("admin, lower-case scheme", Some(format!("bearer {ADMIN}")), Req::Call("status"), 200, None),
        ("admin", bearer(ADMIN), Req::Call("status"), 200, None),
        ("admin", bearer(ADMIN), Req::Call("submit"), 200, None),
        ("admin", bearer(ADMIN), Req::Call("interrupt"), 200, None),
        ("admin", bearer(ADMIN), Req::Call("release"), 200, None),
        ("admin", bearer(ADMIN), Req::Events, 200, None),
    ];
    for (who, auth, req, status, code) in cases {
        let what = format!("{who} {req:?}");
        let headers: Vec<(&str, String)> = auth.iter().map(|a| ("authorization", a.clone())).collect();
        let (got_status, resp_headers, body) = match req {
            Req::Call(method) => {
                let params = if method == "submit" { json!({"task": "hello"}) } else { Value::Null };
                let mut body = json!({"jsonrpc": "2.0", "id": 1, "method": method});
                if !params.is_null() {
                    body["params"] = params;
                }
                let mut h = headers.clone();
                h.push(("content-type", "application/json".into()));
                let r = http.request("POST", "/rpc", &h, body.to_string()).await;
                (r.status, r.headers, r.body)
            }
            // A granted stream never ends: keep only its head.
            Req::Events => match http.events_with(&headers, Since::Now).await {
                Ok((h, _sse)) => (200, h, Vec::new()),
                Err(r) => (r.status, r.headers, r.body),
            },
        };
        let text = String::from_utf8_lossy(&body).into_owned();
        assert_eq!(got_status, status, "{what}: {text}");
        // A presented token never comes back, in the body or any header.
        if let Some(a) = &auth {
            let token = a.split_once(' ').map_or(a.as_str(), |(_, t)| t).trim();
            if !token.is_empty() {
                assert!(!text.contains(token), "{what}: the response repeats the token: {text}");
                for (name, value) in &resp_headers {
                    assert!(!value.to_str().unwrap_or("").contains(token), "{what}: header {name} repeats the token");
                }
            }
        }
        if status == 401 {
            assert_eq!(resp_headers.get("www-authenticate").and_then(|v| v.to_str().ok()), Some("Bearer"), "{what}");
        }
        if let Some(code) = code {
            let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {text}"));
            // Refused before the request is read: no id; refused by the engine: the id echoed.
            let id = if matches!(req, Req::Call(_)) && status != 401 { json!(1) } else { Value::Null };
            assert_eq!(v["id"], id, "{what}: {v}");
            check_error_object(&v["error"]);
            assert_eq!(v["error"]["data"]["code"], code, "{what}: {v}");
            if code == "forbidden" {
                let method = if let Req::Call(m) = req { m } else { "events" };
                assert!(v["error"]["data"]["message"].as_str().unwrap().contains(method), "{what}: the message names what was refused: {v}");
            }
        } else if let Req::Call(_) = req {
            let v: Value = serde_json::from_str(&text).unwrap();
            assert!(v.get("result").is_some(), "{what}: {v}");
        }
        http.assert_serving().await;
    }
    // Admin may also shut the runtime down (and then nothing is served).
    let r = http.call(ADMIN, "shutdown", Value::Null).await;
    assert_eq!(r.result(), json!({"shutting_down": true}));
    assert_listener_closes(&http).await;
}

/// A connection kept alive between requests is closed when the runtime shuts down, not left
/// waiting for a request that would never be served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_at_shutdown() {
    let (engine, _gate) = scripted_engine();
    let http = Http::start(&engine).await;
    let mut idle = within("connecting", TcpStream::connect(http.addr)).await.expect("connect");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#;
    let req = format!("POST /rpc HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ADMIN}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len());
    idle.write_all(req.as_bytes()).await.expect("write");
    // The whole response: its head, then as many bytes as its Content-Length says.
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let complete = |got: &[u8]| {
        let text = String::from_utf8_lossy(got);
        let Some(end) = text.find("\r\n\r\n") else { return false };
        let length = text[..end].lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)));
        length.is_some_and(|n| got.len() >= end + 4 + n)
    };
    while !complete(&got) {
        let n = within("the status response", idle.read(&mut buf)).await.expect("read");
        assert!(n > 0, "closed before the response was whole: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&got));
    engine.shutdown().await;
    // Well before the header-read timeout (HEADER_READ_TIMEOUT), which would close it anyway.
    let n = tokio::time::timeout(Duration::from_secs(3), idle.read(&mut buf)).await.expect("the idle connection closed within 3 s of shutdown").expect("read");
    assert_eq!(n, 0, "the runtime is shutting down, yet the idle connection got: {}", String::from_utf8_lossy(&buf[..n]));
}

/// Asserts the accept loop has stopped: within `STEP`, a new connection is refused, and no
/// connection made before that is served.
async fn assert_listener_closes(http: &Http) {
    within("the listener to close", async {
        loop {
            match TcpStream::connect(http.addr).await {
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return,
                // Queued in the backlog as the listener closed: try again.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => tokio::task::yield_now().await,
                Err(e) => panic!("connecting after shutdown: {e}"),
                Ok(mut s) => {
                    // Accepted (or queued) before the loop noticed: it must not be served.
                    let req = format!("POST /rpc HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ADMIN}\r\ncontent-type: application/json\r\ncontent-length: 17\r\n\r\n{{\"method\":\"status\"}}");
                    let _ = s.write_all(req.as_bytes()).await;
                    let mut out = Vec::new();
                    let _ = s.read_to_end(&mut out).await;
                    assert!(!String::from_utf8_lossy(&out).starts_with("HTTP/1.1 200"), "served after shutdown: {}", String::from_utf8_lossy(&out));
                    tokio::task::yield_now().await;
                }
            }
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Bodies, content types, paths, malformed HTTP
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_limits_content_types_and_paths() {
    let (engine, _gate) = scripted_engine();
    let http = Http::start(&engine).await;

    // A valid request padded with spaces to exactly SERVER_MAX_LINE_BYTES is served.
    let mut body = br#"{"jsonrpc":"2.0","id":"big","method":"status"}"#.to_vec();
    body.resize(SERVER_MAX_LINE_BYTES, b' ');
    let r = http.post(Some(ADMIN), body.clone()).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["id"], "big");
    assert_eq!(r.result()["state"], "idle");

    // One byte more is refused whole, at once on its declared length: the answer comes before
    // any of the body is sent (a client still writing it may see its connection closed).
    let head = format!(
        "POST /rpc HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ADMIN}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        SERVER_MAX_LINE_BYTES + 1
    );
    let got = http.raw(head.as_bytes()).await;
    assert!(got.starts_with("HTTP/1.1 413"), "{got}");
    assert!(got.contains("\"frame_too_large\""), "{got}");
    http.assert_serving().await;

    // Content types: (Content-Type, status, code).
    let status_req = r#"{"id":1,"method":"status"}"#;
    let auth = ("authorization", format!("Bearer {ADMIN}"));
    let cases: &[(Option<&str>, u16, Option<&str>)] = &[
        (None, 415, Some("invalid_request")),
        (Some("text/plain"), 415, Some("invalid_request")),
        (Some("application/x-www-form-urlencoded"), 415, Some("invalid_request")),
        (Some("application/jsonx"), 415, Some("invalid_request")),
        (Some("application/json"), 200, None),
        (Some("application/json; charset=utf-8"), 200, None),
        (Some("Application/JSON"), 200, None),
    ];
    for (ct, status, code) in cases {
        let mut headers = vec![auth.clone()];
        if let Some(ct) = ct {
            headers.push(("content-type", (*ct).to_owned()));
        }
        let r = http.request("POST", "/rpc", &headers, status_req).await;
        assert_eq!(r.status, *status, "{ct:?}: {}", String::from_utf8_lossy(&r.body));
        match code {
            Some(code) => assert_eq!(r.error()["data"]["code"], *code, "{ct:?}"),
            None => assert_eq!(r.result()["state"], "idle"),
        }
        http.assert_serving().await;
    }

    // Paths and verbs: (verb, path, status).
    let cases: &[(&str, &str, u16)] = &[
        ("POST", "/nope", 404),
        ("GET", "/", 404),
        ("POST", "/rpc/extra", 404),
        ("GET", "/event", 404),
        ("POST", "/RPC", 404),
        ("GET", "/rpc", 405),
        ("POST", "/events", 405),
    ];
    for (verb, path, status) in cases {
        let headers = vec![auth.clone(), ("content-type", "application/json".to_owned())];
        let r = http.request(verb, path, &headers, status_req).await;
        assert_eq!(r.status, *status, "{verb} {path}");
        http.assert_serving().await;
    }

    // Malformed HTTP on raw sockets: (bytes, expected status line prefix).
    let many_headers: String = (0..120).map(|i| format!("x-h{i}: v\r\n")).collect();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"NOT HTTP AT ALL\r\n\r\n".to_vec(), "HTTP/1.1 400"),
        (b"\x00\x01\x02\x03\r\n\r\n".to_vec(), "HTTP/1.1 400"),
        (format!("GET /events HTTP/1.1\r\nhost: x\r\n{many_headers}\r\n").into_bytes(), "HTTP/1.1 431"),
        (format!("POST /rpc HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ADMIN}\r\ncontent-type: application/json\r\ncontent-length: nope\r\n\r\n").into_bytes(), "HTTP/1.1 400"),
    ];
    for (bytes, want) in cases {
        let got = http.raw(&bytes).await;
        assert!(got.starts_with(want), "{:?}: got {got:?}", String::from_utf8_lossy(&bytes));
        http.assert_serving().await;
    }
}

// ---------------------------------------------------------------------------------------------
// Request decoding
// ---------------------------------------------------------------------------------------------

struct Decode {
    body: &'static str,
    status: u16,
    /// The typed error code, or `None` for a result.
    code: Option<&'static str>,
    id: Value,
    jsonrpc: bool,
    /// JSON pointers `error.data.details.violations` must name.
    pointers: &'static [&'static str],
}

fn check_decode(r: &Resp, case: &Decode) {
    let what = case.body;
    assert_eq!(r.status, case.status, "{what}: {}", String::from_utf8_lossy(&r.body));
    if case.status == 204 {
        // A notification: it ran, and gets no reply.
        assert!(r.body.is_empty(), "{what}: a notification gets no body: {}", String::from_utf8_lossy(&r.body));
        return;
    }
    let v = r.json();
    assert_eq!(v["id"], case.id, "{what}: the id is echoed: {v}");
    assert_eq!(v.get("jsonrpc").cloned(), case.jsonrpc.then(|| json!("2.0")), "{what}: {v}");
    match case.code {
        None => assert!(v.get("result").is_some() && v.get("error").is_none(), "{what}: {v}"),
        Some(code) => {
            let e = r.error();
            assert_eq!(e["data"]["code"], code, "{what}: {v}");
            let violations = e["data"]["details"]["violations"].as_array().cloned().unwrap_or_default();
            if code == "invalid_params" {
                assert!(!violations.is_empty(), "{what}: invalid_params names its violations: {v}");
                for viol in &violations {
                    assert!(viol["pointer"].is_string() && viol["keyword"].is_string() && viol["message"].is_string(), "{what}: {viol}");
                }
            }
            let pointers: Vec<&str> = violations.iter().filter_map(|x| x["pointer"].as_str()).collect();
            for p in case.pointers {
                assert!(pointers.contains(p), "{what}: expected a violation at {p}, got {pointers:?}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_decoding() {
    let (engine, _gate) = scripted_engine();
    let http = Http::start(&engine).await;
    let d = |body, status, code, id: Value, jsonrpc, pointers| Decode { body, status, code, id, jsonrpc, pointers };
    let cases = [
        d(r#"{"id":1,"method":"status""#, 200, Some("parse_error"), Value::Null, true, &[]),
        d("not json", 200, Some("parse_error"), Value::Null, true, &[]),
        d("", 200, Some("parse_error"), Value::Null, true, &[]),
        d(r#""status""#, 200, Some("invalid_request"), Value::Null, true, &[]),
        d(r#"{"id":8}"#, 200, Some("invalid_request"), json!(8), true, &[]),
        d(r#"{"id":9,"method":5}"#, 200, Some("invalid_request"), json!(9), true, &[]),
        d(r#"{"id":"x","method":"nope"}"#, 200, Some("unknown_method"), json!("x"), true, &[]),
        d(r#"{"id":7,"method":"nope"}"#, 200, Some("unknown_method"), json!(7), true, &[]),
        d(r#"{"id":-3,"method":"Status"}"#, 200, Some("unknown_method"), json!(-3), true, &[]),
        d(r#"{"jsonrpc":"2.0","id":3,"method":"nope"}"#, 200, Some("unknown_method"), json!(3), true, &[]),
        d(r#"{"method":"nope"}"#, 204, None, Value::Null, true, &[]),
        d(r#"{"id":4,"method":"submit","params":{}}"#, 200, Some("invalid_params"), json!(4), true, &["/params"]),
        d(r#"{"id":"p","method":"submit","params":{"task":5}}"#, 200, Some("invalid_params"), json!("p"), true, &["/params/task"]),
        d(r#"{"jsonrpc":"2.0","id":5,"method":"submit","params":{"task":"x","cwd":"relative"}}"#, 200, Some("invalid_params"), json!(5), true, &["/params/cwd"]),
        d(r#"{"id":6,"method":"submit","params":{"task":"x","shell":true}}"#, 200, Some("invalid_params"), json!(6), true, &["/params/shell"]),
        d(r#"{"id":10,"method":"status","params":{"x":1}}"#, 200, Some("invalid_params"), json!(10), true, &["/params/x"]),
        // `[]` is no params (an empty by-position list); a list with something in it is refused.
        d(r#"{"id":11,"method":"status","params":[1]}"#, 200, Some("invalid_params"), json!(11), true, &["/params"]),
        d(r#"{"id":12,"method":"status","extra":1}"#, 200, Some("invalid_request"), json!(12), true, &[]),
        d(r#"{"jsonrpc":"1.0","id":13,"method":"status"}"#, 200, Some("invalid_request"), json!(13), true, &[]),
        d(r#"{"id":{"a":1},"method":"status"}"#, 200, Some("invalid_request"), Value::Null, true, &[]),
        d(r#"{"id":[1],"method":"status"}"#, 200, Some("invalid_request"), Value::Null, true, &[]),
        d(r#"{"id":1.5,"method":"status"}"#, 200, None, json!(1.5), true, &[]),
        d(r#"{"id":1,"id":2,"method":"status"}"#, 200, Some("invalid_request"), Value::Null, true, &[]),
        d(r#"{"jsonrpc":"2.0","id":6,"method":"status"}"#, 200, None, json!(6), true, &[]),
        d(r#"{"id":"s","method":"status","params":null}"#, 200, None, json!("s"), true, &[]),
        d(r#"{"method":"status","params":{}}"#, 204, None, Value::Null, true, &[]),
        d(r#"{"id":null,"method":"interrupt"}"#, 200, None, Value::Null, true, &[]),
    ];
    for case in &cases {
        let r = http.post(Some(ADMIN), case.body).await;
        check_decode(&r, case);
        http.assert_serving().await;
    }
}

// ---------------------------------------------------------------------------------------------
// Interrupt, busy, shutdown
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_while_submit_is_in_flight() {
    let (engine, _gate) = scripted_engine();
    let http = Http::start(&engine).await;
    // Nothing running: nothing interrupted.
    assert_eq!(http.call(CTL_A, "interrupt", Value::Null).await.result(), json!({"interrupted": false}));

    let mut sub = engine.subscribe(None);
    let submit = tokio::spawn(async move { http.submit(CTL_A, "wait").await });
    wait_for_kind(&mut sub, "turn_started").await;

    // A second submit while busy, from the same controller.
    let busy = http.submit(CTL_A, "again").await;
    assert_eq!(busy.status, 200);
    assert_eq!(busy.error()["data"]["code"], "busy");
    // Observers may not interrupt.
    assert_eq!(http.call(OBSERVER, "interrupt", Value::Null).await.error()["data"]["code"], "forbidden");
    let st = http.status().await;
    assert_eq!(st["state"], "running", "{st}");
    assert!(st["active_turn"]["assignment"].is_string(), "{st}");

    assert_eq!(http.call(CTL_A, "interrupt", Value::Null).await.result(), json!({"interrupted": true}));
    let r = within("the interrupted submit", submit).await.unwrap();
    assert_eq!(r.status, 200);
    let e = r.error();
    assert_eq!(e["data"]["code"], "interrupted", "{e}");
    assert_eq!(e["data"]["retryable"], true);
    let failed = wait_for_kind(&mut sub, "turn_failed").await;
    assert_eq!(failed.last().unwrap()["event"]["error"]["code"], "interrupted");

    assert_eq!(http.call(CTL_A, "interrupt", Value::Null).await.result(), json!({"interrupted": false}));
    let st = http.status().await;
    assert_eq!(st["state"], "idle", "{st}");
    assert_eq!(st["active_turn"], Value::Null);
    assert_eq!(st["counters"], json!({"submitted": 1, "completed": 0, "failed": 0, "interrupted": 1}));
    // And the runtime takes the next turn.
    assert_eq!(http.submit(CTL_A, "hello").await.result()["result"], "done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_during_a_turn() {
    let (engine, _gate) = scripted_engine();
    let http = Http::start(&engine).await;
    let mut sse = http.subscribe(OBSERVER, Since::Now).await;
    let submit = tokio::spawn(async move { http.submit(ADMIN, "wait").await });
    sse.until("turn_started").await;

    assert_eq!(http.call(ADMIN, "shutdown", Value::Null).await.result(), json!({"shutting_down": true}));
    let r = within("the interrupted submit", submit).await.unwrap();
    assert_eq!(r.error()["data"]["code"], "interrupted");

    // The stream delivers the turn's end, then the final event, then ends.
    let rest = sse.rest().await;
    let kinds: Vec<&str> = rest.iter().map(SseEvent::kind).collect();
    assert_eq!(kinds, ["turn_failed", "shutting_down"], "{rest:?}");
    assert_eq!(rest[0].data["event"]["error"]["code"], "interrupted");
    assert!(engine.is_shut_down());
    assert_eq!(engine.status().state, RuntimeState::ShuttingDown);
    assert_listener_closes(&http).await;
    // A second shutdown (in process) is harmless.
    assert!(engine.shutdown().await.shutting_down);
}

// ---------------------------------------------------------------------------------------------
// SSE
// ---------------------------------------------------------------------------------------------

/// Events faster than a stream writes them are held and sent in larger chunks (a busy stream
/// waits up to `SSE_HOLD` after its previous chunk): every subscriber still gets every event,
/// each once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_sse_streams_deliver_every_event_once_and_in_order() {
    let (engine, _gate) = scripted_engine();
    let http = Http::start(&engine).await;
    let mut streams = Vec::new();
    for _ in 0..4 {
        streams.push(http.subscribe(OBSERVER, Since::Now).await);
    }
    // 1,000 events and the turn's two: within the hub's buffer, so none may be missed; published
    // ten at a time, so the streams are woken while busy and hold.
    assert_eq!(http.submit(ADMIN, "paced:1000").await.result()["result"], "done");
    for sse in &mut streams {
        let got = sse.until("turn_completed").await;
        assert_contiguous(&got, 1, 1002);
        assert!(got.iter().all(|e| e.kind() != "lagged"), "a subscriber lagged");
        assert_eq!(got[1000].data["event"], json!({"type": "text", "text": "t999"}));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_resume_after_a_dropped_connection() {
    let resumes: [fn(i64) -> Since; 2] = [Since::Header, Since::Query];
    for resume in resumes {
        let (engine, gate) = scripted_engine();
        let http = Http::start(&engine).await;
        let mut reference = engine.subscribe(None);
        let mut sse = http.subscribe(OBSERVER, Since::Now).await;
        let submit = tokio::spawn(async move { http.submit(ADMIN, "burst:5 gate burst:5 gate burst:5").await });

        // Read the start, then drop the connection mid-turn.
        let mut seen = Vec::new();
        while seen.len() < 4 {
            seen.push(sse.next().await.expect("an event"));
        }
        assert_contiguous(&seen, 1, 4);
        assert_eq!(seen[0].kind(), "turn_started");
        assert_eq!(seen[1].data["event"], json!({"type": "text", "text": "t0"}));
        drop(sse);

        // Events go on while nobody is connected: the agent passes the first gate and stops
        // at the second (after 1 + 10 events).
        gate.open();
        let mut expected: Vec<Value> = Vec::new();
        while expected.len() < 11 {
            expected.push(event_value(&within("an event", reference.next()).await.unwrap()));
        }

        // Resume: the missed events from the replay buffer, then live ones, each once.
        let mut resumed = http.subscribe(OBSERVER, resume(4)).await;
        let mut got = Vec::new();
        while got.len() < 7 {
            got.push(resumed.next().await.expect("a replayed event"));
        }
        gate.open();
        got.extend(resumed.until("turn_completed").await);
        expected.extend(wait_for_kind(&mut reference, "turn_completed").await);
        assert_contiguous(&got, 5, 17);
        let got_data: Vec<&Value> = got.iter().map(|e| &e.data).collect();
        let want: Vec<&Value> = expected[4..].iter().collect();
        assert_eq!(got_data, want, "{:?}", resume(4));
        assert_eq!(within("the submit", submit).await.unwrap().result()["result"], "done");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_older_than_the_replay_buffer_gets_a_gap() {
    let (engine, _gate) = scripted_engine();
    let http = Http::start(&engine).await;
    let n = SERVER_EVENT_CHANNEL_CAPACITY + 76;
    assert_eq!(http.submit(ADMIN, &format!("burst:{n}")).await.result()["result"], "done");
    let last = http.status().await["last_seq"].as_i64().unwrap();
    assert_eq!(last, n as i64 + 2, "turn_started, the texts, turn_completed");
    let oldest = last - SERVER_EVENT_CHANNEL_CAPACITY as i64 + 1;

    // (resume point, expected gap)
    let cases = [(Since::Header(1), Some(1)), (Since::Query(0), Some(0)), (Since::Header(oldest - 2), Some(oldest - 2)), (Since::Query(oldest - 1), None), (Since::Header(500), None)];
    for (from, gap) in cases {
        let mut sse = http.subscribe(OBSERVER, from).await;
        let mut events = sse.until("turn_completed").await;
        let first = match from {
            Since::Header(s) | Since::Query(s) => s + 1,
            Since::Now => unreachable!(),
        };
        match gap {
            Some(since) => {
                let g = events.remove(0);
                assert_eq!(g.kind(), "gap", "{from:?}: {g:?}");
                assert_eq!(g.data["event"], json!({"type": "gap", "since": since, "resumed_at": oldest - 1}), "{from:?}");
                assert_eq!(g.id, Some(oldest - 1), "a client resuming from the gap's id loses nothing more");
                assert_contiguous(&events, oldest, last);
            }
            None => assert_contiguous(&events, first, last),
        }
        assert!(events.iter().all(|e| e.kind() != "gap" && e.kind() != "lagged"), "{from:?}");
    }
    http.assert_serving().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_never_reads_does_not_stall_the_agent() {
    let (engine, _gate) = scripted_engine();
    let http = Http::start(&engine).await;
    // Open the event stream and read only the response head.
    let mut stalled = TcpStream::connect(http.addr).await.unwrap();
    let req = format!("GET /events HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {OBSERVER}\r\n\r\n");
    stalled.write_all(req.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    within("the event stream's head", async {
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(stalled.read(&mut byte).await.unwrap(), 1, "the stream closed");
            head.push(byte[0]);
        }
    })
    .await;
    assert!(head.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&head));
    assert_eq!(http.status().await["subscribers"], 1);

    // 6000 events of 4 KiB: far more than the socket buffers and the broadcast can hold.
    let started = Instant::now();
    let r = http.submit(ADMIN, "big:6000").await;
    assert_eq!(r.result()["result"], "done");
    let took = started.elapsed();
    // A turn that waited for the subscriber would never end (the request's own STEP catches it);
    // the bound is generous, so a starved machine alone does not reach it.
    assert!(took < Duration::from_secs(8), "the turn took {took:?}");
    let st = http.status().await;
    assert_eq!(st["state"], "idle");
    assert_eq!(st["counters"]["completed"], 1);
    assert!(st["last_seq"].as_i64().unwrap() >= 6002, "{st}");

    // When the subscriber finally reads, it is told it missed events.
    within("a lagged notice", async {
        let mut window = Vec::new();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let n = stalled.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the stream ended without a lagged notice");
            window.extend_from_slice(&chunk[..n]);
            let needle = br#""type":"lagged","#;
            if window.windows(needle.len()).any(|w| w == needle) {
                return;
            }
            let keep = window.len().saturating_sub(64);
            window.drain(..keep);
        }
    })
    .await;
    http.assert_serving().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_without_anyone_to_answer_is_denied_and_visible() {
    let (engine, _gate) = scripted_engine();
    assert_eq!(engine.bridge().answerers(), 0, "nobody is attached who could answer");
    let http = Http::start(&engine).await;
    let mut sse = http.subscribe(OBSERVER, Since::Now).await;
    let r = http.submit(ADMIN, "approve").await;
    assert_eq!(r.result()["result"], "denied");
    let events = sse.until("turn_completed").await;
    let kinds: Vec<&str> = events.iter().map(SseEvent::kind).collect();
    assert_eq!(kinds, ["turn_started", "approval_denied", "turn_completed"]);
    let denied = &events[1].data["event"];
    assert_eq!(denied["prompt"], "may I delete /tmp/scratch?");
    assert!(denied["reason"].as_str().unwrap().contains("attached"), "the reason says why: {denied}");
}

// ---------------------------------------------------------------------------------------------
// The controller lease
// ---------------------------------------------------------------------------------------------

/// `r` is refused with `lease_held` by `holder`, whose lease was last taken or renewed with `ttl`.
fn assert_lease_held(r: &Resp, holder: &str, ttl: Duration) {
    assert_eq!(r.status, 200);
    let e = r.error();
    assert_eq!(e["data"]["code"], "lease_held", "{e}");
    assert_eq!(e["data"]["details"]["holder"], holder, "{e}");
    let expires = e["data"]["details"]["expires_at_ms"].as_i64().unwrap_or_else(|| panic!("expires_at_ms: {e}"));
    let now = now_ms();
    // Seconds of slack: enough for a stalled test, still far from a value in other units.
    assert!(expires >= now - 10_000 && expires <= now + ttl.as_millis() as i64 + 10_000, "expires_at_ms {expires} vs now {now}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_controllers_and_the_lease() {
    // Leases run on a long TTL, except where the test waits for one to expire: there it is
    // `TTL`. A lease of a short TTL would expire under any check that it is held, on a stall of
    // the test or the server; a lease keeps the TTL it was taken or renewed with.
    const LONG: Duration = Duration::from_secs(60);
    let (engine, gate) = scripted_engine();
    let http = Http::start(&engine).await;
    engine.set_lease_ttl(LONG);
    assert_eq!(http.status().await["lease"], Value::Null);

    // A takes the lease by submitting.
    assert_eq!(http.submit(CTL_A, "hello").await.result()["result"], "done");
    let st = http.status().await;
    assert_eq!(st["lease"]["holder"], "a", "{st}");
    assert_lease_held(&http.submit(CTL_B, "mine").await, "a", LONG);
    // Only the holder can release it.
    assert_eq!(http.call(CTL_B, "release", Value::Null).await.result(), json!({"released": false}));
    assert_eq!(http.call(CTL_A, "release", Value::Null).await.result(), json!({"released": true}));
    assert_eq!(http.call(CTL_A, "release", Value::Null).await.result(), json!({"released": false}));
    assert_eq!(http.status().await["lease"], Value::Null);

    // B can submit now, and holds it.
    assert_eq!(http.submit(CTL_B, "mine").await.result()["result"], "done");
    assert_eq!(http.status().await["lease"]["holder"], "b");
    assert_lease_held(&http.submit(CTL_A, "hello").await, "b", LONG);

    // B submits once more, renewing its lease with the short TTL, and goes quiet: once that
    // TTL passes, A can submit (and takes the lease with the long TTL again).
    engine.set_lease_ttl(TTL);
    let b_active = Instant::now();
    assert_eq!(http.submit(CTL_B, "mine").await.result()["result"], "done");
    engine.set_lease_ttl(LONG);
    within("b's lease to expire", async {
        loop {
            let r = http.submit(CTL_A, "hello").await;
            if r.json().get("result").is_some() {
                break;
            }
            assert_lease_held(&r, "b", TTL);
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await;
    assert!(b_active.elapsed() >= TTL, "the lease expired after {:?}, before its TTL", b_active.elapsed());
    assert_eq!(http.status().await["lease"]["holder"], "a");

    // A running turn keeps its controller's lease past the TTL: A's submit renews its lease with
    // the short TTL, which passes while the turn runs.
    engine.set_lease_ttl(TTL);
    let mut sub = engine.subscribe(None);
    let turn = tokio::spawn(async move { http.submit(CTL_A, "gate").await });
    wait_for_kind(&mut sub, "turn_started").await;
    let a_active = Instant::now();
    within("the TTL to pass during the turn", async {
        while a_active.elapsed() < TTL + Duration::from_millis(50) {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await;
    assert_eq!(http.status().await["lease"]["holder"], "a");
    assert_lease_held(&http.submit(CTL_B, "mine").await, "a", TTL);
    assert_lease_held(&http.call(CTL_B, "interrupt", Value::Null).await, "a", TTL);
    gate.open();
    assert_eq!(within("a's turn", turn).await.unwrap().result()["result"], "done");
    // The turn is over and the TTL long past: B takes over at once (with the long TTL).
    engine.set_lease_ttl(LONG);
    assert_eq!(http.submit(CTL_B, "mine").await.result()["result"], "done");
    assert_eq!(http.status().await["lease"]["holder"], "b");
}

// ---------------------------------------------------------------------------------------------
// Interoperability
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standard_json_rpc_client_works() {
    use jsonrpsee::core::ClientError;
    use jsonrpsee::core::client::ClientT;
    use jsonrpsee::http_client::{HeaderMap, HeaderValue, HttpClientBuilder};
    use jsonrpsee::rpc_params;

    let (engine, _gate) = scripted_engine();
    let http = Http::start(&engine).await;
    let url = format!("http://{}/rpc", http.addr);
    let client_for = |token: Option<&str>| {
        let mut headers = HeaderMap::new();
        if let Some(t) = token {
            headers.insert("authorization", HeaderValue::from_str(&format!("Bearer {t}")).unwrap());
        }
        HttpClientBuilder::default().set_headers(headers).request_timeout(STEP).build(&url).unwrap()
    };
    let client = client_for(Some(OBSERVER));
    let status: RuntimeStatus = client.request("status", rpc_params![]).await.unwrap();
    assert_eq!(status.state, RuntimeState::Idle);
    assert_eq!(status.schema_version, VERSION);
    assert_eq!(status.limits.max_line_bytes, SERVER_MAX_LINE_BYTES as i64);
    assert_eq!(status.limits.event_channel_capacity, SERVER_EVENT_CHANNEL_CAPACITY as i64);

    // A typed error arrives as a standard error object whose data is the RuntimeSubmitError.
    match client.request::<Value, _>("frobnicate", rpc_params![]).await {
        Err(ClientError::Call(e)) => {
            assert_eq!(e.code(), -32601);
            let data: Value = serde_json::from_str(e.data().expect("error data").get()).unwrap();
            assert_eq!(data["code"], "unknown_method");
        }
        other => panic!("expected a call error, got {other:?}"),
    }
    // Without the token, or without the grant, the request is refused.
    assert!(client_for(None).request::<RuntimeStatus, _>("status", rpc_params![]).await.is_err());
    assert!(client.request::<Value, _>("shutdown", rpc_params![]).await.is_err());

    let admin = client_for(Some(ADMIN));
    let status: RuntimeStatus = admin.request("status", rpc_params![]).await.unwrap();
    assert_eq!(status.counters.submitted, 0);
}

/// `(request line, id)`: each gets the same error object over HTTP and stdio.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typed_error_is_the_same_in_every_transport() {
    let (engine, _gate) = scripted_engine();
    let http = Http::start(&engine).await;
    let mut stdio = Stdio::start(&engine);
    let cases: &[(&str, Value)] = &[
        (r#"{"jsonrpc":"2.0","id":"same","method":"frobnicate"}"#, json!("same")),
        (r#"{"id":2,"method":"status","params":{"verbose":true}}"#, json!(2)),
        (r#"{"id":3,"method":"submit","params":{"task":""}}"#, json!(3)),
        (r#"{"id":4,"method":"#, Value::Null),
    ];
    for (line, id) in cases {
        let over_http = http.post(Some(ADMIN), *line).await.json();
        let over_stdio = stdio.call(line, id.clone()).await;
        assert!(over_http["error"]["data"]["code"].is_string(), "{over_http}");
        assert_eq!(over_http["error"]["data"], over_stdio["error"]["data"], "{line}");
        assert_eq!(over_http, over_stdio, "{line}: the whole response is the same");
    }
    let st = http.status().await;
    assert_eq!(st["counters"]["submitted"], 0, "{st}");
}

// ---------------------------------------------------------------------------------------------
// A real runner
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_agent_with_a_real_child_runner() {
    let echo = echo_runner();
    let registry = Registry::parse(
        &format!("[runners.echo]\ncommand = \"{}\"\n\n[runners.sleepy]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"exec sleep 30\"]\n", echo.display()),
        None,
    )
    .unwrap();
    let config = EngineConfig { default_runner: Some("echo".into()), ..EngineConfig::default() };
    let engine = RpcEngine::with_config(RunnerAgent::new(RunnerHost::new(registry)), config);
    assert!(engine.describe_agent().contains("echo"));
    let http = Http::start(&engine).await;
    let mut sse = http.subscribe(OBSERVER, Since::Now).await;

    let r = http.call(ADMIN, "submit", json!({"task": "hello brave world", "assignment": "asg-1", "conversation": "conv-1"})).await;
    assert_eq!(r.result(), json!({"assignment": "asg-1", "conversation": "conv-1", "result": "hello brave world"}));
    let events = sse.until("turn_completed").await;
    let texts: Vec<&str> = events.iter().filter(|e| e.kind() == "text").map(|e| e.data["event"]["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["hello", "brave", "world"]);
    assert_eq!(events[0].data["event"], json!({"type": "turn_started", "assignment": "asg-1", "conversation": "conv-1", "runner": "echo"}));

    // A runner the registry does not have.
    let r = http.call(ADMIN, "submit", json!({"task": "x", "runner": "nope"})).await;
    let e = r.error();
    assert_eq!(e["data"]["code"], "runner_not_found", "{e}");
    // The caller learns neither the registry's runners nor its path.
    assert_eq!(e["data"]["details"]["known"], Value::Null, "{e}");
    let text = e.to_string();
    assert!(!text.contains("sleepy") && !text.contains("runners.toml"), "{e}");
    assert_eq!(sse.until("turn_failed").await.last().unwrap().data["event"]["error"]["code"], "runner_not_found");

    // Interrupting a real child process.
    let submit = tokio::spawn(async move { http.call(ADMIN, "submit", json!({"task": "zzz", "runner": "sleepy"})).await });
    sse.until("turn_started").await;
    assert_eq!(http.call(ADMIN, "interrupt", Value::Null).await.result(), json!({"interrupted": true}));
    assert_eq!(within("the interrupted runner", submit).await.unwrap().error()["data"]["code"], "interrupted");
    assert_eq!(sse.until("turn_failed").await.last().unwrap().data["event"]["error"]["code"], "interrupted");
    let st = http.status().await;
    assert_eq!(st["counters"], json!({"submitted": 3, "completed": 1, "failed": 1, "interrupted": 1}), "{st}");
}
