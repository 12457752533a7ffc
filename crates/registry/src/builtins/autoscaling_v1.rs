//! HorizontalPodAutoscalers served as `autoscaling/v1`, stored as `autoscaling/v2` (upstream's
//! storage version), converted both ways as upstream's `autoscaling/v1` conversion does: the
//! CPU utilization metric is `targetCPUUtilizationPercentage`; the other metrics, the current
//! metrics, the conditions and `behavior` travel in `autoscaling.alpha.kubernetes.io/*`
//! annotations, so a v2 object survives a round trip through v1.
//!
//! Defaulting and validation are v2's, applied to the object converted to v2 (upstream
//! validates the internal form, so its error paths are v2's too).

use apimachinery::field::ErrorList;
use apimachinery::status::ApiError;
use serde_json::{Map, Value, json};

use super::autoscaling::HorizontalPodAutoscalerStrategy;
use crate::resource::Converter;
use crate::strategy::Strategy;

pub const V1: &str = "autoscaling/v1";
pub const V2: &str = "autoscaling/v2";
const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
/// The status fields both versions have.
const SHARED_STATUS: [&str; 4] = [
    "observedGeneration",
    "lastScaleTime",
    "currentReplicas",
    "desiredReplicas",
];

/// Whether a metric is the CPU utilization metric v1 spells `targetCPUUtilizationPercentage`.
fn is_cpu_utilization(m: &Value) -> bool {
    m["type"] == "Resource"
        && m["resource"]["name"] == "cpu"
        && m["resource"]["target"]["averageUtilization"].is_i64()
}

fn annotations(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let meta = obj
        .as_object_mut()?
        .entry("metadata")
        .or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    let ann = meta
        .as_object_mut()?
        .entry("annotations")
        .or_insert_with(|| json!({}));
    if !ann.is_object() {
        *ann = json!({});
    }
    ann.as_object_mut()
}

fn drop_empty_annotations(obj: &mut Value) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut)
        && meta
            .get("annotations")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
    {
        meta.remove("annotations");
    }
}

/// An `autoscaling/v2` HorizontalPodAutoscaler as `autoscaling/v1` has it.
pub fn to_v1(mut obj: Value) -> Value {
    if !obj.is_object() {
        return obj;
    }
    let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = obj.get("status").cloned();
    let metrics = spec["metrics"].as_array().cloned().unwrap_or_default();
    let mut v1_spec = Map::new();
    for key in ["scaleTargetRef", "minReplicas", "maxReplicas"] {
        if let Some(v) = spec.get(key) {
            v1_spec.insert(key.into(), v.clone());
        }
    }
    if let Some(cpu) = metrics.iter().find(|m| is_cpu_utilization(m)) {
        v1_spec.insert(
            "targetCPUUtilizationPercentage".into(),
            cpu["resource"]["target"]["averageUtilization"].clone(),
        );
    }
    let others: Vec<&Value> = metrics.iter().filter(|m| !is_cpu_utilization(m)).collect();
    let mut keep: Vec<(&str, String)> = Vec::new();
    if !others.is_empty() {
        keep.push((METRICS, json!(others).to_string()));
    }
    if let Some(b) = spec.get("behavior").filter(|b| !b.is_null()) {
        keep.push((BEHAVIOR, b.to_string()));
    }
    let mut v1_status = None;
    if let Some(st) = &status {
        let current = st["currentMetrics"].as_array().cloned().unwrap_or_default();
        let conditions = st["conditions"].as_array().cloned().unwrap_or_default();
        if !current.is_empty() {
            keep.push((CURRENT_METRICS, json!(current).to_string()));
        }
        if !conditions.is_empty() {
            keep.push((CONDITIONS, json!(conditions).to_string()));
        }
        let mut s = Map::new();
        for key in SHARED_STATUS {
            if let Some(v) = st.get(key) {
                s.insert(key.into(), v.clone());
            }
        }
        if let Some(u) = current
            .iter()
            .find(|m| m["type"] == "Resource" && m["resource"]["name"] == "cpu")
            .map(|m| &m["resource"]["current"]["averageUtilization"])
            .filter(|u| u.is_i64())
        {
            s.insert("currentCPUUtilizationPercentage".into(), u.clone());
        }
        v1_status = Some(Value::Object(s));
    }
    if let Some(ann) = annotations(&mut obj) {
        for (k, v) in keep {
            ann.insert(k.into(), json!(v));
        }
    }
    drop_empty_annotations(&mut obj);
    obj["apiVersion"] = json!(V1);
    obj["spec"] = Value::Object(v1_spec);
    match v1_status {
        Some(s) => obj["status"] = s,
        None => {
            if let Some(o) = obj.as_object_mut() {
                o.remove("status");
            }
        }
    }
    obj
}

/// The JSON list an annotation holds, taken out of the annotations.
fn take_json(obj: &mut Value, key: &str) -> Option<Value> {
    let raw = annotations(obj)?.remove(key)?;
    serde_json::from_str(raw.as_str()?).ok()
}

/// An `autoscaling/v1` HorizontalPodAutoscaler as `autoscaling/v2` has it.
pub fn to_v2(mut obj: Value) -> Value {
    if !obj.is_object() {
        return obj;
    }
    let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = obj.get("status").cloned();
    let mut metrics: Vec<Value> = take_json(&mut obj, METRICS)
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default();
    if let Some(t) = spec
        .get("targetCPUUtilizationPercentage")
        .filter(|t| !t.is_null())
    {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": t}}}));
    }
    let behavior = take_json(&mut obj, BEHAVIOR);
    let current = take_json(&mut obj, CURRENT_METRICS);
    let conditions = take_json(&mut obj, CONDITIONS);
    let mut v2_spec = Map::new();
    for key in ["scaleTargetRef", "minReplicas", "maxReplicas"] {
        if let Some(v) = spec.get(key) {
            v2_spec.insert(key.into(), v.clone());
        }
    }
    if !metrics.is_empty() {
        v2_spec.insert("metrics".into(), Value::Array(metrics));
    }
    if let Some(b) = behavior {
        v2_spec.insert("behavior".into(), b);
    }
    let v2_status = status.map(|st| {
        let mut s = Map::new();
        for key in SHARED_STATUS {
            if let Some(v) = st.get(key) {
                s.insert(key.into(), v.clone());
            }
        }
        let current = current.or_else(|| {
            st.get("currentCPUUtilizationPercentage")
                .filter(|u| !u.is_null())
                .map(|u| {
                    json!([{"type": "Resource", "resource": {"name": "cpu",
                        "current": {"averageUtilization": u}}}])
                })
        });
        if let Some(c) = current {
            s.insert("currentMetrics".into(), c);
        }
        if let Some(c) = conditions {
            s.insert("conditions".into(), c);
        }
        Value::Object(s)
    });
    drop_empty_annotations(&mut obj);
    obj["apiVersion"] = json!(V2);
    obj["spec"] = Value::Object(v2_spec);
    if let Some(s) = v2_status {
        obj["status"] = s;
    }
    obj
}

/// The converter of the `autoscaling/v1` resource (objects are stored as v2).
pub struct HpaV1Converter;

#[async_trait::async_trait]
impl Converter for HpaV1Converter {
    fn storage_api_version(&self) -> &str {
        V2
    }

    async fn convert(
        &self,
        objects: Vec<Value>,
        api_version: &str,
    ) -> Result<Vec<Value>, ApiError> {
        let f = match api_version {
            V1 => to_v1,
            V2 => to_v2,
            other => {
                return Err(ApiError::bad_request(format!(
                    "horizontalpodautoscalers are served as {V1} and {V2}, not {other}"
                )));
            }
        };
        Ok(objects
            .into_iter()
            .map(|o| {
                if apimachinery::meta::api_version(&o) == api_version {
                    o
                } else {
                    f(o)
                }
            })
            .collect())
    }
}

/// The `autoscaling/v1` strategy: v2's defaults and validation on the object seen as v2.
pub struct HorizontalPodAutoscalerV1Strategy;

impl Strategy for HorizontalPodAutoscalerV1Strategy {
    fn default(&self, obj: &mut Value) {
        let mut v2 = to_v2(obj.clone());
        HorizontalPodAutoscalerStrategy.default(&mut v2);
        *obj = to_v1(v2);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"desiredReplicas": 0});
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        HorizontalPodAutoscalerStrategy.validate(&to_v2(obj.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2() -> Value {
        json!({"apiVersion": V2, "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "d", "annotations": {"team": "blue"}},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 2, "maxReplicas": 10,
                "metrics": [
                    {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}},
                ],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}},
            "status": {"currentReplicas": 3, "desiredReplicas": 4,
                "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 55}}}],
                "conditions": [{"type": "AbleToScale", "status": "True"}]}})
    }

    #[test]
    fn v1_has_the_cpu_target_and_keeps_the_rest_in_annotations() {
        let v1 = to_v1(v2());
        assert_eq!(v1["apiVersion"], V1);
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 70);
        assert_eq!(v1["spec"]["minReplicas"], 2);
        assert!(v1["spec"].get("metrics").is_none());
        assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 55);
        assert_eq!(v1["status"]["desiredReplicas"], 4);
        let ann = &v1["metadata"]["annotations"];
        assert_eq!(ann["team"], "blue");
        let others: Value = serde_json::from_str(ann[METRICS].as_str().unwrap()).unwrap();
        assert_eq!(others[0]["type"], "Pods");
        assert!(ann[BEHAVIOR].is_string() && ann[CONDITIONS].is_string());
    }

    #[test]
    fn a_v2_object_survives_a_round_trip_through_v1() {
        let back = to_v2(to_v1(v2()));
        let want = v2();
        assert_eq!(back["metadata"], want["metadata"]);
        assert_eq!(back["spec"]["behavior"], want["spec"]["behavior"]);
        assert_eq!(back["status"], want["status"]);
        // The CPU metric comes back after the others, as upstream orders them.
        let metrics = back["spec"]["metrics"].as_array().unwrap();
        assert_eq!(metrics.len(), 2);
        assert_eq!(metrics[0]["type"], "Pods");
        assert!(is_cpu_utilization(&metrics[1]));
    }

    #[test]
    fn a_v1_object_without_a_target_defaults_to_80_percent_cpu() {
        let mut v1 = json!({"apiVersion": V1, "kind": "HorizontalPodAutoscaler", "metadata": {"name": "a"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "a"}, "maxReplicas": 3}});
        HorizontalPodAutoscalerV1Strategy.default(&mut v1);
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 80);
        assert_eq!(v1["spec"]["minReplicas"], 1);
        assert!(v1["metadata"].get("annotations").is_none());
        let bad = json!({"apiVersion": V1, "kind": "HorizontalPodAutoscaler", "metadata": {"name": "a"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "a"}, "minReplicas": 0, "maxReplicas": 3}});
        let errs = HorizontalPodAutoscalerV1Strategy.validate(&bad);
        assert_eq!(errs.iter().next().unwrap().field, "spec.minReplicas");
    }
}
