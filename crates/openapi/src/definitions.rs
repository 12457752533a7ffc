//! The OpenAPI v3 definitions of every built-in kind, generated once.
//!
//! k8s-openapi's schemars implementations give descriptions, types, formats and required lists.
//! This pass adds what they lack ([`crate::tables`]: patch strategies, list and map types),
//! the `x-kubernetes-group-version-kind` of each kind, the `<Kind>List` definitions, and a few
//! corrections towards upstream's published documents (metadata is not required; opaque
//! `JSON` values carry no type; a `$ref` with siblings is wrapped in `allOf`). The result feeds
//! both the served documents ([`crate::document`]) and the structural schemas
//! ([`crate::builtin`]).

use std::collections::HashMap;
use std::sync::LazyLock;

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::kinds::{EVERY_GROUP_VERSION, KINDS, SUPPORT, served_group_versions, served_resources};
use crate::tables::{ATOMIC_STRUCTS, BY_DEFINITION, FIELD_DEFAULTS, FIELD_MAP_TYPES};

/// Where OpenAPI v3 documents keep their schemas.
pub(crate) const REF_PREFIX: &str = "#/components/schemas/";

pub(crate) const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
pub(crate) const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
pub(crate) const JSON_SCHEMA_PROPS: &str =
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps";

/// Definitions whose values are arbitrary JSON: upstream publishes them with a description only.
const UNTYPED: &[&str] = &[
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray",
];

/// Definitions that hold any JSON object, kept whole: embedded objects and field sets.
pub(crate) const OPAQUE: &[&str] = &[
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray",
];

/// Required lists where k8s-openapi (which makes some optional upstream fields non-optional in
/// Rust, or the reverse) differs from upstream's published documents.
const REQUIRED: &[(&str, &[&str])] = &[
    ("io.k8s.api.core.v1.ConfigMapEnvSource", &[]),
    ("io.k8s.api.core.v1.ConfigMapKeySelector", &["key"]),
    ("io.k8s.api.core.v1.ConfigMapProjection", &[]),
    ("io.k8s.api.core.v1.ConfigMapVolumeSource", &[]),
    ("io.k8s.api.core.v1.Event", &["metadata", "involvedObject"]),
    ("io.k8s.api.core.v1.LocalObjectReference", &[]),
    ("io.k8s.api.core.v1.SecretEnvSource", &[]),
    ("io.k8s.api.core.v1.SecretKeySelector", &["key"]),
    ("io.k8s.api.core.v1.SecretProjection", &[]),
    ("io.k8s.api.events.v1.Event", &["eventTime"]),
    (
        "io.k8s.api.networking.v1.NetworkPolicySpec",
        &["podSelector"],
    ),
];

/// Group, version and kind.
pub(crate) type GvkKey = (&'static str, &'static str, String);

/// All built-in definitions and where each kind lives.
pub(crate) struct Definitions {
    /// Definition name → annotated OpenAPI v3 schema.
    pub schemas: Map<String, Value>,
    /// Group, version and kind (kinds and their lists) → definition name.
    pub kinds: HashMap<GvkKey, String>,
}

impl Definitions {
    /// The definition name of a kind.
    pub fn name_of(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.kinds
            .iter()
            .find(|((g, v, k), _)| *g == group && *v == version && k == kind)
            .map(|(_, name)| name.as_str())
    }
}

/// The built-in definitions, generated on first use.
pub(crate) static DEFINITIONS: LazyLock<Definitions> = LazyLock::new(generate);

/// The definition name a `$ref` points at.
pub(crate) fn ref_name(reference: &str) -> Option<&str> {
    reference.strip_prefix(REF_PREFIX)
}

/// A `$ref` to a definition.
pub(crate) fn reference(name: &str) -> Value {
    json!({ "$ref": format!("{REF_PREFIX}{name}") })
}

pub(crate) fn gvk_value(group: &str, version: &str, kind: &str) -> Value {
    json!({ "group": group, "kind": kind, "version": version })
}

fn generate() -> Definitions {
    let mut settings = SchemaSettings::openapi3();
    settings.transforms.clear();
    settings.meta_schema = None;
    let mut generator = settings.into_generator();

    let mut kinds = HashMap::new();
    let mut kind_names: Vec<(String, &'static str, &'static str, &'static str)> = Vec::new();
    for k in KINDS {
        let schema = (k.schema)(&mut generator);
        let name = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(ref_name)
            .unwrap_or_default()
            .to_string();
        kinds.insert((k.group, k.version, k.kind.to_string()), name.clone());
        kind_names.push((name, k.group, k.version, k.kind));
    }
    for support in SUPPORT {
        support(&mut generator);
    }
    let mut schemas = generator.take_definitions(false);

    // Group-version-kinds of the kinds.
    let mut every_gv = served_group_versions();
    every_gv.sort();
    for (name, group, version, kind) in &kind_names {
        let Some(Value::Object(def)) = schemas.get_mut(name) else {
            continue;
        };
        let gvks = if EVERY_GROUP_VERSION.contains(kind) {
            every_gv
                .iter()
                .map(|(g, v)| gvk_value(g, v, kind))
                .collect()
        } else {
            vec![gvk_value(group, version, kind)]
        };
        def.insert("x-kubernetes-group-version-kind".into(), Value::Array(gvks));
        // k8s-openapi marks metadata required because its Rust field is not optional; upstream
        // does not.
        if let Some(Value::Array(required)) = def.get_mut("required") {
            required.retain(|r| r != "metadata");
            if required.is_empty() {
                def.remove("required");
            }
        }
    }

    // <Kind>List definitions.
    for r in served_resources() {
        if !r.verbs.contains(&"list") {
            continue;
        }
        let Some(item) = kinds
            .get(&(r.group, r.version, r.kind.to_string()))
            .cloned()
        else {
            continue;
        };
        let list_name = format!("{item}List");
        let list_kind = format!("{}List", r.kind);
        let type_meta = |field: &str| {
            schemas
                .get(&item)
                .and_then(|d| d.get("properties"))
                .and_then(|p| p.get(field))
                .cloned()
                .unwrap_or_else(|| json!({ "type": "string" }))
        };
        let mut metadata = reference(LIST_META);
        if let Value::Object(m) = &mut metadata {
            m.insert("description".into(), "Standard list metadata.".into());
        }
        let list = json!({
            "description": format!("{list_kind} is a list of {} objects.", r.kind),
            "type": "object",
            "properties": {
                "apiVersion": type_meta("apiVersion"),
                "kind": type_meta("kind"),
                "metadata": metadata,
                "items": {
                    "description": format!("items is the list of {} objects.", r.kind),
                    "type": "array",
                    "items": reference(&item),
                },
            },
            "required": ["items"],
            "x-kubernetes-group-version-kind": [gvk_value(r.group, r.version, &list_kind)],
        });
        schemas.insert(list_name.clone(), list);
        kinds.insert((r.group, r.version, list_kind), list_name);
    }

    annotate(&mut schemas);
    for (name, required) in REQUIRED {
        if let Some(Value::Object(def)) = schemas.get_mut(*name) {
            if required.is_empty() {
                def.remove("required");
            } else {
                def.insert(
                    "required".into(),
                    required.iter().map(|r| Value::from(*r)).collect(),
                );
            }
        }
    }
    for name in UNTYPED {
        if let Some(Value::Object(def)) = schemas.get_mut(*name) {
            def.retain(|k, _| k == "description");
        }
    }
    for def in schemas.values_mut() {
        wrap_ref_siblings(def);
    }
    Definitions { schemas, kinds }
}

/// Writes the table extensions into the definitions.
fn annotate(schemas: &mut Map<String, Value>) {
    for (definition, rules) in BY_DEFINITION.iter() {
        for rule in rules {
            let Some(prop) = property_mut(schemas, definition, rule.field) else {
                continue;
            };
            if !rule.patch_strategy.is_empty() {
                prop.insert(
                    "x-kubernetes-patch-strategy".into(),
                    rule.patch_strategy.into(),
                );
            }
            if !rule.merge_key.is_empty() {
                prop.insert("x-kubernetes-patch-merge-key".into(), rule.merge_key.into());
            }
            if !rule.list_type.is_empty() {
                prop.insert("x-kubernetes-list-type".into(), rule.list_type.into());
            }
            if !rule.list_map_keys.is_empty() {
                prop.insert(
                    "x-kubernetes-list-map-keys".into(),
                    rule.list_map_keys.iter().map(|k| Value::from(*k)).collect(),
                );
            }
        }
    }
    for (definition, field, map_type) in FIELD_MAP_TYPES {
        if let Some(prop) = property_mut(schemas, definition, field) {
            prop.insert("x-kubernetes-map-type".into(), (*map_type).into());
        }
    }
    for (definition, field, default) in FIELD_DEFAULTS {
        if let Some(prop) = property_mut(schemas, definition, field) {
            prop.insert("default".into(), (*default).into());
        }
    }
    for definition in ATOMIC_STRUCTS {
        if let Some(Value::Object(def)) = schemas.get_mut(*definition) {
            def.insert("x-kubernetes-map-type".into(), "atomic".into());
        }
    }
}

/// The schema of one property of a definition.
pub(crate) fn property_mut<'a>(
    schemas: &'a mut Map<String, Value>,
    definition: &str,
    field: &str,
) -> Option<&'a mut Map<String, Value>> {
    schemas
        .get_mut(definition)?
        .get_mut("properties")?
        .get_mut(field)?
        .as_object_mut()
}

/// Rewrites `{"$ref": r, ...siblings}` as `{"allOf": [{"$ref": r}], ...siblings}` throughout a
/// schema, as upstream publishes it (OpenAPI 3.0 ignores siblings of `$ref`).
pub(crate) fn wrap_ref_siblings(schema: &mut Value) {
    let Value::Object(node) = schema else {
        return;
    };
    if node.len() > 1
        && let Some(r) = node.remove("$ref")
    {
        node.insert("allOf".into(), json!([{ "$ref": r }]));
    }
    if let Some(Value::Object(props)) = node.get_mut("properties") {
        for p in props.values_mut() {
            wrap_ref_siblings(p);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(sub) = node.get_mut(key) {
            wrap_ref_siblings(sub);
        }
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(subs)) = node.get_mut(key) {
            subs.iter_mut().for_each(wrap_ref_siblings);
        }
    }
}

/// Calls `found` with every definition name a schema refers to.
pub(crate) fn collect_refs(schema: &Value, found: &mut impl FnMut(&str)) {
    let Value::Object(node) = schema else {
        return;
    };
    if let Some(name) = node.get("$ref").and_then(Value::as_str).and_then(ref_name) {
        found(name);
    }
    if let Some(Value::Object(props)) = node.get("properties") {
        for p in props.values() {
            collect_refs(p, found);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(sub) = node.get(key) {
            collect_refs(sub, found);
        }
    }
    for key in ["allOf", "oneOf", "anyOf"] {
        if let Some(Value::Array(subs)) = node.get(key) {
            subs.iter().for_each(|s| collect_refs(s, found));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::field_rules;

    #[test]
    fn every_table_row_names_a_generated_field() {
        let defs = &DEFINITIONS.schemas;
        for rule in field_rules() {
            let prop = defs
                .get(rule.definition)
                .and_then(|d| d.get("properties"))
                .and_then(|p| p.get(rule.field));
            assert!(prop.is_some(), "{}.{}", rule.definition, rule.field);
        }
        for (definition, field, _) in FIELD_MAP_TYPES {
            assert!(
                defs[*definition]["properties"].get(*field).is_some(),
                "{definition}.{field}"
            );
        }
        for definition in ATOMIC_STRUCTS.iter().chain(REQUIRED.iter().map(|(d, _)| d)) {
            assert!(defs.contains_key(*definition), "{definition}");
        }
    }

    #[test]
    fn extensions_land_in_the_published_definitions() {
        let defs = &DEFINITIONS.schemas;
        let containers = &defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
        assert_eq!(
            defs["io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"]["x-kubernetes-map-type"],
            "atomic"
        );
        let template = &defs["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["template"];
        assert_eq!(
            template["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.PodTemplateSpec"
        );
        assert!(
            template["description"]
                .as_str()
                .unwrap()
                .contains("Template")
        );
    }

    #[test]
    fn kinds_and_lists_carry_their_group_version_kind() {
        let defs = &DEFINITIONS.schemas;
        assert_eq!(
            defs["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );
        assert_eq!(
            defs["io.k8s.api.apps.v1.DeploymentList"]["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "DeploymentList", "version": "v1"}])
        );
        let delete = defs["io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"]
            ["x-kubernetes-group-version-kind"]
            .as_array()
            .unwrap();
        assert!(delete.contains(&json!({"group": "", "kind": "DeleteOptions", "version": "v1"})));
        assert!(
            delete.contains(&json!({"group": "apps", "kind": "DeleteOptions", "version": "v1"}))
        );
    }

    #[test]
    fn required_lists_follow_upstream() {
        let defs = &DEFINITIONS.schemas;
        assert!(
            defs["io.k8s.api.core.v1.LocalObjectReference"]
                .get("required")
                .is_none()
        );
        assert_eq!(
            defs["io.k8s.api.core.v1.Event"]["required"],
            json!(["metadata", "involvedObject"])
        );
        assert!(
            defs["io.k8s.api.apps.v1.Deployment"]
                .get("required")
                .is_none()
        );
    }
}
