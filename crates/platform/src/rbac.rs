//! Access along the tenant tree (spec: cozystack.md §4.4).
//!
//! Four levels, `view` < `use` < `admin` < `super-admin`, each a ClusterRole
//! `platform:tenant:<level>`. Tenant namespace `T` binds each level to the groups
//! `<A>-<L>` for every tenant `A` on the chain from the root to `T` and every level `L` at or
//! above it — so a parent's admins are admins of every descendant, and `tenant-foo-admin`
//! reaches `tenant-foo` and below, never a sibling. Admins manage TenantClusters;
//! only super-admins manage sub-tenants (as upstream, where `tenants` is not in the admin list).

use serde_json::{Value, json};

use crate::crds::{CLUSTER_BACKUPS, GROUP, TENANT_CLUSTERS, TENANTS};
use crate::naming;

/// The access levels, lowest first.
pub const LEVELS: &[&str] = &["view", "use", "admin", "super-admin"];

/// The ClusterRole of a level.
pub fn cluster_role_name(level: &str) -> String {
    format!("platform:tenant:{level}")
}

/// The group holding `level` on the tenant of namespace `ns`.
pub fn group(ns: &str, level: &str) -> String {
    format!("{ns}-{level}")
}

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

fn rules(level: &str) -> Vec<Value> {
    let rank = LEVELS.iter().position(|l| *l == level).unwrap_or(0);
    let mut rules = vec![
        json!({"apiGroups": [GROUP], "resources": [TENANTS, TENANT_CLUSTERS, format!("{TENANT_CLUSTERS}/status"), format!("{TENANTS}/status"), CLUSTER_BACKUPS, format!("{CLUSTER_BACKUPS}/status")], "verbs": READ}),
        json!({"apiGroups": [""], "resources": ["pods", "services", "endpoints", "events", "resourcequotas", "limitranges", "configmaps"], "verbs": READ}),
        // Every member may ask what its tenant used (reports are answered, never edited).
        json!({"apiGroups": [GROUP], "resources": [crate::usage::USAGE_REPORTS], "verbs": ["get", "list", "watch", "create", "delete"]}),
    ];
    if rank >= 1 {
        // The tenant clusters' kubeconfigs.
        rules.push(json!({"apiGroups": [""], "resources": ["secrets"], "verbs": READ}));
    }
    if rank >= 2 {
        rules.push(json!({"apiGroups": [GROUP], "resources": [TENANT_CLUSTERS, CLUSTER_BACKUPS], "verbs": WRITE}));
    }
    if rank >= 3 {
        rules.push(json!({"apiGroups": [GROUP], "resources": [TENANTS], "verbs": WRITE}));
    }
    rules
}

/// The four ClusterRoles.
pub fn cluster_roles() -> Vec<Value> {
    LEVELS
        .iter()
        .map(|l| {
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": cluster_role_name(l), "labels": {"app.kubernetes.io/part-of": "matryoshka-platform"}},
                "rules": rules(l),
            })
        })
        .collect()
}

/// The RoleBindings of tenant namespace `ns`, one per level.
pub fn role_bindings(ns: &str) -> Vec<Value> {
    let chain = naming::chain(ns);
    LEVELS
        .iter()
        .enumerate()
        .map(|(rank, l)| {
            let subjects: Vec<Value> = chain
                .iter()
                .flat_map(|a| {
                    LEVELS[rank..].iter().map(move |hl| {
                        json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": group(a, hl)})
                    })
                })
                .collect();
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": cluster_role_name(l), "namespace": ns},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role_name(l)},
                "subjects": subjects,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subjects(b: &Value) -> Vec<String> {
        b["subjects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn a_parents_admins_are_admins_of_every_descendant() {
        let b = role_bindings("tenant-foo-bar");
        let admin = subjects(&b[2]);
        for g in [
            "tenant-root-admin",
            "tenant-foo-admin",
            "tenant-foo-bar-admin",
            "tenant-foo-super-admin",
        ] {
            assert!(admin.contains(&g.to_string()), "{g} missing from {admin:?}");
        }
        assert!(!admin.contains(&"tenant-foo-view".to_string()));
    }

    #[test]
    fn only_super_admins_write_tenants() {
        let roles = cluster_roles();
        let writes_tenants = |r: &Value| {
            r["rules"].as_array().unwrap().iter().any(|rule| {
                rule["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x == TENANTS)
                    && rule["verbs"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|v| v == "create")
            })
        };
        assert!(!writes_tenants(&roles[2]));
        assert!(writes_tenants(&roles[3]));
    }
}
