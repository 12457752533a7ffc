//! Jobs against a real in-process API server, with no kubelet: the tests finish pods by writing
//! their status. Completions within parallelism, the backoff limit, the failure back-off and
//! active deadline on a fake clock, Indexed completion, the pod failure policy, and deletion
//! after the TTL.

mod common;

use std::time::Duration;

use common::{CA_PEM, Harness, wait_for, wait_list};
use controllers::clock::FakeClock;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const CLUSTER: &str = "tenant-a";
const TRACKING: &str = "batch.kubernetes.io/job-tracking";

async fn start() -> (Harness, std::sync::Arc<FakeClock>) {
    let clock = FakeClock::new(Timestamp::now());
    let options = controllers::Options::default()
        .with_ca(CA_PEM)
        .with_clock(clock.clone());
    (Harness::start_with(&[CLUSTER], options).await, clock)
}

fn job(name: &str, spec: Value) -> Job {
    let mut s = json!({
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}},
    });
    for (k, v) in spec.as_object().unwrap() {
        s[k] = v.clone();
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": s})).unwrap()
}

fn condition(j: &Job, ty: &str) -> Option<(String, String)> {
    let c = j
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty && c.status == "True")?;
    Some((
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

fn running(pods: &[Pod]) -> Vec<&Pod> {
    pods.iter()
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_none_or(|ph| ph != "Succeeded" && ph != "Failed")
        })
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// Finishes a pod as a kubelet would: a phase and a terminated container.
async fn finish(api: &Api<Pod>, pod: &Pod, phase: &str, exit: i32, conditions: Value) {
    let mut p = pod.clone();
    p.status = Some(
        serde_json::from_value(json!({
            "phase": phase,
            "conditions": conditions,
            "containerStatuses": [{"name": "main", "image": "busybox", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"terminated": {"exitCode": exit}}}],
        }))
        .unwrap(),
    );
    api.replace_status(&p.name_any(), &PostParams::default(), &p)
        .await
        .expect("pod status");
}

async fn wait_running(api: &Api<Pod>, n: usize) -> Vec<Pod> {
    let pods = wait_list(api, &format!("{n} running pods"), |ps| {
        running(ps).len() == n
    })
    .await;
    running(&pods).into_iter().cloned().collect()
}

#[tokio::test]
async fn a_job_runs_its_completions_within_parallelism_and_completes() {
    let (h, _clock) = start().await;
    let jobs: Api<Job> = h.api(CLUSTER, "default");
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let j = jobs
        .create(
            &PostParams::default(),
            &job("pi", json!({"completions": 3, "parallelism": 2})),
        )
        .await
        .unwrap();
    let uid = j.uid().unwrap();
    let mut finished = 0;
    while finished < 3 {
        let want = (3 - finished).min(2);
        let active = wait_running(&pods, want).await;
        let p = &active[0];
        let labels = p.labels();
        assert_eq!(labels.get("batch.kubernetes.io/controller-uid"), Some(&uid));
        assert_eq!(labels.get("controller-uid"), Some(&uid));
        assert_eq!(
            labels
                .get("batch.kubernetes.io/job-name")
                .map(String::as_str),
            Some("pi")
        );
        assert_eq!(labels.get("job-name").map(String::as_str), Some("pi"));
        assert!(p.finalizers().iter().any(|f| f == TRACKING));
        assert!(p.name_any().starts_with("pi-"));
        finish(&pods, p, "Succeeded", 0, json!([])).await;
        finished += 1;
    }
    let done = wait_for(&jobs, "pi", "the job to complete", |j| {
        j.is_some_and(|j| condition(j, "Complete").is_some())
    })
    .await
    .unwrap();
    let s = done.status.clone().unwrap();
    assert_eq!(s.succeeded, Some(3));
    assert_eq!(s.active, Some(0));
    assert!(s.completion_time.is_some() && s.start_time.is_some());
    assert_eq!(
        condition(&done, "Complete").unwrap().0,
        "CompletionsReached"
    );
    assert!(condition(&done, "SuccessCriteriaMet").is_some());
    wait_list(&pods, "every finalizer removed", |ps| {
        ps.len() == 3
            && ps
                .iter()
                .all(|p| !p.finalizers().iter().any(|f| f == TRACKING))
    })
    .await;
    h.stop().await;
}

#[tokio::test]
async fn failures_beyond_the_backoff_limit_fail_the_job_and_delete_the_rest() {
    let (h, _clock) = start().await;
    let jobs: Api<Job> = h.api(CLUSTER, "default");
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let spec = json!({"completions": 3, "parallelism": 3, "backoffLimit": 1});
    jobs.create(&PostParams::default(), &job("flaky", spec))
        .await
        .unwrap();
    let active = wait_running(&pods, 3).await;
    finish(&pods, &active[0], "Failed", 1, json!([])).await;
    finish(&pods, &active[1], "Failed", 1, json!([])).await;
    let failed = wait_for(&jobs, "flaky", "the job to fail", |j| {
        j.is_some_and(|j| condition(j, "Failed").is_some())
    })
    .await
    .unwrap();
    let (reason, message) = condition(&failed, "Failed").unwrap();
    assert_eq!(reason, "BackoffLimitExceeded");
    assert_eq!(message, "Job has reached the specified backoff limit");
    let s = failed.status.unwrap();
    // The third pod was deleted and counted as failed too.
    assert_eq!(s.failed, Some(3));
    assert_eq!(s.active, Some(0));
    assert!(s.completion_time.is_none());
    wait_list(&pods, "the running pod deleted", |ps| {
        running(ps).is_empty() && ps.len() == 2
    })
    .await;
    h.stop().await;
}

#[tokio::test]
async fn a_failed_pod_is_replaced_only_after_the_back_off() {
    let (h, clock) = start().await;
    let jobs: Api<Job> = h.api(CLUSTER, "default");
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    jobs.create(
        &PostParams::default(),
        &job("retry", json!({"backoffLimit": 3})),
    )
    .await
    .unwrap();
    let first = wait_running(&pods, 1).await;
    finish(&pods, &first[0], "Failed", 1, json!([])).await;
    wait_for(
        &jobs,
        "retry",
        "the failure counted with nothing running",
        |j| {
            j.and_then(|j| j.status.as_ref())
                .is_some_and(|s| s.failed == Some(1) && s.active == Some(0))
        },
    )
    .await;
    assert!(running(&pods.list(&Default::default()).await.unwrap().items).is_empty());
    clock.advance(Duration::from_secs(11));
    let second = wait_running(&pods, 1).await;
    assert_ne!(second[0].name_any(), first[0].name_any());
    finish(&pods, &second[0], "Succeeded", 0, json!([])).await;
    let done = wait_for(&jobs, "retry", "the job to complete", |j| {
        j.is_some_and(|j| condition(j, "Complete").is_some())
    })
    .await
    .unwrap();
    let s = done.status.unwrap();
    assert_eq!((s.succeeded, s.failed), (Some(1), Some(1)));
    h.stop().await;
}

#[tokio::test]
async fn an_active_deadline_fails_the_job_and_deletes_its_pods() {
    let (h, clock) = start().await;
    let jobs: Api<Job> = h.api(CLUSTER, "default");
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let spec = json!({"parallelism": 2, "activeDeadlineSeconds": 30});
    jobs.create(&PostParams::default(), &job("slow", spec))
        .await
        .unwrap();
    wait_running(&pods, 2).await;
    clock.advance(Duration::from_secs(31));
    let failed = wait_for(&jobs, "slow", "the deadline to fail the job", |j| {
        j.is_some_and(|j| condition(j, "Failed").is_some())
    })
    .await
    .unwrap();
    let (reason, message) = condition(&failed, "Failed").unwrap();
    assert_eq!(reason, "DeadlineExceeded");
    assert_eq!(message, "Job was active longer than specified deadline");
    wait_list(&pods, "every pod gone", |ps| ps.is_empty()).await;
    h.stop().await;
}

#[tokio::test]
async fn indexed_jobs_give_each_pod_an_index_and_track_completed_indexes() {
    let (h, clock) = start().await;
    let jobs: Api<Job> = h.api(CLUSTER, "default");
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let spec = json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"});
    jobs.create(&PostParams::default(), &job("idx", spec))
        .await
        .unwrap();
    let mut active = wait_running(&pods, 3).await;
    let index = |p: &Pod| {
        p.annotations()
            .get("batch.kubernetes.io/job-completion-index")
            .cloned()
            .unwrap()
    };
    active.sort_by_key(|p| index(p));
    for (i, p) in active.iter().enumerate() {
        assert_eq!(index(p), i.to_string());
        assert_eq!(
            p.labels().get("batch.kubernetes.io/job-completion-index"),
            Some(&i.to_string())
        );
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some(format!("idx-{i}").as_str()));
        assert!(p.name_any().starts_with(&format!("idx-{i}-")));
    }
    finish(&pods, &active[1], "Succeeded", 0, json!([])).await;
    wait_for(&jobs, "idx", "index 1 completed", |j| {
        j.and_then(|j| j.status.as_ref())
            .is_some_and(|s| s.completed_indexes.as_deref() == Some("1") && s.succeeded == Some(1))
    })
    .await;
    // A failed index is retried under the same index, after the back-off.
    finish(&pods, &active[0], "Failed", 1, json!([])).await;
    wait_for(&jobs, "idx", "the failure counted", |j| {
        j.and_then(|j| j.status.as_ref())
            .is_some_and(|s| s.failed == Some(1))
    })
    .await;
    clock.advance(Duration::from_secs(11));
    let retried = wait_list(&pods, "index 0 retried", |ps| {
        running(ps).iter().any(|p| index(p) == "0")
    })
    .await;
    let retry = running(&retried)
        .into_iter()
        .find(|p| index(p) == "0")
        .unwrap()
        .clone();
    finish(&pods, &retry, "Succeeded", 0, json!([])).await;
    finish(&pods, &active[2], "Succeeded", 0, json!([])).await;
    let done = wait_for(&jobs, "idx", "the job to complete", |j| {
        j.is_some_and(|j| condition(j, "Complete").is_some())
    })
    .await
    .unwrap();
    let s = done.status.unwrap();
    assert_eq!(s.completed_indexes.as_deref(), Some("0-2"));
    assert_eq!((s.succeeded, s.failed), (Some(3), Some(1)));
    h.stop().await;
}

#[tokio::test]
async fn the_pod_failure_policy_ignores_disruptions_and_fails_on_a_listed_exit_code() {
    let (h, _clock) = start().await;
    let jobs: Api<Job> = h.api(CLUSTER, "default");
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let spec = json!({
        "backoffLimit": 6,
        "podFailurePolicy": {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
        ]},
    });
    jobs.create(&PostParams::default(), &job("policy", spec))
        .await
        .unwrap();
    let first = wait_running(&pods, 1).await;
    let disrupted =
        json!([{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}]);
    finish(&pods, &first[0], "Failed", 137, disrupted).await;
    // Ignored: not counted, and replaced at once (no back-off).
    let second = wait_list(&pods, "a replacement", |ps| {
        running(ps)
            .iter()
            .any(|p| p.name_any() != first[0].name_any())
    })
    .await;
    let second = running(&second)[0].clone();
    let j = jobs.get("policy").await.unwrap();
    assert_eq!(j.status.and_then(|s| s.failed).unwrap_or(0), 0);
    finish(&pods, &second, "Failed", 42, json!([])).await;
    let failed = wait_for(&jobs, "policy", "the job to fail", |j| {
        j.is_some_and(|j| condition(j, "Failed").is_some())
    })
    .await
    .unwrap();
    let (reason, message) = condition(&failed, "Failed").unwrap();
    assert_eq!(reason, "PodFailurePolicy");
    assert_eq!(
        message,
        format!(
            "Container main for pod default/{} failed with exit code 42 matching FailJob rule at index 1",
            second.name_any()
        )
    );
    assert_eq!(failed.status.unwrap().failed, Some(1));
    h.stop().await;
}

#[tokio::test]
async fn a_finished_job_is_deleted_with_its_pods_after_its_ttl() {
    let (h, clock) = start().await;
    let jobs: Api<Job> = h.api(CLUSTER, "default");
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    jobs.create(
        &PostParams::default(),
        &job("brief", json!({"ttlSecondsAfterFinished": 60})),
    )
    .await
    .unwrap();
    let p = wait_running(&pods, 1).await;
    finish(&pods, &p[0], "Succeeded", 0, json!([])).await;
    wait_for(&jobs, "brief", "the job to complete", |j| {
        j.is_some_and(|j| condition(j, "Complete").is_some())
    })
    .await;
    clock.advance(Duration::from_secs(61));
    wait_for(&jobs, "brief", "the job to be deleted", |j| j.is_none()).await;
    wait_list(&pods, "its pods deleted", |ps| ps.is_empty()).await;
    h.stop().await;
}
