//! PodDisruptionBudgets (policy/v1): upstream `ValidatePodDisruptionBudgetSpec` (one of
//! `minAvailable`/`maxUnavailable`, each a non-negative int or percentage up to 100%, a valid
//! selector, a known unhealthy-pod eviction policy) and a zeroed status on create.

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::labels::{LabelSelectorOptions, validate_label_selector};
use serde_json::{Value, json};

use super::gofmt;
use super::util::{at, int_or_percent, not_more_than_100_percent};
use crate::strategy::Strategy;

/// PodDisruptionBudgets.
pub struct PodDisruptionBudgetStrategy;

impl Strategy for PodDisruptionBudgetStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({
            "disruptionsAllowed": 0,
            "currentHealthy": 0,
            "desiredHealthy": 0,
            "expectedPods": 0,
        });
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let p = Path::new("spec");
        let null = Value::Null;
        let spec = obj.get("spec").unwrap_or(&null);
        let (min, max) = (at(spec, "/minAvailable"), at(spec, "/maxUnavailable"));
        if min.is_some() && max.is_some() {
            errs.push(gofmt::invalid(
                &p,
                format!("policy.PodDisruptionBudgetSpec{}", gofmt::json(Some(spec))),
                "minAvailable and maxUnavailable cannot be both set",
            ));
        }
        for (f, v) in [("minAvailable", min), ("maxUnavailable", max)] {
            int_or_percent(&mut errs, &p.child(f), v);
            not_more_than_100_percent(&mut errs, &p.child(f), v);
        }
        if let Some(sel) = at(spec, "/selector") {
            errs.extend(validate_label_selector(
                sel,
                LabelSelectorOptions::default(),
                &p.child("selector"),
            ));
        }
        if let Some(policy) = spec
            .get("unhealthyPodEvictionPolicy")
            .and_then(Value::as_str)
            && !["AlwaysAllow", "IfHealthyBudget"].contains(&policy)
        {
            errs.push(FieldError::not_supported(
                p.child("unhealthyPodEvictionPolicy"),
                json!(policy),
                &["AlwaysAllow", "IfHealthyBudget"],
            ));
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_take_one_bound_within_100_percent() {
        let pdb =
            json!({"spec": {"minAvailable": "150%", "selector": {"matchLabels": {"app": "a"}}}});
        let msgs: Vec<String> = PodDisruptionBudgetStrategy
            .validate(&pdb)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            msgs,
            vec![
                "spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%"
            ]
        );
        let pdb = json!({"spec": {"minAvailable": 1, "maxUnavailable": 1}});
        let msgs: Vec<String> = PodDisruptionBudgetStrategy
            .validate(&pdb)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(msgs.len(), 1);
        assert!(msgs[0].ends_with("minAvailable and maxUnavailable cannot be both set"));
    }

    #[test]
    fn new_budgets_start_with_a_zeroed_status() {
        let mut pdb = json!({"spec": {}});
        PodDisruptionBudgetStrategy.prepare_for_create(&mut pdb);
        assert_eq!(pdb["status"]["disruptionsAllowed"], json!(0));
    }
}
