//! The host side of the contract: spawn an operator-installed runner for one turn and never
//! trust it. Every line is bounded by `MAX_FRAME`, all of stdout by `MAX_OUTPUT`, every event
//! is checked by the generated validator, and exactly one terminal event must arrive. Each
//! breach ends the turn with its own typed error and kills the runner's whole process group.

use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use openagents_protocol::rt::{self, DocumentError, Violation};
use openagents_protocol::{ErrorCode, ErrorDetails, Event, MAX_FRAME, MAX_OUTPUT, RuntimeSubmitError, Turn};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::frame::{FrameError, LineReader};
use crate::reap;
use crate::registry::{Registry, RegistryError, RunnerSpec};

/// How much of a runner's stderr is kept (the newest bytes), for logs.
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;

/// How long the host waits, after the terminal event, for stdout to close before it stops
/// reading and ends the process group: long enough for a runner to exit normally, short enough
/// that a grandchild holding stdout open cannot hold the turn.
pub const AFTER_TERMINAL_GRACE: Duration = Duration::from_millis(500);

/// How long a runner gets after SIGTERM before its process group is killed with SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_millis(500);

/// How a runner's approval request was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalDecision {
    /// Whether the runner may go ahead.
    pub approved: bool,
    /// A free-form answer, when one was given.
    pub answer: Option<String>,
}

impl ApprovalDecision {
    /// A denial.
    pub fn denied() -> Self {
        ApprovalDecision { approved: false, answer: None }
    }
}

/// A boxed future.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Answers runners' approval requests.
pub trait Approver: Send + Sync {
    /// Answers the request `id` asking `prompt`. Must fail closed: deny when nobody can answer.
    fn approve<'a>(&'a self, id: &'a str, prompt: &'a str) -> BoxFuture<'a, ApprovalDecision>;
}

/// The approver with nobody behind it: every request is denied.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyAll;

impl Approver for DenyAll {
    fn approve<'a>(&'a self, _id: &'a str, _prompt: &'a str) -> BoxFuture<'a, ApprovalDecision> {
        Box::pin(async { ApprovalDecision::denied() })
    }
}

/// Why a turn did not complete.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The turn itself is not valid.
    #[error("the turn is not valid: {}", list(.0))]
    InvalidTurn(Vec<Violation>),
    /// The turn names a runner the registry does not have.
    #[error(transparent)]
    RunnerNotFound(#[from] RegistryError),
    /// The turn's working folder does not exist, is not a folder, or cannot be used. What the
    /// caller sees does not say which (that would let it probe the host's files);
    /// [`TurnError::operator_detail`] does.
    #[error("cwd is not an accessible folder")]
    BadCwd {
        /// The folder.
        cwd: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The encoded turn is longer than `MAX_FRAME`.
    #[error("the turn is {0} bytes encoded; a line may be at most MAX_FRAME ({MAX_FRAME}) bytes")]
    TurnTooLarge(usize),
    /// The runner could not be started.
    #[error("cannot start runner `{runner}` ({command}): {source}")]
    Spawn {
        /// The runner's id.
        runner: String,
        /// Its command.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// The runner wrote a line longer than `MAX_FRAME`.
    #[error("the runner wrote a line longer than MAX_FRAME ({MAX_FRAME} bytes)")]
    FrameTooLarge,
    /// The runner wrote more than `MAX_OUTPUT` bytes.
    #[error("the runner wrote more than MAX_OUTPUT ({MAX_OUTPUT} bytes)")]
    OutputTooLarge,
    /// The runner wrote a line that is not UTF-8.
    #[error("the runner wrote a line that is not UTF-8 (line {line})")]
    InvalidUtf8 {
        /// The 1-based line number.
        line: usize,
    },
    /// The runner wrote a line that is not JSON.
    #[error("the runner wrote a line that is not JSON (line {line}): {message}")]
    InvalidJson {
        /// The 1-based line number.
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// The runner wrote JSON that is not a valid event.
    #[error("the runner wrote an invalid event (line {line}): {}", list(.violations))]
    InvalidEvent {
        /// The 1-based line number.
        line: usize,
        /// What is wrong with it.
        violations: Vec<Violation>,
    },
    /// The runner wrote text after its terminal event.
    #[error("the runner wrote an event after its terminal event")]
    AfterTerminal,
    /// The runner wrote a second terminal event.
    #[error("the runner wrote a second terminal event")]
    SecondTerminal,
    /// Stdout ended, or the runner exited, without a terminal event.
    #[error("the runner ended without a terminal event{}", .0.map(|s| format!(" ({s})")).unwrap_or_default())]
    NoTerminal(Option<ExitStatus>),
    /// The turn took longer than the runner's time limit.
    #[error("the turn took longer than {0:?}")]
    Timeout(Duration),
    /// The turn was stopped by the user.
    #[error("the turn was interrupted")]
    Interrupted,
    /// The runner reported failure.
    #[error("the runner failed: {0}")]
    Failed(String),
    /// The host failed to talk to the runner.
    #[error("talking to the runner failed: {0}")]
    Io(#[source] std::io::Error),
}

fn list(v: &[Violation]) -> String {
    v.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

impl TurnError {
    /// The stable error code for this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            TurnError::InvalidTurn(_) | TurnError::BadCwd { .. } => ErrorCode::InvalidParams,
            TurnError::RunnerNotFound(_) => ErrorCode::RunnerNotFound,
            TurnError::TurnTooLarge(_) | TurnError::FrameTooLarge => ErrorCode::FrameTooLarge,
            TurnError::OutputTooLarge => ErrorCode::OutputTooLarge,
            TurnError::Timeout(_) => ErrorCode::Timeout,
            TurnError::Interrupted => ErrorCode::Interrupted,
            TurnError::Io(_) => ErrorCode::Internal,
            TurnError::Spawn { .. }
            | TurnError::InvalidUtf8 { .. }
            | TurnError::InvalidJson { .. }
            | TurnError::InvalidEvent { .. }
            | TurnError::AfterTerminal
            | TurnError::SecondTerminal
            | TurnError::NoTerminal(_)
            | TurnError::Failed(_) => ErrorCode::RunnerFailed,
        }
    }

    /// The whole story, for the operator's own log (never for a client): which folder and
    /// what is wrong with it, which runners the registry has and where it is.
    pub fn operator_detail(&self) -> String {
        match self {
            TurnError::RunnerNotFound(e) => e.operator_detail(),
            TurnError::BadCwd { cwd, reason } => format!("the working folder {cwd} {reason}"),
            other => other.to_string(),
        }
    }

    /// Whether [`TurnError::operator_detail`] says more than the caller is told.
    pub fn has_operator_detail(&self) -> bool {
        matches!(self, TurnError::RunnerNotFound(RegistryError::NotFound { .. }) | TurnError::BadCwd { .. })
    }

    /// The typed error every transport and client sees.
    pub fn to_runtime_error(&self) -> RuntimeSubmitError {
        let code = self.code();
        let mut details = ErrorDetails { violations: None, violations_omitted: None, known: None, holder: None, expires_at_ms: None, limit: None };
        match self {
            TurnError::InvalidTurn(v) | TurnError::InvalidEvent { violations: v, .. } => {
                details.violations = Some(v.iter().map(|v| openagents_protocol::Violation { pointer: v.pointer.clone(), keyword: v.keyword.clone(), message: v.message.clone() }).collect());
            }
            TurnError::TurnTooLarge(_) | TurnError::FrameTooLarge => details.limit = Some(MAX_FRAME as i64),
            TurnError::OutputTooLarge => details.limit = Some(MAX_OUTPUT as i64),
            _ => {}
        }
        let has_details = details.violations.is_some() || details.known.is_some() || details.limit.is_some();
        RuntimeSubmitError { retryable: code.retryable(), code, message: self.to_string(), details: has_details.then_some(details) }
    }
}

/// How one turn ended, with what the runner logged.
#[derive(Debug)]
pub struct TurnReport {
    /// The result, or why there is none.
    pub outcome: Result<String, TurnError>,
    /// The newest bytes the runner wrote to stderr (at most [`STDERR_TAIL_BYTES`]), for logs;
    /// never part of the result.
    pub stderr: String,
    /// How the runner process ended, when it was reaped.
    pub exit: Option<ExitStatus>,
}

/// Runs turns through the runners of one registry.
#[derive(Debug, Clone)]
pub struct RunnerHost {
    registry: Registry,
}

impl RunnerHost {
    /// A host for the runners of `registry`.
    pub fn new(registry: Registry) -> Self {
        RunnerHost { registry }
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Runs one turn through the runner it names, calling `on_event` for every event as it
    /// arrives (the terminal one included), until the turn ends, `cancel` fires, or the
    /// runner's time limit passes. The runner's whole process group is gone when this returns.
    /// Approval requests are denied (nobody is there to answer); see [`RunnerHost::run_with`].
    pub async fn run(&self, turn: &Turn, cancel: &CancellationToken, on_event: &mut (dyn FnMut(&Event) + Send)) -> TurnReport {
        self.run_with(turn, cancel, on_event, &DenyAll).await
    }

    /// [`RunnerHost::run`], with `approver` answering the runner's approval requests.
    pub async fn run_with(&self, turn: &Turn, cancel: &CancellationToken, on_event: &mut (dyn FnMut(&Event) + Send), approver: &dyn Approver) -> TurnReport {
        let fail = |e: TurnError| TurnReport { outcome: Err(e), stderr: String::new(), exit: None };
        if let Err(v) = rt::Validate::validate(turn) {
            return fail(TurnError::InvalidTurn(v));
        }
        let spec = match self.registry.get(&turn.agent.runner) {
            Ok(s) => s.clone(),
            Err(e) => return fail(e.into()),
        };
        run_turn_with(&spec, turn, cancel, on_event, approver).await
    }
}

/// Runs one turn through `spec`, denying approval requests (see [`RunnerHost::run`]).
pub async fn run_turn(spec: &RunnerSpec, turn: &Turn, cancel: &CancellationToken, on_event: &mut (dyn FnMut(&Event) + Send)) -> TurnReport {
    run_turn_with(spec, turn, cancel, on_event, &DenyAll).await
}

/// Runs one turn through `spec` with `approver` answering approval requests.
pub async fn run_turn_with(
    spec: &RunnerSpec,
    turn: &Turn,
    cancel: &CancellationToken,
    on_event: &mut (dyn FnMut(&Event) + Send),
    approver: &dyn Approver,
) -> TurnReport {
    let fail = |e: TurnError| TurnReport { outcome: Err(e), stderr: String::new(), exit: None };
    match std::fs::metadata(&turn.cwd) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return fail(TurnError::BadCwd { cwd: turn.cwd.clone(), reason: "is not a folder".into() }),
        Err(e) => return fail(TurnError::BadCwd { cwd: turn.cwd.clone(), reason: format!("cannot be used: {e}") }),
    }
    if let Some((allowed, file)) = spec.sandbox.as_ref().and_then(|s| s.reaches_protected(&turn.cwd)) {
        let reason = format!("would let the sandboxed runner `{}` reach the server's file {} (through {})", spec.id, file.display(), allowed.display());
        return fail(TurnError::BadCwd { cwd: turn.cwd.clone(), reason });
    }
    let mut line = match serde_json::to_vec(turn) {
        Ok(l) => l,
        Err(e) => return fail(TurnError::Io(std::io::Error::other(e))),
    };
    if line.len() > MAX_FRAME {
        return fail(TurnError::TurnTooLarge(line.len()));
    }
    line.push(b'\n');
    let mut child = match spawn_in_group(spec, &turn.cwd) {
        Ok(c) => c,
        Err(source) => return fail(TurnError::Spawn { runner: spec.id.clone(), command: spec.command.display().to_string(), source }),
    };
    let pgid = child.id().map(|id| Pid::from_raw(id as i32));
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    // Stdin has its own task, so a runner that never reads it cannot block us: first the turn,
    // then one line per approval answer; it closes when the turn ends.
    let (answers, mut answer_rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
    let writer = tokio::spawn(async move {
        if let Some(mut stdin) = stdin {
            if stdin.write_all(&line).await.is_err() {
                return;
            }
            let _ = stdin.flush().await;
            while let Some(mut answer) = answer_rx.recv().await {
                answer.push(b'\n');
                if stdin.write_all(&answer).await.is_err() || stdin.flush().await.is_err() {
                    return;
                }
            }
            let _ = stdin.shutdown().await;
        }
    });
    let tail = StderrTail::default();
    let stderr_task = stderr.map(|err| tail.collect(err));
    let outcome = match stdout {
        Some(out) => read_events(out, &mut child, spec.timeout, cancel, on_event, approver, &answers).await,
        None => Err(TurnError::Io(std::io::Error::other("the runner's stdout was not captured"))),
    };
    drop(answers);
    let clean = outcome.is_ok();
    let exit = end_process_group(&mut child, pgid, clean).await;
    // Awaited after the abort, so the pipes they own are closed when this returns (an aborted
    // task is only dropped when the runtime next gets to it).
    writer.abort();
    let _ = writer.await;
    if let Some(mut t) = stderr_task {
        // Everything in the group is dead; give the pipe a moment to drain, then close it (a
        // process that left the group could otherwise hold it open).
        if tokio::time::timeout(Duration::from_millis(100), &mut t).await.is_err() {
            t.abort();
            let _ = t.await;
        }
    }
    let stderr = tail.text();
    let outcome = match outcome {
        Ok(result) => Ok(result),
        Err(TurnError::NoTerminal(None)) => Err(TurnError::NoTerminal(exit)),
        Err(e) => Err(e),
    };
    TurnReport { outcome, stderr, exit }
}

/// Starts `spec`'s executable in `cwd` as the leader of a process group of its own (so the
/// whole group can be ended), with its environment and all three stdio streams piped. Shared
/// by every protocol a runner may speak.
///
/// The environment starts empty: only [`INHERITED_ENV`] is copied from the host's, then the
/// entry's `env` is added. The child is recorded as live for [`reap::sweep`], which
/// [`end_process_group`] runs, so nothing it starts outlives it. On a host with a launcher the
/// child is the runner's supervisor ([`reap::supervise`]), in the runner's process group.
pub(crate) fn spawn_in_group(spec: &RunnerSpec, cwd: &str) -> std::io::Result<Child> {
    let mut command = runner_command(spec, cwd)?;
    if crate::sandbox::launcher().is_some() { reap::spawn_supervised(&mut command) } else { reap::spawn(&mut command) }
}

/// The only variables a runner inherits from the host's environment; everything else it gets
/// comes from its registry entry's `env`. The host's own environment may hold the operator's
/// secrets (`OPENAGENTS_CONFIG`, tokens, keys), and a runner is not trusted with them.
pub const INHERITED_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER"];

/// The command that starts `spec`'s runner in `cwd`: a cleared environment (only
/// [`INHERITED_ENV`], then the entry's `env`), piped stdio, a process group of its own, killed
/// when dropped; for an entry with a `sandbox`, through the sandbox launcher
/// ([`crate::sandbox`]). On a host with a launcher, under the runner's supervisor
/// ([`reap::supervise`]: the launcher's `runner-exec`), which ends what the runner leaves behind
/// and ends the runner if the host dies.
///
/// # Errors
///
/// A sandboxed runner on a host without a sandbox launcher, or whose sandbox would reach one of
/// the server's own files ([`crate::sandbox::protect`]): it fails closed. Under a supervisor, a
/// command that does not exist or may not be executed, with the error starting it would give.
pub fn runner_command(spec: &RunnerSpec, cwd: &str) -> std::io::Result<Command> {
    let launcher = crate::sandbox::launcher();
    let (program, args): (&std::path::Path, Vec<std::ffi::OsString>) = match &spec.sandbox {
        None => (&spec.command, spec.args.iter().map(Into::into).collect()),
        Some(sandbox) => {
            if sandbox.reaches_protected(cwd).is_some() {
                return Err(std::io::Error::other("its sandbox would reach the server's own files; it was not started"));
            }
            let Some(launcher) = launcher else {
                return Err(std::io::Error::other("the runner asks for a sandbox, and this host has no sandbox launcher; it was not started"));
            };
            (launcher, sandbox.launcher_args(&spec.command, &spec.args, cwd))
        }
    };
    let mut command = match launcher {
        Some(launcher) => {
            // The supervisor starts the runner itself; a command it could not start is refused
            // here, as a direct start would refuse it, not after the supervisor has started.
            executable(&spec.command)?;
            let mut c = Command::new(launcher);
            c.args(reap::supervisor_args(std::process::id(), program.as_os_str(), args));
            c
        }
        None => {
            let mut c = Command::new(program);
            c.args(args);
            c
        }
    };
    command.env_clear();
    for name in INHERITED_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command
        .envs(&spec.env)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    Ok(command)
}

/// Whether `path` is a file someone may execute: the error starting it would give otherwise
/// (no such file, or permission denied).
fn executable(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path)?;
    if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(nix::errno::Errno::EACCES as i32))
    }
}

/// The newest [`STDERR_TAIL_BYTES`] a runner wrote to stderr, collected by a task of its own
/// so a runner that logs a lot never blocks on a full pipe.
#[derive(Debug, Clone, Default)]
pub(crate) struct StderrTail(Arc<Mutex<VecDeque<u8>>>);

impl StderrTail {
    /// Reads `err` to its end into the tail.
    pub(crate) fn collect(&self, mut err: tokio::process::ChildStderr) -> tokio::task::JoinHandle<()> {
        let tail = Arc::clone(&self.0);
        tokio::spawn(async move {
            let mut buf = [0u8; 8192];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                t.extend(&buf[..n]);
                let excess = t.len().saturating_sub(STDERR_TAIL_BYTES);
                t.drain(..excess);
            }
        })
    }

    /// What has been collected so far, as text.
    pub(crate) fn text(&self) -> String {
        let t = self.0.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&t.iter().copied().collect::<Vec<u8>>()).into_owned()
    }
}

/// The runner contract's checks on stdout, one line at a time and without any I/O: the
/// `MAX_OUTPUT` budget, UTF-8, JSON, the generated `Event` validator, and exactly one terminal
/// event with nothing after it. The host's reader feeds it every line the bounded framing
/// (`MAX_FRAME`) yields; the fuzz targets feed it arbitrary bytes the same way.
#[derive(Debug, Default)]
pub struct EventChecker {
    line_no: usize,
    total: usize,
    terminal: Option<Event>,
}

impl EventChecker {
    /// A checker at the start of a runner's output.
    pub fn new() -> Self {
        EventChecker::default()
    }

    /// Checks one line (without its newline): the event to deliver, or the breach that ends
    /// the turn.
    ///
    /// # Errors
    ///
    /// The breach: [`TurnError::OutputTooLarge`], [`TurnError::InvalidUtf8`],
    /// [`TurnError::InvalidJson`], [`TurnError::InvalidEvent`], [`TurnError::AfterTerminal`] or
    /// [`TurnError::SecondTerminal`].
    pub fn line(&mut self, bytes: &[u8]) -> Result<Event, TurnError> {
        self.line_no += 1;
        self.total += bytes.len() + 1;
        if self.total > MAX_OUTPUT {
            return Err(TurnError::OutputTooLarge);
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            return Err(TurnError::InvalidUtf8 { line: self.line_no });
        };
        let event = match rt::parse_validated_str::<Event>(text) {
            Ok(e) => e,
            Err(DocumentError::NotJson(message)) => return Err(TurnError::InvalidJson { line: self.line_no, message }),
            Err(DocumentError::Invalid(violations)) => return Err(TurnError::InvalidEvent { line: self.line_no, violations }),
        };
        if self.terminal.is_some() {
            return Err(if event.terminal() { TurnError::SecondTerminal } else { TurnError::AfterTerminal });
        }
        if event.terminal() {
            self.terminal = Some(event.clone());
        }
        Ok(event)
    }

    /// Whether the terminal event has arrived.
    pub fn has_terminal(&self) -> bool {
        self.terminal.is_some()
    }

    /// How the turn ends once the output does (or the runner had its say): the result of a
    /// `completed`, the message of a `failed`, or [`TurnError::NoTerminal`] without either.
    ///
    /// # Errors
    ///
    /// [`TurnError::Failed`] or [`TurnError::NoTerminal`].
    pub fn finish(self) -> Result<String, TurnError> {
        self.terminal.map_or(Err(TurnError::NoTerminal(None)), finish)
    }
}

/// Reads events until the turn ends; returns the result or the breach. A runner that exits
/// without its terminal event ends the turn [`AFTER_TERMINAL_GRACE`] later (time for stdout to
/// drain), even when a process it left behind holds stdout open.
async fn read_events(
    stdout: tokio::process::ChildStdout,
    child: &mut Child,
    limit: Duration,
    cancel: &CancellationToken,
    on_event: &mut (dyn FnMut(&Event) + Send),
    approver: &dyn Approver,
    answers: &tokio::sync::mpsc::Sender<Vec<u8>>,
) -> Result<String, TurnError> {
    let mut reader = LineReader::new(BufReader::with_capacity(64 * 1024, stdout), MAX_FRAME);
    // A limit too large for a deadline (a `RunnerSpec` built by hand) means no limit to speak of,
    // never a panic; the registry refuses more than `MAX_TIMEOUT`.
    let deadline = Instant::now().checked_add(limit).unwrap_or_else(|| Instant::now() + crate::registry::MAX_TIMEOUT * 365);
    let mut checker = EventChecker::new();
    // Set when the runner exits: its status, and until when stdout may still drain (pushed back
    // by every line that still arrives, so a slow reader never cuts real output short).
    let mut exited: Option<(Option<ExitStatus>, Instant)> = None;
    // Made once, not per line: the cancellation, the timer (moved only when the point to stop
    // at moves) and the wait for the runner's exit.
    let mut cancelled = std::pin::pin!(cancel.cancelled());
    let mut timer = std::pin::pin!(tokio::time::sleep_until(deadline));
    let mut timer_at = deadline;
    let mut wait = std::pin::pin!(child.wait());
    loop {
        let stop = if checker.has_terminal() {
            Instant::now().min(deadline) + AFTER_TERMINAL_GRACE
        } else if let Some((_, drain_until)) = exited {
            drain_until.min(deadline)
        } else {
            deadline
        };
        // A line that is ready now is checked in place, without the `select!` below: the same
        // order (cancellation, then the point to stop at, then the line) with an atomic load and
        // a clock read instead of polling three futures, and no copy of the line.
        let ready = if cancel.is_cancelled() {
            return Err(TurnError::Interrupted);
        } else if Instant::now() < stop {
            reader.with_ready_line(|line| checker.line(line))
        } else {
            None
        };
        let event = if let Some(checked) = ready {
            checked?
        } else {
            if stop != timer_at {
                timer.as_mut().reset(stop);
                timer_at = stop;
            }
            let next = tokio::select! {
                biased;
                () = &mut cancelled => return Err(TurnError::Interrupted),
                () = &mut timer => {
                    return if checker.has_terminal() {
                        // The runner said its last word; stdout lingering open does not change it.
                        checker.finish()
                    } else if let Some((status, _)) = exited.filter(|_| Instant::now() < deadline) {
                        // The runner is gone without a terminal event; what it left behind holding
                        // stdout open does not keep the turn going.
                        Err(TurnError::NoTerminal(status))
                    } else {
                        Err(TurnError::Timeout(limit))
                    };
                }
                // Before the exit wait: while lines are ready, the wait (a signal poll and a
                // `waitpid` each time) is not polled at all. The exit only starts the drain timer,
                // which every line pushes back anyway, so noticing it once stdout is idle ends the
                // turn at the same point.
                l = reader.next_line() => l,
                status = &mut wait, if exited.is_none() => {
                    exited = Some((status.ok(), Instant::now() + AFTER_TERMINAL_GRACE));
                    continue;
                }
            };
            let bytes = match next {
                Ok(Some(b)) => b,
                Ok(None) => return checker.finish(),
                Err(FrameError::TooLong { .. }) => return Err(TurnError::FrameTooLarge),
                Err(FrameError::Io(e)) => return Err(TurnError::Io(e)),
            };
            checker.line(&bytes)?
        };
        if let Some((_, drain_until)) = exited.as_mut() {
            *drain_until = Instant::now() + AFTER_TERMINAL_GRACE;
        }
        on_event(&event);
        if let Event::ApprovalRequest { id, prompt } = &event {
            let decision = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(TurnError::Interrupted),
                () = tokio::time::sleep_until(deadline) => return Err(TurnError::Timeout(limit)),
                d = approver.approve(id, prompt) => d,
            };
            let answer = openagents_protocol::ApprovalAnswer { r#type: "approval_answer".into(), id: id.clone(), approved: decision.approved, answer: decision.answer };
            // A runner that has stopped reading stdin only loses the answer.
            let _ = answers.send(serde_json::to_vec(&answer).unwrap_or_default()).await;
        }
    }
}

fn finish(terminal: Event) -> Result<String, TurnError> {
    match terminal {
        Event::Completed { result } => Ok(result),
        Event::Failed { message } => Err(TurnError::Failed(message)),
        Event::Text { .. } | Event::ApprovalRequest { .. } => Err(TurnError::NoTerminal(None)),
    }
}

/// Ends the runner's process group and reaps the runner. After a clean turn the runner has
/// usually exited already and only leftovers are killed; otherwise it gets SIGTERM, then
/// SIGKILL after [`KILL_GRACE`]. Then [`reap::sweep`] ends what left the group.
pub(crate) async fn end_process_group(child: &mut Child, pgid: Option<Pid>, clean: bool) -> Option<ExitStatus> {
    let exit = end_group_and_reap(child, pgid, clean).await;
    reap::sweep(pgid).await;
    exit
}

async fn end_group_and_reap(child: &mut Child, pgid: Option<Pid>, clean: bool) -> Option<ExitStatus> {
    let signal_group = |sig: Signal| {
        if let Some(p) = pgid {
            // ESRCH: the group is already gone.
            let _ = killpg(p, sig);
        }
    };
    if clean {
        if let Ok(Ok(status)) = tokio::time::timeout(KILL_GRACE, child.wait()).await {
            signal_group(Signal::SIGKILL);
            return Some(status);
        }
    } else {
        signal_group(Signal::SIGTERM);
        if let Ok(Ok(status)) = tokio::time::timeout(KILL_GRACE, child.wait()).await {
            signal_group(Signal::SIGKILL);
            return Some(status);
        }
    }
    signal_group(Signal::SIGKILL);
    let _ = child.start_kill();
    child.wait().await.ok()
}
