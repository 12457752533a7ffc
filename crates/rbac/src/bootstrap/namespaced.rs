//! The bootstrap Roles and RoleBindings of `kube-system` and `kube-public` (upstream
//! `bootstrappolicy/namespace_policy.go`): leader election locks, the extension API server
//! authentication reader, and the bootstrap-token signer and cleaner.
//!
//! Our tables, written from what upstream 1.33 creates.

use super::{BindingSpec, READ, RoleSpec, Subject, events_rule, res};

const SYSTEM: &str = "kube-system";
const PUBLIC: &str = "kube-public";

/// `(namespace, role)` pairs, in upstream's order.
pub(super) fn roles() -> Vec<(&'static str, RoleSpec)> {
    vec![
        (
            SYSTEM,
            RoleSpec::new(
                "extension-apiserver-authentication-reader",
                vec![
                    res(READ, &[""], &["configmaps"])
                        .names(&["extension-apiserver-authentication"]),
                ],
            ),
        ),
        (
            SYSTEM,
            RoleSpec::new(
                "system:controller:bootstrap-signer",
                vec![res(READ, &[""], &["secrets"])],
            ),
        ),
        (
            SYSTEM,
            RoleSpec::new(
                "system:controller:cloud-provider",
                vec![res(
                    &["create", "get", "list", "watch"],
                    &[""],
                    &["configmaps"],
                )],
            ),
        ),
        (
            SYSTEM,
            RoleSpec::new(
                "system:controller:token-cleaner",
                vec![
                    res(&["get", "list", "watch", "delete"], &[""], &["secrets"]),
                    events_rule(),
                ],
            ),
        ),
        (
            SYSTEM,
            RoleSpec::new(
                "system::leader-locking-kube-controller-manager",
                vec![
                    res(&["watch"], &[""], &["configmaps"]),
                    res(&["get", "update"], &[""], &["configmaps"])
                        .names(&["kube-controller-manager"]),
                    res(
                        &["get", "watch", "list", "create", "update"],
                        &["coordination.k8s.io"],
                        &["leases"],
                    ),
                ],
            ),
        ),
        (
            SYSTEM,
            RoleSpec::new(
                "system::leader-locking-kube-scheduler",
                vec![
                    res(&["watch"], &[""], &["configmaps"]),
                    res(&["get", "update"], &[""], &["configmaps"]).names(&["kube-scheduler"]),
                ],
            ),
        ),
        (
            PUBLIC,
            RoleSpec::new(
                "system:controller:bootstrap-signer",
                vec![
                    res(READ, &[""], &["configmaps"]),
                    res(&["update"], &[""], &["configmaps"]).names(&["cluster-info"]),
                    events_rule(),
                ],
            ),
        ),
    ]
}

fn role_binding(name: &str, role: &str, subjects: Vec<Subject>) -> BindingSpec {
    BindingSpec {
        name: name.into(),
        role_kind: "Role",
        role: role.into(),
        subjects,
    }
}

fn sa(name: &str) -> Subject {
    Subject::ServiceAccount(SYSTEM, name.into())
}

/// `(namespace, binding)` pairs, in upstream's order.
pub(super) fn role_bindings() -> Vec<(&'static str, BindingSpec)> {
    use Subject::User;
    vec![
        (
            SYSTEM,
            role_binding(
                "system::extension-apiserver-authentication-reader",
                "extension-apiserver-authentication-reader",
                vec![
                    User("system:kube-controller-manager"),
                    User("system:kube-scheduler"),
                ],
            ),
        ),
        (
            SYSTEM,
            role_binding(
                "system::leader-locking-kube-controller-manager",
                "system::leader-locking-kube-controller-manager",
                vec![
                    User("system:kube-controller-manager"),
                    sa("kube-controller-manager"),
                    sa("leader-election-controller"),
                ],
            ),
        ),
        (
            SYSTEM,
            role_binding(
                "system::leader-locking-kube-scheduler",
                "system::leader-locking-kube-scheduler",
                vec![User("system:kube-scheduler"), sa("kube-scheduler")],
            ),
        ),
        (
            SYSTEM,
            role_binding(
                "system:controller:bootstrap-signer",
                "system:controller:bootstrap-signer",
                vec![sa("bootstrap-signer")],
            ),
        ),
        (
            SYSTEM,
            role_binding(
                "system:controller:cloud-provider",
                "system:controller:cloud-provider",
                vec![sa("cloud-provider")],
            ),
        ),
        (
            SYSTEM,
            role_binding(
                "system:controller:token-cleaner",
                "system:controller:token-cleaner",
                vec![sa("token-cleaner")],
            ),
        ),
        (
            PUBLIC,
            role_binding(
                "system:controller:bootstrap-signer",
                "system:controller:bootstrap-signer",
                vec![sa("bootstrap-signer")],
            ),
        ),
    ]
}
