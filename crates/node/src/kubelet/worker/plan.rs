//! What a sync must do to a pod, upstream's `computePodActions`: whether the sandbox must be
//! (re)created, which instances to kill (failed liveness or startup probes, changed spec,
//! duplicates, containers the spec does not have) and which containers to start — the next
//! init container (one at a time, each to completion), native sidecars (each started before
//! the next init container), then every regular container that should run by the restart
//! policy. Pure; back-off is applied when a start is carried out.

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::kubelet::labels::container_hash;
use crate::kubelet::probes::Results;
use crate::kubelet::runtime_state::{ContainerRecord, PodRuntime, State};

/// The actions of one sync.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub create_sandbox: bool,
    /// Instances to stop, with the `Killing` event's message.
    pub kill: Vec<(ContainerRecord, Option<String>)>,
    /// Containers to start, in order, and whether each is an init container.
    pub start: Vec<(Container, bool)>,
    /// No container of the pod will run again: the pod is done.
    pub finished: bool,
}

fn sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// Whether an exited instance is restarted under `policy`.
pub fn should_restart(policy: &str, r: &ContainerRecord) -> bool {
    match policy {
        "Never" => false,
        "OnFailure" => r.exit_code != 0 || r.state == State::Unknown,
        _ => true,
    }
}

fn alive(r: &ContainerRecord) -> bool {
    matches!(r.state, State::Running | State::Unknown)
}

/// The plan for `pod` given the runtime and the probes' results (by container name).
pub fn plan(pod: &Pod, runtime: &PodRuntime, probes: &dyn Fn(&str) -> Option<Results>) -> Plan {
    let spec = pod.spec.clone().unwrap_or_default();
    let policy = spec
        .restart_policy
        .clone()
        .unwrap_or_else(|| "Always".into());
    let inits = spec.init_containers.clone().unwrap_or_default();
    let mut p = Plan::default();
    let Some(sandbox) = runtime.ready_sandbox() else {
        let ran = !runtime.containers.is_empty();
        p.kill = runtime
            .containers
            .iter()
            .filter(|c| alive(c))
            .map(|c| (c.clone(), None))
            .collect();
        if !runtime.sandboxes.is_empty() && policy == "Never" && ran {
            // A pod that never restarts is not run again in a new sandbox.
            p.finished = true;
        } else {
            p.create_sandbox = true;
        }
        return p;
    };
    let in_sandbox = |name: &str| {
        runtime
            .containers
            .iter()
            .find(|c| c.name == name && c.sandbox_id == sandbox.id)
    };
    // Running instances that are not the newest of their container, or of no container.
    let names: Vec<&str> = spec
        .containers
        .iter()
        .chain(inits.iter())
        .map(|c| c.name.as_str())
        .collect();
    for c in runtime.containers.iter().filter(|c| alive(c)) {
        let newest = runtime.latest(&c.name).is_some_and(|l| l.id == c.id);
        if !newest || !names.contains(&c.name.as_str()) || c.sandbox_id != sandbox.id {
            p.kill.push((c.clone(), None));
        }
    }
    let probe_failure = |c: &Container, r: &ContainerRecord| -> Option<String> {
        let res = probes(&c.name).filter(|res| res.container_id == r.id)?;
        if res.liveness_failed {
            Some(format!(
                "Container {} failed liveness probe, will be restarted",
                c.name
            ))
        } else if res.startup_failed {
            Some(format!(
                "Container {} failed startup probe, will be restarted",
                c.name
            ))
        } else {
            None
        }
    };
    let changed =
        |c: &Container, r: &ContainerRecord| !r.hash.is_empty() && r.hash != container_hash(c);
    let restart_running = |p: &mut Plan, c: &Container, r: &ContainerRecord| {
        if let Some(msg) = probe_failure(c, r) {
            p.kill.push((r.clone(), Some(msg)));
        } else if changed(c, r) {
            p.kill.push((
                r.clone(),
                Some(format!(
                    "Container {} definition changed, will be restarted",
                    c.name
                )),
            ));
        }
    };
    let initialized = spec
        .containers
        .iter()
        .any(|c| in_sandbox(&c.name).is_some());
    if !initialized {
        for ic in &inits {
            match in_sandbox(&ic.name) {
                None => {
                    p.start.push((ic.clone(), true));
                    return p;
                }
                Some(r) if sidecar(ic) && alive(r) => {
                    restart_running(&mut p, ic, r);
                    let started = probes(&ic.name)
                        .filter(|res| res.container_id == r.id)
                        .is_none_or(|res| res.started);
                    if !started || !p.kill.is_empty() {
                        return p;
                    }
                }
                Some(_) if sidecar(ic) => {
                    p.start.push((ic.clone(), true));
                    return p;
                }
                Some(r) => match r.state {
                    State::Running | State::Unknown => return p,
                    State::Exited if r.exit_code == 0 => {}
                    _ => {
                        if policy == "Never" {
                            p.finished = true;
                        } else {
                            p.start.push((ic.clone(), true));
                        }
                        return p;
                    }
                },
            }
        }
    } else {
        // Sidecars run for as long as the pod does.
        for ic in inits.iter().filter(|c| sidecar(c)) {
            match in_sandbox(&ic.name) {
                Some(r) if alive(r) => restart_running(&mut p, ic, r),
                _ => p.start.push((ic.clone(), true)),
            }
        }
    }
    let mut active = false;
    for c in &spec.containers {
        match in_sandbox(&c.name) {
            None => {
                // Instances of an earlier sandbox count for the restart policy.
                match runtime.latest(&c.name) {
                    Some(old) if !alive(old) && !should_restart(&policy, old) => {}
                    _ => {
                        p.start.push((c.clone(), false));
                        active = true;
                    }
                }
            }
            Some(r) if alive(r) => {
                restart_running(&mut p, c, r);
                active = true;
            }
            Some(r) => {
                if should_restart(&policy, r) {
                    p.start.push((c.clone(), false));
                    active = true;
                }
            }
        }
    }
    if !active && !spec.containers.is_empty() {
        p.finished = true;
    }
    p
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodSpec;

    use super::*;
    use crate::kubelet::runtime_state::SandboxRecord;

    fn pod(containers: &[&str], inits: &[(&str, bool)], policy: &str) -> Pod {
        let c = |n: &str| Container {
            name: n.into(),
            ..Container::default()
        };
        Pod {
            spec: Some(PodSpec {
                containers: containers.iter().map(|n| c(n)).collect(),
                init_containers: Some(
                    inits
                        .iter()
                        .map(|(n, s)| Container {
                            restart_policy: s.then(|| "Always".into()),
                            ..c(n)
                        })
                        .collect(),
                ),
                restart_policy: Some(policy.into()),
                ..PodSpec::default()
            }),
            ..Pod::default()
        }
    }

    fn rec(pod: &Pod, name: &str, state: State, exit: i32, created: i64) -> ContainerRecord {
        let spec = pod.spec.clone().unwrap_or_default();
        let c = spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .find(|c| c.name == name)
            .cloned()
            .unwrap_or_default();
        ContainerRecord {
            id: format!("{name}-{created}"),
            name: name.into(),
            attempt: 0,
            state,
            sandbox_id: "sb".into(),
            created_at: created,
            started_at: 0,
            finished_at: 0,
            exit_code: exit,
            reason: String::new(),
            message: String::new(),
            image: String::new(),
            image_ref: String::new(),
            hash: container_hash(&c),
            log_path: String::new(),
        }
    }

    fn rt(containers: Vec<ContainerRecord>) -> PodRuntime {
        PodRuntime {
            sandboxes: vec![SandboxRecord {
                id: "sb".into(),
                attempt: 0,
                ready: true,
                created_at: 0,
                ips: vec![],
            }],
            containers,
        }
    }

    fn names(p: &Plan) -> Vec<&str> {
        p.start.iter().map(|(c, _)| c.name.as_str()).collect()
    }

    #[test]
    fn a_new_pod_needs_a_sandbox_first() {
        let p = pod(&["a"], &[], "Always");
        let plan = plan(&p, &PodRuntime::default(), &|_| None);
        assert!(plan.create_sandbox && plan.start.is_empty());
    }

    #[test]
    fn init_containers_run_one_at_a_time_in_order() {
        let p = pod(&["main"], &[("one", false), ("two", false)], "Always");
        assert_eq!(names(&plan(&p, &rt(vec![]), &|_| None)), ["one"]);
        let running = rt(vec![rec(&p, "one", State::Running, 0, 1)]);
        assert!(plan(&p, &running, &|_| None).start.is_empty());
        let done = rt(vec![rec(&p, "one", State::Exited, 0, 1)]);
        assert_eq!(names(&plan(&p, &done, &|_| None)), ["two"]);
        let both = rt(vec![
            rec(&p, "two", State::Exited, 0, 2),
            rec(&p, "one", State::Exited, 0, 1),
        ]);
        assert_eq!(names(&plan(&p, &both, &|_| None)), ["main"]);
        let failed = rt(vec![rec(&p, "one", State::Exited, 1, 1)]);
        assert_eq!(names(&plan(&p, &failed, &|_| None)), ["one"]);
        let never = pod(&["main"], &[("one", false)], "Never");
        let failed = rt(vec![rec(&never, "one", State::Exited, 1, 1)]);
        assert!(plan(&never, &failed, &|_| None).finished);
    }

    #[test]
    fn a_sidecar_must_start_before_the_next_init_container() {
        let p = pod(&["main"], &[("side", true), ("init", false)], "Always");
        let side = rec(&p, "side", State::Running, 0, 1);
        let not_started = Results {
            container_id: side.id.clone(),
            started: false,
            ..Results::default()
        };
        let r = rt(vec![side.clone()]);
        assert!(
            plan(&p, &r, &|_| Some(not_started.clone()))
                .start
                .is_empty()
        );
        assert_eq!(names(&plan(&p, &r, &|_| None)), ["init"]);
    }

    #[test]
    fn the_restart_policy_decides_what_starts_again() {
        for (policy, exit, restarts) in [
            ("Always", 0, true),
            ("OnFailure", 0, false),
            ("OnFailure", 1, true),
            ("Never", 1, false),
        ] {
            let p = pod(&["a"], &[], policy);
            let r = rt(vec![rec(&p, "a", State::Exited, exit, 1)]);
            let plan = plan(&p, &r, &|_| None);
            assert_eq!(!plan.start.is_empty(), restarts, "{policy} {exit}");
            assert_eq!(plan.finished, !restarts, "{policy} {exit}");
        }
    }

    #[test]
    fn a_failed_liveness_probe_kills_the_container() {
        let p = pod(&["a"], &[], "Always");
        let a = rec(&p, "a", State::Running, 0, 1);
        let failed = Results {
            container_id: a.id.clone(),
            liveness_failed: true,
            ..Results::default()
        };
        let plan = plan(&p, &rt(vec![a]), &|_| Some(failed.clone()));
        assert_eq!(plan.kill.len(), 1);
        assert_eq!(
            plan.kill[0].1.as_deref(),
            Some("Container a failed liveness probe, will be restarted")
        );
    }
}
