//! Go's text renderings of JSON values, as the custom-resource printer produces them.
//!
//! A `string` printer column prints what client-go's JSONPath prints: scalars through
//! `fmt.Fprint` (floats in `%v` form: `1e+06`, `0.5`), objects and lists through
//! `encoding/json` (sorted keys, `<>&` escaped, floats in `'f'` form up to `1e21`). Numbers
//! follow the unstructured decoder: integers that fit `int64` stay integers, everything else
//! is a `float64`.

use apimachinery::gofmt;
use serde_json::{Number, Value};

/// `fmt.Fprint` of a decoded JSON value; objects and lists as compact Go JSON; `null` as
/// `<no value>` (what the template printer says for a nil interface).
pub(crate) fn print(v: &Value) -> String {
    match v {
        Value::Null => "<no value>".to_string(),
        Value::Array(_) | Value::Object(_) => gofmt::marshal(v),
        other => gofmt::sprint(other),
    }
}

/// A number as the unstructured decoder holds it: `Some(i64)` for integers, else a float.
pub(crate) fn number_kind(n: &Number) -> Result<i64, f64> {
    n.as_i64().ok_or_else(|| n.as_f64().unwrap_or(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compound_values_marshal_with_sorted_keys_and_html_escaping() {
        let v = json!({"b": [1, 2.5, true, null], "a": "<x & y>", "c": {"z": "\n"}});
        assert_eq!(
            print(&v),
            r#"{"a":"\u003cx \u0026 y\u003e","b":[1,2.5,true,null],"c":{"z":"\n"}}"#
        );
    }

    #[test]
    fn scalars_print_as_fmt_fprint_does() {
        assert_eq!(print(&json!("text")), "text");
        assert_eq!(print(&json!(42)), "42");
        assert_eq!(print(&json!(2.0)), "2");
        assert_eq!(print(&json!(false)), "false");
        assert_eq!(print(&Value::Null), "<no value>");
        assert_eq!(print(&json!(u64::MAX)), "1.8446744073709552e+19");
    }
}
