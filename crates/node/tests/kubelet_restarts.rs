//! Restarts on a real node: a crashing container backs off with growing delays
//! (`CrashLoopBackOff`), a memory hog is `OOMKilled`, a failing liveness probe restarts its
//! container, and readiness follows an HTTP probe.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ExecAction, HTTPGetAction, Pod, Probe, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::DeleteParams;
use support::kubelet::{TestNode, busybox, container_status, events_of, pods, until_pod};
use support::{Env, create, until_gone};

const LONG: Duration = Duration::from_secs(90);

fn waiting(p: &Pod, c: &str) -> Option<(String, String)> {
    let w = container_status(p, c)?.state.as_ref()?.waiting.as_ref()?;
    Some((
        w.reason.clone().unwrap_or_default(),
        w.message.clone().unwrap_or_default(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashing_container_backs_off_with_growing_delays() {
    let env = Env::start().await;
    let mut node = TestNode::start(&env).await;
    let api = pods(&env);
    create(&api, &busybox("crash", &node.name, "echo dying; exit 3")).await;
    // Delays 2 s, 4 s, 8 s (the test node's back-off starts at 2 s).
    let seen = std::sync::Mutex::new(Vec::<String>::new());
    let p = until_pod(&api, "crash", LONG, |p: Option<&Pod>| {
        let mut seen = seen.lock().expect("lock");
        if let Some((reason, msg)) = p.and_then(|p| waiting(p, "main"))
            && reason == "CrashLoopBackOff"
            && !seen.contains(&msg)
        {
            seen.push(msg);
        }
        seen.iter().any(|m| m.starts_with("back-off 8s"))
    })
    .await;
    let seen = seen.into_inner().expect("lock");
    let uid = p.metadata.uid.clone().expect("uid");
    let expected: Vec<String> = ["2s", "4s", "8s"]
        .iter()
        .map(|d| format!("back-off {d} restarting failed container=main pod=crash_default({uid})"))
        .collect();
    assert_eq!(seen, expected);
    let c = container_status(&p, "main").expect("status");
    assert!(c.restart_count >= 3, "{c:?}");
    let last = c
        .last_state
        .as_ref()
        .and_then(|l| l.terminated.as_ref())
        .expect("last state");
    assert_eq!((last.exit_code, last.reason.as_deref()), (3, Some("Error")));
    assert_eq!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running")
    );
    let events = events_of(&env, "crash").await;
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "BackOff"
                && m.starts_with("Back-off restarting failed container main")),
        "{events:?}"
    );
    api.delete("crash", &DeleteParams::default())
        .await
        .expect("delete");
    until_gone(&api, "crash").await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_limit_kills_a_hog_with_oom_killed() {
    let env = Env::start().await;
    let mut node = TestNode::start(&env).await;
    let api = pods(&env);
    let mut pod = busybox(
        "hog",
        &node.name,
        "a=aaaaaaaaaaaaaaaa; while true; do a=\"$a$a\"; done",
    );
    let spec = pod.spec.as_mut().expect("spec");
    spec.restart_policy = Some("Never".into());
    let limits = BTreeMap::from([
        ("memory".to_string(), Quantity("32Mi".into())),
        ("cpu".to_string(), Quantity("500m".into())),
    ]);
    spec.containers[0].resources = Some(ResourceRequirements {
        limits: Some(limits),
        ..Default::default()
    });
    create(&api, &pod).await;
    let p = until_pod(&api, "hog", LONG, |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.phase.as_deref()) == Some("Failed")
    })
    .await;
    let t = container_status(&p, "main")
        .and_then(|c| c.state.as_ref()?.terminated.clone())
        .expect("terminated");
    assert_eq!((t.exit_code, t.reason.as_deref()), (137, Some("OOMKilled")));
    assert_eq!(
        p.status.as_ref().and_then(|s| s.qos_class.as_deref()),
        Some("Guaranteed")
    );
    api.delete("hog", &DeleteParams::default())
        .await
        .expect("delete");
    until_gone(&api, "hog").await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_liveness_probe_restarts_the_container() {
    let env = Env::start().await;
    let mut node = TestNode::start(&env).await;
    let api = pods(&env);
    let mut pod = busybox(
        "live",
        &node.name,
        "touch /tmp/healthy; sleep 2; rm /tmp/healthy; exec sleep 3600",
    );
    pod.spec.as_mut().expect("spec").containers[0].liveness_probe = Some(Probe {
        exec: Some(ExecAction {
            command: Some(vec!["test".into(), "-f".into(), "/tmp/healthy".into()]),
        }),
        period_seconds: Some(1),
        failure_threshold: Some(2),
        ..Probe::default()
    });
    create(&api, &pod).await;
    let p = until_pod(&api, "live", LONG, |p: Option<&Pod>| {
        p.and_then(|p| container_status(p, "main"))
            .is_some_and(|c| c.restart_count >= 1)
    })
    .await;
    let c = container_status(&p, "main").expect("status");
    let last = c
        .last_state
        .as_ref()
        .and_then(|l| l.terminated.as_ref())
        .expect("last state");
    // Killed by the agent: SIGTERM, or SIGKILL after the grace period.
    assert!(matches!(last.exit_code, 137 | 143), "{last:?}");
    let events = events_of(&env, "live").await;
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "Unhealthy" && m.starts_with("Liveness probe failed")),
        "{events:?}"
    );
    assert!(
        events.iter().any(|(r, m)| r == "Killing"
            && m == "Container main failed liveness probe, will be restarted"),
        "{events:?}"
    );
    api.delete("live", &DeleteParams::default())
        .await
        .expect("delete");
    until_gone(&api, "live").await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_an_http_probe() {
    let env = Env::start().await;
    let mut node = TestNode::start(&env).await;
    let api = pods(&env);
    let mut pod = busybox(
        "ready",
        &node.name,
        "mkdir -p /www; (sleep 3; echo ok > /www/index.html) & exec httpd -f -p 8080 -h /www",
    );
    pod.spec.as_mut().expect("spec").containers[0].readiness_probe = Some(Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/".into()),
            port: IntOrString::Int(8080),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(1),
        ..Probe::default()
    });
    create(&api, &pod).await;
    let p = until_pod(&api, "ready", LONG, |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.phase.as_deref()) == Some("Running")
    })
    .await;
    let c = container_status(&p, "main").expect("status");
    assert!(!c.ready, "ready before the probe passed: {c:?}");
    let cond = |p: &Pod, t: &str| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == t).map(|c| c.status.clone()))
    };
    assert_eq!(cond(&p, "Ready").as_deref(), Some("False"));
    let p = until_pod(&api, "ready", LONG, |p: Option<&Pod>| {
        p.and_then(|p| container_status(p, "main"))
            .is_some_and(|c| c.ready)
    })
    .await;
    assert_eq!(cond(&p, "Ready").as_deref(), Some("True"));
    assert_eq!(cond(&p, "ContainersReady").as_deref(), Some("True"));
    let events = events_of(&env, "ready").await;
    assert!(
        events.iter().any(|(r, m)| r == "Unhealthy"
            && m == "Readiness probe failed: HTTP probe failed with statuscode: 404"),
        "{events:?}"
    );
    api.delete("ready", &DeleteParams::default())
        .await
        .expect("delete");
    until_gone(&api, "ready").await;
    node.stop().await;
}
