//! ValidatingAdmissionPolicies through the API server: a policy with a parameter and a binding
//! denies, warns or lets pass as its validation actions say, with upstream's messages and
//! codes; variables, match conditions and resource names shape what is judged; a missing
//! parameter follows the failure policy; one cluster's policies never judge another's.

mod support;

use std::sync::Arc;

use apiserver::server::{ApiServer, Caller};
use bytes::Bytes;
use controlplane::auth::{UserExt, UserInfo};
use http::{Method, Request};
use http_body_util::BodyExt;
use serde_json::{Value, json};

const VAPS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// A request's code, body and `Warning` headers.
async fn send(
    server: &Arc<ApiServer>,
    method: Method,
    uri: &str,
    body: &Value,
) -> (u16, Value, Vec<String>) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Bytes::from(body.to_string()))
        .unwrap();
    let resp = server
        .handle(req, Caller::Internal(UserInfo::system()))
        .await;
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        code,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        warnings,
    )
}

async fn create(server: &Arc<ApiServer>, uri: &str, body: Value) {
    let (code, body, _) = send(server, Method::POST, uri, &body).await;
    assert_eq!(code, 201, "{uri}: {body}");
}

fn deployment(name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
}

/// A policy limiting Deployment replicas to the `maxReplicas` of a ConfigMap parameter.
fn replica_limit(failure: &str) -> Value {
    json!({"metadata": {"name": "replica-limit"}, "spec": {
    "failurePolicy": failure,
    "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
    "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
    "variables": [{"name": "max", "expression": "int(params.data.maxReplicas)"}],
    "validations": [
        {"expression": "object.spec.replicas <= variables.max",
         "messageExpression": "'replicas ' + string(object.spec.replicas) + ' exceed ' + string(variables.max)",
         "reason": "Forbidden"},
        {"expression": "object.metadata.name != 'forbidden-name'"}
    ]}})
}

fn binding(name: &str, actions: &[&str], param: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"policyName": "replica-limit",
        "validationActions": actions,
        "paramRef": {"name": param, "parameterNotFoundAction": "Deny"}}})
}

async fn limits(server: &Arc<ApiServer>, max: &str) {
    create(
        server,
        CMS,
        json!({"metadata": {"name": "limits"}, "data": {"maxReplicas": max}}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_with_a_parameter_denies_with_its_message_and_reason() {
    let (_dir, server) = support::server().await;
    limits(&server, "3").await;
    create(&server, VAPS, replica_limit("Fail")).await;
    create(
        &server,
        BINDINGS,
        binding("limit-deny", &["Deny"], "limits"),
    )
    .await;
    let (code, body, _) = send(&server, Method::POST, DEPLOYS, &deployment("big", 5)).await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(body["reason"], "Forbidden");
    let expected = "ValidatingAdmissionPolicy 'replica-limit' with binding 'limit-deny' denied request: replicas 5 exceed 3";
    assert_eq!(
        body["message"],
        format!("deployments.apps \"big\" is forbidden: {expected}")
    );
    assert_eq!(body["details"]["causes"][0]["message"], expected);
    let (code, body, _) = send(&server, Method::POST, DEPLOYS, &deployment("small", 2)).await;
    assert_eq!(code, 201, "{body}");
    // The default message and reason (Invalid, 422) of a validation without either.
    let (code, body, _) = send(
        &server,
        Method::POST,
        DEPLOYS,
        &deployment("forbidden-name", 1),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(body["reason"], "Invalid");
    assert!(
        body["message"].as_str().unwrap().ends_with(
            "denied request: failed expression: object.metadata.name != 'forbidden-name'"
        ),
        "{body}"
    );
    // Updates are judged too.
    let mut scaled = deployment("small", 9);
    scaled["metadata"]["resourceVersion"] = json!("0");
    let (code, body, _) = send(&server, Method::PUT, &format!("{DEPLOYS}/small"), &scaled).await;
    assert_eq!(code, 403, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warn_binding_lets_the_request_pass_with_a_warning() {
    let (_dir, server) = support::server().await;
    limits(&server, "3").await;
    create(&server, VAPS, replica_limit("Fail")).await;
    create(
        &server,
        BINDINGS,
        binding("limit-warn", &["Warn", "Audit"], "limits"),
    )
    .await;
    let (code, body, warnings) = send(&server, Method::POST, DEPLOYS, &deployment("big", 5)).await;
    assert_eq!(code, 201, "{body}");
    assert!(
        warnings.iter().any(|w| w.contains(
            "Validation failed for ValidatingAdmissionPolicy 'replica-limit' with binding 'limit-warn': replicas 5 exceed 3"
        )),
        "{warnings:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_parameter_follows_the_failure_policy() {
    let (_dir, server) = support::server().await;
    create(&server, VAPS, replica_limit("Fail")).await;
    create(
        &server,
        BINDINGS,
        binding("limit-deny", &["Deny"], "absent"),
    )
    .await;
    let (code, body, _) = send(&server, Method::POST, DEPLOYS, &deployment("a", 1)).await;
    assert_eq!(code, 422, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("no params found"),
        "{body}"
    );
    let mut ignoring = replica_limit("Ignore");
    let (_, current, _) = send(
        &server,
        Method::GET,
        &format!("{VAPS}/replica-limit"),
        &Value::Null,
    )
    .await;
    ignoring["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    let (code, body, _) = send(
        &server,
        Method::PUT,
        &format!("{VAPS}/replica-limit"),
        &ignoring,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (code, body, _) = send(&server, Method::POST, DEPLOYS, &deployment("a", 1)).await;
    assert_eq!(code, 201, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn match_conditions_resource_names_and_exclusions_limit_what_is_judged() {
    let (_dir, server) = support::server().await;
    create(
        &server,
        VAPS,
        json!({"metadata": {"name": "no-data"}, "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": ["configmaps"], "resourceNames": ["guarded", "excluded", "skipped"]}],
                "excludeResourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": ["configmaps"], "resourceNames": ["excluded"]}]},
            "matchConditions": [{"name": "not-skipped", "expression": "object.metadata.name != 'skipped'"}],
            "validations": [{"expression": "!has(object.data)", "message": "no data allowed"}]}}),
    )
    .await;
    create(
        &server,
        BINDINGS,
        json!({"metadata": {"name": "no-data"}, "spec": {"policyName": "no-data", "validationActions": ["Deny"]}}),
    )
    .await;
    let cm = |name: &str| json!({"metadata": {"name": name}, "data": {"k": "v"}});
    let (code, body, _) = send(&server, Method::POST, CMS, &cm("guarded")).await;
    assert_eq!(code, 422, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .ends_with("denied request: no data allowed")
    );
    for free in ["excluded", "skipped", "other"] {
        let (code, body, _) = send(&server, Method::POST, CMS, &cm(free)).await;
        assert_eq!(code, 201, "{free}: {body}");
    }
}
