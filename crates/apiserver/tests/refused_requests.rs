//! A refused request changes nothing and says why. Regressions: `DELETE /api/v1/namespaces`
//! answered 405 only after its handler had deleted every namespace of the cluster (the verb
//! was checked after the handler ran); `kubectl delete namespace default` deleted it
//! (upstream's NamespaceLifecycle admission keeps `default`, `kube-system` and
//! `kube-public`); impersonation headers without a user were a 500 naming nothing.

mod support;

use std::sync::Arc;

use apiserver::server::ApiServer;
use http::Method;
use support::{call, call_with, server};

async fn namespace_names(server: &Arc<ApiServer>) -> Vec<String> {
    let (code, list) = call(server, Method::GET, "/api/v1/namespaces").await;
    assert_eq!(code, 200, "{list}");
    let mut names: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_delete_of_the_namespace_collection_is_refused_before_it_deletes_anything() {
    let (_dir, server) = server().await;
    let before = namespace_names(&server).await;
    assert!(before.contains(&"kube-system".to_string()), "{before:?}");
    let (code, status) = call(&server, Method::DELETE, "/api/v1/namespaces").await;
    assert_eq!(code, 405, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "MethodNotAllowed");
    assert_eq!(namespace_names(&server).await, before);
}

#[tokio::test]
async fn the_default_and_system_namespaces_may_not_be_deleted() {
    let (_dir, server) = server().await;
    let before = namespace_names(&server).await;
    for ns in ["default", "kube-system", "kube-public"] {
        let (code, status) =
            call(&server, Method::DELETE, &format!("/api/v1/namespaces/{ns}")).await;
        assert_eq!(code, 403, "{status}");
        assert_eq!(status["reason"], "Forbidden");
        assert_eq!(
            status["message"],
            format!("namespaces \"{ns}\" is forbidden: this namespace may not be deleted")
        );
    }
    assert_eq!(namespace_names(&server).await, before);
}

#[tokio::test]
async fn impersonating_groups_without_a_user_is_a_bad_request_naming_them() {
    let (_dir, server) = server().await;
    let (code, status) = call_with(
        &server,
        Method::GET,
        "/api/v1/namespaces",
        &[("Impersonate-Group", "devs"), ("Impersonate-Uid", "42")],
        "",
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["reason"], "BadRequest");
    assert_eq!(
        status["message"],
        "requested [Impersonate-Group: devs, Impersonate-Uid: 42] without impersonating a user (Impersonate-User)"
    );
}

#[tokio::test]
async fn a_strict_patch_naming_an_unknown_field_is_refused_and_stores_nothing() {
    let (_dir, server) = server().await;
    let json = [("content-type", "application/json")];
    let (code, created) = call_with(
        &server,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        &json,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"a":"1"}}"#,
    )
    .await;
    assert_eq!(code, 201, "{created}");
    for (ty, patch) in [
        (
            "application/merge-patch+json",
            r#"{"data":{"a":"2"},"bogus":1}"#,
        ),
        (
            "application/json-patch+json",
            r#"[{"op":"replace","path":"/data/a","value":"2"},{"op":"add","path":"/bogus","value":1}]"#,
        ),
        (
            "application/strategic-merge-patch+json",
            r#"{"data":{"a":"2"},"bogus":1}"#,
        ),
    ] {
        let (code, status) = call_with(
            &server,
            Method::PATCH,
            "/api/v1/namespaces/default/configmaps/cm?fieldValidation=Strict",
            &[("content-type", ty)],
            patch,
        )
        .await;
        assert_eq!(code, 400, "{ty}: {status}");
        assert_eq!(
            status["message"], "strict decoding error: unknown field \"bogus\"",
            "{ty}"
        );
        let (_, now) = call(
            &server,
            Method::GET,
            "/api/v1/namespaces/default/configmaps/cm",
        )
        .await;
        assert_eq!(now["data"]["a"], "1", "{ty}: {now}");
        assert_eq!(
            now["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"],
            "{ty}"
        );
    }
}

#[tokio::test]
async fn server_side_apply_keys_a_container_port_without_protocol_by_its_default() {
    let (_dir, server) = server().await;
    let manifest = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
      "spec":{"selector":{"matchLabels":{"app":"web"}},
        "template":{"metadata":{"labels":{"app":"web"}},
          "spec":{"containers":[{"name":"web","image":"nginx","ports":[{"containerPort":80}]}]}}}}"#;
    let (code, obj) = call_with(
        &server,
        Method::PATCH,
        "/apis/apps/v1/namespaces/default/deployments/web?fieldManager=kubectl",
        &[("content-type", "application/apply-patch+yaml")],
        manifest,
    )
    .await;
    assert_eq!(code, 201, "{obj}");
    let port = &obj["spec"]["template"]["spec"]["containers"][0]["ports"][0];
    assert_eq!(port["containerPort"], 80);
    // A configuration that does not fit the schema is the client's error, not a 500.
    let (code, status) = call_with(
        &server,
        Method::PATCH,
        "/apis/apps/v1/namespaces/default/deployments/web?fieldManager=kubectl",
        &[("content-type", "application/apply-patch+yaml")],
        r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
          "spec":{"template":{"spec":{"containers":[{"image":"nginx"}]}}}}"#,
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("omits key field \"name\""),
        "{status}"
    );
}
