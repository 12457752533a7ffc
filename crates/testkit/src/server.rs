//! A started API server over a temporary store, and what tests do with it.

use std::sync::Arc;

use apiserver::ApiServer;
use apiserver::local::LocalService;
use apiserver::server::Caller;
use bytes::Bytes;
use controlplane::auth::{UserExt, UserInfo};
use http::{HeaderMap, Method, Request};
use http_body_util::BodyExt;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use runtime::client::ClusterClients;
use serde_json::{Value, json};

/// A server over an embedded store in a temporary directory (removed when dropped).
pub struct Server {
    pub api: Arc<ApiServer>,
    dir: tempfile::TempDir,
}

/// An answer to a raw request.
#[derive(Debug)]
pub struct Reply {
    pub code: u16,
    pub headers: HeaderMap,
    /// The body as JSON (`Null` when empty or not JSON).
    pub body: Value,
    pub raw: Bytes,
}

impl Server {
    /// Starts a server with the default configuration.
    pub async fn start() -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = storage::embedded::EmbeddedStore::open(dir.path()).expect("store");
        let api = apiserver::server::start(Arc::new(store))
            .await
            .expect("server");
        Server { api, dir }
    }

    /// Starts a server with `config`.
    pub async fn start_with(config: apiserver::server::Config) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = storage::embedded::EmbeddedStore::open(dir.path()).expect("store");
        let api = apiserver::server::start_with(Arc::new(store), config)
            .await
            .expect("server");
        Server { api, dir }
    }

    /// A server with the logical `clusters` (besides the root) created and Ready.
    pub async fn with_clusters(clusters: &[&str]) -> Server {
        let s = Server::start().await;
        for c in clusters {
            s.add_cluster(c).await;
        }
        s
    }

    /// The server and the directory holding its store (which must outlive it).
    pub fn into_parts(self) -> (Arc<ApiServer>, tempfile::TempDir) {
        (self.api, self.dir)
    }

    /// Per-cluster clients over the in-memory transport, as the system identity.
    pub fn clients(&self) -> ClusterClients {
        clients(&self.api)
    }

    /// A client of one cluster, as the system identity.
    pub fn client(&self, cluster: &str) -> kube::Client {
        self.clients().cluster(cluster).expect("client")
    }

    /// A root-cluster client acting as `user` in `groups` (plus `system:authenticated`).
    pub fn as_user(&self, user: &str, groups: &[&str]) -> kube::Client {
        as_user(&self.api, user, groups)
    }

    /// Makes a logical cluster exist: a `LogicalCluster` in the root cluster, provisioned
    /// until Ready.
    pub async fn add_cluster(&self, name: &str) {
        add_cluster(&self.api, name).await
    }

    /// A request as the system identity.
    pub async fn request(
        &self,
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Reply {
        request(&self.api, method, uri, headers, body).await
    }
}

/// Clients over `server`'s in-memory transport, as the system identity.
pub fn clients(server: &Arc<ApiServer>) -> ClusterClients {
    ClusterClients::in_memory(LocalService::system(server.clone()))
}

/// A root-cluster client of `server` acting as `user` in `groups`.
pub fn as_user(server: &Arc<ApiServer>, user: &str, groups: &[&str]) -> kube::Client {
    let mut groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
    groups.push("system:authenticated".into());
    let info = UserInfo {
        name: user.into(),
        uid: String::new(),
        groups,
        extra: Vec::new(),
    };
    kube::Client::new(LocalService::as_user(server.clone(), info), "default")
}

/// A client of logical cluster `cluster` of `server` acting as `user` in exactly `groups`.
pub fn as_user_in(
    server: &Arc<ApiServer>,
    cluster: &str,
    user: &str,
    groups: &[&str],
) -> kube::Client {
    let info = UserInfo {
        name: user.into(),
        uid: String::new(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        extra: Vec::new(),
    };
    let service = tower::Layer::layer(
        &runtime::client::ClusterPrefix::cluster(cluster),
        LocalService::as_user(server.clone(), info),
    );
    kube::Client::new(service, "default")
}

/// `LogicalCluster` of `core.matryoshka.dev/v1alpha1`.
pub fn logical_clusters() -> ApiResource {
    ApiResource {
        group: "core.matryoshka.dev".into(),
        version: "v1alpha1".into(),
        api_version: "core.matryoshka.dev/v1alpha1".into(),
        kind: "LogicalCluster".into(),
        plural: "logicalclusters".into(),
    }
}

/// Creates the `LogicalCluster` `name` on `server` and waits until it is Ready.
pub async fn add_cluster(server: &Arc<ApiServer>, name: &str) {
    let root = clients(server)
        .cluster(runtime::client::ROOT)
        .expect("root client");
    let api: Api<DynamicObject> = Api::all_with(root, &logical_clusters());
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "core.matryoshka.dev/v1alpha1", "kind": "LogicalCluster",
        "metadata": {"name": name},
    }))
    .expect("a LogicalCluster");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create the LogicalCluster");
    crate::wait::wait_for(&api, name, "the cluster to be Ready", |c| {
        c.and_then(|c| c.data.pointer("/status/phase"))
            .and_then(Value::as_str)
            == Some("Ready")
    })
    .await;
}

/// A request to `server` as the system identity: code, headers and body.
pub async fn request(
    server: &Arc<ApiServer>,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let mut req = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Bytes::from(body.to_string())).expect("a request");
    let resp = server
        .handle(req, Caller::Internal(UserInfo::system()))
        .await;
    let code = resp.status().as_u16();
    let headers = resp.headers().clone();
    let raw = resp.into_body().collect().await.expect("a body").to_bytes();
    Reply {
        code,
        headers,
        body: serde_json::from_slice(&raw).unwrap_or(Value::Null),
        raw,
    }
}
