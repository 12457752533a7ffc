//! The pod statuses a virtual kubelet reports, one function per stage of a pod's life:
//! containers being created, running, exited, crashing, stopped for deletion.
//!
//! Each builds the whole `status` the way upstream's kubelet shapes it (container statuses
//! with image, imageID and containerID, the five pod conditions, pod and host IPs, start
//! time, QoS class), so `kubectl get pods` and controllers that read pod status see a normal
//! pod. All functions are pure: the caller supplies the time and the addresses.

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::runtime::{container_id, image_id};

/// Where a pod runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The node's InternalIP.
    pub host_ip: Ipv4Addr,
    /// The pod's IP, once it has one (the host IP for host-network pods).
    pub pod_ip: Option<Ipv4Addr>,
}

/// How containers end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Exit code 0, reason `Completed`.
    Success,
    /// Exit code 1, reason `Error`.
    Failure,
}

impl Exit {
    fn code(self) -> i32 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
        }
    }
    fn reason(self) -> &'static str {
        match self {
            Exit::Success => "Completed",
            Exit::Failure => "Error",
        }
    }
}

fn spec(pod: &Pod) -> PodSpec {
    pod.spec.clone().unwrap_or_default()
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

pub(crate) fn condition(
    ty: &str,
    ok: bool,
    reason: Option<&str>,
    message: Option<String>,
    now: &Time,
) -> PodCondition {
    PodCondition {
        type_: ty.to_string(),
        status: if ok { "True" } else { "False" }.to_string(),
        reason: reason.map(str::to_string),
        message,
        last_transition_time: Some(now.clone()),
        ..PodCondition::default()
    }
}

/// Keeps a condition's transition time when its status did not change.
pub(crate) fn keep_transitions(
    old: Option<&PodStatus>,
    mut conds: Vec<PodCondition>,
) -> Vec<PodCondition> {
    let old = old.and_then(|s| s.conditions.as_ref());
    for c in &mut conds {
        if let Some(o) = old
            .into_iter()
            .flatten()
            .find(|o| o.type_ == c.type_ && o.status == c.status)
            && o.last_transition_time.is_some()
        {
            c.last_transition_time = o.last_transition_time.clone();
        }
    }
    conds
}

fn names(list: &[Container]) -> String {
    list.iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

pub(crate) fn sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

fn base_status(pod: &Pod, at: &Placement, phase: &str, now: &Time) -> PodStatus {
    let old = pod.status.as_ref();
    let mut s = PodStatus {
        phase: Some(phase.to_string()),
        host_ip: Some(at.host_ip.to_string()),
        host_ips: Some(vec![HostIP {
            ip: at.host_ip.to_string(),
        }]),
        start_time: old
            .and_then(|s| s.start_time.clone())
            .or_else(|| Some(now.clone())),
        qos_class: old
            .and_then(|s| s.qos_class.clone())
            .or_else(|| Some(super::runtime::qos_class(&spec(pod)).to_string())),
        ..PodStatus::default()
    };
    if let Some(ip) = at.pod_ip {
        s.pod_ip = Some(ip.to_string());
        s.pod_ips = Some(vec![PodIP { ip: ip.to_string() }]);
    }
    s
}

fn waiting(c: &Container, reason: &str) -> ContainerStatus {
    ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        image_id: String::new(),
        ready: false,
        restart_count: 0,
        started: Some(false),
        state: Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.to_string()),
                message: None,
            }),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    }
}

fn running(pod: &Pod, c: &Container, now: &Time, ready: bool) -> ContainerStatus {
    let image = c.image.clone().unwrap_or_default();
    ContainerStatus {
        name: c.name.clone(),
        image_id: image_id(&image),
        image,
        container_id: Some(container_id(uid(pod), &c.name, 0)),
        ready,
        restart_count: 0,
        started: Some(true),
        state: Some(ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(now.clone()),
            }),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    }
}

/// When a container of the pod's current status started running (or `now`).
fn started_at(pod: &Pod, name: &str, now: &Time) -> Time {
    pod.status
        .as_ref()
        .into_iter()
        .flat_map(|s| {
            s.container_statuses
                .iter()
                .flatten()
                .chain(s.init_container_statuses.iter().flatten())
        })
        .find(|s| s.name == name)
        .and_then(|s| s.state.as_ref())
        .and_then(|st| {
            st.running
                .as_ref()
                .and_then(|r| r.started_at.clone())
                .or_else(|| st.terminated.as_ref().and_then(|t| t.started_at.clone()))
        })
        .unwrap_or_else(|| now.clone())
}

fn terminated(pod: &Pod, c: &Container, exit: Exit, now: &Time) -> ContainerStatus {
    let image = c.image.clone().unwrap_or_default();
    let id = container_id(uid(pod), &c.name, 0);
    ContainerStatus {
        name: c.name.clone(),
        image_id: image_id(&image),
        image,
        container_id: Some(id.clone()),
        ready: false,
        restart_count: 0,
        started: Some(false),
        state: Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: exit.code(),
                reason: Some(exit.reason().to_string()),
                started_at: Some(started_at(pod, &c.name, now)),
                finished_at: Some(now.clone()),
                container_id: Some(id),
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    }
}

/// Init containers after they ran: completed (or still running, for sidecars).
fn init_done(pod: &Pod, now: &Time) -> Option<Vec<ContainerStatus>> {
    let spec = spec(pod);
    let inits = spec.init_containers.unwrap_or_default();
    if inits.is_empty() {
        return None;
    }
    let old: Vec<ContainerStatus> = pod
        .status
        .as_ref()
        .and_then(|s| s.init_container_statuses.clone())
        .unwrap_or_default();
    Some(
        inits
            .iter()
            .map(|c| {
                // What already ran keeps its record.
                let st = old.iter().find(|o| o.name == c.name);
                if let Some(st) = st
                    && st.state.as_ref().is_some_and(|x| {
                        x.terminated.is_some() || (sidecar(c) && x.running.is_some())
                    })
                {
                    return st.clone();
                }
                if sidecar(c) {
                    running(pod, c, now, true)
                } else {
                    let mut s = terminated(pod, c, Exit::Success, now);
                    s.ready = true;
                    s
                }
            })
            .collect(),
    )
}

/// Readiness gates that are not `True` in the pod's conditions.
fn unmet_gates(pod: &Pod) -> Vec<String> {
    let spec = spec(pod);
    let conds = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    spec.readiness_gates
        .unwrap_or_default()
        .into_iter()
        .map(|g| g.condition_type)
        .filter(|t| !conds.iter().any(|c| &c.type_ == t && c.status == "True"))
        .collect()
}

/// Keeps conditions other components own (readiness gates, DisruptionTarget...).
pub(crate) fn with_foreign(pod: &Pod, mut conds: Vec<PodCondition>) -> Vec<PodCondition> {
    const OURS: [&str; 5] = [
        "PodScheduled",
        "PodReadyToStartContainers",
        "Initialized",
        "ContainersReady",
        "Ready",
    ];
    let old = pod.status.as_ref().and_then(|s| s.conditions.clone());
    conds.extend(
        old.into_iter()
            .flatten()
            .filter(|c| !OURS.contains(&c.type_.as_str())),
    );
    conds
}

/// Containers are being created (`ContainerCreating`; `PodInitializing` behind init
/// containers). Phase Pending.
pub fn creating(pod: &Pod, at: &Placement, now: &Time) -> PodStatus {
    let spec = spec(pod);
    let inits = spec.init_containers.clone().unwrap_or_default();
    let mut s = base_status(
        pod,
        &Placement {
            pod_ip: None,
            ..*at
        },
        "Pending",
        now,
    );
    let main_reason = if inits.is_empty() {
        "ContainerCreating"
    } else {
        "PodInitializing"
    };
    s.container_statuses = Some(
        spec.containers
            .iter()
            .map(|c| waiting(c, main_reason))
            .collect(),
    );
    if !inits.is_empty() {
        s.init_container_statuses = Some(
            inits
                .iter()
                .map(|c| waiting(c, "PodInitializing"))
                .collect(),
        );
    }
    let unready = format!(
        "containers with unready status: [{}]",
        names(&spec.containers)
    );
    let conds = vec![
        condition("PodReadyToStartContainers", false, None, None, now),
        if inits.is_empty() {
            condition("Initialized", true, None, None, now)
        } else {
            condition(
                "Initialized",
                false,
                Some("ContainersNotInitialized"),
                Some(format!(
                    "containers with incomplete status: [{}]",
                    names(&inits)
                )),
                now,
            )
        },
        condition(
            "Ready",
            false,
            Some("ContainersNotReady"),
            Some(unready.clone()),
            now,
        ),
        condition(
            "ContainersReady",
            false,
            Some("ContainersNotReady"),
            Some(unready),
            now,
        ),
        condition("PodScheduled", true, None, None, now),
    ];
    s.conditions = Some(with_foreign(
        pod,
        keep_transitions(pod.status.as_ref(), conds),
    ));
    s
}

/// Init containers completed (sidecars running), the main containers about to be created
/// (`PodInitializing`). Phase Pending, with the pod IP.
pub fn initialized(pod: &Pod, at: &Placement, now: &Time) -> PodStatus {
    let spec = spec(pod);
    let mut s = base_status(pod, at, "Pending", now);
    s.init_container_statuses = init_done(pod, now);
    s.container_statuses = Some(
        spec.containers
            .iter()
            .map(|c| waiting(c, "PodInitializing"))
            .collect(),
    );
    let unready = format!(
        "containers with unready status: [{}]",
        names(&spec.containers)
    );
    let conds = vec![
        condition("PodReadyToStartContainers", true, None, None, now),
        condition("Initialized", true, None, None, now),
        condition(
            "Ready",
            false,
            Some("ContainersNotReady"),
            Some(unready.clone()),
            now,
        ),
        condition(
            "ContainersReady",
            false,
            Some("ContainersNotReady"),
            Some(unready),
            now,
        ),
        condition("PodScheduled", true, None, None, now),
    ];
    s.conditions = Some(with_foreign(
        pod,
        keep_transitions(pod.status.as_ref(), conds),
    ));
    s
}

/// Init containers completed, every container running and ready. Phase Running.
pub fn started(pod: &Pod, at: &Placement, now: &Time) -> PodStatus {
    let spec = spec(pod);
    let mut s = base_status(pod, at, "Running", now);
    s.init_container_statuses = init_done(pod, now);
    s.container_statuses = Some(
        spec.containers
            .iter()
            .map(|c| running(pod, c, now, true))
            .collect(),
    );
    let gates = unmet_gates(pod);
    let ready = if gates.is_empty() {
        condition("Ready", true, None, None, now)
    } else {
        condition(
            "Ready",
            false,
            Some("ReadinessGatesNotReady"),
            Some(format!(
                "corresponding condition of pod readiness gate \"{}\" does not exist.",
                gates[0]
            )),
            now,
        )
    };
    let conds = vec![
        condition("PodReadyToStartContainers", true, None, None, now),
        condition("Initialized", true, None, None, now),
        ready,
        condition("ContainersReady", true, None, None, now),
        condition("PodScheduled", true, None, None, now),
    ];
    s.conditions = Some(with_foreign(
        pod,
        keep_transitions(pod.status.as_ref(), conds),
    ));
    s
}

fn terminal(pod: &Pod, at: &Placement, exit: Exit, now: &Time) -> PodStatus {
    let spec = spec(pod);
    let phase = match exit {
        Exit::Success => "Succeeded",
        Exit::Failure => "Failed",
    };
    let mut s = base_status(pod, at, phase, now);
    s.init_container_statuses = init_done(pod, now).map(|list| {
        list.into_iter()
            .map(|mut c| {
                if c.state.as_ref().is_some_and(|st| st.running.is_some()) {
                    // A sidecar stops with the pod.
                    if let Some(init) = spec
                        .init_containers
                        .iter()
                        .flatten()
                        .find(|i| i.name == c.name)
                    {
                        c = terminated(pod, init, Exit::Success, now);
                    }
                }
                c
            })
            .collect()
    });
    s.container_statuses = Some(
        spec.containers
            .iter()
            .map(|c| terminated(pod, c, exit, now))
            .collect(),
    );
    let conds = vec![
        condition("PodReadyToStartContainers", false, None, None, now),
        condition("Initialized", true, None, None, now),
        condition("Ready", false, Some("PodCompleted"), None, now),
        condition("ContainersReady", false, Some("PodCompleted"), None, now),
        condition("PodScheduled", true, None, None, now),
    ];
    s.conditions = Some(with_foreign(
        pod,
        keep_transitions(pod.status.as_ref(), conds),
    ));
    s
}

/// Every container exited (0 → Succeeded, 1 → Failed).
pub fn exited(pod: &Pod, at: &Placement, exit: Exit, now: &Time) -> PodStatus {
    terminal(pod, at, exit, now)
}

/// The containers of a pod being deleted were stopped: they exit 0, and the pod ends
/// Succeeded (or stays Failed), as upstream's kubelet makes deleted pods terminal.
pub fn stopped(pod: &Pod, at: &Placement, now: &Time) -> PodStatus {
    let failed = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed");
    terminal(
        pod,
        at,
        if failed { Exit::Failure } else { Exit::Success },
        now,
    )
}

/// A container that restarts on failure failed once and is backing off
/// (`CrashLoopBackOff`, restart count 1). Phase Running, not ready.
pub fn crashing(pod: &Pod, at: &Placement, now: &Time) -> PodStatus {
    let spec = spec(pod);
    let mut s = base_status(pod, at, "Running", now);
    s.init_container_statuses = init_done(pod, now);
    s.container_statuses = Some(
        spec.containers
            .iter()
            .map(|c| {
                let last = terminated(pod, c, Exit::Failure, now);
                ContainerStatus {
                    ready: false,
                    restart_count: 1,
                    started: Some(false),
                    container_id: Some(container_id(uid(pod), &c.name, 1)),
                    last_state: last.state,
                    state: Some(ContainerState {
                        waiting: Some(ContainerStateWaiting {
                            reason: Some("CrashLoopBackOff".to_string()),
                            message: Some(format!(
                                "back-off 10s restarting failed container={} pod={}_{}({})",
                                c.name,
                                pod.metadata.name.as_deref().unwrap_or(""),
                                pod.metadata.namespace.as_deref().unwrap_or(""),
                                uid(pod)
                            )),
                        }),
                        ..ContainerState::default()
                    }),
                    ..last
                }
            })
            .collect(),
    );
    let unready = format!(
        "containers with unready status: [{}]",
        names(&spec.containers)
    );
    let conds = vec![
        condition("PodReadyToStartContainers", true, None, None, now),
        condition("Initialized", true, None, None, now),
        condition(
            "Ready",
            false,
            Some("ContainersNotReady"),
            Some(unready.clone()),
            now,
        ),
        condition(
            "ContainersReady",
            false,
            Some("ContainersNotReady"),
            Some(unready),
            now,
        ),
        condition("PodScheduled", true, None, None, now),
    ];
    s.conditions = Some(with_foreign(
        pod,
        keep_transitions(pod.status.as_ref(), conds),
    ));
    s
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
