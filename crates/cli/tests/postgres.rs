//! The PostgreSQL store against the real binary and a real server (`make test-postgres`, which
//! starts one and sets `OPENAGENTS_TEST_POSTGRES` to its URL and `OPENAGENTS_TEST_POSTGRES_CTL`
//! to a script that stops and starts it): a runtime killed (`kill -9`) mid-turn is replaced by a
//! new process of the same name with a fresh state folder, which continues the sequence and the
//! history and closes the killed turn as `runtime_restarted`; two names on one database keep
//! separate sequences and histories, and a live name is refused to a second process; the server
//! stopped mid-turn fails that turn with a typed error while the runtime goes on answering, and
//! once the server is back a new turn is stored; an unreachable server and a database of a newer
//! version are refused at start (exit 2, naming them).
//!
//! Without `OPENAGENTS_TEST_POSTGRES` (a plain `cargo test`), each test says it was not run and
//! returns; with it, anything wrong with the server fails the test.

mod security_common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use security_common::*;

/// The tests share one server, and one of them stops it: they run one at a time.
static SERVER: Mutex<()> = Mutex::new(());

/// The server's URL (to its `postgres` database), or `None` after saying the test was not run.
fn server(test: &str) -> Option<(String, std::sync::MutexGuard<'static, ()>)> {
    match std::env::var("OPENAGENTS_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Some((url, SERVER.lock().unwrap_or_else(|p| p.into_inner()))),
        _ => {
            eprintln!("{test}: not run: OPENAGENTS_TEST_POSTGRES is not set (make test-postgres starts a server and sets it)");
            None
        }
    }
}

/// A new, empty database on the server at `url`: the URL of it.
fn database(url: &str, name: &str) -> String {
    let mut admin = postgres::Client::connect(url, postgres::NoTls).unwrap_or_else(|e| panic!("the test server at {url}: {e}"));
    let db = format!("oa_{name}_{}", std::process::id());
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db}")).expect("the old test database dropped");
    admin.batch_execute(&format!("CREATE DATABASE {db}")).expect("a test database");
    let base = url.rsplit_once('/').map_or(url, |(base, _)| base);
    format!("{base}/{db}")
}

fn client(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap_or_else(|e| panic!("{url}: {e}"))
}

/// Runs the server's control script (`stop` or `start`).
fn control(action: &str) {
    let ctl = std::env::var("OPENAGENTS_TEST_POSTGRES_CTL").expect("OPENAGENTS_TEST_POSTGRES_CTL: the script that stops and starts the test server (make test-postgres sets it)");
    let mut command = Command::new(&ctl);
    command.arg(action);
    let out = run(command, b"");
    assert!(out.status.success(), "{ctl} {action}: {}", String::from_utf8_lossy(&out.stderr));
}


fn status(addr: SocketAddr) -> serde_json::Value {
    admin_rpc(addr, "status", serde_json::Value::Null)["result"].clone()
}

fn last_seq(addr: SocketAddr) -> i64 {
    status(addr)["last_seq"].as_i64().expect("last_seq")
}

/// A turn on the echo runner: its reply.
fn submit_echo(addr: SocketAddr, task: &str) -> serde_json::Value {
    admin_rpc(addr, "submit", serde_json::json!({ "task": task, "runner": "echo" }))
}

/// Submits `task` on the runtime's default runner on a thread of its own: the reply, when it
/// comes (or `None` when the server went away first).
fn submit_in_background(addr: SocketAddr, task: &str, assignment: &str) -> std::sync::mpsc::Receiver<Option<serde_json::Value>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let body = serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": "submit", "params": { "task": task, "assignment": assignment } }).to_string();
    std::thread::spawn(move || {
        let request = format!("POST /rpc HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        let mut reply = None;
        if let Ok(mut stream) = TcpStream::connect(addr) {
            let _ = stream.write_all(request.as_bytes());
            let mut raw = Vec::new();
            let _ = stream.read_to_end(&mut raw);
            let text = String::from_utf8_lossy(&raw).into_owned();
            reply = text.split_once("\r\n\r\n").and_then(|(_, body)| serde_json::from_str(body.trim()).ok());
        }
        let _ = tx.send(reply);
    });
    rx
}

/// Waits (bounded) until the runtime at `addr` runs a turn whose `turn_started` is written: its
/// `last_seq` (the newest event delivered, so written) is past `before`.
fn wait_running(addr: SocketAddr, before: i64) {
    let deadline = Instant::now() + BOUND;
    loop {
        let st = status(addr);
        if st["state"] == "running" && st["last_seq"].as_i64().is_some_and(|seq| seq > before) {
            return;
        }
        assert!(Instant::now() < deadline, "the turn never started: {st}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill9(server: &mut Server) {
    let ok = Command::new("kill").args(["-s", "KILL", &server.child.id().to_string()]).status().expect("kill runs");
    assert!(ok.success());
    assert_eq!(wait_bounded(&mut server.child), None, "killed by the signal");
}

fn serve(s: &Setup, runner: &str, db: &str, name: &str) -> Server {
    let creds = admin_credentials(s);
    // The first runner is the default; echo is there too, for short turns.
    s.serve_runner(runner, &["--runner", "echo", "--credentials", &creds, "--store", db, "--name", name]).unwrap_or_else(|(code, err)| panic!("serve --name {name} did not start ({code:?}): {err}"))
}

/// The event kinds of runtime `name` in the database, by sequence number: the lines
/// `<seq>\t<time_ms>\t<json>` of its blocks (one a group commit), in order.
fn stored_events(db: &mut postgres::Client, name: &str) -> Vec<(i64, String)> {
    let blocks: Vec<String> = db.query("SELECT data FROM openagents_event_blocks WHERE runtime = $1 ORDER BY first_seq", &[&name]).expect("the event blocks").iter().map(|r| r.get(0)).collect();
    blocks
        .iter()
        .flat_map(|data| data.lines())
        .map(|line| {
            let mut parts = line.splitn(3, '\t');
            let (seq, _time, json) = (parts.next(), parts.next(), parts.next().unwrap_or_else(|| panic!("a line of a block: {line:?}")));
            let v: serde_json::Value = serde_json::from_str(json).expect("an event's JSON");
            (seq.and_then(|s| s.parse().ok()).expect("a sequence number"), v["event"]["type"].as_str().expect("a type").to_owned())
        })
        .collect()
}

/// `(outcome, error code)` of runtime `name`'s turn `assignment`.
fn stored_turn(db: &mut postgres::Client, name: &str, assignment: &str) -> (String, Option<String>) {
    let row = db.query_one("SELECT outcome, error FROM openagents_turns WHERE runtime = $1 AND assignment = $2", &[&name, &assignment]).unwrap_or_else(|e| panic!("the turn {assignment} of {name}: {e}"));
    let error: Option<String> = row.get(1);
    (row.get(0), error.map(|e| serde_json::from_str::<serde_json::Value>(&e).expect("the error's JSON")["code"].as_str().expect("a code").to_owned()))
}

/// A runner that runs until it is killed.
const SLOW: &str = "[runners.slow]\ncommand = \"/bin/sleep\"\nargs = [\"600\"]\n";

#[test]
fn alpha_killed_mid_turn_is_continued_by_a_new_alpha_with_a_fresh_state_folder() {
    let Some((url, _one_at_a_time)) = server("alpha_killed_mid_turn") else { return };
    let db_url = database(&url, "kill");
    let first_folder = Setup::new("pg-alpha-1", SLOW);
    let mut first = serve(&first_folder, "slow", &db_url, "alpha");
    let addr = addr_of(&first);
    assert_eq!(last_seq(addr), 0, "a new name starts at 0");
    assert_eq!(submit_echo(addr, "one two")["result"]["result"], "one two");
    let echoed = last_seq(addr);
    let _pending = submit_in_background(addr, "never ends", "asg-killed");
    wait_running(addr, echoed);
    let before = last_seq(addr);
    kill9(&mut first);
    drop(first);
    drop(first_folder);
    let mut db = client(&db_url);
    assert_eq!(stored_turn(&mut db, "alpha", "asg-killed"), ("running".to_owned(), None), "written when it started; nobody closed it yet");

    // Another machine, as far as the runtime can tell: a fresh state folder, the same database.
    let second_folder = Setup::new("pg-alpha-2", SLOW);
    let second = serve(&second_folder, "slow", &db_url, "alpha");
    let addr = addr_of(&second);
    let resumed = last_seq(addr);
    assert!(resumed >= before, "the sequence goes on from the database's ({resumed} < {before})");
    assert_eq!(stored_turn(&mut db, "alpha", "asg-killed"), ("failed".to_owned(), Some("runtime_restarted".to_owned())), "the killed turn is closed at start");
    assert_eq!(status(addr)["state"], "idle");
    assert_eq!(submit_echo(addr, "three")["result"]["result"], "three");
    let events = stored_events(&mut db, "alpha");
    let seqs: Vec<i64> = events.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(seqs, (1..=last_seq(addr)).collect::<Vec<_>>(), "one sequence over both processes, none used twice, none missing: {events:?}");
    let new_turn = events.iter().rposition(|(_, kind)| kind == "turn_started").expect("the new turn");
    assert!(events[new_turn].0 > resumed, "the new process's first turn comes after everything stored: {events:?}");
    // A client of the killed process resumes from the database: everything, from the start.
    let replayed = sse_events(addr, 0, seqs.len());
    assert_eq!(replayed.iter().map(|e| e["seq"].as_i64().expect("seq")).collect::<Vec<_>>(), seqs, "the resume is served from the stored events, no gap");
    assert_eq!(replayed[0]["event"]["type"], "turn_started");
    drop(second);
}

#[test]
fn two_names_on_one_database_keep_separate_histories_and_a_live_name_is_refused() {
    let Some((url, _one_at_a_time)) = server("two_names") else { return };
    let db_url = database(&url, "names");
    let (fa, fb) = (Setup::new("pg-names-a", ""), Setup::new("pg-names-b", ""));
    let mut alpha = serve(&fa, "echo", &db_url, "alpha");
    let beta = serve(&fb, "echo", &db_url, "beta");
    let (a, b) = (addr_of(&alpha), addr_of(&beta));
    assert_eq!(submit_echo(a, "alpha one")["result"]["result"], "alpha one");
    assert_eq!(submit_echo(b, "beta one")["result"]["result"], "beta one");
    assert_eq!(submit_echo(a, "alpha two")["result"]["result"], "alpha two");
    // Each name has its own sequence, from 1.
    let mut db = client(&db_url);
    let (ea, eb) = (stored_events(&mut db, "alpha"), stored_events(&mut db, "beta"));
    assert_eq!(ea.iter().map(|e| e.0).collect::<Vec<_>>(), (1..=last_seq(a)).collect::<Vec<_>>(), "{ea:?}");
    assert_eq!(eb.iter().map(|e| e.0).collect::<Vec<_>>(), (1..=last_seq(b)).collect::<Vec<_>>(), "{eb:?}");
    let tasks = |db: &mut postgres::Client, name: &str| -> Vec<String> { db.query("SELECT task FROM openagents_turns WHERE runtime = $1 ORDER BY first_seq", &[&name]).expect("turns").iter().map(|r| r.get(0)).collect() };
    assert_eq!(tasks(&mut db, "alpha"), ["alpha one", "alpha two"]);
    assert_eq!(tasks(&mut db, "beta"), ["beta one"]);
    // Each resumes its own history only.
    let texts = |addr, n| -> Vec<String> { sse_events(addr, 0, n).iter().filter(|e| e["event"]["type"] == "turn_completed").map(|e| e["event"]["result"].as_str().expect("a result").to_owned()).collect() };
    assert_eq!(texts(b, eb.len()), ["beta one"]);
    assert_eq!(texts(a, ea.len()), ["alpha one", "alpha two"]);

    // A second `alpha` while the first lives is refused, naming the name.
    let fc = Setup::new("pg-names-c", "");
    let creds = admin_credentials(&fc);
    match fc.serve(&["--credentials", &creds, "--store", &db_url, "--name", "alpha"]) {
        Ok(server) => panic!("a second alpha started: {}", server.stop()),
        Err((code, err)) => {
            assert_eq!(code, Some(2), "{err}");
            assert!(err.contains("in use by another openagents runtime") && err.contains("runtime alpha"), "{err}");
        }
    }
    // Once the first is gone (killed: its connection, and so its lock, goes with it), it may.
    kill9(&mut alpha);
    let again = serve(&fc, "echo", &db_url, "alpha");
    assert_eq!(last_seq(addr_of(&again)), ea.len() as i64, "alpha goes on from its own sequence, not beta's");
    drop((again, beta));
}

#[test]
fn the_server_stopped_mid_turn_fails_the_turn_and_the_runtime_writes_again_once_it_is_back() {
    let Some((url, _one_at_a_time)) = server("server_stopped") else { return };
    let db_url = database(&url, "outage");
    // A runner that keeps publishing: every tick is a write.
    let s = Setup::new("pg-outage", "");
    let script = s.file("tick.sh", "read -r _\nwhile :; do echo '{\"type\":\"text\",\"text\":\"tick\"}'; sleep 0.05; done\n", 0o755);
    std::fs::write(s.dir.join("runners.toml"), format!("{}\n[runners.tick]\ncommand = \"/bin/bash\"\nargs = [\"{}\"]\n", std::fs::read_to_string(s.dir.join("runners.toml")).expect("registry"), script.display())).expect("registry");
    let server = serve(&s, "tick", &db_url, "outage");
    let addr = addr_of(&server);
    let reply = submit_in_background(addr, "tick until the store goes", "asg-outage");
    wait_running(addr, 0);
    control("stop");
    let restart = Restart;
    let reply = reply.recv_timeout(BOUND).expect("the submit is answered within the bound").expect("a reply");
    let error = &reply["error"];
    assert_eq!(error["data"]["code"].as_str().or(error["code"].as_str()), Some("store_unavailable"), "a typed error: {reply}");
    let message = error["message"].as_str().unwrap_or_default().to_owned() + error["data"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("could not be written to the store") && message.contains("postgres://"), "{reply}");
    // The runtime goes on answering, without the server.
    let st = status(addr);
    assert_eq!(st["state"], "idle", "{st}");
    assert_eq!(st["counters"]["failed"], 1, "{st}");
    drop(restart);

    // Back: the next write reconnects (at most one attempt per backoff, so a turn submitted in
    // the first moments may still fail fast, with the same typed error).
    let deadline = Instant::now() + BOUND;
    let task = loop {
        let reply = submit_echo(addr, "after the outage");
        if reply["result"]["result"] == "after the outage" {
            break "after the outage";
        }
        assert_eq!(reply["error"]["data"]["code"].as_str().or(reply["error"]["code"].as_str()), Some("store_unavailable"), "{reply}");
        assert!(Instant::now() < deadline, "no turn was stored within {BOUND:?} of the server's return: {reply}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut db = client(&db_url);
    let turns: Vec<(String, String)> = db.query("SELECT task, outcome FROM openagents_turns WHERE runtime = 'outage' ORDER BY first_seq", &[]).expect("turns").iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(turns.last(), Some(&(task.to_owned(), "completed".to_owned())), "the new turn is stored: {turns:?}");
    assert_eq!(turns[0].0, "tick until the store goes", "the failed turn was written when it started: {turns:?}");
    let events = stored_events(&mut db, "outage");
    assert_eq!(events.last().map(|e| e.1.as_str()), Some("turn_completed"), "and its events: {events:?}");
    assert_eq!(events.last().map(|e| e.0), Some(last_seq(addr)));
    drop(server);
}

/// Starts the test server again when dropped (a failed assertion must not leave it stopped for
/// the next test).
struct Restart;

impl Drop for Restart {
    fn drop(&mut self) {
        control("start");
    }
}

#[test]
fn an_unreachable_server_and_a_newer_database_are_refused_at_start() {
    let Some((url, _one_at_a_time)) = server("refused_at_start") else { return };
    let s = Setup::new("pg-refused", "");
    // A port nobody listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("its address").port();
    let unreachable = format!("postgres://someone:hunter2@127.0.0.1:{port}/fleet");
    let started = Instant::now();
    let out = run(s.command(&["serve", "--stdio", "--runner", "echo", "--store", &unreachable, "--name", "alpha"]), b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("postgres://someone@127.0.0.1:{port}/fleet")) && err.contains("cannot connect"), "the server is named: {err}");
    assert!(!err.contains("hunter2") && !err.contains("panicked"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10), "refused quickly: {:?}", started.elapsed());
    // `acp` refuses the same way.
    let out = run(s.command(&["acp", "--runner", "echo", "--store", &unreachable]), b"");
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));

    // Tables of a newer version of ours.
    let db_url = database(&url, "newer");
    let mut first = serve(&s, "echo", &db_url, "alpha");
    kill9(&mut first);
    let mut db = client(&db_url);
    let version: i64 = db.query_one("SELECT value FROM openagents_meta WHERE key = 'schema_version'", &[]).expect("the version").get(0);
    assert!(version >= 1);
    db.execute("UPDATE openagents_meta SET value = $1 WHERE key = 'schema_version'", &[&(version + 1)]).expect("made newer");
    let out = run(s.command(&["serve", "--stdio", "--runner", "echo", "--store", &db_url, "--name", "alpha"]), b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("version {}", version + 1)) && err.contains("newer openagents") && err.contains("postgres://openagents@127.0.0.1:"), "{err}");
}

/// `GET /events?since=SINCE` on a raw connection: the first `n` events, within [`BOUND`].
fn sse_events(addr: SocketAddr, since: i64, n: usize) -> Vec<serde_json::Value> {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_millis(200))).expect("timeout");
    write!(stream, "GET /events?since={since} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ADMIN}\r\n\r\n").expect("the request");
    let deadline = Instant::now() + BOUND;
    let mut raw = Vec::new();
    loop {
        let events = sse_frames(&raw);
        if events.len() >= n {
            return events.into_iter().take(n).collect();
        }
        assert!(Instant::now() < deadline, "only {} of {n} events within {BOUND:?}: {}", events.len(), String::from_utf8_lossy(&raw));
        let mut buf = [0u8; 16384];
        match stream.read(&mut buf) {
            Ok(0) => panic!("the stream ended after {} of {n} events", events.len()),
            Ok(k) => raw.extend_from_slice(&buf[..k]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => panic!("reading the stream: {e}"),
        }
    }
}
