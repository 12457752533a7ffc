//! Clients for a logical cluster over an in-process transport.
//!
//! Matryoshka serves logical cluster `<name>` under the path prefix `/clusters/<name>` (the
//! root cluster at `/`). Over HTTPS the kubeconfig's server URL already carries the prefix;
//! in process, [`ClusterPrefix`] rewrites every request path before it reaches the in-memory
//! service, and [`cluster_client`] builds a `kube::Client` on top. The layer is generic over
//! the inner service so this crate needs nothing of the API server.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};

/// The name of the root (management) cluster, served without a prefix.
pub const ROOT_CLUSTER: &str = "root";

/// The path prefix of `cluster` (empty for the root cluster).
pub fn cluster_prefix(cluster: &str) -> String {
    if cluster == ROOT_CLUSTER || cluster.is_empty() {
        String::new()
    } else {
        format!("/clusters/{cluster}")
    }
}

/// A tower layer that puts `/clusters/<name>` in front of every request path.
#[derive(Debug, Clone)]
pub struct ClusterPrefix {
    prefix: Arc<str>,
}

impl ClusterPrefix {
    pub fn new(cluster: &str) -> Self {
        ClusterPrefix {
            prefix: cluster_prefix(cluster).into(),
        }
    }
}

impl<S> tower::Layer<S> for ClusterPrefix {
    type Service = Prefixed<S>;
    fn layer(&self, inner: S) -> Prefixed<S> {
        Prefixed {
            prefix: self.prefix.clone(),
            inner,
        }
    }
}

/// The service [`ClusterPrefix`] makes.
#[derive(Debug, Clone)]
pub struct Prefixed<S> {
    prefix: Arc<str>,
    inner: S,
}

/// `uri` with `prefix` before its path; the query is kept.
fn prefixed(prefix: &str, uri: &http::Uri) -> Result<http::Uri, http::Error> {
    if prefix.is_empty() {
        return Ok(uri.clone());
    }
    let pq = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(format!("{prefix}{pq}").parse()?);
    Ok(http::Uri::from_parts(parts)?)
}

impl<S, B> tower::Service<Request<B>> for Prefixed<S>
where
    S: tower::Service<Request<B>>,
    S::Error: Into<tower::BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, tower::BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let (mut parts, body) = req.into_parts();
        match prefixed(&self.prefix, &parts.uri) {
            Ok(uri) => {
                parts.uri = uri;
                let fut = self.inner.call(Request::from_parts(parts, body));
                Box::pin(async move { fut.await.map_err(Into::into) })
            }
            Err(e) => Box::pin(async move { Err(e.into()) }),
        }
    }
}

/// A client of logical cluster `cluster` over an in-process service (for Matryoshka, the API
/// server's `LocalService`).
pub fn cluster_client<S, B>(service: S, cluster: &str) -> kube::Client
where
    S: tower::Service<Request<kube::client::Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<tower::BoxError>,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<tower::BoxError>,
{
    let svc = tower::ServiceBuilder::new()
        .layer(ClusterPrefix::new(cluster))
        .service(service);
    kube::Client::new(svc, "default")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logical_cluster_prefixes_the_path_and_keeps_the_query() {
        let uri: http::Uri = "/api/v1/pods?fieldSelector=spec.nodeName%21%3D"
            .parse()
            .expect("uri");
        let out = prefixed(&cluster_prefix("t1"), &uri).expect("prefixed");
        assert_eq!(
            out.to_string(),
            "/clusters/t1/api/v1/pods?fieldSelector=spec.nodeName%21%3D"
        );
    }

    #[test]
    fn the_root_cluster_has_no_prefix() {
        assert_eq!(cluster_prefix(ROOT_CLUSTER), "");
        let uri: http::Uri = "https://h:6443/version".parse().expect("uri");
        assert_eq!(prefixed("", &uri).expect("same"), uri);
    }
}
