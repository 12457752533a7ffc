//! The CRI node agent under change: it adopts running containers when it restarts (no
//! duplicates, no restarts), survives containerd restarting, removes what belongs to pods
//! deleted while it was down, reports image failures with upstream's reasons, stops pods
//! gracefully (preStop, then the signal) and reads termination messages.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ExecAction, Lifecycle, LifecycleHandler, Pod};
use kube::api::DeleteParams;
use support::kubelet::{TestNode, busybox, container_status, events_of, pods, until_pod};
use support::node_runtime::leftovers;
use support::{Env, create, until_gone};

const LONG: Duration = Duration::from_secs(60);

fn ready(p: Option<&Pod>) -> bool {
    p.and_then(|p| container_status(p, "main"))
        .is_some_and(|c| c.ready)
}

fn container_id(p: &Pod) -> String {
    container_status(p, "main")
        .and_then(|c| c.container_id.clone())
        .expect("a container ID")
}

async fn count_instances(node: &TestNode, uid: &str) -> (usize, usize) {
    let cri = node.kubelet().cri();
    let s = cri
        .list_pod_sandboxes_of(uid)
        .await
        .expect("sandboxes")
        .len();
    let c = cri.list_containers_of(uid).await.expect("containers").len();
    (s, c)
}

async fn until_clean(node: &TestNode) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left = leftovers(&node.rt).await;
        if left.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "left behind: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_adopts_running_containers_and_cleans_up_deleted_pods() {
    let env = Env::start().await;
    let mut node = TestNode::start(&env).await;
    let api = pods(&env);
    create(&api, &busybox("keep", &node.name, "exec sleep 3600")).await;
    create(&api, &busybox("drop", &node.name, "exec sleep 3600")).await;
    let keep = until_pod(&api, "keep", LONG, ready).await;
    let dropped = until_pod(&api, "drop", LONG, ready).await;
    let (id, uid) = (container_id(&keep), keep.metadata.uid.clone().expect("uid"));
    let drop_uid = dropped.metadata.uid.clone().expect("uid");

    // Down: its containers keep running; a pod is force-deleted meanwhile.
    if let Some(k) = node.kubelet.take() {
        k.stop(node::kubelet::Teardown::KeepPods).await;
    }
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    api.delete("drop", &force).await.expect("force delete");
    until_gone(&api, "drop").await;
    node.restart(&env).await;

    // The same instance, not restarted, not duplicated.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let keep = until_pod(&api, "keep", LONG, ready).await;
    assert_eq!(container_id(&keep), id);
    assert_eq!(
        container_status(&keep, "main").map(|c| c.restart_count),
        Some(0)
    );
    assert_eq!(count_instances(&node, &uid).await, (1, 1));
    // The deleted pod's sandbox and containers are gone.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while count_instances(&node, &drop_uid).await != (0, 0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the deleted pod's containers remain"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!node.rt.layout.pod_dir(&drop_uid).exists());
    api.delete("keep", &DeleteParams::default())
        .await
        .expect("delete");
    until_gone(&api, "keep").await;
    until_clean(&node).await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_survives_containerd_restarting() {
    let env = Env::start().await;
    let mut node = TestNode::start(&env).await;
    let api = pods(&env);
    create(&api, &busybox("steady", &node.name, "exec sleep 3600")).await;
    let p = until_pod(&api, "steady", LONG, ready).await;
    let id = container_id(&p);
    node.kubelet().kill_containerd().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    node.kubelet()
        .restart_containerd()
        .await
        .expect("containerd starts again");
    // New pods run, the old one is untouched.
    create(&api, &busybox("after", &node.name, "exec sleep 3600")).await;
    until_pod(&api, "after", LONG, ready).await;
    let p = until_pod(&api, "steady", LONG, ready).await;
    assert_eq!(container_id(&p), id);
    for name in ["steady", "after"] {
        api.delete(name, &DeleteParams::default())
            .await
            .expect("delete");
        until_gone(&api, name).await;
    }
    until_clean(&node).await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_failures_wait_with_upstreams_reasons() {
    let env = Env::start().await;
    let mut node = TestNode::start(&env).await;
    let api = pods(&env);
    // A registry on a loopback port nobody listens on.
    let mut pull = busybox("pull", &node.name, "true");
    pull.spec.as_mut().expect("spec").containers[0].image = Some("127.0.0.1:1/nothing:1".into());
    let mut never = busybox("never", &node.name, "true");
    let c = &mut never.spec.as_mut().expect("spec").containers[0];
    c.image = Some("docker.io/library/absent:1".into());
    c.image_pull_policy = Some("Never".into());
    create(&api, &pull).await;
    create(&api, &never).await;
    let reason = |p: Option<&Pod>| {
        p.and_then(|p| container_status(p, "main"))
            .and_then(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone())
    };
    until_pod(&api, "pull", LONG, |p: Option<&Pod>| {
        reason(p).as_deref() == Some("ErrImagePull")
    })
    .await;
    let p = until_pod(&api, "pull", LONG, |p: Option<&Pod>| {
        reason(p).as_deref() == Some("ImagePullBackOff")
    })
    .await;
    assert_eq!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    let p = until_pod(&api, "never", LONG, |p: Option<&Pod>| {
        reason(p).as_deref() == Some("ErrImageNeverPull")
    })
    .await;
    let msg = container_status(&p, "main")
        .and_then(|c| c.state.as_ref()?.waiting.as_ref()?.message.clone());
    assert_eq!(
        msg.as_deref(),
        Some(
            "Container image \"docker.io/library/absent:1\" is not present with pull policy of Never"
        )
    );
    let events = events_of(&env, "pull").await;
    for want in ["Pulling", "Failed", "BackOff"] {
        assert!(
            events.iter().any(|(r, _)| r == want),
            "{want} missing from {events:?}"
        );
    }
    for name in ["pull", "never"] {
        api.delete(name, &DeleteParams::default())
            .await
            .expect("delete");
        until_gone(&api, name).await;
    }
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_pod_stops_gracefully_after_its_pre_stop_hook() {
    let env = Env::start().await;
    let mut node = TestNode::start(&env).await;
    let api = pods(&env);
    // The main process ignores nothing: SIGTERM ends it (exit 143) after preStop wrote a mark.
    let mut pod = busybox(
        "graceful",
        &node.name,
        "trap 'echo term >> /dev/termination-log; exit 143' TERM; while true; do sleep 0.2; done",
    );
    let c = &mut pod.spec.as_mut().expect("spec").containers[0];
    c.lifecycle = Some(Lifecycle {
        pre_stop: Some(LifecycleHandler {
            exec: Some(ExecAction {
                command: Some(vec![
                    "sh".into(),
                    "-c".into(),
                    "echo prestop > /dev/termination-log".into(),
                ]),
            }),
            ..LifecycleHandler::default()
        }),
        ..Lifecycle::default()
    });
    pod.spec
        .as_mut()
        .expect("spec")
        .termination_grace_period_seconds = Some(10);
    pod.metadata.finalizers = Some(vec!["test.matryoshka.dev/hold".into()]);
    create(&api, &pod).await;
    let p = until_pod(&api, "graceful", LONG, ready).await;
    let uid = p.metadata.uid.clone().expect("uid");
    // A finalizer of the test's own keeps the pod readable after the agent's final delete.
    api.delete("graceful", &DeleteParams::default())
        .await
        .expect("delete");
    let last = until_pod(&api, "graceful", LONG, |p: Option<&Pod>| {
        p.and_then(|p| container_status(p, "main"))
            .and_then(|c| c.state.as_ref()?.terminated.as_ref())
            .is_some()
    })
    .await;
    let t = container_status(&last, "main")
        .and_then(|c| c.state.as_ref()?.terminated.clone())
        .expect("terminated");
    assert_eq!(t.exit_code, 143, "{t:?}");
    assert_eq!(t.message.as_deref(), Some("prestop\nterm\n"));
    assert_eq!(
        last.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Failed")
    );
    let release = serde_json::json!({"metadata": {"finalizers": null}});
    api.patch(
        "graceful",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&release),
    )
    .await
    .expect("release the finalizer");
    until_gone(&api, "graceful").await;
    let events = events_of(&env, "graceful").await;
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "Killing" && m == "Stopping container main"),
        "{events:?}"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while count_instances(&node, &uid).await != (0, 0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the pod's containers remain"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    node.stop().await;
}
