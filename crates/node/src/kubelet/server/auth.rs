//! Who may use the kubelet API, decided as upstream's kubelet decides it.
//!
//! **Authentication**: a client certificate chain verified against the client-CA bundle
//! (`--client-ca-file`; CN is the user, each O a group), else a bearer token checked with a
//! TokenReview (answers cached for 2 minutes, `webhook.cacheTTL`), else anonymous when
//! enabled (it is not by default). Credentials that are presented but do not verify are a
//! 401 even with anonymous access on. Authenticated users get `system:authenticated`.
//!
//! **Authorization**: a SubjectAccessReview of `nodes/<node>` with the verb of the HTTP
//! method and a subresource by path: `stats` for `/stats/*`, `metrics` for `/metrics/*`,
//! `log` for `/logs/*`, `proxy` for the rest; with `KubeletFineGrainedAuthz` (beta, on in
//! 1.33) `/pods`, `/runningpods`, `/healthz` and `/configz` first try their own subresource
//! and fall back to `proxy`. Allowed answers are cached 5 minutes, refusals 30 seconds.
//!
//! Refusals are upstream's plain-text bodies: 401 `Unauthorized`, 403 `Forbidden (user=…,
//! verb=…, resource=nodes, subresource(s)=[…])`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::{CertificateDer, UnixTime};
use sha2::{Digest, Sha256};

use super::cache::TtlCache;
use super::review::{Attributes, Reviewer, User};

/// How long a TokenReview answer is kept (`authentication.webhook.cacheTTL`).
pub const TOKEN_TTL: Duration = Duration::from_secs(120);
/// How long an allowed SubjectAccessReview is kept (`cacheAuthorizedTTL`).
pub const AUTHORIZED_TTL: Duration = Duration::from_secs(300);
/// How long a refused SubjectAccessReview is kept (`cacheUnauthorizedTTL`).
pub const UNAUTHORIZED_TTL: Duration = Duration::from_secs(30);
/// Entries per cache; a bound, not an upstream figure.
const CACHE_ENTRIES: usize = 4096;

/// A refused request: its status and plain-text body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("Unauthorized")]
    Unauthorized,
    #[error("{0}")]
    Forbidden(String),
    /// The authorizer could not be asked.
    #[error("{0}")]
    AuthorizationError(String),
}

impl Refusal {
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Unauthorized => 401,
            Refusal::Forbidden(_) => 403,
            Refusal::AuthorizationError(_) => 500,
        }
    }
}

/// The client certificate authorities a certificate must chain to.
#[derive(Clone, Default)]
pub struct ClientCa {
    roots: Vec<CertificateDer<'static>>,
}

impl ClientCa {
    /// Every certificate of a PEM bundle.
    pub fn from_pem(pem: &str) -> Result<ClientCa, String> {
        use rustls::pki_types::pem::PemObject;
        let roots = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("invalid client CA bundle: {e}"))?;
        if roots.is_empty() {
            return Err("the client CA bundle holds no certificate".into());
        }
        Ok(ClientCa { roots })
    }

    /// The user a chain authenticates, if it verifies for client auth now.
    pub fn verify(&self, chain: &[CertificateDer<'static>]) -> Option<User> {
        let (leaf, intermediates) = chain.split_first()?;
        let anchors: Vec<_> = self
            .roots
            .iter()
            .filter_map(|r| webpki::anchor_from_trusted_cert(r).ok())
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
        user_of_cert(leaf)
    }
}

/// CN and Os of a certificate.
pub fn user_of_cert(der: &[u8]) -> Option<User> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let name = cert
        .subject()
        .iter_common_name()
        .find_map(|c| c.as_str().ok())?
        .to_string();
    let groups = cert
        .subject()
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(String::from))
        .collect();
    Some(User {
        name,
        groups,
        ..User::default()
    })
}

/// Authentication and authorization of kubelet API requests.
pub struct Auth {
    node: String,
    client_ca: Option<ClientCa>,
    anonymous: bool,
    reviewer: Arc<dyn Reviewer>,
    tokens: TtlCache<[u8; 32], Option<User>>,
    decisions: TtlCache<(User, Attributes), bool>,
}

impl Auth {
    pub fn new(
        node: String,
        client_ca: Option<ClientCa>,
        anonymous: bool,
        reviewer: Arc<dyn Reviewer>,
    ) -> Self {
        Auth {
            node,
            client_ca,
            anonymous,
            reviewer,
            tokens: TtlCache::new(CACHE_ENTRIES),
            decisions: TtlCache::new(CACHE_ENTRIES),
        }
    }

    /// Who sent the request: its TLS client chain and `Authorization` header.
    pub async fn authenticate(
        &self,
        chain: Option<&[CertificateDer<'static>]>,
        authorization: Option<&str>,
    ) -> Result<User, Refusal> {
        let chain = chain.filter(|c| !c.is_empty());
        if let (Some(chain), Some(ca)) = (chain, &self.client_ca)
            && let Some(user) = ca.verify(chain)
        {
            return Ok(authenticated(user));
        }
        let token = authorization.and_then(|a| {
            let (scheme, token) = a.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
        match token {
            Some(t) if !t.is_empty() => self.token_user(t).await.map(authenticated),
            Some(_) => Err(Refusal::Unauthorized),
            // A certificate that did not verify is a credential that failed.
            None if chain.is_some() && self.client_ca.is_some() => Err(Refusal::Unauthorized),
            None if self.anonymous => Ok(User {
                name: "system:anonymous".into(),
                groups: vec!["system:unauthenticated".into()],
                ..User::default()
            }),
            None => Err(Refusal::Unauthorized),
        }
    }

    async fn token_user(&self, token: &str) -> Result<User, Refusal> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        if let Some(cached) = self.tokens.get(&key, now) {
            return cached.ok_or(Refusal::Unauthorized);
        }
        match self.reviewer.token_review(token).await {
            Ok(answer) => {
                self.tokens.insert(key, answer.clone(), TOKEN_TTL, now);
                answer.ok_or(Refusal::Unauthorized)
            }
            Err(e) => {
                // Errors are not cached: the next request asks again.
                tracing::warn!(error = %e, "kubelet: token review failed");
                Err(Refusal::Unauthorized)
            }
        }
    }

    /// Whether `user` may make a request with `method` to `path`.
    pub async fn authorize(&self, user: &User, method: &str, path: &str) -> Result<(), Refusal> {
        let verb = verb(method);
        let subresources = subresources(path);
        for sub in &subresources {
            let attrs = Attributes {
                verb: verb.to_string(),
                node: self.node.clone(),
                subresource: sub.to_string(),
            };
            let key = (user.clone(), attrs);
            let now = Instant::now();
            let allowed = match self.decisions.get(&key, now) {
                Some(a) => a,
                None => match self.reviewer.access_review(&key.0, &key.1).await {
                    Ok(a) => {
                        let ttl = if a { AUTHORIZED_TTL } else { UNAUTHORIZED_TTL };
                        self.decisions.insert(key, a, ttl, now);
                        a
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "kubelet: access review failed");
                        return Err(Refusal::AuthorizationError(format!(
                            "Authorization error (user={}, verb={verb}, resource=nodes, subresource(s)=[{}])",
                            user.name,
                            subresources.join(" ")
                        )));
                    }
                },
            };
            if allowed {
                return Ok(());
            }
        }
        Err(Refusal::Forbidden(format!(
            "Forbidden (user={}, verb={verb}, resource=nodes, subresource(s)=[{}])",
            user.name,
            subresources.join(" ")
        )))
    }
}

fn authenticated(mut user: User) -> User {
    if !user.groups.iter().any(|g| g == "system:authenticated") {
        user.groups.push("system:authenticated".into());
    }
    user
}

/// The API verb of an HTTP method (upstream's table; others have none).
pub fn verb(method: &str) -> &'static str {
    match method {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
}

fn is_subpath(path: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|r| r.starts_with('/'))
}

/// The subresources a path is authorized as, in the order they are tried.
pub fn subresources(path: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    // KubeletFineGrainedAuthz.
    if is_subpath(path, "/pods") || is_subpath(path, "/runningpods") {
        out.push("pods");
    } else if is_subpath(path, "/healthz") {
        out.push("healthz");
    } else if is_subpath(path, "/configz") {
        out.push("configz");
    }
    out.push(if is_subpath(path, "/stats") {
        "stats"
    } else if is_subpath(path, "/metrics") {
        "metrics"
    } else if is_subpath(path, "/logs") {
        "log"
    } else if is_subpath(path, "/checkpoint") {
        "checkpoint"
    } else {
        "proxy"
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::server::review::ReviewError;
    use async_trait::async_trait;
    use parking_lot::Mutex;

    /// A reviewer that knows one token and one allowed (user, subresource) pair, and counts
    /// its calls.
    #[derive(Default)]
    struct Fake {
        token_calls: Mutex<usize>,
        access_calls: Mutex<Vec<Attributes>>,
        allow: Vec<(&'static str, &'static str, &'static str)>,
        fail: bool,
    }

    #[async_trait]
    impl Reviewer for Fake {
        async fn token_review(&self, token: &str) -> Result<Option<User>, ReviewError> {
            *self.token_calls.lock() += 1;
            if self.fail {
                return Err(ReviewError("down".into()));
            }
            Ok((token == "good").then(|| User {
                name: "alice".into(),
                groups: vec!["devs".into()],
                ..User::default()
            }))
        }

        async fn access_review(
            &self,
            user: &User,
            attrs: &Attributes,
        ) -> Result<bool, ReviewError> {
            self.access_calls.lock().push(attrs.clone());
            if self.fail {
                return Err(ReviewError("down".into()));
            }
            Ok(self
                .allow
                .iter()
                .any(|(u, v, s)| *u == user.name && *v == attrs.verb && *s == attrs.subresource))
        }
    }

    fn auth(fake: Fake, anonymous: bool) -> (Auth, Arc<Fake>) {
        let fake = Arc::new(fake);
        let a = Auth::new("node-1".into(), None, anonymous, fake.clone());
        (a, fake)
    }

    #[tokio::test]
    async fn tokens_are_reviewed_once_and_answers_cached() {
        let (a, fake) = auth(Fake::default(), false);
        let u = a.authenticate(None, Some("Bearer good")).await.unwrap();
        assert_eq!(u.name, "alice");
        assert_eq!(u.groups, ["devs", "system:authenticated"]);
        a.authenticate(None, Some("bearer good")).await.unwrap();
        assert_eq!(*fake.token_calls.lock(), 1);
        // A refusal is cached too.
        for _ in 0..2 {
            assert_eq!(
                a.authenticate(None, Some("Bearer bad")).await.unwrap_err(),
                Refusal::Unauthorized
            );
        }
        assert_eq!(*fake.token_calls.lock(), 2);
    }

    #[tokio::test]
    async fn review_errors_are_401_and_not_cached() {
        let (a, fake) = auth(
            Fake {
                fail: true,
                ..Fake::default()
            },
            false,
        );
        for _ in 0..2 {
            assert_eq!(
                a.authenticate(None, Some("Bearer good")).await.unwrap_err(),
                Refusal::Unauthorized
            );
        }
        assert_eq!(*fake.token_calls.lock(), 2);
    }

    #[tokio::test]
    async fn anonymous_is_refused_unless_enabled_and_bad_credentials_never_become_anonymous() {
        let (a, _) = auth(Fake::default(), false);
        let e = a.authenticate(None, None).await.unwrap_err();
        assert_eq!((e.status(), e.to_string()), (401, "Unauthorized".into()));
        let (a, _) = auth(Fake::default(), true);
        let u = a.authenticate(None, None).await.unwrap();
        assert_eq!(u.name, "system:anonymous");
        assert_eq!(u.groups, ["system:unauthenticated"]);
        assert_eq!(
            a.authenticate(None, Some("Bearer bad")).await.unwrap_err(),
            Refusal::Unauthorized
        );
    }

    #[tokio::test]
    async fn client_certificates_verify_against_the_client_ca_only() {
        let ca = pki::Ca::generate("kubelet-client-ca").unwrap();
        let other = pki::Ca::generate("someone-else").unwrap();
        let der = |pem: &str| {
            use rustls::pki_types::pem::PemObject;
            vec![CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()]
        };
        let good = ca
            .issue_client("kube-apiserver-kubelet-client", &["system:masters"])
            .unwrap();
        let bad = other.issue_client("mallory", &["system:masters"]).unwrap();
        let fake = Arc::new(Fake::default());
        let a = Auth::new(
            "node-1".into(),
            Some(ClientCa::from_pem(&ca.pair.cert_pem).unwrap()),
            true,
            fake,
        );
        let u = a
            .authenticate(Some(&der(&good.cert_pem)), None)
            .await
            .unwrap();
        assert_eq!(u.name, "kube-apiserver-kubelet-client");
        assert_eq!(u.groups, ["system:masters", "system:authenticated"]);
        // Another CA's certificate is a failed credential, even with anonymous access on...
        assert_eq!(
            a.authenticate(Some(&der(&bad.cert_pem)), None)
                .await
                .unwrap_err(),
            Refusal::Unauthorized
        );
        // ...unless a valid token comes with it.
        let u = a
            .authenticate(Some(&der(&bad.cert_pem)), Some("Bearer good"))
            .await
            .unwrap();
        assert_eq!(u.name, "alice");
    }

    #[test]
    fn paths_map_to_upstreams_subresources() {
        assert_eq!(subresources("/exec/ns/p/c"), ["proxy"]);
        assert_eq!(subresources("/containerLogs/ns/p/c"), ["proxy"]);
        assert_eq!(subresources("/stats/summary"), ["stats"]);
        assert_eq!(subresources("/metrics/resource"), ["metrics"]);
        assert_eq!(subresources("/metrics"), ["metrics"]);
        assert_eq!(subresources("/logs/syslog"), ["log"]);
        assert_eq!(subresources("/pods"), ["pods", "proxy"]);
        assert_eq!(subresources("/healthz/ping"), ["healthz", "proxy"]);
        assert_eq!(subresources("/statsx"), ["proxy"]);
        assert_eq!(subresources("/podsx"), ["proxy"]);
        assert_eq!(
            (verb("GET"), verb("POST"), verb("OPTIONS")),
            ("get", "create", "")
        );
    }

    #[tokio::test]
    async fn authorization_falls_back_to_proxy_and_caches_answers() {
        let alice = User {
            name: "alice".into(),
            ..User::default()
        };
        let (a, fake) = auth(
            Fake {
                allow: vec![("alice", "get", "proxy"), ("alice", "get", "stats")],
                ..Fake::default()
            },
            false,
        );
        a.authorize(&alice, "GET", "/pods").await.unwrap();
        a.authorize(&alice, "GET", "/pods").await.unwrap();
        let calls: Vec<String> = fake
            .access_calls
            .lock()
            .iter()
            .map(|c| c.subresource.clone())
            .collect();
        // pods refused, proxy allowed; the second request is answered from the cache.
        assert_eq!(calls, ["pods", "proxy"]);

        let e = a
            .authorize(&alice, "POST", "/exec/ns/p/c")
            .await
            .unwrap_err();
        assert_eq!(e.status(), 403);
        assert_eq!(
            e.to_string(),
            "Forbidden (user=alice, verb=create, resource=nodes, subresource(s)=[proxy])"
        );
        let e = a.authorize(&alice, "DELETE", "/pods").await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "Forbidden (user=alice, verb=delete, resource=nodes, subresource(s)=[pods proxy])"
        );
        a.authorize(&alice, "GET", "/stats/summary").await.unwrap();
    }

    #[tokio::test]
    async fn an_unreachable_authorizer_is_a_500_with_the_attributes() {
        let (a, _) = auth(
            Fake {
                fail: true,
                ..Fake::default()
            },
            false,
        );
        let u = User {
            name: "bob".into(),
            ..User::default()
        };
        let e = a
            .authorize(&u, "GET", "/metrics/resource")
            .await
            .unwrap_err();
        assert_eq!(e.status(), 500);
        assert_eq!(
            e.to_string(),
            "Authorization error (user=bob, verb=get, resource=nodes, subresource(s)=[metrics])"
        );
    }
}
