//! The prober: one task per probe of each running container instance, as upstream's probe
//! workers run them, with upstream's defaults (`initialDelaySeconds` 0, `periodSeconds` 10,
//! `timeoutSeconds` 1, `successThreshold` 1, `failureThreshold` 3).
//!
//! Until the startup probe succeeds neither liveness nor readiness runs and the container is
//! not `started`; readiness starts false and flips after `successThreshold` successes or
//! `failureThreshold` failures; liveness and startup failures past the threshold are reported
//! to the pod worker, which restarts the container, and that probe holds until a new
//! instance runs. Every failed attempt records an `Unhealthy` Warning event. Results are kept
//! per pod and container, for the instance they were taken from; a change wakes the pod's
//! worker.

pub mod handlers;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Container, Pod, Probe};
use parking_lot::Mutex;
use tokio::task::JoinHandle;

use super::cri::CriClient;
use super::events::{self, Recorder};
use super::runtime_state::{PodRuntime, State};
use super::status::ProbeState;
use handlers::Outcome;

/// Which probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Liveness,
    Readiness,
    Startup,
}

impl Kind {
    /// As upstream's event message names it (`Liveness probe failed: ...`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Liveness => "Liveness",
            Kind::Readiness => "Readiness",
            Kind::Startup => "Startup",
        }
    }
}

/// What the probes found about one container instance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Results {
    pub container_id: String,
    pub ready: bool,
    pub started: bool,
    /// Liveness failed `failureThreshold` times: restart the container.
    pub liveness_failed: bool,
    /// The startup probe failed `failureThreshold` times: restart the container.
    pub startup_failed: bool,
}

/// Wakes the worker of a pod (by UID).
pub type Waker = Arc<dyn Fn(&str) + Send + Sync>;

type Key = (String, String);

/// A probe task: pod UID, container name, kind → the instance it probes and the task.
type Workers = HashMap<(String, String, Kind), (String, JoinHandle<()>)>;

/// The probes of every pod of the node.
pub struct ProbeManager {
    cri: CriClient,
    recorder: Recorder,
    /// The kubelet's `major.minor`, for `User-Agent: kube-probe/<v>`.
    version: String,
    wake: Waker,
    results: Mutex<HashMap<Key, Results>>,
    workers: Mutex<Workers>,
}

fn secs(v: Option<i32>, default: i32) -> Duration {
    Duration::from_secs(u64::try_from(v.unwrap_or(default).max(0)).unwrap_or(0))
}

fn probe_of(c: &Container, kind: Kind) -> Option<&Probe> {
    match kind {
        Kind::Liveness => c.liveness_probe.as_ref(),
        Kind::Readiness => c.readiness_probe.as_ref(),
        Kind::Startup => c.startup_probe.as_ref(),
    }
}

fn containers(pod: &Pod) -> Vec<Container> {
    let spec = pod.spec.clone().unwrap_or_default();
    spec.init_containers
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .chain(spec.containers)
        .collect()
}

impl ProbeManager {
    pub fn new(cri: CriClient, recorder: Recorder, version: String, wake: Waker) -> Arc<Self> {
        Arc::new(ProbeManager {
            cri,
            recorder,
            version,
            wake,
            results: Mutex::new(HashMap::new()),
            workers: Mutex::new(HashMap::new()),
        })
    }

    /// Starts probes for the pod's newly running instances and stops those of instances
    /// that no longer run.
    pub fn sync_pod(self: &Arc<Self>, pod: &Pod, runtime: &PodRuntime, pod_ip: Option<IpAddr>) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        for c in containers(pod) {
            let kinds: Vec<Kind> = [Kind::Startup, Kind::Liveness, Kind::Readiness]
                .into_iter()
                .filter(|k| probe_of(&c, *k).is_some())
                .collect();
            if kinds.is_empty() {
                continue;
            }
            let key = (uid.clone(), c.name.clone());
            let running = runtime
                .latest(&c.name)
                .filter(|r| r.state == State::Running);
            let Some(r) = running else {
                self.stop(&uid, &c.name);
                if let Some(res) = self.results.lock().get_mut(&key) {
                    res.ready = false;
                }
                continue;
            };
            let fresh = self
                .results
                .lock()
                .get(&key)
                .is_none_or(|res| res.container_id != r.id);
            if !fresh {
                continue;
            }
            self.stop(&uid, &c.name);
            self.results.lock().insert(
                key,
                Results {
                    container_id: r.id.clone(),
                    ready: c.readiness_probe.is_none(),
                    started: c.startup_probe.is_none(),
                    ..Results::default()
                },
            );
            let started_at =
                UNIX_EPOCH + Duration::from_nanos(u64::try_from(r.started_at).unwrap_or(0));
            for kind in kinds {
                let me = self.clone();
                let (pod, c2, id) = (pod.clone(), c.clone(), r.id.clone());
                let task =
                    tokio::spawn(
                        async move { me.run(pod, c2, id, kind, started_at, pod_ip).await },
                    );
                self.workers
                    .lock()
                    .insert((uid.clone(), c.name.clone(), kind), (r.id.clone(), task));
            }
        }
    }

    fn stop(&self, uid: &str, name: &str) {
        let mut w = self.workers.lock();
        w.retain(|(u, n, _), (_, task)| {
            let keep = !(u == uid && n == name);
            if !keep {
                task.abort();
            }
            keep
        });
    }

    /// Stops every probe of pod `uid` and forgets its results.
    pub fn remove_pod(&self, uid: &str) {
        self.workers.lock().retain(|(u, _, _), (_, task)| {
            if u == uid {
                task.abort();
            }
            u != uid
        });
        self.results.lock().retain(|(u, _), _| u != uid);
    }

    /// The results of one container.
    pub fn results(&self, uid: &str, container: &str) -> Option<Results> {
        self.results
            .lock()
            .get(&(uid.to_string(), container.to_string()))
            .cloned()
    }

    /// Readiness and startup of the pod's containers, for the status.
    pub fn view(&self, uid: &str) -> HashMap<String, ProbeState> {
        self.results
            .lock()
            .iter()
            .filter(|((u, _), _)| u == uid)
            .map(|((_, name), r)| {
                (
                    name.clone(),
                    ProbeState {
                        container_id: r.container_id.clone(),
                        ready: r.ready,
                        started: r.started,
                    },
                )
            })
            .collect()
    }

    fn update(&self, uid: &str, name: &str, id: &str, f: impl FnOnce(&mut Results)) -> bool {
        let mut results = self.results.lock();
        let Some(r) = results.get_mut(&(uid.to_string(), name.to_string())) else {
            return false;
        };
        if r.container_id != id {
            return false;
        }
        let before = r.clone();
        f(r);
        *r != before
    }

    async fn attempt(
        &self,
        probe: &Probe,
        c: &Container,
        id: &str,
        pod_ip: Option<IpAddr>,
    ) -> Outcome {
        let timeout = secs(probe.timeout_seconds, 1).max(Duration::from_secs(1));
        if let Some(e) = &probe.exec {
            handlers::exec(&self.cri, id, e, timeout).await
        } else if let Some(h) = &probe.http_get {
            handlers::http_get(h, c, pod_ip, timeout, &self.version).await
        } else if let Some(t) = &probe.tcp_socket {
            handlers::tcp(t, c, pod_ip, timeout).await
        } else if let Some(g) = &probe.grpc {
            handlers::grpc(g, pod_ip, timeout).await
        } else {
            Outcome::Failure("missing probe handler".into())
        }
    }

    async fn run(
        self: Arc<Self>,
        pod: Pod,
        c: Container,
        id: String,
        kind: Kind,
        started_at: SystemTime,
        pod_ip: Option<IpAddr>,
    ) {
        let Some(probe) = probe_of(&c, kind).cloned() else {
            return;
        };
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let period = secs(probe.period_seconds, 10).max(Duration::from_secs(1));
        let success_threshold = probe.success_threshold.unwrap_or(1).max(1);
        let failure_threshold = probe.failure_threshold.unwrap_or(3).max(1);
        let delay = secs(probe.initial_delay_seconds, 0);
        if let Ok(wait) = (started_at + delay).duration_since(SystemTime::now()) {
            tokio::time::sleep(wait).await;
        }
        let (mut successes, mut failures) = (0, 0);
        let path = Some(events::container_path(&pod, &c.name));
        loop {
            let started = self.results(&uid, &c.name).is_some_and(|r| r.started);
            if kind != Kind::Startup && !started {
                tokio::time::sleep(Duration::from_millis(200).min(period)).await;
                continue;
            }
            let outcome = self.attempt(&probe, &c, &id, pod_ip).await;
            if let Outcome::Failure(msg) = &outcome {
                successes = 0;
                failures += 1;
                self.recorder.pod(
                    &pod,
                    path.clone(),
                    events::WARNING,
                    "Unhealthy",
                    format!("{} probe failed: {msg}", kind.name()),
                );
            } else {
                failures = 0;
                successes += 1;
            }
            let mut done = false;
            let changed = self.update(&uid, &c.name, &id, |r| match kind {
                Kind::Readiness => {
                    if successes >= success_threshold {
                        r.ready = true;
                    } else if failures >= failure_threshold {
                        r.ready = false;
                    }
                }
                Kind::Liveness => {
                    if failures >= failure_threshold {
                        r.liveness_failed = true;
                        done = true;
                    }
                }
                Kind::Startup => {
                    if outcome.ok() {
                        r.started = true;
                        done = true;
                    } else if failures >= failure_threshold {
                        r.startup_failed = true;
                        done = true;
                    }
                }
            });
            if changed {
                (self.wake)(&uid);
            }
            if done {
                // Holds until the pod worker starts a new instance.
                return;
            }
            tokio::time::sleep(period).await;
        }
    }
}
