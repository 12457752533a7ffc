//! The RBAC authorizer: answering one request, listing a user's rules, and the 403 text.
//!
//! [`authorize`] is upstream's `RBACAuthorizer.Authorize` (plus the `system:masters`
//! short-circuit the API server puts in front of it); [`rules_for`] is its `RulesFor`, which
//! backs SelfSubjectRulesReview and `kubectl auth can-i --list`; [`forbidden_message`] and
//! [`forbidden_error`] word the denial exactly as `responsewriters.Forbidden` does.

use std::ops::ControlFlow;

use apimachinery::status::{ApiError, Reason};
use serde::Serialize;
use serde_json::{Value, json};

use crate::matching::json_rule_allows;
use crate::policy::{PolicySource, ResolveError, Visit, aggregate_messages, visit_rules_for};
use crate::request::{Attributes, Decision, UserInfo};
use crate::rule::PolicyRule;
use apimachinery::gofmt::quote;

/// Whether `user` may do `attrs`, by the cluster's RBAC objects.
///
/// Members of `system:masters` are allowed outright. Otherwise the first rule that allows the
/// request wins and its binding is named in the reason; with no such rule the answer is
/// [`Decision::NoOpinion`], whose reason lists any bindings whose roles could not be read.
pub fn authorize(attrs: &Attributes, user: &UserInfo, policy: &dyn PolicySource) -> Decision {
    if user.is_superuser() {
        return Decision::Allow {
            reason: String::new(),
        };
    }
    let mut allowed = None;
    let mut errors = Vec::new();
    visit_rules_for(user, &attrs.namespace, policy, &mut |visit| match visit {
        Visit::Rule(source, rule) if json_rule_allows(attrs, rule) => {
            allowed = Some(format!("RBAC: allowed by {}", source.describe()));
            ControlFlow::Break(())
        }
        Visit::Rule(..) => ControlFlow::Continue(()),
        Visit::Error(e) => {
            errors.push(e.to_string());
            ControlFlow::Continue(())
        }
    });
    match allowed {
        Some(reason) => Decision::Allow { reason },
        None if errors.is_empty() => Decision::NoOpinion {
            reason: String::new(),
        },
        None => Decision::NoOpinion {
            reason: format!("RBAC: {}", aggregate_messages(&errors)),
        },
    }
}

/// Every rule granted to `user` in `namespace` (cluster-wide bindings, then the namespace's
/// RoleBindings), parsed, with the bindings whose roles could not be read (upstream
/// `RulesFor`).
pub fn policy_rules_for(
    user: &UserInfo,
    namespace: &str,
    policy: &dyn PolicySource,
) -> (Vec<PolicyRule>, Vec<ResolveError>) {
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    visit_rules_for(user, namespace, policy, &mut |visit| {
        match visit {
            Visit::Rule(_, rule) => rules.push(PolicyRule::from_json(rule)),
            Visit::Error(e) => errors.push(e),
        }
        ControlFlow::Continue(())
    });
    (rules, errors)
}

/// A `status.resourceRules[]` entry of a SelfSubjectRulesReview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRule {
    pub verbs: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
}

/// A `status.nonResourceRules[]` entry of a SelfSubjectRulesReview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NonResourceRule {
    pub verbs: Vec<String>,
    #[serde(rename = "nonResourceURLs", skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

/// What a SelfSubjectRulesReview reports for a user in a namespace.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RulesReview {
    pub resource_rules: Vec<ResourceRule>,
    pub non_resource_rules: Vec<NonResourceRule>,
    /// Always false for RBAC (it can list everything it would allow); kept for the status shape.
    pub incomplete: bool,
    /// Roles that could not be read, worded as upstream's `evaluationError`.
    pub evaluation_error: Option<String>,
}

impl RulesReview {
    /// The review's `status` object: `{resourceRules, nonResourceRules, incomplete,
    /// evaluationError?}`.
    pub fn to_status_json(&self) -> Value {
        let mut status = json!({
            "resourceRules": self.resource_rules,
            "nonResourceRules": self.non_resource_rules,
            "incomplete": self.incomplete,
        });
        if let Some(e) = &self.evaluation_error {
            status["evaluationError"] = json!(e);
        }
        status
    }
}

/// The rules review of `user` in `namespace` (upstream `RBACAuthorizer.RulesFor`): each granted
/// rule with resources becomes a resource rule, each with non-resource URLs a non-resource rule,
/// in binding order. `system:masters` gets no extra entries, as upstream's privileged-group
/// authorizer is not a rule resolver; the bootstrap `cluster-admin` binding covers it.
pub fn rules_for(user: &UserInfo, namespace: &str, policy: &dyn PolicySource) -> RulesReview {
    let (rules, errors) = policy_rules_for(user, namespace, policy);
    let mut review = RulesReview::default();
    for r in rules {
        if !r.resources.is_empty() {
            review.resource_rules.push(ResourceRule {
                verbs: r.verbs.clone(),
                api_groups: r.api_groups.clone(),
                resources: r.resources.clone(),
                resource_names: r.resource_names.clone(),
            });
        }
        if !r.non_resource_urls.is_empty() {
            review.non_resource_rules.push(NonResourceRule {
                verbs: r.verbs,
                non_resource_urls: r.non_resource_urls,
            });
        }
    }
    if !errors.is_empty() {
        let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
        review.evaluation_error = Some(aggregate_messages(&messages));
    }
    review
}

/// Upstream's `forbiddenMessage`, HTML-sanitized as `responsewriters.Forbidden` does:
/// `User "alice" cannot list resource "pods" in API group "" in the namespace "default"`.
fn denial(attrs: &Attributes, user: &UserInfo) -> String {
    let user = quote(&user.name);
    let text = if !attrs.resource_request {
        format!(
            "User {user} cannot {} path {}",
            attrs.verb,
            quote(&attrs.path)
        )
    } else {
        let resource = quote(&attrs.combined_resource());
        let group = quote(&attrs.api_group);
        if attrs.namespace.is_empty() {
            format!(
                "User {user} cannot {} resource {resource} in API group {group} at the cluster scope",
                attrs.verb
            )
        } else {
            format!(
                "User {user} cannot {} resource {resource} in API group {group} in the namespace {}",
                attrs.verb,
                quote(&attrs.namespace)
            )
        }
    };
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The whole 403 message for a denied request, without an authorizer reason:
/// `pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the
/// namespace "default"`, `deployments.apps "web" is forbidden: ...`, or for non-resource
/// requests `forbidden: User "bob" cannot get path "/metrics"`.
pub fn forbidden_message(attrs: &Attributes, user: &UserInfo) -> String {
    forbidden_error(attrs, user, "").message
}

/// The 403 `ApiError` for a denied request. A non-empty `reason` (the authorizer's) is appended
/// as `: <reason>`. Details carry the group, the resource (as `kind`) and the name.
pub fn forbidden_error(attrs: &Attributes, user: &UserInfo, reason: &str) -> ApiError {
    let mut why = denial(attrs, user);
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    if attrs.resource.is_empty() && attrs.api_group.is_empty() {
        let mut e = ApiError::new(403, Reason::Forbidden, format!("forbidden: {why}"));
        if !attrs.name.is_empty() {
            e.name = Some(attrs.name.clone());
        }
        return e;
    }
    let mut e = ApiError::forbidden(&attrs.resource, &attrs.api_group, &attrs.name, &why);
    if !attrs.name.is_empty() {
        // Upstream prints the name with %q.
        let q = apimachinery::status::qualified_resource(&attrs.resource, &attrs.api_group);
        e.message = format!("{q} {} is forbidden: {why}", quote(&attrs.name));
    }
    e
}

#[cfg(test)]
#[path = "authorize_tests.rs"]
mod tests;
