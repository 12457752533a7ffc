//! The console's requests and what they do, over the Kubernetes API as the signed-in user.
//!
//! HTTP stays with the API server, which hands over a [`Request`] (method, path, the session's
//! token, the form) and writes back the [`Response`]. Every read and write here goes through
//! the API with the user's own token — authentication, RBAC and admission are the API
//! server's, never the console's — and what a user may do is asked with
//! SelfSubjectAccessReviews, so the pages hide only what the API would refuse anyway.

use std::sync::Arc;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Event, Secret};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::form::{self, Errors, FormData};
use crate::pages::{self, Allowed, BASE};

/// The platform's API group.
const GROUP: &str = "platform.matryoshka.dev";

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// The resource the console manages.
pub fn tenant_clusters() -> ApiResource {
    resource(GROUP, "v1alpha1", "TenantCluster", "tenantclusters")
}

/// The platform's tenants.
pub fn tenants() -> ApiResource {
    resource(GROUP, "v1alpha1", "Tenant", "tenants")
}

/// UsageReports, asked as dry runs (computed by admission, never stored).
pub fn usage_reports() -> ApiResource {
    resource(GROUP, "v1alpha1", "UsageReport", "usagereports")
}

/// Cluster API Machines (the nodes' machines of a tenant cluster, in its tenant namespace).
pub fn machines() -> ApiResource {
    resource("cluster.x-k8s.io", "v1beta2", "Machine", "machines")
}

/// The kubeconfigs offered for download: the key of each in the cluster's kubeconfig Secret.
pub const KUBECONFIGS: [(&str, &str); 2] =
    [("admin", "admin.conf"), ("super-admin", "super-admin.conf")];

/// The OIDC kubeconfig (kubelogin): Secret `kubernetes-<name>-oidc-kubeconfig`, key
/// `kubeconfig`, written by the platform when the cluster's `spec.oidc.mode` is `System`.
pub const OIDC_KUBECONFIG: &str = "oidc";

/// The label naming a Machine's cluster (its release, `kubernetes-<name>`).
const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

/// How many hours the usage page charts (one bar each).
pub const USAGE_HOURS: i64 = 24;
/// The period of the usage beside each tenant of the tree.
pub const TREE_USAGE_DAYS: i64 = 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Method {
    #[default]
    Get,
    Post,
}

/// A request to the console.
#[derive(Default)]
pub struct Request {
    pub method: Method,
    /// The path under [`BASE`] included (`/console/namespaces/tenant-foo/tenantclusters`).
    pub path: String,
    /// The session's bearer token (from the console's cookie).
    pub token: Option<String>,
    /// The submitted form of a POST.
    pub form: FormData,
    /// The URL's query.
    pub query: FormData,
    /// The `Host` the browser asked (the OIDC redirect URI is built on it).
    pub host: Option<String>,
    /// The OIDC sign-in in progress ([`crate::oidc::Pending`], encoded), from its cookie.
    pub login: Option<String>,
    /// A client acting as the caller the transport identified (the TLS client certificate
    /// the browser presented), used when there is no session.
    pub certificate: Option<kube::Client>,
}

/// A stream of server-sent events, each already framed (`event: …` and `data: …` lines).
pub struct Live(pub futures::stream::BoxStream<'static, String>);

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Live(..)")
    }
}

/// How often a live stream sends a comment when nothing changed, so a closed connection is
/// noticed (and proxies keep it open).
pub const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(15);

/// What the console answers.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    /// Redirect here (`303 See Other` after a POST).
    pub location: Option<String>,
    /// `Some(Some(token))`: start a session with the token; `Some(None)`: end it.
    pub session: Option<Option<String>>,
    /// `Some(Some(login))`: remember an OIDC sign-in in progress; `Some(None)`: forget it.
    pub login: Option<Option<String>>,
    /// The file name of a download.
    pub download: Option<String>,
    /// The body is this stream of server-sent events (`text/event-stream`) instead.
    pub live: Option<Live>,
}

impl Response {
    fn html(status: u16, markup: maud::Markup) -> Response {
        Response {
            status,
            content_type: "text/html; charset=utf-8",
            body: markup.into_string(),
            location: None,
            session: None,
            login: None,
            download: None,
            live: None,
        }
    }

    fn redirect(to: impl Into<String>) -> Response {
        Response {
            status: 303,
            content_type: "text/plain; charset=utf-8",
            body: String::new(),
            location: Some(to.into()),
            session: None,
            login: None,
            download: None,
            live: None,
        }
    }
}

/// Makes a client that sends `token` to the API server.
pub type Clients = Arc<dyn Fn(&str) -> kube::Client + Send + Sync>;

/// The console: how to reach the API as a user, and the schema of a TenantCluster's `spec`
/// (the form is generated from it).
pub struct Console {
    clients: Clients,
    spec_schema: Value,
    tenant_schema: Value,
    oidc: Option<Arc<crate::oidc::OidcLogin>>,
    streams: Streams,
}

/// How many live streams may be open at once, and by one user: each holds watches on the API
/// server, so a user opening pages without end must not hold the server's (pages work without
/// their stream: the script simply gets no updates).
pub const MAX_STREAMS: usize = 1024;
pub const MAX_STREAMS_PER_USER: usize = 16;

/// The live streams open, in all and by user.
#[derive(Clone)]
struct Streams {
    total: Arc<tokio::sync::Semaphore>,
    by_user: Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
    per_user: usize,
}

/// One open stream, counted until it is dropped.
struct Ticket {
    user: String,
    by_user: Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Streams {
    fn new(total: usize, per_user: usize) -> Streams {
        Streams {
            total: Arc::new(tokio::sync::Semaphore::new(total)),
            by_user: Default::default(),
            per_user,
        }
    }

    fn ticket(&self, user: &str) -> Result<Ticket, Refused> {
        let busy = || {
            Refused::new(
                429,
                "Too many live pages are open: this one is complete, reload it for news.",
            )
        };
        let permit = self.total.clone().try_acquire_owned().map_err(|_| busy())?;
        let mut by_user = self.by_user.lock().unwrap_or_else(|p| p.into_inner());
        let n = by_user.entry(user.to_string()).or_default();
        if *n >= self.per_user {
            return Err(busy());
        }
        *n += 1;
        Ok(Ticket {
            user: user.to_string(),
            by_user: self.by_user.clone(),
            _permit: permit,
        })
    }

    /// The streams open (for tests).
    fn open(&self, user: &str) -> usize {
        self.by_user
            .lock()
            .map(|m| m.get(user).copied().unwrap_or(0))
            .unwrap_or(0)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut by_user = self.by_user.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = by_user.get_mut(&self.user) {
            *n -= 1;
            if *n == 0 {
                by_user.remove(&self.user);
            }
        }
    }
}

impl Ticket {
    /// The response's stream holds the ticket until it ends.
    fn attach(self, mut r: Response) -> Response {
        use futures::StreamExt;
        if let Some(Live(stream)) = r.live.take() {
            r.live = Some(Live(
                stream
                    .map(move |e| {
                        let _held = &self;
                        e
                    })
                    .boxed(),
            ));
        }
        r
    }
}

/// A refusal of the API as the page shows it.
struct Refused {
    code: u16,
    message: String,
    status: Value,
}

impl Refused {
    /// A refusal of the console's own (no API `Status` behind it).
    fn new(code: u16, message: impl Into<String>) -> Refused {
        Refused {
            code,
            message: message.into(),
            status: Value::Null,
        }
    }
}

impl From<kube::Error> for Refused {
    fn from(e: kube::Error) -> Refused {
        match e {
            kube::Error::Api(s) => Refused {
                code: s.code,
                message: s.message.clone(),
                status: serde_json::to_value(&*s).unwrap_or(Value::Null),
            },
            other => Refused::new(502, other.to_string()),
        }
    }
}

/// The path's parts after `/console/namespaces/<ns>/tenantclusters`.
enum Route<'a> {
    Home,
    Style,
    SignIn,
    OidcStart,
    OidcCallback,
    SignOut,
    List(&'a str),
    New(&'a str),
    Detail(&'a str, &'a str),
    Edit(&'a str, &'a str),
    Scale(&'a str, &'a str),
    Delete(&'a str, &'a str),
    Kubeconfig(&'a str, &'a str, &'a str),
    Live(&'a str),
    LiveDetail(&'a str, &'a str),
    TenantNew(&'a str),
    Usage(&'a str),
    Script,
    Go,
    Unknown,
}

/// A namespace or object name from the path: what the API accepts as a name (so a segment
/// never changes the API path the console asks).
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

fn route(path: &str) -> Route<'_> {
    let Some(rest) = path.strip_prefix(BASE) else {
        return Route::Unknown;
    };
    let parts: Vec<&str> = rest.trim_matches('/').split('/').collect();
    if parts.first() == Some(&"namespaces") {
        let namespace_ok = parts.get(1).is_some_and(|p| is_name(p));
        let name_ok = parts.get(3).is_none_or(|p| is_name(p));
        if !namespace_ok || !name_ok {
            return Route::Unknown;
        }
    }
    match parts.as_slice() {
        [""] => Route::Home,
        ["static", "console.css"] => Route::Style,
        ["static", "console.js"] => Route::Script,
        ["live", "namespaces", ns, "tenantclusters"] if is_name(ns) => Route::Live(ns),
        ["live", "namespaces", ns, "tenantclusters", name] if is_name(ns) && is_name(name) => {
            Route::LiveDetail(ns, name)
        }
        ["namespaces", ns, "tenants", "new"] => Route::TenantNew(ns),
        ["namespaces", ns, "usage"] => Route::Usage(ns),
        ["sign-in"] => Route::SignIn,
        ["sign-in", "oidc"] => Route::OidcStart,
        ["oidc", "callback"] => Route::OidcCallback,
        ["sign-out"] => Route::SignOut,
        ["go"] => Route::Go,
        ["namespaces", ns, "tenantclusters"] => Route::List(ns),
        ["namespaces", ns, "tenantclusters", "new"] => Route::New(ns),
        ["namespaces", ns, "tenantclusters", name] => Route::Detail(ns, name),
        ["namespaces", ns, "tenantclusters", name, "edit"] => Route::Edit(ns, name),
        ["namespaces", ns, "tenantclusters", name, "scale"] => Route::Scale(ns, name),
        ["namespaces", ns, "tenantclusters", name, "delete"] => Route::Delete(ns, name),
        [
            "namespaces",
            ns,
            "tenantclusters",
            name,
            "kubeconfig",
            which,
        ] => Route::Kubeconfig(ns, name, which),
        _ => Route::Unknown,
    }
}

impl Console {
    /// `spec_schema` and `tenant_schema`: the `spec` schemas of the TenantCluster and Tenant
    /// CRDs, from which the forms are generated.
    pub fn new(clients: Clients, spec_schema: Value, tenant_schema: Value) -> Console {
        Console {
            clients,
            spec_schema,
            tenant_schema,
            oidc: None,
            streams: Streams::new(MAX_STREAMS, MAX_STREAMS_PER_USER),
        }
    }

    /// Bounds the live streams open at once (in all, by one user) other than the defaults.
    pub fn with_stream_limits(mut self, total: usize, per_user: usize) -> Console {
        self.streams = Streams::new(total, per_user);
        self
    }

    /// How many live streams `user` has open.
    pub fn streams_open(&self, user: &str) -> usize {
        self.streams.open(user)
    }

    /// Offers signing in through an OIDC provider.
    pub fn with_oidc(mut self, oidc: crate::oidc::OidcLogin) -> Console {
        self.oidc = Some(Arc::new(oidc));
        self
    }

    fn sign_in_page(&self, status: u16, error: Option<&str>) -> Response {
        let oidc = self.oidc.as_ref().map(|_| format!("{BASE}/sign-in/oidc"));
        Response::html(status, pages::sign_in(error, oidc.as_deref()))
    }

    /// Sends the browser to the provider, remembering the sign-in in its cookie.
    async fn oidc_start(&self, host: Option<&str>) -> Response {
        let Some(oidc) = &self.oidc else {
            return self.sign_in_page(404, Some("No identity provider is configured."));
        };
        let Some(redirect) = redirect_uri(host) else {
            return self.sign_in_page(400, Some("The request named no valid host."));
        };
        match oidc.start(&redirect).await {
            Ok((url, pending)) => Response {
                login: Some(Some(pending.encode())),
                ..Response::redirect(url)
            },
            Err(e) => self.sign_in_page(502, Some(&format!("The identity provider: {e}"))),
        }
    }

    /// The provider's redirect back: the code redeemed, the ID token checked by the API
    /// server, the session started.
    async fn oidc_callback(&self, req: &Request) -> Response {
        let Some(oidc) = &self.oidc else {
            return self.sign_in_page(404, Some("No identity provider is configured."));
        };
        let forget = |mut r: Response| {
            r.login = Some(None);
            r
        };
        if let Some(error) = req.query.get("error") {
            let description = req.query.get("error_description").unwrap_or_default();
            return forget(self.sign_in_page(
                401,
                Some(&format!(
                    "The identity provider refused: {error} {description}"
                )),
            ));
        }
        let pending = req.login.as_deref().and_then(crate::oidc::Pending::decode);
        let (Some(pending), Some(code), Some(state), Some(redirect)) = (
            pending,
            req.query.get("code"),
            req.query.get("state"),
            redirect_uri(req.host.as_deref()),
        ) else {
            return forget(self.sign_in_page(
                400,
                Some("This sign-in was not started here, or it took too long: sign in again."),
            ));
        };
        let token = match oidc.finish(&pending, state, code, &redirect).await {
            Ok(t) => t,
            Err(e) => return forget(self.sign_in_page(401, Some(&e))),
        };
        match whoami(&(self.clients)(&token)).await {
            // A page that moves on by itself: the session cookie is `SameSite=Strict`, and a
            // redirect would still belong to the provider's cross-site navigation.
            Ok(user) => Response {
                session: Some(Some(token)),
                login: Some(None),
                ..Response::html(200, pages::signed_in(&user))
            },
            Err(e) if e.code == 401 => forget(self.sign_in_page(
                401,
                Some("The API server did not accept the identity provider's token."),
            )),
            Err(e) => forget(self.sign_in_page(e.code, Some(&e.message))),
        }
    }

    /// Answers one request.
    pub async fn handle(&self, req: Request) -> Response {
        let r = route(&req.path);
        match (&r, req.method) {
            (Route::Style, Method::Get) => {
                return Response {
                    content_type: "text/css; charset=utf-8",
                    body: pages::STYLE.to_string(),
                    ..Response::html(200, maud::html! {})
                };
            }
            (Route::Script, Method::Get) => {
                return Response {
                    content_type: "text/javascript; charset=utf-8",
                    body: pages::SCRIPT.to_string(),
                    ..Response::html(200, maud::html! {})
                };
            }
            (Route::SignIn, Method::Get) => return self.sign_in_page(200, None),
            (Route::OidcStart, Method::Get) => return self.oidc_start(req.host.as_deref()).await,
            (Route::OidcCallback, Method::Get) => return self.oidc_callback(&req).await,
            (Route::SignIn, Method::Post) => return self.sign_in(&req.form).await,
            (Route::SignOut, Method::Post) => {
                return Response {
                    session: Some(None),
                    ..Response::redirect(format!("{BASE}/sign-in"))
                };
            }
            _ => {}
        }
        let client = match (req.token.as_deref(), &req.certificate) {
            (Some(token), _) => (self.clients)(token),
            (None, Some(client)) => client.clone(),
            (None, None) => return Response::redirect(format!("{BASE}/sign-in")),
        };
        let user = match whoami(&client).await {
            Ok(u) => u,
            // An expired or revoked token: sign in again.
            Err(e) if e.code == 401 => {
                return Response {
                    session: Some(None),
                    ..Response::redirect(format!("{BASE}/sign-in"))
                };
            }
            Err(e) => return error(None, e),
        };
        let result = match (r, req.method) {
            (Route::Home, Method::Get) => Ok(self.home(&client, &user).await),
            (Route::List(ns), Method::Get) => self.list(&client, &user, ns).await,
            (Route::New(ns), Method::Get) => {
                Ok(self.form_page(&user, ns, None, &Value::Null, &Errors::new(), None))
            }
            (Route::New(ns), Method::Post) => self.create(&client, &user, ns, &req.form).await,
            (Route::Detail(ns, name), Method::Get) => self.detail(&client, &user, ns, name).await,
            (Route::Edit(ns, name), Method::Get) => self.edit_page(&client, &user, ns, name).await,
            (Route::Go, Method::Post) => {
                let ns = req.form.get("namespace").unwrap_or_default().trim();
                if is_name(ns) {
                    Ok(Response::redirect(format!(
                        "{BASE}/namespaces/{ns}/tenantclusters"
                    )))
                } else {
                    Err(Refused::new(
                        422,
                        format!("Invalid value: \"{ns}\": not a namespace name"),
                    ))
                }
            }
            (Route::Edit(ns, name), Method::Post) => {
                self.edit(&client, &user, ns, name, &req.form).await
            }
            (Route::Scale(ns, name), Method::Post) => scale(&client, ns, name, &req.form).await,
            (Route::Delete(ns, name), Method::Get) => {
                Ok(Response::html(200, pages::confirm_delete(&user, ns, name)))
            }
            (Route::Delete(ns, name), Method::Post) => {
                delete(&client, &user, ns, name, &req.form).await
            }
            (Route::Kubeconfig(ns, name, which), Method::Get) => {
                kubeconfig(&client, ns, name, which).await
            }
            (Route::Live(ns), Method::Get) => match self.streams.ticket(&user) {
                Ok(t) => live(&client, ns).await.map(|r| t.attach(r)),
                Err(e) => Err(e),
            },
            (Route::LiveDetail(ns, name), Method::Get) => match self.streams.ticket(&user) {
                Ok(t) => live_detail(&client, ns, name).await.map(|r| t.attach(r)),
                Err(e) => Err(e),
            },
            (Route::TenantNew(ns), Method::Get) => Ok(Response::html(
                200,
                pages::tenant_form(
                    &user,
                    ns,
                    &self.tenant_schema,
                    &Value::Null,
                    &Errors::new(),
                    None,
                ),
            )),
            (Route::TenantNew(ns), Method::Post) => {
                self.create_tenant(&client, &user, ns, &req.form).await
            }
            (Route::Usage(ns), Method::Get) => usage(&client, &user, ns).await,
            (Route::Unknown, _) => Err(Refused::new(
                404,
                format!("{} is not a page of the console", req.path),
            )),
            _ => Err(Refused::new(405, "This page does not take that method.")),
        };
        result.unwrap_or_else(|e| error(Some(&user), e))
    }

    /// The tenant tree when the user may list Tenants everywhere; else a namespace to open.
    async fn home(&self, client: &kube::Client, user: &str) -> Response {
        let tenants: Api<DynamicObject> = Api::all_with(client.clone(), &tenants());
        match tenants.list(&ListParams::default()).await {
            Ok(list) => {
                let values: Vec<Value> = list.items.iter().map(to_value).collect();
                let now = Timestamp::now();
                let start = now - SignedDuration::from_hours(24 * TREE_USAGE_DAYS);
                // Usage is context: a user who may not ask for it still sees the tree.
                let usage = match report(client, "tenant-root", start, now).await {
                    Ok(r) => r
                        .get("tenants")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|t| {
                            Some((
                                t.get("tenant")?.as_str()?.to_string(),
                                t.get("totalConsumptions")?.clone(),
                            ))
                        })
                        .collect(),
                    Err(_) => Default::default(),
                };
                let may_create = may(client, "", "create", "tenants", GROUP).await;
                let period = format!("the last {TREE_USAGE_DAYS} days");
                Response::html(
                    200,
                    pages::tenant_tree(user, &values, &usage, &period, may_create),
                )
            }
            Err(_) => Response::html(200, home(user)),
        }
    }

    async fn create_tenant(
        &self,
        client: &kube::Client,
        user: &str,
        ns: &str,
        form: &FormData,
    ) -> Result<Response, Refused> {
        match create_from_form(client, &tenants(), &self.tenant_schema, ns, form).await? {
            Ok(created) => {
                let child = pages::tenant_namespace(&to_value(&created));
                Ok(Response::redirect(format!(
                    "{BASE}/namespaces/{child}/tenantclusters"
                )))
            }
            Err((spec, errors)) => {
                let status = if errors.is_empty() { 200 } else { 422 };
                Ok(Response::html(
                    status,
                    pages::tenant_form(user, ns, &self.tenant_schema, &spec, &errors, Some(form)),
                ))
            }
        }
    }

    async fn sign_in(&self, form: &FormData) -> Response {
        let token = form.get("token").map(str::trim).unwrap_or_default();
        if token.is_empty() {
            return self.sign_in_page(400, Some("Paste a token to sign in."));
        }
        match whoami(&(self.clients)(token)).await {
            Ok(_) => Response {
                session: Some(Some(token.to_string())),
                ..Response::redirect(format!("{BASE}/"))
            },
            Err(e) if e.code == 401 => {
                self.sign_in_page(401, Some("The API server did not accept this token."))
            }
            Err(e) => self.sign_in_page(e.code, Some(&e.message)),
        }
    }

    async fn list(&self, client: &kube::Client, user: &str, ns: &str) -> Result<Response, Refused> {
        let items = clusters(client, ns)
            .list(&ListParams::default())
            .await?
            .items;
        let values: Vec<Value> = items.iter().map(to_value).collect();
        let allowed = Allowed {
            create: may(client, ns, "create", "tenantclusters", GROUP).await,
            ..Default::default()
        };
        let live = format!("{BASE}/live/namespaces/{ns}/tenantclusters");
        Ok(Response::html(
            200,
            pages::cluster_list(user, ns, &values, allowed, Some(&live)),
        ))
    }

    async fn detail(
        &self,
        client: &kube::Client,
        user: &str,
        ns: &str,
        name: &str,
    ) -> Result<Response, Refused> {
        let c = clusters(client, ns).get(name).await?;
        let value = to_value(&c);
        let events: Api<Event> = Api::namespaced(client.clone(), ns);
        let lp = ListParams::default().fields(&format!(
            "involvedObject.kind=TenantCluster,involvedObject.name={name}"
        ));
        // Events are context: a user who may not read them still sees the cluster.
        let events: Vec<Value> = match events.list(&lp).await {
            Ok(l) => l
                .items
                .iter()
                .map(|e| serde_json::to_value(e).unwrap_or_default())
                .collect(),
            Err(_) => Vec::new(),
        };
        let allowed = Allowed {
            create: false,
            update: may(client, ns, "update", "tenantclusters", GROUP).await,
            delete: may(client, ns, "delete", "tenantclusters", GROUP).await,
            kubeconfig: may(client, ns, "get", "secrets", "").await,
        };
        let machines = cluster_machines(client, ns, name).await.unwrap_or_default();
        let live = format!("{BASE}/live/namespaces/{ns}/tenantclusters/{name}");
        Ok(Response::html(
            200,
            pages::cluster_detail(user, &value, &machines, &events, allowed, Some(&live)),
        ))
    }

    fn form_page(
        &self,
        user: &str,
        ns: &str,
        name: Option<&str>,
        spec: &Value,
        errors: &Errors,
        submitted: Option<&FormData>,
    ) -> Response {
        let status = if errors.is_empty() { 200 } else { 422 };
        Response::html(
            status,
            pages::cluster_form(user, ns, name, &self.spec_schema, spec, errors, submitted),
        )
    }

    async fn create(
        &self,
        client: &kube::Client,
        user: &str,
        ns: &str,
        form: &FormData,
    ) -> Result<Response, Refused> {
        match create_from_form(client, &tenant_clusters(), &self.spec_schema, ns, form).await? {
            Ok(created) => Ok(Response::redirect(format!(
                "{BASE}/namespaces/{ns}/tenantclusters/{}",
                created.metadata.name.unwrap_or_default()
            ))),
            Err((spec, errors)) => Ok(self.form_page(user, ns, None, &spec, &errors, Some(form))),
        }
    }

    fn form_errors(&self, r: &Refused) -> Option<Errors> {
        form_errors(&self.spec_schema, r)
    }

    async fn edit_page(
        &self,
        client: &kube::Client,
        user: &str,
        ns: &str,
        name: &str,
    ) -> Result<Response, Refused> {
        let c = clusters(client, ns).get(name).await?;
        let spec = c.data.get("spec").cloned().unwrap_or(Value::Null);
        Ok(self.form_page(user, ns, Some(name), &spec, &Errors::new(), None))
    }

    async fn edit(
        &self,
        client: &kube::Client,
        user: &str,
        ns: &str,
        name: &str,
        form: &FormData,
    ) -> Result<Response, Refused> {
        let api = clusters(client, ns);
        let mut current = api.get(name).await?;
        let base = current.data.get("spec").cloned().unwrap_or(Value::Null);
        let (spec, errors) = form::read(&self.spec_schema, "spec", &base, form);
        if !errors.is_empty() || form.reshapes() {
            return Ok(self.form_page(user, ns, Some(name), &spec, &errors, Some(form)));
        }
        current.data["spec"] = spec.clone();
        // A replace at the version read: a change made meanwhile is a conflict, not lost.
        match api.replace(name, &PostParams::default(), &current).await {
            Ok(_) => Ok(Response::redirect(format!(
                "{BASE}/namespaces/{ns}/tenantclusters/{name}"
            ))),
            Err(e) => {
                let r = Refused::from(e);
                match self.form_errors(&r) {
                    Some(errors) => {
                        Ok(self.form_page(user, ns, Some(name), &spec, &errors, Some(form)))
                    }
                    None => Err(r),
                }
            }
        }
    }
}

/// The field errors of a refusal the form shows again (a bad request, an invalid object,
/// a conflict); any other refusal is a page of its own.
fn form_errors(schema: &Value, r: &Refused) -> Option<Errors> {
    if !matches!(r.code, 400 | 409 | 422) {
        return None;
    }
    let errors = form::normalize(schema, "spec", form::status_errors(&r.status));
    Some(if errors.is_empty() {
        message_error(&r.message)
    } else {
        errors
    })
}

/// Creates the object of resource `ar` in `ns` that a form describes (`metadata.name` and the
/// `spec` of `schema`): the created object, or the spec as read and the errors to show with
/// the form again (the form's own, or the server's field errors), or a refusal of another
/// kind.
async fn create_from_form(
    client: &kube::Client,
    ar: &ApiResource,
    schema: &Value,
    ns: &str,
    form: &FormData,
) -> Result<Result<DynamicObject, (Value, Errors)>, Refused> {
    let (spec, errors) = form::read(schema, "spec", &Value::Null, form);
    if !errors.is_empty() || form.reshapes() {
        return Ok(Err((spec, errors)));
    }
    let name = form.get("metadata.name").unwrap_or_default().trim();
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": ar.api_version,
        "kind": ar.kind,
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }))
    .map_err(|e| Refused::new(400, e.to_string()))?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, ar);
    match api.create(&PostParams::default(), &obj).await {
        Ok(created) => Ok(Ok(created)),
        Err(e) => {
            let r = Refused::from(e);
            match form_errors(schema, &r) {
                Some(errors) => Ok(Err((spec, errors))),
                None => Err(r),
            }
        }
    }
}

fn message_error(message: &str) -> Errors {
    let mut e = Errors::new();
    e.insert(String::new(), vec![message.to_string()]);
    e
}

fn clusters(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &tenant_clusters())
}

fn to_value(o: &DynamicObject) -> Value {
    serde_json::to_value(o).unwrap_or(Value::Null)
}

/// The signed-in user's name, from a SelfSubjectReview (what `kubectl auth whoami` asks).
async fn whoami(client: &kube::Client) -> Result<String, Refused> {
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let review = api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await?;
    Ok(review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .unwrap_or_default())
}

/// Whether the user may `verb` the `resource` of `group` in `ns` (a failed review: no).
async fn may(client: &kube::Client, ns: &str, verb: &str, resource: &str, group: &str) -> bool {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(ns.to_string()),
                verb: Some(verb.to_string()),
                group: Some(group.to_string()),
                resource: Some(resource.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &review).await {
        Ok(r) => r.status.is_some_and(|s| s.allowed),
        Err(_) => false,
    }
}

async fn scale(
    client: &kube::Client,
    ns: &str,
    name: &str,
    form: &FormData,
) -> Result<Response, Refused> {
    let group = form.get("group").unwrap_or_default();
    // A merge patch would create a group it does not find: only an existing one is scaled.
    let current = clusters(client, ns).get(name).await?;
    let groups = pages::node_groups(&to_value(&current));
    let Some(existing) = groups.get(group) else {
        return Err(Refused::new(
            422,
            format!(
                "spec.nodeGroups[{group}]: Not found: \"{group}\": {name} has no such node group"
            ),
        ));
    };
    // The implied default group is written out whole, so only its sizes change.
    let mut patch = if current
        .data
        .pointer("/spec/nodeGroups")
        .and_then(Value::as_object)
        .is_none_or(|g| g.is_empty())
    {
        existing.clone()
    } else {
        json!({})
    };
    for field in ["minReplicas", "maxReplicas"] {
        let text = form.get(field).unwrap_or_default().trim();
        let n: i64 = text.parse().map_err(|_| {
            Refused::new(
                422,
                format!("{field}: Invalid value: \"{text}\": must be a whole number"),
            )
        })?;
        patch[field] = json!(n);
    }
    let body = json!({"spec": {"nodeGroups": {group: patch}}});
    clusters(client, ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    Ok(Response::redirect(format!(
        "{BASE}/namespaces/{ns}/tenantclusters/{name}"
    )))
}

async fn delete(
    client: &kube::Client,
    user: &str,
    ns: &str,
    name: &str,
    form: &FormData,
) -> Result<Response, Refused> {
    if form.get("confirm").map(str::trim) != Some(name) {
        return Ok(Response::html(422, pages::confirm_delete(user, ns, name)));
    }
    clusters(client, ns)
        .delete(name, &DeleteParams::default())
        .await?;
    Ok(Response::redirect(format!(
        "{BASE}/namespaces/{ns}/tenantclusters"
    )))
}

async fn kubeconfig(
    client: &kube::Client,
    ns: &str,
    name: &str,
    which: &str,
) -> Result<Response, Refused> {
    let c = clusters(client, ns).get(name).await?;
    let (secret_name, key) = if which == OIDC_KUBECONFIG {
        (format!("kubernetes-{name}-oidc-kubeconfig"), "kubeconfig")
    } else {
        let Some((_, key)) = KUBECONFIGS.iter().find(|(k, _)| *k == which) else {
            return Err(Refused::new(
                404,
                format!("There is no {which} kubeconfig."),
            ));
        };
        let secret_name = c
            .data
            .pointer("/status/kubeconfigSecret")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                Refused::new(404, format!("The kubeconfigs of {name} are not ready yet."))
            })?
            .to_string();
        (secret_name, *key)
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret = secrets.get(&secret_name).await?;
    let data = secret
        .data
        .and_then(|d| d.get(key).cloned())
        .ok_or_else(|| Refused::new(404, format!("Secret {secret_name} has no key {key}.")))?;
    Ok(Response {
        content_type: "application/yaml",
        body: String::from_utf8_lossy(&data.0).into_owned(),
        download: Some(format!("{name}-{which}.kubeconfig")),
        ..Response::html(200, maud::html! {})
    })
}

/// The objects a watch has shown, by name: a re-list replaces them when it is complete.
#[derive(Default)]
struct Mirror {
    seen: std::collections::BTreeMap<String, Value>,
    listing: Option<std::collections::BTreeMap<String, Value>>,
}

impl Mirror {
    /// Applies a watch event; whether what is shown changed.
    fn apply(&mut self, ev: kube::runtime::watcher::Event<DynamicObject>) -> bool {
        use kube::runtime::watcher::Event;
        match ev {
            Event::Init => {
                self.listing = Some(Default::default());
                false
            }
            Event::InitApply(o) => {
                self.listing
                    .get_or_insert_with(Default::default)
                    .insert(o.metadata.name.clone().unwrap_or_default(), to_value(&o));
                false
            }
            Event::InitDone => {
                self.seen = self.listing.take().unwrap_or_default();
                true
            }
            Event::Apply(o) => {
                self.seen
                    .insert(o.metadata.name.clone().unwrap_or_default(), to_value(&o));
                true
            }
            Event::Delete(o) => {
                self.seen
                    .remove(&o.metadata.name.clone().unwrap_or_default());
                true
            }
        }
    }

    fn values(&self) -> Vec<Value> {
        self.seen.values().cloned().collect()
    }
}

/// One server-sent event: its name and its data, one `data:` line per line.
pub fn sse_event(name: &str, data: &str) -> String {
    let mut out = format!("event: {name}\n");
    for line in data.lines() {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    if data.is_empty() {
        out.push_str("data: \n");
    }
    out.push('\n');
    out
}

/// The rows of a namespace's cluster table, sent again whenever a TenantCluster there changes
/// (a watch as the user: what the user may not list is refused before the stream starts).
async fn live(client: &kube::Client, ns: &str) -> Result<Response, Refused> {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let api = clusters(client, ns);
    api.list(&ListParams::default().limit(1)).await?;
    let namespace = ns.to_string();
    let mut seen = Mirror::default();
    let changes = watcher(api, watcher::Config::default())
        .default_backoff()
        .filter_map(move |ev| {
            let changed = match ev {
                Ok(ev) => seen.apply(ev),
                Err(_) => false,
            };
            let out = changed.then(|| {
                let rows = seen.values();
                sse_event(
                    "rows",
                    &pages::cluster_rows(&namespace, &rows).into_string(),
                )
            });
            futures::future::ready(out)
        });
    Ok(live_response(changes.boxed()))
}

/// The console's OIDC redirect URI on the host the browser asked (`host[:port]`, checked).
fn redirect_uri(host: Option<&str>) -> Option<String> {
    let host = host?;
    let valid = !host.is_empty()
        && host.len() <= 261
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b));
    valid.then(|| format!("https://{host}{BASE}/oidc/callback"))
}

/// The Machines of TenantCluster `name` in `ns`.
async fn cluster_machines(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Result<Vec<Value>, Refused> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &machines());
    let lp = ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}=kubernetes-{name}"));
    Ok(api.list(&lp).await?.items.iter().map(to_value).collect())
}

/// The usage report of tenant namespace `ns` and its sub-tenants over `[start, end)`, asked as
/// the user: a dry-run create of a UsageReport, which admission answers without storing it.
async fn report(
    client: &kube::Client,
    ns: &str,
    start: Timestamp,
    end: Timestamp,
) -> Result<Value, Refused> {
    let ar = usage_reports();
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": ar.api_version,
        "kind": ar.kind,
        "metadata": {"generateName": "console-", "namespace": ns},
        "query": {
            "tenant": ns,
            "includeSubTenants": true,
            "startTimestamp": start.to_string(),
            "endTimestamp": end.to_string(),
        },
    }))
    .map_err(|e| Refused::new(400, e.to_string()))?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let pp = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let created = api.create(&pp, &obj).await?;
    Ok(created.data.get("report").cloned().unwrap_or(Value::Null))
}

/// The start of the hour `t` is in.
fn hour_of(t: Timestamp) -> Timestamp {
    let s = t.as_second();
    Timestamp::from_second(s - s.rem_euclid(3600)).unwrap_or(t)
}

/// A tenant's usage page: the last [`USAGE_HOURS`] hours in total and hour by hour (one dry-run
/// report per hour, asked together).
async fn usage(client: &kube::Client, user: &str, ns: &str) -> Result<Response, Refused> {
    let now = Timestamp::now();
    let first = hour_of(now) - SignedDuration::from_hours(USAGE_HOURS - 1);
    let whole = report(client, ns, first, now).await?;
    let hours: Vec<Timestamp> = (0..USAGE_HOURS)
        .map(|i| first + SignedDuration::from_hours(i))
        .collect();
    let asked = hours.iter().map(|h| {
        let end = (*h + SignedDuration::from_hours(1)).min(now);
        report(client, ns, *h, end.max(*h + SignedDuration::from_secs(1)))
    });
    let reports = futures::future::join_all(asked).await;
    let mut series = Vec::new();
    for (h, r) in hours.iter().zip(reports) {
        let total = r?.get("totalConsumptions").cloned().unwrap_or(Value::Null);
        let label = h.strftime("%H:00").to_string();
        series.push((label, total));
    }
    let period = format!(
        "from {} to {} (UTC)",
        first.strftime("%Y-%m-%d %H:%M"),
        now.strftime("%Y-%m-%d %H:%M")
    );
    Ok(Response::html(
        200,
        pages::usage_page(user, ns, &period, &whole, &series),
    ))
}

/// The status section of a cluster's detail page, sent again whenever the TenantCluster or
/// one of its Machines changes (watches as the user; a user who may not read the cluster is
/// refused before the stream starts, one who may not read Machines sees none).
async fn live_detail(client: &kube::Client, ns: &str, name: &str) -> Result<Response, Refused> {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    clusters(client, ns).get(name).await?;
    let kubeconfig = may(client, ns, "get", "secrets", "").await;
    let machine_api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &machines());
    // What the user may not watch is left out (a watch it may not make would only retry).
    let machines_readable = may(client, ns, "watch", "machines", "cluster.x-k8s.io").await;
    let event_api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<Event>(&()));
    let events_selector = format!("involvedObject.kind=TenantCluster,involvedObject.name={name}");
    let events_readable = may(client, ns, "watch", "events", "").await;
    enum Change {
        Cluster(Option<Value>),
        Machines(Box<watcher::Event<DynamicObject>>),
        Events(Box<watcher::Event<DynamicObject>>),
    }
    let cluster_changes = watcher(
        clusters(client, ns),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .default_backoff()
    .filter_map(|ev| {
        futures::future::ready(match ev {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                Some(Change::Cluster(Some(to_value(&o))))
            }
            Ok(watcher::Event::Delete(_)) => Some(Change::Cluster(None)),
            _ => None,
        })
    })
    .boxed();
    let machine_changes = if machines_readable {
        watcher(
            machine_api,
            watcher::Config::default().labels(&format!("{CLUSTER_NAME_LABEL}=kubernetes-{name}")),
        )
        .default_backoff()
        .filter_map(|ev| futures::future::ready(ev.ok().map(|e| Change::Machines(Box::new(e)))))
        .boxed()
    } else {
        futures::stream::pending().boxed()
    };
    let event_changes = if events_readable {
        watcher(
            event_api,
            watcher::Config::default().fields(&events_selector),
        )
        .default_backoff()
        .filter_map(|ev| futures::future::ready(ev.ok().map(|e| Change::Events(Box::new(e)))))
        .boxed()
    } else {
        futures::stream::pending().boxed()
    };
    let mut cluster: Option<Value> = None;
    let mut machines = Mirror::default();
    let mut events = Mirror::default();
    let changes = futures::stream::select(
        futures::stream::select(cluster_changes, machine_changes),
        event_changes,
    )
    .filter_map(move |change| {
        let changed = match change {
            Change::Cluster(c) => {
                cluster = c;
                true
            }
            Change::Machines(ev) => machines.apply(*ev),
            Change::Events(ev) => events.apply(*ev),
        };
        let out = match (&cluster, changed) {
            (Some(c), true) => {
                let html =
                    pages::cluster_status(c, &machines.values(), &events.values(), kubeconfig);
                Some(sse_event("status", &html.into_string()))
            }
            _ => None,
        };
        futures::future::ready(out)
    });
    Ok(live_response(changes.boxed()))
}

/// A stream of events with a heartbeat, as a response.
fn live_response(changes: futures::stream::BoxStream<'static, String>) -> Response {
    use futures::StreamExt;
    let heartbeat = futures::stream::unfold((), |()| async {
        tokio::time::sleep(HEARTBEAT).await;
        Some((": still here\n\n".to_string(), ()))
    });
    let stream = futures::stream::select(changes, heartbeat).boxed();
    Response {
        content_type: "text/event-stream",
        live: Some(Live(stream)),
        ..Response::html(200, maud::html! {})
    }
}

fn home(user: &str) -> maud::Markup {
    let content = maud::html! {
        p { "Open the tenant clusters of a tenant namespace:" }
        form method="post" action={(BASE) "/go"} {
            div.field {
                label for="namespace" { "Tenant namespace" }
                input type="text" id="namespace" name="namespace" required placeholder="tenant-root";
            }
            button type="submit" { "Open" }
        }
    };
    pages::layout("Tenant clusters", Some(user), content)
}

fn error(user: Option<&str>, e: Refused) -> Response {
    let code = if e.code == 0 { 500 } else { e.code };
    Response::html(code, pages::error_page(user, code, &e.message))
}
