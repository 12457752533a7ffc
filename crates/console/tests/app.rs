//! The console's requests against a real in-process API server: what a user sees and may do is
//! what the API and its RBAC say, and the server's field errors reach the form.

use std::sync::Arc;

use console::app::{Console, Method, Request, Response, tenant_clusters};
use console::form::FormData;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const NS: &str = "tenant-foo";

struct Lab {
    _server: testkit::Server,
    console: Console,
    admin: kube::Client,
}

/// alice may do everything with tenant clusters in tenant-foo and read its Secrets; bob may
/// only read tenant clusters.
async fn lab() -> Lab {
    let server = testkit::Server::start().await;
    let admin = server.client("root");
    platform::install::install(&admin).await.unwrap();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    for (name, rules, user) in [
        (
            "editor",
            json!([
                {"apiGroups": ["platform.matryoshka.dev"], "resources": ["tenantclusters"], "verbs": ["*"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch"]},
            ]),
            "alice",
        ),
        (
            "viewer",
            json!([{"apiGroups": ["platform.matryoshka.dev"], "resources": ["tenantclusters"], "verbs": ["get", "list", "watch"]}]),
            "bob",
        ),
    ] {
        for obj in [
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": name, "namespace": NS}, "rules": rules}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": name, "namespace": NS},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}),
        ] {
            platform::install::apply(&admin, &obj).await.unwrap();
        }
    }
    let (alice, bob) = (server.as_user("alice", &[]), server.as_user("bob", &[]));
    let root = admin.clone();
    let clients = Arc::new(move |token: &str| match token {
        "admin-token" => root.clone(),
        "alice-token" => alice.clone(),
        _ => bob.clone(),
    });
    let schema = platform::crds::tenant_cluster_crd()
        .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec")
        .cloned()
        .unwrap();
    let tenant_schema = platform::crds::tenant_crd()
        .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec")
        .cloned()
        .unwrap();
    Lab {
        console: Console::new(clients, schema, tenant_schema),
        admin,
        _server: server,
    }
}

impl Lab {
    async fn send(
        &self,
        token: &str,
        method: Method,
        path: &str,
        form: &[(&str, &str)],
    ) -> Response {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        self.console
            .handle(Request {
                method,
                path: path.to_string(),
                token: Some(token.to_string()),
                form: FormData::from_urlencoded(body.as_bytes()),
                ..Default::default()
            })
            .await
    }

    fn clusters(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.admin.clone(), NS, &tenant_clusters())
    }
}

const LIST: &str = "/console/namespaces/tenant-foo/tenantclusters";

/// The next event of a live stream, within the tests' patience.
async fn next_event(events: &mut futures::stream::BoxStream<'static, String>) -> String {
    use futures::StreamExt;
    tokio::time::timeout(testkit::PATIENCE, events.next())
        .await
        .expect("an event in time")
        .expect("the stream goes on")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_creates_a_tenant_cluster_from_the_form_and_sees_the_servers_field_errors() {
    let lab = lab().await;
    let page = lab.send("alice-token", Method::Get, LIST, &[]).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Create a tenant cluster"));
    let form = lab
        .send("alice-token", Method::Get, &format!("{LIST}/new"), &[])
        .await;
    assert_eq!(form.status, 200);
    assert!(form.body.contains(r#"name="spec.version""#) && form.body.contains("v1.35"));

    // The API server refuses a negative minimum: the cause is shown at its field.
    let refused = lab
        .send(
            "alice-token",
            Method::Post,
            &format!("{LIST}/new"),
            &[
                ("metadata.name", "dev"),
                ("_newkey:spec.nodeGroups", "md0"),
                ("spec.nodeGroups[md0].minReplicas", "-1"),
            ],
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(refused.body.contains("The request was refused"));
    assert!(
        refused.body.contains("greater than or equal to 0"),
        "{}",
        refused.body
    );
    // At the field itself, not only in the summary.
    let at_field = format!(
        r#"id="{}-error""#,
        console::form::id("spec.nodeGroups[md0].minReplicas")
    );
    assert!(refused.body.contains(&at_field), "{}", refused.body);
    assert!(
        lab.clusters().get_opt("dev").await.unwrap().is_none(),
        "nothing was created"
    );

    let created = lab
        .send(
            "alice-token",
            Method::Post,
            &format!("{LIST}/new"),
            &[
                ("metadata.name", "dev"),
                ("spec.version", "v1.34"),
                ("_newkey:spec.nodeGroups", "md0"),
                ("spec.nodeGroups[md0].minReplicas", "1"),
            ],
        )
        .await;
    assert_eq!(created.status, 303, "{}", created.body);
    assert_eq!(created.location.as_deref(), Some(&*format!("{LIST}/dev")));
    let dev = lab.clusters().get("dev").await.unwrap();
    assert_eq!(dev.data["spec"]["version"], "v1.34");
    assert_eq!(dev.data["spec"]["nodeGroups"]["md0"]["minReplicas"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_sees_clusters_without_the_actions_the_api_would_refuse() {
    let lab = lab().await;
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "platform.matryoshka.dev/v1alpha1", "kind": "TenantCluster",
        "metadata": {"name": "dev", "namespace": NS},
        "spec": {"nodeGroups": {"md0": {"minReplicas": 1, "maxReplicas": 3}}},
    }))
    .unwrap();
    lab.clusters()
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
    // The kubeconfig Secret the platform would write, named in the status.
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "kubernetes-dev-admin-kubeconfig", "namespace": NS},
        "stringData": {"admin.conf": "apiVersion: v1\nkind: Config\n", "super-admin.conf": "x"},
    }))
    .unwrap();
    Api::<Secret>::namespaced(lab.admin.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    lab.clusters()
        .patch_status(
            "dev",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"kubeconfigSecret": "kubernetes-dev-admin-kubeconfig", "version": "v1.35.6"}})),
        )
        .await
        .unwrap();

    let bob = lab.send("bob-token", Method::Get, LIST, &[]).await;
    assert_eq!(bob.status, 200);
    assert!(bob.body.contains(">dev</a>") && !bob.body.contains("Create a tenant cluster"));
    let detail = lab
        .send("bob-token", Method::Get, &format!("{LIST}/dev"), &[])
        .await;
    assert_eq!(detail.status, 200, "{}", detail.body);
    for hidden in ["/scale", "/kubeconfig/", "/delete", "/edit"] {
        assert!(!detail.body.contains(hidden), "{hidden} shown to a viewer");
    }
    // What is hidden is also refused.
    let scale = lab
        .send(
            "bob-token",
            Method::Post,
            &format!("{LIST}/dev/scale"),
            &[("group", "md0"), ("minReplicas", "2"), ("maxReplicas", "4")],
        )
        .await;
    assert_eq!(scale.status, 403, "{}", scale.body);
    let kc = lab
        .send(
            "bob-token",
            Method::Get,
            &format!("{LIST}/dev/kubeconfig/admin"),
            &[],
        )
        .await;
    assert_eq!(kc.status, 403);

    let alice = lab
        .send("alice-token", Method::Get, &format!("{LIST}/dev"), &[])
        .await;
    for shown in ["/scale", "/kubeconfig/admin", "/delete", "/edit"] {
        assert!(alice.body.contains(shown), "{shown} not shown to an editor");
    }
    let kc = lab
        .send(
            "alice-token",
            Method::Get,
            &format!("{LIST}/dev/kubeconfig/admin"),
            &[],
        )
        .await;
    assert_eq!(
        (kc.status, kc.body.as_str()),
        (200, "apiVersion: v1\nkind: Config\n")
    );
    assert_eq!(kc.download.as_deref(), Some("dev-admin.kubeconfig"));

    let scale = lab
        .send(
            "alice-token",
            Method::Post,
            &format!("{LIST}/dev/scale"),
            &[("group", "md0"), ("minReplicas", "2"), ("maxReplicas", "4")],
        )
        .await;
    assert_eq!(scale.status, 303, "{}", scale.body);
    // Scaling a group the cluster does not have creates nothing.
    let unknown = lab
        .send(
            "alice-token",
            Method::Post,
            &format!("{LIST}/dev/scale"),
            &[("group", "md9"), ("minReplicas", "1"), ("maxReplicas", "2")],
        )
        .await;
    assert_eq!(unknown.status, 422, "{}", unknown.body);
    assert!(unknown.body.contains("has no such node group"));
    let dev = lab.clusters().get("dev").await.unwrap();
    let md0 = &dev.data["spec"]["nodeGroups"]["md0"];
    assert_eq!(
        (md0["minReplicas"].as_i64(), md0["maxReplicas"].as_i64()),
        (Some(2), Some(4))
    );

    // Deleting asks for the name.
    let wrong = lab
        .send(
            "alice-token",
            Method::Post,
            &format!("{LIST}/dev/delete"),
            &[("confirm", "prod")],
        )
        .await;
    assert_eq!(wrong.status, 422);
    assert!(lab.clusters().get_opt("dev").await.unwrap().is_some());
    let gone = lab
        .send(
            "alice-token",
            Method::Post,
            &format!("{LIST}/dev/delete"),
            &[("confirm", "dev")],
        )
        .await;
    assert_eq!((gone.status, gone.location.as_deref()), (303, Some(LIST)));
    let left: Option<Value> = lab
        .clusters()
        .get_opt("dev")
        .await
        .unwrap()
        .map(|o| serde_json::to_value(o).unwrap());
    assert!(left.is_none_or(|o| o["metadata"]["deletionTimestamp"].is_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_keeps_the_immutable_storage_class_and_paths_outside_names_are_not_pages() {
    let lab = lab().await;
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "platform.matryoshka.dev/v1alpha1", "kind": "TenantCluster",
        "metadata": {"name": "dev", "namespace": NS},
        "spec": {"storageClass": "fast"},
    }))
    .unwrap();
    lab.clusters()
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
    let page = lab
        .send("alice-token", Method::Get, &format!("{LIST}/dev/edit"), &[])
        .await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Cannot be changed."));
    let saved = lab
        .send(
            "alice-token",
            Method::Post,
            &format!("{LIST}/dev/edit"),
            &[("spec.version", "v1.33")],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    let dev = lab.clusters().get("dev").await.unwrap();
    assert_eq!(
        (
            dev.data["spec"]["version"].as_str(),
            dev.data["spec"]["storageClass"].as_str()
        ),
        (Some("v1.33"), Some("fast"))
    );
    for path in [
        "/console/namespaces/../tenantclusters",
        "/console/namespaces/tenant-foo/tenantclusters/a%2Fb",
        "/console/nope",
    ] {
        assert_eq!(
            lab.send("alice-token", Method::Get, path, &[]).await.status,
            404,
            "{path}"
        );
    }
    // Without a session every page sends to sign-in.
    let anonymous = lab
        .console
        .handle(Request {
            method: Method::Get,
            path: LIST.into(),
            token: None,
            form: FormData::default(),
            ..Default::default()
        })
        .await;
    assert_eq!(anonymous.location.as_deref(), Some("/console/sign-in"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_table_is_sent_again_live_when_a_tenant_cluster_changes() {
    let lab = lab().await;
    let live = "/console/live/namespaces/tenant-foo/tenantclusters";
    let page = lab.send("bob-token", Method::Get, LIST, &[]).await;
    assert!(
        page.body.contains(&format!(r#"data-live="{live}""#)),
        "{}",
        page.body
    );
    let resp = lab.send("bob-token", Method::Get, live, &[]).await;
    assert_eq!((resp.status, resp.content_type), (200, "text/event-stream"));
    let mut events = resp.live.expect("a stream").0;
    let first = next_event(&mut events).await;
    assert!(first.starts_with("event: rows\ndata: "), "{first}");
    assert!(
        first.contains("No tenant clusters in tenant-foo yet."),
        "{first}"
    );
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "platform.matryoshka.dev/v1alpha1", "kind": "TenantCluster",
        "metadata": {"name": "dev", "namespace": NS},
    }))
    .unwrap();
    lab.clusters()
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
    let created = next_event(&mut events).await;
    assert!(
        created.contains(">dev</a>") && created.contains("Pending"),
        "{created}"
    );
    lab.clusters()
        .patch_status(
            "dev",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2026-12-06T00:00:00Z"}]}})),
        )
        .await
        .unwrap();
    let ready = next_event(&mut events).await;
    assert!(
        ready.contains(r#"<span class="status ok">Ready</span>"#),
        "{ready}"
    );
    // Every data line of an event is prefixed; the event ends with an empty line.
    assert!(
        ready.ends_with("\n\n")
            && ready
                .lines()
                .skip(1)
                .filter(|l| !l.is_empty())
                .all(|l| l.starts_with("data: "))
    );
    // Someone who may not list the clusters gets no stream.
    let stranger = lab.console.handle(Request {
        method: Method::Get,
        path: "/console/live/namespaces/kube-system/tenantclusters".into(),
        token: Some("bob-token".into()),
        form: FormData::default(),
        ..Default::default()
    });
    let stranger = stranger.await;
    assert_eq!(stranger.status, 403);
    assert!(stranger.live.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_start_page_is_the_tenant_tree_for_whoever_may_list_tenants() {
    let lab = lab().await;
    let tenant: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "platform.matryoshka.dev/v1alpha1", "kind": "Tenant",
        "metadata": {"name": "foo", "namespace": "tenant-root"},
    }))
    .unwrap();
    Api::<DynamicObject>::namespaced_with(
        lab.admin.clone(),
        "tenant-root",
        &console::app::tenants(),
    )
    .create(&PostParams::default(), &tenant)
    .await
    .unwrap();
    let admin = lab.send("admin-token", Method::Get, "/console/", &[]).await;
    assert_eq!(admin.status, 200, "{}", admin.body);
    assert!(
        admin.body.contains(r#"<strong>foo</strong>"#)
            && admin
                .body
                .contains(r#"href="/console/namespaces/tenant-foo/tenantclusters""#),
        "{}",
        admin.body
    );
    // A user who may not list tenants everywhere opens a namespace by name.
    let bob = lab.send("bob-token", Method::Get, "/console/", &[]).await;
    assert_eq!(bob.status, 200);
    assert!(
        bob.body.contains(r#"name="namespace""#) && !bob.body.contains("tenant-foo/tenantclusters")
    );
    let go = lab
        .send(
            "bob-token",
            Method::Post,
            "/console/go",
            &[("namespace", "tenant-foo")],
        )
        .await;
    assert_eq!(go.location.as_deref(), Some(LIST));
    let bad = lab
        .send(
            "bob-token",
            Method::Post,
            "/console/go",
            &[("namespace", "../x")],
        )
        .await;
    assert_eq!(bad.status, 422);
}

#[test]
fn the_implied_node_group_is_the_platforms_default_group() {
    let platform = platform::workers::groups(&json!({}));
    assert_eq!(console::pages::implied_node_group(), platform["md0"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_node_groups_scales_its_implied_md0_and_its_page_follows_live() {
    let lab = lab().await;
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "platform.matryoshka.dev/v1alpha1", "kind": "TenantCluster",
        "metadata": {"name": "dev", "namespace": NS},
    }))
    .unwrap();
    lab.clusters()
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
    let detail = format!("{LIST}/dev");
    let page = lab.send("alice-token", Method::Get, &detail, &[]).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Scale md0"), "{}", page.body);
    let live = "/console/live/namespaces/tenant-foo/tenantclusters/dev";
    assert!(page.body.contains(&format!(r#"data-live="{live}""#)));
    let resp = lab.send("bob-token", Method::Get, live, &[]).await;
    assert_eq!((resp.status, resp.content_type), (200, "text/event-stream"));
    let mut events = resp.live.expect("a stream").0;
    let first = next_event(&mut events).await;
    assert!(first.starts_with("event: status\ndata: "), "{first}");
    assert!(first.contains("Pending"), "{first}");

    let scaled = lab
        .send(
            "alice-token",
            Method::Post,
            &format!("{detail}/scale"),
            &[("group", "md0"), ("minReplicas", "2"), ("maxReplicas", "4")],
        )
        .await;
    assert_eq!(scaled.status, 303, "{}", scaled.body);
    // The default group written out (the server adds its defaults), with the new sizes.
    let got = lab.clusters().get("dev").await.unwrap();
    let groups = got.data["spec"]["nodeGroups"].as_object().unwrap().clone();
    assert_eq!(groups.keys().collect::<Vec<_>>(), ["md0"]);
    let mut want = console::pages::implied_node_group();
    want["minReplicas"] = json!(2);
    want["maxReplicas"] = json!(4);
    for (k, v) in want.as_object().unwrap() {
        assert_eq!(&groups["md0"][k], v, "{k}");
    }
    // Another group than the implied one is still refused.
    let other = lab
        .send(
            "alice-token",
            Method::Post,
            &format!("{detail}/scale"),
            &[("group", "md1"), ("minReplicas", "1"), ("maxReplicas", "1")],
        )
        .await;
    assert_eq!(other.status, 422, "{}", other.body);

    lab.clusters()
        .patch_status(
            "dev",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"version": "v1.33.1", "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2026-12-06T00:00:00Z"}]}})),
        )
        .await
        .unwrap();
    // The scale and the status each send the section again; the last shows Ready.
    let mut last = next_event(&mut events).await;
    while !last.contains(r#"<span class="status ok">Ready</span>"#) {
        last = next_event(&mut events).await;
    }
    assert!(last.contains("v1.33.1"), "{last}");
    // An event about the cluster arrives too (alice may read events).
    let resp = lab.send("alice-token", Method::Get, live, &[]).await;
    let mut events = resp.live.expect("a stream").0;
    let first = next_event(&mut events).await;
    assert!(first.contains("No events."), "{first}");
    let event: k8s_openapi::api::core::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": "dev.1", "namespace": NS},
        "involvedObject": {"kind": "TenantCluster", "name": "dev", "namespace": NS},
        "type": "Warning", "reason": "Probe", "message": "the probe failed",
        "lastTimestamp": "2026-12-06T00:00:00Z",
    }))
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Event>::namespaced(lab.admin.clone(), NS)
        .create(&PostParams::default(), &event)
        .await
        .unwrap();
    let mut last = next_event(&mut events).await;
    while !last.contains("the probe failed") {
        last = next_event(&mut events).await;
    }
    // Someone who may not read the cluster gets no stream.
    let stranger = lab
        .send(
            "bob-token",
            Method::Get,
            "/console/live/namespaces/kube-system/tenantclusters/dev",
            &[],
        )
        .await;
    assert_eq!(stranger.status, 403);
    assert!(stranger.live.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oidc_sign_in_goes_to_the_provider_and_a_callback_not_started_here_is_refused() {
    let lab = lab().await;
    let idp = testkit::oidc::Issuer::start().await;
    let oidc = console::oidc::OidcLogin::new(&idp.url, "console", Some(&idp.ca_pem)).unwrap();
    let console = lab.console.with_oidc(oidc);
    let page = console
        .handle(Request {
            path: "/console/sign-in".into(),
            ..Default::default()
        })
        .await;
    assert!(
        page.body.contains(r#"href="/console/sign-in/oidc""#),
        "{}",
        page.body
    );
    let start = console
        .handle(Request {
            path: "/console/sign-in/oidc".into(),
            host: Some("console.example:6443".into()),
            ..Default::default()
        })
        .await;
    assert_eq!(start.status, 303, "{}", start.body);
    let to = start.location.clone().unwrap();
    assert!(to.starts_with(&format!(
        "{}/auth?response_type=code&client_id=console",
        idp.url
    )));
    assert!(to.contains("code_challenge_method=S256"));
    assert!(
        to.contains(
            "redirect_uri=https%3A%2F%2Fconsole.example%3A6443%2Fconsole%2Foidc%2Fcallback"
        )
    );
    let login = start.login.clone().unwrap().unwrap();
    let pending = console::oidc::Pending::decode(&login).unwrap();
    assert!(to.contains(&format!("state={}", pending.state)));
    assert!(
        !to.contains(&pending.verifier),
        "the verifier stays in the browser"
    );

    // Another state (a forged or crossed callback), or none started: no session.
    let query = |q: &str| FormData::from_urlencoded(q.as_bytes());
    for (q, login) in [
        ("code=c&state=other", Some(login.clone())),
        ("code=c&state=x", None),
        ("error=access_denied", Some(login.clone())),
    ] {
        let back = console
            .handle(Request {
                path: "/console/oidc/callback".into(),
                query: query(q),
                host: Some("console.example:6443".into()),
                login,
                ..Default::default()
            })
            .await;
        assert!(matches!(back.status, 400 | 401), "{q}: {}", back.status);
        assert!(back.session.is_none(), "{q}");
        assert_eq!(back.login, Some(None), "{q}: the login is forgotten");
    }
    // A host that is no host name is not made into a redirect URI.
    let bad = console
        .handle(Request {
            path: "/console/sign-in/oidc".into(),
            host: Some("evil.example/phish?".into()),
            ..Default::default()
        })
        .await;
    assert_eq!(bad.status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_holds_only_so_many_live_streams_and_a_closed_one_is_given_back() {
    let lab = lab().await;
    let console = lab.console.with_stream_limits(3, 2);
    let live = "/console/live/namespaces/tenant-foo/tenantclusters";
    let open = |token: &'static str| {
        console.handle(Request {
            path: live.into(),
            token: Some(token.into()),
            ..Default::default()
        })
    };
    let a1 = open("alice-token").await;
    let a2 = open("alice-token").await;
    assert!(a1.live.is_some() && a2.live.is_some());
    assert_eq!(console.streams_open("alice"), 2);
    let a3 = open("alice-token").await;
    assert_eq!(a3.status, 429, "{}", a3.body);
    assert!(a3.live.is_none());
    // Another user still gets one, up to the total.
    let b1 = open("bob-token").await;
    assert!(b1.live.is_some(), "{}", b1.body);
    let b2 = open("bob-token").await;
    assert_eq!(b2.status, 429, "the total is 3");
    // A closed stream is given back.
    drop(a1);
    assert_eq!(console.streams_open("alice"), 1);
    let a4 = open("alice-token").await;
    assert!(a4.live.is_some(), "{}", a4.body);
    drop((a2, a4, b1));
    assert_eq!(console.streams_open("alice"), 0);
    assert_eq!(console.streams_open("bob"), 0);
}
