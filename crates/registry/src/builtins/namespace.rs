//! Namespaces (core/v1): DNS-label names, the `kubernetes.io/metadata.name` label, phase
//! `Active` on create and `Terminating` once deletion begins, and the `kubernetes` finalizer in
//! `spec.finalizers`, which only the `finalize` subresource may change afterwards.

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Value, json};

use super::util::{arr_at, child, field_string, qualified_name};
use crate::strategy::{NameRule, Strategy};

/// Finalizer names valid without a domain (upstream `standardFinalizers`).
const STANDARD_FINALIZERS: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];

/// Namespaces.
pub struct NamespaceStrategy;

impl Strategy for NamespaceStrategy {
    fn name_rule(&self) -> NameRule {
        NameRule::DnsLabel
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Active"});
        let mut finalizers: Vec<Value> = arr_at(obj, "/spec/finalizers").to_vec();
        if !finalizers.iter().any(|f| f.as_str() == Some("kubernetes")) {
            finalizers.push(json!("kubernetes"));
        }
        if !obj.get("spec").is_some_and(Value::is_object) {
            obj["spec"] = json!({});
        }
        obj["spec"]["finalizers"] = Value::Array(finalizers);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        // spec.finalizers only change through the finalize subresource.
        new["spec"] = old.get("spec").cloned().unwrap_or_else(|| json!({}));
    }

    fn default(&self, obj: &mut Value) {
        let name = apimachinery::meta::name(obj).to_string();
        if !name.is_empty() {
            let labels = apimachinery::meta::metadata_mut(obj)
                .entry("labels")
                .or_insert_with(|| json!({}));
            if labels.is_null() {
                *labels = json!({});
            }
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
        }
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let p = Path::new("spec").child("finalizers");
        for f in arr_at(obj, "/spec/finalizers") {
            let name = f.as_str().unwrap_or("");
            qualified_name(&mut errs, &p, name);
            if !name.contains('/') && !STANDARD_FINALIZERS.contains(&name) {
                errs.push(FieldError::invalid(
                    &p,
                    json!(name),
                    "name is neither a standard finalizer name nor is it fully qualified",
                ));
            }
        }
        errs
    }

    fn deletion_pending(&self, obj: &Value) -> bool {
        !arr_at(obj, "/spec/finalizers").is_empty()
    }

    fn on_deletion(&self, obj: &mut Value) {
        if let Some(status) = child(obj, "status") {
            status["phase"] = json!("Terminating");
        }
    }

    fn field_names(&self) -> &[&'static str] {
        &["status.phase"]
    }

    fn field(&self, obj: &Value, name: &str) -> Option<String> {
        (name == "status.phase").then(|| field_string(obj, "/status/phase"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_namespaces_are_active_with_the_kubernetes_finalizer() {
        let mut ns =
            json!({"metadata": {"name": "team-a"}, "spec": {"finalizers": ["example.com/x"]}});
        NamespaceStrategy.prepare_for_create(&mut ns);
        NamespaceStrategy.default(&mut ns);
        assert_eq!(ns["status"], json!({"phase": "Active"}));
        assert_eq!(
            ns["spec"]["finalizers"],
            json!(["example.com/x", "kubernetes"])
        );
        assert_eq!(
            ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
            json!("team-a")
        );
        assert!(NamespaceStrategy.deletion_pending(&ns));
        assert!(NamespaceStrategy.validate(&ns).is_empty());
    }

    #[test]
    fn unqualified_unknown_finalizers_are_refused() {
        let ns = json!({"spec": {"finalizers": ["custom"]}});
        let msgs: Vec<String> = NamespaceStrategy
            .validate(&ns)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            msgs,
            vec![
                "spec.finalizers: Invalid value: \"custom\": name is neither a standard finalizer name nor is it fully qualified"
            ]
        );
    }

    #[test]
    fn updates_keep_the_finalizers_and_deletion_marks_terminating() {
        let old = json!({"spec": {"finalizers": ["kubernetes"]}});
        let mut new = json!({"spec": {"finalizers": []}});
        NamespaceStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(new["spec"], old["spec"]);
        NamespaceStrategy.on_deletion(&mut new);
        assert_eq!(
            NamespaceStrategy.field(&new, "status.phase").as_deref(),
            Some("Terminating")
        );
    }
}
