//! `openagents serve`, `submit` and `status`.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use openagents_sdk::agents::host::{Registry, RunnerHost};
use openagents_sdk::server::events::EventHub;
use openagents_sdk::server::{EngineConfig, Grant, RpcEngine, RunnerAgent, RuntimeHttpCredential, MIN_TOKEN_BYTES, generate_token, load_credentials, read_token_file};

use crate::client::Target;
use crate::config;

/// Arguments of `openagents serve`.
#[derive(Args)]
pub struct ServeArgs {
    /// Serve JSONL-RPC on stdin/stdout (for a parent process; no token).
    #[arg(long, conflicts_with = "http")]
    stdio: bool,
    /// Serve HTTP (`POST /rpc`, `GET /events`).
    #[arg(long)]
    http: bool,
    /// A runner this runtime serves (repeat for more; default: the operator's `runners` in
    /// `[capabilities.server]`). The first is the one turns use unless a submit names another;
    /// a submit naming a runner not served is refused with `runner_not_found`.
    #[arg(long)]
    runner: Vec<String>,
    /// Address to listen on (default: the operator's `bind`, else 127.0.0.1:0).
    #[arg(long, requires = "http")]
    bind: Option<String>,
    /// A file holding the admin token.
    #[arg(long, requires = "http", conflicts_with = "credentials")]
    token_file: Option<PathBuf>,
    /// A credentials file: named tokens, each with its exact grant.
    #[arg(long, requires = "http")]
    credentials: Option<PathBuf>,
    /// Seconds a controller keeps the lease without activity (1 to 86400).
    #[arg(long, requires = "http", value_parser = clap::value_parser!(u64).range(1..=MAX_DURATION_SECS))]
    lease_ttl: Option<u64>,
    /// Working folder for turns that do not name one (default: the current one).
    #[arg(long)]
    cwd: Option<String>,
    /// Print the web page's address with the admin token in its fragment
    /// (`http://HOST:PORT/#token=…`, which a browser never sends) on stderr. Off by default:
    /// `serve` never prints a token unless asked.
    #[arg(long, requires = "http", conflicts_with = "credentials")]
    print_web_url: bool,
    /// Seconds an approval request waits for a frontend's answer before it is denied (default 120;
    /// 1 to 86400).
    #[arg(long, requires = "http", value_parser = clap::value_parser!(u64).range(1..=MAX_DURATION_SECS))]
    approval_timeout: Option<u64>,
    #[command(flatten)]
    store: crate::store::StoreArgs,
}

/// The longest duration a flag takes, in seconds: one day (the engine's `MAX_LEASE_TTL`). A
/// longer one is refused at startup rather than left to overflow a deadline.
const MAX_DURATION_SECS: u64 = 24 * 60 * 60;

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("openagents serve: {message}");
    ExitCode::from(2)
}

fn write_new_token_file(token: &str) -> std::io::Result<PathBuf> {
    let dir = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("openagents-{}.token", std::process::id()));
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
    f.write_all(token.as_bytes())?;
    Ok(path)
}

/// The operator's gate, shared by every server (`serve`, `acp`): project files in the current
/// folder and `cwd` are checked (they can never enable a server), then the operator's own
/// configuration must have `[capabilities.server] enabled = true`.
///
/// # Errors
///
/// Why the server may not start, for a person to read.
pub(crate) fn operator_gate(cwd: &str) -> Result<config::ServerSettings, String> {
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    config::check_project_files(&[here.as_path(), std::path::Path::new(cwd)]);
    let Some(config_path) = config::operator_config_path() else { return Err("no configuration location: set OPENAGENTS_CONFIG".into()) };
    let settings = config::server_settings(&config_path)?;
    if !settings.enabled {
        return Err(format!(
            "the server is off. It starts only when the operator enables it: add\n\n    [capabilities.server]\n    enabled = true\n\nto {} (or point OPENAGENTS_CONFIG at another file). A project's .openagents/config.toml cannot enable it.",
            config_path.display()
        ));
    }
    Ok(settings)
}

/// The runtime every server builds: a `RunnerAgent` over exactly `runners` of the operator's
/// registry (a turn naming any other is refused as an unknown runner) inside an `RpcEngine`
/// publishing on `hub`, the first of `runners` its default.
///
/// # Errors
///
/// No runner named, an unreadable registry, or a runner it does not have (said in full: the
/// operator reads this).
pub(crate) fn build_engine(runners: &[String], cwd: String, hub: EventHub) -> Result<RpcEngine, String> {
    if runners.is_empty() {
        return Err("name the runners to serve: --runner ID (repeat for more), or `runners = [\"ID\"]` in [capabilities.server]".into());
    }
    Ok(RpcEngine::with_events(runner_agent(runners)?, engine_config(runners, cwd), hub))
}

/// The agent that runs `runners` from the operator's registry (its files kept from sandboxed
/// runners): what `serve` and `acp` run turns with.
pub(crate) fn runner_agent(runners: &[String]) -> Result<RunnerAgent, String> {
    let registry = Registry::load_default().map_err(|e| e.operator_detail())?;
    let registry = registry.restricted_to(runners).map_err(|e| e.operator_detail())?;
    protect_operator_files(&registry);
    Ok(RunnerAgent::new(RunnerHost::new(registry)))
}

/// The engine's settings for `runners` (the first is the default) run in `cwd`.
pub(crate) fn engine_config(runners: &[String], cwd: String) -> EngineConfig {
    EngineConfig { default_runner: runners.first().cloned(), cwd, ..EngineConfig::default() }
}

/// Keeps sandboxed runners away from the operator's configuration and the runner registry (see
/// `agents::sandbox::protect`).
pub(crate) fn protect_operator_files(registry: &Registry) {
    use openagents_sdk::agents::sandbox::protect;
    if let Some(p) = config::operator_config_path() {
        protect(&p);
    }
    if let Some(p) = &registry.source {
        protect(p);
    }
}

/// Runs the server until `shutdown` or a terminating signal (SIGTERM, SIGHUP, SIGINT).
pub fn serve(args: ServeArgs) -> ExitCode {
    if !args.stdio && !args.http {
        return fail("choose a transport: --stdio or --http");
    }
    let cwd = args.cwd.clone().unwrap_or_else(|| std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_else(|_| "/".into()));
    let settings = match operator_gate(&cwd) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let runners = if args.runner.is_empty() { settings.runners.clone() } else { args.runner.clone() };
    let hub = match crate::store::open(&args.store, "serve") {
        Ok(h) => h,
        Err(e) => return fail(e),
    };
    let engine = match build_engine(&runners, cwd, hub) {
        Ok(e) => e,
        Err(e) => return fail(e),
    };
    if let Some(secs) = args.approval_timeout {
        engine.bridge().set_timeout(Duration::from_secs(secs));
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(r) => r,
        Err(e) => return fail(format!("cannot start: {e}")),
    };
    if args.stdio {
        let code = runtime.block_on(async move {
            let mut signals = match Terminate::listen() {
                Ok(s) => s,
                Err(e) => return fail(format!("cannot handle signals: {e}")),
            };
            let on_signal = {
                let engine = engine.clone();
                tokio::spawn(async move {
                    signals.recv().await;
                    engine.shutdown().await;
                })
            };
            let r = openagents_sdk::server::run_stdio_process(engine.clone()).await;
            on_signal.abort();
            // End of input ends the runtime: nothing it started (an ACP runner's agent process,
            // kept between turns) may outlive it.
            engine.shutdown().await;
            match r {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(format!("stdio failed: {e}")),
            }
        });
        // Every answer and event has been written and flushed. What may remain is the input
        // thread's read of stdin, a blocking read that cannot be cancelled: after `shutdown` with the input
        // still open, waiting for it (as dropping the runtime does) would never end.
        runtime.shutdown_background();
        return code;
    }
    // HTTP.
    let bind = args.bind.or(settings.bind).unwrap_or_else(|| "127.0.0.1:0".into());
    let mut token_path = None;
    let mut web_token = None;
    let credentials = if let Some(file) = &args.credentials {
        openagents_sdk::agents::sandbox::protect(file);
        match load_credentials(file) {
            Ok(c) => c,
            Err(e) => return fail(e),
        }
    } else {
        let token = if let Some(f) = args.token_file.as_ref().or(settings.token_file.as_ref()) {
            openagents_sdk::agents::sandbox::protect(f);
            match read_token_file(f) {
                Ok(t) => t,
                Err(e) => return fail(e),
            }
        } else if let Some(t) = settings.token.clone() {
            if t.trim().len() < MIN_TOKEN_BYTES {
                return fail(format!("the `token` in [capabilities.server] is {} bytes; a token must be at least {MIN_TOKEN_BYTES} bytes", t.trim().len()));
            }
            t.trim().to_owned()
        } else {
            let t = match generate_token() {
                Ok(t) => t,
                Err(e) => return fail(format!("cannot generate a token: {e}")),
            };
            match write_new_token_file(&t) {
                // Removed however `serve` ends from here on.
                Ok(p) => {
                    openagents_sdk::agents::sandbox::protect(&p);
                    token_path = Some(TokenFile(p));
                }
                Err(e) => return fail(format!("cannot write the token file: {e}")),
            }
            t
        };
        web_token = Some(token.clone());
        vec![RuntimeHttpCredential::new("admin", &token, Grant::admin())]
    };
    let web = settings.web.unwrap_or(true);
    let allowed_origins = settings.allowed_origins.clone();
    let allowed_hosts = settings.allowed_hosts.clone();
    if args.print_web_url && !web {
        return fail("--print-web-url: the web page is off (`web = false` in [capabilities.server])");
    }
    let lease_ttl = args.lease_ttl.map(Duration::from_secs);
    let print_web_url = args.print_web_url;
    runtime.block_on(async move {
        let mut signals = match Terminate::listen() {
            Ok(s) => s,
            Err(e) => return fail(format!("cannot handle signals: {e}")),
        };
        if let Some(ttl) = lease_ttl {
            engine.set_lease_ttl(ttl);
        }
        let options = openagents_sdk::server::HttpOptions { allowed_origins, web, allowed_hosts };
        let server = openagents_sdk::server::Server::builder(engine.clone()).bind(bind.as_str()).credentials(credentials).http(options).websocket(openagents_sdk::server::WsOptions::default());
        let addr: SocketAddr = match server.start().await {
            Ok(s) => s.addr(),
            Err(e) => return fail(format!("cannot listen on {bind}: {e}")),
        };
        if !is_loopback(addr.ip()) {
            eprintln!("openagents serve: warning: listening on {addr}, which is reachable from other machines; every request still needs a bearer token");
        }
        let mut line = serde_json::json!({ "url": format!("http://{addr}/") });
        if let Some(TokenFile(p)) = &token_path {
            line["token_file"] = serde_json::Value::String(p.display().to_string());
        }
        println!("{line}");
        let _ = std::io::stdout().flush();
        if let (true, Some(token)) = (print_web_url, &web_token) {
            // The terminal only: stderr, never stdout (which a parent may log) nor a file.
            eprintln!("openagents serve: open the web page at http://{addr}/#token={}", fragment_escape(token));
        }
        tokio::select! {
            () = engine.wait_for_shutdown() => {}
            () = signals.recv() => { engine.shutdown().await; }
        }
        // Let connections deliver their last responses and events.
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(token_path);
        ExitCode::SUCCESS
    })
}

/// The token file `serve` generated: removed when dropped, so on every way out once it exists.
struct TokenFile(PathBuf);

impl Drop for TokenFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The signals that end a server: SIGTERM, SIGHUP and SIGINT (Ctrl-C). Each runs the same
/// graceful shutdown as the `shutdown` method: the turn interrupted, the runner and everything
/// it started killed, every stream closed after a final `shutting_down` event, the generated
/// token file removed, exit 0.
pub(crate) struct Terminate {
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Terminate {
    /// Starts listening (inside the runtime): from here on these signals no longer kill the
    /// process outright.
    pub(crate) fn listen() -> std::io::Result<Terminate> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Terminate { term: signal(SignalKind::terminate())?, hup: signal(SignalKind::hangup())?, int: signal(SignalKind::interrupt())? })
    }

    /// Resolves at the first of them.
    pub(crate) async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.hup.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters, for a URL fragment.
fn fragment_escape(s: &str) -> String {
    s.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

fn is_loopback(ip: IpAddr) -> bool {
    ip.is_loopback()
}

/// Arguments of `openagents submit` and `status`.
#[derive(Args)]
pub struct ClientArgs {
    /// The runtime's URL, as `serve --http` printed it.
    #[arg(long)]
    url: String,
    /// A file holding the bearer token.
    #[arg(long)]
    token_file: String,
}

/// Arguments of `openagents submit`.
#[derive(Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    target: ClientArgs,
    /// Print each event as one JSON line.
    #[arg(long)]
    json: bool,
    /// The runner (default: the runtime's).
    #[arg(long)]
    runner: Option<String>,
    /// What the agent is asked to do.
    task: String,
}

fn client_runtime() -> Option<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().ok()
}

fn print_error(what: &str, status: u16, body: &serde_json::Value) -> ExitCode {
    let err = &body["error"];
    let code = err["data"]["code"].as_str().unwrap_or("error");
    // The detail is in `data` (the error object's own `message` is the code's short title).
    let message = err["data"]["message"].as_str().or_else(|| err["message"].as_str()).unwrap_or("failed");
    eprintln!("openagents {what}: {message} ({code}, HTTP {status})");
    ExitCode::from(1)
}

/// Submits one turn and streams its events.
pub fn submit(args: SubmitArgs) -> ExitCode {
    let target = match Target::new(&args.target.url, &args.target.token_file) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let Some(rt) = client_runtime() else { return ExitCode::from(1) };
    let assignment = format!("asg-{}-{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis()));
    let json = args.json;
    rt.block_on(async move {
        let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
        let watch = {
            let target = target.clone();
            let assignment = assignment.clone();
            tokio::spawn(async move {
                let mut started_tx = Some(started_tx);
                let mut ours = false;
                let mut first = true;
                let r = target
                    .events(|ev| {
                        if let Some(tx) = started_tx.take() {
                            let _ = tx.send(());
                        }
                        let kind = ev["event"]["type"].as_str().unwrap_or_default().to_owned();
                        if kind == "turn_started" {
                            ours = ev["event"]["assignment"] == assignment.as_str();
                        }
                        if ours {
                            if json {
                                println!("{ev}");
                            } else if kind == "text" {
                                print!("{}{}", if first { "" } else { " " }, ev["event"]["text"].as_str().unwrap_or_default());
                                first = false;
                                let _ = std::io::stdout().flush();
                            }
                        }
                        !(ours && (kind == "turn_completed" || kind == "turn_failed")) && kind != "shutting_down"
                    })
                    .await;
                if !first && !json {
                    println!();
                }
                r
            })
        };
        // Subscribe before submitting, so no event of the turn is missed: the stream answers
        // with its headers, then the first keep-alive or event.
        let _ = tokio::time::timeout(Duration::from_millis(300), started_rx).await;
        let mut params = serde_json::json!({ "task": args.task, "assignment": assignment });
        if let Some(r) = args.runner {
            params["runner"] = serde_json::Value::String(r);
        }
        let answer = target.call("submit", params).await;
        let _ = tokio::time::timeout(Duration::from_secs(2), watch).await;
        match answer {
            Err(e) => fail(e),
            Ok((status, body)) if body.get("error").is_some() => print_error("submit", status, &body),
            Ok((_, body)) => {
                if !json {
                    println!("{}", body["result"]["result"].as_str().unwrap_or_default());
                }
                ExitCode::SUCCESS
            }
        }
    })
}

/// Prints the runtime's status.
pub fn status(args: ClientArgs) -> ExitCode {
    let target = match Target::new(&args.url, &args.token_file) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let Some(rt) = client_runtime() else { return ExitCode::from(1) };
    match rt.block_on(target.call("status", serde_json::Value::Null)) {
        Err(e) => fail(e),
        Ok((status, body)) if body.get("error").is_some() => print_error("status", status, &body),
        Ok((_, body)) => {
            println!("{}", serde_json::to_string_pretty(&body["result"]).unwrap_or_default());
            ExitCode::SUCCESS
        }
    }
}
