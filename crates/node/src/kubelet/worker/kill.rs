//! Stopping containers and pods, and removing what is left of a pod, as upstream's
//! `killContainer`, `KillPod` and the pod cleanup do: `preStop` first (its time comes out of
//! the grace period), then CRI `StopContainer` with the rest of the grace period, never less
//! than 2 s; regular containers in parallel, then sidecars in reverse order, then the
//! sandboxes. Removal takes the containers, sandboxes (and so the network namespace), the
//! container log links, volumes, the pod directory, the pod's log directory and its cgroups.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::kubelet::agent::Agent;
use crate::kubelet::cgroups;
use crate::kubelet::events;
use crate::kubelet::hooks;
use crate::kubelet::runtime_state::{ContainerRecord, PodRuntime, State};

/// Upstream's `minimumGracePeriodInSeconds`.
pub const MIN_GRACE: Duration = Duration::from_secs(2);

/// The grace period of a pod being stopped: the deletion's, else the spec's, else 30 s.
pub fn grace_period(pod: &Pod) -> Duration {
    let secs = pod
        .metadata
        .deletion_grace_period_seconds
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
        })
        .unwrap_or(30);
    Duration::from_secs(u64::try_from(secs).unwrap_or(0)).max(MIN_GRACE)
}

fn spec_container<'a>(pod: &'a Pod, name: &str) -> Option<&'a Container> {
    let spec = pod.spec.as_ref()?;
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
}

/// Stops one container instance: preStop, then the stop signal with the rest of `grace`.
/// `reason` is the `Killing` event's message.
pub async fn kill_container(
    agent: &Arc<Agent>,
    pod: &Pod,
    record: &ContainerRecord,
    grace: Duration,
    reason: Option<String>,
    pod_ip: Option<IpAddr>,
) {
    if record.state != State::Running && record.state != State::Unknown {
        return;
    }
    let path = Some(events::container_path(pod, &record.name));
    let message = reason.unwrap_or_else(|| format!("Stopping container {}", record.name));
    agent
        .recorder
        .pod(pod, path.clone(), events::NORMAL, "Killing", message);
    let began = Instant::now();
    if let Some(c) = spec_container(pod, &record.name)
        && let Some(pre) = c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref())
    {
        let target = hooks::HookTarget {
            cri: &agent.cri,
            pod,
            container: c,
            container_id: &record.id,
            pod_ip,
            version: &agent.version,
        };
        let run = hooks::run(&target, pre, grace);
        match tokio::time::timeout(grace, run).await {
            Ok(Ok(())) => {}
            Ok(Err(msg)) => agent.recorder.pod(
                pod,
                path.clone(),
                events::WARNING,
                "FailedPreStopHook",
                msg,
            ),
            Err(_) => agent.recorder.pod(
                pod,
                path.clone(),
                events::WARNING,
                "FailedPreStopHook",
                format!(
                    "PreStopHook failed to complete within the grace period ({}s) for container {:?}",
                    grace.as_secs(),
                    record.name
                ),
            ),
        }
    }
    let left = grace.saturating_sub(began.elapsed()).max(MIN_GRACE);
    if let Err(e) = agent.cri.stop_container(&record.id, left).await
        && !e.is_not_found()
    {
        tracing::warn!(container = %record.id, error = %e, "stopping a container failed");
    }
}

fn is_sidecar(pod: &Pod, name: &str) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .is_some_and(|l| {
            l.iter()
                .any(|c| c.name == name && c.restart_policy.as_deref() == Some("Always"))
        })
}

/// Stops every running container of the pod (regular ones together, then sidecars in reverse
/// order) and every sandbox.
pub async fn kill_pod(agent: &Arc<Agent>, pod: &Pod, runtime: &PodRuntime, grace: Duration) {
    let pod_ip = runtime
        .ready_sandbox()
        .and_then(|s| s.ips.first())
        .and_then(|ip| ip.parse().ok());
    let running: Vec<&ContainerRecord> = runtime
        .containers
        .iter()
        .filter(|c| matches!(c.state, State::Running | State::Unknown))
        .collect();
    let began = Instant::now();
    let regular = running
        .iter()
        .filter(|c| !is_sidecar(pod, &c.name))
        .map(|c| kill_container(agent, pod, c, grace, None, pod_ip));
    futures::future::join_all(regular).await;
    // Sidecars stop after the containers they serve, last started first.
    let order: Vec<String> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .map(|c| c.name.clone())
        .collect();
    for name in order.iter().rev() {
        for c in running
            .iter()
            .filter(|c| &c.name == name && is_sidecar(pod, name))
        {
            let left = grace.saturating_sub(began.elapsed()).max(MIN_GRACE);
            kill_container(agent, pod, c, left, None, pod_ip).await;
        }
    }
    for s in runtime.sandboxes.iter().filter(|s| s.ready) {
        if let Err(e) = agent.cri.stop_pod_sandbox(&s.id).await {
            tracing::warn!(sandbox = %s.id, error = %e, "stopping a sandbox failed");
        }
    }
}

/// Removes one container instance and its log link.
pub async fn remove_container(agent: &Arc<Agent>, record: &ContainerRecord) {
    match agent.cri.remove_container(&record.id).await {
        Ok(()) => {}
        Err(e) if e.is_not_found() => {}
        Err(e) => tracing::warn!(container = %record.id, error = %e, "removing a container failed"),
    }
    agent.reader.forget(&record.id);
    remove_log_links(agent, Some(&record.id), None);
}

/// Removes `/var/log/containers`-style links of a container instance, or of a pod (by its
/// `<pod>_<ns>_` prefix).
fn remove_log_links(agent: &Agent, container_id: Option<&str>, pod_prefix: Option<&str>) {
    let dir = agent.layout.container_links_dir();
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let hit = container_id.is_some_and(|id| name.ends_with(&format!("-{id}.log")))
            || pod_prefix.is_some_and(|p| name.starts_with(p));
        if hit {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Removes everything of pod `uid` from the node. `identity` is the pod's (namespace,
/// name) when known, for its log directory. Idempotent.
pub async fn remove_pod(agent: &Arc<Agent>, uid: &str, identity: Option<(String, String)>) {
    let runtime = match agent.reader.pod(uid).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(pod = uid, error = %e, "reading a pod to remove it failed");
            return;
        }
    };
    for c in &runtime.containers {
        if matches!(c.state, State::Running | State::Unknown) {
            let _ = agent.cri.stop_container(&c.id, MIN_GRACE).await;
        }
        remove_container(agent, c).await;
    }
    for s in &runtime.sandboxes {
        let _ = agent.cri.stop_pod_sandbox(&s.id).await;
        match agent.cri.remove_pod_sandbox(&s.id).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => tracing::warn!(sandbox = %s.id, error = %e, "removing a sandbox failed"),
        }
    }
    if let Err(e) = agent.volumes.teardown(uid).await {
        tracing::warn!(pod = uid, error = %e, "tearing down volumes failed");
    }
    let _ = std::fs::remove_dir_all(agent.layout.pod_dir(uid));
    // The log directory is `<ns>_<name>_<uid>`: by identity, or found by the UID suffix.
    let logs = agent.layout.pod_logs_root();
    for e in std::fs::read_dir(&logs).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(&format!("_{uid}")) {
            if let Some((ns, pod)) = name
                .strip_suffix(&format!("_{uid}"))
                .and_then(|r| r.split_once('_'))
            {
                remove_log_links(agent, None, Some(&format!("{pod}_{ns}_")));
            }
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    if let Some((ns, name)) = identity {
        let _ = std::fs::remove_dir_all(agent.layout.pod_log_dir(&ns, &name, uid));
    }
    cgroups::remove_pod(&agent.config.cgroup_root, uid);
    agent.probes.remove_pod(uid);
    agent.backoff.forget_prefix(&format!("{uid}/"));
}
