//! Logical clusters in process: provisioning, isolation of credentials and data, request routing
//! under hostile paths, and deletion down to the last key.

use std::sync::Arc;
use std::time::Duration;

use apiserver::server::{ApiServer, Caller};
use bytes::Bytes;
use controlplane::auth::{UserExt, UserInfo};
use http::{Method, Request};
use http_body_util::BodyExt;
use rustls::pki_types::CertificateDer;
use serde_json::{Value, json};

async fn server() -> (Arc<ApiServer>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = storage::embedded::EmbeddedStore::open(dir.path()).unwrap();
    (
        apiserver::server::start(Arc::new(store)).await.unwrap(),
        dir,
    )
}

async fn call(
    server: &Arc<ApiServer>,
    caller: Caller,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut b = Request::builder().method(method).uri(path);
    if body.is_some() {
        b = b.header("content-type", "application/json");
    }
    let req = b
        .body(body.map(|v| Bytes::from(v.to_string())).unwrap_or_default())
        .unwrap();
    let resp = server.handle(req, caller).await;
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn system() -> Caller {
    Caller::Internal(UserInfo::system())
}

/// Creates a LogicalCluster and waits until it is served.
async fn cluster(server: &Arc<ApiServer>, name: &str) {
    let lc = json!({"apiVersion": "core.matryoshka.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": name}});
    let (code, body) = call(
        server,
        system(),
        Method::POST,
        "/apis/core.matryoshka.dev/v1alpha1/logicalclusters",
        Some(lc),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !server.cluster_exists(name).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "cluster {name} never became ready"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A client certificate chain issued by `cluster`'s CA.
fn client_chain(server: &ApiServer, cluster: &str, user: &str, groups: &[&str]) -> Caller {
    use rustls::pki_types::pem::PemObject;
    let ca = controlplane::tenancy::ca_of(server.control_plane(), cluster).unwrap();
    let pair = ca.issue_client(user, groups).unwrap();
    let der = CertificateDer::from_pem_slice(pair.cert_pem.as_bytes()).unwrap();
    Caller::Tls(Some(Arc::new(apiserver::authn::PeerCerts::new(vec![der]))))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_certificate_opens_its_own_cluster_only() {
    let (server, _dir) = server().await;
    cluster(&server, "a").await;
    cluster(&server, "b").await;
    let a_admin = client_chain(&server, "a", "admin", &["system:masters"]);
    let (code, body) = call(
        &server,
        a_admin.clone(),
        Method::GET,
        "/clusters/a/api/v1/namespaces",
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body["items"].as_array().unwrap().len(),
        4,
        "the seeded namespaces"
    );
    let (code, _) = call(
        &server,
        a_admin.clone(),
        Method::GET,
        "/clusters/b/api/v1/namespaces",
        None,
    )
    .await;
    assert_eq!(code, 401, "a's certificate is not valid in b");
    let (code, _) = call(
        &server,
        a_admin.clone(),
        Method::GET,
        "/api/v1/namespaces",
        None,
    )
    .await;
    assert_eq!(code, 401, "nor in the root cluster");
    let (code, _) = call(
        &server,
        a_admin,
        Method::GET,
        "/clusters/nosuch/api/v1/namespaces",
        None,
    )
    .await;
    assert_eq!(code, 404, "an unknown cluster is not found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_and_watch_events_never_cross_clusters() {
    let (server, _dir) = server().await;
    cluster(&server, "a").await;
    cluster(&server, "b").await;
    let mut watch = server
        .store()
        .shared_cache()
        .watch(
            "",
            "configmaps",
            registry::cache::Filter {
                cluster: Some("b".into()),
                ..Default::default()
            },
            registry::cache::Start::After(server.store().shared_cache().revision()),
            false,
        )
        .unwrap();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "only-a"}});
    let (code, _) = call(
        &server,
        system(),
        Method::POST,
        "/clusters/a/api/v1/namespaces/default/configmaps",
        Some(cm),
    )
    .await;
    assert_eq!(code, 201);
    let marker = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "in-b"}});
    let (code, _) = call(
        &server,
        system(),
        Method::POST,
        "/clusters/b/api/v1/namespaces/default/configmaps",
        Some(marker),
    )
    .await;
    assert_eq!(code, 201);
    // b's watcher sees b's write first: a's never reached it.
    match tokio::time::timeout(Duration::from_secs(5), watch.rx.recv())
        .await
        .unwrap()
        .unwrap()
    {
        registry::cache::WatchItem::Event(_, o) => {
            assert_eq!(o.name(), "in-b")
        }
        other => panic!("unexpected {other:?}"),
    }
    let (_, body) = call(
        &server,
        system(),
        Method::GET,
        "/clusters/b/api/v1/configmaps",
        None,
    )
    .await;
    let names: Vec<&str> = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"only-a"), "{names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_paths_are_never_served_from_another_cluster() {
    let (server, _dir) = server().await;
    for c in ["a", "ab", "b"] {
        cluster(&server, c).await;
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("secret-of-{c}")}, "data": {"v": format!("private-data-of-{c}")}});
        let (code, _) = call(
            &server,
            system(),
            Method::POST,
            &format!("/clusters/{c}/api/v1/namespaces/default/configmaps"),
            Some(cm),
        )
        .await;
        assert_eq!(code, 201);
    }
    let a_user = client_chain(&server, "a", "admin", &["system:masters"]);
    let tails = [
        "/api/v1/namespaces/default/configmaps",
        "/api/v1/configmaps",
        "/api/v1/namespaces/default/configmaps/secret-of-b",
    ];
    let prefixes = [
        "/clusters/a",
        "/clusters/b",
        "/clusters/ab",
        "/clusters/a/../b",
        "/clusters/a/./b",
        "/clusters//b",
        "/clusters/a%2fb",
        "/clusters/a%2Fb",
        "/clusters/%61b",
        "/clusters/b/",
        "/clusters/B",
        "/clusters/a/clusters/b",
        "//clusters/b",
        "/clusters/*",
        "/clusters/a\\b",
        "/clusters/a;b",
        "/clusters/a%00b",
        "/clusters/a/",
        "",
    ];
    let queries = [
        "",
        "?cluster=b",
        "?clusters=b&fieldSelector=metadata.name%3Dsecret-of-b",
        "?watch=false&x=/clusters/b",
    ];
    let mut checked = 0;
    // Deterministic pseudo-random extra paths: segments from a hostile alphabet.
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    let mut random_paths = Vec::new();
    let pieces = [
        "clusters",
        "a",
        "b",
        "ab",
        "..",
        ".",
        "",
        "%2e%2e",
        "%2f",
        "api",
        "v1",
        "configmaps",
        "namespaces",
        "default",
        "*",
    ];
    for _ in 0..300 {
        let mut p = String::new();
        for _ in 0..(seed % 7 + 1) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            p.push('/');
            p.push_str(pieces[(seed % pieces.len() as u64) as usize]);
        }
        random_paths.push(p);
    }
    let mut all: Vec<String> = Vec::new();
    for p in prefixes {
        for t in tails {
            for q in queries {
                all.push(format!("{p}{t}{q}"));
            }
        }
    }
    all.extend(random_paths);
    for path in &all {
        let Ok(uri) = path.parse::<http::Uri>() else {
            continue;
        };
        let (code, body) = call(&server, a_user.clone(), Method::GET, &uri.to_string(), None).await;
        let text = body.to_string();
        assert!(
            !text.contains("private-data-of-b") && !text.contains("private-data-of-ab"),
            "{path} answered {code} with another cluster's data: {text}"
        );
        if code == 200 {
            let routed = apiserver::route::route(uri.path());
            assert_eq!(
                routed.cluster, "a",
                "{path} was served for cluster {}",
                routed.cluster
            );
        }
        checked += 1;
    }
    assert!(checked > 400, "only {checked} paths checked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_cluster_leaves_no_key_and_no_credential() {
    let (server, _dir) = server().await;
    cluster(&server, "doomed").await;
    cluster(&server, "doomedx").await;
    for i in 0..20 {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i}")}});
        call(
            &server,
            system(),
            Method::POST,
            "/clusters/doomed/api/v1/namespaces/default/configmaps",
            Some(cm),
        )
        .await;
    }
    let admin = client_chain(&server, "doomed", "admin", &["system:masters"]);
    let prefix = registry::key::cluster("doomed");
    assert!(
        !server
            .store()
            .shared()
            .storage
            .list(prefix.as_bytes(), Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let (code, _) = call(
        &server,
        system(),
        Method::DELETE,
        "/apis/core.matryoshka.dev/v1alpha1/logicalclusters/doomed",
        None,
    )
    .await;
    assert_eq!(code, 200);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (code, _) = call(
            &server,
            system(),
            Method::GET,
            "/apis/core.matryoshka.dev/v1alpha1/logicalclusters/doomed",
            None,
        )
        .await;
        if code == 404 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the LogicalCluster was never removed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let left = server
        .store()
        .shared()
        .storage
        .list(prefix.as_bytes(), Default::default())
        .await
        .unwrap();
    assert!(
        left.items.is_empty(),
        "keys left: {:?}",
        left.items
            .iter()
            .map(|k| String::from_utf8_lossy(&k.key).into_owned())
            .collect::<Vec<_>>()
    );
    let (code, _) = call(
        &server,
        admin,
        Method::GET,
        "/clusters/doomed/api/v1/namespaces",
        None,
    )
    .await;
    assert_eq!(code, 404, "the cluster is gone with its credentials");
    let (code, _) = call(
        &server,
        system(),
        Method::GET,
        "/api/v1/namespaces/matryoshka-system/secrets/doomed-pki",
        None,
    )
    .await;
    assert_eq!(code, 404);
    // The neighbour whose name extends the deleted one is untouched.
    let (code, body) = call(
        &server,
        system(),
        Method::GET,
        "/clusters/doomedx/api/v1/namespaces",
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_builtin_api_service_is_registered_again_at_start_up() {
    let (server, _dir) = server().await;
    cluster(&server, "team").await;
    let url = "/clusters/team/apis/apiregistration.k8s.io/v1/apiservices/v1.apps";
    // Registered right after the cluster is Ready, as kube-apiserver's autoregistration.
    testkit::eventually("v1.apps to be registered", || async {
        let (code, _) = call(&server, system(), Method::GET, url, None).await;
        (code == 200).then_some(())
    })
    .await;
    let (code, body) = call(&server, system(), Method::DELETE, url, None).await;
    assert_eq!(code, 200, "{body}");
    let (code, _) = call(&server, system(), Method::GET, url, None).await;
    assert_eq!(code, 404);
    // What the server runs when it starts, for every served cluster.
    controlplane::apiservices::register_on_start(server.control_plane()).await;
    let (code, body) = call(&server, system(), Method::GET, url, None).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["spec"]["groupPriorityMinimum"], 17800);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creating_and_deleting_clusters_leaves_every_per_cluster_map_as_it_was() {
    let (server, _dir) = server().await;
    // Settled: the root cluster's registrations are written.
    server.store().wait_for_cache().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = server.per_cluster_state();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let names: Vec<String> = (0..50).map(|i| format!("churn-{i}")).collect();
    for name in &names {
        cluster(&server, name).await;
    }
    // Every kind of per-cluster state is used: a token (trust), a CRD (catalogue and documents).
    for name in names.iter().take(10) {
        let (code, body) = call(
            &server,
            system(),
            Method::POST,
            &format!("/clusters/{name}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"),
            Some(crd.clone()),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        let (code, body) = call(
            &server,
            system(),
            Method::POST,
            &format!("/clusters/{name}/api/v1/namespaces/default/serviceaccounts/default/token"),
            Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})),
        )
        .await;
        assert_eq!(code, 201, "{body}");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    // Served: each cluster's catalogue, then its OpenAPI documents, are set.
    while {
        let now = server.per_cluster_state();
        now["custom resource catalogues"] < 10 || now["openapi documents"] < 10
    } {
        assert!(tokio::time::Instant::now() < deadline, "CRDs never served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let during = server.per_cluster_state();
    assert!(during["trust"] >= 10, "{during:?}");
    assert!(during["openapi documents"] >= 10, "{during:?}");
    assert!(
        during["cached objects"] > before["cached objects"],
        "{during:?}"
    );
    for name in &names {
        let (code, body) = call(
            &server,
            system(),
            Method::DELETE,
            &format!("/apis/core.matryoshka.dev/v1alpha1/logicalclusters/{name}"),
            None,
        )
        .await;
        assert_eq!(code, 200, "{body}");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let now = server.per_cluster_state();
        if now == before {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            let left: Vec<_> = server
                .store()
                .shared_cache()
                .object_counts()
                .into_iter()
                .filter(|((c, _, _), _)| c.starts_with("churn-") || c == "root")
                .collect();
            panic!("per-cluster state {now:?}, before the clusters {before:?}; held: {left:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Regression: a request to a cluster created and not yet served was answered 404, which a
/// controller acting on the cluster's creation takes for "gone" (the work queue ends a
/// reconcile on NotFound, as upstream's) and does not retry until another event comes. It is
/// now 503 with a Retry-After; a cluster that does not exist, or is being deleted, is still
/// 404.
#[tokio::test]
async fn a_cluster_not_yet_served_answers_retry_later_and_one_that_does_not_exist_not_found() {
    let (server, _dir) = server().await;
    // A cluster being restored is not provisioned until its restore completes.
    let lc = json!({"apiVersion": "core.matryoshka.dev/v1alpha1", "kind": "LogicalCluster",
        "metadata": {"name": "later", "annotations": {controlplane::backup::RESTORING: "true"}}});
    let (code, body) = call(
        &server,
        system(),
        Method::POST,
        "/apis/core.matryoshka.dev/v1alpha1/logicalclusters",
        Some(lc),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    // Once the watch cache has the LogicalCluster (it may trail the create by a moment).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let (code, body) = loop {
        let (code, body) = call(
            &server,
            system(),
            Method::GET,
            "/clusters/later/api/v1/namespaces",
            None,
        )
        .await;
        if code != 404 || std::time::Instant::now() > deadline {
            break (code, body);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(code, 503, "{body}");
    assert_eq!(body["reason"], "ServiceUnavailable", "{body}");
    assert_eq!(body["details"]["retryAfterSeconds"], 1, "{body}");
    let (code, _) = call(
        &server,
        system(),
        Method::GET,
        "/clusters/never/api/v1/namespaces",
        None,
    )
    .await;
    assert_eq!(code, 404);
    // Deleted: not found again.
    let (code, body) = call(
        &server,
        system(),
        Method::DELETE,
        "/apis/core.matryoshka.dev/v1alpha1/logicalclusters/later",
        None,
    )
    .await;
    assert!(code == 200 || code == 202, "{code} {body}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (code, _) = call(
            &server,
            system(),
            Method::GET,
            "/clusters/later/api/v1/namespaces",
            None,
        )
        .await;
        if code == 404 {
            break;
        }
        assert_eq!(code, 503);
        assert!(std::time::Instant::now() < deadline, "still {code}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
