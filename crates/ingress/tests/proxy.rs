//! The proxy over real sockets on loopback: backends are small HTTP servers of the test, the
//! routes are set as the controller sets them, and requests go through plain TCP and TLS.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use ingress::proxy::{Proxy, Routes};
use ingress::rules::{BackendRef, ServicePort, Table};
use ingress::tls::{Certificates, certified_key, fake_certificate};
use k8s_openapi::api::networking::v1::Ingress;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A backend answering `<name> <path> xff=<X-Forwarded-For> proto=<X-Forwarded-Proto>`, and
/// echoing the bytes of an upgraded connection after `101`.
async fn backend(name: &'static str) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = l.accept().await else { return };
            tokio::spawn(async move {
                let svc =
                    hyper::service::service_fn(move |mut req: Request<Incoming>| async move {
                        if req.headers().contains_key("upgrade") {
                            let up = hyper::upgrade::on(&mut req);
                            tokio::spawn(async move {
                                if let Ok(u) = up.await {
                                    let mut u = TokioIo::new(u);
                                    let mut buf = [0u8; 64];
                                    while let Ok(n) = u.read(&mut buf).await {
                                        if n == 0 || u.write_all(&buf[..n]).await.is_err() {
                                            break;
                                        }
                                    }
                                }
                            });
                            return Ok::<_, std::convert::Infallible>(
                                Response::builder()
                                    .status(101)
                                    .header("connection", "upgrade")
                                    .header("upgrade", "echo")
                                    .body(Full::new(Bytes::new()))
                                    .unwrap(),
                            );
                        }
                        let h = |k: &str| {
                            req.headers()
                                .get(k)
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or("")
                                .to_string()
                        };
                        let text = format!(
                            "{name} {} xff={} proto={} host={}",
                            req.uri().path(),
                            h("x-forwarded-for"),
                            h("x-forwarded-proto"),
                            h("host")
                        );
                        Ok(Response::new(Full::new(Bytes::from(text))))
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .with_upgrades()
                    .await;
            });
        }
    });
    addr
}

fn ingress(spec: serde_json::Value, annotations: serde_json::Value) -> Arc<Ingress> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"namespace": "d", "name": "i", "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": annotations},
            "spec": spec,
        }))
        .unwrap(),
    )
}

fn backend_ref(service: &str) -> BackendRef {
    BackendRef {
        namespace: "d".into(),
        service: service.into(),
        port: ServicePort::Number(80),
    }
}

fn path(svc: &str) -> serde_json::Value {
    json!({"path": "/", "pathType": "Prefix", "backend": {"service": {"name": svc, "port": {"number": 80}}}})
}

struct Running {
    http: SocketAddr,
    https: SocketAddr,
    ca: Vec<u8>,
    /// Holds the refusing endpoint's port (bound, never listening) so no other listener of a
    /// test running alongside gets it.
    _refused: tokio::net::TcpSocket,
}

/// A proxy with hosts a (two endpoints, the first refusing), b (TLS) and empty (no endpoint).
async fn start() -> Running {
    let a = backend("a").await;
    let b = backend("b").await;
    // A port nothing listens on: its connections are refused. It stays bound (a port let go
    // was once taken by another test's listener, which answered instead of refusing).
    let refused_socket = tokio::net::TcpSocket::new_v4().unwrap();
    refused_socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let refused = refused_socket.local_addr().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["b.test".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let certs = Arc::new(Certificates::new(fake_certificate().unwrap()));
    certs.set(HashMap::from([(
        "b.test".to_string(),
        Arc::new(
            certified_key(
                Some(cert.pem().as_bytes()),
                Some(key.serialize_pem().as_bytes()),
            )
            .unwrap(),
        ),
    )]));
    let proxy = Proxy::new(certs);
    let table = Table::build(&[ingress(
        json!({
        "tls": [{"hosts": ["b.test"], "secretName": "b"}],
        "rules": [
            {"host": "a.test", "http": {"paths": [path("a")]}},
            {"host": "b.test", "http": {"paths": [path("b")]}},
            {"host": "empty.test", "http": {"paths": [path("empty")]}},
        ]}),
        json!({"nginx.ingress.kubernetes.io/proxy-body-size": "1k"}),
    )]);
    proxy.set_routes(Routes {
        table,
        endpoints: HashMap::from([
            (backend_ref("a"), vec![refused, a]),
            (backend_ref("b"), vec![b]),
            (backend_ref("empty"), vec![]),
        ]),
    });
    let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let https = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let running = Running {
        http: http.local_addr().unwrap(),
        https: https.local_addr().unwrap(),
        ca: cert.der().to_vec(),
        _refused: refused_socket,
    };
    tokio::spawn(proxy.clone().serve_http(http, std::future::pending()));
    tokio::spawn(proxy.serve_https(https, std::future::pending()));
    running
}

/// One HTTP/1.1 request over `io`: (status, headers, body).
async fn request<IO>(io: IO, req: Request<Full<Bytes>>) -> (u16, hyper::HeaderMap, String)
where
    IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
    tokio::spawn(conn);
    let resp = send.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

fn get(host: &str, path: &str) -> Request<Full<Bytes>> {
    Request::builder()
        .uri(path)
        .header("host", host)
        .body(Full::new(Bytes::new()))
        .unwrap()
}

async fn http(r: &Running, req: Request<Full<Bytes>>) -> (u16, hyper::HeaderMap, String) {
    let s = TcpStream::connect(r.http).await.unwrap();
    request(TokioIo::new(s), req).await
}

async fn tls(r: &Running, sni: &str) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(r.ca.clone().into()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let s = TcpStream::connect(r.https).await.unwrap();
    connector
        .connect(sni.to_string().try_into().unwrap(), s)
        .await
        .unwrap()
}

#[tokio::test]
async fn hosts_route_to_their_backends_with_forwarded_headers_skipping_a_refusing_endpoint() {
    let r = start().await;
    for _ in 0..4 {
        let (status, _, body) = http(&r, get("a.test", "/x")).await;
        assert_eq!(status, 200, "{body}");
        assert!(
            body.starts_with("a /x xff=127.0.0.1 proto=http host=a.test"),
            "{body}"
        );
    }
    let (status, _, body) = http(&r, get("unknown.test", "/")).await;
    assert_eq!((status, body.as_str()), (404, "default backend - 404\n"));
    let (status, _, _) = http(&r, get("empty.test", "/")).await;
    assert_eq!(status, 503);
}

#[tokio::test]
async fn tls_is_served_with_the_secrets_certificate_and_plain_http_is_redirected() {
    let r = start().await;
    let s = tls(&r, "b.test").await;
    let (status, _, body) = request(TokioIo::new(s), get("b.test", "/y")).await;
    assert_eq!(status, 200);
    assert!(body.starts_with("b /y xff=127.0.0.1 proto=https"), "{body}");
    let (status, headers, _) = http(&r, get("b.test", "/y?q=1")).await;
    assert_eq!(status, 308);
    assert_eq!(headers["location"], "https://b.test/y?q=1");
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_with_413() {
    let r = start().await;
    let big = Request::builder()
        .method("POST")
        .uri("/")
        .header("host", "a.test")
        .body(Full::new(Bytes::from(vec![b'x'; 4096])))
        .unwrap();
    let (status, _, _) = http(&r, big).await;
    assert_eq!(status, 413);
    // A small body is kept, so the endpoint refusing connections is skipped for it too.
    for _ in 0..3 {
        let small = Request::builder()
            .method("POST")
            .uri("/")
            .header("host", "a.test")
            .body(Full::new(Bytes::from(vec![b'x'; 100])))
            .unwrap();
        assert_eq!(http(&r, small).await.0, 200);
    }
}

#[tokio::test]
async fn an_upgraded_connection_is_carried_both_ways() {
    let r = start().await;
    let mut s = TcpStream::connect(r.http).await.unwrap();
    s.write_all(
        b"GET /ws HTTP/1.1\r\nHost: a.test\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\n",
    )
    .await
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    s.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    s.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"ping");
}
