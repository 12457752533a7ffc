//! Errors of the node agent.

/// Why a virtual node could not be set up or run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the API server failed.
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// The node template's sizing is invalid (every field error, joined).
    #[error("invalid node sizing: {0}")]
    Sizing(String),
    /// The node's memory and CPU are unknown, so it has no capacity to report.
    #[error("node {0}: the memory and CPU are unknown; name an instance type or set resources")]
    UnknownSize(String),
    /// Every pod subnet of the cluster CIDR is taken.
    #[error("no free /{mask} pod subnet is left in {pool}")]
    PoolExhausted { pool: String, mask: u8 },
    /// A node of that name already runs in this process.
    #[error("virtual node {0} already runs here")]
    Duplicate(String),
    /// No virtual node of that name runs here.
    #[error("no virtual node {0} runs here")]
    NoSuchNode(String),
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {path}: {reason}")]
    Kubeconfig { path: String, reason: String },
}

impl Error {
    pub(crate) fn api(what: impl Into<String>, source: kube::Error) -> Self {
        Error::Api {
            what: what.into(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The HTTP status of an API error response, if `e` is one.
pub(crate) fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}
