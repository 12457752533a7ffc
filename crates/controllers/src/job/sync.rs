//! One Job sync (upstream `syncJob` and `trackJobStatusAndRemoveFinalizers`): claim pods,
//! account finished ones through `uncountedTerminatedPods`, decide success or failure, keep
//! the wanted number of pods running, and write the status.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;

use super::pods::{
    TRACKING_FINALIZER, format_indexes, is_indexed, new_pod, parse_indexes, pod_index,
};
use super::policy::{self, Verdict, set_condition, true_condition};
use super::writes::write_status;
use super::{Backoff, JobController, has_tracking_finalizer};
use crate::claim::{Claimer, recheck_alive};
use crate::clock::until;
use crate::podutil;
use runtime::error::{Error, Result};
use runtime::informer::ObjectKey;
use runtime::queue::Action;

/// Upstream's `DefaultJobPodFailureBackOff` and `MaxJobPodFailureBackOff`.
const BACKOFF_BASE: Duration = Duration::from_secs(10);
const BACKOFF_MAX: Duration = Duration::from_secs(600);
/// The only `spec.managedBy` this controller serves.
const MANAGED_BY: &str = "kubernetes.io/job-controller";

fn backoff_delay(failures: u32) -> Duration {
    let shift = failures.saturating_sub(1).min(16);
    (BACKOFF_BASE * (1u32 << shift)).min(BACKOFF_MAX)
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

impl JobController {
    /// Syncs one Job.
    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let client = self.clients.cluster(&key.cluster)?;
        let pods_api: Api<Pod> = Api::namespaced(client.clone(), &key.namespace);
        let jobs_api: Api<Job> = Api::namespaced(client, &key.namespace);
        let Some(job) = self.jobs.get(&key) else {
            self.expectations.forget(&key);
            self.backoff.lock().remove(&key);
            self.release_orphans(&key, &pods_api).await?;
            return Ok(Action::AwaitChange);
        };
        let spec = job.spec.clone().unwrap_or_default();
        if spec.managed_by.as_deref().is_some_and(|m| m != MANAGED_BY) {
            return Ok(Action::AwaitChange);
        }
        let candidates = self.pods.claim_candidates(
            &key.cluster,
            &key.namespace,
            job.metadata.uid.as_deref().unwrap_or_default(),
        );
        let claimer = Claimer {
            owner: &job.metadata,
            api_version: "batch/v1",
            kind: "Job",
            selector: spec.selector.as_ref(),
            adopt_finalizer: Some(TRACKING_FINALIZER),
        };
        let alive = async || recheck_alive(&jobs_api, &job.metadata).await;
        let pods = claimer
            .claim(&pods_api, candidates, |_| true, alive)
            .await?;
        if job.metadata.deletion_timestamp.is_some() {
            for p in pods.iter().filter(|p| has_tracking_finalizer(p)) {
                self.remove_finalizer(&pods_api, p).await?;
            }
            return Ok(Action::AwaitChange);
        }

        let now = self.clock.now();
        let indexed = is_indexed(&job);
        let completions = spec.completions;
        let parallelism = spec.parallelism.unwrap_or(1).max(0);
        let old = job.status.clone().unwrap_or_default();
        let mut status = old.clone();
        let mut conds = status.conditions.take().unwrap_or_default();
        let finished = true_condition(&conds, "Complete").is_some()
            || true_condition(&conds, "Failed").is_some();
        let unc = status.uncounted_terminated_pods.take().unwrap_or_default();
        let mut unc_s: BTreeSet<String> = unc.succeeded.unwrap_or_default().into_iter().collect();
        let mut unc_f: BTreeSet<String> = unc.failed.unwrap_or_default().into_iter().collect();
        let mut completed =
            parse_indexes(old.completed_indexes.as_deref(), completions.unwrap_or(0));

        // Classify the pods; newly finished tracked ones become uncounted.
        let done: HashSet<String> = self.finalized.lock().clone();
        let mut active: Vec<Arc<Pod>> = Vec::new();
        let mut to_finalize: Vec<Arc<Pod>> = Vec::new();
        let mut terminating = 0;
        let mut fail_msg: Option<String> = None;
        let (mut new_failures, mut new_success) = (0u32, false);
        for pod in &pods {
            let succeeded = phase(pod) == "Succeeded";
            let failed = phase(pod) == "Failed" || pod.metadata.deletion_timestamp.is_some();
            if !succeeded && !failed {
                active.push(pod.clone());
                continue;
            }
            if pod.metadata.deletion_timestamp.is_some() && !succeeded && phase(pod) != "Failed" {
                terminating += 1;
            }
            let u = uid(pod);
            if !has_tracking_finalizer(pod) || done.contains(&u) {
                continue;
            }
            to_finalize.push(pod.clone());
            if unc_s.contains(&u) || unc_f.contains(&u) {
                continue;
            }
            if succeeded {
                new_success = true;
                if !indexed {
                    unc_s.insert(u);
                } else if let Some(i) = pod_index(pod, completions.unwrap_or(0)) {
                    completed.insert(i);
                    unc_s.insert(u);
                }
                continue;
            }
            match policy::verdict(&job, pod) {
                Verdict::Ignore => {}
                Verdict::Count => {
                    unc_f.insert(u);
                    new_failures += 1;
                }
                Verdict::FailJob(m) => {
                    fail_msg.get_or_insert(m);
                    unc_f.insert(u);
                    new_failures += 1;
                }
            }
        }
        self.record_backoff(&key, new_failures, new_success, now);

        let succeeded_total = if indexed {
            completed.len() as i32
        } else {
            old.succeeded.unwrap_or(0) + unc_s.len() as i32
        };
        let failed_total = old.failed.unwrap_or(0) + unc_f.len() as i32;
        let suspended = spec.suspend == Some(true);
        if status.start_time.is_none() && !suspended && !finished {
            status.start_time = Some(Time(now));
        }

        // Decide the outcome (the interim condition of upstream 1.31+).
        let targeted = true_condition(&conds, "FailureTarget").is_some()
            || true_condition(&conds, "SuccessCriteriaMet").is_some();
        if !finished && !targeted {
            let deadline_passed = spec.active_deadline_seconds.is_some_and(|s| {
                status
                    .start_time
                    .as_ref()
                    .is_some_and(|t| t.0.as_second().saturating_add(s) <= now.as_second())
            }) && !suspended;
            let failure = if let Some(m) = fail_msg {
                Some((policy::REASON_POLICY, m))
            } else if failed_total > spec.backoff_limit.unwrap_or(6) {
                Some((policy::REASON_BACKOFF, policy::MSG_BACKOFF.to_string()))
            } else if deadline_passed {
                Some((policy::REASON_DEADLINE, policy::MSG_DEADLINE.to_string()))
            } else {
                None
            };
            let success = match completions {
                _ if indexed => completed.len() as i32 >= completions.unwrap_or(0),
                Some(c) => succeeded_total >= c,
                None => succeeded_total > 0 && active.is_empty(),
            };
            if let Some((reason, msg)) = failure {
                set_condition(&mut conds, "FailureTarget", "True", reason, &msg, now);
            } else if success {
                let (r, m) = (policy::REASON_COMPLETIONS, policy::MSG_COMPLETIONS);
                set_condition(&mut conds, "SuccessCriteriaMet", "True", r, m, now);
            }
        }
        let targeted = true_condition(&conds, "FailureTarget").is_some()
            || true_condition(&conds, "SuccessCriteriaMet").is_some();

        // Persist the newly uncounted pods (and any target condition) before removing
        // finalizers, so a restart cannot lose them.
        let mut job_now = (*job).clone();
        let newly_uncounted = to_finalize.iter().any(|p| {
            !old_uncounted(&old).contains(&uid(p))
                && (unc_s.contains(&uid(p)) || unc_f.contains(&uid(p)))
        });
        let mut interim = status.clone();
        interim.conditions = (!conds.is_empty()).then(|| conds.clone());
        interim.uncounted_terminated_pods = Some(uncounted(&unc_s, &unc_f));
        if indexed {
            interim.completed_indexes = format_indexes(&completed);
        }
        if newly_uncounted || (targeted && !old_targeted(&old)) {
            job_now.status = Some(interim);
            job_now = match write_status(&jobs_api, &job_now).await? {
                Some(j) => j,
                None => return Ok(Action::AwaitChange),
            };
        }

        // Finished or decided: no pod keeps running.
        let mut deleted = 0;
        if finished || targeted || suspended {
            deleted = self
                .delete_pods(&key, &pods_api, active.iter().collect())
                .await?;
        }
        let mut folded: HashSet<String> = HashSet::new();
        for p in &to_finalize {
            if self.remove_finalizer(&pods_api, p).await? {
                folded.insert(uid(p));
            }
        }
        // Uncounted pods that no longer carry the finalizer (or are gone) are counted now.
        let live: HashSet<String> = pods
            .iter()
            .filter(|p| has_tracking_finalizer(p) && !done.contains(&uid(p)))
            .map(|p| uid(p))
            .collect();
        let countable = |u: &String| folded.contains(u) || !live.contains(u);
        let (fs, rs): (BTreeSet<String>, BTreeSet<String>) = unc_s.into_iter().partition(countable);
        let (ff, rf): (BTreeSet<String>, BTreeSet<String>) = unc_f.into_iter().partition(countable);
        status.succeeded = Some(if indexed {
            completed.len() as i32
        } else {
            old.succeeded.unwrap_or(0) + fs.len() as i32
        });
        status.failed = Some(old.failed.unwrap_or(0) + ff.len() as i32);
        status.uncounted_terminated_pods = Some(uncounted(&rs, &rf));
        if indexed {
            status.completed_indexes = format_indexes(&completed);
        }

        // Keep the wanted pods running.
        let mut requeue: Option<Duration> = None;
        let mut active_count = active.len() as i32 - deleted as i32;
        if suspended && !finished && !targeted {
            set_condition(
                &mut conds,
                "Suspended",
                "True",
                "JobSuspended",
                "Job suspended",
                now,
            );
        } else if !finished && !targeted {
            if true_condition(&conds, "Suspended").is_some() {
                set_condition(
                    &mut conds,
                    "Suspended",
                    "False",
                    "JobResumed",
                    "Job resumed",
                    now,
                );
                status.start_time = Some(Time(now));
            }
            if self.expectations.satisfied(&key) {
                let (delta, wait) = self
                    .manage(
                        &key,
                        &job,
                        &pods_api,
                        &active,
                        &completed,
                        succeeded_total,
                        parallelism,
                        now,
                    )
                    .await?;
                active_count += delta;
                requeue = wait;
            }
            if let (Some(s), Some(start)) = (spec.active_deadline_seconds, &status.start_time) {
                let at = Timestamp::from_second(start.0.as_second().saturating_add(s))
                    .unwrap_or(Timestamp::MAX);
                let left = until(now, at).max(Duration::from_millis(100));
                requeue = Some(requeue.map_or(left, |r| r.min(left)));
            }
        }

        // The final condition, once no pod runs and every pod is counted.
        let settled = active.is_empty()
            && status.uncounted_terminated_pods.as_ref().is_none_or(|u| {
                u.succeeded.as_deref().unwrap_or_default().is_empty()
                    && u.failed.as_deref().unwrap_or_default().is_empty()
            });
        let mut finish_event = None;
        if !finished && settled {
            if let Some(c) = true_condition(&conds, "FailureTarget").cloned() {
                let (r, m) = (c.reason.unwrap_or_default(), c.message.unwrap_or_default());
                set_condition(&mut conds, "Failed", "True", &r, &m, now);
                finish_event = Some((runtime::events::WARNING, r, m));
            } else if let Some(c) = true_condition(&conds, "SuccessCriteriaMet").cloned() {
                let (r, m) = (c.reason.unwrap_or_default(), c.message.unwrap_or_default());
                set_condition(&mut conds, "Complete", "True", &r, &m, now);
                status.completion_time = Some(Time(now));
                finish_event = Some((
                    runtime::events::NORMAL,
                    "Completed".to_string(),
                    "Job completed".to_string(),
                ));
            }
        }
        status.active = Some(active_count.max(0));
        status.ready = Some(active.iter().filter(|p| podutil::is_ready(p)).count() as i32);
        status.terminating = Some(terminating);
        status.conditions = (!conds.is_empty()).then_some(conds);
        if job_now.status.as_ref() != Some(&status) {
            job_now.status = Some(status);
            if write_status(&jobs_api, &job_now).await?.is_none() {
                return Ok(Action::AwaitChange);
            }
            if let Some((type_, reason, message)) = finish_event {
                self.events.record(
                    &key.cluster,
                    runtime::events::reference(&job_now),
                    type_,
                    &reason,
                    message,
                );
            }
        }
        Ok(requeue.map_or(Action::AwaitChange, Action::RequeueAfter))
    }

    fn record_backoff(&self, key: &ObjectKey, failures: u32, success: bool, now: Timestamp) {
        let mut map = self.backoff.lock();
        if success {
            map.remove(key);
        }
        if failures > 0 {
            let b = map.entry(key.clone()).or_insert(Backoff {
                failures: 0,
                last: now,
            });
            b.failures += failures;
            b.last = now;
        }
    }

    /// Creates or deletes pods so the wanted number runs; the change in active pods and how
    /// long the failure back-off still holds creations.
    #[allow(clippy::too_many_arguments)]
    async fn manage(
        &self,
        key: &ObjectKey,
        job: &Job,
        api: &Api<Pod>,
        active: &[Arc<Pod>],
        completed: &BTreeSet<i32>,
        succeeded: i32,
        parallelism: i32,
        now: Timestamp,
    ) -> Result<(i32, Option<Duration>)> {
        let completions = job.spec.as_ref().and_then(|s| s.completions);
        // Which active pods to delete, and the indexes (or count) to create.
        let mut surplus: Vec<&Arc<Pod>> = Vec::new();
        let mut create: Vec<Option<i32>> = Vec::new();
        if is_indexed(job) {
            let total = completions.unwrap_or(0);
            let mut held = BTreeSet::new();
            let mut keep = Vec::new();
            for p in active {
                match pod_index(p, total) {
                    Some(i) if !completed.contains(&i) && held.insert(i) => keep.push(p),
                    _ => surplus.push(p),
                }
            }
            let over = keep.len() as i32 - parallelism;
            if over > 0 {
                keep.sort_by_key(|p| std::cmp::Reverse(pod_index(p, total)));
                surplus.extend(keep.into_iter().take(over as usize));
            }
            let room = (parallelism - held.len() as i32).max(0) as usize;
            create = (0..total)
                .filter(|i| !completed.contains(i) && !held.contains(i))
                .take(room)
                .map(Some)
                .collect();
        } else {
            let want = match completions {
                None if succeeded > 0 => 0,
                None => parallelism,
                Some(c) => parallelism.min(c - succeeded).max(0),
            };
            let have = active.len() as i32;
            if have > want {
                let mut ranked: Vec<&Arc<Pod>> = active.iter().collect();
                ranked.sort_by(|a, b| podutil::deletion_order(a, b));
                surplus = ranked.into_iter().take((have - want) as usize).collect();
            } else {
                create = vec![None; (want - have) as usize];
            }
        }
        let deleted = self.delete_pods(key, api, surplus).await? as i32;
        if create.is_empty() {
            return Ok((-deleted, None));
        }
        if let Some(b) = self.backoff.lock().get(key).copied() {
            let ready_at = b.last + backoff_delay(b.failures);
            let wait = until(now, ready_at);
            if !wait.is_zero() {
                return Ok((-deleted, Some(wait)));
            }
        }
        self.expectations.expect_creations(key, create.len());
        let pp = PostParams::default();
        let new_pods: Vec<Pod> = create.iter().map(|i| new_pod(job, *i)).collect();
        let results = futures::future::join_all(new_pods.iter().map(|p| api.create(&pp, p))).await;
        let mut created = 0;
        let mut failed = None;
        for r in results {
            match r {
                Ok(p) => {
                    created += 1;
                    podutil::record_pod_event(
                        &self.events,
                        &key.cluster,
                        job,
                        true,
                        p.metadata.name.as_deref().unwrap_or_default(),
                    );
                }
                Err(e) => {
                    self.expectations.creation_observed(key);
                    if !matches!(&e, kube::Error::Api(s) if s.code == 403) {
                        failed = Some(e);
                    }
                }
            }
        }
        if let Some(e) = failed {
            return Err(Error::Kube(e));
        }
        Ok((created - deleted, None))
    }
}

fn uncounted(s: &BTreeSet<String>, f: &BTreeSet<String>) -> UncountedTerminatedPods {
    // Empty lists are left out, as upstream serialises them.
    let list = |set: &BTreeSet<String>| (!set.is_empty()).then(|| set.iter().cloned().collect());
    UncountedTerminatedPods {
        succeeded: list(s),
        failed: list(f),
    }
}

fn old_uncounted(old: &JobStatus) -> HashSet<String> {
    old.uncounted_terminated_pods
        .iter()
        .flat_map(|u| {
            u.succeeded
                .iter()
                .flatten()
                .chain(u.failed.iter().flatten())
        })
        .cloned()
        .collect()
}

fn old_targeted(old: &JobStatus) -> bool {
    let conds = old.conditions.as_deref().unwrap_or_default();
    true_condition(conds, "FailureTarget").is_some()
        || true_condition(conds, "SuccessCriteriaMet").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_back_off_doubles_from_ten_seconds_up_to_ten_minutes() {
        assert_eq!(backoff_delay(1), Duration::from_secs(10));
        assert_eq!(backoff_delay(2), Duration::from_secs(20));
        assert_eq!(backoff_delay(4), Duration::from_secs(80));
        assert_eq!(backoff_delay(30), Duration::from_secs(600));
    }
}
