//! Lifecycle tests: each stage of a pod and what follows it.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::pod::status::{self, Placement};

const PACING: Pacing = Pacing {
    start_delay: Duration::from_millis(500),
    run_duration: Duration::from_secs(2),
};

fn at() -> Placement {
    Placement {
        host_ip: Ipv4Addr::new(172, 18, 0, 2),
        pod_ip: Some(Ipv4Addr::new(10, 244, 0, 2)),
    }
}

fn pod(policy: Option<&str>, annotations: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("p".into()),
            namespace: Some("default".into()),
            uid: Some("u1".into()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some("vn-0".into()),
            restart_policy: policy.map(str::to_string),
            containers: vec![Container {
                name: "c".into(),
                image: Some("nginx".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

fn time(t: SystemTime) -> Time {
    Time(Timestamp::try_from(t).expect("a timestamp"))
}

fn base() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

fn timeline(now: SystemTime) -> Timeline {
    Timeline {
        now,
        created: None,
        started: None,
    }
}

fn creating(p: &Pod) -> Pod {
    let mut p = p.clone();
    p.status = Some(status::creating(&p, &at(), &time(base())));
    p
}

fn running(p: &Pod) -> Pod {
    let mut p = creating(p);
    p.status = Some(status::started(&p, &at(), &time(base())));
    p
}

#[test]
fn a_new_pod_is_created_first() {
    let p = pod(None, &[]);
    assert_eq!(stage(&p), Stage::New);
    assert_eq!(next(&p, &timeline(base()), &PACING), Action::Create);
}

#[test]
fn without_a_start_delay_a_new_pod_starts_in_one_step_unless_it_has_init_containers() {
    let instant = Pacing {
        start_delay: Duration::ZERO,
        ..PACING
    };
    let p = pod(None, &[]);
    assert_eq!(next(&p, &timeline(base()), &instant), Action::Start);
    let mut with_init = pod(None, &[]);
    if let Some(spec) = with_init.spec.as_mut() {
        spec.init_containers = Some(vec![Default::default()]);
    }
    assert_eq!(
        next(&with_init, &timeline(base()), &instant),
        Action::Create
    );
}

#[test]
fn creating_containers_start_after_the_start_delay() {
    let p = creating(&pod(None, &[]));
    assert_eq!(stage(&p), Stage::Creating);
    let created = base();
    let early = Timeline {
        now: created + Duration::from_millis(100),
        created: Some(created),
        started: None,
    };
    assert_eq!(
        next(&p, &early, &PACING),
        Action::WaitUntil(created + PACING.start_delay)
    );
    let late = Timeline {
        now: created + Duration::from_secs(1),
        ..early
    };
    assert_eq!(next(&p, &late, &PACING), Action::Start);
}

#[test]
fn an_agent_that_restarted_starts_creating_containers_at_once() {
    let p = creating(&pod(None, &[]));
    assert_eq!(next(&p, &timeline(base()), &PACING), Action::Start);
}

#[test]
fn a_running_pod_that_restarts_always_stays_running() {
    let p = running(&pod(None, &[]));
    assert_eq!(stage(&p), Stage::Running);
    let later = timeline(base() + Duration::from_secs(3600));
    assert_eq!(next(&p, &later, &PACING), Action::Idle);
    let p = running(&pod(Some("Always"), &[(RUN_SECONDS_ANNOTATION, "1")]));
    assert_eq!(next(&p, &later, &PACING), Action::Idle);
}

#[test]
fn a_pod_that_does_not_restart_succeeds_after_its_run() {
    for policy in ["Never", "OnFailure"] {
        let p = running(&pod(Some(policy), &[]));
        let started = base();
        let t = Timeline {
            now: started + Duration::from_secs(1),
            created: None,
            started: Some(started),
        };
        assert_eq!(
            next(&p, &t, &PACING),
            Action::WaitUntil(started + PACING.run_duration)
        );
        let t = Timeline {
            now: started + PACING.run_duration,
            ..t
        };
        assert_eq!(
            next(&p, &t, &PACING),
            Action::Exit(Exit::Success),
            "{policy}"
        );
    }
}

#[test]
fn the_run_is_timed_from_the_status_when_the_agent_forgot_it() {
    let p = running(&pod(Some("Never"), &[]));
    let t = timeline(base() + Duration::from_secs(1));
    assert_eq!(
        next(&p, &t, &PACING),
        Action::WaitUntil(base() + PACING.run_duration)
    );
}

#[test]
fn the_run_seconds_annotation_lengthens_the_run() {
    let p = running(&pod(Some("Never"), &[(RUN_SECONDS_ANNOTATION, "30")]));
    let t = Timeline {
        now: base() + Duration::from_secs(10),
        created: None,
        started: Some(base()),
    };
    assert_eq!(
        next(&p, &t, &PACING),
        Action::WaitUntil(base() + Duration::from_secs(30))
    );
    assert_eq!(
        run_duration(&p, PACING.run_duration),
        Duration::from_secs(30)
    );
    let bad = pod(None, &[(RUN_SECONDS_ANNOTATION, "soon")]);
    assert_eq!(run_duration(&bad, PACING.run_duration), PACING.run_duration);
}

#[test]
fn the_fail_annotation_fails_a_pod_that_never_restarts() {
    let p = running(&pod(Some("Never"), &[(FAIL_ANNOTATION, "true")]));
    let t = timeline(base() + Duration::from_secs(60));
    assert_eq!(next(&p, &t, &PACING), Action::Exit(Exit::Failure));
}

#[test]
fn the_fail_annotation_crash_loops_a_pod_that_restarts() {
    for policy in [None, Some("OnFailure")] {
        let p = running(&pod(policy, &[(FAIL_ANNOTATION, "TRUE")]));
        let t = timeline(base() + Duration::from_secs(60));
        assert_eq!(next(&p, &t, &PACING), Action::Crash, "{policy:?}");
        let mut crashed = p.clone();
        crashed.status = Some(status::crashing(&p, &at(), &time(base())));
        assert_eq!(stage(&crashed), Stage::Crashing);
        assert_eq!(next(&crashed, &t, &PACING), Action::Idle);
    }
    let not_really = running(&pod(None, &[(FAIL_ANNOTATION, "false")]));
    assert!(!wants_failure(&not_really));
}

#[test]
fn a_finished_pod_needs_nothing_more() {
    let mut p = running(&pod(Some("Never"), &[]));
    p.status = Some(status::exited(&p, &at(), Exit::Success, &time(base())));
    assert_eq!(stage(&p), Stage::Terminal);
    assert_eq!(next(&p, &timeline(base()), &PACING), Action::Idle);
}

#[test]
fn a_deleted_running_pod_is_stopped_then_deleted() {
    let mut p = running(&pod(None, &[]));
    p.metadata.deletion_timestamp = Some(time(base()));
    assert_eq!(next(&p, &timeline(base()), &PACING), Action::Stop);
    p.status = Some(status::stopped(&p, &at(), &time(base())));
    assert_eq!(stage(&p), Stage::Terminal);
    assert_eq!(next(&p, &timeline(base()), &PACING), Action::Delete);
}

#[test]
fn a_deleted_pod_that_never_started_is_deleted_at_once() {
    let mut p = pod(None, &[]);
    p.metadata.deletion_timestamp = Some(time(base()));
    assert_eq!(next(&p, &timeline(base()), &PACING), Action::Delete);
}

#[test]
fn a_status_without_every_container_is_new() {
    let mut p = running(&pod(None, &[]));
    if let Some(spec) = p.spec.as_mut() {
        spec.containers.push(Container {
            name: "second".into(),
            ..Container::default()
        });
    }
    assert_eq!(stage(&p), Stage::New);
}

#[test]
fn init_containers_complete_before_the_containers_start() {
    let mut p = pod(None, &[]);
    p.spec.as_mut().expect("spec").init_containers = Some(vec![Container {
        name: "setup".into(),
        image: Some("busybox".into()),
        ..Container::default()
    }]);
    let p = creating(&p);
    assert!(!initialized(&p));
    assert_eq!(next(&p, &timeline(base()), &PACING), Action::Initialize);
    let mut done = p.clone();
    done.status = Some(status::initialized(&p, &at(), &time(base())));
    assert!(initialized(&done));
    assert_eq!(stage(&done), Stage::Creating);
    assert_eq!(next(&done, &timeline(base()), &PACING), Action::Start);
}
