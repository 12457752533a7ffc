//! Graceful deletion of pods: a pod bound to a node waits for its kubelet; an unbound one goes
//! at once; grace 0 (the kubelet's own delete, or `--force`) removes it.

use std::sync::Arc;

use registry::cache::{CacheOptions, WatchCache};
use registry::catalog::Catalog;
use registry::store::{DeleteOptions, Deleted, Location, Store, WriteOptions};
use serde_json::json;

async fn store() -> (Store, Catalog, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(storage::embedded::EmbeddedStore::open(dir.path()).unwrap());
    let cache = WatchCache::start(storage.clone(), CacheOptions::default())
        .await
        .unwrap();
    (
        Store::new(storage, cache),
        Catalog::new(registry::builtins::resources()),
        dir,
    )
}

#[tokio::test]
async fn a_bound_pod_waits_for_its_kubelet_and_an_unbound_one_goes_at_once() {
    let (store, catalog, _dir) = store().await;
    let ns = catalog.builtin("", "namespaces").unwrap();
    let root = Location {
        cluster: "root",
        namespace: "",
        name: "",
    };
    store
        .create(
            &ns,
            &root,
            json!({"metadata": {"name": "default"}}),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    let pods = catalog.builtin("", "pods").unwrap();
    let loc = |name: &'static str| Location {
        cluster: "root",
        namespace: "default",
        name,
    };
    let pod = |name: &str, node: Option<&str>| {
        let mut p = json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x"}], "terminationGracePeriodSeconds": 45}});
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        p
    };
    store
        .create(
            &pods,
            &loc(""),
            pod("loose", None),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    store
        .create(
            &pods,
            &loc(""),
            pod("bound", Some("n1")),
            &WriteOptions::default(),
        )
        .await
        .unwrap();

    assert!(matches!(
        store
            .delete(&pods, &loc("loose"), &DeleteOptions::default())
            .await
            .unwrap(),
        Deleted::Gone(_)
    ));
    match store
        .delete(&pods, &loc("bound"), &DeleteOptions::default())
        .await
        .unwrap()
    {
        Deleted::Pending(p) => {
            assert!(p["metadata"]["deletionTimestamp"].is_string());
            assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 45);
        }
        other => panic!("a bound pod is deleted gracefully, got {other:?}"),
    }
    // A shorter grace period shortens it; the kubelet's grace-0 delete removes the pod.
    let shorter = DeleteOptions {
        grace_period_seconds: Some(5),
        ..Default::default()
    };
    match store.delete(&pods, &loc("bound"), &shorter).await.unwrap() {
        Deleted::Pending(p) => assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 5),
        other => panic!("{other:?}"),
    }
    let now = DeleteOptions {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    assert!(matches!(
        store.delete(&pods, &loc("bound"), &now).await.unwrap(),
        Deleted::Gone(_)
    ));
}
