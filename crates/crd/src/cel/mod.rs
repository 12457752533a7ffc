//! CEL validation rules (`x-kubernetes-validations`) of custom resources.
//!
//! Rules are compiled once per CRD version with the `cel` crate (a CEL interpreter: parsing,
//! macros and evaluation, but no type checker) in an environment with the standard library,
//! cel-go's strings and lists extensions and the Kubernetes list functions this crate adds
//! ([`library`]). `self` is the value of the schema node the rule is on; `oldSelf` its
//! correlated old value on update (an `optional` when `optionalOldSelf` is set).
//!
//! - [`rule`]: one compiled rule and its checks at CRD validation time;
//! - [`value`]: how a JSON value becomes a CEL value (field-name escaping, numbers, the
//!   restricted `metadata` of a resource root);
//! - [`eval`]: evaluation over an object, with upstream's messages, `fieldPath`, `reason`,
//!   transition rules and ratcheting;
//! - [`limits`]: size and nesting bounds checked before an expression is parsed;
//! - [`cost`]: the cost model, estimated over the schema when a CRD is written and over the
//!   values before each evaluation.

pub mod cost;
pub mod eval;
pub mod library;
pub mod limits;
pub mod rule;
pub mod value;

pub use eval::validate;
pub use rule::Rule;

/// Compiles an expression in the shared environment after checking it against
/// [`limits`]: the only way this project parses CEL.
pub fn compile(source: &str) -> Result<cel::Program, String> {
    limits::check(source)?;
    library::ENV
        .compile(source)
        .map_err(|e| describe(&e, source))
}

/// cel-go's rendering of parse errors: `ERROR: <input>:line:col: message`, the source line and
/// a caret. (The `cel` crate's own `Display` panics on an error without a column, which the
/// fuzz suite found; this one never does.)
fn describe(errors: &cel::ParseErrors, source: &str) -> String {
    let mut out = Vec::new();
    for e in &errors.errors {
        let (line, col) = e.pos;
        let mut s = format!("ERROR: <input>:{line}:{col}: {}", e.msg);
        if line >= 1
            && col >= 0
            && let Some(text) = usize::try_from(line - 1)
                .ok()
                .and_then(|l| source.lines().nth(l))
        {
            let col = usize::try_from(col).unwrap_or(0).min(text.len() + 1);
            s.push_str(&format!(
                "\n| {text}\n| {}^",
                ".".repeat(col.saturating_sub(1))
            ));
        }
        out.push(s);
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    /// Regression (found by the fuzz suite): an error at column -1 on a line the source has
    /// (the parser's recursion limit reports one) panicked the `cel` crate's formatter.
    #[test]
    fn an_error_at_column_minus_one_is_described_without_panicking() {
        let source = "1 +\n".repeat(100);
        let errors = cel::ParseErrors {
            errors: vec![cel::ParseError {
                source: None,
                pos: (96, -1),
                msg: "Recursion limit of 96 exceeded".into(),
                expr_id: 0,
                source_info: None,
            }],
        };
        assert_eq!(
            super::describe(&errors, &source),
            "ERROR: <input>:96:-1: Recursion limit of 96 exceeded"
        );
    }

    #[test]
    fn a_parse_error_without_a_column_is_described_without_panicking() {
        for src in [
            "self.a >",
            "((",
            "1 +",
            "a.b(",
            "'unterminated",
            "\u{0}",
            "{1:2,",
        ] {
            let e = super::compile(src).expect_err("a syntax error");
            assert!(e.starts_with("ERROR: <input>:"), "{src}: {e}");
        }
    }
}
