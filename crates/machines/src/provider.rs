//! Infrastructure providers: what turns a `MatryoshkaMachine` into a node of its workload
//! cluster. Every provider answers the same contract (spec: capi-kubevirt.md §1.8): make the
//! machine exist under the machine's name, give its `providerID` (the Node's
//! `spec.providerID`) and addresses, and make it go away.
//!
//! `virtual`: a node of the in-process node agent ([`node::VirtualNodes`], one per workload
//! cluster: one pod watch however many nodes) — registered, heart-beating, sized like the real
//! thing, running no containers. Its providerID is `virtual://<name>`. Virtual machines live
//! in this process: a replica that takes over the controllers adopts them again on its first
//! reconcile (the Node is taken over with its pod subnet).

use std::collections::HashMap;
use std::sync::Arc;

use node::{NodeTemplate, Options, VirtualNodes};
use runtime::client::ClusterClients;
use runtime::error::{Error, Result};

/// A machine's address as the Machine reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    pub type_: &'static str,
    pub address: String,
}

/// What a provider reports once a machine exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provisioned {
    pub provider_id: String,
    pub addresses: Vec<Address>,
}

fn node_err(e: node::Error) -> Error {
    Error::Retry(format!("virtual machine: {e}"))
}

/// The virtual machines of every workload cluster served by this process.
pub struct VirtualProvider {
    clients: ClusterClients,
    options: Options,
    pools: tokio::sync::Mutex<HashMap<String, Arc<VirtualNodes>>>,
}

impl VirtualProvider {
    pub fn new(clients: ClusterClients, options: Options) -> Self {
        VirtualProvider {
            clients,
            options,
            pools: Default::default(),
        }
    }

    /// Makes machine `name` run in workload cluster `cluster` from `template`. Adding and
    /// removing hold the pools' lock, so a pool is never shut down under an addition.
    pub async fn ensure(
        &self,
        cluster: &str,
        name: &str,
        template: &NodeTemplate,
    ) -> Result<Provisioned> {
        let mut pools = self.pools.lock().await;
        let pool = match pools.get(cluster) {
            Some(p) => p.clone(),
            None => {
                let client = self.clients.cluster(cluster)?;
                let p = Arc::new(
                    VirtualNodes::start(client, self.options.clone())
                        .await
                        .map_err(node_err)?,
                );
                pools.insert(cluster.to_string(), p.clone());
                p
            }
        };
        if pool.get(name).is_none() {
            match pool.add(name, template).await {
                Ok(_) | Err(node::Error::Duplicate(_)) => {}
                Err(e) => return Err(node_err(e)),
            }
        }
        Ok(Provisioned {
            provider_id: format!("virtual://{name}"),
            addresses: vec![Address {
                type_: "Hostname",
                address: name.to_string(),
            }],
        })
    }

    /// Stops machine `name` of `cluster` (its Node stays for the Machine controller to delete,
    /// as a powered-off machine leaves its Node behind); the cluster's pool goes with its last
    /// machine.
    pub async fn remove(&self, cluster: &str, name: &str) -> Result<()> {
        let mut pools = self.pools.lock().await;
        let Some(p) = pools.get(cluster).cloned() else {
            return Ok(());
        };
        tracing::debug!(cluster, machine = name, "stopping a virtual machine");
        match p.remove(name, false).await {
            Ok(()) | Err(node::Error::NoSuchNode(_)) => {}
            Err(e) => return Err(node_err(e)),
        }
        if p.is_empty() {
            pools.remove(cluster);
            p.shutdown().await;
        }
        Ok(())
    }

    /// Whether machine `name` of `cluster` runs here.
    pub async fn running(&self, cluster: &str, name: &str) -> bool {
        let pool = self.pools.lock().await.get(cluster).cloned();
        pool.is_some_and(|p| p.get(name).is_some())
    }

    /// Stops every machine (Nodes stay; they turn NotReady when their Leases expire).
    pub async fn stop_all(&self) {
        let pools: Vec<Arc<VirtualNodes>> =
            self.pools.lock().await.drain().map(|(_, p)| p).collect();
        for p in pools {
            p.shutdown().await;
        }
    }
}

impl VirtualProvider {
    /// Stops machine `name` in whichever workload cluster runs it.
    pub async fn remove_everywhere(&self, name: &str) -> Result<()> {
        let clusters: Vec<String> = self.pools.lock().await.keys().cloned().collect();
        for c in clusters {
            self.remove(&c, name).await?;
        }
        Ok(())
    }
}
