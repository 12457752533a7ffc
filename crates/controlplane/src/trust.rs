//! What each cluster trusts: its CA (client certificates) and its service-account signing keys.
//! The root cluster's CA comes from the configuration; a logical cluster's are kept in the root
//! cluster's `matryoshka-system` Secrets by tenancy provisioning.
//!
//! A cluster's CA rotates in two phases (`matryoshka pki rotate-ca`): `prepare` makes a new CA
//! the issuer and keeps the old one as `ca-previous.crt`, trusted alongside, while every
//! kubeconfig is re-issued; `finish` removes it, and certificates of the old CA stop working.
//!
//! Service-account keys rotate ([`crate::rotation`]): the Secret `<cluster>-pki` holds the key
//! that signs (`sa.key`, current since the annotation [`SA_KEY_SINCE`]) and the keys it
//! replaced (`sa-retired-<unix time>.key`), which keep verifying tokens for the longest token
//! lifetime after their retirement, so no token outlives the key that verifies it. The root
//! cluster's rotated keys live in `root-pki` (without its CA, which stays in the PKI
//! directory); until its first rotation the configured key signs.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use parking_lot::RwLock;
use rustls::pki_types::CertificateDer;
use serde_json::Value;

use crate::jwt::{SigningKey, TokenError};

/// The Secret key of the signing key.
pub const SA_KEY: &str = "sa.key";
/// The Secret keys of retired signing keys: `sa-retired-<unix time of retirement>.key`.
pub const SA_RETIRED_PREFIX: &str = "sa-retired-";
/// The Secret key of the CA a rotation replaces: still trusted for client certificates until
/// `matryoshka pki rotate-ca --phase finish` removes it.
pub const CA_PREVIOUS: &str = "ca-previous.crt";
/// The annotation on a `-pki` Secret: when its `sa.key` began signing (unix seconds).
pub const SA_KEY_SINCE: &str = "pki.matryoshka.dev/sa-key-since";

/// The namespace of the root cluster holding each logical cluster's credentials.
pub const SYSTEM_NAMESPACE: &str = "matryoshka-system";

/// The issuer of legacy (Secret-based) service-account tokens.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";

/// What a cluster trusts: its CA (client certificates) and its service-account keys.
pub struct Trust {
    pub ca_pem: String,
    pub ca_der: CertificateDer<'static>,
    /// The CA a rotation is replacing (`ca-previous.crt`), trusted for client certificates
    /// until the rotation finishes.
    pub ca_previous: Option<CertificateDer<'static>>,
    /// Signs new tokens.
    pub sa_key: SigningKey,
    /// Keys rotation retired, each verifying tokens until a unix time.
    pub sa_retired: Vec<(i64, SigningKey)>,
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
            ca_previous: None,
            sa_key: SigningKey::from_pkcs8(sa_pkcs8)?,
            sa_retired: Vec::new(),
            issuer,
        })
    }

    /// Verifies a token with the key that signed it (its `kid`): the current key, or a retired
    /// one within its overlap window.
    pub fn verify_token(&self, token: &str, now: i64) -> Result<Value, TokenError> {
        let kid = crate::jwt::kid(token).ok_or(TokenError::Malformed)?;
        if kid == self.sa_key.kid {
            return self.sa_key.verify(token, now);
        }
        match self
            .sa_retired
            .iter()
            .find(|(until, k)| k.kid == kid && now < *until)
        {
            Some((_, k)) => k.verify(token, now),
            None => Err(TokenError::UnknownKey),
        }
    }

    /// The public keys tokens may be verified with (`/openid/v1/jwks`): the current key, then
    /// the retired ones still in their overlap window.
    pub fn jwks(&self, now: i64) -> Value {
        let keys: Vec<Value> = std::iter::once(self.sa_key.jwk())
            .chain(
                self.sa_retired
                    .iter()
                    .filter(|(until, _)| now < *until)
                    .map(|(_, k)| k.jwk()),
            )
            .collect();
        serde_json::json!({ "keys": keys })
    }
}

/// A `-pki` Secret's decoded data value.
fn secret_data(secret: &Value, key: &str) -> Option<Vec<u8>> {
    secret
        .get("data")
        .and_then(|d| d.get(key))
        .and_then(Value::as_str)
        .and_then(|s| STANDARD.decode(s).ok())
}

/// The retired keys of a `-pki` Secret, each with the unix time it verifies until (its
/// retirement plus `overlap` seconds); unreadable entries are skipped.
pub fn retired_keys(secret: &Value, overlap: i64) -> Vec<(i64, SigningKey)> {
    let Some(data) = secret.get("data").and_then(Value::as_object) else {
        return Vec::new();
    };
    data.keys()
        .filter_map(|k| {
            let retired: i64 = k
                .strip_prefix(SA_RETIRED_PREFIX)?
                .strip_suffix(".key")?
                .parse()
                .ok()?;
            let key = SigningKey::from_pkcs8(&secret_data(secret, k)?).ok()?;
            Some((retired.saturating_add(overlap), key))
        })
        .collect()
}

/// Per-cluster trust material, loaded from the root cluster's `matryoshka-system` Secrets and
/// kept while the Secret's resourceVersion is unchanged.
pub struct Trusts {
    /// The root cluster's configured trust, and the one its rotated keys make (by the
    /// resourceVersion of `root-pki`).
    root: Arc<Trust>,
    root_rotated: RwLock<Option<(String, Arc<Trust>)>>,
    clusters: RwLock<HashMap<String, (String, Arc<Trust>)>>,
    /// The server's external URL (issuers are `<url>/clusters/<name>`).
    external_url: String,
    /// How long a retired service-account key keeps verifying (the longest token lifetime),
    /// in seconds.
    overlap: i64,
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

/// The tenant cluster named by a service-account issuer of this server (the inverse of
/// [`issuer`]); None for the root cluster's issuer and foreign ones.
pub fn cluster_of_issuer<'a>(external_url: &str, iss: &'a str) -> Option<&'a str> {
    let name = iss.strip_prefix(external_url)?.strip_prefix("/clusters/")?;
    (!name.is_empty() && !name.contains('/') && name != apimachinery::cluster::ROOT).then_some(name)
}

impl Trusts {
    /// The server's external URL.
    pub fn external_url(&self) -> &str {
        &self.external_url
    }

    /// Logical clusters whose trust is cached.
    pub fn cached(&self) -> usize {
        self.clusters.read().len()
    }

    /// `overlap`: how long a retired service-account key keeps verifying tokens.
    pub fn new(root: Trust, external_url: String, overlap: std::time::Duration) -> Self {
        Trusts {
            root: Arc::new(root),
            root_rotated: RwLock::new(None),
            clusters: RwLock::new(HashMap::new()),
            external_url,
            overlap: i64::try_from(overlap.as_secs()).unwrap_or(i64::MAX),
        }
    }

    /// The root cluster's trust: the configured one until its keys have rotated.
    fn root(&self, cache: &registry::cache::WatchCache) -> Arc<Trust> {
        let root = apimachinery::cluster::ROOT;
        let Some(secret) = cache.get(
            "",
            "secrets",
            root,
            SYSTEM_NAMESPACE,
            &pki_secret_name(root),
        ) else {
            return self.root.clone();
        };
        let rv = secret.rev.to_string();
        if let Some((seen, t)) = &*self.root_rotated.read()
            && *seen == rv
        {
            return t.clone();
        }
        let secret = secret.value();
        let Some(trust) = secret_data(&secret, SA_KEY).and_then(|sa| {
            let mut t = Trust::new(&self.root.ca_pem, &sa, self.root.issuer.clone()).ok()?;
            t.sa_retired = retired_keys(&secret, self.overlap);
            Some(Arc::new(t))
        }) else {
            return self.root.clone();
        };
        *self.root_rotated.write() = Some((rv, trust.clone()));
        trust
    }

    /// The trust material of a cluster, if the cluster has been provisioned.
    pub fn get(&self, cache: &registry::cache::WatchCache, cluster: &str) -> Option<Arc<Trust>> {
        if cluster == apimachinery::cluster::ROOT {
            return Some(self.root(cache));
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
        let ca = String::from_utf8(secret_data(&secret, "ca.crt")?).ok()?;
        let sa = secret_data(&secret, SA_KEY)?;
        let mut trust = Trust::new(&ca, &sa, issuer(&self.external_url, cluster)).ok()?;
        trust.sa_retired = retired_keys(&secret, self.overlap);
        trust.ca_previous = secret_data(&secret, CA_PREVIOUS).and_then(|pem| {
            use rustls::pki_types::pem::PemObject;
            CertificateDer::from_pem_slice(&pem).ok()
        });
        let trust = Arc::new(trust);
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tenant_issuer_names_its_cluster_and_others_name_none() {
        let url = "https://10.0.0.1:6443";
        assert_eq!(
            cluster_of_issuer(url, &issuer(url, "team-a")),
            Some("team-a")
        );
        assert_eq!(
            cluster_of_issuer(url, &issuer(url, apimachinery::cluster::ROOT)),
            None
        );
        assert_eq!(cluster_of_issuer(url, "https://evil/clusters/team-a"), None);
        assert_eq!(cluster_of_issuer(url, &format!("{url}/clusters/a/b")), None);
        assert_eq!(cluster_of_issuer(url, &format!("{url}/clusters/")), None);
    }

    fn key() -> SigningKey {
        SigningKey::from_pkcs8(&SigningKey::generate_pkcs8().unwrap()).unwrap()
    }

    fn trust() -> Trust {
        let ca = pki::Ca::generate("t").unwrap();
        Trust::new(
            &ca.pair.cert_pem,
            &SigningKey::generate_pkcs8().unwrap(),
            "https://issuer".into(),
        )
        .unwrap()
    }

    #[test]
    fn a_token_signed_by_a_retired_key_verifies_until_its_overlap_window_ends() {
        let mut t = trust();
        let old = key();
        let token = old.sign(&json!({"sub": "x", "exp": 10_000})).unwrap();
        assert_eq!(t.verify_token(&token, 100), Err(TokenError::UnknownKey));
        t.sa_retired.push((500, old));
        assert_eq!(t.verify_token(&token, 100).unwrap()["sub"], "x");
        assert_eq!(t.verify_token(&token, 500), Err(TokenError::UnknownKey));
        // The current key still verifies its own tokens, and both are published in the window.
        let fresh = t.sa_key.sign(&json!({"sub": "y"})).unwrap();
        assert_eq!(t.verify_token(&fresh, 100).unwrap()["sub"], "y");
        assert_eq!(t.jwks(100)["keys"].as_array().unwrap().len(), 2);
        assert_eq!(t.jwks(500)["keys"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn a_forged_kid_does_not_borrow_another_keys_trust() {
        let t = trust();
        let forger = key();
        let token = forger.sign(&json!({"sub": "x"})).unwrap();
        // Re-label the forger's token with the trusted key's kid: the signature fails.
        let mut parts: Vec<&str> = token.split('.').collect();
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let header = URL_SAFE_NO_PAD
            .encode(serde_json::to_vec(&json!({"alg": "ES256", "kid": t.sa_key.kid})).unwrap());
        parts[0] = &header;
        assert_eq!(
            t.verify_token(&parts.join("."), 0),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn retired_keys_are_read_with_their_windows_and_junk_is_skipped() {
        let k = SigningKey::generate_pkcs8().unwrap();
        let secret = json!({"data": {
            "sa.key": STANDARD.encode(&k),
            "sa-retired-1000.key": STANDARD.encode(&k),
            "sa-retired-x.key": STANDARD.encode(&k),
            "sa-retired-2000.key": STANDARD.encode(b"not a key"),
        }});
        let r = retired_keys(&secret, 60);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].0, 1060);
    }
}
