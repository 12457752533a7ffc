//! create, update, patch, delete and deletecollection: the request's parameters and body are
//! decoded here, the write itself is [`controlplane::write`]'s, and its answer rendered here.

use std::sync::Arc;

use apimachinery::status::ApiError;
use controlplane::patching::PatchKind;
use controlplane::write::{self, FieldValidation, Patch, Write};
use http::{Response, StatusCode};
use registry::ResourceDef;
use registry::store::{DeleteOptions, ListRequest, Location, WriteOptions};
use serde_json::{Value, json};

use super::render;
use crate::codec;
use crate::negotiate::{self, BodyType};
use crate::response::Body;
use crate::route::ResourcePath;
use crate::server::{ApiServer, Ctx};

/// Reads the query parameters every write shares.
pub fn write_params(ctx: &Ctx, subresource: Option<&str>) -> Result<Write, ApiError> {
    let dry_run = super::dry_run(ctx)?;
    let manager = match ctx.query.get("fieldManager").filter(|s| !s.is_empty()) {
        Some(m) if m.len() > 128 => {
            return Err(ApiError::bad_request(
                "fieldManager: Too long: must have at most 128 bytes",
            ));
        }
        Some(m) => m.to_string(),
        None => default_manager(ctx),
    };
    let validation = match ctx.query.get("fieldValidation") {
        None | Some("") | Some("Warn") => FieldValidation::Warn,
        Some("Strict") => FieldValidation::Strict,
        Some("Ignore") => FieldValidation::Ignore,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\", got {other:?}"
            )));
        }
    };
    Ok(Write {
        opts: WriteOptions {
            dry_run,
            subresource: subresource.map(String::from),
            ..Default::default()
        },
        manager,
        validation,
    })
}

/// The manager name when none is given: the user agent's program name, as upstream does.
fn default_manager(ctx: &Ctx) -> String {
    let ua = ctx.header("user-agent").unwrap_or("unknown");
    let prog = ua.split('/').next().unwrap_or(ua);
    prog.chars().take(128).collect()
}

const ACCEPTED_CR: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];
const ACCEPTED: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

/// The patch type of a request, or 415 (strategic merge patch on custom resources included).
pub fn patch_kind(
    res: &ResourceDef,
    ty: BodyType,
    content_type: &str,
) -> Result<PatchKind, ApiError> {
    let accepted = if res.custom { ACCEPTED_CR } else { ACCEPTED };
    match ty {
        BodyType::JsonPatch => Ok(PatchKind::Json),
        BodyType::MergePatch => Ok(PatchKind::Merge),
        BodyType::StrategicMergePatch if !res.custom => Ok(PatchKind::Strategic),
        BodyType::ApplyPatch => Ok(PatchKind::Apply),
        _ => Err(ApiError::unsupported_media_type(content_type, accepted)),
    }
}

/// `201 Created` for a created object, else `200 OK`.
fn created_or_ok(created: bool) -> StatusCode {
    if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    }
}

pub async fn create(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
) -> Result<Response<Body>, ApiError> {
    let w = write_params(ctx, None)?;
    let obj = codec::decode_object(ctx)?;
    let mut who = ctx.requester();
    let created = write::create(server.control_plane(), &mut who, res, loc, w, obj).await;
    let warnings = who.warnings;
    ctx.warnings.extend(warnings);
    render::object(ctx, res, StatusCode::CREATED, &created?)
}

pub async fn update(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
    subresource: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let w = write_params(ctx, subresource)?;
    let obj = codec::decode_object(ctx)?;
    let mut who = ctx.requester();
    let updated = write::update(server.control_plane(), &mut who, res, loc, w, obj).await;
    let warnings = who.warnings;
    ctx.warnings.extend(warnings);
    let (stored, created) = updated?;
    render::object(ctx, res, created_or_ok(created), &stored)
}

pub async fn patch(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
    subresource: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let ty = negotiate::body_type(ctx.header("content-type"));
    let w = write_params(ctx, subresource)?;
    let kind = patch_kind(res, ty, ctx.header("content-type").unwrap_or(""))?;
    if ctx.body.is_empty() {
        return Err(ApiError::bad_request("the body of the request was empty"));
    }
    if ctx.query.get("force").is_some() && kind != PatchKind::Apply {
        return Err(ApiError::bad_request(
            "force may not be specified for non-apply patch",
        ));
    }
    if kind == PatchKind::Apply && ctx.query.get("fieldManager").is_none_or(str::is_empty) {
        return Err(ApiError::invalid(
            "PatchOptions",
            "meta.k8s.io",
            "",
            &vec![apimachinery::FieldError::required(
                "fieldManager",
                "is required for apply patch",
            )]
            .into(),
        ));
    }
    let body = match kind {
        PatchKind::Apply => codec::yaml(&ctx.body)?,
        _ => serde_json::from_slice::<Value>(&ctx.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
    };
    let patch = Patch {
        kind,
        body,
        force: ctx.query.flag("force"),
    };
    let mut who = ctx.requester();
    let patched = write::patch(server.control_plane(), &mut who, res, loc, w, patch).await;
    let warnings = who.warnings;
    ctx.warnings.extend(warnings);
    let (stored, created) = patched?;
    render::object(ctx, res, created_or_ok(created), &stored)
}

/// `DeleteOptions` from the body (JSON or protobuf) and the query.
pub fn delete_options(ctx: &Ctx) -> Result<DeleteOptions, ApiError> {
    let mut o = DeleteOptions {
        dry_run: super::dry_run(ctx)?,
        ..Default::default()
    };
    if !ctx.body.is_empty() {
        let v = codec::decode_object(ctx)?;
        if let Some(p) = v.get("propagationPolicy").and_then(Value::as_str) {
            o.propagation = Some(p.to_string());
        }
        if let Some(g) = v.get("gracePeriodSeconds").and_then(Value::as_i64) {
            o.grace_period_seconds = Some(g);
        }
        if v.get("orphanDependents").and_then(Value::as_bool) == Some(true)
            && o.propagation.is_none()
        {
            o.propagation = Some("Orphan".into());
        }
        if let Some(pre) = v.get("preconditions") {
            o.precondition_uid = pre.get("uid").and_then(Value::as_str).map(String::from);
            o.precondition_rv = pre
                .get("resourceVersion")
                .and_then(Value::as_str)
                .map(String::from);
        }
        if v.get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|x| x == "All"))
        {
            o.dry_run = true;
        }
    }
    if let Some(p) = ctx.query.get("propagationPolicy").filter(|s| !s.is_empty()) {
        o.propagation = Some(p.to_string());
    }
    if let Some(g) = ctx
        .query
        .get("gracePeriodSeconds")
        .and_then(|s| s.parse().ok())
    {
        o.grace_period_seconds = Some(g);
    }
    if ctx.query.get("orphanDependents") == Some("true") && o.propagation.is_none() {
        o.propagation = Some("Orphan".into());
    }
    if let Some(p) = &o.propagation
        && !matches!(p.as_str(), "Foreground" | "Background" | "Orphan")
    {
        return Err(ApiError::invalid(
            "DeleteOptions",
            "meta.k8s.io",
            "",
            &vec![apimachinery::FieldError::not_supported(
                "propagationPolicy",
                json!(p),
                &["Foreground", "Background", "Orphan"],
            )]
            .into(),
        ));
    }
    Ok(o)
}

pub async fn delete(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
) -> Result<Response<Body>, ApiError> {
    let opts = delete_options(ctx)?;
    let mut who = ctx.requester();
    let deleted = write::delete(server.control_plane(), &mut who, res, loc, &opts).await;
    let warnings = who.warnings;
    ctx.warnings.extend(warnings);
    let obj = render::served_object(res, deleted?).await?;
    render::object(ctx, res, StatusCode::OK, &obj)
}

pub async fn delete_collection(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    p: &ResourcePath,
) -> Result<Response<Body>, ApiError> {
    let opts = delete_options(ctx)?;
    let list = ListRequest {
        filter: super::filter(res, ctx, p)?,
        ..Default::default()
    };
    let mut who = ctx.requester();
    let deleted =
        write::delete_collection(server.control_plane(), &mut who, res, list, &opts).await;
    let warnings = who.warnings;
    ctx.warnings.extend(warnings);
    let (deleted, rev) = deleted?;
    let deleted = render::served_objects(res, deleted).await?;
    render::list(ctx, res, &deleted, render::list_metadata(rev, None, None))
}
