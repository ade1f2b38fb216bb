//! `openagents`: validate documents against the protocol's schemas, print the bundled schema,
//! and run turns through operator-installed runners.

mod acp;
mod attach;
mod client;
mod config;
mod history;
mod run;
mod serve;
mod store;
mod validate;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A typed RPC runtime for driving AI agents out of process.
#[derive(Parser)]
#[command(name = "openagents", version, about, disable_help_subcommand = true)]
struct Cli {
    /// How log records are written to stderr: `human` (the default) or `json` (one object per
    /// line). Levels come from `RUST_LOG` (default: `openagents=info` for `serve` and `acp`,
    /// `warn` otherwise); audit records have the target `openagents::audit`.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Human)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// The log format.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Human,
    /// One JSON object per line.
    Json,
}

/// Sends log records to stderr, never stdout (which carries the protocol for `serve --stdio`
/// and `acp`, and the answer for `run`).
fn init_logging(format: LogFormat, serving: bool) {
    use std::io::IsTerminal;
    let default = if serving { "openagents=info" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Human => builder.with_ansi(std::io::stderr().is_terminal()).try_init(),
    };
}

#[derive(Subcommand)]
enum Command {
    /// Check a JSON document against the schema of a type. Exit 0 valid; 1 invalid (one
    /// `<json-pointer>: <message>` line per violation on stderr); 2 unreadable input, not JSON,
    /// or an unknown type.
    Validate {
        /// The type's name (see `openagents types`).
        type_name: String,
        /// The document; `-` or nothing for stdin.
        file: Option<String>,
    },
    /// Print the bundled schema: every root type under `#/$defs/<Type>` (the default, or
    /// `--bundle`), its digest (`--digest`: the lowercase hex SHA-256 of the bundle's canonical
    /// form), or the OpenRPC document (`--openrpc`).
    Schema {
        /// Print the bundle (the default).
        #[arg(long, conflicts_with_all = ["digest", "openrpc"])]
        bundle: bool,
        /// Print the schema digest.
        #[arg(long, conflicts_with = "openrpc")]
        digest: bool,
        /// Print the OpenRPC 1.3 document `rpc.discover` returns.
        #[arg(long)]
        openrpc: bool,
    },
    /// List the types `validate` knows.
    Types,
    /// Run one turn through a runner from the operator's registry, streaming its text as it
    /// arrives. Exit 0 completed, 1 failed (the reason on stderr), 130 on Ctrl-C, SIGTERM or SIGHUP.
    Run(run::RunArgs),
    /// List the operator's runners: id, command, and whether the command is executable.
    Runners,
    /// Serve one runtime over stdio (`--stdio`) or HTTP (`--http`). Off until the operator's
    /// configuration enables it.
    Serve(serve::ServeArgs),
    /// Submit one turn to a runtime over HTTP and stream its events.
    Submit(serve::SubmitArgs),
    /// Print a runtime's status.
    Status(serve::ClientArgs),
    /// Attach to a runtime over its WebSocket: print events live and answer approval prompts.
    Attach(attach::AttachArgs),
    /// List the conversations a runtime keeps, newest first, or (with ID) one conversation's
    /// turns in order: asked of the running runtime over HTTP, with a credential that may read
    /// events. Exit 0; 1 with the reason on stderr (an unknown ID, a refused credential).
    History(history::HistoryArgs),
    /// Internal: how a runner with a `sandbox` in its registry entry is started. Restricts this
    /// process with Landlock to reading the system folders and `--read`, writing `--write`,
    /// then executes COMMAND in its place. Exit 126 when the sandbox cannot be entered.
    #[command(name = "sandbox-exec", hide = true)]
    SandboxExec {
        /// A path the runner may read and execute from.
        #[arg(long)]
        read: Vec<std::path::PathBuf>,
        /// A path the runner may write.
        #[arg(long)]
        write: Vec<std::path::PathBuf>,
        /// The runner's command and arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Internal: how every runner is started. Starts COMMAND as its child and waits for it;
    /// what the runner leaves behind, and the runner itself when the server (`--parent`) dies,
    /// is killed. Exits with the runner's status.
    #[command(name = "runner-exec", hide = true)]
    RunnerExec {
        /// The server's pid: the launcher ends the runner once its parent is another.
        #[arg(long)]
        parent: i32,
        /// The runner's command and arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Speak the Agent Client Protocol (v1) on stdin/stdout, for editors: sessions run turns
    /// through the named runners. Off until the operator's configuration enables the server.
    Acp(acp::AcpArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format, matches!(cli.command, Command::Serve(_) | Command::Acp(_)));
    // Sandboxed runners are started through this same executable (`sandbox-exec`).
    if let Ok(exe) = std::env::current_exe() {
        openagents_sdk::agents::sandbox::set_launcher(exe);
    }
    // This process starts no children but runners: whatever it adopts, a runner left behind.
    openagents_sdk::agents::reap::own_every_child();
    match cli.command {
        Command::Validate { type_name, file } => validate::validate(&type_name, file.as_deref().unwrap_or("-")),
        Command::Schema { bundle: _, digest, openrpc } => {
            let text = if digest {
                openagents_protocol::SCHEMA_DIGEST
            } else if openrpc {
                openagents_protocol::OPENRPC_DOCUMENT
            } else {
                openagents_protocol::SCHEMA_BUNDLE
            };
            // A closed pipe (`| head`) is not an error worth a panic.
            let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), format!("{text}\n").as_bytes());
            ExitCode::SUCCESS
        }
        Command::Types => {
            for t in openagents_protocol::TYPES {
                println!("{}{}", t.name, if t.root { "  (root)" } else { "" });
            }
            ExitCode::SUCCESS
        }
        Command::Run(args) => run::run(args),
        Command::Runners => run::runners(),
        Command::Serve(args) => serve::serve(args),
        Command::Submit(args) => serve::submit(args),
        Command::Status(args) => serve::status(args),
        Command::Attach(args) => attach::attach(args),
        Command::History(args) => history::history(args),
        Command::SandboxExec { read, write, command } => {
            let e = openagents_sdk::agents::sandbox::exec(&read, &write, &command);
            eprintln!("openagents sandbox-exec: {e}");
            ExitCode::from(126)
        }
        Command::RunnerExec { parent, command } => ExitCode::from(openagents_sdk::agents::reap::supervise(parent, &command)),
        Command::Acp(args) => acp::acp(args),
    }
}
