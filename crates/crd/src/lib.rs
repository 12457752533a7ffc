//! CustomResourceDefinitions served the way kube-apiserver does (spec: apiserver.md §5).
//!
//! Pure functions the API server calls for every CRD of a logical cluster:
//!
//! - **CRDs**: [`default_crd`], [`validate_crd`], [`validate_crd_update`] (upstream
//!   `apiextensions/validation`, same paths and messages), [`CrdStrategy`] for the
//!   `customresourcedefinitions` resource itself, [`established_status`] (accepted names,
//!   `NamesAccepted`/`Established`, stored versions), and the deletion helpers
//!   ([`CLEANUP_FINALIZER`], [`mark_terminating`], [`set_terminating`]).
//! - **Serving**: [`resource_defs`] gives one `registry::ResourceDef` per served version,
//!   with a [`CustomStrategy`] that validates custom resources against their structural
//!   schema (kube-openapi semantics and messages, ratcheting), their CEL rules, list-type
//!   uniqueness and embedded resources, and applies defaults; [`served_versions`] gives the
//!   same with each strategy as a [`CustomStrategy`], whose [`CustomStrategy::read`] turns a
//!   stored object into the requested version (every object leaving the server must pass
//!   through it: writes are stored at the storage version); [`convert()`] rewrites `apiVersion`
//!   (conversion `None`); [`apply_defaults`] defaults an object.
//! - **OpenAPI**: [`openapi_documents`] for a cluster's CRDs.
//!
//! Nothing here does I/O or keeps state across calls (compiled schemas live in the
//! strategies); the caller owns watching CRDs and registering what this crate builds.
//!
//! **Architecture Invariant:** conversion is `None` only. A CRD with `strategy: Webhook` is
//! accepted and recorded, but its versions are served as if the strategy were `None`.

pub mod cel;
pub mod convert;
mod crd_defaults;
mod crd_strategy;
pub mod defaulting;
mod documents;
pub mod embedded;
pub mod fieldpath;
pub mod formats;
mod gofmt;
pub mod listtype;
mod numbers;
pub mod openapi_errors;
pub mod scale;
pub mod schema;
pub mod serve;
pub mod spec;
pub mod status;
mod strategy;
pub mod validation;
pub mod values;

use serde_json::Value;

pub use convert::convert;
pub use crd_defaults::default_crd;
pub use crd_strategy::{CrdStrategy, crd_warnings, should_serve};
pub use documents::openapi_documents;
pub use serve::{resource_defs, served_versions, structural_schema, webhook_conversion};
pub use status::{
    CLEANUP_FINALIZER, ESTABLISHED, NAMES_ACCEPTED, TERMINATING, established_status,
    established_status_at, is_established, mark_terminating, names_in_group,
    remove_cleanup_finalizer, set_terminating,
};
pub use strategy::{CustomStrategy, Validated};
pub use validation::{validate_crd, validate_crd_update};

/// Applies the defaults of a version's `openAPIV3Schema` to `obj` (absent fields, and `null`s
/// that are not nullable), after dropping `null`s that have neither a default nor
/// `nullable`. Compiles the schema on every call: hold a [`CustomStrategy`] (its
/// `Strategy::default`) to default many objects.
pub fn apply_defaults(obj: &mut Value, schema_json: &Value) {
    let node = schema::Node::compile(schema_json);
    defaulting::prune_nulls(obj, Some(&node));
    defaulting::default(obj, &node);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn apply_defaults_fills_nested_defaults_where_parents_exist() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "size": {"type": "string", "default": "M"},
            "keep": {"type": "string"},
            "limits": {"type": "object", "properties": {"cpu": {"type": "string", "default": "1"}}}}}}});
        let mut obj = json!({"spec": {"keep": null, "size": null}});
        apply_defaults(&mut obj, &schema);
        assert_eq!(obj, json!({"spec": {"size": "M"}}));
        let mut none = json!({"metadata": {"name": "x"}});
        apply_defaults(&mut none, &schema);
        assert_eq!(none, json!({"metadata": {"name": "x"}}));
    }
}
