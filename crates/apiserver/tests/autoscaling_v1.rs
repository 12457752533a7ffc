//! HorizontalPodAutoscalers are served as `autoscaling/v1` beside `autoscaling/v2` (the
//! preferred, stored version): one object, seen in either version. Regression: `autoscaling/v1`
//! was not served (tools and manifests written for it got 404).

mod support;

use http::Method;
use serde_json::json;
use support::{call, call_with, server};

const JSON: &[(&str, &str)] = &[("content-type", "application/json")];
const V1: &str = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
const V2: &str = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";

#[tokio::test]
async fn an_hpa_written_in_v1_reads_in_v2_and_back() {
    let (_dir, server) = server().await;
    let hpa = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 2, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60}});
    let (code, made) = call_with(&server, Method::POST, V1, JSON, &hpa.to_string()).await;
    assert_eq!(code, 201, "{made}");
    assert_eq!(made["apiVersion"], "autoscaling/v1");
    assert_eq!(made["spec"]["targetCPUUtilizationPercentage"], 60);

    let (code, v2) = call(&server, Method::GET, &format!("{V2}/web")).await;
    assert_eq!(code, 200, "{v2}");
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    assert_eq!(
        v2["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}])
    );
    assert!(v2["spec"].get("targetCPUUtilizationPercentage").is_none());

    // A v2 change with a second metric: v1 keeps it in its annotation and gives it back.
    let mut next = v2.clone();
    next["spec"]["metrics"]
        .as_array_mut()
        .unwrap()
        .insert(0, json!({"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}}));
    let (code, body) = call_with(
        &server,
        Method::PUT,
        &format!("{V2}/web"),
        JSON,
        &next.to_string(),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (_, v1) = call(&server, Method::GET, &format!("{V1}/web")).await;
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60);
    let kept = v1["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"]
        .as_str()
        .unwrap();
    assert!(kept.contains("qps"), "{kept}");
    // Updating through v1 (a label) loses nothing of v2.
    let mut labeled = v1.clone();
    labeled["metadata"]["labels"] = json!({"tier": "web"});
    let (code, body) = call_with(
        &server,
        Method::PUT,
        &format!("{V1}/web"),
        JSON,
        &labeled.to_string(),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (_, v2) = call(&server, Method::GET, &format!("{V2}/web")).await;
    assert_eq!(v2["metadata"]["labels"]["tier"], "web");
    assert_eq!(v2["spec"]["metrics"].as_array().unwrap().len(), 2);
    assert!(
        v2["metadata"]["annotations"]
            .get("autoscaling.alpha.kubernetes.io/metrics")
            .is_none(),
        "{v2}"
    );

    // Lists in either version; discovery prefers v2.
    let (_, list) = call(&server, Method::GET, V1).await;
    assert_eq!(list["items"][0]["apiVersion"], "autoscaling/v1");
    let (_, group) = call(&server, Method::GET, "/apis/autoscaling").await;
    assert_eq!(group["preferredVersion"]["version"], "v2");
}

#[tokio::test]
async fn a_v1_hpa_is_validated_and_defaulted_as_upstream_does() {
    let (_dir, server) = server().await;
    let bad = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 0, "maxReplicas": 5}});
    let (code, status) = call_with(&server, Method::POST, V1, JSON, &bad.to_string()).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["details"]["causes"][0]["field"], "spec.minReplicas");
    let (code, _) = call(&server, Method::GET, &format!("{V1}/web")).await;
    assert_eq!(code, 404, "a refused create stores nothing");
    let plain = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5}});
    let (code, made) = call_with(&server, Method::POST, V1, JSON, &plain.to_string()).await;
    assert_eq!(code, 201, "{made}");
    assert_eq!(made["spec"]["minReplicas"], 1);
    assert_eq!(made["spec"]["targetCPUUtilizationPercentage"], 80);
}
