//! `matryoshka node`: runs node agents that join a cluster from a kubeconfig — a real node
//! that runs containers through CRI (`--runtime cri`, the default), or virtual nodes that run
//! none (`--virtual`, or `--runtime virtual`).

use std::net::IpAddr;
use std::path::PathBuf;

use node::kubelet::{KubeletConfig, Teardown};

/// How the node runs pods.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// Real containers through a CRI runtime (containerd).
    Cri,
    /// Virtual nodes: they register, heartbeat and report pods as running, but run no
    /// containers.
    Virtual,
}

/// Flags of `matryoshka node`.
#[derive(clap::Args, Debug, Clone)]
pub struct NodeArgs {
    /// How pods run.
    #[arg(long, value_enum, default_value = "cri")]
    pub runtime: Runtime,
    /// Run virtual nodes (the same as `--runtime virtual`).
    #[arg(long = "virtual")]
    pub virtual_nodes: bool,
    /// The kubeconfig of the cluster to join (a logical cluster's kubeconfig points at it).
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// The kubeconfig context to use instead of the current one.
    #[arg(long)]
    pub context: Option<String>,
    /// A kubeconfig with a bootstrap token: when `--kubeconfig` does not exist (or its
    /// certificate is about to expire), the node asks for a client certificate with it (TLS
    /// bootstrap) and writes `--kubeconfig`. One node, one identity: a real node, or
    /// `--count 1` virtual.
    #[arg(long)]
    pub bootstrap_kubeconfig: Option<PathBuf>,
    /// CRI: the runtime's endpoint; when nothing answers there the agent starts its own
    /// containerd with a socket in the data directory.
    #[arg(long, default_value = node::kubelet::config::DEFAULT_CRI_ENDPOINT)]
    pub cri_endpoint: String,
    /// CRI: where the agent keeps its data (containerd's root and state, pods, logs).
    #[arg(long, default_value = node::kubelet::config::DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// CRI: the node's name (the hostname by default).
    #[arg(long)]
    pub node_name: Option<String>,
    /// CRI: the node's InternalIP (the default route's address by default).
    #[arg(long)]
    pub node_ip: Option<IpAddr>,
    /// CRI: the node's pod subnet (the Node's `spec.podCIDR`, or a free /24 by default).
    #[arg(long)]
    pub pod_cidr: Option<String>,
    /// CRI: the cluster DNS servers (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub cluster_dns: Vec<IpAddr>,
    /// CRI: the cluster's DNS domain.
    #[arg(long, default_value = "cluster.local")]
    pub cluster_domain: String,
    /// CRI: the port of the kubelet API, reported in the Node's `daemonEndpoints`.
    #[arg(long, default_value_t = 10250)]
    pub kubelet_port: u16,
    /// CRI: the pause image of the agent's own containerd (must be present locally).
    #[arg(long)]
    pub sandbox_image: Option<String>,
    /// CRI: OCI or docker archives imported into the agent's own containerd at start.
    #[arg(long)]
    pub preload_image: Vec<PathBuf>,
    /// CRI: remove every pod sandbox on exit instead of leaving the pods running.
    #[arg(long)]
    pub remove_pods_on_exit: bool,
    /// CRI: run no node network (Services, NetworkPolicy, the node's DNS server, routes),
    /// leaving it to another add-on.
    #[arg(long)]
    pub no_network: bool,
    /// CRI: the device routes to other nodes' pod subnets leave by (none: no routes).
    #[arg(long)]
    pub uplink: Option<String>,
    /// CRI: the cluster DNS Service address, created as `kube-system/kube-dns` unless the
    /// cluster has one (used when `--cluster-dns` is not given).
    #[arg(long, default_value = crate::real_node::DEFAULT_CLUSTER_DNS)]
    pub cluster_dns_service_ip: IpAddr,
    /// CRI: where the node's cluster DNS forwards names outside the cluster: `resolv-conf`
    /// (this machine's `/etc/resolv.conf`), `none`, or `IP[:PORT],...`.
    #[arg(long, default_value = "resolv-conf", value_parser = crate::real_node::parse_dns_upstream)]
    pub cluster_dns_upstream: dns::Upstream,
    /// CRI: the cgroup every pod cgroup is below (`/` puts them at `/kubepods`).
    #[arg(long, default_value = "/")]
    pub cgroup_root: String,
    /// CRI: a registry every registry is mirrored to (a Matryoshka platform serves one at
    /// its API address, `https://host:port`), trusted with the kubeconfig's CA; none: images
    /// come from wherever their names say.
    #[arg(long)]
    pub registry_mirror: Option<String>,
    /// Virtual: how many nodes to run.
    #[arg(long, default_value_t = 1)]
    pub count: usize,
    /// Virtual: nodes are named `<prefix>0`, `<prefix>1`, ...
    #[arg(long, default_value = node::run::DEFAULT_NAME_PREFIX)]
    pub name_prefix: String,
    /// The instance type that sizes each node (`u1.medium`...); a real node is sized by its
    /// machine unless this is given.
    #[arg(long)]
    pub instance_type: Option<String>,
    /// Node roles (comma-separated): each becomes `node-role.kubernetes.io/<role>`.
    #[arg(long, value_delimiter = ',')]
    pub roles: Vec<String>,
    /// The node disk (ephemeral-storage capacity); virtual nodes default to 20Gi, a real
    /// node to its data directory's filesystem.
    #[arg(long)]
    pub disk_size: Option<String>,
    /// CRI: the node's whole sizing as an infrastructure provider passes it (JSON:
    /// `{"instanceType": "u1.medium", "cpu": "2", "memory": "4Gi", "kubelet": {...},
    /// "diskSize": "20Gi"}`); flags given beside it win.
    #[arg(long, value_parser = parse_sizing)]
    pub sizing: Option<node::sizing::SizingInput>,
    /// CRI: the CA bundle (PEM file) client certificates at the kubelet API must chain to
    /// (kubelet's `--client-ca-file`); default: the cluster's `kube-system/kube-root-ca.crt`.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// Renew the node's client certificate (in `--kubeconfig`) at 70–90 % of its lifetime
    /// with a CertificateSigningRequest (kubelet's `--rotate-certificates`).
    #[arg(long)]
    pub rotate_certificates: bool,
    /// CRI: serve the kubelet API with a certificate the cluster issues
    /// (`kubernetes.io/kubelet-serving`), renewed before it expires (kubelet's
    /// `--rotate-server-certificates`); otherwise a self-signed one.
    #[arg(long)]
    pub rotate_server_certificates: bool,
    /// CRI: the Node's `spec.providerID` (kubelet's `--provider-id`).
    #[arg(long)]
    pub provider_id: Option<String>,
    /// CRI: labels the node registers with (`key=value`, comma-separated; kubelet's
    /// `--node-labels`).
    #[arg(long, value_delimiter = ',', value_parser = parse_label)]
    pub node_labels: Vec<(String, String)>,
}

fn parse_sizing(s: &str) -> Result<node::sizing::SizingInput, String> {
    serde_json::from_str(s).map_err(|e| format!("not a sizing: {e}"))
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not key=value"))?;
    let problems: Vec<String> = apimachinery::validation::is_qualified_name(k)
        .into_iter()
        .chain(apimachinery::validation::is_valid_label_value(v))
        .collect();
    if !problems.is_empty() {
        return Err(format!("label {s:?}: {}", problems.join("; ")));
    }
    Ok((k.to_string(), v.to_string()))
}

/// The hostname, the default name of a real node.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_lowercase())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "matryoshka-node".to_string())
}

/// The CRI agent's configuration from the flags.
pub fn kubelet_config(args: &NodeArgs) -> anyhow::Result<KubeletConfig> {
    let name = args.node_name.clone().unwrap_or_else(hostname);
    let mut c = KubeletConfig::new(&name, &args.data_dir);
    c.cri_endpoint = args.cri_endpoint.clone();
    c.node_ip = args.node_ip;
    c.pod_cidr = args
        .pod_cidr
        .as_deref()
        .map(|s| {
            s.parse()
                .map_err(|e| anyhow::anyhow!("--pod-cidr {s}: {e:?}"))
        })
        .transpose()?;
    c.dns.servers = args.cluster_dns.clone();
    c.dns.domain = args.cluster_domain.clone();
    c.kubelet_port = args.kubelet_port;
    c.cgroup_root = args.cgroup_root.clone();
    if let Some(endpoint) = &args.registry_mirror {
        c.containerd.registry_mirror = Some(oci::hosts::Mirror {
            endpoint: endpoint.clone(),
            ca_pem: kubeconfig_ca(&args.kubeconfig, args.context.as_deref())?,
        });
    }
    if let Some(img) = &args.sandbox_image {
        c.containerd.sandbox_image = img.clone();
    }
    c.containerd.preload = args.preload_image.clone();
    if let Some(sizing) = &args.sizing {
        c.sizing = sizing.clone();
    }
    if args.instance_type.is_some() {
        c.sizing.instance_type = args.instance_type.clone();
    }
    if args.disk_size.is_some() {
        c.sizing.disk_size = args.disk_size.clone();
    }
    c.provider_id = args.provider_id.clone();
    c.server_tls_bootstrap = args.rotate_server_certificates;
    if let Some(f) = &args.client_ca_file {
        c.client_ca_pem = Some(
            std::fs::read_to_string(f)
                .map_err(|e| anyhow::anyhow!("reading --client-ca-file {}: {e}", f.display()))?,
        );
    }
    c.labels.extend(args.node_labels.iter().cloned());
    c.roles = args.roles.clone();
    if args.remove_pods_on_exit {
        c.teardown = Teardown::RemovePods;
    }
    Ok(c)
}

/// The CA bundle (PEM) of the kubeconfig's cluster (the current context's, or `context`'s).
fn kubeconfig_ca(path: &std::path::Path, context: Option<&str>) -> anyhow::Result<Option<String>> {
    use base64::Engine;
    let kc = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    let ctx_name = context
        .map(str::to_string)
        .or(kc.current_context.clone())
        .unwrap_or_default();
    let cluster_name = kc
        .contexts
        .iter()
        .find(|c| c.name == ctx_name)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .unwrap_or_default();
    let Some(cluster) = kc
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.as_ref())
    else {
        return Ok(None);
    };
    if let Some(data) = &cluster.certificate_authority_data {
        let pem = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| anyhow::anyhow!("the kubeconfig's certificate-authority-data: {e}"))?;
        return Ok(Some(String::from_utf8_lossy(&pem).into_owned()));
    }
    if let Some(file) = &cluster.certificate_authority {
        return Ok(Some(std::fs::read_to_string(file).map_err(|e| {
            anyhow::anyhow!("reading the kubeconfig's certificate-authority {file}: {e}")
        })?));
    }
    Ok(None)
}

pub async fn run(mut args: NodeArgs) -> anyhow::Result<()> {
    let runtime = if args.virtual_nodes {
        Runtime::Virtual
    } else {
        args.runtime
    };
    if let Some(bootstrap) = args.bootstrap_kubeconfig.clone()
        && !node::bootstrap::usable(&args.kubeconfig)
    {
        let name = match runtime {
            Runtime::Virtual if args.count == 1 => format!("{}0", args.name_prefix),
            Runtime::Virtual => {
                anyhow::bail!("TLS bootstrap gives one node one identity: use --count 1")
            }
            Runtime::Cri => args.node_name.clone().unwrap_or_else(hostname),
        };
        tracing::info!(node = %name, "TLS bootstrap: asking for a node client certificate");
        node::bootstrap::tls_bootstrap(
            &bootstrap,
            &args.kubeconfig,
            &name,
            std::time::Duration::from_secs(300),
        )
        .await?;
        args.context = None;
    }
    // The client certificate is renewed with the identity it gives.
    let renewal = if args.rotate_certificates {
        let client =
            node::run::client_from_kubeconfig(&args.kubeconfig, args.context.as_deref()).await?;
        let name = match runtime {
            Runtime::Virtual => format!("{}0", args.name_prefix),
            Runtime::Cri => args.node_name.clone().unwrap_or_else(hostname),
        };
        Some(tokio::spawn(
            node::bootstrap::keep_client_certificate_renewed(
                client,
                args.kubeconfig.clone(),
                name,
                std::future::pending::<()>(),
            ),
        ))
    } else {
        None
    };
    let result = run_agent(runtime, args).await;
    if let Some(r) = renewal {
        r.abort();
    }
    result
}

async fn run_agent(runtime: Runtime, args: NodeArgs) -> anyhow::Result<()> {
    match runtime {
        Runtime::Virtual => {
            let cli = node::CliArgs {
                kubeconfig: args.kubeconfig,
                context: args.context,
                count: args.count,
                name_prefix: args.name_prefix,
                instance_type: args.instance_type.unwrap_or_else(|| "u1.medium".into()),
                roles: args.roles,
                disk_size: args.disk_size,
            };
            node::run_cli(cli, shutdown_signal()).await?;
        }
        Runtime::Cri => {
            let config = kubelet_config(&args)?;
            let client =
                node::run::client_from_kubeconfig(&args.kubeconfig, args.context.as_deref())
                    .await?;
            let network = (!args.no_network).then(|| crate::real_node::NetworkOptions {
                uplink: args.uplink.clone(),
                cluster_dns_ip: args.cluster_dns_service_ip,
                dns_upstream: args.cluster_dns_upstream.clone(),
            });
            crate::real_node::run(client, config, network, shutdown_signal()).await?;
        }
    }
    Ok(())
}

pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: stopping the node agent"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupt: stopping the node agent"),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        node: NodeArgs,
    }

    #[test]
    fn cri_flags_make_a_kubelet_configuration() {
        let cli = Cli::parse_from([
            "node",
            "--kubeconfig",
            "kc",
            "--cri-endpoint",
            "unix:///run/x.sock",
            "--data-dir",
            "/d",
            "--node-name",
            "n1",
            "--pod-cidr",
            "10.244.7.0/24",
            "--cluster-dns",
            "10.96.0.10",
        ]);
        assert_eq!(cli.node.runtime, Runtime::Cri);
        let c = kubelet_config(&cli.node).expect("config");
        assert_eq!(c.node_name, "n1");
        assert_eq!(c.cri_endpoint, "unix:///run/x.sock");
        assert_eq!(c.data_dir, PathBuf::from("/d"));
        assert_eq!(
            c.pod_cidr.map(|p| p.to_string()).as_deref(),
            Some("10.244.7.0/24")
        );
        assert_eq!(c.dns.servers.len(), 1);
        assert_eq!(c.teardown, Teardown::KeepPods);
    }
}
