//! The agent's answers to the kubelet HTTP server ([`KubeletApi`]): the pod list with the
//! statuses the agent computed, CRI streaming URLs for exec, attach and port-forward, which
//! log file a `/containerLogs` request reads (upstream's `validateContainerLogStatus`),
//! `/run`, and the stats summary.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_cri::v1 as cri;
use k8s_openapi::api::core::v1::{Container, Pod};

use super::agent::Agent;
use super::api::{
    ApiError, ContainerRef, ExecOutput, KubeletApi, LogLocation, PodRef, StreamUrl, Streams,
};
use super::runtime_state::State;
use super::stats::Summary;
use super::summary::{self, CpuSamples};

/// The agent behind the kubelet API.
pub struct AgentApi {
    agent: Arc<Agent>,
    samples: CpuSamples,
}

impl AgentApi {
    pub fn new(agent: Arc<Agent>) -> Self {
        AgentApi {
            agent,
            samples: CpuSamples::default(),
        }
    }

    fn find(&self, r: &PodRef) -> Result<Pod, ApiError> {
        let pods = self.agent.pods.read();
        pods.values()
            .map(|e| &e.pod)
            .find(|p| {
                p.metadata.namespace.as_deref() == Some(r.namespace.as_str())
                    && p.metadata.name.as_deref() == Some(r.name.as_str())
                    && r.uid
                        .as_ref()
                        .is_none_or(|u| p.metadata.uid.as_ref() == Some(u))
            })
            .cloned()
            .ok_or_else(|| ApiError::NotFound("pod does not exist".into()))
    }

    fn spec_container(pod: &Pod, name: &str) -> Option<Container> {
        let spec = pod.spec.as_ref()?;
        spec.containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .find(|c| c.name == name)
            .cloned()
    }

    /// The ID of the running instance of a container.
    async fn running(&self, t: &ContainerRef) -> Result<(Pod, Container, String), ApiError> {
        let pod = self.find(&t.pod)?;
        let not_found = || ApiError::NotFound(format!("container not found ({:?})", t.container));
        let c = Self::spec_container(&pod, &t.container).ok_or_else(not_found)?;
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let rt = self
            .agent
            .reader
            .pod(&uid)
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        let r = rt
            .latest(&t.container)
            .filter(|r| r.state == State::Running)
            .ok_or_else(not_found)?;
        Ok((pod, c, r.id.clone()))
    }
}

fn check_streams(s: &Streams) -> Result<(), ApiError> {
    if !s.stdin && !s.stdout && !s.stderr {
        return Err(ApiError::BadRequest(
            "you must specify at least 1 of stdin, stdout, stderr".into(),
        ));
    }
    Ok(())
}

#[async_trait]
impl KubeletApi for AgentApi {
    fn node_name(&self) -> String {
        self.agent.config.node_name.clone()
    }

    fn pods(&self) -> Vec<Pod> {
        let mut out: Vec<Pod> = self
            .agent
            .pods
            .read()
            .values()
            .map(|e| {
                let mut p = e.pod.clone();
                if let Some(s) = &e.status {
                    p.status = Some(s.clone());
                }
                p
            })
            .collect();
        out.sort_by(|a, b| {
            (&a.metadata.namespace, &a.metadata.name)
                .cmp(&(&b.metadata.namespace, &b.metadata.name))
        });
        out
    }

    async fn exec(
        &self,
        target: &ContainerRef,
        command: Vec<String>,
        streams: Streams,
    ) -> Result<StreamUrl, ApiError> {
        check_streams(&streams)?;
        let (_, _, id) = self.running(target).await?;
        let req = cri::ExecRequest {
            container_id: id,
            cmd: command,
            tty: streams.tty,
            stdin: streams.stdin,
            stdout: streams.stdout,
            stderr: streams.stderr && !streams.tty,
        };
        self.agent
            .cri
            .exec(req)
            .await
            .map(StreamUrl)
            .map_err(|e| ApiError::Internal(e.to_string()))
    }

    async fn attach(&self, target: &ContainerRef, streams: Streams) -> Result<StreamUrl, ApiError> {
        check_streams(&streams)?;
        let (_, c, id) = self.running(target).await?;
        let tty = c.tty.unwrap_or(false);
        let req = cri::AttachRequest {
            container_id: id,
            stdin: streams.stdin,
            tty,
            stdout: streams.stdout,
            stderr: streams.stderr && !tty,
        };
        self.agent
            .cri
            .attach(req)
            .await
            .map(StreamUrl)
            .map_err(|e| ApiError::Internal(e.to_string()))
    }

    async fn port_forward(&self, pod: &PodRef, ports: Vec<u16>) -> Result<StreamUrl, ApiError> {
        let p = self.find(pod)?;
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let rt = self
            .agent
            .reader
            .pod(&uid)
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        let sb = rt
            .ready_sandbox()
            .ok_or_else(|| ApiError::NotFound("pod not found".into()))?;
        self.agent
            .cri
            .port_forward(&sb.id, ports.into_iter().map(i32::from).collect())
            .await
            .map(StreamUrl)
            .map_err(|e| ApiError::Internal(e.to_string()))
    }

    fn container_log(
        &self,
        target: &ContainerRef,
        previous: bool,
    ) -> Result<LogLocation, ApiError> {
        let pod = self.find(&target.pod)?;
        let name = &target.container;
        let pname = pod.metadata.name.clone().unwrap_or_default();
        if Self::spec_container(&pod, name).is_none() {
            return Err(ApiError::BadRequest(format!(
                "container {name} is not valid for pod {pname}"
            )));
        }
        let status = self
            .agent
            .pods
            .read()
            .get(pod.metadata.uid.as_deref().unwrap_or(""))
            .and_then(|e| e.status.clone())
            .or_else(|| pod.status.clone())
            .unwrap_or_default();
        let cs = status
            .container_statuses
            .iter()
            .flatten()
            .chain(status.init_container_statuses.iter().flatten())
            .find(|s| &s.name == name)
            .cloned()
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "container {name:?} in pod {pname:?} is not available"
                ))
            })?;
        let last_id = cs
            .last_state
            .as_ref()
            .and_then(|l| l.terminated.as_ref())
            .and_then(|t| t.container_id.clone());
        let st = cs.state.clone().unwrap_or_default();
        let id = if previous {
            last_id.ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "previous terminated container {name:?} in pod {pname:?} not found"
                ))
            })?
        } else if st.running.is_some() || st.terminated.is_some() {
            cs.container_id.clone().unwrap_or_default()
        } else if let Some(id) = last_id {
            id
        } else {
            let reason = st.waiting.and_then(|w| w.reason).unwrap_or_default();
            let why = match reason.as_str() {
                "ErrImagePull" => "image can't be pulled".to_string(),
                "ImagePullBackOff" => "trying and failing to pull image".to_string(),
                r => r.to_string(),
            };
            return Err(ApiError::BadRequest(format!(
                "container {name:?} in pod {pname:?} is waiting to start: {why}"
            )));
        };
        let id = id.trim_start_matches("containerd://").to_string();
        // Each instance's log is linked by its ID when it starts.
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let link = self
            .agent
            .layout
            .container_links_dir()
            .join(format!("{pname}_{ns}_{name}-{id}.log"));
        let path = std::fs::read_link(&link).unwrap_or_else(|_| {
            let attempt = u32::try_from(cs.restart_count).unwrap_or(0);
            self.agent
                .layout
                .container_log_file(&ns, &pname, &uid, name, attempt)
        });
        Ok(LogLocation {
            path,
            container_id: id,
        })
    }

    async fn container_running(&self, container_id: &str) -> bool {
        self.agent
            .cri
            .container_status(container_id)
            .await
            .is_ok_and(|s| s.state == cri::ContainerState::ContainerRunning as i32)
    }

    async fn run(
        &self,
        target: &ContainerRef,
        command: Vec<String>,
    ) -> Result<ExecOutput, ApiError> {
        let (_, _, id) = self.running(target).await?;
        let r = self
            .agent
            .cri
            .exec_sync(&id, command, std::time::Duration::ZERO)
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        Ok(ExecOutput {
            stdout: r.stdout,
            stderr: r.stderr,
            exit_code: r.exit_code,
        })
    }

    async fn stats_summary(&self, only_cpu_and_memory: bool) -> Result<Summary, ApiError> {
        let mut s = summary::summary(&self.agent, &self.samples)
            .await
            .map_err(ApiError::Internal)?;
        if only_cpu_and_memory {
            s.node.fs = None;
            s.node.runtime = None;
            for p in &mut s.pods {
                for c in &mut p.containers {
                    c.rootfs = None;
                    c.logs = None;
                }
            }
        }
        Ok(s)
    }
}
