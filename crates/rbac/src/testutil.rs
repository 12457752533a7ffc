//! Test fixtures: binding and role objects, and the bootstrap policy with extra objects.

use serde_json::{Value, json};

use crate::{StaticPolicy, bootstrap_objects};

/// A subject JSON object: `user:alice`, `group:dev`, `sa:ns/name` or `sa:name` (no namespace).
pub(crate) fn subject(s: &str) -> Value {
    let (kind, name) = s.split_once(':').expect("kind:name");
    match kind {
        "user" => json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}),
        "group" => json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": name}),
        "sa" => match name.split_once('/') {
            Some((ns, n)) => json!({"kind": "ServiceAccount", "name": n, "namespace": ns}),
            None => json!({"kind": "ServiceAccount", "name": name}),
        },
        other => json!({"kind": other, "name": name}),
    }
}

/// A RoleBinding in `ns` granting `role_kind/role` to `subjects`.
pub(crate) fn role_binding(
    ns: &str,
    name: &str,
    role_kind: &str,
    role: &str,
    subjects: &[&str],
) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": subjects.iter().map(|s| subject(s)).collect::<Vec<_>>(),
    })
}

/// A ClusterRoleBinding granting ClusterRole `role` to `subjects`.
pub(crate) fn cluster_role_binding(name: &str, role: &str, subjects: &[&str]) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects.iter().map(|s| subject(s)).collect::<Vec<_>>(),
    })
}

/// A Role in `ns` with `rules` (JSON).
pub(crate) fn role(ns: &str, name: &str, rules: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name, "namespace": ns}, "rules": rules,
    })
}

/// A ClusterRole with `rules` (JSON).
pub(crate) fn cluster_role(name: &str, rules: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name}, "rules": rules,
    })
}

/// The bootstrap policy plus `extra` objects.
pub(crate) fn bootstrap_with(extra: Vec<Value>) -> StaticPolicy {
    StaticPolicy::new(bootstrap_objects()).with(extra)
}
