//! The kubelet API's TLS: its serving certificate and how client certificates are taken.
//!
//! The serving certificate is given (`--tls-cert-file`), or made at start as a kubelet
//! without serving-certificate rotation makes it: a throwaway CA `<host>-ca@<unix time>`
//! signing `<host>@<unix time>` for the node's addresses and names, the chain served leaf
//! first. Nobody verifies it by default (kube-apiserver does not unless given
//! `--kubelet-certificate-authority`).
//!
//! Client certificates are requested, not required, and accepted at the handshake from any
//! issuer once the client proves it holds the key: which CA must have issued them is checked
//! per request against the client-CA bundle ([`super::auth`]), so a certificate of another CA
//! is a 401 with upstream's text rather than a handshake failure (Go's `RequestClientCert`).

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A serving certificate chain and its key, PEM.
#[derive(Clone)]
pub struct ServingCert {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServingCert")
    }
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("invalid serving certificate or key: {0}")]
    Pem(String),
    #[error("generating the self-signed serving certificate failed: {0}")]
    Generate(#[from] pki::Error),
    #[error("TLS configuration failed: {0}")]
    Rustls(#[from] rustls::Error),
}

impl ServingCert {
    /// A self-signed serving certificate for `host` and the node's `addresses` (IPs and DNS
    /// names), as the kubelet generates one.
    pub fn self_signed(host: &str, addresses: &[String]) -> Result<ServingCert, TlsError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let ca = pki::Ca::generate(&format!("{host}-ca@{now}"))?;
        let mut sans: Vec<String> = Vec::new();
        for s in std::iter::once(host.to_string()).chain(addresses.iter().cloned()) {
            if !s.is_empty() && !sans.contains(&s) {
                sans.push(s);
            }
        }
        let leaf = ca.issue_server(&format!("{host}@{now}"), &sans)?;
        Ok(ServingCert {
            cert_pem: format!("{}{}", leaf.cert_pem, ca.pair.cert_pem),
            key_pem: leaf.key_pem,
        })
    }
}

/// The serving certificate a running server presents, replaceable while it serves (a
/// kubelet with serving-certificate rotation swaps in each newly issued one; connections
/// already open keep theirs).
#[derive(Debug)]
pub struct ServingSlot {
    current: parking_lot::RwLock<Arc<rustls::sign::CertifiedKey>>,
}

impl ServingSlot {
    pub fn new(cert: &ServingCert) -> Result<Arc<ServingSlot>, TlsError> {
        Ok(Arc::new(ServingSlot {
            current: parking_lot::RwLock::new(certified_key(cert)?),
        }))
    }

    /// Presents `cert` from the next handshake on.
    pub fn replace(&self, cert: &ServingCert) -> Result<(), TlsError> {
        *self.current.write() = certified_key(cert)?;
        Ok(())
    }
}

impl rustls::server::ResolvesServerCert for ServingSlot {
    fn resolve(
        &self,
        _hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.current.read().clone())
    }
}

fn certified_key(cert: &ServingCert) -> Result<Arc<rustls::sign::CertifiedKey>, TlsError> {
    use rustls::pki_types::pem::PemObject;
    let chain = CertificateDer::pem_slice_iter(cert.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem(e.to_string()))?;
    if chain.is_empty() {
        return Err(TlsError::Pem("no certificate".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes())
        .map_err(|e| TlsError::Pem(e.to_string()))?;
    let provider = rustls::crypto::ring::default_provider();
    Ok(Arc::new(rustls::sign::CertifiedKey::from_der(
        chain, key, &provider,
    )?))
}

/// The server's rustls configuration: the serving chain from `slot`, client certificates
/// optional and verified later, ALPN h2 and http/1.1 (upgrades need HTTP/1.1; clients that
/// stream ask for it).
pub fn server_config(slot: Arc<ServingSlot>) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(AnyClientCert {
        provider: provider.clone(),
    });
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(slot);
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Accepts any client certificate whose key the client holds; the chain is verified per
/// request.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_covers_the_node_and_chains_to_its_own_ca() {
        let cert =
            ServingCert::self_signed("node-1", &["10.0.0.5".into(), "node-1".into()]).unwrap();
        use rustls::pki_types::pem::PemObject;
        let chain: Vec<_> = CertificateDer::pem_slice_iter(cert.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(chain.len(), 2);
        let (_, leaf) = x509_parser::parse_x509_certificate(&chain[0]).unwrap();
        let cn = leaf.subject().iter_common_name().next().unwrap();
        assert!(cn.as_str().unwrap().starts_with("node-1@"));
        let (_, ca) = x509_parser::parse_x509_certificate(&chain[1]).unwrap();
        assert!(
            ca.subject()
                .iter_common_name()
                .next()
                .unwrap()
                .as_str()
                .unwrap()
                .starts_with("node-1-ca@")
        );
        let sans = leaf.subject_alternative_name().unwrap().unwrap();
        let names = format!("{:?}", sans.value.general_names);
        assert_eq!(names, r#"[DNSName("node-1"), IPAddress([10, 0, 0, 5])]"#);
        server_config(ServingSlot::new(&cert).unwrap()).unwrap();
    }
}
