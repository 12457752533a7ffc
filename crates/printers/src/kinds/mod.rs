//! The built-in printers, one per kind, and the lookup from (group, kind) to printer.
//!
//! Each printer is a static column list plus a row function over the stored JSON object,
//! mirroring upstream's `pkg/printers/internalversion`. The apiserver always asks upstream's
//! printers for wide output, so every row carries the priority-1 cells too and kubectl hides
//! them unless `-o wide`. Kinds without an upstream printer (Role, ClusterRole, LimitRange,
//! CustomResourceDefinition...) fall back to the default `Name`/`Created At` table.
//!
//! Where upstream prints a field that its defaulting always sets (a Service's `type`, a port's
//! `protocol`, a Deployment's `replicas`...), an object that lacks it prints as if defaulted,
//! so the output equals upstream's for every object upstream could have stored.

mod access;
mod apps;
mod autoscaling;
mod batch;
mod core;
mod event;
mod network;
mod pod;
mod storage;

use serde_json::Value;

use crate::column::{Def, Row};
use crate::time::Instant;

/// A built-in printer: its columns and how to fill a row.
pub(crate) struct Printer {
    pub columns: &'static [Def],
    pub row: fn(&Value, Instant) -> Row,
}

/// Every built-in printer by API group and kind.
static PRINTERS: &[(&str, &str, &Printer)] = &[
    ("", "Pod", &pod::POD),
    ("", "PodTemplate", &apps::POD_TEMPLATE),
    ("", "ReplicationController", &apps::REPLICATION_CONTROLLER),
    ("", "Service", &network::SERVICE),
    ("", "Endpoints", &network::ENDPOINTS),
    ("", "Node", &core::NODE),
    ("", "Event", &event::CORE_EVENT),
    ("events.k8s.io", "Event", &event::EVENTS_EVENT),
    ("", "Namespace", &core::NAMESPACE),
    ("", "Secret", &core::SECRET),
    ("", "ConfigMap", &core::CONFIG_MAP),
    ("", "ServiceAccount", &core::SERVICE_ACCOUNT),
    ("", "ResourceQuota", &core::RESOURCE_QUOTA),
    ("", "PersistentVolume", &storage::PERSISTENT_VOLUME),
    (
        "",
        "PersistentVolumeClaim",
        &storage::PERSISTENT_VOLUME_CLAIM,
    ),
    ("apps", "Deployment", &apps::DEPLOYMENT),
    ("apps", "ReplicaSet", &apps::REPLICA_SET),
    ("apps", "StatefulSet", &apps::STATEFUL_SET),
    ("apps", "DaemonSet", &apps::DAEMON_SET),
    ("apps", "ControllerRevision", &apps::CONTROLLER_REVISION),
    ("batch", "Job", &batch::JOB),
    ("batch", "CronJob", &batch::CRON_JOB),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        &autoscaling::HORIZONTAL_POD_AUTOSCALER,
    ),
    ("autoscaling", "Scale", &autoscaling::SCALE),
    (
        "policy",
        "PodDisruptionBudget",
        &autoscaling::POD_DISRUPTION_BUDGET,
    ),
    ("coordination.k8s.io", "Lease", &core::LEASE),
    (
        "discovery.k8s.io",
        "EndpointSlice",
        &network::ENDPOINT_SLICE,
    ),
    ("networking.k8s.io", "Ingress", &network::INGRESS),
    ("networking.k8s.io", "IngressClass", &network::INGRESS_CLASS),
    (
        "networking.k8s.io",
        "NetworkPolicy",
        &network::NETWORK_POLICY,
    ),
    (
        "rbac.authorization.k8s.io",
        "RoleBinding",
        &access::ROLE_BINDING,
    ),
    (
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        &access::CLUSTER_ROLE_BINDING,
    ),
    (
        "scheduling.k8s.io",
        "PriorityClass",
        &access::PRIORITY_CLASS,
    ),
    ("node.k8s.io", "RuntimeClass", &core::RUNTIME_CLASS),
    ("apiregistration.k8s.io", "APIService", &access::API_SERVICE),
    (
        "flowcontrol.apiserver.k8s.io",
        "FlowSchema",
        &access::FLOW_SCHEMA,
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        "PriorityLevelConfiguration",
        &access::PRIORITY_LEVEL_CONFIGURATION,
    ),
    ("storage.k8s.io", "StorageClass", &storage::STORAGE_CLASS),
    ("storage.k8s.io", "CSIDriver", &storage::CSI_DRIVER),
    ("storage.k8s.io", "CSINode", &storage::CSI_NODE),
    (
        "storage.k8s.io",
        "VolumeAttachment",
        &storage::VOLUME_ATTACHMENT,
    ),
    (
        "storage.k8s.io",
        "CSIStorageCapacity",
        &storage::CSI_STORAGE_CAPACITY,
    ),
    (
        "certificates.k8s.io",
        "CertificateSigningRequest",
        &access::CERTIFICATE_SIGNING_REQUEST,
    ),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        &access::MUTATING_WEBHOOK,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        &access::VALIDATING_WEBHOOK,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicy",
        &access::VALIDATING_ADMISSION_POLICY,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
        &access::VALIDATING_ADMISSION_POLICY_BINDING,
    ),
];

impl std::fmt::Debug for Printer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.columns.iter().map(|c| c.name).collect();
        f.debug_struct("Printer").field("columns", &names).finish()
    }
}

/// Printers are statics: two are the same printer when they are the same static.
impl PartialEq for Printer {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

/// The built-in printer of a kind, if upstream has one.
pub(crate) fn lookup(group: &str, kind: &str) -> Option<&'static Printer> {
    PRINTERS
        .iter()
        .find(|(g, k, _)| *g == group && *k == kind)
        .map(|(_, _, p)| *p)
}

/// Helpers shared by the printers' unit tests.
#[cfg(test)]
pub(crate) mod testutil {
    use serde_json::Value;

    use super::Printer;
    use crate::time::{Instant, parse_rfc3339};

    /// The clock every printer test reads: 2024-05-01T12:00:00Z.
    pub(crate) fn now() -> Instant {
        parse_rfc3339("2024-05-01T12:00:00Z").unwrap()
    }

    /// The RFC 3339 timestamp `seconds` before [`now`].
    pub(crate) fn ago(seconds: i64) -> String {
        crate::time::format_rfc3339_utc(Instant::from_unix(now().unix_seconds() - seconds, 0))
    }

    /// The cells a printer produces for an object at [`now`], checked against its columns.
    pub(crate) fn cells(p: &Printer, obj: &Value) -> Vec<Value> {
        let row = (p.row)(obj, now());
        assert_eq!(row.cells.len(), p.columns.len(), "one cell per column");
        row.cells
    }

    /// The names of a printer's columns.
    pub(crate) fn names(p: &Printer) -> Vec<&'static str> {
        p.columns.iter().map(|c| c.name).collect()
    }

    /// The names of a printer's columns shown without `-o wide`.
    pub(crate) fn default_names(p: &Printer) -> Vec<&'static str> {
        p.columns
            .iter()
            .filter(|c| c.priority == 0)
            .map(|c| c.name)
            .collect()
    }
}

#[cfg(test)]
#[path = "catalogue_tests.rs"]
mod catalogue_tests;
