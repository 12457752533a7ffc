//! The watch cache: every object of every logical cluster in memory, fed by one storage watch,
//! serving lists and watches without touching storage.
//!
//! One storage watch on the whole keyspace feeds the cache in revision order. Objects are kept
//! decoded (with `metadata.resourceVersion` set) per resource (group, plural), keyed by
//! `cluster/namespace/name`, so a list of one cluster's pods in one namespace is a range scan,
//! and a cross-cluster list (for system controllers) is a full scan of the resource. Each resource
//! keeps a window of recent events for watch resumption; watchers are grouped per resource and
//! per cluster, so an idle cluster costs no task and no timer, and an event is offered only to
//! the watchers of its own cluster (plus the cross-cluster ones).
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
use futures::StreamExt;
use parking_lot::RwLock;
use serde_json::Value;
use storage::{EventKind, ListOptions, Storage};
use tokio::sync::{mpsc, watch};

use crate::key;

/// A filter over objects (label and field selectors), built by the API server.
pub type Predicate = Arc<dyn Fn(&Value) -> bool + Send + Sync>;

/// An object as the cache holds it: decoded, with its resourceVersion set.
#[derive(Debug)]
pub struct CachedObject {
    pub rev: i64,
    pub value: Value,
    /// The logical cluster the object belongs to.
    pub cluster: Arc<str>,
}

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

/// Which objects of a resource a list or watch covers.
#[derive(Clone, Default)]
pub struct Filter {
    /// `None`: every cluster (system controllers only).
    pub cluster: Option<String>,
    /// `None` or empty: every namespace.
    pub namespace: Option<String>,
    pub predicate: Option<Predicate>,
}

impl Filter {
    fn prefix(&self) -> String {
        match (
            &self.cluster,
            self.namespace.as_deref().filter(|n| !n.is_empty()),
        ) {
            (Some(c), Some(ns)) => format!("{c}/{ns}/"),
            (Some(c), None) => format!("{c}/"),
            (None, _) => String::new(),
        }
    }

    fn covers(&self, ev: &HistEvent) -> bool {
        if let Some(c) = &self.cluster
            && c != &ev.cluster
        {
            return false;
        }
        match self.namespace.as_deref() {
            Some(ns) if !ns.is_empty() => ns == ev.namespace,
            _ => true,
        }
    }

    fn matches(&self, v: &Value) -> bool {
        self.predicate.as_ref().is_none_or(|p| p(v))
    }
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
    ty: EventType,
    cluster: String,
    namespace: String,
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

#[derive(Default)]
struct ResourceState {
    objects: BTreeMap<String, Arc<CachedObject>>,
    history: VecDeque<Arc<HistEvent>>,
    /// Watches may start at any revision at or above this.
    floor: i64,
    /// Watchers by cluster; the `None` entry holds cross-cluster watchers.
    watchers: HashMap<Option<String>, HashMap<u64, Watcher>>,
}

struct State {
    rev: i64,
    /// The revision the cache was (re)built at: resources first seen later have every event
    /// since then in their history.
    base: i64,
    resources: HashMap<(String, String), ResourceState>,
}

/// Tuning of the cache.
#[derive(Debug, Clone)]
pub struct CacheOptions {
    /// Events kept per resource for watch resumption.
    pub history: usize,
    /// Undelivered items a watcher may have before it is terminated.
    pub watcher_buffer: usize,
    /// The same for the in-process system watchers of every cluster (the controllers', the
    /// scheduler's and node agents' informers): they see every cluster's bursts, and ending
    /// one costs a re-list of every object of its resource. Only trusted code opens them.
    pub system_watcher_buffer: usize,
    /// How often watchers that asked for bookmarks get one.
    pub bookmark_interval: Duration,
}

impl Default for CacheOptions {
    fn default() -> Self {
        // Upstream sends bookmarks about once a minute; its per-resource history is sized for
        // ~75 s of events. A count keeps memory bounded under any rate.
        CacheOptions {
            history: 10_000,
            watcher_buffer: 10_000,
            system_watcher_buffer: 1 << 20,
            bookmark_interval: Duration::from_secs(60),
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
            }),
            rev_tx,
            next_id: AtomicU64::new(1),
            opts,
        });
        let rev = cache.load(&*storage).await?;
        let weak = Arc::downgrade(&cache);
        tokio::spawn(async move { feed(weak, storage, rev).await });
        let weak = Arc::downgrade(&cache);
        let interval = cache.opts.bookmark_interval;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.tick().await;
            loop {
                tick.tick().await;
                match weak.upgrade() {
                    Some(c) => c.send_bookmarks(),
                    None => return,
                }
            }
        });
        Ok(cache)
    }

    /// (Re)loads every object, returning the revision the cache now stands at.
    async fn load(&self, storage: &dyn Storage) -> storage::Result<i64> {
        let mut resources: HashMap<(String, String), ResourceState> = HashMap::new();
        let mut token = None;
        let mut rev;
        loop {
            let page = storage
                .list(
                    key::ROOT.as_bytes(),
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
                let Some(value) = decode(&kv.value, kv.mod_revision) else {
                    continue;
                };
                let rs = resources
                    .entry((p.group.to_string(), p.resource.to_string()))
                    .or_default();
                rs.objects.insert(
                    cache_key(&p),
                    Arc::new(CachedObject {
                        rev: kv.mod_revision,
                        value,
                        cluster: Arc::from(p.cluster),
                    }),
                );
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

    /// The revision of the newest event the cache has applied.
    pub fn revision(&self) -> i64 {
        self.state.read().rev
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
            .filter(|(_, o)| filter.matches(&o.value))
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
                if after < rs.floor {
                    return Err(ApiError::expired(format!(
                        "too old resource version: {after} ({})",
                        rs.floor
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
                    if filter.matches(&o.value) {
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
    pub fn watcher_count(&self) -> usize {
        self.state
            .read()
            .resources
            .values()
            .flat_map(|r| r.watchers.values())
            .map(HashMap::len)
            .sum()
    }

    /// Applies one storage event.
    fn apply(&self, ev: &storage::Event) {
        let rev = ev.revision();
        let mut st = self.state.write();
        st.rev = st.rev.max(rev);
        let Some(p) = key::parse(&ev.kv.key) else {
            return;
        };
        let ck = cache_key(&p);
        let base = st.base;
        let history_cap = self.opts.history;
        let rs = st
            .resources
            .entry((p.group.to_string(), p.resource.to_string()))
            .or_insert_with(|| ResourceState {
                floor: base,
                ..Default::default()
            });
        let (ty, obj, prev) = match ev.kind {
            EventKind::Create | EventKind::Update => {
                let Some(value) = decode(&ev.kv.value, rev) else {
                    tracing::warn!(key = %String::from_utf8_lossy(&ev.kv.key), "skipping an undecodable object");
                    return;
                };
                let obj = Arc::new(CachedObject {
                    rev,
                    value,
                    cluster: Arc::from(p.cluster),
                });
                let prev = rs.objects.insert(ck, obj.clone());
                let ty = if prev.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (ty, obj, prev)
            }
            EventKind::Delete => {
                let p_cluster = p.cluster;
                let prev = rs.objects.remove(&ck).or_else(|| {
                    let p = ev.prev.as_ref()?;
                    decode(&p.value, p.mod_revision).map(|value| {
                        Arc::new(CachedObject {
                            rev: p.mod_revision,
                            value,
                            cluster: Arc::from(p_cluster),
                        })
                    })
                });
                let Some(prev) = prev else { return };
                let mut value = prev.value.clone();
                apimachinery::meta::set(&mut value, "resourceVersion", rev.to_string());
                (
                    EventType::Deleted,
                    Arc::new(CachedObject {
                        rev,
                        value,
                        cluster: prev.cluster.clone(),
                    }),
                    Some(prev),
                )
            }
        };
        let hist = Arc::new(HistEvent {
            rev,
            ty,
            cluster: p.cluster.to_string(),
            namespace: p.namespace.to_string(),
            obj,
            prev,
        });
        rs.history.push_back(hist.clone());
        while rs.history.len() > history_cap {
            if let Some(old) = rs.history.pop_front() {
                rs.floor = rs.floor.max(old.rev);
            }
        }
        for key in [Some(hist.cluster.clone()), None] {
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
        drop(st);
        self.rev_tx.send_replace(rev);
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
    if !filter.covers(ev) {
        return None;
    }
    if filter.predicate.is_none() {
        return Some(WatchItem::Event(ev.ty, ev.obj.clone()));
    }
    let was = ev.prev.as_ref().is_some_and(|p| filter.matches(&p.value));
    match ev.ty {
        EventType::Deleted => was.then(|| WatchItem::Event(EventType::Deleted, ev.obj.clone())),
        _ => {
            let is = filter.matches(&ev.obj.value);
            match (was, is) {
                (true, true) => Some(WatchItem::Event(EventType::Modified, ev.obj.clone())),
                (false, true) => Some(WatchItem::Event(EventType::Added, ev.obj.clone())),
                (true, false) => Some(WatchItem::Event(EventType::Deleted, ev.obj.clone())),
                (false, false) => None,
            }
        }
    }
}

fn cache_key(p: &key::Parsed<'_>) -> String {
    if p.namespace.is_empty() {
        format!("{}/{}", p.cluster, p.name)
    } else {
        format!("{}/{}/{}", p.cluster, p.namespace, p.name)
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

/// Feeds the cache from storage; re-lists when the storage watch fails.
async fn feed(cache: std::sync::Weak<WatchCache>, storage: Arc<dyn Storage>, mut rev: i64) {
    loop {
        let mut w = match storage.watch(key::ROOT.as_bytes(), rev).await {
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
            let next = w.next().await;
            let Some(c) = cache.upgrade() else { return };
            match next {
                Some(Ok(ev)) => {
                    rev = ev.revision();
                    c.apply(&ev);
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "watch cache: storage watch ended; re-listing");
                    match c.load(&*storage).await {
                        Ok(r) => rev = r,
                        Err(e) => tracing::warn!(error = %e, "watch cache: re-list failed"),
                    }
                    break;
                }
                None => return,
            }
        }
    }
}

/// A watch for the server's own loops (CRD serving, role aggregation, cluster provisioning)
/// that never ends while the cache lives: when the cache drops it for falling behind, it
/// starts again from the current state, whose objects arrive as ADDED. Level-based loops
/// lose nothing by that; a loop that stopped would leave derived state stale for good.
pub struct Follow {
    cache: Arc<WatchCache>,
    group: String,
    plural: String,
    filter: Filter,
    handle: Option<WatchHandle>,
}

impl Follow {
    /// Starts following `group/plural` (current objects first).
    pub fn new(
        cache: &Arc<WatchCache>,
        group: &str,
        plural: &str,
        filter: Filter,
    ) -> Result<Self, ApiError> {
        let handle = cache.watch(
            group,
            plural,
            filter.clone(),
            Start::Current { end_marker: false },
            false,
        )?;
        Ok(Follow {
            cache: cache.clone(),
            group: group.to_string(),
            plural: plural.to_string(),
            filter,
            handle: Some(handle),
        })
    }

    fn handle(&mut self) -> Option<&mut WatchHandle> {
        if self.handle.is_none() {
            match self.cache.watch(
                &self.group,
                &self.plural,
                self.filter.clone(),
                Start::Current { end_marker: false },
                false,
            ) {
                Ok(h) => self.handle = Some(h),
                Err(e) => {
                    tracing::warn!(resource = %self.plural, error = %e, "re-watching failed");
                    return None;
                }
            }
        }
        self.handle.as_mut()
    }

    /// Notes an item; `Some` for an object event.
    fn take(&mut self, item: Option<WatchItem>) -> Option<(EventType, Arc<CachedObject>)> {
        match item {
            Some(WatchItem::Event(ty, obj)) => Some((ty, obj)),
            Some(WatchItem::Error(e)) => {
                tracing::warn!(resource = %self.plural, error = %e, "internal watch dropped; following again from the current state");
                self.handle = None;
                None
            }
            Some(_) => None,
            None => {
                self.handle = None;
                None
            }
        }
    }

    /// The next change, waiting for one.
    pub async fn recv(&mut self) -> (EventType, Arc<CachedObject>) {
        loop {
            let item = match self.handle() {
                Some(h) => h.rx.recv().await,
                None => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            if let Some(ev) = self.take(item) {
                return ev;
            }
        }
    }

    /// A change already waiting, if any.
    pub fn try_recv(&mut self) -> Option<(EventType, Arc<CachedObject>)> {
        loop {
            let item = self.handle.as_mut()?.rx.try_recv().ok()?;
            if let Some(ev) = self.take(Some(item)) {
                return Some(ev);
            }
            self.handle.as_ref()?;
        }
    }
}
