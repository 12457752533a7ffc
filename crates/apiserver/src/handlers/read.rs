//! get, list and watch.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::field::{ErrorList, FieldError};
use apimachinery::status::ApiError;
use bytes::Bytes;
use http::{Response, StatusCode};
use registry::ResourceDef;
use registry::cache::{CachedObject, Start, WatchItem};
use registry::store::{ListRequest, Location, RESOURCE_VERSION_WAIT};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::render;
use crate::negotiate::Output;
use crate::response::{self, Body};
use crate::route::ResourcePath;
use crate::server::{ApiServer, Ctx};
use crate::table;

pub async fn get(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
) -> Result<Response<Body>, ApiError> {
    if ctx.query.get("resourceVersion") == Some("0")
        && let Some(o) = server.store().cache(loc.cluster)?.get(
            &res.group,
            &res.plural,
            loc.cluster,
            loc.namespace,
            loc.name,
        )
    {
        if res.converter.is_none() {
            return render::cached_object(ctx, res, StatusCode::OK, &o);
        }
        let obj = render::served_object(res, o.to_value()).await?;
        return render::object(ctx, res, StatusCode::OK, &obj);
    }
    let obj = server.store().get(res, loc).await?;
    let obj = render::served_object(res, obj).await?;
    render::object(ctx, res, StatusCode::OK, &obj)
}

fn parse_limit(ctx: &Ctx) -> Result<Option<usize>, ApiError> {
    match ctx.query.get("limit").filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => match s.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(Some(n as usize)),
            _ => {
                let mut errs = ErrorList::new();
                errs.push(FieldError::invalid(
                    "limit",
                    json!(s),
                    "must be a non-negative integer",
                ));
                Err(ApiError::invalid("ListOptions", "meta.k8s.io", "", &errs))
            }
        },
    }
}

pub async fn list(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    p: &ResourcePath,
) -> Result<Response<Body>, ApiError> {
    let filter = super::filter(res, ctx, p)?;
    let continue_token = ctx
        .query
        .get("continue")
        .filter(|s| !s.is_empty())
        .map(String::from);
    let rv = ctx
        .query
        .get("resourceVersion")
        .filter(|s| !s.is_empty())
        .map(String::from);
    if continue_token.is_some() && rv.as_deref().is_some_and(|r| r != "0") {
        return Err(ApiError::bad_request(
            "specifying resource version is not allowed when using continue",
        ));
    }
    // A list at an exact revision from before a restore reads another history (the deleted
    // cluster's): 410, as for watches.
    if ctx.query.get("resourceVersionMatch") == Some("Exact")
        && let Some(floor) =
            controlplane::backup::restored_revision(server.control_plane(), &ctx.cluster)
        && let Some(at) = rv.as_deref().and_then(|r| r.parse::<i64>().ok())
        && at < floor
    {
        return Err(ApiError::expired(format!(
            "too old resource version: {at} ({floor}): the cluster was restored from a backup"
        )));
    }
    let req = ListRequest {
        filter,
        limit: parse_limit(ctx)?,
        continue_token,
        resource_version: rv,
        resource_version_match: ctx.query.get("resourceVersionMatch").map(String::from),
        shard: ctx.shard.clone(),
    };
    let out = server.store().list(res, &req).await?;
    let md = render::list_metadata(out.revision, out.continue_token.as_deref(), out.remaining);
    let items = render::served_objects(res, out.items).await?;
    render::list(ctx, res, &items, md)
}

/// Upstream's default watch timeout is random between 30 and 60 minutes.
fn default_timeout() -> Duration {
    Duration::from_secs(1800 + rand_secs(1800))
}

fn rand_secs(max: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    u64::from(nanos) % max
}

pub async fn watch(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    res: &ResourceDef,
    p: &ResourcePath,
) -> Result<Response<Body>, ApiError> {
    let filter = super::filter(res, ctx, p)?;
    let out = render::output(ctx)?;
    let bookmarks = ctx.query.flag("allowWatchBookmarks");
    let initial = ctx
        .query
        .get("sendInitialEvents")
        .map(|v| v == "true" || v == "1");
    let rv_match = ctx
        .query
        .get("resourceVersionMatch")
        .filter(|s| !s.is_empty());
    let rv = ctx.query.get("resourceVersion").filter(|s| !s.is_empty());
    if initial.is_some() || rv_match.is_some() {
        let mut errs = ErrorList::new();
        if initial.is_some() && rv_match != Some("NotOlderThan") {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        } else if initial.is_none() && rv_match.is_some() {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if initial == Some(true) && !bookmarks {
            errs.push(FieldError::forbidden(
                "allowWatchBookmarks",
                "allowWatchBookmarks must be set to true when sendInitialEvents is true",
            ));
        }
        if !errs.is_empty() {
            return Err(ApiError::invalid("ListOptions", "meta.k8s.io", "", &errs));
        }
    }
    let parse_rv = |s: &str| {
        s.parse::<i64>()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s:?}")))
    };
    let shard = server.store().shard_of(&filter, &ctx.shard)?;
    let cache = &shard.cache;
    // Wait until the cache has what the client has seen (or the latest write for a
    // consistent start).
    let need = match rv {
        Some("0") => None,
        Some(s) => Some(parse_rv(s)?),
        None => Some(
            shard
                .storage
                .current_revision()
                .await
                .map_err(|e| registry::store::storage_error(e, res, ""))?,
        ),
    };
    if let Some(n) = need
        && !cache.wait_for(n, RESOURCE_VERSION_WAIT).await
    {
        return Err(ApiError::too_large_resource_version(n, cache.revision()));
    }
    let start = match (initial, rv) {
        (Some(true), _) => Start::Current { end_marker: true },
        (_, None | Some("0")) => Start::Current { end_marker: false },
        (_, Some(s)) => Start::After(parse_rv(s)?),
    };
    // A restored cluster's history begins at its restore: a resourceVersion from before it
    // belongs to another history (etcd answers the same after a restore).
    let floor = controlplane::backup::restored_revision(server.control_plane(), &ctx.cluster);
    let watched = match (start, floor) {
        (Start::After(after), Some(floor)) if after < floor => Err(ApiError::expired(format!(
            "too old resource version: {after} ({floor}): the cluster was restored from a backup"
        ))),
        (start, _) => cache.watch(
            &res.group,
            &res.plural,
            filter,
            start,
            bookmarks || initial == Some(true),
        ),
    };
    let handle = match watched {
        Ok(h) => h,
        // A start below the retained history is an ERROR event in a 200 stream, as upstream's
        // cacher answers: clients (client-go, kube-rs) re-list on that, while kube-rs retries
        // an HTTP 410 at watch start with the same resourceVersion for ever.
        Err(e) if e.code == 410 => {
            let (tx, rx) = mpsc::channel::<Bytes>(1);
            let _ = tx.try_send(event_line("ERROR", &e.to_status()));
            return Ok(response::stream("application/json", rx));
        }
        Err(e) => return Err(e),
    };
    let timeout = match ctx
        .query
        .get("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
    {
        Some(s) => Duration::from_secs(s),
        None => default_timeout(),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let res = res.clone();
    let mut shutdown = server.shutdown.subscribe();
    let table_ctx = TableCtx {
        include: ctx.query.get("includeObject").map(String::from),
    };
    let api_version = res.api_version();
    let cross_cluster = ctx.cluster == crate::route::ALL_CLUSTERS;
    tokio::spawn(async move {
        let mut handle = handle;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut first_table = true;
        loop {
            let item = tokio::select! {
                item = handle.rx.recv() => item,
                () = &mut deadline => None,
                _ = shutdown.changed() => None,
                () = tx.closed() => None,
            };
            let Some(item) = item else { break };
            let item = match item {
                WatchItem::Event(ty, obj) if res.converter.is_some() => {
                    match render::served_objects(&res, vec![obj]).await {
                        Ok(mut v) => match v.pop() {
                            Some(o) => WatchItem::Event(ty, o),
                            None => continue,
                        },
                        Err(e) => WatchItem::Error(e),
                    }
                }
                other => other,
            };
            let (line, end) = match item {
                WatchItem::Event(ty, obj) => {
                    let line = match out {
                        Output::Table => {
                            let value = render::served_value(&res, &obj, false);
                            let t = table_ctx.table(&res, &value, first_table);
                            first_table = false;
                            event_line(ty.as_str(), &t)
                        }
                        Output::Metadata => {
                            // Cross-cluster watches name each object's cluster here too.
                            let value = render::served_value(&res, &obj, cross_cluster);
                            event_line(ty.as_str(), &render::partial_metadata(&value))
                        }
                        _ if res.strategy.has_read() => event_line(
                            ty.as_str(),
                            &render::served_value(&res, &obj, cross_cluster),
                        ),
                        _ => object_event_line(ty.as_str(), &obj, cross_cluster),
                    };
                    (line, false)
                }
                WatchItem::Bookmark(rev) => (
                    event_line("BOOKMARK", &bookmark(&res.kind, &api_version, rev, false)),
                    false,
                ),
                WatchItem::InitialEventsEnd(rev) => (
                    event_line("BOOKMARK", &bookmark(&res.kind, &api_version, rev, true)),
                    false,
                ),
                WatchItem::Error(e) => (event_line("ERROR", &e.to_status()), true),
            };
            if tx.send(line).await.is_err() || end {
                break;
            }
        }
    });
    Ok(response::stream("application/json", rx))
}

struct TableCtx {
    include: Option<String>,
}

impl TableCtx {
    fn table(&self, res: &ResourceDef, obj: &Value, with_columns: bool) -> Value {
        let mut q = Vec::new();
        if let Some(i) = &self.include {
            q.push(("includeObject".to_string(), i.clone()));
        }
        let ctx = Ctx {
            cluster: String::new(),
            shard: String::new(),
            user: crate::auth::UserInfo::default(),
            method: http::Method::GET,
            query: crate::server::Query(q),
            headers: http::HeaderMap::new(),
            body: Bytes::new(),
            warnings: Vec::new(),
        };
        let md = json!({"resourceVersion": apimachinery::meta::resource_version(obj)});
        table::table(res, std::slice::from_ref(obj), &ctx, md, with_columns)
    }
}

fn bookmark(kind: &str, api_version: &str, rev: i64, initial_end: bool) -> Value {
    let mut md = json!({"resourceVersion": rev.to_string()});
    if initial_end {
        md["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"kind": kind, "apiVersion": api_version, "metadata": md})
}

fn event_line(ty: &str, object: &Value) -> Bytes {
    let mut buf = Vec::with_capacity(256);
    buf.extend_from_slice(b"{\"type\":\"");
    buf.extend_from_slice(ty.as_bytes());
    buf.extend_from_slice(b"\",\"object\":");
    if serde_json::to_writer(&mut buf, object).is_err() {
        buf.extend_from_slice(b"{}");
    }
    buf.extend_from_slice(b"}\n");
    Bytes::from(buf)
}

/// A watch event around the cached bytes of its object (the cluster annotation spliced in
/// for cross-cluster watches).
fn object_event_line(ty: &str, obj: &CachedObject, cross_cluster: bool) -> Bytes {
    let mut buf = Vec::with_capacity(obj.json().len() + 64);
    buf.extend_from_slice(b"{\"type\":\"");
    buf.extend_from_slice(ty.as_bytes());
    buf.extend_from_slice(b"\",\"object\":");
    obj.write_json(&mut buf, cross_cluster);
    buf.extend_from_slice(b"}\n");
    Bytes::from(buf)
}

/// Marks a successful response.
pub fn ok_status() -> StatusCode {
    StatusCode::OK
}
