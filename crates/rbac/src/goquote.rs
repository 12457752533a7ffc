//! Go's `%q` verb, for messages that must read byte-for-byte like upstream's.
//!
//! Upstream RBAC messages format names with `%q` (a double-quoted Go string literal) and string
//! lists with `%q` too, which prints `["a" "b"]` — space separated, unlike JSON. Clients and users
//! grep for these messages, so the quoting is reproduced here rather than approximated with
//! Rust's `{:?}` (which escapes differently).

/// `strconv.Quote`: `"`-delimited, with `\"`, `\\`, the C escapes and `\x`/`\u`/`\U` for other
/// non-printable characters. Printable Unicode is kept as is.
pub(crate) fn quote(s: &str) -> String {
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
            c if c.is_control() => {
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

/// `%q` of a `[]string`: `["a" "b"]`, and `[]` when empty.
pub(crate) fn quote_list<S: AsRef<str>>(items: &[S]) -> String {
    let inner: Vec<String> = items.iter().map(|s| quote(s.as_ref())).collect();
    format!("[{}]", inner.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_escapes_like_strconv_quote() {
        assert_eq!(quote("alice"), r#""alice""#);
        assert_eq!(quote(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(quote("a\nb\t\u{1}"), r#""a\nb\t\x01""#);
        assert_eq!(quote("ünï"), "\"ünï\"");
        assert_eq!(quote("\u{85}"), r#""\u0085""#);
    }

    #[test]
    fn string_lists_are_space_separated() {
        assert_eq!(quote_list(&["a", "b"]), r#"["a" "b"]"#);
        assert_eq!(quote_list::<&str>(&[]), "[]");
    }
}
