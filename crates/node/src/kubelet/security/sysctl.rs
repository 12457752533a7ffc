//! Sysctls: names normalised to dots, and the kubelet's admission of a pod's sysctls (upstream
//! `pkg/kubelet/sysctl`: the safe set, `allowedUnsafeSysctls` patterns, and the namespaces a
//! pod shares with the node).

use k8s_openapi::api::core::v1::Pod;

/// A sysctl name with `.` separators (`net/ipv4/ip_forward` → `net.ipv4.ip_forward`; a name
/// whose first separator is `/` has `.` and `/` swapped, as upstream).
pub fn dotted_sysctl_name(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(i) if name.as_bytes()[i] == b'/' => name
            .chars()
            .map(|c| match c {
                '.' => '/',
                '/' => '.',
                c => c,
            })
            .collect(),
        _ => name.to_string(),
    }
}

/// The sysctls a pod may set without the node allowing unsafe ones (upstream `SafeSysctlAllowlist`).
pub const SAFE_SYSCTLS: [&str; 12] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// A pod the kubelet refuses to run: the pod fails with this reason and `Pod was rejected: `
/// before the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct Rejection {
    pub reason: &'static str,
    pub message: String,
}

/// Which namespace isolates a sysctl (`ipc`, `net`), or none.
fn sysctl_namespace(name: &str) -> Option<&'static str> {
    if name.starts_with("kernel.shm")
        || name.starts_with("kernel.msg")
        || name == "kernel.sem"
        || name.starts_with("fs.mqueue.")
    {
        Some("ipc")
    } else if name.starts_with("net.") {
        Some("net")
    } else {
        None
    }
}

/// The kubelet's sysctl admission (upstream `patternAllowlist.Admit`): every sysctl must be
/// safe or allowed (`allowed_unsafe` entries ending in `*` are prefixes), and not of a
/// namespace the pod shares with the node.
pub fn admit_sysctls(pod: &Pod, allowed_unsafe: &[String]) -> Result<(), Rejection> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(());
    };
    let host_net = spec.host_network.unwrap_or(false);
    let host_ipc = spec.host_ipc.unwrap_or(false);
    for s in spec
        .security_context
        .as_ref()
        .and_then(|s| s.sysctls.as_ref())
        .into_iter()
        .flatten()
    {
        let name = dotted_sysctl_name(&s.name);
        let allowed = SAFE_SYSCTLS.contains(&name.as_str())
            || allowed_unsafe.iter().any(|a| match a.strip_suffix('*') {
                Some(prefix) => name.starts_with(&dotted_sysctl_name(prefix)),
                None => dotted_sysctl_name(a) == name,
            });
        let err = if !allowed {
            Some(format!("{name:?} not allowlisted"))
        } else {
            match sysctl_namespace(&name) {
                Some("ipc") if host_ipc => {
                    Some(format!("{name:?} not allowed with host ipc enabled"))
                }
                Some("net") if host_net => {
                    Some(format!("{name:?} not allowed with host net enabled"))
                }
                _ => None,
            }
        };
        if let Some(e) = err {
            return Err(Rejection {
                reason: "SysctlForbidden",
                message: format!("forbidden sysctl: {e}"),
            });
        }
    }
    Ok(())
}
