//! What every network connection shares, whatever it speaks: a per-peer cap on connections, and
//! a guard that closes a connection whose client stops reading.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// How many connections each peer address holds, capped.
#[derive(Clone)]
pub struct PeerSlots {
    held: Arc<Mutex<HashMap<IpAddr, usize>>>,
    cap: usize,
}

/// One connection's place in its peer's count; given back on drop.
pub struct PeerSlot {
    held: Arc<Mutex<HashMap<IpAddr, usize>>>,
    peer: IpAddr,
}

impl PeerSlots {
    /// At most `cap` connections per peer address.
    pub fn new(cap: usize) -> Self {
        PeerSlots { held: Arc::new(Mutex::new(HashMap::new())), cap }
    }

    /// A slot for one more connection from `peer`, or `None` when it holds `cap` already.
    pub fn try_take(&self, peer: IpAddr) -> Option<PeerSlot> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let n = held.entry(peer).or_insert(0);
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(PeerSlot { held: Arc::clone(&self.held), peer })
    }

    /// How many connections `peer` holds.
    pub fn held(&self, peer: IpAddr) -> usize {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).get(&peer).copied().unwrap_or(0)
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = held.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.peer);
            }
        }
    }
}

/// A stream whose writes fail with `TimedOut` once one has waited longer than `limit` for the
/// peer to read: a client that sends requests (or holds an event stream) and never reads gets
/// its connection closed instead of holding its replies and its slot forever.
pub struct StallGuard<S> {
    inner: S,
    limit: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> StallGuard<S> {
    /// Guards `inner`'s writes with `limit`.
    pub fn new(inner: S, limit: Duration) -> Self {
        StallGuard { inner, limit, stalled: None }
    }

    fn pending<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let limit = self.limit;
        let timer = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the peer read nothing for the write stall timeout"))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for StallGuard<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for StallGuard<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Pending => self.pending(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Pending => self.pending(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Pending => self.pending(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_holds_at_most_its_cap_and_gets_slots_back() {
        let slots = PeerSlots::new(2);
        let a: IpAddr = "127.0.0.1".parse().expect("an address");
        let b: IpAddr = "127.0.0.2".parse().expect("an address");
        let first = slots.try_take(a).expect("first");
        let _second = slots.try_take(a).expect("second");
        assert!(slots.try_take(a).is_none(), "a third connection from the same peer is refused");
        assert!(slots.try_take(b).is_some(), "another peer is not affected");
        drop(first);
        assert_eq!(slots.held(a), 1);
        assert!(slots.try_take(a).is_some(), "a slot given back can be taken again");
    }
}
