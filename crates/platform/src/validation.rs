//! Admission rules of TenantClusters and Tenants (spec: cozystack.md §1.9, §3.3, §4.2), pure:
//! every problem is reported with its field path, not only the first.
//!
//! What the CRD schema already says (types, enums, `storageClass` immutability) is not
//! repeated here. Node sizing (instance types, resources both-or-neither, reservations,
//! eviction thresholds) is the node agent's own [`node::sizing::validate`], so the rules that
//! admit a group and the arithmetic that sizes its nodes are one.

use apimachinery::field::{ErrorList, FieldError, Path};
use regex::Regex;
use serde_json::{Value, json};
use std::sync::LazyLock;

use crate::naming;
use crate::spec;

/// `maxUnhealthy`: a count or a percentage.
static MAX_UNHEALTHY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[0-9]+%?$").expect("a valid pattern"));
/// DNS-1123 labels (node group names, roles).
static DNS_LABEL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").expect("a valid pattern"));
/// DNS-1035 labels (TenantCluster names).
static DNS_1035: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z]([-a-z0-9]*[a-z0-9])?$").expect("a valid pattern"));

const DURATION_HINT: &str = "must be a positive duration such as 30s, 20m, 1h or 1h30m";
/// `kubernetes-<name>` must fit a 53-character release name.
pub const MAX_CLUSTER_NAME: usize = 53 - "kubernetes-".len();

const PRESET_SERIES: &[&str] = &["t1", "c1", "s1", "u1", "m1"];
const PRESET_SIZES: &[&str] = &[
    "nano", "micro", "small", "medium", "large", "xlarge", "2xlarge", "4xlarge",
];
const LEGACY_PRESETS: &[&str] = &[
    "nano", "micro", "small", "medium", "large", "xlarge", "2xlarge",
];

fn presets() -> Vec<String> {
    let mut v: Vec<String> = PRESET_SERIES
        .iter()
        .flat_map(|s| PRESET_SIZES.iter().map(move |z| format!("{s}.{z}")))
        .chain(LEGACY_PRESETS.iter().map(|s| s.to_string()))
        .collect();
    v.sort();
    v
}

fn duration(errs: &mut ErrorList, path: &Path, v: Option<&Value>) {
    match v {
        None | Some(Value::Null) => {}
        Some(Value::String(s))
            if apimachinery::time::parse_go_duration(s).is_some_and(|n| n > 0) => {}
        Some(other) => errs.push(FieldError::invalid(
            path.as_str(),
            other.clone(),
            DURATION_HINT,
        )),
    }
}

fn max_unhealthy(errs: &mut ErrorList, path: &Path, v: Option<&Value>) {
    let ok = match v {
        None | Some(Value::Null) => true,
        Some(Value::Number(n)) => n.as_u64().is_some(),
        Some(Value::String(s)) => MAX_UNHEALTHY.is_match(s),
        Some(_) => false,
    };
    if !ok {
        errs.push(FieldError::invalid(
            path.as_str(),
            v.cloned().unwrap_or(Value::Null),
            "must be a count (3) or a percentage (50%)",
        ));
    }
}

fn node_group(errs: &mut ErrorList, path: &Path, name: &str, g: &Value) {
    if !DNS_LABEL.is_match(name) || name.len() > 63 {
        errs.push(FieldError::invalid(
            path.as_str(),
            json!(name),
            "a node group name must be a DNS label (lowercase letters, digits and '-')",
        ));
    }
    if g.get("ephemeralStorage").is_some_and(|v| !v.is_null()) {
        errs.push(FieldError::forbidden(
            path.child("ephemeralStorage").as_str(),
            "ephemeralStorage was renamed to diskSize; set diskSize instead",
        ));
    }
    let min = g.get("minReplicas").and_then(Value::as_i64);
    let max = g.get("maxReplicas").and_then(Value::as_i64);
    if let (Some(min), Some(max)) = (min, max)
        && min > max
    {
        errs.push(FieldError::invalid(
            path.child("minReplicas").as_str(),
            json!(min),
            "must be less than or equal to maxReplicas",
        ));
    }
    if let Some(roles) = g.get("roles").and_then(Value::as_array) {
        for (i, r) in roles.iter().enumerate() {
            match r.as_str() {
                Some(s) if DNS_LABEL.is_match(s) && s.len() <= 63 => {}
                _ => errs.push(FieldError::invalid(
                    path.child("roles").index(i).as_str(),
                    r.clone(),
                    "a role must be a DNS label (it becomes the label node-role.kubernetes.io/<role>)",
                )),
            }
        }
    }
    max_unhealthy(errs, &path.child("maxUnhealthy"), g.get("maxUnhealthy"));
    errs.extend(node::sizing::validate(&spec::sizing_input(g), path));
}

/// Validates a TenantCluster being created or updated in namespace `ns`.
/// A hostname a tenant or a cluster is served at: a DNS-1123 subdomain outside the names
/// the platform gives in-cluster Services (`*.svc`, `*.cluster.local`).
/// A DataStore's name: a DNS label (empty: none).
fn data_store(errs: &mut ErrorList, p: &Path, v: Option<&Value>) {
    let Some(name) = v.and_then(Value::as_str).filter(|s| !s.is_empty()) else {
        return;
    };
    for why in apimachinery::validation::is_dns1123_label(name) {
        errs.push(FieldError::invalid(p.as_str(), json!(name), why));
    }
}

fn hostname(errs: &mut ErrorList, path: &Path, v: Option<&Value>) {
    let Some(v) = v else { return };
    let Some(h) = v.as_str() else { return };
    if h.is_empty() {
        return;
    }
    for why in apimachinery::validation::is_dns1123_subdomain(h) {
        errs.push(FieldError::invalid(path.as_str(), v.clone(), why));
    }
    let lower = h.to_ascii_lowercase();
    if lower.ends_with(".svc") || lower.ends_with(".cluster.local") || lower == "localhost" {
        errs.push(FieldError::invalid(
            path.as_str(),
            v.clone(),
            "must not be an in-cluster Service name (*.svc, *.cluster.local) or localhost",
        ));
    }
}

/// `dropapp_namespace`: `ns` is a DropApp TenantCluster's own namespace (where its platform
/// cluster lives), allowed besides the tenants' namespaces.
pub fn tenant_cluster(obj: &Value, ns: &str, dropapp_namespace: bool) -> ErrorList {
    let mut errs = ErrorList::new();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !name.is_empty() && (!DNS_1035.is_match(name) || name.len() > MAX_CLUSTER_NAME) {
        errs.push(FieldError::invalid(
            "metadata.name",
            json!(name),
            format!(
                "must be a DNS-1035 label of at most {MAX_CLUSTER_NAME} characters (lowercase letters, digits and '-', starting with a letter)"
            ),
        ));
    }
    if !naming::is_tenant_namespace(ns) && !dropapp_namespace {
        errs.push(FieldError::forbidden(
            "metadata.namespace",
            "TenantClusters are created in a tenant's namespace (tenant-root or tenant-*)",
        ));
    }
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    let p = Path::new("spec");
    if let Some(config) = spec.pointer("/oidc/customConfig/config")
        && let Err(e) = apimachinery::authn_config::parse_authentication_config(config)
    {
        errs.push(FieldError::invalid(
            "spec.oidc.customConfig.config",
            json!("AuthenticationConfiguration"),
            e,
        ));
    }
    match spec.get("version") {
        None | Some(Value::Null) => {}
        Some(Value::String(v)) if spec::release_of(v).is_some() => {}
        Some(v) => {
            let shown = v
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string());
            errs.push(FieldError::invalid(
                p.child("version").as_str(),
                v.clone(),
                format!(
                    "Kubernetes version {shown} is not supported, allowed versions are {}",
                    spec::allowed_versions()
                ),
            ));
        }
    }
    hostname(&mut errs, &p.child("host"), spec.get("host"));
    data_store(&mut errs, &p.child("dataStore"), spec.get("dataStore"));
    duration(
        &mut errs,
        &p.child("maxNodeProvisionTime"),
        spec.get("maxNodeProvisionTime"),
    );
    let hc = p.child("nodeHealthCheck");
    if let Some(h) = spec.get("nodeHealthCheck") {
        max_unhealthy(&mut errs, &hc.child("maxUnhealthy"), h.get("maxUnhealthy"));
        duration(
            &mut errs,
            &hc.child("readyUnknownTimeout"),
            h.get("readyUnknownTimeout"),
        );
        duration(
            &mut errs,
            &hc.child("readyFalseTimeout"),
            h.get("readyFalseTimeout"),
        );
    }
    if let Some(cp) = spec.get("controlPlane") {
        let allowed = presets();
        let cpp = p.child("controlPlane");
        for (comp, at) in [
            ("apiServer", "/apiServer/resourcesPreset"),
            ("controllerManager", "/controllerManager/resourcesPreset"),
            ("scheduler", "/scheduler/resourcesPreset"),
            (
                "konnectivity.server",
                "/konnectivity/server/resourcesPreset",
            ),
        ] {
            if let Some(v) = cp.pointer(at).and_then(Value::as_str)
                && !allowed.iter().any(|a| a == v)
            {
                errs.push(FieldError::invalid(
                    format!("{cpp}.{comp}.resourcesPreset"),
                    json!(v),
                    format!(
                        "Preset key '{v}' invalid. Allowed values are {}",
                        allowed.join(", ")
                    ),
                ));
            }
        }
    }
    if let Some(groups) = spec.get("nodeGroups").and_then(Value::as_object) {
        let gp = p.child("nodeGroups");
        for (name, g) in groups {
            node_group(&mut errs, &gp.key(name), name, g);
        }
    }
    errs
}

/// Validates a Tenant named `name` being created in namespace `ns` (names and placement;
/// quotas are [`crate::quota`]'s).
pub fn tenant(obj: &Value, ns: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !naming::valid_tenant_name(name) {
        errs.push(FieldError::invalid(
            "metadata.name",
            json!(name),
            format!(
                "must match {} (lowercase letters and digits, starting with a letter, no dashes)",
                naming::TENANT_NAME_PATTERN
            ),
        ));
    }
    if !naming::is_tenant_namespace(ns) {
        errs.push(FieldError::forbidden(
            "metadata.namespace",
            "a Tenant is created in its parent tenant's namespace (tenant-root or tenant-*)",
        ));
    } else {
        let child = naming::tenant_namespace(ns, name);
        if child.len() > naming::MAX_NAMESPACE_LEN {
            errs.push(FieldError::invalid(
                "metadata.name",
                json!(name),
                format!(
                    "the tenant's namespace {child} would be longer than {} characters",
                    naming::MAX_NAMESPACE_LEN
                ),
            ));
        }
    }
    hostname(
        &mut errs,
        &Path::new("spec").child("host"),
        obj.pointer("/spec/host"),
    );
    data_store(
        &mut errs,
        &Path::new("spec").child("dataStore"),
        obj.pointer("/spec/dataStore"),
    );
    if let Some(q) = obj
        .pointer("/spec/resourceQuotas")
        .and_then(Value::as_object)
    {
        let qp = Path::new("spec").child("resourceQuotas");
        for (k, v) in q {
            if crate::quota::parse(v).is_none() {
                errs.push(FieldError::invalid(
                    qp.key(k).as_str(),
                    v.clone(),
                    "must be a quantity (e.g. 4, 500m, 8Gi)",
                ));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(obj: Value) -> Vec<String> {
        tenant_cluster(&obj, "tenant-foo", false)
            .iter()
            .map(|e| e.message())
            .collect()
    }

    fn tc(spec: Value) -> Value {
        json!({"metadata": {"name": "team-x"}, "spec": spec})
    }

    #[test]
    fn a_default_cluster_with_two_medium_workers_is_admitted() {
        let ok = tc(
            json!({"nodeGroups": {"md0": {"minReplicas": 2, "maxReplicas": 3, "instanceType": "u1.medium"}}}),
        );
        assert!(messages(ok).is_empty());
    }

    #[test]
    fn an_unsupported_version_is_refused_with_the_allowed_list() {
        let m = messages(tc(json!({"version": "v1.30"})));
        assert_eq!(
            m,
            [
                "spec.version: Invalid value: \"v1.30\": Kubernetes version v1.30 is not supported, allowed versions are v1.35, v1.34, v1.33, v1.32, v1.31"
            ]
        );
    }

    #[test]
    fn ephemeral_storage_points_to_disk_size() {
        let m = messages(tc(
            json!({"nodeGroups": {"md0": {"ephemeralStorage": "20Gi"}}}),
        ));
        assert_eq!(m.len(), 1);
        assert!(m[0].starts_with("spec.nodeGroups[md0].ephemeralStorage: Forbidden"));
        assert!(m[0].contains("diskSize"));
    }

    #[test]
    fn durations_and_max_unhealthy_are_checked_with_their_paths() {
        let m = messages(tc(json!({
            "maxNodeProvisionTime": "0m",
            "nodeHealthCheck": {"maxUnhealthy": "half", "readyUnknownTimeout": "-5m", "readyFalseTimeout": "10m"},
        })));
        assert_eq!(m.len(), 3, "{m:?}");
        assert!(m[0].starts_with("spec.maxNodeProvisionTime: Invalid value: \"0m\""));
        assert!(m[1].starts_with("spec.nodeHealthCheck.maxUnhealthy"));
        assert!(m[2].starts_with("spec.nodeHealthCheck.readyUnknownTimeout"));
    }

    #[test]
    fn every_error_is_reported_not_only_the_first() {
        let m = messages(tc(json!({
            "version": "v2",
            "nodeGroups": {"md0": {"instanceType": "z9.huge", "resources": {"cpu": "2"}, "minReplicas": 3, "maxReplicas": 1}},
        })));
        assert!(m.len() >= 4, "{m:?}");
    }

    #[test]
    fn eviction_thresholds_come_from_the_node_sizing_rules() {
        let m = messages(tc(
            json!({"nodeGroups": {"md0": {"instanceType": "u1.medium",
            "kubelet": {"evictionHardMemory": "10%", "evictionSoftMemory": "5%"}}}}),
        ));
        assert!(!m.is_empty());
        assert!(
            m.iter()
                .all(|e| e.starts_with("spec.nodeGroups[md0].kubelet")),
            "{m:?}"
        );
    }

    #[test]
    fn hosts_must_be_dns_names_outside_the_in_cluster_service_domains() {
        assert!(messages(tc(json!({"host": "api.team-x.example.org"}))).is_empty());
        for bad in [
            "Not_A_Host",
            "kubernetes-b.tenant-b.svc",
            "x.svc.cluster.local",
        ] {
            let m = messages(tc(json!({"host": bad})));
            assert!(
                m.iter().any(|e| e.starts_with("spec.host: Invalid value")),
                "{bad}: {m:?}"
            );
        }
    }

    #[test]
    fn clusters_outside_tenant_namespaces_are_refused() {
        let errs = tenant_cluster(&tc(json!({})), "default", false);
        assert!(tenant_cluster(&tc(json!({})), "team-x", true).is_empty());
        assert_eq!(errs.len(), 1);
        assert!(errs.iter().next().unwrap().message().contains("tenant"));
    }

    #[test]
    fn tenant_names_with_dashes_are_refused() {
        let errs = tenant(&json!({"metadata": {"name": "foo-bar"}}), "tenant-root");
        assert_eq!(errs.len(), 1);
        assert!(
            errs.iter()
                .next()
                .unwrap()
                .message()
                .contains("^[a-z][a-z0-9]*$")
        );
    }
}
