//! Pod egress to the node's network: pods' addresses exist only inside the cluster, so
//! traffic from a pod to anything outside the cluster's pod network leaves the node under
//! the node's address (flannel's and kube-router's masquerade rule), in table
//! `ip matryoshka-podnet`. Pod-to-pod traffic keeps its source address, which
//! NetworkPolicy needs. The CNI bridge must therefore run with `ipMasq: false`.
//!
//! [`prepare`] also sets what a node routing for its pods needs of its kernel: IP
//! forwarding, and netfilter for bridged traffic (`bridge-nf-call-iptables`), without which
//! traffic between two pods on one bridge would bypass Service DNAT replies and
//! NetworkPolicy.

use ipnet::Ipv4Net;

use crate::error::Result;
use crate::exec;
use crate::nft::{BaseChain, Family, Nft, Transaction, priority};

/// The table of the pod network's own rules.
pub const TABLE: &str = "matryoshka-podnet";

/// Sets the node's forwarding sysctls (in the calling thread's namespace).
pub fn prepare() -> Result<()> {
    exec::sysctl("net.ipv4.ip_forward", "1")?;
    exec::sysctl("net.bridge.bridge-nf-call-iptables", "1")?;
    Ok(())
}

/// The transaction (re)writing the masquerade rule for pods in `cluster_cidr`.
pub fn transaction(cluster_cidr: Ipv4Net) -> Transaction {
    let mut tx = Transaction::new(Family::Ip, TABLE);
    tx.add_table(None);
    tx.delete_table();
    tx.add_table(Some("pod network of matryoshka nodes"));
    tx.add_chain(
        "postrouting",
        Some(BaseChain {
            kind: "nat",
            hook: "postrouting",
            priority: priority::SRCNAT,
        }),
    );
    tx.add_rule(
        "postrouting",
        &format!(
            "ip saddr {cluster_cidr} ip daddr != {cluster_cidr} fib daddr type != {{ multicast, broadcast }} masquerade comment \"pod egress\""
        ),
    );
    tx
}

/// Programs the masquerade rule.
pub async fn install(nft: &Nft, cluster_cidr: Ipv4Net) -> Result<()> {
    nft.run(&transaction(cluster_cidr)).await
}

/// Removes the masquerade rule.
pub async fn uninstall(nft: &Nft) -> Result<()> {
    nft.delete_table(Family::Ip, TABLE).await
}
