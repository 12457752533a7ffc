//! What a CRI node agent is configured with. Defaults are upstream kubelet's where it has
//! one (port 10250, 110 pods, back-off 10 s → 5 min, Lease 40 s renewed every 10 s, status
//! reported every 5 min or on change, relist every second).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;

use super::Teardown;
use super::backoff;
use super::containerd::ContainerdOptions;
use crate::net::Ipv4Cidr;
use crate::sizing::SizingInput;

/// The CRI endpoint a kubelet dials unless told otherwise.
pub const DEFAULT_CRI_ENDPOINT: &str = "unix:///run/containerd/containerd.sock";
/// Where `matryoshka node` keeps its data unless told otherwise.
pub const DEFAULT_DATA_DIR: &str = "/var/lib/matryoshka/node";

/// The node's DNS settings (kubelet `clusterDNS`, `clusterDomain`, `resolvConf`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDns {
    /// The cluster DNS servers; empty when the cluster has none (ClusterFirst pods then use
    /// the host's configuration, with a `MissingClusterDNS` event).
    pub servers: Vec<IpAddr>,
    /// The cluster domain (`cluster.local`).
    pub domain: String,
    /// The host's resolver configuration (`/etc/resolv.conf`).
    pub host_resolv_conf: PathBuf,
    /// The host's hosts file, the base of host-network pods' `/etc/hosts`.
    pub host_hosts_file: PathBuf,
}

impl Default for ClusterDns {
    fn default() -> Self {
        ClusterDns {
            servers: Vec::new(),
            domain: "cluster.local".to_string(),
            host_resolv_conf: PathBuf::from("/etc/resolv.conf"),
            host_hosts_file: PathBuf::from("/etc/hosts"),
        }
    }
}

/// Intervals of the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletTiming {
    /// How often the runtime is listed for changes (upstream PLEG relist: 1 s).
    pub relist: Duration,
    /// How often a pod is synced without a reason (volume contents refresh).
    pub resync: Duration,
    /// Container restart back-off: initial delay and maximum.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// `leaseDurationSeconds` of the node Lease and its renew interval.
    pub lease_duration_seconds: i32,
    pub lease_renew: Duration,
    /// How often the node status is computed (posted when it changed) and posted anyway.
    pub status_update: Duration,
    pub status_report: Duration,
}

impl Default for KubeletTiming {
    fn default() -> Self {
        KubeletTiming {
            relist: Duration::from_secs(1),
            resync: Duration::from_secs(10),
            backoff_initial: backoff::INITIAL,
            backoff_max: backoff::MAX,
            lease_duration_seconds: 40,
            lease_renew: Duration::from_secs(10),
            status_update: Duration::from_secs(10),
            status_report: Duration::from_secs(300),
        }
    }
}

/// A CRI node agent's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeletConfig {
    pub node_name: String,
    /// The data directory ([`super::Layout`]).
    pub data_dir: PathBuf,
    /// The CRI endpoint to use; when nothing answers there the agent starts its own
    /// containerd with a socket in the data directory.
    pub cri_endpoint: String,
    /// The agent's own containerd.
    pub containerd: ContainerdOptions,
    /// The CNI configuration directory of an external runtime (the agent's own containerd
    /// reads the data directory's).
    pub cni_conf_dir: Option<PathBuf>,
    /// The node's IP (`InternalIP`); when unset, the address of the default route's interface.
    pub node_ip: Option<IpAddr>,
    /// The node's pod subnet; when unset, the Node's `spec.podCIDR`, else a free /24 of
    /// `cluster_cidr` the agent claims (as virtual nodes do).
    pub pod_cidr: Option<Ipv4Cidr>,
    pub cluster_cidr: Ipv4Cidr,
    pub node_cidr_mask: u8,
    /// The Linux bridge of the pod network.
    pub bridge: String,
    /// Whether the CNI bridge masquerades pod traffic leaving the node's subnet (on for a
    /// node alone; off when a node network masquerades only what leaves the cluster).
    pub cni_masquerade: bool,
    /// The cgroup every pod cgroup is below (`--cgroup-root`; `/` puts them at `/kubepods`).
    pub cgroup_root: String,
    pub dns: ClusterDns,
    /// Capacity: an instance type or resources; both unset means the machine's own.
    pub sizing: SizingInput,
    /// More node labels, taints and roles (`node-role.kubernetes.io/<role>`).
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub roles: Vec<String>,
    /// The address the kubelet API listens on (upstream's `--address`, `0.0.0.0`).
    pub kubelet_address: IpAddr,
    /// The port of the kubelet API, reported in `daemonEndpoints` (0: any free port, the one
    /// bound is reported).
    pub kubelet_port: u16,
    /// The CA bundle (PEM) client certificates at the kubelet API must chain to
    /// (`--client-ca-file`); `None`: the cluster's own, from the `kube-root-ca.crt` ConfigMap
    /// of `kube-system`.
    pub client_ca_pem: Option<String>,
    /// The Node's `spec.providerID` (the infrastructure provider's name for the machine,
    /// kubelet's `--provider-id`).
    pub provider_id: Option<String>,
    /// Ask the cluster for the kubelet API's serving certificate (a
    /// `kubernetes.io/kubelet-serving` request) and renew it, instead of serving a
    /// self-signed one (upstream's `serverTLSBootstrap`).
    pub server_tls_bootstrap: bool,
    pub timing: KubeletTiming,
    /// What stopping the agent does to its pods.
    pub teardown: Teardown,
}

impl KubeletConfig {
    /// A configuration for node `name` with data under `data_dir` and upstream's defaults.
    pub fn new(name: &str, data_dir: impl Into<PathBuf>) -> Self {
        KubeletConfig {
            node_name: name.to_string(),
            data_dir: data_dir.into(),
            cri_endpoint: DEFAULT_CRI_ENDPOINT.to_string(),
            containerd: ContainerdOptions::default(),
            cni_conf_dir: None,
            node_ip: None,
            pod_cidr: None,
            cluster_cidr: Ipv4Cidr::new(std::net::Ipv4Addr::new(10, 244, 0, 0), 16)
                .expect("a valid network"),
            node_cidr_mask: 24,
            bridge: super::cni::DEFAULT_BRIDGE.to_string(),
            cni_masquerade: true,
            cgroup_root: "/".to_string(),
            dns: ClusterDns::default(),
            sizing: SizingInput::default(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            roles: Vec::new(),
            kubelet_address: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            kubelet_port: 10250,
            client_ca_pem: None,
            provider_id: None,
            server_tls_bootstrap: false,
            timing: KubeletTiming::default(),
            teardown: Teardown::KeepPods,
        }
    }
}
