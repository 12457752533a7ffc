//! Admission webhooks through the API server: configurations defaulted and validated as
//! upstream, validating webhooks that refuse with their message, mutating webhooks whose
//! patches are stored, failure policies, selectors, dry runs, services resolved through their
//! endpoints, and one cluster's webhooks never seeing another cluster's objects.

mod support;

use std::sync::Arc;
use std::time::Duration;

use apiserver::server::ApiServer;
use http::Method;
use serde_json::{Value, json};
use support::webhook::{self, HookServer};
use support::{call, call_with};

const JSON: (&str, &str) = ("content-type", "application/json");

async fn metrics_text(server: &Arc<ApiServer>) -> String {
    use controlplane::auth::{UserExt, UserInfo};
    use http_body_util::BodyExt;
    let req = http::Request::builder()
        .uri("/metrics")
        .body(bytes::Bytes::new())
        .unwrap();
    let resp = server
        .handle(req, apiserver::server::Caller::Internal(UserInfo::system()))
        .await;
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&body).to_string()
}

async fn post(server: &Arc<ApiServer>, uri: &str, body: &Value) -> (u16, Value) {
    call_with(server, Method::POST, uri, &[JSON], &body.to_string()).await
}

fn rules(ops: &[&str], resources: &[&str]) -> Value {
    json!([{"operations": ops, "apiGroups": [""], "apiVersions": ["v1"], "resources": resources}])
}

fn hook(name: &str, client: Value, rules: Value) -> Value {
    json!({"name": name, "clientConfig": client, "rules": rules,
           "sideEffects": "None", "admissionReviewVersions": ["v1"]})
}

fn url(hs: &HookServer, path: &str) -> Value {
    json!({"url": hs.url(path), "caBundle": hs.ca_bundle})
}

async fn configure(server: &Arc<ApiServer>, prefix: &str, plural: &str, name: &str, hooks: Value) {
    let kind = if plural.starts_with("validating") {
        "ValidatingWebhookConfiguration"
    } else {
        "MutatingWebhookConfiguration"
    };
    let (code, body) = post(
        server,
        &format!("{prefix}/apis/admissionregistration.k8s.io/v1/{plural}"),
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                "metadata": {"name": name}, "webhooks": hooks}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
}

async fn validating(server: &Arc<ApiServer>, name: &str, hooks: Value) {
    configure(server, "", "validatingwebhookconfigurations", name, hooks).await;
}

async fn mutating(server: &Arc<ApiServer>, name: &str, hooks: Value) {
    configure(server, "", "mutatingwebhookconfigurations", name, hooks).await;
}

/// A webhook for creates of config maps.
fn on_cm_create(name: &str, client: Value) -> Value {
    hook(name, client, rules(&["CREATE"], &["configmaps"]))
}

fn message(body: &Value) -> &str {
    body["message"].as_str().unwrap_or("")
}

fn config_map(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// A webhook server that refuses config maps named `bad*`, adds a label to every config map
/// at `/mutate`, and allows everything else.
async fn hooks() -> HookServer {
    webhook::start(|path, req| {
        let name = req["object"]["metadata"]["name"]
            .as_str()
            .or(req["oldObject"]["metadata"]["name"].as_str())
            .unwrap_or("");
        match path {
            "/validate" if name.starts_with("bad") => json!({
                "allowed": false,
                "status": {"code": 403, "reason": "Forbidden", "message": format!("{name} is not allowed")},
                "warnings": ["looked at it"],
            }),
            "/mutate" => webhook::patch(json!([
                {"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}
            ])),
            _ => json!({"allowed": true}),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_configurations_are_defaulted_and_validated_as_upstream() {
    let (_dir, server) = support::server().await;
    let (code, body) = post(
        &server,
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        &json!({"metadata": {"name": "bad"},
                "webhooks": [{"name": "no-dots", "clientConfig": {"url": "http://127.0.0.1:1"}}]}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    let causes: Vec<&str> = body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        causes,
        [
            "webhooks[0].name",
            "webhooks[0].sideEffects",
            "webhooks[0].clientConfig.url",
            "webhooks[0].admissionReviewVersions"
        ]
    );
    let hs = hooks().await;
    mutating(
        &server,
        "m",
        json!([hook(
            "m.example.com",
            url(&hs, "/none"),
            rules(&["CREATE"], &["secrets"])
        )]),
    )
    .await;
    let (_, got) = call(
        &server,
        Method::GET,
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/m",
    )
    .await;
    let h = &got["webhooks"][0];
    assert_eq!(h["failurePolicy"], "Fail");
    assert_eq!(h["matchPolicy"], "Equivalent");
    assert_eq!(h["timeoutSeconds"], 10);
    assert_eq!(h["reinvocationPolicy"], "Never");
    assert_eq!(h["objectSelector"], json!({}));
    assert_eq!(h["rules"][0]["scope"], "*");
    // A merge patch setting a selector to null leaves the default, not a literal null.
    let (code, patched) = call_with(
        &server,
        Method::PATCH,
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/m",
        &[("content-type", "application/merge-patch+json")],
        &json!({"webhooks": [{"name": "m.example.com", "objectSelector": null,
            "clientConfig": url(&hs, "/none"), "sideEffects": "None",
            "admissionReviewVersions": ["v1"]}]})
        .to_string(),
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["webhooks"][0]["objectSelector"], json!({}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validating_webhook_refuses_with_its_message_and_sees_the_request() {
    let (_dir, server) = support::server().await;
    let hs = hooks().await;
    validating(
        &server,
        "v",
        json!([hook(
            "v.example.com",
            url(&hs, "/validate"),
            rules(&["*"], &["configmaps"])
        )]),
    )
    .await;
    let (code, body) = post(&server, CMS, &config_map("bad-one", json!({}))).await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(body["reason"], "Forbidden");
    assert_eq!(
        body["message"],
        "admission webhook \"v.example.com\" denied the request: bad-one is not allowed"
    );
    let (code, _) = call(&server, Method::GET, &format!("{CMS}/bad-one")).await;
    assert_eq!(code, 404, "a refused create stores nothing");
    let (code, body) = post(&server, CMS, &config_map("good", json!({}))).await;
    assert_eq!(code, 201, "{body}");
    // Each call is in /metrics (upstream's histogram, without the webhook's name).
    let metrics = metrics_text(&server).await;
    for rejected in ["true", "false"] {
        let line = format!(
            "apiserver_admission_webhook_admission_duration_seconds_count{{operation=\"CREATE\",rejected=\"{rejected}\",type=\"validating\"}} 1"
        );
        assert!(metrics.contains(&line), "{line} missing from\n{metrics}");
    }
    assert!(!metrics.contains("v.example.com"));
    let reqs = hs.requests("/validate");
    let create = reqs
        .iter()
        .find(|r| r["name"] == "good")
        .expect("the webhook saw the create");
    assert_eq!(create["operation"], "CREATE");
    assert_eq!(create["namespace"], "default");
    assert_eq!(
        create["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(create["object"]["data"], json!({"k": "v"}));
    assert!(
        create["object"]["metadata"]["uid"].is_string(),
        "validating webhooks see the prepared object"
    );
    assert_eq!(create["userInfo"]["username"], "system:matryoshka");
    assert_eq!(create["options"]["kind"], "CreateOptions");
    // Updates and deletes of a config map reach the webhook too, with the old object.
    let (code, body) = call_with(
        &server,
        Method::PATCH,
        &format!("{CMS}/good"),
        &[("content-type", "application/merge-patch+json")],
        r#"{"data": {"k": "w"}}"#,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let update = hs
        .requests("/validate")
        .into_iter()
        .find(|r| r["operation"] == "UPDATE")
        .expect("the webhook saw the patch");
    assert_eq!(update["oldObject"]["data"]["k"], "v");
    assert_eq!(update["object"]["data"]["k"], "w");
    let (code, _) = call(&server, Method::DELETE, &format!("{CMS}/good")).await;
    assert_eq!(code, 200);
    let delete = hs
        .requests("/validate")
        .into_iter()
        .find(|r| r["operation"] == "DELETE")
        .expect("the webhook saw the delete");
    assert_eq!(delete["object"], Value::Null);
    assert_eq!(delete["oldObject"]["metadata"]["name"], "good");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_a_webhook_refuses_changes_nothing() {
    let (_dir, server) = support::server().await;
    let hs = hooks().await;
    let (code, _) = post(&server, CMS, &config_map("bad-later", json!({}))).await;
    assert_eq!(code, 201);
    validating(
        &server,
        "v",
        json!([hook(
            "v.example.com",
            url(&hs, "/validate"),
            rules(&["UPDATE", "DELETE"], &["configmaps"])
        )]),
    )
    .await;
    let (code, body) = call_with(
        &server,
        Method::PATCH,
        &format!("{CMS}/bad-later"),
        &[("content-type", "application/merge-patch+json")],
        r#"{"data": {"k": "changed"}}"#,
    )
    .await;
    assert_eq!(code, 403, "{body}");
    let (_, stored) = call(&server, Method::GET, &format!("{CMS}/bad-later")).await;
    assert_eq!(stored["data"]["k"], "v");
    let (code, _) = call(&server, Method::DELETE, &format!("{CMS}/bad-later")).await;
    assert_eq!(code, 403);
    let (code, _) = call(&server, Method::GET, &format!("{CMS}/bad-later")).await;
    assert_eq!(code, 200, "a refused delete deletes nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutating_webhooks_patch_is_stored_and_validating_webhooks_see_it() {
    let (_dir, server) = support::server().await;
    let hs = hooks().await;
    mutating(
        &server,
        "m",
        json!([hook(
            "m.example.com",
            url(&hs, "/mutate"),
            rules(&["CREATE", "UPDATE"], &["configmaps"])
        )]),
    )
    .await;
    validating(
        &server,
        "v",
        json!([hook(
            "v.example.com",
            url(&hs, "/validate"),
            rules(&["CREATE"], &["configmaps"])
        )]),
    )
    .await;
    let (code, created) = post(&server, CMS, &config_map("plain", json!({"a": "b"}))).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        created["metadata"]["labels"],
        json!({"a": "b", "mutated": "yes"})
    );
    let seen = hs.requests("/validate");
    assert_eq!(seen[0]["object"]["metadata"]["labels"]["mutated"], "yes");
    // An update that drops the label gets it back.
    let (code, body) = call_with(
        &server,
        Method::PATCH,
        &format!("{CMS}/plain"),
        &[("content-type", "application/merge-patch+json")],
        r#"{"metadata": {"labels": {"mutated": null}}}"#,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["metadata"]["labels"]["mutated"], "yes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_webhook_refuses_under_fail_and_is_skipped_under_ignore() {
    let (_dir, server) = support::server().await;
    // A port nothing listens on: bind one, then close it.
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dead = json!({"url": format!("https://127.0.0.1:{gone}/x")});
    let mut h = hook(
        "dead.example.com",
        dead,
        rules(&["CREATE"], &["configmaps"]),
    );
    validating(&server, "v", json!([h.clone()])).await;
    let (code, body) = post(&server, CMS, &config_map("a", json!({}))).await;
    assert_eq!(code, 500, "{body}");
    assert_eq!(body["reason"], "InternalError");
    let msg = message(&body);
    assert!(
        msg.starts_with(&format!(
            "Internal error occurred: failed calling webhook \"dead.example.com\": failed to call webhook: Post \"https://127.0.0.1:{gone}/x?timeout=10s\": dial tcp 127.0.0.1:{gone}: connect: connection refused"
        )),
        "{msg}"
    );
    h["failurePolicy"] = json!("Ignore");
    let (code, _) = call(
        &server,
        Method::DELETE,
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/v",
    )
    .await;
    assert_eq!(code, 200);
    validating(&server, "v2", json!([h])).await;
    let (code, body) = post(&server, CMS, &config_map("a", json!({}))).await;
    assert_eq!(code, 201, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_webhook_times_out_within_its_timeout() {
    let (_dir, server) = support::server().await;
    // Accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let mut h = hook(
        "slow.example.com",
        json!({"url": format!("https://127.0.0.1:{port}/")}),
        rules(&["CREATE"], &["configmaps"]),
    );
    h["timeoutSeconds"] = json!(1);
    validating(&server, "v", json!([h])).await;
    let started = std::time::Instant::now();
    let (code, body) = post(&server, CMS, &config_map("a", json!({}))).await;
    assert_eq!(code, 500, "{body}");
    assert!(message(&body).contains("context deadline exceeded"));
    assert!(started.elapsed() < Duration::from_secs(5));
    hold.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_and_namespace_selectors_limit_what_is_sent() {
    let (_dir, server) = support::server().await;
    let hs = hooks().await;
    let mut by_object = hook(
        "obj.example.com",
        url(&hs, "/obj"),
        rules(&["CREATE"], &["configmaps"]),
    );
    by_object["objectSelector"] = json!({"matchLabels": {"watched": "true"}});
    let mut by_ns = hook(
        "ns.example.com",
        url(&hs, "/ns"),
        rules(&["CREATE"], &["configmaps"]),
    );
    by_ns["namespaceSelector"] =
        json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]});
    validating(&server, "v", json!([by_object, by_ns])).await;
    let (code, _) = post(
        &server,
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "team-a", "labels": {"team": "a"}}}),
    )
    .await;
    assert_eq!(code, 201);
    post(&server, CMS, &config_map("unwatched", json!({}))).await;
    post(
        &server,
        CMS,
        &config_map("watched", json!({"watched": "true"})),
    )
    .await;
    post(
        &server,
        "/api/v1/namespaces/team-a/configmaps",
        &config_map("in-team", json!({})),
    )
    .await;
    let names = |path: &str| -> Vec<String> {
        hs.requests(path)
            .iter()
            .map(|r| r["name"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(names("/obj"), ["watched"]);
    assert_eq!(names("/ns"), ["in-team"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_reaches_webhooks_without_side_effects_and_stores_nothing() {
    let (_dir, server) = support::server().await;
    let hs = hooks().await;
    let mut h = hook(
        "v.example.com",
        url(&hs, "/validate"),
        rules(&["CREATE"], &["configmaps"]),
    );
    h["sideEffects"] = json!("NoneOnDryRun");
    validating(&server, "v", json!([h])).await;
    let (code, body) = post(
        &server,
        &format!("{CMS}?dryRun=All"),
        &config_map("dry", json!({})),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let seen = hs.requests("/validate");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["dryRun"], true);
    assert_eq!(seen[0]["options"]["dryRun"], json!(["All"]));
    let (code, _) = call(&server, Method::GET, &format!("{CMS}/dry")).await;
    assert_eq!(code, 404);
}

/// A local, non-loopback address for the test (Endpoints refuse loopback addresses, as
/// upstream's do): the host end of a veth pair the test creates, removed when dropped.
struct LocalAddress {
    link: String,
    ip: String,
}

impl LocalAddress {
    fn new() -> LocalAddress {
        let pid = std::process::id();
        let link = format!("mtwh{}", pid % 100_000);
        let ip = format!("10.251.{}.{}", (pid / 250) % 250, pid % 250 + 1);
        let ip_cmd = |args: &[&str]| {
            let out = std::process::Command::new("ip")
                .args(args)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "ip {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        ip_cmd(&[
            "link",
            "add",
            &link,
            "type",
            "veth",
            "peer",
            "name",
            &format!("{link}p"),
        ]);
        let me = LocalAddress { link, ip };
        ip_cmd(&["addr", "add", &format!("{}/32", me.ip), "dev", &me.link]);
        ip_cmd(&["link", "set", &me.link, "up"]);
        me
    }
}

impl Drop for LocalAddress {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.link])
            .output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_behind_a_service_is_reached_through_its_endpoints_and_verified_by_name() {
    let (_dir, server) = support::server().await;
    let local = LocalAddress::new();
    let hs = webhook::start_on(&local.ip, |path, req| {
        let name = req["object"]["metadata"]["name"].as_str().unwrap_or("");
        if path == "/validate" && name.starts_with("bad") {
            json!({"allowed": false, "status": {"code": 403, "message": format!("{name} is not allowed")}})
        } else {
            json!({"allowed": true})
        }
    })
    .await;
    post(
        &server,
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "webhooks"}}),
    )
    .await;
    let (code, body) = post(
        &server,
        "/api/v1/namespaces/webhooks/services",
        &json!({"metadata": {"name": "hooks"}, "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 9443}]}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = post(
        &server,
        "/api/v1/namespaces/webhooks/endpoints",
        &json!({"metadata": {"name": "hooks"}, "subsets": [{
            "addresses": [{"ip": local.ip}],
            "ports": [{"name": "https", "port": hs.port}]}]}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let client = json!({"service": {"namespace": "webhooks", "name": "hooks", "path": "/validate"},
                        "caBundle": hs.ca_bundle});
    validating(
        &server,
        "v",
        json!([on_cm_create("svc.example.com", client)]),
    )
    .await;
    let (code, body) = post(&server, CMS, &config_map("bad-svc", json!({}))).await;
    assert_eq!(code, 403, "{body}");
    assert!(message(&body).contains("bad-svc is not allowed"));
    // A caBundle of another CA fails verification: the call fails.
    let other = pki::Ca::generate("other").unwrap();
    use base64::Engine;
    let wrong = base64::engine::general_purpose::STANDARD.encode(other.pair.cert_pem.as_bytes());
    let client = json!({"url": hs.url("/validate"), "caBundle": wrong});
    validating(
        &server,
        "w",
        json!([on_cm_create("wrong-ca.example.com", client)]),
    )
    .await;
    let (code, body) = post(&server, CMS, &config_map("fine", json!({}))).await;
    assert_eq!(code, 500, "{body}");
    assert!(message(&body).contains("wrong-ca.example.com"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_clusters_webhooks_never_see_another_clusters_objects() {
    let (_dir, server) = support::server().await;
    let hs = hooks().await;
    for name in ["team-a", "team-b"] {
        let (code, body) = post(
            &server,
            "/apis/core.matryoshka.dev/v1alpha1/logicalclusters",
            &json!({"apiVersion": "core.matryoshka.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": name}}),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !server.cluster_exists(name).await {
            assert!(tokio::time::Instant::now() < deadline, "{name} never ready");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    configure(
        &server,
        "/clusters/team-a",
        "validatingwebhookconfigurations",
        "v",
        json!([hook(
            "v.example.com",
            url(&hs, "/validate"),
            rules(&["*"], &["configmaps"])
        )]),
    )
    .await;
    let (code, body) = post(
        &server,
        &format!("/clusters/team-b{CMS}"),
        &config_map("bad-b", json!({})),
    )
    .await;
    assert_eq!(code, 201, "team-a's webhook does not judge team-b: {body}");
    let (code, _) = post(
        &server,
        &format!("/clusters/team-a{CMS}"),
        &config_map("bad-a", json!({})),
    )
    .await;
    assert_eq!(code, 403);
    let names: Vec<Value> = hs
        .requests("/validate")
        .iter()
        .map(|r| r["name"].clone())
        .collect();
    assert_eq!(names, [json!("bad-a")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_to_a_webhook_reuse_their_connections() {
    let (_dir, server) = support::server().await;
    let hs = hooks().await;
    validating(
        &server,
        "v",
        json!([on_cm_create("v.example.com", url(&hs, "/validate"))]),
    )
    .await;
    for i in 0..20 {
        let (code, _) = post(&server, CMS, &config_map(&format!("cm-{i}"), json!({}))).await;
        assert_eq!(code, 201);
    }
    assert_eq!(hs.requests("/validate").len(), 20);
    let opened = hs.connections.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        opened <= 2,
        "20 sequential calls opened {opened} connections"
    );
}
