//! PodDisruptionBudgets against a real in-process API server: the disruption controller's
//! status for numbers and percentages of a Deployment's scale, and the eviction subresource
//! honouring it (one eviction allowed, the next refused with 429 and cause DisruptionBudget).

mod common;

use common::{Harness, kubelet, mark_ready, wait_for};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, EvictParams, PostParams};
use serde_json::{Value, json};

const CLUSTER: &str = "tenant-d";

fn obj<K: serde::de::DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("a valid object")
}

fn status(p: Option<&PodDisruptionBudget>) -> Option<(i32, i32, i32, i32)> {
    let s = p?.status.as_ref()?;
    Some((
        s.current_healthy,
        s.desired_healthy,
        s.expected_pods,
        s.disruptions_allowed,
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evictions_take_disruptions_until_the_budget_is_spent() {
    let h = Harness::start(&[CLUSTER]).await;
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    for i in 0..3 {
        let p = pods
            .create(
                &PostParams::default(),
                &obj(json!({"metadata": {"name": format!("web-{i}"), "labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})),
            )
            .await
            .expect("pod");
        mark_ready(&pods, p).await.expect("ready");
    }
    let pdbs: Api<PodDisruptionBudget> = h.api(CLUSTER, "default");
    pdbs.create(
        &PostParams::default(),
        &obj(json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})),
    )
    .await
    .expect("pdb");
    let pdb = wait_for(&pdbs, "web", "one disruption allowed", |p| {
        status(p) == Some((3, 2, 3, 1))
    })
    .await
    .unwrap();
    let cond = &pdb.status.unwrap().conditions.unwrap()[0];
    assert_eq!(
        (
            cond.type_.as_str(),
            cond.status.as_str(),
            cond.reason.as_str()
        ),
        ("DisruptionAllowed", "True", "SufficientPods")
    );

    pods.evict("web-0", &EvictParams::default())
        .await
        .expect("the first eviction is allowed");
    wait_for(&pods, "web-0", "the evicted pod to go", |p| p.is_none()).await;
    match pods.evict("web-1", &EvictParams::default()).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 429);
            assert_eq!(s.reason, "TooManyRequests");
            assert_eq!(
                s.message,
                "Cannot evict pod as it would violate the pod's disruption budget."
            );
        }
        other => panic!("expected 429, got {other:?}"),
    }
    pods.get("web-1").await.expect("the refused pod stays");
    wait_for(&pdbs, "web", "no disruption left", |p| {
        status(p) == Some((2, 2, 2, 0))
    })
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn percentages_are_taken_of_the_deployment_scale() {
    let h = Harness::start(&[CLUSTER]).await;
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let kl = kubelet(pods.clone());
    let deployments: Api<Deployment> = h.api(CLUSTER, "default");
    deployments
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "api"}, "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "api"}}, "template": {"metadata": {"labels": {"app": "api"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})),
        )
        .await
        .expect("deployment");
    let pdbs: Api<PodDisruptionBudget> = h.api(CLUSTER, "default");
    pdbs.create(
        &PostParams::default(),
        &obj(json!({"metadata": {"name": "api"}, "spec": {"maxUnavailable": "50%", "selector": {"matchLabels": {"app": "api"}}}})),
    )
    .await
    .expect("pdb");
    wait_for(&pdbs, "api", "half the scale may be disrupted", |p| {
        status(p) == Some((4, 2, 4, 2))
    })
    .await;
    kl.abort();
    h.stop().await;
}
