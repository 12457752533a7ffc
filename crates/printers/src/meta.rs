//! Object metadata as the printers read it: name, age, deletion, labels and annotations.
//!
//! `translateTimestampSince` is the one rule for every age-like cell: an unset timestamp prints
//! `<unknown>`, anything else the human duration since it.

use serde_json::{Map, Value};

use crate::time::{Instant, human_duration, parse_rfc3339};
use crate::value::{at, map, str_or_empty};

/// `metadata.name`, `""` when absent.
pub(crate) fn name(obj: &Value) -> &str {
    str_or_empty(obj, &["metadata", "name"])
}

/// Whether `metadata.deletionTimestamp` is set (the object is being deleted).
pub(crate) fn deleting(obj: &Value) -> bool {
    matches!(
        at(obj, &["metadata", "deletionTimestamp"]),
        Some(Value::String(_))
    )
}

/// `metadata.labels`, if any.
pub(crate) fn labels(obj: &Value) -> Option<&Map<String, Value>> {
    map(obj, &["metadata", "labels"])
}

/// One annotation's value, if present.
pub(crate) fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    map(obj, &["metadata", "annotations"])?.get(key)?.as_str()
}

/// A timestamp field parsed, `None` when absent or unparsable (Go's zero time).
pub(crate) fn timestamp(obj: &Value, path: &[&str]) -> Option<Instant> {
    at(obj, path)?.as_str().and_then(parse_rfc3339)
}

/// `translateTimestampSince`: the age of a timestamp, `<unknown>` when it is unset.
pub(crate) fn since(t: Option<Instant>, now: Instant) -> String {
    match t {
        Some(t) => human_duration(now.since(t)),
        None => "<unknown>".to_string(),
    }
}

/// The object's age (from `metadata.creationTimestamp`).
pub(crate) fn age(obj: &Value, now: Instant) -> String {
    since(timestamp(obj, &["metadata", "creationTimestamp"]), now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn age_is_unknown_without_a_creation_timestamp() {
        let now = parse_rfc3339("2024-01-01T00:10:00Z").unwrap();
        let created = json!({"metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"}});
        assert_eq!(age(&created, now), "10m");
        assert_eq!(age(&json!({"metadata": {}}), now), "<unknown>");
        assert_eq!(
            age(&json!({"metadata": {"creationTimestamp": null}}), now),
            "<unknown>"
        );
    }

    #[test]
    fn deletion_is_detected_from_the_timestamp() {
        assert!(deleting(
            &json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}})
        ));
        assert!(!deleting(&json!({"metadata": {"deletionTimestamp": null}})));
    }
}
