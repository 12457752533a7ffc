//! The Kubernetes-compatible, multi-tenant API server.
//!
//! **Architecture Invariant:** only this crate speaks HTTP. Storage and the registry speak in
//! keys and objects; errors become a Kubernetes `Status` in [`response::error`].

pub mod admission;
pub mod aggregation;
pub mod apiservices;
pub mod auth;
pub mod authn;
pub mod authz;
pub mod bootstrap;
pub mod clusters;
pub mod codec;
pub mod connect;
pub mod conversion;
pub mod crds;
pub mod discovery;
pub mod distribution;
pub mod fields;
pub mod flow;
pub mod handlers;
pub mod health;
pub mod impersonate;
pub mod jwt;
pub mod kubelet;
pub mod local;
pub mod metrics;
pub mod metrics_api;
pub mod negotiate;
pub mod openapi;
pub mod patching;
pub mod response;
pub mod reviews;
pub mod route;
pub mod serve;
pub mod server;
pub mod services;
pub mod table;
pub mod tenancy;
pub mod tokens;

pub use server::ApiServer;
