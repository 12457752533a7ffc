//! Where daemon pods run (upstream `daemon_controller.go` `NodeShouldRunDaemonPod` and
//! `pkg/controller/daemon/util`): a node's fit for a daemon pod by node selector, required
//! node affinity and taints; the tolerations every daemon pod gets; and pinning a pod to its
//! node with node affinity (`metadata.name In [node]`) so the scheduler binds it there.

use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PodSpec, Toleration,
};
use runtime::selector;

/// The tolerations upstream adds to every daemon pod (network-unavailable only with
/// `hostNetwork`).
pub fn add_default_tolerations(spec: &mut PodSpec) {
    let mut wanted = vec![
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if spec.host_network == Some(true) {
        wanted.push(("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for (key, effect) in wanted {
        let t = Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some(effect.into()),
            ..Default::default()
        };
        if !tolerations.contains(&t) {
            tolerations.push(t);
        }
    }
}

/// Pins a pod to `node`: every required node affinity term gets `matchFields: metadata.name In
/// [node]` (upstream `ReplaceDaemonSetPodNodeNameNodeAffinity`).
pub fn pin_to_node(spec: &mut PodSpec, node: &str) {
    let req = NodeSelectorRequirement {
        key: "metadata.name".into(),
        operator: "In".into(),
        values: Some(vec![node.to_string()]),
    };
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let na = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    let required = na
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(|| NodeSelector {
            node_selector_terms: Vec::new(),
        });
    if required.node_selector_terms.is_empty() {
        required
            .node_selector_terms
            .push(NodeSelectorTerm::default());
    }
    for term in &mut required.node_selector_terms {
        term.match_fields = Some(vec![req.clone()]);
    }
}

/// The node a daemon pod is bound or pinned to.
pub fn target_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_ref().filter(|n| !n.is_empty()) {
        return Some(n.clone());
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms.iter().find_map(|t| {
        t.match_fields.iter().flatten().find_map(|f| {
            let values = f.values.as_deref().unwrap_or_default();
            (f.key == "metadata.name" && f.operator == "In" && values.len() == 1)
                .then(|| values[0].clone())
        })
    })
}

/// Whether a daemon pod with `spec` (default tolerations added) should run on `node`, and
/// whether one already there may keep running (only `NoExecute` taints evict).
pub fn fit(node: &Node, spec: &PodSpec) -> (bool, bool) {
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    let labels = node.metadata.labels.clone().unwrap_or_default();
    if !selector::node_admits(spec, node_name, &labels) {
        return (false, false);
    }
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let mut run = true;
    let mut keep = true;
    for taint in taints {
        if taint.effect == "PreferNoSchedule" || selector::tolerated(tolerations, taint) {
            continue;
        }
        run = false;
        if taint.effect == "NoExecute" {
            keep = false;
        }
    }
    (run, keep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(labels: serde_json::Value, taints: serde_json::Value) -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": "n1", "labels": labels}, "spec": {"taints": taints}}),
        )
        .unwrap()
    }

    fn spec(v: serde_json::Value) -> PodSpec {
        let mut s: PodSpec = serde_json::from_value(v).unwrap();
        add_default_tolerations(&mut s);
        s
    }

    #[test]
    fn selectors_and_required_affinity_choose_nodes() {
        let n = node(json!({"disk": "ssd", "cpu": "8"}), json!([]));
        let base = json!({"containers": []});
        assert_eq!(fit(&n, &spec(base)), (true, true));
        assert!(
            !fit(
                &n,
                &spec(json!({"containers": [], "nodeSelector": {"disk": "hdd"}}))
            )
            .0
        );
        let affinity = |op: &str, values: serde_json::Value| {
            spec(
                json!({"containers": [], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "cpu", "operator": op, "values": values}]}]}}}}),
            )
        };
        assert!(fit(&n, &affinity("Gt", json!(["4"]))).0);
        assert!(!fit(&n, &affinity("In", json!(["16"]))).0);
    }

    #[test]
    fn taints_need_tolerations_and_only_no_execute_evicts() {
        let base = spec(json!({"containers": []}));
        let no_sched = node(
            json!({}),
            json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        );
        assert_eq!(fit(&no_sched, &base), (false, true));
        let no_exec = node(
            json!({}),
            json!([{"key": "dedicated", "value": "gpu", "effect": "NoExecute"}]),
        );
        assert_eq!(fit(&no_exec, &base), (false, false));
        let tolerant = spec(
            json!({"containers": [], "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu"}]}),
        );
        assert_eq!(fit(&no_exec, &tolerant), (true, true));
        // The default tolerations cover an unschedulable or not-ready node.
        let cordoned = node(
            json!({}),
            json!([
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
            ]),
        );
        assert_eq!(fit(&cordoned, &base), (true, true));
    }

    #[test]
    fn pinning_replaces_match_fields_in_every_term_and_is_read_back() {
        let mut s: PodSpec =
            serde_json::from_value(json!({"containers": [], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
            ]}}}}))
            .unwrap();
        pin_to_node(&mut s, "n7");
        let terms = &s
            .affinity
            .as_ref()
            .unwrap()
            .node_affinity
            .as_ref()
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .as_ref()
            .unwrap()
            .node_selector_terms;
        assert_eq!(terms.len(), 1);
        assert!(terms[0].match_expressions.is_some());
        let pod = Pod {
            spec: Some(s),
            ..Default::default()
        };
        assert_eq!(target_node(&pod).as_deref(), Some("n7"));
    }
}
