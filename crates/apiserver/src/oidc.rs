//! OIDC authentication of bearer tokens, as kube-apiserver's JWT authenticator does it
//! (`--oidc-*` flags, or the `jwt` entries of a structured `AuthenticationConfiguration`).
//!
//! Each issuer is one [`JwtAuthenticator`]. It reads a token's unverified `iss` first and
//! declines a token of another issuer, so at most one verifies it. Its discovery document
//! (`<url>/.well-known/openid-configuration`, or `discoveryURL`) is fetched in the background,
//! again every 10 s until it succeeds (until then its tokens fail with "oidc: authenticator not
//! initialized"); the key set at the document's `jwks_uri` is fetched then and again when a
//! token's key is not known and the cached set has expired (`Cache-Control: max-age`, none:
//! at once), one fetch at a time — so keys rotate as the provider publishes them.
//!
//! A token is accepted when: it has one signature by an allowed algorithm (RS256/384/512,
//! PS256/384/512, ES256/384; flags allow RS256 unless `--oidc-signing-algs` says otherwise)
//! with a key of the set; `iss` is the issuer's URL; `aud` holds one of the audiences; `exp`
//! is not past (no leeway); `nbf`, if any, at most a minute ahead; the username claim is a
//! non-empty string (with `email`, an `email_verified` that is present must be `true`); every
//! required claim holds its exact string value. The user: username with its prefix (flags:
//! none given and a claim other than `email` → `<issuer-url>#`; `-` → none), groups (a string
//! or a list) with theirs, `uid` from its claim, and `extra["authentication.kubernetes.io/
//! credential-id"] = "JTI=<jti>"`. A groups claim given as a distributed claim
//! (`_claim_names`/`_claim_sources`) is fetched from its source, whose answer must be a JWT
//! of the same issuer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use parking_lot::RwLock;
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use serde_json::Value;

use crate::auth::UserInfo;

/// How often discovery is retried until it succeeds (upstream's 10 s).
const DISCOVERY_RETRY: Duration = Duration::from_secs(10);
/// How long a token waits for its issuer's first discovery.
const FIRST_DISCOVERY_WAIT: Duration = Duration::from_secs(3);
/// How far ahead `nbf` may be.
const NBF_LEEWAY: i64 = 60;
/// The largest discovery document or key set read.
const MAX_DOCUMENT: usize = 1 << 20;
/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
pub const CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

pub use apimachinery::authn_config::{
    Alg, ClaimMapping, Flags, JwtConfig, parse_authentication_config,
};

/// [`parse_authentication_config`] of a YAML or JSON document.
pub fn parse_authentication_config_text(text: &str) -> Result<Vec<JwtConfig>, String> {
    let doc: Value = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    parse_authentication_config(&doc)
}

/// A public key of the set.
#[derive(Debug, Clone)]
enum Key {
    Rsa { n: Vec<u8>, e: Vec<u8> },
    Ec { curve: &'static str, point: Vec<u8> },
}

#[derive(Debug, Clone)]
struct Jwk {
    kid: Option<String>,
    key: Key,
}

fn parse_jwks(doc: &Value) -> Vec<Jwk> {
    let b64 = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .and_then(|s| URL_SAFE_NO_PAD.decode(s).ok())
    };
    let mut out = Vec::new();
    for k in doc
        .get("keys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if k.get("use")
            .and_then(Value::as_str)
            .is_some_and(|u| u != "sig")
        {
            continue;
        }
        let kid = k.get("kid").and_then(Value::as_str).map(str::to_string);
        let key = match k.get("kty").and_then(Value::as_str) {
            Some("RSA") => match (b64(k.get("n")), b64(k.get("e"))) {
                (Some(n), Some(e)) => Key::Rsa { n, e },
                _ => continue,
            },
            Some("EC") => {
                let curve = match k.get("crv").and_then(Value::as_str) {
                    Some("P-256") => "P-256",
                    Some("P-384") => "P-384",
                    _ => continue,
                };
                match (b64(k.get("x")), b64(k.get("y"))) {
                    (Some(x), Some(y)) => {
                        let mut point = vec![4u8];
                        point.extend(x);
                        point.extend(y);
                        Key::Ec { curve, point }
                    }
                    _ => continue,
                }
            }
            _ => continue,
        };
        out.push(Jwk { kid, key });
    }
    out
}

fn verify_with(key: &Key, alg: Alg, message: &[u8], signature: &[u8]) -> bool {
    use ring::signature as s;
    match (key, alg) {
        (Key::Rsa { n, e }, _) => {
            let params: &s::RsaParameters = match alg {
                Alg::Rs256 => &s::RSA_PKCS1_2048_8192_SHA256,
                Alg::Rs384 => &s::RSA_PKCS1_2048_8192_SHA384,
                Alg::Rs512 => &s::RSA_PKCS1_2048_8192_SHA512,
                Alg::Ps256 => &s::RSA_PSS_2048_8192_SHA256,
                Alg::Ps384 => &s::RSA_PSS_2048_8192_SHA384,
                Alg::Ps512 => &s::RSA_PSS_2048_8192_SHA512,
                Alg::Es256 | Alg::Es384 => return false,
            };
            s::RsaPublicKeyComponents { n, e }
                .verify(params, message, signature)
                .is_ok()
        }
        (
            Key::Ec {
                curve: "P-256",
                point,
            },
            Alg::Es256,
        ) => s::UnparsedPublicKey::new(&s::ECDSA_P256_SHA256_FIXED, point)
            .verify(message, signature)
            .is_ok(),
        (
            Key::Ec {
                curve: "P-384",
                point,
            },
            Alg::Es384,
        ) => s::UnparsedPublicKey::new(&s::ECDSA_P384_SHA384_FIXED, point)
            .verify(message, signature)
            .is_ok(),
        _ => false,
    }
}

#[derive(Default)]
struct State {
    jwks_uri: Option<String>,
    keys: Vec<Jwk>,
    /// When the key set may be fetched again.
    fresh_until: Option<Instant>,
}

/// The configuration's CEL expressions, compiled.
#[derive(Default)]
struct Programs {
    username: Option<cel::Program>,
    groups: Option<cel::Program>,
    uid: Option<cel::Program>,
    extra: Vec<(String, cel::Program)>,
    claim_rules: Vec<(cel::Program, String)>,
    user_rules: Vec<(cel::Program, String)>,
}

impl Programs {
    fn compile(c: &JwtConfig) -> Result<Programs, String> {
        let one = |e: &str| {
            controlplane::admission::cel::compile(e).map_err(|err| format!("{e:?}: {err}"))
        };
        let opt = |e: Option<&str>| e.map(one).transpose();
        Ok(Programs {
            username: opt(c.username.expression.as_deref())?,
            groups: opt(c.groups.as_ref().and_then(|g| g.expression.as_deref()))?,
            uid: opt(c.uid_expression.as_deref())?,
            extra: c
                .extra
                .iter()
                .map(|(k, e)| Ok((k.clone(), one(e)?)))
                .collect::<Result<_, String>>()?,
            claim_rules: c
                .claim_expressions
                .iter()
                .map(|(e, m)| Ok((one(e)?, m.clone())))
                .collect::<Result<_, String>>()?,
            user_rules: c
                .user_rules
                .iter()
                .map(|(e, m)| Ok((one(e)?, m.clone())))
                .collect::<Result<_, String>>()?,
        })
    }
}

/// A CEL result as strings: a string, a list of strings, or nothing (`""`, `[]`, null).
fn strings(v: &cel::Value) -> Option<Vec<String>> {
    match v {
        cel::Value::Null => Some(Vec::new()),
        cel::Value::String(s) if s.is_empty() => Some(Vec::new()),
        cel::Value::String(s) => Some(vec![s.to_string()]),
        cel::Value::List(l) => l
            .iter()
            .map(|v| match v {
                cel::Value::String(s) => Some(s.to_string()),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// One issuer's authenticator.
pub struct JwtAuthenticator {
    pub config: JwtConfig,
    programs: Programs,
    tls: Arc<rustls::ClientConfig>,
    state: RwLock<State>,
    refresh: tokio::sync::Mutex<()>,
}

/// Why a token of this issuer was refused (the server answers 401 whatever it is; this goes
/// to the log).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refused {
    #[error("oidc: authenticator not initialized")]
    NotInitialized,
    #[error("oidc: malformed jwt: {0}")]
    Malformed(&'static str),
    #[error("oidc: unsupported signing algorithm {0}")]
    Algorithm(String),
    #[error("oidc: failed to verify signature")]
    Signature,
    #[error("oidc: id token issued by a different provider, expected {0:?}")]
    Issuer(String),
    #[error("oidc: expected audience in {0:?}")]
    Audience(Vec<String>),
    #[error("oidc: token is expired")]
    Expired,
    #[error("oidc: current time is before the nbf (not before) time")]
    NotYetValid,
    #[error("oidc: parse username claims {0:?}: claim not present or not a non-empty string")]
    Username(String),
    #[error("oidc: email not verified")]
    EmailNotVerified,
    #[error("oidc: required claim {0} not present or not {1:?}")]
    RequiredClaim(String, String),
    #[error("oidc: groups claim {0:?} is not a string or a list of strings")]
    Groups(String),
    #[error("oidc: could not expand distributed claims: {0}")]
    DistributedClaim(String),
    #[error("oidc: error evaluating {0}: {1}")]
    Expression(&'static str, String),
    #[error("oidc: claim validation rule failed: {0}")]
    ClaimRule(String),
    #[error("oidc: user validation rule failed: {0}")]
    UserRule(String),
}

fn roots(ca_pem: Option<&str>) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(pem) = ca_pem {
        for c in rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let c = c.map_err(|e| format!("certificateAuthority: {e}"))?;
            roots
                .add(c)
                .map_err(|e| format!("certificateAuthority: {e}"))?;
        }
        if roots.is_empty() {
            return Err("certificateAuthority holds no certificate".into());
        }
    }
    Ok(roots)
}

/// `GET url` over HTTPS: the JSON body and its `Cache-Control: max-age`.
async fn fetch(
    tls: &Arc<rustls::ClientConfig>,
    url: &str,
) -> Result<(Value, Option<Duration>), String> {
    let (body, max_age) = fetch_bytes(tls, url, None, "application/json").await?;
    let doc: Value = serde_json::from_slice(&body).map_err(|e| format!("{url}: {e}"))?;
    Ok((doc, max_age))
}

/// `GET url` over HTTPS with `bearer` as its credential, if any: the body (at most
/// [`MAX_DOCUMENT`]) and its `Cache-Control: max-age`.
async fn fetch_bytes(
    tls: &Arc<rustls::ClientConfig>,
    url: &str,
    bearer: Option<&str>,
    accept: &str,
) -> Result<(Bytes, Option<Duration>), String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    if uri.scheme_str() != Some("https") {
        return Err(format!("{url}: not https"));
    }
    let host = uri.host().ok_or(format!("{url}: no host"))?.to_string();
    let port = uri.port_u16().unwrap_or(443);
    let work = async {
        let tcp = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        let name = ServerName::try_from(host.trim_matches(['[', ']']).to_string())
            .map_err(|e| format!("{url}: {e}"))?;
        let tls = tokio_rustls::TlsConnector::from(tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .map_err(|e| format!("{url}: {e}"))?;
        tokio::spawn(conn);
        let mut req = http::Request::builder()
            .uri(uri.path_and_query().map(|p| p.as_str()).unwrap_or("/"))
            .header(
                http::header::HOST,
                uri.authority().map(|a| a.as_str()).unwrap_or(""),
            )
            .header(http::header::ACCEPT, accept);
        if let Some(token) = bearer {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let req = req.body(Empty::<Bytes>::new()).map_err(|e| e.to_string())?;
        let resp = send
            .send_request(req)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("{url}: {}", resp.status()));
        }
        let max_age = resp
            .headers()
            .get(http::header::CACHE_CONTROL)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.split(',').find_map(|d| {
                    d.trim()
                        .strip_prefix("max-age=")
                        .and_then(|n| n.parse::<u64>().ok())
                })
            })
            .map(Duration::from_secs);
        let body = http_body_util::Limited::new(resp.into_body(), MAX_DOCUMENT)
            .collect()
            .await
            .map_err(|e| format!("{url}: {e}"))?
            .to_bytes();
        Ok((body, max_age))
    };
    tokio::time::timeout(FETCH_TIMEOUT, work)
        .await
        .map_err(|_| format!("{url}: timed out"))?
}

fn b64_json(part: &str) -> Option<Value> {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).ok()?).ok()
}

/// The issuer a token names, without verifying anything.
pub fn unverified_issuer(token: &str) -> Option<String> {
    let mut parts = token.split('.');
    let (_, Some(p), _) = (parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    b64_json(p)?.get("iss")?.as_str().map(str::to_string)
}

impl JwtAuthenticator {
    /// An authenticator for `config`; [`JwtAuthenticator::start`] runs its discovery.
    pub fn new(config: JwtConfig) -> Result<Arc<JwtAuthenticator>, String> {
        let roots = roots(config.certificate_authority.as_deref())?;
        let programs = Programs::compile(&config)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Arc::new(JwtAuthenticator {
            config,
            programs,
            tls: Arc::new(tls),
            state: RwLock::new(State::default()),
            refresh: tokio::sync::Mutex::new(()),
        }))
    }

    /// Fetches the discovery document (every 10 s until it succeeds) and the key set, in
    /// the background.
    pub fn start(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let Some(a) = me.upgrade() else { return };
                match a.discover().await {
                    Ok(()) => return,
                    Err(e) => {
                        tracing::warn!(issuer = %a.config.issuer_url, error = %e, "OIDC discovery failed; retrying in 10 s")
                    }
                }
                drop(a);
                tokio::time::sleep(DISCOVERY_RETRY).await;
            }
        });
    }

    /// Whether discovery has succeeded.
    pub fn initialized(&self) -> bool {
        self.state.read().jwks_uri.is_some()
    }

    async fn discover(&self) -> Result<(), String> {
        let url = self.config.discovery_url.clone().unwrap_or_else(|| {
            format!(
                "{}/.well-known/openid-configuration",
                self.config.issuer_url.trim_end_matches('/')
            )
        });
        let (doc, _) = fetch(&self.tls, &url).await?;
        let issuer = doc.get("issuer").and_then(Value::as_str).unwrap_or("");
        if issuer != self.config.issuer_url {
            return Err(format!(
                "oidc: issuer did not match the issuer returned by provider, expected {:?} got {issuer:?}",
                self.config.issuer_url
            ));
        }
        let jwks = doc
            .get("jwks_uri")
            .and_then(Value::as_str)
            .ok_or("the discovery document has no jwks_uri")?
            .to_string();
        let (set, max_age) = fetch(&self.tls, &jwks).await?;
        let mut st = self.state.write();
        st.keys = parse_jwks(&set);
        st.fresh_until = max_age.map(|a| Instant::now() + a);
        st.jwks_uri = Some(jwks);
        Ok(())
    }

    /// Fetches the key set again unless it is still fresh (one fetch at a time); whether it
    /// was fetched.
    async fn refresh_keys(&self) -> bool {
        let _one = self.refresh.lock().await;
        let (uri, fresh) = {
            let st = self.state.read();
            (
                st.jwks_uri.clone(),
                st.fresh_until.is_some_and(|t| Instant::now() < t),
            )
        };
        let Some(uri) = uri else { return false };
        if fresh {
            return false;
        }
        match fetch(&self.tls, &uri).await {
            Ok((set, max_age)) => {
                let mut st = self.state.write();
                st.keys = parse_jwks(&set);
                // Fetched just now: not again for a moment even without max-age (a burst of
                // bad tokens costs one fetch, not one each).
                st.fresh_until = Some(Instant::now() + max_age.unwrap_or(Duration::from_secs(1)));
                true
            }
            Err(e) => {
                tracing::warn!(issuer = %self.config.issuer_url, error = %e, "fetching the OIDC key set");
                false
            }
        }
    }

    fn signature_ok(&self, kid: Option<&str>, alg: Alg, message: &[u8], sig: &[u8]) -> bool {
        let st = self.state.read();
        st.keys
            .iter()
            .filter(|k| kid.is_none() || k.kid.as_deref() == kid)
            .any(|k| verify_with(&k.key, alg, message, sig))
    }

    /// The user of `token`: `None` when the token is not this issuer's (another authenticator
    /// may take it), `Some(Err)` when it is and is refused.
    pub async fn authenticate(&self, token: &str, now: i64) -> Option<Result<UserInfo, Refused>> {
        let iss = unverified_issuer(token)?;
        if iss != self.config.issuer_url {
            return None;
        }
        Some(self.verify(token, now).await)
    }

    async fn verify(&self, token: &str, now: i64) -> Result<UserInfo, Refused> {
        if !self.initialized() {
            return Err(Refused::NotInitialized);
        }
        let parts: Vec<&str> = token.split('.').collect();
        let [h, p, s] = parts.as_slice() else {
            return Err(Refused::Malformed("a JWS has three parts"));
        };
        let header = b64_json(h).ok_or(Refused::Malformed("header"))?;
        let claims = b64_json(p).ok_or(Refused::Malformed("payload"))?;
        let sig = URL_SAFE_NO_PAD
            .decode(s)
            .map_err(|_| Refused::Malformed("signature"))?;
        let alg_name = header.get("alg").and_then(Value::as_str).unwrap_or("");
        let alg = Alg::parse(alg_name)
            .filter(|a| self.config.algorithms.contains(a))
            .ok_or_else(|| Refused::Algorithm(alg_name.to_string()))?;
        let kid = header.get("kid").and_then(Value::as_str);
        let message = &token.as_bytes()[..h.len() + 1 + p.len()];
        let verified = self.signature_ok(kid, alg, message, &sig)
            || (self.refresh_keys().await && self.signature_ok(kid, alg, message, &sig));
        if !verified {
            return Err(Refused::Signature);
        }
        let claims = self.expand_distributed(claims, now).await?;
        self.user(&claims, now)
    }

    /// The groups claim from its source when the token carries it as a distributed claim
    /// (OpenID Connect Core §5.6.2, as kube-apiserver resolves it for the groups claim only):
    /// `_claim_names[<groups claim>]` names a source in `_claim_sources` whose `endpoint` is
    /// fetched over HTTPS (with its `access_token` as the bearer credential, if any); the
    /// answer is a JWT this issuer signed, not expired, whose payload holds the claim. A claim
    /// present in the token itself wins. Only this issuer's own keys verify the source's JWT.
    async fn expand_distributed(&self, mut claims: Value, now: i64) -> Result<Value, Refused> {
        let Some(claim) = self
            .config
            .groups
            .as_ref()
            .map(|g| g.claim.clone())
            .filter(|c| !c.is_empty())
        else {
            return Ok(claims);
        };
        if claims.get(&claim).is_some() {
            return Ok(claims);
        }
        let Some(source) = claims
            .pointer(&format!(
                "/_claim_names/{}",
                claim.replace('~', "~0").replace('/', "~1")
            ))
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return Ok(claims);
        };
        let fail = |why: String| Refused::DistributedClaim(why);
        let src = claims
            .get("_claim_sources")
            .and_then(|s| s.get(&source))
            .cloned()
            .ok_or_else(|| fail(format!("source {source:?} is not in _claim_sources")))?;
        let endpoint = src
            .get("endpoint")
            .and_then(Value::as_str)
            .ok_or_else(|| fail(format!("source {source:?} has no endpoint")))?;
        let access = src.get("access_token").and_then(Value::as_str);
        let (body, _) = fetch_bytes(&self.tls, endpoint, access, "application/jwt")
            .await
            .map_err(fail)?;
        let jwt = std::str::from_utf8(&body)
            .map_err(|_| fail("the source's answer is not a JWT".into()))?
            .trim();
        let parts: Vec<&str> = jwt.split('.').collect();
        let [h, p, sig] = parts.as_slice() else {
            return Err(fail("the source's answer is not a JWT".into()));
        };
        let header = b64_json(h).ok_or_else(|| fail("the source's JWT header".into()))?;
        let payload = b64_json(p).ok_or_else(|| fail("the source's JWT payload".into()))?;
        let sig = URL_SAFE_NO_PAD
            .decode(sig)
            .map_err(|_| fail("the source's JWT signature".into()))?;
        let alg = header
            .get("alg")
            .and_then(Value::as_str)
            .and_then(Alg::parse)
            .filter(|a| self.config.algorithms.contains(a))
            .ok_or_else(|| fail("the source's JWT algorithm is not allowed".into()))?;
        let kid = header.get("kid").and_then(Value::as_str);
        let message = &jwt.as_bytes()[..h.len() + 1 + p.len()];
        if !(self.signature_ok(kid, alg, message, &sig)
            || (self.refresh_keys().await && self.signature_ok(kid, alg, message, &sig)))
        {
            return Err(fail("the source's JWT is not signed by the issuer".into()));
        }
        if payload.get("iss").and_then(Value::as_str) != Some(self.config.issuer_url.as_str()) {
            return Err(fail("the source's JWT is of another issuer".into()));
        }
        if payload
            .get("exp")
            .and_then(Value::as_i64)
            .is_some_and(|e| e <= now)
        {
            return Err(fail("the source's JWT is expired".into()));
        }
        let value = payload
            .get(&claim)
            .cloned()
            .ok_or_else(|| fail(format!("the source's JWT has no {claim:?} claim")))?;
        claims[&claim] = value;
        Ok(claims)
    }

    /// The user the verified `claims` name (the checks after the signature).
    pub fn user(&self, claims: &Value, now: i64) -> Result<UserInfo, Refused> {
        let c = &self.config;
        if claims.get("iss").and_then(Value::as_str) != Some(c.issuer_url.as_str()) {
            return Err(Refused::Issuer(c.issuer_url.clone()));
        }
        let aud: Vec<&str> = match claims.get("aud") {
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !c.audiences.iter().any(|a| aud.contains(&a.as_str())) {
            return Err(Refused::Audience(c.audiences.clone()));
        }
        let exp = claims.get("exp").and_then(Value::as_f64);
        // Expired once now is after it (go-oidc's rule): no leeway.
        if exp.is_none_or(|e| (e as i64) < now) {
            return Err(Refused::Expired);
        }
        if claims
            .get("nbf")
            .and_then(Value::as_f64)
            .is_some_and(|nbf| nbf as i64 > now + NBF_LEEWAY)
        {
            return Err(Refused::NotYetValid);
        }
        let vars = controlplane::admission::cel::Vars::default().json("claims", Some(claims));
        let eval = |what: &'static str, p: &cel::Program| {
            controlplane::admission::cel::eval(p, &vars).map_err(|e| Refused::Expression(what, e))
        };
        for (p, message) in &self.programs.claim_rules {
            match eval("claim validation rule", p)? {
                cel::Value::Bool(true) => {}
                cel::Value::Bool(false) => {
                    return Err(Refused::ClaimRule(if message.is_empty() {
                        format!("expression {:?} is false", p.expression())
                    } else {
                        message.clone()
                    }));
                }
                other => {
                    return Err(Refused::Expression(
                        "claim validation rule",
                        format!("expected a boolean, got {other:?}"),
                    ));
                }
            }
        }
        let name = match &self.programs.username {
            Some(p) => match eval("username expression", p)? {
                cel::Value::String(s) if !s.is_empty() => s.to_string(),
                _ => {
                    return Err(Refused::Username(
                        "claimMappings.username.expression".into(),
                    ));
                }
            },
            None => claims
                .get(&c.username.claim)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| Refused::Username(c.username.claim.clone()))?
                .to_string(),
        };
        if self.programs.username.is_none()
            && c.username.claim == "email"
            && let Some(v) = claims.get("email_verified")
            && v != &Value::Bool(true)
        {
            return Err(Refused::EmailNotVerified);
        }
        for (k, v) in &c.required_claims {
            if claims.get(k).and_then(Value::as_str) != Some(v.as_str()) {
                return Err(Refused::RequiredClaim(k.clone(), v.clone()));
            }
        }
        let mut groups = Vec::new();
        if let Some(p) = &self.programs.groups {
            let v = eval("groups expression", p)?;
            groups = strings(&v)
                .ok_or_else(|| Refused::Groups("claimMappings.groups.expression".into()))?;
        } else if let Some(g) = &c.groups {
            match claims.get(&g.claim) {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) => groups.push(format!("{}{s}", g.prefix)),
                Some(Value::Array(a)) => {
                    for v in a {
                        let s = v.as_str().ok_or_else(|| Refused::Groups(g.claim.clone()))?;
                        groups.push(format!("{}{s}", g.prefix));
                    }
                }
                Some(_) => return Err(Refused::Groups(g.claim.clone())),
            }
        }
        let uid = match &self.programs.uid {
            Some(p) => match eval("uid expression", p)? {
                cel::Value::String(s) => s.to_string(),
                other => {
                    return Err(Refused::Expression(
                        "uid expression",
                        format!("expected a string, got {other:?}"),
                    ));
                }
            },
            None => c
                .uid_claim
                .as_ref()
                .and_then(|u| claims.get(u))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        };
        let mut extra = Vec::new();
        for (key, p) in &self.programs.extra {
            let v = eval("extra mapping", p)?;
            let values = strings(&v).ok_or_else(|| {
                Refused::Expression(
                    "extra mapping",
                    format!("{key}: not a string or a list of strings"),
                )
            })?;
            if !values.is_empty() {
                extra.push((key.clone(), values));
            }
        }
        if let Some(jti) = claims.get("jti").and_then(Value::as_str) {
            extra.push((CREDENTIAL_ID.to_string(), vec![format!("JTI={jti}")]));
        }
        let mut user = UserInfo {
            name: format!("{}{name}", c.username.prefix),
            uid,
            groups,
            extra,
        };
        if !self.programs.user_rules.is_empty() {
            let extra: serde_json::Map<String, Value> = user
                .extra
                .iter()
                .map(|(k, v)| (k.clone(), Value::from(v.clone())))
                .collect();
            let u = serde_json::json!({"username": user.name, "uid": user.uid,
                "groups": user.groups, "extra": extra});
            let vars = controlplane::admission::cel::Vars::default().json("user", Some(&u));
            for (p, message) in &self.programs.user_rules {
                match controlplane::admission::cel::eval(p, &vars) {
                    Ok(cel::Value::Bool(true)) => {}
                    Ok(_) => {
                        return Err(Refused::UserRule(if message.is_empty() {
                            format!("expression {:?} is false", p.expression())
                        } else {
                            message.clone()
                        }));
                    }
                    Err(e) => return Err(Refused::Expression("user validation rule", e)),
                }
            }
        }
        // What the union of authenticators adds, after the user's rules saw the user.
        user.groups.push("system:authenticated".into());
        Ok(user)
    }
}

/// How long a token's successful authentication is remembered (kube-apiserver's
/// `TokenSuccessCacheTTL`; failures are never cached), at most until the token expires.
pub const SUCCESS_CACHE_TTL: Duration = Duration::from_secs(10);
/// How many tokens the success cache holds (it drops what expired, then starts over).
const SUCCESS_CACHE_SIZE: usize = 10_000;

/// A token's digest, the success cache's key (the token itself is never kept).
type TokenDigest = [u8; 32];

/// The OIDC authenticators of one cluster (the root's flags or configuration, or a tenant
/// cluster's `spec.authentication`), with the success cache of their tokens.
#[derive(Default)]
pub struct Authenticators {
    list: RwLock<Vec<Arc<JwtAuthenticator>>>,
    accepted: parking_lot::Mutex<std::collections::HashMap<TokenDigest, (UserInfo, Instant)>>,
}

fn digest(token: &str) -> TokenDigest {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

impl Authenticators {
    /// Replaces the issuers (a reloaded configuration): what was cached is forgotten.
    pub fn set(&self, list: Vec<Arc<JwtAuthenticator>>) {
        for a in &list {
            a.start();
        }
        *self.list.write() = list;
        self.accepted.lock().clear();
    }

    /// How many accepted tokens are remembered.
    pub fn cached(&self) -> usize {
        self.accepted.lock().len()
    }

    /// Remembers `user` for `token` until the TTL or the token's `exp`, whichever is first.
    fn remember(&self, key: TokenDigest, token: &str, user: &UserInfo, now: i64) {
        let exp = token
            .split('.')
            .nth(1)
            .and_then(b64_json)
            .and_then(|c| c.get("exp").and_then(Value::as_i64));
        let left = exp.map_or(SUCCESS_CACHE_TTL, |e| {
            Duration::from_secs(u64::try_from(e - now).unwrap_or(0)).min(SUCCESS_CACHE_TTL)
        });
        if left.is_zero() {
            return;
        }
        let at = Instant::now();
        let mut cache = self.accepted.lock();
        if cache.len() >= SUCCESS_CACHE_SIZE {
            cache.retain(|_, (_, until)| *until > at);
            if cache.len() >= SUCCESS_CACHE_SIZE {
                cache.clear();
            }
        }
        cache.insert(key, (user.clone(), at + left));
    }

    pub fn is_empty(&self) -> bool {
        self.list.read().is_empty()
    }

    /// The user of a token one of the issuers verifies; None when none of them issued it.
    /// An issuer still running its first discovery is given a moment to finish.
    pub async fn authenticate(&self, token: &str, now: i64) -> Option<Result<UserInfo, Refused>> {
        let key = digest(token);
        if let Some((user, until)) = self.accepted.lock().get(&key)
            && *until > Instant::now()
        {
            return Some(Ok(user.clone()));
        }
        let verdict = self.verify(token, now).await?;
        if let Ok(user) = &verdict {
            self.remember(key, token, user, now);
        }
        Some(verdict)
    }

    async fn verify(&self, token: &str, now: i64) -> Option<Result<UserInfo, Refused>> {
        let iss = unverified_issuer(token)?;
        let a = self
            .list
            .read()
            .iter()
            .find(|a| a.config.issuer_url == iss)
            .cloned()?;
        let deadline = Instant::now() + FIRST_DISCOVERY_WAIT;
        while !a.initialized() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        a.authenticate(token, now).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn authenticator() -> JwtAuthenticator {
        let f = Flags {
            issuer_url: Some("https://idp.example".into()),
            client_id: Some("kubectl".into()),
            username_claim: Some("email".into()),
            groups_claim: Some("groups".into()),
            groups_prefix: Some("oidc:".into()),
            required_claims: vec!["hd=example.com".into()],
            ..Default::default()
        };
        let a = JwtAuthenticator::new(f.config().unwrap().unwrap()).unwrap();
        Arc::into_inner(a).unwrap()
    }

    #[test]
    fn claims_make_the_user_and_every_rule_refuses_with_its_reason() {
        let a = authenticator();
        let good = json!({"iss": "https://idp.example", "aud": ["other", "kubectl"], "exp": 2000, "nbf": 1030,
            "email": "jane@example.com", "email_verified": true, "hd": "example.com", "groups": ["dev", "ops"], "jti": "t1"});
        let u = a.user(&good, 1000).unwrap();
        assert_eq!(u.name, "jane@example.com");
        assert_eq!(u.groups, ["oidc:dev", "oidc:ops", "system:authenticated"]);
        assert_eq!(
            u.extra,
            [(CREDENTIAL_ID.to_string(), vec!["JTI=t1".to_string()])]
        );
        let with = |k: &str, v: Value| {
            let mut c = good.clone();
            c[k] = v;
            a.user(&c, 1000)
        };
        assert_eq!(with("groups", json!("dev")).unwrap().groups[0], "oidc:dev");
        assert!(matches!(
            with("iss", json!("https://evil")),
            Err(Refused::Issuer(_))
        ));
        assert!(matches!(
            with("aud", json!("nope")),
            Err(Refused::Audience(_))
        ));
        assert_eq!(with("exp", json!(999)), Err(Refused::Expired));
        assert!(with("exp", json!(1000)).is_ok());
        assert_eq!(with("nbf", json!(1061)), Err(Refused::NotYetValid));
        assert_eq!(
            with("email_verified", json!(false)),
            Err(Refused::EmailNotVerified)
        );
        assert_eq!(
            with("email_verified", json!("true")),
            Err(Refused::EmailNotVerified)
        );
        assert!(matches!(
            with("hd", json!("evil.com")),
            Err(Refused::RequiredClaim(..))
        ));
        assert!(matches!(
            with("email", json!("")),
            Err(Refused::Username(_))
        ));
        assert!(matches!(
            with("groups", json!([1])),
            Err(Refused::Groups(_))
        ));
        let mut no_verified = good.clone();
        no_verified
            .as_object_mut()
            .unwrap()
            .remove("email_verified");
        assert!(a.user(&no_verified, 1000).is_ok());
    }

    #[test]
    fn cel_mappings_and_rules_make_and_check_the_user() {
        let doc = json!({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AuthenticationConfiguration",
        "jwt": [{"issuer": {"url": "https://idp.example", "audiences": ["k"]},
            "claimValidationRules": [
                {"expression": "claims.?email_verified.orValue(true) == true", "message": "email not verified"},
                {"expression": "has(claims.groups) && claims.groups.exists(g, g in ['dev', 'ops'])", "message": "not a member"},
            ],
            "claimMappings": {
                "username": {"expression": "'oidc:' + claims.email"},
                "groups": {"expression": "claims.groups.map(g, 'team:' + g)"},
                "uid": {"expression": "claims.sub"},
                "extra": [{"key": "example.com/tenant", "valueExpression": "claims.tenant"}],
            },
            "userValidationRules": [{"expression": "!user.username.startsWith('oidc:system')", "message": "no system users"}],
        }]});
        let c = parse_authentication_config(&doc).unwrap().remove(0);
        let a = Arc::into_inner(JwtAuthenticator::new(c).unwrap()).unwrap();
        let claims = json!({"iss": "https://idp.example", "aud": "k", "exp": 2000, "sub": "s-1",
            "email": "jane@example.com", "groups": ["dev"], "tenant": "foo"});
        let u = a.user(&claims, 1000).unwrap();
        assert_eq!(u.name, "oidc:jane@example.com");
        assert_eq!(u.uid, "s-1");
        assert_eq!(u.groups, ["team:dev", "system:authenticated"]);
        assert_eq!(
            u.extra,
            [("example.com/tenant".to_string(), vec!["foo".to_string()])]
        );
        let with = |k: &str, v: Value| {
            let mut c = claims.clone();
            c[k] = v;
            a.user(&c, 1000)
        };
        assert_eq!(
            with("email_verified", json!(false)),
            Err(Refused::ClaimRule("email not verified".into()))
        );
        assert_eq!(
            with("groups", json!(["qa"])),
            Err(Refused::ClaimRule("not a member".into()))
        );
        assert_eq!(
            with("email", json!("system:admin")),
            Err(Refused::UserRule("no system users".into()))
        );
        // An empty tenant claim gives no extra value at all.
        assert!(with("tenant", json!("")).unwrap().extra.is_empty());
    }

    #[test]
    fn a_key_set_gives_rsa_and_ec_keys_and_skips_encryption_keys() {
        let set = json!({"keys": [
            {"kty": "RSA", "kid": "r", "n": "AQAB", "e": "AQAB"},
            {"kty": "EC", "kid": "e", "crv": "P-256", "x": "AQ", "y": "Ag"},
            {"kty": "EC", "kid": "enc", "use": "enc", "crv": "P-256", "x": "AQ", "y": "Ag"},
            {"kty": "OKP", "kid": "ed", "crv": "Ed25519", "x": "AQ"},
        ]});
        let keys = parse_jwks(&set);
        assert_eq!(keys.len(), 2);
        assert!(matches!(&keys[1].key, Key::Ec { point, .. } if point == &vec![4, 1, 2]));
    }
}
