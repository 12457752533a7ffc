//! The parts of a CRD outside its versions: `metadata.name` (`<plural>.<group>`), the names
//! (spec and accepted), `status.storedVersions`, the API approval annotation of protected
//! groups, and `spec.preserveUnknownFields`.

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::objectmeta::validate_object_meta;
use apimachinery::validation::{NameRule, is_dns1035_label};
use serde_json::{Value, json};

use crate::spec::Crd;

pub(super) fn metadata(crd: &Value, c: Crd<'_>) -> ErrorList {
    let meta = crd.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let errs = validate_object_meta(&meta, false, NameRule::DnsSubdomain, &Path::new("metadata"));
    // Upstream's name function adds its message after the DNS ones for metadata.name.
    let extra = name_matches(c);
    let mut out: Vec<FieldError> = errs.into_vec();
    let at = out
        .iter()
        .rposition(|e| e.field == "metadata.name" || e.field == "metadata.generateName")
        .map(|i| i + 1)
        .unwrap_or(0);
    for (i, e) in extra.into_iter().enumerate() {
        out.insert(at + i, e);
    }
    ErrorList::from(out)
}

/// `metadata.name` must be `<plural>.<group>`.
pub(super) fn name_matches(c: Crd<'_>) -> ErrorList {
    let mut errs = ErrorList::new();
    let name = c.name();
    if !name.is_empty() && name != format!("{}.{}", c.plural(), c.group()) {
        errs.push(FieldError::invalid(
            "metadata.name",
            json!(name),
            r#"must be spec.names.plural+"."+spec.group"#,
        ));
    }
    errs
}

/// Status names, stored versions, API approval and preserveUnknownFields.
pub(super) fn rest(c: Crd<'_>, old: Option<Crd<'_>>) -> ErrorList {
    let mut errs = names(
        c.status().get("acceptedNames").unwrap_or(&Value::Null),
        &Path::new("status.acceptedNames"),
    );
    errs.extend(stored_versions(c));
    errs.extend(api_approval(c, old));
    let old_preserves = old.is_some_and(|o| o.preserve_unknown_fields());
    if !old_preserves && c.preserve_unknown_fields() {
        errs.push(FieldError::invalid(
            "spec.preserveUnknownFields",
            json!(true),
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ));
    }
    errs
}

pub(super) fn dns1035_join(v: &str) -> Option<String> {
    let e = is_dns1035_label(v);
    (!e.is_empty()).then(|| e.join(","))
}

/// Upstream `ValidateCustomResourceDefinitionNames` (spec names or accepted names).
pub(super) fn names(n: &Value, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let f = |k: &str| n.get(k).and_then(Value::as_str).unwrap_or_default();
    for key in ["plural", "singular"] {
        if !f(key).is_empty()
            && let Some(e) = dns1035_join(f(key))
        {
            errs.push(FieldError::invalid(path.child(key), json!(f(key)), e));
        }
    }
    for key in ["kind", "listKind"] {
        if !f(key).is_empty()
            && let Some(e) = dns1035_join(&f(key).to_lowercase())
        {
            errs.push(FieldError::invalid(
                path.child(key),
                json!(f(key)),
                format!("may have mixed case, but should otherwise match: {e}"),
            ));
        }
    }
    for (i, s) in Crd::string_list(n.get("shortNames").unwrap_or(&Value::Null))
        .iter()
        .enumerate()
    {
        if let Some(e) = dns1035_join(s) {
            errs.push(FieldError::invalid(
                path.child("shortNames").index(i),
                json!(s),
                e,
            ));
        }
    }
    if !f("kind").is_empty() && f("kind") == f("listKind") {
        errs.push(FieldError::invalid(
            path.child("listKind"),
            json!(f("listKind")),
            "kind and listKind may not be the same",
        ));
    }
    for (i, s) in Crd::string_list(n.get("categories").unwrap_or(&Value::Null))
        .iter()
        .enumerate()
    {
        if let Some(e) = dns1035_join(s) {
            errs.push(FieldError::invalid(
                path.child("categories").index(i),
                json!(s),
                e,
            ));
        }
    }
    errs
}

/// Upstream `ValidateCustomResourceDefinitionStoredVersions`.
fn stored_versions(c: Crd<'_>) -> ErrorList {
    let mut errs = ErrorList::new();
    let path = Path::new("status.storedVersions");
    let stored = Crd::string_list(c.status().get("storedVersions").unwrap_or(&Value::Null));
    if stored.is_empty() {
        errs.push(FieldError::invalid(
            path,
            json!(stored),
            "must have at least one stored version",
        ));
        return errs;
    }
    let names: Vec<&str> = c
        .versions()
        .iter()
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .collect();
    for v in c.versions() {
        let name = v.get("name").and_then(Value::as_str).unwrap_or_default();
        if v.get("storage") == Some(&json!(true)) && !stored.iter().any(|s| s == name) {
            errs.push(FieldError::invalid(
                path.clone(),
                json!(stored),
                format!("must have the storage version {name}"),
            ));
        }
    }
    for (i, s) in stored.iter().enumerate() {
        if !names.contains(&s.as_str()) {
            errs.push(FieldError::invalid(
                path.index(i),
                json!(s),
                format!("missing from spec.versions; {s} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {s} and removes {s} from status.storedVersions"),
            ));
        }
    }
    errs
}

const APPROVAL: &str = "api-approved.kubernetes.io";

/// The API approval state of `k8s.io`/`kubernetes.io` groups: (state, reason).
fn approval(c: Crd<'_>) -> (&'static str, String) {
    let v =
        c.0.pointer("/metadata/annotations")
            .and_then(|a| a.get(APPROVAL))
            .and_then(Value::as_str)
            .unwrap_or_default();
    if v.is_empty() {
        return (
            "missing",
            format!(
                "protected groups must have approval annotation {APPROVAL:?}, see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        );
    }
    if v.starts_with("unapproved") {
        return ("bypassed", format!("not approved: {v:?}"));
    }
    let url_ok = v.split_once("://").is_some_and(|(scheme, rest)| {
        !scheme.is_empty() && !rest.is_empty() && !rest.starts_with('/')
    });
    if url_ok {
        return ("approved", format!("approved in {v}"));
    }
    (
        "invalid",
        format!(
            "protected groups must have approval annotation {APPROVAL:?} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
        ),
    )
}

fn api_approval(c: Crd<'_>, old: Option<Crd<'_>>) -> ErrorList {
    let mut errs = ErrorList::new();
    let g = c.group();
    let protected = g == "k8s.io"
        || g.ends_with(".k8s.io")
        || g == "kubernetes.io"
        || g.ends_with(".kubernetes.io");
    if !protected {
        return errs;
    }
    let (state, reason) = approval(c);
    if old.is_some_and(|o| approval(o).0 == state) {
        return errs;
    }
    let path = Path::new("metadata.annotations").key(APPROVAL);
    let value =
        c.0.pointer("/metadata/annotations")
            .and_then(|a| a.get(APPROVAL))
            .cloned()
            .unwrap_or(json!(""));
    match state {
        "missing" => errs.push(FieldError::required(path, reason)),
        "invalid" => errs.push(FieldError::invalid(path, value, reason)),
        _ => {}
    }
    errs
}
