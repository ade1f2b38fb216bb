//! Configuration: the operator's own file (trusted) and a project's `.openagents/config.toml`
//! (untrusted: it may never enable the server nor define runners).

use std::path::{Path, PathBuf};

/// The operator's `[capabilities.server]` settings.
#[derive(Debug, Default, Clone)]
pub struct ServerSettings {
    /// Whether the operator enabled the server.
    pub enabled: bool,
    /// A fixed bind address.
    pub bind: Option<String>,
    /// A fixed token.
    pub token: Option<String>,
    /// A file holding the token.
    pub token_file: Option<PathBuf>,
    /// The runners `serve` serves when no `--runner` is given (the first is the default).
    pub runners: Vec<String>,
    /// `web = false` turns off the web page `serve --http` serves on `GET /` (on when unset).
    pub web: Option<bool>,
    /// `allowed_origins = ["https://app.example"]`: browser origins allowed to call the
    /// runtime across origins (CORS) and to open its WebSocket.
    pub allowed_origins: Vec<String>,
    /// `allowed_hosts = ["agents.internal"]`: host names (no scheme, no path; a port is
    /// ignored) the runtime answers to besides its bound address, any IP address and, on
    /// loopback, `localhost`; the web page and the WebSocket refuse any other `Host` (421).
    pub allowed_hosts: Vec<String>,
}

/// Tables a project-level file may never set: they would let a repository switch on a listener
/// or install a runner.
pub const PROJECT_FORBIDDEN_TABLES: &[&str] = &["capabilities.server", "runners"];

/// Where the operator's configuration is: `$OPENAGENTS_CONFIG`, else
/// `$XDG_CONFIG_HOME/openagents/config.toml`, else `~/.config/openagents/config.toml`.
pub fn operator_config_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("OPENAGENTS_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(x).join("openagents/config.toml"));
    }
    std::env::var_os("HOME").filter(|p| !p.is_empty()).map(|h| PathBuf::from(h).join(".config/openagents/config.toml"))
}

/// Reads the operator's server settings (a missing file means the server is off).
///
/// # Errors
///
/// A message naming the file when it exists but is not valid.
pub fn server_settings(path: &Path) -> Result<ServerSettings, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ServerSettings::default()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let table: toml::Table = toml::from_str(&text).map_err(|e| format!("{}: {}", path.display(), e.message()))?;
    let Some(server) = table.get("capabilities").and_then(|c| c.get("server")) else { return Ok(ServerSettings::default()) };
    let Some(server) = server.as_table() else { return Err(format!("{}: [capabilities.server] must be a table", path.display())) };
    let mut s = ServerSettings::default();
    for (k, v) in server {
        match (k.as_str(), v) {
            ("enabled", toml::Value::Boolean(b)) => s.enabled = *b,
            ("bind", toml::Value::String(b)) => s.bind = Some(b.clone()),
            ("token", toml::Value::String(t)) => s.token = Some(t.clone()),
            ("token_file", toml::Value::String(f)) => s.token_file = Some(PathBuf::from(f)),
            ("runners", toml::Value::Array(ids)) if ids.iter().all(toml::Value::is_str) => s.runners = ids.iter().filter_map(toml::Value::as_str).map(str::to_owned).collect(),
            ("web", toml::Value::Boolean(b)) => s.web = Some(*b),
            ("allowed_origins", toml::Value::Array(origins)) if origins.iter().all(toml::Value::is_str) => {
                for o in origins.iter().filter_map(toml::Value::as_str) {
                    let valid = (o.starts_with("http://") || o.starts_with("https://")) && !o.trim_end_matches('/').ends_with("://") && !o[o.find("://").map_or(0, |i| i + 3)..].contains('/');
                    if !valid {
                        return Err(format!("{}: [capabilities.server] allowed_origins: `{o}` is not an origin (`https://host[:port]`, no path)", path.display()));
                    }
                    s.allowed_origins.push(o.to_owned());
                }
            }
            ("allowed_hosts", toml::Value::Array(hosts)) if hosts.iter().all(toml::Value::is_str) => {
                for h in hosts.iter().filter_map(toml::Value::as_str) {
                    let valid = !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:[]_".contains(&b));
                    if !valid {
                        return Err(format!("{}: [capabilities.server] allowed_hosts: `{h}` is not a host name (`agents.internal`, no scheme, no path)", path.display()));
                    }
                    s.allowed_hosts.push(h.to_owned());
                }
            }
            _ => return Err(format!("{}: [capabilities.server] `{k}` is not a setting (enabled, bind, token, token_file, runners, web, allowed_origins, allowed_hosts) or has the wrong type", path.display())),
        }
    }
    Ok(s)
}

/// Checks the project-level files in `folders`, warning (on stderr) about every table they may
/// not set; those tables are dropped. Returns the warnings.
pub fn check_project_files(folders: &[&Path]) -> Vec<String> {
    let mut warnings = Vec::new();
    let mut seen = Vec::new();
    for folder in folders {
        let file = folder.join(".openagents/config.toml");
        let canonical = file.canonicalize().unwrap_or_else(|_| file.clone());
        if seen.contains(&canonical) || !file.is_file() {
            continue;
        }
        seen.push(canonical);
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        let Ok(table) = toml::from_str::<toml::Table>(&text) else {
            warnings.push(format!("ignoring {}: not valid TOML", file.display()));
            continue;
        };
        for forbidden in PROJECT_FORBIDDEN_TABLES {
            let mut node = Some(&table);
            for part in forbidden.split('.') {
                node = node.and_then(|t| t.get(part)).and_then(toml::Value::as_table);
            }
            if node.is_some() {
                let why = if *forbidden == "runners" { "define runners; only the operator's registry can" } else { "enable the server; only the operator's own configuration can" };
                warnings.push(format!("ignoring [{forbidden}] in {}: a project configuration cannot {why}", file.display()));
            }
        }
    }
    for w in &warnings {
        eprintln!("openagents: warning: {w}");
    }
    warnings
}
