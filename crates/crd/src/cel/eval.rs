//! Evaluation of CRD rules over an object (upstream `cel.Validator`).
//!
//! The walk visits every node that has rules, binding `self` to the node's value and, for
//! transition rules, `oldSelf` to the correlated old value (fields by name, items of map
//! lists by key). A transition rule is skipped when there is no old value unless it sets
//! `optionalOldSelf`, in which case `oldSelf` is an `optional`. A failing rule reports
//! `message`, the evaluated `messageExpression`, or `failed rule: <rule>`, at the node's path
//! plus `fieldPath`, with the error type its `reason` asks for.
//!
//! Ratcheting: a rule without `oldSelf` that fails on a node whose value equals its
//! correlated old value only warns.
//!
//! Cost: before a rule runs, its cost over the actual values is bounded ([`super::cost`]);
//! a rule over upstream's per-call limit is an error of that rule and is not run, and once
//! the request's budget is spent no further rule runs (upstream's words for both). An
//! expensive evaluation goes through the registered [`cost::Runner`] (the API server's moves
//! the async worker's other tasks to another thread while it computes).

use apimachinery::field::{ErrorKind, ErrorList, FieldError, Path};
use cel::common::types::CelOptional;
use cel::common::value::Val;
use cel::{Context, ExecutionError, Value as Cel};
use serde_json::Value;

use super::cost;
use super::library::ENV;
use super::rule::Rule;
use super::value::to_cel;
use crate::fieldpath;
use crate::gofmt;
use crate::schema::{Additional, Node};
use crate::values::correlate;

/// Upstream `MaxEvaluatedMessageExpressionSizeBytes`.
const MAX_MESSAGE_EXPRESSION_BYTES: usize = 5 * 1024;

/// What rule evaluation found: errors, and the errors ratcheting turned into warnings.
#[derive(Debug, Default)]
pub struct Outcome {
    pub errors: ErrorList,
    pub warnings: Vec<String>,
}

/// Evaluates every rule of `node` (a resource root) over `obj`, with `old` on update.
pub fn validate(node: &Node, obj: &Value, old: Option<&Value>) -> Outcome {
    validate_at(node, obj, old, &Path::default(), true, true)
}

/// [`validate`] with paths under `root`, ratcheting on or off, and whether `obj` is a
/// resource (its `metadata` restricted to names).
pub fn validate_at(
    node: &Node,
    obj: &Value,
    old: Option<&Value>,
    root: &Path,
    ratchet: bool,
    resource: bool,
) -> Outcome {
    let mut out = Outcome::default();
    if node.has_rules() {
        let walker = Walker {
            ratchet,
            budget: std::cell::Cell::new(cost::RUNTIME_BUDGET),
            exhausted: std::cell::Cell::new(false),
            deadline: std::time::Instant::now() + DEADLINE,
        };
        walker.walk(node, obj, old, root, resource, &mut out);
    }
    out
}

struct Walker {
    ratchet: bool,
    /// What the request's rules may still cost.
    budget: std::cell::Cell<u64>,
    /// Set once the budget is spent: no rule runs after that.
    exhausted: std::cell::Cell<bool>,
    /// A backstop to the cost budget: no rule starts after this.
    deadline: std::time::Instant,
}

/// How long the rules of one object may run, whatever their estimated cost (the budget
/// bounds them well below this; the deadline holds if an estimate is ever wrong).
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

fn shown(path: &Path) -> String {
    if path.as_str().is_empty() {
        "<nil>".into()
    } else {
        path.as_str().to_string()
    }
}

impl Walker {
    fn walk(
        &self,
        node: &Node,
        v: &Value,
        old: Option<&Value>,
        path: &Path,
        resource: bool,
        out: &mut Outcome,
    ) {
        if v.is_null() || self.exhausted.get() {
            return;
        }
        if !node.rules.is_empty() {
            self.rules(node, v, old, path, resource, out);
        }
        match v {
            Value::Object(m) => {
                let old_map = old.and_then(Value::as_object);
                if let Additional::Schema(values) = &node.additional
                    && values.has_rules()
                {
                    for (k, child) in m {
                        let o = old_map.and_then(|o| o.get(k));
                        self.walk(values, child, o, &path.key(k), values.embedded, out);
                    }
                }
                for (k, child) in m {
                    if let Some(p) = node.properties.get(k)
                        && p.has_rules()
                    {
                        let o = old_map.and_then(|o| o.get(k));
                        self.walk(p, child, o, &path.child(k), p.embedded, out);
                    }
                }
            }
            Value::Array(items) => {
                let Some(item) = node.items.as_deref().filter(|i| i.has_rules()) else {
                    return;
                };
                let old_items = old.and_then(Value::as_array);
                for (i, child) in items.iter().enumerate() {
                    let o = match (node.list_type.as_deref(), old_items) {
                        (Some("map"), Some(olds)) => correlate(&node.list_map_keys, olds, child),
                        _ => None,
                    };
                    self.walk(item, child, o, &path.index(i), item.embedded, out);
                }
            }
            _ => {}
        }
    }
}

/// cel-go's wording of the common evaluation errors.
fn error_text(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::NoSuchOverload(_) => "no such overload".into(),
        ExecutionError::DivisionByZero(_) => "division by zero".into(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
        ExecutionError::IndexOutOfBounds(i) => format!("index out of range: {i:?}"),
        ExecutionError::UndeclaredReference(r) => format!("no such attribute: {r}"),
        other => other.to_string(),
    }
}

impl Walker {
    fn rules(
        &self,
        node: &Node,
        v: &Value,
        old: Option<&Value>,
        path: &Path,
        resource: bool,
        out: &mut Outcome,
    ) {
        let type_name = Value::from(node.type_name.as_str());
        let self_value = to_cel(v, Some(node), resource);
        let transition = node.rules.iter().any(|r| r.uses_old_self);
        let old_value = old
            .filter(|_| transition)
            .map(|o| to_cel(o, Some(node), resource));
        let unchanged = self.ratchet && old.is_some_and(|o| o == v);
        for rule in &node.rules {
            let program = match &rule.program {
                Ok(p) => p,
                Err(e) => {
                    out.errors.push(FieldError::invalid(
                        shown(path),
                        type_name.clone(),
                        format!("rule compile error: {e}"),
                    ));
                    continue;
                }
            };
            let optional = rule.optional_old_self.unwrap_or(false);
            if rule.uses_old_self && old_value.is_none() && !optional {
                continue;
            }
            if self.exhausted.get() {
                return;
            }
            let mut vars = vec![("self", cost::Shape::Values(vec![v]))];
            if let Some(o) = old {
                vars.push(("oldSelf", cost::Shape::Values(vec![o])));
            }
            let mut estimated = cost::estimate(program.expression(), vars.clone());
            if let Some(Ok(m)) = &rule.message_program {
                estimated = estimated.saturating_add(cost::estimate(m.expression(), vars));
            }
            if estimated > cost::PER_CALL_LIMIT {
                out.errors.push(FieldError::invalid(
                    shown(path),
                    type_name.clone(),
                    format!(
                        "operation cancelled: actual cost limit exceeded evaluating rule: {}",
                        rule.error_string()
                    ),
                ));
                continue;
            }
            if estimated > self.budget.get() || std::time::Instant::now() > self.deadline {
                self.exhausted.set(true);
                out.errors.push(FieldError::invalid(
                    shown(path),
                    type_name.clone(),
                    "validation failed due to running out of cost budget, no further validation rules will be run",
                ));
                return;
            }
            self.budget.set(self.budget.get() - estimated);
            let mut ctx = Context::with_env(ENV.clone());
            bind(&mut ctx, "self", self_value.clone());
            if rule.uses_old_self {
                if optional {
                    let inner = old_value
                        .clone()
                        .and_then(|o| Box::<dyn Val>::try_from(o).ok());
                    let opt = match inner {
                        Some(b) => CelOptional::of(b),
                        None => CelOptional::none(),
                    };
                    ctx.add_variable_as_val("oldSelf", Box::new(opt));
                } else if let Some(o) = &old_value {
                    bind(&mut ctx, "oldSelf", o.clone());
                }
            }
            let result = cost::run_costly(estimated, || program.execute(&ctx));
            let failed = match result {
                Ok(Cel::Bool(true)) => false,
                Ok(Cel::Bool(false)) => true,
                Ok(other) => {
                    out.errors.push(FieldError::invalid(
                        shown(path),
                        type_name.clone(),
                        format!(
                            "rule returned {other:?}, not a bool, evaluating rule: {}",
                            rule.error_string()
                        ),
                    ));
                    continue;
                }
                Err(e @ ExecutionError::NoSuchOverload(_)) => {
                    out.errors.push(FieldError::invalid(
                    shown(path),
                    type_name.clone(),
                    format!(
                        "'{}': call arguments did not match a supported operator, function or macro signature for rule: {}",
                        error_text(&e),
                        rule.error_string()
                    ),
                ));
                    continue;
                }
                Err(e) => {
                    out.errors.push(FieldError::invalid(
                        shown(path),
                        type_name.clone(),
                        format!(
                            "{} evaluating rule: {}",
                            error_text(&e),
                            rule.error_string()
                        ),
                    ));
                    continue;
                }
            };
            if !failed {
                continue;
            }
            let mut at = path.clone();
            if !rule.field_path.is_empty()
                && let Ok((p, _)) = fieldpath::resolve(&rule.field_path, node, true)
            {
                at = if at.as_str().is_empty() {
                    p
                } else {
                    at.child(p.as_str())
                };
            }
            let detail = message(rule, &ctx).unwrap_or_else(|| rule.message_or_default());
            let value = match v {
                Value::Object(_) | Value::Array(_) => None,
                other => Some(gofmt::bad_value(other)),
            };
            let e = error_for_reason(rule.reason.as_deref(), shown(&at), value, detail);
            if !rule.uses_old_self && unchanged {
                out.warnings.push(e.message());
            } else {
                out.errors.push(e);
            }
        }
    }
}

fn bind(ctx: &mut Context<'_, '_>, name: &str, value: Cel) {
    if let Ok(b) = Box::<dyn Val>::try_from(value) {
        ctx.add_variable_as_val(name, b);
    }
}

/// The evaluated `messageExpression`, when it yields a usable message.
fn message(rule: &Rule, ctx: &Context<'_, '_>) -> Option<String> {
    let program = rule.message_program.as_ref()?.as_ref().ok()?;
    match program.execute(ctx) {
        Ok(Cel::String(s)) => {
            let s = s.trim();
            (!s.is_empty() && s.len() <= MAX_MESSAGE_EXPRESSION_BYTES && !s.contains('\n'))
                .then(|| s.to_string())
        }
        _ => None,
    }
}

/// Upstream `fieldErrorForReason`.
fn error_for_reason(
    reason: Option<&str>,
    path: String,
    value: Option<Value>,
    detail: String,
) -> FieldError {
    match reason {
        Some("FieldValueForbidden") => FieldError::forbidden(path, detail),
        Some("FieldValueRequired") => FieldError::required(path, detail),
        Some("FieldValueDuplicate") => FieldError {
            kind: ErrorKind::Duplicate,
            field: path,
            value,
            detail: String::new(),
        },
        _ => FieldError {
            kind: ErrorKind::Invalid,
            field: path,
            value,
            detail,
        },
    }
}
