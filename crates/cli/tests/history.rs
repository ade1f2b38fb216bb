//! `openagents history [ID] [--json]` against the real binary: a runtime on a SQLite store, three
//! turns over two conversations, then the listing newest first (a table, `--limit` with a note
//! of more, `--json`), one conversation's turns in order, an unknown id and a credential that may
//! not read events refused with exit 1 and the reason; after a restart on the same store the
//! history is still there.

mod security_common;

use std::net::SocketAddr;

use security_common::*;

/// The token of a credential that may call `status` but not read events.
const BLIND: &str = "b11dd0000b11dd0000b11dd0000b11dd0000b11dd0000b11dd0000b11dd00000";

fn start(s: &Setup, db: &str) -> (Server, SocketAddr) {
    let creds = s.file(
        "credentials.toml",
        &format!("[credentials.root]\ntoken = \"{ADMIN}\"\nrole = \"admin\"\n\n[credentials.watcher]\ntoken = \"{OBSERVER}\"\nrole = \"observer\"\n\n[credentials.blind]\ntoken = \"{BLIND}\"\nmethods = [\"status\"]\nevents = false\n"),
        0o600,
    );
    let server = s.serve(&["--credentials", &creds.display().to_string(), "--store", db]).unwrap_or_else(|(code, err)| panic!("serve did not start ({code:?}): {err}"));
    let addr = server.url.trim_start_matches("http://").trim_end_matches('/').parse().expect("a socket address");
    (server, addr)
}

fn submit(addr: SocketAddr, conversation: &str, task: &str) {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "submit", "params": {"task": task, "conversation": conversation}}).to_string();
    let request = format!("POST /rpc HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    let (status, _, reply) = http_exchange(addr, request.as_bytes());
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&reply));
}

/// `openagents history ARGS` against `server` with `token`: exit code, stdout, stderr.
fn history(s: &Setup, server: &Server, token: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let token_file = s.file("history.token", token, 0o600);
    let token_file = token_file.display().to_string();
    let mut all = vec!["history", "--url", server.url.as_str(), "--token-file", token_file.as_str()];
    all.extend_from_slice(args);
    let out = run(s.command(&all), b"");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn history_lists_conversations_and_shows_one_and_refuses_what_it_must() {
    let s = Setup::new("history-cli", "");
    let db = format!("sqlite:{}", s.dir.join("history.db").display());
    let (server, addr) = start(&s, &db);
    submit(addr, "conv-old", "first question\nwith a second line");
    std::thread::sleep(std::time::Duration::from_millis(5));
    submit(addr, "conv-new", "hello there");
    std::thread::sleep(std::time::Duration::from_millis(5));
    submit(addr, "conv-old", "and a follow-up");

    // The listing: newest first (conv-old had the latest turn), as a table.
    let (code, out, err) = history(&s, &server, OBSERVER, &[]);
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].starts_with("ID") && lines[0].contains("UPDATED") && lines[0].contains("TURNS") && lines[0].contains("TITLE"), "{out}");
    let words = |line: &str| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let (old, new) = (words(lines[1]), words(lines[2]));
    assert_eq!((old[0].as_str(), old[3].as_str(), old[4].as_str(), old[5..].join(" ")), ("conv-old", "2", "echo", "first question".to_owned()), "{out}");
    assert!(old[1].len() == 10 && old[2].ends_with('Z'), "the time in UTC: {out}");
    assert_eq!((new[0].as_str(), new[3].as_str(), new[4].as_str(), new[5..].join(" ")), ("conv-new", "1", "echo", "hello there".to_owned()), "{out}");
    // --limit 1: the newest only, and a note that there are more.
    let (code, out, _) = history(&s, &server, OBSERVER, &["--limit", "1"]);
    assert_eq!(code, Some(0));
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(out.lines().nth(1).is_some_and(|l| l.starts_with("conv-old ")) && out.contains("(more: give --limit 2"), "{out}");
    // --json: one line of JSON.
    let (code, out, _) = history(&s, &server, OBSERVER, &["--json"]);
    assert_eq!(code, Some(0));
    assert_eq!(out.lines().count(), 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let ids: Vec<&str> = v["conversations"].as_array().expect("conversations").iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["conv-old", "conv-new"]);
    assert_eq!((v["conversations"][0]["turns"].as_i64(), v["more"].as_bool()), (Some(2), Some(false)));

    // One conversation: its turns in order, with task, outcome, result and event range.
    let (code, out, err) = history(&s, &server, OBSERVER, &["conv-old"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("conversation conv-old (echo, 2 turns): first question\n"), "{out}");
    let first = out.find("1. ").expect("the first turn");
    let second = out.find("2. ").expect("the second turn");
    assert!(first < second, "{out}");
    assert!(out.contains("   task: first question\\nwith a second line\n"), "control characters are escaped: {out}");
    assert!(out.contains("   result: and a follow-up") && out.contains("  completed  ") && out.contains("events 1-"), "{out}");
    let (code, out, _) = history(&s, &server, OBSERVER, &["conv-old", "--json"]);
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let tasks: Vec<&str> = v["turns"].as_array().expect("turns").iter().map(|t| t["task"].as_str().unwrap()).collect();
    assert_eq!(tasks, ["first question\nwith a second line", "and a follow-up"]);
    assert_eq!(v["conversation"]["id"], "conv-old");

    // Refusals: exit 1, the reason on stderr, nothing on stdout.
    let (code, out, err) = history(&s, &server, OBSERVER, &["conv-missing"]);
    assert_eq!((code, out.as_str()), (Some(1), ""), "{err}");
    assert!(err.contains("no conversation `conv-missing`") && err.contains("conversation_not_found"), "{err}");
    let (code, out, err) = history(&s, &server, BLIND, &[]);
    assert_eq!((code, out.as_str()), (Some(1), ""), "{err}");
    assert!(err.contains("may not read events") && err.contains("forbidden"), "{err}");
    // Bad arguments are clap's: exit 2.
    let (code, _, err) = history(&s, &server, OBSERVER, &["--limit", "0"]);
    assert_eq!(code, Some(2), "{err}");

    // A restart on the same store keeps the history.
    drop(server);
    let (server, _) = start(&s, &db);
    let (code, out, err) = history(&s, &server, ADMIN, &["--json"]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["conversations"].as_array().map(Vec::len), Some(2), "{out}");
}
