//! End-to-end tests of the stdio transport: `run_stdio` over in-memory pipes, driven line by
//! line as a parent process would. Every output line is checked to be exactly one complete JSON
//! object: a response, or an `{"event": …}` notification.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use openagents_server::SERVER_MAX_LINE_BYTES;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

fn submit(id: &str, task: &str) -> String {
    json!({"id": id, "method": "submit", "params": {"task": task, "assignment": id}}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_is_served_while_a_submit_is_in_flight() {
    let (engine, _gate) = scripted_engine();
    let mut io = Stdio::start(&engine);
    io.send(&submit("s1", "burst:3 wait")).await;
    io.started("s1").await;

    // While the submit waits, other requests are answered, each with its own id.
    let st = io.call(r#"{"id":"st","method":"status"}"#, json!("st")).await;
    assert_eq!(st["result"]["state"], "running");
    let busy = io.call(&submit("s2", "hello"), json!("s2")).await;
    assert_eq!(busy["error"]["data"]["code"], "busy");
    let r = io.call(r#"{"jsonrpc":"2.0","id":2,"method":"interrupt"}"#, json!(2)).await;
    assert_eq!(r, json!({"jsonrpc": "2.0", "id": 2, "result": {"interrupted": true}}));
    let s1 = io.response(json!("s1")).await;
    assert_eq!(s1["error"]["data"]["code"], "interrupted", "{s1}");
    assert_eq!(s1["jsonrpc"], "2.0", "carried whether or not the request sent it: {s1}");
    if !io.events().iter().any(|e| kind(e) == "turn_failed") {
        io.event("turn_failed").await;
    }

    // The turn's events came as {"event"} lines, in order, interleaved with the responses.
    let events = io.events();
    let texts: Vec<&Value> = events.iter().filter(|e| kind(e) == "text").map(|e| &e["event"]["text"]).collect();
    assert_eq!(texts, [&json!("t0"), &json!("t1"), &json!("t2")]);
    let seqs: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] + 1 == w[1]), "{seqs:?}");
    let first_response = io.lines.iter().position(|l| l.get("event").is_none()).unwrap();
    let last_event = io.lines.iter().rposition(|l| l.get("event").is_some()).unwrap();
    assert!(first_response < last_event, "events and responses share the output");

    let st = io.call(r#"{"id":3,"method":"status"}"#, json!(3)).await;
    assert_eq!(st["result"]["counters"], json!({"submitted": 1, "completed": 0, "failed": 0, "interrupted": 1}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_never_interleave_under_load() {
    let (engine, _gate) = scripted_engine();
    let mut io = Stdio::start(&engine);
    // A turn publishing thousands of events while dozens of requests are answered.
    io.send(&submit("burst", "burst:3000")).await;
    let ids: Vec<i64> = (100..160).collect();
    for id in &ids {
        io.send(&json!({"id": id, "method": "status"}).to_string()).await;
    }
    let mut pending: Vec<Value> = ids.iter().map(|i| json!(i)).collect();
    pending.push(json!("burst"));
    within("every response", async {
        while !pending.is_empty() {
            let line = io.next().await.expect("output open"); // asserts one JSON object per line
            if line.get("event").is_none() {
                let at = pending.iter().position(|p| *p == line["id"]).unwrap_or_else(|| panic!("an unexpected or repeated response: {line}"));
                pending.remove(at);
            }
        }
    })
    .await;
    let burst = io.lines.iter().find(|l| l["id"] == "burst").unwrap();
    assert_eq!(burst["result"]["result"], "done");
    if !io.events().iter().any(|e| kind(e) == "turn_completed") {
        io.event("turn_completed").await;
    }
    assert!(io.events().len() > 100, "events were written too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_line_is_refused_unbuffered_and_the_next_line_is_served() {
    let (engine, _gate) = scripted_engine();
    let mut io = Stdio::start(&engine);
    let input = io.take_input();

    // Exactly SERVER_MAX_LINE_BYTES (without the newline) is a line like any other.
    let mut line = br#"{"id":"edge","method":"status"}"#.to_vec();
    line.resize(SERVER_MAX_LINE_BYTES, b' ');
    line.push(b'\n');
    let writer = write_in_background(input, line);
    let r = io.response(json!("edge")).await;
    assert_eq!(r["result"]["state"], "idle", "{r}");
    let input = within("the write", writer).await.unwrap();

    // One byte over: the error comes back while the line is still unfinished, so the runtime
    // did not wait for (or hold) the whole line.
    let writer = write_in_background(input, vec![b'x'; SERVER_MAX_LINE_BYTES + 1]);
    let r = io.next().await.expect("a response");
    assert_eq!(r["id"], Value::Null, "{r}");
    assert_eq!(r["error"]["data"]["code"], "frame_too_large", "{r}");
    let mut input = within("the write", writer).await.unwrap();

    // The rest of the long line (more than the limit again) is skipped; the next line is served.
    let mut rest = vec![b'y'; SERVER_MAX_LINE_BYTES + 4096];
    rest.extend_from_slice(b"\n{\"id\":\"after\",\"method\":\"status\"}\n");
    let writer = write_in_background(input, rest);
    let r = io.response(json!("after")).await;
    assert_eq!(r["result"]["state"], "idle", "{r}");
    input = within("the write", writer).await.unwrap();
    let responses: Vec<&Value> = io.lines.iter().filter(|l| l.get("event").is_none()).collect();
    assert_eq!(responses.len(), 3, "one response per line, nothing for the skipped rest: {responses:?}");

    input.shutdown().await.unwrap();
    drop(input);
    io.finish().await.expect("run_stdio ends cleanly at end of input");
}

/// What a line gets back: nothing, or a response with this id and typed code (`None`: a result).
type Expect = Option<(Value, Option<&'static str>)>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blank_malformed_and_unknown_lines() {
    let (engine, _gate) = scripted_engine();
    let mut io = Stdio::start(&engine);
    let cases: Vec<(&str, Expect)> = vec![
        ("", None),
        ("   ", None),
        ("\t \t", None),
        ("\r", None),
        ("{", Some((Value::Null, Some("parse_error")))),
        ("not json", Some((Value::Null, Some("parse_error")))),
        ("[]", Some((Value::Null, Some("invalid_request")))),
        ("null", Some((Value::Null, Some("invalid_request")))),
        (r#"{"id":5,"method":5}"#, Some((json!(5), Some("invalid_request")))),
        (r#"{"id":"u","method":"nope"}"#, Some((json!("u"), Some("unknown_method")))),
        (r#"{"id":7,"method":"status","params":{"x":1}}"#, Some((json!(7), Some("invalid_params")))),
        (r#"{"id":8,"method":"submit","params":{"task":"x","runner":"../etc"}}"#, Some((json!(8), Some("invalid_params")))),
        (r#"{"jsonrpc":"2.0","id":9,"method":"status"}"#, Some((json!(9), None))),
        (r#"{"id":10,"method":"release"}"#, Some((json!(10), None))),
        (r#"{"id":11,"method":"interrupt"}"#, Some((json!(11), None))),
    ];
    for (n, (line, expect)) in cases.iter().enumerate() {
        io.send(line).await;
        match expect {
            // Nothing comes back: the next response is the probe's.
            None => {
                let probe = format!("probe-{n}");
                io.send(&json!({"id": probe, "method": "status"}).to_string()).await;
                let next = next_response(&mut io).await;
                assert_eq!(next["id"], json!(probe), "{line:?} was answered: {next}");
            }
            Some((id, code)) => {
                let r = next_response(&mut io).await;
                assert_eq!(r["id"], *id, "{line:?}: {r}");
                assert_eq!(r["jsonrpc"], "2.0", "every reply carries it, sent or not: {line:?}: {r}");
                match code {
                    Some(code) => assert_eq!(r["error"]["data"]["code"], *code, "{line:?}: {r}"),
                    None => assert!(r.get("result").is_some(), "{line:?}: {r}"),
                }
            }
        }
    }
    io.close_input();
    io.finish().await.expect("run_stdio ends cleanly at end of input");
}

async fn next_response(io: &mut Stdio) -> Value {
    loop {
        let v = io.next().await.expect("a response");
        if v.get("event").is_none() {
            return v;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_of_input_waits_for_in_flight_requests() {
    for round in 0..5 {
        let (engine, gate) = scripted_engine();
        let mut io = Stdio::start(&engine);
        io.send(&submit("long", "gate burst:2")).await;
        io.started("long").await;
        io.close_input();
        // The submit is still in flight, so run_stdio must not return yet.
        assert!(tokio::time::timeout(Duration::from_millis(100), io.task_mut()).await.is_err(), "run_stdio returned with a request in flight");
        gate.open();
        io.finish().await.expect("run_stdio ends cleanly at end of input");
        let r = io.lines.iter().find(|l| l["id"] == "long").unwrap_or_else(|| panic!("round {round}: the in-flight submit was not answered: {:?}", io.lines));
        assert_eq!(r["result"]["result"], "done");
        // The turn's terminal event reached the output too.
        let kinds: Vec<String> = io.events().iter().map(|e| kind(e).to_owned()).collect();
        assert_eq!(kinds, ["turn_started", "text", "text", "turn_completed"], "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_run_stdio_with_a_final_event() {
    let (engine, _gate) = scripted_engine();
    let mut io = Stdio::start(&engine);
    io.send(&submit("w", "wait")).await;
    io.started("w").await;
    io.send(r#"{"id":"bye","method":"shutdown"}"#).await;
    // The input stays open: shutdown alone ends the loop.
    io.finish().await.expect("run_stdio ends cleanly on shutdown");
    assert!(engine.is_shut_down());
    let w = io.lines.iter().find(|l| l["id"] == "w").expect("the submit was answered");
    assert_eq!(w["error"]["data"]["code"], "interrupted");
    let bye = io.lines.iter().find(|l| l["id"] == "bye").expect("shutdown was answered");
    assert_eq!(bye["result"], json!({"shutting_down": true}));
    let kinds: Vec<String> = io.events().iter().map(|e| kind(e).to_owned()).collect();
    assert_eq!(kinds, ["turn_started", "turn_failed", "shutting_down"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_turn_ends_in_exactly_one_terminal_event() {
    let (engine, gate) = scripted_engine();
    let mut io = Stdio::start(&engine);
    // (assignment, script, terminal event, error code)
    let turns: &[(&str, &str, &str, Option<&str>)] = &[
        ("ok-1", "burst:3", "turn_completed", None),
        ("fails", "burst:1 fail", "turn_failed", Some("runner_failed")),
        ("panics", "panic", "turn_failed", Some("internal")),
        ("stopped", "burst:2 wait", "turn_failed", Some("interrupted")),
        ("stopped-at-gate", "gate", "turn_failed", Some("interrupted")),
        ("gated", "gate burst:1", "turn_completed", None),
        ("approval", "approve", "turn_completed", None),
        ("ok-2", "hello world", "turn_completed", None),
    ];
    for (id, task, terminal, _) in turns {
        io.send(&submit(id, task)).await;
        if task.contains("wait") || task.starts_with("gate") {
            io.started(id).await;
            // A rejected submit starts no turn and ends none.
            let busy = io.call(&submit("rejected", "hello"), json!("rejected")).await;
            assert_eq!(busy["error"]["data"]["code"], "busy");
            if *terminal == "turn_completed" {
                gate.open();
            } else {
                let r = io.call(r#"{"id":"int","method":"interrupt"}"#, json!("int")).await;
                assert_eq!(r["result"]["interrupted"], true);
            }
        }
        let r = io.response(json!(id)).await;
        assert_eq!(r.get("result").is_some(), *terminal == "turn_completed", "{id}: {r}");
    }
    let st = io.call(r#"{"id":"st","method":"status"}"#, json!("st")).await;
    assert_eq!(st["result"]["counters"], json!({"submitted": 8, "completed": 4, "failed": 2, "interrupted": 2}));
    // Shutdown's final event comes after every turn's events.
    io.send(r#"{"id":"bye","method":"shutdown"}"#).await;
    io.finish().await.unwrap();

    let events = io.events();
    let seqs: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "each event once, in order: {seqs:?}");
    assert_eq!(events.last().map(kind), Some("shutting_down"));
    let mut current: Option<String> = None;
    let mut terminals: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for e in &events {
        match kind(e) {
            "turn_started" => {
                assert!(current.is_none(), "a turn started inside another: {e}");
                current = Some(e["event"]["assignment"].as_str().unwrap().to_owned());
            }
            "turn_completed" | "turn_failed" => {
                let turn = current.take().unwrap_or_else(|| panic!("a terminal event outside a turn: {e}"));
                terminals.entry(turn).or_default().push(e["event"].clone());
            }
            _ => {}
        }
    }
    assert!(current.is_none(), "a turn without a terminal event: {current:?}");
    assert_eq!(terminals.len(), turns.len(), "{terminals:?}");
    for (id, _, terminal, code) in turns {
        let got = &terminals[*id];
        assert_eq!(got.len(), 1, "{id}: {got:?}");
        assert_eq!(got[0]["type"], *terminal, "{id}: {got:?}");
        assert_eq!(got[0]["error"]["code"].as_str(), *code, "{id}: {got:?}");
    }
    assert!(!terminals.contains_key("rejected"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_replays_from_a_point() {
    let (engine, _gate) = scripted_engine();
    let mut io = Stdio::start(&engine);
    let r = io.call(&submit("t", "burst:4"), json!("t")).await;
    assert_eq!(r["result"]["result"], "done");
    if !io.events().iter().any(|e| kind(e) == "turn_completed") {
        io.event("turn_completed").await;
    }
    let live = io.events();
    assert_eq!(live.len(), 6);
    let r = io.call(r#"{"id":"sub","method":"subscribe","params":{"since":2}}"#, json!("sub")).await;
    assert_eq!(r["result"]["last_seq"], 6, "{r}");
    // The replay may come before or after the response.
    while io.events().len() < 10 {
        io.next().await.expect("a replayed event");
    }
    assert_eq!(io.events()[6..], live[2..], "events 3..=6 again, once each");
    io.close_input();
    io.finish().await.unwrap();
    assert_eq!(io.events().len(), 10, "nothing else was replayed");
}

/// A turn's events, its `turn_completed` among them, are all written before the `submit`'s
/// answer: a parent that subscribes after the answer is not handed the turn it just saw end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turns_events_are_written_before_its_answer() {
    let (engine, _gate) = scripted_engine();
    let mut io = Stdio::start(&engine);
    for round in 0..20 {
        let id = format!("s{round}");
        let before = io.lines.len();
        let answer = io.call(&submit(&id, "burst:200"), json!(id)).await;
        assert_eq!(answer["result"]["result"], "done", "{answer}");
        let events: Vec<&Value> = io.lines[before..].iter().filter_map(|l| l.get("event")).collect();
        assert_eq!(events.last().map(|e| kind(e)), Some("turn_completed"), "round {round}: the answer came before the turn's `turn_completed` ({} events before it)", events.len());
        assert_eq!(events.iter().filter(|e| kind(e) == "text").count(), 200, "round {round}: every text event before the answer");
    }
}

/// A `subscribe` that replays: the replayed events are written before its answer, as every
/// event published before an answer is, so a parent can tell them from what comes after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_is_written_before_the_subscribe_answer() {
    let (engine, _gate) = scripted_engine();
    let mut io = Stdio::start(&engine);
    let answer = io.call(&submit("s", "burst:50"), json!("s")).await;
    assert_eq!(answer["result"]["result"], "done", "{answer}");
    for round in 0..10 {
        let before = io.lines.len();
        let answer = io.call(&json!({"id": round, "method": "subscribe", "params": {"since": 1}}).to_string(), json!(round)).await;
        let last_seq = answer["result"]["last_seq"].as_i64().expect("last_seq");
        let seqs: Vec<i64> = io.lines[before..].iter().filter_map(|l| l.get("event")).map(|e| e["seq"].as_i64().unwrap()).collect();
        assert_eq!(seqs, (2..=last_seq).collect::<Vec<_>>(), "round {round}: the replay, whole and in order, before the answer");
    }
}
