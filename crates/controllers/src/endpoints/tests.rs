//! Which pods back a service, with what conditions and ports, and how they are grouped into
//! slices and subsets.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Service};
use serde_json::json;

use super::{Conditions, backs, conditions, legacy, resolve_ports, slices};

fn service(extra: serde_json::Value) -> Service {
    let mut v = json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "svc-uid"},
        "spec": {"selector": {"app": "web"}, "ports": [
            {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
            {"name": "metrics", "port": 9090, "targetPort": 9091, "protocol": "TCP"},
        ]},
    });
    if let Some(spec) = extra.as_object() {
        for (k, val) in spec {
            v["spec"][k] = val.clone();
        }
    }
    serde_json::from_value(v).unwrap()
}

fn pod(name: &str, ip: &str, ready: bool) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("{name}-uid"), "labels": {"app": "web"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "x", "ports": [
            {"name": "http", "containerPort": 8080},
        ]}]},
        "status": {"phase": "Running", "podIP": ip, "conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" }},
        ]},
    }))
    .unwrap()
}

fn terminating(mut p: Pod) -> Pod {
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    p
}

#[test]
fn named_target_ports_resolve_through_container_ports_and_numbers_pass_through() {
    let ports = resolve_ports(&service(json!({})), &pod("a", "10.0.0.1", true));
    let got: Vec<(&str, i32)> = ports.iter().map(|p| (p.name.as_str(), p.port)).collect();
    assert_eq!(got, vec![("http", 8080), ("metrics", 9091)]);
    let mut other = pod("b", "10.0.0.2", true);
    other.spec.as_mut().unwrap().containers[0].ports = None;
    let got: Vec<i32> = resolve_ports(&service(json!({})), &other)
        .iter()
        .map(|p| p.port)
        .collect();
    assert_eq!(got, vec![9091]);
}

#[test]
fn terminating_pods_are_not_ready_but_keep_serving_unless_not_ready_addresses_are_published() {
    let svc = service(json!({}));
    let t = terminating(pod("a", "10.0.0.1", true));
    assert_eq!(
        conditions(&svc, &t),
        Conditions {
            ready: false,
            serving: true,
            terminating: true
        }
    );
    assert!(backs(&t, true) && !backs(&t, false));
    let publish = service(json!({"publishNotReadyAddresses": true}));
    let unready = pod("b", "10.0.0.2", false);
    assert_eq!(
        conditions(&publish, &unready),
        Conditions {
            ready: true,
            serving: false,
            terminating: false
        }
    );
}

#[test]
fn pods_without_an_ip_or_finished_do_not_back_a_service() {
    let mut no_ip = pod("a", "", true);
    no_ip.status.as_mut().unwrap().pod_ip = None;
    assert!(!backs(&no_ip, true));
    let mut done = pod("b", "10.0.0.2", true);
    done.status.as_mut().unwrap().phase = Some("Succeeded".into());
    assert!(!backs(&done, true));
}

#[test]
fn slices_hold_at_most_100_endpoints_and_group_pods_by_their_ports() {
    let svc = service(json!({}));
    let mut pods: Vec<Arc<Pod>> = (0..150)
        .map(|i| {
            Arc::new(pod(
                &format!("p{i:03}"),
                &format!("10.0.{}.{}", i / 200, i % 200 + 1),
                true,
            ))
        })
        .collect();
    let mut odd = pod("zz", "10.1.0.1", false);
    odd.spec.as_mut().unwrap().containers[0].ports = None;
    pods.push(Arc::new(odd));
    let got = slices::desired(&svc, &pods, |_| Some("zone-a".into()));
    let sizes: Vec<usize> = got.iter().map(|d| d.endpoints.len()).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 151);
    assert!(sizes.iter().all(|n| *n <= slices::MAX_ENDPOINTS_PER_SLICE));
    assert_eq!(got.len(), 3);
    let lone = got.iter().find(|d| d.endpoints.len() == 1).unwrap();
    assert_eq!(lone.ports.len(), 1);
    let ep = &lone.endpoints[0];
    assert_eq!(ep.conditions.as_ref().unwrap().ready, Some(false));
    assert_eq!(ep.zone.as_deref(), Some("zone-a"));
    assert_eq!(ep.node_name.as_deref(), Some("node-1"));
    assert_eq!(ep.target_ref.as_ref().unwrap().name.as_deref(), Some("zz"));
}

#[test]
fn a_service_selecting_nothing_gets_one_empty_placeholder_slice() {
    let got = slices::desired(&service(json!({})), &[], |_| None);
    assert_eq!(got.len(), 1);
    assert!(got[0].endpoints.is_empty() && got[0].ports.is_empty());
}

#[test]
fn endpoints_split_ready_and_not_ready_addresses_and_drop_terminating_pods() {
    let svc = service(json!({}));
    let pods = vec![
        Arc::new(pod("a", "10.0.0.2", true)),
        Arc::new(pod("b", "10.0.0.1", false)),
        Arc::new(terminating(pod("c", "10.0.0.3", true))),
    ];
    let subsets = legacy::subsets(&svc, &pods);
    assert_eq!(subsets.len(), 1);
    let ips = |v: &Option<Vec<k8s_openapi::api::core::v1::EndpointAddress>>| -> Vec<String> {
        v.iter().flatten().map(|a| a.ip.clone()).collect()
    };
    assert_eq!(ips(&subsets[0].addresses), vec!["10.0.0.2"]);
    assert_eq!(ips(&subsets[0].not_ready_addresses), vec!["10.0.0.1"]);
    let ports: Vec<i32> = subsets[0].ports.iter().flatten().map(|p| p.port).collect();
    assert_eq!(ports, vec![8080, 9091]);
}
