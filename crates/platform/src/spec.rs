//! Reading a TenantCluster's spec: the version map and node groups' sizing (spec:
//! cozystack.md §1.2, §1.9).
//!
//! Readers are lenient — a field of the wrong type reads as unset — because admission
//! ([`crate::validation`]) has already refused what is wrong, and nothing a client sends may
//! panic the controller.

use node::sizing::SizingInput;
use serde_json::Value;

/// Supported Kubernetes minors and the patch release each runs (`files/versions.yaml`).
pub const VERSIONS: &[(&str, &str)] = &[
    ("v1.35", "v1.35.6"),
    ("v1.34", "v1.34.9"),
    ("v1.33", "v1.33.13"),
    ("v1.32", "v1.32.13"),
    ("v1.31", "v1.31.14"),
];

/// The version when the spec names none.
pub const DEFAULT_VERSION: &str = "v1.35";

/// The group synthesised when `nodeGroups` is empty.
pub const DEFAULT_GROUP: &str = "md0";

/// The patch release of a supported minor.
pub fn release_of(minor: &str) -> Option<&'static str> {
    VERSIONS.iter().find(|(m, _)| *m == minor).map(|(_, r)| *r)
}

/// The allowed minors, newest first, comma separated (for messages).
pub fn allowed_versions() -> String {
    VERSIONS
        .iter()
        .map(|(m, _)| *m)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A quantity written as a string or a number, as text.
pub fn quantity_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// The spec's version minor (default `v1.35`).
/// The tenant cluster's default StorageClass (`storageClass`, default `replicated`).
pub fn storage_class(spec: &Value) -> &str {
    spec.get("storageClass")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("replicated")
}

pub fn version(spec: &Value) -> &str {
    str_at(spec, "/version")
        .filter(|s| !s.is_empty())
        .unwrap_or(DEFAULT_VERSION)
}

/// The node's sizing input from a group's spec (the same keys as a machine's).
pub fn sizing_input(group: &Value) -> SizingInput {
    machines::infra::sizing_input(group)
}

/// Whether the cluster's pods run on the host's nodes (`spec.workers.mode: shared`) rather
/// than on worker machines of its own.
pub fn shared_workers(spec: &Value) -> bool {
    spec.pointer("/workers/mode").and_then(Value::as_str) == Some("shared")
}

/// `status.workers` of a shared cluster: its mode, the host namespace its pods run in and
/// which cluster is the host (the root cluster, or the kubeconfig Secret naming another).
pub fn shared_workers_status(spec: &Value, namespace: &str) -> Value {
    let host = spec.pointer("/workers/hostCluster");
    let secret = host
        .and_then(|h| h.pointer("/kubeconfigSecretRef/name"))
        .and_then(Value::as_str);
    let host_namespace = host
        .and_then(|h| h.get("namespace"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty() && secret.is_some())
        .unwrap_or(namespace);
    let cluster = secret.map_or_else(|| "root".to_string(), |s| format!("secret/{s}"));
    serde_json::json!({"mode": "shared", "hostNamespace": host_namespace, "hostCluster": cluster})
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_supported_minor_maps_to_its_pinned_patch_release() {
        assert_eq!(release_of("v1.35"), Some("v1.35.6"));
        assert_eq!(release_of("v1.31"), Some("v1.31.14"));
        assert_eq!(release_of("v1.30"), None);
        assert_eq!(allowed_versions(), "v1.35, v1.34, v1.33, v1.32, v1.31");
    }

    #[test]
    fn a_group_reads_its_sizing() {
        let group = json!({
            "instanceType": "u1.large",
            "resources": {"cpu": 2, "memory": "8Gi"},
            "kubelet": {"evictionHardMemory": "5%"},
        });
        let s = sizing_input(&group);
        assert_eq!(s.cpu.as_deref(), Some("2"));
        assert_eq!(s.memory.as_deref(), Some("8Gi"));
        assert_eq!(s.kubelet.eviction_hard_memory.as_deref(), Some("5%"));
    }
}
