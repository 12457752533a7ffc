//! ReplicaSets (apps/v1) and ReplicationControllers (core/v1): one replica by default, a
//! selector their template must match, `status.replicas` selectable. An RC's selector and
//! labels default to its template's labels, as upstream's `SetDefaults_ReplicationController`
//! does; a ReplicaSet's selector is immutable.

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::labels::Selector;
use serde_json::{Map, Value, json};

use super::gofmt;
use super::podspec;
use super::util::{at, child, default_value, empty_map, field_string, i64_at, nonnegative, obj_at};
use super::workload;
use crate::strategy::Strategy;

/// The status both kinds start with (`replicas` is not omitted when zero).
fn initial_status() -> Value {
    json!({"replicas": 0})
}

/// `status.replicas` as a field selector sees it.
fn status_replicas(obj: &Value) -> String {
    let s = field_string(obj, "/status/replicas");
    if s.is_empty() { "0".into() } else { s }
}

/// ReplicaSets.
pub struct ReplicaSetStrategy;

impl Strategy for ReplicaSetStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = child(obj, "spec") else {
            return;
        };
        default_value(spec, "replicas", json!(1));
        if let Some(t) = child(spec, "template") {
            podspec::default_template(t);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = initial_status();
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let p = Path::new("spec");
        let null = Value::Null;
        let spec = obj.get("spec").unwrap_or(&null);
        nonnegative(&mut errs, &p.child("replicas"), i64_at(spec, "/replicas"));
        nonnegative(
            &mut errs,
            &p.child("minReadySeconds"),
            i64_at(spec, "/minReadySeconds"),
        );
        // Upstream's ReplicaSet message says "deployment" too.
        match workload::required_selector(&mut errs, spec, &p, "deployment") {
            Some(sel) => {
                let tp = p.child("template");
                workload::template_matches(&mut errs, Some(&sel), spec.get("template"), &tp);
                workload::long_running_template(&mut errs, spec.get("template"), &tp, "ReplicaSet");
            }
            None => errs.push(gofmt::invalid(
                &p.child("selector"),
                gofmt::label_selector(at(spec, "/selector")),
                "invalid label selector",
            )),
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let mut errs = self.validate(new);
        workload::immutable_selector(&mut errs, new, old);
        errs
    }

    fn field_names(&self) -> &[&'static str] {
        &["status.replicas"]
    }

    fn field(&self, obj: &Value, name: &str) -> Option<String> {
        (name == "status.replicas").then(|| status_replicas(obj))
    }

    fn warnings(&self, obj: &Value) -> Vec<String> {
        podspec::spec_warnings(obj, "/spec/template/spec", "spec.template.spec")
    }
}

/// ReplicationControllers.
pub struct ReplicationControllerStrategy;

impl Strategy for ReplicationControllerStrategy {
    fn default(&self, obj: &mut Value) {
        let template_labels = obj.pointer("/spec/template/metadata/labels").cloned();
        if let Some(labels) = template_labels.filter(Value::is_object) {
            if let Some(spec) = child(obj, "spec")
                && empty_map(spec.get("selector"))
            {
                spec["selector"] = labels.clone();
            }
            if empty_map(obj.pointer("/metadata/labels")) {
                apimachinery::meta::set(obj, "labels", labels);
            }
        }
        let Some(spec) = child(obj, "spec") else {
            return;
        };
        default_value(spec, "replicas", json!(1));
        if let Some(t) = spec.get_mut("template").filter(|t| t.is_object()) {
            podspec::default_template(t);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = initial_status();
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let p = Path::new("spec");
        let null = Value::Null;
        let spec = obj.get("spec").unwrap_or(&null);
        nonnegative(
            &mut errs,
            &p.child("minReadySeconds"),
            i64_at(spec, "/minReadySeconds"),
        );
        let selector_map = obj_at(spec, "/selector").cloned().unwrap_or_else(Map::new);
        if selector_map.is_empty() {
            errs.push(FieldError::required(p.child("selector"), ""));
        }
        nonnegative(&mut errs, &p.child("replicas"), i64_at(spec, "/replicas"));
        let tp = p.child("template");
        match at(spec, "/template") {
            None => errs.push(FieldError::required(&tp, "")),
            Some(t) => {
                let pairs: Vec<(String, String)> = selector_map
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                    .collect();
                let sel = Selector::from_set(pairs.iter().map(|(k, v)| (k, v)));
                workload::template_matches(&mut errs, Some(&sel), Some(t), &tp);
                workload::long_running_template(&mut errs, Some(t), &tp, "ReplicationController");
            }
        }
        errs
    }

    fn field_names(&self) -> &[&'static str] {
        &["status.replicas"]
    }

    fn field(&self, obj: &Value, name: &str) -> Option<String> {
        (name == "status.replicas").then(|| status_replicas(obj))
    }

    fn warnings(&self, obj: &Value) -> Vec<String> {
        podspec::spec_warnings(obj, "/spec/template/spec", "spec.template.spec")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> Value {
        json!({"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    }

    #[test]
    fn replica_sets_default_to_one_replica_and_validate() {
        let mut rs = json!({"metadata": {"name": "r"}, "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template()}});
        ReplicaSetStrategy.default(&mut rs);
        assert_eq!(rs["spec"]["replicas"], json!(1));
        assert!(ReplicaSetStrategy.validate(&rs).is_empty());
        rs["spec"]["selector"] = json!({});
        let msgs: Vec<String> = ReplicaSetStrategy
            .validate(&rs)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            msgs,
            vec![
                "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"
            ]
        );
    }

    #[test]
    fn replication_controllers_take_selector_and_labels_from_the_template() {
        let mut rc = json!({"metadata": {"name": "r"}, "spec": {"template": template()}});
        ReplicationControllerStrategy.default(&mut rc);
        assert_eq!(rc["spec"]["selector"], json!({"app": "a"}));
        assert_eq!(rc["metadata"]["labels"], json!({"app": "a"}));
        assert_eq!(rc["spec"]["replicas"], json!(1));
        assert!(ReplicationControllerStrategy.validate(&rc).is_empty());
    }

    #[test]
    fn status_replicas_is_selectable_and_zero_by_default() {
        let rs = json!({"metadata": {"name": "r"}});
        assert_eq!(
            ReplicaSetStrategy.field(&rs, "status.replicas").as_deref(),
            Some("0")
        );
        let rs = json!({"status": {"replicas": 3}});
        assert_eq!(
            ReplicaSetStrategy.field(&rs, "status.replicas").as_deref(),
            Some("3")
        );
    }
}
