//! CertificateSigningRequests through the approver and the signer: a kubelet's client request
//! from a bootstrap token's group is approved and signed by its logical cluster's CA; a
//! request that is not a kubelet's, or from someone without the right, waits for a human, whose
//! approval (the `approval` subresource) the signer honours; the server records the requester;
//! a request the signer's rules refuse fails.

mod common;

use common::Harness;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn csr(name: &str, request: &str, signer: &str, usages: &[&str]) -> CertificateSigningRequest {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "request": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, request),
            "signerName": signer,
            "usages": usages,
            "username": "whoever-the-request-claims",
        },
    }))
    .expect("csr")
}

fn conditions(c: &CertificateSigningRequest) -> Vec<(String, String)> {
    c.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.reason.unwrap_or_default()))
        .collect()
}

fn certificate(c: &CertificateSigningRequest) -> Option<String> {
    let cert = c.status.as_ref()?.certificate.as_ref()?;
    (!cert.0.is_empty()).then(|| String::from_utf8_lossy(&cert.0).to_string())
}

async fn signed(api: &Api<CertificateSigningRequest>, name: &str) -> CertificateSigningRequest {
    testkit::eventually(&format!("{name} signed"), || async {
        let c = api.get(name).await.ok()?;
        certificate(&c).is_some().then_some(c)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_client_requests_from_bootstrappers_are_approved_and_signed_by_the_clusters_ca() {
    let h = Harness::start(&["t1"]).await;
    let admin = h.client("t1");
    // As kubeadm binds them: bootstrappers may ask, and their kubelet requests are approved.
    // Eve may ask for certificates, no more.
    for (name, role, kind, subject) in [
        (
            "kubeadm:kubelet-bootstrap",
            "system:node-bootstrapper",
            "Group",
            "system:bootstrappers",
        ),
        (
            "kubeadm:node-autoapprove-bootstrap",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            "Group",
            "system:bootstrappers",
        ),
        ("eve-asks", "system:node-bootstrapper", "User", "eve"),
    ] {
        let crb: k8s_openapi::api::rbac::v1::ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": subject}],
        }))
        .expect("binding");
        Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(admin.clone())
            .create(&PostParams::default(), &crb)
            .await
            .expect("create the binding");
    }
    let bootstrap = testkit::server::as_user_in(
        &h.server,
        "t1",
        "system:bootstrap:abcdef",
        &["system:bootstrappers", "system:authenticated"],
    );
    let as_bootstrap: Api<CertificateSigningRequest> = Api::all(bootstrap);
    let api: Api<CertificateSigningRequest> = Api::all(admin.clone());

    // Not a kubelet's: alternative names are not allowed in a client request.
    let (with_san, _) =
        pki::csr::new_csr("system:node:n2", "system:nodes", &["n2".into()], &[]).expect("csr");
    // RBAC reads bindings from the watch cache: the first request waits for the new ones.
    testkit::eventually("bootstrappers may ask for certificates", || async {
        as_bootstrap
            .create(
                &PostParams::default(),
                &csr(
                    "with-san",
                    &with_san,
                    "kubernetes.io/kube-apiserver-client-kubelet",
                    &["digital signature", "client auth"],
                ),
            )
            .await
            .ok()
    })
    .await;
    // A kubelet's.
    let (good, _key) = pki::csr::new_csr("system:node:n1", "system:nodes", &[], &[]).expect("csr");
    let created = as_bootstrap
        .create(
            &PostParams::default(),
            &csr(
                "node-n1",
                &good,
                "kubernetes.io/kube-apiserver-client-kubelet",
                &["digital signature", "client auth"],
            ),
        )
        .await
        .expect("create");
    assert_eq!(
        created.spec.username.as_deref(),
        Some("system:bootstrap:abcdef"),
        "the server records who asked"
    );
    assert_eq!(
        created.spec.groups.clone().unwrap_or_default(),
        ["system:bootstrappers", "system:authenticated"]
    );
    let done = signed(&api, "node-n1").await;
    assert_eq!(
        conditions(&done),
        [("Approved".to_string(), "AutoApproved".to_string())]
    );
    let cert = certificate(&done).expect("certificate");
    let secrets: Api<Secret> = Api::namespaced(h.client("root"), "matryoshka-system");
    let pki = secrets.get("t1-pki").await.expect("the cluster's pki");
    let ca = String::from_utf8_lossy(&pki.data.unwrap_or_default()["ca.crt"].0).to_string();
    assert!(pki::issued_by(&cert, &ca), "signed by the cluster's own CA");
    let with_san_now = api.get("with-san").await.expect("get");
    assert!(
        conditions(&with_san_now).is_empty() && certificate(&with_san_now).is_none(),
        "left for a human"
    );

    // Someone without the right: not auto-approved; an admin's approval is honoured.
    let eve: Api<CertificateSigningRequest> = Api::all(testkit::server::as_user_in(
        &h.server,
        "t1",
        "eve",
        &["system:authenticated"],
    ));
    let (n3, _) = pki::csr::new_csr("system:node:n3", "system:nodes", &[], &[]).expect("csr");
    let mut by_eve = csr(
        "node-n3",
        &n3,
        "kubernetes.io/kube-apiserver-client-kubelet",
        &["digital signature", "client auth"],
    );
    by_eve.spec.expiration_seconds = Some(3600);
    eve.create(&PostParams::default(), &by_eve)
        .await
        .expect("create");
    let approve = json!({"status": {"conditions": [{"type": "Approved", "status": "True", "reason": "AdminApproved", "message": "checked by hand"}]}});
    api.patch_subresource(
        "approval",
        "node-n3",
        &PatchParams::default(),
        &Patch::Merge(&approve),
    )
    .await
    .expect("approve");
    let n3_done = signed(&api, "node-n3").await;
    assert_eq!(
        conditions(&n3_done),
        [("Approved".to_string(), "AdminApproved".to_string())]
    );
    let (not_before, not_after) =
        pki::validity_of(&certificate(&n3_done).unwrap()).expect("validity");
    let lifetime = not_after.duration_since(not_before).unwrap().as_secs();
    assert!(
        (3600..=3960).contains(&lifetime),
        "expirationSeconds honoured: {lifetime}"
    );

    // A client certificate asking for server auth fails the signer's rules.
    let (bad, _) = pki::csr::new_csr("jane", "devs", &[], &[]).expect("csr");
    api.create(
        &PostParams::default(),
        &csr(
            "jane",
            &bad,
            "kubernetes.io/kube-apiserver-client",
            &["client auth", "server auth"],
        ),
    )
    .await
    .expect("create");
    api.patch_subresource(
        "approval",
        "jane",
        &PatchParams::default(),
        &Patch::Merge(&approve),
    )
    .await
    .expect("approve");
    let failed = testkit::eventually("jane's request fails", || async {
        let c = api.get("jane").await.ok()?;
        conditions(&c)
            .iter()
            .any(|(t, _)| t == "Failed")
            .then_some(c)
    })
    .await;
    assert_eq!(
        conditions(&failed),
        [
            ("Approved".to_string(), "AdminApproved".to_string()),
            ("Failed".to_string(), "SignerValidationFailure".to_string())
        ]
    );
    assert!(certificate(&failed).is_none());
    let v: Value = serde_json::to_value(&failed).unwrap();
    assert_ne!(
        v["spec"]["username"], "whoever-the-request-claims",
        "{}",
        v["spec"]
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_serving_request_for_its_own_addresses_is_approved_and_anything_else_waits() {
    let h = Harness::start(&["t1"]).await;
    let admin = h.client("t1");
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(admin.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "n1"}})).expect("node"),
        )
        .await
        .expect("create n1");
    let addresses = json!({"status": {"addresses": [
        {"type": "InternalIP", "address": "10.0.0.5"},
        {"type": "Hostname", "address": "n1"},
    ]}});
    nodes
        .patch_status("n1", &PatchParams::default(), &Patch::Merge(&addresses))
        .await
        .expect("n1's addresses");
    let as_node = |name: &str| -> Api<CertificateSigningRequest> {
        Api::all(testkit::server::as_user_in(
            &h.server,
            "t1",
            &format!("system:node:{name}"),
            &["system:nodes", "system:authenticated"],
        ))
    };
    let serving = ["digital signature", "server auth"];
    let ask = |api: Api<CertificateSigningRequest>, name: &'static str, cn: &str, ips: &[&str]| {
        let (request, _) = pki::csr::new_csr(
            cn,
            "system:nodes",
            &["n1".into()],
            &ips.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .expect("csr");
        async move {
            api.create(
                &PostParams::default(),
                &csr(name, &request, "kubernetes.io/kubelet-serving", &serving),
            )
            .await
            .expect("create")
        }
    };
    // An address that is not the node's, and another node asking in n1's name: left alone
    // (asked first, so they are looked at before the next one is signed).
    ask(
        as_node("n1"),
        "foreign-ip",
        "system:node:n1",
        &["10.0.0.99"],
    )
    .await;
    ask(as_node("n2"), "other-node", "system:node:n1", &["10.0.0.5"]).await;
    // Its own name and address: approved and signed by the cluster's CA.
    ask(as_node("n1"), "own", "system:node:n1", &["10.0.0.5"]).await;
    let api: Api<CertificateSigningRequest> = Api::all(admin.clone());
    let done = signed(&api, "own").await;
    assert_eq!(
        conditions(&done),
        [("Approved".to_string(), "AutoApproved".to_string())]
    );
    let secrets: Api<Secret> = Api::namespaced(h.client("root"), "matryoshka-system");
    let pki = secrets.get("t1-pki").await.expect("the cluster's pki");
    let ca = String::from_utf8_lossy(&pki.data.unwrap_or_default()["ca.crt"].0).to_string();
    assert!(pki::issued_by(
        &certificate(&done).expect("certificate"),
        &ca
    ));
    for name in ["foreign-ip", "other-node"] {
        let c = api.get(name).await.expect("get");
        assert!(
            conditions(&c).is_empty() && certificate(&c).is_none(),
            "{name} is left for a human: {:?}",
            conditions(&c)
        );
    }
    h.stop().await;
}
