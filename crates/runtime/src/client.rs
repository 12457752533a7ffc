//! Kubernetes clients per logical cluster.
//!
//! A logical cluster is addressed by the path prefix `/clusters/<name>` (none for the root
//! cluster); cross-cluster list and watch use `/clusters/*`. A [`ClientFactory`] makes a
//! `kube::Client` for one of those: [`InMemory`] over an in-process tower service (the API
//! server's in-memory transport: no socket, no TLS; the `matryoshka` binary hands it in, so this
//! crate knows nothing of the server) with the [`ClusterPrefix`] layer rewriting request paths,
//! or [`Kubeconfig`]
//! over HTTP(S) with the prefix in the cluster URL — against Matryoshka, or against a plain
//! Kubernetes cluster that is a single (root) cluster.
//!
//! Every `kube::Client` owns a buffer task, so clients are not kept per cluster forever:
//! [`ClusterClients`] caches a bounded number of them (least recently used out), which keeps
//! tasks and memory independent of how many clusters exist.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Request;
use parking_lot::Mutex;

use crate::error::{Error, Result};

pub use apimachinery::cluster::{CLUSTER_ANNOTATION, ROOT};

/// The path prefix addressing every cluster at once (system identity only).
pub const ALL_CLUSTERS_PREFIX: &str = "/clusters/*";

/// The path prefix addressing every cluster of one datastore (system identity only): the
/// clusters whose keys live in that datastore, in its own revision sequence.
pub fn shard_prefix(datastore: &str) -> String {
    format!("/shards/{datastore}/clusters/*")
}

/// The path prefix of a cluster: empty for the root cluster.
pub fn cluster_prefix(cluster: &str) -> String {
    if cluster == ROOT {
        String::new()
    } else {
        format!("/clusters/{cluster}")
    }
}

/// A tower layer prefixing every request path (`/api/v1/pods` → `/clusters/a/api/v1/pods`).
#[derive(Debug, Clone)]
pub struct ClusterPrefix {
    prefix: Arc<str>,
    agent: Option<http::HeaderValue>,
}

impl ClusterPrefix {
    /// The layer addressing `cluster` (no prefix for the root cluster).
    pub fn cluster(cluster: &str) -> Self {
        ClusterPrefix {
            prefix: cluster_prefix(cluster).into(),
            agent: None,
        }
    }

    /// The layer addressing every cluster (`/clusters/*`).
    pub fn all_clusters() -> Self {
        ClusterPrefix {
            prefix: ALL_CLUSTERS_PREFIX.into(),
            agent: None,
        }
    }

    /// The layer addressing every cluster of a datastore (`/shards/<name>/clusters/*`).
    pub fn shard(datastore: &str) -> Self {
        ClusterPrefix {
            prefix: shard_prefix(datastore).into(),
            agent: None,
        }
    }

    /// Also sets the `User-Agent` of requests that carry none: the server names the field
    /// manager of a write without `fieldManager` after it, as kube-apiserver does.
    pub fn with_user_agent(mut self, agent: Option<http::HeaderValue>) -> Self {
        self.agent = agent;
        self
    }
}

impl<S> tower::Layer<S> for ClusterPrefix {
    type Service = Prefixed<S>;
    fn layer(&self, inner: S) -> Prefixed<S> {
        Prefixed {
            prefix: self.prefix.clone(),
            agent: self.agent.clone(),
            inner,
        }
    }
}

/// The service made by [`ClusterPrefix`].
#[derive(Debug, Clone)]
pub struct Prefixed<S> {
    prefix: Arc<str>,
    agent: Option<http::HeaderValue>,
    inner: S,
}

/// `uri` with `prefix` put in front of its path; scheme, authority and query are kept.
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
        if let Some(agent) = &self.agent {
            parts
                .headers
                .entry(http::header::USER_AGENT)
                .or_insert_with(|| agent.clone());
        }
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

/// The server URL `base` with a cluster path prefix appended (`https://h:6443` +
/// `/clusters/a`).
pub fn join_url(base: &http::Uri, prefix: &str) -> Result<http::Uri> {
    let url = format!("{}{prefix}", base.to_string().trim_end_matches('/'));
    url.parse()
        .map_err(|e| Error::Config(format!("invalid cluster URL {url:?}: {e}")))
}

/// Makes clients for clusters.
pub trait ClientFactory: Send + Sync + 'static {
    /// A client addressing `cluster` ([`ROOT`] for the root cluster).
    fn client(&self, cluster: &str) -> Result<kube::Client>;
    /// A client for cross-cluster list and watch. A single-cluster endpoint returns its one
    /// cluster, whose objects carry no cluster annotation and belong to [`ROOT`].
    fn all_clusters(&self) -> Result<kube::Client>;
    /// A client for cross-cluster list and watch of the clusters whose keys live in
    /// `datastore` (each datastore is a shard with its own resourceVersions).
    fn shard(&self, datastore: &str) -> Result<kube::Client>;
    /// Whether the endpoint serves logical clusters (Matryoshka) rather than one cluster.
    fn multi_cluster(&self) -> bool;
    /// The same endpoint, its clients identifying themselves as `agent` (the `User-Agent`
    /// header, `kube-controller-manager/v1.33.0 ...`): the server names the field manager of a
    /// write without `fieldManager` after the agent's program name.
    fn with_user_agent(&self, agent: &str) -> Arc<dyn ClientFactory>;
}

/// The header value of a user agent; an agent that is not a valid header value is left out.
fn agent_header(agent: &str) -> Option<http::HeaderValue> {
    http::HeaderValue::from_str(agent).ok()
}

/// Makes a `kube::Client` whose requests pass through the given [`ClusterPrefix`] layer.
type MakeClient = dyn Fn(ClusterPrefix) -> kube::Client + Send + Sync;

/// Clients over an in-process tower service (the API server's in-memory transport, acting as
/// the system identity): each client is the service behind a [`ClusterPrefix`] layer.
pub struct InMemory {
    make: Arc<MakeClient>,
    agent: Option<http::HeaderValue>,
}

impl InMemory {
    /// Clients over clones of `service`.
    pub fn new<S, B>(service: S) -> Self
    where
        S: tower::Service<Request<kube::client::Body>, Response = http::Response<B>>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
        S::Error: Into<tower::BoxError>,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<tower::BoxError>,
    {
        InMemory {
            agent: None,
            make: Arc::new(move |layer| {
                let svc = tower::ServiceBuilder::new()
                    .layer(layer)
                    .service(service.clone());
                kube::Client::new(svc, "default")
            }),
        }
    }
}

impl ClientFactory for InMemory {
    fn client(&self, cluster: &str) -> Result<kube::Client> {
        Ok((self.make)(
            ClusterPrefix::cluster(cluster).with_user_agent(self.agent.clone()),
        ))
    }
    fn all_clusters(&self) -> Result<kube::Client> {
        Ok((self.make)(
            ClusterPrefix::all_clusters().with_user_agent(self.agent.clone()),
        ))
    }
    fn shard(&self, datastore: &str) -> Result<kube::Client> {
        Ok((self.make)(
            ClusterPrefix::shard(datastore).with_user_agent(self.agent.clone()),
        ))
    }
    fn multi_cluster(&self) -> bool {
        true
    }
    fn with_user_agent(&self, agent: &str) -> Arc<dyn ClientFactory> {
        Arc::new(InMemory {
            make: self.make.clone(),
            agent: agent_header(agent),
        })
    }
}

/// Clients from a kubeconfig-style [`kube::Config`], over HTTP(S). With `multi_cluster` the server is Matryoshka and clusters are path prefixes of
/// the configured URL; without it the endpoint is one plain Kubernetes cluster.
pub struct Kubeconfig {
    config: kube::Config,
    multi_cluster: bool,
}

impl Kubeconfig {
    pub fn new(config: kube::Config, multi_cluster: bool) -> Self {
        Kubeconfig {
            config,
            multi_cluster,
        }
    }

    fn with_prefix(&self, prefix: &str) -> Result<kube::Client> {
        let mut config = self.config.clone();
        config.cluster_url = join_url(&config.cluster_url, prefix)?;
        Ok(kube::Client::try_from(config)?)
    }
}

impl ClientFactory for Kubeconfig {
    fn client(&self, cluster: &str) -> Result<kube::Client> {
        if !self.multi_cluster && cluster != ROOT {
            return Err(Error::Config(format!(
                "cluster {cluster:?} requested from a single-cluster endpoint"
            )));
        }
        self.with_prefix(&cluster_prefix(cluster))
    }
    fn all_clusters(&self) -> Result<kube::Client> {
        if self.multi_cluster {
            self.with_prefix(ALL_CLUSTERS_PREFIX)
        } else {
            self.with_prefix("")
        }
    }
    fn shard(&self, datastore: &str) -> Result<kube::Client> {
        if !self.multi_cluster {
            return Err(Error::Config(format!(
                "datastore {datastore:?} requested from a single-cluster endpoint"
            )));
        }
        self.with_prefix(&shard_prefix(datastore))
    }
    fn multi_cluster(&self) -> bool {
        self.multi_cluster
    }
    fn with_user_agent(&self, agent: &str) -> Arc<dyn ClientFactory> {
        let mut config = self.config.clone();
        if let Some(v) = agent_header(agent) {
            config
                .headers
                .retain(|(k, _)| k != http::header::USER_AGENT);
            config.headers.push((http::header::USER_AGENT, v));
        }
        Arc::new(Kubeconfig {
            config,
            multi_cluster: self.multi_cluster,
        })
    }
}

/// How many per-cluster clients are kept by default. Each holds one buffer task; clusters
/// beyond this get a fresh client (one task spawn) when next written to.
pub const DEFAULT_CLIENT_CACHE: usize = 32;

struct Cache {
    tick: u64,
    clients: HashMap<String, (kube::Client, u64)>,
}

/// A bounded cache of clients per cluster over a [`ClientFactory`]; clones are cheap and share
/// the cache.
#[derive(Clone)]
pub struct ClusterClients {
    factory: Arc<dyn ClientFactory>,
    capacity: usize,
    cache: Arc<Mutex<Cache>>,
    all: Arc<Mutex<Option<kube::Client>>>,
    shards: Arc<Mutex<HashMap<String, kube::Client>>>,
    datastores: Arc<Mutex<Option<tokio::sync::watch::Receiver<Vec<String>>>>>,
}

impl ClusterClients {
    pub fn new(factory: Arc<dyn ClientFactory>) -> Self {
        Self::with_capacity(factory, DEFAULT_CLIENT_CACHE)
    }

    pub fn with_capacity(factory: Arc<dyn ClientFactory>, capacity: usize) -> Self {
        ClusterClients {
            factory,
            capacity: capacity.max(1),
            cache: Arc::new(Mutex::new(Cache {
                tick: 0,
                clients: HashMap::new(),
            })),
            all: Arc::new(Mutex::new(None)),
            shards: Arc::default(),
            datastores: Arc::default(),
        }
    }

    /// Clients over an in-process tower service (see [`InMemory::new`]); in process that is
    /// `apiserver::local::LocalService::system(server)`.
    pub fn in_memory<S, B>(service: S) -> Self
    where
        S: tower::Service<Request<kube::client::Body>, Response = http::Response<B>>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
        S::Error: Into<tower::BoxError>,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<tower::BoxError>,
    {
        Self::new(Arc::new(InMemory::new(service)))
    }

    /// Clients of the same endpoint identifying themselves as `agent` (see
    /// [`ClientFactory::with_user_agent`]); they have their own cache.
    pub fn with_user_agent(&self, agent: &str) -> Self {
        Self::with_capacity(self.factory.with_user_agent(agent), self.capacity)
    }

    /// The client of `cluster`.
    pub fn cluster(&self, cluster: &str) -> Result<kube::Client> {
        let mut cache = self.cache.lock();
        cache.tick += 1;
        let tick = cache.tick;
        if let Some((c, used)) = cache.clients.get_mut(cluster) {
            *used = tick;
            return Ok(c.clone());
        }
        let client = self.factory.client(cluster)?;
        if cache.clients.len() >= self.capacity
            && let Some(oldest) = cache
                .clients
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
        {
            cache.clients.remove(&oldest);
        }
        cache
            .clients
            .insert(cluster.to_string(), (client.clone(), tick));
        Ok(client)
    }

    /// The cross-cluster client (list and watch only).
    pub fn all_clusters(&self) -> Result<kube::Client> {
        let mut all = self.all.lock();
        if let Some(c) = &*all {
            return Ok(c.clone());
        }
        let c = self.factory.all_clusters()?;
        *all = Some(c.clone());
        Ok(c)
    }

    /// The cross-cluster client of a datastore's clusters (list and watch only).
    pub fn shard(&self, datastore: &str) -> Result<kube::Client> {
        let mut shards = self.shards.lock();
        if let Some(c) = shards.get(datastore) {
            return Ok(c.clone());
        }
        let c = self.factory.shard(datastore)?;
        shards.insert(datastore.to_string(), c.clone());
        Ok(c)
    }

    /// The cross-cluster client of every shard: the shared store's (`""`), then each
    /// datastore's known now.
    pub fn shard_clients(&self) -> Result<Vec<(String, kube::Client)>> {
        let mut out = vec![(String::new(), self.all_clusters()?)];
        for ds in self.datastores().borrow().iter() {
            out.push((ds.clone(), self.shard(ds)?));
        }
        Ok(out)
    }

    /// The names of the datastores (the `DataStore` objects of the root cluster), kept
    /// current by one watch shared by every clone; always empty against a single-cluster
    /// endpoint. Cross-cluster informers run one watch per datastore besides the shared
    /// store's.
    pub fn datastores(&self) -> tokio::sync::watch::Receiver<Vec<String>> {
        let mut slot = self.datastores.lock();
        if let Some(rx) = &*slot {
            return rx.clone();
        }
        let (tx, rx) = tokio::sync::watch::channel(Vec::new());
        *slot = Some(rx.clone());
        if self.multi_cluster()
            && let Ok(root) = self.cluster(ROOT)
        {
            tokio::spawn(follow_datastores(root, tx));
        }
        rx
    }

    /// Whether the endpoint serves logical clusters.
    pub fn multi_cluster(&self) -> bool {
        self.factory.multi_cluster()
    }

    /// How many per-cluster clients are cached now.
    pub fn cached(&self) -> usize {
        self.cache.lock().clients.len()
    }
}

/// Runs `task(client, datastore)` on the cross-cluster client of every shard — the shared
/// store's (`""`) at once, each datastore's as it appears (and stops it when it goes) — for
/// components that keep their own watch state per stream. Aborting the returned task stops
/// them all.
pub fn for_each_shard<F, Fut>(clients: &ClusterClients, task: F) -> tokio::task::JoinHandle<()>
where
    F: Fn(kube::Client, String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let clients = clients.clone();
    tokio::spawn(async move {
        let mut set = tokio::task::JoinSet::new();
        let mut running: HashMap<String, tokio::task::AbortHandle> = HashMap::new();
        match clients.all_clusters() {
            Ok(c) => {
                set.spawn(task(c, String::new()));
            }
            Err(e) => {
                tracing::warn!(error = %e, "no cross-cluster client");
                return;
            }
        }
        if !clients.multi_cluster() {
            while set.join_next().await.is_some() {}
            return;
        }
        let mut datastores = clients.datastores();
        datastores.mark_changed();
        while datastores.changed().await.is_ok() {
            let now: Vec<String> = datastores.borrow_and_update().clone();
            running.retain(|ds, abort| {
                let keep = now.contains(ds);
                if !keep {
                    abort.abort();
                }
                keep
            });
            for ds in now {
                if running.contains_key(&ds) {
                    continue;
                }
                match clients.shard(&ds) {
                    Ok(c) => {
                        let abort = set.spawn(task(c, ds.clone()));
                        running.insert(ds, abort);
                    }
                    Err(e) => {
                        tracing::warn!(datastore = %ds, error = %e, "no client for a datastore")
                    }
                }
            }
            // Finished tasks are reaped as they end.
            while set.try_join_next().is_some() {}
        }
        // The datastore watch is gone with its clients: keep what runs.
        while set.join_next().await.is_some() {}
    })
}

/// The API of the root cluster's `DataStore` objects.
pub fn datastore_resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: "core.matryoshka.dev".into(),
        version: "v1alpha1".into(),
        api_version: "core.matryoshka.dev/v1alpha1".into(),
        kind: "DataStore".into(),
        plural: "datastores".into(),
    }
}

/// Keeps `tx` at the sorted names of the DataStores until every receiver is gone. A DataStore
/// counts from the first time its status says it is ready (its clusters cannot be served
/// before: watching it earlier only fails) until it is deleted; one that turns unhealthy stays,
/// its watches retrying, so its objects never look deleted to the components.
async fn follow_datastores(root: kube::Client, tx: tokio::sync::watch::Sender<Vec<String>>) {
    use futures::StreamExt;
    use kube::runtime::WatchStreamExt;
    use kube::runtime::watcher::{self, Event};
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(root, &datastore_resource());
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut names = std::collections::BTreeSet::new();
    let mut init = std::collections::BTreeSet::new();
    let name = |d: &kube::api::DynamicObject| d.metadata.name.clone().unwrap_or_default();
    let ready = |d: &kube::api::DynamicObject| {
        d.data
            .pointer("/status/ready")
            .and_then(serde_json::Value::as_bool)
            == Some(true)
    };
    loop {
        let ev = tokio::select! {
            ev = stream.next() => ev,
            () = tx.closed() => return,
        };
        let Some(ev) = ev else { return };
        match ev {
            Ok(Event::Apply(d)) => {
                if ready(&d) {
                    names.insert(name(&d));
                }
            }
            Ok(Event::Delete(d)) => {
                names.remove(&name(&d));
            }
            Ok(Event::Init) => init.clear(),
            Ok(Event::InitApply(d)) => {
                if ready(&d) || names.contains(&name(&d)) {
                    init.insert(name(&d));
                }
            }
            Ok(Event::InitDone) => names = std::mem::take(&mut init),
            // A server without DataStores (or not yet serving them): none.
            Err(e) => {
                tracing::debug!(error = %e, "watching DataStores");
                continue;
            }
        }
        let now: Vec<String> = names.iter().cloned().collect();
        tx.send_if_modified(|cur| {
            let changed = *cur != now;
            *cur = now;
            changed
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use k8s_openapi::api::core::v1::ConfigMap;

    /// An in-process "server" that answers every request with an empty ConfigMap list and
    /// records the paths it was asked for.
    #[derive(Clone)]
    struct RecordingService(Arc<Mutex<Vec<String>>>);

    impl tower::Service<Request<kube::client::Body>> for RecordingService {
        type Response = http::Response<kube::client::Body>;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: Request<kube::client::Body>) -> Self::Future {
            self.0.lock().push(req.uri().path().to_string());
            let list = br#"{"apiVersion":"v1","kind":"ConfigMapList","metadata":{},"items":[]}"#;
            let resp = http::Response::builder()
                .header("content-type", "application/json")
                .body(kube::client::Body::from(list.to_vec()))
                .expect("a response");
            std::future::ready(Ok(resp))
        }
    }

    #[tokio::test]
    async fn in_memory_clients_put_their_cluster_in_front_of_every_path() {
        let paths = Arc::new(Mutex::new(Vec::new()));
        let clients = ClusterClients::in_memory(RecordingService(paths.clone()));
        assert!(clients.multi_cluster());
        let lp = kube::api::ListParams::default();
        for client in [
            clients.cluster("tenant-a").unwrap(),
            clients.cluster(ROOT).unwrap(),
            clients.all_clusters().unwrap(),
        ] {
            let api: kube::Api<ConfigMap> = kube::Api::namespaced(client, "default");
            assert!(api.list(&lp).await.unwrap().items.is_empty());
        }
        assert_eq!(
            *paths.lock(),
            [
                "/clusters/tenant-a/api/v1/namespaces/default/configmaps",
                "/api/v1/namespaces/default/configmaps",
                "/clusters/*/api/v1/namespaces/default/configmaps",
            ]
        );
    }

    #[tokio::test]
    async fn the_client_cache_never_holds_more_clusters_than_its_capacity() {
        let service = RecordingService(Arc::new(Mutex::new(Vec::new())));
        let clients = ClusterClients::with_capacity(Arc::new(InMemory::new(service)), 2);
        for c in ["a", "b", "a", "c", "d", "a"] {
            clients.cluster(c).unwrap();
            assert!(clients.cached() <= 2);
        }
        assert_eq!(clients.cached(), 2);
    }

    #[test]
    fn prefix_uri_keeps_the_query_and_prepends_the_cluster() {
        let uri: http::Uri = "/api/v1/namespaces/a/pods?limit=5".parse().unwrap();
        let out = prefix_uri("/clusters/t1", &uri).unwrap();
        assert_eq!(
            out.to_string(),
            "/clusters/t1/api/v1/namespaces/a/pods?limit=5"
        );
        let abs: http::Uri = "https://h:6443/apis?x=1".parse().unwrap();
        assert_eq!(
            prefix_uri("/clusters/*", &abs).unwrap().to_string(),
            "https://h:6443/clusters/*/apis?x=1"
        );
    }

    #[test]
    fn kubeconfig_urls_get_the_cluster_prefix_after_any_base_path() {
        let base: http::Uri = "https://h:6443/".parse().unwrap();
        assert_eq!(
            join_url(&base, "/clusters/a").unwrap().to_string(),
            "https://h:6443/clusters/a"
        );
        let proxied: http::Uri = "https://h/k8s".parse().unwrap();
        assert_eq!(
            join_url(&proxied, "/clusters/*").unwrap().to_string(),
            "https://h/k8s/clusters/*"
        );
        assert_eq!(join_url(&proxied, "").unwrap().to_string(), "https://h/k8s");
    }

    #[test]
    fn the_root_cluster_has_no_prefix() {
        assert_eq!(cluster_prefix(ROOT), "");
        assert_eq!(cluster_prefix("a"), "/clusters/a");
        let uri: http::Uri = "/api".parse().unwrap();
        assert_eq!(prefix_uri("", &uri).unwrap(), uri);
    }
}
