//! Bootstrap policy invariants: metadata, names, bindings, and that `admin`/`edit`/`view` are
//! created already aggregated.

use std::collections::BTreeSet;

use serde_json::Value;

use super::*;
use crate::{PolicyRule, aggregate, covers};

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

fn find<'a>(objects: &'a [Value], n: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| name(o) == n)
        .unwrap_or_else(|| panic!("{n} is missing"))
}

fn rules(o: &Value) -> Vec<PolicyRule> {
    PolicyRule::list_from_object(o)
}

#[test]
fn every_object_carries_the_bootstrap_label_and_autoupdate_annotation() {
    let all = bootstrap_objects();
    assert!(all.len() > 100, "{}", all.len());
    for o in &all {
        assert_eq!(o["apiVersion"], "rbac.authorization.k8s.io/v1", "{o}");
        assert_eq!(
            o["metadata"]["labels"]["kubernetes.io/bootstrapping"], "rbac-defaults",
            "{o}"
        );
        assert_eq!(
            o["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"], "true",
            "{o}"
        );
    }
}

#[test]
fn names_are_unique_per_kind_and_namespace() {
    let mut seen = BTreeSet::new();
    for o in bootstrap_objects() {
        let key = (
            o["kind"].to_string(),
            o["metadata"]["namespace"].to_string(),
            name(&o).to_string(),
        );
        assert!(seen.insert(key.clone()), "duplicate {key:?}");
    }
}

#[test]
fn the_roles_clients_and_controllers_expect_exist() {
    let roles = bootstrap_cluster_roles();
    for n in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:aggregate-to-admin",
        "system:aggregate-to-edit",
        "system:aggregate-to-view",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
        "system:monitoring",
        "system:node",
        "system:node-proxier",
        "system:node-bootstrapper",
        "system:kube-scheduler",
        "system:kube-controller-manager",
        "system:auth-delegator",
        "system:service-account-issuer-discovery",
        "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
        "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
        "system:certificates.k8s.io:kube-apiserver-client-approver",
        "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
        "system:certificates.k8s.io:kubelet-serving-approver",
        "system:certificates.k8s.io:legacy-unknown-approver",
        "system:controller:namespace-controller",
        "system:controller:generic-garbage-collector",
        "system:controller:deployment-controller",
        "system:controller:replicaset-controller",
        "system:controller:statefulset-controller",
        "system:controller:daemon-set-controller",
        "system:controller:job-controller",
        "system:controller:cronjob-controller",
        "system:controller:endpoint-controller",
        "system:controller:endpointslice-controller",
        "system:controller:service-account-controller",
        "system:controller:root-ca-cert-publisher",
        "system:controller:node-controller",
        "system:controller:clusterrole-aggregation-controller",
    ] {
        let role = find(&roles, n);
        assert_eq!(role["kind"], "ClusterRole");
        assert!(!rules(role).is_empty(), "{n} has no rules");
    }
}

#[test]
fn default_bindings_grant_the_documented_groups() {
    let bindings = bootstrap_cluster_role_bindings();
    let subjects = |n: &str| -> Vec<String> {
        let b = find(&bindings, n);
        assert_eq!(b["roleRef"]["kind"], "ClusterRole");
        assert_eq!(b["roleRef"]["name"], n);
        b["subjects"]
            .as_array()
            .map(|s| {
                s.iter()
                    .map(|s| s["name"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(subjects("cluster-admin"), ["system:masters"]);
    assert_eq!(subjects("system:discovery"), ["system:authenticated"]);
    assert_eq!(subjects("system:basic-user"), ["system:authenticated"]);
    assert_eq!(
        subjects("system:public-info-viewer"),
        ["system:authenticated", "system:unauthenticated"]
    );
    assert_eq!(subjects("system:monitoring"), ["system:monitoring"]);
    assert_eq!(
        subjects("system:service-account-issuer-discovery"),
        ["system:serviceaccounts"]
    );
    assert!(subjects("system:node").is_empty());
    let masters = &find(&bindings, "cluster-admin")["subjects"][0];
    assert_eq!(masters["kind"], "Group");
    assert_eq!(masters["apiGroup"], "rbac.authorization.k8s.io");
}

#[test]
fn every_controller_role_is_bound_to_its_kube_system_service_account() {
    let bindings = bootstrap_cluster_role_bindings();
    let controllers: Vec<Value> = bootstrap_cluster_roles()
        .into_iter()
        .filter(|r| name(r).starts_with("system:controller:"))
        .collect();
    assert!(controllers.len() >= 30, "{}", controllers.len());
    for role in &controllers {
        let b = find(&bindings, name(role));
        let sa = name(role).trim_start_matches("system:controller:");
        assert_eq!(
            b["subjects"],
            serde_json::json!([{"kind": "ServiceAccount", "name": sa, "namespace": "kube-system"}])
        );
    }
}

#[test]
fn aggregated_roles_are_created_with_their_rules_and_recompute_to_no_change() {
    let roles = bootstrap_cluster_roles();
    for n in ["admin", "edit", "view"] {
        let role = find(&roles, n);
        assert!(!rules(role).is_empty(), "{n} is empty");
        assert_eq!(aggregate(role, &roles), None, "{n} would change");
    }
    // view is exactly system:aggregate-to-view; edit starts with system:aggregate-to-edit and
    // then view; admin starts with edit and ends with system:aggregate-to-admin.
    let view = rules(find(&roles, "view"));
    assert_eq!(view, rules(find(&roles, "system:aggregate-to-view")));
    let edit = rules(find(&roles, "edit"));
    let to_edit = rules(find(&roles, "system:aggregate-to-edit"));
    assert_eq!(edit[..to_edit.len()], to_edit[..]);
    assert_eq!(edit[to_edit.len()..], view[..]);
    let admin = rules(find(&roles, "admin"));
    assert_eq!(admin[..edit.len()], edit[..]);
    assert_eq!(
        admin[edit.len()..],
        rules(find(&roles, "system:aggregate-to-admin"))[..]
    );
}

#[test]
fn admin_covers_edit_covers_view_but_not_the_other_way() {
    let roles = bootstrap_cluster_roles();
    let (admin, edit, view) = (
        rules(find(&roles, "admin")),
        rules(find(&roles, "edit")),
        rules(find(&roles, "view")),
    );
    assert!(covers(&admin, &edit).0);
    assert!(covers(&edit, &view).0);
    assert!(!covers(&view, &edit).0);
    assert!(!covers(&edit, &admin).0);
    assert!(covers(&rules(find(&roles, "cluster-admin")), &admin).0);
}

#[test]
fn every_rule_lists_sorted_values_and_reads_back_unchanged() {
    for o in bootstrap_objects() {
        for (i, rule_json) in o["rules"].as_array().into_iter().flatten().enumerate() {
            let rule = PolicyRule::from_json(rule_json);
            assert_eq!(&rule.to_json(), rule_json, "{} rule {i}", name(&o));
            for list in [
                &rule.verbs,
                &rule.api_groups,
                &rule.resources,
                &rule.resource_names,
            ] {
                assert!(
                    list.windows(2).all(|w| w[0] <= w[1]),
                    "{} rule {i}",
                    name(&o)
                );
            }
            assert!(!rule.verbs.is_empty());
            assert!(rule.resources.is_empty() != rule.non_resource_urls.is_empty());
        }
    }
}

#[test]
fn namespaced_objects_live_in_kube_system_and_kube_public() {
    let roles = bootstrap_roles();
    let bindings = bootstrap_role_bindings();
    for o in roles.iter().chain(&bindings) {
        let ns = o["metadata"]["namespace"].as_str().unwrap_or_default();
        assert!(ns == "kube-system" || ns == "kube-public", "{o}");
    }
    for b in &bindings {
        let ns = b["metadata"]["namespace"].as_str();
        assert_eq!(b["roleRef"]["kind"], "Role");
        assert!(
            roles
                .iter()
                .any(|r| name(r) == b["roleRef"]["name"]
                    && r["metadata"]["namespace"].as_str() == ns),
            "{b}"
        );
    }
    let reader = find(&roles, "extension-apiserver-authentication-reader");
    assert_eq!(
        rules(reader)[0].resource_names,
        ["extension-apiserver-authentication"]
    );
}
