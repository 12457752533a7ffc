//! Virtual nodes of one cluster, run by one process: [`VirtualNodes`] registers each node,
//! keeps its Lease and status fresh, and drives the pods bound to any of them.
//!
//! Cost is shared: however many nodes run here, there is one pod watch for the cluster
//! (field selector `spec.nodeName!=`, events routed to the owning node by name) and one
//! driver task that writes pod statuses; each node adds only a heartbeat task. So 1,000
//! virtual nodes cost one watch, not 1,000.

mod driver;
mod heartbeat;

use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use apimachinery::field::Path;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::config::{NodeTemplate, Options};
use crate::error::{Error, Result};
use crate::net::{Ipv4Cidr, PodIps};
use crate::object::Identity;
use crate::sizing::{self, NodeSizing};

use driver::Control;

/// The virtual nodes of one cluster in this process.
pub struct VirtualNodes {
    inner: Arc<Inner>,
    driver: Mutex<Option<JoinHandle<()>>>,
}

struct Inner {
    client: kube::Client,
    options: Options,
    kubelet_version: String,
    nodes: RwLock<HashMap<String, VirtualNode>>,
    /// Slots (pod subnet indexes) taken here or by nodes seen at start.
    slots: Mutex<BTreeSet<u64>>,
    control: mpsc::UnboundedSender<Control>,
    shutdown: watch::Sender<bool>,
}

/// One virtual node. Clones share the node.
#[derive(Clone)]
pub struct VirtualNode {
    shared: Arc<NodeShared>,
}

struct NodeShared {
    identity: Identity,
    sizing: NodeSizing,
    slot: Option<u64>,
    running: watch::Sender<bool>,
    ips: Mutex<PodIps>,
    uid: Mutex<Option<String>>,
    lease_renewals: AtomicU64,
    status_reports: AtomicU64,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl VirtualNode {
    pub fn name(&self) -> &str {
        &self.shared.identity.name
    }

    /// The node's pod subnet (`spec.podCIDR`).
    pub fn pod_cidr(&self) -> Ipv4Cidr {
        self.shared.identity.pod_cidr
    }

    /// The node's InternalIP (the host IP of its pods).
    pub fn internal_ip(&self) -> Ipv4Addr {
        self.shared.identity.internal_ip
    }

    pub fn sizing(&self) -> &NodeSizing {
        &self.shared.sizing
    }

    pub fn labels(&self) -> &std::collections::BTreeMap<String, String> {
        &self.shared.identity.labels
    }

    /// Stops the node, as if its machine failed: no more Lease renewals or status reports,
    /// and its pods are left as they are.
    pub fn stop(&self) {
        self.shared.running.send_replace(false);
    }

    /// Starts a stopped node again: it renews its Lease, reports Ready and resumes its pods.
    pub fn start(&self) {
        self.shared.running.send_replace(true);
    }

    pub fn is_running(&self) -> bool {
        *self.shared.running.borrow()
    }

    /// How many times the Lease was renewed (the registration's write not counted).
    pub fn lease_renewals(&self) -> u64 {
        self.shared.lease_renewals.load(Ordering::Relaxed)
    }

    /// How many times the node status was written.
    pub fn status_reports(&self) -> u64 {
        self.shared.status_reports.load(Ordering::Relaxed)
    }

    /// How many pod IPs are handed out now.
    pub fn pod_ips_in_use(&self) -> usize {
        self.shared.ips.lock().in_use()
    }
}

impl VirtualNodes {
    /// Starts the shared machinery for the cluster `client` addresses: reads the cluster's
    /// version (the kubelet version nodes report), the pod subnets existing nodes hold, and
    /// starts the pod watch.
    pub async fn start(client: kube::Client, options: Options) -> Result<Self> {
        let version = client
            .apiserver_version()
            .await
            .map_err(|e| Error::api("reading the cluster version", e))?;
        let mut slots = BTreeSet::new();
        let nodes: Api<Node> = Api::all(client.clone());
        let existing = nodes
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::api("listing nodes", e))?;
        for n in existing.items {
            if let Some(slot) = n
                .spec
                .and_then(|s| s.pod_cidr)
                .and_then(|c| c.parse::<Ipv4Cidr>().ok())
                .and_then(|c| options.network.cluster_cidr.subnet_index(&c))
            {
                slots.insert(slot);
            }
        }
        let (control, control_rx) = mpsc::unbounded_channel();
        let (shutdown, _) = watch::channel(false);
        let inner = Arc::new(Inner {
            client,
            options,
            kubelet_version: version.git_version,
            nodes: RwLock::new(HashMap::new()),
            slots: Mutex::new(slots),
            control,
            shutdown,
        });
        let driver = tokio::spawn(driver::run(inner.clone(), control_rx));
        Ok(VirtualNodes {
            inner,
            driver: Mutex::new(Some(driver)),
        })
    }

    /// The kubelet version nodes report (the cluster's `gitVersion`).
    pub fn kubelet_version(&self) -> &str {
        &self.inner.kubelet_version
    }

    /// Registers node `name` from `template` (creating the Node, or taking over an existing
    /// one and its pod subnet), writes its status and Lease, and starts its heartbeats.
    pub async fn add(&self, name: &str, template: &NodeTemplate) -> Result<VirtualNode> {
        let sizing = sizing::resolve(&template.sizing, &Path::new("sizing"))
            .map_err(|e| Error::Sizing(e.aggregate_message()))?;
        if sizing.capacity().is_err() {
            return Err(Error::UnknownSize(name.to_string()));
        }
        if self.inner.nodes.read().contains_key(name) {
            return Err(Error::Duplicate(name.to_string()));
        }
        let node = heartbeat::register(&self.inner, name, template, sizing).await?;
        {
            let mut nodes = self.inner.nodes.write();
            if nodes.contains_key(name) {
                drop(nodes);
                self.release_slot(&node);
                return Err(Error::Duplicate(name.to_string()));
            }
            nodes.insert(name.to_string(), node.clone());
        }
        let task = tokio::spawn(heartbeat::run(self.inner.clone(), node.clone()));
        *node.shared.task.lock() = Some(task);
        let _ = self
            .inner
            .control
            .send(Control::NodeAdded(name.to_string()));
        Ok(node)
    }

    /// Adds `count` nodes named `<prefix><i>` for i in 0..count, registering up to 16 at a
    /// time. Stops at the first failure.
    pub async fn add_many(
        &self,
        prefix: &str,
        count: usize,
        template: &NodeTemplate,
    ) -> Result<Vec<VirtualNode>> {
        let results: Vec<Result<VirtualNode>> = futures::stream::iter(0..count)
            .map(|i| {
                let name = format!("{prefix}{i}");
                async move { self.add(&name, template).await }
            })
            .buffered(16)
            .collect()
            .await;
        results.into_iter().collect()
    }

    /// The node called `name`, if it runs here.
    pub fn get(&self, name: &str) -> Option<VirtualNode> {
        self.inner.nodes.read().get(name).cloned()
    }

    /// Names of the nodes running here, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.inner.nodes.read().keys().cloned().collect();
        v.sort();
        v
    }

    pub fn len(&self) -> usize {
        self.inner.nodes.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn release_slot(&self, node: &VirtualNode) {
        if let Some(s) = node.shared.slot {
            self.inner.slots.lock().remove(&s);
        }
    }

    /// Stops node `name` and forgets it; with `delete`, also deletes its Node and Lease (a
    /// machine going away for good).
    pub async fn remove(&self, name: &str, delete: bool) -> Result<()> {
        let node = self
            .inner
            .nodes
            .write()
            .remove(name)
            .ok_or_else(|| Error::NoSuchNode(name.to_string()))?;
        node.stop();
        if let Some(t) = node.shared.task.lock().take() {
            t.abort();
        }
        let _ = self
            .inner
            .control
            .send(Control::NodeRemoved(name.to_string()));
        if delete {
            heartbeat::delete(&self.inner, name).await?;
        }
        self.release_slot(&node);
        Ok(())
    }

    /// Stops every heartbeat and the pod driver. Nodes stay registered (as a kubelet leaves
    /// its Node behind when it stops); they turn NotReady once their Leases expire.
    pub async fn shutdown(&self) {
        self.inner.shutdown.send_replace(true);
        let nodes: Vec<VirtualNode> = self.inner.nodes.read().values().cloned().collect();
        for n in nodes {
            if let Some(t) = n.shared.task.lock().take() {
                t.abort();
            }
        }
        let driver = self.driver.lock().take();
        if let Some(d) = driver {
            let _ = d.await;
        }
    }
}

impl Drop for VirtualNodes {
    fn drop(&mut self) {
        self.inner.shutdown.send_replace(true);
        for n in self.inner.nodes.read().values() {
            if let Some(t) = n.shared.task.lock().take() {
                t.abort();
            }
        }
    }
}
