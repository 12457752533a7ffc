//! NetworkPolicy on real kernels: pods of several namespaces on two machines, policies
//! created and deleted through the API, traffic checked after each change.

mod support;

use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DeleteParams, PostParams};
use nodenet::podnet::Netns;
use support::*;

async fn policy(client: &kube::Client, ns: &str, spec: serde_json::Value) {
    let name = spec["name"].as_str().unwrap().to_string();
    let np: NetworkPolicy = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": spec["spec"],
    }))
    .expect("a NetworkPolicy");
    Api::<NetworkPolicy>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &np)
        .await
        .expect("policy created");
}

async fn delete_policy(client: &kube::Client, ns: &str, name: &str) {
    Api::<NetworkPolicy>::namespaced(client.clone(), ns)
        .delete(name, &DeleteParams::default())
        .await
        .expect("policy deleted");
}

/// Waits until `from` reaches `target` (or, with `false`, until it no longer does: the
/// connection attempt times out, dropped rather than refused).
async fn reaches(from: &Netns, target: &str, want: bool) {
    let what = format!(
        "{} {} {target}",
        from.name(),
        if want { "reaches" } else { "is blocked from" }
    );
    eventually(&what, || async move {
        match (http_get(from, target, "/", 1.0).await, want) {
            (Ok(_), true) => Ok(()),
            (Err(e), false) if !e.contains("refused") => Ok(()),
            (r, _) => Err(format!("{r:?}")),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ingress_deny_blocks_and_a_namespace_selector_admits_only_that_namespace() {
    let env = Env::start().await;
    let mut lab = Lab::new(&env, "ing", 2).await;
    lab.start_networks().await;
    let http = serde_json::json!([{"name": "http", "containerPort": 8080}]);
    let web = lab.pod(1, "shop", "web", &[("app", "web")], http).await;
    lab.pods[web].serve_http("web", 8080);
    let same_ns = lab
        .pod(0, "shop", "c-shop", &[], serde_json::json!([]))
        .await;
    let friend = lab
        .pod(0, "friend", "c-friend", &[], serde_json::json!([]))
        .await;
    let same_node = lab
        .pod(1, "other", "c-other", &[], serde_json::json!([]))
        .await;
    let svc = service(
        &lab.client,
        "shop",
        "web",
        serde_json::json!({"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}),
    )
    .await;
    let web_ip = lab.pods[web].ip;
    set_endpoints(
        &lab.client,
        "shop",
        "web",
        ("http", 8080, "TCP"),
        &[(web_ip, "node-1", true)],
    )
    .await;
    let direct = format!("{web_ip}:8080");
    let via_service = format!("{}:80", cluster_ip(&svc));
    for c in [same_ns, friend, same_node] {
        reaches(&lab.pods[c].netns, &via_service, true).await;
    }

    policy(
        &lab.client,
        "shop",
        serde_json::json!({"name": "deny", "spec": {
        "podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress"]}}),
    )
    .await;
    for c in [same_ns, friend, same_node] {
        reaches(&lab.pods[c].netns, &direct, false).await;
        reaches(&lab.pods[c].netns, &via_service, false).await;
    }
    // The node itself (kubelet probes) still reaches its pod.
    reaches(lab.nodes[1].machine.netns(), &direct, true).await;

    policy(&lab.client, "shop", serde_json::json!({"name": "from-friend", "spec": {
        "podSelector": {"matchLabels": {"app": "web"}},
        "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "friend"}}}],
                     "ports": [{"port": "http"}]}]}})).await;
    reaches(&lab.pods[friend].netns, &via_service, true).await;
    reaches(&lab.pods[friend].netns, &direct, true).await;
    reaches(&lab.pods[same_ns].netns, &direct, false).await;
    reaches(&lab.pods[same_node].netns, &direct, false).await;

    // Replies of allowed connections pass even when the pod may send nothing itself.
    policy(
        &lab.client,
        "shop",
        serde_json::json!({"name": "web-no-egress", "spec": {
        "podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Egress"]}}),
    )
    .await;
    reaches(
        &lab.pods[web].netns,
        &format!("{}:8080", lab.pods[same_node].ip),
        false,
    )
    .await;
    reaches(&lab.pods[friend].netns, &via_service, true).await;
    delete_policy(&lab.client, "shop", "web-no-egress").await;

    delete_policy(&lab.client, "shop", "deny").await;
    reaches(&lab.pods[same_ns].netns, &direct, false).await;
    delete_policy(&lab.client, "shop", "from-friend").await;
    for c in [same_ns, friend, same_node] {
        reaches(&lab.pods[c].netns, &direct, true).await;
    }
    lab.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_egress_policy_blocks_a_pods_traffic_while_dns_keeps_working() {
    let env = Env::start().await;
    let mut lab = Lab::new(&env, "egr", 2).await;
    lab.start_networks().await;
    let web = lab
        .pod(1, "shop", "web", &[("app", "web")], serde_json::json!([]))
        .await;
    lab.pods[web].serve_http("web", 8080);
    let client = lab
        .pod(
            0,
            "shop",
            "client",
            &[("role", "client")],
            serde_json::json!([]),
        )
        .await;
    let svc = service(
        &lab.client,
        "shop",
        "web",
        serde_json::json!({"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}),
    )
    .await;
    let web_ip = lab.pods[web].ip;
    set_endpoints(
        &lab.client,
        "shop",
        "web",
        ("http", 8080, "TCP"),
        &[(web_ip, "node-1", true)],
    )
    .await;
    let via_service = format!("{}:80", cluster_ip(&svc));
    let ns = &lab.pods[client].netns;
    reaches(ns, &via_service, true).await;
    let m = mtest().display().to_string();
    let lookup = ["dns", "web.shop.svc.cluster.local", "A", "--server", DNS_IP];
    eventually("DNS answers", || run_in(ns, &m, &lookup)).await;
    // A server on node 1's own address, off the pod network.
    let mut node_server = lab.nodes[1].machine.netns().command("unshare");
    node_server
        .args(["--uts", &m, "serve-http", "--port", "9100"])
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true);
    let _node_server = node_server.spawn().expect("a server on node 1");
    let node1 = format!("{}:9100", lab.nodes[1].ip());
    reaches(ns, &node1, true).await;

    policy(
        &lab.client,
        "shop",
        serde_json::json!({"name": "no-egress", "spec": {
        "podSelector": {"matchLabels": {"role": "client"}}, "policyTypes": ["Egress"]}}),
    )
    .await;
    reaches(ns, &via_service, false).await;
    reaches(ns, &node1, false).await;
    let answer = run_in(ns, &m, &lookup)
        .await
        .expect("DNS still answers under the egress policy");
    assert!(answer.contains(&cluster_ip(&svc)), "{answer}");

    // Allowed again to the web pods on their port (the destination after the Service's
    // DNAT), and to node addresses except the gateway by ipBlock.
    policy(
        &lab.client,
        "shop",
        serde_json::json!({"name": "to-web", "spec": {
        "podSelector": {"matchLabels": {"role": "client"}},
        "egress": [
            {"to": [{"podSelector": {"matchLabels": {"app": "web"}}}], "ports": [{"port": 8080}]},
            {"to": [{"ipBlock": {"cidr": "10.99.0.0/16", "except": ["10.99.0.1/32"]}}],
             "ports": [{"port": 9000, "endPort": 9200}]}
        ]}}),
    )
    .await;
    reaches(ns, &via_service, true).await;
    reaches(ns, &node1, true).await;
    let mut outside = lab.external.command("unshare");
    outside
        .args(["--uts", &m, "serve-http", "--port", "9100"])
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true);
    let _outside = outside.spawn().expect("a server at the gateway");
    reaches(ns, "10.99.0.1:9100", false).await;
    lab.finish().await;
}
