//! TaintToleration and NodeUnschedulable: taints keep pods away unless tolerated.
//!
//! The filter rejects a node with a `NoSchedule` or `NoExecute` taint the pod does not
//! tolerate (`node(s) had untolerated taint {key: value}`, the first such taint), and a node
//! with `spec.unschedulable` unless the pod tolerates `node.kubernetes.io/unschedulable:
//! NoSchedule`. The score counts `PreferNoSchedule` taints the pod does not tolerate, fewer
//! being better (normalized in reverse, weight 3).

use k8s_openapi::api::core::v1::{Taint, Toleration};

use crate::framework::{Plugin, Status};
use crate::nodeinfo::NodeSpec;
use crate::podinfo::PodInfo;

/// The taint an unschedulable node implicitly has.
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

pub use runtime::selector::{tolerated, tolerates};

/// NodeUnschedulable's filter.
pub fn filter_unschedulable(pod: &PodInfo, node: &NodeSpec) -> Result<(), Status> {
    if !node.unschedulable {
        return Ok(());
    }
    let taint = Taint {
        key: UNSCHEDULABLE_TAINT.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    if tolerated(&pod.tolerations, &taint) {
        return Ok(());
    }
    Err(Status::unresolvable(
        Plugin::NodeUnschedulable,
        "node(s) were unschedulable",
    ))
}

/// TaintToleration's filter.
pub fn filter(pod: &PodInfo, node: &NodeSpec) -> Result<(), Status> {
    let untolerated = node.taints.iter().find(|t| {
        (t.effect == "NoSchedule" || t.effect == "NoExecute") && !tolerated(&pod.tolerations, t)
    });
    match untolerated {
        None => Ok(()),
        Some(t) => Err(Status::unresolvable(
            Plugin::TaintToleration,
            format!(
                "node(s) had untolerated taint {{{}: {}}}",
                t.key,
                t.value.as_deref().unwrap_or("")
            ),
        )),
    }
}

/// TaintToleration's raw score: how many `PreferNoSchedule` taints are not tolerated by the
/// pod's tolerations with an empty or `PreferNoSchedule` effect.
pub fn score(pod: &PodInfo, node: &NodeSpec) -> i64 {
    let prefer: Vec<&Toleration> = pod
        .tolerations
        .iter()
        .filter(|t| {
            matches!(
                t.effect.as_deref(),
                None | Some("") | Some("PreferNoSchedule")
            )
        })
        .collect();
    node.taints
        .iter()
        .filter(|t| t.effect == "PreferNoSchedule" && !prefer.iter().any(|tol| tolerates(tol, t)))
        .count() as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn taint(v: serde_json::Value) -> Taint {
        serde_json::from_value(v).unwrap()
    }

    fn toleration(v: serde_json::Value) -> Toleration {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn equal_tolerations_need_key_value_and_a_matching_effect() {
        let t = taint(json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}));
        assert!(tolerates(
            &toleration(json!({"key": "dedicated", "value": "gpu"})),
            &t
        ));
        assert!(tolerates(
            &toleration(
                json!({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"})
            ),
            &t
        ));
        assert!(!tolerates(
            &toleration(json!({"key": "dedicated", "value": "cpu"})),
            &t
        ));
        assert!(!tolerates(
            &toleration(json!({"key": "dedicated", "value": "gpu", "effect": "NoExecute"})),
            &t
        ));
    }

    #[test]
    fn exists_with_an_empty_key_tolerates_everything() {
        let t = taint(json!({"key": "anything", "value": "x", "effect": "NoExecute"}));
        assert!(tolerates(&toleration(json!({"operator": "Exists"})), &t));
        assert!(tolerates(
            &toleration(json!({"key": "anything", "operator": "Exists"})),
            &t
        ));
        assert!(!tolerates(
            &toleration(json!({"key": "other", "operator": "Exists"})),
            &t
        ));
    }
}
