//! A node's network: what kube-proxy, a CNI's NetworkPolicy agent, flannel's host-gw
//! backend and NodeLocal DNS do on a Kubernetes node, as one library the node agent runs.
//!
//! - [`proxy`]: Services as kube-proxy's nftables mode programs them (table
//!   `ip kube-proxy`, upstream's chain names, incremental syncs).
//! - [`netpol`]: NetworkPolicy in table `ip matryoshka-netpol`.
//! - [`podnet`]: machines (network namespaces with an uplink on a shared bridge), the node's
//!   CNI conflist, routes between nodes' podCIDRs, pod egress masquerade.
//! - [`node`]: [`NodeNetwork`], which runs all of them and the node's cluster DNS server
//!   ([`dns`]) for one node, and removes every rule when it stops.
//! - [`nft`], [`exec`], [`watch`]: nftables transactions, the tools, kube-rs watches.
//!
//! The entry points:
//!
//! - **node agent**: [`NodeNetwork::start`]`(client, `[`NodeNetworkConfig`]`)` inside the
//!   node's network namespace, after the Node is registered with its podCIDR and
//!   InternalIP; [`NodeNetwork::shutdown`] when the agent stops. Pods must be wired with
//!   [`podnet::cni::conflist`] (bridge with `ipMasq: false`, `hairpinMode: true`).
//! - **process-machine provider**: [`podnet::Fabric::create`] once, then
//!   [`podnet::Fabric::add_machine`] per machine (its namespace, uplink, address, default
//!   route); run the agent with [`podnet::Netns::command`]; drop or `delete` to tear down.
//!
//! **Architecture Invariant:** the crate reaches the cluster only through a `kube::Client`
//! of one cluster, and the kernel only through `nft`, `ip`, `conntrack` and `/proc/sys` of
//! the namespace it runs in. Each component owns its table and touches no other.

pub mod error;
pub mod exec;
pub mod netpol;
pub mod nft;
pub mod node;
pub mod podnet;
pub mod proxy;
pub mod watch;

pub use error::{Error, Result};
pub use node::{NodeNetwork, NodeNetworkConfig};
