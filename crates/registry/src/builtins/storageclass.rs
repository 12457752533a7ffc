//! StorageClasses (storage.k8s.io/v1): `Delete` reclaim policy and `Immediate` binding by
//! default, a qualified provisioner name, and provisioner, parameters and policies that
//! never change.

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Value, json};

use super::util::{IMMUTABLE, default_str, one_of, qualified_name, str_at};
use crate::strategy::Strategy;

/// StorageClasses.
pub struct StorageClassStrategy;

impl Strategy for StorageClassStrategy {
    fn default(&self, obj: &mut Value) {
        default_str(obj, "reclaimPolicy", "Delete");
        default_str(obj, "volumeBindingMode", "Immediate");
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let provisioner = str_at(obj, "/provisioner");
        if provisioner.is_empty() {
            errs.push(FieldError::required("provisioner", provisioner));
        } else {
            qualified_name(
                &mut errs,
                &Path::new("provisioner"),
                &provisioner.to_lowercase(),
            );
        }
        let params = obj.get("parameters").and_then(Value::as_object);
        let total: usize = params
            .into_iter()
            .flatten()
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        if params.is_some_and(|p| p.keys().any(String::is_empty)) {
            errs.push(FieldError::invalid(
                "parameters",
                json!(""),
                "field can not be empty.",
            ));
        }
        if total > 256 * 1024 {
            errs.push(FieldError::too_long("parameters", 256 * 1024));
        }
        let reclaim = str_at(obj, "/reclaimPolicy");
        if !reclaim.is_empty() && !["Delete", "Retain"].contains(&reclaim) {
            errs.push(FieldError::not_supported(
                "reclaimPolicy",
                json!(reclaim),
                &["Delete", "Retain"],
            ));
        }
        one_of(
            &mut errs,
            &Path::new("volumeBindingMode"),
            str_at(obj, "/volumeBindingMode"),
            &["Immediate", "WaitForFirstConsumer"],
        );
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let mut errs = self.validate(new);
        let norm = |v: Option<&Value>| {
            v.filter(|p| p.as_object().is_some_and(|m| !m.is_empty()))
                .cloned()
        };
        if norm(new.get("parameters")) != norm(old.get("parameters")) {
            errs.push(FieldError::forbidden(
                "parameters",
                "updates to parameters are forbidden.",
            ));
        }
        if str_at(new, "/provisioner") != str_at(old, "/provisioner") {
            errs.push(FieldError::forbidden(
                "provisioner",
                "updates to provisioner are forbidden.",
            ));
        }
        if str_at(new, "/reclaimPolicy") != str_at(old, "/reclaimPolicy") {
            errs.push(FieldError::forbidden(
                "reclaimPolicy",
                "updates to reclaimPolicy are forbidden.",
            ));
        }
        let (n, o) = (
            str_at(new, "/volumeBindingMode"),
            str_at(old, "/volumeBindingMode"),
        );
        if n != o {
            errs.push(FieldError::invalid(
                "volumeBindingMode",
                json!(n),
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
    fn storage_classes_default_and_freeze_their_policies() {
        let mut sc = json!({"metadata": {"name": "fast"}, "provisioner": "example.com/disk"});
        StorageClassStrategy.default(&mut sc);
        assert_eq!(sc["reclaimPolicy"], json!("Delete"));
        assert_eq!(sc["volumeBindingMode"], json!("Immediate"));
        assert!(StorageClassStrategy.validate(&sc).is_empty());
        let mut new = sc.clone();
        new["reclaimPolicy"] = json!("Retain");
        new["parameters"] = json!({"type": "ssd"});
        assert_eq!(
            messages(&StorageClassStrategy.validate_update(&new, &sc)),
            vec![
                "parameters: Forbidden: updates to parameters are forbidden.",
                "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.",
            ]
        );
        assert_eq!(
            messages(&StorageClassStrategy.validate(&json!({"volumeBindingMode": "Immediate"}))),
            vec!["provisioner: Required value"]
        );
    }
}
