//! The scheduler: kube-scheduler semantics for every logical cluster at once.
//!
//! One instance watches pods, nodes and what filters need across all clusters
//! (`/clusters/*/...`, objects named by their `matryoshka.dev/cluster` annotation), keeps a
//! per-cluster cache of node usage, and binds pending pods of the default scheduler through
//! `POST .../pods/<name>/binding` in their own cluster. It reaches clusters only through the
//! Kubernetes API (kube-rs); in process over the API server's in-memory transport.
//!
//! - plumbing: [`client`] (clients per cluster), [`informers`] (cross-cluster watches),
//!   [`binder`] (writes), [`events`] (event recorder), [`scheduler`] (tasks and the loop);
//! - state: [`podinfo`], [`nodeinfo`], [`resource`], [`selector`], [`cache`], [`queue`];
//! - decisions: [`framework`] (statuses and messages), [`plugins`] (filters and scores),
//!   [`schedule`] (one cycle), [`preemption`].
//!
//! Entry points: [`run`] (any `ClusterClients`; in process, what `matryoshka up` spawns),
//! or [`Scheduler::start`] (no leader election).

pub mod binder;
pub mod cache;
pub mod client;
pub mod error;
pub mod events;
pub mod framework;
pub mod informers;
pub mod nodeinfo;
pub mod plugins;
pub mod podinfo;
pub mod preemption;
pub mod queue;
pub mod resource;
pub mod schedule;
pub mod scheduler;
pub use runtime::selector;
#[cfg(test)]
mod testutil;

pub use client::{ClientFactory, ClusterClients, InMemory};
pub use error::{Error, Result};
pub use scheduler::{Options, Scheduler, Stats, run};
