//! Quota evaluation (upstream `pkg/quota/v1` and its core evaluators): what an object costs
//! against a ResourceQuota, which quota resource names a kind of object is charged for, the
//! pod constraints ("must specify ...") and the resource-list arithmetic admission and the
//! ResourceQuota controller share.
//!
//! Objects are JSON values as stored (already defaulted). Kinds: pods (object count and
//! compute requests/limits of non-terminal pods), services (`services.loadbalancers`,
//! `services.nodeports`), persistentvolumeclaims (`requests.storage`, per storage class), the
//! legacy count names (`configmaps`, `secrets`, ...) and `count/<resource>[.<group>]` for
//! every resource.

use std::collections::{BTreeMap, BTreeSet};

use crate::quantity::{Format, Quantity};
use serde_json::Value;

/// Quantities by resource name (`requests.cpu`, `count/pods`).
pub type ResourceList = BTreeMap<String, Quantity>;

/// Core resources whose object count has a legacy quota name besides `count/<resource>`.
const LEGACY_COUNTS: &[&str] = &[
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
];

/// Compute resource names the pod evaluator charges (besides prefixed ones).
const POD_COMPUTE: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
];

/// Resource names for which every container must state a request or limit (upstream's
/// backward-compatible `validationSet`).
const MUST_SPECIFY: &[&str] = &[
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";

/// Parses a JSON map of quantities, skipping what does not parse (validation refused those).
pub fn parse_list(v: Option<&Value>) -> ResourceList {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Quantity::from_json(v).ok().map(|q| (k.clone(), q)))
                .collect()
        })
        .unwrap_or_default()
}

/// A resource list as JSON (quantities in their upstream string form).
pub fn to_json(list: &ResourceList) -> Value {
    Value::Object(
        list.iter()
            .map(|(k, q)| (k.clone(), Value::String(q.to_string())))
            .collect(),
    )
}

/// `count/<resource>` (core) or `count/<resource>.<group>`.
pub fn object_count_name(group: &str, plural: &str) -> String {
    if group.is_empty() {
        format!("count/{plural}")
    } else {
        format!("count/{plural}.{group}")
    }
}

/// Whether a resource name is an extended resource (a domain-prefixed name outside
/// `kubernetes.io`), which quota tracks as `requests.<name>`.
fn is_extended(name: &str) -> bool {
    name.contains('/')
        && !name.starts_with("requests.")
        && !name.contains("kubernetes.io/")
        && !name.starts_with("kubernetes.io")
}

/// Whether objects of `group`/`plural` are charged for quota resource `name`.
pub fn charges(group: &str, plural: &str, name: &str) -> bool {
    if name == object_count_name(group, plural) {
        return true;
    }
    if !group.is_empty() {
        return false;
    }
    if name == plural && LEGACY_COUNTS.contains(&plural) {
        return true;
    }
    match plural {
        "pods" => {
            POD_COMPUTE.contains(&name)
                || name.starts_with("hugepages-")
                || name.starts_with("requests.hugepages-")
                || name.strip_prefix("requests.").is_some_and(is_extended)
        }
        "services" => matches!(name, "services.loadbalancers" | "services.nodeports"),
        "persistentvolumeclaims" => {
            name == "requests.storage"
                || name.split_once(STORAGE_CLASS_SUFFIX).is_some_and(|(_, r)| {
                    matches!(r, "requests.storage" | "persistentvolumeclaims")
                })
        }
        _ => false,
    }
}

/// The resource (group, plural) a quota resource name counts, for recalculating usage.
pub fn source_of(name: &str) -> Option<(String, String)> {
    if let Some(r) = name.strip_prefix("count/") {
        return Some(match r.split_once('.') {
            Some((plural, group)) => (group.to_string(), plural.to_string()),
            None => (String::new(), r.to_string()),
        });
    }
    for p in ["pods", "services", "persistentvolumeclaims"] {
        if charges("", p, name) {
            return Some((String::new(), p.to_string()));
        }
    }
    LEGACY_COUNTS
        .contains(&name)
        .then(|| (String::new(), name.to_string()))
}

fn one() -> Quantity {
    Quantity::new(1, Format::DecimalSI)
}

/// Adds `b` into `a`.
pub fn add(a: &mut ResourceList, b: &ResourceList) {
    for (k, q) in b {
        match a.get_mut(k) {
            Some(cur) => *cur += q,
            None => {
                a.insert(k.clone(), q.clone());
            }
        }
    }
}

/// The entries of `list` whose names are in `names`.
pub fn mask<'a>(list: &ResourceList, names: impl IntoIterator<Item = &'a String>) -> ResourceList {
    names
        .into_iter()
        .filter_map(|n| list.get(n).map(|q| (n.clone(), q.clone())))
        .collect()
}

/// Upstream `prettyPrint`: `name=quantity` sorted by name, joined by commas.
pub fn pretty(list: &ResourceList) -> String {
    list.iter()
        .map(|(k, q)| format!("{k}={q}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether a pod counts for compute quota (upstream `QuotaV1Pod`): not Succeeded or Failed,
/// and not past its deletion grace period.
pub fn pod_is_live(pod: &Value, now_unix: i64) -> bool {
    if matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    ) {
        return false;
    }
    let m = crate::meta::metadata(pod);
    if let (Some(ts), Some(grace)) = (
        m.get("deletionTimestamp")
            .and_then(Value::as_str)
            .and_then(crate::time::parse_unix_seconds),
        m.get("deletionGracePeriodSeconds").and_then(Value::as_i64),
    ) && now_unix > ts + grace
    {
        return false;
    }
    true
}

fn container_list(c: &Value, part: &str) -> ResourceList {
    parse_list(c.pointer(&format!("/resources/{part}")))
}

fn max_into(a: &mut ResourceList, b: &ResourceList) {
    for (k, q) in b {
        if a.get(k).is_none_or(|cur| cur < q) {
            a.insert(k.clone(), q.clone());
        }
    }
}

/// A pod's effective requests or limits (upstream `PodRequests`/`PodLimits`): the sum over
/// containers and sidecars, at least any init container's (plus the sidecars started before
/// it), plus the pod overhead.
pub fn pod_resources(spec: &Value, part: &str) -> ResourceList {
    let mut total = ResourceList::new();
    for c in spec
        .get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        add(&mut total, &container_list(c, part));
    }
    let mut sidecars = ResourceList::new();
    let mut init_max = ResourceList::new();
    for c in spec
        .get("initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let own = container_list(c, part);
        let during = if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            add(&mut total, &own);
            add(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut t = own;
            add(&mut t, &sidecars);
            t
        };
        max_into(&mut init_max, &during);
    }
    max_into(&mut total, &init_max);
    add(&mut total, &parse_list(spec.get("overhead")));
    total
}

/// Upstream `podComputeUsageHelper`.
fn compute_usage(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut r = ResourceList::new();
    r.insert("pods".into(), one());
    for name in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(q) = requests.get(name) {
            r.insert(name.into(), q.clone());
            r.insert(format!("requests.{name}"), q.clone());
        }
        if let Some(q) = limits.get(name) {
            r.insert(format!("limits.{name}"), q.clone());
        }
    }
    for (name, q) in requests {
        if name.starts_with("hugepages-") {
            r.insert(name.clone(), q.clone());
            r.insert(format!("requests.{name}"), q.clone());
        } else if is_extended(name) {
            r.insert(format!("requests.{name}"), q.clone());
        }
    }
    r
}

fn pod_usage(pod: &Value, now_unix: i64) -> ResourceList {
    let mut r = ResourceList::new();
    r.insert("count/pods".into(), one());
    if !pod_is_live(pod, now_unix) {
        return r;
    }
    let null = Value::Null;
    let spec = pod.get("spec").unwrap_or(&null);
    add(
        &mut r,
        &compute_usage(
            &pod_resources(spec, "requests"),
            &pod_resources(spec, "limits"),
        ),
    );
    r
}

fn service_usage(svc: &Value) -> ResourceList {
    let mut r = ResourceList::new();
    r.insert("count/services".into(), one());
    r.insert("services".into(), one());
    let ty = svc
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    let ports = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map_or(0, Vec::len) as i64;
    match ty {
        "LoadBalancer" => {
            r.insert("services.loadbalancers".into(), one());
            r.insert(
                "services.nodeports".into(),
                Quantity::new(ports, Format::DecimalSI),
            );
        }
        "NodePort" => {
            r.insert(
                "services.nodeports".into(),
                Quantity::new(ports, Format::DecimalSI),
            );
        }
        _ => {}
    }
    r
}

fn pvc_usage(pvc: &Value) -> ResourceList {
    let mut r = ResourceList::new();
    r.insert("count/persistentvolumeclaims".into(), one());
    r.insert("persistentvolumeclaims".into(), one());
    let class = pvc
        .pointer("/spec/storageClassName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !class.is_empty() {
        r.insert(
            format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"),
            one(),
        );
    }
    if let Some(q) = parse_list(pvc.pointer("/spec/resources/requests")).remove("storage") {
        if !class.is_empty() {
            r.insert(
                format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"),
                q.clone(),
            );
        }
        r.insert("requests.storage".into(), q);
    }
    r
}

/// What an object of `group`/`plural` costs against quota.
pub fn usage(group: &str, plural: &str, obj: &Value, now_unix: i64) -> ResourceList {
    if group.is_empty() {
        match plural {
            "pods" => return pod_usage(obj, now_unix),
            "services" => return service_usage(obj),
            "persistentvolumeclaims" => return pvc_usage(obj),
            _ => {}
        }
    }
    let mut r = ResourceList::new();
    r.insert(object_count_name(group, plural), one());
    if group.is_empty() && LEGACY_COUNTS.contains(&plural) {
        r.insert(plural.to_string(), one());
    }
    r
}

/// Upstream pod `Constraints`: when a quota limits cpu or memory, every container must state
/// the matching request or limit; the error is `must specify <resource> for: <containers>; ...`.
pub fn pod_constraints(required: &BTreeSet<String>, pod: &Value) -> Result<(), String> {
    let required: BTreeSet<&str> = required
        .iter()
        .map(String::as_str)
        .filter(|r| MUST_SPECIFY.contains(r))
        .collect();
    if required.is_empty() {
        return Ok(());
    }
    let mut missing: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for list in ["containers", "initContainers"] {
        for c in pod
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let have = compute_usage(&container_list(c, "requests"), &container_list(c, "limits"));
            let name = c.get("name").and_then(Value::as_str).unwrap_or("");
            for r in &required {
                if !have.contains_key(*r) {
                    missing.entry(r).or_default().insert(name.to_string());
                }
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(r, cs)| {
            format!(
                "{r} for: {}",
                cs.iter().cloned().collect::<Vec<_>>().join(",")
            )
        })
        .collect();
    Err(format!("must specify {}", parts.join("; ")))
}

/// Whether a quota's scopes (`spec.scopes`) select the object. Only pods are scoped; a
/// scoped quota matches nothing else.
pub fn scopes_match(quota: &Value, group: &str, plural: &str, obj: &Value) -> bool {
    let scopes: Vec<&str> = quota
        .pointer("/spec/scopes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if scopes.is_empty() {
        return true;
    }
    if !(group.is_empty() && plural == "pods") {
        return false;
    }
    let null = Value::Null;
    let spec = obj.get("spec").unwrap_or(&null);
    let terminating = spec
        .get("activeDeadlineSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|s| s >= 0);
    let best_effort =
        pod_resources(spec, "requests").is_empty() && pod_resources(spec, "limits").is_empty();
    scopes.iter().all(|s| match *s {
        "Terminating" => terminating,
        "NotTerminating" => !terminating,
        "BestEffort" => best_effort,
        "NotBestEffort" => !best_effort,
        _ => false,
    })
}

#[cfg(test)]
#[path = "quota_tests.rs"]
mod tests;
