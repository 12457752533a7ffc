//! Routes to other nodes' pods: flannel's host-gw backend (and kube-router's), fed by Nodes.
//!
//! Every Node with a `spec.podCIDR` and an InternalIP other than this node gets a route
//! `<podCIDR> via <InternalIP> dev <uplink>` on this machine. Machines share one L2 fabric,
//! so the next hop is always on-link and no encapsulation is needed. The routes carry
//! protocol [`ROUTE_PROTOCOL`], which is how this controller finds its own: it flushes them
//! when it starts (a previous run's) and when it stops. The routes are reconciled on every
//! Node change and every [`RESYNC`], so one deleted by hand comes back.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use futures::StreamExt;
use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::watcher;
use tokio::sync::watch as tokio_watch;
use tokio::task::JoinHandle;

use crate::error::Result;
use crate::exec;
use crate::watch::{Change, watch};

/// The routing protocol number marking this controller's routes (`ip route … proto 77`;
/// unassigned in iproute2's `rt_protos`).
pub const ROUTE_PROTOCOL: &str = "77";
/// How often routes are reconciled without a Node change.
pub const RESYNC: Duration = Duration::from_secs(30);

/// The pod network of `node` and where to send it: its IPv4 podCIDR and InternalIP.
pub fn node_route(node: &Node) -> Option<(Ipv4Net, Ipv4Addr)> {
    let spec = node.spec.as_ref()?;
    let cidr = spec
        .pod_cidrs
        .iter()
        .flatten()
        .chain(spec.pod_cidr.iter())
        .filter_map(|c| c.parse::<Ipv4Net>().ok())
        .next()?;
    let ip = internal_ip(node)?;
    Some((cidr, ip))
}

/// A Node's IPv4 InternalIP.
pub fn internal_ip(node: &Node) -> Option<Ipv4Addr> {
    node.status
        .as_ref()?
        .addresses
        .iter()
        .flatten()
        .filter(|a| a.type_ == "InternalIP")
        .filter_map(|a| a.address.parse::<IpAddr>().ok())
        .find_map(|a| match a {
            IpAddr::V4(v4) => Some(v4),
            IpAddr::V6(_) => None,
        })
}

/// The routes controller of one node.
#[derive(Debug)]
pub struct Routes {
    stop: tokio_watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    synced: tokio_watch::Receiver<bool>,
}

impl Routes {
    /// Starts keeping routes to every other node's pods via `uplink`.
    pub async fn start(client: kube::Client, node_name: &str, uplink: &str) -> Result<Routes> {
        flush().await?;
        let (stop, stopped) = tokio_watch::channel(false);
        let (synced_tx, synced) = tokio_watch::channel(false);
        let task = tokio::spawn(run(
            client,
            node_name.to_string(),
            uplink.to_string(),
            stopped,
            synced_tx,
        ));
        Ok(Routes {
            stop,
            task: Some(task),
            synced,
        })
    }

    /// Waits until the Nodes were listed and routed once.
    pub async fn synced(&self, timeout: Duration) -> Result<()> {
        let mut rx = self.synced.clone();
        tokio::time::timeout(timeout, rx.wait_for(|s| *s))
            .await
            .map_err(|_| crate::Error::SyncTimeout {
                component: "pod network routes",
                timeout,
            })?
            .map_err(|_| crate::Error::Stopped("pod network routes"))?;
        Ok(())
    }

    /// Stops and removes the routes.
    pub async fn shutdown(mut self) -> Result<()> {
        let _ = self.stop.send(true);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        flush().await
    }
}

impl Drop for Routes {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// Deletes every route of [`ROUTE_PROTOCOL`].
pub async fn flush() -> Result<()> {
    exec::ip(&["route", "flush", "proto", ROUTE_PROTOCOL])
        .await
        .map(|_| ())
}

/// The routes of [`ROUTE_PROTOCOL`] in the kernel: destination → gateway.
pub async fn installed() -> Result<BTreeMap<Ipv4Net, Ipv4Addr>> {
    let out = exec::ip(&["-4", "route", "show", "proto", ROUTE_PROTOCOL]).await?;
    let mut routes = BTreeMap::new();
    for line in out.stdout.lines() {
        let mut words = line.split_whitespace();
        let Some(dst) = words.next().and_then(|d| d.parse::<Ipv4Net>().ok()) else {
            continue;
        };
        let mut via = None;
        while let Some(w) = words.next() {
            if w == "via" {
                via = words.next().and_then(|g| g.parse::<Ipv4Addr>().ok());
            }
        }
        if let Some(gw) = via {
            routes.insert(dst, gw);
        }
    }
    Ok(routes)
}

async fn reconcile(want: &BTreeMap<Ipv4Net, Ipv4Addr>, uplink: &str) {
    let have = match installed().await {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!(error = %e, "failed to list pod network routes");
            return;
        }
    };
    for (dst, gw) in want {
        if have.get(dst) == Some(gw) {
            continue;
        }
        let (dst, gw) = (dst.to_string(), gw.to_string());
        let args = [
            "route",
            "replace",
            &dst,
            "via",
            &gw,
            "dev",
            uplink,
            "proto",
            ROUTE_PROTOCOL,
        ];
        if let Err(e) = exec::ip(&args).await {
            tracing::warn!(error = %e, "failed to add a pod network route");
        }
    }
    for dst in have.keys() {
        if !want.contains_key(dst) {
            let dst = dst.to_string();
            let args = ["route", "del", &dst, "proto", ROUTE_PROTOCOL];
            if let Err(e) = exec::ip(&args).await {
                tracing::warn!(error = %e, "failed to delete a pod network route");
            }
        }
    }
}

async fn run(
    client: kube::Client,
    node_name: String,
    uplink: String,
    mut stopped: tokio_watch::Receiver<bool>,
    synced: tokio_watch::Sender<bool>,
) {
    let nodes = watch(
        Api::<Node>::all(client),
        watcher::Config::default(),
        "nodes",
    );
    futures::pin_mut!(nodes);
    let mut known: BTreeMap<String, (Ipv4Net, Ipv4Addr)> = BTreeMap::new();
    let mut listed = false;
    let mut resync = tokio::time::interval(RESYNC);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = stopped.changed() => break,
            ev = nodes.next() => {
                let Some(ev) = ev else { break };
                fn upsert(known: &mut BTreeMap<String, (Ipv4Net, Ipv4Addr)>, n: &Node, me: &str) {
                    let name = n.metadata.name.clone().unwrap_or_default();
                    match node_route(n).filter(|_| name != me) {
                        Some(r) => known.insert(name, r),
                        None => known.remove(&name),
                    };
                }
                match ev {
                    Change::Apply(n) => upsert(&mut known, &n, &node_name),
                    Change::Delete(n) => {
                        known.remove(n.metadata.name.as_deref().unwrap_or_default());
                    }
                    Change::Relisted(all) => {
                        known.clear();
                        for n in &all {
                            upsert(&mut known, n, &node_name);
                        }
                        listed = true;
                    }
                }
                if listed {
                    reconcile(&known.values().copied().collect(), &uplink).await;
                    let _ = synced.send(true);
                }
            }
            _ = resync.tick() => {
                if listed {
                    reconcile(&known.values().copied().collect(), &uplink).await;
                }
            }
        }
    }
}
