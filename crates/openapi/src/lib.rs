//! Schemas and OpenAPI documents.
//!
//! - [`builtin_schema`]: the structural schema of every built-in kind, built once from
//!   k8s-openapi's generated schemas plus the project's own tables of patch strategies, list
//!   types and map types (the `tables` module).
//! - [`compile_structural`]: the structural schema of a custom resource from its CRD's
//!   `openAPIV3Schema`.
//! - [`unknown_fields`] and [`prune`]: strict field validation and CRD pruning.
//! - [`type_mismatch`]: JSON types of a built-in object against its kind, as Go's decoder.
//! - [`DocumentSet`]: the OpenAPI v3 documents served at `/openapi/v3`, built-in ones shared by
//!   every logical cluster ([`builtin_documents`]) and custom resource ones
//!   ([`custom_resource_document`]) added per cluster; [`v2`] derives `/openapi/v2` (JSON and
//!   gnostic protobuf) from them.
//!
//! Nothing here does I/O; everything built-in is built once per process on first use.

mod builtin;
mod definitions;
mod document;
mod kinds;
mod media;
mod naming;
mod params;
mod paths;
mod set;
mod structural;
mod tables;
mod types;
mod unknown;
pub mod v2;

pub use builtin::builtin_schema;
pub use document::{
    CustomResource, Document, custom_definition_name, custom_resource_document, group_version_path,
};
pub use kinds::CUSTOM_RESOURCE_DEFINITIONS;
pub use set::{DocumentSet, V2Document, builtin_documents};
pub use structural::compile_structural;
pub use types::{TypeMismatch, type_mismatch};
pub use unknown::{prune, unknown_fields};
