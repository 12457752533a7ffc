//! Kubeconfig files: one cluster, one user authenticated by a client certificate, one context,
//! with the CA, certificate and key embedded (what `kubectl`, client-go and kube-rs read).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::ca::CertPair;

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
