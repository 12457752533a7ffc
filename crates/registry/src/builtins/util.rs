//! Helpers shared by the built-in strategies: reading JSON fields without trusting their types,
//! filling defaults, and the small field checks upstream repeats everywhere (non-negative
//! integers, names, ports, int-or-percent values, enumerations, immutability).
//!
//! Objects reach strategies as client-sent JSON: every reader here treats a missing, `null` or
//! wrongly typed field as absent, so nothing a client sends can panic.

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::validation as names;
use serde_json::{Map, Value, json};

use super::gofmt;

/// A JSON object.
pub(crate) type Obj = Map<String, Value>;

/// Upstream `IsNegativeErrorMsg`.
pub(crate) const NEGATIVE: &str = "must be greater than or equal to 0";
/// Upstream `FieldImmutableErrorMsg`.
pub(crate) const IMMUTABLE: &str = "field is immutable";

/// The value at a JSON pointer; `null` counts as absent.
pub(crate) fn at<'a>(v: &'a Value, ptr: &str) -> Option<&'a Value> {
    v.pointer(ptr).filter(|x| !x.is_null())
}

/// The string at a JSON pointer, `""` when absent or not a string.
pub(crate) fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// The integer at a JSON pointer.
pub(crate) fn i64_at(v: &Value, ptr: &str) -> Option<i64> {
    v.pointer(ptr).and_then(Value::as_i64)
}

/// The array at a JSON pointer, empty when absent or not an array.
pub(crate) fn arr_at<'a>(v: &'a Value, ptr: &str) -> &'a [Value] {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The object at a JSON pointer.
pub(crate) fn obj_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a Obj> {
    v.pointer(ptr).and_then(Value::as_object)
}

/// `v[key]` as an object, created when missing or null; `None` when `v` is not an object or
/// the field holds something else (validation reports it, defaulting leaves it alone).
pub(crate) fn child<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    let map = v.as_object_mut()?;
    let slot = map.entry(key).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.is_object().then_some(slot)
}

/// Each element of the array `v[key]`, if it is one.
pub(crate) fn each_mut(v: &mut Value, key: &str, mut f: impl FnMut(&mut Value)) {
    if let Some(items) = v.get_mut(key).and_then(Value::as_array_mut) {
        items.iter_mut().for_each(&mut f);
    }
}

/// Sets `v[key]` when it is missing or null.
pub(crate) fn default_value(v: &mut Value, key: &str, value: Value) {
    if let Some(map) = v.as_object_mut() {
        let slot = map.entry(key).or_insert(Value::Null);
        if slot.is_null() {
            *slot = value;
        }
    }
}

/// Sets `v[key]` when it is missing, null or the empty string (Go's zero value).
pub(crate) fn default_str(v: &mut Value, key: &str, value: &str) {
    if let Some(map) = v.as_object_mut() {
        let slot = map.entry(key).or_insert(Value::Null);
        if slot.is_null() || slot.as_str() == Some("") {
            *slot = json!(value);
        }
    }
}

/// Sets `v[key]` when it is missing, null or zero (Go's zero value of a plain integer).
pub(crate) fn default_int(v: &mut Value, key: &str, value: i64) {
    if let Some(map) = v.as_object_mut() {
        let slot = map.entry(key).or_insert(Value::Null);
        if slot.is_null() || slot.as_i64() == Some(0) {
            *slot = json!(value);
        }
    }
}

/// Whether a map-valued field is absent or empty (Go's `len(m) == 0`).
pub(crate) fn empty_map(v: Option<&Value>) -> bool {
    v.and_then(Value::as_object).is_none_or(Map::is_empty)
}

/// Upstream `ValidateNonnegativeField` for an optional integer.
pub(crate) fn nonnegative(errs: &mut ErrorList, path: &Path, value: Option<i64>) {
    if let Some(n) = value
        && n < 0
    {
        errs.push(FieldError::invalid(path, json!(n), NEGATIVE));
    }
}

/// Upstream `ValidateDNS1123Label`.
pub(crate) fn dns_label(errs: &mut ErrorList, path: &Path, value: &str) {
    for msg in names::is_dns1123_label(value) {
        errs.push(FieldError::invalid(path, json!(value), msg));
    }
}

/// Upstream `ValidateDNS1123Subdomain`.
pub(crate) fn dns_subdomain(errs: &mut ErrorList, path: &Path, value: &str) {
    for msg in names::is_dns1123_subdomain(value) {
        errs.push(FieldError::invalid(path, json!(value), msg));
    }
}

/// Upstream `ValidateQualifiedName`.
pub(crate) fn qualified_name(errs: &mut ErrorList, path: &Path, value: &str) {
    for msg in names::is_qualified_name(value) {
        errs.push(FieldError::invalid(path, json!(value), msg));
    }
}

/// Upstream `InclusiveRangeError`.
pub(crate) fn range_error(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

/// Upstream `IsValidPortNum`.
pub(crate) fn port_num_errors(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec![range_error(1, 65535)]
    }
}

/// Upstream `IsValidPortName` (IANA service names).
pub(crate) fn port_name_errors(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(names::max_len_error(15));
    }
    if port.is_empty()
        || !port
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !port.bytes().any(|b| b.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

/// Upstream `ValidatePortNumOrName` for an int-or-string port.
pub(crate) fn port_num_or_name(errs: &mut ErrorList, path: &Path, port: Option<&Value>) {
    match port {
        Some(Value::String(s)) => {
            for msg in port_name_errors(s) {
                errs.push(FieldError::invalid(path, json!(s), msg));
            }
        }
        Some(v) => {
            let n = v.as_i64().unwrap_or(0);
            for msg in port_num_errors(n) {
                errs.push(FieldError::invalid(path, json!(n), msg));
            }
        }
        None => {
            for msg in port_num_errors(0) {
                errs.push(FieldError::invalid(path, json!(0), msg));
            }
        }
    }
}

/// Upstream `IsValidPercent`.
fn percent_errors(s: &str) -> Vec<String> {
    let digits = s.strip_suffix('%').unwrap_or("");
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        Vec::new()
    } else {
        vec![names::regex_error(
            "a valid percent string must be a numeric string followed by an ending '%'",
            "[0-9]+%",
            &["1%", "93%"],
        )]
    }
}

/// The percentage of a valid percent string.
fn percent_value(v: &Value) -> Option<i64> {
    let s = v.as_str()?;
    if !percent_errors(s).is_empty() {
        return None;
    }
    s.trim_end_matches('%').parse().ok()
}

/// Upstream `getIntOrPercentValue`: the percentage or the integer (0 for anything else).
pub(crate) fn int_or_percent_value(v: Option<&Value>) -> i64 {
    match v {
        Some(v) => percent_value(v).or_else(|| v.as_i64()).unwrap_or(0),
        None => 0,
    }
}

/// Upstream `ValidatePositiveIntOrPercent`.
pub(crate) fn int_or_percent(errs: &mut ErrorList, path: &Path, v: Option<&Value>) {
    let Some(v) = v else { return };
    match v {
        Value::String(s) => {
            for msg in percent_errors(s) {
                errs.push(gofmt::invalid(path, gofmt::int_or_string(v), &msg));
            }
        }
        Value::Number(n) => {
            if let Some(i) = n.as_i64()
                && i < 0
            {
                errs.push(FieldError::invalid(path, json!(i), NEGATIVE));
            }
        }
        _ => errs.push(gofmt::invalid(
            path,
            gofmt::int_or_string(v),
            "must be an integer or percentage (e.g '5%%')",
        )),
    }
}

/// Upstream `IsNotMoreThan100Percent`.
pub(crate) fn not_more_than_100_percent(errs: &mut ErrorList, path: &Path, v: Option<&Value>) {
    if let Some(v) = v
        && percent_value(v).is_some_and(|p| p > 100)
    {
        errs.push(gofmt::invalid(
            path,
            gofmt::int_or_string(v),
            "must not be greater than 100%",
        ));
    }
}

/// A value from a fixed set (upstream's `Required` when empty, `NotSupported` otherwise).
pub(crate) fn one_of(errs: &mut ErrorList, path: &Path, value: &str, supported: &[&str]) {
    if value.is_empty() {
        errs.push(FieldError::required(path, ""));
    } else if !supported.contains(&value) {
        errs.push(FieldError::not_supported(path, json!(value), supported));
    }
}

/// Upstream `ValidateImmutableField` for a value rendered by `render` (strings and numbers
/// print as themselves).
pub(crate) fn immutable(
    errs: &mut ErrorList,
    path: &Path,
    new: Option<&Value>,
    old: Option<&Value>,
    render: impl Fn(Option<&Value>) -> String,
) {
    if new != old {
        errs.push(match new {
            Some(v @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => {
                FieldError::invalid(path, v.clone(), IMMUTABLE)
            }
            _ => gofmt::invalid(path, render(new), IMMUTABLE),
        });
    }
}

/// Validates a labels map (`metadata.labels`, `spec.selector` of a Service).
pub(crate) fn labels(errs: &mut ErrorList, path: &Path, v: Option<&Value>) {
    if let Some(m) = v.and_then(Value::as_object) {
        errs.extend(apimachinery::labels::validate_labels(m, path));
    }
}

/// Validates an annotations map.
pub(crate) fn annotations(errs: &mut ErrorList, path: &Path, v: Option<&Value>) {
    if let Some(m) = v.and_then(Value::as_object) {
        errs.extend(apimachinery::objectmeta::validate_annotations(m, path));
    }
}

/// A selectable field's value: strings as they are, numbers and booleans printed, `""` when
/// absent (upstream's field sets hold Go zero values).
pub(crate) fn field_string(obj: &Value, ptr: &str) -> String {
    match obj.pointer(ptr) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn defaults_fill_only_missing_or_zero_fields() {
        let mut v = json!({"a": "", "b": "x", "c": 0, "d": null});
        default_str(&mut v, "a", "A");
        default_str(&mut v, "b", "B");
        default_int(&mut v, "c", 3);
        default_value(&mut v, "d", json!(1));
        default_value(&mut v, "e", json!(2));
        assert_eq!(v, json!({"a": "A", "b": "x", "c": 3, "d": 1, "e": 2}));
    }

    #[test]
    fn child_leaves_wrongly_typed_fields_alone() {
        let mut v = json!({"spec": "oops"});
        assert!(child(&mut v, "spec").is_none());
        assert_eq!(v, json!({"spec": "oops"}));
        let mut v = json!({});
        assert!(child(&mut v, "spec").is_some());
        assert_eq!(v, json!({"spec": {}}));
    }

    #[test]
    fn port_names_follow_iana_rules() {
        assert!(port_name_errors("http").is_empty());
        assert_eq!(
            port_name_errors("a--b"),
            vec!["must not contain consecutive hyphens".to_string()]
        );
        assert_eq!(
            port_name_errors("123"),
            vec!["must contain at least one letter (a-z)".to_string()]
        );
    }

    #[test]
    fn int_or_percent_rejects_bad_percentages_with_upstream_wording() {
        let mut errs = ErrorList::new();
        int_or_percent(&mut errs, &Path::new("x"), Some(&json!("5")));
        not_more_than_100_percent(&mut errs, &Path::new("y"), Some(&json!("150%")));
        int_or_percent(&mut errs, &Path::new("z"), Some(&json!(-1)));
        assert_eq!(
            messages(&errs),
            vec![
                "x: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"5\"}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                "y: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%",
                "z: Invalid value: -1: must be greater than or equal to 0",
            ]
        );
        assert_eq!(int_or_percent_value(Some(&json!("25%"))), 25);
        assert_eq!(int_or_percent_value(Some(&json!(3))), 3);
    }

    #[test]
    fn immutable_fields_report_scalars_plainly() {
        let mut errs = ErrorList::new();
        immutable(
            &mut errs,
            &Path::new("type"),
            Some(&json!("Opaque")),
            Some(&json!("kubernetes.io/tls")),
            |_| String::new(),
        );
        assert_eq!(
            messages(&errs),
            vec!["type: Invalid value: \"Opaque\": field is immutable"]
        );
    }
}
