//! The subresources that connect a client to something behind the API server: `pods/exec`,
//! `pods/attach` and `pods/portforward` (upgraded streams to the pod's kubelet, [`exec`]),
//! `pods/proxy`, `nodes/proxy` and `services/proxy` (requests proxied to a pod, a kubelet or
//! a service endpoint, [`proxy`]), and `pods/log` ([`logs`], served through
//! [`ApiServer::handle`] like any GET since it needs no upgrade).
//!
//! Streams and proxied bodies cannot be read whole before handling, so the HTTPS listener
//! hands these requests here before it reads a body ([`handles`], the same pre-read dispatch
//! the OCI registry uses): they are authenticated, impersonated and authorized exactly as
//! every request ([`ApiServer::admit`]; RBAC verbs from the method, so a WebSocket `GET` is
//! `get pods/exec` and a SPDY `POST` is `create pods/exec`, as upstream), then answered.
//!
//! **The in-process transport cannot upgrade**: it has no connection to hand over. Upgrade
//! requests reaching these subresources through it are refused with a 400 saying so
//! ([`in_process_refusal`]); proxied requests without an upgrade work there too.

pub mod exec;
pub mod forward;
pub mod logs;
pub mod options;
pub mod proxy;

use std::sync::Arc;
use std::time::Instant;

use apimachinery::status::ApiError;
use bytes::Bytes;
use http::{Request, Response};

use crate::response::{self, Body};
use crate::route::{self, Route};
use crate::server::{ApiServer, Caller, Ctx, Query};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The connect subresources served here, by resource.
fn is_connect(resource: &str, subresource: &str) -> bool {
    matches!(
        (resource, subresource),
        ("pods", "exec" | "attach" | "portforward" | "proxy") | ("nodes" | "services", "proxy")
    )
}

/// Whether a request path addresses a connect subresource of the core group.
pub fn handles(path: &str) -> bool {
    match route::route(path).route {
        Route::Resource(p) => {
            p.group.is_empty()
                && p.name.is_some()
                && p.subresource
                    .as_deref()
                    .is_some_and(|s| is_connect(&p.resource, s))
        }
        _ => false,
    }
}

/// What the in-process transport answers an upgrade request to a connect subresource.
pub fn in_process_refusal(path: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{path}: upgrading a connection is not possible over the in-process transport; use the HTTPS endpoint"
    ))
}

/// Serves a connect request (`peer`: the client's address, for `X-Forwarded-For`).
pub async fn serve<B>(
    server: &Arc<ApiServer>,
    req: Request<B>,
    caller: &Caller,
    peer: Option<&str>,
) -> Response<Body>
where
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let started = Instant::now();
    let routed = route::route(req.uri().path());
    let mut ctx = Ctx {
        cluster: routed.cluster.clone(),
        shard: routed.shard.clone(),
        user: crate::auth::UserInfo::default(),
        method: req.method().clone(),
        query: Query::parse(req.uri().query()),
        headers: req.headers().clone(),
        body: Bytes::new(),
        warnings: Vec::new(),
    };
    if let Caller::Internal(u) = caller {
        ctx.user = u.clone();
    }
    let resource = match &routed.route {
        Route::Resource(p) => p.resource.clone(),
        _ => String::new(),
    };
    let mut resp = match dispatch(server, &mut ctx, &routed, caller, req, peer).await {
        Ok(r) => r,
        Err(e) => response::error(&e),
    };
    resp.headers_mut().insert(
        "cache-control",
        http::HeaderValue::from_static("no-cache, private"),
    );
    server.control_plane().metrics().observe(
        "CONNECT",
        &resource,
        resp.status().as_u16(),
        started.elapsed(),
    );
    resp
}

async fn dispatch<B>(
    server: &Arc<ApiServer>,
    ctx: &mut Ctx,
    routed: &route::Routed,
    caller: &Caller,
    req: Request<B>,
    peer: Option<&str>,
) -> Result<Response<Body>, ApiError>
where
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let Route::Resource(p) = &routed.route else {
        return Err(ApiError::no_route());
    };
    server.admit(ctx, routed, caller).await?;
    let res = server
        .catalog()
        .lookup(&ctx.cluster, &p.group, &p.version, &p.resource)
        .ok_or_else(ApiError::no_route)?;
    let sub = p.subresource.as_deref().unwrap_or("");
    if res.subresource(sub).is_none() || (res.namespaced && p.namespace.is_empty()) {
        return Err(ApiError::no_route());
    }
    let name = p.name.clone().unwrap_or_default();
    match exec::Kind::of(sub) {
        Some(kind) if p.resource == "pods" => {
            if !matches!(ctx.method, http::Method::GET | http::Method::POST) {
                return Err(ApiError::method_not_allowed(
                    ctx.method.as_str(),
                    &format!("pods/{sub}"),
                ));
            }
            exec::serve(server, ctx, kind, &p.namespace, &name, req, peer).await
        }
        _ => proxy::serve(server, ctx, p, req, peer).await,
    }
}
