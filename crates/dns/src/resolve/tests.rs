//! The resolver against the examples of the Kubernetes DNS specification and of CoreDNS's
//! `kubernetes` plugin tests (`handler_test.go`, `reverse_test.go`), on a cluster of the same
//! shape: ClusterIP, dual-stack, IPv6, headless (with and without ports, hostnames and
//! dashed-IP names), ExternalName Services.

use std::net::IpAddr;

use hickory_proto::rr::{Name, RecordType};

use super::{Resolution, resolve};
use crate::view::{EndpointRecord, PortRecord, ServiceKind, ServiceRecord, SliceRecord, View};
use crate::zone::{PodMode, Zone};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn port(name: &str, protocol: &str, port: u16) -> PortRecord {
    PortRecord {
        name: name.into(),
        protocol: protocol.into(),
        port: Some(port),
    }
}

fn cluster_ip(ips: &[&str], ports: Vec<PortRecord>) -> ServiceRecord {
    ServiceRecord {
        kind: ServiceKind::ClusterIp(ips.iter().map(|s| ip(s)).collect()),
        ports: ports.into(),
        publish_not_ready: false,
    }
}

fn headless(ports: Vec<PortRecord>) -> ServiceRecord {
    ServiceRecord {
        kind: ServiceKind::Headless,
        ports: ports.into(),
        publish_not_ready: false,
    }
}

fn ep(addr: &str, hostname: Option<&str>, ready: bool) -> EndpointRecord {
    EndpointRecord {
        address: ip(addr),
        hostname: hostname.map(Into::into),
        ready,
    }
}

fn slice(ports: Vec<PortRecord>, endpoints: Vec<EndpointRecord>) -> SliceRecord {
    SliceRecord {
        ports: ports.into(),
        endpoints: endpoints.into(),
    }
}

/// The test cluster (CoreDNS's test fixtures, in namespace `testns`).
fn cluster() -> View {
    let v = View::new();
    v.set_synced();
    v.update(|u| {
        for ns in ["testns", "default", "kube-system"] {
            u.upsert_namespace(ns);
        }
        let http = || vec![port("http", "tcp", 80)];
        u.upsert_service("testns", "svc1", cluster_ip(&["10.0.0.1"], http()));
        u.upsert_slice(
            "testns",
            "svc1-x",
            "svc1",
            slice(http(), vec![ep("172.0.0.1", Some("ep1a"), true)]),
        );
        u.upsert_service("testns", "svcempty", cluster_ip(&["10.0.0.2"], http()));
        u.upsert_service("testns", "svc6", cluster_ip(&["1234:abcd::1"], http()));
        u.upsert_service(
            "testns",
            "svc-dual-stack",
            cluster_ip(&["10.0.0.3", "10::3"], http()),
        );
        u.upsert_service("testns", "hdls1", headless(http()));
        u.upsert_slice(
            "testns",
            "hdls1-v4",
            "hdls1",
            slice(
                http(),
                vec![
                    ep("172.0.0.2", None, true),
                    ep("172.0.0.3", None, true),
                    ep("172.0.0.4", Some("dup-name"), true),
                    ep("172.0.0.5", Some("dup-name"), true),
                    ep("172.0.0.9", Some("unready"), false),
                ],
            ),
        );
        u.upsert_slice(
            "testns",
            "hdls1-v6",
            "hdls1",
            slice(
                http(),
                vec![
                    ep("5678:abcd::1", None, true),
                    ep("5678:abcd::2", None, true),
                ],
            ),
        );
        u.upsert_service("testns", "hdlsprtls", headless(vec![]));
        u.upsert_slice(
            "testns",
            "hdlsprtls-x",
            "hdlsprtls",
            slice(vec![], vec![ep("172.0.0.20", None, true)]),
        );
        u.upsert_service("testns", "hdls-none-ready", headless(http()));
        u.upsert_slice(
            "testns",
            "hdls-none-ready-x",
            "hdls-none-ready",
            slice(http(), vec![ep("172.0.0.30", None, false)]),
        );
        let mut pnr = headless(http());
        pnr.publish_not_ready = true;
        u.upsert_service("testns", "hdls-pnr", pnr);
        u.upsert_slice(
            "testns",
            "hdls-pnr-x",
            "hdls-pnr",
            slice(http(), vec![ep("172.0.0.31", Some("web-0"), false)]),
        );
        let ext = |t: &str| ServiceRecord {
            kind: ServiceKind::ExternalName(t.into()),
            ports: Box::new([]),
            publish_not_ready: false,
        };
        u.upsert_service("testns", "external", ext("ext.interwebs.test"));
        u.upsert_service(
            "testns",
            "external-to-service",
            ext("svc1.testns.svc.cluster.local"),
        );
        u.upsert_service("testns", "external-ip", ext("1.2.3.4"));
        u.upsert_service(
            "kube-system",
            "kube-dns",
            cluster_ip(
                &["10.96.0.10"],
                vec![port("dns", "udp", 53), port("dns-tcp", "tcp", 53)],
            ),
        );
        u.upsert_service(
            "default",
            "kubernetes",
            cluster_ip(&["10.96.0.1"], vec![port("https", "tcp", 443)]),
        );
    });
    v
}

fn zone(pods: PodMode) -> Zone {
    Zone::new("cluster.local", 5, pods).unwrap()
}

/// The resolution rendered dig-style: rcode, then answer, authority and additional records
/// (each section sorted; the SOA's serial replaced by `S`).
fn render(r: Resolution) -> String {
    let section = |records: &[hickory_proto::rr::Record]| {
        let mut lines: Vec<String> = records
            .iter()
            .map(|r| {
                let s = r.to_string();
                if r.record_type() == RecordType::SOA {
                    let mut parts: Vec<&str> = s.split(' ').collect();
                    if parts.len() > 6 {
                        parts[6] = "S";
                    }
                    parts.join(" ")
                } else {
                    s
                }
            })
            .collect();
        lines.sort();
        lines
    };
    match r {
        Resolution::Forward => "FORWARD".into(),
        Resolution::Chase { answer, target } => {
            let mut out = vec![format!("CHASE {target}")];
            out.extend(section(&answer.answers));
            out.join("\n")
        }
        Resolution::Answer(a) => {
            let mut out = vec![a.rcode.to_str().to_string()];
            out.extend(section(&a.answers));
            let auth = section(&a.authority);
            if !auth.is_empty() {
                out.push(";; AUTHORITY".into());
                out.extend(auth);
            }
            let add = section(&a.additionals);
            if !add.is_empty() {
                out.push(";; ADDITIONAL".into());
                out.extend(add);
            }
            out.join("\n")
        }
    }
}

fn query_in(view: &View, pods: PodMode, name: &str, qtype: RecordType) -> String {
    let q = Name::from_ascii(name).unwrap();
    let lower = q.to_lowercase().to_string();
    render(resolve(&zone(pods), view, &q, &lower, qtype))
}

fn query(name: &str, qtype: RecordType) -> String {
    query_in(&cluster(), PodMode::Insecure, name, qtype)
}

const SOA: &str =
    "cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. S 7200 1800 86400 5";

fn nxdomain() -> String {
    format!("Non-Existent Domain\n;; AUTHORITY\n{SOA}")
}

fn nodata() -> String {
    format!("No Error\n;; AUTHORITY\n{SOA}")
}

fn lines(l: &[&str]) -> String {
    l.join("\n")
}

use RecordType::{A, AAAA, CNAME, NS, PTR, SOA as SOA_T, SRV, TXT};

#[test]
fn a_cluster_ip_service_answers_its_cluster_ip() {
    // Specification 2.3.1: `kubernetes.default.svc.cluster.local. IN A`.
    assert_eq!(
        query("kubernetes.default.svc.cluster.local.", A),
        lines(&[
            "No Error",
            "kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"
        ])
    );
    assert_eq!(
        query("svc1.testns.svc.cluster.local.", A),
        lines(&["No Error", "svc1.testns.svc.cluster.local. 5 IN A 10.0.0.1"])
    );
    // Without endpoints it still answers (kube-proxy rejects the connection, DNS does not).
    assert_eq!(
        query("svcempty.testns.svc.cluster.local.", A),
        lines(&[
            "No Error",
            "svcempty.testns.svc.cluster.local. 5 IN A 10.0.0.2"
        ])
    );
}

#[test]
fn names_are_matched_without_regard_to_case_and_answered_as_asked() {
    assert_eq!(
        query("SVC1.TestNS.svc.Cluster.Local.", A),
        lines(&["No Error", "SVC1.TestNS.svc.Cluster.Local. 5 IN A 10.0.0.1"])
    );
}

#[test]
fn address_families_are_answered_separately() {
    assert_eq!(query("svc1.testns.svc.cluster.local.", AAAA), nodata());
    assert_eq!(
        query("svc6.testns.svc.cluster.local.", AAAA),
        lines(&[
            "No Error",
            "svc6.testns.svc.cluster.local. 5 IN AAAA 1234:abcd::1"
        ])
    );
    assert_eq!(
        query("svc-dual-stack.testns.svc.cluster.local.", A),
        lines(&[
            "No Error",
            "svc-dual-stack.testns.svc.cluster.local. 5 IN A 10.0.0.3"
        ])
    );
    assert_eq!(
        query("svc-dual-stack.testns.svc.cluster.local.", AAAA),
        lines(&[
            "No Error",
            "svc-dual-stack.testns.svc.cluster.local. 5 IN AAAA 10::3"
        ])
    );
}

#[test]
fn missing_services_and_namespaces_are_nxdomain_with_the_soa() {
    assert_eq!(query("svc0.testns.svc.cluster.local.", A), nxdomain());
    assert_eq!(query("svc0.testns.svc.cluster.local.", AAAA), nxdomain());
    assert_eq!(query("svc0.svc-nons.svc.cluster.local.", A), nxdomain());
    assert_eq!(query("svc1.nsnoexist.svc.cluster.local.", A), nxdomain());
    assert_eq!(
        query("bogusendpoint.svc0.testns.svc.cluster.local.", A),
        nxdomain()
    );
    assert_eq!(
        query("bogusendpoint.hdls1.testns.svc.cluster.local.", A),
        nxdomain()
    );
    assert_eq!(query("foo.cluster.local.", NS), nxdomain());
    assert_eq!(query("foo.svc.cluster.local.", NS), nxdomain());
    assert_eq!(query("a.b.svc1.testns.svc.cluster.local.", A), nxdomain());
    // The search-list expansions of an external name (ndots:5) end here, fast.
    assert_eq!(
        query("example.com.testns.svc.cluster.local.", A),
        nxdomain()
    );
    assert_eq!(query("example.com.svc.cluster.local.", A), nxdomain());
    assert_eq!(query("example.com.cluster.local.", A), nxdomain());
}

#[test]
fn names_that_exist_without_records_of_the_type_are_nodata() {
    for (name, t) in [
        ("svc.cluster.local.", A),
        ("pod.cluster.local.", A),
        ("testns.svc.cluster.local.", A),
        ("svc.cluster.local.", NS),
        ("testns.svc.cluster.local.", NS),
        ("svc1.testns.svc.cluster.local.", TXT),
        ("svc1.testns.svc.cluster.local.", SOA_T),
        ("svc1.testns.svc.cluster.local.", CNAME),
        ("cluster.local.", A),
    ] {
        assert_eq!(query(name, t), nodata(), "{name} {t}");
    }
    assert_eq!(query("svc0.svc-nons.svc.cluster.local.", TXT), nxdomain());
}

#[test]
fn the_schema_version_is_served() {
    assert_eq!(
        query("dns-version.cluster.local.", TXT),
        lines(&["No Error", "dns-version.cluster.local. 28800 IN TXT 1.1.0"])
    );
}

#[test]
fn the_apex_has_its_soa_and_name_server() {
    assert_eq!(query("cluster.local.", SOA_T), lines(&["No Error", SOA]));
    assert_eq!(
        query("cluster.local.", NS),
        lines(&[
            "No Error",
            "cluster.local. 5 IN NS ns.dns.cluster.local.",
            ";; ADDITIONAL",
            "ns.dns.cluster.local. 5 IN A 10.96.0.10",
        ])
    );
    assert_eq!(
        query("ns.dns.cluster.local.", A),
        lines(&["No Error", "ns.dns.cluster.local. 5 IN A 10.96.0.10"])
    );
}

#[test]
fn srv_records_of_a_cluster_ip_service_point_at_the_service() {
    // Specification 2.3.2 and CoreDNS: priority 0, weight 100, target the Service's name, its
    // address in the additional section.
    let want = |owner: &str| {
        lines(&[
            "No Error",
            &format!("{owner} 5 IN SRV 0 100 80 svc1.testns.svc.cluster.local."),
            ";; ADDITIONAL",
            "svc1.testns.svc.cluster.local. 5 IN A 10.0.0.1",
        ])
    };
    assert_eq!(
        query("_http._tcp.svc1.testns.svc.cluster.local.", SRV),
        want("_http._tcp.svc1.testns.svc.cluster.local.")
    );
    assert_eq!(
        query("svc1.testns.svc.cluster.local.", SRV),
        want("svc1.testns.svc.cluster.local.")
    );
    assert_eq!(
        query("svc-dual-stack.testns.svc.cluster.local.", SRV),
        lines(&[
            "No Error",
            "svc-dual-stack.testns.svc.cluster.local. 5 IN SRV 0 50 80 svc-dual-stack.testns.svc.cluster.local.",
            ";; ADDITIONAL",
            "svc-dual-stack.testns.svc.cluster.local. 5 IN A 10.0.0.3",
            "svc-dual-stack.testns.svc.cluster.local. 5 IN AAAA 10::3",
        ])
    );
    assert_eq!(
        query("_https._tcp.kubernetes.default.svc.cluster.local.", SRV),
        lines(&[
            "No Error",
            "_https._tcp.kubernetes.default.svc.cluster.local. 5 IN SRV 0 100 443 kubernetes.default.svc.cluster.local.",
            ";; ADDITIONAL",
            "kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1",
        ])
    );
}

#[test]
fn srv_names_of_ports_a_service_lacks_do_not_exist() {
    assert_eq!(
        query("_dns._udp.svc1.testns.svc.cluster.local.", SRV),
        nxdomain()
    );
    assert_eq!(
        query("_http._udp.svc1.testns.svc.cluster.local.", SRV),
        nxdomain()
    );
    assert_eq!(
        query("_http._tcp.hdlsprtls.testns.svc.cluster.local.", SRV),
        nxdomain()
    );
    // The UDP and TCP ports of one number are told apart by protocol.
    assert_eq!(
        query("_dns._udp.kube-dns.kube-system.svc.cluster.local.", SRV),
        lines(&[
            "No Error",
            "_dns._udp.kube-dns.kube-system.svc.cluster.local. 5 IN SRV 0 100 53 kube-dns.kube-system.svc.cluster.local.",
            ";; ADDITIONAL",
            "kube-dns.kube-system.svc.cluster.local. 5 IN A 10.96.0.10",
        ])
    );
}

#[test]
fn a_headless_service_answers_its_ready_endpoints() {
    // Specification 2.4.1; the unready endpoint 172.0.0.9 is left out.
    assert_eq!(
        query("hdls1.testns.svc.cluster.local.", A),
        lines(&[
            "No Error",
            "hdls1.testns.svc.cluster.local. 5 IN A 172.0.0.2",
            "hdls1.testns.svc.cluster.local. 5 IN A 172.0.0.3",
            "hdls1.testns.svc.cluster.local. 5 IN A 172.0.0.4",
            "hdls1.testns.svc.cluster.local. 5 IN A 172.0.0.5",
        ])
    );
    assert_eq!(
        query("hdls1.testns.svc.cluster.local.", AAAA),
        lines(&[
            "No Error",
            "hdls1.testns.svc.cluster.local. 5 IN AAAA 5678:abcd::1",
            "hdls1.testns.svc.cluster.local. 5 IN AAAA 5678:abcd::2",
        ])
    );
    assert_eq!(
        query("hdlsprtls.testns.svc.cluster.local.", A),
        lines(&[
            "No Error",
            "hdlsprtls.testns.svc.cluster.local. 5 IN A 172.0.0.20"
        ])
    );
}

#[test]
fn a_headless_service_without_ready_endpoints_does_not_exist() {
    assert_eq!(
        query("hdls-none-ready.testns.svc.cluster.local.", A),
        nxdomain()
    );
    assert_eq!(
        query("hdls-none-ready.testns.svc.cluster.local.", AAAA),
        nxdomain()
    );
}

#[test]
fn publishing_not_ready_addresses_counts_every_endpoint() {
    assert_eq!(
        query("hdls-pnr.testns.svc.cluster.local.", A),
        lines(&[
            "No Error",
            "hdls-pnr.testns.svc.cluster.local. 5 IN A 172.0.0.31"
        ])
    );
    assert_eq!(
        query("web-0.hdls-pnr.testns.svc.cluster.local.", A),
        lines(&[
            "No Error",
            "web-0.hdls-pnr.testns.svc.cluster.local. 5 IN A 172.0.0.31"
        ])
    );
}

#[test]
fn endpoints_are_named_by_hostname_or_dashed_address() {
    // Specification 2.4.1 `<hostname>.<service>`: StatefulSet pods; several IPs per hostname.
    assert_eq!(
        query("dup-name.hdls1.testns.svc.cluster.local.", A),
        lines(&[
            "No Error",
            "dup-name.hdls1.testns.svc.cluster.local. 5 IN A 172.0.0.4",
            "dup-name.hdls1.testns.svc.cluster.local. 5 IN A 172.0.0.5",
        ])
    );
    assert_eq!(
        query("172-0-0-2.hdls1.testns.svc.cluster.local.", A),
        lines(&[
            "No Error",
            "172-0-0-2.hdls1.testns.svc.cluster.local. 5 IN A 172.0.0.2"
        ])
    );
    assert_eq!(
        query("5678-abcd--1.hdls1.testns.svc.cluster.local.", AAAA),
        lines(&[
            "No Error",
            "5678-abcd--1.hdls1.testns.svc.cluster.local. 5 IN AAAA 5678:abcd::1"
        ])
    );
    assert_eq!(
        query("172-0-0-20.hdlsprtls.testns.svc.cluster.local.", A),
        lines(&[
            "No Error",
            "172-0-0-20.hdlsprtls.testns.svc.cluster.local. 5 IN A 172.0.0.20"
        ])
    );
    // An endpoint of a ClusterIP Service is named too (CoreDNS).
    assert_eq!(
        query("ep1a.svc1.testns.svc.cluster.local.", A),
        lines(&[
            "No Error",
            "ep1a.svc1.testns.svc.cluster.local. 5 IN A 172.0.0.1"
        ])
    );
    // A hostname of an unready endpoint does not exist.
    assert_eq!(
        query("unready.hdls1.testns.svc.cluster.local.", A),
        nxdomain()
    );
}

#[test]
fn srv_records_of_a_headless_service_name_each_ready_endpoint() {
    // Specification 2.4.2 (N endpoints × M named ports); CoreDNS's weights: 100 / 6 records.
    assert_eq!(
        query("_http._tcp.hdls1.testns.svc.cluster.local.", SRV),
        lines(&[
            "No Error",
            "_http._tcp.hdls1.testns.svc.cluster.local. 5 IN SRV 0 16 80 172-0-0-2.hdls1.testns.svc.cluster.local.",
            "_http._tcp.hdls1.testns.svc.cluster.local. 5 IN SRV 0 16 80 172-0-0-3.hdls1.testns.svc.cluster.local.",
            "_http._tcp.hdls1.testns.svc.cluster.local. 5 IN SRV 0 16 80 5678-abcd--1.hdls1.testns.svc.cluster.local.",
            "_http._tcp.hdls1.testns.svc.cluster.local. 5 IN SRV 0 16 80 5678-abcd--2.hdls1.testns.svc.cluster.local.",
            "_http._tcp.hdls1.testns.svc.cluster.local. 5 IN SRV 0 16 80 dup-name.hdls1.testns.svc.cluster.local.",
            ";; ADDITIONAL",
            "172-0-0-2.hdls1.testns.svc.cluster.local. 5 IN A 172.0.0.2",
            "172-0-0-3.hdls1.testns.svc.cluster.local. 5 IN A 172.0.0.3",
            "5678-abcd--1.hdls1.testns.svc.cluster.local. 5 IN AAAA 5678:abcd::1",
            "5678-abcd--2.hdls1.testns.svc.cluster.local. 5 IN AAAA 5678:abcd::2",
            "dup-name.hdls1.testns.svc.cluster.local. 5 IN A 172.0.0.4",
            "dup-name.hdls1.testns.svc.cluster.local. 5 IN A 172.0.0.5",
        ])
    );
}

#[test]
fn an_external_name_is_a_cname_followed_upstream() {
    // Specification 2.5.
    assert_eq!(
        query("external.testns.svc.cluster.local.", CNAME),
        lines(&[
            "No Error",
            "external.testns.svc.cluster.local. 5 IN CNAME ext.interwebs.test."
        ])
    );
    assert_eq!(
        query("external.testns.svc.cluster.local.", A),
        lines(&[
            "CHASE ext.interwebs.test.",
            "external.testns.svc.cluster.local. 5 IN CNAME ext.interwebs.test.",
        ])
    );
    // No endpoints, ports or subdomains under it.
    assert_eq!(
        query("endpoint.external.testns.svc.cluster.local.", CNAME),
        nxdomain()
    );
    assert_eq!(
        query("_http._tcp.external.testns.svc.cluster.local.", SRV),
        nxdomain()
    );
    // SRV of an ExternalName itself: it exists, without SRV records.
    assert_eq!(query("external.testns.svc.cluster.local.", SRV), nodata());
    // An ExternalName that is an IP address serves nothing (CoreDNS).
    assert_eq!(
        query("external-ip.testns.svc.cluster.local.", A),
        nxdomain()
    );
}

#[test]
fn an_external_name_inside_the_zone_is_followed_in_the_cluster() {
    assert_eq!(
        query("external-to-service.testns.svc.cluster.local.", A),
        lines(&[
            "No Error",
            "external-to-service.testns.svc.cluster.local. 5 IN CNAME svc1.testns.svc.cluster.local.",
            "svc1.testns.svc.cluster.local. 5 IN A 10.0.0.1",
        ])
    );
}

#[test]
fn an_external_name_pointing_at_itself_does_not_loop() {
    let v = cluster();
    v.update(|u| {
        u.upsert_service(
            "testns",
            "self",
            ServiceRecord {
                kind: ServiceKind::ExternalName("self.testns.svc.cluster.local".into()),
                ports: Box::new([]),
                publish_not_ready: false,
            },
        )
    });
    let out = query_in(&v, PodMode::Insecure, "self.testns.svc.cluster.local.", A);
    assert!(
        out.starts_with("No Error\nself.testns.svc.cluster.local. 5 IN CNAME"),
        "{out}"
    );
}

#[test]
fn ptr_records_name_cluster_ips_and_ready_endpoints() {
    // Specification 2.3.3 and 2.4.3.
    assert_eq!(
        query("1.0.96.10.in-addr.arpa.", PTR),
        lines(&[
            "No Error",
            "1.0.96.10.in-addr.arpa. 5 IN PTR kubernetes.default.svc.cluster.local."
        ])
    );
    assert_eq!(
        query("4.0.0.172.in-addr.arpa.", PTR),
        lines(&[
            "No Error",
            "4.0.0.172.in-addr.arpa. 5 IN PTR dup-name.hdls1.testns.svc.cluster.local."
        ])
    );
    assert_eq!(
        query("2.0.0.172.in-addr.arpa.", PTR),
        lines(&[
            "No Error",
            "2.0.0.172.in-addr.arpa. 5 IN PTR 172-0-0-2.hdls1.testns.svc.cluster.local."
        ])
    );
    assert_eq!(
        query(
            "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.c.b.a.4.3.2.1.ip6.arpa.",
            PTR
        ),
        lines(&[
            "No Error",
            "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.c.b.a.4.3.2.1.ip6.arpa. 5 IN PTR svc6.testns.svc.cluster.local.",
        ])
    );
}

#[test]
fn reverse_names_the_cluster_does_not_know_go_upstream() {
    // kubeadm's `fallthrough in-addr.arpa ip6.arpa`.
    assert_eq!(
        query("9.0.0.172.in-addr.arpa.", PTR),
        "FORWARD",
        "an unready endpoint"
    );
    assert_eq!(query("8.8.8.8.in-addr.arpa.", PTR), "FORWARD");
    assert_eq!(query("0.172.in-addr.arpa.", PTR), "FORWARD");
    assert_eq!(query("1.0.96.10.in-addr.arpa.", A), "FORWARD");
}

#[test]
fn names_outside_the_zone_are_forwarded() {
    assert_eq!(query("example.com.", A), "FORWARD");
    assert_eq!(query("local.", SOA_T), "FORWARD");
}

#[test]
fn pod_names_follow_the_pods_option() {
    let v = cluster();
    let name = "172-0-0-2.testns.pod.cluster.local.";
    assert_eq!(
        query_in(&v, PodMode::Insecure, name, A),
        lines(&[
            "No Error",
            "172-0-0-2.testns.pod.cluster.local. 5 IN A 172.0.0.2"
        ])
    );
    assert_eq!(query_in(&v, PodMode::Insecure, name, AAAA), nodata());
    assert_eq!(
        query_in(
            &v,
            PodMode::Insecure,
            "1234-abcd--1.testns.pod.cluster.local.",
            AAAA
        ),
        lines(&[
            "No Error",
            "1234-abcd--1.testns.pod.cluster.local. 5 IN AAAA 1234:abcd::1"
        ])
    );
    assert_eq!(
        query_in(
            &v,
            PodMode::Insecure,
            "172-0-0-2.nsnoexist.pod.cluster.local.",
            A
        ),
        nxdomain()
    );
    assert_eq!(
        query_in(
            &v,
            PodMode::Insecure,
            "podname.testns.pod.cluster.local.",
            A
        ),
        nxdomain()
    );
    assert_eq!(query_in(&v, PodMode::Disabled, name, A), nxdomain());
    // Verified: only an IP a pod of that namespace has.
    assert_eq!(query_in(&v, PodMode::Verified, name, A), nxdomain());
    v.update(|u| u.upsert_pod("testns", "p", Box::new([ip("172.0.0.2")])));
    assert_eq!(
        query_in(&v, PodMode::Verified, name, A),
        lines(&[
            "No Error",
            "172-0-0-2.testns.pod.cluster.local. 5 IN A 172.0.0.2"
        ])
    );
    assert_eq!(
        query_in(
            &v,
            PodMode::Verified,
            "172-0-0-2.default.pod.cluster.local.",
            A
        ),
        nxdomain()
    );
    v.update(|u| u.remove_pod("testns", "p"));
    assert_eq!(query_in(&v, PodMode::Verified, name, A), nxdomain());
}

#[test]
fn the_ttl_is_configurable() {
    let q = Name::from_ascii("svc1.testns.svc.cluster.local.").unwrap();
    let z = Zone::new("cluster.local", 30, PodMode::Insecure).unwrap();
    let out = render(resolve(
        &z,
        &cluster(),
        &q,
        "svc1.testns.svc.cluster.local.",
        A,
    ));
    assert_eq!(
        out,
        lines(&[
            "No Error",
            "svc1.testns.svc.cluster.local. 30 IN A 10.0.0.1"
        ])
    );
}

#[test]
fn before_the_first_lists_names_in_the_zone_are_servfail_not_nxdomain() {
    let v = View::new();
    assert_eq!(
        query_in(&v, PodMode::Insecure, "svc1.testns.svc.cluster.local.", A),
        "Server Failure"
    );
    assert_eq!(
        query_in(&v, PodMode::Insecure, "example.com.", A),
        "FORWARD"
    );
    v.set_synced();
    assert_eq!(
        query_in(&v, PodMode::Insecure, "svc1.testns.svc.cluster.local.", A),
        nxdomain()
    );
}
