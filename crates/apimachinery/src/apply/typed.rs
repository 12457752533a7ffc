//! Schema-driven walks over objects: field sets, comparison and removal (merge is in
//! `merge`, node shapes in `shape`).
//!
//! These are structured-merge-diff's typed operations (`ToFieldSet`, `Compare`, `RemoveItems`,
//! `EnsureNamedFieldsAreMembers`) on JSON values.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::fieldset::FieldSet;
pub use super::merge::merge;
use super::path::PathElement;
use super::shape::{Shape, at, item_element, list_elements, map_child, shape, shape_of};
use super::value::values_equal;
use crate::schema::Schema;

/// The set of every field `v` sets (upstream `ToFieldSet`). Duplicate list keys are an error
/// unless `allow_duplicates` (live objects may carry them; applied configurations may not).
pub fn to_field_set(
    schema: &Schema,
    v: &Value,
    allow_duplicates: bool,
) -> Result<FieldSet, String> {
    walk_set(Some(schema), v, allow_duplicates, &mut Vec::new()).map(|(s, _)| s)
}

/// Returns the set below this node and whether the node itself is a member (leaves are).
fn walk_set(
    schema: Option<&Schema>,
    v: &Value,
    allow_dups: bool,
    path: &mut Vec<PathElement>,
) -> Result<(FieldSet, bool), String> {
    let mut out = FieldSet::new();
    match shape(schema, v) {
        Shape::Leaf => return Ok((out, true)),
        Shape::Map(s) => {
            if let Value::Object(m) = v {
                for (k, child) in m {
                    let (child_schema, is_field) = map_child(s, k);
                    let pe = PathElement::Field(k.clone());
                    path.push(pe.clone());
                    let (sub, leaf) = walk_set(child_schema, child, allow_dups, path)?;
                    path.pop();
                    let empty_map = child.as_object().is_some_and(Map::is_empty);
                    if leaf || child.is_null() || empty_map || !is_field {
                        out.insert_member(pe.clone());
                    }
                    out.set_child(pe, sub);
                }
            }
        }
        Shape::List { keys, item } => {
            if let Value::Array(items) = v {
                let pes = list_elements(keys, item, items, path)?;
                let mut seen = BTreeSet::new();
                let mut dups = BTreeSet::new();
                for pe in &pes {
                    if !seen.insert(pe.clone()) {
                        if !allow_dups {
                            return Err(format!("{}: duplicate entries for key {pe}", at(path)));
                        }
                        dups.insert(pe.clone());
                    }
                }
                for (pe, child) in pes.into_iter().zip(items) {
                    out.insert_member(pe.clone());
                    if dups.contains(&pe) {
                        continue;
                    }
                    path.push(pe.clone());
                    let (sub, _) = walk_set(item, child, allow_dups, path)?;
                    path.pop();
                    out.set_child(pe, sub);
                }
            }
        }
    }
    Ok((out, false))
}

/// What changed between two versions of an object (upstream `Comparison`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    pub fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }

    /// Drops the given fields and everything below them from all three sets.
    pub fn exclude(&mut self, fields: &FieldSet) {
        if fields.is_empty() {
            return;
        }
        self.added = self.added.recursive_difference(fields);
        self.modified = self.modified.recursive_difference(fields);
        self.removed = self.removed.recursive_difference(fields);
    }
}

/// Compares two objects (upstream `TypedValue.Compare`).
pub fn compare(schema: &Schema, old: &Value, new: &Value) -> Result<Comparison, String> {
    let mut c = Comparison::default();
    compare_node(Some(schema), Some(old), Some(new), &mut Vec::new(), &mut c)?;
    Ok(c)
}

fn compare_leaf(l: Option<&Value>, r: Option<&Value>, path: &[PathElement], c: &mut Comparison) {
    match (l, r) {
        (None, _) => c.added.insert(path),
        (_, None) => c.removed.insert(path),
        (Some(l), Some(r)) if !values_equal(l, r) => c.modified.insert(path),
        _ => {}
    }
}

fn compare_node(
    schema: Option<&Schema>,
    l: Option<&Value>,
    r: Option<&Value>,
    path: &mut Vec<PathElement>,
    c: &mut Comparison,
) -> Result<(), String> {
    if let (Some(a), Some(b)) = (l, r)
        && a == b
    {
        // Nothing below an identical subtree changed (most of an object, in most writes).
        return Ok(());
    }
    match shape_of(schema, l, r) {
        Shape::Leaf => {
            compare_leaf(l, r, path, c);
            return Ok(());
        }
        Shape::Map(s) => {
            let lm = l.and_then(Value::as_object);
            let rm = r.and_then(Value::as_object);
            if lm.is_none_or(Map::is_empty) && rm.is_none_or(Map::is_empty) {
                compare_leaf(l, r, path, c);
                return Ok(());
            }
            let keys: BTreeSet<&String> = lm.into_iter().chain(rm).flat_map(|m| m.keys()).collect();
            for k in keys {
                let (child, _) = map_child(s, k);
                path.push(PathElement::Field(k.clone()));
                compare_node(
                    child,
                    lm.and_then(|m| m.get(k)),
                    rm.and_then(|m| m.get(k)),
                    path,
                    c,
                )?;
                path.pop();
            }
        }
        Shape::List { keys, item } => {
            let la = l.and_then(Value::as_array);
            let ra = r.and_then(Value::as_array);
            if la.is_none_or(Vec::is_empty) && ra.is_none_or(Vec::is_empty) {
                compare_leaf(l, r, path, c);
                return Ok(());
            }
            compare_items(
                keys,
                item,
                la.map_or(&[][..], |v| v),
                ra.map_or(&[][..], |v| v),
                path,
                c,
            )?;
        }
    }
    match (l, r) {
        (None, _) => c.added.insert(path),
        (_, None) => c.removed.insert(path),
        _ => {}
    }
    Ok(())
}

/// Items grouped by path element, in order of first appearance.
type Grouped<'v> = (Vec<PathElement>, BTreeMap<PathElement, Vec<&'v Value>>);

fn group<'v>(
    keys: &[String],
    item: Option<&Schema>,
    items: &'v [Value],
    path: &[PathElement],
) -> Result<Grouped<'v>, String> {
    let pes = list_elements(keys, item, items, path)?;
    let mut order = Vec::new();
    let mut groups: BTreeMap<PathElement, Vec<&Value>> = BTreeMap::new();
    for (pe, v) in pes.into_iter().zip(items) {
        let entry = groups.entry(pe.clone()).or_default();
        if entry.is_empty() {
            order.push(pe);
        }
        entry.push(v);
    }
    Ok((order, groups))
}

fn compare_items(
    keys: &[String],
    item: Option<&Schema>,
    l: &[Value],
    r: &[Value],
    path: &mut Vec<PathElement>,
    c: &mut Comparison,
) -> Result<(), String> {
    let (mut all, lg) = group(keys, item, l, path)?;
    let (rorder, rg) = group(keys, item, r, path)?;
    all.extend(rorder.into_iter().filter(|pe| !lg.contains_key(pe)));
    for pe in all {
        let ll = lg.get(&pe).map_or(&[][..], |v| v.as_slice());
        let rl = rg.get(&pe).map_or(&[][..], |v| v.as_slice());
        path.push(pe);
        match (ll.len(), rl.len()) {
            (0, 0) => {}
            (a, b) if a <= 1 && b <= 1 => {
                compare_node(item, ll.first().copied(), rl.first().copied(), path, c)?;
            }
            (a, b) if a >= 2 && b >= 2 => {
                let same = a == b && ll.iter().zip(rl).all(|(x, y)| values_equal(x, y));
                if !same {
                    c.modified.insert(path);
                }
            }
            (a, _) if a >= 2 => {
                if let Some(rv) = rl.first() {
                    compare_node(item, None, Some(rv), path, c)?;
                }
                c.removed.insert(path);
            }
            _ => {
                if let Some(lv) = ll.first() {
                    compare_node(item, Some(lv), None, path, c)?;
                }
                c.added.insert(path);
            }
        }
        path.pop();
    }
    Ok(())
}

/// Removes the given paths (and everything below member paths) from `v` (upstream
/// `RemoveItems`). Maps and lists emptied by the removal are dropped from their parent.
pub fn remove_items(schema: &Schema, v: &Value, set: &FieldSet) -> Value {
    remove_node(Some(schema), v, set).unwrap_or_else(|| Value::Object(Map::new()))
}

fn remove_node(schema: Option<&Schema>, v: &Value, set: &FieldSet) -> Option<Value> {
    match shape(schema, v) {
        Shape::Leaf => Some(v.clone()),
        Shape::Map(s) => {
            let m = match v.as_object() {
                Some(m) if !m.is_empty() => m,
                _ => return Some(v.clone()),
            };
            let mut out = Map::new();
            for (k, child) in m {
                let pe = PathElement::Field(k.clone());
                if set.members().contains(&pe) {
                    continue;
                }
                let kept = match set.with_prefix(&pe) {
                    Some(sub) => remove_node(map_child(s, k).0, child, sub),
                    None => Some(child.clone()),
                };
                if let Some(c) = kept {
                    out.insert(k.clone(), c);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        Shape::List { keys, item } => {
            let items = match v.as_array() {
                Some(a) if !a.is_empty() => a,
                _ => return Some(v.clone()),
            };
            let mut out = Vec::with_capacity(items.len());
            for child in items {
                let Ok(pe) = item_element(keys, item, child) else {
                    out.push(child.clone());
                    continue;
                };
                if set.members().contains(&pe) {
                    continue;
                }
                match set.with_prefix(&pe) {
                    Some(sub) => out.extend(remove_node(item, child, sub)),
                    None => out.push(child.clone()),
                }
            }
            (!out.is_empty()).then_some(Value::Array(out))
        }
    }
}

/// Adds struct fields that have owned children as members themselves (upstream
/// `EnsureNamedFieldsAreMembers`), so that pruning can remove a whole struct.
pub fn ensure_named_fields_are_members(set: &FieldSet, schema: &Schema) -> FieldSet {
    ensure_named(set, Some(schema))
}

fn ensure_named(set: &FieldSet, schema: Option<&Schema>) -> FieldSet {
    let mut out = FieldSet::new();
    for m in set.members() {
        out.insert_member(m.clone());
    }
    for (pe, child) in set.children() {
        let child_schema = match pe {
            PathElement::Field(name) => {
                if schema.is_some_and(|s| s.properties.contains_key(name)) {
                    out.insert_member(pe.clone());
                }
                map_child(schema, name).0
            }
            PathElement::Key(_) => schema.and_then(|s| s.items.as_deref()),
            _ => None,
        };
        out.set_child(pe.clone(), ensure_named(child, child_schema));
    }
    out
}

/// Drops `null` map entries, which typed objects upstream never keep.
pub fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, c| !c.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

#[cfg(test)]
#[path = "typed_tests.rs"]
mod tests;
