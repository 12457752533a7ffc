//! The pod status the kubelet writes, computed from the pod's spec, what the runtime runs,
//! the probes' results and the last sync errors, as upstream's `generateAPIPodStatus` does:
//! container statuses (state, last state, restart count, image, IDs, ready, started), the
//! phase by `getPhase`, the kubelet-owned conditions by `generate.go`, pod and host IPs,
//! start time and QoS class. Pure.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::runtime_state::{ContainerRecord, PodRuntime, State};
use crate::pod::runtime::qos_class;
use crate::pod::status::{condition, keep_transitions, sidecar, with_foreign};

/// What the probes say about a container's current instance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProbeState {
    /// The instance the results are about.
    pub container_id: String,
    /// Readiness (true when it has no readiness probe and has started).
    pub ready: bool,
    /// Whether the startup probe passed (true without one).
    pub started: bool,
}

/// Why a container is not running, from the last sync (upstream's `reasonCache`): a waiting
/// reason (`CrashLoopBackOff`, `ErrImagePull`, `CreateContainerConfigError`...) and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncReason {
    pub reason: String,
    pub message: String,
}

/// Everything a status is computed from.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub pod: &'a Pod,
    pub runtime: &'a PodRuntime,
    /// By container name.
    pub probes: &'a HashMap<String, ProbeState>,
    /// By container name.
    pub reasons: &'a HashMap<String, SyncReason>,
    /// The node's IPs, primary first.
    pub host_ips: &'a [String],
    /// Whether the pod is being torn down (deleted, or its containers will not run again).
    pub terminal: bool,
    pub now: &'a Time,
}

/// CRI nanoseconds as an API time (`None` for 0).
pub fn time_of(nanos: i64) -> Option<Time> {
    (nanos > 0)
        .then(|| Timestamp::from_nanosecond(i128::from(nanos)).ok())
        .flatten()
        .map(Time)
}

/// The `containerd://<id>` form of a container ID.
pub fn container_id(id: &str) -> String {
    format!("containerd://{id}")
}

fn terminated(r: &ContainerRecord) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: r.exit_code,
            reason: Some(if r.reason.is_empty() {
                if r.exit_code == 0 {
                    "Completed"
                } else {
                    "Error"
                }
                .to_string()
            } else {
                r.reason.clone()
            }),
            message: (!r.message.is_empty()).then(|| r.message.clone()),
            started_at: time_of(r.started_at),
            finished_at: time_of(r.finished_at),
            container_id: Some(container_id(&r.id)),
            signal: None,
        }),
        ..ContainerState::default()
    }
}

fn waiting(reason: &str, message: Option<String>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_string()),
            message,
        }),
        ..ContainerState::default()
    }
}

fn old_status<'a>(pod: &'a Pod, name: &str, init: bool) -> Option<&'a ContainerStatus> {
    let s = pod.status.as_ref()?;
    let list = if init {
        s.init_container_statuses.as_ref()
    } else {
        s.container_statuses.as_ref()
    }?;
    list.iter().find(|c| c.name == name)
}

/// The status of one container of the spec.
fn container_status(in_: &Inputs<'_>, c: &Container, init: bool, default: &str) -> ContainerStatus {
    let latest = in_.runtime.latest(&c.name);
    let previous = in_.runtime.previous(&c.name);
    let mut s = ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        image_id: String::new(),
        started: Some(false),
        ..ContainerStatus::default()
    };
    if let Some(old) = old_status(in_.pod, &c.name, init) {
        // A container lost from the runtime keeps its count.
        s.restart_count = old.restart_count;
    }
    match latest {
        None => {
            s.state = Some(waiting(default, None));
            if let Some(old) = old_status(in_.pod, &c.name, init)
                && old.state.as_ref().is_some_and(|st| st.running.is_some())
                && !in_.terminal
            {
                // Upstream: a running container the runtime no longer has.
                s.last_state = Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: 137,
                        reason: Some("ContainerStatusUnknown".into()),
                        message: Some(
                            "The container could not be located when the pod was terminated".into(),
                        ),
                        ..ContainerStateTerminated::default()
                    }),
                    ..ContainerState::default()
                });
                s.restart_count += 1;
            } else if let Some(old) = old_status(in_.pod, &c.name, init) {
                s.last_state = old.last_state.clone();
            }
        }
        Some(r) => {
            s.restart_count = r.attempt as i32;
            s.image = if r.image.is_empty() {
                s.image
            } else {
                r.image.clone()
            };
            s.image_id = r.image_ref.clone();
            s.container_id = Some(container_id(&r.id));
            s.state = Some(match r.state {
                State::Running => ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: time_of(r.started_at),
                    }),
                    ..ContainerState::default()
                },
                State::Exited => terminated(r),
                State::Created | State::Unknown => waiting(default, None),
            });
            if let Some(p) = previous.filter(|p| p.state == State::Exited) {
                s.last_state = Some(terminated(p));
            }
            if r.state == State::Running {
                let probe = in_.probes.get(&c.name).filter(|p| p.container_id == r.id);
                let started = probe.is_none_or(|p| p.started);
                s.started = Some(started);
                s.ready = started && probe.is_none_or(|p| p.ready);
            }
            if init && !sidecar(c) && r.state == State::Exited && r.exit_code == 0 {
                s.ready = true;
            }
        }
    }
    // A container that failed to start waits with the reason of the failure.
    if let Some(why) = in_.reasons.get(&c.name)
        && latest.is_none_or(|r| r.state != State::Running)
        && !(init
            && !sidecar(c)
            && latest.is_some_and(|r| r.state == State::Exited && r.exit_code == 0))
    {
        if let Some(st) = s.state.take()
            && st.terminated.is_some()
        {
            s.last_state = Some(st);
        }
        s.state = Some(waiting(
            &why.reason,
            (!why.message.is_empty()).then(|| why.message.clone()),
        ));
        s.ready = false;
        s.started = Some(false);
    }
    s
}

fn terminated_code(st: Option<&ContainerState>) -> Option<i32> {
    st.and_then(|s| s.terminated.as_ref()).map(|t| t.exit_code)
}

/// Upstream's `getPhase`.
pub fn phase(
    pod: &Pod,
    init: &[ContainerStatus],
    regular: &[ContainerStatus],
    terminal: bool,
    initialized: bool,
) -> &'static str {
    let spec = pod.spec.clone().unwrap_or_default();
    let policy = spec.restart_policy.as_deref().unwrap_or("Always");
    let find = |list: &[ContainerStatus], n: &str| list.iter().find(|s| s.name == n).cloned();
    let (mut pending_init, mut pending_sidecars, mut failed_init) = (0, 0, 0);
    let (mut unknown, mut running_n, mut waiting_n, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for c in spec.init_containers.iter().flatten() {
        let Some(s) = find(init, &c.name) else {
            if sidecar(c) {
                unknown += 1;
            } else {
                pending_init += 1;
            }
            continue;
        };
        let st = s.state.clone().unwrap_or_default();
        if sidecar(c) {
            if st.running.is_some() {
                if s.started != Some(true) {
                    pending_sidecars += 1;
                }
                running_n += 1;
            } else if st.terminated.is_some() {
            } else if st.waiting.is_some() {
                if terminated_code(s.last_state.as_ref()).is_none() {
                    pending_sidecars += 1;
                    waiting_n += 1;
                }
            } else {
                pending_sidecars += 1;
                unknown += 1;
            }
        } else if st.running.is_some() {
            pending_init += 1;
        } else if let Some(t) = st.terminated {
            if t.exit_code != 0 {
                failed_init += 1;
            }
        } else if st.waiting.is_some() {
            match terminated_code(s.last_state.as_ref()) {
                Some(code) if code != 0 => failed_init += 1,
                Some(_) => {}
                None => pending_init += 1,
            }
        } else {
            pending_init += 1;
        }
    }
    for c in &spec.containers {
        let Some(s) = find(regular, &c.name) else {
            unknown += 1;
            continue;
        };
        let st = s.state.clone().unwrap_or_default();
        if st.running.is_some() {
            running_n += 1;
        } else if let Some(t) = st.terminated {
            stopped += 1;
            if t.exit_code == 0 {
                succeeded += 1;
            }
        } else if st.waiting.is_some() {
            if terminated_code(s.last_state.as_ref()).is_some() {
                stopped += 1;
            } else {
                waiting_n += 1;
            }
        } else {
            unknown += 1;
        }
    }
    if failed_init > 0 && policy == "Never" {
        return "Failed";
    }
    if pending_init > 0 || (pending_sidecars > 0 && !initialized) || waiting_n > 0 {
        return "Pending";
    }
    if running_n > 0 && unknown == 0 {
        return "Running";
    }
    if running_n == 0 && stopped > 0 && unknown == 0 {
        if terminal {
            return if stopped == succeeded {
                "Succeeded"
            } else {
                "Failed"
            };
        }
        return match policy {
            "Always" => "Running",
            _ if stopped == succeeded => "Succeeded",
            "Never" => "Failed",
            _ => "Running",
        };
    }
    "Pending"
}

fn bracket(names: &[String]) -> String {
    format!("[{}]", names.join(" "))
}

/// `Initialized`, `ContainersReady` and `Ready` as upstream's `generate.go` computes them.
fn readiness_conditions(
    pod: &Pod,
    init: &[ContainerStatus],
    regular: &[ContainerStatus],
    phase: &str,
    now: &Time,
) -> Vec<PodCondition> {
    let spec = pod.spec.clone().unwrap_or_default();
    let inits = spec.init_containers.clone().unwrap_or_default();
    let find = |list: &[ContainerStatus], n: &str| list.iter().find(|s| s.name == n).cloned();
    // Initialized.
    let any_started = regular.iter().any(|s| {
        s.state
            .as_ref()
            .is_some_and(|st| st.running.is_some() || st.terminated.is_some())
            || s.last_state
                .as_ref()
                .is_some_and(|l| l.terminated.is_some())
    });
    let (mut unknown, mut incomplete) = (Vec::new(), Vec::new());
    for c in &inits {
        match find(init, &c.name) {
            None => unknown.push(c.name.clone()),
            Some(s) if sidecar(c) && s.started != Some(true) => incomplete.push(c.name.clone()),
            Some(s) if !sidecar(c) && !s.ready => incomplete.push(c.name.clone()),
            Some(_) => {}
        }
    }
    let initialized =
        if inits.is_empty() || any_started || (unknown.is_empty() && incomplete.is_empty()) {
            condition("Initialized", true, None, None, now)
        } else if phase == "Succeeded" && unknown.is_empty() {
            condition("Initialized", true, Some("PodCompleted"), None, now)
        } else {
            let mut msgs = Vec::new();
            if !unknown.is_empty() {
                msgs.push(format!(
                    "containers with unknown status: {}",
                    bracket(&unknown)
                ));
            }
            if !incomplete.is_empty() {
                msgs.push(format!(
                    "containers with incomplete status: {}",
                    bracket(&incomplete)
                ));
            }
            condition(
                "Initialized",
                false,
                Some("ContainersNotInitialized"),
                Some(msgs.join(", ")),
                now,
            )
        };
    // ContainersReady.
    let (mut unknown, mut unready) = (Vec::new(), Vec::new());
    for c in inits.iter().filter(|c| sidecar(c)) {
        match find(init, &c.name) {
            None => unknown.push(c.name.clone()),
            Some(s) if !s.ready => unready.push(c.name.clone()),
            Some(_) => {}
        }
    }
    for c in &spec.containers {
        match find(regular, &c.name) {
            None => unknown.push(c.name.clone()),
            Some(s) if !s.ready => unready.push(c.name.clone()),
            Some(_) => {}
        }
    }
    let containers_ready = if phase == "Succeeded" && unknown.is_empty() {
        condition("ContainersReady", false, Some("PodCompleted"), None, now)
    } else if phase == "Failed" {
        condition("ContainersReady", false, Some("PodFailed"), None, now)
    } else if unknown.is_empty() && unready.is_empty() {
        condition("ContainersReady", true, None, None, now)
    } else {
        let mut msgs = Vec::new();
        if !unknown.is_empty() {
            msgs.push(format!(
                "containers with unknown status: {}",
                bracket(&unknown)
            ));
        }
        if !unready.is_empty() {
            msgs.push(format!(
                "containers with unready status: {}",
                bracket(&unready)
            ));
        }
        condition(
            "ContainersReady",
            false,
            Some("ContainersNotReady"),
            Some(msgs.join(", ")),
            now,
        )
    };
    // Ready.
    let ready = if containers_ready.status != "True" {
        PodCondition {
            type_: "Ready".into(),
            ..containers_ready.clone()
        }
    } else {
        let conds = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let mut msgs = Vec::new();
        for g in spec.readiness_gates.iter().flatten() {
            match conds.iter().find(|c| c.type_ == g.condition_type) {
                None => msgs.push(format!(
                    "corresponding condition of pod readiness gate \"{}\" does not exist.",
                    g.condition_type
                )),
                Some(c) if c.status != "True" => msgs.push(format!(
                    "the status of pod readiness gate \"{}\" is not \"True\", but {}",
                    g.condition_type, c.status
                )),
                Some(_) => {}
            }
        }
        if msgs.is_empty() {
            condition("Ready", true, None, None, now)
        } else {
            condition(
                "Ready",
                false,
                Some("ReadinessGatesNotReady"),
                Some(msgs.join(", ")),
                now,
            )
        }
    };
    vec![initialized, ready, containers_ready]
}

/// The pod's status.
pub fn pod_status(in_: &Inputs<'_>) -> PodStatus {
    let pod = in_.pod;
    let spec = pod.spec.clone().unwrap_or_default();
    let inits = spec.init_containers.clone().unwrap_or_default();
    let default = if inits.is_empty() {
        "ContainerCreating"
    } else {
        "PodInitializing"
    };
    let init_statuses: Vec<ContainerStatus> = inits
        .iter()
        .map(|c| container_status(in_, c, true, "PodInitializing"))
        .collect();
    let mut statuses: Vec<ContainerStatus> = spec
        .containers
        .iter()
        .map(|c| container_status(in_, c, false, default))
        .collect();
    statuses.sort_by(|a, b| a.name.cmp(&b.name));
    let initialized = spec.containers.iter().any(|c| {
        in_.runtime
            .latest(&c.name)
            .is_some_and(|r| r.state != State::Created)
    });
    let old = pod.status.as_ref();
    let old_phase = old.and_then(|s| s.phase.as_deref());
    let phase = match old_phase {
        // A terminal phase never changes.
        Some(p @ ("Succeeded" | "Failed")) => {
            if p == "Succeeded" {
                "Succeeded"
            } else {
                "Failed"
            }
        }
        _ => phase(pod, &init_statuses, &statuses, in_.terminal, initialized),
    };
    let host_network = spec.host_network.unwrap_or(false);
    let sandbox = in_.runtime.ready_sandbox();
    let pod_ips: Vec<String> = if host_network {
        in_.host_ips.first().cloned().into_iter().collect()
    } else {
        sandbox.map(|s| s.ips.clone()).unwrap_or_default()
    };
    // Keep the IPs of a pod whose sandbox is gone (upstream keeps them in the status).
    let pod_ips = if pod_ips.is_empty() {
        old.and_then(|s| s.pod_ips.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|p| p.ip)
            .collect()
    } else {
        pod_ips
    };
    let ready_to_start = sandbox.is_some() && (host_network || !pod_ips.is_empty());
    let mut conds = vec![condition(
        "PodReadyToStartContainers",
        ready_to_start,
        None,
        None,
        in_.now,
    )];
    conds.extend(readiness_conditions(
        pod,
        &init_statuses,
        &statuses,
        phase,
        in_.now,
    ));
    conds.push(condition("PodScheduled", true, None, None, in_.now));
    let conds = with_foreign(pod, keep_transitions(old, conds));
    PodStatus {
        phase: Some(phase.to_string()),
        conditions: Some(conds),
        host_ip: in_.host_ips.first().cloned(),
        host_ips: (!in_.host_ips.is_empty()).then(|| {
            in_.host_ips
                .iter()
                .map(|ip| HostIP { ip: ip.clone() })
                .collect()
        }),
        pod_ip: pod_ips.first().cloned(),
        pod_ips: (!pod_ips.is_empty())
            .then(|| pod_ips.iter().map(|ip| PodIP { ip: ip.clone() }).collect()),
        start_time: old
            .and_then(|s| s.start_time.clone())
            .or_else(|| Some(in_.now.clone())),
        qos_class: Some(qos_class(&spec).to_string()),
        init_container_statuses: (!init_statuses.is_empty()).then_some(init_statuses),
        container_statuses: Some(statuses),
        // Eviction and deadline reasons are not the sync's to clear.
        reason: old.and_then(|s| s.reason.clone()),
        message: old.and_then(|s| s.message.clone()),
        nominated_node_name: old.and_then(|s| s.nominated_node_name.clone()),
        ..PodStatus::default()
    }
}

/// Whether two statuses differ in more than heartbeat-like times (the write is skipped when
/// they do not).
pub fn differs(a: &PodStatus, b: &PodStatus) -> bool {
    a != b
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
