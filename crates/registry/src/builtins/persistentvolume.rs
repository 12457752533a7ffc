//! PersistentVolumes and PersistentVolumeClaims (core/v1): phase `Pending` on create,
//! `Filesystem` volume mode, `Retain` reclaim policy for volumes, canonical storage
//! quantities; upstream's checks of access modes, capacities and sources; and what updates
//! may change (a claim's spec is immutable except a bound claim's storage request and a
//! volume name set once; a volume's source never changes).

use std::collections::HashSet;

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::labels::{LabelSelectorOptions, validate_label_selector};
use apimachinery::quantity::Quantity;
use apimachinery::validation::is_dns1123_subdomain;
use serde_json::{Value, json};

use super::gofmt;
use super::podspec::containers::no_backsteps;
use super::podspec::default_claim_spec;
use super::podspec::resources::{canonical_list, validate_quantity};
use super::podspec::spec::node_selector;
use super::util::{IMMUTABLE, arr_at, at, child, default_str, default_value, obj_at, str_at};
use crate::strategy::Strategy;

const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
const VOLUME_MODES: [&str; 2] = ["Block", "Filesystem"];
const RECLAIM_POLICIES: [&str; 3] = ["Delete", "Recycle", "Retain"];
/// The source fields of `PersistentVolumeSource`.
const PV_SOURCES: [&str; 22] = [
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "glusterfs",
    "flocker",
    "nfs",
    "rbd",
    "quobyte",
    "cephfs",
    "iscsi",
    "cinder",
    "fc",
    "flexVolume",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "scaleIO",
    "local",
    "storageos",
    "csi",
];

/// Access modes: required (with `detail`), supported, ReadWriteOncePod alone.
fn access_modes(errs: &mut ErrorList, spec: &Value, p: &Path, required_detail: &str) {
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

fn class_name(errs: &mut ErrorList, p: &Path, name: &str) {
    for m in is_dns1123_subdomain(name) {
        errs.push(FieldError::invalid(p, json!(name), m));
    }
}

fn volume_mode(errs: &mut ErrorList, spec: &Value, p: &Path) {
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

/// PersistentVolumes.
pub struct PersistentVolumeStrategy;

impl Strategy for PersistentVolumeStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = child(obj, "spec") else {
            return;
        };
        default_str(spec, "persistentVolumeReclaimPolicy", "Retain");
        default_value(spec, "volumeMode", json!("Filesystem"));
        if let Some(c) = spec.get_mut("capacity") {
            canonical_list(c);
        }
        if let Some(h) = spec.get_mut("hostPath").filter(|h| h.is_object()) {
            default_value(h, "type", json!(""));
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Pending"});
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let null = Value::Null;
        let spec = obj.get("spec").unwrap_or(&null);
        let p = Path::new("spec");
        access_modes(&mut errs, spec, &p, "");
        let capacity = obj_at(spec, "/capacity");
        let cp = p.child("capacity");
        if capacity.is_none_or(|c| c.is_empty()) {
            errs.push(FieldError::required(&cp, ""));
        }
        if capacity.is_none_or(|c| !c.contains_key("storage") || c.len() > 1) {
            errs.push(gofmt::not_supported(
                &cp,
                gofmt::json(spec.get("capacity")),
                &["storage"],
            ));
        }
        for (k, v) in capacity.into_iter().flatten() {
            let kp = cp.key(k);
            if let Some(q) = validate_quantity(&mut errs, &kp, k, v)
                && q.sign() <= 0
            {
                errs.push(FieldError::invalid(
                    &kp,
                    json!(q.to_string()),
                    "must be greater than zero",
                ));
            }
        }
        let policy = str_at(spec, "/persistentVolumeReclaimPolicy");
        if !policy.is_empty() && !RECLAIM_POLICIES.contains(&policy) {
            errs.push(FieldError::not_supported(
                p.child("persistentVolumeReclaimPolicy"),
                json!(policy),
                &RECLAIM_POLICIES,
            ));
        }
        let affinity = at(spec, "/nodeAffinity");
        if let Some(a) = affinity {
            match at(a, "/required") {
                Some(r) => node_selector(&mut errs, r, &p.child("nodeAffinity").child("required")),
                None => errs.push(FieldError::required(
                    p.child("nodeAffinity").child("required"),
                    "must specify required node constraints",
                )),
            }
        }
        let mut n = 0;
        for src in PV_SOURCES {
            let Some(s) = at(spec, &format!("/{src}")) else {
                continue;
            };
            let sp = p.child(src);
            if n > 0 {
                errs.push(FieldError::forbidden(
                    &sp,
                    "may not specify more than 1 volume type",
                ));
                continue;
            }
            n += 1;
            match src {
                "hostPath" | "local" => {
                    let path = str_at(s, "/path");
                    if path.is_empty() {
                        errs.push(FieldError::required(sp.child("path"), ""));
                    } else {
                        no_backsteps(&mut errs, &sp.child("path"), path);
                    }
                    if src == "local" && affinity.is_none() {
                        errs.push(FieldError::required(
                            p.child("nodeAffinity"),
                            "Local volume requires node affinity",
                        ));
                    }
                }
                "nfs" => {
                    let path = str_at(s, "/path");
                    if str_at(s, "/server").is_empty() {
                        errs.push(FieldError::required(sp.child("server"), ""));
                    }
                    if path.is_empty() {
                        errs.push(FieldError::required(sp.child("path"), ""));
                    }
                    if !path.starts_with('/') {
                        errs.push(FieldError::invalid(
                            sp.child("path"),
                            json!(path),
                            "must be an absolute path",
                        ));
                    }
                }
                "csi" => {
                    if str_at(s, "/driver").is_empty() {
                        errs.push(FieldError::required(sp.child("driver"), ""));
                    }
                    if str_at(s, "/volumeHandle").is_empty() {
                        errs.push(FieldError::required(sp.child("volumeHandle"), ""));
                    }
                }
                _ => {}
            }
        }
        if n == 0 {
            errs.push(FieldError::required(&p, "must specify a volume type"));
        }
        if policy == "Recycle"
            && str_at(spec, "/hostPath/path")
                .trim_end_matches('/')
                .is_empty()
            && at(spec, "/hostPath").is_some()
        {
            errs.push(FieldError::forbidden(
                p.child("persistentVolumeReclaimPolicy"),
                "may not be 'recycle' for a hostPath mount of '/'",
            ));
        }
        if let Some(sc) = spec.get("storageClassName").and_then(Value::as_str)
            && !sc.is_empty()
        {
            class_name(&mut errs, &p.child("storageClassName"), sc);
        }
        volume_mode(&mut errs, spec, &p);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let mut errs = self.validate(new);
        let source = |o: &Value| -> Value {
            let mut m = serde_json::Map::new();
            let sources: HashSet<&str> = PV_SOURCES.into_iter().collect();
            for (k, v) in obj_at(o, "/spec").into_iter().flatten() {
                if sources.contains(k.as_str()) && !v.is_null() {
                    m.insert(k.clone(), v.clone());
                }
            }
            Value::Object(m)
        };
        let (ns, os) = (source(new), source(old));
        let mut ns_cmp = ns.clone();
        // A controller-expand secret may be added to a CSI volume that had none.
        if os.pointer("/csi/controllerExpandSecretRef").is_none()
            && let Some(csi) = ns_cmp.get_mut("csi").and_then(Value::as_object_mut)
        {
            csi.remove("controllerExpandSecretRef");
        }
        if ns_cmp != os {
            errs.push(FieldError::forbidden(
                "spec.persistentvolumesource",
                format!(
                    "spec.persistentvolumesource is immutable after creation\n{}",
                    gofmt::struct_diff("core.PersistentVolumeSource", &os, &ns)
                ),
            ));
        }
        if at(new, "/spec/volumeMode") != at(old, "/spec/volumeMode") {
            errs.push(FieldError::invalid(
                "volumeMode",
                at(new, "/spec/volumeMode")
                    .cloned()
                    .unwrap_or(json!("null")),
                IMMUTABLE,
            ));
        }
        if let Some(oa) = at(old, "/spec/nodeAffinity")
            && at(new, "/spec/nodeAffinity") != Some(oa)
        {
            errs.push(gofmt::invalid(
                &Path::new("nodeAffinity"),
                gofmt::json(at(new, "/spec/nodeAffinity")),
                "field is immutable, except for updating from beta label to GA",
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

    #[test]
    fn volumes_default_to_retain_and_keep_their_source() {
        let mut pv = json!({"metadata": {"name": "pv"}, "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "hostPath": {"path": "/data"}}});
        PersistentVolumeStrategy.prepare_for_create(&mut pv);
        PersistentVolumeStrategy.default(&mut pv);
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], json!("Retain"));
        assert_eq!(pv["spec"]["volumeMode"], json!("Filesystem"));
        assert_eq!(pv["status"], json!({"phase": "Pending"}));
        assert!(PersistentVolumeStrategy.validate(&pv).is_empty());
        let mut new = pv.clone();
        new["spec"]["hostPath"]["path"] = json!("/other");
        let msgs = messages(&PersistentVolumeStrategy.validate_update(&new, &pv));
        assert_eq!(msgs.len(), 1);
        assert!(msgs[0].starts_with("spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation\n"));
    }

    #[test]
    fn volumes_need_exactly_one_source() {
        let pv =
            json!({"spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}});
        assert_eq!(
            messages(&PersistentVolumeStrategy.validate(&pv)),
            vec!["spec: Required value: must specify a volume type"]
        );
    }
}
