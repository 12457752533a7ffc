//! Accessors for the parts of an object the server owns or reads: `metadata`, `apiVersion`,
//! `kind`, as they sit in a JSON object. Objects stay `serde_json::Value` end to end; these
//! helpers keep the field names in one place.

use serde_json::{Map, Value};

/// `metadata` of an object (an empty object when absent or not an object).
pub fn metadata(obj: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    obj.get("metadata")
        .and_then(Value::as_object)
        .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

/// `metadata`, created if missing (replacing a non-object).
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let map = obj.as_object_mut().expect("an object");
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("an object")
}

fn str_field<'a>(obj: &'a Value, name: &str) -> &'a str {
    metadata(obj)
        .get(name)
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub fn name(obj: &Value) -> &str {
    str_field(obj, "name")
}

pub fn namespace(obj: &Value) -> &str {
    str_field(obj, "namespace")
}

pub fn generate_name(obj: &Value) -> &str {
    str_field(obj, "generateName")
}

pub fn uid(obj: &Value) -> &str {
    str_field(obj, "uid")
}

pub fn resource_version(obj: &Value) -> &str {
    str_field(obj, "resourceVersion")
}

pub fn deletion_timestamp(obj: &Value) -> Option<&str> {
    metadata(obj)
        .get("deletionTimestamp")
        .and_then(Value::as_str)
}

pub fn generation(obj: &Value) -> i64 {
    metadata(obj)
        .get("generation")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

pub fn api_version(obj: &Value) -> &str {
    obj.get("apiVersion").and_then(Value::as_str).unwrap_or("")
}

pub fn kind(obj: &Value) -> &str {
    obj.get("kind").and_then(Value::as_str).unwrap_or("")
}

/// A string map in metadata (`labels`, `annotations`), skipping non-string values.
pub fn string_map<'a>(obj: &'a Value, field: &str) -> impl Iterator<Item = (&'a str, &'a str)> {
    metadata(obj)
        .get(field)
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v)))
        })
}

pub fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    metadata(obj).get("labels")?.get(key)?.as_str()
}

pub fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    metadata(obj).get("annotations")?.get(key)?.as_str()
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    metadata(obj)
        .get("finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

pub fn set_finalizers(obj: &mut Value, finalizers: Vec<String>) {
    let meta = metadata_mut(obj);
    if finalizers.is_empty() {
        meta.remove("finalizers");
    } else {
        meta.insert("finalizers".into(), Value::from(finalizers));
    }
}

pub fn owner_references(obj: &Value) -> &[Value] {
    metadata(obj)
        .get("ownerReferences")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

pub fn set(obj: &mut Value, field: &str, value: impl Into<Value>) {
    metadata_mut(obj).insert(field.into(), value.into());
}

pub fn remove(obj: &mut Value, field: &str) -> Option<Value> {
    metadata_mut(obj).remove(field)
}

/// Splits `apiVersion` into group and version (`v1` → ("", "v1")).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_accessors_tolerate_missing_and_odd_fields() {
        let obj = json!({"metadata": {"name": "a", "labels": {"x": "1", "y": 2}}});
        assert_eq!(name(&obj), "a");
        assert_eq!(namespace(&obj), "");
        assert_eq!(
            string_map(&obj, "labels").collect::<Vec<_>>(),
            vec![("x", "1")]
        );
        let mut odd = json!("not an object");
        set(&mut odd, "name", "b");
        assert_eq!(name(&odd), "b");
    }
}
