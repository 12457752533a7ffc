//! `flowcontrol.apiserver.k8s.io/v1` is served: every cluster has the mandatory `exempt` and
//! `catch-all` FlowSchemas and PriorityLevelConfigurations, new ones are defaulted and
//! validated as upstream does, and the mandatory specs cannot be changed. Regression: the
//! group was not served (`kubectl get flowschemas` failed).

mod support;

use http::Method;
use serde_json::{Value, json};
use support::{call, call_with, server};

const JSON: &[(&str, &str)] = &[("content-type", "application/json")];
const FS: &str = "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas";
const PL: &str = "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations";

fn names(list: &Value) -> Vec<String> {
    let mut n: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    n.sort();
    n
}

#[tokio::test]
async fn every_cluster_has_the_mandatory_flow_schemas_and_priority_levels() {
    let (_dir, server) = server().await;
    let (code, list) = call(&server, Method::GET, FS).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(names(&list), ["catch-all", "exempt"]);
    let (_, pls) = call(&server, Method::GET, PL).await;
    assert_eq!(names(&pls), ["catch-all", "exempt"]);
    let (_, exempt) = call(&server, Method::GET, &format!("{FS}/exempt")).await;
    assert_eq!(exempt["spec"]["matchingPrecedence"], 1);
    assert_eq!(
        exempt["spec"]["rules"][0]["subjects"][0]["group"]["name"],
        "system:masters"
    );
    // The mandatory specs are fixed.
    let mut changed = exempt.clone();
    changed["spec"]["matchingPrecedence"] = json!(2);
    let (code, status) = call_with(
        &server,
        Method::PUT,
        &format!("{FS}/exempt"),
        JSON,
        &changed.to_string(),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("spec of 'exempt' must equal the fixed value"),
        "{status}"
    );
    // The discovery document lists the group.
    let (code, group) = call(&server, Method::GET, "/apis/flowcontrol.apiserver.k8s.io").await;
    assert_eq!(code, 200, "{group}");
    assert_eq!(group["preferredVersion"]["version"], "v1");
}

#[tokio::test]
async fn a_new_priority_level_and_flow_schema_are_defaulted_and_validated() {
    let (_dir, server) = server().await;
    let pl = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "batch"},
        "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}});
    let (code, made) = call_with(&server, Method::POST, PL, JSON, &pl.to_string()).await;
    assert_eq!(code, 201, "{made}");
    assert_eq!(made["spec"]["limited"]["nominalConcurrencyShares"], 30);
    assert_eq!(
        made["spec"]["limited"]["limitResponse"]["queuing"]["queues"],
        64
    );
    let fs = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": "batch-jobs"},
        "spec": {"priorityLevelConfiguration": {"name": "batch"},
            "rules": [{"subjects": [{"kind": "ServiceAccount", "serviceAccount": {"name": "runner", "namespace": "ci"}}],
                       "resourceRules": [{"verbs": ["create"], "apiGroups": ["batch"], "resources": ["jobs"], "namespaces": ["ci"]}]}]}});
    let (code, made) = call_with(&server, Method::POST, FS, JSON, &fs.to_string()).await;
    assert_eq!(code, 201, "{made}");
    assert_eq!(made["spec"]["matchingPrecedence"], 1000);

    let bad = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": "bad"},
        "spec": {"matchingPrecedence": 20000, "priorityLevelConfiguration": {"name": ""},
            "rules": [{"subjects": [], "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}]}});
    let (code, status) = call_with(&server, Method::POST, FS, JSON, &bad.to_string()).await;
    assert_eq!(code, 422, "{status}");
    let fields = support::cause_fields(&status);
    assert_eq!(
        fields,
        [
            "spec.matchingPrecedence",
            "spec.priorityLevelConfiguration.name",
            "spec.rules[0].subjects",
            "spec.rules[0].resourceRules[0].namespaces"
        ]
    );
    let (code, _) = call(&server, Method::GET, &format!("{FS}/bad")).await;
    assert_eq!(code, 404, "a refused create stores nothing");
}
