//! The `echo` example runner: streams the task back word by word as `text` events, then
//! completes with the whole task. Written with `serve_streaming`, as a runner author would.

use std::io;

use openagents_runner::serve::serve_streaming;

fn main() -> io::Result<()> {
    serve_streaming(io::stdin().lock(), io::stdout().lock(), |turn, progress| {
        eprintln!("echo: turn {} for {}", turn.assignment, turn.agent.runner);
        for word in turn.task.split_whitespace() {
            progress.text(word).map_err(|e| e.to_string())?;
        }
        Ok(turn.task)
    })
}
