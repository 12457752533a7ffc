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
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::form::{self, Errors, FormData};
use crate::pages::{self, Allowed, BASE};

/// The resource the console manages.
pub fn tenant_clusters() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("platform.matryoshka.dev", "v1alpha1", "TenantCluster"),
        "tenantclusters",
    )
}

/// The platform's tenants.
pub fn tenants() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("platform.matryoshka.dev", "v1alpha1", "Tenant"),
        "tenants",
    )
}

/// The kubeconfigs offered for download: the key of each in the cluster's kubeconfig Secret.
pub const KUBECONFIGS: [(&str, &str); 2] =
    [("admin", "admin.conf"), ("super-admin", "super-admin.conf")];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
}

/// A request to the console.
pub struct Request {
    pub method: Method,
    /// The path under [`BASE`] included (`/console/namespaces/tenant-foo/tenantclusters`).
    pub path: String,
    /// The session's bearer token (from the console's cookie).
    pub token: Option<String>,
    /// The submitted form of a POST.
    pub form: FormData,
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
    SignOut,
    List(&'a str),
    New(&'a str),
    Detail(&'a str, &'a str),
    Edit(&'a str, &'a str),
    Scale(&'a str, &'a str),
    Delete(&'a str, &'a str),
    Kubeconfig(&'a str, &'a str, &'a str),
    Live(&'a str),
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
        ["sign-in"] => Route::SignIn,
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
    pub fn new(clients: Clients, spec_schema: Value) -> Console {
        Console {
            clients,
            spec_schema,
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
            (Route::SignIn, Method::Get) => return Response::html(200, pages::sign_in(None, None)),
            (Route::SignIn, Method::Post) => return self.sign_in(&req.form).await,
            (Route::SignOut, Method::Post) => {
                return Response {
                    session: Some(None),
                    ..Response::redirect(format!("{BASE}/sign-in"))
                };
            }
            _ => {}
        }
        let Some(token) = req.token.as_deref() else {
            return Response::redirect(format!("{BASE}/sign-in"));
        };
        let client = (self.clients)(token);
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
            (Route::Live(ns), Method::Get) => live(&client, ns).await,
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
                Response::html(200, pages::tenant_tree(user, &values))
            }
            Err(_) => Response::html(200, home(user)),
        }
    }

    async fn sign_in(&self, form: &FormData) -> Response {
        let token = form.get("token").map(str::trim).unwrap_or_default();
        if token.is_empty() {
            return Response::html(400, pages::sign_in(Some("Paste a token to sign in."), None));
        }
        match whoami(&(self.clients)(token)).await {
            Ok(_) => Response {
                session: Some(Some(token.to_string())),
                ..Response::redirect(format!("{BASE}/"))
            },
            Err(e) if e.code == 401 => Response::html(
                401,
                pages::sign_in(Some("The API server did not accept this token."), None),
            ),
            Err(e) => Response::html(e.code, pages::sign_in(Some(&e.message), None)),
        }
    }

    async fn list(&self, client: &kube::Client, user: &str, ns: &str) -> Result<Response, Refused> {
        let items = clusters(client, ns)
            .list(&ListParams::default())
            .await?
            .items;
        let values: Vec<Value> = items.iter().map(to_value).collect();
        let allowed = Allowed {
            create: may(
                client,
                ns,
                "create",
                "tenantclusters",
                "platform.matryoshka.dev",
            )
            .await,
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
        let group = "platform.matryoshka.dev";
        let allowed = Allowed {
            create: false,
            update: may(client, ns, "update", "tenantclusters", group).await,
            delete: may(client, ns, "delete", "tenantclusters", group).await,
            kubeconfig: may(client, ns, "get", "secrets", "").await,
        };
        let kinds: Vec<&str> = if value.pointer("/status/kubeconfigSecret").is_some() {
            KUBECONFIGS.iter().map(|(k, _)| *k).collect()
        } else {
            Vec::new()
        };
        Ok(Response::html(
            200,
            pages::cluster_detail(user, &value, &events, allowed, &kinds),
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
        let (spec, errors) = form::read(&self.spec_schema, "spec", &Value::Null, form);
        if !errors.is_empty() || form.reshapes() {
            return Ok(self.form_page(user, ns, None, &spec, &errors, Some(form)));
        }
        let name = form
            .get("metadata.name")
            .unwrap_or_default()
            .trim()
            .to_string();
        let ar = tenant_clusters();
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": ar.api_version,
            "kind": ar.kind,
            "metadata": {"name": name, "namespace": ns},
            "spec": spec,
        }))
        .map_err(|e| Refused::new(400, e.to_string()))?;
        match clusters(client, ns)
            .create(&PostParams::default(), &obj)
            .await
        {
            Ok(_) => Ok(Response::redirect(format!(
                "{BASE}/namespaces/{ns}/tenantclusters/{name}"
            ))),
            Err(e) => {
                let r = Refused::from(e);
                match self.form_errors(&r) {
                    Some(errors) => Ok(self.form_page(user, ns, None, &spec, &errors, Some(form))),
                    None => Err(r),
                }
            }
        }
    }

    /// The field errors of a refusal the form shows again (a bad request, an invalid object,
    /// a conflict); any other refusal is a page of its own.
    fn form_errors(&self, r: &Refused) -> Option<Errors> {
        if !matches!(r.code, 400 | 409 | 422) {
            return None;
        }
        let errors = form::normalize(&self.spec_schema, "spec", form::status_errors(&r.status));
        Some(if errors.is_empty() {
            message_error(&r.message)
        } else {
            errors
        })
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
    if current
        .data
        .pointer("/spec/nodeGroups")
        .and_then(|g| g.get(group))
        .is_none()
    {
        return Err(Refused::new(
            422,
            format!(
                "spec.nodeGroups[{group}]: Not found: \"{group}\": {name} has no such node group"
            ),
        ));
    }
    let mut patch = json!({});
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
    let Some((_, key)) = KUBECONFIGS.iter().find(|(k, _)| *k == which) else {
        return Err(Refused::new(
            404,
            format!("There is no {which} kubeconfig."),
        ));
    };
    let c = clusters(client, ns).get(name).await?;
    let secret_name = c
        .data
        .pointer("/status/kubeconfigSecret")
        .and_then(Value::as_str)
        .ok_or_else(|| Refused::new(404, format!("The kubeconfigs of {name} are not ready yet.")))?
        .to_string();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret = secrets.get(&secret_name).await?;
    let data = secret
        .data
        .and_then(|d| d.get(*key).cloned())
        .ok_or_else(|| Refused::new(404, format!("Secret {secret_name} has no key {key}.")))?;
    Ok(Response {
        status: 200,
        content_type: "application/yaml",
        body: String::from_utf8_lossy(&data.0).into_owned(),
        location: None,
        session: None,
        download: Some(format!("{name}-{which}.kubeconfig")),
        live: None,
    })
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
    let mut seen: std::collections::BTreeMap<String, Value> = Default::default();
    let mut listing: Option<std::collections::BTreeMap<String, Value>> = None;
    let changes = watcher(api, watcher::Config::default())
        .default_backoff()
        .filter_map(move |ev| {
            let changed = match ev {
                Ok(watcher::Event::Init) => {
                    listing = Some(Default::default());
                    false
                }
                Ok(watcher::Event::InitApply(o)) => {
                    let v = to_value(&o);
                    listing
                        .get_or_insert_with(Default::default)
                        .insert(o.metadata.name.clone().unwrap_or_default(), v);
                    false
                }
                Ok(watcher::Event::InitDone) => {
                    seen = listing.take().unwrap_or_default();
                    true
                }
                Ok(watcher::Event::Apply(o)) => {
                    let v = to_value(&o);
                    seen.insert(o.metadata.name.clone().unwrap_or_default(), v);
                    true
                }
                Ok(watcher::Event::Delete(o)) => {
                    seen.remove(&o.metadata.name.clone().unwrap_or_default());
                    true
                }
                Err(_) => false,
            };
            let out = changed.then(|| {
                let rows: Vec<Value> = seen.values().cloned().collect();
                sse_event(
                    "rows",
                    &pages::cluster_rows(&namespace, &rows).into_string(),
                )
            });
            futures::future::ready(out)
        });
    let heartbeat = futures::stream::unfold((), |()| async {
        tokio::time::sleep(HEARTBEAT).await;
        Some((": still here\n\n".to_string(), ()))
    });
    let stream = futures::stream::select(changes, heartbeat).boxed();
    Ok(Response {
        content_type: "text/event-stream",
        live: Some(Live(stream)),
        ..Response::html(200, maud::html! {})
    })
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
