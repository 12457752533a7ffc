//! Structural schemas of the built-in kinds, compiled once from the built-in definitions.
//!
//! Every definition is compiled exactly once and shared: all uses of `PodSpec` (Pod, PodTemplate,
//! Deployment, Job, ...) point at the same `Arc`, except where a field adds its own description
//! or extensions on top (then a shallow copy carries them).

use std::collections::HashMap;
use std::sync::LazyLock;

use apimachinery::schema::SchemaRef;

use crate::definitions::DEFINITIONS;
use crate::kinds::{EVERY_GROUP_VERSION, served_group_versions};
use crate::structural::Compiler;

type Key = (String, String, String);

static BUILTIN: LazyLock<HashMap<Key, SchemaRef>> = LazyLock::new(|| {
    let defs = &*DEFINITIONS;
    let mut compiler = Compiler::new(Some(&defs.schemas));
    let mut out = HashMap::new();
    for ((group, version, kind), name) in &defs.kinds {
        let schema = compiler.definition(name);
        if EVERY_GROUP_VERSION.contains(&kind.as_str()) {
            for (g, v) in served_group_versions() {
                out.insert((g.to_string(), v.to_string(), kind.clone()), schema.clone());
            }
            out.insert(
                ("meta.k8s.io".into(), "v1".into(), kind.clone()),
                schema.clone(),
            );
        }
        if kind == "Status" {
            out.insert(
                ("meta.k8s.io".into(), "v1".into(), kind.clone()),
                schema.clone(),
            );
        }
        out.insert(
            (group.to_string(), version.to_string(), kind.clone()),
            schema,
        );
    }
    out
});

/// The structural schema of a built-in kind (or of its `<Kind>List`), with descriptions and
/// every patch, list and map extension upstream publishes. `DeleteOptions` and `WatchEvent`
/// exist in every served group-version and in `meta.k8s.io/v1`, `Status` in `v1` and
/// `meta.k8s.io/v1`.
pub fn builtin_schema(group: &str, version: &str, kind: &str) -> Option<SchemaRef> {
    BUILTIN
        .get(&(group.to_string(), version.to_string(), kind.to_string()))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use apimachinery::schema::{ListType, MapType, PatchStrategy, Type};

    fn field(kind: (&str, &str, &str), path: &str) -> SchemaRef {
        let root = builtin_schema(kind.0, kind.1, kind.2).unwrap();
        let parts: Vec<&str> = path.split('.').collect();
        root.at_path(&parts).unwrap_or_else(|| panic!("{path}"))
    }

    const DEPLOYMENT: (&str, &str, &str) = ("apps", "v1", "Deployment");
    const POD: (&str, &str, &str) = ("", "v1", "Pod");

    #[test]
    fn deployment_containers_merge_by_name() {
        let containers = field(DEPLOYMENT, "spec.template.spec.containers");
        assert_eq!(containers.ty, Type::Array);
        assert_eq!(containers.merges_by_key(), Some("name"));
        assert_eq!(containers.list_type, ListType::Map(vec!["name".into()]));
        assert!(containers.description.contains("containers"));
    }

    #[test]
    fn container_ports_are_a_map_keyed_by_port_and_protocol() {
        let ports = field(POD, "spec.containers.ports");
        assert_eq!(ports.merges_by_key(), Some("containerPort"));
        assert_eq!(
            ports.list_type,
            ListType::Map(vec!["containerPort".into(), "protocol".into()])
        );
        // Apply keys a port without `protocol` by the default (a 500 before this).
        let protocol = field(POD, "spec.containers.ports.protocol");
        assert_eq!(protocol.default, Some(serde_json::json!("TCP")));
        let svc = field(("", "v1", "Service"), "spec.ports.protocol");
        assert_eq!(svc.default, Some(serde_json::json!("TCP")));
    }

    #[test]
    fn pod_volumes_merge_and_retain_keys() {
        let volumes = field(POD, "spec.volumes");
        assert_eq!(
            volumes.patch_strategy,
            vec![PatchStrategy::Merge, PatchStrategy::RetainKeys]
        );
        assert_eq!(volumes.patch_merge_key.as_deref(), Some("name"));
    }

    #[test]
    fn object_meta_carries_its_extensions() {
        let owners = field(POD, "metadata.ownerReferences");
        assert_eq!(owners.merges_by_key(), Some("uid"));
        let finalizers = field(POD, "metadata.finalizers");
        assert!(finalizers.merges_as_set());
        assert_eq!(finalizers.list_type, ListType::Set);
        let labels = field(POD, "metadata.labels");
        assert_eq!(
            labels.additional_properties.as_ref().unwrap().ty,
            Type::String
        );
        let owner = field(POD, "metadata.ownerReferences");
        assert_eq!(owner.items.as_ref().unwrap().map_type, MapType::Atomic);
    }

    #[test]
    fn special_types_map_to_their_structural_shapes() {
        let limits = field(POD, "spec.containers.resources.limits");
        assert_eq!(
            limits.additional_properties.as_ref().unwrap().ty,
            Type::IntOrString
        );
        let port = field(POD, "spec.containers.livenessProbe.httpGet.port");
        assert_eq!(port.ty, Type::IntOrString);
        let created = field(POD, "metadata.creationTimestamp");
        assert_eq!(
            (created.ty, created.format.as_deref()),
            (Type::String, Some("date-time"))
        );
        let data = field(("apps", "v1", "ControllerRevision"), "data");
        assert!(data.ty == Type::Any && data.preserve_unknown_fields);
        let fields_v1 = field(POD, "metadata.managedFields.fieldsV1");
        assert!(fields_v1.keeps_unknown_fields());
        let props = field(
            ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "spec.versions.schema.openAPIV3Schema",
        );
        assert_eq!(props.ty, Type::Any);
    }

    #[test]
    fn every_catalogue_kind_has_a_schema_with_its_gvk() {
        for r in apimachinery::builtin::RESOURCES {
            let s = builtin_schema(r.group, r.version, r.kind)
                .unwrap_or_else(|| panic!("{} {}", r.api_version(), r.kind));
            assert!(
                s.gvk
                    .iter()
                    .any(|g| (g.group.as_str(), g.version.as_str(), g.kind.as_str())
                        == (r.group, r.version, r.kind)),
                "{} {}",
                r.api_version(),
                r.kind
            );
            assert!(s.properties.contains_key("apiVersion"), "{}", r.kind);
            if r.verbs.contains(&"list") {
                let list = builtin_schema(r.group, r.version, &format!("{}List", r.kind)).unwrap();
                assert_eq!(list.field("items").unwrap().item().unwrap().gvk, s.gvk);
            }
        }
    }

    #[test]
    fn envelope_kinds_have_schemas() {
        for (g, v, k) in [
            ("autoscaling", "v1", "Scale"),
            ("", "v1", "Status"),
            ("meta.k8s.io", "v1", "Status"),
            ("", "v1", "DeleteOptions"),
            ("apps", "v1", "DeleteOptions"),
            ("policy", "v1", "Eviction"),
            ("authentication.k8s.io", "v1", "TokenRequest"),
            ("", "v1", "Binding"),
            ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        ] {
            let s = builtin_schema(g, v, k).unwrap_or_else(|| panic!("{g}/{v} {k}"));
            assert!(!s.gvk.is_empty(), "{k}");
        }
        assert!(builtin_schema("apps", "v1", "Widget").is_none());
    }

    #[test]
    fn metadata_is_not_required() {
        let d = builtin_schema("apps", "v1", "Deployment").unwrap();
        assert!(!d.required.iter().any(|r| r == "metadata"));
        let spec = d.field("spec").unwrap();
        assert!(spec.required.contains(&"selector".to_string()));
    }

    #[test]
    fn shared_definitions_are_compiled_once() {
        let a = field(POD, "spec.containers");
        let b = field(DEPLOYMENT, "spec.template.spec.containers");
        assert!(std::sync::Arc::ptr_eq(
            a.items.as_ref().unwrap(),
            b.items.as_ref().unwrap()
        ));
    }
}
