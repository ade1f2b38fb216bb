//! The events of one group commit as one row: a block of lines `<seq>\t<time_ms>\t<json>\n`,
//! written and read the same way by the SQLite and PostgreSQL stores.

use super::{Record, StoredEvent};

/// The most bytes of capacity the buffer a block is built in keeps between writes: a full
/// group commit of usual events ([`crate::events::WRITE_QUEUE`] of them, some 200 bytes a line)
/// fits, so a busy hub does not allocate it again for every commit, and a rare big one (a retry
/// of failed commits, long outputs, up to [`crate::events::WRITE_QUEUE_BYTES`] of JSON and
/// more) does not pin its memory for the life of the store.
pub(crate) const BLOCK_BUFFER_KEEP: usize = 2 << 20;

/// What one prune by age deletes, from the oldest blocks as `(first_seq, count, time_ms)` in
/// order (the first `limit + 1` of them are enough): the leading run of blocks wholly before
/// `cutoff_ms` (a block's `time_ms` is its newest event's), within `limit` events unless the
/// first block alone is over it (it goes all the same, or a block bigger than the limit would
/// never go). `(the first_seq of the run's last block, events it holds)`; `None` deletes nothing.
pub(crate) fn leading_old_blocks(blocks: impl IntoIterator<Item = (i64, i64, i64)>, cutoff_ms: i64, limit: usize) -> (Option<i64>, u64) {
    let limit = limit as u64;
    let (mut through, mut deleted) = (None, 0u64);
    if limit == 0 {
        return (through, deleted);
    }
    for (first_seq, count, time_ms) in blocks {
        let count = count.max(0) as u64;
        if time_ms >= cutoff_ms || (through.is_some() && deleted + count > limit) {
            break;
        }
        through = Some(first_seq);
        deleted += count;
        if deleted >= limit {
            break;
        }
    }
    (through, deleted)
}

/// The events of `batch`, as `(seq, time_ms, json)` in order of sequence number, each once. The
/// hub hands them over in order; anything else is put in order (the first of a repeated
/// sequence number is the one kept, as a second insert of it would be skipped).
pub(crate) fn events_of<'a>(batch: &[Record<'a>]) -> Vec<(i64, i64, &'a [u8])> {
    let mut events: Vec<(i64, i64, &[u8])> = batch
        .iter()
        .filter_map(|r| match r {
            Record::Event { seq, time_ms, json } => Some((*seq, *time_ms, *json)),
            _ => None,
        })
        .collect();
    if !events.is_sorted_by(|a, b| a.0 < b.0) {
        events.sort_by_key(|e| e.0);
        events.dedup_by_key(|e| e.0);
    }
    events
}

/// Appends `n` in decimal to `out` (what `write!(out, "{n}")` does, without the formatting
/// machinery, two digits a step: two of these per event are in a group commit's cost).
pub(crate) fn push_decimal(out: &mut Vec<u8>, n: i64) {
    /// "00" to "99".
    const PAIRS: &[u8; 200] = b"00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n.unsigned_abs();
    while rest >= 100 {
        let pair = (rest % 100) as usize * 2;
        rest /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if rest >= 10 {
        let pair = rest as usize * 2;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + rest as u8;
    }
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[at..]);
}

/// Appends one event's line of a block: `<seq>\t<time_ms>\t<json>\n`. The JSON is copied as
/// it is, unchecked (the hub's is serde_json's, always UTF-8): bytes that are not UTF-8 would
/// be read back as they were written, and the event then fails to decode, as any event the
/// store holds that does not decode (a resume gets a `gap` for it).
pub(crate) fn push_line(out: &mut Vec<u8>, seq: i64, time_ms: i64, json: &[u8]) {
    push_decimal(out, seq);
    out.push(b'\t');
    push_decimal(out, time_ms);
    out.push(b'\t');
    out.extend_from_slice(json);
    out.push(b'\n');
}

/// One line of a block, parsed: its sequence number, time and JSON; `None` when it does not
/// split into three parts or a number does not parse.
pub(crate) fn parse_line(line: &[u8]) -> Option<(i64, i64, &[u8])> {
    let number = |b: &[u8]| std::str::from_utf8(b).ok()?.parse::<i64>().ok();
    let mut parts = line.splitn(3, |&b| b == b'\t');
    let (seq, time_ms, json) = (parts.next()?, parts.next()?, parts.next()?);
    Some((number(seq)?, number(time_ms)?, json))
}

/// The events of the block starting at `first_seq` (its `data`) with `after < seq <= through`,
/// appended to `out` in the block's order until `out` holds `limit` or the JSON of what it holds
/// (counted in `bytes`) reaches `max_bytes`. A line that does not parse
/// is skipped, and said (never a panic: the store may have been written by anyone).
pub(crate) fn read_block(first_seq: i64, data: &[u8], (after, through): (i64, i64), (limit, max_bytes): (usize, usize), out: &mut Vec<StoredEvent>, bytes: &mut usize) {
    let mut bad = 0usize;
    for line in data.split(|&b| b == b'\n') {
        if out.len() >= limit || (*bytes >= max_bytes && !out.is_empty()) {
            break;
        }
        if line.is_empty() {
            continue;
        }
        match parse_line(line) {
            Some((seq, time_ms, json)) if seq > after && seq <= through => {
                *bytes += json.len();
                out.push(StoredEvent { seq, time_ms, json: json.to_vec() });
            }
            Some(_) => {}
            None => bad += 1,
        }
    }
    if bad > 0 {
        tracing::error!(first_seq, lines = bad, "the store's block of events starting at sequence number {first_seq} has {bad} lines that are not <seq> TAB <time_ms> TAB <json>; they are skipped");
    }
}

/// A block of a write: first and last sequence number, how many events, the newest time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Run {
    pub(crate) first: i64,
    pub(crate) last: i64,
    pub(crate) count: i64,
    pub(crate) time_ms: i64,
}

/// Builds the blocks of `events` (in order of sequence number, each once), leaving out those
/// whose sequence number a block of `covered` holds (`(first_seq, last_seq)`, in order, not
/// overlapping): one block per run of events between stored blocks, each built in `block` (emptied
/// first) and handed to `flush`. The last stays in `block`.
pub(crate) fn build_blocks<E>(events: &[(i64, i64, &[u8])], covered: &[(i64, i64)], block: &mut Vec<u8>, mut flush: impl FnMut(Run, &mut Vec<u8>) -> Result<(), E>) -> Result<(), E> {
    block.clear();
    // The first stored block not wholly before the event at hand, and what it was when the run
    // took its last event (a change means a stored block lies between the two).
    let (mut cover, mut run_cover) = (0usize, 0usize);
    let mut run: Option<Run> = None;
    for &(seq, time_ms, json) in events {
        while covered.get(cover).is_some_and(|&(_, last)| last < seq) {
            cover += 1;
        }
        if covered.get(cover).is_some_and(|&(first, _)| first <= seq) {
            continue;
        }
        if cover != run_cover
            && let Some(done) = run.take()
        {
            flush(done, block)?;
            block.clear();
        }
        push_line(block, seq, time_ms, json);
        run = Some(match run {
            None => Run { first: seq, last: seq, count: 1, time_ms },
            Some(r) => Run { last: seq, count: r.count + 1, time_ms: r.time_ms.max(time_ms), ..r },
        });
        run_cover = cover;
    }
    match run {
        Some(done) => flush(done, block),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_written_as_std_writes_them() {
        for n in [0, 1, -1, 9, 10, 99, 100, 1_700_000_000_000, i64::MAX, i64::MIN, i64::MIN + 1] {
            let mut out = b"x".to_vec();
            push_decimal(&mut out, n);
            assert_eq!(out, format!("x{n}").into_bytes());
        }
    }

    #[test]
    fn a_line_reads_back_as_it_was_written_and_a_broken_one_is_none() {
        let mut out = Vec::new();
        push_line(&mut out, -3, 1_700_000_000_000, br#"{"a":"t\tb"}"#);
        assert_eq!(out.last(), Some(&b'\n'));
        assert_eq!(parse_line(&out[..out.len() - 1]), Some((-3, 1_700_000_000_000, &br#"{"a":"t\tb"}"#[..])));
        for broken in [&b"12"[..], b"12\t34", b"x\t1\t{}", b"1\tx\t{}", b""] {
            assert_eq!(parse_line(broken), None, "{:?}", String::from_utf8_lossy(broken));
        }
    }
}
