//! kube-openapi's validation failures and how upstream turns them into field errors
//! (`kubeOpenAPIResultToFieldErrors`).
//!
//! A failure carries go-openapi's message (`spec.replicas in body must be of type integer:
//! "string"`) and a code; the code decides the field error: `Required`, `NotSupported` for
//! enums, `TooLong` for maxLength, `TooMany` for maxItems/maxProperties, `TypeInvalid` for type
//! and format, `Invalid` with the message for everything else. Failures that are not
//! go-openapi validation errors (the `anyOf`/`oneOf`/`allOf`/`not` summaries and range checks)
//! are reported at the validator's root path, which is `<nil>` for a whole custom resource —
//! upstream prints exactly that.

use apimachinery::field::{ErrorKind, ErrorList, FieldError};
use serde_json::Value;

use crate::gofmt;

/// What failed, as go-openapi's error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    InvalidType,
    Required,
    TooLong,
    TooShort,
    Pattern,
    Enum,
    MultipleOf,
    Max,
    Min,
    Unique,
    MaxItems,
    MinItems,
    TooFewProperties,
    TooManyProperties,
    Unallowed,
    MultipleOfMustBePositive,
    /// Not a `*errors.Validation` upstream: a plain error, reported at the root.
    Plain,
}

/// One validation failure.
#[derive(Debug, Clone)]
pub struct Failure {
    pub code: Code,
    /// go-openapi's `Name`: the dotted path of the value (`spec.replicas`, `.spec` for a
    /// required field at the root).
    pub name: String,
    pub value: Option<Value>,
    /// The limit, for TooLong/TooMany.
    pub valid: Option<i64>,
    /// Enum values, for NotSupported.
    pub values: Vec<Value>,
    pub message: String,
}

impl Failure {
    pub fn new(code: Code, name: &str, value: Option<Value>, message: String) -> Failure {
        Failure {
            code,
            name: name.to_string(),
            value,
            valid: None,
            values: Vec::new(),
            message,
        }
    }
}

/// go-openapi message: `<name> in body <rest>`.
pub fn in_body(name: &str, rest: &str) -> String {
    format!("{name} in body {rest}")
}

/// `InvalidType`: `<name> in body must be of type <type>: "<found>"`.
pub fn invalid_type(name: &str, type_name: &str, found: &str) -> Failure {
    Failure::new(
        Code::InvalidType,
        name,
        Some(Value::from(found)),
        in_body(
            name,
            &format!("must be of type {type_name}: {}", gofmt::quote(found)),
        ),
    )
}

fn path_for(root: Option<&str>, name: &str) -> String {
    let name = name.strip_prefix('.').unwrap_or(name);
    match (root, name) {
        (None, "") => "<nil>".into(),
        (Some(r), "") => r.to_string(),
        (None, n) => n.to_string(),
        (Some(r), n) => format!("{r}.{n}"),
    }
}

fn root_path(root: Option<&str>) -> String {
    root.unwrap_or("<nil>").to_string()
}

/// Turns failures into field errors under `root` (`None` for a whole object, printed as
/// `<nil>` where upstream has no path), in order, without duplicates.
pub fn to_field_errors(root: Option<&str>, failures: Vec<Failure>) -> ErrorList {
    let mut out = ErrorList::new();
    let mut seen: Vec<(String, String)> = Vec::new();
    for f in failures {
        let key = (f.name.clone(), f.message.clone());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let path = if f.name.is_empty() || f.name == "." {
            root_path(root)
        } else {
            path_for(root, &f.name)
        };
        let value = f
            .value
            .as_ref()
            .map(gofmt::bad_value)
            .unwrap_or_else(|| Value::from(""));
        let e = match f.code {
            Code::Required => FieldError::required(path, ""),
            Code::Enum => {
                let values: Vec<String> = f
                    .values
                    .iter()
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        other => serde_json::to_string(other).unwrap_or_default(),
                    })
                    .collect();
                FieldError::not_supported(path, f.value.clone().unwrap_or(Value::Null), &values)
            }
            Code::TooLong => too_long(path, f.valid.unwrap_or(-1)),
            Code::MaxItems | Code::TooManyProperties => too_many(
                path,
                f.value.as_ref().and_then(Value::as_i64).unwrap_or(-1),
                f.valid.unwrap_or(-1),
            ),
            Code::InvalidType => FieldError::type_invalid(path, value, f.message),
            Code::Plain => FieldError::invalid(root_path(root), Value::from(""), f.message),
            _ => FieldError::invalid(path, value, f.message),
        };
        out.push(e);
    }
    out
}

/// Upstream `field.TooLong(path, "", max)`: the value is omitted.
pub fn too_long(path: String, max: i64) -> FieldError {
    let detail = if max >= 0 {
        format!(
            "may not be more than {max} {}",
            if max == 1 { "byte" } else { "bytes" }
        )
    } else {
        "value is too long".into()
    };
    FieldError {
        kind: ErrorKind::TooLong,
        field: path,
        value: None,
        detail,
    }
}

/// Upstream `field.TooMany(path, actual, max)`.
pub fn too_many(path: String, actual: i64, max: i64) -> FieldError {
    let detail = if max >= 0 {
        format!(
            "must have at most {max} {}",
            if max == 1 { "item" } else { "items" }
        )
    } else {
        "has too many items".into()
    };
    FieldError {
        kind: ErrorKind::TooMany,
        field: path,
        value: (actual >= 0).then(|| Value::from(actual)),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_type_failure_becomes_a_type_invalid_field_error() {
        let errs = to_field_errors(
            None,
            vec![invalid_type("spec.replicas", "integer", "string")],
        );
        assert_eq!(
            errs.aggregate_message(),
            "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
        );
    }

    #[test]
    fn required_paths_drop_the_leading_dot_and_plain_errors_go_to_the_root() {
        let errs = to_field_errors(
            None,
            vec![
                Failure::new(
                    Code::Required,
                    ".spec",
                    None,
                    ".spec in body is required".into(),
                ),
                Failure::new(
                    Code::Plain,
                    "spec.x",
                    None,
                    "\"spec.x\" must validate at least one schema (anyOf)".into(),
                ),
            ],
        );
        let msgs: Vec<String> = errs.iter().map(|e| e.message()).collect();
        assert_eq!(
            msgs,
            vec![
                "spec: Required value".to_string(),
                "<nil>: Invalid value: \"\": \"spec.x\" must validate at least one schema (anyOf)"
                    .to_string(),
            ]
        );
    }

    #[test]
    fn enum_failures_list_the_supported_values() {
        let mut f = Failure::new(Code::Enum, "spec.size", Some(json!("XL")), String::new());
        f.values = vec![json!("S"), json!("M"), json!(3)];
        let errs = to_field_errors(Some("status"), vec![f]);
        assert_eq!(
            errs.aggregate_message(),
            "status.spec.size: Unsupported value: \"XL\": supported values: \"S\", \"M\", \"3\""
        );
    }
}
