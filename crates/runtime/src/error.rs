//! The errors of the controller runtime and the controllers.

/// What can go wrong while reconciling or running controllers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the Kubernetes API failed.
    #[error("kubernetes API request failed: {0}")]
    Kube(#[from] kube::Error),
    /// A client could not be built.
    #[error("invalid client configuration: {0}")]
    Config(String),
    /// An object could not be converted between its JSON and typed forms.
    #[error("failed to convert an object: {0}")]
    Convert(#[from] serde_json::Error),
    /// A reconcile found something it cannot act on yet; it is retried with backoff.
    #[error("{0}")]
    Retry(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The HTTP status code of an API error response, if this is one.
    pub fn code(&self) -> Option<u16> {
        match self {
            Error::Kube(kube::Error::Api(s)) => Some(s.code),
            _ => None,
        }
    }

    /// The API answered 404 Not Found.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    /// The API answered 409 Conflict (or AlreadyExists).
    pub fn is_conflict(&self) -> bool {
        self.code() == Some(409)
    }
}

/// `Ok(None)` for a 404, so "already gone" is not an error.
pub fn ignore_not_found<T>(r: Result<T, kube::Error>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(e.into()),
    }
}
