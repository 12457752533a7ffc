//! The Node authorizer (upstream `plugin/pkg/auth/authorizer/node`), before RBAC: a user in
//! `system:nodes` named `system:node:<name>` may do what a kubelet needs and no more.
//!
//! - read nodes, pods, services, endpoints, EndpointSlices, RuntimeClasses; write Nodes (the
//!   node's own only, checked here by name and at create by the body's name), its own Lease
//!   in `kube-node-lease`;
//! - the status of, and the deletion and eviction of, pods bound to it (`spec.nodeName`, read
//!   from the watch cache: upstream's graph);
//! - Secrets, ConfigMaps and PersistentVolumeClaims that a pod bound to it references (get, or
//!   a list or watch of that one object), tokens of its pods' service accounts;
//! - Events, and its own CertificateSigningRequests;
//! - TokenReviews and SubjectAccessReviews (the kubelet API authenticates and authorizes its
//!   callers through them).
//!
//! Anything else gets no opinion (RBAC decides; by default nothing is bound to
//! `system:nodes`). Creating pods (mirror pods) is not allowed: the node agent has none.

use serde_json::Value;

use crate::ControlPlane;
use crate::auth::UserInfo;
use rbac::Attributes;

/// The node a user is, when it is one.
pub fn node_name(user: &UserInfo) -> Option<&str> {
    if !user.in_group("system:nodes") {
        return None;
    }
    user.name
        .strip_prefix("system:node:")
        .filter(|n| !n.is_empty())
}

fn is_read(verb: &str) -> bool {
    matches!(verb, "get" | "list" | "watch")
}

/// Whether a pod is bound to `node`.
fn pod_on(cp: &ControlPlane, cluster: &str, namespace: &str, name: &str, node: &str) -> bool {
    cp.store
        .cache_for_reads(cluster)
        .get("", "pods", cluster, namespace, name)
        .is_some_and(|p| p.value().pointer("/spec/nodeName").and_then(Value::as_str) == Some(node))
}

/// Whether a pod bound to `node` in `namespace` references `kind` `name`.
fn referenced(
    cp: &ControlPlane,
    cluster: &str,
    namespace: &str,
    node: &str,
    kind: &str,
    name: &str,
) -> bool {
    let filter = registry::cache::Filter {
        cluster: Some(cluster.to_string()),
        namespace: Some(namespace.to_string()),
        predicate: None,
    };
    cp.store
        .cache_for_reads(cluster)
        .list("", "pods", &filter)
        .0
        .iter()
        .any(|p| {
            let pod = p.value();
            pod.pointer("/spec/nodeName").and_then(Value::as_str) == Some(node)
                && pod_references(&pod, kind, name)
        })
}

/// Whether a pod's spec references a Secret, ConfigMap, PersistentVolumeClaim or
/// ServiceAccount of that name.
pub fn pod_references(pod: &Value, kind: &str, name: &str) -> bool {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let eq = |v: Option<&Value>| v.and_then(Value::as_str) == Some(name);
    if kind == "serviceaccounts" {
        return eq(spec.get("serviceAccountName"))
            || (name == "default" && spec.get("serviceAccountName").is_none());
    }
    let arr = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
    let volumes = arr(spec.get("volumes"));
    let containers: Vec<Value> = ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .flat_map(|k| arr(spec.get(*k)))
        .collect();
    match kind {
        "secrets" => {
            arr(spec.get("imagePullSecrets"))
                .iter()
                .any(|s| eq(s.get("name")))
                || volumes.iter().any(|v| {
                    eq(v.pointer("/secret/secretName"))
                        || arr(v.pointer("/projected/sources"))
                            .iter()
                            .any(|s| eq(s.pointer("/secret/name")))
                })
                || containers.iter().any(|c| {
                    arr(c.get("envFrom"))
                        .iter()
                        .any(|e| eq(e.pointer("/secretRef/name")))
                        || arr(c.get("env"))
                            .iter()
                            .any(|e| eq(e.pointer("/valueFrom/secretKeyRef/name")))
                })
        }
        "configmaps" => {
            volumes.iter().any(|v| {
                eq(v.pointer("/configMap/name"))
                    || arr(v.pointer("/projected/sources"))
                        .iter()
                        .any(|s| eq(s.pointer("/configMap/name")))
            }) || containers.iter().any(|c| {
                arr(c.get("envFrom"))
                    .iter()
                    .any(|e| eq(e.pointer("/configMapRef/name")))
                    || arr(c.get("env"))
                        .iter()
                        .any(|e| eq(e.pointer("/valueFrom/configMapKeyRef/name")))
            })
        }
        "persistentvolumeclaims" => volumes
            .iter()
            .any(|v| eq(v.pointer("/persistentVolumeClaim/claimName"))),
        _ => false,
    }
}

/// The Node authorizer's decision: `Some(true)` allows, `None` has no opinion.
pub fn authorize(cp: &ControlPlane, cluster: &str, node: &str, a: &Attributes) -> Option<bool> {
    if !a.resource_request {
        return None;
    }
    let verb = a.verb.as_str();
    let sub = a.subresource.as_str();
    let allow = match (a.api_group.as_str(), a.resource.as_str()) {
        ("", "nodes") => match verb {
            _ if is_read(verb) => true,
            // Created by name in the body (checked by the write); any other verb names it.
            "create" => a.name.is_empty() || a.name == node,
            "update" | "patch" | "delete" => a.name == node,
            _ => false,
        },
        ("coordination.k8s.io", "leases") => {
            a.namespace == "kube-node-lease"
                && (a.name == node || (verb == "create" && a.name.is_empty()))
                && matches!(
                    verb,
                    "get" | "create" | "update" | "patch" | "delete" | "watch" | "list"
                )
        }
        ("", "pods") => match (verb, sub) {
            (v, "") if is_read(v) => true,
            ("update" | "patch", "status") | ("create", "eviction") => {
                pod_on(cp, cluster, &a.namespace, &a.name, node)
            }
            // A pod already gone is the store's 404, not a 403 (NodeRestriction lets the
            // deletion of a missing pod through).
            ("delete", "") => {
                pod_on(cp, cluster, &a.namespace, &a.name, node)
                    || cp
                        .store
                        .cache_for_reads(cluster)
                        .get("", "pods", cluster, &a.namespace, &a.name)
                        .is_none()
            }
            _ => false,
        },
        ("", "services" | "endpoints")
        | ("discovery.k8s.io", "endpointslices")
        | ("node.k8s.io", "runtimeclasses") => is_read(verb) && sub.is_empty(),
        ("", kind @ ("secrets" | "configmaps" | "persistentvolumeclaims")) => {
            is_read(verb)
                && sub.is_empty()
                && !a.name.is_empty()
                && referenced(cp, cluster, &a.namespace, node, kind, &a.name)
        }
        // A volume bound to a claim one of its pods uses (upstream's graph: pod → claim →
        // volume).
        ("", "persistentvolumes") => {
            verb == "get" && sub.is_empty() && volume_of_pod_on(cp, cluster, node, &a.name)
        }
        ("", "serviceaccounts") => {
            verb == "create"
                && sub == "token"
                && referenced_sa(cp, cluster, &a.namespace, node, &a.name)
        }
        ("", "events") | ("events.k8s.io", "events") => {
            matches!(verb, "create" | "update" | "patch")
        }
        ("certificates.k8s.io", "certificatesigningrequests") => {
            matches!(verb, "create" | "get" | "list" | "watch") && sub.is_empty()
        }
        // The kubelet API's delegated authentication and authorization.
        ("authentication.k8s.io", "tokenreviews")
        | ("authorization.k8s.io", "subjectaccessreviews" | "localsubjectaccessreviews") => {
            verb == "create"
        }
        _ => return None,
    };
    allow.then_some(true)
}

/// Whether volume `name` is bound to a claim a pod on `node` uses.
fn volume_of_pod_on(cp: &ControlPlane, cluster: &str, node: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    let Some(pv) =
        cp.store
            .cache_for_reads(cluster)
            .get("", "persistentvolumes", cluster, "", name)
    else {
        return false;
    };
    let pv = pv.value();
    let (Some(ns), Some(claim)) = (
        pv.pointer("/spec/claimRef/namespace")
            .and_then(Value::as_str),
        pv.pointer("/spec/claimRef/name").and_then(Value::as_str),
    ) else {
        return false;
    };
    let bound_back = cp
        .store
        .cache_for_reads(cluster)
        .get("", "persistentvolumeclaims", cluster, ns, claim)
        .is_some_and(|c| {
            c.value()
                .pointer("/spec/volumeName")
                .and_then(Value::as_str)
                == Some(name)
        });
    bound_back && referenced(cp, cluster, ns, node, "persistentvolumeclaims", claim)
}

fn referenced_sa(
    cp: &ControlPlane,
    cluster: &str,
    namespace: &str,
    node: &str,
    name: &str,
) -> bool {
    referenced(cp, cluster, namespace, node, "serviceaccounts", name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_references_its_secrets_config_maps_claims_and_service_account() {
        let pod = json!({"spec": {
            "serviceAccountName": "builder",
            "imagePullSecrets": [{"name": "pull"}],
            "volumes": [{"name": "a", "secret": {"secretName": "tls"}}, {"name": "b", "configMap": {"name": "conf"}},
                        {"name": "c", "persistentVolumeClaim": {"claimName": "data"}},
                        {"name": "d", "projected": {"sources": [{"secret": {"name": "proj"}}]}}],
            "containers": [{"name": "c", "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "env", "key": "k"}}}],
                            "envFrom": [{"configMapRef": {"name": "envcm"}}]}],
        }});
        for s in ["pull", "tls", "proj", "env"] {
            assert!(pod_references(&pod, "secrets", s), "{s}");
        }
        assert!(!pod_references(&pod, "secrets", "other"));
        assert!(
            pod_references(&pod, "configmaps", "conf")
                && pod_references(&pod, "configmaps", "envcm")
        );
        assert!(pod_references(&pod, "persistentvolumeclaims", "data"));
        assert!(
            pod_references(&pod, "serviceaccounts", "builder")
                && !pod_references(&pod, "serviceaccounts", "default")
        );
    }
}
