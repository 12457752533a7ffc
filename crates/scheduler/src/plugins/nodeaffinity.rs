//! NodeAffinity, NodeName and NodePorts: where a pod asks to run, by node labels, by name,
//! and by the host ports it needs.
//!
//! NodeAffinity's filter requires every `nodeSelector` label and, when given, one matching
//! required term (`node(s) didn't match Pod's node affinity/selector`, unresolvable); its
//! score sums the weights of matching preferred terms (normalized by the maximum, weight 2).
//! NodeName rejects other nodes than `spec.nodeName`. NodePorts rejects a node where a
//! requested host port is taken (same protocol and port, same IP or a wildcard).

use crate::framework::{Plugin, Status};
use crate::nodeinfo::{NodeInfo, NodeSpec};
use crate::podinfo::PodInfo;
use crate::selector::map_matches;

/// Whether the pod's node selector and required node affinity admit the node.
pub fn required_matches(pod: &PodInfo, node_name: &str, node: &NodeSpec) -> bool {
    map_matches(&pod.node_selector, &node.labels)
        && pod
            .required_node_affinity
            .as_ref()
            .is_none_or(|s| s.matches(&node.labels, node_name))
}

/// NodeAffinity's filter.
pub fn filter(pod: &PodInfo, node_name: &str, node: &NodeSpec) -> Result<(), Status> {
    if required_matches(pod, node_name, node) {
        Ok(())
    } else {
        Err(Status::unresolvable(
            Plugin::NodeAffinity,
            "node(s) didn't match Pod's node affinity/selector",
        ))
    }
}

/// NodeAffinity's raw score: the summed weights of matching preferred terms.
pub fn score(pod: &PodInfo, node_name: &str, node: &NodeSpec) -> i64 {
    pod.preferred_node_affinity
        .iter()
        .filter(|(_, t)| t.matches(&node.labels, node_name))
        .map(|(w, _)| *w)
        .sum()
}

/// NodeName's filter.
pub fn filter_node_name(pod: &PodInfo, node_name: &str) -> Result<(), Status> {
    if pod.node_name.is_empty() || pod.node_name == node_name {
        Ok(())
    } else {
        Err(Status::unresolvable(
            Plugin::NodeName,
            "node(s) didn't match the requested node name",
        ))
    }
}

/// NodePorts' filter.
pub fn filter_ports(pod: &PodInfo, node: &NodeInfo) -> Result<(), Status> {
    let conflict = pod
        .host_ports
        .iter()
        .any(|want| node.used_ports.iter().any(|used| used.conflicts(want)));
    if conflict {
        Err(Status::unschedulable(
            Plugin::NodePorts,
            "node(s) didn't have free ports for the requested pod ports",
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn pod(spec: serde_json::Value) -> PodInfo {
        let p = json!({"metadata": {"name": "p", "namespace": "d"}, "spec": spec});
        PodInfo::new(&Arc::from("a"), &serde_json::from_value(p).unwrap())
    }

    fn node(labels: serde_json::Value) -> NodeSpec {
        NodeSpec::new(
            &serde_json::from_value(json!({"metadata": {"name": "n", "labels": labels}})).unwrap(),
        )
    }

    #[test]
    fn node_selector_and_required_affinity_must_both_match() {
        let p = pod(
            json!({"containers": [{"name": "c"}], "nodeSelector": {"disk": "ssd"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}}),
        );
        assert!(filter(&p, "n", &node(json!({"disk": "ssd", "zone": "a"}))).is_ok());
        let e = filter(&p, "n", &node(json!({"disk": "ssd", "zone": "b"}))).unwrap_err();
        assert_eq!(
            e.reasons,
            vec!["node(s) didn't match Pod's node affinity/selector"]
        );
        assert!(filter(&p, "n", &node(json!({"zone": "a"}))).is_err());
    }

    #[test]
    fn preferred_terms_sum_their_weights() {
        let p = pod(
            json!({"containers": [{"name": "c"}], "affinity": {"nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}},
                {"weight": 5, "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}}
            ]}}}),
        );
        assert_eq!(score(&p, "n", &node(json!({"zone": "a", "disk": "x"}))), 15);
        assert_eq!(score(&p, "n", &node(json!({"disk": "x"}))), 5);
        assert_eq!(score(&p, "n", &node(json!({}))), 0);
    }
}
