//! What configMap, secret and downwardAPI volumes (and the same sources in a projected
//! volume) contain, as pure functions of the objects (upstream `configmap.MakePayload`,
//! `secret.MakePayload`, `downwardapi.CollectData`).
//!
//! Without `items` every key becomes a file named after it; with `items` only the listed keys,
//! at their paths, and a listed key that is missing is an error unless the source is optional.
//! Modes are the item's `mode` or the volume's `defaultMode` (0644 when an object did not pass
//! through an API server's defaulting).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, DownwardAPIVolumeFile, KeyToPath, Pod, Secret};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::atomic::{FileProjection, Payload};
use crate::kubelet::env::fieldpath;

/// The mode files get when neither the item nor the volume says (upstream's default 0644).
pub const DEFAULT_MODE: u32 = 0o644;

/// A volume's `defaultMode` as permission bits.
pub fn mode_or_default(mode: Option<i32>) -> u32 {
    mode.and_then(|m| u32::try_from(m).ok())
        .unwrap_or(DEFAULT_MODE)
}

/// The files of a configMap source. A missing optional ConfigMap is passed as `None`.
pub fn config_map_payload(
    items: Option<&[KeyToPath]>,
    cm: Option<&ConfigMap>,
    default_mode: u32,
    optional: bool,
) -> Result<Payload, String> {
    let empty = BTreeMap::new();
    let data = cm.and_then(|c| c.data.as_ref()).unwrap_or(&empty);
    let empty_bin = BTreeMap::new();
    let binary = cm
        .and_then(|c| c.binary_data.as_ref())
        .unwrap_or(&empty_bin);
    let get = |k: &str| -> Option<Vec<u8>> {
        data.get(k)
            .map(|s| s.as_bytes().to_vec())
            .or_else(|| binary.get(k).map(|b| b.0.clone()))
    };
    let keys = data.keys().chain(binary.keys());
    make_payload(
        items,
        keys,
        get,
        default_mode,
        optional,
        "configmap references non-existent config key",
    )
}

/// The files of a secret source. A missing optional Secret is passed as `None`. (`stringData`
/// is folded into `data` by the API server.)
pub fn secret_payload(
    items: Option<&[KeyToPath]>,
    secret: Option<&Secret>,
    default_mode: u32,
    optional: bool,
) -> Result<Payload, String> {
    let empty = BTreeMap::new();
    let data = secret.and_then(|s| s.data.as_ref()).unwrap_or(&empty);
    let get = |k: &str| data.get(k).map(|b| b.0.clone());
    make_payload(
        items,
        data.keys(),
        get,
        default_mode,
        optional,
        "references non-existent secret key",
    )
}

fn make_payload<'a>(
    items: Option<&[KeyToPath]>,
    keys: impl Iterator<Item = &'a String>,
    get: impl Fn(&str) -> Option<Vec<u8>>,
    default_mode: u32,
    optional: bool,
    missing: &str,
) -> Result<Payload, String> {
    let mut out = Payload::new();
    match items.filter(|i| !i.is_empty()) {
        None => {
            for k in keys {
                if let Some(data) = get(k) {
                    out.insert(k.clone(), FileProjection::new(data, default_mode));
                }
            }
        }
        Some(items) => {
            for item in items {
                let Some(data) = get(&item.key) else {
                    if optional {
                        continue;
                    }
                    return Err(format!("{missing}: {}", item.key));
                };
                let mode = item
                    .mode
                    .and_then(|m| u32::try_from(m).ok())
                    .unwrap_or(default_mode);
                out.insert(item.path.clone(), FileProjection::new(data, mode));
            }
        }
    }
    Ok(out)
}

/// The files of a downwardAPI source (upstream `CollectData`): every item is attempted and
/// the errors are reported together.
pub fn downward_api_payload(
    items: &[DownwardAPIVolumeFile],
    pod: &Pod,
    node_allocatable: &BTreeMap<String, Quantity>,
    default_mode: u32,
) -> Result<Payload, String> {
    let mut out = Payload::new();
    let mut errs = Vec::new();
    for item in items {
        let mode = item
            .mode
            .and_then(|m| u32::try_from(m).ok())
            .unwrap_or(default_mode);
        let mut data = Vec::new();
        if let Some(f) = &item.field_ref {
            match fieldpath::extract_field_path(pod, &f.field_path) {
                Ok(v) => data = v.into_bytes(),
                Err(e) => errs.push(e),
            }
        } else if let Some(r) = &item.resource_field_ref {
            let name = r.container_name.as_deref().unwrap_or_default();
            match fieldpath::resource_value_by_container_name(r, pod, name, node_allocatable) {
                Ok(v) => data = v.into_bytes(),
                Err(e) => errs.push(e),
            }
        }
        out.insert(clean(&item.path), FileProjection::new(data, mode));
    }
    if errs.is_empty() {
        Ok(out)
    } else {
        Err(aggregate(&errs))
    }
}

/// `path.Clean` for the relative paths validation allows.
fn clean(p: &str) -> String {
    p.split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// Several errors as one message (upstream `utilerrors.NewAggregate(...).Error()`): one error
/// is its message; more are `[a, b]`, each distinct message once.
pub fn aggregate(errs: &[String]) -> String {
    match errs {
        [] => String::new(),
        [one] => one.clone(),
        _ => {
            let mut seen: Vec<&str> = Vec::new();
            for e in errs {
                if !seen.contains(&e.as_str()) {
                    seen.push(e);
                }
            }
            if seen.len() == 1 {
                seen[0].to_string()
            } else {
                format!("[{}]", seen.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{ObjectFieldSelector, ResourceFieldSelector};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn cm(data: &[(&str, &str)], binary: &[(&str, &[u8])]) -> ConfigMap {
        ConfigMap {
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            binary_data: Some(
                binary
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    fn item(key: &str, path: &str, mode: Option<i32>) -> KeyToPath {
        KeyToPath {
            key: key.into(),
            path: path.into(),
            mode,
        }
    }

    #[test]
    fn every_key_becomes_a_file_without_items() {
        let p = config_map_payload(
            None,
            Some(&cm(&[("a", "1")], &[("bin", b"\x00\x01")])),
            0o644,
            false,
        )
        .unwrap();
        assert_eq!(p["a"], FileProjection::new("1", 0o644));
        assert_eq!(p["bin"].data, vec![0, 1]);
    }

    #[test]
    fn items_choose_keys_paths_and_modes() {
        let c = cm(&[("a", "1"), ("b", "2")], &[]);
        let items = [item("a", "dir/a.txt", Some(0o400)), item("b", "b", None)];
        let p = config_map_payload(Some(&items), Some(&c), 0o440, false).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p["dir/a.txt"], FileProjection::new("1", 0o400));
        assert_eq!(p["b"].mode, 0o440);
    }

    #[test]
    fn a_missing_item_key_is_an_error_unless_optional() {
        let c = cm(&[("a", "1")], &[]);
        let items = [item("nope", "x", None)];
        assert_eq!(
            config_map_payload(Some(&items), Some(&c), 0o644, false).unwrap_err(),
            "configmap references non-existent config key: nope"
        );
        assert!(
            config_map_payload(Some(&items), Some(&c), 0o644, true)
                .unwrap()
                .is_empty()
        );
        let s = Secret {
            data: Some([("t".to_string(), ByteString(b"x".to_vec()))].into()),
            ..Default::default()
        };
        assert_eq!(
            secret_payload(Some(&items), Some(&s), 0o644, false).unwrap_err(),
            "references non-existent secret key: nope"
        );
        assert!(secret_payload(None, None, 0o644, true).unwrap().is_empty());
    }

    #[test]
    fn downward_api_files_hold_fields_and_resources() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "labels": {"b": "2", "a": "1"}},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"memory": "64Mi"}}}]}
        }))
        .unwrap();
        let file =
            |path: &str, field: Option<&str>, res: Option<(&str, &str)>| DownwardAPIVolumeFile {
                path: path.into(),
                field_ref: field.map(|f| ObjectFieldSelector {
                    api_version: Some("v1".into()),
                    field_path: f.into(),
                }),
                resource_field_ref: res.map(|(c, r)| ResourceFieldSelector {
                    container_name: Some(c.into()),
                    resource: r.into(),
                    divisor: Some(Quantity("1Mi".into())),
                }),
                mode: None,
            };
        let alloc: BTreeMap<String, Quantity> = [("cpu".into(), Quantity("2".into()))].into();
        let items = [
            file("labels", Some("metadata.labels"), None),
            file("./name", Some("metadata.name"), None),
            file("mem", None, Some(("c", "limits.memory"))),
            file("cpu", None, Some(("c", "limits.cpu"))),
        ];
        let p = downward_api_payload(&items, &pod, &alloc, 0o644).unwrap();
        assert_eq!(p["labels"].data, b"a=\"1\"\nb=\"2\"");
        assert_eq!(p["name"].data, b"p");
        assert_eq!(p["mem"].data, b"64");
        // 2 cores of allocatable, in units of 1Mi cores rounded up.
        assert_eq!(p["cpu"].data, b"1");

        let bad = [
            file("x", Some("spec.nodeName"), None),
            file("y", None, Some(("nope", "limits.cpu"))),
        ];
        assert_eq!(
            downward_api_payload(&bad, &pod, &alloc, 0o644).unwrap_err(),
            "[unsupported fieldPath: spec.nodeName, container nope not found]"
        );
        let _ = ObjectMeta::default();
    }

    #[test]
    fn aggregated_messages_are_deduplicated() {
        assert_eq!(aggregate(&["a".into()]), "a");
        assert_eq!(aggregate(&["a".into(), "a".into()]), "a");
        assert_eq!(aggregate(&["a".into(), "b".into(), "a".into()]), "[a, b]");
    }
}
