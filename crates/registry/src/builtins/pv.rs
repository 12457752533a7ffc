//! PersistentVolumes (core/v1): phase `Pending` on create, `Retain` reclaim policy and
//! `Filesystem` volume mode by default, upstream's checks of access modes, capacity, node
//! affinity and exactly one volume source, and a source that never changes.

use std::collections::HashSet;

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Value, json};

use super::gofmt;
use super::podspec::containers::no_backsteps;
use super::podspec::resources::{canonical_list, validate_quantity};
use super::podspec::scheduling::node_selector;
use super::util::{IMMUTABLE, at, child, default_str, default_value, obj_at, str_at};
use crate::strategy::Strategy;

use super::pvc::{access_modes, class_name, volume_mode};

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
