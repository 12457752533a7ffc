//! An informer's store: the objects it has seen by (cluster, namespace, name), indexed by
//! controller.
//!
//! Controllers that claim objects (ReplicaSet → pods, Deployment → ReplicaSets, Job,
//! StatefulSet, DaemonSet → pods) only ever look at the objects a given owner controls and at
//! orphans of its namespace. Scanning the namespace instead makes each sync cost every object
//! in it — with a thousand ReplicaSets of a hundred pods in one namespace, a hundred thousand
//! pods per sync. The index keeps the candidates of a claim proportional to what the owner
//! controls (client-go's controller-UID indexer plays the same part upstream).
//!
//! The index is keyed by cluster as well as UID: an ownerReference is written by the tenant,
//! so a UID copied from another cluster's object must not make it a candidate there.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use kube::Resource;
use parking_lot::RwLock;

use crate::informer::{ClusterName, ObjectKey};

struct Inner<K> {
    objects: BTreeMap<ObjectKey, Arc<K>>,
    /// Keys of objects by (cluster, controller UID).
    controlled: HashMap<(ClusterName, String), BTreeSet<ObjectKey>>,
    /// Keys of objects that have no controller.
    orphans: BTreeSet<ObjectKey>,
}

impl<K> Default for Inner<K> {
    fn default() -> Self {
        Inner {
            objects: BTreeMap::new(),
            controlled: HashMap::new(),
            orphans: BTreeSet::new(),
        }
    }
}

/// The UID of the object's controller (the ownerReference with `controller: true`).
fn controller_uid<K: Resource>(obj: &K) -> Option<&str> {
    obj.meta()
        .owner_references
        .as_deref()?
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

impl<K: Resource> Inner<K> {
    fn index(&mut self, key: &ObjectKey, obj: &K) {
        match controller_uid(obj) {
            Some(uid) => {
                self.controlled
                    .entry((key.cluster.clone(), uid.to_string()))
                    .or_default()
                    .insert(key.clone());
            }
            None => {
                self.orphans.insert(key.clone());
            }
        }
    }

    fn unindex(&mut self, key: &ObjectKey, obj: &K) {
        match controller_uid(obj) {
            Some(uid) => {
                let ix = (key.cluster.clone(), uid.to_string());
                if let Some(keys) = self.controlled.get_mut(&ix) {
                    keys.remove(key);
                    if keys.is_empty() {
                        self.controlled.remove(&ix);
                    }
                }
            }
            None => {
                self.orphans.remove(key);
            }
        }
    }
}

/// The objects an informer has seen, by key.
pub struct Store<K> {
    inner: Arc<RwLock<Inner<K>>>,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Store {
            inner: self.inner.clone(),
        }
    }
}

impl<K> Default for Store<K> {
    fn default() -> Self {
        Store {
            inner: Arc::new(RwLock::new(Inner::default())),
        }
    }
}

impl<K> Store<K> {
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.inner.read().objects.get(key).cloned()
    }

    /// Every object of one namespace of one cluster (a range scan).
    pub fn list_namespace(&self, cluster: &str, namespace: &str) -> Vec<Arc<K>> {
        let start = ObjectKey::new(cluster, namespace, "");
        self.inner
            .read()
            .objects
            .range(start..)
            .take_while(|(k, _)| k.cluster == cluster && k.namespace == namespace)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Every object of one cluster.
    pub fn list_cluster(&self, cluster: &str) -> Vec<(ObjectKey, Arc<K>)> {
        let start = ObjectKey::new(cluster, "", "");
        self.inner
            .read()
            .objects
            .range(start..)
            .take_while(|(k, _)| k.cluster == cluster)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// What an owner of `namespace` may claim: the objects whose controller has `owner_uid`,
    /// and the objects with no controller, in key order.
    pub fn claim_candidates(&self, cluster: &str, namespace: &str, owner_uid: &str) -> Vec<Arc<K>> {
        let inner = self.inner.read();
        let start = ObjectKey::new(cluster, namespace, "");
        let orphans = inner
            .orphans
            .range(start..)
            .take_while(|k| k.cluster == cluster && k.namespace == namespace);
        let controlled = inner
            .controlled
            .get(&(ClusterName::from(cluster), owner_uid.to_string()))
            .into_iter()
            .flatten()
            .filter(|k| k.namespace == namespace);
        let mut keys: Vec<&ObjectKey> = orphans.chain(controlled).collect();
        keys.sort();
        keys.into_iter()
            .filter_map(|k| inner.objects.get(k).cloned())
            .collect()
    }

    /// Every key.
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.inner.read().objects.keys().cloned().collect()
    }

    /// Every (key, object), in key order.
    pub fn entries(&self) -> Vec<(ObjectKey, Arc<K>)> {
        let inner = self.inner.read();
        inner
            .objects
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.inner.read().objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: Resource> Store<K> {
    /// Stores an object, returning the one it replaces.
    pub fn insert(&self, key: ObjectKey, obj: Arc<K>) -> Option<Arc<K>> {
        let mut inner = self.inner.write();
        let old = inner.objects.insert(key.clone(), obj.clone());
        if let Some(o) = &old {
            inner.unindex(&key, o);
        }
        inner.index(&key, &obj);
        old
    }

    /// Removes an object, returning it.
    pub fn remove(&self, key: &ObjectKey) -> Option<Arc<K>> {
        let mut inner = self.inner.write();
        let old = inner.objects.remove(key)?;
        inner.unindex(key, &old);
        Some(old)
    }

    /// Replaces every object (a re-list), returning the previous ones.
    pub fn replace(&self, fresh: BTreeMap<ObjectKey, Arc<K>>) -> BTreeMap<ObjectKey, Arc<K>> {
        let mut next: Inner<K> = Inner::default();
        for (k, v) in &fresh {
            next.index(k, v.as_ref());
        }
        next.objects = fresh;
        std::mem::replace(&mut *self.inner.write(), next).objects
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn pod(ns: &str, name: &str, controller: Option<&str>) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some(ns.into());
        p.metadata.owner_references = controller.map(|uid| {
            vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: "rs".into(),
                uid: uid.into(),
                controller: Some(true),
                block_owner_deletion: None,
            }]
        });
        Arc::new(p)
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter()
            .map(|p| p.metadata.name.as_deref().unwrap_or_default())
            .collect()
    }

    #[test]
    fn claim_candidates_are_the_owners_objects_and_the_namespaces_orphans() {
        let s: Store<Pod> = Store::default();
        s.insert(ObjectKey::new("c", "ns", "a"), pod("ns", "a", Some("u1")));
        s.insert(ObjectKey::new("c", "ns", "b"), pod("ns", "b", Some("u2")));
        s.insert(ObjectKey::new("c", "ns", "c"), pod("ns", "c", None));
        s.insert(ObjectKey::new("c", "other", "d"), pod("other", "d", None));
        s.insert(
            ObjectKey::new("c", "other", "e"),
            pod("other", "e", Some("u1")),
        );
        s.insert(ObjectKey::new("x", "ns", "f"), pod("ns", "f", Some("u1")));
        assert_eq!(names(&s.claim_candidates("c", "ns", "u1")), ["a", "c"]);
        assert_eq!(names(&s.claim_candidates("c", "ns", "u2")), ["b", "c"]);
    }

    #[test]
    fn an_adopted_or_released_object_moves_between_index_entries() {
        let s: Store<Pod> = Store::default();
        let k = ObjectKey::new("c", "ns", "a");
        s.insert(k.clone(), pod("ns", "a", None));
        assert_eq!(names(&s.claim_candidates("c", "ns", "u2")), ["a"]);
        s.insert(k.clone(), pod("ns", "a", Some("u1")));
        assert_eq!(names(&s.claim_candidates("c", "ns", "u1")), ["a"]);
        assert!(s.claim_candidates("c", "ns", "u2").is_empty());
        s.remove(&k);
        assert!(s.claim_candidates("c", "ns", "u1").is_empty());
    }

    #[test]
    fn a_relist_rebuilds_the_index() {
        let s: Store<Pod> = Store::default();
        s.insert(ObjectKey::new("c", "ns", "a"), pod("ns", "a", Some("u1")));
        let fresh = [(ObjectKey::new("c", "ns", "b"), pod("ns", "b", Some("u1")))].into();
        let old = s.replace(fresh);
        assert_eq!(old.len(), 1);
        assert_eq!(names(&s.claim_candidates("c", "ns", "u1")), ["b"]);
    }
}
