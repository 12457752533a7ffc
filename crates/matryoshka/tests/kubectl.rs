//! kubectl 1.27 … 1.33 against a real `matryoshka up`: every version runs the same scenario in
//! a namespace of its own, on the embedded store and on a real etcd. Every step asserts the
//! exit code and what kubectl printed.

mod support;

use std::io::Read;
use std::time::Duration;

use support::{Backend, KUBECTL_VERSIONS, Kubectl, Server, manifest};

fn app_manifest(ns: &str, image: &str, replicas: u32) -> String {
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: {ns}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: {ns}
data:
  mode: fast
---
apiVersion: v1
kind: Secret
metadata:
  name: credentials
  namespace: {ns}
stringData:
  password: hunter2
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: {ns}
  labels:
    app: web
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: {image}
        ports:
        - containerPort: 80
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: {ns}
spec:
  selector:
    app: web
  ports:
  - port: 80
    targetPort: 80
"#
    )
}

fn scenario(server: &Server, version: &str) {
    let k = server.kubectl(version);
    let ns = format!("e2e-{}", version.replace('.', "-"));
    let n = ns.as_str();
    let dir = tempfile::tempdir().expect("tempdir");

    // Discovery and version.
    k.run(&["version"])
        .ok()
        .out("Server Version")
        .out("v1.33.0");
    k.run(&["api-resources"])
        .ok()
        .out("deployments")
        .out("deploy")
        .out("apps/v1")
        .out("namespaces");
    k.run(&["api-versions"])
        .ok()
        .out("apps/v1")
        .out("rbac.authorization.k8s.io/v1");
    k.run(&["get", "--raw", "/healthz"]).ok().out("ok");
    k.run(&["cluster-info"]).ok().out("is running at");

    // Apply a multi-document manifest, then again: unchanged.
    let app = manifest(dir.path(), "app.yaml", &app_manifest(n, "nginx:1.25", 2));
    let app = app.to_str().expect("utf-8 path");
    k.run(&["apply", "-f", app])
        .ok()
        .out(&format!("namespace/{n} created"))
        .out("configmap/settings created")
        .out("secret/credentials created")
        .out("deployment.apps/web created")
        .out("service/web created");
    k.run(&["apply", "-f", app])
        .ok()
        .out(&format!("namespace/{n} unchanged"))
        .out("configmap/settings unchanged")
        .out("deployment.apps/web unchanged")
        .out("service/web unchanged");

    // get in every output format.
    let r = k.run(&["get", "deploy", "-n", n]);
    r.ok()
        .out("NAME")
        .out("READY")
        .out("UP-TO-DATE")
        .out("AVAILABLE")
        .out("web");
    k.run(&["get", "deploy", "-n", n, "-o", "wide"])
        .ok()
        .out("CONTAINERS")
        .out("IMAGES")
        .out("nginx:1.25")
        .out("app=web");
    k.run(&["get", "deploy", "web", "-n", n, "-o", "yaml"])
        .ok()
        .out("kind: Deployment")
        .out("replicas: 2");
    let json = k.run(&["get", "deploy", "web", "-n", n, "-o", "json"]);
    json.ok();
    let v: serde_json::Value =
        serde_json::from_str(&json.stdout).expect("kubectl -o json prints JSON");
    assert_eq!(v["metadata"]["name"], "web");
    assert!(
        v["metadata"]["resourceVersion"]
            .as_str()
            .is_some_and(|rv| rv.parse::<u64>().is_ok())
    );
    k.run(&[
        "get",
        "deploy",
        "web",
        "-n",
        n,
        "-o",
        "jsonpath={.spec.replicas}",
    ])
    .ok()
    .out("2");
    k.run(&["get", "deploy,svc", "-n", n, "-o", "name"])
        .ok()
        .out("deployment.apps/web")
        .out("service/web");
    k.run(&["get", "deploy", "-n", n, "-l", "app=web", "-o", "name"])
        .ok()
        .out("deployment.apps/web");
    k.run(&["get", "deploy", "-n", n, "-l", "app!=web", "-o", "name"])
        .ok()
        .not_out("web");
    k.run(&[
        "get",
        "cm",
        "-n",
        n,
        "--field-selector",
        "metadata.name=settings",
        "-o",
        "name",
    ])
    .ok()
    .out("configmap/settings");
    k.run(&[
        "get",
        "pods",
        "-n",
        n,
        "--field-selector",
        "status.phase=Running",
    ])
    .ok();
    k.run(&["get", "cm", "-n", n, "--field-selector", "data.mode=fast"])
        .fails(1)
        .err("field label not supported");
    k.run(&["get", "cm", "-A"]).ok().out("NAMESPACE").out(n);
    k.run(&[
        "get",
        "secret",
        "credentials",
        "-n",
        n,
        "-o",
        "jsonpath={.data.password}",
    ])
    .ok()
    .out("aHVudGVyMg==");
    k.run(&["get", "nosuchthing"])
        .fails(1)
        .err("the server doesn't have a resource type");
    k.run(&["get", "cm", "missing", "-n", n])
        .fails(1)
        .err("NotFound")
        .err("configmaps \"missing\" not found");

    // get -w while another process writes.
    let mut watch = k.spawn(&["get", "cm", "-n", n, "-w", "--request-timeout=30s"]);
    k.eventually(
        &["get", "cm", "-n", n, "-o", "name"],
        Duration::from_secs(5),
        |r| r.stdout.contains("settings"),
    );
    k.run(&[
        "create",
        "configmap",
        "watched",
        "-n",
        n,
        "--from-literal=k=v",
    ])
    .ok();
    let mut seen = String::new();
    let mut stdout = watch.stdout.take().expect("stdout");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 4096];
    while !seen.contains("watched") && std::time::Instant::now() < deadline {
        match stdout.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(len) => seen.push_str(&String::from_utf8_lossy(&buf[..len])),
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(
        seen.contains("settings") && seen.contains("watched"),
        "kubectl get -w printed:\n{seen}"
    );

    // describe and explain.
    k.run(&["describe", "deploy", "web", "-n", n])
        .ok()
        .out("Name:")
        .out("web")
        .out("Replicas:");
    k.run(&["describe", "cm", "settings", "-n", n])
        .ok()
        .out("mode");
    k.run(&["explain", "deployment.spec.template.spec.containers"])
        .ok()
        .out("DESCRIPTION")
        .out("image");
    k.run(&["explain", "pods.spec.restartPolicy"])
        .ok()
        .out("restartPolicy");
    // The v2 document (gnostic protobuf), which kubectl reads for this output and Helm for
    // validation.
    k.run(&[
        "explain",
        "deployment.spec.replicas",
        "--output",
        "plaintext-openapiv2",
    ])
    .ok()
    .out("KIND:")
    .out("Deployment")
    .out("replicas <integer>");
    // Flow control objects and both HPA versions are served.
    k.run(&["get", "flowschemas"])
        .ok()
        .out("PRIORITYLEVEL")
        .out("catch-all");
    k.run(&["get", "prioritylevelconfigurations"])
        .ok()
        .out("NOMINALCONCURRENCYSHARES")
        .out("exempt");
    k.run(&[
        "autoscale",
        "deployment",
        "web",
        "-n",
        n,
        "--max=3",
        "--cpu-percent=70",
    ])
    .ok()
    .out("autoscaled");
    k.run(&[
        "get",
        "horizontalpodautoscalers.v1.autoscaling",
        "web",
        "-n",
        n,
        "-o",
        "yaml",
    ])
    .ok()
    .out("apiVersion: autoscaling/v1")
    .out("targetCPUUtilizationPercentage: 70");
    k.run(&["delete", "hpa", "web", "-n", n]).ok();
    // Every served group version is a local, available APIService.
    let services = k.run(&["get", "apiservices"]);
    services.ok().out("SERVICE").out("AVAILABLE");
    let rows = services.rows();
    for want in ["v1.", "v1.apps", "v2.autoscaling"] {
        let row = rows.iter().find(|r| r[0] == want);
        assert!(
            row.is_some_and(|r| r[1] == "Local" && r[2] == "True"),
            "{want}: {rows:?}"
        );
    }

    // label, annotate, the three patch types, scale.
    k.run(&["label", "deploy", "web", "-n", n, "tier=frontend"])
        .ok()
        .out("deployment.apps/web labeled");
    k.run(&[
        "get",
        "deploy",
        "-n",
        n,
        "-l",
        "tier=frontend",
        "-o",
        "name",
    ])
    .ok()
    .out("deployment.apps/web");
    // kubectl 1.27 prints "annotate", later versions "annotated".
    k.run(&["annotate", "deploy", "web", "-n", n, "owner=team-a"])
        .ok()
        .out("deployment.apps/web annotate");
    k.run(&[
        "get",
        "deploy",
        "web",
        "-n",
        n,
        "-o",
        "jsonpath={.metadata.annotations.owner}",
    ])
    .ok()
    .out("team-a");
    k.run(&[
        "patch",
        "deploy",
        "web",
        "-n",
        n,
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.26"}]}}}}"#,
    ])
    .ok()
    .out("patched");
    let r = k.run(&[
        "get",
        "deploy",
        "web",
        "-n",
        n,
        "-o",
        "jsonpath={.spec.template.spec.containers[*].image}",
    ]);
    assert_eq!(
        r.ok().stdout.trim(),
        "nginx:1.26",
        "strategic merge patch keeps one container, by name"
    );
    k.run(&[
        "patch",
        "deploy",
        "web",
        "-n",
        n,
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"labels":{"patched":"merge"}}}"#,
    ])
    .ok()
    .out("patched");
    k.run(&[
        "patch",
        "deploy",
        "web",
        "-n",
        n,
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/replicas","value":3}]"#,
    ])
    .ok()
    .out("patched");
    k.run(&[
        "get",
        "deploy",
        "web",
        "-n",
        n,
        "-o",
        "jsonpath={.spec.replicas} {.metadata.labels.patched}",
    ])
    .ok()
    .out("3 merge");
    k.run(&[
        "patch",
        "deploy",
        "web",
        "-n",
        n,
        "--type",
        "json",
        "-p",
        r#"[{"op":"test","path":"/spec/replicas","value":9}]"#,
    ])
    .fails(1)
    .err("The request is invalid")
    .err("test failed");
    k.run(&["scale", "deploy", "web", "-n", n, "--replicas=4"])
        .ok()
        .out("scaled");
    k.run(&[
        "get",
        "deploy",
        "web",
        "-n",
        n,
        "-o",
        "jsonpath={.spec.replicas}",
    ])
    .ok()
    .out("4");

    // replace with a stale resourceVersion: conflict.
    let stale = k.run(&["get", "cm", "settings", "-n", n, "-o", "yaml"]);
    stale.ok();
    k.run(&[
        "patch",
        "cm",
        "settings",
        "-n",
        n,
        "--type",
        "merge",
        "-p",
        r#"{"data":{"mode":"slow"}}"#,
    ])
    .ok();
    let stale_file = manifest(
        dir.path(),
        "stale.yaml",
        &stale.stdout.replace("mode: fast", "mode: stale"),
    );
    k.run(&["replace", "-f", stale_file.to_str().expect("utf-8")])
        .fails(1)
        .err("Conflict")
        .err("the object has been modified");
    let fresh = k.run(&["get", "cm", "settings", "-n", n, "-o", "yaml"]);
    let fresh_file = manifest(
        dir.path(),
        "fresh.yaml",
        &fresh.ok().stdout.replace("mode: slow", "mode: replaced"),
    );
    k.run(&["replace", "-f", fresh_file.to_str().expect("utf-8")])
        .ok()
        .out("replaced");

    // diff: exit 1 on a change, 0 without.
    let changed = manifest(
        dir.path(),
        "changed.yaml",
        &app_manifest(n, "nginx:1.27", 4),
    );
    k.run(&["diff", "-f", changed.to_str().expect("utf-8")])
        .fails(1)
        .out("nginx:1.27");

    // Server-side apply: two managers conflict; --force-conflicts takes over.
    let ssa = manifest(
        dir.path(),
        "ssa.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  namespace: {n}\ndata:\n  owner: alice\n"
        ),
    );
    let ssa = ssa.to_str().expect("utf-8");
    k.run(&[
        "apply",
        "--server-side",
        "-f",
        ssa,
        "--field-manager",
        "alice",
    ])
    .ok()
    .out("configmap/ssa serverside-applied");
    let bob = manifest(
        dir.path(),
        "ssa-bob.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  namespace: {n}\ndata:\n  owner: bob\n"
        ),
    );
    let bob = bob.to_str().expect("utf-8");
    k.run(&[
        "apply",
        "--server-side",
        "-f",
        bob,
        "--field-manager",
        "bob",
    ])
    .fails(1)
    .err("conflict")
    .err("alice")
    .err(".data.owner");
    k.run(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        bob,
        "--field-manager",
        "bob",
    ])
    .ok()
    .out("serverside-applied");
    k.run(&["get", "cm", "ssa", "-n", n, "-o", "jsonpath={.data.owner}"])
        .ok()
        .out("bob");
    k.run(&[
        "get",
        "cm",
        "ssa",
        "-n",
        n,
        "-o",
        "jsonpath={.metadata.managedFields[*].manager}",
    ])
    .ok()
    .out("bob");

    // create, run, dry-run.
    k.run(&["create", "deployment", "api", "--image=nginx", "-n", n])
        .ok()
        .out("deployment.apps/api created");
    k.run(&[
        "get",
        "deploy",
        "api",
        "-n",
        n,
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ])
    .ok()
    .out("nginx");
    k.run(&["run", "solo", "--image=nginx", "-n", n])
        .ok()
        .out("pod/solo created");
    k.run(&[
        "create",
        "configmap",
        "dry",
        "-n",
        n,
        "--from-literal=a=b",
        "--dry-run=server",
    ])
    .ok()
    .out("created (server dry run)");
    k.run(&["get", "cm", "dry", "-n", n])
        .fails(1)
        .err("NotFound");
    k.run(&["create", "configmap", "Bad_Name", "-n", n])
        .fails(1)
        .err("Invalid")
        .err("metadata.name");

    // delete: background, orphan, foreground, --wait.
    k.run(&["delete", "cm", "watched", "-n", n])
        .ok()
        .out("configmap \"watched\" deleted");
    k.run(&["delete", "pod", "solo", "-n", n, "--wait=true"])
        .ok()
        .out("deleted");
    k.run(&["delete", "deploy", "api", "-n", n, "--cascade=orphan"])
        .ok()
        .out("deleted");
    k.run(&["get", "deploy", "api", "-n", n])
        .fails(1)
        .err("NotFound");
    k.run(&[
        "delete",
        "deploy",
        "web",
        "-n",
        n,
        "--cascade=foreground",
        "--wait=true",
    ])
    .ok()
    .out("deleted");
    k.run(&["get", "deploy", "web", "-n", n])
        .fails(1)
        .err("NotFound");
}

#[test]
fn every_kubectl_version_runs_the_scenario_against_the_embedded_store() {
    let server = Server::start(Backend::Embedded);
    std::thread::scope(|s| {
        for v in KUBECTL_VERSIONS {
            let server = &server;
            s.spawn(move || scenario(server, v));
        }
    });
}

#[test]
fn every_kubectl_version_runs_the_scenario_against_etcd() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let etcd = rt.block_on(storage::testkit::EtcdServer::start());
    let server = Server::start(Backend::Etcd(etcd.endpoint.clone()));
    std::thread::scope(|s| {
        for v in KUBECTL_VERSIONS {
            let server = &server;
            s.spawn(move || scenario(server, v));
        }
    });
    drop(server);
    drop(etcd);
}

#[test]
fn a_restarted_server_keeps_every_acknowledged_write() {
    let mut server = Server::start(Backend::Embedded);
    let k: Kubectl = server.kubectl("1.33");
    for i in 0..20 {
        k.run(&[
            "create",
            "configmap",
            &format!("keep-{i}"),
            "--from-literal",
            &format!("i={i}"),
        ])
        .ok();
    }
    server.kill9();
    server.launch();
    let k: Kubectl = server.kubectl("1.33");
    for i in 0..20 {
        k.run(&[
            "get",
            "cm",
            &format!("keep-{i}"),
            "-o",
            "jsonpath={.data.i}",
        ])
        .ok()
        .out(&i.to_string());
    }
}

#[test]
fn sigterm_drains_and_exits_cleanly_and_the_data_survives() {
    let mut server = Server::start(Backend::Embedded);
    let k = server.kubectl("1.33");
    k.run(&["create", "configmap", "before-term"]).ok();
    let mut watch = k.spawn(&["get", "cm", "-w"]);
    k.eventually(
        &["get", "cm", "before-term", "-o", "name"],
        Duration::from_secs(5),
        |r| r.code == 0,
    );
    let status = server.terminate();
    assert!(
        status.success(),
        "matryoshka exits 0 on SIGTERM: {status}\n{}",
        server.log()
    );
    // The watch ended with the server.
    let code = watch.wait().expect("kubectl exits");
    assert!(code.code().is_some());
    server.launch();
    server
        .kubectl("1.33")
        .run(&["get", "cm", "before-term"])
        .ok();
}
