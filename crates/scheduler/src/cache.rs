//! The scheduler cache: every logical cluster's nodes with the pods on them, and the objects
//! filters read (priority classes, namespaces, claims, volumes, storage classes).
//!
//! State is kept per cluster and a cluster's entry exists only while it holds objects, so
//! memory grows with objects, never with the number of clusters. Pods are accounted on their
//! node as soon as the scheduler picks the node ("assumed"), before the binding reaches the
//! API server, so the next pod sees the capacity already used; the pod watch later confirms
//! the binding, or the binder forgets the pod if the binding failed.

use std::collections::HashMap;
use std::sync::Arc;

use crate::nodeinfo::{NodeInfo, NodeSpec};
use crate::podinfo::{PodInfo, PodKey, PriorityLookup};
use crate::selector::{Labels, NodeSelector};

/// A pod the cache accounts for, and where.
#[derive(Debug, Clone)]
pub struct PodEntry {
    pub node: Arc<str>,
    pub info: Arc<PodInfo>,
    /// Picked by the scheduler, not yet seen bound by the watch.
    pub assumed: bool,
}

/// A PersistentVolumeClaim as the VolumeBinding filter sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimInfo {
    pub volume_name: String,
    pub storage_class: String,
    pub deleting: bool,
}

/// A PriorityClass: value, preemption policy, whether it is the global default.
#[derive(Debug, Clone, PartialEq)]
pub struct PriorityClassInfo {
    pub value: i32,
    pub preemption_policy: Option<String>,
    pub global_default: bool,
}

/// One logical cluster's state.
#[derive(Debug, Default)]
pub struct ClusterState {
    /// Nodes and ghosts (pods whose node is unknown), in a stable order for round-robin.
    pub nodes: Vec<NodeInfo>,
    pub node_index: HashMap<Arc<str>, usize>,
    /// Nodes with a `Node` object (the candidates).
    pub live_nodes: usize,
    /// Assigned and assumed pods by (namespace, name).
    pub pods: HashMap<(String, String), PodEntry>,
    pub priority_classes: HashMap<String, PriorityClassInfo>,
    pub namespaces: HashMap<String, Labels>,
    pub claims: HashMap<(String, String), ClaimInfo>,
    /// PersistentVolumes: their required node affinity, if any.
    pub volumes: HashMap<String, Option<NodeSelector>>,
    /// StorageClasses: whether binding waits for the first consumer.
    pub storage_classes: HashMap<String, bool>,
    /// Pods nominated to a node by preemption, by node.
    pub nominated: HashMap<Arc<str>, Vec<Arc<PodInfo>>>,
    /// Where the round-robin over nodes starts next.
    pub next_start: usize,
    /// Pods with pod (anti-)affinity terms anywhere in the cluster.
    pub pods_with_affinity: usize,
    pub pods_with_required_anti_affinity: usize,
}

impl PriorityLookup for ClusterState {
    fn priority_class(&self, name: &str) -> Option<(i32, Option<String>)> {
        let c = if name.is_empty() {
            self.priority_classes.values().find(|c| c.global_default)?
        } else {
            self.priority_classes.get(name)?
        };
        Some((c.value, c.preemption_policy.clone()))
    }
}

impl ClusterState {
    fn is_empty(&self) -> bool {
        self.nodes.is_empty()
            && self.pods.is_empty()
            && self.priority_classes.is_empty()
            && self.namespaces.is_empty()
            && self.claims.is_empty()
            && self.volumes.is_empty()
            && self.storage_classes.is_empty()
            && self.nominated.is_empty()
    }

    /// The node entry (creating a ghost when absent).
    fn entry(&mut self, name: &str) -> &mut NodeInfo {
        let i = match self.node_index.get(name) {
            Some(i) => *i,
            None => {
                let name: Arc<str> = Arc::from(name);
                self.nodes.push(NodeInfo::new(name.clone(), None));
                self.node_index.insert(name, self.nodes.len() - 1);
                self.nodes.len() - 1
            }
        };
        &mut self.nodes[i]
    }

    /// Drops the node entry at `name` if nothing refers to it any more.
    fn gc_node(&mut self, name: &str) {
        let Some(&i) = self.node_index.get(name) else {
            return;
        };
        if !self.nodes[i].is_empty_ghost() {
            return;
        }
        self.node_index.remove(name);
        self.nodes.swap_remove(i);
        if i < self.nodes.len() {
            let moved = self.nodes[i].name.clone();
            self.node_index.insert(moved, i);
        }
    }

    pub fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.node_index.get(name).map(|i| &self.nodes[*i])
    }

    fn account(&mut self, node: Arc<str>, info: Arc<PodInfo>, assumed: bool) {
        if info.has_affinity() {
            self.pods_with_affinity += 1;
        }
        if info.has_required_anti_affinity() {
            self.pods_with_required_anti_affinity += 1;
        }
        self.entry(&node).add_pod(info.clone());
        let key = (info.key.namespace.clone(), info.key.name.clone());
        self.pods.insert(
            key,
            PodEntry {
                node,
                info,
                assumed,
            },
        );
    }

    fn unaccount(&mut self, namespace: &str, name: &str) -> Option<PodEntry> {
        let e = self
            .pods
            .remove(&(namespace.to_string(), name.to_string()))?;
        if e.info.has_affinity() {
            self.pods_with_affinity -= 1;
        }
        if e.info.has_required_anti_affinity() {
            self.pods_with_required_anti_affinity -= 1;
        }
        if let Some(&i) = self.node_index.get(&e.node) {
            self.nodes[i].remove_pod(namespace, name);
        }
        self.gc_node(&e.node.clone());
        Some(e)
    }

    /// Labels of a namespace (for namespace selectors of affinity terms).
    pub fn namespace_labels(&self, ns: &str) -> Option<&Labels> {
        self.namespaces.get(ns)
    }
}

/// What changed when a node was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeChange {
    Added,
    /// Something scheduling looks at changed.
    Updated,
    Unchanged,
}

/// Every cluster's state.
#[derive(Debug, Default)]
pub struct Cache {
    clusters: HashMap<Arc<str>, ClusterState>,
}

impl Cache {
    /// The interned name of a cluster (shared by every key of that cluster).
    pub fn intern(&self, cluster: &str) -> Arc<str> {
        self.clusters
            .get_key_value(cluster)
            .map(|(k, _)| k.clone())
            .unwrap_or_else(|| Arc::from(cluster))
    }

    pub fn cluster(&self, cluster: &str) -> Option<&ClusterState> {
        self.clusters.get(cluster)
    }

    /// A cluster's state, created on first use.
    pub fn cluster_mut(&mut self, cluster: &Arc<str>) -> &mut ClusterState {
        self.clusters.entry(cluster.clone()).or_default()
    }

    /// Drops a cluster's state once it holds nothing.
    pub fn gc(&mut self, cluster: &str) {
        if self
            .clusters
            .get(cluster)
            .is_some_and(ClusterState::is_empty)
        {
            self.clusters.remove(cluster);
        }
    }

    /// How many clusters hold state.
    pub fn cluster_count(&self) -> usize {
        self.clusters.len()
    }

    /// Adds or updates a node.
    pub fn upsert_node(&mut self, cluster: &Arc<str>, name: &str, spec: NodeSpec) -> NodeChange {
        let c = self.cluster_mut(cluster);
        let was_live = c.node(name).is_some_and(|n| n.node.is_some());
        let n = c.entry(name);
        let change = match &n.node {
            None => NodeChange::Added,
            Some(old) if **old == spec => NodeChange::Unchanged,
            Some(_) => NodeChange::Updated,
        };
        n.node = Some(Arc::new(spec));
        if !was_live {
            c.live_nodes += 1;
        }
        change
    }

    /// Removes a node; its pods stay accounted on a ghost until they go.
    pub fn remove_node(&mut self, cluster: &str, name: &str) -> bool {
        let Some(c) = self.clusters.get_mut(cluster) else {
            return false;
        };
        let Some(&i) = c.node_index.get(name) else {
            return false;
        };
        if c.nodes[i].node.take().is_none() {
            return false;
        }
        c.live_nodes -= 1;
        c.gc_node(name);
        self.gc(cluster);
        true
    }

    /// Records an assigned pod seen by the watch (confirming it when it was assumed).
    pub fn upsert_assigned(&mut self, info: Arc<PodInfo>) {
        let cluster = info.key.cluster.clone();
        let c = self.cluster_mut(&cluster);
        c.unaccount(&info.key.namespace, &info.key.name);
        let node: Arc<str> = Arc::from(info.node_name.as_str());
        c.account(node, info, false);
    }

    /// Accounts a pod on the node the scheduler picked, before its binding lands.
    pub fn assume(&mut self, info: Arc<PodInfo>, node: &Arc<str>) {
        let cluster = info.key.cluster.clone();
        let c = self.cluster_mut(&cluster);
        c.unaccount(&info.key.namespace, &info.key.name);
        c.account(node.clone(), info, true);
    }

    /// Undoes an assumption whose binding failed (no-op once the watch confirmed the pod).
    pub fn forget(&mut self, key: &PodKey) {
        if let Some(c) = self.clusters.get_mut(&key.cluster)
            && c.pods
                .get(&(key.namespace.clone(), key.name.clone()))
                .is_some_and(|e| e.assumed)
        {
            c.unaccount(&key.namespace, &key.name);
            self.gc(&key.cluster);
        }
    }

    /// Whether the pod is assumed (its binding is in flight).
    pub fn is_assumed(&self, key: &PodKey) -> bool {
        self.clusters.get(&key.cluster).is_some_and(|c| {
            c.pods
                .get(&(key.namespace.clone(), key.name.clone()))
                .is_some_and(|e| e.assumed)
        })
    }

    /// Stops accounting for a pod (deleted, finished); returns what it was.
    pub fn remove_pod(&mut self, key: &PodKey) -> Option<PodEntry> {
        let c = self.clusters.get_mut(&key.cluster)?;
        let e = c.unaccount(&key.namespace, &key.name);
        self.gc(&key.cluster);
        e
    }

    /// Records where a pending pod is nominated (`None`: nowhere).
    pub fn set_nominated(&mut self, info: &Arc<PodInfo>, node: Option<&str>) {
        let cluster = info.key.cluster.clone();
        let c = self.cluster_mut(&cluster);
        c.nominated.retain(|_, pods| {
            pods.retain(|p| p.key != info.key);
            !pods.is_empty()
        });
        if let Some(n) = node.filter(|n| !n.is_empty()) {
            c.nominated
                .entry(Arc::from(n))
                .or_default()
                .push(info.clone());
        }
        self.gc(&cluster);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(cluster: &Arc<str>, name: &str, node: &str, cpu: &str) -> Arc<PodInfo> {
        let p = json!({"metadata": {"name": name, "namespace": "d"}, "spec": {
            "nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}});
        Arc::new(PodInfo::new(cluster, &serde_json::from_value(p).unwrap()))
    }

    fn spec(cpu: &str) -> NodeSpec {
        NodeSpec::new(
            &serde_json::from_value(
                json!({"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": cpu, "pods": "10"}}}),
            )
            .unwrap(),
        )
    }

    #[test]
    fn assumed_pods_count_at_once_and_are_forgotten_on_failure() {
        let mut cache = Cache::default();
        let a: Arc<str> = Arc::from("a");
        assert_eq!(cache.upsert_node(&a, "n1", spec("2")), NodeChange::Added);
        let p = pod(&a, "p", "", "500m");
        cache.assume(p.clone(), &Arc::from("n1"));
        assert!(cache.is_assumed(&p.key));
        assert_eq!(
            cache
                .cluster("a")
                .unwrap()
                .node("n1")
                .unwrap()
                .requested
                .milli_cpu,
            500
        );
        cache.forget(&p.key);
        assert!(!cache.is_assumed(&p.key));
        assert_eq!(
            cache
                .cluster("a")
                .unwrap()
                .node("n1")
                .unwrap()
                .requested
                .milli_cpu,
            0
        );
    }

    #[test]
    fn a_confirmed_pod_is_not_forgotten() {
        let mut cache = Cache::default();
        let a: Arc<str> = Arc::from("a");
        cache.upsert_node(&a, "n1", spec("2"));
        let p = pod(&a, "p", "n1", "500m");
        cache.assume(p.clone(), &Arc::from("n1"));
        cache.upsert_assigned(p.clone());
        cache.forget(&p.key);
        assert_eq!(
            cache.cluster("a").unwrap().node("n1").unwrap().pods.len(),
            1
        );
    }

    #[test]
    fn clusters_vanish_when_their_last_object_goes() {
        let mut cache = Cache::default();
        let a: Arc<str> = Arc::from("a");
        let p = pod(&a, "p", "ghost", "1");
        cache.upsert_assigned(p.clone());
        assert_eq!(cache.cluster("a").unwrap().live_nodes, 0);
        assert_eq!(
            cache.cluster("a").unwrap().nodes.len(),
            1,
            "a ghost holds the pod"
        );
        cache.remove_pod(&p.key);
        assert_eq!(cache.cluster_count(), 0);
        cache.upsert_node(&a, "n1", spec("1"));
        assert_eq!(
            cache.upsert_node(&a, "n1", spec("1")),
            NodeChange::Unchanged
        );
        assert_eq!(cache.upsert_node(&a, "n1", spec("2")), NodeChange::Updated);
        assert!(cache.remove_node("a", "n1"));
        assert_eq!(cache.cluster_count(), 0);
    }

    #[test]
    fn pods_of_a_deleted_node_stay_counted_on_its_ghost() {
        let mut cache = Cache::default();
        let a: Arc<str> = Arc::from("a");
        cache.upsert_node(&a, "n1", spec("2"));
        cache.upsert_assigned(pod(&a, "p", "n1", "1"));
        cache.remove_node("a", "n1");
        let c = cache.cluster("a").unwrap();
        assert_eq!(c.live_nodes, 0);
        assert_eq!(c.node("n1").unwrap().requested.milli_cpu, 1000);
        assert_eq!(cache.upsert_node(&a, "n1", spec("2")), NodeChange::Added);
        assert_eq!(cache.cluster("a").unwrap().live_nodes, 1);
    }
}
