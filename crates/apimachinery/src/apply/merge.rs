//! Merging an applied configuration into a live object (structured-merge-diff's
//! `TypedValue.Merge`): the configuration wins on leaves, maps merge by key, associative lists
//! merge by item, keeping upstream's item order.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::{Map, Value};

use super::path::PathElement;
use super::shape::{Shape, at, list_elements, map_child, shape_of};
use crate::schema::Schema;

/// Merges an applied configuration into a live object (upstream `TypedValue.Merge`): the
/// configuration wins on leaves, maps merge by key, associative lists merge by item.
pub fn merge(schema: &Schema, live: &Value, config: &Value) -> Result<Value, String> {
    Ok(
        merge_node(Some(schema), Some(live), Some(config), &mut Vec::new())?
            .unwrap_or_else(|| Value::Object(Map::new())),
    )
}

fn merge_node(
    schema: Option<&Schema>,
    l: Option<&Value>,
    r: Option<&Value>,
    path: &mut Vec<PathElement>,
) -> Result<Option<Value>, String> {
    let keep_rhs = || r.or(l).cloned();
    match shape_of(schema, l, r) {
        Shape::Leaf => Ok(keep_rhs()),
        Shape::Map(s) => {
            let lm = l.and_then(Value::as_object);
            let rm = r.and_then(Value::as_object);
            if lm.is_none_or(Map::is_empty) && rm.is_none_or(Map::is_empty) {
                return Ok(keep_rhs());
            }
            let keys: BTreeSet<&String> = lm.into_iter().chain(rm).flat_map(|m| m.keys()).collect();
            let mut out = Map::new();
            for k in keys {
                let (child, _) = map_child(s, k);
                path.push(PathElement::Field(k.clone()));
                let merged = merge_node(
                    child,
                    lm.and_then(|m| m.get(k)),
                    rm.and_then(|m| m.get(k)),
                    path,
                )?;
                path.pop();
                if let Some(v) = merged {
                    out.insert(k.clone(), v);
                }
            }
            Ok((!out.is_empty()).then_some(Value::Object(out)))
        }
        Shape::List { keys, item } => {
            let la = l.and_then(Value::as_array);
            let ra = r.and_then(Value::as_array);
            if la.is_none_or(Vec::is_empty) && ra.is_none_or(Vec::is_empty) {
                return Ok(keep_rhs());
            }
            let out = merge_items(
                keys,
                item,
                la.map_or(&[][..], |v| v),
                ra.map_or(&[][..], |v| v),
                path,
            )?;
            Ok((!out.is_empty()).then_some(Value::Array(out)))
        }
    }
}

/// Upstream's list merge: live order is kept, applied items are placed in the applied order,
/// and items only in the live list stay where they were relative to the shared ones.
fn merge_items(
    keys: &[String],
    item: Option<&Schema>,
    lhs: &[Value],
    rhs: &[Value],
    path: &mut Vec<PathElement>,
) -> Result<Vec<Value>, String> {
    let rhs_pes = list_elements(keys, item, rhs, path)?;
    let mut observed_rhs: BTreeMap<&PathElement, &Value> = BTreeMap::new();
    for (pe, v) in rhs_pes.iter().zip(rhs) {
        if observed_rhs.insert(pe, v).is_some() {
            return Err(format!("{}: duplicate entries for key {pe}", at(path)));
        }
    }
    let lhs_pes = list_elements(keys, item, lhs, path)?;
    // A duplicated live key is seen as `null`, as upstream does.
    let mut observed_lhs: BTreeMap<&PathElement, &Value> = BTreeMap::new();
    for (pe, v) in lhs_pes.iter().zip(lhs) {
        if observed_lhs.insert(pe, v).is_some() {
            observed_lhs.insert(pe, &Value::Null);
        }
    }
    let mut shared: VecDeque<&PathElement> = rhs_pes
        .iter()
        .filter(|pe| observed_lhs.contains_key(pe))
        .collect();
    let mut next_shared = shared.pop_front();
    let mut merged_rhs: BTreeSet<&PathElement> = BTreeSet::new();
    let mut out = Vec::with_capacity(lhs.len().max(rhs.len()));
    let (mut li, mut ri) = (0, 0);
    let mut merge_one =
        |pe: &PathElement, l: Option<&Value>, r: Option<&Value>, out: &mut Vec<Value>| {
            path.push(pe.clone());
            let merged = merge_node(item, l, r, path);
            path.pop();
            merged.map(|m| out.extend(m))
        };
    while li < lhs_pes.len() || ri < rhs_pes.len() {
        if li < lhs_pes.len() && ri < rhs_pes.len() {
            let pe = &lhs_pes[li];
            if *pe == rhs_pes[ri] {
                merged_rhs.insert(pe);
                merge_one(
                    pe,
                    observed_lhs.get(pe).copied(),
                    observed_rhs.get(pe).copied(),
                    &mut out,
                )?;
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if observed_rhs.contains_key(pe) && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < lhs_pes.len() {
            let pe = &lhs_pes[li];
            if !observed_rhs.contains_key(pe) {
                merge_one(pe, Some(&lhs[li]), None, &mut out)?;
                li += 1;
                continue;
            } else if merged_rhs.contains(pe) {
                li += 1;
            }
        }
        if ri < rhs_pes.len() {
            let pe = &rhs_pes[ri];
            merged_rhs.insert(pe);
            merge_one(
                pe,
                observed_lhs.get(pe).copied(),
                observed_rhs.get(pe).copied(),
                &mut out,
            )?;
            ri += 1;
            if next_shared == Some(pe) {
                next_shared = shared.pop_front();
            }
        }
    }
    Ok(out)
}
