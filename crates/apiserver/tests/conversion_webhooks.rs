//! CRD conversion webhooks: a CRD with two versions and `conversion.strategy: Webhook`
//! serves both; objects are stored in the storage version and every read, list and watch
//! converts them through the webhook; a failed conversion is refused as upstream does.

mod support;

use std::sync::Arc;
use std::time::Duration;

use apiserver::server::ApiServer;
use http::Method;
use serde_json::{Value, json};
use support::webhook::{self, HookServer};
use support::{call, call_with};

const V1: &str = "/apis/example.com/v1/namespaces/default/gauges";
const V2: &str = "/apis/example.com/v2/namespaces/default/gauges";

/// Converts gauges between v1 (`spec.count`) and v2 (`spec.amount`); refuses an amount of 13.
async fn converter() -> HookServer {
    webhook::start(|_, req| {
        let desired = req["desiredAPIVersion"].as_str().unwrap_or("").to_string();
        let mut out = Vec::new();
        for o in req["objects"].as_array().cloned().unwrap_or_default() {
            let mut o = o;
            let spec = o["spec"].as_object().cloned().unwrap_or_default();
            let n = spec
                .get("count")
                .or(spec.get("amount"))
                .cloned()
                .unwrap_or(Value::Null);
            if n == json!(13) {
                return json!({"result": {"status": "Failure", "message": "unlucky"}});
            }
            o["spec"] = if desired.ends_with("/v1") {
                json!({"count": n})
            } else {
                json!({"amount": n})
            };
            o["apiVersion"] = json!(desired);
            out.push(o);
        }
        json!({"convertedObjects": out, "result": {"status": "Success"}})
    })
    .await
}

fn version(name: &str, storage: bool, field: &str) -> Value {
    json!({"name": name, "served": true, "storage": storage, "schema": {"openAPIV3Schema": {
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {field: {"type": "integer"}}}}}}})
}

async fn gauges(server: &Arc<ApiServer>, hs: &HookServer) {
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gauges.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gauges", "singular": "gauge", "kind": "Gauge", "listKind": "GaugeList"},
            "versions": [version("v1", true, "count"), version("v2", false, "amount")],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": hs.url("/convert"), "caBundle": hs.ca_bundle}}}}});
    let (code, body) = call_with(
        server,
        Method::POST,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &[("content-type", "application/json")],
        &crd.to_string(),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while call(server, Method::GET, V2).await.0 != 200 {
        assert!(tokio::time::Instant::now() < deadline, "v2 never served");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn post(server: &Arc<ApiServer>, uri: &str, body: Value) -> (u16, Value) {
    call_with(
        server,
        Method::POST,
        uri,
        &[("content-type", "application/json")],
        &body.to_string(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_versions_are_served_through_the_conversion_webhook() {
    let (_dir, server) = support::server().await;
    let hs = converter().await;
    gauges(&server, &hs).await;
    let (code, created) = post(
        &server,
        V2,
        json!({"apiVersion": "example.com/v2", "kind": "Gauge", "metadata": {"name": "g"}, "spec": {"amount": 3}}),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["apiVersion"], "example.com/v2");
    assert_eq!(created["spec"], json!({"amount": 3}));
    let stored = hs.requests("/convert");
    assert_eq!(
        stored[0]["desiredAPIVersion"], "example.com/v1",
        "written in the storage version"
    );
    let (_, v1) = call(&server, Method::GET, &format!("{V1}/g")).await;
    assert_eq!(
        (v1["apiVersion"].clone(), v1["spec"].clone()),
        (json!("example.com/v1"), json!({"count": 3}))
    );
    let (_, v2) = call(&server, Method::GET, &format!("{V2}/g")).await;
    assert_eq!(
        (v2["apiVersion"].clone(), v2["spec"].clone()),
        (json!("example.com/v2"), json!({"amount": 3}))
    );
    assert_eq!(v2["metadata"]["uid"], v1["metadata"]["uid"]);
    let (_, list) = call(&server, Method::GET, V2).await;
    assert_eq!(list["items"][0]["spec"], json!({"amount": 3}));
    // A patch in v2 is applied to the v2 form and stored as v1.
    let (code, patched) = call_with(
        &server,
        Method::PATCH,
        &format!("{V2}/g"),
        &[("content-type", "application/merge-patch+json")],
        r#"{"spec": {"amount": 4}}"#,
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["spec"], json!({"amount": 4}));
    let (_, v1) = call(&server, Method::GET, &format!("{V1}/g")).await;
    assert_eq!(v1["spec"], json!({"count": 4}));
    // A failed conversion refuses the write and stores nothing.
    let (code, body) = post(
        &server,
        V2,
        json!({"apiVersion": "example.com/v2", "kind": "Gauge", "metadata": {"name": "bad"}, "spec": {"amount": 13}}),
    )
    .await;
    assert_eq!(code, 500, "{body}");
    assert_eq!(
        body["message"],
        "Internal error occurred: conversion webhook for example.com/v2, Kind=Gauge failed: unlucky"
    );
    let (code, _) = call(&server, Method::GET, &format!("{V1}/bad")).await;
    assert_eq!(code, 404);
    // A watch through v2 sends v2 objects.
    let req = http::Request::builder()
        .uri(format!("{V2}?watch=1&timeoutSeconds=1"))
        .body(bytes::Bytes::new())
        .unwrap();
    use controlplane::auth::{UserExt, UserInfo};
    use http_body_util::BodyExt;
    let resp = server
        .handle(req, apiserver::server::Caller::Internal(UserInfo::system()))
        .await;
    let text = resp.into_body().collect().await.unwrap().to_bytes();
    let first: Value = serde_json::from_slice(text.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["apiVersion"], "example.com/v2");
    assert_eq!(first["object"]["spec"], json!({"amount": 4}));
    // Deleting through v2 answers with the v2 form.
    let (code, deleted) = call(&server, Method::DELETE, &format!("{V2}/g")).await;
    assert_eq!(code, 200, "{deleted}");
    assert_eq!(deleted["spec"], json!({"amount": 4}));
}
