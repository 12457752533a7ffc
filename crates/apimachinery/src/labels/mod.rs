//! Label selectors: the `labelSelector=` query parameter, `metav1.LabelSelector` objects, and
//! matching them against an object's labels.
//!
//! Mirrors upstream `k8s.io/apimachinery/pkg/labels`: a [`Selector`] is an AND of
//! [`Requirement`]s, kept sorted by key so its string form is deterministic. That string form
//! ([`Selector`]'s `Display`) is upstream's canonical one — the Scale subresource publishes it
//! as `status.selector` (`app=web`, `tier in (a,b)`, `!legacy`).
//!
//! - [`Selector::parse`] reads the query-parameter syntax (`parser.rs`), failing with the exact
//!   text upstream answers in a 400.
//! - [`label_selector_from_json`] and [`validate_label_selector`] handle `metav1.LabelSelector`
//!   (`label_selector.rs`), reporting field errors at their paths.

mod label_selector;
mod parser;

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde_json::Value;

use crate::field::{ErrorList, FieldError, Path};
use crate::validation::{is_qualified_name, is_valid_label_value};

pub use label_selector::{
    LabelSelectorOptions, label_selector_from_json, validate_label_selector, validate_labels,
};
pub use parser::ParseError;

/// How a requirement relates a key to its values (upstream `selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `k=v`
    Equals,
    /// `k==v`
    DoubleEquals,
    /// `k!=v`
    NotEquals,
    /// `k in (a,b)`
    In,
    /// `k notin (a,b)`
    NotIn,
    /// `k`
    Exists,
    /// `!k`
    DoesNotExist,
    /// `k>5` (integers; node affinity)
    GreaterThan,
    /// `k<5`
    LessThan,
}

impl Operator {
    /// Upstream's spelling of the operator (`selection.Operator` values).
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => "in",
            Operator::NotIn => "notin",
            Operator::Exists => "exists",
            Operator::DoesNotExist => "!",
            Operator::GreaterThan => "gt",
            Operator::LessThan => "lt",
        }
    }
}

/// Anything labels can be looked up in.
pub trait Labels {
    /// The value of `key`, if the label is present.
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl Labels for HashMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// A JSON labels object (`metadata.labels`); non-string values count as absent.
impl Labels for serde_json::Map<String, Value> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }
}

/// One clause of a selector: a key, an operator and its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// Upstream `NewRequirement`: validates the key, the number of values for the operator and
    /// each value, collecting every error at paths under `path` (`key`, `values[i][<key>]`).
    pub fn new(
        key: &str,
        operator: Operator,
        values: Vec<String>,
        path: &Path,
    ) -> Result<Requirement, ErrorList> {
        let mut errs = ErrorList::new();
        let msgs = is_qualified_name(key);
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(
                path.child("key"),
                Value::from(key),
                msgs.join("; "),
            ));
        }
        let values_path = path.child("values");
        let as_json = || Value::from(values.clone());
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => {
                errs.push(FieldError::invalid(
                    &values_path,
                    as_json(),
                    "for 'in', 'notin' operators, values set can't be empty",
                ));
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals
                if values.len() != 1 =>
            {
                errs.push(FieldError::invalid(
                    &values_path,
                    as_json(),
                    "exact-match compatibility requires one single value",
                ));
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                errs.push(FieldError::invalid(
                    &values_path,
                    as_json(),
                    "values set must be empty for exists and does not exist",
                ));
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(FieldError::invalid(
                        &values_path,
                        as_json(),
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if v.parse::<i64>().is_err() {
                        errs.push(FieldError::invalid(
                            values_path.index(i),
                            Value::from(v.as_str()),
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
            _ => {}
        }
        for (i, v) in values.iter().enumerate() {
            let msgs = is_valid_label_value(v);
            if !msgs.is_empty() {
                errs.push(FieldError::invalid(
                    values_path.index(i).key(key),
                    Value::from(v.as_str()),
                    msgs.join("; "),
                ));
            }
        }
        if errs.is_empty() {
            Ok(Requirement {
                key: key.to_string(),
                operator,
                values,
            })
        } else {
            Err(errs)
        }
    }

    /// A requirement taken as given, without validating key or values: for field
    /// requirements (a node selector's `matchFields` on `metadata.name`), whose values are
    /// object names rather than label values.
    pub fn unchecked(key: &str, operator: Operator, values: Vec<String>) -> Requirement {
        Requirement {
            key: key.to_string(),
            operator,
            values,
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values in the order they were given (the parser gives them sorted and deduplicated).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    fn has_value(&self, v: &str) -> bool {
        self.values.iter().any(|x| x == v)
    }

    /// Upstream `Requirement.Matches`: `notin`/`!=` match when the key is absent; `gt`/`lt`
    /// need the label to parse as an integer.
    pub fn matches(&self, labels: &(impl Labels + ?Sized)) -> bool {
        let got = labels.label(&self.key);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                got.is_some_and(|v| self.has_value(v))
            }
            Operator::NotIn | Operator::NotEquals => got.is_none_or(|v| !self.has_value(v)),
            Operator::Exists => got.is_some(),
            Operator::DoesNotExist => got.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(have), [want]) = (got, self.values.as_slice()) else {
                    return false;
                };
                match (have.parse::<i64>(), want.parse::<i64>()) {
                    (Ok(h), Ok(w)) => {
                        if self.operator == Operator::GreaterThan {
                            h > w
                        } else {
                            h < w
                        }
                    }
                    _ => false,
                }
            }
        }
    }
}

/// Upstream `Requirement.String`: values of set operators print sorted.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.operator {
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
        };
        f.write_str(op)?;
        let set = matches!(self.operator, Operator::In | Operator::NotIn);
        if set {
            f.write_str("(")?;
        }
        let mut sorted: Vec<&str> = self.values.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        f.write_str(&sorted.join(","))?;
        if set {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A label selector: every requirement must match. `Nothing` (from a null `LabelSelector`)
/// matches no object; an empty selector matches every object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl Selector {
    /// Matches every object (upstream `labels.Everything()`).
    pub fn everything() -> Selector {
        Selector::default()
    }

    /// Matches no object (upstream `labels.Nothing()`, from a null selector).
    pub fn nothing() -> Selector {
        Selector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Parses the `labelSelector` query-parameter syntax; see [`ParseError`] for the messages.
    pub fn parse(s: &str) -> Result<Selector, ParseError> {
        let mut requirements = parser::parse(s)?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Selector {
            requirements,
            nothing: false,
        })
    }

    /// `k1=v1,k2=v2` from a map, unvalidated (upstream `SelectorFromSet`, used for
    /// `matchLabels`-only selectors such as a Service's `spec.selector`).
    pub fn from_set<'a>(set: impl IntoIterator<Item = (&'a String, &'a String)>) -> Selector {
        let mut sel = Selector::everything();
        for (k, v) in set {
            sel.requirements.push(Requirement {
                key: k.clone(),
                operator: Operator::Equals,
                values: vec![v.clone()],
            });
        }
        sel.requirements.sort_by(|a, b| a.key.cmp(&b.key));
        sel
    }

    /// Adds requirements, keeping them sorted by key (upstream `Selector.Add`). Adding to
    /// `Nothing` leaves it matching nothing.
    pub fn with_requirements(mut self, reqs: impl IntoIterator<Item = Requirement>) -> Selector {
        self.requirements.extend(reqs);
        self.requirements.sort_by(|a, b| a.key.cmp(&b.key));
        self
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// True when the selector does not restrict anything (it matches every object).
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// True for the `Nothing` selector.
    pub fn is_nothing(&self) -> bool {
        self.nothing
    }

    pub fn matches(&self, labels: &(impl Labels + ?Sized)) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Matches a JSON labels object; `None` or a non-object means no labels.
    pub fn matches_json(&self, labels: Option<&Value>) -> bool {
        static EMPTY: std::sync::OnceLock<serde_json::Map<String, Value>> =
            std::sync::OnceLock::new();
        let map = labels
            .and_then(Value::as_object)
            .unwrap_or_else(|| EMPTY.get_or_init(serde_json::Map::new));
        self.matches(map)
    }

    /// Matches a whole object by its `metadata.labels`.
    pub fn matches_object(&self, object: &Value) -> bool {
        self.matches_json(object.pointer("/metadata/labels"))
    }

    /// Upstream `RequiresExactMatch`: the value `label` must have, if the first requirement on
    /// it is `=`, `==` or a single-valued `in`.
    pub fn requires_exact_match(&self, label: &str) -> Option<&str> {
        let r = self.requirements.iter().find(|r| r.key == label)?;
        match (r.operator, r.values.as_slice()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [v]) => Some(v),
            _ => None,
        }
    }
}

/// Upstream's canonical form: requirements sorted by key, joined by `,`. `Nothing` and
/// `Everything` both print as the empty string.
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Selector {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Selector, ParseError> {
        Selector::parse(s)
    }
}

#[cfg(test)]
mod tests;
