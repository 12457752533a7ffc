//! CronJobs against a real in-process API server: a `* * * * *` CronJob spawning a Job on the
//! real clock; on a fake clock, Jobs named by scheduled minute and annotated with the time,
//! the active list and last schedule/success times, Forbid and Replace, history limits,
//! suspend, and starting deadlines.

mod common;

use std::time::Duration;

use common::{CA_PEM, Harness, wait_for, wait_list};
use controllers::clock::FakeClock;
use futures::StreamExt;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

const CLUSTER: &str = "tenant-a";
const SCHEDULED: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

fn cronjob(name: &str, schedule: &str, extra: Value) -> CronJob {
    let mut spec = json!({
        "schedule": schedule,
        "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}],
        }}}},
    });
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

/// A fake clock a little after the next whole minute, so a schedule time lies between the
/// CronJob's creation and "now".
async fn start_fake() -> (Harness, std::sync::Arc<FakeClock>) {
    let clock = FakeClock::new(Timestamp::now());
    let options = controllers::Options::default()
        .with_ca(CA_PEM)
        .with_clock(clock.clone());
    (Harness::start_with(&[CLUSTER], options).await, clock)
}

fn minutes_after(t: Timestamp, n: i64) -> Timestamp {
    Timestamp::from_second((t.as_second() / 60 + n) * 60 + 5).unwrap()
}

/// Marks a Job finished through its status, as the Job controller would.
async fn finish(api: &Api<Job>, name: &str, ty: &str) {
    let now = Timestamp::now().to_string();
    let mut conditions = vec![json!({"type": ty, "status": "True", "lastTransitionTime": now})];
    let mut status = json!({"startTime": now});
    if ty == "Complete" {
        conditions.insert(
            0,
            json!({"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now}),
        );
        status["completionTime"] = json!(now);
        status["succeeded"] = json!(1);
    } else {
        conditions.insert(
            0,
            json!({"type": "FailureTarget", "status": "True", "lastTransitionTime": now}),
        );
        status["failed"] = json!(1);
    }
    status["conditions"] = json!(conditions);
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": status})),
    )
    .await
    .expect("job status");
}

fn active_names(cj: &CronJob) -> Vec<String> {
    cj.status
        .as_ref()
        .and_then(|s| s.active.as_ref())
        .map(|a| a.iter().filter_map(|r| r.name.clone()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn an_every_minute_cronjob_spawns_a_job_on_the_real_clock() {
    let h = Harness::start(&[CLUSTER]).await;
    let cjs: Api<CronJob> = h.api(CLUSTER, "default");
    let jobs: Api<Job> = h.api(CLUSTER, "default");
    let cj = cjs
        .create(
            &PostParams::default(),
            &cronjob("tick", "* * * * *", json!({})),
        )
        .await
        .unwrap();
    // At most one minute and a bit: wait on a watch with a longer patience than the harness.
    let mut stream = watcher::watcher(jobs.clone(), watcher::Config::default())
        .default_backoff()
        .boxed();
    let job = tokio::time::timeout(Duration::from_secs(100), async {
        while let Some(ev) = stream.next().await {
            if let Ok(watcher::Event::Apply(j) | watcher::Event::InitApply(j)) = ev {
                return j;
            }
        }
        panic!("watch ended");
    })
    .await
    .expect("a job within 100 s");
    let minutes: i64 = job
        .name_any()
        .strip_prefix("tick-")
        .unwrap()
        .parse()
        .unwrap();
    let scheduled: Timestamp = job.annotations()[SCHEDULED].parse().unwrap();
    assert_eq!(scheduled.as_second(), minutes * 60);
    assert!(
        job.owner_references()
            .iter()
            .any(|r| Some(&r.uid) == cj.metadata.uid.as_ref())
    );
    wait_for(&cjs, "tick", "the job listed as active", |c| {
        c.is_some_and(|c| {
            active_names(c).contains(&job.name_any())
                && c.status.as_ref().unwrap().last_schedule_time.is_some()
        })
    })
    .await;
    h.stop().await;
}

#[tokio::test]
async fn scheduled_jobs_are_tracked_and_finished_ones_leave_the_active_list() {
    let (h, clock) = start_fake().await;
    let cjs: Api<CronJob> = h.api(CLUSTER, "default");
    let jobs: Api<Job> = h.api(CLUSTER, "default");
    let extra = json!({"successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 1});
    cjs.create(
        &PostParams::default(),
        &cronjob("hello", "* * * * *", extra),
    )
    .await
    .unwrap();
    let t1 = minutes_after(Timestamp::now(), 1);
    clock.set(t1);
    let name1 = format!("hello-{}", t1.as_second() / 60);
    let j1 = wait_for(&jobs, &name1, "the first job", |j| j.is_some())
        .await
        .unwrap();
    let expected = Timestamp::from_second(t1.as_second() / 60 * 60)
        .unwrap()
        .to_string();
    assert_eq!(j1.annotations()[SCHEDULED], expected.replace(".000", ""));
    wait_for(&cjs, "hello", "the job active", |c| {
        c.is_some_and(|c| active_names(c) == [name1.clone()])
    })
    .await;
    finish(&jobs, &name1, "Complete").await;
    let cj = wait_for(&cjs, "hello", "the job to leave the active list", |c| {
        c.is_some_and(|c| {
            active_names(c).is_empty() && c.status.as_ref().unwrap().last_successful_time.is_some()
        })
    })
    .await
    .unwrap();
    assert_eq!(
        cj.status.unwrap().last_schedule_time.unwrap().0.as_second(),
        t1.as_second() / 60 * 60
    );
    // Two more successful runs: only the latest is kept.
    for n in 2..4 {
        let t = minutes_after(Timestamp::now(), n);
        clock.set(t);
        let name = format!("hello-{}", t.as_second() / 60);
        wait_for(&jobs, &name, "the next job", |j| j.is_some()).await;
        finish(&jobs, &name, "Complete").await;
    }
    wait_list(&jobs, "one successful job kept", |js| js.len() == 1).await;
    h.stop().await;
}

#[tokio::test]
async fn forbid_skips_while_a_job_runs_and_replace_swaps_it() {
    let (h, clock) = start_fake().await;
    let cjs: Api<CronJob> = h.api(CLUSTER, "default");
    let jobs: Api<Job> = h.api(CLUSTER, "default");
    let base = Timestamp::now();
    cjs.create(
        &PostParams::default(),
        &cronjob("only", "* * * * *", json!({"concurrencyPolicy": "Forbid"})),
    )
    .await
    .unwrap();
    clock.set(minutes_after(base, 1));
    wait_list(&jobs, "the first job", |js| js.len() == 1).await;
    clock.set(minutes_after(base, 2));
    // The time was handled (skipped): the CronJob comes back for the next one without a Job.
    wait_for(&cjs, "only", "the first job active", |c| {
        c.is_some_and(|c| active_names(c).len() == 1)
    })
    .await;
    assert_eq!(jobs.list(&Default::default()).await.unwrap().items.len(), 1);

    cjs.patch(
        "only",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"concurrencyPolicy": "Replace"}})),
    )
    .await
    .unwrap();
    let t3 = minutes_after(base, 3);
    clock.set(t3);
    let name3 = format!("only-{}", t3.as_second() / 60);
    wait_for(&cjs, "only", "the replacement active alone", |c| {
        c.is_some_and(|c| active_names(c) == [name3.clone()])
    })
    .await;
    wait_list(&jobs, "the old job deleted", |js| {
        js.len() == 1 && js[0].name_any() == name3
    })
    .await;
    h.stop().await;
}

#[tokio::test]
async fn suspended_and_too_late_cronjobs_create_nothing() {
    let (h, clock) = start_fake().await;
    let cjs: Api<CronJob> = h.api(CLUSTER, "default");
    let jobs: Api<Job> = h.api(CLUSTER, "default");
    let base = Timestamp::now();
    cjs.create(
        &PostParams::default(),
        &cronjob("paused", "* * * * *", json!({"suspend": true})),
    )
    .await
    .unwrap();
    // Scheduled at minute 1, checked at minute 1 + 50 s with a 10 s deadline: too late.
    cjs.create(
        &PostParams::default(),
        &cronjob(
            "late",
            "*/30 * * * *",
            json!({"startingDeadlineSeconds": 10}),
        ),
    )
    .await
    .unwrap();
    cjs.create(
        &PostParams::default(),
        &cronjob("witness", "* * * * *", json!({})),
    )
    .await
    .unwrap();
    let t = Timestamp::from_second(minutes_after(base, 1).as_second() + 45).unwrap();
    clock.set(t);
    let witness = format!("witness-{}", t.as_second() / 60);
    wait_for(&jobs, &witness, "the witness job", |j| j.is_some()).await;
    wait_for(&cjs, "witness", "the witness scheduled", |c| {
        c.is_some_and(|c| {
            c.status
                .as_ref()
                .is_some_and(|s| s.last_schedule_time.is_some())
        })
    })
    .await;
    let names: Vec<String> = jobs
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|j| j.name_any())
        .collect();
    assert_eq!(names, [witness]);
    let paused = cjs.get("paused").await.unwrap();
    assert!(paused.status.and_then(|s| s.last_schedule_time).is_none());
    // Resuming creates the Job for the most recent time.
    cjs.patch(
        "paused",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"suspend": false}})),
    )
    .await
    .unwrap();
    wait_for(
        &jobs,
        &format!("paused-{}", t.as_second() / 60),
        "the resumed job",
        |j| j.is_some(),
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn a_time_zone_schedules_in_local_wall_time() {
    let (h, clock) = start_fake().await;
    let cjs: Api<CronJob> = h.api(CLUSTER, "default");
    let jobs: Api<Job> = h.api(CLUSTER, "default");
    let extra = json!({"timeZone": "Asia/Kolkata"});
    cjs.create(&PostParams::default(), &cronjob("ist", "* * * * *", extra))
        .await
        .unwrap();
    let t = minutes_after(Timestamp::now(), 1);
    clock.set(t);
    let j = wait_for(
        &jobs,
        &format!("ist-{}", t.as_second() / 60),
        "the job",
        |j| j.is_some(),
    )
    .await
    .unwrap();
    assert!(j.annotations()[SCHEDULED].ends_with("+05:30"));
    h.stop().await;
}
