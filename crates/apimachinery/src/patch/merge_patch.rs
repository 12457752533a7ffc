//! RFC 7386 JSON merge patch (`application/merge-patch+json`).
//!
//! Objects merge key by key, `null` deletes a key, and everything else (lists included)
//! replaces what was there. This is also what strategic merge patch falls back to for fields
//! its schema does not know.

use serde_json::{Map, Value};

/// Applies a merge patch to `doc`. It cannot fail: any JSON value is a valid merge patch.
pub fn merge_patch(doc: &Value, patch: &Value) -> Value {
    let mut out = doc.clone();
    merge_patch_into(&mut out, patch);
    out
}

/// Applies a merge patch to `doc` in place (no copy of what the patch does not touch).
pub fn merge_patch_into(doc: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *doc = patch.clone();
        return;
    };
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let Value::Object(out) = doc else {
        return;
    };
    for (k, v) in patch {
        if v.is_null() {
            out.remove(k);
            continue;
        }
        match out.get_mut(k) {
            Some(cur) => merge_patch_into(cur, v),
            None => {
                let mut fresh = Value::Null;
                merge_patch_into(&mut fresh, v);
                out.insert(k.clone(), fresh);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_null_deletes_the_key() {
        let out = merge_patch(
            &json!({"metadata": {"labels": {"a": "1", "b": "2"}}}),
            &json!({"metadata": {"labels": {"a": null}}}),
        );
        assert_eq!(out, json!({"metadata": {"labels": {"b": "2"}}}));
    }

    #[test]
    fn merge_patch_replaces_lists_whole() {
        let out = merge_patch(
            &json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
            &json!({"spec": {"containers": [{"name": "c"}]}}),
        );
        assert_eq!(out, json!({"spec": {"containers": [{"name": "c"}]}}));
    }

    #[test]
    fn merge_patch_follows_the_rfc_examples() {
        let doc = json!({"title": "Goodbye!", "author": {"givenName": "John", "familyName": "Doe"},
                         "tags": ["example", "sample"], "content": "This will be unchanged"});
        let patch = json!({"title": "Hello!", "phoneNumber": "+01-123-456-7890",
                           "author": {"familyName": null}, "tags": ["example"]});
        assert_eq!(
            merge_patch(&doc, &patch),
            json!({"title": "Hello!", "author": {"givenName": "John"}, "tags": ["example"],
                   "content": "This will be unchanged", "phoneNumber": "+01-123-456-7890"})
        );
        assert_eq!(merge_patch(&json!({"a": "b"}), &json!("c")), json!("c"));
        assert_eq!(
            merge_patch(&json!("x"), &json!({"a": {"b": null, "c": 1}})),
            json!({"a": {"c": 1}})
        );
    }
}
