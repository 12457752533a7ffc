//! Test support: an in-process API server, and a lab of machines on the real kernel — a
//! fabric namespace with the machines' bridge, one namespace per machine running its
//! node's [`NodeNetwork`] on a thread inside it, and pods as namespaces wired by the real
//! CNI plugins with the project's test program serving in them.
//!
//! Everything is named `nn<pid>-<tag>-…` and removed when the lab is dropped, also when a
//! test fails: namespaces by their guards, servers by `kill_on_drop`, node networks when
//! their stop signal's sender is dropped. [`Lab::finish`] checks that nothing is left.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver::server::ApiServer;
use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodenet::podnet::cni::{self, Attachment, Cni};
use nodenet::podnet::{Fabric, FabricConfig, Machine, Netns, NetnsTask, netns};
use nodenet::{NodeNetwork, NodeNetworkConfig};
use tokio::process::Child;
use tokio::sync::oneshot;

/// How long any wait may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(30);
/// The cluster DNS address.
pub const DNS_IP: &str = "10.96.0.10";

pub struct Env {
    pub server: Arc<ApiServer>,
    pub client: kube::Client,
    _dir: tempfile::TempDir,
}

impl Env {
    pub async fn start() -> Env {
        let (server, dir) = testkit::Server::start().await.into_parts();
        let client = testkit::server::clients(&server)
            .cluster("root")
            .expect("root client");
        Env {
            server,
            client,
            _dir: dir,
        }
    }
}

/// The test program, built static once per run.
pub fn mtest() -> PathBuf {
    testimages::mtest_binary()
        .expect("the mtest binary builds")
        .to_path_buf()
}

/// A node of the lab: its machine, and its network running inside it.
pub struct LabNode {
    pub name: String,
    pub machine: Machine,
    pub pod_cidr: Ipv4Net,
    pub cni: Cni,
    pub conflist: serde_json::Value,
    stop: Option<oneshot::Sender<()>>,
    task: Option<NetnsTask<nodenet::Result<()>>>,
}

impl LabNode {
    pub fn ip(&self) -> Ipv4Addr {
        self.machine.address()
    }
}

pub struct Lab {
    pub prefix: String,
    pub client: kube::Client,
    pub nodes: Vec<LabNode>,
    /// Pods' namespaces and servers (dropped before the machines).
    pub pods: Vec<TestPod>,
    /// The fabric's namespace doubles as a client outside every node (at the gateway
    /// address 10.99.0.1).
    pub fabric: Option<Fabric>,
    pub external: Netns,
    dir: tempfile::TempDir,
}

fn unique(tag: &str) -> String {
    format!("nn{}-{tag}", std::process::id())
}

async fn patch_status<K>(api: &Api<K>, name: &str, status: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "status": status })),
    )
    .await
    .expect("status patched");
}

impl Lab {
    /// A fabric with `n` machines and their Node objects (podCIDR 10.244.<i+1>.0/24,
    /// InternalIP 10.99.0.<i+2>), and the `kube-dns` Service.
    pub async fn new(env: &Env, tag: &str, n: usize) -> Lab {
        let prefix = unique(tag);
        let fabric_ns = Netns::create(&format!("{prefix}-fab"))
            .await
            .expect("fabric namespace");
        let external = Netns::existing(fabric_ns.name());
        let config = FabricConfig::default();
        let fabric = Fabric::create(config.clone(), Some(fabric_ns))
            .await
            .expect("fabric");
        let dir = tempfile::tempdir().expect("tempdir");
        let nodes_api: Api<Node> = Api::all(env.client.clone());
        let mut nodes = Vec::new();
        for i in 0..n {
            let addr = config.machine_address(i as u32).expect("an address");
            let machine = fabric
                .add_machine(&format!("{prefix}-m{i}"), addr)
                .await
                .expect("machine");
            let name = format!("node-{i}");
            let pod_cidr: Ipv4Net = format!("10.244.{}.0/24", i + 1).parse().unwrap();
            let node: Node = serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "spec": {"podCIDR": pod_cidr.to_string(), "podCIDRs": [pod_cidr.to_string()]}
            }))
            .unwrap();
            nodes_api
                .create(&PostParams::default(), &node)
                .await
                .expect("node created");
            patch_status(
                &nodes_api,
                &name,
                serde_json::json!({"addresses": [{"type": "InternalIP", "address": addr.to_string()}]}),
            )
            .await;
            let data = dir.path().join(&name);
            nodes.push(LabNode {
                cni: Cni::new(cni::DEFAULT_BIN_DIR, Some(machine.netns())),
                conflist: cni::conflist(&format!("{prefix}-{i}"), pod_cidr, Some(&data)),
                name,
                machine,
                pod_cidr,
                stop: None,
                task: None,
            });
        }
        dns::kube_dns::ensure_service(&env.client, DNS_IP.parse().unwrap())
            .await
            .expect("kube-dns Service");
        Lab {
            prefix,
            client: env.client.clone(),
            nodes,
            pods: Vec::new(),
            fabric: Some(fabric),
            external,
            dir,
        }
    }

    /// Starts every node's network inside its machine and waits until it is up.
    pub async fn start_networks(&mut self) {
        for node in &mut self.nodes {
            let client = self.client.clone();
            let mut config = NodeNetworkConfig::new(&node.name, "10.244.0.0/16".parse().unwrap());
            config.dns = Some(dns::Config {
                upstream: dns::Upstream::Disabled,
                ..dns::Config::default()
            });
            config.min_sync_period = Duration::from_millis(50);
            config.sync_timeout = WAIT;
            let (stop, stopped) = oneshot::channel::<()>();
            let (up, is_up) = oneshot::channel::<nodenet::Result<()>>();
            let task = node
                .machine
                .netns()
                .spawn(move || async move {
                    let net = match NodeNetwork::start(client, config).await {
                        Ok(n) => {
                            let _ = up.send(Ok(()));
                            n
                        }
                        Err(e) => {
                            let _ = up.send(Err(e));
                            return Ok(());
                        }
                    };
                    let _ = stopped.await;
                    net.shutdown().await
                })
                .expect("a thread in the machine");
            node.stop = Some(stop);
            node.task = Some(task);
            match tokio::time::timeout(WAIT, is_up).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => panic!("{}'s network failed to start: {e}", node.name),
                other => panic!("{}'s network did not start: {other:?}", node.name),
            }
        }
    }

    /// Stops node `i`'s network and returns what it reported.
    pub async fn stop_network(&mut self, i: usize) -> nodenet::Result<()> {
        let node = &mut self.nodes[i];
        drop(node.stop.take());
        match node.task.take() {
            Some(t) => t.join().await.expect("the node thread ends"),
            None => Ok(()),
        }
    }

    /// A pod `name` in namespace `ns` on node `i`: its namespace wired by CNI, its Pod
    /// object Running with the address it got.
    pub async fn pod(
        &mut self,
        i: usize,
        ns: &str,
        name: &str,
        labels: &[(&str, &str)],
        ports: serde_json::Value,
    ) -> usize {
        let node = &self.nodes[i];
        let netns = Netns::create(&format!("{}-{name}", self.prefix))
            .await
            .expect("pod namespace");
        let attachment = node
            .cni
            .add(
                &node.conflist,
                &format!("{}-{name}", self.prefix),
                &netns.path(),
                "eth0",
            )
            .await
            .expect("CNI ADD");
        let ip = attachment.ipv4().expect("the pod got an address");
        ensure_namespace(&self.client, ns).await;
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"nodeName": node.name, "containers": [{"name": "main", "image": "mtest", "ports": ports}]}
        }))
        .unwrap();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        api.create(&PostParams::default(), &pod)
            .await
            .expect("pod created");
        patch_status(
            &api,
            name,
            serde_json::json!({"phase": "Running", "podIP": ip.to_string(), "podIPs": [{"ip": ip.to_string()}]}),
        )
        .await;
        self.pods.push(TestPod {
            name: name.to_string(),
            node: i,
            ip,
            netns,
            attachment,
            servers: Vec::new(),
        });
        self.pods.len() - 1
    }

    /// Stops every network, checks the kernel holds none of their rules or routes, and
    /// removes pods, machines and the fabric, checking no namespace is left.
    pub async fn finish(mut self) {
        for i in 0..self.nodes.len() {
            self.stop_network(i).await.expect("a clean shutdown");
            assert_clean(self.nodes[i].machine.netns()).await;
        }
        for p in std::mem::take(&mut self.pods) {
            let node = &self.nodes[p.node];
            node.cni
                .del(&node.conflist, &p.attachment)
                .await
                .expect("CNI DEL");
            drop(p.servers);
            p.netns.delete().await.expect("pod namespace deleted");
        }
        let prefix = self.prefix.clone();
        for n in std::mem::take(&mut self.nodes) {
            n.machine.delete().await.expect("machine deleted");
        }
        if let Some(f) = self.fabric.take() {
            f.delete().await.expect("fabric deleted");
        }
        let left: Vec<String> = netns::list()
            .await
            .expect("ip netns list")
            .into_iter()
            .filter(|n| n.starts_with(&prefix))
            .collect();
        assert!(left.is_empty(), "namespaces left behind: {left:?}");
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // On a failed test: stop the networks (their threads see the closed channel), then
        // the pods', machines' and fabric's guards delete the namespaces.
        for n in &mut self.nodes {
            drop(n.stop.take());
        }
        self.pods.clear();
    }
}

/// Asserts that `ns` holds none of the node network's tables and routes.
pub async fn assert_clean(ns: &Netns) {
    let out = ns
        .exec("nft", &["list", "tables"])
        .await
        .expect("nft list tables");
    for (family, table) in nodenet::node::TABLES {
        let line = format!("table {} {table}", family.as_str());
        assert!(
            !out.stdout.lines().any(|l| l.trim() == line),
            "{line} is left in {}:\n{}",
            ns.name(),
            out.stdout
        );
    }
    let routes = ns
        .exec(
            "ip",
            &[
                "route",
                "show",
                "proto",
                nodenet::podnet::routes::ROUTE_PROTOCOL,
            ],
        )
        .await
        .expect("ip route");
    assert!(
        routes.stdout.trim().is_empty(),
        "routes left in {}: {}",
        ns.name(),
        routes.stdout
    );
}

async fn ensure_namespace(client: &kube::Client, name: &str) {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    if api.get_opt(name).await.expect("get namespace").is_some() {
        return;
    }
    let ns = serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("namespace {name}: {e}"),
    }
}

/// A pod: a namespace on a node's bridge.
pub struct TestPod {
    pub name: String,
    pub node: usize,
    pub ip: Ipv4Addr,
    pub netns: Netns,
    attachment: Attachment,
    servers: Vec<Child>,
}

/// Runs `program args…` in `ns` with a deadline; returns stdout on success, the error text
/// otherwise.
pub async fn run_in(ns: &Netns, program: &str, args: &[&str]) -> Result<String, String> {
    let mut cmd = ns.command(program);
    cmd.args(args).kill_on_drop(true);
    match tokio::time::timeout(Duration::from_secs(10), cmd.output()).await {
        Ok(Ok(out)) if out.status.success() => {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        }
        Ok(Ok(out)) => Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

/// One HTTP GET of `path` at `target` (`ip:port`) from `ns`, with the test program.
pub async fn http_get(
    ns: &Netns,
    target: &str,
    path: &str,
    timeout_s: f64,
) -> Result<String, String> {
    let m = mtest();
    let request = format!("GET {path} HTTP/1.0\r\n\r\n");
    let timeout = timeout_s.to_string();
    let out = run_in(
        ns,
        &m.display().to_string(),
        &["tcp", target, "--send", &request, "--timeout", &timeout],
    )
    .await?;
    match out.split_once("\r\n\r\n") {
        Some((_, body)) => Ok(body.to_string()),
        None => Err(format!("no HTTP answer: {out}")),
    }
}

/// Polls `f` until it returns `Some`, at most [`WAIT`].
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < WAIT {
        match f().await {
            Ok(v) => return v,
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what} did not happen within {WAIT:?}; last: {last}")
}

impl TestPod {
    /// Starts `mtest serve-http` on `port` with hostname `hostname` (its own UTS namespace).
    pub fn serve_http(&mut self, hostname: &str, port: u16) {
        let m = mtest();
        let script = format!(
            "hostname {hostname} && exec {} serve-http --port {port}",
            m.display()
        );
        let mut cmd = self.netns.command("unshare");
        cmd.args(["--uts", "sh", "-c", &script])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        self.servers
            .push(cmd.spawn().expect("the test server starts"));
    }
}

/// A selectorless Service with `ports` (JSON) and extra spec fields.
pub async fn service(
    client: &kube::Client,
    ns: &str,
    name: &str,
    spec: serde_json::Value,
) -> Service {
    ensure_namespace(client, ns).await;
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    let svc: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }))
    .expect("a Service");
    api.create(&PostParams::default(), &svc)
        .await
        .expect("service created")
}

pub fn cluster_ip(svc: &Service) -> String {
    svc.spec
        .as_ref()
        .and_then(|s| s.cluster_ip.clone())
        .expect("a cluster IP")
}

pub fn node_port(svc: &Service) -> u16 {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p[0].node_port)
        .expect("a node port") as u16
}

/// Sets the EndpointSlice of Service `svc` to `endpoints` (`(ip, node, ready)`) on `port`.
pub async fn set_endpoints(
    client: &kube::Client,
    ns: &str,
    svc: &str,
    port: (&str, u16, &str),
    endpoints: &[(Ipv4Addr, &str, bool)],
) {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), ns);
    let name = format!("{svc}-test");
    let eps: Vec<serde_json::Value> = endpoints
        .iter()
        .map(|(ip, node, ready)| {
            serde_json::json!({"addresses": [ip.to_string()], "nodeName": node,
                               "conditions": {"ready": ready, "serving": ready, "terminating": false}})
        })
        .collect();
    let mut slice: EndpointSlice = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": ns, "labels": {"kubernetes.io/service-name": svc}},
        "addressType": "IPv4",
        "endpoints": eps,
        "ports": [{"name": port.0, "port": port.1, "protocol": port.2}]
    }))
    .unwrap();
    match api.get_opt(&name).await.expect("get slice") {
        None => {
            api.create(&PostParams::default(), &slice)
                .await
                .expect("slice created");
        }
        Some(old) => {
            slice.metadata.resource_version = old.metadata.resource_version;
            api.replace(&name, &PostParams::default(), &slice)
                .await
                .expect("slice replaced");
        }
    }
}
