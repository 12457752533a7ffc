//! One nesting limit for every JSON value the server accepts, stores and reads back.
//!
//! serde_json refuses to read nesting deeper than 128 levels. An object written deeper than
//! that — a JSON patch can nest a preserve-unknown-fields subtree one level per operation —
//! could be stored but never read again: GET and DELETE would fail, a create of its name
//! would conflict, and its namespace could never finish terminating. So writes are held to
//! [`MAX_DEPTH`], below the reader's limit, and request bodies to the same limit: what is
//! accepted is what can be read.

use serde_json::Value;

use crate::status::ApiError;

/// The deepest nesting of objects and arrays a request body or a stored object may have.
pub const MAX_DEPTH: usize = 100;

/// Whether `v` nests objects and arrays deeper than `max` levels (walked with an explicit
/// stack: the value checked may be arbitrarily deep).
pub fn exceeds(v: &Value, max: usize) -> bool {
    let mut stack: Vec<(&Value, usize)> = vec![(v, 0)];
    while let Some((v, d)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(m) => Box::new(m.values()),
            _ => continue,
        };
        if d + 1 > max {
            return true;
        }
        stack.extend(children.map(|c| (c, d + 1)));
    }
    false
}

/// A 400 when `v` is nested deeper than [`MAX_DEPTH`].
pub fn check(v: &Value) -> Result<(), ApiError> {
    if exceeds(v, MAX_DEPTH) {
        return Err(ApiError::bad_request(format!(
            "the object is nested deeper than the maximum of {MAX_DEPTH} levels"
        )));
    }
    Ok(())
}

/// Drops `v` without recursion (serde_json's `Drop` recurses: a value nested deeply enough
/// overflows the stack when it is freed).
pub fn drop_flat(v: Value) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(a) => stack.extend(a),
            Value::Object(m) => stack.extend(m.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(levels: usize) -> Value {
        let mut v = json!(1);
        for _ in 0..levels {
            let mut m = serde_json::Map::new();
            m.insert("a".into(), v);
            v = Value::Object(m);
        }
        v
    }

    #[test]
    fn the_limit_counts_levels_of_objects_and_arrays() {
        assert!(!exceeds(&json!(1), 0));
        assert!(exceeds(&json!([]), 0));
        assert!(!exceeds(&nested(MAX_DEPTH), MAX_DEPTH));
        assert!(exceeds(&nested(MAX_DEPTH + 1), MAX_DEPTH));
        assert!(check(&nested(MAX_DEPTH + 1)).is_err());
    }

    #[test]
    fn everything_within_the_limit_reads_back() {
        let v = nested(MAX_DEPTH);
        let bytes = serde_json::to_vec(&v).expect("encodes");
        let back: Value = serde_json::from_slice(&bytes).expect("serde_json reads it");
        assert_eq!(back, v);
    }

    #[test]
    fn a_very_deep_value_is_checked_and_dropped_without_overflowing() {
        let v = nested(200_000);
        assert!(exceeds(&v, MAX_DEPTH));
        drop_flat(v);
    }
}
