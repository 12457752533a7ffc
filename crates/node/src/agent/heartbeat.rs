//! A virtual node's registration and heartbeats: the Node (created, or taken over if it
//! exists), its status through `/status`, and its Lease in `kube-node-lease`, renewed every
//! `lease_renew_interval` and re-posted status every `status_report_interval`, while the node
//! runs. A stopped node writes nothing; started again, it reports at once.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;

use super::driver::Control;
use super::{Inner, NodeShared, VirtualNode};
use crate::config::{FIELD_MANAGER, NodeTemplate};
use crate::error::{Error, Result, status_code};
use crate::net::{Ipv4Cidr, PodIps};
use crate::object::{self, Identity, LEASE_NAMESPACE};
use crate::pod::lifecycle;
use crate::sizing::NodeSizing;

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    }
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    }
}

/// Takes the lowest free pod subnet slot.
fn take_slot(inner: &Inner) -> Result<u64> {
    let net = &inner.options.network;
    let count = net.cluster_cidr.subnet_count(net.node_cidr_mask);
    let mut slots = inner.slots.lock();
    let free = (0..count)
        .find(|s| !slots.contains(s))
        .ok_or_else(|| Error::PoolExhausted {
            pool: net.cluster_cidr.to_string(),
            mask: net.node_cidr_mask,
        })?;
    slots.insert(free);
    Ok(free)
}

fn random_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Creates (or takes over) the Node, writes its status and Lease.
pub(super) async fn register(
    inner: &Arc<Inner>,
    name: &str,
    template: &NodeTemplate,
    sizing: NodeSizing,
) -> Result<VirtualNode> {
    let net = &inner.options.network;
    let mut slot = take_slot(inner)?;
    let subnet = |s: u64| {
        net.cluster_cidr
            .subnet(s, net.node_cidr_mask)
            .expect("a slot below the subnet count")
    };
    let mut identity = Identity {
        name: name.to_string(),
        labels: object::labels(name, &sizing, &template.roles, &template.labels),
        taints: template.taints.clone(),
        pod_cidr: subnet(slot),
        internal_ip: net
            .node_network
            .host(slot + 2)
            .unwrap_or_else(|| net.node_network.network()),
        kubelet_version: inner.kubelet_version.clone(),
        machine_id: random_id(),
        boot_id: random_id(),
    };
    let api: Api<Node> = Api::all(inner.client.clone());
    let created = api.create(&post_params(), &object::node(&identity)).await;
    let taken_over = created.is_err();
    let node = match created {
        Ok(n) => n,
        Err(e) if status_code(&e) == Some(409) => {
            let existing = api
                .get(name)
                .await
                .map_err(|e| Error::api(format!("reading node {name}"), e))?;
            // Keep the subnet the node already has: pods on it hold its addresses.
            let theirs = existing
                .spec
                .as_ref()
                .and_then(|s| s.pod_cidr.as_deref())
                .and_then(|c| c.parse::<Ipv4Cidr>().ok());
            let mut patch = json!({"metadata": {"labels": identity.labels}});
            match theirs {
                Some(c) if c != identity.pod_cidr => {
                    identity.pod_cidr = c;
                    let mut slots = inner.slots.lock();
                    slots.remove(&slot);
                    if let Some(s) = net.cluster_cidr.subnet_index(&c) {
                        slots.insert(s);
                        slot = s;
                        if let Some(ip) = net.node_network.host(s + 2) {
                            identity.internal_ip = ip;
                        }
                    }
                }
                Some(_) => {}
                None => {
                    patch["spec"] = json!({
                        "podCIDR": identity.pod_cidr.to_string(),
                        "podCIDRs": [identity.pod_cidr.to_string()],
                    });
                }
            }
            api.patch(name, &params(), &Patch::Merge(&patch))
                .await
                .map_err(|e| Error::api(format!("updating node {name}"), e))?
        }
        Err(e) => {
            inner.slots.lock().remove(&slot);
            return Err(Error::api(format!("creating node {name}"), e));
        }
    };
    let mut ips = PodIps::new(identity.pod_cidr);
    if taken_over {
        reserve_pod_ips(inner, name, &mut ips).await?;
    }
    let (running, _) = watch::channel(true);
    let shared = Arc::new(NodeShared {
        ips: Mutex::new(ips),
        identity,
        sizing,
        slot: Some(slot),
        running,
        uid: Mutex::new(node.metadata.uid.clone()),
        lease_renewals: AtomicU64::new(0),
        status_reports: AtomicU64::new(0),
        task: Mutex::new(None),
    });
    let vn = VirtualNode { shared };
    post_status(inner, &vn, &now_time()).await?;
    ensure_lease(inner, &vn).await?;
    Ok(vn)
}

/// Marks the IPs of the pods already running on a node taken over as used, before any new
/// pod of it can be given one.
async fn reserve_pod_ips(inner: &Inner, name: &str, ips: &mut PodIps) -> Result<()> {
    let pods: Api<Pod> = Api::all(inner.client.clone());
    let lp = ListParams::default().fields(&format!("spec.nodeName={name}"));
    let list = pods
        .list(&lp)
        .await
        .map_err(|e| Error::api(format!("listing the pods of node {name}"), e))?;
    for p in list.items {
        let ip = p
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_deref())
            .and_then(|ip| ip.parse().ok());
        if let (Some(ip), Some(uid)) = (ip, p.metadata.uid.as_deref())
            && lifecycle::stage(&p) != lifecycle::Stage::Terminal
        {
            ips.reserve(uid, ip);
        }
    }
    Ok(())
}

fn now_time() -> Time {
    Time(Timestamp::now())
}

/// Writes the node's full status; re-creates the Node if someone deleted it.
async fn post_status(inner: &Inner, node: &VirtualNode, since: &Time) -> Result<()> {
    let id = &node.shared.identity;
    let status = object::status(id, &node.shared.sizing, &now_time(), since)
        .ok_or_else(|| Error::UnknownSize(id.name.clone()))?;
    let api: Api<Node> = Api::all(inner.client.clone());
    let patch = json!({"status": status});
    match api
        .patch_status(&id.name, &params(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(e) if status_code(&e) == Some(404) => {
            let n = api
                .create(&post_params(), &object::node(id))
                .await
                .map_err(|e| Error::api(format!("re-creating node {}", id.name), e))?;
            *node.shared.uid.lock() = n.metadata.uid.clone();
            api.patch_status(&id.name, &params(), &Patch::Merge(&patch))
                .await
                .map_err(|e| Error::api(format!("writing the status of node {}", id.name), e))?;
        }
        Err(e) => {
            return Err(Error::api(
                format!("writing the status of node {}", id.name),
                e,
            ));
        }
    }
    node.shared.status_reports.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Creates the Lease, or takes it over and renews it.
async fn ensure_lease(inner: &Inner, node: &VirtualNode) -> Result<()> {
    let name = node.name();
    let api: Api<Lease> = Api::namespaced(inner.client.clone(), LEASE_NAMESPACE);
    let uid = node.shared.uid.lock().clone();
    let lease = object::lease(
        name,
        uid.as_deref(),
        inner.options.timing.lease_duration_seconds,
        MicroTime(Timestamp::now()),
    );
    match api.create(&post_params(), &lease).await {
        Ok(_) => Ok(()),
        Err(e) if status_code(&e) == Some(409) => {
            let patch = json!({"metadata": {"ownerReferences": lease.metadata.owner_references}, "spec": lease.spec});
            api.patch(name, &params(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
                .map_err(|e| Error::api(format!("taking over the lease of node {name}"), e))
        }
        Err(e) => Err(Error::api(format!("creating the lease of node {name}"), e)),
    }
}

/// Renews the Lease (`renewTime` now); re-creates it if it is gone.
async fn renew_lease(inner: &Inner, node: &VirtualNode) -> Result<()> {
    let name = node.name();
    let api: Api<Lease> = Api::namespaced(inner.client.clone(), LEASE_NAMESPACE);
    let patch = json!({"spec": {
        "holderIdentity": name,
        "leaseDurationSeconds": inner.options.timing.lease_duration_seconds,
        "renewTime": MicroTime(Timestamp::now()),
    }});
    match api.patch(name, &params(), &Patch::Merge(&patch)).await {
        Ok(_) => {}
        Err(e) if status_code(&e) == Some(404) => ensure_lease(inner, node).await?,
        Err(e) => return Err(Error::api(format!("renewing the lease of node {name}"), e)),
    }
    node.shared.lease_renewals.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// A per-node offset within `period`, so many nodes do not renew at the same instant.
fn jitter(name: &str, period: Duration) -> Duration {
    let mut h = DefaultHasher::new();
    name.hash(&mut h);
    let nanos = period.as_nanos().max(1);
    Duration::from_nanos((u128::from(h.finish()) % nanos) as u64)
}

/// The heartbeat loop of one node, until shutdown (or the task is aborted).
pub(super) async fn run(inner: Arc<Inner>, node: VirtualNode) {
    let timing = inner.options.timing.clone();
    let renew = timing.lease_renew_interval.max(Duration::from_millis(1));
    let report = timing.status_report_interval.max(Duration::from_millis(1));
    let mut running = node.shared.running.subscribe();
    let mut shutdown = inner.shutdown.subscribe();
    let mut ready_since = now_time();
    let mut next_lease = Instant::now() + jitter(node.name(), renew);
    let mut next_status = Instant::now() + report;
    loop {
        if *shutdown.borrow() {
            return;
        }
        if !*running.borrow_and_update() {
            tokio::select! {
                r = running.changed() => if r.is_err() { return },
                _ = shutdown.changed() => return,
            }
            if *running.borrow() {
                // Back from a failure: report at once, and have the pods looked at again.
                ready_since = now_time();
                next_lease = Instant::now();
                next_status = Instant::now();
                let _ = inner
                    .control
                    .send(Control::NodeStarted(node.name().to_string()));
            }
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(next_lease.min(next_status)) => {}
            r = running.changed() => {
                if r.is_err() { return }
                continue;
            }
            _ = shutdown.changed() => return,
        }
        let now = Instant::now();
        if now >= next_lease {
            if let Err(e) = renew_lease(&inner, &node).await {
                tracing::warn!(node = node.name(), error = %e, "lease renewal failed");
            }
            next_lease = now + renew;
        }
        if now >= next_status {
            if let Err(e) = post_status(&inner, &node, &ready_since).await {
                tracing::warn!(node = node.name(), error = %e, "node status report failed");
            }
            next_status = now + report;
        }
    }
}

/// Deletes the Lease and the Node of `name` (missing ones are fine).
pub(super) async fn delete(inner: &Inner, name: &str) -> Result<()> {
    let leases: Api<Lease> = Api::namespaced(inner.client.clone(), LEASE_NAMESPACE);
    match leases.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(e) if status_code(&e) == Some(404) => {}
        Err(e) => return Err(Error::api(format!("deleting the lease of node {name}"), e)),
    }
    let nodes: Api<Node> = Api::all(inner.client.clone());
    match nodes.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if status_code(&e) == Some(404) => Ok(()),
        Err(e) => Err(Error::api(format!("deleting node {name}"), e)),
    }
}
