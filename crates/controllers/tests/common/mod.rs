//! The test harness: a real in-process API server over a temporary embedded store, logical
//! clusters, the controllers running against it, a stand-in kubelet marking pods ready, and
//! waiting on watches (no sleeps).

#![allow(dead_code)]

use std::fmt::Debug;
use std::sync::Arc;

use apiserver::ApiServer;
use apiserver::local::LocalService;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use runtime::client::ClusterClients;
use runtime::shared::{Shutdown, ShutdownTrigger};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

pub const CA_PEM: &str = "-----BEGIN CERTIFICATE-----\nTEST\n-----END CERTIFICATE-----\n";

/// Per-cluster clients the harness keeps (each holds a task).
pub const TEST_CLIENT_CACHE: usize = 2;

pub use testkit::PATIENCE;

pub struct Harness {
    pub server: Arc<ApiServer>,
    pub clients: ClusterClients,
    stop: ShutdownTrigger,
    controllers: Option<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

pub async fn server() -> (Arc<ApiServer>, tempfile::TempDir) {
    testkit::Server::start().await.into_parts()
}

#[allow(unused_imports)]
pub use testkit::server::{add_cluster, clients};

impl Harness {
    /// A server with `clusters` besides the root, and the controllers running.
    pub async fn start(clusters: &[&str]) -> Harness {
        Self::start_with(clusters, controllers::Options::default().with_ca(CA_PEM)).await
    }

    /// Like [`Harness::start`] with the controllers' options.
    pub async fn start_with(clusters: &[&str], options: controllers::Options) -> Harness {
        Self::start_with_cache(clusters, options, runtime::client::DEFAULT_CLIENT_CACHE).await
    }

    /// Like [`Harness::start_with`], the controllers keeping `client_cache` per-cluster clients.
    pub async fn start_with_cache(
        clusters: &[&str],
        options: controllers::Options,
        client_cache: usize,
    ) -> Harness {
        let (server, dir) = server().await;
        for c in clusters {
            add_cluster(&server, c).await;
        }
        Self::run_on(server, dir, options, client_cache)
    }

    /// Runs the controllers on a server the test prepared (as after a restart: they list
    /// what is stored).
    pub fn run_on(
        server: Arc<ApiServer>,
        dir: tempfile::TempDir,
        options: controllers::Options,
        client_cache: usize,
    ) -> Harness {
        let (stop, shutdown) = Shutdown::new();
        let s = server.clone();
        let controllers = tokio::spawn(async move {
            let clients = ClusterClients::with_capacity(
                Arc::new(runtime::client::InMemory::new(LocalService::system(s))),
                client_cache,
            );
            controllers::run(clients, options, shutdown.wait())
                .await
                .expect("controllers");
        });
        Harness {
            // A small cache: the test's own clients must not hide the controllers' task count.
            clients: ClusterClients::with_capacity(
                Arc::new(runtime::client::InMemory::new(LocalService::system(
                    server.clone(),
                ))),
                TEST_CLIENT_CACHE,
            ),
            server,
            stop,
            controllers: Some(controllers),
            _dir: dir,
        }
    }

    pub fn client(&self, cluster: &str) -> kube::Client {
        self.clients.cluster(cluster).unwrap()
    }

    pub fn api<K>(&self, cluster: &str, ns: &str) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client(cluster), ns)
    }

    /// Stops the controllers and waits for them.
    pub async fn stop(mut self) {
        self.stop.trigger();
        if let Some(h) = self.controllers.take() {
            tokio::time::timeout(PATIENCE, h)
                .await
                .expect("controllers stop")
                .expect("join");
        }
    }
}

#[allow(unused_imports)]
pub use testkit::{wait_for, wait_list};

/// A stand-in kubelet for one namespace: every pod that is not Ready becomes Running and
/// Ready. Stopped by aborting the handle.
///
/// Its watch backs off after an error: once the server stopped, every call fails at once
/// without yielding, and a loop retrying without a pause never lets the runtime shut down
/// (regression: a test hung for the whole CI run in its runtime's shutdown).
pub fn kubelet(api: Api<Pod>) -> JoinHandle<()> {
    kubelet_for(api, |_| true)
}

/// A stand-in kubelet that starts only the pods `runs` picks; the others stay pending.
pub fn kubelet_for(api: Api<Pod>, runs: impl Fn(&Pod) -> bool + Send + 'static) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut stream = watcher::watcher(api.clone(), watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = stream.next().await {
            let pod = match ev {
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => p,
                _ => continue,
            };
            if pod.metadata.deletion_timestamp.is_some() || is_ready(&pod) || !runs(&pod) {
                continue;
            }
            let _ = mark_ready(&api, pod).await;
        }
    })
}

pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Writes a Running phase and a Ready condition through `/status`.
pub async fn mark_ready(api: &Api<Pod>, mut pod: Pod) -> kube::Result<Pod> {
    pod.status = Some(PodStatus {
        phase: Some("Running".into()),
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            last_transition_time: Some(Time(Timestamp::now())),
            ..Default::default()
        }]),
        ..pod.status.unwrap_or_default()
    });
    api.replace_status(&pod.name_any(), &PostParams::default(), &pod)
        .await
}

pub async fn count<K>(api: &Api<K>) -> usize
where
    K: Resource + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    api.list(&ListParams::default()).await.unwrap().items.len()
}
