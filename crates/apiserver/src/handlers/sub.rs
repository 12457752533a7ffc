//! Subresources: `status`, `scale`, `pods/binding`, `pods/eviction`, `pods/log`,
//! `namespaces/finalize`, `serviceaccounts/token`: decoded here, done by
//! [`controlplane::subresources`] and [`controlplane::tokens`]. The connect subresources (exec, attach, port-forward, proxy) are
//! served by [`crate::connect`] before a request gets here; one that arrives anyway came
//! through the in-process transport, which cannot upgrade.

use std::sync::Arc;

use apimachinery::status::ApiError;
use controlplane::subresources::{self, ScaleChange};
use http::{Response, StatusCode};
use registry::ResourceDef;
use registry::store::Location;
use serde_json::{Value, json};

use super::{read, render, write};
use crate::codec;
use crate::negotiate;
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
        ("approval", "get") => read::get(server, ctx, res, loc).await,
        ("approval", "update") => write::update(server, ctx, res, loc, Some("approval")).await,
        ("approval", "patch") => write::patch(server, ctx, res, loc, Some("approval")).await,
        ("scale", "get" | "update" | "patch") => scale(server, ctx, res, loc, verb).await,
        ("binding", "create") => binding(server, ctx, res, loc).await,
        ("eviction", "create") => eviction(server, ctx, res, loc).await,
        ("log", "get") => crate::connect::logs::log(server, ctx, res, loc).await,
        ("exec" | "attach" | "portforward" | "proxy", _) => Err(
            crate::connect::in_process_refusal(&format!("{}/{sub}", res.plural)),
        ),
        ("finalize", "update") => finalize(server, ctx, res, loc).await,
        ("token", "create") => token(server, ctx, loc).await,
        ("snapshot", "get") if is_logical_cluster(res) => snapshot(server, loc).await,
        ("restore", "create") if is_logical_cluster(res) => restore(server, ctx, loc).await,
        ("move", "create") if is_logical_cluster(res) => {
            let body = object_or_empty(ctx)?;
            let lc = controlplane::moves::request(server.control_plane(), loc.name, &body).await?;
            Ok(response::json(StatusCode::ACCEPTED, &lc))
        }
        _ => Err(ApiError::method_not_allowed(
            ctx.method.as_str(),
            &format!("{}/{sub}", res.plural),
        )),
    }
}

fn is_logical_cluster(res: &ResourceDef) -> bool {
    res.group == controlplane::tenancy::GROUP && res.plural == controlplane::tenancy::PLURAL
}

/// `GET logicalclusters/<name>/snapshot`: the cluster's backup, streamed as JSON lines
/// ([`controlplane::backup`]). Errors (no such cluster) come before the first byte.
async fn snapshot(server: &Arc<ApiServer>, loc: &Location<'_>) -> Result<Response<Body>, ApiError> {
    let snap = controlplane::backup::snapshot(server.control_plane(), loc.name).await?;
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tokio::spawn(snap.stream(server.control_plane().clone(), tx));
    Ok(response::stream("application/jsonl", rx))
}

/// `POST logicalclusters/<name>/restore`: one chunk of a restore into the new cluster `name`.
async fn restore(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    loc: &Location<'_>,
) -> Result<Response<Body>, ApiError> {
    let mut chunk: controlplane::backup::Chunk = serde_json::from_slice(&ctx.body)
        .map_err(|e| ApiError::bad_request(format!("not a restore chunk: {e}")))?;
    // `?dataStore=<name>`: the first chunk creates the cluster bound to that DataStore.
    chunk.data_store = ctx
        .query
        .get("dataStore")
        .filter(|d| !d.is_empty())
        .map(String::from);
    let done = controlplane::backup::restore(server.control_plane(), loc.name, chunk).await?;
    let message = match done.completed_at {
        Some(rev) => format!(
            "restored: {} keys written, complete at revision {rev}",
            done.written
        ),
        None => format!("{} keys written", done.written),
    };
    Ok(response::json(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201,
            "message": message,
            "details": {"name": loc.name, "group": controlplane::tenancy::GROUP, "kind": "logicalclusters"}}),
    ))
}

/// `201 Created` with a success `Status` (binding, eviction).
fn success_created() -> Response<Body> {
    response::json(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    )
}

/// The request's body, or `{}` when it has none.
fn object_or_empty(ctx: &Ctx) -> Result<Value, ApiError> {
    if ctx.body.is_empty() {
        Ok(json!({}))
    } else {
        codec::decode_object(ctx)
    }
}

async fn scale(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
    verb: &str,
) -> Result<Response<Body>, ApiError> {
    let cp = server.control_plane();
    if verb == "get" {
        let scale = subresources::get_scale(cp, res, loc).await?;
        return Ok(response::json(StatusCode::OK, &scale));
    }
    let dry_run = super::dry_run(ctx)?;
    let change = if verb == "update" {
        ScaleChange::Replace(codec::decode_object(ctx)?)
    } else {
        let ty = negotiate::body_type(ctx.header("content-type"));
        let body = serde_json::from_slice::<Value>(&ctx.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
        match ty {
            negotiate::BodyType::MergePatch | negotiate::BodyType::StrategicMergePatch => {
                ScaleChange::MergePatch(body)
            }
            _ => {
                return Err(ApiError::unsupported_media_type(
                    content_type(ty),
                    &["application/merge-patch+json"],
                ));
            }
        }
    };
    let scale = subresources::update_scale(cp, res, loc, change, dry_run).await?;
    Ok(response::json(StatusCode::OK, &scale))
}

fn content_type(ty: negotiate::BodyType) -> &'static str {
    match ty {
        negotiate::BodyType::JsonPatch => "application/json-patch+json",
        negotiate::BodyType::ApplyPatch => "application/apply-patch+yaml",
        _ => "",
    }
}

/// `POST /api/v1/namespaces/<ns>/bindings`: the legacy form of `pods/binding`.
pub async fn legacy_binding(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    loc: &Location<'_>,
) -> Result<Response<Body>, ApiError> {
    let b = codec::decode_object(ctx)?;
    let dry_run = super::dry_run(ctx)?;
    subresources::bind_named(
        server.control_plane(),
        loc.cluster,
        loc.namespace,
        &b,
        dry_run,
    )
    .await?;
    Ok(success_created())
}

async fn binding(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
) -> Result<Response<Body>, ApiError> {
    let b = codec::decode_object(ctx)?;
    let dry_run = super::dry_run(ctx)?;
    subresources::bind(server.control_plane(), res, loc, &b, dry_run).await?;
    Ok(success_created())
}

async fn eviction(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
) -> Result<Response<Body>, ApiError> {
    let ev = object_or_empty(ctx)?;
    let dry_run = super::dry_run(ctx)?;
    subresources::evict(server.control_plane(), res, loc, &ev, dry_run).await?;
    Ok(success_created())
}

async fn finalize(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
) -> Result<Response<Body>, ApiError> {
    let body = codec::decode_object(ctx)?;
    let dry_run = super::dry_run(ctx)?;
    let stored = subresources::finalize(server.control_plane(), res, loc, &body, dry_run).await?;
    render::object(ctx, res, StatusCode::OK, &stored)
}

async fn token(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    loc: &Location<'_>,
) -> Result<Response<Body>, ApiError> {
    let req = object_or_empty(ctx)?;
    let out = controlplane::tokens::token_request(
        server.control_plane(),
        &ctx.cluster,
        loc.namespace,
        loc.name,
        req,
    )
    .await?;
    Ok(response::json(StatusCode::CREATED, &out))
}
