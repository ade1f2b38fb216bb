//! What every durable store's tests of pruning by age share: one history of blocks and the
//! outcomes [`super::Store::prune_older_than`] must give on it, so the SQLite and PostgreSQL
//! stores are held to the same cases.

use std::ops::RangeInclusive;

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
