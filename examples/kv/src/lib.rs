//! The kv example: a key-value store described by its own JSON Schema (`schema/kv.json`). The
//! types, validators, `Method`, the `service::Service` trait, its dispatch and the typed
//! `service::Client` are generated at build time (`build.rs`); [`Store`] implements the trait.

use std::collections::BTreeMap;
use std::sync::Mutex;

use openagents_rpc::{Context, Peer, PeerError, RpcError};

#[allow(clippy::all, clippy::pedantic, unused_labels, unused_parens, unreachable_patterns, missing_docs)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/kv.rs"));
}

pub use generated::*;

/// The store: entries by key, and the connections watching prefixes.
#[derive(Default)]
pub struct Store {
    entries: Mutex<BTreeMap<String, Entry>>,
    watchers: Mutex<Vec<(String, Peer)>>,
}

impl Store {
    /// Tells every connection watching a prefix of `key` about a change (`value`: `None` when
    /// the key was deleted). The notification is made only when someone watches.
    async fn changed(&self, key: &str, version: i64, value: Option<&Value>) {
        let peers: Vec<Peer> = {
            let mut w = self.watchers.lock().unwrap_or_else(|p| p.into_inner());
            w.retain(|(_, peer)| peer.can_notify());
            w.iter().filter(|(prefix, _)| key.starts_with(prefix.as_str())).map(|(_, p)| p.clone()).collect()
        };
        if peers.is_empty() {
            return;
        }
        let note = client_side::Notification::Changed(Changed { key: key.to_owned(), version, value: value.cloned() });
        for peer in peers {
            // Never waits for a watcher: one that stopped reading (its queue full) is dropped
            // from the watchers rather than hold this call and every call after it; one that
            // went away meanwhile misses it, and the next change prunes it.
            if let Err(PeerError::Full) = note.try_send(&peer) {
                self.watchers.lock().unwrap_or_else(|p| p.into_inner()).retain(|(_, p)| !p.same_connection(&peer));
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl service::Service for Store {
    async fn get(&self, _cx: &Context, params: GetParams) -> Result<Entry, RpcError> {
        self.lock().get(&params.key).cloned().ok_or_else(|| service::error(KvErrorCode::NotFound, format!("no entry has the key `{}`", params.key)))
    }

    async fn put(&self, _cx: &Context, params: PutParams) -> Result<Entry, RpcError> {
        let entry = {
            let mut entries = self.lock();
            let current = entries.get(&params.key).map_or(0, |e| e.version);
            if let Some(expected) = params.if_version
                && expected != current
            {
                return Err(service::error(KvErrorCode::VersionConflict, format!("`{}` is at version {current}, not {expected}", params.key)));
            }
            let entry = Entry { key: params.key.clone(), value: params.value, version: current + 1 };
            entries.insert(params.key, entry.clone());
            entry
        };
        self.changed(&entry.key, entry.version, Some(&entry.value)).await;
        Ok(entry)
    }

    async fn delete(&self, _cx: &Context, params: DeleteParams) -> Result<DeleteResult, RpcError> {
        let removed = self.lock().remove(&params.key);
        if let Some(e) = &removed {
            self.changed(&e.key, e.version, None).await;
        }
        Ok(DeleteResult { deleted: removed.is_some() })
    }

    async fn watch(&self, cx: &Context, params: WatchParams) -> Result<WatchResult, RpcError> {
        if !cx.peer().can_notify() {
            return Err(service::error(KvErrorCode::CannotNotify, PeerError::Unsupported.to_string()));
        }
        let mut w = self.watchers.lock().unwrap_or_else(|p| p.into_inner());
        w.push((params.prefix, cx.peer().clone()));
        let mine = w.iter().filter(|(_, p)| p.same_connection(cx.peer())).count();
        Ok(WatchResult { watching: mine as i64 })
    }
}
