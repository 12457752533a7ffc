//! `/console/`: the web console on the API server's own port. The console itself (pages,
//! forms, its calls to the API as the signed-in user) is the `console` crate, handed in by
//! `matryoshka up` as a [`WebApp`]; this is its HTTP side: the session cookie, the form body
//! (bounded), redirects, downloads and the headers that keep the pages safe in a browser.
//!
//! The session is the user's bearer token in a cookie only this path receives: `HttpOnly`
//! (no script reads it), `Secure`, `SameSite=Strict` (a request started by another site
//! carries no session, so no form can be posted on the user's behalf). Pages are never cached
//! and may not be framed; their only scripts and styles are the console's own.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};

use crate::response::{self, Body};
use crate::server::{ApiServer, Caller};

/// Where the console is served.
pub const PREFIX: &str = "/console";

/// The session cookie's name.
pub const COOKIE: &str = "matryoshka-console";

/// The cookie of an OIDC sign-in in progress (its state, PKCE verifier and nonce). `Lax`, as
/// it must come back with the provider's redirect; it lives ten minutes.
pub const LOGIN_COOKIE: &str = "matryoshka-console-login";

/// Form bodies larger than this are refused (a TenantCluster form is a few kilobytes).
const MAX_FORM: usize = 256 * 1024;

/// A request as the console takes it.
#[derive(Debug)]
pub struct WebRequest {
    pub post: bool,
    pub path: String,
    /// The session's token, from the cookie.
    pub token: Option<String>,
    /// The urlencoded form of a POST.
    pub form: Bytes,
    /// The URL's query (urlencoded, without `?`).
    pub query: String,
    /// The `Host` the browser asked (for the OIDC redirect URI).
    pub host: Option<String>,
    /// The OIDC sign-in in progress, from [`LOGIN_COOKIE`].
    pub login: Option<String>,
    /// The client certificate chain the browser presented, if any.
    pub certificate: Option<Arc<crate::authn::PeerCerts>>,
}

/// A stream of server-sent events, each framed.
pub type Events = Pin<Box<dyn futures::Stream<Item = String> + Send>>;

/// The console's answer.
#[derive(Default)]
pub struct WebResponse {
    pub status: u16,
    pub content_type: String,
    pub body: String,
    pub location: Option<String>,
    /// `Some(Some(token))`: start a session; `Some(None)`: end it.
    pub session: Option<Option<String>>,
    /// `Some(Some(value))`: remember an OIDC sign-in; `Some(None)`: forget it.
    pub login: Option<Option<String>>,
    pub download: Option<String>,
    /// A `text/event-stream` body that goes on until the client leaves or the server stops.
    pub live: Option<Events>,
}

impl std::fmt::Debug for WebResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebResponse")
            .field("status", &self.status)
            .field("location", &self.location)
            .field("live", &self.live.is_some())
            .finish_non_exhaustive()
    }
}

/// The console, as the API server calls it.
pub type WebApp =
    Arc<dyn Fn(WebRequest) -> Pin<Box<dyn Future<Output = WebResponse> + Send>> + Send + Sync>;

/// Whether a request path is the console's.
pub fn handles(path: &str) -> bool {
    path == PREFIX || path.starts_with("/console/")
}

/// The session token in a `Cookie` header.
fn session(headers: &http::HeaderMap) -> Option<String> {
    cookie(headers, COOKIE)
}

/// The value of cookie `name`.
fn cookie(headers: &http::HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
        .filter(|v| !v.is_empty())
}

/// Serves one console request.
pub async fn serve<B>(server: &ApiServer, req: Request<B>, caller: &Caller) -> Response<Body>
where
    B: hyper::body::Body + Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let Some(app) = server.web.get().cloned() else {
        return response::bytes(
            StatusCode::NOT_FOUND,
            "text/plain",
            "the console is not served here\n",
        );
    };
    let post = req.method() == http::Method::POST;
    if !post && req.method() != http::Method::GET {
        return response::bytes(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "GET or POST\n",
        );
    }
    let path = req.uri().path().to_string();
    let token = session(req.headers());
    let login = cookie(req.headers(), LOGIN_COOKIE);
    let query = req.uri().query().unwrap_or_default().to_string();
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()));
    let form = if post {
        use http_body_util::{BodyExt, Limited};
        match Limited::new(req.into_body(), MAX_FORM).collect().await {
            Ok(c) => c.to_bytes(),
            Err(_) => {
                return response::bytes(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "text/plain",
                    "the form is too large\n",
                );
            }
        }
    } else {
        Bytes::new()
    };
    let path = if path == PREFIX {
        format!("{PREFIX}/")
    } else {
        path
    };
    let mut out = app(WebRequest {
        post,
        path,
        token,
        form,
        query,
        host,
        login,
        certificate: match caller {
            Caller::Tls(chain) => chain.clone(),
            Caller::Internal(_) => None,
        },
    })
    .await;
    if let Some(events) = out.live.take() {
        // The stream ends when the server shuts down, so draining never waits on it.
        let mut shutdown = server.shutdown.subscribe();
        let until = async move {
            let _ = shutdown.wait_for(|down| *down).await;
        };
        out.live = Some(Box::pin(futures::StreamExt::take_until(
            events,
            Box::pin(until),
        )));
    }
    to_http(out)
}

fn to_http(mut out: WebResponse) -> Response<Body> {
    use http_body_util::BodyExt;
    let status = StatusCode::from_u16(out.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = match out.live.take() {
        Some(events) => {
            let frames = futures::StreamExt::map(events, |e| {
                Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(Bytes::from(e)))
            });
            http_body_util::StreamBody::new(frames).boxed_unsync()
        }
        None => response::full(out.body),
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&out.content_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        ),
    );
    if let Some(to) = out.location.and_then(|l| HeaderValue::from_str(&l).ok()) {
        h.insert(header::LOCATION, to);
    }
    if let Some(name) = out.download {
        // Names are the console's own (`<cluster>-admin.kubeconfig`): no quoting needed
        // beyond refusing a quote.
        let name = name.replace('"', "");
        if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
            h.insert(header::CONTENT_DISPOSITION, v);
        }
    }
    let cookies = [
        out.session.map(|s| match s {
            Some(token) => {
                format!("{COOKIE}={token}; Path={PREFIX}; HttpOnly; Secure; SameSite=Strict")
            }
            None => {
                format!("{COOKIE}=; Path={PREFIX}; Max-Age=0; HttpOnly; Secure; SameSite=Strict")
            }
        }),
        out.login.map(|l| match l {
            Some(v) => format!(
                "{LOGIN_COOKIE}={v}; Path={PREFIX}; Max-Age=600; HttpOnly; Secure; SameSite=Lax"
            ),
            None => {
                format!("{LOGIN_COOKIE}=; Path={PREFIX}; Max-Age=0; HttpOnly; Secure; SameSite=Lax")
            }
        }),
    ];
    for c in cookies.into_iter().flatten() {
        if let Ok(v) = HeaderValue::from_str(&c) {
            h.append(header::SET_COOKIE, v);
        }
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_is_read_from_its_own_cookie_only() {
        let mut h = http::HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; matryoshka-console=tok.en; b=2"),
        );
        assert_eq!(session(&h).as_deref(), Some("tok.en"));
        let mut other = http::HeaderMap::new();
        other.append(
            header::COOKIE,
            HeaderValue::from_static("matryoshka-consolex=1"),
        );
        assert_eq!(session(&other), None);
        let mut empty = http::HeaderMap::new();
        empty.append(
            header::COOKIE,
            HeaderValue::from_static("matryoshka-console="),
        );
        assert_eq!(session(&empty), None);
    }

    #[test]
    fn a_session_cookie_is_http_only_secure_strict_and_pages_are_not_cached_or_framed() {
        let resp = to_http(WebResponse {
            status: 303,
            content_type: "text/plain".into(),
            location: Some("/console/".into()),
            session: Some(Some("t".into())),
            ..Default::default()
        });
        let h = resp.headers();
        assert_eq!(
            h[header::SET_COOKIE],
            "matryoshka-console=t; Path=/console; HttpOnly; Secure; SameSite=Strict"
        );
        assert_eq!(h[header::LOCATION], "/console/");
        assert_eq!(h[header::CACHE_CONTROL], "no-store");
        assert!(
            h[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap()
                .contains("frame-ancestors 'none'")
        );
        let out = to_http(WebResponse {
            status: 303,
            session: Some(None),
            ..Default::default()
        });
        assert!(
            out.headers()[header::SET_COOKIE]
                .to_str()
                .unwrap()
                .contains("Max-Age=0")
        );
        let file = to_http(WebResponse {
            status: 200,
            download: Some("dev-admin.kubeconfig".into()),
            ..Default::default()
        });
        assert_eq!(
            file.headers()[header::CONTENT_DISPOSITION],
            "attachment; filename=\"dev-admin.kubeconfig\""
        );
    }

    #[test]
    fn an_oidc_sign_in_is_remembered_in_a_lax_cookie_of_its_own_beside_the_session() {
        let done = to_http(WebResponse {
            status: 200,
            session: Some(Some("id.token.x".into())),
            login: Some(None),
            ..Default::default()
        });
        let set: Vec<&str> = done
            .headers()
            .get_all(header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(set.len(), 2, "{set:?}");
        assert!(set[0].starts_with("matryoshka-console=id.token.x;"));
        assert!(set[1].starts_with("matryoshka-console-login=;") && set[1].contains("Max-Age=0"));
        let start = to_http(WebResponse {
            status: 303,
            login: Some(Some("s.v.n".into())),
            ..Default::default()
        });
        assert_eq!(
            start.headers()[header::SET_COOKIE],
            "matryoshka-console-login=s.v.n; Path=/console; Max-Age=600; HttpOnly; Secure; SameSite=Lax"
        );
        let mut h = http::HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("matryoshka-console=t; matryoshka-console-login=s.v.n"),
        );
        assert_eq!(session(&h).as_deref(), Some("t"));
        assert_eq!(cookie(&h, LOGIN_COOKIE).as_deref(), Some("s.v.n"));
    }
}
