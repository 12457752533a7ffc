//! Services as the proxier sees them: one [`ServicePort`] per port of a Service that has a
//! cluster IP of the proxier's family, with the addresses it is reached on (cluster IP,
//! external IPs, LoadBalancer ingress IPs, the NodePort), its traffic policies and session
//! affinity, and the names of its chains.
//!
//! Follows upstream's service change tracker: headless Services (`clusterIP: None`) and
//! ExternalName Services get no rules; addresses of the other family are ignored; ingress
//! addresses with `ipMode: Proxy` are left to the load balancer.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Service;

use super::names;

/// The IP family a proxier programs (one table per family).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpFamily {
    V4,
    V6,
}

impl IpFamily {
    pub fn matches(self, ip: &IpAddr) -> bool {
        matches!(
            (self, ip),
            (IpFamily::V4, IpAddr::V4(_)) | (IpFamily::V6, IpAddr::V6(_))
        )
    }

    /// `ip` or `ip6`, as in `ip daddr`.
    pub fn ip(self) -> &'static str {
        match self {
            IpFamily::V4 => "ip",
            IpFamily::V6 => "ip6",
        }
    }

    /// The nftables address type.
    pub fn addr_type(self) -> &'static str {
        match self {
            IpFamily::V4 => "ipv4_addr",
            IpFamily::V6 => "ipv6_addr",
        }
    }

    /// An EndpointSlice's `addressType`.
    pub fn address_type(self) -> &'static str {
        match self {
            IpFamily::V4 => "IPv4",
            IpFamily::V6 => "IPv6",
        }
    }

    pub fn nft_family(self) -> crate::nft::Family {
        match self {
            IpFamily::V4 => crate::nft::Family::Ip,
            IpFamily::V6 => crate::nft::Family::Ip6,
        }
    }
}

/// A transport protocol of a Service port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// The API's spelling (`TCP` when absent, as defaulting gives).
    pub fn parse(s: Option<&str>) -> Option<Protocol> {
        match s.unwrap_or("TCP") {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }

    /// nft's spelling.
    pub fn nft(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

/// A Service by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceName {
    pub namespace: String,
    pub name: String,
}

impl ServiceName {
    pub fn new(namespace: &str, name: &str) -> Self {
        ServiceName {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ServiceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One port of a Service: upstream's `ServicePortName` (`ns/svc:port`, protocol kept).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServicePortName {
    pub service: ServiceName,
    pub port: String,
    pub protocol: Protocol,
}

impl fmt::Display for ServicePortName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.port.is_empty() {
            write!(f, "{}", self.service)
        } else {
            write!(f, "{}:{}", self.service, self.port)
        }
    }
}

/// The chains of a service port (upstream's naming; see [`names`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceChains {
    /// `service-…`: the endpoints for Cluster traffic policy.
    pub cluster: String,
    /// `local-…`: the node's own endpoints for Local traffic policy.
    pub local: String,
    /// `external-…`: NodePort, LoadBalancer and external-IP traffic.
    pub external: String,
    /// `firewall-…`: `loadBalancerSourceRanges`.
    pub firewall: String,
}

/// A Service port with everything its rules need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    pub name: ServicePortName,
    pub cluster_ip: IpAddr,
    pub port: u16,
    /// 0 when the port has none.
    pub node_port: u16,
    pub external_ips: Vec<IpAddr>,
    pub load_balancer_ips: Vec<IpAddr>,
    pub load_balancer_source_ranges: Vec<IpNet>,
    /// `sessionAffinity: ClientIP` with its timeout in seconds.
    pub affinity_timeout: Option<u32>,
    /// `internalTrafficPolicy: Local`.
    pub internal_local: bool,
    /// `externalTrafficPolicy: Local` on an externally reachable Service.
    pub external_local: bool,
    pub chains: ServiceChains,
}

/// `sessionAffinityConfig.clientIP.timeoutSeconds` when unset (3 hours, upstream's default).
pub const DEFAULT_AFFINITY_TIMEOUT: u32 = 10800;

impl ServicePort {
    /// Reached from outside through a NodePort, a LoadBalancer IP or an external IP.
    pub fn externally_accessible(&self) -> bool {
        self.node_port != 0 || !self.load_balancer_ips.is_empty() || !self.external_ips.is_empty()
    }

    /// Whether any traffic uses the Cluster-policy endpoints: internal traffic under Cluster
    /// policy, or external traffic at all (even under Local policy the short-circuits of pod
    /// and host traffic go to the Cluster chain).
    pub fn uses_cluster_endpoints(&self) -> bool {
        !self.internal_local || self.externally_accessible()
    }

    /// Whether any traffic uses the node-local endpoints.
    pub fn uses_local_endpoints(&self) -> bool {
        self.internal_local || (self.externally_accessible() && self.external_local)
    }

    /// Every address the port is reached on (cluster IP first), for conntrack cleanup.
    pub fn addresses(&self) -> impl Iterator<Item = IpAddr> + '_ {
        std::iter::once(self.cluster_ip)
            .chain(self.external_ips.iter().copied())
            .chain(self.load_balancer_ips.iter().copied())
    }
}

fn parse_ips(values: impl IntoIterator<Item = String>, family: IpFamily) -> Vec<IpAddr> {
    let mut ips: Vec<IpAddr> = values
        .into_iter()
        .filter_map(|v| v.parse().ok())
        .filter(|ip| family.matches(ip))
        .collect();
    ips.sort();
    ips.dedup();
    ips
}

/// The ports of `svc` the proxier of `family` programs, keyed by name; empty for headless,
/// ExternalName and other-family Services.
pub fn service_ports(svc: &Service, family: IpFamily) -> BTreeMap<ServicePortName, ServicePort> {
    let mut out = BTreeMap::new();
    let Some(spec) = svc.spec.as_ref() else {
        return out;
    };
    let namespace = svc.metadata.namespace.clone().unwrap_or_default();
    let name = svc.metadata.name.clone().unwrap_or_default();
    let type_ = spec.type_.as_deref().unwrap_or("ClusterIP");
    if type_ == "ExternalName" {
        return out;
    }
    let mut ips: Vec<String> = spec.cluster_ips.clone().unwrap_or_default();
    if ips.is_empty()
        && let Some(ip) = &spec.cluster_ip
    {
        ips.push(ip.clone());
    }
    let Some(cluster_ip) = ips
        .iter()
        .filter(|ip| ip.as_str() != "None")
        .filter_map(|ip| ip.parse::<IpAddr>().ok())
        .find(|ip| family.matches(ip))
    else {
        return out;
    };
    let external_ips = parse_ips(spec.external_ips.clone().unwrap_or_default(), family);
    let load_balancer_ips = if type_ == "LoadBalancer" {
        parse_ips(
            svc.status
                .as_ref()
                .and_then(|s| s.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.as_ref())
                .into_iter()
                .flatten()
                .filter(|i| i.ip_mode.as_deref().unwrap_or("VIP") == "VIP")
                .filter_map(|i| i.ip.clone()),
            family,
        )
    } else {
        Vec::new()
    };
    let load_balancer_source_ranges: Vec<IpNet> = spec
        .load_balancer_source_ranges
        .iter()
        .flatten()
        .filter_map(|r| r.trim().parse::<IpNet>().ok())
        .filter(|n| family.matches(&n.addr()))
        .collect();
    let affinity_timeout = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
        spec.session_affinity_config
            .as_ref()
            .and_then(|c| c.client_ip.as_ref())
            .and_then(|c| c.timeout_seconds)
            .and_then(|t| u32::try_from(t).ok())
            .filter(|t| *t > 0)
            .unwrap_or(DEFAULT_AFFINITY_TIMEOUT)
    });
    let internal_local = spec.internal_traffic_policy.as_deref() == Some("Local");
    let externally_typed = matches!(type_, "NodePort" | "LoadBalancer")
        || !spec.external_ips.as_deref().unwrap_or_default().is_empty();
    let external_local =
        externally_typed && spec.external_traffic_policy.as_deref() == Some("Local");
    for p in spec.ports.iter().flatten() {
        let Some(protocol) = Protocol::parse(p.protocol.as_deref()) else {
            continue;
        };
        let Ok(port) = u16::try_from(p.port) else {
            continue;
        };
        let spn = ServicePortName {
            service: ServiceName::new(&namespace, &name),
            port: p.name.clone().unwrap_or_default(),
            protocol,
        };
        let node_port = match type_ {
            "NodePort" | "LoadBalancer" => p.node_port.and_then(|n| u16::try_from(n).ok()),
            _ => None,
        }
        .unwrap_or(0);
        let chains = names::service_chains(&spn);
        let sp = ServicePort {
            name: spn.clone(),
            cluster_ip,
            port,
            node_port,
            external_ips: external_ips.clone(),
            load_balancer_ips: load_balancer_ips.clone(),
            load_balancer_source_ranges: load_balancer_source_ranges.clone(),
            affinity_timeout,
            internal_local,
            external_local: false,
            chains,
        };
        let external_local = external_local && sp.externally_accessible();
        out.insert(
            spn,
            ServicePort {
                external_local,
                ..sp
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(json: serde_json::Value) -> Service {
        serde_json::from_value(json).expect("a Service")
    }

    #[test]
    fn headless_and_external_name_services_get_no_ports() {
        let headless = svc(serde_json::json!({
            "metadata": {"namespace": "ns", "name": "db"},
            "spec": {"clusterIP": "None", "ports": [{"port": 5432}]}
        }));
        assert!(service_ports(&headless, IpFamily::V4).is_empty());
        let ext = svc(serde_json::json!({
            "metadata": {"namespace": "ns", "name": "ext"},
            "spec": {"type": "ExternalName", "externalName": "example.com"}
        }));
        assert!(service_ports(&ext, IpFamily::V4).is_empty());
    }

    #[test]
    fn a_load_balancer_has_every_address_and_its_policies() {
        let s = svc(serde_json::json!({
            "metadata": {"namespace": "ns", "name": "web"},
            "spec": {
                "type": "LoadBalancer", "clusterIP": "10.96.0.20", "clusterIPs": ["10.96.0.20", "fd00::20"],
                "externalIPs": ["192.0.2.9", "2001:db8::9"],
                "externalTrafficPolicy": "Local", "sessionAffinity": "ClientIP",
                "loadBalancerSourceRanges": ["203.0.113.0/24"],
                "ports": [{"name": "http", "port": 80, "nodePort": 30080}, {"name": "dns", "port": 53, "protocol": "UDP", "nodePort": 30053}]
            },
            "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}, {"ip": "198.51.100.8", "ipMode": "Proxy"}, {"hostname": "lb.example"}]}}
        }));
        let ports = service_ports(&s, IpFamily::V4);
        assert_eq!(ports.len(), 2);
        let http = ports
            .values()
            .find(|p| p.name.port == "http")
            .expect("http");
        assert_eq!(http.cluster_ip.to_string(), "10.96.0.20");
        assert_eq!(http.node_port, 30080);
        assert_eq!(
            http.external_ips,
            vec!["192.0.2.9".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(
            http.load_balancer_ips,
            vec!["198.51.100.7".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(http.affinity_timeout, Some(DEFAULT_AFFINITY_TIMEOUT));
        assert!(http.external_local && !http.internal_local);
        assert!(http.uses_cluster_endpoints() && http.uses_local_endpoints());
        assert_eq!(http.name.to_string(), "ns/web:http");
        let dns = ports.values().find(|p| p.name.port == "dns").expect("dns");
        assert_eq!(dns.name.protocol, Protocol::Udp);
        let v6 = service_ports(&s, IpFamily::V6);
        assert_eq!(
            v6.values().next().unwrap().cluster_ip.to_string(),
            "fd00::20"
        );
    }

    #[test]
    fn a_cluster_ip_service_has_no_node_port_and_local_internal_policy_only_uses_local() {
        let s = svc(serde_json::json!({
            "metadata": {"namespace": "kube-system", "name": "kube-dns"},
            "spec": {"clusterIP": "10.96.0.10", "internalTrafficPolicy": "Local",
                     "externalTrafficPolicy": "Local",
                     "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "nodePort": 31000}]}
        }));
        let p = service_ports(&s, IpFamily::V4)
            .into_values()
            .next()
            .expect("port");
        assert_eq!(p.node_port, 0);
        assert!(
            !p.external_local,
            "eTP applies only to externally reachable Services"
        );
        assert!(!p.uses_cluster_endpoints() && p.uses_local_endpoints());
    }
}
