//! The `system:controller:*` ClusterRoles (upstream `bootstrappolicy/controller_policy.go`),
//! one per kube-controller-manager controller, each bound to the `kube-system` service account
//! that controller runs as. Our controllers use the same identities, so a cluster's own
//! controllers are authorized exactly as upstream's are.
//!
//! Our tables, written from what upstream 1.33 creates with default feature gates.

use super::{BindingSpec, READ, RoleSpec, Subject, events_rule, res};
use crate::rule::RuleBuilder;

const CORE: &str = "";
const APPS: &str = "apps";
const AUTHZ: &str = "authorization.k8s.io";
const AUTOSCALING: &str = "autoscaling";
const BATCH: &str = "batch";
const CERTS: &str = "certificates.k8s.io";
const COORDINATION: &str = "coordination.k8s.io";
const DISCOVERY: &str = "discovery.k8s.io";
const EXTENSIONS: &str = "extensions";
const NETWORKING: &str = "networking.k8s.io";
const POLICY: &str = "policy";
const STORAGE: &str = "storage.k8s.io";

const PREFIX: &str = "system:controller:";

fn controller(name: &str, rules: Vec<RuleBuilder>) -> RoleSpec {
    RoleSpec::new(format!("{PREFIX}{name}"), rules)
}

/// The ClusterRoleBinding granting a controller role to its service account.
pub(super) fn binding_for(role: &str) -> BindingSpec {
    let sa = role.strip_prefix(PREFIX).unwrap_or(role).to_string();
    BindingSpec::cluster(role, vec![Subject::ServiceAccount("kube-system", sa)])
}

/// The controller roles, in upstream's order.
pub(super) fn controller_roles() -> Vec<RoleSpec> {
    let ev = events_rule;
    vec![
        controller(
            "attachdetach-controller",
            vec![
                res(
                    &["list", "watch"],
                    &[CORE],
                    &["persistentvolumes", "persistentvolumeclaims"],
                ),
                res(READ, &[CORE], &["nodes"]),
                res(&["patch", "update"], &[CORE], &["nodes/status"]),
                res(&["list", "watch"], &[CORE], &["pods"]),
                ev(),
                res(
                    &["get", "create", "delete", "list", "watch"],
                    &[STORAGE],
                    &["volumeattachments"],
                ),
                res(READ, &[STORAGE], &["csidrivers"]),
                res(READ, &[STORAGE], &["csinodes"]),
            ],
        ),
        controller(
            "clusterrole-aggregation-controller",
            vec![res(
                &["escalate", "get", "list", "watch", "update", "patch"],
                &["rbac.authorization.k8s.io"],
                &["clusterroles"],
            )],
        ),
        controller(
            "cronjob-controller",
            vec![
                res(&["get", "list", "watch", "update"], &[BATCH], &["cronjobs"]),
                res(
                    &[
                        "get", "list", "watch", "create", "update", "delete", "patch",
                    ],
                    &[BATCH],
                    &["jobs"],
                ),
                res(&["update"], &[BATCH], &["cronjobs/status"]),
                res(&["update"], &[BATCH], &["cronjobs/finalizers"]),
                res(&["list", "watch", "delete"], &[CORE], &["pods"]),
                ev(),
            ],
        ),
        controller(
            "daemon-set-controller",
            vec![
                res(READ, &[EXTENSIONS, APPS], &["daemonsets"]),
                res(&["update"], &[EXTENSIONS, APPS], &["daemonsets/status"]),
                res(&["update"], &[EXTENSIONS, APPS], &["daemonsets/finalizers"]),
                res(&["list", "watch"], &[CORE], &["nodes"]),
                res(
                    &["list", "watch", "create", "delete", "patch"],
                    &[CORE],
                    &["pods"],
                ),
                res(&["create"], &[CORE], &["pods/binding"]),
                res(
                    &[
                        "get", "list", "watch", "create", "delete", "update", "patch",
                    ],
                    &[APPS],
                    &["controllerrevisions"],
                ),
                ev(),
            ],
        ),
        controller(
            "deployment-controller",
            vec![
                res(
                    &["get", "list", "watch", "update"],
                    &[EXTENSIONS, APPS],
                    &["deployments"],
                ),
                res(&["update"], &[EXTENSIONS, APPS], &["deployments/status"]),
                res(
                    &["update"],
                    &[EXTENSIONS, APPS],
                    &["deployments/finalizers"],
                ),
                res(
                    &[
                        "get", "list", "watch", "create", "update", "patch", "delete",
                    ],
                    &[APPS, EXTENSIONS],
                    &["replicasets"],
                ),
                res(&["get", "list", "watch", "update"], &[CORE], &["pods"]),
                ev(),
            ],
        ),
        controller(
            "disruption-controller",
            vec![
                res(READ, &[EXTENSIONS, APPS], &["deployments"]),
                res(READ, &[APPS, EXTENSIONS], &["replicasets"]),
                res(READ, &[CORE], &["replicationcontrollers"]),
                res(READ, &[POLICY], &["poddisruptionbudgets"]),
                res(READ, &[APPS], &["statefulsets"]),
                res(&["update"], &[POLICY], &["poddisruptionbudgets/status"]),
                res(&["patch", "update"], &[CORE], &["pods/status"]),
                res(&["get"], &["*"], &["*/scale"]),
                ev(),
            ],
        ),
        controller(
            "endpoint-controller",
            vec![
                res(READ, &[CORE], &["services", "pods"]),
                res(
                    &["get", "list", "watch", "create", "update", "delete"],
                    &[CORE],
                    &["endpoints"],
                ),
                res(&["create"], &[CORE], &["endpoints/restricted"]),
                ev(),
            ],
        ),
        controller(
            "endpointslice-controller",
            vec![
                res(READ, &[CORE], &["services", "pods", "nodes"]),
                // To own EndpointSlices with blockOwnerDeletion on their Service.
                res(&["update"], &[CORE], &["services/finalizers"]),
                res(
                    &["get", "list", "watch", "create", "update", "delete"],
                    &[DISCOVERY],
                    &["endpointslices"],
                ),
                res(&["create"], &[DISCOVERY], &["endpointslices/restricted"]),
                ev(),
            ],
        ),
        controller(
            "endpointslicemirroring-controller",
            vec![
                res(READ, &[CORE], &["services", "endpoints"]),
                res(&["update"], &[CORE], &["services/finalizers"]),
                res(&["update"], &[CORE], &["endpoints/finalizers"]),
                res(
                    &["get", "list", "watch", "create", "update", "delete"],
                    &[DISCOVERY],
                    &["endpointslices"],
                ),
                res(&["create"], &[DISCOVERY], &["endpointslices/restricted"]),
                ev(),
            ],
        ),
        controller(
            "expand-controller",
            vec![
                res(
                    &["get", "list", "watch", "update", "patch"],
                    &[CORE],
                    &["persistentvolumes"],
                ),
                res(
                    &["update", "patch"],
                    &[CORE],
                    &["persistentvolumeclaims/status"],
                ),
                res(READ, &[CORE], &["persistentvolumeclaims"]),
                ev(),
            ],
        ),
        controller(
            "ephemeral-volume-controller",
            vec![
                res(READ, &[CORE], &["pods"]),
                res(&["update"], &[CORE], &["pods/finalizers"]),
                res(
                    &["get", "list", "watch", "create"],
                    &[CORE],
                    &["persistentvolumeclaims"],
                ),
                ev(),
            ],
        ),
        controller(
            "generic-garbage-collector",
            vec![
                res(
                    &["get", "list", "watch", "patch", "update", "delete"],
                    &["*"],
                    &["*"],
                ),
                ev(),
            ],
        ),
        controller(
            "horizontal-pod-autoscaler",
            vec![
                res(READ, &[AUTOSCALING], &["horizontalpodautoscalers"]),
                res(
                    &["update"],
                    &[AUTOSCALING],
                    &["horizontalpodautoscalers/status"],
                ),
                res(&["get", "update"], &["*"], &["*/scale"]),
                res(&["list", "watch"], &[CORE], &["pods"]),
                res(&["list", "watch"], &["metrics.k8s.io"], &["pods"]),
                res(READ, &["custom.metrics.k8s.io"], &["*"]),
                res(READ, &["external.metrics.k8s.io"], &["*"]),
                ev(),
            ],
        ),
        controller(
            "job-controller",
            vec![
                res(
                    &["get", "list", "watch", "update", "patch"],
                    &[BATCH],
                    &["jobs"],
                ),
                res(&["update"], &[BATCH], &["jobs/status"]),
                res(&["update"], &[BATCH], &["jobs/finalizers"]),
                res(
                    &["list", "watch", "create", "delete", "patch"],
                    &[CORE],
                    &["pods"],
                ),
                ev(),
            ],
        ),
        controller(
            "namespace-controller",
            vec![
                res(
                    &["get", "list", "watch", "delete"],
                    &[CORE],
                    &["namespaces"],
                ),
                res(
                    &["update"],
                    &[CORE],
                    &["namespaces/finalize", "namespaces/status"],
                ),
                res(
                    &["get", "list", "watch", "delete", "deletecollection"],
                    &["*"],
                    &["*"],
                ),
            ],
        ),
        controller(
            "node-controller",
            vec![
                res(
                    &["get", "list", "watch", "update", "delete", "patch"],
                    &[CORE],
                    &["nodes"],
                ),
                res(&["patch", "update"], &[CORE], &["nodes/status"]),
                res(&["patch", "update"], &[CORE], &["pods/status"]),
                res(&["list", "watch", "get", "delete"], &[CORE], &["pods"]),
                res(READ, &[COORDINATION], &["leases"]),
                ev(),
            ],
        ),
        controller(
            "persistent-volume-binder",
            vec![
                res(
                    &["get", "list", "watch", "update", "create", "delete"],
                    &[CORE],
                    &["persistentvolumes"],
                ),
                res(&["update"], &[CORE], &["persistentvolumes/status"]),
                res(
                    &["get", "list", "watch", "update"],
                    &[CORE],
                    &["persistentvolumeclaims"],
                ),
                res(&["update"], &[CORE], &["persistentvolumeclaims/status"]),
                res(
                    &["list", "watch", "get", "create", "delete"],
                    &[CORE],
                    &["pods"],
                ),
                res(READ, &[STORAGE], &["storageclasses"]),
                res(&["list", "watch"], &[CORE], &["nodes"]),
                ev(),
                res(&["watch"], &[CORE], &["events"]),
            ],
        ),
        controller(
            "pod-garbage-collector",
            vec![
                res(&["list", "watch", "delete"], &[CORE], &["pods"]),
                res(READ, &[CORE], &["nodes"]),
                res(&["patch"], &[CORE], &["pods/status"]),
            ],
        ),
        controller(
            "replicaset-controller",
            vec![
                res(
                    &["get", "list", "watch", "update"],
                    &[APPS, EXTENSIONS],
                    &["replicasets"],
                ),
                res(&["update"], &[APPS, EXTENSIONS], &["replicasets/status"]),
                res(
                    &["update"],
                    &[APPS, EXTENSIONS],
                    &["replicasets/finalizers"],
                ),
                res(
                    &["list", "watch", "patch", "create", "delete"],
                    &[CORE],
                    &["pods"],
                ),
                ev(),
            ],
        ),
        controller(
            "replication-controller",
            vec![
                res(
                    &["get", "list", "watch", "update"],
                    &[CORE],
                    &["replicationcontrollers"],
                ),
                res(&["update"], &[CORE], &["replicationcontrollers/status"]),
                res(&["update"], &[CORE], &["replicationcontrollers/finalizers"]),
                res(
                    &["list", "watch", "patch", "create", "delete"],
                    &[CORE],
                    &["pods"],
                ),
                ev(),
            ],
        ),
        controller(
            "resourcequota-controller",
            vec![
                res(&["list", "watch"], &["*"], &["*"]),
                res(&["update"], &[CORE], &["resourcequotas/status"]),
                ev(),
            ],
        ),
        controller(
            "route-controller",
            vec![
                res(&["list", "watch"], &[CORE], &["nodes"]),
                res(&["patch"], &[CORE], &["nodes/status"]),
                ev(),
            ],
        ),
        controller(
            "service-account-controller",
            vec![res(&["create"], &[CORE], &["serviceaccounts"]), ev()],
        ),
        controller(
            "service-controller",
            vec![
                res(READ, &[CORE], &["services"]),
                res(&["patch", "update"], &[CORE], &["services/status"]),
                res(&["list", "watch"], &[CORE], &["nodes"]),
                ev(),
            ],
        ),
        controller(
            "service-cidrs-controller",
            vec![
                res(
                    &["get", "list", "watch", "patch", "update"],
                    &[NETWORKING],
                    &["servicecidrs"],
                ),
                res(
                    &["patch", "update"],
                    &[NETWORKING],
                    &["servicecidrs/finalizers"],
                ),
                res(
                    &["patch", "update"],
                    &[NETWORKING],
                    &["servicecidrs/status"],
                ),
                res(READ, &[NETWORKING], &["ipaddresses"]),
                ev(),
            ],
        ),
        controller(
            "statefulset-controller",
            vec![
                res(&["list", "watch"], &[CORE], &["pods"]),
                res(READ, &[APPS], &["statefulsets"]),
                res(&["update"], &[APPS], &["statefulsets/status"]),
                res(&["update"], &[APPS], &["statefulsets/finalizers"]),
                res(
                    &["get", "create", "delete", "update", "patch"],
                    &[CORE],
                    &["pods"],
                ),
                res(
                    &[
                        "get", "create", "delete", "update", "patch", "list", "watch",
                    ],
                    &[APPS],
                    &["controllerrevisions"],
                ),
                res(
                    &["get", "create", "list", "watch"],
                    &[CORE],
                    &["persistentvolumeclaims"],
                ),
                res(&["update", "delete"], &[CORE], &["persistentvolumeclaims"]),
                res(&["update"], &[CORE], &["pods/finalizers"]),
                ev(),
            ],
        ),
        controller(
            "ttl-controller",
            vec![
                res(&["update", "patch", "list", "watch"], &[CORE], &["nodes"]),
                ev(),
            ],
        ),
        controller(
            "certificate-controller",
            vec![
                res(
                    &["get", "list", "watch", "delete"],
                    &[CERTS],
                    &["certificatesigningrequests"],
                ),
                res(
                    &["update"],
                    &[CERTS],
                    &[
                        "certificatesigningrequests/status",
                        "certificatesigningrequests/approval",
                    ],
                ),
                res(&["approve"], &[CERTS], &["signers"])
                    .names(&["kubernetes.io/kube-apiserver-client-kubelet"]),
                res(&["sign"], &[CERTS], &["signers"]).names(&[
                    "kubernetes.io/legacy-unknown",
                    "kubernetes.io/kube-apiserver-client",
                    "kubernetes.io/kube-apiserver-client-kubelet",
                    "kubernetes.io/kubelet-serving",
                ]),
                res(&["create"], &[AUTHZ], &["subjectaccessreviews"]),
                ev(),
            ],
        ),
        controller(
            "pvc-protection-controller",
            vec![
                res(
                    &["get", "list", "watch", "update"],
                    &[CORE],
                    &["persistentvolumeclaims"],
                ),
                res(&["update"], &[CORE], &["persistentvolumeclaims/status"]),
                res(READ, &[CORE], &["pods"]),
                ev(),
            ],
        ),
        controller(
            "pv-protection-controller",
            vec![
                res(
                    &["get", "list", "watch", "update"],
                    &[CORE],
                    &["persistentvolumes"],
                ),
                ev(),
            ],
        ),
        controller(
            "ttl-after-finished-controller",
            vec![
                res(&["get", "list", "watch", "delete"], &[BATCH], &["jobs"]),
                ev(),
            ],
        ),
        controller(
            "root-ca-cert-publisher",
            vec![res(&["create", "update"], &[CORE], &["configmaps"]), ev()],
        ),
        controller(
            "validatingadmissionpolicy-status-controller",
            vec![
                res(
                    READ,
                    &["admissionregistration.k8s.io"],
                    &["validatingadmissionpolicies"],
                ),
                res(
                    &["get", "patch", "update"],
                    &["admissionregistration.k8s.io"],
                    &["validatingadmissionpolicies/status"],
                ),
                ev(),
            ],
        ),
        controller(
            "legacy-service-account-token-cleaner",
            vec![
                res(&["get"], &[CORE], &["configmaps"])
                    .names(&["kube-apiserver-legacy-service-account-token-tracking"]),
                res(&["patch", "delete"], &[CORE], &["secrets"]),
            ],
        ),
        // SELinuxChangePolicy (beta, on by default in 1.33).
        controller(
            "selinux-warning-controller",
            vec![
                ev(),
                res(READ, &[CORE], &["persistentvolumes"]),
                res(READ, &[CORE], &["persistentvolumeclaims"]),
                res(READ, &[CORE], &["pods"]),
                res(READ, &[STORAGE], &["csidrivers"]),
            ],
        ),
    ]
}
