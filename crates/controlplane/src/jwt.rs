//! Service-account tokens: ES256 JSON Web Tokens signed with a cluster's signing key, and their
//! verification (ring does the cryptography; the format is small enough to write here).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};

/// Errors verifying a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the token is malformed")]
    Malformed,
    #[error("the token's signature is invalid")]
    BadSignature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token was issued by another issuer")]
    WrongIssuer,
    #[error("the token is not meant for this audience")]
    WrongAudience,
    #[error("the token was signed with a key that is not trusted")]
    UnknownKey,
}

fn decode_part(part: &str) -> Option<Value> {
    B64.decode(part)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
}

/// The `kid` header of a compact JWT, without verifying anything.
pub fn kid(token: &str) -> Option<String> {
    let header = decode_part(token.split('.').next()?)?;
    header.get("kid").and_then(Value::as_str).map(String::from)
}

/// The claims of a compact JWT, without verifying anything: only for tokens whose worth is
/// decided otherwise (a legacy token is worth what its Secret still holds).
pub fn unverified_claims(token: &str) -> Option<Value> {
    let mut parts = token.split('.');
    let (Some(_), Some(p), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    decode_part(p)
}

/// A cluster's service-account signing key (ECDSA P-256).
pub struct SigningKey {
    pair: EcdsaKeyPair,
    /// The `kid` header: a fingerprint of the public key.
    pub kid: String,
    public: Vec<u8>,
}

impl SigningKey {
    /// From a PKCS#8 DER private key.
    pub fn from_pkcs8(der: &[u8]) -> Result<SigningKey, String> {
        let rng = SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
            .map_err(|e| e.to_string())?;
        let public = pair.public_key().as_ref().to_vec();
        let digest = ring::digest::digest(&ring::digest::SHA256, &public);
        let kid = B64.encode(&digest.as_ref()[..20]);
        Ok(SigningKey { pair, kid, public })
    }

    /// A fresh PKCS#8 DER key.
    pub fn generate_pkcs8() -> Result<Vec<u8>, String> {
        let rng = SystemRandom::new();
        EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map(|d| d.as_ref().to_vec())
            .map_err(|e| e.to_string())
    }

    /// Signs `claims` into a compact JWT.
    pub fn sign(&self, claims: &Value) -> Result<String, String> {
        let header = json!({"alg": "ES256", "kid": self.kid});
        let signing_input = format!(
            "{}.{}",
            B64.encode(serde_json::to_vec(&header).map_err(|e| e.to_string())?),
            B64.encode(serde_json::to_vec(claims).map_err(|e| e.to_string())?)
        );
        let rng = SystemRandom::new();
        let sig = self
            .pair
            .sign(&rng, signing_input.as_bytes())
            .map_err(|e| e.to_string())?;
        Ok(format!("{signing_input}.{}", B64.encode(sig.as_ref())))
    }

    /// The public key as a JWK (for `/openid/v1/jwks`).
    pub fn jwk(&self) -> Value {
        // Uncompressed point: 0x04 || x (32 bytes) || y (32 bytes).
        let (x, y) = (&self.public[1..33], &self.public[33..65]);
        json!({"use": "sig", "kty": "EC", "kid": self.kid, "crv": "P-256", "alg": "ES256", "x": B64.encode(x), "y": B64.encode(y)})
    }

    /// Verifies a token's signature and times, returning its claims.
    pub fn verify(&self, token: &str, now: i64) -> Result<Value, TokenError> {
        let mut parts = token.split('.');
        let (Some(h), Some(p), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed);
        };
        let header: Value = B64
            .decode(h)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or(TokenError::Malformed)?;
        if header.get("alg").and_then(Value::as_str) != Some("ES256") {
            return Err(TokenError::Malformed);
        }
        let sig = B64.decode(s).map_err(|_| TokenError::Malformed)?;
        let key =
            signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, &self.public);
        key.verify(format!("{h}.{p}").as_bytes(), &sig)
            .map_err(|_| TokenError::BadSignature)?;
        let claims: Value = B64
            .decode(p)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or(TokenError::Malformed)?;
        if claims
            .get("exp")
            .and_then(Value::as_i64)
            .is_some_and(|exp| now >= exp)
        {
            return Err(TokenError::Expired);
        }
        if claims
            .get("nbf")
            .and_then(Value::as_i64)
            .is_some_and(|nbf| now < nbf - 60)
        {
            return Err(TokenError::NotYetValid);
        }
        Ok(claims)
    }
}

/// Whether a token's `aud` claim (a string or a list) contains one of `accepted`.
pub fn audience_matches(claims: &Value, accepted: &[String]) -> bool {
    match claims.get("aud") {
        Some(Value::String(a)) => accepted.iter().any(|x| x == a),
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(Value::as_str)
            .any(|a| accepted.iter().any(|x| x == a)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_token_verifies_and_a_tampered_one_does_not() {
        let key = SigningKey::from_pkcs8(&SigningKey::generate_pkcs8().unwrap()).unwrap();
        let token = key
            .sign(&json!({"sub": "system:serviceaccount:default:x", "exp": 2000, "iss": "i"}))
            .unwrap();
        assert_eq!(
            key.verify(&token, 1000).unwrap()["sub"],
            "system:serviceaccount:default:x"
        );
        assert_eq!(key.verify(&token, 3000), Err(TokenError::Expired));
        let mut parts: Vec<&str> = token.split('.').collect();
        let forged = B64.encode(br#"{"sub":"system:admin","exp":2000}"#);
        parts[1] = &forged;
        assert_eq!(
            key.verify(&parts.join("."), 1000),
            Err(TokenError::BadSignature)
        );
        let other = SigningKey::from_pkcs8(&SigningKey::generate_pkcs8().unwrap()).unwrap();
        assert_eq!(other.verify(&token, 1000), Err(TokenError::BadSignature));
        assert_eq!(key.verify("a.b", 1000), Err(TokenError::Malformed));
    }

    #[test]
    fn the_jwk_carries_the_curve_coordinates() {
        let key = SigningKey::from_pkcs8(&SigningKey::generate_pkcs8().unwrap()).unwrap();
        let jwk = key.jwk();
        assert_eq!(jwk["crv"], "P-256");
        assert_eq!(B64.decode(jwk["x"].as_str().unwrap()).unwrap().len(), 32);
    }
}
