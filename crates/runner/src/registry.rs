//! The operator's runner registry: which runners exist, and the executable, arguments,
//! environment and time limit of each. Only the operator configures it; a request only names a
//! runner by id.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::sandbox::Sandbox;

/// The time limit of a turn when the registry does not set one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// The longest duration the registry may set (`timeout_s`, `idle_timeout_s`): one day. A turn
/// longer than that is a mistake, and a much larger number would overflow a deadline.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// How long an ACP agent's process lives without a turn when the registry does not say: long
/// enough for a person to read an answer and write the next prompt, short enough that
/// abandoned conversations do not keep agents running for the rest of the day.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// How many processes of one ACP runner may be live at once (one per conversation) when the
/// registry does not say. Each is a whole agent (often a Node.js or Python process holding a
/// model session), so a handful, not hundreds.
pub const DEFAULT_MAX_PROCESSES: usize = 4;

/// The protocol a runner speaks on its stdio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// The openagents runner contract (`"openagents.v1"`): one `Turn` line in, `Event` lines
    /// out, one process per turn.
    #[default]
    Runner,
    /// The Agent Client Protocol (`"acp"`), version 1: the host is the ACP client; the agent
    /// process and its session live across the turns of one conversation.
    Acp(AcpSettings),
}

/// How the host keeps the processes of an ACP runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcpSettings {
    /// How long a process lives without a turn (`idle_timeout_s`).
    pub idle_timeout: Duration,
    /// How many of this runner's processes may be live at once (`max_processes`); the one idle
    /// the longest is closed first.
    pub max_processes: usize,
}

impl Default for AcpSettings {
    fn default() -> Self {
        AcpSettings { idle_timeout: DEFAULT_IDLE_TIMEOUT, max_processes: DEFAULT_MAX_PROCESSES }
    }
}

/// One installed runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerSpec {
    /// The id a turn names it by.
    pub id: String,
    /// The absolute path of the executable.
    pub command: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables set for it. It inherits nothing else from the host's environment
    /// but [`crate::host::INHERITED_ENV`].
    pub env: BTreeMap<String, String>,
    /// The longest a turn may run.
    pub timeout: Duration,
    /// The sandbox it runs in (`sandbox` in its entry), if any: see [`crate::sandbox`].
    pub sandbox: Option<Sandbox>,
}

/// The registry: runners by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registry {
    /// Where it was loaded from (for messages).
    pub source: Option<PathBuf>,
    /// Runners by id, in id order.
    pub runners: BTreeMap<String, RunnerSpec>,
    /// The protocol of each runner that does not speak the runner contract (`protocol = "acp"`).
    pub protocols: BTreeMap<String, Protocol>,
    /// The runners whose turns carry the conversation's earlier turns (`history = true`; see
    /// `Turn.history`).
    pub history: BTreeSet<String>,
}

/// Why the registry could not be loaded or a runner not found.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The file could not be read.
    #[error("cannot read the runner registry {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a valid registry.
    #[error("{path}:{line}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The 1-based line of the problem.
        line: usize,
        /// What is wrong and what to do.
        message: String,
    },
    /// No registry location is known (no `$OPENAGENTS_RUNNERS`, `$XDG_CONFIG_HOME` or `$HOME`).
    #[error("no runner registry: set OPENAGENTS_RUNNERS to a runners.toml file")]
    NoLocation,
    /// The turn names a runner the registry does not have (or the runtime does not serve). What
    /// the caller sees says only that; [`RegistryError::operator_detail`] says which runners
    /// there are and where they come from, for the operator's log.
    #[error("unknown runner")]
    NotFound {
        /// The id asked for.
        id: String,
        /// The ids the registry has.
        known: Vec<String>,
        /// Where the registry came from.
        source_path: Option<PathBuf>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    runners: BTreeMap<String, toml::Spanned<Entry>>,
}

impl RegistryError {
    /// The whole story, for the operator's own log (never for a client): for an unknown runner,
    /// the id asked for, the registry's path and the ids it has.
    pub fn operator_detail(&self) -> String {
        match self {
            RegistryError::NotFound { id, known, source_path } => format!(
                "runner `{id}` is not in the registry{}; known runners: {}",
                source_path.as_ref().map(|p| format!(" ({})", p.display())).unwrap_or_default(),
                if known.is_empty() { "none".to_owned() } else { known.join(", ") }
            ),
            other => other.to_string(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    command: toml::Spanned<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    timeout_s: Option<toml::Spanned<u64>>,
    protocol: Option<toml::Spanned<String>>,
    idle_timeout_s: Option<toml::Spanned<u64>>,
    max_processes: Option<toml::Spanned<u64>>,
    history: Option<toml::Spanned<bool>>,
    sandbox: Option<toml::Spanned<SandboxEntry>>,
}

/// `sandbox = true`, or `sandbox = { read = [...], write = [...] }`.
#[derive(Deserialize)]
#[serde(untagged)]
enum SandboxEntry {
    On(bool),
    Paths(SandboxPaths),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SandboxPaths {
    #[serde(default)]
    read: Vec<String>,
    #[serde(default)]
    write: Vec<String>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

impl Registry {
    /// Where the registry is: `$OPENAGENTS_RUNNERS`, else `$XDG_CONFIG_HOME/openagents/runners.toml`,
    /// else `~/.config/openagents/runners.toml`.
    ///
    /// # Errors
    ///
    /// [`RegistryError::NoLocation`] when none of those variables is set.
    pub fn default_path() -> Result<PathBuf, RegistryError> {
        if let Some(p) = std::env::var_os("OPENAGENTS_RUNNERS").filter(|p| !p.is_empty()) {
            return Ok(PathBuf::from(p));
        }
        if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|p| !p.is_empty()) {
            return Ok(PathBuf::from(x).join("openagents/runners.toml"));
        }
        if let Some(h) = std::env::var_os("HOME").filter(|p| !p.is_empty()) {
            return Ok(PathBuf::from(h).join(".config/openagents/runners.toml"));
        }
        Err(RegistryError::NoLocation)
    }

    /// Loads the registry from its default location; a missing file is an empty registry.
    ///
    /// # Errors
    ///
    /// As [`Registry::load`].
    pub fn load_default() -> Result<Registry, RegistryError> {
        let path = Registry::default_path()?;
        if !path.exists() {
            return Ok(Registry { source: Some(path), ..Registry::default() });
        }
        Registry::load(&path)
    }

    /// Loads the registry file at `path`.
    ///
    /// # Errors
    ///
    /// [`RegistryError`] naming the file and line: unreadable, malformed TOML, an unknown key, a
    /// missing or relative `command`, a zero timeout, an unknown `protocol`, ACP settings
    /// (`idle_timeout_s`, `max_processes`) on a runner that does not speak ACP, or `history` on
    /// one that does.
    pub fn load(path: &Path) -> Result<Registry, RegistryError> {
        let text = std::fs::read_to_string(path).map_err(|source| RegistryError::Read { path: path.to_owned(), source })?;
        Registry::parse(&text, Some(path))
    }

    /// Parses registry text; `path` is used in messages.
    ///
    /// # Errors
    ///
    /// As [`Registry::load`].
    pub fn parse(text: &str, path: Option<&Path>) -> Result<Registry, RegistryError> {
        let shown = path.map(Path::to_owned).unwrap_or_else(|| PathBuf::from("<registry>"));
        let invalid = |offset: usize, message: String| RegistryError::Invalid { path: shown.clone(), line: line_of(text, offset), message };
        let file: File = toml::from_str(text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            invalid(offset, e.message().to_owned())
        })?;
        let mut runners = BTreeMap::new();
        let mut protocols = BTreeMap::new();
        let mut history = BTreeSet::new();
        for (id, entry) in file.runners {
            let span = entry.span();
            let entry = entry.into_inner();
            if openagents_protocol::validate_document("Id", serde_json::to_string(&id).unwrap_or_default().as_bytes()) != Some(Ok(())) {
                return Err(invalid(span.start, format!("runner id `{id}` must be 1 to 128 characters of A-Z a-z 0-9 . _ : - starting with a letter or digit")));
            }
            let command = PathBuf::from(entry.command.get_ref());
            if !command.is_absolute() {
                return Err(invalid(entry.command.span().start, format!("runner `{id}`: command `{}` must be an absolute path", command.display())));
            }
            let timeout = match entry.timeout_s {
                Some(t) if *t.get_ref() == 0 => return Err(invalid(t.span().start, format!("runner `{id}`: timeout_s must be at least 1"))),
                Some(t) if *t.get_ref() > MAX_TIMEOUT.as_secs() => {
                    return Err(invalid(t.span().start, format!("runner `{id}`: timeout_s must be at most {} (one day), is {}", MAX_TIMEOUT.as_secs(), t.get_ref())));
                }
                Some(t) => Duration::from_secs(*t.get_ref()),
                None => DEFAULT_TIMEOUT,
            };
            let acp = match entry.protocol.as_ref().map(|p| (p.get_ref().as_str(), p.span().start)) {
                None | Some(("openagents.v1", _)) => false,
                Some(("acp", _)) => true,
                Some((other, at)) => {
                    return Err(invalid(at, format!("runner `{id}`: protocol `{other}` is not known; use \"openagents.v1\" (the runner contract, the default) or \"acp\" (the Agent Client Protocol)")));
                }
            };
            let mut settings = AcpSettings::default();
            if let Some(t) = entry.idle_timeout_s {
                if !acp {
                    return Err(invalid(t.span().start, format!("runner `{id}`: idle_timeout_s applies only to runners with protocol = \"acp\"")));
                }
                if *t.get_ref() == 0 {
                    return Err(invalid(t.span().start, format!("runner `{id}`: idle_timeout_s must be at least 1")));
                }
                if *t.get_ref() > MAX_TIMEOUT.as_secs() {
                    return Err(invalid(t.span().start, format!("runner `{id}`: idle_timeout_s must be at most {} (one day), is {}", MAX_TIMEOUT.as_secs(), t.get_ref())));
                }
                settings.idle_timeout = Duration::from_secs(*t.get_ref());
            }
            if let Some(m) = entry.max_processes {
                if !acp {
                    return Err(invalid(m.span().start, format!("runner `{id}`: max_processes applies only to runners with protocol = \"acp\"")));
                }
                if *m.get_ref() == 0 || *m.get_ref() > 1024 {
                    return Err(invalid(m.span().start, format!("runner `{id}`: max_processes must be 1 to 1024")));
                }
                settings.max_processes = *m.get_ref() as usize;
            }
            if let Some(h) = entry.history {
                if acp {
                    return Err(invalid(h.span().start, format!("runner `{id}`: history applies only to runners with protocol = \"openagents.v1\" (an ACP agent keeps its own session)")));
                }
                if *h.get_ref() {
                    history.insert(id.clone());
                }
            }
            if acp {
                protocols.insert(id.clone(), Protocol::Acp(settings));
            }
            let sandbox = match entry.sandbox {
                None => None,
                Some(sb) => {
                    let at = sb.span().start;
                    match sb.into_inner() {
                        SandboxEntry::On(false) => None,
                        SandboxEntry::On(true) => Some(Sandbox::default()),
                        SandboxEntry::Paths(paths) => {
                            if let Some(bad) = paths.read.iter().chain(&paths.write).find(|p| !Path::new(p).is_absolute()) {
                                return Err(invalid(at, format!("runner `{id}`: sandbox path `{bad}` must be an absolute path")));
                            }
                            Some(Sandbox { read: paths.read.into_iter().map(PathBuf::from).collect(), write: paths.write.into_iter().map(PathBuf::from).collect() })
                        }
                    }
                }
            };
            runners.insert(id.clone(), RunnerSpec { id, command, args: entry.args, env: entry.env, timeout, sandbox });
        }
        Ok(Registry { source: path.map(Path::to_owned), runners, protocols, history })
    }

    /// The protocol the runner with this id speaks (the runner contract unless its entry says
    /// `protocol = "acp"`).
    pub fn protocol(&self, id: &str) -> Protocol {
        self.protocols.get(id).copied().unwrap_or_default()
    }

    /// Whether the runner with this id asked for the conversation's earlier turns
    /// (`history = true` in its entry).
    pub fn wants_history(&self, id: &str) -> bool {
        self.history.contains(id)
    }

    /// The same registry holding only the runners `ids` names (the ones a runtime serves); the
    /// others cannot be found in it.
    ///
    /// # Errors
    ///
    /// [`RegistryError::NotFound`] for the first id the registry does not have.
    pub fn restricted_to(&self, ids: &[String]) -> Result<Registry, RegistryError> {
        for id in ids {
            self.get(id)?;
        }
        let mut only = self.clone();
        only.runners.retain(|id, _| ids.contains(id));
        Ok(only)
    }

    /// The runner with this id.
    ///
    /// # Errors
    ///
    /// [`RegistryError::NotFound`], which says only "unknown runner" (the known ids and the
    /// registry's path are in [`RegistryError::operator_detail`]).
    pub fn get(&self, id: &str) -> Result<&RunnerSpec, RegistryError> {
        self.runners.get(id).ok_or_else(|| RegistryError::NotFound {
            id: id.to_owned(),
            known: self.runners.keys().cloned().collect(),
            source_path: self.source.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<usize, &str>) {
        match (Registry::parse(text, Some(Path::new("runners.toml"))), expected) {
            (Ok(r), Ok(n)) => assert_eq!(r.runners.len(), n, "{text}"),
            (Err(e), Err(needle)) => assert!(e.to_string().contains(needle), "{text}: {e}"),
            (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn registry_files() {
        check("", Ok(0));
        check("[runners.echo]\ncommand = \"/bin/echo\"\n", Ok(1));
        check("[runners.echo]\ncommand = \"/bin/echo\"\nargs = [\"-n\"]\nenv = { A = \"b\" }\ntimeout_s = 5\n", Ok(1));
        check("[runners.echo]\ncommand = \"bin/echo\"\n", Err("runners.toml:2: runner `echo`: command `bin/echo` must be an absolute path"));
        check("[runners.echo]\nargs = []\n", Err("runners.toml:1: missing field `command`"));
        check("[runners.echo]\ncommand = \"/bin/echo\"\nshell = true\n", Err("runners.toml:3: unknown field `shell`"));
        check("[runners.echo]\ncommand = \"/bin/echo\"\ntimeout_s = 0\n", Err("runners.toml:3: runner `echo`: timeout_s must be at least 1"));
        check("[runners.echo]\ncommand = \"/bin/echo\"\ntimeout_s = 86400\n", Ok(1));
        check("[runners.echo]\ncommand = \"/bin/echo\"\ntimeout_s = 86401\n", Err("runners.toml:3: runner `echo`: timeout_s must be at most 86400 (one day), is 86401"));
        check("[runners.echo]\ncommand = \"/bin/echo\"\ntimeout_s = 9223372036854775807\n", Err("runners.toml:3: runner `echo`: timeout_s must be at most 86400"));
        check("[runners.echo\n", Err("runners.toml:1:"));
        check("[server]\nenabled = true\n", Err("unknown field `server`"));
        check("[runners.\"../x\"]\ncommand = \"/bin/echo\"\n", Err("runner id `../x` must be"));
        check("[runners.s]\ncommand = \"/bin/s\"\nsandbox = true\n", Ok(1));
        check("[runners.s]\ncommand = \"/bin/s\"\nsandbox = { read = [\"/opt/m\"], write = [\"/var/cache/s\"] }\n", Ok(1));
        check("[runners.s]\ncommand = \"/bin/s\"\nsandbox = { read = [\"opt\"] }\n", Err("runners.toml:3: runner `s`: sandbox path `opt` must be an absolute path"));
        check("[runners.s]\ncommand = \"/bin/s\"\nsandbox = { exec = [\"/x\"] }\n", Err("runners.toml:3:"));
        check("[runners.g]\ncommand = \"/bin/g\"\nprotocol = \"acp\"\nidle_timeout_s = 5\nmax_processes = 2\n", Ok(1));
        check("[runners.g]\ncommand = \"/bin/g\"\nprotocol = \"openagents.v1\"\n", Ok(1));
        check("[runners.g]\ncommand = \"/bin/g\"\nprotocol = \"mcp\"\n", Err("runners.toml:3: runner `g`: protocol `mcp` is not known; use \"openagents.v1\""));
        check("[runners.g]\ncommand = \"/bin/g\"\nprotocol = 1\n", Err("runners.toml:3:"));
        check("[runners.g]\ncommand = \"/bin/g\"\nprotocol = \"acp\"\nidle_timeout_s = 0\n", Err("runners.toml:4: runner `g`: idle_timeout_s must be at least 1"));
        check("[runners.g]\ncommand = \"/bin/g\"\nidle_timeout_s = 5\n", Err("runners.toml:3: runner `g`: idle_timeout_s applies only to runners with protocol = \"acp\""));
        check("[runners.g]\ncommand = \"/bin/g\"\nprotocol = \"acp\"\nmax_processes = 0\n", Err("runners.toml:4: runner `g`: max_processes must be 1 to 1024"));
        check("[runners.g]\ncommand = \"/bin/g\"\nmax_processes = 2\n", Err("runners.toml:3: runner `g`: max_processes applies only"));
        check("[runners.h]\ncommand = \"/bin/h\"\nhistory = true\n", Ok(1));
        check("[runners.h]\ncommand = \"/bin/h\"\nhistory = \"yes\"\n", Err("runners.toml:3:"));
        check("[runners.g]\ncommand = \"/bin/g\"\nprotocol = \"acp\"\nhistory = true\n", Err("runners.toml:4: runner `g`: history applies only to runners with protocol = \"openagents.v1\""));
    }

    #[test]
    fn only_a_runner_that_asks_for_history_gets_it() {
        let r = Registry::parse("[runners.a]\ncommand = \"/x\"\n[runners.b]\ncommand = \"/y\"\nhistory = true\n[runners.c]\ncommand = \"/z\"\nhistory = false\n", None).unwrap();
        assert_eq!((r.wants_history("a"), r.wants_history("b"), r.wants_history("c"), r.wants_history("d")), (false, true, false, false));
        assert!(r.restricted_to(&["b".to_owned()]).unwrap().wants_history("b"));
    }

    #[test]
    fn protocols_default_to_the_runner_contract() {
        let r = Registry::parse("[runners.a]\ncommand = \"/x\"\n[runners.g]\ncommand = \"/y\"\nprotocol = \"acp\"\nidle_timeout_s = 7\n", None).unwrap();
        assert_eq!(r.protocol("a"), Protocol::Runner);
        assert_eq!(r.protocol("g"), Protocol::Acp(AcpSettings { idle_timeout: Duration::from_secs(7), max_processes: DEFAULT_MAX_PROCESSES }));
    }

    #[test]
    fn a_sandbox_is_off_unless_the_entry_asks_for_it() {
        let r = Registry::parse("[runners.a]\ncommand = \"/x\"\n[runners.b]\ncommand = \"/y\"\nsandbox = true\n[runners.c]\ncommand = \"/z\"\nsandbox = { read = [\"/m\"], write = [\"/w\"] }\n[runners.d]\ncommand = \"/z\"\nsandbox = false\n", None).unwrap();
        let sandbox = |id: &str| r.get(id).unwrap().sandbox.clone();
        assert_eq!(sandbox("a"), None);
        assert_eq!(sandbox("b"), Some(Sandbox::default()));
        assert_eq!(sandbox("c"), Some(Sandbox { read: vec![PathBuf::from("/m")], write: vec![PathBuf::from("/w")] }));
        assert_eq!(sandbox("d"), None);
    }

    #[test]
    fn unknown_runner_says_only_that_and_the_operator_log_lists_the_known_ones() {
        let r = Registry::parse("[runners.a]\ncommand = \"/x\"\n[runners.b]\ncommand = \"/y\"\n", Some(Path::new("/etc/runners.toml"))).unwrap();
        let e = r.get("c").unwrap_err();
        assert_eq!(e.to_string(), "unknown runner");
        assert_eq!(e.operator_detail(), "runner `c` is not in the registry (/etc/runners.toml); known runners: a, b");
        let only = r.restricted_to(&["b".to_owned()]).unwrap();
        assert!(only.get("b").is_ok());
        assert_eq!(only.get("a").unwrap_err().operator_detail(), "runner `a` is not in the registry (/etc/runners.toml); known runners: b");
        assert_eq!(r.restricted_to(&["b".to_owned(), "z".to_owned()]).unwrap_err().to_string(), "unknown runner");
    }
}
