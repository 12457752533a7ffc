//! Worker machines that are real: with `--machine-provider process` every Machine of a
//! tenant cluster is a `matryoshka node` process in a network namespace of its own, with its
//! own containerd, that joins its cluster from a bootstrap token alone. The autoscaler adds
//! them for pods that do not fit and removes them when idle, a MachineHealthCheck replaces one
//! whose agent is killed, a changed instance type rolls them with the workload moving along,
//! and nothing of them is left once the cluster is gone.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::{Backend, Kubectl, Run, Server};

const LONG: Duration = Duration::from_secs(180);

/// The server, stopped with SIGTERM (its machines with it) even when the test fails.
struct Platform {
    server: Option<Server>,
    bridge: String,
}

impl Drop for Platform {
    fn drop(&mut self) {
        if let Some(mut s) = self.server.take() {
            let _ = s.terminate();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

impl Platform {
    fn server(&self) -> &Server {
        self.server.as_ref().expect("running")
    }

    fn machines_dir(&self) -> PathBuf {
        self.server().dir.join("machines")
    }

    /// Every agent's log and the server's, for a failure message.
    fn logs(&self) -> String {
        let mut out = String::new();
        if let Ok(entries) = std::fs::read_dir(self.machines_dir()) {
            for e in entries.flatten() {
                let log = std::fs::read_to_string(e.path().join("agent.log")).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                out.push_str(&format!(
                    "--- {}:\n{}\n",
                    e.file_name().to_string_lossy(),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                ));
            }
        }
        let log = self.server().log();
        let tail: Vec<&str> = log.lines().rev().take(60).collect();
        out.push_str(&format!(
            "--- server:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
        out
    }

    /// Retries until `check` holds, failing with every log.
    #[track_caller]
    fn until(&self, k: &Kubectl, args: &[&str], check: impl Fn(&Run) -> bool) -> Run {
        let deadline = std::time::Instant::now() + LONG;
        loop {
            let r = k.run(args);
            if check(&r) {
                return r;
            }
            if std::time::Instant::now() > deadline {
                panic!(
                    "condition not reached for `{}`:\n{}\n{}\n{}",
                    r.cmdline,
                    r.stdout,
                    r.stderr,
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

const TENANT_CLUSTER: &str = r#"
apiVersion: platform.matryoshka.dev/v1alpha1
kind: TenantCluster
metadata: {name: demo, namespace: tenant-root}
spec:
  version: v1.33
  workers: {provider: process}
  nodeGroups:
    md0: {minReplicas: 1, maxReplicas: 3, instanceType: u1.medium, roles: [ingress-nginx]}
  nodeHealthCheck: {readyUnknownTimeout: 2s, readyFalseTimeout: 2s}
"#;

const WEB: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: docker.io/matryoshka/mtest:1
        args: ["serve-http", "--port", "8080"]
        resources: {requests: {cpu: 500m}}
        readinessProbe:
          httpGet: {path: /healthz, port: 8080}
          periodSeconds: 1
"#;

/// `name=value` pairs of machines: `phase nodeName providerID` per line.
const MACHINES: &str = "jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.status.nodeRef.name} {.spec.providerID}{\"\\n\"}{end}";

fn running_machines(r: &Run) -> Vec<String> {
    r.stdout
        .lines()
        .filter(|l| l.split(' ').nth(1) == Some("Running"))
        .filter_map(|l| l.split(' ').next().map(str::to_string))
        .collect()
}

/// Kills a process machine's node agent (SIGKILL), as a machine dies.
fn kill_agent(p: &Platform, machine: &str) {
    let pid = std::fs::read_to_string(p.machines_dir().join(machine).join("agent.pid"))
        .expect("the agent's pid file");
    let killed = Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
}

fn ready_nodes(r: &Run) -> usize {
    r.rows().iter().filter(|n| n[1] == "Ready").count()
}

#[test]
fn process_machines_join_from_a_token_scale_heal_roll_and_leave_nothing_behind() {
    let started = std::time::Instant::now();
    let phase = |what: &str| eprintln!("[{:>6.1?}] {what}", started.elapsed());
    let n = std::process::id() % 200 + 20;
    let bridge = format!("mtpm{n}");
    let crds =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/crds/cluster-api");
    let subnet = format!("10.241.{n}.0/24");
    // Load balancer addresses on loopback, of this test only.
    let pool = format!("127.1.{n}.10-127.1.{n}.20");
    let server = Server::start_with(
        Backend::Embedded,
        &[
            "--cluster-api-crds",
            crds.to_str().expect("utf-8 path"),
            "--machine-provider",
            "process",
            "--machine-bridge",
            &bridge,
            "--machine-subnet",
            &subnet,
            // Names outside a cluster are refused, never forwarded off this machine.
            "--machine-dns-upstream",
            "none",
            // Above the node Lease's 10 s renewal.
            "--node-monitor-grace-period",
            "16s",
            "--scale-down-unneeded-time",
            "3s",
            "--scale-down-delay-after-add",
            "3s",
            "--load-balancer-ip-range",
            &pool,
        ],
    );
    let p = Platform {
        server: Some(server),
        bridge: bridge.clone(),
    };
    p.server().import_test_images();
    let k = p.server().kubectl("1.33");
    k.run_stdin(&["apply", "-f", "-"], Some(TENANT_CLUSTER))
        .ok();
    p.until(
        &k,
        &[
            "get",
            "tenantcluster",
            "demo",
            "-n",
            "tenant-root",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ],
        |r| r.stdout == "True",
    );
    let t = support::tenant_cluster_kubectl(&k, &p.server().dir, "tenant-root", "demo");

    phase("the cluster is ready");
    // One machine: a real node, joined with its own bootstrap token and TLS bootstrap.
    let first = p.until(&t, &["get", "nodes"], |r| ready_nodes(r) == 1);
    let node = first.rows()[0][0].clone();
    t.run(&[
        "get",
        "node",
        &node,
        "-o",
        "jsonpath={.spec.providerID} {.status.addresses[?(@.type==\"InternalIP\")].address} {.status.nodeInfo.containerRuntimeVersion}",
    ])
    .ok()
    .out(&format!("process://{node} 10.241.{n}."))
    .out("containerd://");
    // Its client certificate from the bootstrap token, its serving certificate as itself.
    let csrs = p.until(
        &t,
        &["get", "csr", "-o", "jsonpath={range .items[*]}{.spec.signerName} {.spec.username} {.status.conditions[0].type}{\"\\n\"}{end}"],
        |r| r.stdout.contains(&format!("kubernetes.io/kubelet-serving system:node:{node} Approved")),
    );
    assert!(
        csrs.stdout.lines().any(|l| l
            .starts_with("kubernetes.io/kube-apiserver-client-kubelet system:bootstrap:")
            && l.ends_with(" Approved")),
        "{}",
        csrs.stdout
    );
    t.run(&["get", "secrets", "-n", "kube-system"])
        .ok()
        .out("bootstrap-token-");
    k.run(&["get", "machines", "-n", "tenant-root", "-o", MACHINES])
        .ok()
        .out(&format!("{node} Running {node} process://{node}"));

    phase("the first machine joined");
    // Pods that do not fit make the autoscaler add machines; they run there.
    t.run_stdin(&["apply", "-f", "-"], Some(WEB)).ok();
    p.until(
        &t,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ],
        |r| r.stdout == "3",
    );
    let events = t.run(&["get", "events"]).ok().stdout.clone();
    assert!(events.contains("TriggeredScaleUp"), "{events}");
    let nodes = p.until(&t, &["get", "nodes"], |r| ready_nodes(r) == 3);
    let hosts = t
        .run(&[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}",
        ])
        .ok()
        .stdout
        .clone();
    let mut hosts: Vec<&str> = hosts.lines().collect();
    hosts.sort();
    hosts.dedup();
    assert_eq!(
        hosts.len(),
        3,
        "one pod per node: {hosts:?}\n{}",
        nodes.stdout
    );

    phase("scaled up to 3");
    // A node cannot touch another node's objects with its own credentials.
    let other = nodes
        .rows()
        .iter()
        .map(|r| r[0].clone())
        .find(|n| *n != node)
        .expect("another node");
    let node_conf = p.machines_dir().join(&node).join("kubelet.conf");
    let as_node = Kubectl::new("1.33", &node_conf);
    as_node
        .run(&["label", "node", &other, "stolen=yes"])
        .fails(1)
        .err("forbidden");
    as_node.run(&["get", "node", &node]).ok();
    as_node
        .run(&[
            "label",
            "node",
            &node,
            "node-role.kubernetes.io/control-plane=",
        ])
        .fails(1)
        .err("is not allowed to modify labels: node-role.kubernetes.io/control-plane");

    phase("node credentials checked");
    // Killing a machine's agent: its node goes Unknown, the health check replaces it, and
    // the pods come back on the new machine.
    let victim = other.clone();
    kill_agent(&p, &victim);
    p.until(
        &k,
        &["get", "machines", "-n", "tenant-root", "-o", MACHINES],
        |r| {
            let running = running_machines(r);
            running.len() == 3 && !r.stdout.contains(&victim)
        },
    );
    p.until(
        &t,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ],
        |r| r.stdout == "3",
    );
    assert!(
        !p.machines_dir().join(&victim).exists(),
        "the dead machine's data is removed"
    );
    let events = k
        .run(&["get", "events", "-n", "tenant-root"])
        .ok()
        .stdout
        .clone();
    assert!(events.contains("MachineMarkedUnhealthy"), "{events}");

    phase("the killed machine is replaced");
    volumes_follow_their_pod_to_another_node(&p, &k, &t);
    phase("volumes");
    load_balancers_reach_the_tenant_pods(&p, &k, &t, n);
    phase("load balancers");
    ingress_routes_two_hosts_and_terminates_tls(&p, &k, &t, n);
    phase("ingress");
    // Without the workload the group goes back to its minimum.
    t.run(&[
        "delete",
        "deployment",
        "web",
        "--wait=true",
        "--timeout=60s",
    ])
    .ok();
    p.until(&t, &["get", "nodes"], |r| r.rows().len() == 1);

    phase("scaled down to 1");
    // A changed instance type rolls the group; the workload moves to the new machine.
    t.run(&[
        "create",
        "deployment",
        "one",
        "--image=docker.io/matryoshka/mtest:1",
        "--",
        "/mtest",
        "sleep",
        "infinity",
    ])
    .ok();
    t.run(&["rollout", "status", "deployment/one", "--timeout=90s"])
        .ok();
    // The API server reaches the machine's kubelet (its serving certificate is the
    // cluster's; the kubelet takes the cluster CA's client certificate).
    t.run(&["exec", "deploy/one", "--", "/mtest", "sleep", "0"])
        .ok();
    let before = p
        .until(&t, &["get", "nodes"], |r| ready_nodes(r) == 1)
        .rows()[0][0]
        .clone();
    k.run(&[
        "patch",
        "tenantcluster",
        "demo",
        "-n",
        "tenant-root",
        "--type=merge",
        "-p",
        r#"{"spec":{"nodeGroups":{"md0":{"instanceType":"u1.large"}}}}"#,
    ])
    .ok();
    let after = p.until(
        &t,
        &[
            "get",
            "nodes",
            "-L",
            "node.kubernetes.io/instance-type",
            "--no-headers",
        ],
        |r| {
            let lines: Vec<&str> = r.stdout.lines().collect();
            lines.len() == 1 && lines[0].contains(" Ready ") && lines[0].ends_with("u1.large")
        },
    );
    assert!(!after.stdout.contains(&before), "{}", after.stdout);
    p.until(
        &t,
        &[
            "get",
            "pods",
            "-l",
            "app=one",
            "-o",
            "jsonpath={range .items[*]}{.spec.nodeName} {.status.phase}{\"\\n\"}{end}",
        ],
        |r| {
            r.stdout.lines().count() == 1
                && r.stdout.ends_with(" Running\n")
                && !r.stdout.contains(&before)
        },
    );

    phase("rolled");
    // Cluster API's view, as its tooling prints it.
    k.run(&[
        "get",
        "machinedeployments,machinesets,machines",
        "-n",
        "tenant-root",
    ])
    .ok()
    .out("kubernetes-demo-md0")
    .out("Running");

    phase("printed");
    // A load balancer and a volume still there when the cluster goes.
    t.run(&[
        "expose",
        "deploy",
        "one",
        "--name=left",
        "--type=LoadBalancer",
        "--port=80",
    ])
    .ok();
    t.run_stdin(
        &["apply", "-f", "-"],
        Some(r#"{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "left"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}}"#),
    )
    .ok();
    p.until(
        &k,
        &[
            "get",
            "svc,pvc",
            "-n",
            "tenant-root",
            "-l",
            "cluster.x-k8s.io/cluster-name=kubernetes-demo",
            "-o",
            "name",
        ],
        |r| r.stdout.lines().count() == 3,
    );
    // Deleting the cluster removes every machine, its load balancers' infra Services and its
    // volumes: no process, namespace or data is left.
    k.run(&[
        "delete",
        "tenantcluster",
        "demo",
        "-n",
        "tenant-root",
        "--timeout=120s",
    ])
    .ok();
    p.until(&k, &["get", "machines", "-n", "tenant-root"], |r| {
        r.stdout.trim().is_empty()
    });
    p.until(
        &k,
        &[
            "get",
            "svc,pvc",
            "-n",
            "tenant-root",
            "-l",
            "cluster.x-k8s.io/cluster-name=kubernetes-demo",
            "-o",
            "name",
        ],
        |r| r.code == 0 && r.stdout.trim().is_empty(),
    );
    let volumes = p.server().dir.join("volumes").join("tenant-root");
    let deadline = std::time::Instant::now() + LONG;
    while std::fs::read_dir(&volumes).is_ok_and(|mut d| d.next().is_some()) {
        assert!(
            std::time::Instant::now() < deadline,
            "volumes left in {}",
            volumes.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let left: Vec<String> = std::fs::read_dir(p.machines_dir())
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "machine data left: {left:?}");
    let ps = Command::new("ps")
        .args(["-eo", "args"])
        .output()
        .expect("ps runs");
    let dir = p.machines_dir().display().to_string();
    let ps = String::from_utf8_lossy(&ps.stdout);
    assert!(
        !ps.lines().any(|l| l.contains(&dir)),
        "machine processes left:\n{ps}"
    );
}

const DB: &str = r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: busybox:1.35
        command: ["sh", "-c", "hostname >> /data/log; exec sleep 3600"]
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Mi}}
"#;

/// A StatefulSet's claim gets the TenantCluster's `storageClass` (the platform's volumes): an
/// infra claim in the tenant's namespace of the root cluster; what the pod writes is there
/// after the pod moves to another node and after the machine it then runs on is replaced by
/// the health check; growing the claim grows the volume; the class cannot be changed;
/// deleting the claim deletes the infra claim and the data.
fn volumes_follow_their_pod_to_another_node(p: &Platform, k: &Kubectl, t: &Kubectl) {
    t.run(&["get", "storageclass", "replicated", "-o", "jsonpath={.provisioner} {.allowVolumeExpansion} {.metadata.annotations.storageclass\\.kubernetes\\.io/is-default-class}"])
        .ok()
        .out("volumes.platform.matryoshka.dev true true");
    t.run_stdin(&["apply", "-f", "-"], Some(DB)).ok();
    let claim = p
        .until(
            t,
            &[
                "get",
                "pvc",
                "data-db-0",
                "-o",
                "jsonpath={.status.phase} {.spec.storageClassName} {.spec.volumeName}",
            ],
            |r| r.stdout.starts_with("Bound "),
        )
        .stdout
        .clone();
    let fields: Vec<&str> = claim.split(' ').collect();
    assert_eq!(fields[1], "replicated", "{claim}");
    let volume = fields[2].to_string();
    assert!(volume.starts_with("pvc-"), "{claim}");
    k.run(&[
        "get",
        "pvc",
        &volume,
        "-n",
        "tenant-root",
        "-o",
        "jsonpath={.status.phase} {.spec.storageClassName}",
    ])
    .ok()
    .out("Bound matryoshka-volumes");
    let where_ = |r: &Run| {
        let f: Vec<String> = r.stdout.split(' ').map(str::to_string).collect();
        (f.len() == 2 && f[1] == "Running").then(|| f[0].clone())
    };
    let pod = [
        "get",
        "pod",
        "db-0",
        "-o",
        "jsonpath={.spec.nodeName} {.status.phase}",
    ];
    let first = p.until(t, &pod, |r| where_(r).is_some());
    let first_node = where_(&first).expect("running");
    // ReadWriteOnce: a pod of another node waits for the volume, as upstream's attacher
    // makes it wait.
    let nodes = t.run(&["get", "nodes", "-o", "name"]).ok().stdout.clone();
    let other = nodes
        .lines()
        .map(|l| l.trim_start_matches("node/"))
        .find(|n| *n != first_node)
        .expect("another node")
        .to_string();
    let intruder = format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "intruder"}},
  "spec": {{"nodeName": "{other}", "terminationGracePeriodSeconds": 0,
    "containers": [{{"name": "c", "image": "busybox:1.35", "command": ["sleep", "3600"],
      "volumeMounts": [{{"name": "data", "mountPath": "/data"}}]}}],
    "volumes": [{{"name": "data", "persistentVolumeClaim": {{"claimName": "data-db-0"}}}}]}}}}"#
    );
    t.run_stdin(&["apply", "-f", "-"], Some(&intruder)).ok();
    p.until(
        t,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=intruder",
            "-o",
            "jsonpath={.items[*].message}",
        ],
        |r| r.stdout.contains("Multi-Attach error for volume") && r.stdout.contains("db-0"),
    );
    t.run(&["get", "pod", "intruder", "-o", "jsonpath={.status.phase}"])
        .ok()
        .out("Pending");
    t.run(&["delete", "pod", "intruder", "--wait=true", "--timeout=60s"])
        .ok();
    // The pod moves to another node; what it wrote is still there.
    t.run(&["cordon", &first_node]).ok();
    t.run(&["delete", "pod", "db-0", "--wait=true", "--timeout=60s"])
        .ok();
    let second = p.until(t, &pod, |r| where_(r).is_some_and(|n| n != first_node));
    let second_node = where_(&second).expect("running");
    let log = p.until(t, &["exec", "db-0", "--", "cat", "/data/log"], |r| {
        r.code == 0 && r.stdout.lines().count() == 2
    });
    assert_eq!(
        log.stdout.lines().collect::<Vec<_>>(),
        ["db-0", "db-0"],
        "{}",
        log.stdout
    );
    t.run(&["uncordon", &first_node]).ok();
    assert_ne!(first_node, second_node);
    // The machine under the pod dies: the health check replaces it and the pod starts on
    // another node with what it wrote (the volume lives on the platform, not the machine).
    kill_agent(p, &second_node);
    p.until(
        k,
        &["get", "machines", "-n", "tenant-root", "-o", MACHINES],
        |r| running_machines(r).len() == 3 && !r.stdout.contains(&second_node),
    );
    let third = p.until(t, &pod, |r| where_(r).is_some_and(|n| n != second_node));
    let third_node = where_(&third).expect("running");
    let log = p.until(t, &["exec", "db-0", "--", "cat", "/data/log"], |r| {
        r.code == 0 && r.stdout.lines().count() == 3
    });
    assert_eq!(
        log.stdout.lines().collect::<Vec<_>>(),
        ["db-0", "db-0", "db-0"],
        "{}",
        log.stdout
    );
    assert!(
        !p.machines_dir().join(&second_node).exists(),
        "the dead machine {second_node} is gone; the pod runs on {third_node}"
    );
    // Growing the claim grows the volume.
    t.run(&[
        "patch",
        "pvc",
        "data-db-0",
        "-p",
        r#"{"spec":{"resources":{"requests":{"storage":"2Mi"}}}}"#,
    ])
    .ok();
    p.until(
        t,
        &[
            "get",
            "pvc",
            "data-db-0",
            "-o",
            "jsonpath={.status.capacity.storage}",
        ],
        |r| r.stdout == "2Mi",
    );
    k.run(&[
        "get",
        "pvc",
        &volume,
        "-n",
        "tenant-root",
        "-o",
        "jsonpath={.spec.resources.requests.storage}",
    ])
    .ok()
    .out("2Mi");
    // The cluster's storage class is immutable.
    k.run(&[
        "patch",
        "tenantcluster",
        "demo",
        "-n",
        "tenant-root",
        "--type=merge",
        "-p",
        r#"{"spec":{"storageClass":"other"}}"#,
    ])
    .fails(1)
    .err("storageClass is immutable");
    // Deleting the claim deletes the infra claim and the data.
    t.run(&[
        "delete",
        "statefulset",
        "db",
        "--wait=true",
        "--timeout=60s",
    ])
    .ok();
    t.run(&["delete", "pvc", "data-db-0", "--wait=true", "--timeout=60s"])
        .ok();
    p.until(k, &["get", "pvc", "-n", "tenant-root", "-o", "name"], |r| {
        !r.stdout.contains(&volume)
    });
    let dir = p
        .server()
        .dir
        .join("volumes")
        .join("tenant-root")
        .join(&volume);
    let deadline = std::time::Instant::now() + LONG;
    while dir.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} is left",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The body of `GET path` on `addr`, if it answers 200.
fn http_get(addr: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let sock: std::net::SocketAddr = addr.parse().ok()?;
    let mut c = std::net::TcpStream::connect_timeout(&sock, Duration::from_secs(2)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: lb\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    c.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// `kubectl expose --type=LoadBalancer` in the tenant cluster: an address of the platform's
/// pool within seconds, an infra Service in the tenant's namespace whose ports lead to the
/// tenant's NodePorts, traffic from this machine answered by the tenant's pods (every one of
/// them), `externalTrafficPolicy: Local` sending only to nodes holding a pod, and deletion
/// releasing the address and the infra Service.
fn load_balancers_reach_the_tenant_pods(p: &Platform, k: &Kubectl, t: &Kubectl, n: u32) {
    t.run(&[
        "expose",
        "deploy",
        "web",
        "--type=LoadBalancer",
        "--port=80",
        "--target-port=8080",
    ])
    .ok();
    let ip = p
        .until(
            t,
            &[
                "get",
                "svc",
                "web",
                "-o",
                "jsonpath={.status.loadBalancer.ingress[0].ip}",
            ],
            |r| !r.stdout.is_empty(),
        )
        .stdout
        .clone();
    assert!(ip.starts_with(&format!("127.1.{n}.")), "{ip}");
    t.run(&["get", "svc", "web"]).ok().out(&ip);
    t.run(&["get", "svc", "web", "-o", "jsonpath={.metadata.finalizers}"])
        .ok()
        .out("service.kubernetes.io/load-balancer-cleanup");
    let node_port = t
        .run(&[
            "get",
            "svc",
            "web",
            "-o",
            "jsonpath={.spec.ports[0].nodePort}",
        ])
        .ok()
        .stdout
        .clone();
    let infra = k
        .run(&[
            "get",
            "svc",
            "-n",
            "tenant-root",
            "-l",
            "cluster.x-k8s.io/tenant-service-name=web,cluster.x-k8s.io/tenant-service-namespace=default,cluster.x-k8s.io/cluster-name=kubernetes-demo",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.spec.type} {.spec.ports[0].port} {.spec.ports[0].targetPort} {.status.loadBalancer.ingress[0].ip}{\"\\n\"}{end}",
        ])
        .ok()
        .stdout
        .clone();
    let fields: Vec<&str> = infra.split_whitespace().collect();
    assert_eq!(fields.len(), 5, "one infra Service: {infra}");
    assert!(
        fields[0].starts_with('a') && fields[0].len() == 32,
        "{infra}"
    );
    assert_eq!(
        &fields[1..],
        ["LoadBalancer", "80", node_port.as_str(), ip.as_str()]
    );
    // Every pod answers through the address, from this machine.
    let addr = format!("{ip}:80");
    let deadline = std::time::Instant::now() + LONG;
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 3 {
        if let Some(body) = http_get(&addr, "/hostname") {
            assert!(body.starts_with("web-"), "{body}");
            seen.insert(body);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "answered by {seen:?}\n{}",
            p.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Local: only the node holding the one pod left takes traffic.
    t.run(&[
        "patch",
        "svc",
        "web",
        "-p",
        r#"{"spec":{"externalTrafficPolicy":"Local"}}"#,
    ])
    .ok();
    t.run(&["scale", "deploy", "web", "--replicas=1"]).ok();
    p.until(
        k,
        &[
            "get",
            "endpointslices",
            "-n",
            "tenant-root",
            "-l",
            &format!("kubernetes.io/service-name={}", fields[0]),
            "-o",
            "jsonpath={range .items[*].endpoints[*]}{.addresses[0]}{\"\\n\"}{end}",
        ],
        |r| r.stdout.lines().count() == 1,
    );
    k.run(&[
        "get",
        "svc",
        "-n",
        "tenant-root",
        fields[0],
        "-o",
        "jsonpath={.spec.externalTrafficPolicy}",
    ])
    .ok()
    .out("Local");
    let deadline = std::time::Instant::now() + LONG;
    while http_get(&addr, "/hostname").is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "no answer with Local\n{}",
            p.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Deleting the Service removes the infra Service and gives the address back: the next
    // load balancer gets it.
    t.run(&["delete", "svc", "web", "--timeout=60s"]).ok();
    p.until(
        k,
        &[
            "get",
            "svc",
            "-n",
            "tenant-root",
            "-l",
            "cluster.x-k8s.io/tenant-service-name=web",
            "-o",
            "name",
        ],
        |r| r.stdout.trim().is_empty(),
    );
    let deadline = std::time::Instant::now() + LONG;
    while http_get(&addr, "/hostname").is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "the address still answers"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    t.run(&[
        "expose",
        "deploy",
        "web",
        "--name=again",
        "--type=LoadBalancer",
        "--port=80",
        "--target-port=8080",
    ])
    .ok();
    p.until(
        t,
        &[
            "get",
            "svc",
            "again",
            "-o",
            "jsonpath={.status.loadBalancer.ingress[0].ip}",
        ],
        |r| r.stdout == ip,
    );
    t.run(&["delete", "svc", "again", "--timeout=60s"]).ok();
}

const INGRESS_APPS: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: other}
spec:
  replicas: 1
  selector: {matchLabels: {app: other}}
  template:
    metadata: {labels: {app: other}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: docker.io/matryoshka/mtest:1
        args: ["serve-http", "--port", "8080"]
        readinessProbe:
          httpGet: {path: /healthz, port: 8080}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: other}
spec:
  selector: {app: other}
  ports: [{name: http, port: 8000, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: web-internal}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: demo}
spec:
  ingressClassName: nginx
  tls: [{hosts: [b.demo.test], secretName: b-tls}]
  rules:
  - host: a.demo.test
    http:
      paths: [{path: /, pathType: Prefix, backend: {service: {name: web-internal, port: {number: 80}}}}]
  - host: b.demo.test
    http:
      paths: [{path: /, pathType: Prefix, backend: {service: {name: other, port: {name: http}}}}]
"#;

/// Merge-patches the TenantCluster `demo`.
fn patch_demo(k: &Kubectl, patch: &str) {
    k.run(&[
        "patch",
        "tenantcluster",
        "demo",
        "-n",
        "tenant-root",
        "--type=merge",
        "-p",
        patch,
    ])
    .ok();
}

/// `curl` to `url` with `host:port` resolved to `ip` (so nothing leaves this machine):
/// `<status code> <redirect> <body>`.
fn curl(ip: &str, url: &str, extra: &[&str]) -> String {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let authority = rest.split('/').next().unwrap_or(rest);
    let default_port = if url.starts_with("https") {
        "443"
    } else {
        "80"
    };
    let (host, port) = authority
        .split_once(':')
        .unwrap_or((authority, default_port));
    let out = Command::new("curl")
        .args([
            "-s",
            "-m",
            "5",
            "--noproxy",
            "*",
            "-w",
            "\n%{http_code} %{redirect_url}",
        ])
        .arg("--resolve")
        .arg(format!("{host}:{port}:{ip}"))
        .args(extra)
        .arg(url)
        .output()
        .expect("running curl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    format!("{} {}", status.trim(), body.trim())
        .trim()
        .to_string()
}

/// The `ingressNginx` addon with `exposeMethod: LoadBalancer`: the controller runs on the
/// nodes of role `ingress-nginx` from the platform's own image, its Service gets an address
/// of the pool, an Ingress routes two hosts to two Services, one over TLS from a Secret (plain
/// HTTP to it redirected), an unknown host gets the default backend's 404, `kubectl get
/// ingress` shows the address; disabling the addon removes it.
fn ingress_routes_two_hosts_and_terminates_tls(p: &Platform, k: &Kubectl, t: &Kubectl, n: u32) {
    patch_demo(
        k,
        r#"{"spec":{"addons":{"ingressNginx":{"enabled":true,"exposeMethod":"LoadBalancer"}}}}"#,
    );
    let ip = p
        .until(
            t,
            &[
                "get",
                "svc",
                "-n",
                "ingress-nginx",
                "ingress-nginx-controller",
                "-o",
                "jsonpath={.status.loadBalancer.ingress[0].ip}",
            ],
            |r| !r.stdout.is_empty(),
        )
        .stdout
        .clone();
    assert!(ip.starts_with(&format!("127.1.{n}.")), "{ip}");
    t.run(&[
        "get",
        "ingressclass",
        "nginx",
        "-o",
        "jsonpath={.spec.controller}",
    ])
    .ok()
    .out("k8s.io/ingress-nginx");
    // A certificate for b.demo.test, as a tls Secret.
    let dir = p.server().dir.join("ingress-tls");
    std::fs::create_dir_all(&dir).expect("tls dir");
    let (crt, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
        ])
        .args([
            "-subj",
            "/CN=b.demo.test",
            "-addext",
            "subjectAltName=DNS:b.demo.test",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output()
        .expect("running openssl");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let (crt, key) = (crt.to_str().expect("utf-8"), key.to_str().expect("utf-8"));
    t.run(&[
        "create", "secret", "tls", "b-tls", "--cert", crt, "--key", key,
    ])
    .ok();
    t.run_stdin(&["apply", "-f", "-"], Some(INGRESS_APPS)).ok();
    p.until(
        t,
        &[
            "get",
            "deployment",
            "other",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ],
        |r| r.stdout == "1",
    );
    p.until(
        t,
        &[
            "get",
            "ds",
            "-n",
            "ingress-nginx",
            "ingress-nginx-controller",
            "-o",
            "jsonpath={.status.numberReady}",
        ],
        |r| r.stdout.parse::<u32>().is_ok_and(|n| n >= 1),
    );
    // Host a reaches the web pods, host b the other one, over TLS; plain HTTP to b is
    // redirected; another host gets the default backend.
    let deadline = std::time::Instant::now() + LONG;
    loop {
        let a = curl(&ip, "http://a.demo.test/hostname", &[]);
        let b = curl(&ip, "https://b.demo.test/hostname", &["--cacert", crt]);
        if a.starts_with("200 web-") && b.starts_with("200 other-") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "ingress routes: a={a:?} b={b:?}\n{}",
            p.logs()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(
        curl(&ip, "http://b.demo.test/hostname", &[]),
        "308 https://b.demo.test/hostname"
    );
    assert_eq!(
        curl(&ip, "http://c.demo.test/", &[]),
        "404 default backend - 404"
    );
    p.until(t, &["get", "ingress", "demo"], |r| {
        r.rows()
            .first()
            .is_some_and(|row| row.iter().any(|c| c == &ip))
    })
    .out("nginx")
    .out("a.demo.test,b.demo.test");
    p.until(
        t,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.kind=Ingress",
        ],
        |r| r.stdout.contains("Sync"),
    );
    // Proxied: NodePorts 30000 and 30001, and the seed's management-side Service in the
    // tenant's namespace leading to them on the ingress nodes; the address goes back.
    patch_demo(
        k,
        r#"{"spec":{"addons":{"ingressNginx":{"exposeMethod":"Proxied"}}}}"#,
    );
    p.until(
        t,
        &[
            "get",
            "svc",
            "-n",
            "ingress-nginx",
            "ingress-nginx-controller",
            "-o",
            "jsonpath={.spec.type} {.spec.ports[*].nodePort} {.metadata.finalizers}{.status.loadBalancer.ingress}",
        ],
        |r| r.stdout == "NodePort 30000 30001 ",
    );
    p.until(
        k,
        &[
            "get",
            "svc",
            "-n",
            "tenant-root",
            "-l",
            "cluster.x-k8s.io/tenant-service-name=ingress-nginx-controller",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.spec.type} {.spec.ports[*].port} {.spec.ports[*].targetPort}{\"\\n\"}{end}",
        ],
        |r| r.stdout == "kubernetes-demo-ingress-nginx ClusterIP 80 443 30000 30001\n",
    );
    // Through a node of the management-side Service's EndpointSlice (read again each time:
    // idle machines go away).
    let deadline = std::time::Instant::now() + LONG;
    loop {
        let slice = k.run(&[
            "get",
            "endpointslice",
            "-n",
            "tenant-root",
            "kubernetes-demo-ingress-nginx-ipv4",
            "-o",
            "jsonpath={.endpoints[0].addresses[0]} {.ports[*].port}",
        ]);
        let node_ip = slice.stdout.split(' ').next().unwrap_or("").to_string();
        let a = if slice.stdout.ends_with(" 30000 30001") && !node_ip.is_empty() {
            assert!(node_ip.starts_with(&format!("10.241.{n}.")), "{node_ip}");
            curl(&node_ip, "http://a.demo.test:30000/hostname", &[])
        } else {
            slice.stdout.clone()
        };
        if a.starts_with("200 web-") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "proxied: {a:?}\n{}",
            p.logs()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // Disabled, the addon is removed and its address released.
    t.run(&["delete", "ingress", "demo"]).ok();
    t.run(&["delete", "deployment", "other"]).ok();
    t.run(&["delete", "svc", "other", "web-internal"]).ok();
    patch_demo(
        k,
        r#"{"spec":{"addons":{"ingressNginx":{"enabled":false}}}}"#,
    );
    p.until(t, &["get", "ns", "ingress-nginx"], |r| r.code != 0);
    p.until(t, &["get", "ingressclass"], |r| !r.stdout.contains("nginx"));
    p.until(
        k,
        &[
            "get",
            "svc",
            "-n",
            "tenant-root",
            "-l",
            "cluster.x-k8s.io/tenant-service-name=ingress-nginx-controller",
            "-o",
            "name",
        ],
        |r| r.code == 0 && r.stdout.is_empty(),
    );
}
