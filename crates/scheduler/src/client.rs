//! Kubernetes clients for one logical cluster or for all of them.
//!
//! A logical cluster is the path prefix `/clusters/<name>` (none for the root cluster); the
//! system identity lists and watches every cluster at once under `/clusters/*`. A
//! [`ClientFactory`] makes a `kube::Client` for either; [`InMemory`] does it over the API
//! server's in-memory transport with a [`ClusterPrefix`] tower layer rewriting request paths.
//!
//! This is the same shape as the controller runtime's client module (`client(cluster)`,
//! `all_clusters()`), kept small and local until that runtime is on main; swapping means
//! replacing this module's import. Every `kube::Client` owns a buffer task, so [`Clients`]
//! keeps a bounded number of per-cluster clients: tasks stay independent of how many clusters
//! exist.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use apiserver::ApiServer;
use apiserver::local::LocalService;
use http::Request;
use parking_lot::Mutex;

use crate::error::{Error, Result};

/// The root (management) cluster's name.
pub const ROOT: &str = apiserver::route::ROOT_CLUSTER;

/// The annotation naming an object's cluster in cross-cluster responses.
pub const CLUSTER_ANNOTATION: &str = apiserver::route::CLUSTER_ANNOTATION;

/// The path prefix addressing every cluster at once (system identity, list and watch only).
pub const ALL_CLUSTERS_PREFIX: &str = "/clusters/*";

/// How many per-cluster clients are kept (each holds one buffer task).
pub const CLIENT_CACHE: usize = 32;

/// The path prefix of a cluster: empty for the root cluster.
pub fn cluster_prefix(cluster: &str) -> String {
    if cluster == ROOT {
        String::new()
    } else {
        format!("/clusters/{cluster}")
    }
}

/// Makes clients for clusters.
pub trait ClientFactory: Send + Sync + 'static {
    /// A client addressing `cluster` ([`ROOT`] for the root cluster).
    fn client(&self, cluster: &str) -> Result<kube::Client>;
    /// A client for cross-cluster list and watch.
    fn all_clusters(&self) -> Result<kube::Client>;
}

/// Clients over the API server's in-memory transport, acting as the system identity.
pub struct InMemory {
    server: Arc<ApiServer>,
}

impl InMemory {
    pub fn new(server: Arc<ApiServer>) -> Self {
        InMemory { server }
    }

    fn with(&self, layer: ClusterPrefix) -> kube::Client {
        let svc = tower::ServiceBuilder::new()
            .layer(layer)
            .service(LocalService::system(self.server.clone()));
        kube::Client::new(svc, "default")
    }
}

impl ClientFactory for InMemory {
    fn client(&self, cluster: &str) -> Result<kube::Client> {
        Ok(self.with(ClusterPrefix::new(cluster_prefix(cluster))))
    }

    fn all_clusters(&self) -> Result<kube::Client> {
        Ok(self.with(ClusterPrefix::new(ALL_CLUSTERS_PREFIX.to_string())))
    }
}

/// A tower layer putting a prefix in front of every request path.
#[derive(Debug, Clone)]
pub struct ClusterPrefix {
    prefix: Arc<str>,
}

impl ClusterPrefix {
    pub fn new(prefix: String) -> Self {
        ClusterPrefix {
            prefix: prefix.into(),
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

/// The service made by [`ClusterPrefix`].
#[derive(Debug, Clone)]
pub struct Prefixed<S> {
    prefix: Arc<str>,
    inner: S,
}

/// `uri` with `prefix` in front of its path; scheme, authority and query are kept.
pub fn prefix_uri(prefix: &str, uri: &http::Uri) -> Result<http::Uri> {
    if prefix.is_empty() {
        return Ok(uri.clone());
    }
    let pq = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(
        format!("{prefix}{pq}")
            .parse()
            .map_err(|e| Error::Config(format!("invalid path prefix {prefix:?}: {e}")))?,
    );
    http::Uri::from_parts(parts).map_err(|e| Error::Config(e.to_string()))
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
        match prefix_uri(&self.prefix, &parts.uri) {
            Ok(uri) => {
                parts.uri = uri;
                let fut = self.inner.call(Request::from_parts(parts, body));
                Box::pin(async move { fut.await.map_err(Into::into) })
            }
            Err(e) => Box::pin(async move { Err(e.into()) }),
        }
    }
}

/// Cached clients by cluster, each with the tick it was last used at, and the current tick.
type ClientCache = (u64, HashMap<String, (kube::Client, u64)>);

/// A bounded cache of per-cluster clients over a [`ClientFactory`]; clones share it.
#[derive(Clone)]
pub struct Clients {
    factory: Arc<dyn ClientFactory>,
    cache: Arc<Mutex<ClientCache>>,
}

impl Clients {
    pub fn new(factory: Arc<dyn ClientFactory>) -> Self {
        Clients {
            factory,
            cache: Arc::new(Mutex::new((0, HashMap::new()))),
        }
    }

    /// The client of `cluster`.
    pub fn cluster(&self, cluster: &str) -> Result<kube::Client> {
        let mut guard = self.cache.lock();
        let (tick, clients) = &mut *guard;
        *tick += 1;
        if let Some((c, used)) = clients.get_mut(cluster) {
            *used = *tick;
            return Ok(c.clone());
        }
        let client = self.factory.client(cluster)?;
        if clients.len() >= CLIENT_CACHE
            && let Some(oldest) = clients
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
        {
            clients.remove(&oldest);
        }
        clients.insert(cluster.to_string(), (client.clone(), *tick));
        Ok(client)
    }

    /// The cross-cluster client (list and watch only).
    pub fn all_clusters(&self) -> Result<kube::Client> {
        self.factory.all_clusters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_uri_keeps_the_query_and_prepends_the_cluster() {
        let uri: http::Uri = "/api/v1/pods?watch=true".parse().unwrap();
        assert_eq!(
            prefix_uri("/clusters/*", &uri).unwrap().to_string(),
            "/clusters/*/api/v1/pods?watch=true"
        );
    }

    #[test]
    fn the_root_cluster_has_no_prefix() {
        assert_eq!(cluster_prefix(ROOT), "");
        assert_eq!(cluster_prefix("a"), "/clusters/a");
        let uri: http::Uri = "/api".parse().unwrap();
        assert_eq!(prefix_uri("", &uri).unwrap(), uri);
    }
}
