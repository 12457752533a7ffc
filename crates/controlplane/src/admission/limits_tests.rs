//! Unit tests of LimitRanger.

use serde_json::json;

use super::*;

fn range(limits: Value) -> Vec<Value> {
    vec![json!({"metadata": {"name": "lr"}, "spec": {"limits": limits}})]
}

#[test]
fn defaults_fill_missing_requests_and_limits_and_annotate_the_pod() {
    let ranges = range(
        json!([{"type": "Container", "default": {"cpu": "500m"}, "defaultRequest": {"cpu": "100m", "memory": "64Mi"}}]),
    );
    let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
    apply_defaults(&ranges, &mut pod);
    assert_eq!(
        pod["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "500m"}})
    );
    assert_eq!(
        pod["metadata"]["annotations"][ANNOTATION],
        "LimitRanger plugin set: cpu, memory request for container c; cpu limit for container c"
    );
}

#[test]
fn a_max_only_range_defaults_limits_and_requests_to_the_max() {
    let ranges = range(json!([{"type": "Container", "max": {"cpu": "1"}}]));
    let mut pod = json!({"spec": {"containers": [{"name": "c", "resources": {}}]}});
    apply_defaults(&ranges, &mut pod);
    assert_eq!(
        pod["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "1"}, "limits": {"cpu": "1"}})
    );
}

#[test]
fn a_container_limit_above_the_max_is_refused() {
    let ranges = range(json!([{"type": "Container", "max": {"cpu": "1"}}]));
    let pod = json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2"}, "requests": {"cpu": "1"}}}]}});
    assert_eq!(
        check(&ranges, "pods", &pod),
        Err("maximum cpu usage per Container is 1, but limit is 2".into())
    );
}

#[test]
fn several_violations_are_listed_in_brackets() {
    let ranges = range(
        json!([{"type": "Container", "min": {"memory": "1Gi"}, "maxLimitRequestRatio": {"cpu": "2"}}]),
    );
    let pod = json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "4"}, "requests": {"cpu": "1", "memory": "1Mi"}}}]}});
    assert_eq!(
        check(&ranges, "pods", &pod),
        Err("[minimum memory usage per Container is 1Gi, but request is 1Mi, cpu max limit to request ratio per Container is 2, but provided ratio is 4.000000]".into())
    );
}

#[test]
fn pod_bounds_apply_to_the_sum_of_containers() {
    let ranges = range(json!([{"type": "Pod", "max": {"memory": "1Gi"}}]));
    let c = json!({"name": "c", "resources": {"limits": {"memory": "600Mi"}, "requests": {"memory": "600Mi"}}});
    let pod = json!({"spec": {"containers": [c.clone(), c]}});
    assert_eq!(
        check(&ranges, "pods", &pod),
        Err("maximum memory usage per Pod is 1Gi, but limit is 1200Mi".into())
    );
}

#[test]
fn claims_are_held_to_storage_min_and_max() {
    let ranges = range(
        json!([{"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "5Gi"}}]),
    );
    let big = json!({"spec": {"resources": {"requests": {"storage": "10Gi"}}}});
    assert_eq!(
        check(&ranges, "persistentvolumeclaims", &big),
        Err("maximum storage usage per PersistentVolumeClaim is 5Gi, but request is 10Gi".into())
    );
    let ok = json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}});
    assert_eq!(check(&ranges, "persistentvolumeclaims", &ok), Ok(()));
}
