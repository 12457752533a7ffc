//! The `process` infrastructure provider: each machine is a real node — a `matryoshka node`
//! process (the CRI node agent with its own containerd) in a network namespace of its own,
//! on the platform's machine LAN ([`nodenet::podnet::Fabric`], a bridge whose first address
//! is where machines reach the API server and the registry) — a machine in everything but
//! the hardware.
//!
//! A machine joins its workload cluster as a real one does: the provider writes a bootstrap
//! token (`kube-system/bootstrap-token-<id>`, one per machine, expiring) and the bindings
//! kubeadm makes for the `system:bootstrappers` group, hands the agent a bootstrap kubeconfig
//! with only that token, and the agent obtains its node client certificate through a
//! CertificateSigningRequest (TLS bootstrap). Its Node carries `spec.providerID`
//! `process://<name>` and the machine's address; its roles and the other labels a kubelet may
//! not set on itself (NodeRestriction) come from its Machine, which the Machine controller
//! syncs onto the Node as Cluster API does.
//!
//! A machine whose agent dies stays dead (a crashed host is not rebooted by its provider):
//! its Node goes `Unknown` and the MachineHealthCheck replaces it. Removing a machine stops
//! the agent (SIGTERM: it removes its pods, rules and containerd), then kills whatever of it
//! is left (processes in its namespace and its cgroups), unmounts what it mounted, deletes its
//! data, cgroups, namespace and bootstrap token.
//!
//! Machines are children of this process: a platform that restarts finds none running and
//! starts them again under the same names (a reboot); leftovers of a crashed platform are
//! cleaned when the provider starts.

use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use node::NodeTemplate;
use nodenet::podnet::{Fabric, Machine};
use rand::Rng;
use runtime::error::{Error, Result};
use serde_json::json;

use crate::provider::{Address, Provisioned};

/// The providerID scheme of process machines.
pub const PROVIDER_ID_PREFIX: &str = "process://";
/// The group a machine's bootstrap token adds (besides `system:bootstrappers`).
pub const BOOTSTRAP_GROUP: &str = "system:bootstrappers:matryoshka:worker";

/// What process machines are made with.
#[derive(Debug, Clone)]
pub struct ProcessOptions {
    /// The `matryoshka` binary the agents run.
    pub binary: PathBuf,
    /// Where machines keep their data (one directory per machine).
    pub data_dir: PathBuf,
    /// The API server's port at the fabric's gateway address.
    pub api_port: u16,
    /// The CA bundle (PEM) machines trust the API server and the registry with.
    pub ca_pem: String,
    /// How long a machine's bootstrap token is valid (kubeadm: 24 h).
    pub token_ttl: Duration,
    /// How long a stopping agent may take before what is left is killed.
    pub stop_timeout: Duration,
    /// Where the agents' cluster DNS forwards names outside the cluster (`none`,
    /// `resolv-conf`, or `IP[:PORT],...`).
    pub dns_upstream: String,
}

impl ProcessOptions {
    pub fn new(binary: PathBuf, data_dir: PathBuf, api_port: u16, ca_pem: String) -> Self {
        ProcessOptions {
            binary,
            data_dir,
            api_port,
            ca_pem,
            token_ttl: Duration::from_secs(24 * 3600),
            stop_timeout: Duration::from_secs(30),
            dns_upstream: "resolv-conf".into(),
        }
    }
}

/// A machine this provider runs.
struct Running {
    cluster: String,
    machine: Option<Machine>,
    index: u32,
    pid: Option<u32>,
    exited: Arc<AtomicBool>,
    dir: PathBuf,
    token_id: String,
}

/// The process machines of every workload cluster served by this platform.
pub struct ProcessProvider {
    options: ProcessOptions,
    fabric: Arc<Fabric>,
    machines: tokio::sync::Mutex<HashMap<String, Running>>,
}

impl std::fmt::Debug for ProcessProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessProvider")
            .field("options", &self.options)
            .field("fabric", &self.fabric.config())
            .finish_non_exhaustive()
    }
}

fn retry(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Retry(format!("process machine: {what}: {e}"))
}

/// A namespace name for machine `name` (`ip netns` names are file names; kept short).
fn netns_name(name: &str) -> String {
    format!("mm-{:08x}", crate::names::fnv32a(name.as_bytes()))
}

/// The cgroup every pod cgroup of machine `name` is below.
fn cgroup_root(name: &str) -> String {
    format!("/matryoshka-machine-{name}")
}

fn random_token(len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..len)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

impl ProcessProvider {
    /// A provider adding machines to `fabric`. Leftovers of an earlier run under
    /// `options.data_dir` (a platform that crashed with machines running) are cleaned first.
    pub async fn new(options: ProcessOptions, fabric: Arc<Fabric>) -> Self {
        let p = ProcessProvider {
            options,
            fabric,
            machines: Default::default(),
        };
        if let Ok(entries) = std::fs::read_dir(&p.options.data_dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                tracing::info!(machine = %name, "cleaning up a machine left by an earlier run");
                p.clean_up(&name, &e.path()).await;
            }
        }
        p
    }

    fn fabric_gateway(&self) -> Ipv4Addr {
        self.fabric.config().gateway()
    }

    /// The API server's URL for workload cluster `cluster`, as machines reach it.
    pub fn server_url(&self, cluster: &str) -> String {
        let base = format!(
            "https://{}:{}",
            self.fabric_gateway(),
            self.options.api_port
        );
        if cluster == runtime::client::ROOT {
            base
        } else {
            format!("{base}/clusters/{cluster}")
        }
    }

    fn provisioned(name: &str, address: Ipv4Addr) -> Provisioned {
        Provisioned {
            provider_id: format!("{PROVIDER_ID_PREFIX}{name}"),
            addresses: vec![
                Address {
                    type_: "InternalIP",
                    address: address.to_string(),
                },
                Address {
                    type_: "Hostname",
                    address: name.to_string(),
                },
            ],
        }
    }

    /// Makes machine `name` run in workload cluster `cluster` (reached with `client`) from
    /// `template`. A machine already started answers what it is, running or not.
    pub async fn ensure(
        &self,
        clients: &runtime::client::ClusterClients,
        cluster: &str,
        name: &str,
        template: &NodeTemplate,
    ) -> Result<Provisioned> {
        let client = &clients.cluster(cluster)?;
        let mut machines = self.machines.lock().await;
        if let Some(r) = machines.get(name) {
            let address = r
                .machine
                .as_ref()
                .map(Machine::address)
                .unwrap_or(Ipv4Addr::UNSPECIFIED);
            return Ok(Self::provisioned(name, address));
        }
        let used: BTreeSet<u32> = machines.values().map(|r| r.index).collect();
        let index = (0..u32::MAX)
            .find(|i| !used.contains(i))
            .ok_or_else(|| retry("addresses", "none left"))?;
        let address = self.fabric.config().machine_address(index).ok_or_else(|| {
            retry(
                "addresses",
                format!("the machine subnet {} is full", self.fabric.config().subnet),
            )
        })?;
        let dir = self.options.data_dir.join(name);
        // A half-made machine of an earlier attempt goes first.
        self.clean_up(name, &dir).await;
        std::fs::create_dir_all(&dir).map_err(|e| retry("creating its directory", e))?;
        let token_id = random_token(6);
        let token_secret = random_token(16);
        ensure_bootstrap_access(client).await?;
        ensure_api_endpoints(client, self.fabric_gateway(), self.options.api_port).await?;
        write_token(
            client,
            &token_id,
            &token_secret,
            name,
            self.options.token_ttl,
        )
        .await?;
        let bootstrap = dir.join("bootstrap-kubelet.conf");
        let kubeconfig = bootstrap_kubeconfig(
            &self.server_url(cluster),
            &self.options.ca_pem,
            &format!("{token_id}.{token_secret}"),
        );
        pki::write_private(&bootstrap, &kubeconfig)
            .map_err(|e| retry("bootstrap kubeconfig", e))?;
        // The API server's kubelet client certificate is issued by the cluster's own CA.
        let client_ca = dir.join("ca.crt");
        let ca = cluster_ca(clients, cluster)
            .await?
            .unwrap_or_else(|| self.options.ca_pem.clone());
        std::fs::write(&client_ca, ca).map_err(|e| retry("its CA file", e))?;
        let machine = match self.fabric.add_machine(&netns_name(name), address).await {
            Ok(m) => m,
            Err(e) => {
                delete_token(client, &token_id).await;
                return Err(retry("its network namespace", e));
            }
        };
        let sizing = serde_json::to_string(&template.sizing).unwrap_or_else(|_| "{}".into());
        let log = std::fs::File::create(dir.join("agent.log"))
            .map_err(|e| retry("the agent's log", e))?;
        let registry = format!(
            "https://{}:{}",
            self.fabric_gateway(),
            self.options.api_port
        );
        let mut cmd = tokio::process::Command::new("nsenter");
        // Only the network namespace is entered: runc needs the host's /sys and cgroups.
        cmd.arg(format!("--net={}", machine.netns().path().display()))
            .arg("--")
            .arg(&self.options.binary)
            .args(["node", "--runtime", "cri"])
            .arg("--bootstrap-kubeconfig")
            .arg(&bootstrap)
            .arg("--kubeconfig")
            .arg(dir.join("kubelet.conf"))
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(["--node-name", name])
            .args(["--node-ip", &address.to_string()])
            .args(["--uplink", machine.uplink()])
            .args(["--cgroup-root", &cgroup_root(name)])
            .args(["--registry-mirror", &registry])
            .arg("--client-ca-file")
            .arg(&client_ca)
            .args(["--provider-id", &format!("{PROVIDER_ID_PREFIX}{name}")])
            .args(["--sizing", &sizing])
            .args(["--cluster-dns-upstream", &self.options.dns_upstream])
            .arg("--remove-pods-on-exit")
            .arg("--rotate-certificates")
            .arg("--rotate-server-certificates")
            .env(
                "MATRYOSHKA_LOG",
                std::env::var("MATRYOSHKA_MACHINE_LOG").unwrap_or_else(|_| "info".into()),
            )
            .env_remove("RUST_BACKTRACE")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                delete_token(client, &token_id).await;
                let _ = machine.delete().await;
                return Err(retry("starting its agent", e));
            }
        };
        let pid = child.id();
        let _ = std::fs::write(dir.join("agent.pid"), pid.unwrap_or(0).to_string());
        let exited = Arc::new(AtomicBool::new(false));
        {
            let exited = exited.clone();
            let name = name.to_string();
            let log_path = dir.join("agent.log");
            tokio::spawn(async move {
                let status = child.wait().await;
                exited.store(true, Ordering::SeqCst);
                tracing::info!(machine = %name, ?status, "a process machine's agent exited");
                // Its data goes with the machine: what it said last stays in this log.
                if !matches!(&status, Ok(s) if s.success() || s.code().is_none()) {
                    let log = tokio::fs::read_to_string(&log_path)
                        .await
                        .unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(15).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    tracing::warn!(machine = %name, "the agent failed; its last words:\n{}", tail.join("\n"));
                }
            });
        }
        tracing::info!(cluster, machine = name, %address, ?pid, "started a process machine");
        machines.insert(
            name.to_string(),
            Running {
                cluster: cluster.to_string(),
                machine: Some(machine),
                index,
                pid,
                exited,
                dir,
                token_id,
            },
        );
        Ok(Self::provisioned(name, address))
    }

    /// Stops and removes machine `name` (its Node stays for the Machine controller).
    pub async fn remove(&self, client: Option<&kube::Client>, name: &str) -> Result<()> {
        // Taken out under the lock, stopped outside it: machines stop side by side.
        let taken = self.machines.lock().await.remove(name);
        let Some(mut r) = taken else {
            // Not started by this process: whatever an earlier run left goes.
            self.clean_up(name, &self.options.data_dir.join(name)).await;
            return Ok(());
        };
        tracing::info!(cluster = %r.cluster, machine = name, "stopping a process machine");
        self.stop(&mut r).await;
        if let Some(c) = client {
            delete_token(c, &r.token_id).await;
        }
        Ok(())
    }

    /// Whether machine `name` runs here and its agent is alive.
    pub async fn running(&self, name: &str) -> bool {
        self.machines
            .lock()
            .await
            .get(name)
            .is_some_and(|r| !r.exited.load(Ordering::SeqCst))
    }

    /// The pid of machine `name`'s agent while it runs.
    pub async fn agent_pid(&self, name: &str) -> Option<u32> {
        let m = self.machines.lock().await;
        let r = m.get(name)?;
        (!r.exited.load(Ordering::SeqCst))
            .then_some(r.pid)
            .flatten()
    }

    /// Stops every machine (their Nodes stay and go `Unknown`).
    pub async fn stop_all(&self) {
        let all: Vec<(String, Running)> = self.machines.lock().await.drain().collect();
        futures::future::join_all(all.into_iter().map(|(name, mut r)| async move {
            tracing::info!(machine = %name, "stopping a process machine");
            self.stop(&mut r).await;
        }))
        .await;
    }

    async fn stop(&self, r: &mut Running) {
        if let Some(pid) = r.pid
            && !r.exited.load(Ordering::SeqCst)
        {
            signal(pid, rustix::process::Signal::TERM);
            let deadline = tokio::time::Instant::now() + self.options.stop_timeout;
            while !r.exited.load(Ordering::SeqCst) && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            if !r.exited.load(Ordering::SeqCst) {
                signal(pid, rustix::process::Signal::KILL);
            }
        }
        let name = r
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let machine = r.machine.take();
        kill_machine_processes(&name, machine.as_ref().map(|m| m.netns().name())).await;
        if let Some(m) = machine
            && let Err(e) = m.delete().await
        {
            tracing::warn!(machine = %name, error = %e, "deleting a machine's namespace");
        }
        remove_machine_files(&name, &r.dir).await;
    }

    /// Removes what machine `name` left, whoever started it.
    async fn clean_up(&self, name: &str, dir: &Path) {
        let ns = netns_name(name);
        let exists = Path::new(nodenet::podnet::netns::NETNS_DIR)
            .join(&ns)
            .exists();
        if let Ok(pid) = std::fs::read_to_string(dir.join("agent.pid"))
            && let Ok(pid) = pid.trim().parse::<u32>()
            && pid > 0
            && agent_is(pid, name)
        {
            signal(pid, rustix::process::Signal::KILL);
        }
        kill_machine_processes(name, exists.then_some(ns.as_str())).await;
        if exists {
            let _ = nodenet::exec::ip(&["netns", "delete", &ns]).await;
        }
        remove_machine_files(name, dir).await;
    }
}

/// The CA of logical cluster `cluster` (`matryoshka-system/<cluster>-pki` in the root
/// cluster); `None` for the root cluster, whose CA is the platform's.
async fn cluster_ca(
    clients: &runtime::client::ClusterClients,
    cluster: &str,
) -> Result<Option<String>> {
    if cluster == runtime::client::ROOT {
        return Ok(None);
    }
    let api: Api<Secret> =
        Api::namespaced(clients.cluster(runtime::client::ROOT)?, "matryoshka-system");
    let secret = api.get_opt(&format!("{cluster}-pki")).await?;
    Ok(secret.and_then(|s| s.data).and_then(|d| {
        d.get("ca.crt")
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
    }))
}

/// Whether process `pid` is the agent of machine `name` (a pid file can outlive its process
/// and the pid be reused).
fn agent_is(pid: u32, name: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| {
            let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
            args.windows(2)
                .any(|w| w[0] == b"--node-name" && w[1] == name.as_bytes())
        })
        .unwrap_or(false)
}

fn signal(pid: u32, sig: rustix::process::Signal) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

/// Every process of cgroup tree `dir` (one hierarchy).
fn cgroup_pids(dir: &Path, out: &mut BTreeSet<u32>) {
    if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        out.extend(procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                cgroup_pids(&e.path(), out);
            }
        }
    }
}

/// The machine's cgroup trees, one per hierarchy.
fn cgroup_trees(name: &str) -> Vec<PathBuf> {
    let root = cgroup_root(name);
    let rel = root.trim_start_matches('/');
    std::fs::read_dir("/sys/fs/cgroup")
        .map(|hs| {
            hs.flatten()
                .map(|h| h.path().join(rel))
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default()
}

/// Kills what is left of a machine: processes in its namespace (containerd, shims) and in
/// its cgroups (containers), until none remains.
async fn kill_machine_processes(name: &str, netns: Option<&str>) {
    for _ in 0..50 {
        let mut pids = BTreeSet::new();
        if let Some(ns) = netns
            && let Ok(out) = nodenet::exec::ip(&["netns", "pids", ns]).await
        {
            pids.extend(
                out.stdout
                    .lines()
                    .filter_map(|l| l.trim().parse::<u32>().ok()),
            );
        }
        for tree in cgroup_trees(name) {
            cgroup_pids(&tree, &mut pids);
        }
        pids.remove(&std::process::id());
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            signal(pid, rustix::process::Signal::KILL);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tracing::warn!(machine = name, "processes of a machine survive SIGKILL");
}

/// Unmounts everything below `dir` (deepest first), removes it and the machine's cgroups.
async fn remove_machine_files(name: &str, dir: &Path) {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let prefix = format!("{}/", dir.display());
    let mut points: Vec<String> = mounts
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mount_path)
        .filter(|p| p.starts_with(&prefix))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    points.dedup();
    for p in points {
        if let Err(e) = rustix::mount::unmount(p.as_str(), rustix::mount::UnmountFlags::DETACH) {
            tracing::debug!(mount = %p, error = %e, "unmounting a machine's mount");
        }
    }
    // A containerd socket too deep for the data directory lives under /run.
    let socket = node::kubelet::Layout::new(dir.join("data")).containerd_socket();
    if !socket.starts_with(dir) {
        let _ = std::fs::remove_file(&socket);
        let _ = std::fs::remove_file(format!("{}.ttrpc", socket.display()));
    }
    if dir.exists()
        && let Err(e) = std::fs::remove_dir_all(dir)
    {
        tracing::warn!(dir = %dir.display(), error = %e, "removing a machine's data");
    }
    for tree in cgroup_trees(name) {
        remove_cgroup_tree(&tree);
    }
}

/// `/proc/self/mountinfo` escapes spaces, tabs, newlines and backslashes as octal.
fn unescape_mount_path(p: &str) -> String {
    p.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

fn remove_cgroup_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// A kubeconfig with only the server, its CA and a bootstrap token.
pub fn bootstrap_kubeconfig(server: &str, ca_pem: &str, token: &str) -> String {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem.as_bytes());
    let doc = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": "tls-bootstrap-token-user", "user": {"token": token}}],
        "contexts": [{"name": "tls-bootstrap", "context": {"cluster": "cluster", "user": "tls-bootstrap-token-user"}}],
        "current-context": "tls-bootstrap",
    });
    doc.to_string()
}

/// The role of what the node agent runs besides a kubelet — kube-proxy (upstream's
/// `system:node-proxier`) and the node's cluster DNS server, which publishes itself in an
/// EndpointSlice of `kube-system/kube-dns` — granted to every node.
pub const NODE_NETWORK_ROLE: &str = "matryoshka:node-network";

/// Points the workload cluster's `default/kubernetes` Service at the API server as machines
/// reach it (upstream's endpoint reconciler writes the advertise address there), so in-cluster
/// clients of its pods (`KUBERNETES_SERVICE_HOST`) get through; the server serves each of them
/// its token's cluster.
async fn ensure_api_endpoints(client: &kube::Client, ip: Ipv4Addr, port: u16) -> Result<()> {
    let ports = json!([{"name": "https", "port": port, "protocol": "TCP"}]);
    let params = PatchParams::apply(crate::crds::FIELD_MANAGER).force();
    let endpoints: Api<k8s_openapi::api::core::v1::Endpoints> =
        Api::namespaced(client.clone(), "default");
    let e = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "kubernetes", "namespace": "default",
            "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": [{"addresses": [{"ip": ip.to_string()}], "ports": ports}],
    });
    endpoints
        .patch("kubernetes", &params, &Patch::Apply(&e))
        .await
        .map_err(|e| retry("the kubernetes Service's Endpoints", e))?;
    let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        Api::namespaced(client.clone(), "default");
    let s = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "kubernetes", "namespace": "default",
            "labels": {"kubernetes.io/service-name": "kubernetes"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip.to_string()], "conditions": {"ready": true}}],
        "ports": ports,
    });
    slices
        .patch("kubernetes", &params, &Patch::Apply(&s))
        .await
        .map_err(|e| retry("the kubernetes Service's EndpointSlice", e))?;
    Ok(())
}

/// What a workload cluster needs before its first process machine joins: the bindings kubeadm
/// makes so bootstrap tokens can ask for node certificates (approved automatically) and
/// nodes can renew theirs, the node network's role, and the cluster DNS Service (kubeadm's
/// CoreDNS addon; its servers are the nodes').
async fn ensure_bootstrap_access(client: &kube::Client) -> Result<()> {
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": NODE_NETWORK_ROLE},
        "rules": [
            {"apiGroups": [""], "resources": ["services", "endpoints", "namespaces", "nodes", "pods"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
        ],
    });
    roles
        .patch(
            NODE_NETWORK_ROLE,
            &PatchParams::apply(crate::crds::FIELD_MANAGER).force(),
            &Patch::Apply(&role),
        )
        .await?;
    dns::kube_dns::ensure_service(client, dns::kube_dns::DEFAULT_CLUSTER_IP)
        .await
        .map_err(|e| retry("the cluster DNS Service", e))?;
    let api: Api<ClusterRoleBinding> = Api::all(client.clone());
    let bindings = [
        (
            "kubeadm:kubelet-bootstrap",
            "system:node-bootstrapper",
            "system:bootstrappers",
        ),
        (
            "kubeadm:node-autoapprove-bootstrap",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            "system:bootstrappers",
        ),
        (NODE_NETWORK_ROLE, NODE_NETWORK_ROLE, "system:nodes"),
        (
            "kubeadm:node-autoapprove-certificate-rotation",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            "system:nodes",
        ),
    ];
    for (name, role, group) in bindings {
        let b = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
        });
        api.patch(
            name,
            &PatchParams::apply(crate::crds::FIELD_MANAGER).force(),
            &Patch::Apply(&b),
        )
        .await?;
    }
    Ok(())
}

async fn write_token(
    client: &kube::Client,
    id: &str,
    secret: &str,
    machine: &str,
    ttl: Duration,
) -> Result<()> {
    let api: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    let expiration = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(ttl.as_secs() as i64))
        .unwrap_or(jiff::Timestamp::MAX)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let name = format!("bootstrap-token-{id}");
    let s = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "kube-system",
                     "labels": {"infrastructure.matryoshka.dev/machine": machine}},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {
            "token-id": id,
            "token-secret": secret,
            "expiration": expiration,
            "usage-bootstrap-authentication": "true",
            "auth-extra-groups": BOOTSTRAP_GROUP,
            "description": format!("the bootstrap token of machine {machine}"),
        },
    });
    api.patch(
        &name,
        &PatchParams::apply(crate::crds::FIELD_MANAGER).force(),
        &Patch::Apply(&s),
    )
    .await?;
    Ok(())
}

async fn delete_token(client: &kube::Client, id: &str) {
    let api: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    if let Err(e) = api
        .delete(&format!("bootstrap-token-{id}"), &DeleteParams::default())
        .await
        && !matches!(&e, kube::Error::Api(s) if s.code == 404)
    {
        tracing::warn!(token = id, error = %e, "deleting a machine's bootstrap token");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bootstrap_kubeconfig_holds_the_server_its_ca_and_only_the_token() {
        let text = bootstrap_kubeconfig("https://10.99.0.1:6443/clusters/c1", "PEM", "abcdef.0123");
        let kc: kube::config::Kubeconfig = serde_json::from_str(&text).expect("a kubeconfig");
        let cluster = kc.clusters[0].cluster.as_ref().expect("cluster");
        assert_eq!(
            cluster.server.as_deref(),
            Some("https://10.99.0.1:6443/clusters/c1")
        );
        let user = kc.auth_infos[0].auth_info.as_ref().expect("user");
        assert!(user.client_certificate_data.is_none());
        assert!(user.token.is_some());
    }

    #[test]
    fn machine_names_make_short_stable_namespace_names() {
        let a = netns_name("kubernetes-demo-md0-7f9c2-abcde");
        assert_eq!(a, netns_name("kubernetes-demo-md0-7f9c2-abcde"));
        assert_ne!(a, netns_name("kubernetes-demo-md0-7f9c2-abcdf"));
        assert!(a.len() <= 15, "{a}");
    }

    #[test]
    fn mount_paths_are_read_as_the_kernel_escapes_them() {
        assert_eq!(unescape_mount_path("/a\\040b\\134c"), "/a b\\c");
    }
}
