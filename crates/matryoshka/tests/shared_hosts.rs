//! A shared-node tenant cluster whose host is another Kubernetes cluster, named by a
//! kubeconfig Secret (`spec.workers.hostCluster`): the syncer is only that cluster's API
//! client. Here the host is a logical cluster of the same platform with two virtual nodes of
//! its own (pods "run" at once), reached over HTTPS with its own admin kubeconfig, as any
//! other cluster would be.

mod support;

use std::time::Duration;

use support::{Agent, Backend, Kubectl, Server, logical_cluster};

const WAIT: Duration = Duration::from_secs(60);

/// A Service without a selector and its hand-made endpoints (documentation addresses, never
/// dialled).
const EXTERNAL: &str = "apiVersion: v1
kind: Service
metadata: {name: ext}
spec:
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: ext}
subsets:
- addresses: [{ip: 192.0.2.10}]
  ports: [{port: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ext-1
  labels: {kubernetes.io/service-name: ext}
addressType: IPv4
endpoints:
- addresses: [192.0.2.11]
ports: [{port: 8080}]
";

const CLAIM_AND_POD: &str = "apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: db}
spec:
  containers:
  - {name: main, image: busybox:1.35, volumeMounts: [{name: data, mountPath: /data}]}
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: data}}
";

fn guest(name: &str, host_cluster: &str) -> String {
    format!(
        "apiVersion: platform.matryoshka.dev/v1alpha1
kind: TenantCluster
metadata:
  name: {name}
  namespace: tenant-root
spec:
  workers:
    mode: shared
    hostCluster: {host_cluster}
"
    )
}

#[test]
fn a_shared_cluster_runs_its_pods_on_another_cluster_named_by_a_kubeconfig_secret() {
    let server = Server::start(Backend::Embedded);
    let k = server.kubectl("1.33");
    // The host: a cluster of its own with two nodes.
    let far_conf = logical_cluster(&k, &server.dir, "farhost");
    let _nodes = Agent::start(
        &far_conf,
        &["--count", "2", "--name-prefix", "far-"],
        &server.dir.join("far-nodes.log"),
    );
    let far = Kubectl::new("1.33", &far_conf);
    far.eventually(&["get", "nodes"], WAIT, |r| {
        r.rows().iter().filter(|n| n[1] == "Ready").count() == 2
    });
    k.run(&[
        "create",
        "secret",
        "generic",
        "far-host",
        "-n",
        "tenant-root",
        &format!("--from-file=config={}", far_conf.display()),
    ])
    .ok();

    // What cannot be taken is refused before anything is made.
    k.run_stdin(
        &["apply", "-f", "-"],
        Some(&guest("sneaky", "{namespace: tenant-other}")),
    )
    .fails(1)
    .err("namespace is taken only with kubeconfigSecretRef");

    k.run_stdin(
        &["apply", "-f", "-"],
        Some(&guest(
            "guest",
            "{kubeconfigSecretRef: {name: far-host, key: config}, namespace: guests}",
        )),
    )
    .ok();
    k.eventually(
        &[
            "get",
            "tenantcluster",
            "guest",
            "-n",
            "tenant-root",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status} {.status.workers.hostNamespace} {.status.workers.hostCluster}",
        ],
        WAIT,
        |r| r.stdout == "True guests secret/far-host",
    );
    // The hostCluster field cannot change under a running cluster.
    k.run(&[
        "patch",
        "tenantcluster",
        "guest",
        "-n",
        "tenant-root",
        "--type=merge",
        "-p",
        r#"{"spec":{"workers":{"hostCluster":{"namespace":"elsewhere"}}}}"#,
    ])
    .fails(1)
    .err("hostCluster is immutable");
    let t = support::tenant_cluster_kubectl(&k, &server.dir, "tenant-root", "guest");

    // The host's nodes are the tenant's nodes.
    t.eventually(&["get", "nodes", "-o", "name"], WAIT, |r| {
        r.stdout
            .lines()
            .filter(|l| l.starts_with("node/far-"))
            .count()
            == 2
    });
    // A Deployment and a Service: the pods run on the far host, in its namespace guests
    // (made by the syncer), under translated names, and are Running in the tenant.
    t.run(&[
        "create",
        "deployment",
        "web",
        "--image=busybox:1.35",
        "--replicas=2",
    ])
    .ok();
    t.run(&["expose", "deployment", "web", "--port=80"]).ok();
    t.eventually(
        &[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={range .items[*]}{.status.phase} {.spec.nodeName}{\"\\n\"}{end}",
        ],
        WAIT,
        |r| {
            let lines: Vec<&str> = r.stdout.lines().collect();
            lines.len() == 2 && lines.iter().all(|l| l.starts_with("Running far-"))
        },
    );
    let host_pods = far
        .run(&[
            "get",
            "pods",
            "-n",
            "guests",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.metadata.ownerReferences} {.metadata.labels.vcluster\\.loft\\.sh/managed-by}{\"\\n\"}{end}",
        ])
        .ok()
        .stdout
        .clone();
    let web: Vec<&str> = host_pods
        .lines()
        .filter(|l| l.starts_with("web-"))
        .collect();
    assert_eq!(web.len(), 2, "{host_pods}");
    for l in &web {
        let f: Vec<&str> = l.split(' ').collect();
        assert!(f[0].ends_with("-x-default-x-guest"), "{l}");
        // Another cluster's garbage collector would take an owner it cannot find.
        assert_eq!(f[1], "", "no owner on another host: {l}");
        assert_eq!(f[2], "guest", "{l}");
    }
    // The tenant Service has the far host's cluster IP.
    let host_ip = far
        .eventually(
            &[
                "get",
                "service",
                "-n",
                "guests",
                "web-x-default-x-guest",
                "-o",
                "jsonpath={.spec.clusterIP}",
            ],
            WAIT,
            |r| r.code == 0 && !r.stdout.is_empty(),
        )
        .stdout
        .clone();
    t.eventually(
        &["get", "service", "web", "-o", "jsonpath={.spec.clusterIP}"],
        WAIT,
        |r| r.stdout == host_ip,
    );
    // A Service without a selector: the endpoints the tenant writes by hand (an Endpoints
    // object, an EndpointSlice) become the host Service's EndpointSlices — the Endpoints
    // outliving the Service's re-creation with the host's IP (the endpoints controller
    // deletes a deleted Service's Endpoints; the syncer puts them back).
    t.run_stdin(&["apply", "-f", "-"], Some(EXTERNAL)).ok();
    let slices = |want: &str| {
        far.eventually(
            &[
                "get",
                "endpointslices",
                "-n",
                "guests",
                "-l",
                "kubernetes.io/service-name=ext-x-default-x-guest",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name}={.endpoints[*].addresses[*]}:{.ports[*].port};{end}",
            ],
            WAIT,
            |r| r.stdout == want,
        )
    };
    slices("ext-1-x-default-x-guest=192.0.2.11:8080;ext-x-default-x-guest-0=192.0.2.10:8080;");
    t.run(&["delete", "endpointslice", "ext-1"]).ok();
    slices("ext-x-default-x-guest-0=192.0.2.10:8080;");
    t.run(&["delete", "service", "ext"]).ok();
    slices("");

    // The far host's StorageClasses are the tenant's: a claim is made there, provisioned
    // by the far host for the node its pod runs on, and the tenant claim is bound to a
    // stand-in of the host's volume.
    t.eventually(
        &[
            "get",
            "storageclass",
            "local",
            "-o",
            "jsonpath={.metadata.annotations.syncer\\.matryoshka\\.dev/from-host} {.provisioner}",
        ],
        WAIT,
        |r| r.stdout == "true matryoshka.dev/local",
    );
    t.run_stdin(&["apply", "-f", "-"], Some(CLAIM_AND_POD)).ok();
    let host_claim = far
        .eventually(
            &[
                "get",
                "pvc",
                "-n",
                "guests",
                "data-x-default-x-guest",
                "-o",
                "jsonpath={.status.phase} {.spec.volumeName} {.spec.storageClassName}",
            ],
            WAIT,
            |r| r.stdout.starts_with("Bound "),
        )
        .stdout
        .clone();
    let fields: Vec<&str> = host_claim.split(' ').collect();
    assert_eq!(fields[2], "local", "{host_claim}");
    let volume = fields[1].to_string();
    t.eventually(
        &[
            "get",
            "pvc",
            "data",
            "-o",
            "jsonpath={.status.phase} {.spec.volumeName} {.spec.storageClassName}",
        ],
        WAIT,
        |r| r.stdout == format!("Bound {volume} local"),
    );
    t.run(&[
        "get",
        "pv",
        &volume,
        "-o",
        "jsonpath={.spec.csi.driver} {.spec.claimRef.name}",
    ])
    .ok()
    .out("syncer.matryoshka.dev data");
    t.eventually(
        &["get", "pod", "db", "-o", "jsonpath={.status.phase}"],
        WAIT,
        |r| r.stdout == "Running",
    );
    // Deleting the tenant claim (once no pod uses it) deletes the host's.
    t.run(&["delete", "pod", "db", "--wait=true"]).ok();
    t.run(&["delete", "pvc", "data", "--wait=true", "--timeout=60s"])
        .ok();
    far.eventually(&["get", "pvc", "-n", "guests", "-o", "name"], WAIT, |r| {
        r.code == 0 && r.stdout.trim().is_empty()
    });

    // A host pod deleted by hand there is replaced through the tenant's Deployment.
    let victim = web[0].split(' ').next().expect("name").to_string();
    far.run(&["delete", "pod", "-n", "guests", &victim, "--wait=true"])
        .ok();
    t.eventually(
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ],
        WAIT,
        |r| r.stdout == "2",
    );
    far.eventually(&["get", "pods", "-n", "guests", "-o", "name"], WAIT, |r| {
        r.stdout.lines().filter(|l| l.contains("web-")).count() == 2 && !r.stdout.contains(&victim)
    });

    // A kubeconfig that would run a command on the platform is refused, and the
    // TenantCluster says so.
    let evil = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/touch\n      args: [/tmp/matryoshka-pwned]\n";
    let evil_file = server.dir.join("evil.conf");
    std::fs::write(&evil_file, evil).expect("write");
    k.run(&[
        "create",
        "secret",
        "generic",
        "evil-host",
        "-n",
        "tenant-root",
        &format!("--from-file=value={}", evil_file.display()),
    ])
    .ok();
    k.run_stdin(
        &["apply", "-f", "-"],
        Some(&guest("evil", "{kubeconfigSecretRef: {name: evil-host}}")),
    )
    .ok();
    k.eventually(
        &[
            "get",
            "events",
            "-n",
            "tenant-root",
            "--field-selector",
            "involvedObject.name=evil,reason=HostNotConnected",
            "-o",
            "jsonpath={.items[*].message}",
        ],
        WAIT,
        |r| r.stdout.contains("exec is not taken"),
    );
    assert!(
        !std::path::Path::new("/tmp/matryoshka-pwned").exists(),
        "the kubeconfig's command never runs"
    );
    k.run(&[
        "delete",
        "tenantcluster",
        "evil",
        "-n",
        "tenant-root",
        "--wait=true",
        "--timeout=60s",
    ])
    .ok();

    // Deleting the TenantCluster deletes what the syncer made on the far host.
    k.run(&[
        "delete",
        "tenantcluster",
        "guest",
        "-n",
        "tenant-root",
        "--wait=true",
        "--timeout=60s",
    ])
    .ok();
    for kind in ["pods", "services", "networkpolicies"] {
        far.eventually(&["get", kind, "-n", "guests", "-o", "name"], WAIT, |r| {
            r.code == 0 && r.stdout.trim().is_empty()
        });
    }
}

/// A pod asking for most of a one-core node.
fn big_pod(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers:
  - {{name: main, image: busybox:1.35, resources: {{requests: {{cpu: 600m}}}}}}
{extra}"
    )
}

/// A host pod's handed-in service-account tokens and when they are minted again.
fn host_tokens(k: &Kubectl, pod: &str) -> (Vec<String>, i64) {
    let r = k
        .run(&["get", "pod", "-n", "tenant-root", pod, "-o", "json"])
        .ok()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_str(&r).expect("a pod");
    let ann = v["metadata"]["annotations"]
        .as_object()
        .expect("annotations");
    let tokens = ann
        .iter()
        .filter(|(k, _)| k.starts_with("vcluster.loft.sh/token-"))
        .map(|(_, v)| v.as_str().unwrap_or_default().to_string())
        .collect();
    let at = ann
        .get("syncer.matryoshka.dev/tokens-refresh-at")
        .and_then(|a| a.as_str()?.parse().ok())
        .unwrap_or(0);
    (tokens, at)
}

#[test]
fn the_hosts_scheduler_places_shared_clusters_pods_with_every_clusters_pods_counted() {
    // Tokens live 6 s here, so the syncer mints its pods' tokens again every ~5 s.
    let server = Server::start_with(
        Backend::Embedded,
        &["--service-account-max-token-expiration-seconds", "6"],
    );
    let k = server.kubectl("1.33");
    // The host (the root cluster) has two one-core nodes; one is tainted for infra.
    let _nodes = Agent::start(
        &server.dir.join("admin.conf"),
        &[
            "--count",
            "2",
            "--name-prefix",
            "small-",
            "--instance-type",
            "u1.small",
        ],
        &server.dir.join("small-nodes.log"),
    );
    k.eventually(&["get", "nodes"], WAIT, |r| {
        r.rows().iter().filter(|n| n[1] == "Ready").count() == 2
    });
    k.run(&["taint", "node", "small-1", "dedicated=infra:NoSchedule"])
        .ok();
    for name in ["alpha", "beta"] {
        k.run_stdin(&["apply", "-f", "-"], Some(&guest(name, "{}")))
            .ok();
    }
    let alpha = support::tenant_cluster_kubectl(&k, &server.dir, "tenant-root", "alpha");
    let beta = support::tenant_cluster_kubectl(&k, &server.dir, "tenant-root", "beta");
    // A shared cluster's workers mode is what it was made with.
    k.run(&[
        "patch",
        "tenantcluster",
        "alpha",
        "-n",
        "tenant-root",
        "--type=merge",
        "-p",
        r#"{"spec":{"workers":{"mode":"machines"}}}"#,
    ])
    .fails(1)
    .err("mode is immutable");
    let placed = |t: &Kubectl, pod: &str, want: &str| {
        t.eventually(
            &[
                "get",
                "pod",
                pod,
                "-o",
                "jsonpath={.status.phase} {.spec.nodeName}",
            ],
            WAIT,
            |r| r.stdout == want,
        );
    };
    // alpha's pod takes the untainted node (the host's scheduler honours the taint).
    alpha
        .run_stdin(&["apply", "-f", "-"], Some(&big_pod("big", "")))
        .ok();
    placed(&alpha, "big", "Running small-0");
    // beta's pod fits nowhere: the room on small-0 is alpha's, which beta cannot see. The
    // host's scheduler says why, in the tenant pod's condition.
    beta.run_stdin(&["apply", "-f", "-"], Some(&big_pod("big", "")))
        .ok();
    let why = beta
        .eventually(
            &[
                "get",
                "pod",
                "big",
                "-o",
                "jsonpath={.status.phase} {.status.conditions[?(@.type==\"PodScheduled\")].reason}|{.status.conditions[?(@.type==\"PodScheduled\")].message}|{.spec.nodeName}",
            ],
            WAIT,
            |r| r.stdout.starts_with("Pending Unschedulable|"),
        )
        .stdout
        .clone();
    assert!(why.contains("Insufficient cpu"), "{why}");
    assert!(why.contains("untolerated taint"), "{why}");
    assert!(why.ends_with('|'), "not bound while unplaced: {why}");
    // A pod tolerating the taint may go to the infra node.
    beta.run_stdin(
        &["apply", "-f", "-"],
        Some(&big_pod(
            "tolerant",
            "  tolerations: [{key: dedicated, operator: Equal, value: infra, effect: NoSchedule}]\n  nodeSelector: {kubernetes.io/hostname: small-1}\n",
        )),
    )
    .ok();
    placed(&beta, "tolerant", "Running small-1");
    // Once alpha's pod is gone its room is beta's.
    alpha.run(&["delete", "pod", "big", "--wait=true"]).ok();
    placed(&beta, "big", "Running small-0");

    // The service-account token handed to a host pod is minted again before it expires.
    let host_pod = "tolerant-x-default-x-beta";
    let (first, at) = host_tokens(&k, host_pod);
    assert_eq!(first.len(), 1, "the pod's projected token");
    assert!(at > 0, "a refresh time");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (now, next) = host_tokens(&k, host_pod);
        if now != first {
            assert!(next > at, "the next refresh is later: {next} after {at}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the token was not minted again"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
