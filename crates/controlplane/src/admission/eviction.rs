//! The disruption-budget check of `pods/eviction` (upstream
//! `pkg/registry/core/pod/storage/eviction.go`): a pod covered by a PodDisruptionBudget may
//! be evicted only while the budget allows a disruption, and each eviction takes one
//! (`status.disruptionsAllowed` decremented, the pod recorded in `status.disruptedPods`)
//! by compare-and-swap on the budget, so concurrent evictions cannot overdraw it.

use apimachinery::labels::label_selector_from_json;
use apimachinery::status::ApiError;
use apimachinery::{Path, meta};
use registry::cache::Filter;
use registry::store::{Location, WriteOptions, now};
use serde_json::{Value, json};

use crate::ControlPlane;

/// Upstream's refusal message.
pub const REFUSED: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

fn too_many_requests(cause: String) -> ApiError {
    ApiError::too_many_requests(REFUSED, 0).with_cause("DisruptionBudget", &cause, "")
}

fn pod_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The budgets whose (non-empty) selector matches the pod.
fn budgets(cp: &ControlPlane, loc: &Location<'_>, pod: &Value) -> Vec<Value> {
    let filter = Filter {
        cluster: Some(loc.cluster.to_string()),
        namespace: Some(loc.namespace.to_string()),
        predicate: None,
    };
    cp.store
        .cache_for_reads(loc.cluster)
        .list("policy", "poddisruptionbudgets", &filter)
        .0
        .iter()
        .filter(|b| {
            let sel = b
                .value()
                .pointer("/spec/selector")
                .cloned()
                .unwrap_or(Value::Null);
            match label_selector_from_json(&sel, &Path::new("spec.selector")) {
                Ok(s) => !s.is_empty() && s.matches_object(pod),
                Err(_) => false,
            }
        })
        .map(|b| b.to_value())
        .collect()
}

/// Whether evicting a pod is allowed by the disruption budgets that cover it; takes one
/// disruption from the budget when it is (not on a dry run).
pub async fn check_eviction(
    cp: &ControlPlane,
    loc: &Location<'_>,
    dry_run: bool,
) -> Result<(), ApiError> {
    let Some(pods) = cp.catalog.builtin("", "pods") else {
        return Ok(());
    };
    let pod = cp.store.get(&pods, loc).await?;
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    if matches!(phase, Some("Succeeded" | "Failed" | "Pending"))
        || meta::deletion_timestamp(&pod).is_some()
    {
        return Ok(());
    }
    let covering = budgets(cp, loc, &pod);
    let pdb = match covering.as_slice() {
        [] => return Ok(()),
        [one] => one,
        _ => {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
    };
    let healthy = pod_ready(&pod);
    if !healthy {
        let policy = pdb
            .pointer("/spec/unhealthyPodEvictionPolicy")
            .and_then(Value::as_str)
            .unwrap_or("IfHealthyBudget");
        let current = pdb
            .pointer("/status/currentHealthy")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let desired = pdb
            .pointer("/status/desiredHealthy")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if policy == "AlwaysAllow" || (current >= desired && desired > 0) {
            return Ok(());
        }
    }
    let Some(res) = cp.catalog.builtin("policy", "poddisruptionbudgets") else {
        return Ok(());
    };
    let name = meta::name(pdb).to_string();
    let pdb_loc = Location {
        cluster: loc.cluster,
        namespace: loc.namespace,
        name: &name,
    };
    let opts = WriteOptions {
        dry_run,
        subresource: Some("status".into()),
        ..Default::default()
    };
    let pod_name = loc.name.to_string();
    cp.store
        .update_with(&res, &pdb_loc, &opts, |cur| {
            let Some(cur) = cur else {
                return Err(ApiError::not_found("poddisruptionbudgets", "policy", &name));
            };
            let st = |f: &str| {
                cur.pointer(&format!("/status/{f}"))
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            };
            if st("observedGeneration") < meta::generation(cur) {
                return Err(too_many_requests(format!(
                    "The disruption budget {name} is still being processed by the server."
                )));
            }
            let allowed = st("disruptionsAllowed");
            if allowed < 0 {
                return Err(ApiError::forbidden(
                    "poddisruptionbudget",
                    "policy",
                    &name,
                    "pdb disruptions allowed is negative",
                ));
            }
            if allowed == 0 {
                return Err(too_many_requests(format!(
                    "The disruption budget {name} needs {} healthy pods and has {} currently",
                    st("desiredHealthy"),
                    st("currentHealthy")
                )));
            }
            let mut next = cur.clone();
            next["status"]["disruptionsAllowed"] = json!(allowed - 1);
            if !next["status"]["disruptedPods"].is_object() {
                next["status"]["disruptedPods"] = json!({});
            }
            next["status"]["disruptedPods"][&pod_name] = json!(now());
            if allowed == 1 {
                set_insufficient(&mut next["status"]);
            }
            meta::remove(&mut next, "resourceVersion");
            Ok(next)
        })
        .await?;
    Ok(())
}

/// Upstream `UpdateDisruptionAllowedCondition` when no disruption is left.
fn set_insufficient(status: &mut Value) {
    let cond = json!({
        "type": "DisruptionAllowed",
        "status": "False",
        "reason": "InsufficientPods",
        "message": "",
        "observedGeneration": status.get("observedGeneration").cloned().unwrap_or(json!(0)),
        "lastTransitionTime": now(),
    });
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    if let Some(cs) = status["conditions"].as_array_mut() {
        match cs.iter_mut().find(|c| c["type"] == "DisruptionAllowed") {
            Some(c) if c["status"] == "False" => {}
            Some(c) => *c = cond,
            None => cs.push(cond),
        }
    }
}
