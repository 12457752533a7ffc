//! Pods on virtual nodes against the in-process API server: binding, running with an IP of
//! the node's subnet, completion and failure, init containers, host networking, deletion
//! (immediate, and the kubelet's graceful flow) and a new pod of the same name.

mod support;

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Binding, Container, ObjectReference, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use node::{NodeTemplate, VirtualNodes};
use serde_json::json;
use support::{Env, create, fast, in_phase, pod, until, until_gone};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_pod_runs_with_an_ip_from_its_nodes_cidr() {
    let env = Env::start().await;
    let vns = VirtualNodes::start(env.client.clone(), fast())
        .await
        .expect("start");
    let vn = vns
        .add("vn-0", &NodeTemplate::default())
        .await
        .expect("node");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    create(&pods, &pod("web", Some("vn-0"))).await;
    let p = until(&pods, "web", in_phase("Running")).await;
    let s = p.status.expect("status");
    let ip: Ipv4Addr = s
        .pod_ip
        .as_deref()
        .expect("pod IP")
        .parse()
        .expect("an IPv4");
    assert!(
        vn.pod_cidr().contains(ip),
        "{ip} is outside {}",
        vn.pod_cidr()
    );
    assert_eq!(s.pod_ips.expect("podIPs")[0].ip, ip.to_string());
    assert_eq!(
        s.host_ip.as_deref(),
        Some(vn.internal_ip().to_string().as_str())
    );
    assert!(s.start_time.is_some());
    assert_eq!(s.qos_class.as_deref(), Some("BestEffort"));
    let c = &s.container_statuses.expect("container statuses")[0];
    assert!(c.ready);
    assert_eq!(c.restart_count, 0);
    assert!(
        c.container_id
            .as_deref()
            .is_some_and(|id| id.starts_with("virtual://"))
    );
    assert!(c.image_id.contains("@sha256:"));
    assert!(
        c.state
            .as_ref()
            .and_then(|st| st.running.as_ref())
            .and_then(|r| r.started_at.as_ref())
            .is_some()
    );
    let conds = s.conditions.expect("conditions");
    for ty in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        assert!(
            conds.iter().any(|c| c.type_ == ty && c.status == "True"),
            "{ty}"
        );
    }
    // The status was written by the virtual kubelet's field manager.
    let managers: Vec<String> = p
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        managers.iter().any(|m| m == "virtual-kubelet"),
        "{managers:?}"
    );
    vns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_bound_through_the_binding_subresource_run_and_get_distinct_ips() {
    let env = Env::start().await;
    let vns = VirtualNodes::start(env.client.clone(), fast())
        .await
        .expect("start");
    vns.add_many("vn-", 2, &NodeTemplate::default())
        .await
        .expect("nodes");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let mut ips = Vec::new();
    for (name, node) in [("a", "vn-0"), ("b", "vn-0"), ("c", "vn-1")] {
        create(&pods, &pod(name, None)).await;
        let binding = Binding {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            target: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(node.into()),
                ..Default::default()
            },
        };
        let _: serde_json::Value = env
            .client
            .request(
                http::Request::post(format!("/api/v1/namespaces/default/pods/{name}/binding"))
                    .header("content-type", "application/json")
                    .body(serde_json::to_vec(&binding).expect("json"))
                    .expect("request"),
            )
            .await
            .expect("bound");
        let p = until(&pods, name, in_phase("Running")).await;
        ips.push(p.status.and_then(|s| s.pod_ip).expect("pod IP"));
    }
    assert_eq!(ips, vec!["10.244.0.2", "10.244.0.3", "10.244.1.2"]);
    vns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_never_restarts_succeeds_and_the_fail_annotation_fails_it() {
    let env = Env::start().await;
    let vns = VirtualNodes::start(env.client.clone(), fast())
        .await
        .expect("start");
    let vn = vns
        .add("vn-0", &NodeTemplate::default())
        .await
        .expect("node");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let mut ok = pod("job-ok", Some("vn-0"));
    let mut bad = pod("job-bad", Some("vn-0"));
    for p in [&mut ok, &mut bad] {
        p.spec.as_mut().expect("spec").restart_policy = Some("Never".into());
    }
    bad.metadata.annotations = Some(
        [(
            "virtual.matryoshka.dev/fail".to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    create(&pods, &ok).await;
    create(&pods, &bad).await;

    let done = until(&pods, "job-ok", in_phase("Succeeded")).await;
    let c = &done
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .expect("statuses")[0];
    let t = c
        .state
        .as_ref()
        .and_then(|s| s.terminated.clone())
        .expect("terminated");
    assert_eq!((t.exit_code, t.reason.as_deref()), (0, Some("Completed")));
    assert!(t.started_at.is_some() && t.finished_at.is_some());

    let failed = until(&pods, "job-bad", in_phase("Failed")).await;
    let c = &failed
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .expect("statuses")[0];
    let t = c
        .state
        .as_ref()
        .and_then(|s| s.terminated.clone())
        .expect("terminated");
    assert_eq!((t.exit_code, t.reason.as_deref()), (1, Some("Error")));
    // Finished pods give their IPs back.
    assert_eq!(vn.pod_ips_in_use(), 0);
    vns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_pod_goes_away() {
    let env = Env::start().await;
    let vns = VirtualNodes::start(env.client.clone(), fast())
        .await
        .expect("start");
    let vn = vns
        .add("vn-0", &NodeTemplate::default())
        .await
        .expect("node");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    create(&pods, &pod("web", Some("vn-0"))).await;
    until(&pods, "web", in_phase("Running")).await;
    let first_ip = pods
        .get("web")
        .await
        .expect("pod")
        .status
        .and_then(|s| s.pod_ip);
    pods.delete("web", &DeleteParams::default())
        .await
        .expect("deleted");
    until_gone(&pods, "web").await;
    // Its IP is free again: the next pod gets it.
    create(&pods, &pod("next", Some("vn-0"))).await;
    let next = until(&pods, "next", in_phase("Running")).await;
    assert_eq!(next.status.and_then(|s| s.pod_ip), first_ip);
    assert_eq!(vn.pod_ips_in_use(), 1);
    vns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_marked_for_deletion_is_stopped_then_deleted_with_grace_zero() {
    let env = Env::start().await;
    let vns = VirtualNodes::start(env.client.clone(), fast())
        .await
        .expect("start");
    vns.add("vn-0", &NodeTemplate::default())
        .await
        .expect("node");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    // A finalizer holds the pod, so the API server marks it instead of removing it, as it does
    // with a bound pod's grace period upstream.
    let mut held = pod("held", Some("vn-0"));
    held.metadata.finalizers = Some(vec!["test.matryoshka.dev/hold".into()]);
    create(&pods, &held).await;
    until(&pods, "held", in_phase("Running")).await;
    pods.delete("held", &DeleteParams::default().grace_period(30))
        .await
        .expect("marked");
    let stopped = until(&pods, "held", in_phase("Succeeded")).await;
    assert!(stopped.metadata.deletion_timestamp.is_some());
    let c = &stopped
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .expect("statuses")[0];
    assert!(
        c.state.as_ref().is_some_and(|s| s.terminated.is_some()),
        "{c:?}"
    );
    pods.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("finalizer removed");
    until_gone(&pods, "held").await;
    vns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_complete_and_host_network_pods_use_the_node_ip() {
    let env = Env::start().await;
    let vns = VirtualNodes::start(env.client.clone(), fast())
        .await
        .expect("start");
    let vn = vns
        .add("vn-0", &NodeTemplate::default())
        .await
        .expect("node");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let mut p = pod("with-init", Some("vn-0"));
    let spec = p.spec.as_mut().expect("spec");
    spec.host_network = Some(true);
    spec.init_containers = Some(vec![Container {
        name: "setup".into(),
        image: Some("busybox:1.36".into()),
        ..Container::default()
    }]);
    create(&pods, &p).await;
    // The init container completes while the pod is still Pending.
    let initialized = until(&pods, "with-init", |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()).is_some_and(|s| {
            s.phase.as_deref() == Some("Pending")
                && s.init_container_statuses.as_ref().is_some_and(|l| {
                    l.iter()
                        .all(|c| c.state.as_ref().is_some_and(|st| st.terminated.is_some()))
                })
        })
    })
    .await;
    let waiting = &initialized
        .status
        .and_then(|s| s.container_statuses)
        .expect("statuses")[0];
    assert!(
        waiting
            .state
            .as_ref()
            .is_some_and(|st| st.waiting.is_some())
    );
    let running = until(&pods, "with-init", in_phase("Running")).await;
    let s = running.status.expect("status");
    let init = &s.init_container_statuses.expect("init statuses")[0];
    let done = init
        .state
        .as_ref()
        .and_then(|st| st.terminated.clone())
        .expect("terminated");
    assert_eq!(
        (done.exit_code, done.reason.as_deref()),
        (0, Some("Completed"))
    );
    let main = &s.container_statuses.expect("statuses")[0];
    let started = main
        .state
        .as_ref()
        .and_then(|st| st.running.clone())
        .expect("running");
    assert!(started.started_at >= done.finished_at);
    assert_eq!(s.pod_ip, Some(vn.internal_ip().to_string()));
    assert_eq!(vn.pod_ips_in_use(), 0, "host-network pods take no pod IP");
    vns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_pod_of_the_same_name_runs_again() {
    let env = Env::start().await;
    let vns = VirtualNodes::start(env.client.clone(), fast())
        .await
        .expect("start");
    vns.add("vn-0", &NodeTemplate::default())
        .await
        .expect("node");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let first = create(&pods, &pod("web", Some("vn-0"))).await.metadata.uid;
    until(&pods, "web", in_phase("Running")).await;
    pods.delete("web", &DeleteParams::default())
        .await
        .expect("deleted");
    until_gone(&pods, "web").await;
    let second = create(&pods, &pod("web", Some("vn-0"))).await.metadata.uid;
    assert_ne!(first, second);
    let p = until(&pods, "web", in_phase("Running")).await;
    assert_eq!(p.metadata.uid, second);
    vns.shutdown().await;
}
