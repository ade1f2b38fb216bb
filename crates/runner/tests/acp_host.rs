//! The ACP host against scripted agents (bash, one line at a time): what it reads goes through
//! the decoders generated from ACP's schema, so an update of a kind the schema does not know is
//! skipped while a known message that breaks the schema fails the turn naming the problem, a
//! known request with bad params gets -32602 and an unknown one -32601; and every line the host
//! writes is one ACP's agent side accepts. A conversation's kept session is loaded when the
//! agent can (its replay is not the turn's output), and replaced by a new one, the turn told,
//! when it cannot or the load fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use openagents_protocol::acp::{self, agent_side};
use openagents_protocol::rt;
use openagents_protocol::{Event, Turn};
use openagents_runner::host::DenyAll;
use openagents_runner::registry::AcpSettings;
use openagents_runner::acp::RESUME_FAILED;
use openagents_runner::{AcpError, AcpHost, RunnerSpec, SessionKeeping};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("openagents-acp-host-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

/// The fake agent's words: `hear` reads one line from the host (noting it in `./heard`), `say`
/// writes one, `update`/`chunk`/`stop` write a `session/update`, a text chunk or the prompt's
/// answer (the host's requests are numbered 1 `initialize`, 2 `session/new`, 3 `session/prompt`).
const PRELUDE: &str = r#"set -u
say() { printf '%s\n' "$1"; }
hear() { IFS= read -r line || exit 0; printf '%s\n' "$line" >> "$PWD/heard"; }
update() { say "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"s1\",\"update\":$1}}"; }
chunk() { update "{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"$1\"}}"; }
stop() { say "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"stopReason\":\"$1\"}}"; }
# The error code (or permission outcome) of the host's last answer, quotes dropped.
code() { printf '%s' "$line" | grep -o -- '"code":-[0-9]*' | tr -d '"'; }
outcome() { printf '%s' "$line" | grep -o -- '"outcome":{[^}]*}' | tr -d '"'; }
"#;

/// A well-behaved `initialize` and `session/new`, then the prompt read.
const HANDSHAKE: &str = r#"hear; say '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":false},"authMethods":[]}}'
hear; say '{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}'
hear"#;

/// Runs one turn against an agent playing `script` (after [`PRELUDE`]; it then reads until the
/// host closes its stdin) and checks its outcome: the result, or an error whose message has
/// every needle. Then checks that every line the agent heard is ACP.
async fn check(name: &str, script: &str, expected: Result<&str, &[&str]>) -> Vec<Event> {
    let dir = scratch(name);
    let path = dir.join("agent.sh");
    std::fs::write(&path, format!("{PRELUDE}{script}\nwhile hear; do :; done\n")).expect("script");
    let spec = RunnerSpec {
        id: name.replace('_', "-"),
        command: PathBuf::from("/bin/bash"),
        args: vec![path.display().to_string()],
        env: BTreeMap::new(),
        timeout: Duration::from_secs(60),
        sandbox: None,
    };
    let turn = Turn::new("asg-1", "conv-1", &spec.id, "do the thing", dir.display().to_string());
    let host = AcpHost::new();
    let mut events = Vec::new();
    let report = host.run(&spec, AcpSettings::default(), &turn, &CancellationToken::new(), &mut |e: &Event| events.push(e.clone()), &DenyAll).await;
    host.shutdown().await;
    match (&report.outcome, expected) {
        (Ok(result), Ok(want)) => assert_eq!(result, want, "{name}"),
        (Err(e), Err(needles)) => {
            let message = e.to_runtime_error().message;
            for needle in needles {
                assert!(message.contains(needle), "{name}: `{needle}` is not in: {message}");
            }
        }
        (got, want) => panic!("{name}: got {got:?}, want {want:?} (stderr: {})", report.stderr),
    }
    assert_heard_acp(&dir, name);
    let _ = std::fs::remove_dir_all(&dir);
    events
}

/// Every line in `dir/heard` is a message ACP's agent side takes: a request or notification it
/// handles, an answer to a permission request, or an error object.
fn assert_heard_acp(dir: &Path, name: &str) {
    let heard = std::fs::read_to_string(dir.join("heard")).unwrap_or_default();
    for line in heard.lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}: {line}: {e}"));
        assert_eq!(v["jsonrpc"], "2.0", "{name}: {line}");
        let payload = |key: &str| serde_json::to_vec(&v[key]).expect("JSON");
        let ok = if let Some(method) = v["method"].as_str() {
            if v.get("id").is_some() {
                matches!(agent_side::Request::decode(method, &payload("params")), Some(Ok(_)))
            } else {
                matches!(agent_side::Notification::decode(method, &payload("params")), Some(Ok(_)))
            }
        } else if v.get("result").is_some() {
            rt::parse_validated::<acp::RequestPermissionResponse>(&payload("result")).is_ok()
        } else {
            rt::parse_validated::<acp::Error2>(&payload("error")).is_ok()
        };
        assert!(ok, "{name}: the host wrote a line that is not ACP: {line}");
    }
}

#[tokio::test]
async fn an_update_of_a_kind_acp_v1_does_not_have_is_skipped_and_the_turn_completes() {
    let script = format!(
        r#"{HANDSHAKE}
update '{{"sessionUpdate":"future_kind","anything":[1,{{"goes":true}}]}}'
chunk hello
update '{{"sessionUpdate":"usage_update","used":1,"size":2}}'
stop end_turn"#
    );
    check("unknown_update_kind", &script, Ok("hello")).await;
}

#[tokio::test]
async fn an_initialize_result_that_breaks_the_schema_fails_the_turn_naming_the_problem() {
    let script = r#"hear; say '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1"}}'"#;
    check("initialize_schema", script, Err(&["initialize result", "/protocolVersion", "does not match ACP's schema"])).await;
    // A version the host does not speak is a handshake failure, as before.
    let script = r#"hear; say '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":2}}'"#;
    check("initialize_version", script, Err(&["the agent speaks ACP version 2"])).await;
    let script = r#"hear; say '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}'
hear; say '{"jsonrpc":"2.0","id":2,"result":{"sessionId":7}}'"#;
    check("session_new_schema", script, Err(&["session/new result", "/sessionId"])).await;
}

#[tokio::test]
async fn a_known_update_that_breaks_the_schema_fails_the_turn() {
    let script = format!(
        r#"{HANDSHAKE}
chunk before
update '{{"sessionUpdate":"agent_message_chunk"}}'
chunk after
stop end_turn"#
    );
    let events = check("malformed_update", &script, Err(&["session/update (message 4)", "content"])).await;
    assert!(events.iter().any(|e| matches!(e, Event::Text { text } if text == "before")), "{events:?}");
    let script = format!(
        r#"{HANDSHAKE}
update '{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"a","text":"b"}}}}'
stop end_turn"#
    );
    check("duplicate_key_in_update", &script, Err(&["session/update", "duplicate property `text`"])).await;
}

#[tokio::test]
async fn requests_get_minus_32601_when_unknown_or_not_advertised_and_minus_32602_when_their_params_break_the_schema() {
    let script = format!(
        r#"{HANDSHAKE}
say '{{"jsonrpc":"2.0","id":"a","method":"x/frobnicate","params":{{}}}}'
hear; chunk "unknown $(code) "
say '{{"jsonrpc":"2.0","id":"b","method":"fs/read_text_file","params":{{"sessionId":"s1","path":"/etc/hostname"}}}}'
hear; chunk "fs $(code) "
say '{{"jsonrpc":"2.0","id":"c","method":"terminal/create","params":{{"sessionId":"s1"}}}}'
hear; chunk "terminal $(code) "
say '{{"jsonrpc":"2.0","id":"d","method":"session/request_permission","params":{{"sessionId":"s1","toolCall":{{"toolCallId":"t1"}}}}}}'
hear; chunk "permission $(code)"
stop end_turn"#
    );
    check("request_errors", &script, Ok("unknown code:-32601 fs code:-32601 terminal code:-32602 permission code:-32602")).await;
}

#[tokio::test]
async fn a_valid_permission_request_goes_to_the_approver_and_is_answered_with_a_generated_outcome() {
    let script = format!(
        r#"{HANDSHAKE}
say '{{"jsonrpc":"2.0","id":9,"method":"session/request_permission","params":{{"sessionId":"s1","toolCall":{{"toolCallId":"t1","title":"Write notes.txt","kind":"edit"}},"options":[{{"optionId":"yes","name":"Allow","kind":"allow_once"}},{{"optionId":"no","name":"Reject","kind":"reject_once"}}]}}}}'
hear; chunk "$(outcome)"
stop end_turn"#
    );
    let events = check("permission", &script, Ok("outcome:{outcome:selected,optionId:no}")).await;
    assert!(
        events.iter().any(|e| matches!(e, Event::ApprovalRequest { id, prompt } if id == "t1" && prompt == "The agent asks permission: Write notes.txt (edit)")),
        "{events:?}"
    );
}

#[tokio::test]
async fn stop_reasons_and_errors_of_the_prompt() {
    let script = format!("{HANDSHAKE}\nstop paused");
    check("unknown_stop_reason", &script, Err(&["unknown stop reason `paused`"])).await;
    let script = format!("{HANDSHAKE}\nstop refusal");
    check("refusal", &script, Err(&["stop reason `refusal`"])).await;
    let script = format!(
        r#"{HANDSHAKE}
say '{{"jsonrpc":"2.0","id":3,"error":{{"code":-32603,"message":"the model is unavailable"}}}}'"#
    );
    check("prompt_error", &script, Err(&["error -32603: the model is unavailable"])).await;
    let script = format!(
        r#"{HANDSHAKE}
say '{{"jsonrpc":"2.0","id":3,"error":{{"message":"no code"}}}}'"#
    );
    check("prompt_error_schema", &script, Err(&["session/prompt with error", "not one: missing field `code`"])).await;
    let script = format!(
        r#"{HANDSHAKE}
say '{{"jsonrpc":"2.0","id":3,"result":{{}}}}'"#
    );
    check("prompt_result_schema", &script, Err(&["session/prompt result", "stopReason"])).await;
}

#[test]
fn schema_errors_are_the_runners_failures() {
    let e = AcpError::Schema { what: "initialize result".into(), problem: "/protocolVersion: not an integer".into() };
    assert_eq!(e.code(), openagents_protocol::ErrorCode::RunnerFailed);
}

/// What a turn with a kept session gave: its outcome, its events, the sessions it reported as
/// new, and the lines the agent heard.
struct Resumed {
    outcome: Result<String, String>,
    events: Vec<Event>,
    new_sessions: Vec<String>,
    heard: Vec<Value>,
}

/// Runs one turn of a conversation whose kept session is `resume` against an agent playing
/// `script` (after [`PRELUDE`]; it then reads until the host closes its stdin).
async fn resume(name: &str, script: &str, resume: Option<&str>) -> Resumed {
    let dir = scratch(name);
    let path = dir.join("agent.sh");
    std::fs::write(&path, format!("{PRELUDE}{script}\nwhile hear; do :; done\n")).expect("script");
    let spec = RunnerSpec { id: name.replace('_', "-"), command: PathBuf::from("/bin/bash"), args: vec![path.display().to_string()], env: BTreeMap::new(), timeout: Duration::from_secs(60), sandbox: None };
    let turn = Turn::new("asg-1", "conv-1", &spec.id, "do the thing", dir.display().to_string());
    let host = AcpHost::new();
    let (mut events, mut new_sessions) = (Vec::new(), Vec::new());
    let mut on_new = |id: &str| new_sessions.push(id.to_owned());
    let keeping = SessionKeeping { resume: resume.map(str::to_owned), on_new_session: Some(&mut on_new) };
    let report = host.run_keeping(&spec, AcpSettings::default(), &turn, keeping, &CancellationToken::new(), &mut |e: &Event| events.push(e.clone()), &DenyAll).await;
    host.shutdown().await;
    assert_heard_acp(&dir, name);
    let heard = std::fs::read_to_string(dir.join("heard")).unwrap_or_default().lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
    let _ = std::fs::remove_dir_all(&dir);
    Resumed { outcome: report.outcome.map_err(|e| e.to_runtime_error().message), events, new_sessions, heard }
}

fn methods(heard: &[Value]) -> Vec<&str> {
    heard.iter().filter_map(|v| v["method"].as_str()).collect()
}

fn notices(events: &[Event]) -> Vec<&str> {
    events.iter().filter_map(|e| if let Event::Text { text } = e { text.starts_with(RESUME_FAILED).then_some(text.as_str()) } else { None }).collect()
}

/// An `initialize` answer that advertises `loadSession`.
const CAN_LOAD: &str = r#"hear; say '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}'"#;

#[tokio::test]
async fn a_kept_session_is_loaded_when_the_agent_can_and_its_replay_is_not_the_turns_output() {
    // The agent replays the conversation while loading, then answers; the prompt is id 2.
    let script = format!(
        r#"kept() {{ say "{{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{{\"sessionId\":\"kept-7\",\"update\":$1}}}}"; }}
{CAN_LOAD}
hear; kept '{{"sessionUpdate":"user_message_chunk","content":{{"type":"text","text":"earlier task"}}}}'
kept '{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"replayed: earlier answer"}}}}'
say '{{"jsonrpc":"2.0","id":2,"result":{{}}}}'
hear; kept '{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"I remember"}}}}'
stop end_turn"#
    );
    let r = resume("load_ok", &script, Some("kept-7")).await;
    assert_eq!(r.outcome.as_deref(), Ok("I remember"));
    assert_eq!(methods(&r.heard), ["initialize", "session/load", "session/prompt"], "no session/new");
    let load = &r.heard[1]["params"];
    assert_eq!((load["sessionId"].as_str(), load["mcpServers"].as_array().map(Vec::len)), (Some("kept-7"), Some(0)));
    assert!(load["cwd"].as_str().is_some_and(|c| c.ends_with("load_ok")), "{load}");
    assert_eq!(r.heard[2]["params"]["sessionId"], "kept-7", "the prompt goes to the loaded session");
    assert!(r.new_sessions.is_empty(), "{:?}", r.new_sessions);
    assert!(!r.events.iter().any(|e| e.text().contains("replayed") || e.text().contains("earlier task")), "{:?}", r.events);
    assert!(notices(&r.events).is_empty());
}

#[tokio::test]
async fn an_agent_that_cannot_load_sessions_gets_a_new_one_and_the_turn_is_told() {
    let script = format!("{HANDSHAKE}\nchunk fresh\nstop end_turn");
    let r = resume("load_unsupported", &script, Some("kept-7")).await;
    assert_eq!(r.outcome.as_deref(), Ok("fresh"));
    assert_eq!(methods(&r.heard), ["initialize", "session/new", "session/prompt"]);
    assert_eq!(r.new_sessions, ["s1"]);
    assert_eq!(notices(&r.events), [format!("{RESUME_FAILED} (the agent cannot load sessions), so a new session was started: the agent does not remember the earlier turns of this conversation.")]);
    // Without a kept session, a new one is all there is: nothing to tell.
    let r = resume("no_kept_session", &script, None).await;
    assert_eq!((r.outcome.as_deref(), r.new_sessions.as_slice()), (Ok("fresh"), &["s1".to_owned()][..]));
    assert!(notices(&r.events).is_empty(), "{:?}", r.events);
}

#[tokio::test]
async fn a_failed_load_falls_back_to_a_new_session() {
    // An error answer: a new session on the same process (ids: 0 initialize, 1 session/load,
    // 2 session/new, 3 session/prompt).
    let script = format!(
        r#"{CAN_LOAD}
hear; say '{{"jsonrpc":"2.0","id":2,"error":{{"code":-32002,"message":"Session not found"}}}}'
hear; say '{{"jsonrpc":"2.0","id":3,"result":{{"sessionId":"s1"}}}}'
hear; chunk anew; say '{{"jsonrpc":"2.0","id":4,"result":{{"stopReason":"end_turn"}}}}'"#
    );
    let r = resume("load_error", &script, Some("gone")).await;
    assert_eq!(r.outcome.as_deref(), Ok("anew"));
    assert_eq!(methods(&r.heard), ["initialize", "session/load", "session/new", "session/prompt"]);
    assert_eq!(r.heard[3]["params"]["sessionId"], "s1");
    assert_eq!(r.new_sessions, ["s1"]);
    let told = notices(&r.events);
    assert!(told.len() == 1 && told[0].contains("it answered session/load with error -32002: Session not found"), "{told:?}");

    // An agent that dies while loading: a fresh process, with a new session.
    let script = format!(
        r#"if [ -e "$PWD/died-once" ]; then
{CAN_LOAD}
hear; say '{{"jsonrpc":"2.0","id":2,"result":{{"sessionId":"s1"}}}}'
hear; chunk again; stop end_turn
else
touch "$PWD/died-once"; {CAN_LOAD}
hear; exit 3
fi"#
    );
    let r = resume("load_exit", &script, Some("kept-7")).await;
    assert_eq!(r.outcome.as_deref(), Ok("again"));
    assert_eq!(methods(&r.heard), ["initialize", "session/load", "initialize", "session/new", "session/prompt"]);
    assert_eq!(r.new_sessions, ["s1"]);
    let told = notices(&r.events);
    assert!(told.len() == 1 && told[0].contains("loading it failed: the ACP agent exited"), "{told:?}");
}

/// The agent's messages reach the turn in the order it wrote them: every chunk written before
/// the answer is in the result, in order, even when hundreds are read in one go with the answer
/// right behind them.
#[tokio::test]
async fn every_update_written_before_the_answer_is_in_the_result_in_order() {
    let chunks = 600;
    let script = format!(
        r#"{HANDSHAKE}
for i in $(seq 1 {chunks}); do chunk "c$i."; done; stop end_turn"#
    );
    let want: String = (1..=chunks).map(|i| format!("c{i}.")).collect();
    let events = check("many_chunks", &script, Ok(&want)).await;
    let texts: Vec<&str> = events.iter().filter_map(|e| if let Event::Text { text } = e { Some(text.as_str()) } else { None }).collect();
    assert_eq!(texts.concat(), want, "the progress streamed in order");
}
