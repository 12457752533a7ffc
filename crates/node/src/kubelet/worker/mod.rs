//! Pod workers, as upstream's `podWorkers`: one task per pod bound to the node, woken by
//! changes of the pod in the API, of its containers in the runtime (the relist), of its
//! probes, and by its own timers (back-off, periodic resync).
//!
//! A worker goes through upstream's three stages. **Sync**: make the runtime match the spec
//! ([`plan`]): sandbox, init containers, sidecars, containers, restarts with back-off, probes,
//! then write the status. **Terminating**: once the pod is deleted (or will never run a
//! container again) stop its containers with the grace period and its sandbox, write the
//! final status. **Terminated**: tear its volumes down and, for a deleted pod, issue the final
//! `DELETE` (grace period 0, UID precondition). When the API no longer has the pod, the
//! worker removes everything of it from the node and ends.

pub mod kill;
pub mod plan;
pub mod sandbox;
pub mod start;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::json;
use tokio::sync::Notify;

use super::agent::{Agent, WorkerHandle};
use super::backoff::go_duration;
use super::events;
use super::labels::container_hash;
use super::runtime_state::{PodRuntime, State};
use super::status::{self, Inputs, SyncReason};
use super::volumes::VolumeError;
use crate::error::status_code;

/// The field manager of the agent's writes.
pub const FIELD_MANAGER: &str = "kubelet";

/// Makes sure pod `uid` has a worker, and wakes it.
pub fn ensure(agent: &Arc<Agent>, uid: &str) {
    let mut workers = agent.workers.lock();
    if let Some(w) = workers.get(uid) {
        w.notify.notify_one();
        return;
    }
    let notify = Arc::new(Notify::new());
    let task = tokio::spawn(run(agent.clone(), uid.to_string(), notify.clone()));
    workers.insert(uid.to_string(), WorkerHandle { notify, task });
}

/// Where a worker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Sync,
    /// Containers stopped because the pod is done; waiting for it to be deleted.
    Finished,
    /// Deleted: containers stopped, final DELETE sent; waiting for the API to drop it.
    Deleted,
}

struct Worker {
    agent: Arc<Agent>,
    uid: String,
    stage: Stage,
    reasons: HashMap<String, SyncReason>,
    last_written: Option<PodStatus>,
    /// The pod's namespace and name, for the cleanup once the API has forgotten it.
    identity: Option<(String, String)>,
    sandbox_failures: u32,
    volumes_down: bool,
}

async fn run(agent: Arc<Agent>, uid: String, notify: Arc<Notify>) {
    let mut shutdown = agent.shutdown.subscribe();
    let mut w = Worker {
        agent: agent.clone(),
        uid: uid.clone(),
        stage: Stage::Sync,
        reasons: HashMap::new(),
        last_written: None,
        identity: None,
        sandbox_failures: 0,
        volumes_down: false,
    };
    let mut quick = 0u32;
    loop {
        if *shutdown.borrow() {
            break;
        }
        let next = match w.step().await {
            Some(d) => d,
            None => break,
        };
        // Immediate re-syncs make progress (a kill, a new sandbox) but are bounded.
        let next = if next.is_zero() {
            quick += 1;
            if quick > 20 {
                Duration::from_millis(500)
            } else {
                next
            }
        } else {
            quick = 0;
            next
        };
        if next.is_zero() {
            continue;
        }
        tokio::select! {
            _ = notify.notified() => {}
            _ = tokio::time::sleep(next) => {}
            _ = shutdown.changed() => break,
        }
    }
    agent.workers.lock().remove(&uid);
}

fn pod_ips(runtime: &PodRuntime) -> Vec<IpAddr> {
    runtime
        .ready_sandbox()
        .map(|s| s.ips.iter().filter_map(|ip| ip.parse().ok()).collect())
        .unwrap_or_default()
}

impl Worker {
    /// One pass; when to pass again (`None`: the worker is done).
    async fn step(&mut self) -> Option<Duration> {
        let agent = self.agent.clone();
        let Some(pod) = agent.pod(&self.uid) else {
            // The API no longer has the pod: remove it from the node.
            self.remove().await;
            return None;
        };
        self.identity = Some((
            pod.metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            pod.metadata.name.clone().unwrap_or_default(),
        ));
        let runtime = match agent.reader.pod(&self.uid).await {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(pod = %self.uid, error = %e, "reading the pod's runtime state failed");
                return Some(Duration::from_secs(1));
            }
        };
        if pod.metadata.deletion_timestamp.is_some() {
            return self.terminate(&pod, runtime).await;
        }
        let api_terminal = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        if self.stage == Stage::Finished || api_terminal {
            return self.finish(&pod, runtime).await;
        }
        self.sync(&pod, runtime).await
    }

    fn resync(&self) -> Duration {
        self.agent.config.timing.resync
    }

    /// The sync stage.
    async fn sync(&mut self, pod: &Pod, runtime: PodRuntime) -> Option<Duration> {
        let agent = self.agent.clone();
        let ips = pod_ips(&runtime);
        agent.probes.sync_pod(pod, &runtime, ips.first().copied());
        let uid = self.uid.clone();
        let probes = |name: &str| agent.probes.results(&uid, name);
        let p = plan::plan(pod, &runtime, &probes);
        if !p.kill.is_empty() {
            let grace = kill::grace_period(pod);
            let kills = p.kill.iter().map(|(r, msg)| {
                kill::kill_container(&agent, pod, r, grace, msg.clone(), ips.first().copied())
            });
            futures::future::join_all(kills).await;
            return Some(Duration::ZERO);
        }
        if p.create_sandbox {
            return Some(self.create_sandbox(pod, &runtime).await);
        }
        let mut next = self.resync();
        if !self.setup_volumes(pod).await {
            next = Duration::from_secs(2);
        } else if !p.start.is_empty()
            && let Some(sb) = runtime.ready_sandbox()
        {
            {
                let attempt = sb.attempt;
                match sandbox::config(&agent, pod, attempt) {
                    Ok((config, _)) => {
                        for (c, init) in &p.start {
                            if let Some(wait) = self
                                .start(pod, c, *init, &runtime, &sb.id, &config, &ips)
                                .await
                            {
                                next = next.min(wait);
                            }
                            if *init {
                                // One init container (or sidecar) at a time.
                                break;
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(pod = %uid, error = %e, "the sandbox configuration failed")
                    }
                }
            }
        }
        self.gc(&runtime).await;
        let runtime = match agent.reader.pod(&self.uid).await {
            Ok(r) => r,
            Err(_) => return Some(Duration::from_secs(1)),
        };
        agent
            .probes
            .sync_pod(pod, &runtime, pod_ips(&runtime).first().copied());
        let finished = plan::plan(pod, &runtime, &|n: &str| agent.probes.results(&uid, n)).finished;
        if finished {
            self.stage = Stage::Finished;
            return Some(Duration::ZERO);
        }
        self.write_status(pod, &runtime, false).await;
        Some(next)
    }

    /// Sets up (or refreshes) the pod's volumes; on failure records a `FailedMount` event per
    /// volume that is not ready.
    async fn setup_volumes(&self, pod: &Pod) -> bool {
        match self.agent.volumes.setup(pod).await {
            Ok(_) => true,
            Err(VolumeError::SetUp(failures)) => {
                for f in failures {
                    self.agent.recorder.pod(
                        pod,
                        None,
                        events::WARNING,
                        "FailedMount",
                        f.event_message(),
                    );
                }
                false
            }
            Err(e) => {
                self.agent
                    .recorder
                    .pod(pod, None, events::WARNING, "FailedMount", e.to_string());
                false
            }
        }
    }

    /// Creates the pod's sandbox (after its volumes); when to sync again.
    async fn create_sandbox(&mut self, pod: &Pod, runtime: &PodRuntime) -> Duration {
        let agent = self.agent.clone();
        if !self.setup_volumes(pod).await {
            self.write_status(pod, runtime, false).await;
            return Duration::from_secs(2);
        }
        let attempt = runtime.sandboxes.first().map_or(0, |s| s.attempt + 1);
        let (ns, name) = self.identity.clone().unwrap_or_default();
        let _ = std::fs::create_dir_all(agent.layout.pod_log_dir(&ns, &name, &self.uid));
        let _ = std::fs::create_dir_all(agent.layout.pod_dir(&self.uid));
        let result = match sandbox::config(&agent, pod, attempt) {
            Ok((config, warnings)) => {
                for (reason, msg) in warnings {
                    agent.recorder.pod(pod, None, events::WARNING, &reason, msg);
                }
                agent
                    .cri
                    .run_pod_sandbox(config)
                    .await
                    .map_err(|e| e.message())
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(_) => {
                self.sandbox_failures = 0;
                if attempt > 0 {
                    agent.recorder.pod(
                        pod,
                        None,
                        events::NORMAL,
                        "SandboxChanged",
                        "Pod sandbox changed, it will be killed and re-created.",
                    );
                }
                Duration::ZERO
            }
            Err(msg) => {
                self.sandbox_failures += 1;
                agent.recorder.pod(
                    pod,
                    None,
                    events::WARNING,
                    "FailedCreatePodSandBox",
                    format!("Failed to create pod sandbox: {msg}"),
                );
                self.write_status(pod, runtime, false).await;
                Duration::from_secs(2u64.saturating_pow(self.sandbox_failures.min(4)))
                    .min(Duration::from_secs(30))
            }
        }
    }

    /// Starts one container unless it is backing off; when to look again if it is.
    #[allow(clippy::too_many_arguments)]
    async fn start(
        &mut self,
        pod: &Pod,
        c: &k8s_openapi::api::core::v1::Container,
        init: bool,
        runtime: &PodRuntime,
        sandbox_id: &str,
        config: &k8s_cri::v1::PodSandboxConfig,
        ips: &[IpAddr],
    ) -> Option<Duration> {
        let agent = self.agent.clone();
        let latest = runtime.latest(&c.name);
        if let Some(prev) = latest.filter(|r| r.state == State::Exited || r.state == State::Created)
        {
            let key = format!("{}/{}/{}", self.uid, c.name, container_hash(c));
            let since = status::time_of(prev.finished_at)
                .map(|t| SystemTime::from(t.0))
                .unwrap_or_else(SystemTime::now);
            let now = SystemTime::now();
            if let Some((until, delay)) = agent.backoff.blocked_until(&key, since, now) {
                let desc = format!(
                    "{}_{}({})",
                    pod.metadata.name.as_deref().unwrap_or(""),
                    pod.metadata.namespace.as_deref().unwrap_or(""),
                    self.uid
                );
                agent.recorder.pod(
                    pod,
                    Some(events::container_path(pod, &c.name)),
                    events::WARNING,
                    "BackOff",
                    format!(
                        "Back-off restarting failed container {} in pod {desc}",
                        c.name
                    ),
                );
                self.reasons.insert(
                    c.name.clone(),
                    SyncReason {
                        reason: "CrashLoopBackOff".into(),
                        message: format!(
                            "back-off {} restarting failed container={} pod={desc}",
                            go_duration(delay),
                            c.name
                        ),
                    },
                );
                return Some(
                    until.duration_since(now).unwrap_or(Duration::ZERO) + Duration::from_millis(10),
                );
            }
            agent.backoff.next(&key, since, now);
        }
        let attempt = start::next_attempt(&agent, pod, &c.name, latest.map(|r| r.attempt));
        match start::start_container(&agent, pod, c, init, attempt, sandbox_id, config, ips).await {
            Ok(_) => {
                self.reasons.remove(&c.name);
                None
            }
            Err(why) => {
                let retry = match why.reason.as_str() {
                    "ImagePullBackOff" | "ErrImagePull" => Duration::from_secs(1),
                    _ => Duration::from_secs(2),
                };
                self.reasons.insert(c.name.clone(), why);
                Some(retry)
            }
        }
    }

    /// Removes instances beyond the newest two of each container (upstream keeps the
    /// previous one for `--previous` logs).
    async fn gc(&self, runtime: &PodRuntime) {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for c in &runtime.containers {
            let n = seen.entry(c.name.as_str()).or_default();
            *n += 1;
            if *n > 2 && c.state == State::Exited {
                kill::remove_container(&self.agent, c).await;
            }
        }
    }

    /// A pod that will not run containers again: stop what runs, tear volumes down, write
    /// the terminal status, and wait for its deletion.
    async fn finish(&mut self, pod: &Pod, runtime: PodRuntime) -> Option<Duration> {
        self.stage = Stage::Finished;
        if runtime.any_running() {
            kill::kill_pod(&self.agent, pod, &runtime, kill::grace_period(pod)).await;
            return Some(Duration::ZERO);
        }
        self.teardown_volumes().await;
        self.write_status(pod, &runtime, true).await;
        Some(self.resync().max(Duration::from_secs(60)))
    }

    async fn teardown_volumes(&mut self) {
        if self.volumes_down {
            return;
        }
        match self.agent.volumes.teardown(&self.uid).await {
            Ok(()) => self.volumes_down = true,
            Err(e) => tracing::warn!(pod = %self.uid, error = %e, "tearing down volumes failed"),
        }
    }

    /// A deleted pod: stop it with its grace period, write the final status, then delete it.
    async fn terminate(&mut self, pod: &Pod, runtime: PodRuntime) -> Option<Duration> {
        if self.stage == Stage::Deleted {
            // Waiting for the API (finalizers); look now and then.
            return Some(Duration::from_secs(5));
        }
        if runtime.any_running() {
            kill::kill_pod(&self.agent, pod, &runtime, kill::grace_period(pod)).await;
            return Some(Duration::ZERO);
        }
        self.agent.probes.remove_pod(&self.uid);
        self.teardown_volumes().await;
        self.write_status(pod, &runtime, true).await;
        let api: Api<Pod> = Api::namespaced(
            self.agent.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api
            .delete(pod.metadata.name.as_deref().unwrap_or(""), &dp)
            .await
        {
            Ok(_) => self.stage = Stage::Deleted,
            Err(e) if matches!(status_code(&e), Some(404 | 409)) => self.stage = Stage::Deleted,
            Err(e) => {
                tracing::warn!(pod = %self.uid, error = %e, "the final delete failed; retrying");
                return Some(Duration::from_secs(1));
            }
        }
        Some(Duration::from_secs(5))
    }

    /// The pod is gone from the API: everything of it goes from the node.
    async fn remove(&mut self) {
        if let Ok(runtime) = self.agent.reader.pod(&self.uid).await
            && runtime.any_running()
        {
            // Deleted from the API without a graceful stop (forced): still stop gracefully
            // with the minimum period.
            let mut pod = Pod::default();
            pod.metadata.uid = Some(self.uid.clone());
            kill::kill_pod(&self.agent, &pod, &runtime, kill::MIN_GRACE).await;
        }
        kill::remove_pod(&self.agent, &self.uid, self.identity.clone()).await;
    }

    /// Computes and writes the status (only when it changed).
    async fn write_status(&mut self, pod: &Pod, runtime: &PodRuntime, terminal: bool) {
        let agent = self.agent.clone();
        // The basis of transition times: what we wrote last, with others' conditions.
        let mut basis = pod.clone();
        if let Some(lw) = &self.last_written {
            let mut s = lw.clone();
            let ours = [
                "PodScheduled",
                "PodReadyToStartContainers",
                "Initialized",
                "ContainersReady",
                "Ready",
            ];
            let mut conds: Vec<_> = s.conditions.take().unwrap_or_default();
            conds.retain(|c| ours.contains(&c.type_.as_str()));
            conds.extend(
                pod.status
                    .iter()
                    .flat_map(|s| s.conditions.iter().flatten())
                    .filter(|c| !ours.contains(&c.type_.as_str()))
                    .cloned(),
            );
            s.conditions = Some(conds);
            // The API's phase wins when it is terminal (someone else decided it).
            if matches!(
                pod.status.as_ref().and_then(|p| p.phase.as_deref()),
                Some("Succeeded" | "Failed")
            ) {
                s.phase = pod.status.as_ref().and_then(|p| p.phase.clone());
            }
            basis.status = Some(s);
        }
        let probes = agent.probes.view(&self.uid);
        let host_ips = agent.facts().host_ips;
        let now = Time(Timestamp::now());
        let new = status::pod_status(&Inputs {
            pod: &basis,
            runtime,
            probes: &probes,
            reasons: &self.reasons,
            host_ips: &host_ips,
            terminal,
            now: &now,
        });
        if self.last_written.as_ref() == Some(&new)
            || (self.last_written.is_none() && pod.status.as_ref() == Some(&new))
        {
            return;
        }
        tracing::debug!(pod = %self.uid, phase = ?new.phase, terminal, "writing the pod status");
        let api: Api<Pod> = Api::namespaced(
            agent.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let body = json!({"metadata": {"uid": self.uid}, "status": new});
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        match api
            .patch_status(
                pod.metadata.name.as_deref().unwrap_or(""),
                &pp,
                &Patch::Merge(&body),
            )
            .await
        {
            Ok(_) => {
                if let Some(e) = agent.pods.write().get_mut(&self.uid) {
                    e.status = Some(new.clone());
                }
                self.last_written = Some(new);
            }
            Err(e) if matches!(status_code(&e), Some(404 | 409)) => {
                tracing::debug!(pod = %self.uid, error = %e, "the pod status was not written");
            }
            Err(e) => tracing::warn!(pod = %self.uid, error = %e, "writing the pod status failed"),
        }
    }
}
