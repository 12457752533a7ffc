//! OIDC bearer-token authentication on one core with the issuer's key cached: distinct ID
//! tokens (no token is seen twice, so nothing but the key is reused — the 10 s success cache
//! never answers) through the API server's `JwtAuthenticator` (signature, issuer, audience,
//! expiry, claim mappings and prefixes), against the peer every JWT authenticator is bound
//! by — the bare signature verification of the same tokens with `ring`. The ratio is the
//! share of an authentication that is the signature. RS256 (2048-bit RSA: Keycloak's, Google's
//! and Azure AD's default) and ES256 (P-256). The target is ≥ 20,000
//! authentications/s on one core.

use std::time::{Duration, Instant};

use anyhow::Context;
use apiserver::oidc::{Flags, JwtAuthenticator};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{self, KeyPair, RsaKeyPair};
use serde_json::{Value, json};
use testkit::oidc::{Issuer, SigningKey, now};

use crate::report::{Better, header, line};

/// A 2048-bit RSA signing key (ring cannot make one: `openssl genpkey` does).
struct RsaSigner {
    pair: RsaKeyPair,
}

impl RsaSigner {
    fn generate() -> anyhow::Result<RsaSigner> {
        // As ring's documentation makes one: genpkey, then a PKCS#8 DER of it.
        let out = std::process::Command::new("sh")
            .args([
                "-c",
                "openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -pkeyopt rsa_keygen_pubexp:65537 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -outform der",
            ])
            .output()
            .context("running openssl")?;
        anyhow::ensure!(out.status.success(), "openssl could not make an RSA key");
        let pair =
            RsaKeyPair::from_pkcs8(&out.stdout).map_err(|e| anyhow::anyhow!("RSA key: {e}"))?;
        Ok(RsaSigner { pair })
    }

    fn jwk(&self) -> Value {
        let public = self.pair.public_key();
        let components = signature::RsaPublicKeyComponents::<Vec<u8>>::from(public);
        json!({"kty": "RSA", "kid": "rsa", "use": "sig", "alg": "RS256",
            "n": URL_SAFE_NO_PAD.encode(&components.n), "e": URL_SAFE_NO_PAD.encode(&components.e)})
    }

    fn sign(&self, claims: &Value) -> String {
        let header = json!({"alg": "RS256", "kid": "rsa", "typ": "JWT"});
        let msg = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let mut sig = vec![0u8; self.pair.public().modulus_len()];
        self.pair
            .sign(
                &signature::RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                msg.as_bytes(),
                &mut sig,
            )
            .expect("signing");
        format!("{msg}.{}", URL_SAFE_NO_PAD.encode(sig))
    }
}

/// Verifies the tokens' signatures with `ring` alone; returns how many verified.
fn verify_all(
    tokens: &[String],
    alg: &'static dyn signature::VerificationAlgorithm,
    public_key: &[u8],
) -> usize {
    let key = signature::UnparsedPublicKey::new(alg, public_key);
    tokens
        .iter()
        .filter(|t| {
            let Some(dot) = t.rfind('.') else {
                return false;
            };
            let Ok(sig) = URL_SAFE_NO_PAD.decode(&t[dot + 1..]) else {
                return false;
            };
            key.verify(&t.as_bytes()[..dot], &sig).is_ok()
        })
        .count()
}

/// Authentications per second of `tokens` through `authn`, on this one task.
async fn authenticate_all(authn: &JwtAuthenticator, tokens: &[String]) -> anyhow::Result<f64> {
    let _ = authn.authenticate(&tokens[0], now()).await;
    let at = now();
    let started = Instant::now();
    let mut accepted = 0usize;
    for t in tokens {
        if let Some(Ok(user)) = authn.authenticate(t, at).await
            && user.groups.iter().any(|g| g == "oidc:ops")
        {
            accepted += 1;
        }
    }
    let rate = tokens.len() as f64 / started.elapsed().as_secs_f64();
    anyhow::ensure!(
        accepted == tokens.len(),
        "only {accepted} of {} tokens authenticated",
        tokens.len()
    );
    Ok(rate)
}

fn peer_rate(
    tokens: &[String],
    alg: &'static dyn signature::VerificationAlgorithm,
    public_key: &[u8],
) -> anyhow::Result<f64> {
    verify_all(&tokens[..100.min(tokens.len())], alg, public_key);
    let started = Instant::now();
    let verified = verify_all(tokens, alg, public_key);
    anyhow::ensure!(
        verified == tokens.len(),
        "only {verified} signatures verified"
    );
    Ok(tokens.len() as f64 / started.elapsed().as_secs_f64())
}

pub async fn run(quick: bool) -> anyhow::Result<()> {
    let idp = Issuer::start().await;
    let ec = SigningKey::new("ec");
    idp.publish(&ec);
    let rsa = RsaSigner::generate()?;
    idp.publish_jwk(rsa.jwk());
    let config = Flags {
        issuer_url: Some(idp.url.clone()),
        client_id: Some("kubectl".into()),
        username_claim: Some("email".into()),
        groups_claim: Some("groups".into()),
        groups_prefix: Some("oidc:".into()),
        signing_algs: vec!["RS256".into(), "ES256".into()],
        ca_pem: Some(idp.ca_pem.clone()),
        ..Default::default()
    }
    .config()
    .map_err(|e| anyhow::anyhow!(e))?
    .context("an OIDC configuration")?;
    let authn = JwtAuthenticator::new(config).map_err(|e| anyhow::anyhow!(e))?;
    authn.start();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !authn.initialized() {
        anyhow::ensure!(Instant::now() < deadline, "discovery never succeeded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let n = if quick { 2_000 } else { 40_000 };
    let exp = now() + 3600;
    let claims = |i: usize| {
        json!({"iss": idp.url, "aud": "kubectl", "sub": format!("user-{i}"),
            "email": format!("user-{i}@example.com"), "email_verified": true,
            "groups": ["dev", "ops"], "exp": exp, "iat": exp - 3600, "jti": format!("j-{i}")})
    };
    let rsa_tokens: Vec<String> = (0..n).map(|i| rsa.sign(&claims(i))).collect();
    let ec_tokens: Vec<String> = (0..n).map(|i| ec.sign(&claims(i))).collect();
    let jwk = ec.jwk();
    let mut ec_public = vec![4u8];
    for c in ["x", "y"] {
        ec_public.extend(URL_SAFE_NO_PAD.decode(jwk[c].as_str().unwrap_or(""))?);
    }

    let rsa_ours = authenticate_all(&authn, &rsa_tokens).await?;
    let rsa_peer = peer_rate(
        &rsa_tokens,
        &signature::RSA_PKCS1_2048_8192_SHA256,
        rsa.pair.public().as_ref(),
    )?;
    let ec_ours = authenticate_all(&authn, &ec_tokens).await?;
    let ec_peer = peer_rate(&ec_tokens, &signature::ECDSA_P256_SHA256_FIXED, &ec_public)?;
    anyhow::ensure!(
        idp.key_fetches() <= 2,
        "the key set was fetched {} times",
        idp.key_fetches()
    );

    println!("OIDC authentication, {n} distinct tokens per algorithm, one core, key cached");
    header("authenticator", "ring verify");
    line(
        "RS256 (2048-bit) authentications/s",
        rsa_ours,
        rsa_peer,
        "/s",
        Better::Higher,
    );
    line(
        "ES256 (P-256) authentications/s",
        ec_ours,
        ec_peer,
        "/s",
        Better::Higher,
    );
    for (alg, rate) in [("RS256", rsa_ours), ("ES256", ec_ours)] {
        println!(
            "target >= 20,000 authentications/s on one core, {alg}: {}",
            if rate >= 20_000.0 { "met" } else { "missed" }
        );
    }
    Ok(())
}
