//! The invariants every subscriber's event stream must keep, checked one event at a time on the
//! JSON a transport delivered (a `ServerEvent`: `{"seq", "time_ms", "event": {"type", …}}`):
//!
//! - sequence numbers have no silent gaps: each event is the one after the previous, unless a
//!   `lagged` (`missed` events skipped) or a `gap` (resumed at `resumed_at`) says otherwise;
//! - every `turn_started` is followed by exactly one terminal event (`turn_completed` or
//!   `turn_failed`) before the next `turn_started`, unless a `lagged`/`gap` notice says the
//!   subscriber missed part of that turn;
//! - `shutting_down` is the last event.

use serde_json::Value;

/// Where a stream is in the turn it is watching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// Not known (the stream started or resumed mid-turn).
    Unknown,
    /// Between turns.
    Idle,
    /// Inside a turn.
    Running,
}

/// One subscriber's stream, checked as it arrives.
#[derive(Debug, Clone)]
pub struct StreamCheck {
    next_seq: Option<i64>,
    turn: Turn,
    ended: bool,
    /// Events checked (notices included).
    pub events: u64,
    /// `turn_started` events seen.
    pub started: u64,
    /// Terminal events seen (`turn_completed`, `turn_failed`).
    pub terminals: u64,
    /// `turn_completed` events seen.
    pub completed: u64,
    /// Events this subscriber was told it missed (`lagged`).
    pub missed: i64,
    /// `lagged` and `gap` notices seen.
    pub notices: u64,
    /// Whether `shutting_down` arrived.
    pub shut_down: bool,
}

impl Default for StreamCheck {
    fn default() -> Self {
        StreamCheck { next_seq: None, turn: Turn::Unknown, ended: false, events: 0, started: 0, terminals: 0, completed: 0, missed: 0, notices: 0, shut_down: false }
    }
}

impl StreamCheck {
    /// A check for a stream that starts between turns (subscribed while the runtime was idle).
    pub fn idle() -> Self {
        StreamCheck { turn: Turn::Idle, ..StreamCheck::default() }
    }

    /// Checks the next event.
    ///
    /// # Errors
    ///
    /// The broken invariant, with the event.
    pub fn push(&mut self, ev: &Value) -> Result<(), String> {
        self.events += 1;
        let kind = ev["event"]["type"].as_str().unwrap_or("");
        let seq = ev["seq"].as_i64().ok_or_else(|| format!("an event without a sequence number: {ev}"))?;
        if self.ended {
            return Err(format!("an event after shutting_down: {ev}"));
        }
        match kind {
            "lagged" => {
                let missed = ev["event"]["missed"].as_i64().filter(|m| *m >= 1).ok_or_else(|| format!("lagged without a count: {ev}"))?;
                self.missed += missed;
                self.notices += 1;
                self.next_seq = Some(seq + missed + 1);
                self.turn = Turn::Unknown;
                return Ok(());
            }
            "gap" => {
                let resumed = ev["event"]["resumed_at"].as_i64().ok_or_else(|| format!("gap without resumed_at: {ev}"))?;
                self.notices += 1;
                self.next_seq = Some(resumed + 1);
                self.turn = Turn::Unknown;
                return Ok(());
            }
            _ => {}
        }
        if let Some(want) = self.next_seq {
            if seq != want {
                return Err(format!("sequence {seq} where {want} was due, with no lagged or gap notice: {ev}"));
            }
        }
        self.next_seq = Some(seq + 1);
        match kind {
            "turn_started" => {
                if self.turn == Turn::Running {
                    return Err(format!("a turn started before the previous one ended: {ev}"));
                }
                self.started += 1;
                self.turn = Turn::Running;
            }
            "turn_completed" | "turn_failed" => {
                if self.turn == Turn::Idle {
                    return Err(format!("a second terminal event for one turn (or one without a turn): {ev}"));
                }
                self.terminals += 1;
                if kind == "turn_completed" {
                    self.completed += 1;
                }
                self.turn = Turn::Idle;
            }
            "shutting_down" => {
                if self.turn == Turn::Running {
                    return Err(format!("shutting_down while a turn had not ended: {ev}"));
                }
                self.shut_down = true;
                self.ended = true;
            }
            _ => {}
        }
        Ok(())
    }

    /// The sequence number of the newest event this stream has been given or told it missed:
    /// where a reconnecting subscriber resumes from.
    pub fn position(&self) -> Option<i64> {
        self.next_seq.map(|n| n - 1)
    }

    /// Whether the stream is between turns (every turn it saw start has ended).
    pub fn between_turns(&self) -> bool {
        self.turn != Turn::Running
    }
}
