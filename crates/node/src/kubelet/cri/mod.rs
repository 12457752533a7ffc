//! The CRI `runtime.v1` client: the runtime and image services of one endpoint
//! (`unix:///run/containerd/containerd.sock`), over tonic on a unix socket.
//!
//! The channel connects lazily and reconnects on its own, so a containerd restart costs the
//! calls made while it is down (they fail with [`CriError::Unavailable`]) and nothing else.
//! Every call has a deadline: upstream's `runtimeRequestTimeout` (2 min), except image
//! pulls, which may run longer, and `ExecSync`, whose deadline is the command's own timeout
//! plus a margin.

mod calls;

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use tonic::transport::{Channel, Endpoint, Uri};

/// Upstream kubelet's `runtimeRequestTimeout`.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// The deadline of an image pull (kubelet pulls have no fixed deadline; this bounds a stuck
/// registry).
pub const PULL_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// A failed CRI call.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CriError {
    /// The runtime is not reachable (not started, restarting, or the socket is gone).
    #[error("{op}: the runtime is unavailable: {message}")]
    Unavailable { op: &'static str, message: String },
    /// The object does not exist (CRI `NotFound`).
    #[error("{op}: not found: {message}")]
    NotFound { op: &'static str, message: String },
    /// The call took longer than its deadline.
    #[error("{op}: deadline exceeded: {message}")]
    DeadlineExceeded { op: &'static str, message: String },
    /// Any other error the runtime answered with.
    #[error("{op}: {code:?}: {message}")]
    Runtime {
        op: &'static str,
        code: tonic::Code,
        message: String,
    },
    /// The endpoint is not a `unix://` URL or path.
    #[error("invalid CRI endpoint {0:?}: only unix sockets are supported")]
    Endpoint(String),
}

impl CriError {
    pub(crate) fn from_status(op: &'static str, s: tonic::Status) -> Self {
        let message = s.message().to_string();
        match s.code() {
            tonic::Code::NotFound => CriError::NotFound { op, message },
            tonic::Code::Unavailable => CriError::Unavailable { op, message },
            tonic::Code::DeadlineExceeded => CriError::DeadlineExceeded { op, message },
            tonic::Code::Unknown if message.contains("transport error") => {
                CriError::Unavailable { op, message }
            }
            code => CriError::Runtime { op, code, message },
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, CriError::NotFound { .. })
    }

    pub fn is_unavailable(&self) -> bool {
        matches!(self, CriError::Unavailable { .. })
    }

    /// The runtime's own message (what the kubelet puts into events and statuses).
    pub fn message(&self) -> String {
        match self {
            CriError::Unavailable { message, .. }
            | CriError::NotFound { message, .. }
            | CriError::DeadlineExceeded { message, .. }
            | CriError::Runtime { message, .. } => message.clone(),
            CriError::Endpoint(e) => e.clone(),
        }
    }
}

pub type Result<T, E = CriError> = std::result::Result<T, E>;

/// The socket path of an endpoint: `unix:///path` or a bare absolute path.
pub fn socket_path(endpoint: &str) -> Result<PathBuf> {
    let path = endpoint.strip_prefix("unix://").unwrap_or(endpoint);
    if path.starts_with('/') {
        Ok(PathBuf::from(path))
    } else {
        Err(CriError::Endpoint(endpoint.to_string()))
    }
}

/// A CRI client. Clones share the connection.
#[derive(Clone)]
pub struct CriClient {
    runtime: RuntimeServiceClient<Channel>,
    images: ImageServiceClient<Channel>,
    socket: PathBuf,
}

impl std::fmt::Debug for CriClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CriClient")
            .field("socket", &self.socket)
            .finish()
    }
}

impl CriClient {
    /// A client of the runtime at `endpoint`. Connects on first use.
    pub fn new(endpoint: &str) -> Result<Self> {
        let socket = socket_path(endpoint)?;
        let path = socket.clone();
        // The URI is unused: the connector dials the socket.
        let channel = Endpoint::from_static("http://[::1]:50051")
            .connect_timeout(Duration::from_secs(5))
            .connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
                let path = path.clone();
                async move {
                    let s = tokio::net::UnixStream::connect(path).await?;
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(s))
                }
            }));
        // containerd's replies (ListContainers on a full node) exceed tonic's 4 MiB default.
        let max = 16 * 1024 * 1024;
        Ok(CriClient {
            runtime: RuntimeServiceClient::new(channel.clone())
                .max_decoding_message_size(max)
                .max_encoding_message_size(max),
            images: ImageServiceClient::new(channel)
                .max_decoding_message_size(max)
                .max_encoding_message_size(max),
            socket,
        })
    }

    /// The socket this client dials.
    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

/// A request with a deadline.
pub(crate) fn request<T>(msg: T, timeout: Duration) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.set_timeout(timeout);
    r
}
