//! `covers` cases in the spirit of upstream's comparator tests, and the role/binding write
//! checks with their exact messages.

use serde_json::json;

use super::*;
use crate::testutil::{bootstrap_with, cluster_role_binding, role, role_binding};
use crate::{StaticPolicy, authorize};

fn r(groups: &[&str], verbs: &[&str], resources: &[&str]) -> PolicyRule {
    rule(verbs).groups(groups).resources(resources).build()
}

fn named(groups: &[&str], verbs: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
    rule(verbs)
        .groups(groups)
        .resources(resources)
        .names(names)
        .build()
}

fn u(verbs: &[&str], urls: &[&str]) -> PolicyRule {
    rule(verbs).urls(urls).build()
}

fn assert_covers(owner: &[PolicyRule], requested: &[PolicyRule], uncovered: &[PolicyRule]) {
    let (ok, missing) = covers(owner, requested);
    assert_eq!(
        missing, uncovered,
        "owner {owner:?} requested {requested:?}"
    );
    assert_eq!(ok, uncovered.is_empty());
}

#[test]
fn covers_exact_and_split_rules() {
    assert_covers(
        &[r(&["g"], &["get"], &["builds"])],
        &[r(&["g"], &["get"], &["builds"])],
        &[],
    );
    let owner = [
        r(&["g1", "g2"], &["delete"], &["deployments"]),
        r(&["g1", "g2"], &["delete"], &["builds"]),
        r(&["g1"], &["update"], &["builds", "deployments"]),
        r(&["g2"], &["update"], &["builds", "deployments"]),
    ];
    let requested = [r(
        &["g1", "g2"],
        &["delete", "update"],
        &["builds", "deployments"],
    )];
    assert_covers(&owner, &requested, &[]);
    assert_covers(&requested, &owner, &[]);
}

#[test]
fn covers_reports_each_missing_atom() {
    let owner = [
        r(&["g"], &["delete", "update"], &["builds", "deployments"]),
        r(&["g"], &["delete"], &["pods"]),
    ];
    let requested = [r(
        &["g"],
        &["delete", "update"],
        &["builds", "deployments", "pods"],
    )];
    assert_covers(&owner, &requested, &[r(&["g"], &["update"], &["pods"])]);
}

#[test]
fn stars_cover_enumerations_but_enumerations_never_cover_stars() {
    assert_covers(
        &[r(&["*"], &["get"], &["roles"])],
        &[r(&["a", "b"], &["get"], &["roles"])],
        &[],
    );
    assert_covers(
        &[r(&["a"], &["get"], &["roles"])],
        &[r(&["*"], &["get"], &["roles"])],
        &[r(&["*"], &["get"], &["roles"])],
    );
    assert_covers(
        &[r(&["g"], &["*"], &["roles"])],
        &[r(&["g"], &["watch", "list"], &["roles"])],
        &[],
    );
    assert_covers(
        &[r(
            &["g"],
            &["get", "list", "watch", "create", "update", "delete", "exec"],
            &["roles"],
        )],
        &[r(&["g"], &["*"], &["roles"])],
        &[r(&["g"], &["*"], &["roles"])],
    );
    assert_covers(
        &[r(&["g"], &["get"], &["*"])],
        &[r(&["g"], &["get"], &["widgets"])],
        &[],
    );
    assert_covers(
        &[r(&["g"], &["get"], &["roles", "widgets"])],
        &[r(&["g"], &["get"], &["*"])],
        &[r(&["g"], &["get"], &["*"])],
    );
    assert_covers(
        &[r(&["*"], &["*"], &["*"])],
        &[r(&["*"], &["*"], &["*"])],
        &[],
    );
}

#[test]
fn star_subresources_cover_that_subresource_of_every_resource() {
    let owner = [r(&["*"], &["get"], &["*/scale"])];
    assert_covers(
        &owner,
        &[r(&["apps"], &["get"], &["deployments/scale"])],
        &[],
    );
    assert_covers(
        &owner,
        &[r(
            &["apps"],
            &["get"],
            &["deployments", "deployments/status"],
        )],
        &[
            r(&["apps"], &["get"], &["deployments"]),
            r(&["apps"], &["get"], &["deployments/status"]),
        ],
    );
    assert_covers(
        &[r(&[""], &["get"], &["pods"])],
        &[r(&[""], &["get"], &["pods/log"])],
        &[r(&[""], &["get"], &["pods/log"])],
    );
}

#[test]
fn resource_names_narrow_and_unnamed_owners_cover_names() {
    assert_covers(
        &[r(&[""], &["get"], &["pods"])],
        &[named(&[""], &["get"], &["pods"], &["foo", "bar"])],
        &[],
    );
    assert_covers(
        &[named(&[""], &["get"], &["pods"], &["foo", "bar"])],
        &[r(&[""], &["get"], &["pods"])],
        &[r(&[""], &["get"], &["pods"])],
    );
    assert_covers(
        &[named(&[""], &["get"], &["pods"], &["foo"])],
        &[named(&[""], &["get"], &["pods"], &["foo", "bar"])],
        &[named(&[""], &["get"], &["pods"], &["bar"])],
    );
}

#[test]
fn non_resource_urls_cover_by_exact_star_and_prefix() {
    assert_covers(&[u(&["*"], &["/apis"])], &[u(&["*"], &["/apis"])], &[]);
    assert_covers(
        &[u(&["*"], &["*"])],
        &[u(&["*"], &["/apis", "/apis/v1", "/"])],
        &[],
    );
    assert_covers(
        &[u(&["*"], &["/apis/*"])],
        &[u(&["get"], &["/apis", "/apis/v1"])],
        &[u(&["get"], &["/apis"])],
    );
    assert_covers(
        &[u(&["*"], &["/apis/*"])],
        &[u(&["get"], &["/apis/v1/foo", "/apis/v1"])],
        &[],
    );
    assert_covers(
        &[u(&["get"], &["/api/*/*"])],
        &[u(&["get"], &["/api/v1"])],
        &[u(&["get"], &["/api/v1"])],
    );
}

#[test]
fn rules_mixing_resources_and_urls_break_into_both_kinds_of_atoms() {
    let mixed = PolicyRule {
        non_resource_urls: vec!["/apis".into()],
        ..r(&["g"], &["get"], &["builds"])
    };
    assert_covers(
        std::slice::from_ref(&mixed),
        std::slice::from_ref(&mixed),
        &[],
    );
    assert_covers(
        &[r(&["g"], &["get"], &["builds"])],
        &[mixed],
        &[u(&["get"], &["/apis"])],
    );
}

#[test]
fn compaction_merges_verbs_of_single_group_resource_atoms() {
    let atoms = [
        r(&[""], &["get"], &["secrets"]),
        named(&[""], &["get"], &["configmaps"], &["x"]),
        r(&[""], &["list"], &["secrets"]),
        r(&["apps"], &["get"], &["secrets"]),
    ];
    assert_eq!(
        compact_rules(&atoms),
        vec![
            named(&[""], &["get"], &["configmaps"], &["x"]),
            PolicyRule {
                verbs: vec!["get".into(), "list".into()],
                ..r(&[""], &["get"], &["secrets"])
            },
            r(&["apps"], &["get"], &["secrets"]),
        ]
    );
}

fn team() -> StaticPolicy {
    bootstrap_with(vec![
        role_binding("dev", "view-alice", "ClusterRole", "view", &["user:alice"]),
        role_binding("dev", "edit-bob", "ClusterRole", "edit", &["user:bob"]),
        cluster_role_binding("root", "cluster-admin", &["user:dave"]),
        cluster_role_binding("editors", "edit", &["user:ed"]),
    ])
}

fn user(name: &str) -> UserInfo {
    UserInfo::new(name, &["system:authenticated"])
}

#[test]
fn granting_unheld_permissions_is_refused_with_upstreams_message() {
    let p = team();
    let secrets = [r(&[""], &["get"], &["secrets"])];
    let err = check_role_escalation(&user("alice"), "dev", &secrets, &p, false).unwrap_err();
    assert_eq!(
        err,
        EscalationError::Forbidden(
            "user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC \
             permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\"]}"
                .into()
        )
    );
    let api = err.to_api_error("roles", "reader");
    assert_eq!(api.code, 403);
    assert!(api.message.starts_with(
        "roles.rbac.authorization.k8s.io \"reader\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"])"
    ));
}

#[test]
fn missing_permissions_are_compacted_and_sorted() {
    let p = team();
    let wanted = [
        r(
            &[""],
            &["get", "list", "delete"],
            &["secrets", "configmaps"],
        ),
        u(&["get"], &["/metrics"]),
    ];
    let alice = UserInfo::new("alice", &["dev", "system:authenticated"]);
    let Err(EscalationError::Forbidden(msg)) =
        check_role_escalation(&alice, "dev", &wanted, &p, false)
    else {
        panic!("expected a refusal");
    };
    assert_eq!(
        msg,
        "user \"alice\" (groups=[\"dev\" \"system:authenticated\"]) is attempting to grant RBAC \
         permissions not currently held:\n\
         {APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\"]}\n\
         {APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"delete\" \"get\" \"list\"]}\n\
         {NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}"
    );
}

#[test]
fn held_permissions_escalate_verb_and_masters_pass() {
    let p = team();
    let pods = [r(&[""], &["get", "list"], &["pods"])];
    assert_eq!(
        check_role_escalation(&user("alice"), "dev", &pods, &p, false),
        Ok(())
    );
    // Not held in another namespace.
    assert!(check_role_escalation(&user("alice"), "prod", &pods, &p, false).is_err());
    let all = [r(&["*"], &["*"], &["*"])];
    assert_eq!(
        check_role_escalation(&user("alice"), "dev", &all, &p, true),
        Ok(())
    );
    let masters = UserInfo::new("m", &["system:masters"]);
    assert_eq!(
        check_role_escalation(&masters, "dev", &all, &StaticPolicy::default(), false),
        Ok(())
    );
    assert_eq!(
        check_role_escalation(&user("dave"), "", &all, &p, false),
        Ok(())
    );
}

#[test]
fn the_escalate_verb_is_checked_through_the_authorizer() {
    let p = team().with(vec![
        role(
            "dev",
            "escalator",
            json!([{"verbs": ["escalate"], "apiGroups": ["rbac.authorization.k8s.io"],
                                        "resources": ["roles"]}]),
        ),
        role_binding("dev", "escalator", "Role", "escalator", &["user:alice"]),
    ]);
    let attrs = escalate_attributes("roles", "dev", "reader");
    assert!(authorize(&attrs, &user("alice"), &p).is_allowed());
    assert!(
        !authorize(
            &escalate_attributes("roles", "prod", "reader"),
            &user("alice"),
            &p
        )
        .is_allowed()
    );
}

#[test]
fn aggregation_rules_need_full_authority() {
    let p = team();
    let new = json!({"metadata": {"name": "agg"}, "rules": [],
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}});
    let err = check_cluster_role_escalation(&user("ed"), &new, None, &p, false).unwrap_err();
    assert_eq!(
        err,
        EscalationError::Forbidden(
            "must have cluster-admin privileges to use the aggregationRule".into()
        )
    );
    // Removing an aggregation rule needs it too.
    let plain = json!({"metadata": {"name": "agg"}, "rules": []});
    assert!(check_cluster_role_escalation(&user("ed"), &plain, Some(&new), &p, false).is_err());
    assert_eq!(
        check_cluster_role_escalation(&user("ed"), &plain, None, &p, false),
        Ok(())
    );
    assert_eq!(
        check_cluster_role_escalation(&user("dave"), &new, None, &p, false),
        Ok(())
    );
}

fn cluster_ref(name: &str) -> RoleRef {
    RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: "ClusterRole".into(),
        name: name.into(),
    }
}

#[test]
fn binding_a_role_needs_its_permissions_or_the_bind_verb() {
    let p = team();
    assert_eq!(
        check_binding(&user("bob"), "dev", &cluster_ref("view"), &p, false),
        Ok(())
    );
    let Err(EscalationError::Forbidden(msg)) =
        check_binding(&user("alice"), "dev", &cluster_ref("edit"), &p, false)
    else {
        panic!("alice cannot bind edit");
    };
    assert!(msg.starts_with("user \"alice\" (groups=[\"system:authenticated\"]) is attempting"));
    assert!(msg.contains(
        "\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\" \"watch\" \"create\" \
         \"delete\" \"deletecollection\" \"patch\" \"update\"]}"
    ));
    assert_eq!(
        check_binding(&user("alice"), "dev", &cluster_ref("edit"), &p, true),
        Ok(())
    );
}

#[test]
fn the_bind_verb_can_be_limited_to_named_roles() {
    let p = team().with(vec![
        role(
            "dev",
            "binder",
            json!([{"verbs": ["bind"], "apiGroups": ["rbac.authorization.k8s.io"],
                                     "resources": ["clusterroles"], "resourceNames": ["admin"]}]),
        ),
        role_binding("dev", "binder", "Role", "binder", &["user:alice"]),
    ]);
    let may_bind = |name: &str, ns: &str| {
        let attrs = bind_attributes(&cluster_ref(name), ns).expect("cluster role ref");
        authorize(&attrs, &user("alice"), &p).is_allowed()
    };
    assert!(may_bind("admin", "dev"));
    assert!(!may_bind("edit", "dev"));
    assert!(!may_bind("admin", "prod"));
    let bad = RoleRef {
        kind: "Thing".into(),
        ..cluster_ref("x")
    };
    assert_eq!(bind_attributes(&bad, "dev"), None);
}

#[test]
fn binding_a_missing_role_is_not_found() {
    let p = team();
    let err = check_binding(&user("alice"), "dev", &cluster_ref("nope"), &p, false).unwrap_err();
    assert_eq!(
        err,
        EscalationError::RoleNotFound(
            r#"clusterroles.rbac.authorization.k8s.io "nope" not found"#.into()
        )
    );
    assert_eq!(err.to_api_error("rolebindings", "rb").code, 404);
    let role_ref = RoleRef {
        kind: "Role".into(),
        ..cluster_ref("local")
    };
    let err = check_binding(&user("alice"), "dev", &role_ref, &p, false).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"roles.rbac.authorization.k8s.io "local" not found"#
    );
}

#[test]
fn resolution_errors_are_appended_to_escalation_messages() {
    let p = team().with(vec![role_binding(
        "dev",
        "dangling",
        "ClusterRole",
        "gone",
        &["user:alice"],
    )]);
    let Err(EscalationError::Forbidden(msg)) = check_role_escalation(
        &user("alice"),
        "dev",
        &[r(&[""], &["get"], &["secrets"])],
        &p,
        false,
    ) else {
        panic!("expected a refusal");
    };
    assert!(
        msg.ends_with(
            "Verbs:[\"get\"]}; resolution errors: [clusterroles.rbac.authorization.k8s.io \"gone\" not found]"
        ),
        "{msg}"
    );
}

#[test]
fn updates_touching_only_gc_fields_are_recognised() {
    let old = json!({"metadata": {"name": "rb", "finalizers": ["x"]}, "roleRef": {"name": "edit"}});
    let gc = json!({"metadata": {"name": "rb", "ownerReferences": [{"uid": "1"}]},
                    "roleRef": {"name": "edit"}});
    assert!(is_only_mutating_gc_fields(&gc, &old));
    let real = json!({"metadata": {"name": "rb"}, "roleRef": {"name": "admin"}});
    assert!(!is_only_mutating_gc_fields(&real, &old));
}
