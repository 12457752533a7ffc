//! Structural defaulting of custom resources, as upstream applies it on every request body
//! and on every read from storage (`structuraldefaulting.Default`):
//!
//! - a property with a `default` is set when it is absent, or `null` while not `nullable`;
//! - defaults apply only inside values that exist: a nested default never creates its parent
//!   (a parent's own default may, and then its children's defaults apply inside it);
//! - map values and list items that are `null` while not nullable take their schema's default.
//!
//! Before defaulting, `null`s that are neither nullable nor defaulted are dropped
//! (`PruneNonNullableNullsWithoutDefaults`), so they never reach validation.

use serde_json::Value;

use crate::schema::{Additional, Node};

/// Drops `null` fields whose schema is neither nullable nor defaulted.
pub fn prune_nulls(v: &mut Value, node: Option<&Node>) {
    match v {
        Value::Object(m) => {
            m.retain(|k, child| {
                let schema = node.and_then(|n| n.field(k));
                !(child.is_null() && schema.is_some_and(|s| !s.nullable && s.default.is_none()))
            });
            for (k, child) in m.iter_mut() {
                prune_nulls(child, node.and_then(|n| n.field(k)));
            }
        }
        Value::Array(items) => {
            let item = node.and_then(|n| n.items.as_deref());
            for child in items {
                prune_nulls(child, item);
            }
        }
        _ => {}
    }
}

/// Removes fields `node` doesn't describe (upstream `pruning.Prune`): unknown fields of
/// objects without `x-kubernetes-preserve-unknown-fields`, keeping `apiVersion`, `kind` and
/// `metadata` of resources (`resource` is true for the value itself). Returns whether
/// anything was removed. The server prunes whole objects with `openapi::prune`; this is for
/// values checked against one node, such as defaults.
pub fn prune(v: &mut Value, node: &Node, resource: bool) -> bool {
    let mut removed = false;
    match v {
        Value::Object(m) => {
            m.retain(|k, child| {
                if resource && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    return true;
                }
                if let Some(p) = node.properties.get(k) {
                    removed |= prune(child, p, p.embedded);
                    return true;
                }
                match &node.additional {
                    Additional::Schema(values) => {
                        removed |= prune(child, values, values.embedded);
                        true
                    }
                    Additional::Bool(true) => true,
                    _ if node.preserve_unknown => true,
                    _ => {
                        removed = true;
                        false
                    }
                }
            });
        }
        Value::Array(items) => {
            if let Some(item) = node.items.as_deref() {
                for child in items {
                    removed |= prune(child, item, item.embedded);
                }
            }
        }
        _ => {}
    }
    removed
}

fn non_nullable_null(v: &Value, node: &Node) -> bool {
    v.is_null() && !node.nullable
}

/// Applies the defaults of `node` inside `v`.
pub fn default(v: &mut Value, node: &Node) {
    match v {
        Value::Object(m) => {
            for (k, prop) in &node.properties {
                let Some(d) = &prop.default else { continue };
                match m.get(k) {
                    Some(existing) if !non_nullable_null(existing, prop) => {}
                    _ => {
                        m.insert(k.clone(), d.clone());
                    }
                }
            }
            for (k, child) in m.iter_mut() {
                if let Some(prop) = node.properties.get(k) {
                    default(child, prop);
                } else if let Additional::Schema(values) = &node.additional {
                    if non_nullable_null(child, values)
                        && let Some(d) = &values.default
                    {
                        *child = d.clone();
                    }
                    default(child, values);
                }
            }
        }
        Value::Array(items) => {
            let Some(item) = node.items.as_deref() else {
                return;
            };
            for child in items {
                if non_nullable_null(child, item)
                    && let Some(d) = &item.default
                {
                    *child = d.clone();
                }
                default(child, item);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Node {
        Node::compile(&json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "replicas": {"type": "integer", "default": 1},
            "mode": {"type": "string", "nullable": true, "default": "auto"},
            "strategy": {"type": "object", "default": {}, "properties": {
                "type": {"type": "string", "default": "Rolling"}}},
            "limits": {"type": "object", "properties": {"cpu": {"type": "string", "default": "1"}}},
            "ports": {"type": "array", "items": {"type": "object", "properties": {
                "protocol": {"type": "string", "default": "TCP"}}}},
            "env": {"type": "object", "additionalProperties": {"type": "string", "default": "x"}},
            "keep": {"type": "string"}
        }}}}))
    }

    #[test]
    fn defaults_fill_absent_fields_only_inside_existing_parents() {
        let mut obj = json!({"spec": {"ports": [{"port": 80}, {"protocol": "UDP"}]}});
        default(&mut obj, &schema());
        assert_eq!(
            obj["spec"],
            json!({"replicas": 1, "mode": "auto", "strategy": {"type": "Rolling"},
                   "ports": [{"port": 80, "protocol": "TCP"}, {"protocol": "UDP"}]})
        );
        let mut empty = json!({});
        default(&mut empty, &schema());
        assert_eq!(empty, json!({}), "no spec, so no nested default");
    }

    #[test]
    fn a_null_takes_the_default_unless_nullable() {
        let mut obj = json!({"spec": {"replicas": null, "mode": null, "env": {"A": null}}});
        default(&mut obj, &schema());
        assert_eq!(obj["spec"]["replicas"], 1);
        assert_eq!(obj["spec"]["mode"], Value::Null, "nullable null stays null");
        assert_eq!(obj["spec"]["env"]["A"], "x");
    }

    #[test]
    fn pruning_removes_unknown_fields_but_keeps_preserved_and_resource_meta() {
        let node = Node::compile(&json!({"type": "object", "properties": {
            "a": {"type": "string"},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "t": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}}}}));
        let mut v = json!({"a": "x", "b": 1, "free": {"any": 1},
                           "t": {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {}, "junk": 1}});
        assert!(prune(&mut v, &node, false));
        assert_eq!(
            v,
            json!({"a": "x", "free": {"any": 1},
                             "t": {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {}}})
        );
        assert!(!prune(&mut v, &node, false), "nothing left to prune");
    }

    #[test]
    fn nulls_without_defaults_are_pruned_before_defaulting() {
        let s = schema();
        let mut obj =
            json!({"spec": {"keep": null, "mode": null, "replicas": null, "unknown": null}});
        prune_nulls(&mut obj, Some(&s));
        assert_eq!(
            obj,
            json!({"spec": {"mode": null, "replicas": null, "unknown": null}})
        );
    }
}
