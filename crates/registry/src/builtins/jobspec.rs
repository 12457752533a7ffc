//! The parts of a Job spec shared by Jobs and CronJob job templates: upstream
//! `SetDefaults_Job`'s spec defaults and `validateJobSpec` (counts, completion mode, pod
//! failure and replacement policies, the template and its restart policy).

use std::collections::HashSet;

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::validation::{is_dns1123_subdomain, is_qualified_name};
use serde_json::{Value, json};

use super::podspec;
use super::util::{arr_at, at, default_str, default_value, i64_at, nonnegative, str_at};

/// Upstream `maxParallelismForIndexedJob`.
const MAX_INDEXED_PARALLELISM: i64 = 100_000;
/// Upstream `maxFailedIndexesForIndexedJob`.
const MAX_FAILED_INDEXES: i64 = 100_000;
const POD_FAILURE_ACTIONS: [&str; 4] = ["Count", "FailIndex", "FailJob", "Ignore"];
const CONDITION_STATUSES: [&str; 3] = ["False", "True", "Unknown"];

/// Upstream `SetDefaults_Job`, minus the label rule (Job-only).
pub(crate) fn default_job_spec(spec: &mut Value) {
    if at(spec, "/completions").is_none() && at(spec, "/parallelism").is_none() {
        spec["completions"] = json!(1);
        spec["parallelism"] = json!(1);
    }
    default_value(spec, "parallelism", json!(1));
    let backoff = if at(spec, "/backoffLimitPerIndex").is_some() {
        i64::from(i32::MAX)
    } else {
        6
    };
    default_value(spec, "backoffLimit", json!(backoff));
    default_str(spec, "completionMode", "NonIndexed");
    default_value(spec, "suspend", json!(false));
    let has_failure_policy = at(spec, "/podFailurePolicy").is_some();
    if let Some(rules) = spec
        .pointer_mut("/podFailurePolicy/rules")
        .and_then(Value::as_array_mut)
    {
        for rule in rules {
            if let Some(patterns) = rule
                .get_mut("onPodConditions")
                .and_then(Value::as_array_mut)
            {
                for p in patterns {
                    default_str(p, "status", "True");
                }
            }
        }
    }
    default_str(
        spec,
        "podReplacementPolicy",
        if has_failure_policy {
            "Failed"
        } else {
            "TerminatingOrFailed"
        },
    );
}

/// Upstream `validateJobSpec`.
pub(crate) fn validate_job_spec(errs: &mut ErrorList, spec: &Value, p: &Path) {
    for f in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
    ] {
        nonnegative(errs, &p.child(f), i64_at(spec, &format!("/{f}")));
    }
    let per_index = i64_at(spec, "/backoffLimitPerIndex");
    let max_failed = i64_at(spec, "/maxFailedIndexes");
    if let Some(m) = max_failed {
        nonnegative(errs, &p.child("maxFailedIndexes"), Some(m));
        if at(spec, "/backoffLimitPerIndex").is_none() {
            errs.push(FieldError::required(
                p.child("backoffLimitPerIndex"),
                "when maxFailedIndexes is specified",
            ));
        }
    }
    if let Some(m) = spec.get("managedBy").and_then(Value::as_str) {
        managed_by(errs, &p.child("managedBy"), m);
    }
    let mode = str_at(spec, "/completionMode");
    let completions = i64_at(spec, "/completions");
    let parallelism = i64_at(spec, "/parallelism");
    if at(spec, "/completionMode").is_some() {
        if mode != "NonIndexed" && mode != "Indexed" {
            errs.push(FieldError::not_supported(
                p.child("completionMode"),
                json!(mode),
                &["NonIndexed", "Indexed"],
            ));
        }
        if mode == "Indexed" {
            if at(spec, "/completions").is_none() {
                errs.push(FieldError::required(
                    p.child("completions"),
                    "when completion mode is Indexed",
                ));
            }
            if let Some(par) = parallelism
                && par > MAX_INDEXED_PARALLELISM
            {
                errs.push(FieldError::invalid(
                    p.child("parallelism"),
                    json!(par),
                    format!("must be less than or equal to {MAX_INDEXED_PARALLELISM} when completion mode is Indexed"),
                ));
            }
            if let (Some(c), Some(m)) = (completions, max_failed)
                && m > c
            {
                errs.push(FieldError::invalid(
                    p.child("maxFailedIndexes"),
                    json!(m),
                    "must be less than or equal to completions",
                ));
            }
            if let Some(m) = max_failed
                && m > MAX_FAILED_INDEXES
            {
                errs.push(FieldError::invalid(
                    p.child("maxFailedIndexes"),
                    json!(m),
                    format!("must be less than or equal to {MAX_FAILED_INDEXES}"),
                ));
            }
        }
    }
    if mode.is_empty() || mode == "NonIndexed" {
        if let Some(b) = per_index {
            errs.push(FieldError::invalid(
                p.child("backoffLimitPerIndex"),
                json!(b),
                "requires indexed completion mode",
            ));
        }
        if let Some(m) = max_failed {
            errs.push(FieldError::invalid(
                p.child("maxFailedIndexes"),
                json!(m),
                "requires indexed completion mode",
            ));
        }
    }
    let failure_policy = at(spec, "/podFailurePolicy");
    if let Some(fp) = failure_policy {
        pod_failure_policy(errs, spec, fp, &p.child("podFailurePolicy"));
    }
    if let Some(sp) = at(spec, "/successPolicy")
        && mode != "Indexed"
    {
        errs.push(super::gofmt::invalid(
            &p.child("successPolicy"),
            super::gofmt::json(Some(sp)),
            "requires indexed completion mode",
        ));
    }
    if let Some(rp) = spec.get("podReplacementPolicy").and_then(Value::as_str) {
        let pp = p.child("podReplacementPolicy");
        if failure_policy.is_some() {
            if rp != "Failed" {
                errs.push(FieldError::not_supported(pp, json!(rp), &["Failed"]));
            }
        } else if !["Failed", "TerminatingOrFailed"].contains(&rp) {
            errs.push(FieldError::not_supported(
                pp,
                json!(rp),
                &["Failed", "TerminatingOrFailed"],
            ));
        }
    }
    let tp = p.child("template");
    podspec::validate_template(errs, spec.get("template"), &tp);
    let rp = tp.child("spec").child("restartPolicy");
    match str_at(spec, "/template/spec/restartPolicy") {
        "Always" | "" => errs.push(FieldError::required(
            rp,
            "valid values: \"OnFailure\", \"Never\"",
        )),
        "OnFailure" | "Never" => {
            if failure_policy.is_some() && str_at(spec, "/template/spec/restartPolicy") != "Never" {
                errs.push(FieldError::invalid(
                    rp,
                    json!("OnFailure"),
                    "only \"Never\" is supported when podFailurePolicy is specified",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            rp,
            json!(other),
            &["OnFailure", "Never"],
        )),
    }
}

/// Upstream `IsDomainPrefixedPath` with the 63-character limit of `managedBy`.
fn managed_by(errs: &mut ErrorList, p: &Path, value: &str) {
    match value.split_once('/') {
        Some((host, path)) if !host.is_empty() && !path.is_empty() => {
            for m in is_dns1123_subdomain(host) {
                errs.push(FieldError::invalid(p, json!(host), m));
            }
        }
        _ if value.is_empty() => errs.push(FieldError::required(p, "")),
        _ => errs.push(FieldError::invalid(
            p,
            json!(value),
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        )),
    }
    if value.len() > 63 {
        errs.push(FieldError::too_long(p, 63));
    }
}

/// Upstream `validatePodFailurePolicy` and its rules.
fn pod_failure_policy(errs: &mut ErrorList, spec: &Value, fp: &Value, p: &Path) {
    let rules = arr_at(fp, "/rules");
    let rules_path = p.child("rules");
    if rules.len() > 20 {
        errs.push(FieldError::too_many(&rules_path, rules.len(), 20));
    }
    let names: HashSet<&str> = arr_at(spec, "/template/spec/containers")
        .iter()
        .chain(arr_at(spec, "/template/spec/initContainers"))
        .map(|c| str_at(c, "/name"))
        .collect();
    let quoted = format!(
        "[{}]",
        POD_FAILURE_ACTIONS
            .iter()
            .map(|a| format!("{a:?}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    for (i, rule) in rules.iter().enumerate() {
        let rp = rules_path.index(i);
        match str_at(rule, "/action") {
            "" => errs.push(FieldError::required(
                rp.child("action"),
                format!("valid values: {quoted}"),
            )),
            "FailIndex" if at(spec, "/backoffLimitPerIndex").is_none() => {
                errs.push(FieldError::invalid(
                    rp.child("action"),
                    json!("FailIndex"),
                    "requires the backoffLimitPerIndex to be set",
                ))
            }
            a if !POD_FAILURE_ACTIONS.contains(&a) => {
                errs.push(FieldError::not_supported(
                    rp.child("action"),
                    json!(a),
                    &POD_FAILURE_ACTIONS,
                ));
            }
            _ => {}
        }
        let codes = at(rule, "/onExitCodes");
        let conditions = arr_at(rule, "/onPodConditions");
        if let Some(c) = codes {
            exit_codes(errs, c, &names, &rp.child("onExitCodes"));
        }
        for (j, pattern) in conditions.iter().enumerate() {
            let pp = rp.child("onPodConditions").index(j);
            for m in is_qualified_name(str_at(pattern, "/type")) {
                errs.push(FieldError::invalid(
                    pp.child("type"),
                    json!(str_at(pattern, "/type")),
                    m,
                ));
            }
            match str_at(pattern, "/status") {
                "" => errs.push(FieldError::required(
                    pp.child("status"),
                    "valid values: [\"False\" \"True\" \"Unknown\"]",
                )),
                s if !CONDITION_STATUSES.contains(&s) => {
                    errs.push(FieldError::not_supported(
                        pp.child("status"),
                        json!(s),
                        &CONDITION_STATUSES,
                    ));
                }
                _ => {}
            }
        }
        if codes.is_some() && !conditions.is_empty() {
            errs.push(super::gofmt::invalid(
                &rp,
                String::new(),
                "specifying both OnExitCodes and OnPodConditions is not supported",
            ));
        }
        if codes.is_none() && conditions.is_empty() {
            errs.push(super::gofmt::invalid(
                &rp,
                String::new(),
                "specifying one of OnExitCodes and OnPodConditions is required",
            ));
        }
    }
}

/// Upstream `validatePodFailurePolicyRuleOnExitCodes`.
fn exit_codes(errs: &mut ErrorList, c: &Value, names: &HashSet<&str>, p: &Path) {
    let op = str_at(c, "/operator");
    match op {
        "" => errs.push(FieldError::required(
            p.child("operator"),
            "valid values: [\"In\" \"NotIn\"]",
        )),
        "In" | "NotIn" => {}
        other => errs.push(FieldError::not_supported(
            p.child("operator"),
            json!(other),
            &["In", "NotIn"],
        )),
    }
    if let Some(name) = c.get("containerName").and_then(Value::as_str)
        && !names.contains(name)
    {
        errs.push(FieldError::invalid(
            p.child("containerName"),
            json!(name),
            "must be one of the container or initContainer names in the pod template",
        ));
    }
    let values: Vec<i64> = arr_at(c, "/values")
        .iter()
        .filter_map(Value::as_i64)
        .collect();
    let vp = p.child("values");
    if values.is_empty() {
        errs.push(super::gofmt::invalid(
            &vp,
            "[]int32(nil)".into(),
            "at least one value is required",
        ));
    } else if values.len() > 255 {
        errs.push(FieldError::too_many(&vp, values.len(), 255));
    }
    let mut seen = HashSet::new();
    let mut ordered = true;
    for (j, v) in values.iter().enumerate() {
        if op == "In" && *v == 0 {
            errs.push(FieldError::invalid(
                vp.index(j),
                json!(v),
                "must not be 0 for the In operator",
            ));
        }
        if !seen.insert(*v) {
            errs.push(FieldError::duplicate(vp.index(j), json!(v)));
        }
        if j > 0 && values[j - 1] > *v {
            ordered = false;
        }
    }
    if !ordered {
        let list: Vec<String> = values.iter().map(i64::to_string).collect();
        errs.push(super::gofmt::invalid(
            &vp,
            format!("[]int32{{{}}}", list.join(", ")),
            "must be ordered",
        ));
    }
}
