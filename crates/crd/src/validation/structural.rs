//! Whether a schema is *structural* (upstream `ValidateStructural`): every specified node has
//! a type (except under `x-kubernetes-int-or-string` or `x-kubernetes-preserve-unknown-fields`),
//! value validations (`allOf`, `anyOf`, `oneOf`, `not`) add no types, defaults, descriptions or
//! extensions, root metadata constrains only `name` and `generateName`, embedded resources
//! are objects, and no `additionalProperties` at the root. Errors are sorted by message, as
//! upstream sorts them.

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Map, Value, json};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

fn s<'a>(m: &'a Map<String, Value>, k: &str) -> &'a str {
    m.get(k).and_then(Value::as_str).unwrap_or_default()
}

fn b(m: &Map<String, Value>, k: &str) -> bool {
    m.get(k).and_then(Value::as_bool).unwrap_or(false)
}

fn props(m: &Map<String, Value>) -> Option<&Map<String, Value>> {
    m.get("properties")
        .and_then(Value::as_object)
        .filter(|p| !p.is_empty())
}

/// Checks that `schema` (at `path`) is structural.
pub fn validate(path: &Path, schema: &Value) -> ErrorList {
    let mut errs = Vec::new();
    if let Value::Object(m) = schema {
        invariants(m, Level::Root, path, &mut errs);
        completeness(m, path, &mut errs);
    }
    errs.sort_by_key(FieldError::message);
    ErrorList::from(errs)
}

fn is_int_or_string_any_of(any_of: Option<&Value>) -> bool {
    any_of == Some(&json!([{"type": "integer"}, {"type": "string"}]))
}

fn invariants(m: &Map<String, Value>, lvl: Level, path: &Path, errs: &mut Vec<FieldError>) {
    let ty = s(m, "type");
    if ty == "array" && !m.contains_key("items") {
        errs.push(FieldError::required(
            path.child("items"),
            "must be specified",
        ));
    }
    if let Some(Value::Object(items)) = m.get("items") {
        invariants(items, Level::Item, &path.child("items"), errs);
    }
    if let Some(p) = props(m) {
        for (k, v) in p {
            if let Value::Object(child) = v {
                invariants(child, Level::Field, &path.child("properties").key(k), errs);
            }
        }
    }
    if let Some(ap) = m.get("additionalProperties") {
        if lvl == Level::Root {
            errs.push(FieldError::forbidden(
                path.child("additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let Value::Object(child) = ap {
            invariants(
                child,
                Level::Field,
                &path.child("additionalProperties"),
                errs,
            );
        }
    }
    let int_or_string = b(m, "x-kubernetes-int-or-string");
    let preserve = b(m, "x-kubernetes-preserve-unknown-fields");
    let embedded = b(m, "x-kubernetes-embedded-resource");
    if int_or_string && preserve {
        errs.push(FieldError::invalid(
            path.child("x-kubernetes-preserve-unknown-fields"),
            json!(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        errs.push(FieldError::invalid(
            path.child("x-kubernetes-embedded-resource"),
            json!(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let skip_any_of = is_int_or_string_any_of(m.get("anyOf"));
    let skip_first_all_of_any_of = m
        .get("allOf")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .is_some_and(|first| is_int_or_string_any_of(first.get("anyOf")));
    value_validation(m, skip_any_of, skip_first_all_of_any_of, lvl, path, errs);

    let check_metadata = lvl == Level::Root || embedded;
    if embedded && ty != "object" {
        let msg = "must be object if x-kubernetes-embedded-resource is true";
        errs.push(if ty.is_empty() {
            FieldError::required(path.child("type"), msg)
        } else {
            FieldError::invalid(path.child("type"), json!(ty), msg)
        });
    } else if ty.is_empty() && !int_or_string && !preserve {
        let msg = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(path.child("type"), msg));
    }
    if embedded && m.contains_key("additionalProperties") {
        errs.push(FieldError::forbidden(
            path.child("additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !ty.is_empty() && ty != "object" {
        errs.push(FieldError::invalid(
            path.child("type"),
            json!(ty),
            "must be object at the root",
        ));
    }
    if let Some(p) = props(m) {
        for key in ["kind", "apiVersion"] {
            if check_metadata && let Some(Value::Object(f)) = p.get(key) {
                let t = s(f, "type");
                if t != "string" {
                    errs.push(FieldError::invalid(
                        path.child("properties").key(key).child("type"),
                        json!(t),
                        "must be string",
                    ));
                }
            }
        }
        if let Some(Value::Object(meta)) = p.get("metadata") {
            metadata(
                meta,
                check_metadata,
                lvl,
                &path.child("properties").key("metadata"),
                errs,
            );
        }
    }
    if embedded && !preserve && props(m).is_none() {
        errs.push(FieldError::required(
            path.child("properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// Root metadata may constrain only `name` and `generateName`.
fn metadata(
    m: &Map<String, Value>,
    check: bool,
    lvl: Level,
    path: &Path,
    errs: &mut Vec<FieldError>,
) {
    let ty = s(m, "type");
    if check && ty != "object" {
        errs.push(FieldError::invalid(
            path.child("type"),
            json!(ty),
            "must be object",
        ));
    }
    if lvl != Level::Root {
        return;
    }
    let only_names = props(m).is_none_or(|p| p.keys().all(|k| k == "name" || k == "generateName"));
    let rest = m.iter().any(|(k, v)| match k.as_str() {
        "type" | "default" => false,
        "properties" => !only_names,
        _ => !is_zero(v),
    });
    if rest {
        errs.push(FieldError::forbidden(
            path.clone(),
            "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ));
    }
}

/// Whether a JSON value is Go's zero value for its field (false, "", empty list or map).
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(_) => false,
    }
}

fn value_validation(
    m: &Map<String, Value>,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    lvl: Level,
    path: &Path,
    errs: &mut Vec<FieldError>,
) {
    let list = |k: &str| {
        m.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    if !skip_any_of {
        for (i, v) in list("anyOf").iter().enumerate() {
            nested(v, false, false, lvl, &path.child("anyOf").index(i), errs);
        }
    }
    for (i, v) in list("allOf").iter().enumerate() {
        nested(
            v,
            skip_first_all_of_any_of && i == 0,
            false,
            lvl,
            &path.child("allOf").index(i),
            errs,
        );
    }
    for (i, v) in list("oneOf").iter().enumerate() {
        nested(v, false, false, lvl, &path.child("oneOf").index(i), errs);
    }
    if let Some(not) = m.get("not") {
        nested(not, false, false, lvl, &path.child("not"), errs);
    }
    if let Some(p) = m.get("pattern").and_then(Value::as_str)
        && let Err(e) = regex::Regex::new(p)
    {
        errs.push(FieldError::invalid(
            path.child("pattern"),
            json!(p),
            format!("must be a valid regular expression, but isn't: {e}"),
        ));
    }
}

/// A member of `allOf`/`anyOf`/`oneOf`/`not`: value validations only.
fn nested(
    v: &Value,
    skip_any_of: bool,
    skip_all_of_any_of: bool,
    lvl: Level,
    path: &Path,
    errs: &mut Vec<FieldError>,
) {
    let Value::Object(m) = v else { return };
    value_validation(m, skip_any_of, skip_all_of_any_of, lvl, path, errs);
    if let Some(items) = m.get("items") {
        nested(items, false, false, lvl, &path.child("items"), errs);
    }
    if let Some(p) = m.get("properties").and_then(Value::as_object) {
        for (k, f) in p {
            nested(
                f,
                false,
                false,
                Level::Field,
                &path.child("properties").key(k),
                errs,
            );
        }
    }
    let forbid = |errs: &mut Vec<FieldError>, key: &str, msg: &str| {
        errs.push(FieldError::forbidden(path.child(key), msg));
    };
    if !s(m, "type").is_empty() {
        forbid(errs, "type", "must be empty to be structural");
    }
    if m.contains_key("additionalProperties") {
        forbid(
            errs,
            "additionalProperties",
            "must be undefined to be structural",
        );
    }
    if m.get("default").is_some_and(|d| !d.is_null()) {
        forbid(errs, "default", "must be undefined to be structural");
    }
    if !s(m, "title").is_empty() {
        forbid(errs, "title", "must be empty to be structural");
    }
    if !s(m, "description").is_empty() {
        forbid(errs, "description", "must be empty to be structural");
    }
    if b(m, "nullable") {
        forbid(errs, "nullable", "must be false to be structural");
    }
    for key in [
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
    ] {
        if b(m, key) {
            forbid(errs, key, "must be false to be structural");
        }
    }
    if m.get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
    {
        forbid(
            errs,
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        );
    }
    for key in ["x-kubernetes-list-type", "x-kubernetes-map-type"] {
        if m.get(key).is_some_and(|v| !v.is_null()) {
            forbid(errs, key, "must be undefined to be structural");
        }
    }
    if m.get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
    {
        forbid(
            errs,
            "x-kubernetes-validations",
            "must be empty to be structural",
        );
    }
    if m.get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| p.contains_key("metadata"))
    {
        errs.push(FieldError::forbidden(
            path.child("properties").key("metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// Value validations at the root must only name fields the structure specifies.
fn completeness(m: &Map<String, Value>, path: &Path, errs: &mut Vec<FieldError>) {
    junctor_completeness(m, Some(m), path, path, errs);
}

fn junctor_completeness(
    v: &Map<String, Value>,
    s: Option<&Map<String, Value>>,
    s_path: &Path,
    v_path: &Path,
    errs: &mut Vec<FieldError>,
) {
    if let Some(Value::Object(not)) = v.get("not") {
        nested_completeness(not, s, s_path, &v_path.child("not"), errs);
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for (i, item) in v
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Value::Object(item) = item {
                nested_completeness(item, s, s_path, &v_path.child(key).index(i), errs);
            }
        }
    }
}

fn nested_completeness(
    v: &Map<String, Value>,
    s: Option<&Map<String, Value>>,
    s_path: &Path,
    v_path: &Path,
    errs: &mut Vec<FieldError>,
) {
    let Some(s) = s else {
        errs.push(FieldError::required(
            s_path.clone(),
            format!("because it is defined in {v_path}"),
        ));
        return;
    };
    junctor_completeness(v, Some(s), s_path, v_path, errs);
    if let Some(Value::Object(items)) = v.get("items") {
        let s_items = s.get("items").and_then(Value::as_object);
        nested_completeness(
            items,
            s_items,
            &s_path.child("items"),
            &v_path.child("items"),
            errs,
        );
    }
    if let Some(vp) = v.get("properties").and_then(Value::as_object) {
        let sp = s.get("properties").and_then(Value::as_object);
        for (k, vf) in vp {
            let Value::Object(vf) = vf else { continue };
            match sp.and_then(|sp| sp.get(k)).and_then(Value::as_object) {
                None => errs.push(FieldError::required(
                    s_path.child("properties").key(k),
                    format!(
                        "because it is defined in {}",
                        v_path.child("properties").key(k)
                    ),
                )),
                Some(sf) => nested_completeness(
                    vf,
                    Some(sf),
                    &s_path.child("properties").key(k),
                    &v_path.child("properties").key(k),
                    errs,
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(schema: Value) -> Vec<String> {
        validate(&Path::new("spec.validation.openAPIV3Schema"), &schema)
            .iter()
            .map(FieldError::message)
            .collect()
    }

    #[test]
    fn a_field_without_a_type_is_not_structural() {
        assert_eq!(
            msgs(
                json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}})
            ),
            vec![
                "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"
            ]
        );
        assert_eq!(
            msgs(json!({"properties": {}})),
            vec![
                "spec.validation.openAPIV3Schema.type: Required value: must not be empty at the root"
            ]
        );
    }

    #[test]
    fn int_or_string_and_preserve_unknown_need_no_type() {
        assert!(msgs(json!({"type": "object", "properties": {
            "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "raw": {"x-kubernetes-preserve-unknown-fields": true}}})).is_empty());
    }

    #[test]
    fn junctors_may_not_add_types_or_extensions() {
        assert_eq!(
            msgs(
                json!({"type": "object", "properties": {"a": {"type": "string",
                "anyOf": [{"type": "string", "description": "d"}]}}})
            ),
            vec![
                "spec.validation.openAPIV3Schema.properties[a].anyOf[0].description: Forbidden: must be empty to be structural",
                "spec.validation.openAPIV3Schema.properties[a].anyOf[0].type: Forbidden: must be empty to be structural",
            ]
        );
    }

    #[test]
    fn root_metadata_may_only_constrain_names() {
        assert!(
            msgs(
                json!({"type": "object", "properties": {"metadata": {"type": "object",
            "properties": {"name": {"type": "string", "maxLength": 10}}}}})
            )
            .is_empty()
        );
        assert_eq!(
            msgs(
                json!({"type": "object", "properties": {"metadata": {"type": "object",
                "properties": {"labels": {"type": "object"}}}}})
            ),
            vec![
                "spec.validation.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
            ]
        );
    }

    #[test]
    fn embedded_resources_must_be_objects_and_root_may_not_have_additional_properties() {
        assert_eq!(
            msgs(
                json!({"type": "object", "additionalProperties": {"type": "string"},
                        "properties": {"t": {"type": "string", "x-kubernetes-embedded-resource": true}}})
            ),
            vec![
                "spec.validation.openAPIV3Schema.additionalProperties: Forbidden: must not be used at the root",
                "spec.validation.openAPIV3Schema.properties[t].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
                "spec.validation.openAPIV3Schema.properties[t].type: Invalid value: \"string\": must be object if x-kubernetes-embedded-resource is true",
            ]
        );
    }

    #[test]
    fn junctor_properties_must_exist_in_the_structure() {
        assert_eq!(
            msgs(
                json!({"type": "object", "properties": {"a": {"type": "string"}},
                        "anyOf": [{"required": ["b"], "properties": {"b": {}}}]})
            ),
            vec![
                "spec.validation.openAPIV3Schema.properties[b]: Required value: because it is defined in spec.validation.openAPIV3Schema.anyOf[0].properties[b]"
            ]
        );
    }
}
