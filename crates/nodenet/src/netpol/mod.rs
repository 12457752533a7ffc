//! NetworkPolicy enforced on the node, in nftables.
//!
//! [`NetworkPolicies::start`] watches the cluster's Pods, Namespaces and NetworkPolicies
//! through the node's client; [`model`] compiles them into allow-lists for this node's pods
//! and [`render`] keeps table `ip matryoshka-netpol` equal to them, changing only what a
//! change changes (a new peer pod is one set element; a new policy rewrites the chains of
//! the pods it selects). Pods no policy selects are not touched: default allow.
//!
//! **DNS under egress policies.** Upstream requires an egress policy to allow DNS to
//! kube-dns explicitly, because there kube-dns is a set of pods a policy can select. Here
//! the DNS server runs in the node agent on the node's address, which no policy can name
//! (a pod selector cannot select it; an `ipBlock` of the node's address would have to be
//! written per node). So traffic from a pod to its node's DNS server (the `node_dns`
//! addresses, UDP and TCP) is always allowed, ahead of every policy.

pub mod model;
pub mod render;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::Api;
use kube::runtime::watcher;
use tokio::sync::watch as tokio_watch;
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::nft::{Family, Nft};
use crate::proxy::metrics::Histogram;
use crate::proxy::runner::Runner;
use crate::watch::{Change, watch};
use model::{Cluster, PodInfo, Policy, namespace_labels};
use render::Table;

/// The enforcer's settings.
#[derive(Debug, Clone)]
pub struct NetpolConfig {
    pub node_name: String,
    /// The node's DNS server addresses pods may always reach (port used for UDP and TCP).
    pub node_dns: Vec<SocketAddr>,
    /// At most one sync per this after a burst of two.
    pub min_sync_period: Duration,
    pub retry_period: Duration,
    pub nft: Nft,
}

impl NetpolConfig {
    pub fn new(node_name: &str, node_dns: Vec<SocketAddr>) -> Self {
        NetpolConfig {
            node_name: node_name.to_string(),
            node_dns,
            min_sync_period: Duration::from_millis(100),
            retry_period: Duration::from_secs(5),
            nft: Nft::default(),
        }
    }
}

/// A running enforcer.
#[derive(Debug)]
pub struct NetworkPolicies {
    stop: tokio_watch::Sender<bool>,
    syncs: tokio_watch::Receiver<u64>,
    task: Option<JoinHandle<()>>,
    nft: Nft,
    /// How long each sync took.
    pub sync_duration: Arc<Histogram>,
}

impl NetworkPolicies {
    pub fn start(client: kube::Client, config: NetpolConfig) -> NetworkPolicies {
        let (stop, stopped) = tokio_watch::channel(false);
        let (syncs_tx, syncs) = tokio_watch::channel(0u64);
        let sync_duration = Arc::new(Histogram::new(
            "matryoshka_netpol_sync_duration_seconds",
            "NetworkPolicy rule sync latency in seconds",
            (0..15).map(|i| 0.001 * 2f64.powi(i)).collect(),
        ));
        let nft = config.nft.clone();
        let task = tokio::spawn(run(
            client,
            config,
            stopped,
            syncs_tx,
            sync_duration.clone(),
        ));
        NetworkPolicies {
            stop,
            syncs,
            task: Some(task),
            nft,
            sync_duration,
        }
    }

    /// Successful syncs so far.
    pub fn syncs(&self) -> tokio_watch::Receiver<u64> {
        self.syncs.clone()
    }

    /// Waits for the first sync.
    pub async fn synced(&self, timeout: Duration) -> Result<()> {
        let mut rx = self.syncs.clone();
        tokio::time::timeout(timeout, rx.wait_for(|n| *n > 0))
            .await
            .map_err(|_| Error::SyncTimeout {
                component: "network policy",
                timeout,
            })?
            .map_err(|_| Error::Stopped("network policy"))?;
        Ok(())
    }

    /// Stops and deletes the table.
    pub async fn shutdown(mut self) -> Result<()> {
        let _ = self.stop.send(true);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        self.nft.delete_table(Family::Ip, render::TABLE).await
    }
}

impl Drop for NetworkPolicies {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

fn key<K: kube::Resource>(o: &K) -> (String, String) {
    let m = o.meta();
    (
        m.namespace.clone().unwrap_or_default(),
        m.name.clone().unwrap_or_default(),
    )
}

fn dns_elements(addrs: &[SocketAddr]) -> Vec<String> {
    addrs
        .iter()
        .filter(|a| a.is_ipv4())
        .flat_map(|a| ["udp", "tcp"].map(|p| format!("{} . {p} . {}", a.ip(), a.port())))
        .collect()
}

async fn run(
    client: kube::Client,
    config: NetpolConfig,
    mut stopped: tokio_watch::Receiver<bool>,
    syncs: tokio_watch::Sender<u64>,
    sync_duration: Arc<Histogram>,
) {
    let pods = watch(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default(),
        "pods",
    );
    let namespaces = watch(
        Api::<Namespace>::all(client.clone()),
        watcher::Config::default(),
        "namespaces",
    );
    let policies = watch(
        Api::<NetworkPolicy>::all(client),
        watcher::Config::default(),
        "networkpolicies",
    );
    futures::pin_mut!(pods, namespaces, policies);
    let mut cluster = Cluster::default();
    let mut table = Table::new(dns_elements(&config.node_dns));
    let mut runner = Runner::new(config.min_sync_period, 2, Instant::now());
    let mut listed = [false; 3];
    let mut count = 0u64;
    loop {
        let ready = listed.iter().all(|l| *l);
        let now = Instant::now();
        let mut deadline = if ready { runner.deadline(now) } else { None };
        if ready && let Some(s) = table.next_stale_deadline() {
            deadline = Some(deadline.map_or(s, |d| d.min(s)));
        }
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = stopped.changed() => break,
            ev = pods.next() => {
                let Some(ev) = ev else { break };
                let c = &mut cluster;
                match ev {
                    Change::Apply(p) => { c.pods.insert(key(&p), PodInfo::from_pod(&p)); }
                    Change::Delete(p) => { c.pods.remove(&key(&p)); }
                    Change::Relisted(all) => {
                        c.pods = all.iter().map(|p| (key(p), PodInfo::from_pod(p))).collect();
                        listed[0] = true;
                    }
                }
                runner.request();
            }
            ev = namespaces.next() => {
                let Some(ev) = ev else { break };
                let c = &mut cluster;
                match ev {
                    Change::Apply(n) => { c.namespaces.insert(key(&n).1, namespace_labels(&n)); }
                    Change::Delete(n) => { c.namespaces.remove(&key(&n).1); }
                    Change::Relisted(all) => {
                        c.namespaces = all.iter().map(|n| (key(n).1, namespace_labels(n))).collect();
                        listed[1] = true;
                    }
                }
                runner.request();
            }
            ev = policies.next() => {
                let Some(ev) = ev else { break };
                let c = &mut cluster;
                match ev {
                    Change::Apply(p) => { c.policies.insert(key(&p), Policy::from_policy(&p)); }
                    Change::Delete(p) => { c.policies.remove(&key(&p)); }
                    Change::Relisted(all) => {
                        c.policies = all.iter().map(|p| (key(p), Policy::from_policy(p))).collect();
                        listed[2] = true;
                    }
                }
                runner.request();
            }
            _ = sleep => {
                let start = Instant::now();
                runner.start(start);
                let stale = table.stale_deletions(start);
                if let Err(e) = config.nft.run(&stale).await {
                    tracing::warn!(error = %e, "failed to delete stale policy chains");
                    table.invalidate();
                }
                let want = model::compile(&cluster, &config.node_name);
                let tx = table.sync(&want, start);
                match config.nft.run(&tx).await {
                    Ok(()) => {
                        table.applied(want);
                        count += 1;
                        let _ = syncs.send(count);
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "network policy sync failed");
                        table.invalidate();
                        runner.retry(Instant::now(), config.retry_period);
                    }
                }
                sync_duration.observe(start.elapsed());
            }
        }
    }
    if let Err(e) = config.nft.delete_table(Family::Ip, render::TABLE).await {
        tracing::warn!(error = %e, "failed to remove the network policy rules");
    }
}
