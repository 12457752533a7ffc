//! Which logical clusters exist. The root cluster always does; others are LogicalCluster
//! objects in the root cluster.

use apimachinery::meta;
use registry::cache::Filter;
use serde_json::Value;

use crate::ControlPlane;

/// A logical cluster's LogicalCluster as the cache has it: whether it is being deleted and
/// whether it is Ready; `None` when there is none (LogicalClusters are kept decoded).
fn lifecycle(cp: &ControlPlane, cluster: &str) -> Option<(bool, bool)> {
    let o = cp.store.shared_cache().get(
        crate::tenancy::GROUP,
        crate::tenancy::PLURAL,
        apimachinery::cluster::ROOT,
        "",
        cluster,
    )?;
    let v = o.value();
    Some((
        meta::deletion_timestamp(&v).is_some(),
        v.pointer("/status/phase").and_then(Value::as_str) == Some("Ready"),
    ))
}

/// Whether `cluster` (not the root) is a served logical cluster: Ready, not being deleted,
/// and its datastore connected here.
pub async fn exists(cp: &ControlPlane, cluster: &str) -> bool {
    matches!(lifecycle(cp, cluster), Some((false, true))) && cp.store.shard(cluster).is_ok()
}

/// Whether `cluster` is a logical cluster on its way to being served: created (or being
/// restored) and not yet Ready, not being deleted. Its requests are answered 503 with a
/// Retry-After rather than 404, so a client that acts on its creation retries instead of
/// concluding it is gone.
pub fn pending(cp: &ControlPlane, cluster: &str) -> bool {
    cluster != apimachinery::cluster::ROOT
        && match lifecycle(cp, cluster) {
            Some((false, false)) => true,
            // Ready, but its datastore is not connected on this replica (yet, or any more).
            Some((false, true)) => cp.store.shard(cluster).is_err(),
            _ => false,
        }
}

/// Whether the control plane's loops may write into `cluster`: the root cluster, or a
/// logical cluster that exists and is not being deleted (provisioning or Ready). A loop woken
/// by the deletion of a cluster's keys must not write them again.
pub fn live(cp: &ControlPlane, cluster: &str) -> bool {
    cluster == apimachinery::cluster::ROOT || matches!(lifecycle(cp, cluster), Some((false, _)))
}

/// The logical clusters served now (Ready, not being deleted).
pub fn served(cp: &ControlPlane) -> Vec<String> {
    let filter = Filter {
        cluster: Some(apimachinery::cluster::ROOT.to_string()),
        ..Filter::default()
    };
    cp.store
        .shared_cache()
        .list(crate::tenancy::GROUP, crate::tenancy::PLURAL, &filter)
        .0
        .iter()
        .map(|o| o.value())
        .filter(|v| {
            meta::deletion_timestamp(v).is_none()
                && v.pointer("/status/phase").and_then(Value::as_str) == Some("Ready")
        })
        .map(|v| meta::name(&v).to_string())
        .collect()
}
