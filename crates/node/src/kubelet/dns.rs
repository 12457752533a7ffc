//! The files that tell a container who and where it is: `/etc/resolv.conf` per `dnsPolicy`
//! and `dnsConfig`, `/etc/hosts`, `/etc/hostname`, and the per-instance termination message
//! file.
//!
//! Upstream: `pkg/kubelet/network/dns/dns.go` (`GetPodDNS`: the policy table, host fallbacks,
//! merging and limits), `kubelet_pods.go` (`GeneratePodHostNameAndDomain`, the managed hosts
//! file, `makeMounts`), `kuberuntime_container.go` (termination message file), and containerd's
//! rendering of a sandbox's DNS config and hostname. The files live in the pod's directory;
//! the agent bind-mounts them (the runtime then skips its own for those paths) and passes the
//! same DNS config and hostname in `PodSandboxConfig`.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use k8s_cri::v1::{DnsConfig, Mount};
use k8s_openapi::api::core::v1::{Container, Pod};

use crate::kubelet::env::fieldpath::go_quote;

pub mod hosts;

pub use hosts::{
    hostname_and_domain, kernel_hostname, managed_hosts_file, node_hosts_file,
    should_mount_hosts_file,
};

/// The kubelet's DNS settings.
#[derive(Debug, Clone, Default)]
pub struct DnsSettings {
    /// `clusterDNS`: the cluster's DNS server IPs.
    pub cluster_dns: Vec<String>,
    /// `clusterDomain`, e.g. `cluster.local`.
    pub cluster_domain: String,
    /// `resolvConf`: the node file pods with `Default` DNS start from; `None` is the empty
    /// setting (no host file: the local resolver, search `.`).
    pub resolv_conf: Option<PathBuf>,
    /// The node's IPs (the local resolver's family without a host file).
    pub node_ips: Vec<String>,
}

/// An event the DNS configuration asks the agent to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsEvent {
    /// `MissingClusterDNS` or `DNSConfigForming` (warnings on the pod).
    pub reason: &'static str,
    pub message: String,
}

/// A pod's DNS configuration and the warnings forming it produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodDns {
    pub config: DnsConfig,
    pub events: Vec<DnsEvent>,
}

/// Nameservers a resolv.conf may list (glibc's `MAXNS`).
pub const MAX_NAMESERVERS: usize = 3;
/// Search domains a pod may have (ExpandedDNSConfig).
pub const MAX_SEARCH_PATHS: usize = 32;
/// Characters of the search line (ExpandedDNSConfig).
pub const MAX_SEARCH_CHARS: usize = 2048;
/// Longest search domain kept (glibc aborts on longer ones).
const MAX_DOMAIN_LEN: usize = 253;

/// Parses a resolv.conf (upstream `parseResolvConf`): nameservers accumulate, the last
/// `search` and `options` lines win, `#` comments are skipped; search domains lose a trailing
/// dot and `.` is dropped. A `nameserver` line without an address is an error.
pub fn parse_resolv_conf(text: &str) -> Result<DnsConfig, String> {
    let mut c = DnsConfig::default();
    let mut errs = Vec::new();
    for line in text.split('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = trimmed.split_whitespace().collect();
        match fields.first() {
            Some(&"nameserver") => match fields.get(1) {
                Some(ip) => c.servers.push(ip.to_string()),
                None => errs.push("nameserver list is empty ".to_string()),
            },
            Some(&"search") => {
                c.searches = fields[1..]
                    .iter()
                    .filter(|s| **s != ".")
                    .map(|s| s.strip_suffix('.').unwrap_or(s).to_string())
                    .collect();
            }
            Some(&"options") => c.options = fields[1..].iter().map(|s| s.to_string()).collect(),
            _ => {}
        }
    }
    if errs.is_empty() {
        Ok(c)
    } else {
        Err(crate::kubelet::volumes::payload::aggregate(&errs))
    }
}

/// The node's DNS configuration per `settings.resolv_conf` (empty when unset).
pub fn load_host_dns(settings: &DnsSettings) -> Result<DnsConfig, String> {
    match &settings.resolv_conf {
        None => Ok(DnsConfig::default()),
        Some(p) => {
            let text = fs::read_to_string(p).map_err(|e| format!("open {}: {e}", p.display()))?;
            parse_resolv_conf(&text)
        }
    }
}

/// The pod's DNS configuration (upstream `GetPodDNS`), from the node's parsed resolv.conf.
pub fn pod_dns_config(pod: &Pod, settings: &DnsSettings, host: &DnsConfig) -> PodDns {
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let policy = spec
        .and_then(|s| s.dns_policy.as_deref())
        .unwrap_or("ClusterFirst");
    let mut events = Vec::new();
    let mut cfg = host.clone();

    enum Kind {
        Cluster,
        Host,
        None,
    }
    let kind = match policy {
        "None" => Kind::None,
        "ClusterFirstWithHostNet" => Kind::Cluster,
        "ClusterFirst" if !host_network => Kind::Cluster,
        "ClusterFirst" | "Default" => Kind::Host,
        // Rejected by API validation; upstream falls back to ClusterFirst.
        _ => Kind::Cluster,
    };
    let mut use_host = matches!(kind, Kind::Host);
    match kind {
        Kind::None => cfg = DnsConfig::default(),
        Kind::Cluster if !settings.cluster_dns.is_empty() => {
            cfg.servers = settings.cluster_dns.clone();
            cfg.searches = cluster_searches(&host.searches, pod, &settings.cluster_domain);
            cfg.options = vec!["ndots:5".to_string()];
        }
        Kind::Cluster => {
            let msg = "kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.";
            events.push(DnsEvent {
                reason: "MissingClusterDNS",
                message: format!("pod: {}. {msg}", go_quote(&format_pod(pod))),
            });
            use_host = true;
        }
        Kind::Host => {}
    }
    if use_host && settings.resolv_conf.is_none() {
        for ip in &settings.node_ips {
            cfg.servers
                .push(if ip.contains(':') { "::1" } else { "127.0.0.1" }.to_string());
        }
        if cfg.servers.is_empty() {
            cfg.servers.push("127.0.0.1".to_string());
        }
        cfg.searches = vec![".".to_string()];
    }
    if let Some(dc) = spec.and_then(|s| s.dns_config.as_ref()) {
        cfg.servers.extend(dc.nameservers.iter().flatten().cloned());
        cfg.servers = dedup(&cfg.servers);
        cfg.searches.extend(dc.searches.iter().flatten().cloned());
        cfg.searches = dedup(&cfg.searches);
        cfg.options = merge_options(&cfg.options, dc.options.iter().flatten());
    }
    fit_limits(&mut cfg, &mut events);
    PodDns {
        config: cfg,
        events,
    }
}

fn format_pod(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

/// `<ns>.svc.<zone> svc.<zone> <zone>` then the node's search domains, without duplicates.
fn cluster_searches(host: &[String], pod: &Pod, zone: &str) -> Vec<String> {
    if zone.is_empty() {
        return host.to_vec();
    }
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut all = vec![
        format!("{ns}.svc.{zone}"),
        format!("svc.{zone}"),
        zone.to_string(),
    ];
    all.extend(host.iter().cloned());
    dedup(&all)
}

fn dedup(v: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(v.len());
    for s in v {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

/// Options merged by name, the pod's winning (upstream `mergeDNSOptions`; first-seen order).
fn merge_options<'a>(
    existing: &[String],
    pod: impl Iterator<Item = &'a k8s_openapi::api::core::v1::PodDNSConfigOption>,
) -> Vec<String> {
    let mut merged: Vec<(String, String)> = Vec::new();
    let mut set = |name: String, value: String| match merged.iter_mut().find(|(n, _)| *n == name) {
        Some(e) => e.1 = value,
        None => merged.push((name, value)),
    };
    for o in existing {
        match o.split_once(':') {
            Some((n, v)) => set(n.to_string(), v.to_string()),
            None => set(o.clone(), String::new()),
        }
    }
    for o in pod {
        set(
            o.name.clone().unwrap_or_default(),
            o.value.clone().unwrap_or_default(),
        );
    }
    merged
        .into_iter()
        .map(|(n, v)| if v.is_empty() { n } else { format!("{n}:{v}") })
        .collect()
}

/// Trims nameservers and search domains to the resolver's limits, with upstream's
/// `DNSConfigForming` warnings.
fn fit_limits(cfg: &mut DnsConfig, events: &mut Vec<DnsEvent>) {
    if cfg.servers.len() > MAX_NAMESERVERS {
        cfg.servers.truncate(MAX_NAMESERVERS);
        events.push(DnsEvent {
            reason: "DNSConfigForming",
            message: format!(
                "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: {}",
                cfg.servers.join(" ")
            ),
        });
    }
    let mut exceeded = false;
    if cfg.searches.len() > MAX_SEARCH_PATHS {
        cfg.searches.truncate(MAX_SEARCH_PATHS);
        exceeded = true;
    }
    let before = cfg.searches.len();
    cfg.searches.retain(|s| s.len() <= MAX_DOMAIN_LEN);
    exceeded |= cfg.searches.len() != before;
    let line_len = cfg.searches.join(" ").len();
    if line_len > MAX_SEARCH_CHARS {
        let mut cut_len = 0;
        let mut cut = 0;
        for s in cfg.searches.iter().rev() {
            cut_len += s.len() + 1;
            cut += 1;
            if line_len - cut_len.min(line_len) <= MAX_SEARCH_CHARS {
                break;
            }
        }
        let keep = cfg.searches.len() - cut;
        cfg.searches.truncate(keep);
        exceeded = true;
    }
    if exceeded {
        events.push(DnsEvent {
            reason: "DNSConfigForming",
            message: format!(
                "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
                cfg.searches.join(" ")
            ),
        });
    }
}

/// resolv.conf as containerd writes it for a sandbox: `search`, `nameserver` lines,
/// `options`; an empty configuration means a copy of the node's file.
pub fn resolv_conf(cfg: &DnsConfig, node_file: &[u8]) -> Vec<u8> {
    let mut out = String::new();
    if !cfg.searches.is_empty() {
        out.push_str(&format!("search {}\n", cfg.searches.join(" ")));
    }
    for s in &cfg.servers {
        out.push_str(&format!("nameserver {s}\n"));
    }
    if !cfg.options.is_empty() {
        out.push_str(&format!("options {}\n", cfg.options.join(" ")));
    }
    if out.is_empty() {
        node_file.to_vec()
    } else {
        out.into_bytes()
    }
}

/// What writing a pod's files needs.
#[derive(Debug, Clone)]
pub struct PodFiles<'a> {
    pub pod: &'a Pod,
    /// `<root>/pods/<uid>`.
    pub pod_dir: &'a Path,
    pub pod_ips: &'a [String],
    pub hostname: &'a str,
    pub domain: &'a str,
    /// The node's hosts file (`/etc/hosts`), read for host-network pods.
    pub node_hosts: &'a Path,
}

/// Writes `<pod dir>/etc-hosts` (0644) and returns its mount for `container`, unless the
/// pod should not get one or the container mounts something at `/etc/hosts` itself.
pub fn hosts_mount(files: &PodFiles<'_>, container: &Container) -> io::Result<Option<Mount>> {
    if !should_mount_hosts_file(files.pod, files.pod_ips) {
        return Ok(None);
    }
    if container
        .volume_mounts
        .iter()
        .flatten()
        .any(|m| m.mount_path == "/etc/hosts")
    {
        return Ok(None);
    }
    let spec = files.pod.spec.as_ref();
    let aliases = spec
        .and_then(|s| s.host_aliases.as_deref())
        .unwrap_or_default();
    let content = if spec.and_then(|s| s.host_network) == Some(true) {
        node_hosts_file(&fs::read(files.node_hosts)?, aliases)
    } else {
        managed_hosts_file(files.pod_ips, files.hostname, files.domain, aliases)
    };
    let path = files.pod_dir.join("etc-hosts");
    write_file(&path, &content, 0o644)?;
    Ok(Some(Mount {
        container_path: "/etc/hosts".into(),
        host_path: path.display().to_string(),
        readonly: false,
        selinux_relabel: true,
        ..Default::default()
    }))
}

/// Writes `<pod dir>/etc-resolv.conf` and `<pod dir>/etc-hostname` (0644, as containerd
/// writes them for a sandbox) and returns their mounts, read-only when the container's root
/// file system is.
pub fn resolv_and_hostname_mounts(
    pod_dir: &Path,
    dns: &DnsConfig,
    node_resolv_conf: &[u8],
    kernel_hostname: &str,
    read_only_rootfs: bool,
) -> io::Result<Vec<Mount>> {
    let resolv = pod_dir.join("etc-resolv.conf");
    write_file(&resolv, &resolv_conf(dns, node_resolv_conf), 0o644)?;
    let hostname = pod_dir.join("etc-hostname");
    write_file(&hostname, format!("{kernel_hostname}\n").as_bytes(), 0o644)?;
    Ok([("/etc/resolv.conf", resolv), ("/etc/hostname", hostname)]
        .into_iter()
        .map(|(c, h)| Mount {
            container_path: c.into(),
            host_path: h.display().to_string(),
            readonly: read_only_rootfs,
            ..Default::default()
        })
        .collect())
}

/// A fresh termination message file for one instance of `container`:
/// `<pod dir>/containers/<name>/<8 hex digits>`, mode 0666, mounted at
/// `terminationMessagePath`. Returns the mount and the file the agent reads on exit; `None`
/// when the container has no termination message path.
pub fn termination_message_mount(
    pod_dir: &Path,
    container: &Container,
) -> io::Result<Option<(Mount, PathBuf)>> {
    let Some(target) = container
        .termination_message_path
        .as_deref()
        .filter(|p| !p.is_empty())
    else {
        return Ok(None);
    };
    let dir = pod_dir.join("containers").join(&container.name);
    if !dir.is_dir() {
        fs::create_dir_all(&dir)?;
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o750))?;
    }
    let path = loop {
        let p = dir.join(format!("{:08x}", rand::random::<u32>()));
        if !p.exists() {
            break p;
        }
    };
    fs::File::create(&path)?;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o666))?;
    let mount = Mount {
        container_path: target.to_string(),
        host_path: path.display().to_string(),
        ..Default::default()
    };
    Ok(Some((mount, path)))
}

fn write_file(path: &Path, content: &[u8], mode: u32) -> io::Result<()> {
    fs::write(path, content)?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

#[cfg(test)]
#[path = "dns_tests.rs"]
mod tests;
