//! The cross-cluster informer: one kube-runtime `watcher` over `/clusters/*/...` feeding a
//! store keyed by (cluster, namespace, name) and the event handlers of the controllers.
//!
//! kube-runtime's own reflector keys objects by namespace and name only, which would mix up
//! two clusters' `default/web`; here the cluster comes from the `matryoshka.dev/cluster`
//! annotation the server puts on cross-cluster responses (and is stripped, so an object written
//! back never stores it). Against a single-cluster endpoint objects carry no annotation and
//! belong to the root cluster.
//!
//! One informer per resource serves every cluster: memory grows with objects, and there is one
//! watch and one task per resource whatever the number of clusters. Handlers run on the
//! informer's task and must only enqueue (client-go's `ResourceEventHandler` contract).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Debug;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::client::{CLUSTER_ANNOTATION, ClusterClients, ROOT};
use crate::error::Result;
pub use crate::store::Store;
pub use apimachinery::cluster::ClusterName;

/// Where an object lives: its cluster, namespace (empty when cluster-scoped) and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub cluster: ClusterName,
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(cluster: &str, namespace: &str, name: &str) -> Self {
        ObjectKey {
            cluster: ClusterName::from(cluster),
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}:{}", self.cluster, self.name)
        } else {
            write!(f, "{}:{}/{}", self.cluster, self.namespace, self.name)
        }
    }
}

/// Takes the cluster annotation off an object and gives its key.
pub fn take_key<K: Resource>(obj: &mut K) -> ObjectKey {
    let meta = obj.meta_mut();
    let cluster = meta
        .annotations
        .as_mut()
        .and_then(|a| a.remove(CLUSTER_ANNOTATION))
        .map_or_else(ClusterName::root, ClusterName::from);
    if meta.annotations.as_ref().is_some_and(|a| a.is_empty()) {
        meta.annotations = None;
    }
    ObjectKey {
        cluster,
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
    }
}

/// What happened to an object.
pub enum Change<'a, K> {
    Added(&'a ObjectKey, &'a Arc<K>),
    Updated {
        key: &'a ObjectKey,
        old: &'a Arc<K>,
        new: &'a Arc<K>,
    },
    Deleted(&'a ObjectKey, &'a Arc<K>),
}

impl<K> Change<'_, K> {
    pub fn key(&self) -> &ObjectKey {
        match self {
            Change::Added(k, _) | Change::Deleted(k, _) => k,
            Change::Updated { key, .. } => key,
        }
    }

    /// The object's latest state (its last state when deleted).
    pub fn object(&self) -> &Arc<K> {
        match self {
            Change::Added(_, o) | Change::Deleted(_, o) => o,
            Change::Updated { new, .. } => new,
        }
    }
}

type Handler<K> = Arc<dyn Fn(&Change<'_, K>) + Send + Sync>;

/// Records a Warning Event `UndecodableObject` on an object an informer skipped, in the
/// object's cluster, once per object version (a relist does not repeat it).
fn undecodable_reporter(
    clients: ClusterClients,
    informer: String,
) -> crate::lenient::OnUndecodable {
    let seen: Arc<Mutex<std::collections::HashSet<String>>> = Default::default();
    Arc::new(move |meta: &ObjectMeta, error: &str| {
        let Some(name) = meta.name.clone() else {
            return;
        };
        let version = format!(
            "{}/{}",
            meta.uid.as_deref().unwrap_or(&name),
            meta.resource_version.as_deref().unwrap_or_default()
        );
        {
            let mut seen = seen.lock();
            if seen.len() > 4096 {
                seen.clear();
            }
            if !seen.insert(version) {
                return;
            }
        }
        let cluster = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(CLUSTER_ANNOTATION))
            .map_or(ROOT, String::as_str)
            .to_string();
        let Ok(client) = clients.cluster(&cluster) else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
        let event = k8s_openapi::api::core::v1::Event {
            metadata: ObjectMeta {
                // `<object>.<hex nanoseconds>`, as upstream's recorders name events.
                name: Some(format!(
                    "{name}.{:x}",
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos())
                )),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            involved_object: k8s_openapi::api::core::v1::ObjectReference {
                name: Some(name),
                namespace: meta.namespace.clone(),
                uid: meta.uid.clone(),
                resource_version: meta.resource_version.clone(),
                ..Default::default()
            },
            reason: Some("UndecodableObject".into()),
            message: Some(format!(
                "the {informer} informer skipped this object: {error}"
            )),
            type_: Some("Warning".into()),
            source: Some(k8s_openapi::api::core::v1::EventSource {
                component: Some("matryoshka-controller-manager".into()),
                host: None,
            }),
            count: Some(1),
            ..Default::default()
        };
        rt.spawn(async move {
            let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client, &namespace);
            if let Err(e) = api.create(&Default::default(), &event).await {
                tracing::debug!(error = %e, "recording an UndecodableObject event");
            }
        });
    })
}

/// A watch stream of one shard, from its cross-cluster client.
pub type MakeStream<K> =
    Arc<dyn Fn(kube::Client) -> BoxStream<'static, watcher::Result<Event<K>>> + Send + Sync>;

/// Where an informer's events come from: one stream, or one stream per shard.
enum Source<K> {
    Stream(BoxStream<'static, watcher::Result<Event<K>>>),
    Shards(ClusterClients, MakeStream<K>),
}

/// A cross-cluster informer of one resource.
pub struct Informer<K> {
    name: String,
    store: Store<K>,
    handlers: Mutex<Vec<Handler<K>>>,
    source: Mutex<Option<Source<K>>>,
    synced: watch::Sender<bool>,
}

impl<K> Informer<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// An informer of a typed resource over every cluster. An object that cannot be decoded
    /// is skipped, with a Warning Event on it in its cluster ([`crate::lenient`]): one bad
    /// object never stops the informer of every cluster.
    pub fn new(clients: &ClusterClients, config: watcher::Config) -> Result<Arc<Self>>
    where
        K: Default,
        K::DynamicType: Default + Clone + Debug + Eq + std::hash::Hash,
    {
        let name = K::plural(&K::DynamicType::default()).to_string();
        let report = undecodable_reporter(clients.clone(), name.clone());
        Self::from_shards(
            name,
            clients,
            Arc::new(move |client| {
                crate::lenient::watcher(Api::all(client), config.clone(), Some(report.clone()))
                    .default_backoff()
                    .boxed()
            }),
        )
    }
}

impl<K> Informer<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + Default
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    /// An informer of a resource of the root cluster only (the platform's and the machine
    /// controllers' objects live there), skipping what it cannot decode.
    pub fn root(clients: &ClusterClients) -> Result<Arc<Self>> {
        let api: Api<K> = Api::all(clients.cluster(ROOT)?);
        Ok(Self::from_stream(
            K::plural(&()).to_string(),
            crate::lenient::watcher(api, watcher::Config::default(), None).default_backoff(),
        ))
    }
}

impl<K> Informer<K>
where
    K: Resource + Send + Sync + 'static,
{
    /// An informer over any watcher stream (typed, dynamic or metadata-only).
    pub fn from_stream(
        name: impl Into<String>,
        stream: impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static,
    ) -> Arc<Self> {
        Self::with_source(name.into(), Source::Stream(stream.boxed()))
    }

    /// An informer over every shard of a multi-cluster endpoint: `make` turns each shard's
    /// cross-cluster client (the shared store's `/clusters/*`, each datastore's
    /// `/shards/<name>/clusters/*`) into a watch stream; datastores that appear later are
    /// watched from then on. Each shard has its own resourceVersions, so each has its own
    /// stream; the store holds them all, keyed by cluster as ever. Against a single-cluster
    /// endpoint it is one stream. Synced once the shared store's first list is in (a datastore
    /// that cannot be reached does not hold up every cluster's controllers).
    pub fn from_shards(
        name: impl Into<String>,
        clients: &ClusterClients,
        make: MakeStream<K>,
    ) -> Result<Arc<Self>> {
        if !clients.multi_cluster() {
            return Ok(Self::from_stream(name, make(clients.all_clusters()?)));
        }
        // Fails now, as a single stream's informer does, if there is no cross-cluster client.
        clients.all_clusters()?;
        Ok(Self::with_source(
            name.into(),
            Source::Shards(clients.clone(), make),
        ))
    }

    fn with_source(name: String, source: Source<K>) -> Arc<Self> {
        let (synced, _) = watch::channel(false);
        Arc::new(Informer {
            name,
            store: Store::default(),
            handlers: Mutex::new(Vec::new()),
            source: Mutex::new(Some(source)),
            synced,
        })
    }

    /// The informer's store (shared, cheap to clone).
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Adds an event handler. Objects already known are replayed to it as additions.
    pub fn on_change(&self, f: impl Fn(&Change<'_, K>) + Send + Sync + 'static) {
        let f: Handler<K> = Arc::new(f);
        let mut handlers = self.handlers.lock();
        for (k, v) in self.store.entries() {
            f(&Change::Added(&k, &v));
        }
        handlers.push(f);
    }

    /// Whether the first complete list has been stored.
    pub fn has_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits until the first complete list has been stored.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    fn emit(&self, change: Change<'_, K>) {
        let handlers: Vec<Handler<K>> = self.handlers.lock().clone();
        for h in handlers {
            h(&change);
        }
    }

    /// Runs the watch until `shutdown` resolves or the stream ends. Runs once; later calls
    /// return at once.
    pub async fn run(self: Arc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        let Some(source) = self.source.lock().take() else {
            return;
        };
        tokio::pin!(shutdown);
        let mut shards: Shards<K> = Shards::default();
        match source {
            Source::Stream(mut stream) => loop {
                let ev = tokio::select! {
                    ev = stream.next() => ev,
                    () = &mut shutdown => None,
                };
                let Some(ev) = ev else { break };
                self.handle(&mut shards, &Arc::from(""), ev);
            },
            Source::Shards(clients, make) => {
                let mut datastores = clients.datastores();
                let mut streams = futures::stream::SelectAll::new();
                let mut running: HashMap<String, futures::stream::AbortHandle> = HashMap::new();
                let shared = match clients.all_clusters() {
                    Ok(c) => make(c),
                    Err(e) => {
                        tracing::warn!(informer = %self.name, error = %e, "no cross-cluster client");
                        return;
                    }
                };
                let tag: Arc<str> = Arc::from("");
                streams.push(shared.map(move |ev| (tag.clone(), ev)).boxed());
                datastores.mark_changed();
                loop {
                    tokio::select! {
                        ev = streams.next() => {
                            let Some((shard, ev)) = ev else { break };
                            self.handle(&mut shards, &shard, ev);
                        }
                        changed = datastores.changed() => {
                            if changed.is_err() {
                                // No datastore watch (its clients are gone): keep the rest.
                                datastores = tokio::sync::watch::channel(Vec::new()).1;
                                continue;
                            }
                            let now: Vec<String> = datastores.borrow_and_update().clone();
                            running.retain(|ds, abort| {
                                let keep = now.contains(ds);
                                if !keep {
                                    abort.abort();
                                    self.drop_shard(&mut shards, ds);
                                }
                                keep
                            });
                            for ds in now {
                                if running.contains_key(&ds) {
                                    continue;
                                }
                                let client = match clients.shard(&ds) {
                                    Ok(c) => c,
                                    Err(e) => {
                                        tracing::warn!(informer = %self.name, datastore = %ds, error = %e, "no client for a datastore");
                                        continue;
                                    }
                                };
                                let tag: Arc<str> = Arc::from(ds.as_str());
                                let (stream, abort) = futures::stream::abortable(
                                    make(client).map(move |ev| (tag.clone(), ev)),
                                );
                                streams.push(stream.boxed());
                                running.insert(ds, abort);
                            }
                        }
                        () = &mut shutdown => break,
                    }
                }
            }
        }
    }

    /// Applies one event of `shard`'s stream.
    fn handle(&self, shards: &mut Shards<K>, shard: &Arc<str>, ev: watcher::Result<Event<K>>) {
        // Nothing here reads managedFields, and they are most of a small object's decoded
        // size (client-go's `TransformStripManagedFields`).
        let ev = ev.map(|ev| ev.modify(|o| o.meta_mut().managed_fields = None));
        match ev {
            Ok(Event::Apply(mut o)) => {
                let key = take_key(&mut o);
                shards.note(shard, &key);
                self.apply(key, o);
            }
            Ok(Event::Delete(mut o)) => {
                let key = take_key(&mut o);
                // Only the shard that holds an object may delete it (a cluster's objects
                // appear in its new shard before they leave the old one).
                if shards.release(shard, &key) {
                    self.delete(key, o);
                }
            }
            Ok(Event::Init) => {
                shards.buffers.insert(shard.clone(), BTreeMap::new());
            }
            Ok(Event::InitApply(mut o)) => {
                let key = take_key(&mut o);
                shards
                    .buffers
                    .entry(shard.clone())
                    .or_default()
                    .insert(key, Arc::new(o));
            }
            Ok(Event::InitDone) => {
                let fresh = shards.buffers.remove(shard).unwrap_or_default();
                if shard.is_empty() && shards.foreign.is_empty() {
                    self.replace(fresh);
                } else {
                    self.replace_shard(shards, shard, fresh);
                }
                if shard.is_empty() {
                    self.synced.send_replace(true);
                }
            }
            Err(e) => {
                if shard.is_empty() {
                    tracing::warn!(informer = %self.name, error = %e, "watch failed; retrying")
                } else {
                    tracing::warn!(informer = %self.name, datastore = %shard, error = %e, "watch failed; retrying")
                }
            }
        }
    }

    fn apply(&self, key: ObjectKey, obj: K) {
        let new = Arc::new(obj);
        let old = self.store.insert(key.clone(), new.clone());
        match old {
            Some(old) => self.emit(Change::Updated {
                key: &key,
                old: &old,
                new: &new,
            }),
            None => self.emit(Change::Added(&key, &new)),
        }
    }

    fn delete(&self, key: ObjectKey, obj: K) {
        let old = self.store.remove(&key);
        let last = Arc::new(obj);
        self.emit(Change::Deleted(&key, old.as_ref().unwrap_or(&last)));
    }

    /// Replaces the store with a complete list, emitting the differences.
    fn replace(&self, fresh: BTreeMap<ObjectKey, Arc<K>>) {
        let old = self.store.replace(fresh.clone());
        for (k, v) in &old {
            if !fresh.contains_key(k) {
                self.emit(Change::Deleted(k, v));
            }
        }
        for (k, v) in &fresh {
            match old.get(k) {
                Some(o) => self.emit(Change::Updated {
                    key: k,
                    old: o,
                    new: v,
                }),
                None => self.emit(Change::Added(k, v)),
            }
        }
    }

    /// Replaces the objects of one shard with its complete list, emitting the differences.
    fn replace_shard(
        &self,
        shards: &mut Shards<K>,
        shard: &Arc<str>,
        fresh: BTreeMap<ObjectKey, Arc<K>>,
    ) {
        let held: Vec<ObjectKey> = if shard.is_empty() {
            self.store
                .keys()
                .into_iter()
                .filter(|k| !shards.foreign.values().any(|s| s.contains(k)))
                .collect()
        } else {
            shards
                .foreign
                .get(shard)
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default()
        };
        for k in held {
            if !fresh.contains_key(&k)
                && let Some(old) = self.store.remove(&k)
            {
                shards.release(shard, &k);
                self.emit(Change::Deleted(&k, &old));
            }
        }
        for (k, v) in fresh {
            shards.note(shard, &k);
            match self.store.insert(k.clone(), v.clone()) {
                Some(old) => self.emit(Change::Updated {
                    key: &k,
                    old: &old,
                    new: &v,
                }),
                None => self.emit(Change::Added(&k, &v)),
            }
        }
    }

    /// Lets go of a datastore that is gone, and of its objects.
    fn drop_shard(&self, shards: &mut Shards<K>, shard: &str) {
        shards.buffers.remove(shard);
        for k in shards.foreign.remove(shard).unwrap_or_default() {
            if let Some(old) = self.store.remove(&k) {
                self.emit(Change::Deleted(&k, &old));
            }
        }
    }
}

/// Which objects came from a datastore's stream (the shared store's are the rest), and each
/// shard's list in progress.
struct Shards<K> {
    foreign: HashMap<Arc<str>, HashSet<ObjectKey>>,
    buffers: HashMap<Arc<str>, BTreeMap<ObjectKey, Arc<K>>>,
}

impl<K> Default for Shards<K> {
    fn default() -> Self {
        Shards {
            foreign: HashMap::new(),
            buffers: HashMap::new(),
        }
    }
}

impl<K> Shards<K> {
    /// `key` was written in `shard`.
    fn note(&mut self, shard: &Arc<str>, key: &ObjectKey) {
        if !self.foreign.is_empty() {
            // An object of a cluster that moved here is no longer the other shard's.
            for (s, keys) in self.foreign.iter_mut() {
                if s != shard {
                    keys.remove(key);
                }
            }
            self.foreign.retain(|_, keys| !keys.is_empty());
        }
        if !shard.is_empty() {
            self.foreign
                .entry(shard.clone())
                .or_default()
                .insert(key.clone());
        }
    }

    /// `key` was deleted in `shard`: whether it was that shard's.
    fn release(&mut self, shard: &Arc<str>, key: &ObjectKey) -> bool {
        if shard.is_empty() {
            return !self.foreign.values().any(|s| s.contains(key));
        }
        let Some(keys) = self.foreign.get_mut(shard) else {
            return false;
        };
        let had = keys.remove(key);
        if keys.is_empty() {
            self.foreign.remove(shard);
        }
        had
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(cluster: Option<&str>, ns: &str, name: &str) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.name = Some(name.into());
        c.metadata.namespace = Some(ns.into());
        if let Some(cl) = cluster {
            c.metadata.annotations =
                Some([(CLUSTER_ANNOTATION.to_string(), cl.to_string())].into());
        }
        c
    }

    #[test]
    fn the_cluster_annotation_becomes_the_key_and_is_stripped() {
        let mut c = cm(Some("t1"), "default", "x");
        let k = take_key(&mut c);
        assert_eq!(k, ObjectKey::new("t1", "default", "x"));
        assert!(c.metadata.annotations.is_none());
        let mut plain = cm(None, "default", "x");
        assert_eq!(take_key(&mut plain).cluster, ROOT);
    }

    #[tokio::test]
    async fn same_names_in_two_clusters_are_two_objects_and_relists_emit_deletions() {
        let events = vec![
            Ok(Event::Init),
            Ok(Event::InitApply(cm(Some("a"), "default", "x"))),
            Ok(Event::InitApply(cm(Some("b"), "default", "x"))),
            Ok(Event::InitDone),
            Ok(Event::Init),
            Ok(Event::InitApply(cm(Some("b"), "default", "x"))),
            Ok(Event::InitDone),
        ];
        let inf = Informer::from_stream("configmaps", futures::stream::iter(events));
        let deleted = Arc::new(Mutex::new(Vec::new()));
        let d = deleted.clone();
        inf.on_change(move |c| {
            if let Change::Deleted(k, _) = c {
                d.lock().push((*k).clone());
            }
        });
        inf.clone().run(std::future::pending()).await;
        assert!(inf.has_synced());
        assert_eq!(inf.store().list_namespace("b", "default").len(), 1);
        assert!(inf.store().list_namespace("a", "default").is_empty());
        assert_eq!(*deleted.lock(), vec![ObjectKey::new("a", "default", "x")]);
    }

    #[test]
    fn each_shard_relists_only_its_own_objects_and_only_the_holder_deletes_one() {
        let inf = Informer::from_stream("configmaps", futures::stream::empty());
        let deleted = Arc::new(Mutex::new(Vec::new()));
        let d = deleted.clone();
        inf.on_change(move |c| {
            if let Change::Deleted(k, _) = c {
                d.lock().push((*k).clone());
            }
        });
        let mut shards: Shards<ConfigMap> = Shards::default();
        let (shared, ds): (Arc<str>, Arc<str>) = (Arc::from(""), Arc::from("etcd-a"));
        let list = |shard: &Arc<str>, shards: &mut Shards<ConfigMap>, items: Vec<ConfigMap>| {
            inf.handle(shards, shard, Ok(Event::Init));
            for i in items {
                inf.handle(shards, shard, Ok(Event::InitApply(i)));
            }
            inf.handle(shards, shard, Ok(Event::InitDone));
        };
        list(&ds, &mut shards, vec![cm(Some("b"), "default", "y")]);
        assert!(!inf.has_synced(), "synced only by the shared store's list");
        list(&shared, &mut shards, vec![cm(Some("a"), "default", "x")]);
        assert!(inf.has_synced());
        assert_eq!(inf.store().len(), 2);
        // A relist of the shared store does not touch the datastore's objects, and the reverse.
        list(&shared, &mut shards, vec![cm(Some("a"), "default", "x")]);
        list(&ds, &mut shards, vec![cm(Some("b"), "default", "y")]);
        assert_eq!(inf.store().len(), 2);
        assert!(deleted.lock().is_empty(), "{:?}", deleted.lock());
        // Cluster a moves into the datastore: its object appears there before the shared
        // store's deletion arrives, which then deletes nothing.
        inf.handle(
            &mut shards,
            &ds,
            Ok(Event::Apply(cm(Some("a"), "default", "x"))),
        );
        inf.handle(
            &mut shards,
            &shared,
            Ok(Event::Delete(cm(Some("a"), "default", "x"))),
        );
        assert_eq!(inf.store().list_namespace("a", "default").len(), 1);
        assert!(deleted.lock().is_empty());
        // An empty relist of the shared store keeps what the datastore holds.
        list(&shared, &mut shards, vec![]);
        assert_eq!(inf.store().len(), 2);
        // The datastore goes: so do its objects.
        inf.drop_shard(&mut shards, "etcd-a");
        assert_eq!(inf.store().len(), 0);
        let mut gone = deleted.lock().clone();
        gone.sort();
        assert_eq!(
            gone,
            vec![
                ObjectKey::new("a", "default", "x"),
                ObjectKey::new("b", "default", "y")
            ]
        );
    }
}
