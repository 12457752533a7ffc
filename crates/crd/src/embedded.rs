//! Checks of `x-kubernetes-embedded-resource` values (upstream `objectmeta.Validate`): an
//! embedded object must have `apiVersion` and `kind`, both valid, and its `metadata` must be
//! valid ObjectMeta (names are checked as path segments; a missing name is allowed).
//!
//! The resource's own top-level metadata is checked by the generic store, not here.

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::objectmeta::validate_object_meta;
use apimachinery::validation::{NameRule, is_dns1035_label};
use serde_json::{Map, Value, json};

use crate::schema::{Additional, Node};

/// Checks every embedded resource in `obj` (a whole object) against `node`.
pub fn validate(node: &Node, obj: &Value) -> ErrorList {
    let mut errs = ErrorList::new();
    walk(&Path::default(), node, obj, &mut errs);
    errs
}

fn walk(path: &Path, node: &Node, v: &Value, errs: &mut ErrorList) {
    if !node.has_embedded() {
        return;
    }
    match v {
        Value::Object(m) => {
            if node.embedded {
                embedded(path, m, errs);
            }
            for (k, child) in m {
                if let Some(p) = node.properties.get(k) {
                    walk(&path.child(k), p, child, errs);
                } else if let Additional::Schema(values) = &node.additional {
                    walk(&path.key(k), values, child, errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = &node.items {
                for (i, child) in items.iter().enumerate() {
                    walk(&path.index(i), item, child, errs);
                }
            }
        }
        _ => {}
    }
}

fn embedded(path: &Path, m: &Map<String, Value>, errs: &mut ErrorList) {
    if !m.contains_key("apiVersion") {
        errs.push(FieldError::required(path.child("apiVersion"), ""));
    }
    if !m.contains_key("kind") {
        errs.push(FieldError::required(path.child("kind"), ""));
    }
    for (k, v) in m {
        match k.as_str() {
            "apiVersion" => match v.as_str() {
                None => errs.push(FieldError::invalid(
                    path.child(k),
                    v.clone(),
                    "must be a string",
                )),
                Some("") => errs.push(FieldError::invalid(
                    path.child(k),
                    json!(""),
                    "must not be empty",
                )),
                Some(av) if av.matches('/').count() > 1 => errs.push(FieldError::invalid(
                    path.child(k),
                    v.clone(),
                    format!("unexpected GroupVersion string: {av}"),
                )),
                Some(_) => {}
            },
            "kind" => match v.as_str() {
                None => errs.push(FieldError::invalid(
                    path.child(k),
                    v.clone(),
                    "must be a string",
                )),
                Some("") => errs.push(FieldError::invalid(
                    path.child(k),
                    json!(""),
                    "must not be empty",
                )),
                Some(kind) => {
                    let problems = is_dns1035_label(&kind.to_lowercase());
                    if !problems.is_empty() {
                        errs.push(FieldError::invalid(
                            path.child(k),
                            v.clone(),
                            format!(
                                "may have mixed case, but should otherwise match: {}",
                                problems.join(",")
                            ),
                        ));
                    }
                }
            },
            "metadata" => {
                let mut meta = v.clone();
                if let Value::Object(mm) = &mut meta
                    && mm
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .is_empty()
                {
                    mm.insert("name".into(), json!("fakename"));
                }
                let namespaced = v
                    .get("namespace")
                    .and_then(Value::as_str)
                    .is_some_and(|ns| !ns.is_empty());
                errs.extend(validate_object_meta(
                    &meta,
                    namespaced,
                    NameRule::PathSegment,
                    &path.child("metadata"),
                ));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Node {
        Node::compile(
            &json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                         "x-kubernetes-preserve-unknown-fields": true}}}}}),
        )
    }

    #[test]
    fn an_embedded_resource_needs_api_version_and_kind() {
        let errs = validate(
            &schema(),
            &json!({"spec": {"template": {"metadata": {"name": "x"}}}}),
        );
        let msgs: Vec<String> = errs.iter().map(|e| e.message()).collect();
        assert_eq!(
            msgs,
            vec![
                "spec.template.apiVersion: Required value",
                "spec.template.kind: Required value"
            ]
        );
    }

    #[test]
    fn embedded_type_meta_and_metadata_are_checked() {
        let errs = validate(
            &schema(),
            &json!({"spec": {"template": {"apiVersion": "a/b/c", "kind": "9Pod",
                                          "metadata": {"name": "a/b", "labels": {"bad key!": "x"}}}}}),
        );
        let msgs: Vec<String> = errs.iter().map(|e| e.message()).collect();
        assert_eq!(
            msgs[0],
            "spec.template.apiVersion: Invalid value: \"a/b/c\": unexpected GroupVersion string: a/b/c"
        );
        assert!(msgs[1].starts_with("spec.template.kind: Invalid value: \"9Pod\": may have mixed case, but should otherwise match: a DNS-1035 label must consist of"));
        assert!(
            msgs.iter()
                .any(|m| m.starts_with("spec.template.metadata.name: Invalid value: \"a/b\"")),
            "{msgs:?}"
        );
        assert!(
            msgs.iter().any(
                |m| m.starts_with("spec.template.metadata.labels: Invalid value: \"bad key!\"")
            ),
            "{msgs:?}"
        );
    }

    #[test]
    fn a_valid_embedded_resource_passes() {
        let ok = json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"a": "b"}}}}});
        assert!(validate(&schema(), &ok).is_empty());
    }
}
