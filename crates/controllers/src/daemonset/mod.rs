//! The DaemonSet controller (upstream `pkg/controller/daemon`): one pod per eligible node.
//!
//! A node is eligible when the pod template's node selector and required node affinity match
//! it and its taints are tolerated, counting the tolerations upstream adds to every daemon pod
//! ([`placement`]). Pods are created with `generateName: <ds>-`, pinned to their node by node
//! affinity (the scheduler binds them), labelled `controller-revision-hash` (the hash of the
//! template's ControllerRevision) and `pod-template-generation`. Pods on nodes that no longer
//! fit (or vanished), failed pods and duplicates are deleted. `RollingUpdate` replaces old
//! pods within `maxUnavailable` (old pods deleted, then recreated) or, with `maxSurge`, by
//! starting the new pod first and deleting the old one once the new one is available;
//! `OnDelete` waits for the user.
//!
//! [`sync`] holds the reconcile.

pub mod placement;
mod sync;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};

use crate::expectations::Expectations;
use crate::podutil;
use runtime::client::ClusterClients;
use runtime::error::Result;
use runtime::informer::{Change, ObjectKey, Store};
use runtime::queue::Queue;
use runtime::shared::Informers;

/// The label holding the DaemonSet generation a pod was made from (deprecated upstream, still
/// set).
pub const TEMPLATE_GENERATION: &str = "pod-template-generation";

/// The DaemonSet controller.
pub struct DaemonSetController {
    clients: ClusterClients,
    events: runtime::events::Recorder,
    sets: Store<DaemonSet>,
    pods: Store<Pod>,
    nodes: Store<Node>,
    revisions: Store<ControllerRevision>,
    expectations: Arc<Expectations>,
    queue: Arc<Queue<ObjectKey>>,
}

fn owner_of(
    key: &ObjectKey,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<ObjectKey> {
    let r = podutil::controller_ref(meta)?;
    (r.kind == "DaemonSet" && r.api_version.starts_with("apps/"))
        .then(|| ObjectKey::new(&key.cluster, &key.namespace, &r.name))
}

impl DaemonSetController {
    pub fn new(informers: &Informers) -> Result<Arc<Self>> {
        let queue: Arc<Queue<ObjectKey>> = Queue::new();
        let expectations = Arc::new(Expectations::default());
        let sets_inf = informers.get::<DaemonSet>()?;
        let pods_inf = informers.get::<Pod>()?;
        let nodes_inf = informers.get::<Node>()?;
        let revs_inf = informers.get::<ControllerRevision>()?;
        let sets = sets_inf.store();
        let (q, e) = (queue.clone(), expectations.clone());
        sets_inf.on_change(move |c| {
            if let Change::Deleted(k, _) = c {
                e.forget(k);
            }
            q.add(c.key().clone());
        });
        let (q, e, s) = (queue.clone(), expectations.clone(), sets.clone());
        pods_inf.on_change(move |c| {
            let (key, pod) = (c.key(), c.object());
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let Some(owner) = owner_of(key, &pod.metadata) else {
                let labels = podutil::labels(&pod.metadata);
                for ds in s.list_namespace(&key.cluster, &key.namespace) {
                    if podutil::selector_matches(ds.spec.as_ref().map(|s| &s.selector), &labels) {
                        let name = ds.metadata.name.as_deref().unwrap_or_default();
                        q.add(ObjectKey::new(&key.cluster, &key.namespace, name));
                    }
                }
                return;
            };
            match c {
                Change::Added(..) if pod.metadata.deletion_timestamp.is_none() => {
                    e.creation_observed(&owner)
                }
                Change::Added(..) | Change::Deleted(..) => e.deletion_observed(&owner, &uid),
                Change::Updated { new, .. } if new.metadata.deletion_timestamp.is_some() => {
                    e.deletion_observed(&owner, &uid)
                }
                Change::Updated { .. } => {}
            }
            q.add(owner);
        });
        let (q, s) = (queue.clone(), sets.clone());
        nodes_inf.on_change(move |c| {
            for (k, _) in s.list_cluster(&c.key().cluster) {
                q.add(k);
            }
        });
        let q = queue.clone();
        revs_inf.on_change(move |c| {
            if let Some(o) = owner_of(c.key(), &c.object().metadata) {
                q.add(o);
            }
        });
        Ok(Arc::new(DaemonSetController {
            events: runtime::events::Recorder::start(
                informers.clients().clone(),
                "daemonset-controller",
            ),
            clients: informers.clients().clone(),
            sets,
            pods: pods_inf.store(),
            nodes: nodes_inf.store(),
            revisions: revs_inf.store(),
            expectations,
            queue,
        }))
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }
}
