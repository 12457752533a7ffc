//! The Kubernetes-compatible, multi-tenant API server.
//!
//! **Architecture Invariant:** only this crate serves HTTP. It decodes requests, authenticates,
//! authorizes, applies flow control and renders answers; what a request *does* is the
//! `controlplane` crate's (the write pipeline, admission, subresources, tenancy, CRDs).
//! Storage and the registry speak in keys and objects; errors become a Kubernetes `Status` in
//! [`response::error`].

pub mod authn;
pub mod authz;
pub mod codec;
pub mod connect;
pub mod discovery;
pub mod distribution;
pub mod flow;
pub mod handlers;
pub mod health;
pub mod impersonate;
pub mod kubelet;
pub mod local;
pub mod metrics;
pub mod metrics_api;
pub mod negotiate;
pub mod oidc;
pub mod openapi;
pub mod response;
pub mod reviews;
pub mod route;
pub mod serve;
pub mod server;
pub mod table;
pub mod tokens;
pub mod web;

pub use server::ApiServer;

// The control plane's modules this crate's handlers call.
pub(crate) use controlplane::{auth, jwt, tenancy};
