//! Apply conflicts and the 409 the server answers with.
//!
//! A conflict names the other manager and the field, and renders exactly as upstream:
//! `Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1:
//! .spec.replicas`, or for several, one `conflicts with ...:` block per manager (sorted by
//! manager identifier) listing `- <path>` lines.

use super::managed::{ManagerId, Operation};
use super::path::FieldPath;
use crate::status::{ApiError, Cause, Reason};

/// One field another manager owns with a different value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub manager: String,
    pub operation: Operation,
    /// The apiVersion the other manager used (printed for `Update` managers only).
    pub api_version: String,
    pub subresource: String,
    pub path: FieldPath,
}

impl Conflict {
    pub(crate) fn new(id: &ManagerId, api_version: &str, path: FieldPath) -> Self {
        Conflict {
            manager: id.manager.clone(),
            operation: id.operation,
            api_version: api_version.into(),
            subresource: id.subresource.clone(),
            path,
        }
    }

    fn id(&self) -> ManagerId {
        ManagerId {
            manager: self.manager.clone(),
            operation: self.operation,
            api_version: if self.operation == Operation::Update {
                self.api_version.clone()
            } else {
                String::new()
            },
            subresource: self.subresource.clone(),
        }
    }

    /// Upstream `printManager`: `"name"`, `"name" with subresource "status"`, plus
    /// ` using <apiVersion>` for `Update` managers.
    pub fn manager_description(&self) -> String {
        let mut s = crate::gofmt::quote(&self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(
                " with subresource {}",
                crate::gofmt::quote(&self.subresource)
            ));
        }
        if self.operation == Operation::Update {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

/// Why an apply was refused: other managers own fields the applier would change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct ApplyConflict {
    /// Sorted by manager identifier, then path.
    pub conflicts: Vec<Conflict>,
}

impl ApplyConflict {
    pub(crate) fn new(mut conflicts: Vec<Conflict>) -> Self {
        conflicts.sort_by(|a, b| {
            a.id()
                .identifier()
                .cmp(&b.id().identifier())
                .then_with(|| a.path.cmp(&b.path))
        });
        ApplyConflict { conflicts }
    }

    /// The Status message, worded as upstream.
    pub fn message(&self) -> String {
        if let [only] = self.conflicts.as_slice() {
            return format!(
                "Apply failed with 1 conflict: conflict with {}: {}",
                only.manager_description(),
                only.path
            );
        }
        let mut lines: Vec<String> = Vec::new();
        let mut last: Option<ManagerId> = None;
        for c in &self.conflicts {
            if last.as_ref() != Some(&c.id()) {
                lines.push(format!("conflicts with {}:", c.manager_description()));
                last = Some(c.id());
            }
            lines.push(format!("- {}", c.path));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            self.conflicts.len(),
            lines.join("\n")
        )
    }

    /// The 409 `Conflict` with one `FieldManagerConflict` cause per field.
    pub fn to_api_error(&self) -> ApiError {
        let mut e = ApiError::new(409, Reason::Conflict, self.message());
        e.causes = self
            .conflicts
            .iter()
            .map(|c| Cause {
                reason: "FieldManagerConflict".into(),
                message: format!("conflict with {}", c.manager_description()),
                field: c.path.to_string(),
            })
            .collect();
        e
    }
}

/// Why an apply failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// Other managers own fields with different values and `force` was not set (409).
    #[error(transparent)]
    Conflict(#[from] ApplyConflict),
    /// The request is wrong: the applied configuration carries `metadata.managedFields`, or
    /// names another apiVersion (400, upstream's wording).
    #[error("{0}")]
    BadRequest(String),
    /// The configuration or live object does not fit the schema (a list item without its key,
    /// duplicate keys), or the managed fields cannot be read. Upstream answers 500 with
    /// this text.
    #[error("{0}")]
    Invalid(String),
}

impl ApplyError {
    /// The `Status` the API server answers with.
    pub fn to_api_error(&self) -> ApiError {
        match self {
            ApplyError::Conflict(c) => c.to_api_error(),
            ApplyError::BadRequest(m) => ApiError::bad_request(m.clone()),
            ApplyError::Invalid(m) => ApiError::new(500, Reason::InternalError, m.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managers_print_with_subresource_and_version_like_upstream() {
        let c = Conflict::new(
            &ManagerId::update("kubelet", "v1", Some("status")),
            "v1",
            FieldPath::fields(&["status", "phase"]),
        );
        assert_eq!(
            c.manager_description(),
            "\"kubelet\" with subresource \"status\" using v1"
        );
        let err = ApplyConflict::new(vec![c]).to_api_error();
        assert_eq!(err.code, 409);
        assert_eq!(err.causes[0].field, ".status.phase");
        assert!(err.name.is_none() && err.kind.is_none());
    }
}
