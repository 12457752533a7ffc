//! Status tests: what each stage reports, as upstream's kubelet shapes it.

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{
    Container, Pod, PodCondition, PodReadinessGate, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::*;

fn t(s: i64) -> Time {
    Time(Timestamp::from_second(1_700_000_000 + s).expect("a timestamp"))
}

fn at(ip: Option<[u8; 4]>) -> Placement {
    Placement {
        host_ip: Ipv4Addr::new(172, 18, 0, 2),
        pod_ip: ip.map(Ipv4Addr::from),
    }
}

fn container(name: &str, image: &str) -> Container {
    Container {
        name: name.into(),
        image: Some(image.into()),
        ..Container::default()
    }
}

fn pod(containers: Vec<Container>, inits: Vec<Container>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("uid-1".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers,
            init_containers: (!inits.is_empty()).then_some(inits),
            ..PodSpec::default()
        }),
        status: None,
    }
}

fn cond<'a>(s: &'a PodStatus, ty: &str) -> &'a PodCondition {
    s.conditions
        .as_ref()
        .and_then(|c| c.iter().find(|c| c.type_ == ty))
        .unwrap_or_else(|| panic!("no {ty} condition"))
}

fn with(p: &Pod, s: PodStatus) -> Pod {
    let mut p = p.clone();
    p.status = Some(s);
    p
}

#[test]
fn creating_containers_wait_in_container_creating_without_a_pod_ip() {
    let p = pod(vec![container("c", "nginx")], vec![]);
    let s = creating(&p, &at(Some([10, 244, 0, 2])), &t(0));
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    assert_eq!(s.pod_ip, None);
    assert_eq!(s.host_ip.as_deref(), Some("172.18.0.2"));
    assert_eq!(s.start_time, Some(t(0)));
    let c = &s.container_statuses.as_ref().expect("statuses")[0];
    let w = c
        .state
        .as_ref()
        .and_then(|st| st.waiting.as_ref())
        .expect("waiting");
    assert_eq!(w.reason.as_deref(), Some("ContainerCreating"));
    assert!(!c.ready);
    assert_eq!(cond(&s, "PodScheduled").status, "True");
    assert_eq!(cond(&s, "Initialized").status, "True");
    assert_eq!(cond(&s, "Ready").status, "False");
    assert_eq!(
        cond(&s, "ContainersReady").message.as_deref(),
        Some("containers with unready status: [c]")
    );
    assert_eq!(s.qos_class.as_deref(), Some("BestEffort"));
}

#[test]
fn running_containers_are_ready_with_ids_and_the_pod_ip() {
    let p = pod(
        vec![
            container("c", "nginx:1.27"),
            container("d", "quay.io/x/y:2"),
        ],
        vec![],
    );
    let p = with(&p, creating(&p, &at(None), &t(0)));
    let s = started(&p, &at(Some([10, 244, 0, 7])), &t(5));
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(s.pod_ip.as_deref(), Some("10.244.0.7"));
    assert_eq!(
        s.pod_ips.as_ref().map(|v| v[0].ip.as_str()),
        Some("10.244.0.7")
    );
    assert_eq!(s.start_time, Some(t(0)), "the start time stays");
    for c in s.container_statuses.as_ref().expect("statuses") {
        assert!(c.ready);
        assert_eq!(c.restart_count, 0);
        assert_eq!(c.started, Some(true));
        let r = c
            .state
            .as_ref()
            .and_then(|st| st.running.as_ref())
            .expect("running");
        assert_eq!(r.started_at, Some(t(5)));
        assert!(
            c.container_id
                .as_deref()
                .is_some_and(|id| id.starts_with("virtual://"))
        );
        assert!(c.image_id.contains("@sha256:"));
    }
    let ids: Vec<_> = s
        .container_statuses
        .iter()
        .flatten()
        .map(|c| c.container_id.clone())
        .collect();
    assert_ne!(ids[0], ids[1]);
    for ty in [
        "PodScheduled",
        "Initialized",
        "ContainersReady",
        "Ready",
        "PodReadyToStartContainers",
    ] {
        assert_eq!(cond(&s, ty).status, "True", "{ty}");
    }
    // Ready changed from False to True: its transition time moves; PodScheduled's stays.
    assert_eq!(cond(&s, "Ready").last_transition_time, Some(t(5)));
    assert_eq!(cond(&s, "PodScheduled").last_transition_time, Some(t(0)));
}

#[test]
fn init_containers_complete_before_the_main_containers_run() {
    let p = pod(
        vec![container("app", "busybox")],
        vec![container("setup", "busybox")],
    );
    let s = creating(&p, &at(None), &t(0));
    assert_eq!(cond(&s, "Initialized").status, "False");
    assert_eq!(
        cond(&s, "Initialized").reason.as_deref(),
        Some("ContainersNotInitialized")
    );
    let init = &s.init_container_statuses.as_ref().expect("init statuses")[0];
    assert_eq!(
        init.state
            .as_ref()
            .and_then(|x| x.waiting.as_ref())
            .and_then(|w| w.reason.as_deref()),
        Some("PodInitializing")
    );
    let p = with(&p, s);
    let s = started(&p, &at(Some([10, 244, 0, 2])), &t(3));
    let init = &s.init_container_statuses.as_ref().expect("init statuses")[0];
    let done = init
        .state
        .as_ref()
        .and_then(|x| x.terminated.as_ref())
        .expect("terminated");
    assert_eq!(
        (done.exit_code, done.reason.as_deref()),
        (0, Some("Completed"))
    );
    assert!(init.ready);
    assert_eq!(cond(&s, "Initialized").status, "True");
}

#[test]
fn sidecar_init_containers_keep_running() {
    let mut sidecar = container("proxy", "envoy");
    sidecar.restart_policy = Some("Always".into());
    let p = pod(vec![container("app", "busybox")], vec![sidecar]);
    let s = started(&p, &at(Some([10, 244, 0, 2])), &t(1));
    let init = &s.init_container_statuses.as_ref().expect("init statuses")[0];
    assert!(init.state.as_ref().is_some_and(|x| x.running.is_some()));
    let s = exited(&with(&p, s), &at(None), Exit::Success, &t(9));
    let init = &s.init_container_statuses.as_ref().expect("init statuses")[0];
    assert!(init.state.as_ref().is_some_and(|x| x.terminated.is_some()));
}

#[test]
fn exits_end_in_succeeded_or_failed_with_the_run_times() {
    let p = pod(vec![container("c", "busybox")], vec![]);
    let p = with(&p, started(&p, &at(Some([10, 244, 0, 2])), &t(1)));
    for (exit, phase, code, reason) in [
        (Exit::Success, "Succeeded", 0, "Completed"),
        (Exit::Failure, "Failed", 1, "Error"),
    ] {
        let s = exited(&p, &at(Some([10, 244, 0, 2])), exit, &t(4));
        assert_eq!(s.phase.as_deref(), Some(phase));
        let c = &s.container_statuses.as_ref().expect("statuses")[0];
        let term = c
            .state
            .as_ref()
            .and_then(|x| x.terminated.as_ref())
            .expect("terminated");
        assert_eq!(
            (term.exit_code, term.reason.as_deref()),
            (code, Some(reason))
        );
        assert_eq!(term.started_at, Some(t(1)));
        assert_eq!(term.finished_at, Some(t(4)));
        assert!(!c.ready);
        assert_eq!(cond(&s, "Ready").reason.as_deref(), Some("PodCompleted"));
        assert_eq!(s.pod_ip.as_deref(), Some("10.244.0.2"));
    }
}

#[test]
fn a_crash_shows_back_off_with_the_failed_run_as_last_state() {
    let p = pod(vec![container("c", "busybox")], vec![]);
    let p = with(&p, started(&p, &at(Some([10, 244, 0, 2])), &t(1)));
    let s = crashing(&p, &at(Some([10, 244, 0, 2])), &t(8));
    assert_eq!(s.phase.as_deref(), Some("Running"));
    let c = &s.container_statuses.as_ref().expect("statuses")[0];
    assert_eq!(c.restart_count, 1);
    assert!(!c.ready);
    let w = c
        .state
        .as_ref()
        .and_then(|x| x.waiting.as_ref())
        .expect("waiting");
    assert_eq!(w.reason.as_deref(), Some("CrashLoopBackOff"));
    let last = c
        .last_state
        .as_ref()
        .and_then(|x| x.terminated.as_ref())
        .expect("last");
    assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
    assert_eq!(cond(&s, "Ready").status, "False");
}

#[test]
fn stopping_a_pod_for_deletion_makes_it_terminal() {
    let p = pod(vec![container("c", "busybox")], vec![]);
    let p = with(&p, started(&p, &at(Some([10, 244, 0, 2])), &t(1)));
    let s = stopped(&p, &at(Some([10, 244, 0, 2])), &t(2));
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    let mut failed = p.clone();
    if let Some(st) = failed.status.as_mut() {
        st.phase = Some("Failed".into());
    }
    assert_eq!(
        stopped(&failed, &at(None), &t(2)).phase.as_deref(),
        Some("Failed")
    );
}

#[test]
fn unmet_readiness_gates_keep_the_pod_unready() {
    let mut p = pod(vec![container("c", "nginx")], vec![]);
    if let Some(spec) = p.spec.as_mut() {
        spec.readiness_gates = Some(vec![PodReadinessGate {
            condition_type: "example.com/lb".into(),
        }]);
    }
    let s = started(&p, &at(Some([10, 244, 0, 2])), &t(1));
    assert_eq!(cond(&s, "Ready").status, "False");
    assert_eq!(cond(&s, "ContainersReady").status, "True");
    let mut gated = s.clone();
    if let Some(c) = gated.conditions.as_mut() {
        c.push(PodCondition {
            type_: "example.com/lb".into(),
            status: "True".into(),
            ..PodCondition::default()
        });
    }
    let s = started(&with(&p, gated), &at(Some([10, 244, 0, 2])), &t(2));
    assert_eq!(cond(&s, "Ready").status, "True");
    assert_eq!(
        cond(&s, "example.com/lb").status,
        "True",
        "foreign conditions are kept"
    );
}
