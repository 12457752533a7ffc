//! The garbage collector against a real in-process API server: background, foreground and
//! orphan deletion of a Deployment → ReplicaSet → pods chain, dangling owners, and owners that
//! live in another cluster.

mod common;

use common::{Harness, kubelet, wait_for, wait_list};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

const CLUSTER: &str = "tenant-gc";

struct Chain {
    deps: Api<Deployment>,
    sets: Api<ReplicaSet>,
    pods: Api<Pod>,
}

/// A ready Deployment "app" with two pods in `ns`.
async fn chain(h: &Harness, ns: &str) -> Chain {
    let c = Chain {
        deps: h.api(CLUSTER, ns),
        sets: h.api(CLUSTER, ns),
        pods: h.api(CLUSTER, ns),
    };
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "app"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "app"}},
            "template": {"metadata": {"labels": {"app": "app"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
        },
    }))
    .unwrap();
    c.deps.create(&PostParams::default(), &d).await.unwrap();
    wait_list(&c.pods, "two pods", |p| p.len() == 2).await;
    wait_list(&c.sets, "one replica set", |s| s.len() == 1).await;
    c
}

async fn namespace(h: &Harness, name: &str) {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(h.client(CLUSTER));
    let ns = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &ns).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_deletion_removes_replica_sets_and_pods() {
    let h = Harness::start(&[CLUSTER]).await;
    namespace(&h, "bg").await;
    let c = chain(&h, "bg").await;
    c.deps
        .delete("app", &DeleteParams::background())
        .await
        .unwrap();
    wait_list(&c.sets, "the replica set to be collected", |s| s.is_empty()).await;
    wait_list(&c.pods, "the pods to be collected", |p| p.is_empty()).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_deletion_removes_dependents_before_the_owner() {
    let h = Harness::start(&[CLUSTER]).await;
    namespace(&h, "fg").await;
    let c = chain(&h, "fg").await;
    let kubelet = kubelet(c.pods.clone());
    c.deps
        .delete("app", &DeleteParams::foreground())
        .await
        .unwrap();
    let d = c.deps.get_opt("app").await.unwrap();
    if let Some(d) = d {
        assert!(d.finalizers().iter().any(|f| f == "foregroundDeletion"));
    }
    wait_for(&c.deps, "app", "the deployment to be gone", |d| d.is_none()).await;
    // The owner goes last: when it is gone, its blocking dependents already are.
    let left = c.sets.list(&Default::default()).await.unwrap().items;
    let brief: Vec<_> = left
        .iter()
        .map(|r| {
            (
                r.name_any(),
                r.metadata.creation_timestamp.clone(),
                r.annotations()
                    .get("deployment.kubernetes.io/revision")
                    .cloned(),
                r.spec.as_ref().unwrap().replicas,
            )
        })
        .collect();
    assert!(left.is_empty(), "{brief:?}");
    assert!(
        c.pods
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    kubelet.abort();
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_deletion_keeps_dependents_and_drops_their_references() {
    let h = Harness::start(&[CLUSTER]).await;
    namespace(&h, "or").await;
    let c = chain(&h, "or").await;
    c.deps.delete("app", &DeleteParams::orphan()).await.unwrap();
    wait_for(&c.deps, "app", "the deployment to be gone", |d| d.is_none()).await;
    let sets = c.sets.list(&Default::default()).await.unwrap().items;
    assert_eq!(sets.len(), 1);
    assert!(
        sets[0].owner_references().is_empty(),
        "the orphaned set no longer names its owner"
    );
    let pods = c.pods.list(&Default::default()).await.unwrap().items;
    assert_eq!(pods.len(), 2, "the set keeps its pods");
    assert!(
        pods.iter()
            .all(|p| p.owner_references()[0].name == sets[0].name_any())
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dangling_owners_are_collected_and_owners_never_cross_clusters() {
    let h = Harness::start(&[CLUSTER, "tenant-other"]).await;
    let here: Api<ConfigMap> = h.api(CLUSTER, "default");
    let there: Api<ConfigMap> = h.api("tenant-other", "default");
    let owner: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap();
    let owner = here.create(&PostParams::default(), &owner).await.unwrap();
    let reference = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}]);
    let dependent: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "dependent", "ownerReferences": reference}}),
    )
    .unwrap();
    // The same reference in another cluster points at nothing there.
    there
        .create(&PostParams::default(), &dependent)
        .await
        .unwrap();
    here.create(&PostParams::default(), &dependent)
        .await
        .unwrap();
    let never: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "never", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "6d7c3f3e-0000-4000-8000-000000000000"}
    ]}}))
    .unwrap();
    here.create(&PostParams::default(), &never).await.unwrap();
    wait_for(
        &there,
        "dependent",
        "the other cluster's dependent to be collected",
        |c| c.is_none(),
    )
    .await;
    wait_for(
        &here,
        "never",
        "the dependent of a never-existing owner to be collected",
        |c| c.is_none(),
    )
    .await;
    assert!(
        here.get_opt("dependent").await.unwrap().is_some(),
        "a dependent with its owner stays"
    );
    here.delete("owner", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &here,
        "dependent",
        "the dependent to follow its owner",
        |c| c.is_none(),
    )
    .await;
    h.stop().await;
}

/// A namespaced CRD `widgets.example.com` created in `cluster` now (after the collector
/// started), waited for until served.
async fn widgets(h: &Harness, cluster: &str) -> Api<kube::api::DynamicObject> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(h.client(cluster));
    let crd = serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let ar = kube::discovery::ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(h.client(cluster), "default", &ar);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while api.list(&Default::default()).await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "widgets never served"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    api
}

/// Creates a widget and a config map it owns; returns the config map's name.
async fn owned_by_widget(
    widgets: &Api<kube::api::DynamicObject>,
    cms: &Api<ConfigMap>,
    name: &str,
    block: bool,
) -> String {
    let w: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}
    }))
    .unwrap();
    let w = widgets.create(&PostParams::default(), &w).await.unwrap();
    let child = format!("{name}-child");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": child, "ownerReferences": [
            {"apiVersion": "example.com/v1", "kind": "Widget", "name": name, "uid": w.metadata.uid,
             "blockOwnerDeletion": block}
        ]}}))
        .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    child
}

/// Regression: the collector discovered resources once at start, so children of custom
/// resources whose CRD came later were never collected and foreground or orphan deletion of
/// such an owner hung with its finalizer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_of_a_kind_defined_after_start_are_followed_in_every_deletion_mode() {
    let h = Harness::start(&[CLUSTER]).await;
    let cms: Api<ConfigMap> = h.api(CLUSTER, "default");
    // A dependent naming an owner of a kind nobody serves yet stays...
    let early: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "early", "ownerReferences": [
        {"apiVersion": "example.com/v1", "kind": "Widget", "name": "ghost", "uid": "6d7c3f3e-0000-4000-8000-000000000001"}
    ]}}))
    .unwrap();
    cms.create(&PostParams::default(), &early).await.unwrap();
    let widgets = widgets(&h, CLUSTER).await;
    // ...until the kind is served and its owner is found missing.
    wait_for(
        &cms,
        "early",
        "the dependent of a missing widget to be collected",
        |c| c.is_none(),
    )
    .await;

    let child = owned_by_widget(&widgets, &cms, "bg", false).await;
    widgets
        .delete("bg", &DeleteParams::background())
        .await
        .unwrap();
    wait_for(&cms, &child, "the widget's child to be collected", |c| {
        c.is_none()
    })
    .await;

    let child = owned_by_widget(&widgets, &cms, "fg", true).await;
    widgets
        .delete("fg", &DeleteParams::foreground())
        .await
        .unwrap();
    wait_for(&widgets, "fg", "the foreground deletion to finish", |w| {
        w.is_none()
    })
    .await;
    assert!(
        cms.get_opt(&child).await.unwrap().is_none(),
        "the child went first"
    );

    let child = owned_by_widget(&widgets, &cms, "orph", false).await;
    widgets
        .delete("orph", &DeleteParams::orphan())
        .await
        .unwrap();
    wait_for(&widgets, "orph", "the orphan deletion to finish", |w| {
        w.is_none()
    })
    .await;
    let kept = cms.get(&child).await.unwrap();
    assert!(
        kept.metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
    h.stop().await;
}
