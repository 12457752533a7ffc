//! Signing in to the console through an OpenID Connect provider: the authorization code flow
//! with PKCE (RFC 7636, `S256`) as a public client, the same client the API server's OIDC
//! authenticator accepts tokens for (`--oidc-client-id`).
//!
//! [`OidcLogin::start`] sends the browser to the provider's authorization endpoint with a
//! fresh `state`, `nonce` and code challenge, kept in a short-lived cookie of the console's;
//! [`OidcLogin::finish`] checks the returned `state` against it, redeems the code at the token
//! endpoint with the verifier, checks the ID token's `nonce`, and the ID token becomes the
//! session's bearer token — the API server authenticates it like any other (signature,
//! issuer, audience, expiry, claim mappings), so the console decides nothing about identity.
//! Endpoints come from the issuer's discovery document, fetched once.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use serde_json::Value;

/// The largest document read from the provider (discovery, token responses).
const MAX_DOCUMENT: usize = 64 * 1024;
/// How long a call to the provider may take.
const TIMEOUT: Duration = Duration::from_secs(10);

type HttpClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

/// The provider's endpoints, from its discovery document.
#[derive(Debug, Clone)]
struct Endpoints {
    authorization: String,
    token: String,
}

/// The console's OIDC client.
pub struct OidcLogin {
    issuer: String,
    client_id: String,
    scopes: String,
    http: HttpClient,
    endpoints: tokio::sync::Mutex<Option<Endpoints>>,
}

/// A login in progress: what the browser's login cookie carries between the redirect to the
/// provider and the callback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub state: String,
    pub verifier: String,
    pub nonce: String,
}

impl Pending {
    fn fresh() -> Result<Pending, String> {
        Ok(Pending {
            state: random()?,
            verifier: random()?,
            nonce: random()?,
        })
    }

    /// The cookie value (`state.verifier.nonce`, each base64url).
    pub fn encode(&self) -> String {
        format!("{}.{}.{}", self.state, self.verifier, self.nonce)
    }

    pub fn decode(s: &str) -> Option<Pending> {
        let mut parts = s.split('.');
        let (state, verifier, nonce) = (parts.next()?, parts.next()?, parts.next()?);
        let ok = |p: &str| {
            !p.is_empty()
                && p.len() <= 128
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        (parts.next().is_none() && ok(state) && ok(verifier) && ok(nonce)).then(|| Pending {
            state: state.into(),
            verifier: verifier.into(),
            nonce: nonce.into(),
        })
    }
}

/// 32 random bytes, base64url (a PKCE verifier has 43 characters, as RFC 7636 recommends).
fn random() -> Result<String, String> {
    use ring::rand::SecureRandom as _;
    let mut b = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| "no randomness".to_string())?;
    Ok(URL_SAFE_NO_PAD.encode(b))
}

/// The `S256` code challenge of a verifier.
pub fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(ring::digest::digest(
        &ring::digest::SHA256,
        verifier.as_bytes(),
    ))
}

fn query(pairs: &[(&str, &str)]) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

impl OidcLogin {
    /// A client of `issuer` as `client_id`, trusting `ca_pem` (the provider's CA) when given,
    /// else the system's roots.
    pub fn new(issuer: &str, client_id: &str, ca_pem: Option<&str>) -> Result<OidcLogin, String> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject as _;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = match ca_pem {
            Some(pem) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                    roots
                        .add(c.map_err(|e| format!("the provider's CA: {e}"))?)
                        .map_err(|e| format!("the provider's CA: {e}"))?;
                }
                let tls = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| e.to_string())?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls)
            }
            None => hyper_rustls::HttpsConnectorBuilder::new()
                .with_provider_and_native_roots(provider)
                .map_err(|e| format!("the system's roots: {e}"))?,
        };
        let connector = builder.https_only().enable_http1().build();
        let http =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(connector);
        Ok(OidcLogin {
            issuer: issuer.trim_end_matches('/').to_string(),
            client_id: client_id.to_string(),
            scopes: "openid email profile".into(),
            http,
            endpoints: Default::default(),
        })
    }

    async fn call(&self, req: http::Request<Full<Bytes>>) -> Result<Value, String> {
        let uri = req.uri().to_string();
        let work = async {
            let resp = self
                .http
                .request(req)
                .await
                .map_err(|e| format!("{uri}: {e}"))?;
            let status = resp.status();
            let body = Limited::new(resp.into_body(), MAX_DOCUMENT)
                .collect()
                .await
                .map_err(|e| format!("{uri}: {e}"))?
                .to_bytes();
            let doc: Value = serde_json::from_slice(&body)
                .map_err(|e| format!("{uri}: not JSON ({status}): {e}"))?;
            if !status.is_success() {
                let error = doc.get("error").and_then(Value::as_str).unwrap_or("");
                let description = doc
                    .get("error_description")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                return Err(format!("{uri}: {status} {error} {description}"));
            }
            Ok(doc)
        };
        tokio::time::timeout(TIMEOUT, work)
            .await
            .map_err(|_| format!("{uri}: no answer in {TIMEOUT:?}"))?
    }

    async fn endpoints(&self) -> Result<Endpoints, String> {
        let mut cached = self.endpoints.lock().await;
        if let Some(e) = cached.as_ref() {
            return Ok(e.clone());
        }
        let url = format!("{}/.well-known/openid-configuration", self.issuer);
        let req = http::Request::get(&url)
            .header(http::header::ACCEPT, "application/json")
            .body(Full::default())
            .map_err(|e| e.to_string())?;
        let doc = self.call(req).await?;
        if doc.get("issuer").and_then(Value::as_str) != Some(self.issuer.as_str()) {
            return Err(format!("{url}: the document names another issuer"));
        }
        let field = |k: &str| {
            doc.get(k)
                .and_then(Value::as_str)
                .filter(|u| u.starts_with("https://"))
                .map(str::to_string)
                .ok_or(format!("{url}: no https {k}"))
        };
        let e = Endpoints {
            authorization: field("authorization_endpoint")?,
            token: field("token_endpoint")?,
        };
        *cached = Some(e.clone());
        Ok(e)
    }

    /// Where to send the browser to sign in, and the login to remember until it comes back to
    /// `redirect_uri`.
    pub async fn start(&self, redirect_uri: &str) -> Result<(String, Pending), String> {
        let e = self.endpoints().await?;
        let p = Pending::fresh()?;
        let sep = if e.authorization.contains('?') {
            '&'
        } else {
            '?'
        };
        let url = format!(
            "{}{sep}{}",
            e.authorization,
            query(&[
                ("response_type", "code"),
                ("client_id", &self.client_id),
                ("redirect_uri", redirect_uri),
                ("scope", &self.scopes),
                ("state", &p.state),
                ("nonce", &p.nonce),
                ("code_challenge", &challenge(&p.verifier)),
                ("code_challenge_method", "S256"),
            ])
        );
        Ok((url, p))
    }

    /// Redeems the `code` the provider sent back with `state`: the ID token.
    pub async fn finish(
        &self,
        pending: &Pending,
        state: &str,
        code: &str,
        redirect_uri: &str,
    ) -> Result<String, String> {
        if state != pending.state {
            return Err("the sign-in's state does not match this browser's".into());
        }
        let e = self.endpoints().await?;
        let body = query(&[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("client_id", &self.client_id),
            ("code_verifier", &pending.verifier),
        ]);
        let req = http::Request::post(&e.token)
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let doc = self.call(req).await?;
        let id_token = doc
            .get("id_token")
            .and_then(Value::as_str)
            .ok_or("the provider returned no id_token")?;
        // The signature, issuer, audience and expiry are the API server's to check; the nonce
        // binds the token to this login.
        if nonce_of(id_token).as_deref() != Some(pending.nonce.as_str()) {
            return Err("the ID token is not for this sign-in (nonce)".into());
        }
        Ok(id_token.to_string())
    }
}

/// The `nonce` claim of a JWT (its payload read, not verified).
fn nonce_of(jwt: &str) -> Option<String> {
    let payload = jwt.split('.').nth(1)?;
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
    claims.get("nonce")?.as_str().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_challenge_is_rfc_7636s_s256() {
        // RFC 7636, appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn a_pending_login_round_trips_through_its_cookie_and_nothing_else_decodes() {
        let p = Pending::fresh().unwrap();
        assert_eq!(p.verifier.len(), 43);
        assert_ne!(p.state, p.nonce);
        assert_eq!(Pending::decode(&p.encode()), Some(p));
        for bad in ["", "a.b", "a.b.c.d", "a.b.", "a b.c.d", "a.b.c;d"] {
            assert_eq!(Pending::decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_nonce_is_read_from_the_tokens_payload() {
        let payload = URL_SAFE_NO_PAD.encode(r#"{"nonce":"n-1","sub":"x"}"#);
        assert_eq!(nonce_of(&format!("h.{payload}.s")).as_deref(), Some("n-1"));
        assert_eq!(nonce_of("not a jwt"), None);
    }
}
