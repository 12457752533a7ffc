//! Job conditions and the pod failure policy (upstream `pkg/controller/job/pod_failure_policy.go`
//! and the condition helpers of `job_controller.go`).
//!
//! A failed pod is matched against `spec.podFailurePolicy.rules` in order; the first rule whose
//! `onExitCodes` (a terminated container's non-zero exit code, `In`/`NotIn` the values) or
//! `onPodConditions` (e.g. `DisruptionTarget`) matches decides: `FailJob` fails the Job at
//! once, `Ignore` does not count the failure against `backoffLimit`, `Count` counts it (as
//! does a pod no rule matches).

use k8s_openapi::api::batch::v1::{Job, JobCondition, PodFailurePolicyRule};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// What the pod failure policy decides for a failed pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Fail the Job, with this condition message.
    FailJob(String),
    /// Do not count the failure.
    Ignore,
    /// Count the failure towards `backoffLimit`.
    Count,
}

/// Upstream's condition reasons and messages.
pub const REASON_BACKOFF: &str = "BackoffLimitExceeded";
pub const MSG_BACKOFF: &str = "Job has reached the specified backoff limit";
pub const REASON_DEADLINE: &str = "DeadlineExceeded";
pub const MSG_DEADLINE: &str = "Job was active longer than specified deadline";
pub const REASON_POLICY: &str = "PodFailurePolicy";
pub const REASON_COMPLETIONS: &str = "CompletionsReached";
pub const MSG_COMPLETIONS: &str = "Reached expected number of succeeded pods";

/// Applies the Job's pod failure policy to a failed pod.
pub fn verdict(job: &Job, pod: &Pod) -> Verdict {
    let Some(policy) = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref())
    else {
        return Verdict::Count;
    };
    for (i, rule) in policy.rules.iter().enumerate() {
        if let Some(what) = rule_matches(rule, pod) {
            return match rule.action.as_str() {
                "FailJob" => Verdict::FailJob(format!("{what} matching FailJob rule at index {i}")),
                "Ignore" => Verdict::Ignore,
                // FailIndex needs backoffLimitPerIndex; without it, it counts.
                _ => Verdict::Count,
            };
        }
    }
    Verdict::Count
}

/// What made `rule` match `pod` (the start of upstream's message), if it does.
fn rule_matches(rule: &PodFailurePolicyRule, pod: &Pod) -> Option<String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    if let Some(req) = &rule.on_exit_codes {
        let status = pod.status.as_ref()?;
        let statuses = status
            .container_statuses
            .iter()
            .flatten()
            .chain(status.init_container_statuses.iter().flatten());
        for cs in statuses {
            if req.container_name.as_ref().is_some_and(|n| *n != cs.name) {
                continue;
            }
            let Some(code) = cs
                .state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .map(|t| t.exit_code)
            else {
                continue;
            };
            if code == 0 {
                continue;
            }
            let listed = req.values.contains(&code);
            let hit = match req.operator.as_str() {
                "In" => listed,
                "NotIn" => !listed,
                _ => false,
            };
            if hit {
                return Some(format!(
                    "Container {} for pod {ns}/{name} failed with exit code {code}",
                    cs.name
                ));
            }
        }
        return None;
    }
    for pattern in rule.on_pod_conditions.iter().flatten() {
        let want = if pattern.status.is_empty() {
            "True"
        } else {
            pattern.status.as_str()
        };
        let has = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == pattern.type_ && c.status == want)
            });
        if has {
            return Some(format!("Pod {ns}/{name} has condition {}", pattern.type_));
        }
    }
    None
}

/// The condition of type `ty`, if its status is True.
pub fn true_condition<'a>(conds: &'a [JobCondition], ty: &str) -> Option<&'a JobCondition> {
    conds.iter().find(|c| c.type_ == ty && c.status == "True")
}

/// Sets a condition, keeping its transition time when the status did not change.
pub fn set_condition(
    conds: &mut Vec<JobCondition>,
    ty: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    let t = Some(Time(now));
    match conds.iter_mut().find(|c| c.type_ == ty) {
        Some(c) => {
            let same = c.status == status
                && c.reason.as_deref() == Some(reason)
                && c.message.as_deref() == Some(message);
            if same {
                return;
            }
            if c.status != status {
                c.last_transition_time = t.clone();
            }
            c.status = status.into();
            c.reason = Some(reason.into());
            c.message = Some(message.into());
            c.last_probe_time = t;
        }
        None => conds.push(JobCondition {
            type_: ty.into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            last_probe_time: t.clone(),
            last_transition_time: t,
        }),
    }
}

/// When the Job finished (its Complete or Failed condition turned True).
pub fn finished_at(job: &Job) -> Option<Timestamp> {
    let conds = job.status.as_ref()?.conditions.as_deref()?;
    true_condition(conds, "Complete")
        .or_else(|| true_condition(conds, "Failed"))
        .map(|c| {
            c.last_transition_time
                .as_ref()
                .map_or(Timestamp::UNIX_EPOCH, |t| t.0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(rules: serde_json::Value) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": "j"},
            "spec": {"podFailurePolicy": {"rules": rules}, "template": {}},
        }))
        .unwrap()
    }

    fn failed_pod(code: i32, conditions: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "j-abc", "namespace": "ns"},
            "status": {
                "phase": "Failed",
                "conditions": conditions,
                "containerStatuses": [{"name": "main", "image": "x", "imageID": "", "ready": false,
                    "restartCount": 0, "state": {"terminated": {"exitCode": code}}}],
            },
        }))
        .unwrap()
    }

    #[test]
    fn the_first_matching_rule_decides_with_upstream_messages() {
        let j = job(json!([
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
            {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [42]}},
        ]));
        assert_eq!(
            verdict(&j, &failed_pod(42, json!([]))),
            Verdict::FailJob(
                "Container main for pod ns/j-abc failed with exit code 42 matching FailJob rule at index 1".into()
            )
        );
        assert_eq!(verdict(&j, &failed_pod(1, json!([]))), Verdict::Count);
        let disrupted = failed_pod(42, json!([{"type": "DisruptionTarget", "status": "True"}]));
        assert_eq!(verdict(&j, &disrupted), Verdict::Ignore);
    }

    #[test]
    fn condition_rules_name_the_condition_in_the_message() {
        let j =
            job(json!([{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}]));
        let p = failed_pod(1, json!([{"type": "DisruptionTarget", "status": "True"}]));
        assert_eq!(
            verdict(&j, &p),
            Verdict::FailJob(
                "Pod ns/j-abc has condition DisruptionTarget matching FailJob rule at index 0"
                    .into()
            )
        );
        assert_eq!(verdict(&j, &failed_pod(1, json!([]))), Verdict::Count);
    }

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_holds() {
        let t1 = Timestamp::from_second(100).unwrap();
        let t2 = Timestamp::from_second(200).unwrap();
        let mut conds = Vec::new();
        set_condition(
            &mut conds,
            "Suspended",
            "True",
            "JobSuspended",
            "Job suspended",
            t1,
        );
        set_condition(
            &mut conds,
            "Suspended",
            "True",
            "JobSuspended",
            "Job suspended",
            t2,
        );
        assert_eq!(conds[0].last_transition_time, Some(Time(t1)));
        assert_eq!(conds[0].last_probe_time, Some(Time(t1)));
        set_condition(
            &mut conds,
            "Suspended",
            "False",
            "JobResumed",
            "Job resumed",
            t2,
        );
        assert_eq!(conds[0].last_transition_time, Some(Time(t2)));
        assert_eq!(conds.len(), 1);
    }
}
