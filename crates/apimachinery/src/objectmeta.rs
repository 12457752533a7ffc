//! `metadata` validation shared by every resource on create and update, and `generateName`.
//!
//! Mirrors upstream `k8s.io/apimachinery/pkg/api/validation` (`ValidateObjectMeta`,
//! `ValidateObjectMetaUpdate` and helpers) as of Kubernetes 1.34, over the JSON the server
//! stores: name and generateName against the resource's [`NameRule`], namespace presence and
//! format, generation, labels, annotations (keys and the 256 KiB total), ownerReferences (at
//! most one controller), finalizers and managedFields; on update, the immutable fields. Every
//! error is collected with its path; a field of the wrong JSON type is reported, never trusted.

use serde_json::{Map, Value};

use crate::field::{ErrorList, FieldError, Path};
use crate::labels::validate_labels;
use crate::validation::{NameRule, is_dns1123_label, is_qualified_name};

/// Upstream `FieldImmutableErrorMsg`.
pub const FIELD_IMMUTABLE: &str = "field is immutable";
/// Upstream `TotalAnnotationSizeLimitB`: keys plus values, in bytes.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;
/// Upstream `FieldManagerMaxLength`.
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;
/// Upstream `MaxSubresourceNameLength`.
pub const MAX_SUBRESOURCE_NAME_LENGTH: usize = 256;
/// The characters of a generated name suffix (upstream `utilrand` alphabet: no vowels, no
/// look-alikes).
pub const NAME_SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// Length of a generated name suffix.
pub const NAME_SUFFIX_LENGTH: usize = 5;
/// Longest `generateName` prefix kept (63 minus the suffix), upstream `MaxGeneratedNameLength`.
pub const MAX_GENERATED_NAME_PREFIX: usize = 63 - NAME_SUFFIX_LENGTH;

fn type_error(path: &Path, v: &Value, want: &str) -> FieldError {
    FieldError::type_invalid(path, v.clone(), format!("must be of type {want}"))
}

/// A string member of `obj`: absent or null read as `""`; another type is reported.
fn str_member<'a>(obj: &'a Value, key: &str, path: &Path, errs: &mut ErrorList) -> &'a str {
    match obj.get(key) {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s,
        Some(other) => {
            errs.push(type_error(&path.child(key), other, "string"));
            ""
        }
    }
}

fn int_member(obj: &Value, key: &str, path: &Path, errs: &mut ErrorList) -> i64 {
    match obj.get(key) {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_i64().unwrap_or_else(|| {
            errs.push(type_error(&path.child(key), v, "integer"));
            0
        }),
    }
}

fn object_member<'a>(
    obj: &'a Value,
    key: &str,
    path: &Path,
    errs: &mut ErrorList,
) -> Option<&'a Map<String, Value>> {
    match obj.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m),
        Some(other) => {
            errs.push(type_error(&path.child(key), other, "object"));
            None
        }
    }
}

fn array_member<'a>(obj: &'a Value, key: &str, path: &Path, errs: &mut ErrorList) -> &'a [Value] {
    match obj.get(key) {
        None | Some(Value::Null) => &[],
        Some(Value::Array(a)) => a,
        Some(other) => {
            errs.push(type_error(&path.child(key), other, "array"));
            &[]
        }
    }
}

/// Validates `metadata` on create (upstream `ValidateObjectMeta`); `path` is usually
/// `metadata`. Name generation must already have happened: a `generateName` without a `name`
/// still reports `name or generateName is required`, as upstream.
pub fn validate_object_meta(
    meta: &Value,
    namespaced: bool,
    name_rule: NameRule,
    path: &Path,
) -> ErrorList {
    let mut errs = ErrorList::new();
    if !meta.is_object() {
        errs.push(type_error(path, meta, "object"));
        return errs;
    }
    let generate_name = str_member(meta, "generateName", path, &mut errs);
    if !generate_name.is_empty() {
        for msg in name_rule.check(generate_name, true) {
            errs.push(FieldError::invalid(
                path.child("generateName"),
                Value::from(generate_name),
                msg,
            ));
        }
    }
    let name = str_member(meta, "name", path, &mut errs);
    if name.is_empty() {
        errs.push(FieldError::required(
            path.child("name"),
            "name or generateName is required",
        ));
    } else {
        for msg in name_rule.check(name, false) {
            errs.push(FieldError::invalid(
                path.child("name"),
                Value::from(name),
                msg,
            ));
        }
    }
    let namespace = str_member(meta, "namespace", path, &mut errs);
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required(path.child("namespace"), ""));
        } else {
            for msg in is_dns1123_label(namespace) {
                errs.push(FieldError::invalid(
                    path.child("namespace"),
                    Value::from(namespace),
                    msg,
                ));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            path.child("namespace"),
            "not allowed on this type",
        ));
    }
    let generation = int_member(meta, "generation", path, &mut errs);
    if generation < 0 {
        errs.push(FieldError::invalid(
            path.child("generation"),
            Value::from(generation),
            "must be greater than or equal to 0",
        ));
    }
    errs.extend(validate_common(meta, path, true));
    errs
}

/// Labels, annotations, ownerReferences, managedFields (and finalizers on create).
fn validate_common(meta: &Value, path: &Path, finalizers: bool) -> ErrorList {
    let mut errs = ErrorList::new();
    if let Some(labels) = object_member(meta, "labels", path, &mut errs) {
        errs.extend(validate_labels(labels, &path.child("labels")));
    }
    if let Some(annotations) = object_member(meta, "annotations", path, &mut errs) {
        errs.extend(validate_annotations(
            annotations,
            &path.child("annotations"),
        ));
    }
    let refs = array_member(meta, "ownerReferences", path, &mut errs);
    errs.extend(validate_owner_references(
        refs,
        &path.child("ownerReferences"),
    ));
    if finalizers {
        let list = array_member(meta, "finalizers", path, &mut errs);
        errs.extend(validate_finalizers(list, &path.child("finalizers")));
    }
    let managed = array_member(meta, "managedFields", path, &mut errs);
    errs.extend(validate_managed_fields(
        managed,
        &path.child("managedFields"),
    ));
    errs
}

/// Upstream `ValidateAnnotations`: keys are qualified names once lower-cased; keys plus values
/// may total at most 256 KiB. Errors are reported at `path` itself, keys in sorted order.
pub fn validate_annotations(annotations: &Map<String, Value>, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let mut keys: Vec<&String> = annotations.keys().collect();
    keys.sort();
    let mut total = 0usize;
    for k in keys {
        for msg in is_qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(path, Value::from(k.as_str()), msg));
        }
        total += k.len();
        match &annotations[k] {
            Value::String(v) => total += v.len(),
            other => errs.push(type_error(&path.key(k), other, "string")),
        }
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errs
}

/// The version part of an apiVersion (upstream `ParseGroupVersion`), `""` when it has none or
/// does not parse.
fn api_version_version(api_version: &str) -> &str {
    match api_version.matches('/').count() {
        0 => api_version,
        1 => api_version.split_once('/').map_or("", |(_, v)| v),
        _ => "",
    }
}

/// Upstream `ValidateOwnerReferences` (1.34: errors at `ownerReferences.<field>`, without an
/// index). At most one reference may be the controller.
pub fn validate_owner_references(refs: &[Value], path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let mut first_controller: Option<String> = None;
    for r in refs {
        if !r.is_object() {
            errs.push(type_error(path, r, "object"));
            continue;
        }
        let api_version = str_member(r, "apiVersion", path, &mut errs);
        let kind = str_member(r, "kind", path, &mut errs);
        let name = str_member(r, "name", path, &mut errs);
        let uid = str_member(r, "uid", path, &mut errs);
        let version = api_version_version(api_version);
        if version.is_empty() {
            errs.push(FieldError::invalid(
                path.child("apiVersion"),
                Value::from(api_version),
                "version must not be empty",
            ));
        }
        for (field, value) in [("kind", kind), ("name", name), ("uid", uid)] {
            if value.is_empty() {
                errs.push(FieldError::invalid(
                    path.child(field),
                    Value::from(value),
                    "must not be empty",
                ));
            }
        }
        if api_version == "v1" && kind == "Event" {
            errs.push(FieldError::invalid(
                path,
                r.clone(),
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            let current = format!("{kind}/{name}");
            match &first_controller {
                Some(first) => errs.push(FieldError::invalid(
                    path,
                    Value::from(refs.to_vec()),
                    format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                    ),
                )),
                None => first_controller = Some(current),
            }
        }
    }
    errs
}

/// Upstream `ValidateFinalizers`: qualified names, and not both `orphan` and
/// `foregroundDeletion`.
pub fn validate_finalizers(finalizers: &[Value], path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let (mut orphan, mut foreground) = (false, false);
    for (i, f) in finalizers.iter().enumerate() {
        let Some(f) = f.as_str() else {
            errs.push(type_error(&path.index(i), f, "string"));
            continue;
        };
        for msg in is_qualified_name(f) {
            errs.push(FieldError::invalid(path, Value::from(f), msg));
        }
        orphan |= f == "orphan";
        foreground |= f == "foregroundDeletion";
    }
    if orphan && foreground {
        errs.push(FieldError::invalid(
            path,
            Value::from(finalizers.to_vec()),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    errs
}

/// Go's `unicode.IsPrint`, closely enough: no control, format or separator characters other
/// than the ASCII space.
fn is_print(c: char) -> bool {
    c == ' '
        || !(c.is_control()
            || c.is_whitespace()
            || matches!(c, '\u{AD}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}'))
}

/// Upstream `ValidateManagedFields`: operation `Apply` or `Update`, fieldsType `FieldsV1`,
/// a printable manager of at most 128 bytes, a subresource of at most 256 bytes.
pub fn validate_managed_fields(entries: &[Value], path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    for (i, e) in entries.iter().enumerate() {
        let p = path.index(i);
        if !e.is_object() {
            errs.push(type_error(&p, e, "object"));
            continue;
        }
        let operation = str_member(e, "operation", &p, &mut errs);
        if operation != "Apply" && operation != "Update" {
            errs.push(FieldError::invalid(
                p.child("operation"),
                Value::from(operation),
                "must be `Apply` or `Update`",
            ));
        }
        let fields_type = str_member(e, "fieldsType", &p, &mut errs);
        if !fields_type.is_empty() && fields_type != "FieldsV1" {
            errs.push(FieldError::invalid(
                p.child("fieldsType"),
                Value::from(fields_type),
                "must be `FieldsV1`",
            ));
        }
        let manager = str_member(e, "manager", &p, &mut errs);
        if manager.len() > FIELD_MANAGER_MAX_LENGTH {
            errs.push(FieldError::too_long(
                p.child("manager"),
                FIELD_MANAGER_MAX_LENGTH,
            ));
        }
        for (at, c) in manager.char_indices().filter(|(_, c)| !is_print(*c)) {
            errs.push(FieldError::invalid(
                p.child("manager"),
                Value::from(manager),
                format!("invalid character U+{:04X} (at position {at})", c as u32),
            ));
        }
        let subresource = str_member(e, "subresource", &p, &mut errs);
        if subresource.len() > MAX_SUBRESOURCE_NAME_LENGTH {
            errs.push(FieldError::too_long(
                p.child("subresource"),
                MAX_SUBRESOURCE_NAME_LENGTH,
            ));
        }
    }
    errs
}

/// A metadata member for immutability checks: strings default to `""`, the rest to null.
fn member_or(meta: &Value, key: &str, default: Value) -> Value {
    match meta.get(key) {
        None | Some(Value::Null) => default,
        Some(v) => v.clone(),
    }
}

/// Go's `%#v` of a `[]string`: `[]string{"a", "b"}`.
fn go_string_slice(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// Validates `metadata` on update (upstream `ValidateObjectMetaUpdate`): a resourceVersion is
/// required, generation may not go down, name, namespace, uid, creationTimestamp,
/// deletionTimestamp and deletionGracePeriodSeconds are immutable, no finalizer may be added
/// once deletion started, and labels, annotations, ownerReferences and managedFields are
/// re-validated.
pub fn validate_object_meta_update(new: &Value, old: &Value, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    if !new.is_object() {
        errs.push(type_error(path, new, "object"));
        return errs;
    }
    let mut ignored = ErrorList::new();
    if !member_or(old, "deletionTimestamp", Value::Null).is_null() {
        let strings = |v: &Value, errs: &mut ErrorList| -> Vec<String> {
            array_member(v, "finalizers", path, errs)
                .iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        };
        let old_list = strings(old, &mut ignored);
        let mut extra: Vec<String> = strings(new, &mut errs)
            .into_iter()
            .filter(|f| !old_list.contains(f))
            .collect();
        extra.sort();
        extra.dedup();
        if !extra.is_empty() {
            let list: Vec<&str> = extra.iter().map(String::as_str).collect();
            errs.push(FieldError::forbidden(
                path.child("finalizers"),
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers {}",
                    go_string_slice(&list)
                ),
            ));
        }
    }
    if str_member(new, "resourceVersion", path, &mut errs).is_empty() {
        errs.push(FieldError::invalid(
            path.child("resourceVersion"),
            Value::from(""),
            "must be specified for an update",
        ));
    }
    let new_gen = int_member(new, "generation", path, &mut errs);
    if new_gen < int_member(old, "generation", path, &mut ignored) {
        errs.push(FieldError::invalid(
            path.child("generation"),
            Value::from(new_gen),
            "must not be decremented",
        ));
    }
    for (field, default) in [
        ("name", Value::from("")),
        ("namespace", Value::from("")),
        ("uid", Value::from("")),
        ("creationTimestamp", Value::Null),
        ("deletionTimestamp", Value::Null),
        ("deletionGracePeriodSeconds", Value::Null),
    ] {
        let now = member_or(new, field, default.clone());
        if now != member_or(old, field, default) {
            errs.push(FieldError::invalid(path.child(field), now, FIELD_IMMUTABLE));
        }
    }
    errs.extend(validate_common(new, path, false));
    errs
}

/// Five random characters from [`NAME_SUFFIX_ALPHABET`], drawn from `random_byte` without
/// modulo bias (bytes past the last whole multiple of 27 are redrawn).
pub fn generate_name_suffix(mut random_byte: impl FnMut() -> u8) -> String {
    let n = NAME_SUFFIX_ALPHABET.len();
    let limit = (256 / n * n) as u8;
    let mut out = String::with_capacity(NAME_SUFFIX_LENGTH);
    while out.len() < NAME_SUFFIX_LENGTH {
        let b = random_byte();
        if b < limit {
            out.push(char::from(NAME_SUFFIX_ALPHABET[usize::from(b) % n]));
        }
    }
    out
}

/// Upstream `SimpleNameGenerator.GenerateName`: the prefix cut to 58 bytes, plus a suffix.
pub fn generate_name(generate_name: &str, random_byte: impl FnMut() -> u8) -> String {
    let mut cut = generate_name.len().min(MAX_GENERATED_NAME_PREFIX);
    while !generate_name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}{}",
        &generate_name[..cut],
        generate_name_suffix(random_byte)
    )
}

#[cfg(test)]
#[path = "objectmeta_tests.rs"]
mod tests;
