//! In-process test support: an API server over a temporary embedded store, kube clients for
//! its clusters, fast agent timings, and waits driven by watch events (no sleeps).
#![allow(dead_code)]

pub mod images;
pub mod kubelet;
pub mod node_runtime;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use apiserver::server::ApiServer;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::Resource;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::wait::{Condition, await_condition};
use node::{Network, Options, Timing};
use runtime::client::ClusterClients;
use serde::de::DeserializeOwned;

/// How long any wait may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(20);

pub struct Env {
    pub server: Arc<ApiServer>,
    pub client: kube::Client,
    _dir: tempfile::TempDir,
}

impl Env {
    pub async fn start() -> Env {
        // Logs when RUST_LOG asks for them.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let (server, dir) = testkit::Server::start().await.into_parts();
        let client = testkit::server::clients(&server)
            .cluster("root")
            .expect("root client");
        // What the root-CA publisher of the controllers (not run here) gives every namespace:
        // pods' token volumes read `ca.crt` from it.
        let ca = serde_json::json!({
            "metadata": {"name": "kube-root-ca.crt"},
            "data": {"ca.crt": server.control_plane().config().root_ca.cert_pem.clone()},
        });
        let cm: k8s_openapi::api::core::v1::ConfigMap =
            serde_json::from_value(ca).expect("a ConfigMap");
        Api::namespaced(client.clone(), "default")
            .create(&PostParams::default(), &cm)
            .await
            .expect("kube-root-ca.crt");
        Env {
            server,
            client,
            _dir: dir,
        }
    }

    /// A client of logical cluster `name`.
    pub fn cluster(&self, name: &str) -> kube::Client {
        ClusterClients::in_memory(apiserver::local::LocalService::system(self.server.clone()))
            .cluster(name)
            .expect("cluster client")
    }
}

/// Agent timings for tests: heartbeats every 100 ms, runs of 200 ms.
pub fn fast() -> Options {
    Options {
        timing: Timing {
            lease_duration_seconds: 40,
            lease_renew_interval: Duration::from_millis(100),
            status_report_interval: Duration::from_millis(300),
            container_start_delay: Duration::ZERO,
            run_duration: Duration::from_millis(200),
            retry_interval: Duration::from_millis(100),
        },
        network: Network::default(),
        max_in_flight: None,
    }
}

/// Like [`fast`], with heartbeats rare enough for hundreds of nodes on a small machine.
pub fn fast_but_quiet() -> Options {
    let mut o = fast();
    o.timing.lease_renew_interval = Duration::from_secs(5);
    o.timing.status_report_interval = Duration::from_secs(60);
    o
}

/// Waits until `cond` holds for object `name`, driven by a watch.
pub async fn until<K>(api: &Api<K>, name: &str, cond: impl Condition<K>) -> K
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    match tokio::time::timeout(WAIT, await_condition(api.clone(), name, cond)).await {
        Ok(Ok(Some(obj))) => obj,
        Ok(Ok(None)) => panic!("{name} is gone"),
        Ok(Err(e)) => panic!("watching {name}: {e}"),
        Err(_) => {
            let now = api.get_opt(name).await;
            panic!("{name} did not reach the condition within {WAIT:?}; now: {now:#?}")
        }
    }
}

/// Waits until object `name` is gone.
pub async fn until_gone<K>(api: &Api<K>, name: &str)
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let fut = await_condition(api.clone(), name, |o: Option<&K>| o.is_none());
    match tokio::time::timeout(WAIT, fut).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => panic!("watching {name}: {e}"),
        Err(_) => panic!("{name} still exists after {WAIT:?}"),
    }
}

/// A pod of one `busybox` container, bound to `node` when given.
pub fn pod(name: &str, node: Option<&str>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: node.map(str::to_string),
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox:1.36".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

pub async fn create(api: &Api<Pod>, pod: &Pod) -> Pod {
    api.create(&PostParams::default(), pod)
        .await
        .expect("pod created")
}

pub fn phase(p: Option<&Pod>) -> Option<String> {
    p.and_then(|p| p.status.as_ref()?.phase.clone())
}

/// A condition: the pod is in `want` phase.
pub fn in_phase(want: &'static str) -> impl Condition<Pod> {
    move |p: Option<&Pod>| phase(p).as_deref() == Some(want)
}
