//! The durable store against the real binary: a restart on the same SQLite store continues the
//! sequence and a client resuming over SSE (and `subscribe` over stdio and the WebSocket) gets exactly the events
//! it missed, no gap, the earlier run's `shutting_down` ending nothing; a server
//! killed (`kill -9`) mid-turn leaves a store whose turn the next start closes with a
//! `turn_failed` event (`runtime_restarted`), and that passes `PRAGMA integrity_check`; killed
//! ten times at random points of a busy turn, the store stays intact, no sequence number is used
//! twice, and every event a subscriber was sent is served again, byte for byte; bad stores are refused at start (exit 2, the path named); the
//! default store's place, `--name`, and a store another runtime holds.

mod security_common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use security_common::*;


fn last_seq(addr: SocketAddr) -> i64 {
    admin_rpc(addr, "status", serde_json::Value::Null)["result"]["last_seq"].as_i64().expect("last_seq")
}

fn submit(addr: SocketAddr, task: &str) {
    let reply = admin_rpc(addr, "submit", serde_json::json!({ "task": task }));
    assert_eq!(reply["result"]["result"], task, "{reply}");
}

/// `GET /events` with `resume` (`("last-event-id", "3")` as a header, or `("since", "3")` in
/// the query) on a raw connection: the first `n` events, parsed, within [`BOUND`].
fn sse(addr: SocketAddr, resume: (&str, &str), n: usize) -> Vec<serde_json::Value> {
    let (path, header) = match resume {
        ("since", v) => (format!("/events?since={v}"), String::new()),
        (name, v) => ("/events".to_owned(), format!("{name}: {v}\r\n")),
    };
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_millis(200))).expect("timeout");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ADMIN}\r\n{header}\r\n").expect("the request");
    let deadline = Instant::now() + BOUND;
    let mut raw = Vec::new();
    let mut events = Vec::new();
    while events.len() < n {
        assert!(Instant::now() < deadline, "only {} of {n} events within {BOUND:?}: {}", events.len(), String::from_utf8_lossy(&raw));
        let mut buf = [0u8; 16384];
        match stream.read(&mut buf) {
            Ok(0) => panic!("the stream ended after {} of {n} events", events.len()),
            Ok(k) => raw.extend_from_slice(&buf[..k]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => panic!("reading the stream: {e}"),
        }
        events = sse_frames(&raw);
    }
    events.truncate(n);
    events
}

/// Every event in the SQLite store `conn` is open on, in order, as `(seq, time_ms, json)`: the
/// store keeps one group commit's events as a block (a row of `event_blocks`), its `data` one
/// line `<seq>\t<time_ms>\t<json>\n` an event.
fn stored_events(conn: &rusqlite::Connection) -> Vec<(i64, i64, String)> {
    let mut stmt = conn.prepare("SELECT data FROM event_blocks ORDER BY first_seq").expect("the blocks");
    let blocks: Vec<String> = stmt.query_map([], |r| r.get(0)).expect("the blocks").map(|b| b.expect("a block")).collect();
    blocks
        .iter()
        .flat_map(|data| data.lines())
        .map(|line| {
            let mut parts = line.splitn(3, '\t');
            let mut next = || parts.next().unwrap_or_else(|| panic!("a line of three parts: {line:?}"));
            let (seq, time_ms, json) = (next().parse().expect("seq"), next().parse().expect("time_ms"), next().to_owned());
            (seq, time_ms, json)
        })
        .collect()
}

fn kinds(events: &[serde_json::Value]) -> Vec<(i64, String)> {
    events.iter().map(|e| (e["seq"].as_i64().expect("seq"), e["event"]["type"].as_str().expect("type").to_owned())).collect()
}

fn signal(server: &mut Server, name: &str) -> Option<i32> {
    let ok = Command::new("kill").args(["-s", name, &server.child.id().to_string()]).status().expect("kill runs");
    assert!(ok.success());
    wait_bounded(&mut server.child)
}

fn db_arg(path: &Path) -> String {
    format!("sqlite:{}", path.display())
}

#[test]
fn after_sigterm_and_a_restart_the_sequence_continues_and_a_resume_gets_exactly_what_it_missed() {
    let s = Setup::new("store-restart", "");
    let creds = admin_credentials(&s);
    let db = s.dir.join("runtime.db");
    let args = ["--credentials", creds.as_str(), "--store", &db_arg(&db)];
    let mut first = s.serve(&args).unwrap_or_else(|(code, err)| panic!("serve did not start ({code:?}): {err}"));
    let addr = addr_of(&first);
    assert_eq!(last_seq(addr), 0, "a new store starts at 0");
    submit(addr, "one two");
    let seen = last_seq(addr);
    submit(addr, "three four five");
    let before = last_seq(addr);
    assert!(before > seen && seen > 0, "{seen} {before}");
    assert_eq!(signal(&mut first, "TERM"), Some(0), "SIGTERM ends serve cleanly");
    drop(first);

    let second = s.serve(&args).unwrap_or_else(|(code, err)| panic!("serve did not start again ({code:?}): {err}"));
    let addr = addr_of(&second);
    // The first run's `shutting_down` was the last event it wrote.
    assert_eq!(last_seq(addr), before + 1, "the sequence goes on from the store's");
    submit(addr, "six");
    let now = last_seq(addr);
    // A client of the first run that had seen `seen`: everything after it, over both runs.
    let want = (now - seen) as usize;
    for resume in [("last-event-id", seen.to_string()), ("since", seen.to_string())] {
        let got = sse(addr, (resume.0, &resume.1), want);
        let got = kinds(&got);
        assert_eq!(got.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), (seen + 1..=now).collect::<Vec<_>>(), "{resume:?}: {got:?}");
        assert!(got.iter().all(|(_, kind)| kind != "gap" && kind != "lagged"), "{resume:?}: {got:?}");
        let shutdown = got.iter().position(|(_, kind)| kind == "shutting_down").expect("the first run's shutting_down");
        assert_eq!(got[shutdown].0, before + 1);
        assert_eq!(got[shutdown + 1], (before + 2, "turn_started".to_owned()), "the second run's first event follows, no seq used twice");
        assert_eq!(got.last().map(|(_, k)| k.as_str()), Some("turn_completed"));
    }
}

/// A runner that runs until it is killed.
const SLOW: &str = "[runners.slow]\ncommand = \"/bin/sleep\"\nargs = [\"600\"]\n";

#[test]
fn a_turn_running_when_the_server_is_killed_is_closed_by_the_next_start_and_the_store_is_intact() {
    let s = Setup::new("store-kill", SLOW);
    let creds = admin_credentials(&s);
    let db = s.dir.join("runtime.db");
    let args = ["--credentials", creds.as_str(), "--store", &db_arg(&db)];
    let mut first = s.serve_runner("slow", &args).unwrap_or_else(|(code, err)| panic!("serve did not start ({code:?}): {err}"));
    let addr = addr_of(&first);
    // The submit waits for a turn that never ends: on its own thread, left to fail with the server.
    std::thread::spawn(move || {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"submit","params":{"task":"never ends","assignment":"asg-killed","conversation":"conv-killed"}}"#;
        let request = format!("POST /rpc HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        if let Ok(mut stream) = TcpStream::connect(addr) {
            let _ = stream.write_all(request.as_bytes());
            let _ = stream.read_to_end(&mut Vec::new());
        }
    });
    let deadline = Instant::now() + BOUND;
    loop {
        let status = admin_rpc(addr, "status", serde_json::Value::Null);
        if status["result"]["state"] == "running" && last_seq(addr) >= 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the turn never started: {status}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(signal(&mut first, "KILL"), None, "killed by the signal");
    drop(first);
    {
        let conn = rusqlite::Connection::open(&db).expect("the store opens");
        let outcome: String = conn.query_row("SELECT outcome FROM turns WHERE assignment = 'asg-killed'", [], |r| r.get(0)).expect("the turn was written when it started");
        assert_eq!(outcome, "running", "nobody closed it yet");
    }

    let mut second = s.serve_runner("slow", &args).unwrap_or_else(|(code, err)| panic!("serve did not start again ({code:?}): {err}"));
    let addr = addr_of(&second);
    assert_eq!(last_seq(addr), 2, "the killed run's turn_started is kept, and the start published the turn's end after it");
    assert_eq!(admin_rpc(addr, "status", serde_json::Value::Null)["result"]["state"], "idle");
    // A client replaying the stream sees the killed turn end: turn_failed, runtime_restarted.
    for resume in [("since", "0"), ("last-event-id", "1")] {
        let got = sse(addr, resume, if resume.0 == "since" { 2 } else { 1 });
        let failed = got.last().expect("an event");
        assert_eq!((failed["seq"].as_i64(), failed["event"]["type"].as_str()), (Some(2), Some("turn_failed")), "{resume:?}: {got:?}");
        assert_eq!(failed["event"]["error"]["code"], "runtime_restarted", "{failed}");
        assert_eq!(failed["event"]["error"]["retryable"], true, "{failed}");
    }
    assert_eq!(signal(&mut second, "TERM"), Some(0));
    drop(second);

    let conn = rusqlite::Connection::open(&db).expect("the store opens");
    let integrity: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).expect("integrity_check");
    assert_eq!(integrity, "ok");
    let (outcome, error, first_seq, last, ended, conversation, task): (String, String, i64, i64, Option<i64>, String, String) = conn
        .query_row("SELECT outcome, error, first_seq, last_seq, ended_ms, conversation, task FROM turns WHERE assignment = 'asg-killed'", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?)))
        .expect("the turn");
    assert_eq!(outcome, "failed");
    let error: serde_json::Value = serde_json::from_str(&error).expect("the error is JSON");
    assert_eq!(error["code"], "runtime_restarted");
    assert_eq!((first_seq, last), (1, 2), "the turn's last event is the turn_failed the restart wrote");
    assert!(ended.is_some());
    assert_eq!((conversation.as_str(), task.as_str()), ("conv-killed", "never ends"));
    let kinds: Vec<String> = stored_events(&conn).iter().map(|(_, _, j)| serde_json::from_str::<serde_json::Value>(j).unwrap()["event"]["type"].as_str().unwrap().to_owned()).collect();
    assert_eq!(kinds, ["turn_started", "turn_failed", "shutting_down"], "the restart published the closed turn's end");
}

/// `serve --http --runner echo --store STORE` in `s`: its exit code and stderr (it must not start).
fn refused(s: &Setup, store: &str) -> (Option<i32>, String) {
    match s.serve(&["--store", store]) {
        Ok(server) => panic!("serve started on {store}: {}", server.stop()),
        Err(refusal) => refusal,
    }
}

#[test]
fn bad_stores_are_refused_at_start_naming_the_path() {
    let s = Setup::new("store-bad", "");
    // Unwritable: nobody may create files in /proc, root included.
    let (code, err) = refused(&s, "sqlite:/proc/openagents-store-test.db");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/proc/openagents-store-test.db") && err.contains("cannot use the store"), "{err}");
    // A missing folder, and a path through a file.
    for path in [s.dir.join("missing/x.db"), s.dir.join("config.toml/x.db")] {
        let (code, err) = refused(&s, &db_arg(&path));
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(&path.display().to_string()), "{err}");
    }
    // Not a database.
    let text = s.file("notes.db", &"not a database, just text. ".repeat(20), 0o600);
    let (code, err) = refused(&s, &db_arg(&text));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&text.display().to_string()) && err.contains("is not an openagents store"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(std::fs::read_to_string(&text).unwrap(), "not a database, just text. ".repeat(20), "a refused file is left alone");
    // Another application's database.
    let other = s.dir.join("other.db");
    rusqlite::Connection::open(&other).unwrap().execute_batch("CREATE TABLE t (x)").unwrap();
    let (code, err) = refused(&s, &db_arg(&other));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&other.display().to_string()) && err.contains("another application"), "{err}");
    // A store of a newer version of ours.
    let newer = s.dir.join("newer.db");
    let mut server = s.serve(&["--store", &db_arg(&newer)]).unwrap_or_else(|(code, err)| panic!("serve did not start ({code:?}): {err}"));
    assert_eq!(signal(&mut server, "TERM"), Some(0));
    drop(server);
    let version: i64 = {
        let conn = rusqlite::Connection::open(&newer).unwrap();
        let v: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        conn.pragma_update(None, "user_version", v + 1).unwrap();
        v
    };
    assert!(version >= 1);
    let (code, err) = refused(&s, &db_arg(&newer));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&newer.display().to_string()) && err.contains(&format!("version {}", version + 1)) && err.contains("newer openagents"), "{err}");
    // A PostgreSQL server that is not there (port 1 on loopback refuses at once); its URL (which
    // may hold a password) is named without the password. crates/cli/tests/postgres.rs tests a
    // real server.
    let (code, err) = refused(&s, "postgres://user:hunter2@127.0.0.1:1/openagents");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("postgres://user@127.0.0.1:1/openagents") && err.contains("cannot connect") && !err.contains("hunter2"), "{err}");
    // The default store where its folder cannot be made (the state folder is a file).
    let mut command = s.command(&["serve", "--stdio", "--runner", "echo"]);
    command.env("XDG_STATE_HOME", &text);
    let out = run(command, b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&text.join("openagents/default.db").display().to_string()), "{err}");
    // `acp` refuses the same way.
    let out = run(s.command(&["acp", "--runner", "echo", "--store", &db_arg(&text)]), b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&text.display().to_string()) && err.contains("openagents acp:"), "{err}");
}

#[test]
fn the_default_store_is_named_by_the_runtime_and_one_runtime_holds_a_store() {
    let s = Setup::new("store-default", "");
    // The helpers point XDG_STATE_HOME at the setup's folder.
    let default = s.dir.join("openagents/default.db");
    let mut a = s.serve(&[]).unwrap_or_else(|(code, err)| panic!("serve did not start ({code:?}): {err}"));
    assert!(default.is_file(), "the default store is {}", default.display());
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&default).unwrap().permissions());
    assert_eq!(mode & 0o077, 0, "the store is private to its owner: {mode:o}");
    // A second runtime on the default store gives way to memory, and says so.
    let mut b = s.serve(&[]).unwrap_or_else(|(code, err)| panic!("a second serve did not start ({code:?}): {err}"));
    assert_eq!(signal(&mut b, "TERM"), Some(0));
    let err = b.stop();
    assert!(err.contains("is in use by another runtime") && err.contains(&default.display().to_string()), "{err}");
    // A store named outright is refused when it is held.
    let (code, err) = refused(&s, &db_arg(&default));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("in use by another openagents runtime") && err.contains(&default.display().to_string()), "{err}");
    // --name picks another file beside it.
    let mut c = s.serve(&["--name", "second"]).unwrap_or_else(|(code, err)| panic!("serve --name did not start ({code:?}): {err}"));
    assert!(s.dir.join("openagents/second.db").is_file());
    assert_eq!(signal(&mut c, "TERM"), Some(0));
    assert_eq!(signal(&mut a, "TERM"), Some(0));
    // --name is checked: no path in it.
    match s.serve(&["--name", "../escape"]) {
        Ok(server) => panic!("serve started with --name ../escape: {}", server.stop()),
        Err((code, err)) => {
            assert_eq!(code, Some(2), "{err}");
            assert!(err.contains("--name"), "{err}");
        }
    }
    assert!(!s.dir.join("escape.db").exists());
}

/// `openagents serve --stdio --runner echo --store STORE` in `s`, its stdin piped and its
/// stdout read line by line.
fn stdio(s: &Setup, store: &str) -> (std::process::Child, std::process::ChildStdin, std::sync::mpsc::Receiver<String>) {
    let mut child = s.command(&["serve", "--stdio", "--runner", "echo", "--store", store]).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null()).spawn().expect("serve --stdio starts");
    let stdin = child.stdin.take().expect("stdin");
    let lines = lines_of(child.stdout.take().expect("stdout"));
    (child, stdin, lines)
}

/// The lines up to and with the answer to request `id`, within [`BOUND`].
fn until_answer(lines: &std::sync::mpsc::Receiver<String>, id: i64) -> (Vec<serde_json::Value>, serde_json::Value) {
    let mut events = Vec::new();
    loop {
        let line = lines.recv_timeout(BOUND).unwrap_or_else(|_| panic!("no answer to {id} within {BOUND:?}; events so far: {events:?}"));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        if v["id"] == id {
            return (events, v);
        }
        if let Some(ev) = v.get("event") {
            events.push(ev.clone());
        }
    }
}

#[test]
fn over_stdio_a_subscribe_after_a_restart_replays_the_earlier_run_from_the_store() {
    let s = Setup::new("store-stdio", "");
    let db = db_arg(&s.dir.join("stdio.db"));
    let (mut first, mut stdin, lines) = stdio(&s, &db);
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{{"since":0}}}}"#).unwrap();
    let (_, answer) = until_answer(&lines, 1);
    assert_eq!(answer["result"]["last_seq"], 0, "{answer}");
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"submit","params":{{"task":"alpha beta"}}}}"#).unwrap();
    let (live, answer) = until_answer(&lines, 2);
    assert_eq!(answer["result"]["result"], "alpha beta", "{answer}");
    assert_eq!(kinds(&live), [(1, "turn_started".to_owned()), (2, "text".to_owned()), (3, "text".to_owned()), (4, "turn_completed".to_owned())]);
    // End of input ends the runtime, with its `shutting_down` (5).
    drop(stdin);
    assert_eq!(wait_bounded(&mut first), Some(0));

    let (mut second, mut stdin, lines) = stdio(&s, &db);
    // A client of the first run that had seen 1.
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{{"since":1}}}}"#).unwrap();
    let (replayed, answer) = until_answer(&lines, 1);
    assert_eq!(answer["result"]["last_seq"], 5, "{answer}");
    assert_eq!(kinds(&replayed), [(2, "text".to_owned()), (3, "text".to_owned()), (4, "turn_completed".to_owned()), (5, "shutting_down".to_owned())], "exactly what it missed, no gap, and the stream goes on");
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"submit","params":{{"task":"gamma"}}}}"#).unwrap();
    let (live, answer) = until_answer(&lines, 2);
    assert_eq!(answer["result"]["result"], "gamma", "{answer}");
    assert_eq!(kinds(&live), [(6, "turn_started".to_owned()), (7, "text".to_owned()), (8, "turn_completed".to_owned())]);
    drop(stdin);
    assert_eq!(wait_bounded(&mut second), Some(0));
}

#[test]
fn openagents_store_in_the_environment_chooses_the_store_and_the_flag_wins() {
    let s = Setup::new("store-env", "");
    let default = s.dir.join("openagents/default.db");
    // `memory` from the environment: no default store is made.
    let mut command = s.command(&["serve", "--stdio", "--runner", "echo"]);
    command.env("OPENAGENTS_STORE", "memory");
    let out = run(command, b"");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!default.exists(), "OPENAGENTS_STORE=memory made {}", default.display());
    // A bad value from the environment is refused like the flag's.
    let mut command = s.command(&["serve", "--stdio", "--runner", "echo"]);
    command.env("OPENAGENTS_STORE", "postgres://127.0.0.1:1/openagents");
    let out = run(command, b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("postgres://127.0.0.1:1/openagents"));
    // `--store` wins over the environment.
    let db = s.dir.join("chosen.db");
    let mut command = s.command(&["serve", "--stdio", "--runner", "echo", "--store", &format!("sqlite:{}", db.display())]);
    command.env("OPENAGENTS_STORE", "memory");
    let out = run(command, b"");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(db.is_file(), "--store sqlite:{} was not used", db.display());
}

#[test]
fn retain_days_prunes_older_events_at_start_a_resume_from_before_them_gets_gap_and_the_flag_is_checked() {
    let s = Setup::new("store-days", "");
    let creds = admin_credentials(&s);
    let db = s.dir.join("days.db");
    let args = ["--credentials", creds.as_str(), "--store", &db_arg(&db)];
    let mut first = s.serve(&args).unwrap_or_else(|(code, err)| panic!("serve did not start ({code:?}): {err}"));
    let addr = addr_of(&first);
    submit(addr, "one two");
    let old = last_seq(addr);
    submit(addr, "three");
    assert_eq!(signal(&mut first, "TERM"), Some(0));
    drop(first);
    // The first turn's events age ten days (the store prunes whole blocks, one group commit's
    // events each: `last_seq` is what was written, so the second turn's are in later blocks).
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let aged = openagents_server::store::age_events_for_test(&db, old, now_ms - 10 * 86_400_000).expect("aged");
    assert_eq!(aged as i64, old);
    let stored = |db: &Path| -> Vec<i64> { stored_events(&rusqlite::Connection::open(db).unwrap()).iter().map(|e| e.0).collect() };
    let all = stored(&db);
    assert_eq!(all.first(), Some(&1));

    // The default (30 days) keeps them.
    let mut second = s.serve(&args).unwrap_or_else(|(code, err)| panic!("serve did not start again ({code:?}): {err}"));
    assert_eq!(signal(&mut second, "TERM"), Some(0));
    drop(second);
    let kept = stored(&db);
    assert_eq!(kept[..all.len()], all[..], "ten days old is kept by default");

    // --retain-days 7 prunes them at start; the newer ones stay.
    let with_days: Vec<&str> = args.iter().copied().chain(["--retain-days", "7"]).collect();
    let third = s.serve(&with_days).unwrap_or_else(|(code, err)| panic!("serve --retain-days 7 did not start ({code:?}): {err}"));
    let addr = addr_of(&third);
    let now = last_seq(addr);
    assert_eq!(stored(&db), (old + 1..=now).collect::<Vec<_>>(), "only the aged events went");
    let got = sse(addr, ("since", "0"), 2);
    assert_eq!((got[0]["event"]["type"].as_str(), got[0]["event"]["since"].as_i64(), got[0]["event"]["resumed_at"].as_i64()), (Some("gap"), Some(0), Some(old)), "{got:?}");
    assert_eq!(got[1]["seq"].as_i64(), Some(old + 1), "{got:?}");
    let got = sse(addr, ("last-event-id", &old.to_string()), 1);
    assert_eq!(kinds(&got), [(old + 1, "turn_started".to_owned())], "a resume from what is kept gets no gap");
    drop(third);

    // 0, negative and non-numbers are refused, by serve and acp alike.
    for bad in [["--retain-days", "0"], ["--retain-days", "-1"], ["--retain-days=-3", ""], ["--retain-days", "a week"], ["--retain-days", "1.5"]] {
        let bad: Vec<&str> = bad.into_iter().filter(|a| !a.is_empty()).collect();
        let serve: Vec<&str> = ["serve", "--stdio", "--runner", "echo", "--store", "memory"].into_iter().chain(bad.iter().copied()).collect();
        let acp: Vec<&str> = ["acp", "--runner", "echo", "--store", "memory"].into_iter().chain(bad.iter().copied()).collect();
        for command in [serve, acp] {
            let out = run(s.command(&command), b"");
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{command:?}: {err}");
            assert!(err.contains("--retain-days") || err.contains("'-1'"), "{command:?}: {err}");
            assert!(!err.contains("panicked"), "{command:?}: {err}");
        }
    }
}

/// A live `GET /events?since=SINCE` read on its own thread: every event's JSON text, as sent,
/// arrives on the channel until the connection ends.
fn sse_live(addr: SocketAddr, since: i64) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut stream = TcpStream::connect(addr).expect("connect");
    write!(stream, "GET /events?since={since} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ADMIN}\r\n\r\n").expect("the request");
    std::thread::spawn(move || {
        // What has arrived: the head, then chunks; taken apart as it comes, never read twice.
        let (mut raw, mut head_done, mut payload) = (Vec::new(), false, Vec::new());
        let mut buf = vec![0u8; 65536];
        while let Ok(k) = stream.read(&mut buf) {
            if k == 0 {
                break;
            }
            raw.extend_from_slice(&buf[..k]);
            if !head_done {
                let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
                assert!(raw.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&raw[..end]));
                raw.drain(..end + 4);
                head_done = true;
            }
            while let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") {
                let Ok(size) = usize::from_str_radix(String::from_utf8_lossy(&raw[..eol]).trim(), 16) else { return };
                if raw.len() < eol + 2 + size + 2 {
                    break;
                }
                payload.extend_from_slice(&raw[eol + 2..eol + 2 + size]);
                raw.drain(..eol + 2 + size + 2);
            }
            while let Some(end) = payload.windows(2).position(|w| w == b"\n\n") {
                let frame: Vec<u8> = payload.drain(..end + 2).collect();
                let data: String = String::from_utf8_lossy(&frame).lines().filter_map(|l| l.strip_prefix("data: ")).collect();
                if !data.is_empty() && tx.send(data).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// A small deterministic generator (xorshift64*), seeded from the clock and printed, so a
/// failing run can be told apart and its kill points read from the message.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

/// How many times the server is killed.
const KILLS: usize = 10;

/// How many words the busy turn's task has: the echo runner sends one `text` event a word.
const BUSY_WORDS: usize = 1500;

/// Issue #26's proof: ten times, a server is killed (`kill -9`) at a random point of a busy turn
/// (after its subscriber has been sent a random number of the turn's events) and started again
/// on the same store. Each time the store passes `PRAGMA integrity_check`, the killed turn ends
/// in the replayed stream with exactly one terminal event (its `turn_completed` when it was
/// written before the kill, else the restart's `turn_failed` with `runtime_restarted`), no
/// sequence number is given twice, and every event the subscriber was sent is served again by
/// the restarted server byte for byte.
#[test]
fn killed_ten_times_at_random_points_of_a_busy_turn_the_store_loses_nothing_a_subscriber_saw() {
    let s = Setup::new("store-kill-random", "");
    let creds = admin_credentials(&s);
    let db = s.dir.join("runtime.db");
    let args = ["--credentials", creds.as_str(), "--store", &db_arg(&db)];
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1;
    let mut rng = Rng(seed);
    let task: String = (0..BUSY_WORDS).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
    // Every event any subscriber was sent, by sequence number, as sent.
    let mut seen: std::collections::BTreeMap<i64, String> = std::collections::BTreeMap::new();
    let started = Instant::now();
    let mut kills = Vec::new();
    for round in 0..=KILLS {
        let mut server = s.serve(&args).unwrap_or_else(|(code, err)| panic!("seed {seed}, round {round}: serve did not start ({code:?}): {err}"));
        let addr = addr_of(&server);
        let start_seq = last_seq(addr);
        let newest_seen = seen.keys().next_back().copied().unwrap_or(0);
        assert!(start_seq >= newest_seen, "seed {seed}, round {round}: the sequence went back to {start_seq}, below {newest_seen} already sent");

        // Everything from the start, replayed and then live: what earlier runs sent, identical.
        let events = sse_live(addr, 0);
        let replay: Vec<String> = (0..start_seq).map(|_| events.recv_timeout(BOUND).unwrap_or_else(|_| panic!("seed {seed}, round {round}: the replay ended early"))).collect();
        let replayed: std::collections::BTreeMap<i64, String> = replay.iter().map(|d| (serde_json::from_str::<serde_json::Value>(d).expect("JSON")["seq"].as_i64().expect("seq"), d.clone())).collect();
        assert_eq!(replayed.keys().copied().collect::<Vec<_>>(), (1..=start_seq).collect::<Vec<_>>(), "seed {seed}, round {round}: a replay with a hole or a notice");
        for (seq, data) in &seen {
            assert_eq!(replayed.get(seq), Some(data), "seed {seed}, round {round}: event {seq} was sent before a kill and is not served again as it was");
        }
        // The turn killed in the round before ends with exactly one terminal event.
        if round > 0 {
            let last_start = replayed.iter().rev().find(|(_, d)| d.contains(r#""type":"turn_started""#)).map(|(seq, _)| *seq).expect("a turn started");
            let ends: Vec<&String> = replayed.range(last_start..).map(|(_, d)| d).filter(|d| d.contains(r#""type":"turn_completed""#) || d.contains(r#""type":"turn_failed""#)).collect();
            assert_eq!(ends.len(), 1, "seed {seed}, round {round}: the killed turn's ends: {ends:?}");
            assert!(ends[0].contains("turn_completed") || ends[0].contains(r#""code":"runtime_restarted""#), "seed {seed}, round {round}: {}", ends[0]);
        }
        seen.extend(replayed);
        if round == KILLS {
            assert_eq!(signal(&mut server, "TERM"), Some(0), "seed {seed}");
            break;
        }

        // A busy turn, killed once the subscriber has been sent a random number of its events.
        let kill_after = 1 + rng.below(BUSY_WORDS as u64 - 1) as usize;
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "submit", "params": {"task": task}}).to_string();
        std::thread::spawn(move || {
            let request = format!("POST /rpc HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
            if let Ok(mut stream) = TcpStream::connect(addr) {
                let _ = stream.write_all(request.as_bytes());
                let _ = stream.read_to_end(&mut Vec::new());
            }
        });
        for n in 0..kill_after {
            let data = events.recv_timeout(BOUND).unwrap_or_else(|_| panic!("seed {seed}, round {round}: only {n} of the turn's events arrived"));
            let v: serde_json::Value = serde_json::from_str(&data).expect("JSON");
            let kind = v["event"]["type"].as_str().expect("a type");
            // A subscriber-local notice is not part of the stream.
            assert!(kind != "gap", "seed {seed}, round {round}: {data}");
            if kind != "lagged" {
                let seq = v["seq"].as_i64().expect("seq");
                assert!(seq > start_seq && seen.insert(seq, data.clone()).is_none(), "seed {seed}, round {round}: sequence number {seq} was sent twice");
            }
        }
        assert_eq!(signal(&mut server, "KILL"), None, "seed {seed}, round {round}: killed by the signal");
        kills.push(kill_after);
        drop(server);
        let conn = rusqlite::Connection::open(&db).expect("the store opens");
        let integrity: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).expect("integrity_check");
        assert_eq!(integrity, "ok", "seed {seed}, round {round}");
    }
    // The store holds every event ever sent, as sent, under its one sequence number.
    let conn = rusqlite::Connection::open(&db).expect("the store opens");
    let stored: std::collections::BTreeMap<i64, String> = stored_events(&conn).into_iter().map(|(seq, _, json)| (seq, json)).collect();
    for (seq, data) in &seen {
        assert_eq!(stored.get(seq), Some(data), "seed {seed}: event {seq}");
    }
    let running: i64 = conn.query_row("SELECT count(*) FROM turns WHERE outcome = 'running'", [], |r| r.get(0)).expect("turns");
    assert_eq!(running, 0, "seed {seed}: every killed turn was closed");
    eprintln!("seed {seed}: killed after {kills:?} events, {} events checked, in {:?}", seen.len(), started.elapsed());
}

/// Over the WebSocket (`/frontend/v2`, as the admin): the `frontend.v2.event` params of every
/// message before the answer to `subscribe` with `since`, and the answer.
fn ws_subscribe(addr: SocketAddr, since: i64) -> (Vec<serde_json::Value>, serde_json::Value) {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    rt.block_on(async {
        let mut request = format!("ws://{addr}/frontend/v2").into_client_request().expect("a request");
        request.headers_mut().insert("authorization", format!("Bearer {ADMIN}").parse().expect("header"));
        request.headers_mut().insert("sec-websocket-protocol", "openagents.v2".parse().expect("header"));
        let (mut ws, _) = tokio::time::timeout(BOUND, tokio_tungstenite::connect_async(request)).await.expect("the handshake in time").expect("the WebSocket opens");
        let ask = serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": "subscribe", "params": { "since": since } });
        ws.send(Message::Text(ask.to_string().into())).await.expect("subscribe sent");
        let mut events = Vec::new();
        loop {
            let next = tokio::time::timeout(BOUND, ws.next()).await.unwrap_or_else(|_| panic!("no answer within {BOUND:?}; events so far: {events:?}"));
            let Some(Ok(Message::Text(text))) = next else { continue };
            let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
            if v["id"] == 1 {
                return (events, v);
            }
            if v["method"] == "frontend.v2.event" {
                events.push(v["params"].clone());
            }
        }
    })
}

#[test]
fn over_the_websocket_a_subscribe_after_a_restart_gets_exactly_what_it_missed() {
    let s = Setup::new("store-ws", "");
    let creds = admin_credentials(&s);
    let db = s.dir.join("ws.db");
    let args = ["--credentials", creds.as_str(), "--store", &db_arg(&db)];
    let mut first = s.serve(&args).unwrap_or_else(|(code, err)| panic!("serve did not start ({code:?}): {err}"));
    submit(addr_of(&first), "alpha beta");
    let before = last_seq(addr_of(&first));
    assert_eq!(signal(&mut first, "TERM"), Some(0), "SIGTERM ends serve cleanly");
    drop(first);

    let second = s.serve(&args).unwrap_or_else(|(code, err)| panic!("serve did not start again ({code:?}): {err}"));
    let addr = addr_of(&second);
    // A frontend of the first run that had seen its turn_started (1).
    let (replayed, answer) = ws_subscribe(addr, 1);
    assert!(answer.get("result").is_some(), "{answer}");
    let got = kinds(&replayed);
    assert_eq!(got.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), (2..=before + 1).collect::<Vec<_>>(), "exactly what it missed, from the store: {got:?}");
    assert!(got.iter().all(|(_, kind)| kind != "gap" && kind != "lagged"), "{got:?}");
    assert_eq!(got.last(), Some(&(before + 1, "shutting_down".to_owned())), "the first run's last event");
}
