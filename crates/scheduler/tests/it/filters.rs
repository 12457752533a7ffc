//! Filters end to end: resources, node selectors and affinity, taints, unschedulable nodes,
//! host ports — and upstream's messages for pods that fit nowhere.

use serde_json::json;

use crate::common::Harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_fill_nodes_by_requests_and_insufficient_cpu_is_counted_across_three_nodes() {
    let h = Harness::start(&[]).await;
    for n in ["n1", "n2", "n3"] {
        h.node("root", n, "1", "4Gi", json!({})).await;
    }
    for i in 0..6 {
        h.pod("root", &format!("half-{i}"), "500m", json!({})).await;
    }
    let mut per_node = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..6 {
        *per_node
            .entry(h.bound("root", &format!("half-{i}")).await)
            .or_default() += 1;
    }
    assert_eq!(
        per_node.values().copied().collect::<Vec<_>>(),
        vec![2, 2, 2],
        "{per_node:?}"
    );
    h.pod("root", "one-more", "500m", json!({})).await;
    h.pod("root", "big", "2", json!({})).await;
    let msg = h.unschedulable("root", "big").await;
    assert_eq!(
        msg,
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: \
         3 No preemption victims found for incoming pod."
    );
    assert_eq!(
        h.unschedulable("root", "one-more").await,
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: \
         3 No preemption victims found for incoming pod."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_selectors_and_required_affinity_pick_the_matching_node() {
    let h = Harness::start(&[]).await;
    h.node(
        "root",
        "a",
        "4",
        "8Gi",
        json!({"metadata": {"labels": {"zone": "a", "disk": "ssd"}}}),
    )
    .await;
    h.node(
        "root",
        "b",
        "4",
        "8Gi",
        json!({"metadata": {"labels": {"zone": "b", "cores": "16"}}}),
    )
    .await;
    h.pod(
        "root",
        "selector",
        "100m",
        json!({"spec": {"nodeSelector": {"disk": "ssd"}}}),
    )
    .await;
    h.pod(
        "root",
        "affinity",
        "100m",
        json!({"spec": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]}]}}}}}),
    )
    .await;
    h.pod(
        "root",
        "by-name",
        "100m",
        json!({"spec": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}]}}}}}),
    )
    .await;
    h.pod(
        "root",
        "nowhere",
        "100m",
        json!({"spec": {"nodeSelector": {"zone": "c"}}}),
    )
    .await;
    assert_eq!(h.bound("root", "selector").await, "a");
    assert_eq!(h.bound("root", "affinity").await, "b");
    assert_eq!(h.bound("root", "by-name").await, "a");
    assert_eq!(
        h.unschedulable("root", "nowhere").await,
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. \
         preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taints_keep_pods_away_unless_tolerated() {
    let h = Harness::start(&[]).await;
    h.node(
        "root",
        "gpu",
        "4",
        "8Gi",
        json!({
            "metadata": {"labels": {"pool": "gpu"}},
            "spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}
        }),
    )
    .await;
    h.node("root", "plain", "4", "8Gi", json!({})).await;
    for i in 0..3 {
        h.pod("root", &format!("plain-{i}"), "100m", json!({}))
            .await;
    }
    h.pod("root", "tolerating", "100m", json!({"spec": {"nodeSelector": {"pool": "gpu"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]}}))
        .await;
    h.pod(
        "root",
        "intolerant",
        "100m",
        json!({"spec": {"nodeSelector": {"pool": "gpu"}}}),
    )
    .await;
    for i in 0..3 {
        assert_eq!(h.bound("root", &format!("plain-{i}")).await, "plain");
    }
    assert_eq!(h.bound("root", "tolerating").await, "gpu");
    assert_eq!(
        h.unschedulable("root", "intolerant").await,
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, \
         1 node(s) had untolerated taint {dedicated: gpu}. preemption: 0/2 nodes are available: \
         2 Preemption is not helpful for scheduling."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unschedulable_nodes_take_only_pods_tolerating_it() {
    let h = Harness::start(&[]).await;
    h.node(
        "root",
        "cordoned",
        "4",
        "8Gi",
        json!({"spec": {"unschedulable": true}}),
    )
    .await;
    h.pod("root", "plain", "100m", json!({})).await;
    h.pod("root", "tolerant", "100m", json!({"spec": {"tolerations": [
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]}}))
        .await;
    assert_eq!(h.bound("root", "tolerant").await, "cordoned");
    assert_eq!(
        h.unschedulable("root", "plain").await,
        "0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 nodes are \
         available: 1 Preemption is not helpful for scheduling."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_host_port_rejects_the_node() {
    let h = Harness::start(&[]).await;
    h.node("root", "only", "4", "8Gi", json!({})).await;
    let ports = json!({"spec": {"containers": [{"name": "c", "image": "nginx",
        "ports": [{"containerPort": 80, "hostPort": 8080}]}]}});
    h.pod("root", "first", "100m", ports.clone()).await;
    assert_eq!(h.bound("root", "first").await, "only");
    h.pod("root", "second", "100m", ports).await;
    assert_eq!(
        h.unschedulable("root", "second").await,
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. \
         preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
}
