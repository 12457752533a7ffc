//! A Deployment's status and conditions (upstream `progress.go` and the status half of
//! `sync.go`): replica counts summed over its ReplicaSets, Available by minimum availability,
//! and Progressing with upstream's reasons — created or found a new set, progressing, complete,
//! timed out after progressDeadlineSeconds, paused and resumed.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::rollout::Sync;
use super::util;
use runtime::error::Result;

/// Condition reasons, as upstream spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    NewReplicaSetCreated,
    FoundNewReplicaSet,
    ReplicaSetUpdated,
    NewReplicaSetAvailable,
    ProgressDeadlineExceeded,
    ReplicaSetCreateError,
    DeploymentPaused,
    DeploymentResumed,
    MinimumReplicasAvailable,
    MinimumReplicasUnavailable,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NewReplicaSetCreated => "NewReplicaSetCreated",
            Reason::FoundNewReplicaSet => "FoundNewReplicaSet",
            Reason::ReplicaSetUpdated => "ReplicaSetUpdated",
            Reason::NewReplicaSetAvailable => "NewReplicaSetAvailable",
            Reason::ProgressDeadlineExceeded => "ProgressDeadlineExceeded",
            Reason::ReplicaSetCreateError => "ReplicaSetCreateError",
            Reason::DeploymentPaused => "DeploymentPaused",
            Reason::DeploymentResumed => "DeploymentResumed",
            Reason::MinimumReplicasAvailable => "MinimumReplicasAvailable",
            Reason::MinimumReplicasUnavailable => "MinimumReplicasUnavailable",
        }
    }
}

pub fn new_condition(
    ty: &str,
    status: &str,
    reason: Reason,
    message: String,
) -> DeploymentCondition {
    let now = Time(Timestamp::now());
    DeploymentCondition {
        type_: ty.into(),
        status: status.into(),
        reason: Some(reason.as_str().into()),
        message: Some(message),
        last_update_time: Some(now.clone()),
        last_transition_time: Some(now),
    }
}

pub fn condition<'a>(d: &'a Deployment, ty: &str) -> Option<&'a DeploymentCondition> {
    status_condition(d.status.as_ref()?, ty)
}

fn status_condition<'a>(s: &'a DeploymentStatus, ty: &str) -> Option<&'a DeploymentCondition> {
    s.conditions.as_ref()?.iter().find(|c| c.type_ == ty)
}

/// Upstream `SetDeploymentCondition`: same status and reason is no change; same status keeps
/// the transition time.
pub fn set_condition(s: &mut DeploymentStatus, mut c: DeploymentCondition) {
    if let Some(cur) = status_condition(s, &c.type_) {
        if cur.status == c.status && cur.reason == c.reason {
            return;
        }
        if cur.status == c.status {
            c.last_transition_time = cur.last_transition_time.clone();
        }
    }
    remove_condition(s, &c.type_);
    s.conditions.get_or_insert_with(Vec::new).push(c);
}

pub fn remove_condition(s: &mut DeploymentStatus, ty: &str) {
    if let Some(cs) = s.conditions.as_mut() {
        cs.retain(|c| c.type_ != ty);
        if cs.is_empty() {
            s.conditions = None;
        }
    }
}

pub fn has_progress_deadline(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .is_some_and(|p| p != i32::MAX)
}

fn deadline(d: &Deployment) -> i64 {
    i64::from(
        d.spec
            .as_ref()
            .and_then(|s| s.progress_deadline_seconds)
            .unwrap_or(600),
    )
}

/// Every replica is updated and available, and the latest spec was observed.
pub fn deployment_complete(d: &Deployment, s: &DeploymentStatus) -> bool {
    let want = util::replicas(d);
    s.updated_replicas.unwrap_or(0) == want
        && s.replicas.unwrap_or(0) == want
        && s.available_replicas.unwrap_or(0) == want
        && s.observed_generation >= d.metadata.generation
}

/// Something moved since the last status.
fn deployment_progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let old_old = old.replicas.unwrap_or(0) - old.updated_replicas.unwrap_or(0);
    let new_old = new.replicas.unwrap_or(0) - new.updated_replicas.unwrap_or(0);
    new.updated_replicas.unwrap_or(0) > old.updated_replicas.unwrap_or(0)
        || new_old < old_old
        || new.ready_replicas.unwrap_or(0) > old.ready_replicas.unwrap_or(0)
        || new.available_replicas.unwrap_or(0) > old.available_replicas.unwrap_or(0)
}

fn timed_out(d: &Deployment, s: &DeploymentStatus, now: Timestamp) -> bool {
    if !has_progress_deadline(d) {
        return false;
    }
    let Some(c) = status_condition(s, "Progressing") else {
        return false;
    };
    match c.reason.as_deref() {
        Some("NewReplicaSetAvailable") => false,
        Some("ProgressDeadlineExceeded") => true,
        _ => c
            .last_update_time
            .as_ref()
            .is_some_and(|t| t.0.as_second() + deadline(d) < now.as_second()),
    }
}

fn nonzero(v: i32) -> Option<i32> {
    (v != 0).then_some(v)
}

/// Upstream `calculateStatus`.
pub fn calculate(
    d: &Deployment,
    new_rs: Option<&ReplicaSet>,
    old: &[ReplicaSet],
) -> DeploymentStatus {
    let all = || old.iter().chain(new_rs);
    let available = util::available_replicas(all());
    let total = util::spec_replicas(all());
    let prev = d.status.clone().unwrap_or_default();
    let mut s = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: nonzero(util::actual_replicas(all())),
        updated_replicas: nonzero(util::actual_replicas(new_rs)),
        ready_replicas: nonzero(util::ready_replicas(all())),
        available_replicas: nonzero(available),
        unavailable_replicas: nonzero((total - available).max(0)),
        collision_count: prev.collision_count,
        conditions: prev.conditions.clone(),
        terminating_replicas: prev.terminating_replicas,
    };
    if available >= util::replicas(d) - util::max_unavailable(d) {
        set_condition(
            &mut s,
            new_condition(
                "Available",
                "True",
                Reason::MinimumReplicasAvailable,
                "Deployment has minimum availability.".into(),
            ),
        );
    } else {
        set_condition(
            &mut s,
            new_condition(
                "Available",
                "False",
                Reason::MinimumReplicasUnavailable,
                "Deployment does not have minimum availability.".into(),
            ),
        );
    }
    s
}

fn rs_name(rs: Option<&ReplicaSet>) -> Option<String> {
    rs.and_then(|r| r.metadata.name.clone())
}

impl Sync {
    /// Writes the calculated status when it changed (scaling, pausing, deleting).
    pub async fn sync_status(
        &mut self,
        new_rs: Option<&ReplicaSet>,
        old: &[ReplicaSet],
    ) -> Result<()> {
        let s = calculate(&self.d, new_rs, old);
        if self.d.status.as_ref() == Some(&s) {
            return Ok(());
        }
        self.d.status = Some(s);
        self.update_status().await
    }

    /// Writes the status with the Progressing condition estimated (rollouts), and asks to be
    /// requeued when the progress deadline would pass.
    pub async fn sync_rollout_status(
        &mut self,
        new_rs: Option<&ReplicaSet>,
        old: &[ReplicaSet],
    ) -> Result<()> {
        let now = Timestamp::now();
        let mut s = calculate(&self.d, new_rs, old);
        if !has_progress_deadline(&self.d) {
            remove_condition(&mut s, "Progressing");
        }
        let cur = condition(&self.d, "Progressing").cloned();
        let complete_before = s.replicas == s.updated_replicas
            && cur
                .as_ref()
                .is_some_and(|c| c.reason.as_deref() == Some("NewReplicaSetAvailable"));
        if has_progress_deadline(&self.d) && !complete_before {
            let what = match rs_name(new_rs) {
                Some(n) => format!("ReplicaSet {n:?}"),
                None => format!(
                    "Deployment {:?}",
                    self.d.metadata.name.clone().unwrap_or_default()
                ),
            };
            if deployment_complete(&self.d, &s) {
                set_condition(
                    &mut s,
                    new_condition(
                        "Progressing",
                        "True",
                        Reason::NewReplicaSetAvailable,
                        format!("{what} has successfully progressed."),
                    ),
                );
            } else if deployment_progressing(&self.d, &s) {
                let mut c = new_condition(
                    "Progressing",
                    "True",
                    Reason::ReplicaSetUpdated,
                    format!("{what} is progressing."),
                );
                if let Some(cur) = &cur {
                    if cur.status == "True" {
                        c.last_transition_time = cur.last_transition_time.clone();
                    }
                    remove_condition(&mut s, "Progressing");
                }
                set_condition(&mut s, c);
            } else if timed_out(&self.d, &s, now) {
                set_condition(
                    &mut s,
                    new_condition(
                        "Progressing",
                        "False",
                        Reason::ProgressDeadlineExceeded,
                        format!("{what} has timed out progressing."),
                    ),
                );
            }
        }
        let failure = old.iter().chain(new_rs).find_map(|rs| {
            rs.status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == "ReplicaFailure" && c.status == "True")
                .cloned()
        });
        match failure {
            Some(f) => set_condition(
                &mut s,
                DeploymentCondition {
                    type_: "ReplicaFailure".into(),
                    status: f.status,
                    reason: f.reason,
                    message: f.message,
                    last_update_time: f.last_transition_time.clone(),
                    last_transition_time: f.last_transition_time,
                },
            ),
            None => remove_condition(&mut s, "ReplicaFailure"),
        }
        self.requeue_if_stuck(&s, now);
        if self.d.status.as_ref() == Some(&s) {
            return Ok(());
        }
        self.d.status = Some(s);
        self.update_status().await
    }

    /// Upstream `requeueStuckDeployment`: look again when the deadline passes.
    fn requeue_if_stuck(&mut self, s: &DeploymentStatus, now: Timestamp) {
        let Some(c) = status_condition(s, "Progressing") else {
            return;
        };
        if !has_progress_deadline(&self.d)
            || deployment_complete(&self.d, s)
            || c.reason.as_deref() == Some("ProgressDeadlineExceeded")
        {
            return;
        }
        let Some(t) = &c.last_update_time else { return };
        let after = t.0.as_second() + deadline(&self.d) - now.as_second();
        let d = if after < 1 {
            Duration::ZERO
        } else {
            Duration::from_secs(after as u64 + 1)
        };
        self.requeue_after(d);
    }

    /// Upstream `checkPausedConditions`: Progressing Unknown while paused and once resumed.
    pub async fn check_paused_conditions(&mut self) -> Result<()> {
        if !has_progress_deadline(&self.d) {
            return Ok(());
        }
        let cur = condition(&self.d, "Progressing");
        if cur.is_some_and(|c| c.reason.as_deref() == Some("ProgressDeadlineExceeded")) {
            return Ok(());
        }
        let paused_cond = cur.is_some_and(|c| c.reason.as_deref() == Some("DeploymentPaused"));
        let paused = self.d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
        let c = if paused && !paused_cond {
            new_condition(
                "Progressing",
                "Unknown",
                Reason::DeploymentPaused,
                "Deployment is paused".into(),
            )
        } else if !paused && paused_cond {
            new_condition(
                "Progressing",
                "Unknown",
                Reason::DeploymentResumed,
                "Deployment is resumed".into(),
            )
        } else {
            return Ok(());
        };
        set_condition(self.d.status.get_or_insert_with(Default::default), c);
        self.update_status().await
    }
}
