//! List merging for strategic merge patch: merge by key, sets of scalars, the `$patch`
//! directives inside lists, `$deleteFromPrimitiveList`, and upstream's ordering rules.
//!
//! Ordering follows upstream `normalizeElementOrder`: items named by the patch (or by
//! `$setElementOrder`) keep the patch's order, items only on the server keep their live order,
//! and the two are interleaved by the live order where both are known. A new item therefore
//! lands before the server-only items that follow it, which is what kubectl expects.

use serde_json::Value;

use super::PatchError;
use super::strategic::{DIRECTIVE, clean_new_value, merge_map};
use crate::apply::value::values_equal;
use crate::gofmt::sprint as go_fmt;
use crate::schema::Schema;

/// What the items of a list are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ElemKind {
    Map,
    Scalar,
}

/// Upstream `sliceElementType`: all items must be of one type, and not lists.
pub(super) fn element_kind(lists: &[&[Value]]) -> Result<Option<ElemKind>, PatchError> {
    let mut seen: Option<u8> = None;
    for list in lists {
        for v in list.iter() {
            let t = match v {
                Value::Array(_) => {
                    return Err(PatchError::Unprocessable(
                        "lists of lists are not supported".into(),
                    ));
                }
                Value::Object(_) => 0,
                Value::String(_) => 1,
                Value::Number(_) => 2,
                Value::Bool(_) => 3,
                Value::Null => 4,
            };
            match seen {
                None => seen = Some(t),
                Some(s) if s != t => {
                    let all: Vec<Value> = lists.iter().map(|l| Value::Array(l.to_vec())).collect();
                    return Err(PatchError::Internal(format!(
                        "list element types are not identical: {}",
                        go_fmt(&Value::Array(all))
                    )));
                }
                _ => {}
            }
        }
    }
    Ok(seen.map(|t| {
        if t == 0 {
            ElemKind::Map
        } else {
            ElemKind::Scalar
        }
    }))
}

/// The identity of an item: its merge-key value for maps, itself for scalars. Items of a map
/// list without the key are identified by `null`, as upstream's lookup does.
fn identity<'a>(item: &'a Value, merge_key: &str, kind: ElemKind) -> &'a Value {
    match kind {
        ElemKind::Map => item.get(merge_key).unwrap_or(&Value::Null),
        ElemKind::Scalar => item,
    }
}

fn index_of(list: &[Value], item: &Value, merge_key: &str, kind: ElemKind) -> Option<usize> {
    let id = identity(item, merge_key, kind);
    list.iter()
        .position(|v| values_equal(identity(v, merge_key, kind), id))
}

fn no_merge_key(item: &Value, merge_key: &str) -> PatchError {
    PatchError::Internal(format!(
        "map: {} does not contain declared merge key: {merge_key}",
        go_fmt(item)
    ))
}

/// Merges a patch list into a live list whose field has patch strategy `merge` (or a
/// `$deleteFromPrimitiveList` list into a list of scalars).
pub(super) fn merge_slice(
    original: Vec<Value>,
    patch: Vec<Value>,
    item_schema: Option<&Schema>,
    merge_key: &str,
    is_delete_list: bool,
    field: &str,
) -> Result<Vec<Value>, PatchError> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let kind = element_kind(&[&original, &patch])?.unwrap_or(ElemKind::Scalar);
    let (original, patch, merged) = if kind == ElemKind::Scalar {
        if is_delete_list {
            return Ok(original
                .into_iter()
                .filter(|v| !patch.iter().any(|d| values_equal(d, v)))
                .collect());
        }
        let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
        for v in original.iter().chain(patch.iter()) {
            if !merged.iter().any(|m| values_equal(m, v)) {
                merged.push(v.clone());
            }
        }
        (original, patch, merged)
    } else {
        if merge_key.is_empty() {
            return Err(PatchError::Internal(format!(
                "cannot merge lists without merge key for {field}"
            )));
        }
        let (original, patch) = apply_special_elements(original, patch, merge_key)?;
        let merged = merge_by_key(original.clone(), &patch, merge_key, item_schema)?;
        (original, patch, merged)
    };
    let (in_patch, server_only) = partition_by_presence(merged, &patch, merge_key, kind)?;
    normalize_element_order(in_patch, server_only, &patch, &original, merge_key, kind)
}

/// Handles `$patch: delete` and `$patch: replace` items; returns the live list after
/// deletions and the patch without directive items.
fn apply_special_elements(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    for item in patch {
        let Some(directive) = item.get(DIRECTIVE) else {
            plain.push(item);
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                let Some(key_value) = item.get(merge_key) else {
                    return Err(no_merge_key(&item, merge_key));
                };
                original.retain(|v| !v.get(merge_key).is_some_and(|k| values_equal(k, key_value)));
            }
            Some("replace") => replace = true,
            Some("merge") => {
                let mut item = item;
                if let Some(m) = item.as_object_mut() {
                    m.remove(DIRECTIVE);
                }
                plain.push(item);
            }
            _ => {
                return Err(PatchError::Internal(format!(
                    "unknown patch type: {} in map: {}",
                    go_fmt(directive),
                    go_fmt(&item)
                )));
            }
        }
    }
    if replace {
        let items = plain.into_iter().filter_map(clean_new_value).collect();
        return Ok((items, Vec::new()));
    }
    Ok((original, plain))
}

fn merge_by_key(
    mut original: Vec<Value>,
    patch: &[Value],
    merge_key: &str,
    item_schema: Option<&Schema>,
) -> Result<Vec<Value>, PatchError> {
    for item in patch {
        let Some(key_value) = item.get(merge_key) else {
            return Err(no_merge_key(item, merge_key));
        };
        let found = original
            .iter()
            .position(|v| v.get(merge_key).is_some_and(|k| values_equal(k, key_value)));
        match (found, item) {
            (Some(i), Value::Object(p)) => {
                let current = match std::mem::take(&mut original[i]) {
                    Value::Object(m) => m,
                    _ => serde_json::Map::new(),
                };
                original[i] = Value::Object(merge_map(current, p.clone(), item_schema)?);
            }
            _ => {
                if let Some(v) = clean_new_value(item.clone()) {
                    original.push(v);
                }
            }
        }
    }
    Ok(original)
}

/// Splits `items` into those named in `by` (by merge key or value) and the rest.
pub(super) fn partition_by_presence(
    items: Vec<Value>,
    by: &[Value],
    merge_key: &str,
    kind: ElemKind,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut present = Vec::new();
    let mut absent = Vec::new();
    for item in items {
        let found = if kind == ElemKind::Map && !merge_key.is_empty() {
            let Some(k) = item.get(merge_key) else {
                return Err(no_merge_key(&item, merge_key));
            };
            by.iter()
                .any(|o| o.get(merge_key).is_some_and(|ok| values_equal(ok, k)))
        } else {
            by.iter().any(|o| values_equal(o, &item))
        };
        if found {
            present.push(item);
        } else {
            absent.push(item);
        }
    }
    Ok((present, absent))
}

/// Upstream `normalizeElementOrder`: sorts patch items by the patch order and server-only items
/// by the live order, then interleaves them by the live order.
pub(super) fn normalize_element_order(
    patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    kind: ElemKind,
) -> Result<Vec<Value>, PatchError> {
    let patch = sort_by_order(patch, patch_order, merge_key, kind)?;
    let server_only = sort_by_order(server_only, server_order, merge_key, kind)?;
    Ok(merge_sorted(
        server_only,
        patch,
        server_order,
        merge_key,
        kind,
    ))
}

fn sort_by_order(
    items: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    kind: ElemKind,
) -> Result<Vec<Value>, PatchError> {
    let (mut keep, deletes): (Vec<Value>, Vec<Value>) = if kind == ElemKind::Map {
        for v in items.iter().chain(order.iter()) {
            if v.get(merge_key).is_none() {
                return Err(no_merge_key(v, merge_key));
            }
        }
        items
            .into_iter()
            .partition(|v| v.get(DIRECTIVE).and_then(Value::as_str) != Some("delete"))
    } else {
        (items, Vec::new())
    };
    keep.sort_by_key(|v| index_of(order, v, merge_key, kind).unwrap_or(usize::MAX));
    keep.extend(deletes);
    Ok(keep)
}

/// Upstream `mergeSortedSlice`: inserts each `left` (server-only) item into `right` (patch
/// items) before the first right item that the live order puts after it.
fn merge_sorted(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    merge_key: &str,
    kind: ElemKind,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => {
                let li = index_of(server_order, l, merge_key, kind);
                let ri = index_of(server_order, r, merge_key, kind);
                matches!((li, ri), (Some(li), Some(ri)) if li < ri)
            }
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}
