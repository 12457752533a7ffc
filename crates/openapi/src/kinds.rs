//! Which k8s-openapi type describes each built-in kind Matryoshka serves.
//!
//! Every kind of [`apimachinery::builtin::RESOURCES`] appears here, plus the kinds that only
//! travel through subresources or as request/response envelopes (Scale, Eviction, TokenRequest,
//! Status, DeleteOptions, WatchEvent, APIResourceList) and the CustomResourceDefinition kind of
//! `apiextensions.k8s.io/v1`. A test checks the catalogue covers `RESOURCES`.

use apimachinery::builtin::{ALL, Resource, Subresource};
use k8s_openapi::api;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use schemars::SchemaGenerator;

/// Generates the `$ref` to a kind's schema, registering its definitions in the generator.
pub(crate) type SchemaFn = fn(&mut SchemaGenerator) -> schemars::Schema;

/// A built-in kind and the type whose `JsonSchema` describes it.
#[derive(Clone, Copy)]
pub(crate) struct KindType {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub schema: SchemaFn,
}

macro_rules! kinds {
    ($( $group:literal $version:literal $kind:literal => $ty:ty ;)*) => {
        &[$(
            KindType {
                group: $group,
                version: $version,
                kind: $kind,
                schema: |g: &mut SchemaGenerator| g.subschema_for::<$ty>(),
            },
        )*]
    };
}

/// Every built-in kind with a schema.
pub(crate) static KINDS: &[KindType] = kinds! {
    "" "v1" "Binding" => api::core::v1::Binding;
    "" "v1" "ConfigMap" => api::core::v1::ConfigMap;
    "" "v1" "Endpoints" => api::core::v1::Endpoints;
    "" "v1" "Event" => api::core::v1::Event;
    "" "v1" "LimitRange" => api::core::v1::LimitRange;
    "" "v1" "Namespace" => api::core::v1::Namespace;
    "" "v1" "Node" => api::core::v1::Node;
    "" "v1" "PersistentVolumeClaim" => api::core::v1::PersistentVolumeClaim;
    "" "v1" "PersistentVolume" => api::core::v1::PersistentVolume;
    "" "v1" "Pod" => api::core::v1::Pod;
    "" "v1" "PodTemplate" => api::core::v1::PodTemplate;
    "" "v1" "ReplicationController" => api::core::v1::ReplicationController;
    "" "v1" "ResourceQuota" => api::core::v1::ResourceQuota;
    "" "v1" "Secret" => api::core::v1::Secret;
    "" "v1" "ServiceAccount" => api::core::v1::ServiceAccount;
    "" "v1" "Service" => api::core::v1::Service;
    "admissionregistration.k8s.io" "v1" "MutatingWebhookConfiguration" => api::admissionregistration::v1::MutatingWebhookConfiguration;
    "admissionregistration.k8s.io" "v1" "ValidatingAdmissionPolicy" => api::admissionregistration::v1::ValidatingAdmissionPolicy;
    "admissionregistration.k8s.io" "v1" "ValidatingAdmissionPolicyBinding" => api::admissionregistration::v1::ValidatingAdmissionPolicyBinding;
    "admissionregistration.k8s.io" "v1" "ValidatingWebhookConfiguration" => api::admissionregistration::v1::ValidatingWebhookConfiguration;
    "apiextensions.k8s.io" "v1" "CustomResourceDefinition" => apiextensions::CustomResourceDefinition;
    "apiregistration.k8s.io" "v1" "APIService" => k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    "apps" "v1" "ControllerRevision" => api::apps::v1::ControllerRevision;
    "apps" "v1" "DaemonSet" => api::apps::v1::DaemonSet;
    "apps" "v1" "Deployment" => api::apps::v1::Deployment;
    "apps" "v1" "ReplicaSet" => api::apps::v1::ReplicaSet;
    "apps" "v1" "StatefulSet" => api::apps::v1::StatefulSet;
    "authentication.k8s.io" "v1" "SelfSubjectReview" => api::authentication::v1::SelfSubjectReview;
    "authentication.k8s.io" "v1" "TokenReview" => api::authentication::v1::TokenReview;
    "authentication.k8s.io" "v1" "TokenRequest" => api::authentication::v1::TokenRequest;
    "authorization.k8s.io" "v1" "LocalSubjectAccessReview" => api::authorization::v1::LocalSubjectAccessReview;
    "authorization.k8s.io" "v1" "SelfSubjectAccessReview" => api::authorization::v1::SelfSubjectAccessReview;
    "authorization.k8s.io" "v1" "SelfSubjectRulesReview" => api::authorization::v1::SelfSubjectRulesReview;
    "authorization.k8s.io" "v1" "SubjectAccessReview" => api::authorization::v1::SubjectAccessReview;
    "autoscaling" "v1" "Scale" => api::autoscaling::v1::Scale;
    "autoscaling" "v1" "HorizontalPodAutoscaler" => api::autoscaling::v1::HorizontalPodAutoscaler;
    "autoscaling" "v2" "HorizontalPodAutoscaler" => api::autoscaling::v2::HorizontalPodAutoscaler;
    "batch" "v1" "CronJob" => api::batch::v1::CronJob;
    "batch" "v1" "Job" => api::batch::v1::Job;
    "certificates.k8s.io" "v1" "CertificateSigningRequest" => api::certificates::v1::CertificateSigningRequest;
    "coordination.k8s.io" "v1" "Lease" => api::coordination::v1::Lease;
    "discovery.k8s.io" "v1" "EndpointSlice" => api::discovery::v1::EndpointSlice;
    "events.k8s.io" "v1" "Event" => api::events::v1::Event;
    "flowcontrol.apiserver.k8s.io" "v1" "FlowSchema" => api::flowcontrol::v1::FlowSchema;
    "flowcontrol.apiserver.k8s.io" "v1" "PriorityLevelConfiguration" => api::flowcontrol::v1::PriorityLevelConfiguration;
    "networking.k8s.io" "v1" "IngressClass" => api::networking::v1::IngressClass;
    "networking.k8s.io" "v1" "Ingress" => api::networking::v1::Ingress;
    "networking.k8s.io" "v1" "NetworkPolicy" => api::networking::v1::NetworkPolicy;
    "node.k8s.io" "v1" "RuntimeClass" => api::node::v1::RuntimeClass;
    "policy" "v1" "Eviction" => api::policy::v1::Eviction;
    "policy" "v1" "PodDisruptionBudget" => api::policy::v1::PodDisruptionBudget;
    "rbac.authorization.k8s.io" "v1" "ClusterRoleBinding" => api::rbac::v1::ClusterRoleBinding;
    "rbac.authorization.k8s.io" "v1" "ClusterRole" => api::rbac::v1::ClusterRole;
    "rbac.authorization.k8s.io" "v1" "RoleBinding" => api::rbac::v1::RoleBinding;
    "rbac.authorization.k8s.io" "v1" "Role" => api::rbac::v1::Role;
    "scheduling.k8s.io" "v1" "PriorityClass" => api::scheduling::v1::PriorityClass;
    "storage.k8s.io" "v1" "CSIDriver" => api::storage::v1::CSIDriver;
    "storage.k8s.io" "v1" "CSINode" => api::storage::v1::CSINode;
    "storage.k8s.io" "v1" "CSIStorageCapacity" => api::storage::v1::CSIStorageCapacity;
    "storage.k8s.io" "v1" "StorageClass" => api::storage::v1::StorageClass;
    "storage.k8s.io" "v1" "VolumeAttachment" => api::storage::v1::VolumeAttachment;
    "" "v1" "Status" => meta::Status;
    "" "v1" "DeleteOptions" => meta::DeleteOptions;
    "" "v1" "WatchEvent" => meta::WatchEvent<RawExtension>;
    "" "v1" "APIResourceList" => meta::APIResourceList;
    "" "v1" "APIVersions" => meta::APIVersions;
    "" "v1" "APIGroup" => meta::APIGroup;
    "" "v1" "APIGroupList" => meta::APIGroupList;
};

/// Definitions the documents reference that are not kinds: the PATCH body, list metadata and
/// the `/version` answer.
pub(crate) static SUPPORT: &[SchemaFn] = &[
    |g: &mut SchemaGenerator| g.subschema_for::<meta::Patch>(),
    |g: &mut SchemaGenerator| g.subschema_for::<meta::ListMeta>(),
    |g: &mut SchemaGenerator| g.subschema_for::<k8s_openapi::apimachinery::pkg::version::Info>(),
];

/// The kinds registered in every group-version (upstream's `AddToGroupVersion`): they carry one
/// `x-kubernetes-group-version-kind` entry per served group-version.
pub(crate) const EVERY_GROUP_VERSION: &[&str] = &["DeleteOptions", "WatchEvent"];

const GPU: &[&str] = &["get", "patch", "update"];

/// `apiextensions.k8s.io/v1 customresourcedefinitions`: served by Matryoshka but not part of
/// the `builtin::RESOURCES` catalogue, which lists what the registry strategies serve.
pub static CUSTOM_RESOURCE_DEFINITIONS: Resource = Resource {
    group: "apiextensions.k8s.io",
    version: "v1",
    kind: "CustomResourceDefinition",
    plural: "customresourcedefinitions",
    singular: "customresourcedefinition",
    namespaced: false,
    short_names: &["crd", "crds"],
    categories: &["api-extensions"],
    verbs: ALL,
    subresources: &[Subresource {
        name: "status",
        group: "apiextensions.k8s.io",
        version: "v1",
        kind: "CustomResourceDefinition",
        verbs: GPU,
    }],
};

/// Every resource with an OpenAPI document: the built-in catalogue plus CRDs.
pub(crate) fn served_resources() -> impl Iterator<Item = &'static Resource> {
    apimachinery::builtin::RESOURCES
        .iter()
        .chain(std::iter::once(&CUSTOM_RESOURCE_DEFINITIONS))
}

/// The served group-versions, core first, in catalogue order, without repeats.
pub(crate) fn served_group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for r in served_resources() {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalogue_resource_has_a_kind_type() {
        for r in served_resources() {
            assert!(
                KINDS
                    .iter()
                    .any(|k| (k.group, k.version, k.kind) == (r.group, r.version, r.kind)),
                "{}/{} {}",
                r.group,
                r.version,
                r.kind
            );
            for s in r.subresources {
                // Streams, not objects: their options kinds have no schema.
                if s.name == "log" || crate::params::connect(r.plural, s.name).is_some() {
                    continue;
                }
                assert!(
                    KINDS
                        .iter()
                        .any(|k| (k.group, k.version, k.kind) == (s.group, s.version, s.kind)),
                    "{}/{} {} subresource {}",
                    r.group,
                    r.version,
                    r.kind,
                    s.name
                );
            }
        }
    }

    #[test]
    fn served_group_versions_start_with_core() {
        let gvs = served_group_versions();
        assert_eq!(gvs[0], ("", "v1"));
        assert!(gvs.contains(&("apiextensions.k8s.io", "v1")));
        assert!(gvs.contains(&("autoscaling", "v1")));
    }
}
