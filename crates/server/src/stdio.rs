//! JSONL-RPC over stdio: request lines in, response lines and `{"event": …}` notifications out.
//! Parent-process-trusted: no token. Each request runs on its own task, so an `interrupt` is
//! served while a `submit` is in flight; one writer task owns the output, so lines never
//! interleave.

use openagents_protocol::{ErrorCode, SERVER_MAX_IN_FLIGHT, SERVER_MAX_LINE_BYTES};
use openagents_runner::frame::{FrameError, LineReader};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::agent::error;
use crate::auth::Caller;
use crate::engine::{EventSession, RpcEngine};
use crate::jsonrpc::Reply;
use crate::projection;

/// How many outgoing lines may wait for the writer. Events beyond it make the event forwarder
/// wait (and lag on the broadcast), never the agent.
const OUTBOUND_QUEUE: usize = 1024;

/// Drives the JSONL-RPC protocol over `reader`/`writer` until end of input or `shutdown`.
/// In-flight requests are answered before it returns.
///
/// # Errors
///
/// I/O errors reading the input.
pub async fn run_stdio<R, W>(engine: RpcEngine, reader: R, writer: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(OUTBOUND_QUEUE);
    let writer_task = tokio::spawn(async move {
        // Lines already queued go out in one write, flushed as soon as the queue is empty: an
        // idle connection still gets each line at once, a busy one is not a write per line.
        let mut w = tokio::io::BufWriter::with_capacity(64 * 1024, writer);
        'lines: while let Some(first) = rx.recv().await {
            let (mut next, mut written) = (Some(first), 0);
            while let Some(mut line) = next.take() {
                line.push(b'\n');
                if w.write_all(&line).await.is_err() {
                    break 'lines;
                }
                written += 1;
                if written < OUTBOUND_QUEUE {
                    next = rx.try_recv().ok();
                }
            }
            if w.flush().await.is_err() {
                break;
            }
        }
    });
    let session = std::sync::Arc::new(StdioEvents { engine: engine.clone(), tx: tx.clone(), task: std::sync::Mutex::new(None), drain_to: watch::channel(None).0 });
    session.subscribe(None);
    // Shared, not copied per request: a caller's grant is a set of strings.
    let caller = std::sync::Arc::new(Caller::stdio());
    // 64 KiB reads: each read of tokio's stdin is a trip through the blocking thread pool.
    let mut lines = LineReader::new(BufReader::with_capacity(64 * 1024, reader), SERVER_MAX_LINE_BYTES);
    let mut in_flight = JoinSet::new();
    let result = loop {
        // At most SERVER_MAX_IN_FLIGHT requests wait at once; past it no line is read until one
        // ends (backpressure: a parent that writes without reading holds bounded work).
        while in_flight.len() >= SERVER_MAX_IN_FLIGHT {
            tokio::select! {
                () = engine.wait_for_shutdown() => break,
                _ = in_flight.join_next() => {}
            }
        }
        let next = tokio::select! {
            () = engine.wait_for_shutdown() => break Ok(()),
            l = lines.next_line() => l,
        };
        match next {
            Ok(None) => break Ok(()),
            Ok(Some(line)) if line.iter().all(u8::is_ascii_whitespace) => {}
            Ok(Some(line)) => {
                let (engine, caller, tx, session) = (engine.clone(), caller.clone(), tx.clone(), session.clone());
                let mut request = Box::pin(async move {
                    if let Some(reply) = engine.handle_message(&caller, &line, Some(&*session)).await {
                        let _ = tx.send(reply).await;
                    }
                });
                // Most requests (`status`, say) are answered at once, here; one that waits (a
                // `submit`) goes on in a task of its own, so what follows is served meanwhile.
                if std::future::poll_fn(|cx| std::task::Poll::Ready(request.as_mut().poll(cx).is_pending())).await {
                    in_flight.spawn(request);
                }
            }
            Err(FrameError::TooLong { limit }) => {
                let reply = Reply::error(error(ErrorCode::FrameTooLarge, format!("the request line is longer than SERVER_MAX_LINE_BYTES ({limit} bytes); it was discarded unread")));
                let _ = tx.send(reply.to_json()).await;
                match lines.skip_line().await {
                    Ok((_, true)) => {}
                    Ok((_, false)) => break Ok(()),
                    Err(e) => break Err(e),
                }
            }
            Err(FrameError::Io(e)) => break Err(e),
        }
        // Reap finished request tasks so the set does not grow.
        while in_flight.try_join_next().is_some() {}
    };
    while in_flight.join_next().await.is_some() {}
    // Forward every event published so far (the last turn's terminal event at end of input,
    // the final event after `shutdown`) before the output closes; a stuck output gets a second.
    session.drain_to.send_replace(Some(engine.status().last_seq));
    let events_task = session.task.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(mut events_task) = events_task {
        if tokio::time::timeout(std::time::Duration::from_secs(1), &mut events_task).await.is_err() {
            events_task.abort();
        }
    }
    drop(session);
    drop(tx);
    let _ = writer_task.await;
    result
}

/// The stdio connection's event stream: one forwarding task, restarted by `subscribe`.
struct StdioEvents {
    engine: RpcEngine,
    tx: mpsc::Sender<Vec<u8>>,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Set when the connection ends: forward events up to this sequence number, then stop.
    drain_to: watch::Sender<Option<i64>>,
}

impl EventSession for StdioEvents {
    fn subscribe(&self, since: Option<i64>) {
        let mut sub = self.engine.subscribe(since);
        let tx = self.tx.clone();
        let mut drain = self.drain_to.subscribe();
        let task = tokio::spawn(async move {
            loop {
                if drain.borrow_and_update().is_some_and(|to| sub.position() >= to) {
                    break;
                }
                let ev = tokio::select! {
                    ev = sub.next_shared() => ev,
                    changed = drain.changed() => if changed.is_err() { break } else { continue },
                };
                let Some(ev) = ev else { break };
                let last = projection::is_final(ev.event());
                if tx.send(projection::notification_line_of(ev.json())).await.is_err() || last {
                    break;
                }
            }
        });
        if let Some(old) = self.task.lock().unwrap_or_else(|p| p.into_inner()).replace(task) {
            old.abort();
        }
    }
}
