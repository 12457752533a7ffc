//! HorizontalPodAutoscalers (autoscaling/v2): upstream's defaults (one minimum replica, 80%
//! CPU utilization when no metric is given, scaling rules filled in only when `behavior` is
//! set) and `ValidateHorizontalPodAutoscaler` (replica bounds, target reference, metrics,
//! behavior).

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::quantity::Quantity;
use apimachinery::validation::is_path_segment_name;
use serde_json::{Value, json};

use super::util::{arr_at, at, child, default_value, i64_at, str_at};
use crate::strategy::Strategy;

/// Upstream `DefaultCPUUtilization`.
const DEFAULT_CPU_UTILIZATION: i64 = 80;
const METRIC_TYPES: [&str; 5] = [
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];

/// HorizontalPodAutoscalers.
pub struct HorizontalPodAutoscalerStrategy;

/// Upstream `GenerateHPAScaleUpRules` / `GenerateHPAScaleDownRules`: defaults for the rules
/// a user left unset.
fn scaling_rules(rules: &mut Value, up: bool) {
    if !rules.is_object() {
        return;
    }
    if up {
        default_value(rules, "stabilizationWindowSeconds", json!(0));
    }
    default_value(rules, "selectPolicy", json!("Max"));
    let policies = if up {
        json!([
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15},
        ])
    } else {
        json!([{"type": "Percent", "value": 100, "periodSeconds": 15}])
    };
    default_value(rules, "policies", policies);
}

impl Strategy for HorizontalPodAutoscalerStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = child(obj, "spec") else {
            return;
        };
        default_value(spec, "minReplicas", json!(1));
        if arr_at(spec, "/metrics").is_empty() {
            spec["metrics"] = json!([{
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}},
            }]);
        }
        if let Some(b) = spec.get_mut("behavior").filter(|b| b.is_object()) {
            for (key, up) in [("scaleUp", true), ("scaleDown", false)] {
                if let Some(r) = child(b, key) {
                    scaling_rules(r, up);
                }
            }
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"desiredReplicas": 0});
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let p = Path::new("spec");
        let null = Value::Null;
        let spec = obj.get("spec").unwrap_or(&null);
        let min = i64_at(spec, "/minReplicas");
        if let Some(m) = min
            && m < 1
        {
            errs.push(FieldError::invalid(
                p.child("minReplicas"),
                json!(m),
                "must be greater than or equal to 1",
            ));
        }
        let max = i64_at(spec, "/maxReplicas").unwrap_or(0);
        if max < 1 {
            errs.push(FieldError::invalid(
                p.child("maxReplicas"),
                json!(max),
                "must be greater than 0",
            ));
        }
        if let Some(m) = min
            && max < m
        {
            errs.push(FieldError::invalid(
                p.child("maxReplicas"),
                json!(max),
                "must be greater than or equal to `minReplicas`",
            ));
        }
        let rp = p.child("scaleTargetRef");
        for f in ["kind", "name"] {
            let v = str_at(spec, &format!("/scaleTargetRef/{f}"));
            if v.is_empty() {
                errs.push(FieldError::required(rp.child(f), ""));
            } else {
                for m in is_path_segment_name(v) {
                    errs.push(FieldError::invalid(rp.child(f), json!(v), m));
                }
            }
        }
        for (i, m) in arr_at(spec, "/metrics").iter().enumerate() {
            metric(&mut errs, m, &p.child("metrics").index(i));
        }
        if let Some(b) = at(spec, "/behavior") {
            for key in ["scaleUp", "scaleDown"] {
                if let Some(r) = at(b, &format!("/{key}")) {
                    rules(&mut errs, r, &p.child("behavior").child(key));
                }
            }
        }
        errs
    }
}

/// Upstream `validateMetricSpec`.
fn metric(errs: &mut ErrorList, m: &Value, p: &Path) {
    let ty = str_at(m, "/type");
    if ty.is_empty() {
        errs.push(FieldError::required(
            p.child("type"),
            "must specify a metric source type",
        ));
    }
    if !METRIC_TYPES.contains(&ty) {
        errs.push(FieldError::not_supported(
            p.child("type"),
            json!(ty),
            &METRIC_TYPES,
        ));
    }
    let fields = [
        ("Object", "object"),
        ("Pods", "pods"),
        ("Resource", "resource"),
        ("External", "external"),
        ("ContainerResource", "containerResource"),
    ];
    let present: Vec<(&str, &str)> = fields
        .into_iter()
        .filter(|(_, f)| at(m, &format!("/{f}")).is_some())
        .collect();
    if let Some((kind, f)) = present.first()
        && let Some(src) = at(m, &format!("/{f}"))
    {
        source(errs, kind, src, &p.child(f));
    }
    match fields.iter().find(|(t, _)| *t == ty) {
        Some((_, f)) => {
            if at(m, &format!("/{f}")).is_none() {
                errs.push(FieldError::required(
                    p.child(f),
                    "must populate information for the given metric source",
                ));
            }
        }
        None => errs.push(FieldError::not_supported(
            p.child("type"),
            json!(ty),
            &METRIC_TYPES,
        )),
    }
    if present.len() != 1 {
        for (t, _) in present.iter().filter(|(t, _)| *t != ty) {
            errs.push(FieldError::forbidden(
                p.child(&t.to_lowercase()),
                "must populate the given metric source only",
            ));
        }
    }
}

/// The source of one metric: resource name or metric identifier, and the target.
fn source(errs: &mut ErrorList, kind: &str, src: &Value, p: &Path) {
    let tp = p.child("target");
    let null = Value::Null;
    let target = src.get("target").unwrap_or(&null);
    match kind {
        "Resource" | "ContainerResource" => {
            if str_at(src, "/name").is_empty() {
                errs.push(FieldError::required(
                    p.child("name"),
                    "must specify a resource name",
                ));
            }
            if kind == "ContainerResource" && str_at(src, "/container").is_empty() {
                errs.push(FieldError::required(
                    p.child("container"),
                    "must specify a container",
                ));
            }
            metric_target(errs, target, &tp);
            let (util, avg) = (
                at(target, "/averageUtilization"),
                at(target, "/averageValue"),
            );
            if util.is_none() && avg.is_none() {
                errs.push(FieldError::required(
                    tp.child("averageUtilization"),
                    "must set either a target raw value or a target utilization",
                ));
            }
            if util.is_some() && avg.is_some() {
                errs.push(FieldError::forbidden(
                    tp.child("averageValue"),
                    "may not set both a target raw value and a target utilization",
                ));
            }
        }
        _ => {
            let name = str_at(src, "/metric/name");
            let np = p.child("metric").child("name");
            if name.is_empty() {
                errs.push(FieldError::required(np, "must specify a metric name"));
            } else {
                for m in is_path_segment_name(name) {
                    errs.push(FieldError::invalid(&np, json!(name), m));
                }
            }
            metric_target(errs, target, &tp);
        }
    }
}

/// Upstream `validateMetricTarget`.
fn metric_target(errs: &mut ErrorList, t: &Value, p: &Path) {
    let ty = str_at(t, "/type");
    if ty.is_empty() {
        errs.push(FieldError::required(
            p.child("type"),
            "must specify a metric target type",
        ));
    }
    if !["Utilization", "Value", "AverageValue"].contains(&ty) {
        errs.push(FieldError::invalid(
            p.child("type"),
            json!(ty),
            "must be either Utilization, Value, or AverageValue",
        ));
    }
    for f in ["value", "averageValue"] {
        if let Some(raw) = at(t, &format!("/{f}"))
            && Quantity::from_json(raw).map_or(true, |q| q.sign() != 1)
        {
            errs.push(FieldError::invalid(
                p.child(f),
                raw.clone(),
                "must be positive",
            ));
        }
    }
    if let Some(u) = i64_at(t, "/averageUtilization")
        && u < 1
    {
        errs.push(FieldError::invalid(
            p.child("averageUtilization"),
            json!(u),
            "must be greater than 0",
        ));
    }
}

/// Upstream `validateScalingRules`.
fn rules(errs: &mut ErrorList, r: &Value, p: &Path) {
    if let Some(s) = i64_at(r, "/stabilizationWindowSeconds")
        && !(0..=3600).contains(&s)
    {
        let msg = if s < 0 {
            "must be greater than or equal to zero"
        } else {
            "must be less than or equal to 3600"
        };
        errs.push(FieldError::invalid(
            p.child("stabilizationWindowSeconds"),
            json!(s),
            msg,
        ));
    }
    if let Some(sp) = r.get("selectPolicy").and_then(Value::as_str)
        && !["Disabled", "Max", "Min"].contains(&sp)
    {
        errs.push(FieldError::not_supported(
            p.child("selectPolicy"),
            json!(sp),
            &["Disabled", "Max", "Min"],
        ));
    }
    let policies = arr_at(r, "/policies");
    if policies.is_empty() && at(r, "/policies").is_some() {
        errs.push(FieldError::required(
            p.child("policies"),
            "must specify at least one Policy",
        ));
    }
    for (i, pol) in policies.iter().enumerate() {
        let pp = p.child("policies").index(i);
        let ty = str_at(pol, "/type");
        if !["Pods", "Percent"].contains(&ty) {
            errs.push(FieldError::invalid(
                pp.child("type"),
                json!(ty),
                "must be either Pods or Percent",
            ));
        }
        let v = i64_at(pol, "/value").unwrap_or(0);
        if v <= 0 {
            errs.push(FieldError::invalid(
                pp.child("value"),
                json!(v),
                "must be greater than zero",
            ));
        }
        let period = i64_at(pol, "/periodSeconds").unwrap_or(0);
        if period <= 0 {
            errs.push(FieldError::invalid(
                pp.child("periodSeconds"),
                json!(period),
                "must be greater than zero",
            ));
        } else if period > 1800 {
            errs.push(FieldError::invalid(
                pp.child("periodSeconds"),
                json!(period),
                "must be less than or equal to 1800",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hpa() -> Value {
        json!({"metadata": {"name": "web"}, "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 5}})
    }

    #[test]
    fn autoscalers_default_to_one_replica_and_cpu_utilization() {
        let mut h = hpa();
        HorizontalPodAutoscalerStrategy.default(&mut h);
        assert_eq!(h["spec"]["minReplicas"], json!(1));
        assert_eq!(
            h["spec"]["metrics"],
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}])
        );
        assert!(h["spec"].get("behavior").is_none());
        assert!(HorizontalPodAutoscalerStrategy.validate(&h).is_empty());
    }

    #[test]
    fn given_behavior_is_completed_with_upstream_rules() {
        let mut h = hpa();
        h["spec"]["behavior"] = json!({"scaleDown": {"stabilizationWindowSeconds": 60}});
        HorizontalPodAutoscalerStrategy.default(&mut h);
        assert_eq!(
            h["spec"]["behavior"],
            json!({
                "scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]},
                "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
                    {"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]},
            })
        );
    }

    #[test]
    fn replica_bounds_are_checked() {
        let mut h = hpa();
        h["spec"]["minReplicas"] = json!(3);
        h["spec"]["maxReplicas"] = json!(2);
        HorizontalPodAutoscalerStrategy.default(&mut h);
        let msgs: Vec<String> = HorizontalPodAutoscalerStrategy
            .validate(&h)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            msgs,
            vec![
                "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"
            ]
        );
    }
}
