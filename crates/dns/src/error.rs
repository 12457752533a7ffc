//! The crate's errors: what can go wrong starting a server, reading its configuration, talking
//! to the Kubernetes API or to an upstream resolver. Query handling itself never fails: every
//! query gets an answer (SERVFAIL only when an upstream could not be reached).

use std::net::SocketAddr;

/// An error of the cluster DNS.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A socket could not be bound.
    #[error("failed to bind {proto} {addr}: {source}")]
    Bind {
        proto: &'static str,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The configuration is unusable (a bad zone name, no listen address, a forwarding loop).
    #[error("invalid DNS configuration: {0}")]
    Config(String),
    /// The resolver configuration file could not be read.
    #[error("failed to read {path}: {source}")]
    ResolvConf {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A watch failed (it is retried with backoff).
    #[error("watch of {kind} failed: {source}")]
    Watch {
        kind: &'static str,
        #[source]
        source: kube::runtime::watcher::Error,
    },
    /// A request to the Kubernetes API failed.
    #[error("kubernetes API request failed: {0}")]
    Kube(#[from] kube::Error),
    /// A watch delivered objects of more than one logical cluster: the client given to the
    /// view is a cross-cluster client, which would mix clusters' names.
    #[error(
        "{kind} {name} belongs to cluster {cluster:?}: a view is fed by one cluster's client only"
    )]
    CrossCluster {
        kind: String,
        name: String,
        cluster: String,
    },
    /// An upstream resolver did not answer usably.
    #[error("upstream {addr}: {reason}")]
    Upstream { addr: SocketAddr, reason: String },
    /// A DNS message could not be built or parsed.
    #[error("DNS message: {0}")]
    Proto(#[from] hickory_proto::ProtoError),
    /// Waiting for the initial lists took longer than allowed.
    #[error("the watches did not list their objects within {0:?}")]
    SyncTimeout(std::time::Duration),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
