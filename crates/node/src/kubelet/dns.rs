//! A pod's name resolution, as upstream's kubelet sets it up: the sandbox's DNS
//! configuration per `dnsPolicy` and `dnsConfig` (containerd writes `resolv.conf` from it),
//! the pod's hostname and domain, and the managed `/etc/hosts` the agent writes and mounts
//! into every container.
//!
//! Owned by the "podconfig" work; this is the interface the pod workers call, with
//! placeholders until the full version lands.

use std::net::IpAddr;
use std::path::PathBuf;

use k8s_cri::v1::DnsConfig;
use k8s_openapi::api::core::v1::Pod;

use super::context::PodContext;

/// The node's DNS settings (kubelet `clusterDNS`, `clusterDomain`, `resolvConf`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDns {
    /// The cluster DNS servers; empty when the cluster has none (ClusterFirst pods then use
    /// the host's configuration, with a `MissingClusterDNS` event).
    pub servers: Vec<IpAddr>,
    /// The cluster domain (`cluster.local`).
    pub domain: String,
    /// The host's resolver configuration (`/etc/resolv.conf`).
    pub host_resolv_conf: PathBuf,
    /// The host's hosts file, the base of host-network pods' `/etc/hosts`.
    pub host_hosts_file: PathBuf,
}

impl Default for ClusterDns {
    fn default() -> Self {
        ClusterDns {
            servers: Vec::new(),
            domain: "cluster.local".to_string(),
            host_resolv_conf: PathBuf::from("/etc/resolv.conf"),
            host_hosts_file: PathBuf::from("/etc/hosts"),
        }
    }
}

/// The sandbox's DNS configuration and what to warn about.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodDns {
    pub config: DnsConfig,
    /// Each becomes a Warning event on the pod with its reason (`DNSConfigForming`,
    /// `MissingClusterDNS`) and message.
    pub warnings: Vec<(String, String)>,
}

/// Why the pod's DNS cannot be set up (the sandbox is not created; event
/// `FailedCreatePodSandBox`).
#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    #[error("failed to read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The DNS configuration of the pod's sandbox.
pub fn sandbox_dns(pod: &Pod, cluster: &ClusterDns) -> Result<PodDns, DnsError> {
    // Placeholder: ClusterFirst with the cluster's servers, else the host's servers.
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let d = &cluster.domain;
    let host = std::fs::read_to_string(&cluster.host_resolv_conf).map_err(|e| DnsError::Read {
        path: cluster.host_resolv_conf.display().to_string(),
        source: e,
    })?;
    let host_servers: Vec<String> = host
        .lines()
        .filter_map(|l| l.trim().strip_prefix("nameserver"))
        .map(|s| s.trim().to_string())
        .collect();
    let config = if cluster.servers.is_empty() {
        DnsConfig {
            servers: host_servers,
            ..DnsConfig::default()
        }
    } else {
        DnsConfig {
            servers: cluster.servers.iter().map(|s| s.to_string()).collect(),
            searches: vec![format!("{ns}.svc.{d}"), format!("svc.{d}"), d.clone()],
            options: vec!["ndots:5".to_string()],
        }
    };
    Ok(PodDns {
        config,
        warnings: Vec::new(),
    })
}

/// The pod's hostname and, with `spec.subdomain`, its domain
/// (`<subdomain>.<ns>.svc.<cluster domain>`).
pub fn hostname_and_domain(pod: &Pod, cluster_domain: &str) -> (String, Option<String>) {
    let spec = pod.spec.as_ref();
    let mut host = spec
        .and_then(|s| s.hostname.clone())
        .filter(|h| !h.is_empty())
        .or_else(|| pod.metadata.name.clone())
        .unwrap_or_default();
    host.truncate(63);
    let domain = spec
        .and_then(|s| s.subdomain.as_deref())
        .filter(|s| !s.is_empty())
        .map(|sub| {
            let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
            format!("{sub}.{ns}.svc.{cluster_domain}")
        });
    (host, domain)
}

/// The content of the pod's `/etc/hosts`: the managed file of a pod with its own network
/// (`# Kubernetes-managed hosts file.`, localhost lines, the pod's IPs with its names, host
/// aliases), or the node's file behind a header for a host-network pod.
pub fn hosts_file(ctx: &PodContext<'_>, cluster: &ClusterDns) -> Result<String, DnsError> {
    let _ = cluster;
    // Placeholder: the managed file without host aliases.
    let (host, domain) = hostname_and_domain(ctx.pod, ctx.cluster_domain);
    let mut s = String::from("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n");
    s.push_str("::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\n");
    s.push_str("fe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n");
    for ip in ctx.pod_ips {
        match &domain {
            Some(d) => s.push_str(&format!("{ip}\t{host}.{d}\t{host}\n")),
            None => s.push_str(&format!("{ip}\t{host}\n")),
        }
    }
    Ok(s)
}
