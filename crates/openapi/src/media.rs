//! Request bodies and responses of the REST operations, per media type.
//!
//! Built-in kinds are also offered in protobuf; custom resources only in JSON and YAML. Only
//! built-in kinds accept strategic merge patch: kubectl's client-side apply uses it exactly when
//! `application/strategic-merge-patch+json` is listed, and custom resources answer it with 415.

use serde_json::{Map, Value, json};

use crate::definitions::reference;

pub(crate) const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
pub(crate) const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
pub(crate) const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";

/// A required body of any media type with this schema (create, replace).
pub(crate) fn body(schema: &Value) -> Value {
    json!({ "content": { "*/*": { "schema": schema } }, "required": true })
}

/// The optional DeleteOptions body of delete and deletecollection.
pub(crate) fn delete_body() -> Value {
    json!({ "content": { "*/*": { "schema": reference(DELETE_OPTIONS) } } })
}

/// The body of a PATCH: one entry per accepted patch type.
pub(crate) fn patch_body(builtin: bool) -> Value {
    let patch = json!({ "schema": reference(PATCH) });
    let mut content = Map::new();
    content.insert("application/json-patch+json".into(), patch.clone());
    content.insert("application/merge-patch+json".into(), patch.clone());
    if builtin {
        content.insert(
            "application/strategic-merge-patch+json".into(),
            patch.clone(),
        );
    }
    content.insert("application/apply-patch+yaml".into(), patch);
    json!({ "content": content, "required": true })
}

/// Responses with a schema in every media type the server answers in (plain text when
/// `schema` is `None`, as `pods/log`), plus 401. `streams` adds the watch media types.
pub(crate) fn responses(
    codes: &[(&str, &str)],
    schema: Option<&Value>,
    builtin: bool,
    streams: bool,
) -> Value {
    let mut content = Map::new();
    match schema {
        Some(schema) => {
            let entry = json!({ "schema": schema });
            content.insert("application/json".into(), entry.clone());
            content.insert("application/yaml".into(), entry.clone());
            if builtin {
                content.insert("application/vnd.kubernetes.protobuf".into(), entry.clone());
            }
            if streams {
                content.insert("application/json;stream=watch".into(), entry.clone());
                if builtin {
                    content.insert(
                        "application/vnd.kubernetes.protobuf;stream=watch".into(),
                        entry,
                    );
                }
            }
        }
        None => {
            content.insert(
                "text/plain".into(),
                json!({ "schema": { "type": "string" } }),
            );
        }
    }
    let mut out = Map::new();
    for (code, description) in codes {
        out.insert(
            (*code).into(),
            json!({ "content": content, "description": description }),
        );
    }
    out.insert("401".into(), json!({ "description": "Unauthorized" }));
    out.into()
}

pub(crate) const OK: &[(&str, &str)] = &[("200", "OK")];
pub(crate) const CREATED: &[(&str, &str)] =
    &[("200", "OK"), ("201", "Created"), ("202", "Accepted")];
pub(crate) const UPDATED: &[(&str, &str)] = &[("200", "OK"), ("201", "Created")];
pub(crate) const DELETED: &[(&str, &str)] = &[("200", "OK"), ("202", "Accepted")];
