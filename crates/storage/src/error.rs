//! The closed set of storage errors.
//!
//! Every backend maps its own failures onto these variants, and the API server translates them
//! into Kubernetes `Status` objects in exactly one place. Nothing else may escape a backend.

use crate::{KeyValue, Revision};

/// Errors of the [`Storage`](crate::Storage) trait. The set is closed: callers match on it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The key does not exist (get of a required key, update or delete of a missing key).
    #[error("key not found")]
    NotFound,
    /// `create` found the key already present.
    #[error("key already exists")]
    AlreadyExists,
    /// A precondition on the key's mod revision failed. `current` is the value the key holds now
    /// (`None` if it was deleted meanwhile) so callers can retry without another read.
    #[error("revision conflict (current revision {revision})")]
    Conflict {
        current: Option<Box<KeyValue>>,
        /// The store's current revision when the conflict was detected.
        revision: Revision,
    },
    /// The requested revision is older than the oldest one kept: the history was compacted.
    /// The API turns this into 410 Expired; clients re-list.
    #[error("required revision {requested} has been compacted (oldest kept: {compacted})")]
    Compacted {
        requested: Revision,
        compacted: Revision,
    },
    /// The requested revision is newer than the store's current revision.
    #[error("revision {requested} is in the future (current: {current})")]
    FutureRevision {
        requested: Revision,
        current: Revision,
    },
    /// A continue token that is malformed, was issued for another prefix, or names an impossible
    /// revision.
    #[error("invalid continue token: {0}")]
    InvalidContinue(String),
    /// An argument no backend can accept: an empty key, a value over the size limit.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A watcher fell too far behind and was terminated; the client must re-list or re-watch
    /// from its last revision.
    #[error("watch terminated: the watcher fell behind by more than {0} events")]
    WatcherTooSlow(usize),
    /// The backend cannot serve: I/O failure, a closed store, an unreachable etcd.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
}

/// `Result` with the storage [`enum@Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
