//! The runner side of the contract: read one bounded `Turn`, run the application, write bounded
//! events, and always end with exactly one terminal event.

use std::io::{self, BufRead, Write};

use openagents_protocol::rt::{self, DocumentError};
use openagents_protocol::{ApprovalAnswer, Event, MAX_FRAME, MAX_OUTPUT, Turn, VERSION};

use crate::frame::{FrameError, read_line};

/// Read one bounded JSON request, invoke application code, and write one result.
///
/// Reads at most [`MAX_FRAME`] bytes up to the first newline (a longer request is refused
/// without being buffered whole), parses and validates the [`Turn`], calls `run`, and writes
/// one `completed` or `failed` line, then flushes. It never writes a line longer than
/// [`MAX_FRAME`]: a result too large becomes a `failed` event saying so. Logs belong on stderr.
/// The host terminates the process when the user stops it.
///
/// # Errors
///
/// Only I/O errors writing `output`; every problem with the request is answered with a
/// `failed` event instead.
pub fn serve_once<R: BufRead, W: Write>(
    mut input: R,
    mut output: W,
    run: impl FnOnce(Turn) -> Result<String, String>,
) -> io::Result<()> {
    let outcome = match read_turn(&mut input) {
        Ok(turn) => run(turn),
        Err(message) => Err(message),
    };
    write_terminal(&mut output, outcome)
}

/// [`serve_once`] for runners that report progress: `run` gets a [`Progress`] to write `text`
/// events with, which refuses to exceed [`MAX_OUTPUT`] in total (room for the terminal event is
/// always kept).
///
/// # Errors
///
/// Only I/O errors writing `output`.
pub fn serve_streaming<R: BufRead, W: Write>(
    mut input: R,
    mut output: W,
    run: impl FnOnce(Turn, &mut Progress<'_, W>) -> Result<String, String>,
) -> io::Result<()> {
    let outcome = match read_turn(&mut input) {
        Ok(turn) => {
            let mut progress = Progress { out: &mut output, input: &mut input, written: 0, asked: 0 };
            run(turn, &mut progress)
        }
        Err(message) => Err(message),
    };
    write_terminal(&mut output, outcome)
}

/// Writes `text` events for a streaming runner, within the contract's bounds, and asks the
/// host for approval.
pub struct Progress<'a, W: Write> {
    out: &'a mut W,
    input: &'a mut dyn BufRead,
    written: usize,
    asked: u64,
}

/// Why a progress event was not written.
#[derive(Debug, thiserror::Error)]
pub enum ProgressError {
    /// The event would be a line longer than [`MAX_FRAME`]; send smaller pieces.
    #[error("a progress event of {0} bytes is longer than MAX_FRAME ({MAX_FRAME} bytes); send it in smaller pieces")]
    LineTooLong(usize),
    /// The turn's output would exceed [`MAX_OUTPUT`] (room for the terminal event is kept).
    #[error("the turn's output would exceed MAX_OUTPUT ({MAX_OUTPUT} bytes)")]
    OutputFull,
    /// Writing to stdout failed (the host has gone away).
    #[error("writing progress failed: {0}")]
    Io(#[source] io::Error),
    /// The host did not answer an approval request (stdin ended, or the answer was not valid).
    #[error("the host did not answer the approval request: {0}")]
    NoAnswer(String),
}

/// The host's answer to [`Progress::ask`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Whether the runner may go ahead. With nobody authorised to answer, this is `false`.
    pub approved: bool,
    /// A free-form answer, when the person gave one.
    pub answer: Option<String>,
}

/// Room kept for the terminal event: one full line and its newline.
const TERMINAL_RESERVE: usize = MAX_FRAME + 1;

impl<W: Write> Progress<'_, W> {
    /// Writes one `text` event and flushes it, so the host sees progress as it happens.
    ///
    /// # Errors
    ///
    /// [`ProgressError`] when the event would break a bound (nothing is written) or on I/O.
    pub fn text(&mut self, text: &str) -> Result<(), ProgressError> {
        let line = encode(&Event::Text { text: text.to_owned() });
        if line.len() > MAX_FRAME {
            return Err(ProgressError::LineTooLong(line.len()));
        }
        if self.written + line.len() + 1 > MAX_OUTPUT - TERMINAL_RESERVE {
            return Err(ProgressError::OutputFull);
        }
        self.write_line(&line)
    }

    /// Asks the host for approval and waits for its answer. Approvals fail closed: when nobody
    /// authorised can answer, the answer is a denial. Runners that never ask never read stdin
    /// past the turn.
    ///
    /// # Errors
    ///
    /// [`ProgressError`] when the request would break a bound, on I/O, or when the host does
    /// not answer.
    pub fn ask(&mut self, prompt: &str) -> Result<Answer, ProgressError> {
        self.asked += 1;
        let id = format!("ask-{}", self.asked);
        let line = encode(&Event::ApprovalRequest { id: id.clone(), prompt: prompt.to_owned() });
        if line.len() > MAX_FRAME {
            return Err(ProgressError::LineTooLong(line.len()));
        }
        if self.written + line.len() + 1 > MAX_OUTPUT - TERMINAL_RESERVE {
            return Err(ProgressError::OutputFull);
        }
        self.write_line(&line)?;
        let reply = match read_line(self.input, MAX_FRAME) {
            Ok(Some(l)) => l,
            Ok(None) => return Err(ProgressError::NoAnswer("stdin ended".into())),
            Err(e) => return Err(ProgressError::NoAnswer(e.to_string())),
        };
        match rt::parse_validated::<ApprovalAnswer>(&reply) {
            Ok(a) if a.id == id => Ok(Answer { approved: a.approved, answer: a.answer }),
            Ok(a) => Err(ProgressError::NoAnswer(format!("the answer is for `{}`, not `{id}`", a.id))),
            Err(e) => Err(ProgressError::NoAnswer(e.to_string())),
        }
    }

    /// Bytes written so far, newlines included.
    pub fn written(&self) -> usize {
        self.written
    }

    fn write_line(&mut self, line: &[u8]) -> Result<(), ProgressError> {
        let r = self.out.write_all(line).and_then(|()| self.out.write_all(b"\n")).and_then(|()| self.out.flush());
        r.map_err(ProgressError::Io)?;
        self.written += line.len() + 1;
        Ok(())
    }
}

fn encode(event: &Event) -> Vec<u8> {
    serde_json::to_vec(event).unwrap_or_else(|_| br#"{"type":"failed","message":"the event could not be encoded"}"#.to_vec())
}

/// Reads and validates the request line, or says what is wrong with it.
fn read_turn<R: BufRead>(input: &mut R) -> Result<Turn, String> {
    let line = match read_line(input, MAX_FRAME) {
        Ok(Some(line)) => line,
        Ok(None) => return Err("no request: stdin ended before a turn line".into()),
        Err(FrameError::TooLong { limit }) => {
            return Err(format!("the request line is longer than MAX_FRAME ({limit} bytes); it was refused unread"));
        }
        Err(FrameError::Io(e)) => return Err(format!("reading the request failed: {e}")),
    };
    match rt::parse_validated::<Turn>(&line) {
        Ok(turn) => Ok(turn),
        Err(DocumentError::NotJson(m)) => Err(format!("the request is not JSON: {m}")),
        Err(DocumentError::Invalid(violations)) => {
            if let Some(v) = violations.iter().find(|v| v.pointer == "/schema" && v.keyword == "const") {
                let found = rt::parse_value_exact(&line)
                    .ok()
                    .and_then(|d| d.get("schema").map(ToString::to_string))
                    .unwrap_or_else(|| v.message.clone());
                return Err(format!("unsupported turn schema {found}: this runner speaks \"{VERSION}\""));
            }
            let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
            Err(format!("the request is not a valid turn: {}", list.join("; ")))
        }
    }
}

/// Writes the terminal event for `outcome`, never longer than [`MAX_FRAME`].
fn write_terminal<W: Write>(output: &mut W, outcome: Result<String, String>) -> io::Result<()> {
    let event = match outcome {
        Ok(result) => Event::Completed { result },
        Err(message) => Event::Failed { message },
    };
    let mut line = encode(&event);
    if line.len() > MAX_FRAME {
        let what = if matches!(event, Event::Completed { .. }) { "result" } else { "failure message" };
        let message = format!(
            "the {what} is too large: {} bytes encoded, and a line may be at most MAX_FRAME ({MAX_FRAME}) bytes",
            line.len()
        );
        line = encode(&Event::Failed { message });
    }
    output.write_all(&line)?;
    output.write_all(b"\n")?;
    output.flush()
}
