//! The `hold` example runner: reports one `text` event ("holding: <task>"), then holds the turn
//! open for up to five minutes without finishing, so that a client can interrupt it (editor
//! cancel, shutdown) while it runs. The host ends it by killing its process group.

use std::io;
use std::time::Duration;

use openagents_runner::serve::serve_streaming;

fn main() -> io::Result<()> {
    serve_streaming(io::stdin().lock(), io::stdout().lock(), |turn, progress| {
        progress.text(&format!("holding: {}", turn.task)).map_err(|e| e.to_string())?;
        std::thread::sleep(Duration::from_secs(300));
        Err("held for five minutes without being interrupted".to_owned())
    })
}
