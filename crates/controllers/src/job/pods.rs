//! The pods of a Job (upstream `pkg/controller/job/indexed_job_utils.go` and the pod template
//! handling of `job_controller.go`): building a pod from the template with the tracking
//! finalizer and, for Indexed Jobs, its completion index; reading a pod's index; and the
//! `completedIndexes` interval notation (`"0-2,5"`).

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::podutil;

/// The finalizer that keeps a finished pod until the Job counted it.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// The annotation (and, since 1.28, label) holding an Indexed Job pod's index.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// The environment variable exposing the index to containers.
pub const COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

/// Whether the Job runs in Indexed completion mode.
pub fn is_indexed(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) == Some("Indexed")
}

/// A new pod of `job`, with the index `index` for Indexed Jobs.
pub fn new_pod(job: &Job, index: Option<i32>) -> Pod {
    let template = job
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let tm = template.metadata.unwrap_or_default();
    let job_name = job.metadata.name.as_deref().unwrap_or_default();
    let mut labels = tm.labels.unwrap_or_default();
    let mut annotations = tm.annotations.unwrap_or_default();
    let mut finalizers = tm.finalizers.unwrap_or_default();
    if !finalizers.iter().any(|f| f == TRACKING_FINALIZER) {
        finalizers.push(TRACKING_FINALIZER.to_string());
    }
    let mut spec = template.spec.unwrap_or_default();
    let generate_name = match index {
        Some(i) => {
            annotations.insert(COMPLETION_INDEX.into(), i.to_string());
            labels.insert(COMPLETION_INDEX.into(), i.to_string());
            if spec.hostname.is_none() {
                spec.hostname = Some(format!("{job_name}-{i}"));
            }
            let env = EnvVar {
                name: COMPLETION_INDEX_ENV.into(),
                value: None,
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        api_version: None,
                        field_path: format!("metadata.annotations['{COMPLETION_INDEX}']"),
                    }),
                    ..Default::default()
                }),
            };
            let containers = spec
                .containers
                .iter_mut()
                .chain(spec.init_containers.iter_mut().flatten());
            for c in containers {
                let envs = c.env.get_or_insert_with(Vec::new);
                if !envs.iter().any(|e| e.name == COMPLETION_INDEX_ENV) {
                    envs.push(env.clone());
                }
            }
            format!("{job_name}-{i}-")
        }
        None => format!("{job_name}-"),
    };
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            finalizers: Some(finalizers),
            owner_references: Some(vec![podutil::new_controller_ref(
                &job.metadata,
                "batch/v1",
                "Job",
            )]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The completion index of a pod, when it has a valid one below `completions`.
pub fn pod_index(pod: &Pod, completions: i32) -> Option<i32> {
    let meta = &pod.metadata;
    let raw = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(COMPLETION_INDEX))
        .or_else(|| meta.labels.as_ref().and_then(|l| l.get(COMPLETION_INDEX)))?;
    let i: i32 = raw.parse().ok()?;
    (0..completions).contains(&i).then_some(i)
}

/// Parses `"0-2,5"` into indexes below `completions` (malformed parts are skipped).
pub fn parse_indexes(s: Option<&str>, completions: i32) -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    for part in s.unwrap_or_default().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<i32>(), b.parse::<i32>()),
            None => (part.parse::<i32>(), part.parse::<i32>()),
        };
        if let (Ok(lo), Ok(hi)) = (lo, hi) {
            for i in lo.max(0)..=hi.min(completions - 1) {
                out.insert(i);
            }
        }
    }
    out
}

/// Formats indexes in the interval notation (`"0-2,5"`); `None` when empty.
pub fn format_indexes(set: &BTreeSet<i32>) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    let mut iter = set.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end += 1;
            iter.next();
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    (!parts.is_empty()).then(|| parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(mode: &str) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": "pi", "uid": "u1"},
            "spec": {
                "completionMode": mode,
                "template": {
                    "metadata": {"labels": {"job-name": "pi"}},
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "perl"}]},
                },
            },
        }))
        .unwrap()
    }

    #[test]
    fn indexed_pods_carry_their_index_hostname_and_env_and_every_pod_the_finalizer() {
        let pod = new_pod(&job("Indexed"), Some(3));
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("pi-3-"));
        assert_eq!(pod_index(&pod, 4), Some(3));
        assert_eq!(pod_index(&pod, 3), None);
        let spec = pod.spec.unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("pi-3"));
        let env = spec.containers[0].env.as_ref().unwrap();
        assert_eq!(env[0].name, COMPLETION_INDEX_ENV);
        assert_eq!(
            pod.metadata
                .labels
                .unwrap()
                .get(COMPLETION_INDEX)
                .map(String::as_str),
            Some("3")
        );
        assert_eq!(pod.metadata.finalizers.unwrap(), [TRACKING_FINALIZER]);

        let plain = new_pod(&job("NonIndexed"), None);
        assert_eq!(plain.metadata.generate_name.as_deref(), Some("pi-"));
        assert_eq!(plain.metadata.finalizers.unwrap(), [TRACKING_FINALIZER]);
        assert!(plain.spec.unwrap().hostname.is_none());
    }

    #[test]
    fn completed_indexes_round_trip_through_the_interval_notation() {
        let set = parse_indexes(Some("0-2,5,7-8"), 8);
        assert_eq!(set.iter().copied().collect::<Vec<_>>(), [0, 1, 2, 5, 7]);
        assert_eq!(format_indexes(&set).as_deref(), Some("0-2,5,7"));
        assert_eq!(format_indexes(&BTreeSet::new()), None);
    }
}
