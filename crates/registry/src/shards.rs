//! Shards: the stores logical clusters' keys live in.
//!
//! The shared store holds the root cluster and every cluster not bound elsewhere. A
//! *datastore* (an etcd of its own, say) is another shard: its own [`Storage`], its own
//! revision sequence and its own [`WatchCache`] fed by it. A logical cluster lives in exactly
//! one shard, so everything about one cluster — a get, a list, a watch, a resumption at a
//! resourceVersion, a precondition — happens in one revision sequence, as in a cluster of its
//! own. Only the cross-cluster view is per shard (`/clusters/*` is the shared store's,
//! `/shards/<datastore>/clusters/*` a datastore's), as kcp's shards are.
//!
//! Which datastore a cluster is bound to is asked of a resolver (the control plane reads the
//! cluster's `LogicalCluster`), and the set of connected shards is filled by the control plane
//! from the `DataStore` objects of the root cluster; this module only holds them. A cluster bound to a datastore this replica is not connected to is
//! unavailable (503), never answered from another store.

use std::collections::HashMap;
use std::sync::Arc;

use apimachinery::status::ApiError;
use parking_lot::RwLock;
use storage::Storage;
use tokio::sync::watch;

use crate::cache::WatchCache;

/// One store and the watch cache it feeds.
pub struct Shard {
    /// The datastore's name; empty for the shared store.
    pub name: Arc<str>,
    pub storage: Arc<dyn Storage>,
    pub cache: Arc<WatchCache>,
}

impl Shard {
    pub fn new(name: &str, storage: Arc<dyn Storage>, cache: Arc<WatchCache>) -> Arc<Shard> {
        Arc::new(Shard {
            name: name.into(),
            storage,
            cache,
        })
    }

    /// Whether this is the shared store.
    pub fn is_shared(&self) -> bool {
        self.name.is_empty()
    }
}

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Shard({:?})", &*self.name)
    }
}

/// Where a cluster's keys are: a datastore (empty: the shared store), and whether they are
/// being moved to another (writes wait meanwhile).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Binding {
    pub datastore: Arc<str>,
    pub moving: bool,
}

/// A cluster's [`Binding`] (`None`: the shared store, not moving). The control plane reads it
/// from the cluster's `LogicalCluster` in the shared store's cache, the one source of truth,
/// so no replica routes a cluster by a stale copy.
pub type Resolver = Arc<dyn Fn(&str) -> Option<Binding> + Send + Sync>;

/// The shards of the control plane and which cluster lives in which.
pub struct Shards {
    shared: Arc<Shard>,
    named: RwLock<HashMap<Arc<str>, Arc<Shard>>>,
    resolver: RwLock<Option<Resolver>>,
    /// Bumped whenever a shard connects or goes, so loops over every shard's cache
    /// ([`crate::cache::FollowAll`]) pick it up.
    changes: watch::Sender<u64>,
}

impl Shards {
    pub fn new(shared: Arc<Shard>) -> Shards {
        Shards {
            shared,
            named: RwLock::new(HashMap::new()),
            resolver: RwLock::new(None),
            changes: watch::channel(0).0,
        }
    }

    /// Sets how a cluster's datastore is found.
    pub fn set_resolver(&self, resolver: Resolver) {
        *self.resolver.write() = Some(resolver);
    }

    /// The shared store's shard.
    pub fn shared(&self) -> &Arc<Shard> {
        &self.shared
    }

    /// Where `cluster`'s keys are.
    pub fn binding(&self, cluster: &str) -> Binding {
        if cluster == apimachinery::cluster::ROOT {
            return Binding::default();
        }
        let Some(resolver) = self.resolver.read().clone() else {
            return Binding::default();
        };
        resolver(cluster).unwrap_or_default()
    }

    /// The datastore `cluster` is bound to (`None`: the shared store).
    pub fn route(&self, cluster: &str) -> Option<Arc<str>> {
        Some(self.binding(cluster).datastore).filter(|d| !d.is_empty())
    }

    /// The shard `cluster` lives in: 503 while its datastore is not connected here.
    pub fn of_cluster(&self, cluster: &str) -> Result<Arc<Shard>, ApiError> {
        self.named(&self.binding(cluster).datastore)
    }

    /// The shard a write into `cluster` goes to: 429 with Retry-After while the cluster is
    /// being moved to another datastore (its keys are being copied).
    pub fn for_write(&self, cluster: &str) -> Result<Arc<Shard>, ApiError> {
        let b = self.binding(cluster);
        if b.moving {
            return Err(ApiError::too_many_requests(
                format!(
                    "the logical cluster {cluster} is moving to another datastore; retry shortly"
                ),
                1,
            ));
        }
        self.named(&b.datastore)
    }

    /// The shard of a datastore by name (empty: the shared store): 503 while not connected.
    pub fn named(&self, datastore: &str) -> Result<Arc<Shard>, ApiError> {
        if datastore.is_empty() {
            return Ok(self.shared.clone());
        }
        self.named.read().get(datastore).cloned().ok_or_else(|| {
            let mut e = ApiError::service_unavailable(format!(
                "the datastore {datastore:?} is not connected"
            ));
            e.retry_after_seconds = Some(1);
            e
        })
    }

    /// Every connected shard, the shared store first, then by name.
    pub fn all(&self) -> Vec<Arc<Shard>> {
        let mut v = vec![self.shared.clone()];
        let named = self.named.read();
        let mut names: Vec<_> = named.keys().cloned().collect();
        names.sort();
        v.extend(names.iter().filter_map(|n| named.get(n).cloned()));
        v
    }

    /// Adds (or replaces) a connected datastore's shard.
    pub fn connect(&self, shard: Arc<Shard>) {
        assert!(!shard.is_shared(), "the shared store is not a datastore");
        self.named.write().insert(shard.name.clone(), shard);
        self.changes.send_modify(|g| *g += 1);
    }

    /// Drops a datastore's shard (deleted, or its connection settings changed).
    pub fn disconnect(&self, datastore: &str) -> Option<Arc<Shard>> {
        let gone = self.named.write().remove(datastore);
        if gone.is_some() {
            self.changes.send_modify(|g| *g += 1);
        }
        gone
    }

    /// A receiver that changes whenever a shard connects or goes.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}
