//! The platform end to end, as an operator uses it with kubectl from the root admin
//! kubeconfig: a tree of tenants, a TenantCluster with a node group, its admin kubeconfig from
//! the seed's own command, workloads inside it, access along the tenant tree, validation, and
//! deletion that leaves nothing behind.

mod support;

use std::time::Duration;

use support::{Backend, Kubectl, Server};

const TENANT_FOO: &str = "apiVersion: platform.matryoshka.dev/v1alpha1\nkind: Tenant\nmetadata:\n  name: foo\n  namespace: tenant-root\nspec: {}\n";
const TENANT_BAR: &str = "apiVersion: platform.matryoshka.dev/v1alpha1\nkind: Tenant\nmetadata:\n  name: bar\n  namespace: tenant-foo\nspec: {}\n";

fn tenant_cluster(name: &str, ns: &str, spec: &str) -> String {
    format!(
        "apiVersion: platform.matryoshka.dev/v1alpha1\nkind: TenantCluster\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n{spec}"
    )
}

const TEAM_X: &str = "  version: v1.33\n  nodeGroups:\n    md0:\n      minReplicas: 2\n      maxReplicas: 3\n      instanceType: u1.medium\n";

#[test]
fn an_operator_gets_a_working_tenant_cluster_from_a_manifest() {
    let server = Server::with_cluster_api(Backend::Embedded);
    let k = server.kubectl("1.33");
    k.run(&["get", "namespace", "tenant-root"]).ok();
    k.run(&["explain", "tenantclusters.spec.nodeGroups"])
        .ok()
        .out("minReplicas");

    // The tenant tree.
    k.run_stdin(&["apply", "-f", "-"], Some(TENANT_FOO)).ok();
    k.eventually(
        &["get", "namespace", "tenant-foo"],
        Duration::from_secs(30),
        |r| r.code == 0,
    );
    k.run_stdin(&["apply", "-f", "-"], Some(TENANT_BAR)).ok();
    k.eventually(
        &["get", "namespace", "tenant-foo-bar"],
        Duration::from_secs(30),
        |r| r.code == 0,
    );

    // A tenant cluster with two u1.medium workers.
    k.run_stdin(
        &["apply", "-f", "-"],
        Some(&tenant_cluster("team-x", "tenant-foo", TEAM_X)),
    )
    .ok();
    k.run(&[
        "wait",
        "--for=condition=Ready",
        "tenantcluster/team-x",
        "-n",
        "tenant-foo",
        "--timeout=90s",
    ])
    .ok();
    k.run(&["get", "tenantcluster", "team-x", "-n", "tenant-foo"])
        .ok()
        .out("v1.33")
        .out("2/2");
    let conf = k.run(&[
        "get",
        "secret",
        "-n",
        "tenant-foo",
        "kubernetes-team-x-admin-kubeconfig",
        "-o",
        "go-template={{ printf \"%s\\n\" (index .data \"admin.conf\" | base64decode) }}",
    ]);
    conf.ok();
    let path = server.dir.join("admin.conf.team-x");
    std::fs::write(&path, &conf.stdout).expect("write kubeconfig");
    let team = Kubectl::new("1.33", &path);
    team.eventually(&["get", "nodes"], Duration::from_secs(60), |r| {
        r.rows().iter().filter(|n| n[1] == "Ready").count() == 2
    });
    // The cluster at its own hostname (TLS SNI, a certificate for that name), under its
    // tenant's host; and the in-cluster Service `admin.svc` names.
    let host = k
        .run(&[
            "get",
            "tenantcluster",
            "team-x",
            "-n",
            "tenant-foo",
            "-o",
            "jsonpath={.status.host}",
        ])
        .ok()
        .stdout
        .clone();
    assert_eq!(host, "kubernetes-team-x.foo.matryoshka.local");
    let at = format!("https://127.0.0.1:{}", server.port);
    team.eventually(
        &["--server", &at, "--tls-server-name", &host, "get", "nodes"],
        Duration::from_secs(30),
        |r| r.code == 0 && r.rows().len() == 2,
    );
    team.run(&[
        "--server",
        &at,
        "--tls-server-name",
        "kubernetes-nope.foo.matryoshka.local",
        "get",
        "nodes",
    ])
    .fails(1)
    .err("x509");
    k.run(&[
        "get",
        "svc",
        "kubernetes-team-x",
        "-n",
        "tenant-foo",
        "-o",
        "jsonpath={.spec.ports[0].port}",
    ])
    .ok()
    .out("6443");
    // An in-cluster client of the tenant cluster knows only the shared endpoint (its
    // `kubernetes` Service leads there) and its token: it is served its own cluster.
    team.run(&["create", "serviceaccount", "robot"]).ok();
    let token = team
        .run(&["create", "token", "robot"])
        .ok()
        .stdout
        .trim()
        .to_string();
    let empty = server.dir.join("empty.conf");
    std::fs::write(&empty, "apiVersion: v1\nkind: Config\n").expect("write kubeconfig");
    let bare = Kubectl::new("1.33", &empty);
    bare.run(&[
        "--server",
        &at,
        "--insecure-skip-tls-verify",
        "--token",
        &token,
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ])
    .ok()
    .out("system:serviceaccount:default:robot");
    // A token naming the cluster but not signed by it gains nothing.
    let mut forged = token.clone().into_bytes();
    let at_sig = forged.len() - 10;
    forged[at_sig] = if forged[at_sig] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).expect("ascii");
    bare.run(&[
        "--server",
        &at,
        "--insecure-skip-tls-verify",
        "--token",
        &forged,
        "auth",
        "whoami",
    ])
    .fails(1)
    .err("Unauthorized");
    let alloc = team
        .run(&["get", "nodes", "-o", "jsonpath={range .items[*]}{.status.allocatable.memory} {.status.allocatable.cpu}{\"\\n\"}{end}"])
        .ok()
        .stdout
        .clone();
    assert_eq!(
        alloc.lines().collect::<Vec<_>>(),
        ["3297Mi 900m", "3297Mi 900m"]
    );
    // The workers as Cluster API tooling sees them in the tenant namespace.
    k.eventually(
        &["get", "machinedeployments", "-n", "tenant-foo"],
        Duration::from_secs(30),
        |r| {
            r.rows().first().is_some_and(|row| {
                row[0] == "kubernetes-team-x-md0"
                    && row[1] == "kubernetes-team-x"
                    && row[2] == "True"
                    && row[3..8] == ["2", "2", "2", "2", "2"]
                    && row[8] == "Running"
                    && row[10] == "v1.33.13"
            })
        },
    );
    k.run(&["get", "machinesets", "-n", "tenant-foo"])
        .ok()
        .out("kubernetes-team-x-md0-");
    let machines = k
        .run(&["get", "machines", "-n", "tenant-foo", "-o", "jsonpath={range .items[*]}{.status.phase} {.status.nodeRef.name} {.spec.providerID}{\"\\n\"}{end}"])
        .ok()
        .stdout
        .clone();
    let lines: Vec<&str> = machines.lines().collect();
    assert_eq!(lines.len(), 2, "{machines}");
    for l in &lines {
        let f: Vec<&str> = l.split(' ').collect();
        assert_eq!(f[0], "Running", "{l}");
        assert!(f[1].starts_with("kubernetes-team-x-md0-"), "{l}");
        assert_eq!(
            f[2],
            format!("virtual://{}", f[1]),
            "the node is the machine's: {l}"
        );
    }
    k.run(&[
        "get",
        "machinehealthchecks",
        "-n",
        "tenant-foo",
        "kubernetes-team-x-md0",
        "-o",
        "jsonpath={.status.expectedMachines}/{.status.currentHealthy}",
    ])
    .ok()
    .out("2/2");
    team.run(&["version", "-o", "json"])
        .ok()
        .out("\"gitVersion\": \"v1.33.");
    team.run(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=2",
    ])
    .ok();
    team.run(&["rollout", "status", "deployment/web", "--timeout=90s"])
        .ok();
    // Tenant workloads never appear in the management cluster.
    k.run(&["get", "deployments", "-A"]).ok().not_out("web");

    // Access along the tree: foo's admins manage clusters in foo and below, nowhere else.
    let as_admin = |ns: &str| {
        k.run_stdin(
            &[
                "create",
                "--as=alice",
                "--as-group=tenant-foo-admin",
                "--dry-run=server",
                "-f",
                "-",
            ],
            Some(&tenant_cluster("probe", ns, "  version: v1.33\n")),
        )
    };
    as_admin("tenant-foo").ok();
    as_admin("tenant-foo-bar").ok();
    as_admin("tenant-root").fails(1).err("forbidden");

    // Validation with the list of allowed versions.
    k.run_stdin(
        &["apply", "-f", "-"],
        Some(&tenant_cluster("old", "tenant-foo", "  version: v1.20\n")),
    )
    .fails(1)
    .err("allowed versions are v1.35, v1.34, v1.33, v1.32, v1.31");
    k.run_stdin(
        &["apply", "-f", "-"],
        Some(&tenant_cluster(
            "disk",
            "tenant-foo",
            "  nodeGroups:\n    md0:\n      ephemeralStorage: 20Gi\n",
        )),
    )
    .fails(1)
    .err("diskSize");

    // Deleting leaves no Secret and no logical cluster.
    k.run(&[
        "delete",
        "tenantcluster",
        "team-x",
        "-n",
        "tenant-foo",
        "--timeout=90s",
    ])
    .ok();
    k.run(&[
        "get",
        "secret",
        "-n",
        "tenant-foo",
        "kubernetes-team-x-admin-kubeconfig",
    ])
    .fails(1)
    .err("NotFound");
    k.eventually(
        &["get", "logicalclusters", "-o", "name"],
        Duration::from_secs(30),
        |r| r.code == 0 && !r.stdout.contains("team-x"),
    );
    team.run(&["get", "nodes"]).fails(1);
    k.run(&[
        "get",
        "machines,machinesets,machinedeployments,clusters.cluster.x-k8s.io",
        "-n",
        "tenant-foo",
        "-o",
        "name",
    ])
    .ok()
    .not_out("team-x");
}

/// A UsageReport named `name` in `ns` over `[from, to)`, with `extra` query lines.
fn report(name: &str, ns: &str, from: &str, to: &str, extra: &str) -> String {
    format!(
        "apiVersion: platform.matryoshka.dev/v1alpha1\nkind: UsageReport\nmetadata:\n  name: {name}\n  namespace: {ns}\nquery:\n  startTimestamp: \"{from}\"\n  endTimestamp: \"{to}\"\n{extra}"
    )
}

/// Each machine's vCPU- and memory-hours in a report created from `manifest`.
fn machine_hours(k: &Kubectl, manifest: &str) -> Vec<(String, f64, f64)> {
    let out = k
        .run_stdin(
            &["create", "-f", "-", "-o", "jsonpath={range .report.consumers[*]}{.kind} {.name} {.consumptions.vCPUHours} {.consumptions.MemoryGiBHours}{\"\\n\"}{end}"],
            Some(manifest),
        )
        .ok()
        .stdout
        .clone();
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.len() == 4 && f[0] == "MatryoshkaMachine").then(|| {
                (
                    f[1].to_string(),
                    f[2].parse().expect("a decimal"),
                    f[3].parse().expect("a decimal"),
                )
            })
        })
        .collect()
}

fn rfc3339(t: k8s_openapi::jiff::Timestamp) -> String {
    apimachinery::time::format_time(t)
}

#[test]
fn a_tenants_usage_is_reported_through_kubectl_and_survives_a_restart() {
    let mut server = Server::with_cluster_api(Backend::Embedded);
    let k = server.kubectl("1.33");
    k.run_stdin(&["apply", "-f", "-"], Some(TENANT_FOO)).ok();
    k.eventually(
        &["get", "namespace", "tenant-foo"],
        Duration::from_secs(30),
        |r| r.code == 0,
    );
    k.run_stdin(
        &["apply", "-f", "-"],
        Some(&tenant_cluster("metered", "tenant-foo", TEAM_X)),
    )
    .ok();
    k.eventually(
        &[
            "get",
            "usagerecords",
            "-l",
            "platform.matryoshka.dev/tenant=tenant-foo",
        ],
        Duration::from_secs(60),
        |r| {
            let rows = r.rows();
            rows.len() == 2
                && rows.iter().all(|row| {
                    row[1] == "tenant-foo"
                        && row[2] == "metered"
                        && row[4] == "u1.medium"
                        && row[5] == "1000m"
                })
        },
    );
    k.run(&["explain", "usagereports.query"])
        .ok()
        .out("includeSubTenants");
    // A measured interval inside both machines' lives: four seconds from a second after the
    // later one started.
    let starts = k
        .run(&[
            "get",
            "usagerecords",
            "-o",
            "jsonpath={range .items[*]}{.spec.start}{\"\\n\"}{end}",
        ])
        .ok()
        .stdout
        .clone();
    let started = starts
        .lines()
        .filter_map(apimachinery::time::parse_rfc3339)
        .max()
        .expect("the machines' starts");
    let from = started + k8s_openapi::jiff::SignedDuration::from_secs(1);
    let to = from + k8s_openapi::jiff::SignedDuration::from_secs(4);
    while k8s_openapi::jiff::Timestamp::now() < to {
        std::thread::sleep(Duration::from_millis(200));
    }
    let (from, to) = (rfc3339(from), rfc3339(to));
    let measured = report("measured", "tenant-foo", &from, &to, "");
    let before = machine_hours(&k, &measured);
    assert_eq!(before.len(), 2, "{before:?}");
    // One vCPU and 4 GiB (u1.medium) for four seconds, within 1 %.
    let hours = 4.0 / 3600.0;
    for (name, cpu, mem) in &before {
        assert!((cpu / hours - 1.0).abs() < 0.01, "{name}: {cpu} vCPU-hours");
        assert!(
            (mem / (4.0 * hours) - 1.0).abs() < 0.01,
            "{name}: {mem} GiB-hours"
        );
    }
    // Summed up the tree: the root tenant's report of its subtree carries foo's total.
    let totals = k
        .run_stdin(
            &["create", "-f", "-", "-o", "jsonpath={.report.totalConsumptions.vCPUHours} {.report.tenants[?(@.tenant==\"tenant-root\")].totalConsumptions.vCPUHours}"],
            Some(&report("tree", "tenant-root", &from, &to, "  includeSubTenants: true\n")),
        )
        .ok()
        .stdout
        .clone();
    let totals: Vec<f64> = totals
        .split(' ')
        .map(|x| x.parse().expect("a decimal"))
        .collect();
    assert!((totals[0] / (2.0 * hours) - 1.0).abs() < 0.01, "{totals:?}");
    assert_eq!(totals[0], totals[1], "the root's subtree total");
    k.run(&["get", "usagereports", "-n", "tenant-foo"])
        .ok()
        .out("VCPU HOURS")
        .out("measured");

    // Records are durable: after a restart the same machines go on accruing.
    let status = server.terminate();
    assert!(status.success(), "up exited with {status}");
    server.launch();
    let k = server.kubectl("1.33");
    k.eventually(&["get", "usagerecords"], Duration::from_secs(60), |r| {
        r.code == 0 && r.rows().len() == 2
    });
    // The same interval reports the same usage after the restart.
    let after = machine_hours(
        &k,
        &measured.replace("name: measured", "name: measured-again"),
    );
    let mut sorted = before.clone();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut after_sorted = after.clone();
    after_sorted.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(sorted, after_sorted, "unchanged across a restart");

    // A deleted cluster's machines stop: their records end.
    k.run(&[
        "delete",
        "tenantcluster",
        "metered",
        "-n",
        "tenant-foo",
        "--timeout=90s",
    ])
    .ok();
    k.eventually(
        &[
            "get",
            "usagerecords",
            "-o",
            "jsonpath={range .items[*]}{.status.end}{\"\\n\"}{end}",
        ],
        Duration::from_secs(60),
        |r| r.code == 0 && r.stdout.lines().filter(|l| !l.is_empty()).count() == 2,
    );
}
