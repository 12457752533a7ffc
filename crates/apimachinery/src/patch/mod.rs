//! Patches: RFC 6902 JSON patch, RFC 7386 merge patch and Kubernetes strategic merge patch.
//!
//! The API server applies a PATCH body to the stored object (canonical JSON) with one of these,
//! chosen by the request's Content-Type. Server-side apply (`application/apply-patch+yaml`) is
//! not a patch in this sense and lives in [`crate::apply`]. Errors carry upstream's wording and
//! know the HTTP answer the server gives for them ([`PatchError::to_api_error`]).

mod json_patch;
mod merge_patch;
mod strategic;
mod strategic_list;
#[cfg(test)]
pub(crate) mod test_schemas;

pub use json_patch::{MAX_JSON_PATCH_OPERATIONS, json_patch};
pub use merge_patch::merge_patch;
pub use strategic::strategic_merge_patch;

use crate::status::ApiError;

/// Why a patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The patch document itself is malformed (not a list of operations, a bad directive
    /// format...). Upstream answers 400 BadRequest with this message.
    #[error("{0}")]
    BadRequest(String),
    /// The patch is well formed but cannot be applied to this object: a failed `test`, a path
    /// that does not exist, lists of lists. Upstream answers 422 with a generic message and this
    /// text as an `UnexpectedServerResponse` cause.
    #[error("{0}")]
    Unprocessable(String),
    /// A strategic merge patch that does not fit the object (a list item without its merge key,
    /// mismatched types). Upstream returns the bare error, which reaches the client as a 500.
    #[error("{0}")]
    Internal(String),
    /// More operations than upstream accepts in one JSON patch (413).
    #[error("The allowed maximum operations in a JSON patch is {max}, got {got}")]
    TooManyOperations { max: usize, got: usize },
    /// `copy` operations whose copied values together exceed upstream's limit (413): without
    /// it, a few kilobytes of patch double an object into gigabytes.
    #[error(
        "Unable to copy, the accumulated size increase of copy is {size}, exceeding the limit {limit}"
    )]
    CopyTooLarge { size: usize, limit: usize },
}

impl PatchError {
    /// The `Status` the API server answers with, worded as upstream does.
    pub fn to_api_error(&self) -> ApiError {
        match self {
            PatchError::BadRequest(m) => ApiError::bad_request(m.clone()),
            PatchError::Unprocessable(m) => ApiError::new(
                422,
                crate::status::Reason::Invalid,
                "the server rejected our request due to an error in our request",
            )
            .with_cause("UnexpectedServerResponse", m, ""),
            // Upstream answers these with 500; they are the client's error (a patch that
            // does not fit the object), so the answer is a 400 with the same message.
            PatchError::Internal(m) => ApiError::bad_request(m.clone()),
            PatchError::TooManyOperations { .. } | PatchError::CopyTooLarge { .. } => {
                ApiError::request_entity_too_large(self.to_string())
            }
        }
    }
}
