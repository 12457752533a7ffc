//! The node lifecycle controller against a real in-process API server: a node whose Lease
//! stops being renewed becomes Unknown and tainted unreachable, pods leave it as their
//! tolerations run out, the taints go when it recovers, and a deleted node's pods are
//! deleted.

mod common;

use std::time::Duration;

use common::{Harness, wait_for};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

const CLUSTER: &str = "tenant-n";

fn obj<K: serde::de::DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("a valid object")
}

async fn harness() -> Harness {
    let mut options = controllers::Options::default().with_ca(common::CA_PEM);
    options.policy.node_grace = Duration::from_secs(2);
    Harness::start_with(&[CLUSTER], options).await
}

/// Registers a Ready node with a fresh Lease, as a kubelet does.
async fn register(h: &Harness, name: &str) -> (Api<Node>, Api<Lease>) {
    let nodes: Api<Node> = Api::all(h.client(CLUSTER));
    let node = nodes
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": name}})),
        )
        .await
        .expect("create the node");
    heartbeat(&nodes, node).await;
    let leases: Api<Lease> = h.api(CLUSTER, "kube-node-lease");
    leases
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": name}, "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": MicroTime(Timestamp::now())}})),
        )
        .await
        .expect("create the lease");
    (nodes, leases)
}

async fn heartbeat(nodes: &Api<Node>, mut node: Node) {
    let now = Timestamp::now().to_string();
    node.status = Some(obj(
        json!({"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status", "lastHeartbeatTime": now, "lastTransitionTime": now}]}),
    ));
    let name = node.metadata.name.clone().unwrap_or_default();
    nodes
        .replace_status(&name, &PostParams::default(), &node)
        .await
        .expect("post the node status");
}

fn bound_pod(name: &str, node: &str, tolerations: Value) -> Pod {
    obj(json!({
        "metadata": {"name": name},
        "spec": {"nodeName": node, "tolerations": tolerations, "containers": [{"name": "c", "image": "nginx"}]},
    }))
}

fn ready(n: &Node) -> Option<(String, String, String)> {
    let c = n
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    Some((
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

fn taints(n: &Node) -> Vec<(String, String)> {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .map(|t| (t.key.clone(), t.effect.clone()))
        .collect()
}

fn leaving(p: Option<&Pod>) -> bool {
    p.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_node_is_unknown_tainted_and_evicted_and_recovers() {
    let h = harness().await;
    let (nodes, leases) = register(&h, "n1").await;
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let quick = json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}]);
    pods.create(&PostParams::default(), &bound_pod("quick", "n1", quick))
        .await
        .expect("quick");
    let slow = pods
        .create(&PostParams::default(), &bound_pod("slow", "n1", json!([])))
        .await
        .expect("slow");
    // DefaultTolerationSeconds gave the pod 300 s on unreachable and not-ready nodes.
    let tols = slow.spec.unwrap().tolerations.unwrap_or_default();
    assert!(tols.iter().any(
        |t| t.key.as_deref() == Some("node.kubernetes.io/unreachable")
            && t.toleration_seconds == Some(300)
    ));

    let node = wait_for(
        &nodes,
        "n1",
        "the node to become Unknown and tainted",
        |n| n.is_some_and(|n| ready(n).is_some_and(|r| r.0 == "Unknown") && taints(n).len() == 2),
    )
    .await
    .unwrap();
    assert_eq!(
        ready(&node),
        Some((
            "Unknown".into(),
            "NodeStatusUnknown".into(),
            "Kubelet stopped posting node status.".into()
        ))
    );
    assert_eq!(
        taints(&node),
        vec![
            (
                "node.kubernetes.io/unreachable".to_string(),
                "NoSchedule".to_string()
            ),
            (
                "node.kubernetes.io/unreachable".to_string(),
                "NoExecute".to_string()
            ),
        ]
    );
    wait_for(&pods, "quick", "the intolerant pod to be evicted", leaving).await;
    let slow = pods.get("slow").await.expect("the tolerant pod stays");
    assert!(slow.metadata.deletion_timestamp.is_none());

    // The kubelet comes back: a renewed lease and a Ready status.
    let mut lease = leases.get("n1").await.unwrap();
    lease.spec.as_mut().unwrap().renew_time = Some(MicroTime(Timestamp::now()));
    leases
        .replace("n1", &PostParams::default(), &lease)
        .await
        .expect("renew");
    heartbeat(&nodes, nodes.get("n1").await.unwrap()).await;
    wait_for(&nodes, "n1", "the taints to go", |n| {
        n.is_some_and(|n| taints(n).is_empty())
    })
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pods_of_a_deleted_node_are_deleted() {
    let h = harness().await;
    let (nodes, _) = register(&h, "n2").await;
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    pods.create(
        &PostParams::default(),
        &bound_pod("orphan", "n2", json!([])),
    )
    .await
    .expect("pod");
    nodes
        .delete("n2", &DeleteParams::default())
        .await
        .expect("delete the node");
    wait_for(&pods, "orphan", "the orphaned pod to be deleted", |p| {
        p.is_none()
    })
    .await;
    h.stop().await;
}
