//! DaemonSets against a real in-process API server, with Node objects created directly and no
//! scheduler or kubelet (a stand-in marks pods ready). One pod per eligible node pinned by
//! node affinity with the default tolerations; node selectors and taints; nodes added and
//! relabelled; a rolling update within maxUnavailable and one with maxSurge; and the status
//! `kubectl rollout status ds` reads.

mod common;

use common::{Harness, kubelet, kubelet_for, wait_for, wait_list};
use controllers::daemonset::placement::target_node;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const CLUSTER: &str = "tenant-a";

fn daemonset(name: &str, extra_spec: Value, pod_extra: Value) -> DaemonSet {
    let mut pod = json!({"containers": [{"name": "c", "image": "agent:1"}]});
    for (k, v) in pod_extra.as_object().unwrap() {
        pod[k] = v.clone();
    }
    let mut spec = json!({
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
    });
    for (k, v) in extra_spec.as_object().unwrap() {
        spec[k] = v.clone();
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

async fn add_node(api: &Api<Node>, name: &str, labels: Value, taints: Value) {
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints},
    }))
    .unwrap();
    api.create(&PostParams::default(), &node).await.unwrap();
}

fn live(pods: &[Pod]) -> Vec<&Pod> {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

fn nodes_of(pods: &[Pod]) -> Vec<String> {
    let mut n: Vec<String> = live(pods).iter().filter_map(|p| target_node(p)).collect();
    n.sort();
    n
}

/// What `kubectl rollout status ds/<name>` waits for.
fn rolled_out(d: Option<&DaemonSet>) -> bool {
    let Some(d) = d else { return false };
    let Some(s) = &d.status else { return false };
    s.observed_generation >= d.metadata.generation
        && s.updated_number_scheduled.unwrap_or(0) >= s.desired_number_scheduled
        && s.number_available.unwrap_or(0) >= s.desired_number_scheduled
}

#[tokio::test]
async fn one_pod_runs_on_each_eligible_node_pinned_by_affinity() {
    let h = Harness::start(&[CLUSTER]).await;
    let nodes: Api<Node> = Api::all(h.client(CLUSTER));
    let sets: Api<DaemonSet> = h.api(CLUSTER, "default");
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let k = kubelet(pods.clone());
    add_node(&nodes, "a", json!({"role": "worker"}), json!([])).await;
    add_node(
        &nodes,
        "b",
        json!({"role": "worker"}),
        json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]),
    )
    .await;
    add_node(&nodes, "c", json!({"role": "control"}), json!([])).await;
    add_node(
        &nodes,
        "d",
        json!({"role": "worker"}),
        json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
    )
    .await;
    let ds = daemonset(
        "agent",
        json!({}),
        json!({"nodeSelector": {"role": "worker"}}),
    );
    sets.create(&PostParams::default(), &ds).await.unwrap();
    // b is tainted, c not selected, d cordoned (tolerated by default).
    let listed = wait_list(&pods, "pods on a and d", |ps| nodes_of(ps) == ["a", "d"]).await;
    let p = &listed[0];
    let tolerations = p.spec.as_ref().unwrap().tolerations.clone().unwrap();
    assert!(
        tolerations
            .iter()
            .any(|t| t.key.as_deref() == Some("node.kubernetes.io/not-ready")
                && t.effect.as_deref() == Some("NoExecute"))
    );
    assert!(p.labels().contains_key("controller-revision-hash"));
    assert_eq!(
        p.labels()
            .get("pod-template-generation")
            .map(String::as_str),
        Some("1")
    );
    assert!(p.name_any().starts_with("agent-"));
    let done = wait_for(&sets, "agent", "the set rolled out", |d| {
        rolled_out(d) && d.unwrap().status.as_ref().unwrap().desired_number_scheduled == 2
    })
    .await
    .unwrap();
    let s = done.status.unwrap();
    assert_eq!(
        (
            s.current_number_scheduled,
            s.number_ready,
            s.number_misscheduled
        ),
        (2, 2, 0)
    );

    // A new worker gets a pod; a worker relabelled away loses its pod.
    add_node(&nodes, "e", json!({"role": "worker"}), json!([])).await;
    wait_list(&pods, "a pod on e", |ps| nodes_of(ps) == ["a", "d", "e"]).await;
    nodes
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {"role": "control"}}})),
        )
        .await
        .unwrap();
    wait_list(&pods, "the pod on a removed", |ps| {
        nodes_of(ps) == ["d", "e"]
    })
    .await;
    k.abort();
    h.stop().await;
}

#[tokio::test]
async fn a_rolling_update_replaces_every_pod_within_max_unavailable() {
    let h = Harness::start(&[CLUSTER]).await;
    let nodes: Api<Node> = Api::all(h.client(CLUSTER));
    let sets: Api<DaemonSet> = h.api(CLUSTER, "default");
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let k = kubelet(pods.clone());
    for n in ["n1", "n2", "n3"] {
        add_node(&nodes, n, json!({}), json!([])).await;
    }
    sets.create(
        &PostParams::default(),
        &daemonset("log", json!({}), json!({})),
    )
    .await
    .unwrap();
    let first = wait_for(&sets, "log", "the set rolled out", |d| {
        rolled_out(d) && d.unwrap().status.as_ref().unwrap().number_available == Some(3)
    })
    .await
    .unwrap();
    assert_eq!(first.status.unwrap().updated_number_scheduled, Some(3));
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "agent:2"}]}}}});
    sets.patch("log", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    let done = wait_for(&sets, "log", "the update rolled out", |d| {
        rolled_out(d)
            && d.unwrap().metadata.generation == Some(2)
            && d.unwrap().status.as_ref().unwrap().number_available == Some(3)
    })
    .await
    .unwrap();
    assert_eq!(done.status.unwrap().updated_number_scheduled, Some(3));
    let listed = pods.list(&Default::default()).await.unwrap().items;
    let live = live(&listed);
    assert_eq!(live.len(), 3);
    assert!(
        live.iter()
            .all(|p| p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some("agent:2"))
    );
    assert!(
        live.iter()
            .all(|p| p.labels()["pod-template-generation"] == "2")
    );
    k.abort();
    h.stop().await;
}

#[tokio::test]
async fn a_surge_update_starts_the_new_pod_before_removing_the_old_one() {
    let h = Harness::start(&[CLUSTER]).await;
    let nodes: Api<Node> = Api::all(h.client(CLUSTER));
    let sets: Api<DaemonSet> = h.api(CLUSTER, "default");
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    // The new version's pod does not start until the test has seen it beside the old one
    // (a kubelet that starts it at once can finish the surge before a watch begins).
    let new_image = |p: &Pod| {
        p.spec.as_ref().is_some_and(|s| {
            s.containers
                .iter()
                .any(|c| c.image.as_deref() == Some("agent:2"))
        })
    };
    let first = kubelet_for(pods.clone(), move |p| !new_image(p));
    add_node(&nodes, "only", json!({}), json!([])).await;
    let strategy = json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}});
    sets.create(
        &PostParams::default(),
        &daemonset("surge", strategy, json!({})),
    )
    .await
    .unwrap();
    wait_for(&sets, "surge", "the set rolled out", |d| {
        rolled_out(d) && d.unwrap().status.as_ref().unwrap().number_available == Some(1)
    })
    .await;
    let old = live(&pods.list(&Default::default()).await.unwrap().items)[0].clone();
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "agent:2"}]}}}});
    sets.patch("surge", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    // Both are on the node at once: the old one stays while the new one is not available.
    wait_list(&pods, "old and new side by side", |ps| live(ps).len() == 2).await;
    first.abort();
    let k = kubelet(pods.clone());
    wait_list(&pods, "only the new pod left", |ps| {
        let l = live(ps);
        l.len() == 1 && l[0].uid() != old.uid()
    })
    .await;
    wait_for(&sets, "surge", "the update rolled out", |d| {
        rolled_out(d) && d.unwrap().metadata.generation == Some(2)
    })
    .await;
    k.abort();
    h.stop().await;
}
