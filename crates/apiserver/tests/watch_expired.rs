//! A watch that starts below the cache's retained history gets a 200 stream with one ERROR
//! event (410 Expired), as upstream's cacher answers. Regression: it used to be an HTTP 410,
//! on which kube-rs's watcher retries the same resourceVersion for ever instead of re-listing
//! (the workloads benchmark's informers stalled that way).

use std::sync::Arc;

use apiserver::server::Caller;
use bytes::Bytes;
use controlplane::auth::{UserExt, UserInfo};
use http::{Method, Request};
use http_body_util::BodyExt;
use serde_json::Value;
use storage::Storage;

#[tokio::test]
async fn a_watch_below_the_retained_history_is_an_error_event_in_a_200_stream() {
    let dir = tempfile::tempdir().unwrap();
    let store = storage::embedded::EmbeddedStore::open(dir.path()).unwrap();
    // Writes before the cache loads: its history starts above revision 1.
    for i in 0..3 {
        store
            .create(
                format!("/unrelated/{i}").as_bytes(),
                Bytes::from_static(b"{}"),
            )
            .await
            .unwrap();
    }
    let server = apiserver::server::start(Arc::new(store)).await.unwrap();
    let req = Request::builder()
        .method(Method::GET)
        .uri("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=1")
        .body(Bytes::new())
        .unwrap();
    let resp = server
        .handle(req, Caller::Internal(UserInfo::system()))
        .await;
    assert_eq!(resp.status().as_u16(), 200);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&body);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    let event: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(event["type"], "ERROR");
    assert_eq!(event["object"]["code"], 410);
    assert_eq!(event["object"]["reason"], "Expired");
    assert!(
        event["object"]["message"]
            .as_str()
            .unwrap()
            .starts_with("too old resource version: 1 ("),
        "{event}"
    );
}
