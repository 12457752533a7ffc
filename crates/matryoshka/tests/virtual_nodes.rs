//! Virtual nodes out of process: `matryoshka node --virtual` joins a real `matryoshka up`
//! (the root cluster, and a logical cluster through its kubeconfig) and kubectl sees Ready
//! nodes with the allocatable of their instance type and pods that run, log and go away.

mod support;

use std::time::Duration;

use support::{Agent, Backend, Kubectl, Server, manifest};

const WAIT: Duration = Duration::from_secs(60);

fn ready_nodes(k: &Kubectl, want: usize) {
    k.eventually(&["get", "nodes", "--no-headers"], WAIT, |r| {
        r.code == 0
            && r.stdout
                .lines()
                .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
                .count()
                == want
    });
}

#[test]
fn kubectl_sees_virtual_nodes_run_pods() {
    let server = Server::start(Backend::Embedded);
    let k = server.kubectl("1.33");
    let log = server.dir.join("node.log");
    let _agent = Agent::start(
        &server.kubeconfig(),
        &[
            "--count",
            "3",
            "--name-prefix",
            "vn-",
            "--instance-type",
            "u1.large",
            "--roles",
            "worker",
        ],
        &log,
    );
    ready_nodes(&k, 3);
    let rows = k.run(&["get", "nodes"]).ok().rows();
    assert_eq!(rows.len(), 3, "{rows:?}");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row[0], format!("vn-{i}"));
        assert_eq!(row[1], "Ready");
        assert_eq!(row[2], "worker");
        assert_eq!(row[4], "v1.33.0");
    }
    k.run(&["get", "node", "vn-0", "-o", "jsonpath={.status.allocatable.memory} {.status.allocatable.cpu} {.status.allocatable.pods}"])
        .ok()
        .out("6800Mi 1800m 110");
    k.run(&["get", "node", "vn-2", "-o", "jsonpath={.spec.podCIDR}"])
        .ok()
        .out("10.244.2.0/24");
    k.run(&[
        "get",
        "lease",
        "-n",
        "kube-node-lease",
        "vn-1",
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ])
    .ok()
    .out("vn-1");

    let pod = manifest(
        &server.dir,
        "web.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  nodeName: vn-1\n  containers:\n  - name: web\n    image: nginx:1.27\n",
    );
    k.run(&["apply", "-f", pod.to_str().expect("path")]).ok();
    k.run(&["wait", "--for=condition=Ready", "pod/web", "--timeout=60s"])
        .ok();
    k.run(&["get", "pod", "web", "-o", "wide"])
        .ok()
        .out("Running")
        .out("10.244.1.2")
        .out("vn-1");
    k.run(&["logs", "web"]).ok().out("virtual node vn-1");

    let job = manifest(
        &server.dir,
        "once.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: once\nspec:\n  nodeName: vn-0\n  restartPolicy: Never\n  containers:\n  - name: once\n    image: busybox\n",
    );
    k.run(&["apply", "-f", job.to_str().expect("path")]).ok();
    k.eventually(&["get", "pod", "once", "--no-headers"], WAIT, |r| {
        r.stdout.contains("Completed")
    });

    k.run(&["delete", "pod", "web", "--timeout=60s"]).ok();
    k.run(&["get", "pod", "web"]).fails(1).err("NotFound");
}

#[test]
fn a_logical_clusters_kubeconfig_puts_virtual_nodes_in_that_cluster() {
    let server = Server::start(Backend::Embedded);
    let root = server.kubectl("1.33");
    root.run_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: core.matryoshka.dev/v1alpha1\nkind: LogicalCluster\nmetadata:\n  name: team-a\n"),
    )
    .ok();
    root.run(&[
        "wait",
        "--for=jsonpath={.status.phase}=Ready",
        "logicalcluster/team-a",
        "--timeout=30s",
    ])
    .ok();
    let conf = root.run(&[
        "get",
        "secret",
        "-n",
        "matryoshka-system",
        "team-a-admin-kubeconfig",
        "-o",
        "go-template={{ printf \"%s\\n\" (index .data \"admin.conf\" | base64decode) }}",
    ]);
    conf.ok().out("/clusters/team-a");
    let path = server.dir.join("team-a.conf");
    std::fs::write(&path, &conf.stdout).expect("write kubeconfig");
    let log = server.dir.join("team-a-node.log");
    let _agent = Agent::start(
        &path,
        &["--count", "2", "--instance-type", "gn1.xlarge"],
        &log,
    );

    let team = Kubectl::new("1.33", &path);
    ready_nodes(&team, 2);
    team.run(&[
        "get",
        "node",
        "virtual-node-0",
        "-o",
        "jsonpath={.status.allocatable.nvidia\\.com/gpu} {.metadata.labels.gpu}",
    ])
    .ok()
    .out("1 on");
    root.run(&["get", "nodes", "--no-headers"])
        .ok()
        .not_out("virtual-node-0");
}

/// TLS bootstrap: a node given only a bootstrap token joins, gets its own client certificate
/// through a CertificateSigningRequest (approved and signed by the platform), renews it with
/// its own identity before it expires, and is confined by the Node authorizer.
#[test]
fn a_node_joins_from_a_bootstrap_token_renews_its_certificate_and_cannot_touch_another_nodes_objects()
 {
    // Certificates live 20 s: the node renews at 14–18 s.
    let server = Server::start_with(Backend::Embedded, &["--cluster-signing-duration", "20s"]);
    let admin = server.kubectl("1.33");
    // What kubeadm sets up: a bootstrap token, and bindings for its group.
    let token = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: bootstrap-token-abcdef\n  namespace: kube-system\ntype: bootstrap.kubernetes.io/token\nstringData:\n  token-id: abcdef\n  token-secret: 0123456789abcdef\n  usage-bootstrap-authentication: \"true\"\n";
    admin.run_stdin(&["apply", "-f", "-"], Some(token)).ok();
    admin
        .run(&[
            "create",
            "clusterrolebinding",
            "kubeadm:kubelet-bootstrap",
            "--clusterrole=system:node-bootstrapper",
            "--group=system:bootstrappers",
        ])
        .ok();
    admin
        .run(&[
            "create",
            "clusterrolebinding",
            "kubeadm:node-autoapprove-bootstrap",
            "--clusterrole=system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            "--group=system:bootstrappers",
        ])
        .ok();
    admin
        .run(&[
            "create",
            "clusterrolebinding",
            "kubeadm:node-autoapprove-certificate-rotation",
            "--clusterrole=system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            "--group=system:nodes",
        ])
        .ok();
    admin
        .run_stdin(
            &["apply", "-f", "-"],
            Some("apiVersion: v1\nkind: Node\nmetadata:\n  name: other\n"),
        )
        .ok();
    // The bootstrap kubeconfig: the server and its CA, and only the token.
    let bootstrap = server.dir.join("bootstrap.conf");
    std::fs::copy(server.kubeconfig(), &bootstrap).expect("copy admin.conf");
    let boot = Kubectl::new("1.33", &bootstrap);
    boot.run(&[
        "config",
        "set-credentials",
        "boot",
        "--token=abcdef.0123456789abcdef",
    ])
    .ok();
    boot.run(&["config", "set-context", "--current", "--user=boot"])
        .ok();
    boot.run(&["config", "unset", "users.kubernetes-admin"])
        .ok();
    boot.run(&["get", "nodes"]).fails(1).err("Forbidden");

    let node_conf = server.dir.join("node.conf");
    let log = server.dir.join("joiner.log");
    let _agent = Agent::start(
        &node_conf,
        &[
            "--count",
            "1",
            "--name-prefix",
            "joiner-",
            "--bootstrap-kubeconfig",
            bootstrap.to_str().expect("path"),
            "--rotate-certificates",
        ],
        &log,
    );
    admin.eventually(
        &["get", "node", "joiner-0", "--no-headers"],
        Duration::from_secs(60),
        |r| r.code == 0 && r.stdout.split_whitespace().nth(1) == Some("Ready"),
    );
    admin
        .run(&["get", "csr", "-o", "jsonpath={range .items[*]}{.spec.username} {.spec.signerName} {.status.conditions[0].reason}{\"\\n\"}{end}"])
        .ok()
        .out("system:bootstrap:abcdef kubernetes.io/kube-apiserver-client-kubelet AutoApproved");
    // The node's own credentials: itself, and only itself.
    let node = Kubectl::new("1.33", &node_conf);
    node.run(&["get", "nodes"])
        .ok()
        .out("joiner-0")
        .out("other");
    node.run(&["label", "node", "joiner-0", "team=a"]).ok();
    node.run(&["label", "node", "other", "team=a"])
        .fails(1)
        .err("Forbidden");
    node.run(&["delete", "node", "other"])
        .fails(1)
        .err("Forbidden");
    node.run(&["get", "secrets", "-A"])
        .fails(1)
        .err("Forbidden");
    node.run(&["-n", "kube-node-lease", "get", "lease", "joiner-0"])
        .ok();

    // Before the certificate expires the node asks for another as itself; the new one is
    // written to its kubeconfig and used, and the node stays Ready past the first's expiry.
    let first = std::fs::read_to_string(&node_conf).expect("node.conf");
    admin.eventually(
        &["get", "csr", "-o", "jsonpath={range .items[*]}{.spec.username} {.status.conditions[0].reason} {.status.certificate}{\"\\n\"}{end}"],
        Duration::from_secs(40),
        |r| {
            r.stdout.lines().any(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                f.len() == 3 && f[0] == "system:node:joiner-0" && f[1] == "AutoApproved" && !f[2].is_empty()
            })
        },
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(&node_conf).expect("node.conf") == first {
        assert!(
            std::time::Instant::now() < deadline,
            "node.conf was not rewritten"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(22));
    admin
        .run(&["get", "node", "joiner-0", "--no-headers"])
        .ok()
        .out(" Ready ");
    node.run(&["get", "node", "joiner-0"]).ok();
}
