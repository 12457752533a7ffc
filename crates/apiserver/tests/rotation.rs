//! Credential rotation in process, with periods of seconds: service-account keys rotate while
//! tokens issued before keep working for the longest token lifetime, legacy tokens outlive
//! every rotation, the root cluster's keys rotate too, and the logical clusters' admin
//! kubeconfigs are re-issued before their certificates expire.

use std::sync::Arc;
use std::time::Duration;

use apiserver::server::{ApiServer, Caller};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use controlplane::auth::{UserExt, UserInfo};
use http::{Method, Request};
use http_body_util::BodyExt;
use rustls::pki_types::CertificateDer;
use serde_json::{Value, json};

/// Keys sign for 1 s; tokens live at most 3 s, so a retired key verifies for 3 s more;
/// client certificates live 6 s (re-issued after 4 s).
fn rotation() -> controlplane::rotation::Rotation {
    controlplane::rotation::Rotation {
        client_cert_validity: Duration::from_secs(6),
        sa_key_period: Duration::from_secs(1),
        max_token_expiration: Duration::from_secs(3),
    }
}

async fn server() -> (Arc<ApiServer>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = storage::embedded::EmbeddedStore::open(dir.path()).unwrap();
    let ca = pki::Ca::generate("rotation-ca").unwrap();
    let config = apiserver::server::Config {
        external_url: "https://127.0.0.1:6443".into(),
        root_ca: ca.pair,
        root_sa_key: controlplane::jwt::SigningKey::generate_pkcs8().unwrap(),
        elected: false,
        rotation: rotation(),
        volumes_dir: None,
        event_ttl: std::time::Duration::from_secs(3600),
    };
    let server = apiserver::server::start_with(Arc::new(store), config)
        .await
        .unwrap();
    (server, dir)
}

async fn call(
    server: &Arc<ApiServer>,
    caller: Caller,
    token: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut b = Request::builder().method(method).uri(path);
    if body.is_some() {
        b = b.header("content-type", "application/json");
    }
    if let Some(t) = token {
        b = b.header("authorization", format!("Bearer {t}"));
    }
    let req = b
        .body(body.map(|v| Bytes::from(v.to_string())).unwrap_or_default())
        .unwrap();
    let resp = server.handle(req, caller).await;
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn system() -> Caller {
    Caller::Internal(UserInfo::system())
}

/// The status code of a SelfSubjectReview in `prefix` with a bearer token (201 when the token
/// authenticates the default service account).
async fn with_token(server: &Arc<ApiServer>, prefix: &str, token: &str) -> u16 {
    let path = format!("{prefix}/apis/authentication.k8s.io/v1/selfsubjectreviews");
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let (code, body) = call(
        server,
        Caller::Tls(None),
        Some(token),
        Method::POST,
        &path,
        Some(review),
    )
    .await;
    if code == 201 {
        assert_eq!(
            body["status"]["userInfo"]["username"], "system:serviceaccount:default:default",
            "{body}"
        );
    }
    code
}

/// Polls `check` every 50 ms until it holds; panics with `what` after `within`.
async fn until(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn token_request(server: &Arc<ApiServer>, prefix: &str) -> Value {
    let path = format!("{prefix}/api/v1/namespaces/default/serviceaccounts/default/token");
    let mut out = Value::Null;
    until("a token is issued", Duration::from_secs(10), async || {
        let (code, body) = call(
            server,
            system(),
            None,
            Method::POST,
            &path,
            Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}})),
        )
        .await;
        out = body;
        code == 201
    })
    .await;
    out
}

fn kid(token: &str) -> String {
    controlplane::jwt::kid(token).unwrap()
}

fn pki_secret(server: &ApiServer, cluster: &str) -> Value {
    server
        .store()
        .shared_cache()
        .get(
            "",
            "secrets",
            "root",
            "matryoshka-system",
            &format!("{cluster}-pki"),
        )
        .unwrap()
        .value()
        .as_ref()
        .clone()
}

fn retired(secret: &Value) -> Vec<String> {
    secret["data"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("sa-retired-"))
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_keys_rotate_while_every_token_issued_before_keeps_working_for_its_lifetime()
 {
    let (server, _dir) = server().await;
    let lc = json!({"apiVersion": "core.matryoshka.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": "rot"}});
    let (code, body) = call(
        &server,
        system(),
        None,
        Method::POST,
        "/apis/core.matryoshka.dev/v1alpha1/logicalclusters",
        Some(lc),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    until(
        "the cluster is served",
        Duration::from_secs(10),
        async || server.cluster_exists("rot").await,
    )
    .await;

    // A bound token: capped at the longest lifetime, and said so in the answer.
    let tr = token_request(&server, "/clusters/rot").await;
    assert_eq!(tr["spec"]["expirationSeconds"], 3, "{tr}");
    let bound = tr["status"]["token"].as_str().unwrap().to_string();
    let first_kid = kid(&bound);
    assert_eq!(with_token(&server, "/clusters/rot", &bound).await, 201);

    // A legacy token Secret: non-expiring, worth what its Secret holds.
    let (code, body) = call(
        &server,
        system(),
        None,
        Method::POST,
        "/clusters/rot/api/v1/namespaces/default/secrets",
        Some(json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": "legacy", "annotations": {"kubernetes.io/service-account.name": "default"}}})),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let legacy = String::from_utf8(
        STANDARD
            .decode(body["data"]["token"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    // Authentication reads the watch cache, which holds the new Secret a moment after the
    // create answered.
    until(
        "the legacy token authenticates",
        Duration::from_secs(5),
        async || with_token(&server, "/clusters/rot", &legacy).await == 201,
    )
    .await;

    // The key rotates: new tokens carry the new key, the old token still works, and the
    // discovery document publishes both keys.
    until("the key rotates", Duration::from_secs(10), async || {
        !retired(&pki_secret(&server, "rot")).is_empty()
    })
    .await;
    let fresh = token_request(&server, "/clusters/rot").await["status"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(kid(&fresh), first_kid);
    assert_eq!(with_token(&server, "/clusters/rot", &fresh).await, 201);
    let (code, jwks) = call(
        &server,
        system(),
        None,
        Method::GET,
        "/clusters/rot/openid/v1/jwks",
        None,
    )
    .await;
    assert_eq!(code, 200);
    let kids: Vec<&str> = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k["kid"].as_str())
        .collect();
    assert!(kids.contains(&first_kid.as_str()), "{jwks}");
    assert!(kids.contains(&kid(&fresh).as_str()), "{jwks}");

    // Once the first key's window has passed it is dropped; the bound token it signed has
    // expired by then (the cap), the legacy one is still good.
    until(
        "the first key is dropped",
        Duration::from_secs(15),
        async || {
            let published = server
                .control_plane()
                .trust("rot")
                .unwrap()
                .jwks(registry::store::unix_now());
            !published["keys"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kid"] == first_kid.as_str())
        },
    )
    .await;
    assert_eq!(with_token(&server, "/clusters/rot", &bound).await, 401);
    assert_eq!(with_token(&server, "/clusters/rot", &legacy).await, 201);
    // At most the keys of the overlap window are kept (3 s of 1 s periods, plus a tick).
    assert!(retired(&pki_secret(&server, "rot")).len() <= 5);

    // The root cluster's keys rotate the same way.
    let root_token = token_request(&server, "").await["status"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    until(
        "the root cluster's key rotates",
        Duration::from_secs(10),
        async || {
            kid(token_request(&server, "").await["status"]["token"]
                .as_str()
                .unwrap())
                != kid(&root_token)
        },
    )
    .await;
    assert_eq!(with_token(&server, "", &root_token).await, 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logical_clusters_admin_kubeconfig_is_reissued_before_its_certificate_expires() {
    let (server, _dir) = server().await;
    let lc = json!({"apiVersion": "core.matryoshka.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": "kc"}});
    call(
        &server,
        system(),
        None,
        Method::POST,
        "/apis/core.matryoshka.dev/v1alpha1/logicalclusters",
        Some(lc),
    )
    .await;
    until(
        "the cluster is served",
        Duration::from_secs(10),
        async || server.cluster_exists("kc").await,
    )
    .await;
    let cert = || {
        let s = server
            .store()
            .shared_cache()
            .get(
                "",
                "secrets",
                "root",
                "matryoshka-system",
                "kc-admin-kubeconfig",
            )
            .unwrap()
            .value();
        let conf = STANDARD
            .decode(s["data"]["admin.conf"].as_str().unwrap())
            .unwrap();
        pki::kubeconfig_client_cert(&String::from_utf8(conf).unwrap()).unwrap()
    };
    let first = cert();
    let (nb, na) = pki::validity_of(&first).unwrap();
    assert!(na.duration_since(nb).unwrap() <= Duration::from_secs(7));
    let mut seen = vec![first];
    // Two renewals, each well before the previous certificate expires, each accepted.
    for _ in 0..2 {
        let before = seen.last().unwrap().clone();
        until(
            "the kubeconfig is re-issued",
            Duration::from_secs(10),
            async || cert() != before,
        )
        .await;
        let (_, expires) = pki::validity_of(&before).unwrap();
        assert!(
            std::time::SystemTime::now() < expires,
            "re-issued only after the old certificate expired"
        );
        let next = cert();
        use rustls::pki_types::pem::PemObject;
        let der = CertificateDer::from_pem_slice(next.as_bytes()).unwrap();
        let caller = Caller::Tls(Some(Arc::new(apiserver::authn::PeerCerts::new(vec![der]))));
        let (code, body) = call(
            &server,
            caller,
            None,
            Method::GET,
            "/clusters/kc/api/v1/namespaces",
            None,
        )
        .await;
        assert_eq!(code, 200, "{body}");
        seen.push(next);
    }
}
