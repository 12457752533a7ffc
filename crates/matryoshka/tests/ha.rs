//! High availability: three `matryoshka up` replicas over one real etcd and one `--pki-dir`.
//! Credentials of one replica work against every other, every singleton loop runs on exactly
//! one replica (Lease election), and when the leading replica is killed with -9 a writer
//! through another replica keeps working, a watch moves to a surviving replica at its last
//! resourceVersion without missing an event, and the singletons resume elsewhere.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::{Client, Config};
use support::{Backend, Server};

/// The Leases of the singleton loops, each held by one replica.
const SINGLETONS: [&str; 5] = [
    "matryoshka-control-plane",
    "matryoshka-controller-manager",
    "matryoshka-platform",
    "kube-scheduler",
    "syncer",
];

/// A client of `port` with the credentials of the admin kubeconfig at `kubeconfig`.
async fn client(kubeconfig: &Path, port: u16) -> Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("admin.conf parses");
    let mut cfg = Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    cfg.cluster_url = format!("https://127.0.0.1:{port}").parse().expect("a URL");
    Client::try_from(cfg).expect("client")
}

fn cm(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("v".to_string(), name.to_string())])),
        ..Default::default()
    }
}

/// A copy of `kubeconfig` in `dir` whose server is the replica at `port` instead of the
/// external address (a load balancer's, which nothing here listens on).
fn pointed_at(kubeconfig: &Path, external: u16, port: u16, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(kubeconfig).expect("a kubeconfig");
    let from = format!("https://127.0.0.1:{external}");
    assert!(
        text.contains(&from),
        "the kubeconfig names the external address: {text}"
    );
    let to = format!("https://127.0.0.1:{port}");
    let path = dir.join(format!(
        "{port}-{}",
        kubeconfig.file_name().expect("a file").to_string_lossy()
    ));
    std::fs::write(&path, text.replace(&from, &to)).expect("a kubeconfig copy");
    path
}

/// The singletons a replica says it runs: its `leader_election_master_status` gauges.
async fn leading(client: &Client) -> BTreeMap<String, bool> {
    let req = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("a request");
    let text = client.request_text(req).await.unwrap_or_default();
    text.lines()
        .filter_map(|l| l.strip_prefix("leader_election_master_status{name=\""))
        .filter_map(|l| l.split_once("\"} "))
        .map(|(name, v)| (name.to_string(), v.trim() == "1"))
        .collect()
}

/// Asserts from the replicas' metrics that each singleton runs on exactly one of `replicas`
/// (their clients and identities), the one its Lease names.
async fn each_runs_once(replicas: &[(&Client, String)], held: &BTreeMap<String, String>) {
    let mut runs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (c, identity) in replicas {
        let gauges = leading(c).await;
        for name in SINGLETONS {
            assert!(
                gauges.contains_key(name),
                "{identity} campaigns for {name}: {gauges:?}"
            );
        }
        for (name, on) in gauges {
            if on {
                runs.entry(name).or_default().push(identity.clone());
            }
        }
    }
    for name in SINGLETONS {
        assert_eq!(
            runs.get(name).map(Vec::as_slice),
            Some(std::slice::from_ref(&held[name])),
            "{name} runs where its Lease says, once: {runs:?}"
        );
    }
}

/// This machine's address on its default route (found without sending anything): where
/// pods would reach the replicas (Endpoints refuse loopback addresses, as upstream's do).
fn host_ip() -> std::net::IpAddr {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").expect("a UDP socket");
    s.connect("198.51.100.1:9").expect("a default route");
    let ip = s.local_addr().expect("a local address").ip();
    assert!(!ip.is_loopback() && !ip.is_unspecified(), "{ip}");
    ip
}

/// The ports the `default/kubernetes` Endpoints name at `host` (every replica advertises it).
async fn endpoint_ports(client: &Client, host: std::net::IpAddr) -> Vec<u16> {
    let host = host.to_string();
    let api: Api<k8s_openapi::api::core::v1::Endpoints> =
        Api::namespaced(client.clone(), "default");
    let Ok(e) = api.get("kubernetes").await else {
        return Vec::new();
    };
    let mut ports: Vec<u16> = e
        .subsets
        .unwrap_or_default()
        .iter()
        .filter(|s| s.addresses.iter().flatten().any(|a| a.ip == host))
        .flat_map(|s| s.ports.iter().flatten().map(|p| p.port as u16))
        .collect();
    ports.sort();
    ports
}

/// The holder of each singleton Lease.
async fn holders(client: &Client) -> BTreeMap<String, String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let mut out = BTreeMap::new();
    for name in SINGLETONS {
        if let Ok(l) = leases.get(name).await
            && let Some(h) = l.spec.and_then(|s| s.holder_identity)
            && !h.is_empty()
        {
            out.insert(name.to_string(), h);
        }
    }
    out
}

/// Waits until `check` holds, polling; panics with `what` after `patience`.
async fn until<F, Fut>(patience: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + patience;
    while !check().await {
        assert!(Instant::now() < deadline, "{what} within {patience:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_share_credentials_run_each_singleton_once_and_survive_the_leaders_kill() {
    let etcd = storage::testkit::EtcdServer::start().await;
    let pki = tempfile::tempdir().expect("tempdir");
    let pki_dir = pki.path().join("pki");
    let external = support::free_port();
    let backend = Backend::EtcdShared {
        endpoint: etcd.endpoint.clone(),
        prefix: "/ha".into(),
    };
    let host = host_ip();
    let advertise = host.to_string();
    let mut replicas: Vec<Server> = (0..3)
        .map(|i| {
            let identity = format!("replica-{i}");
            let external = format!("127.0.0.1:{external}");
            let args = [
                "--pki-dir",
                pki_dir.to_str().expect("a UTF-8 path"),
                "--external-hostname",
                &external,
                "--leader-identity",
                &identity,
                // Where pods reach each replica: the `default/kubernetes` endpoints.
                "--advertise-address",
                &advertise,
            ];
            Server::start_with(backend.clone(), &args)
        })
        .collect();
    let admin = replicas[0].kubeconfig();
    // Every replica trusts the first one's admin credentials and serves the same data.
    let clients: Vec<Client> = {
        let mut c = Vec::new();
        for r in &replicas {
            c.push(client(&admin, r.port).await);
        }
        c
    };
    let first: Api<ConfigMap> = Api::namespaced(clients[0].clone(), "default");
    first
        .create(&PostParams::default(), &cm("written-through-0"))
        .await
        .expect("a write through the first replica");
    for (i, c) in clients.iter().enumerate() {
        let api: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
        let got = api.get("written-through-0").await;
        assert!(
            got.is_ok(),
            "replica {i} reads what replica 0 wrote: {got:?}"
        );
    }
    // So are service-account tokens: one issued by replica 1 authenticates at replica 2.
    let issuer = support::Kubectl::new(
        "1.33",
        &pointed_at(&admin, external, replicas[1].port, pki.path()),
    );
    let token = issuer.run(&["create", "token", "default", "-n", "default"]);
    let token = token.ok().stdout.trim().to_string();
    let whoami = support::Kubectl::new("1.33", Path::new("/dev/null")).run(&[
        "--server",
        &format!("https://127.0.0.1:{}", replicas[2].port),
        "--certificate-authority",
        pki_dir.join("ca.crt").to_str().expect("a UTF-8 path"),
        "--token",
        &token,
        "auth",
        "whoami",
    ]);
    whoami.ok().out("system:serviceaccount:default:default");

    // Each singleton is held by exactly one replica, and every replica sees the same holder.
    until(
        Duration::from_secs(30),
        "every singleton Lease held",
        || async { holders(&clients[2]).await.len() == SINGLETONS.len() },
    )
    .await;
    let held = holders(&clients[2]).await;
    for c in &clients {
        assert_eq!(holders(c).await, held, "replicas disagree on the Leases");
    }
    // Replica 0 started first, so it leads; its loops are the ones that run.
    let leader = held["matryoshka-controller-manager"].clone();
    assert_eq!(leader, "replica-0", "{held:?}");
    let everyone: Vec<(&Client, String)> = clients
        .iter()
        .enumerate()
        .map(|(i, c)| (c, format!("replica-{i}")))
        .collect();
    each_runs_once(&everyone, &held).await;
    // In-cluster clients reach every replica: each renews its endpoint Lease and the leader
    // writes them all into the `kubernetes` Service's endpoints.
    let mut all_ports: Vec<u16> = replicas.iter().map(|r| r.port).collect();
    all_ports.sort();
    until(
        Duration::from_secs(30),
        "the kubernetes endpoints name every replica",
        || async { endpoint_ports(&clients[1], host).await == all_ports },
    )
    .await;

    // A watch on the leader, a writer through replica 1; then the leader is killed -9.
    let watched: Api<ConfigMap> = Api::namespaced(clients[0].clone(), "default");
    let from = first
        .get("written-through-0")
        .await
        .expect("read back")
        .metadata
        .resource_version
        .expect("a resourceVersion");
    let writes = 60;
    let writer_api: Api<ConfigMap> = Api::namespaced(clients[1].clone(), "default");
    let writer = tokio::spawn(async move {
        let mut done = Vec::new();
        for i in 0..writes {
            writer_api
                .create(&PostParams::default(), &cm(&format!("w-{i:03}")))
                .await
                .unwrap_or_else(|e| panic!("write {i} through a surviving replica: {e}"));
            done.push(Instant::now());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        done
    });
    let mut seen: Vec<String> = Vec::new();
    let mut last_rv = from.clone();
    let params = WatchParams::default().timeout(290);
    {
        let mut stream = watched
            .watch(&params, &from)
            .await
            .expect("a watch")
            .boxed();
        while seen.len() < 10 {
            match stream.next().await {
                Some(Ok(WatchEvent::Added(o))) => {
                    last_rv = o.metadata.resource_version.clone().expect("rv");
                    seen.push(o.metadata.name.expect("a name"));
                }
                Some(Ok(_)) => {}
                other => panic!("the watch ended before the kill: {other:?}"),
            }
        }
    }
    let killed_at = Instant::now();
    replicas[0].kill9();
    // The watch resumes on replica 2 at the last resourceVersion it delivered.
    let resumed: Api<ConfigMap> = Api::namespaced(clients[2].clone(), "default");
    let mut stream = resumed
        .watch(&params, &last_rv)
        .await
        .expect("a watch on a surviving replica")
        .boxed();
    while seen.len() < writes {
        match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
            Ok(Some(Ok(WatchEvent::Added(o)))) => seen.push(o.metadata.name.expect("a name")),
            Ok(Some(Ok(_))) => {}
            other => panic!(
                "the resumed watch ended after {} events: {other:?}",
                seen.len()
            ),
        }
    }
    let expected: Vec<String> = (0..writes).map(|i| format!("w-{i:03}")).collect();
    assert_eq!(
        seen, expected,
        "every event once, in order, across the move"
    );
    let done = writer.await.expect("the writer never failed");
    // Writes through the surviving replica never paused: the longest gap between two writes
    // (50 ms apart) spanning the kill stays under a second.
    let gap = done
        .windows(2)
        .filter(|w| w[1] >= killed_at)
        .map(|w| w[1] - w[0])
        .max()
        .expect("writes after the kill");
    eprintln!("longest pause between writes across the kill: {gap:?}");
    assert!(gap < Duration::from_secs(1), "writes paused {gap:?}");

    // The singletons move to a surviving replica within the lease duration (15 s) and a retry.
    until(
        Duration::from_secs(30),
        "every singleton taken over by a surviving replica",
        || async {
            let h = holders(&clients[1]).await;
            h.len() == SINGLETONS.len() && h.values().all(|holder| holder != "replica-0")
        },
    )
    .await;
    eprintln!(
        "singletons moved {:?} after the kill: {:?}",
        killed_at.elapsed(),
        holders(&clients[1]).await
    );
    // The survivors' metrics agree: each singleton runs once, where its Lease is.
    let survivors = &everyone[1..];
    until(
        Duration::from_secs(10),
        "the new holders' metrics say they lead",
        || async {
            let held = holders(&clients[1]).await;
            let mut on = 0;
            for (c, _) in survivors {
                let gauges = leading(c).await;
                on += SINGLETONS
                    .iter()
                    .filter(|n| gauges.get(**n) == Some(&true))
                    .count();
            }
            on == SINGLETONS.len() && held.len() == SINGLETONS.len()
        },
    )
    .await;
    each_runs_once(survivors, &holders(&clients[1]).await).await;
    // The killed replica leaves the endpoints once its endpoint Lease has lapsed (15 s).
    let mut expected: Vec<u16> = replicas[1..].iter().map(|r| r.port).collect();
    expected.sort();
    until(
        Duration::from_secs(40),
        "the killed replica leaves the kubernetes endpoints",
        || async { endpoint_ports(&clients[1], host).await == expected },
    )
    .await;
    eprintln!(
        "the killed replica left the kubernetes endpoints {:?} after the kill",
        killed_at.elapsed()
    );
    // The controllers run again: a Deployment gets its ReplicaSet's pod.
    let deployments: Api<Deployment> = Api::namespaced(clients[1].clone(), "default");
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "after-failover"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "after-failover"}},
            "template": {
                "metadata": {"labels": {"app": "after-failover"}},
                "spec": {"containers": [{"name": "c", "image": "example/app:1"}]}
            }
        }
    }))
    .expect("a Deployment");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("a Deployment through a surviving replica");
    let pods: Api<Pod> = Api::namespaced(clients[2].clone(), "default");
    until(
        Duration::from_secs(30),
        "the Deployment's pod created by the new leader's controllers",
        || async {
            pods.list(&ListParams::default().labels("app=after-failover"))
                .await
                .is_ok_and(|l| l.items.len() == 1)
        },
    )
    .await;
    // And the control plane's own loops: a new logical cluster is provisioned.
    let root = support::Kubectl::new(
        "1.33",
        &pointed_at(&admin, external, replicas[1].port, pki.path()),
    );
    let conf = support::logical_cluster(&root, pki.path(), "after-failover");
    let conf = pointed_at(&conf, external, replicas[2].port, pki.path());
    support::Kubectl::new("1.33", &conf)
        .run(&["get", "namespaces"])
        .ok()
        .out("kube-system");

    // `/readyz` reports the store: a frozen etcd fails its `etcd` check, a thawed one passes.
    let readyz = |c: Client| async move {
        let req = http::Request::get("/readyz?verbose")
            .body(kube::client::Body::empty())
            .expect("a request");
        let resp = c.send(req).await.expect("an answer");
        let status = resp.status().as_u16();
        let body = resp.into_body().collect_bytes().await.expect("a body");
        (status, String::from_utf8_lossy(&body).to_string())
    };
    let (code, body) = readyz(clients[1].clone()).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("[+]etcd ok"), "{body}");
    etcd.freeze();
    let (code, body) = readyz(clients[1].clone()).await;
    etcd.thaw();
    assert_eq!(code, 500, "{body}");
    assert!(body.contains("[-]etcd failed"), "{body}");
    until(Duration::from_secs(10), "readyz passing again", || async {
        readyz(clients[1].clone()).await.0 == 200
    })
    .await;
    drop(replicas);
    drop(etcd);
}
