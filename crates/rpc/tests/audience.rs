//! `Audience`: server-to-client requests addressed to whoever may answer, over real line
//! connections (`serve_lines` on in-memory pipes, read and written as a client would). A request
//! outlives the connection it was sent on: a caller that reconnects is asked again and its answer
//! settles it; the first answer wins and the others asked are told; an answer from a member the
//! check refuses is sent the check's error with its id and settles nothing; a withdrawn request's
//! late answer is a stray (no reply).

use std::sync::Arc;
use std::time::Duration;

use openagents_rpc::audience::{AskError, Audience};
use openagents_rpc::{BoxFuture, Context, Handler, RpcError, RpcServer, serve_lines};
use serde_json::{Value, json};
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::task::JoinHandle;

/// Members are marked with their caller's name; `mallory` may not answer.
fn audience() -> Arc<Audience<String>> {
    Audience::new(|name: &String| if name == "mallory" { Err(RpcError::new(-32010, format!("`{name}` may not answer"))) } else { Ok(()) })
}

/// `join` with a name (`[name]`) as params: the caller's connection joins the audience marked with that
/// name (a program would take it from the caller's identity), and answers whether it could.
struct Joins(Arc<Audience<String>>);

impl Handler for Joins {
    fn call<'a>(&'a self, cx: &'a Context, method: &'a str, params: Option<&'a RawValue>) -> BoxFuture<'a, Result<Box<RawValue>, RpcError>> {
        Box::pin(async move {
            match method {
                "join" => {
                    let (name,): (String,) = serde_json::from_str(params.map_or("null", RawValue::get)).map_err(|e| RpcError::invalid_params(e.to_string()))?;
                    let joined = self.0.join(cx.peer(), name).is_some();
                    Ok(RawValue::from_string(joined.to_string()).expect("JSON"))
                }
                other => Err(RpcError::method_not_found(other)),
            }
        })
    }
}

/// One client's end of a line connection the server serves as `name`.
struct Line {
    lines: tokio::io::Lines<BufReader<DuplexStream>>,
    /// Read before `join` answered (a request sent on joining comes first).
    early: std::collections::VecDeque<Value>,
    write: DuplexStream,
    served: JoinHandle<()>,
}

impl Line {
    async fn open(server: &Arc<RpcServer>, name: &'static str) -> Line {
        let (client_in, server_out) = tokio::io::duplex(1 << 16);
        let (server_in, client_out) = tokio::io::duplex(1 << 16);
        let server = Arc::clone(server);
        let served = tokio::spawn(async move {
            let _ = serve_lines(&server, BufReader::new(server_in), server_out).await;
        });
        let mut line = Line { lines: BufReader::new(client_in).lines(), early: Default::default(), write: client_out, served };
        line.send(json!({"jsonrpc": "2.0", "id": 1, "method": "join", "params": [name]})).await;
        loop {
            let v = line.read().await;
            if v["id"] == 1 {
                assert_eq!(v["result"], true, "{name} joins: {v}");
                return line;
            }
            line.early.push_back(v);
        }
    }

    async fn send(&mut self, v: Value) {
        self.write.write_all(format!("{v}\n").as_bytes()).await.expect("the server reads");
    }

    async fn next(&mut self) -> Value {
        match self.early.pop_front() {
            Some(v) => v,
            None => self.read().await,
        }
    }

    async fn read(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(5), self.lines.next_line()).await.expect("a line in time").expect("readable").expect("a line");
        serde_json::from_str(&line).expect("JSON")
    }

    /// Nothing more arrives for a while.
    async fn quiet(&mut self) {
        assert!(self.early.is_empty(), "expected nothing, got {:?}", self.early);
        if let Ok(line) = tokio::time::timeout(Duration::from_millis(150), self.lines.next_line()).await {
            panic!("expected nothing, got {line:?}");
        }
    }

    /// Hangs up and waits until the server has seen the connection end.
    async fn hang_up(self) {
        drop(self.write);
        drop(self.lines);
        tokio::time::timeout(Duration::from_secs(5), self.served).await.expect("the connection ends").expect("served");
    }
}

fn serve(audience: &Arc<Audience<String>>) -> Arc<RpcServer> {
    Arc::new(RpcServer::new(Joins(Arc::clone(audience))))
}

fn params(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).expect("JSON")
}

#[tokio::test]
async fn a_request_outlives_its_connection_and_the_caller_that_reconnects_answers_it() {
    let audience = audience();
    let server = serve(&audience);
    let mut alice = Line::open(&server, "alice").await;
    let mut ask = audience.ask("deploy-1", "approve", Some(&params(r#"{"what":"deploy"}"#))).expect("asked");
    assert_eq!(ask.asked(), 1);
    assert_eq!(alice.next().await, json!({"jsonrpc": "2.0", "id": "deploy-1", "method": "approve", "params": {"what": "deploy"}}));

    // Alice's connection drops before she answers; the request waits.
    alice.hang_up().await;
    assert_eq!(audience.count(|_| true), 0, "a member leaves with its connection");
    let mut bob = Line::open(&server, "bob").await;
    let resent = bob.next().await;
    assert_eq!((resent["id"].clone(), resent["method"].clone()), (json!("deploy-1"), json!("approve")), "one who joins while it waits is asked");
    let mut alice = Line::open(&server, "alice").await;
    assert_eq!(alice.next().await["id"], "deploy-1", "the caller that reconnects is asked again");

    alice.send(json!({"jsonrpc": "2.0", "id": "deploy-1", "result": {"approved": true}})).await;
    let answered = tokio::time::timeout(Duration::from_secs(5), ask.answered()).await.expect("answered in time");
    assert_eq!((answered.by.as_str(), answered.result.expect("a result").get()), ("alice", r#"{"approved":true}"#));
    ask.tell_others("settled", Some(&params(r#"{"by":"alice"}"#)));
    assert_eq!(bob.next().await, json!({"jsonrpc": "2.0", "method": "settled", "params": {"by": "alice"}}));
    alice.quiet().await;

    // A second answer (bob's, late) is a stray: no reply, nothing settled twice.
    bob.send(json!({"jsonrpc": "2.0", "id": "deploy-1", "result": {"approved": false}})).await;
    bob.quiet().await;
}

#[tokio::test]
async fn a_refused_member_is_never_asked_and_its_answer_is_sent_the_checks_error() {
    let audience = audience();
    let server = serve(&audience);
    let mut mallory = Line::open(&server, "mallory").await;
    let mut carol = Line::open(&server, "carol").await;
    let mut ask = audience.ask("q-7", "approve", None).expect("asked");
    assert_eq!(ask.asked(), 1, "only carol may answer");
    assert_eq!(carol.next().await, json!({"jsonrpc": "2.0", "id": "q-7", "method": "approve"}));
    mallory.quiet().await;

    mallory.send(json!({"jsonrpc": "2.0", "id": "q-7", "result": true})).await;
    let refused = mallory.next().await;
    assert_eq!(refused["id"], "q-7", "{refused}");
    assert_eq!(refused["error"]["code"], -32010, "{refused}");
    assert_eq!(refused["error"]["message"], "`mallory` may not answer", "{refused}");

    // Still open: carol's answer (an error object) settles it.
    carol.send(json!({"jsonrpc": "2.0", "id": "q-7", "error": {"code": 7, "message": "no"}})).await;
    let answered = tokio::time::timeout(Duration::from_secs(5), ask.answered()).await.expect("answered in time");
    assert_eq!(answered.by, "carol");
    assert_eq!(answered.result.expect_err("an error answer").code, 7);
}

#[tokio::test]
async fn ids_are_unique_while_waiting_and_a_withdrawn_request_is_answered_by_nobody() {
    let audience = audience();
    let server = serve(&audience);
    let mut dave = Line::open(&server, "dave").await;
    let ask = audience.ask("same", "approve", None).expect("asked");
    assert_eq!(audience.ask("same", "approve", None).map(|_| ()), Err(AskError::Duplicate("same".into())));
    assert_eq!(dave.next().await["id"], "same");
    drop(ask);
    dave.send(json!({"jsonrpc": "2.0", "id": "same", "result": 1})).await;
    dave.quiet().await;
    // Withdrawn, its id may be used again; one who joins later is not sent the withdrawn one.
    let _again = audience.ask("same", "approve", None).expect("asked again");
    assert_eq!(dave.next().await["id"], "same");
    let mut erin = Line::open(&server, "erin").await;
    assert_eq!(erin.next().await["id"], "same");
    erin.quiet().await;
}

#[tokio::test]
async fn settling_an_old_request_leaves_a_newer_one_under_its_id_and_answered_waits_after_its_answer() {
    let audience = audience();
    let (tx, mut rx) = tokio::sync::mpsc::channel(8);
    let frank = audience.attach(tx, "frank".to_owned());
    let mut old = audience.ask("x", "approve", None).expect("asked");
    assert_eq!(audience.answer(frank, "x", Ok(params("1"))), Ok(true));
    assert_eq!(old.answered().await.result.expect("a result").get(), "1");
    // The id is free again; settling or dropping the old request must not touch the new one.
    let mut new = audience.ask("x", "approve", None).expect("asked again");
    old.tell_others("settled", None);
    // A second wait on a settled request waits (it never panics, never answers twice).
    assert!(tokio::time::timeout(Duration::from_millis(50), old.answered()).await.is_err());
    drop(old);
    assert_eq!(audience.answer(frank, "x", Ok(params("2"))), Ok(true), "the newer request still waits");
    assert_eq!(new.answered().await.result.expect("a result").get(), "2");
    assert!(tokio::time::timeout(Duration::from_millis(50), new.answered()).await.is_err());
    let sent: Vec<Value> = std::iter::from_fn(|| rx.try_recv().ok()).map(|m| serde_json::from_slice(&m).expect("JSON")).collect();
    assert_eq!(sent.len(), 2, "each request once, no note to the one who answered: {sent:?}");
}

#[tokio::test]
async fn joining_twice_on_one_connection_is_one_member_and_a_screened_answer_is_an_error_answer() {
    let audience = Audience::with_screen(|_: &String| Ok(()), |message| !message.windows(5).any(|w| w == b"bogus"));
    let server = serve(&audience);
    let mut gina = Line::open(&server, "gina").await;
    gina.send(json!({"jsonrpc": "2.0", "id": 2, "method": "join", "params": ["gina"]})).await;
    assert_eq!(gina.next().await["result"], true);
    assert_eq!(audience.count(|_| true), 1, "one member per connection");
    let mut ask = audience.ask("s-1", "approve", None).expect("asked");
    assert_eq!(ask.asked(), 1);
    assert_eq!(gina.next().await["id"], "s-1");
    gina.quiet().await;
    gina.send(json!({"jsonrpc": "2.0", "id": "s-1", "result": true, "note": "bogus"})).await;
    let answered = tokio::time::timeout(Duration::from_secs(5), ask.answered()).await.expect("answered in time");
    assert_eq!(answered.result.expect_err("screened: an error answer").code, -32600);
}

#[tokio::test]
async fn a_request_asked_with_made_params_is_made_anew_for_one_who_joins_later() {
    let audience = audience();
    let server = serve(&audience);
    let mut hana = Line::open(&server, "hana").await;
    let made = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let _ask = audience
        .ask_with("m-1", "approve", Some(&params(r#"{"made":"now"}"#)), {
            let made = Arc::clone(&made);
            move || Some(params(&format!("{{\"made\":{}}}", made.fetch_add(1, std::sync::atomic::Ordering::SeqCst))))
        })
        .expect("asked");
    assert_eq!(hana.next().await["params"], json!({"made": "now"}));
    let mut ivan = Line::open(&server, "ivan").await;
    assert_eq!(ivan.next().await["params"], json!({"made": 0}), "made anew for a member that joins later");
    let mut jane = Line::open(&server, "jane").await;
    assert_eq!(jane.next().await["params"], json!({"made": 1}));
    hana.quiet().await;
}

#[tokio::test]
async fn an_answer_never_taken_counts_for_nothing_and_its_giver_is_told_too() {
    let audience = audience();
    let (to_kim, mut kim) = tokio::sync::mpsc::channel(8);
    let (to_lee, mut lee) = tokio::sync::mpsc::channel(8);
    let k = audience.attach(to_kim, "kim".to_owned());
    audience.attach(to_lee, "lee".to_owned());
    let mut ask = audience.ask("t-1", "approve", None).expect("asked");
    // Kim answers, but the program gave up waiting (a timeout) before it took the answer.
    assert_eq!(audience.answer(k, "t-1", Ok(params("true"))), Ok(true));
    ask.tell_others("settled", None);
    for (who, rx) in [("kim", &mut kim), ("lee", &mut lee)] {
        let got: Vec<Value> = std::iter::from_fn(|| rx.try_recv().ok()).map(|m| serde_json::from_slice(&m).expect("JSON")).collect();
        assert_eq!(got.iter().map(|m| m["method"].clone()).collect::<Vec<_>>(), [json!("approve"), json!("settled")], "{who}: {got:?}");
    }
}
