//! What the scheduler knows about a node: its labels, taints and allocatable resources, and the
//! pods on it with their summed requests (upstream `NodeInfo`).
//!
//! Usage is incremental: adding or removing a pod (bound, or assumed while its binding is in
//! flight) adjusts the sums, so no filter ever walks all pods to learn what a node has left.
//! A node the cache has pods for but no `Node` object (deleted, or not seen yet) is a "ghost":
//! its pods are still counted, but it is never a candidate.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as core;

use crate::podinfo::{HostPort, PodInfo};
use crate::resource::{NonZero, Resource};
use crate::selector::Labels;

/// The parts of a `v1.Node` scheduling looks at.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpec {
    pub labels: Labels,
    pub taints: Vec<core::Taint>,
    pub unschedulable: bool,
    pub allocatable: Resource,
}

impl NodeSpec {
    pub fn new(node: &core::Node) -> NodeSpec {
        let spec = node.spec.as_ref();
        NodeSpec {
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints: spec.and_then(|s| s.taints.clone()).unwrap_or_default(),
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            allocatable: node
                .status
                .as_ref()
                .and_then(|s| s.allocatable.as_ref())
                .map(Resource::from_list)
                .unwrap_or_default(),
        }
    }
}

/// A node and the pods on it.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub name: Arc<str>,
    /// `None` for a ghost (pods without a known node).
    pub node: Option<Arc<NodeSpec>>,
    pub pods: Vec<Arc<PodInfo>>,
    /// Sum of the pods' requests.
    pub requested: Resource,
    /// Sum of the pods' non-zero CPU and memory (scoring).
    pub non_zero: NonZero,
    pub used_ports: Vec<HostPort>,
    /// How many pods here have pod affinity or anti-affinity terms.
    pub pods_with_affinity: usize,
    /// How many pods here have required anti-affinity terms.
    pub pods_with_required_anti_affinity: usize,
}

impl NodeInfo {
    pub fn new(name: Arc<str>, node: Option<Arc<NodeSpec>>) -> Self {
        NodeInfo {
            name,
            node,
            pods: Vec::new(),
            requested: Resource::default(),
            non_zero: NonZero::default(),
            used_ports: Vec::new(),
            pods_with_affinity: 0,
            pods_with_required_anti_affinity: 0,
        }
    }

    /// The node's labels (empty for a ghost).
    pub fn labels(&self) -> &Labels {
        static EMPTY: Labels = Labels::new();
        self.node.as_ref().map(|n| &n.labels).unwrap_or(&EMPTY)
    }

    /// Accounts for a pod on this node.
    pub fn add_pod(&mut self, pod: Arc<PodInfo>) {
        self.requested.add(&pod.requests, 1);
        self.non_zero.add(pod.non_zero, 1);
        self.used_ports.extend(pod.host_ports.iter().cloned());
        if pod.has_affinity() {
            self.pods_with_affinity += 1;
        }
        if pod.has_required_anti_affinity() {
            self.pods_with_required_anti_affinity += 1;
        }
        self.pods.push(pod);
    }

    /// Stops accounting for the pod with this namespace and name; returns it.
    pub fn remove_pod(&mut self, namespace: &str, name: &str) -> Option<Arc<PodInfo>> {
        let i = self
            .pods
            .iter()
            .position(|p| p.key.name == name && p.key.namespace == namespace)?;
        let pod = self.pods.swap_remove(i);
        self.requested.add(&pod.requests, -1);
        self.requested.scalars.retain(|(_, v)| *v != 0);
        self.non_zero.add(pod.non_zero, -1);
        for hp in &pod.host_ports {
            if let Some(j) = self.used_ports.iter().position(|u| u == hp) {
                self.used_ports.swap_remove(j);
            }
        }
        if pod.has_affinity() {
            self.pods_with_affinity -= 1;
        }
        if pod.has_required_anti_affinity() {
            self.pods_with_required_anti_affinity -= 1;
        }
        Some(pod)
    }

    /// Whether nothing refers to this entry any more (a ghost with no pods).
    pub fn is_empty_ghost(&self) -> bool {
        self.node.is_none() && self.pods.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, cpu: &str, host_port: Option<i32>) -> Arc<PodInfo> {
        let mut c = json!({"name": "c", "resources": {"requests": {"cpu": cpu}}});
        if let Some(p) = host_port {
            c["ports"] = json!([{"containerPort": 80, "hostPort": p}]);
        }
        let p = json!({"metadata": {"name": name, "namespace": "d"}, "spec": {"containers": [c]}});
        Arc::new(PodInfo::new(
            &Arc::from("a"),
            &serde_json::from_value(p).unwrap(),
        ))
    }

    #[test]
    fn adding_and_removing_pods_keeps_the_sums_exact() {
        let mut n = NodeInfo::new(Arc::from("n"), None);
        n.add_pod(pod("a", "500m", Some(8080)));
        n.add_pod(pod("b", "250m", None));
        assert_eq!(n.requested.milli_cpu, 750);
        assert_eq!(n.used_ports.len(), 1);
        let removed = n.remove_pod("d", "a").unwrap();
        assert_eq!(removed.key.name, "a");
        assert_eq!(n.requested.milli_cpu, 250);
        assert!(n.used_ports.is_empty());
        assert!(n.remove_pod("d", "a").is_none());
        n.remove_pod("d", "b");
        assert!(n.is_empty_ghost());
        assert_eq!(n.non_zero, NonZero::default());
    }

    #[test]
    fn node_spec_reads_allocatable_taints_and_unschedulable() {
        let node: core::Node = serde_json::from_value(json!({
            "metadata": {"name": "n", "labels": {"zone": "a"}},
            "spec": {"unschedulable": true, "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}
        }))
        .unwrap();
        let s = NodeSpec::new(&node);
        assert!(s.unschedulable);
        assert_eq!(s.taints.len(), 1);
        assert_eq!(s.allocatable.milli_cpu, 2000);
        assert_eq!(s.allocatable.pods, 110);
        assert_eq!(s.labels.get("zone").map(String::as_str), Some("a"));
    }
}
