//! Helpers shared by workload controllers (upstream `pkg/controller/controller_utils.go` and
//! `pkg/api/v1/pod`): label selectors, controller references, pod readiness and availability,
//! and the order in which surplus pods are deleted.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;

/// Whether `selector` matches `labels`. A missing or empty selector matches nothing: workload
/// controllers refuse to select every pod (upstream's `SelectingAll`).
pub fn selector_matches(
    selector: Option<&LabelSelector>,
    labels: &BTreeMap<String, String>,
) -> bool {
    let parsed = runtime::selector::LabelSelector::parse(selector);
    !parsed.is_everything() && parsed.matches(labels)
}

/// The labels of an object (empty when none).
pub fn labels(meta: &ObjectMeta) -> BTreeMap<String, String> {
    meta.labels.clone().unwrap_or_default()
}

/// The object's controller reference.
pub fn controller_ref(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|r| r.controller == Some(true))
}

/// A controller reference to an owner.
pub fn new_controller_ref(owner: &ObjectMeta, api_version: &str, kind: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: owner.name.clone().unwrap_or_default(),
        uid: owner.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A pod is active until it has finished or is being deleted.
pub fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    phase != Some("Succeeded")
        && phase != Some("Failed")
        && pod.metadata.deletion_timestamp.is_none()
}

/// The pod's Ready condition status and when it last changed.
fn ready_condition(pod: &Pod) -> Option<(bool, Option<Timestamp>)> {
    let c = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    Some((
        c.status == "True",
        c.last_transition_time.as_ref().map(|t| t.0),
    ))
}

pub fn is_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some_and(|(r, _)| r)
}

/// Ready for at least `min_ready_seconds` at `now`.
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    match ready_condition(pod) {
        Some((true, since)) => {
            if min_ready_seconds <= 0 {
                return true;
            }
            since.is_some_and(|t| t.as_second() + i64::from(min_ready_seconds) <= now.as_second())
        }
        _ => false,
    }
}

fn phase_rank(pod: &Pod) -> u8 {
    match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Pending") => 0,
        Some("Running") => 2,
        _ => 1,
    }
}

fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0))
        .unwrap_or(0)
}

/// Orders pods so that those to delete first come first (upstream `ActivePods`): unassigned
/// before assigned, pending before unknown before running, not ready before ready, ready for
/// less time before more, more restarts before fewer, newer before older.
pub fn deletion_order(a: &Pod, b: &Pod) -> Ordering {
    let assigned = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    };
    let ready_since = |p: &Pod| match ready_condition(p) {
        Some((true, t)) => t,
        _ => None,
    };
    assigned(a)
        .cmp(&assigned(b))
        .then_with(|| phase_rank(a).cmp(&phase_rank(b)))
        .then_with(|| is_ready(a).cmp(&is_ready(b)))
        .then_with(|| match (is_ready(a), ready_since(a), ready_since(b)) {
            // Ready for less time (a later transition) goes first.
            (true, Some(x), Some(y)) => y.cmp(&x),
            _ => Ordering::Equal,
        })
        .then_with(|| restarts(b).cmp(&restarts(a)))
        .then_with(|| {
            let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            match (created(a), created(b)) {
                (None, Some(_)) => Ordering::Less,
                (Some(_), None) => Ordering::Greater,
                (x, y) => y.cmp(&x),
            }
        })
}

/// Upstream's `PodControl` events on the owner of a pod it created (`SuccessfulCreate`,
/// "Created pod: <name>") or deleted (`SuccessfulDelete`, "Deleted pod: <name>").
pub fn record_pod_event<K: kube::Resource<DynamicType = ()>>(
    events: &runtime::events::Recorder,
    cluster: &str,
    owner: &K,
    created: bool,
    pod: &str,
) {
    let (reason, verb) = if created {
        ("SuccessfulCreate", "Created")
    } else {
        ("SuccessfulDelete", "Deleted")
    };
    events.record(
        cluster,
        runtime::events::reference(owner),
        runtime::events::NORMAL,
        reason,
        format!("{verb} pod: {pod}"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelectorRequirement, Time};

    fn pod(name: &str, phase: &str, ready: bool, node: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: node.map(String::from),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    last_transition_time: Some(Time(Timestamp::from_second(1000).unwrap())),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn selectors_match_labels_and_expressions_and_empty_selects_nothing() {
        let l = BTreeMap::from([
            ("app".to_string(), "web".to_string()),
            ("tier".into(), "a".into()),
        ]);
        let sel = LabelSelector {
            match_labels: Some(BTreeMap::from([("app".into(), "web".into())])),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "In".into(),
                values: Some(vec!["a".into(), "b".into()]),
            }]),
        };
        assert!(selector_matches(Some(&sel), &l));
        let other = BTreeMap::from([("app".to_string(), "db".to_string())]);
        assert!(!selector_matches(Some(&sel), &other));
        assert!(!selector_matches(Some(&LabelSelector::default()), &l));
        assert!(!selector_matches(None, &l));
    }

    #[test]
    fn unscheduled_pending_and_unready_pods_are_deleted_first() {
        let mut pods = [
            pod("running-ready", "Running", true, Some("n1")),
            pod("pending-unassigned", "Pending", false, None),
            pod("running-unready", "Running", false, Some("n1")),
            pod("pending-assigned", "Pending", false, Some("n1")),
        ];
        pods.sort_by(deletion_order);
        let names: Vec<_> = pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "pending-unassigned",
                "pending-assigned",
                "running-unready",
                "running-ready"
            ]
        );
    }

    #[test]
    fn availability_waits_for_min_ready_seconds() {
        let p = pod("p", "Running", true, None);
        assert!(!is_available(&p, 10, Timestamp::from_second(1005).unwrap()));
        assert!(is_available(&p, 10, Timestamp::from_second(1010).unwrap()));
        assert!(is_available(&p, 0, Timestamp::from_second(0).unwrap()));
    }
}
