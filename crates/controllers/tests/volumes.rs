//! PersistentVolumeClaim binding against a real in-process API server: static binding to the
//! smallest matching volume, the default `local` class provisioning once a pod using the
//! claim is placed (WaitForFirstConsumer), Immediate provisioning, and reclaiming.

mod common;

use common::{Harness, wait_for};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

const CLUSTER: &str = "tenant-v";

fn obj<K: serde::de::DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("a valid object")
}

fn phase_of_claim(c: Option<&PersistentVolumeClaim>) -> Option<String> {
    c?.status.as_ref()?.phase.clone()
}

fn phase_of_volume(v: Option<&PersistentVolume>) -> Option<String> {
    v?.status.as_ref()?.phase.clone()
}

fn volume(name: &str, size: &str, labels: Value) -> PersistentVolume {
    obj(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": "manual", "hostPath": {"path": format!("/data/{name}")}},
    }))
}

fn claim(name: &str, size: &str, extra: Value) -> PersistentVolumeClaim {
    let mut spec =
        json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    obj(json!({"metadata": {"name": name}, "spec": spec}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_binds_the_smallest_matching_volume_and_releases_it() {
    let h = Harness::start(&[CLUSTER]).await;
    let volumes: Api<PersistentVolume> = Api::all(h.client(CLUSTER));
    for v in [
        volume("small", "1Gi", json!({"tier": "gold"})),
        volume("big", "10Gi", json!({"tier": "gold"})),
        volume("mid", "5Gi", json!({"tier": "gold"})),
        volume("mid-silver", "3Gi", json!({"tier": "silver"})),
    ] {
        volumes
            .create(&PostParams::default(), &v)
            .await
            .expect("volume");
    }
    let claims: Api<PersistentVolumeClaim> = h.api(CLUSTER, "default");
    claims
        .create(
            &PostParams::default(),
            &claim("data", "2Gi", json!({"storageClassName": "manual", "selector": {"matchLabels": {"tier": "gold"}}})),
        )
        .await
        .expect("claim");
    let c = wait_for(&claims, "data", "the claim to bind", |c| {
        phase_of_claim(c).as_deref() == Some("Bound")
    })
    .await
    .unwrap();
    assert_eq!(c.spec.unwrap().volume_name.as_deref(), Some("mid"));
    assert_eq!(c.status.unwrap().capacity.unwrap()["storage"].0, "5Gi");
    let v = wait_for(&volumes, "mid", "the volume to bind", |v| {
        phase_of_volume(v).as_deref() == Some("Bound")
    })
    .await
    .unwrap();
    assert_eq!(
        v.spec.unwrap().claim_ref.unwrap().name.as_deref(),
        Some("data")
    );
    wait_for(&volumes, "small", "a free volume to be Available", |v| {
        phase_of_volume(v).as_deref() == Some("Available")
    })
    .await;

    claims
        .delete("data", &DeleteParams::default())
        .await
        .expect("delete the claim");
    wait_for(&volumes, "mid", "the retained volume to be Released", |v| {
        phase_of_volume(v).as_deref() == Some("Released")
    })
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_class_provisions_when_a_pod_using_the_claim_is_placed() {
    let h = Harness::start(&[CLUSTER]).await;
    let classes: Api<StorageClass> = Api::all(h.client(CLUSTER));
    let local = classes
        .get("local")
        .await
        .expect("the seeded default class");
    assert_eq!(local.provisioner, "matryoshka.dev/local");
    assert_eq!(
        local.volume_binding_mode.as_deref(),
        Some("WaitForFirstConsumer")
    );
    let claims: Api<PersistentVolumeClaim> = h.api(CLUSTER, "default");
    let c = claims
        .create(&PostParams::default(), &claim("cache", "1Gi", json!({})))
        .await
        .expect("claim");
    assert_eq!(
        c.spec.as_ref().unwrap().storage_class_name.as_deref(),
        Some("local")
    );
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    pods.create(
        &PostParams::default(),
        &obj(json!({"metadata": {"name": "user"}, "spec": {
            "nodeName": "node-a",
            "containers": [{"name": "c", "image": "nginx"}],
            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "cache"}}],
        }})),
    )
    .await
    .expect("pod");
    let bound = wait_for(
        &claims,
        "cache",
        "the claim to be provisioned and bound",
        |c| phase_of_claim(c).as_deref() == Some("Bound"),
    )
    .await
    .unwrap();
    let pv_name = bound.spec.unwrap().volume_name.unwrap();
    assert_eq!(pv_name, format!("pvc-{}", c.metadata.uid.unwrap()));
    let volumes: Api<PersistentVolume> = Api::all(h.client(CLUSTER));
    let pv = volumes.get(&pv_name).await.expect("the provisioned volume");
    let affinity =
        serde_json::to_value(pv.spec.as_ref().unwrap().node_affinity.as_ref().unwrap()).unwrap();
    assert_eq!(
        affinity.pointer("/required/nodeSelectorTerms/0/matchExpressions/0/values/0"),
        Some(&json!("node-a"))
    );

    pods.delete("user", &DeleteParams::default().grace_period(0))
        .await
        .expect("delete the pod");
    claims
        .delete("cache", &DeleteParams::default())
        .await
        .expect("delete the claim");
    wait_for(&volumes, &pv_name, "the Delete-policy volume to go", |v| {
        v.is_none()
    })
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_immediate_class_provisions_at_once() {
    let h = Harness::start(&[CLUSTER]).await;
    let classes: Api<StorageClass> = Api::all(h.client(CLUSTER));
    classes
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "fast"}, "provisioner": "matryoshka.dev/local", "volumeBindingMode": "Immediate"})),
        )
        .await
        .expect("class");
    let claims: Api<PersistentVolumeClaim> = h.api(CLUSTER, "default");
    claims
        .create(
            &PostParams::default(),
            &claim("now", "2Gi", json!({"storageClassName": "fast"})),
        )
        .await
        .expect("claim");
    wait_for(&claims, "now", "the claim to bind", |c| {
        phase_of_claim(c).as_deref() == Some("Bound")
    })
    .await;
    h.stop().await;
}
