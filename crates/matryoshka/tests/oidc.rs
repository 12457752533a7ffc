//! `matryoshka up --oidc-*`: kubectl with an ID token of a real issuer on loopback (HTTPS, its
//! own CA, ES256 keys) is the user and groups the flags make of its claims, with
//! kube-apiserver's prefixes; RBAC bound to the prefixed group lets it in; a token of the
//! issuer for another client, expired, or with `email_verified: false` is refused.

mod support;

use serde_json::{Value, json};
use support::{Backend, Kubectl, Server};
use testkit::oidc::{Issuer, SigningKey, now};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_with_an_oidc_token_is_the_user_its_claims_name() {
    let idp = Issuer::start().await;
    let key = SigningKey::new("k1");
    idp.publish(&key);
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = dir.path().join("idp-ca.crt");
    std::fs::write(&ca, &idp.ca_pem).expect("write CA");
    let url = idp.url.clone();
    let ca_arg = ca.to_str().expect("utf-8").to_string();
    let server = tokio::task::spawn_blocking(move || {
        Server::start_with(
            Backend::Embedded,
            &[
                "--oidc-issuer-url",
                &url,
                "--oidc-client-id",
                "kubectl",
                "--oidc-username-claim",
                "email",
                "--oidc-groups-claim",
                "groups",
                "--oidc-groups-prefix",
                "oidc:",
                "--oidc-signing-algs",
                "ES256",
                "--oidc-ca-file",
                &ca_arg,
            ],
        )
    })
    .await
    .expect("the server");
    let admin = server.kubectl("1.33");
    let empty = dir.path().join("empty.conf");
    std::fs::write(&empty, "apiVersion: v1\nkind: Config\n").expect("write kubeconfig");
    let at = format!("https://127.0.0.1:{}", server.port);
    let claims = |email: &str| {
        json!({"iss": idp.url, "aud": "kubectl", "sub": "u-1", "email": email,
            "email_verified": true, "groups": ["admins"], "exp": now() + 300})
    };
    let token = key.sign(&claims("jane@example.com"));
    let bare = Kubectl::new("1.33", &empty);
    let run = |token: &str, args: &[&str]| {
        let mut all = vec![
            "--server",
            &at,
            "--insecure-skip-tls-verify",
            "--token",
            token,
        ];
        all.extend_from_slice(args);
        bare.run(&all)
    };
    // Discovery runs in the background: the first requests may find it not done yet.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let r = run(
            &token,
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
            ],
        );
        if r.code == 0 {
            assert_eq!(
                r.stdout,
                r#"jane@example.com ["oidc:admins","system:authenticated"]"#
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", r.stderr);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    run(&token, &["get", "ns"]).fails(1).err("Forbidden");
    admin
        .run(&[
            "create",
            "clusterrolebinding",
            "oidc-admins",
            "--clusterrole=view",
            "--group=oidc:admins",
        ])
        .ok();
    run(&token, &["get", "ns"]).ok().out("kube-system");
    let mut other = claims("jane@example.com");
    other["aud"] = json!("dashboard");
    run(&key.sign(&other), &["get", "ns"])
        .fails(1)
        .err("Unauthorized");
    let mut expired = claims("jane@example.com");
    expired["exp"] = json!(now() - 5);
    run(&key.sign(&expired), &["get", "ns"])
        .fails(1)
        .err("Unauthorized");
    let mut unverified = claims("jane@example.com");
    unverified["email_verified"] = json!(false);
    run(&key.sign(&unverified), &["get", "ns"])
        .fails(1)
        .err("Unauthorized");
    tenant_clusters_take_oidc_from_their_spec(&admin, &bare, &idp, &key);
    drop(server);
}

/// `spec.oidc` of TenantClusters: `CustomConfig` puts the given configuration on the
/// cluster's own authentication (users bound by `users[]`); `System` uses the platform's
/// issuer with the audience `<namespace>-<release>` and writes the kubelogin kubeconfig.
fn tenant_clusters_take_oidc_from_their_spec(
    admin: &Kubectl,
    bare: &Kubectl,
    idp: &Issuer,
    key: &SigningKey,
) {
    let ca: String = idp
        .ca_pem
        .lines()
        .map(|l| format!("                {l}\n"))
        .collect();
    let manifest = format!(
        r#"apiVersion: platform.matryoshka.dev/v1alpha1
kind: TenantCluster
metadata: {{name: custom, namespace: tenant-root}}
spec:
  oidc:
    mode: CustomConfig
    users: [{{email: jane@example.com, role: view}}]
    customConfig:
      config:
        apiVersion: apiserver.config.k8s.io/v1beta1
        kind: AuthenticationConfiguration
        jwt:
        - issuer:
            url: {url}
            audiences: [custom-cluster]
            certificateAuthority: |
{ca}          claimMappings:
            username: {{claim: email, prefix: ""}}
            groups: {{claim: groups, prefix: "idp:"}}
---
apiVersion: platform.matryoshka.dev/v1alpha1
kind: TenantCluster
metadata: {{name: sys, namespace: tenant-root}}
spec:
  oidc: {{mode: System, users: [{{email: john@example.com, role: admin}}]}}
"#,
        url = idp.url,
    );
    admin.run_stdin(&["apply", "-f", "-"], Some(&manifest)).ok();
    let endpoint = |name: &str| {
        admin
            .eventually(
                &[
                    "get",
                    "tenantcluster",
                    name,
                    "-n",
                    "tenant-root",
                    "-o",
                    "jsonpath={.status.endpoint}",
                ],
                std::time::Duration::from_secs(60),
                |r| r.stdout.starts_with("https://"),
            )
            .stdout
            .clone()
    };
    let token_with = |aud: &str, email: &str, groups: Value| {
        key.sign(
            &json!({"iss": idp.url, "aud": aud, "sub": "u", "email": email,
            "email_verified": true, "groups": groups, "exp": now() + 300}),
        )
    };
    let token = |aud: &str, email: &str| token_with(aud, email, json!(["dev"]));
    let run = |server: &str, token: &str, args: &[&str]| {
        let mut all = vec![
            "--server",
            server,
            "--insecure-skip-tls-verify",
            "--token",
            token,
        ];
        all.extend_from_slice(args);
        bare.run(&all)
    };
    let custom = endpoint("custom");
    let jane = token("custom-cluster", "jane@example.com");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let r = run(&custom, &jane, &["get", "ns"]);
        if r.code == 0 && r.stdout.contains("kube-system") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "custom: {}\n{}",
            r.stdout,
            r.stderr
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    run(
        &custom,
        &jane,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
        ],
    )
    .ok()
    .out(r#"jane@example.com ["idp:dev","system:authenticated"]"#);
    // view: no writes; and the root cluster's client ID is not this cluster's audience.
    run(&custom, &jane, &["create", "ns", "x"])
        .fails(1)
        .err("Forbidden");
    run(
        &custom,
        &token("kubectl", "jane@example.com"),
        &["get", "ns"],
    )
    .fails(1)
    .err("Unauthorized");
    let sys = endpoint("sys");
    let john = token_with(
        "tenant-root-kubernetes-sys",
        "john@example.com",
        json!(["tenant-root-admin"]),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let r = run(&sys, &john, &["create", "ns", "made-by-john"]);
        if r.code == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "system: {}\n{}",
            r.stdout,
            r.stderr
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    // Not a member of the tenant's groups: not even authenticated there.
    run(
        &sys,
        &token("tenant-root-kubernetes-sys", "eve@example.com"),
        &["auth", "whoami"],
    )
    .fails(1)
    .err("Unauthorized");
    let conf = admin
        .eventually(
            &[
                "get",
                "secret",
                "kubernetes-sys-oidc-kubeconfig",
                "-n",
                "tenant-root",
                "-o",
                "go-template={{ index .data \"kubeconfig\" | base64decode }}",
            ],
            std::time::Duration::from_secs(30),
            |r| r.code == 0,
        )
        .stdout
        .clone();
    assert!(conf.contains("oidc-login"), "{conf}");
    assert!(
        conf.contains("--oidc-client-id=tenant-root-kubernetes-sys"),
        "{conf}"
    );
}

/// An `AuthenticationConfiguration` with one issuer whose usernames get `prefix`.
fn authentication_config(idp: &Issuer, prefix: &str) -> String {
    let ca: String = idp.ca_pem.lines().map(|l| format!("      {l}\n")).collect();
    format!(
        "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt:\n- issuer:\n    url: {}\n    audiences: [kubectl]\n    certificateAuthority: |\n{ca}  claimMappings:\n    username:\n      claim: email\n      prefix: \"{prefix}\"\n",
        idp.url
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_structured_authentication_configuration_is_reloaded_when_its_file_changes() {
    let idp = Issuer::start().await;
    let key = SigningKey::new("k1");
    idp.publish(&key);
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("authn.yaml");
    std::fs::write(&config, authentication_config(&idp, "a:")).expect("write the configuration");
    let arg = config.to_str().expect("utf-8").to_string();
    let server = tokio::task::spawn_blocking(move || {
        Server::start_with(Backend::Embedded, &["--authentication-config", &arg])
    })
    .await
    .expect("the server");
    let empty = dir.path().join("empty.conf");
    std::fs::write(&empty, "apiVersion: v1\nkind: Config\n").expect("write kubeconfig");
    let at = format!("https://127.0.0.1:{}", server.port);
    let bare = Kubectl::new("1.33", &empty);
    let mut serial = 0;
    // The username a fresh token (never cached) is authenticated as, once it is `want`.
    let mut until_user = |want: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            serial += 1;
            let token = key.sign(&json!({"iss": idp.url, "aud": "kubectl", "sub": "u-1",
                "email": "jane@example.com", "email_verified": true, "exp": now() + 300,
                "jti": format!("t-{serial}")}));
            let r = bare.run(&[
                "--server",
                &at,
                "--insecure-skip-tls-verify",
                "--token",
                &token,
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}",
            ]);
            if r.code == 0 && r.stdout == want {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "never {want}: {} {}",
                r.stdout,
                r.stderr
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    };
    until_user("a:jane@example.com");
    std::fs::write(&config, authentication_config(&idp, "b:")).expect("rewrite");
    until_user("b:jane@example.com");
    // A broken configuration is refused and the last good one stays.
    std::fs::write(&config, "jwt: [{issuer: {url: http://not-https}}]\n").expect("break it");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !server.log().contains("the previous one stays") {
        assert!(
            std::time::Instant::now() < deadline,
            "the broken file was never read"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    until_user("b:jane@example.com");
    drop(server);
}
