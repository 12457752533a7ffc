//! `metav1.LabelSelector` (`{"matchLabels": {...}, "matchExpressions": [...]}`) as JSON:
//! validation with upstream's field errors, and conversion into a [`Selector`].
//!
//! Mirrors upstream `ValidateLabelSelector` and `LabelSelectorAsSelector`: a null selector
//! matches nothing, an empty one matches everything, `matchLabels` become `=` requirements and
//! `matchExpressions` use `In`, `NotIn`, `Exists` or `DoesNotExist`.

use serde_json::Value;

use super::{Operator, Requirement, Selector};
use crate::field::{ErrorList, FieldError, Path};
use crate::validation::{is_qualified_name, is_valid_label_value};

/// Upstream `LabelSelectorValidationOptions`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LabelSelectorOptions {
    /// Accept invalid label values in `matchExpressions` (only for data persisted before the
    /// check existed).
    pub allow_invalid_label_value: bool,
    /// Accept operators this code cannot interpret (SubjectAccessReview does).
    pub allow_unknown_operator: bool,
}

fn type_error(path: &Path, v: &Value, want: &str) -> FieldError {
    FieldError::type_invalid(path, v.clone(), format!("must be of type {want}"))
}

/// Upstream `ValidateLabels` over a JSON labels object (`metadata.labels`, `matchLabels`):
/// keys must be qualified names and values label values. Errors are reported at `path` itself
/// (not per key), as upstream does; keys are checked in sorted order.
pub fn validate_labels(labels: &serde_json::Map<String, Value>, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let mut keys: Vec<&String> = labels.keys().collect();
    keys.sort();
    for k in keys {
        for msg in is_qualified_name(k) {
            errs.push(FieldError::invalid(path, Value::from(k.as_str()), msg));
        }
        match &labels[k] {
            Value::String(v) => {
                for msg in is_valid_label_value(v) {
                    errs.push(FieldError::invalid(path, Value::from(v.as_str()), msg));
                }
            }
            other => errs.push(type_error(&path.key(k), other, "string")),
        }
    }
    errs
}

/// Validates a `LabelSelector` at `path` (e.g. `spec.selector`). Null is valid.
pub fn validate_label_selector(
    selector: &Value,
    opts: LabelSelectorOptions,
    path: &Path,
) -> ErrorList {
    let mut errs = ErrorList::new();
    let obj = match selector {
        Value::Null => return errs,
        Value::Object(o) => o,
        other => {
            errs.push(type_error(path, other, "object"));
            return errs;
        }
    };
    match obj.get("matchLabels") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => errs.extend(validate_labels(m, &path.child("matchLabels"))),
        Some(other) => errs.push(type_error(&path.child("matchLabels"), other, "object")),
    }
    let exprs_path = path.child("matchExpressions");
    match obj.get("matchExpressions") {
        None | Some(Value::Null) => {}
        Some(Value::Array(exprs)) => {
            for (i, expr) in exprs.iter().enumerate() {
                errs.extend(validate_requirement(expr, opts, &exprs_path.index(i)));
            }
        }
        Some(other) => errs.push(type_error(&exprs_path, other, "array")),
    }
    errs
}

/// The parts of one `matchExpressions` entry, after type checks.
struct Expr<'a> {
    key: &'a str,
    operator: &'a str,
    values: Vec<&'a str>,
}

fn read_expr<'a>(expr: &'a Value, path: &Path, errs: &mut ErrorList) -> Option<Expr<'a>> {
    let Some(obj) = expr.as_object() else {
        errs.push(type_error(path, expr, "object"));
        return None;
    };
    let mut string_field = |name: &str| match obj.get(name) {
        None | Some(Value::Null) => Some(""),
        Some(Value::String(s)) => Some(s.as_str()),
        Some(other) => {
            errs.push(type_error(&path.child(name), other, "string"));
            None
        }
    };
    let key = string_field("key");
    let operator = string_field("operator");
    let mut values = Vec::new();
    let mut values_ok = true;
    match obj.get("values") {
        None | Some(Value::Null) => {}
        Some(Value::Array(vs)) => {
            for (i, v) in vs.iter().enumerate() {
                match v.as_str() {
                    Some(s) => values.push(s),
                    None => {
                        errs.push(type_error(&path.child("values").index(i), v, "string"));
                        values_ok = false;
                    }
                }
            }
        }
        Some(other) => {
            errs.push(type_error(&path.child("values"), other, "array"));
            values_ok = false;
        }
    }
    match (key, operator, values_ok) {
        (Some(key), Some(operator), true) => Some(Expr {
            key,
            operator,
            values,
        }),
        _ => None,
    }
}

/// Upstream `ValidateLabelSelectorRequirement`.
fn validate_requirement(expr: &Value, opts: LabelSelectorOptions, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(e) = read_expr(expr, path, &mut errs) else {
        return errs;
    };
    match e.operator {
        "In" | "NotIn" => {
            if e.values.is_empty() {
                errs.push(FieldError::required(
                    path.child("values"),
                    "must be specified when `operator` is 'In' or 'NotIn'",
                ));
            }
        }
        "Exists" | "DoesNotExist" => {
            if !e.values.is_empty() {
                errs.push(FieldError::forbidden(
                    path.child("values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                ));
            }
        }
        op => {
            if !opts.allow_unknown_operator {
                errs.push(FieldError::invalid(
                    path.child("operator"),
                    Value::from(op),
                    "not a valid selector operator",
                ));
            }
        }
    }
    for msg in is_qualified_name(e.key) {
        errs.push(FieldError::invalid(
            path.child("key"),
            Value::from(e.key),
            msg,
        ));
    }
    if !opts.allow_invalid_label_value {
        for (i, v) in e.values.iter().enumerate() {
            for msg in is_valid_label_value(v) {
                errs.push(FieldError::invalid(
                    path.child("values").index(i),
                    Value::from(*v),
                    msg,
                ));
            }
        }
    }
    errs
}

/// Validates a `LabelSelector` and converts it: null gives [`Selector::nothing`], `{}` gives
/// [`Selector::everything`]. Every validation error is returned, at its path under `path`.
pub fn label_selector_from_json(selector: &Value, path: &Path) -> Result<Selector, ErrorList> {
    if selector.is_null() {
        return Ok(Selector::nothing());
    }
    let mut errs = validate_label_selector(selector, LabelSelectorOptions::default(), path);
    if !errs.is_empty() {
        return Err(errs);
    }
    let mut reqs = Vec::new();
    if let Some(m) = selector.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            let v = v.as_str().unwrap_or_default().to_string();
            match Requirement::new(k, Operator::Equals, vec![v], &path.child("matchLabels")) {
                Ok(r) => reqs.push(r),
                Err(e) => errs.extend(e),
            }
        }
    }
    let exprs_path = path.child("matchExpressions");
    if let Some(exprs) = selector.get("matchExpressions").and_then(Value::as_array) {
        for (i, expr) in exprs.iter().enumerate() {
            let p = exprs_path.index(i);
            let Some(e) = read_expr(expr, &p, &mut errs) else {
                continue;
            };
            let op = match e.operator {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                _ => Operator::DoesNotExist,
            };
            let values = e.values.iter().map(|v| v.to_string()).collect();
            match Requirement::new(e.key, op, values, &p) {
                Ok(r) => reqs.push(r),
                Err(e) => errs.extend(e),
            }
        }
    }
    if errs.is_empty() {
        Ok(Selector::everything().with_requirements(reqs))
    } else {
        Err(errs)
    }
}
