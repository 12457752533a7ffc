//! Regression tests for the two API server bugs found while building the controllers:
//! - merge patches without a resourceVersion answered 409 under concurrent writes instead of
//!   being retried (`controlplane::patching::apply` kept the read resourceVersion as a
//!   precondition);
//! - metadata-only cross-cluster watch events lacked the `matryoshka.dev/cluster` annotation
//!   (`apiserver::handlers::read::watch`).

mod common;

use common::{PATIENCE, add_cluster, server};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use runtime::client::ClusterClients;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_merge_patches_without_a_resource_version_all_succeed() {
    let (server, _dir) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(
        ClusterClients::in_memory(apiserver::local::LocalService::system(server))
            .cluster("root")
            .unwrap(),
        "default",
    );
    let cm = serde_json::from_value(json!({"metadata": {"name": "shared"}})).unwrap();
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    let patches = (0..20).map(|i| {
        let api = api.clone();
        async move {
            api.patch(
                "shared",
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {format!("k{i}"): "v"}})),
            )
            .await
        }
    });
    for r in futures::future::join_all(patches).await {
        r.expect("a patch without a resourceVersion is retried, not refused");
    }
    assert_eq!(api.get("shared").await.unwrap().data.unwrap().len(), 20);
    // A resourceVersion the patch sets is still a precondition.
    let stale =
        json!({"metadata": {"resourceVersion": created.resource_version()}, "data": {"x": "y"}});
    let err = api
        .patch("shared", &PatchParams::default(), &Patch::Merge(stale))
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 409));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_cluster_metadata_watches_name_each_objects_cluster() {
    let (server, _dir) = server().await;
    add_cluster(&server, "tenant-m").await;
    let clients = ClusterClients::in_memory(apiserver::local::LocalService::system(server));
    let all: Api<PartialObjectMeta<ConfigMap>> = Api::all(clients.all_clusters().unwrap());
    let mut stream = watcher::watcher(all, watcher::Config::default()).boxed();
    // The initial list, then a new object.
    loop {
        if let watcher::Event::InitDone = stream.next().await.unwrap().unwrap() {
            break;
        }
    }
    let api: Api<ConfigMap> = Api::namespaced(clients.cluster("tenant-m").unwrap(), "default");
    let cm = serde_json::from_value(json!({"metadata": {"name": "fresh"}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    let ev = tokio::time::timeout(PATIENCE, async {
        loop {
            if let watcher::Event::Apply(m) = stream.next().await.unwrap().unwrap()
                && m.name_any() == "fresh"
            {
                return m;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(
        ev.annotations()
            .get("matryoshka.dev/cluster")
            .map(String::as_str),
        Some("tenant-m")
    );
}
