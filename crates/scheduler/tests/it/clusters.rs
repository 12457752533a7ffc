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

/// Labels the root's LogicalCluster `name` as placed by its host (a shared tenant cluster).
async fn host_placed(h: &Harness, name: &str) {
    let api: Api<kube::core::DynamicObject> =
        Api::all_with(h.client("root"), &scheduler::scheduler::logical_clusters());
    let patch = json!({"metadata": {"labels": {
        apimachinery::cluster::PLACEMENT_LABEL: apimachinery::cluster::PLACEMENT_HOST}}});
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .expect("labelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_of_a_cluster_placed_by_its_host_are_never_bound_here() {
    let h = Harness::start(&["a", "b", "c"]).await;
    h.node("a", "worker", "8", "16Gi", json!({})).await;
    h.node("b", "worker", "8", "16Gi", json!({})).await;
    // c's pod waits for a node, queued as unschedulable; then c becomes host-placed.
    h.pod("c", "c-0", "100m", json!({})).await;
    h.unschedulable("c", "c-0").await;
    host_placed(&h, "b").await;
    host_placed(&h, "c").await;
    // A pod of a (scheduled here) after each step shows the scheduler has moved past it.
    h.pod("a", "a-0", "100m", json!({})).await;
    assert_eq!(h.bound("a", "a-0").await, "worker");
    h.pod("b", "b-0", "100m", json!({})).await;
    // A node for c (not waited for: the scheduler keeps no node of a host-placed cluster).
    let nodes: Api<Node> = Api::all(h.client("c"));
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "worker"}})).unwrap();
    nodes
        .create(&kube::api::PostParams::default(), &node)
        .await
        .expect("node");
    let status = json!({"status": {
        "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}]}});
    nodes
        .patch_status(
            "worker",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&status),
        )
        .await
        .expect("node status");
    h.pod("a", "a-1", "100m", json!({})).await;
    assert_eq!(h.bound("a", "a-1").await, "worker");
    for (cluster, pod) in [("b", "b-0"), ("c", "c-0")] {
        let p = h.pods(cluster).get(pod).await.expect("pod");
        assert_eq!(
            p.spec.and_then(|s| s.node_name),
            None,
            "{cluster}/{pod} is its host's to place"
        );
    }
    let s = h.scheduler.as_ref().expect("scheduler");
    assert!(!s.knows_node("c", "worker"), "nothing of c is kept");
    let b0 = h.pods("b").get("b-0").await.expect("pod");
    assert!(
        b0.status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .is_empty(),
        "no PodScheduled condition of ours"
    );
}
