//! ResourceQuota and LimitRange against a real in-process API server: the controller counts
//! usage into the quota's status, admission refuses over-quota creates with upstream's
//! messages, concurrent creates never exceed a quota, deletions give usage back, and
//! LimitRanges default and bound containers.

mod common;

use std::time::Duration;

use common::{Harness, wait_for};
use k8s_openapi::api::core::v1::{ConfigMap, LimitRange, Pod, ResourceQuota};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

const CLUSTER: &str = "tenant-q";

async fn harness() -> Harness {
    harness_with(Duration::from_secs(2)).await
}

/// A harness whose quota controller recounts every `resync`.
async fn harness_with(resync: Duration) -> Harness {
    let mut options = controllers::Options::default().with_ca(common::CA_PEM);
    options.policy.quota_resync = resync;
    Harness::start_with(&[CLUSTER], options).await
}

fn obj<K: serde::de::DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("a valid object")
}

fn pod(name: &str, resources: Value) -> Pod {
    obj(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx", "resources": resources}]},
    }))
}

/// Creates a quota and waits until the controller has counted every resource it limits.
async fn quota(h: &Harness, ns: &str, name: &str, hard: Value) -> Api<ResourceQuota> {
    let api: Api<ResourceQuota> = h.api(CLUSTER, ns);
    let n = hard.as_object().map_or(0, |m| m.len());
    api.create(
        &PostParams::default(),
        &obj(json!({"metadata": {"name": name}, "spec": {"hard": hard}})),
    )
    .await
    .expect("create the quota");
    wait_for(&api, name, "the quota's first status", |q| {
        q.and_then(|q| q.status.as_ref())
            .and_then(|s| s.used.as_ref())
            .is_some_and(|u| u.len() == n)
    })
    .await;
    api
}

fn used(q: Option<&ResourceQuota>, name: &str) -> Option<String> {
    Some(q?.status.as_ref()?.used.as_ref()?.get(name)?.0.clone())
}

fn refusal(r: kube::Result<impl std::fmt::Debug>) -> (u16, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_quota_and_unspecified_resources_are_refused_with_upstream_messages() {
    let h = harness().await;
    quota(
        &h,
        "default",
        "q",
        json!({"requests.cpu": "1", "limits.cpu": "2", "pods": "5"}),
    )
    .await;
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let (code, msg) = refusal(
        pods.create(
            &PostParams::default(),
            &pod(
                "p",
                json!({"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}),
            ),
        )
        .await,
    );
    assert_eq!(code, 403);
    assert_eq!(
        msg,
        "pods \"p\" is forbidden: exceeded quota: q, requested: requests.cpu=2, used: requests.cpu=0, limited: requests.cpu=1"
    );
    let (code, msg) = refusal(
        pods.create(&PostParams::default(), &pod("p", json!({})))
            .await,
    );
    assert_eq!(code, 403);
    assert_eq!(
        msg,
        "pods \"p\" is forbidden: failed quota: q: must specify limits.cpu for: c; requests.cpu for: c"
    );
    pods.create(
        &PostParams::default(),
        &pod(
            "p",
            json!({"requests": {"cpu": "600m"}, "limits": {"cpu": "1"}}),
        ),
    )
    .await
    .expect("a pod within quota is admitted");
    let api: Api<ResourceQuota> = h.api(CLUSTER, "default");
    let q = api.get("q").await.unwrap();
    assert_eq!(used(Some(&q), "requests.cpu").as_deref(), Some("600m"));
    assert_eq!(used(Some(&q), "pods").as_deref(), Some("1"));
    let (_, msg) = refusal(
        pods.create(
            &PostParams::default(),
            &pod(
                "p2",
                json!({"requests": {"cpu": "500m"}, "limits": {"cpu": "500m"}}),
            ),
        )
        .await,
    );
    assert_eq!(
        msg,
        "pods \"p2\" is forbidden: exceeded quota: q, requested: requests.cpu=500m, used: requests.cpu=600m, limited: requests.cpu=1"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_never_exceed_an_object_count_quota() {
    // No periodic recount during the burst: only admission's charges move the usage.
    let h = harness_with(Duration::from_secs(3600)).await;
    let api = quota(&h, "default", "cm", json!({"count/configmaps": "4"})).await;
    // The namespace already holds kube-root-ca.crt.
    let before: usize = used(Some(&api.get("cm").await.unwrap()), "count/configmaps")
        .and_then(|u| u.parse().ok())
        .unwrap();
    let cms: Api<ConfigMap> = h.api(CLUSTER, "default");
    let creates = (0..12).map(|i| {
        let cms = cms.clone();
        async move {
            cms.create(
                &PostParams::default(),
                &obj(json!({"metadata": {"name": format!("cm-{i}")}})),
            )
            .await
        }
    });
    let results = futures::future::join_all(creates).await;
    let admitted = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(admitted, 4 - before, "{results:?}");
    for r in results.into_iter().filter(|r| r.is_err()) {
        let (code, msg) = refusal(r);
        assert_eq!(code, 403);
        assert!(msg.contains("exceeded quota: cm, requested: count/configmaps=1, used: count/configmaps=4, limited: count/configmaps=4"), "{msg}");
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_pod_gives_its_usage_back() {
    let h = harness().await;
    let api = quota(
        &h,
        "default",
        "q",
        json!({"pods": "1", "requests.memory": "1Gi"}),
    )
    .await;
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let small = json!({"requests": {"memory": "512Mi"}});
    pods.create(&PostParams::default(), &pod("a", small.clone()))
        .await
        .expect("first pod");
    let (_, msg) = refusal(
        pods.create(&PostParams::default(), &pod("b", small.clone()))
            .await,
    );
    assert!(
        msg.starts_with("pods \"b\" is forbidden: exceeded quota: q, requested: pods=1,"),
        "{msg}"
    );
    pods.delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for(&api, "q", "the usage to be given back", |q| {
        used(q, "pods").as_deref() == Some("0")
    })
    .await;
    // Admission reads the quota from the server's cache, which may trail the watch event just
    // seen by a moment: the create is admitted once the cache has the freed usage.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let b = pod("b", small);
    loop {
        match pods.create(&PostParams::default(), &b).await {
            Ok(_) => break,
            Err(e) if tokio::time::Instant::now() < deadline => {
                assert!(e.to_string().contains("exceeded quota"), "{e}");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Err(e) => panic!("room again: {e}"),
        }
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_ranges_default_and_bound_containers() {
    let h = harness().await;
    let ranges: Api<LimitRange> = h.api(CLUSTER, "default");
    ranges
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "lr"}, "spec": {"limits": [
                {"type": "Container", "max": {"cpu": "1"}, "defaultRequest": {"cpu": "100m"}, "default": {"cpu": "500m"}},
                {"type": "PersistentVolumeClaim", "max": {"storage": "1Gi"}},
            ]}})),
        )
        .await
        .expect("create the LimitRange");
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let (code, msg) = refusal(
        pods.create(
            &PostParams::default(),
            &pod("p", json!({"limits": {"cpu": "2"}})),
        )
        .await,
    );
    assert_eq!(code, 403);
    assert_eq!(
        msg,
        "pods \"p\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"
    );
    let created = pods
        .create(&PostParams::default(), &pod("p", json!({})))
        .await
        .expect("defaulted pod");
    let r = created.spec.unwrap().containers[0]
        .resources
        .clone()
        .unwrap();
    assert_eq!(r.requests.unwrap()["cpu"].0, "100m");
    assert_eq!(r.limits.unwrap()["cpu"].0, "500m");
    assert_eq!(
        created.metadata.annotations.unwrap()["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu request for container c; cpu limit for container c"
    );
    let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> = h.api(CLUSTER, "default");
    let (code, msg) = refusal(
        claims
            .create(
                &PostParams::default(),
                &obj(json!({"metadata": {"name": "big"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}})),
            )
            .await,
    );
    assert_eq!(code, 403);
    assert_eq!(
        msg,
        "persistentvolumeclaims \"big\" is forbidden: maximum storage usage per PersistentVolumeClaim is 1Gi, but request is 2Gi"
    );
    h.stop().await;
}
