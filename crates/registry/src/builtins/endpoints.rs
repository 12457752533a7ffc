//! Endpoints (core/v1) and EndpointSlices (discovery.k8s.io/v1): ports default to TCP (and
//! a slice's port name to `""`), addresses must be valid, non-special IPs, ports valid and
//! named when there are several; a slice's address type is immutable.

use std::collections::HashSet;
use std::net::IpAddr;

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Value, json};

use super::podspec::spec::ip;
use super::service::non_special_ip;
use super::util::{
    arr_at, at, default_str, default_value, dns_label, dns_subdomain, each_mut, i64_at, one_of,
    port_num_errors, qualified_name, str_at,
};
use crate::strategy::Strategy;

const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];

/// Endpoints.
pub struct EndpointsStrategy;

impl Strategy for EndpointsStrategy {
    fn default(&self, obj: &mut Value) {
        each_mut(obj, "subsets", |s| {
            each_mut(s, "ports", |p| default_str(p, "protocol", "TCP"))
        });
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        for (i, ss) in arr_at(obj, "/subsets").iter().enumerate() {
            let p = Path::new("subsets").index(i);
            let (addrs, not_ready) = (arr_at(ss, "/addresses"), arr_at(ss, "/notReadyAddresses"));
            if addrs.is_empty() && not_ready.is_empty() {
                errs.push(FieldError::required(
                    &p,
                    "must specify `addresses` or `notReadyAddresses`",
                ));
            }
            for (key, list) in [("addresses", addrs), ("notReadyAddresses", not_ready)] {
                for (j, a) in list.iter().enumerate() {
                    address(&mut errs, a, &p.child(key).index(j));
                }
            }
            let ports = arr_at(ss, "/ports");
            for (j, port) in ports.iter().enumerate() {
                let pp = p.child("ports").index(j);
                let name = str_at(port, "/name");
                if ports.len() > 1 && name.is_empty() {
                    errs.push(FieldError::required(pp.child("name"), ""));
                } else if !name.is_empty() {
                    dns_label(&mut errs, &pp.child("name"), name);
                }
                port_fields(&mut errs, port, &pp);
            }
        }
        errs
    }
}

/// Upstream `validateEndpointAddress`.
fn address(errs: &mut ErrorList, a: &Value, p: &Path) {
    let addr = str_at(a, "/ip");
    ip(errs, &p.child("ip"), addr);
    let host = str_at(a, "/hostname");
    if !host.is_empty() {
        dns_label(errs, &p.child("hostname"), host);
    }
    if let Some(node) = a.get("nodeName").and_then(Value::as_str) {
        dns_subdomain(errs, &p.child("nodeName"), node);
    }
    non_special_ip(errs, &p.child("ip"), addr);
}

/// Port number, protocol and application protocol of an endpoint port.
fn port_fields(errs: &mut ErrorList, port: &Value, p: &Path) {
    let n = i64_at(port, "/port").unwrap_or(0);
    for m in port_num_errors(n) {
        errs.push(FieldError::invalid(p.child("port"), json!(n), m));
    }
    one_of(
        errs,
        &p.child("protocol"),
        str_at(port, "/protocol"),
        &PROTOCOLS,
    );
    if let Some(ap) = port.get("appProtocol").and_then(Value::as_str) {
        qualified_name(errs, &p.child("appProtocol"), ap);
    }
}

/// EndpointSlices.
pub struct EndpointSliceStrategy;

impl Strategy for EndpointSliceStrategy {
    fn default(&self, obj: &mut Value) {
        each_mut(obj, "ports", |p| {
            default_value(p, "name", json!(""));
            default_value(p, "protocol", json!("TCP"));
        });
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let address_type = str_at(obj, "/addressType");
        one_of(
            &mut errs,
            &Path::new("addressType"),
            address_type,
            &["FQDN", "IPv4", "IPv6"],
        );
        let endpoints = arr_at(obj, "/endpoints");
        let ep = Path::new("endpoints");
        if endpoints.len() > 1000 {
            errs.push(FieldError::too_many(&ep, endpoints.len(), 1000));
        }
        for (i, e) in endpoints.iter().enumerate() {
            let p = ep.index(i);
            let addrs = arr_at(e, "/addresses");
            let ap = p.child("addresses");
            if addrs.is_empty() {
                errs.push(FieldError::required(&ap, "must contain at least 1 address"));
            } else if addrs.len() > 100 {
                errs.push(FieldError::too_many(&ap, addrs.len(), 100));
            }
            for (j, a) in addrs.iter().enumerate() {
                let a = a.as_str().unwrap_or("");
                let jp = ap.index(j);
                match address_type {
                    "IPv4" | "IPv6" => {
                        let want_v4 = address_type == "IPv4";
                        let ok = a.parse::<IpAddr>().is_ok_and(|ip| ip.is_ipv4() == want_v4);
                        if ok {
                            non_special_ip(&mut errs, &jp, a);
                        } else {
                            errs.push(FieldError::invalid(
                                &jp,
                                json!(a),
                                format!("must be a valid {address_type} address"),
                            ));
                        }
                    }
                    "FQDN" => dns_subdomain(&mut errs, &jp, a.strip_suffix('.').unwrap_or(a)),
                    _ => {}
                }
            }
            if let Some(node) = e.get("nodeName").and_then(Value::as_str) {
                dns_subdomain(&mut errs, &p.child("nodeName"), node);
            }
            if let Some(host) = e.get("hostname").and_then(Value::as_str) {
                dns_label(&mut errs, &p.child("hostname"), host);
            }
        }
        let ports = arr_at(obj, "/ports");
        let pp = Path::new("ports");
        if ports.len() > 20000 {
            errs.push(FieldError::too_many(&pp, ports.len(), 20000));
        }
        let mut names = HashSet::new();
        for (i, port) in ports.iter().enumerate() {
            let p = pp.index(i);
            let name = str_at(port, "/name");
            if !name.is_empty() {
                dns_label(&mut errs, &p.child("name"), name);
            }
            if !names.insert(name) {
                errs.push(FieldError::duplicate(p.child("name"), json!(name)));
            }
            if at(port, "/port").is_some() {
                let n = i64_at(port, "/port").unwrap_or(0);
                for m in port_num_errors(n) {
                    errs.push(FieldError::invalid(p.child("port"), json!(n), m));
                }
            }
            match port.get("protocol").and_then(Value::as_str) {
                None => errs.push(FieldError::required(p.child("protocol"), "")),
                Some(proto) if !PROTOCOLS.contains(&proto) => {
                    errs.push(FieldError::not_supported(
                        p.child("protocol"),
                        json!(proto),
                        &PROTOCOLS,
                    ));
                }
                Some(_) => {}
            }
            if let Some(ap) = port.get("appProtocol").and_then(Value::as_str) {
                qualified_name(&mut errs, &p.child("appProtocol"), ap);
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let mut errs = self.validate(new);
        super::util::immutable(
            &mut errs,
            &Path::new("addressType"),
            new.get("addressType"),
            old.get("addressType"),
            |_| "\"\"".into(),
        );
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn endpoint_ports_default_to_tcp_and_addresses_are_checked() {
        let mut ep = json!({"subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": 80}, {"port": 81}]}]});
        EndpointsStrategy.default(&mut ep);
        assert_eq!(ep["subsets"][0]["ports"][0]["protocol"], json!("TCP"));
        assert_eq!(
            messages(&EndpointsStrategy.validate(&ep)),
            vec![
                "subsets[0].addresses[0].ip: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
                "subsets[0].ports[0].name: Required value",
                "subsets[0].ports[1].name: Required value",
            ]
        );
    }

    #[test]
    fn endpoint_slices_check_address_types() {
        let mut s = json!({"addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1", "fd00::1"]}], "ports": [{"port": 80}]});
        EndpointSliceStrategy.default(&mut s);
        assert_eq!(
            s["ports"][0],
            json!({"port": 80, "name": "", "protocol": "TCP"})
        );
        assert_eq!(
            messages(&EndpointSliceStrategy.validate(&s)),
            vec![
                "endpoints[0].addresses[1]: Invalid value: \"fd00::1\": must be a valid IPv4 address"
            ]
        );
        let mut new = s.clone();
        new["addressType"] = json!("IPv6");
        new["endpoints"] = json!([]);
        assert_eq!(
            messages(&EndpointSliceStrategy.validate_update(&new, &s)),
            vec!["addressType: Invalid value: \"IPv6\": field is immutable"]
        );
    }
}
