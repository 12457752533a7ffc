//! Evaluation of a parsed JSONPath against a JSON object, with client-go's semantics.
//!
//! Every step returns the values it produced and, like the Go code, possibly an error along
//! with a partial result: a filter's existence test (`[?(@.x[3])]`) looks at that partial
//! result even when the step failed, so the pair is kept rather than a `Result`.

use std::borrow::Cow;
use std::cmp::Ordering;

use serde_json::Value;

use super::{JsonPath, JsonPathError, Node, Param};

type Item<'a> = Cow<'a, Value>;
type Step<'a> = (Vec<Item<'a>>, Option<String>);

/// The first value the path finds in `data` (`results[0][0]` upstream), `None` when it finds
/// nothing; an error when evaluation fails.
pub(crate) fn eval_first<'a>(
    path: &JsonPath,
    data: &'a Value,
) -> Result<Option<Item<'a>>, JsonPathError> {
    let (values, err) = eval_list(vec![Cow::Borrowed(data)], &path.nodes);
    match err {
        Some(e) => Err(JsonPathError::Eval(e)),
        None => Ok(values.into_iter().next()),
    }
}

fn eval_list<'a>(input: Vec<Item<'a>>, nodes: &[Node]) -> Step<'a> {
    let mut cur = input;
    for node in nodes {
        let (next, err) = eval_node(cur, node);
        if err.is_some() {
            return (next, err);
        }
        cur = next;
    }
    (cur, None)
}

fn eval_node<'a>(input: Vec<Item<'a>>, node: &Node) -> Step<'a> {
    match node {
        Node::Field(name) => (field(&input, name), None),
        Node::Wildcard => (input.iter().flat_map(children).collect(), None),
        Node::Recursive => (recursive(&input), None),
        Node::Array(params) => array(input, params),
        Node::Union(lists) => {
            let mut out = Vec::new();
            for list in lists {
                let (values, err) = eval_list(input.clone(), list);
                if err.is_some() {
                    return (input, err);
                }
                out.extend(values);
            }
            (out, None)
        }
        Node::Filter { left, op, right } => filter(input, left, op, right),
        Node::Text(s) => (vec![Cow::Owned(Value::String(s.clone()))], None),
        Node::Int(i) => (literal(&input, Value::from(*i)), None),
        Node::Float(f) => (literal(&input, Value::from(*f)), None),
        Node::Bool(b) => (literal(&input, Value::from(*b)), None),
        Node::Identifier(name) => (input, Some(format!("unsupported identifier {name}"))),
    }
}

fn literal<'a>(input: &[Item<'a>], v: Value) -> Vec<Item<'a>> {
    input.iter().map(|_| Cow::Owned(v.clone())).collect()
}

/// A map key of every map input; missing keys and non-maps yield nothing.
fn field<'a>(input: &[Item<'a>], name: &str) -> Vec<Item<'a>> {
    input
        .iter()
        .filter_map(|item| match item {
            Cow::Borrowed(Value::Object(m)) => m.get(name).map(Cow::Borrowed),
            Cow::Owned(Value::Object(m)) => m.get(name).cloned().map(Cow::Owned),
            _ => None,
        })
        .collect()
}

/// The values inside a map, list or string (a string's bytes, as Go's reflection sees them).
fn children<'a>(item: &Item<'a>) -> Vec<Item<'a>> {
    match item {
        Cow::Borrowed(Value::Object(m)) => m.values().map(Cow::Borrowed).collect(),
        Cow::Borrowed(Value::Array(a)) => a.iter().map(Cow::Borrowed).collect(),
        Cow::Owned(Value::Object(m)) => m.values().cloned().map(Cow::Owned).collect(),
        Cow::Owned(Value::Array(a)) => a.iter().cloned().map(Cow::Owned).collect(),
        other => match other.as_ref() {
            Value::String(s) => s.bytes().map(|b| Cow::Owned(Value::from(b))).collect(),
            _ => Vec::new(),
        },
    }
}

/// `..`: each container, followed by every container below it.
fn recursive<'a>(input: &[Item<'a>]) -> Vec<Item<'a>> {
    let mut out = Vec::new();
    for item in input {
        let kids = children(item);
        if !kids.is_empty() {
            out.push(item.clone());
            out.extend(recursive(&kids));
        }
    }
    out
}

fn array<'a>(input: Vec<Item<'a>>, params: &[Param; 3]) -> Step<'a> {
    let mut result = Vec::new();
    for item in &input {
        let elems: Vec<Item<'a>> = match item {
            Cow::Borrowed(Value::Null) | Cow::Owned(Value::Null) => continue,
            Cow::Borrowed(Value::Array(a)) => a.iter().map(Cow::Borrowed).collect(),
            Cow::Owned(Value::Array(a)) => a.iter().cloned().map(Cow::Owned).collect(),
            other => {
                let err = format!("{} is not array or slice", type_name(other));
                return (input, Some(err));
            }
        };
        let len = elems.len() as i64;
        let mut start = if params[0].known { params[0].value } else { 0 };
        if start < 0 {
            start = start.saturating_add(len);
        }
        let mut end = if params[1].known {
            params[1].value
        } else {
            len
        };
        if end < 0 || (end == 0 && params[1].derived) {
            end = end.saturating_add(len);
        }
        if end == start {
            // Upstream returns what it has so far when zero elements are requested.
            return (result, None);
        }
        if start >= len || start < 0 {
            let err = format!("array index out of bounds: index {start}, length {len}");
            return (input, Some(err));
        }
        if end > len || end < 0 {
            let err = format!(
                "array index out of bounds: index {}, length {len}",
                end.saturating_sub(1)
            );
            return (input, Some(err));
        }
        if start > end {
            let err = format!("starting index {start} is greater than ending index {end}");
            return (input, Some(err));
        }
        let step = if params[2].known { params[2].value } else { 1 };
        if step <= 0 {
            return (input, Some("step must be > 0".to_string()));
        }
        let mut i = start;
        while i < end {
            result.push(elems[i as usize].clone());
            i = i.saturating_add(step);
        }
    }
    (result, None)
}

fn filter<'a>(input: Vec<Item<'a>>, left: &[Node], op: &str, right: &[Node]) -> Step<'a> {
    let mut results = Vec::new();
    for item in &input {
        let elems: Vec<Item<'a>> = match item {
            Cow::Borrowed(Value::Array(a)) => a.iter().map(Cow::Borrowed).collect(),
            Cow::Owned(Value::Array(a)) => a.iter().cloned().map(Cow::Owned).collect(),
            other => {
                let err = format!(
                    "{} is not array or slice and cannot be filtered",
                    type_name(other)
                );
                return (input, Some(err));
            }
        };
        for elem in elems {
            let (lefts, err) = eval_list(vec![elem.clone()], left);
            if op == "exists" {
                if !lefts.is_empty() {
                    results.push(elem);
                }
                continue;
            }
            if err.is_some() {
                return (input, err);
            }
            let l = match lefts.as_slice() {
                [] => continue,
                [one] => one.clone(),
                _ => return (input, Some("can only compare one element at a time".into())),
            };
            let (rights, err) = eval_list(vec![elem.clone()], right);
            if err.is_some() {
                return (input, err);
            }
            let r = match rights.as_slice() {
                [] => continue,
                [one] => one.clone(),
                _ => return (input, Some("can only compare one element at a time".into())),
            };
            match compare(op, &l, &r) {
                Ok(true) => results.push(elem),
                Ok(false) => {}
                Err(e) => return (results, Some(e)),
            }
        }
    }
    (results, None)
}

/// A scalar as Go's template comparison sees it.
enum Basic<'v> {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'v str),
}

fn basic(v: &Value) -> Result<Basic<'_>, String> {
    match v {
        Value::Bool(b) => Ok(Basic::Bool(*b)),
        Value::Number(n) => Ok(match n.as_i64() {
            Some(i) => Basic::Int(i),
            None => Basic::Float(n.as_f64().unwrap_or(0.0)),
        }),
        Value::String(s) => Ok(Basic::Str(s)),
        _ => Err("invalid type for comparison".to_string()),
    }
}

/// Equality and order of two scalars of the same kind; other pairs are errors.
fn order(a: &Value, b: &Value) -> Result<(bool, Option<Ordering>), String> {
    let bad = || "incompatible types for comparison".to_string();
    Ok(match (basic(a)?, basic(b)?) {
        (Basic::Bool(x), Basic::Bool(y)) => (x == y, None),
        (Basic::Int(x), Basic::Int(y)) => (x == y, Some(x.cmp(&y))),
        (Basic::Float(x), Basic::Float(y)) => (x == y, x.partial_cmp(&y)),
        (Basic::Str(x), Basic::Str(y)) => (x == y, Some(x.cmp(y))),
        _ => return Err(bad()),
    })
}

fn compare(op: &str, a: &Value, b: &Value) -> Result<bool, String> {
    let (equal, ordering) = order(a, b)?;
    let less = || match ordering {
        Some(o) => Ok(o == Ordering::Less),
        None => Err("invalid type for comparison".to_string()),
    };
    match op {
        "==" => Ok(equal),
        "!=" => Ok(!equal),
        "<" => less(),
        "<=" => Ok(less()? || equal),
        ">" => Ok(!(less()? || equal)),
        ">=" => Ok(!less()?),
        _ => Err(format!("unrecognized filter operator {op}")),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "nil",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn first(path: &str, data: &Value) -> Result<Option<Value>, JsonPathError> {
        let p = JsonPath::parse(path).unwrap();
        eval_first(&p, data).map(|v| v.map(Cow::into_owned))
    }

    fn doc() -> Value {
        json!({
            "spec": {"replicas": 3, "items": [{"name": "a", "n": 1}, {"name": "b", "n": 2}, {"name": "c"}]},
            "status": {"conditions": [
                {"type": "Synced", "status": "True"},
                {"type": "Ready", "status": "False", "reason": "Waiting"}
            ]}
        })
    }

    #[test]
    fn fields_indexes_and_wildcards_find_the_first_value() {
        let d = doc();
        assert_eq!(first(".spec.replicas", &d).unwrap(), Some(json!(3)));
        assert_eq!(first(".spec.items[1].name", &d).unwrap(), Some(json!("b")));
        assert_eq!(first(".spec.items[-1].name", &d).unwrap(), Some(json!("c")));
        assert_eq!(first(".spec.items[*].name", &d).unwrap(), Some(json!("a")));
        assert_eq!(first(".spec.items[1:].name", &d).unwrap(), Some(json!("b")));
        assert_eq!(first(".spec.missing.deeper", &d).unwrap(), None);
    }

    #[test]
    fn filters_select_by_equality_and_inequality() {
        let d = doc();
        let ready = ".status.conditions[?(@.type==\"Ready\")].status";
        assert_eq!(first(ready, &d).unwrap(), Some(json!("False")));
        let not_synced = ".status.conditions[?(@.type!='Synced')].reason";
        assert_eq!(first(not_synced, &d).unwrap(), Some(json!("Waiting")));
        assert_eq!(
            first(".spec.items[?(@.n>1)].name", &d).unwrap(),
            Some(json!("b"))
        );
        assert_eq!(
            first(".spec.items[?(@.n)].name", &d).unwrap(),
            Some(json!("a"))
        );
        let absent = ".status.conditions[?(@.type==\"Healthy\")].status";
        assert_eq!(first(absent, &d).unwrap(), None);
    }

    #[test]
    fn type_mismatches_and_bad_indexes_are_errors() {
        let d = doc();
        assert!(first(".spec.items[7].name", &d).is_err());
        assert!(first(".spec.replicas[0]", &d).is_err());
        assert!(first(".spec.items[?(@.n==\"1\")].name", &d).is_err());
        assert!(first(".spec.items[?(@.n==1.0)].name", &d).is_err());
        assert!(first(".spec[?(@.x)]", &d).is_err());
    }

    #[test]
    fn unions_and_recursive_descent_collect_in_order() {
        let d = doc();
        let p = JsonPath::parse(".spec.items[2,0].name").unwrap();
        let (values, err) = eval_list(vec![Cow::Borrowed(&d)], &p.nodes);
        assert!(err.is_none());
        assert_eq!(
            values,
            vec![Cow::Borrowed(&json!("c")), Cow::Borrowed(&json!("a"))]
        );
        assert_eq!(first("..reason", &d).unwrap(), Some(json!("Waiting")));
    }

    #[test]
    fn zero_width_slices_and_nulls_yield_nothing() {
        let d = json!({"a": [], "b": null});
        assert_eq!(first(".a[*]", &d).unwrap(), None);
        assert_eq!(first(".b[0]", &d).unwrap(), None);
        assert_eq!(first(".b.c", &d).unwrap(), None);
    }
}
