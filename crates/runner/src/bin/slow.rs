//! The `slow` example runner: sends the task as one `text` event, then a `step N` event every
//! 100 ms for 30 seconds, then completes with the task. A turn long enough to interrupt, or to
//! restart the runtime under; an interrupted turn ends when the host stops the process.

use std::io;
use std::time::Duration;

use openagents_runner::serve::serve_streaming;

/// How many steps a turn takes.
const STEPS: u32 = 300;

fn main() -> io::Result<()> {
    serve_streaming(io::stdin().lock(), io::stdout().lock(), |turn, progress| {
        progress.text(&turn.task).map_err(|e| e.to_string())?;
        for step in 1..=STEPS {
            std::thread::sleep(Duration::from_millis(100));
            progress.text(&format!("step {step}")).map_err(|e| e.to_string())?;
        }
        Ok(turn.task)
    })
}
