//! Checks of the scale subresource's replica fields on every write of a custom resource
//! (upstream `ValidateScaleSpec`/`ValidateScaleStatus`): the replica counts must be
//! non-negative int32 integers when present, the label selector a string. Errors are reported
//! at the JSONPath as written (`.spec.replicas`), as upstream does.

use apimachinery::field::{ErrorList, FieldError};
use registry::ScalePaths;
use serde_json::{Value, json};

use crate::gofmt;

/// Go's `%T` of a value decoded from JSON.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// Upstream `unstructured.NestedFieldNoCopy` plus a type check: the value at a dotted path,
/// `Ok(None)` when absent, or the accessor error.
fn nested<'a>(
    obj: &'a Value,
    json_path: &str,
    want: &str,
    ok: impl Fn(&Value) -> bool,
) -> Result<Option<&'a Value>, String> {
    let fields: Vec<&str> = json_path.trim_start_matches('.').split('.').collect();
    let mut cur = obj;
    for (i, f) in fields.iter().enumerate() {
        let Value::Object(m) = cur else {
            return Err(format!(
                ".{} accessor error: {} is of the type {}, expected map[string]interface{{}}",
                fields[..i].join("."),
                gofmt::sprint(cur),
                go_type(cur)
            ));
        };
        match m.get(*f) {
            Some(v) => cur = v,
            None => return Ok(None),
        }
    }
    if cur.is_null() {
        return Ok(None);
    }
    if ok(cur) {
        Ok(Some(cur))
    } else {
        Err(format!(
            ".{} accessor error: {} is of the type {}, expected {want}",
            fields.join("."),
            gofmt::sprint(cur),
            go_type(cur)
        ))
    }
}

fn replicas(obj: &Value, path: &str, errs: &mut ErrorList) {
    match nested(obj, path, "int64", |v| v.is_i64()) {
        Err(e) => errs.push(FieldError::invalid(path, json!(0), e)),
        Ok(Some(v)) => {
            let n = v.as_i64().unwrap_or(0);
            if n < 0 {
                errs.push(FieldError::invalid(
                    path,
                    json!(n),
                    "should be a non-negative integer",
                ));
            } else if n > i64::from(i32::MAX) {
                errs.push(FieldError::invalid(
                    path,
                    json!(n),
                    format!("should be less than or equal to {}", i32::MAX),
                ));
            }
        }
        Ok(None) => {}
    }
}

/// Checks the replica fields (and the label selector) of `obj`.
pub fn validate(obj: &Value, scale: &ScalePaths) -> ErrorList {
    let mut errs = ErrorList::new();
    replicas(obj, &scale.spec_replicas, &mut errs);
    replicas(obj, &scale.status_replicas, &mut errs);
    if let Some(sel) = &scale.label_selector
        && let Err(e) = nested(obj, sel, "string", Value::is_string)
    {
        errs.push(FieldError::invalid(sel.as_str(), json!(""), e));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> ScalePaths {
        ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: Some(".status.selector".into()),
        }
    }

    #[test]
    fn replica_counts_must_be_non_negative_int32_integers() {
        assert!(
            validate(
                &json!({"spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "a=b"}}),
                &paths()
            )
            .is_empty()
        );
        assert!(
            validate(&json!({}), &paths()).is_empty(),
            "absent fields are zero"
        );
        let msgs: Vec<String> = validate(
            &json!({"spec": {"replicas": -1}, "status": {"replicas": "two", "selector": 5}}),
            &paths(),
        )
        .iter()
        .map(|e| e.message())
        .collect();
        assert_eq!(
            msgs,
            vec![
                ".spec.replicas: Invalid value: -1: should be a non-negative integer",
                ".status.replicas: Invalid value: 0: .status.replicas accessor error: two is of the type string, expected int64",
                ".status.selector: Invalid value: \"\": .status.selector accessor error: 5 is of the type int64, expected string",
            ]
        );
    }
}
