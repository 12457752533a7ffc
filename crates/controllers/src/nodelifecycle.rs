//! The node lifecycle controller (upstream `pkg/controller/nodelifecycle`, its taint-based
//! eviction and the orphan part of `pkg/controller/podgc`).
//!
//! A node is healthy while its kubelet renews its Lease in `kube-node-lease` (or posts a
//! Ready heartbeat). Once neither happened for the grace period (upstream's
//! `--node-monitor-grace-period`, 40 s) the node's conditions become `Unknown` with reason
//! `NodeStatusUnknown`. The node is tainted by its Ready condition:
//! `node.kubernetes.io/unreachable` (Unknown) or `node.kubernetes.io/not-ready` (False), each
//! `NoSchedule` and `NoExecute`, removed again when it is Ready. Pods on a node with a
//! `NoExecute` taint are deleted at once unless they tolerate it, or after the smallest
//! `tolerationSeconds` of the tolerations that match (counted from the taint's `timeAdded`).
//! Pods bound to a node that has been missing for the grace period are deleted.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

use runtime::client::ClusterClients;
use runtime::error::Result;
use runtime::informer::{Change, ObjectKey, Store};
use runtime::queue::{Action, Queue};
use runtime::shared::Informers;

/// Upstream's `--node-monitor-grace-period` default.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(40);
/// The namespace of node heartbeat Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// Marks a Node mirrored from a host cluster's node (a shared-node tenant cluster's): no
/// kubelet of this cluster heartbeats it, its status is the host node's as the syncer copies
/// it, so silence does not make it Unknown (vcluster runs no node lifecycle controller for
/// shared nodes); its Ready condition still taints it and evicts its pods.
pub const MIRRORED_ANNOTATION: &str = "node.matryoshka.dev/mirrored-from-host";
const UNKNOWN_MESSAGE: &str = "Kubelet stopped posting node status.";

/// The node lifecycle controller.
pub struct NodeLifecycleController {
    clients: ClusterClients,
    nodes: Store<Node>,
    leases: Store<Lease>,
    pods: Store<Pod>,
    queue: Arc<Queue<ObjectKey>>,
    grace: Duration,
    /// When each missing node with pods was first found missing (upstream podgc's quarantine).
    missing: Mutex<HashMap<ObjectKey, Instant>>,
}

fn node_key(cluster: &str, name: &str) -> ObjectKey {
    ObjectKey::new(cluster, "", name)
}

fn pod_node(p: &Pod) -> Option<&str> {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn ready(node: &Node) -> Option<&NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

pub use runtime::selector::tolerates;

/// How long a pod may stay on a node with these `NoExecute` taints: `Some(0)` when a taint is
/// not tolerated, `None` when every taint is tolerated forever, else the smallest
/// `tolerationSeconds` of the matching tolerations (upstream `getMinTolerationTime`).
pub fn toleration_time(pod: &Pod, taints: &[&Taint]) -> Option<i64> {
    let tols: &[Toleration] = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or(&[]);
    let mut min: Option<i64> = None;
    for taint in taints {
        let matching: Vec<&Toleration> = tols.iter().filter(|t| tolerates(t, taint)).collect();
        if matching.is_empty() {
            return Some(0);
        }
        for t in matching {
            if let Some(s) = t.toleration_seconds {
                let s = s.max(0);
                min = Some(min.map_or(s, |m| m.min(s)));
            }
        }
    }
    min
}

impl NodeLifecycleController {
    pub fn new(informers: &Informers, grace: Duration) -> Result<Arc<Self>> {
        let queue: Arc<Queue<ObjectKey>> = Queue::new();
        let nodes = informers.get::<Node>()?;
        let leases = informers.get_with::<Lease>(
            LEASE_NAMESPACE,
            watcher::Config::default().fields(&format!("metadata.namespace={LEASE_NAMESPACE}")),
        )?;
        let pods = informers.get::<Pod>()?;
        let q = queue.clone();
        nodes.on_change(move |c| q.add(c.key().clone()));
        let q = queue.clone();
        leases.on_change(move |c| {
            let k = c.key();
            if k.namespace == LEASE_NAMESPACE {
                q.add(node_key(&k.cluster, &k.name));
            }
        });
        let q = queue.clone();
        pods.on_change(move |c| {
            if matches!(c, Change::Deleted(..)) {
                return;
            }
            if let Some(n) = pod_node(c.object()) {
                q.add(node_key(&c.key().cluster, n));
            }
        });
        Ok(Arc::new(NodeLifecycleController {
            clients: informers.clients().clone(),
            nodes: nodes.store(),
            leases: leases.store(),
            pods: pods.store(),
            queue,
            grace,
            missing: Mutex::new(HashMap::new()),
        }))
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }

    /// The pods bound to node `key`.
    fn pods_on(&self, key: &ObjectKey) -> Vec<(ObjectKey, Arc<Pod>)> {
        self.pods
            .list_cluster(&key.cluster)
            .into_iter()
            .filter(|(_, p)| pod_node(p) == Some(key.name.as_str()))
            .collect()
    }

    /// When the node was last heard from (seconds since the epoch).
    fn last_heard(&self, key: &ObjectKey, node: &Node) -> i64 {
        let lease = self
            .leases
            .get(&ObjectKey::new(&key.cluster, LEASE_NAMESPACE, &key.name))
            .and_then(|l| {
                l.spec
                    .as_ref()?
                    .renew_time
                    .as_ref()
                    .map(|t| t.0.as_second())
            });
        let heartbeat = ready(node)
            .and_then(|c| c.last_heartbeat_time.as_ref())
            .map(|t| t.0.as_second());
        let created = node
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second());
        [lease, heartbeat, created]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(0)
    }

    /// Monitors one node: its health, its taints, and the pods its taints evict.
    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let client = self.clients.cluster(&key.cluster)?;
        let Some(node) = self.nodes.get(&key) else {
            return self.collect_orphans(&client, &key).await;
        };
        self.missing.lock().remove(&key);
        let now = Timestamp::now();
        let silent = now.as_second() - self.last_heard(&key, &node);
        let grace = self.grace.as_secs() as i64;
        let nodes: Api<Node> = Api::all(client.clone());
        let mut next_check = Duration::from_secs((grace - silent).max(1) as u64);
        let mut node = (*node).clone();
        let mirrored = node
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(MIRRORED_ANNOTATION));
        if !mirrored && silent > grace && ready(&node).is_none_or(|c| c.status != "Unknown") {
            mark_unknown(&mut node, now);
            node = nodes
                .replace_status(&key.name, &PostParams::default(), &node)
                .await?;
        }
        // A node that has not posted a Ready condition yet is left alone until its grace
        // period runs out and it is marked Unknown above (upstream's startup grace).
        let wanted = match ready(&node).map(|c| c.status.as_str()) {
            None | Some("True") => None,
            Some("False") => Some(NOT_READY),
            Some(_) => Some(UNREACHABLE),
        };
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let mut next: Vec<Taint> = taints
            .iter()
            .filter(|t| {
                !(t.key == UNREACHABLE || t.key == NOT_READY) || Some(t.key.as_str()) == wanted
            })
            .cloned()
            .collect();
        if let Some(w) = wanted {
            for effect in ["NoSchedule", "NoExecute"] {
                if !next.iter().any(|t| t.key == w && t.effect == effect) {
                    next.push(Taint {
                        key: w.into(),
                        effect: effect.into(),
                        time_added: (effect == "NoExecute").then_some(Time(now)),
                        value: None,
                    });
                }
            }
        }
        if next != taints {
            let patch = json!({"metadata": {"resourceVersion": node.metadata.resource_version}, "spec": {"taints": next}});
            node = nodes
                .patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        if let Some(d) = self.evict(&client, &key, &node, now).await? {
            next_check = next_check.min(d);
        }
        Ok(Action::RequeueAfter(next_check))
    }

    /// Deletes the pods of a node that is gone (upstream podgc's orphans): once the API
    /// confirms it missing for the grace period, so pods bound just before their node
    /// registers are left alone.
    async fn collect_orphans(&self, client: &kube::Client, key: &ObjectKey) -> Result<Action> {
        let orphans = self.pods_on(key);
        if orphans.is_empty() {
            self.missing.lock().remove(key);
            return Ok(Action::AwaitChange);
        }
        let nodes: Api<Node> = Api::all(client.clone());
        if runtime::error::ignore_not_found(nodes.get(&key.name).await)?.is_some() {
            // The informer has not seen it yet.
            return Ok(Action::AwaitChange);
        }
        let since = *self
            .missing
            .lock()
            .entry(key.clone())
            .or_insert_with(Instant::now);
        let waited = since.elapsed();
        if waited < self.grace {
            return Ok(Action::RequeueAfter(self.grace - waited));
        }
        for (pk, _) in orphans {
            tracing::info!(pod = %pk, node = %key.name, "deleting a pod of a missing node");
            let api: Api<Pod> = Api::namespaced(client.clone(), &pk.namespace);
            ignore_gone(
                api.delete(&pk.name, &DeleteParams::default().grace_period(0))
                    .await,
            )?;
        }
        self.missing.lock().remove(key);
        Ok(Action::AwaitChange)
    }

    /// Deletes the pods the node's `NoExecute` taints no longer allow; returns when the next
    /// toleration runs out.
    async fn evict(
        &self,
        client: &kube::Client,
        key: &ObjectKey,
        node: &Node,
        now: Timestamp,
    ) -> Result<Option<Duration>> {
        let taints: Vec<&Taint> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .filter(|t| t.effect == "NoExecute")
            .collect();
        if taints.is_empty() {
            return Ok(None);
        }
        let since = taints
            .iter()
            .filter_map(|t| t.time_added.as_ref().map(|t| t.0.as_second()))
            .min()
            .unwrap_or(now.as_second());
        let mut next: Option<Duration> = None;
        for (pk, pod) in self.pods_on(key) {
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(allowed) = toleration_time(&pod, &taints) else {
                continue;
            };
            let left = since + allowed - now.as_second();
            if left > 0 {
                let d = Duration::from_secs(left as u64);
                next = Some(next.map_or(d, |n| n.min(d)));
                continue;
            }
            tracing::info!(pod = %pk, node = %key.name, "evicting a pod from a tainted node");
            let api: Api<Pod> = Api::namespaced(client.clone(), &pk.namespace);
            ignore_gone(api.delete(&pk.name, &DeleteParams::default()).await)?;
        }
        Ok(next)
    }
}

/// Sets the node's Ready and pressure conditions to Unknown (upstream `tryUpdateNodeHealth`).
fn mark_unknown(node: &mut Node, now: Timestamp) {
    let status = node.status.get_or_insert_with(Default::default);
    let conds = status.conditions.get_or_insert_with(Vec::new);
    for ty in ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"] {
        match conds.iter_mut().find(|c| c.type_ == ty) {
            Some(c) if c.status != "Unknown" => {
                c.status = "Unknown".into();
                c.reason = Some("NodeStatusUnknown".into());
                c.message = Some(UNKNOWN_MESSAGE.into());
                c.last_transition_time = Some(Time(now));
            }
            Some(_) => {}
            None => conds.push(NodeCondition {
                type_: ty.into(),
                status: "Unknown".into(),
                reason: Some("NodeStatusNeverUpdated".into()),
                message: Some(UNKNOWN_MESSAGE.into()),
                last_transition_time: Some(Time(now)),
                last_heartbeat_time: None,
            }),
        }
    }
}

fn ignore_gone<T>(r: kube::Result<T>) -> Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: "NoExecute".into(),
            ..Default::default()
        }
    }

    fn pod(tolerations: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"spec": {"containers": [], "tolerations": tolerations}}))
            .unwrap()
    }

    #[test]
    fn an_untolerated_taint_evicts_at_once() {
        let t = taint(UNREACHABLE);
        let p = pod(
            json!([{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]),
        );
        assert_eq!(toleration_time(&p, &[&t]), Some(0));
    }

    #[test]
    fn the_smallest_matching_toleration_counts() {
        let t = taint(UNREACHABLE);
        let p = pod(json!([
            {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"operator": "Exists", "tolerationSeconds": 60},
        ]));
        assert_eq!(toleration_time(&p, &[&t]), Some(60));
    }

    #[test]
    fn a_toleration_without_seconds_tolerates_forever() {
        let t = taint(UNREACHABLE);
        let p = pod(json!([{"key": UNREACHABLE, "operator": "Exists"}]));
        assert_eq!(toleration_time(&p, &[&t]), None);
    }

    #[test]
    fn equal_tolerations_need_the_same_value() {
        let mut t = taint("dedicated");
        t.value = Some("gpu".into());
        let tol = |v: &str| Toleration {
            key: Some("dedicated".into()),
            operator: Some("Equal".into()),
            value: Some(v.into()),
            ..Default::default()
        };
        assert!(tolerates(&tol("gpu"), &t));
        assert!(!tolerates(&tol("cpu"), &t));
    }
}
