//! Checks of the per-version parts of a CRD, wherever the internal form puts them: the
//! schema (root restrictions, structural rules, defaults, node checks), subresources,
//! printer columns, selectable fields and deprecation warnings.

use apimachinery::field::{ErrorKind, ErrorList, FieldError, Path};
use serde_json::{Value, json};

use super::schema::{self, Options};
use super::{defaults, structural};
use crate::fieldpath;
use crate::schema::Node;

/// Upstream `MaxSelectableFields`.
pub const MAX_SELECTABLE_FIELDS: usize = 8;

const COLUMN_TYPES: &str = "boolean,date,integer,number,string";
const COLUMN_FORMATS: &[&str] = &[
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
];

/// Root keywords allowed when the status subresource is enabled, in upstream's field order
/// (`JSONSchemaProps` fields, JSON names).
const ROOT_FIELDS: &[(&str, bool)] = &[
    ("id", false),
    ("$schema", false),
    ("$ref", false),
    ("description", true),
    ("type", true),
    ("format", true),
    ("title", true),
    ("default", false),
    ("maximum", true),
    ("exclusiveMaximum", true),
    ("minimum", true),
    ("exclusiveMinimum", true),
    ("maxLength", true),
    ("minLength", true),
    ("pattern", true),
    ("maxItems", true),
    ("minItems", true),
    ("uniqueItems", true),
    ("multipleOf", true),
    ("enum", false),
    ("maxProperties", false),
    ("minProperties", false),
    ("required", true),
    ("items", true),
    ("allOf", false),
    ("oneOf", false),
    ("anyOf", false),
    ("not", false),
    ("properties", true),
    ("additionalProperties", false),
    ("patternProperties", false),
    ("dependencies", false),
    ("additionalItems", false),
    ("definitions", false),
    ("externalDocs", true),
    ("example", true),
    ("nullable", false),
    ("x-kubernetes-preserve-unknown-fields", true),
    ("x-kubernetes-embedded-resource", false),
    ("x-kubernetes-int-or-string", false),
    ("x-kubernetes-list-map-keys", false),
    ("x-kubernetes-list-type", false),
    ("x-kubernetes-map-type", false),
    ("x-kubernetes-validations", true),
];

const ALLOWED_AT_ROOT: &str = "[Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations]";

/// Whether a keyword's value is Go's zero value (booleans and strings are values upstream;
/// everything else is a pointer, slice or map, non-zero once present).
fn is_zero(key: &str, v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(false) => matches!(
            key,
            "exclusiveMaximum"
                | "exclusiveMinimum"
                | "uniqueItems"
                | "nullable"
                | "x-kubernetes-embedded-resource"
                | "x-kubernetes-int-or-string"
        ),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// Upstream `validateCustomResourceDefinitionValidation`: `validation` is a
/// `{openAPIV3Schema: ...}` object at `path` (`spec.validation` or
/// `spec.versions[i].schema`).
pub fn validation(
    validation: Option<&Value>,
    status_enabled: bool,
    opts: Options,
    require_pruned: bool,
    path: &Path,
) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(schema) = validation.and_then(|v| v.get("openAPIV3Schema")) else {
        return errs;
    };
    let Value::Object(m) = schema else {
        return errs;
    };
    let at = path.child("openAPIV3Schema");
    if status_enabled {
        for (key, allowed) in ROOT_FIELDS {
            let Some(v) = m.get(*key).filter(|v| !is_zero(key, v)) else {
                continue;
            };
            if *key == "type" {
                if v != "object" {
                    errs.push(FieldError::invalid(
                        path.child("openAPIV3Schema.type"),
                        v.clone(),
                        r#"only "object" is allowed as the type at the root of the schema if the status subresource is enabled"#,
                    ));
                    break;
                }
                continue;
            }
            if !allowed {
                errs.push(FieldError::invalid(
                    at.clone(),
                    schema.clone(),
                    format!("only {ALLOWED_AT_ROOT} fields are allowed at the root of the schema if the status subresource is enabled"),
                ));
                break;
            }
        }
    }
    if m.get("nullable") == Some(&json!(true)) {
        errs.push(FieldError::forbidden(
            path.child("openAPIV3Schema.nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let mut cel = false;
    let structural = structural::validate(&at, schema);
    if !structural.is_empty() {
        errs.extend(structural);
    } else {
        let defaults = defaults::validate(&at, &Node::compile(schema), require_pruned);
        if !defaults.is_empty() {
            errs.extend(defaults);
        } else {
            cel = true;
        }
    }
    errs.extend(schema::validate(schema, &at, Options { cel, ..opts }));
    errs
}

fn simple_json_path(s: &str, path: &Path) -> Option<FieldError> {
    if s.is_empty() {
        Some(FieldError::invalid(
            path.clone(),
            json!(s),
            "must not be empty",
        ))
    } else if !s.starts_with('.') {
        Some(FieldError::invalid(
            path.clone(),
            json!(s),
            "must be a simple json path starting with .",
        ))
    } else {
        None
    }
}

/// Upstream `ValidateCustomResourceDefinitionSubresources`.
pub fn subresources(sub: Option<&Value>, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(scale) = sub.and_then(|s| s.get("scale")).filter(|s| !s.is_null()) else {
        return errs;
    };
    let field = |k: &str| scale.get(k).and_then(Value::as_str).unwrap_or_default();
    for (key, prefix, under) in [
        (
            "specReplicasPath",
            ".spec.",
            "should be a json path under .spec",
        ),
        (
            "statusReplicasPath",
            ".status.",
            "should be a json path under .status",
        ),
    ] {
        let at = path.child(&format!("scale.{key}"));
        let v = field(key);
        if v.is_empty() {
            errs.push(FieldError::required(at, ""));
        } else if let Some(e) = simple_json_path(v, &at) {
            errs.push(e);
        } else if !v.starts_with(prefix) {
            errs.push(FieldError::invalid(at, json!(v), under));
        }
    }
    let selector = field("labelSelectorPath");
    if !selector.is_empty() {
        let at = path.child("scale.labelSelectorPath");
        if let Some(e) = simple_json_path(selector, &at) {
            errs.push(e);
        } else if !selector.starts_with(".spec.") && !selector.starts_with(".status.") {
            errs.push(FieldError::invalid(
                at,
                json!(selector),
                "should be a json path under either .spec or .status",
            ));
        }
    }
    errs
}

/// Upstream `ValidateCustomResourceColumnDefinition`, plus a check that the JSONPath parses
/// as the Table printer will parse it (upstream accepts a path the printer then drops).
pub fn column(col: &Value, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let f = |k: &str| col.get(k).and_then(Value::as_str).unwrap_or_default();
    if f("name").is_empty() {
        errs.push(FieldError::required(path.child("name"), ""));
    }
    let ty = f("type");
    let must = format!("must be one of {COLUMN_TYPES}");
    if ty.is_empty() {
        errs.push(FieldError::required(path.child("type"), must));
    } else if !COLUMN_TYPES.split(',').any(|t| t == ty) {
        errs.push(FieldError::invalid(path.child("type"), json!(ty), must));
    }
    let format = f("format");
    if !format.is_empty() && !COLUMN_FORMATS.contains(&format) {
        errs.push(FieldError::invalid(
            path.child("format"),
            json!(format),
            format!("must be one of {}", COLUMN_FORMATS.join(",")),
        ));
    }
    let jp = f("jsonPath");
    let at = path.child("JSONPath");
    if jp.is_empty() {
        errs.push(FieldError::required(at, ""));
    } else if let Some(e) = simple_json_path(jp, &at) {
        errs.push(e);
    } else if let Err(e) = printers::jsonpath::JsonPath::parse(jp) {
        errs.push(FieldError::invalid(
            at,
            json!(jp),
            format!("must be a valid JSONPath: {e}"),
        ));
    }
    errs
}

/// Upstream `ValidateCustomResourceSelectableFields` (`schema` is the version's schema).
pub fn selectable_fields(
    fields: &[Value],
    schema: &Node,
    path: &Path,
    allow_too_many: bool,
) -> ErrorList {
    let mut errs = ErrorList::new();
    let mut unique: Vec<String> = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let at = path.index(i).child("jsonPath");
        let jp = f
            .get("jsonPath")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if jp.is_empty() {
            errs.push(FieldError::required(at, ""));
            continue;
        }
        let (p, node) = match fieldpath::resolve(jp, schema, false) {
            Ok(found) => found,
            Err(e) => {
                errs.push(FieldError::invalid(
                    at,
                    json!(jp),
                    format!("is an invalid path: {e}"),
                ));
                continue;
            }
        };
        if p.as_str() == "metadata"
            || p.as_str().starts_with("metadata.")
            || p.as_str().starts_with("metadata[")
        {
            errs.push(FieldError::invalid(
                at.clone(),
                json!(jp),
                "must not point to fields in metadata",
            ));
        }
        if !matches!(node.type_name.as_str(), "string" | "boolean" | "integer") {
            errs.push(FieldError::invalid(
                at.clone(),
                json!(jp),
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        if unique.contains(&p.as_str().to_string()) {
            errs.push(FieldError::duplicate(at, json!(jp)));
        } else {
            unique.push(p.as_str().to_string());
        }
    }
    if unique.len() > MAX_SELECTABLE_FIELDS && !allow_too_many {
        errs.push(FieldError {
            kind: ErrorKind::TooMany,
            field: path.to_string(),
            value: Some(json!(unique.len())),
            detail: format!("must have at most {MAX_SELECTABLE_FIELDS} items"),
        });
    }
    errs
}

/// Upstream `validateDeprecationWarning`.
pub fn deprecation_warning(version: &Value, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(warning) = version.get("deprecationWarning").and_then(Value::as_str) else {
        return errs;
    };
    let deprecated = version
        .get("deprecated")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let at = path.child("deprecationWarning");
    let mut push = |msg: String| errs.push(FieldError::invalid(at.clone(), json!(warning), msg));
    if !deprecated {
        push("can only be set for deprecated versions".into());
        return errs;
    }
    if warning.len() > 256 {
        push("must be <= 256 characters long".into());
    }
    if warning.is_empty() {
        push("must not be an empty string".into());
    }
    for (i, c) in warning.char_indices() {
        if c.is_control() {
            push(format!(
                "must only contain printable UTF-8 characters; non-printable character found at index {i}"
            ));
            break;
        }
    }
    errs
}
