//! Authentication: who is making a request, checked against the *target* cluster's trust
//! material only.
//!
//! The TLS handshake accepts a client certificate from any cluster (it only proves possession
//! of the key); every request then verifies the chain against the CA of the cluster it
//! addresses, so a certificate of cluster `a` is worth nothing at `/clusters/b`. Bearer tokens
//! are service-account JWTs signed with the cluster's own key (bound tokens from TokenRequest,
//! or legacy token Secrets) or bootstrap tokens. No credentials: `system:anonymous`.

use std::sync::Arc;

use apimachinery::status::ApiError;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use controlplane::ControlPlane;
use rustls::pki_types::{CertificateDer, UnixTime};
use serde_json::Value;

use crate::auth::{UserExt, UserInfo};
use crate::jwt;
pub use controlplane::trust::{LEGACY_ISSUER, SYSTEM_NAMESPACE, Trust, issuer, pki_secret_name};

/// The user of a client certificate chain, if the cluster's CA issued it and it is valid now.
pub fn verify_client(trust: &Trust, chain: &[CertificateDer<'static>]) -> Option<UserInfo> {
    let (leaf, intermediates) = chain.split_first()?;
    let anchors: Vec<_> = std::iter::once(&trust.ca_der)
        .chain(trust.ca_previous.as_ref())
        .filter_map(|ca| webpki::anchor_from_trusted_cert(ca).ok())
        .collect();
    let cert = webpki::EndEntityCert::try_from(leaf).ok()?;
    cert.verify_for_usage(
        webpki::ALL_VERIFICATION_ALGS,
        &anchors,
        intermediates,
        UnixTime::now(),
        webpki::KeyUsage::client_auth(),
        None,
        None,
    )
    .ok()?;
    crate::serve::user_from_cert(leaf)
}

/// A connection's client certificate chain, with the verdicts already reached for it: the
/// chain is verified once per (connection, cluster) rather than on every request.
pub struct PeerCerts {
    pub chain: Vec<CertificateDer<'static>>,
    verified: parking_lot::Mutex<Vec<Verdict>>,
}

impl std::fmt::Debug for PeerCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerCerts")
            .field("certificates", &self.chain.len())
            .finish_non_exhaustive()
    }
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
        let user = verify_client(trust, &self.chain);
        let mut seen = self.verified.lock();
        // A connection talks to a handful of clusters; keep the memo small regardless.
        if seen.len() >= 16 {
            seen.remove(0);
        }
        seen.push((cluster.to_string(), key, user.clone(), self.not_after()));
        user
    }
}

/// Authenticates requests against the trust of the cluster they address.
#[derive(Default)]
pub struct Authenticator {
    /// The root cluster's OIDC issuers (`--oidc-*`, `--authentication-config`).
    pub oidc: crate::oidc::Authenticators,
    /// Each tenant cluster's, made from its LogicalCluster's `spec.authentication` on first
    /// use and again when it changes.
    tenants: parking_lot::RwLock<TenantIssuers>,
}

type TenantIssuers =
    std::collections::HashMap<String, (Arc<Value>, Arc<crate::oidc::Authenticators>)>;

impl Authenticator {
    /// The OIDC issuers of `cluster`, if it has any.
    fn issuers_of(
        &self,
        cp: &ControlPlane,
        cluster: &str,
    ) -> Option<Arc<crate::oidc::Authenticators>> {
        let config = cp.authentication(cluster)?;
        if let Some((c, a)) = self.tenants.read().get(cluster)
            && (Arc::ptr_eq(c, &config) || **c == *config)
        {
            return Some(a.clone());
        }
        let list = match crate::oidc::parse_authentication_config(&config) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(cluster, error = %e, "the cluster's authentication configuration is not usable");
                Vec::new()
            }
        };
        let issuers = Arc::new(crate::oidc::Authenticators::default());
        issuers.set(
            list.into_iter()
                .filter_map(|c| match crate::oidc::JwtAuthenticator::new(c) {
                    Ok(a) => Some(a),
                    Err(e) => {
                        tracing::warn!(cluster, error = %e, "an OIDC issuer of the cluster is not usable");
                        None
                    }
                })
                .collect(),
        );
        self.tenants
            .write()
            .insert(cluster.to_string(), (config, issuers.clone()));
        Some(issuers)
    }

    /// Lets go of a deleted cluster's issuers.
    pub fn forget(&self, cluster: &str) {
        self.tenants.write().remove(cluster);
    }

    /// How many tenant clusters' issuers are kept.
    pub fn tenant_issuers(&self) -> usize {
        self.tenants.read().len()
    }

    /// Authenticates a request to `cluster`.
    pub async fn authenticate(
        &self,
        cp: &ControlPlane,
        cluster: &str,
        peer: Option<&PeerCerts>,
        authorization: Option<&str>,
    ) -> Result<UserInfo, ApiError> {
        let unauthorized = || ApiError::unauthorized("Unauthorized");
        let trust = cp.trust(cluster).ok_or_else(unauthorized)?;
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
            if let Some(user) = self.token_user(cp, cluster, &trust, token) {
                return Ok(user);
            }
            let tenant;
            let issuers = if cluster == apimachinery::cluster::ROOT {
                Some(&self.oidc)
            } else {
                tenant = self.issuers_of(cp, cluster);
                tenant.as_deref()
            };
            if let Some(issuers) = issuers
                && let Some(verdict) = issuers
                    .authenticate(token, registry::store::unix_now())
                    .await
            {
                return verdict.map_err(|e| {
                    tracing::debug!(error = %e, "an OIDC token was refused");
                    unauthorized()
                });
            }
            return Err(unauthorized());
        }
        if chain.is_some_and(|c| !c.is_empty()) {
            // A certificate this cluster did not issue.
            return Err(unauthorized());
        }
        Ok(UserInfo::anonymous())
    }

    fn token_user(
        &self,
        cp: &ControlPlane,
        cluster: &str,
        trust: &Trust,
        token: &str,
    ) -> Option<UserInfo> {
        if let Some(user) = bootstrap_token_user(cp, cluster, token) {
            return Some(user);
        }
        let claims = match trust.verify_token(token, registry::store::unix_now()) {
            Ok(claims) => claims,
            // A legacy token signed with a key rotated out since: it is worth what its
            // Secret still holds, which is checked below, so it outlives the key.
            Err(jwt::TokenError::UnknownKey) => jwt::unverified_claims(token)
                .filter(|c| c.get("iss").and_then(Value::as_str) == Some(LEGACY_ISSUER))?,
            Err(_) => return None,
        };
        let cache = cp.store().cache(cluster).ok()?;
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
fn bootstrap_token_user(cp: &ControlPlane, cluster: &str, token: &str) -> Option<UserInfo> {
    let (id, secret) = token.split_once('.')?;
    let lower_alnum = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    if !lower_alnum(id, 6) || !lower_alnum(secret, 16) {
        return None;
    }
    let s = cp.store().cache(cluster).ok()?.get(
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
