//! Conversations continue after a restart (a new engine on the same SQLite store): a runner whose
//! entry says `history = true` gets the conversation's earlier completed turns in
//! `Turn.history`, before and after the restart, and one without it never sees the field; an ACP
//! runner's session is kept on the conversation, and after the restart the agent is asked to
//! `session/load` it (when it advertises `loadSession`), or, when it cannot, a new session is
//! started and the turn says so.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use openagents_runner::RunnerHost;
use openagents_runner::acp::RESUME_FAILED;
use openagents_runner::registry::Registry;
use openagents_server::events::EventHub;
use openagents_server::store::{SqliteStore, Store};
use openagents_server::{Caller, EngineConfig, RpcEngine, RunnerAgent};
use serde_json::{Value, json};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("openagents-resume-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

/// A runner-contract runner: notes the turn line it was given in `seen-RUNNER` beside its cwd,
/// and answers `answer to TASK` (or fails when the task starts with `fail`).
const RECORDING_RUNNER: &str = r#"import json, os, sys
line = sys.stdin.readline()
turn = json.loads(line)
with open(os.path.join(turn["cwd"], "seen-" + turn["agent"]["runner"]), "a") as f:
    f.write(line)
if turn["task"].startswith("fail"):
    print(json.dumps({"type": "failed", "message": "asked to fail"}))
else:
    print(json.dumps({"type": "completed", "result": "answer to " + turn["task"]}))
"#;

/// An ACP agent: notes every line it hears in `heard` in its cwd; advertises `loadSession` when
/// its argument is `load`; a new session is `sess-PID`; a loaded one replays a line first; a
/// prompt is answered `TASK in SESSION`.
const ACP_AGENT: &str = r#"import json, os, sys
can_load = sys.argv[1] == "load"
sid = None
def say(o):
    print(json.dumps(o), flush=True)
for line in sys.stdin:
    with open("heard", "a") as f:
        f.write(line)
    m = json.loads(line)
    method, rid = m.get("method"), m.get("id")
    if method == "initialize":
        say({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": 1, "agentCapabilities": {"loadSession": can_load}}})
    elif method == "session/new":
        sid = "sess-%d" % os.getpid()
        say({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": sid}})
    elif method == "session/load":
        sid = m["params"]["sessionId"]
        say({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "replayed"}}}})
        say({"jsonrpc": "2.0", "id": rid, "result": {}})
    elif method == "session/prompt":
        text = m["params"]["prompt"][0]["text"]
        say({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text + " in " + sid}}}})
        say({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})
"#;

fn registry(dir: &Path) -> Registry {
    std::fs::write(dir.join("runner.py"), RECORDING_RUNNER).expect("runner");
    std::fs::write(dir.join("agent.py"), ACP_AGENT).expect("agent");
    let (runner, agent) = (dir.join("runner.py").display().to_string(), dir.join("agent.py").display().to_string());
    let text = format!(
        r#"[runners.recall]
command = "/usr/bin/python3"
args = ["{runner}"]
history = true

[runners.plain]
command = "/usr/bin/python3"
args = ["{runner}"]

[runners.loader]
command = "/usr/bin/python3"
args = ["{agent}", "load"]
protocol = "acp"

[runners.forgetful]
command = "/usr/bin/python3"
args = ["{agent}", "new"]
protocol = "acp"
"#
    );
    Registry::parse(&text, None).expect("a registry")
}

/// The SQLite store at `db`, once an earlier engine's hold on it is gone.
fn open_store(db: &Path) -> SqliteStore {
    for _ in 0..250 {
        if let Ok(s) = SqliteStore::open(db) {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("{} stayed held", db.display());
}

/// An engine over the runners of `dir` on the SQLite store at `db`.
fn engine(dir: &Path, db: &Path) -> RpcEngine {
    let store: Arc<dyn Store> = Arc::new(open_store(db));
    let hub = EventHub::with_store(1024, store, 100_000).expect("a hub on the store");
    let config = EngineConfig { default_runner: Some("recall".into()), ..EngineConfig::default() };
    RpcEngine::with_events(RunnerAgent::new(RunnerHost::new(registry(dir))), config, hub)
}

/// Submits `task` to `runner` in `conversation`, working in `dir`: the result, or the error.
async fn submit(engine: &RpcEngine, dir: &Path, runner: &str, conversation: &str, task: &str) -> Result<String, Value> {
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "submit", "params": {"task": task, "runner": runner, "conversation": conversation, "cwd": dir.display().to_string()}}).to_string();
    let reply = engine.handle_message(&Caller::stdio(), request.as_bytes(), None).await.expect("a reply");
    let reply: Value = serde_json::from_slice(&reply).expect("JSON");
    match reply["result"]["result"].as_str() {
        Some(result) => Ok(result.to_owned()),
        None => Err(reply),
    }
}

/// The `history` of each turn line `runner` was given (`None` where the field was absent).
fn histories(dir: &Path, runner: &str) -> Vec<Option<Value>> {
    let seen = std::fs::read_to_string(dir.join(format!("seen-{runner}"))).unwrap_or_default();
    seen.lines().map(|l| serde_json::from_str::<Value>(l).expect("a turn line").get("history").cloned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_that_asks_for_history_gets_the_earlier_turns_also_after_a_restart_and_others_never_see_the_field() {
    let dir = scratch("history");
    let db = dir.join("store.db");
    {
        let engine = engine(&dir, &db);
        assert_eq!(submit(&engine, &dir, "recall", "c1", "first").await, Ok("answer to first".into()));
        assert!(submit(&engine, &dir, "recall", "c1", "fail this one").await.is_err());
        assert_eq!(submit(&engine, &dir, "recall", "c1", "second").await, Ok("answer to second".into()));
        // Another conversation's turns are not this one's history.
        assert_eq!(submit(&engine, &dir, "recall", "c2", "elsewhere").await, Ok("answer to elsewhere".into()));
        for task in ["one", "two"] {
            submit(&engine, &dir, "plain", "c3", task).await.expect("completes");
        }
        engine.shutdown().await;
    }
    let engine = engine(&dir, &db);
    assert_eq!(submit(&engine, &dir, "recall", "c1", "third").await, Ok("answer to third".into()));
    engine.shutdown().await;
    let earlier = |pairs: &[(&str, &str)]| Some(Value::Array(pairs.iter().map(|(task, result)| json!({"task": task, "result": result})).collect()));
    assert_eq!(
        histories(&dir, "recall"),
        [
            earlier(&[]),
            earlier(&[("first", "answer to first")]),
            earlier(&[("first", "answer to first")]),
            earlier(&[]),
            earlier(&[("first", "answer to first"), ("second", "answer to second")]),
        ],
        "completed turns only, oldest first, from the store after the restart"
    );
    assert_eq!(histories(&dir, "plain"), [None, None], "a runner that did not ask never gets the field");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The requests the ACP agents heard, as `(method, sessionId)`.
fn heard(dir: &Path) -> Vec<(String, Option<String>)> {
    let heard = std::fs::read_to_string(dir.join("heard")).unwrap_or_default();
    heard
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON"))
        .filter_map(|v| Some((v["method"].as_str()?.to_owned(), v["params"]["sessionId"].as_str().map(str::to_owned))))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_an_acp_conversation_loads_its_session_or_is_told_it_starts_anew() {
    let dir = scratch("acp");
    let db = dir.join("store.db");
    let (loaded, fresh) = {
        let engine = engine(&dir, &db);
        let first = submit(&engine, &dir, "loader", "talk", "hello").await.expect("completes");
        let again = submit(&engine, &dir, "forgetful", "other", "hi").await.expect("completes");
        engine.shutdown().await;
        (first.strip_prefix("hello in ").expect("the session named").to_owned(), again.strip_prefix("hi in ").expect("the session named").to_owned())
    };
    let store = open_store(&db);
    assert_eq!(store.agent_session("talk").expect("read").map(|a| (a.runner, a.session_id)), Some(("loader".into(), loaded.clone())));
    drop(store);
    std::fs::remove_file(dir.join("heard")).expect("heard");

    let engine = engine(&dir, &db);
    let mut events = engine.subscribe(None);
    assert_eq!(submit(&engine, &dir, "loader", "talk", "still there?").await, Ok(format!("still there? in {loaded}")), "the replay is not the answer");
    assert_eq!(heard(&dir), [("initialize".into(), None), ("session/load".into(), Some(loaded.clone())), ("session/prompt".into(), Some(loaded.clone()))], "no session/new");
    std::fs::remove_file(dir.join("heard")).expect("heard");

    let answer = submit(&engine, &dir, "forgetful", "other", "remember?").await.expect("completes");
    let renewed = answer.strip_prefix("remember? in ").expect("the session named").to_owned();
    assert_ne!(renewed, fresh);
    assert_eq!(heard(&dir).iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(), ["initialize", "session/new", "session/prompt"]);
    engine.shutdown().await;
    let mut texts = Vec::new();
    while let Some(ev) = events.try_next_shared() {
        if let openagents_protocol::RuntimeEvent::Text { text } = &ev.event().event {
            texts.push(text.clone());
        }
    }
    let told: Vec<&String> = texts.iter().filter(|t| t.starts_with(RESUME_FAILED)).collect();
    assert_eq!(told.len(), 1, "{texts:?}");
    assert!(told[0].contains("cannot load sessions") && told[0].contains("a new session was started"), "{told:?}");
    assert!(!texts.iter().any(|t| t == "replayed"), "{texts:?}");
    drop((events, engine));
    assert_eq!(open_store(&db).agent_session("other").expect("read").map(|a| a.session_id), Some(renewed), "the new session is kept");
    let _ = std::fs::remove_dir_all(&dir);
}
