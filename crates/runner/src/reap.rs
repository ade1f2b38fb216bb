//! Nothing a runner starts outlives its turn, not even a process that left the runner's process
//! group (a double fork and `setsid`). The host process becomes a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`), so every process orphaned below it is re-parented to it instead
//! of to init; at the end of a turn [`sweep`] kills what is left of the runner's process group
//! and every such adopted process started since the runner was, with everything below it, and
//! reaps them.
//!
//! Runners are spawned through [`spawn`], which records them as live while the host owns them:
//! the sweep never touches a live runner (of this or another turn) nor what only another live
//! runner can have started, nor a child of the host process that shares its process group (one
//! it started itself by other means) unless the host declared it starts none
//! ([`own_every_child`], as the `openagents` binary does).
//!
//! A host with a launcher (the `openagents` binary, see [`crate::sandbox::set_launcher`]) starts
//! every runner under a supervisor of its own, [`supervise`] (`openagents runner-exec`), and
//! records it with [`spawn_supervised`]. The supervisor is a child subreaper too, so whatever
//! the runner leaves behind, `setsid` or not, is re-parented to the supervisor, never to the
//! host, for as long as the supervisor lives: what a runner started is known to be its own even
//! while other runners live (an ACP agent lives for a whole conversation, so there nearly always
//! are). When the runner exits the supervisor kills and reaps everything below it before it
//! exits itself; when the host dies (its parent-death signal, checked against its parent's pid)
//! it does the same first. The sweep above stays as the fallback for a supervisor that was
//! killed (by its runner, or with its process group) before it could finish.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use std::ffi::{OsStr, OsString};

use nix::errno::Errno;
use nix::sys::signal::{SigSet, Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getpgrp, getppid};
use tokio::process::{Child, Command};

/// How many times [`sweep`] looks again for processes left behind, [`SWEEP_PAUSE`] apart: a
/// process that is forking while it is being killed gets that many chances to be caught.
pub const SWEEP_ROUNDS: usize = 100;

/// The pause between two rounds of [`sweep`].
pub const SWEEP_PAUSE: Duration = Duration::from_millis(10);

/// A runner the host owns now.
#[derive(Debug, Clone, Copy)]
struct Owned {
    /// Its start time (clock ticks since boot).
    started: u64,
    /// Whether it is a supervisor ([`supervise`]) that is still running: then nothing it started
    /// can have been re-parented to the host, and it shields no adopted process.
    supervised: bool,
}

impl Owned {
    /// Whether an adopted process started at `started` may be this runner's.
    fn may_have_started(&self, started: u64) -> bool {
        !self.supervised && self.started <= started
    }
}

/// The runners the host owns now, by pid (also their process group). The sweep leaves them
/// alone.
static LIVE: Mutex<BTreeMap<i32, Owned>> = Mutex::new(BTreeMap::new());

fn live() -> std::sync::MutexGuard<'static, BTreeMap<i32, Owned>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether every child of the host that is not a live runner was left by a runner: see
/// [`own_every_child`].
static OWN_EVERY_CHILD: AtomicBool = AtomicBool::new(false);

/// Declares that this process starts no children but runners (the `openagents` binary): then
/// the sweep also takes adopted processes in the host's own process group, which a runner's
/// descendant can join (`setpgid` into the host's group, same session) to pass for one of the
/// host's own children. Without it (a library host that may start other children), those are
/// left alone.
pub fn own_every_child() {
    OWN_EVERY_CHILD.store(true, Ordering::Relaxed);
}

/// Makes the host process a child subreaper, once. Returns whether it is one.
pub fn become_subreaper() -> bool {
    static DONE: OnceLock<bool> = OnceLock::new();
    *DONE.get_or_init(|| nix::sys::prctl::set_child_subreaper(true).is_ok())
}

/// Spawns `command` (which must put the child in a process group of its own, as
/// [`crate::host::runner_command`] does) and records it as live until [`sweep`].
///
/// # Errors
///
/// The spawn's I/O error.
pub fn spawn(command: &mut Command) -> std::io::Result<Child> {
    spawn_as(command, false)
}

/// [`spawn`] for a command that starts the runner under [`supervise`] (see
/// [`supervisor_args`]): the sweep then knows that nothing the runner starts is re-parented to
/// the host while the supervisor runs.
///
/// # Errors
///
/// The spawn's I/O error.
pub fn spawn_supervised(command: &mut Command) -> std::io::Result<Child> {
    spawn_as(command, true)
}

fn spawn_as(command: &mut Command, supervised: bool) -> std::io::Result<Child> {
    become_subreaper();
    // Under the lock: a sweep running meanwhile must not see the new child before it is live.
    let mut live = live();
    let child = command.spawn()?;
    if let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) {
        live.insert(pid, Owned { started: stat(pid).map_or(0, |s| s.started), supervised });
    }
    Ok(child)
}

/// One line of `/proc/<pid>/stat`, the fields the sweep needs.
#[derive(Debug, Clone, Copy)]
struct Stat {
    pid: i32,
    state: u8,
    ppid: i32,
    pgrp: i32,
    started: u64,
}

fn stat(pid: i32) -> Option<Stat> {
    parse_stat(pid, &std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The fields of a `stat` line (a process's, or one of its threads' under `task/`).
fn parse_stat(pid: i32, text: &str) -> Option<Stat> {
    // `pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
    // stime cutime cstime priority nice threads itrealvalue starttime ...`; comm may hold
    // anything, so fields are counted after its last `)`.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        pid,
        state: *fields.first()?.as_bytes().first()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        started: fields.get(19)?.parse().ok()?,
    })
}

/// Whether a thread of `pid` other than an exited one is left: a process whose main thread has
/// called `pthread_exit` shows `Z` in its `stat` while its other threads run (and fork).
fn has_live_thread(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    tasks.flatten().any(|task| {
        let text = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        parse_stat(pid, &text).is_some_and(|t| t.state != b'Z' && t.state != b'X')
    })
}

fn all_processes() -> Vec<Stat> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok()).filter_map(stat).collect()
}

/// The processes the sweep looks at: every process below the host. A runner's descendants are
/// all below the host, since the host is a subreaper and orphans come to it, so they are found by
/// walking down from the host through each thread's `/proc/<pid>/task/<tid>/children` list,
/// reading only their `stat`, not every process on the machine (a whole scan of `/proc` was
/// most of the host's own CPU time per turn). Every process is read instead, as before, when a
/// list cannot be read (a kernel without `CONFIG_PROC_CHILDREN`, or a descendant the host may not
/// inspect, such as a set-user-ID program) or when the host's own children changed during the
/// walk: the kernel lists children by position, so one that leaves a list while it is read can
/// make a sibling after it go unlisted, and the host's children are the ones that come and go
/// outside the sweep (runners reaped by their turns, threads ending). Deeper down a process
/// missed that way has a parent the sweep kills, and is the host's, listed, next round.
fn processes(me: i32) -> Vec<Stat> {
    descendants(me).unwrap_or_else(all_processes)
}

fn descendants(me: i32) -> Option<Vec<Stat>> {
    let mut found = Vec::new();
    let mut seen = BTreeSet::new();
    let mut buf = Vec::new();
    let mut first = children(me, &mut buf)?;
    let mut stack = first.clone();
    while let Some(pid) = stack.pop() {
        if !seen.insert(pid) {
            continue;
        }
        // Gone since its parent listed it: nothing to sweep.
        let Some(s) = stat(pid) else { continue };
        found.push(s);
        // A zombie's lists are read too: a process whose main thread has exited shows `Z` while
        // its other threads run and fork.
        match children(pid, &mut buf) {
            Some(kids) => stack.extend(kids),
            // Exited meanwhile (its children are the host's now, listed next round), or not ours
            // to inspect.
            None if stat(pid).is_none_or(|now| now.state == b'Z') => {}
            None => return None,
        }
    }
    let mut again = children(me, &mut buf)?;
    first.sort_unstable();
    again.sort_unstable();
    (first == again).then_some(found)
}

/// The children of every thread of `pid`; `None` when no thread's list could be read. Each list
/// is read with one `read` of a buffer that holds it whole (`buf`, kept by the caller across
/// calls): the kernel starts every `read` of it again by position.
fn children(pid: i32, buf: &mut Vec<u8>) -> Option<Vec<i32>> {
    use std::io::Read;
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut kids = Vec::new();
    let mut read_any = false;
    if buf.is_empty() {
        buf.resize(64 * 1024, 0);
    }
    for task in tasks.flatten() {
        // A thread that ended meanwhile has no list; the others still count.
        let Ok(mut file) = std::fs::File::open(task.path().join("children")) else { continue };
        let mut len = 0;
        loop {
            if len == buf.len() {
                buf.resize(buf.len() * 2, 0);
            }
            match file.read(&mut buf[len..]) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        read_any = true;
        let text = std::str::from_utf8(&buf[..len]).unwrap_or_default();
        kids.extend(text.split_ascii_whitespace().filter_map(|s| s.parse::<i32>().ok()));
    }
    read_any.then_some(kids)
}

/// Ends what is left of the runner whose process group is `group`, once the runner itself has
/// been reaped: the rest of its process group, and every process the host adopted that only it
/// can have started (started since it was, and before every other live runner), with
/// everything below them. An adopted process two live runners could have started is left to
/// the sweep of whichever of them ends last. Adopted zombies are reaped. Returns how many
/// processes it killed.
pub async fn sweep(group: Option<Pid>) -> usize {
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let my_group = getpgrp().as_raw();
    let group = group.map(Pid::as_raw).filter(|&g| g > 1 && g != my_group);
    let started = group.and_then(|g| live().remove(&g)).map_or(0, |o| o.started);
    let mut killed = BTreeSet::new();
    for _ in 0..SWEEP_ROUNDS {
        let mut left = false;
        {
            let mut live = live();
            let procs = processes(me);
            // A runner whose owner dropped it without a sweep is gone (or its pid is another
            // process's now): it no longer shields what it may have started. Asked of the
            // process itself, not of the list above, which may have missed it.
            live.retain(|pid, owned| stat(*pid).is_some_and(|p| p.started == owned.started));
            // A supervisor that has died (killed with SIGKILL before it could clean up; it is a
            // zombie until its owner reaps it) has handed what it held to the host: from now on
            // it shields what it may have started, as any runner does.
            for (pid, owned) in live.iter_mut() {
                if owned.supervised && stat(*pid).is_none_or(|p| p.state == b'Z') {
                    owned.supervised = false;
                }
            }
            let mut below: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
            let mut by_pid: BTreeMap<i32, Stat> = BTreeMap::new();
            for p in &procs {
                below.entry(p.ppid).or_default().push(p.pid);
                by_pid.insert(p.pid, *p);
            }
            if let Some(g) = group {
                // ESRCH: the group is already gone.
                let _ = killpg(Pid::from_raw(g), Signal::SIGKILL);
            }
            for p in &procs {
                let in_group = group == Some(p.pgrp);
                let adopted = p.ppid == me && !live.contains_key(&p.pid) && (p.pgrp != my_group || OWN_EVERY_CHILD.load(Ordering::Relaxed));
                if adopted && p.state == b'Z' && !has_live_thread(p.pid) {
                    // Ours to reap, whoever started it.
                    let _ = waitpid(Pid::from_raw(p.pid), Some(WaitPidFlag::WNOHANG));
                    left = true;
                    continue;
                }
                let only_ours = adopted && p.started >= started && !live.values().any(|other| other.may_have_started(p.started));
                if !(in_group || only_ours) {
                    continue;
                }
                left = true;
                let mut stack = vec![p.pid];
                while let Some(pid) = stack.pop() {
                    // A zombie is not signalled (its parent may reap it and its pid be reused
                    // at any moment), unless it only looks like one: its main thread has exited
                    // and other threads run on.
                    let zombie = by_pid.get(&pid).is_some_and(|q| q.state == b'Z') && !has_live_thread(pid);
                    if !zombie && kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
                        killed.insert(pid);
                    }
                    stack.extend(below.get(&pid).into_iter().flatten().copied());
                }
            }
        }
        if !left {
            break;
        }
        tokio::time::sleep(SWEEP_PAUSE).await;
    }
    killed.len()
}

/// The subcommand of the launcher executable (see [`crate::sandbox::set_launcher`]) that runs
/// [`supervise`].
pub const SUPERVISOR_SUBCOMMAND: &str = "runner-exec";

/// The signal a supervisor asks for when its parent goes (`PR_SET_PDEATHSIG`). It is caught,
/// not fatal: the kernel sends it when the *thread* that started the supervisor ends, which a
/// host's thread may do while the host lives on, so the supervisor only takes it for the host's
/// end once its parent process is another ([`getppid`]).
pub const PARENT_DEATH_SIGNAL: Signal = Signal::SIGUSR1;

/// The signals a supervisor waits for instead of dying of them: its runner's end (`SIGCHLD`),
/// its parent's ([`PARENT_DEATH_SIGNAL`]), and the ones that end a process group or a terminal's
/// jobs, which are for the runner (in the same process group) to act on: the supervisor ends
/// when its runner has.
const SUPERVISOR_SIGNALS: [Signal; 6] = [Signal::SIGCHLD, PARENT_DEATH_SIGNAL, Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP, Signal::SIGQUIT];

/// The supervisor's command line after the launcher's path: [`supervise`] with `parent` (the
/// host's pid), starting `program` with `args`.
pub fn supervisor_args(parent: u32, program: &OsStr, args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec![SUPERVISOR_SUBCOMMAND.into(), "--parent".into(), parent.to_string().into(), "--".into(), program.to_owned()];
    out.extend(args);
    out
}

/// The supervisor's half (`openagents runner-exec --parent PID -- COMMAND [ARGS]...`): what a
/// runner leaves behind never outlives it, and the runner never outlives the host.
///
/// It asks for [`PARENT_DEATH_SIGNAL`] when its parent goes, and gives up (exit 126) if its
/// parent is already not `parent`; becomes a child subreaper; starts the runner as its own child
/// (same process group, environment, folder and stdio), and lets go of its own stdio so that
/// only the runner holds the host's pipes. Then it waits, and when the runner has exited, or its
/// parent is no longer `parent` (the host has died: a SIGKILL of the server included), it kills
/// everything still below it (the runner, what the runner left in its process group, and what
/// it left outside it: orphans come to the supervisor, a subreaper, `setsid` or not) and reaps
/// it. It exits with the runner's status: its exit code, or the signal that killed it (raised
/// again, for the signals that end a process without a core dump; 128 + the signal's number
/// otherwise). 127 when the runner cannot be started, 126 when it cannot be supervised.
///
/// Call it in a process of its own that has started no other thread (the launcher executable
/// does, before anything else): the signals are waited for by the calling thread.
///
/// What it cannot prevent: a runner that kills its supervisor (SIGKILL, from the same user;
/// a runner sandboxed on a kernel with Landlock ABI 6 cannot signal outside its sandbox) hands
/// what it left to the host, whose [`sweep`] takes it at the runner's end by the older rule; and
/// after a SIGKILL of the host, a supervisor that was itself stopped or killed cannot clean up.
pub fn supervise(parent: i32, command: &[OsString]) -> u8 {
    let Some((program, args)) = command.split_first() else {
        eprintln!("openagents {SUPERVISOR_SUBCOMMAND}: no command to run");
        return 127;
    };
    let mut signals = SigSet::empty();
    for s in SUPERVISOR_SIGNALS {
        signals.add(s);
    }
    let setup = signals
        .thread_block()
        .and_then(|()| nix::sys::prctl::set_pdeathsig(PARENT_DEATH_SIGNAL))
        .and_then(|()| nix::sys::prctl::set_child_subreaper(true));
    if let Err(e) = setup {
        eprintln!("openagents {SUPERVISOR_SUBCOMMAND}: cannot supervise the runner: {e}");
        return 126;
    }
    // The parent may have gone before the signal was asked for: nobody would end the runner.
    if getppid().as_raw() != parent {
        return 126;
    }
    // The runner gets an empty signal mask (the standard library resets it in the child).
    let runner = match std::process::Command::new(program).args(args).spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("openagents {SUPERVISOR_SUBCOMMAND}: cannot start {}: {e}", program.to_string_lossy());
            return 127;
        }
    };
    let runner = Pid::from_raw(i32::try_from(runner.id()).unwrap_or(i32::MAX));
    let_go_of_stdio();
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let mut status = None;
    loop {
        reap_children(runner, &mut status);
        if status.is_some() || getppid().as_raw() != parent {
            break;
        }
        // A signal that arrives after the checks above is pending (blocked), so this returns.
        if signals.wait().is_err() {
            std::thread::sleep(SWEEP_PAUSE);
        }
    }
    end_everything_below(me, runner, &mut status);
    exit_like(status)
}

/// Points the supervisor's stdin, stdout and stderr at `/dev/null`: the runner's pipes close
/// when the runner (and what it started) closes them, not when the supervisor does.
fn let_go_of_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null") {
        let _ = nix::unistd::dup2_stdin(&null);
        let _ = nix::unistd::dup2_stdout(&null);
        let _ = nix::unistd::dup2_stderr(&null);
    }
}

/// Reaps every child of the supervisor that has ended, noting the runner's status. Returns
/// whether it has children left.
fn reap_children(runner: Pid, status: &mut Option<WaitStatus>) -> bool {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => return true,
            Ok(s @ (WaitStatus::Exited(pid, _) | WaitStatus::Signaled(pid, _, _))) => {
                if pid == runner {
                    *status = Some(s);
                }
            }
            Ok(_) | Err(Errno::EINTR) => {}
            // ECHILD: nothing is left.
            Err(_) => return false,
        }
    }
}

/// Every process below `me`: by the walk down the children lists, or from a scan of every
/// process when the walk cannot be trusted.
fn subtree(me: i32) -> Vec<Stat> {
    if let Some(found) = descendants(me) {
        return found;
    }
    let all = all_processes();
    let mut below: BTreeMap<i32, Vec<Stat>> = BTreeMap::new();
    for p in all {
        below.entry(p.ppid).or_default().push(p);
    }
    let mut found = Vec::new();
    let mut stack = vec![me];
    while let Some(pid) = stack.pop() {
        for p in below.remove(&pid).unwrap_or_default() {
            stack.push(p.pid);
            found.push(p);
        }
    }
    found
}

/// Kills and reaps everything below the supervisor `me`, for at most [`SWEEP_ROUNDS`] rounds
/// [`SWEEP_PAUSE`] apart (a process that forks while it is killed leaves orphans, which come to
/// the supervisor and are killed next round).
fn end_everything_below(me: i32, runner: Pid, status: &mut Option<WaitStatus>) {
    for _ in 0..SWEEP_ROUNDS {
        for p in subtree(me) {
            // A zombie is not signalled, unless it only looks like one (see `sweep`).
            if p.state != b'Z' || has_live_thread(p.pid) {
                let _ = kill(Pid::from_raw(p.pid), Signal::SIGKILL);
            }
        }
        if !reap_children(runner, status) {
            return;
        }
        std::thread::sleep(SWEEP_PAUSE);
    }
}

/// The supervisor's exit code for the runner's `status`; for a signal that ends a process
/// without a core dump, that signal is raised instead, so the host sees the runner's own
/// status.
fn exit_like(status: Option<WaitStatus>) -> u8 {
    match status {
        Some(WaitStatus::Exited(_, code)) => u8::try_from(code).unwrap_or(1),
        Some(WaitStatus::Signaled(_, signal, _)) => {
            use Signal::{SIGALRM, SIGHUP, SIGINT, SIGKILL, SIGPIPE, SIGTERM, SIGUSR1, SIGUSR2};
            if matches!(signal, SIGKILL | SIGTERM | SIGINT | SIGHUP | SIGPIPE | SIGALRM | SIGUSR1 | SIGUSR2) {
                let mut one = SigSet::empty();
                one.add(signal);
                let _ = one.thread_unblock();
                let _ = nix::sys::signal::raise(signal);
            }
            128u8.saturating_add(u8::try_from(signal as i32).unwrap_or(0))
        }
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmdline(pid: i32) -> String {
        std::fs::read(format!("/proc/{pid}/cmdline")).map(|b| String::from_utf8_lossy(&b).replace('\0', " ")).unwrap_or_default()
    }

    /// The walk down from the host finds what a scan of every process finds below it: a child,
    /// its children, and one orphaned to the host (a subreaper) by a double fork. The shell says
    /// each pid itself, so nothing hangs on when a child gets round to `exec`.
    #[test]
    fn the_walk_from_the_host_finds_every_process_below_it() {
        assert!(become_subreaper());
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 31 & echo $!; sleep 31 & echo $!; (sleep 29 & echo $!); echo ready; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sh");
        let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut said = Vec::new();
        loop {
            let mut line = String::new();
            if std::io::BufRead::read_line(&mut out, &mut line).expect("line") == 0 || line.trim() == "ready" {
                break;
            }
            said.push(line.trim().parse::<i32>().expect("a pid"));
        }
        let me = i32::try_from(std::process::id()).expect("pid");
        let sh = i32::try_from(child.id()).expect("pid");
        // The orphan's subshell has exited (the shell waited for it), so it is the host's now.
        let walked: BTreeSet<i32> = descendants(me).expect("children lists on this kernel").iter().map(|s| s.pid).collect();
        let all: BTreeMap<i32, i32> = all_processes().iter().map(|p| (p.pid, p.ppid)).collect();
        let _ = kill(Pid::from_raw(sh), Signal::SIGKILL);
        for pid in &said {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        let _ = child.wait();
        for pid in &said {
            let _ = waitpid(Pid::from_raw(*pid), Some(WaitPidFlag::WNOHANG));
        }
        assert_eq!(said.len(), 3, "the shell said its two children and the orphan: {said:?}");
        let parents: Vec<Option<&i32>> = said.iter().map(|pid| all.get(pid)).collect();
        assert_eq!(parents, [Some(&sh), Some(&sh), Some(&me)], "the scan sees two children of the shell and one of the host");
        assert!(walked.contains(&sh), "the child itself: {walked:?}");
        for pid in &said {
            assert!(walked.contains(pid), "{pid} ({}) is below the host but the walk missed it: {walked:?}", cmdline(*pid));
        }
    }
}
