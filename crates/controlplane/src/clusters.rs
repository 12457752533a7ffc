//! Which logical clusters exist. The root cluster always does; others are LogicalCluster
//! objects in the root cluster.

use apimachinery::meta;
use registry::cache::Filter;
use serde_json::Value;

use crate::ControlPlane;

/// Whether `cluster` (not the root) is a served logical cluster.
pub async fn exists(cp: &ControlPlane, cluster: &str) -> bool {
    let obj = cp.store.cache.get(
        "core.matryoshka.dev",
        "logicalclusters",
        apimachinery::cluster::ROOT,
        "",
        cluster,
    );
    obj.is_some_and(|o| {
        let v = o.value();
        apimachinery::meta::deletion_timestamp(&v).is_none()
            && v.pointer("/status/phase")
                .and_then(serde_json::Value::as_str)
                == Some("Ready")
    })
}

/// Whether `cluster` is a logical cluster on its way to being served: created (or being
/// restored) and not yet Ready, not being deleted. Its requests are answered 503 with a
/// Retry-After rather than 404, so a client that acts on its creation (a controller writing
/// the cluster's first Node, say) retries instead of concluding it is gone.
pub fn pending(cp: &ControlPlane, cluster: &str) -> bool {
    cluster != apimachinery::cluster::ROOT
        && cp
            .store
            .cache
            .get(
                crate::tenancy::GROUP,
                crate::tenancy::PLURAL,
                apimachinery::cluster::ROOT,
                "",
                cluster,
            )
            .is_some_and(|o| {
                let v = o.value();
                meta::deletion_timestamp(&v).is_none()
                    && v.pointer("/status/phase").and_then(Value::as_str) != Some("Ready")
            })
}

/// Whether the control plane's loops may write into `cluster`: the root cluster, or a
/// logical cluster that exists and is not being deleted (provisioning or Ready). A loop woken
/// by the deletion of a cluster's keys must not write them again.
pub fn live(cp: &ControlPlane, cluster: &str) -> bool {
    cluster == apimachinery::cluster::ROOT
        || cp
            .store
            .cache
            .get(
                crate::tenancy::GROUP,
                crate::tenancy::PLURAL,
                apimachinery::cluster::ROOT,
                "",
                cluster,
            )
            .is_some_and(|o| meta::deletion_timestamp(&o.value()).is_none())
}

/// The logical clusters served now (Ready, not being deleted).
pub fn served(cp: &ControlPlane) -> Vec<String> {
    let filter = Filter {
        cluster: Some(apimachinery::cluster::ROOT.to_string()),
        ..Filter::default()
    };
    cp.store
        .cache
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
