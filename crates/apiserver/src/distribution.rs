//! `/v2/`: the platform's OCI registry on the API server's own HTTPS port. A thin handler:
//! it routes with `oci`, authenticates and authorises, streams the request body into the
//! store and the blob back out (no upload is ever held in memory), and copies `oci`'s plain
//! response onto the wire.
//!
//! Why the main port: nodes already trust the platform's CA and reach this address (it is in
//! their kubeconfig), so the registry needs no second certificate, listener or trust set-up.
//!
//! Access, in the root cluster:
//! - **pull is anonymous** (manifests, blobs, tags, the catalog): the registry is the mirror
//!   of every public registry for containerd, which pulls without credentials;
//! - **push** needs `create` and **delete** needs `delete` on the cluster-scoped resource
//!   `repositories.registry.matryoshka.dev`, the repository being the resource name
//!   (`docker.io/library/busybox`) — so `system:masters` and `cluster-admin` may, and a
//!   ClusterRole can grant one repository. Credentials are the API's own: a client
//!   certificate of the root cluster's CA, a bearer token, or HTTP Basic whose password is a
//!   bearer token (what `docker login`-style clients send; the user name is ignored).
//! - `GET /v2/` without credentials answers 401 with a Basic challenge, which is how
//!   registry clients learn to send their credentials at all; with none they send an empty
//!   Basic pair, which counts as anonymous.

use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use oci::api::{Action, Body as OciBody, Endpoint};
use oci::{Error, ErrorCode};
use tokio::io::AsyncReadExt;

use crate::auth::{UserExt, UserInfo};
use crate::response::{self, Body};
use crate::server::{ApiServer, Caller};

/// The API group of the resource push and delete are authorised against.
pub const GROUP: &str = "registry.matryoshka.dev";
/// The resource push and delete are authorised against (named by the repository).
pub const RESOURCE: &str = "repositories";

const CHALLENGE: &str = "Basic realm=\"matryoshka\"";

/// Whether a request path is the registry's.
pub fn handles(path: &str) -> bool {
    path == "/v2" || path.starts_with("/v2/")
}

fn headers_all(h: &http::HeaderMap, name: header::HeaderName) -> Vec<String> {
    h.get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok().map(String::from))
        .collect()
}

fn header_str(h: &http::HeaderMap, name: header::HeaderName) -> Option<String> {
    h.get(name).and_then(|v| v.to_str().ok()).map(String::from)
}

/// The `Authorization` header as the authenticator takes it: HTTP Basic becomes the bearer
/// token its password is; an empty Basic pair is no credential.
fn bearer(authorization: Option<&str>) -> Option<String> {
    let a = authorization?.trim();
    let Some(b64) = a
        .strip_prefix("Basic ")
        .or_else(|| a.strip_prefix("basic "))
    else {
        return Some(a.to_string());
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()
        .and_then(|d| String::from_utf8(d).ok());
    match decoded.as_deref().and_then(|d| d.split_once(':')) {
        Some((_, "")) => None,
        Some((_, password)) => Some(format!("Bearer {password}")),
        // Malformed: let the authenticator refuse it.
        None => Some(a.to_string()),
    }
}

fn to_http(r: oci::Response) -> Response<Body> {
    let body = match r.body {
        OciBody::Empty => response::empty(),
        OciBody::Bytes(b) => response::full(b),
        OciBody::File { file, len } => {
            let reader = file.take(len);
            let s = futures::stream::unfold(Some(reader), |state| async move {
                let mut reader = state?;
                let mut buf = vec![0u8; 256 * 1024];
                match reader.read(&mut buf).await {
                    Ok(0) => None,
                    Ok(n) => {
                        buf.truncate(n);
                        Some((
                            Ok::<_, std::convert::Infallible>(http_body::Frame::data(Bytes::from(
                                buf,
                            ))),
                            Some(reader),
                        ))
                    }
                    Err(e) => {
                        // The client sees a short body (its length was announced).
                        tracing::warn!(error = %e, "reading a blob failed mid-response");
                        None
                    }
                }
            });
            StreamBody::new(s).boxed_unsync()
        }
    };
    let mut out = Response::new(body);
    *out.status_mut() = StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in r.headers {
        if let Ok(v) = HeaderValue::from_str(&value) {
            out.headers_mut().append(name, v);
        }
    }
    if r.status == 401 {
        out.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(CHALLENGE),
        );
    }
    out
}

fn refuse(code: ErrorCode, detail: impl Into<String>) -> Response<Body> {
    to_http(oci::Response::error(&Error::new(code, detail)))
}

/// Who the caller is in the root cluster, or the registry's 401.
async fn authenticate(
    server: &ApiServer,
    caller: &Caller,
    headers: &http::HeaderMap,
) -> Result<UserInfo, Response<Body>> {
    match caller {
        Caller::Internal(u) => Ok(u.clone()),
        Caller::Tls(chain) => {
            let auth = bearer(
                headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok()),
            );
            server
                .authn
                .authenticate(
                    server.control_plane(),
                    apimachinery::cluster::ROOT,
                    chain.as_deref(),
                    auth.as_deref(),
                )
                .await
                .map_err(|e| refuse(ErrorCode::Unauthorized, e.message))
        }
    }
}

/// Serves one `/v2/` request with its body still streaming.
pub async fn serve<B>(server: &Arc<ApiServer>, req: Request<B>, caller: &Caller) -> Response<Body>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let Some(registry) = server.oci.get().cloned() else {
        return response::error(&apimachinery::status::ApiError::no_route());
    };
    let (parts, body) = req.into_parts();
    let mut oreq =
        match oci::Request::route(parts.method.as_str(), parts.uri.path(), parts.uri.query()) {
            Ok(r) => r,
            Err(e) => return to_http(oci::Response::error(&e)),
        };
    let h = &parts.headers;
    oreq.accept = headers_all(h, header::ACCEPT);
    oreq.content_type = header_str(h, header::CONTENT_TYPE);
    oreq.content_length = header_str(h, header::CONTENT_LENGTH).and_then(|l| l.parse().ok());
    oreq.content_range = header_str(h, header::CONTENT_RANGE);
    oreq.range = header_str(h, header::RANGE);

    let user = match authenticate(server, caller, h).await {
        Ok(u) => u,
        Err(r) => return r,
    };
    let verb = match oreq.action() {
        Action::Pull if oreq.endpoint == Endpoint::Base && user.is_anonymous() => {
            return refuse(
                ErrorCode::Unauthorized,
                "send credentials to push; pulls are anonymous",
            );
        }
        Action::Pull => None,
        Action::Push => Some("create"),
        Action::Delete => Some("delete"),
    };
    if let Some(verb) = verb {
        if user.is_anonymous() {
            return refuse(
                ErrorCode::Unauthorized,
                format!("{verb} in {} needs credentials", oreq.repository),
            );
        }
        let attrs =
            crate::authz::Attributes::resource(verb, GROUP, RESOURCE, "").named(&oreq.repository);
        if let Err(e) = crate::authz::check(
            server.control_plane(),
            apimachinery::cluster::ROOT,
            &user,
            &attrs,
        ) {
            return refuse(ErrorCode::Denied, e.message);
        }
    }
    let stream = body
        .into_data_stream()
        .map(|r| r.map_err(|e| std::io::Error::other(e.into())));
    let resp = registry.serve(&oreq, Box::pin(stream)).await;
    tracing::debug!(
        method = %parts.method,
        path = parts.uri.path(),
        user = %user.name,
        status = resp.status,
        "registry request"
    );
    to_http(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_carry_a_bearer_token_in_the_password() {
        let b = |s: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(s)
            )
        };
        assert_eq!(bearer(Some(&b("me:tok3n"))), Some("Bearer tok3n".into()));
        assert_eq!(bearer(Some(&b(":"))), None);
        assert_eq!(bearer(Some(&b("user:"))), None);
        assert_eq!(bearer(Some("Bearer abc")), Some("Bearer abc".into()));
        assert_eq!(bearer(None), None);
        assert_eq!(bearer(Some("Basic !!!")), Some("Basic !!!".into()));
    }

    #[test]
    fn only_v2_paths_are_the_registrys() {
        assert!(handles("/v2/"));
        assert!(handles("/v2"));
        assert!(handles("/v2/library/busybox/manifests/1"));
        assert!(!handles("/v2beta1"));
        assert!(!handles("/api/v1"));
    }
}
