//! `/openapi/v2` and `/openapi/v3`: the API's schemas for clients (kubectl's apply, create,
//! diff, replace and explain need them).
//!
//! `/openapi/v2` is the cluster's whole API as Swagger 2.0, derived from its v3 documents (JSON,
//! or gnostic protobuf for kubectl and Helm, which ask for that). `/openapi/v3` has an index and
//! one document per served group-version (built-in documents are shared by every cluster;
//! a cluster's custom resources add documents of its own).

use apimachinery::status::ApiError;
use http::{Response, StatusCode, header};

use crate::response::{self, Body};
use crate::server::{ApiServer, Ctx};

/// The content type of a gnostic protobuf v2 document. The `.v1.0` spelling (not `@v1.0`) is
/// what Go's MIME parser accepts.
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

pub fn v2(server: &ApiServer, ctx: &Ctx) -> Response<Body> {
    let doc = server
        .control_plane()
        .openapi()
        .get(&ctx.cluster)
        .v2(crate::server::KUBE_VERSION.2);
    let accept = ctx.header("accept").unwrap_or("");
    if accept.contains("protobuf") {
        return response::bytes(StatusCode::OK, V2_PROTOBUF, doc.protobuf.clone());
    }
    response::bytes(StatusCode::OK, "application/json", doc.json.clone())
}

pub fn v3_index(server: &ApiServer, ctx: &Ctx) -> Result<Response<Body>, ApiError> {
    let set = server.control_plane().openapi().get(&ctx.cluster);
    Ok(response::bytes(
        StatusCode::OK,
        "application/json",
        set.index_bytes(),
    ))
}

pub fn v3_document(server: &ApiServer, ctx: &Ctx, path: &str) -> Result<Response<Body>, ApiError> {
    let set = server.control_plane().openapi().get(&ctx.cluster);
    let doc = set.get(path).ok_or_else(ApiError::no_route)?;
    let mut r = response::bytes(StatusCode::OK, "application/json", doc.bytes().to_vec());
    let cache = if ctx.query.get("hash") == Some(doc.hash()) {
        "public, immutable"
    } else {
        "no-cache, private"
    };
    r.headers_mut()
        .insert(header::CACHE_CONTROL, http::HeaderValue::from_static(cache));
    if let Ok(v) = http::HeaderValue::from_str(&format!("\"{}\"", doc.hash())) {
        r.headers_mut().insert(header::ETAG, v);
    }
    Ok(r)
}
