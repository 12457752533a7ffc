//! Worker nodes of tenant clusters: for every node group, `minReplicas` virtual nodes in the
//! tenant cluster, run in this process by the node agent ([`node::VirtualNodes`], one per
//! cluster: one pod watch however many nodes). Nodes are named `kubernetes-<name>-<group>-<i>`,
//! sized by the group's instance type or resources with the kubelet reservation formulas (the
//! node crate's sizing), and labelled with the group's roles and instance type.
//!
//! Node `i` of a group exists for `i < minReplicas`: growing adds the next indexes, shrinking
//! removes the highest ones (Node and Lease deleted). Autoscaling to `maxReplicas` and
//! machine health checks are for later.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use node::{Options, VirtualNodes};

use runtime::client::ClusterClients;
use runtime::error::{Error, Result};

use crate::spec::NodeGroup;

/// What a cluster's node groups amount to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub desired: usize,
    pub running: usize,
}

/// The virtual nodes of every tenant cluster served by this process.
pub struct NodePools {
    clients: ClusterClients,
    options: Options,
    pools: tokio::sync::Mutex<HashMap<String, Arc<VirtualNodes>>>,
}

fn node_err(e: node::Error) -> Error {
    Error::Retry(format!("virtual nodes: {e}"))
}

impl NodePools {
    pub fn new(clients: ClusterClients, options: Options) -> Arc<Self> {
        Arc::new(NodePools {
            clients,
            options,
            pools: Default::default(),
        })
    }

    async fn pool(&self, cluster: &str) -> Result<Arc<VirtualNodes>> {
        let mut pools = self.pools.lock().await;
        if let Some(p) = pools.get(cluster) {
            return Ok(p.clone());
        }
        let client = self.clients.cluster(cluster)?;
        let p = Arc::new(
            VirtualNodes::start(client, self.options.clone())
                .await
                .map_err(node_err)?,
        );
        pools.insert(cluster.to_string(), p.clone());
        Ok(p)
    }

    /// Brings `cluster`'s nodes to what `groups` ask for; node names start with `prefix`.
    pub async fn ensure(
        &self,
        cluster: &str,
        prefix: &str,
        groups: &[NodeGroup],
    ) -> Result<Counts> {
        let pool = self.pool(cluster).await?;
        let mut desired = BTreeSet::new();
        for g in groups {
            for i in 0..g.min_replicas {
                let name = format!("{prefix}-{}-{i}", g.name);
                if pool.get(&name).is_none() {
                    pool.add(&name, &g.template).await.map_err(node_err)?;
                }
                desired.insert(name);
            }
        }
        for name in pool.names() {
            if !desired.contains(&name) {
                pool.remove(&name, true).await.map_err(node_err)?;
            }
        }
        let running = pool.names().iter().filter(|n| desired.contains(*n)).count();
        Ok(Counts {
            desired: desired.len(),
            running,
        })
    }

    /// Stops `cluster`'s nodes (its data goes with the logical cluster).
    pub async fn stop(&self, cluster: &str) {
        let pool = self.pools.lock().await.remove(cluster);
        if let Some(p) = pool {
            p.shutdown().await;
        }
    }

    /// Stops every cluster's nodes.
    pub async fn stop_all(&self) {
        let pools: Vec<Arc<VirtualNodes>> =
            self.pools.lock().await.drain().map(|(_, p)| p).collect();
        for p in pools {
            p.shutdown().await;
        }
    }
}
