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

fn partial_metadata(obj: &Value) -> Value {
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

/// An object as a cross-cluster response shows it: annotated with its cluster.
pub fn annotate_cluster(obj: &CachedObject) -> Value {
    let mut v = obj.value.clone();
    let m = meta::metadata_mut(&mut v);
    let ann = m.entry("annotations").or_insert_with(|| json!({}));
    if let Some(a) = ann.as_object_mut() {
        a.insert(
            crate::route::CLUSTER_ANNOTATION.into(),
            json!(&*obj.cluster),
        );
    }
    v
}

/// Renders a list.
pub fn list(
    ctx: &Ctx,
    res: &ResourceDef,
    items: &[Arc<CachedObject>],
    metadata: Value,
) -> Result<Response<Body>, ApiError> {
    let out = output(ctx)?;
    if res.strategy.has_read() {
        // Custom resources are served at the requested version with read-time defaults.
        let prepared: Vec<Arc<CachedObject>> = items
            .iter()
            .map(|o| {
                Arc::new(CachedObject {
                    rev: o.rev,
                    value: prepare(res, &o.value),
                    cluster: o.cluster.clone(),
                })
            })
            .collect();
        let mut plain = ResourceDef::clone(res);
        plain.strategy = Arc::new(registry::DefaultStrategy);
        return list(ctx, &plain, &prepared, metadata);
    }
    if ctx.cluster == crate::route::ALL_CLUSTERS {
        let annotated: Vec<Arc<CachedObject>> = items
            .iter()
            .map(|o| {
                Arc::new(CachedObject {
                    rev: o.rev,
                    value: annotate_cluster(o),
                    cluster: o.cluster.clone(),
                })
            })
            .collect();
        let mut plain = Ctx::clone_for_render(ctx);
        plain.cluster = String::new();
        return list(&plain, res, &annotated, metadata);
    }
    Ok(match out {
        Output::Table => {
            let objs: Vec<Value> = items.iter().map(|o| o.value.clone()).collect();
            let t = table::table(res, &objs, ctx, metadata, true);
            send(ctx, StatusCode::OK, Output::Json, &t)
        }
        Output::Metadata => {
            let items: Vec<Value> = items.iter().map(|o| partial_metadata(&o.value)).collect();
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
                items: items.iter().map(|o| &o.value).collect(),
            };
            send(ctx, StatusCode::OK, other, &l)
        }
    })
}
