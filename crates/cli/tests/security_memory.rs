//! Security round 3, what a request costs before and after its grant check, against the real
//! `openagents serve --http` on loopback: a 16 MB body from the weakest credential (an observer),
//! over `POST /rpc` and as one WebSocket message, costs the server a few times its size at most
//! (not a tree of every value in it), whether it names a method the observer may not call, a
//! method it may call with params that do not fit, or is a "response" no approval asked for; an
//! admin's 16 MB request whose params come before its `method` is read as text, not as a tree;
//! and another client's `status` is answered meanwhile.

mod security_common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use security_common::{ADMIN, BOUND, OBSERVER, Setup};
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// Eight million zeros in an array: 16 MB of text that a tree of values would make 256 MB or
/// more (a value is 32 bytes, and a growing array doubles its room).
const ZEROS: usize = 8_000_000;
/// The most the server's peak resident memory may grow for one such request: the body held
/// once or twice (a WebSocket message is held by the socket and then as text), plus a copy
/// where params must wait for the method, and room for the allocator. Measured: 16 to 32 MB; a
/// tree is over 250 MB.
const GROWTH_BOUND_KB: u64 = 100 * 1024;

fn setup(name: &str) -> (Setup, security_common::Server, SocketAddr) {
    security_common::serve_observer_and_admin(name)
}

/// The peak resident memory of `pid` so far (`VmHWM`), in KiB.
fn peak_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
}

/// `[0,0,…]` of [`ZEROS`] zeros: 16 MB.
fn zeros() -> String {
    let mut out = "0,".repeat(ZEROS);
    out.pop();
    format!("[{out}]")
}

/// `{"jsonrpc":"2.0","id":1,<before>"params":{"task":[0,0,…]}<after>}`: 16 MB.
fn zeros_request(before: &str, after: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":1,{before}"params":{{"task":{}}}{after}}}"#, zeros())
}

/// `POST /rpc` of `body` with `token`: the status code and the JSON body of the answer.
fn post(addr: SocketAddr, token: &str, body: &str) -> (u16, Value) {
    let mut stream = TcpStream::connect_timeout(&addr, BOUND).expect("connects");
    stream.set_read_timeout(Some(BOUND)).expect("a read timeout");
    let head = format!(
        "POST /rpc HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).expect("writes the head");
    stream.write_all(body.as_bytes()).expect("writes the body");
    let mut out = Vec::new();
    stream.read_to_end(&mut out).expect("reads the answer");
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let json = text.split_once("\r\n\r\n").and_then(|(_, b)| serde_json::from_str(b.trim()).ok()).unwrap_or(Value::Null);
    (code, json)
}

/// The error code (`data.code`) of a JSON-RPC error answer.
fn error_code(answer: &Value) -> &str {
    answer["error"]["data"]["code"].as_str().unwrap_or("")
}

/// Sends `body` as one WebSocket text message with `token`, then `status` (which must be
/// answered, so the server is known to have read the big one); the big message's answer when it
/// has one.
fn over_websocket(addr: SocketAddr, token: &str, body: String) -> Option<Value> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    rt.block_on(async move {
        let mut request = format!("ws://{addr}/frontend/v2").into_client_request().expect("a request");
        request.headers_mut().insert("authorization", format!("Bearer {token}").parse().expect("a header"));
        let (mut ws, _) = tokio::time::timeout(BOUND, tokio_tungstenite::connect_async(request)).await.expect("in time").expect("upgrades");
        ws.send(Message::text(body)).await.expect("sends the big message");
        ws.send(Message::text(r#"{"jsonrpc":"2.0","id":"after","method":"status"}"#)).await.expect("sends status");
        let mut big = None;
        loop {
            let Ok(Some(Ok(Message::Text(text)))) = tokio::time::timeout(BOUND, ws.next()).await else { panic!("no answer to status after the big message") };
            let v: Value = serde_json::from_str(text.as_str()).expect("JSON");
            if v["id"] == "after" {
                assert!(v.get("result").is_some(), "status failed: {v}");
                return big;
            }
            if v.get("id").is_some() {
                big = Some(v);
            }
        }
    })
}

/// Another client's `status` over `POST /rpc`, answered while `work` runs on its own thread.
fn status_meanwhile<T: Send + 'static>(addr: SocketAddr, work: impl FnOnce() -> T + Send + 'static) -> T {
    let handle = std::thread::spawn(work);
    let mut answered = 0;
    let mut slowest = Duration::ZERO;
    while !handle.is_finished() {
        let started = std::time::Instant::now();
        let (code, answer) = post(addr, ADMIN, r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#);
        slowest = slowest.max(started.elapsed());
        assert_eq!(code, 200, "status during the attack: {answer}");
        assert!(answer.get("result").is_some(), "status during the attack: {answer}");
        answered += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(answered > 0, "no status was tried during the attack");
    // Reported, not asserted: a wall-clock figure depends on the machine's load.
    eprintln!("{answered} status calls answered during the attack, the slowest in {slowest:?}");
    handle.join().expect("the attack's thread")
}

/// Serves a fresh runtime (named `name`), runs `attack` against its address, and checks that
/// the server's peak resident memory grew by less than `bound` KiB meanwhile: what `attack`
/// returned.
fn within_memory<T>(name: &str, what: &str, bound: u64, attack: impl FnOnce(SocketAddr) -> T) -> T {
    let (_s, server, addr) = setup(name);
    let pid = server.child.id();
    let before = peak_kb(pid);
    let out = attack(addr);
    let growth = peak_kb(pid).saturating_sub(before);
    eprintln!("{what}: peak resident memory grew by {growth} KiB");
    assert!(growth < bound, "the server's peak memory grew by {growth} KiB for {what} (bound {bound} KiB)");
    out
}

#[test]
fn a_16_mb_body_the_observer_may_not_send_costs_a_few_times_its_size() {
    let body = zeros_request(r#""method":"submit","#, "");
    let (code, answer) = within_memory("forbidden-post", "one 16 MB request", GROWTH_BOUND_KB, |addr| status_meanwhile(addr, move || post(addr, OBSERVER, &body)));
    assert_eq!(error_code(&answer), "forbidden", "HTTP {code}: {answer}");
}

#[test]
fn a_16_mb_websocket_message_from_the_observer_costs_a_few_times_its_size() {
    // `status` is the observer's to call, but its params must be empty: refused as invalid
    // params, with nothing of the 16 MB built to say so.
    let body = zeros_request(r#""method":"status","#, "");
    let answer = within_memory("forbidden-ws", "one 16 MB message", GROWTH_BOUND_KB, |addr| over_websocket(addr, OBSERVER, body)).expect("an answer to the big message");
    assert_eq!(error_code(&answer), "invalid_params", "{answer}");
}

#[test]
fn a_16_mb_response_nobody_asked_for_costs_a_few_times_its_size() {
    // No `method`: read as a response to an approval request, which nobody made.
    let body = format!(r#"{{"jsonrpc":"2.0","id":"approval-1","result":{}}}"#, zeros());
    within_memory("response-ws", "one 16 MB response", GROWTH_BOUND_KB, |addr| over_websocket(addr, OBSERVER, body));
}

#[test]
fn an_admins_16_mb_params_before_its_method_is_read_as_text_not_a_tree() {
    // `params` before `method`: the decoder keeps it until it knows the method.
    let body = zeros_request("", r#","method":"submit""#);
    let (code, answer) = within_memory("params-first", "one 16 MB request", GROWTH_BOUND_KB, |addr| status_meanwhile(addr, move || post(addr, ADMIN, &body)));
    assert_eq!(error_code(&answer), "invalid_params", "HTTP {code}: {answer}");
    assert!(answer["error"]["data"]["details"]["violations"][0]["pointer"].as_str().is_some_and(|p| p.contains("task")) || answer["error"]["data"]["message"].as_str().is_some_and(|m| m.contains("string")), "{answer}");
}

#[test]
fn four_16_mb_bodies_at_once_from_the_observer_cost_a_few_times_their_size() {
    let body = std::sync::Arc::new(zeros_request(r#""method":"submit","#, ""));
    let answers = within_memory("forbidden-four", "four 16 MB requests at once", 2 * GROWTH_BOUND_KB, |addr| {
        status_meanwhile(addr, move || {
            let posts: Vec<_> = (0..4)
                .map(|_| {
                    let body = std::sync::Arc::clone(&body);
                    std::thread::spawn(move || post(addr, OBSERVER, &body))
                })
                .collect();
            posts.into_iter().map(|p| p.join().expect("a post")).collect::<Vec<_>>()
        })
    });
    for (code, answer) in &answers {
        assert_eq!(error_code(answer), "forbidden", "HTTP {code}: {answer}");
    }
}
