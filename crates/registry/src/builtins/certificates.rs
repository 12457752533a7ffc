//! CertificateSigningRequests (certificates.k8s.io/v1): an empty status on create, a signer
//! name of the form `example.com/signer-name`, usages and a request present, and
//! `spec.signerName` as a field selector.
//!
//! Upstream also records the requesting user (`spec.username`, `groups`, `uid`, `extra`) and
//! parses the PEM request; strategies do not see the request's user, and the PEM checks are
//! left to the signing controller.

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::validation::{is_dns1123_label, is_dns1123_subdomain};
use serde_json::{Value, json};

use super::util::{arr_at, field_string, str_at};
use crate::strategy::Strategy;

/// CertificateSigningRequests.
pub struct CertificateSigningRequestStrategy;

impl Strategy for CertificateSigningRequestStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        // The request itself never changes through the main resource.
        if let Some(spec) = old.get("spec") {
            new["spec"] = spec.clone();
        }
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let p = Path::new("spec");
        let pem = str_at(obj, "/spec/request");
        let decoded = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, pem)
            .unwrap_or_default();
        if !String::from_utf8_lossy(&decoded).contains("-----BEGIN CERTIFICATE REQUEST-----") {
            errs.push(super::gofmt::invalid(
                &p.child("request"),
                if pem.is_empty() {
                    "[]byte{}".into()
                } else {
                    "[]byte{...}".into()
                },
                "PEM block type must be CERTIFICATE REQUEST",
            ));
        }
        if arr_at(obj, "/spec/usages").is_empty() {
            errs.push(FieldError::required(p.child("usages"), ""));
        }
        signer_name(
            &mut errs,
            &p.child("signerName"),
            str_at(obj, "/spec/signerName"),
        );
        errs
    }

    fn field_names(&self) -> &[&'static str] {
        &["spec.signerName"]
    }

    fn field(&self, obj: &Value, name: &str) -> Option<String> {
        (name == "spec.signerName").then(|| field_string(obj, "/spec/signerName"))
    }
}

/// Upstream `ValidateSignerName`.
fn signer_name(errs: &mut ErrorList, p: &Path, name: &str) {
    if name.is_empty() {
        errs.push(FieldError::required(p, ""));
        return;
    }
    let segments: Vec<&str> = name.split('/').collect();
    let [domain, path] = segments.as_slice() else {
        errs.push(FieldError::invalid(
            p,
            json!(name),
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
        return;
    };
    if domain.len() > 253 {
        errs.push(FieldError::too_long(p, 253));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    for l in &labels {
        let msgs = is_dns1123_label(l);
        if !msgs.is_empty() {
            for m in msgs {
                errs.push(FieldError::invalid(
                    p,
                    json!(domain),
                    format!("validating label {l:?}: {m}"),
                ));
            }
            break;
        }
    }
    if labels.len() < 2 {
        errs.push(FieldError::invalid(
            p,
            json!(domain),
            "should be a domain with at least two segments separated by dots",
        ));
    }
    for c in path.split('.') {
        let msgs = is_dns1123_subdomain(c);
        if !msgs.is_empty() {
            for m in msgs {
                errs.push(FieldError::invalid(
                    p,
                    json!(path),
                    format!("validating component {c:?}: {m}"),
                ));
            }
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signer_name_is_required_and_selectable() {
        let pem = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            "-----BEGIN CERTIFICATE REQUEST-----\nMII=\n-----END CERTIFICATE REQUEST-----\n",
        );
        let csr = json!({"spec": {"request": pem, "usages": ["client auth"]}});
        let msgs: Vec<String> = CertificateSigningRequestStrategy
            .validate(&csr)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(msgs, vec!["spec.signerName: Required value"]);
        let csr = json!({"spec": {"signerName": "kubernetes.io/kube-apiserver-client"}});
        assert_eq!(
            CertificateSigningRequestStrategy
                .field(&csr, "spec.signerName")
                .as_deref(),
            Some("kubernetes.io/kube-apiserver-client")
        );
    }
}
