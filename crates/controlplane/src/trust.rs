//! What each cluster trusts: its CA (client certificates) and its service-account signing key.
//! The root cluster's come from the configuration; a logical cluster's are kept in the root
//! cluster's `matryoshka-system` Secrets by tenancy provisioning.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use parking_lot::RwLock;
use rustls::pki_types::CertificateDer;
use serde_json::Value;

use crate::jwt::SigningKey;

/// The namespace of the root cluster holding each logical cluster's credentials.
pub const SYSTEM_NAMESPACE: &str = "matryoshka-system";

/// The issuer of legacy (Secret-based) service-account tokens.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";

/// What a cluster trusts: its CA (client certificates) and its service-account key.
pub struct Trust {
    pub ca_pem: String,
    pub ca_der: CertificateDer<'static>,
    pub sa_key: SigningKey,
    /// The service-account issuer (`iss`), also the default token audience.
    pub issuer: String,
}

impl Trust {
    pub fn new(ca_pem: &str, sa_pkcs8: &[u8], issuer: String) -> Result<Trust, String> {
        use rustls::pki_types::pem::PemObject;
        let ca_der =
            CertificateDer::from_pem_slice(ca_pem.as_bytes()).map_err(|e| e.to_string())?;
        Ok(Trust {
            ca_pem: ca_pem.to_string(),
            ca_der,
            sa_key: SigningKey::from_pkcs8(sa_pkcs8)?,
            issuer,
        })
    }
}

/// Per-cluster trust material, loaded from the root cluster's `matryoshka-system` Secrets and
/// kept while the Secret's resourceVersion is unchanged.
pub struct Trusts {
    root: Arc<Trust>,
    clusters: RwLock<HashMap<String, (String, Arc<Trust>)>>,
    /// The server's external URL (issuers are `<url>/clusters/<name>`).
    external_url: String,
}

/// The Secret holding a cluster's PKI.
pub fn pki_secret_name(cluster: &str) -> String {
    format!("{cluster}-pki")
}

/// The service-account issuer of a cluster.
pub fn issuer(external_url: &str, cluster: &str) -> String {
    if cluster == apimachinery::cluster::ROOT {
        external_url.to_string()
    } else {
        format!("{external_url}/clusters/{cluster}")
    }
}

impl Trusts {
    /// Logical clusters whose trust is cached.
    pub fn cached(&self) -> usize {
        self.clusters.read().len()
    }

    pub fn new(root: Trust, external_url: String) -> Self {
        Trusts {
            root: Arc::new(root),
            clusters: RwLock::new(HashMap::new()),
            external_url,
        }
    }

    /// The trust material of a cluster, if the cluster has been provisioned.
    pub fn get(&self, cache: &registry::cache::WatchCache, cluster: &str) -> Option<Arc<Trust>> {
        if cluster == apimachinery::cluster::ROOT {
            return Some(self.root.clone());
        }
        let secret = cache.get(
            "",
            "secrets",
            apimachinery::cluster::ROOT,
            SYSTEM_NAMESPACE,
            &pki_secret_name(cluster),
        )?;
        let rv = secret.rev.to_string();
        if let Some((seen, t)) = self.clusters.read().get(cluster)
            && *seen == rv
        {
            return Some(t.clone());
        }
        let secret = secret.value();
        let data = |k: &str| {
            secret
                .get("data")
                .and_then(|d| d.get(k))
                .and_then(Value::as_str)
                .and_then(|s| STANDARD.decode(s).ok())
        };
        let ca = String::from_utf8(data("ca.crt")?).ok()?;
        let sa = data("sa.key")?;
        let trust = Arc::new(Trust::new(&ca, &sa, issuer(&self.external_url, cluster)).ok()?);
        self.clusters
            .write()
            .insert(cluster.to_string(), (rv, trust.clone()));
        Some(trust)
    }

    /// Forgets a deleted cluster's material.
    pub fn forget(&self, cluster: &str) {
        self.clusters.write().remove(cluster);
    }
}
