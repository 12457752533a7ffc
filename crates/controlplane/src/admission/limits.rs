//! The LimitRanger admission plugin (upstream `plugin/pkg/admission/limitranger`): default
//! requests and limits for a new pod's containers, and the `min`, `max` and
//! `maxLimitRequestRatio` bounds of `Container`, `Pod` and `PersistentVolumeClaim` limits,
//! refused with upstream's messages (`maximum cpu usage per Container is 1, but limit is 2`).

use std::collections::BTreeMap;

use apimachinery::quantity::Quantity;
use serde_json::{Value, json};

use apimachinery::quota::{self as eval, ResourceList};

/// The annotation listing what LimitRanger set.
pub const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// One `spec.limits` item, with upstream's `SetDefaults_LimitRangeItem` applied.
struct Item {
    kind: String,
    min: ResourceList,
    max: ResourceList,
    default: ResourceList,
    default_request: ResourceList,
    ratio: ResourceList,
}

fn items(ranges: &[Value]) -> Vec<Item> {
    let mut out = Vec::new();
    for r in ranges {
        for l in r
            .pointer("/spec/limits")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let list = |f: &str| eval::parse_list(l.get(f));
            let mut it = Item {
                kind: l.get("type").and_then(Value::as_str).unwrap_or("").into(),
                min: list("min"),
                max: list("max"),
                default: list("default"),
                default_request: list("defaultRequest"),
                ratio: list("maxLimitRequestRatio"),
            };
            if it.kind == "Container" {
                for (k, v) in &it.max {
                    it.default.entry(k.clone()).or_insert_with(|| v.clone());
                }
                for (k, v) in it.default.iter().chain(&it.min) {
                    it.default_request
                        .entry(k.clone())
                        .or_insert_with(|| v.clone());
                }
            }
            out.push(it);
        }
    }
    out
}

/// Fills what a container does not state from `defaults`; returns the annotation parts.
fn merge(c: &mut Value, defaults: &BTreeMap<&str, &ResourceList>, what: &str) -> Vec<String> {
    let mut notes = Vec::new();
    if !c.is_object() {
        // Not a container: validation refuses it.
        return notes;
    }
    let name = c
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    for (part, word) in [("requests", "request"), ("limits", "limit")] {
        let Some(d) = defaults.get(part).filter(|d| !d.is_empty()) else {
            continue;
        };
        if !c.get("resources").is_some_and(Value::is_object) {
            c["resources"] = json!({});
        }
        if !c["resources"].get(part).is_some_and(Value::is_object) {
            c["resources"][part] = json!({});
        }
        let mut set = Vec::new();
        if let Some(m) = c["resources"][part].as_object_mut() {
            for (k, v) in d.iter() {
                if !m.contains_key(k) {
                    m.insert(k.clone(), json!(v.to_string()));
                    set.push(k.clone());
                }
            }
        }
        if !set.is_empty() {
            notes.push(format!("{} {word} for {what} {name}", set.join(", ")));
        }
    }
    notes
}

/// Upstream `PodMutateLimitFunc` for every LimitRange: containers without a request or limit
/// get the `Container` item's `defaultRequest` and `default`, and the pod is annotated.
pub fn apply_defaults(ranges: &[Value], pod: &mut Value) {
    for range in ranges {
        let mut req = ResourceList::new();
        let mut lim = ResourceList::new();
        for it in items(std::slice::from_ref(range)) {
            if it.kind == "Container" {
                req = it.default_request;
                lim = it.default;
            }
        }
        if req.is_empty() && lim.is_empty() {
            continue;
        }
        let defaults: BTreeMap<&str, &ResourceList> =
            [("requests", &req), ("limits", &lim)].into_iter().collect();
        let mut notes = Vec::new();
        for (list, what) in [
            ("containers", "container"),
            ("initContainers", "init container"),
        ] {
            if let Some(cs) = pod
                .get_mut("spec")
                .and_then(|s| s.get_mut(list))
                .and_then(Value::as_array_mut)
            {
                for c in cs {
                    notes.extend(merge(c, &defaults, what));
                }
            }
        }
        if !notes.is_empty() {
            let note = format!("LimitRanger plugin set: {}", notes.join("; "));
            let m = apimachinery::meta::metadata_mut(pod);
            let a = m.entry("annotations").or_insert_with(|| json!({}));
            if a.is_null() {
                *a = json!({});
            }
            if let Some(a) = a.as_object_mut() {
                a.insert(ANNOTATION.into(), json!(note));
            }
        }
    }
}

/// Upstream `requestLimitEnforcedValues`: milli-units when nothing overflows, else units.
fn values(req: Option<&Quantity>, lim: Option<&Quantity>, enf: &Quantity) -> (i128, i128, i128) {
    let zero = Quantity::default();
    let (r, l) = (req.unwrap_or(&zero), lim.unwrap_or(&zero));
    const MAX_MILLI: i128 = (i64::MAX / 1000) as i128;
    let unit = |q: &Quantity| i128::from(q.value());
    if unit(r) <= MAX_MILLI && unit(l) <= MAX_MILLI && unit(enf) <= MAX_MILLI {
        (
            r.milli_value_i128(),
            l.milli_value_i128(),
            enf.milli_value_i128(),
        )
    } else {
        (unit(r), unit(l), unit(enf))
    }
}

fn min_constraint(
    kind: &str,
    name: &str,
    enf: &Quantity,
    req: &ResourceList,
    lim: &ResourceList,
) -> Option<String> {
    let (r, l) = (req.get(name), lim.get(name));
    let (rv, lv, ev) = values(r, l, enf);
    match r {
        None => Some(format!(
            "minimum {name} usage per {kind} is {enf}.  No request is specified"
        )),
        Some(r) if rv < ev => Some(format!(
            "minimum {name} usage per {kind} is {enf}, but request is {r}"
        )),
        _ => match l {
            Some(l) if lv < ev => Some(format!(
                "minimum {name} usage per {kind} is {enf}, but limit is {l}"
            )),
            _ => None,
        },
    }
}

fn max_constraint(
    kind: &str,
    name: &str,
    enf: &Quantity,
    req: &ResourceList,
    lim: &ResourceList,
) -> Option<String> {
    let (r, l) = (req.get(name), lim.get(name));
    let (rv, lv, ev) = values(r, l, enf);
    match l {
        None => Some(format!(
            "maximum {name} usage per {kind} is {enf}.  No limit is specified"
        )),
        Some(l) if lv > ev => Some(format!(
            "maximum {name} usage per {kind} is {enf}, but limit is {l}"
        )),
        _ => match r {
            Some(r) if rv > ev => Some(format!(
                "maximum {name} usage per {kind} is {enf}, but request is {r}"
            )),
            _ => None,
        },
    }
}

fn max_request_constraint(
    kind: &str,
    name: &str,
    enf: &Quantity,
    req: &ResourceList,
) -> Option<String> {
    let r = req.get(name);
    let (rv, _, ev) = values(r, None, enf);
    match r {
        None => Some(format!(
            "maximum {name} usage per {kind} is {enf}.  No request is specified"
        )),
        Some(r) if rv > ev => Some(format!(
            "maximum {name} usage per {kind} is {enf}, but request is {r}"
        )),
        _ => None,
    }
}

fn ratio_constraint(
    kind: &str,
    name: &str,
    enf: &Quantity,
    req: &ResourceList,
    lim: &ResourceList,
) -> Option<String> {
    let (r, l) = (req.get(name), lim.get(name));
    let (rv, lv, _) = values(r, l, enf);
    if r.is_none() || rv == 0 {
        return Some(format!(
            "{name} max limit to request ratio per {kind} is {enf}, but no request is specified or request is 0"
        ));
    }
    if l.is_none() || lv == 0 {
        return Some(format!(
            "{name} max limit to request ratio per {kind} is {enf}, but no limit is specified or limit is 0"
        ));
    }
    let observed = lv as f64 / rv as f64;
    let (cmp, max) = if i128::from(enf.value()) <= (i64::MAX / 1000) as i128 {
        (observed * 1000.0, enf.milli_value() as f64)
    } else {
        (observed, enf.value() as f64)
    };
    (cmp > max).then(|| {
        format!("{name} max limit to request ratio per {kind} is {enf}, but provided ratio is {observed:.6}")
    })
}

fn bounds(it: &Item, kind: &str, req: &ResourceList, lim: &ResourceList, errs: &mut Vec<String>) {
    for (k, v) in &it.min {
        errs.extend(min_constraint(kind, k, v, req, lim));
    }
    for (k, v) in &it.max {
        errs.extend(max_constraint(kind, k, v, req, lim));
    }
    for (k, v) in &it.ratio {
        errs.extend(ratio_constraint(kind, k, v, req, lim));
    }
}

/// Upstream `utilerrors.NewAggregate(...).Error()`: one message alone, several in brackets.
fn aggregate(mut errs: Vec<String>) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    errs.retain(|e| seen.insert(e.clone()));
    match errs.len() {
        0 => Ok(()),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

/// Checks a (defaulted) pod or claim against the namespace's LimitRanges.
pub fn check(ranges: &[Value], plural: &str, obj: &Value) -> Result<(), String> {
    let mut errs = Vec::new();
    let null = Value::Null;
    let spec = obj.get("spec").unwrap_or(&null);
    for it in items(ranges) {
        match (plural, it.kind.as_str()) {
            ("pods", "Container") => {
                for list in ["containers", "initContainers"] {
                    for c in spec
                        .get(list)
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let req = eval::parse_list(c.pointer("/resources/requests"));
                        let lim = eval::parse_list(c.pointer("/resources/limits"));
                        bounds(&it, "Container", &req, &lim, &mut errs);
                    }
                }
            }
            ("pods", "Pod") => {
                let mut s = spec.clone();
                if let Some(m) = s.as_object_mut() {
                    m.remove("overhead");
                }
                let req = eval::pod_resources(&s, "requests");
                let lim = eval::pod_resources(&s, "limits");
                bounds(&it, "Pod", &req, &lim, &mut errs);
            }
            ("persistentvolumeclaims", "PersistentVolumeClaim") => {
                let req = eval::parse_list(spec.pointer("/resources/requests"));
                let kind = "PersistentVolumeClaim";
                for (k, v) in &it.min {
                    errs.extend(min_constraint(kind, k, v, &req, &ResourceList::new()));
                }
                for (k, v) in &it.max {
                    errs.extend(max_request_constraint(kind, k, v, &req));
                }
            }
            _ => {}
        }
    }
    aggregate(errs)
}

#[cfg(test)]
#[path = "limits_tests.rs"]
mod tests;
