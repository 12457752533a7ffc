//! Certificates: certificate authorities, serving and client certificates, kubeconfigs.
//!
//! CAs are valid for ten years; leaf certificates for one year (and are re-issued by the
//! rotation loop long before they expire).

pub mod csr;

use std::path::Path;
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// Validity of a certificate authority.
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// Validity of serving and client certificates.
pub const LEAF_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("certificate generation failed: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("failed to read or write certificates: {0}")]
    Io(#[from] std::io::Error),
}

/// A certificate and its private key, PEM encoded.
#[derive(Debug, Clone)]
pub struct CertPair {
    pub cert_pem: String,
    pub key_pem: String,
}

/// A certificate authority.
#[derive(Debug, Clone)]
pub struct Ca {
    pub pair: CertPair,
}

fn validity(params: &mut CertificateParams, valid_for: Duration) {
    let now = SystemTime::now();
    // Back-date a little so clients with a slow clock accept a fresh certificate: five
    // minutes, or a tenth of a short lifetime (which would otherwise be mostly in the past).
    let backdate = Duration::from_secs(300).min(valid_for / 10);
    params.not_before = (now - backdate).into();
    params.not_after = (now + valid_for).into();
}

impl Ca {
    /// A new self-signed CA.
    pub fn generate(common_name: &str) -> Result<Ca, Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        validity(&mut params, CA_VALIDITY);
        let cert = params.self_signed(&key)?;
        Ok(Ca {
            pair: CertPair {
                cert_pem: cert.pem(),
                key_pem: key.serialize_pem(),
            },
        })
    }

    fn issuer(&self) -> Result<Issuer<'static, KeyPair>, Error> {
        let key = KeyPair::from_pem(&self.pair.key_pem)?;
        Ok(Issuer::from_ca_cert_pem(&self.pair.cert_pem, key)?)
    }

    /// A serving certificate for `sans` (DNS names or IP addresses).
    pub fn issue_server(&self, common_name: &str, sans: &[String]) -> Result<CertPair, Error> {
        self.issue_server_for(common_name, sans, LEAF_VALIDITY)
    }

    /// A serving certificate valid for `valid_for`.
    pub fn issue_server_for(
        &self,
        common_name: &str,
        sans: &[String],
        valid_for: Duration,
    ) -> Result<CertPair, Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        params.subject_alt_names = sans
            .iter()
            .filter_map(|s| match s.parse::<std::net::IpAddr>() {
                Ok(ip) => Some(SanType::IpAddress(ip)),
                Err(_) => s.clone().try_into().ok().map(SanType::DnsName),
            })
            .collect();
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        validity(&mut params, valid_for);
        let cert = params.signed_by(&key, &self.issuer()?)?;
        Ok(CertPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// A client certificate: CN is the user, each O a group. rcgen keeps one value per
    /// attribute type, so a second group goes under the same OID spelled as a custom type: at
    /// most two groups.
    pub fn issue_client(&self, user: &str, groups: &[&str]) -> Result<CertPair, Error> {
        self.issue_client_for(user, groups, LEAF_VALIDITY)
    }

    /// A client certificate valid for `valid_for`.
    pub fn issue_client_for(
        &self,
        user: &str,
        groups: &[&str],
        valid_for: Duration,
    ) -> Result<CertPair, Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        let org_types = [
            DnType::OrganizationName,
            DnType::CustomDnType(vec![2, 5, 4, 10]),
        ];
        for (ty, g) in org_types.into_iter().zip(groups) {
            dn.push(ty, *g);
        }
        dn.push(DnType::CommonName, user);
        params.distinguished_name = dn;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        validity(&mut params, valid_for);
        let cert = params.signed_by(&key, &self.issuer()?)?;
        Ok(CertPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Loads the CA from `dir/<name>.crt` and `.key`, creating it on first use.
    pub fn load_or_create(dir: &Path, name: &str, common_name: &str) -> Result<Ca, Error> {
        let (crt, key) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        if crt.exists() && key.exists() {
            return Ok(Ca {
                pair: CertPair {
                    cert_pem: std::fs::read_to_string(crt)?,
                    key_pem: std::fs::read_to_string(key)?,
                },
            });
        }
        let ca = Ca::generate(common_name)?;
        write_private(&key, &ca.pair.key_pem)?;
        std::fs::write(crt, &ca.pair.cert_pem)?;
        Ok(ca)
    }
}

/// When the (first) certificate in `cert_pem` is due for renewal: once two thirds of its
/// lifetime have passed (upstream's kubelet renews between 70 and 90 %). `None` when it cannot
/// be read.
pub fn renewal_time(cert_pem: &str) -> Option<SystemTime> {
    let (not_before, not_after) = validity_of(cert_pem)?;
    let life = not_after.duration_since(not_before).ok()?;
    Some(not_before + life * 2 / 3)
}

/// The validity period (`notBefore`, `notAfter`) of the first certificate in `cert_pem`.
pub fn validity_of(cert_pem: &str) -> Option<(SystemTime, SystemTime)> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).ok()?;
    let cert = pem.parse_x509().ok()?;
    let at = |t: x509_parser::time::ASN1Time| {
        let secs = u64::try_from(t.timestamp()).ok()?;
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
    };
    Some((
        at(cert.validity().not_before)?,
        at(cert.validity().not_after)?,
    ))
}

/// Whether the (first) certificate in `cert_pem` names the CA in `ca_pem` as its issuer (the
/// same distinguished name; CAs of one cluster carry their creation time in it, so a
/// rotated CA is told apart).
pub fn issued_by(cert_pem: &str, ca_pem: &str) -> bool {
    let raw = |pem: &str, issuer: bool| -> Option<Vec<u8>> {
        let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok()?;
        let cert = pem.parse_x509().ok()?;
        let name = if issuer {
            cert.issuer()
        } else {
            cert.subject()
        };
        Some(name.as_raw().to_vec())
    };
    match (raw(cert_pem, true), raw(ca_pem, false)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// The client certificate (PEM) of a kubeconfig's user: YAML as [`kubeconfig`] writes it, or JSON.
pub fn kubeconfig_client_cert(kubeconfig: &str) -> Option<String> {
    const KEY: &str = "client-certificate-data";
    let at = kubeconfig.find(KEY)?;
    // YAML (`key: value`) or JSON (`"key": "value"`, pretty or not).
    let rest = kubeconfig[at + KEY.len()..]
        .trim_start_matches('"')
        .trim_start()
        .strip_prefix(':')?
        .trim_start()
        .trim_start_matches('"');
    let value: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
        .collect();
    let der = STANDARD.decode(value).ok()?;
    String::from_utf8(der).ok()
}

/// Writes a file readable by its owner only.
pub fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    write_private_bytes(path, contents.as_bytes())
}

/// Writes bytes readable by their owner only, atomically.
pub fn write_private_bytes(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(contents)?;
    f.sync_all()?;
    std::fs::rename(tmp, path)
}

/// A kubeconfig with embedded CA and client certificate.
pub fn kubeconfig(
    cluster_name: &str,
    server: &str,
    ca_pem: &str,
    user: &str,
    client: &CertPair,
) -> String {
    let b64 = |s: &str| STANDARD.encode(s.as_bytes());
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {server}\n  name: {cluster_name}\ncontexts:\n- context:\n    cluster: {cluster_name}\n    user: {user}\n  name: {user}@{cluster_name}\ncurrent-context: {user}@{cluster_name}\npreferences: {{}}\nusers:\n- name: {user}\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n",
        ca = b64(ca_pem),
        cert = b64(&client.cert_pem),
        key = b64(&client.key_pem),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_certificate_carries_its_user_and_groups() {
        let ca = Ca::generate("test-ca").unwrap();
        let client = ca
            .issue_client("alice", &["dev", "system:masters"])
            .unwrap();
        let der = rustls_pki_pem(&client.cert_pem);
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        let cn: Vec<_> = cert
            .subject()
            .iter_common_name()
            .filter_map(|c| c.as_str().ok())
            .collect();
        let orgs: Vec<_> = cert
            .subject()
            .iter_organization()
            .filter_map(|c| c.as_str().ok())
            .collect();
        assert_eq!(cn, vec!["alice"]);
        assert_eq!(orgs, vec!["dev", "system:masters"]);
    }

    #[test]
    fn a_certificate_is_due_for_renewal_after_two_thirds_of_its_lifetime() {
        let ca = Ca::generate("test-ca").unwrap();
        let c = ca
            .issue_client_for("alice", &[], Duration::from_secs(3000))
            .unwrap();
        let (nb, na) = validity_of(&c.cert_pem).unwrap();
        // Back-dated by five minutes: a lifetime of 3,300 s, renewed 2,200 s after notBefore.
        assert_eq!(na.duration_since(nb).unwrap(), Duration::from_secs(3300));
        assert_eq!(
            renewal_time(&c.cert_pem).unwrap(),
            nb + Duration::from_secs(2200)
        );
        let conf = kubeconfig("c", "https://x", &ca.pair.cert_pem, "alice", &c);
        assert!(issued_by(&c.cert_pem, &ca.pair.cert_pem));
        let other = Ca::generate("test-ca@2").unwrap();
        assert!(!issued_by(&c.cert_pem, &other.pair.cert_pem));
        assert_eq!(kubeconfig_client_cert(&conf).unwrap(), c.cert_pem);
        // The same credentials written as JSON (as a node's TLS bootstrap writes them).
        let b64 = STANDARD.encode(c.cert_pem.as_bytes());
        for json in [
            format!(
                "{{\"users\":[{{\"user\":{{\"client-certificate-data\":\"{b64}\",\"client-key-data\":\"x\"}}}}]}}"
            ),
            format!(
                "{{\n  \"users\": [{{\"user\": {{\n    \"client-certificate-data\": \"{b64}\",\n  }}}}]\n}}"
            ),
        ] {
            assert_eq!(kubeconfig_client_cert(&json).unwrap(), c.cert_pem, "{json}");
        }
        assert!(renewal_time("not a certificate").is_none());
    }

    fn rustls_pki_pem(pem: &str) -> Vec<u8> {
        let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        STANDARD.decode(b64).unwrap()
    }
}
