//! The ReplicaSet controller (upstream `pkg/controller/replicaset`): keeps the number of
//! active pods of a ReplicaSet at `spec.replicas` and reports its status. The same controller
//! runs ReplicationControllers (upstream's `replicationmanager`, which wraps the ReplicaSet
//! controller in conversions): [`ReplicatedKind`] gives each kind's view as a ReplicaSet.
//!
//! Pods are claimed like upstream's `PodControllerRefManager`: an orphan pod matching the
//! selector is adopted (a controller reference with `blockOwnerDeletion` is added), an owned
//! pod that no longer matches is released. Missing pods are created from the template with
//! `generateName: <rs>-` in slow-start batches (1, 2, 4, ...); surplus pods are deleted
//! unscheduled, pending and not-ready first. [`Expectations`] keep a ReplicaSet from acting
//! twice on writes its informer has not seen yet. Each pod created or deleted is an Event on
//! the owner (`SuccessfulCreate`, `SuccessfulDelete`, `FailedCreate`, `FailedDelete`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{
    ReplicaSet, ReplicaSetCondition, ReplicaSetSpec, ReplicaSetStatus,
};
use k8s_openapi::api::core::v1::{
    Pod, ReplicationController, ReplicationControllerCondition, ReplicationControllerStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::expectations::Expectations;
use crate::podutil;
use runtime::client::ClusterClients;
use runtime::error::{Error, Result};
use runtime::events::{Recorder, WARNING};
use runtime::informer::{Change, ObjectKey, Store};
use runtime::queue::{Action, Queue};
use runtime::shared::Informers;

/// Upstream's `BurstReplicas`: the most pods created or deleted in one sync.
pub const BURST_REPLICAS: usize = 500;

/// A kind the controller keeps replicas of: ReplicaSet, or ReplicationController seen as one.
pub trait ReplicatedKind:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Default
    + DeserializeOwned
    + Serialize
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// The controller's name in logs and events (`replicaset-controller`).
    const COMPONENT: &'static str;
    /// The object as a ReplicaSet (a pointer copy for a ReplicaSet).
    fn view(obj: &Arc<Self>) -> Arc<ReplicaSet>;
    /// The object with its status replaced by `status`.
    fn with_status(obj: &Self, status: ReplicaSetStatus) -> Self;
}

impl ReplicatedKind for ReplicaSet {
    const COMPONENT: &'static str = "replicaset-controller";
    fn view(obj: &Arc<Self>) -> Arc<ReplicaSet> {
        obj.clone()
    }
    fn with_status(obj: &Self, status: ReplicaSetStatus) -> Self {
        let mut next = obj.clone();
        next.status = Some(status);
        next
    }
}

impl ReplicatedKind for ReplicationController {
    const COMPONENT: &'static str = "replication-controller";
    fn view(obj: &Arc<Self>) -> Arc<ReplicaSet> {
        let spec = obj.spec.clone().unwrap_or_default();
        // A ReplicationController selects by equality on its labels (the server defaults an
        // empty selector to the template's labels).
        let selector = LabelSelector {
            match_labels: spec.selector.filter(|s| !s.is_empty()),
            match_expressions: None,
        };
        Arc::new(ReplicaSet {
            metadata: obj.metadata.clone(),
            spec: Some(ReplicaSetSpec {
                min_ready_seconds: spec.min_ready_seconds,
                replicas: spec.replicas,
                selector,
                template: spec.template,
            }),
            status: obj.status.clone().map(|s| ReplicaSetStatus {
                available_replicas: s.available_replicas,
                conditions: s.conditions.map(|cs| {
                    cs.into_iter()
                        .map(|c| ReplicaSetCondition {
                            last_transition_time: c.last_transition_time,
                            message: c.message,
                            reason: c.reason,
                            status: c.status,
                            type_: c.type_,
                        })
                        .collect()
                }),
                fully_labeled_replicas: s.fully_labeled_replicas,
                observed_generation: s.observed_generation,
                ready_replicas: s.ready_replicas,
                replicas: s.replicas,
                terminating_replicas: None,
            }),
        })
    }
    fn with_status(obj: &Self, s: ReplicaSetStatus) -> Self {
        let mut next = obj.clone();
        next.status = Some(ReplicationControllerStatus {
            available_replicas: s.available_replicas,
            conditions: s.conditions.map(|cs| {
                cs.into_iter()
                    .map(|c| ReplicationControllerCondition {
                        last_transition_time: c.last_transition_time,
                        message: c.message,
                        reason: c.reason,
                        status: c.status,
                        type_: c.type_,
                    })
                    .collect()
            }),
            fully_labeled_replicas: s.fully_labeled_replicas,
            observed_generation: s.observed_generation,
            ready_replicas: s.ready_replicas,
            replicas: s.replicas,
        });
        next
    }
}

/// The ReplicaSet controller; `ReplicaSetController<ReplicationController>` is the
/// ReplicationController manager.
pub struct ReplicaSetController<K: ReplicatedKind = ReplicaSet> {
    clients: ClusterClients,
    sets: Store<K>,
    pods: Store<Pod>,
    expectations: Arc<Expectations>,
    queue: Arc<Queue<ObjectKey>>,
    events: Recorder,
}

/// The ReplicationController manager.
pub type ReplicationManager = ReplicaSetController<ReplicationController>;

fn owner_key<K: ReplicatedKind>(pod_key: &ObjectKey, pod: &Pod) -> Option<ObjectKey> {
    let r = podutil::controller_ref(&pod.metadata)?;
    (r.kind == K::kind(&()) && api_group(&r.api_version) == K::group(&()))
        .then(|| ObjectKey::new(&pod_key.cluster, &pod_key.namespace, &r.name))
}

/// The group of an `apiVersion` (`apps/v1` → `apps`, `v1` → ``).
fn api_group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// The sets of the pod's namespace whose selector matches it.
fn matching_sets<K: ReplicatedKind>(sets: &Store<K>, key: &ObjectKey, pod: &Pod) -> Vec<ObjectKey> {
    let labels = podutil::labels(&pod.metadata);
    sets.list_namespace(&key.cluster, &key.namespace)
        .iter()
        .map(K::view)
        .filter(|rs| podutil::selector_matches(rs.spec.as_ref().map(|s| &s.selector), &labels))
        .map(|rs| {
            ObjectKey::new(
                &key.cluster,
                &key.namespace,
                rs.metadata.name.as_deref().unwrap_or_default(),
            )
        })
        .collect()
}

fn min_ready_seconds(rs: &ReplicaSet) -> i32 {
    rs.spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

impl<K: ReplicatedKind> ReplicaSetController<K> {
    pub fn new(informers: &Informers) -> Result<Arc<Self>> {
        let queue: Arc<Queue<ObjectKey>> = Queue::new();
        let expectations = Arc::new(Expectations::default());
        let sets_inf = informers.get::<K>()?;
        let pods_inf = informers.get::<Pod>()?;
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
            let key = c.key();
            let pod = c.object();
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let observed_owner = |owner: &ObjectKey| {
                // Only a pod of the ReplicaSet we know (same uid) counts.
                let r = podutil::controller_ref(&pod.metadata);
                s.get(owner)
                    .is_some_and(|rs| rs.meta().uid.as_deref() == r.map(|r| r.uid.as_str()))
            };
            match c {
                Change::Added(..) => match owner_key::<K>(key, pod) {
                    Some(owner) if observed_owner(&owner) => {
                        if pod.metadata.deletion_timestamp.is_some() {
                            e.deletion_observed(&owner, &uid);
                        } else {
                            e.creation_observed(&owner);
                        }
                        q.add(owner);
                    }
                    Some(_) => {}
                    None => matching_sets(&s, key, pod)
                        .into_iter()
                        .for_each(|k| q.add(k)),
                },
                Change::Updated { old, new, .. } => {
                    let old_owner = owner_key::<K>(key, old);
                    let new_owner = owner_key::<K>(key, new);
                    if let Some(o) = &old_owner
                        && old_owner != new_owner
                    {
                        q.add(o.clone());
                    }
                    if old.metadata.labels != new.metadata.labels && new_owner.is_none() {
                        matching_sets(&s, key, old)
                            .into_iter()
                            .for_each(|k| q.add(k));
                    }
                    match new_owner {
                        Some(owner) => {
                            if new.metadata.deletion_timestamp.is_some() {
                                e.deletion_observed(&owner, &uid);
                            }
                            if let Some(rs) = s.get(&owner) {
                                let mrs = min_ready_seconds(&K::view(&rs));
                                if mrs > 0 && !podutil::is_ready(old) && podutil::is_ready(new) {
                                    q.add_after(owner.clone(), Duration::from_secs(mrs as u64 + 1));
                                }
                            }
                            q.add(owner);
                        }
                        None => matching_sets(&s, key, new)
                            .into_iter()
                            .for_each(|k| q.add(k)),
                    }
                }
                Change::Deleted(..) => {
                    if let Some(owner) = owner_key::<K>(key, pod) {
                        e.deletion_observed(&owner, &uid);
                        q.add(owner);
                    }
                }
            }
        });
        let clients = informers.clients().clone();
        Ok(Arc::new(ReplicaSetController {
            events: Recorder::start(clients.clone(), K::COMPONENT),
            clients,
            sets,
            pods: pods_inf.store(),
            expectations,
            queue,
        }))
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }

    /// Syncs one ReplicaSet.
    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let Some(obj) = self.sets.get(&key) else {
            self.expectations.forget(&key);
            return Ok(Action::AwaitChange);
        };
        let rs = K::view(&obj);
        let needs_sync = self.expectations.satisfied(&key);
        let client = self.clients.cluster(&key.cluster)?;
        let pods_api: Api<Pod> = Api::namespaced(client.clone(), &key.namespace);
        let uid = rs.metadata.uid.as_deref().unwrap_or_default();
        let all = self
            .pods
            .claim_candidates(&key.cluster, &key.namespace, uid);
        let active: Vec<Arc<Pod>> = all.into_iter().filter(|p| podutil::is_active(p)).collect();
        let owned = self.claim(&obj, &rs, &pods_api, active).await?;
        let mut manage_err = None;
        if needs_sync
            && rs.metadata.deletion_timestamp.is_none()
            && let Err(e) = self.manage(&key, &obj, &rs, &pods_api, &owned).await
        {
            manage_err = Some(e);
        }
        let status = calculate_status(&rs, &owned, manage_err.as_ref(), Timestamp::now());
        if rs.status.as_ref() != Some(&status) {
            let next = K::with_status(&obj, status.clone());
            let api: Api<K> = Api::namespaced(client, &key.namespace);
            let name = key.name.clone();
            match api
                .replace_status(&name, &PostParams::default(), &next)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Action::AwaitChange),
                Err(e) => return Err(e.into()),
            }
        }
        if let Some(e) = manage_err {
            return Err(e);
        }
        let mrs = min_ready_seconds(&rs);
        if mrs > 0
            && status.ready_replicas == Some(status.replicas)
            && status.available_replicas != Some(status.replicas)
        {
            return Ok(Action::RequeueAfter(Duration::from_secs(mrs as u64)));
        }
        Ok(Action::AwaitChange)
    }

    /// Adopts matching orphans and releases owned pods that stopped matching; the pods owned
    /// afterwards.
    async fn claim(
        &self,
        obj: &K,
        rs: &ReplicaSet,
        api: &Api<Pod>,
        pods: Vec<Arc<Pod>>,
    ) -> Result<Vec<Arc<Pod>>> {
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        let selector = rs.spec.as_ref().map(|s| &s.selector);
        let mut owned = Vec::new();
        let mut alive: Option<bool> = None;
        for pod in pods {
            let matches = || podutil::selector_matches(selector, &podutil::labels(&pod.metadata));
            match podutil::controller_ref(&pod.metadata) {
                Some(r) if r.uid == uid => {
                    if rs.metadata.deletion_timestamp.is_some() || matches() {
                        owned.push(pod);
                    } else {
                        release(api, &pod, &uid).await?;
                    }
                }
                Some(_) => {}
                None if rs.metadata.deletion_timestamp.is_none() && matches() => {
                    if alive.is_none() {
                        alive = Some(self.recheck_alive(api, rs).await?);
                    }
                    if alive == Some(false) {
                        continue;
                    }
                    if let Some(p) = adopt(api, &pod, obj).await? {
                        owned.push(Arc::new(p));
                    }
                }
                None => {}
            }
        }
        Ok(owned)
    }

    /// Whether the ReplicaSet, read afresh (the informer may lag), still exists and is not
    /// being deleted: nothing is adopted or created for an owner being taken apart.
    async fn recheck_alive(&self, pods: &Api<Pod>, rs: &ReplicaSet) -> Result<bool> {
        let api: Api<K> = Api::namespaced(
            pods.clone().into_client(),
            rs.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let fresh = runtime::error::ignore_not_found(
            api.get(rs.metadata.name.as_deref().unwrap_or_default())
                .await,
        )?;
        Ok(fresh.is_some_and(|f| {
            f.meta().uid == rs.metadata.uid && f.meta().deletion_timestamp.is_none()
        }))
    }

    async fn manage(
        &self,
        key: &ObjectKey,
        obj: &K,
        rs: &ReplicaSet,
        api: &Api<Pod>,
        pods: &[Arc<Pod>],
    ) -> Result<()> {
        let desired = rs
            .spec
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(1)
            .max(0) as usize;
        if pods.len() < desired {
            if !self.recheck_alive(api, rs).await? {
                return Ok(());
            }
            let count = (desired - pods.len()).min(BURST_REPLICAS);
            self.expectations.expect_creations(key, count);
            let pod = pod_from_template(obj, rs);
            let pp = PostParams::default();
            let mut created = 0;
            let mut batch = 1;
            while created < count {
                let n = batch.min(count - created);
                let results =
                    futures::future::join_all((0..n).map(|_| api.create(&pp, &pod))).await;
                let mut failed = None;
                for r in results {
                    match r {
                        Ok(p) => podutil::record_pod_event(
                            &self.events,
                            &key.cluster,
                            obj,
                            true,
                            p.metadata.name.as_deref().unwrap_or_default(),
                        ),
                        Err(e) => {
                            self.expectations.creation_observed(key);
                            // A terminating namespace refuses new pods: not an error of ours.
                            if !matches!(&e, kube::Error::Api(s) if s.code == 403) {
                                self.events.record(
                                    &key.cluster,
                                    runtime::events::reference(obj),
                                    WARNING,
                                    "FailedCreate",
                                    format!("Error creating: {}", api_message(&e)),
                                );
                                failed = Some(e);
                            }
                        }
                    }
                }
                created += n;
                if let Some(e) = failed {
                    for _ in created..count {
                        self.expectations.creation_observed(key);
                    }
                    return Err(Error::Kube(e));
                }
                batch *= 2;
            }
        } else if pods.len() > desired {
            let count = (pods.len() - desired).min(BURST_REPLICAS);
            let mut ranked: Vec<&Arc<Pod>> = pods.iter().collect();
            ranked.sort_by(|a, b| podutil::deletion_order(a, b));
            let victims: Vec<&Arc<Pod>> = ranked.into_iter().take(count).collect();
            let uids = victims
                .iter()
                .map(|p| p.metadata.uid.clone().unwrap_or_default());
            self.expectations.expect_deletions(key, uids);
            let dp = DeleteParams::default();
            let results = futures::future::join_all(
                victims
                    .iter()
                    .map(|p| api.delete(p.metadata.name.as_deref().unwrap_or_default(), &dp)),
            )
            .await;
            let mut failed = None;
            for (p, r) in victims.iter().zip(results) {
                let name = p.metadata.name.as_deref().unwrap_or_default();
                match r {
                    Ok(_) => {
                        podutil::record_pod_event(&self.events, &key.cluster, obj, false, name)
                    }
                    Err(e) => {
                        self.expectations
                            .deletion_observed(key, p.metadata.uid.as_deref().unwrap_or_default());
                        if !matches!(&e, kube::Error::Api(s) if s.code == 404) {
                            self.events.record(
                                &key.cluster,
                                runtime::events::reference(obj),
                                WARNING,
                                "FailedDelete",
                                format!("Error deleting: {}", api_message(&e)),
                            );
                            failed = Some(e);
                        }
                    }
                }
            }
            if let Some(e) = failed {
                return Err(Error::Kube(e));
            }
        }
        Ok(())
    }
}

/// The message of an API error (the `Status` message for an API answer).
fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        e => e.to_string(),
    }
}

/// A pod of `obj` (seen as `rs`), as upstream's `GetPodFromTemplate` makes it.
pub fn pod_from_template<K: ReplicatedKind>(obj: &K, rs: &ReplicaSet) -> Pod {
    let template = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .unwrap_or_default();
    let tm = template.metadata.unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!(
                "{}-",
                rs.metadata.name.as_deref().unwrap_or_default()
            )),
            labels: tm.labels,
            annotations: tm.annotations,
            finalizers: tm.finalizers,
            owner_references: Some(vec![podutil::new_controller_ref(
                obj.meta(),
                &K::api_version(&()),
                &K::kind(&()),
            )]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

/// Adds `owner` as controller of an orphan pod (optimistic on the pod's resourceVersion).
async fn adopt<K: ReplicatedKind>(api: &Api<Pod>, pod: &Pod, owner: &K) -> Result<Option<Pod>> {
    let mut refs = pod.metadata.owner_references.clone().unwrap_or_default();
    refs.push(podutil::new_controller_ref(
        owner.meta(),
        &K::api_version(&()),
        &K::kind(&()),
    ));
    let patch = json!({"metadata": {
        "ownerReferences": refs,
        "uid": pod.metadata.uid,
        "resourceVersion": pod.metadata.resource_version,
    }});
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(p) => Ok(Some(p)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Removes the reference to `owner_uid` from a pod that no longer matches.
async fn release(api: &Api<Pod>, pod: &Pod, owner_uid: &str) -> Result<()> {
    let refs: Vec<_> = pod
        .metadata
        .owner_references
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.uid != owner_uid)
        .collect();
    let patch = json!({"metadata": {
        "ownerReferences": refs,
        "uid": pod.metadata.uid,
        "resourceVersion": pod.metadata.resource_version,
    }});
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The status of `rs` given its active owned pods.
pub fn calculate_status(
    rs: &ReplicaSet,
    pods: &[Arc<Pod>],
    manage_err: Option<&Error>,
    now: Timestamp,
) -> ReplicaSetStatus {
    let template_labels: BTreeMap<String, String> = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .map(podutil::labels)
        .unwrap_or_default();
    let mrs = min_ready_seconds(rs);
    let fully_labeled = pods
        .iter()
        .filter(|p| {
            let l = podutil::labels(&p.metadata);
            template_labels.iter().all(|(k, v)| l.get(k) == Some(v))
        })
        .count() as i32;
    let ready = pods.iter().filter(|p| podutil::is_ready(p)).count() as i32;
    let available = pods
        .iter()
        .filter(|p| podutil::is_available(p, mrs, now))
        .count() as i32;
    let old = rs.status.clone().unwrap_or_default();
    let mut conditions: Vec<ReplicaSetCondition> = old
        .conditions
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.type_ != "ReplicaFailure")
        .collect();
    if let Some(e) = manage_err {
        let desired = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1) as usize;
        let reason = if pods.len() < desired {
            "FailedCreate"
        } else {
            "FailedDelete"
        };
        let previous = old
            .conditions
            .as_deref()
            .unwrap_or_default()
            .iter()
            .find(|c| c.type_ == "ReplicaFailure")
            .cloned();
        conditions.push(match previous {
            Some(c) => c,
            None => ReplicaSetCondition {
                type_: "ReplicaFailure".into(),
                status: "True".into(),
                reason: Some(reason.into()),
                message: Some(e.to_string()),
                last_transition_time: Some(Time(now)),
            },
        });
    }
    ReplicaSetStatus {
        replicas: pods.len() as i32,
        fully_labeled_replicas: Some(fully_labeled),
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        observed_generation: rs.metadata.generation,
        conditions: (!conditions.is_empty()).then_some(conditions),
        terminating_replicas: old.terminating_replicas,
    }
}
