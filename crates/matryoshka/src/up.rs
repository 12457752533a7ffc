//! `matryoshka up`: storage, certificates, the API server and the in-process components, with
//! a graceful drain on SIGTERM or Ctrl-C and serving-certificate rotation without a restart.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use apiserver::serve::ServingCert;
use pki::Ca;
use storage::Storage;

/// Flags of `matryoshka up` (named after kube-apiserver's where one exists).
#[derive(clap::Args, Debug, Clone)]
pub struct UpArgs {
    /// Where data, certificates and admin.conf live.
    #[arg(long, default_value = "./matryoshka-data")]
    pub data_dir: PathBuf,
    /// Where the root CA and the service-account key live (default `<data-dir>/pki`).
    /// Replicas over one etcd are given the same directory: the first creates what is
    /// missing, the others use it, so credentials of one replica work against every other.
    #[arg(long)]
    pub pki_dir: Option<PathBuf>,
    /// The host (and `:port` when it differs from `--secure-port`) clients reach the
    /// platform at — a load balancer in front of replicas, say: the admin kubeconfig's
    /// server, the service-account issuer, and a name of every serving certificate.
    #[arg(long)]
    pub external_hostname: Option<String>,
    /// This replica's identity in leader elections (default: hostname and process id).
    #[arg(long)]
    pub leader_identity: Option<String>,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind_address: IpAddr,
    /// The HTTPS port.
    #[arg(long, default_value_t = 6443)]
    pub secure_port: u16,
    /// Where pods reach the API server: the `default/kubernetes` Service's endpoints
    /// (kube-apiserver's flag). Default: the bind address when it is routable, else, with a
    /// real node, the node's address — where the server then listens too.
    #[arg(long)]
    pub advertise_address: Option<IpAddr>,
    /// Requests handled at once, shared fairly among logical clusters and their users
    /// (kube-apiserver's `--max-requests-inflight`); 0: four per core.
    #[arg(long, default_value_t = 0)]
    pub max_requests_inflight: usize,
    /// How long a request that is not a watch may take before it is answered 504
    /// (kube-apiserver's flag; a Go duration).
    #[arg(long, default_value = "1m0s", value_parser = parse_go_duration)]
    pub request_timeout: Duration,
    /// How long a client may take to send a request's headers (a Go duration).
    #[arg(long, default_value = "32s", value_parser = parse_go_duration)]
    pub request_header_timeout: Duration,
    /// Connections served at once.
    #[arg(long, default_value_t = 4096)]
    pub max_connections: usize,
    /// etcd endpoints (comma-separated); the embedded store is used when empty.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// The key prefix in etcd.
    #[arg(long, default_value = "/matryoshka")]
    pub etcd_prefix: String,
    /// Lifetime of the serving certificate; it is re-issued, without a restart, once two
    /// thirds of it have passed.
    #[arg(long, default_value_t = 365 * 24 * 3600)]
    pub serving_cert_validity_seconds: u64,
    /// Lifetime of the client certificates the platform issues (the admin kubeconfigs of the
    /// root cluster, of every logical cluster and of every tenant cluster); they are re-issued
    /// once two thirds of it have passed.
    #[arg(long, default_value_t = 365 * 24 * 3600)]
    pub client_cert_validity_seconds: u64,
    /// How long a service-account signing key signs before a new one takes over (the old one
    /// keeps verifying for the longest token lifetime).
    #[arg(long, default_value_t = 90 * 24 * 3600)]
    pub service_account_key_rotation_seconds: u64,
    /// A directory of Cluster API's CRDs as upstream publishes them (YAML files): installed
    /// with the platform, they give tenant clusters worker machines (MachineDeployments,
    /// MachineSets, Machines, MachineHealthChecks). Without them, and without Cluster API
    /// installed otherwise, tenant clusters have no workers.
    #[arg(long)]
    pub cluster_api_crds: Option<PathBuf>,
    /// Where ClusterBackups are written (default `<data-dir>/backups`).
    #[arg(long)]
    pub backup_dir: Option<PathBuf>,
    /// The shortest time between two scheduled backups of one ClusterBackup, whatever its
    /// schedule says.
    #[arg(long, default_value_t = 600)]
    pub backup_min_interval_seconds: u64,
    /// The longest lifetime of a token from TokenRequest (longer requests get this), and so how
    /// long a rotated-out service-account key keeps verifying.
    #[arg(long, default_value_t = 48 * 3600)]
    pub service_account_max_token_expiration_seconds: u64,
    /// Which node the root cluster gets: `auto` runs a real node when this machine can (root,
    /// a container runtime, the CNI plugins) and none otherwise; `real` requires one;
    /// `virtual` runs virtual nodes (`--virtual-nodes`, at least one); `none` runs no node.
    /// `--virtual-nodes N` without `--node` keeps the old behaviour: N virtual nodes only.
    #[arg(long, value_enum)]
    pub node: Option<NodeMode>,
    /// Do not run the syncer of shared-node tenant clusters (`spec.workers.mode: shared`):
    /// their pods are not run (for measuring the syncer's own cost).
    #[arg(long)]
    pub no_syncer: bool,
    /// Virtual nodes (no containers) to run in the root cluster, named `virtual-node-<i>`.
    #[arg(long, default_value_t = 0)]
    pub virtual_nodes: usize,
    /// The real node's CRI endpoint; when nothing answers there it starts its own containerd.
    #[arg(long, default_value = node::kubelet::config::DEFAULT_CRI_ENDPOINT)]
    pub cri_endpoint: String,
    /// The real node's address (its InternalIP, where the API server reaches its kubelet);
    /// default: the address of the machine's default route.
    #[arg(long)]
    pub node_ip: Option<IpAddr>,
    /// The real node's kubelet API port (0: any free port, reported in the Node's
    /// `daemonEndpoints`).
    #[arg(long, default_value_t = 10250)]
    pub kubelet_port: u16,
    /// The real node's data (its containerd, pods, logs); default `<data-dir>/node`.
    #[arg(long)]
    pub node_data_dir: Option<PathBuf>,
    /// Run the real node without its network (Services, NetworkPolicy, cluster DNS).
    #[arg(long)]
    pub no_node_network: bool,
    /// Where the real node's cluster DNS forwards names outside the cluster: `resolv-conf`
    /// (this machine's `/etc/resolv.conf`), `none`, or `IP[:PORT],...`.
    #[arg(long, default_value = "resolv-conf", value_parser = crate::real_node::parse_dns_upstream)]
    pub cluster_dns_upstream: dns::Upstream,
    /// Remove the real node's pods on exit instead of leaving them running for the next
    /// start to adopt (a machine being retired; tests).
    #[arg(long)]
    pub remove_pods_on_exit: bool,
    /// The instance type of those virtual nodes (capacity and kubelet reservations).
    #[arg(long, default_value = "u1.large")]
    pub virtual_node_instance_type: String,
    /// Where tenant clusters' worker machines come from when a TenantCluster does not say
    /// (`spec.workers.provider`): `process` runs each machine as a real node agent in a
    /// network namespace of its own, with its own containerd; `virtual` as nodes that run no
    /// containers; `auto` is `process` where this machine can run real nodes.
    #[arg(long, value_enum, default_value = "auto")]
    pub machine_provider: MachineProvider,
    /// The process machines' LAN: a bridge of this name whose first address is where
    /// machines reach the API server and the registry.
    #[arg(long, default_value = "mtk0")]
    pub machine_bridge: String,
    /// The process machines' subnet (the bridge has its first address); outside the
    /// Service range (10.96.0.0/12) and the pod network (10.244.0.0/16).
    #[arg(long, default_value = "10.240.0.0/16")]
    pub machine_subnet: ipnet::Ipv4Net,
    /// Where process machines' cluster DNS forwards names outside their cluster:
    /// `resolv-conf`, `none`, or `IP[:PORT],...`.
    #[arg(long, default_value = "resolv-conf", value_parser = machine_dns_upstream)]
    pub machine_dns_upstream: String,
    /// The longest lifetime of a certificate the CSR signer issues (kube-controller-manager's
    /// `--cluster-signing-duration`; a Go duration): nodes renew theirs at 70–90 % of it.
    #[arg(long, default_value = "8760h0m0s", value_parser = parse_go_duration)]
    pub cluster_signing_duration: Duration,
    /// How long a node may go without a heartbeat before it is `Unknown`
    /// (kube-controller-manager's `--node-monitor-grace-period`; a Go duration).
    #[arg(long, default_value = "40s", value_parser = parse_go_duration)]
    pub node_monitor_grace_period: Duration,
    /// How long an Event is kept after its last write (kube-apiserver's `--event-ttl`; a Go
    /// duration).
    #[arg(long, default_value = "1h0m0s", value_parser = parse_go_duration)]
    pub event_ttl: Duration,
    /// How long a node the autoscaler finds unneeded stays before it is removed (the cluster
    /// autoscaler's `--scale-down-unneeded-time`; a Go duration).
    #[arg(long, default_value = "10m0s", value_parser = parse_go_duration)]
    pub scale_down_unneeded_time: Duration,
    /// No scale-down of a cluster for this long after a scale-up (the cluster autoscaler's
    /// `--scale-down-delay-after-add`; a Go duration).
    #[arg(long, default_value = "10m0s", value_parser = parse_go_duration)]
    pub scale_down_delay_after_add: Duration,
    /// Addresses for the root cluster's `type: LoadBalancer` Services (the tenant clusters'
    /// load balancers among them): first-last ranges and CIDRs, comma-separated, as a
    /// MetalLB address pool lists them (`127.0.100.10-127.0.100.50`). Traffic to an address
    /// and port is carried to the Service's endpoints. Without a pool such Services stay
    /// pending, as in a cluster without a load balancer.
    #[arg(long, value_parser = parse_pool)]
    pub load_balancer_ip_range: Option<lb::Pool>,
    /// The root tenant's domain (Cozystack's `root-host`): a tenant's host is
    /// `<tenant>.<parent's host>` and a tenant cluster's `kubernetes-<name>.<tenant host>`,
    /// served on this port by SNI. Given, kubeconfigs use these names (resolve
    /// `*.<root host>` to this machine); without it clusters are still served at their
    /// names under `matryoshka.local`, and kubeconfigs use `/clusters/<name>` paths.
    #[arg(long)]
    pub root_host: Option<String>,
    /// The OIDC issuer whose ID tokens authenticate users of the root cluster (https).
    #[arg(long)]
    pub oidc_issuer_url: Option<String>,
    /// The client ID the tokens must be issued for (their audience).
    #[arg(long)]
    pub oidc_client_id: Option<String>,
    /// The claim giving the username (default `sub`).
    #[arg(long)]
    pub oidc_username_claim: Option<String>,
    /// Prepended to usernames (default `<issuer-url>#` unless the claim is `email`; `-`:
    /// none).
    #[arg(long)]
    pub oidc_username_prefix: Option<String>,
    /// The claim giving the groups (a string or a list).
    #[arg(long)]
    pub oidc_groups_claim: Option<String>,
    /// Prepended to every group.
    #[arg(long)]
    pub oidc_groups_prefix: Option<String>,
    /// `key=value` a token must carry (repeatable).
    #[arg(long)]
    pub oidc_required_claim: Vec<String>,
    /// The signing algorithms accepted (comma-separated; default RS256).
    #[arg(long, value_delimiter = ',')]
    pub oidc_signing_algs: Vec<String>,
    /// The CA of the issuer's serving certificate.
    #[arg(long)]
    pub oidc_ca_file: Option<PathBuf>,
    /// A structured `AuthenticationConfiguration` (YAML or JSON; its `jwt` issuers), instead
    /// of the `--oidc-*` flags.
    #[arg(long)]
    pub authentication_config: Option<PathBuf>,
    /// How many days a usage record is kept after its machine or pod ended.
    #[arg(long, default_value_t = 400)]
    pub usage_retention_days: u64,
    /// How often tenants' own etcds (`Tenant.spec.etcd`) are looked at for defragmentation
    /// (a Go duration; the seed's etcd app defragments hourly).
    #[arg(long, default_value = "1h0m0s", value_parser = parse_go_duration)]
    pub datastore_defrag_interval: Duration,
    /// `--quota-backend-bytes` of tenants' own etcds (the seed's: 0.95 × a 4 GiB volume).
    #[arg(long, default_value_t = (4u64 << 30) * 95 / 100)]
    pub datastore_quota_bytes: u64,
    /// Serve DropApp's `cluster.dropapp.ru/v1alpha1` TenantCluster (a name is enough: the
    /// cluster lives in the namespace of that name, its kubeconfig in Secret `vc-<name>`).
    /// Off by default: its plural is also the platform's own `tenantclusters`.
    #[arg(long)]
    pub dropapp_api: bool,
}

/// The console's OIDC sign-in: the `--oidc-issuer-url` provider as client `--oidc-client-id`
/// (the audience the API server accepts), trusting `--oidc-ca-file`.
fn console_oidc(args: &UpArgs) -> anyhow::Result<Option<console::oidc::OidcLogin>> {
    let (Some(issuer), Some(client)) = (&args.oidc_issuer_url, &args.oidc_client_id) else {
        return Ok(None);
    };
    let ca = match &args.oidc_ca_file {
        Some(f) => {
            Some(std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?)
        }
        None => None,
    };
    console::oidc::OidcLogin::new(issuer, client, ca.as_deref())
        .map(Some)
        .map_err(|e| anyhow::anyhow!("the console's OIDC sign-in: {e}"))
}

/// The root cluster's OIDC issuers from `--oidc-*` or `--authentication-config` (refused
/// together, as kube-apiserver refuses them).
fn oidc_issuers(args: &UpArgs) -> anyhow::Result<Vec<apiserver::oidc::JwtConfig>> {
    let flags = apiserver::oidc::Flags {
        issuer_url: args.oidc_issuer_url.clone(),
        client_id: args.oidc_client_id.clone(),
        username_claim: args.oidc_username_claim.clone(),
        username_prefix: args.oidc_username_prefix.clone(),
        groups_claim: args.oidc_groups_claim.clone(),
        groups_prefix: args.oidc_groups_prefix.clone(),
        required_claims: args.oidc_required_claim.clone(),
        signing_algs: args.oidc_signing_algs.clone(),
        ca_pem: match &args.oidc_ca_file {
            Some(p) => Some(
                std::fs::read_to_string(p)
                    .with_context(|| format!("reading --oidc-ca-file {}", p.display()))?,
            ),
            None => None,
        },
    };
    if let Some(path) = &args.authentication_config {
        if flags.any() {
            anyhow::bail!("authentication-config file and oidc-* flags are mutually exclusive");
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading --authentication-config {}", path.display()))?;
        return apiserver::oidc::parse_authentication_config_text(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()));
    }
    Ok(flags
        .config()
        .map_err(|e| anyhow::anyhow!(e))?
        .into_iter()
        .collect())
}

/// How often `--authentication-config` is read again.
const AUTHENTICATION_CONFIG_POLL: Duration = Duration::from_secs(2);

/// Applies `--authentication-config` again whenever its content changes, as kube-apiserver
/// 1.30+ reloads the file: a configuration that does not parse or validate is refused with a
/// warning and the previous one stays (the platform's System issuer is the one of the start).
async fn reload_authentication_config(
    server: Arc<apiserver::ApiServer>,
    path: PathBuf,
    mut applied: String,
) {
    loop {
        tokio::time::sleep(AUTHENTICATION_CONFIG_POLL).await;
        let text = match tokio::fs::read_to_string(&path).await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "reading the authentication configuration");
                continue;
            }
        };
        if text == applied {
            continue;
        }
        applied = text.clone();
        let built = apiserver::oidc::parse_authentication_config_text(&text).and_then(|list| {
            list.into_iter()
                .map(apiserver::oidc::JwtAuthenticator::new)
                .collect::<Result<Vec<_>, _>>()
        });
        match built {
            Ok(list) => {
                tracing::info!(path = %path.display(), issuers = list.len(), "the authentication configuration was reloaded");
                server.set_oidc(list);
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "the changed authentication configuration is refused; the previous one stays");
            }
        }
    }
}

fn parse_pool(s: &str) -> Result<lb::Pool, String> {
    s.parse().map_err(|e: lb::pool::PoolError| e.to_string())
}

/// `--machine-provider`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum MachineProvider {
    Auto,
    Process,
    Virtual,
}

fn machine_dns_upstream(s: &str) -> Result<String, String> {
    crate::real_node::parse_dns_upstream(s).map(|_| s.to_string())
}

/// Whether process machines can run here: what a real node needs (its own containerd, not a
/// shared runtime) and `nsenter` to start agents inside their namespaces.
async fn process_machines_usable() -> Result<String, String> {
    let why = node::kubelet::host::real_node_usable(Some(
        "unix:///run/matryoshka/no-shared-runtime.sock",
    ))
    .await?;
    let nsenter = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("nsenter").is_file()))
        .unwrap_or(false);
    if !nsenter {
        return Err("nsenter (util-linux) is not installed".into());
    }
    Ok(why)
}

/// The process machines' bridge; one left by a run that crashed is replaced.
async fn machine_fabric(args: &UpArgs) -> anyhow::Result<nodenet::podnet::Fabric> {
    let config = nodenet::podnet::FabricConfig {
        bridge: args.machine_bridge.clone(),
        subnet: args.machine_subnet,
    };
    if std::path::Path::new("/sys/class/net")
        .join(&args.machine_bridge)
        .exists()
    {
        tracing::info!(bridge = %args.machine_bridge, "replacing the machines' bridge an earlier run left");
        nodenet::exec::ip(&["link", "del", &args.machine_bridge])
            .await
            .map_err(|e| anyhow::anyhow!("deleting the old bridge: {e}"))?;
    }
    nodenet::podnet::Fabric::create(config, None)
        .await
        .map_err(|e| anyhow::anyhow!("the machines' bridge {}: {e}", args.machine_bridge))
}

/// `--node`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeMode {
    Auto,
    Real,
    Virtual,
    None,
}

/// What `up` runs: a real node or not (and why), and how many virtual nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlan {
    pub real: bool,
    pub virtual_nodes: usize,
    pub why: String,
}

/// Decides the nodes from `--node`, `--virtual-nodes` and whether a real node can run here.
pub fn plan_nodes(
    mode: Option<NodeMode>,
    virtual_nodes: usize,
    usable: Result<String, String>,
) -> anyhow::Result<NodePlan> {
    let plan = |real, virtual_nodes, why: String| {
        Ok(NodePlan {
            real,
            virtual_nodes,
            why,
        })
    };
    match (mode, usable) {
        (None, _) if virtual_nodes > 0 => plan(
            false,
            virtual_nodes,
            format!("--virtual-nodes {virtual_nodes} without --node: virtual nodes only"),
        ),
        (None | Some(NodeMode::Auto), Ok(why)) => plan(
            true,
            virtual_nodes,
            format!("a real node can run here: {why}"),
        ),
        (None | Some(NodeMode::Auto), Err(why)) => {
            plan(false, virtual_nodes, format!("no real node: {why}"))
        }
        (Some(NodeMode::Real), Ok(why)) => plan(true, virtual_nodes, format!("--node real: {why}")),
        (Some(NodeMode::Real), Err(why)) => {
            anyhow::bail!("--node real, but a real node cannot run here: {why}")
        }
        (Some(NodeMode::Virtual), _) => {
            plan(false, virtual_nodes.max(1), "--node virtual".to_string())
        }
        (Some(NodeMode::None), _) => plan(false, 0, "--node none".to_string()),
    }
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The serving certificate's names: localhost, loopback, the bind address, the hostname, and
/// the in-cluster service names.
fn sans(bind: IpAddr) -> Vec<String> {
    let mut s: Vec<String> = [
        "localhost",
        "127.0.0.1",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        "10.96.0.1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if !bind.is_unspecified() {
        s.push(bind.to_string());
    }
    s.extend(hostname());
    s.dedup();
    s
}

async fn open_storage(args: &UpArgs) -> anyhow::Result<Arc<dyn Storage>> {
    if args.etcd_servers.is_empty() {
        let dir = args.data_dir.join("store");
        let store = storage::embedded::EmbeddedStore::open(&dir)
            .with_context(|| format!("opening the store in {}", dir.display()))?;
        Ok(Arc::new(store))
    } else {
        let store =
            storage::etcd::EtcdStore::connect(&args.etcd_servers, args.etcd_prefix.as_bytes())
                .await
                .with_context(|| {
                    format!("connecting to etcd at {}", args.etcd_servers.join(","))
                })?;
        Ok(Arc::new(store))
    }
}

/// The root cluster's CA and service-account key in `pki`, created on first start. Replicas
/// starting at once over one directory take a lock, so exactly one creates them.
fn root_credentials(pki: &Path) -> anyhow::Result<(Ca, Vec<u8>)> {
    std::fs::create_dir_all(pki).with_context(|| format!("creating {}", pki.display()))?;
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(pki.join(".lock"))
        .with_context(|| format!("opening the lock of {}", pki.display()))?;
    lock.lock()
        .with_context(|| format!("locking {}", pki.display()))?;
    let ca = Ca::load_or_create(pki, "ca", "matryoshka-ca")?;
    let sa_path = pki.join("sa.key");
    let sa = match std::fs::read(&sa_path) {
        Ok(der) => der,
        Err(_) => {
            let der =
                controlplane::jwt::SigningKey::generate_pkcs8().map_err(|e| anyhow::anyhow!(e))?;
            pki::write_private_bytes(&sa_path, &der)?;
            der
        }
    };
    Ok((ca, sa))
}

pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("creating {}", args.data_dir.display()))?;
    let pki_dir = args
        .pki_dir
        .clone()
        .unwrap_or_else(|| args.data_dir.join("pki"));
    let (ca, sa_key) = root_credentials(&pki_dir)?;
    let url = external_url(&args);
    let storage = open_storage(&args).await?;
    // Over etcd, replicas may share the store: the control plane's singleton loops write only
    // on the replica holding their Lease (the embedded store has one process by construction).
    let replicated = !args.etcd_servers.is_empty();
    let config = apiserver::server::Config {
        external_url: url.clone(),
        root_ca: ca.pair.clone(),
        root_sa_key: sa_key,
        elected: replicated,
        rotation: rotation(&args),
        volumes_dir: Some(args.data_dir.join("volumes")),
        event_ttl: args.event_ttl,
    };
    let server = apiserver::server::start_with(storage, config)
        .await
        .map_err(|e| anyhow::anyhow!("starting the API server: {e}"))?;
    // The platform's OCI registry, served at /v2/ on the same port.
    let registry_dir = args.data_dir.join("registry");
    let registry = oci::Registry::open(&registry_dir)
        .await
        .with_context(|| format!("opening the registry in {}", registry_dir.display()))?;
    let registry = Arc::new(registry);
    server.serve_registry(registry.clone());
    // The web console, served at /console/ on the same port.
    server.serve_console(crate::console_app::app(
        server.clone(),
        console_oidc(&args)?,
    ));
    let issuers = oidc_issuers(&args)?
        .into_iter()
        .map(apiserver::oidc::JwtAuthenticator::new)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("OIDC: {e}"))?;
    // The first issuer is also the platform's identity provider for tenant clusters with
    // `oidc.mode: System`.
    let system_oidc = issuers.first().map(|a| platform::oidc::SystemIssuer {
        url: a.config.issuer_url.clone(),
        certificate_authority: a.config.certificate_authority.clone(),
    });
    if !issuers.is_empty() {
        tracing::info!(
            issuers = issuers.len(),
            "OIDC tokens authenticate users of the root cluster"
        );
        server.set_oidc(issuers);
    }
    if let Some(path) = args.authentication_config.clone() {
        let applied = std::fs::read_to_string(&path).unwrap_or_default();
        tokio::spawn(reload_authentication_config(server.clone(), path, applied));
    }

    let advertise = advertise_address(&args);
    // Process machines: their LAN first, so the serving certificate names its gateway.
    let fabric = match args.machine_provider {
        MachineProvider::Virtual => None,
        asked => match process_machines_usable().await {
            Ok(why) => {
                tracing::info!(bridge = %args.machine_bridge, subnet = %args.machine_subnet, "process machines: {why}");
                Some(Arc::new(machine_fabric(&args).await?))
            }
            Err(why) if asked == MachineProvider::Process => {
                anyhow::bail!("--machine-provider process: this machine cannot run them: {why}")
            }
            Err(why) => {
                tracing::info!("worker machines are virtual: {why}");
                None
            }
        },
    };
    let validity = Duration::from_secs(args.serving_cert_validity_seconds.max(3));
    let issue = {
        let ca = ca.clone();
        let mut names = sans(args.bind_address);
        names.extend(advertise.map(|a| a.to_string()));
        names.extend(external_host(&args));
        names.extend(fabric.as_ref().map(|f| f.config().gateway().to_string()));
        names.dedup();
        move || ca.issue_server_for("kube-apiserver", &names, validity)
    };
    let serving = issue()?;
    let serving_cert = ServingCert::new(&serving.cert_pem, &serving.key_pem)?;
    // Tenant clusters' own hostnames (SNI) get certificates of their own.
    {
        let cp = Arc::downgrade(server.control_plane());
        serving_cert.serve_hosts(
            ca.clone(),
            validity,
            Arc::new(move |h: &str| {
                cp.upgrade()
                    .is_some_and(|cp| cp.cluster_for_host(h).is_some())
            }),
        );
    }
    let install = {
        let serving_cert = serving_cert.clone();
        move |c: &pki::CertPair| Ok(serving_cert.replace(&c.cert_pem, &c.key_pem)?)
    };
    let serving_renewal =
        tokio::spawn(keep_renewed("serving certificate", serving, issue, install));

    let addr = SocketAddr::new(args.bind_address, args.secure_port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    let tls = apiserver::serve::tls_config(serving_cert)?;
    // Machines reach the API server and the registry at their LAN's gateway.
    let machine_listener = match &fabric {
        Some(f) if !args.bind_address.is_unspecified() => {
            let at = SocketAddr::new(f.config().gateway().into(), args.secure_port);
            Some(
                tokio::net::TcpListener::bind(at)
                    .await
                    .with_context(|| format!("listening on the machines' gateway {at}"))?,
            )
        }
        _ => None,
    };
    let process = match &fabric {
        Some(f) => {
            let binary = std::env::current_exe().context("the matryoshka binary's path")?;
            let mut o = machines::process::ProcessOptions::new(
                binary,
                args.data_dir.join("machines"),
                args.secure_port,
                ca.pair.cert_pem.clone(),
            );
            o.dns_upstream = args.machine_dns_upstream.clone();
            Some(Arc::new(
                machines::process::ProcessProvider::new(o, f.clone()).await,
            ))
        }
        None => None,
    };
    // The platform's CRDs, roles and `tenant-root` exist before the first client is told
    // where to connect.
    // In-process components are clients over the in-memory transport, as the system
    // identity; each gets its own bounded set of per-cluster clients.
    let clients = || {
        runtime::client::ClusterClients::in_memory(apiserver::local::LocalService::system(
            server.clone(),
        ))
    };
    let (stop, stopped) = runtime::shared::Shutdown::new();
    let identity = args.leader_identity.clone().unwrap_or_else(|| {
        format!(
            "{}-{}",
            hostname().unwrap_or_else(|| "matryoshka".into()),
            std::process::id()
        )
    });
    let election = replicated.then(|| {
        let cp = server.control_plane().clone();
        let root = clients().cluster(runtime::client::ROOT);
        let config =
            runtime::leader::LeaderConfig::named("matryoshka-control-plane", identity.clone());
        let stopped = stopped.clone();
        tokio::spawn(async move {
            let root = match root {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(error = %e, "no client for the control plane's election");
                    return;
                }
            };
            let (tx, mut rx) = tokio::sync::watch::channel(false);
            let forward = tokio::spawn(async move {
                while rx.changed().await.is_ok() {
                    cp.set_leading(*rx.borrow_and_update());
                }
                cp.set_leading(false);
            });
            runtime::leader::campaign(root, config, tx, stopped.wait()).await;
            let _ = forward.await;
        })
    });
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
        // The tenants' usage counters on the root cluster's `/metrics`.
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
    // Which singletons this replica runs (`leader_election_master_status`).
    server
        .control_plane()
        .metrics()
        .add_root_collector(Arc::new(runtime::leader::metrics));
    platform::install(&clients())
        .await
        .map_err(|e| anyhow::anyhow!("installing the platform: {e}"))?;
    platform::install_machines(&clients(), args.cluster_api_crds.as_deref())
        .await
        .map_err(|e| anyhow::anyhow!("installing the machine CRDs: {e}"))?;
    if args.dropapp_api {
        platform::install_dropapp(&clients())
            .await
            .map_err(|e| anyhow::anyhow!("installing DropApp's TenantCluster: {e}"))?;
    }
    // The root cluster's admin kubeconfig, re-written with a fresh certificate before the
    // old one expires.
    let admin_path = args.data_dir.join("admin.conf");
    let issue_admin = {
        let ca = ca.clone();
        let validity = Duration::from_secs(args.client_cert_validity_seconds.max(3));
        move || ca.issue_client_for("kubernetes-admin", &["system:masters"], validity)
    };
    let write_admin = {
        let (path, url, ca_pem) = (admin_path.clone(), url.clone(), ca.pair.cert_pem.clone());
        move |c: &pki::CertPair| {
            let conf = pki::kubeconfig("matryoshka", &url, &ca_pem, "kubernetes-admin", c);
            Ok(pki::write_private(&path, &conf)?)
        }
    };
    let admin = issue_admin()?;
    write_admin(&admin)?;
    let admin_renewal = tokio::spawn(keep_renewed(
        "admin kubeconfig",
        admin,
        issue_admin,
        write_admin,
    ));
    tracing::info!(
        address = %addr,
        kubeconfig = %admin_path.display(),
        storage = if args.etcd_servers.is_empty() { "embedded" } else { "etcd" },
        startup_ms = started.elapsed().as_millis() as u64,
        "matryoshka is serving"
    );
    // The controllers run in process over the in-memory transport, once per set of replicas
    // (leader election on a Lease in the root cluster).
    let controllers = tokio::spawn(controllers::run(
        clients(),
        controllers::Options::default()
            .with_leader_election(identity.clone())
            .with_ca(server.control_plane().config().root_ca.cert_pem.clone())
            .with_root_signer(
                server.control_plane().config().root_ca.cert_pem.clone(),
                server.control_plane().config().root_ca.key_pem.clone(),
            )
            .with_node_grace(args.node_monitor_grace_period)
            .with_signing_duration(args.cluster_signing_duration),
        stopped.clone().wait(),
    ));
    let scheduler = tokio::spawn(scheduler::run(
        clients(),
        scheduler::Options::default().with_leader_election(identity.clone()),
        stopped.clone().wait(),
    ));
    let platform = tokio::spawn(platform::run_controllers(
        clients(),
        platform::Options {
            client_cert_validity: Duration::from_secs(args.client_cert_validity_seconds.max(3)),
            backup_dir: Some(
                args.backup_dir
                    .clone()
                    .unwrap_or_else(|| args.data_dir.join("backups")),
            ),
            backup_min_interval: Duration::from_secs(args.backup_min_interval_seconds),
            cluster_api_crds: args.cluster_api_crds.clone(),
            machines: machines::Options {
                process: process.clone(),
                volumes_dir: Some(args.data_dir.join("volumes")),
                autoscaler: Some(machines::autoscaler::AutoscalerOptions {
                    scale_down_unneeded_time: args.scale_down_unneeded_time,
                    scale_down_delay_after_add: args.scale_down_delay_after_add,
                    ..Default::default()
                }),
                ..Default::default()
            },
            hosting: platform::endpoint::Hosting {
                root_host: args
                    .root_host
                    .clone()
                    .unwrap_or_else(|| platform::endpoint::DEFAULT_ROOT_HOST.into()),
                host_urls: args.root_host.is_some(),
            },
            system_oidc: system_oidc.clone(),
            usage_retention: Duration::from_secs(args.usage_retention_days.saturating_mul(86_400)),
            dropapp: args.dropapp_api,
            etcd: Some(platform::datastore::EtcdOptions {
                defrag_interval: args.datastore_defrag_interval,
                quota_bytes: args.datastore_quota_bytes,
                ..platform::datastore::EtcdOptions::new(args.data_dir.join("datastores"))
            }),
            ingress_image: Some(crate::ingress_image::source(
                registry.clone(),
                args.data_dir.join("tmp"),
            )),
            ..Default::default()
        }
        .with_leader_election(identity.clone()),
        stopped.clone().wait(),
    ));
    let load_balancer = args.load_balancer_ip_range.clone().map(|pool| {
        tracing::info!(%pool, "the platform's load balancer hands out addresses");
        tokio::spawn(lb::run(
            clients(),
            lb::Options {
                pool,
                leader_identity: Some(identity.clone()),
            },
            stopped.clone().wait(),
        ))
    });
    let usable = if matches!(args.node, Some(NodeMode::Virtual | NodeMode::None))
        || (args.node.is_none() && args.virtual_nodes > 0)
    {
        Err("not asked for".to_string())
    } else {
        node::kubelet::host::real_node_usable(Some(&args.cri_endpoint)).await
    };
    let nodes_plan = plan_nodes(args.node, args.virtual_nodes, usable)?;
    tracing::info!(
        real = nodes_plan.real,
        virtual_nodes = nodes_plan.virtual_nodes,
        "nodes: {}",
        nodes_plan.why
    );
    // Taken from the real node only when it runs.
    let advertise = advertise.filter(|_| nodes_plan.real || advertise_asked(&args));
    // Shared-node tenant clusters: their pods run on the root cluster's nodes. Their DNS
    // servers listen where the real node's pods reach this process.
    let syncer_run = (!args.no_syncer).then(|| {
        syncer::run(
            clients(),
            syncer::Options {
                address: nodes_plan
                    .real
                    .then(|| args.node_ip.or(advertise))
                    .flatten(),
                // Without a real node the kubelet proxies still serve (on loopback, where
                // this process's API server reaches them): pods on another host.
                kubelet_proxy_address: Some(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)),
                // What the kubelet proxy presents to the root cluster's kubelets: the identity
                // the API server has at them.
                kubelet_identity: ca
                    .issue_client("kube-apiserver-kubelet-client", &["system:masters"])
                    .ok()
                    .map(|c| syncer::kubelet::KubeletIdentity {
                        cert_pem: c.cert_pem,
                        key_pem: c.key_pem,
                    }),
                dns_upstream: args.cluster_dns_upstream.clone(),
                leader_identity: Some(identity.clone()),
                ..Default::default()
            },
            stopped.clone().wait(),
        )
    });
    let syncer = tokio::spawn(async move {
        match syncer_run {
            Some(run) => run.await,
            None => Ok(()),
        }
    });
    // Pods reach the API server at the advertise address: when the bind address does not
    // cover it, the server listens there too.
    let advertise_listener = match advertise {
        Some(a) if !args.bind_address.is_unspecified() && a != args.bind_address => {
            let at = SocketAddr::new(a, args.secure_port);
            Some(
                tokio::net::TcpListener::bind(at)
                    .await
                    .with_context(|| format!("listening on the advertise address {at}"))?,
            )
        }
        _ => None,
    };
    let real_node = if nodes_plan.real {
        let client = clients()
            .cluster(runtime::client::ROOT)
            .map_err(|e| anyhow::anyhow!("a client for the real node: {e}"))?;
        let name = hostname()
            .map(|h| h.to_lowercase())
            .unwrap_or_else(|| "matryoshka-node".into());
        let node_dir = args
            .node_data_dir
            .clone()
            .unwrap_or_else(|| args.data_dir.join("node"));
        let mut config = node::kubelet::KubeletConfig::new(&name, node_dir);
        config.cri_endpoint = args.cri_endpoint.clone();
        config.roles = vec!["control-plane".into(), "worker".into()];
        config.node_ip = args.node_ip;
        if let Some(ip) = args.node_ip {
            config.kubelet_address = ip;
        }
        config.kubelet_port = args.kubelet_port;
        if args.remove_pods_on_exit {
            config.teardown = node::kubelet::Teardown::RemovePods;
        }
        // The kubelet trusts the root cluster's CA (the API server's kubelet client
        // certificate is issued by it), and pulls every image from the platform's registry.
        config.client_ca_pem = Some(ca.pair.cert_pem.clone());
        config.containerd.registry_mirror = Some(oci::hosts::Mirror {
            endpoint: url.clone(),
            ca_pem: Some(ca.pair.cert_pem.clone()),
        });
        let stopped = stopped.clone();
        let no_network = args.no_node_network;
        let dns_upstream = args.cluster_dns_upstream.clone();
        Some(tokio::spawn(async move {
            let network = (!no_network).then(|| crate::real_node::NetworkOptions {
                uplink: None,
                cluster_dns_ip: crate::real_node::DEFAULT_CLUSTER_DNS
                    .parse()
                    .expect("a valid address"),
                dns_upstream,
            });
            if let Err(e) = crate::real_node::run(client, config, network, stopped.wait()).await {
                tracing::error!(error = %e, "the real node failed");
            }
        }))
    } else {
        None
    };
    let nodes = if nodes_plan.virtual_nodes > 0 {
        let group = node::NodeGroup::new(
            node::run::DEFAULT_NAME_PREFIX,
            nodes_plan.virtual_nodes,
            &args.virtual_node_instance_type,
            &["worker"],
        );
        let client = clients()
            .cluster(runtime::client::ROOT)
            .map_err(|e| anyhow::anyhow!("a client for the virtual nodes: {e}"))?;
        let stopped = stopped.clone();
        Some(tokio::spawn(async move {
            let run =
                node::run_virtual_nodes(client, &group, node::Options::default(), stopped.wait());
            if let Err(e) = run.await {
                tracing::error!(error = %e, "virtual nodes failed");
            }
        }))
    } else {
        None
    };
    let mut serving = apiserver::serve::Options {
        max_connections: args.max_connections,
        header_timeout: args.request_header_timeout,
        request_timeout: args.request_timeout,
        ..Default::default()
    };
    if args.max_requests_inflight > 0 {
        serving.flow.seats = args.max_requests_inflight;
    }
    if let Some(l) = machine_listener {
        tokio::spawn(apiserver::serve::serve_with(
            server.clone(),
            l,
            tls.clone(),
            serving,
            stopped.clone().wait(),
        ));
    }
    if let Some(l) = advertise_listener {
        tokio::spawn(apiserver::serve::serve_with(
            server.clone(),
            l,
            tls.clone(),
            serving,
            stopped.clone().wait(),
        ));
    }
    let endpoints = advertise.map(|ip| {
        let server = server.clone();
        let at = SocketAddr::new(ip, args.secure_port);
        let identity = identity.clone();
        tokio::spawn(async move {
            // Upstream's lease endpoint reconciler: every replica renews its endpoint Lease,
            // and the leading one writes the Endpoints of every live replica (each would
            // overwrite the others' otherwise), repairing them on each pass; unchanged ones
            // are not written again.
            let mut renewed: Option<Instant> = None;
            loop {
                let cp = server.control_plane();
                if renewed.is_none_or(|t| t.elapsed() >= Duration::from_secs(5)) {
                    match controlplane::bootstrap::renew_endpoint_lease(cp, &identity, at).await {
                        Ok(()) => renewed = Some(Instant::now()),
                        Err(e) => tracing::warn!(error = %e, "renewing this replica's endpoint Lease"),
                    }
                }
                if cp.leads() {
                    let mut live = controlplane::bootstrap::live_endpoints(cp);
                    // This replica's own Lease may not be in the cache yet.
                    if !live.contains(&at) {
                        live.push(at);
                    }
                    if let Err(e) = controlplane::bootstrap::reconcile_kubernetes_endpoints(
                        cp,
                        apimachinery::cluster::ROOT,
                        &live,
                    )
                    .await
                    {
                        tracing::warn!(error = %e, "reconciling the kubernetes Service's endpoints");
                    }
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        })
    });
    apiserver::serve::serve_with(server, listener, tls, serving, shutdown_signal()).await;
    if let Some(e) = endpoints {
        e.abort();
    }
    stop.trigger();
    let _ = tokio::time::timeout(Duration::from_secs(5), controllers).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), scheduler).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), platform).await;
    if let Some(l) = load_balancer {
        let _ = tokio::time::timeout(Duration::from_secs(5), l).await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), syncer).await;
    // Process machines are this process's children: they stop with it (their Nodes stay,
    // and the next start runs them again).
    if let Some(p) = process {
        p.stop_all().await;
    }
    if let Some(f) = fabric.and_then(Arc::into_inner)
        && let Err(e) = f.delete().await
    {
        tracing::warn!(error = %e, "deleting the machines' bridge");
    }
    if let Some(election) = election {
        let _ = tokio::time::timeout(Duration::from_secs(5), election).await;
    }
    if let Some(nodes) = nodes {
        let _ = tokio::time::timeout(Duration::from_secs(5), nodes).await;
    }
    if let Some(real) = real_node {
        // containerd takes up to 10 s to stop.
        let _ = tokio::time::timeout(Duration::from_secs(15), real).await;
    }
    serving_renewal.abort();
    admin_renewal.abort();
    tracing::info!("stopped");
    Ok(())
}

/// `--external-hostname` as host and port: `HOST`, `HOST:PORT`, `[V6]`, `[V6]:PORT` or a bare
/// IPv6 address.
fn split_host_port(h: &str) -> (String, Option<u16>) {
    if let Some(rest) = h.strip_prefix('[')
        && let Some((host, after)) = rest.split_once(']')
    {
        return (
            host.to_string(),
            after.strip_prefix(':').and_then(|p| p.parse().ok()),
        );
    }
    match h.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => match port.parse() {
            Ok(p) => (host.to_string(), Some(p)),
            Err(_) => (h.to_string(), None),
        },
        _ => (h.to_string(), None),
    }
}

/// `--external-hostname` without its port.
fn external_host(args: &UpArgs) -> Option<String> {
    let h = args.external_hostname.as_deref()?;
    Some(split_host_port(h).0)
}

/// The URL clients reach the root cluster at: `--external-hostname` (with its port, else
/// `--secure-port`), else the bind address (loopback when it is unspecified).
fn external_url(args: &UpArgs) -> String {
    let (host, port) = match &args.external_hostname {
        Some(h) => {
            let (host, port) = split_host_port(h);
            (host, port.unwrap_or(args.secure_port))
        }
        None if args.bind_address.is_unspecified() => ("127.0.0.1".to_string(), args.secure_port),
        None => (args.bind_address.to_string(), args.secure_port),
    };
    if host.contains(':') {
        format!("https://[{host}]:{port}")
    } else {
        format!("https://{host}:{port}")
    }
}

/// The advertise address (see [`UpArgs::advertise_address`]): the flag, else a routable bind
/// address, else the real node's address when the root cluster may get a real node.
fn advertise_address(args: &UpArgs) -> Option<IpAddr> {
    if let Some(a) = args.advertise_address {
        return Some(a);
    }
    let b = args.bind_address;
    if !b.is_unspecified() && !b.is_loopback() {
        return Some(b);
    }
    let no_real_node = matches!(args.node, Some(NodeMode::Virtual | NodeMode::None))
        || (args.node.is_none() && args.virtual_nodes > 0);
    if no_real_node {
        return None;
    }
    Some(
        args.node_ip
            .unwrap_or_else(node::kubelet::machine::default_ip),
    )
    .filter(|a| !a.is_loopback())
}

/// Whether the advertise address was asked for (the flag, or a routable bind address) rather
/// than taken from the real node.
fn advertise_asked(args: &UpArgs) -> bool {
    args.advertise_address.is_some()
        || (!args.bind_address.is_unspecified() && !args.bind_address.is_loopback())
}

/// How credentials rotate, from the flags.
fn rotation(args: &UpArgs) -> controlplane::rotation::Rotation {
    controlplane::rotation::Rotation {
        client_cert_validity: Duration::from_secs(args.client_cert_validity_seconds.max(3)),
        sa_key_period: Duration::from_secs(args.service_account_key_rotation_seconds.max(1)),
        max_token_expiration: Duration::from_secs(
            args.service_account_max_token_expiration_seconds.max(1),
        ),
    }
}

/// Re-issues a certificate once two thirds of its lifetime have passed ([`pki::renewal_time`]),
/// without a restart: `issue` makes the next one and `install` puts it in place.
async fn keep_renewed(
    what: &'static str,
    first: pki::CertPair,
    issue: impl Fn() -> Result<pki::CertPair, pki::Error> + Send + 'static,
    install: impl Fn(&pki::CertPair) -> anyhow::Result<()> + Send + 'static,
) {
    let mut current = first;
    loop {
        let due = pki::renewal_time(&current.cert_pem)
            .and_then(|at| at.duration_since(std::time::SystemTime::now()).ok())
            .unwrap_or_default();
        tokio::time::sleep(due.max(Duration::from_millis(100))).await;
        let next = issue().map_err(anyhow::Error::from).and_then(|c| {
            install(&c)?;
            Ok(c)
        });
        match next {
            Ok(c) => {
                tracing::info!(what, "certificate rotated");
                current = c;
            }
            Err(e) => {
                tracing::warn!(what, error = %e, "certificate rotation failed; will retry");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: draining"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupt: draining"),
    }
}

#[cfg(test)]
mod node_plan_tests {
    use super::*;

    #[test]
    fn an_external_hostname_gives_the_url_with_its_port_or_the_secure_port() {
        assert_eq!(
            split_host_port("lb.example.com:8443"),
            ("lb.example.com".into(), Some(8443))
        );
        assert_eq!(
            split_host_port("lb.example.com"),
            ("lb.example.com".into(), None)
        );
        assert_eq!(
            split_host_port("[fd00::1]:443"),
            ("fd00::1".into(), Some(443))
        );
        assert_eq!(split_host_port("fd00::1"), ("fd00::1".into(), None));
        #[derive(clap::Parser)]
        struct Up {
            #[command(flatten)]
            up: UpArgs,
        }
        let parsed = <Up as clap::Parser>::try_parse_from(["up", "--secure-port", "7443"]);
        let mut args = parsed.unwrap().up;
        assert_eq!(external_url(&args), "https://127.0.0.1:7443");
        args.external_hostname = Some("lb.example.com".into());
        assert_eq!(external_url(&args), "https://lb.example.com:7443");
        args.external_hostname = Some("lb.example.com:443".into());
        assert_eq!(external_url(&args), "https://lb.example.com:443");
        args.external_hostname = Some("fd00::1".into());
        assert_eq!(external_url(&args), "https://[fd00::1]:7443");
    }

    #[test]
    fn virtual_nodes_without_a_node_mode_keep_the_old_behaviour() {
        let p = plan_nodes(None, 3, Ok("usable".into())).expect("plan");
        assert_eq!((p.real, p.virtual_nodes), (false, 3));
    }

    #[test]
    fn auto_picks_a_real_node_when_the_machine_can_run_one_and_says_why() {
        let p = plan_nodes(None, 0, Ok("root with containerd".into())).expect("plan");
        assert_eq!((p.real, p.virtual_nodes), (true, 0));
        assert!(p.why.contains("root with containerd"), "{}", p.why);
        let p = plan_nodes(Some(NodeMode::Auto), 0, Err("not root".into())).expect("plan");
        assert_eq!((p.real, p.virtual_nodes), (false, 0));
        assert!(p.why.contains("not root"), "{}", p.why);
    }

    #[test]
    fn real_fails_where_it_cannot_run_and_virtual_runs_at_least_one() {
        assert!(plan_nodes(Some(NodeMode::Real), 0, Err("no runc".into())).is_err());
        let p = plan_nodes(Some(NodeMode::Real), 2, Ok("ok".into())).expect("plan");
        assert_eq!((p.real, p.virtual_nodes), (true, 2));
        let p = plan_nodes(Some(NodeMode::Virtual), 0, Ok("ok".into())).expect("plan");
        assert_eq!((p.real, p.virtual_nodes), (false, 1));
        let p = plan_nodes(Some(NodeMode::None), 5, Ok("ok".into())).expect("plan");
        assert_eq!((p.real, p.virtual_nodes), (false, 0));
    }
}

/// A Go duration (`1m0s`, `32s`, `1h30m`, `500ms`), as kube-apiserver's flags take them.
fn parse_go_duration(s: &str) -> Result<Duration, String> {
    apimachinery::time::parse_std_duration(s)
}

#[cfg(test)]
mod duration_flag_tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_kube_apiserver_flags_take_them() {
        assert_eq!(parse_go_duration("1m0s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_go_duration("32s"), Ok(Duration::from_secs(32)));
        assert_eq!(parse_go_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_go_duration("soon").is_err());
        assert!(parse_go_duration("-5s").is_err());
    }
}
