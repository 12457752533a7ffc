//! End-to-end streaming without containers: an in-process API server on HTTPS, a node whose
//! kubelet API is the real server of `node::kubelet::server` over a fake agent
//! ([`kubelet::FakeApi`]) and a fake streaming server running local processes
//! ([`streams`]), and real kubectl of every supported version.
#![allow(dead_code)]

pub mod kubelet;
pub mod streams;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use ::runtime::client::ClusterClients;
use apiserver::server::ApiServer;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use node::kubelet::server::{self as kserver, Config, KubeReviewer, Limits, ServingCert};
use serde_json::{Value, json};
use tokio::process::Command;

pub const VERSIONS: [&str; 7] = ["1.27", "1.28", "1.29", "1.30", "1.31", "1.32", "1.33"];
pub const T: Duration = Duration::from_secs(30);

/// The `kubectl.1.XX` binary (beside the `kubectl` on PATH).
pub fn kubectl_bin(version: &str) -> PathBuf {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("readlink -f \"$(command -v kubectl)\"")
        .output()
        .expect("sh runs");
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().to_string());
    let dir = path
        .parent()
        .map(|d| d.to_path_buf())
        .unwrap_or_else(|| PathBuf::from("/usr/lib/google-cloud-sdk/bin"));
    let bin = dir.join(format!("kubectl.{version}"));
    assert!(bin.exists(), "{} is missing", bin.display());
    bin
}

/// An API server serving HTTPS on loopback.
pub struct Cluster {
    pub server: Arc<ApiServer>,
    /// The system identity's client of the root cluster (in process).
    pub client: kube::Client,
    pub url: String,
    pub dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

impl Cluster {
    pub async fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let store = storage::embedded::EmbeddedStore::open(dir.path().join("store")).unwrap();
        let server = apiserver::server::start(Arc::new(store)).await.unwrap();
        // kube-apiserver's `--kubelet-preferred-address-types=InternalIP,Hostname`: the fake
        // node's hostname does not resolve.
        server
            .kubelet()
            .configure(apiserver::kubelet::KubeletOptions {
                preferred_address_types: vec!["InternalIP".into(), "Hostname".into()],
                ..Default::default()
            });
        let ca = pki::Ca {
            pair: server.control_plane().config().root_ca.clone(),
        };
        let serving = ca
            .issue_server("kube-apiserver", &["127.0.0.1".into(), "localhost".into()])
            .unwrap();
        let tls = apiserver::serve::tls_config(
            apiserver::serve::ServingCert::new(&serving.cert_pem, &serving.key_pem).unwrap(),
        )
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(apiserver::serve::serve(
            server.clone(),
            listener,
            tls,
            async move {
                let _ = stopped.await;
            },
        ));
        let admin = ca
            .issue_client("kubernetes-admin", &["system:masters"])
            .unwrap();
        let kubeconfig = pki::kubeconfig("test", &url, &ca.pair.cert_pem, "admin", &admin);
        std::fs::write(dir.path().join("kubeconfig"), kubeconfig).unwrap();
        let client =
            ClusterClients::in_memory(apiserver::local::LocalService::system(server.clone()))
                .cluster("root")
                .unwrap();
        Cluster {
            server,
            client,
            url,
            dir,
            stop: Some(stop),
        }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// The system identity's client of a logical cluster (`root` included).
    pub fn client_of(&self, logical: &str) -> kube::Client {
        ClusterClients::in_memory(apiserver::local::LocalService::system(self.server.clone()))
            .cluster(logical)
            .unwrap()
    }

    /// The CA of a logical cluster (its kubelets' client CA).
    pub fn ca_of(&self, logical: &str) -> pki::Ca {
        controlplane::tenancy::ca_of(self.server.control_plane(), logical).unwrap()
    }

    /// Creates a logical cluster, waits until it is served and writes an admin kubeconfig
    /// for it (a client certificate of its own CA, at `/clusters/<name>`).
    pub async fn create_logical(&self, name: &str) -> PathBuf {
        let lcs: Api<kube::api::DynamicObject> = Api::all_with(
            self.client.clone(),
            &kube::api::ApiResource {
                group: "core.matryoshka.dev".into(),
                version: "v1alpha1".into(),
                api_version: "core.matryoshka.dev/v1alpha1".into(),
                kind: "LogicalCluster".into(),
                plural: "logicalclusters".into(),
            },
        );
        let lc: kube::api::DynamicObject = serde_json::from_value(json!({
            "apiVersion": "core.matryoshka.dev/v1alpha1", "kind": "LogicalCluster",
            "metadata": {"name": name},
        }))
        .unwrap();
        lcs.create(&PostParams::default(), &lc).await.unwrap();
        let deadline = tokio::time::Instant::now() + T;
        while !self.server.cluster_exists(name).await {
            assert!(
                tokio::time::Instant::now() < deadline,
                "cluster {name} never became ready"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let ca = self.ca_of(name);
        let admin = ca
            .issue_client("kubernetes-admin", &["system:masters"])
            .unwrap();
        let serving_ca = &self.server.control_plane().config().root_ca.cert_pem;
        let url = format!("{}/clusters/{name}", self.url);
        let path = self.dir.path().join(format!("kubeconfig-{name}"));
        std::fs::write(
            &path,
            pki::kubeconfig(name, &url, serving_ca, "admin", &admin),
        )
        .unwrap();
        path
    }

    pub fn kubectl(&self, version: &str) -> Command {
        self.kubectl_with(version, &self.kubeconfig())
    }

    pub fn kubectl_with(&self, version: &str, kubeconfig: &std::path::Path) -> Command {
        let mut c = Command::new(kubectl_bin(version));
        c.env("KUBECONFIG", kubeconfig)
            .env("HOME", self.dir.path())
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        c
    }

    /// Runs kubectl to its end (within the test timeout).
    pub async fn run(&self, version: &str, args: &[&str]) -> std::process::Output {
        let mut c = self.kubectl(version);
        c.args(args);
        tokio::time::timeout(T, c.output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {version} {args:?} did not finish"))
            .unwrap()
    }
}

/// A node: its fake agent, the kubelet API server in front of it, its Node object.
pub struct FakeNode {
    pub name: String,
    pub api: Arc<kubelet::FakeApi>,
    pub kubelet: kserver::RunningServer,
    /// The client of the node's logical cluster.
    pub client: kube::Client,
}

impl FakeNode {
    /// Starts the node's kubelet API (client certificates of the root cluster's CA, tokens
    /// and authorization through the cluster) and registers the Node.
    pub async fn start(cluster: &Cluster, name: &str) -> FakeNode {
        Self::start_in(cluster, "root", name).await
    }

    /// A node of logical cluster `logical`: its kubelet trusts that cluster's CA.
    pub async fn start_in(cluster: &Cluster, logical: &str, name: &str) -> FakeNode {
        let rt = streams::Runtime::start().await;
        let root = cluster.dir.path().join("nodes").join(logical).join(name);
        let api = Arc::new(kubelet::FakeApi::new(name, root, rt));
        let client = cluster.client_of(logical);
        let config = Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            serving: ServingCert::self_signed(name, &["127.0.0.1".into()]).unwrap(),
            client_ca_pem: Some(cluster.ca_of(logical).pair.cert_pem),
            anonymous: false,
            limits: Limits::default(),
        };
        let reviewer = Arc::new(KubeReviewer::new(client.clone()));
        let kubelet = kserver::start(config, api.clone(), reviewer).await.unwrap();
        let nodes: Api<Node> = Api::all(client.clone());
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        }))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
        let status = json!({"status": {
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet.addr().port()}},
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
        }});
        nodes
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
        FakeNode {
            name: name.to_string(),
            api,
            kubelet,
            client,
        }
    }

    /// Creates a pod bound to this node with `containers` (`name`, command) and sets its
    /// status: each container running (restart count 0), pod IP 127.0.0.1.
    pub async fn run_pod(
        &self,
        name: &str,
        containers: &[(&str, &[&str])],
        port: Option<u16>,
    ) -> Pod {
        self.run_pod_at(name, containers, port, "127.0.0.1").await
    }

    /// [`Self::run_pod`] with another pod IP.
    pub async fn run_pod_at(
        &self,
        name: &str,
        containers: &[(&str, &[&str])],
        port: Option<u16>,
        ip: &str,
    ) -> Pod {
        let specs: Vec<Value> = containers
            .iter()
            .map(|(c, cmd)| {
                let mut s = json!({"name": c, "image": "busybox:1.36"});
                if !cmd.is_empty() {
                    s["command"] = json!(cmd);
                }
                if let Some(p) = port {
                    s["ports"] = json!([{"containerPort": p}]);
                }
                s
            })
            .collect();
        let statuses: Vec<Value> = containers
            .iter()
            .map(|(c, _)| json!({"name": c, "ready": true, "restartCount": 0, "image": "busybox:1.36", "imageID": "", "started": true, "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}}}))
            .collect();
        self.create_pod(
            name,
            json!({"nodeName": self.name, "containers": specs}),
            json!({
                "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                "containerStatuses": statuses,
            }),
        )
        .await
    }

    /// Creates a pod with this spec and status and tells the fake agent about it.
    pub async fn create_pod(&self, name: &str, spec: Value, status: Value) -> Pod {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), "default");
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": spec,
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        let pod = pods
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": status})),
            )
            .await
            .unwrap();
        for cs in pod
            .status
            .iter()
            .flat_map(|s| s.container_statuses.iter().flatten())
        {
            if cs.state.as_ref().and_then(|s| s.running.as_ref()).is_some() {
                self.api.running.lock().insert(kubelet::FakeApi::instance(
                    "default",
                    name,
                    &cs.name,
                    cs.restart_count,
                ));
            }
        }
        self.api.pods.write().push(pod.clone());
        pod
    }

    /// Appends CRI log lines to an instance's log.
    pub fn log(&self, pod: &str, container: &str, restart: i32, lines: &[String]) {
        use std::io::Write;
        let path = self.api.log_path("default", pod, container, restart);
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        for l in lines {
            f.write_all(l.as_bytes()).unwrap();
        }
    }

    /// Marks an instance as exited.
    pub fn exit(&self, pod: &str, container: &str, restart: i32) {
        self.api.running.lock().remove(&kubelet::FakeApi::instance(
            "default", pod, container, restart,
        ));
    }
}

/// A non-loopback address on this host for a test's "pod IP" (the API server refuses to proxy
/// to loopback, and endpoints may not be loopback): one address of the benchmarking range
/// 198.18.0.0/15 added to `lo` (traffic to it never leaves the host), removed again on drop.
pub struct LocalAddress {
    pub ip: String,
}

impl LocalAddress {
    pub fn new() -> LocalAddress {
        let pid = std::process::id();
        let ip = format!("198.18.{}.{}", (pid >> 8) & 0xff, (pid & 0xff).max(1));
        let _ = std::process::Command::new("ip")
            .args(["addr", "del", &format!("{ip}/32"), "dev", "lo"])
            .output();
        let out = std::process::Command::new("ip")
            .args(["addr", "add", &format!("{ip}/32"), "dev", "lo"])
            .output()
            .expect("ip runs");
        assert!(
            out.status.success(),
            "ip addr add: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        LocalAddress { ip }
    }
}

impl Drop for LocalAddress {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["addr", "del", &format!("{}/32", self.ip), "dev", "lo"])
            .output();
    }
}

/// A CRI log line of `stdout` at second `s` of 2024-01-01 12:00.
pub fn cri_line(s: u32, text: &str) -> String {
    format!("2024-01-01T12:00:{s:02}.123456789Z stdout F {text}\n")
}

pub fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}
