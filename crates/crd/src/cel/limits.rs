//! Bounds on a CEL expression checked before it is parsed, as cel-go's parser enforces them:
//! a maximum size in code points and a maximum nesting.
//!
//! The `cel` crate parses and evaluates by recursion. Its parser limits how deeply rules nest
//! (parentheses, ternaries), but left-recursive chains — `1 + 1 + … + 1`, `a.b.c.…`,
//! `l[0][0]…` — are parsed in a loop into an expression tree as deep as the chain, which its
//! evaluator (and every walk over the tree, and dropping it) then recurses through: 10,000
//! terms overflow a thread's stack and abort the process. [`check`] computes an upper bound of
//! the tree's depth from the tokens alone, without recursion, and refuses the expression
//! before the parser sees it when the bound exceeds [`MAX_DEPTH`] (cel-go's default maximum
//! recursion depth). `&&` and `||` chains are parsed into balanced trees and so add only the
//! logarithm of their length.

/// cel-go's default `ExpressionSizeCodePointLimit`.
pub const MAX_CODE_POINTS: usize = 100_000;

/// cel-go's default maximum recursion depth of the parser.
pub const MAX_DEPTH: usize = 250;

/// Levels an expression tree may gain from one bracketed group beyond the operators counted
/// in it: the group itself, and the comprehension a macro call (`all`, `exists`, `map`, ...)
/// expands into (the comprehension, its step, its condition).
const GROUP_LEVELS: usize = 4;

/// Refuses an expression too large or too deeply nested to parse and evaluate safely, in
/// cel-go's words.
pub fn check(source: &str) -> Result<(), String> {
    let size = source.chars().count();
    if size > MAX_CODE_POINTS {
        return Err(format!(
            "ERROR: <input>:-1:0: expression code point size exceeds limit: size: {size}, limit {MAX_CODE_POINTS}"
        ));
    }
    if depth_bound(source) > MAX_DEPTH {
        return Err("ERROR: <input>:-1:0: max recursion depth exceeded".into());
    }
    Ok(())
}

/// One bracketed group being scanned.
#[derive(Default)]
struct Group {
    /// Operators in the current segment (between `&&`, `||` and `,`).
    ops: usize,
    /// The deepest group nested in the current segment.
    child: usize,
    /// The deepest segment so far.
    best: usize,
    /// `&&` and `||` seen in this group: their balanced tree adds the logarithm.
    logical: usize,
}

impl Group {
    fn end_segment(&mut self) {
        self.best = self.best.max(self.ops + self.child);
        self.ops = 0;
        self.child = 0;
    }

    fn finish(mut self) -> usize {
        self.end_segment();
        let logical = (usize::BITS - self.logical.leading_zeros()) as usize;
        self.best
            .saturating_add(logical)
            .saturating_add(GROUP_LEVELS)
    }
}

/// An upper bound of the depth of the expression tree `source` parses into.
pub fn depth_bound(source: &str) -> usize {
    let bytes = source.as_bytes();
    let mut stack = vec![Group::default()];
    let mut i = 0;
    // Whether the previous token ends an operand (so `[` is an index and `-` is binary).
    let mut after_operand = false;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' | b'\x0c' => {
                i += 1;
                continue;
            }
            b'"' | b'\'' => {
                i = skip_string(bytes, i);
                after_operand = true;
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            _ => {}
        }
        if c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80 {
            let start = i;
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] >= 0x80)
            {
                i += 1;
            }
            // Raw and byte string prefixes: r"..", b"..", rb"..", br"..".
            let word = &bytes[start..i];
            if i < bytes.len()
                && matches!(bytes[i], b'"' | b'\'')
                && word.len() <= 2
                && word.iter().all(|b| matches!(b, b'r' | b'R' | b'b' | b'B'))
            {
                i = skip_string(bytes, i);
            }
            // A number's fraction or exponent sign (`1.5`, `1e-3`) is part of the literal.
            if word[0].is_ascii_digit() {
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric()
                        || bytes[i] == b'.'
                        || ((bytes[i] == b'-' || bytes[i] == b'+')
                            && matches!(bytes[i - 1], b'e' | b'E')))
                {
                    i += 1;
                }
            }
            after_operand = true;
            continue;
        }
        let two = bytes.get(i..i + 2).unwrap_or_default();
        if two == b"&&" || two == b"||" {
            let g = stack.last_mut().expect("the root group is never popped");
            g.end_segment();
            g.logical += 1;
            i += 2;
            after_operand = false;
            continue;
        }
        if matches!(two, b"==" | b"!=" | b"<=" | b">=" | b"?." | b"[?") {
            stack.last_mut().expect("root").ops += 1;
            if two == b"[?" {
                stack.push(Group::default());
            }
            i += 2;
            after_operand = false;
            continue;
        }
        match c {
            b'(' | b'[' | b'{' => {
                if c == b'[' && after_operand {
                    stack.last_mut().expect("root").ops += 1;
                }
                stack.push(Group::default());
                after_operand = false;
            }
            b')' | b']' | b'}' => {
                if stack.len() > 1 {
                    let g = stack.pop().expect("more than the root");
                    let depth = g.finish();
                    let parent = stack.last_mut().expect("root");
                    parent.child = parent.child.max(depth);
                }
                after_operand = true;
            }
            b',' => {
                stack.last_mut().expect("root").end_segment();
                after_operand = false;
            }
            _ => {
                // Every other symbol is an operator: arithmetic, relations, `.`, `!`, unary
                // `-`, `?` and `:` of a ternary. Each may add a level.
                stack.last_mut().expect("root").ops += 1;
                after_operand = false;
            }
        }
        i += 1;
    }
    // Unclosed groups (a syntax error the parser reports) still count.
    let mut depth = 0;
    while let Some(mut g) = stack.pop() {
        g.child = g.child.max(depth);
        depth = g.finish();
    }
    depth
}

/// The index just past the string literal starting at `i` (single, double or triple quotes;
/// backslash escapes; an unterminated literal runs to the end).
fn skip_string(bytes: &[u8], i: usize) -> usize {
    let q = bytes[i];
    let triple = bytes.get(i..i + 3) == Some(&[q, q, q][..]);
    let mut j = if triple { i + 3 } else { i + 1 };
    while j < bytes.len() {
        if bytes[j] == b'\\' {
            j += 2;
            continue;
        }
        if bytes[j] == q {
            if !triple {
                return j + 1;
            }
            if bytes.get(j..j + 3) == Some(&[q, q, q][..]) {
                return j + 3;
            }
        }
        j += 1;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cel::common::ast::{EntryExpr, Expr, IdedExpr};

    fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
        match &e.expr {
            Expr::Call(c) => c.target.iter().map(|t| &**t).chain(&c.args).collect(),
            Expr::Select(s) => vec![&*s.operand],
            Expr::Comprehension(c) => vec![
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ],
            Expr::List(l) => l.elements.iter().collect(),
            Expr::Map(m) => m.entries.iter().flat_map(|en| entry(&en.expr)).collect(),
            Expr::Struct(s) => s.entries.iter().flat_map(|en| entry(&en.expr)).collect(),
            _ => Vec::new(),
        }
    }

    fn entry(e: &EntryExpr) -> Vec<&IdedExpr> {
        match e {
            EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
            EntryExpr::StructField(f) => vec![&f.value],
        }
    }

    /// The depth of a parsed expression tree, walked with an explicit stack.
    fn tree_depth(e: &IdedExpr) -> usize {
        let mut max = 0;
        let mut stack = vec![(e, 1usize)];
        while let Some((e, d)) = stack.pop() {
            max = max.max(d);
            stack.extend(children(e).into_iter().map(|c| (c, d + 1)));
        }
        max
    }

    #[test]
    fn the_bound_is_at_least_the_depth_of_the_parsed_tree() {
        for src in [
            "self.a.b.c == 1",
            "1 + 2 * 3 - 4 / 5 % 6 > 0",
            "self.l[0][1][2] > 0",
            "has(self.a.b) && self.a.b.all(x, x.c.exists(y, y > 0)) || !self.z",
            "self.map(x, x * 2).filter(y, y > 0).size() == 3",
            "a ? b : c ? d : e ? f : g",
            "[1, 2, [3, [4, [5]]]].size() == 3",
            "{'a': {'b': {'c': 1}}}.a.b.c == 1",
            "-(-(-(1))) < 0",
            "'((((' + \"]]]]\" + r'\\' + b'x' + '''a'b''' == ''",
            "self.x.split(',').all(p, p.matches('^[a-z]+$') && p.size() < 10)",
            "self.?a.?b.orValue(1) == 1 && self[?'k'].hasValue()",
            "int(self.a) + uint(2) + double(1.5e-3) > 0.0",
        ] {
            let p = crate::cel::library::ENV
                .compile(src)
                .unwrap_or_else(|e| panic!("{src}: {e}"));
            let depth = tree_depth(p.expression());
            assert!(
                depth_bound(src) >= depth,
                "{src}: bound {} below depth {depth}",
                depth_bound(src)
            );
        }
    }

    #[test]
    fn long_flat_conjunctions_stay_well_under_the_limit() {
        let src = vec!["self.a.b.c == 'x'"; 500].join(" && ");
        assert!(check(&src).is_ok(), "bound {}", depth_bound(&src));
    }

    #[test]
    fn left_recursive_chains_beyond_the_limit_are_refused_before_parsing() {
        for src in [
            vec!["1"; 10_000].join(" + ") + " > 0",
            format!("has(self{})", ".a".repeat(5_000)),
            format!("self.l{} > 0", "[0]".repeat(20_000)),
            format!("{}1{}", "(".repeat(20_000), ")".repeat(20_000)),
            format!("{}true", "!".repeat(20_000)),
            format!("{}1 > 0", "-".repeat(20_000)),
            vec!["true ? 1"; 5_000].join(" : ") + " : 2",
        ] {
            let e = check(&src).expect_err("refused");
            assert!(e.contains("max recursion depth exceeded"), "{e}");
        }
    }

    #[test]
    fn an_expression_over_the_code_point_limit_is_refused_with_its_size() {
        let src = format!("'{}' == ''", "é".repeat(MAX_CODE_POINTS));
        let e = check(&src).expect_err("refused");
        assert!(
            e.contains("expression code point size exceeds limit: size: 100008, limit 100000"),
            "{e}"
        );
    }

    #[test]
    fn the_deepest_accepted_chain_compiles_and_evaluates_on_a_small_stack() {
        // The deepest `+` chain the bound admits, on a thread with tokio's worker stack.
        let mut n = 1;
        while check(&(vec!["1"; n + 1].join(" + ") + " > 0")).is_ok() {
            n += 1;
        }
        let src = vec!["1"; n].join(" + ") + " > 0";
        let ok = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let p = crate::cel::library::ENV.compile(&src).expect("compiles");
                let ctx = cel::Context::with_env(crate::cel::library::ENV.clone());
                p.execute(&ctx).expect("evaluates") == cel::Value::Bool(true)
            })
            .expect("thread")
            .join()
            .expect("no overflow");
        assert!(ok);
    }
}
