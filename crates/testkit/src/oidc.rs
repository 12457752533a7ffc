//! An OIDC issuer for tests, on loopback: HTTPS with a CA of its own, the discovery document
//! at `<url>/.well-known/openid-configuration`, a key set at `<url>/keys` that the test
//! changes at will (ES256 keys: `ring` makes them), and tokens it signs; and a browser sign-in:
//! an authorization endpoint that signs in the user the test chose ([`Issuer::sign_in_as`])
//! without a page, and a token endpoint redeeming its codes (PKCE `S256` checked).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};

/// A signing key of the issuer.
pub struct SigningKey {
    pub kid: String,
    pair: EcdsaKeyPair,
}

impl SigningKey {
    /// A new P-256 key named `kid`.
    pub fn new(kid: &str) -> SigningKey {
        let rng = SystemRandom::new();
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("a key");
        SigningKey {
            kid: kid.into(),
            pair: EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
                .expect("the key"),
        }
    }

    /// Its public half as a JWK.
    pub fn jwk(&self) -> Value {
        let p = self.pair.public_key().as_ref();
        json!({"kty": "EC", "crv": "P-256", "kid": self.kid, "use": "sig", "alg": "ES256",
            "x": URL_SAFE_NO_PAD.encode(&p[1..33]), "y": URL_SAFE_NO_PAD.encode(&p[33..65])})
    }

    /// A JWT of `claims` signed with this key (ES256).
    pub fn sign(&self, claims: &Value) -> String {
        let header = json!({"alg": "ES256", "kid": self.kid, "typ": "JWT"});
        let msg = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let sig = self
            .pair
            .sign(&SystemRandom::new(), msg.as_bytes())
            .expect("signing");
        format!("{msg}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
    }
}

/// The running issuer (it stops with the test's runtime).
pub struct Issuer {
    /// `https://127.0.0.1:<port>/realms/test`.
    pub url: String,
    /// The CA of its serving certificate (PEM).
    pub ca_pem: String,
    keys: Arc<Mutex<Vec<Value>>>,
    key_fetches: Arc<AtomicUsize>,
    sources: ClaimSources,
    login: Login,
}

/// Who the authorization endpoint signs in (the key and the claims of the ID token), and the
/// codes it gave out: code → (ID token, code challenge, redirect URI).
#[derive(Default, Clone)]
struct Login {
    user: Arc<Mutex<Option<User>>>,
    codes: Arc<Mutex<std::collections::HashMap<String, Grant>>>,
}

/// The signing key and claims of the user the authorization endpoint signs in.
type User = (Arc<SigningKey>, Value);

/// What a code is redeemed for and under which conditions: the ID token, the PKCE challenge
/// and the redirect URI.
type Grant = (String, String, String);

fn reply(status: u16, content_type: &str, body: String) -> hyper::Response<Full<Bytes>> {
    hyper::Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("a response")
}

impl Login {
    /// `GET <url>/auth?...`: redirects back to `redirect_uri` with a code for the chosen user
    /// (or `error=access_denied` when the test chose none).
    fn authorize(&self, issuer: &str, query: &str) -> hyper::Response<Full<Bytes>> {
        let q: std::collections::HashMap<String, String> = form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        let get = |k: &str| q.get(k).cloned().unwrap_or_default();
        let redirect = get("redirect_uri");
        if get("response_type") != "code"
            || get("code_challenge_method") != "S256"
            || redirect.is_empty()
        {
            return reply(
                400,
                "text/plain",
                "a code flow with PKCE S256 only\n".into(),
            );
        }
        let back = |params: &[(&str, &str)]| {
            let query = form_urlencoded::Serializer::new(String::new())
                .extend_pairs(params)
                .finish();
            hyper::Response::builder()
                .status(302)
                .header("location", format!("{redirect}?{query}"))
                .body(Full::new(Bytes::new()))
                .expect("a response")
        };
        let Some((key, claims)) = self.user.lock().clone() else {
            return back(&[("error", "access_denied"), ("state", &get("state"))]);
        };
        let mut claims = claims;
        claims["iss"] = json!(issuer);
        claims["aud"] = json!(get("client_id"));
        claims["nonce"] = json!(get("nonce"));
        claims["iat"] = json!(now());
        if claims.get("exp").is_none() {
            claims["exp"] = json!(now() + 600);
        }
        let code = format!("code-{}", self.codes.lock().len() + 1);
        self.codes.lock().insert(
            code.clone(),
            (key.sign(&claims), get("code_challenge"), redirect.clone()),
        );
        back(&[("code", &code), ("state", &get("state"))])
    }

    /// `POST <url>/token`: a code, once, for its ID token, given its redirect URI and verifier.
    fn token(&self, body: &[u8]) -> hyper::Response<Full<Bytes>> {
        let q: std::collections::HashMap<String, String> =
            form_urlencoded::parse(body).into_owned().collect();
        let get = |k: &str| q.get(k).cloned().unwrap_or_default();
        let refused = || {
            reply(
                400,
                "application/json",
                json!({"error": "invalid_grant"}).to_string(),
            )
        };
        if get("grant_type") != "authorization_code" {
            return refused();
        }
        let Some((id_token, challenge, redirect)) = self.codes.lock().remove(&get("code")) else {
            return refused();
        };
        let verifier = get("code_verifier");
        let computed = URL_SAFE_NO_PAD.encode(ring::digest::digest(
            &ring::digest::SHA256,
            verifier.as_bytes(),
        ));
        if computed != challenge || get("redirect_uri") != redirect {
            return refused();
        }
        reply(
            200,
            "application/json",
            json!({"id_token": id_token, "access_token": "at", "token_type": "Bearer", "expires_in": 600})
                .to_string(),
        )
    }
}

/// Distributed-claim sources by path: the JWT served and the bearer token it wants.
type ClaimSources = Arc<Mutex<std::collections::HashMap<String, (String, String)>>>;

impl Issuer {
    /// Starts an issuer publishing no key yet.
    pub async fn start() -> Issuer {
        let ca = pki::Ca::generate("test-idp-ca").expect("a CA");
        let cert = ca
            .issue_server("idp", &["127.0.0.1".into()])
            .expect("a serving certificate");
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let url = format!(
            "https://127.0.0.1:{}/realms/test",
            l.local_addr().expect("address").port()
        );
        let certs: Vec<_> =
            rustls::pki_types::CertificateDer::pem_slice_iter(cert.cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .expect("PEM");
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes())
            .expect("PEM key");
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("the certificate");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let keys: Arc<Mutex<Vec<Value>>> = Arc::default();
        let key_fetches: Arc<AtomicUsize> = Arc::default();
        let sources: ClaimSources = Arc::default();
        let login = Login::default();
        let (u, k, f, src, lg) = (
            url.clone(),
            keys.clone(),
            key_fetches.clone(),
            sources.clone(),
            login.clone(),
        );
        tokio::spawn(async move {
            loop {
                let Ok((s, _)) = l.accept().await else { return };
                let acceptor = acceptor.clone();
                let (u, k, f, src, lg) = (u.clone(), k.clone(), f.clone(), src.clone(), lg.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(s).await else {
                        return;
                    };
                    let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                        let (u, k, f, src, lg) =
                            (u.clone(), k.clone(), f.clone(), src.clone(), lg.clone());
                        async move {
                            let path = req.uri().path().to_string();
                            if path.ends_with("/auth") {
                                let query = req.uri().query().unwrap_or_default().to_string();
                                return Ok(lg.authorize(&u, &query));
                            }
                            if path.ends_with("/token") {
                                use http_body_util::BodyExt;
                                let body = http_body_util::Limited::new(req.into_body(), 64 * 1024)
                                    .collect()
                                    .await
                                    .map(|c| c.to_bytes())
                                    .unwrap_or_default();
                                return Ok(lg.token(&body));
                            }
                            let source = src.lock().get(&path).cloned();
                            if let Some((jwt, bearer)) = source {
                                let authorized = req
                                    .headers()
                                    .get("authorization")
                                    .and_then(|v| v.to_str().ok())
                                    == Some(format!("Bearer {bearer}").as_str());
                                return Ok::<_, std::convert::Infallible>(
                                    hyper::Response::builder()
                                        .status(if authorized { 200 } else { 401 })
                                        .header("content-type", "application/jwt")
                                        .body(Full::new(Bytes::from(if authorized {
                                            jwt
                                        } else {
                                            String::new()
                                        })))
                                        .expect("a response"),
                                );
                            }
                            let body = if path.ends_with("/.well-known/openid-configuration") {
                                json!({"issuer": u, "jwks_uri": format!("{u}/keys"),
                                    "authorization_endpoint": format!("{u}/auth"),
                                    "token_endpoint": format!("{u}/token"),
                                    "code_challenge_methods_supported": ["S256"]})
                            } else if path.ends_with("/keys") {
                                f.fetch_add(1, Ordering::SeqCst);
                                json!({"keys": *k.lock()})
                            } else {
                                json!({})
                            };
                            Ok::<_, std::convert::Infallible>(
                                hyper::Response::builder()
                                    .header("content-type", "application/json")
                                    .body(Full::new(Bytes::from(body.to_string())))
                                    .expect("a response"),
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
        Issuer {
            url,
            ca_pem: ca.pair.cert_pem.clone(),
            keys,
            key_fetches,
            sources,
            login,
        }
    }

    /// Signs in the user of `claims` (`iss`, `aud`, `nonce` and `iat` set by the issuer) at
    /// every authorization request from now on, with `key`.
    pub fn sign_in_as(&self, key: Arc<SigningKey>, claims: Value) {
        *self.login.user.lock() = Some((key, claims));
    }

    /// Publishes `key` in the key set.
    pub fn publish(&self, key: &SigningKey) {
        self.keys.lock().push(key.jwk());
    }

    /// Serves `jwt` at `<url>/<path>` to requests bearing `access_token`: a distributed
    /// claims source. Returns its endpoint.
    pub fn serve_claim_source(&self, path: &str, jwt: String, access_token: &str) -> String {
        let full = format!(
            "{}/{path}",
            self.url
                .split_once("://")
                .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
                .unwrap_or("")
        );
        self.sources
            .lock()
            .insert(full, (jwt, access_token.to_string()));
        format!("{}/{path}", self.url)
    }

    /// Publishes a key given as a JWK (an RSA key, say).
    pub fn publish_jwk(&self, jwk: Value) {
        self.keys.lock().push(jwk);
    }

    /// How many times the key set was fetched.
    pub fn key_fetches(&self) -> usize {
        self.key_fetches.load(Ordering::SeqCst)
    }
}

/// Seconds since the epoch.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
