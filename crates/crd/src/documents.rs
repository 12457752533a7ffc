//! The OpenAPI v3 documents of a cluster's CRDs: one per served group-version, every
//! custom kind of that group-version in it (`openapi::custom_resource_document`).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::spec::{Crd, is_true, version_schema};

/// `(group, version, document)` for every group-version the CRDs serve. A version without a
/// schema is published as an object that keeps unknown fields.
pub fn openapi_documents(crds: &[Value]) -> Vec<(String, String, Arc<openapi::Document>)> {
    let any = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    struct Entry<'a> {
        kind: &'a str,
        list_kind: String,
        plural: &'a str,
        namespaced: bool,
        schema: &'a Value,
        status: bool,
        scale: bool,
    }
    let mut by_gv: BTreeMap<(String, String), Vec<Entry<'_>>> = BTreeMap::new();
    for crd in crds {
        let c = Crd(crd);
        for v in c.versions().iter().filter(|v| is_true(v, "served")) {
            let Some(version) = v.get("name").and_then(Value::as_str) else {
                continue;
            };
            let sub = v.get("subresources");
            by_gv
                .entry((c.group().to_string(), version.to_string()))
                .or_default()
                .push(Entry {
                    kind: c.kind(),
                    list_kind: c.list_kind(),
                    plural: c.plural(),
                    namespaced: c.namespaced(),
                    schema: version_schema(v).unwrap_or(&any),
                    status: sub
                        .and_then(|s| s.get("status"))
                        .is_some_and(|s| !s.is_null()),
                    scale: sub
                        .and_then(|s| s.get("scale"))
                        .is_some_and(|s| !s.is_null()),
                });
        }
    }
    by_gv
        .iter()
        .map(|((group, version), entries)| {
            let resources: Vec<openapi::CustomResource<'_>> = entries
                .iter()
                .map(|e| openapi::CustomResource {
                    group,
                    version,
                    kind: e.kind,
                    list_kind: &e.list_kind,
                    plural: e.plural,
                    namespaced: e.namespaced,
                    schema: e.schema,
                    status_subresource: e.status,
                    scale_subresource: e.scale,
                })
                .collect();
            (
                group.clone(),
                version.clone(),
                Arc::new(openapi::custom_resource_document(&resources)),
            )
        })
        .collect()
}
