use serde_json::json;

use super::*;

fn cluster() -> Value {
    json!({
        "metadata": {"name": "dev", "namespace": "tenant-foo"},
        "spec": {"nodeGroups": {"md0": {"minReplicas": 1, "maxReplicas": 3, "instanceType": "u1.medium"}}},
        "status": {
            "version": "v1.35.6", "endpoint": "https://kubernetes-dev.foo.example:6443", "nodes": "1/1",
            "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "ok"}],
        },
    })
}

#[test]
fn every_page_is_a_labelled_document_with_a_skip_link_and_the_style_sheet() {
    let html = sign_in(None, None).into_string();
    assert!(html.starts_with("<!DOCTYPE html><html lang=\"en\">"));
    assert!(html.contains(r##"<a class="skip" href="#main">"##));
    assert!(html.contains(r#"<link rel="stylesheet" href="/console/static/console.css">"#));
    assert!(html.contains(r#"<script src="/console/static/console.js" defer></script>"#));
    assert!(SCRIPT.contains("EventSource") && SCRIPT.contains("data-live"));
    assert!(html.contains(r#"<label for="token">"#));
    assert!(html.contains(r#"<meta name="viewport""#));
    // Both themes and the narrow layout are in the style sheet.
    assert!(STYLE.contains("prefers-color-scheme: dark") && STYLE.contains("max-width: 40rem"));
}

#[test]
fn the_cluster_list_shows_status_and_offers_create_only_when_allowed() {
    let clusters = [cluster()];
    let may = Allowed {
        create: true,
        ..Default::default()
    };
    let html = cluster_list("alice", "tenant-foo", &clusters, may, Some("/live")).into_string();
    assert!(html.contains(r#"href="/console/namespaces/tenant-foo/tenantclusters/dev""#));
    assert!(html.contains(r#"<span class="status ok">Ready</span>"#));
    assert!(html.contains("v1.35.6") && html.contains("1/1"));
    assert!(html.contains(r#"href="/console/namespaces/tenant-foo/tenantclusters/new""#));
    assert!(html.contains(r#"data-live="/live""#));
    let viewer =
        cluster_list("bob", "tenant-foo", &clusters, Allowed::default(), None).into_string();
    assert!(!viewer.contains("/new"), "no create link for a viewer");
    assert!(viewer.contains("Signed in as <strong>bob</strong>"));
}

#[test]
fn the_detail_page_hides_what_the_user_may_not_do() {
    let c = cluster();
    let events =
        [json!({"type": "Warning", "reason": "Unhealthy", "message": "node n1 is not ready"})];
    let all = Allowed {
        create: true,
        update: true,
        delete: true,
        kubeconfig: true,
    };
    let html = cluster_detail("alice", &c, &events, all, &["admin", "super-admin"]).into_string();
    assert!(html.contains(r#"action="/console/namespaces/tenant-foo/tenantclusters/dev/scale""#));
    assert!(
        html.contains(
            r#"href="/console/namespaces/tenant-foo/tenantclusters/dev/kubeconfig/admin""#
        )
    );
    assert!(html.contains(r#"href="/console/namespaces/tenant-foo/tenantclusters/dev/delete""#));
    assert!(html.contains("node n1 is not ready"));
    let view = Allowed::default();
    let html = cluster_detail("bob", &c, &events, view, &["admin"]).into_string();
    for hidden in ["/scale", "/kubeconfig/", "/delete", "/edit"] {
        assert!(!html.contains(hidden), "{hidden} shown to a viewer");
    }
    assert!(html.contains("u1.medium"));
}

#[test]
fn the_form_page_shows_the_servers_errors_and_what_was_typed() {
    let schema = json!({"type": "object", "properties": {
        "version": {"type": "string", "default": "v1.35"},
    }});
    let mut errors = Errors::new();
    errors.insert(
        "metadata.name".into(),
        vec!["Invalid value: \"Dev\": a lowercase RFC 1123 label".into()],
    );
    errors.insert(
        "spec.version".into(),
        vec!["Unsupported value: \"v1.20\"".into()],
    );
    let body = b"metadata.name=Dev&spec.version=v1.20";
    let submitted = FormData::from_urlencoded(body);
    let html = cluster_form(
        "alice",
        "tenant-foo",
        None,
        &schema,
        &json!({}),
        &errors,
        Some(&submitted),
    )
    .into_string();
    assert!(html.contains("The request was refused"));
    assert!(html.contains(r#"value="Dev""#) && html.contains(r#"value="v1.20""#));
    assert!(html.contains("a lowercase RFC 1123 label"));
    assert!(html.contains(r#"action="/console/namespaces/tenant-foo/tenantclusters/new""#));
    // Editing: no name field; the action is the cluster's edit URL.
    let html = cluster_form(
        "alice",
        "tenant-foo",
        Some("dev"),
        &schema,
        &json!({}),
        &Errors::new(),
        None,
    )
    .into_string();
    assert!(!html.contains(r#"name="metadata.name""#));
    assert!(html.contains(r#"action="/console/namespaces/tenant-foo/tenantclusters/dev/edit""#));
}

#[test]
fn deleting_asks_for_the_name_first() {
    let html = confirm_delete("alice", "tenant-foo", "dev.a").into_string();
    assert!(html.contains(r#"pattern="dev\.a""#), "{html}");
    assert!(
        html.contains(r#"action="/console/namespaces/tenant-foo/tenantclusters/dev.a/delete""#)
    );
    assert_eq!(regex_literal("a-b.c"), r"a-b\.c");
}

#[test]
fn a_cluster_being_deleted_or_not_yet_reconciled_says_so() {
    let mut c = cluster();
    c["metadata"]["deletionTimestamp"] = json!("2026-12-05T00:00:00Z");
    assert!(readiness(&c).into_string().contains("Deleting"));
    let fresh = json!({"metadata": {"name": "x"}});
    assert!(readiness(&fresh).into_string().contains("Pending"));
    assert!(
        error_page(None, 403, "no")
            .into_string()
            .contains("Forbidden")
    );
}

#[test]
fn the_tenant_tree_nests_tenants_under_their_parents_with_their_quotas() {
    let tenants = [
        json!({"metadata": {"name": "bar", "namespace": "tenant-foo"}}),
        json!({"metadata": {"name": "foo", "namespace": "tenant-root"},
            "spec": {"resourceQuotas": {"cpu": "4", "memory": "8Gi"}},
            "status": {"namespace": "tenant-foo", "conditions": [{"type": "Ready", "status": "True"}]}}),
    ];
    assert_eq!(tenant_namespace(&tenants[0]), "tenant-foo-bar");
    let html = tenant_tree("admin", &tenants).into_string();
    let foo = html
        .find(r#"href="/console/namespaces/tenant-foo/tenantclusters""#)
        .unwrap();
    let bar = html
        .find(r#"href="/console/namespaces/tenant-foo-bar/tenantclusters""#)
        .unwrap();
    assert!(foo < bar, "a child after its parent");
    assert!(html.contains("quotas: cpu 4, memory 8Gi"));
    assert!(html.contains(r#"style="margin-left: 2rem""#), "{html}");
}
