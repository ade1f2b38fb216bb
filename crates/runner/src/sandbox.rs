//! The opt-in sandbox of a registry entry (`sandbox = true`, or
//! `sandbox = { read = [...], write = [...] }`): the runner starts under a Landlock ruleset
//! that lets it read and execute only the system folders ([`SYSTEM_READ`]), its own command's
//! folder and the entry's `read` list, and write only in the turn's `cwd` and the entry's
//! `write` list. Everything else — the operator's configuration, the runner registry, token and
//! credentials files, the home folder, the temp folder — cannot be opened at all. Of `/proc` it
//! sees only the system-wide files in [`PROC_READ`] and its own `/proc/<pid>`: not the server's
//! (`/proc/<server>/environ` would show the server's environment; Landlock's own ptrace rule
//! was measured not to stop that read). From Landlock ABI 6 on it also cannot signal processes
//! outside the sandbox.
//!
//! Landlock applies to the process that asks for it and everything it starts, and it must be
//! asked for between `fork` and `exec`, which safe Rust cannot do in the host. So the host
//! starts a launcher — its own executable, registered with [`set_launcher`] (the `openagents`
//! binary's hidden `sandbox-exec` subcommand, which calls [`exec`]) — that restricts itself and
//! then executes the runner in place (same pid, same process group). The sandbox fails closed:
//! without a launcher, or on a kernel without Landlock, a sandboxed runner does not start.
//! Every runner of such a host, sandboxed or not, runs under its supervisor
//! ([`crate::reap::supervise`], the launcher's `runner-exec`), which starts the sandbox launcher
//! for a sandboxed one; the supervisor stays outside the sandbox (it must see and end what the
//! runner leaves behind), and from Landlock ABI 6 on the runner cannot signal it.
//!
//! The turn's `cwd` comes from the caller, so it could widen the sandbox: a `cwd` of `/`, or of
//! the folder holding the operator's configuration, would open it all. The server registers its
//! own files with [`protect`]; a sandboxed runner whose `cwd` (or `read`/`write` entry) is one of
//! them or a folder above one is not started ([`Sandbox::reaches_protected`]).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use landlock::{ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules};

/// The folders every sandboxed runner may read and execute from: programs, libraries, system
/// configuration, the kernel's view of devices. Not `/home`, `/root`, `/tmp`, `/var` or
/// `/run`, where an operator's configuration, tokens and runtime files live, nor `/proc` as a
/// whole (see [`PROC_READ`]).
pub const SYSTEM_READ: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/sys", "/dev"];

/// What a sandboxed runner may read of `/proc`, besides its own `/proc/<pid>` (`/proc/self` as
/// the launcher resolves it; the runner keeps the launcher's pid): system-wide figures, never
/// another process's files.
pub const PROC_READ: &[&str] = &["/proc/self", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/loadavg", "/proc/uptime", "/proc/version", "/proc/filesystems", "/proc/mounts", "/proc/sys"];

/// Device files a sandboxed runner may also write (`/dev/null` and friends, its terminal).
pub const DEVICE_WRITE: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts"];

/// The subcommand of the launcher executable that runs [`exec`].
pub const LAUNCHER_SUBCOMMAND: &str = "sandbox-exec";

/// The Landlock ABI the ruleset is written for; older kernels enforce what they can of it.
const ABI_FS: ABI = ABI::V5;

/// What a sandboxed runner may reach beyond [`SYSTEM_READ`], its command's folder and the
/// turn's `cwd`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sandbox {
    /// Absolute paths it may also read (and execute from).
    pub read: Vec<PathBuf>,
    /// Absolute paths it may also write.
    pub write: Vec<PathBuf>,
}

/// Why the sandbox could not be entered.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel has no Landlock (or it is turned off).
    #[error("Landlock is not available on this kernel, so the runner's sandbox cannot be enforced; the runner was not started")]
    Unavailable,
    /// Landlock refused the ruleset.
    #[error("cannot set up the runner's sandbox: {0}")]
    Landlock(#[from] landlock::RulesetError),
    /// The runner could not be executed inside the sandbox.
    #[error("cannot start the runner inside its sandbox: {0}")]
    Exec(#[source] std::io::Error),
    /// No command was given.
    #[error("no command to run inside the sandbox")]
    NoCommand,
}

static LAUNCHER: OnceLock<PathBuf> = OnceLock::new();

/// The server's own files (configuration, registry, token and credentials files), as given and
/// canonical.
static PROTECTED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Registers one of the server's own files: no sandboxed runner may be let near it.
pub fn protect(path: &Path) {
    let mut protected = PROTECTED.lock().unwrap_or_else(|p| p.into_inner());
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    for p in [path.canonicalize().ok(), Some(absolute)].into_iter().flatten() {
        if !protected.contains(&p) {
            protected.push(p);
        }
    }
}

/// Registers the executable that starts sandboxed runners: it must run [`exec`] when called as
/// `<launcher> sandbox-exec [--read PATH]... [--write PATH]... -- COMMAND [ARGS]...`. Returns
/// false when one was registered already.
pub fn set_launcher(path: PathBuf) -> bool {
    LAUNCHER.set(path).is_ok()
}

/// The registered launcher.
pub fn launcher() -> Option<&'static Path> {
    LAUNCHER.get().map(PathBuf::as_path)
}

/// Whether this kernel enforces Landlock (a ruleset can be created).
pub fn available() -> bool {
    Ruleset::default().set_compatibility(CompatLevel::HardRequirement).handle_access(AccessFs::from_all(ABI::V1)).and_then(|r| r.create()).is_ok()
}

impl Sandbox {
    /// The first path this sandbox would open in `cwd` (the `cwd` itself, or a `read` or
    /// `write` entry) that is a protected file or a folder above one, with that file.
    pub fn reaches_protected(&self, cwd: &str) -> Option<(PathBuf, PathBuf)> {
        let protected = PROTECTED.lock().unwrap_or_else(|p| p.into_inner());
        let cwd = PathBuf::from(cwd);
        for allowed in std::iter::once(&cwd).chain(&self.read).chain(&self.write) {
            let forms = [Some(allowed.clone()), allowed.canonicalize().ok()];
            for form in forms.iter().flatten() {
                if let Some(file) = protected.iter().find(|p| p.starts_with(form)) {
                    return Some((allowed.clone(), file.clone()));
                }
            }
        }
        None
    }

    /// The launcher's command line for `command args` under this sandbox in `cwd` (everything
    /// after the launcher's path).
    pub fn launcher_args(&self, command: &Path, args: &[String], cwd: &str) -> Vec<OsString> {
        let mut out: Vec<OsString> = vec![LAUNCHER_SUBCOMMAND.into()];
        let own_folder = command.parent().map(Path::to_owned);
        for p in own_folder.iter().chain(&self.read) {
            out.extend(["--read".into(), p.clone().into_os_string()]);
        }
        for p in std::iter::once(&PathBuf::from(cwd)).chain(&self.write) {
            out.extend(["--write".into(), p.clone().into_os_string()]);
        }
        out.push("--".into());
        out.push(command.as_os_str().to_owned());
        out.extend(args.iter().map(OsString::from));
        out
    }
}

/// The launcher's half: restricts this process to `read` (read and execute, on top of
/// [`SYSTEM_READ`]) and `write` (everything), then executes `command` in its place. Call it from
/// a process that has started no threads that must stay unrestricted. Returns only on failure.
pub fn exec(read: &[PathBuf], write: &[PathBuf], command: &[OsString]) -> SandboxError {
    let Some((program, args)) = command.split_first() else { return SandboxError::NoCommand };
    match restrict(read, write) {
        Ok(RulesetStatus::NotEnforced) => return SandboxError::Unavailable,
        Ok(_) => {}
        Err(e) => return e,
    }
    SandboxError::Exec(std::process::Command::new(program).args(args).exec())
}

fn restrict(read: &[PathBuf], write: &[PathBuf]) -> Result<RulesetStatus, SandboxError> {
    let read_access = AccessFs::from_read(ABI_FS);
    let device_access = read_access | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    let readable = SYSTEM_READ.iter().chain(PROC_READ).map(PathBuf::from).chain(read.iter().cloned());
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI_FS))?
        // Signals to processes outside the sandbox (the server) are refused where the kernel
        // can (Landlock ABI 6); older kernels drop this, the file rules still hold.
        .scope(Scope::from_all(ABI::V6))?
        .create()?
        .add_rules(path_beneath_rules(readable, read_access))?
        .add_rules(path_beneath_rules(DEVICE_WRITE, device_access))?
        .add_rules(path_beneath_rules(write, AccessFs::from_all(ABI_FS)))?
        .restrict_self()?;
    Ok(status.ruleset)
}
