//! One compiled `x-kubernetes-validations` entry.

use cel::Program;
use cel::common::ast::{EntryExpr, Expr, IdedEntryExpr, IdedExpr};
use serde_json::Value;

/// A rule with its compiled programs.
#[derive(Debug)]
pub struct Rule {
    /// `rule` as written.
    pub rule: String,
    /// `message` as written (may be empty).
    pub message: String,
    /// `messageExpression` as written (may be empty).
    pub message_expression: String,
    /// `fieldPath` as written (may be empty).
    pub field_path: String,
    /// `reason` (`FieldValueInvalid`, `FieldValueForbidden`, ...), if set.
    pub reason: Option<String>,
    /// `optionalOldSelf`, if set.
    pub optional_old_self: Option<bool>,
    /// The compiled rule, or the compile error as upstream words it.
    pub program: Result<Program, String>,
    /// The compiled `messageExpression`, if any.
    pub message_program: Option<Result<Program, String>>,
    /// Whether the rule refers to `oldSelf` (a transition rule).
    pub uses_old_self: bool,
    /// The JSON of the rule, for error values.
    pub json: Value,
}

/// Variables a rule may refer to.
const VARIABLES: &[&str] = &["self", "oldSelf"];
/// Names that are not variables: type names and function namespaces.
const NOT_VARIABLES: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
    "optional",
    "lists",
    "strings",
    "math",
];

/// The identifiers `e` uses that no comprehension binds, with the node ids where they occur.
fn free_variables(e: &IdedExpr, bound: &mut Vec<String>, out: &mut Vec<(String, u64)>) {
    match &e.expr {
        Expr::Ident(name) => {
            if !bound.iter().any(|b| b == name) && !out.iter().any(|(n, _)| n == name) {
                out.push((name.clone(), e.id));
            }
        }
        Expr::Select(s) => free_variables(&s.operand, bound, out),
        Expr::Call(c) => {
            if let Some(t) = &c.target {
                free_variables(t, bound, out);
            }
            for a in &c.args {
                free_variables(a, bound, out);
            }
        }
        Expr::Comprehension(c) => {
            free_variables(&c.iter_range, bound, out);
            free_variables(&c.accu_init, bound, out);
            let before = bound.len();
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.clone());
            bound.push(c.accu_var.clone());
            free_variables(&c.loop_cond, bound, out);
            free_variables(&c.loop_step, bound, out);
            free_variables(&c.result, bound, out);
            bound.truncate(before);
        }
        Expr::List(l) => l
            .elements
            .iter()
            .for_each(|x| free_variables(x, bound, out)),
        Expr::Map(m) => m.entries.iter().for_each(|x| entry(x, bound, out)),
        Expr::Struct(s) => s.entries.iter().for_each(|x| entry(x, bound, out)),
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn entry(e: &IdedEntryExpr, bound: &mut Vec<String>, out: &mut Vec<(String, u64)>) {
    match &e.expr {
        EntryExpr::StructField(f) => free_variables(&f.value, bound, out),
        EntryExpr::MapEntry(m) => {
            free_variables(&m.key, bound, out);
            free_variables(&m.value, bound, out);
        }
    }
}

/// The variables a program refers to.
fn variables(p: &Program) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    free_variables(p.expression(), &mut Vec::new(), &mut out);
    out
}

fn compile(source: &str, prefix: &str) -> Result<Program, String> {
    let program = super::compile(source).map_err(|e| format!("{prefix}compilation failed: {e}"))?;
    if let Some((unknown, id)) = variables(&program)
        .into_iter()
        .find(|(v, _)| !VARIABLES.contains(&v.as_str()) && !NOT_VARIABLES.contains(&v.as_str()))
    {
        let start = program
            .source_info()
            .offset_for(id)
            .map(|(s, _)| s as usize)
            .unwrap_or(0);
        let before = source.get(..start).unwrap_or_default();
        let line = before.matches('\n').count() + 1;
        let col = before
            .rsplit('\n')
            .next()
            .unwrap_or_default()
            .chars()
            .count()
            + 1;
        return Err(format!(
            "{prefix}compilation failed: ERROR: <input>:{line}:{col}: undeclared reference to '{unknown}' (in container '')"
        ));
    }
    Ok(program)
}

impl Rule {
    /// Compiles one entry of `x-kubernetes-validations`.
    pub fn compile(v: &Value) -> Rule {
        let s = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let rule = s("rule");
        let message_expression = s("messageExpression");
        let program = compile(&rule, "");
        let uses_old_self = program
            .as_ref()
            .is_ok_and(|p| variables(p).iter().any(|(v, _)| v == "oldSelf"));
        Rule {
            message: s("message"),
            field_path: s("fieldPath"),
            reason: v.get("reason").and_then(Value::as_str).map(str::to_string),
            optional_old_self: v.get("optionalOldSelf").and_then(Value::as_bool),
            message_program: (!message_expression.trim().is_empty())
                .then(|| compile(&message_expression, "messageExpression ")),
            message_expression,
            program,
            uses_old_self,
            rule,
            json: v.clone(),
        }
    }

    /// `message` trimmed, or `failed rule: <rule>` (upstream `ruleMessageOrDefault`).
    pub fn message_or_default(&self) -> String {
        if self.message.is_empty() {
            format!("failed rule: {}", self.error_string())
        } else {
            self.message.trim().to_string()
        }
    }

    /// The message, else the rule, trimmed (upstream `ruleErrorString`).
    pub fn error_string(&self) -> String {
        if self.message.is_empty() {
            self.rule.trim().to_string()
        } else {
            self.message.trim().to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_transition_rule_is_recognised() {
        let r = Rule::compile(&json!({"rule": "self == oldSelf", "message": "immutable"}));
        assert!(r.program.is_ok() && r.uses_old_self);
        assert_eq!(r.message_or_default(), "immutable");
        let r = Rule::compile(&json!({"rule": "self.a > 0"}));
        assert!(!r.uses_old_self);
        assert_eq!(r.message_or_default(), "failed rule: self.a > 0");
    }

    #[test]
    fn an_unknown_variable_is_a_compile_error() {
        let r = Rule::compile(&json!({"rule": "self.all(x, x > limit)"}));
        assert_eq!(
            r.program.unwrap_err(),
            "compilation failed: ERROR: <input>:1:17: undeclared reference to 'limit' (in container '')"
        );
        let ok = Rule::compile(&json!({"rule": "self.all(x, self.exists(y, y == x))"}));
        assert!(ok.program.is_ok(), "comprehension variables are declared");
    }

    #[test]
    fn a_syntax_error_is_a_compile_error_in_cel_go_format() {
        let r = Rule::compile(&json!({"rule": "self.a >"}));
        let err = r.program.unwrap_err();
        assert!(
            err.starts_with("compilation failed: ERROR: <input>:1:"),
            "{err}"
        );
    }
}
