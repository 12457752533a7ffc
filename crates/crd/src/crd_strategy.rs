//! [`CrdStrategy`]: the [`registry::Strategy`] of `customresourcedefinitions` themselves
//! (upstream's CRD registry strategy): defaults, validation, `status.storedVersions`
//! bookkeeping, creation warnings, and deletion through the cleanup finalizer.

use registry::Strategy;
use serde_json::{Value, json};

use crate::crd_defaults::default_crd;
use crate::formats;
use crate::spec::{Crd, version_schema};
use crate::status::{is_established, mark_terminating};
use crate::validation;

/// The strategy of CustomResourceDefinitions.
#[derive(Debug, Default, Clone, Copy)]
pub struct CrdStrategy;

fn add_storage_version(crd: &mut Value) {
    let Some(storage) = Crd(crd).storage_version().map(str::to_string) else {
        return;
    };
    let Some(obj) = crd.as_object_mut() else {
        return;
    };
    let status = obj.entry("status").or_insert_with(|| json!({}));
    let Some(status) = status.as_object_mut() else {
        return;
    };
    let stored = status.entry("storedVersions").or_insert_with(|| json!([]));
    if let Some(list) = stored.as_array_mut()
        && !list.iter().any(|v| v == storage.as_str())
    {
        list.push(json!(storage));
    }
}

/// Upstream's creation warnings: formats it does not enforce, and set lists of objects or
/// arrays.
pub fn crd_warnings(crd: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                let ty = m.get("type").and_then(Value::as_str).unwrap_or_default();
                if let Some(f) = m.get("format").and_then(Value::as_str)
                    && !f.is_empty()
                    && formats::enforced(
                        ty,
                        m.get("x-kubernetes-int-or-string") == Some(&json!(true)),
                        f,
                    )
                    .is_empty()
                {
                    let w = format!("unrecognized format {f:?}");
                    if !out.contains(&w) {
                        out.push(w);
                    }
                }
                if m.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("set")
                    && let Some(item_ty) = m
                        .get("items")
                        .and_then(|i| i.get("type"))
                        .and_then(Value::as_str)
                    && matches!(item_ty, "object" | "array")
                {
                    let w = format!(
                        "x-kubernetes-list-type: set for items of type {item_ty:?} is not supported by server-side apply or CEL validation rules"
                    );
                    if !out.contains(&w) {
                        out.push(w);
                    }
                }
                m.values().for_each(|c| walk(c, out));
            }
            Value::Array(a) => a.iter().for_each(|c| walk(c, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for v in Crd(crd).versions() {
        if let Some(s) = version_schema(v) {
            walk(s, &mut out);
        }
    }
    out
}

impl Strategy for CrdStrategy {
    fn default(&self, obj: &mut Value) {
        default_crd(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(m) = obj.as_object_mut() {
            m.insert("status".into(), json!({}));
        }
        add_storage_version(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if let Some(m) = new.as_object_mut() {
            m.insert(
                "status".into(),
                old.get("status").cloned().unwrap_or_else(|| json!({})),
            );
        }
        add_storage_version(new);
    }

    fn validate(&self, obj: &Value) -> apimachinery::field::ErrorList {
        validation::validate_crd_without_metadata(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> apimachinery::field::ErrorList {
        validation::spec_and_status_update(Crd(new), Crd(old))
    }

    fn warnings(&self, obj: &Value) -> Vec<String> {
        crd_warnings(obj)
    }

    fn deletion_pending(&self, obj: &Value) -> bool {
        apimachinery::meta::deletion_timestamp(obj).is_none()
    }

    fn on_deletion(&self, obj: &mut Value) {
        mark_terminating(obj, &registry::store::now());
    }

    fn allow_unconditional_update(&self) -> bool {
        false
    }
}

/// Whether a CRD's resources should be served now (established and not being deleted).
pub fn should_serve(crd: &Value) -> bool {
    is_established(crd) && apimachinery::meta::deletion_timestamp(crd).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_formats_and_object_sets_are_warned_about() {
        let crd = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "a": {"type": "string", "format": "k8s-fancy"},
            "b": {"type": "string", "format": "date-time"},
            "c": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object", "x-kubernetes-map-type": "atomic"}}}}}}]}});
        assert_eq!(
            crd_warnings(&crd),
            vec![
                "unrecognized format \"k8s-fancy\"".to_string(),
                "x-kubernetes-list-type: set for items of type \"object\" is not supported by server-side apply or CEL validation rules".to_string(),
            ]
        );
    }

    #[test]
    fn the_first_delete_marks_the_crd_with_the_cleanup_finalizer() {
        let mut crd = json!({"metadata": {"name": "w.example.com"}, "status": {}});
        assert!(CrdStrategy.deletion_pending(&crd));
        crd["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        CrdStrategy.on_deletion(&mut crd);
        assert_eq!(
            crd["metadata"]["finalizers"],
            json!([crate::status::CLEANUP_FINALIZER])
        );
        assert_eq!(crd["status"]["conditions"][0]["type"], "Terminating");
        assert_eq!(
            crd["status"]["conditions"][0]["reason"],
            "InstanceDeletionPending"
        );
        assert!(
            !CrdStrategy.deletion_pending(&crd),
            "marked: the finalizer holds it now"
        );
    }

    #[test]
    fn updates_keep_status_and_record_a_new_storage_version() {
        let old = json!({"spec": {"versions": [{"name": "v1", "storage": true}]},
                         "status": {"storedVersions": ["v1"], "acceptedNames": {"kind": "W"}}});
        let mut new = json!({"spec": {"versions": [{"name": "v1", "storage": false}, {"name": "v2", "storage": true}]},
                             "status": {"storedVersions": []}});
        CrdStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(new["status"]["storedVersions"], json!(["v1", "v2"]));
        assert_eq!(new["status"]["acceptedNames"]["kind"], "W");
    }
}
