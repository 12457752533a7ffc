//! Pods (core/v1) and PodTemplates: upstream's pod defaulting (`SetDefaults_Pod` and the pod
//! spec defaults), what the ServiceAccount, Priority and DefaultTolerationSeconds admission
//! plugins add to new pods, the initial status (`Pending` with the computed QoS class),
//! `ValidatePodCreate`/`ValidatePodUpdate`, and the fields pods can be selected by.

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Value, json};

use super::podspec::{self, Owner, defaults, resources, spec, update};
use super::util::{arr_at, child, field_string};
use crate::strategy::Strategy;

/// Pods.
pub struct PodStrategy;

impl Strategy for PodStrategy {
    fn graceful_delete(&self, obj: &Value, requested: Option<i64>) -> Option<i64> {
        let bound = obj
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let finished = matches!(
            obj.pointer("/status/phase").and_then(Value::as_str),
            Some("Succeeded" | "Failed")
        );
        if !bound || finished {
            return None;
        }
        Some(requested.unwrap_or_else(|| {
            obj.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(30)
        }))
    }

    fn default(&self, obj: &mut Value) {
        if let Some(s) = child(obj, "spec") {
            defaults::pod_spec(s);
            defaults::pod_only(s);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(s) = child(obj, "spec") {
            defaults::pod_admission(s);
            defaults::pod_spec(s);
            defaults::pod_only(s);
        }
        let null = Value::Null;
        let s = obj.get("spec").unwrap_or(&null);
        let mut status = json!({"phase": "Pending", "qosClass": resources::qos_class(s)});
        if !arr_at(s, "/schedulingGates").is_empty() {
            status["conditions"] = json!([{
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": null,
                "lastTransitionTime": null,
                "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates",
            }]);
        }
        obj["status"] = status;
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        validate_pod(obj, true)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let mut errs = validate_pod(new, false);
        let null = Value::Null;
        update::validate_pod_update(
            &mut errs,
            new.get("spec").unwrap_or(&null),
            old.get("spec").unwrap_or(&null),
        );
        let mirror = "kubernetes.io/config.mirror";
        let (n, o) = (
            apimachinery::meta::annotation(new, mirror),
            apimachinery::meta::annotation(old, mirror),
        );
        if n != o {
            let p = Path::new("metadata").child("annotations").key(mirror);
            errs.push(FieldError::forbidden(
                p,
                if o.is_some() {
                    "may not remove or update mirror pod annotation"
                } else {
                    "may not add mirror pod annotation"
                },
            ));
        }
        errs
    }

    fn field_names(&self) -> &[&'static str] {
        &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
            "spec.host",
        ]
    }

    fn field(&self, obj: &Value, name: &str) -> Option<String> {
        Some(match name {
            "spec.hostNetwork" => {
                let v = field_string(obj, "/spec/hostNetwork");
                if v.is_empty() { "false".into() } else { v }
            }
            // Upstream's field set holds the first pod IP under `status.podIPs`.
            "status.podIPs" => field_string(obj, "/status/podIPs/0/ip"),
            // Old v1 clients send `spec.host`.
            "spec.host" => field_string(obj, "/spec/nodeName"),
            "spec.nodeName"
            | "spec.restartPolicy"
            | "spec.schedulerName"
            | "spec.serviceAccountName"
            | "status.phase"
            | "status.podIP"
            | "status.nominatedNodeName" => {
                field_string(obj, &format!("/{}", name.replace('.', "/")))
            }
            _ => return None,
        })
    }

    fn warnings(&self, obj: &Value) -> Vec<String> {
        podspec::spec_warnings(obj, "/spec", "spec")
    }
}

/// Upstream `validatePodMetadataAndSpec` plus the create-only checks.
fn validate_pod(obj: &Value, create: bool) -> ErrorList {
    let mut errs = ErrorList::new();
    let null = Value::Null;
    let s = obj.get("spec").unwrap_or(&null);
    let mirror = apimachinery::meta::annotation(obj, "kubernetes.io/config.mirror");
    if let Some(v) = mirror
        && super::util::str_at(s, "/nodeName").is_empty()
    {
        errs.push(FieldError::invalid(
            Path::new("metadata")
                .child("annotations")
                .key("kubernetes.io/config.mirror"),
            json!(v),
            "must set spec.nodeName if mirror pod annotation is set",
        ));
    }
    spec::validate_pod_spec(&mut errs, s, &Path::new("spec"), Owner::Pod);
    spec::validate_pod_only(&mut errs, s, create);
    errs
}

/// PodTemplates: a template validated like any workload's.
pub struct PodTemplateStrategy;

impl Strategy for PodTemplateStrategy {
    fn default(&self, obj: &mut Value) {
        if let Some(t) = child(obj, "template") {
            podspec::default_template(t);
        }
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        podspec::validate_template(&mut errs, obj.get("template"), &Path::new("template"));
        errs
    }

    fn warnings(&self, obj: &Value) -> Vec<String> {
        podspec::spec_warnings(obj, "/template/spec", "template.spec")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(mut pod: Value) -> Value {
        PodStrategy.prepare_for_create(&mut pod);
        PodStrategy.default(&mut pod);
        pod
    }

    fn nginx() -> Value {
        json!({"metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}})
    }

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn new_pods_get_upstream_defaults_and_pending_status() {
        let pod = created(nginx());
        let s = &pod["spec"];
        assert_eq!(s["restartPolicy"], json!("Always"));
        assert_eq!(s["dnsPolicy"], json!("ClusterFirst"));
        assert_eq!(s["schedulerName"], json!("default-scheduler"));
        assert_eq!(s["terminationGracePeriodSeconds"], json!(30));
        assert_eq!(s["securityContext"], json!({}));
        assert_eq!(s["serviceAccountName"], json!("default"));
        assert_eq!(s["serviceAccount"], json!("default"));
        assert_eq!(s["enableServiceLinks"], json!(true));
        assert_eq!(s["priority"], json!(0));
        assert_eq!(s["preemptionPolicy"], json!("PreemptLowerPriority"));
        assert_eq!(s["tolerations"].as_array().map(Vec::len), Some(2));
        let c = &s["containers"][0];
        assert_eq!(c["imagePullPolicy"], json!("Always"));
        assert_eq!(c["terminationMessagePath"], json!("/dev/termination-log"));
        assert_eq!(c["terminationMessagePolicy"], json!("File"));
        assert_eq!(c["resources"], json!({}));
        assert_eq!(
            pod["status"],
            json!({"phase": "Pending", "qosClass": "BestEffort"})
        );
        assert!(PodStrategy.validate(&pod).is_empty());
    }

    #[test]
    fn qos_class_reflects_requests_defaulted_from_limits() {
        let mut pod = nginx();
        pod["spec"]["containers"][0]["resources"] =
            json!({"limits": {"cpu": "500m", "memory": "128Mi"}});
        let pod = created(pod);
        assert_eq!(pod["status"]["qosClass"], json!("Guaranteed"));
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"],
            json!({"cpu": "500m", "memory": "128Mi"})
        );
    }

    #[test]
    fn invalid_pods_report_every_error() {
        let pod = created(json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "A", "image": "x", "ports": [{"containerPort": 80}, {"containerPort": 0, "protocol": "ICMP"}],
             "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "500m"}}},
        ], "restartPolicy": "Sometimes"}}));
        assert_eq!(
            messages(&PodStrategy.validate(&pod)),
            vec![
                "spec.containers[0].name: Invalid value: \"A\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                "spec.containers[0].ports[1].containerPort: Required value",
                "spec.containers[0].ports[1].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
                "spec.containers[0].resources.requests: Invalid value: \"1\": must be less than or equal to cpu limit of 500m",
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            ]
        );
    }

    #[test]
    fn pods_without_containers_are_refused() {
        let pod = created(json!({"metadata": {"name": "p"}, "spec": {}}));
        assert_eq!(
            messages(&PodStrategy.validate(&pod)),
            vec!["spec.containers: Required value"]
        );
    }

    #[test]
    fn binding_a_pod_is_an_allowed_update() {
        let old = created(nginx());
        let mut new = old.clone();
        new["spec"]["nodeName"] = json!("node-1");
        assert!(PodStrategy.validate_update(&new, &old).is_empty());
    }

    #[test]
    fn scheduling_gated_pods_start_with_a_condition() {
        let mut pod = nginx();
        pod["spec"]["schedulingGates"] = json!([{"name": "example.com/wait"}]);
        let pod = created(pod);
        assert_eq!(
            pod["status"]["conditions"][0]["reason"],
            json!("SchedulingGated")
        );
    }

    #[test]
    fn pod_fields_are_selectable() {
        let pod = created(nginx());
        assert_eq!(
            PodStrategy.field(&pod, "spec.hostNetwork").as_deref(),
            Some("false")
        );
        assert_eq!(
            PodStrategy.field(&pod, "status.phase").as_deref(),
            Some("Pending")
        );
        assert_eq!(
            PodStrategy.field(&pod, "spec.nodeName").as_deref(),
            Some("")
        );
        assert_eq!(
            PodStrategy
                .field(&pod, "spec.serviceAccountName")
                .as_deref(),
            Some("default")
        );
    }

    #[test]
    fn pod_templates_are_defaulted_and_validated() {
        let mut t = json!({"metadata": {"name": "t"}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c"}]}}});
        PodTemplateStrategy.default(&mut t);
        assert_eq!(t["template"]["spec"]["restartPolicy"], json!("Always"));
        assert_eq!(
            messages(&PodTemplateStrategy.validate(&t)),
            vec!["template.spec.containers[0].image: Required value"]
        );
    }
}
