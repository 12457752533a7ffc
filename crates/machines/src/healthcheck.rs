//! The MachineHealthCheck controller (spec: capi-kubevirt.md §1.7): a target Machine is
//! unhealthy when its Node was deleted, when no Node came within `nodeStartupTimeoutSeconds`,
//! when one of `unhealthyNodeConditions` held for its timeout, or when it carries
//! `cluster.x-k8s.io/remediate-machine`. Remediation is its owner's: the check sets
//! `HealthCheckSucceeded` False and `OwnerRemediated` False, and the MachineSet replaces the
//! machine — unless more machines are unhealthy than `unhealthyLessThanOrEqualTo` (or outside
//! `unhealthyInRange`) allows, which short-circuits remediation (`RemediationAllowed` False,
//! `TooManyUnhealthy`, a `RemediationRestricted` Event).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Api;
use kube::api::{Patch, PatchParams};
use runtime::error::Result;
use runtime::informer::ObjectKey;
use runtime::queue::Action;
use runtime::selector::LabelSelector as Selector;
use serde_json::{Value, json};

use crate::Ctx;
use crate::cond::{self, Cond};
use crate::crds::FIELD_MANAGER;
use crate::machine::node_condition;
use crate::names;
use crate::resource::{Machine, MachineHealthCheck, int_at, str_at};

/// Upstream's default node startup timeout (10 minutes).
const DEFAULT_STARTUP_TIMEOUT: i64 = 600;

/// Whether remediation may go on with `unhealthy` of `expected` machines, and how many more
/// machines may be remediated.
pub fn remediation_allowed(trigger: Option<&Value>, expected: i64, unhealthy: i64) -> (bool, i64) {
    if let Some(range) = trigger
        .and_then(|t| t.get("unhealthyInRange"))
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix('['))
        .and_then(|r| r.strip_suffix(']'))
        .and_then(|r| r.split_once('-'))
        .and_then(|(a, b)| Some((a.parse::<i64>().ok()?, b.parse::<i64>().ok()?)))
    {
        let ok = range.0 <= unhealthy && unhealthy <= range.1;
        return (ok, if ok { range.1 - unhealthy } else { 0 });
    }
    let max = crate::deployment::scaled(
        trigger.and_then(|t| t.get("unhealthyLessThanOrEqualTo")),
        expected,
        expected,
        false,
    );
    let max = if trigger
        .and_then(|t| t.get("unhealthyLessThanOrEqualTo"))
        .is_none()
    {
        expected
    } else {
        max
    };
    let ok = unhealthy <= max;
    (ok, if ok { max - unhealthy } else { 0 })
}

/// Why a machine is unhealthy, or when to look again.
enum Health {
    Healthy(Option<f64>),
    Unhealthy(&'static str, String),
}

impl Ctx {
    fn health(&self, mhc: &MachineHealthCheck, m: &Machine, workload: Option<&str>) -> Health {
        if m.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(names::REMEDIATE_MACHINE_ANNOTATION))
        {
            return Health::Unhealthy(
                "HasRemediateMachineAnnotation",
                "the machine is marked for remediation".into(),
            );
        }
        let name = m.metadata.name.as_deref().unwrap_or("");
        let provider_id = str_at(&m.spec, "/providerID").unwrap_or("");
        let node = workload.and_then(|w| self.node_of(w, name, provider_id));
        let node_ref = m.status_field("/nodeRef/name").and_then(Value::as_str);
        let Some(node) = node else {
            if let Some(n) = node_ref {
                return Health::Unhealthy("NodeDeleted", format!("node {n} has been deleted"));
            }
            let timeout = int_at(&mhc.spec, "/checks/nodeStartupTimeoutSeconds")
                .unwrap_or(DEFAULT_STARTUP_TIMEOUT);
            if timeout <= 0 {
                return Health::Healthy(None);
            }
            // From the latest of the machine's creation and its infrastructure becoming ready.
            let created = m
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| (jiff::Timestamp::now().as_second() - t.0.as_second()).max(0) as f64)
                .unwrap_or(0.0);
            let infra = cond::get(m.status.as_ref(), "InfrastructureReady")
                .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
                .and_then(|c| c.get("lastTransitionTime"))
                .and_then(Value::as_str)
                .map(|t| cond::age_seconds(Some(t)));
            let elapsed = infra.map_or(created, |i| i.min(created));
            if elapsed >= timeout as f64 {
                return Health::Unhealthy(
                    "NodeStartupTimeout",
                    format!("no node joined within {timeout}s"),
                );
            }
            return Health::Healthy(Some(timeout as f64 - elapsed));
        };
        let mut next: Option<f64> = None;
        for c in mhc
            .spec
            .pointer("/checks/unhealthyNodeConditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let type_ = c.get("type").and_then(Value::as_str).unwrap_or("");
            let status = c.get("status").and_then(Value::as_str).unwrap_or("");
            let timeout = c.get("timeoutSeconds").and_then(Value::as_i64).unwrap_or(0) as f64;
            if let Some((s, since)) = node_condition(&node, type_)
                && s == status
            {
                let age = cond::age_seconds(since.as_deref());
                if age >= timeout {
                    return Health::Unhealthy(
                        "UnhealthyNode",
                        format!(
                            "condition {type_} on node {} has been {status} for more than {timeout}s",
                            node.metadata.name.as_deref().unwrap_or("")
                        ),
                    );
                }
                let left = timeout - age;
                next = Some(next.map_or(left, |n: f64| n.min(left)));
            }
        }
        Health::Healthy(next)
    }

    pub async fn reconcile_check(&self, key: ObjectKey) -> Result<Action> {
        let Some(mhc) = self.checks.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        if mhc.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let root = self.root()?;
        let api: Api<MachineHealthCheck> = Api::namespaced(root.clone(), &key.namespace);
        let machines_api: Api<Machine> = Api::namespaced(root, &key.namespace);
        let cluster_name = str_at(&mhc.spec, "/clusterName").unwrap_or("");
        let cluster = self.cluster_of(&key.namespace, &mhc.spec);
        let workload = cluster
            .as_ref()
            .and_then(|c| Ctx::workload_of(c).map(str::to_string));
        let selector: Option<LabelSelector> = mhc
            .spec
            .get("selector")
            .and_then(|s| serde_json::from_value(s.clone()).ok());
        let selector = Selector::parse(selector.as_ref());
        let mut targets: Vec<_> = self
            .machines
            .list_namespace(runtime::client::ROOT, &key.namespace)
            .into_iter()
            .filter(|m| str_at(&m.spec, "/clusterName") == Some(cluster_name))
            .filter(|m| selector.matches(&m.metadata.labels.clone().unwrap_or_default()))
            .collect();
        targets.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let paused = mhc
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(names::PAUSED_ANNOTATION))
            || cluster
                .as_ref()
                .is_some_and(|c| c.spec.get("paused").and_then(Value::as_bool) == Some(true));
        let mut unhealthy = Vec::new();
        let mut healthy = Vec::new();
        let mut next: Option<f64> = None;
        for m in &targets {
            if m.metadata.deletion_timestamp.is_some() {
                continue;
            }
            match self.health(&mhc, m, workload.as_deref()) {
                Health::Healthy(n) => {
                    if let Some(n) = n {
                        next = Some(next.map_or(n, |x: f64| x.min(n)));
                    }
                    healthy.push(m.clone());
                }
                Health::Unhealthy(reason, msg) => unhealthy.push((m.clone(), reason, msg)),
            }
        }
        let expected = targets.len() as i64;
        let current_healthy = healthy.len() as i64;
        let (allowed, remaining) = remediation_allowed(
            mhc.spec.pointer("/remediation/triggerIf"),
            expected,
            expected - current_healthy,
        );
        if !paused {
            for m in &healthy {
                if !cond::is_true(m.status.as_ref(), "HealthCheckSucceeded") {
                    let c = [Cond::yes("HealthCheckSucceeded", "HealthCheckSucceeded")];
                    self.machine_status(&machines_api, m, json!({}), &c).await?;
                }
            }
            for (m, reason, msg) in &unhealthy {
                let skip = m
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(names::SKIP_REMEDIATION_ANNOTATION));
                let st = m.status.as_ref();
                let mut conds = vec![Cond::no("HealthCheckSucceeded", reason, msg.clone())];
                let pending = cond::status_of(st, "OwnerRemediated") == Some("False");
                if allowed && !skip && !pending {
                    conds.push(Cond::no(
                        "OwnerRemediated",
                        "WaitingForRemediation",
                        "waiting for the owner to remediate the machine",
                    ));
                    self.recorder.record(
                        runtime::client::ROOT,
                        runtime::events::reference(&**m),
                        "Normal",
                        "MachineMarkedUnhealthy",
                        format!(
                            "Machine {} has been marked as unhealthy by {}: {msg}",
                            m.metadata.name.as_deref().unwrap_or(""),
                            key.name
                        ),
                    );
                }
                let was = cond::get(st, "HealthCheckSucceeded");
                let same = was.is_some_and(|c| {
                    c.get("status").and_then(Value::as_str) == Some("False")
                        && c.get("reason").and_then(Value::as_str) == Some(*reason)
                });
                if !same || conds.len() > 1 {
                    self.machine_status(&machines_api, m, json!({}), &conds)
                        .await?;
                }
            }
            if !allowed {
                self.recorder.record(
                    runtime::client::ROOT,
                    runtime::events::reference(&*mhc),
                    "Warning",
                    "RemediationRestricted",
                    format!(
                        "Remediation restricted due to exceeded number of unhealthy machines (total: {expected}, unhealthy: {})",
                        expected - current_healthy
                    ),
                );
            }
        }
        let old = mhc.status.clone().unwrap_or_else(|| json!({}));
        let mut status = old.clone();
        status["expectedMachines"] = json!(expected);
        status["currentHealthy"] = json!(current_healthy);
        status["remediationsAllowed"] = json!(remaining.max(0));
        status["targets"] = json!(
            targets
                .iter()
                .map(|m| m.metadata.name.clone().unwrap_or_default())
                .collect::<Vec<_>>()
        );
        status["observedGeneration"] = json!(mhc.metadata.generation);
        let allowed_cond = if allowed {
            Cond::yes("RemediationAllowed", "RemediationAllowed")
        } else {
            Cond::no(
                "RemediationAllowed",
                "TooManyUnhealthy",
                format!(
                    "remediation is not allowed: {} of {expected} machines are unhealthy",
                    expected - current_healthy
                ),
            )
        };
        status["conditions"] = cond::merge(
            old.get("conditions"),
            &[
                allowed_cond,
                Cond::of(
                    "Paused",
                    paused,
                    if paused { "Paused" } else { "NotPaused" },
                    "",
                ),
            ],
            mhc.metadata.generation,
        );
        if status != old {
            api.patch_status(
                &key.name,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Merge(json!({"status": status})),
            )
            .await?;
        }
        Ok(match next {
            Some(s) => Action::RequeueAfter(Duration::from_secs_f64(s + 1.0)),
            None => Action::AwaitChange,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_unhealthy_rounds_down_so_one_machine_at_fifty_percent_never_remediates() {
        let t = json!({"unhealthyLessThanOrEqualTo": "40%"});
        assert_eq!(remediation_allowed(Some(&t), 25, 10), (true, 0));
        assert_eq!(remediation_allowed(Some(&t), 6, 2), (true, 0));
        assert_eq!(remediation_allowed(Some(&t), 6, 3), (false, 0));
        let half = json!({"unhealthyLessThanOrEqualTo": "50%"});
        assert_eq!(remediation_allowed(Some(&half), 1, 1), (false, 0));
        assert_eq!(remediation_allowed(Some(&half), 4, 1), (true, 1));
        assert_eq!(remediation_allowed(None, 3, 3), (true, 0));
    }

    #[test]
    fn an_unhealthy_range_takes_precedence() {
        let t = json!({"unhealthyLessThanOrEqualTo": "100%", "unhealthyInRange": "[1-2]"});
        assert_eq!(remediation_allowed(Some(&t), 10, 0), (false, 0));
        assert_eq!(remediation_allowed(Some(&t), 10, 1), (true, 1));
        assert_eq!(remediation_allowed(Some(&t), 10, 3), (false, 0));
    }
}
