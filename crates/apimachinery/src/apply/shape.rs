//! Node shapes: how server-side apply sees a value through its schema.
//!
//! Scalars and atomic lists/maps are leaves; granular maps (structs and `additionalProperties`
//! maps) and associative lists (`set`, `map` with keys, or a built-in's `patchStrategy: merge`
//! list, which upstream converts to a keyed or set list) are walked item by item. Fields the
//! schema does not know are "deduced" as upstream does: objects are granular maps, lists atomic.
//! Also here: the path element of a list item (its key fields, or its value for sets).

use serde_json::Value;

use super::path::{FieldPath, OrdValue, PathElement};
use crate::schema::{ListType, MapType, PatchStrategy, Schema, Type};

/// How a node is walked.
#[derive(Clone)]
pub(super) enum Shape<'a> {
    /// Compared and replaced whole: scalars, atomic lists and atomic maps.
    Leaf,
    /// A granular map; `None` is a deduced map (every key a map key, not a struct field).
    Map(Option<&'a Schema>),
    /// An associative list: keyed items, or a set of scalars when `keys` is empty.
    List {
        keys: &'a [String],
        item: Option<&'a Schema>,
    },
}

impl Shape<'_> {
    fn same_kind(&self, other: &Shape<'_>) -> bool {
        matches!(
            (self, other),
            (Shape::Leaf, Shape::Leaf)
                | (Shape::Map(_), Shape::Map(_))
                | (Shape::List { .. }, Shape::List { .. })
        )
    }
}

pub(super) fn deduced<'a>(v: &Value) -> Shape<'a> {
    match v {
        Value::Object(_) => Shape::Map(None),
        _ => Shape::Leaf,
    }
}

pub(super) fn shape<'a>(schema: Option<&'a Schema>, v: &Value) -> Shape<'a> {
    let Some(s) = schema else {
        return deduced(v);
    };
    match s.ty {
        Type::Any => deduced(v),
        Type::Object if v.is_object() || v.is_null() => {
            if s.map_type == MapType::Atomic {
                Shape::Leaf
            } else {
                Shape::Map(Some(s))
            }
        }
        Type::Array if v.is_array() || v.is_null() => {
            let item = s.items.as_deref();
            match &s.list_type {
                ListType::Set => Shape::List { keys: &[], item },
                ListType::Map(keys) => Shape::List { keys, item },
                ListType::Atomic if s.patch_strategy.contains(&PatchStrategy::Merge) => {
                    match &s.patch_merge_key {
                        Some(k) => Shape::List {
                            keys: std::slice::from_ref(k),
                            item,
                        },
                        None => Shape::List { keys: &[], item },
                    }
                }
                ListType::Atomic => Shape::Leaf,
            }
        }
        _ => Shape::Leaf,
    }
}

/// The shape for a pair of values; values of different kinds are compared as leaves.
pub(super) fn shape_of<'a>(
    schema: Option<&'a Schema>,
    l: Option<&Value>,
    r: Option<&Value>,
) -> Shape<'a> {
    match (l, r) {
        (Some(l), Some(r)) => {
            let (a, b) = (shape(schema, l), shape(schema, r));
            if a.same_kind(&b) { b } else { Shape::Leaf }
        }
        (Some(v), None) | (None, Some(v)) => shape(schema, v),
        (None, None) => Shape::Leaf,
    }
}

/// The schema of a map entry and whether it is a declared struct field.
pub(super) fn map_child<'a>(schema: Option<&'a Schema>, key: &str) -> (Option<&'a Schema>, bool) {
    match schema {
        Some(s) => match s.properties.get(key) {
            Some(p) => (Some(p.as_ref()), true),
            None => (s.additional_properties.as_deref(), false),
        },
        None => (None, false),
    }
}

pub(super) fn at(path: &[PathElement]) -> String {
    FieldPath(path.to_vec()).to_string()
}

/// The path element of a list item (upstream `listItemToPathElement`).
pub(super) fn item_element(
    keys: &[String],
    item_schema: Option<&Schema>,
    v: &Value,
) -> Result<PathElement, String> {
    if keys.is_empty() {
        return match v {
            Value::Object(_) => {
                Err("associative list without keys has an element that's a map type".into())
            }
            Value::Array(_) => Err("not supported: associative list with lists as elements".into()),
            Value::Null => {
                Err("associative list without keys has an element that's an explicit null".into())
            }
            other => Ok(PathElement::Value(OrdValue(other.clone()))),
        };
    }
    let m = match v {
        Value::Object(m) => m,
        Value::Null => return Err("associative list with keys may not have a null element".into()),
        _ => return Err("associative list with keys may not have non-map elements".into()),
    };
    let mut fields = Vec::with_capacity(keys.len());
    for k in keys {
        let value = m.get(k).cloned().or_else(|| {
            item_schema
                .and_then(|s| s.properties.get(k))
                .and_then(|p| p.default.clone())
        });
        match value {
            Some(v) => fields.push((k.clone(), v)),
            None => {
                return Err(format!(
                    "associative list with keys has an element that omits key field {k:?} (and doesn't have default value)"
                ));
            }
        }
    }
    Ok(PathElement::key(fields))
}

pub(super) fn list_elements(
    keys: &[String],
    item: Option<&Schema>,
    items: &[Value],
    path: &[PathElement],
) -> Result<Vec<PathElement>, String> {
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            item_element(keys, item, v).map_err(|e| format!("{}: element {i}: {e}", at(path)))
        })
        .collect()
}
