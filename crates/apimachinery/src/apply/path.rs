//! Field paths: how server-side apply names a field, a list-map item or a set item.
//!
//! A path is a list of [`PathElement`]s. Two renderings matter to clients: the `FieldsV1` key
//! of one element (`f:image`, `k:{"name":"c"}`, `v:"x"`, `i:0`) stored in managedFields, and
//! the printed path of a conflict (`.spec.containers[name="c"].image`). Both follow
//! structured-merge-diff exactly, including its element order (field < key < value < index).

use std::cmp::Ordering;
use std::fmt;

use serde_json::{Map, Value};

use super::value::{compare_values, to_path_string};
use crate::gofmt::{json_string as write_go_string, marshal as go_json};

/// A JSON value with upstream's total order, used inside path elements.
#[derive(Debug, Clone)]
pub struct OrdValue(pub Value);

impl PartialEq for OrdValue {
    fn eq(&self, other: &Self) -> bool {
        compare_values(&self.0, &other.0) == Ordering::Equal
    }
}
impl Eq for OrdValue {}
impl PartialOrd for OrdValue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrdValue {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_values(&self.0, &other.0)
    }
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathElement {
    /// A struct field or map key: `f:<name>`.
    Field(String),
    /// A list-map item by its key fields, sorted by name: `k:{"name":"c"}`.
    Key(Vec<(String, OrdValue)>),
    /// A set item: `v:<json>`.
    Value(OrdValue),
    /// A list index (not produced by this implementation, but parsed): `i:<n>`.
    Index(i64),
}

/// Why a `FieldsV1` key could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("key must be 2 characters long: {0}")]
    TooShort(String),
    #[error("missing colon: {0}")]
    MissingColon(String),
    #[error("unknown path element type: {0}")]
    UnknownType(String),
    #[error("invalid value in {0}")]
    BadValue(String),
}

impl PathElement {
    /// A key element from (name, value) pairs; sorts them by name as upstream does.
    pub fn key(mut fields: Vec<(String, Value)>) -> Self {
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        PathElement::Key(fields.into_iter().map(|(k, v)| (k, OrdValue(v))).collect())
    }

    /// The `FieldsV1` key of this element.
    pub fn to_fields_key(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let mut out = String::from("k:{");
                for (i, (name, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_go_string(&mut out, name);
                    out.push(':');
                    out.push_str(&go_json(&v.0));
                }
                out.push('}');
                out
            }
            PathElement::Value(v) => format!("v:{}", go_json(&v.0)),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Reads a `FieldsV1` key.
    pub fn from_fields_key(s: &str) -> Result<Self, PathError> {
        if s.len() < 2 {
            return Err(PathError::TooShort(s.into()));
        }
        let (kind, rest) = s.split_at(1);
        let Some(rest) = rest.strip_prefix(':') else {
            return Err(PathError::MissingColon(s.into()));
        };
        match kind {
            "f" => Ok(PathElement::Field(rest.into())),
            "v" => serde_json::from_str(rest)
                .map(|v| PathElement::Value(OrdValue(v)))
                .map_err(|_| PathError::BadValue(s.into())),
            "k" => {
                let m: Map<String, Value> =
                    serde_json::from_str(rest).map_err(|_| PathError::BadValue(s.into()))?;
                Ok(PathElement::key(m.into_iter().collect()))
            }
            "i" => rest
                .parse()
                .map(PathElement::Index)
                .map_err(|_| PathError::BadValue(s.into())),
            _ => Err(PathError::UnknownType(s.into())),
        }
    }
}

impl fmt::Display for PathElement {
    /// Upstream `PathElement.String()`: `.name`, `[k=v,k2=v2]`, `[=v]`, `[i]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("{k}={}", to_path_string(&v.0)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", to_path_string(&v.0)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A full path from the object root.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct FieldPath(pub Vec<PathElement>);

impl FieldPath {
    /// A path of plain field names (`["spec", "replicas"]`).
    pub fn fields(names: &[&str]) -> Self {
        FieldPath(
            names
                .iter()
                .map(|n| PathElement::Field(n.to_string()))
                .collect(),
        )
    }
}

impl fmt::Display for FieldPath {
    /// Upstream `Path.String()`: `.spec.containers[name="c"].image`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for pe in &self.0 {
            write!(f, "{pe}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_elements_sort_their_fields_and_print_as_upstream() {
        let pe = PathElement::key(vec![
            ("protocol".into(), json!("TCP")),
            ("containerPort".into(), json!(80)),
        ]);
        assert_eq!(
            pe.to_fields_key(),
            r#"k:{"containerPort":80,"protocol":"TCP"}"#
        );
        assert_eq!(pe.to_string(), r#"[containerPort=80,protocol="TCP"]"#);
        assert_eq!(PathElement::from_fields_key(&pe.to_fields_key()), Ok(pe));
    }

    #[test]
    fn paths_print_with_dots_and_brackets() {
        let p = FieldPath(vec![
            PathElement::Field("spec".into()),
            PathElement::Field("containers".into()),
            PathElement::key(vec![("name".into(), json!("c"))]),
            PathElement::Field("image".into()),
        ]);
        assert_eq!(p.to_string(), r#".spec.containers[name="c"].image"#);
        let set_item = PathElement::Value(OrdValue(json!("x")));
        assert_eq!(set_item.to_string(), r#"[="x"]"#);
        assert_eq!(set_item.to_fields_key(), r#"v:"x""#);
    }

    #[test]
    fn malformed_fields_keys_are_errors() {
        assert!(PathElement::from_fields_key("x").is_err());
        assert!(PathElement::from_fields_key("fx").is_err());
        assert!(PathElement::from_fields_key("z:a").is_err());
        assert!(PathElement::from_fields_key("k:{").is_err());
    }

    #[test]
    fn elements_order_fields_before_keys_before_values() {
        let f = PathElement::Field("z".into());
        let k = PathElement::key(vec![("a".into(), json!(1))]);
        let v = PathElement::Value(OrdValue(json!(1)));
        assert!(f < k && k < v);
        assert!(PathElement::Value(OrdValue(json!(2))) < PathElement::Value(OrdValue(json!("a"))));
    }
}
