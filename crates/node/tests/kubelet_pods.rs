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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_reports_ready_with_its_runtime_and_renews_its_lease() {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Node;
    let env = Env::start().await;
    let mut node = TestNode::start(&env).await;
    let nodes: kube::Api<Node> = kube::Api::all(env.client.clone());
    let n = support::until(&nodes, &node.name, |n: Option<&Node>| {
        n.and_then(|n| n.status.as_ref()?.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    })
    .await;
    let s = n.status.clone().expect("status");
    let ready = s
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert_eq!(ready.reason.as_deref(), Some("KubeletReady"));
    let info = s.node_info.clone().expect("nodeInfo");
    assert!(
        info.container_runtime_version
            .starts_with("containerd://1."),
        "{info:?}"
    );
    assert!(!info.kernel_version.is_empty());
    assert_eq!(info.operating_system, "linux");
    assert_eq!(
        s.daemon_endpoints
            .and_then(|d| d.kubelet_endpoint)
            .map(|e| e.port),
        node.kubelet().api_addr().map(|a| i32::from(a.port())),
        "daemonEndpoints report the port the kubelet API listens on"
    );
    let addrs = s.addresses.clone().expect("addresses");
    assert!(addrs.iter().any(|a| a.type_ == "InternalIP"));
    assert!(
        addrs
            .iter()
            .any(|a| a.type_ == "Hostname" && a.address == node.name)
    );
    let cap = s.capacity.clone().expect("capacity");
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    assert_eq!(cap["cpu"].0, cpus.to_string());
    assert_eq!(cap["pods"].0, "110");
    let alloc = s.allocatable.clone().expect("allocatable");
    let mem = |q: &str| {
        apimachinery::quantity::Quantity::parse(q)
            .expect("quantity")
            .value()
    };
    assert!(
        mem(&alloc["memory"].0) < mem(&cap["memory"].0),
        "{alloc:?} {cap:?}"
    );
    let images = s.images.clone().unwrap_or_default();
    assert!(
        images
            .iter()
            .any(|i| i.names.iter().flatten().any(|n| n.contains("busybox"))),
        "{images:?}"
    );
    assert_eq!(
        n.spec.as_ref().and_then(|s| s.pod_cidr.clone()),
        node.config.pod_cidr.map(|c| c.to_string())
    );
    // The Lease is held by the node and renewed.
    let leases: kube::Api<Lease> = kube::Api::namespaced(env.client.clone(), "kube-node-lease");
    let first = support::until(&leases, &node.name, |l: Option<&Lease>| l.is_some()).await;
    let t0 = first
        .spec
        .clone()
        .and_then(|s| s.renew_time)
        .expect("renewTime");
    assert_eq!(
        first.spec.and_then(|s| s.holder_identity).as_deref(),
        Some(node.name.as_str())
    );
    support::until(&leases, &node.name, |l: Option<&Lease>| {
        l.and_then(|l| l.spec.as_ref()?.renew_time.clone())
            .is_some_and(|t| t.0 > t0.0)
    })
    .await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_sees_its_environment_and_config_map_volume() {
    use k8s_openapi::api::core::v1::{
        ConfigMap, ConfigMapKeySelector, ConfigMapVolumeSource, EnvVar, EnvVarSource,
        ObjectFieldSelector, Volume, VolumeMount,
    };
    let env = Env::start().await;
    let mut node = TestNode::start(&env).await;
    let cms: kube::Api<ConfigMap> = kube::Api::namespaced(env.client.clone(), "default");
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("settings".into()),
            ..Default::default()
        },
        data: Some([("greeting".to_string(), "hello".to_string())].into()),
        ..Default::default()
    };
    cms.create(&Default::default(), &cm)
        .await
        .expect("configmap");
    let api = pods(&env);
    let mut pod = busybox(
        "envpod",
        &node.name,
        "echo \"$FOO $GREETING $POD_NAME $(cat /cfg/greeting) $(cat /etc/hosts | grep -c envpod)\"; exec sleep 3600",
    );
    let c = &mut pod.spec.as_mut().expect("spec").containers[0];
    c.env = Some(vec![
        EnvVar {
            name: "FOO".into(),
            value: Some("bar".into()),
            ..Default::default()
        },
        EnvVar {
            name: "GREETING".into(),
            value_from: Some(EnvVarSource {
                config_map_key_ref: Some(ConfigMapKeySelector {
                    name: "settings".into(),
                    key: "greeting".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        },
        EnvVar {
            name: "POD_NAME".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "metadata.name".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        },
    ]);
    c.volume_mounts = Some(vec![VolumeMount {
        name: "cfg".into(),
        mount_path: "/cfg".into(),
        ..Default::default()
    }]);
    pod.spec.as_mut().expect("spec").volumes = Some(vec![Volume {
        name: "cfg".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: "settings".into(),
            ..Default::default()
        }),
        ..Default::default()
    }]);
    create(&api, &pod).await;
    let p = until_pod(&api, "envpod", LONG, running).await;
    let uid = p.metadata.uid.clone().expect("uid");
    let log = node
        .rt
        .layout
        .container_log_file("default", "envpod", &uid, "main", 0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let text = loop {
        let t = std::fs::read_to_string(&log).unwrap_or_default();
        if !t.is_empty() || tokio::time::Instant::now() > deadline {
            break t;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        text.contains(" stdout F bar hello envpod hello 1"),
        "{text}"
    );
    api.delete("envpod", &DeleteParams::default())
        .await
        .expect("delete");
    until_gone(&api, "envpod").await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_sidecar_runs_beside_the_main_container_and_does_not_block_completion() {
    let env = Env::start().await;
    let mut node = TestNode::start(&env).await;
    let api = pods(&env);
    let mut pod = busybox("withsidecar", &node.name, "sleep 2; exit 0");
    let spec = pod.spec.as_mut().expect("spec");
    spec.restart_policy = Some("Never".into());
    let mut side = support::kubelet::container("side", "exec sleep 3600");
    side.restart_policy = Some("Always".into());
    spec.init_containers = Some(vec![side]);
    create(&api, &pod).await;
    // Both run at once, the sidecar's status among the init containers.
    let p = until_pod(
        &api,
        "withsidecar",
        LONG,
        |p: Option<&k8s_openapi::api::core::v1::Pod>| {
            p.is_some_and(|p| {
                ["side", "main"].iter().all(|c| {
                    container_status(p, c)
                        .is_some_and(|s| s.state.as_ref().is_some_and(|st| st.running.is_some()))
                })
            })
        },
    )
    .await;
    assert_eq!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running")
    );
    assert!(
        p.status
            .as_ref()
            .and_then(|s| s.init_container_statuses.as_ref())
            .is_some_and(|l| l[0].name == "side")
    );
    // The main container's success ends the pod; the sidecar is stopped.
    let p = until_pod(
        &api,
        "withsidecar",
        LONG,
        |p: Option<&k8s_openapi::api::core::v1::Pod>| {
            p.and_then(|p| p.status.as_ref()?.phase.as_deref()) == Some("Succeeded")
        },
    )
    .await;
    let main = container_status(&p, "main")
        .and_then(|c| c.state.as_ref()?.terminated.clone())
        .expect("main ended");
    assert_eq!(main.exit_code, 0);
    let side = container_status(&p, "side").expect("side");
    assert!(
        side.state.as_ref().is_some_and(|s| s.running.is_none()),
        "{side:?}"
    );
    api.delete("withsidecar", &DeleteParams::default())
        .await
        .expect("delete");
    until_gone(&api, "withsidecar").await;
    node.stop().await;
}
