//! TLS bootstrap (upstream kubelet's `--bootstrap-kubeconfig`): a node that has only a
//! bootstrap kubeconfig (a bootstrap token) generates a key, asks for a client certificate with
//! a CertificateSigningRequest for `kubernetes.io/kube-apiserver-client-kubelet` (CN
//! `system:node:<name>`, O `system:nodes`), waits until it is approved and signed, and writes
//! its kubeconfig with that certificate — from then on the node is `system:node:<name>`,
//! confined by the Node authorizer.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

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

/// A certificate a node asks its cluster for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Its client certificate (`kubernetes.io/kube-apiserver-client-kubelet`).
    Client,
    /// The kubelet API's serving certificate (`kubernetes.io/kubelet-serving`).
    Serving,
}

/// A certificate and its key, PEM.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

/// Asks the cluster `client` addresses for a certificate for `node` (CN `system:node:<node>`,
/// O `system:nodes`; a serving certificate also names `dns` and `ips`) with a new key, and
/// waits at most `timeout` for it to be approved and signed.
pub async fn request_certificate(
    client: &kube::Client,
    node: &str,
    purpose: Purpose,
    dns: &[String],
    ips: &[String],
    timeout: Duration,
) -> Result<Issued> {
    let what = |reason: String| Error::Kubeconfig {
        path: format!("the certificate of node {node}"),
        reason,
    };
    let (dns, ips): (&[String], &[String]) = match purpose {
        Purpose::Client => (&[], &[]),
        Purpose::Serving => (dns, ips),
    };
    let (request, key) =
        pki::csr::new_csr(&format!("system:node:{node}"), "system:nodes", dns, ips)
            .map_err(|e| what(format!("generating a key: {e}")))?;
    let (prefix, signer, usages) = match purpose {
        Purpose::Client => (
            "node-csr",
            "kubernetes.io/kube-apiserver-client-kubelet",
            json!(["digital signature", "client auth"]),
        ),
        Purpose::Serving => (
            "csr",
            "kubernetes.io/kubelet-serving",
            json!(["digital signature", "server auth"]),
        ),
    };
    let name = format!("{prefix}-{node}-{}", rand_suffix());
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(request.as_bytes()),
            "signerName": signer,
            "usages": usages,
        },
    }))
    .map_err(|e| what(e.to_string()))?;
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let deadline = Instant::now() + timeout;
    // A connection that breaks (the server closing a kept-alive connection as a request goes
    // out on it) is no answer: the request is sent again until the deadline. A create that
    // did land the first time answers AlreadyExists the second: the name is this call's own.
    loop {
        match api.create(&PostParams::default(), &csr).await {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 409 => break,
            Err(e) if transient(&e) && Instant::now() < deadline => {
                tracing::warn!(csr = %name, error = %e, "creating the CertificateSigningRequest; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(Error::api("creating the CertificateSigningRequest", e)),
        }
    }
    loop {
        let c = match api.get(&name).await {
            Ok(c) => c,
            Err(e) if transient(&e) && Instant::now() < deadline => {
                tracing::warn!(csr = %name, error = %e, "reading the CertificateSigningRequest; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Err(e) => return Err(Error::api("reading the CertificateSigningRequest", e)),
        };
        let status = c.status.unwrap_or_default();
        if let Some(cond) = status
            .conditions
            .iter()
            .flatten()
            .find(|c| (c.type_ == "Denied" || c.type_ == "Failed") && c.status == "True")
        {
            return Err(what(format!(
                "the certificate request {name} was {}: {}",
                cond.type_.to_lowercase(),
                cond.message.clone().unwrap_or_default()
            )));
        }
        if let Some(cert) = status.certificate.filter(|c| !c.0.is_empty()) {
            return Ok(Issued {
                cert_pem: String::from_utf8_lossy(&cert.0).to_string(),
                key_pem: key,
            });
        }
        if Instant::now() >= deadline {
            return Err(what(format!(
                "the certificate request {name} was not signed within {timeout:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Whether a request failed before any answer came (the transport, not the API): worth
/// sending again.
fn transient(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Service(_) | kube::Error::HyperError(_))
}

/// The current context's cluster of kubeconfig `path`.
fn current_cluster(path: &Path) -> Result<Value> {
    let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| kc_err(path, e))?;
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
        .ok_or_else(|| kc_err(path, "the current context names no cluster"))?;
    serde_json::to_value(&cluster).map_err(|e| kc_err(path, e))
}

/// Writes `kubeconfig`: `cluster` with the node's certificate.
fn write_kubeconfig(kubeconfig: &Path, cluster: Value, issued: &Issued) -> Result<()> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let out = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "default-cluster", "cluster": cluster}],
        "users": [{"name": "default-auth", "user": {"client-certificate-data": b64(&issued.cert_pem), "client-key-data": b64(&issued.key_pem)}}],
        "contexts": [{"name": "default-context", "context": {"cluster": "default-cluster", "user": "default-auth"}}],
        "current-context": "default-context",
    });
    pki::write_private(
        kubeconfig,
        &serde_json::to_string_pretty(&out).map_err(|e| kc_err(kubeconfig, e))?,
    )
    .map_err(|e| kc_err(kubeconfig, e))
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
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| kc_err(bootstrap, e))?;
    let client = kube::Client::try_from(config)
        .map_err(|e| Error::api("a client from the bootstrap kubeconfig", e))?;
    let issued = request_certificate(&client, node, Purpose::Client, &[], &[], timeout).await?;
    // The bootstrap kubeconfig's cluster, with the node's own credentials.
    write_kubeconfig(kubeconfig, current_cluster(bootstrap)?, &issued)
}

/// When a certificate valid from `not_before` to `not_after` is renewed: at a random point
/// between 70 % and 90 % of its lifetime (upstream's certificate manager).
pub fn renewal_time(not_before: SystemTime, not_after: SystemTime) -> SystemTime {
    use rand::Rng;
    let life = not_after
        .duration_since(not_before)
        .unwrap_or(Duration::ZERO);
    let share = rand::rng().random_range(0.7..0.9);
    not_before + life.mul_f64(share)
}

/// Keeps the client certificate of `kubeconfig` renewed for `node` with the identity it
/// holds (`selfnodeclient`) until `shutdown`: a client made from the file
/// (`runtime::renewing`) picks each new certificate up. A failed renewal is tried again
/// with back-off; an expired certificate is past saving (the node needs a new bootstrap).
pub async fn keep_client_certificate_renewed(
    client: kube::Client,
    kubeconfig: std::path::PathBuf,
    node: String,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut backoff = Duration::from_secs(1);
    loop {
        let validity = std::fs::read_to_string(&kubeconfig)
            .ok()
            .and_then(|text| pki::kubeconfig_client_cert(&text))
            .and_then(|cert| pki::validity_of(&cert));
        let wait = match validity {
            Some((from, to)) => renewal_time(from, to)
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO),
            None => Duration::from_secs(60),
        };
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(wait) => {}
        }
        if validity.is_none() {
            continue;
        }
        let renewed = async {
            let issued = request_certificate(
                &client,
                &node,
                Purpose::Client,
                &[],
                &[],
                Duration::from_secs(300),
            )
            .await?;
            write_kubeconfig(&kubeconfig, current_cluster(&kubeconfig)?, &issued)
        };
        match renewed.await {
            Ok(()) => {
                tracing::info!(node = %node, "renewed the node's client certificate");
                backoff = Duration::from_secs(1);
            }
            Err(e) => {
                tracing::warn!(node = %node, error = %e, "renewing the node's client certificate");
                tokio::select! {
                    () = &mut shutdown => return,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(300));
            }
        }
    }
}

/// Keeps the kubelet API's serving certificate issued by the cluster (upstream's
/// `serverTLSBootstrap`): asks for one naming `dns` and `ips`, hands it to `install`, and asks
/// again at 70–90 % of its lifetime. Until the first is approved the server keeps what it
/// started with (a self-signed certificate). Runs until aborted.
pub async fn keep_serving_certificate(
    client: kube::Client,
    node: String,
    dns: Vec<String>,
    ips: Vec<String>,
    install: impl Fn(&Issued) -> std::result::Result<(), String>,
) {
    let mut backoff = Duration::from_secs(1);
    loop {
        match request_certificate(
            &client,
            &node,
            Purpose::Serving,
            &dns,
            &ips,
            Duration::from_secs(900),
        )
        .await
        {
            Ok(issued) => match install(&issued) {
                Ok(()) => {
                    tracing::info!(node = %node, "serving the kubelet API with a certificate the cluster issued");
                    backoff = Duration::from_secs(1);
                    let wait = pki::validity_of(&issued.cert_pem)
                        .map(|(from, to)| renewal_time(from, to))
                        .and_then(|t| t.duration_since(SystemTime::now()).ok())
                        .unwrap_or(Duration::from_secs(3600));
                    tokio::time::sleep(wait).await;
                    continue;
                }
                Err(e) => {
                    tracing::warn!(node = %node, error = %e, "installing the kubelet serving certificate")
                }
            },
            Err(e) => {
                tracing::warn!(node = %node, error = %e, "requesting a kubelet serving certificate")
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(300));
    }
}

fn rand_suffix() -> String {
    use rand::Rng;
    let mut r = rand::rng();
    (0..5)
        .map(|_| (b'a' + r.random_range(0..26u8)) as char)
        .collect()
}
