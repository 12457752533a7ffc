//! The built-in controllers (kube-controller-manager's), on the `runtime` crate.
//!
//! Controllers reach clusters only through the Kubernetes API, with `runtime`'s clients,
//! informers, work queues and leader election: in process over the API server's in-memory
//! transport (which the `matryoshka` binary hands in), out of process over HTTPS — the same
//! code. One instance of each controller serves every logical cluster: informers list and
//! watch `/clusters/*/...` (objects keyed by cluster, namespace and name), work queues hold
//! (cluster, object) keys, and writes go to the object's own cluster. Nothing is kept per
//! cluster: watches, tasks and timers are a fixed number per controller, memory grows with
//! objects.
//!
//! - [`manager`]: starting everything ([`run`]);
//! - controllers: [`namespace`], [`gc`], [`serviceaccount`], [`rootca`], [`replicaset`],
//!   [`deployment`], [`job`], [`ttl`] (TTL after finished), [`cronjob`], [`statefulset`],
//!   [`daemonset`]; shared by the workload controllers: [`claim`] (adoption), [`history`]
//!   (ControllerRevisions), [`expectations`], [`podutil`];
//!   cluster policy ([`policy`]): [`resourcequota`], [`nodelifecycle`], [`disruption`],
//!   [`volumebinding`].
//!   services: [`endpoints`] (EndpointSlices and Endpoints).

pub mod claim;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpoints;
pub mod expectations;
pub mod gc;
pub mod history;
pub mod job;
pub mod manager;
pub mod namespace;
pub mod nodelifecycle;
pub mod podutil;
pub mod policy;
pub mod replicaset;
pub mod resourcequota;
pub mod rootca;
pub mod serviceaccount;
pub mod statefulset;
pub mod ttl;
pub mod volumebinding;

pub use manager::{Options, run};
pub use runtime::error::{Error, Result};
