//! Bounded line framing: read one line of at most `limit` bytes without ever buffering more
//! than the limit, synchronously (runners) or asynchronously (hosts and servers).

use std::io::{self, BufRead};

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Why a line could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The line is longer than the limit. The reader stops inside the line; call `skip_line` to
    /// move past it.
    #[error("line longer than {limit} bytes")]
    TooLong {
        /// The limit, in bytes, excluding the newline.
        limit: usize,
    },
    /// The underlying reader failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Reads one line (without its `\n`, and without a `\r` before it) of at most `limit` bytes.
/// `Ok(None)` at end of input. A last line without a newline counts as a line.
///
/// # Errors
///
/// [`FrameError::TooLong`] as soon as more than `limit` bytes arrive without a newline (one `\r`
/// before the newline, or at the end of input, does not count); at most `limit` bytes (and that
/// `\r`) are ever held.
pub fn read_line<R: BufRead + ?Sized>(reader: &mut R, limit: usize) -> Result<Option<Vec<u8>>, FrameError> {
    let mut line = Vec::new();
    loop {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        if buf.is_empty() {
            return Ok(if line.is_empty() { None } else { Some(trim_cr(line)) });
        }
        let (take, done) = match newline(buf) {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        if over(&line, &buf[..take], limit) {
            return Err(FrameError::TooLong { limit });
        }
        line.extend_from_slice(&buf[..take]);
        reader.consume(take + usize::from(done));
        if done {
            return Ok(Some(trim_cr(line)));
        }
    }
}

/// Whether the line held so far plus `chunk` is longer than `limit`, not counting a `\r` at
/// the very end: that one may be the `\r` of a `\r\n`, which is not part of the line, whether
/// or not its `\n` has arrived yet (so the answer never depends on how the bytes were split
/// into reads).
fn over(held: &[u8], chunk: &[u8], limit: usize) -> bool {
    let last = chunk.last().or(held.last());
    held.len() + chunk.len() - usize::from(last == Some(&b'\r')) > limit
}

/// Where the first `\n` in `buf` is, looking at eight bytes at a time (a byte-by-byte search
/// cost the runner host about 450 instructions more per 100-byte event line).
fn newline(buf: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    const NEWLINES: u64 = u64::from_ne_bytes([b'\n'; 8]);
    let mut words = buf.chunks_exact(8);
    let mut at = 0;
    for word in words.by_ref() {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        // A byte of `x` is zero exactly where the word holds a `\n`; the lowest flagged byte
        // is always a true one (a false flag needs a borrow from a zero byte below it).
        let x = u64::from_le_bytes(bytes) ^ NEWLINES;
        let found = x.wrapping_sub(ONES) & !x & HIGHS;
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    words.remainder().iter().position(|&b| b == b'\n').map(|i| at + i)
}

fn trim_cr(mut line: Vec<u8>) -> Vec<u8> {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    line
}

/// An asynchronous bounded line reader.
pub struct LineReader<R> {
    inner: R,
    limit: usize,
    /// The part of the current line read so far: kept here, not in `next_line`'s future, so
    /// that dropping that future (a `select!` taking another branch) loses nothing.
    partial: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// Lines of at most `limit` bytes from `inner`.
    pub fn new(inner: R, limit: usize) -> Self {
        LineReader { inner, limit, partial: Vec::new() }
    }

    /// The next line, as [`read_line`] reads it; `Ok(None)` at end of input.
    ///
    /// Cancel safe: when the future is dropped before it completes, the bytes it had read stay
    /// in the reader and the next call goes on from them.
    ///
    /// # Errors
    ///
    /// [`FrameError::TooLong`] past the limit (the reader is left inside the line), or I/O.
    pub async fn next_line(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        loop {
            let buf = self.inner.fill_buf().await?;
            if buf.is_empty() {
                let line = std::mem::take(&mut self.partial);
                return Ok(if line.is_empty() { None } else { Some(trim_cr(line)) });
            }
            let (take, done) = match newline(buf) {
                Some(i) => (i, true),
                None => (buf.len(), false),
            };
            if over(&self.partial, &buf[..take], self.limit) {
                // Free it: a line past a 16 MiB limit must not keep 16 MiB allocated.
                self.partial = Vec::new();
                return Err(FrameError::TooLong { limit: self.limit });
            }
            self.partial.extend_from_slice(&buf[..take]);
            self.inner.consume(take + usize::from(done));
            if done {
                return Ok(Some(trim_cr(std::mem::take(&mut self.partial))));
            }
        }
    }

    /// The next line if it can be had without waiting, read in place by `f`: `Some(f(line))`
    /// when a whole line (at most the limit) is in the buffer, or arrives with a read that is
    /// ready now, and `None` otherwise (nothing ready, only part of a line, a line past the
    /// limit, end of input or an error), which [`next_line`](Self::next_line) then reports as
    /// it always does. No copy and no allocation: the line is borrowed from the buffer and
    /// consumed once `f` returns.
    ///
    /// A read attempted here that is not ready leaves no waker the caller can rely on: it must
    /// await `next_line` (or poll the reader otherwise) before it waits for input. A read error
    /// here is left to the next read.
    pub fn with_ready_line<T>(&mut self, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        if !self.partial.is_empty() {
            return None;
        }
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let std::task::Poll::Ready(Ok(buf)) = std::pin::Pin::new(&mut self.inner).poll_fill_buf(&mut cx) else {
            return None;
        };
        let end = newline(buf)?;
        let line = &buf[..end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.len() > self.limit {
            return None;
        }
        let out = f(line);
        std::pin::Pin::new(&mut self.inner).consume(end + 1);
        Some(out)
    }

    /// Discards the rest of the current line without holding it; returns how many bytes were
    /// skipped, and whether a newline ended them (false at end of input).
    ///
    /// # Errors
    ///
    /// I/O errors.
    pub async fn skip_line(&mut self) -> Result<(u64, bool), io::Error> {
        let mut skipped = 0u64;
        loop {
            let buf = self.inner.fill_buf().await?;
            if buf.is_empty() {
                return Ok((skipped, false));
            }
            match buf.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    self.inner.consume(i + 1);
                    return Ok((skipped + i as u64, true));
                }
                None => {
                    let n = buf.len();
                    self.inner.consume(n);
                    skipped += n as u64;
                }
            }
        }
    }

    /// The wrapped reader.
    pub fn into_inner(self) -> R {
        self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &[u8], limit: usize, expected: &[Result<&[u8], ()>]) {
        let mut r = io::BufReader::with_capacity(3, input);
        for want in expected {
            match (read_line(&mut r, limit), want) {
                (Ok(Some(got)), Ok(w)) => assert_eq!(&got, w),
                (Err(FrameError::TooLong { .. }), Err(())) => return,
                (got, want) => panic!("{input:?}: got {got:?}, want {want:?}"),
            }
        }
        assert!(matches!(read_line(&mut r, limit), Ok(None)));
    }

    #[test]
    fn newline_is_found_wherever_it_falls_in_a_word() {
        for len in 0..40 {
            for nl in (0..len).map(Some).chain([None]) {
                let mut buf: Vec<u8> = (0..len).map(|i| [b'a', 0x0b, 0x09, 0x8a, 0xff, 0x00][i % 6]).collect();
                if let Some(i) = nl {
                    buf[i] = b'\n';
                    if i + 3 < len {
                        buf[i + 3] = b'\n';
                    }
                }
                assert_eq!(newline(&buf), buf.iter().position(|&b| b == b'\n'), "{buf:?}");
            }
        }
    }

    /// What the asynchronous reader yields when lines ready in place are taken with
    /// `with_ready_line` wherever it offers one and `next_line` reads the rest: the same lines
    /// (or the same refusal) as the synchronous `read_line`, for every buffer size.
    #[test]
    fn lines_taken_in_place_are_the_lines_read_whole() {
        let inputs: [&[u8]; 9] = [b"abcd\nef\n", b"abcd\r\n\r\nx", b"abcde\nab\n", b"ab\ncdefgh\nij\n", b"\n\n\n", b"abcd\r", b"ab\r\ncd\r\n", b"abcd\r\r\n", b"a\nbb\nccc\ndddd\n"];
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        for input in inputs {
            let mut want = Vec::new();
            let mut sync = io::BufReader::with_capacity(3, input);
            loop {
                match read_line(&mut sync, 4) {
                    Ok(Some(line)) => want.push(Ok(line)),
                    Ok(None) => break,
                    Err(_) => {
                        want.push(Err(()));
                        break;
                    }
                }
            }
            for capacity in 1..=input.len() + 1 {
                for in_place_first in [true, false] {
                    let got = rt.block_on(async {
                        let mut reader = LineReader::new(tokio::io::BufReader::with_capacity(capacity, input), 4);
                        let mut got = Vec::new();
                        let mut take_in_place = in_place_first;
                        loop {
                            if take_in_place && let Some(line) = reader.with_ready_line(<[u8]>::to_vec) {
                                got.push(Ok(line));
                                continue;
                            }
                            take_in_place = true;
                            match reader.next_line().await {
                                Ok(Some(line)) => got.push(Ok(line)),
                                Ok(None) => break,
                                Err(_) => {
                                    got.push(Err(()));
                                    break;
                                }
                            }
                        }
                        got
                    });
                    assert_eq!(got, want, "{input:?}, buffer of {capacity}, in place first: {in_place_first}");
                }
            }
        }
    }

    #[test]
    fn lines_at_and_past_the_limit() {
        check(b"abcd\nef\n", 4, &[Ok(b"abcd"), Ok(b"ef")]);
        check(b"abcd\r\n", 4, &[Ok(b"abcd")]);
        check(b"abcde\n", 4, &[Err(())]);
        check(b"abcde", 4, &[Err(())]);
        check(b"abcd", 4, &[Ok(b"abcd")]);
        check(b"\n\n", 4, &[Ok(b""), Ok(b"")]);
        // A `\r` before the newline (or at the end) is not part of the line, wherever the reads
        // split the bytes (the buffer here holds 3).
        check(b"abcd\r", 4, &[Ok(b"abcd")]);
        check(b"ab\r\n", 2, &[Ok(b"ab")]);
        check(b"abcd\r\r\n", 4, &[Err(())]);
        check(b"abcd\rx\n", 4, &[Err(())]);
    }
}
