//! Workloads end to end: kubectl against `matryoshka up --virtual-nodes 3` — the controllers,
//! the scheduler and the virtual nodes together — in the root cluster and in a logical cluster
//! whose nodes are a `matryoshka node --virtual` process joined through its kubeconfig.

mod support;

use std::time::Duration;

use support::{Agent, Backend, Kubectl, Server, logical_cluster};

const WAIT: &str = "--timeout=90s";

fn ready_nodes(k: &Kubectl, want: usize) {
    k.eventually(
        &["get", "nodes", "--no-headers"],
        Duration::from_secs(60),
        |r| {
            r.code == 0
                && r.stdout
                    .lines()
                    .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
                    .count()
                    == want
        },
    );
}

fn pods_of(k: &Kubectl, ns: &str, selector: &str) -> Vec<Vec<String>> {
    k.run(&["get", "pods", "-n", ns, "-l", selector])
        .ok()
        .rows()
}

/// Deployments: rollout, image change, undo, scaling, and foreground deletion.
fn deployments_roll_scale_and_go(k: &Kubectl) {
    k.run(&["create", "namespace", "apps"]).ok();
    k.run(&[
        "create",
        "deployment",
        "web",
        "-n",
        "apps",
        "--image=nginx:1.26",
        "--replicas=3",
    ])
    .ok();
    k.run(&["rollout", "status", "deployment/web", "-n", "apps", WAIT])
        .ok()
        .out("successfully rolled out");
    let pods = pods_of(k, "apps", "app=web");
    assert_eq!(pods.len(), 3, "{pods:?}");
    assert!(pods.iter().all(|p| p[2] == "Running"), "{pods:?}");

    k.run(&[
        "set",
        "image",
        "deployment/web",
        "-n",
        "apps",
        "nginx=nginx:1.27",
    ])
    .ok();
    k.run(&["rollout", "status", "deployment/web", "-n", "apps", WAIT])
        .ok();
    k.run(&[
        "get",
        "deployment",
        "web",
        "-n",
        "apps",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ])
    .ok()
    .out("nginx:1.27");
    k.run(&["rollout", "undo", "deployment/web", "-n", "apps"])
        .ok();
    k.run(&["rollout", "status", "deployment/web", "-n", "apps", WAIT])
        .ok();
    k.run(&[
        "get",
        "deployment",
        "web",
        "-n",
        "apps",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ])
    .ok()
    .out("nginx:1.26");

    for replicas in ["5", "2", "0"] {
        k.run(&[
            "scale",
            "deployment/web",
            "-n",
            "apps",
            &format!("--replicas={replicas}"),
        ])
        .ok();
        k.run(&["rollout", "status", "deployment/web", "-n", "apps", WAIT])
            .ok();
        let want: usize = replicas.parse().expect("number");
        k.eventually(
            &["get", "pods", "-n", "apps", "-l", "app=web"],
            Duration::from_secs(60),
            |r| {
                r.rows().iter().filter(|p| p[2] == "Running").count() == want
                    && r.rows().len() == want
            },
        );
    }

    // Foreground deletion removes the ReplicaSets and their pods before the Deployment.
    k.run(&["scale", "deployment/web", "-n", "apps", "--replicas=2"])
        .ok();
    k.run(&["rollout", "status", "deployment/web", "-n", "apps", WAIT])
        .ok();
    k.run(&[
        "delete",
        "deployment",
        "web",
        "-n",
        "apps",
        "--cascade=foreground",
        WAIT,
    ])
    .ok();
    k.run(&["get", "replicasets,pods", "-n", "apps", "--no-headers"])
        .ok()
        .not_out("web-");
}

/// A pod asking for more CPU than any node has stays Pending with upstream's message.
fn a_pod_too_large_fails_scheduling(k: &Kubectl) {
    k.run_stdin(
        &["apply", "-f", "-"],
        Some(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: huge\n  namespace: apps\nspec:\n  containers:\n  - name: c\n    image: nginx\n    resources:\n      requests:\n        cpu: \"500\"\n",
        ),
    )
    .ok();
    k.eventually(
        &[
            "get",
            "events",
            "-n",
            "apps",
            "--field-selector",
            "involvedObject.name=huge,reason=FailedScheduling",
        ],
        Duration::from_secs(30),
        |r| {
            r.stdout
                .contains("0/3 nodes are available: 3 Insufficient cpu.")
        },
    );
    k.run(&[
        "get",
        "pod",
        "huge",
        "-n",
        "apps",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].reason}",
    ])
    .ok()
    .out("Unschedulable");
}

/// Deleting a namespace deletes everything in it and then the namespace.
fn deleting_a_namespace_empties_it(k: &Kubectl) {
    k.run(&[
        "create",
        "deployment",
        "left",
        "-n",
        "apps",
        "--image=nginx",
        "--replicas=2",
    ])
    .ok();
    k.run(&["rollout", "status", "deployment/left", "-n", "apps", WAIT])
        .ok();
    k.run(&["delete", "namespace", "apps", WAIT]).ok();
    k.run(&["get", "namespace", "apps"])
        .fails(1)
        .err("NotFound");
    k.run(&["get", "pods", "-A", "--no-headers"])
        .ok()
        .not_out("left-");
}

fn scenario(k: &Kubectl) {
    ready_nodes(k, 3);
    deployments_roll_scale_and_go(k);
    a_pod_too_large_fails_scheduling(k);
    deleting_a_namespace_empties_it(k);
}

#[test]
fn workloads_run_in_the_root_cluster_on_virtual_nodes() {
    let server = Server::start_with(Backend::Embedded, &["--virtual-nodes", "3"]);
    scenario(&server.kubectl("1.33"));
}

#[test]
fn workloads_run_in_a_logical_cluster_on_its_own_virtual_nodes() {
    let server = Server::start(Backend::Embedded);
    let root = server.kubectl("1.33");
    let conf = logical_cluster(&root, &server.dir, "team-w");
    let _nodes = Agent::start(&conf, &["--count", "3"], &server.dir.join("nodes.log"));
    let team = Kubectl::new("1.33", &conf);
    scenario(&team);
    root.run(&["get", "pods", "-A", "--no-headers"])
        .ok()
        .not_out("web-");
}
