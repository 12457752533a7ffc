//! One scheduler instance, several logical clusters: each pod lands on a node of its own
//! cluster, and capacity is never shared across clusters (even between nodes of the same
//! name).

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use serde_json::json;

use crate::common::Harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_logical_clusters_are_scheduled_by_one_instance_without_crossing() {
    let h = Harness::start(&["a", "b"]).await;
    // The same node name in both clusters, small in a and big in b; b also has its own node.
    h.node("a", "worker", "1", "4Gi", json!({})).await;
    h.node("b", "worker", "8", "16Gi", json!({})).await;
    h.node("b", "b-only", "8", "16Gi", json!({})).await;
    for i in 0..4 {
        h.pod("b", &format!("b-{i}"), "600m", json!({})).await;
    }
    h.pod("a", "a-0", "600m", json!({})).await;
    h.pod("a", "a-1", "600m", json!({})).await;
    assert_eq!(h.bound("a", "a-0").await, "worker");
    assert_eq!(
        h.unschedulable("a", "a-1").await,
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: \
         1 No preemption victims found for incoming pod.",
        "cluster b's capacity must not leak into cluster a"
    );
    let b_nodes: Vec<String> = Api::<Node>::all(h.client("b"))
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    for i in 0..4 {
        let node = h.bound("b", &format!("b-{i}")).await;
        assert!(b_nodes.contains(&node));
    }
    // Nothing was scheduled in the root cluster, which has no nodes.
    assert!(
        h.pods("root")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // An event in cluster b (a node added) does not touch cluster a's waiting pod.
    h.node("b", "b-more", "8", "16Gi", json!({})).await;
    h.node("a", "a-more", "2", "4Gi", json!({})).await;
    assert_eq!(h.bound("a", "a-1").await, "a-more");
}
