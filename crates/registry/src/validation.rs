//! Generic object validation the store applies to every resource: `metadata` of new objects
//! and what an update may not change.

use apimachinery::field::{ErrorList, FieldError};
use apimachinery::meta;
use rand::Rng;
use serde_json::{Value, json};

use crate::resource::ResourceDef;
use crate::strategy::NameRule;

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label)
}

/// Validates `metadata` of an object.
pub fn object_meta(res: &ResourceDef, obj: &Value) -> ErrorList {
    let mut errs = ErrorList::new();
    let name = meta::name(obj);
    if name.is_empty() {
        errs.push(FieldError::required("metadata.name", "name or generateName is required"));
    } else {
        match res.strategy.name_rule() {
            NameRule::Subdomain if !is_subdomain(name) => {
                errs.push(FieldError::invalid("metadata.name", json!(name), SUBDOMAIN_MSG));
            }
            NameRule::Label if !is_label(name) => {
                if name.len() > 63 {
                    errs.push(FieldError::invalid("metadata.name", json!(name), "must be no more than 63 characters"));
                } else {
                    errs.push(FieldError::invalid("metadata.name", json!(name), LABEL_MSG));
                }
            }
            NameRule::PathSegment if name == "." || name == ".." || name.contains('/') || name.contains('%') => {
                errs.push(FieldError::invalid("metadata.name", json!(name), "may not contain '/' or '%' and may not be '.' or '..'"));
            }
            _ => {}
        }
    }
    if res.namespaced && !is_label(meta::namespace(obj)) {
        errs.push(FieldError::invalid("metadata.namespace", json!(meta::namespace(obj)), LABEL_MSG));
    }
    errs
}

/// What an update may not change in `metadata`.
pub fn object_meta_update(new: &Value, old: &Value) -> ErrorList {
    let mut errs = ErrorList::new();
    for f in ["name", "namespace"] {
        let (n, o) = (meta::metadata(new).get(f), meta::metadata(old).get(f));
        if n != o {
            errs.push(FieldError::invalid(format!("metadata.{f}"), n.cloned().unwrap_or(Value::Null), "field is immutable"));
        }
    }
    errs
}

/// Five characters from upstream's generateName alphabet (no vowels, no confusable digits).
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect()
}
