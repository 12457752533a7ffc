//! Which protobuf message an `apiVersion` + `kind` names.
//!
//! A built-in group maps to a k8s-pb package (`apps` → `api.apps`, the core group `""` →
//! `api.core`, `apiextensions.k8s.io` → `apiextensions_apiserver.pkg.apis.apiextensions`), and the
//! message is `<package>.<version>.<kind>`. The `meta.k8s.io/v1` kinds (`DeleteOptions`, `Status`,
//! `WatchEvent`, ...) are registered in every group version, so clients may send them under any
//! apiVersion (client-go's typed clients send `DeleteOptions` with their own group version).
//! Only messages that are kinds resolve: those with a `metadata` field, plus the known kinds
//! without one; `apps/v1` + `DeploymentSpec` does not.

use crate::message::{self, Message};

/// API group → k8s-pb package prefix.
const GROUPS: &[(&str, &str)] = &[
    ("", "api.core"),
    ("admission.k8s.io", "api.admission"),
    ("admissionregistration.k8s.io", "api.admissionregistration"),
    ("apidiscovery.k8s.io", "api.apidiscovery"),
    (
        "apiextensions.k8s.io",
        "apiextensions_apiserver.pkg.apis.apiextensions",
    ),
    ("apps", "api.apps"),
    ("authentication.k8s.io", "api.authentication"),
    ("authorization.k8s.io", "api.authorization"),
    ("autoscaling", "api.autoscaling"),
    ("batch", "api.batch"),
    ("certificates.k8s.io", "api.certificates"),
    ("coordination.k8s.io", "api.coordination"),
    ("discovery.k8s.io", "api.discovery"),
    ("events.k8s.io", "api.events"),
    ("extensions", "api.extensions"),
    ("flowcontrol.apiserver.k8s.io", "api.flowcontrol"),
    ("imagepolicy.k8s.io", "api.imagepolicy"),
    ("internal.apiserver.k8s.io", "api.apiserverinternal"),
    ("meta.k8s.io", "apimachinery.pkg.apis.meta"),
    ("networking.k8s.io", "api.networking"),
    ("node.k8s.io", "api.node"),
    ("policy", "api.policy"),
    ("rbac.authorization.k8s.io", "api.rbac"),
    ("resource.k8s.io", "api.resource"),
    ("scheduling.k8s.io", "api.scheduling"),
    ("storage.k8s.io", "api.storage"),
    ("storagemigration.k8s.io", "api.storagemigration"),
];

/// `meta.k8s.io/v1` kinds that every group version carries.
const META_KINDS: &[&str] = &[
    "APIGroup",
    "APIGroupList",
    "APIResourceList",
    "APIVersions",
    "CreateOptions",
    "DeleteOptions",
    "GetOptions",
    "List",
    "ListOptions",
    "PartialObjectMetadata",
    "PartialObjectMetadataList",
    "PatchOptions",
    "Status",
    "Table",
    "UpdateOptions",
    "WatchEvent",
];

/// Kinds without a `metadata` field that are still sent as top-level objects.
const KINDS_WITHOUT_METADATA: &[&str] = &[
    "NodeProxyOptions",
    "PodAttachOptions",
    "PodExecOptions",
    "PodLogOptions",
    "PodPortForwardOptions",
    "PodProxyOptions",
    "ServiceProxyOptions",
];

/// The message for an apiVersion and kind, if it is a known built-in kind.
pub(crate) fn lookup(api_version: &str, kind: &str) -> Option<&'static Message> {
    if kind.is_empty() || !kind.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    if version.is_empty() || !version.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    let in_group = GROUPS
        .iter()
        .find(|(g, _)| *g == group)
        .and_then(|(_, pkg)| message::find(&format!("{pkg}.{version}.{kind}")))
        .filter(|m| is_kind(m, kind));
    in_group.or_else(|| {
        META_KINDS
            .contains(&kind)
            .then(|| message::find(&format!("apimachinery.pkg.apis.meta.v1.{kind}")))
            .flatten()
    })
}

fn is_kind(message: &Message, kind: &str) -> bool {
    message.by_json("metadata").is_some()
        || KINDS_WITHOUT_METADATA.contains(&kind)
        || META_KINDS.contains(&kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(api_version: &str, kind: &str) -> Option<&'static str> {
        lookup(api_version, kind).map(|m| m.name)
    }

    #[test]
    fn built_in_kinds_map_to_their_packages() {
        assert_eq!(
            name("apps/v1", "Deployment"),
            Some("api.apps.v1.Deployment")
        );
        assert_eq!(name("v1", "Pod"), Some("api.core.v1.Pod"));
        assert_eq!(
            name("autoscaling/v1", "Scale"),
            Some("api.autoscaling.v1.Scale")
        );
        assert_eq!(
            name("policy/v1", "Eviction"),
            Some("api.policy.v1.Eviction")
        );
        assert_eq!(
            name("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
            Some("apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition")
        );
        assert_eq!(
            name("authorization.k8s.io/v1", "SelfSubjectAccessReview"),
            Some("api.authorization.v1.SelfSubjectAccessReview")
        );
        assert_eq!(
            name("v1", "PodLogOptions"),
            Some("api.core.v1.PodLogOptions")
        );
    }

    #[test]
    fn meta_kinds_resolve_under_any_group_version() {
        for api_version in ["v1", "apps/v1", "meta.k8s.io/v1", "batch/v1"] {
            assert_eq!(
                name(api_version, "DeleteOptions"),
                Some("apimachinery.pkg.apis.meta.v1.DeleteOptions"),
                "{api_version}"
            );
        }
        assert_eq!(
            name("v1", "Status"),
            Some("apimachinery.pkg.apis.meta.v1.Status")
        );
    }

    #[test]
    fn non_kinds_and_unknown_names_do_not_resolve() {
        assert_eq!(name("apps/v1", "DeploymentSpec"), None);
        assert_eq!(name("apps/v1", "Nope"), None);
        assert_eq!(name("example.com/v1", "Widget"), None);
        assert_eq!(name("apps/v1", "Deployment.x"), None);
        assert_eq!(name("", "Pod"), None);
    }
}
