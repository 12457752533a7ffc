//! VolumeBinding, the basics: a pod's PersistentVolumeClaims must exist, and a node must
//! satisfy the node affinity of the volumes they are bound to.
//!
//! PreFilter rejects the pod on every node (unresolvable) when a claim is missing
//! (`persistentvolumeclaim "x" not found`), being deleted, or unbound with immediate binding
//! (`pod has unbound immediate PersistentVolumeClaims`). The filter rejects a node outside a
//! bound volume's required node affinity (`node(s) had volume node affinity conflict`) or when
//! the volume does not exist. Unbound claims of a `WaitForFirstConsumer` class are let
//! through: finding or provisioning a matching volume for the chosen node is not done here.

use crate::cache::ClusterState;
use crate::framework::{Plugin, Status};
use crate::nodeinfo::NodeInfo;
use crate::podinfo::PodInfo;
use crate::selector::NodeSelector;

/// The bound volumes' node affinities, or why one is unusable.
#[derive(Debug, Clone, Default)]
pub struct FilterState {
    affinities: Vec<NodeSelector>,
    missing_volume: bool,
}

impl FilterState {
    /// PreFilter; `Ok(None)` when the pod has no claims.
    pub fn new(pod: &PodInfo, cluster: &ClusterState) -> Result<Option<FilterState>, Status> {
        if pod.claims.is_empty() {
            return Ok(None);
        }
        let mut s = FilterState::default();
        let mut unbound_immediate = false;
        for name in &pod.claims {
            let Some(claim) = cluster
                .claims
                .get(&(pod.key.namespace.clone(), name.clone()))
            else {
                return Err(Status::unresolvable(
                    Plugin::VolumeBinding,
                    format!("persistentvolumeclaim \"{name}\" not found"),
                ));
            };
            if claim.deleting {
                return Err(Status::unresolvable(
                    Plugin::VolumeBinding,
                    format!("persistentvolumeclaim \"{name}\" is being deleted"),
                ));
            }
            if claim.volume_name.is_empty() {
                let delayed = cluster
                    .storage_classes
                    .get(&claim.storage_class)
                    .copied()
                    .unwrap_or(false);
                if !delayed {
                    unbound_immediate = true;
                }
                continue;
            }
            match cluster.volumes.get(&claim.volume_name) {
                None => s.missing_volume = true,
                Some(Some(affinity)) => s.affinities.push(affinity.clone()),
                Some(None) => {}
            }
        }
        if unbound_immediate {
            return Err(Status::unresolvable(
                Plugin::VolumeBinding,
                "pod has unbound immediate PersistentVolumeClaims",
            ));
        }
        Ok(Some(s))
    }

    /// The filter.
    pub fn filter(&self, node: &NodeInfo) -> Result<(), Status> {
        if self.missing_volume {
            return Err(Status::unresolvable(
                Plugin::VolumeBinding,
                "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)",
            ));
        }
        if self
            .affinities
            .iter()
            .all(|a| a.matches(node.labels(), &node.name))
        {
            Ok(())
        } else {
            Err(Status::unresolvable(
                Plugin::VolumeBinding,
                "node(s) had volume node affinity conflict",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::ClaimInfo;
    use crate::framework::Code;
    use crate::testutil::{CLUSTER, cache, pod};
    use serde_json::json;

    fn with_claim() -> std::sync::Arc<PodInfo> {
        pod(
            "p",
            "100m",
            json!({"spec": {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}}),
        )
    }

    fn claim(volume: &str, class: &str) -> ClaimInfo {
        ClaimInfo {
            volume_name: volume.into(),
            storage_class: class.into(),
            deleting: false,
        }
    }

    #[test]
    fn a_missing_claim_rejects_the_pod_everywhere() {
        let c = cache(&[("n1", "8", json!({}))], &[]);
        let e = FilterState::new(&with_claim(), c.cluster(CLUSTER).unwrap()).unwrap_err();
        assert_eq!(e.reasons, vec!["persistentvolumeclaim \"data\" not found"]);
        assert_eq!(e.code, Code::UnschedulableAndUnresolvable);
    }

    #[test]
    fn unbound_claims_wait_unless_their_class_waits_for_the_first_consumer() {
        let mut c = cache(&[("n1", "8", json!({}))], &[]);
        let cl = c.cluster_mut(&std::sync::Arc::from(CLUSTER));
        cl.claims
            .insert(("d".into(), "data".into()), claim("", "fast"));
        cl.storage_classes.insert("fast".into(), false);
        let e = FilterState::new(&with_claim(), cl).unwrap_err();
        assert_eq!(
            e.reasons,
            vec!["pod has unbound immediate PersistentVolumeClaims"]
        );
        cl.storage_classes.insert("fast".into(), true);
        assert!(FilterState::new(&with_claim(), cl).is_ok());
    }

    #[test]
    fn a_bound_volume_confines_the_pod_to_its_nodes() {
        let mut c = cache(
            &[
                ("n1", "8", json!({"zone": "a"})),
                ("n2", "8", json!({"zone": "b"})),
            ],
            &[],
        );
        let cl = c.cluster_mut(&std::sync::Arc::from(CLUSTER));
        cl.claims
            .insert(("d".into(), "data".into()), claim("pv1", ""));
        let affinity: k8s_openapi::api::core::v1::NodeSelector = serde_json::from_value(json!({
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
        }))
        .unwrap();
        cl.volumes
            .insert("pv1".into(), Some(NodeSelector::parse(&affinity)));
        let s = FilterState::new(&with_claim(), cl).unwrap().unwrap();
        assert!(s.filter(cl.node("n1").unwrap()).is_ok());
        let e = s.filter(cl.node("n2").unwrap()).unwrap_err();
        assert_eq!(e.reasons, vec!["node(s) had volume node affinity conflict"]);
    }
}
