//! One CronJob sync (upstream `syncCronJob`, `mostRecentScheduleTime`, `getJobFromTemplate2`,
//! `cleanupFinishedJobs`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;
use kube::Api;
use kube::api::{DeleteParams, PostParams, PropagationPolicy};

use super::{CronJobController, SCHEDULED_TIMESTAMP};
use crate::clock::until;
use crate::job::policy::true_condition;
use crate::podutil;
use apimachinery::cron::{self, Schedule};
use runtime::error::{Result, ignore_not_found};
use runtime::informer::ObjectKey;
use runtime::queue::Action;

/// Upstream warns (event `TooManyMissedTimes`) beyond this many missed times.
const MANY_MISSED: usize = 100;

/// The most recent scheduled time in `(earliest, now]` and how many were missed.
pub fn most_recent(
    s: &Schedule,
    tz: &TimeZone,
    earliest: Timestamp,
    now: Timestamp,
) -> (Option<Timestamp>, usize) {
    let mut t = earliest;
    let mut last = None;
    let mut missed = 0;
    while let Some(n) = s.next(t, tz) {
        if n > now {
            break;
        }
        missed += 1;
        // Far behind: skip ahead by whole periods, then walk the rest.
        if missed == 1000
            && let Some(n2) = s.next(n, tz)
        {
            let period = (n2.as_second() - n.as_second()).max(60);
            let behind = (now.as_second() - n.as_second()) / period;
            if behind > 2 {
                let skip = behind - 2;
                missed += usize::try_from(skip).unwrap_or(0);
                t = Timestamp::from_second(n.as_second() + skip * period).unwrap_or(n);
                last = Some(t);
                continue;
            }
        }
        last = Some(n);
        t = n;
    }
    (last, missed)
}

fn is_finished(job: &Job) -> Option<&'static str> {
    let conds = job.status.as_ref()?.conditions.as_deref()?;
    if true_condition(conds, "Complete").is_some() {
        Some("Complete")
    } else if true_condition(conds, "Failed").is_some() {
        Some("Failed")
    } else {
        None
    }
}

fn job_ref(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// Go's RFC 3339 rendering of `t` in `tz` (`Z` for UTC).
pub fn rfc3339(t: Timestamp, tz: &TimeZone) -> String {
    let z = t.to_zoned(tz.clone());
    if z.offset().seconds() == 0 {
        z.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        z.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
    }
}

/// The Job for the time `at` (upstream `getJobFromTemplate2`).
pub fn job_for(cj: &CronJob, at: Timestamp, tz: &TimeZone) -> Job {
    let template = cj
        .spec
        .as_ref()
        .map(|s| s.job_template.clone())
        .unwrap_or_default();
    let tm = template.metadata.unwrap_or_default();
    let mut annotations = tm.annotations.unwrap_or_default();
    annotations.insert(SCHEDULED_TIMESTAMP.into(), rfc3339(at, tz));
    let name = cj.metadata.name.as_deref().unwrap_or_default();
    Job {
        metadata: ObjectMeta {
            name: Some(format!("{name}-{}", at.as_second().div_euclid(60))),
            namespace: cj.metadata.namespace.clone(),
            labels: tm.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![podutil::new_controller_ref(
                &cj.metadata,
                "batch/v1",
                "CronJob",
            )]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

impl CronJobController {
    /// Syncs one CronJob.
    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let Some(cj) = self.cronjobs.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        let client = self.clients.cluster(&key.cluster)?;
        let jobs_api: Api<Job> = Api::namespaced(client.clone(), &key.namespace);
        let cj_api: Api<CronJob> = Api::namespaced(client, &key.namespace);
        let now = self.clock.now();
        let mut status = cj.status.clone().unwrap_or_default();
        let owned: Vec<Arc<Job>> = self
            .jobs
            .list_namespace(&key.cluster, &key.namespace)
            .into_iter()
            .filter(|j| {
                podutil::controller_ref(&j.metadata)
                    .is_some_and(|r| Some(&r.uid) == cj.metadata.uid.as_ref())
            })
            .collect();

        // The active list follows the owned Jobs.
        let mut active = status.active.take().unwrap_or_default();
        for j in &owned {
            let listed = active.iter().any(|r| r.uid == j.metadata.uid);
            match is_finished(j) {
                None if !listed => active.push(job_ref(j)),
                Some(how) if listed => {
                    active.retain(|r| r.uid != j.metadata.uid);
                    self.event(
                        &key,
                        &cj,
                        "SawCompletedJob",
                        format!(
                            "Saw completed job: {}, status: {how}",
                            j.metadata.name.as_deref().unwrap_or_default()
                        ),
                    );
                    if how == "Complete"
                        && let Some(t) = j.status.as_ref().and_then(|s| s.completion_time.clone())
                        && status
                            .last_successful_time
                            .as_ref()
                            .is_none_or(|l| l.0 < t.0)
                    {
                        status.last_successful_time = Some(t);
                    }
                }
                _ => {}
            }
        }
        let mut kept = Vec::new();
        for r in active {
            if owned.iter().any(|j| j.metadata.uid == r.uid) {
                kept.push(r);
                continue;
            }
            // Not in the informer: it may be new, or gone.
            let name = r.name.clone().unwrap_or_default();
            if ignore_not_found(jobs_api.get(&name).await)?.is_some_and(|j| j.metadata.uid == r.uid)
            {
                kept.push(r);
            }
        }
        status.active = Some(kept);

        let result = self.schedule(&key, &cj, &jobs_api, &mut status, now).await;
        self.cleanup(&key, &jobs_api, &cj, &owned).await?;
        if status.active.as_ref().is_some_and(Vec::is_empty) {
            status.active = None;
        }
        let status = Some(status).filter(|s| *s != CronJobStatus::default());
        let old = cj.status.clone().filter(|s| *s != CronJobStatus::default());
        if status != old {
            let mut next = (*cj).clone();
            next.status = status;
            match cj_api
                .replace_status(&key.name, &PostParams::default(), &next)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Action::AwaitChange),
                Err(e) => return Err(e.into()),
            }
        }
        result
    }

    /// Creates the Job of the most recent scheduled time if it is due; when to come back.
    async fn schedule(
        &self,
        key: &ObjectKey,
        cj: &CronJob,
        jobs_api: &Api<Job>,
        status: &mut CronJobStatus,
        now: Timestamp,
    ) -> Result<Action> {
        let spec = cj.spec.clone().unwrap_or_default();
        if cj.metadata.deletion_timestamp.is_some() || spec.suspend == Some(true) {
            return Ok(Action::AwaitChange);
        }
        let tz = match spec.time_zone.as_deref() {
            None => TimeZone::UTC,
            Some(name) => match TimeZone::get(name) {
                Ok(tz) => tz,
                Err(e) => {
                    tracing::warn!(?key, time_zone = name, error = %e, "UnknownTimeZone");
                    return Ok(Action::AwaitChange);
                }
            },
        };
        let sched = match cron::parse_standard(&spec.schedule) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(
                    ?key,
                    schedule = spec.schedule,
                    error = e,
                    "UnparseableSchedule"
                );
                return Ok(Action::AwaitChange);
            }
        };
        let created = cj.metadata.creation_timestamp.as_ref().map_or(now, |t| t.0);
        let mut earliest = status.last_schedule_time.as_ref().map_or(created, |t| t.0);
        if let Some(sds) = spec.starting_deadline_seconds
            && let Ok(bound) = Timestamp::from_second(now.as_second().saturating_sub(sds))
            && bound > earliest
        {
            earliest = bound;
        }
        let next_at = sched.next(now, &tz);
        let requeue = next_at.map_or(Action::AwaitChange, |t| {
            Action::RequeueAfter(until(now, t) + Duration::from_millis(100))
        });
        let (Some(at), missed) = most_recent(&sched, &tz, earliest, now) else {
            return Ok(requeue);
        };
        if missed > MANY_MISSED {
            tracing::warn!(?key, missed, "TooManyMissedTimes: check clock skew");
        }
        if let Some(sds) = spec.starting_deadline_seconds
            && at.as_second().saturating_add(sds) < now.as_second()
        {
            tracing::info!(?key, scheduled = %at, "MissSchedule: too late to start");
            return Ok(requeue);
        }
        let job = job_for(cj, at, &tz);
        let active = status.active.get_or_insert_with(Vec::new);
        if active.iter().any(|r| r.name == job.metadata.name)
            || status
                .last_schedule_time
                .as_ref()
                .is_some_and(|t| t.0 >= at)
        {
            return Ok(requeue);
        }
        match spec.concurrency_policy.as_deref() {
            Some("Forbid") if !active.is_empty() => return Ok(requeue),
            Some("Replace") => {
                let dp = DeleteParams {
                    propagation_policy: Some(PropagationPolicy::Background),
                    ..Default::default()
                };
                for r in std::mem::take(active) {
                    let name = r.name.unwrap_or_default();
                    if ignore_not_found(jobs_api.delete(&name, &dp).await)?.is_some() {
                        self.event(key, cj, "SuccessfulDelete", format!("Deleted job {name}"));
                    }
                }
            }
            _ => {}
        }
        let made = match jobs_api.create(&PostParams::default(), &job).await {
            Ok(j) => {
                let name = j.metadata.name.as_deref().unwrap_or_default();
                self.event(key, cj, "SuccessfulCreate", format!("Created job {name}"));
                j
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let name = job.metadata.name.clone().unwrap_or_default();
                let existing = jobs_api.get(&name).await?;
                let ours = podutil::controller_ref(&existing.metadata)
                    .is_some_and(|r| Some(&r.uid) == cj.metadata.uid.as_ref());
                if !ours {
                    return Ok(requeue);
                }
                existing
            }
            Err(kube::Error::Api(s)) if s.code == 403 => return Ok(requeue),
            Err(e) => return Err(e.into()),
        };
        if is_finished(&made).is_none() && !active.iter().any(|r| r.uid == made.metadata.uid) {
            active.push(job_ref(&made));
        }
        status.last_schedule_time = Some(Time(at));
        Ok(requeue)
    }

    /// A Normal event on the CronJob.
    fn event(&self, key: &ObjectKey, cj: &CronJob, reason: &str, message: String) {
        self.events.record(
            &key.cluster,
            runtime::events::reference(cj),
            runtime::events::NORMAL,
            reason,
            message,
        );
    }

    /// Deletes finished Jobs beyond the history limits, oldest first.
    async fn cleanup(
        &self,
        key: &ObjectKey,
        api: &Api<Job>,
        cj: &CronJob,
        owned: &[Arc<Job>],
    ) -> Result<()> {
        let spec = cj.spec.clone().unwrap_or_default();
        let started = |j: &Arc<Job>| {
            j.status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .or(j.metadata.creation_timestamp.as_ref())
                .map(|t| t.0)
        };
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..Default::default()
        };
        for (how, limit) in [
            ("Complete", spec.successful_jobs_history_limit.unwrap_or(3)),
            ("Failed", spec.failed_jobs_history_limit.unwrap_or(1)),
        ] {
            let mut done: Vec<&Arc<Job>> = owned
                .iter()
                .filter(|j| is_finished(j) == Some(how) && j.metadata.deletion_timestamp.is_none())
                .collect();
            let limit = usize::try_from(limit.max(0)).unwrap_or(0);
            if done.len() <= limit {
                continue;
            }
            done.sort_by_key(|j| started(j));
            for j in &done[..done.len() - limit] {
                let name = j.metadata.name.as_deref().unwrap_or_default();
                if ignore_not_found(api.delete(name, &dp).await)?.is_some() {
                    self.event(key, cj, "SuccessfulDelete", format!("Deleted job {name}"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_most_recent_time_counts_the_missed_ones() {
        let s = cron::parse_standard("*/10 * * * *").unwrap();
        let (t, missed) = most_recent(
            &s,
            &TimeZone::UTC,
            at("2026-11-30T12:05:00Z"),
            at("2026-11-30T12:41:00Z"),
        );
        assert_eq!(t, Some(at("2026-11-30T12:40:00Z")));
        assert_eq!(missed, 4);
        let (none, _) = most_recent(
            &s,
            &TimeZone::UTC,
            at("2026-11-30T12:40:00Z"),
            at("2026-11-30T12:41:00Z"),
        );
        assert_eq!(none, None);
    }

    #[test]
    fn far_behind_schedules_skip_ahead_to_the_latest_time() {
        let s = cron::parse_standard("* * * * *").unwrap();
        let (t, missed) = most_recent(
            &s,
            &TimeZone::UTC,
            at("2025-11-30T12:00:30Z"),
            at("2026-11-30T12:41:10Z"),
        );
        assert_eq!(t, Some(at("2026-11-30T12:41:00Z")));
        assert!(missed > 500_000);
    }

    #[test]
    fn jobs_are_named_by_scheduled_minutes_and_annotated_in_the_zone() {
        let cj: CronJob = serde_json::from_value(json!({
            "metadata": {"name": "hello", "namespace": "ns", "uid": "u"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {"template": {"spec": {"containers": []}}},
            }},
        }))
        .unwrap();
        let t = at("2026-11-30T12:41:00Z");
        let j = job_for(&cj, t, &TimeZone::UTC);
        assert_eq!(
            j.metadata.name.as_deref(),
            Some(format!("hello-{}", t.as_second() / 60).as_str())
        );
        let ann = j.metadata.annotations.unwrap();
        assert_eq!(ann[SCHEDULED_TIMESTAMP], "2026-11-30T12:41:00Z");
        assert_eq!(j.metadata.labels.unwrap()["team"], "a");
        let tokyo = TimeZone::get("Asia/Tokyo").unwrap();
        assert_eq!(rfc3339(t, &tokyo), "2026-11-30T21:41:00+09:00");
    }
}
