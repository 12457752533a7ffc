//! Value helpers shared by the patch and apply engines: upstream's total order and equality
//! on JSON values, and the Go-style renderings that appear in upstream messages and in
//! `FieldsV1` keys.
//!
//! Upstream compares numbers numerically (an integer equals the same float), orders values
//! float/int < string < bool < list < map < null, and writes JSON the way Go's
//! `encoding/json` does (`<`, `>` and `&` escaped). Managed-field keys and conflict paths must
//! match byte for byte, so these rules live in one place.

use std::cmp::Ordering;

use serde_json::Value;

fn rank(v: &Value) -> u8 {
    match v {
        Value::Number(_) => 0,
        Value::String(_) => 1,
        Value::Bool(_) => 2,
        Value::Array(_) => 3,
        Value::Object(_) => 4,
        Value::Null => 5,
    }
}

fn num_cmp(a: &serde_json::Number, b: &serde_json::Number) -> Ordering {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        return x.cmp(&y);
    }
    if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
        return x.cmp(&y);
    }
    let x = a.as_f64().unwrap_or(f64::NAN);
    let y = b.as_f64().unwrap_or(f64::NAN);
    x.partial_cmp(&y).unwrap_or(Ordering::Equal)
}

/// Upstream's total order on values (`value.Compare`).
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    let (ra, rb) = (rank(a), rank(b));
    if ra != rb {
        return ra.cmp(&rb);
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => num_cmp(x, y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (l, r) in x.iter().zip(y.iter()) {
                let c = compare_values(l, r);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            // Both maps iterate in sorted key order.
            for ((lk, lv), (rk, rv)) in x.iter().zip(y.iter()) {
                let c = lk.cmp(rk).then_with(|| compare_values(lv, rv));
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => Ordering::Equal,
    }
}

/// Deep equality with numbers compared by value (`1 == 1.0`).
pub fn values_equal(a: &Value, b: &Value) -> bool {
    compare_values(a, b) == Ordering::Equal
}

/// Upstream's `value.ToString`, used when printing a path (`[name="c"]`, `[=80]`).
pub fn to_path_string(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::String(s) => crate::gofmt::quote(s),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(to_path_string).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={}", to_path_string(v)))
            .collect::<Vec<_>>()
            .join(""),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn integers_and_floats_compare_by_value() {
        assert!(values_equal(&json!(1), &json!(1.0)));
        assert_eq!(compare_values(&json!(2), &json!("a")), Ordering::Less);
        assert_eq!(compare_values(&json!(null), &json!({})), Ordering::Greater);
    }
}
