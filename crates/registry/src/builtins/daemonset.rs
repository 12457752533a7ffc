//! DaemonSets (apps/v1): upstream `SetDefaults_DaemonSet` (RollingUpdate with one unavailable
//! and no surge, ten revisions), `ValidateDaemonSet`, and the template generation upstream
//! keeps in the `deprecated.daemonset.template.generation` annotation (1 on create, bumped
//! whenever the template changes).

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::labels::{
    LabelSelectorOptions, label_selector_from_json, validate_label_selector,
};
use apimachinery::meta;
use serde_json::{Value, json};

use super::gofmt;
use super::podspec;
use super::util::{
    at, child, default_str, default_value, i64_at, int_or_percent, int_or_percent_value,
    nonnegative, not_more_than_100_percent, str_at,
};
use super::workload;
use crate::strategy::Strategy;

/// Where apps/v1 keeps a DaemonSet's template generation.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// DaemonSets.
pub struct DaemonSetStrategy;

fn template_generation(obj: &Value) -> i64 {
    meta::annotation(obj, TEMPLATE_GENERATION)
        .and_then(|g| g.parse().ok())
        .unwrap_or(0)
}

fn set_template_generation(obj: &mut Value, g: i64) {
    let m = meta::metadata_mut(obj);
    let ann = m.entry("annotations").or_insert_with(|| json!({}));
    if !ann.is_object() {
        *ann = json!({});
    }
    ann[TEMPLATE_GENERATION] = json!(g.to_string());
}

impl Strategy for DaemonSetStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = child(obj, "spec") else {
            return;
        };
        if let Some(us) = child(spec, "updateStrategy") {
            default_str(us, "type", "RollingUpdate");
            if str_at(us, "/type") == "RollingUpdate"
                && let Some(ru) = child(us, "rollingUpdate")
            {
                default_value(ru, "maxUnavailable", json!(1));
                default_value(ru, "maxSurge", json!(0));
            }
        }
        default_value(spec, "revisionHistoryLimit", json!(10));
        if let Some(t) = child(spec, "template") {
            podspec::default_template(t);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
        });
        let g = template_generation(obj).max(1);
        set_template_generation(obj, g);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let mut g = template_generation(old);
        if new.pointer("/spec/template") != old.pointer("/spec/template") {
            g += 1;
        }
        set_template_generation(new, g.max(1));
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        validate_spec(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let mut errs = validate_spec(new);
        workload::immutable_selector(&mut errs, new, old);
        errs
    }

    fn warnings(&self, obj: &Value) -> Vec<String> {
        podspec::spec_warnings(obj, "/spec/template/spec", "spec.template.spec")
    }
}

/// Upstream `ValidateDaemonSetSpec`.
fn validate_spec(obj: &Value) -> ErrorList {
    let mut errs = ErrorList::new();
    let p = Path::new("spec");
    let null = Value::Null;
    let spec = obj.get("spec").unwrap_or(&null);
    let sel_path = p.child("selector");
    let sel = spec.get("selector").unwrap_or(&null);
    let own = validate_label_selector(sel, LabelSelectorOptions::default(), &sel_path);
    let valid = own.is_empty();
    errs.extend(own);
    let tp = p.child("template");
    if valid && let Ok(selector) = label_selector_from_json(sel, &sel_path) {
        let labels = spec.pointer("/template/metadata/labels");
        if !selector.matches_json(labels) {
            errs.push(gofmt::invalid(
                &tp.child("metadata").child("labels"),
                gofmt::string_map(labels.filter(|l| l.is_object())),
                "`selector` does not match template `labels`",
            ));
        }
    }
    if sel.is_object() {
        let n = sel
            .get("matchLabels")
            .and_then(Value::as_object)
            .map_or(0, |m| m.len())
            + sel
                .get("matchExpressions")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
        if n == 0 {
            errs.push(gofmt::invalid(
                &sel_path,
                gofmt::label_selector(Some(sel)),
                "empty selector is invalid for daemonset",
            ));
        }
    }
    workload::long_running_template(&mut errs, spec.get("template"), &tp, "DaemonSet");
    nonnegative(
        &mut errs,
        &p.child("minReadySeconds"),
        i64_at(spec, "/minReadySeconds"),
    );
    update_strategy(
        &mut errs,
        spec.get("updateStrategy").unwrap_or(&null),
        &p.child("updateStrategy"),
    );
    nonnegative(
        &mut errs,
        &p.child("revisionHistoryLimit"),
        i64_at(spec, "/revisionHistoryLimit"),
    );
    errs
}

/// Upstream `ValidateDaemonSetUpdateStrategy`.
fn update_strategy(errs: &mut ErrorList, us: &Value, p: &Path) {
    match str_at(us, "/type") {
        "OnDelete" => {}
        "RollingUpdate" => {
            let Some(ru) = at(us, "/rollingUpdate") else {
                errs.push(FieldError::required(p.child("rollingUpdate"), ""));
                return;
            };
            let rp = p.child("rollingUpdate");
            let (mu, ms) = (ru.get("maxUnavailable"), ru.get("maxSurge"));
            int_or_percent(errs, &rp.child("maxUnavailable"), mu);
            int_or_percent(errs, &rp.child("maxSurge"), ms);
            not_more_than_100_percent(errs, &rp.child("maxUnavailable"), mu);
            not_more_than_100_percent(errs, &rp.child("maxSurge"), ms);
            let (has_u, has_s) = (int_or_percent_value(mu) != 0, int_or_percent_value(ms) != 0);
            if has_u && has_s {
                errs.push(gofmt::invalid(
                    &rp.child("maxSurge"),
                    gofmt::int_or_string(ms.unwrap_or(&json!(0))),
                    "may not be set when maxUnavailable is non-zero",
                ));
            } else if !has_u && !has_s {
                errs.push(FieldError::required(
                    rp.child("maxUnavailable"),
                    "cannot be 0 when maxSurge is 0",
                ));
            }
        }
        other => errs.push(gofmt::not_supported(
            p,
            format!(
                "apps.DaemonSetUpdateStrategy{{Type:{}, RollingUpdate:(*apps.RollingUpdateDaemonSet)({})}}",
                gofmt::quote(other),
                if at(us, "/rollingUpdate").is_some() { "0xc000000000" } else { "nil" }
            ),
            &["RollingUpdate", "OnDelete"],
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal() -> Value {
        json!({"metadata": {"name": "agent"}, "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "c", "image": "a"}]}},
        }})
    }

    #[test]
    fn daemon_sets_are_defaulted_like_upstream() {
        let mut d = minimal();
        DaemonSetStrategy.default(&mut d);
        DaemonSetStrategy.prepare_for_create(&mut d);
        assert_eq!(
            d["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        );
        assert_eq!(d["spec"]["revisionHistoryLimit"], json!(10));
        assert_eq!(meta::annotation(&d, TEMPLATE_GENERATION), Some("1"));
        assert!(DaemonSetStrategy.validate(&d).is_empty());
    }

    #[test]
    fn template_changes_bump_the_template_generation() {
        let mut old = minimal();
        DaemonSetStrategy.default(&mut old);
        DaemonSetStrategy.prepare_for_create(&mut old);
        let mut new = old.clone();
        DaemonSetStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(meta::annotation(&new, TEMPLATE_GENERATION), Some("1"));
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("b");
        DaemonSetStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(meta::annotation(&new, TEMPLATE_GENERATION), Some("2"));
    }

    #[test]
    fn surge_and_unavailable_are_exclusive() {
        let mut d = minimal();
        d["spec"]["updateStrategy"] =
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}});
        DaemonSetStrategy.default(&mut d);
        let msgs: Vec<String> = DaemonSetStrategy
            .validate(&d)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            msgs,
            vec![
                "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:0, IntVal:1, StrVal:\"\"}: may not be set when maxUnavailable is non-zero"
            ]
        );
    }
}
