//! A fake node behind the real kubelet HTTP server: a [`KubeletApi`] over pods the test
//! creates, whose containers are directories, log files and local processes run by the fake
//! streaming server ([`super::runtime`]).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use node::kubelet::api::{
    ApiError, ContainerRef, ExecOutput, KubeletApi, LogLocation, PodRef, StreamUrl, Streams,
};
use node::kubelet::stats::{
    ContainerStats, CpuStats, MemoryStats, NodeStats, PodReference, PodStats, Summary,
};
use parking_lot::{Mutex, RwLock};
use streaming::remotecommand::StreamOptions;

use super::streams::{Runtime, Session};

pub struct FakeApi {
    pub name: String,
    pub pods: RwLock<Vec<Pod>>,
    pub root: PathBuf,
    pub runtime: Arc<Runtime>,
    /// Container instance IDs (`<ns>_<pod>_<container>_<restart>`) that run.
    pub running: Mutex<HashSet<String>>,
    started: Instant,
    boot: jiff::Timestamp,
}

impl FakeApi {
    pub fn new(name: &str, root: PathBuf, runtime: Arc<Runtime>) -> FakeApi {
        FakeApi {
            name: name.to_string(),
            pods: RwLock::new(Vec::new()),
            root,
            runtime,
            running: Mutex::new(HashSet::new()),
            started: Instant::now(),
            boot: jiff::Timestamp::now(),
        }
    }

    /// Where a container's files are (the working directory of its processes).
    pub fn dir(&self, ns: &str, pod: &str, container: &str) -> PathBuf {
        let d = self
            .root
            .join("fs")
            .join(format!("{ns}_{pod}"))
            .join(container);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// The CRI log file of an instance.
    pub fn log_path(&self, ns: &str, pod: &str, container: &str, restart: i32) -> PathBuf {
        let d = self
            .root
            .join("logs")
            .join(format!("{ns}_{pod}"))
            .join(container);
        std::fs::create_dir_all(&d).unwrap();
        d.join(format!("{restart}.log"))
    }

    pub fn instance(ns: &str, pod: &str, container: &str, restart: i32) -> String {
        format!("{ns}_{pod}_{container}_{restart}")
    }

    fn find(&self, r: &PodRef) -> Result<Pod, ApiError> {
        let pods = self.pods.read();
        let pod = pods
            .iter()
            .find(|p| {
                p.metadata.namespace.as_deref() == Some(r.namespace.as_str())
                    && p.metadata.name.as_deref() == Some(r.name.as_str())
            })
            .cloned()
            .ok_or_else(|| ApiError::NotFound("pod does not exist".into()))?;
        if let Some(uid) = &r.uid
            && pod.metadata.uid.as_deref() != Some(uid.as_str())
        {
            return Err(ApiError::NotFound("pod not found".into()));
        }
        Ok(pod)
    }

    fn status(pod: &Pod, container: &str) -> Option<ContainerStatus> {
        let s = pod.status.as_ref()?;
        s.container_statuses
            .iter()
            .flatten()
            .chain(s.init_container_statuses.iter().flatten())
            .find(|c| c.name == container)
            .cloned()
    }

    /// The running container a stream addresses: its spec command and tty, and directory.
    fn running_container(
        &self,
        t: &ContainerRef,
    ) -> Result<(Vec<String>, bool, PathBuf), ApiError> {
        let pod = self.find(&t.pod)?;
        let not_found = || ApiError::NotFound(format!("container not found ({:?})", t.container));
        let spec = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.iter().find(|c| c.name == t.container))
            .cloned()
            .ok_or_else(not_found)?;
        let st = Self::status(&pod, &t.container).ok_or_else(not_found)?;
        if st.state.as_ref().and_then(|s| s.running.as_ref()).is_none() {
            return Err(not_found());
        }
        let mut argv: Vec<String> = spec.command.unwrap_or_default();
        argv.extend(spec.args.unwrap_or_default());
        if argv.is_empty() {
            argv = vec!["cat".into()];
        }
        let dir = self.dir(&t.pod.namespace, &t.pod.name, &t.container);
        Ok((argv, spec.tty.unwrap_or(false), dir))
    }

    fn cpu(&self, share: f64) -> CpuStats {
        let elapsed = self.started.elapsed().as_nanos() as f64 + 1e9;
        CpuStats {
            time: Some(Time(jiff::Timestamp::now())),
            usage_nano_cores: Some((share * 1e9) as u64),
            usage_core_nano_seconds: Some((elapsed * share) as u64),
        }
    }

    fn memory(bytes: u64) -> MemoryStats {
        MemoryStats {
            time: Some(Time(jiff::Timestamp::now())),
            working_set_bytes: Some(bytes),
            usage_bytes: Some(bytes),
            ..MemoryStats::default()
        }
    }
}

fn options(s: Streams) -> StreamOptions {
    StreamOptions {
        stdin: s.stdin,
        stdout: s.stdout,
        stderr: s.stderr && !s.tty,
        tty: s.tty,
    }
}

#[async_trait]
impl KubeletApi for FakeApi {
    fn node_name(&self) -> String {
        self.name.clone()
    }

    fn pods(&self) -> Vec<Pod> {
        self.pods.read().clone()
    }

    async fn exec(
        &self,
        target: &ContainerRef,
        command: Vec<String>,
        streams: Streams,
    ) -> Result<StreamUrl, ApiError> {
        let (_, _, dir) = self.running_container(target)?;
        if command.is_empty() {
            return Err(ApiError::BadRequest("no command given".into()));
        }
        Ok(StreamUrl(self.runtime.url(
            "exec",
            Session::Exec {
                argv: command,
                dir,
                streams: options(streams),
            },
        )))
    }

    async fn attach(&self, target: &ContainerRef, streams: Streams) -> Result<StreamUrl, ApiError> {
        let (argv, tty, dir) = self.running_container(target)?;
        let streams = Streams { tty, ..streams };
        Ok(StreamUrl(self.runtime.url(
            "attach",
            Session::Exec {
                argv,
                dir,
                streams: options(streams),
            },
        )))
    }

    async fn port_forward(&self, pod: &PodRef, ports: Vec<u16>) -> Result<StreamUrl, ApiError> {
        self.find(pod)?;
        Ok(StreamUrl(
            self.runtime
                .url("portforward", Session::PortForward { ports }),
        ))
    }

    fn container_log(&self, t: &ContainerRef, previous: bool) -> Result<LogLocation, ApiError> {
        let pod = self.find(&t.pod)?;
        let (name, pname) = (&t.container, &t.pod.name);
        let st = Self::status(&pod, name).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "container {name:?} in pod {pname:?} is not available"
            ))
        })?;
        let state = st.state.clone().unwrap_or_default();
        let had_previous = st
            .last_state
            .as_ref()
            .and_then(|l| l.terminated.as_ref())
            .is_some();
        let restart = if previous {
            if !had_previous {
                return Err(ApiError::BadRequest(format!(
                    "previous terminated container {name:?} in pod {pname:?} not found"
                )));
            }
            st.restart_count - 1
        } else if state.running.is_some() || state.terminated.is_some() {
            st.restart_count
        } else if had_previous {
            st.restart_count - 1
        } else {
            let reason = state.waiting.and_then(|w| w.reason).unwrap_or_default();
            return Err(ApiError::BadRequest(format!(
                "container {name:?} in pod {pname:?} is waiting to start: {reason}"
            )));
        };
        let ns = &t.pod.namespace;
        Ok(LogLocation {
            path: self.log_path(ns, pname, name, restart),
            container_id: Self::instance(ns, pname, name, restart),
        })
    }

    async fn container_running(&self, container_id: &str) -> bool {
        self.running.lock().contains(container_id)
    }

    async fn run(
        &self,
        target: &ContainerRef,
        command: Vec<String>,
    ) -> Result<ExecOutput, ApiError> {
        let (_, _, dir) = self.running_container(target)?;
        let out = tokio::process::Command::new(&command[0])
            .args(&command[1..])
            .current_dir(dir)
            .output()
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        Ok(ExecOutput {
            stdout: out.stdout,
            stderr: out.stderr,
            exit_code: out.status.code().unwrap_or(-1),
        })
    }

    async fn stats_summary(&self, _only_cpu_and_memory: bool) -> Result<Summary, ApiError> {
        let mut pods = Vec::new();
        for pod in self.pods.read().iter() {
            let running: Vec<String> = pod
                .status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
                .filter(|c| c.state.as_ref().and_then(|s| s.running.as_ref()).is_some())
                .map(|c| c.name.clone())
                .collect();
            if running.is_empty() {
                continue;
            }
            let containers: Vec<ContainerStats> = running
                .iter()
                .map(|c| ContainerStats {
                    name: c.clone(),
                    start_time: Some(Time(self.boot)),
                    cpu: Some(self.cpu(0.1)),
                    memory: Some(Self::memory(64 << 20)),
                    ..ContainerStats::default()
                })
                .collect();
            let share = 0.1 * containers.len() as f64;
            pods.push(PodStats {
                pod_ref: PodReference {
                    name: pod.metadata.name.clone().unwrap_or_default(),
                    namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                    uid: pod.metadata.uid.clone().unwrap_or_default(),
                },
                start_time: Some(Time(self.boot)),
                cpu: Some(self.cpu(share)),
                memory: Some(Self::memory((64 << 20) * containers.len() as u64)),
                containers,
                ..PodStats::default()
            });
        }
        Ok(Summary {
            node: NodeStats {
                node_name: self.name.clone(),
                start_time: Some(Time(self.boot)),
                cpu: Some(self.cpu(0.25)),
                memory: Some(Self::memory(1 << 30)),
                ..NodeStats::default()
            },
            pods,
        })
    }
}
