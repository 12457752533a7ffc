//! The rules behind the user-facing `edit` and `view` roles (upstream's
//! `system:aggregate-to-edit` and `system:aggregate-to-view`), and the aggregation labels.
//!
//! `view` reads what a namespace holds except secrets and RBAC; `edit` adds writes and reads of
//! escalating resources (secrets, exec, attach, port-forward, proxies); `admin` adds Roles,
//! RoleBindings and local access reviews. Our tables, written from what upstream 1.33 creates
//! with default feature gates (events stay in the core group only; DRA is off).

use super::{READ, READ_WRITE, WRITE, res};
use crate::rule::RuleBuilder;

const CORE: &str = "";
const APPS: &str = "apps";
const AUTOSCALING: &str = "autoscaling";
const BATCH: &str = "batch";
const COORDINATION: &str = "coordination.k8s.io";
const DISCOVERY: &str = "discovery.k8s.io";
const EXTENSIONS: &str = "extensions";
const NETWORKING: &str = "networking.k8s.io";
const POLICY: &str = "policy";

/// ClusterRoles with this label are aggregated into `admin`.
pub(super) const AGGREGATE_TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
/// ClusterRoles with this label are aggregated into `edit` (and so `admin`).
pub(super) const AGGREGATE_TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
/// ClusterRoles with this label are aggregated into `view` (and so `edit` and `admin`).
pub(super) const AGGREGATE_TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

/// `system:aggregate-to-edit`: writing workloads and reading escalating resources.
pub(super) fn aggregate_to_edit() -> Vec<RuleBuilder> {
    vec![
        res(
            READ,
            &[CORE],
            &[
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
                "secrets",
                "services/proxy",
            ],
        ),
        res(&["impersonate"], &[CORE], &["serviceaccounts"]),
        res(
            WRITE,
            &[CORE],
            &[
                "pods",
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
            ],
        ),
        res(&["create"], &[CORE], &["pods/eviction"]),
        res(
            WRITE,
            &[CORE],
            &[
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/proxy",
                "persistentvolumeclaims",
                "configmaps",
                "secrets",
                "events",
            ],
        ),
        res(&["create"], &[CORE], &["serviceaccounts/token"]),
        res(
            WRITE,
            &[APPS],
            &[
                "statefulsets",
                "statefulsets/scale",
                "daemonsets",
                "deployments",
                "deployments/scale",
                "deployments/rollback",
                "replicasets",
                "replicasets/scale",
            ],
        ),
        res(WRITE, &[AUTOSCALING], &["horizontalpodautoscalers"]),
        res(WRITE, &[BATCH], &["jobs", "cronjobs"]),
        res(
            WRITE,
            &[EXTENSIONS],
            &[
                "daemonsets",
                "deployments",
                "deployments/scale",
                "deployments/rollback",
                "ingresses",
                "replicasets",
                "replicasets/scale",
                "replicationcontrollers/scale",
                "networkpolicies",
            ],
        ),
        res(WRITE, &[POLICY], &["poddisruptionbudgets"]),
        res(WRITE, &[NETWORKING], &["networkpolicies", "ingresses"]),
        res(READ_WRITE, &[COORDINATION], &["leases"]),
    ]
}

/// `system:aggregate-to-view`: reading non-escalating namespace resources.
pub(super) fn aggregate_to_view() -> Vec<RuleBuilder> {
    vec![
        res(
            READ,
            &[CORE],
            &[
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "configmaps",
            ],
        ),
        res(
            READ,
            &[CORE],
            &[
                "limitranges",
                "resourcequotas",
                "bindings",
                "events",
                "pods/status",
                "resourcequotas/status",
                "namespaces/status",
                "replicationcontrollers/status",
                "pods/log",
            ],
        ),
        // Reading namespaces at namespace scope means reading *this* namespace.
        res(READ, &[CORE], &["namespaces"]),
        res(READ, &[DISCOVERY], &["endpointslices"]),
        res(
            READ,
            &[APPS],
            &[
                "controllerrevisions",
                "statefulsets",
                "statefulsets/status",
                "statefulsets/scale",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/status",
                "deployments/scale",
                "replicasets",
                "replicasets/status",
                "replicasets/scale",
            ],
        ),
        res(
            READ,
            &[AUTOSCALING],
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
        ),
        res(
            READ,
            &[BATCH],
            &["jobs", "cronjobs", "cronjobs/status", "jobs/status"],
        ),
        res(
            READ,
            &[EXTENSIONS],
            &[
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "ingresses",
                "ingresses/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "replicationcontrollers/scale",
                "networkpolicies",
            ],
        ),
        res(
            READ,
            &[POLICY],
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        ),
        res(
            READ,
            &[NETWORKING],
            &["networkpolicies", "ingresses", "ingresses/status"],
        ),
    ]
}
