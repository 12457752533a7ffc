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
