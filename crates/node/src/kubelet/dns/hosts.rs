//! Who the pod is: its hostname and domain, the kernel hostname, and the `/etc/hosts` content
//! (upstream `GeneratePodHostNameAndDomain`, `GetNodenameForKernel`,
//! `managedHostsFileContent`, `nodeHostsFileContent`).

use apimachinery::validation::is_dns1123_label;
use k8s_openapi::api::core::v1::{HostAlias, Pod};

use crate::kubelet::env::fieldpath::go_quote;

/// The pod's hostname and domain (upstream `GeneratePodHostNameAndDomain`): `spec.hostname` or
/// the pod name, at most 63 characters (trailing `-` and `.` trimmed after cutting); the
/// domain `<subdomain>.<ns>.svc.<zone>` when `spec.subdomain` is set.
pub fn hostname_and_domain(pod: &Pod, cluster_domain: &str) -> Result<(String, String), String> {
    let spec = pod.spec.as_ref();
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let mut hostname = pod_name.clone();
    if let Some(h) = spec
        .and_then(|s| s.hostname.as_deref())
        .filter(|h| !h.is_empty())
    {
        let errs = is_dns1123_label(h);
        if !errs.is_empty() {
            return Err(format!(
                "pod Hostname {} is not a valid DNS label: {}",
                go_quote(h),
                errs.join(";")
            ));
        }
        hostname = h.to_string();
    }
    if hostname.len() > 63 {
        let cut = hostname.get(..63).unwrap_or(&hostname);
        let trimmed = cut.trim_end_matches(['-', '.']);
        if trimmed.is_empty() {
            return Err(format!(
                "hostname for pod {} was invalid: {}",
                go_quote(&pod_name),
                go_quote(&hostname)
            ));
        }
        hostname = trimmed.to_string();
    }
    let mut domain = String::new();
    if let Some(sub) = spec
        .and_then(|s| s.subdomain.as_deref())
        .filter(|s| !s.is_empty())
    {
        let errs = is_dns1123_label(sub);
        if !errs.is_empty() {
            return Err(format!(
                "pod Subdomain {} is not a valid DNS label: {}",
                go_quote(sub),
                errs.join(";")
            ));
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        domain = format!("{sub}.{ns}.svc.{cluster_domain}");
    }
    Ok((hostname, domain))
}

/// The hostname the kernel is given (upstream `GetNodenameForKernel`): the FQDN with
/// `setHostnameAsFQDN` and a domain, at most 64 characters.
pub fn kernel_hostname(hostname: &str, domain: &str, set_fqdn: bool) -> Result<String, String> {
    if !set_fqdn || domain.is_empty() {
        return Ok(hostname.to_string());
    }
    let fqdn = format!("{hostname}.{domain}");
    if fqdn.len() > 64 {
        return Err(format!(
            "failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long (64 characters is the max, {} characters requested)",
            fqdn.len()
        ));
    }
    Ok(fqdn)
}

const MANAGED_HEADER: &str = "# Kubernetes-managed hosts file.\n";
const HOST_NETWORK_HEADER: &str = "# Kubernetes-managed hosts file (host network).\n";

/// `/etc/hosts` of a pod on the pod network (upstream `managedHostsFileContent`).
pub fn managed_hosts_file(
    pod_ips: &[String],
    hostname: &str,
    domain: &str,
    aliases: &[HostAlias],
) -> Vec<u8> {
    let mut out = String::from(MANAGED_HEADER);
    out.push_str("127.0.0.1\tlocalhost\n");
    out.push_str("::1\tlocalhost ip6-localhost ip6-loopback\n");
    out.push_str("fe00::0\tip6-localnet\n");
    out.push_str("fe00::0\tip6-mcastprefix\n");
    out.push_str("fe00::1\tip6-allnodes\n");
    out.push_str("fe00::2\tip6-allrouters\n");
    for ip in pod_ips {
        if domain.is_empty() {
            out.push_str(&format!("{ip}\t{hostname}\n"));
        } else {
            out.push_str(&format!("{ip}\t{hostname}.{domain}\t{hostname}\n"));
        }
    }
    out.push_str(&alias_entries(aliases));
    out.into_bytes()
}

/// `/etc/hosts` of a host-network pod: the node's file under a header, then the aliases
/// (upstream `nodeHostsFileContent`).
pub fn node_hosts_file(node_file: &[u8], aliases: &[HostAlias]) -> Vec<u8> {
    let mut out = HOST_NETWORK_HEADER.as_bytes().to_vec();
    out.extend_from_slice(node_file);
    out.extend_from_slice(alias_entries(aliases).as_bytes());
    out
}

/// A blank line, a comment, then one line per alias IP with its names tab-separated.
fn alias_entries(aliases: &[HostAlias]) -> String {
    if aliases.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n# Entries added by HostAliases.\n");
    for a in aliases {
        let names = a.hostnames.as_deref().unwrap_or_default().join("\t");
        out.push_str(&format!("{}\t{names}\n", a.ip));
    }
    out
}

/// Whether the pod's containers get the managed `/etc/hosts` (upstream
/// `shouldMountHostsFile`): once the pod has an IP, or on the host network.
pub fn should_mount_hosts_file(pod: &Pod, pod_ips: &[String]) -> bool {
    !pod_ips.is_empty() || pod.spec.as_ref().and_then(|s| s.host_network) == Some(true)
}
