//! Unknown fields: strict field validation (`fieldValidation=Strict|Warn`) and CRD pruning.
//!
//! Both walk an object against its structural schema the way upstream does: a field is unknown
//! when its object's schema neither lists it nor describes map values
//! (`additionalProperties`) nor preserves unknown fields. At the root of a resource and in every
//! `x-kubernetes-embedded-resource`, `apiVersion` and `kind` are always known and `metadata` is
//! checked against ObjectMeta, whatever the schema says about them. Paths follow upstream's
//! format, the one kube-apiserver prints in `strict decoding error: unknown field "..."`:
//! fields and map keys joined with `.`, list items as `[i]`
//! (`spec.template.spec.containers[0].foo`), sorted like upstream's pruning.
//!
//! A value whose JSON type does not match its schema (an object where a string belongs) is not
//! walked: that is a validation error, reported elsewhere.

use std::sync::LazyLock;

use apimachinery::schema::{Schema, SchemaRef, Type};
use serde_json::Value;

use crate::builtin::builtin_schema;

static OBJECT_META: LazyLock<SchemaRef> = LazyLock::new(|| {
    builtin_schema("", "v1", "ConfigMap")
        .and_then(|s| s.field("metadata").cloned())
        .unwrap_or_else(Schema::any)
});

/// The paths of every field of `value` (a whole resource) that `schema` doesn't know, sorted.
pub fn unknown_fields(value: &Value, schema: &Schema) -> Vec<String> {
    let mut out = Vec::new();
    report(value, schema, true, &mut String::new(), &mut out);
    out.sort();
    out
}

/// Removes every field of `value` (a whole resource) that `schema` doesn't know, as upstream
/// prunes custom resources, and returns the removed paths, sorted.
pub fn prune(value: &mut Value, schema: &Schema) -> Vec<String> {
    let mut out = Vec::new();
    remove(value, schema, true, &mut String::new(), &mut out);
    out.sort();
    out
}

/// How an object's schema treats one of its keys.
enum Child<'s> {
    /// A field or map value with this schema.
    Known(&'s Schema),
    /// Always known, never walked (`apiVersion` and `kind` of a resource).
    TypeMeta,
    /// Not described but kept (`x-kubernetes-preserve-unknown-fields`).
    Kept,
    Unknown,
}

/// Whether the value is an object this schema describes field by field.
fn walks_fields(schema: &Schema) -> bool {
    schema.ty == Type::Object
        || (schema.ty == Type::Any
            && (!schema.properties.is_empty() || schema.additional_properties.is_some()))
}

fn classify<'s>(schema: &'s Schema, key: &str, resource: bool) -> Child<'s> {
    if resource {
        match key {
            "apiVersion" | "kind" => return Child::TypeMeta,
            "metadata" => return Child::Known(&OBJECT_META),
            _ => {}
        }
    }
    if let Some(field) = schema.properties.get(key) {
        Child::Known(field)
    } else if let Some(values) = &schema.additional_properties {
        Child::Known(values)
    } else if schema.preserve_unknown_fields || schema.ty == Type::Any {
        Child::Kept
    } else {
        Child::Unknown
    }
}

fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

fn report(
    value: &Value,
    schema: &Schema,
    resource: bool,
    path: &mut String,
    out: &mut Vec<String>,
) {
    match value {
        Value::Object(map) if walks_fields(schema) || resource => {
            let resource = resource || schema.embedded_resource;
            for (key, child) in map {
                let len = path.len();
                push_key(path, key);
                match classify(schema, key, resource) {
                    Child::Known(s) => report(child, s, false, path, out),
                    Child::Unknown => out.push(path.clone()),
                    Child::TypeMeta | Child::Kept => {}
                }
                path.truncate(len);
            }
        }
        Value::Array(items) if schema.ty == Type::Array => {
            if let Some(item) = &schema.items {
                for (i, child) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    report(child, item, false, path, out);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

fn remove(
    value: &mut Value,
    schema: &Schema,
    resource: bool,
    path: &mut String,
    out: &mut Vec<String>,
) {
    match value {
        Value::Object(map) if walks_fields(schema) || resource => {
            let resource = resource || schema.embedded_resource;
            map.retain(|key, child| {
                let len = path.len();
                push_key(path, key);
                let keep = match classify(schema, key, resource) {
                    Child::Known(s) => {
                        remove(child, s, false, path, out);
                        true
                    }
                    Child::Unknown => {
                        out.push(path.clone());
                        false
                    }
                    Child::TypeMeta | Child::Kept => true,
                };
                path.truncate(len);
                keep
            });
        }
        Value::Array(items) if schema.ty == Type::Array => {
            if let Some(item) = &schema.items {
                for (i, child) in items.iter_mut().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    remove(child, item, false, path, out);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile_structural;
    use serde_json::json;

    fn deployment() -> SchemaRef {
        builtin_schema("apps", "v1", "Deployment").unwrap()
    }

    #[test]
    fn a_valid_deployment_has_no_unknown_fields() {
        let d = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}, "annotations": {"a/b": "c"},
                         "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx",
                                           "ports": [{"containerPort": 80}],
                                           "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}}
        });
        assert_eq!(unknown_fields(&d, &deployment()), Vec::<String>::new());
    }

    #[test]
    fn unknown_fields_are_reported_with_upstream_paths() {
        let d = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "extra": 1,
            "metadata": {"name": "web", "colour": "red"},
            "spec": {"foo": true, "template": {"spec": {"containers": [
                {"name": "a"},
                {"name": "b", "bar": 1, "env": [{"name": "E", "valueFrom": {"fieldRef": {"fieldPath": "x", "baz": 2}}}]}
            ]}}}
        });
        assert_eq!(
            unknown_fields(&d, &deployment()),
            vec![
                "extra",
                "metadata.colour",
                "spec.foo",
                "spec.template.spec.containers[1].bar",
                "spec.template.spec.containers[1].env[0].valueFrom.fieldRef.baz",
            ]
        );
    }

    #[test]
    fn map_values_are_walked_with_their_schema() {
        let s = compile_structural(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "routes": {"type": "object", "additionalProperties": {
                    "type": "object", "properties": {"port": {"type": "integer"}}}}}}}}));
        let mut cr = json!({"apiVersion": "x/v1", "kind": "R", "metadata": {"name": "r"},
            "spec": {"routes": {"a": {"port": 1}, "b": {"port": 2, "host": "h"}}}});
        assert_eq!(unknown_fields(&cr, &s), vec!["spec.routes.b.host"]);
        assert_eq!(prune(&mut cr, &s), vec!["spec.routes.b.host"]);
        assert_eq!(cr["spec"]["routes"]["b"], json!({"port": 2}));
    }

    #[test]
    fn pruning_honours_preserve_unknown_fields_and_embedded_resources() {
        let s = compile_structural(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                         "properties": {"typed": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                             "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}}
            }},
            "status": {"type": "object", "properties": {}}
        }}));
        let mut cr = json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "bogus": 1},
            "spec": {
                "free": {"anything": {"goes": [1]}, "typed": {"a": "x", "b": "y"}},
                "items": [{"name": "a", "drop": 1}, {"name": "b"}],
                "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "junk": 1},
                             "spec": {"x": "1", "y": 2}}
            },
            "status": {"phase": "Ready"}
        });
        let expected = vec![
            "metadata.bogus",
            "spec.free.typed.b",
            "spec.items[0].drop",
            "spec.template.metadata.junk",
            "spec.template.spec.y",
            "status.phase",
        ];
        assert_eq!(unknown_fields(&cr, &s), expected);
        assert_eq!(prune(&mut cr, &s), expected);
        assert_eq!(cr["spec"]["free"]["anything"], json!({"goes": [1]}));
        assert_eq!(cr["spec"]["items"], json!([{"name": "a"}, {"name": "b"}]));
        assert_eq!(cr["spec"]["template"]["apiVersion"], "v1");
        assert_eq!(cr["spec"]["template"]["metadata"], json!({"name": "p"}));
        assert_eq!(cr["status"], json!({}));
        assert!(unknown_fields(&cr, &s).is_empty());
    }

    #[test]
    fn a_crd_without_a_metadata_schema_still_checks_metadata_against_object_meta() {
        let s = compile_structural(
            &json!({"type": "object", "properties": {"metadata": {"type": "object"}}}),
        );
        let cr = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n", "labels": {"a": "b"}, "nope": 1}});
        assert_eq!(unknown_fields(&cr, &s), vec!["metadata.nope"]);
    }

    #[test]
    fn type_mismatches_are_left_to_validation() {
        let d = json!({"spec": {"replicas": {"a": 1}, "template": "oops"}});
        assert!(unknown_fields(&d, &deployment()).is_empty());
    }

    #[test]
    fn opaque_values_keep_everything() {
        let rev = builtin_schema("apps", "v1", "ControllerRevision").unwrap();
        let mut v = json!({"revision": 1, "data": {"spec": {"anything": [1, {"x": 2}]}}});
        assert!(prune(&mut v, &rev).is_empty());
        assert_eq!(v["data"]["spec"]["anything"][1]["x"], 2);
    }
}
