//! Which logical clusters exist. The root cluster always does; others are LogicalCluster
//! objects in the root cluster.

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
