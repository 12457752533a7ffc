//! Backup and restore of a logical cluster with `matryoshka backup` against a real
//! `matryoshka up`: back up, delete the cluster, restore it — every object (built-ins, a CRD and
//! its custom resources, Secrets) is back with its UID, the old admin kubeconfig and a legacy
//! token work again, a watch from before the restore gets 410 Gone; a restore under another
//! name clones the cluster; a name in use and a truncated backup are refused, changing nothing.

mod support;

use std::process::Command;
use std::time::Duration;

use support::{Backend, Kubectl, Server, matryoshka};

/// The resourceVersion of a list of `app`'s ConfigMaps in `src`.
fn list_rv(k: &Kubectl) -> String {
    let raw = k
        .run(&[
            "get",
            "--raw",
            "/clusters/src/api/v1/namespaces/app/configmaps",
        ])
        .ok()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_str(&raw).unwrap();
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

const OBJECTS: &str = r#"apiVersion: v1
kind: Namespace
metadata:
  name: app
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: app
data:
  greeting: hello from before the backup
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
"#;

#[test]
fn a_cluster_backed_up_deleted_and_restored_has_every_object_back_and_a_new_history() {
    let server = Server::start(Backend::Embedded);
    let root = server.kubectl("1.33");
    let conf = support::logical_cluster(&root, &server.dir, "src");
    let k = Kubectl::new("1.33", &conf);
    k.run_stdin(&["apply", "-f", "-"], Some(OBJECTS)).ok();
    k.eventually(
        &[
            "get",
            "crd",
            "widgets.example.com",
            "-o",
            "jsonpath={.status.conditions[?(@.type=='Established')].status}",
        ],
        Duration::from_secs(20),
        |r| r.stdout == "True",
    );
    k.run_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: app\nspec:\n  size: 3\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: legacy\n  namespace: app\n  annotations:\n    kubernetes.io/service-account.name: default\ntype: kubernetes.io/service-account-token\n"),
    )
    .ok();
    let uid = k
        .run(&[
            "get",
            "configmap",
            "settings",
            "-n",
            "app",
            "-o",
            "jsonpath={.metadata.uid}",
        ])
        .ok()
        .stdout
        .clone();
    let token = k
        .eventually(
            &[
                "get",
                "secret",
                "legacy",
                "-n",
                "app",
                "-o",
                "go-template={{ .data.token | base64decode }}",
            ],
            Duration::from_secs(10),
            |r| r.code == 0 && !r.stdout.is_empty(),
        )
        .stdout
        .clone();
    let before_rv = list_rv(&k);

    // Back up.
    let dir = server.dir.join("backups");
    std::fs::create_dir_all(&dir).unwrap();
    let out = matryoshka(
        &server,
        &["backup", "create", "src", "--to", dir.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(String::from_utf8_lossy(&out.stdout).contains("backed up src"));

    // Delete the cluster, then restore it under its name.
    root.run(&[
        "delete",
        "logicalcluster",
        "src",
        "--wait=true",
        "--timeout=60s",
    ])
    .ok();
    k.run(&["get", "namespaces"]).fails(1);
    let out = matryoshka(
        &server,
        &["backup", "restore", file.to_str().unwrap(), "--as", "src"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The old kubeconfig works (the cluster's CA came back with it) and so does the token.
    k.run(&[
        "get",
        "configmap",
        "settings",
        "-n",
        "app",
        "-o",
        "jsonpath={.data.greeting} {.metadata.uid}",
    ])
    .ok()
    .out(&format!("hello from before the backup {uid}"));
    k.run(&[
        "get",
        "widget",
        "w1",
        "-n",
        "app",
        "-o",
        "jsonpath={.spec.size}",
    ])
    .ok()
    .out("3");
    let with_token = support::manifest(
        &server.dir,
        "token.conf",
        &support::token_kubeconfig(&server, "src", &token),
    );
    Kubectl::new("1.33", &with_token)
        .run(&[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ])
        .ok()
        .out("system:serviceaccount:app:default");
    // A watch from before the restore is told its history is gone.
    let watch = k.run(&[
        "get",
        "--raw",
        &format!(
            "/clusters/src/api/v1/namespaces/app/configmaps?watch=1&resourceVersion={before_rv}"
        ),
    ]);
    assert!(
        watch.stdout.contains("\"ERROR\"") && watch.stdout.contains("410"),
        "{}\n{}",
        watch.stdout,
        watch.stderr
    );
    // So is a list at an exact revision from before it.
    let exact = k.run(&[
        "get",
        "--raw",
        &format!("/clusters/src/api/v1/namespaces/app/configmaps?resourceVersion={before_rv}&resourceVersionMatch=Exact"),
    ]);
    assert!(
        exact.code != 0 && exact.stderr.contains("too old resource version"),
        "{}",
        exact.stderr
    );
    // New writes carry revisions after the restore: a watch from now works.
    let now_rv = list_rv(&k);
    assert!(now_rv.parse::<i64>().unwrap() > before_rv.parse::<i64>().unwrap());

    // A second restore under another name is an independent copy.
    let out = matryoshka(
        &server,
        &["backup", "restore", file.to_str().unwrap(), "--as", "copy"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let copy_conf = support::logical_cluster(&root, &server.dir, "copy");
    let copy = Kubectl::new("1.33", &copy_conf);
    copy.run(&["delete", "configmap", "settings", "-n", "app"])
        .ok();
    k.run(&["get", "configmap", "settings", "-n", "app", "-o", "name"])
        .ok();

    // Refused, changing nothing: a name in use, and a truncated backup.
    let out = matryoshka(
        &server,
        &["backup", "restore", file.to_str().unwrap(), "--as", "src"],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already exists"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&file).unwrap();
    let cut = server.dir.join("cut.backup");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let out = matryoshka(
        &server,
        &["backup", "restore", cut.to_str().unwrap(), "--as", "cut"],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a complete backup"));
    root.run(&["get", "logicalcluster", "cut"]).fails(1);
    k.run(&[
        "get",
        "configmap",
        "settings",
        "-n",
        "app",
        "-o",
        "jsonpath={.data.greeting}",
    ])
    .ok()
    .out("hello from before the backup");
}

/// moto's S3-compatible server on a loopback port (installed by `scripts/ensure-deps`), killed
/// when dropped.
struct S3Server {
    child: std::process::Child,
    endpoint: String,
}

impl S3Server {
    const HOME: &str = "/opt/matryoshka/s3";

    fn start() -> S3Server {
        let port = support::free_port();
        let child = Command::new(format!("{}/bin/moto_server", Self::HOME))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("moto_server runs (scripts/ensure-deps installs it)");
        support::watchdog(child.id());
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "moto_server never listened"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        S3Server {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        }
    }

    /// Runs boto3 (moto's own client) against the server: `code` sees `s3`, a client.
    fn boto(&self, code: &str) -> String {
        let script = format!(
            "import boto3\ns3 = boto3.client('s3', endpoint_url='{}', aws_access_key_id='test', aws_secret_access_key='test', region_name='us-east-1')\n{code}\n",
            self.endpoint
        );
        let out = Command::new(format!("{}/bin/python", Self::HOME))
            .args(["-c", &script])
            .output()
            .expect("python runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn with_s3(server: &Server, s3: &S3Server, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_matryoshka"))
        .args(args)
        .args(["--s3-endpoint", &s3.endpoint, "--kubeconfig"])
        .arg(server.kubeconfig())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .output()
        .expect("matryoshka runs")
}

#[test]
fn a_backup_goes_to_an_s3_bucket_and_is_restored_from_it() {
    let server = Server::start(Backend::Embedded);
    let s3 = S3Server::start();
    s3.boto("s3.create_bucket(Bucket='backups')");
    let root = server.kubectl("1.33");
    let conf = support::logical_cluster(&root, &server.dir, "s3src");
    let k = Kubectl::new("1.33", &conf);
    k.run(&["create", "configmap", "kept", "--from-literal=where=s3"])
        .ok();

    let out = with_s3(
        &server,
        &s3,
        &["backup", "create", "s3src", "--to", "s3://backups/team/"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let keys = s3.boto(
        "print('\\n'.join(o['Key'] for o in s3.list_objects_v2(Bucket='backups')['Contents']))",
    );
    let key = keys.trim();
    assert!(
        key.starts_with("team/s3src-") && key.ends_with(".backup"),
        "{keys}"
    );
    // Nothing is left behind locally.
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("s3://backups/{key}")));

    root.run(&[
        "delete",
        "logicalcluster",
        "s3src",
        "--wait=true",
        "--timeout=60s",
    ])
    .ok();
    let out = with_s3(
        &server,
        &s3,
        &[
            "backup",
            "restore",
            &format!("s3://backups/{key}"),
            "--as",
            "s3src",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    k.run(&["get", "configmap", "kept", "-o", "jsonpath={.data.where}"])
        .ok()
        .out("s3");

    // A bucket that does not exist: S3's refusal, nothing created.
    let out = with_s3(
        &server,
        &s3,
        &["backup", "create", "s3src", "--to", "s3://absent/x.backup"],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("404"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Reads a file of the server's data directory as text.
fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_tenant_clusters_volume_data_is_backed_up_and_comes_back_with_its_restore() {
    let server = Server::with_cluster_api(Backend::Embedded);
    let root = server.kubectl("1.33");
    root.run_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: platform.matryoshka.dev/v1alpha1\nkind: TenantCluster\nmetadata:\n  name: vol\n  namespace: tenant-root\nspec:\n  nodeGroups:\n    md0:\n      minReplicas: 1\n      maxReplicas: 1\n      instanceType: u1.small\n"),
    )
    .ok();
    root.run(&[
        "wait",
        "--for=condition=Ready",
        "tenantcluster/vol",
        "-n",
        "tenant-root",
        "--timeout=90s",
    ])
    .ok();
    let lc = root
        .run(&[
            "get",
            "tenantcluster",
            "vol",
            "-n",
            "tenant-root",
            "-o",
            "jsonpath={.status.logicalCluster}",
        ])
        .ok()
        .stdout
        .clone();
    let k = support::tenant_cluster_kubectl(&root, &server.dir, "tenant-root", "vol");
    k.run_stdin(
        &["apply", "-f", "-"],
        Some(r#"{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}}"#),
    )
    .ok();
    let pv = k
        .eventually(
            &[
                "get",
                "pvc",
                "data",
                "-o",
                "jsonpath={.status.phase} {.spec.volumeName}",
            ],
            Duration::from_secs(60),
            |r| r.stdout.starts_with("Bound "),
        )
        .stdout
        .trim_start_matches("Bound ")
        .to_string();
    let path_of = |k: &Kubectl| {
        std::path::PathBuf::from(
            k.run(&["get", "pv", &pv, "-o", "jsonpath={.spec.hostPath.path}"])
                .ok()
                .stdout
                .clone(),
        )
    };
    let dir = path_of(&k);
    assert!(dir.starts_with(server.dir.join("volumes")), "{dir:?}");
    // What a pod would have written there: a file, a directory with a file larger than one
    // piece of the backup, and a relative link.
    std::fs::write(dir.join("greeting.txt"), "kept across the restore\n").unwrap();
    std::fs::create_dir(dir.join("db")).unwrap();
    let big: Vec<u8> = (0..1_300_000u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(dir.join("db/pages"), &big).unwrap();
    std::os::unix::fs::symlink("greeting.txt", dir.join("latest")).unwrap();

    let backups = server.dir.join("vol-backups");
    std::fs::create_dir_all(&backups).unwrap();
    let out = matryoshka(
        &server,
        &["backup", "create", &lc, "--to", backups.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = std::fs::read_dir(&backups)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();

    // The tenant cluster goes, and its volume's directory with it.
    root.run(&[
        "delete",
        "tenantcluster",
        "vol",
        "-n",
        "tenant-root",
        "--wait=true",
        "--timeout=90s",
    ])
    .ok();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while dir.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} was never removed",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // Restored under a new name: the claim is Bound to its volume, whose data is back.
    let out = matryoshka(
        &server,
        &[
            "backup",
            "restore",
            file.to_str().unwrap(),
            "--as",
            "vol-again",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let conf = support::logical_cluster(&root, &server.dir, "vol-again");
    let again = Kubectl::new("1.33", &conf);
    again
        .run(&[
            "get",
            "pvc",
            "data",
            "-o",
            "jsonpath={.status.phase} {.spec.volumeName}",
        ])
        .ok()
        .out(&format!("Bound {pv}"));
    let restored = path_of(&again);
    assert!(
        restored.starts_with(server.dir.join("volumes/restored/vol-again")),
        "{restored:?}"
    );
    assert_eq!(
        read(&restored.join("greeting.txt")),
        "kept across the restore\n"
    );
    assert_eq!(std::fs::read(restored.join("db/pages")).unwrap(), big);
    assert_eq!(
        std::fs::read_link(restored.join("latest")).unwrap(),
        std::path::Path::new("greeting.txt")
    );

    // A backup of the restored cluster carries the restored data again; deleting the cluster
    // removes it.
    let again_backups = server.dir.join("again-backups");
    std::fs::create_dir_all(&again_backups).unwrap();
    let out = matryoshka(
        &server,
        &[
            "backup",
            "create",
            "vol-again",
            "--to",
            again_backups.to_str().unwrap(),
        ],
    );
    assert!(out.status.success());
    let second = std::fs::read_dir(&again_backups)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = read(&second);
    assert!(text.contains(&format!("{{\"volume\":{{\"name\":\"{pv}\"}}}}")));
    assert!(text.contains("\"path\":\"db/pages\""));
    root.run(&[
        "delete",
        "logicalcluster",
        "vol-again",
        "--wait=true",
        "--timeout=60s",
    ])
    .ok();
    assert!(!server.dir.join("volumes/restored/vol-again").exists());
}
