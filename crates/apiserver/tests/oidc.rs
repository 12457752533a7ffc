//! OIDC bearer tokens against a real issuer on loopback (`testkit::oidc`): HTTPS with its own
//! CA, a discovery document, a key set that rotates, tokens it signs.

mod support;

use std::sync::Arc;
use std::time::Duration;

use apiserver::oidc::{Flags, JwtAuthenticator};
use apiserver::server::{ApiServer, Caller};
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use testkit::oidc::{Issuer, SigningKey, now};

/// `SelfSubjectReview` with `token` over the TLS path: (code, userInfo).
async fn whoami(server: &Arc<ApiServer>, token: &str) -> (u16, Value) {
    let req = http::Request::builder()
        .method("POST")
        .uri("/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(Bytes::from(
            r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#,
        ))
        .unwrap();
    let resp = server.handle(req, Caller::Tls(None)).await;
    let code = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    (code, v["status"]["userInfo"].clone())
}

/// A server whose root cluster trusts `idp` (client `kubectl`, groups with the `oidc:`
/// prefix, ES256; usernames from `username_claim` when given), once discovery is done.
async fn trusting(
    idp: &Issuer,
    username_claim: Option<&str>,
) -> (tempfile::TempDir, Arc<ApiServer>) {
    let (dir, server) = support::server().await;
    let config = Flags {
        issuer_url: Some(idp.url.clone()),
        client_id: Some("kubectl".into()),
        username_claim: username_claim.map(str::to_string),
        groups_claim: Some("groups".into()),
        groups_prefix: Some("oidc:".into()),
        signing_algs: vec!["ES256".into()],
        ca_pem: Some(idp.ca_pem.clone()),
        ..Default::default()
    }
    .config()
    .unwrap()
    .unwrap();
    let authn = JwtAuthenticator::new(config).unwrap();
    server.set_oidc(vec![authn.clone()]);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !authn.initialized() {
        assert!(
            std::time::Instant::now() < deadline,
            "discovery never succeeded"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (dir, server)
}

#[tokio::test]
async fn tokens_of_the_issuer_authenticate_with_prefixes_and_its_keys_rotate() {
    let idp = Issuer::start().await;
    let first = SigningKey::new("k1");
    idp.publish(&first);
    let (_dir, server) = trusting(&idp, None).await;
    let claims = |sub: &str| {
        json!({"iss": idp.url, "aud": "kubectl", "sub": sub, "exp": now() + 300,
            "groups": ["dev"], "jti": "j-1"})
    };
    let jane = first.sign(&claims("jane"));
    let (code, user) = whoami(&server, &jane).await;
    assert_eq!(code, 201, "{user}");
    // Accepted once, the token is remembered (upstream's 10 s success cache) and served the
    // same user again.
    assert_eq!(server.oidc_cached(), 1);
    assert_eq!(whoami(&server, &jane).await, (201, user.clone()));
    assert_eq!(server.oidc_cached(), 1);
    // No prefix given and a claim other than email: the issuer URL and `#`.
    assert_eq!(user["username"], format!("{}#jane", idp.url));
    assert_eq!(user["groups"], json!(["oidc:dev", "system:authenticated"]));
    assert_eq!(
        user["extra"]["authentication.kubernetes.io/credential-id"],
        json!(["JTI=j-1"])
    );
    // Refused: another audience, expired.
    let mut other = claims("jane");
    other["aud"] = json!("dashboard");
    assert_eq!(whoami(&server, &first.sign(&other)).await.0, 401);
    let mut expired = claims("jane");
    expired["exp"] = json!(now() - 1);
    assert_eq!(whoami(&server, &first.sign(&expired)).await.0, 401);
    // Rotation: the issuer publishes a new key, then signs with it.
    let second = SigningKey::new("k2");
    idp.publish(&second);
    let fetched = idp.key_fetches();
    let (code, user) = whoami(&server, &second.sign(&claims("john"))).await;
    assert_eq!(code, 201, "{user}");
    assert_eq!(user["username"], format!("{}#john", idp.url));
    assert!(idp.key_fetches() > fetched);
    // A key the issuer never published (under a known kid) is refused.
    let rogue = SigningKey::new("k1");
    assert_eq!(whoami(&server, &rogue.sign(&claims("jane"))).await.0, 401);
    // A token of another issuer is not this authenticator's: plain 401.
    let mut foreign = claims("jane");
    foreign["iss"] = json!("https://elsewhere.example");
    assert_eq!(whoami(&server, &first.sign(&foreign)).await.0, 401);
}

#[tokio::test]
async fn groups_given_as_a_distributed_claim_are_fetched_from_their_source() {
    let idp = Issuer::start().await;
    let key = SigningKey::new("k1");
    idp.publish(&key);
    let (_dir, server) = trusting(&idp, Some("email")).await;
    // The groups live at a source the issuer signs; the ID token only points there.
    let groups = key.sign(&json!({"iss": idp.url, "groups": ["big", "many"], "exp": now() + 300}));
    let endpoint = idp.serve_claim_source("groups", groups, "secret-access");
    let token = |source: Value| {
        key.sign(
            &json!({"iss": idp.url, "aud": "kubectl", "sub": "u", "exp": now() + 300,
            "email": "jane@example.com", "email_verified": true,
            "_claim_names": {"groups": "src1"}, "_claim_sources": {"src1": source}}),
        )
    };
    let (code, user) = whoami(
        &server,
        &token(json!({"endpoint": endpoint, "access_token": "secret-access"})),
    )
    .await;
    assert_eq!(code, 201, "{user}");
    assert_eq!(
        user["groups"],
        json!(["oidc:big", "oidc:many", "system:authenticated"])
    );
    // The source refuses another access token: so is the ID token.
    let (code, _) = whoami(
        &server,
        &token(json!({"endpoint": endpoint, "access_token": "wrong"})),
    )
    .await;
    assert_eq!(code, 401);
    // A source answering with a JWT the issuer did not sign is not believed.
    let rogue = SigningKey::new("k1");
    let forged = rogue.sign(&json!({"iss": idp.url, "groups": ["admins"], "exp": now() + 300}));
    let endpoint = idp.serve_claim_source("forged", forged, "a");
    let (code, _) = whoami(
        &server,
        &token(json!({"endpoint": endpoint, "access_token": "a"})),
    )
    .await;
    assert_eq!(code, 401);
}
