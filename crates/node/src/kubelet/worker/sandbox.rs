//! A pod's CRI sandbox configuration, as upstream's `generatePodSandboxConfig` builds it:
//! metadata with the attempt, hostname, the log directory, DNS, host ports, the pod's
//! labels and annotations, and the Linux settings with the pod's cgroup parent.

use k8s_cri::v1 as cri;
use k8s_openapi::api::core::v1::Pod;

use crate::kubelet::agent::Agent;
use crate::kubelet::{dns, labels, resources, security};

/// The sandbox configuration of `pod` for `attempt`, and DNS warnings (reason, message).
pub fn config(
    agent: &Agent,
    pod: &Pod,
    attempt: u32,
) -> Result<(cri::PodSandboxConfig, Vec<(String, String)>), String> {
    let ns = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let name = pod.metadata.name.clone().unwrap_or_default();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let host_network = spec.host_network.unwrap_or(false);
    let host = dns::load_host_dns(&agent.dns)?;
    let dns = dns::pod_dns_config(pod, &agent.dns, &host);
    let (hostname, domain) = dns::hostname_and_domain(pod, &agent.config.dns.domain)?;
    let fqdn = spec.set_hostname_as_fqdn.unwrap_or(false);
    let hostname = dns::kernel_hostname(&hostname, &domain, fqdn)?;
    let mut port_mappings = Vec::new();
    for c in &spec.containers {
        for p in c.ports.iter().flatten() {
            let Some(host_port) = p.host_port.filter(|h| *h > 0) else {
                continue;
            };
            let protocol = match p.protocol.as_deref() {
                Some("UDP") => cri::Protocol::Udp,
                Some("SCTP") => cri::Protocol::Sctp,
                _ => cri::Protocol::Tcp,
            };
            port_mappings.push(cri::PortMapping {
                protocol: protocol as i32,
                container_port: p.container_port,
                host_port,
                host_ip: p.host_ip.clone().unwrap_or_default(),
            });
        }
    }
    let parent = resources::pod_cgroup_parent(&agent.config.cgroup_root, pod);
    let linux = security::sandbox_linux_config(pod, &parent).map_err(|e| e.to_string())?;
    let config = cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.clone(),
            uid: uid.clone(),
            namespace: ns.clone(),
            attempt,
        }),
        hostname: if host_network {
            String::new()
        } else {
            hostname
        },
        log_directory: agent
            .layout
            .pod_log_dir(&ns, &name, &uid)
            .display()
            .to_string(),
        dns_config: Some(dns.config),
        port_mappings,
        labels: labels::sandbox_labels(pod),
        annotations: labels::sandbox_annotations(pod),
        linux: Some(linux),
        ..cri::PodSandboxConfig::default()
    };
    let warnings = dns
        .events
        .into_iter()
        .map(|e| (e.reason.to_string(), e.message))
        .collect();
    Ok((config, warnings))
}
