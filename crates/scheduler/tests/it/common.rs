//! The test harness: an in-process API server over a temporary embedded store, logical
//! clusters created as `LogicalCluster` objects, the scheduler running against it, and waits
//! on watches (no sleeps). There is no node agent: scheduling ends at binding.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use apiserver::ApiServer;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use scheduler::client::ClusterClients;
use scheduler::{Options, Scheduler};
use serde_json::{Value, json};

/// How long a test waits for the scheduler before failing.
pub const PATIENCE: Duration = Duration::from_secs(30);

pub struct Harness {
    pub server: Arc<ApiServer>,
    pub clients: ClusterClients,
    pub scheduler: Option<Scheduler>,
    _dir: tempfile::TempDir,
}

/// A server with the logical `clusters` (besides the root) created and ready.
pub async fn server(clusters: &[&str]) -> (Arc<ApiServer>, tempfile::TempDir) {
    testkit::Server::with_clusters(clusters).await.into_parts()
}

impl Harness {
    /// A server with `clusters` and the scheduler running and synced.
    pub async fn start(clusters: &[&str]) -> Harness {
        Self::start_with(clusters, Options::default()).await
    }

    /// A server with `clusters`, the scheduler not started.
    pub async fn without_scheduler(clusters: &[&str]) -> Harness {
        let (server, dir) = server(clusters).await;
        Harness {
            clients: ClusterClients::in_memory(apiserver::local::LocalService::system(
                server.clone(),
            )),
            server,
            scheduler: None,
            _dir: dir,
        }
    }

    pub async fn start_with(clusters: &[&str], options: Options) -> Harness {
        let (server, dir) = server(clusters).await;
        let clients =
            ClusterClients::in_memory(apiserver::local::LocalService::system(server.clone()));
        let s = Scheduler::start(clients.clone(), options).expect("scheduler");
        tokio::time::timeout(PATIENCE, s.synced())
            .await
            .expect("informers synced");
        Harness {
            server,
            clients,
            scheduler: Some(s),
            _dir: dir,
        }
    }

    pub fn client(&self, cluster: &str) -> kube::Client {
        self.clients.cluster(cluster).expect("client")
    }

    pub fn pods(&self, cluster: &str) -> Api<Pod> {
        Api::namespaced(self.client(cluster), "default")
    }

    /// Creates a node with allocatable `cpu` and `memory`, 110 pods, and extra `node`
    /// fields (labels, taints, spec) merged in.
    pub async fn node(&self, cluster: &str, name: &str, cpu: &str, memory: &str, extra: Value) {
        let api: Api<Node> = Api::all(self.client(cluster));
        let mut obj = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}});
        merge(&mut obj, &extra);
        let node: Node = serde_json::from_value(obj).unwrap();
        api.create(&PostParams::default(), &node)
            .await
            .expect("create node");
        let status = json!({"status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]
        }});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("node status");
        // The pods a test creates next are judged against this node only once the scheduler
        // has seen it: its node watch and its pod watch are separate streams.
        if let Some(s) = &self.scheduler {
            let deadline = std::time::Instant::now() + PATIENCE;
            while !s.knows_node(cluster, name) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the scheduler never saw node {cluster}/{name}"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }

    /// Creates a pod in `default` requesting `cpu`, with `extra` spec/metadata merged in.
    pub async fn pod(&self, cluster: &str, name: &str, cpu: &str, extra: Value) -> Pod {
        let mut obj = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}
        });
        merge(&mut obj, &extra);
        let pod: Pod = serde_json::from_value(obj).unwrap();
        self.pods(cluster)
            .create(&PostParams::default(), &pod)
            .await
            .expect("create pod")
    }

    /// Waits until the pod is bound; returns its node.
    pub async fn bound(&self, cluster: &str, name: &str) -> String {
        let pod = self
            .wait_pod(cluster, name, |p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_ref())
                    .is_some_and(|n| !n.is_empty())
            })
            .await;
        pod.spec.unwrap().node_name.unwrap()
    }

    /// Waits until the pod is marked unschedulable; returns the condition's message.
    pub async fn unschedulable(&self, cluster: &str, name: &str) -> String {
        let pod = self
            .wait_pod(cluster, name, |p| scheduled_condition(p).is_some())
            .await;
        let (reason, message) = scheduled_condition(&pod).unwrap();
        assert_eq!(reason, "Unschedulable");
        message
    }

    /// Waits until `cond` holds for the pod.
    pub async fn wait_pod(&self, cluster: &str, name: &str, cond: impl Fn(&Pod) -> bool) -> Pod {
        let api = self.pods(cluster);
        let wait = await_condition(api, name, move |p: Option<&Pod>| p.is_some_and(&cond));
        tokio::time::timeout(PATIENCE, wait)
            .await
            .unwrap_or_else(|_| panic!("pod {cluster}/{name} never reached the condition"))
            .expect("watch")
            .expect("pod exists")
    }

    /// Waits until the pod is gone or terminating.
    pub async fn gone_or_terminating(&self, cluster: &str, name: &str) -> Option<Pod> {
        let api = self.pods(cluster);
        let wait = await_condition(api, name, |p: Option<&Pod>| {
            p.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
        });
        tokio::time::timeout(PATIENCE, wait)
            .await
            .expect("victim deleted in time")
            .expect("watch")
    }

    /// Waits for an event about the pod with `reason`; returns it.
    pub async fn event(&self, cluster: &str, pod: &str, reason: &str) -> Event {
        let api: Api<Event> = Api::namespaced(self.client(cluster), "default");
        let stream = kube::runtime::watcher(api, kube::runtime::watcher::Config::default());
        let find = async {
            use futures::StreamExt;
            let mut stream = std::pin::pin!(kube::runtime::WatchStreamExt::applied_objects(stream));
            while let Some(e) = stream.next().await {
                let e: Event = e.expect("event watch");
                if e.involved_object.name.as_deref() == Some(pod)
                    && e.reason.as_deref() == Some(reason)
                {
                    return e;
                }
            }
            panic!("event stream ended");
        };
        tokio::time::timeout(PATIENCE, find)
            .await
            .unwrap_or_else(|_| panic!("no {reason} event for {pod}"))
    }
}

/// The `PodScheduled=False` condition's reason and message, if set.
pub fn scheduled_condition(p: &Pod) -> Option<(String, String)> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .map(|c| {
            (
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

/// Merges `patch` into `target` (objects recursively, everything else replaced).
pub fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p.clone(),
    }
}
