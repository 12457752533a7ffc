//! The platform's own OCI registry, without HTTP: a content store under a directory
//! ([`store`]), the distribution API's semantics as plain functions and types ([`api`]),
//! manifests and their media types ([`manifest`]), names and references ([`name`]), image
//! archives to import ([`archive`]) and the containerd configuration that makes the registry
//! the mirror of every registry on a node ([`hosts`]).
//!
//! **Architecture Invariant:** nothing here listens on a socket or parses HTTP; the
//! `apiserver` crate serves `/v2/` by routing each request with [`api::Request::route`],
//! authorising its [`api::Action`] and copying [`api::Response`] onto the wire.

pub mod api;
#[cfg(test)]
mod api_tests;
pub mod archive;
pub mod digest;
pub mod error;
pub mod hosts;
pub mod import;
pub mod layer;
pub mod manifest;
pub mod name;
pub mod store;

pub use api::{Action, Registry, Request, Response};
pub use digest::Digest;
pub use error::{Error, ErrorCode};
pub use name::ImageRef;
