//! Authentication: who is making a request, checked against the *target* cluster's trust
//! material only.
//!
//! The TLS handshake accepts a client certificate from any cluster (it only proves possession
//! of the key); every request then verifies the chain against the CA of the cluster it
//! addresses, so a certificate of cluster `a` is worth nothing at `/clusters/b`. Bearer tokens
//! are service-account JWTs signed with the cluster's own key (bound tokens from TokenRequest,
//! or legacy token Secrets) or bootstrap tokens. No credentials: `system:anonymous`.

use std::collections::HashMap;
use std::sync::Arc;

use apimachinery::status::ApiError;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use parking_lot::RwLock;
use rustls::pki_types::{CertificateDer, UnixTime};
use serde_json::Value;

use crate::auth::{UserExt, UserInfo};
use crate::jwt::{self, SigningKey};
use crate::server::ApiServer;

/// The namespace of the root cluster holding each logical cluster's credentials.
pub const SYSTEM_NAMESPACE: &str = "matryoshka-system";

/// What a cluster trusts: its CA (client certificates) and its service-account key.
pub struct Trust {
    pub ca_pem: String,
    ca_der: CertificateDer<'static>,
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

    /// The user of a client certificate chain, if this cluster's CA issued it and it is valid now.
    pub fn verify_client(&self, chain: &[CertificateDer<'static>]) -> Option<UserInfo> {
        let (leaf, intermediates) = chain.split_first()?;
        let anchor = webpki::anchor_from_trusted_cert(&self.ca_der).ok()?;
        let cert = webpki::EndEntityCert::try_from(leaf).ok()?;
        cert.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &[anchor],
            intermediates,
            UnixTime::now(),
            webpki::KeyUsage::client_auth(),
            None,
            None,
        )
        .ok()?;
        crate::serve::user_from_cert(leaf)
    }
}

/// A connection's client certificate chain, with the verdicts already reached for it: the
/// chain is verified once per (connection, cluster) rather than on every request.
pub struct PeerCerts {
    pub chain: Vec<CertificateDer<'static>>,
    verified: parking_lot::Mutex<Vec<Verdict>>,
}

/// (cluster, the trust it was verified with, the user, the leaf's expiry).
type Verdict = (String, usize, Option<UserInfo>, i64);

impl PeerCerts {
    pub fn new(chain: Vec<CertificateDer<'static>>) -> PeerCerts {
        PeerCerts {
            chain,
            verified: parking_lot::Mutex::new(Vec::new()),
        }
    }

    fn not_after(&self) -> i64 {
        self.chain
            .first()
            .and_then(|c| x509_parser::parse_x509_certificate(c).ok())
            .map(|(_, c)| c.validity().not_after.timestamp())
            .unwrap_or(0)
    }

    /// The user this chain authenticates as in `cluster` (verified against `trust` once).
    fn user(&self, cluster: &str, trust: &Arc<Trust>) -> Option<UserInfo> {
        let key = Arc::as_ptr(trust) as usize;
        let now = registry::store::unix_now();
        {
            let seen = self.verified.lock();
            if let Some((_, _, user, expiry)) =
                seen.iter().find(|(c, k, _, _)| c == cluster && *k == key)
            {
                return user.clone().filter(|_| now < *expiry);
            }
        }
        let user = trust.verify_client(&self.chain);
        let mut seen = self.verified.lock();
        // A connection talks to a handful of clusters; keep the memo small regardless.
        if seen.len() >= 16 {
            seen.remove(0);
        }
        seen.push((cluster.to_string(), key, user.clone(), self.not_after()));
        user
    }
}

/// Per-cluster trust material, loaded from the root cluster's `matryoshka-system` Secrets and
/// kept while the Secret's resourceVersion is unchanged.
pub struct Authenticator {
    root: Arc<Trust>,
    clusters: RwLock<HashMap<String, (String, Arc<Trust>)>>,
    /// The server's external URL (issuers are `<url>/clusters/<name>`).
    pub external_url: String,
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

impl Authenticator {
    pub fn new(root: Trust, external_url: String) -> Self {
        Authenticator {
            root: Arc::new(root),
            clusters: RwLock::new(HashMap::new()),
            external_url,
        }
    }

    /// The trust material of a cluster, if the cluster has been provisioned.
    pub fn trust(&self, server: &ApiServer, cluster: &str) -> Option<Arc<Trust>> {
        if cluster == apimachinery::cluster::ROOT {
            return Some(self.root.clone());
        }
        let secret = server.store.cache.get(
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

    /// Authenticates a request to `cluster`.
    pub fn authenticate(
        &self,
        server: &ApiServer,
        cluster: &str,
        peer: Option<&PeerCerts>,
        authorization: Option<&str>,
    ) -> Result<UserInfo, ApiError> {
        let unauthorized = || ApiError::unauthorized("Unauthorized");
        let trust = self.trust(server, cluster).ok_or_else(unauthorized)?;
        let chain = peer.map(|p| p.chain.as_slice());
        if let Some(p) = peer.filter(|p| !p.chain.is_empty())
            && let Some(user) = p.user(cluster, &trust)
        {
            return Ok(user);
        }
        if let Some(auth) = authorization {
            let token = auth
                .strip_prefix("Bearer ")
                .or_else(|| auth.strip_prefix("bearer "))
                .map(str::trim)
                .ok_or_else(unauthorized)?;
            return self
                .token_user(server, cluster, &trust, token)
                .ok_or_else(unauthorized);
        }
        if chain.is_some_and(|c| !c.is_empty()) {
            // A certificate this cluster did not issue.
            return Err(unauthorized());
        }
        Ok(UserInfo::anonymous())
    }

    fn token_user(
        &self,
        server: &ApiServer,
        cluster: &str,
        trust: &Trust,
        token: &str,
    ) -> Option<UserInfo> {
        if let Some(user) = bootstrap_token_user(server, cluster, token) {
            return Some(user);
        }
        let claims = trust
            .sa_key
            .verify(token, registry::store::unix_now())
            .ok()?;
        let cache = &server.store.cache;
        let iss = claims.get("iss").and_then(Value::as_str)?;
        if iss == LEGACY_ISSUER {
            // A legacy token Secret: the Secret must still exist and hold this very token.
            let ns = claims
                .get("kubernetes.io/serviceaccount/namespace")
                .and_then(Value::as_str)?;
            let sa = claims
                .get("kubernetes.io/serviceaccount/service-account.name")
                .and_then(Value::as_str)?;
            let sa_uid = claims
                .get("kubernetes.io/serviceaccount/service-account.uid")
                .and_then(Value::as_str)?;
            let secret = claims
                .get("kubernetes.io/serviceaccount/secret.name")
                .and_then(Value::as_str)?;
            let s = cache.get("", "secrets", cluster, ns, secret)?;
            let stored = s
                .value()
                .pointer("/data/token")
                .and_then(Value::as_str)
                .and_then(|t| STANDARD.decode(t).ok())?;
            if stored != token.as_bytes() {
                return None;
            }
            let acct = cache.get("", "serviceaccounts", cluster, ns, sa)?;
            (acct.uid() == sa_uid).then(|| sa_user(ns, sa, sa_uid, Vec::new()))
        } else {
            if iss != trust.issuer
                || !jwt::audience_matches(&claims, std::slice::from_ref(&trust.issuer))
            {
                return None;
            }
            let k = claims.get("kubernetes.io")?;
            let ns = k.get("namespace").and_then(Value::as_str)?;
            let sa = k.pointer("/serviceaccount/name").and_then(Value::as_str)?;
            let sa_uid = k.pointer("/serviceaccount/uid").and_then(Value::as_str)?;
            let acct = cache.get("", "serviceaccounts", cluster, ns, sa)?;
            if acct.uid() != sa_uid {
                return None;
            }
            let mut extra = Vec::new();
            for (kind, plural) in [("pod", "pods"), ("secret", "secrets")] {
                if let Some(b) = k.get(kind) {
                    let name = b.get("name").and_then(Value::as_str)?;
                    let uid = b.get("uid").and_then(Value::as_str)?;
                    let obj = cache.get("", plural, cluster, ns, name)?;
                    if obj.uid() != uid {
                        return None;
                    }
                    if kind == "pod" {
                        extra.push((
                            "authentication.kubernetes.io/pod-name".to_string(),
                            vec![name.to_string()],
                        ));
                        extra.push((
                            "authentication.kubernetes.io/pod-uid".to_string(),
                            vec![uid.to_string()],
                        ));
                    }
                }
            }
            if let Some(jti) = claims.get("jti").and_then(Value::as_str) {
                extra.push((
                    "authentication.kubernetes.io/credential-id".to_string(),
                    vec![format!("JTI={jti}")],
                ));
            }
            Some(sa_user(ns, sa, sa_uid, extra))
        }
    }
}

/// The issuer of legacy (Secret-based) service-account tokens.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";

fn sa_user(ns: &str, name: &str, uid: &str, extra: Vec<(String, Vec<String>)>) -> UserInfo {
    UserInfo {
        name: format!("system:serviceaccount:{ns}:{name}"),
        uid: uid.to_string(),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated".into(),
        ],
        extra,
    }
}

/// A bootstrap token `<id>.<secret>` backed by Secret `kube-system/bootstrap-token-<id>`.
fn bootstrap_token_user(server: &ApiServer, cluster: &str, token: &str) -> Option<UserInfo> {
    let (id, secret) = token.split_once('.')?;
    let lower_alnum = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    if !lower_alnum(id, 6) || !lower_alnum(secret, 16) {
        return None;
    }
    let s = server.store.cache.get(
        "",
        "secrets",
        cluster,
        "kube-system",
        &format!("bootstrap-token-{id}"),
    )?;
    let v = s.value();
    if v.get("type").and_then(Value::as_str) != Some("bootstrap.kubernetes.io/token") {
        return None;
    }
    let field = |k: &str| {
        v.get("data")
            .and_then(|d| d.get(k))
            .and_then(Value::as_str)
            .and_then(|x| STANDARD.decode(x).ok())
            .and_then(|b| String::from_utf8(b).ok())
    };
    if field("token-id").as_deref() != Some(id) || field("token-secret").as_deref() != Some(secret)
    {
        return None;
    }
    if field("usage-bootstrap-authentication").as_deref() != Some("true") {
        return None;
    }
    if let Some(exp) = field("expiration").and_then(|e| apimachinery::time::parse_unix_seconds(&e))
        && exp <= registry::store::unix_now()
    {
        return None;
    }
    let mut groups = vec!["system:bootstrappers".to_string()];
    if let Some(extra) = field("auth-extra-groups") {
        groups.extend(
            extra
                .split(',')
                .map(|g| g.trim().to_string())
                .filter(|g| g.starts_with("system:bootstrappers:")),
        );
    }
    groups.push("system:authenticated".into());
    Some(UserInfo {
        name: format!("system:bootstrap:{id}"),
        uid: String::new(),
        groups,
        extra: Vec::new(),
    })
}
