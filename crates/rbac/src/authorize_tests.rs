//! Authorizer tables over the bootstrap policy: the admin/edit/view/cluster-admin matrix,
//! names, subresources, URLs, service accounts, reasons, 403 wording and rules reviews.

use serde_json::json;

use super::*;
use crate::StaticPolicy;
use crate::testutil::{bootstrap_with, cluster_role, cluster_role_binding, role, role_binding};

fn users() -> StaticPolicy {
    bootstrap_with(vec![
        role_binding("dev", "view-alice", "ClusterRole", "view", &["user:alice"]),
        role_binding("dev", "edit-bob", "ClusterRole", "edit", &["user:bob"]),
        role_binding(
            "dev",
            "admin-carol",
            "ClusterRole",
            "admin",
            &["user:carol"],
        ),
        cluster_role_binding("root", "cluster-admin", &["user:dave"]),
    ])
}

fn user(name: &str) -> UserInfo {
    UserInfo::new(name, &["system:authenticated"])
}

/// `verb group resource[/sub] ns [name]` in one string, for compact tables.
fn req(spec: &str) -> Attributes {
    let parts: Vec<&str> = spec.split(' ').collect();
    let (resource, sub) = parts[2].split_once('/').unwrap_or((parts[2], ""));
    let group = if parts[1] == "core" { "" } else { parts[1] };
    let ns = if parts[3] == "-" { "" } else { parts[3] };
    let mut a = Attributes::resource(parts[0], group, resource, ns).subresource(sub);
    if let Some(name) = parts.get(4) {
        a = a.named(name);
    }
    a
}

fn check(policy: &StaticPolicy, table: &[(&str, &str, bool)]) {
    for (who, spec, want) in table {
        let got = authorize(&req(spec), &user(who), policy);
        assert_eq!(got.is_allowed(), *want, "{who}: {spec}: {got:?}");
    }
}

#[test]
fn view_edit_admin_and_cluster_admin_grant_what_upstream_grants() {
    check(
        &users(),
        &[
            ("alice", "get core pods dev p1", true),
            ("alice", "list core pods dev", true),
            ("alice", "watch apps deployments dev", true),
            ("alice", "get core secrets dev s1", false),
            ("alice", "list core secrets dev", false),
            ("alice", "create core pods dev", false),
            ("alice", "delete apps deployments dev web", false),
            ("alice", "get core pods/log dev p1", true),
            ("alice", "create core pods/exec dev p1", false),
            ("alice", "get core namespaces dev dev", true),
            ("alice", "list rbac.authorization.k8s.io roles dev", false),
            ("bob", "create apps deployments dev", true),
            ("bob", "update apps deployments/scale dev web", true),
            ("bob", "get core secrets dev s1", true),
            ("bob", "create core pods/exec dev p1", true),
            ("bob", "create coordination.k8s.io leases dev", true),
            ("bob", "create rbac.authorization.k8s.io roles dev", false),
            (
                "bob",
                "list rbac.authorization.k8s.io rolebindings dev",
                false,
            ),
            ("bob", "impersonate core serviceaccounts dev default", true),
            ("bob", "update core resourcequotas dev q", false),
            ("carol", "create rbac.authorization.k8s.io roles dev", true),
            (
                "carol",
                "delete rbac.authorization.k8s.io rolebindings dev rb",
                true,
            ),
            (
                "carol",
                "create authorization.k8s.io localsubjectaccessreviews dev",
                true,
            ),
            ("carol", "create apps deployments dev", true),
            ("carol", "get core pods dev p1", true),
            (
                "carol",
                "create rbac.authorization.k8s.io clusterroles -",
                false,
            ),
            ("dave", "delete core nodes - n1", true),
            ("dave", "create example.com widgets/status team-a w", true),
            (
                "dave",
                "escalate rbac.authorization.k8s.io clusterroles - x",
                true,
            ),
        ],
    );
}

#[test]
fn namespaced_bindings_do_not_leak_to_other_namespaces_or_cluster_scope() {
    check(
        &users(),
        &[
            ("alice", "get core pods prod p1", false),
            ("alice", "list core pods -", false),
            ("bob", "create apps deployments prod", false),
            (
                "carol",
                "create rbac.authorization.k8s.io roles kube-system",
                false,
            ),
            ("carol", "list core nodes -", false),
        ],
    );
}

#[test]
fn system_masters_is_allowed_everything_without_bindings() {
    let masters = UserInfo::new("root", &["system:masters"]);
    let empty = StaticPolicy::default();
    let d = authorize(
        &req("delete core namespaces - kube-system"),
        &masters,
        &empty,
    );
    assert_eq!(
        d,
        Decision::Allow {
            reason: String::new()
        }
    );
    let path = Attributes::non_resource("post", "/anything");
    assert!(authorize(&path, &masters, &empty).is_allowed());
}

#[test]
fn allow_reasons_name_the_binding_role_and_subject() {
    let p = users().with(vec![role_binding(
        "ci",
        "builder-edit",
        "ClusterRole",
        "edit",
        &["sa:builder"],
    )]);
    let reason = |who: &UserInfo, spec: &str| authorize(&req(spec), who, &p).reason().to_string();
    assert_eq!(
        reason(&user("alice"), "get core pods dev p1"),
        r#"RBAC: allowed by RoleBinding "view-alice/dev" of ClusterRole "view" to User "alice""#
    );
    assert_eq!(
        reason(&user("dave"), "list core nodes -"),
        r#"RBAC: allowed by ClusterRoleBinding "root" of ClusterRole "cluster-admin" to User "dave""#
    );
    assert_eq!(
        reason(
            &user("alice"),
            "create authorization.k8s.io selfsubjectaccessreviews -"
        ),
        r#"RBAC: allowed by ClusterRoleBinding "system:basic-user" of ClusterRole "system:basic-user" to Group "system:authenticated""#
    );
    assert_eq!(
        reason(
            &UserInfo::service_account("ci", "builder"),
            "create apps deployments ci"
        ),
        r#"RBAC: allowed by RoleBinding "builder-edit/ci" of ClusterRole "edit" to ServiceAccount "builder/ci""#
    );
    assert_eq!(reason(&user("alice"), "list core secrets dev"), "");
}

#[test]
fn resource_names_limit_named_requests_and_exclude_unnamed_ones() {
    let p = bootstrap_with(vec![
        role(
            "dev",
            "app-config",
            json!([{"verbs": ["get", "list", "watch", "update", "create"], "apiGroups": [""],
                    "resources": ["configmaps"], "resourceNames": ["app-config"]}]),
        ),
        role_binding("dev", "erin-config", "Role", "app-config", &["user:erin"]),
    ]);
    check(
        &p,
        &[
            ("erin", "get core configmaps dev app-config", true),
            ("erin", "update core configmaps dev app-config", true),
            ("erin", "watch core configmaps dev app-config", true),
            ("erin", "get core configmaps dev other", false),
            ("erin", "list core configmaps dev", false),
            ("erin", "watch core configmaps dev", false),
            ("erin", "create core configmaps dev", false),
            ("erin", "get core configmaps prod app-config", false),
        ],
    );
}

#[test]
fn star_subresource_rules_reach_every_scale_subresource_and_nothing_else() {
    let p = bootstrap_with(vec![
        cluster_role(
            "scaler",
            json!([{"verbs": ["get", "update"], "apiGroups": ["*"], "resources": ["*/scale"]}]),
        ),
        cluster_role_binding("frank-scales", "scaler", &["user:frank"]),
    ]);
    check(
        &p,
        &[
            ("frank", "update apps deployments/scale dev web", true),
            ("frank", "get apps statefulsets/scale prod db", true),
            ("frank", "get example.com widgets/scale dev w", true),
            ("frank", "update apps deployments dev web", false),
            ("frank", "update apps deployments/status dev web", false),
            ("frank", "patch apps deployments/scale dev web", false),
        ],
    );
}

#[test]
fn non_resource_urls_match_exactly_or_by_trailing_star() {
    let p = users();
    let get = |who: &UserInfo, path: &str| {
        authorize(&Attributes::non_resource("get", path), who, &p).is_allowed()
    };
    let alice = user("alice");
    assert!(get(&alice, "/api"));
    assert!(get(&alice, "/apis/apps/v1"));
    assert!(get(&alice, "/openapi/v3/apis/apps/v1"));
    assert!(get(&alice, "/version"));
    assert!(!get(&alice, "/metrics"));
    assert!(!get(&alice, "/healthz/etcd"));
    assert!(!authorize(&Attributes::non_resource("post", "/api"), &alice, &p).is_allowed());

    let anonymous = UserInfo::new("system:anonymous", &["system:unauthenticated"]);
    assert!(get(&anonymous, "/version"));
    assert!(get(&anonymous, "/readyz"));
    assert!(!get(&anonymous, "/apis"));

    let prometheus = UserInfo::new("prometheus", &["system:monitoring", "system:authenticated"]);
    assert!(get(&prometheus, "/metrics"));
    assert!(get(&prometheus, "/healthz/etcd"));
    assert!(get(&prometheus, "/livez/ping"));
    assert!(!get(&prometheus, "/metricsx"));
}

#[test]
fn service_account_subjects_and_groups_match_their_namespace_only() {
    let p = bootstrap_with(vec![
        role_binding("ci", "builder-edit", "ClusterRole", "edit", &["sa:builder"]),
        role_binding(
            "ci",
            "all-sas-view",
            "ClusterRole",
            "view",
            &["group:system:serviceaccounts:ci"],
        ),
        role_binding(
            "dev",
            "ci-deployer",
            "ClusterRole",
            "edit",
            &["sa:ci/deployer"],
        ),
    ]);
    let can = |sa: &UserInfo, spec: &str| authorize(&req(spec), sa, &p).is_allowed();
    let builder = UserInfo::service_account("ci", "builder");
    let other_ns = UserInfo::service_account("ci2", "builder");
    let default = UserInfo::service_account("ci", "default");
    let deployer = UserInfo::service_account("ci", "deployer");
    assert!(can(&builder, "create apps deployments ci"));
    assert!(!can(&other_ns, "create apps deployments ci"));
    assert!(!can(&other_ns, "list core pods ci"));
    assert!(can(&default, "list core pods ci"));
    assert!(!can(&default, "create core pods ci"));
    assert!(can(&deployer, "create apps deployments dev"));
    assert!(!can(&deployer, "create apps deployments ci"));
    // Every service account may read the issuer discovery documents.
    let jwks = Attributes::non_resource("get", "/openid/v1/jwks");
    assert!(authorize(&jwks, &default, &p).is_allowed());
    assert!(!authorize(&jwks, &user("alice"), &p).is_allowed());
}

#[test]
fn controller_service_accounts_get_their_upstream_powers() {
    let p = bootstrap_with(vec![]);
    let can = |sa: &str, spec: &str| {
        authorize(
            &req(spec),
            &UserInfo::service_account("kube-system", sa),
            &p,
        )
        .is_allowed()
    };
    assert!(can(
        "namespace-controller",
        "deletecollection example.com widgets team-a"
    ));
    assert!(can(
        "namespace-controller",
        "update core namespaces/finalize - team-a"
    ));
    assert!(can("replicaset-controller", "create core pods dev"));
    assert!(can("deployment-controller", "create apps replicasets dev"));
    assert!(!can("deployment-controller", "create core pods dev"));
    assert!(can(
        "generic-garbage-collector",
        "delete example.com widgets dev w"
    ));
    assert!(can("root-ca-cert-publisher", "create core configmaps dev"));
    assert!(can(
        "endpointslice-controller",
        "create discovery.k8s.io endpointslices dev"
    ));
    assert!(can("node-controller", "delete core pods dev p1"));
    assert!(!can(
        "service-account-controller",
        "delete core serviceaccounts dev default"
    ));
}

#[test]
fn missing_roles_are_reported_but_other_bindings_still_allow() {
    let p = bootstrap_with(vec![
        role_binding("dev", "dangling", "ClusterRole", "gone", &["user:alice"]),
        role_binding("dev", "dangling-role", "Role", "also-gone", &["user:alice"]),
    ]);
    let d = authorize(&req("list core secrets dev"), &user("alice"), &p);
    assert_eq!(
        d,
        Decision::NoOpinion {
            reason: r#"RBAC: [clusterrole.rbac.authorization.k8s.io "gone" not found, role.rbac.authorization.k8s.io "also-gone" not found]"#.into()
        }
    );
    let d = authorize(&Attributes::non_resource("get", "/api"), &user("alice"), &p);
    assert!(d.is_allowed());
}

#[test]
fn forbidden_messages_read_like_upstream() {
    let alice = user("alice");
    let table = [
        (
            req("list core pods default"),
            r#"pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "default""#,
        ),
        (
            req("get apps deployments/scale dev web"),
            r#"deployments.apps "web" is forbidden: User "alice" cannot get resource "deployments/scale" in API group "apps" in the namespace "dev""#,
        ),
        (
            req("list core nodes -"),
            r#"nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope"#,
        ),
        (
            req("get core pods dev p1"),
            r#"pods "p1" is forbidden: User "alice" cannot get resource "pods" in API group "" in the namespace "dev""#,
        ),
        (
            req("create rbac.authorization.k8s.io clusterroles -"),
            r#"clusterroles.rbac.authorization.k8s.io is forbidden: User "alice" cannot create resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope"#,
        ),
        (
            Attributes::non_resource("get", "/metrics"),
            r#"forbidden: User "alice" cannot get path "/metrics""#,
        ),
        (
            Attributes::non_resource("get", "/x<script>&"),
            r#"forbidden: User "alice" cannot get path "/x&lt;script&gt;&amp;""#,
        ),
    ];
    for (attrs, want) in table {
        assert_eq!(forbidden_message(&attrs, &alice), want);
    }
}

#[test]
fn forbidden_errors_carry_status_details_and_the_authorizer_reason() {
    let e = forbidden_error(
        &req("get core secrets dev s1"),
        &user("alice"),
        r#"RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found"#,
    );
    assert_eq!(e.code, 403);
    assert_eq!(e.reason, apimachinery::Reason::Forbidden);
    assert_eq!(
        e.message,
        r#"secrets "s1" is forbidden: User "alice" cannot get resource "secrets" in API group "" in the namespace "dev": RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found"#
    );
    let status = e.to_status();
    assert_eq!(status["details"]["kind"], "secrets");
    assert_eq!(status["details"]["name"], "s1");
    let path = forbidden_error(&Attributes::non_resource("get", "/logs"), &user("bob"), "");
    assert_eq!(path.code, 403);
    assert_eq!(
        path.message,
        r#"forbidden: User "bob" cannot get path "/logs""#
    );
}

#[test]
fn rules_review_lists_cluster_rules_then_namespace_rules() {
    let p = users();
    let review = rules_for(&user("alice"), "dev", &p);
    assert!(!review.incomplete);
    assert_eq!(review.evaluation_error, None);
    // system:basic-user comes first among resource rules (system:discovery has only URLs).
    assert_eq!(
        serde_json::to_value(&review.resource_rules[..2]).unwrap_or_default(),
        json!([
            {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
             "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
            {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
             "resources": ["selfsubjectreviews"]},
        ])
    );
    assert_eq!(
        review.non_resource_rules[1],
        NonResourceRule {
            verbs: vec!["get".into()],
            non_resource_urls: ["/healthz", "/livez", "/readyz", "/version", "/version/"]
                .map(String::from)
                .to_vec(),
        }
    );
    assert_eq!(review.non_resource_rules.len(), 2);
    // Then the view role granted in dev.
    assert!(
        review
            .resource_rules
            .iter()
            .any(|r| r.resources.contains(&"pods/log".to_string()))
    );
    assert!(
        !review
            .resource_rules
            .iter()
            .any(|r| r.resources.contains(&"secrets".to_string()))
    );
    // Nothing from dev leaks into another namespace's review.
    let prod = rules_for(&user("alice"), "prod", &p);
    assert_eq!(prod.resource_rules.len(), 2);
}

#[test]
fn rules_review_status_json_has_the_ssrr_shape() {
    let p = bootstrap_with(vec![
        role(
            "dev",
            "named",
            json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"],
                                     "resourceNames": ["tls"]}]),
        ),
        role_binding("dev", "named", "Role", "named", &["user:erin"]),
        role_binding("dev", "dangling", "Role", "gone", &["user:erin"]),
    ]);
    let status = rules_for(&UserInfo::new("erin", &[]), "dev", &p).to_status_json();
    assert_eq!(
        status,
        json!({
            "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"],
                               "resourceNames": ["tls"]}],
            "nonResourceRules": [],
            "incomplete": false,
            "evaluationError": r#"role.rbac.authorization.k8s.io "gone" not found"#,
        })
    );
}
