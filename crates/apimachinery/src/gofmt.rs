//! Go's text forms of the values that appear in upstream messages and printed output: `%q` of a
//! string (`strconv.Quote`) and of a `[]string`, `%v` of a float64 (`1e+06`, `0.5`),
//! `fmt.Sprint` of a decoded JSON value, and `encoding/json`'s compact form (sorted keys,
//! HTML-safe escaping, floats in `'f'` form up to `1e21`).
//!
//! Clients and tests compare upstream's messages byte for byte, and Rust's `{:?}` and
//! `Display` differ from Go in exactly the cases that show (`\x7f` vs `\u{7f}`, `1e6` vs
//! `1e+06`), so every crate that writes a Go-formatted value uses this one module.

use serde_json::{Number, Value};

/// `strconv.Quote`: `"`-delimited, with `\"`, `\\`, the C escapes, `\x` for other ASCII
/// controls and `\u`/`\U` for characters Go does not print (controls, format characters,
/// separators other than the ASCII space, private use). Printable Unicode is kept as is.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if !is_print(c) => {
                let n = c as u32;
                if n <= 0xffff {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `strconv.IsPrint` for the characters that matter in names and messages: controls
/// (Cc), format characters (Cf), separators other than the ASCII space (Zs, Zl, Zp) and
/// private-use characters are not printable. (Unassigned code points, which Go also escapes,
/// are printed as they are: telling them apart needs the whole Unicode table.)
fn is_print(c: char) -> bool {
    let n = c as u32;
    !(c.is_control()
        || matches!(n,
            0x00a0 | 0x00ad | 0x0600..=0x0605 | 0x061c | 0x06dd | 0x070f | 0x08e2 | 0x1680
            | 0x180e | 0x2000..=0x200f | 0x2028..=0x202f | 0x205f..=0x2064 | 0x2066..=0x206f
            | 0x3000 | 0xfeff | 0xfff9..=0xfffb | 0x110bd | 0x110cd | 0x1bca0..=0x1bca3
            | 0x1d173..=0x1d17a | 0xe0001 | 0xe0020..=0xe007f
            | 0xe000..=0xf8ff | 0xf0000..=0xffffd | 0x100000..=0x10fffd))
}

/// `%q` of a `[]string`: `["a" "b"]`, and `[]` when empty.
pub fn quote_list<S: AsRef<str>>(items: &[S]) -> String {
    let inner: Vec<String> = items.iter().map(|s| quote(s.as_ref())).collect();
    format!("[{}]", inner.join(" "))
}

/// Go's `%v` of a `float64` (`strconv.FormatFloat(f, 'g', -1, 64)`): the shortest digits, in
/// exponent form below 1e-4 and from 1e6 on (`1e+06`: with the shortest digits `'g'` decides
/// with precision 6).
pub fn float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
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

/// `encoding/json`'s form of a `float64`: plain decimal, exponent form below 1e-6 or from
/// 1e21 on, with `e-07` shortened to `e-7`.
pub fn float_json(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let (digits, exp) = shortest_digits(f);
    if !(1e-6..1e21).contains(&f.abs()) {
        let s = exponent_form(f, &digits, exp);
        if let Some((head, tail)) = s.split_once("e-0") {
            return format!("{head}e-{tail}");
        }
        s
    } else {
        fixed_form(f, &digits, exp)
    }
}

/// A JSON number as Go prints the `int64` or `float64` the unstructured decoder makes of it.
pub fn number(n: &Number) -> String {
    match n.as_i64() {
        Some(i) => i.to_string(),
        None => float(n.as_f64().unwrap_or(0.0)),
    }
}

/// `fmt.Sprint` of a value decoded from JSON: strings raw, numbers as Go prints `int64` and
/// `float64`, `<nil>`, objects and arrays in Go's `map[k:v]`/`[a b]` notation.
pub fn sprint(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(sprint).collect();
            format!("[{}]", parts.join(" "))
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", sprint(&m[k])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// `encoding/json.Marshal` of a decoded value, compact: sorted keys, HTML-safe strings,
/// integers that fit `int64` as integers and other numbers as `float64`.
pub fn marshal(v: &Value) -> String {
    let mut out = String::new();
    marshal_into(v, &mut out);
    out
}

fn marshal_into(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match n.as_i64() {
            Some(i) => out.push_str(&i.to_string()),
            None => out.push_str(&float_json(n.as_f64().unwrap_or(0.0))),
        },
        Value::String(s) => json_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                marshal_into(item, out);
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
                json_string(out, k);
                out.push(':');
                marshal_into(&m[k], out);
            }
            out.push('}');
        }
    }
}

/// Appends a JSON string with Go's escaping (HTML-safe: `<`, `>`, `&`, U+2028 and U+2029
/// escaped).
pub fn json_string(out: &mut String, s: &str) {
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
    // Rust's `{:e}` gives the shortest round-tripping digits, as Go's shortest formatting does.
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quote_escapes_like_strconv_quote() {
        assert_eq!(quote("alice"), r#""alice""#);
        assert_eq!(quote(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(quote("a\nb\t\u{1}\u{7f}"), r#""a\nb\t\x01\x7f""#);
        assert_eq!(quote("ünï ☃"), "\"ünï ☃\"");
        assert_eq!(quote("\u{85}"), r#""\u0085""#);
        assert_eq!(quote("a\u{a0}b\u{200b}"), r#""a\u00a0b\u200b""#);
        assert_eq!(quote("\u{feff}\u{f0000}"), r#""\ufeff\U000f0000""#);
    }

    #[test]
    fn string_lists_are_space_separated() {
        assert_eq!(quote_list(&["a", "b"]), r#"["a" "b"]"#);
        assert_eq!(quote_list::<&str>(&[]), "[]");
    }

    #[test]
    fn floats_print_like_go_percent_v() {
        let cases: &[(f64, &str)] = &[
            (1.0, "1"),
            (10.0, "10"),
            (0.5, "0.5"),
            (-2.25, "-2.25"),
            (123456.0, "123456"),
            (100000.0, "100000"),
            (1234567.0, "1.234567e+06"),
            (123456789.0, "1.23456789e+08"),
            (1e6, "1e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e21, "1e+21"),
            (1e100, "1e+100"),
            (-0.0, "-0"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Inf"),
        ];
        for (f, want) in cases {
            assert_eq!(float(*f), *want, "{f}");
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
            assert_eq!(float_json(*f), *want, "{f}");
        }
    }

    #[test]
    fn compound_values_marshal_with_sorted_keys_and_html_escaping() {
        let v = json!({"b": [1, 2.5, true, null], "a": "<x & y>", "c": {"z": "\n"}});
        assert_eq!(
            marshal(&v),
            r#"{"a":"\u003cx \u0026 y\u003e","b":[1,2.5,true,null],"c":{"z":"\n"}}"#
        );
    }

    #[test]
    fn sprint_prints_go_values() {
        assert_eq!(sprint(&json!("a")), "a");
        assert_eq!(sprint(&json!(3)), "3");
        assert_eq!(sprint(&json!(2.5)), "2.5");
        assert_eq!(sprint(&json!(true)), "true");
        assert_eq!(sprint(&Value::Null), "<nil>");
        assert_eq!(sprint(&json!(["a", 1])), "[a 1]");
        assert_eq!(sprint(&json!({"b": 1, "a": "x"})), "map[a:x b:1]");
        assert_eq!(sprint(&json!(u64::MAX)), "1.8446744073709552e+19");
    }
}
