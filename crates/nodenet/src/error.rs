//! The crate's errors: a command (`nft`, `ip`, `conntrack`) that could not run or failed, a
//! network namespace that could not be entered, a watch or request of the Kubernetes API, a
//! configuration that cannot work, and cluster DNS failures.

use std::time::Duration;

/// An error of the node's network.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A program could not be started or waited for.
    #[error("failed to run {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// A program ran and failed; `stderr` is what it said.
    #[error("{command} failed ({status}): {stderr}")]
    Command {
        command: String,
        status: String,
        stderr: String,
    },
    /// A network namespace could not be opened or entered.
    #[error("network namespace {name}: {source}")]
    Netns {
        name: String,
        #[source]
        source: std::io::Error,
    },
    /// A file under `/proc/sys` could not be written.
    #[error("failed to set {key}: {source}")]
    Sysctl {
        key: String,
        #[source]
        source: std::io::Error,
    },
    /// `nft --json` printed something that is not the documented schema.
    #[error("unexpected nft output: {0}")]
    NftOutput(String),
    /// The configuration cannot work (a bad address, a missing node).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A request to the Kubernetes API failed.
    #[error("kubernetes API request failed: {0}")]
    Kube(#[from] kube::Error),
    /// Cluster DNS failed to start or publish.
    #[error("cluster DNS: {0}")]
    Dns(#[from] dns::Error),
    /// A component did not reach its first full sync in time.
    #[error("{component} did not sync within {timeout:?}")]
    SyncTimeout {
        component: &'static str,
        timeout: Duration,
    },
    /// A background task ended before it was asked to.
    #[error("{0} stopped unexpectedly")]
    Stopped(&'static str),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
