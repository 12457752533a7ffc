//! TLS: the certificate for each server name, from the `kubernetes.io/tls` Secrets an
//! Ingress's `spec.tls` names, chosen by SNI (exact name, then a `*.` wildcard entry); a
//! client naming no host with a certificate gets the controller's own self-signed one, as
//! ingress-nginx serves its "Kubernetes Ingress Controller Fake Certificate".

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// The default certificate's common name (ingress-nginx's).
pub const FAKE_CERTIFICATE_CN: &str = "Kubernetes Ingress Controller Fake Certificate";

/// A Secret's certificate could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("the Secret has no {0}")]
    Missing(&'static str),
    #[error("tls.crt holds no certificate")]
    NoCertificate,
    #[error("tls.crt: {0}")]
    Certificate(String),
    #[error("tls.key: {0}")]
    Key(String),
}

/// Parses a `kubernetes.io/tls` Secret's `tls.crt` (a PEM chain) and `tls.key`.
pub fn certified_key(crt: Option<&[u8]>, key: Option<&[u8]>) -> Result<CertifiedKey, CertError> {
    let crt = crt.ok_or(CertError::Missing("tls.crt"))?;
    let key = key.ok_or(CertError::Missing("tls.key"))?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(crt)
        .collect::<Result<_, _>>()
        .map_err(|e| CertError::Certificate(e.to_string()))?;
    if chain.is_empty() {
        return Err(CertError::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| CertError::Key(e.to_string()))?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| CertError::Key(e.to_string()))?;
    let ck = CertifiedKey::new(chain, signing);
    ck.keys_match().map_err(|e| CertError::Key(e.to_string()))?;
    Ok(ck)
}

/// The controller's own self-signed certificate.
pub fn fake_certificate() -> Result<CertifiedKey, rcgen::Error> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(vec!["ingress.local".to_string()])?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, FAKE_CERTIFICATE_CN);
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "Acme Co");
    let cert = params.self_signed(&key)?;
    let der = PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let signing = rustls::crypto::ring::sign::any_supported_type(&der)
        .map_err(|e| rcgen::Error::PemError(e.to_string()))?;
    Ok(CertifiedKey::new(vec![cert.der().clone()], signing))
}

/// The certificates by server name, swapped whole when the Ingresses or Secrets change.
#[derive(Debug)]
pub struct Certificates {
    by_name: RwLock<Arc<HashMap<String, Arc<CertifiedKey>>>>,
    default: Arc<CertifiedKey>,
}

impl Certificates {
    pub fn new(default: CertifiedKey) -> Self {
        Certificates {
            by_name: RwLock::new(Arc::new(HashMap::new())),
            default: Arc::new(default),
        }
    }

    /// Replaces the table (names lowercase, exact or `*.suffix`).
    pub fn set(&self, by_name: HashMap<String, Arc<CertifiedKey>>) {
        *self.by_name.write() = Arc::new(by_name);
    }

    /// The certificate for a server name.
    pub fn for_name(&self, name: Option<&str>) -> Arc<CertifiedKey> {
        let table = self.by_name.read().clone();
        let Some(name) = name.map(str::to_ascii_lowercase) else {
            return self.default.clone();
        };
        if let Some(c) = table.get(&name) {
            return c.clone();
        }
        if let Some(dot) = name.find('.').filter(|d| *d > 0)
            && let Some(c) = table.get(&format!("*{}", &name[dot..]))
        {
            return c.clone();
        }
        self.default.clone()
    }

    /// Whether a server name has a certificate of its own.
    pub fn serves(&self, name: &str) -> bool {
        !Arc::ptr_eq(&self.for_name(Some(name)), &self.default)
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.for_name(hello.server_name()))
    }
}

/// The server configuration of the HTTPS listener (HTTP/2 and HTTP/1.1 by ALPN).
pub fn server_config(certs: Arc<Certificates>) -> Arc<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_no_client_auth()
        .with_cert_resolver(certs);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pem_pair(name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn a_secrets_pem_pair_parses_and_a_mismatched_key_is_refused() {
        let (crt, key) = pem_pair("a.example.com");
        assert!(certified_key(Some(crt.as_bytes()), Some(key.as_bytes())).is_ok());
        let (_, other) = pem_pair("b.example.com");
        let e = certified_key(Some(crt.as_bytes()), Some(other.as_bytes())).unwrap_err();
        assert!(matches!(e, CertError::Key(_)), "{e}");
        assert!(matches!(
            certified_key(None, Some(key.as_bytes())),
            Err(CertError::Missing("tls.crt"))
        ));
        assert!(matches!(
            certified_key(Some(b"junk"), Some(key.as_bytes())),
            Err(CertError::NoCertificate)
        ));
    }

    #[test]
    fn names_choose_their_certificate_exactly_then_by_wildcard_then_the_default() {
        let (crt, key) = pem_pair("a.example.com");
        let a = Arc::new(certified_key(Some(crt.as_bytes()), Some(key.as_bytes())).unwrap());
        let (crt, key) = pem_pair("*.wild.com");
        let w = Arc::new(certified_key(Some(crt.as_bytes()), Some(key.as_bytes())).unwrap());
        let certs = Certificates::new(fake_certificate().unwrap());
        certs.set(
            [
                ("a.example.com".to_string(), a.clone()),
                ("*.wild.com".to_string(), w.clone()),
            ]
            .into(),
        );
        assert!(Arc::ptr_eq(&certs.for_name(Some("A.example.com")), &a));
        assert!(Arc::ptr_eq(&certs.for_name(Some("x.wild.com")), &w));
        assert!(!certs.serves("wild.com"));
        assert!(!certs.serves("b.example.com"));
        assert!(certs.serves("a.example.com"));
    }
}
