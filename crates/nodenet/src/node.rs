//! [`NodeNetwork`]: everything a real node does to its network, started and stopped as one.
//!
//! Started by the node agent once its Node is registered, inside the node's network
//! namespace (a process machine's agent runs there; in-process tests use
//! [`crate::podnet::Netns::spawn`]):
//!
//! 1. the kernel settings a router of pods needs, and pod egress masquerade
//!    ([`crate::podnet::masq`]);
//! 2. routes to every other node's podCIDR ([`crate::podnet::routes`]), when an uplink is
//!    given;
//! 3. Services ([`crate::proxy`]);
//! 4. NetworkPolicy ([`crate::netpol`]), the node's DNS server always reachable;
//! 5. cluster DNS: a [`dns::ClusterDns`] on the node's address, published behind the
//!    `kube-system/kube-dns` Service (`internalTrafficPolicy: Local`) once synced, so the
//!    proxier DNATs the cluster DNS address to this node's server.
//!
//! [`NodeNetwork::shutdown`] withdraws the DNS endpoint and removes every rule and route
//! it made. A dropped `NodeNetwork` that was not shut down deletes its tables
//! synchronously as a last resort.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use ipnet::{IpNet, Ipv4Net};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;

use crate::error::{Error, Result};
use crate::netpol::{NetpolConfig, NetworkPolicies};
use crate::nft::{Family, Nft};
use crate::podnet::{Routes, masq, routes};
use crate::proxy::{self, IpFamily, Proxier, ProxyConfig};

/// The DNS port.
pub const DNS_PORT: u16 = 53;

/// A node network's settings.
#[derive(Debug, Clone)]
pub struct NodeNetworkConfig {
    /// The Node's name (it must exist).
    pub node_name: String,
    /// The node's address; `None`: the Node's InternalIP.
    pub node_ip: Option<IpAddr>,
    /// Every pod of the cluster is in this network (upstream `--cluster-cidr`).
    pub cluster_cidr: Ipv4Net,
    pub service_cidrs: Vec<IpNet>,
    /// The device routes to other nodes leave by (`eth0`); `None`: no routes controller
    /// (a single node, or routes made by someone else).
    pub uplink: Option<String>,
    /// The DNS server's settings (`listen` is replaced by the node's address, port 53);
    /// `None`: no DNS server.
    pub dns: Option<dns::Config>,
    pub network_policy: bool,
    /// The proxier's `minSyncPeriod`. 50 ms by default, not upstream's 1 s: a partial sync
    /// costs a few milliseconds here (one small `nft` transaction, no listing of the
    /// table), so a lone change is programmed at once and a stream of changes is still
    /// batched, at most 20 syncs a second (see BENCHMARKS.md).
    pub min_sync_period: Duration,
    /// How long [`NodeNetwork::start`] waits for every part's first sync.
    pub sync_timeout: Duration,
    pub nft: Nft,
}

impl NodeNetworkConfig {
    /// Settings for `node_name` with pods in `cluster_cidr`: routes via `eth0`, DNS with
    /// forwarding to the node's resolv.conf, NetworkPolicy on.
    pub fn new(node_name: &str, cluster_cidr: Ipv4Net) -> Self {
        NodeNetworkConfig {
            node_name: node_name.to_string(),
            node_ip: None,
            cluster_cidr,
            service_cidrs: Vec::new(),
            uplink: Some("eth0".into()),
            dns: Some(dns::Config::default()),
            network_policy: true,
            min_sync_period: Duration::from_millis(50),
            sync_timeout: Duration::from_secs(60),
            nft: Nft::default(),
        }
    }
}

/// A node's running network.
pub struct NodeNetwork {
    client: kube::Client,
    node_name: String,
    node_ip: IpAddr,
    nft: Nft,
    routes: Option<Routes>,
    proxier: Option<Proxier>,
    policies: Option<NetworkPolicies>,
    dns: Option<dns::ClusterDns>,
    shut_down: bool,
}

/// Every table the node network makes, by family.
pub const TABLES: [(Family, &str); 4] = [
    (Family::Ip, proxy::rules::TABLE),
    (Family::Ip6, proxy::rules::TABLE),
    (Family::Ip, crate::netpol::render::TABLE),
    (Family::Ip, masq::TABLE),
];

impl NodeNetwork {
    /// Starts the node's network and waits until each part has synced once.
    pub async fn start(client: kube::Client, config: NodeNetworkConfig) -> Result<NodeNetwork> {
        let node = Api::<Node>::all(client.clone())
            .get_opt(&config.node_name)
            .await?
            .ok_or_else(|| Error::Config(format!("node {} does not exist", config.node_name)))?;
        let node_ip = match config.node_ip {
            Some(ip) => ip,
            None => routes::internal_ip(&node).map(IpAddr::V4).ok_or_else(|| {
                Error::Config(format!("node {} has no InternalIP", config.node_name))
            })?,
        };
        let uid = node.metadata.uid.clone().unwrap_or_default();
        masq::prepare()?;
        masq::install(&config.nft, config.cluster_cidr).await?;
        let mut net = NodeNetwork {
            client: client.clone(),
            node_name: config.node_name.clone(),
            node_ip,
            nft: config.nft.clone(),
            routes: None,
            proxier: None,
            policies: None,
            dns: None,
            shut_down: false,
        };
        match net.start_parts(&config, &uid).await {
            Ok(()) => Ok(net),
            Err(e) => {
                if let Err(e2) = net.stop().await {
                    tracing::warn!(error = %e2, "cleaning up after a failed start");
                }
                Err(e)
            }
        }
    }

    async fn start_parts(&mut self, config: &NodeNetworkConfig, uid: &str) -> Result<()> {
        let client = &self.client;
        let timeout = config.sync_timeout;
        if let Some(uplink) = &config.uplink {
            let r = Routes::start(client.clone(), &config.node_name, uplink).await?;
            self.routes = Some(r);
        }
        let mut pc = ProxyConfig::new(
            &config.node_name,
            vec![self.node_ip],
            vec![IpNet::V4(config.cluster_cidr)],
        );
        pc.service_cidrs = config.service_cidrs.clone();
        pc.min_sync_period = config.min_sync_period;
        pc.nft = config.nft.clone();
        pc.families = vec![if self.node_ip.is_ipv4() {
            IpFamily::V4
        } else {
            IpFamily::V6
        }];
        self.proxier = Some(Proxier::start(client.clone(), pc));
        let dns_addr = SocketAddr::new(self.node_ip, DNS_PORT);
        if config.network_policy {
            let dns = if config.dns.is_some() {
                vec![dns_addr]
            } else {
                Vec::new()
            };
            let mut nc = NetpolConfig::new(&config.node_name, dns);
            nc.nft = config.nft.clone();
            self.policies = Some(NetworkPolicies::start(client.clone(), nc));
        }
        if let Some(r) = &self.routes {
            r.synced(timeout).await?;
        }
        if let Some(p) = &self.proxier {
            p.synced(timeout).await?;
        }
        if let Some(p) = &self.policies {
            p.synced(timeout).await?;
        }
        if let Some(dc) = &config.dns {
            let mut dc = dc.clone();
            dc.listen = vec![dns_addr];
            let server = dns::ClusterDns::start(client.clone(), dc).await?;
            server.synced(timeout).await?;
            self.dns = Some(server);
            dns::kube_dns::publish_node(client, &config.node_name, uid, self.node_ip, DNS_PORT)
                .await?;
        }
        Ok(())
    }

    /// The node's address (where its DNS server and NodePorts answer).
    pub fn node_ip(&self) -> IpAddr {
        self.node_ip
    }

    pub fn proxier(&self) -> Option<&Proxier> {
        self.proxier.as_ref()
    }

    pub fn policies(&self) -> Option<&NetworkPolicies> {
        self.policies.as_ref()
    }

    pub fn dns(&self) -> Option<&dns::ClusterDns> {
        self.dns.as_ref()
    }

    async fn stop(&mut self) -> Result<()> {
        self.shut_down = true;
        let mut first: Option<Error> = None;
        let mut keep = |r: Result<()>| {
            if let Err(e) = r {
                tracing::warn!(error = %e, "stopping the node network");
                first.get_or_insert(e);
            }
        };
        if let Some(d) = self.dns.take() {
            keep(
                dns::kube_dns::withdraw_node(&self.client, &self.node_name)
                    .await
                    .map_err(Error::from),
            );
            d.shutdown().await;
        }
        if let Some(p) = self.policies.take() {
            keep(p.shutdown().await);
        }
        if let Some(p) = self.proxier.take() {
            keep(p.shutdown().await);
        }
        if let Some(r) = self.routes.take() {
            keep(r.shutdown().await);
        }
        keep(masq::uninstall(&self.nft).await);
        first.map_or(Ok(()), Err)
    }

    /// Withdraws the DNS endpoint, stops every part and removes all their rules and routes.
    pub async fn shutdown(mut self) -> Result<()> {
        self.stop().await
    }
}

impl std::fmt::Debug for NodeNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeNetwork")
            .field("node_name", &self.node_name)
            .field("node_ip", &self.node_ip)
            .finish_non_exhaustive()
    }
}

impl Drop for NodeNetwork {
    fn drop(&mut self) {
        if self.shut_down {
            return;
        }
        let mut script = String::new();
        for (family, table) in TABLES {
            let f = family.as_str();
            script.push_str(&format!(
                "add table {f} {table}\ndelete table {f} {table}\n"
            ));
        }
        let child = std::process::Command::new("nft")
            .args(["-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if let Ok(mut c) = child {
            if let Some(mut stdin) = c.stdin.take() {
                use std::io::Write;
                let _ = stdin.write_all(script.as_bytes());
            }
            let _ = c.wait();
        }
    }
}
