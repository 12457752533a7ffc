//! Where RBAC objects come from, and which of their rules apply to a user.
//!
//! [`PolicySource`] is the seam to the API server: it hands out a logical cluster's
//! ClusterRoleBindings, the RoleBindings of one namespace and Roles/ClusterRoles by name, as the
//! `rbac.authorization.k8s.io/v1` JSON objects its cache already holds (borrowed, not copied).
//! [`visit_rules_for`] walks every rule granted to a user in a namespace the way upstream's
//! `DefaultRuleResolver.VisitRulesFor` does: ClusterRoleBindings first, then the namespace's
//! RoleBindings, each binding's first matching subject naming the source of its rules.

use std::ops::ControlFlow;

use serde_json::Value;

use crate::request::{SERVICE_ACCOUNT_PREFIX, UserInfo};
use apimachinery::gofmt::quote;

/// The RBAC objects of one logical cluster.
///
/// Implementations return borrowed JSON objects; an implementation over a locked cache holds
/// the read guard for its own lifetime and lends out of it.
pub trait PolicySource {
    /// Every ClusterRoleBinding.
    fn cluster_role_bindings(&self) -> Vec<&Value>;
    /// The RoleBindings of `namespace`.
    fn role_bindings(&self, namespace: &str) -> Vec<&Value>;
    /// The Role `namespace/name`, if it exists.
    fn role(&self, namespace: &str, name: &str) -> Option<&Value>;
    /// The ClusterRole `name`, if it exists.
    fn cluster_role(&self, name: &str) -> Option<&Value>;
}

/// A [`PolicySource`] over a plain list of objects, sorted out by `kind`. For tests, for the
/// bootstrap policy, and for callers whose objects are already in a `Vec`.
#[derive(Debug, Clone, Default)]
pub struct StaticPolicy {
    roles: Vec<Value>,
    role_bindings: Vec<Value>,
    cluster_roles: Vec<Value>,
    cluster_role_bindings: Vec<Value>,
}

impl StaticPolicy {
    /// Sorts `objects` by kind; objects of other kinds are dropped.
    pub fn new(objects: impl IntoIterator<Item = Value>) -> StaticPolicy {
        let mut p = StaticPolicy::default();
        for o in objects {
            match o.get("kind").and_then(Value::as_str) {
                Some("Role") => p.roles.push(o),
                Some("RoleBinding") => p.role_bindings.push(o),
                Some("ClusterRole") => p.cluster_roles.push(o),
                Some("ClusterRoleBinding") => p.cluster_role_bindings.push(o),
                _ => {}
            }
        }
        p
    }

    /// Adds more objects (e.g. a test's bindings on top of the bootstrap policy).
    pub fn with(mut self, objects: impl IntoIterator<Item = Value>) -> StaticPolicy {
        let more = StaticPolicy::new(objects);
        self.roles.extend(more.roles);
        self.role_bindings.extend(more.role_bindings);
        self.cluster_roles.extend(more.cluster_roles);
        self.cluster_role_bindings
            .extend(more.cluster_role_bindings);
        self
    }

    pub fn cluster_roles(&self) -> &[Value] {
        &self.cluster_roles
    }
}

fn meta<'a>(o: &'a Value, field: &str) -> &'a str {
    o.pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl PolicySource for StaticPolicy {
    fn cluster_role_bindings(&self) -> Vec<&Value> {
        self.cluster_role_bindings.iter().collect()
    }

    fn role_bindings(&self, namespace: &str) -> Vec<&Value> {
        self.role_bindings
            .iter()
            .filter(|b| meta(b, "namespace") == namespace)
            .collect()
    }

    fn role(&self, namespace: &str, name: &str) -> Option<&Value> {
        self.roles
            .iter()
            .find(|r| meta(r, "namespace") == namespace && meta(r, "name") == name)
    }

    fn cluster_role(&self, name: &str) -> Option<&Value> {
        self.cluster_roles.iter().find(|r| meta(r, "name") == name)
    }
}

/// A binding's `roleRef`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RoleRef {
    pub api_group: String,
    /// `Role` or `ClusterRole`.
    pub kind: String,
    pub name: String,
}

impl RoleRef {
    /// Reads a `roleRef` object; missing fields read as empty.
    pub fn from_json(v: &Value) -> RoleRef {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        RoleRef {
            api_group: s("apiGroup"),
            kind: s("kind"),
            name: s("name"),
        }
    }

    /// The `roleRef` of a RoleBinding or ClusterRoleBinding object.
    pub fn of_binding(binding: &Value) -> RoleRef {
        binding
            .get("roleRef")
            .map(RoleRef::from_json)
            .unwrap_or_default()
    }
}

/// Why a binding's role could not be read. Rules are additive, so these never deny anything by
/// themselves; they are reported in the authorizer's reason and in escalation messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The referenced Role or ClusterRole does not exist.
    #[error("{} {} not found", qualified(.kind, false), quote(.name))]
    NotFound { kind: String, name: String },
    /// `roleRef.kind` is neither `Role` nor `ClusterRole`.
    #[error("unsupported role reference kind: {}", quote(.0))]
    UnsupportedKind(String),
}

impl ResolveError {
    /// The message as the registry reports it (plural resource, e.g. `clusterroles.rbac...`),
    /// which is what binding and role writes see; `Display` gives the authorizer's wording
    /// (its informer listers use the singular `clusterrole.rbac...`).
    pub fn registry_message(&self) -> String {
        match self {
            ResolveError::NotFound { kind, name } => {
                format!("{} {} not found", qualified(kind, true), quote(name))
            }
            other => other.to_string(),
        }
    }
}

fn qualified(kind: &str, plural: bool) -> String {
    let resource = if kind == "Role" {
        "role"
    } else {
        "clusterrole"
    };
    let s = if plural { "s" } else { "" };
    format!("{resource}{s}.rbac.authorization.k8s.io")
}

/// The rules a role reference grants, read straight from the role object. A Role is looked up
/// in the binding's namespace (a ClusterRoleBinding has none, so it cannot grant a Role).
pub(crate) fn role_rules<'p>(
    policy: &'p dyn PolicySource,
    role_ref: &RoleRef,
    binding_namespace: &str,
) -> Result<&'p [Value], ResolveError> {
    let not_found = || ResolveError::NotFound {
        kind: role_ref.kind.clone(),
        name: role_ref.name.clone(),
    };
    let role = match role_ref.kind.as_str() {
        "Role" if binding_namespace.is_empty() => return Err(not_found()),
        "Role" => policy.role(binding_namespace, &role_ref.name),
        "ClusterRole" => policy.cluster_role(&role_ref.name),
        other => return Err(ResolveError::UnsupportedKind(other.to_string())),
    };
    let role = role.ok_or_else(not_found)?;
    Ok(role
        .get("rules")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]))
}

/// Whether a binding subject names the user. A ServiceAccount subject without a namespace
/// means the binding's own namespace (and so never matches from a ClusterRoleBinding).
fn applies_to_user(user: &UserInfo, subject: &Value, binding_namespace: &str) -> bool {
    let s = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or("");
    match s("kind") {
        "User" => user.name == s("name"),
        "Group" => user.in_group(s("name")),
        "ServiceAccount" => {
            let ns = match s("namespace") {
                "" => binding_namespace,
                ns => ns,
            };
            !ns.is_empty()
                && user
                    .name
                    .strip_prefix(SERVICE_ACCOUNT_PREFIX)
                    .and_then(|rest| rest.strip_prefix(ns))
                    .and_then(|rest| rest.strip_prefix(':'))
                    == Some(s("name"))
        }
        _ => false,
    }
}

/// The binding and subject a rule was granted through; [`RuleSource::describe`] words it as
/// upstream's allow reasons do.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RuleSource<'a> {
    pub binding: &'a Value,
    pub subject: &'a Value,
    /// Empty for a ClusterRoleBinding.
    pub namespace: &'a str,
}

impl RuleSource<'_> {
    /// `ClusterRoleBinding "x" of ClusterRole "y" to Group "z"`, or
    /// `RoleBinding "x/ns" of Role "y" to ServiceAccount "sa/ns"`.
    pub fn describe(&self) -> String {
        let name = meta(self.binding, "name");
        let role_ref = RoleRef::of_binding(self.binding);
        let s = |k: &str| self.subject.get(k).and_then(Value::as_str).unwrap_or("");
        let subject = match s("kind") {
            "ServiceAccount" => {
                let ns = match s("namespace") {
                    "" => self.namespace,
                    ns => ns,
                };
                format!("ServiceAccount {}", quote(&format!("{}/{ns}", s("name"))))
            }
            kind => format!("{kind} {}", quote(s("name"))),
        };
        let (kind, binding) = if self.namespace.is_empty() {
            ("ClusterRoleBinding", quote(name))
        } else {
            ("RoleBinding", quote(&format!("{name}/{}", self.namespace)))
        };
        format!(
            "{kind} {binding} of {} {} to {subject}",
            role_ref.kind,
            quote(&role_ref.name)
        )
    }
}

/// One step of [`visit_rules_for`].
pub(crate) enum Visit<'a> {
    /// A rule (still JSON) granted to the user through `source`.
    Rule(RuleSource<'a>, &'a Value),
    /// A binding applies to the user but its role could not be read.
    Error(ResolveError),
}

/// Calls `visit` with every rule that applies to `user` in `namespace` (cluster-wide rules
/// only when `namespace` is empty), and with every resolution error, until it breaks.
pub(crate) fn visit_rules_for<'p>(
    user: &UserInfo,
    namespace: &'p str,
    policy: &'p dyn PolicySource,
    visit: &mut dyn FnMut(Visit<'p>) -> ControlFlow<()>,
) {
    let scopes: [(&str, Vec<&'p Value>); 2] = [
        ("", policy.cluster_role_bindings()),
        (
            namespace,
            if namespace.is_empty() {
                Vec::new()
            } else {
                policy.role_bindings(namespace)
            },
        ),
    ];
    for (binding_ns, bindings) in scopes {
        for binding in bindings {
            let Some(subject) =
                binding
                    .get("subjects")
                    .and_then(Value::as_array)
                    .and_then(|subjects| {
                        subjects
                            .iter()
                            .find(|s| applies_to_user(user, s, binding_ns))
                    })
            else {
                continue;
            };
            let rules = match role_rules(policy, &RoleRef::of_binding(binding), binding_ns) {
                Ok(rules) => rules,
                Err(e) => {
                    if visit(Visit::Error(e)).is_break() {
                        return;
                    }
                    continue;
                }
            };
            let source = RuleSource {
                binding,
                subject,
                namespace: binding_ns,
            };
            for rule in rules {
                if visit(Visit::Rule(source, rule)).is_break() {
                    return;
                }
            }
        }
    }
}

/// Upstream `utilerrors.NewAggregate(errs).Error()`: one message as is, several (after
/// dropping repeats) as `[a, b]`.
pub(crate) fn aggregate_messages(messages: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for m in messages {
        if !seen.contains(&m.as_str()) {
            seen.push(m);
        }
    }
    match seen.as_slice() {
        [] => String::new(),
        [one] => one.to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn service_account_subjects_default_to_the_binding_namespace() {
        let sa = UserInfo::service_account("ns1", "builder");
        let subject = json!({"kind": "ServiceAccount", "name": "builder"});
        assert!(applies_to_user(&sa, &subject, "ns1"));
        assert!(!applies_to_user(&sa, &subject, "ns2"));
        assert!(!applies_to_user(&sa, &subject, ""));
        let qualified = json!({"kind": "ServiceAccount", "name": "builder", "namespace": "ns1"});
        assert!(applies_to_user(&sa, &qualified, ""));
        let other = UserInfo::service_account("ns1", "builder2");
        assert!(!applies_to_user(&other, &qualified, ""));
    }

    #[test]
    fn users_and_groups_match_by_name_and_unknown_kinds_never_match() {
        let u = UserInfo::new("alice", &["dev"]);
        assert!(applies_to_user(
            &u,
            &json!({"kind": "User", "name": "alice"}),
            ""
        ));
        assert!(applies_to_user(
            &u,
            &json!({"kind": "Group", "name": "dev"}),
            ""
        ));
        assert!(!applies_to_user(
            &u,
            &json!({"kind": "Group", "name": "alice"}),
            ""
        ));
        assert!(!applies_to_user(
            &u,
            &json!({"kind": "Robot", "name": "alice"}),
            ""
        ));
    }

    #[test]
    fn resolution_errors_read_like_listers_and_registries() {
        let e = ResolveError::NotFound {
            kind: "ClusterRole".into(),
            name: "gone".into(),
        };
        assert_eq!(
            e.to_string(),
            r#"clusterrole.rbac.authorization.k8s.io "gone" not found"#
        );
        assert_eq!(
            e.registry_message(),
            r#"clusterroles.rbac.authorization.k8s.io "gone" not found"#
        );
        assert_eq!(
            ResolveError::UnsupportedKind("Foo".into()).to_string(),
            r#"unsupported role reference kind: "Foo""#
        );
    }

    #[test]
    fn aggregated_messages_drop_repeats_and_bracket_many() {
        let one = vec!["a".to_string(), "a".to_string()];
        assert_eq!(aggregate_messages(&one), "a");
        let two = vec!["a".to_string(), "b".to_string(), "a".to_string()];
        assert_eq!(aggregate_messages(&two), "[a, b]");
    }

    #[test]
    fn a_cluster_role_binding_cannot_grant_a_role() {
        let p = StaticPolicy::new([
            json!({"kind": "Role", "metadata": {"name": "r", "namespace": ""}, "rules": []}),
        ]);
        let r = RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "r".into(),
        };
        assert!(matches!(
            role_rules(&p, &r, ""),
            Err(ResolveError::NotFound { .. })
        ));
    }
}
