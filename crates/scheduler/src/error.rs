//! The scheduler's errors.
//!
//! Scheduling decisions never fail with an error: a pod that fits nowhere is a result (a
//! [`FitError`](crate::framework::FitError)), not an `Error`. Errors are about reaching the API
//! server: building clients and the requests the scheduler writes (bindings, pod status,
//! events, preemption).

/// What went wrong talking to a cluster.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The controller runtime (clients, leader election) failed.
    #[error(transparent)]
    Runtime(#[from] runtime::Error),
    /// The API server answered with an error or could not be reached.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// A request body could not be encoded.
    #[error("failed to encode a request: {0}")]
    Encode(#[from] serde_json::Error),
}

impl Error {
    /// The HTTP status of an API error (`None` for transport and local errors).
    pub fn code(&self) -> Option<u16> {
        match self {
            Error::Kube(kube::Error::Api(s))
            | Error::Runtime(runtime::Error::Kube(kube::Error::Api(s))) => Some(s.code),
            _ => None,
        }
    }

    /// Whether the object the request was about no longer exists.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    /// Whether the request conflicted with the object's state (already bound, changed).
    pub fn is_conflict(&self) -> bool {
        self.code() == Some(409)
    }
}

/// Results of the scheduler's API calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;
