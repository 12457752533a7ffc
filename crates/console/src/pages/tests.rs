use serde_json::json;

use super::*;

fn cluster() -> Value {
    json!({
        "metadata": {"name": "dev", "namespace": "tenant-foo"},
        "spec": {"nodeGroups": {"md0": {"minReplicas": 1, "maxReplicas": 3, "instanceType": "u1.medium"}}},
        "status": {
            "version": "v1.35.6", "endpoint": "https://kubernetes-dev.foo.example:6443", "nodes": "1/1",
            "kubeconfigSecret": "kubernetes-dev-admin-kubeconfig",
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
    let html = cluster_detail("alice", &c, &[], &events, all, None).into_string();
    assert!(html.contains(r#"action="/console/namespaces/tenant-foo/tenantclusters/dev/scale""#));
    assert!(
        html.contains(
            r#"href="/console/namespaces/tenant-foo/tenantclusters/dev/kubeconfig/admin""#
        )
    );
    assert!(html.contains(r#"href="/console/namespaces/tenant-foo/tenantclusters/dev/delete""#));
    assert!(html.contains("node n1 is not ready"));
    let view = Allowed::default();
    let html = cluster_detail("bob", &c, &[], &events, view, None).into_string();
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
fn the_tenant_tree_nests_tenants_under_their_parents_with_their_quotas_usage_and_links() {
    let tenants = [
        json!({"metadata": {"name": "bar", "namespace": "tenant-foo"}}),
        json!({"metadata": {"name": "foo", "namespace": "tenant-root"},
            "spec": {"resourceQuotas": {"cpu": "4", "memory": "8Gi"}},
            "status": {"namespace": "tenant-foo", "conditions": [{"type": "Ready", "status": "True"}]}}),
    ];
    assert_eq!(tenant_namespace(&tenants[0]), "tenant-foo-bar");
    let usage = std::collections::BTreeMap::from([(
        "tenant-foo".to_string(),
        json!({"vCPUHours": "1.5", "MemoryGiBHours": "3"}),
    )]);
    let html = tenant_tree("admin", &tenants, &usage, "the last 30 days", true).into_string();
    let foo = html
        .find(r#"href="/console/namespaces/tenant-foo/tenantclusters""#)
        .unwrap();
    let bar = html
        .find(r#"href="/console/namespaces/tenant-foo-bar/tenantclusters""#)
        .unwrap();
    assert!(foo < bar, "a child after its parent");
    assert!(html.contains("quotas: cpu 4, memory 8Gi"));
    // Nested lists, not inline styles (the content security policy forbids those).
    assert!(!html.contains("style="), "{html}");
    let nested = html[foo..].find("<ul>").unwrap() + foo;
    assert!(nested < bar, "bar in a list inside foo's entry: {html}");
    assert!(html.contains("1.5 vCPU·h, 3 GiB·h"), "{html}");
    assert!(html.contains(r#"href="/console/namespaces/tenant-foo/tenants/new""#));
    assert!(html.contains(r#"href="/console/namespaces/tenant-foo/usage""#));
    let html = tenant_tree("viewer", &tenants, &usage, "", false).into_string();
    assert!(
        !html.contains("tenants/new"),
        "no sub-tenant form without the right"
    );
}

#[test]
fn the_status_section_lists_the_clusters_machines_with_their_group_phase_and_node() {
    let c = json!({"metadata": {"name": "dev", "namespace": "tenant-foo"},
        "status": {"version": "v1.33.1", "conditions": [{"type": "Ready", "status": "True"}]}});
    let machines = [json!({
        "metadata": {"name": "kubernetes-dev-md0-abc", "labels": {"cluster.x-k8s.io/deployment-name": "kubernetes-dev-md0"}},
        "spec": {"version": "v1.33.1"},
        "status": {"phase": "Running", "nodeRef": {"name": "node-1"}},
    })];
    let html = cluster_status(&c, &machines, &[], false).into_string();
    for want in [
        "kubernetes-dev-md0-abc",
        "<td>kubernetes-dev-md0</td>",
        "<td>Running</td>",
        "<td>node-1</td>",
        r#"<span class="status ok">Ready</span>"#,
    ] {
        assert!(html.contains(want), "{want} in {html}");
    }
    assert!(
        cluster_status(&c, &[], &[], false)
            .into_string()
            .contains("No machines.")
    );
    // Events in the order they last happened.
    let events = [
        json!({"type": "Normal", "reason": "Second", "message": "b", "lastTimestamp": "2026-12-06T02:00:00Z"}),
        json!({"type": "Normal", "reason": "First", "message": "a", "lastTimestamp": "2026-12-06T01:00:00Z"}),
    ];
    let html = cluster_status(&c, &[], &events, false).into_string();
    assert!(
        html.find("First").unwrap() < html.find("Second").unwrap(),
        "{html}"
    );
}

#[test]
fn the_usage_page_charts_each_hour_and_tabulates_each_tenant() {
    let report = json!({
        "tenants": [
            {"tenant": "tenant-foo", "consumptions": {"vCPUHours": "2", "MemoryGiBHours": "4"},
             "totalConsumptions": {"vCPUHours": "3", "MemoryGiBHours": "6"}},
        ],
        "totalConsumptions": {"vCPUHours": "3", "MemoryGiBHours": "6", "EphemeralStorageGiBHours": "0"},
    });
    let series: Vec<(String, Value)> = (0..24)
        .map(|h| {
            (
                format!("{h:02}:00"),
                json!({"vCPUHours": if h == 23 { "3" } else { "0" }, "MemoryGiBHours": "0.25"}),
            )
        })
        .collect();
    let html = usage_page("admin", "tenant-foo", "today", &report, &series).into_string();
    assert_eq!(html.matches(r#"<rect class="bar""#).count(), 48, "{html}");
    assert!(html.contains("<title>23:00: 3.0 vCPU·h</title>"), "{html}");
    assert!(
        html.contains("<th scope=\"row\">tenant-foo</th><td>2</td><td>3</td><td>4</td><td>6</td>"),
        "{html}"
    );
    assert!(!html.contains("style="), "no inline styles");
}

#[test]
fn a_cluster_offers_its_kubeconfigs_once_written_and_the_oidc_one_in_system_mode() {
    let mut c = json!({"metadata": {"name": "dev"}});
    assert!(kubeconfig_kinds(&c).is_empty());
    c["status"] = json!({"kubeconfigSecret": "kubernetes-dev-admin-kubeconfig"});
    assert_eq!(kubeconfig_kinds(&c), ["admin", "super-admin"]);
    c["spec"] = json!({"oidc": {"mode": "System"}});
    assert_eq!(kubeconfig_kinds(&c), ["admin", "super-admin", "oidc"]);
}
