//! Interoperability with Go: real kubectl (client-go, moby/spdystream, gorilla/websocket)
//! against a minimal API server built on this crate — discovery, one Running pod, and its
//! exec and portforward subresources. kubectl 1.27–1.29 speak SPDY to it (served here as a
//! kubelet would); 1.30+ exec over a v5 WebSocket (translated to SPDY towards a kubelet
//! endpoint, as kube-apiserver does); 1.31+ port-forward through the WebSocket tunnel.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use common::{exec, portforward_endpoint, serve, within};
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use streaming::remotecommand::StreamOptions;
use streaming::translate;
use streaming::upgrade::{self, Target, TcpConnect};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::Command;

const VERSIONS: [&str; 7] = ["1.27", "1.28", "1.29", "1.30", "1.31", "1.32", "1.33"];

/// Where the `kubectl.1.XX` binaries are (beside the `kubectl` on PATH, or the SDK's).
fn kubectl(version: &str) -> PathBuf {
    let on_path = std::process::Command::new("sh")
        .arg("-c")
        .arg("readlink -f \"$(command -v kubectl)\"")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .and_then(|p| p.parent().map(|d| d.to_path_buf()));
    let dir = on_path.unwrap_or_else(|| PathBuf::from("/usr/lib/google-cloud-sdk/bin"));
    let bin = dir.join(format!("kubectl.{version}"));
    assert!(bin.exists(), "{} is missing", bin.display());
    bin
}

#[derive(Default)]
struct Counts {
    spdy_exec: AtomicUsize,
    websocket_exec: AtomicUsize,
    spdy_portforward: AtomicUsize,
    tunnel_portforward: AtomicUsize,
}

fn json(body: &str) -> Response<Bytes> {
    Response::builder()
        .header("content-type", "application/json")
        .body(Bytes::from(body.to_string()))
        .unwrap()
}

const POD: &str = r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"default","uid":"u1"},
"spec":{"containers":[{"name":"c","image":"toy"}]},
"status":{"phase":"Running","containerStatuses":[{"name":"c","ready":true,"restartCount":0,"image":"toy","imageID":"","state":{"running":{}}}]}}"#;

/// The API server's reading of exec booleans (anything but absent, `0` or `false` is on),
/// re-encoded the kubelet's way.
fn kubelet_query(query: &str) -> (StreamOptions, String) {
    let on = |key: &str| {
        form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == key)
            .is_some_and(|(_, v)| v != "0" && !v.eq_ignore_ascii_case("false"))
    };
    let mut params = Vec::new();
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        if k == "command" {
            params.push(format!("command={v}"));
        }
    }
    for key in ["stdin", "stdout", "stderr", "tty"] {
        if on(key) {
            params.push(format!("{key}=1"));
        }
    }
    let joined = params.join("&");
    (
        StreamOptions::from_query(&joined).unwrap_or_default(),
        joined,
    )
}

async fn apiserver(
    req: Request<Incoming>,
    kubelet: SocketAddr,
    echo: SocketAddr,
    counts: Arc<Counts>,
) -> Response<Bytes> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    match path.as_str() {
        "/api" => json(r#"{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1"}]}"#),
        "/apis" => json(r#"{"kind":"APIGroupList","apiVersion":"v1","groups":[]}"#),
        "/api/v1" => json(r#"{"kind":"APIResourceList","groupVersion":"v1","resources":[
            {"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["get","list"],"shortNames":["po"]},
            {"name":"pods/exec","singularName":"","namespaced":true,"kind":"PodExecOptions","verbs":["create","get"]},
            {"name":"pods/portforward","singularName":"","namespaced":true,"kind":"PodPortForwardOptions","verbs":["create","get"]}]}"#),
        "/api/v1/namespaces/default/pods/p" => json(POD),
        "/api/v1/namespaces/default/pods/p/exec" => {
            let (options, kubelet_query) = kubelet_query(&query);
            let backend: Uri = format!("http://{kubelet}/exec/default/p/c?{kubelet_query}")
                .parse()
                .unwrap();
            if upgrade::is_websocket_request(req.headers()) {
                counts.websocket_exec.fetch_add(1, Ordering::SeqCst);
                translate::exec(req, options, Arc::new(TcpConnect::default()), Target::new(backend))
            } else {
                counts.spdy_exec.fetch_add(1, Ordering::SeqCst);
                // Serve it here, as the kubelet would (the API server would proxy the bytes).
                let (parts, body) = req.into_parts();
                let mut req = Request::from_parts(parts, body);
                *req.uri_mut() = format!("/exec/default/p/c?{kubelet_query}").parse().unwrap();
                exec(req).await
            }
        }
        "/api/v1/namespaces/default/pods/p/portforward" => {
            if upgrade::is_websocket_request(req.headers()) {
                counts.tunnel_portforward.fetch_add(1, Ordering::SeqCst);
                let backend: Uri = format!("http://{kubelet}/portForward/default/p").parse().unwrap();
                translate::portforward_tunnel(req, Arc::new(TcpConnect::default()), Target::new(backend))
                    .await
            } else {
                counts.spdy_portforward.fetch_add(1, Ordering::SeqCst);
                portforward_endpoint(req, echo).await
            }
        }
        _ => Response::builder()
            .status(404)
            .header("content-type", "application/json")
            .body(Bytes::from_static(br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"not found","reason":"NotFound","code":404}"#))
            .unwrap(),
    }
}

/// A kubelet serving /exec and /portForward.
async fn kubelet(req: Request<Incoming>, echo: SocketAddr) -> Response<Bytes> {
    if req.uri().path().starts_with("/portForward/") {
        portforward_endpoint(req, echo).await
    } else {
        exec(req).await
    }
}

struct Cluster {
    counts: Arc<Counts>,
    dir: tempfile::TempDir,
}

impl Cluster {
    async fn start() -> Cluster {
        let echo = common::echo_server().await;
        let kubelet_addr = serve(move |req| kubelet(req, echo)).await;
        let counts = Arc::new(Counts::default());
        let c = counts.clone();
        let api = serve(move |req| apiserver(req, kubelet_addr, echo, c.clone())).await;
        let dir = tempfile::tempdir().unwrap();
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://{api}\n\
             users:\n- name: u\n  user: {{}}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n    namespace: default\n\
             current-context: x\n"
        );
        std::fs::write(dir.path().join("config"), config).unwrap();
        Cluster { counts, dir }
    }

    fn kubectl(&self, version: &str) -> Command {
        let mut cmd = Command::new(kubectl(version));
        cmd.env("KUBECONFIG", self.dir.path().join("config"))
            .env("HOME", self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }
}

#[tokio::test]
async fn kubectl_exec_returns_output_and_exit_codes_over_spdy_and_websocket() {
    let cluster = Cluster::start().await;
    for version in VERSIONS {
        let before_ws = cluster.counts.websocket_exec.load(Ordering::SeqCst);
        // With stdin: EOF must reach the command; the exit code must come back.
        let mut child = cluster
            .kubectl(version)
            .args(["exec", "-i", "p", "--", "toy"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"exit 3").await.unwrap();
        drop(stdin);
        let out = within(child.wait_with_output()).await.unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stdout, "EXIT 3", "kubectl {version}: {stderr}");
        assert!(stderr.contains("to stderr"), "kubectl {version}: {stderr}");
        assert!(
            stderr.contains("command terminated with exit code 3"),
            "kubectl {version}: {stderr}"
        );
        assert_eq!(out.status.code(), Some(3), "kubectl {version}: {stderr}");

        // Without stdin: plain output and success.
        let out = within(
            cluster
                .kubectl(version)
                .args(["exec", "p", "--", "toy"])
                .output(),
        )
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "hello",
            "kubectl {version}: {stderr}"
        );
        assert!(out.status.success(), "kubectl {version}: {stderr}");

        let used_ws = cluster.counts.websocket_exec.load(Ordering::SeqCst) > before_ws;
        let websocket_version = !matches!(version, "1.27" | "1.28" | "1.29");
        assert_eq!(used_ws, websocket_version, "kubectl {version} transport");
    }
    assert!(cluster.counts.spdy_exec.load(Ordering::SeqCst) >= 6);
}

#[tokio::test]
async fn kubectl_port_forward_reaches_the_pod_over_spdy_and_the_tunnel() {
    let cluster = Cluster::start().await;
    for version in VERSIONS {
        let before_tunnel = cluster.counts.tunnel_portforward.load(Ordering::SeqCst);
        let mut child = cluster
            .kubectl(version)
            .args(["port-forward", "pod/p", ":8080"])
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = within(lines.next_line()).await.unwrap().unwrap_or_default();
        // "Forwarding from 127.0.0.1:NNNNN -> 8080"
        let port: u16 = line
            .split(" -> ")
            .next()
            .and_then(|l| l.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("kubectl {version} printed {line:?}"));
        for round in 0..2 {
            let mut tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            let msg = format!("ping {round} ").repeat(10_000);
            tcp.write_all(msg.as_bytes()).await.unwrap();
            let mut back = vec![0u8; 5 + msg.len()];
            within(tcp.read_exact(&mut back)).await.unwrap();
            assert_eq!(back, format!("pong:{msg}").as_bytes(), "kubectl {version}");
        }
        let used_tunnel = cluster.counts.tunnel_portforward.load(Ordering::SeqCst) > before_tunnel;
        let tunnel_version = !matches!(version, "1.27" | "1.28" | "1.29" | "1.30");
        assert_eq!(used_tunnel, tunnel_version, "kubectl {version} transport");
        let _ = child.kill().await;
        let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    }
}
