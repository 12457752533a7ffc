//! Certificate signing requests: what a PKCS#10 request asks for (subject, alternative names),
//! and a CA signing one with the usages and lifetime the signer decides (the request's own
//! extensions are not trusted).

use std::time::Duration;

use rcgen::{CertificateSigningRequestParams, ExtendedKeyUsagePurpose, IsCa, KeyUsagePurpose};
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;

use crate::{Ca, Error};

/// What a request asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsrInfo {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<String>,
    pub emails: Vec<String>,
    pub uris: Vec<String>,
}

/// Reads a PEM request (its signature is checked when it is signed).
pub fn parse_csr(pem: &str) -> Result<CsrInfo, String> {
    let (_, pem) =
        x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|e| format!("PEM: {e}"))?;
    if pem.label != "CERTIFICATE REQUEST" {
        return Err(format!(
            "PEM block type must be CERTIFICATE REQUEST, not {}",
            pem.label
        ));
    }
    let (_, req) =
        X509CertificationRequest::from_der(&pem.contents).map_err(|e| format!("PKCS#10: {e}"))?;
    let subject = &req.certification_request_info.subject;
    let mut info = CsrInfo {
        common_name: subject
            .iter_common_name()
            .filter_map(|a| a.as_str().ok())
            .next()
            .unwrap_or("")
            .to_string(),
        organizations: subject
            .iter_organization()
            .filter_map(|a| a.as_str().ok().map(str::to_string))
            .collect(),
        ..Default::default()
    };
    if let Some(exts) = req.requested_extensions() {
        for e in exts {
            if let ParsedExtension::SubjectAlternativeName(san) = e {
                for n in &san.general_names {
                    match n {
                        GeneralName::DNSName(d) => info.dns_names.push(d.to_string()),
                        GeneralName::RFC822Name(m) => info.emails.push(m.to_string()),
                        GeneralName::URI(u) => info.uris.push(u.to_string()),
                        GeneralName::IPAddress(b) => info.ip_addresses.push(match b.len() {
                            4 => std::net::Ipv4Addr::new(b[0], b[1], b[2], b[3]).to_string(),
                            16 => {
                                let mut a = [0u8; 16];
                                a.copy_from_slice(b);
                                std::net::Ipv6Addr::from(a).to_string()
                            }
                            _ => String::new(),
                        }),
                        _ => {}
                    }
                }
            }
        }
    }
    Ok(info)
}

impl Ca {
    /// Signs a PEM request for `valid_for` with `usages` (Kubernetes' names: `digital
    /// signature`, `key encipherment`, `client auth`, `server auth`); the subject and
    /// alternative names are the request's.
    pub fn sign_csr(
        &self,
        pem: &str,
        valid_for: Duration,
        usages: &[String],
    ) -> Result<String, Error> {
        let mut csr = CertificateSigningRequestParams::from_pem(pem)?;
        let p = &mut csr.params;
        p.is_ca = IsCa::ExplicitNoCa;
        p.key_usages = usages
            .iter()
            .filter_map(|u| match u.as_str() {
                "digital signature" => Some(KeyUsagePurpose::DigitalSignature),
                "key encipherment" => Some(KeyUsagePurpose::KeyEncipherment),
                "content commitment" => Some(KeyUsagePurpose::ContentCommitment),
                "key agreement" => Some(KeyUsagePurpose::KeyAgreement),
                _ => None,
            })
            .collect();
        p.extended_key_usages = usages
            .iter()
            .filter_map(|u| match u.as_str() {
                "client auth" => Some(ExtendedKeyUsagePurpose::ClientAuth),
                "server auth" => Some(ExtendedKeyUsagePurpose::ServerAuth),
                _ => None,
            })
            .collect();
        p.custom_extensions.clear();
        crate::validity(p, valid_for);
        Ok(csr.signed_by(&self.issuer()?)?.pem())
    }
}

/// A new key and a PEM request for `common_name` in `organization` with alternative names
/// (what a node agent sends): (request PEM, key PEM).
pub fn new_csr(
    common_name: &str,
    organization: &str,
    dns: &[String],
    ips: &[String],
) -> Result<(String, String), Error> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::default();
    let mut dn = rcgen::DistinguishedName::new();
    dn.push(rcgen::DnType::OrganizationName, organization);
    dn.push(rcgen::DnType::CommonName, common_name);
    params.distinguished_name = dn;
    for d in dns {
        params
            .subject_alt_names
            .push(rcgen::SanType::DnsName(d.clone().try_into()?));
    }
    for ip in ips {
        if let Ok(a) = ip.parse() {
            params.subject_alt_names.push(rcgen::SanType::IpAddress(a));
        }
    }
    let req = params.serialize_request(&key)?;
    Ok((req.pem()?, key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_request_is_read_and_signed_with_the_signers_usages() {
        let (req, _key) = new_csr(
            "system:node:n1",
            "system:nodes",
            &["n1".into()],
            &["10.0.0.1".into()],
        )
        .unwrap();
        let info = parse_csr(&req).unwrap();
        assert_eq!(info.common_name, "system:node:n1");
        assert_eq!(info.organizations, ["system:nodes"]);
        assert_eq!(info.dns_names, ["n1"]);
        assert_eq!(info.ip_addresses, ["10.0.0.1"]);
        let ca = Ca::generate("test-ca").unwrap();
        let cert = ca
            .sign_csr(
                &req,
                Duration::from_secs(3600),
                &["digital signature".into(), "client auth".into()],
            )
            .unwrap();
        assert!(crate::issued_by(&cert, &ca.pair.cert_pem));
        let (_, pem) = x509_parser::pem::parse_x509_pem(cert.as_bytes()).unwrap();
        let (_, c) = x509_parser::parse_x509_certificate(&pem.contents).unwrap();
        assert_eq!(
            c.subject()
                .iter_common_name()
                .next()
                .unwrap()
                .as_str()
                .unwrap(),
            "system:node:n1"
        );
        let eku = c.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth);
    }

    #[test]
    fn anything_but_a_request_is_refused() {
        assert!(
            parse_csr("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").is_err()
        );
        assert!(parse_csr("junk").is_err());
    }
}
