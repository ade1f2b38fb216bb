//! What the SQLite and PostgreSQL stores' tests share, so both are held to the same cases: the
//! events they write, and the outcomes pruning by age and bounded reads must give.

use std::ops::RangeInclusive;

use super::{Record, Store, TurnStart};

/// A store's blocks as stored: first and last sequence number and count, in order.
pub type Blocks = Vec<(i64, i64, i64)>;

/// The JSON of test event `seq` (the same size for every `seq` of one digit).
pub fn event(seq: i64) -> String {
    format!(r#"{{"seq":{seq},"time_ms":1,"event":{{"type":"text","text":"t{seq}"}}}}"#)
}

/// The start of a turn at `first_seq` in `conversation`.
pub fn start(first_seq: i64, conversation: &str) -> TurnStart {
    TurnStart { assignment: format!("asg-{first_seq}"), conversation: conversation.into(), runner: "echo".into(), task: "say hello\nand more".into(), cwd: "/tmp".into(), started_ms: 1000 + first_seq, first_seq }
}

/// Writes the events `seqs` (each [`event`], at time `time_ms(seq)`) in one [`Store::write`]:
/// one block.
pub fn write_events(store: &dyn Store, seqs: impl IntoIterator<Item = i64>, time_ms: impl Fn(i64) -> i64) {
    let events: Vec<(i64, String)> = seqs.into_iter().map(|seq| (seq, event(seq))).collect();
    let batch: Vec<Record<'_>> = events.iter().map(|(seq, json)| Record::Event { seq: *seq, time_ms: time_ms(*seq), json: json.as_bytes() }).collect();
    store.write(&batch).expect("written");
}

/// The sequence numbers of every stored event, in order.
pub fn seqs(store: &dyn Store) -> Vec<i64> {
    store.events_after(i64::MIN, i64::MAX, usize::MAX, usize::MAX).expect("events").iter().map(|e| e.seq).collect()
}

/// On a fresh store: [`Store::events_after`] stops once the JSON it read reaches `max_bytes`,
/// past one event at least, and the count limit still holds.
pub fn check_byte_bound(store: &dyn Store) {
    for run in [1..=3, 4..=8] {
        write_events(store, run, |seq| seq);
    }
    let size = event(1).len();
    assert!((1..=8).all(|seq| event(seq).len() == size), "equal sizes make the bound exact");
    for max_bytes in [0, 1, size, size + 1, 3 * size, 4 * size - 1, 100 * size] {
        // As many events as it takes to reach the bound (one at least), the limit aside.
        let want = max_bytes.div_ceil(size).clamp(1, 8);
        let got = store.events_after(0, 8, 100, max_bytes).expect("events");
        assert_eq!(got.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=want as i64).collect::<Vec<_>>(), "max_bytes {max_bytes}");
    }
    assert_eq!(store.events_after(2, 8, 2, usize::MAX).expect("events").iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 4], "the limit still holds");
}

/// The history, one [`super::Store::write`] (so one block) per run of sequence numbers: blocks
/// 1..=3, 4..=8, 9, 10..=13, then 14..=15 written under a clock set back.
pub const AGE_BLOCKS: [RangeInclusive<i64>; 5] = [1..=3, 4..=8, 9..=9, 10..=13, 14..=15];

/// The time of event `seq` in [`AGE_BLOCKS`]: the blocks' newest times are 10, 20, 30 and 40
/// (the older events of a block are older), and 5 for the set-back 14..=15.
pub fn age_time(seq: i64) -> i64 {
    match seq {
        1..=3 => 10 - (3 - seq),
        4..=8 => 20 - (8 - seq),
        9 => 30,
        10..=13 => 40 - (13 - seq),
        _ => 5,
    }
}

/// `(cutoff, limit, events deleted, first event left)` of one `prune_older_than(cutoff, limit)`
/// on a fresh store holding [`AGE_BLOCKS`].
pub const PRUNE_BY_AGE: [(i64, usize, u64, Option<i64>); 12] = [
    (10, 100, 0, Some(1)),  // the first block's newest is not before the cutoff
    (11, 100, 3, Some(4)),  // its newest is
    (20, 100, 3, Some(4)),  // the second has one event at the cutoff
    (21, 100, 8, Some(9)),  //
    (35, 100, 9, Some(10)), // 10..=13 stops it: the set-back 14..=15 behind stay
    (41, 100, 15, None),    //
    (41, 0, 0, Some(1)),    // a limit of 0 deletes nothing
    (41, 8, 8, Some(9)),    // the limit at a block's end
    (41, 7, 3, Some(4)),    // the next block would pass the limit: it stays
    (41, 3, 3, Some(4)),    //
    (41, 2, 3, Some(4)),    // the first block alone is over the limit: it goes all the same
    (41, 1, 3, Some(4)),    //
];

/// On a fresh store, whose blocks `blocks` reads: a batch written again (its commit's success
/// was not heard) changes nothing, and newer events written with it (the hub's retry) are kept,
/// one block for each run the store lacks, around and between stored blocks; `turn`, when
/// given, goes in the batch that writes 2..=15. In one batch, events out of order and a
/// sequence number twice are stored in order, the first kept.
pub fn check_rewrites(store: &dyn Store, mut blocks: impl FnMut() -> Blocks, turn: Option<&TurnStart>) {
    let again = |seqs: RangeInclusive<i64>, turn: Option<&TurnStart>| {
        let events: Vec<(i64, String)> = seqs.map(|seq| (seq, format!(r#"{{"seq":{seq},"again":true}}"#))).collect();
        let mut batch: Vec<Record<'_>> = events.iter().map(|(seq, json)| Record::Event { seq: *seq, time_ms: 1, json: json.as_bytes() }).collect();
        batch.extend(turn.map(Record::TurnStarted));
        store.write(&batch).expect("written");
    };
    write_events(store, 1..=3, |_| 1);
    // The same batch again (its commit's success was not heard): nothing changes.
    again(1..=3, None);
    assert_eq!(blocks(), [(1, 3, 3)]);
    // Again, with the next commit's events after it (the hub's retry): those are kept.
    again(1..=6, None);
    assert_eq!(blocks(), [(1, 3, 3), (4, 6, 3)]);
    write_events(store, 10..=12, |_| 1);
    // Around and between stored blocks: a block for each run the store lacks.
    again(2..=15, turn);
    assert_eq!(blocks(), [(1, 3, 3), (4, 6, 3), (7, 9, 3), (10, 12, 3), (13, 15, 3)]);
    let back = store.events_after(0, i64::MAX, usize::MAX, usize::MAX).expect("events");
    assert_eq!(back.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=15).collect::<Vec<_>>());
    for e in &back {
        let again = String::from_utf8_lossy(&e.json).contains("again");
        assert_eq!(again, matches!(e.seq, 4..=9 | 13..=15), "event {}: the first write of a sequence number is the one kept", e.seq);
    }
    // Out of order, and a sequence number twice, in one batch: in order, the first kept.
    let (a, b, c) = (event(17), event(16), r#"{"seq":17,"second":true}"#.to_owned());
    store.write(&[Record::Event { seq: 17, time_ms: 1, json: a.as_bytes() }, Record::Event { seq: 16, time_ms: 1, json: b.as_bytes() }, Record::Event { seq: 17, time_ms: 1, json: c.as_bytes() }]).expect("written");
    assert_eq!(blocks().last(), Some(&(16, 17, 2)));
    assert_eq!(store.events_after(15, 17, 10, usize::MAX).expect("events").iter().map(|e| e.json.clone()).collect::<Vec<_>>(), [b.into_bytes(), a.into_bytes()]);
    assert_eq!(store.last_seq().expect("last_seq"), 17);
}

/// The blocks [`check_reads`] reads, each written by one [`write_events`] at time `100 + seq`:
/// 1..=3, 4..=8, 9, 11..=14 (10 never written).
pub const READ_BLOCKS: [RangeInclusive<i64>; 4] = [1..=3, 4..=8, 9..=9, 11..=14];

/// On a store holding [`READ_BLOCKS`]: every `events_after(after, through, limit, ..)` around
/// them, limits cutting inside a block included, gives the events in range in order, each with
/// its time and JSON.
pub fn check_reads(store: &dyn Store) {
    let all: Vec<i64> = (1..=14).filter(|&s| s != 10).collect();
    for after in -1..=15 {
        for through in after - 1..=16 {
            for limit in 0..=15 {
                let want: Vec<i64> = all.iter().copied().filter(|&s| s > after && s <= through).take(limit).collect();
                let got = store.events_after(after, through, limit, usize::MAX).expect("events");
                assert_eq!(got.iter().map(|e| e.seq).collect::<Vec<_>>(), want, "events_after({after}, {through}, {limit}, usize::MAX)");
                for e in &got {
                    assert_eq!((e.time_ms, e.json.as_slice()), (100 + e.seq, event(e.seq).as_bytes()), "event {}", e.seq);
                }
            }
        }
    }
}
