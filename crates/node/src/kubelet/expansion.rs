//! `$(VAR)` expansion, upstream's `expansion.Expand`: a reference to a defined variable is
//! replaced by its value, an undefined one stays as written, `$$` is a literal `$`, and a
//! `$` before anything else stays. Used for a container's command and arguments (and by the
//! environment for its own values).

/// Expands `input` with `lookup`.
pub fn expand(input: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let b = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut i = 0;
    let mut literal_start = 0;
    while i < b.len() {
        if b[i] == b'$' && i + 1 < b.len() {
            out.push_str(&input[literal_start..i]);
            match b[i + 1] {
                b'$' => {
                    out.push('$');
                    i += 2;
                }
                b'(' => match input[i + 2..].find(')') {
                    Some(end) => {
                        let name = &input[i + 2..i + 2 + end];
                        match lookup(name) {
                            Some(v) => out.push_str(&v),
                            None => out.push_str(&input[i..i + 3 + end]),
                        }
                        i += 3 + end;
                    }
                    None => {
                        out.push_str(&input[i..]);
                        i = b.len();
                    }
                },
                _ => {
                    out.push('$');
                    i += 1;
                }
            }
            literal_start = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&input[literal_start.min(input.len())..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_expand_and_escapes_and_unknowns_stay() {
        let env = |k: &str| (k == "A").then(|| "x".to_string());
        assert_eq!(expand("echo $(A)", &env), "echo x");
        assert_eq!(expand("$(B) and $(A)", &env), "$(B) and x");
        assert_eq!(expand("$$(A)", &env), "$(A)");
        assert_eq!(expand("cost $5", &env), "cost $5");
        assert_eq!(expand("open $(A", &env), "open $(A");
        assert_eq!(expand("end$", &env), "end$");
    }
}
