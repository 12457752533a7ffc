//! Building OpenAPI v3 documents for a group-version from the served resources.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use registry::ResourceDef;
use serde_json::{Map, Value, json};

/// An opaque content hash (uppercase hex), used in `serverRelativeURL` as upstream does.
pub fn hash(bytes: &[u8]) -> String {
    let mut out = String::new();
    for seed in 0u64..4 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        seed.hash(&mut h);
        bytes.hash(&mut h);
        out.push_str(&format!("{:016X}", h.finish()));
    }
    out
}

fn definition_name(r: &ResourceDef) -> String {
    let group = if r.group.is_empty() { "core".to_string() } else { r.group.clone() };
    if r.custom {
        let reversed: Vec<&str> = group.split('.').rev().collect();
        format!("{}.{}.{}", reversed.join("."), r.version, r.kind)
    } else {
        let short = group.trim_end_matches(".k8s.io");
        format!("io.k8s.api.{short}.{}.{}", r.version, r.kind)
    }
}

/// The document of one group-version.
pub fn group_version_document(group: &str, version: &str, rs: &[Arc<ResourceDef>]) -> Value {
    let mut schemas = Map::new();
    let mut paths = Map::new();
    let gv = if group.is_empty() { format!("/api/{version}") } else { format!("/apis/{group}/{version}") };
    for r in rs {
        let name = definition_name(r);
        schemas.insert(name.clone(), crate::openapi::fallback_schema(r));
        let gvk = json!([{"group": r.group, "version": r.version, "kind": r.kind}]);
        let mut patch_types = vec!["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"];
        if !r.custom {
            patch_types.push("application/strategic-merge-patch+json");
        }
        let body_ref = json!({"$ref": format!("#/components/schemas/{name}")});
        let content = |types: &[&str]| -> Value {
            Value::Object(types.iter().map(|t| (t.to_string(), json!({"schema": body_ref.clone()}))).collect())
        };
        let q = |n: &str| json!({"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
        let item = if r.namespaced {
            format!("{gv}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
        } else {
            format!("{gv}/{}/{{name}}", r.plural)
        };
        if r.allows("patch") {
            paths.insert(
                item,
                json!({
                    "get": {"operationId": format!("read{}", r.kind), "x-kubernetes-action": "get", "x-kubernetes-group-version-kind": gvk[0],
                            "responses": {"200": {"content": {"application/json": {"schema": body_ref.clone()}}}}},
                    "put": {"operationId": format!("replace{}", r.kind), "x-kubernetes-action": "put", "x-kubernetes-group-version-kind": gvk[0],
                            "parameters": [q("dryRun"), q("fieldManager"), q("fieldValidation")],
                            "requestBody": {"content": content(&["application/json"])},
                            "responses": {"200": {"content": {"application/json": {"schema": body_ref.clone()}}}}},
                    "patch": {"operationId": format!("patch{}", r.kind), "x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": gvk[0],
                              "parameters": [q("dryRun"), q("fieldManager"), q("fieldValidation"), {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}],
                              "requestBody": {"content": content(&patch_types)},
                              "responses": {"200": {"content": {"application/json": {"schema": body_ref.clone()}}}}},
                }),
            );
        }
        let coll = if r.namespaced { format!("{gv}/namespaces/{{namespace}}/{}", r.plural) } else { format!("{gv}/{}", r.plural) };
        if r.allows("create") {
            paths.insert(
                coll,
                json!({"post": {"operationId": format!("create{}", r.kind), "x-kubernetes-action": "post", "x-kubernetes-group-version-kind": gvk[0],
                                "parameters": [q("dryRun"), q("fieldManager"), q("fieldValidation")],
                                "requestBody": {"content": content(&["application/json"])},
                                "responses": {"201": {"content": {"application/json": {"schema": body_ref.clone()}}}}}}),
            );
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::server::KUBE_VERSION.2},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}
