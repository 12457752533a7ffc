//! Validation of a pod spec's volumes (upstream `ValidateVolumes` and `validateVolumeSource`):
//! unique DNS-label names, exactly one source each, and the required fields of the sources
//! workloads commonly use. Cloud-provider and legacy in-tree sources are only counted.

use std::collections::HashSet;

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::quantity::Quantity;
use serde_json::{Value, json};

use super::containers::{local_descending_path, no_backsteps};
use super::defaults::VOLUME_SOURCES;
use crate::builtins::util::{arr_at, at, dns_label, i64_at, str_at};

/// Upstream `fileModeErrorMsg`.
const FILE_MODE: &str = "must be a number between 0 and 0777 (octal), both inclusive";

/// Upstream `ValidateVolumes`: the errors, and the names of the volumes that are valid (for
/// volume mounts to refer to).
pub(crate) fn validate_volumes(
    errs: &mut ErrorList,
    volumes: &[Value],
    path: &Path,
) -> HashSet<String> {
    let mut names = HashSet::new();
    for (i, v) in volumes.iter().enumerate() {
        let p = path.index(i);
        let mut own = ErrorList::new();
        source(&mut own, v, &p);
        let name = str_at(v, "/name");
        if name.is_empty() {
            own.push(FieldError::required(p.child("name"), ""));
        } else {
            dns_label(&mut own, &p.child("name"), name);
        }
        if names.contains(name) {
            own.push(FieldError::duplicate(p.child("name"), json!(name)));
        }
        if own.is_empty() {
            names.insert(name.to_string());
        } else {
            errs.extend(own);
        }
    }
    names
}

fn mode(errs: &mut ErrorList, p: &Path, v: &Value, field: &str) {
    if let Some(m) = i64_at(v, &format!("/{field}"))
        && !(0..=0o777).contains(&m)
    {
        errs.push(FieldError::invalid(p.child(field), json!(m), FILE_MODE));
    }
}

/// Upstream `validateKeyToPath`.
fn key_to_path(errs: &mut ErrorList, item: &Value, p: &Path) {
    if str_at(item, "/key").is_empty() {
        errs.push(FieldError::required(p.child("key"), ""));
    }
    let path = str_at(item, "/path");
    if path.is_empty() {
        errs.push(FieldError::required(p.child("path"), ""));
    }
    local_non_reserved_path(errs, &p.child("path"), path);
    mode(errs, p, item, "mode");
}

/// Upstream `ValidateLocalNonReservedPath`.
fn local_non_reserved_path(errs: &mut ErrorList, p: &Path, target: &str) {
    local_descending_path(errs, p, target);
    if target.starts_with("..") && !target.starts_with("../") {
        errs.push(FieldError::invalid(
            p,
            json!(target),
            "must not start with '..'",
        ));
    }
}

/// Upstream `validateVolumeSource`: exactly one source, then its own checks.
fn source(errs: &mut ErrorList, v: &Value, p: &Path) {
    let mut n = 0;
    for kind in VOLUME_SOURCES.iter().chain(std::iter::once(&"image")) {
        let Some(src) = at(v, &format!("/{kind}")) else {
            continue;
        };
        if n > 0 {
            errs.push(FieldError::forbidden(
                p.child(kind),
                "may not specify more than 1 volume type",
            ));
            continue;
        }
        n += 1;
        let sp = p.child(kind);
        match *kind {
            "emptyDir" => {
                if let Some(limit) = at(src, "/sizeLimit")
                    && Quantity::from_json(limit).is_ok_and(|q| q.sign() < 0)
                {
                    errs.push(FieldError::forbidden(
                        sp.child("sizeLimit"),
                        "SizeLimit field must be a valid resource quantity",
                    ));
                }
            }
            "hostPath" => {
                let hp = str_at(src, "/path");
                if hp.is_empty() {
                    errs.push(FieldError::required(sp.child("path"), ""));
                } else {
                    no_backsteps(errs, &sp.child("path"), hp);
                    const TYPES: [&str; 8] = [
                        "",
                        "BlockDevice",
                        "CharDevice",
                        "Directory",
                        "DirectoryOrCreate",
                        "File",
                        "FileOrCreate",
                        "Socket",
                    ];
                    if let Some(t) = src.get("type").and_then(Value::as_str)
                        && !TYPES.contains(&t)
                    {
                        errs.push(FieldError::not_supported(
                            sp.child("type"),
                            json!(t),
                            &TYPES,
                        ));
                    }
                }
            }
            "secret" => {
                if str_at(src, "/secretName").is_empty() {
                    errs.push(FieldError::required(sp.child("secretName"), ""));
                }
                mode(errs, &sp, src, "defaultMode");
                for (i, item) in arr_at(src, "/items").iter().enumerate() {
                    key_to_path(errs, item, &sp.child("items").index(i));
                }
            }
            "configMap" => {
                if str_at(src, "/name").is_empty() {
                    errs.push(FieldError::required(sp.child("name"), ""));
                }
                mode(errs, &sp, src, "defaultMode");
                for (i, item) in arr_at(src, "/items").iter().enumerate() {
                    key_to_path(errs, item, &sp.child("items").index(i));
                }
            }
            "persistentVolumeClaim" if str_at(src, "/claimName").is_empty() => {
                errs.push(FieldError::required(sp.child("claimName"), ""));
            }
            "nfs" => {
                let path = str_at(src, "/path");
                if str_at(src, "/server").is_empty() {
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
            "downwardAPI" => {
                mode(errs, &sp, src, "defaultMode");
                for item in arr_at(src, "/items") {
                    downward_file(errs, item, &sp);
                }
            }
            "projected" => {
                mode(errs, &sp, src, "defaultMode");
                projected(errs, src, &sp);
            }
            "csi" if str_at(src, "/driver").is_empty() => {
                errs.push(FieldError::required(sp.child("driver"), ""));
            }
            "ephemeral" if at(src, "/volumeClaimTemplate").is_none() => {
                errs.push(FieldError::required(sp.child("volumeClaimTemplate"), ""));
            }
            "gitRepo" => {
                if str_at(src, "/repository").is_empty() {
                    errs.push(FieldError::required(sp.child("repository"), ""));
                }
                local_descending_path(errs, &sp.child("directory"), str_at(src, "/directory"));
            }
            _ => {}
        }
    }
    if n == 0 {
        errs.push(FieldError::required(p, "must specify a volume type"));
    }
}

/// Upstream `validateDownwardAPIVolumeFile` (errors at the volume source, as upstream does).
fn downward_file(errs: &mut ErrorList, item: &Value, p: &Path) {
    let path = str_at(item, "/path");
    if path.is_empty() {
        errs.push(FieldError::required(p.child("path"), ""));
    }
    local_non_reserved_path(errs, &p.child("path"), path);
    let field_ref = at(item, "/fieldRef");
    let resource_ref = at(item, "/resourceFieldRef");
    match (field_ref, resource_ref) {
        (Some(f), r) => {
            if str_at(f, "/apiVersion").is_empty() {
                errs.push(FieldError::required(
                    p.child("fieldRef").child("apiVersion"),
                    "",
                ));
            } else if str_at(f, "/fieldPath").is_empty() {
                errs.push(FieldError::required(
                    p.child("fieldRef").child("fieldPath"),
                    "",
                ));
            }
            if r.is_some() {
                errs.push(FieldError::invalid(
                    p,
                    json!("resource"),
                    "fieldRef and resourceFieldRef can not be specified simultaneously",
                ));
            }
        }
        (None, Some(r)) => {
            if str_at(r, "/containerName").is_empty() {
                errs.push(FieldError::required(
                    p.child("resourceFieldRef").child("containerName"),
                    "",
                ));
            }
        }
        (None, None) => errs.push(FieldError::required(
            p,
            "one of fieldRef and resourceFieldRef is required",
        )),
    }
    mode(errs, p, item, "mode");
}

/// Upstream `validateProjectionSources`.
fn projected(errs: &mut ErrorList, src: &Value, p: &Path) {
    let mut paths = HashSet::new();
    for (i, s) in arr_at(src, "/sources").iter().enumerate() {
        let sp = p.child("sources").index(i);
        let mut n = 0;
        for kind in ["secret", "configMap"] {
            if let Some(x) = at(s, &format!("/{kind}")) {
                n += 1;
                if str_at(x, "/name").is_empty() {
                    errs.push(FieldError::required(sp.child(kind).child("name"), ""));
                }
                for (j, item) in arr_at(x, "/items").iter().enumerate() {
                    key_to_path(errs, item, &sp.child(kind).child("items").index(j));
                    let ip = str_at(item, "/path");
                    if !ip.is_empty() && !paths.insert(ip.to_string()) {
                        errs.push(FieldError::invalid(
                            p,
                            json!(str_at(x, "/name")),
                            "conflicting duplicate paths",
                        ));
                    }
                }
            }
        }
        if let Some(d) = at(s, "/downwardAPI") {
            n += 1;
            for item in arr_at(d, "/items") {
                downward_file(errs, item, &sp.child("downwardAPI"));
                let ip = str_at(item, "/path");
                if !ip.is_empty() && !paths.insert(ip.to_string()) {
                    errs.push(FieldError::invalid(
                        p,
                        json!(ip),
                        "conflicting duplicate paths",
                    ));
                }
            }
        }
        if let Some(t) = at(s, "/serviceAccountToken") {
            n += 1;
            let tp = sp.child("serviceAccountToken");
            let exp = i64_at(t, "/expirationSeconds").unwrap_or(0);
            if exp < 600 {
                errs.push(FieldError::invalid(
                    tp.child("expirationSeconds"),
                    json!(exp),
                    "may not specify a duration less than 10 minutes",
                ));
            }
            if exp > 1 << 32 {
                errs.push(FieldError::invalid(
                    tp.child("expirationSeconds"),
                    json!(exp),
                    "may not specify a duration larger than 2^32 seconds",
                ));
            }
            let tpath = str_at(t, "/path");
            if tpath.is_empty() {
                errs.push(FieldError::required(p.child("path"), ""));
            } else {
                local_non_reserved_path(errs, &p.child("path"), tpath);
            }
        }
        if at(s, "/clusterTrustBundle").is_some() {
            n += 1;
        }
        if n > 1 {
            errs.push(FieldError::forbidden(
                &sp,
                "may not specify more than 1 volume type per source",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(volumes: Value) -> Vec<String> {
        let mut errs = ErrorList::new();
        let vols = volumes.as_array().cloned().unwrap_or_default();
        validate_volumes(&mut errs, &vols, &Path::new("spec.volumes"));
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn volumes_need_unique_names_and_one_source() {
        assert_eq!(
            messages(json!([
                {"name": "a", "emptyDir": {}},
                {"name": "a", "emptyDir": {}},
                {"name": "b", "emptyDir": {}, "secret": {"secretName": "s"}},
                {"name": "c"},
            ])),
            vec![
                "spec.volumes[1].name: Duplicate value: \"a\"",
                "spec.volumes[2].secret: Forbidden: may not specify more than 1 volume type",
                "spec.volumes[3]: Required value: must specify a volume type",
            ]
        );
    }

    #[test]
    fn sources_report_their_required_fields() {
        assert_eq!(
            messages(json!([
                {"name": "s", "secret": {"defaultMode": 1000}},
                {"name": "p", "persistentVolumeClaim": {}},
                {"name": "h", "hostPath": {"path": "/a/../b"}},
            ])),
            vec![
                "spec.volumes[0].secret.secretName: Required value",
                "spec.volumes[0].secret.defaultMode: Invalid value: 1000: must be a number between 0 and 0777 (octal), both inclusive",
                "spec.volumes[1].persistentVolumeClaim.claimName: Required value",
                "spec.volumes[2].hostPath.path: Invalid value: \"/a/../b\": must not contain '..'",
            ]
        );
    }
}
