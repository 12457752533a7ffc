//! Go's formatting of the values in upstream's CRD error messages: the shared
//! `apimachinery::gofmt` forms, and the bad value a field error shows.

use serde_json::Value;

pub use apimachinery::gofmt::{float, quote, sprint};

/// A bad value for a field error: integral floats become integers, as Go's `%v` prints them.
pub fn bad_value(v: &Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(0.0);
            if f.fract() == 0.0 && f.abs() < 9.0e15 {
                Value::from(f as i64)
            } else {
                v.clone()
            }
        }
        _ => v.clone(),
    }
}
