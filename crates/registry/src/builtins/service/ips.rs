//! The cluster-IP side of Services: upstream's `normalizeClusterIPs`,
//! `patchAllocatedValues` and `dropTypeDependentFields` (what an update keeps or wipes), the
//! IP family of an address, and the checks of `clusterIPs`, `ipFamilies` and
//! `ipFamilyPolicy` on create and update.

use std::collections::HashSet;
use std::net::IpAddr;

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Value, json};

use super::{
    externally_accessible, field, is_headless, needs_cluster_ip, needs_health_check,
    needs_node_port, set_spec, ty,
};
use crate::builtins::gofmt;
use crate::builtins::podspec::spec::ip;
use crate::builtins::util::{arr_at, each_mut, i64_at, str_at};

/// Upstream `normalizeClusterIPs`: keeps `clusterIP` and `clusterIPs` in step for clients
/// that only know one of them.
pub(super) fn normalize_cluster_ips(new: &mut Value, old: Option<&Value>) {
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
pub(super) fn patch_allocated_values(new: &mut Value, old: &Value) {
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
pub(super) fn drop_type_dependent_fields(new: &mut Value, old: &Value) {
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

pub(super) fn ip_family(ip: &str) -> Option<&'static str> {
    match ip.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => Some("IPv4"),
        Ok(IpAddr::V6(_)) => Some("IPv6"),
        Err(_) => None,
    }
}

/// Upstream `ValidateServiceClusterIPsRelatedFields`.
pub(super) fn cluster_ips(errs: &mut ErrorList, svc: &Value, spec: &Value, sp: &Path) {
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
pub(super) fn cluster_ips_update(errs: &mut ErrorList, new: &Value, old: &Value) {
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
pub(super) fn ip_families_update(errs: &mut ErrorList, new: &Value, old: &Value) {
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
