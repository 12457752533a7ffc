//! create, update, patch, delete and deletecollection.

use std::sync::Arc;

use apimachinery::meta;
use apimachinery::status::ApiError;
use http::{Response, StatusCode};
use parking_lot::Mutex;
use registry::ResourceDef;
use registry::store::{DeleteOptions, Deleted, ListRequest, Location, WriteOptions};
use serde_json::{Value, json};

use super::render;
use crate::admission::webhook::{self, Attributes, Operation, StoreAdmission};
use crate::codec;
use crate::negotiate::{self, BodyType};
use crate::patching;
use crate::response::Body;
use crate::route::ResourcePath;
use crate::server::{ApiServer, Ctx};

/// Options every write shares.
pub struct Write {
    pub opts: WriteOptions,
    pub manager: String,
    pub validation: FieldValidation,
}

/// `fieldValidation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Strict,
    Warn,
    Ignore,
}

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

/// Reports unknown fields per `fieldValidation` (Strict: 400; Warn: warning headers).
pub fn check_fields(
    ctx: &mut Ctx,
    res: &ResourceDef,
    obj: &Value,
    v: FieldValidation,
) -> Result<(), ApiError> {
    if v == FieldValidation::Ignore {
        return Ok(());
    }
    let unknown = crate::fields::unknown(res, obj);
    if unknown.is_empty() {
        return Ok(());
    }
    match v {
        FieldValidation::Strict => Err(strict_error(&unknown)),
        _ => {
            for f in unknown {
                ctx.warnings.push(format!("unknown field \"{f}\""));
            }
            Ok(())
        }
    }
}

/// The 400 of `fieldValidation=Strict`, naming every unknown field.
fn strict_error(unknown: &[String]) -> ApiError {
    let msgs: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    ApiError::bad_request(format!("strict decoding error: {}", msgs.join(", ")))
}

/// Escalation prevention for writes of RBAC objects.
fn rbac_guard(
    server: &ApiServer,
    ctx: &Ctx,
    res: &ResourceDef,
    namespace: &str,
    new: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    if res.group != "rbac.authorization.k8s.io" {
        return Ok(());
    }
    crate::authz::check_rbac_write(
        server,
        &ctx.cluster,
        &ctx.user,
        &res.plural,
        namespace,
        new,
        old,
    )
}

/// Sets up admission outside the server (webhooks) inside the store's update of `loc`, when
/// the cluster has any; the returned handle holds their warnings.
fn store_admission(
    server: &Arc<ApiServer>,
    ctx: &Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
    subresource: Option<&str>,
    w: &mut Write,
) -> Option<Arc<StoreAdmission>> {
    if !crate::admission::any_external(server, &ctx.cluster) {
        return None;
    }
    let mut attrs = Attributes::new(
        &ctx.cluster,
        &ctx.user,
        res,
        subresource,
        Operation::Update,
        loc.namespace,
        loc.name,
        w.opts.dry_run,
    );
    attrs.field_manager = w.manager.clone();
    let adm = Arc::new(StoreAdmission {
        server: server.clone(),
        attrs,
        mutating: true,
        warnings: Mutex::new(Vec::new()),
    });
    w.opts.admission = Some(registry::store::Admission(adm.clone()));
    Some(adm)
}

/// Admission configuration takes effect when its write returns: the write waits for the
/// watch cache (which admission reads) to hold it. Other writes return at once.
async fn settle(server: &ApiServer, res: &ResourceDef, written: &Value) {
    if res.group != "admissionregistration.k8s.io" {
        return;
    }
    if let Ok(rev) = meta::resource_version(written).parse::<i64>() {
        server
            .store
            .cache
            .wait_for(rev, registry::store::RESOURCE_VERSION_WAIT)
            .await;
    }
}

/// Moves the warnings of webhooks run by the store to the response.
fn take_warnings(ctx: &mut Ctx, adm: Option<Arc<StoreAdmission>>) {
    if let Some(a) = adm {
        ctx.warnings.extend(std::mem::take(&mut *a.warnings.lock()));
    }
}

pub async fn create(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
) -> Result<Response<Body>, ApiError> {
    let w = write_params(ctx, None)?;
    let mut obj = codec::decode_object(ctx)?;
    crate::fields::check_types(res, &obj)?;
    check_fields(ctx, res, &obj, w.validation)?;
    crate::fields::prune(res, &mut obj);
    if res.group.is_empty() && res.plural == "secrets" {
        if !loc.namespace.is_empty() && apimachinery::meta::namespace(&obj).is_empty() {
            apimachinery::meta::set(&mut obj, "namespace", loc.namespace);
        }
        crate::tokens::fill_legacy_token(server, &ctx.cluster, &mut obj)?;
    }
    if res.group.is_empty() && res.plural == "pods" && !loc.namespace.is_empty() {
        crate::admission::service_account::admit_pod(server, &ctx.cluster, loc.namespace, &mut obj);
    }
    rbac_guard(server, ctx, res, loc.namespace, &obj, None)?;
    let mut attrs = Attributes::new(
        &ctx.cluster,
        &ctx.user,
        res,
        None,
        Operation::Create,
        loc.namespace,
        meta::name(&obj),
        w.opts.dry_run,
    );
    attrs.field_manager = w.manager.clone();
    let warnings = Mutex::new(Vec::new());
    let admitted = async {
        if crate::admission::any_external(server, &ctx.cluster)
            && webhook::mutate(server, &attrs, Some(&mut obj), None, &warnings).await?
        {
            crate::fields::check_types(res, &obj)?;
        }
        crate::admission::validate(server, ctx, res, loc, None, &obj, None, w.opts.dry_run)?;
        crate::admission::admit_create(
            server,
            &ctx.cluster,
            res,
            loc,
            &mut obj,
            w.opts.dry_run,
            &attrs,
            &warnings,
        )
        .await
    }
    .await;
    ctx.warnings.extend(warnings.into_inner());
    let mut w = w;
    // Validating webhooks and policies the admission left to the write itself.
    let adm = match admitted? {
        true => {
            let adm = Arc::new(StoreAdmission {
                server: server.clone(),
                attrs,
                mutating: false,
                warnings: Mutex::new(Vec::new()),
            });
            w.opts.admission = Some(registry::store::Admission(adm.clone()));
            Some(adm)
        }
        false => None,
    };
    patching::track_update(res, None, &mut obj, &w.manager, None);
    let created = server.store.create(res, loc, obj, &w.opts).await;
    take_warnings(ctx, adm);
    let created = created?;
    settle(server, res, &created).await;
    ctx.warnings.extend(res.strategy.warnings(&created));
    render::object(ctx, res, StatusCode::CREATED, &created)
}

pub async fn update(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
    subresource: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let mut w = write_params(ctx, subresource)?;
    let adm = store_admission(server, ctx, res, loc, subresource, &mut w);
    let mut obj = codec::decode_object(ctx)?;
    crate::fields::check_types(res, &obj)?;
    check_fields(ctx, res, &obj, w.validation)?;
    crate::fields::prune(res, &mut obj);
    // A replace without resourceVersion is allowed for most resources, not for all (CRDs and
    // custom resources require one, as upstream does). Patches always carry what they read.
    if apimachinery::meta::resource_version(&obj).is_empty()
        && !res.strategy.allow_unconditional_update()
    {
        let errs = vec![apimachinery::FieldError::invalid(
            "metadata.resourceVersion",
            serde_json::json!(""),
            "must be specified for an update",
        )];
        return Err(ApiError::invalid(
            &res.kind,
            &res.group,
            loc.name,
            &errs.into(),
        ));
    }
    let manager = w.manager.clone();
    let result = server
        .store
        .update_with(res, loc, &w.opts, |cur| {
            let mut new = obj.clone();
            match cur {
                None => Err(ApiError::not_found(&res.plural, &res.group, loc.name)),
                Some(cur) => {
                    rbac_guard(server, ctx, res, loc.namespace, &new, Some(cur))?;
                    crate::admission::validate(
                        server,
                        ctx,
                        res,
                        loc,
                        subresource,
                        &new,
                        Some(cur),
                        w.opts.dry_run,
                    )?;
                    patching::track_update(res, Some(cur), &mut new, &manager, subresource);
                    Ok(new)
                }
            }
        })
        .await;
    take_warnings(ctx, adm);
    let (stored, created) = result?;
    settle(server, res, &stored).await;
    render::object(
        ctx,
        res,
        if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        },
        &stored,
    )
}

pub async fn patch(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
    subresource: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let ty = negotiate::body_type(ctx.header("content-type"));
    let mut w = write_params(ctx, subresource)?;
    let kind = patching::patch_kind(res, ty, ctx.header("content-type").unwrap_or(""))?;
    if ctx.body.is_empty() {
        return Err(ApiError::bad_request("the body of the request was empty"));
    }
    let force = ctx.query.get("force");
    if force.is_some() && ty != BodyType::ApplyPatch {
        return Err(ApiError::bad_request(
            "force may not be specified for non-apply patch",
        ));
    }
    let force = ctx.query.flag("force");
    if ty == BodyType::ApplyPatch && ctx.query.get("fieldManager").is_none_or(str::is_empty) {
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
    let body = match ty {
        BodyType::ApplyPatch => codec::yaml(&ctx.body)?,
        _ => serde_json::from_slice::<Value>(&ctx.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
    };
    apimachinery::depth::check(&body)?;
    if ty == BodyType::ApplyPatch {
        check_fields(ctx, res, &body, w.validation)?;
    }
    let manager = w.manager.clone();
    // Unknown fields of the patched object (not of the patch: a merge patch may name any
    // path), found before anything is written: Strict refuses the patch unstored, Warn
    // warns once it is written. The object is then pruned like an update's.
    let mut unknown = Vec::new();
    let adm = store_admission(server, ctx, res, loc, subresource, &mut w);
    let result = server
        .store
        .update_with(res, loc, &w.opts, |cur| {
            let mut new =
                patching::apply(res, kind, cur, &body, &manager, subresource, force, loc)?;
            crate::fields::check_types(res, &new)?;
            if ty != BodyType::ApplyPatch && w.validation != FieldValidation::Ignore {
                unknown = crate::fields::unknown(res, &new);
                if w.validation == FieldValidation::Strict && !unknown.is_empty() {
                    return Err(strict_error(&unknown));
                }
            }
            crate::fields::prune(res, &mut new);
            rbac_guard(server, ctx, res, loc.namespace, &new, cur)?;
            crate::admission::validate(
                server,
                ctx,
                res,
                loc,
                subresource,
                &new,
                cur,
                w.opts.dry_run,
            )?;
            Ok(new)
        })
        .await;
    take_warnings(ctx, adm);
    let (stored, created) = result?;
    settle(server, res, &stored).await;
    for f in unknown {
        ctx.warnings.push(format!("unknown field \"{f}\""));
    }
    render::object(
        ctx,
        res,
        if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        },
        &stored,
    )
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
    crate::admission::admit_delete(res, loc)?;
    crate::admission::admit_delete_external(server, ctx, res, loc, opts.dry_run).await?;
    let result = server.store.delete(res, loc, &opts).await?;
    let obj = match result {
        Deleted::Gone(o) | Deleted::Pending(o) => o,
    };
    settle(server, res, &obj).await;
    let obj = render::served_object(res, obj).await?;
    render::object(ctx, res, StatusCode::OK, &obj)
}

pub async fn delete_collection(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    p: &ResourcePath,
) -> Result<Response<Body>, ApiError> {
    let opts = delete_options(ctx)?;
    let filter = super::filter(res, ctx, p)?;
    let listed = server
        .store
        .list(
            res,
            &ListRequest {
                filter,
                ..Default::default()
            },
        )
        .await?;
    let mut deleted = Vec::new();
    let cluster_name = ctx.cluster.clone();
    for o in &listed.items {
        let name = o.name().to_string();
        let ns = o.namespace().to_string();
        let loc = Location {
            cluster: &cluster_name,
            namespace: &ns,
            name: &name,
        };
        crate::admission::admit_delete(res, &loc)?;
        match crate::admission::admit_delete_external(server, ctx, res, &loc, opts.dry_run).await {
            Err(e) if e.code == 404 => continue,
            other => other?,
        }
        match server.store.delete(res, &loc, &opts).await {
            Ok(Deleted::Gone(v) | Deleted::Pending(v)) => {
                let rev = meta::resource_version(&v).parse().unwrap_or(0);
                let cluster = Arc::from(ctx.cluster.as_str());
                deleted.extend(
                    registry::cache::CachedObject::new(v, rev, cluster, &*res.strategy, false)
                        .map(Arc::new),
                );
            }
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let rev = server.store.cache.revision();
    let deleted = render::served_objects(res, deleted).await?;
    render::list(ctx, res, &deleted, render::list_metadata(rev, None, None))
}
