//! One object nobody can decode stops nothing. Regression: a Deployment stored with
//! `"replicas": "str"` made the shared Deployment informer fail its initial list for every
//! cluster after a restart — no Deployment anywhere got a ReplicaSet, no new namespace got
//! `kube-root-ca.crt` — until the tenant deleted it. Here the malformed object is written
//! straight into storage (no API request could store it) before the controllers start, as
//! after a restart.

mod common;

use std::sync::Arc;

use common::{CA_PEM, Harness, add_cluster, wait_for, wait_list};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace};
use kube::api::{Api, PostParams};
use serde_json::json;

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"replicas": 1,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_stored_object_is_skipped_and_every_cluster_keeps_working() {
    let (server, dir) = common::server().await;
    add_cluster(&server, "broken").await;
    add_cluster(&server, "fine").await;
    let bad = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "bad", "namespace": "default", "uid": "0d1d-bad",
            "creationTimestamp": "2026-12-04T00:00:00Z"},
        "spec": {"replicas": "str", "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let key = registry::key::object("broken", "apps", "deployments", "default", "bad");
    server
        .store()
        .shared()
        .storage
        .create(key.as_bytes(), serde_json::to_vec(&bad).unwrap().into())
        .await
        .expect("stored directly");
    let before = runtime::lenient::undecodable_objects();
    let h = Harness::run_on(
        Arc::clone(&server),
        dir,
        controllers::Options::default().with_ca(CA_PEM),
        runtime::client::DEFAULT_CLIENT_CACHE,
    );
    for cluster in ["fine", "broken"] {
        let deployments: Api<Deployment> = h.api(cluster, "default");
        deployments
            .create(&PostParams::default(), &deployment("web"))
            .await
            .unwrap();
        let sets: Api<ReplicaSet> = h.api(cluster, "default");
        wait_list(&sets, "a ReplicaSet for web", |s| !s.is_empty()).await;
        let ns: Api<Namespace> = Api::all(h.client(cluster));
        ns.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
        )
        .await
        .unwrap();
        let cms: Api<ConfigMap> = h.api(cluster, "team");
        wait_for(&cms, "kube-root-ca.crt", "the root CA bundle", |c| {
            c.is_some()
        })
        .await;
    }
    assert!(runtime::lenient::undecodable_objects() > before);
    // The tenant is told, on the object.
    let events: Api<Event> = h.api("broken", "default");
    let seen = wait_list(&events, "an UndecodableObject event", |e| {
        e.iter()
            .any(|e| e.reason.as_deref() == Some("UndecodableObject"))
    })
    .await;
    let e = seen
        .iter()
        .find(|e| e.reason.as_deref() == Some("UndecodableObject"))
        .unwrap();
    assert_eq!(e.involved_object.name.as_deref(), Some("bad"));
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert!(
        e.message
            .as_deref()
            .unwrap_or_default()
            .contains("invalid type"),
        "{e:?}"
    );
    h.stop().await;
}
