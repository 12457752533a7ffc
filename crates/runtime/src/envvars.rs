//! Service link variables (`FOO_SERVICE_HOST`, `FOO_PORT_80_TCP_ADDR`, ...): what the kubelet
//! injects for the Services a pod may reach (upstream `getServiceEnvVarMap` and
//! `pkg/kubelet/envvars`). The node agent's kubelet injects them; the syncer writes a shared
//! cluster's into its host pods (the host's kubelet would inject the host's).
//!
//! Every Service with a cluster IP in the pod's namespace when `enableServiceLinks` is true,
//! and always the `kubernetes` Service of `default` (in-cluster clients read
//! `KUBERNETES_SERVICE_HOST`), which a same-named Service of the pod's own namespace replaces.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;

/// The Services whose variables are always injected, from namespace `default`.
const MASTER_SERVICES: [&str; 1] = ["kubernetes"];

/// The service variables for a pod of `namespace`, by name.
pub fn service_env(
    services: &[Service],
    namespace: &str,
    enable_service_links: bool,
) -> BTreeMap<String, String> {
    let mut chosen: BTreeMap<&str, &Service> = BTreeMap::new();
    for svc in services {
        if !has_cluster_ip(svc) {
            continue;
        }
        let name = svc.metadata.name.as_deref().unwrap_or_default();
        let ns = svc.metadata.namespace.as_deref().unwrap_or_default();
        if ns == "default" && MASTER_SERVICES.contains(&name) {
            chosen.entry(name).or_insert(svc);
        } else if ns == namespace && enable_service_links {
            chosen.insert(name, svc);
        }
    }
    let mut out = BTreeMap::new();
    for svc in chosen.values() {
        for (k, v) in variables(svc) {
            out.insert(k, v);
        }
    }
    out
}

/// Whether the Service has a cluster IP (upstream `IsServiceIPSet`: set and not `None`).
fn has_cluster_ip(svc: &Service) -> bool {
    let ip = svc
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .unwrap_or_default();
    !ip.is_empty() && ip != "None"
}

/// A name as an environment variable prefix: upper case, `-` as `_`.
fn env_name(s: &str) -> String {
    s.replace('-', "_").to_uppercase()
}

/// The variables of one Service (upstream `FromServices` and `makeLinkVariables`).
fn variables(svc: &Service) -> Vec<(String, String)> {
    let Some(spec) = svc.spec.as_ref() else {
        return Vec::new();
    };
    let ip = spec.cluster_ip.clone().unwrap_or_default();
    let ports = spec.ports.as_deref().unwrap_or_default();
    let prefix = env_name(svc.metadata.name.as_deref().unwrap_or_default());
    let mut out = vec![(format!("{prefix}_SERVICE_HOST"), ip.clone())];
    let Some(first) = ports.first() else {
        return out;
    };
    let port_var = format!("{prefix}_SERVICE_PORT");
    out.push((port_var.clone(), first.port.to_string()));
    for p in ports {
        if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
            out.push((format!("{port_var}_{}", env_name(name)), p.port.to_string()));
        }
    }
    for (i, p) in ports.iter().enumerate() {
        let protocol = p
            .protocol
            .as_deref()
            .filter(|p| !p.is_empty())
            .unwrap_or("TCP");
        let lower = protocol.to_lowercase();
        let host_port = join_host_port(&ip, p.port);
        let url = format!("{lower}://{host_port}");
        if i == 0 {
            out.push((format!("{prefix}_PORT"), url.clone()));
        }
        let pp = format!("{prefix}_PORT_{}_{}", p.port, protocol.to_uppercase());
        out.push((format!("{pp}_PROTO"), lower));
        out.push((format!("{pp}_PORT"), p.port.to_string()));
        out.push((format!("{pp}_ADDR"), ip.clone()));
        out.push((pp, url));
    }
    out
}

/// `host:port`, with an IPv6 host in brackets (Go's `net.JoinHostPort`).
fn join_host_port(host: &str, port: i32) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn svc(ns: &str, name: &str, ip: &str, ports: &[(Option<&str>, i32, &str)]) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                cluster_ip: Some(ip.into()),
                ports: Some(
                    ports
                        .iter()
                        .map(|(n, port, proto)| ServicePort {
                            name: n.map(str::to_string),
                            port: *port,
                            protocol: Some(proto.to_string()),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn a_service_gives_the_docker_link_variables() {
        let all = [svc(
            "ns",
            "my-db",
            "10.0.0.7",
            &[(Some("sql"), 5432, "TCP"), (Some("metrics"), 9187, "UDP")],
        )];
        let env = service_env(&all, "ns", true);
        let want: BTreeMap<String, String> = [
            ("MY_DB_SERVICE_HOST", "10.0.0.7"),
            ("MY_DB_SERVICE_PORT", "5432"),
            ("MY_DB_SERVICE_PORT_SQL", "5432"),
            ("MY_DB_SERVICE_PORT_METRICS", "9187"),
            ("MY_DB_PORT", "tcp://10.0.0.7:5432"),
            ("MY_DB_PORT_5432_TCP", "tcp://10.0.0.7:5432"),
            ("MY_DB_PORT_5432_TCP_PROTO", "tcp"),
            ("MY_DB_PORT_5432_TCP_PORT", "5432"),
            ("MY_DB_PORT_5432_TCP_ADDR", "10.0.0.7"),
            ("MY_DB_PORT_9187_UDP", "udp://10.0.0.7:9187"),
            ("MY_DB_PORT_9187_UDP_PROTO", "udp"),
            ("MY_DB_PORT_9187_UDP_PORT", "9187"),
            ("MY_DB_PORT_9187_UDP_ADDR", "10.0.0.7"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(env, want);
    }

    #[test]
    fn ipv6_cluster_ips_are_bracketed_in_urls() {
        let env = service_env(
            &[svc("ns", "v6", "fd00::10", &[(None, 80, "TCP")])],
            "ns",
            true,
        );
        assert_eq!(env["V6_PORT"], "tcp://[fd00::10]:80");
        assert_eq!(env["V6_PORT_80_TCP_ADDR"], "fd00::10");
        assert!(!env.contains_key("V6_SERVICE_PORT_"));
    }

    #[test]
    fn the_kubernetes_service_is_injected_even_without_service_links() {
        let all = [
            svc(
                "default",
                "kubernetes",
                "10.96.0.1",
                &[(Some("https"), 443, "TCP")],
            ),
            svc("default", "other", "10.96.0.9", &[(None, 80, "TCP")]),
            svc("ns", "web", "10.96.0.2", &[(None, 80, "TCP")]),
            svc("ns", "headless", "None", &[(None, 80, "TCP")]),
            svc("ns", "external", "", &[]),
        ];
        let off = service_env(&all, "ns", false);
        assert_eq!(off["KUBERNETES_SERVICE_HOST"], "10.96.0.1");
        assert_eq!(off["KUBERNETES_SERVICE_PORT_HTTPS"], "443");
        assert!(off.keys().all(|k| k.starts_with("KUBERNETES_")));
        let on = service_env(&all, "ns", true);
        assert_eq!(on["WEB_SERVICE_HOST"], "10.96.0.2");
        assert!(!on.contains_key("OTHER_SERVICE_HOST"));
        assert!(
            !on.keys()
                .any(|k| k.starts_with("HEADLESS") || k.starts_with("EXTERNAL"))
        );
    }

    #[test]
    fn a_kubernetes_service_of_the_pods_namespace_wins() {
        let all = [
            svc("default", "kubernetes", "10.96.0.1", &[(None, 443, "TCP")]),
            svc("ns", "kubernetes", "10.96.0.50", &[(None, 443, "TCP")]),
        ];
        assert_eq!(
            service_env(&all, "ns", true)["KUBERNETES_SERVICE_HOST"],
            "10.96.0.50"
        );
        assert_eq!(
            service_env(&all, "ns", false)["KUBERNETES_SERVICE_HOST"],
            "10.96.0.1"
        );
    }
}
