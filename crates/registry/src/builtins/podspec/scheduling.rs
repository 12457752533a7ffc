//! Scheduling constraints of a pod spec: tolerations, node and pod (anti-)affinity, node
//! selectors (also used by PersistentVolumes) and topology spread constraints, checked as
//! upstream's `ValidateTolerations`, `validateAffinity` and
//! `validateTopologySpreadConstraints` do.

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::labels::{LabelSelectorOptions, validate_label_selector};
use apimachinery::validation::is_valid_label_value;
use serde_json::{Value, json};

use crate::builtins::util::{arr_at, at, dns_label, i64_at, qualified_name, str_at};

/// Upstream `isNotPositiveErrorMsg`.
const NOT_POSITIVE: &str = "must be greater than zero";

/// Upstream `ValidateTolerations`.
pub(crate) fn tolerations(errs: &mut ErrorList, list: &[Value], path: &Path) {
    for (i, t) in list.iter().enumerate() {
        let p = path.index(i);
        let key = str_at(t, "/key");
        let op = str_at(t, "/operator");
        let effect = str_at(t, "/effect");
        if !key.is_empty() {
            qualified_name(errs, &p.child("key"), key);
        }
        if key.is_empty() && op != "Exists" {
            errs.push(FieldError::invalid(
                p.child("operator"),
                json!(op),
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if at(t, "/tolerationSeconds").is_some() && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                p.child("effect"),
                json!(effect),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        let value = str_at(t, "/value");
        match op {
            "Equal" | "" => {
                let msgs = is_valid_label_value(value);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(
                        p.child("operator"),
                        json!(value),
                        msgs.join(";"),
                    ));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(FieldError::invalid(
                        p.child("operator"),
                        json!(value),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errs.push(FieldError::not_supported(
                p.child("operator"),
                json!(other),
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() && !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect)
        {
            errs.push(FieldError::not_supported(
                p.child("effect"),
                json!(effect),
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ));
        }
    }
}

/// Upstream `validateAffinity`.
pub(crate) fn affinity(errs: &mut ErrorList, a: &Value, p: &Path) {
    if let Some(na) = at(a, "/nodeAffinity") {
        let np = p.child("nodeAffinity");
        if let Some(req) = at(na, "/requiredDuringSchedulingIgnoredDuringExecution") {
            node_selector(
                errs,
                req,
                &np.child("requiredDuringSchedulingIgnoredDuringExecution"),
            );
        }
        for (i, t) in arr_at(na, "/preferredDuringSchedulingIgnoredDuringExecution")
            .iter()
            .enumerate()
        {
            let tp = np
                .child("preferredDuringSchedulingIgnoredDuringExecution")
                .index(i);
            weight(errs, t, &tp);
            if let Some(pref) = at(t, "/preference") {
                node_selector_term(errs, pref, &tp.child("preference"));
            }
        }
    }
    for kind in ["podAffinity", "podAntiAffinity"] {
        let Some(pa) = at(a, &format!("/{kind}")) else {
            continue;
        };
        let kp = p.child(kind);
        for (i, t) in arr_at(pa, "/requiredDuringSchedulingIgnoredDuringExecution")
            .iter()
            .enumerate()
        {
            pod_affinity_term(
                errs,
                t,
                &kp.child("requiredDuringSchedulingIgnoredDuringExecution")
                    .index(i),
            );
        }
        for (i, t) in arr_at(pa, "/preferredDuringSchedulingIgnoredDuringExecution")
            .iter()
            .enumerate()
        {
            let tp = kp
                .child("preferredDuringSchedulingIgnoredDuringExecution")
                .index(i);
            weight(errs, t, &tp);
            let null = Value::Null;
            pod_affinity_term(
                errs,
                t.get("podAffinityTerm").unwrap_or(&null),
                &tp.child("podAffinityTerm"),
            );
        }
    }
}

pub(crate) fn weight(errs: &mut ErrorList, t: &Value, p: &Path) {
    let w = i64_at(t, "/weight").unwrap_or(0);
    if !(1..=100).contains(&w) {
        errs.push(FieldError::invalid(
            p.child("weight"),
            json!(w),
            "must be in the range 1-100",
        ));
    }
}

/// Upstream `ValidateNodeSelector`.
pub(crate) fn node_selector(errs: &mut ErrorList, sel: &Value, p: &Path) {
    let terms = arr_at(sel, "/nodeSelectorTerms");
    let tp = p.child("nodeSelectorTerms");
    if terms.is_empty() {
        errs.push(FieldError::required(
            &tp,
            "must have at least one node selector term",
        ));
    }
    for (i, t) in terms.iter().enumerate() {
        node_selector_term(errs, t, &tp.index(i));
    }
}

/// Upstream `ValidateNodeSelectorTerm`.
pub(crate) fn node_selector_term(errs: &mut ErrorList, term: &Value, p: &Path) {
    for (j, r) in arr_at(term, "/matchExpressions").iter().enumerate() {
        let rp = p.child("matchExpressions").index(j);
        let values = arr_at(r, "/values");
        match str_at(r, "/operator") {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.push(FieldError::required(
                        rp.child("values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.push(FieldError::forbidden(
                        rp.child("values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            "Gt" | "Lt" => {
                if values.len() != 1 {
                    errs.push(FieldError::required(
                        rp.child("values"),
                        "must be specified single value when `operator` is 'Lt' or 'Gt'",
                    ));
                }
            }
            other => errs.push(FieldError::invalid(
                rp.child("operator"),
                json!(other),
                "not a valid selector operator",
            )),
        }
        qualified_name(errs, &rp.child("key"), str_at(r, "/key"));
        for (k, v) in values.iter().enumerate() {
            let v = v.as_str().unwrap_or("");
            for m in is_valid_label_value(v) {
                errs.push(FieldError::invalid(
                    rp.child("values").index(k),
                    json!(v),
                    m,
                ));
            }
        }
    }
    for (j, r) in arr_at(term, "/matchFields").iter().enumerate() {
        let rp = p.child("matchFields").index(j);
        match str_at(r, "/operator") {
            "In" | "NotIn" => {
                if arr_at(r, "/values").len() != 1 {
                    errs.push(FieldError::required(
                        rp.child("values"),
                        "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                    ));
                }
            }
            other => errs.push(FieldError::invalid(
                rp.child("operator"),
                json!(other),
                "not a valid selector operator",
            )),
        }
        let key = str_at(r, "/key");
        if key != "metadata.name" {
            errs.push(FieldError::invalid(
                rp.child("key"),
                json!(key),
                "not a valid field selector key",
            ));
        }
    }
}

/// Upstream `validatePodAffinityTerm`.
pub(crate) fn pod_affinity_term(errs: &mut ErrorList, t: &Value, p: &Path) {
    for sel in ["labelSelector", "namespaceSelector"] {
        if let Some(s) = at(t, &format!("/{sel}")) {
            errs.extend(validate_label_selector(
                s,
                LabelSelectorOptions::default(),
                &p.child(sel),
            ));
        }
    }
    for ns in arr_at(t, "/namespaces") {
        dns_label(errs, &p.child("namespace"), ns.as_str().unwrap_or(""));
    }
    let key = str_at(t, "/topologyKey");
    if key.is_empty() {
        errs.push(FieldError::required(
            p.child("topologyKey"),
            "can not be empty",
        ));
    }
    qualified_name(errs, &p.child("topologyKey"), key);
}

/// Upstream `validateTopologySpreadConstraints`.
pub(crate) fn topology_spread(errs: &mut ErrorList, list: &[Value], path: &Path) {
    for (i, c) in list.iter().enumerate() {
        let p = path.index(i);
        let skew = i64_at(c, "/maxSkew").unwrap_or(0);
        if skew <= 0 {
            errs.push(FieldError::invalid(
                p.child("maxSkew"),
                json!(skew),
                NOT_POSITIVE,
            ));
        }
        let key = str_at(c, "/topologyKey");
        if key.is_empty() {
            errs.push(FieldError::required(
                p.child("topologyKey"),
                "can not be empty",
            ));
        }
        let when = str_at(c, "/whenUnsatisfiable");
        if !["DoNotSchedule", "ScheduleAnyway"].contains(&when) {
            errs.push(FieldError::not_supported(
                p.child("whenUnsatisfiable"),
                json!(when),
                &["DoNotSchedule", "ScheduleAnyway"],
            ));
        }
        let repeated = list[i + 1..]
            .iter()
            .any(|o| str_at(o, "/topologyKey") == key && str_at(o, "/whenUnsatisfiable") == when);
        if repeated {
            errs.push(FieldError::duplicate(
                p.child("{topologyKey, whenUnsatisfiable}"),
                json!(format!("{{{key}, {when}}}")),
            ));
        }
        if let Some(min) = i64_at(c, "/minDomains") {
            if min <= 0 {
                errs.push(FieldError::invalid(
                    p.child("minDomains"),
                    json!(min),
                    NOT_POSITIVE,
                ));
            }
            if when != "DoNotSchedule" {
                errs.push(FieldError::invalid(
                    p.child("minDomains"),
                    json!(min),
                    format!(
                        "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {when}"
                    ),
                ));
            }
        }
        for policy in ["nodeAffinityPolicy", "nodeTaintsPolicy"] {
            if let Some(v) = c.get(policy).and_then(Value::as_str)
                && !["Honor", "Ignore"].contains(&v)
            {
                errs.push(FieldError::not_supported(
                    p.child(policy),
                    json!(v),
                    &["Honor", "Ignore"],
                ));
            }
        }
        if let Some(s) = at(c, "/labelSelector") {
            errs.extend(validate_label_selector(
                s,
                LabelSelectorOptions::default(),
                &p.child("labelSelector"),
            ));
        }
    }
}
