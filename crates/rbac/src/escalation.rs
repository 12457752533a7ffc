//! Escalation prevention: nobody may grant permissions they do not hold.
//!
//! Creating or updating a Role or ClusterRole is allowed when the user holds every permission
//! in it (checked by [`covers`], which breaks rules down to single verb/resource/name atoms as
//! upstream's `validation.Covers` does) or may `escalate` on it. Creating or updating a binding
//! is allowed when the user may `bind` the referenced role or holds all of its permissions.
//! `system:masters` is exempt from both. The error text is upstream's
//! `ConfirmNoEscalation` message, so `kubectl` users see the familiar
//! `is attempting to grant RBAC permissions not currently held`.

use apimachinery::status::{ApiError, Reason};
use serde_json::Value;

use crate::authorize::policy_rules_for;
use crate::policy::{PolicySource, RoleRef, aggregate_messages, role_rules};
use crate::request::{Attributes, UserInfo};
use crate::rule::{PolicyRule, rule};
use apimachinery::gofmt::{quote, quote_list};

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Whether `owner` rules cover every permission in `requested`, and the uncovered atoms (each
/// with one group, one resource, one verb and at most one name, or one URL and one verb).
pub fn covers(owner: &[PolicyRule], requested: &[PolicyRule]) -> (bool, Vec<PolicyRule>) {
    let uncovered: Vec<PolicyRule> = requested
        .iter()
        .flat_map(breakdown_rule)
        .filter(|atom| !owner.iter().any(|o| rule_covers(o, atom)))
        .collect();
    (uncovered.is_empty(), uncovered)
}

/// Upstream `BreakdownRule`: one rule per group × resource × verb (× name), then one per
/// non-resource URL × verb.
pub fn breakdown_rule(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |s: &String| vec![s.clone()];
    let mut atoms = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let atom = PolicyRule {
                    verbs: one(verb),
                    api_groups: one(group),
                    resources: one(resource),
                    ..PolicyRule::default()
                };
                if rule.resource_names.is_empty() {
                    atoms.push(atom);
                } else {
                    for name in &rule.resource_names {
                        atoms.push(PolicyRule {
                            resource_names: one(name),
                            ..atom.clone()
                        });
                    }
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            atoms.push(PolicyRule {
                verbs: one(verb),
                non_resource_urls: one(url),
                ..PolicyRule::default()
            });
        }
    }
    atoms
}

fn has(set: &[String], s: &str) -> bool {
    set.iter().any(|x| x == s)
}

fn has_all(set: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|w| has(set, w))
}

/// An owner resource list covers `requested` when it has `*`, every entry, or for each missing
/// `res/sub` entry a `*/sub`.
fn resources_cover(owner: &[String], requested: &[String]) -> bool {
    if has(owner, "*") || has_all(owner, requested) {
        return true;
    }
    requested.iter().all(|path| {
        has(owner, path)
            || path
                .split_once('/')
                .is_some_and(|(_, sub)| has(owner, &format!("*/{sub}")))
    })
}

fn urls_cover(owner: &[String], requested: &[String]) -> bool {
    requested.iter().all(|path| {
        owner
            .iter()
            .any(|o| o == path || (o.ends_with('*') && path.starts_with(o.trim_end_matches('*'))))
    })
}

/// Upstream `ruleCovers`: whether one owner rule covers one broken-down atom. A named owner
/// rule never covers an unnamed atom.
fn rule_covers(owner: &PolicyRule, atom: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, "*") || has_all(&owner.verbs, &atom.verbs);
    let groups = has(&owner.api_groups, "*") || has_all(&owner.api_groups, &atom.api_groups);
    let names = if atom.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || has_all(&owner.resource_names, &atom.resource_names)
    };
    verbs
        && groups
        && resources_cover(&owner.resources, &atom.resources)
        && urls_cover(&owner.non_resource_urls, &atom.non_resource_urls)
        && names
}

/// Upstream `CompactRules`: atoms with one group and one resource and nothing else are merged
/// per group/resource, their verbs in order of appearance; other rules pass through.
pub fn compact_rules(rules: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut compacted = Vec::new();
    let mut simple: Vec<PolicyRule> = Vec::new();
    for r in rules {
        let is_simple = r.resource_names.is_empty()
            && r.non_resource_urls.is_empty()
            && r.api_groups.len() == 1
            && r.resources.len() == 1;
        if !is_simple {
            compacted.push(r.clone());
            continue;
        }
        match simple
            .iter_mut()
            .find(|s| s.api_groups == r.api_groups && s.resources == r.resources)
        {
            Some(existing) => existing.verbs.extend(r.verbs.iter().cloned()),
            None => simple.push(r.clone()),
        }
    }
    compacted.extend(simple);
    compacted
}

/// Why a role or binding write was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EscalationError {
    /// The binding's role does not exist (upstream answers 404 NotFound with this message).
    #[error("{0}")]
    RoleNotFound(String),
    /// The user lacks permissions the object would grant (403); the text follows
    /// `<resource> "<name>" is forbidden: `.
    #[error("{0}")]
    Forbidden(String),
}

impl EscalationError {
    /// The API error for a write of `resource` (`roles`, `clusterroles`, `rolebindings`,
    /// `clusterrolebindings`) named `name`.
    pub fn to_api_error(&self, resource: &str, name: &str) -> ApiError {
        match self {
            EscalationError::RoleNotFound(msg) => ApiError::new(404, Reason::NotFound, msg.clone()),
            EscalationError::Forbidden(why) => {
                let mut e = ApiError::forbidden(resource, RBAC_GROUP, name, why);
                e.message = format!(
                    "{resource}.{RBAC_GROUP} {} is forbidden: {why}",
                    quote(name)
                );
                e
            }
        }
    }
}

/// Upstream `ConfirmNoEscalation`: `rules` must be covered by what `user` holds in `namespace`
/// (empty for cluster-scoped writes).
pub fn confirm_no_escalation(
    user: &UserInfo,
    namespace: &str,
    rules: &[PolicyRule],
    policy: &dyn PolicySource,
) -> Result<(), EscalationError> {
    let (owned, errors) = policy_rules_for(user, namespace, policy);
    let (ok, missing) = covers(&owned, rules);
    if ok {
        return Ok(());
    }
    let mut lines: Vec<String> = compact_rules(&missing)
        .iter()
        .map(PolicyRule::compact_string)
        .collect();
    lines.sort();
    lines.dedup();
    let mut msg = format!(
        "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        quote(&user.name),
        quote_list(&user.groups),
        lines.join("\n")
    );
    if !errors.is_empty() {
        let messages: Vec<String> = errors.iter().map(|e| e.registry_message()).collect();
        msg.push_str(&format!(
            "; resolution errors: [{}]",
            aggregate_messages(&messages)
        ));
    }
    Err(EscalationError::Forbidden(msg))
}

/// The check on creating or updating a Role (in `namespace`) or a ClusterRole (`namespace`
/// empty) whose rules are `new_rules`. `has_escalate_verb` is whether the server's authorizer
/// allows [`escalate_attributes`] for the object.
pub fn check_role_escalation(
    user: &UserInfo,
    namespace: &str,
    new_rules: &[PolicyRule],
    policy: &dyn PolicySource,
    has_escalate_verb: bool,
) -> Result<(), EscalationError> {
    if user.is_superuser() || has_escalate_verb {
        return Ok(());
    }
    confirm_no_escalation(user, namespace, new_rules, policy)
}

fn has_aggregation_rule(role: Option<&Value>) -> bool {
    role.and_then(|r| r.pointer("/aggregationRule/clusterRoleSelectors"))
        .and_then(Value::as_array)
        .is_some_and(|s| !s.is_empty())
}

/// The check on creating (`old` is `None`) or updating a ClusterRole object: its rules, and —
/// because an aggregation rule can gather anything — full authority (`*` on everything) when
/// the new or old object has `aggregationRule.clusterRoleSelectors`.
pub fn check_cluster_role_escalation(
    user: &UserInfo,
    new: &Value,
    old: Option<&Value>,
    policy: &dyn PolicySource,
    has_escalate_verb: bool,
) -> Result<(), EscalationError> {
    if user.is_superuser() || has_escalate_verb {
        return Ok(());
    }
    confirm_no_escalation(user, "", &PolicyRule::list_from_object(new), policy)?;
    if has_aggregation_rule(Some(new)) || has_aggregation_rule(old) {
        let full = [
            rule(&["*"]).groups(&["*"]).resources(&["*"]).build(),
            rule(&["*"]).urls(&["*"]).build(),
        ];
        if confirm_no_escalation(user, "", &full, policy).is_err() {
            return Err(EscalationError::Forbidden(
                "must have cluster-admin privileges to use the aggregationRule".into(),
            ));
        }
    }
    Ok(())
}

/// The check on creating or updating a RoleBinding (in `namespace`) or a ClusterRoleBinding
/// (`namespace` empty) that references `role_ref`. `has_bind_verb` is whether the server's
/// authorizer allows [`bind_attributes`] for it. Otherwise the user must hold every rule of the
/// referenced role; a missing role is [`EscalationError::RoleNotFound`].
pub fn check_binding(
    user: &UserInfo,
    namespace: &str,
    role_ref: &RoleRef,
    policy: &dyn PolicySource,
    has_bind_verb: bool,
) -> Result<(), EscalationError> {
    if user.is_superuser() || has_bind_verb {
        return Ok(());
    }
    let rules = role_rules(policy, role_ref, namespace)
        .map_err(|e| EscalationError::RoleNotFound(e.registry_message()))?;
    let rules: Vec<PolicyRule> = rules.iter().map(PolicyRule::from_json).collect();
    confirm_no_escalation(user, namespace, &rules, policy)
}

/// Upstream `IsOnlyMutatingGCFields`: whether an update changes nothing but
/// `metadata.ownerReferences`, `finalizers`, `selfLink` or `managedFields`. Such updates (the
/// garbage collector's) skip the escalation and bind checks. Absent and empty lists are equal.
pub fn is_only_mutating_gc_fields(new: &Value, old: &Value) -> bool {
    fn stripped(o: &Value) -> Value {
        let mut o = o.clone();
        if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in ["ownerReferences", "finalizers", "selfLink", "managedFields"] {
                meta.remove(k);
            }
        }
        o
    }
    stripped(new) == stripped(old)
}

/// The request whose approval lets a user write a role beyond their own permissions: verb
/// `escalate` on `roles` or `clusterroles` `name` (upstream `RoleEscalationAuthorized`).
pub fn escalate_attributes(resource: &str, namespace: &str, name: &str) -> Attributes {
    Attributes {
        api_version: "*".into(),
        ..Attributes::resource("escalate", RBAC_GROUP, resource, namespace).named(name)
    }
}

/// The request whose approval lets a user bind a role they do not hold: verb `bind` on the
/// referenced `roles`/`clusterroles` object, in the binding's namespace (empty for a
/// ClusterRoleBinding). `None` for a `roleRef.kind` that is neither.
pub fn bind_attributes(role_ref: &RoleRef, namespace: &str) -> Option<Attributes> {
    let resource = match role_ref.kind.as_str() {
        "ClusterRole" => "clusterroles",
        "Role" => "roles",
        _ => return None,
    };
    Some(
        Attributes::resource("bind", &role_ref.api_group, resource, namespace)
            .named(&role_ref.name),
    )
}

#[cfg(test)]
#[path = "escalation_tests.rs"]
mod tests;
