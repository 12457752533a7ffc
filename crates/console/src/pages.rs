//! The console's pages as functions of what the API returned: no I/O here, so every page is
//! tested as HTML. Links and forms are plain (`<a>`, `<form method=post>`): every basic action
//! works without JavaScript; what a user may not do is not shown (the caller asks the API
//! server with SelfSubjectAccessReviews and passes the answers in [`Allowed`]).

use maud::{DOCTYPE, Markup, html};
use serde_json::Value;

use crate::form::{self, Errors, Form, FormData, Mode};

/// Where the console is served.
pub const BASE: &str = "/console";

/// The console's style sheet: light and dark by `prefers-color-scheme`, one column on a
/// narrow screen.
pub const STYLE: &str = include_str!("console.css");

/// The console's one script: live updates by server-sent events. Every page works without it.
pub const SCRIPT: &str = include_str!("console.js");

/// What the signed-in user may do with the tenant clusters of one tenant namespace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Allowed {
    pub create: bool,
    pub update: bool,
    pub delete: bool,
    /// Reading the kubeconfig Secrets.
    pub kubeconfig: bool,
}

/// A page: the title, the signed-in user (none on the sign-in page) and the content.
pub fn layout(title: &str, user: Option<&str>, content: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { (title) " · Matryoshka" }
                link rel="stylesheet" href={(BASE) "/static/console.css"};
                script src={(BASE) "/static/console.js"} defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header {
                    nav aria-label="Main" {
                        a.brand href={(BASE) "/"} { "Matryoshka" }
                        @if let Some(u) = user {
                            a href={(BASE) "/"} { "Tenants" }
                            span.user { "Signed in as " strong { (u) } }
                            form.inline method="post" action={(BASE) "/sign-out"} {
                                button type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                main id="main" tabindex="-1" {
                    h1 { (title) }
                    (content)
                }
            }
        }
    }
}

/// Sign in with a bearer token (a service-account token, an OIDC ID token); `oidc` is the
/// URL that starts an OIDC login when an issuer is configured.
pub fn sign_in(error: Option<&str>, oidc: Option<&str>) -> Markup {
    let content = html! {
        @if let Some(e) = error {
            div.errors role="alert" { p { (e) } }
        }
        @if let Some(url) = oidc {
            p { a.button href=(url) { "Sign in with your identity provider" } }
            p { "Or sign in with a token:" }
        }
        form method="post" action={(BASE) "/sign-in"} {
            div.field {
                label for="token" { "Bearer token" }
                textarea id="token" name="token" rows="4" required autocomplete="off"
                    aria-describedby="token-hint" {}
                p.hint id="token-hint" {
                    "A token the API server accepts: a service account's token or an OIDC ID token. "
                    "It is kept in a cookie only this console reads. "
                    "A browser that presents a client certificate the API server accepts is signed in with it."
                }
            }
            button type="submit" { "Sign in" }
        }
    };
    layout("Sign in", None, content)
}

/// After an OIDC sign-in: moves on to the start page by itself (and offers the link).
pub fn signed_in(user: &str) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content={"0; url=" (BASE) "/"};
                title { "Signed in · Matryoshka" }
                link rel="stylesheet" href={(BASE) "/static/console.css"};
            }
            body {
                main id="main" {
                    h1 { "Signed in" }
                    p { "Signed in as " strong { (user) } ". " a href={(BASE) "/"} { "Continue" } }
                }
            }
        }
    }
}

/// The value of a condition's `status` (`True`, `False`, `Unknown`) of `type`, and its message.
pub fn condition<'a>(obj: &'a Value, ty: &str) -> Option<(&'a str, &'a str)> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
        .map(|c| {
            (
                c.get("status").and_then(Value::as_str).unwrap_or("Unknown"),
                c.get("message").and_then(Value::as_str).unwrap_or_default(),
            )
        })
}

fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn readiness(obj: &Value) -> Markup {
    let (class, label) = if obj.pointer("/metadata/deletionTimestamp").is_some() {
        ("status pending", "Deleting")
    } else {
        match condition(obj, "Ready") {
            Some(("True", _)) => ("status ok", "Ready"),
            Some(("False", _)) => ("status bad", "Not ready"),
            _ => ("status pending", "Pending"),
        }
    };
    html! { span class=(class) { (label) } }
}

fn clusters_url(namespace: &str) -> String {
    format!("{BASE}/namespaces/{namespace}/tenantclusters")
}

fn cluster_url(namespace: &str, name: &str) -> String {
    format!("{}/{name}", clusters_url(namespace))
}

/// The TenantClusters of a tenant namespace. `live` is the URL of the server-sent events that
/// replace the table's body when something changes.
pub fn cluster_list(
    user: &str,
    namespace: &str,
    clusters: &[Value],
    allowed: Allowed,
    live: Option<&str>,
) -> Markup {
    let content = html! {
        @if allowed.create {
            p { a.button href={(clusters_url(namespace)) "/new"} { "Create a tenant cluster" } }
        }
        div.scroll tabindex="0" role="region" aria-label={"Tenant clusters in " (namespace)} {
            table {
                caption { "Tenant clusters in " (namespace) }
                thead { tr { th scope="col" { "Name" } th scope="col" { "Status" } th scope="col" { "Version" } th scope="col" { "Nodes" } th scope="col" { "Endpoint" } } }
                // Live updates replace the rows (and announce them politely).
                tbody id="clusters" data-live=[live] aria-live="polite" { (cluster_rows(namespace, clusters)) }
            }
        }
    };
    layout(
        &format!("Tenant clusters · {namespace}"),
        Some(user),
        content,
    )
}

/// The rows of the cluster table (also what a live update sends).
pub fn cluster_rows(namespace: &str, clusters: &[Value]) -> Markup {
    html! {
        @if clusters.is_empty() {
            tr { td colspan="5" { "No tenant clusters in " (namespace) " yet." } }
        }
        @for c in clusters {
            @let name = text(c, "/metadata/name");
            tr {
                th scope="row" { a href=(cluster_url(namespace, name)) { (name) } }
                td { (readiness(c)) }
                td { (text(c, "/status/version")) }
                td { (text(c, "/status/nodes")) }
                td { code { (text(c, "/status/endpoint")) } }
            }
        }

    }
}

/// The kubeconfigs a cluster offers: admin and super-admin once its Secret is written, and
/// the OIDC one (kubelogin) when `spec.oidc.mode` is `System`.
pub fn kubeconfig_kinds(cluster: &Value) -> Vec<&'static str> {
    use crate::app::{KUBECONFIGS, OIDC_KUBECONFIG};
    let mut kinds = Vec::new();
    if cluster.pointer("/status/kubeconfigSecret").is_some() {
        kinds.extend(KUBECONFIGS.iter().map(|(kind, _)| *kind));
    }
    if cluster.pointer("/spec/oidc/mode").and_then(Value::as_str) == Some("System") {
        kinds.push(OIDC_KUBECONFIG);
    }
    kinds
}

/// The node group a TenantCluster without `spec.nodeGroups` has (the platform's default:
/// `md0`, u1.medium, no minimum, at most 10 nodes).
pub fn implied_node_group() -> Value {
    serde_json::json!({"minReplicas": 0, "maxReplicas": 10, "instanceType": "u1.medium", "diskSize": "20Gi", "roles": ["ingress-nginx"]})
}

/// A cluster's node groups: its `spec.nodeGroups`, or the implied `md0` when it has none.
pub fn node_groups(cluster: &Value) -> serde_json::Map<String, Value> {
    match cluster
        .pointer("/spec/nodeGroups")
        .and_then(Value::as_object)
    {
        Some(g) if !g.is_empty() => g.clone(),
        _ => serde_json::Map::from_iter([("md0".to_string(), implied_node_group())]),
    }
}

/// One TenantCluster: status, conditions, node groups with scaling, kubeconfigs, events, and
/// the actions the user may take.
pub fn cluster_detail(
    user: &str,
    cluster: &Value,
    machines: &[Value],
    events: &[Value],
    allowed: Allowed,
    live: Option<&str>,
) -> Markup {
    let ns = text(cluster, "/metadata/namespace");
    let name = text(cluster, "/metadata/name");
    let url = cluster_url(ns, name);
    let groups = node_groups(cluster);
    let content = html! {
        p { a href=(clusters_url(ns)) { "All tenant clusters in " (ns) } }
        section aria-labelledby="details" {
            h2 id="details" { "Details" }
            // Live updates replace the status and the machines.
            div id="status" data-live=[live] data-event="status" aria-live="polite" {
                (cluster_status(cluster, machines, events, allowed.kubeconfig))
            }
        }
        section aria-labelledby="groups" {
            h2 id="groups" { "Node groups" }
            @for (group, g) in &groups {
                @let min_id = format!("scale-{group}-min");
                @let max_id = format!("scale-{group}-max");
                div.group {
                    h3 { (group) }
                    p {
                        (text(g, "/instanceType")) " · "
                        (g.get("minReplicas").map(Value::to_string).unwrap_or_else(|| "0".into())) "–"
                        (g.get("maxReplicas").map(Value::to_string).unwrap_or_else(|| "10".into())) " nodes"
                    }
                    @if allowed.update {
                        form.inline method="post" action={(url) "/scale"} {
                            input type="hidden" name="group" value=(group);
                            label for=(min_id) { "Minimum" }
                            input type="number" id=(min_id) name="minReplicas" min="0" step="1"
                                value=(g.get("minReplicas").map(Value::to_string).unwrap_or_else(|| "0".into()));
                            label for=(max_id) { "Maximum" }
                            input type="number" id=(max_id) name="maxReplicas" min="0" step="1"
                                value=(g.get("maxReplicas").map(Value::to_string).unwrap_or_else(|| "10".into()));
                            button type="submit" { "Scale " (group) }
                        }
                    }
                }
            }
        }
        @if allowed.update || allowed.delete {
            section aria-labelledby="actions" {
                h2 id="actions" { "Actions" }
                @if allowed.update { p { a.button href={(url) "/edit"} { "Edit" } } }
                @if allowed.delete { p { a.button.danger href={(url) "/delete"} { "Delete" } } }
            }
        }
    };
    layout(&format!("Tenant cluster {name}"), Some(user), content)
}

/// A cluster's status: readiness, version, endpoint, conditions, its machines (the nodes'
/// machines, with their phase and node), its events and kubeconfigs; what a live update of
/// the detail page sends.
pub fn cluster_status(
    cluster: &Value,
    machines: &[Value],
    events: &[Value],
    kubeconfig: bool,
) -> Markup {
    let name = text(cluster, "/metadata/name");
    let url = cluster_url(text(cluster, "/metadata/namespace"), name);
    let kubeconfigs = kubeconfig_kinds(cluster);
    // Events in the order they last happened.
    let mut events: Vec<&Value> = events.iter().collect();
    let when = |e: &Value| {
        [
            "/lastTimestamp",
            "/eventTime",
            "/metadata/creationTimestamp",
        ]
        .iter()
        .find_map(|p| e.pointer(p).and_then(Value::as_str))
        .unwrap_or_default()
        .to_string()
    };
    events.sort_by_key(|e| when(e));
    html! {
        dl {
            dt { "Status" } dd { (readiness(cluster)) }
            dt { "Version" } dd { (text(cluster, "/status/version")) }
            dt { "Endpoint" } dd { code { (text(cluster, "/status/endpoint")) } }
            dt { "Nodes (ready/desired)" } dd { (text(cluster, "/status/nodes")) }
        }
        @if let Some(conds) = cluster.pointer("/status/conditions").and_then(Value::as_array) {
            div.scroll tabindex="0" role="region" aria-label="Conditions" {
                table {
                    caption { "Conditions" }
                    thead { tr { th scope="col" { "Type" } th scope="col" { "Status" } th scope="col" { "Reason" } th scope="col" { "Message" } } }
                    tbody {
                        @for c in conds {
                            tr {
                                th scope="row" { (text(c, "/type")) }
                                td { (text(c, "/status")) }
                                td { (text(c, "/reason")) }
                                td { (text(c, "/message")) }
                            }
                        }
                    }
                }
            }
        }
        div.scroll tabindex="0" role="region" aria-label="Machines" {
            table id="machines" {
                caption { "Machines" }
                thead { tr { th scope="col" { "Name" } th scope="col" { "Node group" } th scope="col" { "Phase" } th scope="col" { "Node" } th scope="col" { "Version" } } }
                tbody {
                    @if machines.is_empty() { tr { td colspan="5" { "No machines." } } }
                    @for m in machines {
                        tr {
                            th scope="row" { (text(m, "/metadata/name")) }
                            td { (m.pointer("/metadata/labels").and_then(|l| l.get("cluster.x-k8s.io/deployment-name")).and_then(Value::as_str).unwrap_or_default()) }
                            td { (text(m, "/status/phase")) }
                            td { (text(m, "/status/nodeRef/name")) }
                            td { (text(m, "/spec/version")) }
                        }
                    }
                }
            }
        }
        h3 id="events" { "Events" }
        @if events.is_empty() {
            p { "No events." }
        } @else {
            ul.events {
                @for e in events {
                    li {
                        span class={"event " (text(e, "/type").to_lowercase())} { (text(e, "/type")) }
                        " " strong { (text(e, "/reason")) } " " (text(e, "/message"))
                    }
                }
            }
        }
        @if kubeconfig && !kubeconfigs.is_empty() {
            h3 id="kubeconfig" { "Kubeconfig" }
            ul {
                @for k in &kubeconfigs {
                    li {
                        a href={(url) "/kubeconfig/" (k)} download={(name) "-" (k) ".kubeconfig"} { "Download the " (k) " kubeconfig" }
                        // Shown by the script, which copies the file to the clipboard.
                        " " button.copy type="button" hidden data-copy={(url) "/kubeconfig/" (k)} { "Copy the " (k) " kubeconfig" }
                    }
                }
            }
        }
    }
}

/// The create or edit page of a TenantCluster: the form generated from the CRD's `spec`
/// schema, the server's field errors next to their fields and in a summary.
pub fn cluster_form(
    user: &str,
    namespace: &str,
    name: Option<&str>,
    spec_schema: &Value,
    spec: &Value,
    errors: &Errors,
    submitted: Option<&FormData>,
) -> Markup {
    let (title, action, cancel) = match name {
        Some(n) => (
            format!("Edit tenant cluster {n}"),
            format!("{}/edit", cluster_url(namespace, n)),
            cluster_url(namespace, n),
        ),
        None => (
            format!("New tenant cluster in {namespace}"),
            format!("{}/new", clusters_url(namespace)),
            clusters_url(namespace),
        ),
    };
    object_form(
        user,
        &title,
        &action,
        &cancel,
        name.is_none(),
        spec_schema,
        spec,
        errors,
        submitted,
    )
}

/// The create page of a sub-tenant of the tenant whose namespace is `namespace`.
pub fn tenant_form(
    user: &str,
    namespace: &str,
    spec_schema: &Value,
    spec: &Value,
    errors: &Errors,
    submitted: Option<&FormData>,
) -> Markup {
    object_form(
        user,
        &format!("New tenant in {namespace}"),
        &format!("{BASE}/namespaces/{namespace}/tenants/new"),
        &format!("{BASE}/"),
        true,
        spec_schema,
        spec,
        errors,
        submitted,
    )
}

/// A form for an object's `spec` (and its name when `create`).
#[allow(clippy::too_many_arguments)]
fn object_form(
    user: &str,
    title: &str,
    action: &str,
    cancel: &str,
    create: bool,
    spec_schema: &Value,
    spec: &Value,
    errors: &Errors,
    submitted: Option<&FormData>,
) -> Markup {
    let mode = if create { Mode::Create } else { Mode::Edit };
    let name_errors = errors.get("metadata.name").filter(|e| !e.is_empty());
    let name_value = submitted
        .and_then(|f| f.get("metadata.name"))
        .unwrap_or_default();
    let fields = Form {
        schema: spec_schema,
        root: "spec",
        value: spec,
        errors,
        mode,
        submitted,
    }
    .render();
    let content = html! {
        (form::summary(errors))
        form.schema method="post" action=(action) novalidate {
            @if create {
                div.field {
                    label for=(form::id("metadata.name")) { "name " span.required { "(required)" } }
                    input type="text" id=(form::id("metadata.name")) name="metadata.name" value=(name_value)
                        required autocomplete="off"
                        aria-invalid=[name_errors.map(|_| "true")]
                        aria-describedby={(form::id("metadata.name")) "-hint" @if name_errors.is_some() { " " (form::id("metadata.name")) "-error" }};
                    p.hint id={(form::id("metadata.name")) "-hint"} { "Lower-case letters, digits and '-'." }
                    @if let Some(errs) = name_errors {
                        p.error id={(form::id("metadata.name")) "-error"} role="alert" { @for e in errs { (e) " " } }
                    }
                }
            }
            (fields)
            div.actions {
                button type="submit" name="_save" value="1" { @if create { "Create" } @else { "Save" } }
                a href=(cancel) { "Cancel" }
            }
        }
    };
    layout(title, Some(user), content)
}

/// The namespace of a Tenant: its status says; before the platform wrote it, the platform's
/// naming rule (children of `tenant-root` are `tenant-<name>`, deeper ones
/// `<parent namespace>-<name>`).
pub fn tenant_namespace(tenant: &Value) -> String {
    if let Some(ns) = tenant.pointer("/status/namespace").and_then(Value::as_str) {
        return ns.to_string();
    }
    let parent = text(tenant, "/metadata/namespace");
    let name = text(tenant, "/metadata/name");
    if parent == "tenant-root" {
        format!("tenant-{name}")
    } else {
        format!("{parent}-{name}")
    }
}

/// The usage figures shown beside a tenant: its subtree's `totalConsumptions` of a report.
fn usage_summary(total: Option<&Value>) -> Markup {
    let figure = |key: &str| {
        total
            .and_then(|t| t.get(key))
            .and_then(Value::as_str)
            .unwrap_or("0")
            .to_string()
    };
    html! {
        span.usage { (figure("vCPUHours")) " vCPU·h, " (figure("MemoryGiBHours")) " GiB·h" }
    }
}

/// The tenant tree the user may list: each tenant under its parent (nested lists), with its
/// readiness, quotas, usage over the report's period (`usage`: tenant namespace → its
/// subtree's `totalConsumptions`) and links to its clusters and usage; `may_create` offers a
/// sub-tenant form under each.
pub fn tenant_tree(
    user: &str,
    tenants: &[Value],
    usage: &std::collections::BTreeMap<String, Value>,
    period: &str,
    may_create: bool,
) -> Markup {
    let mut children: std::collections::BTreeMap<&str, Vec<(String, &Value)>> = Default::default();
    for t in tenants {
        children
            .entry(text(t, "/metadata/namespace"))
            .or_default()
            .push((tenant_namespace(t), t));
    }
    for list in children.values_mut() {
        list.sort_by(|a, b| a.0.cmp(&b.0));
    }
    let content = html! {
        p.hint { "Usage: " (period) ", each tenant with its sub-tenants." }
        ul.tree {
            li {
                (tenant_entry("tenant-root", "tenant-root", None, usage, may_create))
                (subtree("tenant-root", &children, usage, may_create, 0))
            }
        }
    };
    layout("Tenants", Some(user), content)
}

/// The nesting the tree renders at most (a tenant namespace name has at most 63 characters,
/// so deeper trees cannot exist).
const MAX_DEPTH: usize = 32;

fn subtree(
    ns: &str,
    children: &std::collections::BTreeMap<&str, Vec<(String, &Value)>>,
    usage: &std::collections::BTreeMap<String, Value>,
    may_create: bool,
    depth: usize,
) -> Markup {
    let Some(list) = children.get(ns).filter(|_| depth < MAX_DEPTH) else {
        return html! {};
    };
    html! {
        ul {
            @for (child, t) in list {
                li {
                    (tenant_entry(child, text(t, "/metadata/name"), Some(t), usage, may_create))
                    (subtree(child, children, usage, may_create, depth + 1))
                }
            }
        }
    }
}

fn tenant_entry(
    ns: &str,
    name: &str,
    tenant: Option<&Value>,
    usage: &std::collections::BTreeMap<String, Value>,
    may_create: bool,
) -> Markup {
    html! {
        div.tenant {
            strong { (name) }
            @if let Some(t) = tenant { " " (readiness(t)) }
            " " span.hint { (ns) }
            " · " (usage_summary(usage.get(ns)))
            @if let Some(q) = tenant.and_then(|t| t.pointer("/spec/resourceQuotas")).and_then(Value::as_object).filter(|q| !q.is_empty()) {
                " · quotas: "
                @for (i, (k, v)) in q.iter().enumerate() {
                    @if i > 0 { ", " }
                    (k) " " (v.as_str().map(String::from).unwrap_or_else(|| v.to_string()))
                }
            }
            span.links {
                a href=(clusters_url(ns)) { "Clusters" span.visually-hidden { " of " (name) } }
                a href={(BASE) "/namespaces/" (ns) "/usage"} { "Usage" span.visually-hidden { " of " (name) } }
                @if may_create {
                    a href={(BASE) "/namespaces/" (ns) "/tenants/new"} { "New sub-tenant" span.visually-hidden { " of " (name) } }
                }
            }
        }
    }
}

/// A consumption figure of a report (`"1.25"`) as a number.
pub fn figure(consumptions: &Value, key: &str) -> f64 {
    consumptions
        .get(key)
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.0)
}

/// A tenant's usage: `report` over the whole `period` (its `tenants[]`, each with its own and
/// its subtree's consumptions), and `series`, the totals of consecutive intervals (their
/// labels), drawn as one chart per resource.
pub fn usage_page(
    user: &str,
    namespace: &str,
    period: &str,
    report: &Value,
    series: &[(String, Value)],
) -> Markup {
    let resources = [
        ("vCPUHours", "vCPU", "vCPU·h"),
        ("MemoryGiBHours", "Memory", "GiB·h"),
        ("EphemeralStorageGiBHours", "Ephemeral storage", "GiB·h"),
    ];
    let tenants = report
        .get("tenants")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let empty = Value::Null;
    let total = report.get("totalConsumptions").unwrap_or(&empty);
    let content = html! {
        p { a href={(BASE) "/"} { "All tenants" } " · " a href=(clusters_url(namespace)) { "Tenant clusters in " (namespace) } }
        p { "What the worker machines and pods of " (namespace) " and its sub-tenants reserved, " (period) "." }
        dl {
            @for (key, label, unit) in resources {
                dt { (label) } dd { (total.get(key).and_then(Value::as_str).unwrap_or("0")) " " (unit) }
            }
        }
        @for (key, label, unit) in resources.iter().take(2) {
            @let points: Vec<(String, f64)> = series.iter().map(|(l, c)| (l.clone(), figure(c, key))).collect();
            (crate::chart::bars(&format!("chart-{key}"), &format!("{label} by hour"), unit, &points))
        }
        div.scroll tabindex="0" role="region" aria-label="Usage by tenant" {
            table {
                caption { "Each tenant, " (period) }
                thead { tr {
                    th scope="col" { "Tenant" }
                    th scope="col" { "vCPU·h (own)" } th scope="col" { "vCPU·h (with sub-tenants)" }
                    th scope="col" { "GiB·h memory (own)" } th scope="col" { "GiB·h memory (with sub-tenants)" }
                } }
                tbody {
                    @if tenants.is_empty() { tr { td colspan="5" { "Nothing was used in this period." } } }
                    @for t in &tenants {
                        @let own = t.get("consumptions").unwrap_or(&empty);
                        @let sub = t.get("totalConsumptions").unwrap_or(&empty);
                        tr {
                            th scope="row" { (text(t, "/tenant")) }
                            td { (own.get("vCPUHours").and_then(Value::as_str).unwrap_or("0")) }
                            td { (sub.get("vCPUHours").and_then(Value::as_str).unwrap_or("0")) }
                            td { (own.get("MemoryGiBHours").and_then(Value::as_str).unwrap_or("0")) }
                            td { (sub.get("MemoryGiBHours").and_then(Value::as_str).unwrap_or("0")) }
                        }
                    }
                }
            }
        }
        details {
            summary { "The figures by hour" }
            div.scroll tabindex="0" role="region" aria-label="Usage by hour" {
                table {
                    caption { "Usage by hour" }
                    thead { tr { th scope="col" { "Hour" } th scope="col" { "vCPU·h" } th scope="col" { "GiB·h memory" } } }
                    tbody {
                        @for (label, c) in series {
                            tr {
                                th scope="row" { (label) }
                                td { (c.get("vCPUHours").and_then(Value::as_str).unwrap_or("0")) }
                                td { (c.get("MemoryGiBHours").and_then(Value::as_str).unwrap_or("0")) }
                            }
                        }
                    }
                }
            }
        }
    };
    layout(&format!("Usage · {namespace}"), Some(user), content)
}

/// Asks before deleting (a page of its own, so no script is needed).
pub fn confirm_delete(user: &str, namespace: &str, name: &str) -> Markup {
    let url = cluster_url(namespace, name);
    let content = html! {
        p { "Deleting " strong { (name) } " removes its nodes, workloads and data. This cannot be undone." }
        form method="post" action={(url) "/delete"} {
            div.field {
                label for="confirm" { "Type the cluster's name to confirm" }
                input type="text" id="confirm" name="confirm" required autocomplete="off" pattern=(regex_literal(name));
            }
            div.actions {
                button.danger type="submit" { "Delete " (name) }
                a href=(url) { "Cancel" }
            }
        }
    };
    layout(
        &format!("Delete tenant cluster {name}?"),
        Some(user),
        content,
    )
}

/// `s` as an HTML `pattern` matching exactly it (syntax characters escaped; browsers compile
/// patterns in the `v` mode, where escaping anything else is an error).
fn regex_literal(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "^$\\.*+?()[]{}|/".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A page for an error the API server returned (403, 404, ...).
pub fn error_page(user: Option<&str>, code: u16, message: &str) -> Markup {
    let title = match code {
        403 => "Forbidden",
        404 => "Not found",
        401 => "Signed out",
        _ => "Something went wrong",
    };
    layout(
        title,
        user,
        html! {
            div.errors role="alert" { p { (message) } }
            p { a href={(BASE) "/"} { "Back to the start" } }
        },
    )
}

#[cfg(test)]
mod tests;
