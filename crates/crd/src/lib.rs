//! CustomResourceDefinitions served the way kube-apiserver does (spec: apiserver.md §5).
//! (Crate documentation is completed below as modules land.)

pub mod cel;
pub mod defaulting;
pub mod embedded;
pub mod fieldpath;
pub mod formats;
mod gofmt;
pub mod listtype;
pub mod openapi_errors;
pub mod schema;
pub mod values;
