//! Dedicated datastores: a `DataStore` names an etcd of its own (here one that requires client
//! certificates, its TLS material in a Secret), and a `LogicalCluster` bound to it keeps every
//! key there and none in the shared store — read from both etcds directly. The cluster works
//! as any other: kubectl, its controllers (a Deployment gets its ReplicaSet and Pods, the
//! garbage collector removes them), resourceVersions that only grow. The DataStore reports
//! its health and users and cannot go while a cluster uses it; bad DataStores and bindings are
//! refused with field errors.

mod support;

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use storage::testkit::{EtcdServer, Tls};
use support::{Backend, Kubectl, Server};

/// The keys under `prefix` in the etcd at `endpoint` (with `tls` when given).
fn etcd_keys(
    rt: &tokio::runtime::Runtime,
    endpoint: &str,
    tls: Option<&Tls>,
    prefix: &str,
) -> Vec<String> {
    rt.block_on(async {
        let opts = tls.map(Tls::client_options);
        let mut c = etcd_client::Client::connect([endpoint], opts)
            .await
            .expect("etcd answers");
        let resp = c
            .get(
                prefix,
                Some(
                    etcd_client::GetOptions::new()
                        .with_prefix()
                        .with_keys_only(),
                ),
            )
            .await
            .expect("a range read");
        resp.kvs()
            .iter()
            .map(|kv| String::from_utf8_lossy(kv.key()).into_owned())
            .collect()
    })
}

fn tls_material() -> Tls {
    let ca = pki::Ca::generate("datastore-ca").unwrap();
    let server = ca
        .issue_server("etcd", &["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap();
    let client = ca.issue_client("matryoshka", &[]).unwrap();
    Tls {
        ca_pem: ca.pair.cert_pem.clone(),
        server_cert_pem: server.cert_pem,
        server_key_pem: server.key_pem,
        client_cert_pem: client.cert_pem,
        client_key_pem: client.key_pem,
    }
}

fn jsonpath(k: &Kubectl, args: &[&str], path: &str) -> String {
    let mut all: Vec<&str> = args.to_vec();
    let p = format!("jsonpath={path}");
    all.extend(["-o", &p]);
    k.run(&all).ok().stdout.trim().to_string()
}

#[test]
fn a_cluster_bound_to_a_datastore_keeps_every_key_in_that_etcd_and_works_as_any_other() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let shared = rt.block_on(EtcdServer::start());
    let tls = tls_material();
    let dedicated = rt.block_on(EtcdServer::start_tls(&tls));
    let server = Server::start(Backend::Etcd(shared.endpoint.clone()));
    let shared_prefix = format!("/m{}", server.port);
    let root = server.kubectl("1.33");
    let dir = tempfile::tempdir().unwrap();

    // Bad DataStores are refused with every field error, and nothing is created.
    root.run_stdin(
        &["apply", "-f", "-"],
        Some(
            "apiVersion: core.matryoshka.dev/v1alpha1\nkind: DataStore\nmetadata:\n  name: bad\nspec:\n  driver: MySQL\n  endpoints: [\"nohost\"]\n  prefix: relative\n",
        ),
    )
    .fails(1)
    .err("spec.driver: Unsupported value: \"MySQL\"")
    .err("spec.endpoints[0]: Invalid value")
    .err("spec.prefix: Invalid value");
    root.run(&["get", "datastore", "bad"]).fails(1);
    // A cluster bound to a DataStore that does not exist is refused.
    root.run_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: core.matryoshka.dev/v1alpha1\nkind: LogicalCluster\nmetadata:\n  name: orphan\nspec:\n  dataStore: missing\n"),
    )
    .fails(1)
    .err("spec.dataStore: Invalid value: \"missing\": the DataStore does not exist");

    // The DataStore: the dedicated etcd, its TLS material in a Secret of the root cluster.
    let b64 = |s: &str| STANDARD.encode(s);
    let endpoint = dedicated
        .endpoint
        .trim_start_matches("https://")
        .to_string();
    root.run_stdin(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: etcd-a-tls\n  namespace: matryoshka-system\ndata:\n  ca.crt: {}\n  tls.crt: {}\n  tls.key: {}\n---\napiVersion: core.matryoshka.dev/v1alpha1\nkind: DataStore\nmetadata:\n  name: etcd-a\nspec:\n  driver: etcd\n  endpoints: [\"{endpoint}\"]\n  prefix: /tenants/a\n  tlsConfig:\n    certificateAuthority:\n      certificate:\n        secretReference: {{name: etcd-a-tls, namespace: matryoshka-system, keyPath: ca.crt}}\n    clientCertificate:\n      certificate:\n        secretReference: {{name: etcd-a-tls, namespace: matryoshka-system, keyPath: tls.crt}}\n      privateKey:\n        secretReference: {{name: etcd-a-tls, namespace: matryoshka-system, keyPath: tls.key}}\n",
            b64(&tls.ca_pem),
            b64(&tls.client_cert_pem),
            b64(&tls.client_key_pem),
        )),
    )
    .ok();
    root.run(&[
        "wait",
        "--for=jsonpath={.status.ready}=true",
        "datastore/etcd-a",
        "--timeout=30s",
    ])
    .ok();
    assert_eq!(
        jsonpath(
            &root,
            &["get", "datastore", "etcd-a"],
            "{.status.conditions[?(@.type==\"Ready\")].status}"
        ),
        "True"
    );

    // A cluster bound to it.
    let conf =
        support::logical_cluster_with(&root, dir.path(), "tenant-a", "  dataStore: etcd-a\n");
    let k = Kubectl::new("1.33", &conf);
    k.run(&["create", "namespace", "app"]).ok();
    k.run(&[
        "create",
        "configmap",
        "settings",
        "-n",
        "app",
        "--from-literal=a=1",
    ])
    .ok();
    let rv1: u64 = jsonpath(
        &k,
        &["get", "cm", "settings", "-n", "app"],
        "{.metadata.resourceVersion}",
    )
    .parse()
    .unwrap();
    k.run(&[
        "patch",
        "cm",
        "settings",
        "-n",
        "app",
        "-p",
        "{\"data\":{\"a\":\"2\"}}",
    ])
    .ok();
    let rv2: u64 = jsonpath(
        &k,
        &["get", "cm", "settings", "-n", "app"],
        "{.metadata.resourceVersion}",
    )
    .parse()
    .unwrap();
    assert!(rv2 > rv1, "{rv1} then {rv2}");

    // Its controllers run: a Deployment gets its ReplicaSet and Pods.
    k.run(&[
        "create",
        "deployment",
        "web",
        "-n",
        "app",
        "--image=registry.invalid/web:1",
        "--replicas=2",
    ])
    .ok();
    k.eventually(
        &["get", "pods", "-n", "app", "-l", "app=web", "-o", "name"],
        Duration::from_secs(30),
        |r| r.code == 0 && r.stdout.lines().count() == 2,
    );
    k.run(&["get", "rs", "-n", "app", "-l", "app=web"])
        .ok()
        .out("web-");

    // Every key of the cluster is in the dedicated etcd, under its prefix; none in the
    // shared store.
    let ours = etcd_keys(
        &rt,
        &dedicated.endpoint,
        Some(&tls),
        "/tenants/a/registry/tenant-a/",
    );
    for want in [
        "/tenants/a/registry/tenant-a/core/configmaps/app/settings",
        "/tenants/a/registry/tenant-a/core/namespaces/app",
        "/tenants/a/registry/tenant-a/apps/deployments/app/web",
    ] {
        assert!(
            ours.iter().any(|k| k == want || k.starts_with(want)),
            "{want} is not in the datastore: {ours:#?}"
        );
    }
    assert!(
        ours.iter().any(|k| k.contains("/pods/app/web-")),
        "{ours:#?}"
    );
    let leaked = etcd_keys(
        &rt,
        &shared.endpoint,
        None,
        &format!("{shared_prefix}/registry/tenant-a/"),
    );
    assert!(
        leaked.is_empty(),
        "keys of the cluster in the shared store: {leaked:#?}"
    );
    // Nothing else is in the datastore.
    let all = etcd_keys(&rt, &dedicated.endpoint, Some(&tls), "");
    assert!(
        all.iter()
            .all(|k| k.starts_with("/tenants/a/registry/tenant-a/")),
        "{all:#?}"
    );

    // A backup of the cluster restored under another name into the same datastore: its keys
    // go there too.
    let backups = dir.path().join("backups");
    std::fs::create_dir(&backups).unwrap();
    let out = support::matryoshka(
        &server,
        &[
            "backup",
            "create",
            "tenant-a",
            "--to",
            backups.to_str().unwrap(),
        ],
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
    let out = support::matryoshka(
        &server,
        &[
            "backup",
            "restore",
            file.to_str().unwrap(),
            "--as",
            "tenant-b",
            "--data-store",
            "etcd-a",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let copy = Kubectl::new(
        "1.33",
        &support::logical_cluster_with(&root, dir.path(), "tenant-b", "  dataStore: etcd-a\n"),
    );
    copy.run(&[
        "get",
        "cm",
        "settings",
        "-n",
        "app",
        "-o",
        "jsonpath={.data.a}",
    ])
    .ok()
    .out("2");
    let theirs = etcd_keys(
        &rt,
        &dedicated.endpoint,
        Some(&tls),
        "/tenants/a/registry/tenant-b/",
    );
    assert!(
        theirs.contains(&"/tenants/a/registry/tenant-b/core/configmaps/app/settings".to_string()),
        "{theirs:#?}"
    );
    assert!(
        etcd_keys(
            &rt,
            &shared.endpoint,
            None,
            &format!("{shared_prefix}/registry/tenant-b/")
        )
        .is_empty()
    );
    root.run(&["delete", "logicalcluster", "tenant-b", "--timeout=60s"])
        .ok();

    // The DataStore knows its user, and cannot go while used.
    root.eventually(
        &[
            "get",
            "datastore",
            "etcd-a",
            "-o",
            "jsonpath={.status.usedBy}",
        ],
        Duration::from_secs(20),
        |r| r.stdout.contains("tenant-a"),
    );
    root.run(&["delete", "datastore", "etcd-a", "--wait=false"])
        .ok();
    std::thread::sleep(Duration::from_secs(6));
    root.run(&["get", "datastore", "etcd-a"]).ok();
    k.run(&["get", "cm", "settings", "-n", "app"]).ok();
    // A binding never changes.
    root.run(&[
        "patch",
        "logicalcluster",
        "tenant-a",
        "--type=merge",
        "-p",
        "{\"spec\":{\"dataStore\":null}}",
    ])
    .fails(1)
    .err("spec.dataStore: Invalid value: null: field is immutable");

    // The garbage collector sees the cluster: the Deployment's dependents go with it.
    k.run(&["delete", "deployment", "web", "-n", "app"]).ok();
    k.eventually(
        &["get", "rs,pods", "-n", "app", "-o", "name"],
        Duration::from_secs(30),
        |r| r.code == 0 && r.stdout.trim().is_empty(),
    );

    // Deleting the cluster deletes its keys in the datastore; then the DataStore goes.
    root.run(&["delete", "logicalcluster", "tenant-a", "--timeout=60s"])
        .ok();
    assert!(
        etcd_keys(&rt, &dedicated.endpoint, Some(&tls), "/tenants/a/").is_empty(),
        "keys left in the datastore"
    );
    root.eventually(
        &["get", "datastore", "etcd-a"],
        Duration::from_secs(30),
        |r| r.code != 0 && r.stderr.contains("NotFound"),
    );
}

/// The etcd at `127.0.0.1:<port>` of a datastore Secret's material, as a [`Tls`] to read it.
fn managed_etcd(root: &Kubectl, name: &str) -> (String, Tls) {
    let field = |key: &str| {
        root.run(&[
            "get",
            "secret",
            "-n",
            "matryoshka-system",
            &format!("datastore-{name}"),
            "-o",
            &format!("go-template={{{{ index .data \"{key}\" | base64decode }}}}"),
        ])
        .ok()
        .stdout
        .clone()
    };
    let endpoint = format!("https://127.0.0.1:{}", field("client-port").trim());
    let tls = Tls {
        ca_pem: field("ca.crt"),
        server_cert_pem: String::new(),
        server_key_pem: String::new(),
        client_cert_pem: field("tls.crt"),
        client_key_pem: field("tls.key"),
    };
    (endpoint, tls)
}

/// The command lines of the processes whose command line contains `needle`.
fn processes(needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(raw) = std::fs::read(e.path().join("cmdline")) {
            let line = String::from_utf8_lossy(&raw).replace('\0', " ");
            if line.contains(needle) && !line.contains("sh -c") {
                out.push(line);
            }
        }
    }
    out
}

#[test]
fn a_tenant_with_etcd_gets_its_own_etcd_and_its_clusters_keys_are_only_there() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let shared = rt.block_on(EtcdServer::start());
    let server = Server::with_cluster_api(Backend::Etcd(shared.endpoint.clone()));
    let shared_prefix = format!("/m{}", server.port);
    let root = server.kubectl("1.33");

    root.run_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: platform.matryoshka.dev/v1alpha1\nkind: Tenant\nmetadata:\n  name: foo\n  namespace: tenant-root\nspec:\n  etcd: true\n"),
    )
    .ok();
    root.run(&[
        "wait",
        "--for=condition=DatastoreReady",
        "tenant/foo",
        "-n",
        "tenant-root",
        "--timeout=60s",
    ])
    .ok();
    assert_eq!(
        jsonpath(
            &root,
            &["get", "tenant", "foo", "-n", "tenant-root"],
            "{.status.dataStore}"
        ),
        "tenant-foo"
    );
    assert_eq!(
        jsonpath(
            &root,
            &["get", "datastore", "tenant-foo"],
            "{.status.ready}"
        ),
        "true"
    );
    // The etcd runs as the seed's etcd app is sized.
    let datastore_dir = server.dir.join("datastores").join("tenant-foo");
    let running = processes(&datastore_dir.join("data").display().to_string());
    assert_eq!(running.len(), 1, "{running:#?}");
    for flag in [
        "--quota-backend-bytes 4080218931",
        "--auto-compaction-mode periodic",
        "--auto-compaction-retention 5m",
        "--snapshot-count 10000",
        "--client-cert-auth",
    ] {
        assert!(running[0].contains(flag), "{flag}: {}", running[0]);
    }

    // Its cluster, with a worker.
    root.run_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: platform.matryoshka.dev/v1alpha1\nkind: TenantCluster\nmetadata:\n  name: team-x\n  namespace: tenant-foo\nspec:\n  version: v1.33\n  nodeGroups:\n    md0:\n      minReplicas: 1\n      maxReplicas: 1\n      instanceType: u1.medium\n"),
    )
    .ok();
    root.run(&[
        "wait",
        "--for=condition=Ready",
        "tenantcluster/team-x",
        "-n",
        "tenant-foo",
        "--timeout=120s",
    ])
    .ok();
    let lc = jsonpath(
        &root,
        &["get", "logicalclusters"],
        "{.items[?(@.spec.dataStore==\"tenant-foo\")].metadata.name}",
    );
    assert!(
        !lc.is_empty() && !lc.contains(' '),
        "one cluster bound: {lc:?}"
    );
    let team = support::tenant_cluster_kubectl(&root, server.dir.as_path(), "tenant-foo", "team-x");
    team.run(&["create", "configmap", "hello", "--from-literal=x=1"])
        .ok();
    team.eventually(&["get", "nodes"], Duration::from_secs(60), |r| {
        r.rows().iter().any(|n| n[1] == "Ready")
    });

    // Read both etcds directly: the cluster's keys are in the tenant's etcd only.
    let (endpoint, tls) = managed_etcd(&root, "tenant-foo");
    let ours = etcd_keys(&rt, &endpoint, Some(&tls), &format!("/registry/{lc}/"));
    for want in [
        format!("/registry/{lc}/core/configmaps/default/hello"),
        format!("/registry/{lc}/core/namespaces/kube-system"),
    ] {
        assert!(
            ours.contains(&want),
            "{want} is not in the tenant's etcd: {ours:#?}"
        );
    }
    assert!(ours.iter().any(|k| k.contains("/core/nodes/")), "{ours:#?}");
    let leaked = etcd_keys(
        &rt,
        &shared.endpoint,
        None,
        &format!("{shared_prefix}/registry/{lc}/"),
    );
    assert!(
        leaked.is_empty(),
        "keys of the cluster in the shared store: {leaked:#?}"
    );

    // The tenant's cluster goes, then its etcd when the tenant stops asking for one: the
    // DataStore, the process, its data and credentials.
    root.run(&[
        "delete",
        "tenantcluster",
        "team-x",
        "-n",
        "tenant-foo",
        "--timeout=90s",
    ])
    .ok();
    root.run(&[
        "patch",
        "tenant",
        "foo",
        "-n",
        "tenant-root",
        "--type=merge",
        "-p",
        "{\"spec\":{\"etcd\":false}}",
    ])
    .ok();
    root.eventually(
        &["get", "datastore", "tenant-foo"],
        Duration::from_secs(60),
        |r| r.code != 0 && r.stderr.contains("NotFound"),
    );
    root.eventually(
        &[
            "get",
            "secret",
            "-n",
            "matryoshka-system",
            "datastore-tenant-foo",
        ],
        Duration::from_secs(30),
        |r| r.code != 0,
    );
    assert!(processes(&datastore_dir.join("data").display().to_string()).is_empty());
    assert!(!datastore_dir.exists());
}
