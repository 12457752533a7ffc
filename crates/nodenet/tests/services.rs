//! Services on real kernels: machines in network namespaces, each running its node's
//! network, pods wired by the CNI plugins, traffic from the project's test program.

mod support;

use std::collections::BTreeSet;

use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_ip_reaches_a_backend_on_another_node_by_address_and_name() {
    let env = Env::start().await;
    let mut lab = Lab::new(&env, "cip", 2).await;
    lab.start_networks().await;
    let backend = lab
        .pod(1, "shop", "web-1", &[("app", "web")], serde_json::json!([]))
        .await;
    lab.pods[backend].serve_http("web-1", 8080);
    let client = lab
        .pod(0, "shop", "client", &[], serde_json::json!([]))
        .await;
    let svc = service(
        &lab.client,
        "shop",
        "web",
        serde_json::json!({"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}),
    )
    .await;
    let ip = lab.pods[backend].ip;
    set_endpoints(
        &lab.client,
        "shop",
        "web",
        ("http", 8080, "TCP"),
        &[(ip, "node-1", true)],
    )
    .await;
    let target = format!("{}:80", cluster_ip(&svc));
    let body = eventually("the cluster IP answers", || {
        http_get(&lab.pods[client].netns, &target, "/", 2.0)
    })
    .await;
    assert_eq!(body.trim(), "mtest web-1");

    // The node's cluster DNS, reached at the kube-dns address (DNAT to the node's own
    // server, internalTrafficPolicy Local), resolves the Service.
    let m = mtest().display().to_string();
    let answer = eventually("cluster DNS answers through the kube-dns address", || {
        run_in(
            &lab.pods[client].netns,
            &m,
            &["dns", "web.shop.svc.cluster.local", "A", "--server", DNS_IP],
        )
    })
    .await;
    assert!(answer.contains(&cluster_ip(&svc)), "{answer}");

    // A node reaches a pod of another node (host-gw route), and pod egress leaves under
    // the node's address.
    let direct = format!("{ip}:8080");
    let body = http_get(lab.nodes[0].machine.netns(), &direct, "/", 2.0)
        .await
        .expect("node 0 reaches the pod on node 1");
    assert_eq!(body.trim(), "mtest web-1");
    let mut outside = lab.external.command("unshare");
    outside
        .args(["--uts", &m, "serve-http", "--port", "9000"])
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true);
    let _outside = outside.spawn().expect("a server outside the cluster");
    let seen = eventually("the pod reaches a server off the pod network", || {
        http_get(&lab.pods[client].netns, "10.99.0.1:9000", "/clientip", 2.0)
    })
    .await;
    assert!(
        seen.starts_with(&format!("{}:", lab.nodes[0].ip())),
        "pod egress is masqueraded to its node: {seen}"
    );
    lab.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_port_answers_on_every_node_and_no_endpoints_means_refused() {
    let env = Env::start().await;
    let mut lab = Lab::new(&env, "np", 3).await;
    lab.start_networks().await;
    let backend = lab.pod(2, "shop", "web", &[], serde_json::json!([])).await;
    lab.pods[backend].serve_http("web", 8080);
    let client = lab
        .pod(0, "shop", "client", &[], serde_json::json!([]))
        .await;
    let svc = service(
        &lab.client,
        "shop",
        "web",
        serde_json::json!({"type": "NodePort", "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}),
    )
    .await;
    let np = node_port(&svc);
    let ip = lab.pods[backend].ip;
    set_endpoints(
        &lab.client,
        "shop",
        "web",
        ("http", 8080, "TCP"),
        &[(ip, "node-2", true)],
    )
    .await;
    for n in &lab.nodes {
        let target = format!("{}:{np}", n.ip());
        let body = eventually(&format!("NodePort on {}", n.name), || {
            http_get(&lab.external, &target, "/", 2.0)
        })
        .await;
        assert_eq!(body.trim(), "mtest web");
    }

    // Scaled to zero: connections are refused at once, not left to time out.
    set_endpoints(&lab.client, "shop", "web", ("http", 8080, "TCP"), &[]).await;
    let cip = format!("{}:80", cluster_ip(&svc));
    let via_node = format!("{}:{np}", lab.nodes[0].ip());
    let refused = |r: Result<String, String>| match r {
        Err(e) if e.contains("refused") => Ok(()),
        other => Err(format!("{other:?}")),
    };
    let (pod_ns, ext, cip_ref, via_ref) = (&lab.pods[client].netns, &lab.external, &cip, &via_node);
    eventually("the cluster IP refuses", || async move {
        refused(http_get(pod_ns, cip_ref, "/", 2.0).await)
    })
    .await;
    eventually("the NodePort refuses", || async move {
        refused(http_get(ext, via_ref, "/", 2.0).await)
    })
    .await;

    // Scaled up again: it answers.
    set_endpoints(
        &lab.client,
        "shop",
        "web",
        ("http", 8080, "TCP"),
        &[(ip, "node-2", true)],
    )
    .await;
    eventually("the cluster IP answers again", || {
        http_get(&lab.pods[client].netns, &cip, "/", 2.0)
    })
    .await;
    lab.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_ip_affinity_sticks_and_a_pod_reaches_itself_through_its_service() {
    let env = Env::start().await;
    let mut lab = Lab::new(&env, "aff", 2).await;
    lab.start_networks().await;
    let a = lab
        .pod(0, "shop", "web-a", &[], serde_json::json!([]))
        .await;
    lab.pods[a].serve_http("web-a", 8080);
    let b = lab
        .pod(1, "shop", "web-b", &[], serde_json::json!([]))
        .await;
    lab.pods[b].serve_http("web-b", 8080);
    let client = lab
        .pod(1, "shop", "client", &[], serde_json::json!([]))
        .await;
    let both = [
        (lab.pods[a].ip, "node-0", true),
        (lab.pods[b].ip, "node-1", true),
    ];
    let sticky = service(
        &lab.client,
        "shop",
        "sticky",
        serde_json::json!({"sessionAffinity": "ClientIP",
                           "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}),
    )
    .await;
    let spread = service(
        &lab.client,
        "shop",
        "spread",
        serde_json::json!({"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}),
    )
    .await;
    set_endpoints(&lab.client, "shop", "sticky", ("http", 8080, "TCP"), &both).await;
    set_endpoints(&lab.client, "shop", "spread", ("http", 8080, "TCP"), &both).await;
    let ns = &lab.pods[client].netns;
    let sticky_target = format!("{}:80", cluster_ip(&sticky));
    let first = eventually("the sticky service answers", || {
        http_get(ns, &sticky_target, "/", 2.0)
    })
    .await;
    for _ in 0..15 {
        let again = http_get(ns, &sticky_target, "/", 2.0)
            .await
            .expect("answers");
        assert_eq!(again, first, "ClientIP affinity keeps one backend");
    }
    let spread_target = format!("{}:80", cluster_ip(&spread));
    let mut seen = BTreeSet::new();
    for _ in 0..60 {
        if let Ok(body) = http_get(ns, &spread_target, "/", 2.0).await {
            seen.insert(body.trim().to_string());
        }
        if seen.len() == 2 {
            break;
        }
    }
    assert_eq!(
        seen.len(),
        2,
        "both backends answer without affinity: {seen:?}"
    );

    // Hairpin: web-a reaches itself through a Service whose only endpoint it is.
    let own = service(
        &lab.client,
        "shop",
        "own",
        serde_json::json!({"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}),
    )
    .await;
    set_endpoints(
        &lab.client,
        "shop",
        "own",
        ("http", 8080, "TCP"),
        &[(lab.pods[a].ip, "node-0", true)],
    )
    .await;
    let own_target = format!("{}:80", cluster_ip(&own));
    let body = eventually("a pod reaches itself through its Service", || {
        http_get(&lab.pods[a].netns, &own_target, "/", 2.0)
    })
    .await;
    assert_eq!(body.trim(), "mtest web-a");
    lab.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_traffic_policy_local_keeps_the_client_ip_and_drops_on_nodes_without_endpoints() {
    let env = Env::start().await;
    let mut lab = Lab::new(&env, "etp", 2).await;
    lab.start_networks().await;
    let backend = lab.pod(1, "shop", "web", &[], serde_json::json!([])).await;
    lab.pods[backend].serve_http("web", 8080);
    let svc = service(
        &lab.client,
        "shop",
        "web",
        serde_json::json!({"type": "NodePort", "externalTrafficPolicy": "Local",
                           "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}),
    )
    .await;
    let np = node_port(&svc);
    let ip = lab.pods[backend].ip;
    set_endpoints(
        &lab.client,
        "shop",
        "web",
        ("http", 8080, "TCP"),
        &[(ip, "node-1", true)],
    )
    .await;
    let local = format!("{}:{np}", lab.nodes[1].ip());
    let seen = eventually("the node with the endpoint answers", || {
        http_get(&lab.external, &local, "/clientip", 2.0)
    })
    .await;
    assert!(
        seen.starts_with("10.99.0.1:"),
        "the client's address is kept: {seen}"
    );
    // The other node drops (no answer at all), rather than forwarding or refusing. Until its
    // proxy has written the Service's rules nothing listens on the port and the kernel refuses;
    // once written, the connection is dropped — a proxy that rejects never gets there.
    let remote = format!("{}:{np}", lab.nodes[0].ip());
    eventually(
        "the node without the endpoint drops the connection",
        || async {
            match http_get(&lab.external, &remote, "/clientip", 1.5).await {
                Err(e) if e.contains("refused") => Err(format!("rejected, not dropped: {e}")),
                Err(_) => Ok(()),
                Ok(body) => panic!("a node without endpoints answered: {body}"),
            }
        },
    )
    .await;
    lab.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_conntrack_entries_of_a_removed_endpoint_are_cleared() {
    let env = Env::start().await;
    let mut lab = Lab::new(&env, "udp", 1).await;
    lab.start_networks().await;
    let client = lab
        .pod(0, "shop", "client", &[], serde_json::json!([]))
        .await;
    // A UDP Service in front of the node's DNS server.
    let svc = service(
        &lab.client,
        "shop",
        "resolver",
        serde_json::json!({"ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]}),
    )
    .await;
    let node_ip = lab.nodes[0].ip();
    set_endpoints(
        &lab.client,
        "shop",
        "resolver",
        ("dns", 53, "UDP"),
        &[(node_ip, "node-0", true)],
    )
    .await;
    let cip = cluster_ip(&svc);
    let m = mtest().display().to_string();
    let query = [
        "dns",
        "resolver.shop.svc.cluster.local",
        "A",
        "--server",
        cip.as_str(),
    ];
    eventually("the UDP Service answers", || {
        run_in(&lab.pods[client].netns, &m, &query)
    })
    .await;
    let machine = lab.nodes[0].machine.netns();
    let cip_ref = &cip;
    let entries = || async move {
        run_in(
            machine,
            "conntrack",
            &["-L", "-p", "udp", "--orig-dst", cip_ref],
        )
        .await
        .map(|out| out.lines().filter(|l| l.contains("udp")).count())
    };
    assert!(
        entries().await.expect("conntrack -L") > 0,
        "the query left an entry"
    );
    set_endpoints(&lab.client, "shop", "resolver", ("dns", 53, "UDP"), &[]).await;
    eventually(
        "the entries NATed to the removed endpoint are gone",
        || async {
            match entries().await? {
                0 => Ok(()),
                n => Err(format!("{n} entries left")),
            }
        },
    )
    .await;
    lab.finish().await;
}
