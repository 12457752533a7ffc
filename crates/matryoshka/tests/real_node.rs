//! `matryoshka up --node real` end to end: the platform runs one real node (the CRI agent
//! with its own containerd), pulls every image from its own registry (the test images are
//! pushed with `matryoshka image import`), and real kubectl 1.27 and 1.33 talk to real
//! containers through the API server and the node's kubelet API: logs, exec (exit codes,
//! stdin, a TTY), attach, port-forward, cp both ways, top, and a Deployment of 10 replicas
//! rolling to a new image.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{Backend, Kubectl, Run, Server, free_port, manifest, remove_cgroup_root};

const LONG: Duration = Duration::from_secs(120);

/// One real node on this machine at a time: `up`'s node uses the machine's defaults (the
/// `cni0` bridge, `10.244.0.0/24`, `/kubepods`), as a platform's one node does.
static ONE_NODE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A platform with a real node that is stopped with SIGTERM (so the node removes its pods
/// and stops its containerd) however the test ends.
struct Platform {
    server: Option<Server>,
    /// The node's address: on an interface of this test's own, so that pods reach
    /// the node (its DNS server, NodePorts) and traffic never leaves the machine.
    address: NodeAddress,
    _one: std::sync::MutexGuard<'static, ()>,
}

/// A veth pair (no `dummy` module here) with one address on one end, removed on drop.
struct NodeAddress {
    device: String,
    ip: String,
}

impl NodeAddress {
    fn create() -> NodeAddress {
        let n = std::process::id() % 250 + 1;
        let device = format!("mtnode{n}");
        let peer = format!("mtnode{n}p");
        let ip = format!("10.250.{n}.1");
        let _ = Command::new("ip")
            .args(["link", "del", &device])
            .stderr(Stdio::null())
            .status();
        for args in [
            vec![
                "link", "add", &device, "type", "veth", "peer", "name", &peer,
            ],
            vec!["addr", "add", &format!("{ip}/32"), "dev", &device],
            vec!["link", "set", &device, "up"],
            vec!["link", "set", &peer, "up"],
        ] {
            let ok = Command::new("ip")
                .args(&args)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "ip {args:?}");
        }
        NodeAddress { device, ip }
    }
}

impl Drop for NodeAddress {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.device])
            .status();
    }
}

impl Platform {
    fn start() -> Platform {
        Platform::start_with(&[])
    }

    fn start_with(extra: &[&str]) -> Platform {
        let one = ONE_NODE.lock().unwrap_or_else(|e| e.into_inner());
        let address = NodeAddress::create();
        let kubelet_port = free_port().to_string();
        let mut args = vec![
            "--node",
            "real",
            "--node-ip",
            &address.ip,
            "--kubelet-port",
            &kubelet_port,
            "--remove-pods-on-exit",
            // Names outside the cluster are refused, never forwarded off the machine.
            "--cluster-dns-upstream",
            "none",
        ];
        args.extend_from_slice(extra);
        let server = Server::start_with(Backend::Embedded, &args);
        let p = Platform {
            server: Some(server),
            address,
            _one: one,
        };
        p.server().import_test_images();
        p
    }

    fn server(&self) -> &Server {
        self.server.as_ref().expect("running")
    }

    fn kubectl(&self, version: &str) -> Kubectl {
        self.server().kubectl(version)
    }
}

impl Platform {
    /// Stops the platform and asserts that its node left no rule in the kernel.
    fn stop(mut self) {
        self.terminate();
        let out = Command::new("nft")
            .args(["list", "tables"])
            .output()
            .expect("nft runs");
        let tables = String::from_utf8_lossy(&out.stdout).into_owned();
        for t in ["kube-proxy", "matryoshka-netpol", "matryoshka-podnet"] {
            assert!(!tables.contains(t), "table {t} left behind:\n{tables}");
        }
    }

    fn terminate(&mut self) {
        if let Some(mut s) = self.server.take() {
            let status = s.terminate();
            // What a node leaves by design once its pods are gone (as a kubelet and the
            // bridge plugin do): the pods' cgroup root and the bridge. Tests remove them.
            remove_cgroup_root("kubepods");
            let _ = Command::new("ip").args(["link", "del", "cni0"]).status();
            if !status.success() && !std::thread::panicking() {
                panic!("matryoshka up exited with {status}:\n{}", s.log());
            }
        }
    }
}

impl Drop for Platform {
    fn drop(&mut self) {
        // SHOW_LOG=1 prints the platform's log when a test fails (for debugging).
        if std::thread::panicking()
            && std::env::var_os("SHOW_LOG").is_some()
            && let Some(s) = &self.server
        {
            eprintln!("{}", s.log());
        }
        self.terminate();
    }
}

/// Waits until the node is Ready.
fn node_ready(k: &Kubectl) {
    k.eventually(
        &[
            "get",
            "nodes",
            "-o",
            "jsonpath={.items[*].status.conditions[?(@.type==\"Ready\")].status}",
        ],
        LONG,
        |r| r.code == 0 && r.stdout.contains("True"),
    );
}

fn apply(k: &Kubectl, dir: &Path, name: &str, yaml: &str) {
    let path = manifest(dir, name, yaml);
    k.run(&["apply", "-f", path.to_str().expect("utf-8")]).ok();
}

fn wait_ready(k: &Kubectl, pod: &str) {
    k.run(&[
        "wait",
        "--for=condition=Ready",
        &format!("pod/{pod}"),
        "--timeout=120s",
    ])
    .ok();
}

/// `kubectl port-forward` to `pod`'s `port`, then an HTTP GET through the local port.
fn port_forward_get(k: &Kubectl, pod: &str, port: u16) -> String {
    let mut child = k.spawn(&["port-forward", &format!("pod/{pod}"), &format!(":{port}")]);
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let local = loop {
        let line = match lines.next() {
            Some(Ok(l)) => l,
            _ => {
                let _ = child.kill();
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                panic!("kubectl port-forward ended without forwarding: {err}");
            }
        };
        // "Forwarding from 127.0.0.1:41234 -> 8080"
        if let Some(rest) = line.strip_prefix("Forwarding from 127.0.0.1:") {
            break rest
                .split_whitespace()
                .next()
                .and_then(|p| p.parse::<u16>().ok())
                .expect("a local port");
        }
    };
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", local)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    tcp.write_all(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
        .expect("request");
    let mut response = String::new();
    let _ = tcp.read_to_string(&mut response);
    let _ = child.kill();
    let _ = child.wait();
    response
}

/// `kubectl exec -it` under a pseudo-terminal (`script`), so kubectl really allocates a TTY.
fn exec_tty(k: &Kubectl, pod: &str, script: &str) -> (i32, String) {
    let cmdline = format!(
        "{} --kubeconfig {} exec -it {pod} -- sh -c '{script}'",
        k.bin.display(),
        k.kubeconfig.display()
    );
    let out = Command::new("script")
        .args(["-qec", &cmdline, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|c| c.wait_with_output())
        .expect("script runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn streaming_through_the_platform(version: &str) {
    let platform = Platform::start();
    let k = platform.kubectl(version);
    node_ready(&k);
    let dir = tempfile::tempdir().expect("tempdir");
    apply(
        &k,
        dir.path(),
        "pods.yaml",
        r#"
apiVersion: v1
kind: Pod
metadata: {name: shell}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox:1.35
    command: ["sh", "-c", "echo hello from the pod; exec sleep 3600"]
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: main
    image: docker.io/matryoshka/mtest:1
    args: ["serve-http", "--port", "8080"]
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata: {name: reader}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox:1.35
    stdin: true
    stdinOnce: true
    command: ["sh", "-c", "while read line; do echo \"got $line\"; done"]
---
apiVersion: v1
kind: Pod
metadata: {name: busy}
spec:
  containers:
  - name: main
    image: docker.io/matryoshka/mtest:1
    args: ["busy"]
"#,
    );
    for pod in ["shell", "web", "reader", "busy"] {
        wait_ready(&k, pod);
    }

    // logs
    k.run(&["logs", "shell"]).ok().out("hello from the pod");

    // exec: output, stderr, the exit code, stdin
    let r = k.run(&[
        "exec",
        "shell",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
    ]);
    // kubectl exits with the command's code and says so.
    r.fails(3)
        .out("out")
        .err("err")
        .err("command terminated with exit code 3");
    k.run_stdin(
        &["exec", "-i", "shell", "--", "cat"],
        Some("through stdin\n"),
    )
    .ok()
    .out("through stdin");
    let (code, out) = exec_tty(&k, "shell", "tty; exit 4");
    assert!(out.contains("/dev/pts/"), "exec -it has a TTY: {out}");
    assert_eq!(code, 4, "kubectl exits with the command's code: {out}");

    // attach to the main process's stdin and stdout
    k.run_stdin(&["attach", "-i", "reader"], Some("ping\n"))
        .ok()
        .out("got ping");

    // port-forward to the HTTP server
    let response = port_forward_get(&k, "web", 8080);
    assert!(
        response.starts_with("HTTP/1.")
            && response.contains(" 200 ")
            && response.contains("mtest web"),
        "the forwarded port answers: {response}"
    );

    // cp in and out
    let local = dir.path().join("in.txt");
    std::fs::write(&local, "copied in\n").expect("write");
    k.run(&["cp", local.to_str().expect("utf-8"), "shell:/tmp/in.txt"])
        .ok();
    k.run(&["exec", "shell", "--", "cat", "/tmp/in.txt"])
        .ok()
        .out("copied in");
    let back = dir.path().join("out.txt");
    k.run(&["cp", "shell:/tmp/in.txt", back.to_str().expect("utf-8")])
        .ok();
    assert_eq!(
        std::fs::read_to_string(&back).expect("copied out"),
        "copied in\n"
    );

    // top: a busy pod uses CPU
    k.eventually(&["top", "pod", "busy", "--no-headers"], LONG, |r: &Run| {
        r.code == 0
            && r.stdout
                .split_whitespace()
                .nth(1)
                .and_then(|cpu| cpu.strip_suffix('m'))
                .and_then(|m| m.parse::<u64>().ok())
                .is_some_and(|m| m > 0)
    });
    k.run(&["top", "node", "--no-headers"]).ok();

    k.run(&["delete", "pod", "--all", "--wait=true", "--timeout=60s"])
        .ok();
    platform.stop();
}

#[test]
fn kubectl_1_27_logs_execs_attaches_forwards_and_copies_with_real_containers() {
    streaming_through_the_platform("1.27");
}

#[test]
fn kubectl_1_33_logs_execs_attaches_forwards_and_copies_with_real_containers() {
    streaming_through_the_platform("1.33");
}

#[test]
fn a_deployment_of_ten_real_pods_rolls_to_a_new_image_and_its_service_lists_them_ready() {
    let platform = Platform::start();
    let k = platform.kubectl("1.33");
    node_ready(&k);
    let dir = tempfile::tempdir().expect("tempdir");
    apply(
        &k,
        dir.path(),
        "roll.yaml",
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: roll}
spec:
  replicas: 10
  selector: {matchLabels: {app: roll}}
  template:
    metadata: {labels: {app: roll}}
    spec:
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
metadata: {name: roll}
spec:
  selector: {app: roll}
  ports: [{port: 80, targetPort: 8080}]
"#,
    );
    let started = Instant::now();
    k.run(&["rollout", "status", "deployment/roll", "--timeout=180s"])
        .ok();
    eprintln!("10 real pods ready after {:?}", started.elapsed());
    k.eventually(
        &[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=roll",
            "-o",
            "jsonpath={.items[*].endpoints[?(@.conditions.ready==true)].addresses[0]}",
        ],
        LONG,
        |r| r.code == 0 && r.stdout.split_whitespace().count() == 10,
    );
    k.run(&[
        "set",
        "image",
        "deployment/roll",
        "main=docker.io/matryoshka/mtest:latest",
    ])
    .ok();
    k.run(&["rollout", "status", "deployment/roll", "--timeout=180s"])
        .ok();
    k.eventually(
        &[
            "get",
            "pods",
            "-l",
            "app=roll",
            "-o",
            "jsonpath={range .items[*]}{.spec.containers[0].image} {.status.phase}{\"\\n\"}{end}",
        ],
        LONG,
        |r| {
            let lines: Vec<&str> = r.stdout.lines().filter(|l| !l.is_empty()).collect();
            r.code == 0
                && lines.len() == 10
                && lines
                    .iter()
                    .all(|l| *l == "docker.io/matryoshka/mtest:latest Running")
        },
    );
    k.run(&[
        "get",
        "deployment",
        "roll",
        "-o",
        "jsonpath={.status.updatedReplicas}/{.status.readyReplicas}",
    ])
    .ok()
    .out("10/10");
    k.run(&[
        "delete",
        "deployment",
        "roll",
        "--wait=true",
        "--timeout=60s",
    ])
    .ok();
    platform.stop();
}

/// `mtest tcp` from the client pod: an HTTP GET of `target`; `None` when it cannot connect.
/// `admin.svc` of the seed: a tenant cluster's in-cluster Service `kubernetes-<name>` in its
/// tenant's namespace leads pods of the root cluster to that cluster's API server, which
/// presents a certificate for the Service's name and serves that cluster.
fn a_root_pod_reaches_a_tenant_cluster_through_its_service(platform: &Platform, k: &Kubectl) {
    k.run_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: platform.matryoshka.dev/v1alpha1\nkind: TenantCluster\nmetadata: {name: demo, namespace: tenant-root}\nspec: {}\n"),
    )
    .ok();
    let conf = k.eventually(
        &[
            "get",
            "secret",
            "-n",
            "tenant-root",
            "kubernetes-demo-admin-kubeconfig",
            "-o",
            "go-template={{ printf \"%s\\n\" (index .data \"admin.conf\" | base64decode) }}",
        ],
        LONG,
        |r| r.code == 0,
    );
    let path = platform.server().dir.join("demo.conf");
    std::fs::write(&path, &conf.stdout).expect("write kubeconfig");
    let t = Kubectl::new("1.33", &path);
    t.run(&["create", "configmap", "only-in-demo", "--from-literal=a=b"])
        .ok();
    t.run(&["create", "serviceaccount", "robot"]).ok();
    t.run(&[
        "create",
        "rolebinding",
        "robot-view",
        "--clusterrole=view",
        "--serviceaccount=default:robot",
    ])
    .ok();
    let token = t.run(&["create", "token", "robot"]).ok().stdout.clone();
    let ca = t
        .run(&[
            "config",
            "view",
            "--raw",
            "-o",
            "jsonpath={.clusters[0].cluster.certificate-authority-data}",
        ])
        .ok()
        .stdout
        .clone();
    use base64::Engine as _;
    let ca = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(ca.trim())
            .expect("base64 CA"),
    )
    .expect("PEM");
    k.run(&["exec", "client", "--", "mkdir", "-p", "/tmp/demo"])
        .ok();
    for (file, content) in [("token", token.trim()), ("ca.crt", ca.as_str())] {
        // `; true` keeps the shell (and the exec's stdout) alive until `cat` has read its
        // input: containerd 1.6's CRI exec closes the stdin stream as soon as the process's
        // stdout or stderr ends, which a shell that execs `cat > file` does at once, and the
        // input is then lost (fixed upstream in containerd's exec_io, not in Debian's 1.6).
        k.run_stdin(
            &[
                "exec",
                "-i",
                "client",
                "--",
                "sh",
                "-c",
                &format!("cat > /tmp/demo/{file}; true"),
            ],
            Some(content),
        )
        .ok();
        let back = k
            .run(&["exec", "client", "--", "cat", &format!("/tmp/demo/{file}")])
            .ok()
            .stdout
            .clone();
        assert_eq!(back, content, "{file} written through exec stdin");
    }
    let deadline = Instant::now() + LONG;
    loop {
        let r = k.run(&[
            "exec",
            "client",
            "--",
            "/mtest",
            "api",
            "--dir",
            "/tmp/demo",
            "--server",
            "kubernetes-demo.tenant-root.svc:6443",
            "/api/v1/namespaces/default/configmaps/only-in-demo",
        ]);
        if r.code == 0 && r.stdout.contains("status: 200") && r.stdout.contains("only-in-demo") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the root pod's call to admin.svc: {}\n{}",
            r.stdout,
            r.stderr
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Lets `default:default` view the cluster, then waits until pod `pod` (of `default`, with
/// `/mtest`) lists its namespace's pods through its own in-cluster API access
/// (`KUBERNETES_SERVICE_HOST`, its token and `ca.crt`) and finds itself; gives the answer.
fn pod_lists_its_pods(k: &Kubectl, pod: &str) -> String {
    k.run(&[
        "create",
        "rolebinding",
        "default-view",
        "--clusterrole=view",
        "--serviceaccount=default:default",
    ])
    .ok();
    k.eventually(&["exec", pod, "--", "/mtest", "api"], LONG, |r| {
        r.code == 0 && r.stdout.contains("status: 200") && r.stdout.contains(&format!("\"{pod}\""))
    })
    .stdout
    .clone()
}

fn get_from_pod(k: &Kubectl, target: &str) -> Option<String> {
    let r = k.run(&[
        "exec",
        "client",
        "--",
        "/mtest",
        "tcp",
        target,
        "--timeout",
        "2",
        "--send",
        "GET / HTTP/1.0\r\n\r\n",
    ]);
    (r.code == 0).then(|| r.stdout.clone())
}

/// Retries `get_from_pod` until `want` holds for its answer.
fn until_answer(k: &Kubectl, target: &str, want: impl Fn(&Option<String>) -> bool) {
    let deadline = Instant::now() + LONG;
    loop {
        let got = get_from_pod(k, target);
        if want(&got) {
            return;
        }
        assert!(Instant::now() < deadline, "{target} from the pod: {got:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn answers(got: &Option<String>) -> bool {
    got.as_deref()
        .is_some_and(|o| o.contains(" 200 ") && o.contains("mtest web-"))
}

#[test]
fn a_pod_reaches_a_service_by_its_dns_names_and_scaling_to_zero_makes_it_refuse() {
    let platform = Platform::start();
    let k = platform.kubectl("1.33");
    node_ready(&k);
    let dir = tempfile::tempdir().expect("tempdir");
    apply(
        &k,
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
  containers:
  - name: main
    image: docker.io/matryoshka/mtest:1
    args: ["sleep", "infinity"]
"#,
    );
    k.run(&["rollout", "status", "deployment/web", "--timeout=120s"])
        .ok();
    wait_ready(&k, "client");
    // A pod calls the API server with its service-account token, through the `kubernetes`
    // Service (its endpoints are the advertise address, here the node's).
    pod_lists_its_pods(&k, "client");
    a_root_pod_reaches_a_tenant_cluster_through_its_service(&platform, &k);
    for name in [
        "web.default.svc.cluster.local:80",
        "web.default:80",
        "web:80",
    ] {
        until_answer(&k, name, answers);
    }
    // The NodePort answers on the node's address.
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
    until_answer(&k, &format!("{}:{port}", platform.address.ip), answers);
    // No endpoints: the Service refuses; endpoints again: it answers.
    k.run(&["scale", "deployment/web", "--replicas=0"]).ok();
    until_answer(&k, "web.default:80", |got| got.is_none());
    k.run(&["scale", "deployment/web", "--replicas=1"]).ok();
    k.run(&["rollout", "status", "deployment/web", "--timeout=120s"])
        .ok();
    until_answer(&k, "web.default:80", answers);
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
    platform.stop();
}

/// `kubectl exec <pod> -n <ns> -- /mtest <args>`.
fn mtest(k: &Kubectl, ns: &str, pod: &str, args: &[&str]) -> Run {
    let mut all = vec!["exec", "-n", ns, pod, "--", "/mtest"];
    all.extend_from_slice(args);
    k.run(&all)
}

/// Retries `mtest` in `pod` until `want` holds.
fn until_mtest(
    k: &Kubectl,
    ns: &str,
    pod: &str,
    args: &[&str],
    want: impl Fn(&Run) -> bool,
) -> Run {
    let deadline = Instant::now() + LONG;
    loop {
        let r = mtest(k, ns, pod, args);
        if want(&r) {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "mtest {args:?} in {ns}/{pod}: {}\n{}",
            r.stdout,
            r.stderr
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

const GET: &str = "GET /hostname HTTP/1.0\r\n\r\n";

#[test]
fn dns_records_session_affinity_and_network_policies_work_on_the_real_node() {
    let platform = Platform::start();
    let k = platform.kubectl("1.33");
    node_ready(&k);
    let dir = tempfile::tempdir().expect("tempdir");
    apply(
        &k,
        dir.path(),
        "net.yaml",
        r#"
apiVersion: v1
kind: Namespace
metadata: {name: np}
---
apiVersion: v1
kind: Namespace
metadata: {name: other}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: np}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
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
metadata: {name: sticky, namespace: np}
spec:
  selector: {app: web}
  sessionAffinity: ClientIP
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: np}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: np}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{name: http, port: 8080}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: np}
spec:
  serviceName: db
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
      - name: main
        image: docker.io/matryoshka/mtest:1
        args: ["serve-http", "--port", "8080"]
        ports: [{name: http, containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: alias, namespace: np}
spec:
  type: ExternalName
  externalName: web.np.svc.cluster.local
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: np, labels: {role: client}}
spec:
  containers:
  - name: main
    image: docker.io/matryoshka/mtest:1
    args: ["sleep", "infinity"]
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: other}
spec:
  containers:
  - name: main
    image: docker.io/matryoshka/mtest:1
    args: ["sleep", "infinity"]
"#,
    );
    k.run(&[
        "-n",
        "np",
        "rollout",
        "status",
        "deployment/web",
        "--timeout=120s",
    ])
    .ok();
    k.run(&[
        "-n",
        "np",
        "rollout",
        "status",
        "statefulset/db",
        "--timeout=120s",
    ])
    .ok();
    for ns in ["np", "other"] {
        k.run(&[
            "wait",
            "-n",
            ns,
            "--for=condition=Ready",
            "pod/client",
            "--timeout=120s",
        ])
        .ok();
    }
    let db_ip = k
        .run(&[
            "get",
            "pod",
            "-n",
            "np",
            "db-0",
            "-o",
            "jsonpath={.status.podIP}",
        ])
        .ok()
        .stdout
        .trim()
        .to_string();

    // DNS: a headless StatefulSet's pod, SRV of a named port, ExternalName as CNAME.
    until_mtest(
        &k,
        "np",
        "client",
        &["dns", "db-0.db.np.svc.cluster.local"],
        |r| r.code == 0 && r.stdout.contains(&db_ip),
    );
    until_mtest(
        &k,
        "np",
        "client",
        &["dns", "_http._tcp.db.np.svc.cluster.local", "SRV"],
        |r| {
            r.code == 0
                && r.stdout.contains("8080")
                && r.stdout.contains("db-0.db.np.svc.cluster.local")
        },
    );
    until_mtest(
        &k,
        "np",
        "client",
        &["dns", "alias.np.svc.cluster.local", "CNAME"],
        |r| r.code == 0 && r.stdout.contains("web.np.svc.cluster.local"),
    );

    // sessionAffinity: ClientIP sticks to one backend.
    let first = until_mtest(
        &k,
        "np",
        "client",
        &["tcp", "sticky:80", "--send", GET],
        |r| r.code == 0 && r.stdout.contains(" 200 "),
    );
    let backend = first.stdout.lines().last().unwrap_or_default().to_string();
    assert!(backend.starts_with("web-"), "{}", first.stdout);
    for _ in 0..8 {
        let r = mtest(&k, "np", "client", &["tcp", "sticky:80", "--send", GET]);
        assert_eq!(
            r.stdout.lines().last().unwrap_or_default(),
            backend,
            "affinity: {}",
            r.stdout
        );
    }

    // NetworkPolicy: ingress deny, then allow only namespace `other`.
    apply(
        &k,
        dir.path(),
        "deny.yaml",
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-ingress, namespace: np}
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress]
"#,
    );
    let refused = |r: &Run| r.code != 0;
    let answered = |r: &Run| r.code == 0 && r.stdout.contains(" 200 ");
    let to_web = ["tcp", "web.np:80", "--timeout", "2", "--send", GET];
    until_mtest(&k, "np", "client", &to_web, refused);
    until_mtest(&k, "other", "client", &to_web, refused);
    apply(
        &k,
        dir.path(),
        "allow.yaml",
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-other, namespace: np}
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress]
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: other}}
"#,
    );
    until_mtest(&k, "other", "client", &to_web, answered);
    until_mtest(&k, "np", "client", &to_web, refused);

    // Egress: the client may send nothing, yet DNS keeps working.
    apply(
        &k,
        dir.path(),
        "egress.yaml",
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: client-egress, namespace: other}
spec:
  podSelector: {}
  policyTypes: [Egress]
"#,
    );
    until_mtest(&k, "other", "client", &to_web, refused);
    mtest(&k, "other", "client", &["dns", "web.np.svc.cluster.local"])
        .ok()
        .out("web.np.svc.cluster.local");

    k.run(&[
        "delete",
        "namespace",
        "np",
        "other",
        "--wait=true",
        "--timeout=120s",
    ])
    .ok();
    platform.stop();
}

/// Issue 21's acceptance: a validating admission webhook served by a real pod, reached
/// through its Service's endpoints over the pod network, with the serving certificate
/// verified against the configuration's `caBundle` for `hooks.default.svc`.
#[test]
fn a_webhook_served_by_a_real_pod_behind_a_service_refuses_what_it_denies() {
    use base64::Engine;
    let platform = Platform::start();
    let k = platform.kubectl("1.33");
    node_ready(&k);
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = pki::Ca::generate("webhook-test-ca").expect("ca");
    let pair = ca
        .issue_server("hooks.default.svc", &["hooks.default.svc".to_string()])
        .expect("serving certificate");
    let cert = dir.path().join("tls.crt");
    let key = dir.path().join("tls.key");
    std::fs::write(&cert, &pair.cert_pem).expect("write cert");
    std::fs::write(&key, &pair.key_pem).expect("write key");
    k.run(&[
        "create",
        "secret",
        "tls",
        "hooks-tls",
        &format!("--cert={}", cert.display()),
        &format!("--key={}", key.display()),
    ])
    .ok();
    apply(
        &k,
        dir.path(),
        "hooks.yaml",
        r#"
apiVersion: v1
kind: Pod
metadata: {name: hooks, labels: {app: hooks}}
spec:
  automountServiceAccountToken: false
  containers:
  - name: main
    image: docker.io/matryoshka/mtest:1
    args: ["serve-webhook", "--cert", "/tls/tls.crt", "--key", "/tls/tls.key", "--port", "8443"]
    readinessProbe:
      tcpSocket: {port: 8443}
      periodSeconds: 1
    volumeMounts: [{name: tls, mountPath: /tls}]
  volumes: [{name: tls, secret: {secretName: hooks-tls}}]
---
apiVersion: v1
kind: Service
metadata: {name: hooks}
spec:
  selector: {app: hooks}
  ports: [{port: 443, targetPort: 8443}]
"#,
    );
    wait_ready(&k, "hooks");
    k.eventually(
        &[
            "get",
            "endpoints",
            "hooks",
            "-o",
            "jsonpath={.subsets[*].addresses[*].ip}",
        ],
        LONG,
        |r| r.code == 0 && !r.stdout.trim().is_empty(),
    );
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca.pair.cert_pem.as_bytes());
    apply(
        &k,
        dir.path(),
        "webhook.yaml",
        &format!(
            r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: pod-webhook}}
webhooks:
- name: pod.webhook.example.com
  clientConfig:
    service: {{namespace: default, name: hooks, path: /validate}}
    caBundle: {bundle}
  rules: [{{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}}]
  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: default}}}}
  sideEffects: None
  admissionReviewVersions: [v1]
"#
        ),
    );
    k.run(&["create", "configmap", "bad-one", "--from-literal=k=v"])
        .fails(1)
        .err("admission webhook \"pod.webhook.example.com\" denied the request: bad-one is refused by the webhook in a pod");
    k.run(&["get", "configmap", "bad-one"]).fails(1);
    k.run(&["create", "configmap", "good-one", "--from-literal=k=v"])
        .ok();
    k.run(&["delete", "validatingwebhookconfiguration", "pod-webhook"])
        .ok();
    k.run(&["delete", "pod", "hooks", "--wait=true", "--timeout=60s"])
        .ok();
    platform.stop();
}

/// The kubeconfig of DropApp cluster `name`, read as the seed reads it (Secret `vc-<name>`,
/// key `config`), written to `dir`.
fn dropapp_kubeconfig(k: &Kubectl, dir: &Path, name: &str) -> Kubectl {
    k.eventually(
        &["get", "secret", "-n", name, &format!("vc-{name}")],
        LONG,
        |r| r.code == 0,
    );
    let r = k.run(&[
        "get",
        "secret",
        "-n",
        name,
        &format!("vc-{name}"),
        "-o",
        "jsonpath={.data.config}",
    ]);
    let config = base64_decode(r.ok().stdout.trim());
    let path = dir.join(format!("{name}-kubeconfig"));
    std::fs::write(&path, config).expect("kubeconfig");
    Kubectl::new("1.33", &path)
}

fn base64_decode(s: &str) -> Vec<u8> {
    let out = Command::new("base64")
        .arg("-d")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().expect("stdin").write_all(s.as_bytes())?;
            c.wait_with_output()
        })
        .expect("base64 runs");
    assert!(out.status.success(), "base64 -d");
    out.stdout
}

/// The pods of a tenant cluster as `name phase ip node` lines.
fn tenant_pods(k: &Kubectl, selector: &str) -> Vec<String> {
    let r = k.run(&[
        "get",
        "pods",
        "-l",
        selector,
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.status.podIP} {.spec.nodeName}{\"\\n\"}{end}",
    ]);
    r.stdout.lines().map(str::to_string).collect()
}

const SHARED_WEB: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: main
        image: docker.io/matryoshka/mtest:1
        args: ["serve-http", "--port", "8080"]
        env:
        - name: GREETING
          valueFrom: {configMapKeyRef: {name: greeting, key: text}}
        readinessProbe:
          httpGet: {path: /healthz, port: 8080}
          periodSeconds: 1
---
apiVersion: v1
kind: ConfigMap
metadata: {name: greeting}
data: {text: hello}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
"#;

#[test]
fn a_dropapp_tenant_cluster_runs_its_pods_on_the_root_node_through_the_syncer() {
    let platform = Platform::start_with(&["--dropapp-api"]);
    let k = platform.kubectl("1.33");
    node_ready(&k);
    let dir = tempfile::tempdir().expect("tempdir");
    // The seed's flow: a TenantCluster with only a name, its kubeconfig from vc-<name>.
    apply(
        &k,
        dir.path(),
        "tc.yaml",
        "apiVersion: cluster.dropapp.ru/v1alpha1\nkind: TenantCluster\nmetadata:\n  name: team-x\n",
    );
    let inner = dropapp_kubeconfig(&k, dir.path(), "team-x");
    inner.eventually(&["get", "ns"], LONG, |r| {
        r.code == 0 && r.stdout.contains("kube-system")
    });
    // The root node is mirrored into the tenant cluster, Ready.
    node_ready(&inner);
    apply(&inner, dir.path(), "web.yaml", SHARED_WEB);
    inner
        .run(&["rollout", "status", "deployment/web", "--timeout=120s"])
        .ok();
    let pods = tenant_pods(&inner, "app=web");
    assert_eq!(pods.len(), 2, "{pods:?}");
    for line in &pods {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f[1], "Running", "{line}");
        assert!(
            f[2].parse::<std::net::Ipv4Addr>().is_ok(),
            "a real IP: {line}"
        );
        // On the root cluster: the same pod under its translated name, in the namespace
        // named after the cluster, with the same IP.
        let host = format!("{}-x-default-x-team-x", f[0]);
        let r = k.run(&[
            "get",
            "pod",
            "-n",
            "team-x",
            &host,
            "-o",
            "jsonpath={.status.phase} {.status.podIP} {.metadata.labels.vcluster\\.loft\\.sh/managed-by}",
        ]);
        assert_eq!(r.ok().stdout, format!("Running {} team-x", f[2]));
    }
    // The ConfigMap it uses is there under its translated name, and follows the tenant's.
    k.run(&[
        "get",
        "configmap",
        "-n",
        "team-x",
        "greeting-x-default-x-team-x",
    ])
    .ok();
    inner
        .run(&[
            "patch",
            "configmap",
            "greeting",
            "-p",
            r#"{"data":{"text":"hi"}}"#,
        ])
        .ok();
    k.eventually(
        &[
            "get",
            "configmap",
            "-n",
            "team-x",
            "greeting-x-default-x-team-x",
            "-o",
            "jsonpath={.data.text}",
        ],
        LONG,
        |r| r.stdout == "hi",
    );
    // The tenant Service has the host Service's cluster IP.
    let tenant_ip = inner
        .run(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"])
        .stdout
        .clone();
    let host_ip = k
        .run(&[
            "get",
            "svc",
            "-n",
            "team-x",
            "web-x-default-x-team-x",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ])
        .stdout
        .clone();
    inner.eventually(
        &["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"],
        LONG,
        |r| r.stdout == host_ip,
    );
    assert!(!host_ip.is_empty(), "tenant {tenant_ip}, host {host_ip}");
    // A tenant pod reaches the tenant Service by its tenant DNS name, through exec in the
    // tenant cluster (the kubelet proxy takes it to the host pod).
    let first = pods[0].split(' ').next().expect("name").to_string();
    let host_pod = format!("{first}-x-default-x-team-x");
    for name in ["web.default.svc.cluster.local:80", "web:80"] {
        until_mtest(
            &inner,
            "default",
            &first,
            &[
                "tcp",
                name,
                "--timeout",
                "2",
                "--send",
                "GET / HTTP/1.0\r\n\r\n",
            ],
            |r| r.code == 0 && r.stdout.contains(" 200 ") && r.stdout.contains("mtest web-"),
        );
    }
    // The container sees the ConfigMap's value and its tenant name.
    let r = inner.run(&[
        "exec",
        &first,
        "--",
        "sh",
        "-c",
        "echo $GREETING $(hostname)",
    ]);
    assert_eq!(r.ok().stdout.trim(), format!("hello {first}"));
    // Its service-account token is the tenant cluster's (minted there, bound to the tenant
    // pod), and the namespace file names the tenant namespace.
    let r = inner.run(&[
        "exec",
        &first,
        "--",
        "cat",
        "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "/var/run/secrets/kubernetes.io/serviceaccount/namespace",
    ]);
    let out = r.ok().stdout.clone();
    assert!(out.ends_with("default"), "{out}");
    let payload = out
        .split('.')
        .nth(1)
        .expect("a JWT")
        .replace('-', "+")
        .replace('_', "/");
    let padded = format!("{payload}{}", "=".repeat((4 - payload.len() % 4) % 4));
    let claims = String::from_utf8(base64_decode(&padded)).expect("utf-8 claims");
    assert!(
        claims.contains("system:serviceaccount:default:default") && claims.contains(&first),
        "{claims}"
    );
    // An in-cluster client in the pod (KUBERNETES_SERVICE_HOST, the token, ca.crt) reaches
    // its own cluster's API, not the host's: it lists the tenant's pods by their tenant names.
    let listed = pod_lists_its_pods(&inner, &first);
    assert!(!listed.contains("-x-default-x-"), "{listed}");
    // It was given the platform's API server as pods reach it (the root's endpoints), not
    // the host's `kubernetes` Service, which on another host would be another API server.
    let api = k
        .run(&[
            "get",
            "endpoints",
            "kubernetes",
            "-n",
            "default",
            "-o",
            "jsonpath={.subsets[0].addresses[0].ip}:{.subsets[0].ports[0].port}",
        ])
        .ok()
        .stdout
        .clone();
    let r = inner.run(&[
        "exec",
        &first,
        "--",
        "sh",
        "-c",
        "echo $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT",
    ]);
    assert_eq!(r.ok().stdout.trim(), api);
    // kubectl logs and port-forward through the tenant API.
    inner.eventually(&["logs", &first], LONG, |r| r.code == 0);
    let answer = port_forward_get(&inner, &first, 8080);
    assert!(answer.contains(" 200 "), "{answer}");
    // A tenant user without pods/exec may not exec.
    inner
        .run(&["exec", &first, "--as", "mallory", "--", "true"])
        .fails(1)
        .err("Forbidden");
    // A second shared cluster sees none of the first's objects and cannot reach its pods
    // (the host NetworkPolicy of each cluster's pods), though both run on one node.
    apply(
        &k,
        dir.path(),
        "tc-y.yaml",
        "apiVersion: cluster.dropapp.ru/v1alpha1\nkind: TenantCluster\nmetadata:\n  name: team-y\n",
    );
    k.run(&["get", "networkpolicy", "-n", "team-x", "vc-work-team-x"])
        .ok();
    let other = dropapp_kubeconfig(&k, dir.path(), "team-y");
    other.eventually(&["get", "ns"], LONG, |r| r.code == 0);
    apply(
        &other,
        dir.path(),
        "client.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: client}\nspec:\n  containers:\n  - name: main\n    image: docker.io/matryoshka/mtest:1\n    args: [\"sleep\", \"infinity\"]\n",
    );
    wait_ready(&other, "client");
    other.run(&["get", "svc", "web"]).fails(1).err("NotFound");
    assert!(!other.run(&["get", "pods", "-A"]).stdout.contains("web-"));
    let web_ip = format!("{host_ip}:80");
    for _ in 0..3 {
        let r = mtest(
            &other,
            "default",
            "client",
            &[
                "tcp",
                &web_ip,
                "--timeout",
                "2",
                "--send",
                "GET / HTTP/1.0\r\n\r\n",
            ],
        );
        assert!(
            !r.stdout.contains(" 200 "),
            "team-y reached team-x's pods: {}",
            r.stdout
        );
    }
    until_mtest(
        &inner,
        "default",
        &first,
        &[
            "tcp",
            &web_ip,
            "--timeout",
            "2",
            "--send",
            "GET / HTTP/1.0\r\n\r\n",
        ],
        |r| r.code == 0 && r.stdout.contains(" 200 "),
    );
    // A ResourceQuota on the host namespace bounds the tenant: beyond it, a tenant pod stays
    // Pending and says why.
    k.run(&["create", "quota", "pods", "-n", "team-x", "--hard=pods=3"])
        .ok();
    apply(
        &inner,
        dir.path(),
        "extra.yaml",
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: extra}
spec:
  replicas: 2
  selector: {matchLabels: {app: extra}}
  template:
    metadata: {labels: {app: extra}}
    spec:
      containers:
      - name: main
        image: docker.io/matryoshka/mtest:1
        args: ["sleep", "infinity"]
"#,
    );
    inner.eventually(
        &["get", "events", "--field-selector", "reason=SyncError"],
        LONG,
        |r| r.code == 0 && r.stdout.contains("exceeded quota"),
    );
    // Exactly one of the two fits under the quota.
    k.eventually(
        &[
            "get",
            "pods",
            "-n",
            "team-x",
            "-l",
            "app=extra",
            "-o",
            "name",
        ],
        LONG,
        |r| r.code == 0 && r.stdout.lines().count() == 1,
    );
    inner.eventually(
        &[
            "get",
            "pods",
            "-l",
            "app=extra",
            "-o",
            "jsonpath={.items[*].status.phase}",
        ],
        LONG,
        |r| r.stdout == "Running Pending" || r.stdout == "Pending Running",
    );
    inner.run(&["delete", "deployment", "extra"]).ok();
    // The host's Events about the pod appear in the tenant.
    inner.eventually(
        &[
            "get",
            "events",
            "--field-selector",
            &format!("involvedObject.name={first}"),
        ],
        LONG,
        |r| r.code == 0 && r.stdout.contains("Started"),
    );
    // A host pod deleted by hand: its tenant pod goes too and the Deployment replaces it.
    k.run(&["delete", "pod", "-n", "team-x", &host_pod, "--wait=false"])
        .ok();
    inner.eventually(&["get", "pods", "-l", "app=web", "-o", "name"], LONG, |r| {
        r.code == 0 && !r.stdout.contains(&first) && r.stdout.lines().count() == 2
    });
    inner
        .run(&["rollout", "status", "deployment/web", "--timeout=120s"])
        .ok();
    // The replacement, made after the Service, has its link variables as the tenant's
    // kubelet would give them: the tenant Service's (host) cluster IP.
    let replacement = tenant_pods(&inner, "app=web")
        .into_iter()
        .map(|l| l.split(' ').next().unwrap_or_default().to_string())
        .find(|n| !pods.iter().any(|p| p.starts_with(&format!("{n} "))))
        .expect("a replacement pod");
    let r = inner.run(&[
        "exec",
        &replacement,
        "--",
        "sh",
        "-c",
        "echo $WEB_SERVICE_HOST:$WEB_SERVICE_PORT",
    ]);
    assert_eq!(r.ok().stdout.trim(), format!("{host_ip}:80"));
    // Deleting the tenant Deployment removes the host pods.
    inner.run(&["delete", "deployment", "web"]).ok();
    k.eventually(
        &[
            "get",
            "pods",
            "-n",
            "team-x",
            "-l",
            "vcluster.loft.sh/managed-by=team-x,app=web",
            "-o",
            "name",
        ],
        LONG,
        |r| r.code == 0 && r.stdout.trim().is_empty(),
    );

    // A shared cluster whose host is named by a kubeconfig Secret (here the root cluster's
    // own admin kubeconfig, as another cluster's would be, in a namespace of its choosing):
    // its pods run there, unowned, and logs and exec reach them through that host's API
    // server with the kubeconfig's credentials.
    let admin = platform.server().kubeconfig();
    k.run(&[
        "create",
        "secret",
        "generic",
        "root-host",
        "-n",
        "tenant-root",
        &format!("--from-file=value={}", admin.display()),
    ])
    .ok();
    apply(
        &k,
        dir.path(),
        "far.yaml",
        "apiVersion: platform.matryoshka.dev/v1alpha1\nkind: TenantCluster\nmetadata:\n  name: far\n  namespace: tenant-root\nspec:\n  workers:\n    mode: shared\n    hostCluster: {kubeconfigSecretRef: {name: root-host}, namespace: far-guests}\n",
    );
    k.eventually(
        &[
            "get",
            "tenantcluster",
            "far",
            "-n",
            "tenant-root",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ],
        LONG,
        |r| r.stdout == "True",
    );
    let far = support::tenant_cluster_kubectl(&k, dir.path(), "tenant-root", "far");
    node_ready(&far);
    far.run(&[
        "run",
        "web",
        "--image=docker.io/matryoshka/mtest:1",
        "--",
        "serve-http",
        "--port",
        "8080",
    ])
    .ok();
    far.eventually(
        &["get", "pod", "web", "-o", "jsonpath={.status.phase}"],
        LONG,
        |r| r.stdout == "Running",
    );
    k.run(&[
        "get",
        "pod",
        "-n",
        "far-guests",
        "web-x-default-x-far",
        "-o",
        "jsonpath={.status.phase} owners={.metadata.ownerReferences}",
    ])
    .ok()
    .out("Running owners=");
    far.eventually(&["logs", "web"], LONG, |r| {
        r.code == 0 && r.stdout.contains("serving HTTP on port 8080")
    });
    let exec = far.run(&[
        "exec",
        "web",
        "--",
        "/mtest",
        "exit",
        "7",
        "--message",
        "through-the-far-host",
    ]);
    assert_eq!(exec.code, 7, "{}\n{}", exec.stdout, exec.stderr);
    assert!(
        exec.stdout.contains("through-the-far-host"),
        "{}",
        exec.stdout
    );
    // Deleting it deletes its pods on the host (the syncer's finalizer, not an owner).
    k.run(&[
        "delete",
        "tenantcluster",
        "far",
        "-n",
        "tenant-root",
        "--timeout=60s",
    ])
    .ok();
    k.eventually(
        &["get", "pods", "-n", "far-guests", "-o", "name"],
        LONG,
        |r| r.code == 0 && r.stdout.trim().is_empty(),
    );
    platform.stop();
}
