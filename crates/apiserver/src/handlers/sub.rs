//! Subresources: `status`, `scale`, `pods/binding`, `pods/eviction`, `pods/log`,
//! `namespaces/finalize`. The connect subresources (exec, attach, port-forward, proxy) are
//! served by [`crate::connect`] before a request gets here; one that arrives anyway came
//! through the in-process transport, which cannot upgrade.

use std::sync::Arc;

use apimachinery::labels::label_selector_from_json;
use apimachinery::meta;
use apimachinery::status::ApiError;
use apimachinery::{FieldError, Path};
use http::{Response, StatusCode};
use registry::ResourceDef;
use registry::store::{DeleteOptions, Location, WriteOptions};
use serde_json::{Value, json};

use super::{read, render, write};
use crate::codec;
use crate::negotiate;
use crate::patching;
use crate::response::{self, Body};
use crate::server::{ApiServer, Ctx};

pub async fn handle(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
    verb: &str,
    sub: &str,
) -> Result<Response<Body>, ApiError> {
    match (sub, verb) {
        ("status", "get") => read::get(server, ctx, res, loc).await,
        ("status", "update") => write::update(server, ctx, res, loc, Some("status")).await,
        ("status", "patch") => write::patch(server, ctx, res, loc, Some("status")).await,
        ("scale", "get" | "update" | "patch") => scale(server, ctx, res, loc, verb).await,
        ("binding", "create") => binding(server, ctx, res, loc).await,
        ("eviction", "create") => eviction(server, ctx, res, loc).await,
        ("log", "get") => crate::connect::logs::log(server, ctx, res, loc).await,
        ("exec" | "attach" | "portforward" | "proxy", _) => Err(
            crate::connect::in_process_refusal(&format!("{}/{sub}", res.plural)),
        ),
        ("finalize", "update") => finalize(server, ctx, res, loc).await,
        ("token", "create") => {
            crate::tokens::token_request(server, ctx, loc.namespace, loc.name).await
        }
        _ => Err(ApiError::method_not_allowed(
            ctx.method.as_str(),
            &format!("{}/{sub}", res.plural),
        )),
    }
}

/// Paths of the scale subresource: built-ins use `.spec.replicas` and `.status.replicas`.
fn scale_paths(res: &ResourceDef) -> (String, String, Option<String>) {
    match &res.scale {
        Some(s) => (
            s.spec_replicas.clone(),
            s.status_replicas.clone(),
            s.label_selector.clone(),
        ),
        None => (".spec.replicas".into(), ".status.replicas".into(), None),
    }
}

fn pointer(json_path: &str) -> String {
    json_path
        .trim_start_matches('.')
        .split('.')
        .fold(String::new(), |acc, p| format!("{acc}/{p}"))
}

/// The `autoscaling/v1 Scale` view of an object.
pub fn scale_of(res: &ResourceDef, obj: &Value) -> Value {
    let (spec_p, status_p, sel_p) = scale_paths(res);
    let spec = obj
        .pointer(&pointer(&spec_p))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let status = obj
        .pointer(&pointer(&status_p))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let selector = match sel_p {
        Some(p) => obj
            .pointer(&pointer(&p))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        None => obj
            .pointer("/spec/selector")
            .map(|s| {
                if s.get("matchLabels").is_some() || s.get("matchExpressions").is_some() {
                    label_selector_from_json(s, &Path::new("spec.selector"))
                        .map(|s| s.to_string())
                        .unwrap_or_default()
                } else {
                    // ReplicationControllers have a plain map selector.
                    s.as_object()
                        .map(|m| {
                            m.iter()
                                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                                .collect::<Vec<_>>()
                                .join(",")
                        })
                        .unwrap_or_default()
                }
            })
            .unwrap_or_default(),
    };
    let m = meta::metadata(obj);
    let mut md = json!({});
    for f in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = m.get(f) {
            md[f] = v.clone();
        }
    }
    let mut status_obj = json!({"replicas": status});
    if !selector.is_empty() {
        status_obj["selector"] = json!(selector);
    }
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": md, "spec": {"replicas": spec}, "status": status_obj})
}

async fn scale(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
    verb: &str,
) -> Result<Response<Body>, ApiError> {
    if verb == "get" {
        let obj = server.store.get(res, loc).await?;
        return Ok(response::json(StatusCode::OK, &scale_of(res, &obj)));
    }
    let w = write::write_params(ctx, None)?;
    let ty = negotiate::body_type(ctx.header("content-type"));
    let body = if verb == "update" {
        codec::decode_object(ctx)?
    } else {
        serde_json::from_slice::<Value>(&ctx.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
    };
    apimachinery::depth::check(&body)?;
    let (spec_p, _, _) = scale_paths(res);
    let ptr = pointer(&spec_p);
    let res_c = res.clone();
    let (stored, _) = server
        .store
        .update_with(res, loc, &w.opts, |cur| {
            let cur =
                cur.ok_or_else(|| ApiError::not_found(&res_c.plural, &res_c.group, loc.name))?;
            let current_scale = scale_of(&res_c, cur);
            let new_scale = if verb == "update" {
                body.clone()
            } else {
                match ty {
                    negotiate::BodyType::MergePatch | negotiate::BodyType::StrategicMergePatch => {
                        patching::merge_patch(&current_scale, &body)
                    }
                    _ => {
                        return Err(ApiError::unsupported_media_type(
                            ctx_ct(ty),
                            &["application/merge-patch+json"],
                        ));
                    }
                }
            };
            let replicas = new_scale
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if replicas < 0 {
                return Err(ApiError::invalid(
                    "Scale",
                    "autoscaling",
                    loc.name,
                    &vec![FieldError::invalid(
                        "spec.replicas",
                        json!(replicas),
                        "must be greater than or equal to 0",
                    )]
                    .into(),
                ));
            }
            // Only a resourceVersion the client sent is a precondition; the one a patch
            // inherits from the current object is not (concurrent writers retry).
            let sent_rv = meta::resource_version(&body).to_string();
            let mut next = cur.clone();
            set_pointer(&mut next, &ptr, json!(replicas));
            if sent_rv.is_empty() {
                meta::remove(&mut next, "resourceVersion");
            } else {
                meta::set(&mut next, "resourceVersion", sent_rv);
            }
            Ok(next)
        })
        .await?;
    Ok(response::json(StatusCode::OK, &scale_of(res, &stored)))
}

fn ctx_ct(ty: negotiate::BodyType) -> &'static str {
    match ty {
        negotiate::BodyType::JsonPatch => "application/json-patch+json",
        negotiate::BodyType::ApplyPatch => "application/apply-patch+yaml",
        _ => "",
    }
}

/// Sets a value at a JSON pointer, creating objects on the way.
pub fn set_pointer(obj: &mut Value, ptr: &str, value: Value) {
    let parts: Vec<&str> = ptr.trim_start_matches('/').split('/').collect();
    let mut cur = obj;
    for (i, p) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let map = cur.as_object_mut().expect("an object");
        if i + 1 == parts.len() {
            map.insert(p.to_string(), value);
            return;
        }
        cur = map.entry(p.to_string()).or_insert_with(|| json!({}));
    }
}

/// `POST /api/v1/namespaces/<ns>/bindings`: the legacy form of `pods/binding`, binding the
/// pod its `metadata.name` names (upstream serves both with one `BindingREST`).
pub async fn legacy_binding(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    loc: &Location<'_>,
) -> Result<Response<Body>, ApiError> {
    let b = codec::decode_object(ctx)?;
    let name = meta::name(&b).to_string();
    if name.is_empty() {
        return Err(ApiError::invalid(
            "Binding",
            "",
            "",
            &vec![FieldError::required(
                "metadata.name",
                "name or generateName is required",
            )]
            .into(),
        ));
    }
    let pods = server
        .catalog
        .lookup(loc.cluster, "", "v1", "pods")
        .ok_or_else(ApiError::no_route)?;
    let pod = Location {
        cluster: loc.cluster,
        namespace: loc.namespace,
        name: &name,
    };
    bind(server, ctx, &pods, &pod, b).await
}

async fn binding(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
) -> Result<Response<Body>, ApiError> {
    let b = codec::decode_object(ctx)?;
    bind(server, ctx, res, loc, b).await
}

async fn bind(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
    b: Value,
) -> Result<Response<Body>, ApiError> {
    let node = b
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if node.is_empty() {
        return Err(ApiError::invalid(
            "Binding",
            "",
            loc.name,
            &vec![FieldError::required("target.name", "")].into(),
        ));
    }
    let opts = WriteOptions {
        dry_run: super::dry_run(ctx)?,
        subresource: Some("binding".into()),
        ..Default::default()
    };
    let res_c = res.clone();
    server
        .store
        .update_with(res, loc, &opts, |cur| {
            let cur =
                cur.ok_or_else(|| ApiError::not_found(&res_c.plural, &res_c.group, loc.name))?;
            if meta::deletion_timestamp(cur).is_some() {
                return Err(ApiError::conflict(
                    "pods",
                    "",
                    loc.name,
                    "pod is being deleted, cannot be assigned to a host",
                ));
            }
            if let Some(existing) = cur
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                return Err(ApiError::conflict(
                    "pods/binding",
                    "",
                    loc.name,
                    &format!(
                        "pod {} is already assigned to node \"{existing}\"",
                        loc.name
                    ),
                ));
            }
            let mut next = cur.clone();
            next["spec"]["nodeName"] = json!(node);
            meta::remove(&mut next, "resourceVersion");
            Ok(next)
        })
        .await?;
    Ok(response::json(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

async fn eviction(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
) -> Result<Response<Body>, ApiError> {
    let ev = if ctx.body.is_empty() {
        json!({})
    } else {
        codec::decode_object(ctx)?
    };
    let mut opts = DeleteOptions {
        dry_run: super::dry_run(ctx)?,
        ..Default::default()
    };
    if let Some(d) = ev.get("deleteOptions") {
        opts.grace_period_seconds = d.get("gracePeriodSeconds").and_then(Value::as_i64);
        opts.precondition_uid = d
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(String::from);
    }
    crate::admission::check_eviction(server, ctx, loc).await?;
    server.store.delete(res, loc, &opts).await?;
    Ok(response::json(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

async fn finalize(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
) -> Result<Response<Body>, ApiError> {
    let body = codec::decode_object(ctx)?;
    let finalizers = body
        .pointer("/spec/finalizers")
        .cloned()
        .unwrap_or(json!([]));
    let opts = WriteOptions {
        dry_run: super::dry_run(ctx)?,
        subresource: Some("finalize".into()),
        ..Default::default()
    };
    let res_c = res.clone();
    let (stored, _) = server
        .store
        .update_with(res, loc, &opts, |cur| {
            let cur =
                cur.ok_or_else(|| ApiError::not_found(&res_c.plural, &res_c.group, loc.name))?;
            let mut next = cur.clone();
            next["spec"]["finalizers"] = finalizers.clone();
            meta::remove(&mut next, "resourceVersion");
            Ok(next)
        })
        .await?;
    render::object(ctx, res, StatusCode::OK, &stored)
}
