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

use std::collections::BTreeMap;
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

/// A cross-cluster informer of one resource.
pub struct Informer<K> {
    name: String,
    store: Store<K>,
    handlers: Mutex<Vec<Handler<K>>>,
    stream: Mutex<Option<BoxStream<'static, watcher::Result<Event<K>>>>>,
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
        let api: Api<K> = Api::all(clients.all_clusters()?);
        let name = K::plural(&K::DynamicType::default()).to_string();
        let report = undecodable_reporter(clients.clone(), name.clone());
        Ok(Self::from_stream(
            name,
            crate::lenient::watcher(api, config, Some(report)).default_backoff(),
        ))
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
        let (synced, _) = watch::channel(false);
        Arc::new(Informer {
            name: name.into(),
            store: Store::default(),
            handlers: Mutex::new(Vec::new()),
            stream: Mutex::new(Some(stream.boxed())),
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

    fn apply(&self, mut obj: K) {
        let key = take_key(&mut obj);
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

    fn delete(&self, mut obj: K) {
        let key = take_key(&mut obj);
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

    /// Runs the watch until `shutdown` resolves or the stream ends. Runs once; later calls
    /// return at once.
    pub async fn run(self: Arc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        let Some(mut stream) = self.stream.lock().take() else {
            return;
        };
        tokio::pin!(shutdown);
        let mut buffer: Option<BTreeMap<ObjectKey, Arc<K>>> = None;
        loop {
            let ev = tokio::select! {
                ev = stream.next() => ev,
                () = &mut shutdown => None,
            };
            let Some(ev) = ev else { break };
            // Nothing here reads managedFields, and they are most of a small object's
            // decoded size (client-go's `TransformStripManagedFields`).
            let ev = ev.map(|ev| ev.modify(|o| o.meta_mut().managed_fields = None));
            match ev {
                Ok(Event::Apply(o)) => self.apply(o),
                Ok(Event::Delete(o)) => self.delete(o),
                Ok(Event::Init) => buffer = Some(BTreeMap::new()),
                Ok(Event::InitApply(mut o)) => {
                    let key = take_key(&mut o);
                    buffer
                        .get_or_insert_with(BTreeMap::new)
                        .insert(key, Arc::new(o));
                }
                Ok(Event::InitDone) => {
                    self.replace(buffer.take().unwrap_or_default());
                    self.synced.send_replace(true);
                }
                Err(e) => {
                    tracing::warn!(informer = %self.name, error = %e, "watch failed; retrying")
                }
            }
        }
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
}
