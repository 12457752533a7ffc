//! The kubelet proxy of shared clusters (vcluster's `proxyKubelets`): a shared cluster's
//! mirrored nodes name this proxy as their kubelet, so `kubectl logs`, `exec`, `attach` and
//! `port-forward` in the tenant cluster reach the host pod.
//!
//! One listener per shared cluster, as one DNS server per cluster: the port tells the
//! cluster, and the listener takes only client certificates of that cluster's CA (the API
//! server's kubelet client certificate is issued by the addressed cluster's CA). The caller
//! is then authorised as a kubelet does it — a SubjectAccessReview in the tenant cluster for
//! `nodes/proxy` of the pod's node — and the request goes on to the host node's kubelet with
//! the namespace and pod translated, presenting the platform's kubelet client identity.
//!
//! The proxy speaks the kubelet's HTTP API, not the Kubernetes API: the syncer stays an API
//! client for everything it reads and writes.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode, Uri};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use streaming::proxy::Body;

/// The identity the proxy presents to host kubelets (a client certificate they trust:
/// issued by the root cluster's CA, allowed `nodes/proxy`).
#[derive(Clone)]
pub struct KubeletIdentity {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for KubeletIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeletIdentity").finish_non_exhaustive()
    }
}

/// Who called, from their verified client certificate.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    pub user: String,
    pub groups: Vec<String>,
}

/// A kubelet API request aimed at a tenant pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRequest {
    /// `containerLogs`, `exec`, `attach`, `portForward`.
    pub kind: String,
    pub namespace: String,
    pub pod: String,
    /// Whether the path carried the pod's uid (`/exec/ns/pod/uid/container`).
    pub with_uid: bool,
    /// What follows the pod (and uid): the container, if any.
    pub rest: Vec<String>,
}

/// Reads a kubelet API path naming a pod.
pub fn parse_path(path: &str) -> Option<PodRequest> {
    let seg: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let kind = *seg.first()?;
    let (with_uid, rest): (bool, &[&str]) = match (kind, seg.len()) {
        ("containerLogs", 4) => (false, &seg[3..]),
        ("exec" | "attach", 4) => (false, &seg[3..]),
        ("exec" | "attach", 5) => (true, &seg[4..]),
        ("portForward", 3) => (false, &[]),
        ("portForward", 4) => (true, &[]),
        _ => return None,
    };
    if seg[1].is_empty() || seg[2].is_empty() {
        return None;
    }
    Some(PodRequest {
        kind: kind.to_string(),
        namespace: seg[1].to_string(),
        pod: seg[2].to_string(),
        with_uid,
        rest: rest.iter().map(|s| s.to_string()).collect(),
    })
}

impl PodRequest {
    /// The host kubelet's path for the host pod.
    pub fn host_path(&self, namespace: &str, pod: &str, uid: Option<&str>) -> String {
        let mut out = format!("/{}/{namespace}/{pod}", self.kind);
        if self.with_uid
            && let Some(uid) = uid
        {
            out.push('/');
            out.push_str(uid);
        }
        for r in &self.rest {
            out.push('/');
            out.push_str(r);
        }
        out
    }
}

impl PodRequest {
    /// The same request as the host's API server takes it for the host pod (how the proxy
    /// reaches a host whose kubelets are not its to dial): `pods/{pod}/log`, `exec`,
    /// `attach` or `portforward`, the container as a parameter, and the kubelet's stream
    /// parameters in the API's words (`input` → `stdin`, `output` → `stdout`, `error` →
    /// `stderr`); the others (`command`, `tty`, `follow`, `tailLines`, `ports`…) are the same.
    pub fn api_path(&self, namespace: &str, pod: &str, query: Option<&str>) -> String {
        let sub = match self.kind.as_str() {
            "containerLogs" => "log",
            "exec" => "exec",
            "attach" => "attach",
            _ => "portforward",
        };
        let mut params: Vec<String> = Vec::new();
        if let Some(c) = self.rest.first() {
            params.push(format!("container={c}"));
        }
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let k = match k {
                "input" => "stdin",
                "output" => "stdout",
                "error" => "stderr",
                // Named by the path, not taken twice.
                "container" => continue,
                other => other,
            };
            params.push(format!("{k}={v}"));
        }
        let mut out = format!("/api/v1/namespaces/{namespace}/pods/{pod}/{sub}");
        if !params.is_empty() {
            out.push('?');
            out.push_str(&params.join("&"));
        }
        out
    }
}

/// The kubelet's authorization verb of an HTTP method.
pub fn verb(method: &http::Method) -> &'static str {
    match *method {
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "get",
    }
}

/// A plain-text answer, as a kubelet gives its errors.
pub fn text(status: StatusCode, message: &str) -> Response<Body> {
    let mut r = Response::new(
        http_body_util::Full::new(Bytes::from(format!("{message}\n"))).boxed_unsync(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The user and groups of a client certificate (CN and O, as Kubernetes reads them).
fn caller_of(cert: &CertificateDer<'_>) -> Option<Caller> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let subject = parsed.subject();
    let user = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Some(Caller { user, groups })
}

/// What serves one shared cluster's proxied kubelet requests.
pub trait Handler: Send + Sync + 'static {
    fn handle(
        self: Arc<Self>,
        cluster: String,
        caller: Caller,
        req: Request<Incoming>,
    ) -> futures::future::BoxFuture<'static, Response<Body>>;
}

/// One cluster's listener; stops when dropped.
pub struct ProxyServer {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for ProxyServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts cluster `cluster`'s listener on `ip` (any free port), taking client certificates
/// of `client_ca_pem` only.
pub async fn start(
    ip: IpAddr,
    cluster: &str,
    client_ca_pem: &str,
    handler: Arc<dyn Handler>,
) -> Result<ProxyServer, String> {
    let ca = pki::Ca::generate("matryoshka-syncer-kubelet").map_err(|e| e.to_string())?;
    let serving = ca
        .issue_server("matryoshka-syncer", &[ip.to_string()])
        .map_err(|e| e.to_string())?;
    let chain = CertificateDer::pem_slice_iter(serving.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let key =
        PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes()).map_err(|e| e.to_string())?;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
        roots
            .add(c.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| e.to_string())?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind(SocketAddr::new(ip, 0))
        .await
        .map_err(|e| format!("listening on {ip}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let cluster = cluster.to_string();
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, handler, cluster) = (acceptor.clone(), handler.clone(), cluster.clone());
            tokio::spawn(async move {
                let handshake =
                    tokio::time::timeout(std::time::Duration::from_secs(10), acceptor.accept(tcp));
                let tls = match handshake.await {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(e)) => {
                        tracing::debug!(%cluster, error = %e, "kubelet proxy: TLS handshake failed");
                        return;
                    }
                    Err(_) => return,
                };
                let caller = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .and_then(caller_of);
                let Some(caller) = caller else { return };
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (handler, cluster, caller) =
                        (handler.clone(), cluster.clone(), caller.clone());
                    async move {
                        Ok::<_, std::convert::Infallible>(
                            handler.handle(cluster, caller, req).await,
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .with_upgrades()
                    .await;
            });
        }
    });
    Ok(ProxyServer { addr, task })
}

/// The URI of `path_and_query` at a host kubelet.
pub fn kubelet_uri(address: &str, port: u16, path: &str, query: Option<&str>) -> Option<Uri> {
    let host = if address.contains(':') {
        format!("[{address}]")
    } else {
        address.to_string()
    };
    let pq = match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    format!("https://{host}:{port}{pq}").parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_paths_are_read_and_translated_with_or_without_a_uid() {
        let r = parse_path("/exec/default/web-1/main").expect("exec");
        assert_eq!(
            r.host_path("demo", "web-1-x-default-x-demo", Some("h-uid")),
            "/exec/demo/web-1-x-default-x-demo/main"
        );
        let r = parse_path("/exec/default/web-1/t-uid/main").expect("exec with uid");
        assert_eq!(
            r.host_path("demo", "web-1-x-default-x-demo", Some("h-uid")),
            "/exec/demo/web-1-x-default-x-demo/h-uid/main"
        );
        let r = parse_path("/portForward/default/web-1").expect("port-forward");
        assert_eq!(r.host_path("demo", "h", None), "/portForward/demo/h");
    }

    #[test]
    fn a_kubelet_request_becomes_the_host_api_servers_subresource_in_its_words() {
        let r = parse_path("/exec/default/web-1/main").expect("exec");
        assert_eq!(
            r.api_path(
                "guests",
                "web-1-x-default-x-demo",
                Some("command=cat&command=%2Fetc%2Fhostname&input=1&output=1&error=1&tty=0")
            ),
            "/api/v1/namespaces/guests/pods/web-1-x-default-x-demo/exec?container=main&command=cat&command=%2Fetc%2Fhostname&stdin=1&stdout=1&stderr=1&tty=0"
        );
        let r = parse_path("/containerLogs/default/web-1/main").expect("logs");
        assert_eq!(
            r.api_path("guests", "h", Some("follow=true&tailLines=10")),
            "/api/v1/namespaces/guests/pods/h/log?container=main&follow=true&tailLines=10"
        );
        let r = parse_path("/portForward/default/web-1").expect("port-forward");
        assert_eq!(
            r.api_path("guests", "h", Some("ports=8080")),
            "/api/v1/namespaces/guests/pods/h/portforward?ports=8080"
        );
        let r = parse_path("/attach/default/web-1/uid/main").expect("attach");
        assert_eq!(
            r.api_path("guests", "h", Some("container=evil&output=1")),
            "/api/v1/namespaces/guests/pods/h/attach?container=main&stdout=1"
        );
        let r = parse_path("/containerLogs/default/web-1/main").expect("logs");
        assert_eq!(r.rest, vec!["main".to_string()]);
        assert!(parse_path("/stats/summary").is_none());
        assert!(parse_path("/exec/default").is_none());
        assert!(parse_path("/exec//x/c").is_none());
    }

    #[test]
    fn the_caller_is_the_certificates_common_name_and_organizations() {
        let ca = pki::Ca::generate("cluster-ca").expect("ca");
        let pair = ca
            .issue_client("kube-apiserver-kubelet-client", &["system:masters"])
            .expect("client");
        let der = CertificateDer::from_pem_slice(pair.cert_pem.as_bytes()).expect("der");
        let caller = caller_of(&der).expect("a caller");
        assert_eq!(caller.user, "kube-apiserver-kubelet-client");
        assert_eq!(caller.groups, vec!["system:masters".to_string()]);
    }

    #[test]
    fn methods_map_to_the_kubelets_verbs() {
        assert_eq!(verb(&http::Method::GET), "get");
        assert_eq!(verb(&http::Method::POST), "create");
    }
}
