//! The bootstrap ClusterRoles and ClusterRoleBindings for users and system components
//! (upstream `bootstrappolicy/policy.go`), in upstream's order.
//!
//! Our tables, written from what upstream 1.33 creates with default feature gates.

use super::user_facing::{
    AGGREGATE_TO_ADMIN, AGGREGATE_TO_EDIT, AGGREGATE_TO_VIEW, aggregate_to_edit, aggregate_to_view,
};
use super::{BindingSpec, READ, READ_UPDATE, READ_WRITE, RoleSpec, Subject, events_rule, res};
use crate::rule::{RuleBuilder, rule};

const CORE: &str = "";
const APPS: &str = "apps";
const AUTHN: &str = "authentication.k8s.io";
const AUTHZ: &str = "authorization.k8s.io";
const CERTS: &str = "certificates.k8s.io";
const COORDINATION: &str = "coordination.k8s.io";
const DISCOVERY: &str = "discovery.k8s.io";
const EXTENSIONS: &str = "extensions";
const NETWORKING: &str = "networking.k8s.io";
const POLICY: &str = "policy";
const RBAC: &str = "rbac.authorization.k8s.io";
const STORAGE: &str = "storage.k8s.io";

fn urls(verbs: &[&str], urls: &[&str]) -> RuleBuilder {
    rule(verbs).urls(urls)
}

/// What a kubelet needs (upstream `NodeRules`): its Node, its pods' status, what its pods
/// mount, leases, CSRs and tokens. The Node authorizer narrows these per node upstream.
fn node_rules() -> Vec<RuleBuilder> {
    vec![
        res(&["create"], &[AUTHN], &["tokenreviews"]),
        res(
            &["create"],
            &[AUTHZ],
            &["subjectaccessreviews", "localsubjectaccessreviews"],
        ),
        res(READ, &[CORE], &["services"]),
        res(&["create", "get", "list", "watch"], &[CORE], &["nodes"]),
        res(&["update", "patch"], &[CORE], &["nodes/status"]),
        res(&["update", "patch"], &[CORE], &["nodes"]),
        res(&["create", "update", "patch"], &[CORE], &["events"]),
        res(READ, &[CORE], &["pods"]),
        res(&["create", "delete"], &[CORE], &["pods"]),
        res(&["update", "patch"], &[CORE], &["pods/status"]),
        res(&["create"], &[CORE], &["pods/eviction"]),
        res(READ, &[CORE], &["secrets", "configmaps"]),
        res(
            &["get"],
            &[CORE],
            &["persistentvolumeclaims", "persistentvolumes"],
        ),
        res(&["get"], &[CORE], &["endpoints"]),
        res(
            &["create", "get", "list", "watch"],
            &[CERTS],
            &["certificatesigningrequests"],
        ),
        res(
            &["get", "create", "update", "patch", "delete"],
            &[COORDINATION],
            &["leases"],
        ),
        res(&["get"], &[STORAGE], &["volumeattachments"]),
        res(&["create"], &[CORE], &["serviceaccounts/token"]),
        res(
            &["get", "update", "patch"],
            &[CORE],
            &["persistentvolumeclaims/status"],
        ),
        res(READ, &[STORAGE], &["csidrivers"]),
        res(
            &["get", "create", "update", "patch", "delete"],
            &[STORAGE],
            &["csinodes"],
        ),
        res(READ, &["node.k8s.io"], &["runtimeclasses"]),
        // ServiceAccountNodeAudienceRestriction (beta, on by default in 1.33).
        res(&["get"], &[CORE], &["serviceaccounts"]),
    ]
}

fn kube_controller_manager() -> Vec<RuleBuilder> {
    vec![
        events_rule(),
        res(&["create"], &[COORDINATION], &["leases"]),
        res(&["get", "update"], &[COORDINATION], &["leases"]).names(&["kube-controller-manager"]),
        res(&["create"], &[CORE], &["secrets", "serviceaccounts"]),
        res(&["delete"], &[CORE], &["secrets"]),
        res(
            &["get"],
            &[CORE],
            &["namespaces", "secrets", "serviceaccounts", "configmaps"],
        ),
        res(&["update"], &[CORE], &["secrets", "serviceaccounts"]),
        res(&["create"], &[AUTHN], &["tokenreviews"]),
        res(&["create"], &[AUTHZ], &["subjectaccessreviews"]),
        // Every shared informer.
        res(&["list", "watch"], &["*"], &["*"]),
        res(&["create"], &[CORE], &["serviceaccounts/token"]),
    ]
}

fn kube_scheduler() -> Vec<RuleBuilder> {
    vec![
        events_rule(),
        res(&["create"], &[COORDINATION], &["leases"]),
        res(&["get", "update"], &[COORDINATION], &["leases"]).names(&["kube-scheduler"]),
        res(READ, &[CORE], &["nodes"]),
        res(&["get", "list", "watch", "delete"], &[CORE], &["pods"]),
        res(&["create"], &[CORE], &["pods/binding", "bindings"]),
        res(&["patch", "update"], &[CORE], &["pods/status"]),
        res(READ, &[CORE], &["services", "replicationcontrollers"]),
        res(READ, &[APPS, EXTENSIONS], &["replicasets"]),
        res(READ, &[APPS], &["statefulsets"]),
        res(READ, &[POLICY], &["poddisruptionbudgets"]),
        res(
            READ,
            &[CORE],
            &["persistentvolumeclaims", "persistentvolumes"],
        ),
        res(&["create"], &[AUTHN], &["tokenreviews"]),
        res(&["create"], &[AUTHZ], &["subjectaccessreviews"]),
        res(READ, &[STORAGE], &["csinodes"]),
        res(READ, &[CORE], &["namespaces"]),
        res(READ, &[STORAGE], &["csidrivers"]),
        res(READ, &[STORAGE], &["csistoragecapacities"]),
    ]
}

fn approver(signer: &str) -> RoleSpec {
    let short = signer.trim_start_matches("kubernetes.io/");
    RoleSpec::new(
        format!("system:certificates.k8s.io:{short}-approver"),
        vec![res(&["approve"], &[CERTS], &["signers"]).names(&[signer])],
    )
}

/// The policy ClusterRoles (everything but the controller roles), in upstream's order.
pub(super) fn cluster_roles() -> Vec<RoleSpec> {
    vec![
        RoleSpec::new(
            "cluster-admin",
            vec![res(&["*"], &["*"], &["*"]), urls(&["*"], &["*"])],
        ),
        RoleSpec::new(
            "system:discovery",
            vec![urls(
                &["get"],
                &[
                    "/livez",
                    "/readyz",
                    "/healthz",
                    "/version",
                    "/version/",
                    "/openapi",
                    "/openapi/*",
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                ],
            )],
        ),
        RoleSpec::new(
            "system:monitoring",
            vec![urls(
                &["get"],
                &[
                    "/metrics",
                    "/metrics/slis",
                    "/livez",
                    "/readyz",
                    "/healthz",
                    "/livez/*",
                    "/readyz/*",
                    "/healthz/*",
                ],
            )],
        ),
        RoleSpec::new(
            "system:basic-user",
            vec![
                res(
                    &["create"],
                    &[AUTHZ],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                res(&["create"], &[AUTHN], &["selfsubjectreviews"]),
            ],
        ),
        RoleSpec::new(
            "system:public-info-viewer",
            vec![urls(
                &["get"],
                &["/livez", "/readyz", "/healthz", "/version", "/version/"],
            )],
        ),
        RoleSpec::new("admin", vec![]).aggregated_from(AGGREGATE_TO_ADMIN),
        RoleSpec::new("edit", vec![])
            .label(AGGREGATE_TO_ADMIN)
            .aggregated_from(AGGREGATE_TO_EDIT),
        RoleSpec::new("view", vec![])
            .label(AGGREGATE_TO_EDIT)
            .aggregated_from(AGGREGATE_TO_VIEW),
        RoleSpec::new(
            "system:aggregate-to-admin",
            vec![
                res(&["create"], &[AUTHZ], &["localsubjectaccessreviews"]),
                res(READ_WRITE, &[RBAC], &["roles", "rolebindings"]),
            ],
        )
        .label(AGGREGATE_TO_ADMIN),
        RoleSpec::new("system:aggregate-to-edit", aggregate_to_edit()).label(AGGREGATE_TO_EDIT),
        RoleSpec::new("system:aggregate-to-view", aggregate_to_view()).label(AGGREGATE_TO_VIEW),
        RoleSpec::new(
            "system:heapster",
            vec![
                res(READ, &[CORE], &["events", "pods", "nodes", "namespaces"]),
                res(READ, &[EXTENSIONS], &["deployments"]),
            ],
        ),
        RoleSpec::new("system:node", node_rules()),
        RoleSpec::new(
            "system:node-problem-detector",
            vec![
                res(&["get"], &[CORE], &["nodes"]),
                res(&["patch"], &[CORE], &["nodes/status"]),
                events_rule(),
            ],
        ),
        RoleSpec::new(
            "system:kubelet-api-admin",
            vec![
                res(&["get", "list", "watch"], &[CORE], &["nodes"]),
                res(&["proxy"], &[CORE], &["nodes"]),
                res(
                    &["*"],
                    &[CORE],
                    &["nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log"],
                ),
                // KubeletFineGrainedAuthz (beta, on by default in 1.33).
                res(
                    &["*"],
                    &[CORE],
                    &["nodes/configz", "nodes/healthz", "nodes/pods"],
                ),
            ],
        ),
        RoleSpec::new(
            "system:node-bootstrapper",
            vec![res(
                &["create", "get", "list", "watch"],
                &[CERTS],
                &["certificatesigningrequests"],
            )],
        ),
        RoleSpec::new(
            "system:auth-delegator",
            vec![
                res(&["create"], &[AUTHN], &["tokenreviews"]),
                res(&["create"], &[AUTHZ], &["subjectaccessreviews"]),
            ],
        ),
        RoleSpec::new(
            "system:kube-aggregator",
            vec![res(READ, &[CORE], &["services", "endpoints"])],
        ),
        RoleSpec::new("system:kube-controller-manager", kube_controller_manager()),
        RoleSpec::new(
            "system:kube-dns",
            vec![res(&["list", "watch"], &[CORE], &["endpoints", "services"])],
        ),
        RoleSpec::new(
            "system:persistent-volume-provisioner",
            vec![
                res(
                    &["get", "list", "watch", "create", "delete"],
                    &[CORE],
                    &["persistentvolumes"],
                ),
                res(
                    &["get", "list", "watch", "update"],
                    &[CORE],
                    &["persistentvolumeclaims"],
                ),
                res(READ, &[STORAGE], &["storageclasses"]),
                res(&["watch"], &[CORE], &["events"]),
                events_rule(),
            ],
        ),
        RoleSpec::new(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            vec![res(
                &["create"],
                &[CERTS],
                &["certificatesigningrequests/nodeclient"],
            )],
        ),
        RoleSpec::new(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            vec![res(
                &["create"],
                &[CERTS],
                &["certificatesigningrequests/selfnodeclient"],
            )],
        ),
        RoleSpec::new(
            "system:volume-scheduler",
            vec![
                res(READ_UPDATE, &[CORE], &["persistentvolumes"]),
                res(READ, &[STORAGE], &["storageclasses"]),
                res(READ_UPDATE, &[CORE], &["persistentvolumeclaims"]),
            ],
        ),
        approver("kubernetes.io/legacy-unknown"),
        approver("kubernetes.io/kubelet-serving"),
        approver("kubernetes.io/kube-apiserver-client"),
        approver("kubernetes.io/kube-apiserver-client-kubelet"),
        RoleSpec::new(
            "system:service-account-issuer-discovery",
            vec![urls(
                &["get"],
                &[
                    "/.well-known/openid-configuration",
                    "/.well-known/openid-configuration/",
                    "/openid/v1/jwks",
                    "/openid/v1/jwks/",
                ],
            )],
        ),
        RoleSpec::new(
            "system:node-proxier",
            vec![
                res(&["list", "watch"], &[CORE], &["services", "endpoints"]),
                res(READ, &[CORE], &["nodes"]),
                events_rule(),
                // MultiCIDRServiceAllocator (GA in 1.33).
                res(&["list", "watch"], &[NETWORKING], &["servicecidrs"]),
                res(&["list", "watch"], &[DISCOVERY], &["endpointslices"]),
            ],
        ),
        RoleSpec::new("system:kube-scheduler", kube_scheduler()),
    ]
}

/// The policy ClusterRoleBindings, in upstream's order.
pub(super) fn cluster_role_bindings() -> Vec<BindingSpec> {
    use Subject::{Group, ServiceAccount, User};
    vec![
        BindingSpec::cluster("cluster-admin", vec![Group("system:masters")]),
        BindingSpec::cluster("system:monitoring", vec![Group("system:monitoring")]),
        BindingSpec::cluster("system:discovery", vec![Group("system:authenticated")]),
        BindingSpec::cluster("system:basic-user", vec![Group("system:authenticated")]),
        BindingSpec::cluster(
            "system:public-info-viewer",
            vec![
                Group("system:authenticated"),
                Group("system:unauthenticated"),
            ],
        ),
        BindingSpec::cluster("system:node-proxier", vec![User("system:kube-proxy")]),
        BindingSpec::cluster(
            "system:kube-controller-manager",
            vec![User("system:kube-controller-manager")],
        ),
        BindingSpec::cluster(
            "system:kube-dns",
            vec![ServiceAccount("kube-system", "kube-dns".into())],
        ),
        BindingSpec::cluster("system:kube-scheduler", vec![User("system:kube-scheduler")]),
        BindingSpec::cluster(
            "system:volume-scheduler",
            vec![User("system:kube-scheduler")],
        ),
        // Kept without subjects since the Node authorizer took over (upstream 1.7).
        BindingSpec::cluster("system:node", vec![]),
        BindingSpec::cluster(
            "system:service-account-issuer-discovery",
            vec![Group("system:serviceaccounts")],
        ),
    ]
}
