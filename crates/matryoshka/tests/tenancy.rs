//! Logical clusters end to end with kubectl: provisioning, kubeconfigs, isolation, RBAC,
//! tokens, impersonation, anonymous access and deletion.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use support::{Backend, Kubectl, Server, manifest};

/// Creates logical clusters and returns a kubeconfig file of each, extracted with the same
/// go-template command users run.
fn clusters(server: &Server, root: &Kubectl, names: &[&str]) -> Vec<PathBuf> {
    let mut yaml = String::new();
    for n in names {
        yaml.push_str(&format!("---\napiVersion: core.matryoshka.dev/v1alpha1\nkind: LogicalCluster\nmetadata:\n  name: {n}\n"));
    }
    root.run_stdin(&["apply", "-f", "-"], Some(&yaml)).ok();
    names
        .iter()
        .map(|n| {
            root.run(&[
                "wait",
                "--for=jsonpath={.status.phase}=Ready",
                &format!("logicalcluster/{n}"),
                "--timeout=30s",
            ])
            .ok();
            let conf = root.run(&[
                "get",
                "secret",
                "-n",
                "matryoshka-system",
                &format!("{n}-admin-kubeconfig"),
                "-o",
                "go-template={{ printf \"%s\\n\" (index .data \"admin.conf\" | base64decode) }}",
            ]);
            conf.ok()
                .out("certificate-authority-data")
                .out(&format!("/clusters/{n}"));
            let path = server.dir.join(format!("{n}.conf"));
            std::fs::write(&path, &conf.stdout).expect("write kubeconfig");
            path
        })
        .collect()
}

fn url(server: &Server, cluster: &str) -> String {
    format!("https://127.0.0.1:{}/clusters/{cluster}", server.port)
}

#[test]
fn logical_clusters_are_isolated_end_to_end() {
    let server = Server::start(Backend::Embedded);
    let root = server.kubectl("1.33");
    root.run(&["api-resources", "--api-group=core.matryoshka.dev"])
        .ok()
        .out("logicalclusters");
    let confs = clusters(&server, &root, &["team-a", "team-b"]);
    let a = Kubectl::new("1.33", &confs[0]);
    let b = Kubectl::new("1.33", &confs[1]);

    // Seeded clusters.
    a.run(&["get", "ns"])
        .ok()
        .out("default")
        .out("kube-system")
        .out("kube-public")
        .out("kube-node-lease");
    a.run(&["get", "svc", "kubernetes", "-n", "default"])
        .ok()
        .out("kubernetes");
    a.run(&["get", "cm", "kube-root-ca.crt", "-n", "kube-system"])
        .ok();
    a.run(&[
        "get",
        "clusterrole",
        "admin",
        "edit",
        "view",
        "cluster-admin",
    ])
    .ok();

    // a's credentials are worth nothing at b's URL; unknown clusters are not found.
    a.run(&["--server", &url(&server, "team-b"), "get", "ns"])
        .fails(1)
        .err("provide credentials");
    a.run(&["--server", &url(&server, "no-such-team"), "get", "ns"])
        .fails(1)
        .err("NotFound");
    root.run(&["--server", &url(&server, "team-a"), "get", "ns"])
        .fails(1)
        .err("provide credentials");

    // Objects and watch events stay in their cluster.
    let mut watch_b = b.spawn(&["get", "cm", "-n", "default", "-w", "--output-watch-events"]);
    a.run(&["create", "configmap", "only-in-a", "-n", "default"])
        .ok();
    b.run(&["get", "cm", "only-in-a", "-n", "default"])
        .fails(1)
        .err("NotFound");
    b.run(&["create", "configmap", "marker-b", "-n", "default"])
        .ok();
    let mut seen = String::new();
    {
        use std::io::Read;
        let mut out = watch_b.stdout.take().expect("stdout");
        let mut buf = [0u8; 4096];
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !seen.contains("marker-b") && std::time::Instant::now() < deadline {
            match out.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
        }
    }
    let _ = watch_b.kill();
    let _ = watch_b.wait();
    assert!(
        seen.contains("marker-b") && !seen.contains("only-in-a"),
        "b's watch saw:\n{seen}"
    );
    root.run(&["get", "cm", "-A"])
        .ok()
        .not_out("only-in-a")
        .not_out("marker-b");

    // whoami in every kubectl generation, and impersonation.
    for v in ["1.27", "1.33"] {
        Kubectl::new(v, &confs[0])
            .run(&["auth", "whoami"])
            .ok()
            .out("kubernetes-admin")
            .out("system:masters");
    }
    a.run(&["auth", "whoami", "--as", "jane", "--as-group", "devs"])
        .ok()
        .out("jane")
        .out("devs");

    // RBAC: the can-i matrix for view, edit, admin and cluster-admin.
    a.run(&["create", "namespace", "work"]).ok();
    for (user, role) in [
        ("viewer", "view"),
        ("editor", "edit"),
        ("admin-user", "admin"),
    ] {
        a.run(&[
            "create",
            "rolebinding",
            user,
            &format!("--clusterrole={role}"),
            &format!("--user={user}"),
            "-n",
            "work",
        ])
        .ok();
    }
    a.run(&[
        "create",
        "clusterrolebinding",
        "root-user",
        "--clusterrole=cluster-admin",
        "--user=root-user",
    ])
    .ok();
    let matrix: &[(&str, &[&str], [&str; 4])] = &[
        ("get pods", &["get", "pods"], ["yes", "yes", "yes", "yes"]),
        (
            "create deployments",
            &["create", "deployments"],
            ["no", "yes", "yes", "yes"],
        ),
        (
            "get secrets",
            &["get", "secrets"],
            ["no", "yes", "yes", "yes"],
        ),
        (
            "create rolebindings",
            &["create", "rolebindings"],
            ["no", "no", "yes", "yes"],
        ),
        (
            "delete namespaces",
            &["delete", "namespaces"],
            ["no", "no", "no", "yes"],
        ),
    ];
    for (what, args, answers) in matrix {
        for (user, want) in ["viewer", "editor", "admin-user", "root-user"]
            .iter()
            .zip(answers)
        {
            let mut cmd = vec!["auth", "can-i"];
            cmd.extend_from_slice(args);
            cmd.extend_from_slice(&["-n", "work", "--as", user]);
            let r = a.run(&cmd);
            assert_eq!(r.stdout.trim(), *want, "can {user} {what}? {}", r.stderr);
        }
    }
    a.run(&["get", "pods", "-n", "default", "--as", "viewer"])
        .fails(1)
        .err("Forbidden")
        .err("User \"viewer\" cannot list resource \"pods\"");
    // The same users mean nothing in cluster b.
    b.run(&[
        "auth", "can-i", "get", "pods", "-n", "work", "--as", "viewer",
    ])
    .fails(1)
    .out("no");

    // Escalation: an admin of a namespace cannot grant what it does not hold.
    let escalate = manifest(
        &server.dir,
        "escalate.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: nodes-reader\n  namespace: work\nrules:\n- apiGroups: [\"\"]\n  resources: [\"nodes\"]\n  verbs: [\"get\"]\n",
    );
    a.run(&[
        "create",
        "-f",
        escalate.to_str().expect("utf-8"),
        "--as",
        "admin-user",
    ])
    .fails(1)
    .err("Forbidden")
    .err("attempting to grant RBAC permissions not currently held");
    a.run(&[
        "create",
        "rolebinding",
        "grab",
        "--clusterrole=cluster-admin",
        "--user=admin-user",
        "-n",
        "work",
        "--as",
        "admin-user",
    ])
    .fails(1)
    .err("is forbidden")
    .err("attempting to grant RBAC permissions not currently held");

    // Tokens: `kubectl create token` authenticates in its own cluster only.
    let token = a.run(&["create", "token", "default", "-n", "default"]);
    let token = token.ok().stdout.trim().to_string();
    assert_eq!(token.split('.').count(), 3, "a JWT");
    let ca = server.dir.join("ca.pem");
    let ca_b64 = root.run(&[
        "config",
        "view",
        "--raw",
        "-o",
        "jsonpath={.clusters[0].cluster.certificate-authority-data}",
    ]);
    let ca_pem = std::process::Command::new("base64")
        .arg("-d")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .expect("stdin")
                .write_all(ca_b64.stdout.as_bytes())?;
            c.wait_with_output()
        });
    std::fs::write(&ca, ca_pem.expect("base64").stdout).expect("write ca");
    let empty = server.dir.join("empty.conf");
    std::fs::write(&empty, "apiVersion: v1\nkind: Config\n").expect("write");
    let bare = Kubectl::new("1.33", &empty);
    let ca_arg = format!("--certificate-authority={}", ca.display());
    bare.run(&[
        "--server",
        &url(&server, "team-a"),
        &ca_arg,
        "--token",
        &token,
        "auth",
        "whoami",
    ])
    .ok()
    .out("system:serviceaccount:default:default");
    bare.run(&[
        "--server",
        &url(&server, "team-b"),
        &ca_arg,
        "--token",
        &token,
        "get",
        "ns",
    ])
    .fails(1)
    .err("provide credentials");
    // At the shared endpoint without a cluster in the path (where a tenant pod's
    // `KUBERNETES_SERVICE_HOST` leads), the token is served its own cluster, never the root:
    // team-a's RBAC decides, and what it writes lands in team-a.
    bare.run(&[
        "--server",
        &format!("https://127.0.0.1:{}", server.port),
        &ca_arg,
        "--token",
        &token,
        "get",
        "ns",
    ])
    .fails(1)
    .err("User \"system:serviceaccount:default:default\" cannot list resource \"namespaces\"");
    a.run(&[
        "create",
        "rolebinding",
        "default-edit",
        "--clusterrole=edit",
        "--serviceaccount=default:default",
    ])
    .ok();
    bare.run(&[
        "--server",
        &format!("https://127.0.0.1:{}", server.port),
        &ca_arg,
        "--token",
        &token,
        "create",
        "configmap",
        "written-through-the-root-url",
    ])
    .ok();
    a.run(&["get", "configmap", "written-through-the-root-url"])
        .ok();
    root.run(&["get", "configmap", "written-through-the-root-url"])
        .fails(1)
        .err("NotFound");

    // Anonymous requests get what system:public-info-viewer grants and nothing else.
    let curl = |path: &str| {
        let out = std::process::Command::new("curl")
            .args(["-s", "--cacert"])
            .arg(&ca)
            .arg(format!("https://127.0.0.1:{}{path}", server.port))
            .output()
            .expect("curl runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(curl("/clusters/team-a/version").contains("gitVersion"));
    assert!(curl("/clusters/team-a/healthz").contains("ok"));
    let denied = curl("/clusters/team-a/api/v1/namespaces/default/configmaps");
    assert!(
        denied.contains("\"code\":403") && denied.contains("system:anonymous"),
        "{denied}"
    );

    // Deleting a cluster: its credentials and data are gone.
    root.run(&["delete", "logicalcluster", "team-a", "--wait=true"])
        .ok();
    root.run(&["get", "logicalcluster", "team-a"])
        .fails(1)
        .err("NotFound");
    root.run(&[
        "get",
        "secret",
        "-n",
        "matryoshka-system",
        "team-a-admin-kubeconfig",
    ])
    .fails(1)
    .err("NotFound");
    a.run(&["get", "ns"]).fails(1).err("NotFound");
    b.run(&["get", "cm", "marker-b", "-n", "default"]).ok();
}

const EVENT: &str = r#"{"apiVersion": "v1", "kind": "Event", "metadata": {"name": "NAME", "namespace": "default"}, "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"}, "reason": "Testing", "message": "m", "type": "Normal"}"#;
const NEW_EVENT: &str = r#"{"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "NAME", "namespace": "default"}, "regarding": {"kind": "Pod", "name": "web", "namespace": "default"}, "reason": "Testing", "note": "n", "type": "Normal", "action": "Test", "reportingController": "example.com/t", "reportingInstance": "i", "eventTime": "2026-01-01T00:00:00.000000Z"}"#;

#[test]
fn events_expire_a_ttl_after_their_last_write_in_every_cluster_and_in_both_apis() {
    let server = Server::start_with(Backend::Embedded, &["--event-ttl", "4s"]);
    let root = server.kubectl("1.33");
    let conf = &clusters(&server, &root, &["ev"])[0];
    let tenant = Kubectl::new("1.33", conf);
    let started = std::time::Instant::now();
    for (k, name) in [(&root, "in-root"), (&tenant, "in-tenant")] {
        k.run_stdin(&["create", "-f", "-"], Some(&EVENT.replace("NAME", name)))
            .ok();
    }
    tenant
        .run_stdin(
            &["create", "-f", "-"],
            Some(&NEW_EVENT.replace("NAME", "new-api")),
        )
        .ok();
    tenant
        .run_stdin(
            &["create", "-f", "-"],
            Some(&EVENT.replace("NAME", "written-again")),
        )
        .ok();
    // An Event written again lives a TTL after that write: keep writing one for a while.
    while started.elapsed() < Duration::from_secs(6) {
        tenant
            .run(&[
                "annotate",
                "event",
                "written-again",
                "--overwrite",
                &format!("n={}", started.elapsed().as_millis()),
            ])
            .ok();
        std::thread::sleep(Duration::from_millis(500));
    }
    let written_last = std::time::Instant::now();
    // Those written once are gone by now or soon; the one written again is still there.
    root.eventually(
        &["get", "events", "-n", "default", "-o", "name"],
        Duration::from_secs(20),
        |r| r.code == 0 && !r.stdout.contains("in-root"),
    );
    tenant.eventually(
        &[
            "get",
            "events.v1.events.k8s.io",
            "-n",
            "default",
            "-o",
            "name",
        ],
        Duration::from_secs(20),
        |r| r.code == 0 && !r.stdout.contains("new-api"),
    );
    let left = tenant.run(&["get", "events", "-n", "default", "-o", "name"]);
    let left = left.ok();
    assert!(!left.stdout.contains("in-tenant"), "{}", left.stdout);
    if written_last.elapsed() < Duration::from_secs(3) {
        assert!(left.stdout.contains("written-again"), "{}", left.stdout);
    }
    tenant.eventually(
        &["get", "events", "-n", "default", "-o", "name"],
        Duration::from_secs(20),
        |r| r.code == 0 && !r.stdout.contains("written-again"),
    );
    assert!(
        written_last.elapsed() >= Duration::from_secs(3),
        "an Event written {:?} ago is gone",
        written_last.elapsed()
    );
}
