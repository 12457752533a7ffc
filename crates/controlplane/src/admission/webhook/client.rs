//! Calling one webhook (admission or conversion): where it is (a URL, or a Service of the same cluster resolved through
//! its endpoints), TLS verified against `caBundle` (else the system's roots) with the server
//! name upstream uses (`<service>.<namespace>.svc` for a service), one POST of the review
//! under the webhook's timeout, and a bounded response.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;

use super::config::Target;
use crate::ControlPlane;

/// The largest response a webhook may send (upstream reads at most 3 MiB as well).
const MAX_RESPONSE_BYTES: usize = 3 * 1024 * 1024;
/// Where the system's trusted roots are on Debian-like systems.
const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Why a call failed (the text after `failed to call webhook: `).
#[derive(Debug)]
pub struct CallError(pub String);

/// The address to dial and the URL as upstream prints it.
struct Endpoint {
    host: String,
    port: u16,
    server_name: String,
    path: String,
    url: String,
}

fn endpoint(
    cp: &ControlPlane,
    cluster: &str,
    target: &Target,
    timeout: Duration,
) -> Result<Endpoint, CallError> {
    let query = format!("timeout={}s", timeout.as_secs());
    match target {
        Target::Url(url) => {
            let uri: Uri = url
                .parse()
                .map_err(|e| CallError(format!("invalid URL {url:?}: {e}")))?;
            let host = uri
                .host()
                .ok_or_else(|| CallError(format!("invalid URL {url:?}: no host")))?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = uri.port_u16().unwrap_or(443);
            let path = uri.path().to_string();
            Ok(Endpoint {
                server_name: host.clone(),
                host,
                port,
                path: format!("{path}?{query}"),
                url: format!("{url}?{query}"),
            })
        }
        Target::Service {
            namespace,
            name,
            path,
            port,
        } => {
            let (ip, target_port) = service_endpoint(cp, cluster, namespace, name, *port)?;
            let path = if path.is_empty() { "/" } else { path };
            Ok(Endpoint {
                host: ip,
                port: target_port,
                server_name: format!("{name}.{namespace}.svc"),
                path: format!("{path}?{query}"),
                url: format!("https://{name}.{namespace}.svc:{port}{path}?{query}"),
            })
        }
    }
}

/// A ready address and port of a Service's port `port` in `cluster`, from its Endpoints.
fn service_endpoint(
    cp: &ControlPlane,
    cluster: &str,
    namespace: &str,
    name: &str,
    port: u16,
) -> Result<(String, u16), CallError> {
    let cache = cp.store.cache_for_reads(cluster);
    let svc = cache
        .get("", "services", cluster, namespace, name)
        .ok_or_else(|| CallError(format!("service \"{name}\" not found")))?
        .value();
    let port_name = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .and_then(|ps| {
            ps.iter()
                .find(|p| p.get("port").and_then(Value::as_u64) == Some(u64::from(port)))
        })
        .map(|p| {
            p.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
        .ok_or_else(|| CallError(format!("service \"{name}\" has no port {port}")))?;
    let eps = cache
        .get("", "endpoints", cluster, namespace, name)
        .map(|e| e.value());
    let subsets = eps
        .as_ref()
        .and_then(|e| e.get("subsets"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for ss in &subsets {
        let Some(ep_port) = ss
            .get("ports")
            .and_then(Value::as_array)
            .and_then(|ps| {
                ps.iter()
                    .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == port_name)
            })
            .and_then(|p| p.get("port").and_then(Value::as_u64))
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        if let Some(ip) = ss
            .get("addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(|a| a.get("ip"))
            .and_then(Value::as_str)
        {
            return Ok((ip.to_string(), ep_port));
        }
    }
    Err(CallError(format!(
        "service \"{namespace}/{name}\" has no ready endpoints"
    )))
}

fn tls_config(ca_bundle: Option<&[u8]>) -> Result<Arc<rustls::ClientConfig>, CallError> {
    let bad = |e: String| CallError(format!("tls: {e}"));
    let mut roots = rustls::RootCertStore::empty();
    let system;
    let pem: &[u8] = match ca_bundle {
        Some(b) => b,
        None => {
            system = std::fs::read(SYSTEM_ROOTS).unwrap_or_default();
            &system
        }
    };
    for c in CertificateDer::pem_slice_iter(pem) {
        let c = c.map_err(|e| bad(e.to_string()))?;
        // A bundle may hold certificates this verifier cannot use; the others still count.
        let _ = roots.add(c);
    }
    if roots.is_empty() && ca_bundle.is_some() {
        return Err(bad("caBundle holds no usable certificate".into()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A connection to a webhook, ready for another request once idle.
type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;
/// (host, port, TLS server name, hash of the CA bundle): what a kept connection is good for.
type PoolKey = (String, u16, String, u64);

/// Idle connections kept between calls (upstream's HTTP transport keeps them too: a TLS
/// handshake per call would cost more than the call).
static IDLE: LazyLock<Mutex<HashMap<PoolKey, Vec<Sender>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));
/// TLS configurations by CA bundle hash (0: the system's roots).
static TLS: LazyLock<Mutex<HashMap<u64, Arc<rustls::ClientConfig>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));
/// Idle connections kept per destination.
const MAX_IDLE_PER_KEY: usize = 16;
/// Destinations (and CA bundles) remembered before the tables start over.
const MAX_KEYS: usize = 512;

fn hash_of(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish() | 1
}

fn take_idle(key: &PoolKey) -> Option<Sender> {
    let mut idle = IDLE.lock();
    let list = idle.get_mut(key)?;
    while let Some(s) = list.pop() {
        if !s.is_closed() {
            return Some(s);
        }
    }
    None
}

fn put_idle(key: PoolKey, sender: Sender) {
    if sender.is_closed() {
        return;
    }
    let mut idle = IDLE.lock();
    if idle.len() >= MAX_KEYS && !idle.contains_key(&key) {
        idle.clear();
    }
    let list = idle.entry(key).or_default();
    if list.len() < MAX_IDLE_PER_KEY {
        list.push(sender);
    }
}

fn cached_tls(ca_bundle: Option<&[u8]>) -> Result<Arc<rustls::ClientConfig>, CallError> {
    let key = ca_bundle.map(hash_of).unwrap_or(0);
    if let Some(c) = TLS.lock().get(&key) {
        return Ok(c.clone());
    }
    let c = tls_config(ca_bundle)?;
    let mut table = TLS.lock();
    if table.len() >= MAX_KEYS {
        table.clear();
    }
    table.insert(key, c.clone());
    Ok(c)
}

/// Upstream-like text of a dial error (`dial tcp 127.0.0.1:1: connect: connection refused`).
fn dial_text(addr: &str, e: &std::io::Error) -> String {
    let what = match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_string(),
        std::io::ErrorKind::TimedOut => "i/o timeout".to_string(),
        _ => e.to_string(),
    };
    format!("dial tcp {addr}: {what}")
}

/// POSTs `review` to `target` (verified with `ca_bundle`) and returns the response's JSON,
/// all within `timeout`.
pub async fn call(
    cp: &ControlPlane,
    cluster: &str,
    target: &Target,
    ca_bundle: Option<&[u8]>,
    review: &Value,
    timeout: Duration,
) -> Result<Value, CallError> {
    let ep = endpoint(cp, cluster, target, timeout)?;
    let url = ep.url.clone();
    let post = |why: String| CallError(format!("Post \"{url}\": {why}"));
    let key: PoolKey = (
        ep.host.clone(),
        ep.port,
        ep.server_name.clone(),
        ca_bundle.map(hash_of).unwrap_or(0),
    );
    let work = async {
        let connect = || async {
            let tls = cached_tls(ca_bundle)?;
            let addr = if ep.host.contains(':') {
                format!("[{}]:{}", ep.host, ep.port)
            } else {
                format!("{}:{}", ep.host, ep.port)
            };
            let tcp = TcpStream::connect((ep.host.as_str(), ep.port))
                .await
                .map_err(|e| post(dial_text(&addr, &e)))?;
            let _ = tcp.set_nodelay(true);
            let name = ServerName::try_from(ep.server_name.clone())
                .map_err(|e| post(format!("tls: {e}")))?;
            let io = tokio_rustls::TlsConnector::from(tls)
                .connect(name, tcp)
                .await
                .map_err(|e| post(format!("tls: {e}")))?;
            let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
                .await
                .map_err(|e| post(e.to_string()))?;
            // Runs until the connection closes (its sender dropped, or the peer gone).
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok::<Sender, CallError>(sender)
        };
        let body = Bytes::from(serde_json::to_vec(review).map_err(|e| post(e.to_string()))?);
        let request = || {
            Request::post(ep.path.as_str())
                .header(
                    http::header::HOST,
                    format!("{}:{}", ep.server_name, ep.port),
                )
                .header(http::header::CONTENT_TYPE, "application/json")
                .header(http::header::ACCEPT, "application/json, */*")
                .header(http::header::USER_AGENT, "kube-apiserver-admission")
                .body(Full::new(body.clone()))
                .map_err(|e| post(e.to_string()))
        };
        // A kept connection is used once it can take a request (the previous response's
        // end may still be in flight); one that closed meanwhile is replaced.
        let kept = match take_idle(&key) {
            Some(mut s) => s.ready().await.is_ok().then_some(s),
            None => None,
        };
        let (mut sender, reused) = match kept {
            Some(s) => (s, true),
            None => (connect().await?, false),
        };
        let resp = match sender.send_request(request()?).await {
            Ok(r) => r,
            // A kept connection the peer closed meanwhile: once more on a new one.
            Err(_) if reused => {
                sender = connect().await?;
                sender
                    .send_request(request()?)
                    .await
                    .map_err(|e| post(e.to_string()))?
            }
            Err(e) => return Err(post(e.to_string())),
        };
        let status = resp.status();
        let bytes = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| post(e.to_string()))?
            .to_bytes();
        put_idle(key.clone(), sender);
        if !status.is_success() {
            return Err(CallError(format!(
                "the server responded with the status code {} but did not return more information",
                status.as_u16()
            )));
        }
        serde_json::from_slice::<Value>(&bytes)
            .map_err(|e| CallError(format!("error decoding the response: {e}")))
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(post(
            "context deadline exceeded (Client.Timeout exceeded while awaiting headers)".into(),
        )),
    }
}
