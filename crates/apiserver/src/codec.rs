//! Request body decoding (JSON, YAML, protobuf) and protobuf response encoding.

use apimachinery::status::ApiError;
use bytes::Bytes;
use serde_json::Value;

use crate::negotiate::{self, BodyType};
use crate::server::Ctx;

/// Request bodies above this size are refused (upstream's limit).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// Decodes an object body by its Content-Type.
pub fn decode_object(ctx: &Ctx) -> Result<Value, ApiError> {
    decode_as(
        negotiate::body_type(ctx.header("content-type")),
        &ctx.body,
        ctx.header("content-type").unwrap_or(""),
    )
}

pub fn decode_as(ty: BodyType, body: &Bytes, content_type: &str) -> Result<Value, ApiError> {
    if body.len() > MAX_BODY {
        return Err(ApiError::request_entity_too_large(
            "the request is too large",
        ));
    }
    let v = match ty {
        BodyType::Json => serde_json::from_slice::<Value>(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        BodyType::Yaml | BodyType::ApplyPatch => yaml(body)?,
        BodyType::Protobuf => decode_protobuf(body)?,
        _ => {
            return Err(ApiError::unsupported_media_type(
                content_type,
                &[
                    "application/json",
                    "application/yaml",
                    "application/vnd.kubernetes.protobuf",
                ],
            ));
        }
    };
    apimachinery::depth::check(&v)?;
    Ok(v)
}

/// YAML (or JSON, which is YAML) into JSON.
pub fn yaml(body: &[u8]) -> Result<Value, ApiError> {
    let s =
        std::str::from_utf8(body).map_err(|_| ApiError::bad_request("the body is not UTF-8"))?;
    if s.trim_start().starts_with('{') {
        return serde_json::from_str(s)
            .map_err(|e| ApiError::bad_request(format!("error decoding JSON: {e}")));
    }
    let v = serde_saphyr::from_str::<Value>(s)
        .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))?;
    apimachinery::depth::check(&v)?;
    Ok(v)
}

/// A Kubernetes protobuf body (built-in types) into JSON.
pub fn decode_protobuf(body: &[u8]) -> Result<Value, ApiError> {
    pbcodec::decode(body)
        .map_err(|e| ApiError::bad_request(format!("failed to decode the protobuf body: {e}")))
}

/// A JSON object into a protobuf body, for clients that accept only protobuf.
pub fn encode_protobuf(v: &Value) -> Result<Vec<u8>, ApiError> {
    pbcodec::encode(v).map_err(|e| {
        ApiError::not_acceptable(format!("the object cannot be encoded as protobuf: {e}"))
    })
}
