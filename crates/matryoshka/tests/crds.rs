//! CustomResourceDefinitions end to end with kubectl: the real upstream CRDs in
//! `shared/testdata/crds`, custom resources valid and invalid, printer columns, scale and status
//! subresources, generation, explain, CEL rules, deletion — and isolation between clusters.

mod support;

use std::path::Path;
use std::time::Duration;

use support::{Backend, Kubectl, Server, manifest};

fn testdata() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/crds")
}

/// A CRD written for these tests: defaults, enums, patterns, CEL (with an immutable field),
/// list maps, status and scale subresources, printer columns, a selectable field.
const WIDGETS: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget, shortNames: [wd], categories: [all]}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    selectableFields:
    - jsonPath: .spec.size
    additionalPrinterColumns:
    - {name: Size, type: string, jsonPath: .spec.size}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Owner, type: string, jsonPath: .spec.owner, priority: 1}
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            x-kubernetes-validations:
            - rule: "self.replicas <= 10"
              message: "at most 10 replicas"
            - rule: "self.owner == oldSelf.owner"
              message: "owner is immutable"
            properties:
              size: {type: string, enum: [S, M, L]}
              replicas: {type: integer, minimum: 0, default: 1}
              owner: {type: string, pattern: "^[a-z]+$", default: nobody}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
          status:
            type: object
            properties:
              replicas: {type: integer}
              phase: {type: string}
"#;

fn widget(name: &str, size: &str, extra: &str) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  size: {size}\n{extra}"
    )
}

#[test]
fn custom_resource_definitions_serve_like_kube_apiserver() {
    let server = Server::start(Backend::Embedded);
    let k = server.kubectl("1.33");

    // Every real upstream CRD is accepted and established.
    for dir in ["cert-manager", "cluster-api"] {
        k.run(&["apply", "-f", testdata().join(dir).to_str().expect("utf-8")])
            .ok()
            .out("created");
    }
    k.run(&[
        "wait",
        "--for",
        "condition=established",
        "crd",
        "--all",
        "--timeout=30s",
    ])
    .ok();
    k.run(&["api-resources", "--api-group=cert-manager.io"])
        .ok()
        .out("certificates")
        .out("cert,certs");
    k.run(&["explain", "certificate.spec.dnsNames"])
        .ok()
        .out("dnsNames");

    // A cert-manager Certificate: valid, then invalid, then with an unknown field.
    let cert = |name: &str, spec: &str| {
        format!(
            "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n{spec}"
        )
    };
    let good = manifest(
        &server.dir,
        "cert.yaml",
        &cert(
            "web",
            "  secretName: web-tls\n  dnsNames: [web.example.com]\n  issuerRef:\n    name: letsencrypt\n",
        ),
    );
    k.run(&["apply", "-f", good.to_str().expect("utf-8")])
        .ok()
        .out("certificate.cert-manager.io/web created");
    k.run(&["get", "certificates"])
        .ok()
        .out("READY")
        .out("SECRET")
        .out("AGE")
        .out("web-tls");
    k.run(&["get", "certificates", "-o", "wide"])
        .ok()
        .out("ISSUER")
        .out("letsencrypt");
    let missing = manifest(
        &server.dir,
        "bad-cert.yaml",
        &cert("bad", "  dnsNames: [x.example.com]\n"),
    );
    k.run(&["apply", "-f", missing.to_str().expect("utf-8")])
        .fails(1)
        .err("is invalid")
        .err("spec.issuerRef: Required value");
    let unknown = manifest(
        &server.dir,
        "unknown.yaml",
        &cert(
            "odd",
            "  secretName: s\n  issuerRef: {name: x}\n  bogus: 1\n",
        ),
    );
    k.run(&["apply", "-f", unknown.to_str().expect("utf-8")])
        .fails(1)
        .err("unknown field")
        .err("spec.bogus");
    k.run(&[
        "apply",
        "--validate=false",
        "-f",
        unknown.to_str().expect("utf-8"),
    ])
    .ok()
    .out("created");
    k.run(&["get", "certificate", "odd", "-o", "jsonpath={.spec}"])
        .ok()
        .not_out("bogus");
    // Strategic merge patch is refused for custom resources; merge patch works.
    k.run(&[
        "patch",
        "certificate",
        "web",
        "-p",
        r#"{"spec":{"secretName":"other"}}"#,
    ])
    .fails(1)
    .err("unknown format");
    k.run(&[
        "patch",
        "certificate",
        "web",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"secretName":"other"}}"#,
    ])
    .ok()
    .out("patched");

    // Cluster API MachineDeployment: scale subresource.
    let md = "apiVersion: cluster.x-k8s.io/v1beta2\nkind: MachineDeployment\nmetadata:\n  name: md\n  namespace: default\nspec:\n  clusterName: c1\n  replicas: 1\n  selector:\n    matchLabels: {pool: a}\n  template:\n    metadata:\n      labels: {pool: a}\n    spec:\n      clusterName: c1\n      bootstrap:\n        dataSecretName: boot\n      infrastructureRef:\n        apiGroup: infrastructure.cluster.x-k8s.io\n        kind: DockerMachineTemplate\n        name: tpl\n";
    let md = manifest(&server.dir, "md.yaml", md);
    k.run(&["apply", "-f", md.to_str().expect("utf-8")])
        .ok()
        .out("created");
    k.run(&["scale", "machinedeployment", "md", "--replicas=3"])
        .ok()
        .out("scaled");
    k.run(&[
        "get",
        "machinedeployment",
        "md",
        "-o",
        "jsonpath={.spec.replicas}",
    ])
    .ok()
    .out("3");

    // Our own CRD exercising defaults, enums, patterns, CEL and list maps.
    let crd = manifest(&server.dir, "widgets.yaml", WIDGETS);
    k.run(&["apply", "-f", crd.to_str().expect("utf-8")]).ok();
    k.run(&[
        "wait",
        "--for",
        "condition=established",
        "crd/widgets.example.com",
        "--timeout=30s",
    ])
    .ok();
    let w = manifest(&server.dir, "w.yaml", &widget("w1", "M", ""));
    k.run(&["apply", "-f", w.to_str().expect("utf-8")])
        .ok()
        .out("widget.example.com/w1 created");
    k.run(&[
        "get",
        "wd",
        "w1",
        "-o",
        "jsonpath={.spec.replicas} {.spec.owner}",
    ])
    .ok()
    .out("1 nobody");
    k.run(&["get", "widgets"])
        .ok()
        .out("SIZE")
        .out("REPLICAS")
        .out("M");
    k.run(&["get", "all"]).ok().out("widget.example.com/w1");
    k.run(&[
        "get",
        "widgets",
        "--field-selector",
        "spec.size=M",
        "-o",
        "name",
    ])
    .ok()
    .out("widget.example.com/w1");
    let bad = manifest(
        &server.dir,
        "w-bad.yaml",
        &widget("w2", "XL", "  replicas: 11\n  owner: Bad1\n"),
    );
    k.run(&["apply", "-f", bad.to_str().expect("utf-8")])
        .fails(1)
        .err("spec.size: Unsupported value: \"XL\"")
        .err("spec.owner in body should match")
        .err("some validation rules were not checked");
    let too_many = manifest(
        &server.dir,
        "w-many.yaml",
        &widget("w2", "S", "  replicas: 11\n"),
    );
    k.run(&["apply", "-f", too_many.to_str().expect("utf-8")])
        .fails(1)
        .err("at most 10 replicas");
    let dup = manifest(
        &server.dir,
        "w-dup.yaml",
        &widget(
            "w3",
            "S",
            "  ports:\n  - {name: a, port: 1}\n  - {name: a, port: 2}\n",
        ),
    );
    k.run(&["apply", "-f", dup.to_str().expect("utf-8")])
        .fails(1)
        .err("Duplicate value");
    k.run(&[
        "patch",
        "widget",
        "w1",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"owner":"alice"}}"#,
    ])
    .fails(1)
    .err("owner is immutable");
    // Generation: spec changes bump it, status changes do not.
    let gen0 = k.run(&[
        "get",
        "widget",
        "w1",
        "-o",
        "jsonpath={.metadata.generation}",
    ]);
    let gen0: i64 = gen0.ok().stdout.trim().parse().expect("a number");
    k.run(&[
        "patch",
        "widget",
        "w1",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"size":"L"}}"#,
    ])
    .ok();
    k.run(&[
        "patch",
        "widget",
        "w1",
        "--subresource=status",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"phase":"Ready","replicas":1}}"#,
    ])
    .ok();
    let r = k.run(&[
        "get",
        "widget",
        "w1",
        "-o",
        "jsonpath={.metadata.generation} {.status.phase}",
    ]);
    assert_eq!(
        r.ok().stdout.trim(),
        format!("{} Ready", gen0 + 1),
        "one spec change, one status change"
    );
    k.run(&["scale", "widget", "w1", "--replicas=4"])
        .ok()
        .out("scaled");
    k.run(&["get", "widget", "w1", "-o", "jsonpath={.spec.replicas}"])
        .ok()
        .out("4");
    k.run(&["explain", "widget.spec.size"]).ok().out("size");

    // Deleting a CRD deletes its objects and its API.
    k.run(&[
        "delete",
        "crd",
        "widgets.example.com",
        "--wait=true",
        "--timeout=60s",
    ])
    .ok()
    .out("deleted");
    k.eventually(
        &["api-resources", "--api-group=example.com"],
        Duration::from_secs(10),
        |r| r.code == 0 && !r.stdout.contains("widgets"),
    );
    k.run(&["apply", "-f", crd.to_str().expect("utf-8")]).ok();
    k.run(&[
        "wait",
        "--for",
        "condition=established",
        "crd/widgets.example.com",
        "--timeout=30s",
    ])
    .ok();
    k.eventually(&["get", "widgets", "-A"], Duration::from_secs(10), |r| {
        r.code == 0 && r.stderr.contains("No resources found")
    });
}

#[test]
fn a_cluster_sees_only_its_own_custom_resources_and_discovery() {
    let server = Server::start(Backend::Embedded);
    let root = server.kubectl("1.33");
    root.run_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: core.matryoshka.dev/v1alpha1\nkind: LogicalCluster\nmetadata:\n  name: one\n---\napiVersion: core.matryoshka.dev/v1alpha1\nkind: LogicalCluster\nmetadata:\n  name: two\n"),
    )
    .ok();
    let conf = |n: &str| {
        root.run(&[
            "wait",
            "--for=jsonpath={.status.phase}=Ready",
            &format!("logicalcluster/{n}"),
            "--timeout=30s",
        ])
        .ok();
        let r = root.run(&[
            "get",
            "secret",
            "-n",
            "matryoshka-system",
            &format!("{n}-admin-kubeconfig"),
            "-o",
            "jsonpath={.data.admin\\.conf}",
        ]);
        let out = std::process::Command::new("base64")
            .arg("-d")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin
                    .take()
                    .expect("stdin")
                    .write_all(r.stdout.as_bytes())?;
                c.wait_with_output()
            });
        let path = server.dir.join(format!("{n}.conf"));
        std::fs::write(&path, out.expect("base64").stdout).expect("write");
        Kubectl::new("1.33", &path)
    };
    let (one, two) = (conf("one"), conf("two"));
    let crd = manifest(&server.dir, "widgets.yaml", WIDGETS);
    one.run(&["apply", "-f", crd.to_str().expect("utf-8")]).ok();
    one.run(&[
        "wait",
        "--for",
        "condition=established",
        "crd/widgets.example.com",
        "--timeout=30s",
    ])
    .ok();
    one.run(&["api-resources", "--api-group=example.com"])
        .ok()
        .out("widgets");
    two.run(&["api-resources", "--api-group=example.com"])
        .ok()
        .not_out("widgets");
    two.run(&["get", "crd"]).ok().not_out("widgets");
    two.run(&["get", "widgets"])
        .fails(1)
        .err("doesn't have a resource type");
    root.run(&["get", "widgets"])
        .fails(1)
        .err("doesn't have a resource type");
    // The same CRD in two defines two independent APIs.
    two.run(&["apply", "-f", crd.to_str().expect("utf-8")]).ok();
    two.run(&[
        "wait",
        "--for",
        "condition=established",
        "crd/widgets.example.com",
        "--timeout=30s",
    ])
    .ok();
    let w = manifest(&server.dir, "w.yaml", &widget("only-in-one", "S", ""));
    one.run(&["apply", "-f", w.to_str().expect("utf-8")]).ok();
    two.run(&["get", "widgets", "-A"])
        .ok()
        .not_out("only-in-one");
}

#[test]
fn the_python_dynamic_client_lists_and_creates_custom_resources() {
    let server = Server::start(Backend::Embedded);
    let k = server.kubectl("1.33");
    let crd = manifest(&server.dir, "widgets.yaml", WIDGETS);
    k.run(&["apply", "-f", crd.to_str().expect("utf-8")]).ok();
    k.run(&[
        "wait",
        "--for",
        "condition=established",
        "crd/widgets.example.com",
        "--timeout=30s",
    ])
    .ok();
    let script = r#"
import os
from kubernetes import config, dynamic, client
config.load_kube_config(config_file=os.environ["KUBECONFIG"])
dyn = dynamic.DynamicClient(client.ApiClient())
widgets = dyn.resources.get(api_version="example.com/v1", kind="Widget")
widgets.create(namespace="default", body={"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "py"}, "spec": {"size": "S"}})
items = widgets.get(namespace="default").items
names = [i.metadata.name for i in items]
assert names == ["py"], names
assert items[0].spec.replicas == 1, items[0].spec
print("ok", names)
"#;
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .env("KUBECONFIG", server.kubeconfig())
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok ['py']"));
}
