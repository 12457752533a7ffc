//! Validation of a custom resource against its structural schema, with kube-openapi's
//! semantics and messages, and CRD validation ratcheting.
//!
//! Per node, in go-openapi's order: type (and format for non-strings), `allOf`/`anyOf`/
//! `oneOf`/`not`, string lengths and pattern (the first failure only), string format, number
//! range/bounds/multipleOf, array items and sizes, enum, then object properties, additional
//! properties and `required`. Paths are built only when a failure is recorded.
//!
//! **Ratcheting** (upstream `CRDValidationRatcheting`, on by default since 1.30): on update,
//! a node whose new value equals its correlated old value keeps no errors — an object that was
//! already invalid may be written again as long as the invalid part is unchanged. Fields
//! correlate by name, items only in `x-kubernetes-list-type: map` lists (by their keys).

use serde_json::{Map, Value};

use crate::formats;
use crate::gofmt;
use crate::numbers::{self, Num, is_json_integer, num};
use crate::openapi_errors::{Code, Failure, in_body, invalid_type};
use crate::schema::{Additional, Node};

/// Validates `value` against `node`. `old` is the correlated old value on update (enables
/// ratcheting). Failures are appended to `out`.
pub fn validate(node: &Node, value: &Value, old: Option<&Value>, out: &mut Vec<Failure>) {
    let mut path = String::new();
    Walker { out }.node(node, value, old, &mut path);
}

/// Whether `value` passes `node` (used for junctors and default checks).
pub fn is_valid(node: &Node, value: &Value, path: &str) -> bool {
    let mut out = Vec::new();
    let mut p = path.to_string();
    Walker { out: &mut out }.node(node, value, None, &mut p);
    out.is_empty()
}

struct Walker<'o> {
    out: &'o mut Vec<Failure>,
}

/// A JSON value's go-openapi type and the format Go's decoder gives it.
fn kind_of(v: &Value) -> (&'static str, &'static str) {
    match v {
        Value::Null => ("null", ""),
        Value::Bool(_) => ("boolean", ""),
        Value::Number(n) if n.is_i64() => ("integer", "int64"),
        Value::Number(_) => ("number", "float64"),
        Value::String(_) => ("string", ""),
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
    }
}

impl Walker<'_> {
    fn fail(&mut self, f: Failure) {
        self.out.push(f);
    }

    /// One node, with ratcheting against `old`.
    fn node(&mut self, node: &Node, v: &Value, old: Option<&Value>, path: &mut String) {
        let before = self.out.len();
        self.check(node, v, old, path);
        if self.out.len() > before && old.is_some_and(|o| o == v) {
            self.out.truncate(before);
        }
    }

    fn check(&mut self, node: &Node, v: &Value, old: Option<&Value>, path: &mut String) {
        if v.is_null() {
            self.type_check(node, v, path);
            self.enum_check(node, v, path);
            return;
        }
        self.type_check(node, v, path);
        self.junctors(node, v, path);
        if let Value::String(s) = v {
            self.string_checks(node, s, path);
            if !node.format.is_empty() && !formats::validates(&node.format, s) {
                self.fail(invalid_type(path, &node.format, s));
            }
        }
        if let Some(n) = num(v) {
            numbers::check(node, n, path, self.out);
        }
        if let Value::Array(items) = v {
            self.array_checks(node, items, old.and_then(Value::as_array), path);
        }
        self.enum_check(node, v, path);
        if let Value::Object(m) = v {
            self.object_checks(node, m, old.and_then(Value::as_object), path);
        }
    }

    fn type_check(&mut self, node: &Node, v: &Value, path: &str) {
        let types = node.types();
        if types.is_empty() && node.format.is_empty() {
            return;
        }
        if v.is_null() {
            if !types.is_empty() && !node.nullable {
                self.fail(invalid_type(path, &types.join(","), "null"));
            }
            return;
        }
        let (sch_type, format) = kind_of(v);
        let contains = |t: &str| types.contains(&t);
        let is_float_int =
            sch_type == "number" && v.as_f64().is_some_and(is_json_integer) && contains("integer");
        let is_int_float = sch_type == "integer" && contains("number");
        let is_string_or_array = matches!(v, Value::String(_) | Value::Array(_));
        let has_format = !node.format.is_empty();
        let type_matches = contains(sch_type) || is_float_int || is_int_float;
        if has_format && !is_string_or_array && !(type_matches || format == node.format) {
            self.fail(invalid_type(path, &node.format, format));
            return;
        }
        let numeric = contains("number") || contains("integer");
        if has_format && is_string_or_array && !numeric {
            return;
        }
        if !type_matches {
            self.fail(invalid_type(path, &types.join(","), sch_type));
        }
    }

    /// Runs `node` on the same value, collecting its failures apart.
    fn sub(&mut self, node: &Node, v: &Value, path: &str) -> Vec<Failure> {
        let mut out = Vec::new();
        let mut p = path.to_string();
        Walker { out: &mut out }.node(node, v, None, &mut p);
        out
    }

    fn junctors(&mut self, node: &Node, v: &Value, path: &str) {
        if !node.any_of.is_empty() {
            let mut best: Option<Vec<Failure>> = None;
            let mut ok = false;
            for alt in &node.any_of {
                let r = self.sub(alt, v, path);
                if r.is_empty() {
                    ok = true;
                    break;
                }
                if best.is_none() {
                    best = Some(r);
                }
            }
            if !ok {
                self.fail(Failure::new(
                    Code::Plain,
                    path,
                    None,
                    format!(
                        "{} must validate at least one schema (anyOf)",
                        gofmt::quote(path)
                    ),
                ));
                self.out.extend(best.unwrap_or_default());
            }
        }
        if !node.one_of.is_empty() {
            let mut best: Option<Vec<Failure>> = None;
            let mut valid = 0;
            for alt in &node.one_of {
                let r = self.sub(alt, v, path);
                if r.is_empty() {
                    valid += 1;
                } else if valid == 0 && best.is_none() {
                    best = Some(r);
                }
            }
            if valid != 1 {
                let extra = if valid == 0 {
                    "Found none valid".to_string()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                self.fail(Failure::new(
                    Code::Plain,
                    path,
                    None,
                    format!(
                        "{} must validate one and only one schema (oneOf). {extra}",
                        gofmt::quote(path)
                    ),
                ));
                if valid == 0 {
                    self.out.extend(best.unwrap_or_default());
                }
            }
        }
        if !node.all_of.is_empty() {
            let mut valid = 0;
            for alt in &node.all_of {
                let r = self.sub(alt, v, path);
                if r.is_empty() {
                    valid += 1;
                }
                self.out.extend(r);
            }
            if valid != node.all_of.len() {
                let extra = if valid == 0 { ". None validated" } else { "" };
                self.fail(Failure::new(
                    Code::Plain,
                    path,
                    None,
                    format!(
                        "{} must validate all the schemas (allOf){extra}",
                        gofmt::quote(path)
                    ),
                ));
            }
        }
        if let Some(not) = &node.not
            && self.sub(not, v, path).is_empty()
        {
            self.fail(Failure::new(
                Code::Plain,
                path,
                None,
                format!("{} must not validate the schema (not)", gofmt::quote(path)),
            ));
        }
    }

    fn string_checks(&mut self, node: &Node, s: &str, path: &str) {
        let len = s.chars().count() as i64;
        if let Some(max) = node.max_length
            && len > max
        {
            let mut f = Failure::new(
                Code::TooLong,
                path,
                Some(Value::from(s)),
                in_body(path, &format!("should be at most {max} chars long")),
            );
            f.valid = Some(max);
            return self.fail(f);
        }
        if let Some(min) = node.min_length
            && len < min
        {
            return self.fail(Failure::new(
                Code::TooShort,
                path,
                Some(Value::from(s)),
                in_body(path, &format!("should be at least {min} chars long")),
            ));
        }
        if let Some(p) = &node.pattern {
            let (matched, shown) = match &p.regex {
                Ok(re) => (re.is_match(s), p.source.clone()),
                Err(e) => (false, format!("{}, but pattern is invalid: {e}", p.source)),
            };
            if !matched {
                self.fail(Failure::new(
                    Code::Pattern,
                    path,
                    Some(Value::from(s)),
                    in_body(path, &format!("should match '{shown}'")),
                ));
            }
        }
    }

    fn array_checks(
        &mut self,
        node: &Node,
        items: &[Value],
        old: Option<&Vec<Value>>,
        path: &mut String,
    ) {
        if let Some(item) = &node.items {
            let map_keys =
                (node.list_type.as_deref() == Some("map")).then_some(&node.list_map_keys);
            for (i, v) in items.iter().enumerate() {
                let old_item = match (map_keys, old) {
                    (Some(keys), Some(old)) => correlate(keys, old, v),
                    _ => None,
                };
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                self.node(item, v, old_item, path);
                path.truncate(len);
            }
        }
        let size = items.len() as i64;
        if let Some(min) = node.min_items
            && size < min
        {
            self.fail(Failure::new(
                Code::MinItems,
                path,
                Some(Value::from(size)),
                in_body(path, &format!("should have at least {min} items")),
            ));
        }
        if let Some(max) = node.max_items
            && size > max
        {
            let mut f = Failure::new(
                Code::MaxItems,
                path,
                Some(Value::from(size)),
                in_body(path, &format!("should have at most {max} items")),
            );
            f.valid = Some(max);
            self.fail(f);
        }
        if node.unique_items {
            let dup = items
                .iter()
                .enumerate()
                .any(|(i, a)| items[..i].iter().any(|b| b == a));
            if dup {
                self.fail(Failure::new(
                    Code::Unique,
                    path,
                    None,
                    in_body(path, "shouldn't contain duplicates"),
                ));
            }
        }
    }

    fn enum_check(&mut self, node: &Node, v: &Value, path: &str) {
        if node.enum_values.is_empty() || node.enum_values.iter().any(|e| enum_equal(v, e)) {
            return;
        }
        let shown: Vec<String> = node.enum_values.iter().map(gofmt::sprint).collect();
        let mut f = Failure::new(
            Code::Enum,
            path,
            Some(v.clone()),
            in_body(path, &format!("should be one of [{}]", shown.join(" "))),
        );
        f.values = node.enum_values.clone();
        self.fail(f);
    }

    fn object_checks(
        &mut self,
        node: &Node,
        m: &Map<String, Value>,
        old: Option<&Map<String, Value>>,
        path: &mut String,
    ) {
        let n = m.len() as i64;
        if let Some(min) = node.min_properties
            && n < min
        {
            self.fail(Failure::new(
                Code::TooFewProperties,
                path,
                Some(Value::from(n)),
                in_body(path, &format!("should have at least {min} properties")),
            ));
        }
        if let Some(max) = node.max_properties
            && n > max
        {
            let mut f = Failure::new(
                Code::TooManyProperties,
                path,
                Some(Value::from(n)),
                in_body(path, &format!("should have at most {max} properties")),
            );
            f.valid = Some(max);
            self.fail(f);
        }
        match &node.additional {
            Additional::Bool(false) => {
                for k in m.keys() {
                    if !node.properties.contains_key(k) {
                        self.fail(Failure::new(
                            Code::Unallowed,
                            path,
                            Some(Value::from(k.as_str())),
                            format!("{path}.{k} in body is a forbidden property"),
                        ));
                    }
                }
            }
            Additional::Schema(values) => {
                for (k, v) in m {
                    if node.properties.contains_key(k) {
                        continue;
                    }
                    let len = path.len();
                    path.push('.');
                    path.push_str(k);
                    self.node(values, v, old.and_then(|o| o.get(k)), path);
                    path.truncate(len);
                }
            }
            _ => {}
        }
        if !node.properties.is_empty() {
            for (k, v) in m {
                let Some(prop) = node.properties.get(k) else {
                    continue;
                };
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                self.node(prop, v, old.and_then(|o| o.get(k)), path);
                path.truncate(len);
            }
        }
        for k in &node.required {
            if !m.contains_key(k) {
                let name = format!("{path}.{k}");
                let msg = in_body(&name, "is required");
                self.fail(Failure::new(Code::Required, &name, None, msg));
            }
        }
    }
}

/// Enum membership as go-openapi decides it: deep equality, with numbers converted to the
/// enum value's Go type (an integer enum value truncates a float); `null` never matches.
fn enum_equal(v: &Value, e: &Value) -> bool {
    // go-openapi skips null enum values and never matches a null value.
    if v.is_null() || e.is_null() {
        return false;
    }
    if v == e {
        return true;
    }
    match (num(v), num(e)) {
        (Some(a), Some(Num::Int(b))) => match a {
            Num::Int(a) => a == b,
            Num::Float(a) => a.is_finite() && a.trunc() as i64 == b,
        },
        (Some(a), Some(Num::Float(b))) => a.f64() == b,
        _ => false,
    }
}

/// The old item of a map list with the same key values as `item`.
pub(crate) fn correlate<'a>(keys: &[String], old: &'a [Value], item: &Value) -> Option<&'a Value> {
    let key_of =
        |v: &Value| -> Vec<Option<Value>> { keys.iter().map(|k| v.get(k).cloned()).collect() };
    let want = key_of(item);
    old.iter().find(|o| o.is_object() && key_of(o) == want)
}

#[cfg(test)]
#[path = "values_tests.rs"]
mod tests;
