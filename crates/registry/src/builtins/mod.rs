//! Strategies of the built-in resources: defaulting, server-owned fields, validation with
//! upstream's paths and messages, and selectable fields, as kube-apiserver 1.33 has them.
//!
//! One file per resource (or closely related group); `podspec` holds what every pod-owning
//! resource shares, `workload` and `jobspec` what controllers share, `util` and `gofmt` the
//! field checks and upstream's rendering of values in messages. Resources without special
//! rules use the default strategy.

mod autoscaling;
mod certificates;
mod cronjob;
mod daemonset;
mod deployment;
mod endpoints;
mod events;
mod gofmt;
mod job;
mod jobspec;
mod lease;
mod namespace;
mod node;
mod pdb;
mod persistentvolume;
mod pod;
mod podspec;
mod priorityclass;
mod rbac;
mod replicaset;
mod secret;
mod service;
mod statefulset;
mod storageclass;
mod util;
mod workload;

use std::sync::Arc;

use apimachinery::builtin;

pub use autoscaling::HorizontalPodAutoscalerStrategy;
pub use certificates::CertificateSigningRequestStrategy;
pub use cronjob::CronJobStrategy;
pub use daemonset::DaemonSetStrategy;
pub use deployment::DeploymentStrategy;
pub use endpoints::{EndpointSliceStrategy, EndpointsStrategy};
pub use events::{EventStrategy, EventsV1Strategy};
pub use job::JobStrategy;
pub use lease::LeaseStrategy;
pub use namespace::NamespaceStrategy;
pub use node::NodeStrategy;
pub use pdb::PodDisruptionBudgetStrategy;
pub use persistentvolume::{PersistentVolumeClaimStrategy, PersistentVolumeStrategy};
pub use pod::{PodStrategy, PodTemplateStrategy};
pub use priorityclass::PriorityClassStrategy;
pub use rbac::{RbacKind, RbacStrategy};
pub use replicaset::{ReplicaSetStrategy, ReplicationControllerStrategy};
pub use secret::{ConfigMapStrategy, SecretStrategy};
pub use service::ServiceStrategy;
pub use statefulset::StatefulSetStrategy;
pub use storageclass::StorageClassStrategy;

use crate::resource::ResourceDef;
use crate::strategy::{DefaultStrategy, Strategy};

/// The strategy of a built-in resource.
pub fn strategy(r: &builtin::Resource) -> Arc<dyn Strategy> {
    match (r.group, r.plural) {
        ("", "namespaces") => Arc::new(NamespaceStrategy),
        ("", "services") => Arc::new(ServiceStrategy),
        ("", "pods") => Arc::new(PodStrategy),
        ("", "podtemplates") => Arc::new(PodTemplateStrategy),
        ("", "replicationcontrollers") => Arc::new(ReplicationControllerStrategy),
        ("", "events") => Arc::new(EventStrategy),
        ("events.k8s.io", "events") => Arc::new(EventsV1Strategy),
        ("", "secrets") => Arc::new(SecretStrategy),
        ("", "configmaps") => Arc::new(ConfigMapStrategy),
        ("", "nodes") => Arc::new(NodeStrategy),
        ("", "endpoints") => Arc::new(EndpointsStrategy),
        ("discovery.k8s.io", "endpointslices") => Arc::new(EndpointSliceStrategy),
        ("", "persistentvolumeclaims") => Arc::new(PersistentVolumeClaimStrategy),
        ("", "persistentvolumes") => Arc::new(PersistentVolumeStrategy),
        ("apps", "deployments") => Arc::new(DeploymentStrategy),
        ("apps", "replicasets") => Arc::new(ReplicaSetStrategy),
        ("apps", "statefulsets") => Arc::new(StatefulSetStrategy),
        ("apps", "daemonsets") => Arc::new(DaemonSetStrategy),
        ("batch", "jobs") => Arc::new(JobStrategy),
        ("batch", "cronjobs") => Arc::new(CronJobStrategy),
        ("autoscaling", "horizontalpodautoscalers") => Arc::new(HorizontalPodAutoscalerStrategy),
        ("policy", "poddisruptionbudgets") => Arc::new(PodDisruptionBudgetStrategy),
        ("rbac.authorization.k8s.io", "roles") => Arc::new(RbacStrategy(RbacKind::Role)),
        ("rbac.authorization.k8s.io", "clusterroles") => {
            Arc::new(RbacStrategy(RbacKind::ClusterRole))
        }
        ("rbac.authorization.k8s.io", "rolebindings") => {
            Arc::new(RbacStrategy(RbacKind::RoleBinding))
        }
        ("rbac.authorization.k8s.io", "clusterrolebindings") => {
            Arc::new(RbacStrategy(RbacKind::ClusterRoleBinding))
        }
        ("scheduling.k8s.io", "priorityclasses") => Arc::new(PriorityClassStrategy),
        ("storage.k8s.io", "storageclasses") => Arc::new(StorageClassStrategy),
        ("coordination.k8s.io", "leases") => Arc::new(LeaseStrategy),
        ("certificates.k8s.io", "certificatesigningrequests") => {
            Arc::new(CertificateSigningRequestStrategy)
        }
        _ => Arc::new(DefaultStrategy),
    }
}

/// Every built-in resource with its strategy.
pub fn resources() -> Vec<ResourceDef> {
    builtin::RESOURCES
        .iter()
        .chain(std::iter::once(&openapi::CUSTOM_RESOURCE_DEFINITIONS))
        .map(|r| {
            ResourceDef::builtin(
                r,
                strategy(r),
                openapi::builtin_schema(r.group, r.version, r.kind),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_with_rules_gets_its_strategy() {
        let find = |group: &str, plural: &str| {
            builtin::RESOURCES
                .iter()
                .find(|r| r.group == group && r.plural == plural)
                .map(strategy)
        };
        let names =
            |s: Option<Arc<dyn Strategy>>| s.map(|s| s.field_names().to_vec()).unwrap_or_default();
        assert_eq!(names(find("", "secrets")), vec!["type"]);
        assert_eq!(names(find("apps", "replicasets")), vec!["status.replicas"]);
        assert_eq!(
            names(find("", "replicationcontrollers")),
            vec!["status.replicas"]
        );
        assert_eq!(names(find("batch", "jobs")), vec!["status.successful"]);
        assert_eq!(
            names(find("certificates.k8s.io", "certificatesigningrequests")),
            vec!["spec.signerName"]
        );
        assert_eq!(names(find("", "namespaces")), vec!["status.phase"]);
        assert_eq!(names(find("", "nodes")), vec!["spec.unschedulable"]);
        assert!(names(find("events.k8s.io", "events")).contains(&"regarding.name"));
        assert!(names(find("", "events")).contains(&"involvedObject.name"));
        assert!(names(find("", "pods")).contains(&"spec.nodeName"));
    }

    #[test]
    fn resources_cover_the_catalogue() {
        assert_eq!(resources().len(), builtin::RESOURCES.len() + 1);
    }
}
