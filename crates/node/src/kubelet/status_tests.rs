use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::kubelet::runtime_state::SandboxRecord;

fn pod(containers: &[&str], inits: &[(&str, bool)], policy: &str) -> Pod {
    let c = |n: &str| Container {
        name: n.into(),
        image: Some("busybox:1.36".into()),
        ..Container::default()
    };
    let mut p = Pod::default();
    p.metadata.name = Some("p".into());
    p.metadata.uid = Some("u".into());
    p.spec = Some(PodSpec {
        containers: containers.iter().map(|n| c(n)).collect(),
        init_containers: (!inits.is_empty()).then(|| {
            inits
                .iter()
                .map(|(n, side)| Container {
                    restart_policy: side.then(|| "Always".to_string()),
                    ..c(n)
                })
                .collect()
        }),
        restart_policy: Some(policy.into()),
        ..PodSpec::default()
    });
    p
}

fn instance(name: &str, attempt: u32, state: State, exit: i32, created: i64) -> ContainerRecord {
    ContainerRecord {
        id: format!("{name}-{attempt}"),
        name: name.into(),
        attempt,
        state,
        sandbox_id: "sb".into(),
        created_at: created,
        started_at: if state == State::Created {
            0
        } else {
            created + 1
        },
        finished_at: if state == State::Exited {
            created + 2
        } else {
            0
        },
        exit_code: exit,
        reason: match (state, exit) {
            (State::Exited, 0) => "Completed".into(),
            (State::Exited, _) => "Error".into(),
            _ => String::new(),
        },
        message: String::new(),
        image: "docker.io/library/busybox:1.36".into(),
        image_ref: "sha256:abc".into(),
        hash: "h".into(),
        log_path: String::new(),
    }
}

fn sandbox() -> SandboxRecord {
    SandboxRecord {
        id: "sb".into(),
        attempt: 0,
        ready: true,
        created_at: 1,
        ips: vec!["10.244.1.5".into()],
    }
}

fn now() -> Time {
    Time(Timestamp::from_second(1_700_000_000).expect("ts"))
}

fn status(pod: &Pod, rt: &PodRuntime, reasons: &[(&str, &str, &str)], terminal: bool) -> PodStatus {
    let reasons: HashMap<String, SyncReason> = reasons
        .iter()
        .map(|(c, r, m)| {
            (
                c.to_string(),
                SyncReason {
                    reason: r.to_string(),
                    message: m.to_string(),
                },
            )
        })
        .collect();
    let t = now();
    pod_status(&Inputs {
        pod,
        runtime: rt,
        probes: &HashMap::new(),
        reasons: &reasons,
        host_ips: &["192.0.2.2".to_string()],
        terminal,
        now: &t,
    })
}

fn cond<'a>(s: &'a PodStatus, ty: &str) -> &'a PodCondition {
    s.conditions
        .as_ref()
        .and_then(|c| c.iter().find(|c| c.type_ == ty))
        .unwrap_or_else(|| panic!("no {ty}"))
}

fn waiting_reason(s: &ContainerStatus) -> Option<&str> {
    s.state.as_ref()?.waiting.as_ref()?.reason.as_deref()
}

#[test]
fn a_new_pod_waits_in_container_creating_or_pod_initializing() {
    let p = pod(&["a", "b"], &[], "Always");
    let s = status(&p, &PodRuntime::default(), &[], false);
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    let cs = s.container_statuses.as_ref().expect("statuses");
    assert!(
        cs.iter()
            .all(|c| waiting_reason(c) == Some("ContainerCreating"))
    );
    assert_eq!(cond(&s, "PodReadyToStartContainers").status, "False");
    assert_eq!(cond(&s, "Initialized").status, "True");
    let cr = cond(&s, "ContainersReady");
    assert_eq!(cr.reason.as_deref(), Some("ContainersNotReady"));
    assert_eq!(
        cr.message.as_deref(),
        Some("containers with unready status: [a b]")
    );
    assert_eq!(cond(&s, "Ready").message, cr.message);
    assert!(s.pod_ip.is_none());
    assert_eq!(s.host_ip.as_deref(), Some("192.0.2.2"));
    assert_eq!(s.qos_class.as_deref(), Some("BestEffort"));

    let p = pod(&["main"], &[("init", false)], "Always");
    let s = status(&p, &PodRuntime::default(), &[], false);
    assert_eq!(
        waiting_reason(&s.container_statuses.as_ref().expect("s")[0]),
        Some("PodInitializing")
    );
    assert_eq!(
        waiting_reason(&s.init_container_statuses.as_ref().expect("s")[0]),
        Some("PodInitializing")
    );
    let init = cond(&s, "Initialized");
    assert_eq!(init.reason.as_deref(), Some("ContainersNotInitialized"));
    assert_eq!(
        init.message.as_deref(),
        Some("containers with incomplete status: [init]")
    );
}

#[test]
fn a_running_container_without_probes_is_ready_and_the_pod_runs() {
    let p = pod(&["a"], &[("init", false)], "Always");
    let rt = PodRuntime {
        sandboxes: vec![sandbox()],
        containers: vec![
            instance("a", 0, State::Running, 0, 20),
            instance("init", 0, State::Exited, 0, 10),
        ],
    };
    let s = status(&p, &rt, &[], false);
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(s.pod_ip.as_deref(), Some("10.244.1.5"));
    let c = &s.container_statuses.as_ref().expect("s")[0];
    assert!(c.ready);
    assert_eq!(c.started, Some(true));
    assert_eq!(c.container_id.as_deref(), Some("containerd://a-0"));
    assert_eq!(c.image, "docker.io/library/busybox:1.36");
    let i = &s.init_container_statuses.as_ref().expect("s")[0];
    assert!(i.ready);
    assert_eq!(
        i.state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.reason.as_deref()),
        Some("Completed")
    );
    for ty in [
        "PodReadyToStartContainers",
        "Initialized",
        "ContainersReady",
        "Ready",
        "PodScheduled",
    ] {
        assert_eq!(cond(&s, ty).status, "True", "{ty}");
    }
}

#[test]
fn a_crash_looping_container_waits_with_its_last_termination() {
    let p = pod(&["a"], &[], "Always");
    let rt = PodRuntime {
        sandboxes: vec![sandbox()],
        containers: vec![
            instance("a", 2, State::Exited, 1, 30),
            instance("a", 1, State::Exited, 1, 20),
        ],
    };
    let msg = "back-off 20s restarting failed container=a pod=p_default(u)";
    let s = status(&p, &rt, &[("a", "CrashLoopBackOff", msg)], false);
    let c = &s.container_statuses.as_ref().expect("s")[0];
    assert_eq!(waiting_reason(c), Some("CrashLoopBackOff"));
    assert_eq!(
        c.state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.message.as_deref()),
        Some(msg)
    );
    assert_eq!(c.restart_count, 2);
    let last = c
        .last_state
        .as_ref()
        .and_then(|l| l.terminated.as_ref())
        .expect("last state");
    assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
    assert_eq!(last.container_id.as_deref(), Some("containerd://a-2"));
    assert!(!c.ready);
    // Restarting for ever: the pod stays Running.
    assert_eq!(s.phase.as_deref(), Some("Running"));
}

#[test]
fn finished_containers_make_the_pod_succeed_or_fail() {
    let done = |exit| PodRuntime {
        sandboxes: vec![sandbox()],
        containers: vec![instance("a", 0, State::Exited, exit, 10)],
    };
    let s = status(&pod(&["a"], &[], "Never"), &done(1), &[], false);
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(
        cond(&s, "ContainersReady").reason.as_deref(),
        Some("PodFailed")
    );
    let s = status(&pod(&["a"], &[], "OnFailure"), &done(0), &[], false);
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    assert_eq!(cond(&s, "Ready").reason.as_deref(), Some("PodCompleted"));
    // A deleted Always pod whose container was killed fails.
    let s = status(&pod(&["a"], &[], "Always"), &done(143), &[], true);
    assert_eq!(s.phase.as_deref(), Some("Failed"));
}

#[test]
fn a_failed_init_container_fails_a_pod_that_never_restarts() {
    let p = pod(&["main"], &[("init", false)], "Never");
    let rt = PodRuntime {
        sandboxes: vec![sandbox()],
        containers: vec![instance("init", 0, State::Exited, 2, 10)],
    };
    assert_eq!(status(&p, &rt, &[], false).phase.as_deref(), Some("Failed"));
    let p = pod(&["main"], &[("init", false)], "Always");
    assert_eq!(
        status(&p, &rt, &[], false).phase.as_deref(),
        Some("Pending")
    );
}

#[test]
fn a_sidecar_that_has_not_started_keeps_the_pod_pending() {
    let p = pod(&["main"], &[("side", true)], "Always");
    let rt = PodRuntime {
        sandboxes: vec![sandbox()],
        containers: vec![instance("side", 0, State::Running, 0, 10)],
    };
    let mut probes = HashMap::new();
    probes.insert(
        "side".to_string(),
        ProbeState {
            container_id: "side-0".into(),
            ready: false,
            started: false,
        },
    );
    let t = now();
    let s = pod_status(&Inputs {
        pod: &p,
        runtime: &rt,
        probes: &probes,
        reasons: &HashMap::new(),
        host_ips: &[],
        terminal: false,
        now: &t,
    });
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    let init = cond(&s, "Initialized");
    assert_eq!(
        init.message.as_deref(),
        Some("containers with incomplete status: [side]")
    );
}

#[test]
fn a_terminal_phase_never_changes() {
    let mut p = pod(&["a"], &[], "Always");
    p.status = Some(PodStatus {
        phase: Some("Succeeded".into()),
        ..PodStatus::default()
    });
    let rt = PodRuntime {
        sandboxes: vec![sandbox()],
        containers: vec![instance("a", 0, State::Running, 0, 10)],
    };
    assert_eq!(
        status(&p, &rt, &[], false).phase.as_deref(),
        Some("Succeeded")
    );
}

#[test]
fn an_image_pull_failure_shows_as_the_waiting_reason() {
    let p = pod(&["a"], &[], "Always");
    let rt = PodRuntime {
        sandboxes: vec![sandbox()],
        containers: vec![],
    };
    let s = status(&p, &rt, &[("a", "ErrImagePull", "failed to pull")], false);
    let c = &s.container_statuses.as_ref().expect("s")[0];
    assert_eq!(waiting_reason(c), Some("ErrImagePull"));
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    assert_eq!(cond(&s, "PodReadyToStartContainers").status, "True");
}
