//! Go's text renderings of JSON values, as the custom-resource printer produces them.
//!
//! A `string` printer column prints what client-go's JSONPath prints: scalars through
//! `fmt.Fprint` (floats in `%v` form: `1e+06`, `0.5`), objects and lists through
//! `encoding/json` (sorted keys, `<>&` escaped, floats in `'f'` form up to `1e21`). Numbers
//! follow the unstructured decoder: integers that fit `int64` stay integers, everything else
//! is a `float64`.

use serde_json::{Number, Value};

/// `fmt.Fprint` of a decoded JSON value; objects and lists as compact Go JSON; `null` as
/// `<no value>` (what the template printer says for a nil interface).
pub(crate) fn print(v: &Value) -> String {
    match v {
        Value::Null => "<no value>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => format_float_v(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => s.clone(),
        Value::Array(_) | Value::Object(_) => {
            let mut out = String::new();
            marshal(v, &mut out);
            out
        }
    }
}

/// A number as the unstructured decoder holds it: `Some(i64)` for integers, else a float.
pub(crate) fn number_kind(n: &Number) -> Result<i64, f64> {
    n.as_i64().ok_or_else(|| n.as_f64().unwrap_or(0.0))
}

/// `encoding/json.Marshal` of a decoded value, compact.
fn marshal(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match number_kind(n) {
            Ok(i) => out.push_str(&i.to_string()),
            Err(f) => out.push_str(&format_float_json(f)),
        },
        Value::String(s) => quote(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                marshal(item, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                quote(k, out);
                out.push(':');
                marshal(&m[k], out);
            }
            out.push('}');
        }
    }
}

/// A JSON string with Go's escaping (HTML-safe: `<`, `>`, `&`, U+2028 and U+2029 escaped).
fn quote(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}') => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Shortest round-trip decimal digits of `f` and its decimal exponent (`d.ddd × 10^exp`).
fn shortest_digits(f: f64) -> (String, i32) {
    let e = format!("{:e}", f.abs());
    let (mantissa, exp) = e.split_once('e').unwrap_or((e.as_str(), "0"));
    (mantissa.replace('.', ""), exp.parse().unwrap_or(0))
}

/// `strconv.FormatFloat(f, 'e', -1, 64)`: `1.5e+06`, `1e-07`.
fn exponent_form(f: f64, digits: &str, exp: i32) -> String {
    let sign = if f.is_sign_negative() { "-" } else { "" };
    let (first, rest) = digits.split_at(1);
    let frac = if rest.is_empty() {
        String::new()
    } else {
        format!(".{rest}")
    };
    let esign = if exp < 0 { '-' } else { '+' };
    format!("{sign}{first}{frac}e{esign}{:02}", exp.abs())
}

/// `strconv.FormatFloat(f, 'f', -1, 64)`: plain decimal with the shortest digits.
fn fixed_form(f: f64, digits: &str, exp: i32) -> String {
    let sign = if f.is_sign_negative() { "-" } else { "" };
    let point = exp + 1;
    let body = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        let (int, frac) = digits.split_at(point as usize);
        format!("{int}.{frac}")
    };
    format!("{sign}{body}")
}

/// Go's `%v` for a `float64`: `'g'` with the shortest digits, which switches to exponent form
/// below 1e-4 and from 1e6 on (`strconv` decides with precision 6 when digits are shortest).
pub(crate) fn format_float_v(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let (digits, exp) = shortest_digits(f);
    if !(-4..6).contains(&exp) {
        exponent_form(f, &digits, exp)
    } else {
        fixed_form(f, &digits, exp)
    }
}

/// `encoding/json`'s float form: plain decimal, exponent form below 1e-6 or from 1e21 on,
/// with `e-07` shortened to `e-7`.
fn format_float_json(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let (digits, exp) = shortest_digits(f);
    let abs = f.abs();
    if !(1e-6..1e21).contains(&abs) {
        let s = exponent_form(f, &digits, exp);
        if let Some((head, tail)) = s.split_once("e-0") {
            return format!("{head}e-{tail}");
        }
        s
    } else {
        fixed_form(f, &digits, exp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_print_like_go_percent_v() {
        let cases: &[(f64, &str)] = &[
            (1.0, "1"),
            (0.5, "0.5"),
            (-2.25, "-2.25"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (1e6, "1e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e21, "1e+21"),
            (1e100, "1e+100"),
        ];
        for (f, want) in cases {
            assert_eq!(format_float_v(*f), *want, "{f}");
        }
    }

    #[test]
    fn floats_marshal_like_go_json() {
        let cases: &[(f64, &str)] = &[
            (1.5, "1.5"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (0.000001, "0.000001"),
            (0.0000001, "1e-7"),
            (-1.5e-10, "-1.5e-10"),
        ];
        for (f, want) in cases {
            assert_eq!(format_float_json(*f), *want, "{f}");
        }
    }

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
