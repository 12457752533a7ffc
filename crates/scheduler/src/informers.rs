//! Informers: one cross-cluster watch per resource feeding the cache and the queue.
//!
//! Each informer lists and watches `/clusters/*/<resource>` with kube-runtime's `watcher`;
//! every object names its cluster in the `matryoshka.dev/cluster` annotation (absent against
//! a plain single cluster: the root). One task per resource serves every cluster. After a
//! re-list, objects the informer knew but did not see again are deleted, so a missed delete
//! event cannot leave a phantom node or pod behind. Handlers only touch the cache and the
//! queue under their locks (never the network).

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Resource;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

use crate::cache::{ClaimInfo, NodeChange, PriorityClassInfo};
use crate::client::{CLUSTER_ANNOTATION, ROOT};
use crate::framework::{Plugin, PluginSet};
use crate::nodeinfo::NodeSpec;
use crate::podinfo::{PodInfo, PodKey};
use crate::scheduler::Shared;
use crate::selector::NodeSelector;

/// Where an object lives.
pub type ObjKey = (Arc<str>, String, String);

/// What an informer reports.
pub enum Change<K> {
    Applied(Arc<str>, K),
    Deleted(ObjKey),
}

/// Takes the cluster annotation off an object and gives its key.
pub fn take_key<K: Resource>(obj: &mut K) -> ObjKey {
    let meta = obj.meta_mut();
    let cluster = meta
        .annotations
        .as_mut()
        .and_then(|a| a.remove(CLUSTER_ANNOTATION))
        .unwrap_or_else(|| ROOT.to_string());
    if meta.annotations.as_ref().is_some_and(|a| a.is_empty()) {
        meta.annotations = None;
    }
    (
        Arc::from(cluster),
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// Runs one informer until the stream ends, calling `handle` for every change.
/// Runs [`run`] of `K` on every shard (the shared store's watch counts towards being synced).
pub fn every_shard<K>(
    clients: &runtime::client::ClusterClients,
    shared: &Arc<Shared>,
    config: watcher::Config,
    handle: fn(&Shared, Change<K>),
) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + Default + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Clone + Debug + Eq + std::hash::Hash,
{
    let shared = shared.clone();
    let holders: Holders = Arc::default();
    runtime::client::for_each_shard(clients, move |client, ds| {
        run(
            shared.clone(),
            Api::<K>::all(client),
            config.clone(),
            handle,
            Some((holders.clone(), Arc::from(ds.as_str()))),
        )
    })
}

/// The objects of one resource held by a datastore's watch (the rest are the shared store's):
/// a cluster moved between stores appears in its new shard before it leaves the old one,
/// whose deletions must not remove it. Only datastores' objects are kept here.
pub type Holders = Arc<parking_lot::Mutex<std::collections::HashMap<ObjKey, Arc<str>>>>;

/// Notes that `shard` holds `key`.
fn hold(holders: &Option<(Holders, Arc<str>)>, key: &ObjKey) {
    if let Some((h, shard)) = holders {
        let mut h = h.lock();
        if shard.is_empty() {
            if !h.is_empty() {
                h.remove(key);
            }
        } else {
            h.insert(key.clone(), shard.clone());
        }
    }
}

/// Whether `shard`'s deletion of `key` is one (it held the object); lets go of it if so.
fn release(holders: &Option<(Holders, Arc<str>)>, key: &ObjKey) -> bool {
    let Some((h, shard)) = holders else {
        return true;
    };
    let mut h = h.lock();
    match h.get(key) {
        None => shard.is_empty(),
        Some(s) if s == shard => {
            h.remove(key);
            true
        }
        Some(_) => false,
    }
}

/// One shard's watch (`shard`: with the holders of its resource and the shard's name, empty
/// for the shared store, whose first list counts towards the scheduler being synced; `None`:
/// the only watch).
pub async fn run<K>(
    shared: Arc<Shared>,
    api: Api<K>,
    config: watcher::Config,
    mut handle: impl FnMut(&Shared, Change<K>),
    shard: Option<(Holders, Arc<str>)>,
) where
    K: Resource + Clone + Default + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Clone + Debug + Eq + std::hash::Hash,
{
    let mut known: HashSet<ObjKey> = HashSet::new();
    let mut seen: HashSet<ObjKey> = HashSet::new();
    let mut synced = false;
    let mut stream = runtime::lenient::watcher(api, config, None)
        .default_backoff()
        .boxed();
    while let Some(ev) = stream.next().await {
        let ev = match ev {
            // The scheduler never reads managedFields; dropping them halves a pod's size.
            Ok(ev) => ev.modify(|o| o.meta_mut().managed_fields = None),
            Err(e) => {
                tracing::warn!(error = %e, "scheduler watch failed; retrying");
                continue;
            }
        };
        match ev {
            Event::Init => seen.clear(),
            Event::InitApply(mut obj) => {
                let key = take_key(&mut obj);
                seen.insert(key.clone());
                known.insert(key.clone());
                hold(&shard, &key);
                handle(&shared, Change::Applied(key.0, obj));
            }
            Event::InitDone => {
                for gone in known.difference(&seen).cloned().collect::<Vec<_>>() {
                    known.remove(&gone);
                    if release(&shard, &gone) {
                        handle(&shared, Change::Deleted(gone));
                    }
                }
                seen = HashSet::new();
                if !synced {
                    synced = true;
                    if shard.as_ref().is_none_or(|(_, s)| s.is_empty()) {
                        shared.mark_synced();
                    }
                }
            }
            Event::Apply(mut obj) => {
                let key = take_key(&mut obj);
                known.insert(key.clone());
                hold(&shard, &key);
                handle(&shared, Change::Applied(key.0, obj));
            }
            Event::Delete(mut obj) => {
                let key = take_key(&mut obj);
                known.remove(&key);
                if release(&shard, &key) {
                    handle(&shared, Change::Deleted(key));
                }
            }
        }
    }
}

/// The plugins a deleted or finished pod frees room for.
fn pod_gone_plugins() -> PluginSet {
    PluginSet::of(&[
        Plugin::NodeResourcesFit,
        Plugin::NodePorts,
        Plugin::InterPodAffinity,
        Plugin::PodTopologySpread,
        Plugin::VolumeBinding,
    ])
}

/// Pods: assigned ones are accounted on their node, pending ones of this scheduler queued.
pub fn on_pod(shared: &Shared, change: Change<Pod>) {
    let now = Instant::now();
    match change {
        // A cluster whose host places its pods: nothing of it is kept (what an earlier
        // version kept goes).
        Change::Applied(cluster, pod) if shared.host_placed(&cluster) => {
            let mut cache = shared.cache.lock();
            let key = PodKey {
                cluster: cache.intern(&cluster),
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                name: pod.metadata.name.clone().unwrap_or_default(),
            };
            cache.remove_pod(&key);
            drop(cache);
            shared.queue.lock().delete(&key);
        }
        Change::Applied(cluster, pod) => {
            let mut info = PodInfo::new(&cluster, &pod);
            let mut cache = shared.cache.lock();
            let cluster = cache.intern(&cluster);
            info.key.cluster = cluster.clone();
            if info.priority_unresolved
                && let Some(c) = cache.cluster(&cluster)
            {
                info.resolve_priority(c);
            }
            let info = Arc::new(info);
            let key = info.key.clone();
            if info.terminal {
                let freed = cache.remove_pod(&key).is_some();
                drop(cache);
                shared.queue.lock().delete(&key);
                if freed {
                    shared.move_pods(&key.cluster, pod_gone_plugins(), now);
                }
                return;
            }
            if !info.node_name.is_empty() {
                cache.upsert_assigned(info.clone());
                if cache
                    .cluster(&cluster)
                    .is_some_and(|c| !c.nominated.is_empty())
                {
                    cache.set_nominated(&info, None);
                }
                drop(cache);
                shared.queue.lock().delete(&key);
                shared.move_pods(
                    &key.cluster,
                    PluginSet::of(&[Plugin::InterPodAffinity, Plugin::PodTopologySpread]),
                    now,
                );
                return;
            }
            if cache.is_assumed(&key) {
                // A stale event from before our binding landed.
                return;
            }
            let nominated = !info.nominated_node_name.is_empty();
            if nominated
                || cache
                    .cluster(&cluster)
                    .is_some_and(|c| !c.nominated.is_empty())
            {
                cache.set_nominated(
                    &info,
                    nominated.then_some(info.nominated_node_name.as_str()),
                );
            }
            drop(cache);
            let mut queue = shared.queue.lock();
            if info.ours() && !info.terminating && !info.gated {
                queue.upsert(info, now);
                let active = queue.has_active();
                drop(queue);
                if active {
                    shared.wake.notify_one();
                }
            } else {
                queue.delete(&key);
            }
        }
        Change::Deleted((cluster, namespace, name)) => {
            let mut cache = shared.cache.lock();
            let key = PodKey {
                cluster: cache.intern(&cluster),
                namespace,
                name,
            };
            let freed = cache.remove_pod(&key);
            if let Some(c) = cache.cluster(&key.cluster)
                && let Some(p) = c
                    .nominated
                    .values()
                    .flatten()
                    .find(|p| p.key == key)
                    .cloned()
            {
                cache.set_nominated(&p, None);
            }
            drop(cache);
            shared.queue.lock().delete(&key);
            if freed.is_some() {
                shared.move_pods(&key.cluster, pod_gone_plugins(), now);
            }
        }
    }
}

/// Nodes: a new or changed node may fit any pod.
pub fn on_node(shared: &Shared, change: Change<Node>) {
    match change {
        Change::Applied(cluster, node) if shared.host_placed(&cluster) => {
            let name = node.metadata.name.unwrap_or_default();
            shared.cache.lock().remove_node(&cluster, &name);
        }
        Change::Applied(cluster, node) => {
            let name = node.metadata.name.clone().unwrap_or_default();
            let spec = NodeSpec::new(&node);
            let mut cache = shared.cache.lock();
            let cluster = cache.intern(&cluster);
            let change = cache.upsert_node(&cluster, &name, spec);
            drop(cache);
            if change != NodeChange::Unchanged {
                shared.move_pods(&cluster, PluginSet::ALL, Instant::now());
            }
        }
        Change::Deleted((cluster, _, name)) => {
            shared.cache.lock().remove_node(&cluster, &name);
        }
    }
}

/// PriorityClasses: looked up for pods without `spec.priority`.
pub fn on_priority_class(shared: &Shared, change: Change<PriorityClass>) {
    let mut cache = shared.cache.lock();
    match change {
        Change::Applied(cluster, pc) => {
            let cluster = cache.intern(&cluster);
            let name = pc.metadata.name.clone().unwrap_or_default();
            cache.cluster_mut(&cluster).priority_classes.insert(
                name,
                PriorityClassInfo {
                    value: pc.value,
                    preemption_policy: pc.preemption_policy.clone(),
                    global_default: pc.global_default.unwrap_or(false),
                },
            );
        }
        Change::Deleted((cluster, _, name)) => {
            let cluster = cache.intern(&cluster);
            cache.cluster_mut(&cluster).priority_classes.remove(&name);
            cache.gc(&cluster);
        }
    }
}

/// Namespaces: their labels, for namespace selectors of affinity terms.
pub fn on_namespace(shared: &Shared, change: Change<Namespace>) {
    let mut cache = shared.cache.lock();
    let (cluster, changed) = match change {
        Change::Applied(cluster, ns) => {
            let cluster = cache.intern(&cluster);
            let name = ns.metadata.name.clone().unwrap_or_default();
            let labels = ns.metadata.labels.clone().unwrap_or_default();
            let old = cache
                .cluster_mut(&cluster)
                .namespaces
                .insert(name, labels.clone());
            (cluster, old.as_ref() != Some(&labels))
        }
        Change::Deleted((cluster, _, name)) => {
            let cluster = cache.intern(&cluster);
            cache.cluster_mut(&cluster).namespaces.remove(&name);
            cache.gc(&cluster);
            (cluster, false)
        }
    };
    drop(cache);
    if changed {
        shared.move_pods(
            &cluster,
            PluginSet::of(&[Plugin::InterPodAffinity]),
            Instant::now(),
        );
    }
}

fn volume_event(shared: &Shared, cluster: &Arc<str>) {
    shared.move_pods(
        cluster,
        PluginSet::of(&[Plugin::VolumeBinding]),
        Instant::now(),
    );
}

/// PersistentVolumeClaims.
pub fn on_claim(shared: &Shared, change: Change<PersistentVolumeClaim>) {
    let mut cache = shared.cache.lock();
    let cluster = match change {
        Change::Applied(cluster, pvc) => {
            let cluster = cache.intern(&cluster);
            let spec = pvc.spec.clone().unwrap_or_default();
            let info = ClaimInfo {
                volume_name: spec.volume_name.unwrap_or_default(),
                storage_class: spec.storage_class_name.unwrap_or_default(),
                deleting: pvc.metadata.deletion_timestamp.is_some(),
            };
            let key = (
                pvc.metadata.namespace.clone().unwrap_or_default(),
                pvc.metadata.name.clone().unwrap_or_default(),
            );
            cache.cluster_mut(&cluster).claims.insert(key, info);
            cluster
        }
        Change::Deleted((cluster, ns, name)) => {
            let cluster = cache.intern(&cluster);
            cache.cluster_mut(&cluster).claims.remove(&(ns, name));
            cache.gc(&cluster);
            return;
        }
    };
    drop(cache);
    volume_event(shared, &cluster);
}

/// PersistentVolumes: their node affinity.
pub fn on_volume(shared: &Shared, change: Change<PersistentVolume>) {
    let mut cache = shared.cache.lock();
    let cluster = match change {
        Change::Applied(cluster, pv) => {
            let cluster = cache.intern(&cluster);
            let affinity = pv
                .spec
                .as_ref()
                .and_then(|s| s.node_affinity.as_ref())
                .and_then(|a| a.required.as_ref())
                .map(NodeSelector::parse);
            let name = pv.metadata.name.clone().unwrap_or_default();
            cache.cluster_mut(&cluster).volumes.insert(name, affinity);
            cluster
        }
        Change::Deleted((cluster, _, name)) => {
            let cluster = cache.intern(&cluster);
            cache.cluster_mut(&cluster).volumes.remove(&name);
            cache.gc(&cluster);
            return;
        }
    };
    drop(cache);
    volume_event(shared, &cluster);
}

/// StorageClasses: whether their claims wait for the first consumer.
pub fn on_storage_class(shared: &Shared, change: Change<StorageClass>) {
    let mut cache = shared.cache.lock();
    let cluster = match change {
        Change::Applied(cluster, sc) => {
            let cluster = cache.intern(&cluster);
            let delayed = sc.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer");
            let name = sc.metadata.name.clone().unwrap_or_default();
            cache
                .cluster_mut(&cluster)
                .storage_classes
                .insert(name, delayed);
            cluster
        }
        Change::Deleted((cluster, _, name)) => {
            let cluster = cache.intern(&cluster);
            cache.cluster_mut(&cluster).storage_classes.remove(&name);
            cache.gc(&cluster);
            return;
        }
    };
    drop(cache);
    volume_event(shared, &cluster);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_shard_holding_an_object_deletes_it() {
        let holders: Holders = Arc::default();
        let shared = Some((holders.clone(), Arc::<str>::from("")));
        let ds = Some((holders.clone(), Arc::<str>::from("etcd-a")));
        let key: ObjKey = (Arc::from("c"), "default".into(), "p".into());
        // The shared store's objects cost nothing here.
        hold(&shared, &key);
        assert!(holders.lock().is_empty());
        // The cluster moves: its object appears in the datastore first, so the shared
        // store's deletion that follows deletes nothing.
        hold(&ds, &key);
        assert!(!release(&shared, &key));
        assert!(release(&ds, &key));
        assert!(holders.lock().is_empty());
        // A datastore never deletes what it did not hold.
        assert!(!release(&ds, &key));
        assert!(release(&shared, &key));
    }
}
