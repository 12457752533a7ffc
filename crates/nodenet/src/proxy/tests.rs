//! The rules the proxier writes for a mix of Services, compared with what upstream's
//! nftables proxier writes for the same objects (its `TestOverallNFTablesRules` scenario:
//! node IP 192.168.0.2, pods in 10.0.0.0/8, services in 172.30.0.0/16), and the partial
//! syncs that follow changes.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::rules::SyncInput;
use super::*;

const NODE: &str = "test-node";

fn config() -> ProxyConfig {
    let mut c = ProxyConfig::new(
        NODE,
        vec!["192.168.0.2".parse().unwrap()],
        vec!["10.0.0.0/8".parse().unwrap()],
    );
    c.service_cidrs = vec!["172.30.0.0/16".parse().unwrap()];
    c
}

struct Harness {
    f: FamilyProxier,
}

impl Harness {
    fn new() -> Self {
        Harness {
            f: FamilyProxier::new(IpFamily::V4, &config()),
        }
    }

    fn service(&mut self, json: serde_json::Value) {
        let s: Service = serde_json::from_value(json).expect("a Service");
        self.f.service(&s, false);
    }

    fn delete_service(&mut self, ns: &str, name: &str) {
        let s: Service = serde_json::from_value(
            serde_json::json!({"metadata": {"namespace": ns, "name": name}}),
        )
        .unwrap();
        self.f.service(&s, true);
    }

    fn slice(&mut self, ns: &str, svc: &str, endpoints: serde_json::Value) {
        let s: EndpointSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": ns, "name": format!("{svc}-1"),
                         "labels": {"kubernetes.io/service-name": svc}},
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": [{"name": "p80", "port": 80, "protocol": "TCP"}]
        }))
        .expect("a slice");
        self.f.slice(&s, false);
    }

    fn sync(&mut self, full: bool, now: Instant) -> String {
        let changed = self.f.absorb(NODE);
        let input = SyncInput {
            ports: &self.f.ports,
            endpoints: &self.f.endpoints,
            changed: &changed,
        };
        let (tx, _) = if full {
            self.f.rules.full(&input, (&[], &[]), now)
        } else {
            self.f.rules.partial(&input, now)
        };
        tx.script().to_string()
    }
}

/// The lines of a transaction on a fresh table, as the resulting state: no flushes of the
/// (empty) new objects, and not the replacement preamble.
fn state_lines(script: &str) -> BTreeSet<String> {
    script
        .lines()
        .filter(|l| !l.starts_with("flush ") && !l.is_empty())
        .filter(|l| *l != "add table ip kube-proxy " && *l != "delete table ip kube-proxy ")
        .map(|l| l.trim_end().to_string())
        .collect()
}

fn lines(text: &str) -> BTreeSet<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

fn assert_same(got: &BTreeSet<String>, want: &BTreeSet<String>) {
    let missing: Vec<_> = want.difference(got).collect();
    let extra: Vec<_> = got.difference(want).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing:\n{}\nextra:\n{}",
        missing
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        extra
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

const BASE: &str = r#"
add table ip kube-proxy { comment "rules for kube-proxy" ; }
add set ip kube-proxy cluster-ips { type ipv4_addr ; comment "Active ClusterIPs" ; }
add set ip kube-proxy nodeport-ips { type ipv4_addr ; comment "IPs that accept NodePort traffic" ; }
add map ip kube-proxy firewall-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "destinations that are subject to LoadBalancerSourceRanges" ; }
add map ip kube-proxy no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to service nodeports with no endpoints" ; }
add map ip kube-proxy no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to services with no endpoints" ; }
add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }
add map ip kube-proxy service-nodeports { type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }
add chain ip kube-proxy cluster-ips-check
add chain ip kube-proxy filter-prerouting-pre-dnat { type filter hook prerouting priority -110 ; }
add chain ip kube-proxy filter-output-pre-dnat { type filter hook output priority -110 ; }
add chain ip kube-proxy filter-forward { type filter hook forward priority 0 ; }
add chain ip kube-proxy filter-input { type filter hook input priority 0 ; }
add chain ip kube-proxy filter-output { type filter hook output priority 0 ; }
add chain ip kube-proxy firewall-check
add chain ip kube-proxy mark-for-masquerade
add chain ip kube-proxy masquerading
add chain ip kube-proxy nat-output { type nat hook output priority -100 ; }
add chain ip kube-proxy nat-postrouting { type nat hook postrouting priority 100 ; }
add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }
add chain ip kube-proxy nodeport-endpoints-check
add chain ip kube-proxy reject-chain { comment "helper for @no-endpoint-services / @no-endpoint-nodeports" ; }
add chain ip kube-proxy services
add chain ip kube-proxy service-endpoints-check
add rule ip kube-proxy cluster-ips-check ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"
add rule ip kube-proxy cluster-ips-check ip daddr { 172.30.0.0/16 } drop comment "Drop traffic to unallocated ClusterIPs"
add rule ip kube-proxy filter-prerouting-pre-dnat ct state new jump firewall-check
add rule ip kube-proxy filter-forward ct state new jump service-endpoints-check
add rule ip kube-proxy filter-forward ct state new jump cluster-ips-check
add rule ip kube-proxy filter-input ct state new jump nodeport-endpoints-check
add rule ip kube-proxy filter-input ct state new jump service-endpoints-check
add rule ip kube-proxy filter-output ct state new jump service-endpoints-check
add rule ip kube-proxy filter-output-pre-dnat ct state new jump firewall-check
add rule ip kube-proxy filter-output ct state new jump cluster-ips-check
add rule ip kube-proxy firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips
add rule ip kube-proxy mark-for-masquerade mark set mark or 0x4000
add rule ip kube-proxy masquerading mark and 0x4000 == 0 return
add rule ip kube-proxy masquerading mark set mark xor 0x4000
add rule ip kube-proxy masquerading masquerade fully-random
add rule ip kube-proxy nat-output jump services
add rule ip kube-proxy nat-postrouting jump masquerading
add rule ip kube-proxy nat-prerouting jump services
add rule ip kube-proxy nodeport-endpoints-check ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports
add rule ip kube-proxy reject-chain reject
add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips
add rule ip kube-proxy services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports
add element ip kube-proxy nodeport-ips { 192.168.0.2 }
add rule ip kube-proxy service-endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services
"#;

const SERVICES: &str = r#"
# svc1: ClusterIP
add chain ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80
add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 ip daddr 172.30.0.41 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 numgen random mod 1 vmap { 0 : goto endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 }
add chain ip kube-proxy endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80
add rule ip kube-proxy endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 ip saddr 10.180.0.1 jump mark-for-masquerade
add rule ip kube-proxy endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 meta l4proto tcp dnat to 10.180.0.1:80
add element ip kube-proxy cluster-ips { 172.30.0.41 }
add element ip kube-proxy service-ips { 172.30.0.41 . tcp . 80 : goto service-ULMVA6XW-ns1/svc1/tcp/p80 }

# svc2: LoadBalancer, externalTrafficPolicy Local, no local endpoint
add chain ip kube-proxy service-42NFTM6N-ns2/svc2/tcp/p80
add rule ip kube-proxy service-42NFTM6N-ns2/svc2/tcp/p80 ip daddr 172.30.0.42 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
add rule ip kube-proxy service-42NFTM6N-ns2/svc2/tcp/p80 numgen random mod 1 vmap { 0 : goto endpoint-SGOXE6O3-ns2/svc2/tcp/p80__10.180.0.2/80 }
add chain ip kube-proxy external-42NFTM6N-ns2/svc2/tcp/p80
add rule ip kube-proxy external-42NFTM6N-ns2/svc2/tcp/p80 ip saddr 10.0.0.0/8 goto service-42NFTM6N-ns2/svc2/tcp/p80 comment "short-circuit pod traffic"
add rule ip kube-proxy external-42NFTM6N-ns2/svc2/tcp/p80 fib saddr type local jump mark-for-masquerade comment "masquerade local traffic"
add rule ip kube-proxy external-42NFTM6N-ns2/svc2/tcp/p80 fib saddr type local goto service-42NFTM6N-ns2/svc2/tcp/p80 comment "short-circuit local traffic"
add chain ip kube-proxy endpoint-SGOXE6O3-ns2/svc2/tcp/p80__10.180.0.2/80
add rule ip kube-proxy endpoint-SGOXE6O3-ns2/svc2/tcp/p80__10.180.0.2/80 ip saddr 10.180.0.2 jump mark-for-masquerade
add rule ip kube-proxy endpoint-SGOXE6O3-ns2/svc2/tcp/p80__10.180.0.2/80 meta l4proto tcp dnat to 10.180.0.2:80
add element ip kube-proxy cluster-ips { 172.30.0.42 }
add element ip kube-proxy service-ips { 172.30.0.42 . tcp . 80 : goto service-42NFTM6N-ns2/svc2/tcp/p80 }
add element ip kube-proxy service-ips { 192.168.99.22 . tcp . 80 : goto external-42NFTM6N-ns2/svc2/tcp/p80 }
add element ip kube-proxy service-ips { 1.2.3.4 . tcp . 80 : goto external-42NFTM6N-ns2/svc2/tcp/p80 }
add element ip kube-proxy service-nodeports { tcp . 3001 : goto external-42NFTM6N-ns2/svc2/tcp/p80 }
add element ip kube-proxy no-endpoint-nodeports { tcp . 3001 comment "ns2/svc2:p80" : drop }
add element ip kube-proxy no-endpoint-services { 1.2.3.4 . tcp . 80 comment "ns2/svc2:p80" : drop }
add element ip kube-proxy no-endpoint-services { 192.168.99.22 . tcp . 80 comment "ns2/svc2:p80" : drop }

# svc3: NodePort
add chain ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80
add rule ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80 ip daddr 172.30.0.43 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
add rule ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80 numgen random mod 1 vmap { 0 : goto endpoint-UEIP74TE-ns3/svc3/tcp/p80__10.180.0.3/80 }
add chain ip kube-proxy external-4AT6LBPK-ns3/svc3/tcp/p80
add rule ip kube-proxy external-4AT6LBPK-ns3/svc3/tcp/p80 jump mark-for-masquerade
add rule ip kube-proxy external-4AT6LBPK-ns3/svc3/tcp/p80 goto service-4AT6LBPK-ns3/svc3/tcp/p80
add chain ip kube-proxy endpoint-UEIP74TE-ns3/svc3/tcp/p80__10.180.0.3/80
add rule ip kube-proxy endpoint-UEIP74TE-ns3/svc3/tcp/p80__10.180.0.3/80 ip saddr 10.180.0.3 jump mark-for-masquerade
add rule ip kube-proxy endpoint-UEIP74TE-ns3/svc3/tcp/p80__10.180.0.3/80 meta l4proto tcp dnat to 10.180.0.3:80
add element ip kube-proxy cluster-ips { 172.30.0.43 }
add element ip kube-proxy service-ips { 172.30.0.43 . tcp . 80 : goto service-4AT6LBPK-ns3/svc3/tcp/p80 }
add element ip kube-proxy service-nodeports { tcp . 3003 : goto external-4AT6LBPK-ns3/svc3/tcp/p80 }

# svc4: external IP, one endpoint local
add chain ip kube-proxy service-LAUZTJTB-ns4/svc4/tcp/p80
add rule ip kube-proxy service-LAUZTJTB-ns4/svc4/tcp/p80 ip daddr 172.30.0.44 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
add rule ip kube-proxy service-LAUZTJTB-ns4/svc4/tcp/p80 numgen random mod 2 vmap { 0 : goto endpoint-UNZV3OEC-ns4/svc4/tcp/p80__10.180.0.4/80 , 1 : goto endpoint-5RFCDDV7-ns4/svc4/tcp/p80__10.180.0.5/80 }
add chain ip kube-proxy external-LAUZTJTB-ns4/svc4/tcp/p80
add rule ip kube-proxy external-LAUZTJTB-ns4/svc4/tcp/p80 jump mark-for-masquerade
add rule ip kube-proxy external-LAUZTJTB-ns4/svc4/tcp/p80 goto service-LAUZTJTB-ns4/svc4/tcp/p80
add chain ip kube-proxy endpoint-5RFCDDV7-ns4/svc4/tcp/p80__10.180.0.5/80
add rule ip kube-proxy endpoint-5RFCDDV7-ns4/svc4/tcp/p80__10.180.0.5/80 ip saddr 10.180.0.5 jump mark-for-masquerade
add rule ip kube-proxy endpoint-5RFCDDV7-ns4/svc4/tcp/p80__10.180.0.5/80 meta l4proto tcp dnat to 10.180.0.5:80
add chain ip kube-proxy endpoint-UNZV3OEC-ns4/svc4/tcp/p80__10.180.0.4/80
add rule ip kube-proxy endpoint-UNZV3OEC-ns4/svc4/tcp/p80__10.180.0.4/80 ip saddr 10.180.0.4 jump mark-for-masquerade
add rule ip kube-proxy endpoint-UNZV3OEC-ns4/svc4/tcp/p80__10.180.0.4/80 meta l4proto tcp dnat to 10.180.0.4:80
add element ip kube-proxy cluster-ips { 172.30.0.44 }
add element ip kube-proxy service-ips { 172.30.0.44 . tcp . 80 : goto service-LAUZTJTB-ns4/svc4/tcp/p80 }
add element ip kube-proxy service-ips { 192.168.99.33 . tcp . 80 : goto external-LAUZTJTB-ns4/svc4/tcp/p80 }

# svc5: LoadBalancer with source ranges and ClientIP affinity
add set ip kube-proxy affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }
add chain ip kube-proxy service-HVFWP5L3-ns5/svc5/tcp/p80
add rule ip kube-proxy service-HVFWP5L3-ns5/svc5/tcp/p80 ip daddr 172.30.0.45 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
add rule ip kube-proxy service-HVFWP5L3-ns5/svc5/tcp/p80 ip saddr @affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 goto endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80
add rule ip kube-proxy service-HVFWP5L3-ns5/svc5/tcp/p80 numgen random mod 1 vmap { 0 : goto endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 }
add chain ip kube-proxy external-HVFWP5L3-ns5/svc5/tcp/p80
add rule ip kube-proxy external-HVFWP5L3-ns5/svc5/tcp/p80 jump mark-for-masquerade
add rule ip kube-proxy external-HVFWP5L3-ns5/svc5/tcp/p80 goto service-HVFWP5L3-ns5/svc5/tcp/p80
add chain ip kube-proxy endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80
add rule ip kube-proxy endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 ip saddr 10.180.0.3 jump mark-for-masquerade
add rule ip kube-proxy endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 update @affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 { ip saddr }
add rule ip kube-proxy endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 meta l4proto tcp dnat to 10.180.0.3:80
add chain ip kube-proxy firewall-HVFWP5L3-ns5/svc5/tcp/p80
add rule ip kube-proxy firewall-HVFWP5L3-ns5/svc5/tcp/p80 ip saddr != { 203.0.113.0/25 } drop
add element ip kube-proxy cluster-ips { 172.30.0.45 }
add element ip kube-proxy service-ips { 172.30.0.45 . tcp . 80 : goto service-HVFWP5L3-ns5/svc5/tcp/p80 }
add element ip kube-proxy service-ips { 5.6.7.8 . tcp . 80 : goto external-HVFWP5L3-ns5/svc5/tcp/p80 }
add element ip kube-proxy service-nodeports { tcp . 3002 : goto external-HVFWP5L3-ns5/svc5/tcp/p80 }
add element ip kube-proxy firewall-ips { 5.6.7.8 . tcp . 80 : goto firewall-HVFWP5L3-ns5/svc5/tcp/p80 }

# svc6: no endpoints
add element ip kube-proxy cluster-ips { 172.30.0.46 }
add element ip kube-proxy no-endpoint-services { 172.30.0.46 . tcp . 80 comment "ns6/svc6:p80" : goto reject-chain }
"#;

fn upstream_scenario(h: &mut Harness) {
    let port = |node_port: Option<u16>| match node_port {
        Some(np) => {
            serde_json::json!([{"name": "p80", "port": 80, "protocol": "TCP", "nodePort": np}])
        }
        None => serde_json::json!([{"name": "p80", "port": 80, "protocol": "TCP"}]),
    };
    h.service(
        serde_json::json!({"metadata": {"namespace": "ns1", "name": "svc1"},
        "spec": {"clusterIP": "172.30.0.41", "ports": port(None)}}),
    );
    h.service(serde_json::json!({"metadata": {"namespace": "ns2", "name": "svc2"},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "clusterIP": "172.30.0.42",
                 "externalIPs": ["192.168.99.22"], "healthCheckNodePort": 30000, "ports": port(Some(3001))},
        "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}));
    h.service(
        serde_json::json!({"metadata": {"namespace": "ns3", "name": "svc3"},
        "spec": {"type": "NodePort", "clusterIP": "172.30.0.43", "ports": port(Some(3003))}}),
    );
    h.service(serde_json::json!({"metadata": {"namespace": "ns4", "name": "svc4"},
        "spec": {"type": "NodePort", "clusterIP": "172.30.0.44", "externalIPs": ["192.168.99.33"], "ports": port(None)}}));
    h.service(serde_json::json!({"metadata": {"namespace": "ns5", "name": "svc5"},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Cluster", "clusterIP": "172.30.0.45",
                 "healthCheckNodePort": 30000, "loadBalancerSourceRanges": [" 203.0.113.0/25"],
                 "sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
                 "ports": port(Some(3002))},
        "status": {"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}]}}}));
    h.service(
        serde_json::json!({"metadata": {"namespace": "ns6", "name": "svc6"},
        "spec": {"type": "ClusterIP", "clusterIP": "172.30.0.46", "ports": port(None)}}),
    );
    h.slice(
        "ns1",
        "svc1",
        serde_json::json!([{"addresses": ["10.180.0.1"]}]),
    );
    h.slice(
        "ns2",
        "svc2",
        serde_json::json!([{"addresses": ["10.180.0.2"]}]),
    );
    h.slice(
        "ns3",
        "svc3",
        serde_json::json!([{"addresses": ["10.180.0.3"]}]),
    );
    h.slice(
        "ns4",
        "svc4",
        serde_json::json!([{"addresses": ["10.180.0.4"]}, {"addresses": ["10.180.0.5"], "nodeName": NODE}]),
    );
    h.slice(
        "ns5",
        "svc5",
        serde_json::json!([{"addresses": ["10.180.0.3"]}]),
    );
}

#[test]
fn a_full_sync_writes_the_rules_upstream_writes() {
    let mut h = Harness::new();
    upstream_scenario(&mut h);
    let script = h.sync(true, Instant::now());
    assert!(
        script.starts_with("add table ip kube-proxy \ndelete table ip kube-proxy \n"),
        "the first sync replaces the table: {script}"
    );
    let mut want = lines(BASE);
    want.extend(lines(SERVICES));
    assert_same(&state_lines(&script), &want);
}

#[test]
fn a_partial_sync_touches_only_the_changed_service() {
    let mut h = Harness::new();
    upstream_scenario(&mut h);
    let t0 = Instant::now();
    h.sync(true, t0);
    // svc1 gains an endpoint.
    h.slice(
        "ns1",
        "svc1",
        serde_json::json!([{"addresses": ["10.180.0.1"]}, {"addresses": ["10.180.0.9"]}]),
    );
    let script = h.sync(false, t0);
    assert!(
        script.lines().all(|l| l.contains("ns1/svc1")),
        "only svc1's chains change:\n{script}"
    );
    assert!(
        script.contains(
            "add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 numgen random mod 2 vmap"
        ),
        "{script}"
    );
    assert!(!script.contains("element"), "its elements stay: {script}");

    // svc3 loses every endpoint: its chains are flushed, its elements turn to reject.
    h.slice("ns3", "svc3", serde_json::json!([]));
    let script = h.sync(false, t0);
    let l = lines(&script);
    for want in [
        "flush chain ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80",
        "flush chain ip kube-proxy external-4AT6LBPK-ns3/svc3/tcp/p80",
        "flush chain ip kube-proxy endpoint-UEIP74TE-ns3/svc3/tcp/p80__10.180.0.3/80",
        "delete element ip kube-proxy service-ips { 172.30.0.43 . tcp . 80 }",
        "delete element ip kube-proxy service-nodeports { tcp . 3003 }",
        "add element ip kube-proxy no-endpoint-services { 172.30.0.43 . tcp . 80 comment \"ns3/svc3:p80\" : goto reject-chain }",
        "add element ip kube-proxy no-endpoint-nodeports { tcp . 3003 comment \"ns3/svc3:p80\" : goto reject-chain }",
    ] {
        assert!(l.contains(want), "{want} missing from:\n{script}");
    }
    assert!(
        !script.contains("delete chain"),
        "chains wait before deletion"
    );
    // Stale chains are deleted only after the delay.
    assert!(h.f.rules.stale_deletions(t0).is_empty());
    let later = h.f.rules.stale_deletions(t0 + Duration::from_secs(1));
    assert_eq!(later.len(), 3, "{}", later.script());
    assert!(
        later
            .script()
            .contains("delete chain ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80")
    );
}

#[test]
fn a_deleted_service_releases_its_elements_and_affinity_sets() {
    let mut h = Harness::new();
    upstream_scenario(&mut h);
    let t0 = Instant::now();
    h.sync(true, t0);
    h.delete_service("ns5", "svc5");
    let script = h.sync(false, t0);
    let l = lines(&script);
    for want in [
        "delete element ip kube-proxy cluster-ips { 172.30.0.45 }",
        "delete element ip kube-proxy service-ips { 5.6.7.8 . tcp . 80 }",
        "delete element ip kube-proxy firewall-ips { 5.6.7.8 . tcp . 80 }",
        "flush chain ip kube-proxy firewall-HVFWP5L3-ns5/svc5/tcp/p80",
        "delete set ip kube-proxy affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80",
    ] {
        assert!(l.contains(want), "{want} missing from:\n{script}");
    }
    let last = script.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("delete set"),
        "sets go last, after their rules: {script}"
    );
}

#[test]
fn internal_traffic_policy_local_without_a_local_endpoint_drops() {
    let mut h = Harness::new();
    h.service(
        serde_json::json!({"metadata": {"namespace": "kube-system", "name": "kube-dns"},
        "spec": {"clusterIP": "172.30.0.10", "internalTrafficPolicy": "Local",
                 "ports": [{"name": "p80", "port": 80, "protocol": "TCP"}]}}),
    );
    h.slice(
        "kube-system",
        "kube-dns",
        serde_json::json!([{"addresses": ["192.168.0.3"], "nodeName": "other"}]),
    );
    let script = h.sync(true, Instant::now());
    assert!(script.contains(
        "add element ip kube-proxy no-endpoint-services { 172.30.0.10 . tcp . 80 comment \"kube-system/kube-dns:p80\" : drop }"
    ), "{script}");
    h.slice(
        "kube-system",
        "kube-dns",
        serde_json::json!([{"addresses": ["192.168.0.3"], "nodeName": "other"}, {"addresses": ["192.168.0.2"], "nodeName": NODE}]),
    );
    let script = h.sync(false, Instant::now());
    let l = lines(&script);
    assert!(
        l.iter().any(|x| x.starts_with(
            "add element ip kube-proxy service-ips { 172.30.0.10 . tcp . 80 : goto local-"
        )),
        "{script}"
    );
    assert!(
        script.contains("dnat to 192.168.0.2:80") && !script.contains("dnat to 192.168.0.3:80"),
        "{script}"
    );
}
