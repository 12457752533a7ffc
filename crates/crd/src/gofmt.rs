//! Go's formatting of the values that appear in upstream error messages: `%v` of a float64
//! (`10`, `1.5`, `1e+06`), `%q` of a string, `%v` of a slice (`[S M]`), `fmt.Sprint` of a JSON
//! value. Messages are compared byte for byte by clients and tests, so the few cases upstream
//! prints are reproduced here rather than approximated by Rust's `Display`.

use serde_json::Value;

/// Go `strconv.FormatFloat(f, 'g', -1, 64)`, which is what `%v` prints for a float64.
pub fn float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-tripping digits, as Go's shortest formatting does.
    let sci = format!("{f:e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return sci;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    // %v is %g with the shortest precision, which switches to the exponent form below 1e-4
    // and from 1e6 up (`1e+06`).
    if !(-4..6).contains(&exp) {
        let mut m = digits[..1].to_string();
        if digits.len() > 1 {
            m.push('.');
            m.push_str(&digits[1..]);
        }
        let sign = if exp < 0 { '-' } else { '+' };
        return format!(
            "{}{m}e{sign}{:02}",
            if negative { "-" } else { "" },
            exp.abs()
        );
    }
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            out.push_str(&digits);
            for _ in digits.len()..int_len {
                out.push('0');
            }
        } else {
            out.push_str(&digits[..int_len]);
            out.push('.');
            out.push_str(&digits[int_len..]);
        }
    }
    out
}

/// Go `%q` of a string.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go `fmt.Sprint` of a value decoded from JSON: strings raw, numbers as Go prints int64 and
/// float64, objects and arrays in Go's `map[...]`/`[...]` notation.
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
            let parts: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}:{}", sprint(v)))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// A JSON number as Go prints the int64 or float64 it decodes to.
pub fn number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else {
        float(n.as_f64().unwrap_or(0.0))
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_print_like_go_percent_v() {
        assert_eq!(float(10.0), "10");
        assert_eq!(float(1.5), "1.5");
        assert_eq!(float(0.0001), "0.0001");
        assert_eq!(float(0.00001), "1e-05");
        assert_eq!(float(123456789.0), "1.23456789e+08");
        assert_eq!(float(1e21), "1e+21");
        assert_eq!(float(100000.0), "100000");
        assert_eq!(float(1e6), "1e+06");
        assert_eq!(float(-2.25), "-2.25");
    }

    #[test]
    fn sprint_prints_go_values() {
        assert_eq!(sprint(&json!("a")), "a");
        assert_eq!(sprint(&json!(3)), "3");
        assert_eq!(sprint(&json!(true)), "true");
        assert_eq!(sprint(&json!(["a", 1])), "[a 1]");
    }

    #[test]
    fn quote_escapes_like_go() {
        assert_eq!(quote("a\"b\n"), "\"a\\\"b\\n\"");
    }
}
