//! Field errors: what validation reports, one per offending field, with its path.
//!
//! Mirrors upstream `field.Error` and `field.ErrorList`, including the message wording clients
//! and users see (`spec.replicas: Invalid value: -1: must be greater than or equal to 0`).
//! Validation collects every error; it never stops at the first.

use serde_json::Value;

/// Upstream `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    NotFound,
    Required,
    Duplicate,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    Internal,
    TypeInvalid,
}

impl ErrorKind {
    /// The text upstream prints (`Required value`, `Invalid value`, ...).
    pub fn text(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "Not found",
            ErrorKind::Required => "Required value",
            ErrorKind::Duplicate => "Duplicate value",
            ErrorKind::Invalid => "Invalid value",
            ErrorKind::NotSupported => "Unsupported value",
            ErrorKind::Forbidden => "Forbidden",
            ErrorKind::TooLong => "Too long",
            ErrorKind::TooMany => "Too many",
            ErrorKind::Internal => "Internal error",
            ErrorKind::TypeInvalid => "Invalid value",
        }
    }

    /// The `details.causes[].reason` of a 422.
    pub fn cause_reason(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "FieldValueNotFound",
            ErrorKind::Required => "FieldValueRequired",
            ErrorKind::Duplicate => "FieldValueDuplicate",
            ErrorKind::Invalid => "FieldValueInvalid",
            ErrorKind::NotSupported => "FieldValueNotSupported",
            ErrorKind::Forbidden => "FieldValueForbidden",
            ErrorKind::TooLong => "FieldValueTooLong",
            ErrorKind::TooMany => "FieldValueTooMany",
            ErrorKind::Internal => "InternalError",
            ErrorKind::TypeInvalid => "FieldValueTypeInvalid",
        }
    }
}

/// One field error.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub kind: ErrorKind,
    /// The path, as upstream prints it: `spec.template.spec.containers[0].image`,
    /// `metadata.labels[app]`.
    pub field: String,
    /// The offending value; `None` when upstream omits it (Required, Forbidden, ...).
    pub value: Option<Value>,
    pub detail: String,
}

impl FieldError {
    fn new(
        kind: ErrorKind,
        field: impl Into<String>,
        value: Option<Value>,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            kind,
            field: field.into(),
            value,
            detail: detail.into(),
        }
    }

    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Required, field, None, detail)
    }

    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, field, Some(value), detail)
    }

    pub fn type_invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::TypeInvalid, field, Some(value), detail)
    }

    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Forbidden, field, None, detail)
    }

    pub fn duplicate(field: impl Into<String>, value: Value) -> Self {
        Self::new(ErrorKind::Duplicate, field, Some(value), "")
    }

    pub fn not_found(field: impl Into<String>, value: Value) -> Self {
        Self::new(ErrorKind::NotFound, field, Some(value), "")
    }

    /// `Unsupported value: "x": supported values: "a", "b"`.
    pub fn not_supported<S: AsRef<str>>(
        field: impl Into<String>,
        value: Value,
        supported: &[S],
    ) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported
                .iter()
                .map(|s| crate::gofmt::quote(s.as_ref()))
                .collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(ErrorKind::NotSupported, field, Some(value), detail)
    }

    /// `Too long: may not be more than N bytes` (the value is omitted, as upstream does).
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        Self::new(
            ErrorKind::TooLong,
            field,
            None,
            format!("may not be more than {max} bytes"),
        )
    }

    /// `Too many: N: must have at most M items`.
    pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Self {
        Self::new(
            ErrorKind::TooMany,
            field,
            Some(Value::from(actual)),
            format!("must have at most {max} items"),
        )
    }

    pub fn internal(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, field, None, detail)
    }

    /// The message without the field (upstream `ErrorBody`), used in `details.causes`.
    pub fn body(&self) -> String {
        let mut s = match (&self.value, self.kind) {
            (
                _,
                ErrorKind::Required
                | ErrorKind::Forbidden
                | ErrorKind::TooLong
                | ErrorKind::Internal,
            )
            | (None, _) => self.kind.text().to_string(),
            (Some(v), _) => format!("{}: {}", self.kind.text(), format_value(v)),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// `<field>: <body>`, upstream `Error()`.
    pub fn message(&self) -> String {
        format!("{}: {}", self.field, self.body())
    }
}

/// Formats a bad value the way upstream's `%v`/`%q` printing looks for JSON values.
fn format_value(v: &Value) -> String {
    match v {
        Value::String(s) => crate::gofmt::quote(s),
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(_) | Value::Object(_) => {
            if v.is_object() {
                "\"object\"".into()
            } else {
                serde_json::to_string(v).unwrap_or_default()
            }
        }
    }
}

/// An ordered list of field errors.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ErrorList(Vec<FieldError>);

impl ErrorList {
    pub fn new() -> Self {
        ErrorList(Vec::new())
    }

    pub fn push(&mut self, e: FieldError) {
        self.0.push(e);
    }

    pub fn extend(&mut self, other: ErrorList) {
        self.0.extend(other.0);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, FieldError> {
        self.0.iter()
    }

    pub fn into_vec(self) -> Vec<FieldError> {
        self.0
    }

    /// `msg` for one error, `[msg1, msg2]` for several (upstream's aggregate), duplicates removed.
    pub fn aggregate_message(&self) -> String {
        let mut msgs: Vec<String> = Vec::new();
        for e in &self.0 {
            let m = e.message();
            if !msgs.contains(&m) {
                msgs.push(m);
            }
        }
        match msgs.len() {
            1 => msgs.remove(0),
            _ => format!("[{}]", msgs.join(", ")),
        }
    }
}

impl From<Vec<FieldError>> for ErrorList {
    fn from(v: Vec<FieldError>) -> Self {
        ErrorList(v)
    }
}

impl IntoIterator for ErrorList {
    type Item = FieldError;
    type IntoIter = std::vec::IntoIter<FieldError>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a ErrorList {
    type Item = &'a FieldError;
    type IntoIter = std::slice::Iter<'a, FieldError>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// Builds field paths the way upstream prints them: `a.b[0].c`, `metadata.labels[app]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Path(String);

impl Path {
    pub fn new(root: &str) -> Self {
        Path(root.to_string())
    }

    pub fn child(&self, name: &str) -> Path {
        if self.0.is_empty() {
            Path(name.to_string())
        } else {
            Path(format!("{}.{name}", self.0))
        }
    }

    pub fn index(&self, i: usize) -> Path {
        Path(format!("{}[{i}]", self.0))
    }

    pub fn key(&self, k: &str) -> Path {
        Path(format!("{}[{k}]", self.0))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Path {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Path> for String {
    fn from(p: Path) -> String {
        p.0
    }
}

impl From<&Path> for String {
    fn from(p: &Path) -> String {
        p.0.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_follow_upstream_wording() {
        assert_eq!(
            FieldError::invalid(
                "metadata.name",
                json!("Bad_Name"),
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters"
            )
            .message(),
            "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters"
        );
        assert_eq!(
            FieldError::required("spec.containers", "").message(),
            "spec.containers: Required value"
        );
        assert_eq!(
            FieldError::not_supported("spec.type", json!("Foo"), &["ClusterIP", "NodePort"])
                .message(),
            "spec.type: Unsupported value: \"Foo\": supported values: \"ClusterIP\", \"NodePort\""
        );
        assert_eq!(
            FieldError::duplicate("spec.containers[1].name", json!("a")).message(),
            "spec.containers[1].name: Duplicate value: \"a\""
        );
        assert_eq!(
            FieldError::too_long("metadata.name", 63).message(),
            "metadata.name: Too long: may not be more than 63 bytes"
        );
        assert_eq!(
            FieldError::forbidden("spec.selector", "field is immutable").message(),
            "spec.selector: Forbidden: field is immutable"
        );
    }

    #[test]
    fn paths_print_indexes_and_keys() {
        let p = Path::new("spec")
            .child("containers")
            .index(0)
            .child("image");
        assert_eq!(p.as_str(), "spec.containers[0].image");
        assert_eq!(
            Path::new("metadata").child("labels").key("app").as_str(),
            "metadata.labels[app]"
        );
    }
}
