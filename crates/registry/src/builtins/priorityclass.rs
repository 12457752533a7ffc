//! PriorityClasses (scheduling.k8s.io/v1): `PreemptLowerPriority` by default, user-defined
//! values of at most one billion, `system-` names reserved for the built-in classes, and a
//! value and preemption policy that never change.

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Value, json};

use super::util::{IMMUTABLE, at, default_str, i64_at, one_of};
use crate::strategy::Strategy;

/// Upstream `HighestUserDefinablePriority`.
const HIGHEST_USER_PRIORITY: i64 = 1_000_000_000;
/// The built-in system priority classes and their values.
const SYSTEM_CLASSES: [(&str, i64); 2] = [
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

/// PriorityClasses.
pub struct PriorityClassStrategy;

impl Strategy for PriorityClassStrategy {
    fn default(&self, obj: &mut Value) {
        default_str(obj, "preemptionPolicy", "PreemptLowerPriority");
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let name = apimachinery::meta::name(obj);
        let value = i64_at(obj, "/value").unwrap_or(0);
        let global = obj
            .get("globalDefault")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if name.starts_with("system-") {
            let problem = match SYSTEM_CLASSES.iter().find(|(n, _)| *n == name) {
                None => Some(format!("{name} is not a known system priority class")),
                Some((n, v)) if *v != value => {
                    Some(format!("value of {n} PriorityClass must be {v}"))
                }
                Some((n, _)) if global => {
                    Some(format!("globalDefault of {n} PriorityClass must be false"))
                }
                Some(_) => None,
            };
            if let Some(err) = problem {
                errs.push(FieldError::forbidden(
                    "metadata.name",
                    format!("priority class names with 'system-' prefix are reserved for system use only. error: {err}"),
                ));
            }
        } else if value > HIGHEST_USER_PRIORITY {
            errs.push(FieldError::forbidden(
                "value",
                format!(
                    "maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"
                ),
            ));
        }
        if let Some(p) = obj.get("preemptionPolicy").and_then(Value::as_str) {
            one_of(
                &mut errs,
                &Path::new("preemptionPolicy"),
                p,
                &["PreemptLowerPriority", "Never"],
            );
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let mut errs = self.validate(new);
        if i64_at(new, "/value") != i64_at(old, "/value") {
            errs.push(FieldError::forbidden(
                "value",
                "may not be changed in an update.",
            ));
        }
        let (n, o) = (at(new, "/preemptionPolicy"), at(old, "/preemptionPolicy"));
        if n != o {
            errs.push(FieldError::invalid(
                "preemptionPolicy",
                n.cloned().unwrap_or(json!("null")),
                IMMUTABLE,
            ));
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn priority_classes_default_and_cap_user_values() {
        let mut pc = json!({"metadata": {"name": "high"}, "value": 2_000_000_000i64});
        PriorityClassStrategy.default(&mut pc);
        assert_eq!(pc["preemptionPolicy"], json!("PreemptLowerPriority"));
        assert_eq!(
            messages(&PriorityClassStrategy.validate(&pc)),
            vec![
                "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
            ]
        );
        let pc = json!({"metadata": {"name": "system-mine"}, "value": 1});
        assert_eq!(
            messages(&PriorityClassStrategy.validate(&pc)),
            vec![
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class"
            ]
        );
    }

    #[test]
    fn priority_values_are_immutable() {
        let old = json!({"metadata": {"name": "a"}, "value": 1, "preemptionPolicy": "Never"});
        let new = json!({"metadata": {"name": "a"}, "value": 2, "preemptionPolicy": "Never"});
        assert_eq!(
            messages(&PriorityClassStrategy.validate_update(&new, &old)),
            vec!["value: Forbidden: may not be changed in an update."]
        );
    }
}
