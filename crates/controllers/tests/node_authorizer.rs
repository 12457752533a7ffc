//! The Node authorizer and NodeRestriction: a node (`system:node:<name>` in `system:nodes`)
//! writes its own Node and Lease, the status of pods bound to it, reads what its pods
//! reference — and cannot touch another node's objects or read other Secrets.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn code<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> u16 {
    match r {
        Ok(_) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_may_change_only_its_own_objects_and_read_only_what_its_pods_use() {
    let server = testkit::Server::with_clusters(&["t1"]).await;
    let srv = server.api.clone();
    let admin = server.client("t1");
    let node = testkit::server::as_user_in(
        &srv,
        "t1",
        "system:node:n1",
        &["system:nodes", "system:authenticated"],
    );
    let nodes_as_node: Api<Node> = Api::all(node.clone());
    let nodes: Api<Node> = Api::all(admin.clone());
    let n = |name: &str| -> Node {
        serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
    };

    // Its own Node, not another's.
    assert_eq!(
        code(nodes_as_node.create(&PostParams::default(), &n("n1")).await),
        200
    );
    match nodes_as_node.create(&PostParams::default(), &n("n2")).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 403);
            assert!(
                s.message
                    .contains("node \"n1\" is not allowed to modify node \"n2\""),
                "{}",
                s.message
            );
        }
        other => panic!("{other:?}"),
    }
    nodes
        .create(&PostParams::default(), &n("n2"))
        .await
        .expect("the admin creates n2");
    let label = json!({"metadata": {"labels": {"x": "y"}}});
    assert_eq!(
        code(
            nodes_as_node
                .patch("n1", &PatchParams::default(), &Patch::Merge(&label))
                .await
        ),
        200
    );
    assert_eq!(
        code(
            nodes_as_node
                .patch_status(
                    "n1",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"phase": "Running"}}))
                )
                .await
        ),
        200
    );
    assert_eq!(
        code(
            nodes_as_node
                .patch("n2", &PatchParams::default(), &Patch::Merge(&label))
                .await
        ),
        403
    );
    assert_eq!(
        code(nodes_as_node.delete("n2", &DeleteParams::default()).await),
        403
    );
    assert_eq!(
        nodes_as_node
            .list(&ListParams::default())
            .await
            .expect("nodes read all nodes")
            .items
            .len(),
        2
    );

    // NodeRestriction: labels only a node's owner sets are not the node's to change, at
    // creation or after; its own kubelet labels are.
    let roled: Node = serde_json::from_value(
        json!({"metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}}}),
    )
    .unwrap();
    match nodes_as_node.create(&PostParams::default(), &roled).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 403);
            assert!(
                s.message.contains(
                    "node \"n1\" is not allowed to set the following labels: node-role.kubernetes.io/worker"
                ),
                "{}",
                s.message
            );
        }
        other => panic!("{other:?}"),
    }
    for (label, code_wanted) in [
        ("node-role.kubernetes.io/control-plane", 403),
        ("node-restriction.kubernetes.io/pool", 403),
        ("kubernetes.io/made-up", 403),
        ("node.kubernetes.io/instance-type", 200),
        ("topology.kubernetes.io/zone", 200),
        ("example.com/anything", 200),
    ] {
        let patch = json!({"metadata": {"labels": {label: "x"}}});
        let r = nodes_as_node
            .patch("n1", &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        if code_wanted == 403 {
            match r {
                Err(kube::Error::Api(s)) => {
                    assert_eq!(s.code, 403, "{label}");
                    assert!(
                        s.message
                            .contains(&format!("is not allowed to modify labels: {label}")),
                        "{}",
                        s.message
                    );
                }
                other => panic!("{label}: {other:?}"),
            }
        } else {
            assert_eq!(code(r), 200, "{label}");
        }
    }
    let admin_label = json!({"metadata": {"labels": {"node-role.kubernetes.io/worker": ""}}});
    nodes
        .patch("n1", &PatchParams::default(), &Patch::Merge(&admin_label))
        .await
        .expect("the owner sets the role");
    let unlabel = json!({"metadata": {"labels": {"node-role.kubernetes.io/worker": null}}});
    assert_eq!(
        code(
            nodes_as_node
                .patch("n1", &PatchParams::default(), &Patch::Merge(&unlabel))
                .await
        ),
        403,
        "nor may it remove one"
    );
    // The kubelet API's delegated checks.
    let review = json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "someone", "resourceAttributes": {"verb": "get", "resource": "nodes", "subresource": "proxy", "name": "n1"}},
    });
    let reviews: Api<k8s_openapi::api::authorization::v1::SubjectAccessReview> =
        Api::all(node.clone());
    assert_eq!(
        code(
            reviews
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(review).unwrap()
                )
                .await
        ),
        200
    );

    // Its own Lease.
    let leases: Api<Lease> = Api::namespaced(node.clone(), "kube-node-lease");
    let lease = |name: &str| -> Lease {
        serde_json::from_value(
            json!({"metadata": {"name": name}, "spec": {"holderIdentity": name}}),
        )
        .unwrap()
    };
    assert_eq!(
        code(leases.create(&PostParams::default(), &lease("n1")).await),
        200
    );
    assert_eq!(code(leases.get("n1").await), 200);
    Api::<Lease>::namespaced(admin.clone(), "kube-node-lease")
        .create(&PostParams::default(), &lease("n2"))
        .await
        .expect("n2's lease");
    assert_eq!(
        code(
            leases
                .patch(
                    "n2",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"holderIdentity": "n1"}}))
                )
                .await
        ),
        403
    );

    // Pods bound to it, and what they reference.
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "default");
    for s in ["mine", "theirs"] {
        let secret: Secret =
            serde_json::from_value(json!({"metadata": {"name": s}, "stringData": {"k": "v"}}))
                .unwrap();
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .expect("secret");
    }
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    let pod = |name: &str, on: &str, secret: &str| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"nodeName": on,
            "containers": [{"name": "c", "image": "i"}],
            "volumes": [{"name": "s", "secret": {"secretName": secret}}]}}))
        .unwrap()
    };
    pods.create(&PostParams::default(), &pod("here", "n1", "mine"))
        .await
        .expect("pod on n1");
    pods.create(&PostParams::default(), &pod("there", "n2", "theirs"))
        .await
        .expect("pod on n2");
    let pods_as_node: Api<Pod> = Api::namespaced(node.clone(), "default");
    let status = json!({"status": {"phase": "Running"}});
    assert_eq!(
        code(
            pods_as_node
                .patch_status("here", &PatchParams::default(), &Patch::Merge(&status))
                .await
        ),
        200
    );
    assert_eq!(
        code(
            pods_as_node
                .patch_status("there", &PatchParams::default(), &Patch::Merge(&status))
                .await
        ),
        403
    );
    assert_eq!(
        code(pods_as_node.delete("there", &DeleteParams::default()).await),
        403
    );
    assert_eq!(code(pods_as_node.list(&ListParams::default()).await), 200);
    let secrets_as_node: Api<Secret> = Api::namespaced(node.clone(), "default");
    assert_eq!(code(secrets_as_node.get("mine").await), 200);
    assert_eq!(code(secrets_as_node.get("theirs").await), 403);
    assert_eq!(
        code(secrets_as_node.list(&ListParams::default()).await),
        403
    );
    // Nothing else: no namespaces of its own making.
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "mine"}})).unwrap();
    assert_eq!(
        code(
            Api::<k8s_openapi::api::core::v1::Namespace>::all(node.clone())
                .create(&PostParams::default(), &ns)
                .await
        ),
        403
    );
    assert_eq!(
        code(pods_as_node.delete("here", &DeleteParams::default()).await),
        200
    );
}
