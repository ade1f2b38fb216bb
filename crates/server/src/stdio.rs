//! JSONL-RPC over stdio: request lines in, response lines and `{"event": …}` notifications out.
//! Parent-process-trusted: no token. Each request runs on its own task, so an `interrupt` is
//! served while a `submit` is in flight; one writer (a task, or `run_stdio_process`'s writer
//! thread) owns the output, so lines never interleave.

use futures_util::FutureExt;
use openagents_protocol::{ErrorCode, SERVER_MAX_IN_FLIGHT, SERVER_MAX_LINE_BYTES};
use openagents_runner::frame::{FrameError, LineReader};
use std::io::{Read, Write};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, ReadBuf};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;

use crate::agent::error;
use crate::auth::Caller;
use crate::engine::{EventSession, RpcEngine};
use crate::events::Forwarded;
use crate::jsonrpc::{Answer, Reply, answer};
use crate::projection;

/// How many outgoing items (an event's line, a reply's, or a batch of replies of at most
/// [`ANSWERED_BATCH`] and one more reply) may wait for the writer. Events beyond it make the
/// event forwarder wait (and lag behind the replay buffer), never the agent.
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
    // 64 KiB reads and writes: each read of tokio's stdin and each write of its stdout is a
    // trip through the blocking thread pool.
    let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
    let written = tokio::spawn(write_lines(tokio::io::BufWriter::with_capacity(64 * 1024, writer), rx));
    serve(engine, BufReader::with_capacity(64 * 1024, reader), tx, async move {
        let _ = written.await;
    })
    .await
}

/// The connection's writer: each item is one or more whole lines. Items already queued go out
/// in one write, flushed as soon as the queue is empty: an idle connection still gets each line
/// at once, a busy one is not a write per line (`writer` buffers). A failed write ends the
/// output, not the connection.
async fn write_lines<W: AsyncWrite + Unpin>(mut w: W, mut rx: mpsc::Receiver<Vec<u8>>) {
    'lines: while let Some(first) = rx.recv().await {
        let (mut next, mut written) = (Some(first), 0);
        while let Some(lines) = next.take() {
            if w.write_all(&lines).await.is_err() {
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
}

/// [`run_stdio`] on this process's own stdin and stdout, as `openagents serve --stdio` runs it.
/// Two threads of its own do the I/O instead of tokio's blocking pool (a trip through it per
/// read and per write): one reads the input in large reads and hands each over whole, one
/// takes what the connection sends straight from its queue and writes all that is queued at
/// once, in one vectored write. Returns once every answer and event has been written; a read
/// still waiting on the input is left to end with the process.
///
/// # Errors
///
/// I/O errors reading the input, or setting the threads up.
pub async fn run_stdio_process(engine: RpcEngine) -> std::io::Result<()> {
    use std::os::fd::AsFd;
    let input = std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?);
    let output = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    let reader = ThreadReader::spawn(input)?;
    let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
    let written = spawn_writer(output, rx)?;
    // Once the connection has ended (and dropped its senders), the thread writes what is queued
    // and stops. A failed write (the parent closed our stdout) ends the output, not the
    // connection, as in `run_stdio`.
    serve(engine, reader, tx, async move {
        let _ = written.await;
    })
    .await
}

/// How much one read of the input takes at most.
const READ_CHUNK: usize = 64 * 1024;
/// How many reads may wait for the connection (backpressure beyond: the thread stops reading).
const READ_QUEUE: usize = 16;

/// The input, read by a thread of its own and handed over a read at a time.
struct ThreadReader {
    rx: mpsc::Receiver<std::io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    pos: usize,
    done: bool,
}

impl ThreadReader {
    fn spawn(mut input: std::fs::File) -> std::io::Result<ThreadReader> {
        let (tx, rx) = mpsc::channel(READ_QUEUE);
        std::thread::Builder::new().name("openagents-stdin".into()).spawn(move || {
            let mut buf = vec![0u8; READ_CHUNK];
            loop {
                let got = match input.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => Ok(buf[..n].to_vec()),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => Err(e),
                };
                let failed = got.is_err();
                if tx.blocking_send(got).is_err() || failed {
                    break;
                }
            }
        })?;
        Ok(ThreadReader { rx, chunk: Vec::new(), pos: 0, done: false })
    }
}

impl AsyncBufRead for ThreadReader {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<&[u8]>> {
        let this = self.get_mut();
        while this.pos >= this.chunk.len() && !this.done {
            match ready!(this.rx.poll_recv(cx)) {
                Some(Ok(chunk)) => (this.chunk, this.pos) = (chunk, 0),
                Some(Err(e)) => return Poll::Ready(Err(e)),
                None => this.done = true,
            }
        }
        Poll::Ready(Ok(this.chunk.get(this.pos..).unwrap_or_default()))
    }
    fn consume(self: Pin<&mut Self>, amt: usize) {
        let this = self.get_mut();
        this.pos = (this.pos + amt).min(this.chunk.len());
    }
}

impl AsyncRead for ThreadReader {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, out: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let n = {
            let buf = ready!(self.as_mut().poll_fill_buf(cx))?;
            let n = buf.len().min(out.remaining());
            out.put_slice(&buf[..n]);
            n
        };
        self.consume(n);
        Poll::Ready(Ok(()))
    }
}

/// How many queued items the writer thread takes into one vectored write at most.
const WRITE_ITEMS: usize = 64;

/// The output, written by a thread of its own straight from the connection's queue: it waits
/// for an item, takes whatever else is queued already (up to [`WRITE_ITEMS`]) and writes them
/// all with one vectored write, so a busy connection is one system call per batch and no item
/// is copied. The receiver fires once the queue has closed and everything in it was written,
/// or once a write failed.
fn spawn_writer(mut output: std::fs::File, mut rx: mpsc::Receiver<Vec<u8>>) -> std::io::Result<oneshot::Receiver<std::io::Result<()>>> {
    let (done_tx, done_rx) = oneshot::channel();
    std::thread::Builder::new().name("openagents-stdout".into()).spawn(move || {
        let mut items: Vec<Vec<u8>> = Vec::with_capacity(WRITE_ITEMS);
        let mut result = Ok(());
        while let Some(first) = rx.blocking_recv() {
            items.push(first);
            while items.len() < WRITE_ITEMS {
                let Ok(next) = rx.try_recv() else { break };
                items.push(next);
            }
            if let Err(e) = write_all_vectored(&mut output, &items) {
                result = Err(e);
                break;
            }
            items.clear();
        }
        let _ = done_tx.send(result);
    })?;
    Ok(done_rx)
}

/// Writes every byte of `items`, in order, going on after a partial write.
fn write_all_vectored(out: &mut impl Write, items: &[Vec<u8>]) -> std::io::Result<()> {
    let mut slices: Vec<std::io::IoSlice<'_>> = items.iter().filter(|i| !i.is_empty()).map(|i| std::io::IoSlice::new(i)).collect();
    let mut slices = &mut slices[..];
    while !slices.is_empty() {
        match out.write_vectored(slices) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => std::io::IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The connection over lines from `input`, answers and events sent to `tx` (each item one or
/// more whole lines); `written` resolves once the writer at the other end of `tx` has written
/// everything sent to it and stopped.
async fn serve<B, F>(engine: RpcEngine, input: B, tx: mpsc::Sender<Vec<u8>>, written: F) -> std::io::Result<()>
where
    B: AsyncBufRead + Unpin + Send + 'static,
    F: std::future::Future<Output = ()>,
{
    let session = std::sync::Arc::new(StdioEvents { engine: engine.clone(), tx: tx.clone(), task: std::sync::Mutex::new(None), drain_to: watch::channel(None).0, subscribed: AtomicBool::new(false), forwarded: Forwarded::new() });
    session.subscribe(None);
    // One context for the connection's calls: the parent process, and this event stream.
    let server = std::sync::Arc::new(crate::jsonrpc::server(&engine));
    let cx = crate::jsonrpc::context(std::sync::Arc::new(Caller::stdio()), Some(session.clone() as std::sync::Arc<dyn EventSession>));
    let mut lines = LineReader::new(input, SERVER_MAX_LINE_BYTES);
    let mut in_flight = JoinSet::new();
    // The replies to requests answered at once, in order, sent to the writer together once no
    // further line is ready (or the batch is large): one hand-over per batch, not per line.
    let mut answered = Answered::default();
    let result = loop {
        // At most SERVER_MAX_IN_FLIGHT requests wait at once; past it no line is read until one
        // ends (backpressure: a parent that writes without reading holds bounded work).
        if in_flight.len() >= SERVER_MAX_IN_FLIGHT {
            answered.send(&tx).await;
        }
        while in_flight.len() >= SERVER_MAX_IN_FLIGHT {
            tokio::select! {
                () = engine.wait_for_shutdown() => break,
                _ = in_flight.join_next() => {}
            }
        }
        if engine.is_shut_down() {
            break Ok(());
        }
        // A line already read is taken without waiting; before the connection waits for input,
        // what was answered goes out.
        let next = match lines.next_line().now_or_never() {
            Some(next) => next,
            None => {
                answered.send(&tx).await;
                tokio::select! {
                    () = engine.wait_for_shutdown() => break Ok(()),
                    l = lines.next_line() => l,
                }
            }
        };
        match next {
            Ok(None) => break Ok(()),
            Ok(Some(line)) if line.iter().all(u8::is_ascii_whitespace) => {}
            // Most requests (`status`, say) are answered at once, here; one that waits (a
            // `submit`) goes on in a task of its own, so what follows is served meanwhile.
            Ok(Some(line)) => match answer(&server, &cx, line).await {
                Answer::Now(reply) => {
                    answered.push(reply);
                    if session.subscribed.swap(false, Ordering::Relaxed) {
                        // A `subscribe` answered: what it replays goes out before its answer, as
                        // every event published before an answer does.
                        session.forwarded.through(engine.status().last_seq).await;
                        answered.send(&tx).await;
                    } else if answered.is_full() {
                        answered.send(&tx).await;
                    }
                }
                Answer::Later(call) => {
                    let (engine, session, tx) = (engine.clone(), session.clone(), tx.clone());
                    in_flight.spawn(async move {
                        if let Some(mut reply) = call.await {
                            // What the request published (a turn's events, `shutting_down`) goes
                            // out before its answer.
                            session.forwarded.through(engine.status().last_seq).await;
                            reply.push(b'\n');
                            let _ = tx.send(reply).await;
                        }
                    });
                }
            },
            Err(FrameError::TooLong { limit }) => {
                let reply = Reply::error(error(ErrorCode::FrameTooLarge, format!("the request line is longer than SERVER_MAX_LINE_BYTES ({limit} bytes); it was discarded unread")));
                answered.push(Some(reply.to_json()));
                answered.send(&tx).await;
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
    answered.send(&tx).await;
    while in_flight.join_next().await.is_some() {}
    // Forward every event published so far (the last turn's terminal event at end of input,
    // the final event after `shutdown`) before the output closes; a stuck output gets a second.
    session.drain_to.send_replace(Some(engine.status().last_seq));
    let events_task = session.task.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(mut events_task) = events_task
        && tokio::time::timeout(std::time::Duration::from_secs(1), &mut events_task).await.is_err()
    {
        events_task.abort();
    }
    // The context holds the event stream, which holds the writer's queue: all go before the
    // writer can see its queue closed.
    drop(cx);
    drop(session);
    drop(tx);
    written.await;
    result
}

/// How large the replies answered at once grow before they are sent without waiting for the
/// input to run dry.
const ANSWERED_BATCH: usize = 32 * 1024;

/// Replies answered at once, each ended by its newline, not yet sent to the writer.
#[derive(Default)]
struct Answered(Vec<u8>);

impl Answered {
    fn push(&mut self, reply: Option<Vec<u8>>) {
        if let Some(reply) = reply {
            self.0.extend_from_slice(&reply);
            self.0.push(b'\n');
        }
    }
    fn is_full(&self) -> bool {
        self.0.len() >= ANSWERED_BATCH
    }
    /// Sends what it holds (waiting for room in the writer's queue). A writer gone means the
    /// output is closed: the replies have nowhere to go.
    async fn send(&mut self, tx: &mpsc::Sender<Vec<u8>>) {
        if !self.0.is_empty() {
            // Room for as much as this batch held: a busy connection's batches do not grow by
            // copying, an idle one's stay small.
            let next = Vec::with_capacity(self.0.len().min(ANSWERED_BATCH) + 1024);
            let _ = tx.send(std::mem::replace(&mut self.0, next)).await;
        }
    }
}

/// The stdio connection's event stream: one forwarding task, restarted by `subscribe`.
struct StdioEvents {
    engine: RpcEngine,
    tx: mpsc::Sender<Vec<u8>>,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Set when the connection ends: forward events up to this sequence number, then stop.
    drain_to: watch::Sender<Option<i64>>,
    /// Set by `subscribe`: the connection holds its answer until the new stream has queued the
    /// events published before it.
    subscribed: AtomicBool,
    /// How far the current stream has queued events for the writer.
    forwarded: Forwarded,
}

impl EventSession for StdioEvents {
    fn subscribe(&self, since: Option<i64>) {
        let mut sub = self.engine.subscribe(since);
        let tx = self.tx.clone();
        let mut drain = self.drain_to.subscribe();
        // The new stream starts where the subscription does (a replay goes back).
        let forwarded = self.forwarded.restart(sub.position());
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
                let last = ev.ends_stream();
                let mut line = projection::notification_line_of(ev.json());
                line.push(b'\n');
                if tx.send(line).await.is_err() {
                    break;
                }
                forwarded.send_replace(sub.position());
                if last {
                    break;
                }
            }
        });
        if let Some(old) = self.task.lock().unwrap_or_else(|p| p.into_inner()).replace(task) {
            old.abort();
        }
        self.subscribed.store(true, Ordering::Relaxed);
    }
}
