//! JSONL-RPC over stdio: request lines in, response lines and `{"event": …}` notifications out.
//! Parent-process-trusted: no token. Each request runs on its own task, so an `interrupt` is
//! served while a `submit` is in flight; one writer (a task, or `run_stdio_process`'s writer
//! thread) owns the output, so lines never interleave.

use futures_util::FutureExt;
use openagents_protocol::{SERVER_MAX_IN_FLIGHT, SERVER_MAX_LINE_BYTES};
use openagents_rpc::{Connection, Identity, OUTBOUND_QUEUE};
use openagents_runner::frame::{FrameError, LineReader};
use std::io::{Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, ReadBuf};
use tokio::sync::{mpsc, oneshot};

use crate::auth::Caller;
use crate::connection::EventStream;
use crate::engine::{EventSession, RpcEngine};
use crate::jsonrpc::Conn;
use crate::projection;

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
    serve(engine, BufReader::with_capacity(64 * 1024, reader), |rx| {
        let written = tokio::spawn(write_lines(tokio::io::BufWriter::with_capacity(64 * 1024, writer), rx));
        async move {
            let _ = written.await;
        }
    })
    .await
}

/// The connection's writer: each item is one message, written as a line. Items already queued
/// go out in one write, flushed as soon as the queue is empty: an idle connection still gets
/// each line at once, a busy one is not a write per line (`writer` buffers). A failed write ends
/// the output, not the connection.
async fn write_lines<W: AsyncWrite + Unpin>(mut w: W, mut rx: mpsc::Receiver<Vec<u8>>) {
    'lines: while let Some(first) = rx.recv().await {
        let (mut next, mut written) = (Some(first), 0);
        while let Some(message) = next.take() {
            if w.write_all(&message).await.is_err() || w.write_all(b"\n").await.is_err() {
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
/// writes what the connection queues (its replies gathered into batches of lines by the
/// connection), all that is queued at once in one vectored write. Returns once every answer and
/// event has been written; a read still waiting on the input is left to end with the process.
///
/// # Errors
///
/// I/O errors reading the input, or setting the threads up.
pub async fn run_stdio_process(engine: RpcEngine) -> std::io::Result<()> {
    use std::os::fd::AsFd;
    let input = std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?);
    let output = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    let reader = ThreadReader::spawn(input)?;
    // Once the connection has ended (and dropped its senders), the thread writes what is queued
    // and stops. A failed write (the parent closed our stdout) ends the output, not the
    // connection, as in `run_stdio`.
    let mut not_spawned = None;
    let served = serve(engine, reader, |rx| {
        let written = spawn_writer(output, rx).map_err(|e| not_spawned = Some(e)).ok();
        async move {
            if let Some(written) = written {
                let _ = written.await;
            }
        }
    })
    .await;
    match not_spawned {
        Some(e) => Err(e),
        None => served,
    }
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

/// How many queued items the writer thread takes into one vectored write at most (two slices
/// each: the item and its newline).
const WRITE_ITEMS: usize = 64;

/// The output, written by a thread of its own straight from the connection's queue: it waits for
/// an item (a message, or replies the connection gathered), takes whatever else is queued
/// already (up to [`WRITE_ITEMS`]) and writes them all, each ended by a newline, with one
/// vectored write, so a busy connection is one system call per many lines and no item is copied.
/// The receiver fires once the queue has closed and everything in it was written, or once a
/// write failed.
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

/// Writes every item of `items` as a line, in order, going on after a partial write.
fn write_all_vectored(out: &mut impl Write, items: &[Vec<u8>]) -> std::io::Result<()> {
    let mut slices: Vec<std::io::IoSlice<'_>> = items.iter().flat_map(|i| [std::io::IoSlice::new(i), std::io::IoSlice::new(b"\n")]).collect();
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

/// The connection over lines from `input`; `writer` is handed the receiver of what it sends (each
/// item one message, written as a line) and resolves once it has written everything sent to it
/// and stopped.
async fn serve<B, F>(engine: RpcEngine, input: B, writer: impl FnOnce(mpsc::Receiver<Vec<u8>>) -> F) -> std::io::Result<()>
where
    B: AsyncBufRead + Unpin + Send + 'static,
    F: std::future::Future<Output = ()>,
{
    let server = crate::jsonrpc::server(&engine);
    let (conn, rx) = Connection::new(&server, Identity::new("stdio"));
    let written = writer(rx);
    // The parent process, and the connection's event stream, started at once.
    let stream = EventStream::new(&engine, conn.outbound(), projection::notification_line_of, None);
    stream.subscribe(None);
    stream.take_subscribed();
    // The replies to requests answered at once, in order, queued together once no further line
    // is ready (or the batch is large): one hand-over per batch, not per line.
    let mut conn = conn.with_data(Conn::streaming(Caller::stdio(), &stream)).gather(b'\n');
    let mut lines = LineReader::new(input, SERVER_MAX_LINE_BYTES);
    let result = loop {
        // At most SERVER_MAX_IN_FLIGHT requests run at once; past it no line is read until one
        // ends (backpressure: a parent that writes without reading holds bounded work).
        if conn.in_flight() >= SERVER_MAX_IN_FLIGHT {
            conn.flush().await;
            tokio::select! {
                () = engine.wait_for_shutdown() => break Ok(()),
                () = conn.room() => {}
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
                conn.flush().await;
                tokio::select! {
                    () = engine.wait_for_shutdown() => break Ok(()),
                    l = lines.next_line() => l,
                }
            }
        };
        match next {
            Ok(None) => break Ok(()),
            // Most requests (`status`, say) are answered at once, before the next line is read;
            // one that waits (a `submit`) goes on in a task of its own, so what follows is
            // served meanwhile.
            Ok(Some(line)) => conn.take(line).await,
            Err(FrameError::TooLong { .. }) => {
                conn.too_large().await;
                match lines.skip_line().await {
                    Ok((_, true)) => {}
                    Ok((_, false)) => break Ok(()),
                    Err(e) => break Err(e),
                }
            }
            Err(FrameError::Io(e)) => break Err(e),
        }
    };
    conn.finish().await;
    // Forward every event published so far (the last turn's terminal event at end of input,
    // the final event after `shutdown`) before the output closes; a stuck output gets a second.
    stream.drain(Duration::from_secs(1)).await;
    // The stream holds a sender on the writer's queue: it goes before the writer can see the
    // queue closed.
    drop(stream);
    written.await;
    result
}
