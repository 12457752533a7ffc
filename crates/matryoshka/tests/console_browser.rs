//! The console in a real headless Chromium (chromedriver), against `matryoshka up`: an operator
//! signs in, creates a tenant and a TenantCluster from the forms (first refused with the
//! field error beside its field), watches it become Ready without reloading, downloads the
//! kubeconfig and uses it with kubectl, scales a node group, reads the tenant's usage and
//! deletes the cluster; a `tenant-foo-view` member (signed in through a test OIDC provider) sees
//! foo's clusters without create or delete and cannot open bar's. Every page is checked with
//! axe-core and photographed (`target/browser-artefacts/`), also dark on a phone-sized screen.

mod browser;
mod support;

use std::time::Duration;

use browser::{Browser, DESKTOP, PHONE_DARK};
use serde_json::json;
use support::{Backend, Kubectl, Server};
use testkit::oidc::{Issuer, SigningKey, now};

const TEST: &str = "console";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_and_a_tenant_viewer_use_the_console_in_chromium() {
    let idp = Issuer::start().await;
    let key = std::sync::Arc::new(SigningKey::new("k1"));
    idp.publish(&key);
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = dir.path().join("idp-ca.crt");
    std::fs::write(&ca, &idp.ca_pem).expect("write CA");
    let (url, ca_arg) = (idp.url.clone(), ca.to_str().expect("utf-8").to_string());
    let capi = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/testdata/crds/cluster-api")
        .to_str()
        .expect("utf-8 path")
        .to_string();
    let server = tokio::task::spawn_blocking(move || {
        Server::start_with(
            Backend::Embedded,
            &[
                "--oidc-issuer-url",
                &url,
                "--oidc-client-id",
                "console",
                "--oidc-username-claim",
                "email",
                "--oidc-groups-claim",
                "groups",
                "--oidc-ca-file",
                &ca_arg,
                "--oidc-signing-algs",
                "ES256",
                "--cluster-api-crds",
                &capi,
            ],
        )
    })
    .await
    .expect("the server");
    let kubectl = server.kubectl("1.33");
    let token = server.admin_token();
    let base = format!("https://127.0.0.1:{}/console", server.port);

    let mut b = Browser::start(TEST, DESKTOP).await;
    // Signing in.
    b.goto(&format!("{base}/")).await;
    assert_eq!(b.path().await, "/console/sign-in");
    b.screenshot("sign-in").await;
    b.check_accessibility("sign-in").await;
    b.fill("token", &token).await;
    b.click_text("Sign in").await;
    b.find("ul.tree").await;
    assert!(
        b.text("header")
            .await
            .contains("system:serviceaccount:default:ops"),
        "the user is named"
    );
    b.screenshot("tenant-tree").await;
    b.check_accessibility("tenant tree").await;

    // A tenant from the generated form.
    b.click("a[href='/console/namespaces/tenant-root/tenants/new']")
        .await;
    b.check_accessibility("tenant form").await;
    b.fill("metadata.name", "foo").await;
    b.screenshot("tenant-form").await;
    b.click_text("Create").await;
    b.until(
        "the new tenant's clusters",
        "return location.pathname === '/console/namespaces/tenant-foo/tenantclusters'",
        Duration::from_secs(30),
    )
    .await;
    kubectl.eventually(
        &["get", "namespace", "tenant-foo"],
        Duration::from_secs(60),
        |r| r.code == 0,
    );
    b.goto(&format!("{base}/namespaces/tenant-foo/tenantclusters"))
        .await;
    b.check_accessibility("cluster list").await;

    // A TenantCluster from the form: refused first, the error beside its field.
    b.click_text("Create a tenant cluster").await;
    b.check_accessibility("cluster form").await;
    b.fill("metadata.name", "demo").await;
    b.fill("spec.controlPlane.replicas", "0").await;
    b.find("select[name='spec.workers.provider'] option[value='virtual']")
        .await
        .click()
        .await
        .expect("choose the virtual provider");
    b.click_text("Create").await;
    b.find(".errors").await;
    let beside = b
        .js(
            "const f = document.querySelector(\"[name='spec.controlPlane.replicas']\"); \
             const e = f.closest('.field').querySelector('.error'); \
             return [f.getAttribute('aria-invalid'), e && e.textContent, \
                     (f.getAttribute('aria-describedby') || '').includes(e && e.id)]",
        )
        .await;
    assert_eq!(beside[0], json!("true"), "{beside}");
    assert!(
        beside[1]
            .as_str()
            .unwrap_or_default()
            .contains("greater than or equal to 1")
            || beside[1]
                .as_str()
                .unwrap_or_default()
                .contains("Invalid value"),
        "{beside}"
    );
    assert_eq!(beside[2], json!(true), "the error describes its field");
    b.screenshot("cluster-form-error").await;
    b.check_accessibility("cluster form with errors").await;
    kubectl
        .run(&["get", "tenantcluster", "demo", "-n", "tenant-foo"])
        .fails(1);
    // What was typed stays; corrected, it is created.
    let typed = b
        .js("return document.querySelector(\"[name='metadata.name']\").value")
        .await;
    assert_eq!(typed, json!("demo"));
    b.fill("spec.controlPlane.replicas", "1").await;
    b.click_text("Create").await;
    b.until(
        "the cluster's page",
        "return location.pathname === '/console/namespaces/tenant-foo/tenantclusters/demo'",
        Duration::from_secs(30),
    )
    .await;
    // Ready arrives live: the same page (a marker set now survives), the status replaced.
    b.js("window.stillHere = true; return true").await;
    b.until(
        "Ready, live",
        "return window.stillHere === true && !!document.querySelector('#status').dataset.updated \
         && document.querySelector('#status .status').textContent === 'Ready'",
        Duration::from_secs(120),
    )
    .await;
    b.screenshot("cluster-ready").await;
    b.check_accessibility("cluster detail").await;

    // The kubeconfig, downloaded, works with kubectl (the script also offers to copy it).
    assert_eq!(
        b.js(
            "const c = document.querySelector(\"button[data-copy$='/kubeconfig/admin']\"); \
              return !!c && !c.hidden"
        )
        .await,
        json!(true),
        "a copy button"
    );
    b.click_text("Download the admin kubeconfig").await;
    let file = b.downloaded("demo-admin.kubeconfig").await;
    let inner = Kubectl::new("1.33", &file);
    inner
        .eventually(&["get", "namespaces"], Duration::from_secs(60), |r| {
            r.code == 0
        })
        .out("kube-system");

    // Scaling the node group.
    b.fill("minReplicas", "2").await;
    b.fill("maxReplicas", "4").await;
    b.click_text("Scale md0").await;
    kubectl.eventually(
        &[
            "get",
            "tenantcluster",
            "demo",
            "-n",
            "tenant-foo",
            "-o",
            "jsonpath={.spec.nodeGroups.md0.minReplicas}/{.spec.nodeGroups.md0.maxReplicas}",
        ],
        Duration::from_secs(30),
        |r| r.stdout == "2/4",
    );
    // Back on the cluster's page, its two machines appear, live.
    b.find("#machines").await;
    b.js("window.afterScale = true; return true").await;
    b.until(
        "two machines, live",
        "return window.afterScale === true && \
         document.querySelectorAll('#machines tbody tr th').length === 2",
        Duration::from_secs(120),
    )
    .await;
    b.screenshot("cluster-scaled").await;

    // Usage of the tenant: a chart per resource.
    b.goto(&format!("{base}/namespaces/tenant-foo/usage")).await;
    assert_eq!(
        b.js("return document.querySelectorAll('figure.chart svg rect.bar').length")
            .await,
        json!(48),
        "24 hourly bars for vCPU and for memory"
    );
    b.screenshot("usage").await;
    b.check_accessibility("usage").await;

    // A viewer of foo (an OIDC user in group tenant-foo-view): foo's clusters, read only; not
    // bar's.
    kubectl
        .run_stdin(
            &["apply", "-f", "-"],
            Some(
                "apiVersion: platform.matryoshka.dev/v1alpha1\nkind: Tenant\n\
                 metadata: {name: bar, namespace: tenant-root}\n",
            ),
        )
        .ok();
    kubectl.eventually(
        &["get", "rolebindings", "-n", "tenant-foo", "-o", "name"],
        Duration::from_secs(60),
        |r| r.stdout.contains("view"),
    );
    // The viewer signs in through the identity provider (the authorization code flow).
    idp.sign_in_as(
        key.clone(),
        json!({"sub": "v-1", "email": "viewer@example.com", "email_verified": true,
            "groups": ["tenant-foo-view"], "exp": now() + 600}),
    );
    let mut v = Browser::start(TEST, PHONE_DARK).await;
    v.goto(&format!("{base}/")).await;
    v.click_text("Sign in with your identity provider").await;
    v.find("#namespace").await;
    assert!(v.text("header").await.contains("viewer@example.com"));
    v.screenshot("viewer-start-phone-dark").await;
    v.check_accessibility("viewer start (phone, dark)").await;
    v.fill("namespace", "tenant-foo").await;
    v.click_text("Open").await;
    v.find("#clusters").await;
    assert!(v.text("#clusters").await.contains("demo"));
    assert!(!v.exists("a[href$='/new']").await, "no create for a viewer");
    v.screenshot("viewer-list-phone-dark").await;
    v.check_accessibility("viewer list (phone, dark)").await;
    v.click("a[href='/console/namespaces/tenant-foo/tenantclusters/demo']")
        .await;
    v.find("#status").await;
    assert!(
        !v.exists("a[href$='/delete']").await,
        "no delete for a viewer"
    );
    assert!(!v.exists("a[href$='/edit']").await, "no edit for a viewer");
    v.screenshot("viewer-detail-phone-dark").await;
    v.check_accessibility("viewer detail (phone, dark)").await;
    v.goto(&format!("{base}/namespaces/tenant-bar/tenantclusters"))
        .await;
    assert_eq!(v.text("h1").await, "Forbidden");
    v.screenshot("viewer-forbidden-phone-dark").await;
    v.close().await;

    // Deleting, confirmed by the name.
    b.goto(&format!("{base}/namespaces/tenant-foo/tenantclusters/demo"))
        .await;
    b.click_text("Delete").await;
    b.check_accessibility("delete confirmation").await;
    b.fill("confirm", "demo").await;
    b.screenshot("delete").await;
    b.click_text("Delete demo").await;
    b.until(
        "back at the list",
        "return location.pathname === '/console/namespaces/tenant-foo/tenantclusters'",
        Duration::from_secs(30),
    )
    .await;
    kubectl.eventually(
        &["get", "tenantcluster", "demo", "-n", "tenant-foo"],
        Duration::from_secs(120),
        |r| r.code == 1,
    );
    b.until(
        "the row gone, live",
        "return !document.querySelector('#clusters').textContent.includes('demo')",
        Duration::from_secs(30),
    )
    .await;
    b.screenshot("deleted").await;
    b.close().await;
}
