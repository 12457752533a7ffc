//! Object metadata as kube-apiserver stores and serves it. Regression: removing the last
//! finalizer with a merge patch left `"finalizers": []` in the object (Go's `omitempty` drops
//! an empty list; `kubectl -o jsonpath={.metadata.finalizers}` printed `[]`).

mod support;

use http::Method;
use support::{call, call_with, server};

#[tokio::test]
async fn an_emptied_list_of_finalizers_or_owners_is_no_list_at_all() {
    let (_dir, server) = server().await;
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","finalizers":["example.com/f"],"ownerReferences":[]}}"#;
    let (code, created) = call_with(
        &server,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        &[("content-type", "application/json")],
        body,
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert!(
        created["metadata"].get("ownerReferences").is_none(),
        "{created}"
    );
    assert_eq!(created["metadata"]["finalizers"][0], "example.com/f");
    let (code, patched) = call_with(
        &server,
        Method::PATCH,
        "/api/v1/namespaces/default/configmaps/x",
        &[("content-type", "application/merge-patch+json")],
        r#"{"metadata":{"finalizers":[]}}"#,
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert!(patched["metadata"].get("finalizers").is_none(), "{patched}");
    let (code, got) = call(
        &server,
        Method::GET,
        "/api/v1/namespaces/default/configmaps/x",
    )
    .await;
    assert_eq!(code, 200);
    assert!(got["metadata"].get("finalizers").is_none(), "{got}");
}
