//! The `ask` example runner: asks for approval to do the task, then completes when approved
//! and fails when denied. Written with `serve_streaming` and `Progress::ask`.

use std::io;

use openagents_runner::serve::serve_streaming;

fn main() -> io::Result<()> {
    serve_streaming(io::stdin().lock(), io::stdout().lock(), |turn, progress| {
        progress.text("asking for approval").map_err(|e| e.to_string())?;
        let answer = progress.ask(&format!("May I do this: {}?", turn.task)).map_err(|e| e.to_string())?;
        if answer.approved {
            Ok(format!("approved: {}", turn.task))
        } else {
            Err(format!("denied: {}", turn.task))
        }
    })
}
