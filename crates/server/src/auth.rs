//! Who may call what: bearer credentials, each with an exact grant, compared in constant time.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The methods that read what happened, allowed by a grant's `events` flag (on every transport,
/// as `GET /events` is): the stream itself, and the history the store keeps of it.
pub const EVENT_READING_METHODS: &[&str] = &["subscribe", "conversations", "conversation"];

/// Exactly what a credential may do: the methods it may call, and whether it may read events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Method names it may call.
    pub methods: BTreeSet<String>,
    /// Whether it may subscribe to events.
    pub events: bool,
    /// Whether it may answer the agent's approval requests (on the WebSocket).
    pub approvals: bool,
    /// Whether it may read `GET /metrics`.
    pub metrics: bool,
}

impl Grant {
    fn of(methods: &[&str], events: bool, approvals: bool) -> Grant {
        Grant { methods: methods.iter().map(|m| (*m).to_owned()).collect(), events, approvals, metrics: false }
    }
    /// `status`, `subscribe`, `rpc.discover` and events.
    pub fn observer() -> Grant {
        Grant::of(&["status", "subscribe", "rpc.discover"], true, false)
    }
    /// An observer that may also `submit`, `interrupt`, `release` and answer approvals.
    pub fn controller() -> Grant {
        Grant::of(&["status", "subscribe", "rpc.discover", "submit", "interrupt", "release"], true, true)
    }
    /// A controller that may also `shutdown` and read `GET /metrics`.
    pub fn admin() -> Grant {
        Grant { metrics: true, ..Grant::of(&["status", "subscribe", "rpc.discover", "submit", "interrupt", "release", "shutdown"], true, true) }
    }
    /// Whether the grant includes `method`, by its methods alone (see [`Grant::permits`]).
    pub fn allows(&self, method: &str) -> bool {
        self.methods.contains(method)
    }
    /// Whether the grant lets its holder call `method`: a method that reads events
    /// ([`EVENT_READING_METHODS`]) by the `events` flag alone, every other by its methods.
    pub fn permits(&self, method: &str) -> bool {
        if EVENT_READING_METHODS.contains(&method) { self.events } else { self.allows(method) }
    }
    /// The one rule for reading events, on every transport (`GET /events`, `subscribe` on the
    /// WebSocket and stdio): the grant's `events` flag.
    ///
    /// # Errors
    ///
    /// `forbidden`, naming the credential `name`.
    pub fn may_read_events(&self, name: &str) -> Result<(), openagents_protocol::RuntimeSubmitError> {
        if self.events {
            Ok(())
        } else {
            Err(crate::agent::error(openagents_protocol::ErrorCode::Forbidden, format!("credential `{name}` may not read events (`subscribe`, `GET /events`, `conversations`, `conversation`)")))
        }
    }
    /// Whether the grant makes its holder a controller (subject to the lease).
    pub fn controls(&self) -> bool {
        self.allows("submit")
    }
    /// Whether the grant is an admin's: every method [`Grant::admin`] has. An admin may answer
    /// approvals whoever holds the lease.
    pub fn administers(&self) -> bool {
        Grant::admin().methods.is_subset(&self.methods)
    }
}

/// Who is calling: a credential's name and grant, or the trusted parent process on stdio.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The credential's name (`stdio` for the parent process).
    pub name: String,
    /// What it may do.
    pub grant: Grant,
    /// The parent process on stdio: trusted, and not subject to the lease.
    pub trusted: bool,
}

impl Caller {
    /// The parent process driving the runtime over stdio.
    pub fn stdio() -> Caller {
        Caller { name: "stdio".into(), grant: Grant::admin(), trusted: true }
    }
}

/// One bearer credential and its exact grant. Only a SHA-256 of the token is kept; the token
/// never appears in logs, errors or `Debug` output.
#[derive(Clone)]
pub struct RuntimeHttpCredential {
    /// The credential's name, shown as the lease holder and in logs.
    pub name: String,
    token_sha256: [u8; 32],
    /// What it may do.
    pub grant: Grant,
}

impl std::fmt::Debug for RuntimeHttpCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeHttpCredential").field("name", &self.name).field("grant", &self.grant).finish_non_exhaustive()
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let digest = Sha256::digest(bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(&digest);
    out
}

impl RuntimeHttpCredential {
    /// A credential for `token`.
    pub fn new(name: impl Into<String>, token: &str, grant: Grant) -> Self {
        RuntimeHttpCredential { name: name.into(), token_sha256: sha256(token.as_bytes()), grant }
    }

    /// A credential from the hex SHA-256 of its token.
    ///
    /// # Errors
    ///
    /// When `hash_hex` is not 64 hex characters.
    pub fn from_sha256_hex(name: impl Into<String>, hash_hex: &str, grant: Grant) -> Result<Self, String> {
        let bytes = hex::decode(hash_hex.trim()).map_err(|_| "token_sha256 must be 64 hex characters".to_owned())?;
        let token_sha256: [u8; 32] = bytes.try_into().map_err(|_| "token_sha256 must be 64 hex characters".to_owned())?;
        Ok(RuntimeHttpCredential { name: name.into(), token_sha256, grant })
    }

    /// Whether `token` is this credential's, in constant time.
    pub fn matches(&self, token: &str) -> bool {
        bool::from(self.token_sha256.ct_eq(&sha256(token.as_bytes())))
    }
}

/// Finds the credential for a presented token, comparing against every credential in constant
/// time so the timing says nothing about which (if any) matched.
pub fn authenticate<'a>(credentials: &'a [RuntimeHttpCredential], token: &str) -> Option<&'a RuntimeHttpCredential> {
    authenticate_index(credentials, token).map(|i| &credentials[i])
}

/// [`authenticate`], giving the matching credential's index.
pub fn authenticate_index(credentials: &[RuntimeHttpCredential], token: &str) -> Option<usize> {
    let presented = sha256(token.as_bytes());
    let mut found = None;
    for (i, c) in credentials.iter().enumerate() {
        if bool::from(c.token_sha256.ct_eq(&presented)) {
            found = Some(i);
        }
    }
    found
}

/// The shortest token read from a token file, in bytes. The tokens [`generate_token`] mints
/// are 64; anything much shorter can be guessed.
pub const MIN_TOKEN_BYTES: usize = 32;

/// Why a token file was refused. Never carries the token.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file could not be opened or read.
    #[error("cannot read the token file {}: {source}", .path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Group or others may read or write the file (as ssh does with private keys).
    #[error("the token file {} is accessible by group or others (mode {mode:03o}); make it private with `chmod 600 {}`", .path.display(), .path.display())]
    TooOpen {
        /// The file.
        path: std::path::PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The token is shorter than [`MIN_TOKEN_BYTES`] (an empty file included).
    #[error("the token in {} is {len} bytes; a token must be at least {MIN_TOKEN_BYTES} bytes (for example 32 random bytes as 64 hex characters)", .path.display())]
    TooShort {
        /// The file.
        path: std::path::PathBuf,
        /// The token's length, in bytes (surrounding whitespace trimmed).
        len: usize,
    },
}

/// Reads a bearer token from `path`: the file's text without surrounding whitespace. The file
/// must be private to its owner (no permission bits for group or others, checked on the open
/// file) and the token at least [`MIN_TOKEN_BYTES`] long.
///
/// # Errors
///
/// [`TokenFileError`], naming the file and what to do; never the token.
pub fn read_token_file(path: &Path) -> Result<String, TokenFileError> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let read = |source| TokenFileError::Read { path: path.to_owned(), source };
    let mut file = std::fs::File::open(path).map_err(read)?;
    let mode = file.metadata().map_err(read)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(TokenFileError::TooOpen { path: path.to_owned(), mode });
    }
    let mut text = String::new();
    // A token file is one short line; more than this is not a token file.
    file.by_ref().take(64 * 1024).read_to_string(&mut text).map_err(read)?;
    let token = text.trim();
    if token.len() < MIN_TOKEN_BYTES {
        return Err(TokenFileError::TooShort { path: path.to_owned(), len: token.len() });
    }
    Ok(token.to_owned())
}

/// Mints a bearer token: 32 bytes from the operating system's random source, as 64 hex
/// characters.
///
/// # Errors
///
/// When the operating system has no randomness to give.
pub fn generate_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CredentialsFile {
    #[serde(default)]
    credentials: BTreeMap<String, toml::Spanned<CredentialEntry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CredentialEntry {
    token: Option<String>,
    token_file: Option<String>,
    token_sha256: Option<String>,
    role: Option<String>,
    methods: Option<Vec<String>>,
    events: Option<bool>,
    approvals: Option<bool>,
    metrics: Option<bool>,
}

/// Loads a credentials file:
///
/// ```toml
/// [credentials.ci-bot]
/// token_sha256 = "9f86d0…"        # or token = "…", or token_file = "/path" (mode 0600)
/// role = "controller"              # observer | controller | admin
///
/// [credentials.dashboard]
/// token_file = "/etc/openagents/dashboard.token"
/// methods = ["status"]             # an exact grant instead of a role
/// events = true
/// approvals = false                # may it answer the agent's approval requests
/// metrics = true                   # may it read GET /metrics (admins may)
/// ```
///
/// # Errors
///
/// A message naming the file and line.
pub fn load_credentials(path: &Path) -> Result<Vec<RuntimeHttpCredential>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let line = |offset: usize| text[..offset.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1;
    let file: CredentialsFile = toml::from_str(&text).map_err(|e| format!("{}:{}: {}", path.display(), line(e.span().map_or(0, |s| s.start)), e.message()))?;
    let mut out = Vec::new();
    for (name, entry) in file.credentials {
        let at = format!("{}:{}: credential `{name}`", path.display(), line(entry.span().start));
        let e = entry.into_inner();
        let grant = match (e.role.as_deref(), e.methods) {
            (Some(_), Some(_)) => return Err(format!("{at}: give `role` or `methods`, not both")),
            (Some("observer"), None) => Grant::observer(),
            (Some("controller"), None) => Grant::controller(),
            (Some("admin"), None) => Grant::admin(),
            (Some(other), None) => return Err(format!("{at}: unknown role `{other}` (observer, controller, admin)")),
            (None, Some(methods)) => {
                if let Some(bad) = methods.iter().find(|m| !openagents_protocol::Method::NAMES.contains(&m.as_str())) {
                    return Err(format!("{at}: unknown method `{bad}` (known: {})", openagents_protocol::Method::NAMES.join(", ")));
                }
                Grant { methods: methods.into_iter().collect(), events: e.events.unwrap_or(false), approvals: e.approvals.unwrap_or(false), metrics: e.metrics.unwrap_or(false) }
            }
            (None, None) => return Err(format!("{at}: give a `role` or an exact `methods` list")),
        };
        let grant = Grant { events: e.events.unwrap_or(grant.events), approvals: e.approvals.unwrap_or(grant.approvals), metrics: e.metrics.unwrap_or(grant.metrics), ..grant };
        let cred = match (e.token, e.token_file, e.token_sha256) {
            (Some(t), None, None) => RuntimeHttpCredential::new(&name, t.trim(), grant),
            (None, Some(f), None) => {
                let t = read_token_file(Path::new(&f)).map_err(|err| format!("{at}: {err}"))?;
                RuntimeHttpCredential::new(&name, &t, grant)
            }
            (None, None, Some(h)) => RuntimeHttpCredential::from_sha256_hex(&name, &h, grant).map_err(|m| format!("{at}: {m}"))?,
            _ => return Err(format!("{at}: give exactly one of `token`, `token_file`, `token_sha256`")),
        };
        if out.iter().any(|c: &RuntimeHttpCredential| c.token_sha256 == cred.token_sha256) {
            return Err(format!("{at}: two credentials share a token"));
        }
        out.push(cred);
    }
    if out.is_empty() {
        return Err(format!("{}: no credentials", path.display()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_64_hex_characters_and_differ() {
        let a = generate_token().unwrap();
        let b = generate_token().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn authentication_finds_exactly_the_matching_credential() {
        let creds = vec![RuntimeHttpCredential::new("o", "tok-o", Grant::observer()), RuntimeHttpCredential::new("c", "tok-c", Grant::controller())];
        assert_eq!(authenticate(&creds, "tok-c").map(|c| c.name.as_str()), Some("c"));
        assert!(authenticate(&creds, "tok-x").is_none());
        assert!(authenticate(&creds, "").is_none());
        let hashed = RuntimeHttpCredential::from_sha256_hex("h", &hex::encode(sha256(b"secret")), Grant::admin()).unwrap();
        assert!(hashed.matches("secret") && !hashed.matches("secreT"));
        assert!(!format!("{hashed:?}").contains(&hex::encode(sha256(b"secret"))));
    }
}
