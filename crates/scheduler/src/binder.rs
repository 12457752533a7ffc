//! What the scheduler writes to a cluster: bindings, the `PodScheduled` condition and
//! nomination of pods it cannot place, and preemption of victims.
//!
//! Every write goes to the pod's own cluster through that cluster's client. A binding is
//! `POST .../pods/<name>/binding` (upstream's DefaultBinder). Pod status is changed with a
//! strategic merge patch on `pods/<name>/status`, conditions merged by type, so nothing else
//! in the status is overwritten. A victim first gets `DisruptionTarget=True` (reason
//! `PreemptionByScheduler`), then is deleted gracefully with its UID as a precondition, so a
//! replacement pod of the same name is never hit.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::{Value, json};

use crate::client::ClusterClients as Clients;
use crate::error::Result;
use crate::podinfo::{DEFAULT_SCHEDULER, PodInfo};

/// Now, as an API timestamp (seconds, UTC).
fn now() -> String {
    apimachinery::time::format_time(Timestamp::now())
}

fn pods(clients: &Clients, pod: &PodInfo) -> Result<Api<Pod>> {
    Ok(Api::namespaced(
        clients.cluster(&pod.key.cluster)?,
        &pod.key.namespace,
    ))
}

/// Binds the pod to `node`.
pub async fn bind(clients: &Clients, pod: &PodInfo, node: &str) -> Result<()> {
    let binding = json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod.key.name, "namespace": pod.key.namespace, "uid": pod.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    let _: Value = pods(clients, pod)?
        .create_subresource("binding", &pod.key.name, &PostParams::default(), &binding)
        .await?;
    Ok(())
}

/// The status patch marking a pod unschedulable (and nominating it, or clearing its
/// nomination); `None` when the pod already says exactly that.
pub fn unschedulable_patch(pod: &PodInfo, message: &str, nominate: Option<&str>) -> Option<Value> {
    let current = pod.scheduled_condition.as_ref();
    let same_condition =
        current.is_some_and(|(s, r, m)| s == "False" && r == "Unschedulable" && m == message);
    let nomination = nominate.unwrap_or("");
    if same_condition && pod.nominated_node_name == nomination {
        return None;
    }
    let mut condition = json!({
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
        "lastProbeTime": null,
    });
    if current.is_none_or(|(s, _, _)| s != "False") {
        condition["lastTransitionTime"] = json!(now());
    }
    let mut status = json!({"conditions": [condition]});
    if pod.nominated_node_name != nomination {
        status["nominatedNodeName"] = if nomination.is_empty() {
            Value::Null
        } else {
            json!(nomination)
        };
    }
    Some(json!({"status": status}))
}

/// Patches a pod's status.
pub async fn patch_status(clients: &Clients, pod: &PodInfo, patch: &Value) -> Result<()> {
    pods(clients, pod)?
        .patch_status(
            &pod.key.name,
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await?;
    Ok(())
}

/// Clears a pod's nomination (it lost its place to a higher-priority preemptor).
pub async fn clear_nomination(clients: &Clients, pod: &PodInfo) -> Result<()> {
    let patch = json!({"status": {"nominatedNodeName": null}});
    patch_status(clients, pod, &patch).await
}

/// Evicts a preemption victim: marks it, then deletes it gracefully.
pub async fn preempt_victim(clients: &Clients, victim: &PodInfo) -> Result<()> {
    let condition = json!({"status": {"conditions": [{
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": format!("{DEFAULT_SCHEDULER}: preempting to accommodate a higher priority pod"),
        "lastTransitionTime": now(),
    }]}});
    match patch_status(clients, victim, &condition).await {
        Err(e) if e.is_not_found() => return Ok(()),
        other => other?,
    }
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(victim.uid.clone()).filter(|u| !u.is_empty()),
            resource_version: None,
        }),
        ..Default::default()
    };
    match pods(clients, victim)?.delete(&victim.key.name, &dp).await {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
        Ok(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn pod(status: Value) -> PodInfo {
        let p = json!({"metadata": {"name": "p", "namespace": "d"},
            "spec": {"containers": [{"name": "c"}]}, "status": status});
        PodInfo::new(&Arc::from("a"), &serde_json::from_value(p).unwrap())
    }

    #[test]
    fn the_first_failure_sets_the_condition_with_a_transition_time() {
        let p = unschedulable_patch(
            &pod(json!({"phase": "Pending"})),
            "0/1 nodes are available.",
            None,
        )
        .unwrap();
        let c = &p["status"]["conditions"][0];
        assert_eq!(c["type"], "PodScheduled");
        assert_eq!(c["status"], "False");
        assert_eq!(c["reason"], "Unschedulable");
        assert!(c["lastTransitionTime"].is_string());
        assert!(p["status"].get("nominatedNodeName").is_none());
    }

    #[test]
    fn an_unchanged_failure_writes_nothing_and_a_new_message_keeps_the_transition_time() {
        let p = pod(
            json!({"conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": "m1"}]}),
        );
        assert!(unschedulable_patch(&p, "m1", None).is_none());
        let patch = unschedulable_patch(&p, "m2", Some("n1")).unwrap();
        assert!(
            patch["status"]["conditions"][0]
                .get("lastTransitionTime")
                .is_none()
        );
        assert_eq!(patch["status"]["nominatedNodeName"], "n1");
    }
}
