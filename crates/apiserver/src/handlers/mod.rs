//! Resource requests: from a routed path and a method to the verb, then to the generic store.
//!
//! `read` serves get, list and watch; `write` serves create, update, patch, delete and
//! deletecollection; `sub` serves the subresources with their own semantics (scale, binding,
//! eviction, log, finalize). `render` turns objects into what the client asked for (JSON, YAML,
//! Table, PartialObjectMetadata, protobuf).

pub mod read;
pub mod render;
pub mod sub;
pub mod write;

use std::sync::Arc;

use apimachinery::fields::FieldSelector;
use apimachinery::labels::Selector;
use apimachinery::status::ApiError;
use http::{Method, Response};
use registry::ResourceDef;
use registry::cache::{Filter, Predicate};
use registry::store::Location;

use crate::response::Body;
use crate::route::ResourcePath;
use crate::server::{ApiServer, Ctx};

/// The upstream verb of a request.
pub fn verb(method: &Method, p: &ResourcePath, ctx: &Ctx) -> &'static str {
    match *method {
        Method::GET | Method::HEAD if p.name.is_none() => {
            if p.watch_prefix || ctx.query.flag("watch") {
                "watch"
            } else {
                "list"
            }
        }
        Method::GET | Method::HEAD if p.watch_prefix => "watch",
        Method::GET | Method::HEAD => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if p.name.is_none() => "deletecollection",
        Method::DELETE => "delete",
        _ => "",
    }
}

/// Handles a request addressing a resource.
pub async fn resource(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    p: &ResourcePath,
) -> Result<Response<Body>, ApiError> {
    let res = server
        .catalog()
        .lookup(&ctx.cluster, &p.group, &p.version, &p.resource)
        .ok_or_else(ApiError::no_route)?;
    if !res.namespaced && !p.namespace.is_empty() {
        return Err(ApiError::no_route());
    }
    if let Some(sub) = &p.subresource
        && res.subresource(sub).is_none()
    {
        return Err(ApiError::no_route());
    }
    if crate::metrics_api::is_metrics(&res) {
        return crate::metrics_api::handle(server, ctx, &res, p).await;
    }
    let verb = verb(&ctx.method, p, ctx);
    if verb.is_empty() {
        return Err(ApiError::method_not_allowed(
            ctx.method.as_str(),
            &res.plural,
        ));
    }
    // The verb is checked against the resource before anything runs: a refused request
    // changes nothing (`DELETE /api/v1/namespaces` is a 405, not a deletion of every
    // namespace). Subresources dispatch on (subresource, verb) pairs below.
    if p.subresource.is_none() && !res.allows(verb) {
        return Err(ApiError::method_not_allowed(verb, &res.plural));
    }
    if verb == "create" && crate::reviews::is_review(&res) {
        return crate::reviews::answer(server, ctx, &res, &p.namespace).await;
    }
    if let Some(w) = &res.deprecation_warning {
        ctx.warnings.push(w.clone());
    }
    let name = p.name.clone().unwrap_or_default();
    let cluster = ctx.cluster.clone();
    let loc = Location {
        cluster: &cluster,
        namespace: &p.namespace,
        name: &name,
    };
    match (verb, p.subresource.as_deref()) {
        ("get", None) => read::get(server, ctx, &res, &loc).await,
        ("list", None) => read::list(server, ctx, &res, p).await,
        ("watch", None) => read::watch(server, ctx, &res, p).await,
        ("create", None) if res.group.is_empty() && res.plural == "bindings" => {
            sub::legacy_binding(server, ctx, &loc).await
        }
        ("create", None) => {
            if !p.namespace.is_empty() || !res.namespaced {
                write::create(server, ctx, &res, &loc).await
            } else {
                Err(ApiError::method_not_allowed("POST", &res.plural))
            }
        }
        ("update", None) => write::update(server, ctx, &res, &loc, None).await,
        ("patch", None) => write::patch(server, ctx, &res, &loc, None).await,
        ("delete", None) => write::delete(server, ctx, &res, &loc).await,
        ("deletecollection", None) => write::delete_collection(server, ctx, &res, p).await,
        (_, Some(sub)) => sub::handle(server, ctx, &res, &loc, verb, sub).await,
        _ => Err(ApiError::method_not_allowed(
            ctx.method.as_str(),
            &res.plural,
        )),
    }
}

/// The selector predicate of a list or watch (`labelSelector`, `fieldSelector`), refusing
/// unparsable selectors and unsupported fields with 400.
pub fn predicate(res: &ResourceDef, ctx: &Ctx) -> Result<Option<Predicate>, ApiError> {
    let labels = match ctx
        .query
        .get("labelSelector")
        .filter(|s| !s.trim().is_empty())
    {
        Some(s) => Some(Selector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?),
        None => None,
    };
    let fields = match ctx
        .query
        .get("fieldSelector")
        .filter(|s| !s.trim().is_empty())
    {
        Some(s) => {
            let sel = FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?;
            for f in sel.fields() {
                if !field_supported(res, f) {
                    return Err(ApiError::bad_request(format!(
                        "field label not supported: {f}"
                    )));
                }
            }
            Some(sel)
        }
        None => None,
    };
    if labels.is_none() && fields.is_none() {
        return Ok(None);
    }
    Ok(Some(registry::cache::selector_predicate(
        labels,
        fields,
        res.strategy.clone(),
    )))
}

fn field_supported(res: &ResourceDef, field: &str) -> bool {
    matches!(field, "metadata.name" | "metadata.namespace")
        || res.strategy.field_names().contains(&field)
}

/// The filter of a list or watch in the request's cluster.
pub fn filter(res: &ResourceDef, ctx: &Ctx, p: &ResourcePath) -> Result<Filter, ApiError> {
    Ok(Filter {
        cluster: (ctx.cluster != crate::route::ALL_CLUSTERS).then(|| ctx.cluster.clone()),
        namespace: (res.namespaced && !p.namespace.is_empty()).then(|| p.namespace.clone()),
        predicate: predicate(res, ctx)?,
    })
}

/// `dryRun`: only `All` is valid.
pub fn dry_run(ctx: &Ctx) -> Result<bool, ApiError> {
    let values: Vec<&str> = ctx
        .query
        .0
        .iter()
        .filter(|(k, _)| k == "dryRun")
        .map(|(_, v)| v.as_str())
        .collect();
    match values.as_slice() {
        [] => Ok(false),
        vs if vs.iter().all(|v| *v == "All") => Ok(true),
        vs => Err(ApiError::bad_request(format!(
            "invalid dry run option: {:?}: supported values: \"All\"",
            vs.iter()
                .find(|v| **v != "All")
                .copied()
                .unwrap_or_default()
        ))),
    }
}
