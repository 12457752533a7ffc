//! The node agent's CRI mode: a kubelet-equivalent that runs real containers through a CRI
//! runtime (containerd), joining any cluster as a real node.
//!
//! The parts, in the order a pod meets them:
//!
//! - [`layout`]: where everything lives under the data directory (containerd's root and state,
//!   CNI configuration, pod directories, container logs).
//! - `containerd` supervisor: when nothing answers at the CRI endpoint, the agent starts its own
//!   `containerd` with a generated configuration and stops it on exit.
//! - `cri`: the CRI `runtime.v1` client (tonic over a unix socket) with typed errors.
//! - `cni`: the node's network configuration (bridge + host-local on the node's podCIDR +
//!   portmap + loopback), written as a network add-on would.
//! - pod workers: a watch of the node's pods and one worker per pod that syncs what the API
//!   asks for with what the runtime runs (sandbox, init containers, sidecars, restarts with
//!   back-off, probes, hooks, graceful termination), and writes the status as the kubelet
//!   computes it.
//! - node status: registration, capacity and allocatable, conditions, node info, images,
//!   the Lease.
//! - What a container sees is built by [`env`], [`volumes`], [`dns`] and [`security`]
//!   (environment, mounts, `/etc/hosts` and `resolv.conf`, security context).
//! - [`api`]: what the kubelet's HTTP server (logs, exec, attach, port-forward, stats) asks
//!   of the agent, as the [`api::KubeletApi`] trait.
//!
//! **Stopping the agent leaves pods running**, as stopping a kubelet does: containers belong
//! to their shims, which outlive containerd; the next start adopts them (identity from the
//! CRI labels the kubelet sets). Draining a node is deleting its pods first; tests stop the
//! agent with [`Teardown::RemovePods`], which removes every sandbox before it exits.

pub mod api;
pub mod backoff;
pub mod cni;
pub mod containerd;
pub mod context;
pub mod cri;
pub mod dns;
pub mod env;
pub mod events;
pub mod images;
pub mod labels;
pub mod layout;
pub mod probes;
pub mod resources;
pub mod runtime_state;
pub mod security;
pub mod stats;
pub mod status;
pub mod volumes;

pub use api::KubeletApi;
pub use context::PodContext;
pub use layout::Layout;

/// What stopping the agent does to the pods it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Teardown {
    /// Leave them running (a kubelet restart); the next agent on the same data directory
    /// adopts them.
    #[default]
    KeepPods,
    /// Stop and remove every pod sandbox first (a machine being retired, and tests).
    RemovePods,
}
