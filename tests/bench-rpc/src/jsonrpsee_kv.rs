//! The comparison server: the kv example's `get`, `put` and `delete` written the way a jsonrpsee
//! user writes them — serde types by hand, the schema's checks by hand, an `RpcModule` over the
//! same kind of map — served by `jsonrpsee-server` over HTTP.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;

use jsonrpsee_server::types::ErrorObjectOwned;
use jsonrpsee_server::{RpcModule, Server, ServerConfig, ServerHandle};
use serde::{Deserialize, Serialize};

/// The longest key, in characters (the schema's `MAX_KEY_LENGTH`).
const MAX_KEY_LENGTH: usize = 256;
/// The longest text value, in characters (the schema's `maxLength` on `text`).
const MAX_TEXT_LENGTH: usize = 4096;
/// The schema's error codes (`x-enum`'s `rpc_code`).
const NOT_FOUND: i32 = -32040;
const VERSION_CONFLICT: i32 = -32041;
const INVALID_PARAMS: i32 = -32602;

/// A stored value, tagged by `kind`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum Value {
    Text { text: String },
    Number { number: f64 },
    Flag { flag: bool },
}

/// A key, its value and its version.
#[derive(Debug, Clone, Serialize)]
struct Entry {
    key: String,
    value: Value,
    version: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyParams {
    key: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PutParams {
    key: String,
    value: Value,
    if_version: Option<i64>,
}

#[derive(Clone, Serialize)]
struct DeleteResult {
    deleted: bool,
}

type Entries = Mutex<BTreeMap<String, Entry>>;

fn invalid(message: String) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(INVALID_PARAMS, message, None::<()>)
}

fn check_key(key: &str) -> Result<(), ErrorObjectOwned> {
    let ok = !key.is_empty() && key.len() <= MAX_KEY_LENGTH && key.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"/_.-".contains(&b));
    if ok { Ok(()) } else { Err(invalid(format!("`key` must match ^[a-z0-9/_.-]+$ with at most {MAX_KEY_LENGTH} characters"))) }
}

fn error(code: i32, name: &str, message: String) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(code, message, Some(serde_json::json!({ "code": name })))
}

fn lock(entries: &Entries) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
    entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The module: `get`, `put` and `delete` over one map.
fn module() -> Result<RpcModule<Entries>, String> {
    let mut m = RpcModule::new(Entries::default());
    m.register_method("get", |params, entries, _| {
        let p: KeyParams = params.parse()?;
        check_key(&p.key)?;
        lock(entries).get(&p.key).cloned().ok_or_else(|| error(NOT_FOUND, "not_found", format!("no entry has the key `{}`", p.key)))
    })
    .map_err(|e| e.to_string())?;
    m.register_method("put", |params, entries, _| {
        let p: PutParams = params.parse()?;
        check_key(&p.key)?;
        if let Value::Text { text } = &p.value
            && text.chars().count() > MAX_TEXT_LENGTH
        {
            return Err(invalid(format!("`value.text` is longer than {MAX_TEXT_LENGTH} characters")));
        }
        if p.if_version.is_some_and(|v| v < 0) {
            return Err(invalid("`if_version` must be at least 0".into()));
        }
        let mut entries = lock(entries);
        let current = entries.get(&p.key).map_or(0, |e| e.version);
        if let Some(expected) = p.if_version
            && expected != current
        {
            return Err(error(VERSION_CONFLICT, "version_conflict", format!("`{}` is at version {current}, not {expected}", p.key)));
        }
        let entry = Entry { key: p.key.clone(), value: p.value, version: current + 1 };
        entries.insert(p.key, entry.clone());
        Ok(entry)
    })
    .map_err(|e| e.to_string())?;
    m.register_method("delete", |params, entries, _| {
        let p: KeyParams = params.parse()?;
        check_key(&p.key)?;
        Ok::<_, ErrorObjectOwned>(DeleteResult { deleted: lock(entries).remove(&p.key).is_some() })
    })
    .map_err(|e| e.to_string())?;
    Ok(m)
}

/// Serves the module over HTTP only (as the server benchmark configures it) on `bind`, on the
/// calling tokio runtime.
pub async fn serve(bind: &str) -> Result<(SocketAddr, ServerHandle), String> {
    let config = ServerConfig::builder().http_only().max_connections(256).build();
    let server = Server::builder().set_config(config).build(bind).await.map_err(|e| format!("jsonrpsee: {e}"))?;
    let addr = server.local_addr().map_err(|e| e.to_string())?;
    Ok((addr, server.start(module()?)))
}
