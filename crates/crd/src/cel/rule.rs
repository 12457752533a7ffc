//! One compiled `x-kubernetes-validations` entry.

use cel::Program;
use serde_json::Value;

use super::library::ENV;

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

fn compile(source: &str) -> Result<Program, String> {
    ENV.compile(source)
        .map_err(|e| format!("compilation failed: {e}"))
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
        let program = compile(&rule);
        let uses_old_self = program
            .as_ref()
            .is_ok_and(|p| p.references().has_variable("oldSelf"));
        Rule {
            message: s("message"),
            field_path: s("fieldPath"),
            reason: v.get("reason").and_then(Value::as_str).map(str::to_string),
            optional_old_self: v.get("optionalOldSelf").and_then(Value::as_bool),
            message_program: (!message_expression.trim().is_empty())
                .then(|| compile(&message_expression)),
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
    fn a_syntax_error_is_a_compile_error_in_cel_go_format() {
        let r = Rule::compile(&json!({"rule": "self.a >"}));
        let err = r.program.unwrap_err();
        assert!(
            err.starts_with("compilation failed: ERROR: <input>:1:"),
            "{err}"
        );
    }
}
