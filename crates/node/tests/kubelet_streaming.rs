//! Streaming end to end with real kubectl 1.27–1.33: the in-process API server over HTTPS
//! proxies `pods/log`, `pods/exec`, `pods/attach`, `pods/portforward` and `nodes/proxy` to
//! the kubelet API server of `node::kubelet::server` (authenticating with a client
//! certificate of the cluster's CA, authorized by the node through SubjectAccessReview),
//! which hands exec, attach and port-forward to a fake runtime streaming server running
//! local processes. kubectl 1.27–1.29 use SPDY throughout; 1.30+ exec over a v5 WebSocket
//! (translated to SPDY by the API server); 1.31+ port-forward through the WebSocket tunnel.

mod fake;

use std::process::Stdio;

use fake::{Cluster, FakeNode, T, VERSIONS, cri_line, stderr, stdout};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_honours_every_flag() {
    let cluster = Cluster::start().await;
    let node = FakeNode::start(&cluster, "node-1").await;
    // `app` restarted once: its previous instance logged "old"; `side` is the second container.
    node.create_pod(
        "logs",
        json!({"nodeName": "node-1", "containers": [{"name": "app", "image": "x"}, {"name": "side", "image": "x"}]}),
        json!({"phase": "Running", "containerStatuses": [
            {"name": "app", "ready": true, "restartCount": 1, "image": "x", "imageID": "",
             "state": {"running": {}}, "lastState": {"terminated": {"exitCode": 1}}},
            {"name": "side", "ready": true, "restartCount": 0, "image": "x", "imageID": "", "state": {"running": {}}},
        ]}),
    )
    .await;
    node.log("logs", "app", 0, &[cri_line(0, "old")]);
    node.log(
        "logs",
        "app",
        1,
        &[cri_line(1, "one"), cri_line(2, "two"), cri_line(3, "three")],
    );
    node.log("logs", "side", 0, &[cri_line(4, "sidecar")]);
    node.create_pod(
        "waiting",
        json!({"nodeName": "node-1", "containers": [{"name": "c", "image": "x"}]}),
        json!({"phase": "Pending", "containerStatuses": [
            {"name": "c", "ready": false, "restartCount": 0, "image": "x", "imageID": "",
             "state": {"waiting": {"reason": "ContainerCreating"}}}]}),
    )
    .await;
    for v in VERSIONS {
        let ok = |o: &std::process::Output| {
            assert!(o.status.success(), "kubectl {v}: {}", stderr(o));
            stdout(o)
        };
        let o = cluster.run(v, &["logs", "logs", "-c", "app"]).await;
        assert_eq!(ok(&o), "one\ntwo\nthree\n", "{v}");
        let o = cluster
            .run(v, &["logs", "logs", "-c", "app", "--tail=1"])
            .await;
        assert_eq!(ok(&o), "three\n", "{v}");
        let o = cluster
            .run(
                v,
                &["logs", "logs", "-c", "app", "--timestamps", "--tail=1"],
            )
            .await;
        assert_eq!(ok(&o), "2024-01-01T12:00:03.123456789Z three\n", "{v}");
        let o = cluster
            .run(
                v,
                &[
                    "logs",
                    "logs",
                    "-c",
                    "app",
                    "--since-time=2024-01-01T12:00:02Z",
                ],
            )
            .await;
        assert_eq!(ok(&o), "two\nthree\n", "{v}");
        // Everything is older than an hour.
        let o = cluster
            .run(v, &["logs", "logs", "-c", "app", "--since=1h"])
            .await;
        assert_eq!(ok(&o), "", "{v}");
        let o = cluster
            .run(v, &["logs", "logs", "-c", "app", "--limit-bytes=6"])
            .await;
        assert_eq!(ok(&o), "one\ntw", "{v}");
        let o = cluster
            .run(v, &["logs", "logs", "-c", "app", "--previous"])
            .await;
        assert_eq!(ok(&o), "old\n", "{v}");
        let o = cluster.run(v, &["logs", "logs", "-c", "side", "-p"]).await;
        assert!(!o.status.success());
        assert!(
            stderr(&o).contains(
                "Error from server (BadRequest): previous terminated container \"side\" in pod \"logs\" not found"
            ),
            "{v}: {}",
            stderr(&o)
        );
        let o = cluster
            .run(v, &["logs", "logs", "--all-containers=true"])
            .await;
        // kubectl keeps the containers' requests in a Go map: their order is not fixed,
        // each container's lines are.
        let all = ok(&o);
        assert!(
            all == "one\ntwo\nthree\nsidecar\n" || all == "sidecar\none\ntwo\nthree\n",
            "{v}: {all:?}"
        );
        let o = cluster.run(v, &["logs", "waiting"]).await;
        assert!(!o.status.success());
        assert!(
            stderr(&o).contains(
                "Error from server (BadRequest): container \"c\" in pod \"waiting\" is waiting to start: ContainerCreating"
            ),
            "{v}: {}",
            stderr(&o)
        );
        // Without -c and two containers, kubectl picks the first.
        let o = cluster.run(v, &["logs", "logs"]).await;
        assert_eq!(ok(&o), "one\ntwo\nthree\n", "{v}");
        let o = cluster.run(v, &["logs", "nope"]).await;
        assert!(
            stderr(&o).contains("pods \"nope\" not found"),
            "{v}: {}",
            stderr(&o)
        );
    }
}

async fn next_line(
    out: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) -> Option<String> {
    tokio::time::timeout(T, out.next_line())
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_follow_streams_until_the_container_exits() {
    let cluster = Cluster::start().await;
    let node = FakeNode::start(&cluster, "node-1").await;
    for (i, v) in VERSIONS.iter().enumerate() {
        let pod = format!("follow-{i}");
        node.run_pod(&pod, &[("c", &[])], None).await;
        node.log(&pod, "c", 0, &[cri_line(1, "first")]);
        let mut child = cluster
            .kubectl(v)
            .args(["logs", "-f", &pod])
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(next_line(&mut out).await.as_deref(), Some("first"), "{v}");
        node.log(&pod, "c", 0, &[cri_line(2, "second")]);
        assert_eq!(next_line(&mut out).await.as_deref(), Some("second"), "{v}");
        node.log(&pod, "c", 0, &[cri_line(3, "last words")]);
        node.exit(&pod, "c", 0);
        assert_eq!(
            next_line(&mut out).await.as_deref(),
            Some("last words"),
            "{v}"
        );
        assert_eq!(next_line(&mut out).await, None, "{v}: the stream ends");
        let status = tokio::time::timeout(T, child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "{v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_returns_output_exit_codes_and_stdin() {
    let cluster = Cluster::start().await;
    let node = FakeNode::start(&cluster, "node-1").await;
    node.run_pod("shell", &[("sh", &[])], None).await;
    for v in VERSIONS {
        let o = cluster
            .run(
                v,
                &[
                    "exec",
                    "shell",
                    "--",
                    "sh",
                    "-c",
                    "echo out; echo err >&2; exit 3",
                ],
            )
            .await;
        assert_eq!(o.status.code(), Some(3), "{v}: {}", stderr(&o));
        assert_eq!(stdout(&o), "out\n", "{v}");
        assert!(stderr(&o).contains("err\n"), "{v}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("command terminated with exit code 3"),
            "{v}: {}",
            stderr(&o)
        );

        let o = cluster.run(v, &["exec", "shell", "--", "true"]).await;
        assert!(o.status.success(), "{v}: {}", stderr(&o));

        // stdin reaches the command, and its end ends it.
        let mut child = cluster
            .kubectl(v)
            .args(["exec", "-i", "shell", "--", "sh", "-c", "tr a-z A-Z"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(b"hello\nworld\n").await.unwrap();
        drop(input);
        let o = tokio::time::timeout(T, child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        assert!(o.status.success(), "{v}: {}", stderr(&o));
        assert_eq!(stdout(&o), "HELLO\nWORLD\n", "{v}");

        let o = cluster.run(v, &["exec", "nope", "--", "true"]).await;
        assert!(!o.status.success());
        assert!(
            stderr(&o).contains("pods \"nope\" not found"),
            "{v}: {}",
            stderr(&o)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_attach_talks_to_the_main_process() {
    let cluster = Cluster::start().await;
    let node = FakeNode::start(&cluster, "node-1").await;
    node.run_pod("main", &[("c", &["sh", "-c", "echo started; cat"])], None)
        .await;
    for v in VERSIONS {
        let mut child = cluster
            .kubectl(v)
            .args(["attach", "-i", "main"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(b"ping\n").await.unwrap();
        drop(input);
        let o = tokio::time::timeout(T, child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        assert!(o.status.success(), "{v}: {}", stderr(&o));
        assert_eq!(stdout(&o), "started\nping\n", "{v}");
    }
}

/// A loopback HTTP server answering every request with `hello from the pod`.
async fn http_server() -> u16 {
    http_server_on("127.0.0.1").await
}

async fn http_server_on(ip: &str) -> u16 {
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tcp.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let body = "hello from the pod";
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tcp.write_all(reply.as_bytes()).await;
            });
        }
    });
    port
}

async fn http_get(port: u16) -> String {
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nhost: pod\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    tokio::time::timeout(T, tcp.read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_port_forward_reaches_a_pod_port() {
    let cluster = Cluster::start().await;
    let node = FakeNode::start(&cluster, "node-1").await;
    let port = http_server().await;
    node.run_pod("web", &[("c", &[])], Some(port)).await;
    for v in VERSIONS {
        let mut child = cluster
            .kubectl(v)
            .args(["port-forward", "pod/web", &format!(":{port}")])
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(T, out.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap_or_else(|| panic!("kubectl {v} port-forward printed nothing"));
        // "Forwarding from 127.0.0.1:43210 -> 8080"
        let local: u16 = line
            .strip_prefix("Forwarding from 127.0.0.1:")
            .and_then(|r| r.split(' ').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{v}: {line}"));
        for _ in 0..2 {
            let reply = http_get(local).await;
            assert!(reply.starts_with("HTTP/1.1 200 OK"), "{v}: {reply}");
            assert!(reply.ends_with("hello from the pod"), "{v}: {reply}");
        }
        child.kill().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_cp_copies_into_and_out_of_a_pod() {
    let cluster = Cluster::start().await;
    let node = FakeNode::start(&cluster, "node-1").await;
    node.run_pod("files", &[("c", &[])], None).await;
    let container_dir = node.api.dir("default", "files", "c");
    for v in VERSIONS {
        let name = format!("in-{v}.txt");
        let local = cluster.dir.path().join(&name);
        std::fs::write(&local, format!("payload for {v}\n")).unwrap();
        let o = cluster
            .run(
                v,
                &["cp", local.to_str().unwrap(), &format!("files:{name}")],
            )
            .await;
        assert!(o.status.success(), "{v}: {}", stderr(&o));
        assert_eq!(
            std::fs::read_to_string(container_dir.join(&name)).unwrap(),
            format!("payload for {v}\n"),
            "{v}"
        );
        let back = cluster.dir.path().join(format!("back-{v}.txt"));
        let o = cluster
            .run(v, &["cp", &format!("files:{name}"), back.to_str().unwrap()])
            .await;
        assert!(o.status.success(), "{v}: {}", stderr(&o));
        assert_eq!(
            std::fs::read_to_string(&back).unwrap(),
            format!("payload for {v}\n"),
            "{v}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_top_shows_nodes_and_pods() {
    let cluster = Cluster::start().await;
    let node = FakeNode::start(&cluster, "node-1").await;
    node.run_pod("one", &[("a", &[])], None).await;
    node.run_pod("two", &[("a", &[]), ("b", &[])], None).await;
    for v in VERSIONS {
        let o = cluster.run(v, &["top", "nodes"]).await;
        assert!(o.status.success(), "{v}: {}", stderr(&o));
        let out = stdout(&o);
        let row: Vec<&str> = out
            .lines()
            .find(|l| l.starts_with("node-1"))
            .unwrap_or_else(|| panic!("{v}: {out}"))
            .split_whitespace()
            .collect();
        // 250m of 4 cores, 1Gi of 8Gi.
        assert_eq!(row[1..], ["250m", "6%", "1024Mi", "12%"], "{v}: {out}");

        let o = cluster.run(v, &["top", "pods"]).await;
        assert!(o.status.success(), "{v}: {}", stderr(&o));
        let out = stdout(&o);
        let rows: Vec<Vec<&str>> = out
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows,
            [vec!["one", "100m", "64Mi"], vec!["two", "200m", "128Mi"]],
            "{v}: {out}"
        );
        let o = cluster
            .run(v, &["top", "pods", "two", "--containers"])
            .await;
        assert!(o.status.success(), "{v}: {}", stderr(&o));
        assert!(stdout(&o).contains(" b "), "{v}: {}", stdout(&o));
    }
    // The API as kubectl get prints it: metrics-server's Table.
    let o = cluster.run("1.33", &["get", "nodemetrics"]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("NAME"), "{out}");
    assert!(out.contains("CPU") && out.contains("WINDOW"), "{out}");
    assert!(out.contains("node-1"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_pod_and_service_proxies_reach_kubelets_pods_and_endpoints() {
    let cluster = Cluster::start().await;
    let node = FakeNode::start(&cluster, "node-1").await;
    let get = |path: &'static str| {
        let cluster = &cluster;
        async move { cluster.run("1.33", &["get", "--raw", path]).await }
    };
    let o = get("/api/v1/nodes/node-1/proxy/healthz").await;
    assert_eq!(stdout(&o), "ok", "{}", stderr(&o));
    let o = get("/api/v1/nodes/node-1/proxy/stats/summary").await;
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["node"]["nodeName"], "node-1");
    let o = get("/api/v1/nodes/node-1/proxy/metrics/resource").await;
    assert!(
        stdout(&o).contains("node_cpu_usage_seconds_total"),
        "{}",
        stdout(&o)
    );

    // Pods are reached at their IP, which must not be loopback...
    node.run_pod("local", &[("c", &[])], Some(80)).await;
    let o = get("/api/v1/namespaces/default/pods/local/proxy/").await;
    assert!(stderr(&o).contains("address not allowed"), "{}", stderr(&o));
    // ...so the "pod" listens on a non-loopback address of this host.
    let addr = fake::LocalAddress::new();
    let port = http_server_on(&addr.ip).await;
    node.run_pod_at("web", &[("c", &[])], Some(port), &addr.ip)
        .await;
    let o = get("/api/v1/namespaces/default/pods/web/proxy/").await;
    assert_eq!(stdout(&o), "hello from the pod", "{}", stderr(&o));
    let path = format!("/api/v1/namespaces/default/pods/web:{port}/proxy/x");
    let o = cluster.run("1.33", &["get", "--raw", &path]).await;
    assert_eq!(stdout(&o), "hello from the pod", "{}", stderr(&o));

    // A service's endpoint is a ready address that is a pod with that IP.
    use k8s_openapi::api::core::v1::{Endpoints, Service};
    use kube::api::{Api, PostParams};
    let svcs: Api<Service> = Api::namespaced(cluster.client.clone(), "default");
    let svc = json!({"metadata": {"name": "web"}, "spec": {"ports": [{"name": "http", "port": 80, "targetPort": port}]}});
    svcs.create(
        &PostParams::default(),
        &serde_json::from_value(svc).unwrap(),
    )
    .await
    .unwrap();
    let eps: Api<Endpoints> = Api::namespaced(cluster.client.clone(), "default");
    let ep = json!({"metadata": {"name": "web"}, "subsets": [{
        "addresses": [{"ip": addr.ip, "targetRef": {"kind": "Pod", "namespace": "default", "name": "web"}}],
        "ports": [{"name": "http", "port": port}]}]});
    eps.create(&PostParams::default(), &serde_json::from_value(ep).unwrap())
        .await
        .unwrap();
    for path in [
        "/api/v1/namespaces/default/services/web:http/proxy/",
        "/api/v1/namespaces/default/services/web:80/proxy/",
    ] {
        let o = cluster.run("1.33", &["get", "--raw", path]).await;
        assert_eq!(stdout(&o), "hello from the pod", "{path}: {}", stderr(&o));
    }
    let o = get("/api/v1/namespaces/default/services/web:81/proxy/").await;
    assert!(
        stderr(&o).contains("no service port 81 found for service \"web\""),
        "{}",
        stderr(&o)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logical_clusters_kubelets_trust_that_clusters_ca() {
    let cluster = Cluster::start().await;
    let kubeconfig = cluster.create_logical("tenant").await;
    let node = FakeNode::start_in(&cluster, "tenant", "tenant-node").await;
    node.run_pod("p", &[("c", &[])], None).await;
    node.log("p", "c", 0, &[cri_line(1, "in the tenant")]);
    for v in ["1.27", "1.33"] {
        let run = |args: &'static [&'static str]| {
            let mut c = cluster.kubectl_with(v, &kubeconfig);
            c.args(args);
            async move { tokio::time::timeout(T, c.output()).await.unwrap().unwrap() }
        };
        let o = run(&["logs", "p"]).await;
        assert_eq!(stdout(&o), "in the tenant\n", "{v}: {}", stderr(&o));
        let o = run(&["exec", "p", "--", "sh", "-c", "echo tenant exec"]).await;
        assert_eq!(stdout(&o), "tenant exec\n", "{v}: {}", stderr(&o));
    }
    // The root cluster has no such pod: the kubelet answers only through its own cluster.
    let o = cluster.run("1.33", &["exec", "p", "--", "true"]).await;
    assert!(
        stderr(&o).contains("pods \"p\" not found"),
        "{}",
        stderr(&o)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_into_a_pod_without_a_node_or_container_is_refused_as_upstream() {
    let cluster = Cluster::start().await;
    let node = FakeNode::start(&cluster, "node-1").await;
    node.create_pod(
        "unbound",
        json!({"containers": [{"name": "c", "image": "x"}]}),
        json!({"phase": "Running"}),
    )
    .await;
    node.run_pod("two", &[("a", &[]), ("b", &[])], None).await;
    let o = cluster
        .run("1.33", &["exec", "unbound", "--", "true"])
        .await;
    assert!(
        stderr(&o).contains("pod unbound does not have a host assigned"),
        "{}",
        stderr(&o)
    );
    // Logs of an unbound pod are empty, not an error.
    let o = cluster.run("1.33", &["logs", "unbound"]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "");
    let o = cluster
        .run("1.33", &["exec", "two", "-c", "zzz", "--", "true"])
        .await;
    assert!(
        stderr(&o).contains("container zzz is not valid for pod two"),
        "{}",
        stderr(&o)
    );
    // The API without kubectl's own defaulting: several containers need a name.
    let o = cluster
        .run(
            "1.33",
            &["get", "--raw", "/api/v1/namespaces/default/pods/two/log"],
        )
        .await;
    assert!(
        stderr(&o).contains("a container name must be specified for pod two, choose one of: [a b]"),
        "{}",
        stderr(&o)
    );
}
