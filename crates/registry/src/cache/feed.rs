//! Feeding the cache: the initial load, and one storage watch applied in revision order.
//!
//! Each event is prepared — decoded, its filter attributes extracted, re-encoded with its
//! resourceVersion — before the write lock is taken (a backlog of events on several
//! blocking-pool tasks at once), then applied in revision order; under the lock the cache only
//! swaps the object, appends to the history and offers the event to watchers. (Decoding under the lock
//! made every reader wait for it, and at 100,000 pods the feed fell tens of thousands of
//! revisions behind storage.)

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use apimachinery::status::ApiError;
use futures::{FutureExt, StreamExt};
use storage::{EventKind, ListOptions, Storage};

use super::{
    CachedObject, EventType, HistEvent, ResourceState, WatchCache, WatchItem, deliver, dispatch,
};
use crate::key;
use crate::strategy::{DefaultStrategy, Strategy};

/// A storage event made ready for the cache.
struct Prepared {
    rev: i64,
    resource: (String, String),
    key: String,
    change: Change,
}

enum Change {
    /// A created or updated object.
    Put(Arc<CachedObject>),
    /// A deleted object at the deletion's revision, and its last state.
    Delete(Arc<CachedObject>, Arc<CachedObject>),
}

/// The strategy that defines a resource's selectable fields: the built-in one, or none
/// (custom resources' selectable fields are read by decoding, see [`CachedObject::field`]).
fn strategy_of(group: &str, plural: &str) -> &'static dyn Strategy {
    /// A built-in resource (group, plural) with selectable fields, and its strategy.
    type Selectable = (&'static str, &'static str, Arc<dyn Strategy>);
    static BUILTIN: OnceLock<Vec<Selectable>> = OnceLock::new();
    static DEFAULT: DefaultStrategy = DefaultStrategy;
    BUILTIN
        .get_or_init(|| {
            apimachinery::builtin::RESOURCES
                .iter()
                .map(|r| (r.group, r.plural, crate::builtins::strategy(r)))
                .filter(|(_, _, s)| !s.field_names().is_empty())
                .collect()
        })
        .iter()
        .find(|(g, p, _)| *g == group && *p == plural)
        .map_or(&DEFAULT, |(_, _, s)| &**s)
}

pub(super) fn cache_key(p: &key::Parsed<'_>) -> String {
    if p.namespace.is_empty() {
        format!("{}/{}", p.cluster, p.name)
    } else {
        format!("{}/{}/{}", p.cluster, p.namespace, p.name)
    }
}

impl WatchCache {
    fn keeps_decoded(&self, group: &str, plural: &str) -> bool {
        self.opts
            .keep_decoded
            .iter()
            .any(|(g, p)| g == group && p == plural)
    }

    /// Prepares a stored object of the resource `p` names at `rev`.
    fn cached(&self, p: &key::Parsed<'_>, raw: &[u8], rev: i64) -> Option<CachedObject> {
        CachedObject::from_stored(
            raw,
            rev,
            Arc::from(p.cluster),
            strategy_of(p.group, p.resource),
            self.keeps_decoded(p.group, p.resource),
        )
    }

    /// (Re)loads every object, returning the revision the cache now stands at.
    pub(super) async fn load(&self, storage: &dyn Storage) -> storage::Result<i64> {
        let mut resources: HashMap<(String, String), ResourceState> = HashMap::new();
        let mut token = None;
        let mut rev;
        loop {
            let page = storage
                .list(
                    key::KEY_PREFIX.as_bytes(),
                    ListOptions {
                        limit: Some(10_000),
                        continue_token: token,
                        revision: None,
                    },
                )
                .await?;
            rev = page.revision;
            for kv in page.items {
                let Some(p) = key::parse(&kv.key) else {
                    continue;
                };
                let Some(obj) = self.cached(&p, &kv.value, kv.mod_revision) else {
                    continue;
                };
                let rs = resources
                    .entry((p.group.to_string(), p.resource.to_string()))
                    .or_default();
                rs.objects.insert(cache_key(&p), Arc::new(obj));
            }
            match page.continue_token {
                Some(t) => token = Some(t),
                None => break,
            }
        }
        let mut st = self.state.write();
        // Every current watcher has missed history: end them so their clients re-list.
        for rs in st.resources.values_mut() {
            for (_, ws) in rs.watchers.drain() {
                for w in ws.into_values() {
                    let _ = w.tx.try_send(WatchItem::Error(ApiError::expired(
                        "the watch cache was rebuilt; please re-list".to_string(),
                    )));
                }
            }
        }
        for rs in resources.values_mut() {
            rs.floor = rev;
        }
        st.resources = resources;
        st.rev = rev;
        st.base = rev;
        drop(st);
        self.rev_tx.send_replace(rev);
        tracing::info!(revision = rev, "watch cache loaded");
        Ok(rev)
    }

    /// The new object of a create or update, prepared without any lock: this is the costly
    /// part of an event (decoding, extracting attributes, encoding), so the feed runs it for
    /// several events at once, ahead of applying them in order. `None` for a delete, a key
    /// that is no object's, or an undecodable object.
    pub(super) fn decode_put(&self, ev: &storage::Event) -> Option<CachedObject> {
        if ev.kind == EventKind::Delete {
            return None;
        }
        let p = key::parse(&ev.kv.key)?;
        let obj = self.cached(&p, &ev.kv.value, ev.revision());
        if obj.is_none() {
            tracing::warn!(key = %String::from_utf8_lossy(&ev.kv.key), "skipping an undecodable object");
        }
        obj
    }

    /// What applying an event takes besides `put` (the prepared object of a create or
    /// update); only a read lock, to find a deleted object's last state. `None` for an event
    /// that changes no object.
    fn prepare(&self, ev: &storage::Event, put: Option<CachedObject>) -> Option<Prepared> {
        let rev = ev.revision();
        let p = key::parse(&ev.kv.key)?;
        let resource = (p.group.to_string(), p.resource.to_string());
        let key = cache_key(&p);
        let change = match ev.kind {
            EventKind::Create | EventKind::Update => Change::Put(Arc::new(put?)),
            EventKind::Delete => {
                // Events are applied in order by this feed alone, so what is cached now is
                // still there when the write lock is taken.
                let cached = self
                    .state
                    .read()
                    .resources
                    .get(&resource)
                    .and_then(|rs| rs.objects.get(&key).cloned());
                let prev = match cached {
                    Some(o) => o,
                    None => {
                        let kv = ev.prev.as_ref()?;
                        Arc::new(self.cached(&p, &kv.value, kv.mod_revision)?)
                    }
                };
                Change::Delete(Arc::new(prev.at_revision(rev)), prev)
            }
        };
        Some(Prepared {
            rev,
            resource,
            key,
            change,
        })
    }

    /// Applies one storage event, with its object already prepared by [`Self::decode_put`]
    /// for a create or update.
    pub(super) fn apply(&self, ev: &storage::Event, put: Option<CachedObject>) {
        let rev = ev.revision();
        let prepared = self.prepare(ev, put);
        let mut st = self.state.write();
        st.rev = st.rev.max(rev);
        let Some(Prepared {
            rev,
            resource,
            key,
            change,
        }) = prepared
        else {
            drop(st);
            self.rev_tx.send_replace(rev);
            return;
        };
        let base = st.base;
        let history_cap = self.opts.history;
        let (window, history_max) = (self.opts.history_window, self.opts.history_max);
        let rs = st
            .resources
            .entry(resource)
            .or_insert_with(|| ResourceState {
                floor: base,
                ..Default::default()
            });
        let (ty, obj, prev) = match change {
            Change::Put(obj) => {
                let prev = rs.objects.insert(key, obj.clone());
                let ty = if prev.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (ty, obj, prev)
            }
            Change::Delete(obj, prev) => {
                rs.objects.remove(&key);
                (EventType::Deleted, obj, Some(prev))
            }
        };
        let at = tokio::time::Instant::now();
        let hist = Arc::new(HistEvent {
            rev,
            at,
            ty,
            obj,
            prev,
        });
        rs.push_history(hist.clone());
        rs.trim_history(at, history_cap, window, history_max);
        for key in [Some(hist.obj.cluster.to_string()), None] {
            let Some(ws) = rs.watchers.get_mut(&key) else {
                continue;
            };
            ws.retain(|_, w| {
                let Some(item) = dispatch(&w.filter, &hist) else {
                    return true;
                };
                deliver(w, item)
            });
            if ws.is_empty() {
                rs.watchers.remove(&key);
            }
        }
        st.unchecked_bytes += super::hist_bytes(&hist);
        if st.unchecked_bytes >= self.opts.history_bytes / 8 {
            st.unchecked_bytes = 0;
            super::trim_to_budget(&mut st.resources, self.opts.history_bytes);
        }
        drop(st);
        self.rev_tx.send_replace(rev);
    }
}

/// Events taken from the storage watch at once, when that many are already waiting.
const BATCH: usize = 256;

/// Blocking-pool tasks preparing a backlog; a lone event is prepared in the feed itself, so
/// the cache follows a quiet storage with no added latency (admission reads what was just
/// written from it).
const WORKERS: usize = 4;

/// The prepared objects of a batch of watch items, in order.
async fn prepare_batch(
    cache: &Arc<WatchCache>,
    batch: &[storage::Result<Arc<storage::Event>>],
) -> Vec<Option<CachedObject>> {
    let events: Vec<Option<Arc<storage::Event>>> =
        batch.iter().map(|i| i.as_ref().ok().cloned()).collect();
    if events.len() < WORKERS {
        return events
            .iter()
            .map(|e| e.as_ref().and_then(|ev| cache.decode_put(ev)))
            .collect();
    }
    let chunk = events.len().div_ceil(WORKERS);
    let jobs: Vec<_> = events
        .chunks(chunk)
        .map(|part| {
            let part = part.to_vec();
            let cache = cache.clone();
            tokio::task::spawn_blocking(move || {
                part.iter()
                    .map(|e| e.as_ref().and_then(|ev| cache.decode_put(ev)))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut out = Vec::with_capacity(events.len());
    for (job, part) in jobs.into_iter().zip(events.chunks(chunk)) {
        match job.await {
            Ok(objs) => out.extend(objs),
            Err(e) => {
                tracing::warn!(error = %e, "watch cache: preparing events failed");
                out.extend(part.iter().map(|_| None));
            }
        }
    }
    out
}

/// Feeds the cache from storage; re-lists when the storage watch fails.
pub(super) async fn run(cache: Weak<WatchCache>, storage: Arc<dyn Storage>, mut rev: i64) {
    'watch: loop {
        let mut w = match storage.watch(key::KEY_PREFIX.as_bytes(), rev).await {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "watch cache: storage watch failed to start; re-listing");
                tokio::time::sleep(Duration::from_millis(200)).await;
                let Some(c) = cache.upgrade() else { return };
                match c.load(&*storage).await {
                    Ok(r) => rev = r,
                    Err(e) => tracing::warn!(error = %e, "watch cache: re-list failed"),
                }
                continue;
            }
        };
        loop {
            let Some(first) = w.next().await else {
                // A stream may end without an error (an etcd connection that closed): the
                // cache would stop following storage while it is still served, so it re-lists
                // as after an error.
                let Some(c) = cache.upgrade() else { return };
                tracing::warn!("watch cache: storage watch ended; re-listing");
                tokio::time::sleep(Duration::from_millis(200)).await;
                match c.load(&*storage).await {
                    Ok(r) => rev = r,
                    Err(e) => tracing::warn!(error = %e, "watch cache: re-list failed"),
                }
                continue 'watch;
            };
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match w.next().now_or_never() {
                    Some(Some(item)) => batch.push(item),
                    _ => break,
                }
            }
            let Some(c) = cache.upgrade() else { return };
            let puts = prepare_batch(&c, &batch).await;
            for (item, put) in batch.into_iter().zip(puts) {
                match item {
                    Ok(ev) => {
                        rev = ev.revision();
                        c.apply(&ev, put);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "watch cache: storage watch ended; re-listing");
                        match c.load(&*storage).await {
                            Ok(r) => rev = r,
                            Err(e) => tracing::warn!(error = %e, "watch cache: re-list failed"),
                        }
                        continue 'watch;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(i: i64) -> storage::Result<Arc<storage::Event>> {
        let name = format!("p{i}");
        let value = serde_json::json!({"metadata": {"name": name, "namespace": "default"}});
        Ok(Arc::new(storage::Event {
            kind: EventKind::Create,
            kv: storage::KeyValue {
                key: key::object("a", "", "pods", "default", &name).into(),
                value: serde_json::to_vec(&value).unwrap().into(),
                create_revision: i,
                mod_revision: i,
                version: 1,
            },
            prev: None,
        }))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_backlog_is_prepared_on_several_tasks_and_comes_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(storage::embedded::EmbeddedStore::open(dir.path()).unwrap());
        let cache = WatchCache::start(storage, super::super::CacheOptions::default())
            .await
            .unwrap();
        let mut batch: Vec<_> = (1..=37).map(event).collect();
        batch.insert(5, Err(storage::Error::NotFound));
        let puts = prepare_batch(&cache, &batch).await;
        assert_eq!(puts.len(), 38);
        assert!(puts[5].is_none(), "an error prepares nothing");
        let revs: Vec<i64> = puts.iter().flatten().map(|o| o.rev).collect();
        assert_eq!(revs, (1..=37).collect::<Vec<_>>());
        assert!(
            puts.iter()
                .flatten()
                .all(|o| o.name() == format!("p{}", o.rev))
        );
    }
}
