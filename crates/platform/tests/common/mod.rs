//! The test harness: a real API server over a temporary embedded store, served over HTTPS on
//! a local port (so the kubeconfigs the platform writes can be used as they are), with the
//! built-in controllers and the platform running in process; clients as the system or as any
//! user; waiting by polling the API against a deadline (no sleeps as synchronisation).

#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use apiserver::ApiServer;
use apiserver::local::LocalService;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use runtime::client::ClusterClients;
use serde_json::{Value, json};
use tokio::sync::watch;

/// Cluster API's CRDs as upstream publishes them (the shared test data).
pub fn cluster_api_crds() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/testdata/crds/cluster-api")
}

pub struct Harness {
    pub server: Arc<ApiServer>,
    pub root: kube::Client,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

fn stopped(rx: &watch::Sender<bool>) -> impl Future<Output = ()> + Send + 'static {
    let mut rx = rx.subscribe();
    async move {
        let _ = rx.wait_for(|s| *s).await;
    }
}

impl Harness {
    pub async fn start() -> Harness {
        Harness::start_with(platform::Options::default()).await
    }

    /// A harness whose platform controllers run with `options`.
    pub async fn start_with(options: platform::Options) -> Harness {
        Harness::start_full(options, true).await
    }

    /// A harness whose root cluster does not serve Cluster API (as after a plain `up`).
    pub async fn start_without_cluster_api() -> Harness {
        Harness::start_full(platform::Options::default(), false).await
    }

    async fn start_full(options: platform::Options, cluster_api: bool) -> Harness {
        // `TEST_LOG=machines=debug` shows what the components did.
        if let Ok(filter) = std::env::var("TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_test_writer()
                .try_init();
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let store = storage::embedded::EmbeddedStore::open(dir.path()).expect("store");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let ca = pki::Ca::generate("platform-test-ca").expect("ca");
        let sa = controlplane::jwt::SigningKey::generate_pkcs8().expect("sa key");
        let config = apiserver::server::Config {
            external_url: format!("https://127.0.0.1:{}", addr.port()),
            root_ca: ca.pair.clone(),
            root_sa_key: sa,
            elected: false,
            rotation: Default::default(),
            volumes_dir: None,
            event_ttl: std::time::Duration::from_secs(3600),
        };
        let server = apiserver::server::start_with(Arc::new(store), config)
            .await
            .expect("server");
        let serving = ca
            .issue_server("127.0.0.1", &["127.0.0.1".to_string()])
            .expect("serving cert");
        let tls = apiserver::serve::tls_config(
            apiserver::serve::ServingCert::new(&serving.cert_pem, &serving.key_pem).expect("cert"),
        )
        .expect("tls");
        let (stop, _) = watch::channel(false);
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(apiserver::serve::serve(
            server.clone(),
            listener,
            tls,
            stopped(&stop),
        )));
        let s = server.clone();
        let shut = stopped(&stop);
        tasks.push(tokio::spawn(async move {
            let _ = controllers::run(
                ClusterClients::in_memory(LocalService::system(s.clone())),
                controllers::Options::default()
                    .with_ca(s.control_plane().config().root_ca.cert_pem.clone()),
                shut,
            )
            .await;
        }));
        let s = server.clone();
        let shut = stopped(&stop);
        tasks.push(tokio::spawn(async move {
            let _ = scheduler::run(
                ClusterClients::in_memory(LocalService::system(s)),
                scheduler::Options::default(),
                shut,
            )
            .await;
        }));
        // The platform installs before the test goes on (CRDs established, tenant-root).
        for (group, plural, v) in platform::admission::validators() {
            server
                .control_plane()
                .admission()
                .register(group, plural, v);
        }
        for (group, plural, m) in platform::admission::mutators() {
            server
                .control_plane()
                .admission()
                .register_mutator(group, plural, m);
        }
        {
            let cp = Arc::downgrade(server.control_plane());
            server
                .control_plane()
                .metrics()
                .add_root_collector(Arc::new(move || {
                    cp.upgrade().map_or_else(String::new, |cp| {
                        platform::usage::metrics(&controlplane::admission::CacheObjects(&cp))
                    })
                }));
        }
        let clients = ClusterClients::in_memory(LocalService::system(server.clone()));
        platform::install(&clients)
            .await
            .expect("install the platform");
        platform::install_machines(&clients, cluster_api.then(cluster_api_crds).as_deref())
            .await
            .expect("install the Cluster API CRDs");
        let shut = stopped(&stop);
        tasks.push(tokio::spawn(async move {
            let _ = platform::run_controllers(clients, options, shut).await;
        }));
        let root = ClusterClients::in_memory(LocalService::system(server.clone()))
            .cluster("root")
            .expect("root client");
        Harness {
            server,
            root,
            stop,
            tasks,
            _dir: dir,
        }
    }

    /// A root-cluster client acting as `user` in `groups`.
    pub fn as_user(&self, user: &str, groups: &[&str]) -> kube::Client {
        testkit::server::as_user(&self.server, user, groups)
    }

    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        for t in self.tasks.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(30), t).await;
        }
    }

    /// How many keys the store holds under a logical cluster's prefix.
    pub async fn keys_of(&self, cluster: &str) -> usize {
        let prefix = registry::key::cluster(cluster);
        self.server
            .store()
            .shared()
            .storage
            .list(prefix.as_bytes(), storage::ListOptions::default())
            .await
            .expect("list")
            .items
            .len()
    }
}

pub fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "platform.matryoshka.dev".into(),
        version: "v1alpha1".into(),
        api_version: "platform.matryoshka.dev/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

pub fn tenants(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &resource("Tenant", "tenants"))
}

pub fn tenant_clusters(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &resource("TenantCluster", "tenantclusters"),
    )
}

pub fn object(kind: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "platform.matryoshka.dev/v1alpha1", "kind": kind,
        "metadata": {"name": name}, "spec": spec,
    }))
    .expect("object")
}

pub async fn create_tenant(client: &kube::Client, ns: &str, name: &str, spec: Value) {
    tenants(client, ns)
        .create(&PostParams::default(), &object("Tenant", name, spec))
        .await
        .expect("create the tenant");
}

#[allow(unused_imports)]
pub use testkit::eventually;

/// Waits until the object's condition `ty` is True.
pub async fn await_condition(api: &Api<DynamicObject>, name: &str, ty: &str) -> DynamicObject {
    eventually(&format!("{name} to be {ty}"), || async {
        let o = api.get_opt(name).await.ok().flatten()?;
        let ok = o
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)?
            .iter()
            .any(|c| c["type"] == ty && c["status"] == "True");
        ok.then_some(o)
    })
    .await
}

#[allow(unused_imports)]
pub use testkit::status::api_error;

/// The Ready nodes of a cluster.
pub async fn ready_nodes(client: &kube::Client) -> Vec<k8s_openapi::api::core::v1::Node> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    nodes
        .list(&kube::api::ListParams::default())
        .await
        .expect("list nodes")
        .items
        .into_iter()
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .collect()
}
