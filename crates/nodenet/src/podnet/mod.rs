//! The pod network across machines.
//!
//! - [`netns`]: named network namespaces, and running a node's code inside one;
//! - [`machine`]: a [`Fabric`] (the machines' LAN, a bridge on `10.99.0.0/16`) and its
//!   [`Machine`]s (a namespace with an uplink each) — what the process-machine provider
//!   builds and tears down;
//! - [`cni`]: the node's CNI conflist (bridge + host-local on the podCIDR + portmap +
//!   loopback) and a small CNI runtime for namespaces wired without containerd;
//! - [`routes`]: host-gw routes to every other node's podCIDR, from Nodes;
//! - [`masq`]: pod egress masquerade and the node's forwarding sysctls.

pub mod cni;
pub mod machine;
pub mod masq;
pub mod netns;
pub mod routes;

pub use machine::{Fabric, FabricConfig, Machine};
pub use netns::{Netns, NetnsTask};
pub use routes::Routes;
