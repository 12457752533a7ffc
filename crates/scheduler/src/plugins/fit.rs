//! NodeResourcesFit and NodeResourcesBalancedAllocation: does the pod fit what the node has
//! left, and how good a fit is it.
//!
//! The filter compares the pod's request plus what the node's pods (bound and assumed)
//! already request against allocatable: `Too many pods` when the pod count is reached, then
//! `Insufficient cpu`, `Insufficient memory`, `Insufficient ephemeral-storage` and
//! `Insufficient <name>` for scalar resources — every failing resource is a reason. The
//! scores are upstream's defaults: LeastAllocated over CPU and memory (non-zero requests,
//! equal weights) and BalancedAllocation (one minus the spread of the CPU and memory
//! fractions, actual requests; skipped for pods that request nothing).

use std::borrow::Cow;

use crate::framework::{Code, MAX_NODE_SCORE, Plugin, Status};
use crate::nodeinfo::NodeInfo;
use crate::podinfo::PodInfo;
use crate::resource::Resource;

/// NodeResourcesFit's filter.
pub fn filter(pod: &PodInfo, node: &NodeInfo, alloc: &Resource) -> Result<(), Status> {
    let mut reasons: Vec<Cow<'static, str>> = Vec::new();
    if node.pods.len() as i64 + 1 > alloc.pods {
        reasons.push("Too many pods".into());
    }
    let want = &pod.requests;
    if !want.is_zero() {
        let used = &node.requested;
        if alloc.milli_cpu < want.milli_cpu + used.milli_cpu {
            reasons.push("Insufficient cpu".into());
        }
        if alloc.memory < want.memory + used.memory {
            reasons.push("Insufficient memory".into());
        }
        if alloc.ephemeral_storage < want.ephemeral_storage + used.ephemeral_storage {
            reasons.push("Insufficient ephemeral-storage".into());
        }
        for (name, q) in &want.scalars {
            if alloc.scalar(name) < q + used.scalar(name) {
                reasons.push(format!("Insufficient {name}").into());
            }
        }
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(Status {
            code: Code::Unschedulable,
            plugin: Plugin::NodeResourcesFit,
            reasons,
        })
    }
}

fn least_requested(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// LeastAllocated: the share of CPU and memory left, equally weighted.
pub fn least_allocated(pod: &PodInfo, node: &NodeInfo, alloc: &Resource) -> i64 {
    let mut score = 0;
    let mut weights = 0;
    let pairs = [
        (
            node.non_zero.milli_cpu + pod.non_zero.milli_cpu,
            alloc.milli_cpu,
        ),
        (node.non_zero.memory + pod.non_zero.memory, alloc.memory),
    ];
    for (requested, capacity) in pairs {
        if capacity == 0 {
            continue;
        }
        score += least_requested(requested, capacity);
        weights += 1;
    }
    if weights == 0 { 0 } else { score / weights }
}

/// Whether BalancedAllocation scores this pod (upstream skips pods requesting nothing).
pub fn balanced_applies(pod: &PodInfo) -> bool {
    pod.requests.milli_cpu != 0 || pod.requests.memory != 0
}

/// BalancedAllocation: `(1 - |cpu fraction - memory fraction| / 2) * 100`.
pub fn balanced(pod: &PodInfo, node: &NodeInfo, alloc: &Resource) -> i64 {
    let mut fractions = Vec::with_capacity(2);
    let pairs = [
        (
            node.requested.milli_cpu + pod.requests.milli_cpu,
            alloc.milli_cpu,
        ),
        (node.requested.memory + pod.requests.memory, alloc.memory),
    ];
    for (requested, capacity) in pairs {
        if capacity == 0 {
            continue;
        }
        fractions.push((requested as f64 / capacity as f64).min(1.0));
    }
    let std = if fractions.len() == 2 {
        ((fractions[0] - fractions[1]) / 2.0).abs()
    } else {
        0.0
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn pod(requests: serde_json::Value) -> Arc<PodInfo> {
        let p = json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"containers": [
            {"name": "c", "resources": {"requests": requests}}]}});
        Arc::new(PodInfo::new(
            &Arc::from("a"),
            &serde_json::from_value(p).unwrap(),
        ))
    }

    fn alloc(v: serde_json::Value) -> Resource {
        Resource::from_list(&serde_json::from_value(v).unwrap())
    }

    #[test]
    fn every_insufficient_resource_is_a_reason() {
        let mut node = NodeInfo::new(Arc::from("n"), None);
        node.add_pod(pod(json!({"cpu": "1", "memory": "1Gi"})));
        let a = alloc(json!({"cpu": "2", "memory": "2Gi", "pods": "1", "example.com/gpu": "1"}));
        let e = filter(
            &pod(json!({"cpu": "1500m", "memory": "2Gi", "example.com/gpu": "2"})),
            &node,
            &a,
        )
        .unwrap_err();
        assert_eq!(
            e.reasons,
            vec![
                "Too many pods",
                "Insufficient cpu",
                "Insufficient memory",
                "Insufficient example.com/gpu"
            ]
        );
        assert_eq!(e.code, Code::Unschedulable);
    }

    #[test]
    fn a_pod_that_fits_exactly_passes() {
        let node = NodeInfo::new(Arc::from("n"), None);
        let a = alloc(json!({"cpu": "1", "memory": "1Gi", "pods": "1"}));
        assert!(filter(&pod(json!({"cpu": "1", "memory": "1Gi"})), &node, &a).is_ok());
    }

    #[test]
    fn least_allocated_prefers_emptier_nodes() {
        let a = alloc(json!({"cpu": "4", "memory": "4Gi", "pods": "10"}));
        let empty = NodeInfo::new(Arc::from("e"), None);
        let mut busy = NodeInfo::new(Arc::from("b"), None);
        busy.add_pod(pod(json!({"cpu": "2", "memory": "2Gi"})));
        let p = pod(json!({"cpu": "1", "memory": "1Gi"}));
        assert_eq!(least_allocated(&p, &empty, &a), 75);
        assert_eq!(least_allocated(&p, &busy, &a), 25);
    }

    #[test]
    fn balanced_allocation_rewards_equal_fractions() {
        let a = alloc(json!({"cpu": "4", "memory": "4Gi"}));
        let node = NodeInfo::new(Arc::from("n"), None);
        assert_eq!(
            balanced(&pod(json!({"cpu": "2", "memory": "2Gi"})), &node, &a),
            100
        );
        assert_eq!(
            balanced(&pod(json!({"cpu": "4", "memory": "0"})), &node, &a),
            50
        );
        assert!(!balanced_applies(&pod(json!({}))));
    }
}
