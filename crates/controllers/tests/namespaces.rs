//! Namespace lifecycle, service account and root CA publisher against a real in-process API
//! server with several logical clusters.

mod common;

use common::{CA_PEM, Harness, wait_for};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn namespace(name: &str) -> Namespace {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

fn configmap(name: &str, finalizers: &[&str]) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "finalizers": finalizers}, "data": {"k": "v"}}),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_namespaces_get_a_default_service_account_and_the_root_ca_in_every_cluster() {
    let h = Harness::start(&["tenant-a"]).await;
    for cluster in ["root", "tenant-a"] {
        let ns: Api<Namespace> = Api::all(h.client(cluster));
        ns.create(&PostParams::default(), &namespace("team"))
            .await
            .unwrap();
        for n in ["team", "default"] {
            let sa: Api<ServiceAccount> = h.api(cluster, n);
            wait_for(&sa, "default", "the default service account", |s| {
                s.is_some()
            })
            .await;
            let cms: Api<ConfigMap> = h.api(cluster, n);
            let cm = wait_for(&cms, "kube-root-ca.crt", "kube-root-ca.crt", |c| {
                c.is_some()
            })
            .await
            .unwrap();
            assert_eq!(cm.data.unwrap()["ca.crt"], CA_PEM);
        }
    }
    // A deleted default service account comes back; an edited bundle is put right.
    let sa: Api<ServiceAccount> = h.api("tenant-a", "team");
    sa.delete("default", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &sa,
        "default",
        "the default service account to come back",
        |s| s.is_some_and(|s| s.metadata.deletion_timestamp.is_none()),
    )
    .await;
    let cms: Api<ConfigMap> = h.api("tenant-a", "team");
    cms.patch(
        "kube-root-ca.crt",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"ca.crt": "tampered"}})),
    )
    .await
    .unwrap();
    wait_for(&cms, "kube-root-ca.crt", "the bundle to be restored", |c| {
        c.and_then(|c| c.data.as_ref())
            .is_some_and(|d| d["ca.crt"] == CA_PEM)
    })
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_deletion_removes_content_and_finalizes_in_two_clusters_at_once() {
    let h = Harness::start(&["tenant-a", "tenant-b"]).await;
    for cluster in ["tenant-a", "tenant-b"] {
        let ns: Api<Namespace> = Api::all(h.client(cluster));
        ns.create(&PostParams::default(), &namespace("doomed"))
            .await
            .unwrap();
        let cms: Api<ConfigMap> = h.api(cluster, "doomed");
        for i in 0..3 {
            cms.create(&PostParams::default(), &configmap(&format!("cm{i}"), &[]))
                .await
                .unwrap();
        }
        let secrets: Api<Secret> = h.api(cluster, "doomed");
        let s: Secret =
            serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"a": "b"}}))
                .unwrap();
        secrets.create(&PostParams::default(), &s).await.unwrap();
    }
    // In tenant-a one object holds the namespace with a finalizer nobody removes yet.
    let held: Api<ConfigMap> = h.api("tenant-a", "doomed");
    held.create(
        &PostParams::default(),
        &configmap("held", &["example.com/hold"]),
    )
    .await
    .unwrap();
    // A same-named namespace in the root cluster must not be touched.
    let root_ns: Api<Namespace> = Api::all(h.client("root"));
    root_ns
        .create(&PostParams::default(), &namespace("doomed"))
        .await
        .unwrap();

    for cluster in ["tenant-a", "tenant-b"] {
        let ns: Api<Namespace> = Api::all(h.client(cluster));
        ns.delete("doomed", &DeleteParams::default()).await.unwrap();
    }
    let b: Api<Namespace> = Api::all(h.client("tenant-b"));
    wait_for(&b, "doomed", "tenant-b's namespace to be gone", |n| {
        n.is_none()
    })
    .await;

    let a: Api<Namespace> = Api::all(h.client("tenant-a"));
    let stuck = wait_for(&a, "doomed", "the remaining-content conditions", |n| {
        n.and_then(|n| n.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "NamespaceFinalizersRemaining" && c.status == "True")
            })
    })
    .await
    .unwrap();
    let status = stuck.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Terminating"));
    let conds = status.conditions.unwrap();
    let get = |t: &str| conds.iter().find(|c| c.type_ == t).unwrap();
    assert_eq!(get("NamespaceContentRemaining").status, "True");
    assert_eq!(
        get("NamespaceContentRemaining").message.as_deref(),
        Some("Some resources are remaining: configmaps. has 1 resource instances")
    );
    assert_eq!(
        get("NamespaceFinalizersRemaining").message.as_deref(),
        Some("Some finalizers are remaining: example.com/hold in 1 resource instances")
    );
    assert_eq!(
        get("NamespaceDeletionContentFailure").reason.as_deref(),
        Some("ContentDeleted")
    );
    assert_eq!(get("NamespaceDeletionDiscoveryFailure").status, "False");

    held.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    wait_for(&a, "doomed", "tenant-a's namespace to be gone", |n| {
        n.is_none()
    })
    .await;
    let root = root_ns.get("doomed").await.unwrap();
    assert!(
        root.metadata.deletion_timestamp.is_none(),
        "the root cluster's namespace is untouched"
    );
    h.stop().await;
}
