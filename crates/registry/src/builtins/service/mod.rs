//! Services (core/v1): upstream `SetDefaults_Service`, the cluster-IP bookkeeping of the
//! service REST storage (`normalizeClusterIPs`, `patchAllocatedValues`,
//! `dropTypeDependentFields`, IP family defaults), `ValidateService` and
//! `ValidateServiceUpdate`.
//!
//! IPs and node ports are **not allocated** here: a user-given cluster IP is validated and then
//! may not change (`spec.clusterIPs[0]: ... may not change once set`), a service without one
//! stays without one until an allocator assigns it. The cluster is single-stack IPv4.

use apimachinery::field::{ErrorList, FieldError};
use serde_json::{Value, json};

use super::util::{arr_at, at, child, default_str, default_value, each_mut, field_string, str_at};
use crate::strategy::{NameRule, Strategy};

mod ips;
mod validate;

use ips::{
    cluster_ips_update, drop_type_dependent_fields, ip_families_update, ip_family,
    normalize_cluster_ips, patch_allocated_values,
};
use validate::validate_service;
pub(crate) use validate::{cidr, non_special_ip};

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
