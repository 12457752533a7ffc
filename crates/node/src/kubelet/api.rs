//! What the kubelet's HTTP server (`/containerLogs`, `/exec`, `/attach`, `/portForward`,
//! `/run`, `/pods`, `/stats/summary`) asks of the agent.
//!
//! The server (its own module, served over HTTPS on the port the Node reports in
//! `daemonEndpoints`) authenticates, authorizes and speaks the streaming protocols; the agent
//! answers the questions below. Exec, attach and port-forward follow upstream's design: the
//! agent asks CRI for a one-shot URL of the runtime's streaming server
//! (`http://127.0.0.1:<port>/exec/<token>`) and the HTTP server proxies the client's upgrade
//! to it, so SPDY and WebSocket reach containerd's own implementation unchanged.
//!
//! Errors carry the HTTP status and the plain-text body upstream's kubelet answers with
//! (its handlers answer text, not `Status` JSON).

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Pod;

use super::stats::Summary;

/// A pod by namespace and name, optionally pinned to a UID (the `/{uid}/` path forms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    /// When given, a pod of that name with another UID is "not found".
    pub uid: Option<String>,
}

/// One container of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRef {
    pub pod: PodRef,
    pub container: String,
}

/// The streams an exec or attach asks for (the `stdin=1&stdout=1&stderr=1&tty=1` query).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Streams {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

/// A URL of the runtime's streaming server that serves exactly one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamUrl(pub String);

/// Where a container instance's CRI log is, for `/containerLogs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLocation {
    /// The CRI log file (`<RFC3339Nano> <stdout|stderr> <F|P> <text>` lines); rotated files
    /// are `<path>.<timestamp>` (and `.gz`) beside it.
    pub path: PathBuf,
    /// The runtime's ID of the instance (without `containerd://`), for
    /// [`KubeletApi::container_running`] while following.
    pub container_id: String,
}

/// The combined output of `/run` (and of an exec probe).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i32,
}

/// A refusal, as upstream's kubelet answers it: an HTTP status and a plain-text body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 404, e.g. `pod does not exist`, `container not found ("c")`.
    #[error("{0}")]
    NotFound(String),
    /// 400, e.g. `container "c" in pod "p" is waiting to start: ContainerCreating`.
    #[error("{0}")]
    BadRequest(String),
    /// 500: the runtime failed.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// The HTTP status code of the answer.
    pub fn status(&self) -> u16 {
        match self {
            ApiError::NotFound(_) => 404,
            ApiError::BadRequest(_) => 400,
            ApiError::Internal(_) => 500,
        }
    }
}

/// The agent, as the kubelet HTTP server sees it. [`super`]'s agent implements it; tests of
/// the server can implement it with a fake.
#[async_trait::async_trait]
pub trait KubeletApi: Send + Sync + 'static {
    /// The node's name (authorization checks `nodes/<name>/proxy`).
    fn node_name(&self) -> String;

    /// The pods bound to this node as the agent has them, with the statuses it computed
    /// (`/pods`, a v1 `PodList`).
    fn pods(&self) -> Vec<Pod>;

    /// A streaming URL for `command` in a running container. Upstream's checks apply: at
    /// least one of stdin, stdout and stderr; tty and stderr together drop stderr.
    async fn exec(
        &self,
        target: &ContainerRef,
        command: Vec<String>,
        streams: Streams,
    ) -> Result<StreamUrl, ApiError>;

    /// A streaming URL that attaches to a running container's main process; `tty` is taken
    /// from the container's spec, not from `streams`.
    async fn attach(&self, target: &ContainerRef, streams: Streams) -> Result<StreamUrl, ApiError>;

    /// A streaming URL for port forwarding into the pod's network namespace. `ports` are
    /// those of a WebSocket request (its `port=` query), empty for SPDY, whose streams name
    /// their ports; they go into CRI's `PortForwardRequest.port`, where the runtime's
    /// streaming server takes a WebSocket session's ports from.
    async fn port_forward(&self, pod: &PodRef, ports: Vec<u16>) -> Result<StreamUrl, ApiError>;

    /// The log of the container's current instance, or of its previous one: upstream's
    /// `validateContainerLogStatus` decides which, and its refusals are `BadRequest`s with
    /// upstream's wording (`previous terminated container "c" in pod "p" not found`).
    fn container_log(&self, target: &ContainerRef, previous: bool)
    -> Result<LogLocation, ApiError>;

    /// Whether the instance still runs (a follow ends once it has exited and its log is read).
    async fn container_running(&self, container_id: &str) -> bool;

    /// Runs `command` in the container and returns its output (`/run`).
    async fn run(
        &self,
        target: &ContainerRef,
        command: Vec<String>,
    ) -> Result<ExecOutput, ApiError>;

    /// The stats summary (`/stats/summary`); `only_cpu_and_memory` is the
    /// `only_cpu_and_memory=true` query (what metrics-server asks for).
    async fn stats_summary(&self, only_cpu_and_memory: bool) -> Result<Summary, ApiError>;
}
