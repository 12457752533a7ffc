//! Uniqueness of `x-kubernetes-list-type: set` and `map` lists (upstream
//! `listtype.ValidateListSetsAndMaps`): a repeated set item, or a map item whose key fields
//! repeat another item's, is a `Duplicate value` at the index of its second occurrence. Items
//! of a map list must be objects.

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Map, Value};

use crate::schema::{Additional, Node};

/// Checks every set and map list in `obj` (a whole object) against `node`.
pub fn validate(node: &Node, obj: &Value) -> ErrorList {
    let mut errs = ErrorList::new();
    if let Value::Object(m) = obj
        && node.has_keyed_lists()
    {
        object(&Path::default(), node, m, &mut errs);
    }
    errs
}

fn object(path: &Path, node: &Node, m: &Map<String, Value>, errs: &mut ErrorList) {
    if let Additional::Schema(values) = &node.additional {
        for (k, v) in m {
            value(&path.key(k), values, v, errs);
        }
    }
    for (k, v) in m {
        if let Some(p) = node.properties.get(k) {
            value(&path.child(k), p, v, errs);
        }
    }
}

fn value(path: &Path, node: &Node, v: &Value, errs: &mut ErrorList) {
    if !node.has_keyed_lists() {
        return;
    }
    match v {
        Value::Array(items) => array(path, node, items, errs),
        Value::Object(m) => object(path, node, m, errs),
        _ => {}
    }
}

fn array(path: &Path, node: &Node, items: &[Value], errs: &mut ErrorList) {
    match node.list_type.as_deref() {
        Some("set") => {
            for i in second_occurrences(items) {
                errs.push(FieldError::duplicate(path.index(i), items[i].clone()));
            }
        }
        Some("map") => map_list(path, node, items, errs),
        _ => {}
    }
    if let Some(item) = &node.items {
        for (i, v) in items.iter().enumerate() {
            value(&path.index(i), item, v, errs);
        }
    }
}

/// Indexes of the second occurrence of every repeated value.
fn second_occurrences(values: &[Value]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let earlier = values[..i].iter().filter(|w| *w == v).count();
        if earlier == 1 {
            out.push(i);
        }
    }
    out
}

fn map_list(path: &Path, node: &Node, items: &[Value], errs: &mut ErrorList) {
    for (i, x) in items.iter().enumerate() {
        if !x.is_null() && !x.is_object() {
            errs.push(FieldError::invalid(
                path.index(i),
                x.clone(),
                "must be an object for an array of list-type map",
            ));
            return;
        }
    }
    if items.len() <= 1 {
        return;
    }
    let keys: Vec<Value> = items
        .iter()
        .map(|x| {
            let mut key = Map::new();
            for k in &node.list_map_keys {
                if let Some(v) = x.get(k) {
                    key.insert(k.clone(), v.clone());
                }
            }
            Value::Object(key)
        })
        .collect();
    for i in second_occurrences(&keys) {
        errs.push(FieldError::duplicate(path.index(i), keys[i].clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Node {
        Node::compile(
            &json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["port", "protocol"],
                          "items": {"type": "object", "properties": {
                              "port": {"type": "integer"}, "protocol": {"type": "string"}}}},
                "plain": {"type": "array", "items": {"type": "string"}}
            }}}}),
        )
    }

    #[test]
    fn a_repeated_set_item_is_a_duplicate_at_its_second_index() {
        let errs = validate(
            &schema(),
            &json!({"spec": {"tags": ["a", "b", "a", "a"], "plain": ["x", "x"]}}),
        );
        let msgs: Vec<String> = errs.iter().map(|e| e.message()).collect();
        assert_eq!(msgs, vec!["spec.tags[2]: Duplicate value: \"a\""]);
    }

    #[test]
    fn map_items_with_the_same_keys_are_duplicates() {
        let errs = validate(
            &schema(),
            &json!({"spec": {"ports": [
                {"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "UDP"},
                {"port": 80, "protocol": "TCP", "name": "again"}]}}),
        );
        assert_eq!(errs.len(), 1);
        let e = errs.iter().next().unwrap();
        assert_eq!(e.field, "spec.ports[2]");
        assert_eq!(e.value, Some(json!({"port": 80, "protocol": "TCP"})));
    }

    #[test]
    fn a_map_list_item_must_be_an_object() {
        let errs = validate(&schema(), &json!({"spec": {"ports": [{"port": 1}, "x"]}}));
        assert_eq!(
            errs.aggregate_message(),
            "spec.ports[1]: Invalid value: \"x\": must be an object for an array of list-type map"
        );
    }

    #[test]
    fn unique_lists_pass() {
        let ok = json!({"spec": {"tags": ["a", "b"], "ports": [{"port": 80, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}]}});
        assert!(validate(&schema(), &ok).is_empty());
    }
}
