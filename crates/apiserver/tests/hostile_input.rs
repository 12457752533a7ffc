//! Hostile input from one tenant is refused with a 4xx `Status`, changes nothing, and never
//! takes the server down. Regressions: a CRD rule `1 + 1 + … + 1` with 10,000 terms (even in
//! a dry run) overflowed the stack and aborted the process; a triple comprehension over a
//! list of 100,000 items was accepted and took seconds per object on an async worker; 17 JSON
//! patch `copy` operations allocated 845 MiB; a JSON patch could nest a preserve-unknown
//! subtree beyond what can be read back (the object then answered 404 to GET and DELETE and
//! 409 to a create); a dry run returned objects over the storage limit; bad strategic merge
//! patch directives were a 500.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver::server::ApiServer;
use http::Method;
use serde_json::{Value, json};
use support::{call, call_with};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

async fn send(
    server: &Arc<ApiServer>,
    method: Method,
    uri: &str,
    ty: &str,
    body: &str,
) -> (u16, Value) {
    call_with(server, method, uri, &[("content-type", ty)], body).await
}

async fn post(server: &Arc<ApiServer>, uri: &str, body: &Value) -> (u16, Value) {
    send(
        server,
        Method::POST,
        uri,
        "application/json",
        &body.to_string(),
    )
    .await
}

fn crd_with(schema: Value) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema}}]}})
}

fn rule_schema(rule: &str) -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"list": {"type": "array", "maxItems": 100000, "items": {"type": "integer"}}},
        "x-kubernetes-validations": [{"rule": rule}]}}})
}

/// Creates the Widget CRD and waits until it is served.
async fn widgets(server: &Arc<ApiServer>, schema: Value) {
    let (code, body) = post(server, CRDS, &crd_with(schema)).await;
    assert_eq!(code, 201, "{body}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while call(server, Method::GET, WIDGETS).await.0 != 200 {
        assert!(Instant::now() < deadline, "widgets never served");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn crd_count(server: &Arc<ApiServer>) -> usize {
    let (code, list) = call(server, Method::GET, CRDS).await;
    assert_eq!(code, 200, "{list}");
    list["items"].as_array().map_or(0, Vec::len)
}

#[tokio::test]
async fn rules_nested_beyond_the_parser_limit_are_refused_without_crashing_the_server() {
    let (_dir, server) = support::server().await;
    for rule in [
        vec!["1"; 10_000].join(" + ") + " > 0",
        format!("has(self{})", ".a".repeat(5_000)),
        format!("self.list{} > 0", "[0]".repeat(20_000)),
    ] {
        for dry in ["?dryRun=All", ""] {
            let (code, status) = post(
                &server,
                &format!("{CRDS}{dry}"),
                &crd_with(rule_schema(&rule)),
            )
            .await;
            assert_eq!(code, 422, "{status}");
            assert_eq!(status["reason"], "Invalid");
            let cause = status["details"]["causes"][0].clone();
            assert_eq!(
                cause["field"],
                "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
            );
            assert!(
                cause["message"]
                    .as_str()
                    .unwrap()
                    .contains("max recursion depth exceeded"),
                "{cause}"
            );
        }
    }
    assert_eq!(crd_count(&server).await, 0);
}

#[tokio::test]
async fn a_rule_whose_estimated_cost_exceeds_the_budget_is_refused_with_upstreams_message() {
    let (_dir, server) = support::server().await;
    let rule = "self.list.all(a, self.list.all(b, self.list.all(c, a + b + c >= 0)))";
    let (code, status) = post(&server, CRDS, &crd_with(rule_schema(rule))).await;
    assert_eq!(code, 422, "{status}");
    let cause = &status["details"]["causes"][0];
    assert!(
        cause["message"].as_str().unwrap().starts_with(
            "Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems"
        ),
        "{cause}"
    );
    assert_eq!(crd_count(&server).await, 0);
    // One comprehension over the same list is within the budget.
    let (code, body) = post(
        &server,
        CRDS,
        &crd_with(rule_schema("self.list.all(a, a >= 0)")),
    )
    .await;
    assert_eq!(code, 201, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_that_would_run_too_long_on_an_object_is_refused_before_it_runs() {
    let (_dir, server) = support::server().await;
    // Each rule is within the estimated limits (so is their total), but together, over a
    // full object, they would cost more than a request's budget: evaluation stops there.
    let rules: Vec<Value> = (0..5)
        .map(|i| json!({"rule": format!("self.l.all(a, self.l.all(b, a + b >= -{i}))")}))
        .collect();
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"items": {"type": "array", "maxItems": 30, "items": {"type": "object",
            "properties": {"l": {"type": "array", "maxItems": 100, "items": {"type": "integer"}}},
            "x-kubernetes-validations": rules}}}}}});
    widgets(&server, schema).await;
    let l: Vec<i64> = (0..100).collect();
    let items: Vec<Value> = (0..30).map(|_| json!({"l": l})).collect();
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"items": items}});
    let started = Instant::now();
    let (code, status) = post(&server, &format!("{WIDGETS}?dryRun=All"), &widget).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"].as_str().unwrap().contains(
            "validation failed due to running out of cost budget, no further validation rules will be run"
        ),
        "{status}"
    );
}

#[tokio::test]
async fn json_patch_copies_are_bounded_by_upstreams_accumulated_size_limit() {
    let (_dir, server) = support::server().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"},
        "data": {"a": "x".repeat(1000)}});
    let (code, created) = post(&server, "/api/v1/namespaces/default/configmaps", &cm).await;
    assert_eq!(code, 201, "{created}");
    // Each copy of `/data` into itself doubles it: 17 of them would make it 128 MB from a
    // patch of under 2 KB.
    let ops: Vec<Value> = (0..17)
        .map(|i| json!({"op": "copy", "from": "/data", "path": format!("/data/m{i}")}))
        .collect();
    for dry in ["?dryRun=All", ""] {
        let (code, status) = send(
            &server,
            Method::PATCH,
            &format!("/api/v1/namespaces/default/configmaps/cm{dry}"),
            "application/json-patch+json",
            &Value::Array(ops.clone()).to_string(),
        )
        .await;
        assert_eq!(code, 413, "{status}");
        assert_eq!(status["reason"], "RequestEntityTooLarge");
        assert!(
            status["message"]
                .as_str()
                .unwrap()
                .starts_with("Unable to copy, the accumulated size increase of copy is"),
            "{status}"
        );
        assert!(
            status["message"]
                .as_str()
                .unwrap()
                .ends_with("exceeding the limit 3145728")
        );
    }
    let (_, now) = call(
        &server,
        Method::GET,
        "/api/v1/namespaces/default/configmaps/cm",
    )
    .await;
    assert_eq!(
        now["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
}

#[tokio::test]
async fn a_patch_may_not_nest_an_object_deeper_than_can_be_read_back() {
    let (_dir, server) = support::server().await;
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-preserve-unknown-fields": true}}});
    widgets(&server, schema).await;
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"a": 1}});
    let (code, created) = post(&server, WIDGETS, &w).await;
    assert_eq!(code, 201, "{created}");
    // Each `move` wraps the subtree in one more object.
    let mut ops = Vec::new();
    for _ in 0..130 {
        ops.push(json!({"op": "add", "path": "/spec/tmp", "value": {}}));
        ops.push(json!({"op": "move", "from": "/spec/a", "path": "/spec/tmp/a"}));
        ops.push(json!({"op": "move", "from": "/spec/tmp", "path": "/spec/a"}));
    }
    let (code, status) = send(
        &server,
        Method::PATCH,
        &format!("{WIDGETS}/w"),
        "application/json-patch+json",
        &Value::Array(ops).to_string(),
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("nested deeper than the maximum"),
        "{status}"
    );
    let (code, now) = call(&server, Method::GET, &format!("{WIDGETS}/w")).await;
    assert_eq!(code, 200, "{now}");
    assert_eq!(
        now["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let (code, _) = call(&server, Method::DELETE, &format!("{WIDGETS}/w")).await;
    assert_eq!(code, 200);
    // A body nested deeper than the limit is refused as it is read.
    let mut deep = json!(1);
    for _ in 0..110 {
        deep = json!({ "x": deep });
    }
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "d"}, "spec": deep});
    let (code, status) = post(&server, WIDGETS, &w).await;
    assert_eq!(code, 400, "{status}");
}

#[tokio::test]
async fn a_dry_run_refuses_an_object_over_the_storage_limit_as_the_write_would() {
    let (_dir, server) = support::server().await;
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-preserve-unknown-fields": true}}});
    widgets(&server, schema).await;
    let big = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "big"},
        "spec": {"a": "x".repeat(1536 * 1024), "b": "y".repeat(1024 * 1024)}});
    for dry in ["?dryRun=All", ""] {
        let (code, status) = post(&server, &format!("{WIDGETS}{dry}"), &big).await;
        assert_eq!(code, 413, "{dry}: {status}");
        assert_eq!(status["reason"], "RequestEntityTooLarge");
    }
    let (code, _) = call(&server, Method::GET, &format!("{WIDGETS}/big")).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn a_strategic_merge_patch_that_does_not_fit_the_object_is_the_clients_error() {
    let (_dir, server) = support::server().await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let (code, created) = post(&server, "/api/v1/namespaces/default/pods", &pod).await;
    assert_eq!(code, 201, "{created}");
    for patch in [
        // A list item without its merge key.
        json!({"spec": {"containers": [{"image": "j"}]}}),
        // A directive with a value of the wrong type.
        json!({"spec": {"$setElementOrder/containers": "nope"}}),
    ] {
        let (code, status) = send(
            &server,
            Method::PATCH,
            "/api/v1/namespaces/default/pods/p",
            "application/strategic-merge-patch+json",
            &patch.to_string(),
        )
        .await;
        assert!((400..500).contains(&code), "{patch}: {code} {status}");
        assert_eq!(status["kind"], "Status");
        assert!(!status["message"].as_str().unwrap_or_default().is_empty());
    }
    let (_, now) = call(&server, Method::GET, "/api/v1/namespaces/default/pods/p").await;
    assert_eq!(
        now["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
}
