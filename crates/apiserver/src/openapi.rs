//! `/openapi/v2` and `/openapi/v3`: the API's schemas for clients (kubectl's apply, create,
//! diff, replace and explain need them).
//!
//! `/openapi/v2` answers 200: kubectl 1.27–1.28 refuse to apply anything otherwise; an empty
//! protobuf body is what they accept when they ask for protobuf. `/openapi/v3` has an index and
//! one document per served group-version, each PATCH operation carrying the GVK extension and
//! the `fieldValidation` parameter, so kubectl validates on the server.

use std::collections::BTreeMap;

use apimachinery::status::ApiError;
use http::{Response, StatusCode, header};
use registry::ResourceDef;
use serde_json::{Value, json};

use crate::discovery;
use crate::response::{self, Body};
use crate::server::{ApiServer, Ctx};

/// The content type of a gnostic protobuf v2 document. The `.v1.0` spelling (not `@v1.0`) is
/// what Go's MIME parser accepts.
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

pub fn v2(ctx: &Ctx) -> Response<Body> {
    let accept = ctx.header("accept").unwrap_or("");
    if accept.contains("protobuf") {
        return response::bytes(StatusCode::OK, V2_PROTOBUF, Vec::new());
    }
    response::json(
        StatusCode::OK,
        &json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": crate::server::KUBE_VERSION.2}, "paths": {}, "definitions": {}}),
    )
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

/// The documents of a cluster: path → (document, hash).
fn documents(server: &ApiServer, cluster: &str) -> BTreeMap<String, (Vec<u8>, String)> {
    let mut out = BTreeMap::new();
    for ((g, v), rs) in discovery::group_versions(server, cluster) {
        let doc = crate::openapi_docs::group_version_document(&g, &v, &rs);
        let bytes = serde_json::to_vec(&doc).unwrap_or_default();
        let hash = crate::openapi_docs::hash(&bytes);
        out.insert(gv_path(&g, &v), (bytes, hash));
    }
    out
}

pub fn v3_index(server: &ApiServer, ctx: &Ctx) -> Result<Response<Body>, ApiError> {
    let prefix = "/openapi/v3/";
    let paths: serde_json::Map<String, Value> = documents(server, &ctx.cluster)
        .into_iter()
        .map(|(p, (_, h))| (p.clone(), json!({"serverRelativeURL": format!("{prefix}{p}?hash={h}")})))
        .collect();
    Ok(response::json(StatusCode::OK, &json!({"paths": paths})))
}

pub fn v3_document(server: &ApiServer, ctx: &Ctx, path: &str) -> Result<Response<Body>, ApiError> {
    let docs = documents(server, &ctx.cluster);
    let (bytes, hash) = docs.get(path).ok_or_else(ApiError::no_route)?;
    let mut r = response::bytes(StatusCode::OK, "application/json", bytes.clone());
    let cache = if ctx.query.get("hash") == Some(hash.as_str()) { "public, immutable" } else { "no-cache, private" };
    r.headers_mut().insert(header::CACHE_CONTROL, http::HeaderValue::from_static(cache));
    if let Ok(v) = http::HeaderValue::from_str(&format!("\"{hash}\"")) {
        r.headers_mut().insert(header::ETAG, v);
    }
    Ok(r)
}

/// Schemas are unknown here: resources fall back to an open object schema.
pub fn fallback_schema(r: &ResourceDef) -> Value {
    json!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-group-version-kind": [{"group": r.group, "version": r.version, "kind": r.kind}],
    })
}
