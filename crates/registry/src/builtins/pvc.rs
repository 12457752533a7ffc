//! PersistentVolumeClaims (core/v1): phase `Pending` on create, `Filesystem` volume mode,
//! canonical storage quantities, upstream's claim spec checks (also used for claim templates)
//! and the update rule: a claim's spec is immutable except a bound claim's storage request and
//! a volume name set once.

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::labels::{LabelSelectorOptions, validate_label_selector};
use apimachinery::quantity::Quantity;
use apimachinery::validation::is_dns1123_subdomain;
use serde_json::{Value, json};

use super::gofmt;
use super::podspec::default_claim_spec;
use super::podspec::resources::validate_quantity;
use super::util::{IMMUTABLE, arr_at, at, child, str_at};
use crate::strategy::Strategy;

const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
const VOLUME_MODES: [&str; 2] = ["Block", "Filesystem"];

/// Access modes: required (with `detail`), supported, ReadWriteOncePod alone.
pub(super) fn access_modes(errs: &mut ErrorList, spec: &Value, p: &Path, required_detail: &str) {
    let modes = arr_at(spec, "/accessModes");
    if modes.is_empty() {
        errs.push(FieldError::required(
            p.child("accessModes"),
            required_detail,
        ));
    }
    let (mut rwop, mut other) = (false, false);
    for m in modes {
        let m = m.as_str().unwrap_or("");
        if !ACCESS_MODES.contains(&m) {
            errs.push(FieldError::not_supported(
                p.child("accessModes"),
                json!(m),
                &ACCESS_MODES,
            ));
        }
        if m == "ReadWriteOncePod" {
            rwop = true;
        } else if ACCESS_MODES.contains(&m) {
            other = true;
        }
    }
    if rwop && other {
        errs.push(FieldError::forbidden(
            p.child("accessModes"),
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
}

pub(super) fn class_name(errs: &mut ErrorList, p: &Path, name: &str) {
    for m in is_dns1123_subdomain(name) {
        errs.push(FieldError::invalid(p, json!(name), m));
    }
}

pub(super) fn volume_mode(errs: &mut ErrorList, spec: &Value, p: &Path) {
    if let Some(m) = spec.get("volumeMode").and_then(Value::as_str)
        && !VOLUME_MODES.contains(&m)
    {
        errs.push(FieldError::not_supported(
            p.child("volumeMode"),
            json!(m),
            &VOLUME_MODES,
        ));
    }
}

/// Upstream `ValidatePersistentVolumeClaimSpec`.
pub(crate) fn validate_claim_spec(errs: &mut ErrorList, spec: &Value, p: &Path) {
    access_modes(errs, spec, p, "at least 1 access mode is required");
    if let Some(sel) = at(spec, "/selector") {
        errs.extend(validate_label_selector(
            sel,
            LabelSelectorOptions::default(),
            &p.child("selector"),
        ));
    }
    let sp = p.child("resources").key("storage");
    match spec.pointer("/resources/requests/storage") {
        None => errs.push(FieldError::required(&sp, "")),
        Some(raw) => match Quantity::from_json(raw) {
            Ok(q) if q.sign() <= 0 => {
                errs.push(FieldError::invalid(
                    &sp,
                    json!(q.to_string()),
                    "must be greater than zero",
                ));
            }
            _ => {
                validate_quantity(errs, &sp, "storage", raw);
            }
        },
    }
    if let Some(sc) = spec.get("storageClassName").and_then(Value::as_str)
        && !sc.is_empty()
    {
        class_name(errs, &p.child("storageClassName"), sc);
    }
    volume_mode(errs, spec, p);
    for (key, dp) in [
        ("dataSource", p.child("dataSource")),
        ("dataSourceRef", p.child("dataSourceRef")),
    ] {
        let Some(ds) = at(spec, &format!("/{key}")) else {
            continue;
        };
        if str_at(ds, "/name").is_empty() {
            errs.push(FieldError::required(dp.child("name"), ""));
        }
        let kind = str_at(ds, "/kind");
        if kind.is_empty() {
            errs.push(FieldError::required(dp.child("kind"), ""));
        }
        let group = str_at(ds, "/apiGroup");
        if group.is_empty() && kind != "PersistentVolumeClaim" {
            errs.push(FieldError::invalid(
                &dp,
                json!(kind),
                "must be 'PersistentVolumeClaim' when referencing the default apiGroup",
            ));
        }
        if !group.is_empty() {
            for m in is_dns1123_subdomain(group) {
                errs.push(FieldError::invalid(dp.child("apiGroup"), json!(group), m));
            }
        }
    }
}

/// PersistentVolumeClaims.
pub struct PersistentVolumeClaimStrategy;

impl Strategy for PersistentVolumeClaimStrategy {
    fn default(&self, obj: &mut Value) {
        if let Some(spec) = child(obj, "spec") {
            default_claim_spec(spec);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Pending"});
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        validate_claim_spec(
            &mut errs,
            obj.get("spec").unwrap_or(&Value::Null),
            &Path::new("spec"),
        );
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let mut errs = self.validate(new);
        let null = Value::Null;
        let (ns, os) = (
            new.get("spec").unwrap_or(&null),
            old.get("spec").unwrap_or(&null),
        );
        let mut new_clone = ns.clone();
        let mut old_clone = os.clone();
        if str_at(os, "/volumeName").is_empty() {
            copy_field(&mut old_clone, ns, "volumeName");
        }
        let beta = "volume.beta.kubernetes.io/storage-class";
        let old_ann = apimachinery::meta::annotation(old, beta);
        if at(os, "/storageClassName").is_none()
            && at(ns, "/storageClassName").is_some()
            && old_ann.is_none_or(|a| Some(a) == ns.get("storageClassName").and_then(Value::as_str))
        {
            copy_field(&mut new_clone, os, "storageClassName");
        }
        let bound = str_at(new, "/status/phase") == "Bound";
        if bound {
            if let Some(req) = new_clone
                .pointer_mut("/resources/requests")
                .and_then(Value::as_object_mut)
            {
                match os.pointer("/resources/requests/storage") {
                    Some(s) => {
                        req.insert("storage".into(), s.clone());
                    }
                    None => {
                        req.remove("storage");
                    }
                }
            }
            if at(&new_clone, "/volumeAttributesClassName").is_some() {
                copy_field(&mut new_clone, &old_clone, "volumeAttributesClassName");
            }
        }
        if new_clone != old_clone {
            errs.push(FieldError::forbidden(
                "spec",
                format!(
                    "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n{}",
                    gofmt::struct_diff("core.PersistentVolumeClaimSpec", &old_clone, &new_clone)
                ),
            ));
        }
        let size = |s: &Value, ptr: &str| s.pointer(ptr).and_then(|q| Quantity::from_json(q).ok());
        let (new_size, old_size) = (
            size(ns, "/resources/requests/storage"),
            size(os, "/resources/requests/storage"),
        );
        let status_size = size(old, "/status/capacity/storage");
        if let (Some(n), Some(o)) = (&new_size, &old_size)
            && n < o
            && status_size.as_ref().map_or(n.sign() <= 0, |s| n <= s)
        {
            errs.push(FieldError::forbidden(
                "spec.resources.requests.storage",
                "field can not be less than status.capacity",
            ));
        }
        if at(ns, "/volumeMode") != at(os, "/volumeMode") {
            errs.push(FieldError::invalid(
                "volumeMode",
                at(ns, "/volumeMode").cloned().unwrap_or(json!("null")),
                IMMUTABLE,
            ));
        }
        errs
    }
}

fn copy_field(dst: &mut Value, src: &Value, field: &str) {
    if let Some(m) = dst.as_object_mut() {
        match src.get(field) {
            Some(v) => {
                m.insert(field.into(), v.clone());
            }
            None => {
                m.remove(field);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    fn claim() -> Value {
        json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1024Mi"}}}})
    }

    #[test]
    fn claims_are_defaulted_and_pending() {
        let mut c = claim();
        PersistentVolumeClaimStrategy.prepare_for_create(&mut c);
        PersistentVolumeClaimStrategy.default(&mut c);
        assert_eq!(c["spec"]["volumeMode"], json!("Filesystem"));
        assert_eq!(c["spec"]["resources"]["requests"]["storage"], json!("1Gi"));
        assert_eq!(c["status"], json!({"phase": "Pending"}));
        assert!(PersistentVolumeClaimStrategy.validate(&c).is_empty());
    }

    #[test]
    fn claims_need_access_modes_and_storage() {
        let c = json!({"spec": {"accessModes": ["ReadWriteEverywhere"], "resources": {}}});
        assert_eq!(
            messages(&PersistentVolumeClaimStrategy.validate(&c)),
            vec![
                "spec.accessModes: Unsupported value: \"ReadWriteEverywhere\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
                "spec.resources[storage]: Required value",
            ]
        );
    }

    #[test]
    fn bound_claims_may_only_grow_their_request() {
        let mut old = claim();
        PersistentVolumeClaimStrategy.default(&mut old);
        old["status"] = json!({"phase": "Bound", "capacity": {"storage": "1Gi"}});
        let mut new = old.clone();
        new["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert!(
            PersistentVolumeClaimStrategy
                .validate_update(&new, &old)
                .is_empty()
        );
        new["spec"]["accessModes"] = json!(["ReadWriteMany"]);
        let msgs = messages(&PersistentVolumeClaimStrategy.validate_update(&new, &old));
        assert_eq!(msgs.len(), 1);
        assert!(msgs[0].starts_with("spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n"));
    }
}
