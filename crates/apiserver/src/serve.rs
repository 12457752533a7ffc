//! The HTTPS listener: TLS (rustls) with optional client certificates, HTTP/1.1 and HTTP/2 on
//! one port, bodies read with a size limit, graceful shutdown.

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
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::auth::UserInfo;
use crate::codec::MAX_BODY;
use crate::response::{self, Body};
use crate::server::ApiServer;

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

/// The TLS configuration: the serving certificate, client certificates requested (not
/// required) and verified against `client_ca_pem`, ALPN h2 and http/1.1.
pub fn tls_config(
    serving_cert_pem: &str,
    serving_key_pem: &str,
    client_ca_pem: &str,
) -> Result<Arc<rustls::ServerConfig>, Error> {
    use rustls::pki_types::PrivateKeyDer;
    use rustls::pki_types::pem::PemObject;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = pem_certs(serving_cert_pem)?;
    let key = PrivateKeyDer::from_pem_slice(serving_key_pem.as_bytes())
        .map_err(|e| Error::Pem(e.to_string()))?;
    let mut roots = rustls::RootCertStore::empty();
    for c in pem_certs(client_ca_pem)? {
        roots.add(c)?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| Error::Pem(e.to_string()))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)?;
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

/// Serves HTTPS on `listener` until `shutdown` resolves, then drains: the server stops being
/// ready, watches end, in-flight requests finish (up to a deadline).
pub async fn serve(
    server: Arc<ApiServer>,
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
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
            let tls =
                match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => return,
                };
            let user = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(|c| user_from_cert(c))
                .unwrap_or_else(UserInfo::anonymous);
            serve_connection(server, tls, peer, user, watcher).await;
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
    user: UserInfo,
    watcher: hyper_util::server::graceful::Watcher,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = service_fn(move |req: Request<Incoming>| {
        let server = server.clone();
        let user = user.clone();
        async move {
            let resp: Response<Body> = match read_body(req).await {
                Ok(req) => server.handle(req, user).await,
                Err(e) => response::error(&e),
            };
            Ok::<_, std::convert::Infallible>(resp)
        }
    });
    let builder = auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
    if let Err(e) = watcher.watch(conn.into_owned()).await {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}
