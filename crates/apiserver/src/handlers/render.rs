//! Rendering objects and lists as the client asked: JSON, YAML, Table,
//! PartialObjectMetadata or protobuf.

use std::sync::Arc;

use apimachinery::meta;
use apimachinery::status::ApiError;
use http::{Response, StatusCode, header};
use registry::ResourceDef;
use registry::cache::CachedObject;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::negotiate::{self, Output};
use crate::response::{self, Body};
use crate::server::Ctx;
use crate::table;

/// The output the request asks for, or 406.
pub fn output(ctx: &Ctx) -> Result<Output, ApiError> {
    negotiate::choose_output(ctx.header("accept")).ok_or_else(|| {
        ApiError::not_acceptable(format!(
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf; got {}",
            ctx.header("accept").unwrap_or("")
        ))
    })
}

pub fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
}

/// Serializes and sends a value in the chosen encoding.
pub fn send<T: Serialize>(ctx: &Ctx, status: StatusCode, out: Output, value: &T) -> Response<Body> {
    let (body, ct) = match out {
        Output::Yaml => match serde_json::to_value(value)
            .map_err(|e| e.to_string())
            .and_then(|v| to_yaml(&v))
        {
            Ok(y) => (y.into_bytes(), "application/yaml"),
            Err(e) => return response::error(&ApiError::internal(e)),
        },
        Output::Protobuf => {
            match serde_json::to_value(value).map(|v| crate::codec::encode_protobuf(&v)) {
                Ok(Ok(pb)) => (pb, "application/vnd.kubernetes.protobuf"),
                Ok(Err(_)) | Err(_) => match serde_json::to_vec(value) {
                    Ok(b) => (b, "application/json"),
                    Err(e) => return response::error(&ApiError::internal(e)),
                },
            }
        }
        _ => match serde_json::to_vec(value) {
            Ok(b) => (b, "application/json"),
            Err(e) => return response::error(&ApiError::internal(e)),
        },
    };
    respond(ctx, status, ct, body)
}

/// Sends an encoded body, gzipped when the client accepts it and it is worth it.
fn respond(ctx: &Ctx, status: StatusCode, ct: &str, body: Vec<u8>) -> Response<Body> {
    let (body, gz) = response::maybe_gzip(ctx.header("accept-encoding"), body);
    let mut r = response::bytes(status, ct, body);
    if gz {
        r.headers_mut().insert(
            header::CONTENT_ENCODING,
            http::HeaderValue::from_static("gzip"),
        );
    }
    r
}

fn to_yaml(v: &Value) -> Result<String, String> {
    serde_saphyr::to_string(v).map_err(|e| e.to_string())
}

/// Objects read from the store as `res` serves them: converted to its version when its
/// versions are converted outside the store (a conversion webhook), else as they are.
pub async fn served_objects(
    res: &ResourceDef,
    items: Vec<Arc<CachedObject>>,
) -> Result<Vec<Arc<CachedObject>>, ApiError> {
    if res.converter.is_none() {
        return Ok(items);
    }
    let values: Vec<Value> = items.iter().map(|o| o.to_value()).collect();
    let converted = res.to_served(values).await?;
    Ok(items
        .iter()
        .zip(converted)
        .filter_map(|(o, v)| {
            CachedObject::new(v, o.rev, o.cluster.clone(), &*res.strategy, false).map(Arc::new)
        })
        .collect())
}

/// One object read from the store as `res` serves it (see [`served_objects`]).
pub async fn served_object(res: &ResourceDef, obj: Value) -> Result<Value, ApiError> {
    res.to_served(vec![obj])
        .await?
        .pop()
        .ok_or_else(|| ApiError::internal("conversion lost the object"))
}

/// An object as its resource serves it (the strategy's read hook applied to a copy).
pub fn prepare(res: &ResourceDef, obj: &Value) -> Value {
    let mut v = obj.clone();
    res.strategy.read(&mut v);
    v
}

/// Renders one object.
pub fn object(
    ctx: &Ctx,
    res: &ResourceDef,
    status: StatusCode,
    obj: &Value,
) -> Result<Response<Body>, ApiError> {
    let out = output(ctx)?;
    let read;
    let obj = if res.strategy.has_read() {
        read = prepare(res, obj);
        &read
    } else {
        obj
    };
    Ok(match out {
        Output::Table => {
            let t = table::table(
                res,
                std::slice::from_ref(obj),
                ctx,
                json!({"resourceVersion": meta::resource_version(obj)}),
                true,
            );
            send(ctx, status, Output::Json, &t)
        }
        Output::Metadata => send(ctx, status, Output::Json, &partial_metadata(obj)),
        other => send(ctx, status, other, obj),
    })
}

/// Renders one object from the cache: its cached bytes as they are for JSON, decoded for
/// anything else (or when the resource has a read hook).
pub fn cached_object(
    ctx: &Ctx,
    res: &ResourceDef,
    status: StatusCode,
    obj: &CachedObject,
) -> Result<Response<Body>, ApiError> {
    if matches!(output(ctx)?, Output::Json) && !res.strategy.has_read() {
        return Ok(respond(
            ctx,
            status,
            "application/json",
            obj.json().to_vec(),
        ));
    }
    object(ctx, res, status, &obj.to_value())
}

#[derive(Serialize)]
struct ListOut<'a, T: Serialize> {
    kind: &'a str,
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    metadata: Value,
    items: Vec<T>,
}

/// List metadata: resourceVersion, continue, remainingItemCount.
pub fn list_metadata(rev: i64, continue_token: Option<&str>, remaining: Option<u64>) -> Value {
    let mut m = Map::new();
    m.insert("resourceVersion".into(), json!(rev.to_string()));
    if let Some(c) = continue_token {
        m.insert("continue".into(), json!(c));
    }
    if let Some(r) = remaining {
        m.insert("remainingItemCount".into(), json!(r));
    }
    Value::Object(m)
}

/// An object as a response shows it, decoded: annotated with its cluster when `cross_cluster`,
/// and through the strategy's read hook (custom resources).
pub fn served_value(res: &ResourceDef, obj: &CachedObject, cross_cluster: bool) -> Value {
    let mut v = if cross_cluster {
        obj.annotated_value()
    } else {
        obj.to_value()
    };
    if res.strategy.has_read() {
        res.strategy.read(&mut v);
    }
    v
}

/// Renders a list. JSON lists of resources without a read hook splice the cached bytes of
/// each object (with the cluster annotation spliced in for cross-cluster requests); other
/// outputs decode.
pub fn list(
    ctx: &Ctx,
    res: &ResourceDef,
    items: &[Arc<CachedObject>],
    metadata: Value,
) -> Result<Response<Body>, ApiError> {
    let out = output(ctx)?;
    let cross_cluster = ctx.cluster == crate::route::ALL_CLUSTERS;
    let decoded = || -> Vec<Value> {
        items
            .iter()
            .map(|o| served_value(res, o, cross_cluster))
            .collect()
    };
    Ok(match out {
        Output::Json if !res.strategy.has_read() => {
            let body = json_list(res, items, &metadata, cross_cluster)?;
            respond(ctx, StatusCode::OK, "application/json", body)
        }
        Output::Table => {
            let t = table::table(res, &decoded(), ctx, metadata, true);
            send(ctx, StatusCode::OK, Output::Json, &t)
        }
        Output::Metadata => {
            let items: Vec<Value> = decoded().iter().map(partial_metadata).collect();
            let l = ListOut {
                kind: "PartialObjectMetadataList",
                api_version: "meta.k8s.io/v1",
                metadata,
                items,
            };
            send(ctx, StatusCode::OK, Output::Json, &l)
        }
        other => {
            let av = res.api_version();
            let l = ListOut {
                kind: &res.list_kind,
                api_version: &av,
                metadata,
                items: decoded(),
            };
            send(ctx, StatusCode::OK, other, &l)
        }
    })
}

/// A JSON list written around the cached bytes of its items (the same document as
/// [`ListOut`] serialized).
fn json_list(
    res: &ResourceDef,
    items: &[Arc<CachedObject>],
    metadata: &Value,
    cross_cluster: bool,
) -> Result<Vec<u8>, ApiError> {
    let size: usize = items.iter().map(|o| o.json().len() + 1).sum();
    let mut buf = Vec::with_capacity(size + 256);
    buf.extend_from_slice(b"{\"kind\":");
    serde_json::to_writer(&mut buf, &res.list_kind).map_err(ApiError::internal)?;
    buf.extend_from_slice(b",\"apiVersion\":");
    serde_json::to_writer(&mut buf, &res.api_version()).map_err(ApiError::internal)?;
    buf.extend_from_slice(b",\"metadata\":");
    serde_json::to_writer(&mut buf, metadata).map_err(ApiError::internal)?;
    buf.extend_from_slice(b",\"items\":[");
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        o.write_json(&mut buf, cross_cluster);
    }
    buf.extend_from_slice(b"]}");
    Ok(buf)
}
