//! The StatefulSet controller (upstream `pkg/controller/statefulset`): pods with stable names
//! `<set>-<ordinal>` and stable storage, created, updated and deleted in order.
//!
//! Each pod gets a PersistentVolumeClaim `<template>-<set>-<ordinal>` per
//! `volumeClaimTemplates` entry (created before the pod, never replaced), its hostname and the
//! Service's subdomain, and the labels `statefulset.kubernetes.io/pod-name`,
//! `apps.kubernetes.io/pod-index` and `controller-revision-hash`. Templates are recorded as
//! ControllerRevisions ([`crate::history`]): `status.updateRevision` is the template's,
//! `status.currentRevision` the one every pod ran before the update. With `OrderedReady`
//! management a pod is created only when every lower one is Running and Ready, and removed
//! (highest first) only when all are; `Parallel` acts on all at once. `RollingUpdate` deletes,
//! highest ordinal first and one at a time, the pods at or above `partition` that run an old
//! revision once the whole set is ready (they are recreated at the update revision);
//! `OnDelete` waits for the user to delete them. `persistentVolumeClaimRetentionPolicy`
//! decides which claims carry an owner reference: to the set (`whenDeleted: Delete`) or to the
//! pod being scaled away (`whenScaled: Delete`).
//!
//! [`pods`] builds pods and claims, [`sync`] holds the reconcile.

pub mod pods;
mod sync;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::Pod;

use crate::podutil;
use runtime::client::ClusterClients;
use runtime::error::Result;
use runtime::informer::{Change, ObjectKey, Store};
use runtime::queue::Queue;
use runtime::shared::Informers;

/// The StatefulSet controller.
pub struct StatefulSetController {
    clients: ClusterClients,
    events: runtime::events::Recorder,
    sets: Store<StatefulSet>,
    pods: Store<Pod>,
    revisions: Store<ControllerRevision>,
    queue: Arc<Queue<ObjectKey>>,
}

fn owner_of(
    key: &ObjectKey,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<ObjectKey> {
    let r = podutil::controller_ref(meta)?;
    (r.kind == "StatefulSet" && r.api_version.starts_with("apps/"))
        .then(|| ObjectKey::new(&key.cluster, &key.namespace, &r.name))
}

impl StatefulSetController {
    pub fn new(informers: &Informers) -> Result<Arc<Self>> {
        let queue: Arc<Queue<ObjectKey>> = Queue::new();
        let sets_inf = informers.get::<StatefulSet>()?;
        let pods_inf = informers.get::<Pod>()?;
        let revs_inf = informers.get::<ControllerRevision>()?;
        let sets = sets_inf.store();
        let q = queue.clone();
        sets_inf.on_change(move |c| q.add(c.key().clone()));
        let (q, s) = (queue.clone(), sets.clone());
        pods_inf.on_change(move |c| {
            let (key, pod) = (c.key(), c.object());
            let mut owners: Vec<ObjectKey> = Vec::new();
            if let Change::Updated { old, .. } = c
                && let Some(o) = owner_of(key, &old.metadata)
            {
                owners.push(o);
            }
            match owner_of(key, &pod.metadata) {
                Some(o) => owners.push(o),
                None => {
                    let labels = podutil::labels(&pod.metadata);
                    for set in s.list_namespace(&key.cluster, &key.namespace) {
                        if podutil::selector_matches(
                            set.spec.as_ref().map(|s| &s.selector),
                            &labels,
                        ) {
                            let name = set.metadata.name.as_deref().unwrap_or_default();
                            owners.push(ObjectKey::new(&key.cluster, &key.namespace, name));
                        }
                    }
                }
            }
            owners.dedup();
            owners.into_iter().for_each(|o| q.add(o));
        });
        let q = queue.clone();
        revs_inf.on_change(move |c| {
            if let Some(o) = owner_of(c.key(), &c.object().metadata) {
                q.add(o);
            }
        });
        Ok(Arc::new(StatefulSetController {
            events: runtime::events::Recorder::start(
                informers.clients().clone(),
                "statefulset-controller",
            ),
            clients: informers.clients().clone(),
            sets,
            pods: pods_inf.store(),
            revisions: revs_inf.store(),
            queue,
        }))
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }
}
