//! Defaults in a CRD schema must be valid values of their own schema (upstream
//! `structuraldefaulting.ValidateDefaults`): no unknown fields (they would be pruned away),
//! valid embedded `metadata`, the node's value validations, and its CEL rules — checked once
//! with `oldSelf` bound to the default and once as a create.

use apimachinery::field::{ErrorList, Path};
use serde_json::Value;

use crate::cel;
use crate::defaulting;
use crate::embedded;
use crate::openapi_errors::to_field_errors;
use crate::schema::Node;
use crate::values;

/// Checks every default under `root` (a version's schema at `path`).
pub fn validate(path: &Path, root: &Node, require_pruned: bool) -> ErrorList {
    let mut errs = ErrorList::new();
    walk(path, root, true, false, require_pruned, &mut errs);
    errs
}

fn value_errors(path: &Path, node: &Node, v: &Value) -> ErrorList {
    let mut failures = Vec::new();
    values::validate(node, v, None, &mut failures);
    to_field_errors(Some(path.as_str()), failures)
}

fn walk(
    path: &Path,
    s: &Node,
    resource: bool,
    mut inside_meta: bool,
    require_pruned: bool,
    errs: &mut ErrorList,
) {
    let embedded = s.embedded || resource;
    if embedded {
        inside_meta = false;
    }
    if let Some(d) = &s.default {
        let at = path.child("default");
        if inside_meta {
            errs.extend(value_errors(&at, s, d));
        } else {
            if require_pruned {
                let mut pruned = d.clone();
                if defaulting::prune(&mut pruned, s, embedded) {
                    errs.push(apimachinery::field::FieldError::invalid(
                        at.clone(),
                        d.clone(),
                        "must not have unknown fields",
                    ));
                }
            }
            let meta = if s.embedded {
                embedded_errors(&at, s, d)
            } else {
                ErrorList::new()
            };
            if !meta.is_empty() {
                errs.extend(meta);
            } else {
                let value = value_errors(&at, s, d);
                if !value.is_empty() {
                    errs.extend(value);
                } else if s.has_rules() {
                    let with_old = cel::eval::validate_at(s, d, Some(d), &at, false, embedded);
                    let none = with_old.errors.is_empty();
                    errs.extend(with_old.errors);
                    if none {
                        errs.extend(
                            cel::eval::validate_at(s, d, None, &at, false, embedded).errors,
                        );
                    }
                }
            }
        }
    }
    if let Some(items) = &s.items {
        walk(
            &path.child("items"),
            items,
            items.embedded,
            inside_meta,
            require_pruned,
            errs,
        );
    }
    for (k, p) in &s.properties {
        let meta_field = embedded && matches!(k.as_str(), "metadata" | "apiVersion" | "kind");
        walk(
            &path.child("properties").key(k),
            p,
            p.embedded,
            inside_meta || meta_field,
            require_pruned,
            errs,
        );
    }
}

/// Embedded-resource checks of a default, with paths under `at`.
fn embedded_errors(at: &Path, s: &Node, d: &Value) -> ErrorList {
    let mut out = ErrorList::new();
    let mut node = s.clone();
    node.embedded = true;
    for mut e in embedded::validate(&node, d) {
        e.field = if e.field.is_empty() {
            at.to_string()
        } else if e.field.starts_with('[') {
            format!("{at}{}", e.field)
        } else {
            format!("{at}.{}", e.field)
        };
        out.push(e);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msgs(schema: Value) -> Vec<String> {
        validate(
            &Path::new("spec.validation.openAPIV3Schema"),
            &Node::compile(&schema),
            true,
        )
        .iter()
        .map(|e| e.message())
        .collect()
    }

    #[test]
    fn a_default_must_pass_its_own_schema() {
        assert!(msgs(json!({"type": "object", "properties": {"size": {"type": "string", "enum": ["S", "M"], "default": "S"}}})).is_empty());
        assert_eq!(
            msgs(
                json!({"type": "object", "properties": {"size": {"type": "string", "enum": ["S", "M"], "default": "XL"}}})
            ),
            vec![
                "spec.validation.openAPIV3Schema.properties[size].default: Unsupported value: \"XL\": supported values: \"S\", \"M\""
            ]
        );
        assert_eq!(
            msgs(
                json!({"type": "object", "properties": {"n": {"type": "integer", "default": "one"}}})
            ),
            vec![
                "spec.validation.openAPIV3Schema.properties[n].default: Invalid value: \"string\":  in body must be of type integer: \"string\""
            ]
        );
    }

    #[test]
    fn a_default_must_not_have_unknown_fields() {
        assert_eq!(
            msgs(
                json!({"type": "object", "properties": {"s": {"type": "object", "default": {"a": 1, "b": 2},
                "properties": {"a": {"type": "integer"}}}}})
            ),
            vec![
                "spec.validation.openAPIV3Schema.properties[s].default: Invalid value: \"object\": must not have unknown fields"
            ]
        );
    }

    #[test]
    fn a_default_must_pass_its_rules() {
        assert_eq!(
            msgs(
                json!({"type": "object", "properties": {"n": {"type": "integer", "default": 5,
                "x-kubernetes-validations": [{"rule": "self < 3", "message": "must be small"}]}}})
            ),
            vec![
                "spec.validation.openAPIV3Schema.properties[n].default: Invalid value: 5: must be small"
            ]
        );
    }
}
