//! The catalogue of built-in resources Matryoshka serves: names, scope, short names,
//! categories, verbs and subresources, as upstream's discovery documents them (Kubernetes 1.33).
//!
//! This table drives discovery, routing and RBAC resource names; behaviour per resource lives
//! in the registry's strategies.

/// A subresource of a built-in resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subresource {
    pub name: &'static str,
    /// Group, version and kind of what the subresource answers with.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub verbs: &'static [&'static str],
}

/// A built-in resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    pub verbs: &'static [&'static str],
    pub subresources: &'static [Subresource],
}

impl Resource {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn subresource(&self, name: &str) -> Option<&'static Subresource> {
        self.subresources.iter().find(|s| s.name == name)
    }

    /// Whether writes to the main resource ignore `.status` (it has a status subresource).
    pub fn has_status(&self) -> bool {
        self.subresource("status").is_some()
    }
}

/// Every verb of an ordinary resource.
pub const ALL: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
/// Resources that can only be created (reviews).
pub const CREATE: &[&str] = &["create"];
const GPU: &[&str] = &["get", "patch", "update"];
const ALL_CAT: &[&str] = &["all"];

const fn status(group: &'static str, version: &'static str, kind: &'static str) -> Subresource {
    Subresource {
        name: "status",
        group,
        version,
        kind,
        verbs: GPU,
    }
}

const fn scale() -> Subresource {
    Subresource {
        name: "scale",
        group: "autoscaling",
        version: "v1",
        kind: "Scale",
        verbs: GPU,
    }
}

/// Verbs of the streaming subresources (exec, attach, port-forward): a WebSocket upgrade is a
/// GET, a SPDY one a POST.
const CONNECT_STREAM: &[&str] = &["create", "get"];
/// Verbs of the proxy subresources: every method is proxied.
const CONNECT_PROXY: &[&str] = &["create", "delete", "get", "patch", "update"];

/// A core/v1 connect subresource, answered with a stream rather than an object.
const fn connect(
    name: &'static str,
    kind: &'static str,
    verbs: &'static [&'static str],
) -> Subresource {
    Subresource {
        name,
        group: "",
        version: "v1",
        kind,
        verbs,
    }
}

#[allow(clippy::too_many_arguments)]
const fn r(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    verbs: &'static [&'static str],
    subresources: &'static [Subresource],
) -> Resource {
    Resource {
        group,
        version,
        kind,
        plural,
        singular,
        namespaced,
        short_names,
        categories,
        verbs,
        subresources,
    }
}

/// The built-in resources, grouped by API group in discovery order.
pub static RESOURCES: &[Resource] = &[
    // core/v1
    r(
        "",
        "v1",
        "Binding",
        "bindings",
        "binding",
        true,
        &[],
        &[],
        CREATE,
        &[],
    ),
    r(
        "",
        "v1",
        "ConfigMap",
        "configmaps",
        "configmap",
        true,
        &["cm"],
        &[],
        ALL,
        &[],
    ),
    r(
        "",
        "v1",
        "Endpoints",
        "endpoints",
        "endpoints",
        true,
        &["ep"],
        &[],
        ALL,
        &[],
    ),
    r(
        "",
        "v1",
        "Event",
        "events",
        "event",
        true,
        &["ev"],
        &[],
        ALL,
        &[],
    ),
    r(
        "",
        "v1",
        "LimitRange",
        "limitranges",
        "limitrange",
        true,
        &["limits"],
        &[],
        ALL,
        &[],
    ),
    r(
        "",
        "v1",
        "Namespace",
        "namespaces",
        "namespace",
        false,
        &["ns"],
        &[],
        &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ],
        &[
            Subresource {
                name: "finalize",
                group: "",
                version: "v1",
                kind: "Namespace",
                verbs: &["update"],
            },
            status("", "v1", "Namespace"),
        ],
    ),
    r(
        "",
        "v1",
        "Node",
        "nodes",
        "node",
        false,
        &["no"],
        &[],
        ALL,
        &[
            connect("proxy", "NodeProxyOptions", CONNECT_PROXY),
            status("", "v1", "Node"),
        ],
    ),
    r(
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        true,
        &["pvc"],
        &[],
        ALL,
        &[status("", "v1", "PersistentVolumeClaim")],
    ),
    r(
        "",
        "v1",
        "PersistentVolume",
        "persistentvolumes",
        "persistentvolume",
        false,
        &["pv"],
        &[],
        ALL,
        &[status("", "v1", "PersistentVolume")],
    ),
    r(
        "",
        "v1",
        "Pod",
        "pods",
        "pod",
        true,
        &["po"],
        ALL_CAT,
        ALL,
        &[
            connect("attach", "PodAttachOptions", CONNECT_STREAM),
            Subresource {
                name: "binding",
                group: "",
                version: "v1",
                kind: "Binding",
                verbs: CREATE,
            },
            Subresource {
                name: "eviction",
                group: "policy",
                version: "v1",
                kind: "Eviction",
                verbs: CREATE,
            },
            connect("exec", "PodExecOptions", CONNECT_STREAM),
            Subresource {
                name: "log",
                group: "",
                version: "v1",
                kind: "Pod",
                verbs: &["get"],
            },
            connect("portforward", "PodPortForwardOptions", CONNECT_STREAM),
            connect("proxy", "PodProxyOptions", CONNECT_PROXY),
            status("", "v1", "Pod"),
        ],
    ),
    r(
        "",
        "v1",
        "PodTemplate",
        "podtemplates",
        "podtemplate",
        true,
        &[],
        &[],
        ALL,
        &[],
    ),
    r(
        "",
        "v1",
        "ReplicationController",
        "replicationcontrollers",
        "replicationcontroller",
        true,
        &["rc"],
        ALL_CAT,
        ALL,
        &[scale(), status("", "v1", "ReplicationController")],
    ),
    r(
        "",
        "v1",
        "ResourceQuota",
        "resourcequotas",
        "resourcequota",
        true,
        &["quota"],
        &[],
        ALL,
        &[status("", "v1", "ResourceQuota")],
    ),
    r(
        "",
        "v1",
        "Secret",
        "secrets",
        "secret",
        true,
        &[],
        &[],
        ALL,
        &[],
    ),
    r(
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        "serviceaccount",
        true,
        &["sa"],
        &[],
        ALL,
        &[Subresource {
            name: "token",
            group: "authentication.k8s.io",
            version: "v1",
            kind: "TokenRequest",
            verbs: CREATE,
        }],
    ),
    r(
        "",
        "v1",
        "Service",
        "services",
        "service",
        true,
        &["svc"],
        ALL_CAT,
        &[
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ],
        &[
            connect("proxy", "ServiceProxyOptions", CONNECT_PROXY),
            status("", "v1", "Service"),
        ],
    ),
    // apiregistration.k8s.io/v1 (listed first among the groups, as kube-aggregator does)
    r(
        "apiregistration.k8s.io",
        "v1",
        "APIService",
        "apiservices",
        "apiservice",
        false,
        &[],
        &["api-extensions"],
        ALL,
        &[status("apiregistration.k8s.io", "v1", "APIService")],
    ),
    // admissionregistration.k8s.io/v1
    r(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        "mutatingwebhookconfiguration",
        false,
        &[],
        &["api-extensions"],
        ALL,
        &[],
    ),
    r(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        "validatingadmissionpolicy",
        false,
        &[],
        &["api-extensions"],
        ALL,
        &[status(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicy",
        )],
    ),
    r(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        "validatingadmissionpolicybinding",
        false,
        &[],
        &["api-extensions"],
        ALL,
        &[],
    ),
    r(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        "validatingwebhookconfiguration",
        false,
        &[],
        &["api-extensions"],
        ALL,
        &[],
    ),
    // apps/v1
    r(
        "apps",
        "v1",
        "ControllerRevision",
        "controllerrevisions",
        "controllerrevision",
        true,
        &[],
        &[],
        ALL,
        &[],
    ),
    r(
        "apps",
        "v1",
        "DaemonSet",
        "daemonsets",
        "daemonset",
        true,
        &["ds"],
        ALL_CAT,
        ALL,
        &[status("apps", "v1", "DaemonSet")],
    ),
    r(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        "deployment",
        true,
        &["deploy"],
        ALL_CAT,
        ALL,
        &[scale(), status("apps", "v1", "Deployment")],
    ),
    r(
        "apps",
        "v1",
        "ReplicaSet",
        "replicasets",
        "replicaset",
        true,
        &["rs"],
        ALL_CAT,
        ALL,
        &[scale(), status("apps", "v1", "ReplicaSet")],
    ),
    r(
        "apps",
        "v1",
        "StatefulSet",
        "statefulsets",
        "statefulset",
        true,
        &["sts"],
        ALL_CAT,
        ALL,
        &[scale(), status("apps", "v1", "StatefulSet")],
    ),
    // authentication.k8s.io/v1
    r(
        "authentication.k8s.io",
        "v1",
        "SelfSubjectReview",
        "selfsubjectreviews",
        "selfsubjectreview",
        false,
        &[],
        &[],
        CREATE,
        &[],
    ),
    r(
        "authentication.k8s.io",
        "v1",
        "TokenReview",
        "tokenreviews",
        "tokenreview",
        false,
        &[],
        &[],
        CREATE,
        &[],
    ),
    // authorization.k8s.io/v1
    r(
        "authorization.k8s.io",
        "v1",
        "LocalSubjectAccessReview",
        "localsubjectaccessreviews",
        "localsubjectaccessreview",
        true,
        &[],
        &[],
        CREATE,
        &[],
    ),
    r(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        false,
        &[],
        &[],
        CREATE,
        &[],
    ),
    r(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        false,
        &[],
        &[],
        CREATE,
        &[],
    ),
    r(
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
        "subjectaccessreviews",
        "subjectaccessreview",
        false,
        &[],
        &[],
        CREATE,
        &[],
    ),
    // autoscaling/v2
    r(
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        true,
        &["hpa"],
        ALL_CAT,
        ALL,
        &[status("autoscaling", "v2", "HorizontalPodAutoscaler")],
    ),
    // autoscaling/v1: the same objects (stored as v2), converted. After v2, so lookups by
    // group and resource find the stored version.
    r(
        "autoscaling",
        "v1",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        true,
        &["hpa"],
        ALL_CAT,
        ALL,
        &[status("autoscaling", "v1", "HorizontalPodAutoscaler")],
    ),
    // batch/v1
    r(
        "batch",
        "v1",
        "CronJob",
        "cronjobs",
        "cronjob",
        true,
        &["cj"],
        ALL_CAT,
        ALL,
        &[status("batch", "v1", "CronJob")],
    ),
    r(
        "batch",
        "v1",
        "Job",
        "jobs",
        "job",
        true,
        &[],
        ALL_CAT,
        ALL,
        &[status("batch", "v1", "Job")],
    ),
    // certificates.k8s.io/v1
    r(
        "certificates.k8s.io",
        "v1",
        "CertificateSigningRequest",
        "certificatesigningrequests",
        "certificatesigningrequest",
        false,
        &["csr"],
        &[],
        ALL,
        &[
            Subresource {
                name: "approval",
                group: "certificates.k8s.io",
                version: "v1",
                kind: "CertificateSigningRequest",
                verbs: GPU,
            },
            status("certificates.k8s.io", "v1", "CertificateSigningRequest"),
        ],
    ),
    // coordination.k8s.io/v1
    r(
        "coordination.k8s.io",
        "v1",
        "Lease",
        "leases",
        "lease",
        true,
        &[],
        &[],
        ALL,
        &[],
    ),
    // discovery.k8s.io/v1
    r(
        "discovery.k8s.io",
        "v1",
        "EndpointSlice",
        "endpointslices",
        "endpointslice",
        true,
        &[],
        &[],
        ALL,
        &[],
    ),
    // flowcontrol.apiserver.k8s.io/v1
    r(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "FlowSchema",
        "flowschemas",
        "flowschema",
        false,
        &[],
        &[],
        ALL,
        &[status("flowcontrol.apiserver.k8s.io", "v1", "FlowSchema")],
    ),
    r(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "PriorityLevelConfiguration",
        "prioritylevelconfigurations",
        "prioritylevelconfiguration",
        false,
        &[],
        &[],
        ALL,
        &[status(
            "flowcontrol.apiserver.k8s.io",
            "v1",
            "PriorityLevelConfiguration",
        )],
    ),
    // events.k8s.io/v1
    r(
        "events.k8s.io",
        "v1",
        "Event",
        "events",
        "event",
        true,
        &["ev"],
        &[],
        ALL,
        &[],
    ),
    // networking.k8s.io/v1
    r(
        "networking.k8s.io",
        "v1",
        "IngressClass",
        "ingressclasses",
        "ingressclass",
        false,
        &[],
        &[],
        ALL,
        &[],
    ),
    r(
        "networking.k8s.io",
        "v1",
        "Ingress",
        "ingresses",
        "ingress",
        true,
        &["ing"],
        &[],
        ALL,
        &[status("networking.k8s.io", "v1", "Ingress")],
    ),
    r(
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        "networkpolicy",
        true,
        &["netpol"],
        &[],
        ALL,
        &[],
    ),
    // node.k8s.io/v1
    r(
        "node.k8s.io",
        "v1",
        "RuntimeClass",
        "runtimeclasses",
        "runtimeclass",
        false,
        &[],
        &[],
        ALL,
        &[],
    ),
    // policy/v1
    r(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        true,
        &["pdb"],
        &[],
        ALL,
        &[status("policy", "v1", "PodDisruptionBudget")],
    ),
    // rbac.authorization.k8s.io/v1
    r(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        "clusterrolebinding",
        false,
        &[],
        &[],
        ALL,
        &[],
    ),
    r(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        "clusterrole",
        false,
        &[],
        &[],
        ALL,
        &[],
    ),
    r(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        "rolebinding",
        true,
        &[],
        &[],
        ALL,
        &[],
    ),
    r(
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        "role",
        true,
        &[],
        &[],
        ALL,
        &[],
    ),
    // scheduling.k8s.io/v1
    r(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        "priorityclass",
        false,
        &["pc"],
        &[],
        ALL,
        &[],
    ),
    // storage.k8s.io/v1
    r(
        "storage.k8s.io",
        "v1",
        "CSIDriver",
        "csidrivers",
        "csidriver",
        false,
        &[],
        &[],
        ALL,
        &[],
    ),
    r(
        "storage.k8s.io",
        "v1",
        "CSINode",
        "csinodes",
        "csinode",
        false,
        &[],
        &[],
        ALL,
        &[],
    ),
    r(
        "storage.k8s.io",
        "v1",
        "CSIStorageCapacity",
        "csistoragecapacities",
        "csistoragecapacity",
        true,
        &[],
        &[],
        ALL,
        &[],
    ),
    r(
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        "storageclass",
        false,
        &["sc"],
        &[],
        ALL,
        &[],
    ),
    r(
        "storage.k8s.io",
        "v1",
        "VolumeAttachment",
        "volumeattachments",
        "volumeattachment",
        false,
        &[],
        &[],
        ALL,
        &[status("storage.k8s.io", "v1", "VolumeAttachment")],
    ),
];

/// Looks a built-in resource up by group, version and plural.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Looks a built-in resource up by group, version and kind.
pub fn find_kind(group: &str, version: &str, kind: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.kind == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_are_unique_within_a_group_version() {
        let mut seen = std::collections::HashSet::new();
        for r in RESOURCES {
            assert!(
                seen.insert((r.group, r.version, r.plural)),
                "{} twice",
                r.plural
            );
        }
    }

    #[test]
    fn deployments_have_scale_and_status() {
        let d = find("apps", "v1", "deployments").unwrap();
        assert!(d.has_status());
        assert_eq!(d.subresource("scale").unwrap().kind, "Scale");
        assert_eq!(find_kind("", "v1", "Pod").unwrap().short_names, &["po"]);
    }
}
