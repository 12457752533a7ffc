//! An upgrade-aware reverse proxy (upstream's `UpgradeAwareHandler`): a request is re-sent to
//! a backend (a kubelet, a pod, a service endpoint) with the client's method, headers, query
//! and body, and the answer comes back as the backend wrote it. For an upgrade request a
//! `101` is relayed with the backend's headers and the two connections are then spliced, so
//! SPDY and WebSocket protocols pass through untouched.
//!
//! The client's credentials stay with the proxy: `Authorization` and the impersonation headers
//! are removed, and the backend sees the proxy's own identity (its client certificate).
//! Used by the API server (pods' and nodes' proxy, exec, attach, port-forward) and by the
//! syncer's kubelet proxy.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, Uri, header};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use thiserror::Error;

use crate::upgrade::Connect;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A relayed response body.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

fn empty() -> Body {
    http_body_util::Empty::<Bytes>::new().boxed_unsync()
}

/// Why a request could not be forwarded.
#[derive(Debug, Error)]
pub enum ForwardError {
    /// The backend could not be dialed.
    #[error("dial tcp {}: {source}", .uri.authority().map(|a| a.as_str()).unwrap_or(""))]
    Dial {
        uri: Uri,
        #[source]
        source: std::io::Error,
    },
    /// The HTTP connection to the backend failed to start.
    #[error("{0}")]
    Handshake(#[source] hyper::Error),
    /// The backend request could not be built.
    #[error("{0}")]
    Request(#[source] http::Error),
    /// The request failed on the way.
    #[error("{0}")]
    Send(#[source] hyper::Error),
}

/// Headers that describe the hop, not the request.
fn hop_by_hop(name: &header::HeaderName, upgrade: bool) -> bool {
    let n = name.as_str();
    n == "host"
        || n == "authorization"
        || n.starts_with("impersonate-")
        || n == "proxy-authorization"
        || (!upgrade
            && matches!(
                n,
                "connection" | "upgrade" | "keep-alive" | "te" | "trailer"
            ))
}

/// The client request's headers as sent on, with `X-Forwarded-For` added.
fn forwarded_headers(from: &HeaderMap, upgrade: bool, peer: Option<&str>) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in from {
        if !hop_by_hop(name, upgrade) {
            out.append(name.clone(), value.clone());
        }
    }
    if let Some(ip) = peer {
        let v = match out.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
            Some(prev) => format!("{prev}, {ip}"),
            None => ip.to_string(),
        };
        if let Ok(v) = v.parse() {
            out.insert("x-forwarded-for", v);
        }
    }
    out
}

/// A streamed response body from a backend, ending (rather than failing) if the backend
/// breaks off.
pub fn relay(body: Incoming) -> Body {
    let frames = futures::stream::unfold(Some(body), |state| async move {
        let mut body = state?;
        loop {
            match body.frame().await {
                Some(Ok(f)) => {
                    if f.is_data() || f.is_trailers() {
                        return Some((Ok::<_, Infallible>(f), Some(body)));
                    }
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "proxy: backend body ended early");
                    return None;
                }
                None => return None,
            }
        }
    });
    http_body_util::StreamBody::new(frames).boxed_unsync()
}

/// Sends `req` to `target` over `connector` and returns what to answer the client. `target`
/// carries the path and query to request.
pub async fn forward<B>(
    mut req: Request<B>,
    target: &Uri,
    connector: &dyn Connect,
    peer: Option<&str>,
) -> Result<Response<Body>, ForwardError>
where
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let upgrade = crate::upgrade::is_upgrade_request(req.headers());
    let io = connector
        .connect(target)
        .await
        .map_err(|source| ForwardError::Dial {
            uri: target.clone(),
            source,
        })?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(ForwardError::Handshake)?;
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    let headers = forwarded_headers(req.headers(), upgrade, peer);
    let client_on = upgrade.then(|| hyper::upgrade::on(&mut req));
    let (parts, body) = req.into_parts();
    let mut backend = Request::builder()
        .method(parts.method)
        .uri(target.path_and_query().map(|p| p.as_str()).unwrap_or("/"))
        .body(body)
        .map_err(ForwardError::Request)?;
    *backend.headers_mut() = headers;
    if let Some(a) = target.authority()
        && let Ok(v) = a.as_str().parse()
    {
        backend.headers_mut().insert(header::HOST, v);
    }
    let mut answer = sender
        .send_request(backend)
        .await
        .map_err(ForwardError::Send)?;
    if let (Some(client_on), StatusCode::SWITCHING_PROTOCOLS) = (client_on, answer.status()) {
        let mut relayed = Response::new(empty());
        *relayed.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        *relayed.headers_mut() = answer.headers().clone();
        let backend_on = hyper::upgrade::on(&mut answer);
        tokio::spawn(async move {
            match tokio::try_join!(client_on, backend_on) {
                Ok((client, backend)) => {
                    let mut client = TokioIo::new(client);
                    let mut backend = TokioIo::new(backend);
                    if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut backend).await {
                        tracing::debug!(error = %e, "proxy: upgraded connection ended");
                    }
                }
                Err(e) => tracing::debug!(error = %e, "proxy: upgrade failed"),
            }
        });
        return Ok(relayed);
    }
    let (parts, body) = answer.into_parts();
    let mut out = Response::from_parts(parts, relay(body));
    // Hyper frames the relayed body itself.
    out.headers_mut().remove(header::TRANSFER_ENCODING);
    out.headers_mut().remove(header::CONNECTION);
    Ok(out)
}

/// The TLS configuration of a client presenting `cert_pem`/`key_pem` (a kubelet client):
/// the server is verified against `serving_ca_pem` when given, else not at all (kubelets
/// serve self-signed certificates; kube-apiserver's default without
/// `--kubelet-certificate-authority`).
pub fn client_tls(
    cert_pem: &str,
    key_pem: &str,
    serving_ca_pem: Option<&str>,
) -> Result<rustls::ClientConfig, String> {
    let roots = serving_ca_pem.map(roots_of_pem).transpose()?;
    tls_config(Some((cert_pem, key_pem)), roots)
}

/// The certificates of a PEM bundle as trust roots.
pub fn roots_of_pem(pem: &str) -> Result<rustls::RootCertStore, String> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        roots
            .add(c.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    Ok(roots)
}

/// An HTTP/1.1 client TLS configuration presenting `identity` (a PEM certificate chain and
/// its key) when given, verifying the server against `roots` when given, else not at all.
pub fn tls_config(
    identity: Option<(&str, &str)>,
    roots: Option<rustls::RootCertStore>,
) -> Result<rustls::ClientConfig, String> {
    use rustls::pki_types::pem::PemObject;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match roots {
        Some(roots) => builder.with_root_certificates(roots),
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCert { provider })),
    };
    let mut config = match identity {
        Some((cert_pem, key_pem)) => {
            let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            let key =
                PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| e.to_string())?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| e.to_string())?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// A TLS client configuration that verifies nothing of the server, without a client
/// certificate.
pub fn insecure_tls() -> Result<rustls::ClientConfig, String> {
    tls_config(None, None)
}

/// Accepts any server certificate (signatures of the handshake are still checked).
#[derive(Debug)]
struct AnyServerCert {
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::client::danger::ServerCertVerifier for AnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_stay_and_hop_headers_go_unless_upgrading() {
        let mut h = HeaderMap::new();
        h.insert("authorization", "Bearer secret".parse().unwrap());
        h.insert("impersonate-user", "bob".parse().unwrap());
        h.insert("connection", "Upgrade".parse().unwrap());
        h.insert("upgrade", "SPDY/3.1".parse().unwrap());
        h.insert(
            "x-stream-protocol-version",
            "v4.channel.k8s.io".parse().unwrap(),
        );
        h.insert("host", "api:6443".parse().unwrap());
        let up = forwarded_headers(&h, true, Some("10.0.0.9"));
        assert!(up.get("authorization").is_none() && up.get("impersonate-user").is_none());
        assert!(up.get("host").is_none());
        assert_eq!(up["upgrade"], "SPDY/3.1");
        assert_eq!(up["x-stream-protocol-version"], "v4.channel.k8s.io");
        assert_eq!(up["x-forwarded-for"], "10.0.0.9");
        let plain = forwarded_headers(&h, false, None);
        assert!(plain.get("connection").is_none() && plain.get("upgrade").is_none());
    }
}
