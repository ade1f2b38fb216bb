//! The generated Rust client (`kv::service::Client`) against the real `kv-server` over each
//! transport of openagents-rpc: HTTP, the WebSocket (with `changed` notifications between two
//! connections) and stdio; bearer tokens; a graceful stop on SIGTERM.

mod common;

use common::{Server, stdio_command};
use kv::service::{self, Client};
use kv::{Changed, KvErrorCode, PutParams, Value, client_side};
use openagents_rpc::{ClientError, HttpTransport, LineTransport, Notification, WsTransport, codes};

fn text(s: &str) -> Value {
    Value::Text { text: s.to_owned() }
}

fn put(key: &str, value: Value, if_version: Option<i64>) -> PutParams {
    PutParams { key: key.to_owned(), value, if_version }
}

/// The code of a service error.
fn code_of(r: Result<impl std::fmt::Debug, ClientError>) -> (i64, Option<KvErrorCode>) {
    match r {
        Err(ClientError::Rpc(e)) => (e.code, service::error_code(&e)),
        other => panic!("expected an error answer: {other:?}"),
    }
}

/// A `changed` notification, decoded by the generated client side.
fn changed(n: Notification) -> Changed {
    let params = n.params.as_deref().map_or("{}", |p| p.get());
    match client_side::Notification::decode(&n.method, params.as_bytes()) {
        Some(Ok(client_side::Notification::Changed(c))) => c,
        other => panic!("a `changed` notification: {other:?}"),
    }
}

/// What every transport must do the same: the calls, the typed results, the typed errors.
async fn the_methods(kv: &Client, prefix: &str) {
    let key = |k: &str| format!("{prefix}/{k}");
    let e = kv.put(put(&key("a"), text("one"), None)).await.expect("put");
    assert_eq!((e.key.as_str(), e.version), (key("a").as_str(), 1));
    let e = kv.put(put(&key("a"), Value::Number { number: 2.5 }, Some(1))).await.expect("put if_version 1");
    assert_eq!(e.version, 2);
    assert_eq!(kv.get(kv::GetParams { key: key("a") }).await.expect("get").value, Value::Number { number: 2.5 });
    assert_eq!(code_of(kv.put(put(&key("a"), text("stale"), Some(1))).await), (-32041, Some(KvErrorCode::VersionConflict)));
    assert_eq!(code_of(kv.put(put(&key("new"), text("x"), Some(3))).await), (-32041, Some(KvErrorCode::VersionConflict)));
    assert!(kv.delete(kv::DeleteParams { key: key("a") }).await.expect("delete").deleted);
    assert!(!kv.delete(kv::DeleteParams { key: key("a") }).await.expect("delete again").deleted);
    assert_eq!(code_of(kv.get(kv::GetParams { key: key("a") }).await), (-32040, Some(KvErrorCode::NotFound)));
    // The server checks params against the schema: -32602 naming where.
    match kv.get(kv::GetParams { key: "Upper Case".into() }).await {
        Err(ClientError::Rpc(e)) => {
            assert_eq!(e.code, codes::INVALID_PARAMS);
            assert_eq!(e.data.as_ref().and_then(|d| d["violations"][0]["pointer"].as_str()), Some("/params/key"), "{e:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn over_http() {
    let server = Server::start(None).await;
    let kv = Client::new(HttpTransport::new(&server.rpc_url(), None).expect("url"));
    the_methods(&kv, "http").await;
    // HTTP POST cannot carry notifications: the service says so with its own code.
    assert_eq!(code_of(kv.watch(kv::WatchParams { prefix: String::new() }).await), (-32042, Some(KvErrorCode::CannotNotify)));
}

#[tokio::test]
async fn over_the_websocket_with_notifications() {
    let server = Server::start(None).await;
    let watcher_ws = WsTransport::connect(&server.ws_url(), None).await.expect("connects");
    let mut notes = watcher_ws.notifications();
    let watcher = Client::new(watcher_ws);
    assert_eq!(watcher.watch(kv::WatchParams { prefix: "ws/".into() }).await.expect("watch").watching, 1);
    let writer = Client::new(WsTransport::connect(&server.ws_url(), None).await.expect("connects"));
    the_methods(&writer, "ws").await;
    // The watcher saw every change under ws/, in order: two puts and a delete of ws/a (the
    // refused puts changed nothing).
    let seen: Vec<(String, i64, bool)> = futures_take(&mut notes, 3).await.into_iter().map(changed).map(|c| (c.key, c.version, c.value.is_some())).collect();
    assert_eq!(seen, vec![("ws/a".into(), 1, true), ("ws/a".into(), 2, true), ("ws/a".into(), 2, false)]);
    writer.put(put("other/x", text("unwatched"), None)).await.expect("put");
    writer.put(put("ws/b", text("watched"), None)).await.expect("put");
    assert_eq!(changed(notes.recv().await.expect("a notification")).key, "ws/b", "a key outside the prefix is not sent");
}

async fn futures_take(rx: &mut tokio::sync::mpsc::Receiver<Notification>, n: usize) -> Vec<Notification> {
    let mut out = Vec::new();
    while out.len() < n {
        out.push(rx.recv().await.expect("a notification"));
    }
    out
}

#[tokio::test]
async fn over_stdio_with_notifications() {
    let transport = LineTransport::spawn(&mut stdio_command()).expect("kv-server --stdio starts");
    let mut notes = transport.notifications();
    let transport = std::sync::Arc::new(transport);
    let kv = Client::from_arc(transport.clone());
    assert_eq!(kv.watch(kv::WatchParams { prefix: String::new() }).await.expect("watch").watching, 1);
    the_methods(&kv, "stdio").await;
    let first = changed(notes.recv().await.expect("a notification"));
    assert_eq!((first.key.as_str(), first.version, first.value), ("stdio/a", 1, Some(text("one"))));
    drop(kv);
    let transport = std::sync::Arc::into_inner(transport).expect("the only holder");
    let status = transport.close().await.expect("waits for the child");
    assert_eq!(status.map(|s| s.success()), Some(true), "kv-server ends cleanly at the end of its input");
}

#[tokio::test]
async fn bearer_tokens() {
    let server = Server::start(Some("s3cret-token")).await;
    let anonymous = Client::new(HttpTransport::new(&server.rpc_url(), None).expect("url"));
    assert_eq!(code_of(anonymous.get(kv::GetParams { key: "k".into() }).await).0, codes::UNAUTHORIZED);
    let wrong = Client::new(HttpTransport::new(&server.rpc_url(), Some("nope")).expect("url"));
    assert_eq!(code_of(wrong.get(kv::GetParams { key: "k".into() }).await).0, codes::UNAUTHORIZED);
    match WsTransport::connect(&server.ws_url(), None).await {
        Err(ClientError::Transport(m)) => assert!(m.contains("401"), "{m}"),
        other => panic!("the upgrade is refused: {:?}", other.err()),
    }
    let kv = Client::new(HttpTransport::new(&server.rpc_url(), Some("s3cret-token")).expect("url"));
    the_methods(&kv, "token").await;
    let kv = Client::new(WsTransport::connect(&server.ws_url(), Some("s3cret-token")).await.expect("connects"));
    the_methods(&kv, "token-ws").await;
}

#[tokio::test]
async fn sigterm_stops_the_server_gracefully() {
    let mut server = Server::start(None).await;
    let kv = Client::new(HttpTransport::new(&server.rpc_url(), None).expect("url"));
    kv.put(put("k", text("v"), None)).await.expect("put");
    let pid = server.child.id().expect("running").to_string();
    let killed = tokio::process::Command::new("kill").args(["-TERM", &pid]).status().await.expect("kill runs");
    assert!(killed.success());
    let status = server.child.wait().await.expect("exits");
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn sigterm_stops_the_stdio_server_while_its_stdin_is_open() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut child = stdio_command().stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).kill_on_drop(true).spawn().expect("starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().expect("stdout"));
    stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"get\",\"params\":{\"key\":\"k\"}}\n").await.expect("write");
    let mut reply = String::new();
    stdout.read_line(&mut reply).await.expect("an answer: the server is serving");
    let pid = child.id().expect("running").to_string();
    assert!(tokio::process::Command::new("kill").args(["-TERM", &pid]).status().await.expect("kill runs").success());
    // Stdin stays open (held here): the server must not wait for it. The bound only turns a hang
    // into a failure; the exit takes milliseconds.
    let status = tokio::time::timeout(std::time::Duration::from_secs(30), child.wait()).await.expect("exits without its stdin closing").expect("exits");
    assert!(status.success(), "{status:?}");
    drop(stdin);
}
