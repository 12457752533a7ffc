//! Certificates and service-account keys rotate under a running `matryoshka up` (thresholds of
//! seconds) while kubectl, the Python client and an out-of-process node agent keep working
//! across several rotations: the serving certificate is swapped live, the admin kubeconfigs
//! (the root cluster's file, a logical cluster's Secret) are re-issued before their
//! certificates expire, and tokens issued before a key rotation stay valid for their lifetime.

mod support;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

use support::{Agent, Backend, Kubectl, Server, manifest};

/// Serving and client certificates live 6 s (renewed after 4 s); keys sign for 2 s; tokens
/// live at most 4 s.
const FLAGS: &[&str] = &[
    "--serving-cert-validity-seconds",
    "6",
    "--client-cert-validity-seconds",
    "6",
    "--service-account-key-rotation-seconds",
    "2",
    "--service-account-max-token-expiration-seconds",
    "4",
];

/// How long the clients keep working: about four lifetimes of every certificate.
const SOAK: Duration = Duration::from_secs(24);

fn admin_conf(root: &Kubectl, cluster: &str) -> String {
    root.run(&[
        "get",
        "secret",
        "-n",
        "matryoshka-system",
        &format!("{cluster}-admin-kubeconfig"),
        "-o",
        "go-template={{ index .data \"admin.conf\" | base64decode }}",
    ])
    .ok()
    .stdout
    .clone()
}

#[test]
fn clients_and_node_agents_keep_working_while_certificates_and_keys_rotate() {
    let server = Server::start_with(Backend::Embedded, FLAGS);
    let root = server.kubectl("1.33");
    let old_kubectl = server.kubectl("1.27");
    support::logical_cluster(&root, &server.dir, "rot");

    // A node agent out of process, joined with the root cluster's admin kubeconfig, which
    // `matryoshka up` re-writes before its certificate expires.
    let _agent = Agent::start(
        &server.kubeconfig(),
        &["--count", "1", "--name-prefix", "rot-"],
        &server.dir.join("node.log"),
    );
    root.eventually(
        &["get", "node", "rot-0", "--no-headers"],
        Duration::from_secs(30),
        |r| r.code == 0 && r.stdout.contains(" Ready "),
    );

    // The Python client in the logical cluster, with a legacy service-account token (worth
    // what its Secret holds, so it outlives every key rotation).
    let rot_conf = server.dir.join("rot-now.conf");
    std::fs::write(&rot_conf, admin_conf(&root, "rot")).unwrap();
    let rot = Kubectl::new("1.33", &rot_conf);
    rot.run(&[
        "create",
        "clusterrolebinding",
        "py",
        "--clusterrole=view",
        "--serviceaccount=default:default",
    ])
    .ok();
    rot.run_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: v1\nkind: Secret\nmetadata:\n  name: py-token\n  annotations:\n    kubernetes.io/service-account.name: default\ntype: kubernetes.io/service-account-token\n"),
    )
    .ok();
    let token = rot
        .eventually(
            &[
                "get",
                "secret",
                "py-token",
                "-o",
                "go-template={{ .data.token | base64decode }}",
            ],
            Duration::from_secs(10),
            |r| r.code == 0 && !r.stdout.is_empty(),
        )
        .stdout
        .clone();
    let script = manifest(
        &server.dir,
        "soak.py",
        &format!(
            r#"
import time, kubernetes
c = kubernetes.client.Configuration()
c.host = "https://127.0.0.1:{port}/clusters/rot"
c.ssl_ca_cert = "{ca}"
c.api_key = {{"authorization": "Bearer {token}"}}
api = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(c))
end, calls = time.time() + {secs}, 0
while time.time() < end:
    api.list_namespace()
    calls += 1
    time.sleep(0.2)
print("calls", calls)
"#,
            port = server.port,
            ca = server.dir.join("pki/ca.crt").display(),
            secs = SOAK.as_secs(),
        ),
    );
    let python = Command::new("python3")
        .arg(&script)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    support::watchdog(python.id());

    // kubectl (two versions) against the root cluster through its re-written kubeconfig, and
    // against the logical cluster through its re-issued Secret, for the whole soak.
    let started = Instant::now();
    let mut rot_certs = BTreeSet::new();
    let mut root_certs = BTreeSet::new();
    let mut runs = 0;
    while started.elapsed() < SOAK {
        let conf = admin_conf(&root, "rot");
        std::fs::write(&rot_conf, &conf).unwrap();
        rot_certs.insert(conf);
        rot.run(&["get", "namespaces", "default", "-o", "name"])
            .ok()
            .out("namespace/default");
        old_kubectl.run(&["get", "--raw", "/version"]).ok();
        root_certs.insert(std::fs::read_to_string(server.kubeconfig()).unwrap());
        // A bound token: issued capped at the longest lifetime, accepted at once.
        let bound = rot
            .run(&["create", "token", "default", "--duration", "1h"])
            .ok()
            .stdout
            .trim()
            .to_string();
        let with_token = manifest(
            &server.dir,
            "token.conf",
            &support::token_kubeconfig(&server, "rot", &bound),
        );
        Kubectl::new("1.33", &with_token)
            .run(&["get", "namespaces", "default", "-o", "name"])
            .ok();
        runs += 1;
        std::thread::sleep(Duration::from_millis(500));
    }
    let out = python.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the Python client failed during the rotations:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("calls"));

    // Every credential rotated several times meanwhile.
    assert!(
        rot_certs.len() >= 4,
        "the logical cluster's kubeconfig was re-issued {} times",
        rot_certs.len()
    );
    assert!(
        root_certs.len() >= 4,
        "admin.conf was re-written {} times",
        root_certs.len()
    );
    let log = server.log();
    let serving = log
        .lines()
        .filter(|l| l.contains("certificate rotated") && l.contains("serving certificate"))
        .count();
    assert!(
        serving >= 4,
        "the serving certificate rotated {serving} times:\n{log}"
    );
    std::fs::write(&rot_conf, admin_conf(&root, "rot")).unwrap();
    // `--raw` paths are absolute: the logical cluster's prefix is spelled out.
    let jwks = rot
        .run(&["get", "--raw", "/clusters/rot/openid/v1/jwks"])
        .ok()
        .stdout
        .clone();
    let keys: serde_json::Value = serde_json::from_str(&jwks).unwrap();
    assert!(keys["keys"].as_array().unwrap().len() >= 2, "{jwks}");
    assert!(runs >= 10, "{runs}");

    // The node agent followed its kubeconfig: still heartbeating, and it runs a new pod.
    let agent_log = std::fs::read_to_string(server.dir.join("node.log")).unwrap_or_default();
    assert!(
        agent_log.contains("client certificate renewed"),
        "the agent never picked up a renewed certificate:\n{agent_log}"
    );
    root.run_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: v1\nkind: Pod\nmetadata:\n  name: after\nspec:\n  nodeName: rot-0\n  containers:\n  - name: c\n    image: busybox\n"),
    )
    .ok();
    root.eventually(
        &["get", "pod", "after", "-o", "jsonpath={.status.phase}"],
        Duration::from_secs(30),
        |r| r.stdout == "Running",
    );
    root.run(&["get", "node", "rot-0", "--no-headers"])
        .ok()
        .out(" Ready ");
}

/// `matryoshka pki rotate-ca CLUSTER --phase P` against `server`, which must succeed.
fn rotate_ca(server: &Server, cluster: &str, phase: &str) -> std::process::Output {
    let out = support::matryoshka(server, &["pki", "rotate-ca", cluster, "--phase", phase]);
    assert!(
        out.status.success(),
        "rotate-ca --phase {phase} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn a_logical_clusters_ca_rotates_in_two_phases_without_breaking_a_client_in_between() {
    let server = Server::start(Backend::Embedded);
    let root = server.kubectl("1.33");
    let old_conf = support::logical_cluster(&root, &server.dir, "ca");
    let old = Kubectl::new("1.33", &old_conf);
    old.run(&["get", "namespaces", "default", "-o", "name"])
        .ok();
    let first = admin_conf(&root, "ca");

    // Prepare: a new CA issues, the kubeconfig Secret is re-issued by it, and both the old
    // and the new kubeconfig work.
    let out = rotate_ca(&server, "ca", "prepare");
    assert!(String::from_utf8_lossy(&out.stdout).contains("prepared"));
    let new_conf = server.dir.join("ca-new.conf");
    root.eventually(
        &[
            "get",
            "secret",
            "-n",
            "matryoshka-system",
            "ca-admin-kubeconfig",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ],
        Duration::from_secs(15),
        |_| {
            let now = admin_conf(&root, "ca");
            std::fs::write(&new_conf, &now).unwrap();
            now != first
        },
    );
    let new = Kubectl::new("1.33", &new_conf);
    new.run(&["get", "namespaces", "default", "-o", "name"])
        .ok();
    old.run(&["get", "namespaces", "default", "-o", "name"])
        .ok();
    // A second prepare before finishing is refused, changing nothing.
    let again = support::matryoshka(&server, &["pki", "rotate-ca", "ca", "--phase", "prepare"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already prepared"));
    old.run(&["get", "namespaces", "default", "-o", "name"])
        .ok();

    // Finish: the old CA's certificates are refused, the new ones work.
    rotate_ca(&server, "ca", "finish");
    old.eventually(
        &["get", "namespaces", "default", "-o", "name"],
        Duration::from_secs(10),
        |r| r.code != 0 && r.stderr.contains("Unauthorized"),
    );
    new.run(&["get", "namespaces", "default", "-o", "name"])
        .ok();
    // The root cluster's CA is not rotated by this command.
    let root_attempt =
        support::matryoshka(&server, &["pki", "rotate-ca", "root", "--phase", "prepare"]);
    assert!(!root_attempt.status.success());
}
