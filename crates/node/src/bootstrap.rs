//! TLS bootstrap (upstream kubelet's `--bootstrap-kubeconfig`): a node that has only a
//! bootstrap kubeconfig (a bootstrap token) generates a key, asks for a client certificate with
//! a CertificateSigningRequest for `kubernetes.io/kube-apiserver-client-kubelet` (CN
//! `system:node:<name>`, O `system:nodes`), waits until it is approved and signed, and writes
//! its kubeconfig with that certificate — from then on the node is `system:node:<name>`,
//! confined by the Node authorizer.

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::error::{Error, Result};

fn kc_err(path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::Kubeconfig {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// Whether `kubeconfig` exists with a client certificate still valid for a while.
pub fn usable(kubeconfig: &Path) -> bool {
    std::fs::read_to_string(kubeconfig)
        .ok()
        .and_then(|text| pki::kubeconfig_client_cert(&text))
        .and_then(|cert| pki::validity_of(&cert))
        .is_some_and(|(_, not_after)| {
            not_after > std::time::SystemTime::now() + Duration::from_secs(60)
        })
}

/// Obtains a node client certificate for `node` through `bootstrap` and writes `kubeconfig`
/// (server and CA from the bootstrap kubeconfig), waiting at most `timeout` for the signer.
pub async fn tls_bootstrap(
    bootstrap: &Path,
    kubeconfig: &Path,
    node: &str,
    timeout: Duration,
) -> Result<()> {
    let kc = kube::config::Kubeconfig::read_from(bootstrap).map_err(|e| kc_err(bootstrap, e))?;
    let config = kube::Config::from_custom_kubeconfig(
        kc.clone(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .map_err(|e| kc_err(bootstrap, e))?;
    let client = kube::Client::try_from(config)
        .map_err(|e| Error::api("a client from the bootstrap kubeconfig", e))?;
    let (request, key) =
        pki::csr::new_csr(&format!("system:node:{node}"), "system:nodes", &[], &[])
            .map_err(|e| kc_err(kubeconfig, format!("generating a key: {e}")))?;
    let name = format!("node-csr-{node}-{}", rand_suffix());
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(request.as_bytes()),
            "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
            "usages": ["digital signature", "client auth"],
        },
    }))
    .map_err(|e| kc_err(kubeconfig, e))?;
    let api: Api<CertificateSigningRequest> = Api::all(client);
    api.create(&PostParams::default(), &csr)
        .await
        .map_err(|e| Error::api("creating the CertificateSigningRequest", e))?;
    let deadline = Instant::now() + timeout;
    let cert = loop {
        let c = api
            .get(&name)
            .await
            .map_err(|e| Error::api("reading the CertificateSigningRequest", e))?;
        let status = c.status.unwrap_or_default();
        if let Some(cond) = status
            .conditions
            .iter()
            .flatten()
            .find(|c| (c.type_ == "Denied" || c.type_ == "Failed") && c.status == "True")
        {
            return Err(kc_err(
                kubeconfig,
                format!(
                    "the certificate request {name} was {}: {}",
                    cond.type_.to_lowercase(),
                    cond.message.clone().unwrap_or_default()
                ),
            ));
        }
        if let Some(cert) = status.certificate.filter(|c| !c.0.is_empty()) {
            break String::from_utf8_lossy(&cert.0).to_string();
        }
        if Instant::now() >= deadline {
            return Err(kc_err(
                kubeconfig,
                format!("the certificate request {name} was not signed within {timeout:?}"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // The bootstrap kubeconfig's cluster, with the node's own credentials.
    let context = kc.current_context.clone().unwrap_or_default();
    let cluster_name = kc
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .unwrap_or_default();
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| kc_err(bootstrap, "the current context names no cluster"))?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let cluster_value: Value = serde_json::to_value(&cluster).map_err(|e| kc_err(bootstrap, e))?;
    let out = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "default-cluster", "cluster": cluster_value}],
        "users": [{"name": "default-auth", "user": {"client-certificate-data": b64(&cert), "client-key-data": b64(&key)}}],
        "contexts": [{"name": "default-context", "context": {"cluster": "default-cluster", "user": "default-auth"}}],
        "current-context": "default-context",
    });
    pki::write_private(
        kubeconfig,
        &serde_json::to_string_pretty(&out).map_err(|e| kc_err(kubeconfig, e))?,
    )
    .map_err(|e| kc_err(kubeconfig, e))?;
    Ok(())
}

fn rand_suffix() -> String {
    use rand::Rng;
    let mut r = rand::rng();
    (0..5)
        .map(|_| (b'a' + r.random_range(0..26u8)) as char)
        .collect()
}
