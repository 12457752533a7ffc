//! Strategic merge patch (`application/strategic-merge-patch+json`) for built-in kinds.
//!
//! Follows upstream `strategicpatch.StrategicMergeMapPatch`: maps merge key by key and `null`
//! deletes; lists whose field has patch strategy `merge` merge by the field's merge key (or as a
//! set of scalars), other lists are replaced. Directives: `$patch: replace|delete` on maps and
//! list items (and `$patch: merge`, accepted as the default), `$retainKeys`,
//! `$setElementOrder/<field>` and `$deleteFromPrimitiveList/<field>`. Fields the schema does not
//! know merge like a JSON merge patch. List merging and ordering are in `strategic_list`.

use serde_json::{Map, Value};

use super::PatchError;
use super::strategic_list::{
    ElemKind, element_kind, merge_slice, normalize_element_order, partition_by_presence,
};
use crate::gofmt::sprint as go_fmt;
use crate::schema::{PatchStrategy, Schema};

pub(super) const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";

/// Applies a strategic merge patch to `doc`, reading patch strategies and merge keys from
/// `schema` (the kind's top-level schema).
pub fn strategic_merge_patch(
    doc: &Value,
    patch: &Value,
    schema: &Schema,
) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch else {
        return Err(PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_kind(patch)
        )));
    };
    let original = match doc {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    merge_map(original, patch.clone(), Some(schema)).map(Value::Object)
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        _ => "null",
    }
}

/// The schema of field `key` of an object, if known.
fn field_schema<'a>(schema: Option<&'a Schema>, key: &str) -> Option<&'a Schema> {
    schema.and_then(|s| s.field(key)).map(|s| s.as_ref())
}

pub(super) fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    schema: Option<&Schema>,
) -> Result<Map<String, Value>, PatchError> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        match directive.as_str() {
            Some("replace") => {
                patch.remove(DIRECTIVE);
                return Ok(strip_map(patch));
            }
            Some("delete") => return Ok(Map::new()),
            Some("merge") => {
                patch.remove(DIRECTIVE);
            }
            _ => {
                return Err(PatchError::Internal(format!(
                    "unknown patch type: {} in map: {}",
                    go_fmt(directive),
                    go_fmt(&Value::Object(patch.clone()))
                )));
            }
        }
    }
    apply_retain_keys(&mut original, &mut patch)?;
    merge_ordered_lists(&mut original, &mut patch, schema)?;

    for (key, patch_value) in patch {
        let (key, is_delete_list) = match key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            Some(rest) => match rest.strip_prefix('/') {
                Some(k) => (k.to_string(), true),
                None => {
                    return Err(PatchError::BadRequest(
                        "invalid patch format of primitive list".into(),
                    ));
                }
            },
            None => (key, false),
        };
        if patch_value.is_null() {
            original.remove(&key);
            continue;
        }
        let Some(current) = original.remove(&key) else {
            if !is_delete_list && let Some(v) = clean_new_value(patch_value) {
                original.insert(key, v);
            }
            continue;
        };
        let child = field_schema(schema, &key);
        let merged = match (current, patch_value) {
            (Value::Object(cur), Value::Object(p)) => {
                let replace =
                    child.is_some_and(|c| c.patch_strategy.contains(&PatchStrategy::Replace));
                if replace {
                    Some(Value::Object(strip_map(p)))
                } else {
                    Some(Value::Object(merge_map(cur, p, child)?))
                }
            }
            (Value::Array(cur), Value::Array(p)) => {
                let merges =
                    child.is_some_and(|c| c.patch_strategy.contains(&PatchStrategy::Merge));
                if merges || is_delete_list {
                    let merge_key = child
                        .and_then(|c| c.patch_merge_key.as_deref())
                        .unwrap_or("");
                    let items = child.and_then(|c| c.items.as_deref());
                    Some(Value::Array(merge_slice(
                        cur,
                        p,
                        items,
                        merge_key,
                        is_delete_list,
                        &key,
                    )?))
                } else {
                    clean_new_value(Value::Array(p))
                }
            }
            (current, patch_value) => {
                if is_delete_list {
                    Some(current)
                } else {
                    clean_new_value(patch_value)
                }
            }
        };
        if let Some(v) = merged {
            original.insert(key, v);
        }
    }
    Ok(original)
}

/// `$retainKeys`: clears keys of `original` not listed; every key the patch sets must be listed.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<(), PatchError> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let bad = || PatchError::BadRequest("invalid patch format of retainKeys".into());
    let list = retain.as_array().ok_or_else(bad)?;
    let listed = |k: &str| list.iter().any(|v| v.as_str() == Some(k));
    for (k, v) in patch.iter() {
        if v.is_null()
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || k.starts_with(SET_ELEMENT_ORDER)
        {
            continue;
        }
        if !listed(k) {
            return Err(bad());
        }
    }
    original.retain(|k, _| listed(k));
    Ok(())
}

/// `$setElementOrder/<field>`: merges the named list with its patch (if any) and orders the
/// result: the directive's order first, server-only items interleaved by their live order.
fn merge_ordered_lists(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    schema: Option<&Schema>,
) -> Result<(), PatchError> {
    let order_keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
        .cloned()
        .collect();
    for order_key in order_keys {
        let Some(order) = patch.remove(&order_key) else {
            continue;
        };
        let bad = || PatchError::BadRequest("invalid patch format of setElementOrder list".into());
        let field = order_key
            .strip_prefix(SET_ELEMENT_ORDER)
            .and_then(|r| r.strip_prefix('/'))
            .ok_or_else(bad)?
            .to_string();
        let Value::Array(order) = order else {
            return Err(PatchError::Internal(format!(
                "expected a []interface {{}}, but received a {}",
                json_kind(&order)
            )));
        };
        let child = field_schema(schema, &field);
        let merge_key = child
            .and_then(|c| c.patch_merge_key.as_deref())
            .unwrap_or("")
            .to_string();
        let original_list = list_at(original, &field)?;
        let patch_list = list_at(patch, &field)?;
        validate_order(patch_list.as_deref(), &order, &merge_key)?;
        let merged = match (&original_list, &patch_list) {
            (Some(o), None) => o.clone(),
            (None, Some(p)) => match clean_new_value(Value::Array(p.clone())) {
                Some(Value::Array(items)) => items,
                _ => continue,
            },
            (Some(o), Some(p)) => {
                let merges =
                    child.is_some_and(|c| c.patch_strategy.contains(&PatchStrategy::Merge));
                if merges {
                    let items = child.and_then(|c| c.items.as_deref());
                    merge_slice(o.clone(), p.clone(), items, &merge_key, false, &field)?
                } else {
                    match clean_new_value(Value::Array(p.clone())) {
                        Some(Value::Array(items)) => items,
                        _ => Vec::new(),
                    }
                }
            }
            (None, None) => continue,
        };
        let original_items = original_list.unwrap_or_default();
        let patch_items = patch_list.unwrap_or_default();
        let kind = match element_kind(&[&original_items, &patch_items])? {
            Some(k) => k,
            None => ElemKind::Scalar,
        };
        let (in_order, server_only) = partition_by_presence(merged, &order, &merge_key, kind)?;
        let ordered = normalize_element_order(
            in_order,
            server_only,
            &order,
            &original_items,
            &merge_key,
            kind,
        )?;
        original.insert(field.clone(), Value::Array(ordered));
        patch.remove(&field);
    }
    Ok(())
}

fn list_at(m: &Map<String, Value>, key: &str) -> Result<Option<Vec<Value>>, PatchError> {
    match m.get(key) {
        None => Ok(None),
        Some(Value::Array(items)) => Ok(Some(items.clone())),
        Some(other) => Err(PatchError::Internal(format!(
            "expected a []interface {{}}, but received a {}",
            json_kind(other)
        ))),
    }
}

/// Upstream `validatePatchWithSetOrderList`: the patch list's items (deletions aside) must
/// appear in the `$setElementOrder` list, in the same relative order.
fn validate_order(
    patch_list: Option<&[Value]>,
    order: &[Value],
    merge_key: &str,
) -> Result<(), PatchError> {
    let Some(patch_list) = patch_list else {
        return Ok(());
    };
    if order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let non_delete: Vec<&Value> = patch_list
        .iter()
        .filter(|v| {
            merge_key.is_empty() || v.get(DIRECTIVE).and_then(Value::as_str) != Some("delete")
        })
        .collect();
    let (mut pi, mut oi) = (0, 0);
    while pi < non_delete.len() && oi < order.len() {
        if non_delete[pi].get(DIRECTIVE).is_some() {
            pi += 1;
            continue;
        }
        let equal = if merge_key.is_empty() {
            crate::apply::value::values_equal(non_delete[pi], &order[oi])
        } else {
            let l = non_delete[pi].get(merge_key);
            let r = order[oi].get(merge_key);
            match (l, r) {
                (Some(l), Some(r)) => crate::apply::value::values_equal(l, r),
                _ => {
                    return Err(PatchError::Internal(format!(
                        "map: {} does not contain declared merge key: {merge_key}",
                        go_fmt(non_delete[pi])
                    )));
                }
            }
        };
        if equal {
            pi += 1;
        }
        oi += 1;
    }
    if pi < non_delete.len() && oi >= order.len() {
        return Err(PatchError::Internal(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}\n",
            go_fmt(&Value::Array(patch_list.to_vec())),
            go_fmt(&Value::Array(order.to_vec()))
        )));
    }
    Ok(())
}

fn is_directive_key(k: &str) -> bool {
    k == RETAIN_KEYS
        || k.starts_with(SET_ELEMENT_ORDER)
        || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
}

/// Content taken from the patch as is: maps carrying `$patch` are dropped, directive keys
/// stripped, and `null` fields discarded (upstream's `IgnoreUnmatchedNulls`).
pub(super) fn clean_new_value(v: Value) -> Option<Value> {
    match v {
        Value::Object(m) => {
            if m.contains_key(DIRECTIVE) {
                return None;
            }
            Some(Value::Object(strip_map(m)))
        }
        Value::Array(items) => Some(Value::Array(
            items.into_iter().filter_map(clean_new_value).collect(),
        )),
        other => Some(other),
    }
}

fn strip_map(m: Map<String, Value>) -> Map<String, Value> {
    m.into_iter()
        .filter(|(k, v)| !v.is_null() && !is_directive_key(k) && k != DIRECTIVE)
        .filter_map(|(k, v)| clean_new_value(v).map(|v| (k, v)))
        .collect()
}

#[cfg(test)]
#[path = "strategic_tests.rs"]
mod tests;
