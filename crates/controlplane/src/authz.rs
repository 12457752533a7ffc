//! Authorization: RBAC evaluated against the cluster's own Roles and bindings, read from the
//! watch cache (nothing is copied but `Arc`s).

use std::collections::HashMap;
use std::sync::Arc;

use apimachinery::status::ApiError;
use registry::cache::{CachedObject, Filter};
use serde_json::Value;

pub use rbac::Attributes;

use crate::ControlPlane;
use crate::auth::UserInfo;

const RBAC: &str = "rbac.authorization.k8s.io";

/// A cluster's RBAC objects relevant to one namespace, as the `rbac` crate reads them. The
/// cache keeps RBAC resources decoded (`CacheOptions::keep_decoded`), so loading a policy
/// copies pointers, never objects.
pub struct CachePolicy {
    cluster_role_bindings: Vec<Arc<Value>>,
    role_bindings: HashMap<String, Vec<Arc<Value>>>,
    cluster_roles: HashMap<String, Arc<Value>>,
    roles: HashMap<(String, String), Arc<Value>>,
}

fn values(items: Vec<Arc<CachedObject>>) -> Vec<Arc<Value>> {
    items.iter().map(|o| o.value()).collect()
}

fn by_name(items: Vec<Arc<CachedObject>>) -> HashMap<String, Arc<Value>> {
    items
        .iter()
        .map(|o| (o.name().to_string(), o.value()))
        .collect()
}

impl CachePolicy {
    /// Loads what `cluster` says about `namespace` (empty: cluster scope only).
    pub fn load(cp: &ControlPlane, cluster: &str, namespace: &str) -> CachePolicy {
        let cache = &cp.store.cache_for_reads(cluster);
        let all = Filter {
            cluster: Some(cluster.to_string()),
            ..Filter::default()
        };
        let ns_filter = Filter {
            cluster: Some(cluster.to_string()),
            namespace: Some(namespace.to_string()),
            ..Filter::default()
        };
        let mut role_bindings = HashMap::new();
        let mut roles = HashMap::new();
        if !namespace.is_empty() {
            role_bindings.insert(
                namespace.to_string(),
                values(cache.list(RBAC, "rolebindings", &ns_filter).0),
            );
            for r in cache.list(RBAC, "roles", &ns_filter).0 {
                roles.insert((namespace.to_string(), r.name().to_string()), r.value());
            }
        }
        CachePolicy {
            cluster_role_bindings: values(cache.list(RBAC, "clusterrolebindings", &all).0),
            role_bindings,
            cluster_roles: by_name(cache.list(RBAC, "clusterroles", &all).0),
            roles,
        }
    }
}

impl rbac::PolicySource for CachePolicy {
    fn cluster_role_bindings(&self) -> Vec<&Value> {
        self.cluster_role_bindings.iter().map(|o| &**o).collect()
    }

    fn role_bindings(&self, namespace: &str) -> Vec<&Value> {
        self.role_bindings
            .get(namespace)
            .map(|v| v.iter().map(|o| &**o).collect())
            .unwrap_or_default()
    }

    fn role(&self, namespace: &str, name: &str) -> Option<&Value> {
        self.roles
            .get(&(namespace.to_string(), name.to_string()))
            .map(|o| &**o)
    }

    fn cluster_role(&self, name: &str) -> Option<&Value> {
        self.cluster_roles.get(name).map(|o| &**o)
    }
}

/// Whether `user` may do `attrs` in `cluster`.
pub fn allowed(
    cp: &ControlPlane,
    cluster: &str,
    user: &UserInfo,
    attrs: &Attributes,
) -> rbac::Decision {
    if user.in_group("system:masters") {
        return rbac::Decision::Allow {
            reason: String::new(),
        };
    }
    // The Node authorizer first (authorization modes Node,RBAC).
    if let Some(node) = crate::node_authz::node_name(user)
        && crate::node_authz::authorize(cp, cluster, node, attrs) == Some(true)
    {
        return rbac::Decision::Allow {
            reason: String::new(),
        };
    }
    let policy = CachePolicy::load(cp, cluster, &attrs.namespace);
    rbac::authorize(attrs, user, &policy)
}

/// Like [`allowed`], with upstream's 403 when not.
pub fn check(
    cp: &ControlPlane,
    cluster: &str,
    user: &UserInfo,
    attrs: &Attributes,
) -> Result<(), ApiError> {
    match allowed(cp, cluster, user, attrs) {
        rbac::Decision::Allow { .. } => Ok(()),
        rbac::Decision::NoOpinion { .. } => Err(rbac::forbidden_error(attrs, user, "")),
    }
}

/// Escalation prevention on writes of Roles, ClusterRoles and their bindings: a user may only
/// grant what they hold, unless allowed to `escalate` or `bind`.
pub fn check_rbac_write(
    cp: &ControlPlane,
    cluster: &str,
    user: &UserInfo,
    plural: &str,
    namespace: &str,
    new: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    if user.in_group("system:masters") {
        return Ok(());
    }
    if let Some(o) = old
        && rbac::is_only_mutating_gc_fields(new, o)
    {
        return Ok(());
    }
    let name = apimachinery::meta::name(new);
    let policy = CachePolicy::load(cp, cluster, namespace);
    let can = |attrs: &Attributes| rbac::authorize(attrs, user, &policy).is_allowed();
    let result = match plural {
        "roles" => {
            let rules = rbac::PolicyRule::list_from_object(new);
            let escalate = can(&rbac::escalate_attributes(plural, namespace, name));
            rbac::check_role_escalation(user, namespace, &rules, &policy, escalate)
        }
        "clusterroles" => {
            let escalate = can(&rbac::escalate_attributes(plural, "", name));
            rbac::check_cluster_role_escalation(user, new, old, &policy, escalate)
        }
        "rolebindings" | "clusterrolebindings" => {
            let role_ref = rbac::RoleRef::of_binding(new);
            let ns = if plural == "rolebindings" {
                namespace
            } else {
                ""
            };
            let bind = rbac::bind_attributes(&role_ref, ns).is_some_and(|a| can(&a));
            rbac::check_binding(user, ns, &role_ref, &policy, bind)
        }
        _ => Ok(()),
    };
    result.map_err(|e| e.to_api_error(plural, name))
}
