//! DropApp's API (`matryoshka up --dropapp-api`), following seed `002_*` word for word with
//! kubectl: a `cluster.dropapp.ru/v1alpha1` TenantCluster with only a name, its kubeconfig
//! read from Secret `vc-<name>` key `config` with the seed's own command line, and used; the
//! seed's high-availability values; deleting it deletes its namespace.

mod support;

use std::process::Command;
use std::time::Duration;

use support::{Backend, Kubectl, Server, kubectl_dir};

const TC: &str = "apiVersion: cluster.dropapp.ru/v1alpha1
kind: TenantCluster
metadata:
  name: team-x
";

const HA: &str = "apiVersion: cluster.dropapp.ru/v1alpha1
kind: TenantCluster
metadata:
  name: team-y
spec:
  values:
    controlPlane:
      backingStore:
        etcd:
          deploy:
            statefulSet:
              highAvailability:
                replicas: 2
      statefulSet:
        highAvailability:
          replicas: 2
        persistence:
          volumeClaim:
            storageClass: nfs-csi
            enabled: true
";

#[test]
fn the_seeds_kubectl_flow_creates_a_dropapp_tenant_cluster_and_its_vc_secret() {
    let capi = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/testdata/crds/cluster-api")
        .to_str()
        .expect("utf-8")
        .to_string();
    let server = Server::start_with(
        Backend::Embedded,
        &["--dropapp-api", "--cluster-api-crds", &capi],
    );
    let k = server.kubectl("1.33");
    let dir = tempfile::tempdir().expect("tempdir");
    // 1. tc.yaml; 2. kubectl apply -f tc.yaml
    std::fs::write(dir.path().join("tc.yaml"), TC).expect("tc.yaml");
    k.run(&[
        "apply",
        "-f",
        dir.path().join("tc.yaml").to_str().expect("utf-8"),
    ])
    .ok()
    .out("tenantcluster.cluster.dropapp.ru/team-x created");
    k.eventually(
        &["get", "secret", "-n", "team-x", "vc-team-x"],
        Duration::from_secs(90),
        |r| r.code == 0,
    );
    // The seed's command, as a shell runs it.
    let kubectl = kubectl_dir().join("kubectl.1.33");
    let out = Command::new("sh")
        .current_dir(dir.path())
        .env("KUBECONFIG", server.kubeconfig())
        .arg("-c")
        .arg(format!(
            "{} get secret -n team-x vc-team-x -o jsonpath='{{.data.config}}' | base64 -d > team-x-kubeconfig",
            kubectl.display()
        ))
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let inner = Kubectl::new("1.33", &dir.path().join("team-x-kubeconfig"));
    inner.eventually(&["get", "pods", "-A"], Duration::from_secs(60), |r| {
        r.code == 0
    });
    inner.run(&["get", "ns"]).ok().out("kube-system");
    // Its namespace here is named after it, with the platform's cluster inside.
    k.run(&[
        "get",
        "tenantclusters.platform.matryoshka.dev",
        "-n",
        "team-x",
        "team-x",
    ])
    .ok();
    k.eventually(
        &[
            "get",
            "tenantclusters.cluster.dropapp.ru",
            "team-x",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ],
        Duration::from_secs(120),
        |r| r.stdout == "True",
    );

    // The high-availability example: its replicas and storage class reach the cluster.
    k.run_stdin(&["apply", "-f", "-"], Some(HA)).ok();
    k.eventually(
        &[
            "get",
            "tenantclusters.platform.matryoshka.dev",
            "-n",
            "team-y",
            "team-y",
            "-o",
            "jsonpath={.spec.controlPlane.replicas}/{.spec.storageClass}",
        ],
        Duration::from_secs(60),
        |r| r.stdout == "2/nfs-csi",
    );

    // The values used are typed: a wrong one is refused with its path, and nothing is made.
    k.run_stdin(
        &["apply", "-f", "-"],
        Some(
            &HA.replace("team-y", "team-w")
                .replacen("replicas: 2", "replicas: two", 2),
        ),
    )
    .fails(1)
    .err("spec.values.controlPlane");
    k.run(&["get", "tenantclusters.cluster.dropapp.ru", "team-w"])
        .fails(1);

    // A namespace that is someone else's is not taken over.
    k.run(&["create", "namespace", "team-z"]).ok();
    k.run_stdin(&["apply", "-f", "-"], Some(&TC.replace("team-x", "team-z")))
        .ok();
    k.eventually(
        &[
            "get",
            "tenantclusters.cluster.dropapp.ru",
            "team-z",
            "-o",
            "jsonpath={.status.conditions[0].reason}",
        ],
        Duration::from_secs(60),
        |r| r.stdout == "NamespaceTaken",
    );

    // Deleting it deletes its namespace and everything in it.
    k.run(&[
        "delete",
        "tenantclusters.cluster.dropapp.ru",
        "team-x",
        "--wait=false",
    ])
    .ok();
    k.eventually(
        &["get", "namespace", "team-x"],
        Duration::from_secs(120),
        |r| r.code == 1,
    );
}
