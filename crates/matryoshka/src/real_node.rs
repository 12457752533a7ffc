//! A real node as `matryoshka node --runtime cri` and `matryoshka up` run it: the CRI agent
//! (pods, the kubelet API), then — once the Node is registered with its address and
//! podCIDR — the node's network (`nodenet`: Services as kube-proxy's nftables mode programs
//! them, NetworkPolicy, the node's cluster DNS server behind `kube-system/kube-dns`, routes to
//! other nodes' pods, pod egress masquerade). Stopped in reverse order: the network's rules
//! and routes are removed, then the agent stops.

use std::net::IpAddr;

use anyhow::Context;
use node::kubelet::{Kubelet, KubeletConfig};
use nodenet::{NodeNetwork, NodeNetworkConfig};

/// The node's network, when the agent runs one.
#[derive(Debug, Clone)]
pub struct NetworkOptions {
    /// The device routes to other nodes' podCIDRs leave by; `None`: no routes (one node).
    pub uplink: Option<String>,
    /// The cluster DNS address (`kube-system/kube-dns`'s ClusterIP) pods are pointed at;
    /// the Service is created with it unless the cluster has one.
    pub cluster_dns_ip: IpAddr,
    /// Where the node's cluster DNS forwards names outside the cluster domain.
    pub dns_upstream: dns::Upstream,
}

/// Parses `--cluster-dns-upstream`: `resolv-conf` (the node's `/etc/resolv.conf`, as
/// CoreDNS's `forward . /etc/resolv.conf`), `none` (names outside the cluster are refused),
/// or a comma-separated list of `IP[:PORT]`.
pub fn parse_dns_upstream(s: &str) -> Result<dns::Upstream, String> {
    match s {
        "resolv-conf" => Ok(dns::Upstream::ResolvConf("/etc/resolv.conf".into())),
        "none" => Ok(dns::Upstream::Disabled),
        list => list
            .split(',')
            .map(|a| {
                let a = a.trim();
                a.parse::<std::net::SocketAddr>()
                    .or_else(|_| {
                        a.parse::<IpAddr>()
                            .map(|ip| std::net::SocketAddr::new(ip, 53))
                    })
                    .map_err(|_| format!("not resolv-conf, none or IP[:PORT]: {a:?}"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(dns::Upstream::Servers),
    }
}

/// The upstream convention for the cluster DNS address (kubeadm's `10.96.0.10`).
pub const DEFAULT_CLUSTER_DNS: &str = "10.96.0.10";

/// Runs a real node for the cluster `client` addresses until `shutdown` completes.
pub async fn run(
    client: kube::Client,
    mut config: KubeletConfig,
    network: Option<NetworkOptions>,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    if let Some(n) = &network {
        // The node network masquerades what leaves the cluster; the bridge must not rewrite
        // pod-to-pod traffic between nodes.
        config.cni_masquerade = false;
        let svc = dns::kube_dns::ensure_service(&client, n.cluster_dns_ip)
            .await
            .context("the kube-dns Service")?;
        if config.dns.servers.is_empty() {
            let ip = svc
                .spec
                .and_then(|s| s.cluster_ip)
                .and_then(|ip| ip.parse().ok())
                .unwrap_or(n.cluster_dns_ip);
            config.dns.servers = vec![ip];
        }
    }
    let node_name = config.node_name.clone();
    let node_ip = config
        .node_ip
        .unwrap_or_else(node::kubelet::machine::default_ip);
    let cluster_cidr: ipnet::Ipv4Net = config
        .cluster_cidr
        .to_string()
        .parse()
        .context("the cluster CIDR")?;
    let kubelet = Kubelet::start(client.clone(), config)
        .await
        .context("the node agent")?;
    let net = match network {
        Some(n) => {
            let mut nc = NodeNetworkConfig::new(&node_name, cluster_cidr);
            nc.node_ip = Some(node_ip);
            nc.uplink = n.uplink;
            if let Some(dc) = nc.dns.as_mut() {
                dc.upstream = n.dns_upstream;
            }
            match NodeNetwork::start(client.clone(), nc).await {
                Ok(net) => Some(net),
                Err(e) => {
                    kubelet.shutdown().await;
                    return Err(anyhow::anyhow!("the node network: {e}"));
                }
            }
        }
        None => None,
    };
    tracing::info!(node = %node_name, %node_ip, network = net.is_some(), "the real node is up");
    shutdown.await;
    if let Some(net) = net
        && let Err(e) = net.shutdown().await
    {
        tracing::warn!(error = %e, "stopping the node network");
    }
    kubelet.shutdown().await;
    Ok(())
}
