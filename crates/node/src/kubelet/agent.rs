//! The state one CRI node agent shares between its parts: configuration, clients, managers,
//! what the node is (addresses, allocatable, pod subnet), the pods the API binds to it with
//! the statuses the agent computed, and the pod workers.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodStatus, Service};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use parking_lot::{Mutex, RwLock};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use super::backoff::Backoff;
use super::config::KubeletConfig;
use super::cri::CriClient;
use super::dns::DnsSettings;
use super::events::Recorder;
use super::images::ImageManager;
use super::layout::Layout;
use super::probes::ProbeManager;
use super::runtime_state::RuntimeReader;
use super::security::SecurityOptions;
use super::volumes::{ObjectSource, VolumeManager};
use crate::net::Ipv4Cidr;

/// What the node is, as the pods need it.
#[derive(Debug, Clone, Default)]
pub struct NodeFacts {
    /// The node's IPs, primary first (`status.hostIPs` of its pods).
    pub host_ips: Vec<String>,
    pub allocatable: BTreeMap<String, Quantity>,
    /// Memory capacity in bytes (Burstable OOM scores).
    pub memory_bytes: i64,
    pub pod_cidr: Option<Ipv4Cidr>,
}

/// A pod bound to the node.
#[derive(Debug, Clone)]
pub struct PodEntry {
    /// As the API has it.
    pub pod: Pod,
    /// The status the agent last wrote.
    pub status: Option<PodStatus>,
}

/// A pod worker's handle.
pub struct WorkerHandle {
    pub notify: Arc<Notify>,
    pub task: JoinHandle<()>,
}

/// The agent's shared state.
pub struct Agent {
    pub config: KubeletConfig,
    pub layout: Layout,
    pub client: kube::Client,
    pub cri: CriClient,
    pub reader: RuntimeReader,
    pub images: Arc<ImageManager>,
    pub probes: Arc<ProbeManager>,
    pub recorder: Recorder,
    /// Container restart back-off.
    pub backoff: Backoff,
    pub volumes: VolumeManager,
    /// ConfigMaps and Secrets for environments.
    pub objects: Arc<dyn ObjectSource>,
    /// Every Service of the cluster, by namespace/name, once listed (`None` before: the
    /// kubelet builds no environment until its Service informer has synced).
    pub services: RwLock<Option<HashMap<String, Service>>>,
    pub dns: DnsSettings,
    pub security: SecurityOptions,
    pub facts: RwLock<NodeFacts>,
    /// By UID.
    pub pods: RwLock<HashMap<String, PodEntry>>,
    /// By UID.
    pub workers: Mutex<HashMap<String, WorkerHandle>>,
    /// UIDs whose leftovers are being removed.
    pub cleaning: Mutex<std::collections::HashSet<String>>,
    /// Whether the pod watch has listed the node's pods once (before that nothing in the
    /// runtime is an orphan).
    pub pods_synced: watch::Sender<bool>,
    /// The machine's lowest settable OOM score.
    pub oom_floor: i64,
    /// The kubelet's `major.minor` (probes' `User-Agent`).
    pub version: String,
    /// The kubelet's `gitVersion` (reported in `nodeInfo`).
    pub git_version: String,
    pub shutdown: watch::Sender<bool>,
}

impl Agent {
    /// Wakes the worker of pod `uid`, if it has one.
    pub fn wake(&self, uid: &str) {
        if let Some(w) = self.workers.lock().get(uid) {
            w.notify.notify_one();
        }
    }

    /// The API pod of `uid`.
    pub fn pod(&self, uid: &str) -> Option<Pod> {
        self.pods.read().get(uid).map(|e| e.pod.clone())
    }

    pub fn facts(&self) -> NodeFacts {
        self.facts.read().clone()
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }
}
