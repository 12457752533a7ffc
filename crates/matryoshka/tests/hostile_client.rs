//! A hostile client against a real `matryoshka up`: every attack class of the hostile-input
//! issue is replayed from one logical cluster while another keeps working. Each bad request
//! gets a 4xx `Status` with a message, nothing a refused request touched changes, the
//! process never exits, the quiet cluster's p99 stays under 100 ms during a flood, slow and
//! unauthenticated clients are cut off at the edge, and resident memory stays bounded.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use serde_json::{Value, json};
use support::{Backend, Server, logical_cluster};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn client(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig parses");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(cfg).expect("client")
}

/// Sends a request; the status code and the body parsed as JSON (null when it is not).
async fn send(
    c: &kube::Client,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (u16, Value) {
    let mut req = http::Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = c
        .send(req.body(kube::client::Body::from(body)).expect("request"))
        .await
        .expect("sent");
    let code = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn post(c: &kube::Client, uri: &str, body: &Value) -> (u16, Value) {
    let json = [("content-type", "application/json")];
    send(c, "POST", uri, &json, body.to_string().into_bytes()).await
}

/// A refused request: a 4xx `Status` with a message.
fn refused(what: &str, (code, status): (u16, Value), want: u16) {
    assert_eq!(code, want, "{what}: {status}");
    assert_eq!(status["kind"], "Status", "{what}: {status}");
    assert_eq!(status["code"], want, "{what}: {status}");
    assert!(
        !status["message"].as_str().unwrap_or_default().is_empty(),
        "{what}: {status}"
    );
}

/// Names and resource versions of what a cluster holds of the attacked kinds.
async fn snapshot(c: &kube::Client) -> Vec<String> {
    let mut out = Vec::new();
    for uri in [
        "/api/v1/namespaces",
        "/api/v1/configmaps",
        "/api/v1/services",
        "/apis/apps/v1/deployments",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    ] {
        let (code, list) = send(c, "GET", uri, &[], Vec::new()).await;
        assert_eq!(code, 200, "{uri}: {list}");
        for i in list["items"].as_array().expect("items") {
            let m = &i["metadata"];
            out.push(format!(
                "{uri} {}/{} {}",
                m["namespace"].as_str().unwrap_or_default(),
                m["name"].as_str().unwrap_or_default(),
                m["resourceVersion"].as_str().unwrap_or_default()
            ));
        }
    }
    out.sort();
    out
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// A client identity from a kubeconfig: its certificate chain and key.
type Identity = (
    Vec<rustls::pki_types::CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
);

fn identity(kubeconfig: &Path) -> Identity {
    use base64::Engine;
    use rustls::pki_types::pem::PemObject;
    let text = std::fs::read_to_string(kubeconfig).expect("kubeconfig");
    let field = |name: &str| {
        let v = text
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("{name} in the kubeconfig"));
        base64::engine::general_purpose::STANDARD
            .decode(v.trim().trim_matches('"'))
            .expect("base64")
    };
    let cert = field("client-certificate-data");
    let key = field("client-key-data");
    let certs = rustls::pki_types::CertificateDer::pem_slice_iter(&cert)
        .collect::<Result<Vec<_>, _>>()
        .expect("certificates");
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(&key).expect("key");
    (certs, key)
}

/// A TLS connection to the server that verifies nothing, presenting `id` (none: an
/// anonymous client).
async fn raw_tls(port: u16) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    raw_tls_as(port, None).await
}

async fn raw_tls_as(
    port: u16,
    id: Option<Identity>,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    #[derive(Debug)]
    struct Anything;
    impl rustls::client::danger::ServerCertVerifier for Anything {
        fn verify_server_cert(
            &self,
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &[rustls::pki_types::CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            _: &[u8],
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn verify_tls13_signature(
            &self,
            _: &[u8],
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            rustls::crypto::ring::default_provider()
                .signature_verification_algorithms
                .supported_schemes()
        }
    }
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .dangerous()
    .with_custom_certificate_verifier(Arc::new(Anything));
    let cfg = match id {
        Some((certs, key)) => cfg.with_client_auth_cert(certs, key).expect("identity"),
        None => cfg.with_no_client_auth(),
    };
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect("localhost".try_into().expect("name"), tcp)
        .await
        .expect("handshake")
}

/// Reads until the peer closes (or `limit` passes); what was read.
async fn read_to_close<S: tokio::io::AsyncRead + Unpin>(
    s: &mut S,
    limit: Duration,
) -> Option<String> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(String::from_utf8_lossy(&out).into_owned()),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// Whether the process runs (exists and is not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

fn p99(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[(v.len() * 99 / 100).min(v.len() - 1)]
}

#[test]
fn a_hostile_tenant_is_refused_at_every_step_and_never_hurts_another_cluster() {
    let server = Server::start_with(
        Backend::Embedded,
        &[
            "--request-timeout",
            "3s",
            "--request-header-timeout",
            "2s",
            "--max-requests-inflight",
            "4",
        ],
    );
    let root = server.kubectl("1.33");
    let flood_conf = logical_cluster(&root, &server.dir, "flood");
    let quiet_conf = logical_cluster(&root, &server.dir, "quiet");
    let pid = server.pid();
    let port = server.port;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let flood = client(&flood_conf).await;
        let quiet = client(&quiet_conf).await;
        let rss_start = rss_kib(pid);
        let (code, cm) = post(&flood, "/api/v1/namespaces/default/configmaps",
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "target"}, "data": {"a": "x".repeat(1000)}})).await;
        assert_eq!(code, 201, "{cm}");
        let before = snapshot(&flood).await;
        let quiet_before = snapshot(&quiet).await;

        // --- Attacks through the API, as the flood cluster's admin.
        let crd = |rule: String, max_items: u64| {
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.com"},
                "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                            "type": "object",
                            "properties": {"l": {"type": "array", "maxItems": max_items, "items": {"type": "integer"}}},
                            "x-kubernetes-validations": [{"rule": rule}]}}}}}]}})
        };
        let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
        for rule in [
            vec!["1"; 10_000].join(" + ") + " > 0",
            format!("has(self{})", ".a".repeat(5_000)),
            format!("self.l{} > 0", "[0]".repeat(20_000)),
        ] {
            refused("deep rule", post(&flood, &format!("{crds}?dryRun=All"), &crd(rule.clone(), 10)).await, 422);
            refused("deep rule", post(&flood, crds, &crd(rule, 10)).await, 422);
        }
        refused(
            "expensive rule",
            post(&flood, crds, &crd("self.l.all(a, self.l.all(b, self.l.all(c, a + b + c >= 0)))".into(), 100_000)).await,
            422,
        );
        refused(
            "wrong type",
            post(&flood, "/apis/apps/v1/namespaces/default/deployments", &json!({"apiVersion": "apps/v1",
                "kind": "Deployment", "metadata": {"name": "x"}, "spec": {"replicas": "str",
                "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}}})).await,
            400,
        );
        refused(
            "service spec",
            post(&flood, "/api/v1/namespaces/default/services", &json!({"apiVersion": "v1",
                "kind": "Service", "metadata": {"name": "x"}, "spec": "str"})).await,
            400,
        );
        refused("namespace collection", send(&flood, "DELETE", "/api/v1/namespaces", &[], Vec::new()).await, 405);
        refused(
            "impersonation",
            send(&flood, "GET", "/api/v1/namespaces", &[("Impersonate-Group", "g")], Vec::new()).await,
            400,
        );
        let copies: Vec<Value> = (0..17)
            .map(|i| json!({"op": "copy", "from": "/data", "path": format!("/data/m{i}")}))
            .collect();
        let patch = [("content-type", "application/json-patch+json")];
        refused(
            "copies",
            send(&flood, "PATCH", "/api/v1/namespaces/default/configmaps/target?dryRun=All", &patch,
                Value::Array(copies).to_string().into_bytes()).await,
            413,
        );
        let (code, status) = send(&flood, "PATCH", "/api/v1/namespaces/default/configmaps/target",
            &[("content-type", "application/strategic-merge-patch+json")],
            br#"{"$setElementOrder/data": 5, "$patch": "bogus"}"#.to_vec()).await;
        assert!((400..500).contains(&code) && status["kind"] == "Status", "{code} {status}");
        // A body announced over the limit is answered 413 before it is sent.
        let mut big = raw_tls_as(port, Some(identity(&flood_conf))).await;
        big.write_all(b"POST /clusters/flood/api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10485760\r\n\r\n{")
            .await
            .expect("head");
        let mut buf = [0u8; 1024];
        let n = tokio::time::timeout(Duration::from_secs(5), big.read(&mut buf))
            .await
            .expect("answered at once")
            .expect("read");
        let answer = String::from_utf8_lossy(&buf[..n]);
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
        assert!(answer.contains("\"kind\":\"Status\""), "{answer}");
        let (code, _) = send(&flood, "GET",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Aaggregate-to-admin", &[], Vec::new()).await;
        assert_eq!(code, 200, "percent-encoded names are decoded");
        assert_eq!(snapshot(&flood).await, before, "a refused request changed storage");
        assert!(alive(pid), "the server exited:\n{}", server.log());

        // --- At the edge: an anonymous client's body is never read.
        let rss_before_bodies = rss_kib(pid);
        let mut anonymous = Vec::new();
        for _ in 0..100 {
            anonymous.push(tokio::spawn(async move {
                let mut s = raw_tls(port).await;
                let head = format!(
                    "POST /clusters/quiet/api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                    3 * 1024 * 1024
                );
                s.write_all(head.as_bytes()).await.expect("head");
                // The answer comes before the body is sent.
                let mut buf = [0u8; 512];
                let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
                    .await
                    .expect("answered before the body")
                    .expect("read");
                String::from_utf8_lossy(&buf[..n]).into_owned()
            }));
        }
        for a in anonymous {
            let answer = a.await.expect("task");
            assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
        }
        let grown = rss_kib(pid).saturating_sub(rss_before_bodies);
        assert!(grown < 64 * 1024, "RSS grew by {grown} KiB for unread bodies");

        // A client that never finishes its headers is cut off at the header timeout.
        let started = Instant::now();
        let mut slow = raw_tls(port).await;
        slow.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n").await.expect("partial head");
        assert!(read_to_close(&mut slow, Duration::from_secs(10)).await.is_some(), "slow headers held open");
        assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());

        // A body cut short is answered at the request timeout.
        let mut cut = raw_tls_as(port, Some(identity(&flood_conf))).await;
        cut.write_all(b"POST /clusters/flood/api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"kind\":")
            .await
            .expect("partial body");
        let answer = read_to_close(&mut cut, Duration::from_secs(10)).await.unwrap_or_default();
        assert!(answer.starts_with("HTTP/1.1 504"), "{answer}");

        // --- Isolation: the flood cluster creates as fast as it can on 32 connections while
        // slow clients hold 50 more; the quiet cluster measures its own requests.
        let stop = Arc::new(AtomicBool::new(false));
        let created = Arc::new(AtomicU64::new(0));
        let throttled = Arc::new(AtomicU64::new(0));
        let mut flooders = Vec::new();
        for w in 0..32 {
            let (flood, stop, created, throttled) =
                (flood.clone(), stop.clone(), created.clone(), throttled.clone());
            flooders.push(tokio::spawn(async move {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let (code, _) = post(&flood, "/api/v1/namespaces/default/configmaps",
                        &json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": format!("f-{w}-{i}")}, "data": {"k": "v"}})).await;
                    match code {
                        201 => created.fetch_add(1, Ordering::Relaxed),
                        429 => throttled.fetch_add(1, Ordering::Relaxed),
                        other => panic!("flood create answered {other}"),
                    };
                }
            }));
        }
        let mut slowpokes = Vec::new();
        for _ in 0..50 {
            let stop = stop.clone();
            slowpokes.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let mut s = raw_tls(port).await;
                    let _ = s.write_all(b"GET /version HTTP/1.1\r\n").await;
                    let _ = read_to_close(&mut s, Duration::from_secs(5)).await;
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut latencies = Vec::new();
        let measuring = Instant::now();
        let mut i = 0;
        while measuring.elapsed() < Duration::from_secs(6) {
            i += 1;
            let t = Instant::now();
            let (code, body) = post(&quiet, "/api/v1/namespaces/default/configmaps",
                &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("q-{i}")}})).await;
            assert_eq!(code, 201, "{body}");
            latencies.push(t.elapsed());
            let t = Instant::now();
            let (code, _) = send(&quiet, "GET", &format!("/api/v1/namespaces/default/configmaps/q-{i}"), &[], Vec::new()).await;
            assert_eq!(code, 200);
            latencies.push(t.elapsed());
        }
        stop.store(true, Ordering::Relaxed);
        for f in flooders {
            f.await.expect("flooder");
        }
        for s in slowpokes {
            let _ = s.await;
        }
        let p99 = p99(latencies.clone());
        let flooded = created.load(Ordering::Relaxed);
        eprintln!(
            "quiet cluster: {} requests, p99 {p99:?}; flood cluster: {flooded} created, {} throttled",
            latencies.len(),
            throttled.load(Ordering::Relaxed)
        );
        assert!(flooded > 100, "the flood did not run ({flooded})");
        assert!(p99 < Duration::from_millis(100), "quiet p99 {p99:?} under a flood");
        assert!(alive(pid), "the server exited:\n{}", server.log());
        // The quiet cluster holds only what it created itself.
        let quiet_after = snapshot(&quiet).await;
        assert_eq!(
            quiet_after.iter().filter(|l| !l.contains("configmaps default/q-")).count(),
            quiet_before.len()
        );
        let rss_end = rss_kib(pid);
        eprintln!("RSS: {} MiB at start, {} MiB at the end", rss_start / 1024, rss_end / 1024);
        assert!(rss_end < 1024 * 1024, "RSS {rss_end} KiB above 1 GiB");
    });
}
