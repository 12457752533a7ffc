//! The CRI node agent running real pods against an in-process API server: containers run
//! and write CRI logs, init containers run in order, crash loops back off, memory limits
//! kill with `OOMKilled`, liveness and readiness probes act, and deleting a pod leaves
//! nothing of it on the node.

mod support;

use std::time::Duration;

use kube::api::DeleteParams;
use support::kubelet::{TestNode, busybox, container_status, events_of, pods, until_pod};
use support::node_runtime::leftovers;
use support::{Env, create, until_gone};

const LONG: Duration = Duration::from_secs(60);

fn running(p: Option<&k8s_openapi::api::core::v1::Pod>) -> bool {
    p.and_then(|p| p.status.as_ref()?.phase.as_deref()) == Some("Running")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_runs_writes_its_cri_log_and_leaves_nothing_when_deleted() {
    let env = Env::start().await;
    let mut node = TestNode::start(&env).await;
    let api = pods(&env);
    create(
        &api,
        &busybox(
            "web",
            &node.name,
            "echo hello from the pod; exec sleep 3600",
        ),
    )
    .await;
    let p = until_pod(&api, "web", LONG, |p: Option<&_>| {
        p.and_then(|p| container_status(p, "main"))
            .is_some_and(|c| c.ready)
    })
    .await;
    let s = p.status.clone().expect("status");
    assert_eq!(s.phase.as_deref(), Some("Running"));
    let ip = s.pod_ip.clone().expect("a pod IP");
    let cidr = node.config.pod_cidr.expect("cidr");
    assert!(
        cidr.contains(ip.parse().expect("ipv4")),
        "{ip} outside {cidr}"
    );
    let c = container_status(&p, "main").expect("status");
    assert!(
        c.container_id
            .as_deref()
            .is_some_and(|id| id.starts_with("containerd://"))
    );
    assert_eq!(c.restart_count, 0);
    assert_eq!(s.qos_class.as_deref(), Some("BestEffort"));
    let uid = p.metadata.uid.clone().expect("uid");
    let log = node
        .rt
        .layout
        .container_log_file("default", "web", &uid, "main", 0);
    let text = std::fs::read_to_string(&log).expect("the CRI log");
    assert!(text.contains(" stdout F hello from the pod"), "{text}");
    let reasons: Vec<String> = events_of(&env, "web")
        .await
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    for want in ["Pulled", "Created", "Started"] {
        assert!(
            reasons.iter().any(|r| r == want),
            "{want} missing from {reasons:?}"
        );
    }

    api.delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    until_gone(&api, "web").await;
    // The agent removes the pod's sandbox once the API has let it go.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let left = leftovers(&node.rt).await;
        let pod_dir = node.rt.layout.pod_dir(&uid).exists();
        let log_dir = node.rt.layout.pod_log_dir("default", "web", &uid).exists();
        if left.is_empty() && !pod_dir && !log_dir {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "left behind: {left:?} pod dir {pod_dir} log dir {log_dir}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_run_in_order_before_the_main_container() {
    let env = Env::start().await;
    let mut node = TestNode::start(&env).await;
    let api = pods(&env);
    let mut pod = busybox("ordered", &node.name, "cat /work/order; exec sleep 3600");
    let spec = pod.spec.as_mut().expect("spec");
    let mut one = support::kubelet::container("one", "sleep 1; echo one >> /work/order");
    let mut two = support::kubelet::container("two", "echo two >> /work/order");
    let mount = k8s_openapi::api::core::v1::VolumeMount {
        name: "work".into(),
        mount_path: "/work".into(),
        ..Default::default()
    };
    for c in [&mut one, &mut two, &mut spec.containers[0]] {
        c.volume_mounts = Some(vec![mount.clone()]);
    }
    spec.init_containers = Some(vec![one, two]);
    spec.volumes = Some(vec![k8s_openapi::api::core::v1::Volume {
        name: "work".into(),
        empty_dir: Some(Default::default()),
        ..Default::default()
    }]);
    create(&api, &pod).await;
    // While the first init container runs, the main one waits in PodInitializing.
    let p = until_pod(&api, "ordered", LONG, |p: Option<&_>| {
        p.and_then(|p| container_status(p, "one"))
            .is_some_and(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
    })
    .await;
    let main = container_status(&p, "main").expect("main");
    assert_eq!(
        main.state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.as_deref()),
        Some("PodInitializing")
    );
    assert_eq!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    let p = until_pod(&api, "ordered", LONG, running).await;
    for init in ["one", "two"] {
        let s = container_status(&p, init).expect("init status");
        let t = s
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .expect("terminated");
        assert_eq!(
            (t.exit_code, t.reason.as_deref()),
            (0, Some("Completed")),
            "{init}"
        );
    }
    let uid = p.metadata.uid.clone().expect("uid");
    let log = node
        .rt
        .layout
        .container_log_file("default", "ordered", &uid, "main", 0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let text = loop {
        let t = std::fs::read_to_string(&log).unwrap_or_default();
        if t.contains("two") || tokio::time::Instant::now() > deadline {
            break t;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap_or(""))
        .collect();
    assert_eq!(lines, ["one", "two"], "{text}");
    api.delete("ordered", &DeleteParams::default())
        .await
        .expect("delete");
    until_gone(&api, "ordered").await;
    node.stop().await;
}
