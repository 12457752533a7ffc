//! The tenant tree in process: namespaces and their labels, access inherited down the tree,
//! hierarchical quotas, and deletion cascading to descendants and their clusters.

mod common;

use common::*;
use k8s_openapi::api::core::v1::{LimitRange, Namespace, ResourceQuota};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_get_namespaces_down_the_tree_with_ancestry_labels() {
    let h = Harness::start().await;
    let namespaces: Api<Namespace> = Api::all(h.root.clone());
    assert!(
        namespaces.get("tenant-root").await.is_ok(),
        "tenant-root from the start"
    );
    create_tenant(&h.root, "tenant-root", "foo", json!({})).await;
    let foo = await_condition(&tenants(&h.root, "tenant-root"), "foo", "Ready").await;
    assert_eq!(foo.data["status"]["namespace"], "tenant-foo");
    create_tenant(&h.root, "tenant-foo", "bar", json!({})).await;
    let bar = await_condition(&tenants(&h.root, "tenant-foo"), "bar", "Ready").await;
    assert_eq!(bar.data["status"]["namespace"], "tenant-foo-bar");
    let ns = namespaces
        .get("tenant-foo-bar")
        .await
        .expect("the nested namespace");
    let labels = ns.metadata.labels.unwrap();
    for a in ["tenant-root", "tenant-foo", "tenant-foo-bar"] {
        assert!(
            labels.contains_key(&format!("tenant.matryoshka.dev/{a}")),
            "{a}"
        );
    }
    assert_eq!(labels["platform.matryoshka.dev/tenant"], "tenant-foo-bar");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_admin_manages_clusters_in_its_subtree_and_nowhere_else() {
    let h = Harness::start().await;
    create_tenant(&h.root, "tenant-root", "foo", json!({})).await;
    create_tenant(&h.root, "tenant-root", "baz", json!({})).await;
    await_condition(&tenants(&h.root, "tenant-root"), "foo", "Ready").await;
    await_condition(&tenants(&h.root, "tenant-root"), "baz", "Ready").await;
    create_tenant(&h.root, "tenant-foo", "bar", json!({})).await;
    await_condition(&tenants(&h.root, "tenant-foo"), "bar", "Ready").await;
    let alice = h.as_user("alice", &["tenant-foo-admin"]);
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let tc = object("TenantCluster", "team-x", json!({}));
    for ns in ["tenant-foo", "tenant-foo-bar"] {
        tenant_clusters(&alice, ns)
            .create(&dry, &tc)
            .await
            .unwrap_or_else(|e| panic!("alice creates a cluster in {ns}: {e}"));
        tenant_clusters(&alice, ns)
            .list(&Default::default())
            .await
            .expect("and lists them");
    }
    for ns in ["tenant-baz", "tenant-root"] {
        let r = tenant_clusters(&alice, ns).create(&dry, &tc).await;
        assert_eq!(api_error(r).code, 403, "alice is refused in {ns}");
    }
    // Admins do not create sub-tenants; super-admins do.
    let r = tenants(&alice, "tenant-foo")
        .create(&dry, &object("Tenant", "sub", json!({})))
        .await;
    assert_eq!(api_error(r).code, 403);
    let bob = h.as_user("bob", &["tenant-foo-super-admin"]);
    tenants(&bob, "tenant-foo-bar")
        .create(&dry, &object("Tenant", "sub", json!({})))
        .await
        .expect("a super-admin creates sub-tenants below");
    // A viewer reads but does not write.
    let carol = h.as_user("carol", &["tenant-foo-view"]);
    tenant_clusters(&carol, "tenant-foo-bar")
        .list(&Default::default())
        .await
        .expect("view");
    assert_eq!(
        api_error(
            tenant_clusters(&carol, "tenant-foo")
                .create(&dry, &tc)
                .await
        )
        .code,
        403
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_render_and_a_child_may_not_claim_more_than_its_parent_has_left() {
    let h = Harness::start().await;
    create_tenant(
        &h.root,
        "tenant-root",
        "foo",
        json!({"resourceQuotas": {"cpu": "8", "memory": "16Gi"}}),
    )
    .await;
    await_condition(&tenants(&h.root, "tenant-root"), "foo", "Ready").await;
    let rq: Api<ResourceQuota> = Api::namespaced(h.root.clone(), "tenant-foo");
    let q = rq.get("tenant-quota").await.expect("the ResourceQuota");
    let hard = q.spec.unwrap().hard.unwrap();
    assert_eq!(hard["limits.cpu"].0, "8");
    assert_eq!(hard["requests.cpu"].0, "800m");
    let lr: Api<LimitRange> = Api::namespaced(h.root.clone(), "tenant-foo");
    assert!(lr.get("tenant-range-limits").await.is_ok());
    create_tenant(
        &h.root,
        "tenant-foo",
        "a",
        json!({"resourceQuotas": {"cpu": "5"}}),
    )
    .await;
    let r = tenants(&h.root, "tenant-foo")
        .create(
            &Default::default(),
            &object("Tenant", "b", json!({"resourceQuotas": {"cpu": "4"}})),
        )
        .await;
    let s = api_error(r);
    assert_eq!(s.code, 403);
    assert!(s.message.contains("resourceQuotas[cpu]"), "{}", s.message);
    assert!(
        s.message
            .contains("exceeds what the parent tenant has left"),
        "{}",
        s.message
    );
    create_tenant(
        &h.root,
        "tenant-foo",
        "b",
        json!({"resourceQuotas": {"cpu": "3"}}),
    )
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_tenant_deletes_its_descendants_and_their_clusters() {
    let h = Harness::start().await;
    create_tenant(&h.root, "tenant-root", "foo", json!({})).await;
    await_condition(&tenants(&h.root, "tenant-root"), "foo", "Ready").await;
    create_tenant(&h.root, "tenant-foo", "bar", json!({})).await;
    await_condition(&tenants(&h.root, "tenant-foo"), "bar", "Ready").await;
    let tcs = tenant_clusters(&h.root, "tenant-foo-bar");
    tcs.create(
        &Default::default(),
        &object(
            "TenantCluster",
            "deep",
            json!({"nodeGroups": {"md0": {"minReplicas": 1, "maxReplicas": 1}}}),
        ),
    )
    .await
    .expect("create");
    let tc = await_condition(&tcs, "deep", "Ready").await;
    let lc = tc.data["status"]["logicalCluster"]
        .as_str()
        .unwrap()
        .to_string();
    tenants(&h.root, "tenant-root")
        .delete("foo", &DeleteParams::default())
        .await
        .expect("delete foo");
    let namespaces: Api<Namespace> = Api::all(h.root.clone());
    eventually("the subtree to go", || async {
        let gone = namespaces.get_opt("tenant-foo").await.ok()?.is_none()
            && namespaces.get_opt("tenant-foo-bar").await.ok()?.is_none()
            && tenants(&h.root, "tenant-root")
                .get_opt("foo")
                .await
                .ok()?
                .is_none();
        gone.then_some(())
    })
    .await;
    assert_eq!(h.keys_of(&lc).await, 0);
    h.stop().await;
}
