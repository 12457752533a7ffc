//! The watch cache: every object of every logical cluster in memory, fed by one storage watch,
//! serving lists and watches without touching storage.
//!
//! One storage watch on the whole keyspace feeds the cache in revision order. Objects are kept
//! as compact JSON with `metadata.resourceVersion` set ([`CachedObject`]) per resource (group,
//! plural), keyed by `cluster/namespace/name`, so a list of one cluster's pods in one namespace
//! is a range scan, and a cross-cluster list (for system controllers) is a full scan of the
//! resource. Each resource keeps a window of recent events for watch resumption; watchers are
//! grouped per resource and per cluster, so an idle cluster costs no task and no timer, and an
//! event is offered only to the watchers of its own cluster (plus the cross-cluster ones).
//!
//! The feed prepares each event (decoding, extracting what filters read, encoding) before it
//! takes the write lock ([`feed`]); under the lock it only swaps pointers and dispatches.
//!
//! **Architecture Invariant:** a watcher only ever receives events of the cluster it was opened
//! for; only a cross-cluster watch (`cluster: None`, reserved to the system identity by the API
//! server) sees several clusters.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use apimachinery::status::ApiError;
use parking_lot::RwLock;
use serde_json::Value;
use storage::Storage;
use tokio::sync::{mpsc, watch};

mod encode;
mod feed;
mod filter;
mod follow;
mod object;
#[cfg(test)]
mod tests;

pub use filter::{Filter, Predicate, selector_predicate};
pub use follow::{Follow, FollowAll, ShardEvent};
pub use object::{CachedObject, LabelSet};

pub use apimachinery::cluster::CLUSTER_ANNOTATION;

/// Watch event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// What a watcher receives.
#[derive(Debug, Clone)]
pub enum WatchItem {
    Event(EventType, Arc<CachedObject>),
    /// Everything up to this revision has been delivered.
    Bookmark(i64),
    /// The synthetic initial events of a `sendInitialEvents` watch are over.
    InitialEventsEnd(i64),
    /// The watch ends; the client must re-list.
    Error(ApiError),
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy)]
pub enum Start {
    /// Events after this revision.
    After(i64),
    /// Synthetic ADDED events for the current state, then changes; with `end_marker`, an
    /// [`WatchItem::InitialEventsEnd`] between the two.
    Current { end_marker: bool },
}

struct HistEvent {
    rev: i64,
    /// When the cache applied it (history is kept for a window of time).
    at: tokio::time::Instant,
    ty: EventType,
    obj: Arc<CachedObject>,
    prev: Option<Arc<CachedObject>>,
}

struct Watcher {
    filter: Filter,
    bookmarks: bool,
    /// Undelivered items allowed before the watcher is ended.
    buffer: usize,
    tx: mpsc::Sender<WatchItem>,
}

/// What an event of the history holds beyond the current objects (its object's JSON, which
/// outlives the object once replaced, and the event itself).
fn hist_bytes(e: &HistEvent) -> usize {
    e.obj.json().len() + 96
}

#[derive(Default)]
struct ResourceState {
    objects: BTreeMap<String, Arc<CachedObject>>,
    history: VecDeque<Arc<HistEvent>>,
    /// What `history` holds ([`hist_bytes`]).
    history_bytes: usize,
    /// Watches may start at any revision at or above this.
    floor: i64,
    /// Cross-cluster watches may start only at or above this: events of deleted clusters
    /// below it left the history ([`WatchCache::forget_cluster`]).
    cross_floor: i64,
    /// Watchers by cluster; the `None` entry holds cross-cluster watchers.
    watchers: HashMap<Option<String>, HashMap<u64, Watcher>>,
}

impl ResourceState {
    fn push_history(&mut self, e: Arc<HistEvent>) {
        self.history_bytes += hist_bytes(&e);
        self.history.push_back(e);
    }

    /// Drops the oldest event; watches may then start only after it.
    fn pop_history(&mut self) -> Option<usize> {
        let e = self.history.pop_front()?;
        self.floor = self.floor.max(e.rev);
        let b = hist_bytes(&e);
        self.history_bytes -= b;
        Some(b)
    }

    /// Drops the oldest events beyond `cap` that are older than `window`, and any beyond
    /// `max`; watches may then start only after the newest dropped one.
    fn trim_history(
        &mut self,
        now: tokio::time::Instant,
        cap: usize,
        window: Duration,
        max: usize,
    ) {
        while let Some(front) = self.history.front() {
            let len = self.history.len();
            let expired = len > cap && now.duration_since(front.at) >= window;
            if len <= max && !expired {
                break;
            }
            self.pop_history();
        }
    }
}

/// Drops the oldest events of every resource, oldest first, until the histories hold at most
/// three quarters of `budget` bytes, if they hold more than `budget`.
fn trim_to_budget(resources: &mut HashMap<(String, String), ResourceState>, budget: usize) {
    use std::cmp::Reverse;
    let mut total: usize = resources.values().map(|r| r.history_bytes).sum();
    if budget == 0 || total <= budget {
        return;
    }
    let target = budget / 4 * 3;
    let mut fronts: std::collections::BinaryHeap<Reverse<(i64, (String, String))>> = resources
        .iter()
        .filter_map(|(k, r)| Some(Reverse((r.history.front()?.rev, k.clone()))))
        .collect();
    while total > target {
        let Some(Reverse((_, k))) = fronts.pop() else {
            break;
        };
        let Some(rs) = resources.get_mut(&k) else {
            continue;
        };
        if let Some(b) = rs.pop_history() {
            total -= b;
        }
        if let Some(front) = rs.history.front() {
            fronts.push(Reverse((front.rev, k)));
        }
    }
}

struct State {
    rev: i64,
    /// The revision the cache was (re)built at: resources first seen later have every event
    /// since then in their history.
    base: i64,
    resources: HashMap<(String, String), ResourceState>,
    /// Bytes added to the histories since the byte bound was last checked (it is checked once
    /// an eighth of the bound was added: summing every resource is cheap, not free).
    unchecked_bytes: usize,
}

/// Tuning of the cache.
#[derive(Debug, Clone)]
pub struct CacheOptions {
    /// Events always kept per resource for watch resumption (older than the window, the
    /// oldest beyond this many are dropped, on the next event or the next bookmark tick).
    pub history: usize,
    /// Beyond `history`, events younger than this are kept too (up to `history_max`), so a
    /// client that re-lists a large resource during a burst can still start its watch at the
    /// list's revision.
    pub history_window: Duration,
    /// The most events kept per resource, however young.
    pub history_max: usize,
    /// And at most this many bytes of history over all resources: past it, the oldest events
    /// of any resource go until three quarters are left (0: no bound). A bound on memory that
    /// does not depend on how large the objects written are.
    pub history_bytes: usize,
    /// How many revisions the cache may trail storage before writers wait for it (see
    /// [`WatchCache::throttle`]).
    pub max_write_lag: i64,
    /// Undelivered items a watcher may have before it is terminated.
    pub watcher_buffer: usize,
    /// The same for the in-process system watchers of every cluster (the controllers', the
    /// scheduler's and node agents' informers): they see every cluster's bursts, and ending
    /// one costs a re-list of every object of its resource. Only trusted code opens them.
    pub system_watcher_buffer: usize,
    /// How often watchers that asked for bookmarks get one.
    pub bookmark_interval: Duration,
    /// Resources (group, plural) also kept decoded, for the server's own per-request loops
    /// that read them as objects (RBAC authorization reads every role and binding of a
    /// cluster per request). Everything else is decoded on demand.
    pub keep_decoded: Vec<(String, String)>,
}

impl Default for CacheOptions {
    fn default() -> Self {
        // Upstream sends bookmarks about once a minute; its per-resource history is sized for
        // ~75 s of events, between 100 and ~100k. A count keeps memory bounded under any rate;
        // the floor holds the events of a quiet resource (one history serves every cluster).
        CacheOptions {
            history: 1_000,
            history_window: Duration::from_secs(75),
            history_max: 100_000,
            history_bytes: 64 << 20,
            max_write_lag: 2_000,
            watcher_buffer: 10_000,
            system_watcher_buffer: 1 << 20,
            bookmark_interval: Duration::from_secs(60),
            keep_decoded: [
                "roles",
                "rolebindings",
                "clusterroles",
                "clusterrolebindings",
            ]
            .into_iter()
            .map(|p| ("rbac.authorization.k8s.io".to_string(), p.to_string()))
            .collect(),
        }
    }
}

/// The watch cache.
pub struct WatchCache {
    state: RwLock<State>,
    rev_tx: watch::Sender<i64>,
    next_id: AtomicU64,
    opts: CacheOptions,
}

/// Ends a watch when dropped.
pub struct WatchHandle {
    cache: Arc<WatchCache>,
    resource: (String, String),
    cluster: Option<String>,
    id: u64,
    pub rx: mpsc::Receiver<WatchItem>,
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        let mut st = self.cache.state.write();
        if let Some(rs) = st.resources.get_mut(&self.resource)
            && let Some(ws) = rs.watchers.get_mut(&self.cluster)
        {
            ws.remove(&self.id);
            if ws.is_empty() {
                rs.watchers.remove(&self.cluster);
            }
        }
    }
}

impl WatchCache {
    /// Builds the cache from storage and keeps it fed until the returned cache is dropped.
    pub async fn start(
        storage: Arc<dyn Storage>,
        opts: CacheOptions,
    ) -> storage::Result<Arc<Self>> {
        let (rev_tx, _) = watch::channel(0);
        let cache = Arc::new(WatchCache {
            state: RwLock::new(State {
                rev: 0,
                base: 0,
                resources: HashMap::new(),
                unchecked_bytes: 0,
            }),
            rev_tx,
            next_id: AtomicU64::new(1),
            opts,
        });
        let rev = cache.load(&*storage).await?;
        let weak = Arc::downgrade(&cache);
        tokio::spawn(async move { feed::run(weak, storage, rev).await });
        let weak = Arc::downgrade(&cache);
        let interval = cache.opts.bookmark_interval;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.tick().await;
            loop {
                tick.tick().await;
                match weak.upgrade() {
                    Some(c) => {
                        c.send_bookmarks();
                        c.trim_histories();
                    }
                    None => return,
                }
            }
        });
        Ok(cache)
    }

    /// The revision of the newest event the cache has applied.
    pub fn revision(&self) -> i64 {
        self.state.read().rev
    }

    /// Called after a write committed at `written`: waits while the cache trails it by more
    /// than [`CacheOptions::max_write_lag`] revisions. The feed is one task among all the
    /// writers; without this, a burst of writes outruns it without bound, every watcher and
    /// consistent list waits on a cache minutes behind, and re-lists time out. Writers slow
    /// to the pace the cache (and so every watcher) can follow.
    pub async fn throttle(&self, written: i64) {
        let target = written - self.opts.max_write_lag;
        if *self.rev_tx.borrow() >= target {
            return;
        }
        self.wait_for(target, Duration::from_secs(5)).await;
    }

    /// Waits until the cache has applied `rev` (or `timeout` passes). Returns whether it has.
    pub async fn wait_for(&self, rev: i64, timeout: Duration) -> bool {
        let mut rx = self.rev_tx.subscribe();
        let wait = rx.wait_for(|r| *r >= rev);
        matches!(tokio::time::timeout(timeout, wait).await, Ok(Ok(_)))
    }

    /// The objects of a resource that `filter` covers, in key order, and the cache revision.
    pub fn list(
        &self,
        group: &str,
        plural: &str,
        filter: &Filter,
    ) -> (Vec<Arc<CachedObject>>, i64) {
        let st = self.state.read();
        let Some(rs) = st.resources.get(&(group.to_string(), plural.to_string())) else {
            return (Vec::new(), st.rev);
        };
        let prefix = filter.prefix();
        let items = rs
            .objects
            .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter(|(_, o)| filter.matches(o))
            .map(|(_, o)| o.clone())
            .collect();
        (items, st.rev)
    }

    /// One object from the cache.
    pub fn get(
        &self,
        group: &str,
        plural: &str,
        cluster: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<CachedObject>> {
        let st = self.state.read();
        let rs = st.resources.get(&(group.to_string(), plural.to_string()))?;
        let k = if namespace.is_empty() {
            format!("{cluster}/{name}")
        } else {
            format!("{cluster}/{namespace}/{name}")
        };
        rs.objects.get(&k).cloned()
    }

    /// Number of objects of a resource in one cluster (cheap enough for quota and metrics).
    pub fn count(&self, group: &str, plural: &str, cluster: &str) -> usize {
        let filter = Filter {
            cluster: Some(cluster.to_string()),
            ..Filter::default()
        };
        self.list(group, plural, &filter).0.len()
    }

    /// Starts a watch.
    pub fn watch(
        self: &Arc<Self>,
        group: &str,
        plural: &str,
        filter: Filter,
        start: Start,
        bookmarks: bool,
    ) -> Result<WatchHandle, ApiError> {
        let resource = (group.to_string(), plural.to_string());
        let mut st = self.state.write();
        let (rev, base) = (st.rev, st.base);
        let rs = st
            .resources
            .entry(resource.clone())
            .or_insert_with(|| ResourceState {
                floor: base,
                ..Default::default()
            });
        let mut initial: Vec<WatchItem> = Vec::new();
        match start {
            Start::After(after) => {
                let floor = if filter.cluster.is_none() {
                    rs.floor.max(rs.cross_floor)
                } else {
                    rs.floor
                };
                if after < floor {
                    return Err(ApiError::expired(format!(
                        "too old resource version: {after} ({floor})"
                    )));
                }
                let from = rs.history.partition_point(|e| e.rev <= after);
                for ev in rs.history.range(from..) {
                    if let Some(item) = dispatch(&filter, ev) {
                        initial.push(item);
                    }
                }
            }
            Start::Current { end_marker } => {
                let prefix = filter.prefix();
                for (_, o) in rs
                    .objects
                    .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
                    .take_while(|(k, _)| k.starts_with(&prefix))
                {
                    if filter.matches(o) {
                        initial.push(WatchItem::Event(EventType::Added, o.clone()));
                    }
                }
                if end_marker {
                    initial.push(WatchItem::InitialEventsEnd(rev));
                }
            }
        }
        let buffer = if filter.cluster.is_none() {
            self.opts.system_watcher_buffer
        } else {
            self.opts.watcher_buffer
        };
        let (tx, rx) = mpsc::channel(initial.len() + buffer);
        for item in initial {
            let _ = tx.try_send(item);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let cluster = filter.cluster.clone();
        rs.watchers.entry(cluster.clone()).or_default().insert(
            id,
            Watcher {
                filter,
                bookmarks,
                buffer,
                tx,
            },
        );
        Ok(WatchHandle {
            cache: self.clone(),
            resource,
            cluster,
            id,
            rx,
        })
    }

    /// Number of open watches (metrics, tests).
    /// Objects held, over every resource and cluster.
    pub fn object_count(&self) -> usize {
        self.state
            .read()
            .resources
            .values()
            .map(|r| r.objects.len())
            .sum()
    }

    /// Objects held per (cluster, group, resource): what a cluster leaves in the cache.
    pub fn object_counts(&self) -> std::collections::BTreeMap<(String, String, String), usize> {
        let st = self.state.read();
        let mut out = std::collections::BTreeMap::new();
        for ((group, plural), rs) in &st.resources {
            for o in rs.objects.values() {
                *out.entry((o.cluster.to_string(), group.clone(), plural.clone()))
                    .or_insert(0) += 1;
            }
        }
        out
    }

    pub fn watcher_count(&self) -> usize {
        self.state
            .read()
            .resources
            .values()
            .flat_map(|r| r.watchers.values())
            .map(HashMap::len)
            .sum()
    }

    /// Ends every watch of `cluster` with `error` (its clients re-list): the cluster's keys
    /// moved to another store, whose revisions this cache's history knows nothing of. Returns
    /// how many watches ended.
    pub fn end_cluster_watches(&self, cluster: &str, error: &ApiError) -> usize {
        let mut st = self.state.write();
        let key = Some(cluster.to_string());
        let mut ended = 0;
        for rs in st.resources.values_mut() {
            if let Some(ws) = rs.watchers.remove(&key) {
                for w in ws.into_values() {
                    let _ = w.tx.try_send(WatchItem::Error(error.clone()));
                    ended += 1;
                }
            }
        }
        ended
    }

    /// Lets go of a deleted cluster's events in every resource's resumption history (a churn
    /// of clusters would otherwise keep every event of the history window). Nobody watches a
    /// deleted cluster, and other clusters' watchers never saw its events; a cross-cluster
    /// watch may start only after the newest event dropped, so a component resuming from
    /// before re-lists instead of missing the cluster's deletions. Returns how many events
    /// were dropped.
    pub fn forget_cluster(&self, cluster: &str) -> usize {
        let mut st = self.state.write();
        let mut dropped = 0;
        for rs in st.resources.values_mut() {
            let before = rs.history.len();
            let mut newest = None;
            rs.history.retain(|e| {
                let keep = &*e.obj.cluster != cluster;
                if !keep {
                    newest = Some(e.rev);
                }
                keep
            });
            rs.history_bytes = rs.history.iter().map(|e| hist_bytes(e)).sum();
            if let Some(rev) = newest {
                rs.cross_floor = rs.cross_floor.max(rev);
                dropped += before - rs.history.len();
                if rs.history.capacity() > 4 * rs.history.len().max(64) {
                    rs.history.shrink_to_fit();
                }
            }
        }
        dropped
    }

    /// Trims every resource's history by age, also those no event has touched since a burst
    /// (events are otherwise trimmed when the next one of their resource arrives).
    fn trim_histories(&self) {
        let now = tokio::time::Instant::now();
        let o = &self.opts;
        let mut st = self.state.write();
        for rs in st.resources.values_mut() {
            rs.trim_history(now, o.history, o.history_window, o.history_max);
        }
        trim_to_budget(&mut st.resources, o.history_bytes);
    }

    fn send_bookmarks(&self) {
        let mut st = self.state.write();
        let rev = st.rev;
        for rs in st.resources.values_mut() {
            for ws in rs.watchers.values_mut() {
                ws.retain(|_, w| !w.bookmarks || deliver(w, WatchItem::Bookmark(rev)));
            }
        }
    }
}

/// Offers an item to a watcher; `false` when the watcher is gone or too slow (then removed).
fn deliver(w: &Watcher, item: WatchItem) -> bool {
    if w.tx.is_closed() {
        return false;
    }
    if w.tx.capacity() <= 1 {
        let _ = w.tx.try_send(WatchItem::Error(ApiError::expired(format!(
            "the watcher fell behind by more than {} events; please re-list",
            w.buffer
        ))));
        return false;
    }
    w.tx.try_send(item).is_ok()
}

/// What a watcher with `filter` sees of an event: objects that start matching appear as ADDED,
/// objects that stop matching as DELETED, as upstream does.
fn dispatch(filter: &Filter, ev: &HistEvent) -> Option<WatchItem> {
    if !filter.covers(&ev.obj.cluster, ev.obj.namespace()) {
        return None;
    }
    if filter.predicate.is_none() {
        return Some(WatchItem::Event(ev.ty, ev.obj.clone()));
    }
    let was = ev.prev.as_ref().is_some_and(|p| filter.matches(p));
    match ev.ty {
        EventType::Deleted => was.then(|| WatchItem::Event(EventType::Deleted, ev.obj.clone())),
        _ => {
            let is = filter.matches(&ev.obj);
            match (was, is) {
                (true, true) => Some(WatchItem::Event(EventType::Modified, ev.obj.clone())),
                (false, true) => Some(WatchItem::Event(EventType::Added, ev.obj.clone())),
                (true, false) => Some(WatchItem::Event(EventType::Deleted, ev.obj.clone())),
                (false, false) => None,
            }
        }
    }
}

/// Decodes a stored object and sets its resourceVersion.
pub fn decode(raw: &[u8], rev: i64) -> Option<Value> {
    let mut value: Value = serde_json::from_slice(raw).ok()?;
    if !value.is_object() {
        return None;
    }
    apimachinery::meta::set(&mut value, "resourceVersion", rev.to_string());
    Some(value)
}
