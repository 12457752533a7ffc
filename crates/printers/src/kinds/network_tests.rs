//! Networking printer cases, as `kubectl get svc,ep,endpointslices,ing,netpol` prints them.

use serde_json::{Value, json};

use super::*;
use crate::kinds::testutil::{ago, cells, default_names};

fn svc(spec: Value, status: Value) -> Value {
    json!({"metadata": {"name": "web", "creationTimestamp": ago(120)}, "spec": spec, "status": status})
}

#[test]
fn cluster_ip_service_prints_ports_and_no_external_ip() {
    let s = svc(
        json!({"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
            "selector": {"k8s-app": "kube-dns"},
            "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]}),
        json!({}),
    );
    assert_eq!(
        default_names(&SERVICE),
        [
            "Name",
            "Type",
            "Cluster-IP",
            "External-IP",
            "Port(s)",
            "Age"
        ]
    );
    assert_eq!(
        cells(&SERVICE, &s),
        vec![
            json!("web"),
            json!("ClusterIP"),
            json!("10.96.0.10"),
            json!("<none>"),
            json!("53/UDP,53/TCP"),
            json!("2m"),
            json!("k8s-app=kube-dns")
        ]
    );
}

#[test]
fn node_port_and_headless_services() {
    let np = svc(
        json!({"type": "NodePort", "clusterIPs": ["10.96.1.2"], "externalIPs": ["192.0.2.7"],
            "ports": [{"port": 80, "nodePort": 30080}, {"port": 443, "nodePort": 30443, "protocol": "TCP"}]}),
        json!({}),
    );
    assert_eq!(
        cells(&SERVICE, &np)[2..5],
        [
            json!("10.96.1.2"),
            json!("192.0.2.7"),
            json!("80:30080/TCP,443:30443/TCP")
        ]
    );
    let headless = svc(json!({"clusterIP": "None"}), json!({}));
    assert_eq!(
        cells(&SERVICE, &headless)[1..5],
        [
            json!("ClusterIP"),
            json!("None"),
            json!("<none>"),
            json!("<none>")
        ]
    );
}

#[test]
fn load_balancer_is_pending_until_it_has_an_address() {
    let mut lb = svc(
        json!({"type": "LoadBalancer", "clusterIPs": ["10.96.3.4"], "ports": [{"port": 80, "nodePort": 31000}]}),
        json!({}),
    );
    assert_eq!(cells(&SERVICE, &lb)[3], json!("<pending>"));
    lb["status"] = json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}, {"hostname": "lb.example.com"}, {"ip": "203.0.113.9"}]}});
    assert_eq!(cells(&SERVICE, &lb)[3], json!("203.0.113.9,lb.example.com"));
    lb["spec"]["externalIPs"] = json!(["198.51.100.1"]);
    assert_eq!(
        cells(&SERVICE, &lb)[3],
        json!("203.0.113.9,lb.example.com,198.51.100.1")
    );
}

#[test]
fn external_name_service_shows_the_name_and_no_ports() {
    let s = svc(
        json!({"type": "ExternalName", "externalName": "db.example.com"}),
        json!({}),
    );
    assert_eq!(
        cells(&SERVICE, &s)[2..5],
        [json!("<none>"), json!("db.example.com"), json!("<none>")]
    );
}

#[test]
fn endpoints_list_the_first_three_addresses() {
    let ep = json!({"metadata": {"name": "web"}, "subsets": [
        {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 8080}, {"port": 9090}]}
    ]});
    assert_eq!(
        cells(&ENDPOINTS, &ep)[1],
        json!("10.0.0.1:8080,10.0.0.2:8080,10.0.0.1:9090 + 1 more...")
    );
    let v6 = json!({"metadata": {"name": "v6"}, "subsets": [{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 80}]}]});
    assert_eq!(cells(&ENDPOINTS, &v6)[1], json!("[fd00::1]:80"));
    let headless =
        json!({"metadata": {"name": "h"}, "subsets": [{"addresses": [{"ip": "10.0.0.9"}]}]});
    assert_eq!(cells(&ENDPOINTS, &headless)[1], json!("10.0.0.9"));
    assert_eq!(
        cells(&ENDPOINTS, &json!({"metadata": {"name": "e"}}))[1],
        json!("<none>")
    );
    let not_ready = json!({"metadata": {"name": "n"}, "subsets": [{"notReadyAddresses": [{"ip": "10.0.0.3"}], "ports": [{"port": 80}]}]});
    assert_eq!(cells(&ENDPOINTS, &not_ready)[1], json!(""));
}

#[test]
fn endpoint_slice_prints_ports_and_addresses() {
    let es = json!({
        "metadata": {"name": "web-abc12", "creationTimestamp": ago(30)},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 80}, {"name": "metrics"}],
        "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2", "10.0.0.3"]}, {"addresses": ["10.0.0.4"]}]
    });
    assert_eq!(
        cells(&ENDPOINT_SLICE, &es),
        vec![
            json!("web-abc12"),
            json!("IPv4"),
            json!("80,metrics"),
            json!("10.0.0.1,10.0.0.2,10.0.0.3 + 1 more..."),
            json!("30s")
        ]
    );
    let empty = json!({"metadata": {"name": "e"}, "addressType": "IPv6"});
    assert_eq!(
        cells(&ENDPOINT_SLICE, &empty)[2..4],
        [json!("<unset>"), json!("<unset>")]
    );
}

#[test]
fn ingress_prints_class_hosts_address_and_ports() {
    let ing = json!({
        "metadata": {"name": "web", "creationTimestamp": ago(3600 * 5)},
        "spec": {"ingressClassName": "nginx", "tls": [{"hosts": ["a.example.com"]}],
            "rules": [{"host": "a.example.com"}, {"host": "b.example.com"}, {}, {"host": "c.example.com"}, {"host": "d.example.com"}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}
    });
    assert_eq!(
        cells(&INGRESS, &ing),
        vec![
            json!("web"),
            json!("nginx"),
            json!("a.example.com,b.example.com,c.example.com + 2 more..."),
            json!("192.0.2.10"),
            json!("80, 443"),
            json!("5h")
        ]
    );
    let bare = json!({"metadata": {"name": "x"}, "spec": {}});
    assert_eq!(
        cells(&INGRESS, &bare)[1..5],
        [json!("<none>"), json!("*"), json!(""), json!("80")]
    );
}

#[test]
fn ingress_class_and_network_policy() {
    let ic = json!({"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx",
        "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "external-lb"}}});
    assert_eq!(
        cells(&INGRESS_CLASS, &ic)[1..3],
        [
            json!("k8s.io/ingress-nginx"),
            json!("IngressParameters.k8s.example.com/external-lb")
        ]
    );
    let np = json!({"metadata": {"name": "deny"}, "spec": {"podSelector": {}}});
    assert_eq!(cells(&NETWORK_POLICY, &np)[1], json!("<none>"));
    let np = json!({"metadata": {"name": "db"}, "spec": {"podSelector": {"matchLabels": {"role": "db"}}}});
    assert_eq!(cells(&NETWORK_POLICY, &np)[1], json!("role=db"));
}
