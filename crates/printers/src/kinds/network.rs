//! Networking printers: Service (`TYPE CLUSTER-IP EXTERNAL-IP PORT(S)`), Endpoints,
//! EndpointSlice, Ingress, IngressClass and NetworkPolicy.
//!
//! EXTERNAL-IP depends on the service type: explicit external IPs, the load balancer's
//! addresses (or `<pending>` until it has some), the ExternalName, or `<none>`. Lists that can
//! grow (endpoints, hosts) print the first three and `+ N more...`.

use std::collections::BTreeSet;

use serde_json::Value;

use super::Printer;
use crate::column::{AGE, NAME, Row, cells, s, wide};
use crate::format::{self, join_host_port, list_with_more};
use crate::meta;
use crate::time::Instant;
use crate::value::{at, int_or_zero, list, map, opt_int, opt_str, str_or_empty};

pub(crate) const SERVICE: Printer = Printer {
    columns: &[
        NAME,
        s(
            "Type",
            "How the service is exposed: ClusterIP, NodePort, LoadBalancer or ExternalName.",
        ),
        s("Cluster-IP", "The service's first cluster IP."),
        s(
            "External-IP",
            "Addresses the service is reachable at from outside the cluster.",
        ),
        s("Port(s)", "Service ports, with node ports, and protocols."),
        AGE,
        wide("Selector", "Labels of the pods the service routes to."),
    ],
    row: service,
};

/// Load balancer ingress points (IP, else hostname), sorted and de-duplicated.
fn load_balancer_addresses(ingress: &[Value]) -> String {
    let set: BTreeSet<&str> = ingress
        .iter()
        .filter_map(|i| {
            opt_str(i, &["ip"])
                .filter(|ip| !ip.is_empty())
                .or_else(|| opt_str(i, &["hostname"]).filter(|h| !h.is_empty()))
        })
        .collect();
    set.into_iter().collect::<Vec<_>>().join(",")
}

fn external_ip(obj: &Value, type_: &str) -> String {
    let external: Vec<&str> = list(obj, &["spec", "externalIPs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match type_ {
        "ClusterIP" | "NodePort" if !external.is_empty() => external.join(","),
        "ClusterIP" | "NodePort" => "<none>".to_string(),
        "LoadBalancer" => {
            let lb = load_balancer_addresses(list(obj, &["status", "loadBalancer", "ingress"]));
            if !external.is_empty() {
                let mut all: Vec<&str> = if lb.is_empty() {
                    Vec::new()
                } else {
                    lb.split(',').collect()
                };
                all.extend(external);
                all.join(",")
            } else if !lb.is_empty() {
                lb
            } else {
                "<pending>".to_string()
            }
        }
        "ExternalName" => str_or_empty(obj, &["spec", "externalName"]).to_string(),
        _ => "<unknown>".to_string(),
    }
}

fn service(obj: &Value, now: Instant) -> Row {
    // Upstream defaults the type to ClusterIP and each port's protocol to TCP.
    let type_ = opt_str(obj, &["spec", "type"])
        .filter(|t| !t.is_empty())
        .unwrap_or("ClusterIP");
    let cluster_ip = list(obj, &["spec", "clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .or_else(|| opt_str(obj, &["spec", "clusterIP"]).filter(|ip| !ip.is_empty()))
        .unwrap_or("<none>");
    let ports: Vec<String> = list(obj, &["spec", "ports"])
        .iter()
        .map(|p| {
            let port = int_or_zero(p, &["port"]);
            let protocol = opt_str(p, &["protocol"])
                .filter(|p| !p.is_empty())
                .unwrap_or("TCP");
            match opt_int(p, &["nodePort"]).filter(|n| *n > 0) {
                Some(node_port) => format!("{port}:{node_port}/{protocol}"),
                None => format!("{port}/{protocol}"),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    };
    Row::new(cells![
        meta::name(obj),
        type_,
        cluster_ip,
        external_ip(obj, type_),
        ports,
        meta::age(obj, now),
        format::labels(map(obj, &["spec", "selector"])),
    ])
}

pub(crate) const ENDPOINTS: Printer = Printer {
    columns: &[
        NAME,
        s("Endpoints", "Ready addresses and ports of the endpoints."),
        AGE,
    ],
    row: endpoints,
};

/// `formatEndpoints`: `ip:port` per ready address and port, first three, then `+ N more...`.
fn format_endpoints(obj: &Value) -> String {
    let subsets = list(obj, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    const MAX: usize = 3;
    let mut out = Vec::new();
    let (mut more, mut count) = (false, 0usize);
    for subset in subsets {
        let addresses = list(subset, &["addresses"]);
        let ports = list(subset, &["ports"]);
        let targets: Vec<Option<i64>> = if ports.is_empty() {
            vec![None]
        } else {
            ports
                .iter()
                .map(|p| Some(int_or_zero(p, &["port"])))
                .collect()
        };
        for port in targets {
            count += addresses.len();
            for addr in addresses {
                if out.len() == MAX {
                    more = true;
                    break;
                }
                let ip = str_or_empty(addr, &["ip"]);
                out.push(match port {
                    Some(port) => join_host_port(ip, port),
                    None => ip.to_string(),
                });
            }
        }
    }
    let joined = out.join(",");
    if more {
        format!("{joined} + {} more...", count - MAX)
    } else {
        joined
    }
}

fn endpoints(obj: &Value, now: Instant) -> Row {
    Row::new(cells![
        meta::name(obj),
        format_endpoints(obj),
        meta::age(obj, now)
    ])
}

pub(crate) const ENDPOINT_SLICE: Printer = Printer {
    columns: &[
        NAME,
        s(
            "AddressType",
            "Address family of the endpoints: IPv4, IPv6 or FQDN.",
        ),
        s("Ports", "Ports of the slice."),
        s("Endpoints", "Addresses of the slice's endpoints."),
        AGE,
    ],
    row: endpoint_slice,
};

/// The first three of a list and whether more were cut, as the EndpointSlice formatters count.
fn first_three(items: impl Iterator<Item = String>) -> String {
    const MAX: usize = 3;
    let (mut out, mut more, mut count) = (Vec::new(), false, 0usize);
    for item in items {
        if out.len() < MAX {
            out.push(item);
        } else if out.len() == MAX {
            more = true;
        }
        count += 1;
    }
    list_with_more(&out, more, count, MAX)
}

fn endpoint_slice(obj: &Value, now: Instant) -> Row {
    let ports = list(obj, &["ports"])
        .iter()
        .map(|p| match opt_int(p, &["port"]) {
            Some(port) => port.to_string(),
            None => opt_str(p, &["name"]).unwrap_or("*").to_string(),
        });
    let addresses = list(obj, &["endpoints"])
        .iter()
        .flat_map(|e| list(e, &["addresses"]))
        .map(|a| a.as_str().unwrap_or("").to_string());
    Row::new(cells![
        meta::name(obj),
        str_or_empty(obj, &["addressType"]),
        first_three(ports),
        first_three(addresses),
        meta::age(obj, now),
    ])
}

pub(crate) const INGRESS: Printer = Printer {
    columns: &[
        NAME,
        s("Class", "The IngressClass handling this ingress."),
        s("Hosts", "Hosts the ingress rules match."),
        s(
            "Address",
            "Addresses of the load balancer serving the ingress.",
        ),
        s("Ports", "Ports the ingress listens on."),
        AGE,
    ],
    row: ingress,
};

/// `formatHosts`: up to three rule hosts, `*` when none, `+ N more...` counted in rules.
fn format_hosts(rules: &[Value]) -> String {
    const MAX: usize = 3;
    let (mut hosts, mut more) = (Vec::new(), false);
    for rule in rules {
        if hosts.len() == MAX {
            more = true;
        }
        let host = str_or_empty(rule, &["host"]);
        if !more && !host.is_empty() {
            hosts.push(host);
        }
    }
    if hosts.is_empty() {
        return "*".to_string();
    }
    let joined = hosts.join(",");
    if more {
        format!("{joined} + {} more...", rules.len() - MAX)
    } else {
        joined
    }
}

fn ingress(obj: &Value, now: Instant) -> Row {
    let ports = if list(obj, &["spec", "tls"]).is_empty() {
        "80"
    } else {
        "80, 443"
    };
    Row::new(cells![
        meta::name(obj),
        opt_str(obj, &["spec", "ingressClassName"]).unwrap_or("<none>"),
        format_hosts(list(obj, &["spec", "rules"])),
        load_balancer_addresses(list(obj, &["status", "loadBalancer", "ingress"])),
        ports,
        meta::age(obj, now),
    ])
}

pub(crate) const INGRESS_CLASS: Printer = Printer {
    columns: &[
        NAME,
        s("Controller", "The controller implementing this class."),
        s("Parameters", "The resource holding the class's parameters."),
        AGE,
    ],
    row: ingress_class,
};

fn ingress_class(obj: &Value, now: Instant) -> Row {
    let parameters = match at(obj, &["spec", "parameters"]).filter(|p| p.is_object()) {
        None => "<none>".to_string(),
        Some(p) => {
            let mut text = str_or_empty(p, &["kind"]).to_string();
            if let Some(group) = opt_str(p, &["apiGroup"]) {
                text = format!("{text}.{group}");
            }
            format!("{text}/{}", str_or_empty(p, &["name"]))
        }
    };
    Row::new(cells![
        meta::name(obj),
        str_or_empty(obj, &["spec", "controller"]),
        parameters,
        meta::age(obj, now),
    ])
}

pub(crate) const NETWORK_POLICY: Printer = Printer {
    columns: &[
        NAME,
        s("Pod-Selector", "Labels of the pods the policy applies to."),
        AGE,
    ],
    row: network_policy,
};

fn network_policy(obj: &Value, now: Instant) -> Row {
    // `podSelector` is a struct upstream, never nil: an absent one is the empty selector.
    let selector = at(obj, &["spec", "podSelector"])
        .filter(|s| !s.is_null())
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    Row::new(cells![
        meta::name(obj),
        format::label_selector(Some(&selector)),
        meta::age(obj, now),
    ])
}

#[cfg(test)]
#[path = "network_tests.rs"]
mod tests;
