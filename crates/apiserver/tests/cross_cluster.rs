//! Lists and watches served from the cache's bytes: a cross-cluster response names each
//! object's cluster in `metadata.annotations`, a cluster's own response does not, and
//! selectors filter the cached form as they filtered objects.

use std::sync::Arc;
use std::time::Duration;

use apiserver::route::CLUSTER_ANNOTATION;
use apiserver::server::{ApiServer, Caller};
use bytes::Bytes;
use controlplane::auth::{UserExt, UserInfo};
use http::{Method, Request};
use http_body_util::BodyExt;
use serde_json::{Value, json};

async fn server() -> (Arc<ApiServer>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = storage::embedded::EmbeddedStore::open(dir.path()).unwrap();
    (
        apiserver::server::start(Arc::new(store)).await.unwrap(),
        dir,
    )
}

fn request(method: Method, path: &str, body: Option<&Value>) -> Request<Bytes> {
    let mut b = Request::builder().method(method).uri(path);
    if body.is_some() {
        b = b.header("content-type", "application/json");
    }
    b.body(body.map(|v| Bytes::from(v.to_string())).unwrap_or_default())
        .unwrap()
}

async fn call(server: &Arc<ApiServer>, method: Method, path: &str, body: Option<Value>) -> Value {
    let resp = server
        .handle(
            request(method, path, body.as_ref()),
            Caller::Internal(UserInfo::system()),
        )
        .await;
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    assert!(status < 300, "{path}: {status} {v}");
    v
}

async fn cluster(server: &Arc<ApiServer>, name: &str) {
    let lc = json!({"apiVersion": "core.matryoshka.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": name}});
    call(
        server,
        Method::POST,
        "/apis/core.matryoshka.dev/v1alpha1/logicalclusters",
        Some(lc),
    )
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !server.cluster_exists(name).await {
        assert!(tokio::time::Instant::now() < deadline, "{name} never ready");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn config_map(server: &Arc<ApiServer>, cluster: &str, metadata: Value) -> Value {
    call(
        server,
        Method::POST,
        &format!("/clusters/{cluster}/api/v1/namespaces/default/configmaps"),
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"k": "v"}})),
    )
    .await
}

fn items(list: &Value) -> Vec<&Value> {
    list["items"].as_array().unwrap().iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_cluster_lists_name_the_cluster_and_a_clusters_own_list_does_not() {
    let (server, _dir) = server().await;
    cluster(&server, "a").await;
    config_map(
        &server,
        "a",
        json!({"name": "plain", "labels": {"app": "web"}}),
    )
    .await;
    config_map(
        &server,
        "a",
        json!({"name": "annotated", "annotations": {"team": "blue"}}),
    )
    .await;
    let all = call(&server, Method::GET, "/clusters/*/api/v1/configmaps", None).await;
    let mine: Vec<&Value> = items(&all)
        .into_iter()
        .filter(|i| i["metadata"]["annotations"][CLUSTER_ANNOTATION] == "a")
        .filter(|i| i["metadata"]["namespace"] == "default" && i["data"]["k"] == "v")
        .collect();
    assert_eq!(mine.len(), 2, "{all}");
    for item in items(&all) {
        assert!(
            item["metadata"]["annotations"][CLUSTER_ANNOTATION].is_string(),
            "{item}"
        );
        assert!(item["metadata"]["resourceVersion"].is_string(), "{item}");
    }
    let annotated = mine
        .iter()
        .find(|i| i["metadata"]["name"] == "annotated")
        .unwrap();
    assert_eq!(annotated["metadata"]["annotations"]["team"], "blue");
    let own = call(&server, Method::GET, "/clusters/a/api/v1/configmaps", None).await;
    assert_eq!(own["kind"], "ConfigMapList");
    for item in items(&own) {
        assert!(
            item["metadata"]["annotations"]
                .get(CLUSTER_ANNOTATION)
                .is_none(),
            "{item}"
        );
    }
    let selected = call(
        &server,
        Method::GET,
        "/clusters/a/api/v1/namespaces/default/configmaps?labelSelector=app%3Dweb",
        None,
    )
    .await;
    let names: Vec<&Value> = items(&selected)
        .iter()
        .map(|i| &i["metadata"]["name"])
        .collect();
    assert_eq!(names, [&json!("plain")]);
    let by_field = call(
        &server,
        Method::GET,
        "/clusters/*/api/v1/configmaps?fieldSelector=metadata.name%3Dannotated",
        None,
    )
    .await;
    assert_eq!(items(&by_field).len(), 1, "{by_field}");
}

/// The first watch line of a streaming response.
async fn first_line(server: &Arc<ApiServer>, path: &str) -> Value {
    let resp = server
        .handle(
            request(Method::GET, path, None),
            Caller::Internal(UserInfo::system()),
        )
        .await;
    assert_eq!(resp.status().as_u16(), 200);
    let mut body = resp.into_body();
    let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .expect("an event in time")
        .expect("a frame")
        .unwrap();
    let data = frame.into_data().unwrap_or_default();
    serde_json::from_slice(data.split(|b| *b == b'\n').next().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_cluster_watch_events_name_the_cluster_and_a_clusters_own_do_not() {
    let (server, _dir) = server().await;
    cluster(&server, "a").await;
    let created = config_map(&server, "a", json!({"name": "watched"})).await;
    let rv: i64 = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let since = rv - 1;
    let all = first_line(
        &server,
        &format!("/clusters/*/api/v1/configmaps?watch=true&resourceVersion={since}"),
    )
    .await;
    assert_eq!(all["type"], "ADDED");
    assert_eq!(all["object"]["metadata"]["name"], "watched");
    assert_eq!(
        all["object"]["metadata"]["annotations"][CLUSTER_ANNOTATION],
        "a"
    );
    let own = first_line(
        &server,
        &format!(
            "/clusters/a/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={since}"
        ),
    )
    .await;
    assert_eq!(own["type"], "ADDED");
    assert_eq!(own["object"], created);
}
