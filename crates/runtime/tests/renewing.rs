//! A client for a kubeconfig whose certificate is renewed in place (`runtime::renewing`),
//! against a TLS server on loopback that requires client certificates: the renewed certificate
//! is presented and connections made with the old one close.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use parking_lot::Mutex;
use runtime::renewing::client;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

/// A TLS server on loopback that requires a client certificate of `ca` and answers `/version`
/// with the index of the presented certificate in `known` as `gitVersion`; `/hang` sends
/// headers and then nothing, like a quiet watch.
async fn serve(ca: &pki::Ca, known: Arc<Mutex<Vec<Vec<u8>>>>) -> u16 {
    let serving = ca
        .issue_server("server", &["127.0.0.1".to_string()])
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.pair.cert_pem.as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider.clone())
            .build()
            .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes()).unwrap();
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![der(&serving.cert_pem).into()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let known = known.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let presented = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .map(|c| c.to_vec())
                    .unwrap_or_default();
                let index = known.lock().iter().position(|k| *k == presented);
                let svc = hyper::service::service_fn(
                    move |req: http::Request<hyper::body::Incoming>| {
                        let version = format!("{index:?}");
                        async move {
                            let body = if req.uri().path() == "/hang" {
                                http_body_util::StreamBody::new(futures::stream::pending::<
                                    Result<hyper::body::Frame<Bytes>, io::Error>,
                                >())
                                .boxed()
                            } else {
                                let info = serde_json::json!({"major": "1", "minor": "33", "gitVersion": version, "gitCommit": "", "gitTreeState": "", "buildDate": "", "goVersion": "", "compiler": "", "platform": ""});
                                http_body_util::Full::new(Bytes::from(info.to_string()))
                                    .map_err(|never| match never {})
                                    .boxed()
                            };
                            Ok::<_, io::Error>(http::Response::new(body))
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    port
}

fn write_kubeconfig(path: &Path, port: u16, ca: &pki::Ca, client: &pki::CertPair) {
    let conf = pki::kubeconfig(
        "test",
        &format!("https://127.0.0.1:{port}"),
        &ca.pair.cert_pem,
        "alice",
        client,
    );
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, conf).unwrap();
    std::fs::rename(tmp, path).unwrap();
}

#[tokio::test]
async fn a_renewed_client_certificate_is_presented_and_connections_with_the_old_one_close() {
    let ca = pki::Ca::generate("test-ca").unwrap();
    let first = ca.issue_client("alice", &[]).unwrap();
    let second = ca.issue_client("alice", &[]).unwrap();
    let known = Arc::new(Mutex::new(vec![
        der(&first.cert_pem),
        der(&second.cert_pem),
    ]));
    let port = serve(&ca, known).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    write_kubeconfig(&path, port, &ca, &first);
    let client = client(&path, None).await.unwrap();
    assert_eq!(
        client.apiserver_version().await.unwrap().git_version,
        "Some(0)"
    );

    // A long request is open on a connection made with the first certificate: its headers
    // came back before the file is renewed (renewing first would race the request).
    let req = http::Request::get("/hang")
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let hanging = tokio::spawn(async move {
        resp.into_body()
            .collect()
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    // The file is renewed: the open request ends, the next ones present the new one.
    write_kubeconfig(&path, port, &ca, &second);
    let ended = tokio::time::timeout(Duration::from_secs(10), hanging)
        .await
        .expect("the connection made with the old certificate closes")
        .unwrap();
    assert!(ended.is_err(), "{ended:?}");
    assert_eq!(
        client.apiserver_version().await.unwrap().git_version,
        "Some(1)"
    );
}

#[tokio::test]
async fn a_kubeconfig_without_a_client_certificate_gives_a_plain_client_and_a_broken_one_an_error()
{
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: http://127.0.0.1:1\n  name: c\ncontexts:\n- context:\n    cluster: c\n    user: u\n  name: u@c\ncurrent-context: u@c\nusers:\n- name: u\n  user:\n    token: abc\n",
    )
    .unwrap();
    assert!(client(&path, None).await.is_ok());
    std::fs::write(&path, "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://127.0.0.1:1\n  name: c\ncontexts:\n- context:\n    cluster: c\n    user: u\n  name: u@c\ncurrent-context: u@c\nusers:\n- name: u\n  user:\n    client-certificate-data: bm90IGEgY2VydA==\n    client-key-data: bm90IGEga2V5\n").unwrap();
    let Err(e) = client(&path, None).await else {
        panic!("a kubeconfig with a broken certificate gives a client");
    };
    assert!(e.to_string().contains("kubeconfig"), "{e}");
}
