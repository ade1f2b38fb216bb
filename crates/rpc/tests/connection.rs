//! `Connection`, driven as a transport of the program's own drives it: messages handed in,
//! everything sent taken from its receiver. A call that holds the connection answers before the
//! next message starts (`Context::hold_connection`); a connection with patience gives up on a
//! caller that reads nothing (`Connection::patience`); `room` waits instead of refusing busy;
//! `close` leaves the calls in flight running; what the program queues on `outbound` is written
//! in order with the replies; `with_data` reaches the handler.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use openagents_rpc::{BoxFuture, Connection, Context, Handler, Identity, Limits, RpcError, RpcServer, codes};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::Notify;

/// - `hold`: asks to hold the connection, then waits for `release` before it answers;
/// - `wait`: waits for `release` before it answers, without holding;
/// - `now`: answers at once;
/// - `count`: adds one to `done` after a while, then answers;
/// - `after`: answers at once, and adds one to `done` after its reply;
/// - `whose`: answers the `&'static str` the connection carries as data.
struct Waits {
    release: Arc<Notify>,
    done: Arc<AtomicUsize>,
}

impl Handler for Waits {
    fn call<'a>(&'a self, cx: &'a Context, method: &'a str, _params: Option<&'a RawValue>) -> BoxFuture<'a, Result<Box<RawValue>, RpcError>> {
        Box::pin(async move {
            match method {
                "hold" => {
                    cx.hold_connection();
                    self.release.notified().await;
                }
                "wait" => self.release.notified().await,
                "now" => {}
                "count" => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    self.done.fetch_add(1, Ordering::SeqCst);
                }
                "after" => {
                    let done = Arc::clone(&self.done);
                    cx.after_reply(async move {
                        done.fetch_add(1, Ordering::SeqCst);
                    });
                }
                "whose" => return Ok(RawValue::from_string(format!("\"{}\"", cx.data::<&'static str>().copied().unwrap_or("nobody"))).expect("JSON")),
                other => return Err(RpcError::method_not_found(other)),
            }
            Ok(RawValue::from_string(format!("\"{method}\"")).expect("JSON"))
        })
    }
}

fn server() -> (RpcServer, Arc<Notify>, Arc<AtomicUsize>) {
    let (release, done) = (Arc::new(Notify::new()), Arc::new(AtomicUsize::new(0)));
    let server = RpcServer::new(Waits { release: Arc::clone(&release), done: Arc::clone(&done) }).in_order(true);
    (server, release, done)
}

fn call(id: u64, method: &str) -> Vec<u8> {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#).into_bytes()
}

fn id_of(message: &[u8]) -> Value {
    serde_json::from_slice::<Value>(message).expect("JSON")["id"].clone()
}

/// A held call answers before anything read after it starts; a call that only waits does not
/// hold the connection (the control: the same order of messages, answered the other way round).
#[tokio::test]
async fn a_call_that_holds_the_connection_answers_before_the_next_message_starts() {
    for (method, first) in [("hold", 1), ("wait", 2)] {
        let (server, release, _) = server();
        let (mut conn, mut rx) = Connection::new(&server, Identity::new("test"));
        let releaser = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            release.notify_one();
        });
        conn.take(call(1, method)).await;
        conn.take(call(2, "now")).await;
        conn.finish().await;
        releaser.await.expect("released");
        let (a, b) = (rx.recv().await.expect("a reply"), rx.recv().await.expect("a reply"));
        assert_eq!((id_of(&a), id_of(&b)), (Value::from(first), Value::from(3 - first)), "`{method}` then `now`");
    }
}

/// A caller that reads nothing: with patience, the replies that find its queue full are given up
/// on and the connection is told; without, a reply waits for room in its place.
#[tokio::test]
async fn a_connection_with_patience_gives_up_on_a_caller_that_reads_nothing() {
    let (server, _, _) = server();
    let server = server.limits(Limits { max_in_flight: 1024, ..Limits::default() });
    let stuck = Arc::new(AtomicBool::new(false));
    let (conn, rx) = Connection::new(&server, Identity::new("test"));
    let told = Arc::clone(&stuck);
    let mut conn = conn.patience(Duration::from_millis(50), move || told.store(true, Ordering::SeqCst));
    let queue = openagents_rpc::OUTBOUND_QUEUE as u64;
    for id in 0..queue + 8 {
        conn.take(call(id, "now")).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(stuck.load(Ordering::SeqCst), "never told the caller is stuck");
    assert_eq!(conn.in_flight(), 0, "replies given up on still hold their places");
    conn.close(Duration::ZERO).await;
    drop(rx);

    // Without patience, a reply that finds the queue full waits for room where it is, keeping
    // its place (the connection reads nothing meanwhile), until the caller reads.
    let (mut conn, mut rx) = Connection::new(&server, Identity::new("test"));
    for id in 0..queue {
        conn.take(call(id, "now")).await;
    }
    {
        let mut next = std::pin::pin!(conn.take(call(queue, "now")));
        assert!(tokio::time::timeout(Duration::from_millis(200), next.as_mut()).await.is_err(), "a reply past the queue was dropped or queued");
        assert_eq!(id_of(&rx.recv().await.expect("the first reply")), Value::from(0));
        tokio::time::timeout(Duration::from_secs(5), next).await.expect("queued once the caller read");
    }
    let mut last = Value::Null;
    while let Ok(m) = rx.try_recv() {
        last = id_of(&m);
    }
    assert_eq!(last, Value::from(queue), "the reply that waited is last, in its place");
    conn.finish().await;
}

/// `room` waits while the connection has its most calls in flight (where `take` would refuse
/// the next as busy), and returns once one has answered.
#[tokio::test]
async fn room_waits_where_take_would_refuse_busy() {
    let (server, release, _) = server();
    let server = server.limits(Limits { max_in_flight: 2, ..Limits::default() });
    let (mut conn, mut rx) = Connection::new(&server, Identity::new("test"));
    conn.take(call(1, "wait")).await;
    conn.take(call(2, "wait")).await;
    assert!(tokio::time::timeout(Duration::from_millis(100), conn.room()).await.is_err(), "room with two calls of two in flight");
    conn.take(call(3, "now")).await;
    let busy: Value = serde_json::from_slice(&rx.recv().await.expect("a refusal")).expect("JSON");
    assert_eq!((busy["id"].clone(), busy["error"]["code"].as_i64()), (Value::from(3), Some(codes::BUSY)), "{busy}");
    release.notify_one();
    tokio::time::timeout(Duration::from_secs(5), conn.room()).await.expect("room once a call answered");
    release.notify_one();
    conn.finish().await;
}

/// `close` returns without waiting for the calls in flight, which still finish; `finish` waits.
#[tokio::test]
async fn close_leaves_the_calls_in_flight_running_and_finish_waits_for_them() {
    let (server, _, done) = server();
    let (mut conn, _rx) = Connection::new(&server, Identity::new("test"));
    conn.take(call(1, "count")).await;
    conn.close(Duration::ZERO).await;
    assert_eq!(done.load(Ordering::SeqCst), 0, "close waited for the call");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(done.load(Ordering::SeqCst), 1, "the call was dropped, not left to finish");

    let (mut conn, _rx) = Connection::new(&server, Identity::new("test"));
    conn.take(call(2, "count")).await;
    conn.finish().await;
    assert_eq!(done.load(Ordering::SeqCst), 2, "finish returned before the call ended");
}

/// What the program queues itself comes out between the replies in the order queued; the
/// connection's data reaches its calls; the queue closes once the connection and its senders
/// are gone.
#[tokio::test]
async fn outbound_messages_keep_their_place_and_data_reaches_the_handler() {
    let (server, _, _) = server();
    let (conn, mut rx) = Connection::new(&server, Identity::new("test"));
    let data: Arc<dyn std::any::Any + Send + Sync> = Arc::new("the program's");
    let mut conn = conn.with_data(data);
    let outbound = conn.outbound();
    conn.take(call(1, "now")).await;
    outbound.send(br#"{"jsonrpc":"2.0","method":"note"}"#.to_vec()).await.expect("queued");
    conn.take(call(2, "whose")).await;
    conn.finish().await;
    drop(outbound);
    let mut got = Vec::new();
    while let Some(m) = rx.recv().await {
        got.push(serde_json::from_slice::<Value>(&m).expect("JSON"));
    }
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!((got[0]["id"].clone(), got[1]["method"].clone(), got[2]["result"].clone()), (Value::from(1), Value::from("note"), Value::from("the program's")), "{got:?}");
}

/// Gathered replies go out as one item, joined by the separator, in read order: before a call
/// that waits starts (so its reply never passes them), before a held call's reply and a
/// refusal, and at the end; a call with work after its reply is queued as it answers.
#[tokio::test]
async fn gathered_replies_keep_read_order_and_go_out_before_anything_else() {
    let (server, release, done) = server();
    let server = server.limits(Limits { max_in_flight: 3, ..Limits::default() });
    let (conn, mut rx) = Connection::new(&server, Identity::new("test"));
    let mut conn = conn.gather(b'\n');
    let ids = |item: Vec<u8>| -> Vec<Value> { item.split(|b| *b == b'\n').map(id_of).collect() };

    conn.take(call(1, "now")).await;
    conn.take(call(2, "now")).await;
    assert!(rx.try_recv().is_err(), "a reply answered at once was queued on its own");
    conn.take(call(3, "wait")).await;
    assert_eq!(ids(rx.try_recv().expect("gathered before the wait")), vec![Value::from(1), Value::from(2)]);

    conn.take(call(4, "now")).await;
    let releaser = {
        let release = Arc::clone(&release);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            release.notify_waiters();
        })
    };
    conn.take(call(5, "hold")).await;
    releaser.await.expect("released");
    let mut order: Vec<Value> = Vec::new();
    while !(order.contains(&Value::from(3)) && order.contains(&Value::from(5))) {
        let item = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("the replies of 3 and 5").expect("a reply");
        order.extend(ids(item));
    }
    let (four, five) = (order.iter().position(|id| *id == 4), order.iter().position(|id| *id == 5));
    assert!(four.is_some() && four < five, "a held call's reply passed what was gathered before it: {order:?}");

    conn.take(call(6, "after")).await;
    conn.take(call(7, "now")).await;
    conn.flush().await;
    let (six, seven) = (rx.try_recv().expect("queued as it answered"), rx.try_recv().expect("flushed"));
    assert_eq!((ids(six), ids(seven)), (vec![Value::from(6)], vec![Value::from(7)]));
    conn.take(call(8, "now")).await;
    conn.finish().await;
    assert_eq!(ids(rx.recv().await.expect("gathered replies flushed at the end")), vec![Value::from(8)]);
    assert_eq!(done.load(Ordering::SeqCst), 1, "the work after the reply ran");
}

/// An answer to a request of the server's is taken even when every place is taken and its
/// result holds the word `"method"` (which the cheap look before the places misses).
#[tokio::test]
async fn an_answer_is_taken_when_the_connection_is_full() {
    let (server, release, _) = server();
    let server = server.limits(Limits { max_in_flight: 1, ..Limits::default() });
    let (mut conn, mut rx) = Connection::new(&server, Identity::new("test"));
    let peer = conn.peer().clone();
    let asked = tokio::spawn(async move { peer.request_raw("confirm", None).await });
    let request: Value = serde_json::from_slice(&rx.recv().await.expect("the server's request")).expect("JSON");
    conn.take(call(1, "wait")).await;
    let answer = format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{"\"method\"":"yes","method":1}}}}"#, request["id"]);
    conn.take(answer.into_bytes()).await;
    let got = tokio::time::timeout(Duration::from_secs(5), asked).await.expect("answered").expect("the task");
    assert_eq!(got.map(|r| r.get().to_owned()).expect("the answer"), r#"{"\"method\"":"yes","method":1}"#);
    assert!(rx.try_recv().is_err(), "the answer was refused as busy");
    release.notify_one();
    conn.finish().await;
}

#[tokio::test]
async fn try_notify_never_waits_for_a_caller_that_stopped_reading() {
    // The caller reads nothing: once its outbound queue is full, `notify` waits (as long as the
    // caller takes to read) and `try_notify` says `Full` at once, sending nothing.
    let server = RpcServer::new(Waits { release: Arc::new(Notify::new()), done: Arc::new(AtomicUsize::new(0)) });
    let (conn, mut rx) = Connection::new(&server, Identity::new("slow"));
    let peer = conn.peer().clone();
    for i in 0..openagents_rpc::OUTBOUND_QUEUE {
        peer.try_notify("tick", &i).expect("room in the queue");
    }
    assert_eq!(peer.try_notify("tick", &"one more"), Err(openagents_rpc::PeerError::Full));
    assert!(tokio::time::timeout(Duration::from_millis(50), peer.notify("tick", &"waits")).await.is_err(), "notify waits for room");
    // Once the caller reads one, there is room again.
    let first: Value = serde_json::from_slice(&rx.recv().await.expect("a message")).expect("JSON");
    assert_eq!(first, serde_json::json!({"jsonrpc": "2.0", "method": "tick", "params": 0}));
    peer.try_notify("tick", &"room").expect("room after a read");
    drop(rx);
    assert_eq!(peer.try_notify("tick", &"gone"), Err(openagents_rpc::PeerError::Closed));
}
