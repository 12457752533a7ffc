//! Services (core/v1): upstream `SetDefaults_Service`, the cluster-IP bookkeeping of the
//! service REST storage (`normalizeClusterIPs`, `patchAllocatedValues`,
//! `dropTypeDependentFields`, IP family defaults), `ValidateService` and
//! `ValidateServiceUpdate`.
//!
//! IPs and node ports are **not allocated** here: a user-given cluster IP is validated and then
//! may not change (`spec.clusterIPs[0]: ... may not change once set`), a service without one
//! stays without one until an allocator assigns it. The cluster is single-stack IPv4.

use std::collections::HashSet;
use std::net::IpAddr;

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Value, json};

use super::gofmt;
use super::podspec::spec::ip;
use super::util::{
    arr_at, at, child, default_str, default_value, dns_label, dns_subdomain, each_mut,
    field_string, i64_at, labels, port_num_errors, port_num_or_name, qualified_name, str_at,
};
use crate::strategy::{NameRule, Strategy};

/// Upstream `DefaultClientIPServiceAffinitySeconds` (three hours).
const DEFAULT_AFFINITY_SECONDS: i64 = 10800;
/// Upstream `MaxClientIPServiceAffinitySeconds` (a day).
const MAX_AFFINITY_SECONDS: i64 = 86400;

/// Services.
pub struct ServiceStrategy;

fn ty(svc: &Value) -> &str {
    str_at(svc, "/spec/type")
}

fn needs_cluster_ip(svc: &Value) -> bool {
    ty(svc) != "ExternalName"
}

fn needs_node_port(svc: &Value) -> bool {
    matches!(ty(svc), "NodePort" | "LoadBalancer")
}

fn needs_health_check(svc: &Value) -> bool {
    ty(svc) == "LoadBalancer" && str_at(svc, "/spec/externalTrafficPolicy") == "Local"
}

/// Upstream `ExternallyAccessible`: load balancers, node ports, or cluster IPs with
/// external IPs.
fn externally_accessible(svc: &Value) -> bool {
    needs_node_port(svc) || (ty(svc) == "ClusterIP" && !arr_at(svc, "/spec/externalIPs").is_empty())
}

fn is_headless(svc: &Value) -> bool {
    let ips = arr_at(svc, "/spec/clusterIPs");
    ips.len() == 1 && ips[0].as_str() == Some("None")
}

fn field<'a>(svc: &'a Value, name: &str) -> Option<&'a Value> {
    at(svc, &format!("/spec/{name}"))
}

/// Sets or removes `spec.<name>`.
fn set_spec(svc: &mut Value, name: &str, v: Option<Value>) {
    if let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) {
        match v {
            Some(v) => {
                spec.insert(name.into(), v);
            }
            None => {
                spec.remove(name);
            }
        }
    }
}

/// Upstream `normalizeClusterIPs`: keeps `clusterIP` and `clusterIPs` in step for clients
/// that only know one of them.
fn normalize_cluster_ips(new: &mut Value, old: Option<&Value>) {
    let ip_new = str_at(new, "/spec/clusterIP").to_string();
    let ips_new_empty = arr_at(new, "/spec/clusterIPs").is_empty();
    let Some(old) = old else {
        if !ip_new.is_empty() && ips_new_empty {
            set_spec(new, "clusterIPs", Some(json!([ip_new])));
        }
        return;
    };
    let ip_old = str_at(old, "/spec/clusterIP");
    let same_ips = field(old, "clusterIPs") == field(new, "clusterIPs");
    if !arr_at(old, "/spec/clusterIPs").is_empty() && ips_new_empty && ip_old == ip_new {
        set_spec(new, "clusterIPs", field(old, "clusterIPs").cloned());
    }
    if ip_old != ip_new {
        if !ip_old.is_empty() && ip_new.is_empty() && same_ips {
            set_spec(new, "clusterIPs", None);
        }
        if !ip_new.is_empty() && same_ips {
            set_spec(new, "clusterIPs", Some(json!([ip_new])));
        }
    }
}

/// Upstream `patchAllocatedValues`: an update that omits allocated values keeps them.
fn patch_allocated_values(new: &mut Value, old: &Value) {
    if needs_cluster_ip(old) && needs_cluster_ip(new) {
        if str_at(new, "/spec/clusterIP").is_empty() {
            set_spec(new, "clusterIP", field(old, "clusterIP").cloned());
        }
        if arr_at(new, "/spec/clusterIPs").is_empty() && !arr_at(old, "/spec/clusterIPs").is_empty()
        {
            set_spec(new, "clusterIPs", field(old, "clusterIPs").cloned());
        }
    }
    if needs_node_port(old) && needs_node_port(new) {
        let used = |s: &Value| -> HashSet<i64> {
            arr_at(s, "/spec/ports")
                .iter()
                .filter_map(|p| i64_at(p, "/nodePort"))
                .filter(|n| *n != 0)
                .collect()
        };
        let both: HashSet<i64> = used(old).intersection(&used(new)).copied().collect();
        let by_name: Vec<(String, i64)> = arr_at(old, "/spec/ports")
            .iter()
            .map(|p| {
                (
                    str_at(p, "/name").to_string(),
                    i64_at(p, "/nodePort").unwrap_or(0),
                )
            })
            .collect();
        if let Some(spec) = new.get_mut("spec") {
            each_mut(spec, "ports", |p| {
                if p.is_object() && i64_at(p, "/nodePort").unwrap_or(0) == 0 {
                    let name = str_at(p, "/name").to_string();
                    if let Some((_, n)) = by_name.iter().rev().find(|(k, _)| *k == name)
                        && *n != 0
                        && !both.contains(n)
                    {
                        p["nodePort"] = json!(n);
                    }
                }
            });
        }
    }
    if needs_health_check(old)
        && needs_health_check(new)
        && i64_at(new, "/spec/healthCheckNodePort").unwrap_or(0) == 0
    {
        set_spec(
            new,
            "healthCheckNodePort",
            field(old, "healthCheckNodePort").cloned(),
        );
    }
}

/// Upstream `dropTypeDependentFields`: a type change wipes what no longer applies, unless
/// the user changed it too.
fn drop_type_dependent_fields(new: &mut Value, old: &Value) {
    if !needs_cluster_ip(new)
        && needs_cluster_ip(old)
        && field(old, "clusterIPs") == field(new, "clusterIPs")
    {
        set_spec(new, "clusterIP", None);
        set_spec(new, "clusterIPs", None);
        if field(old, "ipFamilyPolicy") == field(new, "ipFamilyPolicy") {
            set_spec(new, "ipFamilyPolicy", None);
        }
        if field(old, "ipFamilies") == field(new, "ipFamilies") {
            set_spec(new, "ipFamilies", None);
        }
    }
    let node_ports = |s: &Value| -> Vec<i64> {
        arr_at(s, "/spec/ports")
            .iter()
            .map(|p| i64_at(p, "/nodePort").unwrap_or(0))
            .collect()
    };
    if !needs_node_port(new)
        && needs_node_port(old)
        && node_ports(old) == node_ports(new)
        && let Some(spec) = new.get_mut("spec")
    {
        each_mut(spec, "ports", |p| {
            if let Some(m) = p.as_object_mut() {
                m.remove("nodePort");
            }
        });
    }
    if !needs_health_check(new)
        && needs_health_check(old)
        && field(old, "healthCheckNodePort") == field(new, "healthCheckNodePort")
    {
        set_spec(new, "healthCheckNodePort", None);
    }
    if ty(old) == "LoadBalancer" && ty(new) != "LoadBalancer" {
        let (o, n) = (
            field(old, "allocateLoadBalancerNodePorts"),
            field(new, "allocateLoadBalancerNodePorts"),
        );
        if o.is_some() && o == n {
            set_spec(new, "allocateLoadBalancerNodePorts", None);
        }
        if field(old, "loadBalancerClass") == field(new, "loadBalancerClass") {
            set_spec(new, "loadBalancerClass", None);
        }
    }
    if externally_accessible(old)
        && !externally_accessible(new)
        && field(old, "externalTrafficPolicy") == field(new, "externalTrafficPolicy")
    {
        set_spec(new, "externalTrafficPolicy", None);
    }
    if ty(new) != "LoadBalancer"
        && let Some(status) = new.get_mut("status").filter(|s| s.is_object())
    {
        status["loadBalancer"] = json!({});
    }
}

fn ip_family(ip: &str) -> Option<&'static str> {
    match ip.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => Some("IPv4"),
        Ok(IpAddr::V6(_)) => Some("IPv6"),
        Err(_) => None,
    }
}

impl Strategy for ServiceStrategy {
    fn name_rule(&self) -> NameRule {
        NameRule::Dns1035Label
    }

    fn default(&self, obj: &mut Value) {
        let Some(spec) = child(obj, "spec") else {
            return;
        };
        default_str(spec, "sessionAffinity", "None");
        match str_at(spec, "/sessionAffinity") {
            "None" => {
                if let Some(m) = spec.as_object_mut() {
                    m.remove("sessionAffinityConfig");
                }
            }
            "ClientIP" if at(spec, "/sessionAffinityConfig/clientIP/timeoutSeconds").is_none() => {
                spec["sessionAffinityConfig"] =
                    json!({"clientIP": {"timeoutSeconds": DEFAULT_AFFINITY_SECONDS}});
            }
            _ => {}
        }
        default_str(spec, "type", "ClusterIP");
        each_mut(spec, "ports", |p| {
            default_str(p, "protocol", "TCP");
            let unset = match p.get("targetPort") {
                None | Some(Value::Null) => true,
                Some(Value::String(s)) => s.is_empty(),
                Some(v) => v.as_i64() == Some(0),
            };
            if unset && let Some(port) = p.get("port").cloned() {
                p["targetPort"] = port;
            }
        });
        let svc_view = json!({"spec": {"type": spec.get("type").cloned(), "externalIPs": spec.get("externalIPs").cloned()}});
        if externally_accessible(&svc_view) {
            default_str(spec, "externalTrafficPolicy", "Cluster");
        }
        let t = str_at(spec, "/type").to_string();
        if matches!(t.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP") {
            default_value(spec, "internalTrafficPolicy", json!("Cluster"));
        }
        if t == "LoadBalancer" {
            default_value(spec, "allocateLoadBalancerNodePorts", json!(true));
        }
        if t != "ExternalName" {
            default_value(spec, "ipFamilyPolicy", json!("SingleStack"));
            if arr_at(spec, "/ipFamilies").is_empty() {
                let mut families: Vec<&str> = arr_at(spec, "/clusterIPs")
                    .iter()
                    .filter_map(|ip| ip.as_str().and_then(ip_family))
                    .collect();
                families.dedup();
                if families.is_empty() {
                    families.push("IPv4");
                }
                spec["ipFamilies"] = json!(families);
            }
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"loadBalancer": {}});
        normalize_cluster_ips(obj, None);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        normalize_cluster_ips(new, Some(old));
        patch_allocated_values(new, old);
        drop_type_dependent_fields(new, old);
        if needs_cluster_ip(old) && needs_cluster_ip(new) {
            for f in ["ipFamilies", "ipFamilyPolicy"] {
                if field(new, f).is_none() {
                    set_spec(new, f, field(old, f).cloned());
                }
            }
        }
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        validate_service(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        cluster_ips_update(&mut errs, new, old);
        ip_families_update(&mut errs, new, old);
        if ty(old) == "LoadBalancer"
            && ty(new) == "LoadBalancer"
            && field(old, "loadBalancerClass") != field(new, "loadBalancerClass")
        {
            errs.push(FieldError::invalid(
                "spec.loadBalancerClass",
                field(new, "loadBalancerClass")
                    .cloned()
                    .unwrap_or(json!("null")),
                "may not change once set",
            ));
        }
        if needs_health_check(old)
            && needs_health_check(new)
            && field(old, "healthCheckNodePort") != field(new, "healthCheckNodePort")
        {
            errs.push(FieldError::forbidden(
                "spec.healthCheckNodePort",
                "field is immutable",
            ));
        }
        errs.extend(validate_service(new));
        errs
    }

    fn field_names(&self) -> &[&'static str] {
        &["spec.clusterIP", "spec.type"]
    }

    fn field(&self, obj: &Value, name: &str) -> Option<String> {
        match name {
            "spec.clusterIP" => Some(field_string(obj, "/spec/clusterIP")),
            "spec.type" => Some(field_string(obj, "/spec/type")),
            _ => None,
        }
    }
}

/// Upstream `ValidateService`.
fn validate_service(svc: &Value) -> ErrorList {
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
fn service_port(
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
    super::util::one_of(
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
fn client_ip_config(errs: &mut ErrorList, cfg: Option<&Value>, p: &Path) {
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

/// Upstream `ValidateServiceClusterIPsRelatedFields`.
fn cluster_ips(errs: &mut ErrorList, svc: &Value, spec: &Value, sp: &Path) {
    if ty(svc) == "ExternalName" {
        return;
    }
    let ips_path = sp.child("clusterIPs");
    let ips = arr_at(spec, "/clusterIPs");
    let rendered = || gofmt::string_slice(spec.get("clusterIPs"));
    let cip = str_at(spec, "/clusterIP");
    if !cip.is_empty() {
        if ips.is_empty() {
            errs.push(FieldError::required(&ips_path, ""));
        } else if ips[0].as_str() != Some(cip) {
            errs.push(gofmt::invalid(
                &ips_path,
                rendered(),
                "first value must match `clusterIP`",
            ));
        }
    } else if !ips.is_empty() {
        errs.push(gofmt::invalid(
            &ips_path,
            rendered(),
            "must be empty when `clusterIP` is not specified",
        ));
    }
    let fam_path = sp.child("ipFamilies");
    let mut seen = HashSet::new();
    for (i, f) in arr_at(spec, "/ipFamilies").iter().enumerate() {
        let f = f.as_str().unwrap_or("");
        if !["IPv4", "IPv6"].contains(&f) {
            errs.push(FieldError::not_supported(
                fam_path.index(i),
                json!(f),
                &["IPv4", "IPv6"],
            ));
        }
        if !seen.insert(f) {
            errs.push(FieldError::duplicate(fam_path.index(i), json!(f)));
        }
    }
    if let Some(policy) = spec.get("ipFamilyPolicy").and_then(Value::as_str) {
        const POLICIES: [&str; 3] = ["PreferDualStack", "RequireDualStack", "SingleStack"];
        if !POLICIES.contains(&policy) {
            errs.push(FieldError::not_supported(
                sp.child("ipFamilyPolicy"),
                json!(policy),
                &POLICIES,
            ));
        }
    }
    let mut invalid = false;
    for (i, v) in ips.iter().enumerate() {
        let s = v.as_str().unwrap_or("");
        if i == 0 && s == "None" {
            if ips.len() > 1 {
                invalid = true;
                errs.push(gofmt::invalid(
                    &ips_path,
                    rendered(),
                    "'None' must be the first and only value",
                ));
            }
            continue;
        }
        let before = errs.len();
        ip(errs, &ips_path.index(i), s);
        invalid |= errs.len() != before;
    }
    if ips.len() > 2 {
        errs.push(gofmt::invalid(
            &ips_path,
            rendered(),
            "may only hold up to 2 values",
        ));
    }
    if invalid {
        return;
    }
    if ips.len() > 1 {
        let fams: HashSet<Option<&str>> =
            ips.iter().map(|v| v.as_str().and_then(ip_family)).collect();
        if fams.len() != ips.len() {
            errs.push(gofmt::invalid(
                &ips_path,
                rendered(),
                "may specify no more than one IP for each IP family",
            ));
        }
    }
    if !is_headless(svc) {
        let fams = arr_at(spec, "/ipFamilies");
        for (i, v) in ips.iter().enumerate() {
            let (Some(want), Some(ip)) = (fams.get(i).and_then(Value::as_str), v.as_str()) else {
                break;
            };
            let got = ip_family(ip);
            if want == "IPv4" && got == Some("IPv6") {
                errs.push(FieldError::invalid(
                    ips_path.index(i),
                    json!(ip),
                    format!("expected an IPv4 value as indicated by `ipFamilies[{i}]`"),
                ));
            }
            if want == "IPv6" && got != Some("IPv6") {
                errs.push(FieldError::invalid(
                    ips_path.index(i),
                    json!(ip),
                    format!("expected an IPv6 value as indicated by `ipFamilies[{i}]`"),
                ));
            }
        }
    }
}

/// Upstream `validateUpgradeDowngradeClusterIPs`: allocated cluster IPs never change.
fn cluster_ips_update(errs: &mut ErrorList, new: &Value, old: &Value) {
    if ty(new) == "ExternalName"
        || ty(old) == "ExternalName"
        || (is_headless(new) && is_headless(old))
    {
        return;
    }
    let p = Path::new("spec").child("clusterIPs");
    let (n, o) = (
        arr_at(new, "/spec/clusterIPs"),
        arr_at(old, "/spec/clusterIPs"),
    );
    let rendered = || gofmt::string_slice(new.pointer("/spec/clusterIPs"));
    if n.len() == o.len() {
        for (i, ip) in o.iter().enumerate() {
            if Some(ip) != n.get(i) {
                errs.push(gofmt::invalid(
                    &p.index(i),
                    rendered(),
                    "may not change once set",
                ));
            }
        }
    } else if o.len() > n.len() {
        if n.is_empty() {
            errs.push(gofmt::invalid(
                &p.index(0),
                rendered(),
                "primary clusterIP can not be unset",
            ));
        }
        if !o.is_empty() && !n.is_empty() && n[0] != o[0] {
            errs.push(gofmt::invalid(
                &p.index(0),
                rendered(),
                "may not change once set",
            ));
        }
        if n.len() == 1 && str_at(new, "/spec/ipFamilyPolicy") != "SingleStack" {
            errs.push(FieldError::invalid(
                "spec.ipFamilyPolicy",
                field(new, "ipFamilyPolicy")
                    .cloned()
                    .unwrap_or(json!("null")),
                "must be set to 'SingleStack' when releasing the secondary clusterIP",
            ));
        }
    } else if !o.is_empty() && n[0] != o[0] {
        errs.push(gofmt::invalid(
            &p.index(0),
            rendered(),
            "may not change once set",
        ));
    }
}

/// Upstream `validateUpgradeDowngradeIPFamilies`.
fn ip_families_update(errs: &mut ErrorList, new: &Value, old: &Value) {
    if ty(new) == "ExternalName"
        || ty(old) == "ExternalName"
        || is_headless(new)
        || is_headless(old)
    {
        return;
    }
    let p = Path::new("spec").child("ipFamilies");
    let (n, o) = (
        arr_at(new, "/spec/ipFamilies"),
        arr_at(old, "/spec/ipFamilies"),
    );
    let rendered = gofmt::string_slice(new.pointer("/spec/ipFamilies"));
    if n.len() == o.len() {
        if n != o {
            errs.push(gofmt::invalid(
                &p.index(0),
                rendered,
                "may not change once set",
            ));
        }
    } else if !o.is_empty() && !n.is_empty() && n[0] != o[0] {
        errs.push(gofmt::invalid(
            &p.index(0),
            gofmt::string_slice(new.pointer("/spec/clusterIPs")),
            "may not change once set",
        ));
    }
}

/// Upstream `validateServiceExternalTrafficPolicy` and the internal policy checks.
fn traffic_policies(errs: &mut ErrorList, svc: &Value, spec: &Value, sp: &Path) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal() -> Value {
        json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
    }

    fn created(mut svc: Value) -> Value {
        ServiceStrategy.prepare_for_create(&mut svc);
        ServiceStrategy.default(&mut svc);
        svc
    }

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn services_are_defaulted_without_allocating_an_ip() {
        let svc = created(minimal());
        assert_eq!(
            svc["spec"],
            json!({
                "selector": {"app": "web"},
                "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
                "sessionAffinity": "None",
                "type": "ClusterIP",
                "internalTrafficPolicy": "Cluster",
                "ipFamilyPolicy": "SingleStack",
                "ipFamilies": ["IPv4"],
            })
        );
        assert_eq!(svc["status"], json!({"loadBalancer": {}}));
        assert!(ServiceStrategy.validate(&svc).is_empty());
    }

    #[test]
    fn node_ports_get_an_external_traffic_policy() {
        let mut svc = minimal();
        svc["spec"]["type"] = json!("LoadBalancer");
        let svc = created(svc);
        assert_eq!(svc["spec"]["externalTrafficPolicy"], json!("Cluster"));
        assert_eq!(svc["spec"]["allocateLoadBalancerNodePorts"], json!(true));
    }

    #[test]
    fn given_cluster_ips_are_validated_and_kept() {
        let mut svc = minimal();
        svc["spec"]["clusterIP"] = json!("10.96.0.10");
        let old = created(svc);
        assert_eq!(old["spec"]["clusterIPs"], json!(["10.96.0.10"]));
        // An update that omits the IP keeps it.
        let mut new = minimal();
        ServiceStrategy.prepare_for_update(&mut new, &old);
        ServiceStrategy.default(&mut new);
        assert_eq!(new["spec"]["clusterIP"], json!("10.96.0.10"));
        assert!(ServiceStrategy.validate_update(&new, &old).is_empty());
        // An update that changes it is refused.
        let mut new = old.clone();
        new["spec"]["clusterIP"] = json!("10.96.0.11");
        ServiceStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(
            messages(&ServiceStrategy.validate_update(&new, &old)),
            vec![
                "spec.clusterIPs[0]: Invalid value: []string{\"10.96.0.11\"}: may not change once set"
            ]
        );
        let mut bad = minimal();
        bad["spec"]["clusterIP"] = json!("10.96.0.300");
        assert_eq!(
            messages(&ServiceStrategy.validate(&created(bad))),
            vec![
                "spec.clusterIPs[0]: Invalid value: \"10.96.0.300\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
            ]
        );
    }

    #[test]
    fn ports_are_required_unique_and_in_range() {
        let mut svc = minimal();
        svc["spec"]["ports"] = json!([{"name": "a", "port": 80}, {"name": "b", "port": 80}, {"name": "c", "port": 70000, "targetPort": "http_x"}]);
        svc["spec"]["type"] = json!("Fancy");
        let msgs = messages(&ServiceStrategy.validate(&created(svc)));
        assert_eq!(
            msgs,
            vec![
                "spec.ports[2].port: Invalid value: 70000: must be between 1 and 65535, inclusive",
                "spec.ports[2].targetPort: Invalid value: \"http_x\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "spec.type: Unsupported value: \"Fancy\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"",
                "spec.ports[1]: Duplicate value: core.ServicePort{Name:\"\", Protocol:\"TCP\", AppProtocol:(*string)(nil), Port:80, TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}",
            ]
        );
        let mut svc = minimal();
        svc["spec"]["ports"] = json!([]);
        assert_eq!(
            messages(&ServiceStrategy.validate(&created(svc))),
            vec!["spec.ports: Required value"]
        );
    }

    #[test]
    fn names_must_be_dns_1035_labels() {
        assert!(!ServiceStrategy.name_rule().check("1abc", false).is_empty());
    }

    #[test]
    fn cluster_ip_and_type_are_selectable() {
        let svc = created(minimal());
        assert_eq!(
            ServiceStrategy.field(&svc, "spec.type").as_deref(),
            Some("ClusterIP")
        );
        assert_eq!(
            ServiceStrategy.field(&svc, "spec.clusterIP").as_deref(),
            Some("")
        );
    }
}
