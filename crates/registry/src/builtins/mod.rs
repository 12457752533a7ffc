//! Strategies of the built-in resources: defaulting, server-owned fields, validation with
//! upstream's paths and messages, and selectable fields, as kube-apiserver 1.33 has them.
//!
//! One file per resource (or closely related group); `podspec` holds what every pod-owning
//! resource shares, `workload` and `jobspec` what controllers share, `util` and `gofmt` the
//! field checks and upstream's rendering of values in messages. Resources without special
//! rules use the default strategy.

mod admissionregistration;
mod apiservice;
mod autoscaling;
mod autoscaling_v1;
mod certificates;
mod cronjob;
mod daemonset;
mod deployment;
mod endpoints;
mod events;
mod flowcontrol;
mod gofmt;
mod job;
mod jobspec;
mod lease;
mod namespace;
mod node;
mod pdb;
mod pod;
mod podspec;
mod priorityclass;
mod pv;
mod pvc;
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

pub use admissionregistration::{
    ValidatingAdmissionPolicyBindingStrategy, ValidatingAdmissionPolicyStrategy,
    WebhookConfigurationStrategy, WebhookKind,
};
pub use apiservice::{ApiServiceStrategy, LOCAL_MESSAGE, LOCAL_REASON, is_local};
pub use autoscaling::HorizontalPodAutoscalerStrategy;
pub use autoscaling_v1::{HorizontalPodAutoscalerV1Strategy, HpaV1Converter};
pub use certificates::CertificateSigningRequestStrategy;
pub use cronjob::CronJobStrategy;
pub use daemonset::DaemonSetStrategy;
pub use deployment::DeploymentStrategy;
pub use endpoints::{EndpointSliceStrategy, EndpointsStrategy};
pub use events::{EventStrategy, EventsV1Strategy};
pub use flowcontrol::{
    FlowSchemaStrategy, PriorityLevelConfigurationStrategy, mandatory_flow_schemas,
    mandatory_priority_levels,
};
pub use job::JobStrategy;
pub use lease::LeaseStrategy;
pub use namespace::NamespaceStrategy;
pub use node::NodeStrategy;
pub use pdb::PodDisruptionBudgetStrategy;
pub use pod::{PodStrategy, PodTemplateStrategy};
pub use priorityclass::PriorityClassStrategy;
pub use pv::PersistentVolumeStrategy;
pub use pvc::PersistentVolumeClaimStrategy;
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
        ("autoscaling", "horizontalpodautoscalers") if r.version == "v1" => {
            Arc::new(HorizontalPodAutoscalerV1Strategy)
        }
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
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            Arc::new(WebhookConfigurationStrategy(WebhookKind::Validating))
        }
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => {
            Arc::new(WebhookConfigurationStrategy(WebhookKind::Mutating))
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => {
            Arc::new(ValidatingAdmissionPolicyStrategy)
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings") => {
            Arc::new(ValidatingAdmissionPolicyBindingStrategy)
        }
        ("apiregistration.k8s.io", "apiservices") => Arc::new(ApiServiceStrategy),
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => Arc::new(FlowSchemaStrategy),
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => {
            Arc::new(PriorityLevelConfigurationStrategy)
        }
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
            let mut def = ResourceDef::builtin(
                r,
                strategy(r),
                openapi::builtin_schema(r.group, r.version, r.kind),
            );
            // Served in a version other than the one stored.
            if (r.group, r.version, r.plural) == ("autoscaling", "v1", "horizontalpodautoscalers") {
                def.converter = Some(Arc::new(HpaV1Converter));
            }
            def
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

    /// Every node of `v` replaced, one at a time, by values of every other JSON type.
    fn mutations(v: &serde_json::Value) -> Vec<serde_json::Value> {
        use serde_json::{Value, json};
        let alternatives = [
            json!(null),
            json!(-1),
            json!("x"),
            json!([]),
            json!({}),
            json!([1, "a"]),
            json!(true),
        ];
        let mut out = Vec::new();
        let mut paths = Vec::new();
        fn walk(v: &Value, at: String, paths: &mut Vec<String>) {
            paths.push(at.clone());
            match v {
                Value::Object(m) => m
                    .iter()
                    .for_each(|(k, c)| walk(c, format!("{at}/{k}"), paths)),
                Value::Array(a) => a
                    .iter()
                    .enumerate()
                    .for_each(|(i, c)| walk(c, format!("{at}/{i}"), paths)),
                _ => {}
            }
        }
        walk(v, String::new(), &mut paths);
        for p in paths.iter().filter(|p| !p.is_empty()) {
            for alt in &alternatives {
                let mut m = v.clone();
                if let Some(slot) = m.pointer_mut(p) {
                    *slot = alt.clone();
                    out.push(m);
                }
            }
        }
        out
    }

    #[test]
    fn hostile_objects_never_panic_any_strategy() {
        use serde_json::json;
        let container = json!({"name": "c", "image": "i", "ports": [{"containerPort": 80, "name": "http"}],
            "env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}},
            "livenessProbe": {"httpGet": {"port": 80}}, "volumeMounts": [{"name": "v", "mountPath": "/v"}]});
        let pod_spec = json!({"containers": [container], "volumes": [{"name": "v", "secret": {"secretName": "s"}}],
            "tolerations": [{"key": "k", "operator": "Exists"}], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}]}}}});
        let template = json!({"metadata": {"labels": {"app": "a"}}, "spec": pod_spec});
        let meta = json!({"name": "n", "namespace": "default", "uid": "u", "labels": {"a": "b"}, "annotations": {"x": "y"}});
        let bases = [
            json!({"metadata": meta, "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template, "replicas": 1,
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                "volumeClaimTemplates": [{"spec": {"resources": {"requests": {"storage": "1Gi"}}}}]}}),
            json!({"metadata": meta, "spec": {"jobTemplate": {"spec": {"template": template}}, "schedule": "* * * * *"}}),
            json!({"metadata": meta, "spec": pod_spec, "template": template}),
            json!({"metadata": meta, "spec": {"ports": [{"port": 80, "targetPort": "http", "nodePort": 30000}],
                "clusterIP": "10.0.0.1", "type": "NodePort", "selector": {"a": "b"}}, "status": {"loadBalancer": {}}}),
            json!({"metadata": meta, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                "capacity": {"storage": "1Gi"}, "hostPath": {"path": "/x"}, "podCIDRs": ["10.0.0.0/24"],
                "taints": [{"key": "k", "effect": "NoSchedule"}], "finalizers": ["kubernetes"]},
                "status": {"phase": "Bound", "replicas": 1}}),
            json!({"metadata": meta, "spec": {
                "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}}],
                "behavior": {"scaleUp": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 1}]}},
                "minAvailable": 1, "leaseDurationSeconds": 1, "signerName": "a.b/c", "usages": ["x"]}}),
            json!({"metadata": meta, "data": {"a": "eA=="}, "stringData": {"b": "c"}, "binaryData": {"c": "eA=="},
                "type": "Opaque", "immutable": true, "value": 1, "provisioner": "p", "parameters": {"a": "b"},
                "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 1}]}],
                "endpoints": [{"addresses": ["10.0.0.1"]}], "addressType": "IPv4"}),
            json!({"metadata": meta, "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}],
                "roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "User", "name": "u"}],
                "involvedObject": {"namespace": "default"}, "regarding": {"namespace": "default"},
                "eventTime": "2025-01-01T00:00:00Z", "series": {"count": 1}}),
        ];
        // Resources with their own strategy (the default strategy does nothing).
        let strategies: Vec<Arc<dyn Strategy>> = builtin::RESOURCES
            .iter()
            .filter(|r| {
                let s = strategy(r);
                !s.field_names().is_empty() || {
                    let mut probe = json!({"spec": {}});
                    s.prepare_for_create(&mut probe);
                    s.default(&mut probe);
                    probe != json!({"spec": {}}) || !s.validate(&json!({})).is_empty()
                }
            })
            .map(strategy)
            .collect();
        assert!(strategies.len() >= 25, "{} strategies", strategies.len());
        for base in &bases {
            for m in mutations(base) {
                for s in &strategies {
                    let mut a = m.clone();
                    s.prepare_for_create(&mut a);
                    s.default(&mut a);
                    let _ = s.validate(&a);
                    let mut b = m.clone();
                    s.prepare_for_update(&mut b, base);
                    s.default(&mut b);
                    let _ = s.validate_update(&b, base);
                    let _ = s.validate_update(base, &m);
                    for f in s.field_names() {
                        let _ = s.field(&m, f);
                    }
                    let _ = s.warnings(&m);
                    s.on_deletion(&mut a);
                }
            }
        }
    }

    #[test]
    fn resources_cover_the_catalogue() {
        assert_eq!(resources().len(), builtin::RESOURCES.len() + 1);
    }
}
