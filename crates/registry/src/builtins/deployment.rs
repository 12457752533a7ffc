//! Deployments (apps/v1): upstream `SetDefaults_Deployment` (one replica, RollingUpdate
//! 25%/25%, ten revisions kept, ten minutes to progress), `ValidateDeployment` and the
//! deployment strategy (status reset on create, immutable selector, generation bumped by
//! annotation changes too).

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::meta;
use serde_json::{Value, json};

use super::gofmt;
use super::podspec;
use super::util::{
    at, child, default_str, default_value, i64_at, int_or_percent, int_or_percent_value,
    nonnegative, not_more_than_100_percent, str_at,
};
use super::workload;
use crate::strategy::Strategy;

/// Deployments.
pub struct DeploymentStrategy;

impl Strategy for DeploymentStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = child(obj, "spec") else {
            return;
        };
        default_value(spec, "replicas", json!(1));
        if let Some(strategy) = child(spec, "strategy") {
            default_str(strategy, "type", "RollingUpdate");
            if str_at(strategy, "/type") == "RollingUpdate"
                && let Some(ru) = child(strategy, "rollingUpdate")
            {
                default_value(ru, "maxUnavailable", json!("25%"));
                default_value(ru, "maxSurge", json!("25%"));
            }
        }
        default_value(spec, "revisionHistoryLimit", json!(10));
        default_value(spec, "progressDeadlineSeconds", json!(600));
        if let Some(t) = child(spec, "template") {
            podspec::default_template(t);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        // Annotations are copied to ReplicaSets, so changing them is a new generation.
        if meta::metadata(new).get("annotations") != meta::metadata(old).get("annotations") {
            meta::set(new, "generation", meta::generation(old).max(1) + 1);
        }
    }

    fn status_updates_annotations(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        validate_spec(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let mut errs = validate_spec(new);
        workload::immutable_selector(&mut errs, new, old);
        errs
    }

    fn warnings(&self, obj: &Value) -> Vec<String> {
        podspec::spec_warnings(obj, "/spec/template/spec", "spec.template.spec")
    }
}

/// Upstream `ValidateDeploymentSpec`.
fn validate_spec(obj: &Value) -> ErrorList {
    let mut errs = ErrorList::new();
    let p = Path::new("spec");
    let null = Value::Null;
    let spec = obj.get("spec").unwrap_or(&null);
    nonnegative(&mut errs, &p.child("replicas"), i64_at(spec, "/replicas"));
    let selector = workload::required_selector(&mut errs, spec, &p, "deployment");
    match &selector {
        Some(sel) => {
            let tp = p.child("template");
            workload::template_matches(&mut errs, Some(sel), spec.get("template"), &tp);
            workload::long_running_template(&mut errs, spec.get("template"), &tp, "ReplicaSet");
        }
        None => errs.push(gofmt::invalid(
            &p.child("selector"),
            gofmt::label_selector(at(spec, "/selector")),
            "invalid label selector",
        )),
    }
    deployment_strategy(
        &mut errs,
        spec.get("strategy").unwrap_or(&null),
        &p.child("strategy"),
    );
    let min_ready = i64_at(spec, "/minReadySeconds").unwrap_or(0);
    nonnegative(&mut errs, &p.child("minReadySeconds"), Some(min_ready));
    nonnegative(
        &mut errs,
        &p.child("revisionHistoryLimit"),
        i64_at(spec, "/revisionHistoryLimit"),
    );
    if let Some(pds) = i64_at(spec, "/progressDeadlineSeconds") {
        nonnegative(&mut errs, &p.child("progressDeadlineSeconds"), Some(pds));
        if pds <= min_ready {
            errs.push(FieldError::invalid(
                p.child("progressDeadlineSeconds"),
                json!(pds),
                "must be greater than minReadySeconds",
            ));
        }
    }
    errs
}

/// Upstream `ValidateDeploymentStrategy`.
fn deployment_strategy(errs: &mut ErrorList, s: &Value, p: &Path) {
    let ru = at(s, "/rollingUpdate");
    match str_at(s, "/type") {
        "Recreate" => {
            if ru.is_some() {
                errs.push(FieldError::forbidden(
                    p.child("rollingUpdate"),
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => match ru {
            None => errs.push(FieldError::required(
                p.child("rollingUpdate"),
                "this should be defaulted and never be nil",
            )),
            Some(ru) => {
                let rp = p.child("rollingUpdate");
                let (mu, ms) = (ru.get("maxUnavailable"), ru.get("maxSurge"));
                int_or_percent(errs, &rp.child("maxUnavailable"), mu);
                int_or_percent(errs, &rp.child("maxSurge"), ms);
                if int_or_percent_value(mu) == 0 && int_or_percent_value(ms) == 0 {
                    errs.push(gofmt::invalid(
                        &rp.child("maxUnavailable"),
                        gofmt::int_or_string(mu.unwrap_or(&json!(0))),
                        "may not be 0 when `maxSurge` is 0",
                    ));
                }
                not_more_than_100_percent(errs, &rp.child("maxUnavailable"), mu);
            }
        },
        other => errs.push(gofmt::not_supported(
            p,
            format!(
                "apps.DeploymentStrategy{{Type:{}, RollingUpdate:(*apps.RollingUpdateDeployment)({})}}",
                gofmt::quote(other),
                if ru.is_some() { "0xc000000000" } else { "nil" }
            ),
            &["Recreate", "RollingUpdate"],
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]},
                },
            },
        })
    }

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn minimal_deployments_are_defaulted_like_upstream() {
        let mut d = minimal();
        DeploymentStrategy.default(&mut d);
        let spec = &d["spec"];
        assert_eq!(spec["replicas"], json!(1));
        assert_eq!(
            spec["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(spec["revisionHistoryLimit"], json!(10));
        assert_eq!(spec["progressDeadlineSeconds"], json!(600));
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["restartPolicy"], json!("Always"));
        assert_eq!(
            pod["containers"][0]["imagePullPolicy"],
            json!("IfNotPresent")
        );
        assert!(pod.get("enableServiceLinks").is_none());
        assert!(DeploymentStrategy.validate(&d).is_empty());
    }

    #[test]
    fn selector_must_match_template_labels() {
        let mut d = minimal();
        d["spec"]["selector"]["matchLabels"]["app"] = json!("other");
        DeploymentStrategy.default(&mut d);
        assert_eq!(
            messages(&DeploymentStrategy.validate(&d)),
            vec![
                "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`"
            ]
        );
    }

    #[test]
    fn every_error_is_reported_with_its_path() {
        let mut d = minimal();
        d["spec"]["replicas"] = json!(-1);
        d["spec"]["template"]["spec"]["containers"] = json!([
            {"name": "a", "image": ""},
            {"name": "a", "image": "x"},
        ]);
        d["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        d["spec"]["strategy"] =
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}});
        DeploymentStrategy.default(&mut d);
        assert_eq!(
            messages(&DeploymentStrategy.validate(&d)),
            vec![
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                "spec.template.spec.containers[0].image: Required value",
                "spec.template.spec.containers[1].name: Duplicate value: \"a\"",
                "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0",
            ]
        );
    }

    #[test]
    fn selector_is_immutable() {
        let mut old = minimal();
        DeploymentStrategy.default(&mut old);
        let mut new = old.clone();
        new["spec"]["selector"]["matchLabels"] = json!({"app": "web", "tier": "x"});
        new["spec"]["template"]["metadata"]["labels"]["tier"] = json!("x");
        assert_eq!(
            messages(&DeploymentStrategy.validate_update(&new, &old)),
            vec![
                "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\", \"tier\":\"x\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
            ]
        );
    }

    #[test]
    fn unknown_strategy_types_are_unsupported() {
        let mut d = minimal();
        d["spec"]["strategy"] = json!({"type": "BlueGreen"});
        DeploymentStrategy.default(&mut d);
        assert_eq!(
            messages(&DeploymentStrategy.validate(&d)),
            vec![
                "spec.strategy: Unsupported value: apps.DeploymentStrategy{Type:\"BlueGreen\", RollingUpdate:(*apps.RollingUpdateDeployment)(nil)}: supported values: \"Recreate\", \"RollingUpdate\""
            ]
        );
    }

    #[test]
    fn annotation_changes_bump_the_generation() {
        let mut old = minimal();
        meta::set(&mut old, "generation", 3);
        let mut new = old.clone();
        meta::set(&mut new, "annotations", json!({"a": "b"}));
        DeploymentStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(meta::generation(&new), 4);
    }
}
