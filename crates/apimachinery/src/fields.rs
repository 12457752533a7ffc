//! Field selectors: the `fieldSelector=` query parameter (`metadata.name=web`,
//! `status.phase!=Running`), and matching them against fields extracted from an object.
//!
//! Mirrors upstream `k8s.io/apimachinery/pkg/fields`: terms are split on unescaped commas,
//! sorted, and each split at the first `!=`, `==` or `=`; values may escape `\`, `,` and `=`
//! with a backslash. A field absent from the object reads as the empty string, so
//! `spec.nodeName=` selects unscheduled pods. Which field names a resource supports is the
//! caller's business: [`FieldSelector::fields`] lists them so an unsupported one can be refused
//! with 400 `field label not supported: <f>`, and [`FieldSelector::transform`] rewrites them
//! (upstream's field label conversion).

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

/// How a term compares a field with its value. `==` parses as [`FieldOperator::Equals`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldOperator {
    Equals,
    NotEquals,
}

/// One `field=value` or `field!=value` term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    pub field: String,
    pub operator: FieldOperator,
    /// The unescaped value.
    pub value: String,
}

impl FieldRequirement {
    fn matches(&self, got: &str) -> bool {
        match self.operator {
            FieldOperator::Equals => got == self.value,
            FieldOperator::NotEquals => got != self.value,
        }
    }
}

impl fmt::Display for FieldRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.operator {
            FieldOperator::Equals => "=",
            FieldOperator::NotEquals => "!=",
        };
        write!(f, "{}{op}{}", self.field, escape_value(&self.value))
    }
}

/// Why a field selector was refused. `Display` is upstream's exact message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldSelectorError {
    /// A term has no operator.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    Term { selector: String, term: String },
    /// A backslash followed by something other than `\`, `,` or `=` (or nothing).
    #[error("invalid field selector: invalid escape sequence: {0}")]
    InvalidEscape(String),
    /// An unescaped `,` or `=` in a value. Upstream prints the character as its code point
    /// number (`61` for `=`), and so do we.
    #[error("invalid field selector: unescaped character in value: {0}")]
    UnescapedRune(u32),
}

/// Escapes `\`, `,` and `=` in a literal value (upstream `EscapeValue`).
pub fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Reverses [`escape_value`] (upstream `UnescapeValue`).
pub fn unescape_value(s: &str) -> Result<String, FieldSelectorError> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(FieldSelectorError::InvalidEscape(format!("\\{c}")));
            }
            out.push(c);
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => return Err(FieldSelectorError::UnescapedRune(c as u32)),
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err(FieldSelectorError::InvalidEscape("\\".to_string()));
    }
    Ok(out)
}

/// Splits on commas not preceded by a backslash; escapes stay in the terms.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// Splits a term at the first operator; the left side takes no escapes.
fn split_term(term: &str) -> Option<(&str, FieldOperator, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, parsed) in [
            ("!=", FieldOperator::NotEquals),
            ("==", FieldOperator::Equals),
            ("=", FieldOperator::Equals),
        ] {
            if let Some(rhs) = rest.strip_prefix(op) {
                return Some((&term[..i], parsed, rhs));
            }
        }
    }
    None
}

/// A field selector: every term must hold. The empty selector matches everything; `Nothing`
/// matches no object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
    nothing: bool,
}

impl FieldSelector {
    pub fn everything() -> FieldSelector {
        FieldSelector::default()
    }

    pub fn nothing() -> FieldSelector {
        FieldSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// `field=value` (upstream `OneTermEqualSelector`).
    pub fn one_term_equal(field: &str, value: &str) -> FieldSelector {
        FieldSelector {
            requirements: vec![FieldRequirement {
                field: field.to_string(),
                operator: FieldOperator::Equals,
                value: value.to_string(),
            }],
            nothing: false,
        }
    }

    /// Parses the `fieldSelector` syntax (upstream `ParseSelector`). Empty terms are skipped;
    /// terms are kept in sorted order of their source text.
    pub fn parse(selector: &str) -> Result<FieldSelector, FieldSelectorError> {
        let mut parts = split_terms(selector);
        parts.sort_unstable();
        let mut requirements = Vec::new();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((lhs, operator, rhs)) = split_term(part) else {
                return Err(FieldSelectorError::Term {
                    selector: selector.to_string(),
                    term: part.to_string(),
                });
            };
            requirements.push(FieldRequirement {
                field: lhs.to_string(),
                operator,
                value: unescape_value(rhs)?,
            });
        }
        Ok(FieldSelector {
            requirements,
            nothing: false,
        })
    }

    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// The field names the selector uses, in order, possibly repeated.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.requirements.iter().map(|r| r.field.as_str())
    }

    /// True when the selector restricts nothing.
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    pub fn is_nothing(&self) -> bool {
        self.nothing
    }

    /// Matches fields looked up by `get`; an absent field reads as `""`, as upstream.
    pub fn matches(&self, get: &dyn Fn(&str) -> Option<String>) -> bool {
        !self.nothing
            && self
                .requirements
                .iter()
                .all(|r| r.matches(get(&r.field).as_deref().unwrap_or("")))
    }

    /// Matches a map of extracted field values (upstream `fields.Set`).
    pub fn matches_map(&self, fields: &BTreeMap<String, String>) -> bool {
        !self.nothing
            && self
                .requirements
                .iter()
                .all(|r| r.matches(fields.get(&r.field).map_or("", String::as_str)))
    }

    /// The value `field` must equal, from the first `=` term on it (upstream
    /// `RequiresExactMatch`): the `metadata.name=x` fast path of `kubectl wait`/`rollout status`.
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == field && r.operator == FieldOperator::Equals)
            .map(|r| r.value.as_str())
    }

    /// The operator and value of the first term on `field`, whatever its operator.
    pub fn requirement_for(&self, field: &str) -> Option<(FieldOperator, &str)> {
        self.requirements
            .iter()
            .find(|r| r.field == field)
            .map(|r| (r.operator, r.value.as_str()))
    }

    /// Rewrites every term's field and value (upstream `Transform`, used for field label
    /// conversion); a term mapped to an empty field and value is dropped. The first error
    /// stops the rewrite (e.g. `field label not supported: x`).
    pub fn transform<E>(
        &self,
        mut f: impl FnMut(&str, &str) -> Result<(String, String), E>,
    ) -> Result<FieldSelector, E> {
        if self.nothing {
            return Ok(self.clone());
        }
        let mut requirements = Vec::with_capacity(self.requirements.len());
        for r in &self.requirements {
            let (field, value) = f(&r.field, &r.value)?;
            if field.is_empty() && value.is_empty() {
                continue;
            }
            requirements.push(FieldRequirement {
                field,
                operator: r.operator,
                value,
            });
        }
        Ok(FieldSelector {
            requirements,
            nothing: false,
        })
    }
}

/// Terms joined by `,` with values escaped (upstream `String`).
impl fmt::Display for FieldSelector {
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

impl std::str::FromStr for FieldSelector {
    type Err = FieldSelectorError;
    fn from_str(s: &str) -> Result<FieldSelector, FieldSelectorError> {
        FieldSelector::parse(s)
    }
}

/// The fields every resource supports (upstream `DefaultClusterScopedAttr` and
/// `DefaultNamespaceScopedAttr`): `metadata.name`, plus `metadata.namespace` when namespaced.
pub fn object_meta_fields(object: &Value, namespaced: bool) -> BTreeMap<String, String> {
    let meta = object.get("metadata");
    let get = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let mut fields = BTreeMap::new();
    fields.insert("metadata.name".to_string(), get("name"));
    if namespaced {
        fields.insert("metadata.namespace".to_string(), get("namespace"));
    }
    fields
}

#[cfg(test)]
#[path = "fields_tests.rs"]
mod tests;
