//! RFC 6902 JSON patch (`application/json-patch+json`), with the error wording of the Go
//! library the upstream API server uses (evanphx/json-patch v4), since clients and users see it.
//!
//! Paths are JSON pointers (`~1` is `/`, `~0` is `~`); `-` appends to an array and negative
//! indices count from the end, as upstream allows. A failed `test` or a path that does not
//! exist is [`PatchError::Unprocessable`] (the server's 422).

use serde_json::{Map, Value};

use super::PatchError;
use crate::apply::value::values_equal;

/// Upstream's cap on operations in one JSON patch (a 413 beyond it).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10000;

/// Upstream's cap on the bytes `copy` operations may add in one patch (the maximum request
/// size; a 413 beyond it).
pub const MAX_ACCUMULATED_COPY_BYTES: usize = 3 * 1024 * 1024;

const MISSING: &str = "missing value";
const INVALID_INDEX: &str = "invalid index referenced";

/// Applies an RFC 6902 patch (a JSON array of operations) to `doc`.
pub fn json_patch(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
    let ops = decode(patch)?;
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooManyOperations {
            max: MAX_JSON_PATCH_OPERATIONS,
            got: ops.len(),
        });
    }
    let mut out = doc.clone();
    let mut copied = 0usize;
    for op in ops {
        if let Err(e) = apply_op(&mut out, op, &mut copied) {
            crate::depth::drop_flat(out);
            return Err(e);
        }
    }
    // `move` and `add` can nest the document one level per operation: a result deeper than
    // anything may be stored is refused here, and freed without recursion.
    if crate::depth::exceeds(&out, crate::depth::MAX_DEPTH) {
        crate::depth::drop_flat(out);
        return Err(PatchError::BadRequest(format!(
            "the patched object is nested deeper than the maximum of {} levels",
            crate::depth::MAX_DEPTH
        )));
    }
    Ok(out)
}

fn decode(patch: &Value) -> Result<Vec<&Map<String, Value>>, PatchError> {
    let Some(items) = patch.as_array() else {
        return Err(PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
            crate::schema::json_type_name(patch)
        )));
    };
    items
        .iter()
        .map(|op| {
            op.as_object().ok_or_else(|| {
                PatchError::BadRequest(format!(
                    "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
                    crate::schema::json_type_name(op)
                ))
            })
        })
        .collect()
}

fn str_field<'a>(op: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    op.get(name).and_then(Value::as_str)
}

fn apply_op(
    doc: &mut Value,
    op: &Map<String, Value>,
    copied: &mut usize,
) -> Result<(), PatchError> {
    if str_field(op, "op") == Some("copy") {
        return copy_op(doc, op, copied);
    }
    apply_plain(doc, op).map_err(PatchError::Unprocessable)
}

/// The JSON size of `v`, counted without building it.
fn json_size(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

fn copy_op(doc: &mut Value, op: &Map<String, Value>, copied: &mut usize) -> Result<(), PatchError> {
    let un = PatchError::Unprocessable;
    let from = str_field(op, "from")
        .ok_or_else(|| un(format!("copy operation failed to decode from: {MISSING}")))?;
    let missing_from = || {
        un(format!(
            "copy operation does not apply: doc is missing from path: {from}: {MISSING}"
        ))
    };
    let (con, key) = find_container(doc, from).ok_or_else(missing_from)?;
    let found = get(con, &key)
        .map_err(|e| un(format!("error in copy for from: '{from}': {e}")))?
        .ok_or_else(missing_from)?;
    // Counted before the value is cloned: the budget bounds the allocation, not only the
    // result.
    *copied = copied.saturating_add(json_size(found));
    if *copied > MAX_ACCUMULATED_COPY_BYTES {
        return Err(PatchError::CopyTooLarge {
            size: *copied,
            limit: MAX_ACCUMULATED_COPY_BYTES,
        });
    }
    let val = found.clone();
    let path = str_field(op, "path")
        .ok_or_else(|| un(format!("copy operation failed to decode path: {MISSING}")))?;
    let (con, key) = find_container(doc, path).ok_or_else(|| {
        un(format!(
            "copy operation does not apply: doc is missing destination path: {path}: {MISSING}"
        ))
    })?;
    add(con, &key, val).map_err(|e| un(format!("error while adding value during copy: {e}")))
}

fn apply_plain(doc: &mut Value, op: &Map<String, Value>) -> Result<(), String> {
    let kind = str_field(op, "op").unwrap_or("unknown");
    let value = op.get("value").cloned().unwrap_or(Value::Null);
    let path = str_field(op, "path");
    let need_path = |verb: &str| {
        path.ok_or_else(|| format!("{verb} operation failed to decode path: {MISSING}"))
    };
    match kind {
        "add" => {
            let path = need_path("add")?;
            let (con, key) = find_container(doc, path).ok_or_else(|| {
                format!("add operation does not apply: doc is missing path: \"{path}\": {MISSING}")
            })?;
            add(con, &key, value).map_err(|e| format!("error in add for path: '{path}': {e}"))
        }
        "remove" => {
            let path = need_path("remove")?;
            let (con, key) = find_container(doc, path).ok_or_else(|| {
                format!(
                    "remove operation does not apply: doc is missing path: \"{path}\": {MISSING}"
                )
            })?;
            remove(con, &key)
                .map(|_| ())
                .map_err(|e| format!("error in remove for path: '{path}': {e}"))
        }
        "replace" => {
            let path = need_path("replace")?;
            if path.is_empty() {
                if !(value.is_object() || value.is_array()) {
                    return Err("replace operation value must be object or array".into());
                }
                *doc = value;
                return Ok(());
            }
            let (con, key) = find_container(doc, path).ok_or_else(|| {
                format!("replace operation does not apply: doc is missing path: {path}: {MISSING}")
            })?;
            if get(con, &key).is_err() {
                return Err(format!(
                    "replace operation does not apply: doc is missing key: {path}: {MISSING}"
                ));
            }
            set(con, &key, value).map_err(|e| format!("error in remove for path: '{path}': {e}"))
        }
        "move" => {
            let from = str_field(op, "from")
                .ok_or_else(|| format!("move operation failed to decode from: {MISSING}"))?;
            let (con, key) = find_container(doc, from).ok_or_else(|| {
                format!(
                    "move operation does not apply: doc is missing from path: {from}: {MISSING}"
                )
            })?;
            get(con, &key).map_err(|e| format!("error in move for path: '{key}': {e}"))?;
            let val =
                remove(con, &key).map_err(|e| format!("error in move for path: '{key}': {e}"))?;
            let path = need_path("move")?;
            let (con, key) = find_container(doc, path).ok_or_else(|| {
                format!(
                    "move operation does not apply: doc is missing destination path: {path}: {MISSING}"
                )
            })?;
            add(con, &key, val).map_err(|e| format!("error in move for path: '{path}': {e}"))
        }
        "test" => {
            let path = need_path("test")?;
            let failed = || format!("testing value {path} failed: test failed");
            if path.is_empty() {
                return if values_equal(doc, &value) {
                    Ok(())
                } else {
                    Err(failed())
                };
            }
            let (con, key) = find_container(doc, path).ok_or_else(|| {
                format!("test operation does not apply: is missing path: {path}: {MISSING}")
            })?;
            let found =
                get(con, &key).map_err(|e| format!("error in test for path: '{path}': {e}"))?;
            match found {
                None if value.is_null() => Ok(()),
                Some(v) if values_equal(v, &value) => Ok(()),
                _ => Err(failed()),
            }
        }
        other => Err(format!("Unexpected kind: {other}")),
    }
}

/// Decodes one reference token of a JSON pointer.
fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// Walks to the container holding the last token of `path`, as the Go library does: every
/// token but the last must name an existing object or array.
fn find_container<'a>(doc: &'a mut Value, path: &str) -> Option<(&'a mut Value, String)> {
    let split: Vec<&str> = path.split('/').collect();
    if split.len() < 2 {
        return None;
    }
    let mut cur = doc;
    for part in &split[1..split.len() - 1] {
        let token = unescape(part);
        if !matches!(get(cur, &token), Ok(Some(_))) {
            return None;
        }
        let next = child_mut(cur, &token)?;
        if !(next.is_object() || next.is_array()) {
            return None;
        }
        cur = next;
    }
    if !(cur.is_object() || cur.is_array()) {
        return None;
    }
    Some((cur, unescape(split[split.len() - 1])))
}

fn child_mut<'a>(con: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    match con {
        Value::Object(m) => m.get_mut(key),
        Value::Array(a) => {
            let idx = resolve_index(key, a.len(), false).ok()?;
            a.get_mut(idx)
        }
        _ => None,
    }
}

/// Go's `strconv.Atoi` followed by the library's negative-index rule.
fn resolve_index(key: &str, len: usize, inserting: bool) -> Result<usize, String> {
    let idx: i64 = key
        .parse()
        .map_err(|_| format!("strconv.Atoi: parsing {key:?}: invalid syntax"))?;
    let bound = if inserting { len + 1 } else { len } as i64;
    let real = if idx < 0 { idx + bound } else { idx };
    if real < 0 || real >= bound {
        return Err(format!(
            "Unable to access invalid index: {idx}: {INVALID_INDEX}"
        ));
    }
    Ok(real as usize)
}

fn get<'a>(con: &'a Value, key: &str) -> Result<Option<&'a Value>, String> {
    match con {
        Value::Object(m) => Ok(m.get(key)),
        Value::Array(a) => {
            let idx = resolve_index(key, a.len(), false)?;
            Ok(a.get(idx))
        }
        _ => Ok(None),
    }
}

fn add(con: &mut Value, key: &str, val: Value) -> Result<(), String> {
    match con {
        Value::Object(m) => {
            m.insert(key.to_string(), val);
            Ok(())
        }
        Value::Array(a) => {
            if key == "-" {
                a.push(val);
                return Ok(());
            }
            if key.parse::<i64>().is_err() {
                return Err(format!(
                    "value was not a proper array index: '{key}': strconv.Atoi: parsing {key:?}: invalid syntax"
                ));
            }
            let idx = resolve_index(key, a.len(), true)?;
            a.insert(idx, val);
            Ok(())
        }
        _ => Err(MISSING.into()),
    }
}

fn set(con: &mut Value, key: &str, val: Value) -> Result<(), String> {
    match con {
        Value::Object(m) => {
            m.insert(key.to_string(), val);
            Ok(())
        }
        Value::Array(a) => {
            let idx = resolve_index(key, a.len(), false)?;
            a[idx] = val;
            Ok(())
        }
        _ => Err(MISSING.into()),
    }
}

fn remove(con: &mut Value, key: &str) -> Result<Value, String> {
    match con {
        Value::Object(m) => m
            .remove(key)
            .ok_or_else(|| format!("Unable to remove nonexistent key: {key}: {MISSING}")),
        Value::Array(a) => {
            let idx = resolve_index(key, a.len(), false)?;
            Ok(a.remove(idx))
        }
        _ => Err(MISSING.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(doc: Value, patch: Value) -> Result<Value, PatchError> {
        json_patch(&doc, &patch)
    }

    #[test]
    fn add_inserts_into_objects_and_arrays_including_dash_and_negative_indices() {
        let out = run(
            json!({"a": {"b": [1, 2]}}),
            json!([
                {"op": "add", "path": "/a/c", "value": "x"},
                {"op": "add", "path": "/a/b/-", "value": 3},
                {"op": "add", "path": "/a/b/0", "value": 0},
                {"op": "add", "path": "/a/b/-1", "value": 9}
            ]),
        )
        .unwrap();
        assert_eq!(out, json!({"a": {"b": [0, 1, 2, 3, 9], "c": "x"}}));
    }

    #[test]
    fn pointer_escapes_address_keys_with_slashes_and_tildes() {
        let out = run(
            json!({"metadata": {"labels": {"app.kubernetes.io/name": "a", "x~y": "b"}}}),
            json!([
                {"op": "replace", "path": "/metadata/labels/app.kubernetes.io~1name", "value": "z"},
                {"op": "remove", "path": "/metadata/labels/x~0y"}
            ]),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"metadata": {"labels": {"app.kubernetes.io/name": "z"}}})
        );
    }

    #[test]
    fn move_and_copy_relocate_values() {
        let out = run(
            json!({"a": 1, "b": {"c": [5]}}),
            json!([
                {"op": "copy", "from": "/b/c/0", "path": "/d"},
                {"op": "move", "from": "/a", "path": "/b/e"}
            ]),
        )
        .unwrap();
        assert_eq!(out, json!({"b": {"c": [5], "e": 1}, "d": 5}));
    }

    #[test]
    fn failed_test_is_unprocessable_with_upstream_wording() {
        let err = run(
            json!({"spec": {"replicas": 1}}),
            json!([{"op": "test", "path": "/spec/replicas", "value": 2}]),
        )
        .unwrap_err();
        assert_eq!(
            err,
            PatchError::Unprocessable("testing value /spec/replicas failed: test failed".into())
        );
        let status = err.to_api_error().to_status();
        assert_eq!(status["code"], 422);
        assert_eq!(status["reason"], "Invalid");
        assert_eq!(
            status["details"]["causes"][0]["reason"],
            "UnexpectedServerResponse"
        );
    }

    #[test]
    fn passing_test_leaves_the_document_alone() {
        let doc = json!({"spec": {"replicas": 1}});
        let out = run(
            doc.clone(),
            json!([{"op": "test", "path": "/spec", "value": {"replicas": 1}}]),
        )
        .unwrap();
        assert_eq!(out, doc);
    }

    #[test]
    fn missing_parent_path_is_unprocessable() {
        let err = run(
            json!({}),
            json!([{"op": "add", "path": "/spec/replicas", "value": 1}]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "add operation does not apply: doc is missing path: \"/spec/replicas\": missing value"
        );
        let err = run(json!({"a": 1}), json!([{"op": "remove", "path": "/b"}])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "error in remove for path: '/b': Unable to remove nonexistent key: b: missing value"
        );
    }

    #[test]
    fn out_of_range_index_is_rejected() {
        let err = run(
            json!({"a": [1]}),
            json!([{"op": "add", "path": "/a/5", "value": 1}]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "error in add for path: '/a/5': Unable to access invalid index: 5: invalid index referenced"
        );
    }

    #[test]
    fn a_patch_that_is_not_a_list_is_a_bad_request() {
        let err = run(json!({}), json!({"op": "add"})).unwrap_err();
        assert!(matches!(err, PatchError::BadRequest(_)));
        assert_eq!(err.to_api_error().code, 400);
    }

    #[test]
    fn unknown_operation_is_reported() {
        let err = run(json!({}), json!([{"op": "frob", "path": "/a"}])).unwrap_err();
        assert_eq!(err.to_string(), "Unexpected kind: frob");
    }
}
