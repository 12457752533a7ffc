//! In-process validating admission hooks: the contract between the API server, which runs them
//! on every write of a resource, and the components that own a resource (the platform for its
//! CRDs), which implement them without knowing anything of the server or HTTP.
//!
//! A [`Validator`] plays the part of a validating admission webhook: it is handed the new
//! object (and the old one on update) with a read-only view of the objects the server holds
//! ([`Objects`]); its refusal is the answer the client sees. A [`Mutator`] plays the part of a
//! mutating webhook on create: it may replace the object before it is validated and stored.

use serde_json::Value;

use crate::status::ApiError;
use crate::user::UserInfo;

/// The operation being admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
}

/// What a validator is asked about (the `AdmissionRequest` of a webhook).
pub struct Request<'a> {
    /// The logical cluster the write is addressed to.
    pub cluster: &'a str,
    pub operation: Operation,
    /// The object's namespace (empty when cluster-scoped).
    pub namespace: &'a str,
    /// The object as it would be stored.
    pub object: &'a Value,
    /// The stored object, on update.
    pub old: Option<&'a Value>,
    pub user: &'a UserInfo,
    pub dry_run: bool,
}

/// A read-only view of the objects the server holds (its watch cache).
pub trait Objects {
    /// One object.
    fn get(
        &self,
        group: &str,
        plural: &str,
        cluster: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Value>;
    /// Every object of a resource in a cluster's namespace (all namespaces when empty).
    fn list(&self, group: &str, plural: &str, cluster: &str, namespace: &str) -> Vec<Value>;
}

/// A validating admission hook for one resource.
pub trait Validator: Send + Sync {
    /// `Ok` admits the write; an error is returned to the client as it is.
    fn validate(&self, req: &Request<'_>, objects: &dyn Objects) -> Result<(), ApiError>;
}

/// A mutating admission hook for creates of one resource (a mutating webhook's part): it runs
/// after the object is decoded and before validation, and may replace the object.
pub trait Mutator: Send + Sync {
    /// The object to store instead of `req.object` (`None`: unchanged); an error refuses the
    /// create and is returned to the client as it is.
    fn mutate(&self, req: &Request<'_>, objects: &dyn Objects) -> Result<Option<Value>, ApiError>;
}
