//! Leases (coordination.k8s.io/v1), the heartbeats of nodes and leader elections: upstream
//! `ValidateLeaseSpec` (positive duration, non-negative transition count, a preferred holder
//! only with a strategy).

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Value, json};

use super::util::{NEGATIVE, at, i64_at, str_at};
use crate::strategy::Strategy;

/// Leases.
pub struct LeaseStrategy;

impl Strategy for LeaseStrategy {
    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let p = Path::new("spec");
        if let Some(d) = i64_at(obj, "/spec/leaseDurationSeconds")
            && d <= 0
        {
            errs.push(FieldError::invalid(
                p.child("leaseDurationSeconds"),
                json!(d),
                "must be greater than 0",
            ));
        }
        if let Some(t) = i64_at(obj, "/spec/leaseTransitions")
            && t < 0
        {
            errs.push(FieldError::invalid(
                p.child("leaseTransitions"),
                json!(t),
                NEGATIVE,
            ));
        }
        if at(obj, "/spec/preferredHolder").is_some_and(|h| h.as_str() != Some(""))
            && str_at(obj, "/spec/strategy").is_empty()
        {
            errs.push(FieldError::forbidden(
                p.child("preferredHolder"),
                "may only be specified if `strategy` is defined",
            ));
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_durations_must_be_positive() {
        let lease = json!({"spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 0, "leaseTransitions": -1}});
        let msgs: Vec<String> = LeaseStrategy
            .validate(&lease)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            msgs,
            vec![
                "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
                "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
            ]
        );
        assert!(
            LeaseStrategy
                .validate(&json!({"spec": {"leaseDurationSeconds": 40}}))
                .is_empty()
        );
    }
}
