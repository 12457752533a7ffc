//! Scaling printers: HorizontalPodAutoscaler (TARGETS like `cpu: 45%/80%`), Scale and
//! PodDisruptionBudget.
//!
//! TARGETS pairs each spec metric with the status metric at the same index, as upstream does:
//! `<current>/<target>`, `<unknown>` before the first measurement, `(avg)` for average-value
//! targets of object and external metrics, at most two entries then `+ N more...`.

use serde_json::{Value, json};

use super::Printer;
use crate::column::{AGE, Def, NAME, NAME_DESC, Row, cells, i, s};
use crate::meta;
use crate::time::Instant;
use crate::value::{at, int_or_zero, list, opt_int, opt_int_or_string, opt_quantity, str_or_empty};

pub(crate) const HORIZONTAL_POD_AUTOSCALER: Printer = Printer {
    columns: &[
        NAME,
        s("Reference", "The workload being scaled, as Kind/name."),
        s(
            "Targets",
            "Current and target values of the scaling metrics.",
        ),
        s("MinPods", "Lower limit of the replica count."),
        s("MaxPods", "Upper limit of the replica count."),
        s("Replicas", "Current replica count."),
        AGE,
    ],
    row: hpa,
};

/// A quantity the way `(*Quantity).String()` prints it, `<nil>` when unset.
fn quantity(v: &Value, path: &[&str]) -> String {
    opt_quantity(v, path).unwrap_or_else(|| "<nil>".to_string())
}

fn percent(v: &Value, path: &[&str]) -> Option<String> {
    opt_int(v, path).map(|p| format!("{p}%"))
}

/// One spec metric paired with the status metric at its index.
fn format_metric(spec: &Value, status: Option<&Value>) -> String {
    let status_of = |key: &str| status.and_then(|s| at(s, &[key])).filter(|v| v.is_object());
    let unknown = || "<unknown>".to_string();
    match str_or_empty(spec, &["type"]) {
        key @ ("External" | "Object") => {
            let field = if key == "External" {
                "external"
            } else {
                "object"
            };
            let target = at(spec, &[field, "target"]).cloned().unwrap_or(Value::Null);
            if at(&target, &["averageValue"]).is_some_and(|v| !v.is_null()) {
                let current = status_of(field)
                    .and_then(|s| opt_quantity(s, &["current", "averageValue"]))
                    .unwrap_or_else(unknown);
                format!("{current}/{} (avg)", quantity(&target, &["averageValue"]))
            } else {
                let current = status_of(field)
                    .map(|s| quantity(s, &["current", "value"]))
                    .unwrap_or_else(unknown);
                format!("{current}/{}", quantity(&target, &["value"]))
            }
        }
        "Pods" => {
            let current = status_of("pods")
                .map(|s| quantity(s, &["current", "averageValue"]))
                .unwrap_or_else(unknown);
            format!(
                "{current}/{}",
                quantity(spec, &["pods", "target", "averageValue"])
            )
        }
        key @ ("Resource" | "ContainerResource") => {
            let field = if key == "Resource" {
                "resource"
            } else {
                "containerResource"
            };
            let name = str_or_empty(spec, &[field, "name"]);
            let target = at(spec, &[field, "target"]).cloned().unwrap_or(Value::Null);
            if at(&target, &["averageValue"]).is_some_and(|v| !v.is_null()) {
                let current = status_of(field)
                    .map(|s| quantity(s, &["current", "averageValue"]))
                    .unwrap_or_else(unknown);
                format!("{name}: {current}/{}", quantity(&target, &["averageValue"]))
            } else {
                let current = status_of(field)
                    .and_then(|s| percent(s, &["current", "averageUtilization"]))
                    .unwrap_or_else(unknown);
                let target =
                    percent(&target, &["averageUtilization"]).unwrap_or_else(|| "<auto>".into());
                format!("{name}: {current}/{target}")
            }
        }
        _ => "<unknown type>".to_string(),
    }
}

/// `autoscaling/v1` objects carry one CPU target; read them as the v2 metric they convert to.
fn metrics(obj: &Value) -> (Vec<Value>, Vec<Value>) {
    let spec = list(obj, &["spec", "metrics"]).to_vec();
    let status = list(obj, &["status", "currentMetrics"]).to_vec();
    match opt_int(obj, &["spec", "targetCPUUtilizationPercentage"]) {
        Some(target) if spec.is_empty() => {
            let spec = vec![json!({"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": target}}})];
            let status = opt_int(obj, &["status", "currentCPUUtilizationPercentage"])
                .map(|c| {
                    vec![json!({"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": c}}})]
                })
                .unwrap_or_default();
            (spec, status)
        }
        _ => (spec, status),
    }
}

fn format_targets(obj: &Value) -> String {
    let (specs, statuses) = metrics(obj);
    if specs.is_empty() {
        return "<none>".to_string();
    }
    const MAX: usize = 2;
    let all: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| format_metric(spec, statuses.get(i)))
        .collect();
    if all.len() > MAX {
        format!("{} + {} more...", all[..MAX].join(", "), all.len() - MAX)
    } else {
        all.join(", ")
    }
}

/// The targets an `autoscaling/v1` object has, in v2's shape (upstream prints the internal
/// form, the same whichever version was asked for): the CPU utilization metric and its current
/// value.
fn v1_as_v2(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(t) = at(obj, &["spec", "targetCPUUtilizationPercentage"]).filter(|t| !t.is_null()) {
        v["spec"]["metrics"] = json!([{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": t}}}]);
    }
    if let Some(c) =
        at(obj, &["status", "currentCPUUtilizationPercentage"]).filter(|c| !c.is_null())
    {
        v["status"]["currentMetrics"] = json!([{"type": "Resource", "resource": {"name": "cpu",
            "current": {"averageUtilization": c}}}]);
    }
    v
}

fn hpa(obj: &Value, now: Instant) -> Row {
    let converted;
    let obj = if str_or_empty(obj, &["apiVersion"]) == "autoscaling/v1" {
        converted = v1_as_v2(obj);
        &converted
    } else {
        obj
    };
    let reference = format!(
        "{}/{}",
        str_or_empty(obj, &["spec", "scaleTargetRef", "kind"]),
        str_or_empty(obj, &["spec", "scaleTargetRef", "name"])
    );
    // Upstream defaults minReplicas to 1.
    let min = opt_int(obj, &["spec", "minReplicas"]).unwrap_or(1);
    Row::new(cells![
        meta::name(obj),
        reference,
        format_targets(obj),
        min.to_string(),
        int_or_zero(obj, &["spec", "maxReplicas"]),
        int_or_zero(obj, &["status", "currentReplicas"]),
        meta::age(obj, now),
    ])
}

pub(crate) const SCALE: Printer = Printer {
    columns: &[
        // Upstream's Scale printer leaves the name column without the `name` format.
        Def {
            name: "Name",
            type_: "string",
            format: "",
            priority: 0,
            description: NAME_DESC,
        },
        i("Desired", "Desired replica count."),
        i("Available", "Observed replica count."),
        AGE,
    ],
    row: scale,
};

fn scale(obj: &Value, now: Instant) -> Row {
    Row::new(cells![
        meta::name(obj),
        int_or_zero(obj, &["spec", "replicas"]),
        int_or_zero(obj, &["status", "replicas"]),
        meta::age(obj, now),
    ])
}

pub(crate) const POD_DISRUPTION_BUDGET: Printer = Printer {
    columns: &[
        NAME,
        s(
            "Min Available",
            "Pods that must stay available, as a count or percentage.",
        ),
        s(
            "Max Unavailable",
            "Pods that may be unavailable, as a count or percentage.",
        ),
        i("Allowed Disruptions", "Pod disruptions currently allowed."),
        AGE,
    ],
    row: pod_disruption_budget,
};

fn pod_disruption_budget(obj: &Value, now: Instant) -> Row {
    let or_na =
        |field: &str| opt_int_or_string(obj, &["spec", field]).unwrap_or_else(|| "N/A".into());
    Row::new(cells![
        meta::name(obj),
        or_na("minAvailable"),
        or_na("maxUnavailable"),
        int_or_zero(obj, &["status", "disruptionsAllowed"]),
        meta::age(obj, now),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::testutil::{ago, cells, default_names};

    #[test]
    fn hpa_prints_reference_targets_and_bounds() {
        let h = json!({
            "metadata": {"name": "web", "creationTimestamp": ago(3600 * 30)},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 2, "maxReplicas": 10,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]},
            "status": {"currentReplicas": 3, "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 45, "averageValue": "120m"}}}]}
        });
        assert_eq!(
            default_names(&HORIZONTAL_POD_AUTOSCALER),
            [
                "Name",
                "Reference",
                "Targets",
                "MinPods",
                "MaxPods",
                "Replicas",
                "Age"
            ]
        );
        assert_eq!(
            cells(&HORIZONTAL_POD_AUTOSCALER, &h),
            vec![
                json!("web"),
                json!("Deployment/web"),
                json!("cpu: 45%/80%"),
                json!("2"),
                json!(10),
                json!(3),
                json!("30h")
            ]
        );
    }

    #[test]
    fn a_v1_hpa_prints_its_cpu_target_like_v2() {
        let h = json!({
            "apiVersion": "autoscaling/v1",
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
                "targetCPUUtilizationPercentage": 80},
            "status": {"currentReplicas": 2, "currentCPUUtilizationPercentage": 45},
        });
        let c = cells(&HORIZONTAL_POD_AUTOSCALER, &h);
        assert_eq!(c[2], json!("cpu: 45%/80%"));
        assert_eq!(c[3], json!("1"));
    }

    #[test]
    fn hpa_targets_cover_every_metric_kind_and_cut_after_two() {
        let h = json!({
            "metadata": {"name": "q"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "q"}, "maxReplicas": 5, "metrics": [
                {"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "1k"}}},
                {"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "AverageValue", "averageValue": "30"}}},
                {"type": "Object", "object": {"metric": {"name": "hits"}, "target": {"type": "Value", "value": "10"}}}
            ]},
            "status": {"currentMetrics": [{"type": "Pods", "pods": {"current": {"averageValue": "500"}}}]}
        });
        assert_eq!(
            cells(&HORIZONTAL_POD_AUTOSCALER, &h)[2..4],
            [json!("500/1k, <unknown>/30 (avg) + 1 more..."), json!("1")]
        );
        let memory = json!({"metadata": {"name": "m"}, "spec": {"maxReplicas": 3, "metrics": [
            {"type": "ContainerResource", "containerResource": {"name": "memory", "container": "app",
                "target": {"type": "AverageValue", "averageValue": "512Mi"}}}]}});
        assert_eq!(
            cells(&HORIZONTAL_POD_AUTOSCALER, &memory)[2],
            json!("memory: <unknown>/512Mi")
        );
        let none = json!({"metadata": {"name": "n"}, "spec": {"maxReplicas": 1}});
        assert_eq!(cells(&HORIZONTAL_POD_AUTOSCALER, &none)[2], json!("<none>"));
    }

    #[test]
    fn v1_hpa_cpu_target_prints_as_its_v2_metric() {
        let h = json!({"metadata": {"name": "v1"}, "spec": {"maxReplicas": 4, "targetCPUUtilizationPercentage": 50},
            "status": {"currentCPUUtilizationPercentage": 12}});
        assert_eq!(
            cells(&HORIZONTAL_POD_AUTOSCALER, &h)[2],
            json!("cpu: 12%/50%")
        );
    }

    #[test]
    fn pdb_prints_int_or_percent_and_not_applicable() {
        let p = json!({"metadata": {"name": "web"}, "spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 1}});
        assert_eq!(
            cells(&POD_DISRUPTION_BUDGET, &p)[1..4],
            [json!("50%"), json!("N/A"), json!(1)]
        );
        let p = json!({"metadata": {"name": "db"}, "spec": {"maxUnavailable": 1}});
        assert_eq!(
            cells(&POD_DISRUPTION_BUDGET, &p)[1..4],
            [json!("N/A"), json!("1"), json!(0)]
        );
    }

    #[test]
    fn scale_prints_desired_and_available() {
        let sc = json!({"metadata": {"name": "web"}, "spec": {"replicas": 3}, "status": {"replicas": 2}});
        assert_eq!(cells(&SCALE, &sc)[..3], [json!("web"), json!(3), json!(2)]);
        assert_eq!(SCALE.columns[0].format, "");
    }
}
