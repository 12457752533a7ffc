//! The API server's state and its request entry point.
//!
//! [`ApiServer::handle`] takes a fully read request (`http::Request<Bytes>`) and an
//! authenticated user, routes it and answers. The HTTPS listener ([`crate::serve`]) and the
//! in-memory transport used by in-process components ([`crate::local`]) both call it, so our own
//! controllers exercise exactly what external clients do.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use apimachinery::status::ApiError;
use bytes::Bytes;
use controlplane::ControlPlane;
use futures::FutureExt;
use http::{Method, Request, Response, StatusCode, header};
use registry::catalog::Catalog;
use registry::store::Store;
use serde_json::json;

use crate::auth::{UserExt, UserInfo};
use crate::response::{self, Body};
use crate::route::{self, Route};
use crate::{discovery, handlers, health, openapi};

/// The Kubernetes version the server claims (and whose API it serves).
pub const KUBE_VERSION: (&str, &str, &str) = ("1", "33", "v1.33.0");

/// Who sent a request, before authentication.
#[derive(Clone)]
pub enum Caller {
    /// Over TLS, with the client's certificate chain if it sent one.
    Tls(Option<Arc<crate::authn::PeerCerts>>),
    /// An in-process component, already trusted as this user.
    Internal(UserInfo),
}

pub use controlplane::Config;

/// The API server: the HTTP side of a [`ControlPlane`].
pub struct ApiServer {
    cp: Arc<ControlPlane>,
    pub(crate) authn: crate::authn::Authenticator,
    /// How kubelets are reached (logs, exec, attach, port-forward, node proxy, metrics).
    pub(crate) kubelet: crate::kubelet::KubeletClient,
    /// The `metrics.k8s.io` resource metrics, scraped from kubelets on demand.
    pub(crate) resource_metrics: Arc<crate::metrics_api::Scraper>,
    ready: AtomicBool,
    draining: AtomicBool,
    /// Watches end when this is notified (graceful shutdown).
    pub(crate) shutdown: tokio::sync::watch::Sender<bool>,
    /// The OCI registry served at `/v2/` (set by `matryoshka up`; absent: `/v2/` is 404).
    pub(crate) oci: std::sync::OnceLock<Arc<oci::Registry>>,
    /// The web console served at `/console/` (set by `matryoshka up`; absent: 404).
    pub(crate) web: std::sync::OnceLock<crate::web::WebApp>,
    /// Flow control of network requests (set by [`crate::serve::serve`]).
    pub(crate) flow: std::sync::OnceLock<Arc<crate::flow::FlowControl>>,
}

/// Query parameters of a request.
#[derive(Debug, Clone, Default)]
pub struct Query(pub Vec<(String, String)>);

impl Query {
    pub fn parse(q: Option<&str>) -> Self {
        Query(
            form_urlencoded::parse(q.unwrap_or("").as_bytes())
                .into_owned()
                .collect(),
        )
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean parameter: `true`/`1` (and a bare `?name`).
    pub fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), Some("true" | "1" | "True" | ""))
    }

    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
}

/// Everything a handler needs about the request.
pub struct Ctx {
    pub cluster: String,
    /// For a cross-cluster request: the datastore whose clusters it covers (empty: the
    /// shared store's). See `registry::shards`.
    pub shard: String,
    pub user: UserInfo,
    pub method: Method,
    pub query: Query,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    /// `Warning` headers to send back.
    pub warnings: Vec<String>,
}

impl Ctx {
    /// The request's requester for the control plane (its warnings are the caller's to move
    /// back into [`Ctx::warnings`]).
    pub fn requester(&self) -> controlplane::Requester<'_> {
        controlplane::Requester::new(&self.cluster, &self.user)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl ApiServer {
    /// The API server of `cp` (not ready until [`ApiServer::set_ready`]).
    pub fn new(cp: Arc<ControlPlane>) -> Arc<Self> {
        let (shutdown, _) = tokio::sync::watch::channel(false);
        let resource_metrics = Arc::new(crate::metrics_api::Scraper::default());
        let server = Arc::new(ApiServer {
            cp,
            authn: crate::authn::Authenticator::default(),
            kubelet: Default::default(),
            resource_metrics,
            ready: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            shutdown,
            oci: std::sync::OnceLock::new(),
            web: std::sync::OnceLock::new(),
            flow: std::sync::OnceLock::new(),
        });
        // What the HTTP side keeps per cluster goes with the cluster.
        let weak = Arc::downgrade(&server);
        server.cp.on_forget(move |cluster| {
            if let Some(s) = weak.upgrade() {
                s.resource_metrics.forget(cluster);
                s.kubelet.forget(cluster);
                s.authn.forget(cluster);
            }
        });
        server
    }

    /// The sizes of what the server keeps per logical cluster (the control plane's and the
    /// HTTP side's), by name: after clusters are created and deleted again, each is back to
    /// what it was before them.
    pub fn per_cluster_state(&self) -> std::collections::BTreeMap<&'static str, usize> {
        let mut state = self.cp.per_cluster_state();
        state.insert(
            "kubelet client configurations",
            self.kubelet.cached_clusters(),
        );
        state.insert(
            "resource metrics scrapes",
            self.resource_metrics.cluster_count(),
        );
        state.insert("tenant OIDC issuers", self.authn.tenant_issuers());
        state
    }

    /// How kubelets are reached.
    pub fn kubelet(&self) -> &crate::kubelet::KubeletClient {
        &self.kubelet
    }

    /// Authenticates the root cluster's bearer tokens of these OIDC issuers too (their
    /// discovery starts now, in the background).
    pub fn set_oidc(&self, issuers: Vec<Arc<crate::oidc::JwtAuthenticator>>) {
        self.authn.oidc.set(issuers);
    }

    /// How many accepted OIDC tokens of the root cluster are remembered (the 10 s success
    /// cache).
    pub fn oidc_cached(&self) -> usize {
        self.authn.oidc.cached()
    }

    /// Serves `registry` at `/v2/` (once; later calls change nothing).
    pub fn serve_registry(&self, registry: Arc<oci::Registry>) {
        let _ = self.oci.set(registry);
    }

    /// Serves the web console at `/console/` (once; later calls change nothing).
    pub fn serve_console(&self, app: crate::web::WebApp) {
        let _ = self.web.set(app);
    }

    /// The control plane this server serves.
    pub fn control_plane(&self) -> &Arc<ControlPlane> {
        &self.cp
    }

    pub fn store(&self) -> &Store {
        self.cp.store()
    }

    pub fn catalog(&self) -> &Catalog {
        self.cp.catalog()
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire) && !self.draining.load(Ordering::Acquire)
    }

    /// Starts draining: readiness fails and every watch ends.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Release);
        let _ = self.shutdown.send(true);
    }

    /// Whether a logical cluster is served.
    pub async fn cluster_exists(&self, cluster: &str) -> bool {
        self.cp.cluster_exists(cluster).await
    }

    /// Handles one request whose body is in memory.
    pub async fn handle(self: &Arc<Self>, req: Request<Bytes>, caller: Caller) -> Response<Body> {
        let (parts, body) = req.into_parts();
        self.handle_parts(parts, PendingBody::Ready(body), caller)
            .await
    }

    /// Handles one request whose body is still to be read: it is read only after the caller
    /// is authenticated and authorized and the request holds a flow-control seat.
    pub async fn handle_parts(
        self: &Arc<Self>,
        parts: http::request::Parts,
        body: PendingBody,
        caller: Caller,
    ) -> Response<Body> {
        let started = Instant::now();
        let routed = route::route(parts.uri.path());
        let user = match &caller {
            Caller::Internal(u) => u.clone(),
            Caller::Tls(_) => UserInfo::anonymous(),
        };
        let mut ctx = Ctx {
            cluster: routed.cluster.clone(),
            shard: routed.shard.clone(),
            user,
            method: parts.method.clone(),
            query: Query::parse(parts.uri.query()),
            headers: parts.headers,
            body: Bytes::new(),
            warnings: Vec::new(),
        };
        let mut pending = match body {
            PendingBody::Ready(b) => {
                ctx.body = b;
                None
            }
            stream => Some(stream),
        };
        let (verb, resource) = crate::metrics::labels(&ctx.method, &routed.route, &ctx.query);
        // The recovery layer (upstream's WithPanicRecovery): a panic in a handler is a bug,
        // logged with its request, and the client gets a 500 `Status` instead of a dropped
        // connection. It is a backstop, not the error path.
        let dispatched =
            std::panic::AssertUnwindSafe(self.dispatch(&mut ctx, &routed, &caller, &mut pending))
                .catch_unwind()
                .await;
        let mut resp = match dispatched {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => response::error(&e),
            Err(panic) => {
                let why = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                tracing::error!(method = %ctx.method, path = %parts.uri.path(), panic = %why, "a request handler panicked");
                response::error(&ApiError::internal(
                    "this request caused the API server to panic; its log has the details",
                ))
            }
        };
        for w in &ctx.warnings {
            let v = format!("299 - {}", serde_json::to_string(w).unwrap_or_default());
            if let Ok(h) = http::HeaderValue::from_str(&v) {
                resp.headers_mut().append(header::WARNING, h);
            }
        }
        resp.headers_mut().insert(
            "cache-control",
            http::HeaderValue::from_static("no-cache, private"),
        );
        self.cp
            .metrics()
            .observe(&verb, &resource, resp.status().as_u16(), started.elapsed());
        resp
    }

    async fn dispatch(
        self: &Arc<Self>,
        ctx: &mut Ctx,
        routed: &route::Routed,
        caller: &Caller,
        pending: &mut Option<PendingBody>,
    ) -> Result<Response<Body>, ApiError> {
        let route = &routed.route;
        if ctx.cluster == route::ALL_CLUSTERS {
            // Cross-cluster reads are for the system's own components only; to anyone else the
            // path does not exist.
            let readonly = ctx.method == Method::GET;
            return match route {
                Route::Resource(p)
                    if readonly
                        && p.name.is_none()
                        && ctx.user == crate::auth::UserInfo::system() =>
                {
                    handlers::resource(self, ctx, p).await
                }
                _ => Err(ApiError::no_route()),
            };
        }
        self.admit(ctx, routed, caller).await?;
        // Flow control, then the body: nothing is read or queued for a caller the cluster
        // does not know or allow.
        let _seat = match (caller, self.flow.get()) {
            (Caller::Tls(_), Some(fc)) if !exempt(ctx, routed) => {
                Some(fc.acquire(&ctx.cluster, &ctx.user.name).await?)
            }
            _ => None,
        };
        if let Some(p) = pending.take() {
            ctx.body = p.read().await?;
        }
        let get = ctx.method == Method::GET || ctx.method == Method::HEAD;
        match route {
            Route::Version if get => Ok(response::json(
                StatusCode::OK,
                &version_info_for(self, &ctx.cluster),
            )),
            Route::Health { kind, check } if get => {
                Ok(health::answer(self, kind, check.as_deref(), &ctx.query).await)
            }
            Route::Metrics if get => Ok(crate::metrics::render(self.cp.metrics(), &ctx.cluster)),
            Route::OpenApiV2 if get => Ok(openapi::v2(self, ctx)),
            Route::OpenApiV3Index if get => openapi::v3_index(self, ctx),
            Route::OpenApiV3(path) if get => openapi::v3_document(self, ctx, path),
            Route::CoreVersions if get => Ok(discovery::core_versions(self, ctx)),
            Route::Groups if get => Ok(discovery::groups(self, ctx)),
            Route::Group(g) if get => discovery::group(self, ctx, g),
            Route::GroupVersion { group, version } if get => {
                discovery::resources(self, ctx, group, version)
            }
            Route::Resource(p) => handlers::resource(self, ctx, p).await,
            Route::OidcConfig if get => crate::tokens::oidc_configuration(self, ctx),
            Route::Jwks if get => crate::tokens::jwks(self, ctx),
            Route::NotFound => Err(ApiError::no_route()),
            _ => Err(ApiError::method_not_allowed(ctx.method.as_str(), "")),
        }
    }
}

/// A request body: in memory, or still on the connection (read with the size limit and the
/// deadline).
pub enum PendingBody {
    Ready(Bytes),
    Incoming(hyper::body::Incoming, Instant),
}

impl PendingBody {
    async fn read(self) -> Result<Bytes, ApiError> {
        match self {
            PendingBody::Ready(b) => Ok(b),
            PendingBody::Incoming(body, deadline) => {
                // A body announced over the limit is refused before any of it is read.
                if hyper::body::Body::size_hint(&body).lower() > crate::codec::MAX_BODY as u64 {
                    return Err(ApiError::request_entity_too_large(
                        "the request is too large",
                    ));
                }
                let req = Request::new(body);
                match tokio::time::timeout_at(deadline.into(), crate::serve::read_body(req)).await {
                    Ok(r) => r.map(|r| r.into_body()),
                    Err(_) => Err(ApiError::timeout(
                        "request did not complete within requested timeout - the request body was not received in time",
                    )),
                }
            }
        }
    }
}

/// Requests that take no flow-control seat: long-running ones (watches hold a connection,
/// not a worker) and health checks (a probe must see the server's state, not its queue).
fn exempt(ctx: &Ctx, routed: &route::Routed) -> bool {
    if matches!(routed.route, Route::Health { .. } | Route::Version) {
        return true;
    }
    match &routed.route {
        Route::Resource(p) => {
            p.watch_prefix || matches!(ctx.query.get("watch"), Some("true" | "1"))
        }
        _ => false,
    }
}

impl ApiServer {
    /// Who is asking, and whether they may: the cluster must be served, the caller is
    /// authenticated against its trust, impersonation applied, the request authorized.
    pub async fn admit(
        self: &Arc<Self>,
        ctx: &mut Ctx,
        routed: &route::Routed,
        caller: &Caller,
    ) -> Result<(), ApiError> {
        if ctx.cluster.is_empty() || ctx.cluster == route::ALL_CLUSTERS {
            return Err(ApiError::no_route());
        }
        if !self.cluster_exists(&ctx.cluster).await {
            if self.cp.cluster_pending(&ctx.cluster) {
                let mut e = ApiError::service_unavailable(format!(
                    "the logical cluster {} is not ready yet",
                    ctx.cluster
                ));
                e.retry_after_seconds = Some(1);
                return Err(e);
            }
            return Err(ApiError::no_route());
        }
        if let Caller::Tls(chain) = caller {
            ctx.user = self
                .authn
                .authenticate(
                    &self.cp,
                    &ctx.cluster,
                    chain.as_deref(),
                    ctx.header("authorization"),
                )
                .await?;
        }
        crate::impersonate::apply(self, ctx)?;
        let attrs = crate::authz::request_attributes(&routed.route, &routed.path, ctx);
        crate::authz::check(self.control_plane(), &ctx.cluster, &ctx.user, &attrs)
    }
}

pub use apimachinery::cluster::VERSION_ANNOTATION;

/// The `/version` document of `cluster`: the release its LogicalCluster's
/// [`VERSION_ANNOTATION`] names, else the server's own.
pub fn version_info_for(server: &ApiServer, cluster: &str) -> serde_json::Value {
    if cluster != apimachinery::cluster::ROOT
        && let Some(lc) = server.store().shared_cache().get(
            crate::tenancy::GROUP,
            crate::tenancy::PLURAL,
            apimachinery::cluster::ROOT,
            "",
            cluster,
        )
        && let Some(v) = lc
            .value()
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(VERSION_ANNOTATION))
            .and_then(serde_json::Value::as_str)
        && let Some((major, minor)) = parse_release(v)
    {
        return version_document(&major, &minor, v);
    }
    version_info()
}

/// `v1.35.6` → ("1", "35").
fn parse_release(v: &str) -> Option<(String, String)> {
    let mut parts = v.strip_prefix('v')?.split('.');
    let major = parts
        .next()
        .filter(|p| p.chars().all(|c| c.is_ascii_digit()))?;
    let minor = parts
        .next()
        .filter(|p| p.chars().all(|c| c.is_ascii_digit()))?;
    (!major.is_empty() && !minor.is_empty()).then(|| (major.to_string(), minor.to_string()))
}

/// The `/version` document.
pub fn version_info() -> serde_json::Value {
    let (major, minor, git) = KUBE_VERSION;
    version_document(major, minor, git)
}

fn version_document(major: &str, minor: &str, git: &str) -> serde_json::Value {
    json!({
        "major": major,
        "minor": minor,
        "emulationMajor": major,
        "emulationMinor": minor,
        "minCompatibilityMajor": major,
        "minCompatibilityMinor": "32",
        "gitVersion": git,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-11-30T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// A ready API server over `storage` with fresh, in-memory root credentials (tests and
/// benchmarks; `matryoshka up` keeps its credentials on disk and calls [`start_with`]).
pub async fn start(storage: Arc<dyn storage::Storage>) -> Result<Arc<ApiServer>, ApiError> {
    start_with(storage, fresh_config()?).await
}

/// The configuration [`start`] uses: fresh, in-memory root credentials, everything else as
/// `matryoshka up`'s defaults.
pub fn fresh_config() -> Result<Config, ApiError> {
    let ca = pki::Ca::generate("matryoshka-ca").map_err(ApiError::internal)?;
    let sa = crate::jwt::SigningKey::generate_pkcs8().map_err(ApiError::internal)?;
    Ok(Config {
        external_url: "https://127.0.0.1:6443".into(),
        root_ca: ca.pair,
        root_sa_key: sa,
        elected: false,
        rotation: Default::default(),
        volumes_dir: None,
        event_ttl: std::time::Duration::from_secs(3600),
    })
}

/// Builds a ready API server over `storage`: the control plane (watch cache, built-in
/// catalogue, seeded root cluster and its loops) and the HTTP side over it.
pub async fn start_with(
    storage: Arc<dyn storage::Storage>,
    config: Config,
) -> Result<Arc<ApiServer>, ApiError> {
    let mut extra = crate::reviews::extra_resources();
    extra.extend(crate::metrics_api::resources());
    let cp = ControlPlane::start(storage, config, extra).await?;
    let server = ApiServer::new(cp);
    server.set_ready(true);
    Ok(server)
}

#[cfg(test)]
mod version_tests {
    use super::*;

    #[test]
    fn a_release_gives_its_major_and_minor() {
        assert_eq!(parse_release("v1.35.6"), Some(("1".into(), "35".into())));
        assert_eq!(parse_release("1.35.6"), None);
        assert_eq!(parse_release("v1.x"), None);
        let doc = version_document("1", "33", "v1.33.13");
        assert_eq!(doc["gitVersion"], "v1.33.13");
        assert_eq!(doc["minor"], "33");
    }
}
