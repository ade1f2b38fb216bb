//! `openagents run` and `openagents runners`.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::ExitCode;

use clap::Args;
use openagents_protocol::{ErrorCode, Method, RuntimeEvent, SubmitParams, SubmitResult};
use openagents_sdk::agents::host::{Registry, RunnerHost};
use openagents_sdk::server::{Caller, EngineConfig, RpcEngine, RunnerAgent, projection};

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

/// Runs one turn and streams it. The turn goes through the same engine, agent and event
/// projection as `openagents serve`, called in process as the trusted local user.
pub fn run(args: RunArgs) -> ExitCode {
    let registry = match load_registry() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let cwd = match args.cwd {
        Some(c) => std::path::absolute(&c).map(|p| p.display().to_string()).unwrap_or(c),
        None => std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_else(|_| "/".into()),
    };
    let params = SubmitParams {
        task: args.task,
        runner: Some(args.runner),
        cwd: Some(cwd.clone()),
        assignment: Some(args.assignment.unwrap_or_else(|| fresh_id("asg"))),
        conversation: Some(args.conversation.unwrap_or_else(|| fresh_id("conv"))),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("openagents run: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    crate::serve::protect_operator_files(&registry);
    let engine = local_engine(registry, cwd);
    let json = args.json;
    runtime.block_on(async move {
        let mut events = engine.subscribe(None);
        // Progress goes to stderr as it arrives (dimmed on a terminal); stdout gets only the
        // answer, so `openagents run … > answer.txt` keeps just that. `--json` writes every
        // event to stdout, as before.
        let printer = tokio::spawn(async move {
            use std::io::IsTerminal;
            let mut stdout = std::io::stdout();
            let mut stderr = std::io::stderr();
            let (dim, undim) = if stderr.is_terminal() { ("\x1b[2m", "\x1b[0m") } else { ("", "") };
            let mut first = true;
            while let Some(ev) = events.next().await {
                if json {
                    let _ = stdout.write_all(&projection::event_json(&ev));
                    let _ = stdout.write_all(b"\n");
                    let _ = stdout.flush();
                } else if let RuntimeEvent::Text { text } = &ev.event {
                    let _ = write!(stderr, "{dim}{}{}{undim}", if first { "" } else { " " }, neutralise(text));
                    let _ = stderr.flush();
                    first = false;
                }
                if matches!(ev.event, RuntimeEvent::TurnCompleted { .. } | RuntimeEvent::TurnFailed { .. }) {
                    break;
                }
            }
            if !first && !json {
                let _ = writeln!(stderr);
            }
        });
        // Ctrl-C, SIGTERM and SIGHUP interrupt the turn: the runner and what it started are
        // stopped before the command exits.
        let ctrl_c = {
            let engine = engine.clone();
            let signals = crate::serve::Terminate::listen();
            tokio::spawn(async move {
                if let Ok(mut signals) = signals {
                    signals.recv().await;
                    let _ = engine.call(&Caller::stdio(), Method::Interrupt(None)).await;
                }
            })
        };
        let outcome = engine.call(&Caller::stdio(), Method::Submit(params)).await;
        ctrl_c.abort();
        let _ = printer.await;
        // Nothing outlives the command: an ACP runner's agent process ends here.
        engine.shutdown().await;
        match outcome {
            Ok(bytes) => {
                if !json {
                    let result: SubmitResult = match serde_json::from_slice(&bytes) {
                        Ok(r) => r,
                        Err(e) => {
                            eprintln!("openagents run: unreadable result: {e}");
                            return ExitCode::from(1);
                        }
                    };
                    println!("{}", result.result);
                }
                ExitCode::SUCCESS
            }
            Err(e) if e.code == ErrorCode::Interrupted => {
                eprintln!("openagents run: interrupted; the runner was stopped");
                ExitCode::from(130)
            }
            Err(e) => {
                eprintln!("openagents run: {} ({})", e.message, e.code);
                ExitCode::from(1)
            }
        }
    })
}

/// Runner-controlled text as it may be shown on a terminal: control characters (escape
/// sequences included) are written escaped, so progress cannot rewrite what the person sees.
fn neutralise(text: &str) -> String {
    text.chars().map(|c| if c.is_control() && c != '\n' && c != '\t' { c.escape_default().to_string() } else { c.to_string() }).collect()
}

/// The engine `openagents run` drives in process: the same agent (`RunnerAgent` over the
/// operator's registry) and the same approval bridge as `openagents serve`; with no frontend
/// attached, approvals are denied.
pub fn local_engine(registry: Registry, cwd: String) -> RpcEngine {
    RpcEngine::with_config(RunnerAgent::new(RunnerHost::new(registry)), EngineConfig { default_runner: None, cwd, ..EngineConfig::default() })
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
