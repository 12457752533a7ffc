//! `ValidateService`: ports, selector, session affinity, types, external IPs, source ranges,
//! load balancer fields and traffic policies, with upstream's paths and messages.

use std::collections::HashSet;
use std::net::IpAddr;

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Value, json};

use super::ips::cluster_ips;
use super::{MAX_AFFINITY_SECONDS, externally_accessible, is_headless, needs_health_check, ty};
use crate::builtins::gofmt;
use crate::builtins::podspec::spec::ip;
use crate::builtins::util::{
    arr_at, at, dns_label, dns_subdomain, i64_at, labels, port_num_errors, port_num_or_name,
    qualified_name, str_at,
};

/// Upstream `ValidateService`.
pub(super) fn validate_service(svc: &Value) -> ErrorList {
    let mut errs = ErrorList::new();
    let sp = Path::new("spec");
    let null = Value::Null;
    let spec = svc.get("spec").unwrap_or(&null);
    let ann = |k: &str| apimachinery::meta::annotation(svc, k);
    if let (Some(mode), Some(hints)) = (
        ann("service.kubernetes.io/topology-mode"),
        ann("service.kubernetes.io/topology-aware-hints"),
    ) && mode != hints
    {
        errs.push(FieldError::invalid(
            Path::new("metadata").child("annotations").key("service.kubernetes.io/topology-mode"),
            json!(mode),
            "must match annotations[service.kubernetes.io/topology-aware-hints] when both are specified",
        ));
    }
    let t = ty(svc);
    let headless = is_headless(svc);
    let ports = arr_at(spec, "/ports");
    if ports.is_empty() && !headless && t != "ExternalName" {
        errs.push(FieldError::required(sp.child("ports"), ""));
    }
    match t {
        "LoadBalancer" | "NodePort" if headless => errs.push(FieldError::invalid(
            sp.child("clusterIPs").index(0),
            json!("None"),
            format!("may not be set to 'None' for {t} services"),
        )),
        "ExternalName" => {
            if !arr_at(spec, "/clusterIPs").is_empty() {
                errs.push(FieldError::forbidden(
                    sp.child("clusterIPs"),
                    "may not be set for ExternalName services",
                ));
            }
            if !arr_at(spec, "/ipFamilies").is_empty() {
                errs.push(FieldError::forbidden(
                    sp.child("ipFamilies"),
                    "may not be set for ExternalName services",
                ));
            }
            if at(spec, "/ipFamilyPolicy").is_some() {
                errs.push(FieldError::forbidden(
                    sp.child("ipFamilyPolicy"),
                    "may not be set for ExternalName services",
                ));
            }
            let name = str_at(spec, "/externalName");
            let cname = name.strip_suffix('.').unwrap_or(name);
            if cname.is_empty() {
                errs.push(FieldError::required(sp.child("externalName"), ""));
            } else {
                dns_subdomain(&mut errs, &sp.child("externalName"), cname);
            }
        }
        _ => {}
    }
    let mut names = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        service_port(
            &mut errs,
            port,
            ports.len() > 1,
            &mut names,
            &sp.child("ports").index(i),
        );
    }
    labels(&mut errs, &sp.child("selector"), spec.get("selector"));
    let affinity = str_at(spec, "/sessionAffinity");
    match affinity {
        "" => errs.push(FieldError::required(sp.child("sessionAffinity"), "")),
        "ClientIP" => client_ip_config(
            &mut errs,
            at(spec, "/sessionAffinityConfig"),
            &sp.child("sessionAffinityConfig"),
        ),
        "None" => {
            if at(spec, "/sessionAffinityConfig").is_some() {
                errs.push(FieldError::forbidden(
                    sp.child("sessionAffinityConfig"),
                    "must not be set when session affinity is None",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            sp.child("sessionAffinity"),
            json!(other),
            &["ClientIP", "None"],
        )),
    }
    cluster_ips(&mut errs, svc, spec, &sp);
    for (i, e) in arr_at(spec, "/externalIPs").iter().enumerate() {
        let p = sp.child("externalIPs").index(i);
        let s = e.as_str().unwrap_or("");
        let before = errs.len();
        ip(&mut errs, &p, s);
        if errs.len() == before {
            non_special_ip(&mut errs, &p, s);
        }
    }
    const TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    if t.is_empty() {
        errs.push(FieldError::required(sp.child("type"), ""));
    } else if !TYPES.contains(&t) {
        errs.push(FieldError::not_supported(
            sp.child("type"),
            json!(t),
            &TYPES,
        ));
    }
    if t == "ClusterIP" {
        for (i, port) in ports.iter().enumerate() {
            if i64_at(port, "/nodePort").unwrap_or(0) != 0 {
                errs.push(FieldError::forbidden(
                    sp.child("ports").index(i).child("nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
        }
    }
    let mut node_ports = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let np = i64_at(port, "/nodePort").unwrap_or(0);
        if np != 0 && !node_ports.insert((str_at(port, "/protocol"), np)) {
            errs.push(FieldError::duplicate(
                sp.child("ports").index(i).child("nodePort"),
                json!(np),
            ));
        }
    }
    let mut keys = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let key = (
            str_at(port, "/protocol"),
            i64_at(port, "/port").unwrap_or(0),
        );
        if !keys.insert(key) {
            errs.push(gofmt::duplicate(
                &sp.child("ports").index(i),
                gofmt::service_port_key(key.0, key.1),
            ));
        }
    }
    let ranges = arr_at(spec, "/loadBalancerSourceRanges");
    if !ranges.is_empty() {
        let rp = sp.child("LoadBalancerSourceRanges");
        if t != "LoadBalancer" {
            errs.push(FieldError::forbidden(
                &rp,
                "may only be used when `type` is 'LoadBalancer'",
            ));
        }
        for (i, r) in ranges.iter().enumerate() {
            cidr(&mut errs, &rp.index(i), r.as_str().unwrap_or("").trim());
        }
    }
    if at(spec, "/allocateLoadBalancerNodePorts").is_some() && t != "LoadBalancer" {
        errs.push(FieldError::forbidden(
            sp.child("allocateLoadBalancerNodePorts"),
            "may only be used when `type` is 'LoadBalancer'",
        ));
    }
    if t == "LoadBalancer" && at(spec, "/allocateLoadBalancerNodePorts").is_none() {
        errs.push(FieldError::required("allocateLoadBalancerNodePorts", ""));
    }
    match spec.get("loadBalancerClass").and_then(Value::as_str) {
        Some(c) if t == "LoadBalancer" => {
            qualified_name(&mut errs, &sp.child("loadBalancerClass"), c)
        }
        Some(_) => errs.push(FieldError::forbidden(
            sp.child("loadBalancerClass"),
            "may only be used when `type` is 'LoadBalancer'",
        )),
        None => {}
    }
    traffic_policies(&mut errs, svc, spec, &sp);
    errs
}

/// Upstream `validateServicePort`.
pub(super) fn service_port(
    errs: &mut ErrorList,
    port: &Value,
    require_name: bool,
    names: &mut HashSet<String>,
    p: &Path,
) {
    let name = str_at(port, "/name");
    if require_name && name.is_empty() {
        errs.push(FieldError::required(p.child("name"), ""));
    } else if !name.is_empty() {
        dns_label(errs, &p.child("name"), name);
        if !names.insert(name.to_string()) {
            errs.push(FieldError::duplicate(p.child("name"), json!(name)));
        }
    }
    let n = i64_at(port, "/port").unwrap_or(0);
    for m in port_num_errors(n) {
        errs.push(FieldError::invalid(p.child("port"), json!(n), m));
    }
    crate::builtins::util::one_of(
        errs,
        &p.child("protocol"),
        str_at(port, "/protocol"),
        &["SCTP", "TCP", "UDP"],
    );
    port_num_or_name(errs, &p.child("targetPort"), at(port, "/targetPort"));
    if let Some(ap) = port.get("appProtocol").and_then(Value::as_str) {
        qualified_name(errs, &p.child("appProtocol"), ap);
    }
}

/// Upstream `validateClientIPAffinityConfig`.
pub(super) fn client_ip_config(errs: &mut ErrorList, cfg: Option<&Value>, p: &Path) {
    let detail = "when session affinity type is ClientIP";
    let Some(cfg) = cfg else {
        errs.push(FieldError::required(p, detail));
        return;
    };
    let Some(cip) = at(cfg, "/clientIP") else {
        errs.push(FieldError::required(p.child("clientIP"), detail));
        return;
    };
    let tp = p.child("clientIP").child("timeoutSeconds");
    match i64_at(cip, "/timeoutSeconds") {
        None => errs.push(FieldError::required(tp, detail)),
        Some(t) if t <= 0 || t > MAX_AFFINITY_SECONDS => errs.push(FieldError::invalid(
            tp,
            json!(t),
            format!("must be greater than 0 and less than {MAX_AFFINITY_SECONDS}"),
        )),
        Some(_) => {}
    }
}

/// Upstream `validateServiceExternalTrafficPolicy` and the internal policy checks.
pub(super) fn traffic_policies(errs: &mut ErrorList, svc: &Value, spec: &Value, sp: &Path) {
    let etp = str_at(spec, "/externalTrafficPolicy");
    if !externally_accessible(svc) {
        if !etp.is_empty() {
            errs.push(FieldError::invalid(
                sp.child("externalTrafficPolicy"),
                json!(etp),
                "may only be set for externally-accessible services",
            ));
        }
    } else if etp.is_empty() {
        errs.push(FieldError::required(sp.child("externalTrafficPolicy"), ""));
    } else if !["Cluster", "Local"].contains(&etp) {
        errs.push(FieldError::not_supported(
            sp.child("externalTrafficPolicy"),
            json!(etp),
            &["Cluster", "Local"],
        ));
    }
    let hc = i64_at(spec, "/healthCheckNodePort").unwrap_or(0);
    if !needs_health_check(svc) {
        if hc != 0 {
            errs.push(FieldError::invalid(
                sp.child("healthCheckNodePort"),
                json!(hc),
                "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
            ));
        }
    } else if hc == 0 {
        errs.push(FieldError::required(sp.child("healthCheckNodePort"), ""));
    } else {
        for m in port_num_errors(hc) {
            errs.push(FieldError::invalid(
                sp.child("healthCheckNodePort"),
                json!(hc),
                m,
            ));
        }
    }
    match spec.get("internalTrafficPolicy").and_then(Value::as_str) {
        None => {
            if matches!(ty(svc), "NodePort" | "LoadBalancer" | "ClusterIP") {
                errs.push(FieldError::required(sp.child("internalTrafficPolicy"), ""));
            }
        }
        Some(p) if !["Cluster", "Local"].contains(&p) => {
            errs.push(FieldError::not_supported(
                sp.child("internalTrafficPolicy"),
                json!(p),
                &["Cluster", "Local"],
            ));
        }
        Some(_) => {}
    }
    if let Some(td) = spec.get("trafficDistribution").and_then(Value::as_str)
        && td != "PreferClose"
    {
        errs.push(FieldError::not_supported(
            sp.child("trafficDistribution"),
            json!(td),
            &["PreferClose"],
        ));
    }
}

/// Upstream `IsValidCIDR`.
pub(crate) fn cidr(errs: &mut ErrorList, p: &Path, value: &str) {
    let ok = value.split_once('/').is_some_and(|(addr, bits)| {
        let Ok(ip) = addr.parse::<IpAddr>() else {
            return false;
        };
        let max = if ip.is_ipv4() { 32 } else { 128 };
        bits.parse::<u8>().is_ok_and(|b| b <= max) && !bits.starts_with('+')
    });
    if !ok {
        errs.push(FieldError::invalid(
            p,
            json!(value),
            "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
        ));
    }
}

/// Upstream `ValidateNonSpecialIP`.
pub(crate) fn non_special_ip(errs: &mut ErrorList, p: &Path, value: &str) {
    let Ok(ip) = value.parse::<IpAddr>() else {
        errs.push(FieldError::invalid(
            p,
            json!(value),
            "must be a valid IP address",
        ));
        return;
    };
    if ip.is_unspecified() {
        errs.push(FieldError::invalid(
            p,
            json!(value),
            format!("may not be unspecified ({value})"),
        ));
    }
    if ip.is_loopback() {
        errs.push(FieldError::invalid(
            p,
            json!(value),
            "may not be in the loopback range (127.0.0.0/8, ::1/128)",
        ));
    }
    let link_local_unicast = match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    };
    if link_local_unicast {
        errs.push(FieldError::invalid(
            p,
            json!(value),
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)",
        ));
    }
    let link_local_multicast = match ip {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => (v6.segments()[0] & 0xff0f) == 0xff02,
    };
    if link_local_multicast {
        errs.push(FieldError::invalid(
            p,
            json!(value),
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ));
    }
}
