//! Cluster DNS end to end in process: an API server with two logical clusters, one DNS server
//! per cluster fed by that cluster's watches, queries over real UDP and TCP on loopback, and a
//! stand-in upstream on loopback for forwarding.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use support::{Env, Upstream, Via, answers, ask, config, until};

async fn create_ns(client: &kube::Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
}

async fn create_svc(client: &kube::Client, ns: &str, v: serde_json::Value) -> Service {
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    let svc: Service = serde_json::from_value(v).unwrap();
    api.create(&PostParams::default(), &svc)
        .await
        .expect("service")
}

async fn create_slice(client: &kube::Client, ns: &str, v: serde_json::Value) {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), ns);
    let s: EndpointSlice = serde_json::from_value(v).unwrap();
    api.create(&PostParams::default(), &s)
        .await
        .expect("endpointslice");
}

fn cluster_ip(s: &Service) -> String {
    s.spec.as_ref().unwrap().cluster_ip.clone().unwrap()
}

/// Cluster `a`'s objects: a ClusterIP Service, a StatefulSet-style headless Service, an
/// ExternalName, a big headless Service.
async fn populate_a(client: &kube::Client) -> Service {
    create_ns(client, "shop").await;
    let web = create_svc(
        client,
        "shop",
        json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"},
              "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}}),
    )
    .await;
    create_svc(
        client,
        "shop",
        json!({"metadata": {"name": "db"}, "spec": {"clusterIP": "None", "selector": {"app": "db"},
              "ports": [{"name": "pg", "port": 5432}]}}),
    )
    .await;
    create_slice(
        client,
        "shop",
        json!({"metadata": {"name": "db-1", "labels": {"kubernetes.io/service-name": "db"}},
               "addressType": "IPv4", "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}],
               "endpoints": [
                 {"addresses": ["10.244.1.10"], "hostname": "db-0", "conditions": {"ready": true}},
                 {"addresses": ["10.244.2.11"], "hostname": "db-1", "conditions": {"ready": true}},
                 {"addresses": ["10.244.2.12"], "hostname": "db-2", "conditions": {"ready": false}}]}),
    )
    .await;
    create_svc(
        client,
        "shop",
        json!({"metadata": {"name": "ext"}, "spec": {"type": "ExternalName", "externalName": "www.example.test"}}),
    )
    .await;
    create_svc(
        client,
        "shop",
        json!({"metadata": {"name": "many"}, "spec": {"clusterIP": "None", "ports": [{"port": 80}]}}),
    )
    .await;
    let endpoints: Vec<serde_json::Value> = (0..100)
        .map(|i| json!({"addresses": [format!("10.244.9.{i}")]}))
        .collect();
    create_slice(
        client,
        "shop",
        json!({"metadata": {"name": "many-1", "labels": {"kubernetes.io/service-name": "many"}},
               "addressType": "IPv4", "ports": [{"port": 80, "protocol": "TCP"}], "endpoints": endpoints}),
    )
    .await;
    web
}

#[tokio::test]
async fn each_cluster_resolves_its_own_services_over_udp_and_tcp() {
    let env = Env::start(&["a", "b"]).await;
    let upstream = Upstream::start().await;
    let (ca, cb) = (env.cluster("a"), env.cluster("b"));
    let dns_a = dns::ClusterDns::start(ca.clone(), config(upstream.addr))
        .await
        .unwrap();
    let dns_b = dns::ClusterDns::start(cb.clone(), config(upstream.addr))
        .await
        .unwrap();
    dns_a.synced(support::WAIT).await.unwrap();
    dns_b.synced(support::WAIT).await.unwrap();
    let (a, b): (SocketAddr, SocketAddr) = (dns_a.addrs()[0], dns_b.addrs()[0]);

    let web = populate_a(&ca).await;
    let only_b = create_svc(
        &cb,
        "default",
        json!({"metadata": {"name": "only-b"}, "spec": {"ports": [{"port": 443}]}}),
    )
    .await;
    let web_ip = cluster_ip(&web);

    // A ClusterIP Service: its cluster IP, over UDP and TCP, in any letter case.
    let name = "web.shop.svc.cluster.local.";
    let m = until(a, name, RecordType::A, |m| !m.answers().is_empty()).await;
    assert_eq!(answers(&m), vec![format!("A {web_ip}")]);
    assert!(m.authoritative());
    assert_eq!(m.answers()[0].ttl(), 5);
    let m = ask(a, "WEB.Shop.svc.cluster.local.", RecordType::A, Via::Tcp).await;
    assert_eq!(answers(&m), vec![format!("A {web_ip}")]);
    assert_eq!(
        m.answers()[0].name().to_ascii(),
        "WEB.Shop.svc.cluster.local."
    );

    // SRV of a named port, and PTR of the cluster IP.
    let m = ask(
        a,
        "_http._tcp.web.shop.svc.cluster.local.",
        RecordType::SRV,
        Via::Udp,
    )
    .await;
    assert_eq!(
        answers(&m),
        vec!["SRV 0 100 80 web.shop.svc.cluster.local.".to_string()]
    );
    let octets: Vec<&str> = web_ip.split('.').rev().collect();
    let rev = format!("{}.in-addr.arpa.", octets.join("."));
    let m = ask(a, &rev, RecordType::PTR, Via::Udp).await;
    assert_eq!(
        answers(&m),
        vec!["PTR web.shop.svc.cluster.local.".to_string()]
    );

    // Headless: ready endpoints only, StatefulSet hostnames, SRV per endpoint.
    let m = until(a, "db.shop.svc.cluster.local.", RecordType::A, |m| {
        m.answers().len() == 2
    })
    .await;
    assert_eq!(answers(&m), vec!["A 10.244.1.10", "A 10.244.2.11"]);
    let m = ask(
        a,
        "db-0.db.shop.svc.cluster.local.",
        RecordType::A,
        Via::Udp,
    )
    .await;
    assert_eq!(answers(&m), vec!["A 10.244.1.10"]);
    let m = ask(
        a,
        "db-2.db.shop.svc.cluster.local.",
        RecordType::A,
        Via::Udp,
    )
    .await;
    assert_eq!(
        m.response_code(),
        ResponseCode::NXDomain,
        "db-2 is not ready"
    );
    let m = ask(
        a,
        "_pg._tcp.db.shop.svc.cluster.local.",
        RecordType::SRV,
        Via::Udp,
    )
    .await;
    assert_eq!(
        answers(&m),
        vec![
            "SRV 0 50 5432 db-0.db.shop.svc.cluster.local.",
            "SRV 0 50 5432 db-1.db.shop.svc.cluster.local."
        ]
    );
    assert_eq!(m.additionals().len(), 2, "the targets' addresses");
    let m = ask(a, "10.1.244.10.in-addr.arpa.", RecordType::PTR, Via::Udp).await;
    assert_eq!(answers(&m), vec!["PTR db-0.db.shop.svc.cluster.local."]);

    // Pod records (`pods insecure`) in an existing namespace.
    let m = ask(
        a,
        "10-244-1-77.shop.pod.cluster.local.",
        RecordType::A,
        Via::Udp,
    )
    .await;
    assert_eq!(answers(&m), vec!["A 10.244.1.77"]);

    // ExternalName: the CNAME, then the upstream's answer for the target.
    let m = until(a, "ext.shop.svc.cluster.local.", RecordType::A, |m| {
        m.answers().len() == 2
    })
    .await;
    assert_eq!(
        answers(&m),
        vec![
            "A 192.0.2.3".to_string(),
            "CNAME www.example.test.".to_string()
        ]
    );
    assert!(upstream.was_asked("www.example.test."));

    // The zone's schema version, and NXDOMAIN with the SOA for what does not exist.
    let m = ask(a, "dns-version.cluster.local.", RecordType::TXT, Via::Udp).await;
    assert_eq!(answers(&m), vec!["TXT 1.1.0"]);
    let m = ask(a, "nope.shop.svc.cluster.local.", RecordType::A, Via::Udp).await;
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
    assert_eq!(m.name_servers().len(), 1);
    assert_eq!(m.name_servers()[0].record_type(), RecordType::SOA);

    // Isolation: neither cluster sees the other's names, though both share the API server.
    let m = until(b, "only-b.default.svc.cluster.local.", RecordType::A, |m| {
        !m.answers().is_empty()
    })
    .await;
    assert_eq!(answers(&m), vec![format!("A {}", cluster_ip(&only_b))]);
    for (server, foreign) in [
        (a, "only-b.default.svc.cluster.local."),
        (b, "web.shop.svc.cluster.local."),
        (b, "db-0.db.shop.svc.cluster.local."),
        (b, "ext.shop.svc.cluster.local."),
        (b, "10-244-1-77.shop.pod.cluster.local."),
    ] {
        for via in [Via::Udp, Via::Tcp] {
            let m = ask(server, foreign, RecordType::A, via).await;
            assert_eq!(
                m.response_code(),
                ResponseCode::NXDomain,
                "{foreign} at {server} via {via:?}"
            );
            assert!(m.answers().is_empty());
        }
    }
    // A cluster IP of cluster a is no name in cluster b: the PTR goes upstream, which does
    // not know it either.
    let m = ask(b, &rev, RecordType::PTR, Via::Udp).await;
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
    assert!(upstream.was_asked(&rev));

    // A deleted Service disappears.
    Api::<Service>::namespaced(ca.clone(), "shop")
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    until(a, name, RecordType::A, |m| {
        m.response_code() == ResponseCode::NXDomain
    })
    .await;

    dns_a.shutdown().await;
    dns_b.shutdown().await;
    upstream.stop().await;
}

#[tokio::test]
async fn names_outside_the_cluster_are_forwarded_upstream() {
    let env = Env::start(&["a"]).await;
    let upstream = Upstream::start().await;
    let server = dns::ClusterDns::start(env.cluster("a"), config(upstream.addr))
        .await
        .unwrap();
    server.synced(support::WAIT).await.unwrap();
    let addr = server.addrs()[0];
    for via in [Via::Udp, Via::Tcp] {
        let m = ask(addr, "api.example.test.", RecordType::A, via).await;
        assert_eq!(answers(&m), vec!["A 192.0.2.3"], "{via:?}");
        assert!(m.recursion_available());
        assert!(!m.authoritative());
        let m = ask(addr, "nowhere.invalid.", RecordType::A, via).await;
        assert_eq!(m.response_code(), ResponseCode::NXDomain, "{via:?}");
    }
    assert!(upstream.was_asked("api.example.test."));
    // A name in the cluster domain never goes upstream.
    let m = ask(
        addr,
        "api.example.test.svc.cluster.local.",
        RecordType::A,
        Via::Udp,
    )
    .await;
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
    assert!(!upstream.was_asked("api.example.test.svc.cluster.local."));

    // A forwarded answer too big for UDP is passed on truncated; TCP carries all of it.
    let m = ask(addr, "big.example.test.", RecordType::A, Via::Udp).await;
    assert!(m.truncated());
    let m = ask(addr, "big.example.test.", RecordType::A, Via::Tcp).await;
    assert_eq!(m.answers().len(), 100);
    server.shutdown().await;

    // A dead upstream is SERVFAIL, the cluster's names still answer.
    let dead = {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap()
    };
    let mut cfg = config(dead);
    cfg.forward_timeout = std::time::Duration::from_millis(200);
    let server = dns::ClusterDns::start(env.cluster("a"), cfg).await.unwrap();
    server.synced(support::WAIT).await.unwrap();
    let m = ask(
        server.addrs()[0],
        "api.example.test.",
        RecordType::A,
        Via::Udp,
    )
    .await;
    assert_eq!(m.response_code(), ResponseCode::ServFail);
    let m = ask(
        server.addrs()[0],
        "kubernetes.default.svc.cluster.local.",
        RecordType::A,
        Via::Udp,
    )
    .await;
    assert_eq!(answers(&m), vec!["A 10.96.0.1"]);
    server.shutdown().await;
    upstream.stop().await;
}

#[tokio::test]
async fn large_answers_are_truncated_over_udp_and_whole_over_tcp() {
    let env = Env::start(&["a"]).await;
    let upstream = Upstream::start().await;
    let ca = env.cluster("a");
    let server = dns::ClusterDns::start(ca.clone(), config(upstream.addr))
        .await
        .unwrap();
    server.synced(support::WAIT).await.unwrap();
    populate_a(&ca).await;
    let addr = server.addrs()[0];
    let name = "many.shop.svc.cluster.local.";
    until(addr, name, RecordType::A, |m| {
        m.truncated() || m.answers().len() == 100
    })
    .await;

    let m = ask(addr, name, RecordType::A, Via::Udp).await;
    assert!(m.truncated(), "100 A records do not fit 512 bytes");
    assert!(m.to_vec().unwrap().len() <= 512);
    assert!(!m.answers().is_empty(), "as many as fit are kept");
    let m = ask(addr, name, RecordType::A, Via::UdpEdns(4096)).await;
    assert!(!m.truncated(), "they fit the EDNS payload");
    assert_eq!(m.answers().len(), 100);
    let m = ask(addr, name, RecordType::A, Via::UdpEdns(1232)).await;
    assert!(
        m.truncated(),
        "100 × 16 bytes (compressed names) exceed 1232"
    );
    assert!(m.to_vec().unwrap().len() <= 1232);
    assert!(m.answers().len() > 50);
    let m = ask(addr, name, RecordType::A, Via::Tcp).await;
    assert!(!m.truncated());
    assert_eq!(m.answers().len(), 100);
    server.shutdown().await;
    upstream.stop().await;
}

#[tokio::test]
async fn the_kube_dns_service_and_node_endpoints_are_published() {
    let env = Env::start(&["a"]).await;
    let upstream = Upstream::start().await;
    let ca = env.cluster("a");
    let svc = dns::kube_dns::ensure_service(&ca, dns::kube_dns::DEFAULT_CLUSTER_IP)
        .await
        .unwrap();
    assert_eq!(cluster_ip(&svc), "10.96.0.10");
    let spec = svc.spec.as_ref().unwrap();
    assert_eq!(spec.internal_traffic_policy.as_deref(), Some("Local"));
    let ports: BTreeMap<String, (i32, String)> = spec
        .ports
        .iter()
        .flatten()
        .map(|p| {
            (
                p.name.clone().unwrap(),
                (p.port, p.protocol.clone().unwrap()),
            )
        })
        .collect();
    assert_eq!(ports["dns"], (53, "UDP".to_string()));
    assert_eq!(ports["dns-tcp"], (53, "TCP".to_string()));
    // Idempotent: a second call finds it.
    let again = dns::kube_dns::ensure_service(&ca, dns::kube_dns::DEFAULT_CLUSTER_IP)
        .await
        .unwrap();
    assert_eq!(again.metadata.uid, svc.metadata.uid);

    let server = dns::ClusterDns::start(ca.clone(), config(upstream.addr))
        .await
        .unwrap();
    server.synced(support::WAIT).await.unwrap();
    let addr = server.addrs()[0];
    // The node's address pods reach (the API refuses loopback endpoints, as upstream does);
    // this test's server listens on loopback.
    let node_ip = support::ip("10.0.0.5");
    let slice = dns::kube_dns::publish_node(&ca, "node-1", "uid-1", node_ip, 53)
        .await
        .unwrap();
    assert_eq!(slice.endpoints[0].node_name.as_deref(), Some("node-1"));
    // Publishing again replaces the slice.
    dns::kube_dns::publish_node(&ca, "node-1", "uid-1", node_ip, 53)
        .await
        .unwrap();

    let m = until(
        addr,
        "kube-dns.kube-system.svc.cluster.local.",
        RecordType::A,
        |m| !m.answers().is_empty(),
    )
    .await;
    assert_eq!(answers(&m), vec!["A 10.96.0.10"]);
    let m = ask(
        addr,
        "_dns._udp.kube-dns.kube-system.svc.cluster.local.",
        RecordType::SRV,
        Via::Udp,
    )
    .await;
    assert_eq!(
        answers(&m),
        vec!["SRV 0 100 53 kube-dns.kube-system.svc.cluster.local."]
    );
    let m = ask(addr, "ns.dns.cluster.local.", RecordType::A, Via::Udp).await;
    assert_eq!(answers(&m), vec!["A 10.96.0.10"]);
    let m = until(
        addr,
        "10-0-0-5.kube-dns.kube-system.svc.cluster.local.",
        RecordType::A,
        |m| !m.answers().is_empty(),
    )
    .await;
    assert_eq!(answers(&m), vec!["A 10.0.0.5"]);

    dns::kube_dns::withdraw_node(&ca, "node-1").await.unwrap();
    dns::kube_dns::withdraw_node(&ca, "node-1").await.unwrap();
    let slices: Api<EndpointSlice> = Api::namespaced(ca.clone(), "kube-system");
    assert!(slices.get_opt("kube-dns-node-1").await.unwrap().is_none());
    server.shutdown().await;
    upstream.stop().await;
}

#[tokio::test]
async fn a_view_refuses_a_cross_cluster_client() {
    let env = Env::start(&["a", "b"]).await;
    let view = std::sync::Arc::new(dns::View::new());
    let run = dns::informer::run(env.all_clusters(), view.clone(), dns::PodMode::Insecure);
    let err = tokio::time::timeout(support::WAIT, run)
        .await
        .expect("the informer stops")
        .expect_err("a cross-cluster client is refused");
    assert!(matches!(err, dns::Error::CrossCluster { .. }), "{err}");
    assert!(!view.is_synced());
}

#[tokio::test]
async fn verified_pod_records_need_a_pod_with_that_address() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Patch, PatchParams};
    let env = Env::start(&["a"]).await;
    let upstream = Upstream::start().await;
    let ca = env.cluster("a");
    let mut cfg = config(upstream.addr);
    cfg.pods = dns::PodMode::Verified;
    let server = dns::ClusterDns::start(ca.clone(), cfg).await.unwrap();
    server.synced(support::WAIT).await.unwrap();
    let addr = server.addrs()[0];
    let name = "10-244-3-4.default.pod.cluster.local.";
    let m = ask(addr, name, RecordType::A, Via::Udp).await;
    assert_eq!(m.response_code(), ResponseCode::NXDomain);

    let pods: Api<Pod> = Api::namespaced(ca.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    pods.patch_status(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"podIP": "10.244.3.4", "podIPs": [{"ip": "10.244.3.4"}]}})),
    )
    .await
    .unwrap();
    let m = until(addr, name, RecordType::A, |m| !m.answers().is_empty()).await;
    assert_eq!(answers(&m), vec!["A 10.244.3.4"]);
    let m = ask(
        addr,
        "10-244-3-5.default.pod.cluster.local.",
        RecordType::A,
        Via::Udp,
    )
    .await;
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
    server.shutdown().await;
    upstream.stop().await;
}
