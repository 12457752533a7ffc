//! Compute resources of containers: canonical quantities (upstream `SetDefaults_ResourceList`
//! rounds every quantity up to milli precision and the server prints it canonically), the
//! checks of `validateResourceRequirements` (names, non-negative values, requests within
//! limits) and the pod's QoS class (`ComputePodQOS`).

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::quantity::Quantity;
use apimachinery::validation::is_qualified_name;
use serde_json::{Value, json};

use crate::builtins::util::{NEGATIVE, arr_at, obj_at};

/// Resource names valid without a domain prefix (upstream `standardResources`).
const STANDARD_RESOURCES: [&str; 20] = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
];

/// Resources counted in whole units (upstream `integerResources`).
const INTEGER_RESOURCES: [&str; 9] = [
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
];

/// Rewrites each quantity of a resource list in upstream's canonical form, rounded up to
/// milli precision. Unparsable values are left for validation to report.
pub(crate) fn canonical_list(list: &mut Value) {
    let Some(map) = list.as_object_mut() else {
        return;
    };
    for v in map.values_mut() {
        if let Ok(q) = Quantity::from_json(v) {
            let (rounded, _) = q.round_up(-3);
            *v = json!(rounded.to_string());
        }
    }
}

fn is_hugepages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// Upstream `IsNativeResource`: unprefixed or in the `kubernetes.io` domain.
fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// Upstream `IsExtendedResourceName`.
fn is_extended(name: &str) -> bool {
    !is_native(name)
        && !name.starts_with("requests.")
        && is_qualified_name(&format!("requests.{name}")).is_empty()
}

/// Upstream `IsOvercommitAllowed`.
fn overcommit_allowed(name: &str) -> bool {
    is_native(name) && !is_hugepages(name)
}

fn is_integer_resource(name: &str) -> bool {
    INTEGER_RESOURCES.contains(&name) || is_extended(name)
}

/// Upstream `validateContainerResourceName`.
fn validate_container_resource_name(errs: &mut ErrorList, path: &Path, name: &str) {
    let mut own = ErrorList::new();
    for msg in is_qualified_name(name) {
        own.push(FieldError::invalid(path, json!(name), msg));
    }
    if own.is_empty()
        && !name.contains('/')
        && !STANDARD_RESOURCES.contains(&name)
        && !is_hugepages(name)
        && !name.starts_with("requests.hugepages-")
    {
        own.push(FieldError::invalid(
            path,
            json!(name),
            "must be a standard resource type or fully qualified",
        ));
    }
    if !name.contains('/') {
        if !matches!(name, "cpu" | "memory" | "ephemeral-storage") && !is_hugepages(name) {
            own.push(FieldError::invalid(
                path,
                json!(name),
                "must be a standard resource for containers",
            ));
        }
    } else if !is_native(name) && !is_extended(name) {
        own.push(FieldError::invalid(
            path,
            json!(name),
            "doesn't follow extended resource name standard",
        ));
    }
    errs.extend(own);
}

/// Upstream `ValidateResourceQuantityValue`; the parsed quantity when it is one.
pub(crate) fn validate_quantity(
    errs: &mut ErrorList,
    path: &Path,
    name: &str,
    raw: &Value,
) -> Option<Quantity> {
    let q = match Quantity::from_json(raw) {
        Ok(q) => q,
        Err(e) => {
            errs.push(FieldError::invalid(path, raw.clone(), e.to_string()));
            return None;
        }
    };
    if q.sign() < 0 {
        errs.push(FieldError::invalid(path, json!(q.to_string()), NEGATIVE));
    }
    if is_integer_resource(name) && q.milli_value_i128() % 1000 != 0 {
        errs.push(FieldError::invalid(
            path,
            json!(q.to_string()),
            "must be an integer",
        ));
    }
    Some(q)
}

fn sorted(map: &serde_json::Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut items: Vec<_> = map.iter().collect();
    items.sort_by(|a, b| a.0.cmp(b.0));
    items
}

/// Checks a hugepages quantity is a whole number of pages.
fn hugepages_value(errs: &mut ErrorList, path: &Path, name: &str, q: &Quantity) {
    let Ok(page) = Quantity::parse(name.trim_start_matches("hugepages-")) else {
        return;
    };
    let page = page.value();
    if page > 0 && q.value() % page != 0 {
        errs.push(FieldError::invalid(
            path,
            json!(q.to_string()),
            format!("{q} is not positive integer multiple of {name}"),
        ));
    }
}

/// Upstream `ValidateContainerResourceRequirements` for `resources` at `path`.
pub(crate) fn validate_requirements(errs: &mut ErrorList, res: &Value, path: &Path) {
    let lim_path = path.child("limits");
    let req_path = path.child("requests");
    let limits = obj_at(res, "/limits").cloned().unwrap_or_default();
    let requests = obj_at(res, "/requests").cloned().unwrap_or_default();
    let mut parsed_limits = std::collections::BTreeMap::new();
    let (mut lim_qos, mut req_qos, mut lim_huge, mut req_huge) = (false, false, false, false);
    for (name, raw) in sorted(&limits) {
        let p = lim_path.key(name);
        validate_container_resource_name(errs, &p, name);
        if let Some(q) = validate_quantity(errs, &p, name, raw) {
            if is_hugepages(name) {
                lim_huge = true;
                hugepages_value(errs, &p, name, &q);
            }
            parsed_limits.insert(name.clone(), q);
        }
        lim_qos |= matches!(name.as_str(), "cpu" | "memory");
    }
    for (name, raw) in sorted(&requests) {
        let p = req_path.key(name);
        validate_container_resource_name(errs, &p, name);
        let Some(q) = validate_quantity(errs, &p, name, raw) else {
            continue;
        };
        match parsed_limits.get(name.as_str()) {
            Some(lim) if q != *lim && !overcommit_allowed(name) => {
                errs.push(FieldError::invalid(
                    &req_path,
                    json!(q.to_string()),
                    format!("must be equal to {name} limit of {lim}"),
                ));
            }
            Some(lim) if q > *lim => errs.push(FieldError::invalid(
                &req_path,
                json!(q.to_string()),
                format!("must be less than or equal to {name} limit of {lim}"),
            )),
            Some(_) => {}
            None if !overcommit_allowed(name) && !limits.contains_key(name.as_str()) => {
                errs.push(FieldError::required(
                    &lim_path,
                    "Limit must be set for non overcommitable resources",
                ));
            }
            None => {}
        }
        if is_hugepages(name) {
            req_huge = true;
            hugepages_value(errs, &p, name, &q);
        }
        req_qos |= matches!(name.as_str(), "cpu" | "memory");
    }
    if !lim_qos && !req_qos && (lim_huge || req_huge) {
        errs.push(FieldError::forbidden(
            path,
            "HugePages require cpu or memory",
        ));
    }
}

/// Upstream `ComputePodQOS`: Guaranteed when every container limits cpu and memory and
/// requests equal limits, BestEffort when nothing is requested or limited, else Burstable.
pub(crate) fn qos_class(spec: &Value) -> &'static str {
    let mut requests: std::collections::BTreeMap<String, Quantity> = Default::default();
    let mut limits: std::collections::BTreeMap<String, Quantity> = Default::default();
    let mut guaranteed = true;
    let containers = arr_at(spec, "/containers")
        .iter()
        .chain(arr_at(spec, "/initContainers"));
    let add = |acc: &mut std::collections::BTreeMap<String, Quantity>, name: &str, q: Quantity| {
        let sum = match acc.get(name) {
            Some(prev) => prev.add(&q),
            None => q,
        };
        acc.insert(name.to_string(), sum);
    };
    for c in containers {
        for (name, raw) in obj_at(c, "/resources/requests").into_iter().flatten() {
            if let (true, Ok(q)) = (
                matches!(name.as_str(), "cpu" | "memory"),
                Quantity::from_json(raw),
            ) && q.sign() > 0
            {
                add(&mut requests, name, q);
            }
        }
        let mut found = (false, false);
        for (name, raw) in obj_at(c, "/resources/limits").into_iter().flatten() {
            if let (true, Ok(q)) = (
                matches!(name.as_str(), "cpu" | "memory"),
                Quantity::from_json(raw),
            ) && q.sign() > 0
            {
                if name == "cpu" {
                    found.0 = true;
                } else {
                    found.1 = true;
                }
                add(&mut limits, name, q);
            }
        }
        if !(found.0 && found.1) {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed
        && requests.len() == limits.len()
        && requests.iter().all(|(k, r)| limits.get(k) == Some(r))
    {
        return "Guaranteed";
    }
    "Burstable"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(res: Value) -> Vec<String> {
        let mut errs = ErrorList::new();
        validate_requirements(&mut errs, &res, &Path::new("spec.containers[0].resources"));
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn quantities_become_canonical_and_milli_rounded() {
        let mut l = json!({"cpu": "0.5", "memory": "1024Mi", "x": "0.0001", "bad": "lots"});
        canonical_list(&mut l);
        assert_eq!(
            l,
            json!({"cpu": "500m", "memory": "1Gi", "x": "1m", "bad": "lots"})
        );
    }

    #[test]
    fn requests_above_limits_are_refused_with_upstream_wording() {
        assert_eq!(
            errors(json!({"limits": {"cpu": "500m"}, "requests": {"cpu": "1"}})),
            vec![
                "spec.containers[0].resources.requests: Invalid value: \"1\": must be less than or equal to cpu limit of 500m"
            ]
        );
    }

    #[test]
    fn negative_and_unknown_resources_are_reported() {
        assert_eq!(
            errors(json!({"requests": {"memory": "-1", "gpu": "1"}})),
            vec![
                "spec.containers[0].resources.requests[gpu]: Invalid value: \"gpu\": must be a standard resource type or fully qualified",
                "spec.containers[0].resources.requests[gpu]: Invalid value: \"gpu\": must be a standard resource for containers",
                "spec.containers[0].resources.requests[memory]: Invalid value: \"-1\": must be greater than or equal to 0",
            ]
        );
    }

    #[test]
    fn extended_resources_need_equal_integer_limits() {
        assert_eq!(
            errors(json!({"requests": {"example.com/gpu": "1"}})),
            vec![
                "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"
            ]
        );
        assert_eq!(
            errors(
                json!({"limits": {"example.com/gpu": "500m"}, "requests": {"example.com/gpu": "500m"}})
            ),
            vec![
                "spec.containers[0].resources.limits[example.com/gpu]: Invalid value: \"500m\": must be an integer",
                "spec.containers[0].resources.requests[example.com/gpu]: Invalid value: \"500m\": must be an integer",
            ]
        );
    }

    #[test]
    fn qos_classes_follow_requests_and_limits() {
        let spec = |res: Value| json!({"containers": [{"name": "c", "resources": res}]});
        assert_eq!(qos_class(&spec(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&spec(json!({"requests": {"cpu": "100m"}}))),
            "Burstable"
        );
        assert_eq!(
            qos_class(&spec(
                json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}})
            )),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&spec(
                json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}})
            )),
            "Burstable"
        );
    }
}
