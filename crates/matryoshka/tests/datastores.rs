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

/// Creates DataStore `etcd-a` (prefix `/tenants/a`) for the etcd `dedicated`, its TLS material
/// in Secret `matryoshka-system/etcd-a-tls`, and waits until it is ready.
fn create_datastore(root: &Kubectl, dedicated: &EtcdServer, tls: &Tls) {
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
}

fn rv(k: &Kubectl, args: &[&str]) -> u64 {
    let v = jsonpath(k, args, "{.metadata.resourceVersion}");
    v.parse()
        .unwrap_or_else(|_| panic!("a resourceVersion: {v:?}"))
}

/// Waits until `cluster`'s move into `datastore` is done.
fn moved(root: &Kubectl, cluster: &str, datastore: &str) {
    root.eventually(
        &[
            "get",
            "logicalcluster",
            cluster,
            "-o",
            "jsonpath={.spec.dataStore}",
        ],
        Duration::from_secs(60),
        |r| r.stdout.trim() == datastore,
    );
}

/// The resourceVersion of a list at `path`.
fn list_rv(k: &Kubectl, path: &str) -> u64 {
    let raw = k.run(&["get", "--raw", path]).ok().stdout.clone();
    let v: serde_json::Value = serde_json::from_str(&raw).unwrap();
    v["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a list resourceVersion: {raw}"))
}

#[test]
fn a_cluster_moves_into_a_datastore_with_its_objects_and_resource_versions_that_only_grow() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let shared = rt.block_on(EtcdServer::start());
    let tls = tls_material();
    let dedicated = rt.block_on(EtcdServer::start_tls(&tls));
    let server = Server::start(Backend::Etcd(shared.endpoint.clone()));
    let shared_prefix = format!("/m{}", server.port);
    let root = server.kubectl("1.33");
    let dir = tempfile::tempdir().unwrap();
    create_datastore(&root, &dedicated, &tls);

    // A cluster in the shared store, with objects and a resourceVersion its clients saw.
    let k = Kubectl::new(
        "1.33",
        &support::logical_cluster(&root, dir.path(), "mover"),
    );
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
    let before = rv(&k, &["get", "cm", "settings", "-n", "app"]);
    let list_before = list_rv(&k, "/clusters/mover/api/v1/namespaces/app/configmaps");
    let uid = jsonpath(
        &k,
        &["get", "cm", "settings", "-n", "app"],
        "{.metadata.uid}",
    );
    let raw = "/apis/core.matryoshka.dev/v1alpha1/logicalclusters/mover/move";

    // Only the move marks a cluster as moving.
    root.run(&[
        "annotate",
        "logicalcluster",
        "mover",
        "core.matryoshka.dev/moving-to=etcd-a",
    ])
    .fails(1)
    .err("set by the cluster's move subresource only");
    // A move to where the keys are, or to nowhere, is refused.
    root.run_stdin(
        &["create", "--raw", raw, "-f", "-"],
        Some("{\"dataStore\":\"\"}"),
    )
    .fails(1);
    root.run_stdin(
        &["create", "--raw", raw, "-f", "-"],
        Some("{\"dataStore\":\"nope\"}"),
    )
    .fails(1);

    // A watch open across the move.
    let mut watch = k.spawn(&["get", "cm", "-n", "app", "--watch", "-o", "json"]);

    // The move; a write made meanwhile waits for it (429 + Retry-After, which kubectl follows).
    root.run_stdin(
        &["create", "--raw", raw, "-f", "-"],
        Some("{\"dataStore\":\"etcd-a\"}"),
    )
    .ok();
    // kubectl follows up to ten Retry-Afters; on a loaded machine the move may take longer,
    // and then the write is simply made again (it never landed: AlreadyExists only if it did).
    k.eventually(
        &[
            "create",
            "configmap",
            "during",
            "-n",
            "app",
            "--from-literal=x=1",
        ],
        Duration::from_secs(60),
        |r| r.code == 0 || r.stderr.contains("AlreadyExists"),
    );
    moved(&root, "mover", "etcd-a");
    assert!(
        jsonpath(
            &root,
            &["get", "logicalcluster", "mover"],
            "{.metadata.annotations}"
        )
        .find("moving-to")
        .is_none()
    );

    // The watch from before the move ended with 410 Gone (a client-go informer lists again).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while watch.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the watch from before the move is still open"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut stderr = String::new();
    std::io::Read::read_to_string(watch.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    let mut stdout = String::new();
    std::io::Read::read_to_string(watch.stdout.as_mut().unwrap(), &mut stdout).unwrap();
    // kubectl prints the ERROR event's Status and ends.
    assert!(
        stdout.contains("\"code\": 410") && stdout.contains("moved to another datastore"),
        "stdout: {stdout}\nstderr: {stderr}"
    );

    // The objects are there, the same ones, and every resourceVersion is above the old ones.
    assert_eq!(
        jsonpath(&k, &["get", "cm", "settings", "-n", "app"], "{.data.a}"),
        "2"
    );
    assert_eq!(
        jsonpath(
            &k,
            &["get", "cm", "settings", "-n", "app"],
            "{.metadata.uid}"
        ),
        uid
    );
    k.run(&["get", "cm", "during", "-n", "app"]).ok();
    let list_after = list_rv(&k, "/clusters/mover/api/v1/namespaces/app/configmaps");
    assert!(list_after > list_before, "{list_before} then {list_after}");
    k.run(&[
        "patch",
        "cm",
        "settings",
        "-n",
        "app",
        "-p",
        "{\"data\":{\"a\":\"3\"}}",
    ])
    .ok();
    let after = rv(&k, &["get", "cm", "settings", "-n", "app"]);
    assert!(
        after > before && after > list_after,
        "{before} then {after}"
    );

    // Its keys are in the datastore now, and leave the shared store.
    let ours = etcd_keys(
        &rt,
        &dedicated.endpoint,
        Some(&tls),
        "/tenants/a/registry/mover/",
    );
    for want in ["core/configmaps/app/settings", "core/configmaps/app/during"] {
        assert!(
            ours.contains(&format!("/tenants/a/registry/mover/{want}")),
            "{want}: {ours:#?}"
        );
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left = etcd_keys(
            &rt,
            &shared.endpoint,
            None,
            &format!("{shared_prefix}/registry/mover/"),
        );
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "left in the shared store: {left:#?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Moving back would make its resourceVersions go backwards: refused.
    root.run_stdin(
        &["create", "--raw", raw, "-f", "-"],
        Some("{\"dataStore\":\"\"}"),
    )
    .fails(1)
    .err("would go backwards");

    // On into a second datastore (a plain etcd, created later): between two datastores too.
    let second = rt.block_on(EtcdServer::start());
    root.run_stdin(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: core.matryoshka.dev/v1alpha1\nkind: DataStore\nmetadata:\n  name: etcd-b\nspec:\n  driver: etcd\n  endpoints: [\"{}\"]\n",
            second.endpoint.trim_start_matches("http://")
        )),
    )
    .ok();
    root.run(&[
        "wait",
        "--for=jsonpath={.status.ready}=true",
        "datastore/etcd-b",
        "--timeout=30s",
    ])
    .ok();
    root.run_stdin(
        &["create", "--raw", raw, "-f", "-"],
        Some("{\"dataStore\":\"etcd-b\"}"),
    )
    .ok();
    moved(&root, "mover", "etcd-b");
    assert_eq!(
        jsonpath(&k, &["get", "cm", "settings", "-n", "app"], "{.data.a}"),
        "3"
    );
    let moved_again = rv(&k, &["get", "cm", "settings", "-n", "app"]);
    assert!(moved_again > after, "{after} then {moved_again}");
    let theirs = etcd_keys(&rt, &second.endpoint, None, "/registry/mover/");
    assert!(
        theirs.contains(&"/registry/mover/core/configmaps/app/during".to_string()),
        "{theirs:#?}"
    );
    root.eventually(
        &[
            "get",
            "datastore",
            "etcd-a",
            "-o",
            "jsonpath={.status.usedBy}",
        ],
        Duration::from_secs(30),
        |r| !r.stdout.contains("mover"),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !etcd_keys(
        &rt,
        &dedicated.endpoint,
        Some(&tls),
        "/tenants/a/registry/mover/",
    )
    .is_empty()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "keys left in the first datastore"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    root.run(&["delete", "logicalcluster", "mover", "--timeout=60s"])
        .ok();
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
    create_datastore(&root, &dedicated, &tls);
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
