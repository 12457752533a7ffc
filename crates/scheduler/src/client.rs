//! Kubernetes clients for one logical cluster or for all of them: the project's
//! client runtime (`runtime::client`), used as is.
//!
//! A cluster is the path prefix `/clusters/<name>` (none for the root cluster) and the system
//! identity lists and watches every cluster at once under `/clusters/*`; `ClusterClients`
//! keeps a bounded number of per-cluster clients, so tasks stay independent of how many
//! clusters exist.

pub use runtime::client::{
    ALL_CLUSTERS_PREFIX, CLUSTER_ANNOTATION, ClientFactory, ClusterClients, InMemory, Kubeconfig,
    ROOT, cluster_prefix,
};
