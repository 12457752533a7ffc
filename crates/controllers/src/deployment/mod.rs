//! The Deployment controller (upstream `pkg/controller/deployment`): rolls a Deployment's pod
//! template out through ReplicaSets.
//!
//! Each template gets a ReplicaSet named `<deployment>-<pod-template-hash>` whose selector and
//! labels carry the hash; the newest template's set is scaled up and the others down within
//! maxSurge/maxUnavailable (RollingUpdate), or all old pods go first (Recreate). Revisions
//! number the sets (`deployment.kubernetes.io/revision`), so `kubectl rollout undo` — which
//! patches the template back — reuses an old set under a new revision. Paused deployments only
//! scale. Status and the Progressing/Available conditions follow upstream's reasons.
//!
//! Files: this one wires informers and dispatches a sync; [`rollout`] finds, creates, scales
//! and cleans up ReplicaSets; [`status`] computes status and conditions; [`util`] holds the
//! arithmetic.

pub mod rollout;
pub mod status;
pub mod util;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;

use crate::podutil;
use runtime::client::ClusterClients;
use runtime::error::Result;
use runtime::informer::{Change, ObjectKey, Store};
use runtime::queue::{Action, Queue};
use runtime::shared::Informers;

/// The Deployment controller.
pub struct DeploymentController {
    clients: ClusterClients,
    events: runtime::events::Recorder,
    deployments: Store<Deployment>,
    sets: Store<ReplicaSet>,
    pods: Store<Pod>,
    queue: Arc<Queue<ObjectKey>>,
}

fn owner_key(key: &ObjectKey, rs: &ReplicaSet) -> Option<ObjectKey> {
    let r = podutil::controller_ref(&rs.metadata)?;
    (r.kind == "Deployment" && r.api_version.starts_with("apps/"))
        .then(|| ObjectKey::new(&key.cluster, &key.namespace, &r.name))
}

/// The Deployments of the set's namespace whose selector matches it.
fn matching(deployments: &Store<Deployment>, key: &ObjectKey, rs: &ReplicaSet) -> Vec<ObjectKey> {
    let labels = podutil::labels(&rs.metadata);
    deployments
        .list_namespace(&key.cluster, &key.namespace)
        .iter()
        .filter(|d| podutil::selector_matches(d.spec.as_ref().map(|s| &s.selector), &labels))
        .map(|d| {
            ObjectKey::new(
                &key.cluster,
                &key.namespace,
                d.metadata.name.as_deref().unwrap_or_default(),
            )
        })
        .collect()
}

impl DeploymentController {
    pub fn new(informers: &Informers) -> Result<Arc<Self>> {
        let queue: Arc<Queue<ObjectKey>> = Queue::new();
        let d_inf = informers.get::<Deployment>()?;
        let rs_inf = informers.get::<ReplicaSet>()?;
        let pod_inf = informers.get::<Pod>()?;
        let q = queue.clone();
        d_inf.on_change(move |c| q.add(c.key().clone()));
        let (q, ds) = (queue.clone(), d_inf.store());
        rs_inf.on_change(move |c| {
            let key = c.key();
            match c {
                Change::Updated { old, new, .. } => {
                    let (o, n) = (owner_key(key, old), owner_key(key, new));
                    if let Some(o) = &o
                        && o != n.as_ref().unwrap_or(o)
                    {
                        q.add(o.clone());
                    }
                    match n {
                        Some(n) => q.add(n),
                        None if old.metadata.labels != new.metadata.labels || o.is_some() => {
                            matching(&ds, key, new).into_iter().for_each(|k| q.add(k))
                        }
                        None => {}
                    }
                }
                Change::Added(_, rs) | Change::Deleted(_, rs) => match owner_key(key, rs) {
                    Some(o) => q.add(o),
                    None if matches!(c, Change::Added(..)) => {
                        matching(&ds, key, rs).into_iter().for_each(|k| q.add(k))
                    }
                    None => {}
                },
            }
        });
        // Recreate waits for old pods to be gone: their deletion may unblock it.
        let (q, ds, rss) = (queue.clone(), d_inf.store(), rs_inf.store());
        pod_inf.on_change(move |c| {
            let Change::Deleted(key, pod) = c else { return };
            let Some(r) = podutil::controller_ref(&pod.metadata) else {
                return;
            };
            let rs_key = ObjectKey::new(&key.cluster, &key.namespace, &r.name);
            if let Some(rs) = rss.get(&rs_key)
                && let Some(dk) = owner_key(&rs_key, &rs)
                && ds.get(&dk).is_some_and(|d| !util::is_rolling(&d))
            {
                q.add(dk);
            }
        });
        Ok(Arc::new(DeploymentController {
            events: runtime::events::Recorder::start(
                informers.clients().clone(),
                "deployment-controller",
            ),
            clients: informers.clients().clone(),
            deployments: d_inf.store(),
            sets: rs_inf.store(),
            pods: pod_inf.store(),
            queue,
        }))
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }

    /// Syncs one Deployment.
    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let Some(current) = self.deployments.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        let client = self.clients.cluster(&key.cluster)?;
        let mut s = rollout::Sync {
            d: util::defaulted(&current),
            deployments: Api::namespaced(client.clone(), &key.namespace),
            sets: Api::namespaced(client, &key.namespace),
            requeue: None,
            cluster: key.cluster.clone(),
            events: self.events.clone(),
        };
        let selector = s.d.spec.as_ref().map(|sp| &sp.selector);
        let selects_all = selector.is_none_or(|sel| {
            sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
                && sel.match_expressions.as_ref().is_none_or(|e| e.is_empty())
        });
        if selects_all {
            let generation = s.d.metadata.generation;
            let st = s.d.status.get_or_insert_with(Default::default);
            if st.observed_generation < generation {
                st.observed_generation = generation;
                s.update_status().await?;
            }
            return Ok(Action::AwaitChange);
        }
        let uid = s.d.metadata.uid.as_deref().unwrap_or_default();
        let candidates = self
            .sets
            .claim_candidates(&key.cluster, &key.namespace, uid);
        let rs_list = s.claim(candidates).await?;
        if s.d.metadata.deletion_timestamp.is_some() {
            let (new_rs, old) = s.find_sets(&rs_list);
            s.sync_status(new_rs.as_ref(), &old).await?;
            return Ok(Action::AwaitChange);
        }
        s.check_paused_conditions().await?;
        let paused = s.d.spec.as_ref().and_then(|sp| sp.paused).unwrap_or(false);
        if paused || s.is_scaling_event(&rs_list) {
            s.sync(&rs_list).await?;
        } else if util::is_rolling(&s.d) {
            s.rollout_rolling(&rs_list).await?;
        } else {
            let pods = self.pods.list_namespace(&key.cluster, &key.namespace);
            s.rollout_recreate(&rs_list, &pods).await?;
        }
        Ok(match s.requeue {
            Some(d) => Action::RequeueAfter(d),
            None => Action::AwaitChange,
        })
    }
}

impl rollout::Sync {
    /// Writes the Deployment's status (the rest of the object is ignored by the server).
    pub async fn update_status(&mut self) -> Result<()> {
        let name = self.d.metadata.name.clone().unwrap_or_default();
        let updated = self
            .deployments
            .replace_status(&name, &PostParams::default(), &self.d)
            .await?;
        self.d = util::defaulted(&updated);
        Ok(())
    }

    pub(crate) fn requeue_after(&mut self, d: Duration) {
        self.requeue = Some(self.requeue.map_or(d, |r| r.min(d)));
    }
}
