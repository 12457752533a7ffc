//! Nodes (core/v1): taints, pod CIDRs (`podCIDR` and `podCIDRs` kept in step as upstream's v1
//! conversion does), the fields an update may not change once set, and `spec.unschedulable`
//! as a field selector.

use std::collections::HashSet;

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::validation::is_valid_label_value;
use serde_json::{Value, json};

use super::gofmt;
use super::podspec::resources::validate_quantity;
use super::service::cidr;
use super::util::{arr_at, child, field_string, obj_at, qualified_name, str_at};
use crate::strategy::Strategy;

/// Nodes.
pub struct NodeStrategy;

impl Strategy for NodeStrategy {
    fn keeps_status_on_create(&self) -> bool {
        true
    }

    fn default(&self, obj: &mut Value) {
        let Some(spec) = child(obj, "spec") else {
            return;
        };
        let cidr = str_at(spec, "/podCIDR").to_string();
        let first = arr_at(spec, "/podCIDRs")
            .first()
            .and_then(Value::as_str)
            .map(str::to_string);
        match first {
            Some(f) if !cidr.is_empty() && f != cidr => spec["podCIDRs"] = json!([cidr]),
            Some(f) => spec["podCIDR"] = json!(f),
            None if !cidr.is_empty() => spec["podCIDRs"] = json!([cidr]),
            None => {}
        }
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        taints(
            &mut errs,
            arr_at(obj, "/spec/taints"),
            &Path::new("metadata").child("taints"),
        );
        for section in ["capacity", "allocatable"] {
            for (k, v) in obj_at(obj, &format!("/status/{section}"))
                .into_iter()
                .flatten()
            {
                let p = Path::new("status").child(section).child(k);
                validate_quantity(&mut errs, &p, k, v);
            }
        }
        let cidrs = Path::new("spec").child("podCIDRs");
        let list = arr_at(obj, "/spec/podCIDRs");
        for (i, c) in list.iter().enumerate() {
            cidr(&mut errs, &cidrs.index(i), c.as_str().unwrap_or(""));
        }
        let mut seen = HashSet::new();
        for (i, c) in list.iter().enumerate() {
            if list.len() > 1 && !seen.insert(c.as_str().unwrap_or("")) {
                errs.push(FieldError::duplicate(cidrs.index(i), c.clone()));
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let mut errs = self.validate(new);
        let (o, n) = (arr_at(old, "/spec/podCIDRs"), arr_at(new, "/spec/podCIDRs"));
        if !o.is_empty() && o != n {
            errs.push(FieldError::forbidden(
                "spec.podCIDRs",
                "node updates may not change podCIDR except from \"\" to valid",
            ));
        }
        let (op, np) = (
            str_at(old, "/spec/providerID"),
            str_at(new, "/spec/providerID"),
        );
        if !op.is_empty() && op != np {
            errs.push(FieldError::forbidden(
                "spec.providerID",
                "node updates may not change providerID except from \"\" to valid",
            ));
        }
        if new.pointer("/spec/externalID") != old.pointer("/spec/externalID") {
            errs.push(FieldError::forbidden(
                "spec.externalID",
                "may not be updated",
            ));
        }
        errs
    }

    fn field_names(&self) -> &[&'static str] {
        &["spec.unschedulable"]
    }

    fn field(&self, obj: &Value, name: &str) -> Option<String> {
        (name == "spec.unschedulable").then(|| {
            let v = field_string(obj, "/spec/unschedulable");
            if v.is_empty() { "false".into() } else { v }
        })
    }
}

/// Upstream `validateNodeTaints` (reported under `metadata.taints`, as upstream does).
fn taints(errs: &mut ErrorList, list: &[Value], path: &Path) {
    let mut unique = HashSet::new();
    for (i, t) in list.iter().enumerate() {
        let p = path.index(i);
        let (key, value, effect) = (str_at(t, "/key"), str_at(t, "/value"), str_at(t, "/effect"));
        qualified_name(errs, &p.child("key"), key);
        let msgs = is_valid_label_value(value);
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(
                p.child("value"),
                json!(value),
                msgs.join(";"),
            ));
        }
        const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
        if effect.is_empty() {
            errs.push(FieldError::required(p.child("effect"), ""));
        } else if !EFFECTS.contains(&effect) {
            errs.push(FieldError::not_supported(
                p.child("effect"),
                json!(effect),
                &EFFECTS,
            ));
        }
        if !unique.insert((effect, key)) {
            let mut e = gofmt::duplicate(
                &p,
                format!(
                    "core.Taint{{Key:{}, Value:{}, Effect:{}, TimeAdded:(*v1.Time)(nil)}}",
                    gofmt::quote(key),
                    gofmt::quote(value),
                    gofmt::quote(effect)
                ),
            );
            e.detail
                .push_str(": taints must be unique by key and effect pair");
            errs.push(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_cidr_fields_stay_in_step() {
        let mut n = json!({"spec": {"podCIDR": "10.244.0.0/24"}});
        NodeStrategy.default(&mut n);
        assert_eq!(n["spec"]["podCIDRs"], json!(["10.244.0.0/24"]));
        let mut n = json!({"spec": {"podCIDRs": ["10.244.1.0/24"]}});
        NodeStrategy.default(&mut n);
        assert_eq!(n["spec"]["podCIDR"], json!("10.244.1.0/24"));
    }

    #[test]
    fn duplicate_taints_and_changed_cidrs_are_refused() {
        let old = json!({"spec": {"podCIDRs": ["10.244.0.0/24"]}});
        let new = json!({"spec": {"podCIDRs": ["10.244.1.0/24"], "taints": [
            {"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoSchedule"}]}});
        let msgs: Vec<String> = NodeStrategy
            .validate_update(&new, &old)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            msgs,
            vec![
                "metadata.taints[1]: Duplicate value: core.Taint{Key:\"a\", Value:\"\", Effect:\"NoSchedule\", TimeAdded:(*v1.Time)(nil)}: taints must be unique by key and effect pair",
                "spec.podCIDRs: Forbidden: node updates may not change podCIDR except from \"\" to valid",
            ]
        );
    }

    #[test]
    fn unschedulable_is_selectable_and_false_by_default() {
        assert_eq!(
            NodeStrategy
                .field(&json!({}), "spec.unschedulable")
                .as_deref(),
            Some("false")
        );
        let n = json!({"spec": {"unschedulable": true}});
        assert_eq!(
            NodeStrategy.field(&n, "spec.unschedulable").as_deref(),
            Some("true")
        );
    }
}
