//! JSON types against a built-in kind's schema, as upstream's decoder checks them.
//!
//! kube-apiserver decodes a built-in object into its Go struct: a string where an `int32`
//! belongs (`"replicas": "3"`), a number in a `map[string]string` or a string where a struct
//! belongs is refused with 400 before anything else runs. Matryoshka keeps objects as JSON, so
//! nothing would refuse them; stored, they break every typed client that lists them (an
//! informer's whole list fails to decode). [`type_mismatch`] walks an object with its
//! structural schema and reports the first value whose JSON type its field cannot hold, in
//! Go's words: `json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas
//! of type int32`.
//!
//! `null` is accepted everywhere (Go decodes it as the zero value); fields the schema does not
//! know are left to field validation; `x-kubernetes-preserve-unknown-fields` subtrees and
//! untyped values (RawExtension) are not walked.

use std::fmt;

use apimachinery::schema::{Schema, Type};
use serde_json::Value;

/// A value whose JSON type its field cannot hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeMismatch {
    /// What was found: `string`, `bool`, `object`, `array`, or `number 1.5`.
    pub found: String,
    /// The Go struct holding the field (`DeploymentSpec`).
    pub parent: String,
    /// The field's path from the root, fields joined with `.` (Go's form, no list indexes).
    pub path: String,
    /// The field's Go type (`int32`, `string`, `v1.ServiceSpec`, `map[string]string`).
    pub go_type: String,
}

impl fmt::Display for TypeMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "json: cannot unmarshal {} into Go struct field {}.{} of type {}",
            self.found, self.parent, self.path, self.go_type
        )
    }
}

/// The first value of `value` (a whole object of the kind `schema` describes) whose JSON type
/// does not fit its field, in key order.
pub fn type_mismatch(value: &Value, schema: &Schema) -> Option<TypeMismatch> {
    let root = short_name(schema).unwrap_or_default();
    walk(value, schema, &root, &mut String::new())
}

/// `io.k8s.api.apps.v1.DeploymentSpec` → `DeploymentSpec`.
fn short_name(schema: &Schema) -> Option<String> {
    let d = schema.definition.as_deref()?;
    Some(d.rsplit('.').next().unwrap_or(d).to_string())
}

/// Go's name of the type a schema decodes into.
fn go_type(schema: &Schema) -> String {
    match schema.ty {
        Type::String => "string".into(),
        Type::Boolean => "bool".into(),
        Type::Number => "float64".into(),
        Type::Integer => match schema.format.as_deref() {
            Some("int32") => "int32".into(),
            _ => "int64".into(),
        },
        Type::IntOrString => "intstr.IntOrString".into(),
        Type::Array => format!(
            "[]{}",
            schema
                .items
                .as_deref()
                .map_or("interface {}".into(), go_type)
        ),
        Type::Object => match (&schema.definition, &schema.additional_properties) {
            (Some(d), _) => {
                let mut parts = d.rsplit('.');
                let name = parts.next().unwrap_or(d);
                match parts.next() {
                    Some(pkg) => format!("{pkg}.{name}"),
                    None => name.to_string(),
                }
            }
            (None, Some(values)) => format!("map[string]{}", go_type(values)),
            (None, None) => "map[string]interface {}".into(),
        },
        Type::Any => "interface {}".into(),
    }
}

fn found(value: &Value) -> String {
    match value {
        Value::Number(n) => format!("number {n}"),
        v => apimachinery::schema::json_type_name(v).into(),
    }
}

fn fits(value: &Value, schema: &Schema) -> bool {
    match (schema.ty, value) {
        (_, Value::Null) | (Type::Any, _) => true,
        (Type::String, Value::String(_)) => true,
        (Type::Boolean, Value::Bool(_)) => true,
        (Type::Number, Value::Number(_)) => true,
        (Type::Integer, Value::Number(n)) => match schema.format.as_deref() {
            Some("int32") => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
            _ => n.as_i64().is_some(),
        },
        (Type::IntOrString, Value::String(_)) => true,
        (Type::IntOrString, Value::Number(n)) => n.as_i64().is_some(),
        (Type::Array, Value::Array(_)) => true,
        (Type::Object, Value::Object(_)) => true,
        _ => false,
    }
}

fn walk(value: &Value, schema: &Schema, parent: &str, path: &mut String) -> Option<TypeMismatch> {
    if !fits(value, schema) {
        return Some(TypeMismatch {
            found: found(value),
            parent: parent.to_string(),
            path: path.clone(),
            go_type: go_type(schema),
        });
    }
    if schema.preserve_unknown_fields {
        return None;
    }
    match (value, schema.ty) {
        (Value::Object(map), Type::Object) => {
            // Fields of a struct are named from it; values of a map from the struct holding
            // the map, as Go does.
            let own = short_name(schema);
            let parent = own.as_deref().unwrap_or(parent);
            for (key, child) in map {
                let Some(s) = schema
                    .properties
                    .get(key)
                    .or(schema.additional_properties.as_ref())
                else {
                    continue;
                };
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                let found = walk(child, s, parent, path);
                path.truncate(len);
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        (Value::Array(items), Type::Array) => {
            let item = schema.items.as_deref()?;
            items.iter().find_map(|v| walk(v, item, parent, path))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin_schema;
    use serde_json::json;

    fn check(kind: (&str, &str, &str), obj: Value) -> Option<String> {
        let schema = builtin_schema(kind.0, kind.1, kind.2).unwrap();
        type_mismatch(&obj, &schema).map(|m| m.to_string())
    }

    #[test]
    fn wrong_types_are_named_as_gos_decoder_names_them() {
        let deploy = ("apps", "v1", "Deployment");
        assert_eq!(
            check(deploy, json!({"spec": {"replicas": "str"}})).as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
            )
        );
        assert_eq!(
            check(("", "v1", "ConfigMap"), json!({"data": {"k": 12}})).as_deref(),
            Some(
                "json: cannot unmarshal number 12 into Go struct field ConfigMap.data.k of type string"
            )
        );
        assert_eq!(
            check(("", "v1", "Service"), json!({"spec": "str"})).as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field Service.spec of type v1.ServiceSpec"
            )
        );
        assert_eq!(
            check(("", "v1", "Service"), json!({"spec": {"selector": "str"}})).as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field ServiceSpec.spec.selector of type map[string]string"
            )
        );
        assert_eq!(
            check(
                ("", "v1", "Pod"),
                json!({"spec": {"containers": [{"name": "a", "image": 1}]}})
            )
            .as_deref(),
            Some(
                "json: cannot unmarshal number 1 into Go struct field Container.spec.containers.image of type string"
            )
        );
        assert!(
            check(deploy, json!({"spec": {"replicas": 4294967296i64}}))
                .unwrap()
                .contains("of type int32")
        );
        assert_eq!(
            check(("", "v1", "Secret"), json!({"type": 12})).as_deref(),
            Some(
                "json: cannot unmarshal number 12 into Go struct field Secret.type of type string"
            )
        );
    }

    #[test]
    fn nulls_int_or_strings_quantities_and_raw_fields_are_accepted() {
        let ok = json!({
            "metadata": {"name": "x", "labels": null, "annotations": {"a": "b"}},
            "spec": {
                "replicas": null,
                "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}},
                "template": {"spec": {"containers": [{
                    "name": "c",
                    "resources": {"limits": {"cpu": "100m", "memory": 1024}},
                    "ports": [{"containerPort": 80}]
                }]}}
            }
        });
        assert_eq!(check(("apps", "v1", "Deployment"), ok), None);
        let raw = json!({"data": {"anything": [1, {"x": true}]}, "revision": 2});
        assert_eq!(check(("apps", "v1", "ControllerRevision"), raw), None);
    }
}
