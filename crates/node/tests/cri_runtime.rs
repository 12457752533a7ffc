//! The runtime facts the CRI kubelet stands on, checked against a real containerd started by
//! the agent's supervisor: CRI answers, the network becomes ready once the node's CNI list
//! is written, a sandbox gets an IP of the node's subnet, a container writes its CRI log,
//! a memory limit kills with `OOMKilled`, and removing the sandbox leaves nothing behind.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use k8s_cri::v1 as cri;
use node::kubelet::cni::{self, PodNetwork};
use support::images::BUSYBOX;
use support::node_runtime::{TestRuntime, leftovers};

fn network(rt: &TestRuntime, subnet: &str) -> PodNetwork {
    PodNetwork {
        name: format!("net-{}", rt.bridge),
        bridge: rt.bridge.clone(),
        subnet: subnet.parse().expect("cidr"),
        ipam_dir: rt.layout.cni_ipam_dir(),
        mtu: 0,
        masquerade: true,
    }
}

async fn network_ready(c: &node::kubelet::cri::CriClient) -> bool {
    let s = c.status().await.expect("status");
    s.status
        .into_iter()
        .flat_map(|s| s.conditions)
        .any(|c| c.r#type == "NetworkReady" && c.status)
}

fn sandbox_config(rt: &TestRuntime, name: &str, uid: &str) -> cri::PodSandboxConfig {
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.into(),
            uid: uid.into(),
            namespace: "default".into(),
            attempt: 0,
        }),
        hostname: name.into(),
        log_directory: rt
            .layout
            .pod_log_dir("default", name, uid)
            .display()
            .to_string(),
        labels: HashMap::from([("io.kubernetes.pod.uid".to_string(), uid.to_string())]),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: format!("{}/kubepods/besteffort/pod{uid}", rt.cgroup_root),
            security_context: Some(cri::LinuxSandboxSecurityContext {
                namespace_options: Some(cri::NamespaceOption {
                    pid: cri::NamespaceMode::Container as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn container_config(name: &str, script: &str, memory: i64) -> cri::ContainerConfig {
    cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: name.into(),
            attempt: 0,
        }),
        image: Some(cri::ImageSpec {
            image: BUSYBOX.into(),
            ..Default::default()
        }),
        command: vec!["sh".into(), "-c".into(), script.into()],
        log_path: format!("{name}/0.log"),
        linux: Some(cri::LinuxContainerConfig {
            resources: Some(cri::LinuxContainerResources {
                memory_limit_in_bytes: memory,
                oom_score_adj: 1000,
                cpu_shares: 2,
                ..Default::default()
            }),
            security_context: Some(cri::LinuxContainerSecurityContext {
                namespace_options: Some(cri::NamespaceOption {
                    pid: cri::NamespaceMode::Container as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
        }),
        ..Default::default()
    }
}

async fn until_exited(c: &node::kubelet::cri::CriClient, id: &str) -> cri::ContainerStatus {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let s = c.container_status(id).await.expect("container status");
        if s.state == cri::ContainerState::ContainerExited as i32 {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still running: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_runs_containers_that_log_and_get_oom_killed() {
    let rt = TestRuntime::start().await;
    let c = rt.cri();
    let v = c.version().await.expect("version");
    assert_eq!(v.runtime_name, "containerd");
    assert!(!network_ready(&c).await, "no CNI configuration yet");
    cni::write(&rt.layout.cni_conf_dir(), &network(&rt, "10.250.7.0/24")).expect("conflist");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !network_ready(&c).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the network never became ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let image = c.image_status(BUSYBOX).await.expect("image status");
    assert!(image.is_some(), "the imported busybox is known to CRI");

    let uid = "0f0e0d0c-0000-4000-8000-000000000001";
    let sb = sandbox_config(&rt, "web", uid);
    let id = c.run_pod_sandbox(sb.clone()).await.expect("sandbox");
    let st = c.pod_sandbox_status(&id).await.expect("sandbox status");
    let ip = st.network.expect("network").ip;
    assert!(ip.starts_with("10.250.7."), "{ip}");

    let hello = c
        .create_container(
            &id,
            container_config("hello", "echo hello; echo oops >&2", 0),
            sb.clone(),
        )
        .await
        .expect("create");
    c.start_container(&hello).await.expect("start");
    let s = until_exited(&c, &hello).await;
    assert_eq!((s.exit_code, s.reason.as_str()), (0, "Completed"));
    let log = std::fs::read_to_string(
        rt.layout
            .container_log_file("default", "web", uid, "hello", 0),
    )
    .expect("the CRI log file");
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert!(
        lines.iter().any(|l| l.ends_with(" stdout F hello")),
        "{log}"
    );
    assert!(lines.iter().any(|l| l.ends_with(" stderr F oops")), "{log}");

    let hog = c
        .create_container(
            &id,
            container_config(
                "hog",
                "a=aaaaaaaaaaaaaaaa; while true; do a=\"$a$a\"; done",
                32 << 20,
            ),
            sb,
        )
        .await
        .expect("create");
    c.start_container(&hog).await.expect("start");
    let s = until_exited(&c, &hog).await;
    assert_eq!(
        (s.exit_code, s.reason.as_str()),
        (137, "OOMKilled"),
        "{s:?}"
    );

    c.stop_pod_sandbox(&id).await.expect("stop");
    c.remove_pod_sandbox(&id).await.expect("remove");
    let left = leftovers(&rt).await;
    assert!(
        left.sandboxes.is_empty() && left.netns.is_empty() && left.mounts.is_empty(),
        "{left:?}"
    );
}
