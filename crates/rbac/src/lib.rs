//! Kubernetes RBAC semantics as pure functions.
//!
//! Matryoshka serves many logical clusters from one API server, each with its own Roles,
//! ClusterRoles and bindings. The server keeps those objects in memory and calls this crate on
//! every request, through a [`PolicySource`] that lends them out as
//! `rbac.authorization.k8s.io/v1` JSON. Nothing here does I/O or keeps state.
//!
//! - [`authorize`]: may this user do this request? (upstream `RBACAuthorizer.Authorize`)
//! - [`forbidden_message`] / [`forbidden_error`]: the 403 in upstream's words.
//! - [`rules_for`]: what a SelfSubjectRulesReview reports.
//! - [`covers`], [`check_role_escalation`], [`check_cluster_role_escalation`],
//!   [`check_binding`]: nobody grants what they do not hold.
//! - [`aggregate`]: the rules of an aggregated ClusterRole.
//! - [`bootstrap_cluster_roles`] and friends: the default objects of a new cluster.
//!
//! **Architecture Invariant:** RBAC never denies. A request no rule allows gets
//! [`Decision::NoOpinion`]; refusing it is the server's job.

mod aggregate;
mod authorize;
mod bootstrap;
mod escalation;
mod matching;
mod policy;
mod request;
mod rule;
#[cfg(test)]
mod testutil;

pub use aggregate::{aggregate, aggregate_all};
pub use authorize::{
    NonResourceRule, ResourceRule, RulesReview, authorize, forbidden_error, forbidden_message,
    policy_rules_for, rules_for,
};
pub use bootstrap::{
    AUTOUPDATE_ANNOTATION, BOOTSTRAPPING_LABEL, bootstrap_cluster_role_bindings,
    bootstrap_cluster_roles, bootstrap_objects, bootstrap_role_bindings, bootstrap_roles,
};
pub use escalation::{
    EscalationError, bind_attributes, breakdown_rule, check_binding, check_cluster_role_escalation,
    check_role_escalation, compact_rules, confirm_no_escalation, covers, escalate_attributes,
    is_only_mutating_gc_fields,
};
pub use policy::{PolicySource, ResolveError, RoleRef, StaticPolicy};
pub use request::{
    ALL_AUTHENTICATED, ALL_SERVICE_ACCOUNTS, ALL_UNAUTHENTICATED, Attributes, Decision,
    SERVICE_ACCOUNT_PREFIX, SYSTEM_MASTERS, UserInfo, service_account_user_name,
};
pub use rule::{PolicyRule, RuleBuilder, go_quote, rule};
