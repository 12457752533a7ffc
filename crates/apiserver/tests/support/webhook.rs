//! An admission webhook server for tests: HTTPS on loopback with a certificate of its own CA
//! (for `127.0.0.1` and `hooks.webhooks.svc`), answering every `AdmissionReview` with what a
//! test function decides and keeping each request it was sent.
#![allow(dead_code)]

use std::convert::Infallible;
use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};

/// Decides the `response` (without `uid`) for a request sent to a path.
pub type Answer = Arc<dyn Fn(&str, &Value) -> Value + Send + Sync>;

/// A running webhook server; stops when dropped.
pub struct HookServer {
    pub port: u16,
    /// The CA of its serving certificate, base64 for `caBundle`.
    pub ca_bundle: String,
    /// Every `request` it was sent, with its path.
    pub seen: Arc<Mutex<Vec<(String, Value)>>>,
    /// How many TLS connections it accepted.
    pub connections: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HookServer {
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// The requests sent to `path`.
    pub fn requests(&self, path: &str) -> Vec<Value> {
        self.seen
            .lock()
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, r)| r.clone())
            .collect()
    }
}

/// Allows with a JSON patch.
pub fn patch(ops: Value) -> Value {
    json!({
        "allowed": true,
        "patchType": "JSONPatch",
        "patch": base64::engine::general_purpose::STANDARD.encode(ops.to_string()),
    })
}

/// Starts a server on loopback answering with `answer`.
pub async fn start(answer: impl Fn(&str, &Value) -> Value + Send + Sync + 'static) -> HookServer {
    start_on("127.0.0.1", answer).await
}

/// Starts a server on a local address `ip`.
pub async fn start_on(
    ip: &str,
    answer: impl Fn(&str, &Value) -> Value + Send + Sync + 'static,
) -> HookServer {
    let answer: Answer = Arc::new(answer);
    let ca = pki::Ca::generate("webhook-ca").unwrap();
    let pair = ca
        .issue_server(
            "hooks",
            &["127.0.0.1".to_string(), "hooks.webhooks.svc".to_string()],
        )
        .unwrap();
    let chain = CertificateDer::pem_slice_iter(pair.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(pair.key_pem.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let seen2 = seen.clone();
    let connections: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
    let counted = connections.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            let answer = answer.clone();
            let seen = seen2.clone();
            let counted = counted.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let answer = answer.clone();
                    let seen = seen.clone();
                    async move {
                        let path = req.uri().path().to_string();
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let request = review.get("request").cloned().unwrap_or(Value::Null);
                        seen.lock().push((path.clone(), request.clone()));
                        let mut response = answer(&path, &request);
                        response["uid"] = request["uid"].clone();
                        let out = json!({
                            "apiVersion": review["apiVersion"],
                            "kind": review["kind"],
                            "response": response,
                        });
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(out.to_string()))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    HookServer {
        port,
        ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca.pair.cert_pem.as_bytes()),
        seen,
        connections,
        task,
    }
}
