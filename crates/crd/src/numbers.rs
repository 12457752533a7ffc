//! Number checks of custom resource values, with go-openapi's semantics: a value must fit
//! the type's format (`int32`, `float`), then `multipleOf`, `minimum` and `maximum` (and
//! their exclusive forms) are checked natively on integers — a fractional bound or factor is
//! truncated for an integer value, as upstream does — and as floats otherwise. Messages
//! print numbers the way Go's `%v` does.

use serde_json::Value;

use crate::gofmt;
use crate::openapi_errors::{Code, Failure, in_body};
use crate::schema::Node;

/// A number as Go decodes it: int64 when it fits, else float64.
#[derive(Clone, Copy)]
pub(crate) enum Num {
    Int(i64),
    Float(f64),
}

pub(crate) fn num(v: &Value) -> Option<Num> {
    let n = v.as_number()?;
    Some(match n.as_i64() {
        Some(i) => Num::Int(i),
        None => Num::Float(n.as_f64().unwrap_or(0.0)),
    })
}

impl Num {
    pub(crate) fn f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
    pub(crate) fn value(self) -> Value {
        match self {
            Num::Int(i) => Value::from(i),
            Num::Float(f) => Value::from(f),
        }
    }
}

/// swag `IsFloat64AJSONInteger`.
pub(crate) fn is_json_integer(f: f64) -> bool {
    if !f.is_finite() || f.abs() > 9_007_199_254_740_992.0 {
        return false;
    }
    let g = f.trunc();
    if f == g {
        return true;
    }
    let diff = (f - g).abs();
    diff / (f.abs() + g.abs()) < 1e-9
}

/// The integer/number type and format the number checks use (single-type schemas only).
fn number_kind(node: &Node) -> (&'static str, &str) {
    match node.type_name.as_str() {
        _ if node.int_or_string => ("", ""),
        "integer" => (
            "integer",
            if matches!(node.format.as_str(), "int32" | "int64") {
                node.format.as_str()
            } else {
                ""
            },
        ),
        "number" => (
            "number",
            if matches!(node.format.as_str(), "float" | "double") {
                node.format.as_str()
            } else {
                ""
            },
        ),
        _ => ("", ""),
    }
}

/// go-openapi `IsValueValidAgainstRange`: whether a number fits the type and format.
fn range_error(n: Num, ty: &str, format: &str, prefix: &str, path: &str) -> Option<Failure> {
    let rep = match n {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => fixed(f),
    };
    let ok = match (ty, format) {
        ("integer", "int32") => rep.parse::<i32>().is_ok(),
        ("integer", _) => rep.parse::<i64>().is_ok(),
        (_, "float") => rep.parse::<f64>().is_ok_and(|f| f.abs() <= f32::MAX as f64),
        _ => true,
    };
    if ok {
        return None;
    }
    let msg = if format.is_empty() {
        format!("{prefix} value must be of type {ty} (default format) in {path}")
    } else {
        format!("{prefix} value must be of type {ty} with format {format} in {path}")
    };
    Some(Failure::new(Code::Plain, path, None, msg))
}

/// Range, bounds and multipleOf checks of a number (go-openapi's `numberValidator`).
pub(crate) fn check(node: &Node, n: Num, path: &str, out: &mut Vec<Failure>) {
    let (ty, format) = number_kind(node);
    if let Some(f) = range_error(n, ty, format, "Checked", path) {
        out.push(f);
    }
    let mut errs = Vec::new();
    if let Some(factor) = node.multiple_of {
        let range = range_error(Num::Float(factor), ty, format, "MultipleOf", path);
        let native = range.is_none();
        errs.extend(range);
        errs.extend(multiple_of(path, n, factor, native));
    }
    let mut min_errs = Vec::new();
    if let Some(min) = node.minimum {
        let range = range_error(Num::Float(min), ty, format, "Minimum boundary", path);
        let native = range.is_none();
        min_errs.extend(range);
        min_errs.extend(bound(path, n, min, node.exclusive_minimum, native, false));
    }
    let mut max_errs = Vec::new();
    if let Some(max) = node.maximum {
        let range = range_error(Num::Float(max), ty, format, "Maximum boundary", path);
        let native = range.is_none();
        max_errs.extend(range);
        max_errs.extend(bound(path, n, max, node.exclusive_maximum, native, true));
    }
    out.extend(errs);
    out.extend(min_errs);
    out.extend(max_errs);
}

/// `strconv.FormatFloat(f, 'f', -1, 64)`.
fn fixed(f: f64) -> String {
    let s = format!("{f}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

fn multiple_of(path: &str, n: Num, factor: f64, native: bool) -> Option<Failure> {
    let positive = |shown: Value| {
        Failure::new(
            Code::MultipleOfMustBePositive,
            path,
            Some(shown.clone()),
            format!(
                "factor MultipleOf declared for {path} must be positive: {}",
                gofmt::sprint(&shown)
            ),
        )
    };
    let not_multiple = |shown: String| {
        Failure::new(
            Code::MultipleOf,
            path,
            Some(n.value()),
            in_body(path, &format!("should be a multiple of {shown}")),
        )
    };
    match n {
        Num::Int(i) if native => {
            let f = factor as i64;
            if f <= 0 {
                return Some(positive(Value::from(f)));
            }
            (i % f != 0).then(|| not_multiple(f.to_string()))
        }
        _ => {
            if factor <= 0.0 {
                return Some(positive(Value::from(factor)));
            }
            let d = n.f64();
            let mult = if factor < 1.0 {
                1.0 / factor * d
            } else {
                d / factor
            };
            (!is_json_integer(mult)).then(|| not_multiple(gofmt::float(factor)))
        }
    }
}

fn bound(
    path: &str,
    n: Num,
    limit: f64,
    exclusive: bool,
    native: bool,
    max: bool,
) -> Option<Failure> {
    let (fails, shown) = match n {
        Num::Int(i) if native => {
            let l = limit as i64;
            let fails = if max {
                i > l || (exclusive && i == l)
            } else {
                i < l || (exclusive && i == l)
            };
            (fails, l.to_string())
        }
        _ => {
            let d = n.f64();
            let fails = if max {
                d > limit || (exclusive && d == limit)
            } else {
                d < limit || (exclusive && d == limit)
            };
            (fails, gofmt::float(limit))
        }
    };
    if !fails {
        return None;
    }
    let rel = match (max, exclusive) {
        (true, false) => "less than or equal to",
        (true, true) => "less than",
        (false, false) => "greater than or equal to",
        (false, true) => "greater than",
    };
    Some(Failure::new(
        if max { Code::Max } else { Code::Min },
        path,
        Some(n.value()),
        in_body(path, &format!("should be {rel} {shown}")),
    ))
}
