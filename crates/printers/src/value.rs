//! Reading fields out of stored JSON objects without trusting their shape.
//!
//! Printers see canonical JSON, not typed structs, and must never panic on an object a client
//! wrote: every accessor here answers with the zero value Go's typed structs would hold when a
//! field is absent or has the wrong type (`""`, `0`, `false`, empty list).

use serde_json::{Map, Value};

/// The value at `path` (object keys only), if every step exists.
pub(crate) fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(v, |cur, key| cur.as_object()?.get(*key))
}

/// A string field, if present and a string.
pub(crate) fn opt_str<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(v, path)?.as_str()
}

/// A string field, `""` when absent.
pub(crate) fn str_or_empty<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    opt_str(v, path).unwrap_or("")
}

/// An integer field, if present; integral floats count (JSON does not distinguish).
pub(crate) fn opt_int(v: &Value, path: &[&str]) -> Option<i64> {
    as_int(at(v, path)?)
}

/// An integer field, `0` when absent.
pub(crate) fn int_or_zero(v: &Value, path: &[&str]) -> i64 {
    opt_int(v, path).unwrap_or(0)
}

/// A JSON number as an integer, if it is one.
pub(crate) fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
                .map(|f| f as i64)
        }),
        _ => None,
    }
}

/// A boolean field, if present and a boolean.
pub(crate) fn opt_bool(v: &Value, path: &[&str]) -> Option<bool> {
    at(v, path)?.as_bool()
}

/// A list field, empty when absent.
pub(crate) fn list<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    at(v, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A map field, if present and an object.
pub(crate) fn map<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Map<String, Value>> {
    at(v, path)?.as_object()
}

/// The number of entries of a map or list field, `0` when absent.
pub(crate) fn len(v: &Value, path: &[&str]) -> usize {
    match at(v, path) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

/// A quantity (`resource.Quantity`) as text: strings as stored, bare numbers in decimal;
/// `None` when absent.
pub(crate) fn opt_quantity(v: &Value, path: &[&str]) -> Option<String> {
    match at(v, path)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// An `IntOrString` as text (`intstr.String()`), `None` when absent.
pub(crate) fn opt_int_or_string(v: &Value, path: &[&str]) -> Option<String> {
    match at(v, path)? {
        Value::String(s) => Some(s.clone()),
        n @ Value::Number(_) => as_int(n).map(|i| i.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accessors_fall_back_to_go_zero_values() {
        let v = json!({"spec": {"replicas": 3.0, "name": 7, "list": "x", "flag": true}});
        assert_eq!(int_or_zero(&v, &["spec", "replicas"]), 3);
        assert_eq!(int_or_zero(&v, &["spec", "missing"]), 0);
        assert_eq!(str_or_empty(&v, &["spec", "name"]), "");
        assert!(list(&v, &["spec", "list"]).is_empty());
        assert_eq!(opt_bool(&v, &["spec", "flag"]), Some(true));
        assert_eq!(len(&v, &["spec"]), 4);
        assert!(at(&v, &["spec", "replicas", "deeper"]).is_none());
    }

    #[test]
    fn quantities_and_int_or_strings_print_as_text() {
        let v = json!({"q": "10Gi", "n": 5, "pct": "50%"});
        assert_eq!(opt_quantity(&v, &["q"]).as_deref(), Some("10Gi"));
        assert_eq!(opt_quantity(&v, &["n"]).as_deref(), Some("5"));
        assert_eq!(opt_int_or_string(&v, &["pct"]).as_deref(), Some("50%"));
        assert_eq!(opt_int_or_string(&v, &["n"]).as_deref(), Some("5"));
        assert_eq!(opt_int_or_string(&v, &["none"]), None);
    }
}
