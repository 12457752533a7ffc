//! Policy semantics: isolation, peers, ports, named ports and `ipBlock` arithmetic.

use super::*;

fn pod(ns: &str, name: &str, node: &str, ip: &str, labels: &[(&str, &str)]) -> PodInfo {
    PodInfo {
        namespace: ns.into(),
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ip: Some(ip.parse().unwrap()),
        node: Some(node.into()),
        ports: vec![NamedPort {
            name: "http".into(),
            protocol: Protocol::Tcp,
            port: 8080,
        }],
    }
}

fn policy(json: serde_json::Value) -> Policy {
    Policy::from_policy(&serde_json::from_value(json).expect("a NetworkPolicy"))
}

fn cluster(pods: Vec<PodInfo>, policies: Vec<Policy>) -> Cluster {
    let mut c = Cluster::default();
    for p in pods {
        c.namespaces.entry(p.namespace.clone()).or_insert_with(|| {
            BTreeMap::from([(NAMESPACE_NAME_LABEL.to_string(), p.namespace.clone())])
        });
        c.pods.insert((p.namespace.clone(), p.name.clone()), p);
    }
    for p in policies {
        c.policies.insert((p.namespace.clone(), p.name.clone()), p);
    }
    c
}

#[test]
fn pods_no_policy_selects_are_not_isolated() {
    let c = cluster(
        vec![pod("a", "web", "n1", "10.244.1.5", &[("app", "web")])],
        vec![policy(serde_json::json!({
            "metadata": {"namespace": "a", "name": "other"},
            "spec": {"podSelector": {"matchLabels": {"app": "db"}}}
        }))],
    );
    let d = compile(&c, "n1");
    assert!(d.ingress.is_empty() && d.egress.is_empty() && d.chains.is_empty());
}

#[test]
fn an_empty_ingress_policy_denies_all_ingress_but_not_egress() {
    let c = cluster(
        vec![pod("a", "web", "n1", "10.244.1.5", &[("app", "web")])],
        vec![policy(serde_json::json!({
            "metadata": {"namespace": "a", "name": "deny"},
            "spec": {"podSelector": {}}
        }))],
    );
    let d = compile(&c, "n1");
    let chain = d
        .ingress
        .get(&"10.244.1.5".parse().unwrap())
        .expect("isolated");
    assert_eq!(d.chains[chain], vec!["drop".to_string()]);
    assert!(d.egress.is_empty(), "policyTypes default to Ingress only");
}

#[test]
fn a_namespace_selector_admits_every_pod_of_matching_namespaces_on_a_named_port() {
    let mut c = cluster(
        vec![
            pod("a", "web", "n1", "10.244.1.5", &[("app", "web")]),
            pod("b", "client", "n2", "10.244.2.7", &[]),
            pod("c", "other", "n2", "10.244.2.8", &[]),
        ],
        vec![policy(serde_json::json!({
            "metadata": {"namespace": "a", "name": "from-b"},
            "spec": {"podSelector": {"matchLabels": {"app": "web"}},
                     "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "b"}}}],
                                  "ports": [{"port": "http"}, {"port": "nope"}]}]}
        }))],
    );
    let d = compile(&c, "n1");
    let chain = &d.ingress[&"10.244.1.5".parse().unwrap()];
    let rules = &d.chains[chain];
    assert_eq!(rules.len(), 2, "{rules:?}");
    assert!(
        rules[0].contains("meta l4proto tcp th dport { 8080 } return"),
        "{rules:?}"
    );
    let set = rules[0]
        .split('@')
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    assert_eq!(d.peer_sets[set], BTreeSet::from(["10.244.2.7".to_string()]));
    // A pod arriving in namespace b joins the set; nothing else changes.
    c.pods.insert(
        ("b".into(), "late".into()),
        pod("b", "late", "n3", "10.244.3.2", &[]),
    );
    let d2 = compile(&c, "n1");
    assert_eq!(d2.chains, d.chains);
    assert_eq!(d2.peer_sets[set].len(), 2);
}

#[test]
fn pod_and_namespace_selectors_in_one_peer_both_apply() {
    let c = cluster(
        vec![
            pod("a", "web", "n1", "10.244.1.5", &[("app", "web")]),
            pod("b", "x", "n2", "10.244.2.7", &[("role", "client")]),
            pod("b", "y", "n2", "10.244.2.8", &[]),
            pod("a", "z", "n2", "10.244.2.9", &[("role", "client")]),
        ],
        vec![policy(serde_json::json!({
            "metadata": {"namespace": "a", "name": "p"},
            "spec": {"podSelector": {},
                     "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "b"}},
                                            "podSelector": {"matchLabels": {"role": "client"}}}]}]}
        }))],
    );
    let d = compile(&c, "n1");
    let (_, set) = d.peer_sets.iter().next().expect("one set");
    assert_eq!(set, &BTreeSet::from(["10.244.2.7".to_string()]));
}

#[test]
fn egress_with_ip_blocks_ranges_and_named_ports_per_destination() {
    let mut dst = pod("b", "api", "n2", "10.244.2.7", &[("app", "api")]);
    dst.ports[0].port = 9090;
    let c = cluster(
        vec![pod("a", "web", "n1", "10.244.1.5", &[("app", "web")]), dst],
        vec![policy(serde_json::json!({
            "metadata": {"namespace": "a", "name": "out"},
            "spec": {"podSelector": {}, "policyTypes": ["Egress"],
                     "egress": [
                        {"to": [{"ipBlock": {"cidr": "192.0.2.0/24", "except": ["192.0.2.128/25", "192.0.2.5/32"]}}],
                         "ports": [{"protocol": "UDP", "port": 5000, "endPort": 5010}]},
                        {"to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "api"}}}],
                         "ports": [{"port": "http"}]}
                     ]}
        }))],
    );
    let d = compile(&c, "n1");
    assert!(d.ingress.is_empty(), "Egress only");
    let chain = &d.egress[&"10.244.1.5".parse().unwrap()];
    let rules = &d.chains[chain];
    assert_eq!(rules.len(), 3, "{rules:?}");
    assert!(rules[0].starts_with("ip daddr @peers-"), "{rules:?}");
    assert!(rules[0].ends_with("meta l4proto udp th dport { 5000-5010 } return"));
    let block = d
        .peer_sets
        .values()
        .find(|s| s.iter().any(|e| e.starts_with("192.0.2.")))
        .unwrap();
    assert_eq!(
        block,
        &BTreeSet::from([
            "192.0.2.0-192.0.2.4".to_string(),
            "192.0.2.6-192.0.2.127".to_string()
        ])
    );
    assert!(
        rules[1].starts_with("ip daddr . meta l4proto . th dport @ports-"),
        "{rules:?}"
    );
    let (_, named) = d.port_sets.iter().next().unwrap();
    assert_eq!(
        named,
        &BTreeSet::from(["10.244.2.7 . tcp . 9090".to_string()])
    );
    assert_eq!(rules[2], "drop");
}

#[test]
fn overlapping_addresses_merge_into_one_range() {
    assert_eq!(
        ranges(vec![(10, 20), (15, 30), (31, 31), (40, 40)]),
        BTreeSet::from([
            format!("{}-{}", Ipv4Addr::from(10), Ipv4Addr::from(31)),
            Ipv4Addr::from(40).to_string()
        ])
    );
}

#[test]
fn host_network_and_finished_pods_have_no_policy_address() {
    let p: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"namespace": "a", "name": "h"},
        "spec": {"hostNetwork": true, "nodeName": "n1", "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 80}]}]},
        "status": {"podIP": "10.99.0.2", "phase": "Running"}
    }))
    .unwrap();
    assert_eq!(PodInfo::from_pod(&p).ip, None);
    let p: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"namespace": "a", "name": "done"},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"podIP": "10.244.1.9", "phase": "Succeeded"}
    }))
    .unwrap();
    assert_eq!(PodInfo::from_pod(&p).ip, None);
    let p: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"namespace": "a", "name": "ok"},
        "spec": {"containers": [{"name": "c", "ports": [{"name": "dns", "containerPort": 53, "protocol": "UDP"}]}]},
        "status": {"podIPs": [{"ip": "10.244.1.9"}], "phase": "Running"}
    }))
    .unwrap();
    let info = PodInfo::from_pod(&p);
    assert_eq!(info.ip, Some("10.244.1.9".parse().unwrap()));
    assert_eq!(info.named_port("dns", Protocol::Udp), Some(53));
}
