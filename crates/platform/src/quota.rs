//! Tenant quotas (spec: cozystack.md §4.6): `resourceQuotas` rendered as the namespace's
//! ResourceQuota `tenant-quota` and LimitRange `tenant-range-limits`, and the hierarchical
//! check at admission — a child may not claim more than its parent declares minus what its
//! siblings declare and what the parent's namespace already uses.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// The ResourceQuota of a tenant namespace.
pub const QUOTA_NAME: &str = "tenant-quota";
/// The LimitRange of a tenant namespace.
pub const LIMIT_RANGE_NAME: &str = "tenant-range-limits";
/// `cpu-allocation-ratio`: requests are limits divided by this.
pub const CPU_RATIO: f64 = 10.0;
/// `memory-allocation-ratio`.
pub const MEMORY_RATIO: f64 = 1.0;
/// `ephemeral-storage-allocation-ratio`.
pub const EPHEMERAL_RATIO: f64 = 40.0;

/// Object-count resources, copied as they are.
const COUNTS: &[&str] = &[
    "pods",
    "services",
    "services.loadbalancers",
    "services.nodeports",
    "services.clusterip",
    "configmaps",
    "secrets",
    "persistentvolumeclaims",
    "replicationcontrollers",
    "resourcequotas",
];

const SUFFIXES: &[(&str, f64)] = &[
    ("Ki", 1024.0),
    ("Mi", 1048576.0),
    ("Gi", 1073741824.0),
    ("Ti", 1099511627776.0),
    ("Pi", 1125899906842624.0),
    ("Ei", 1152921504606846976.0),
    ("n", 1e-9),
    ("u", 1e-6),
    ("m", 1e-3),
    ("k", 1e3),
    ("M", 1e6),
    ("G", 1e9),
    ("T", 1e12),
    ("P", 1e15),
    ("E", 1e18),
];

/// A quantity (string or number) as a number of base units; `None` when it is not one.
pub fn parse(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64().filter(|f| *f >= 0.0),
        Value::String(s) => parse_str(s),
        _ => None,
    }
}

fn parse_str(s: &str) -> Option<f64> {
    let (num, mult) = SUFFIXES
        .iter()
        .find_map(|(suf, m)| s.strip_suffix(suf).map(|n| (n, *m)))
        .unwrap_or((s, 1.0));
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    num.parse::<f64>().ok().map(|n| n * mult)
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The quota key that measures `resource`'s use on the limit side (`cpu` → `limits.cpu`).
pub fn usage_key(resource: &str) -> String {
    if COUNTS.contains(&resource) || resource.contains('.') && !resource.contains('/') {
        resource.to_string()
    } else if resource == "storage" {
        "requests.storage".into()
    } else {
        format!("limits.{resource}")
    }
}

/// The ResourceQuota `hard` map of a tenant's `resourceQuotas`.
pub fn hard(quotas: &Map<String, Value>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (k, v) in quotas {
        let t = text(v);
        let n = parse(v).unwrap_or(0.0);
        match k.as_str() {
            "cpu" => {
                out.insert("limits.cpu".into(), t);
                out.insert(
                    "requests.cpu".into(),
                    format!("{}m", (n * 1000.0 / CPU_RATIO).round() as u64),
                );
            }
            "memory" => {
                out.insert("limits.memory".into(), t);
                out.insert(
                    "requests.memory".into(),
                    format!("{}", (n / MEMORY_RATIO) as u64),
                );
            }
            "ephemeral-storage" => {
                out.insert("limits.ephemeral-storage".into(), t);
                out.insert(
                    "requests.ephemeral-storage".into(),
                    format!("{}", (n / EPHEMERAL_RATIO) as u64),
                );
            }
            "storage" => {
                out.insert("requests.storage".into(), t);
            }
            c if COUNTS.contains(&c) => {
                out.insert(c.into(), t);
            }
            other => {
                out.insert(format!("requests.{other}"), t.clone());
                out.insert(format!("limits.{other}"), t);
            }
        }
    }
    out
}

/// The ResourceQuota object of a tenant namespace.
pub fn resource_quota(ns: &str, quotas: &Map<String, Value>) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": QUOTA_NAME, "namespace": ns},
        "spec": {"hard": hard(quotas)},
    })
}

/// The LimitRange giving containers default requests and limits in a quota'd namespace.
pub fn limit_range(ns: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "LimitRange",
        "metadata": {"name": LIMIT_RANGE_NAME, "namespace": ns},
        "spec": {"limits": [{
            "type": "Container",
            "default": {"cpu": "250m", "memory": "128Mi", "ephemeral-storage": "2Gi"},
            "defaultRequest": {"cpu": "25m", "memory": "128Mi", "ephemeral-storage": "50Mi"},
        }]},
    })
}

/// Checks a child's quotas against its parent's: `parent` declared, `siblings` the other
/// children's declarations, `used` the parent namespace's ResourceQuota `status.used`. The
/// first resource over budget gives the message.
pub fn check(
    child: &Map<String, Value>,
    parent: &Map<String, Value>,
    siblings: &[&Map<String, Value>],
    used: &Map<String, Value>,
) -> Result<(), String> {
    for (r, want) in child {
        let (Some(want), Some(total)) = (parse(want), parent.get(r).and_then(parse)) else {
            continue;
        };
        let taken: f64 = siblings
            .iter()
            .filter_map(|s| s.get(r).and_then(parse))
            .sum();
        let in_use = used.get(&usage_key(r)).and_then(parse).unwrap_or(0.0);
        let left = total - taken - in_use;
        if want > left + 1e-9 {
            return Err(format!(
                "resourceQuotas[{r}]: {} exceeds what the parent tenant has left ({} declared, {} claimed by other children, {} in use)",
                text(&child[r]),
                text(&parent[r]),
                fmt(taken),
                fmt(in_use)
            ));
        }
    }
    Ok(())
}

fn fmt(n: f64) -> String {
    if n.fract() == 0.0 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn quantities_parse_binary_and_decimal_suffixes() {
        assert_eq!(parse(&json!("500m")), Some(0.5));
        assert_eq!(parse(&json!("2Gi")), Some(2147483648.0));
        assert_eq!(parse(&json!(4)), Some(4.0));
        assert_eq!(parse(&json!("lots")), None);
        assert_eq!(parse(&json!("-1")), None);
    }

    #[test]
    fn cpu_and_memory_render_limits_and_divided_requests() {
        let h = hard(&m(
            json!({"cpu": "4", "memory": "8Gi", "pods": 10, "storage": "100Gi"}),
        ));
        assert_eq!(h["limits.cpu"], "4");
        assert_eq!(h["requests.cpu"], "400m");
        assert_eq!(h["limits.memory"], "8Gi");
        assert_eq!(h["requests.memory"], "8589934592");
        assert_eq!(h["pods"], "10");
        assert_eq!(h["requests.storage"], "100Gi");
        assert!(!h.contains_key("limits.storage"));
    }

    #[test]
    fn a_child_may_take_what_the_parent_has_left_and_no_more() {
        let parent = m(json!({"cpu": "8"}));
        let sib = m(json!({"cpu": "5"}));
        let used = m(json!({"limits.cpu": "1"}));
        assert!(check(&m(json!({"cpu": "2"})), &parent, &[&sib], &used).is_ok());
        let err = check(&m(json!({"cpu": "3"})), &parent, &[&sib], &used).unwrap_err();
        assert!(err.contains("resourceQuotas[cpu]"), "{err}");
        assert!(err.contains("5 claimed by other children"), "{err}");
    }

    #[test]
    fn resources_the_parent_does_not_declare_are_not_constrained() {
        let parent = m(json!({"memory": "1Gi"}));
        assert!(check(&m(json!({"cpu": "100"})), &parent, &[], &Map::new()).is_ok());
    }
}
