//! The client side of Matryoshka: what every component that reaches clusters through the
//! Kubernetes API shares — controllers, the scheduler, node agents, the platform.
//!
//! - [`client`]: a `kube::Client` per logical cluster ([`client::ClusterClients`]), made by a
//!   [`client::ClientFactory`]: over an in-process tower service ([`client::InMemory`]; the
//!   `matryoshka` binary hands in the API server's in-memory transport) or over HTTPS from a
//!   kubeconfig ([`client::Kubeconfig`]), against Matryoshka or any Kubernetes cluster.
//! - [`informer`]: one cross-cluster watch per resource feeding an indexed [`store`] keyed by
//!   cluster, namespace and name; [`shared`]: shared informers and the shutdown signal.
//! - [`lenient`]: watches that skip (and report) an object they cannot decode instead of
//!   failing their list for every cluster.
//! - [`queue`]: the deduplicating work queue with back-off and its workers.
//! - [`leader`]: Lease leader election.
//! - [`events`]: the event recorder (aggregation, spam filter, never blocking its caller).
//! - [`selector`]: label selectors, node selectors and affinity, and tolerations, parsed once
//!   and matched as upstream's component helpers do (scheduler, DaemonSet, node lifecycle).
//! - [`envvars`]: the Service link variables a kubelet injects into containers.
//! - [`resource`]: [`json_resource!`] declares a CRD-backed kind (typed metadata, JSON spec
//!   and status).
//! - [`error`]: the errors of all of these.
//!
//! **Architecture Invariant:** this crate (and everything built on it) reaches a cluster only
//! through the Kubernetes API; it depends on nothing of the API server, so the same code runs
//! in process or against any cluster. `crates/matryoshka/tests/layering.rs` checks it.

pub mod client;
pub mod envvars;
pub mod error;
pub mod events;
pub mod informer;
pub mod leader;
pub mod lenient;
pub mod queue;
pub mod renewing;
pub mod resource;
pub mod selector;
pub mod shared;
pub mod store;

pub use error::{Error, Result};
