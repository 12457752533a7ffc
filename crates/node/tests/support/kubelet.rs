//! A real node for a test: an in-process API server, a fresh runtime directory and the CRI
//! agent on it (its own containerd, a bridge and a cgroup root of the test's own), stopped
//! with every pod removed. Drop order matters: the agent goes before the runtime guard, which
//! then removes whatever is left.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::api::{Api, ObjectMeta};
use node::kubelet::{Kubelet, KubeletConfig, KubeletTiming, Teardown};

use super::Env;
use super::images::BUSYBOX;
use super::node_runtime::{TestRuntime, unique};

/// A test's node.
pub struct TestNode {
    pub kubelet: Option<Kubelet>,
    pub name: String,
    pub config: KubeletConfig,
    // Declared last: dropped after the agent.
    pub rt: TestRuntime,
}

/// Agent timings for tests: quick relists and heartbeats, short back-off.
pub fn fast_timing() -> KubeletTiming {
    KubeletTiming {
        relist: Duration::from_millis(300),
        resync: Duration::from_secs(5),
        backoff_initial: Duration::from_secs(2),
        backoff_max: Duration::from_secs(16),
        lease_duration_seconds: 40,
        lease_renew: Duration::from_secs(2),
        status_update: Duration::from_secs(1),
        status_report: Duration::from_secs(60),
    }
}

impl TestNode {
    /// Starts an agent for `env`'s root cluster.
    pub async fn start(env: &Env) -> TestNode {
        TestNode::start_with(env, |_| {}).await
    }

    /// Starts an agent, letting `tune` change its configuration first.
    pub async fn start_with(env: &Env, tune: impl FnOnce(&mut KubeletConfig)) -> TestNode {
        let rt = TestRuntime::prepare();
        let name = format!("node-{}", unique());
        let mut config = KubeletConfig::new(&name, rt.root());
        config.cri_endpoint = rt.endpoint();
        config.containerd = rt.options.clone();
        config.bridge = rt.bridge.clone();
        config.cgroup_root = rt.cgroup_root.clone();
        // A subnet of the test's own, so that parallel tests' bridges never overlap.
        let octet = u8::from_str_radix(&rt.bridge[2..4], 16).unwrap_or(0);
        config.pod_cidr = Some(format!("10.251.{octet}.0/24").parse().expect("cidr"));
        config.timing = fast_timing();
        config.teardown = Teardown::RemovePods;
        // The kubelet API on loopback, any free port; client certificates of the root CA.
        config.kubelet_address = std::net::Ipv4Addr::LOCALHOST.into();
        config.kubelet_port = 0;
        config.client_ca_pem = Some(env.server.control_plane().config().root_ca.cert_pem.clone());
        tune(&mut config);
        let kubelet = Kubelet::start(env.client.clone(), config.clone())
            .await
            .expect("the agent starts");
        TestNode {
            kubelet: Some(kubelet),
            name,
            config,
            rt,
        }
    }

    pub fn kubelet(&self) -> &Kubelet {
        self.kubelet.as_ref().expect("running")
    }

    /// Stops the agent leaving its pods running, and starts a new one on the same data.
    pub async fn restart(&mut self, env: &Env) {
        if let Some(k) = self.kubelet.take() {
            k.stop(Teardown::KeepPods).await;
        }
        let k = Kubelet::start(env.client.clone(), self.config.clone())
            .await
            .expect("the agent starts again");
        self.kubelet = Some(k);
    }

    /// Stops the agent (pods removed).
    pub async fn stop(&mut self) {
        if let Some(k) = self.kubelet.take() {
            k.shutdown().await;
        }
    }
}

/// A pod of one busybox container running `script`, bound to `node`.
pub fn busybox(name: &str, node: &str, script: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            termination_grace_period_seconds: Some(2),
            containers: vec![container("main", script)],
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// A busybox container running `script` with `sh -c`.
pub fn container(name: &str, script: &str) -> Container {
    Container {
        name: name.into(),
        image: Some(BUSYBOX.into()),
        command: Some(vec!["sh".into(), "-c".into(), script.into()]),
        ..Container::default()
    }
}

/// The pods API of `default`.
pub fn pods(env: &Env) -> Api<Pod> {
    Api::namespaced(env.client.clone(), "default")
}

/// Waits up to `limit` until `cond` holds for pod `name`.
pub async fn until_pod(
    api: &Api<Pod>,
    name: &str,
    limit: Duration,
    cond: impl kube::runtime::wait::Condition<Pod>,
) -> Pod {
    let fut = kube::runtime::wait::await_condition(api.clone(), name, cond);
    match tokio::time::timeout(limit, fut).await {
        Ok(Ok(Some(p))) => p,
        Ok(Ok(None)) => panic!("{name} is gone"),
        Ok(Err(e)) => panic!("watching {name}: {e}"),
        Err(_) => {
            let now = api.get_opt(name).await;
            panic!("{name} did not reach the condition within {limit:?}; now: {now:#?}")
        }
    }
}

/// The status of container `c` of a pod.
pub fn container_status<'a>(
    p: &'a Pod,
    c: &str,
) -> Option<&'a k8s_openapi::api::core::v1::ContainerStatus> {
    let s = p.status.as_ref()?;
    s.container_statuses
        .iter()
        .flatten()
        .chain(s.init_container_statuses.iter().flatten())
        .find(|s| s.name == c)
}

/// Events about object `name` in `default`, as (reason, message).
pub async fn events_of(env: &Env, name: &str) -> Vec<(String, String)> {
    let api: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(env.client.clone(), "default");
    let list = api.list(&Default::default()).await.expect("events");
    list.items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}
