//! Unit tests of quota evaluation.

use std::collections::BTreeSet;

use serde_json::json;

use super::*;

fn pod(containers: Value) -> Value {
    json!({"metadata": {"name": "p"}, "spec": {"containers": containers}})
}

#[test]
fn pod_usage_sums_containers_and_counts_the_pod() {
    let p = pod(json!([
        {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1"}}},
        {"name": "b", "resources": {"requests": {"cpu": "1500m"}}},
    ]));
    let u = usage("", "pods", &p, 0);
    assert_eq!(
        pretty(&u),
        "count/pods=1,cpu=2,limits.cpu=1,memory=1Gi,pods=1,requests.cpu=2,requests.memory=1Gi"
    );
}

#[test]
fn init_containers_raise_requests_to_their_maximum() {
    let mut p = pod(json!([{"name": "a", "resources": {"requests": {"cpu": "1"}}}]));
    p["spec"]["initContainers"] = json!([{"name": "i", "resources": {"requests": {"cpu": "3"}}}]);
    assert_eq!(
        usage("", "pods", &p, 0)
            .get("requests.cpu")
            .map(|q| q.to_string()),
        Some("3".into())
    );
}

#[test]
fn terminal_pods_count_as_objects_only() {
    let mut p = pod(json!([{"name": "a", "resources": {"requests": {"cpu": "1"}}}]));
    p["status"] = json!({"phase": "Succeeded"});
    assert_eq!(pretty(&usage("", "pods", &p, 0)), "count/pods=1");
}

#[test]
fn constraints_name_every_missing_resource_and_container() {
    let p = pod(json!([
        {"name": "c", "resources": {}},
        {"name": "d", "resources": {"requests": {"cpu": "1"}}},
    ]));
    let req: BTreeSet<String> = ["limits.cpu", "requests.cpu", "pods"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        pod_constraints(&req, &p),
        Err("must specify limits.cpu for: c,d; requests.cpu for: c".into())
    );
}

#[test]
fn services_charge_load_balancers_and_node_ports() {
    let s = json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 1}, {"port": 2}]}});
    assert_eq!(
        pretty(&usage("", "services", &s, 0)),
        "count/services=1,services=1,services.loadbalancers=1,services.nodeports=2"
    );
}

#[test]
fn claims_charge_storage_per_class() {
    let c = json!({"spec": {"storageClassName": "fast", "resources": {"requests": {"storage": "5Gi"}}}});
    let u = usage("", "persistentvolumeclaims", &c, 0);
    assert_eq!(
        u.get("fast.storageclass.storage.k8s.io/requests.storage")
            .map(|q| q.to_string()),
        Some("5Gi".into())
    );
    assert!(charges("", "persistentvolumeclaims", "requests.storage"));
}

#[test]
fn grouped_resources_are_counted_by_count_names() {
    assert_eq!(
        pretty(&usage("apps", "deployments", &json!({}), 0)),
        "count/deployments.apps=1"
    );
    assert!(charges("apps", "deployments", "count/deployments.apps"));
    assert!(!charges("apps", "deployments", "pods"));
    assert_eq!(
        source_of("count/deployments.apps"),
        Some(("apps".into(), "deployments".into()))
    );
    assert_eq!(
        source_of("requests.memory"),
        Some((String::new(), "pods".into()))
    );
}

#[test]
fn best_effort_scope_selects_pods_without_resources() {
    let q = json!({"spec": {"scopes": ["BestEffort"]}});
    assert!(scopes_match(&q, "", "pods", &pod(json!([{"name": "a"}]))));
    let p = pod(json!([{"name": "a", "resources": {"requests": {"cpu": "1"}}}]));
    assert!(!scopes_match(&q, "", "pods", &p));
    assert!(!scopes_match(&q, "", "configmaps", &json!({})));
}
