//! Workloads end to end: kubectl against `matryoshka up --virtual-nodes 3` — the controllers,
//! the scheduler and the virtual nodes together — in the root cluster and in a logical cluster
//! whose nodes are a `matryoshka node --virtual` process joined through its kubeconfig.

mod support;

use std::path::Path;
use std::time::Duration;

use support::{Agent, Backend, Kubectl, Server, logical_cluster};

const WAIT: &str = "--timeout=90s";
/// How long controllers may take to reach a state a test polls for.
const WAIT_EVENTS: Duration = Duration::from_secs(60);

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
    // Rollout tooling compares these: the first rollout is generation 1 (the controller's
    // revision annotation goes through /status), one template change makes it 2.
    let generations = |k: &Kubectl| {
        k.run(&[
            "get",
            "deployment",
            "web",
            "-n",
            "apps",
            "-o",
            "jsonpath={.metadata.generation}/{.status.observedGeneration}",
        ])
        .ok()
        .stdout
        .clone()
    };
    assert_eq!(generations(k), "1/1");
    // The rollout is told in events, as upstream's controllers tell it.
    k.eventually(&["get", "events", "-n", "apps"], WAIT_EVENTS, |r| {
        r.stdout.contains("ScalingReplicaSet") && r.stdout.contains("SuccessfulCreate")
    })
    .out("Scaled up replica set web-")
    .out("Created pod: web-");

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
    assert_eq!(generations(k), "2/2");
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

/// A ReplicationController keeps its replicas running and reports them ready.
fn a_replication_controller_keeps_its_pods(k: &Kubectl) {
    k.run_stdin(
        &["apply", "-f", "-"],
        Some(
            "apiVersion: v1\nkind: ReplicationController\nmetadata:\n  name: legacy\n  namespace: apps\nspec:\n  replicas: 2\n  template:\n    metadata:\n      labels:\n        app: legacy\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.26\n",
        ),
    )
    .ok();
    k.eventually(&["get", "rc", "legacy", "-n", "apps"], WAIT_EVENTS, |r| {
        r.rows()
            .first()
            .is_some_and(|row| row.get(1..4) == Some(&["2".into(), "2".into(), "2".into()]))
    });
    let pods = pods_of(k, "apps", "app=legacy");
    assert_eq!(pods.len(), 2, "{pods:?}");
    k.run(&["scale", "rc", "legacy", "-n", "apps", "--replicas=1"])
        .ok();
    k.eventually(
        &["get", "pods", "-n", "apps", "-l", "app=legacy"],
        WAIT_EVENTS,
        |r| r.rows().len() == 1,
    );
    k.run(&["delete", "rc", "legacy", "-n", "apps"]).ok();
}

/// A StatefulSet creates db-0, db-1, db-2 in order, each after the previous one is Ready.
fn a_statefulset_starts_its_pods_in_order(k: &Kubectl) {
    k.run_stdin(
        &["apply", "-f", "-"],
        Some(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: db\n  namespace: apps\nspec:\n  clusterIP: None\n  selector:\n    app: db\n  ports:\n  - port: 5432\n---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: db\n  namespace: apps\nspec:\n  serviceName: db\n  replicas: 3\n  selector:\n    matchLabels:\n      app: db\n  template:\n    metadata:\n      labels:\n        app: db\n    spec:\n      containers:\n      - name: db\n        image: postgres:16\n",
        ),
    )
    .ok();
    k.run(&["rollout", "status", "statefulset/db", "-n", "apps", WAIT])
        .ok();
    let names: Vec<String> = pods_of(k, "apps", "app=db")
        .into_iter()
        .filter(|p| p[2] == "Running")
        .map(|p| p[0].clone())
        .collect();
    assert_eq!(names, ["db-0", "db-1", "db-2"]);
    for i in 0..2 {
        let ready = k
            .run(&[
                "get",
                "pod",
                &format!("db-{i}"),
                "-n",
                "apps",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].lastTransitionTime}",
            ])
            .ok()
            .stdout
            .clone();
        let next_created = k
            .run(&[
                "get",
                "pod",
                &format!("db-{}", i + 1),
                "-n",
                "apps",
                "-o",
                "jsonpath={.metadata.creationTimestamp}",
            ])
            .ok()
            .stdout
            .clone();
        assert!(
            next_created.trim() >= ready.trim(),
            "db-{} created at {next_created} before db-{i} was Ready at {ready}",
            i + 1
        );
    }
}

/// A DaemonSet runs one pod on every node.
fn a_daemonset_runs_on_every_node(k: &Kubectl, nodes: usize) {
    k.run_stdin(
        &["apply", "-f", "-"],
        Some(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\n  namespace: apps\nspec:\n  selector:\n    matchLabels:\n      app: agent\n  template:\n    metadata:\n      labels:\n        app: agent\n    spec:\n      containers:\n      - name: agent\n        image: fluent-bit:3\n",
        ),
    )
    .ok();
    k.run(&["rollout", "status", "daemonset/agent", "-n", "apps", WAIT])
        .ok();
    let on: std::collections::BTreeSet<String> = k
        .run(&[
            "get",
            "pods",
            "-n",
            "apps",
            "-l",
            "app=agent",
            "-o",
            "jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}",
        ])
        .ok()
        .stdout
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(on.len(), nodes, "{on:?}");
}

/// A Job completes; a CronJob that fires every minute spawns a Job.
fn jobs_complete_and_cronjobs_spawn_jobs(k: &Kubectl) {
    k.run(&[
        "create",
        "cronjob",
        "tick",
        "-n",
        "apps",
        "--image=busybox",
        "--schedule=* * * * *",
        "--",
        "true",
    ])
    .ok();
    k.run(&[
        "create",
        "job",
        "once",
        "-n",
        "apps",
        "--image=busybox",
        "--",
        "true",
    ])
    .ok();
    k.run(&[
        "wait",
        "--for=condition=complete",
        "job/once",
        "-n",
        "apps",
        WAIT,
    ])
    .ok();
    k.run(&[
        "get",
        "job",
        "once",
        "-n",
        "apps",
        "-o",
        "jsonpath={.status.succeeded}",
    ])
    .ok()
    .out("1");
    k.eventually(
        &[
            "get",
            "jobs",
            "-n",
            "apps",
            "-o",
            "jsonpath={range .items[*]}{.metadata.ownerReferences[0].name}{\" \"}{end}",
        ],
        Duration::from_secs(90),
        |r| r.stdout.contains("tick"),
    );
    k.run(&["delete", "cronjob", "tick", "-n", "apps"]).ok();
}

/// `kubectl expose` gives a ClusterIP and an EndpointSlice with the ready pods' IPs.
fn expose_gives_a_cluster_ip_and_endpoints(k: &Kubectl) {
    k.run(&[
        "create",
        "deployment",
        "api",
        "-n",
        "apps",
        "--image=nginx",
        "--replicas=2",
        "--port=80",
    ])
    .ok();
    k.run(&["rollout", "status", "deployment/api", "-n", "apps", WAIT])
        .ok();
    k.run(&["expose", "deployment", "api", "-n", "apps", "--port=80"])
        .ok();
    let ip = k
        .run(&[
            "get",
            "service",
            "api",
            "-n",
            "apps",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ])
        .ok()
        .stdout
        .clone();
    assert!(
        ip.starts_with("10.9") || ip.starts_with("10.1"),
        "cluster IP {ip}"
    );
    let mut pod_ips: Vec<String> = k
        .run(&[
            "get",
            "pods",
            "-n",
            "apps",
            "-l",
            "app=api",
            "-o",
            "jsonpath={range .items[*]}{.status.podIP}{\"\\n\"}{end}",
        ])
        .ok()
        .stdout
        .lines()
        .map(String::from)
        .collect();
    pod_ips.sort();
    let slices = k.eventually(
        &["get", "endpointslices", "-n", "apps", "-l", "kubernetes.io/service-name=api", "-o", "jsonpath={range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{\"\\n\"}{end}"],
        Duration::from_secs(30),
        |r| r.stdout.lines().count() == 2,
    );
    let mut slice_ips: Vec<String> = slices.stdout.lines().map(String::from).collect();
    slice_ips.sort();
    assert_eq!(slice_ips, pod_ips);
}

/// A ResourceQuota refuses a pod over it with upstream's message.
fn a_quota_refuses_a_pod_over_it(k: &Kubectl) {
    k.run(&["create", "namespace", "limited"]).ok();
    k.run(&["create", "quota", "q", "-n", "limited", "--hard=pods=1"])
        .ok();
    k.eventually(
        &[
            "get",
            "quota",
            "q",
            "-n",
            "limited",
            "-o",
            "jsonpath={.status.hard.pods}",
        ],
        Duration::from_secs(30),
        |r| r.stdout == "1",
    );
    k.run(&["run", "first", "-n", "limited", "--image=nginx"])
        .ok();
    k.run(&["run", "second", "-n", "limited", "--image=nginx"])
        .fails(1)
        .err("exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1");
    k.run(&["delete", "namespace", "limited", WAIT]).ok();
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

/// A node whose agent dies goes NotReady; its pods are evicted after their toleration and
/// recreated on the other nodes.
fn a_stopped_node_goes_not_ready_and_its_pods_move(k: &Kubectl, conf: &Path, dir: &Path) {
    let doomed = Agent::start(
        conf,
        &["--count", "1", "--name-prefix", "doomed-"],
        &dir.join("doomed.log"),
    );
    ready_nodes(k, 4);
    k.run(&["create", "namespace", "moving"]).ok();
    k.run_stdin(
        &["apply", "-f", "-"],
        Some(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: mover\n  namespace: moving\nspec:\n  replicas: 4\n  selector:\n    matchLabels:\n      app: mover\n  template:\n    metadata:\n      labels:\n        app: mover\n    spec:\n      topologySpreadConstraints:\n      - maxSkew: 1\n        topologyKey: kubernetes.io/hostname\n        whenUnsatisfiable: ScheduleAnyway\n        labelSelector:\n          matchLabels:\n            app: mover\n      tolerations:\n      - key: node.kubernetes.io/unreachable\n        operator: Exists\n        effect: NoExecute\n        tolerationSeconds: 2\n      - key: node.kubernetes.io/not-ready\n        operator: Exists\n        effect: NoExecute\n        tolerationSeconds: 2\n      containers:\n      - name: c\n        image: nginx\n",
        ),
    )
    .ok();
    k.run(&[
        "rollout",
        "status",
        "deployment/mover",
        "-n",
        "moving",
        WAIT,
    ])
    .ok();
    k.run(&["get", "pods", "-n", "moving", "-o", "wide"])
        .ok()
        .out("doomed-0");
    drop(doomed);
    k.eventually(&["get", "node", "doomed-0"], Duration::from_secs(90), |r| {
        r.rows().first().is_some_and(|row| row[1] == "NotReady")
    });
    k.eventually(
        &["get", "pods", "-n", "moving", "-o", "wide"],
        Duration::from_secs(90),
        |r| {
            r.rows()
                .iter()
                .filter(|p| p[2] == "Running" && p[6] != "doomed-0")
                .count()
                == 4
        },
    );
    k.run(&["delete", "namespace", "moving", "--wait=false"])
        .ok();
}

fn scenario(k: &Kubectl) {
    ready_nodes(k, 3);
    deployments_roll_scale_and_go(k);
    a_pod_too_large_fails_scheduling(k);
    a_replication_controller_keeps_its_pods(k);
    a_statefulset_starts_its_pods_in_order(k);
    a_daemonset_runs_on_every_node(k, 3);
    jobs_complete_and_cronjobs_spawn_jobs(k);
    expose_gives_a_cluster_ip_and_endpoints(k);
    a_quota_refuses_a_pod_over_it(k);
    deleting_a_namespace_empties_it(k);
}

#[test]
fn workloads_run_in_the_root_cluster_on_virtual_nodes() {
    let server = Server::start_with(Backend::Embedded, &["--virtual-nodes", "3"]);
    let k = server.kubectl("1.33");
    scenario(&k);
    a_stopped_node_goes_not_ready_and_its_pods_move(&k, &server.kubeconfig(), &server.dir);
}

#[test]
fn workloads_run_in_a_logical_cluster_on_its_own_virtual_nodes() {
    let server = Server::start(Backend::Embedded);
    let root = server.kubectl("1.33");
    let conf = logical_cluster(&root, &server.dir, "team-w");
    let _nodes = Agent::start(&conf, &["--count", "3"], &server.dir.join("nodes.log"));
    let team = Kubectl::new("1.33", &conf);
    scenario(&team);
    a_stopped_node_goes_not_ready_and_its_pods_move(&team, &conf, &server.dir);
    root.run(&["get", "pods", "-A", "--no-headers"])
        .ok()
        .not_out("web-");
}
