//! The downward API's values: pod fields by path (`fieldRef`) and container resources
//! (`resourceFieldRef`), shared by env variables and downwardAPI/projected volume files.
//!
//! Upstream: `pkg/fieldpath` (`ExtractFieldPathAsString`, `FormatMap`,
//! `SplitMaybeSubscriptedPath`), `pkg/apis/core/pods` (`ConvertDownwardAPIFieldLabel`) and
//! `pkg/api/v1/resource` (`ExtractContainerResourceValue` and the node-allocatable defaults).
//! Error messages are upstream's, since they reach users as container waiting messages and
//! `FailedMount` events.

use std::collections::BTreeMap;

use apimachinery::quantity::Quantity as Q;
use apimachinery::validation::is_qualified_name;
use k8s_openapi::api::core::v1::{Container, Pod, ResourceFieldSelector, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Splits `metadata.labels['key']` into the path and the key (upstream
/// `SplitMaybeSubscriptedPath`).
pub fn split_subscript(path: &str) -> Option<(&str, &str)> {
    let s = path.strip_suffix("']")?;
    let (head, key) = s.split_once("['")?;
    (!head.is_empty()).then_some((head, key))
}

/// Checks a `fieldRef` path for the pod's API version and returns the internal path (upstream
/// `ConvertDownwardAPIFieldLabel`; the deprecated `spec.host` means `spec.nodeName`).
pub fn convert_field_label(api_version: &str, path: &str) -> Result<String, String> {
    // The API server defaults the version to v1; an empty one is taken as v1 too.
    if !api_version.is_empty() && api_version != "v1" {
        return Err(format!("unsupported pod version: {api_version}"));
    }
    if let Some((head, _)) = split_subscript(path) {
        return match head {
            "metadata.annotations" | "metadata.labels" => Ok(path.to_string()),
            _ => Err(format!("field label does not support subscript: {path}")),
        };
    }
    match path {
        "metadata.annotations"
        | "metadata.labels"
        | "metadata.name"
        | "metadata.namespace"
        | "metadata.uid"
        | "spec.nodeName"
        | "spec.restartPolicy"
        | "spec.serviceAccountName"
        | "spec.schedulerName"
        | "status.phase"
        | "status.hostIP"
        | "status.hostIPs"
        | "status.podIP"
        | "status.podIPs" => Ok(path.to_string()),
        "spec.host" => Ok("spec.nodeName".to_string()),
        _ => Err(format!("field label not supported: {path}")),
    }
}

/// The value of a metadata path of the pod (upstream `ExtractFieldPathAsString`): name,
/// namespace, uid, all labels or annotations as `key="value"` lines, or one of them by key.
pub fn extract_field_path(pod: &Pod, path: &str) -> Result<String, String> {
    let meta = &pod.metadata;
    let empty = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);
    if let Some((head, key)) = split_subscript(path) {
        return match head {
            "metadata.annotations" => {
                check_subscript(path, &key.to_lowercase())?;
                Ok(annotations.get(key).cloned().unwrap_or_default())
            }
            "metadata.labels" => {
                check_subscript(path, key)?;
                Ok(labels.get(key).cloned().unwrap_or_default())
            }
            _ => Err(format!("fieldPath {path:?} does not support subscript")),
        };
    }
    match path {
        "metadata.annotations" => Ok(format_map(annotations)),
        "metadata.labels" => Ok(format_map(labels)),
        "metadata.name" => Ok(meta.name.clone().unwrap_or_default()),
        "metadata.namespace" => Ok(meta.namespace.clone().unwrap_or_default()),
        "metadata.uid" => Ok(meta.uid.clone().unwrap_or_default()),
        _ => Err(format!("unsupported fieldPath: {path}")),
    }
}

fn check_subscript(path: &str, key: &str) -> Result<(), String> {
    let errs = is_qualified_name(key);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "invalid key subscript in {path}: {}",
            errs.join(";")
        ))
    }
}

/// Labels or annotations as the downward API prints them: `key="value"` lines sorted by key,
/// values quoted as Go's `%q` does, no trailing newline (upstream `FormatMap`).
pub fn format_map(m: &BTreeMap<String, String>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

pub use apimachinery::gofmt::quote as go_quote;

/// A container's resource value for `resourceFieldRef` (upstream
/// `ExtractContainerResourceValue`): cpu in units of the divisor rounded up, memory, storage
/// and huge pages in units of the divisor rounded up. `container` should carry the limits
/// already defaulted to node allocatable ([`with_allocatable_limits`]).
pub fn container_resource_value(
    fs: &ResourceFieldSelector,
    container: &Container,
) -> Result<String, String> {
    let divisor = match fs.divisor.as_ref() {
        Some(d) => Q::parse(&d.0).map_err(|e| format!("invalid divisor {:?}: {e}", d.0))?,
        None => Q::new(1, apimachinery::quantity::Format::DecimalSI),
    };
    let divisor = if divisor.is_zero() {
        Q::new(1, apimachinery::quantity::Format::DecimalSI)
    } else {
        divisor
    };
    let (kind, name) = fs
        .resource
        .split_once('.')
        .ok_or_else(|| format!("unsupported container resource : {}", fs.resource))?;
    let empty = BTreeMap::new();
    let resources = container.resources.as_ref();
    let list = match kind {
        "limits" => resources.and_then(|r| r.limits.as_ref()),
        "requests" => resources.and_then(|r| r.requests.as_ref()),
        _ => return Err(format!("unsupported container resource : {}", fs.resource)),
    }
    .unwrap_or(&empty);
    let known =
        matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-");
    if !known {
        return Err(format!("unsupported container resource : {}", fs.resource));
    }
    let value = match list.get(name) {
        Some(q) => Q::parse(&q.0).map_err(|e| format!("invalid quantity {:?}: {e}", q.0))?,
        None => Q::zero(apimachinery::quantity::Format::DecimalSI),
    };
    let n = if name == "cpu" {
        ceil_div(value.milli_value_i128(), divisor.milli_value_i128())
    } else {
        ceil_div(value.scaled_value_i128(0), divisor.scaled_value_i128(0))
    };
    Ok(n.to_string())
}

/// `resourceFieldRef` naming another container (upstream `ExtractResourceValueByContainerName`):
/// regular containers first, then init containers.
pub fn resource_value_by_container_name(
    fs: &ResourceFieldSelector,
    pod: &Pod,
    container_name: &str,
    allocatable: &BTreeMap<String, Quantity>,
) -> Result<String, String> {
    let spec = pod.spec.as_ref();
    let found = spec
        .into_iter()
        .flat_map(|s| s.containers.iter())
        .chain(
            spec.into_iter()
                .flat_map(|s| s.init_containers.iter().flatten()),
        )
        .find(|c| c.name == container_name)
        .ok_or_else(|| format!("container {container_name} not found"))?;
    container_resource_value(fs, &with_allocatable_limits(found, allocatable))
}

/// The container with every unset cpu, memory, ephemeral-storage and huge-page limit set to the
/// node's allocatable amount (upstream `MergeContainerResourceLimits`).
pub fn with_allocatable_limits(
    container: &Container,
    allocatable: &BTreeMap<String, Quantity>,
) -> Container {
    let mut c = container.clone();
    let resources = c
        .resources
        .get_or_insert_with(ResourceRequirements::default);
    let limits = resources.limits.get_or_insert_with(BTreeMap::new);
    for (name, q) in allocatable {
        let defaulted = matches!(name.as_str(), "cpu" | "memory" | "ephemeral-storage")
            || name.starts_with("hugepages-");
        if defaulted && !limits.contains_key(name) {
            limits.insert(name.clone(), q.clone());
        }
    }
    c
}

fn ceil_div(a: i128, b: i128) -> i128 {
    if b == 0 {
        return 0;
    }
    let q = a / b;
    if (a % b != 0) && ((a > 0) == (b > 0)) {
        q + 1
    } else {
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn q(s: &str) -> Quantity {
        Quantity(s.into())
    }

    fn sel(resource: &str, divisor: Option<&str>) -> ResourceFieldSelector {
        ResourceFieldSelector {
            resource: resource.into(),
            divisor: divisor.map(q),
            container_name: None,
        }
    }

    fn container(limits: &[(&str, &str)], requests: &[(&str, &str)]) -> Container {
        let m = |v: &[(&str, &str)]| v.iter().map(|(k, v)| (k.to_string(), q(v))).collect();
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                limits: Some(m(limits)),
                requests: Some(m(requests)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn labels_print_as_sorted_quoted_lines() {
        let m: BTreeMap<String, String> = [("zone", "us-east"), ("app", "say \"hi\"\n")]
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        assert_eq!(
            format_map(&m),
            "app=\"say \\\"hi\\\"\\n\"\nzone=\"us-east\""
        );
    }

    #[test]
    fn go_quoting_escapes_what_go_escapes() {
        assert_eq!(go_quote("a\tb\\c"), r#""a\tb\\c""#);
        assert_eq!(go_quote("\u{1}\u{7f}"), r#""\x01\x7f""#);
        assert_eq!(go_quote("héllo 世界"), "\"héllo 世界\"");
        assert_eq!(go_quote("\u{a0}\u{200b}"), r#""\u00a0\u200b""#);
    }

    #[test]
    fn subscripted_paths_read_one_label_or_annotation() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                labels: Some([("app".to_string(), "web".to_string())].into()),
                annotations: Some([("Note".to_string(), "x".to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(
            extract_field_path(&pod, "metadata.labels['app']").unwrap(),
            "web"
        );
        assert_eq!(
            extract_field_path(&pod, "metadata.labels['none']").unwrap(),
            ""
        );
        assert_eq!(
            extract_field_path(&pod, "metadata.annotations['Note']").unwrap(),
            "x"
        );
        assert_eq!(extract_field_path(&pod, "metadata.name").unwrap(), "p");
        assert_eq!(
            extract_field_path(&pod, "spec.nodeName").unwrap_err(),
            "unsupported fieldPath: spec.nodeName"
        );
        assert!(
            extract_field_path(&pod, "metadata.labels['-bad']")
                .unwrap_err()
                .starts_with("invalid key subscript in metadata.labels['-bad']: ")
        );
    }

    #[test]
    fn field_labels_convert_as_upstream() {
        assert_eq!(
            convert_field_label("v1", "spec.host").unwrap(),
            "spec.nodeName"
        );
        assert_eq!(
            convert_field_label("v2", "metadata.name").unwrap_err(),
            "unsupported pod version: v2"
        );
        assert_eq!(
            convert_field_label("v1", "spec.nodeName['x']").unwrap_err(),
            "field label does not support subscript: spec.nodeName['x']"
        );
        assert_eq!(
            convert_field_label("v1", "spec.containers").unwrap_err(),
            "field label not supported: spec.containers"
        );
    }

    #[test]
    fn cpu_is_rounded_up_to_whole_divisors() {
        let c = container(&[("cpu", "250m"), ("memory", "64Mi")], &[("cpu", "125m")]);
        assert_eq!(
            container_resource_value(&sel("limits.cpu", None), &c).unwrap(),
            "1"
        );
        assert_eq!(
            container_resource_value(&sel("limits.cpu", Some("1m")), &c).unwrap(),
            "250"
        );
        assert_eq!(
            container_resource_value(&sel("requests.cpu", Some("100m")), &c).unwrap(),
            "2"
        );
        assert_eq!(
            container_resource_value(&sel("limits.memory", None), &c).unwrap(),
            "67108864"
        );
        assert_eq!(
            container_resource_value(&sel("limits.memory", Some("1Mi")), &c).unwrap(),
            "64"
        );
        assert_eq!(
            container_resource_value(&sel("limits.memory", Some("1G")), &c).unwrap(),
            "1"
        );
        assert_eq!(
            container_resource_value(&sel("requests.memory", None), &c).unwrap(),
            "0"
        );
        assert_eq!(
            container_resource_value(&sel("limits.gpu", None), &c).unwrap_err(),
            "unsupported container resource : limits.gpu"
        );
    }

    #[test]
    fn unset_limits_report_node_allocatable() {
        let alloc: BTreeMap<String, Quantity> = [
            ("cpu".to_string(), q("3")),
            ("memory".to_string(), q("2Gi")),
        ]
        .into();
        let c = with_allocatable_limits(&container(&[("memory", "1Gi")], &[]), &alloc);
        assert_eq!(
            container_resource_value(&sel("limits.cpu", None), &c).unwrap(),
            "3"
        );
        assert_eq!(
            container_resource_value(&sel("limits.memory", Some("1Mi")), &c).unwrap(),
            "1024"
        );
    }
}
