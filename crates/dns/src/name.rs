//! Query names, read the way the Kubernetes DNS schema lays them out.
//!
//! A lowercased query name is split into labels and classified once: the cluster zone's apex
//! and fixed names (`dns-version`, `ns.dns`), Service names (`<svc>.<ns>.svc`, with an
//! endpoint hostname or a `_<port>._<proto>` pair in front), pod names (`<ip>.<ns>.pod`),
//! reverse names (`in-addr.arpa`, `ip6.arpa`), or a name outside every zone. The shapes follow
//! CoreDNS's `kubernetes` plugin (`parse.go`): more labels than a shape allows is a name that
//! does not exist.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A query name, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target<'a> {
    /// The cluster zone itself.
    Apex,
    /// `dns-version.<zone>`.
    DnsVersion,
    /// `ns.dns.<zone>`, the name of the zone's name server.
    NameServer,
    /// `svc.<zone>` or `pod.<zone>`: names with children only.
    Kind,
    /// `<ns>.svc.<zone>` or `<ns>.pod.<zone>`: exists when the namespace does.
    Namespace(&'a str),
    /// A name under `svc.<zone>`.
    Service(ServiceName<'a>),
    /// `<dashed-ip>.<ns>.pod.<zone>`.
    Pod {
        namespace: &'a str,
        ip: Option<IpAddr>,
    },
    /// A name in the zone no Kubernetes record can have.
    Invalid,
    /// A reverse name; `Some` when it spells a whole address.
    Reverse(Option<IpAddr>),
    /// A name outside the cluster zone and the reverse zones.
    Outside,
}

/// `[<endpoint>.|_<port>._<proto>.]<service>.<namespace>.svc.<zone>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceName<'a> {
    pub namespace: &'a str,
    pub service: &'a str,
    /// `<service>.<namespace>`: the view's key, a slice of the query name.
    pub key: &'a str,
    pub endpoint: Option<&'a str>,
    /// `(port, protocol)` without their underscores.
    pub port: Option<(&'a str, &'a str)>,
}

/// Classifies `name`: lowercase, dotted, with or without the final dot. `zone` is the cluster
/// domain in the same form, without the final dot.
pub fn classify<'a>(name: &'a str, zone: &str) -> Target<'a> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if let Some(rev) = reverse(name) {
        return rev;
    }
    let rest = if name == zone {
        ""
    } else if let Some(r) = name.strip_suffix(zone).and_then(|r| r.strip_suffix('.')) {
        if r.is_empty() {
            return Target::Invalid;
        }
        r
    } else {
        return Target::Outside;
    };
    if rest.is_empty() {
        return Target::Apex;
    }
    match rest {
        "dns-version" => return Target::DnsVersion,
        "ns.dns" => return Target::NameServer,
        "svc" | "pod" => return Target::Kind,
        _ => {}
    }
    let (rest, kind) = match rest.rsplit_once('.') {
        Some((r, k @ ("svc" | "pod"))) => (r, k),
        _ => return Target::Invalid,
    };
    let (front, namespace) = match rest.rsplit_once('.') {
        Some((f, ns)) => (Some(f), ns),
        None => (None, rest),
    };
    if namespace.is_empty() {
        return Target::Invalid;
    }
    let Some(front) = front else {
        return Target::Namespace(namespace);
    };
    if kind == "pod" {
        if front.contains('.') || front.is_empty() {
            return Target::Invalid;
        }
        return Target::Pod {
            namespace,
            ip: dashed_ip(front),
        };
    }
    let (prefix, service) = match front.rsplit_once('.') {
        Some((p, s)) => (Some(p), s),
        None => (None, front),
    };
    if service.is_empty() {
        return Target::Invalid;
    }
    let key = &rest[rest.len() - service.len() - 1 - namespace.len()..];
    let mut name = ServiceName {
        namespace,
        service,
        key,
        endpoint: None,
        port: None,
    };
    match prefix {
        None => {}
        Some(p) => match p.split_once('.') {
            None if !p.is_empty() => name.endpoint = Some(p),
            Some((port, proto))
                if !proto.contains('.') && !port.is_empty() && !proto.is_empty() =>
            {
                name.port = Some((strip_underscore(port), strip_underscore(proto)))
            }
            _ => return Target::Invalid,
        },
    }
    Target::Service(name)
}

fn strip_underscore(s: &str) -> &str {
    s.strip_prefix('_').unwrap_or(s)
}

/// The address of a pod name: `10-1-2-3` (three dashes, none doubled) or an IPv6 address with
/// colons written as dashes (`fd00--1`).
pub fn dashed_ip(label: &str) -> Option<IpAddr> {
    if label.matches('-').count() == 3 && !label.contains("--") {
        label
            .replace('-', ".")
            .parse::<Ipv4Addr>()
            .ok()
            .map(IpAddr::V4)
    } else {
        label
            .replace('-', ":")
            .parse::<Ipv6Addr>()
            .ok()
            .map(IpAddr::V6)
    }
}

/// The dashed form of an address, CoreDNS's hostname for an endpoint without one.
pub fn dashed(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string().replace('.', "-"),
        IpAddr::V6(v6) => {
            let s = v6.to_string().replace(':', "-");
            if s.ends_with('-') { s + "0" } else { s }
        }
    }
}

fn reverse(name: &str) -> Option<Target<'static>> {
    if let Some(r) = strip_zone(name, "in-addr.arpa") {
        let labels: Vec<&str> = if r.is_empty() {
            vec![]
        } else {
            r.split('.').collect()
        };
        if labels.len() != 4 {
            return Some(Target::Reverse(None));
        }
        let mut octets = [0u8; 4];
        for (i, l) in labels.iter().rev().enumerate() {
            // Decimal octets without leading zeros, as reverse names are written.
            if l.is_empty() || (l.len() > 1 && l.starts_with('0')) {
                return Some(Target::Reverse(None));
            }
            match l.parse::<u8>() {
                Ok(o) => octets[i] = o,
                Err(_) => return Some(Target::Reverse(None)),
            }
        }
        return Some(Target::Reverse(Some(IpAddr::V4(Ipv4Addr::from(octets)))));
    }
    if let Some(r) = strip_zone(name, "ip6.arpa") {
        let labels: Vec<&str> = if r.is_empty() {
            vec![]
        } else {
            r.split('.').collect()
        };
        if labels.len() != 32 {
            return Some(Target::Reverse(None));
        }
        let mut bits: u128 = 0;
        for l in labels.iter().rev() {
            let mut chars = l.chars();
            let (Some(c), None) = (chars.next(), chars.next()) else {
                return Some(Target::Reverse(None));
            };
            let Some(n) = c.to_digit(16) else {
                return Some(Target::Reverse(None));
            };
            bits = (bits << 4) | n as u128;
        }
        return Some(Target::Reverse(Some(IpAddr::V6(Ipv6Addr::from(bits)))));
    }
    None
}

fn strip_zone<'a>(name: &'a str, zone: &str) -> Option<&'a str> {
    if name == zone {
        return Some("");
    }
    name.strip_suffix(zone)?.strip_suffix('.')
}

#[cfg(test)]
mod tests {
    use super::*;

    const Z: &str = "cluster.local";

    fn svc<'a>(ns: &'a str, service: &'a str, key: &'a str) -> ServiceName<'a> {
        ServiceName {
            namespace: ns,
            service,
            key,
            endpoint: None,
            port: None,
        }
    }

    #[test]
    fn service_names_in_every_schema_shape_are_read() {
        assert_eq!(
            classify("kubernetes.default.svc.cluster.local.", Z),
            Target::Service(svc("default", "kubernetes", "kubernetes.default"))
        );
        assert_eq!(
            classify("my-pet.headless.default.svc.cluster.local", Z),
            Target::Service(ServiceName {
                endpoint: Some("my-pet"),
                ..svc("default", "headless", "headless.default")
            })
        );
        assert_eq!(
            classify("_https._tcp.kubernetes.default.svc.cluster.local.", Z),
            Target::Service(ServiceName {
                port: Some(("https", "tcp")),
                ..svc("default", "kubernetes", "kubernetes.default")
            })
        );
    }

    #[test]
    fn fixed_names_and_empty_non_terminals_are_recognised() {
        assert_eq!(classify("cluster.local.", Z), Target::Apex);
        assert_eq!(
            classify("dns-version.cluster.local.", Z),
            Target::DnsVersion
        );
        assert_eq!(classify("ns.dns.cluster.local.", Z), Target::NameServer);
        assert_eq!(classify("svc.cluster.local.", Z), Target::Kind);
        assert_eq!(
            classify("default.svc.cluster.local.", Z),
            Target::Namespace("default")
        );
        assert_eq!(
            classify("default.pod.cluster.local.", Z),
            Target::Namespace("default")
        );
    }

    #[test]
    fn names_the_schema_has_no_place_for_are_invalid() {
        for n in [
            "foo.cluster.local.",
            "a.b.c.d.default.svc.cluster.local.",
            "x.1-2-3-4.default.pod.cluster.local.",
            "web.default.nodes.cluster.local.",
            ".default.svc.cluster.local.",
        ] {
            assert_eq!(classify(n, Z), Target::Invalid, "{n}");
        }
    }

    #[test]
    fn names_outside_the_zone_are_outside() {
        assert_eq!(classify("example.com.", Z), Target::Outside);
        assert_eq!(classify("notcluster.local.", Z), Target::Outside);
        assert_eq!(classify("local.", Z), Target::Outside);
    }

    #[test]
    fn pod_names_carry_their_dashed_address() {
        assert_eq!(
            classify("10-244-1-5.default.pod.cluster.local.", Z),
            Target::Pod {
                namespace: "default",
                ip: Some("10.244.1.5".parse().unwrap())
            }
        );
        assert_eq!(
            classify("fd00--1.default.pod.cluster.local.", Z),
            Target::Pod {
                namespace: "default",
                ip: Some("fd00::1".parse().unwrap())
            }
        );
        assert_eq!(
            classify("web.default.pod.cluster.local.", Z),
            Target::Pod {
                namespace: "default",
                ip: None
            }
        );
    }

    #[test]
    fn reverse_names_spell_addresses() {
        assert_eq!(
            classify("1.0.3.10.in-addr.arpa.", Z),
            Target::Reverse(Some("10.3.0.1".parse().unwrap()))
        );
        assert_eq!(
            classify(
                "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.",
                Z
            ),
            Target::Reverse(Some("2001:db8::1".parse().unwrap()))
        );
        assert_eq!(classify("3.10.in-addr.arpa.", Z), Target::Reverse(None));
        assert_eq!(
            classify("01.0.3.10.in-addr.arpa.", Z),
            Target::Reverse(None)
        );
    }

    #[test]
    fn dashed_addresses_round_trip() {
        for ip in ["10.1.2.3", "fd00::1", "fd00:1::", "2001:db8:0:1::5"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(dashed_ip(&dashed(ip)), Some(ip), "{ip}");
        }
        assert_eq!(dashed("fd00:1::".parse().unwrap()), "fd00-1--0");
    }
}
