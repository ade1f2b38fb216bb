//! The line transport (stdio): one JSON text per line in, one reply or notification per line
//! out, through a [`Connection`]: calls run concurrently, at most
//! [`crate::Limits::max_in_flight`] at once, their replies and the handler's notifications
//! written by one writer in the order they are ready.

use std::future::Future;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::connection::Connection;
use crate::{Identity, Peer, RpcServer};

/// One line read under a bound.
pub(crate) enum Line {
    /// The input ended.
    Eof,
    /// The line was longer than the bound; it was skipped unread (through its newline).
    TooLong,
    /// A line, without its newline.
    Text(Vec<u8>),
}

/// Reads one line of at most `max` bytes (its newline not counted); a longer line is skipped
/// without being held, in pieces of the reader's buffer.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(r: &mut R, max: usize) -> std::io::Result<Line> {
    let mut buf = Vec::new();
    let mut too_long = false;
    loop {
        let avail = r.fill_buf().await?;
        if avail.is_empty() {
            return Ok(if too_long {
                Line::TooLong
            } else if buf.is_empty() {
                Line::Eof
            } else {
                Line::Text(buf)
            });
        }
        if let Some(i) = avail.iter().position(|&b| b == b'\n') {
            too_long |= buf.len() + i > max;
            if !too_long {
                buf.extend_from_slice(&avail[..i]);
            }
            r.consume(i + 1);
            return Ok(if too_long { Line::TooLong } else { Line::Text(buf) });
        }
        let n = avail.len();
        too_long |= buf.len() + n > max;
        if too_long {
            buf = Vec::new();
        } else {
            buf.extend_from_slice(avail);
        }
        r.consume(n);
    }
}

/// Serves one line connection: requests read from `input`, replies and notifications written to
/// `output`, as `stdio`, until `input` ends or the server's shutdown signal; then the calls in
/// flight finish and their replies are written before it returns.
///
/// # Errors
///
/// An I/O error reading `input` or writing `output`.
pub async fn serve_lines<R, W>(server: &RpcServer, input: R, output: W) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    connect_lines(server, input, output).1.await
}

/// [`serve_lines`], with the connection's [`Peer`] in hand before the other side sends anything:
/// for a program that calls first on a connection both sides serve, as an ACP or LSP client
/// does with the agent or language server it started (`initialize` sent through the peer, the
/// other side's requests and notifications served by the server's handler). The connection runs
/// while the returned future is polled.
pub fn connect_lines<R, W>(server: &RpcServer, mut input: R, output: W) -> (Peer, impl Future<Output = std::io::Result<()>> + Send + use<R, W>)
where
    R: AsyncBufRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let server = server.clone();
    let (mut conn, rx) = Connection::new(&server, Identity::new("stdio"));
    let peer = conn.peer().clone();
    let run = async move {
        let _gauge = server.metrics.as_ref().map(|m| m.connection(crate::metrics::Transport::Stdio));
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let writer = tokio::spawn(write_lines(rx, done_rx, output));
        let shutdown = server.shutdown.triggered();
        tokio::pin!(shutdown);
        let max = server.limits.max_frame_bytes;
        let result = loop {
            let line = tokio::select! {
                () = &mut shutdown => break Ok(()),
                l = read_line(&mut input, max) => l,
            };
            match line {
                Ok(Line::Eof) => break Ok(()),
                Ok(Line::TooLong) => conn.too_large().await,
                Ok(Line::Text(bytes)) => conn.take(bytes).await,
                Err(e) => break Err(e),
            }
        };
        conn.finish().await;
        let _ = done_tx.send(());
        let written = writer.await.unwrap_or_else(|e| Err(std::io::Error::other(e)));
        result.and(written)
    };
    (peer, run)
}

/// Writes each queued message as a line, flushing when the queue is empty; after `done`, writes
/// what is queued and stops.
async fn write_lines<W: AsyncWrite + Unpin>(mut rx: mpsc::Receiver<Vec<u8>>, mut done: tokio::sync::oneshot::Receiver<()>, output: W) -> std::io::Result<()> {
    let mut out = tokio::io::BufWriter::new(output);
    loop {
        let msg = tokio::select! {
            biased;
            m = rx.recv() => m,
            _ = &mut done => {
                while let Ok(m) = rx.try_recv() {
                    out.write_all(&m).await?;
                    out.write_all(b"\n").await?;
                }
                break;
            }
        };
        let Some(msg) = msg else { break };
        out.write_all(&msg).await?;
        out.write_all(b"\n").await?;
        if rx.is_empty() {
            out.flush().await?;
        }
    }
    out.flush().await
}
