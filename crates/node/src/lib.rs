//! The node agent: virtual (KWOK-style) nodes that join a cluster through the Kubernetes API
//! only, and the sizing tables that decide what a node offers.
//!
//! - [`sizing`]: the instance-type catalogue and the kubelet reservation and eviction rules
//!   that give a node its capacity and allocatable resources (pure; platform validation
//!   reuses [`sizing::validate`]).
//! - [`agent`]: [`VirtualNodes`], the virtual nodes of one cluster in this process: Node
//!   registration, Lease and status heartbeats, and one shared pod watch that drives every
//!   pod bound to them through [`pod::lifecycle`].
//! - [`run`]: entry points for `matryoshka up --virtual-nodes` and `matryoshka node --virtual`.
//!
//! **Architecture Invariant:** the agent reaches a cluster only through a `kube::Client`; it
//! depends on nothing of the API server, so the same code runs in process or against any
//! Kubernetes cluster.

pub mod agent;
pub mod bootstrap;
pub mod config;
pub mod error;
pub mod kubelet;
pub mod net;
pub mod object;
pub mod pod;
pub mod run;
pub mod sizing;

pub use agent::{VirtualNode, VirtualNodes};
pub use config::{FIELD_MANAGER, Network, NodeTemplate, Options, Timing};
pub use error::{Error, Result};
pub use run::{CliArgs, NodeGroup, run_cli, run_virtual_nodes};
