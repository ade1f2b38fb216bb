//! `--store`, `--name`, `--retain-events` and `--retain-days`, shared by `serve` and `acp`: where the runtime
//! keeps its events, turns and conversations, opened (and refused) before anything is served.
//! A PostgreSQL store (`postgres://…`) is shared by a fleet: each runtime keeps its history there
//! under its `--name`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use openagents_sdk::server::SERVER_EVENT_CHANNEL_CAPACITY;
use openagents_server::events::EventHub;
use openagents_server::store::{DEFAULT_RETAIN_DAYS, DEFAULT_RETAIN_EVENTS, MAX_RETAIN_DAYS, MemoryStore, PostgresStore, Retention, SqliteStore, Store, StoreError};

/// The store flags.
#[derive(Args, Clone, Debug)]
pub struct StoreArgs {
    /// Where events, turns and conversations are kept: `sqlite:PATH`, `memory` (nothing
    /// outlives the process), or `postgres://USER@HOST:PORT/DB` (also `postgresql://`; shared by
    /// runtimes of different `--name`s; no TLS). Default: `$OPENAGENTS_STORE` when set, else
    /// SQLite at `$XDG_STATE_HOME/openagents/NAME.db`, else `~/.local/state/openagents/NAME.db`.
    #[arg(long, env = "OPENAGENTS_STORE", value_name = "sqlite:PATH|memory|postgres://URL")]
    store: Option<String>,
    /// The runtime's name, which names its default store (`NAME.db`) and its history in a
    /// PostgreSQL store: letters, digits, `.`, `_` and `-`, at most 64 (default `default`).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// How many events the store keeps, the newest (at least 1); a resume from before them
    /// gets `gap`.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_RETAIN_EVENTS, value_parser = clap::value_parser!(u64).range(1..=i64::MAX as u64))]
    retain_events: u64,
    /// How many days the store keeps events (at least 1): older ones are pruned at start and
    /// every minute; a resume from before what is kept gets `gap`.
    #[arg(long, value_name = "D", default_value_t = DEFAULT_RETAIN_DAYS, value_parser = clap::value_parser!(u64).range(1..=MAX_RETAIN_DAYS))]
    retain_days: u64,
}

/// The name a runtime has without `--name`.
const DEFAULT_NAME: &str = "default";

/// The longest `--name`.
const NAME_MAX: usize = 64;

/// What `--store` (or its absence) asks for.
#[derive(PartialEq, Eq)]
enum Choice {
    Memory,
    /// A SQLite file; `chosen` when the operator named it (with `--store` or `--name`).
    Sqlite { path: PathBuf, chosen: bool },
    /// A PostgreSQL database, the runtime's history under `name`.
    Postgres { url: String, name: String },
}

impl std::fmt::Debug for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Choice::Memory => f.write_str("Memory"),
            Choice::Sqlite { path, chosen } => f.debug_struct("Sqlite").field("path", path).field("chosen", chosen).finish(),
            // The URL may hold a password.
            Choice::Postgres { name, .. } => f.debug_struct("Postgres").field("name", name).finish_non_exhaustive(),
        }
    }
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty() && name.len() <= NAME_MAX && !name.starts_with('.') && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok { Ok(()) } else { Err(format!("--name {name:?}: a name is 1 to {NAME_MAX} letters, digits, `.`, `_` or `-`, not starting with `.`")) }
}

/// The default store's folder: `$XDG_STATE_HOME/openagents` (an absolute `XDG_STATE_HOME`), else
/// `$HOME/.local/state/openagents`.
fn state_folder() -> Result<PathBuf, String> {
    if let Some(state) = std::env::var_os("XDG_STATE_HOME").map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Ok(state.join("openagents"));
    }
    match std::env::var_os("HOME").map(PathBuf::from).filter(|p| p.is_absolute()) {
        Some(home) => Ok(home.join(".local/state/openagents")),
        None => Err("no place for the default store: neither XDG_STATE_HOME nor HOME is set; give --store sqlite:PATH or --store memory".into()),
    }
}

fn choose(args: &StoreArgs) -> Result<Choice, String> {
    if let Some(name) = &args.name {
        check_name(name)?;
    }
    match args.store.as_deref() {
        None => {
            let name = args.name.as_deref().unwrap_or(DEFAULT_NAME);
            Ok(Choice::Sqlite { path: state_folder()?.join(format!("{name}.db")), chosen: args.name.is_some() })
        }
        Some("memory") => Ok(Choice::Memory),
        Some(s) if s.starts_with("postgres://") || s.starts_with("postgresql://") => Ok(Choice::Postgres { url: s.to_owned(), name: args.name.clone().unwrap_or_else(|| DEFAULT_NAME.to_owned()) }),
        Some(s) => match s.strip_prefix("sqlite:") {
            Some("") => Err("--store sqlite:PATH needs a path".into()),
            Some(path) => {
                let path = std::path::absolute(path).map_err(|e| format!("--store {s}: {e}"))?;
                Ok(Choice::Sqlite { path, chosen: true })
            }
            None => Err(format!("--store {s:?}: give sqlite:PATH, memory or postgres://USER@HOST:PORT/DB")),
        },
    }
}

/// The event hub on the store the flags choose, opened now: a store that cannot be used is
/// refused with a message naming its file. The default store, when another runtime holds it,
/// gives way to memory with a warning (a second editor window's `acp`, say); a store the
/// operator named is refused then.
///
/// # Errors
///
/// For a person: bad flags, or the store refused.
pub(crate) fn open(args: &StoreArgs, program: &str) -> Result<EventHub, String> {
    let store: Arc<dyn Store> = match choose(args)? {
        Choice::Memory => Arc::new(MemoryStore::new()),
        Choice::Sqlite { path, chosen } => {
            if !chosen {
                create_private_folder(path.parent().unwrap_or(Path::new("/"))).map_err(|e| format!("cannot use the store {}: {e}", path.display()))?;
            }
            openagents_sdk::agents::sandbox::protect(&path);
            match SqliteStore::open(&path) {
                Ok(store) => Arc::new(store),
                Err(StoreError::InUse { path }) if !chosen => {
                    eprintln!(
                        "openagents {program}: warning: the default store {} is in use by another runtime; this one keeps its events in memory only (give it its own --name to keep them)",
                        path.display()
                    );
                    Arc::new(MemoryStore::new())
                }
                Err(e) => return Err(e.to_string()),
            }
        }
        // Refused outright when the name is in use: a fleet's runtimes are told apart by name.
        Choice::Postgres { url, name } => Arc::new(PostgresStore::open(&url, &name).map_err(|e| e.to_string())?),
    };
    EventHub::with_retention(SERVER_EVENT_CHANNEL_CAPACITY, store, Retention::new(args.retain_events, args.retain_days)).map_err(|e| e.to_string())
}

/// The default store's folder, created private (0700) when missing.
///
/// # Errors
///
/// Why it cannot be created.
fn create_private_folder(folder: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    if folder.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(folder).map_err(|e| format!("cannot create its folder {}: {e}", folder.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(store: Option<&str>, name: Option<&str>) -> StoreArgs {
        StoreArgs { store: store.map(str::to_owned), name: name.map(str::to_owned), retain_events: DEFAULT_RETAIN_EVENTS, retain_days: DEFAULT_RETAIN_DAYS }
    }

    #[test]
    fn the_flags_choose_a_store() {
        assert_eq!(choose(&args(Some("memory"), None)), Ok(Choice::Memory));
        assert_eq!(choose(&args(Some("sqlite:/x/y.db"), None)), Ok(Choice::Sqlite { path: "/x/y.db".into(), chosen: true }));
        assert_eq!(choose(&args(Some("postgres://user:secret@db/x"), None)), Ok(Choice::Postgres { url: "postgres://user:secret@db/x".into(), name: "default".into() }));
        assert_eq!(choose(&args(Some("postgresql://db/x"), Some("alpha"))), Ok(Choice::Postgres { url: "postgresql://db/x".into(), name: "alpha".into() }));
        assert!(!format!("{:?}", choose(&args(Some("postgres://user:secret@db/x"), None))).contains("secret"), "a password is never printed");
        assert!(choose(&args(Some("mysql://x"), None)).unwrap_err().contains("sqlite:PATH, memory or postgres://"));
        assert!(choose(&args(Some("sqlite:"), None)).is_err());
        for bad in ["", "../x", ".hidden", "a/b", &"n".repeat(65)] {
            assert!(choose(&args(None, Some(bad))).is_err(), "{bad:?}");
        }
        match choose(&args(None, Some("work.1"))) {
            Ok(Choice::Sqlite { path, chosen: true }) => assert!(path.ends_with("openagents/work.1.db"), "{}", path.display()),
            other => panic!("{other:?}"),
        }
    }
}
