//! The pod state machine of a virtual kubelet: from a pod as the API server has it and the
//! time, what to do next.
//!
//! A bound pod goes new → containers creating → init containers completed (if it has any)
//! → running, and, unless it restarts forever
//! (`restartPolicy: Always`), exits after a short simulated run: Succeeded, or Failed when the
//! pod asks to fail (`virtual.matryoshka.dev/fail: "true"`; pods that restart on failure
//! crash-loop instead). `virtual.matryoshka.dev/run-seconds: "N"` lengthens the run. A pod
//! marked for deletion has its containers stopped and is then deleted with grace period 0,
//! upstream's kubelet flow. The stage is read from the pod's status only, so an agent that
//! restarts picks up where the last one left.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::status::Exit;

/// A pod annotation: `"true"` makes the pod's containers fail.
pub const FAIL_ANNOTATION: &str = "virtual.matryoshka.dev/fail";
/// A pod annotation: how many seconds the containers run before they exit.
pub const RUN_SECONDS_ANNOTATION: &str = "virtual.matryoshka.dev/run-seconds";

/// What to do with a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing until the pod changes.
    Idle,
    /// Report its containers as being created.
    Create,
    /// Run the init containers to completion (pods that have some), with a pod IP.
    Initialize,
    /// Start the containers, ready, with a pod IP.
    Start,
    /// Every container exits.
    Exit(Exit),
    /// The containers fail and back off (restarting pods told to fail).
    Crash,
    /// Stop the containers of a pod being deleted.
    Stop,
    /// Delete the stopped pod with grace period 0.
    Delete,
    /// Look again at this time.
    WaitUntil(SystemTime),
}

/// What the agent remembers of a pod beyond its status (lost on restart, then read from
/// the status).
#[derive(Debug, Clone, Copy)]
pub struct Timeline {
    pub now: SystemTime,
    /// When the agent reported the containers as being created.
    pub created: Option<SystemTime>,
    /// When the agent started the containers.
    pub started: Option<SystemTime>,
}

/// How long the simulated stages take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    /// From "creating" to running.
    pub start_delay: Duration,
    /// How long containers of non-restarting pods run before they exit.
    pub run_duration: Duration,
}

/// The stage a pod's status shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// No container statuses yet.
    New,
    /// Containers waiting to be created.
    Creating,
    /// Every container running.
    Running,
    /// Containers backing off after a failure.
    Crashing,
    /// Phase Succeeded or Failed, or every container terminated.
    Terminal,
}

fn all_match(list: &[ContainerStatus], f: impl Fn(&ContainerStatus) -> bool) -> bool {
    list.iter().all(f)
}

/// Whether every init container completed (or, for a sidecar, runs); true without any.
pub fn initialized(pod: &Pod) -> bool {
    let inits = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .map_or(0, Vec::len);
    if inits == 0 {
        return true;
    }
    let list = pod
        .status
        .as_ref()
        .and_then(|s| s.init_container_statuses.clone())
        .unwrap_or_default();
    list.len() == inits
        && list.iter().all(|c| {
            let st = c.state.clone().unwrap_or_default();
            st.running.is_some() || st.terminated.is_some_and(|t| t.exit_code == 0)
        })
}

/// The stage of `pod`.
pub fn stage(pod: &Pod) -> Stage {
    let Some(status) = pod.status.as_ref() else {
        return Stage::New;
    };
    if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return Stage::Terminal;
    }
    let want = pod.spec.as_ref().map_or(0, |s| s.containers.len());
    let list = status.container_statuses.clone().unwrap_or_default();
    if status.start_time.is_none() || list.is_empty() || list.len() != want {
        return Stage::New;
    }
    let state = |c: &ContainerStatus| c.state.clone().unwrap_or_default();
    if all_match(&list, |c| state(c).running.is_some()) {
        return Stage::Running;
    }
    if all_match(&list, |c| state(c).terminated.is_some()) {
        return Stage::Terminal;
    }
    if list.iter().any(|c| {
        state(c)
            .waiting
            .and_then(|w| w.reason)
            .is_some_and(|r| r == "CrashLoopBackOff")
    }) {
        return Stage::Crashing;
    }
    Stage::Creating
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// Whether the pod asks its containers to fail.
pub fn wants_failure(pod: &Pod) -> bool {
    annotation(pod, FAIL_ANNOTATION).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// How long the pod's containers run: the annotation's seconds, else `default`.
pub fn run_duration(pod: &Pod, default: Duration) -> Duration {
    annotation(pod, RUN_SECONDS_ANNOTATION)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(default, Duration::from_secs)
}

/// When the pod's containers started running, by their status (the earliest).
fn started_in_status(pod: &Pod) -> Option<SystemTime> {
    pod.status
        .as_ref()?
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.running.as_ref()?.started_at.clone())
        .map(|t| SystemTime::from(t.0))
        .min()
}

/// What to do next with `pod`.
pub fn next(pod: &Pod, t: &Timeline, pacing: &Pacing) -> Action {
    let stage = stage(pod);
    if pod.metadata.deletion_timestamp.is_some() {
        return match stage {
            Stage::New | Stage::Terminal => Action::Delete,
            Stage::Creating | Stage::Running | Stage::Crashing => Action::Stop,
        };
    }
    match stage {
        // With no start delay and no init containers there is nothing to show between
        // "creating" and "running": one status write instead of two (as KWOK does).
        Stage::New if pacing.start_delay.is_zero() && initialized(pod) => Action::Start,
        Stage::New => Action::Create,
        Stage::Creating => {
            let at = t.created.map_or(t.now, |c| c + pacing.start_delay);
            if t.now < at {
                Action::WaitUntil(at)
            } else if initialized(pod) {
                Action::Start
            } else {
                Action::Initialize
            }
        }
        Stage::Running => {
            let policy = pod
                .spec
                .as_ref()
                .and_then(|s| s.restart_policy.as_deref())
                .unwrap_or("Always");
            let fail = wants_failure(pod);
            if policy == "Always" && !fail {
                return Action::Idle;
            }
            let since = t
                .started
                .or_else(|| started_in_status(pod))
                .unwrap_or(t.now);
            let until = since + run_duration(pod, pacing.run_duration);
            if t.now < until {
                return Action::WaitUntil(until);
            }
            match (fail, policy) {
                (false, _) => Action::Exit(Exit::Success),
                (true, "Never") => Action::Exit(Exit::Failure),
                (true, _) => Action::Crash,
            }
        }
        Stage::Crashing | Stage::Terminal => Action::Idle,
    }
}

#[cfg(test)]
#[path = "lifecycle_tests.rs"]
mod tests;
