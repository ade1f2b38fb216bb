//! `serve_once` and `serve_streaming`: the runner side of the contract, at its bounds.

use openagents_protocol::{Event, MAX_FRAME, MAX_OUTPUT, VERSION};
use openagents_runner::serve::{ProgressError, serve_once, serve_streaming};

fn turn_line(task: &str) -> String {
    format!(r#"{{"schema":"{VERSION}","assignment":"a1","conversation":"c1","agent":{{"runner":"echo"}},"task":"{task}","cwd":"/"}}"#)
}

/// A turn line of exactly `len` bytes (without the newline).
fn turn_line_of_len(len: usize) -> String {
    let base = turn_line("").len();
    turn_line(&"t".repeat(len - base))
}

fn events(out: &[u8]) -> Vec<Event> {
    let text = std::str::from_utf8(out).expect("runners write UTF-8");
    text.lines()
        .map(|l| {
            assert!(l.len() <= MAX_FRAME, "a line of {} bytes", l.len());
            serde_json::from_str(l).expect("every line is an event")
        })
        .collect()
}

fn serve(input: &str, run: impl FnOnce(openagents_protocol::Turn) -> Result<String, String>) -> Vec<Event> {
    let mut out = Vec::new();
    serve_once(input.as_bytes(), &mut out, run).expect("writing to a Vec works");
    events(&out)
}

#[test]
fn one_turn_one_terminal_event() {
    let cases: Vec<(String, Result<String, String>, Event)> = vec![
        (turn_line("hi") + "\n", Ok("done".into()), Event::Completed { result: "done".into() }),
        (turn_line("hi"), Ok("no newline is fine".into()), Event::Completed { result: "no newline is fine".into() }),
        (turn_line("hi") + "\n", Err("could not".into()), Event::Failed { message: "could not".into() }),
    ];
    for (input, outcome, expected) in cases {
        let got = serve(&input, |_| outcome.clone());
        assert_eq!(got, vec![expected]);
    }
}

#[test]
fn refused_requests_are_answered_with_a_failed_event() {
    let cases = [
        (String::new(), "no request"),
        ("not json\n".to_owned(), "the request is not JSON"),
        (turn_line("hi").replace(VERSION, "openagents.agent.runner.v0") + "\n", "unsupported turn schema \"openagents.agent.runner.v0\": this runner speaks \"openagents.agent.runner.v1\""),
        (turn_line("hi").replace(r#""runner":"echo""#, r#""runner":"echo","command":"/bin/sh""#) + "\n", "/agent/command"),
        (turn_line("hi").replace(r#""cwd":"/""#, r#""cwd":"relative""#) + "\n", "/cwd"),
    ];
    for (input, needle) in cases {
        let mut called = false;
        let got = serve(&input, |_| {
            called = true;
            Ok(String::new())
        });
        assert!(!called, "{needle}: the application must not run");
        match got.as_slice() {
            [Event::Failed { message }] => assert!(message.contains(needle), "{message}"),
            other => panic!("{needle}: {other:?}"),
        }
    }
}

#[test]
fn request_line_at_max_frame_and_one_byte_past() {
    let at = turn_line_of_len(MAX_FRAME);
    assert_eq!(at.len(), MAX_FRAME);
    let got = serve(&(at.clone() + "\n"), |t| Ok(t.task.len().to_string()));
    assert!(matches!(&got[..], [Event::Completed { .. }]), "{got:?}");
    let past = turn_line_of_len(MAX_FRAME + 1);
    let got = serve(&(past + "\n"), |_| Ok(String::new()));
    match &got[..] {
        [Event::Failed { message }] => assert!(message.contains("longer than MAX_FRAME"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_result_too_large_becomes_a_failed_event() {
    let overhead = r#"{"type":"completed","result":""}"#.len();
    let fits = "r".repeat(MAX_FRAME - overhead);
    let got = serve(&turn_line("hi"), |_| Ok(fits.clone()));
    assert_eq!(got, vec![Event::Completed { result: fits }]);
    let too_big = "r".repeat(MAX_FRAME - overhead + 1);
    match &serve(&turn_line("hi"), |_| Ok(too_big))[..] {
        [Event::Failed { message }] => assert!(message.contains("result is too large"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn streaming_refuses_to_exceed_max_output() {
    let mut out = Vec::new();
    let mut refused = None;
    serve_streaming(turn_line("hi").as_bytes(), &mut out, |_, progress| {
        let chunk = "x".repeat(60_000);
        loop {
            if let Err(e) = progress.text(&chunk) {
                refused = Some(e);
                return Ok("stopped".into());
            }
        }
    })
    .unwrap();
    assert!(matches!(refused, Some(ProgressError::OutputFull)), "{refused:?}");
    assert!(out.len() <= MAX_OUTPUT, "{} bytes", out.len());
    let evs = events(&out);
    assert_eq!(evs.last(), Some(&Event::Completed { result: "stopped".into() }));
    // A single event longer than a frame is refused, and nothing is written for it.
    let mut out = Vec::new();
    serve_streaming(turn_line("hi").as_bytes(), &mut out, |_, progress| match progress.text(&"y".repeat(MAX_FRAME)) {
        Err(ProgressError::LineTooLong(_)) => Ok("ok".into()),
        other => Err(format!("{other:?}")),
    })
    .unwrap();
    assert_eq!(events(&out), vec![Event::Completed { result: "ok".into() }]);
}
