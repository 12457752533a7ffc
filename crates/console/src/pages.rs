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
                            a href={(BASE) "/tenants"} { "Tenants" }
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
                    "It is kept in a cookie only this console reads."
                }
            }
            button type="submit" { "Sign in" }
        }
    };
    layout("Sign in", None, content)
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
        div.scroll {
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

/// One TenantCluster: status, conditions, node groups with scaling, kubeconfigs, events, and
/// the actions the user may take.
pub fn cluster_detail(
    user: &str,
    cluster: &Value,
    events: &[Value],
    allowed: Allowed,
    kubeconfigs: &[&str],
) -> Markup {
    let ns = text(cluster, "/metadata/namespace");
    let name = text(cluster, "/metadata/name");
    let url = cluster_url(ns, name);
    let groups = cluster
        .pointer("/spec/nodeGroups")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let content = html! {
        p { a href=(clusters_url(ns)) { "All tenant clusters in " (ns) } }
        section aria-labelledby="details" {
            h2 id="details" { "Details" }
            dl {
                dt { "Status" } dd { (readiness(cluster)) }
                dt { "Version" } dd { (text(cluster, "/status/version")) }
                dt { "Endpoint" } dd { code { (text(cluster, "/status/endpoint")) } }
                dt { "Nodes (ready/desired)" } dd { (text(cluster, "/status/nodes")) }
            }
            @if let Some(conds) = cluster.pointer("/status/conditions").and_then(Value::as_array) {
                div.scroll {
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
        }
        section aria-labelledby="groups" {
            h2 id="groups" { "Node groups" }
            @if groups.is_empty() {
                p { "The default group md0." }
            }
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
        @if allowed.kubeconfig && !kubeconfigs.is_empty() {
            section aria-labelledby="kubeconfig" {
                h2 id="kubeconfig" { "Kubeconfig" }
                ul {
                    @for k in kubeconfigs {
                        li { a href={(url) "/kubeconfig/" (k)} download={(name) "-" (k) ".kubeconfig"} { "Download the " (k) " kubeconfig" } }
                    }
                }
            }
        }
        section aria-labelledby="events" {
            h2 id="events" { "Events" }
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

/// The create or edit page: the form generated from the CRD's `spec` schema, the server's
/// field errors next to their fields and in a summary.
pub fn cluster_form(
    user: &str,
    namespace: &str,
    name: Option<&str>,
    spec_schema: &Value,
    spec: &Value,
    errors: &Errors,
    submitted: Option<&FormData>,
) -> Markup {
    let mode = if name.is_some() {
        Mode::Edit
    } else {
        Mode::Create
    };
    let action = match name {
        Some(n) => format!("{}/edit", cluster_url(namespace, n)),
        None => format!("{}/new", clusters_url(namespace)),
    };
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
            @if name.is_none() {
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
                button type="submit" name="_save" value="1" { @if name.is_some() { "Save" } @else { "Create" } }
                a href=(match name { Some(n) => cluster_url(namespace, n), None => clusters_url(namespace) }) { "Cancel" }
            }
        }
    };
    let title = match name {
        Some(n) => format!("Edit tenant cluster {n}"),
        None => format!("New tenant cluster in {namespace}"),
    };
    layout(&title, Some(user), content)
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

/// The tenant tree the user may list: each tenant under its parent, with its quotas and a
/// link to its tenant clusters.
pub fn tenant_tree(user: &str, tenants: &[Value]) -> Markup {
    let mut rows: Vec<(String, &Value)> =
        tenants.iter().map(|t| (tenant_namespace(t), t)).collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let content = html! {
        ul.tree {
            li { a href=(clusters_url("tenant-root")) { "tenant-root" } " (the root tenant)" }
            @for (ns, t) in &rows {
                @let depth = ns.matches('-').count().saturating_sub(1);
                li style={"margin-left: " (depth * 2) "rem"} {
                    a href=(clusters_url(ns)) { (text(t, "/metadata/name")) }
                    " " (readiness(t)) " "
                    span.hint { (ns) }
                    @if let Some(q) = t.pointer("/spec/resourceQuotas").and_then(Value::as_object).filter(|q| !q.is_empty()) {
                        " · quotas: "
                        @for (i, (k, v)) in q.iter().enumerate() {
                            @if i > 0 { ", " }
                            (k) " " (v.as_str().map(String::from).unwrap_or_else(|| v.to_string()))
                        }
                    }
                }
            }
        }
    };
    layout("Tenants", Some(user), content)
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
