//! What k8s-openapi's schemas lack: the strategic-merge-patch and server-side-apply extensions
//! of every built-in field that has them upstream (Kubernetes 1.33).
//!
//! k8s-openapi generates descriptions, types and required lists, but drops
//! `x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key`, `x-kubernetes-list-type`,
//! `x-kubernetes-list-map-keys` and `x-kubernetes-map-type`. These tables restore them; the
//! definitions pass ([`crate::definitions`]) writes them into the generated JSON schemas, so the
//! served OpenAPI documents and the structural [`apimachinery::schema::Schema`] trees agree.

mod core;
mod groups;

use std::collections::HashMap;
use std::sync::LazyLock;

/// The extensions of one field of one definition. Empty strings mean "absent".
#[derive(Debug, Clone, Copy)]
pub(crate) struct FieldRule {
    pub definition: &'static str,
    pub field: &'static str,
    /// `x-kubernetes-patch-strategy`: `merge`, `retainKeys`, `merge,retainKeys` or `replace`.
    pub patch_strategy: &'static str,
    /// `x-kubernetes-patch-merge-key`.
    pub merge_key: &'static str,
    /// `x-kubernetes-list-type`: `atomic`, `set` or `map`.
    pub list_type: &'static str,
    /// `x-kubernetes-list-map-keys`.
    pub list_map_keys: &'static [&'static str],
}

const fn f(
    definition: &'static str,
    field: &'static str,
    patch_strategy: &'static str,
    merge_key: &'static str,
    list_type: &'static str,
    list_map_keys: &'static [&'static str],
) -> FieldRule {
    FieldRule {
        definition,
        field,
        patch_strategy,
        merge_key,
        list_type,
        list_map_keys,
    }
}

/// Field `default`s upstream publishes that server-side apply needs: list-map keys a manifest
/// may omit (a container port without `protocol` is keyed by `TCP`, as kube-apiserver's
/// schema says).
pub(crate) static FIELD_DEFAULTS: &[(&str, &str, &str)] = &[
    ("io.k8s.api.core.v1.ContainerPort", "protocol", "TCP"),
    ("io.k8s.api.core.v1.ServicePort", "protocol", "TCP"),
];

/// Field-level `x-kubernetes-map-type` (maps and struct-typed fields).
#[rustfmt::skip]
pub(crate) static FIELD_MAP_TYPES: &[(&str, &str, &str)] = &[
    ("io.k8s.api.core.v1.PersistentVolumeClaimStatus", "allocatedResourceStatuses", "granular"),
    ("io.k8s.api.core.v1.PersistentVolumeSpec", "claimRef", "granular"),
    ("io.k8s.api.core.v1.PodSpec", "nodeSelector", "atomic"),
    ("io.k8s.api.core.v1.ReplicationControllerSpec", "selector", "atomic"),
    ("io.k8s.api.core.v1.ServiceSpec", "selector", "atomic"),
    ("io.k8s.api.node.v1.Scheduling", "nodeSelector", "atomic"),
];

/// Definitions that are atomic structs (`+structType=atomic`, published as
/// `x-kubernetes-map-type: atomic` on the definition): server-side apply replaces them whole.
pub(crate) static ATOMIC_STRUCTS: &[&str] = &[
    "io.k8s.api.admissionregistration.v1.MatchResources",
    "io.k8s.api.admissionregistration.v1.NamedRuleWithOperations",
    "io.k8s.api.admissionregistration.v1.ParamKind",
    "io.k8s.api.admissionregistration.v1.ParamRef",
    "io.k8s.api.admissionregistration.v1.Variable",
    "io.k8s.api.core.v1.ConfigMapKeySelector",
    "io.k8s.api.core.v1.EndpointAddress",
    "io.k8s.api.core.v1.EndpointPort",
    "io.k8s.api.core.v1.LocalObjectReference",
    "io.k8s.api.core.v1.NodeSelector",
    "io.k8s.api.core.v1.NodeSelectorTerm",
    "io.k8s.api.core.v1.ObjectFieldSelector",
    "io.k8s.api.core.v1.ObjectReference",
    "io.k8s.api.core.v1.ResourceFieldSelector",
    "io.k8s.api.core.v1.ScopeSelector",
    "io.k8s.api.core.v1.SecretKeySelector",
    "io.k8s.api.core.v1.SecretReference",
    "io.k8s.api.core.v1.TopologySelectorTerm",
    "io.k8s.api.core.v1.TypedLocalObjectReference",
    "io.k8s.api.discovery.v1.EndpointPort",
    "io.k8s.api.networking.v1.ServiceBackendPort",
    "io.k8s.api.rbac.v1.RoleRef",
    "io.k8s.api.rbac.v1.Subject",
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
    "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
];

/// Every field rule, core first.
pub(crate) fn field_rules() -> impl Iterator<Item = &'static FieldRule> {
    core::CORE.iter().chain(groups::GROUPS.iter())
}

/// The field rules grouped by definition name.
pub(crate) static BY_DEFINITION: LazyLock<HashMap<&'static str, Vec<&'static FieldRule>>> =
    LazyLock::new(|| {
        let mut map: HashMap<&'static str, Vec<&'static FieldRule>> = HashMap::new();
        for rule in field_rules() {
            map.entry(rule.definition).or_default().push(rule);
        }
        map
    });

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_field_appears_twice() {
        let mut seen = std::collections::HashSet::new();
        for r in field_rules() {
            assert!(
                seen.insert((r.definition, r.field)),
                "{}.{}",
                r.definition,
                r.field
            );
        }
    }

    #[test]
    fn list_map_keys_go_with_list_type_map() {
        for r in field_rules() {
            assert_eq!(
                r.list_map_keys.is_empty(),
                r.list_type != "map",
                "{}.{}",
                r.definition,
                r.field
            );
        }
    }

    #[test]
    fn pod_spec_containers_merge_by_name() {
        let rules = &BY_DEFINITION["io.k8s.api.core.v1.PodSpec"];
        let c = rules.iter().find(|r| r.field == "containers").unwrap();
        assert_eq!((c.patch_strategy, c.merge_key), ("merge", "name"));
        assert_eq!(c.list_map_keys, &["name"]);
    }
}
