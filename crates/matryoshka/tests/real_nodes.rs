//! Two real nodes on one machine, as separate hosts are: each `matryoshka node` runs in a
//! network namespace of its own (entered with `nsenter --net`) (a machine on a bridge the test makes, `podnet::Fabric`),
//! with its own containerd, pod subnet and address, joining `matryoshka up` through its
//! kubeconfig and pulling images from the platform's registry. A pod on one node reaches a
//! Service by its DNS names when the Service's pods are on the other; NodePorts answer on
//! every node's address; a stopped node leaves no rule in its kernel.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nodenet::podnet::{Fabric, FabricConfig, Machine};
use support::{Backend, Kubectl, Run, Server, manifest, remove_cgroup_root, watchdog};

const LONG: Duration = Duration::from_secs(120);

/// A `matryoshka node` process inside a machine's namespace.
struct NodeProcess {
    name: String,
    child: Option<Child>,
    log: PathBuf,
}

impl NodeProcess {
    fn start(server: &Server, machine: &Machine, name: &str, pod_cidr: &str, dir: &Path) -> Self {
        let data = dir.join(name);
        std::fs::create_dir_all(&data).expect("data dir");
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).expect("log");
        let registry = format!("https://{}:{}", gateway(machine), server.port);
        // Only the network namespace is entered: `ip netns exec` also mounts a fresh /sys,
        // which hides the cgroup hierarchies runc needs.
        let child = Command::new("nsenter")
            .arg(format!("--net={}", machine.netns().path().display()))
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_matryoshka"))
            .args(["node", "--runtime", "cri", "--kubeconfig"])
            .arg(server.kubeconfig())
            .arg("--data-dir")
            .arg(&data)
            .args(["--node-name", name])
            .args(["--node-ip", &machine.address().to_string()])
            .args(["--pod-cidr", pod_cidr])
            .args(["--uplink", machine.uplink()])
            .args(["--cgroup-root", &format!("/{name}")])
            .args(["--registry-mirror", &registry])
            .arg("--remove-pods-on-exit")
            // Names outside the cluster are refused, never forwarded off the machine.
            .args(["--cluster-dns-upstream", "none"])
            .env("MATRYOSHKA_LOG", "info")
            .stdout(Stdio::null())
            .stderr(out.try_clone().expect("log"))
            .spawn()
            .expect("matryoshka node starts");
        watchdog(child.id());
        NodeProcess {
            name: name.to_string(),
            child: Some(child),
            log,
        }
    }

    /// SIGTERM and wait (the node removes its pods, rules and containerd).
    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                if Instant::now() > deadline {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        remove_cgroup_root(&self.name);
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

fn gateway(machine: &Machine) -> String {
    // The fabric's gateway is the first address of the machines' subnet.
    let a = u32::from(machine.address());
    std::net::Ipv4Addr::from((a & 0xffff_ff00) | 1).to_string()
}

fn get_from(k: &Kubectl, pod: &str, target: &str) -> Run {
    k.run(&[
        "exec",
        pod,
        "--",
        "/mtest",
        "tcp",
        target,
        "--timeout",
        "2",
        "--send",
        "GET /hostname HTTP/1.0\r\n\r\n",
    ])
}

fn until_answers(k: &Kubectl, pod: &str, target: &str) -> Run {
    let deadline = Instant::now() + LONG;
    loop {
        let r = get_from(k, pod, target);
        if r.code == 0 && r.stdout.contains(" 200 ") {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "{target} from {pod}: {}\n{}",
            r.stdout,
            r.stderr
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_pod_on_one_node_reaches_a_service_served_from_another_by_its_dns_names() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let n = std::process::id() % 200 + 20;
    let fabric = rt
        .block_on(Fabric::create(
            FabricConfig {
                bridge: format!("mtfab{n}"),
                subnet: format!("10.97.{n}.0/24").parse().expect("subnet"),
            },
            None,
        ))
        .expect("the fabric");
    let gw = fabric.config().gateway().to_string();
    let machines: Vec<Machine> = (0..2)
        .map(|i| {
            let addr = fabric.config().machine_address(i).expect("an address");
            rt.block_on(fabric.add_machine(&format!("mtm{n}-{i}"), addr))
                .expect("a machine")
        })
        .collect();
    let server = Server::start_with(
        Backend::Embedded,
        &["--node", "none", "--bind-address", &gw],
    );
    server.import_test_images();
    let dir = tempfile::tempdir().expect("tempdir");
    let names = ["node-a", "node-b"];
    let mut nodes: Vec<NodeProcess> = machines
        .iter()
        .zip(names)
        .enumerate()
        .map(|(i, (m, name))| {
            NodeProcess::start(
                &server,
                m,
                name,
                &format!("10.244.{}.0/24", i + 1),
                dir.path(),
            )
        })
        .collect();
    let k = server.kubectl("1.33");
    let deadline = Instant::now() + LONG;
    loop {
        let r = k.run(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Ready\")].status} {end}",
        ]);
        if names
            .iter()
            .all(|n| r.stdout.contains(&format!("{n}=True")))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "nodes not Ready: {}\n{}",
            r.stdout,
            nodes
                .iter()
                .map(|n| std::fs::read_to_string(&n.log).unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n---\n")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let path = manifest(
        dir.path(),
        "web.yaml",
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {kubernetes.io/hostname: node-b}
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
metadata: {name: web}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  nodeSelector: {kubernetes.io/hostname: node-a}
  containers:
  - name: main
    image: docker.io/matryoshka/mtest:1
    args: ["sleep", "infinity"]
"#,
    );
    k.run(&["apply", "-f", path.to_str().expect("utf-8")]).ok();
    let node_logs = |nodes: &[NodeProcess]| {
        nodes
            .iter()
            .map(|n| std::fs::read_to_string(&n.log).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    for args in [
        &["rollout", "status", "deployment/web", "--timeout=50s"][..],
        &[
            "wait",
            "--for=condition=Ready",
            "pod/client",
            "--timeout=50s",
        ][..],
    ] {
        let r = k.run(args);
        if r.code != 0 {
            let pods = k.run(&["get", "pods", "-o", "wide"]).stdout;
            let events = k.run(&["get", "events"]).stdout;
            panic!(
                "{args:?}: {}\n{pods}\n{events}\n{}",
                r.stderr,
                node_logs(&nodes)
            );
        }
    }
    // The backends are on node-b, the client on node-a.
    k.run(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={.items[*].spec.nodeName}",
    ])
    .ok()
    .out("node-b")
    .not_out("node-a");
    for name in ["web.default.svc.cluster.local:80", "web.default:80"] {
        until_answers(&k, "client", name).out("web-");
    }
    // A pod reaches the other node's pod directly (routes between the pod subnets).
    let ip = k
        .run(&[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[0].status.podIP}",
        ])
        .ok()
        .stdout
        .trim()
        .to_string();
    assert!(
        ip.starts_with("10.244.2."),
        "a pod IP of node-b's subnet: {ip}"
    );
    until_answers(&k, "client", &format!("{ip}:8080"));
    // The NodePort answers on every node's address.
    let port = k
        .run(&[
            "get",
            "svc",
            "web",
            "-o",
            "jsonpath={.spec.ports[0].nodePort}",
        ])
        .ok()
        .stdout
        .trim()
        .to_string();
    for m in &machines {
        until_answers(&k, "client", &format!("{}:{port}", m.address()));
    }
    k.run(&[
        "delete",
        "deployment",
        "web",
        "--wait=true",
        "--timeout=60s",
    ])
    .ok();
    k.run(&["delete", "pod", "client", "--wait=true", "--timeout=60s"])
        .ok();
    for node in &mut nodes {
        node.stop();
    }
    // No rule of a stopped node is left in its kernel.
    for m in &machines {
        let out = Command::new("ip")
            .args(["netns", "exec", m.netns().name(), "nft", "list", "tables"])
            .output()
            .expect("nft runs");
        let tables = String::from_utf8_lossy(&out.stdout).into_owned();
        for t in ["kube-proxy", "matryoshka-netpol", "matryoshka-podnet"] {
            assert!(
                !tables.contains(t),
                "table {t} left in {}:\n{tables}",
                m.netns().name()
            );
        }
    }
    drop(server);
    for m in machines {
        rt.block_on(m.delete()).expect("the machine is removed");
    }
    rt.block_on(fabric.delete()).expect("the fabric is removed");
}
