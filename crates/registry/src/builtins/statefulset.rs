//! StatefulSets (apps/v1): upstream `SetDefaults_StatefulSet` (OrderedReady, RollingUpdate
//! with partition 0, PVCs retained, one replica, ten revisions), `ValidateStatefulSet` (DNS
//! label names; the template's pod spec itself is not validated upstream) and the rule that
//! only some spec fields may change.

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Value, json};

use super::gofmt;
use super::podspec;
use super::util::{
    annotations, at, child, default_str, default_value, dns_label, i64_at, int_or_percent,
    int_or_percent_value, labels, nonnegative, not_more_than_100_percent, str_at,
};
use super::workload;
use crate::strategy::{NameRule, Strategy};

/// StatefulSets.
pub struct StatefulSetStrategy;

/// Spec fields an update may change.
const MUTABLE: [&str; 6] = [
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

impl Strategy for StatefulSetStrategy {
    fn name_rule(&self) -> NameRule {
        NameRule::DnsLabel
    }

    fn default(&self, obj: &mut Value) {
        let Some(spec) = child(obj, "spec") else {
            return;
        };
        default_str(spec, "podManagementPolicy", "OrderedReady");
        if let Some(us) = child(spec, "updateStrategy") {
            if str_at(us, "/type").is_empty() {
                us["type"] = json!("RollingUpdate");
                default_value(us, "rollingUpdate", json!({}));
            }
            if str_at(us, "/type") == "RollingUpdate"
                && let Some(ru) = us.get_mut("rollingUpdate").filter(|r| r.is_object())
            {
                default_value(ru, "partition", json!(0));
            }
        }
        if let Some(policy) = child(spec, "persistentVolumeClaimRetentionPolicy") {
            default_str(policy, "whenDeleted", "Retain");
            default_str(policy, "whenScaled", "Retain");
        }
        default_value(spec, "replicas", json!(1));
        default_value(spec, "revisionHistoryLimit", json!(10));
        if let Some(t) = child(spec, "template") {
            podspec::default_template(t);
        }
        if let Some(claims) = spec
            .get_mut("volumeClaimTemplates")
            .and_then(Value::as_array_mut)
        {
            for claim in claims.iter_mut().filter(|c| c.is_object()) {
                default_str(claim, "apiVersion", "v1");
                default_str(claim, "kind", "PersistentVolumeClaim");
                if let Some(s) = child(claim, "spec") {
                    podspec::default_claim_spec(s);
                }
                if let Some(status) = child(claim, "status") {
                    default_str(status, "phase", "Pending");
                }
            }
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"replicas": 0, "availableReplicas": 0});
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        validate_spec(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let mut errs = validate_spec(new);
        let strip = |o: &Value| {
            let mut spec = o.get("spec").cloned().unwrap_or(Value::Null);
            if let Some(m) = spec.as_object_mut() {
                for f in MUTABLE {
                    m.remove(f);
                }
            }
            spec
        };
        if strip(new) != strip(old) {
            errs.push(FieldError::forbidden(
                "spec",
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
            ));
        }
        errs
    }

    fn warnings(&self, obj: &Value) -> Vec<String> {
        podspec::spec_warnings(obj, "/spec/template/spec", "spec.template.spec")
    }
}

/// Upstream `ValidateStatefulSetSpec`.
fn validate_spec(obj: &Value) -> ErrorList {
    let mut errs = ErrorList::new();
    let p = Path::new("spec");
    let null = Value::Null;
    let spec = obj.get("spec").unwrap_or(&null);
    match str_at(spec, "/podManagementPolicy") {
        "" => errs.push(FieldError::required(p.child("podManagementPolicy"), "")),
        "OrderedReady" | "Parallel" => {}
        other => errs.push(FieldError::invalid(
            p.child("podManagementPolicy"),
            json!(other),
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    update_strategy(
        &mut errs,
        spec.get("updateStrategy").unwrap_or(&null),
        &p.child("updateStrategy"),
    );
    if let Some(policy) = at(spec, "/persistentVolumeClaimRetentionPolicy") {
        let pp = p.child("persistentVolumeClaimRetentionPolicy");
        for f in ["whenDeleted", "whenScaled"] {
            let v = str_at(policy, &format!("/{f}"));
            if !["Retain", "Delete"].contains(&v) {
                errs.push(FieldError::not_supported(
                    pp.child(f),
                    json!(v),
                    &["Retain", "Delete"],
                ));
            }
        }
    }
    nonnegative(&mut errs, &p.child("replicas"), i64_at(spec, "/replicas"));
    nonnegative(
        &mut errs,
        &p.child("minReadySeconds"),
        i64_at(spec, "/minReadySeconds"),
    );
    if at(spec, "/ordinals").is_some() {
        nonnegative(
            &mut errs,
            &p.child("ordinals.start"),
            Some(i64_at(spec, "/ordinals/start").unwrap_or(0)),
        );
    }
    let service = str_at(spec, "/serviceName");
    if !service.is_empty() {
        dns_label(&mut errs, &p.child("serviceName"), service);
    }
    match workload::required_selector(&mut errs, spec, &p, "statefulset") {
        Some(sel) => {
            let tp = p.child("template");
            workload::template_matches(&mut errs, Some(&sel), spec.get("template"), &tp);
            labels(
                &mut errs,
                &tp.child("labels"),
                spec.pointer("/template/metadata/labels"),
            );
            annotations(
                &mut errs,
                &tp.child("annotations"),
                spec.pointer("/template/metadata/annotations"),
            );
        }
        None => errs.push(gofmt::invalid(
            &p.child("selector"),
            gofmt::label_selector(at(spec, "/selector")),
            "",
        )),
    }
    let policy = str_at(spec, "/template/spec/restartPolicy");
    if policy != "Always" {
        errs.push(FieldError::not_supported(
            p.child("template").child("spec").child("restartPolicy"),
            json!(policy),
            &["Always"],
        ));
    }
    if at(spec, "/template/spec/activeDeadlineSeconds").is_some() {
        errs.push(FieldError::forbidden(
            p.child("template")
                .child("spec")
                .child("activeDeadlineSeconds"),
            "activeDeadlineSeconds in StatefulSet is not Supported",
        ));
    }
    errs
}

/// The update strategy part of `ValidateStatefulSetSpec`.
fn update_strategy(errs: &mut ErrorList, us: &Value, p: &Path) {
    let ru = at(us, "/rollingUpdate");
    match str_at(us, "/type") {
        "" => errs.push(FieldError::required(p, "")),
        "OnDelete" => {
            if let Some(ru) = ru {
                errs.push(gofmt::invalid(
                    &p.child("rollingUpdate"),
                    gofmt::json(Some(ru)),
                    "only allowed for updateStrategy 'RollingUpdate'",
                ));
            }
        }
        "RollingUpdate" => {
            if let Some(ru) = ru {
                let rp = p.child("rollingUpdate");
                nonnegative(
                    errs,
                    &rp.child("partition"),
                    Some(i64_at(ru, "/partition").unwrap_or(0)),
                );
                if let Some(mu) = at(ru, "/maxUnavailable") {
                    let mp = rp.child("maxUnavailable");
                    int_or_percent(errs, &mp, Some(mu));
                    if int_or_percent_value(Some(mu)) == 0 {
                        errs.push(gofmt::invalid(&mp, gofmt::int_or_string(mu), "cannot be 0"));
                    }
                    not_more_than_100_percent(errs, &mp, Some(mu));
                }
            }
        }
        _ => errs.push(gofmt::invalid(
            p,
            gofmt::json(Some(us)),
            "must be 'RollingUpdate' or 'OnDelete'",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal() -> Value {
        json!({"metadata": {"name": "db"}, "spec": {
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "pg"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
        }})
    }

    #[test]
    fn stateful_sets_are_defaulted_like_upstream() {
        let mut s = minimal();
        StatefulSetStrategy.default(&mut s);
        let spec = &s["spec"];
        assert_eq!(spec["podManagementPolicy"], json!("OrderedReady"));
        assert_eq!(
            spec["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        );
        assert_eq!(
            spec["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        assert_eq!(spec["replicas"], json!(1));
        assert_eq!(spec["revisionHistoryLimit"], json!(10));
        let claim = &spec["volumeClaimTemplates"][0];
        assert_eq!(claim["kind"], json!("PersistentVolumeClaim"));
        assert_eq!(claim["spec"]["volumeMode"], json!("Filesystem"));
        assert_eq!(claim["status"]["phase"], json!("Pending"));
        assert!(StatefulSetStrategy.validate(&s).is_empty());
    }

    #[test]
    fn only_some_spec_fields_may_change() {
        let mut old = minimal();
        StatefulSetStrategy.default(&mut old);
        let mut new = old.clone();
        new["spec"]["replicas"] = json!(3);
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("pg:2");
        assert!(StatefulSetStrategy.validate_update(&new, &old).is_empty());
        new["spec"]["serviceName"] = json!("other");
        let msgs: Vec<String> = StatefulSetStrategy
            .validate_update(&new, &old)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            msgs,
            vec![
                "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
            ]
        );
    }

    #[test]
    fn bad_policies_are_reported() {
        let mut s = minimal();
        s["spec"]["podManagementPolicy"] = json!("Random");
        s["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
        StatefulSetStrategy.default(&mut s);
        let msgs: Vec<String> = StatefulSetStrategy
            .validate(&s)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            msgs,
            vec![
                "spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'",
                "spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"",
            ]
        );
    }
}
