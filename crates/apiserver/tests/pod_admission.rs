//! ServiceAccount admission on pod creates: the `default` account and the projected
//! `kube-api-access-*` volume in-cluster clients read, unless automounting is off.
//! Regression: pods got no token volume, so a pod could not call the API server.

mod support;

use std::sync::Arc;

use apiserver::server::ApiServer;
use http::Method;
use serde_json::{Value, json};

async fn post(server: &Arc<ApiServer>, uri: &str, body: Value) -> (u16, Value) {
    let json = [("content-type", "application/json")];
    support::call_with(server, Method::POST, uri, &json, &body.to_string()).await
}

fn pod(name: &str, spec_extra: Value) -> Value {
    let mut spec = json!({
        "initContainers": [{"name": "init", "image": "busybox"}],
        "containers": [
            {"name": "a", "image": "busybox"},
            {"name": "b", "image": "busybox", "volumeMounts": [
                {"name": "mine", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
            ]}
        ],
        "volumes": [{"name": "mine", "emptyDir": {}}],
    });
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
        s.extend(extra.clone());
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

fn token_volume(p: &Value) -> Option<&Value> {
    p["spec"]["volumes"].as_array()?.iter().find(|v| {
        v["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("kube-api-access-"))
    })
}

#[tokio::test]
async fn a_pod_gets_the_default_account_and_its_token_volume_unless_automount_is_off() {
    let (_dir, server) = support::server().await;
    let pods = "/api/v1/namespaces/default/pods";

    let (code, p) = post(&server, pods, pod("plain", json!({}))).await;
    assert_eq!(code, 201, "{p}");
    assert_eq!(p["spec"]["serviceAccountName"], "default");
    let v = token_volume(&p).expect("a kube-api-access volume");
    let name = v["name"].as_str().unwrap();
    assert_eq!(name.len(), "kube-api-access-".len() + 5, "{name}");
    assert_eq!(
        v["projected"]["sources"],
        json!([
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ])
    );
    let mount = json!({"name": name, "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"});
    assert_eq!(
        p["spec"]["initContainers"][0]["volumeMounts"],
        json!([mount])
    );
    assert_eq!(p["spec"]["containers"][0]["volumeMounts"], json!([mount]));
    // A container that mounts something there already keeps its own.
    assert_eq!(
        p["spec"]["containers"][1]["volumeMounts"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        p["spec"]["containers"][1]["volumeMounts"][0]["name"],
        "mine"
    );

    let (code, p) = post(
        &server,
        pods,
        pod("off", json!({"automountServiceAccountToken": false})),
    )
    .await;
    assert_eq!(code, 201, "{p}");
    assert!(token_volume(&p).is_none(), "{p}");

    let (code, sa) = post(
        &server,
        "/api/v1/namespaces/default/serviceaccounts",
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "quiet"}, "automountServiceAccountToken": false}),
    )
    .await;
    assert_eq!(code, 201, "{sa}");
    server.store().wait_for_cache().await;
    let (code, p) = post(
        &server,
        pods,
        pod("quiet", json!({"serviceAccountName": "quiet"})),
    )
    .await;
    assert_eq!(code, 201, "{p}");
    assert_eq!(p["spec"]["serviceAccountName"], "quiet");
    assert!(token_volume(&p).is_none(), "{p}");
}

/// Regression: binding a pod bumped its generation to 2; upstream's binding leaves it at 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_a_pod_to_a_node_leaves_its_generation() {
    let (_dir, server) = support::server().await;
    let (code, created) = post(
        &server,
        "/api/v1/namespaces/default/pods",
        pod("bound", json!({})),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["generation"], 1);
    let (code, body) = post(
        &server,
        "/api/v1/namespaces/default/pods/bound/binding",
        json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bound"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (_, got) = support::call(
        &server,
        Method::GET,
        "/api/v1/namespaces/default/pods/bound",
    )
    .await;
    assert_eq!(got["spec"]["nodeName"], "node-1");
    assert_eq!(got["metadata"]["generation"], 1);
}

/// Regression: LimitRanger and quota admission read from the watch cache, which may trail a
/// write by a moment; a LimitRange created just before a pod sometimes did not bound it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_range_written_just_before_a_pod_bounds_it() {
    let (_dir, server) = support::server().await;
    for i in 0..20 {
        let ns = format!("lr-{i}");
        let (code, body) = post(
            &server,
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        let (code, body) = post(
            &server,
            &format!("/api/v1/namespaces/{ns}/limitranges"),
            json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr"},
                   "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]}}),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        let (code, body) = post(
            &server,
            &format!("/api/v1/namespaces/{ns}/pods"),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                   "spec": {"automountServiceAccountToken": false,
                            "containers": [{"name": "c", "image": "busybox",
                                            "resources": {"limits": {"cpu": "2"}}}]}}),
        )
        .await;
        assert_eq!(code, 403, "namespace {ns}: {body}");
        assert!(
            body["message"]
                .as_str()
                .is_some_and(|m| m.contains("maximum cpu usage per Container is 1")),
            "{body}"
        );
    }
}
