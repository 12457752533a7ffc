//! Kubernetes API machinery without I/O.
//!
//! The vocabulary every other crate speaks: [`status::ApiError`] (what a client sees when a
//! request fails), [`field`] errors with paths, and — in the modules below — schemas,
//! [`labels`] and [`fields`] selectors, resource [`quantity`] values, name [`validation`],
//! [`objectmeta`] validation, patches and codecs. Nothing here touches a socket, a file or a
//! clock (or a random source) it was not given.

pub mod admission;
pub mod apply;
pub mod authn_config;
pub mod builtin;
pub mod cluster;
pub mod cron;
pub mod depth;
pub mod field;
pub mod fields;
pub mod gofmt;
pub mod labels;
pub mod meta;
pub mod objectmeta;
pub mod patch;
pub mod quantity;
pub mod quota;
pub mod schema;
pub mod status;
pub mod time;
pub mod user;
pub mod validation;

pub use field::{ErrorList, FieldError, Path};
pub use status::{ApiError, Reason};
