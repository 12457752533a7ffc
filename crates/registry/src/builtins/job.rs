//! Jobs (batch/v1): upstream `SetDefaults_Job`, the generated selector (`generateSelector`:
//! the `batch.kubernetes.io/controller-uid` selector and the four job labels on the template
//! unless `manualSelector` is true), `ValidateJob` and what an update may change.

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::labels::{
    LabelSelectorOptions, label_selector_from_json, validate_label_selector,
};
use apimachinery::meta;
use apimachinery::validation::is_dns1123_label;
use serde_json::{Value, json};

use super::gofmt;
use super::jobspec;
use super::podspec;
use super::util::{IMMUTABLE, at, child, empty_map, field_string, str_at};
use super::workload;
use crate::strategy::Strategy;

const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
const JOB_NAME: &str = "batch.kubernetes.io/job-name";
const LEGACY_CONTROLLER_UID: &str = "controller-uid";
const LEGACY_JOB_NAME: &str = "job-name";

/// Jobs.
pub struct JobStrategy;

fn manual_selector(obj: &Value) -> bool {
    obj.pointer("/spec/manualSelector").and_then(Value::as_bool) == Some(true)
}

/// Upstream `SetDefaults_Job`'s label rule: a job without labels takes its template's.
fn default_labels(obj: &mut Value) {
    let template_labels = obj.pointer("/spec/template/metadata/labels").cloned();
    if let Some(l) = template_labels.filter(Value::is_object)
        && empty_map(obj.pointer("/metadata/labels"))
    {
        meta::set(obj, "labels", l);
    }
}

/// Upstream `generateSelector`.
fn generate_selector(obj: &mut Value) {
    let name = meta::name(obj).to_string();
    let uid = meta::uid(obj).to_string();
    let Some(spec) = child(obj, "spec") else {
        return;
    };
    if let Some(template) = child(spec, "template")
        && let Some(md) = child(template, "metadata")
        && let Some(labels) = child(md, "labels").and_then(Value::as_object_mut)
    {
        for key in [LEGACY_JOB_NAME, JOB_NAME] {
            labels.entry(key).or_insert_with(|| json!(name));
        }
        for key in [LEGACY_CONTROLLER_UID, CONTROLLER_UID] {
            labels.entry(key).or_insert_with(|| json!(uid));
        }
    }
    if let Some(sel) = child(spec, "selector")
        && let Some(ml) = child(sel, "matchLabels").and_then(Value::as_object_mut)
    {
        ml.entry(CONTROLLER_UID).or_insert_with(|| json!(uid));
    }
}

impl Strategy for JobStrategy {
    fn default(&self, obj: &mut Value) {
        default_labels(obj);
        let Some(spec) = child(obj, "spec") else {
            return;
        };
        jobspec::default_job_spec(spec);
        if let Some(t) = child(spec, "template") {
            podspec::default_template(t);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
        // Labels are defaulted from the template before the generated ones are added to it.
        default_labels(obj);
        if !manual_selector(obj) {
            generate_selector(obj);
        }
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        validate_job(obj, true)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let prefixed = old
            .pointer(&format!(
                "/spec/template/metadata/labels/{}",
                CONTROLLER_UID.replace('/', "~1")
            ))
            .is_some();
        let mut errs = validate_job(new, prefixed);
        let p = Path::new("spec");
        let (ns, os) = (
            new.get("spec").unwrap_or(&Value::Null),
            old.get("spec").unwrap_or(&Value::Null),
        );
        completions_update(&mut errs, ns, os, &p.child("completions"));
        workload::immutable_selector(&mut errs, new, old);
        let started = at(old, "/status/startTime").is_some();
        template_update(&mut errs, ns, os, started, &p.child("template"));
        for f in [
            "completionMode",
            "podFailurePolicy",
            "backoffLimitPerIndex",
            "managedBy",
            "successPolicy",
        ] {
            let (n, o) = (at(ns, &format!("/{f}")), at(os, &format!("/{f}")));
            super::util::immutable(&mut errs, &p.child(f), n, o, |v| match v {
                None => gofmt::quote("null"),
                Some(v) => gofmt::json(Some(v)),
            });
        }
        errs
    }

    fn field_names(&self) -> &[&'static str] {
        &["status.successful"]
    }

    fn field(&self, obj: &Value, name: &str) -> Option<String> {
        (name == "status.successful").then(|| {
            let s = field_string(obj, "/status/succeeded");
            if s.is_empty() { "0".into() } else { s }
        })
    }

    fn warnings(&self, obj: &Value) -> Vec<String> {
        podspec::spec_warnings(obj, "/spec/template/spec", "spec.template.spec")
    }
}

/// Upstream `ValidateJob`.
fn validate_job(obj: &Value, require_prefixed: bool) -> ErrorList {
    let mut errs = ErrorList::new();
    generated_selector(&mut errs, obj, require_prefixed);
    let null = Value::Null;
    let spec = obj.get("spec").unwrap_or(&null);
    let p = Path::new("spec");
    jobspec::validate_job_spec(&mut errs, spec, &p);
    let sel_path = p.child("selector");
    match at(spec, "/selector") {
        None => errs.push(FieldError::required(&sel_path, "")),
        Some(sel) => errs.extend(validate_label_selector(
            sel,
            LabelSelectorOptions::default(),
            &sel_path,
        )),
    }
    if let Ok(sel) = label_selector_from_json(spec.get("selector").unwrap_or(&null), &sel_path) {
        let labels = spec.pointer("/template/metadata/labels");
        if !sel.matches_json(labels) {
            errs.push(gofmt::invalid(
                &p.child("template").child("metadata").child("labels"),
                gofmt::string_map(labels.filter(|l| l.is_object())),
                "`selector` does not match template `labels`",
            ));
        }
    }
    let indexed = str_at(spec, "/completionMode") == "Indexed";
    if let Some(c) = spec.get("completions").and_then(Value::as_i64)
        && indexed
        && c > 0
    {
        let host = format!("{}-{}", meta::name(obj), c - 1);
        if !is_dns1123_label(&host).is_empty() {
            errs.push(FieldError::invalid(
                "metadata.name",
                json!(meta::name(obj)),
                format!("will not able to create pod with invalid DNS label: {host}"),
            ));
        }
    }
    errs
}

/// Upstream `validateGeneratedSelector`: a generated selector and its labels must be intact.
fn generated_selector(errs: &mut ErrorList, obj: &Value, require_prefixed: bool) {
    if manual_selector(obj) || at(obj, "/spec/selector").is_none() {
        return;
    }
    let uid = meta::uid(obj);
    let name = meta::name(obj);
    if uid.is_empty() {
        errs.push(FieldError::required("metadata.uid", ""));
    }
    let mp = Path::new("spec").child("template").child("metadata");
    let labels = obj.pointer("/spec/template/metadata/labels");
    let mut expected = vec![(LEGACY_CONTROLLER_UID, uid), (LEGACY_JOB_NAME, name)];
    if require_prefixed {
        expected.push((CONTROLLER_UID, uid));
        expected.push((JOB_NAME, name));
    }
    for (key, want) in &expected {
        let lp = mp.child("labels").key(key);
        match labels.and_then(|l| l.get(*key)).and_then(Value::as_str) {
            None => errs.push(FieldError::required(&lp, format!("must be '{want}'"))),
            Some(v) if v != *want => errs.push(gofmt::invalid(
                &lp,
                gofmt::string_map(labels),
                &format!("must be '{want}'"),
            )),
            Some(_) => {}
        }
    }
    let expected_labels: serde_json::Map<String, Value> = expected
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let sel = obj.pointer("/spec/selector").unwrap_or(&Value::Null);
    if let Ok(s) = label_selector_from_json(sel, &Path::new("spec.selector"))
        && !s.matches(&expected_labels)
    {
        errs.push(gofmt::invalid(
            &Path::new("spec").child("selector"),
            gofmt::label_selector(Some(sel)),
            "`selector` not auto-generated",
        ));
    }
}

/// Upstream `validateCompletions`: immutable, except that an Indexed job may change it
/// together with `parallelism` (elastic indexed jobs).
fn completions_update(errs: &mut ErrorList, new: &Value, old: &Value, p: &Path) {
    let (n, o) = (at(new, "/completions"), at(old, "/completions"));
    if n == o {
        return;
    }
    if str_at(new, "/completionMode") == "Indexed" {
        if let Some(c) = n
            && Some(c) != at(new, "/parallelism")
        {
            errs.push(FieldError::invalid(
                p,
                c.clone(),
                "can only be modified in tandem with spec.parallelism",
            ));
        }
        return;
    }
    super::util::immutable(errs, p, n, o, |_| gofmt::quote("null"));
}

/// Upstream `validatePodTemplateUpdate`: the template is immutable, except that a suspended
/// job that never started may change its scheduling directives, labels and annotations.
fn template_update(errs: &mut ErrorList, new: &Value, old: &Value, started: bool, p: &Path) {
    let (n, o) = (new.get("template"), old.get("template"));
    if n == o {
        return;
    }
    let mut old_t = o.cloned().unwrap_or(Value::Null);
    let suspended = old.get("suspend").and_then(Value::as_bool) == Some(true);
    if suspended
        && !started
        && let (Some(old_map), Some(new_t)) = (old_t.as_object_mut(), n)
    {
        for (outer, field) in [
            ("metadata", "labels"),
            ("metadata", "annotations"),
            ("spec", "nodeSelector"),
            ("spec", "tolerations"),
            ("spec", "schedulingGates"),
        ] {
            let value = new_t.get(outer).and_then(|x| x.get(field)).cloned();
            let section = old_map.entry(outer).or_insert_with(|| json!({}));
            if let Some(s) = section.as_object_mut() {
                match value {
                    Some(v) => {
                        s.insert(field.into(), v);
                    }
                    None => {
                        s.remove(field);
                    }
                }
            }
        }
        let node_affinity = new_t.pointer("/spec/affinity/nodeAffinity").cloned();
        if let Some(spec) = old_map.get_mut("spec").and_then(Value::as_object_mut) {
            let aff = spec.entry("affinity").or_insert_with(|| json!({}));
            if let Some(a) = aff.as_object_mut() {
                match node_affinity {
                    Some(na) => {
                        a.insert("nodeAffinity".into(), na);
                    }
                    None => {
                        a.remove("nodeAffinity");
                    }
                }
                if a.is_empty() && new_t.pointer("/spec/affinity").is_none() {
                    spec.remove("affinity");
                }
            }
        }
    }
    if n != Some(&old_t) {
        errs.push(gofmt::invalid(
            p,
            format!("core.PodTemplateSpec{}", gofmt::json(n)),
            IMMUTABLE,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(mut job: Value) -> Value {
        meta::set(&mut job, "uid", "u-1");
        JobStrategy.prepare_for_create(&mut job);
        JobStrategy.default(&mut job);
        job
    }

    fn minimal() -> Value {
        json!({"metadata": {"name": "pi", "namespace": "default"}, "spec": {"template": {"spec": {
            "containers": [{"name": "pi", "image": "perl"}], "restartPolicy": "Never"}}}})
    }

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn jobs_get_generated_selectors_labels_and_defaults() {
        let job = created(minimal());
        let spec = &job["spec"];
        assert_eq!(
            spec["selector"],
            json!({"matchLabels": {CONTROLLER_UID: "u-1"}})
        );
        assert_eq!(
            spec["template"]["metadata"]["labels"],
            json!({CONTROLLER_UID: "u-1", JOB_NAME: "pi", "controller-uid": "u-1", "job-name": "pi"})
        );
        assert_eq!(
            job["metadata"]["labels"],
            spec["template"]["metadata"]["labels"]
        );
        assert_eq!(spec["completions"], json!(1));
        assert_eq!(spec["parallelism"], json!(1));
        assert_eq!(spec["backoffLimit"], json!(6));
        assert_eq!(spec["completionMode"], json!("NonIndexed"));
        assert_eq!(spec["suspend"], json!(false));
        assert_eq!(spec["podReplacementPolicy"], json!("TerminatingOrFailed"));
        assert_eq!(job["status"], json!({}));
        assert!(messages(&JobStrategy.validate(&job)).is_empty());
    }

    #[test]
    fn user_template_labels_become_job_labels_before_generation() {
        let mut job = minimal();
        job["spec"]["template"]["metadata"] = json!({"labels": {"app": "pi"}});
        let job = created(job);
        assert_eq!(job["metadata"]["labels"], json!({"app": "pi"}));
    }

    #[test]
    fn always_restarting_templates_are_refused() {
        let mut job = minimal();
        job["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
        let job = created(job);
        assert_eq!(
            messages(&JobStrategy.validate(&job)),
            vec![
                "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
            ]
        );
    }

    #[test]
    fn manual_selectors_are_not_generated() {
        let mut job = minimal();
        job["spec"]["manualSelector"] = json!(true);
        let job = created(job);
        // As upstream: a missing selector also fails to match the template.
        assert_eq!(
            messages(&JobStrategy.validate(&job)),
            vec![
                "spec.selector: Required value",
                "spec.template.metadata.labels: Invalid value: map[string]string(nil): `selector` does not match template `labels`",
            ]
        );
    }

    #[test]
    fn selector_and_template_are_immutable() {
        let old = created(minimal());
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("perl:2");
        let msgs = messages(&JobStrategy.validate_update(&new, &old));
        assert_eq!(msgs.len(), 1);
        assert!(msgs[0].starts_with("spec.template: Invalid value: core.PodTemplateSpec{"));
        assert!(msgs[0].ends_with(": field is immutable"));
        let mut new = old.clone();
        new["spec"]["completions"] = json!(3);
        assert_eq!(
            messages(&JobStrategy.validate_update(&new, &old)),
            vec!["spec.completions: Invalid value: 3: field is immutable"]
        );
    }

    #[test]
    fn suspended_jobs_may_change_scheduling_directives() {
        let mut job = minimal();
        job["spec"]["suspend"] = json!(true);
        let old = created(job);
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a"});
        assert!(messages(&JobStrategy.validate_update(&new, &old)).is_empty());
    }

    #[test]
    fn status_successful_is_selectable() {
        let job = json!({"status": {"succeeded": 2}});
        assert_eq!(
            JobStrategy.field(&job, "status.successful").as_deref(),
            Some("2")
        );
        assert_eq!(
            JobStrategy
                .field(&json!({}), "status.successful")
                .as_deref(),
            Some("0")
        );
    }
}
