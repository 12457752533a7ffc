//! The controller runtime on kube-rs and the built-in controllers.
//!
//! Controllers reach clusters only through the Kubernetes API. In process they use the API
//! server's in-memory transport; out of process the same code runs over HTTPS. One instance of
//! each controller serves every logical cluster: informers list and watch `/clusters/*/...`
//! (objects keyed by cluster, namespace and name), work queues hold (cluster, object) keys, and
//! writes go to the object's own cluster. Nothing is kept per cluster: watches, tasks and timers
//! are a fixed number per controller, memory grows with objects.
//!
//! - [`manager`]: starting everything ([`manager::run`]) over the `runtime` crate's clients,
//!   informers, work queues and leader election.
//! - controllers: [`namespace`], [`gc`], [`serviceaccount`], [`rootca`], [`replicaset`],
//!   [`deployment`], [`job`], [`ttl`] (TTL after finished), [`cronjob`], [`statefulset`],
//!   [`daemonset`]; shared by the workload controllers: [`claim`] (adoption), [`history`]
//!   (ControllerRevisions), [`clock`] (injectable time);
//!   cluster policy ([`policy`]): [`resourcequota`], [`nodelifecycle`], [`disruption`],
//!   [`volumebinding`].
//!   services: [`endpoints`] (EndpointSlices and Endpoints).

pub mod certificates;
pub mod claim;
pub mod clock;
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

pub use runtime::{Error, Result};

pub use manager::{Options, run};
