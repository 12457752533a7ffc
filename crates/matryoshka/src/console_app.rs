//! The web console in `matryoshka up`: the `console` crate's requests, with the API server's
//! HTTP side (`apiserver::web`) in front and the API server itself behind. The console calls
//! the API in process, but as a network client would: with the signed-in user's bearer token,
//! authenticated and authorised like any other request.

use std::sync::Arc;

use apiserver::local::LocalService;
use apiserver::server::ApiServer;
use apiserver::web::{WebApp, WebRequest, WebResponse};
use console::app::{Console, Method, Request};
use console::form::FormData;
use http::{HeaderValue, header};

/// A client of the root cluster that sends `token`.
fn client_with_token(server: &Arc<ApiServer>, token: &str) -> kube::Client {
    // A token that is no header value authenticates nobody: the request goes without one.
    let value = HeaderValue::from_str(&format!("Bearer {token}")).ok();
    let svc = tower::ServiceBuilder::new()
        .map_request(move |mut req: http::Request<kube::client::Body>| {
            if let Some(v) = &value {
                req.headers_mut().insert(header::AUTHORIZATION, v.clone());
            }
            req
        })
        .service(LocalService::authenticating(server.clone()));
    kube::Client::new(svc, "default")
}

/// The console as the API server serves it; `oidc` offers signing in through that provider.
pub fn app(server: Arc<ApiServer>, oidc: Option<console::oidc::OidcLogin>) -> WebApp {
    let schema = platform::crds::tenant_cluster_crd()
        .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec")
        .cloned()
        .unwrap_or_default();
    let tenant_schema = platform::crds::tenant_crd()
        .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec")
        .cloned()
        .unwrap_or_default();
    let clients_of = server.clone();
    let mut console = Console::new(
        Arc::new(move |token: &str| client_with_token(&clients_of, token)),
        schema,
        tenant_schema,
    );
    if let Some(oidc) = oidc {
        console = console.with_oidc(oidc);
    }
    let console = Arc::new(console);
    Arc::new(move |req: WebRequest| {
        let console = console.clone();
        let server = server.clone();
        Box::pin(async move {
            let r = console
                .handle(Request {
                    method: if req.post { Method::Post } else { Method::Get },
                    path: req.path,
                    token: req.token,
                    form: FormData::from_urlencoded(&req.form),
                    query: FormData::from_urlencoded(req.query.as_bytes()),
                    host: req.host,
                    login: req.login,
                    certificate: req.certificate.map(|chain| {
                        let svc = LocalService::authenticating_peer(server.clone(), chain);
                        kube::Client::new(svc, "default")
                    }),
                })
                .await;
            WebResponse {
                status: r.status,
                content_type: r.content_type.to_string(),
                body: r.body,
                location: r.location,
                session: r.session,
                login: r.login,
                download: r.download,
                live: r.live.map(|l| l.0),
            }
        })
    })
}
