//! `apiregistration.k8s.io/v1` APIServices: every cluster lists a local, available APIService
//! per group version it serves (a CRD's come and go with it); one created from YAML is stored,
//! validated with upstream's messages and says why it is not available. Regression: the group
//! was not served (`kubectl get apiservices` failed, a create from YAML was 404).

mod support;

use std::sync::Arc;
use std::time::Duration;

use apiserver::server::ApiServer;
use http::Method;
use serde_json::{Value, json};
use support::{call, call_with, server};

const APISERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";
const JSON: &[(&str, &str)] = &[("content-type", "application/json")];

async fn names(server: &Arc<ApiServer>) -> Vec<String> {
    let (code, list) = call(server, Method::GET, APISERVICES).await;
    assert_eq!(code, 200, "{list}");
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

async fn await_names(server: &Arc<ApiServer>, what: &str, pred: impl Fn(&[String]) -> bool) {
    for _ in 0..200 {
        if pred(&names(server).await) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "timed out waiting for {what}; have {:?}",
        names(server).await
    );
}

#[tokio::test]
async fn every_served_group_version_has_a_local_available_api_service() {
    let (_dir, server) = server().await;
    let have = names(&server).await;
    for want in [
        "v1.",
        "v1.apps",
        "v1.batch",
        "v2.autoscaling",
        "v1.rbac.authorization.k8s.io",
        "v1.apiextensions.k8s.io",
        "v1beta1.metrics.k8s.io",
    ] {
        assert!(
            have.iter().any(|n| n == want),
            "{want} missing from {have:?}"
        );
    }
    assert!(
        !have.iter().any(|n| n == "v1.apiregistration.k8s.io"),
        "kube-aggregator lists no APIService for its own group"
    );
    let (code, apps) = call(&server, Method::GET, &format!("{APISERVICES}/v1.apps")).await;
    assert_eq!(code, 200, "{apps}");
    assert_eq!(apps["spec"]["group"], "apps");
    assert_eq!(apps["spec"]["groupPriorityMinimum"], 17800);
    assert_eq!(apps["spec"]["versionPriority"], 15);
    assert!(apps["spec"].get("service").is_none_or(Value::is_null));
    let available = &apps["status"]["conditions"][0];
    assert_eq!(available["type"], "Available");
    assert_eq!(available["status"], "True");
    assert_eq!(available["reason"], "Local");
    // kubectl's table: Local and True.
    let (code, table) = call_with(
        &server,
        Method::GET,
        &format!("{APISERVICES}/v1.apps"),
        &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
        "",
    )
    .await;
    assert_eq!(code, 200, "{table}");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Service", "Available", "Age"]);
    assert_eq!(table["rows"][0]["cells"][1], "Local");
    assert_eq!(table["rows"][0]["cells"][2], "True");
}

#[tokio::test]
async fn a_crd_group_version_is_registered_while_the_crd_is_served() {
    let (_dir, server) = server().await;
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.stable.example.com"},
    "spec": {"group": "stable.example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
            {"name": "v1beta1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}},
        ]}});
    let (code, body) = call_with(
        &server,
        Method::POST,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        JSON,
        &crd.to_string(),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    await_names(&server, "the CRD's APIServices", |n| {
        n.iter().any(|n| n == "v1.stable.example.com")
            && n.iter().any(|n| n == "v1beta1.stable.example.com")
    })
    .await;
    let (_, svc) = call(
        &server,
        Method::GET,
        &format!("{APISERVICES}/v1.stable.example.com"),
    )
    .await;
    assert_eq!(svc["spec"]["groupPriorityMinimum"], 1000);
    assert_eq!(svc["spec"]["versionPriority"], 100);
    assert_eq!(
        svc["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
        "true"
    );
    let (code, body) = call(
        &server,
        Method::DELETE,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.stable.example.com",
    )
    .await;
    assert_eq!(code, 200, "{body}");
    await_names(&server, "the CRD's APIServices to go", |n| {
        !n.iter().any(|n| n.ends_with(".stable.example.com"))
    })
    .await;
    assert!(names(&server).await.iter().any(|n| n == "v1.apps"));
}

#[tokio::test]
async fn an_api_service_from_yaml_is_validated_stored_and_reports_why_it_is_unavailable() {
    let (_dir, server) = server().await;
    let bad = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1.wrong.io"},
        "spec": {"group": "metrics.example.io", "version": "v1", "groupPriorityMinimum": 0, "versionPriority": 10,
                 "service": {"namespace": "kube-system", "name": "metrics", "port": 70000}}});
    let before = names(&server).await;
    let (code, status) =
        call_with(&server, Method::POST, APISERVICES, JSON, &bad.to_string()).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
    let fields = support::cause_fields(&status);
    assert_eq!(
        fields,
        [
            "metadata.name",
            "spec.groupPriorityMinimum",
            "spec.service.port"
        ]
    );
    assert_eq!(
        names(&server).await,
        before,
        "a refused create stores nothing"
    );

    let good = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1.metrics.example.io"},
        "spec": {"group": "metrics.example.io", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10,
                 "insecureSkipTLSVerify": true,
                 "service": {"namespace": "kube-system", "name": "metrics"}}});
    let (code, made) = call_with(&server, Method::POST, APISERVICES, JSON, &good.to_string()).await;
    assert_eq!(code, 201, "{made}");
    assert_eq!(made["spec"]["service"]["port"], 443, "the port defaults");
    let url = format!("{APISERVICES}/v1.metrics.example.io");
    let mut last = Value::Null;
    for _ in 0..200 {
        let (_, got) = call(&server, Method::GET, &url).await;
        last = got["status"]["conditions"][0].clone();
        if last["reason"] == "ServiceNotFound" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(last["type"], "Available");
    assert_eq!(last["status"], "False");
    assert_eq!(last["reason"], "ServiceNotFound", "{last}");
    assert_eq!(
        last["message"],
        "service/metrics in \"kube-system\" is not present"
    );
    // Not proxied: the group is not served.
    let (code, _) = call(&server, Method::GET, "/apis/metrics.example.io/v1").await;
    assert_eq!(code, 404);
}
