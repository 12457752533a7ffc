//! RBAC objects (rbac.authorization.k8s.io/v1): path-segment names, upstream's defaults (the
//! RBAC API group on role references and on User and Group subjects), policy rules that name
//! verbs and either resources or non-resource URLs, role references of a supported kind that
//! never change, and well-formed subjects.

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::labels::{LabelSelectorOptions, validate_label_selector};
use apimachinery::validation::{is_dns1123_subdomain, is_path_segment_name};
use serde_json::{Value, json};

use super::gofmt;
use super::util::{arr_at, at, child, default_str, each_mut, str_at};
use crate::strategy::{NameRule, Strategy};

const GROUP: &str = "rbac.authorization.k8s.io";

/// What kind of RBAC object a strategy serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RbacKind {
    Role,
    ClusterRole,
    RoleBinding,
    ClusterRoleBinding,
}

/// Roles, ClusterRoles, RoleBindings and ClusterRoleBindings.
pub struct RbacStrategy(pub RbacKind);

impl Strategy for RbacStrategy {
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn default(&self, obj: &mut Value) {
        if matches!(self.0, RbacKind::RoleBinding | RbacKind::ClusterRoleBinding) {
            if let Some(r) = child(obj, "roleRef") {
                default_str(r, "apiGroup", GROUP);
            }
            each_mut(obj, "subjects", |s| {
                let group = match str_at(s, "/kind") {
                    "User" | "Group" => GROUP,
                    _ => return,
                };
                default_str(s, "apiGroup", group);
            });
        }
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        match self.0 {
            RbacKind::Role | RbacKind::ClusterRole => {
                let namespaced = self.0 == RbacKind::Role;
                for (i, rule) in arr_at(obj, "/rules").iter().enumerate() {
                    policy_rule(&mut errs, rule, namespaced, &Path::new("rules").index(i));
                }
                if let Some(agg) = at(obj, "/aggregationRule") {
                    let ap = Path::new("aggregationRule").child("clusterRoleSelectors");
                    let selectors = arr_at(agg, "/clusterRoleSelectors");
                    if selectors.is_empty() {
                        errs.push(FieldError::required(
                            &ap,
                            "at least one clusterRoleSelector required if aggregationRule is non-nil",
                        ));
                    }
                    for (i, s) in selectors.iter().enumerate() {
                        errs.extend(validate_label_selector(
                            s,
                            LabelSelectorOptions::default(),
                            &ap.index(i),
                        ));
                    }
                }
            }
            RbacKind::RoleBinding | RbacKind::ClusterRoleBinding => {
                let namespaced = self.0 == RbacKind::RoleBinding;
                let rp = Path::new("roleRef");
                let group = str_at(obj, "/roleRef/apiGroup");
                if group != GROUP {
                    errs.push(FieldError::not_supported(
                        rp.child("apiGroup"),
                        json!(group),
                        &[GROUP],
                    ));
                }
                let kind = str_at(obj, "/roleRef/kind");
                let kinds: &[&str] = if namespaced {
                    &["Role", "ClusterRole"]
                } else {
                    &["ClusterRole"]
                };
                if !kinds.contains(&kind) {
                    errs.push(FieldError::not_supported(
                        rp.child("kind"),
                        json!(kind),
                        kinds,
                    ));
                }
                let name = str_at(obj, "/roleRef/name");
                if name.is_empty() {
                    errs.push(FieldError::required(rp.child("name"), ""));
                } else {
                    for m in is_path_segment_name(name) {
                        errs.push(FieldError::invalid(rp.child("name"), json!(name), m));
                    }
                }
                for (i, s) in arr_at(obj, "/subjects").iter().enumerate() {
                    subject(&mut errs, s, namespaced, &Path::new("subjects").index(i));
                }
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let mut errs = self.validate(new);
        if matches!(self.0, RbacKind::RoleBinding | RbacKind::ClusterRoleBinding)
            && new.get("roleRef") != old.get("roleRef")
        {
            let r = new.get("roleRef").unwrap_or(&Value::Null);
            errs.push(gofmt::invalid(
                &Path::new("roleRef"),
                format!(
                    "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
                    gofmt::quote(str_at(r, "/apiGroup")),
                    gofmt::quote(str_at(r, "/kind")),
                    gofmt::quote(str_at(r, "/name"))
                ),
                "cannot change roleRef",
            ));
        }
        errs
    }
}

/// Upstream `ValidatePolicyRule`.
fn policy_rule(errs: &mut ErrorList, rule: &Value, namespaced: bool, p: &Path) {
    if arr_at(rule, "/verbs").is_empty() {
        errs.push(FieldError::required(
            p.child("verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = arr_at(rule, "/nonResourceURLs");
    if !urls.is_empty() {
        let rendered = || gofmt::string_slice(rule.get("nonResourceURLs"));
        if namespaced {
            errs.push(gofmt::invalid(
                &p.child("nonResourceURLs"),
                rendered(),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        let resourceful = ["apiGroups", "resources", "resourceNames"]
            .iter()
            .any(|f| !arr_at(rule, &format!("/{f}")).is_empty());
        if resourceful {
            errs.push(gofmt::invalid(
                &p.child("nonResourceURLs"),
                rendered(),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return;
    }
    if arr_at(rule, "/apiGroups").is_empty() {
        errs.push(FieldError::required(
            p.child("apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if arr_at(rule, "/resources").is_empty() {
        errs.push(FieldError::required(
            p.child("resources"),
            "resource rules must supply at least one resource",
        ));
    }
}

/// Upstream `ValidateRoleBindingSubject`.
fn subject(errs: &mut ErrorList, s: &Value, namespaced: bool, p: &Path) {
    let name = str_at(s, "/name");
    if name.is_empty() {
        errs.push(FieldError::required(p.child("name"), ""));
    }
    let group = str_at(s, "/apiGroup");
    match str_at(s, "/kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                for m in is_dns1123_subdomain(name) {
                    errs.push(FieldError::invalid(p.child("name"), json!(name), m));
                }
            }
            if !group.is_empty() {
                errs.push(FieldError::not_supported(
                    p.child("apiGroup"),
                    json!(group),
                    &[""],
                ));
            }
            if !namespaced && str_at(s, "/namespace").is_empty() {
                errs.push(FieldError::required(p.child("namespace"), ""));
            }
        }
        "User" | "Group" => {
            if group != GROUP {
                errs.push(FieldError::not_supported(
                    p.child("apiGroup"),
                    json!(group),
                    &[GROUP],
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            p.child("kind"),
            json!(other),
            &["ServiceAccount", "User", "Group"],
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn rules_need_verbs_and_resources() {
        let role = json!({"rules": [{"apiGroups": [""], "resources": ["pods"]}, {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]});
        assert_eq!(
            messages(&RbacStrategy(RbacKind::Role).validate(&role)),
            vec![
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[1].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs",
            ]
        );
        assert!(
            messages(&RbacStrategy(RbacKind::ClusterRole).validate(
                &json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]})
            ))
            .is_empty()
        );
    }

    #[test]
    fn bindings_are_defaulted_and_keep_their_role_ref() {
        let s = RbacStrategy(RbacKind::RoleBinding);
        let mut rb = json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "sa"}]});
        s.default(&mut rb);
        assert_eq!(rb["roleRef"]["apiGroup"], json!(GROUP));
        assert_eq!(rb["subjects"][0]["apiGroup"], json!(GROUP));
        assert!(rb["subjects"][1].get("apiGroup").is_none());
        assert!(s.validate(&rb).is_empty());
        let mut new = rb.clone();
        new["roleRef"]["name"] = json!("other");
        assert_eq!(
            messages(&s.validate_update(&new, &rb)),
            vec![
                "roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", Name:\"other\"}: cannot change roleRef"
            ]
        );
    }

    #[test]
    fn cluster_role_bindings_need_cluster_roles_and_namespaced_service_accounts() {
        let crb = json!({"roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "sa"}]});
        assert_eq!(
            messages(&RbacStrategy(RbacKind::ClusterRoleBinding).validate(&crb)),
            vec![
                "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                "subjects[0].namespace: Required value",
            ]
        );
    }
}
