//! `openagents run` and `openagents runners`.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::ExitCode;

use clap::Args;
use openagents_sdk::agents::host::{Registry, RunnerHost, TurnError};
use openagents_sdk::agents::runner::{Event, Turn};
use tokio_util::sync::CancellationToken;

/// Arguments of `openagents run`.
#[derive(Args)]
pub struct RunArgs {
    /// The runner's id in the operator's registry.
    #[arg(long)]
    runner: String,
    /// The working folder (default: the current one).
    #[arg(long)]
    cwd: Option<String>,
    /// The assignment id (default: generated).
    #[arg(long)]
    assignment: Option<String>,
    /// The conversation id (default: generated).
    #[arg(long)]
    conversation: Option<String>,
    /// Print each event as one JSON line instead of text.
    #[arg(long)]
    json: bool,
    /// What the agent is asked to do.
    task: String,
}

fn fresh_id(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("{prefix}-{}-{nanos:x}", std::process::id())
}

fn load_registry() -> Result<Registry, ExitCode> {
    Registry::load_default().map_err(|e| {
        eprintln!("openagents: {e}");
        ExitCode::from(2)
    })
}

/// Runs one turn and streams it.
pub fn run(args: RunArgs) -> ExitCode {
    let registry = match load_registry() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let cwd = match args.cwd {
        Some(c) => std::path::absolute(&c).map(|p| p.display().to_string()).unwrap_or(c),
        None => std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_else(|_| "/".into()),
    };
    let turn = Turn::new(
        args.assignment.unwrap_or_else(|| fresh_id("asg")),
        args.conversation.unwrap_or_else(|| fresh_id("conv")),
        args.runner,
        args.task,
        cwd,
    );
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("openagents run: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    let host = RunnerHost::new(registry);
    let json = args.json;
    runtime.block_on(async move {
        let cancel = CancellationToken::new();
        let ctrl_c = {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    cancel.cancel();
                }
            })
        };
        let mut stdout = std::io::stdout();
        let mut first = true;
        let mut on_event = |e: &Event| {
            if json {
                let _ = writeln!(stdout, "{}", serde_json::to_string(e).unwrap_or_default());
            } else if let Event::Text { text } = e {
                let _ = write!(stdout, "{}{text}", if first { "" } else { " " });
                first = false;
            }
            let _ = stdout.flush();
        };
        let report = host.run(&turn, &cancel, &mut on_event).await;
        ctrl_c.abort();
        let mut stdout = std::io::stdout().lock();
        match report.outcome {
            Ok(result) => {
                if !json {
                    if !first {
                        let _ = writeln!(stdout);
                    }
                    let _ = writeln!(stdout, "{result}");
                }
                ExitCode::SUCCESS
            }
            Err(TurnError::Interrupted) => {
                if !first && !json {
                    let _ = writeln!(stdout);
                }
                eprintln!("openagents run: interrupted; the runner was stopped");
                ExitCode::from(130)
            }
            Err(e) => {
                if !first && !json {
                    let _ = writeln!(stdout);
                }
                let err = e.to_runtime_error();
                eprintln!("openagents run: {} ({})", err.message, err.code);
                if !report.stderr.is_empty() {
                    eprintln!("--- runner stderr (last {} bytes) ---\n{}", report.stderr.len(), report.stderr.trim_end());
                }
                ExitCode::from(1)
            }
        }
    })
}

/// Lists the registry.
pub fn runners() -> ExitCode {
    let registry = match load_registry() {
        Ok(r) => r,
        Err(code) => return code,
    };
    if let Some(src) = &registry.source {
        println!("# {}", src.display());
    }
    if registry.runners.is_empty() {
        println!("(no runners)");
    }
    for spec in registry.runners.values() {
        let state = match std::fs::metadata(&spec.command) {
            Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => "ok",
            Ok(m) if m.is_file() => "not executable",
            Ok(_) => "not a file",
            Err(_) => "missing",
        };
        let args = if spec.args.is_empty() { String::new() } else { format!(" {}", spec.args.join(" ")) };
        println!("{}\t{}{}\t{}", spec.id, spec.command.display(), args, state);
    }
    ExitCode::SUCCESS
}
