//! The HTTPS listener: TLS (rustls) with optional client certificates, HTTP/1.1 and HTTP/2 on
//! one port, bodies read with a size limit (except the registry's and those of the connect
//! subresources, which stream: [`crate::connect`]), graceful shutdown.
//!
//! Limits at the edge, before work ([`Options`]): a bounded number of connections; a
//! deadline for the TLS handshake and for request headers (upstream's 32 s); a request
//! timeout (upstream's 60 s) after which a request that is not long-running is answered
//! `504` while its handler finishes in the background, as upstream's timeout filter does (a
//! write is never cut in half); bodies read only once the caller is authenticated,
//! authorized and holds a flow-control seat ([`crate::flow`]), as a stream with the size
//! limit and within the request's deadline. Accept errors (out of file descriptors) back off
//! from 5 ms to 1 s and are logged at most once a second.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::status::ApiError;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::pki_types::CertificateDer;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::auth::{UserExt, UserInfo};
use crate::codec::MAX_BODY;
use crate::response::{self, Body};
use crate::server::ApiServer;
use crate::server::Caller;

/// Errors setting up the listener.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid certificate or key: {0}")]
    Pem(String),
    #[error("TLS configuration failed: {0}")]
    Tls(#[from] rustls::Error),
}

fn pem_certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Pem(e.to_string()))
}

/// The serving certificate, replaceable while the server runs (rotation without a restart),
/// and the certificates of the clusters' own hostnames ([`ServingCert::serve_hosts`]).
pub struct ServingCert {
    current: parking_lot::RwLock<Arc<rustls::sign::CertifiedKey>>,
    hosts: std::sync::OnceLock<HostCerts>,
}

/// Whether a name a client asks for by SNI is a cluster's hostname.
pub type KnownHost = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Certificates for clusters' hostnames, issued by the serving CA when a client first asks
/// for one by SNI, and kept for two thirds of their lifetime.
struct HostCerts {
    ca: pki::Ca,
    validity: Duration,
    known: KnownHost,
    issued: parking_lot::Mutex<
        std::collections::HashMap<String, (Arc<rustls::sign::CertifiedKey>, std::time::Instant)>,
    >,
}

/// How many hostnames' certificates are kept (the cache starts over beyond it).
const MAX_HOST_CERTS: usize = 10_000;

impl HostCerts {
    fn get(&self, host: &str) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        if !(self.known)(&host) {
            return None;
        }
        let now = std::time::Instant::now();
        if let Some((k, renew_at)) = self.issued.lock().get(&host)
            && now < *renew_at
        {
            return Some(k.clone());
        }
        let pair = match self.ca.issue_server_for(
            "kube-apiserver",
            std::slice::from_ref(&host),
            self.validity,
        ) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(%host, error = %e, "issuing a hostname's serving certificate failed");
                return None;
            }
        };
        let key = certified_key(&pair.cert_pem, &pair.key_pem).ok()?;
        let mut issued = self.issued.lock();
        if issued.len() >= MAX_HOST_CERTS {
            issued.clear();
        }
        issued.insert(host, (key.clone(), now + self.validity * 2 / 3));
        Some(key)
    }
}

impl std::fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServingCert")
    }
}

fn certified_key(cert_pem: &str, key_pem: &str) -> Result<Arc<rustls::sign::CertifiedKey>, Error> {
    use rustls::pki_types::PrivateKeyDer;
    use rustls::pki_types::pem::PemObject;
    let certs = pem_certs(cert_pem)?;
    let key =
        PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| Error::Pem(e.to_string()))?;
    let provider = rustls::crypto::ring::default_provider();
    Ok(Arc::new(rustls::sign::CertifiedKey::from_der(
        certs, key, &provider,
    )?))
}

impl ServingCert {
    pub fn new(cert_pem: &str, key_pem: &str) -> Result<Arc<ServingCert>, Error> {
        Ok(Arc::new(ServingCert {
            current: parking_lot::RwLock::new(certified_key(cert_pem, key_pem)?),
            hosts: std::sync::OnceLock::new(),
        }))
    }

    /// Serves a client that names a cluster's hostname by SNI (`known` says which are) a
    /// certificate for that name from `ca`, valid for `validity`. Set once.
    pub fn serve_hosts(&self, ca: pki::Ca, validity: Duration, known: KnownHost) {
        let _ = self.hosts.set(HostCerts {
            ca,
            validity,
            known,
            issued: Default::default(),
        });
    }

    /// Serves `cert_pem` from the next handshake on.
    pub fn replace(&self, cert_pem: &str, key_pem: &str) -> Result<(), Error> {
        *self.current.write() = certified_key(cert_pem, key_pem)?;
        Ok(())
    }
}

impl rustls::server::ResolvesServerCert for ServingCert {
    fn resolve(
        &self,
        hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        if let (Some(hosts), Some(name)) = (self.hosts.get(), hello.server_name())
            && let Some(key) = hosts.get(name)
        {
            return Some(key);
        }
        Some(self.current.read().clone())
    }
}

/// Accepts a client certificate from any issuer at the handshake, checking only that the
/// client holds its key. Which CA must have issued it depends on the cluster a request
/// addresses, so the chain is verified per request ([`crate::authn`]).
#[derive(Debug)]
struct AnyClientCert {
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::server::danger::ClientCertVerifier for AnyClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        Ok(rustls::server::danger::ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The TLS configuration: the (rotatable) serving certificate, client certificates requested
/// but not required, ALPN h2 and http/1.1.
pub fn tls_config(serving: Arc<ServingCert>) -> Result<Arc<rustls::ServerConfig>, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(AnyClientCert {
        provider: provider.clone(),
    });
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(serving);
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// The user a verified client certificate names.
pub fn user_from_cert(der: &[u8]) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert
        .subject()
        .iter_common_name()
        .find_map(|c| c.as_str().ok())?
        .to_string();
    let orgs = cert
        .subject()
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(String::from))
        .collect();
    Some(UserInfo::from_cert(&cn, orgs))
}

/// Whether a request is long-running (upstream's `--long-running-request-regexp` verbs): a
/// watch, which the request timeout does not apply to.
fn long_running(req: &Request<Incoming>) -> bool {
    let path = req.uri().path();
    path.contains("/watch/")
        || req.uri().query().is_some_and(|q| {
            form_urlencoded::parse(q.as_bytes())
                .any(|(k, v)| k == "watch" && (v == "true" || v == "1"))
        })
}

/// Handles a network request: its body read after authentication, within the request
/// timeout; a request that is not long-running answered `504` at the timeout while its
/// handler runs on to completion (a write is never cut in half).
async fn handle_timed(
    server: Arc<ApiServer>,
    req: Request<Incoming>,
    caller: Caller,
    options: Options,
) -> Response<Body> {
    let deadline = std::time::Instant::now() + options.request_timeout;
    let long = long_running(&req);
    let (parts, body) = req.into_parts();
    let pending = crate::server::PendingBody::Incoming(body, deadline);
    if long {
        return server.handle_parts(parts, pending, caller).await;
    }
    let task = tokio::spawn(async move { server.handle_parts(parts, pending, caller).await });
    match tokio::time::timeout_at(deadline.into(), task).await {
        Ok(Ok(resp)) => resp,
        Ok(Err(e)) => response::error(&ApiError::internal(format!("the request failed: {e}"))),
        Err(_) => response::error(&ApiError::timeout(
            "request did not complete within requested timeout - context deadline exceeded",
        )),
    }
}

/// Reads a request body with the upstream size limit.
pub async fn read_body<B>(req: Request<B>) -> Result<Request<Bytes>, ApiError>
where
    B: hyper::body::Body + Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = req.into_parts();
    match Limited::new(body, MAX_BODY + 1).collect().await {
        Ok(c) => Ok(Request::from_parts(parts, c.to_bytes())),
        Err(e) if e.to_string().contains("length limit exceeded") => Err(
            ApiError::request_entity_too_large("the request is too large"),
        ),
        Err(e) => Err(ApiError::bad_request(format!(
            "failed to read the request body: {e}"
        ))),
    }
}

/// The listener's limits.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Connections served at once; further clients wait in the kernel's backlog.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers (and its TLS handshake).
    pub header_timeout: Duration,
    /// How long a request that is not long-running may take, its body included.
    pub request_timeout: Duration,
    /// Flow control of requests.
    pub flow: crate::flow::Limits,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_connections: 4096,
            header_timeout: Duration::from_secs(32),
            request_timeout: Duration::from_secs(60),
            flow: crate::flow::Limits::default(),
        }
    }
}

/// Serves HTTPS on `listener` until `shutdown` resolves, then drains: the server stops being
/// ready, watches end, in-flight requests finish (up to a deadline).
pub async fn serve(
    server: Arc<ApiServer>,
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    serve_with(server, listener, tls, Options::default(), shutdown).await
}

/// Accept errors: back off from 5 ms to 1 s, log at most once a second.
struct AcceptBackoff {
    delay: Duration,
    last_log: Option<std::time::Instant>,
    suppressed: u64,
}

impl AcceptBackoff {
    const MIN: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_secs(1);

    fn new() -> Self {
        AcceptBackoff {
            delay: Duration::ZERO,
            last_log: None,
            suppressed: 0,
        }
    }

    /// The wait after a failed accept.
    fn failed(&mut self, e: &std::io::Error) -> Duration {
        self.delay = (self.delay * 2).clamp(Self::MIN, Self::MAX);
        let now = std::time::Instant::now();
        if self
            .last_log
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            tracing::warn!(error = %e, suppressed = self.suppressed, retry_in = ?self.delay, "accept failed");
            self.last_log = Some(now);
            self.suppressed = 0;
        } else {
            self.suppressed += 1;
        }
        self.delay
    }

    fn succeeded(&mut self) {
        self.delay = Duration::ZERO;
    }
}

/// [`serve`] with the given limits.
pub async fn serve_with(
    server: Arc<ApiServer>,
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    options: Options,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let _ = server
        .flow
        .get_or_init(|| crate::flow::FlowControl::new(options.flow));
    let acceptor = TlsAcceptor::from(tls);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let connections = Arc::new(tokio::sync::Semaphore::new(options.max_connections));
    let mut backoff = AcceptBackoff::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = connections.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (tcp, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => {
                    backoff.succeeded();
                    x
                }
                Err(e) => {
                    let wait = backoff.failed(&e);
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = &mut shutdown => break,
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let server = server.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _permit = permit;
            let tls = match tokio::time::timeout(options.header_timeout, acceptor.accept(tcp)).await
            {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => return,
            };
            let chain: Option<Arc<crate::authn::PeerCerts>> =
                tls.get_ref().1.peer_certificates().map(|c| {
                    Arc::new(crate::authn::PeerCerts::new(
                        c.iter().map(|d| d.clone().into_owned()).collect(),
                    ))
                });
            // A client naming a cluster's hostname by SNI is served that cluster's paths.
            let host_cluster = tls
                .get_ref()
                .1
                .server_name()
                .and_then(|h| server.control_plane().cluster_for_host(h));
            serve_connection(
                server,
                tls,
                peer,
                Caller::Tls(chain),
                watcher,
                options,
                host_cluster,
            )
            .await;
        });
    }
    server.drain();
    tracing::info!("draining connections");
    let _ = tokio::time::timeout(Duration::from_secs(20), graceful.shutdown()).await;
}

async fn serve_connection<IO>(
    server: Arc<ApiServer>,
    io: IO,
    peer: SocketAddr,
    caller: Caller,
    watcher: hyper_util::server::graceful::Watcher,
    options: Options,
    host_cluster: Option<String>,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let peer_ip = peer.ip().to_string();
    let prefix: Option<Arc<str>> = host_cluster.map(|c| format!("/clusters/{c}").into());
    let svc = service_fn(move |mut req: Request<Incoming>| {
        let server = server.clone();
        let caller = caller.clone();
        let peer_ip = peer_ip.clone();
        if let Some(p) = &prefix {
            host_path(p, &mut req);
        } else if let Some(c) = token_cluster(&server, &req) {
            // An in-cluster client of a tenant cluster (`KUBERNETES_SERVICE_HOST` reaches
            // this shared endpoint) is served its token's cluster.
            host_path(&format!("/clusters/{c}"), &mut req);
        }
        async move {
            // The registry streams its bodies (blobs can be large): not read up front.
            if crate::distribution::handles(req.uri().path()) {
                let resp = crate::distribution::serve(&server, req, &caller).await;
                return Ok::<_, std::convert::Infallible>(resp);
            }
            if crate::web::handles(req.uri().path()) {
                return Ok::<_, std::convert::Infallible>(
                    crate::web::serve(&server, req, &caller).await,
                );
            }
            // Streams (exec, attach, port-forward) and proxied bodies are not read up front.
            if crate::connect::handles(req.uri().path()) {
                let resp = crate::connect::serve(&server, req, &caller, Some(&peer_ip)).await;
                return Ok::<_, std::convert::Infallible>(resp);
            }
            Ok::<_, std::convert::Infallible>(handle_timed(server, req, caller, options).await)
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(options.header_timeout);
    builder
        .http2()
        .timer(hyper_util::rt::TokioTimer::new())
        .max_concurrent_streams(250)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(20));
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
    if let Err(e) = watcher.watch(conn.into_owned()).await {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// The tenant cluster whose service-account token a request without a cluster in its path
/// carries (see `ControlPlane::cluster_of_token`).
fn token_cluster<B>(server: &ApiServer, req: &Request<B>) -> Option<String> {
    if req.uri().path().starts_with("/clusters/") {
        return None;
    }
    let auth = req
        .headers()
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let token = auth
        .strip_prefix("Bearer ")
        .or_else(|| auth.strip_prefix("bearer "))?
        .trim();
    server.control_plane().cluster_of_token(token)
}

/// Puts a request of a connection to a cluster's hostname under that cluster's path
/// (`prefix` = `/clusters/<name>`), unless it already names a cluster or is the platform's
/// registry.
fn host_path<B>(prefix: &str, req: &mut Request<B>) {
    let path = req.uri().path();
    if path.starts_with("/clusters/") || path == "/v2" || path.starts_with("/v2/") {
        return;
    }
    let pq = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let mut parts = req.uri().clone().into_parts();
    if let Ok(p) = format!("{prefix}{pq}").parse() {
        parts.path_and_query = Some(p);
        if let Ok(u) = http::Uri::from_parts(parts) {
            *req.uri_mut() = u;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostname_connection_serves_its_cluster_paths_and_leaves_the_rest() {
        let mut req = Request::get("/api/v1/namespaces?limit=1").body(()).unwrap();
        host_path("/clusters/c1", &mut req);
        assert_eq!(
            req.uri().to_string(),
            "/clusters/c1/api/v1/namespaces?limit=1"
        );
        for kept in ["/clusters/c2/api", "/v2/", "/v2/x/manifests/1"] {
            let mut req = Request::get(kept).body(()).unwrap();
            host_path("/clusters/c1", &mut req);
            assert_eq!(req.uri().to_string(), kept);
        }
    }

    /// Regression: at the file-descriptor limit the accept loop spun at 100 % CPU writing a
    /// warning per failed accept.
    #[test]
    fn failed_accepts_back_off_from_5_ms_to_1_s_and_log_once_a_second() {
        let mut b = AcceptBackoff::new();
        let e = std::io::Error::from_raw_os_error(24); // EMFILE
        let waits: Vec<Duration> = (0..12).map(|_| b.failed(&e)).collect();
        assert_eq!(waits[0], Duration::from_millis(5));
        assert_eq!(waits[1], Duration::from_millis(10));
        assert_eq!(waits[2], Duration::from_millis(20));
        assert_eq!(*waits.last().unwrap(), Duration::from_secs(1));
        assert!(waits.windows(2).all(|w| w[0] <= w[1]));
        // One warning was logged; the other eleven failures within the second were counted.
        assert_eq!(b.suppressed, 11);
        b.succeeded();
        assert_eq!(b.failed(&e), Duration::from_millis(5));
    }
}
