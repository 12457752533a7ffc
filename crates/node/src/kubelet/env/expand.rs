//! `$(VAR)` expansion, as the kubelet applies it to env values, commands, args and
//! `subPathExpr` (upstream's fork of Go's `os.Expand`, `third_party/forked/golang/expansion`).
//!
//! Rules: `$(NAME)` is replaced by what the mapping returns for `NAME`; `$$` is an escaped `$`;
//! any other `$x` and an unterminated `$(` stay as written. The mapping decides what an
//! unknown name becomes: for env values it is the reference itself, so unresolved references
//! stay literal.

/// Expands every `$(NAME)` in `input` through `mapping`.
pub fn expand(input: &str, mut mapping: impl FnMut(&str) -> String) -> String {
    let bytes = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    // Start of the input not yet copied to `out`.
    let mut checkpoint = 0;
    let mut cursor = 0;
    while cursor < bytes.len() {
        if bytes[cursor] == b'$' && cursor + 1 < bytes.len() {
            out.push_str(&input[checkpoint..cursor]);
            let rest = &input[cursor + 1..];
            let advance = match rest.as_bytes()[0] {
                // `$$`: an escaped operator.
                b'$' => {
                    out.push('$');
                    1
                }
                b'(' => match rest.find(')') {
                    Some(close) => {
                        out.push_str(&mapping(&rest[1..close]));
                        close + 1
                    }
                    // An incomplete reference: keep `$(` and go on after it.
                    None => {
                        out.push_str("$(");
                        1
                    }
                },
                // Not a reference: keep the `$`; the next character is copied from the input.
                _ => {
                    out.push('$');
                    0
                }
            };
            cursor += advance;
            checkpoint = cursor + 1;
        }
        cursor += 1;
    }
    out.push_str(&input[checkpoint.min(input.len())..]);
    out
}

/// One source of variable values.
pub type Context<'a> = &'a dyn Fn(&str) -> Option<String>;

/// A mapping over several contexts, first match wins; unknown names stay as `$(NAME)`
/// (upstream `MappingFuncFor`).
pub fn lookup_in<'a>(contexts: &'a [Context<'a>]) -> impl FnMut(&str) -> String + 'a {
    move |name| {
        contexts
            .iter()
            .find_map(|c| c(name))
            .unwrap_or_else(|| format!("$({name})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Upstream's table (`expand_test.go`), against one context and split over two.
    fn cases() -> Vec<(&'static str, &'static str)> {
        vec![
            ("$(VAR_A)", "A"),
            ("$(VAR_A)-$(VAR_A)", "A-A"),
            ("$(VAR_A)-1", "A-1"),
            ("___$(VAR_B)___", "___B___"),
            ("___$(VAR_C)", "___C"),
            ("$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"),
            ("$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"),
            ("$$(VAR_A)_$$(VAR_B)", "$(VAR_A)_$(VAR_B)"),
            ("f000-$$VAR_A", "f000-$VAR_A"),
            ("foo\\$(VAR_C)bar", "foo\\Cbar"),
            ("foo\\\\$(VAR_C)bar", "foo\\\\Cbar"),
            ("foo\\\\\\\\$(VAR_A)bar", "foo\\\\\\\\Abar"),
            ("$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))"),
            ("$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"),
            ("$(VAR_REF)", "$(VAR_A)"),
            ("%%$(VAR_REF)--$(VAR_REF)%%", "%%$(VAR_A)--$(VAR_A)%%"),
            ("foo$(VAR_EMPTY)bar", "foobar"),
            ("foo$(VAR_Awhoops!", "foo$(VAR_Awhoops!"),
            ("f00__(VAR_A)__", "f00__(VAR_A)__"),
            ("$?_boo_$!", "$?_boo_$!"),
            ("$VAR_A", "$VAR_A"),
            ("$(VAR_DNE)", "$(VAR_DNE)"),
            ("$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"),
            ("$$$$$$(VAR_A)", "$$$(VAR_A)"),
            ("$$$$$$$(GOOD_ODDS)", "$$$$(GOOD_ODDS)"),
            ("$$$$$$$(VAR_A)", "$$$A"),
            ("$VAR_A)", "$VAR_A)"),
            ("${VAR_A}", "${VAR_A}"),
            ("$(VAR_B)_______$(A", "B_______$(A"),
            ("$(VAR_C)_______$(", "C_______$("),
            ("$(VAR_A)foobarzab$", "Afoobarzab$"),
            ("foo-\\$(VAR_A", "foo-\\$(VAR_A"),
            ("--$($($($($--", "--$($($($($--"),
            ("$($($($($--foo$(", "$($($($($--foo$("),
            ("foo0--$($($($(", "foo0--$($($($("),
            ("$(foo$$var)", "$(foo$$var)"),
            ("\n", "\n"),
            ("é$é$(VAR_A)ü", "é$éAü"),
        ]
    }

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_upstream_expansion_case_holds_for_one_context() {
        let ctx = map(&[
            ("VAR_A", "A"),
            ("VAR_B", "B"),
            ("VAR_C", "C"),
            ("VAR_REF", "$(VAR_A)"),
            ("VAR_EMPTY", ""),
        ]);
        let get = |n: &str| ctx.get(n).cloned();
        for (input, want) in cases() {
            assert_eq!(expand(input, lookup_in(&[&get])), want, "input {input:?}");
        }
    }

    #[test]
    fn every_upstream_expansion_case_holds_for_two_contexts() {
        let first = map(&[("VAR_A", "A"), ("VAR_EMPTY", "")]);
        let second = map(&[("VAR_B", "B"), ("VAR_C", "C"), ("VAR_REF", "$(VAR_A)")]);
        let a = |n: &str| first.get(n).cloned();
        let b = |n: &str| second.get(n).cloned();
        for (input, want) in cases() {
            assert_eq!(expand(input, lookup_in(&[&a, &b])), want, "input {input:?}");
        }
    }

    #[test]
    fn a_reference_resolves_against_variables_defined_before_it() {
        let mut declared: HashMap<String, String> = HashMap::new();
        for (name, value) in [("FOO", "bar"), ("ZOO", "$(FOO)-1"), ("BLU", "$(ZOO)-2")] {
            let v = {
                let get = |n: &str| declared.get(n).cloned();
                expand(value, lookup_in(&[&get]))
            };
            declared.insert(name.into(), v);
        }
        assert_eq!(declared["ZOO"], "bar-1");
        assert_eq!(declared["BLU"], "bar-1-2");
    }
}
