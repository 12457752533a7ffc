//! Reading a TenantCluster's spec: the version map and node groups as the node agent's
//! templates (spec: cozystack.md §1.2, §1.9).
//!
//! Readers are lenient — a field of the wrong type reads as unset — because admission
//! ([`crate::validation`]) has already refused what is wrong, and nothing a client sends may
//! panic the controller.

use std::collections::BTreeMap;

use node::NodeTemplate;
use node::sizing::{KubeletOverrides, SizingInput};
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
pub fn version(spec: &Value) -> &str {
    str_at(spec, "/version")
        .filter(|s| !s.is_empty())
        .unwrap_or(DEFAULT_VERSION)
}

/// One node group, ready for the node agent.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeGroup {
    pub name: String,
    pub min_replicas: usize,
    pub max_replicas: usize,
    pub template: NodeTemplate,
}

/// The node's sizing input from a group's spec.
pub fn sizing_input(group: &Value) -> SizingInput {
    let kubelet = |k: &str| str_at(group, &format!("/kubelet/{k}")).map(str::to_string);
    SizingInput {
        instance_type: str_at(group, "/instanceType").map(str::to_string),
        cpu: quantity_text(group.pointer("/resources/cpu")),
        memory: quantity_text(group.pointer("/resources/memory")),
        kubelet: KubeletOverrides {
            system_reserved_memory: kubelet("systemReservedMemory"),
            kube_reserved_memory: kubelet("kubeReservedMemory"),
            system_reserved_cpu: kubelet("systemReservedCpu"),
            kube_reserved_cpu: kubelet("kubeReservedCpu"),
            eviction_hard_memory: kubelet("evictionHardMemory"),
            eviction_soft_memory: kubelet("evictionSoftMemory"),
        },
        disk_size: quantity_text(group.get("diskSize")),
        gpus: group
            .get("gpus")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|g| g.get("name").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
    }
}

fn count(v: Option<&Value>, default: usize) -> usize {
    v.and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(default)
}

/// The node groups of a spec, by name; the default `md0` (no minimum) when none is given.
pub fn node_groups(spec: &Value) -> Vec<NodeGroup> {
    let groups = spec.get("nodeGroups").and_then(Value::as_object);
    let Some(groups) = groups.filter(|g| !g.is_empty()) else {
        let mut t = NodeTemplate::new("u1.medium", &["ingress-nginx"]);
        t.labels = BTreeMap::new();
        return vec![NodeGroup {
            name: DEFAULT_GROUP.into(),
            min_replicas: 0,
            max_replicas: 10,
            template: t,
        }];
    };
    groups
        .iter()
        .map(|(name, g)| {
            let roles: Vec<String> = g
                .get("roles")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            let mut template = NodeTemplate {
                sizing: sizing_input(g),
                roles,
                ..NodeTemplate::default()
            };
            template
                .labels
                .insert(NODE_GROUP_LABEL.to_string(), name.clone());
            NodeGroup {
                name: name.clone(),
                min_replicas: count(g.get("minReplicas"), 0),
                max_replicas: count(g.get("maxReplicas"), 10),
                template,
            }
        })
        .collect()
}

/// The label naming a node's group.
pub const NODE_GROUP_LABEL: &str = "platform.matryoshka.dev/node-group";

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
    fn an_empty_node_group_map_gives_md0_without_a_minimum() {
        let g = node_groups(&json!({}));
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].name, "md0");
        assert_eq!(g[0].min_replicas, 0);
    }

    #[test]
    fn a_group_reads_sizing_roles_and_counts() {
        let spec = json!({"nodeGroups": {"workers": {
            "minReplicas": 2, "maxReplicas": 4, "instanceType": "u1.large",
            "resources": {"cpu": 2, "memory": "8Gi"}, "roles": ["ingress-nginx"],
            "kubelet": {"evictionHardMemory": "5%"},
        }}});
        let g = &node_groups(&spec)[0];
        assert_eq!((g.min_replicas, g.max_replicas), (2, 4));
        assert_eq!(g.template.sizing.cpu.as_deref(), Some("2"));
        assert_eq!(g.template.sizing.memory.as_deref(), Some("8Gi"));
        assert_eq!(
            g.template.sizing.kubelet.eviction_hard_memory.as_deref(),
            Some("5%")
        );
        assert_eq!(g.template.roles, ["ingress-nginx"]);
    }
}
