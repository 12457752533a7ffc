//! What a CEL expression may cost, as upstream bounds it.
//!
//! kube-apiserver refuses a CRD whose rules may cost too much (cel-go's static cost estimate
//! from the schema's `maxItems`, `maxProperties` and `maxLength`, times how many nodes a rule
//! can run on), and stops evaluating when a call or a request has used its runtime budget.
//! The `cel` crate has neither, so this module estimates the cost of an expression tree
//! itself, with one model used both ways:
//!
//! - *statically*, over the schema ([`Shape::Schema`]): an unbounded list or string is as
//!   large as the largest request allows (3 MiB over the smallest JSON its items can be),
//!   upstream's assumption; [`estimate`] at CRD validation time;
//! - *concretely*, over the values a request holds ([`Shape::Values`]): the same walk with the
//!   actual sizes gives an upper bound of what evaluating the rule on this object can cost,
//!   checked against the per-call limit and the request's budget *before* the rule runs, so
//!   no evaluation ever exceeds them.
//!
//! The model follows cel-go's: one unit per identifier, selection and call; comprehensions
//! (`all`, `exists`, `map`, `filter`, ...) cost their range's size times their body;
//! membership, list concatenation, equality of lists and strings, and the string functions
//! cost in proportion to their operands' sizes (a tenth of a unit per character, cel-go's
//! traversal factor). It is an upper bound within the model, not cel-go's exact figures.

use serde_json::Value;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::value::escape;
use crate::schema::{Additional, Node};

/// Upstream `celconfig.MaxRequestSizeBytes`: the largest value a rule can see.
pub const MAX_REQUEST_BYTES: u64 = 3 * 1024 * 1024;
/// Upstream `celconfig.PerCallLimit`: what one evaluation of a rule may cost.
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// Upstream `celconfig.RuntimeCELCostBudget`: what all rules of one request may cost.
pub const RUNTIME_BUDGET: u64 = 10_000_000;
/// Upstream `celconfig.StaticEstimatedCostLimit`: a rule's estimated cost times the number
/// of nodes it can run on.
pub const STATIC_RULE_LIMIT: u64 = 10_000_000;
/// Upstream `celconfig.StaticEstimatedCRDCostLimit`: the estimates of all rules of a schema.
pub const STATIC_CRD_LIMIT: u64 = 100_000_000;

/// What a subexpression's value is known to be: a schema node, the JSON values it takes in
/// this request, or only a size.
#[derive(Clone)]
pub enum Shape<'a> {
    Schema(&'a Node),
    Values(Vec<&'a Value>),
    /// The CEL values it takes (variables bound as CEL values).
    Cels(Vec<&'a cel::Value>),
    /// Only its size is known (elements, entries or bytes).
    Sized(u64),
}

fn cel_size(v: &cel::Value) -> u64 {
    match v {
        cel::Value::List(l) => l.len() as u64,
        cel::Value::Map(m) => m.map.len() as u64,
        cel::Value::String(s) => s.len() as u64,
        cel::Value::Bytes(b) => b.len() as u64,
        _ => 1,
    }
}

impl<'a> Shape<'a> {
    /// Nothing is known: as large as a request.
    fn unknown() -> Shape<'a> {
        Shape::Sized(MAX_REQUEST_BYTES)
    }

    /// The largest number of elements, entries or bytes the value can have.
    pub fn size(&self) -> u64 {
        match self {
            Shape::Sized(n) => *n,
            Shape::Values(vs) => vs
                .iter()
                .map(|v| match v {
                    Value::Array(a) => a.len() as u64,
                    Value::Object(m) => m.len() as u64,
                    Value::String(s) => s.len() as u64,
                    _ => 1,
                })
                .max()
                .unwrap_or(0),
            Shape::Cels(vs) => vs.iter().map(|v| cel_size(v)).max().unwrap_or(0),
            Shape::Schema(n) => schema_size(n),
        }
    }

    /// The field `field` (CEL-escaped) of the value.
    fn select(&self, field: &str) -> Shape<'a> {
        match self {
            Shape::Schema(n) => {
                if let Some((_, p)) = n
                    .properties
                    .iter()
                    .find(|(k, _)| escape(k).as_deref() == Some(field))
                {
                    return Shape::Schema(p);
                }
                match &n.additional {
                    Additional::Schema(v) => Shape::Schema(v),
                    _ => Shape::unknown(),
                }
            }
            Shape::Values(vs) => {
                let out: Vec<&Value> = vs
                    .iter()
                    .filter_map(|v| v.as_object())
                    .filter_map(|m| {
                        m.get(field).or_else(|| {
                            m.iter()
                                .find(|(k, _)| escape(k).as_deref() == Some(field))
                                .map(|(_, v)| v)
                        })
                    })
                    .collect();
                Shape::Values(out)
            }
            Shape::Cels(vs) => Shape::Cels(
                vs.iter()
                    .filter_map(|v| match v {
                        cel::Value::Map(m) => m
                            .map
                            .get(&cel::objects::Key::String(field.to_string().into())),
                        _ => None,
                    })
                    .collect(),
            ),
            Shape::Sized(_) => Shape::unknown(),
        }
    }

    /// An element of the list, or a value of the map (what an index gives).
    fn element(&self) -> Shape<'a> {
        match self {
            Shape::Schema(n) => match (&n.items, &n.additional) {
                (Some(i), _) => Shape::Schema(i),
                (None, Additional::Schema(v)) => Shape::Schema(v),
                _ => Shape::unknown(),
            },
            Shape::Values(vs) => Shape::Values(
                vs.iter()
                    .flat_map(|v| -> Box<dyn Iterator<Item = &'a Value> + 'a> {
                        match v {
                            Value::Array(a) => Box::new(a.iter()),
                            Value::Object(m) => Box::new(m.values()),
                            _ => Box::new(std::iter::empty()),
                        }
                    })
                    .collect(),
            ),
            Shape::Cels(vs) => Shape::Cels(
                vs.iter()
                    .flat_map(|v| -> Box<dyn Iterator<Item = &'a cel::Value> + 'a> {
                        match v {
                            cel::Value::List(l) => Box::new(l.iter()),
                            cel::Value::Map(m) => Box::new(m.map.values()),
                            _ => Box::new(std::iter::empty()),
                        }
                    })
                    .collect(),
            ),
            Shape::Sized(_) => Shape::unknown(),
        }
    }

    /// What a comprehension's variable takes: list elements, or map keys.
    fn iterated(&self) -> Shape<'a> {
        match self {
            Shape::Schema(n) if n.items.is_none() => Shape::Sized(
                n.properties
                    .keys()
                    .map(|k| k.len() as u64)
                    .max()
                    .unwrap_or(MAX_REQUEST_BYTES),
            ),
            Shape::Values(vs) if vs.iter().all(|v| v.is_object()) => Shape::Sized(
                vs.iter()
                    .filter_map(|v| v.as_object())
                    .flat_map(|m| m.keys())
                    .map(|k| k.len() as u64)
                    .max()
                    .unwrap_or(0),
            ),
            other => other.element(),
        }
    }
}

/// The smallest JSON a value of a schema of type `ty` can be written as, with a separating
/// comma.
fn min_json_size(ty: &str, min_length: Option<i64>) -> u64 {
    let own = match ty {
        "string" => 2 + min_length.unwrap_or(0).max(0) as u64,
        "boolean" => 4,
        "object" | "array" => 2,
        _ => 1,
    };
    own + 1
}

/// The largest size a schema allows: its `maxItems`, `maxProperties` or `maxLength` (in
/// bytes, up to four per character), or else what fits in a request: upstream's assumption
/// for an unbounded list, map or string.
fn size_of(ty: &str, declared: [Option<i64>; 3], element: Option<(&str, Option<i64>)>) -> u64 {
    let [items, properties, length] = declared;
    let declared = match ty {
        "array" => items,
        "object" => properties,
        "string" => length.map(|l| l.saturating_mul(4)),
        _ => return 1,
    };
    if let Some(d) = declared {
        return d.max(0) as u64;
    }
    match (ty, element) {
        // A map's entry also holds its key: `"":`.
        ("object", Some((t, l))) => MAX_REQUEST_BYTES / (min_json_size(t, l) + 3),
        (_, Some((t, l))) => MAX_REQUEST_BYTES / min_json_size(t, l),
        _ => MAX_REQUEST_BYTES,
    }
}

fn schema_size(n: &Node) -> u64 {
    let element = match (&n.items, &n.additional) {
        (Some(i), _) => Some((i.type_name.as_str(), i.min_length)),
        (None, Additional::Schema(v)) => Some((v.type_name.as_str(), v.min_length)),
        _ => None,
    };
    size_of(
        &n.type_name,
        [n.max_items, n.max_properties, n.max_length],
        element,
    )
}

/// [`Shape::size`] of a schema still in its JSON form (CRD validation walks the JSON).
pub fn json_schema_size(m: &serde_json::Map<String, Value>) -> u64 {
    let int = |m: &serde_json::Map<String, Value>, k: &str| m.get(k).and_then(Value::as_i64);
    let ty = |m: &serde_json::Map<String, Value>| {
        m.get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let element = m
        .get("items")
        .or_else(|| m.get("additionalProperties"))
        .and_then(Value::as_object)
        .map(|e| (ty(e), int(e, "minLength")));
    size_of(
        &ty(m),
        [
            int(m, "maxItems"),
            int(m, "maxProperties"),
            int(m, "maxLength"),
        ],
        element.as_ref().map(|(t, l)| (t.as_str(), *l)),
    )
}

/// Variables in scope with their shapes.
type Scope<'s, 'a> = Vec<(&'s str, Shape<'a>)>;

/// The cost of evaluating `e` with `vars` bound (`self`, `oldSelf`, ...), saturating.
pub fn estimate<'a>(e: &IdedExpr, vars: Vec<(&str, Shape<'a>)>) -> u64 {
    let mut scope: Scope<'_, 'a> = vars;
    walk(e, &mut scope).0
}

fn lookup<'a>(scope: &Scope<'_, 'a>, name: &str) -> Shape<'a> {
    scope
        .iter()
        .rev()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| s.clone())
        .unwrap_or_else(Shape::unknown)
}

/// A tenth of a unit per byte or element, at least one.
fn traversal(n: u64) -> u64 {
    n / 10 + 1
}

/// The cost of `e` and the shape of its value. Recursion is bounded by the expression's depth,
/// which [`super::limits`] caps before parsing.
fn walk<'s, 'a>(e: &'s IdedExpr, scope: &mut Scope<'s, 'a>) -> (u64, Shape<'a>) {
    match &e.expr {
        Expr::Unspecified => (0, Shape::Sized(0)),
        Expr::Literal(l) => (
            0,
            Shape::Sized(match l {
                LiteralValue::String(s) => s.len() as u64,
                LiteralValue::Bytes(b) => b.len() as u64,
                _ => 1,
            }),
        ),
        Expr::Ident(name) => (1, lookup(scope, name)),
        Expr::Select(s) => {
            let (c, shape) = walk(&s.operand, scope);
            (c.saturating_add(1), shape.select(&s.field))
        }
        Expr::List(l) => {
            let mut cost = 10u64;
            for x in &l.elements {
                cost = cost.saturating_add(walk(x, scope).0);
            }
            (cost, Shape::Sized(l.elements.len() as u64))
        }
        Expr::Map(m) => (
            entries(&m.entries, scope).saturating_add(30),
            Shape::Sized(m.entries.len() as u64),
        ),
        Expr::Struct(s) => (
            entries(&s.entries, scope).saturating_add(40),
            Shape::Sized(s.entries.len() as u64),
        ),
        Expr::Comprehension(c) => {
            let (range_cost, range) = walk(&c.iter_range, scope);
            let n = range.size();
            let (init_cost, _) = walk(&c.accu_init, scope);
            let before = scope.len();
            scope.push((c.iter_var.as_str(), range.iterated()));
            if let Some(v2) = &c.iter_var2 {
                scope.push((v2.as_str(), range.element()));
            }
            // The accumulator of `map` and `filter` grows to the range's size.
            scope.push((c.accu_var.as_str(), Shape::Sized(n)));
            let (cond, _) = walk(&c.loop_cond, scope);
            let (step, _) = walk(&c.loop_step, scope);
            let (result_cost, _) = walk(&c.result, scope);
            scope.truncate(before);
            let per_item = cond.saturating_add(step);
            let cost = range_cost
                .saturating_add(init_cost)
                .saturating_add(n.saturating_mul(per_item))
                .saturating_add(result_cost);
            (cost, Shape::Sized(n))
        }
        Expr::Call(call) => {
            let mut cost = 1u64;
            let target = call.target.as_deref().map(|t| {
                let (c, s) = walk(t, scope);
                cost = cost.saturating_add(c);
                s
            });
            let mut args = Vec::with_capacity(call.args.len());
            for a in &call.args {
                let (c, s) = walk(a, scope);
                cost = cost.saturating_add(c);
                args.push(s);
            }
            let size = |s: Option<&Shape<'a>>| s.map(Shape::size).unwrap_or(0);
            let largest = target
                .iter()
                .chain(&args)
                .map(Shape::size)
                .max()
                .unwrap_or(1);
            let name = call.func_name.as_str();
            let (extra, shape) = match name {
                "_[_]" => (
                    0,
                    args.first()
                        .map(Shape::element)
                        .unwrap_or_else(Shape::unknown),
                ),
                "@in" => (size(args.get(1)), Shape::Sized(1)),
                "_+_" => {
                    let total = size(args.first()).saturating_add(size(args.get(1)));
                    (traversal(total), Shape::Sized(total))
                }
                "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" => (
                    traversal(size(args.first()).min(size(args.get(1)))),
                    Shape::Sized(1),
                ),
                "_&&_"
                | "_||_"
                | "_?_:_"
                | "!_"
                | "-_"
                | "_-_"
                | "_*_"
                | "_/_"
                | "_%_"
                | "size"
                | "has"
                | "@not_strictly_false"
                | "int"
                | "uint"
                | "double"
                | "bool"
                | "type"
                | "dyn"
                | "hasValue"
                | "orValue"
                | "value"
                | "optional.of"
                | "optional.none"
                | "optional.ofNonZeroValue" => (0, Shape::Sized(largest)),
                // Lists: linear in the receiver.
                "sum" | "min" | "max" | "isSorted" | "indexOf" | "lastIndexOf" | "distinct"
                | "flatten" | "slice" | "sort" | "reverse" | "join" => {
                    (size(target.as_ref()), Shape::Sized(largest))
                }
                // Strings and anything else: a traversal of the operands; the result is no
                // larger than they are.
                _ => {
                    let all = target
                        .iter()
                        .chain(&args)
                        .fold(0u64, |acc, s| acc.saturating_add(s.size()));
                    (traversal(all), Shape::Sized(largest))
                }
            };
            (cost.saturating_add(extra), shape)
        }
    }
}

fn entries<'s, 'a>(list: &'s [cel::common::ast::IdedEntryExpr], scope: &mut Scope<'s, 'a>) -> u64 {
    let mut cost = 0u64;
    for en in list {
        match &en.expr {
            EntryExpr::MapEntry(m) => {
                cost = cost
                    .saturating_add(walk(&m.key, scope).0)
                    .saturating_add(walk(&m.value, scope).0);
            }
            EntryExpr::StructField(f) => cost = cost.saturating_add(walk(&f.value, scope).0),
        }
    }
    cost
}

/// Evaluations estimated above this many units are handed to the [`Runner`].
pub const BLOCKING_COST: u64 = 20_000;

/// Runs an expensive evaluation where it cannot stall other work: the API server registers
/// one that moves the async worker's other tasks elsewhere while it computes (this crate
/// does no I/O and knows no runtime).
pub type Runner = fn(&mut dyn FnMut());

static RUNNER: std::sync::OnceLock<Runner> = std::sync::OnceLock::new();

/// Sets the [`Runner`] (once per process; later calls change nothing).
pub fn set_runner(r: Runner) {
    let _ = RUNNER.set(r);
}

/// Runs `f`, through the [`Runner`] when `cost` is above [`BLOCKING_COST`].
pub fn run_costly<T>(cost: u64, f: impl FnOnce() -> T) -> T {
    let Some(runner) = RUNNER.get().filter(|_| cost > BLOCKING_COST) else {
        return f();
    };
    let mut f = Some(f);
    let mut out = None;
    runner(&mut || {
        if let Some(f) = f.take() {
            out = Some(f());
        }
    });
    match out {
        Some(v) => v,
        // A runner that did not run the closure: run it here.
        None => f.take().map(|f| f()).expect("the closure runs once"),
    }
}

/// Upstream's words for a cost over its limit: `... exceeds budget by factor of 2.5x (...)`.
pub fn over_budget(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cost_static(schema: Value, rule: &str) -> u64 {
        let node = Node::compile(&schema);
        let p = crate::cel::library::ENV.compile(rule).expect("compiles");
        estimate(p.expression(), vec![("self", Shape::Schema(&node))])
    }

    fn cost_concrete(value: &Value, rule: &str) -> u64 {
        let p = crate::cel::library::ENV.compile(rule).expect("compiles");
        estimate(p.expression(), vec![("self", Shape::Values(vec![value]))])
    }

    fn list_of_ints(max_items: Option<u64>) -> Value {
        let mut s = json!({"type": "object", "properties": {"list": {"type": "array", "items": {"type": "integer"}}}});
        if let Some(m) = max_items {
            s["properties"]["list"]["maxItems"] = json!(m);
        }
        s
    }

    const TRIPLE: &str = "self.list.all(a, self.list.all(b, self.list.all(c, a + b + c >= 0)))";

    #[test]
    fn a_nested_comprehension_over_an_unbounded_list_is_over_the_static_limit() {
        assert!(cost_static(list_of_ints(None), TRIPLE) > STATIC_RULE_LIMIT);
        assert!(cost_static(list_of_ints(Some(100_000)), TRIPLE) > STATIC_RULE_LIMIT);
        // Bounded small, the same rule is cheap.
        assert!(cost_static(list_of_ints(Some(10)), TRIPLE) < 100_000);
    }

    #[test]
    fn one_comprehension_over_a_long_list_is_within_the_static_limit() {
        let c = cost_static(list_of_ints(Some(100_000)), "self.list.all(x, x > 0)");
        assert!(c > 100_000 && c < STATIC_RULE_LIMIT, "{c}");
    }

    #[test]
    fn the_concrete_cost_follows_the_actual_sizes() {
        let items: Vec<i64> = (0..250).collect();
        let v = json!({"list": items});
        let c = cost_concrete(&v, TRIPLE);
        assert!(c > PER_CALL_LIMIT, "{c}");
        let small = json!({"list": [1, 2, 3]});
        assert!(cost_concrete(&small, TRIPLE) < 1_000);
    }

    #[test]
    fn fields_are_found_under_their_escaped_names() {
        let schema = json!({"type": "object", "properties": {"a-b": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 5}}}});
        let c = cost_static(schema, "self.a__dash__b.all(s, s.contains('x'))");
        assert!(c < 100, "{c}");
    }

    #[test]
    fn string_functions_cost_by_length() {
        let short =
            json!({"type": "object", "properties": {"s": {"type": "string", "maxLength": 10}}});
        let long = json!({"type": "object", "properties": {"s": {"type": "string"}}});
        let rule = "self.s.matches('^a+$')";
        assert!(cost_static(short, rule) < 10);
        assert!(cost_static(long, rule) > 100_000);
    }

    #[test]
    fn the_budget_message_is_upstreams() {
        assert_eq!(
            over_budget("estimated rule cost", 25_000_000, 10_000_000),
            "estimated rule cost exceeds budget by factor of 2.5x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
        );
        assert!(over_budget("x", u64::MAX, 1).contains("more than 100x"));
    }

    #[test]
    fn a_rule_over_the_per_call_limit_is_an_error_and_does_not_run() {
        let node = Node::compile(&json!({"type": "object",
            "properties": {"list": {"type": "array", "items": {"type": "integer"}}},
            "x-kubernetes-validations": [{"rule": TRIPLE}]}));
        let items: Vec<i64> = (0..250).collect();
        let started = std::time::Instant::now();
        let out = crate::cel::validate(&node, &json!({"list": items}), None);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        let msg = out.errors.aggregate_message();
        assert!(
            msg.contains("operation cancelled: actual cost limit exceeded evaluating rule"),
            "{msg}"
        );
    }

    #[test]
    fn once_the_request_budget_is_spent_no_further_rule_runs() {
        // Each item's rule costs about 600,000 units; thirty of them exceed the budget.
        let node = Node::compile(&json!({"type": "object", "properties": {"items": {
            "type": "array", "items": {"type": "object",
                "properties": {"l": {"type": "array", "items": {"type": "integer"}}},
                "x-kubernetes-validations": [{"rule": "self.l.all(a, self.l.all(b, a + b >= 0))"}]}}}}));
        let l: Vec<i64> = (0..300).collect();
        let items: Vec<Value> = (0..30).map(|_| json!({"l": l})).collect();
        let out = crate::cel::validate(&node, &json!({"items": items}), None);
        let msgs: Vec<String> = out.errors.iter().map(|e| e.message()).collect();
        assert_eq!(msgs.len(), 1, "{msgs:#?}");
        assert!(
            msgs[0].contains("validation failed due to running out of cost budget, no further validation rules will be run"),
            "{msgs:#?}"
        );
    }
}
